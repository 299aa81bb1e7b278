"""conv2d by strided im2col for array libraries with NumPy's indexing (NumPy, CuPy).

:class:`StridedConv2d` implements the raw-array ``conv2d`` kernel protocol of
``vtl.nn.functional.conv`` (see ``Conv2dKernel`` there) with the module it is
given (``numpy`` or ``cupy``); no index arrays are involved:

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
copies and adds are memory-bound passes over the patch buffer.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["StridedConv2d"]


def _out_size(size: int, k: int, s: int, lo: int, hi: int, d: int) -> int:
    return (size + lo + hi - d * (k - 1) - 1) // s + 1


def _tap(a: int, b: int, ho: int, wo: int, s: tuple[int, int], d: tuple[int, int]
         ) -> tuple[slice, slice]:
    """The rows and columns of the padded input that tap ``(a, b)`` reads."""
    r0, c0 = a * d[0], b * d[1]
    return (slice(r0, r0 + s[0] * (ho - 1) + 1, s[0]), slice(c0, c0 + s[1] * (wo - 1) + 1, s[1]))


class StridedConv2d:
    """The ``conv2d`` kernel on the arrays of ``mod`` (``numpy`` or ``cupy``).

    ``forward(x, w, b, stride, padding, dilation, groups) -> (out, col)`` and
    ``backward(col, x_shape, w, g, stride, padding, dilation, groups, need_x, need_w,
    need_b) -> (dx, dw, db)``; see ``vtl.nn.functional.conv.Conv2dKernel``.
    """

    def __init__(self, mod: Any) -> None:
        self.m = mod
        self._dtypes = (np.dtype(np.float32), np.dtype(np.float64))

    def supports(self, dtype: Any) -> bool:
        return dtype in self._dtypes

    def forward(self, x: Any, w: Any, b: Any, stride: tuple[int, int],
                padding: tuple[int, int, int, int], dilation: tuple[int, int],
                groups: int) -> tuple[Any, Any]:
        m = self.m
        n, c, h, wd = x.shape
        o, cg, kh, kw = w.shape
        pt, pb, pl, pr = padding
        ho = _out_size(h, kh, stride[0], pt, pb, dilation[0])
        wo = _out_size(wd, kw, stride[1], pl, pr, dilation[1])
        k = cg * kh * kw
        extra = 0 if b is None else 1
        col = m.empty((n, groups, k + extra, ho * wo), dtype=x.dtype)
        if extra:
            col[:, :, k, :] = 1
        self._im2col(x, col, (stride, padding, dilation, groups, kh, kw, ho, wo))
        og = o // groups
        wm = w.reshape(groups, og, k)
        if extra:
            wext = m.empty((groups, og, k + 1), dtype=x.dtype)
            wext[:, :, :k] = wm
            wext[:, :, k] = b.reshape(groups, og)
            wm = wext
        out = m.matmul(wm, col)  # (N, G, O/G, Ho*Wo)
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
        k = cg * kh * kw
        # a BLAS-friendly (N, G, O/G, Ho*Wo) gradient (e.g. not a broadcast view)
        g4 = m.ascontiguousarray(g).reshape(n, groups, og, ho * wo)
        dx = dw = db = None
        if need_w or (need_b and col is not None and col.shape[2] > k):
            hw = ho * wo
            kc = col.shape[2]
            if kc <= hw:  # a batch of products, summed over the images
                dwe = m.matmul(g4, col.transpose(0, 1, 3, 2)).sum(axis=0)
            else:  # few pixels, many taps: one product over all images
                ga = m.ascontiguousarray(g4.transpose(1, 2, 0, 3)).reshape(groups, og, n * hw)
                ca = m.ascontiguousarray(col.transpose(1, 0, 3, 2)).reshape(groups, n * hw, kc)
                dwe = m.matmul(ga, ca)
            if need_w:
                dw = m.ascontiguousarray(dwe[:, :, :k]).reshape(o, cg, kh, kw)
            if need_b and kc > k:
                db = m.ascontiguousarray(dwe[:, :, k]).reshape(o)
        if need_b and db is None:
            db = g4.sum(axis=(0, 3)).reshape(o)
        if need_x:
            wt = w.reshape(groups, og, k).transpose(0, 2, 1)
            dcol = m.matmul(wt, g4)  # (N, G, C/G*kh*kw, Ho*Wo)
            dx = self._col2im(dcol, x_shape, (stride, padding, dilation, groups, kh, kw, ho, wo))
        return dx, dw, db

    def _im2col(self, x: Any, col: Any, geom: tuple) -> None:
        """Write the taps of ``x`` into the first ``C/G*kh*kw`` rows of each group of
        ``col`` (``(N, G, rows, Ho*Wo)``): one strided-slice copy per tap."""
        stride, (pt, pb, pl, pr), dilation, groups, kh, kw, ho, wo = geom
        m = self.m
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
                rs, cs = _tap(a, bb, ho, wo, stride, dilation)
                taps[:, :, :, a, bb] = src[:, :, :, rs, cs]

    def _col2im(self, dcol: Any, x_shape: tuple[int, ...], geom: tuple) -> Any:
        """The input gradient from the patch gradient ``dcol`` (``(N, G, C/G*kh*kw,
        Ho*Wo)``): one strided-slice add per tap into a zero-padded buffer."""
        stride, (pt, pb, pl, pr), dilation, groups, kh, kw, ho, wo = geom
        n, c, h, wd = x_shape
        cg = c // groups
        d7 = dcol.reshape(n, groups, cg, kh, kw, ho, wo)
        dxpad = self.m.zeros((n, c, h + pt + pb, wd + pl + pr), dtype=dcol.dtype)
        dst = dxpad.reshape(n, groups, cg, *dxpad.shape[2:])
        for a in range(kh):
            for bb in range(kw):
                rs, cs = _tap(a, bb, ho, wo, stride, dilation)
                dst[:, :, :, rs, cs] += d7[:, :, :, a, bb]
        return dxpad[:, :, pt:pt + h, pl:pl + wd] if (pt or pb or pl or pr) else dxpad
