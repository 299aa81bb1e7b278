"""Compiled passes of the NumPy backend's ``batch_norm`` kernel (numba, the ``vtl[cpu]``
extra): the statistics in one pass and the normalization in another, each way, over a
range of images of an ``(N, C, L)`` array, so that the kernel pool's threads share the
images. Sums are float64, per image and channel, then over the images in image order (the same
bits on any thread count).
"""

from __future__ import annotations

import numba as nb
import numpy as np

_OPTS = {"nogil": True, "cache": True, "fastmath": {"contract"}}
#: the sums may be reassociated (vectorized): the same code, so the same bits, for a row
#: on any thread
_SUMS = {"nogil": True, "cache": True, "fastmath": {"contract", "reassoc"}}


@nb.njit(**_SUMS)
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


@nb.njit(**_OPTS)
def affine(x, i, j, scale, offset, y):  # pragma: no cover - compiled
    """``y = x * scale[c] + offset[c]`` for images ``[i, j)``."""
    c_n, length = x.shape[1], x.shape[2]
    for n in range(i, j):
        for c in range(c_n):
            a = scale[c]
            b = offset[c]
            for el in range(length):
                y[n, c, el] = x[n, c, el] * a + b


@nb.njit(**_SUMS)
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


@nb.njit(**_OPTS)
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
