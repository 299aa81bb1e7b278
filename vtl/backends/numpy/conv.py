"""``kernels["conv2d"]`` of the NumPy backend: the strided im2col convolution of
:mod:`vtl.backends._common.conv`, its memory-bound passes on the CPU thread pool.

Threads (inputs of at least :data:`THRESHOLD` patch elements): the memory-bound
passes are split by images over a persistent thread pool of :func:`num_threads` threads
(the usable CPUs, capped by ``VTL_NUM_THREADS``; NumPy releases the GIL in copies and
ufuncs), each thread working through blocks of images that stay in cache. The products
stay on the calling thread: BLAS spreads one product over its own threads, and BLAS calls
from several Python threads at once run one after the other (measured with NumPy's
OpenBLAS), so products per thread would gain nothing. With fewer than
``ONE_PRODUCT_THREADS`` threads the base class's layout is kept (a product per image writes
NCHW directly; the weight gradient's per-image products are summed block by block); from
that many on, the patches of all images form one *wide* ``(G, C/G*kh*kw + 1, N*Ho*Wo)``
matrix, so forward, weight gradient and patch gradient are one large product each (a
product per image is too small to spread over many BLAS threads), and the output and its
gradient are transposed between NCHW and the wide layout by the pool. Either way every
value is computed by the same products as on one thread, up to the summation order of the
weight gradient over images.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._common.conv import StridedConv2d, _blocks, _taps_in, _taps_out
from .._common.threads import num_threads, parallel_for, scratch

__all__ = ["THRESHOLD", "NumpyConv2d"]

#: Patch elements (``N * (C/G*kh*kw + 1) * G * Ho*Wo``) from which the NumPy kernel takes the
#: wide layout and the thread pool; below it everything runs on the calling thread.
THRESHOLD = 1 << 18


class NumpyConv2d(StridedConv2d):
    """The NumPy backend's ``conv2d`` kernel: :class:`StridedConv2d` on NumPy arrays, with
    the passes over the patches split over the thread pool from :data:`THRESHOLD` patch
    elements, and the wide layout from ``ONE_PRODUCT_THREADS`` threads."""

    def __init__(self) -> None:
        super().__init__(np)

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
