"""``kernel("conv2d")`` of the wgpu backend (the contract is ``Conv2dKernel`` in
``vtl.backends.kernels``).

Implicit GEMM (:attr:`WgpuConv2d.implicit`, the default): the forward and both gradients
are the matmul kernels (``wgsl/linalg/matmul*.wgsl``) with loaders that gather their
operands from the input, the weight and the output gradient where they lie
(``wgsl/nn/conv_load_*.wgsl``), so no patch matrix is ever in memory and the backward keeps
only the input. One dispatch forward, one for the input gradient (the images folded into
the product's columns, ``wgsl/nn/conv_store.wgsl``, so small images fill whole tiles;
where the output fills too few large tiles to occupy the device, the large tiles over
slices of the depth, summed after: :func:`_depth_slices`) and one (plus the sum of its
depth slices) for the weight gradient: in the small tiles, whose
epilogue also sums the bias gradient, or in the large ones, with the bias gradient as two
reductions of the output gradient; any strides of the input and the output gradient (NCHW,
channels-last, views) are read in place.

im2col (``implicit = False``, kept as the reference the implicit kernels are tested
against): the patches of all images form one ``(N*HO*WO, C*kh*kw)`` matrix written by one
kernel (``wgsl/nn/conv_im2col.wgsl``), so the convolution is one batched product over the
images that writes NCHW directly (``images_product``; its epilogue adds the bias).
Backward: the output gradient in ``(N*HO*WO, O)`` order (one copy), the weight gradient
and the bias gradient in one product (``linear_grad_weight``), the patch gradient in
another, and one kernel (``wgsl/nn/conv_col2im.wgsl``) that sums each input pixel's taps:
a gather, no atomics.

Grouped convolutions take the portable path. float16/bfloat16 products and tap sums
accumulate in float32 and round once.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from .._common.conv import out_size
from . import _dtypes as D
from . import _kernels, _linalg, _reduction, _runtime
from ._array import WgpuArray, astype_raw, contiguous, empty
from ._kernels import compute_kernel
from ._linalg import (
    PLAIN,
    big_tiles,
    filled_big_tiles,
    matmul2d,
    matmul_kernel,
    split_depth,
    sum_slices,
    tiles,
)
from ._manipulation import permute_dims, reshape
from ._recorder import REC, groups_for
from .nn import (
    _ROW_BIAS,
    _ROWSUM,
    PRODUCT_FLOATS,
    images_product,
    linear,
    linear_grad_weight,
)

_FLOATS = PRODUCT_FLOATS

#: the most workgroups along one axis of a dispatch (WebGPU's default limit)
_MAX_GROUPS = 65535
#: weight gradients may take the 128x128-tile kernel (the bias gradient is then its own sum)
WGRAD_BIG_TILES = True
#: forwards and input gradients whose outputs fill too few 128x128 tiles may run them over
#: slices of their depth (:func:`_depth_slices`)
SLICED_BIG_TILES = True
#: the bias added by the first depth slice only (the slices are summed after)
_ROW_BIAS_FIRST = {**_ROW_BIAS,
                   "EPI": "v[c] + select({{C}}(0), {{C}}(Bias[pw(12u) + row * pw(13u)]), b == 0u)"}


class _Saved(NamedTuple):
    """What the implicit-GEMM forward keeps for the backward: its input."""

    x: Any


#: input gradients of at most this many input channels (an image's colour planes) are
#: computed directly (:func:`_dgrad_direct`), not as a product with a tile of 64 or 128 rows
DIRECT_DGRAD_CHANNELS = 8
#: the workgroup memory of the direct kernel's weights (four channels of each tap of some
#: output channels): WebGPU's default limit
_DIRECT_BYTES = 16384
#: large-tile forwards and input gradients (stride 1 or dilated) whose depth (slice) holds
#: a multiple of 8 channels walk it tap by tap (``wgsl/nn/conv_load_<op>_taps.wgsl``: a
#: tap's pixel worked out once for four loads)
TAPS_FIRST = True
#: the large-tile kernel's B fetch of the tap-major products (after the share's setup)
_TAPS_FETCH = ("  let bcol = conv_col(bBase, bfirst, N);", "      rb = fetch_b4(bcol, kt, bd);")


def _conv_kernel(op: str, dt: Any, layout: tuple[bool, bool], consts: dict, sig: str = "rrw",
                 epi: dict = PLAIN, out: Any = None, big: bool = False, depth_ch: int = 0
                 ) -> Any:
    """The matmul kernel with the implicit-GEMM loads of ``op`` (``fwd``, ``dgrad`` or
    ``wgrad``; ``wgsl/nn/conv_load_<op>.wgsl`` after the geometry helpers) and the
    compile-time constants ``consts`` (the kernel size ``KH``, ``KW`` and the layer's
    geometry, :func:`_geometry`; for ``fwd`` and ``dgrad`` the pixels and width of the
    images their columns hold, ``IMG_PIXELS`` and ``IMG_WIDTH``:
    ``wgsl/nn/conv_store.wgsl``; ``dgrad_phase``: those of
    ``wgsl/nn/conv_load_dgrad_phase.wgsl`` and ``conv_store_phase.wgsl``), named
    ``conv_<op>`` in dispatch logs. ``depth_ch``: the channels of the depth of a ``fwd`` or
    ``dgrad`` product (a slice's), for their tap-major form (:data:`TAPS_FIRST`)."""
    store = {"wgrad": "matmul_store", "dgrad_phase": "conv_store_phase"}.get(op, "conv_store")
    taps = op in ("fwd", "dgrad") and big and depth_ch and depth_ch % 8 == 0 and TAPS_FIRST
    if taps:
        consts = {**consts, "DEPTH_CH": depth_ch}
    return matmul_kernel(dt, layout, sig, epi, out, big, label=f"conv_{op}", store=store,
                         load=("conv_taps", f"conv_load_{op}{'_taps' if taps else ''}"),
                         consts=tuple(sorted(consts.items())),
                         b_fetch=_TAPS_FETCH if taps else None)


def _phases(size: int, stride: int, pad: int, taps: int) -> list[tuple[int, ...]]:
    """The stride phases of one axis of an input gradient (dilation 1): for each phase ``a``
    with pixels (``a + stride * u``, ``u < count``), ``(a, count, first tap, taps,
    base)``: the taps ``first + stride * r`` (``r < taps``) read it from output pixel
    ``base + u - r``."""
    out = []
    for a in range(min(stride, size)):
        first = (a + pad) % stride
        out.append((a, -(-(size - a) // stride), first, max(0, -(-(taps - first) // stride)),
                    (a + pad - first) // stride))
    return out


def _wgrad_plan(dt: Any, rows: int, cols: int, total: int) -> tuple[bool, int, int, int, int]:
    """``(big, gx, gy, depth, slices)`` of a weight gradient's product (``rows`` x ``cols``
    over a depth of ``total`` output pixels): the large tiles where :data:`WGRAD_BIG_TILES`
    allows and its tiles over the depth slices fill the device, else the small ones (whose
    epilogue can also sum the bias gradient); the depth in slices (split-K) where the tiles
    alone are too few (for the large tiles, also where they are too few for the device but
    enough to skip the small tiles' split: ``_linalg.big_split_depth``)."""
    for big in (True, False) if WGRAD_BIG_TILES else (False,):
        gx, gy = tiles(rows, cols, big)
        depth = split_depth(gx * gy, total) \
            or (big and _linalg.big_split_depth(dt, rows, cols, total)) or total
        slices = -(-total // depth)
        if not big or big_tiles(dt, rows, cols, slices):
            return big, gx, gy, depth, slices
    raise AssertionError("unreachable: the small tiles always serve")


def _depth_slices(dt: Any, rows: int, cols: int, chans: int, taps: int) -> int:
    """The number of depth slices (split-K, each of whole channels of ``taps`` taps) in
    which an implicit-GEMM product of ``rows`` x ``cols`` over ``chans * taps`` runs the
    large tiles, or 0 for one pass: where its output fills the large tiles but too few of
    them to occupy the device (the 64x64 tiles would serve), they run over enough slices for
    ``BIG_MIN_TILES`` workgroups, each at least ``BIG_SPLIT_MIN_DEPTH`` deep; the channels
    must split evenly (every slice's depth is the same)."""
    t = filled_big_tiles(dt, rows, cols) if SLICED_BIG_TILES else 0
    if t == 0 or t >= _linalg.BIG_MIN_TILES:
        return 0
    for s in range(-(-_linalg.BIG_MIN_TILES // t), min(chans // 2, _MAX_GROUPS) + 1):
        if chans % s == 0:
            return s if chans // s * taps >= _linalg.BIG_SPLIT_MIN_DEPTH else 0
    return 0


def _image_grid(dt: Any, rows: int, pixels: int, n: int) -> tuple[int, bool, tuple] | None:
    """``(columns, big, (gx, gy, gz))`` of the product of ``rows`` over ``n`` images of
    ``pixels`` each: the images folded into its columns (one dispatch of whole tiles however
    small the images), or where that grid is too wide one image per batch entry; ``None``
    where neither fits a dispatch."""
    big = big_tiles(dt, rows, n * pixels)
    gx, gy = tiles(rows, n * pixels, big)
    if max(gx, gy) <= _MAX_GROUPS:
        return n * pixels, big, (gx, gy, 1)
    big = big_tiles(dt, rows, pixels, n)
    gx, gy = tiles(rows, pixels, big)
    if max(gx, gy, n) > _MAX_GROUPS:
        return None
    return pixels, big, (gx, gy, n)


def _pairs(kh: int, kw: int, stride: tuple, dilation: tuple, padding: tuple
           ) -> list[int] | None:
    """The 16-bit pairs of conv_taps.wgsl (words 18..21), ``None`` where one does not fit."""
    pairs = ((kh, kw), stride, dilation, (padding[0], padding[2]))
    if any(not 0 <= v < 1 << 16 for pair in pairs for v in pair):
        return None
    return [lo | hi << 16 for lo, hi in pairs]


def _geometry(x_shape: tuple[int, ...], ho: int, wo: int, stride: tuple, padding: tuple,
              dilation: tuple) -> dict[str, int]:
    """The compile-time geometry of ``wgsl/nn/conv_taps.wgsl`` (a pipeline per layer shape,
    as for the kernel size and the images' pixels)."""
    return {"IN_H": x_shape[2], "IN_W": x_shape[3], "OUT_H": ho, "OUT_W": wo,
            "STRIDE_H": stride[0], "STRIDE_W": stride[1], "DIL_H": dilation[0],
            "DIL_W": dilation[1], "PAD_T": padding[0], "PAD_L": padding[2]}


def _bindable(*sizes: int) -> bool:
    """Whether buffers of ``sizes`` bytes can each be bound whole."""
    return max(sizes) <= _runtime.get().max_binding


def _words(total: int, k: int, x_shape: tuple[int, ...], geom: tuple, offset: int) -> list:
    (sh, sw), (pt, _, pl, _), (dh, dw), kh, kw, ho, wo = geom
    _, c, h, w = x_shape
    return [total, k, c, h, w, kh, kw, ho, wo, sh, sw, pt, pl, dh, dw, offset]


def _im2col(x: WgpuArray, geom: tuple) -> WgpuArray:
    """The ``(N*HO*WO, C*kh*kw)`` patch matrix of ``x`` by one dispatch (``geom``: stride,
    padding, dilation, kh, kw, HO, WO)."""
    kh, kw, ho, wo = geom[3:]
    x = contiguous(x)
    n, c = x.shape[:2]
    m, k = n * ho * wo, c * kh * kw
    col = empty((m, k), x.dtype)
    kern = _kernels.kernel("conv_im2col", "rw", (x.dtype,), T=D.wgsl(x.dtype))
    REC.dispatch(kern, (x._st.buf, col._st.buf), _words(m * k, k, x.shape, geom, x._offset),
                 groups_for(m * k))
    return col


class WgpuConv2d:
    """conv2d without groups as implicit-GEMM products, or one patch kernel and products
    (float32, float64, float16, bfloat16)."""

    #: ``True``: the implicit-GEMM kernels; ``False``: im2col and products (the reference)
    implicit = True

    def supports(self, dtype: Any) -> bool:
        return dtype in _FLOATS

    def forward(self, x: Any, w: Any, b: Any, stride: tuple[int, int],
                padding: tuple[int, int, int, int], dilation: tuple[int, int],
                groups: int) -> tuple[Any, Any] | None:
        if groups != 1 or type(x) is not WgpuArray or type(w) is not WgpuArray \
                or x.ndim != 4 or w.ndim != 4:
            return None
        n, c, h, wd = x.shape
        o, _, kh, kw = w.shape
        ho = out_size(h, kh, stride[0], padding[0], padding[1], dilation[0])
        wo = out_size(wd, kw, stride[1], padding[2], padding[3], dilation[1])
        k, m = c * kh * kw, n * ho * wo
        if self.implicit and min(k, m, o) > 0:
            res = _implicit_forward(x, w, b, stride, padding, dilation, ho, wo)
            if res is not None:
                return res
        big = max(m * max(k, o), x.size) * D.itemsize(x.dtype) > _runtime.get().max_binding
        if big or min(k, m, o) <= 0:
            return None  # the kernels bind whole buffers (one binding's limit)
        col = _im2col(x, (stride, padding, dilation, kh, kw, ho, wo))
        w2 = reshape(contiguous(w), (o, k))
        out = images_product(w2, col, b, n)  # (N, O, HO*WO): NCHW, bias added
        if out is None:
            y = linear(col, w2, b)  # (N*HO*WO, O) + bias
            if y is None:
                return None
            out = contiguous(permute_dims(reshape(y, (n, ho * wo, o)), (0, 2, 1)))
        return reshape(out, (n, o, ho, wo)), col

    def backward(self, ctx: Any, x_shape: tuple[int, ...], w: Any, g: Any,
                 stride: tuple[int, int], padding: tuple[int, int, int, int],
                 dilation: tuple[int, int], groups: int, need_x: bool, need_w: bool,
                 need_b: bool) -> tuple[Any, Any, Any]:
        n = x_shape[0]
        o, c, kh, kw = w.shape
        ho, wo = g.shape[2:]
        k, m = c * kh * kw, n * ho * wo
        col = ctx
        if isinstance(ctx, _Saved) or ctx is None and self.implicit:
            res = _implicit_backward(None if ctx is None else ctx.x, x_shape, w, g, stride,
                                     padding, dilation, need_x, need_w, need_b)
            if res is not None:
                return res
            if ctx is not None:  # declined after an implicit forward: the patches now
                col = _im2col(ctx.x, (stride, padding, dilation, kh, kw, ho, wo))
        gm = reshape(contiguous(permute_dims(g, (0, 2, 3, 1))), (m, o))
        dx = dw = db = None
        if need_w or need_b:
            gw, db = linear_grad_weight(gm, col, need_b)  # (O, K) and (O,)
            dw = reshape(gw, (o, c, kh, kw)) if need_w else None
        if need_x:
            dcol = matmul2d(gm, reshape(contiguous(w), (o, k)))  # (N*HO*WO, K)
            dx = empty(x_shape, g.dtype)
            t = D.wgsl(g.dtype)
            kern = _kernels.kernel("conv_col2im", "rw", (g.dtype,), T=t, D=g.dtype.name,
                                   C="f32" if t == "f16" else t)
            geom = (stride, padding, dilation, kh, kw, ho, wo)
            REC.dispatch(kern, (dcol._st.buf, dx._st.buf),
                         _words(dx.size, k, x_shape, geom, dcol._offset), groups_for(dx.size))
        return dx, dw, db


def _implicit_forward(x: WgpuArray, w: WgpuArray, b: Any, stride: tuple, padding: tuple,
                      dilation: tuple, ho: int, wo: int) -> tuple[Any, _Saved] | None:
    """The forward by one implicit-GEMM dispatch (a batch entry per image, written in NCHW
    order with the bias added); ``None`` where it does not apply."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    pairs = _pairs(kh, kw, stride, dilation, padding)
    dt = x.dtype
    if b is not None and (type(b) is not WgpuArray or b.dtype != dt or b.shape != (o,)):
        return None
    k, p = c * kh * kw, ho * wo
    w2 = contiguous(w)
    grid = _image_grid(dt, o, p, n)
    if pairs is None or w2.dtype != dt or grid is None or not _bindable(
            x._st.buf.cap, w2._st.buf.cap, n * o * p * D.itemsize(dt)):
        return None
    cols, big, groups = grid
    sxn, sxc, sxh, sxw = x._strides
    words = [o, cols, k, w2._offset, x._offset, 0, 0, k, 1, sxn, 0, 0, 0, 0,
             h, wd, ho, wo, *pairs, sxc, sxh, sxw, sxn, n if groups[2] == 1 else 1]
    size = {"KH": kh, "KW": kw, "IMG_PIXELS": p, "IMG_WIDTH": wo,
            **_geometry(x.shape, ho, wo, stride, padding, dilation)}
    slices = _depth_slices(dt, o, cols, c, kh * kw) if groups[2] == 1 else 0
    pdt = D.compute_dtype(dt) if slices else dt
    if slices and not _bindable(slices * n * o * p * D.itemsize(pdt)):
        slices, pdt = 0, dt
    per = c // slices if slices else c
    if slices:  # the large tiles over whole channels of the depth (entry s: slice s)
        out = empty((slices, n, o, ho, wo), pdt)
        words[2], words[6], words[9] = per * kh * kw, per * kh * kw, per * sxc
        big, groups = True, (*tiles(o, cols, True), slices)
    else:
        out = empty((n, o, ho, wo), dt)
    bufs = (w2._st.buf, x._st.buf, out._st.buf)
    if b is None:
        kern = _conv_kernel("fwd", dt, (False, False), size, out=pdt, big=big, depth_ch=per)
    else:
        kern = _conv_kernel("fwd", dt, (False, False), size, "rrwr",
                            _ROW_BIAS_FIRST if slices else _ROW_BIAS, out=pdt, big=big,
                            depth_ch=per)
        bufs += (b._st.buf,)
        words[12:14] = [b._offset, b._strides[0]]
    REC.dispatch(kern, bufs, words, *groups)
    return (sum_slices(out, dt) if slices else out), _Saved(x)


def _implicit_backward(x: Any, x_shape: tuple[int, ...], w: WgpuArray, g: WgpuArray,
                       stride: tuple, padding: tuple, dilation: tuple, need_x: bool,
                       need_w: bool, need_b: bool) -> tuple[Any, Any, Any] | None:
    """``(dx, dw, db)`` by implicit-GEMM dispatches: the input gradient with the images
    folded into its columns (or one per batch entry; by stride phases where strided), the
    weight gradient in slices of its depth, summed after (in the small tiles the bias
    gradient is the row sums of its first operand; else :func:`_bias_grad`); ``None`` where
    they do not apply."""
    n, c, h, wd = x_shape
    o, _, kh, kw = w.shape
    ho, wo = g.shape[2:]
    dt = g.dtype
    pairs = _pairs(kh, kw, stride, dilation, padding)
    if type(g) is not WgpuArray or g.ndim != 4 or pairs is None:
        return None
    khw = kh * kw
    sgn, sgc, sgh, sgw = g._strides
    w2 = contiguous(w) if need_x else w
    want_w = need_w and x is not None
    direct = need_x and c <= DIRECT_DGRAD_CHANNELS and khw <= _direct_taps(dt)
    grid = _image_grid(dt, c, h * wd, n) if need_x and not direct else None
    if need_x and ((grid is None and not direct) or not _bindable(
            w2._st.buf.cap, g._st.buf.cap, n * c * h * wd * D.itemsize(dt))):
        return None
    total = n * ho * wo
    big_w, gx_w, gy_w, depth, parts = _wgrad_plan(dt, o, c * khw, total)
    if max(gx_w, gy_w) > _MAX_GROUPS:
        return None
    if want_w:
        pdt = D.compute_dtype(dt)
        if x.dtype != dt or parts > _MAX_GROUPS or not _bindable(
                x._st.buf.cap, g._st.buf.cap, parts * o * c * khw * D.itemsize(pdt)):
            return None
    dx = dw = db = None
    size = {"KH": kh, "KW": kw, **_geometry(x_shape, ho, wo, stride, padding, dilation)}
    if direct:
        dx = _dgrad_direct(w2, g, tuple(x_shape), size)
    elif need_x:
        words = [c, 0, o * khw, w2._offset, g._offset, 0, 0, khw, c * khw, sgn, 0, 0,
                 0, 0, h, wd, ho, wo, *pairs, sgc, sgh, sgw, sgn, 1]
        if max(stride) == 1 or dilation != (1, 1):
            cols = {**size, "IMG_PIXELS": h * wd, "IMG_WIDTH": wd}
            dx = _dgrad(w2, g, tuple(x_shape), words, cols, grid)
        else:
            dx = empty(tuple(x_shape), dt)
            _dgrad_by_phases((w2._st.buf, g._st.buf, dx._st.buf), words, dt, (n, c, h, wd),
                             o, size, stride, padding)
    if want_w:
        acc = empty((parts, o, c * khw), pdt)
        sxn, sxc, sxh, sxw = x._strides
        words = [o, c * khw, depth, 0, 0, 0, depth, total, 0, depth, 0, 0, 0, 0,
                 h, wd, ho, wo, *pairs, sxc, sxh, sxw, sxn, x._offset,
                 sgn, sgc, sgh, sgw, g._offset]
        bufs = (g._st.buf, x._st.buf, acc._st.buf)
        rowsums = need_b and not big_w  # the small tiles sum the bias gradient too
        if rowsums:
            rs = empty((parts, o), pdt)
            kern = _conv_kernel("wgrad", dt, (False, True), size, "rrww", _ROWSUM, out=pdt)
            bufs += (rs._st.buf,)
        else:
            kern = _conv_kernel("wgrad", dt, (False, True), size, out=pdt, big=big_w)
        REC.dispatch(kern, bufs, words, gx_w, gy_w, parts)
        dw = reshape(sum_slices(acc, dt), (o, c, kh, kw))
        if rowsums:
            db = sum_slices(rs, dt)
    if need_b and db is None:
        db = _bias_grad(g)
    return dx, dw if need_w else None, db


def _direct_taps(dt: Any) -> int:
    """The most taps whose weights of four channels fit the direct kernel's workgroup."""
    return _DIRECT_BYTES // (4 * D.itemsize(D.compute_dtype(dt)))


def _dgrad_direct(w2: WgpuArray, g: WgpuArray, x_shape: tuple, consts: dict) -> WgpuArray:
    """The input gradient of a convolution with at most :data:`DIRECT_DGRAD_CHANNELS` input
    channels by ``wgsl/nn/conv_dgrad_direct.wgsl`` (any stride, dilation and layout of
    ``g``): a thread per input pixel and four channels, over the output channels and taps."""
    n, c, h, wd = x_shape
    o = w2.shape[0]
    khw = consts["KH"] * consts["KW"]
    dx = empty(x_shape, g.dtype)
    kern = compute_kernel("conv_dgrad_direct", "rrw", g.dtype, TAPS=_kernels.source("conv_taps"),
                          OC=min(64, _direct_taps(g.dtype) // khw), **consts)
    pixels = n * h * wd
    REC.dispatch(kern, (w2._st.buf, g._st.buf, dx._st.buf),
                 [pixels, c, o, w2._offset, g._offset, *g._strides],
                 groups_for(pixels) * -(-c // 4))
    return dx


def _dgrad(w2: WgpuArray, g: WgpuArray, x_shape: tuple, words: list, consts: dict,
           grid: tuple) -> WgpuArray:
    """The input gradient (stride 1 or dilated) by one implicit-GEMM dispatch in the
    ``grid`` of :func:`_image_grid`, or over depth slices of whole output channels
    (:func:`_depth_slices`), summed after."""
    dt = g.dtype
    n, c = x_shape[:2]
    o = w2.shape[0]
    khw = consts["KH"] * consts["KW"]
    cols, big, groups = grid
    words[1] = cols
    if groups[2] == 1:
        words[26] = n  # the images are columns: a slice's results follow n images
        slices = _depth_slices(dt, c, cols, o, khw)
        pdt = D.compute_dtype(dt)
        if slices and _bindable(slices * math.prod(x_shape) * D.itemsize(pdt)):
            per = o // slices
            acc = empty((slices, *x_shape), pdt)
            words[2], words[6], words[9] = per * khw, per * c * khw, per * words[22]
            REC.dispatch(_conv_kernel("dgrad", dt, (False, False), consts, out=pdt, big=True,
                                      depth_ch=per),
                         (w2._st.buf, g._st.buf, acc._st.buf), words,
                         *tiles(c, cols, True), slices)
            return sum_slices(acc, dt)
    dx = empty(x_shape, dt)
    REC.dispatch(_conv_kernel("dgrad", dt, (False, False), consts, big=big, depth_ch=o),
                 (w2._st.buf, g._st.buf, dx._st.buf), words, *groups)
    return dx


def _bias_grad(g: WgpuArray) -> WgpuArray:
    """The bias gradient, ``g`` (NCHW) summed over its images and pixels: the pixels of each
    (image, channel) row, then the images (two reductions, no transposed copy)."""
    pdt = D.compute_dtype(g.dtype)
    per_image = _reduction.sum(g, axis=(2, 3), dtype=pdt)
    db = _reduction.sum(per_image, axis=0, dtype=pdt)
    return db if pdt == g.dtype else astype_raw(db, g.dtype)


def _dgrad_by_phases(bufs: tuple, words: list, dt: Any, x_shape: tuple, o: int, size: dict,
                     stride: tuple, padding: tuple) -> None:
    """A strided convolution's input gradient (dilation 1) as one product per stride phase
    (``wgsl/nn/conv_load_dgrad_phase.wgsl``): each walks only the taps that read its
    pixels; a phase no tap reads is written zero by a product of no depth."""
    n, c, h, wd = x_shape
    kh, kw = size["KH"], size["KW"]
    for a, rows, i0, ti, bh in _phases(h, stride[0], padding[0], kh):
        for b, cols, j0, tj, bw in _phases(wd, stride[1], padding[2], kw):
            width, big, groups = _image_grid(dt, c, rows * cols, n)
            words[1:3] = [width, o * ti * tj]
            consts = {**size, "SH": stride[0], "SW": stride[1], "I0": i0, "J0": j0,
                      "TI": max(ti, 1), "TJ": max(tj, 1), "BH": bh, "BW": bw,
                      "IMG_PIXELS": rows * cols, "IMG_WIDTH": cols, "OUT_PIXELS": h * wd,
                      "OUT_WIDTH": wd, "PA": a, "PB": b}
            REC.dispatch(_conv_kernel("dgrad_phase", dt, (False, False), consts, big=big),
                         bufs, list(words), *groups)
