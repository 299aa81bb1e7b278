"""``kernels["lstm_cell"]`` and ``kernels["gru_cell"]`` of the CuPy backend (the contracts
are ``LstmCellKernel`` and ``GruCellKernel`` in ``vtl.backends.kernels``).

One ``ElementwiseKernel`` per direction and cell: a thread per element of the ``(..., H)``
state reads its four (three) gate values from the stacked ``(..., k * H)`` gate arrays by
index arithmetic (``raw`` parameters). Sigmoids are ``(1 + tanh(x / 2)) / 2`` as in the
portable code (``vtl/nn/functional/_rnn_fused.py``), whose protocol these classes follow.
Each kernel is described by its parameter lists and a C++ body, so the body can also be
compiled on the host for testing.

Whole LSTM time steps (``LstmCell.step_forward``/``step_backward``, :class:`LstmSteps`): the
recurrent product and the cell in ONE launch each way, where a step was a cuBLAS product
``h @ W_hh^T`` plus the cell's kernel (and backward the cell's kernel plus ``dz @ W_hh``),
two launches and about 30 us of host time per step each way. A block of 256 threads owns
2 batch rows and 16 hidden units, 8 threads per (row, unit) each summing a slice of the
product's inner dimension straight from memory: the four gates over ``h`` and ``W_hh^T``
(forward; ``recurrent_weight`` lays it out once per layer call) or ``dh`` over the next
step's gate gradients and ``W_hh`` (backward), neighbouring threads on neighbouring units.
The slices meet in shared memory and the first slice's threads run the cell's pointwise
part. Small blocks keep the whole GPU busy at a recurrent step's small batch (at batch 64,
hidden size 256 on an H100, 4x faster than 16 x 16 tiles of outputs backward). Sums run in a
fixed order (deterministic); these kernels are :class:`~vtl.backends.cupy.nn.Spec` sources
(:data:`STEP_SPECS`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._codegen import CTYPES
from .nn import _I32, _I64, FLOAT_NAMES, Spec, _Kernels

_RNN_PRELUDE = (
    "const ptrdiff_t H_ = (ptrdiff_t)H; const ptrdiff_t n_ = (ptrdiff_t)i / H_;\n"
    "const ptrdiff_t j_ = (ptrdiff_t)i - n_ * H_;\n"
)


def lstm_forward_spec(hidden: bool) -> tuple[list[str], list[str], str]:
    """``(inputs, outputs, body)`` of the LSTM forward kernel (``hidden``: a second gate
    array is added to the first)."""
    ins = ["raw T z", *(["raw T z2"] if hidden else []), "T cprev", "int64 H"]
    outs = ["T h", "T c", "T tc", "raw T act"]
    add = (lambda k: f" + z2[b_ + {k} * H_]") if hidden else (lambda k: "")
    body = _RNN_PRELUDE + "const ptrdiff_t b_ = n_ * 4 * H_ + j_;\nconst T half = 0.5;\n"
    for k, name in enumerate("ifgo"):
        body += f"const T z{name} = z[b_ + {k} * H_]{add(k)};\n"
    body += (
        "const T ig = half * tanh(half * zi) + half;\n"
        "const T fg = half * tanh(half * zf) + half;\n"
        "const T gg = tanh(zg);\n"
        "const T og = half * tanh(half * zo) + half;\n"
        "const T cn = fg * cprev + ig * gg;\n"
        "const T t = tanh(cn);\n"
        "c = cn; tc = t; h = og * t;\n"
        "act[b_] = ig; act[b_ + H_] = fg; act[b_ + 2 * H_] = gg; act[b_ + 3 * H_] = og;\n"
    )
    return ins, outs, body


def lstm_backward_spec(has_dh: bool, has_dc: bool, need_dc_prev: bool,
                       has_dh2: bool = False) -> tuple[list[str], list[str], str]:
    """``(inputs, outputs, body)`` of the LSTM backward kernel (``has_dh2``: a second
    gradient of ``h`` is added to the first)."""
    ins = ["raw T act", "T cprev", "T tc", *(["T dh"] if has_dh else []),
           *(["T dh2"] if has_dh2 else []), *(["T dc"] if has_dc else []), "int64 H"]
    outs = ["raw T dz", *(["T dcp"] if need_dc_prev else [])]
    body = _RNN_PRELUDE + (
        "const ptrdiff_t b_ = n_ * 4 * H_ + j_;\nconst T one = 1;\n"
        "const T ig = act[b_], fg = act[b_ + H_], gg = act[b_ + 2 * H_], "
        "og = act[b_ + 3 * H_];\n"
        "const T t = tc;\n"
    )
    if has_dh:
        body += f"const T dhs = {'dh + dh2' if has_dh2 else 'dh'};\n"
    terms = []
    if has_dh:
        terms.append("dhs * og * (one - t * t)")
    if has_dc:
        terms.append("dc")
    body += f"const T dct = {' + '.join(terms)};\n"
    body += f"const T dot = {'dhs * t' if has_dh else 'T(0)'};\n"
    body += (
        "dz[b_] = dct * gg * (ig * (one - ig));\n"
        "dz[b_ + H_] = dct * cprev * (fg * (one - fg));\n"
        "dz[b_ + 2 * H_] = dct * ig * (one - gg * gg);\n"
        "dz[b_ + 3 * H_] = dot * (og * (one - og));\n"
    )
    if need_dc_prev:
        body += "dcp = dct * fg;\n"
    return ins, outs, body


def gru_forward_spec() -> tuple[list[str], list[str], str]:
    """``(inputs, outputs, body)`` of the GRU forward kernel (``act``: ``r, z, n, h_n``)."""
    body = _RNN_PRELUDE + (
        "const ptrdiff_t b3 = n_ * 3 * H_ + j_, b4 = n_ * 4 * H_ + j_;\nconst T half = 0.5;\n"
        "const T r = half * tanh(half * (x[b3] + hg[b3])) + half;\n"
        "const T zz = half * tanh(half * (x[b3 + H_] + hg[b3 + H_])) + half;\n"
        "const T hn = hg[b3 + 2 * H_];\n"
        "const T nn = tanh(x[b3 + 2 * H_] + r * hn);\n"
        "h = nn + zz * (hprev - nn);\n"
        "act[b4] = r; act[b4 + H_] = zz; act[b4 + 2 * H_] = nn; act[b4 + 3 * H_] = hn;\n"
    )
    return ["raw T x", "raw T hg", "T hprev", "int64 H"], ["T h", "raw T act"], body


def gru_backward_spec(need_dh_prev: bool) -> tuple[list[str], list[str], str]:
    """``(inputs, outputs, body)`` of the GRU backward kernel."""
    body = _RNN_PRELUDE + (
        "const ptrdiff_t b3 = n_ * 3 * H_ + j_, b4 = n_ * 4 * H_ + j_;\nconst T one = 1;\n"
        "const T r = act[b4], zz = act[b4 + H_], nn = act[b4 + 2 * H_], "
        "hn = act[b4 + 3 * H_];\n"
        "const T g = dh;\n"
        "const T dzp = g * (hprev - nn) * (zz * (one - zz));\n"
        "const T dnp = (g - g * zz) * (one - nn * nn);\n"
        "const T drp = dnp * hn * (r * (one - r));\n"
        "dx[b3] = drp; dx[b3 + H_] = dzp; dx[b3 + 2 * H_] = dnp;\n"
        "dhg[b3] = drp; dhg[b3 + H_] = dzp; dhg[b3 + 2 * H_] = dnp * r;\n"
    )
    outs = ["raw T dx", "raw T dhg"]
    if need_dh_prev:
        outs.append("T dhp")
        body += "dhp = g * zz;\n"
    return ["raw T act", "T hprev", "T dh", "int64 H"], outs, body


class _ElementwiseCache:
    def __init__(self, cupy: Any) -> None:
        self._cp = cupy
        self._kernels: dict[tuple, Any] = {}

    def supports(self, dtype: Any) -> bool:
        return np.dtype(dtype) in FLOAT_NAMES  # 16-bit cells: computed in float32

    @staticmethod
    def _wide(*arrays: Any) -> list[Any]:
        """The arrays as float32 (``None`` kept): a 16-bit cell runs the float32 kernel and
        its results are rounded once."""
        f32 = np.dtype(np.float32)
        return [None if a is None else a.astype(f32) for a in arrays]

    def _get(self, spec: Any, *flags: bool) -> Any:
        key = (spec.__name__, *flags)
        kern = self._kernels.get(key)
        if kern is None:
            ins, outs, body = spec(*flags)
            name = "vtl_" + spec.__name__ + "".join(str(int(k)) for k in flags)
            kern = self._kernels[key] = self._cp.ElementwiseKernel(
                ", ".join(ins), ", ".join(outs), body, name)
        return kern


class LstmCell(_ElementwiseCache):
    """``kernels["lstm_cell"]``: the LSTM cell's pointwise part, one launch each way, and
    whole time steps with the recurrent product (:class:`LstmSteps`)."""

    def __init__(self, cupy: Any) -> None:
        super().__init__(cupy)
        self.steps = LstmSteps(cupy)

    @staticmethod
    def _narrow(results: tuple, dt: Any, out: Any) -> tuple:
        """float32 results rounded once to ``dt``, into ``out`` where given."""
        if out is None:
            return tuple(None if r is None else r.astype(dt) for r in results)
        for o, r in zip(out, results, strict=True):
            o[...] = r
        return tuple(out)

    def recurrent_weight(self, w_hh: Any) -> Any:
        return self.steps.recurrent_weight(w_hh)

    def step_forward(self, gates: Any, h: Any, w_hh: Any, c: Any, out: Any) -> Any:
        return self.steps.step_forward(gates, h, w_hh, c, out)

    def step_backward(self, act: Any, c_prev: Any, tc: Any, dz_next: Any, w_hh: Any,
                      dh: Any, dh2: Any, dc: Any, need_dc_prev: bool, out: Any) -> Any:
        return self.steps.step_backward(act, c_prev, tc, dz_next, w_hh, dh, dh2, dc,
                                        need_dc_prev, out)

    def layer_forward(self, gates: Any, h0: Any, c0: Any, w_hh: Any, reverse: bool) -> Any:
        return self.steps.layer_forward(gates, h0, c0, w_hh, reverse)

    def layer_backward(self, saved: tuple, w_hh: Any, dout: Any, dhn: Any, dcn: Any,
                       need_c0: bool, reverse: bool) -> Any:
        return self.steps.layer_backward(saved, w_hh, dout, dhn, dcn, need_c0, reverse)

    def forward(self, z: Any, z2: Any, cprev: Any, out: Any = None
                ) -> tuple[Any, Any, Any, Any]:
        if z.dtype not in CTYPES:  # float16/bfloat16: computed in float32, rounded once
            return self._narrow(self.forward(*self._wide(z, z2, cprev)), z.dtype, out)
        cp = self._cp
        hs = cprev.shape[-1]
        with z.device:
            if out is None:
                h = cp.empty(cprev.shape, dtype=z.dtype)
                c = cp.empty_like(h)
                tc = cp.empty_like(h)
                act = cp.empty(z.shape, dtype=z.dtype)
            else:
                h, c, act, tc = out
            kern = self._get(lstm_forward_spec, z2 is not None)
            if z2 is None:
                kern(z, cprev, hs, h, c, tc, act)
            else:
                kern(z, z2, cprev, hs, h, c, tc, act)
        return h, c, act, tc

    def backward(self, act: Any, cprev: Any, tc: Any, dh: Any, dc: Any,
                 need_dc_prev: bool, dh2: Any = None, out: Any = None) -> tuple[Any, Any]:
        if act.dtype not in CTYPES:  # float16/bfloat16: computed in float32, rounded once
            dz, dcp = self.backward(*self._wide(act, cprev, tc, dh, dc), need_dc_prev,
                                    *self._wide(dh2))
            if out is not None:
                out[...] = dz
                dz = out
            return (dz.astype(act.dtype, copy=False),
                    None if dcp is None else dcp.astype(act.dtype))
        cp = self._cp
        if dh is None:
            dh, dh2 = dh2, None
        with act.device:
            dz = cp.empty(act.shape, dtype=act.dtype) if out is None else out
            dcp = cp.empty(tc.shape, dtype=act.dtype) if need_dc_prev else None
            kern = self._get(lstm_backward_spec, dh is not None, dc is not None, need_dc_prev,
                             dh2 is not None)
            args = [act, cprev, tc, *(a for a in (dh, dh2, dc) if a is not None),
                    tc.shape[-1], dz]
            if need_dc_prev:
                args.append(dcp)
            kern(*args)
        return dz, dcp


class GruCell(_ElementwiseCache):
    """``kernels["gru_cell"]``: the GRU cell's pointwise part, one launch each way
    (float16/bfloat16 computed in float32 and rounded once)."""

    def forward(self, x: Any, hg: Any, hprev: Any) -> tuple[Any, Any]:
        if x.dtype not in CTYPES:  # float16/bfloat16: computed in float32, rounded once
            return tuple(a.astype(x.dtype) for a in self.forward(*self._wide(x, hg, hprev)))
        cp = self._cp
        hs = hprev.shape[-1]
        with x.device:
            h = cp.empty(hprev.shape, dtype=x.dtype)
            act = cp.empty(tuple(hprev.shape[:-1]) + (4 * hs,), dtype=x.dtype)
            self._get(gru_forward_spec)(x, hg, hprev, hs, h, act)
        return h, act

    def backward(self, act: Any, hprev: Any, dh: Any,
                 need_dh_prev: bool) -> tuple[Any, Any, Any]:
        if act.dtype not in CTYPES:  # float16/bfloat16: computed in float32, rounded once
            return tuple(None if a is None else a.astype(act.dtype)
                         for a in self.backward(*self._wide(act, hprev, dh), need_dh_prev))
        cp = self._cp
        hs = hprev.shape[-1]
        with act.device:
            shape = tuple(hprev.shape[:-1]) + (3 * hs,)
            dx = cp.empty(shape, dtype=act.dtype)
            dhg = cp.empty(shape, dtype=act.dtype)
            dhp = cp.empty(hprev.shape, dtype=act.dtype) if need_dh_prev else None
            args = [act, hprev, dh, hs, dx, dhg, *([dhp] if need_dh_prev else [])]
            self._get(gru_backward_spec, need_dh_prev)(*args)
        return dx, dhg, dhp



# -- whole LSTM time steps ---------------------------------------------------------------------

#: a block is 16 hidden units x 2 batch rows x 8 slices of the product's inner dimension
#: (threadIdx.y = slice * 2 + row)
_UNITS, _ROWS = 16, 2
_BLOCK = (_UNITS, _ROWS * 8)

_HEAD = r"""
  const int tx = threadIdx.x, r = threadIdx.y % 2, sl = threadIdx.y / 2;
  const int tid = threadIdx.y * 16 + tx;  // = slice * 32 + row * 16 + unit
  const long long nux = (H + 15) / 16;
  const long long j = ((long long)blockIdx.x % nux) * 16 + tx;
  const long long n = ((long long)blockIdx.x / nux) * 2 + r;
  const long long jc = j < H ? j : H - 1, nc = n < N ? n : N - 1;
  const int Hi = (int)H;
"""

#: an empty batch or state launches nothing useful, yet CuPy launches at least one block:
#: the rows' reads are clamped to row N - 1, which does not exist then
_EMPTY = r"""
  if (N <= 0 || H <= 0) return;
"""

#: ``z = g + h @ wt`` for the 4 gates of (row ``n``, unit ``j``) (``wt`` = ``W_hh^T``,
#: ``(H, 4H)``: neighbouring threads read neighbouring units; each of the 8 slices of a
#: (row, unit) sums its part of ``k``, the parts meet in shared memory), then the cell:
#: ``c = f * cprev + i * gg``, ``h = o * tanh(c)``; ``act`` keeps ``i, f, gg, o``
LSTM_STEP_FORWARD = Spec("vtl_lstm_step_fwd", (
    ("const T* __restrict__", "g"), ("const T* __restrict__", "h"),
    ("const T* __restrict__", "wt"), ("const T* __restrict__", "cprev"),
    ("T* __restrict__", "hout"), ("T* __restrict__", "cout"), ("T* __restrict__", "tcout"),
    ("T* __restrict__", "act"), ("const long long", "N"), ("const long long", "H")),
    _EMPTY + _HEAD + r"""
  __shared__ A part[4][256];
  const int len = (Hi + 7) / 8;
  const int k0 = sl * len < Hi ? sl * len : Hi;
  const int k1 = k0 + len < Hi ? k0 + len : Hi;
  A a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  const T* hp = h + nc * H;
  const T* wp = wt + (long long)k0 * 4 * H + jc;
  for (int k = k0; k < k1; ++k, wp += 4 * Hi) {
    const A hv = vtl_ld(hp[k]);
    a0 += hv * vtl_ld(wp[0]);
    a1 += hv * vtl_ld(wp[Hi]);
    a2 += hv * vtl_ld(wp[2 * Hi]);
    a3 += hv * vtl_ld(wp[3 * Hi]);
  }
  part[0][tid] = a0; part[1][tid] = a1; part[2][tid] = a2; part[3][tid] = a3;
  __syncthreads();
  if (sl == 0 && n < N && j < H) {
    A s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (int q = 0; q < 8; ++q) {
      s0 += part[0][q * 32 + tid]; s1 += part[1][q * 32 + tid];
      s2 += part[2][q * 32 + tid]; s3 += part[3][q * 32 + tid];
    }
    const long long b = n * 4 * H + j;
    const A half = 0.5;
    const A zi = vtl_ld(g[b]) + s0, zf = vtl_ld(g[b + H]) + s1;
    const A zg = vtl_ld(g[b + 2 * H]) + s2, zo = vtl_ld(g[b + 3 * H]) + s3;
    const A ig = half * tanh(half * zi) + half;
    const A fg = half * tanh(half * zf) + half;
    const A gg = tanh(zg);
    const A og = half * tanh(half * zo) + half;
    const A cn = fg * vtl_ld(cprev[n * H + j]) + ig * gg;
    const A t = tanh(cn);
    cout[n * H + j] = vtl_st(cn);
    tcout[n * H + j] = vtl_st(t);
    hout[n * H + j] = vtl_st(og * t);
    act[b] = vtl_st(ig); act[b + H] = vtl_st(fg); act[b + 2 * H] = vtl_st(gg);
    act[b + 3 * H] = vtl_st(og);
  }
""")

#: ``dh = dznext @ w (+ dh1 + dh2)`` for (row ``n``, unit ``j``) (each term where its flag
#: is set: 1 ``dznext``, 2 ``dh1``, 4 ``dh2``; ``dh2``'s rows ``ld2`` elements apart: a step of
#: a batch-first output's gradient is a strided view; the product split in 8 slices of the
#: 4H gate gradients as the forward's), then the cell's backward with ``dc`` (flag 8): the
#: four gate gradients into ``dz`` and, with flag 16, ``dcp = dct * f``
LSTM_STEP_BACKWARD = Spec("vtl_lstm_step_bwd", (
    ("const T* __restrict__", "act"), ("const T* __restrict__", "cprev"),
    ("const T* __restrict__", "tc"), ("const T* __restrict__", "dznext"),
    ("const T* __restrict__", "w"), ("const T* __restrict__", "dh1"),
    ("const T* __restrict__", "dh2"), ("const T* __restrict__", "dc"),
    ("T* __restrict__", "dz"), ("T* __restrict__", "dcp"), ("const long long", "N"),
    ("const long long", "H"), ("const int", "flags"), ("const long long", "ld2")),
    _EMPTY + _HEAD + r"""
  __shared__ A part[256];
  A a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  if (flags & 1) {
    const int K = 4 * Hi, len = (K + 7) / 8;
    int k = sl * len < K ? sl * len : K;
    const int k1 = k + len < K ? k + len : K;
    const T* zp = dznext + nc * 4 * H;
    const T* wp = w + (long long)k * H + jc;
    for (; k + 4 <= k1; k += 4, wp += 4 * Hi) {
      a0 += vtl_ld(zp[k]) * vtl_ld(wp[0]);
      a1 += vtl_ld(zp[k + 1]) * vtl_ld(wp[Hi]);
      a2 += vtl_ld(zp[k + 2]) * vtl_ld(wp[2 * Hi]);
      a3 += vtl_ld(zp[k + 3]) * vtl_ld(wp[3 * Hi]);
    }
    for (; k < k1; ++k, wp += Hi) a0 += vtl_ld(zp[k]) * vtl_ld(wp[0]);
  }
  part[tid] = (a0 + a1) + (a2 + a3);
  __syncthreads();
  if (sl == 0 && n < N && j < H) {
    A acc = 0;
    for (int q = 0; q < 8; ++q) acc += part[q * 32 + tid];
    const long long s = n * H + j, b = n * 4 * H + j;
    const A one = 1;
    A dhs = acc;
    if (flags & 2) dhs += vtl_ld(dh1[s]);
    if (flags & 4) dhs += vtl_ld(dh2[n * ld2 + j]);
    const A ig = vtl_ld(act[b]), fg = vtl_ld(act[b + H]), gg = vtl_ld(act[b + 2 * H]);
    const A og = vtl_ld(act[b + 3 * H]), t = vtl_ld(tc[s]);
    A dct = dhs * og * (one - t * t);
    if (flags & 8) dct += vtl_ld(dc[s]);
    dz[b] = vtl_st(dct * gg * (ig * (one - ig)));
    dz[b + H] = vtl_st(dct * vtl_ld(cprev[s]) * (fg * (one - fg)));
    dz[b + 2 * H] = vtl_st(dct * ig * (one - gg * gg));
    dz[b + 3 * H] = vtl_st(dhs * t * (og * (one - og)));
    if (flags & 16) dcp[s] = vtl_st(dct * fg);
  }
""")

STEP_SPECS = (LSTM_STEP_FORWARD, LSTM_STEP_BACKWARD)


class LstmSteps:
    """The fused LSTM time steps on CuPy arrays (float32, float64, and float16/bfloat16
    computed in float32 and rounded once; C-contiguous operands, or ``None`` to let the
    caller run the product and the cell separately)."""

    _device_of = staticmethod(lambda a: a.device)
    #: the device address of an array's first element
    _address = staticmethod(lambda a: a.data.ptr)

    def __init__(self, cupy: Any) -> None:
        self._cp = cupy
        self._k = _Kernels(cupy)
        self.launches = 0

    def _ok(self, *arrays: Any) -> bool:
        nd = self._cp.ndarray
        dt = arrays[0].dtype
        return dt in FLOAT_NAMES and all(
            a is None or (type(a) is nd and a.dtype == dt and a.flags.c_contiguous)
            for a in arrays)

    def _contiguous(self, a: Any) -> Any:
        if type(a) is self._cp.ndarray and not a.flags.c_contiguous:
            return self._cp.ascontiguousarray(a)
        return a

    def _capturing(self) -> bool:
        """Whether this thread's work is being captured into a CUDA graph (``vtl.compile``).
        The steps then decline: a replayed graph runs cuBLAS's product and the cell's kernel
        faster than this kernel (an H200, LSTM 128 -> 256 over 32 steps at batch 64: a
        captured training step took 0.94 ms that way and 2.4 ms with these steps), while
        eagerly the launches these steps save are what a step waits on (8.2 -> 3.1 ms)."""
        get = getattr(getattr(self._cp, "cuda", None), "get_current_stream", None)
        if get is None:
            return False
        stream = get()
        return bool(stream.ptr) and stream.is_capturing()

    def _row_stride(self, a: Any) -> int | None:
        """The row stride (elements) of a 2-D CuPy array of the backend's floats whose rows
        are contiguous and do not step backwards; ``None`` otherwise."""
        if type(a) is not self._cp.ndarray or a.ndim != 2 or a.dtype not in FLOAT_NAMES:
            return None
        item = a.itemsize
        rs, cs = a.strides
        if (a.shape[1] > 1 and cs != item) or rs < 0 or rs % item:
            return None
        return rs // item

    @staticmethod
    def _grid(n: int, hs: int) -> tuple[int]:
        return (-(-n // _ROWS) * -(-hs // _UNITS),)

    def recurrent_weight(self, w_hh: Any) -> Any:
        """``W_hh^T`` ``(H, 4H)``, C-contiguous, for :meth:`step_forward` (``w_hh`` itself
        where the steps decline anyway: while a CUDA graph is captured)."""
        if self._capturing() or type(w_hh) is not self._cp.ndarray or w_hh.ndim != 2:
            return w_hh
        return self._cp.ascontiguousarray(w_hh.T)

    def step_forward(self, gates: Any, h: Any, w_hh: Any, c: Any, out: Any
                     ) -> tuple[Any, Any, Any, Any] | None:
        """``(h, c, act, tc)`` of one step from the step's input gates ``(N, 4H)``, the
        previous ``h``/``c`` ``(N, H)`` and ``W_hh^T`` ``(H, 4H)``
        (:meth:`recurrent_weight`), written into ``out`` (``h``, ``c``, ``act``, ``tc``:
        C-contiguous); ``None`` to decline."""
        if self._capturing():
            return None
        h, c = self._contiguous(h), self._contiguous(c)
        if not self._ok(gates, h, w_hh, c, *out) or h.ndim != 2 or 0 in h.shape \
                or w_hh.shape != (h.shape[1], 4 * h.shape[1]):
            return None
        n, hs = h.shape
        hout, cout, act, tc = out
        with self._device_of(gates):
            self._k.get(LSTM_STEP_FORWARD, gates.dtype)(self._grid(n, hs), _BLOCK, (
                gates, h, w_hh, c, hout, cout, tc, act, _I64(n), _I64(hs)))
        self.launches += 1
        return hout, cout, act, tc

    def _steps_of(self, a: Any, last: int) -> tuple[int, int] | None:
        """``(step stride, row stride)`` in bytes of a ``(T, N, last)`` array whose steps are
        each rows of ``last`` contiguous elements (any positive strides between them);
        ``None`` otherwise."""
        if type(a) is not self._cp.ndarray or a.ndim != 3 or a.shape[2] != last:
            return None
        st, rs, cs = a.strides
        item = a.itemsize
        if (last > 1 and cs != item) or st < 0 or rs < 0 or st % item or rs % item:
            return None
        return st, rs

    def layer_forward(self, gates: Any, h0: Any, c0: Any, w_hh: Any, reverse: bool
                      ) -> tuple[Any, Any, Any, Any] | None:
        """Every step of one layer, the :meth:`step_forward` launches one after another with
        their operands' addresses computed (no array views nor checks per step):
        ``(h_all, c_all, act_all, tc_all)``, ``(T, N, H)`` and ``act_all`` ``(T, N, 4H)``,
        from the input gates ``(T, N, 4H)`` (each step's rows contiguous); ``None`` to
        decline."""
        if self._capturing() or type(gates) is not self._cp.ndarray or gates.ndim != 3 \
                or getattr(h0, "ndim", 0) != 2:
            return None
        h0, c0 = self._contiguous(h0), self._contiguous(c0)
        steps, (n, hs) = gates.shape[0], h0.shape
        strides = self._steps_of(gates, 4 * hs)
        # the gates' steps at any stride (a step's rows contiguous), the rest C-contiguous
        if strides is None or strides[1] != 4 * hs * gates.itemsize or 0 in gates.shape \
                or not self._ok(h0, c0) or gates.dtype != h0.dtype or c0.shape != (n, hs) \
                or gates.shape[1] != n or getattr(w_hh, "shape", None) != (4 * hs, hs):
            return None
        wt = self.recurrent_weight(w_hh)
        if not self._ok(h0, wt):
            return None
        cp, dt, addr, ptr = self._cp, gates.dtype, self._address, np.uint64
        with self._device_of(gates):
            h_all, c_all, tc_all = (cp.empty((steps, n, hs), dtype=dt) for _ in range(3))
            act_all = cp.empty((steps, n, 4 * hs), dtype=dt)
            kern = self._k.get(LSTM_STEP_FORWARD, dt)
            grid, state, gate = self._grid(n, hs), n * hs * gates.itemsize, strides[0]
            g0, h_at, c_at, tc_at = addr(gates), addr(h_all), addr(c_all), addr(tc_all)
            a_at, n64, h64 = addr(act_all), _I64(n), _I64(hs)
            hp, cprev = addr(h0), addr(c0)
            for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
                o = t * state
                kern(grid, _BLOCK, (ptr(g0 + t * gate), ptr(hp), wt, ptr(cprev), ptr(h_at + o),
                                    ptr(c_at + o), ptr(tc_at + o), ptr(a_at + 4 * o), n64, h64))
                hp, cprev = h_at + o, c_at + o
        self.launches += steps
        return h_all, c_all, act_all, tc_all

    def layer_backward(self, saved: tuple, w_hh: Any, dout: Any, dhn: Any, dcn: Any,
                       need_c0: bool, reverse: bool) -> tuple[Any, Any] | None:
        """Every step of one layer backwards, the :meth:`step_backward` launches one after
        another with their operands' addresses computed: ``(dz_all, dc0)`` (the input gates'
        gradient ``(T, N, 4H)`` and, with ``need_c0``, ``c0``'s) from ``saved`` = ``(c0,
        c_all, act_all, tc_all)`` of :meth:`layer_forward` (or the steps' buffers), the
        output's gradient ``dout`` ``(T, N, H)`` and those of ``h_n``/``c_n`` (each may be
        ``None``; not all three); ``None`` to decline. ``h0``'s gradient is
        ``dz_all[first step] @ W_hh``."""
        if self._capturing() or (dout is None and dhn is None and dcn is None):
            return None
        c0, c_all, act_all, tc_all = saved
        if getattr(tc_all, "ndim", 0) != 3:
            return None
        c0, dhn, dcn = (self._contiguous(a) for a in (c0, dhn, dcn))
        steps, n, hs = tc_all.shape
        dt = getattr(tc_all, "dtype", None)
        if not self._ok(act_all, c0, c_all, tc_all, w_hh, dhn, dcn) or 0 in (steps, n, hs) \
                or act_all.shape != (steps, n, 4 * hs) or c_all.shape != tc_all.shape \
                or w_hh.shape != (4 * hs, hs) or c0.shape != (n, hs) \
                or any(a is not None and a.shape != (n, hs) for a in (dhn, dcn)):
            return None
        d2 = None
        if dout is not None:
            if type(dout) is not self._cp.ndarray or dout.dtype != dt \
                    or dout.shape != (steps, n, hs):
                return None
            d2 = self._steps_of(dout, hs)
            if d2 is None:
                dout = self._cp.ascontiguousarray(dout)
                d2 = self._steps_of(dout, hs)
        cp, addr, ptr, item = self._cp, self._address, np.uint64, tc_all.itemsize
        order = list(range(steps - 1, -1, -1) if reverse else range(steps))
        with self._device_of(tc_all):
            dz_all = cp.empty((steps, n, 4 * hs), dtype=dt)
            dcs = (cp.empty((n, hs), dtype=dt), cp.empty((n, hs), dtype=dt))
            kern = self._k.get(LSTM_STEP_BACKWARD, dt)
            grid, state = self._grid(n, hs), n * hs * item
            a_at, c_at, tc_at, z_at = addr(act_all), addr(c_all), addr(tc_all), addr(dz_all)
            dc_at = [addr(b) for b in dcs]
            n64, h64 = _I64(n), _I64(hs)
            ld2 = _I64(hs if d2 is None else d2[1] // item)
            o2 = 0 if dout is None else addr(dout)
            dc = None if dcn is None else addr(dcn)
            for k in range(steps - 1, -1, -1):
                t, o = order[k], order[k] * state
                last = k == steps - 1
                dh1 = addr(dhn) if last and dhn is not None else None
                flags = ((0 if last else 1) | (2 if dh1 is not None else 0)
                         | (4 if dout is not None else 0) | (8 if dc is not None else 0)
                         | (16 if k > 0 or need_c0 else 0))
                cprev = addr(c0) if k == 0 else c_at + order[k - 1] * state
                dcp = dc_at[k % 2]
                kern(grid, _BLOCK, (
                    ptr(a_at + 4 * o), ptr(cprev), ptr(tc_at + o),
                    ptr(a_at if last else z_at + 4 * order[k + 1] * state), w_hh,
                    ptr(tc_at + o if dh1 is None else dh1),
                    ptr(tc_at + o if dout is None else o2 + t * d2[0]),
                    ptr(tc_at + o if dc is None else dc), ptr(z_at + 4 * o), ptr(dcp),
                    n64, h64, _I32(flags), ld2))
                dc = dcp
        self.launches += steps
        return dz_all, (dcs[0] if need_c0 else None)

    def step_backward(self, act: Any, c_prev: Any, tc: Any, dz_next: Any, w_hh: Any,
                      dh: Any, dh2: Any, dc: Any, need_dc_prev: bool, out: Any
                      ) -> tuple[Any, Any] | None:
        """``(d_gates, d_c_prev)`` of one step, with ``dh = dz_next @ W_hh + dh + dh2``
        (each term may be ``None``) formed inside; ``d_gates`` goes into ``out``."""
        if self._capturing():
            return None
        c_prev, dh, dc = (self._contiguous(a) for a in (c_prev, dh, dc))
        # dh2 is read with its row stride where its rows are contiguous (no copy per step)
        ld2 = self._row_stride(dh2)
        if ld2 is None:
            dh2 = self._contiguous(dh2)
            ld2 = None if dh2 is None else dh2.shape[-1]
        if not self._ok(act, c_prev, tc, dz_next, w_hh, dh, dc, out) or tc.ndim != 2 \
                or 0 in tc.shape:
            return None
        n, hs = tc.shape
        if dh2 is not None and (type(dh2) is not self._cp.ndarray or dh2.dtype != act.dtype
                                or dh2.shape != (n, hs)):
            return None
        flags = ((1 if dz_next is not None else 0) | (2 if dh is not None else 0)
                 | (4 if dh2 is not None else 0) | (8 if dc is not None else 0)
                 | (16 if need_dc_prev else 0))
        cp = self._cp
        with self._device_of(act):
            dcp = cp.empty((n, hs), dtype=act.dtype) if need_dc_prev else None
            self._k.get(LSTM_STEP_BACKWARD, act.dtype)(self._grid(n, hs), _BLOCK, (
                act, c_prev, tc, act if dz_next is None else dz_next, w_hh,
                tc if dh is None else dh, tc if dh2 is None else dh2,
                tc if dc is None else dc, out, tc if dcp is None else dcp, _I64(n), _I64(hs),
                _I32(flags), _I64(hs if ld2 is None else ld2)))
        self.launches += 1
        return out, dcp
