"""Compiled passes of the NumPy backend's ``batch_norm`` kernel (numba, the ``vtl[cpu]``
extra): the statistics in one pass and the normalization in another, each way, over a
range of images of an ``(N, C, L)`` array, so that the kernel pool's threads share the
images. Sums are float64, per image and channel, then over the images in image order (the same
bits on any thread count).
"""

from __future__ import annotations

import numpy as np

from ._compiled import kernel

_OPTS = {"fastmath": {"contract"}}
#: the sums may be reassociated (vectorized): the same code, so the same bits, for a row
#: on any thread
_SUMS = {"fastmath": {"contract", "reassoc"}}


@kernel(**_SUMS)
def forward_sums(x, i, j, s, q):  # pragma: no cover - compiled
    """Per image and channel, the sums of ``x - x[0, c, 0]`` and of its squares (float64),
    for images ``[i, j)``: the shift keeps a large mean from cancelling the variance."""
    c_n, length = x.shape[1], x.shape[2]
    for n in range(i, j):
        for c in range(c_n):
            k = np.float64(x[0, c, 0])
            a = 0.0
            b = 0.0
            for el in range(length):
                d = np.float64(x[n, c, el]) - k
                a += d
                b += d * d
            s[n, c] = a
            q[n, c] = b


@kernel(**_OPTS)
def affine(x, i, j, scale, offset, y):  # pragma: no cover - compiled
    """``y = x * scale[c] + offset[c]`` for images ``[i, j)``."""
    c_n, length = x.shape[1], x.shape[2]
    for n in range(i, j):
        for c in range(c_n):
            a = scale[c]
            b = offset[c]
            for el in range(length):
                y[n, c, el] = x[n, c, el] * a + b


@kernel(**_SUMS)
def backward_sums(x, g, mean, i, j, sg, sgd):  # pragma: no cover - compiled
    """Per image and channel, the sums of ``g`` and of ``g * (x - mean[c])`` (float64), for
    images ``[i, j)``."""
    c_n, length = x.shape[1], x.shape[2]
    for n in range(i, j):
        for c in range(c_n):
            m = mean[c]
            a = 0.0
            b = 0.0
            for el in range(length):
                gv = np.float64(g[n, c, el])
                a += gv
                b += gv * (np.float64(x[n, c, el]) - m)
            sg[n, c] = a
            sgd[n, c] = b


@kernel(**_OPTS)
def input_grad(x, g, i, j, a, b, e, dx):  # pragma: no cover - compiled
    """``dx = g * a[c] + x * b[c] + e[c]`` for images ``[i, j)``."""
    c_n, length = x.shape[1], x.shape[2]
    for n in range(i, j):
        for c in range(c_n):
            ac = a[c]
            bc = b[c]
            ec = e[c]
            for el in range(length):
                dx[n, c, el] = g[n, c, el] * ac + x[n, c, el] * bc + ec


@kernel(**_SUMS)
def layer_norm_forward(x, w, b, with_w, with_b, eps, i, j, y, mean, rstd,
                       center):  # pragma: no cover - compiled
    """Rows ``[i, j)`` of ``x`` (``(M, N)``): float64 mean and ``1 / sqrt(var + eps)``
    (two passes over the row), then ``y = (x - mean) * rstd * w + b``; without ``center``
    (rms_norm) the mean is 0."""
    n = x.shape[1]
    dt = y.dtype.type
    for r in range(i, j):
        m = 0.0
        if center:
            s = 0.0
            for k in range(n):
                s += np.float64(x[r, k])
            m = s / n
        q = 0.0
        for k in range(n):
            d = np.float64(x[r, k]) - m
            q += d * d
        rs = 1.0 / np.sqrt(q / n + eps)
        mean[r, 0] = m
        rstd[r, 0] = rs
        mt = dt(m)
        rt = dt(rs)
        for k in range(n):
            v = (x[r, k] - mt) * rt
            if with_w:
                v = v * w[k]
            if with_b:
                v = v + b[k]
            y[r, k] = v


@kernel(**_SUMS)
def layer_norm_backward(x, w, with_w, mean, rstd, g, need_x, need_wb, i, j, dx, dw,
                        db, center):  # pragma: no cover - compiled
    """Rows ``[i, j)``: ``dx = rstd (gw - mean(gw) - xhat mean(gw xhat))`` (the row means
    in float64; without ``center``, rms_norm's, no ``mean(gw)`` term) and, with
    ``need_wb``, this range's float64 sums of ``g xhat`` and ``g`` added into ``dw`` and
    ``db`` (``(N,)``, zeroed by the caller)."""
    n = x.shape[1]
    dt = x.dtype.type
    for r in range(i, j):
        mt = mean[r, 0]
        rt = rstd[r, 0]
        if need_x:
            a = 0.0
            c = 0.0
            for k in range(n):
                xh = (x[r, k] - mt) * rt
                gw = g[r, k] * w[k] if with_w else g[r, k]
                a += np.float64(gw)
                c += np.float64(gw) * np.float64(xh)
            c1 = dt(a / n) if center else dt(0)
            c2 = dt(c / n)
            for k in range(n):
                xh = (x[r, k] - mt) * rt
                gw = g[r, k] * w[k] if with_w else g[r, k]
                dx[r, k] = rt * (gw - c1 - xh * c2)
        if need_wb:
            for k in range(n):
                xh = (x[r, k] - mt) * rt
                dw[k] += np.float64(g[r, k]) * np.float64(xh)
                db[k] += np.float64(g[r, k])
