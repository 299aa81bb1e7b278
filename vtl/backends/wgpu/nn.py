"""Fused kernels of ``vtl.nn`` ops on the wgpu backend (``linear``, ``linear_grad_weight``,
``relu_backward``, ``cross_entropy``; the contracts are in ``vtl.backends.kernels``).

Each replaces a chain of portable array-API calls by fewer dispatches; the
portable versions stay the reference (``tests/test_wgpu_nn_kernels.py`` checks
that both agree):

* ``linear``: ``x @ w.T + b`` as one matmul whose epilogue adds the bias;
* ``linear_grad_weight``: ``g.T @ x`` and the bias gradient ``sum(g, axis=0)`` in
  one matmul that also writes the row sums of its left operand ``g.T``;
* ``relu_backward``: ``where(x <= 0, 0, g)`` as one flat kernel;
* ``cross_entropy``/``cross_entropy_grad``: log-softmax, the picked log
  probability, the ignore mask and the sum/mean in one dispatch (two above
  ``CE_ONE_GROUP`` elements with a reduction), the logits' gradient in one more.

Kernels take raw arrays and return ``None`` when they do not handle the
arguments (the caller then takes the portable path).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._common.ranges import targets_in_range
from .._common.row_blocks import row_blocks
from . import _dtypes as D
from . import _errors, _fuse, _kernels, _reduction, _runtime
from ._array import (
    WgpuArray,
    astype_raw,
    contiguous,
    empty,
    fresh,
    known_range,
    view,
    words_for_scalar,
)
from ._indexing import _CHECK_SUBS
from ._linalg import (
    PLAIN,
    big_reads,
    big_split_depth,
    big_tiles,
    cols_contiguous,
    matmul2d,
    matmul_kernel,
    split_depth,
    split_plan,
    split_product,
    tiles,
)
from ._recorder import REC, groups_for
from ._row_lanes import SLOTS, lane_subs, row_groups, row_lanes

_FLOATS = (D.float32, D.float64)
#: the dtypes of ``linear``/``linear_grad_weight``: 16-bit products accumulate in float32
PRODUCT_FLOATS = (D.float32, D.float64, D.float16, D.bfloat16)

# -- matmul with an epilogue -------------------------------------------------------------------

_BIAS = {
    "DECL": "@group(0) @binding(3) var<storage, read> Bias: array<{{T}}>;",
    "INIT": "", "ACC": "",
    "EPI": "v[c] + {{C}}(Bias[pw(12u) + (col + c) * pw(13u)])", "TAIL": "",
}
#: ``relu`` of the product (``_RELU``) or of the product plus the bias (``_BIAS_RELU``):
#: ``t <= 0`` gives 0, anything else (nan too) passes, as ``maximum(t, 0)``; nan by its bits,
#: since a driver may compile ``select(t, 0, t <= 0)`` as ``max(t, 0)``, which drops nan
_RELU_FN = ("fn vtl_relu(t: {{C}}) -> {{C}} { return select(t, {{C}}(0), t <= {{C}}(0) && "
            "(bitcast<u32>(f32(t)) & 0x7fffffffu) <= 0x7f800000u); }")
_RELU = {**PLAIN, "DECL": _RELU_FN, "EPI": "vtl_relu(v[c])"}
_BIAS_RELU = {**_BIAS, "DECL": _BIAS["DECL"] + "\n" + _RELU_FN,
              "EPI": "vtl_relu(" + _BIAS["EPI"] + ")"}
#: the bias of each output row (a convolution's channels in ``images_product``)
_ROW_BIAS = {**_BIAS, "EPI": "v[c] + {{C}}(Bias[pw(12u) + row * pw(13u)])"}
_ROWSUM = {
    "DECL": "@group(0) @binding(3) var<storage, read_write> Rs: array<{{O}}>;",
    "INIT": "  var rs = vec4<{{C}}>();",
    "ACC": "      rs += a;",
    "EPI": "v[c]",
    "TAIL": ("  if (wid.x == 0u && tx == 0u) {\n"
             "    for (var r = 0u; r < 4u; r++) {\n"
             "      let row = m0 + ty * 4u + r;\n"
             "      if (row < M) { Rs[pw(12u) + b * M + row] = wrap_{{OD}}({{O}}(rs[r])); }\n"
             "    }\n  }"),
}


def _mm2(a: WgpuArray, b: WgpuArray, extra: WgpuArray | None, epi: dict, ewords: tuple
         ) -> WgpuArray:
    """``a @ b`` of 2-D arrays (any strides) with the epilogue ``epi`` (``_BIAS``,
    ``_BIAS_RELU`` or ``_ROWSUM`` binding ``extra``; ``_RELU`` with ``extra`` None)."""
    M, K = a._shape
    N = b._shape[1]
    dt = a._dtype
    out = fresh((M, N), dt, M * N, D.itemsize(dt))
    big = epi is not _ROWSUM and big_tiles(dt, M, N)  # row sums need the 64x64 kernel's rows
    sig = "rrw" if extra is None else "rrww" if epi is _ROWSUM else "rrwr"
    layout = cols_contiguous(a._strides, b._strides)
    vec = big_reads(dt, layout, M, N, K, a._strides, b._strides, (a._offset,),
                    (b._offset,)) if big else (False, False)
    k = matmul_kernel(dt, layout, sig, epi, big=big, vec=vec)
    bufs = (a._st.buf, b._st.buf, out._st.buf)
    REC.dispatch(k, bufs if extra is None else (*bufs, extra._st.buf),
                 [M, N, K, a._offset, b._offset, 0, 0, *a._strides, 0, *b._strides, *ewords],
                 *tiles(M, N, big))
    return out


def images_product(w: Any, col: Any, b: Any, n: int) -> Any | None:
    """``(n, O, P)``: ``w @ col[i]^T (+ b per row)`` for each of the ``n`` images whose
    ``P = rows / n`` patch rows ``col`` (``(n * P, K)``, contiguous) holds, ``w`` ``(O, K)``:
    a convolution's output in NCHW order from one batched product (no copy of an
    ``(n * P, O)`` result into NCHW). ``None`` where it does not apply."""
    if not (_ok2(w, col, 0) and col._contig and w._contig and w.shape[1] == col.shape[1]
            and 0 < n <= 65535 and col.shape[0] % n == 0):
        return None
    if b is not None and (type(b) is not WgpuArray or b.dtype != w.dtype
                          or b.shape != (w.shape[0],)):
        return None
    o, k = w.shape
    p = col.shape[0] // n
    dt = w.dtype
    out = empty((n, o, p), dt)
    big = big_tiles(dt, o, p, n)
    # A: the weights for every image (batch stride 0); B[i]: image i's patches transposed
    words = [o, p, k, w._offset, col._offset, 0, 0, k, 1, p * k, 1, k]
    bufs = (w._st.buf, col._st.buf, out._st.buf)
    if b is None:
        kern = matmul_kernel(dt, (False, True), big=big)
    else:
        kern = matmul_kernel(dt, (False, True), "rrwr", _ROW_BIAS, big=big)
        bufs += (b._st.buf,)
        words += [b._offset, b._strides[0]]
    REC.dispatch(kern, bufs, words, *tiles(o, p, big), n)
    return out


def _ok2(a: Any, b: Any, b_axis: int) -> bool:
    """Whether ``a`` and ``b`` are 2-D wgpu arrays of one float dtype, with no empty axis in
    ``a`` and a non-empty axis ``b_axis`` of ``b``."""
    return (type(a) is WgpuArray and a.ndim == 2 and type(b) is WgpuArray and b.ndim == 2
            and a.dtype in PRODUCT_FLOATS and b.dtype == a.dtype
            and a.shape[0] != 0 and a.shape[1] != 0 and b.shape[b_axis] != 0)


def linear(x: Any, w: Any, b: Any, relu: bool = False) -> Any:
    """``x @ w.T + b`` for a 2-D ``x`` (M, in), ``w`` (out, in), ``b`` (out,) or None; with
    ``relu``, ``maximum(x @ w.T + b, 0)``: one dispatch either way."""
    if not _ok2(x, w, 0):
        return None
    wt = w.T
    if b is None and not relu:
        return matmul2d(x, wt)  # which takes depth slices where they serve
    if b is not None and (type(b) is not WgpuArray or b.dtype != x.dtype
                          or b.shape != (w.shape[0],)):
        return None
    depth, big = split_plan(x.dtype, x.shape[0], w.shape[0], x.shape[1])
    if depth:  # a deep product with few output tiles: over depth slices, summed after
        if relu:
            return None  # the caller applies the ReLU to the sum
        return split_product(x, wt, depth, big=big, bias=b)[0]
    if b is None:
        return _mm2(x, wt, None, _RELU, ())
    return _mm2(x, wt, b, _BIAS_RELU if relu else _BIAS, (b._offset, b._strides[0]))


def linear_grad_weight(g: Any, x: Any, bias: bool) -> Any:
    """``(g.T @ x, sum(g, axis=0) if bias else None)`` for 2-D ``g`` (M, out), ``x`` (M, in)."""
    if not _ok2(g, x, 1):
        return None
    n_out = g.shape[1]
    gt = g.T
    if not bias:
        return matmul2d(gt, x), None
    depth = big_split_depth(g.dtype, n_out, x.shape[1], g.shape[0])
    if depth:  # the large tiles have no row-sum epilogue: the bias gradient on its own
        pdt = D.compute_dtype(g.dtype)
        gb = _reduction.sum(g, axis=0, dtype=pdt)
        return (split_product(gt, x, depth, big=True)[0],
                gb if pdt == g.dtype else astype_raw(gb, g.dtype))
    gx, gy = tiles(n_out, x.shape[1], False)
    depth = split_depth(gx * gy, g.shape[0])
    if depth:
        return split_product(gt, x, depth, _ROWSUM)
    gb = empty((n_out,), g.dtype)
    gw = _mm2(gt, x, gb, _ROWSUM, (gb._offset,))
    return gw, gb


# -- relu backward -----------------------------------------------------------------------------

def _relu_grad(tr, x, g):
    return tr.where(tr.binary("less_equal", x, 0), 0, g)


def relu_backward(x: Any, g: Any) -> Any:
    """``where(x <= 0, 0, g)`` (relu's gradient; nan in ``x`` passes ``g`` through)."""
    if (type(x) is not WgpuArray or type(g) is not WgpuArray or x.shape != g.shape
            or x.dtype != g.dtype or D.kind(x.dtype) != "f" or not (x._contig and g._contig)):
        return None
    return _fuse.run_cached("relu_backward", _relu_grad, [x, g])


# -- cross-entropy -----------------------------------------------------------------------------

#: largest M * C computed by one workgroup when the loss is reduced (above: two dispatches)
CE_ONE_GROUP = 1 << 16
_CE_MODES = {"none": 0, "sum": 1, "mean": 2}


def _target_subs(tdt: np.dtype) -> dict:
    ti = D.wgsl(tdt)
    rng = f"tv < {ti}(C)" if tdt.kind == "u" else f"tv >= {ti}(0) && tv < {ti}(C)"
    split = _CHECK_SUBS[ti]  # the target as two words for the error buffer
    return {"TI": ti, "DTI": tdt.name, "INRANGE": rng, "LO": split["LO"], "HI": split["HI"]}


#: the error code of a class target outside ``[0, C)`` found by the kernel
_TARGET_ERROR = ("cross_entropy(): ", "{name}target {value} is out of bounds for {size} classes")


def _ignore_words(tdt: np.dtype, ignore_index: int) -> list[int]:
    """has_ignore, then the ignore index in the target's dtype (absent when it cannot occur)."""
    info = np.iinfo(tdt)
    if not info.min <= ignore_index <= info.max:
        return [0, 0, 0]
    v = int(ignore_index)
    return [1, v & 0xFFFFFFFF, (v >> 32) & 0xFFFFFFFF]


def targets_valid(t: Any, c: int, ignore_index: int) -> bool | None:
    """``True`` when no host check is needed: the known value range of the targets shows
    them valid, or no range is known (the kernel checks on the device and the thread's next
    read-back raises the error, ``_errors``); ``None`` when a known range shows a possibly
    bad target (the caller checks eagerly, naming the first one)."""
    kr = known_range(t)
    return True if kr is None or targets_in_range(kr, c, ignore_index) else None


def _exp_log(dt: np.dtype) -> dict[str, str]:
    """``EXP``/``LOG`` of a kernel computing in ``dt``: the builtins, or for float64 the
    ``m64_`` library's (WGSL's exp and log take no float64)."""
    f64 = dt == D.float64
    return {"EXP": "m64_exp" if f64 else "exp", "LOG": "m64_log" if f64 else "log"}


class CrossEntropy:
    """``kernels["cross_entropy"]``: ``fwd(x, t, reduction, ignore_index)`` ->
    ``(loss, saved)`` or ``None``; ``grad(x, t, saved, g, reduction, ignore_index)`` ->
    the logits' gradient. ``x`` is (M, C) float32/float64, ``t`` (M,) integers whose
    values were checked by the caller (``targets_valid`` or a device check)."""

    targets_valid = staticmethod(targets_valid)

    def __init__(self) -> None:
        self.launches = 0

    def supports(self, x: Any, t: Any) -> bool:
        return (type(x) is WgpuArray and type(t) is WgpuArray and x.ndim == 2 and t.ndim == 1
                and x.dtype in _FLOATS and D.kind(t.dtype) in "iu" and x.shape[0] == t.shape[0]
                and x.shape[1] > 0 and x.shape[0] > 0)

    def _words(self, x: WgpuArray, t: WgpuArray, mode: int) -> list[int]:
        M, C = x.shape
        return [M, C, x._offset, x._strides[0], x._strides[1], t._offset, t._strides[0], mode]

    def fwd(self, x: WgpuArray, t: WgpuArray, reduction: str, ignore_index: int) -> tuple:
        mode = _CE_MODES[reduction]
        M, C = x.shape
        dt = x.dtype
        out = empty((M,) if mode == 0 else (), dt)
        groups = 1 if mode and M * C <= CE_ONE_GROUP else min(groups_for(M), 1024)
        saved = empty((2 * M + 1 + 2 * groups,), dt)
        k = _kernels.kernel("cross_entropy", "rrwww", (dt, t.dtype), T=D.wgsl(dt), D=dt.name,
                            **_exp_log(dt), **_target_subs(t.dtype))
        base = self._words(x, t, mode)
        ig = [*_ignore_words(t.dtype, ignore_index), _errors.code(*_TARGET_ERROR)]
        # the error buffer is written only where the targets' values are not known valid
        err = _errors.buffer(write=known_range(t) is None)
        bufs = (x._st.buf, t._st.buf, out._st.buf, saved._st.buf, err)
        REC.dispatch(k, bufs, [*base, 0, 0, out._offset, *ig], groups)
        if mode and groups > 1:
            REC.dispatch(k, bufs, [*base, 1, groups, out._offset, *ig], 1)
        self.launches += 1 + (mode and groups > 1)
        return out, saved

    def grad(self, x: WgpuArray, t: WgpuArray, saved: WgpuArray, g: WgpuArray,
             reduction: str, ignore_index: int) -> WgpuArray:
        mode = _CE_MODES[reduction]
        M, C = x.shape
        dt = x.dtype
        if g.dtype != dt:
            g = astype_raw(g, dt)
        sg = g._strides[0] if mode == 0 and g.ndim else 0
        out = empty((M, C), dt)
        k = _kernels.kernel("cross_entropy_grad", "rrrrw", (dt, t.dtype), T=D.wgsl(dt),
                            D=dt.name, **_exp_log(dt), **_target_subs(t.dtype))
        words = [*self._words(x, t, mode), g._offset, sg,
                 *_ignore_words(t.dtype, ignore_index)]
        REC.dispatch(k, (x._st.buf, t._st.buf, saved._st.buf, g._st.buf, out._st.buf), words,
                     groups_for(M * C))
        self.launches += 1
        return out


#: layer_norm's weight and bias gradients: up to this many rows in one block (whose sums
#: are the gradients: one launch), else blocks of at least LN_BLOCK_ROWS rows, at most
#: LN_MAX_BLOCKS of them (each block's partial sums are 2 N values)
LN_ONE_BLOCK_ROWS = 64
LN_BLOCK_ROWS = 8
LN_MAX_BLOCKS = 256


def _ln_blocks(m: int) -> tuple[int, int]:
    """``(blocks, rows per block)`` for the partial sums over ``m`` rows."""
    if m <= LN_ONE_BLOCK_ROWS:
        return 1, max(m, 1)
    return row_blocks(m, LN_BLOCK_ROWS, LN_MAX_BLOCKS)


#: loads of columns a workgroup of ``layer_norm_params_sum`` adds up
LN_SUM_COLS = 8
#: the row elements one invocation of the row kernels holds (``_row_lanes.SLOTS``)
LN_SLOTS = SLOTS


def _ln_width(dt: np.dtype, n: int, *arrays: Any) -> int:
    """Elements a load in the layer_norm kernels: 4 (vec4 loads) for float32 rows whose
    length and every array's offset are multiples of 4, else 1."""
    if dt != D.float32 or n % 4:
        return 1
    for a in arrays:
        if a is not None and a._offset % 4:
            return 1
    return 4


def _ln_subs(width: int) -> dict[str, str]:
    """The layer_norm templates' load type ``V``, its compute type ``VC``, ``W``, and how
    a load is summed (``HSUM``) and stored (``STORE``)."""
    if width == 4:  # float32 only (_ln_width): nothing to round
        return {"V": "vec4<{{T}}>", "VC": "vec4<{{C}}>", "W": "4",
                "HSUM": "(v.x + v.y) + (v.z + v.w)", "STORE": "v"}
    return {"V": "{{T}}", "VC": "{{C}}", "W": "1", "HSUM": "v", "STORE": "wrap_{{D}}({{T}}(v))"}


def _ln_row_kernel(name: str, sig: str, dt: np.dtype, n: int, width: int) -> tuple[int, Any]:
    """``(invocations a row, kernel)``: the row kernel ``name`` for rows of ``n``
    elements of ``dt`` read in loads of ``width`` (``compute_kernel`` caches it)."""
    tpr = row_lanes(n, LN_SLOTS)
    return tpr, _kernels.compute_kernel(name, sig, dt, **_ln_subs(width), TPR=f"{tpr}u",
                                        SLOTS=str(LN_SLOTS // width))


class LayerNorm:
    """``kernel("layer_norm")``: one dispatch each way, 32 to 256 invocations a row
    (``wgsl/nn/layer_norm.wgsl``, ``layer_norm_grad.wgsl``, ``_row_lanes``), the weight
    and bias gradients from partial sums over blocks of rows (``layer_norm_params.wgsl``,
    added up by ``layer_norm_params_sum.wgsl``); with
    ``rms=True`` rms_norm's rows (no centring). float32/float64, and float16/bfloat16 rows
    computed in float32 with float32 statistics, each output rounded once. float32 rows
    whose length and offsets are multiples of 4 move in vec4 loads (``_ln_width``)."""

    #: forward and backward take ``rms=True`` (``LayerNormKernel``)
    takes_rms = True

    def __init__(self) -> None:
        self.launches = 0

    def supports(self, dtype: Any) -> bool:
        return dtype in PRODUCT_FLOATS

    def forward(self, x: Any, w: Any, b: Any, eps: float, rms: bool = False) -> tuple | None:
        if type(x) is not WgpuArray or x.ndim != 2 or x.dtype not in PRODUCT_FLOATS:
            return None
        m, n = x.shape
        dt = x.dtype
        cdt = D.compute_dtype(dt)
        for p in (w, b):
            if p is not None and (type(p) is not WgpuArray or p.dtype != dt):
                return None
        x = contiguous(x)
        w = None if w is None else contiguous(w)
        b = None if b is None else contiguous(b)
        y = fresh((m, n), dt, m * n, D.itemsize(dt))
        stats = fresh((m, 2), cdt, 2 * m, D.itemsize(cdt))
        tpr, k = _ln_row_kernel("layer_norm", "rrrww", dt, n, _ln_width(dt, n, x, w, b, y))
        flags = (1 if w is not None else 0) | (2 if b is not None else 0) | (4 if rms else 0)
        words = [m, n, x._offset, 0 if w is None else w._offset, 0 if b is None else b._offset,
                 y._offset, stats._offset, flags, *words_for_scalar(eps, cdt)]
        bufs = (x._st.buf, (w if w is not None else x)._st.buf,
                (b if b is not None else x)._st.buf, y._st.buf, stats._st.buf)
        REC.dispatch(k, bufs, words, row_groups(m, tpr))
        self.launches += 1
        return y, view(stats, (m, 1), (2, 1), 0), view(stats, (m, 1), (2, 1), 1)

    def backward(self, x: Any, w: Any, mean: Any, rstd: Any, g: Any, need_x: bool,
                 need_w: bool, need_b: bool, rms: bool = False) -> tuple | None:
        m, n = x.shape
        dt = x.dtype
        cdt = D.compute_dtype(dt)
        # the statistics of forward(): views of one (M, 2) array of the compute dtype
        if (type(mean) is not WgpuArray or mean._st is not rstd._st
                or rstd._offset != mean._offset + 1 or mean._strides != (2, 1)
                or mean.dtype != cdt or type(g) is not WgpuArray or g.dtype != dt
                or -(-n // 256) > _runtime.get().max_groups):  # the sums' grid is 2-D
            return None
        x = contiguous(x)
        g = contiguous(g)
        w = None if w is None else contiguous(w)
        dx = dw = db = None
        width = _ln_width(dt, n, x, g, w)
        if need_x:
            dx = fresh((m, n), dt, m * n, D.itemsize(dt))
            tpr, k = _ln_row_kernel("layer_norm_grad", "rrrrw", dt, n, width)
            words = [m, n, x._offset, 0 if w is None else w._offset, g._offset, mean._offset,
                     dx._offset, (1 if w is not None else 0) | (4 if rms else 0)]
            bufs = (x._st.buf, (w if w is not None else x)._st.buf, g._st.buf, mean._st.buf,
                    dx._st.buf)
            REC.dispatch(k, bufs, words, row_groups(m, tpr))
            self.launches += 1
        if need_w or need_b:
            blocks, rows = _ln_blocks(m)
            one = blocks == 1  # the partial sums are the gradients: one launch
            pdt = dt if one else cdt
            part = fresh((2 * blocks, n), pdt, 2 * blocks * n, D.itemsize(pdt))
            subs = _ln_subs(width)
            k = _kernels.compute_kernel("layer_norm_params", "rrrw", dt, **subs,
                                        P="{{V}}" if one else "{{VC}}",
                                        PUT=subs["STORE"] if one else "v")
            REC.dispatch(k, (x._st.buf, g._st.buf, mean._st.buf, part._st.buf),
                         [m, n, x._offset, g._offset, mean._offset, part._offset, rows],
                         -(-n // (256 * width)), blocks)
            self.launches += 1
            if one:
                sw, sb = view(part, (n,), (1,), 0), view(part, (n,), (1,), n)
            else:
                sw, sb = empty((n,), dt), empty((n,), dt)
                k = _kernels.compute_kernel("layer_norm_params_sum", "rww", dt, **subs,
                                            CW=str(LN_SUM_COLS))
                REC.dispatch(k, (part._st.buf, sw._st.buf, sb._st.buf),
                             [n, blocks, part._offset, sw._offset, sb._offset],
                             -(-n // (LN_SUM_COLS * width)))
                self.launches += 1
            dw = sw if need_w else None
            db = sb if need_b else None
        return dx, dw, db


class BatchNorm:
    """``kernel("batch_norm")``: training-mode batch normalisation in three dispatches each
    way (``wgsl/nn/batch_norm_*.wgsl``): per-channel sums in slabs (the deviations from the
    channel's first element, so a large mean keeps its variance), an invocation per channel
    for the statistics, one elementwise pass; and the running statistics' update in one
    more. float32/float64, and float16/bfloat16 inputs computed in float32 with float32
    weight and bias (autocast's case) and float32 statistics."""

    takes_float32_params = True
    #: workgroups the statistics dispatch aims at, and the fewest elements a slab gets
    BLOCKS = 1024
    SLAB_MIN = 4096
    #: float32 arrays whose planes and offsets are multiples of 4 take the elementwise pass
    #: a vec4 an invocation (``batch_norm_apply.wgsl`` with ``W`` 4, the same values)
    VEC4 = True

    def __init__(self) -> None:
        self.launches = 0

    def supports(self, dtype: Any) -> bool:
        return dtype in PRODUCT_FLOATS

    def _param(self, p: Any, c: int, dt: Any, cdt: Any) -> Any:
        if p is None:
            return None
        if type(p) is not WgpuArray or p.shape != (c,) or p.dtype not in (dt, cdt):
            return False
        return contiguous(astype_raw(p, cdt) if p.dtype != cdt else p)

    def forward(self, x: Any, w: Any, b: Any, eps: float) -> tuple | None:
        if type(x) is not WgpuArray or x.ndim < 2 or x.dtype not in PRODUCT_FLOATS \
                or 0 in x.shape:
            return None
        dt = x.dtype
        cdt = D.compute_dtype(dt)
        n, c = x.shape[:2]
        hw = x.size // (n * c)
        wa, ba = self._param(w, c, dt, cdt), self._param(b, c, dt, cdt)
        if wa is False or ba is False or n * hw < 2:
            return None
        x = contiguous(x)
        slabs = max(1, min(-(-self.BLOCKS // c), -(-(n * hw) // self.SLAB_MIN)))
        part = empty((c * slabs * 2,), cdt)
        stats = empty((5, c), cdt)
        REC.dispatch(_kernels.compute_kernel("batch_norm_partial", "rrrw", dt),
                     (x._st.buf, x._st.buf, stats._st.buf, part._st.buf),
                     [c, hw, n * hw, slabs, 0, x._offset, x._offset, stats._offset,
                      part._offset], c * slabs)
        flags = (1 if wa is not None else 0) | (2 if ba is not None else 0)
        wb, bb = (part if a is None else a for a in (wa, ba))  # unread where not given
        REC.dispatch(_kernels.compute_kernel("batch_norm_stats", "rrrrw", dt),
                     (part._st.buf, x._st.buf, wb._st.buf, bb._st.buf, stats._st.buf),
                     [c, hw, n * hw, slabs, flags, x._offset, wb._offset, bb._offset,
                      stats._offset, part._offset, *words_for_scalar(eps, cdt)],
                     groups_for(c))
        y = empty(x.shape, dt)
        self._apply(x, x, stats, stats, y, c, hw, 0)
        self.launches += 3
        return y, stats[0], stats[1], (x, stats, slabs)

    def _apply(self, x: Any, g: Any, stats: Any, coef: Any, out: Any, c: int, hw: int,
               mode: int) -> None:
        n = x.size
        if (self.VEC4 and x.dtype == D.float32 and not hw & 3
                and not (x._offset | g._offset | out._offset) & 3):
            k = _kernels.compute_kernel("batch_norm_apply", "rrrrw", x.dtype, W="4",
                                        V="vec4<f32>", CV="vec4<f32>", STORE="v")
            n //= 4
        else:
            k = _kernels.compute_kernel("batch_norm_apply", "rrrrw", x.dtype, W="1",
                                        V="{{T}}", CV="{{C}}",
                                        STORE="wrap_{{D}}({{T}}(v))")
        REC.dispatch(k, (x._st.buf, g._st.buf, stats._st.buf, coef._st.buf, out._st.buf),
                     [c, hw, n, mode, x._offset, g._offset, stats._offset, coef._offset,
                      out._offset], groups_for(n))

    def update_running(self, mean: Any, var: Any, running_mean: Any, running_var: Any,
                       momentum: float, count: int) -> bool:
        """The running statistics' update in one dispatch (see the CuPy kernel's)."""
        arrays = (mean, var, running_mean, running_var)
        if not all(type(a) is WgpuArray and a.ndim == 1 for a in arrays):
            return False
        dt = mean.dtype
        c = mean.shape[0]
        if dt not in _FLOATS or any(a.dtype != dt or a.shape != (c,) or not a._contig
                                    for a in arrays) \
                or mean._st is not var._st or running_mean._st.buf is running_var._st.buf:
            return False
        words = [c, mean._offset, var._offset, running_mean._offset, running_var._offset,
                 *words_for_scalar(1.0 - momentum, dt), *words_for_scalar(momentum, dt),
                 *words_for_scalar(momentum * count / (count - 1), dt)]
        REC.dispatch(_kernels.compute_kernel("batch_norm_running", "rww", dt),
                     (mean._st.buf, running_mean._st.buf, running_var._st.buf), words,
                     groups_for(c))
        self.launches += 1
        return True

    def backward(self, saved: Any, w: Any, g: Any, need_x: bool, need_w: bool,
                 need_b: bool) -> tuple | None:
        x, stats, slabs = saved
        if type(g) is not WgpuArray or g.shape != x.shape or g.dtype not in PRODUCT_FLOATS:
            return None
        dt = x.dtype
        cdt = stats.dtype
        n, c = x.shape[:2]
        hw = x.size // (n * c)
        g = contiguous(astype_raw(g, dt) if g.dtype != dt else g)
        part = empty((c * slabs * 2,), cdt)
        REC.dispatch(_kernels.compute_kernel("batch_norm_partial", "rrrw", dt),
                     (x._st.buf, g._st.buf, stats._st.buf, part._st.buf),
                     [c, hw, n * hw, slabs, 1, x._offset, g._offset, stats._offset,
                      part._offset], c * slabs)
        wb = empty((2, c), cdt)
        coef = empty((2, c), cdt)
        REC.dispatch(_kernels.compute_kernel("batch_norm_coeffs", "rrww", dt),
                     (part._st.buf, stats._st.buf, wb._st.buf, coef._st.buf),
                     [c, n * hw, slabs, stats._offset, wb._offset, coef._offset,
                      part._offset], groups_for(c))
        self.launches += 2
        dx = None
        if need_x:
            dx = empty(x.shape, dt)
            self._apply(x, g, stats, coef, dx, c, hw, 1)
            self.launches += 1
        pdt = cdt if w is None else w.dtype
        dw = (astype_raw(wb[0], pdt) if pdt != cdt else wb[0]) if need_w else None
        db = (astype_raw(wb[1], pdt) if pdt != cdt else wb[1]) if need_b else None
        return dx, dw, db


def _x_g_out(x: Any, g: Any, takes: Any) -> tuple[Any, Any, Any] | None:
    """Contiguous ``x`` (and ``g``, ``None`` for a forward) and a new array of ``x``'s shape
    and dtype for a kernel of bindings ``(x, g or x, out)``; ``None`` for operands it does
    not take (``takes(dtype)`` false, ``g`` unlike ``x``, empty or beyond a binding)."""
    if type(x) is not WgpuArray or not takes(x.dtype) or (
            g is not None and (type(g) is not WgpuArray or g.dtype != x.dtype
                               or g.shape != x.shape)):
        return None
    n, isz = x.size, D.itemsize(x.dtype)
    if n == 0 or n * isz > _runtime.get().max_binding:
        return None
    return contiguous(x), None if g is None else contiguous(g), fresh(x.shape, x.dtype, n, isz)


def _dispatch_x_g(kern: Any, x: Any, g: Any, y: Any, head: list[int], groups: int) -> Any:
    """Dispatch ``kern`` over ``(x, g or x, y)`` with the words ``head`` and then the three
    arrays' offsets; returns ``y``."""
    REC.dispatch(kern, (x._st.buf, (g if g is not None else x)._st.buf, y._st.buf),
                 [*head, x._offset, 0 if g is None else g._offset, y._offset], groups)
    return y


class Gelu:
    """``kernel("gelu")`` for float32, float16 and bfloat16: one dispatch each way
    (``wgsl/nn/gelu.wgsl``, erfc by the portable code's rational approximations), computed
    in float32 and rounded once."""

    _MODES = {"none": 0, "tanh": 1}
    _DTYPES = (D.float32, D.float16, D.bfloat16)

    def supports(self, dtype: Any) -> bool:
        return dtype in self._DTYPES

    def _run(self, x: Any, g: Any, mode: int) -> Any:
        arrays = _x_g_out(x, g, self.supports)
        if arrays is None:
            return None
        n = x.size
        return _dispatch_x_g(_kernels.compute_kernel("gelu", "rrw", x.dtype), *arrays,
                             [n, mode], groups_for(n))

    def forward(self, x: Any, approximate: str) -> Any:
        return self._run(x, None, self._MODES[approximate])

    def backward(self, x: Any, g: Any, approximate: str) -> Any:
        return self._run(x, g, 2 + self._MODES[approximate])


class Softmax:
    """``kernel("softmax")``: softmax and log_softmax over the last axis and their
    gradients, one dispatch each (``wgsl/nn/softmax.wgsl``, 32 to 256 invocations a row,
    ``_row_lanes``):
    float32, float64 (with ``shader-f64``; exp and log from the library's float64 math), and
    float16/bfloat16 rows computed in float32 and rounded once."""

    _DTYPES = (D.float32, D.float16, D.bfloat16)

    def supports(self, dtype: Any) -> bool:
        if dtype == D.float64:
            from . import _runtime

            return "shader-f64" in _runtime.get().features
        return dtype in self._DTYPES

    def _run(self, mode: int, x: Any, g: Any) -> Any:
        arrays = None if getattr(x, "ndim", 0) == 0 else _x_g_out(x, g, self.supports)
        if arrays is None:
            return None
        n = x.shape[-1]
        m = x.size // n
        tpr = row_lanes(n)
        k = _kernels.compute_kernel("softmax", "rrw", x.dtype, **_exp_log(x.dtype),
                                    **lane_subs(tpr))
        return _dispatch_x_g(k, *arrays, [m, n, mode], row_groups(m, tpr))

    def forward(self, x: Any, log: bool) -> Any:
        return self._run(1 if log else 0, x, None)

    def backward(self, y: Any, g: Any, log: bool) -> Any:
        return self._run(3 if log else 2, y, g)


class Special:
    """``kernel("special")``: ``erf`` and ``erfc`` of float32 arrays and their gradients,
    one dispatch each (``wgsl/nn/special.wgsl``, the portable code's rational approximations
    in float32); float64 and ``erfinv`` are left to the portable code."""

    _MODES = {"erf": 0, "erfc": 1}

    def supports(self, name: str, dtype: Any) -> bool:
        return name in self._MODES and dtype == D.float32

    def _run(self, mode: int, x: Any, g: Any) -> Any:
        arrays = _x_g_out(x, g, lambda dt: dt == D.float32)
        if arrays is None:
            return None
        n = x.size
        return _dispatch_x_g(_kernels.kernel("special", "rrw", (D.float32,)), *arrays,
                             [n, mode], groups_for(n))

    def __call__(self, name: str, x: Any) -> Any:
        mode = self._MODES.get(name)
        return None if mode is None else self._run(mode, x, None)

    def grad(self, name: str, x: Any, g: Any) -> Any:
        mode = self._MODES.get(name)
        return None if mode is None else self._run(2 + mode, x, g)


def _sigmoid(tr, x):
    """``1 / (1 + exp(-x))`` traced (0 where ``exp(-x)`` overflows)."""
    e = tr.unary("exp", tr.unary("negative", x))
    return tr.binary("divide", 1.0, tr.binary("add", e, 1.0))


def _silu(tr, x):
    return tr.binary("multiply", x, _sigmoid(tr, x))


def _silu_grad(tr, x, g):
    s = _sigmoid(tr, x)
    d = tr.binary("add", tr.binary("multiply", x, tr.binary("subtract", 1.0, s)), 1.0)
    return tr.binary("multiply", g, tr.binary("multiply", s, d))


class Silu:
    """``kernel("silu")``: one fused elementwise dispatch each way (``_fuse``), any float
    dtype of the device, contiguous operands."""

    def supports(self, dtype: Any) -> bool:
        return D.kind(dtype) == "f"

    def forward(self, x: Any) -> Any:
        if type(x) is not WgpuArray or D.kind(x.dtype) != "f":
            return None
        return _fuse.run_cached("silu", _silu, [contiguous(x)])

    def backward(self, x: Any, g: Any) -> Any:
        if type(x) is not WgpuArray or type(g) is not WgpuArray or g.dtype != x.dtype \
                or g.shape != x.shape or D.kind(x.dtype) != "f":
            return None
        return _fuse.run_cached("silu_grad", _silu_grad, [contiguous(x), contiguous(g)])


