"""``kernel("attention")`` of the wgpu backend: fused scaled dot-product attention, forward and
backward, without the ``(L, S)`` score matrix in memory (flash-attention style; the contract
is ``vtl.backends.kernels.AttentionKernel``).

Three WGSL kernels (``wgsl/nn/attention_*.wgsl``), each with workgroups of 128 threads laid
out as 16 row groups of 8; every thread keeps a 4 x 4 (or 4 x 8) block of scores and its share
of the output rows in vec4 registers (the per-thread code is unrolled here, :func:`_blocks`,
so nothing is held in indexed arrays), and the operands pass through workgroup memory in
depth chunks of 16:

* forward (one dispatch): a workgroup per 64 query rows walks the keys in tiles of 64; per
  tile the scores, the row maxima (exchanged through workgroup memory), the online softmax
  rescale, ``P`` into workgroup memory and ``P v`` in chunks of 16 value rows. It writes the
  rows' log-sum-exp (float32) for the backward.
* backward (two dispatches): ``attention_bwd_dq`` (a workgroup per 64 query rows, key tiles
  of 32) computes ``delta = rowsum(dO * O)`` of its rows, stores it, and accumulates ``dQ``;
  ``attention_bwd_dkv`` (a workgroup per 64 keys, query tiles of 32) accumulates ``dK`` and
  ``dV``. Both recompute the probabilities from the saved log-sum-exp.

Dropout of the weights (``dropout=(p, words)``) is a variant of each pipeline (the plain
one draws nothing): every kernel regenerates ``vtl.random``'s bits of the weights it uses,
Philox-4x32-10 (``wgsl/random/philox_rounds.wgsl``, through
``wgsl/nn/attention_dropout.wgsl``), one block for each thread's four adjacent keys (two
where they straddle a block), so the portable path's mask is reproduced exactly and nothing
of size ``(L, S)`` is stored. The forward multiplies ``P`` by the factors (0 or ``1 / (1 -
p)``, float32) after the row sums (the softmax normalisation and ``lse`` are those of the
undropped weights); the backward uses ``P Z`` for ``dV`` and ``dS = P (dP Z - delta)``. The
draw's six words are immediates; inside ``vtl.compile`` they are the draw's
:class:`~vtl.backends.DynamicScalars`, which each replay re-encodes (fresh bits per step).

``forward_packed``/``backward_packed`` run the same kernels on multi-head self-attention's
packed projection ``(N, L, 3E)`` (or ``(L, N, 3E)``): a layout flag makes each kernel address
a head's rows as a column block of the projection (row stride ``3E``, or ``N * 3E``), write
the output with the heads merged and the three gradients into one array of the
projection's shape, so no copy splits or merges heads either way.

Rows whose keys are all masked give zeros, ``lse = +inf`` and zero gradients (PyTorch's
safe softmax). The additive mask is read through its strides (zero where it broadcasts), so
an ``(L, S)`` or key-padding mask is never expanded. Compute is float32 for float32,
float16 (with ``shader-f16``) and bfloat16 operands; head sizes up to :data:`MAX_DIM`, any
lengths. Workgroup memory: at most 31 KiB (head size 128; :func:`workgroup_bytes`), checked
against the adapter's limit.
"""

from __future__ import annotations

from typing import Any

from .._base import DynamicScalars
from .._common.dropout import keep_threshold
from .._common.packed_attention import packed_geometry
from . import _dtypes as D
from . import _kernels, _runtime
from ._array import WgpuArray, astype_raw, contiguous, empty, words_for_scalar
from ._recorder import REC

__all__ = ["MAX_DIM", "WgpuAttention", "workgroup_bytes"]

#: the largest head size (of queries/keys and of values) the kernels take
MAX_DIM = 128
_BQ = 64  # query rows per workgroup (forward, dQ); keys per workgroup (dK/dV)
_BINDINGS = 9  # storage buffers of the backward kernels
_XYZW = "xyzw"
_DROP_AT = 21  # first immediate word of the dropout variant (attention_dropout.wgsl)
_MASK = 0xFFFFFFFF
_TOKENS, _SEQ_FIRST = 4, 8  # layout flags (attention_common.wgsl)
_WIDTHS_AT = 29  # words 29-31: the token widths of q/k/v, O/dO and the gradients


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _with_widths(words: list[int], widths: tuple[int, int, int]) -> list[int]:
    """``words`` (up to the dropout variant's) zero-padded to word :data:`_WIDTHS_AT`, then
    the token widths of the packed layout."""
    return [*words, *[0] * (_WIDTHS_AT - len(words)), *widths]


def _config(d: int, dv: int) -> dict[str, int]:
    """Tile geometry for head sizes ``d`` (queries/keys) and ``dv`` (values)."""
    dm = max(d, dv)
    dp, dvp = 32 * _ceil(d, 32), 32 * _ceil(dv, 32)
    rc = 32
    while rc > 8 and rc * (dp + dvp) > 2048:
        rc //= 2
    return {
        "dc_f": min(16, 4 * _ceil(d, 4)),  # forward depth chunk
        "dc_b": min(16, 4 * _ceil(dm, 4)),  # backward depth chunk (over q/k and dO/v)
        "dp": dp, "dvp": dvp, "rc": rc,
    }


def workgroup_bytes(d: int, dv: int) -> dict[str, int]:
    """Workgroup memory of each kernel, in bytes."""
    c = _config(d, dv)
    dcb = c["dc_b"]
    return {
        "attention_fwd": 16 * (1088 + 4 * c["dvp"] + 128),
        "attention_bwd_dq": 16 * (max(52 * dcb, 576) + 8 * c["dp"] + 128),
        "attention_bwd_dkv": 16 * (max(52 * dcb, 1152) + c["rc"] * (c["dp"] + c["dvp"]) // 4)
        + 256,
    }


def _join(lines: list[str], indent: int) -> str:
    pad = " " * indent
    return "\n".join(pad + ln for ln in lines)


def _store(arr: str, base: str, acc: str, factor: str, width: str, groups: int, dn: str,
           t: str) -> list[str]:
    """Stores of the accumulators ``{acc}{h}`` (columns 4cg + 32h + e, below ``width``),
    times ``factor``."""
    out = []
    for h in range(groups):
        for e in range(4):
            off = 32 * h + e
            out.append(f"  if (c0 + {off}u < {width}) {{ {arr}[{base} + c0 + {off}u] = "
                       f"wrap_{dn}({t}({acc}{h}.{_XYZW[e]}{factor})); }}")
    return out


def _product(lhs: list[tuple[str, str, str]], rhs: list[tuple[str, str, int]],
             row: str) -> list[str]:
    """``acc{a}{h} += x{a}[e] * y{e}_{h}`` over 4 steps e of a reduction: ``lhs`` gives
    ``(acc, x, load of x{a})`` per family, ``rhs`` ``(y, load at row {row} + e and column
    group h, groups)`` per family (families pair up in order)."""
    out = [f"let {x}{a} = {load.format(a=a)};" for _, x, load in lhs for a in range(4)]
    for e in range(4):
        for (acc, x, _), (y, load, groups) in zip(lhs, rhs, strict=True):
            out += [f"let {y}{e}_{h} = {load.format(r=f'({row} + {e}u)', h=8 * h)};"
                    for h in range(groups)]
            out += [f"{acc}{a}{h} += {x}{a}.{_XYZW[e]} * {y}{e}_{h};" for a in range(4)
                    for h in range(groups)]
    return out


def _blocks(name: str, d: int, dv: int, dn: str, t: str, drop: bool) -> dict[str, str]:
    """The unrolled per-thread code of kernel ``name`` (vec4 registers named per row and
    column group) for the template's placeholders; ``drop``: the dropout variant."""
    c = _config(d, dv)
    rows = range(4)
    if name == "attention_fwd":
        oh = _ceil(dv, 32)
        vrow = c["dvp"] // 4
        softmax = [f"s{a}{h} = pexp(s{a}{h}, mr.{_XYZW[a]});" for a in rows for h in (0, 1)]
        softmax.append("l = l * corr + vec4<f32>(" + ", ".join(
            f"sum4(s{a}0 + s{a}1)" for a in rows) + ");")
        softmax += [f"o{a}{h} *= corr.{_XYZW[a]};" for a in rows for h in range(oh)]
        if drop:  # after the (undropped) row sums: the weights that multiply v
            softmax += [f"s{a}{h} *= drop4(s{a}{h}, b * L + r0 + {a}u, j0 + {32 * h}u);"
                        for a in rows for h in (0, 1)]
        softmax += [f"sa[pr + {17 * a + 8 * h}u + cg] = s{a}{h};" for a in rows for h in (0, 1)]
        scores = []
        for a in rows:
            scores += [f"s{a}{h} = score_keys(s{a}{h}, r0 + {a}u, j0 + {32 * h}u, mb);"
                       for h in (0, 1)]
            scores.append(f"red[rw + {2 * a}u][rc] = max(max4(s{a}0), max4(s{a}1));")
        store = []
        for a in rows:
            store.append(f"if (r0 + {a}u < L) {{")
            store.append(f"  let ib = ob + (r0 + {a}u) * ors;")
            store += _store("O", "ib", f"o{a}", f" * inv.{_XYZW[a]}", "DV", oh, dn, t)
            store.append(f"  if (cg == 0u) {{ Lse[pw(17u) + b * L + r0 + {a}u] = "
                         f"lse.{_XYZW[a]}; }}")
            store.append("}")
        pv = _product([("o", "x", "sa[pj + " + "{a}" + "u * 17u]")],
                      [("v", "sv[{r} * " + f"{vrow}u + cg + " + "{h}u]", oh)], "r")
        return {
            "O_DECL": _join([f"var o{a}{h} = vec4<f32>();" for a in rows for h in range(oh)], 2),
            "S_DECL": _join([f"var s{a}{h} = vec4<f32>();" for a in rows for h in (0, 1)], 4),
            "S_ACC": _join([f"s{a}{h} += qv.{_XYZW[a]} * k{h}v;" for a in rows for h in (0, 1)],
                           8),
            "SCORES": _join(scores, 4),
            "SOFTMAX": _join(softmax, 4),
            "PV_ACC": _join(pv, 8),
            "STORE": _join(store, 2),
            "OH": str(oh),
        }
    if name == "attention_bwd_dq":
        dh = _ceil(d, 32)
        krow = c["dp"] // 4
        store = []
        for a in rows:
            store.append(f"if (r0 + {a}u < L) {{")
            store.append(f"  let ib = ub + (r0 + {a}u) * urs;")
            store += _store("DQ", "ib", f"a{a}", " * sc", "D", dh, dn, t)
            store.append("}")
        acc = _product([("a", "x", "sa[pj + " + "{a}" + "u * 9u]")],
                       [("k", "sk[{r} * " + f"{krow}u + cg + " + "{h}u]", dh)], "j")
        ds = []
        for a in rows:  # dS = P (dP - delta), with dropout P (dP Z - delta)
            x = _XYZW[a]
            ds.append(f"let pa{a} = select(z, pexp(score_keys(s{a}, r0 + {a}u, j0, mb), "
                      f"ls.{x}), live.{x});")
            dp = f"p{a} * drop4(pa{a}, b * L + r0 + {a}u, j0)" if drop else f"p{a}"
            ds.append(f"sa[pr + {9 * a}u + cg] = pa{a} * ({dp} - dl.{x});")
        return {
            "DS": _join(ds, 4),
            "DQ_DECL": _join([f"var a{a}{h} = vec4<f32>();" for a in rows for h in range(dh)],
                             2),
            "DQ_ACC": _join(acc, 6),
            "STORE": _join(store, 2),
            "DH": str(dh),
        }
    dh, dvh = _ceil(d, 32), _ceil(dv, 32)
    qrow, grow = c["dp"] // 4, c["dvp"] // 4
    acc = _product([("v", "x", "sa[pj + " + "{a}" + "u * 9u]"),
                    ("k", "y", "sa[576u + pj + " + "{a}" + "u * 9u]")],
                   [("g", "sr[RG + {r} * " + f"{grow}u + cg + " + "{h}u]", dvh),
                    ("q", "sr[{r} * " + f"{qrow}u + cg + " + "{h}u]", dh)], "r")
    pds = []
    if drop:  # the factors of query i0 + e and keys j0 .. j0 + 3, then per key
        pds += [f"let zq{e} = drop4(vec4<f32>(" + ", ".join(f"s{a}.{_XYZW[e]}" for a in rows)
                + f"), b * L + i0 + {e}u, j0);" for e in rows]
        pds += [f"let zk{a} = vec4<f32>(" + ", ".join(f"zq{e}.{_XYZW[a]}" for e in rows)
                + ");" for a in rows]
    for a in rows:  # P (times Z) and dS = P (dP - delta) (with dropout P (dP Z - delta))
        pz, dpz = (f"s{a} * zk{a}", f"p{a} * zk{a}") if drop else (f"s{a}", f"p{a}")
        pds.append(f"sa[pr + {9 * a}u + cg] = {pz};")
        pds.append(f"sa[{576 + 9 * a}u + pr + cg] = s{a} * ({dpz} - dq);")
    store = []
    for a in rows:
        store.append(f"if (j0 + {a}u < S) {{")
        store.append(f"  let kb{a} = ub + (j0 + {a}u) * urs;")
        store += _store("DK", f"kb{a}", f"k{a}", " * sc", "D", dh, dn, t)
        store.append(f"  let vb{a} = wb + (j0 + {a}u) * wrs;")
        store += _store("DVo", f"vb{a}", f"v{a}", "", "DV", dvh, dn, t)
        store.append("}")
    return {
        "ACC_DECL": _join([f"var k{a}{h} = vec4<f32>();" for a in rows for h in range(dh)]
                          + [f"var v{a}{h} = vec4<f32>();" for a in rows for h in range(dvh)],
                          2),
        "KV_ACC": _join(acc, 8),
        "PDS": _join(pds, 4),
        "STORE": _join(store, 2),
        "DH": str(dh), "DVH": str(dvh),
    }


def _subs(name: str, d: int, dv: int) -> dict[str, Any]:
    """The template's numeric placeholders."""
    c = _config(d, dv)
    if name == "attention_fwd":
        dc = c["dc_f"]
        return {"D": d, "DV": dv, "DC": dc, "KOFF": 17 * dc, "DVP": c["dvp"],
                "SV": 4 * c["dvp"]}
    dc = c["dc_b"]
    common = {"D": d, "DV": dv, "DM": max(d, dv), "DC": dc, "DP": c["dp"]}
    if name == "attention_bwd_dq":
        return {**common, "KOFF": 17 * dc, "GOFF": 26 * dc, "VOFF": 43 * dc,
                "SA": max(52 * dc, 576), "SK": 8 * c["dp"]}
    return {**common, "QOFF": 17 * dc, "VOFF": 26 * dc, "GOFF": 43 * dc,
            "SA": max(52 * dc, 1152), "DVP": c["dvp"], "RC": c["rc"],
            "SR": c["rc"] * (c["dp"] + c["dvp"]) // 4}


_SIGS = {"attention_fwd": "rrrrww", "attention_bwd_dq": "rrrrrrrww",
         "attention_bwd_dkv": "rrrrrrrww"}


def drop_words(dropout: Any, at: int) -> tuple[list[int], Any]:
    """The eight words of a kernel's dropout (``attention_dropout.wgsl``: the draw's counter
    and key, the keep threshold, the scale) from word ``at``, and the patch a capture
    applies to them at each replay (the draw's :class:`~vtl.backends.DynamicScalars`);
    ``[]`` and ``None`` without dropout."""
    if dropout is None:
        return [], None
    p, words = dropout
    words = words()
    tail = [keep_threshold(p), words_for_scalar(1.0 / (1.0 - p), D.float32)[0]]
    if isinstance(words, DynamicScalars):
        return [*words.values, *tail], [(at, words, list)]
    return [*(w & _MASK for w in words), *tail], None


class WgpuAttention:
    """``kernel("attention")`` (see :mod:`vtl.backends.wgpu.attention`): ``forward`` one
    dispatch, ``backward`` two. ``launches`` counts the dispatches recorded."""

    def __init__(self, gemm: Any = None) -> None:
        self._kernels: dict[tuple, Any] = {}
        self.launches = 0
        #: a WgpuGemmAttention: long float32 sequences by the library's matrix product
        self._gemm = gemm

    def supports(self, dtype: Any) -> bool:
        if dtype in (D.float32, D.bfloat16):
            return True
        return dtype == D.float16 and "shader-f16" in _runtime.get().features

    def _kernel(self, name: str, dt: Any, d: int, dv: int, drop: bool) -> Any:
        key = (name, dt, d, dv, drop)
        k = self._kernels.get(key)
        if k is None:
            t, dn = D.wgsl(dt), dt.name
            common = _kernels.source("attention_common")
            extra = {"DROP": "", "PHILOX": ""}
            if drop:
                extra = {"DROP": _kernels.source("attention_dropout"),
                         "PHILOX": _kernels.source("philox_rounds")}
            k = self._kernels[key] = _kernels.kernel(
                name, _SIGS[name], (dt,), T=t, DN=dn, COMMON=common, **extra,
                **{n: str(v) for n, v in _subs(name, d, dv).items()},
                **_blocks(name, d, dv, dn, t, drop))
        return k

    def _fits(self, arrays: tuple, d: int, dv: int, b: int, n_q: int, n_k: int) -> bool:
        """Whether the device takes this problem: workgroup memory, bindings, grid, and
        every operand and result within one binding."""
        rt = _runtime.get()
        lim = rt.limits
        if max(workgroup_bytes(d, dv).values()) > int(
                lim.get("max-compute-workgroup-storage-size", 16384)):
            return False
        if int(lim.get("max-storage-buffers-per-shader-stage", 8)) < _BINDINGS:
            return False
        if b * _ceil(max(n_q, n_k), _BQ) > rt.max_groups * rt.max_groups:
            return False
        isz = max(D.itemsize(a.dtype) for a in arrays)
        biggest = max([a._st.buf.cap for a in arrays]
                      + [isz * b * max(n_q, n_k) * max(d, dv)])
        return biggest <= rt.max_binding and b * max(n_q, n_k) * max(d, dv) < 2**31

    @staticmethod
    def _words(geometry: tuple[int, int, int, int], offsets: tuple[int, int, int], mask: Any,
               causal: bool, scale: float, per: int, layout: int = 0) -> list[int]:
        """Words 0-14 (``attention_common.wgsl``): ``geometry`` is ``(B, heads, L, S)``,
        ``offsets`` those of q, k and v, ``layout`` the token-layout flags (4, 8); the mask's
        strides are 0 where it broadcasts."""
        flags, moff, mst = (2 if causal else 0) | layout, 0, [0, 0, 0, 0]
        if mask is not None:
            pad = 4 - mask.ndim
            shape = (1,) * pad + tuple(mask.shape)
            strides = (0,) * pad + tuple(mask._strides)
            flags, moff = flags | 1, mask._offset
            mst = [0 if n == 1 else s for n, s in zip(shape, strides, strict=True)]
        return [*geometry, flags, words_for_scalar(scale, D.float32)[0], per, *offsets,
                moff, *mst]

    def _takes_mask(self, mask: Any, dt: Any, full: tuple[int, int, int, int]) -> bool:
        if mask is None:
            return True
        if type(mask) is not WgpuArray or mask.dtype != dt or mask.ndim > 4:
            return False
        shape = (1,) * (4 - mask.ndim) + tuple(mask.shape)
        return all(m in (1, n) for m, n in zip(shape, full, strict=True))

    def _accepts(self, q: Any, k: Any, v: Any, mask: Any, batch: tuple[int, int]) -> bool:
        if not all(type(a) is WgpuArray and a.ndim == 3 for a in (q, k, v)):
            return False
        dt = q.dtype
        if not self.supports(dt) or k.dtype != dt or v.dtype != dt:
            return False
        b, n_q, d = q.shape
        _, n_k, dv = v.shape
        if (k.shape != (b, n_k, d) or b != batch[0] * batch[1] or min(b, n_q, n_k, d, dv) == 0
                or max(d, dv) > MAX_DIM):
            return False
        if not self._takes_mask(mask, dt, (*batch, n_q, n_k)):
            return False
        arrays = (q, k, v) if mask is None else (q, k, v, mask)
        return self._fits(arrays, d, dv, b, n_q, n_k)

    def _packed(self, qkv: Any, heads: int, batch_first: bool, mask: Any
                ) -> tuple[int, int, int, int] | None:
        """``(N, L, E, layout flags)`` of a packed projection the kernels take, else None."""
        geo = packed_geometry(qkv.shape, heads, batch_first, MAX_DIM)
        if type(qkv) is not WgpuArray or geo is None or not self.supports(qkv.dtype):
            return None
        n, length, e = geo
        if not self._takes_mask(mask, qkv.dtype, (n, heads, length, length)):
            return None
        hd = e // heads
        arrays = (qkv,) if mask is None else (qkv, mask)
        if not self._fits(arrays, hd, hd, n * heads, length, length):
            return None
        return n, length, e, _TOKENS | (0 if batch_first else _SEQ_FIRST)

    def forward(self, q: Any, k: Any, v: Any, mask: Any, causal: bool, scale: float,
                batch: tuple[int, int], dropout: Any = None) -> tuple[Any, Any] | None:
        if dropout is not None and not 0.0 < dropout[0] < 1.0:
            return None
        if self._gemm is not None and self._gemm.takes(q, k, v, mask, dropout, causal):
            return self._gemm.forward(q, k, v, mask, causal, scale, batch, dropout)
        if not self._accepts(q, k, v, mask, batch):
            return None
        q, k, v = contiguous(q), contiguous(k), contiguous(v)
        b, n_q, d = q.shape
        dv = v.shape[2]
        dt = q.dtype
        out = empty((b, n_q, dv), dt)
        lse = empty((b, n_q), D.float32)
        per = _ceil(n_q, _BQ)
        words = self._words((b, batch[1], n_q, v.shape[1]), (q._offset, k._offset, v._offset),
                            mask, causal, scale, per)
        dwords, patch = drop_words(dropout, _DROP_AT)  # (the generator advances here)
        words += [0, 0, lse._offset, 0, out._offset, 0, *dwords]
        mbuf = (mask if mask is not None else q)._st.buf
        REC.dispatch(self._kernel("attention_fwd", dt, d, dv, dropout is not None),
                     (q._st.buf, k._st.buf, v._st.buf, mbuf, out._st.buf, lse._st.buf),
                     words, b * per, dynamic=patch)
        self.launches += 1
        return out, lse

    def backward(self, q: Any, k: Any, v: Any, out: Any, lse: Any, g: Any, mask: Any,
                 causal: bool, scale: float, batch: tuple[int, int], dropout: Any = None
                 ) -> tuple[Any, Any, Any]:
        q, k, v, out = contiguous(q), contiguous(k), contiguous(v), contiguous(out)
        b, n_q, d = q.shape
        n_k, dv = v.shape[1], v.shape[2]
        dt = q.dtype
        g = contiguous(g) if g.dtype == dt else astype_raw(g, dt)
        if self._gemm is not None and self._gemm.takes(q, k, v, mask, dropout, causal):
            return self._gemm.backward(q, k, v, out, lse, g, mask, causal, scale, batch,
                                       dropout)
        delta = empty((b, n_q), D.float32)
        dq = empty((b, n_q, d), dt)
        dk = empty((b, n_k, d), dt)
        dvv = empty((b, n_k, dv), dt)
        mbuf = (mask if mask is not None else q)._st.buf
        base = self._words((b, batch[1], n_q, n_k), (q._offset, k._offset, v._offset), mask,
                           causal, scale, _ceil(n_q, _BQ))
        drop = dropout is not None
        dwords, patch = drop_words(dropout, _DROP_AT)  # the forward's draw
        words = base + [g._offset, out._offset, lse._offset, delta._offset, dq._offset, 0,
                        *dwords]
        REC.dispatch(self._kernel("attention_bwd_dq", dt, d, dv, drop),
                     (q._st.buf, k._st.buf, v._st.buf, mbuf, g._st.buf, out._st.buf,
                      lse._st.buf, delta._st.buf, dq._st.buf), words, b * words[6],
                     dynamic=patch)
        per = _ceil(n_k, _BQ)
        base[6] = per
        words = base + [g._offset, 0, lse._offset, delta._offset, dk._offset, dvv._offset,
                        *dwords]
        REC.dispatch(self._kernel("attention_bwd_dkv", dt, d, dv, drop),
                     (q._st.buf, k._st.buf, v._st.buf, mbuf, g._st.buf, lse._st.buf,
                      delta._st.buf, dk._st.buf, dvv._st.buf), words, b * per,
                     dynamic=patch)
        self.launches += 2
        return dq, dk, dvv

    def forward_packed(self, qkv: Any, heads: int, batch_first: bool, mask: Any,
                       causal: bool, scale: float, dropout: Any = None
                       ) -> tuple[Any, Any] | None:
        if dropout is not None and not 0.0 < dropout[0] < 1.0:
            return None
        got = self._packed(qkv, heads, batch_first, mask)
        if got is None:
            return None
        n, length, e, layout = got
        if self._gemm is not None and self._gemm.takes_split(
                qkv.dtype, n * heads, length, length, e // heads, e // heads, mask, dropout,
                causal):
            return None  # the heads split (a copy each way) and attention by products
        qkv = contiguous(qkv)
        dt, hd, b = qkv.dtype, e // heads, n * heads
        out = empty((*qkv.shape[:2], e), dt)
        lse = empty((b, length), D.float32)
        per = _ceil(length, _BQ)
        o = qkv._offset
        words = self._words((b, heads, length, length), (o, o + e, o + 2 * e), mask, causal,
                            scale, per, layout)
        dwords, patch = drop_words(dropout, _DROP_AT)  # (the generator advances here)
        words = _with_widths(words + [0, 0, lse._offset, 0, out._offset, 0, *dwords],
                             (3 * e, e, 0))
        mbuf = (mask if mask is not None else qkv)._st.buf
        buf = qkv._st.buf
        REC.dispatch(self._kernel("attention_fwd", dt, hd, hd, dropout is not None),
                     (buf, buf, buf, mbuf, out._st.buf, lse._st.buf), words, b * per,
                     dynamic=patch)
        self.launches += 1
        return out, lse

    def backward_packed(self, qkv: Any, out: Any, lse: Any, g: Any, heads: int,
                        batch_first: bool, mask: Any, causal: bool, scale: float,
                        dropout: Any = None) -> Any:
        n, length, e, layout = self._packed(qkv, heads, batch_first, mask)
        qkv, out = contiguous(qkv), contiguous(out)
        dt, hd, b = qkv.dtype, e // heads, n * heads
        g = contiguous(g) if g.dtype == dt else astype_raw(g, dt)
        delta = empty((b, length), D.float32)
        grad = empty(qkv.shape, dt)
        mbuf = (mask if mask is not None else qkv)._st.buf
        o, go = qkv._offset, grad._offset
        base = self._words((b, heads, length, length), (o, o + e, o + 2 * e), mask, causal,
                           scale, _ceil(length, _BQ), layout)
        drop = dropout is not None
        dwords, patch = drop_words(dropout, _DROP_AT)  # the forward's draw
        widths = (3 * e, e, 3 * e)
        buf, gbuf = qkv._st.buf, grad._st.buf
        words = _with_widths(base + [g._offset, out._offset, lse._offset, delta._offset, go, 0,
                                     *dwords], widths)
        REC.dispatch(self._kernel("attention_bwd_dq", dt, hd, hd, drop),
                     (buf, buf, buf, mbuf, g._st.buf, out._st.buf, lse._st.buf,
                      delta._st.buf, gbuf), words, b * base[6], dynamic=patch)
        words = _with_widths(base + [g._offset, 0, lse._offset, delta._offset, go + e,
                                     go + 2 * e, *dwords], widths)
        REC.dispatch(self._kernel("attention_bwd_dkv", dt, hd, hd, drop),
                     (buf, buf, buf, mbuf, g._st.buf, lse._st.buf, delta._st.buf, gbuf,
                      gbuf), words, b * base[6], dynamic=patch)
        self.launches += 2
        return grad
