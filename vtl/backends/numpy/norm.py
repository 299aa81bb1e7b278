"""``kernels["batch_norm"]`` of the NumPy backend: training-mode batch normalisation in a
few passes over memory each way (the contract is ``BatchNormKernel`` in
``vtl.backends.kernels``).

The input is seen as ``(N, C, L)``. The statistics are sums over ``L`` per image and
channel (``np.add.reduce`` along the contiguous axis, and ``np.vecdot`` for the sums of
products: no temporary), then over the images in image order, so they do not depend on
how the images are split over threads. Forward: one pass for the sums, one for ``d = x -
mean`` (kept for the backward), one for the variance, one or two for ``y = d * scale (+
shift)``. Backward: one pass each for ``sum(g)`` and ``sum(g d)``, and ``dx = (g - c1) *
scale - d * c2`` written in place. From :data:`THRESHOLD` elements the passes are split
by images over the kernels' thread pool (NumPy releases the GIL in ufuncs).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._common import threads as _pool

__all__ = ["THRESHOLD", "NumpyBatchNorm"]

#: elements from which the passes are split over the pool
THRESHOLD = 1 << 18

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _split(fn: Any, n: int, size: int) -> None:
    """``fn(i, j)`` over the images ``[0, n)``: on the pool from :data:`THRESHOLD`
    elements, else on the calling thread."""
    if size >= THRESHOLD:
        _pool.parallel_for(fn, n)
    else:
        fn(0, n)


class NumpyBatchNorm:
    """The ``batch_norm`` kernel on NumPy arrays (float32, float64)."""

    def supports(self, dtype: Any) -> bool:
        return dtype in _FLOATS

    def forward(self, x: Any, w: Any, b: Any, eps: float) -> tuple[Any, Any, Any, Any] | None:
        if type(x) is not np.ndarray or x.ndim < 2 or x.dtype not in _FLOATS:
            return None
        n, c = x.shape[:2]
        x3 = x.reshape(n, c, -1)
        count = x3.shape[0] * x3.shape[2]
        dt = x.dtype
        rows = np.empty((n, c), dtype=dt)
        d = np.empty(x3.shape, dtype=dt)
        y = np.empty(x3.shape, dtype=dt)

        def sums(i: int, j: int) -> None:
            np.add.reduce(x3[i:j], axis=2, out=rows[i:j])

        _split(sums, n, x.size)
        mean = np.add.reduce(rows, axis=0) / count
        m3 = mean[:, None]

        def center(i: int, j: int) -> None:
            np.subtract(x3[i:j], m3, out=d[i:j])
            np.vecdot(d[i:j], d[i:j], out=rows[i:j])

        _split(center, n, x.size)
        var = np.add.reduce(rows, axis=0) / count
        rstd = 1.0 / np.sqrt(var + dt.type(eps))
        scale = (rstd if w is None else rstd * w)[:, None]
        shift = None if b is None else b[:, None]

        def affine(i: int, j: int) -> None:
            np.multiply(d[i:j], scale, out=y[i:j])
            if shift is not None:
                np.add(y[i:j], shift, out=y[i:j])

        _split(affine, n, x.size)
        return y.reshape(x.shape), mean, var, (d, rstd, x.shape)

    def backward(self, saved: Any, w: Any, g: Any, need_x: bool, need_w: bool,
                 need_b: bool) -> tuple[Any, Any, Any] | None:
        d, rstd, shape = saved
        if type(g) is not np.ndarray or g.dtype != d.dtype:
            return None
        n, c = d.shape[:2]
        g3 = g.reshape(d.shape)
        count = d.shape[0] * d.shape[2]
        dt = d.dtype
        sg_rows = np.empty((n, c), dtype=dt)
        sgd_rows = np.empty((n, c), dtype=dt)

        def sums(i: int, j: int) -> None:
            np.add.reduce(g3[i:j], axis=2, out=sg_rows[i:j])
            np.vecdot(g3[i:j], d[i:j], out=sgd_rows[i:j])

        _split(sums, n, d.size)
        sg = np.add.reduce(sg_rows, axis=0)
        sgd = np.add.reduce(sgd_rows, axis=0)
        dx = dw = db = None
        if need_x:
            scale = rstd if w is None else rstd * w
            c1 = (sg / count)[:, None]
            c2 = (scale * rstd * rstd * sgd / count)[:, None]
            s3 = scale[:, None]
            dx = np.empty(d.shape, dtype=dt)

            def grad(i: int, j: int) -> None:
                out = dx[i:j]
                tmp = _pool.scratch("bn_tmp", out.shape, dt)
                np.subtract(g3[i:j], c1, out=out)
                np.multiply(out, s3, out=out)
                np.multiply(d[i:j], c2, out=tmp)
                np.subtract(out, tmp, out=out)

            _split(grad, n, d.size)
            dx = dx.reshape(shape)
        if need_w:
            dw = sgd * rstd
        if need_b:
            db = sg
        return dx, dw, db
