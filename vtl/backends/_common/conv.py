"""conv2d by strided im2col for array libraries with NumPy's indexing (NumPy, CuPy), and
the convolution geometry both share.

:class:`StridedConv2d` implements the raw-array ``conv2d`` kernel contract
(``Conv2dKernel`` in ``vtl.backends.kernels``) with the module it is given (``numpy`` or
``cupy``); no index arrays are involved:

* forward: the input is zero-padded once, then each of the ``kh*kw`` taps is
  ONE strided-slice copy into a preallocated ``(N, G, C/G*kh*kw + 1, Ho*Wo)``
  patch buffer whose last row per group is ones; ONE (batched) matrix product
  with the ``(G, O/G, C/G*kh*kw + 1)`` weight matrix, whose last column is the
  bias, gives the ``(N, O, Ho*Wo)`` output, already in NCHW order (the bias
  add rides in the product);
* backward: ``dW`` (and ``db``, the ones row's column) is a matrix product of
  the output gradient with the patches, ``dcol`` a matrix product with the
  weight, and ``dx`` (col2im) ``kh*kw`` strided-slice adds into a zero-padded
  buffer.

The heavy work is in the matrix products (multi-threaded BLAS / cuBLAS); the
copies and adds are memory-bound passes over the patch buffer. A subclass whose
``_threads`` returns a thread count splits those passes over the thread pool of
:mod:`vtl.backends._common.threads` and, from :data:`ONE_PRODUCT_THREADS` threads on,
provides ``_forward_wide``/``_backward_wide`` (the NumPy backend's ``NumpyConv2d``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .threads import parallel_for, scratch

__all__ = ["ONE_PRODUCT_THREADS", "FloatKernel", "StridedConv2d", "out_size", "tap_slices"]

#: Pool threads from which the wide layout's products are one BLAS call over all images
#: (BLAS spreads it over its threads; the images' outputs then need a transpose pass);
#: with fewer, a BLAS call per image writes the NCHW output directly.
ONE_PRODUCT_THREADS = 4

#: Elements of a block of images handled in one pass of im2col/col2im (cache-sized).
BLOCK = 1 << 21


def _blocks(i: int, j: int, per_image: int):
    """``[i, j)`` in ranges of about :data:`BLOCK` elements of ``per_image`` each."""
    step = max(1, BLOCK // max(per_image, 1))
    for a in range(i, j, step):
        yield a, min(a + step, j)


def out_size(size: int, k: int, s: int, lo: int, hi: int, d: int) -> int:
    return (size + lo + hi - d * (k - 1) - 1) // s + 1


def tap_slices(a: int, b: int, ho: int, wo: int, s: tuple[int, int], d: tuple[int, int]
         ) -> tuple[slice, slice]:
    """The rows and columns of the padded input that tap ``(a, b)`` reads."""
    r0, c0 = a * d[0], b * d[1]
    return (slice(r0, r0 + s[0] * (ho - 1) + 1, s[0]), slice(c0, c0 + s[1] * (wo - 1) + 1, s[1]))


def _taps_in(m: Any, x: Any, col: Any, geom: tuple) -> None:
    """im2col of ``x`` into the first ``C/G*kh*kw`` rows of each group of ``col``
    (``(N, G, rows, Ho*Wo)``, any strides): one strided-slice copy per tap."""
    stride, (pt, pb, pl, pr), dilation, groups, kh, kw, ho, wo = geom
    n, c, h, wd = x.shape
    cg = c // groups
    if pt or pb or pl or pr:
        xpad = m.zeros((n, c, h + pt + pb, wd + pl + pr), dtype=x.dtype)
        xpad[:, :, pt:pt + h, pl:pl + wd] = x
    else:
        xpad = x
    taps = col[:, :, :cg * kh * kw, :].reshape(n, groups, cg, kh, kw, ho, wo)
    src = xpad.reshape(n, groups, cg, *xpad.shape[2:])
    for a in range(kh):
        for bb in range(kw):
            rs, cs = tap_slices(a, bb, ho, wo, stride, dilation)
            taps[:, :, :, a, bb] = src[:, :, :, rs, cs]


def _taps_out(m: Any, dcol: Any, x_shape: tuple[int, ...], geom: tuple, dx: Any = None) -> Any:
    """col2im: the input gradient from the patch gradient ``dcol`` (``(N, G, C/G*kh*kw,
    Ho*Wo)``, any strides), one strided-slice add per tap into a zero-padded buffer;
    written into ``dx`` when given, else returned (a view of the buffer)."""
    stride, (pt, pb, pl, pr), dilation, groups, kh, kw, ho, wo = geom
    n, c, h, wd = x_shape
    cg = c // groups
    d7 = dcol.reshape(n, groups, cg, kh, kw, ho, wo)
    padded = pt or pb or pl or pr
    if dx is not None and not padded:
        dxpad = dx
        dxpad[...] = 0
    else:
        dxpad = m.zeros((n, c, h + pt + pb, wd + pl + pr), dtype=dcol.dtype)
    dst = dxpad.reshape(n, groups, cg, *dxpad.shape[2:])
    for a in range(kh):
        for bb in range(kw):
            rs, cs = tap_slices(a, bb, ho, wo, stride, dilation)
            dst[:, :, :, rs, cs] += d7[:, :, :, a, bb]
    res = dxpad[:, :, pt:pt + h, pl:pl + wd] if padded else dxpad
    if dx is not None and res is not dx:
        dx[...] = res
    return res


class FloatKernel:
    """A kernel on the float32/float64 arrays of ``mod`` (``numpy`` or ``cupy``)."""

    def __init__(self, mod: Any) -> None:
        self.m = mod
        self._dtypes = (np.dtype(np.float32), np.dtype(np.float64))

    def supports(self, dtype: Any) -> bool:
        return dtype in self._dtypes


class StridedConv2d(FloatKernel):
    """The ``conv2d`` kernel on the arrays of ``mod`` (``numpy`` or ``cupy``).

    ``forward(x, w, b, stride, padding, dilation, groups) -> (out, col)`` and
    ``backward(col, x_shape, w, g, stride, padding, dilation, groups, need_x, need_w,
    need_b) -> (dx, dw, db)``; see ``vtl.nn.functional.conv.Conv2dKernel``. ``col`` is the
    ``(N, G, rows, Ho*Wo)`` patch buffer, or the ``(G, rows, N*Ho*Wo)`` wide one of a
    subclass with :data:`ONE_PRODUCT_THREADS` threads or more.
    """

    def _threads(self, size: int) -> int:
        """Pool threads for ``size`` patch elements: 0 runs everything on the calling
        thread (a subclass may return more; see the module docstring)."""
        return 0

    def _product(self, a: Any, b: Any) -> Any:
        """``a @ b`` (batched over leading axes) with the module's ``matmul``."""
        return self.m.matmul(a, b)

    def forward(self, x: Any, w: Any, b: Any, stride: tuple[int, int],
                padding: tuple[int, int, int, int], dilation: tuple[int, int],
                groups: int) -> tuple[Any, Any]:
        m = self.m
        n, c, h, wd = x.shape
        o, cg, kh, kw = w.shape
        pt, pb, pl, pr = padding
        ho = out_size(h, kh, stride[0], pt, pb, dilation[0])
        wo = out_size(wd, kw, stride[1], pl, pr, dilation[1])
        k = cg * kh * kw
        extra = 0 if b is None else 1
        og = o // groups
        wm = w.reshape(groups, og, k)
        if extra:
            wext = m.empty((groups, og, k + 1), dtype=x.dtype)
            wext[:, :, :k] = wm
            wext[:, :, k] = b.reshape(groups, og)
            wm = wext
        geom = (stride, padding, dilation, groups, kh, kw, ho, wo)
        threads = self._threads(n * groups * (k + extra) * ho * wo)
        if threads >= ONE_PRODUCT_THREADS:
            return self._forward_wide(x, wm, extra, geom, threads)
        col = m.empty((n, groups, k + extra, ho * wo), dtype=x.dtype)
        if extra:
            col[:, :, k, :] = 1
        if threads:
            per = groups * (k + extra) * ho * wo

            def fill(i: int, j: int) -> None:
                for a, b in _blocks(i, j, per):
                    self._im2col(x[a:b], col[a:b], geom)

            parallel_for(fill, n, threads)
        else:
            self._im2col(x, col, geom)
        out = self._product(wm, col)  # (N, G, O/G, Ho*Wo)
        return out.reshape(n, o, ho, wo), col

    def backward(self, col: Any, x_shape: tuple[int, ...], w: Any, g: Any,
                 stride: tuple[int, int], padding: tuple[int, int, int, int],
                 dilation: tuple[int, int], groups: int, need_x: bool, need_w: bool,
                 need_b: bool) -> tuple[Any, Any, Any]:
        m = self.m
        n, c, h, wd = x_shape
        o, cg, kh, kw = w.shape
        og = o // groups
        ho, wo = g.shape[2:]
        hw = ho * wo
        k = cg * kh * kw
        geom = (stride, padding, dilation, groups, kh, kw, ho, wo)
        threads = self._threads(n * groups * k * hw) if need_x or need_w else 0
        if col is not None and col.ndim == 3 or col is None and threads >= ONE_PRODUCT_THREADS:
            return self._backward_wide(col, x_shape, w, g, geom, need_x, need_w, need_b,
                                       max(threads, 1))
        # a BLAS-friendly (N, G, O/G, Ho*Wo) gradient (e.g. not a broadcast view)
        g4 = m.ascontiguousarray(g).reshape(n, groups, og, hw)
        dx = dw = db = None
        if need_w or (need_b and col is not None and col.shape[2] > k):
            kc = col.shape[2]
            if threads:  # products per image, summed over blocks of images that stay in cache
                dwe = None
                for a, b in _blocks(0, n, groups * og * kc):
                    part = self._product(g4[a:b], col[a:b].transpose(0, 1, 3, 2)).sum(axis=0)
                    dwe = part if dwe is None else m.add(dwe, part, out=dwe)
            elif kc <= hw:  # a batch of products, summed over the images
                dwe = self._product(g4, col.transpose(0, 1, 3, 2)).sum(axis=0)
            else:  # few pixels, many taps: one product over all images
                ga = m.ascontiguousarray(g4.transpose(1, 2, 0, 3)).reshape(groups, og, n * hw)
                ca = m.ascontiguousarray(col.transpose(1, 0, 3, 2)).reshape(groups, n * hw, kc)
                dwe = self._product(ga, ca)
            if need_w:
                dw = m.ascontiguousarray(dwe[:, :, :k]).reshape(o, cg, kh, kw)
            if need_b and kc > k:
                db = m.ascontiguousarray(dwe[:, :, k]).reshape(o)
        if need_b and db is None:
            db = g4.sum(axis=(0, 3)).reshape(o)
        if need_x:
            wt = w.reshape(groups, og, k).transpose(0, 2, 1)
            if threads:
                dcol = m.matmul(wt, g4, out=scratch("b", (n, groups, k, hw), g.dtype))
                dx = m.empty(x_shape, dtype=g.dtype)

                def spread(i: int, j: int) -> None:
                    for a, b in _blocks(i, j, groups * k * hw):
                        dx[a:b] = self._col2im(dcol[a:b], dx[a:b].shape, geom)

                parallel_for(spread, n, threads)
            else:
                dcol = self._product(wt, g4)  # (N, G, C/G*kh*kw, Ho*Wo)
                dx = self._col2im(dcol, x_shape, geom)
        return dx, dw, db

    def _im2col(self, x: Any, col: Any, geom: tuple) -> None:
        """Write the taps of ``x`` into the first ``C/G*kh*kw`` rows of each group of
        ``col`` (``(N, G, rows, Ho*Wo)``): one strided-slice copy per tap."""
        _taps_in(self.m, x, col, geom)

    def _col2im(self, dcol: Any, x_shape: tuple[int, ...], geom: tuple) -> Any:
        """The input gradient from the patch gradient ``dcol`` (``(N, G, C/G*kh*kw,
        Ho*Wo)``): one strided-slice add per tap into a zero-padded buffer."""
        return _taps_out(self.m, dcol, x_shape, geom)
