"""``kernels["conv2d"]`` of the NumPy backend: im2col convolution in tiles of images.

The batch is cut into tiles of about :data:`TILE` patch elements (the same tiles on any
number of threads). For each tile the patches are written by strided copies (one per tap)
into a per-thread scratch buffer in the *wide* layout ``(G, C/G*kh*kw, M*Ho*Wo)``, used
by one product per group while they are still in cache, and dropped: the patches of the
whole batch never exist, and the forward keeps only the input for the backward.

* forward: patches, one product with the ``(G, O/G, C/G*kh*kw)`` weight, the result put
  in NCHW place with the bias added in the same pass;
* weight gradient: the tile's patches again, one product with the tile's output gradient;
  the tiles' partial sums are added in tile order (the same bits on any thread count);
* input gradient: for stride 1 (padding at most the dilated kernel's reach) the
  convolution of the output gradient with the flipped, channel-swapped weight, through the
  forward's tiles (patch copies, no adds); otherwise the patch gradient of the tile and
  col2im (strided adds into a zeroed padded scratch buffer).

Threads (from :data:`THRESHOLD` patch elements): the tiles go to the persistent thread
pool of :func:`num_threads` threads (the usable CPUs, capped by ``vtl.set_num_threads`` or
``VTL_NUM_THREADS``), each thread taking the next free tile; NumPy releases the GIL in
copies, ufuncs and BLAS calls. With :data:`ONE_BLAS_THREAD` each pool thread asks NumPy's
OpenBLAS for one thread of its own (``openblas_set_num_threads_local``), so the threads'
products run side by side. Every output element is computed the same way on any number
of threads.

``NumpyConv2d.tiled = False`` selects :class:`StridedConv2d`'s whole-batch im2col instead
(its per-image and wide layouts, with the patches kept for the backward): the reference
the tiled kernel is tested against.
"""

from __future__ import annotations

import ctypes
import glob
import itertools
import os
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from .._common.conv import StridedConv2d, _blocks, _taps_in, _taps_out, out_size, tap_slices
from .._common.threads import num_threads, parallel_for, pass_threads, scratch
from . import _compiled
from . import _winograd as winograd
from .nn import _FLOATS

__all__ = ["FLIP", "THRESHOLD", "TILE", "WINOGRAD_KEEP", "WINOGRAD_TILE", "NumpyConv2d",
           "WinogradContext"]

#: Patch elements of one tile of images: its patches and their products stay in the
#: core's cache.
TILE = 1 << 18

#: Elements of the transformed tiles (``36 * tiles * max(C, K)``) of one group of images
#: on the Winograd path (their transforms and products stay in the core's cache).
WINOGRAD_TILE = 1 << 18

#: The most elements of transformed input (``36 * tiles * C`` over the batch, about 2.25
#: times the layer's input) a Winograd forward keeps for its weight gradient; a larger
#: layer's backward transforms its input again (the same values), so the memory a step
#: holds stays near the activations' own.
WINOGRAD_KEEP = 1 << 23

#: Whether the tiles running on the pool's threads ask NumPy's OpenBLAS for one thread each
#: (``openblas_set_num_threads_local``, OpenBLAS 0.3.27+; no effect where NumPy's BLAS has
#: no such call): the threads' products then run side by side instead of each product
#: waiting for the BLAS threads another product holds.
ONE_BLAS_THREAD = True

#: Whether a stride-1 convolution's input gradient may be computed as a convolution of the
#: output gradient with the flipped weight (its patches are copies, where col2im adds). It
#: is, where the output has at most as many channels per group as the input: that
#: convolution's patches hold the output's channels (O*kh*kw per pixel), col2im's product
#: the input's (C*kh*kw), so with more output channels the patches cost more than col2im's
#: adds save (3 -> 64 channels at 32x32, batch 64: 25.6 ms flipped, 3.7 ms by col2im).
FLIP = True

#: Patch elements (``N * (C/G*kh*kw + 1) * G * Ho*Wo``) from which the NumPy kernel takes the
#: wide layout and the thread pool; below it everything runs on the calling thread.
THRESHOLD = 1 << 18


def channel_sums(g: Any) -> Any:
    """``g.sum(axis=(0, 2, 3))`` of an ``(N, C, H, W)`` gradient (a convolution's bias
    gradient): each image's per-channel sums over the pixels (NumPy's pairwise sums along
    the contiguous rows), split over the pool by images from :data:`THRESHOLD` elements,
    then their sum over the images. The same values whatever the number of threads."""
    n, c = g.shape[:2]
    if not g.flags.c_contiguous or g.size == 0:
        return g.sum(axis=(0, 2, 3))
    g3 = g.reshape(n, c, -1)
    part = np.empty((n, c), dtype=g.dtype)
    threads = pass_threads(g.size, THRESHOLD)
    parallel_for(lambda i, j: np.sum(g3[i:j], axis=2, out=part[i:j]), n, threads)
    return part.sum(axis=0)


class WinogradContext(NamedTuple):
    """What a Winograd forward keeps for its backward: the input, the ``(36, K, C)``
    transformed weight, and up to :data:`WINOGRAD_KEEP` elements the tiles of images with
    each tile's transformed input (``(36, rows, C)``, for the weight gradient: the backward
    does not transform the input again; ``None`` for larger layers)."""

    x: Any
    u: Any
    blocks: list[tuple[int, int]] | None = None
    v: list[Any] | None = None


class NumpyConv2d(StridedConv2d):
    """The NumPy backend's ``conv2d`` kernel: :class:`StridedConv2d` on NumPy arrays, with
    the passes over the patches split over the thread pool from :data:`THRESHOLD` patch
    elements, and the wide layout from ``ONE_PRODUCT_THREADS`` threads."""

    #: ``True``: the tiled kernel (patches per tile of images, never the whole batch's);
    #: ``False``: :class:`StridedConv2d`'s whole-batch im2col (kept as the reference).
    tiled = True

    def __init__(self) -> None:
        super().__init__(np)

    def forward(self, x: Any, w: Any, b: Any, stride: tuple[int, int],
                padding: tuple[int, int, int, int], dilation: tuple[int, int],
                groups: int) -> tuple[Any, Any]:
        if not self.tiled:
            return super().forward(x, w, b, stride, padding, dilation, groups)
        if self._winograd(x.shape, w, x.dtype, stride, padding, dilation, groups):
            return self._winograd_forward(x, w, b, padding)
        n, c, h, wd = x.shape
        o, cg, kh, kw = w.shape
        pt, pb, pl, pr = padding
        ho = out_size(h, kh, stride[0], pt, pb, dilation[0])
        wo = out_size(wd, kw, stride[1], pl, pr, dilation[1])
        geom = (stride, padding, dilation, groups, kh, kw, ho, wo)
        hw = ho * wo
        k = cg * kh * kw
        og = o // groups
        wm = np.ascontiguousarray(w).reshape(groups, og, k)
        bias = None if b is None else b.reshape(groups, og, 1)
        blocks = _tiles(n, groups * k * hw)
        out = np.empty((n, o, ho, wo), dtype=x.dtype)
        out4 = out.reshape(n, groups, og, hw)

        def run(i: int, j: int) -> None:
            for a, e in blocks[i:j]:
                _conv_tile(x[a:e], wm, bias, geom, out4[a:e])

        _pool_run(run, len(blocks), self._tile_threads(n * groups * k * hw))
        return out, x

    def backward(self, ctx: Any, x_shape: tuple[int, ...], w: Any, g: Any,
                 stride: tuple[int, int], padding: tuple[int, int, int, int],
                 dilation: tuple[int, int], groups: int, need_x: bool, need_w: bool,
                 need_b: bool) -> tuple[Any, Any, Any]:
        if not self.tiled or ctx is not None and not isinstance(ctx, WinogradContext) and \
                ctx.shape != tuple(x_shape):
            return super().backward(ctx, x_shape, w, g, stride, padding, dilation, groups,
                                    need_x, need_w, need_b)
        if isinstance(ctx, WinogradContext) or ctx is None and self._winograd(
                x_shape, w, g.dtype, stride, padding, dilation, groups):
            return self._winograd_backward(ctx, x_shape, w, g, padding, need_x, need_w,
                                           need_b)
        x = ctx
        n = x_shape[0]
        o, cg, kh, kw = w.shape
        og = o // groups
        ho, wo = g.shape[2:]
        hw = ho * wo
        k = cg * kh * kw
        geom = (stride, padding, dilation, groups, kh, kw, ho, wo)
        need_w = need_w and x is not None
        db = channel_sums(g) if need_b else None
        if not (need_x or need_w):
            return None, None, db
        g4 = g.reshape(n, groups, og, hw)
        wt = np.ascontiguousarray(w).reshape(groups, og, k).transpose(0, 2, 1)
        blocks = _tiles(n, groups * k * hw)
        # the weight gradient's transpose per tile: patches @ g^T runs faster in the BLAS
        # than g @ patches^T (the long axis of the patches stays their rows)
        parts = np.empty((len(blocks), groups, k, og), dtype=g.dtype) if need_w else None
        dx = np.empty(x_shape, dtype=g.dtype) if need_x else None
        flip = _flipped(w, geom, x_shape) if need_x else None
        if flip is not None:  # stride 1: dx is the convolution of g with the flipped weight
            wf, geom_f = flip
            dx4 = dx.reshape(n, groups, x_shape[1] // groups, x_shape[2] * x_shape[3])
            fblocks = _tiles(n, groups * wf.shape[2] * dx4.shape[3])

        def run(i: int, j: int) -> None:
            for t in range(i, j):
                a, e = blocks[t]
                m = e - a
                if need_w or flip is None:
                    gm = scratch("conv_g", (groups, og, m * hw), g.dtype)
                    gm.reshape(groups, og, m, hw)[...] = g4[a:e].transpose(1, 2, 0, 3)
                if need_w:
                    col = _im2col_tile(x[a:e], geom, k)
                    np.matmul(col, gm.transpose(0, 2, 1), out=parts[t])
                if need_x and flip is None:
                    dcol = np.matmul(wt, gm, out=scratch("conv_col", (groups, k, m * hw),
                                                         g.dtype))
                    _col2im_tile(dcol, dx[a:e], geom)

        threads = self._tile_threads(n * groups * k * hw)
        if need_w or flip is None:
            _pool_run(run, len(blocks), threads)
        if flip is not None:
            def run_dx(i: int, j: int) -> None:
                for a, e in fblocks[i:j]:
                    _conv_tile(g[a:e], wf, None, geom_f, dx4[a:e])

            _pool_run(run_dx, len(fblocks), threads)
        dw = None
        if need_w:  # the tiles' partial sums added in tile order: the same on any threads
            dw = parts[0] if len(blocks) == 1 else np.add.reduce(parts, axis=0)
            dw = np.ascontiguousarray(dw.transpose(0, 2, 1)).reshape(o, cg, kh, kw)
        return dx, dw, db

    def _winograd(self, x_shape: tuple[int, ...], w: Any, dtype: Any, stride: tuple,
                  padding: tuple, dilation: tuple, groups: int) -> bool:
        """Whether this convolution takes the Winograd F(4x4, 3x3) path."""
        return w.dtype == dtype and winograd.fits(x_shape, w.shape, dtype, stride, padding,
                                                  dilation, groups)

    def _winograd_forward(self, x: Any, w: Any, b: Any, padding: tuple
                          ) -> tuple[Any, WinogradContext]:
        """The forward pass by Winograd F(4x4, 3x3), tile of images by tile of images;
        the context keeps the input and the transformed weight."""
        n, c, h, wd = x.shape
        o = w.shape[0]
        pt, pb, pl, pr = padding
        ho, wo = h + pt + pb - 2, wd + pl + pr - 2
        th, tw = winograd.tiles(ho, wo)
        t = th * tw
        u = winograd.weight_transform(w)
        ut = u.transpose(0, 2, 1)  # (36, C, K)
        bias = None if b is None else np.ascontiguousarray(b, dtype=x.dtype)
        out = np.empty((n, o, ho, wo), dtype=x.dtype)
        per_image = 36 * t * max(c, o)
        blocks = _tiles(n, per_image, WINOGRAD_TILE)

        keep = n * 36 * t * c <= WINOGRAD_KEEP
        kept: list[Any] = [None] * len(blocks)

        def run(i: int, j: int) -> None:
            for k in range(i, j):
                a, e = blocks[k]
                rows = (e - a) * t
                v_all, v = _transformed(None if keep else "wino_v", rows, c, x.dtype)
                winograd.input_transform(np.ascontiguousarray(x[a:e]), pt, pl, th, tw, v_all)
                m_all, m = _transformed("wino_m", rows, o, x.dtype)
                np.matmul(v, ut, out=m)
                winograd.output_transform(m_all, bias, out[a:e])
                if keep:
                    kept[k] = v

        _pool_run(run, len(blocks), self._tile_threads(n * per_image))
        return out, WinogradContext(x, u, blocks, kept) if keep else WinogradContext(x, u)

    def _winograd_backward(self, ctx: Any, x_shape: tuple[int, ...], w: Any, g: Any,
                           padding: tuple, need_x: bool, need_w: bool, need_b: bool
                           ) -> tuple[Any, Any, Any]:
        """The backward pass by Winograd F(4x4, 3x3): the exact adjoint of the forward's
        transforms and products; the weight gradient's per-tile parts added in tile
        order. ``ctx`` is the forward's :class:`WinogradContext` (``None``: the weight's
        transform is formed again and no weight gradient can be given)."""
        x, u = (None, None) if ctx is None else (ctx.x, ctx.u)
        kept = None if ctx is None else ctx.v
        n, c = x_shape[:2]
        o = w.shape[0]
        pt, pb, pl, pr = padding
        ho, wo = g.shape[2:]
        th, tw = winograd.tiles(ho, wo)
        t = th * tw
        need_w = need_w and x is not None
        db = channel_sums(g) if need_b else None
        if not (need_x or need_w):
            return None, None, db
        if need_x and u is None:
            u = winograd.weight_transform(w)
        per_image = 36 * t * max(c, o)
        blocks = _tiles(n, per_image, WINOGRAD_TILE) if kept is None else ctx.blocks
        parts = np.empty((len(blocks), 36, o, c), dtype=g.dtype) if need_w else None
        dx = np.empty(x_shape, dtype=g.dtype) if need_x else None

        def run(i: int, j: int) -> None:
            for k in range(i, j):
                a, e = blocks[k]
                rows = (e - a) * t
                dm_all, dm = _transformed("wino_m", rows, o, g.dtype)
                winograd.grad_transform(np.ascontiguousarray(g[a:e]), th, tw, dm_all)
                v_all, v = _transformed("wino_v", rows, c, g.dtype)
                if need_w:
                    if kept is None:
                        winograd.input_transform(np.ascontiguousarray(x[a:e]), pt, pl, th,
                                                 tw, v_all)
                    np.matmul(dm.transpose(0, 2, 1), v if kept is None else kept[k],
                              out=parts[k])
                if need_x:
                    np.matmul(dm, u, out=v)
                    winograd.input_adjoint(v_all, pt, pl, th, tw, dx[a:e])

        _pool_run(run, len(blocks), self._tile_threads(n * per_image))
        dw = None
        if need_w:  # the tiles' parts added in tile order: the same on any threads
            du = parts[0] if len(blocks) == 1 else np.add.reduce(parts, axis=0)
            dw = winograd.weight_gradient(du)
        return dx, dw, db

    def _tile_threads(self, size: int) -> int:
        """Pool threads for ``size`` patch elements (``1``: the calling thread only)."""
        return max(self._threads(size), 1)

    def _threads(self, size: int) -> int:
        """Pool threads for ``size`` patch elements: 0 (the calling thread only) below
        :data:`THRESHOLD`, else :func:`num_threads`."""
        return num_threads() if size >= THRESHOLD else 0

    def _forward_wide(self, x: Any, wm: Any, extra: int, geom: tuple, threads: int
                      ) -> tuple[Any, Any]:
        """The forward pass in the wide layout: one product per group over all images."""
        n = x.shape[0]
        groups, og, rows = wm.shape
        ho, wo = geom[6:]
        hw = ho * wo
        col = np.empty((groups, rows, n * hw), dtype=x.dtype)
        col4 = col.reshape(groups, rows, n, hw)
        if extra:
            col[:, rows - 1, :] = 1

        def fill(i: int, j: int) -> None:
            for a, b in _blocks(i, j, groups * rows * hw):
                _taps_in(np, x[a:b], col4[:, :, a:b].transpose(2, 0, 1, 3), geom)

        parallel_for(fill, n, threads)
        prod = np.matmul(wm, col, out=scratch("a", (groups, og, n * hw), x.dtype))
        prod = prod.reshape(groups, og, n, hw)
        out = np.empty((n, groups, og, hw), dtype=x.dtype)

        def scatter(i: int, j: int) -> None:
            out[i:j] = prod[:, :, i:j].transpose(2, 0, 1, 3)

        parallel_for(scatter, n, threads)
        return out.reshape(n, groups * og, ho, wo), col

    def _backward_wide(self, col: Any, x_shape: tuple[int, ...], w: Any, g: Any, geom: tuple,
                       need_x: bool, need_w: bool, need_b: bool, threads: int
                       ) -> tuple[Any, Any, Any]:
        """The backward pass in the wide layout: the output gradient transposed to it, then
        one product per group over all images for each gradient."""
        n = x_shape[0]
        o, cg, kh, kw = w.shape
        groups = geom[3]
        og = o // groups
        ho, wo = g.shape[2:]
        hw = ho * wo
        k = cg * kh * kw
        g4 = g.reshape(n, groups, og, hw)
        gm = scratch("a", (groups, og, n * hw), g.dtype)
        gw4 = gm.reshape(groups, og, n, hw)

        def gather(i: int, j: int) -> None:
            gw4[:, :, i:j] = g4[i:j].transpose(1, 2, 0, 3)

        parallel_for(gather, n, threads)
        dx = dw = db = None
        with_b = col is not None and col.shape[1] > k
        if need_w or need_b and with_b:
            dwe = np.matmul(gm, col.transpose(0, 2, 1))  # (G, O/G, rows)
            if need_w:
                dw = np.ascontiguousarray(dwe[:, :, :k]).reshape(o, cg, kh, kw)
            if need_b and with_b:
                db = np.ascontiguousarray(dwe[:, :, k]).reshape(o)
        if need_b and db is None:
            db = gm.sum(axis=2).reshape(o)
        if need_x:
            wt = w.reshape(groups, og, k).transpose(0, 2, 1)
            dcol = np.matmul(wt, gm, out=scratch("b", (groups, k, n * hw), g.dtype))
            dcol = dcol.reshape(groups, k, n, hw).transpose(2, 0, 1, 3)
            dx = np.empty(x_shape, dtype=g.dtype)

            def spread(i: int, j: int) -> None:
                for a, b in _blocks(i, j, groups * k * hw):
                    _taps_out(np, dcol[a:b], dx[a:b].shape, geom, dx[a:b])

            parallel_for(spread, n, threads)
        return dx, dw, db


def _transformed(slot: str | None, rows: int, width: int, dtype: Any) -> tuple[Any, Any]:
    """A ``(36, rows', width)`` buffer for the 36 planes of transformed tiles (the calling
    thread's scratch buffer ``slot``, or a new array for ``None``) and its ``(36, rows,
    width)`` view. ``rows' > rows`` keeps the planes from lying a multiple of 4 KiB apart:
    the transforms write one row of each of the 36 planes in turn, and such rows would
    compete for the same sets of the L1 cache."""
    padded = rows + 1
    if padded * width * np.dtype(dtype).itemsize % 4096 == 0:
        padded += 1
    shape = (36, padded, width)
    buf = np.empty(shape, dtype) if slot is None else scratch(slot, shape, dtype)
    return buf, buf[:, :rows]


def _tiles(n: int, per_image: int, tile: int | None = None) -> list[tuple[int, int]]:
    """``[a, e)`` ranges of images of at most about ``tile`` (default :data:`TILE`)
    elements each, as even as the images allow (the same ranges on any number of
    threads)."""
    if n <= 0:
        return []
    per_tile = max(1, (TILE if tile is None else tile) // max(per_image, 1))
    count = -(-n // per_tile)
    step = -(-n // count)
    return [(a, min(a + step, n)) for a in range(0, n, step)]


def _padded_tile(x: Any, pads: tuple[int, int, int, int], slot: str) -> Any:
    """``x`` zero-padded in the calling thread's scratch buffer ``slot`` (``x`` itself
    without padding)."""
    pt, pb, pl, pr = pads
    if not (pt or pb or pl or pr):
        return x
    m, c, h, w = x.shape
    buf = scratch(slot, (m, c, h + pt + pb, w + pl + pr), x.dtype)
    buf[:, :, :pt] = 0
    buf[:, :, pt + h:] = 0
    buf[:, :, pt:pt + h, :pl] = 0
    buf[:, :, pt:pt + h, pl + w:] = 0
    buf[:, :, pt:pt + h, pl:pl + w] = x
    return buf


def _im2col_tile(x: Any, geom: tuple, k: int) -> Any:
    """The ``(G, C/G*kh*kw, M*Ho*Wo)`` patches of the ``M`` images ``x`` in the calling
    thread's scratch: one strided copy per tap."""
    stride, pads, dilation, groups, kh, kw, ho, wo = geom
    m, c = x.shape[:2]
    cg = c // groups
    col = scratch("conv_col", (groups, k, m * ho * wo), x.dtype)
    if _compiled_taps(x):
        from ._im2col_kernels import im2col

        im2col(x, col.reshape(c, kh, kw, m, ho, wo), *stride, pads[0],
               pads[2], *dilation)
        return col
    src = _padded_tile(x, pads, "conv_pad")
    sm, sc, sh, sw = src.strides
    # every tap of every pixel as one strided view of the padded input: one copy
    view = np.lib.stride_tricks.as_strided(
        src, (groups, cg, kh, kw, m, ho, wo),
        (cg * sc, sc, dilation[0] * sh, dilation[1] * sw, sm, stride[0] * sh, stride[1] * sw),
        writeable=False)
    col.reshape(groups, cg, kh, kw, m, ho, wo)[...] = view
    return col


def _compiled_taps(x: Any) -> bool:
    """Whether im2col and col2im of the C-contiguous tile ``x`` (or its gradient) run
    compiled (``_im2col_kernels``)."""
    return x.dtype in _FLOATS and x.flags.c_contiguous and _compiled.available()


def _col2im_tile(dcol: Any, dx: Any, geom: tuple) -> None:
    """``dx`` (``M`` images) from the patch gradient ``dcol`` (``(G, C/G*kh*kw,
    M*Ho*Wo)``): one strided add per tap into a zeroed padded scratch buffer."""
    stride, (pt, pb, pl, pr), dilation, groups, kh, kw, ho, wo = geom
    m, c, h, w = dx.shape
    if _compiled_taps(dx) and dcol.flags.c_contiguous:
        from ._im2col_kernels import col2im

        col2im(dcol.reshape(c, kh, kw, m, ho, wo), dx, *stride, pt, pl, *dilation)
        return
    cg = c // groups
    padded = pt or pb or pl or pr
    buf = scratch("conv_pad", (m, c, h + pt + pb, w + pl + pr), dx.dtype) if padded else dx
    d7 = dcol.reshape(groups, cg, kh, kw, m, ho, wo)
    dst = buf.reshape(m, groups, cg, *buf.shape[2:]).transpose(1, 2, 0, 3, 4)
    first = True
    for a in range(kh):
        for b in range(kw):
            rs, cs = tap_slices(a, b, ho, wo, stride, dilation)
            if first:
                buf[...] = 0
                first = False
            dst[:, :, :, rs, cs] += d7[:, :, a, b]
    if padded:
        dx[...] = buf[:, :, pt:pt + h, pl:pl + w]


def _conv_tile(x: Any, wm: Any, bias: Any, geom: tuple, out: Any) -> None:
    """The convolution of the images ``x`` into ``out`` (``(M, G, O/G, Ho*Wo)``): their
    patches in the calling thread's scratch, one product per group, the bias (``(G, O/G,
    1)`` or ``None``) added while the result is put in place."""
    groups, og, k = wm.shape
    m = x.shape[0]
    hw = out.shape[3]
    col = _im2col_tile(x, geom, k)
    if m == 1 and out.flags.c_contiguous:  # one image: the product lands in place
        np.matmul(wm, col, out=out[0])
        if bias is not None:
            np.add(out[0], bias, out=out[0])
        return
    prod = np.matmul(wm, col, out=scratch("conv_out", (groups, og, m * hw), x.dtype))
    src = prod.reshape(groups, og, m, hw).transpose(2, 0, 1, 3)
    if bias is None:
        out[...] = src
    else:
        np.add(src, bias, out=out)


def _flipped(w: Any, geom: tuple, x_shape: tuple[int, ...]) -> tuple[Any, tuple] | None:
    """For a stride-1 convolution whose padding is at most the dilated kernel's reach and
    whose output has at most as many channels per group as its input (:data:`FLIP`), the
    input gradient as a convolution of the output gradient: ``(weight matrix, geometry)``
    of that convolution (the kernel flipped, its two channel axes swapped per group, the
    padding ``d*(k-1) - p``); ``None`` otherwise (then the patch gradient and col2im)."""
    stride, (pt, pb, pl, pr), (dh, dw), groups, kh, kw, ho, wo = geom
    if stride != (1, 1) or not FLIP:
        return None
    eh, ew = dh * (kh - 1), dw * (kw - 1)
    if max(pt, pb) > eh or max(pl, pr) > ew:
        return None
    o, cg = w.shape[:2]
    og = o // groups
    if og > cg:
        return None
    wf = w.reshape(groups, og, cg, kh, kw)[:, :, :, ::-1, ::-1].transpose(0, 2, 1, 3, 4)
    wf = np.ascontiguousarray(wf).reshape(groups, cg, og * kh * kw)
    h, wd = x_shape[2:]
    return wf, ((1, 1), (eh - pt, eh - pb, ew - pl, ew - pr), (dh, dw), groups, kh, kw, h, wd)


_blas_local: Any = False  # not looked up yet


def _blas_threads_local() -> Any:
    """NumPy's OpenBLAS ``openblas_set_num_threads_local`` (``None`` where there is none)."""
    global _blas_local
    if _blas_local is False:
        _blas_local = None
        root = os.path.dirname(os.path.dirname(np.__file__))
        for path in sorted(glob.glob(os.path.join(root, "numpy.libs", "*openblas*"))
                           + glob.glob(os.path.join(os.path.dirname(np.__file__), ".libs",
                                                    "*openblas*"))):
            try:
                fn = ctypes.CDLL(path).openblas_set_num_threads_local
            except (OSError, AttributeError):
                continue
            fn.restype, fn.argtypes = ctypes.c_int, [ctypes.c_int]
            _blas_local = fn
            break
    return _blas_local


def _pool_run(fn: Callable[[int, int], None], n: int, threads: int) -> None:
    """``fn(t, t + 1)`` for each tile ``t`` of ``[0, n)``: on the calling thread, or with
    several threads each taking the next tile not yet taken (a thread that the OS holds
    back leaves its tiles to the others), at most one thread per tile; with
    :data:`ONE_BLAS_THREAD` each thread asks the BLAS for one thread while it works (the
    calling thread gives its setting back when all are done). Every tile is computed the
    same way on any number of threads."""
    local = _blas_threads_local() if ONE_BLAS_THREAD else None
    threads = min(threads, n)
    if threads <= 1:
        fn(0, n)
        return
    ticket = itertools.count()
    # the calling thread's setting, read before any pool thread changes it (in some OpenBLAS
    # builds it is one process-wide variable, so a value read while others work is racy)
    prev = local(1) if local is not None else None

    def work(i: int, j: int) -> None:
        if local is not None:
            local(1)
        while (t := next(ticket)) < n:  # next() on a count is atomic under the GIL
            fn(t, t + 1)

    try:
        parallel_for(work, threads, threads)
    finally:
        if local is not None:
            # given back by the calling thread alone, once every thread is done: a thread
            # that restored it while another still worked would put that one's products on
            # all BLAS threads (the pool's own threads run only the backend's kernels and
            # keep one BLAS thread where the setting is per thread)
            local(prev)
