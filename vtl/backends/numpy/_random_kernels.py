"""Compiled Philox-4x32-10 of the NumPy backend (numba, the ``vtl[cpu]`` extra): the words
of ``vtl.random``'s draws, and dropout that makes each element's word where it is used
(no words or mask in memory). The same bits as ``vtl.backends.numpy.random``'s NumPy
passes; every integer is ``uint64`` so that no operation widens to a float.
"""

from __future__ import annotations

import numpy as np

from ._compiled import kernel

_MASK = np.uint64(0xFFFFFFFF)
_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)
_S32 = np.uint64(32)
_S8 = np.uint64(8)


#: blocks made side by side: the loop over the lanes, with the rounds unrolled inside it,
#: is what the compiler vectorizes
LANES = 64


@kernel(inline="always")
def _lanes(b0, m, c0, c1, c2, c3, k0, k1, w):  # pragma: no cover - compiled
    """The words of blocks ``counter + b0 .. counter + b0 + m - 1`` (``m <= LANES``; the
    128-bit counter ``c0..c3``, low first) into lanes ``0 .. m - 1`` of ``w`` (``(4,
    LANES)``: word ``j`` of each block in row ``j``)."""
    x0, x1, x2, x3 = w[0], w[1], w[2], w[3]
    for q in range(m):
        s = c0 + np.uint64(b0 + q)
        x0[q] = s & _MASK
        s = c1 + (s >> _S32)
        x1[q] = s & _MASK
        s = c2 + (s >> _S32)
        x2[q] = s & _MASK
        x3[q] = (c3 + (s >> _S32)) & _MASK
    for q in range(LANES):  # the ten rounds unrolled: lanes side by side in vectors
        a0, a1, a2, a3 = x0[q], x1[q], x2[q], x3[q]
        ka, kb = k0, k1
        for _ in range(10):
            p0 = (a0 & _MASK) * _M0  # 32 x 32 -> 64-bit products (the mask says so)
            p1 = (a2 & _MASK) * _M1
            a0 = ((p1 >> _S32) ^ a1 ^ ka) & _MASK
            a1 = p1 & _MASK
            a2 = ((p0 >> _S32) ^ a3 ^ kb) & _MASK
            a3 = p0 & _MASK
            ka = (ka + _W0) & _MASK
            kb = (kb + _W1) & _MASK
        x0[q], x1[q], x2[q], x3[q] = a0, a1, a2, a3


@kernel()
def philox_blocks(out, start, stop, c0, c1, c2, c3, k0, k1):  # pragma: no cover - compiled
    """Blocks ``start .. stop - 1`` of the draw into ``out`` (``(blocks, 4)`` uint32)."""
    w = np.zeros((4, LANES), np.uint64)
    for b0 in range(start, stop, LANES):
        m = min(LANES, stop - b0)
        _lanes(b0, m, c0, c1, c2, c3, k0, k1, w)
        for q in range(m):
            out[b0 + q, 0] = w[0, q]
            out[b0 + q, 1] = w[1, q]
            out[b0 + q, 2] = w[2, q]
            out[b0 + q, 3] = w[3, q]


@kernel()
def dropout(x, y, start, stop, c0, c1, c2, c3, k0, k1, thr, scale):  # pragma: no cover
    """``y[f] = x[f] * (scale if word f >> 8 >= thr else 0)`` for the elements of blocks
    ``start .. stop - 1`` (``x``, ``y`` flat)."""
    n = x.size
    zero = scale - scale
    w = np.zeros((4, LANES), np.uint64)
    x0, x1, x2, x3 = w[0], w[1], w[2], w[3]
    for b0 in range(start, stop, LANES):
        m = min(LANES, stop - b0)
        _lanes(b0, m, c0, c1, c2, c3, k0, k1, w)
        for q in range(m):
            e = 4 * (b0 + q)
            if e + 3 < n:
                y[e] = x[e] * (scale if (x0[q] >> _S8) >= thr else zero)
                y[e + 1] = x[e + 1] * (scale if (x1[q] >> _S8) >= thr else zero)
                y[e + 2] = x[e + 2] * (scale if (x2[q] >> _S8) >= thr else zero)
                y[e + 3] = x[e + 3] * (scale if (x3[q] >> _S8) >= thr else zero)
            else:  # the last, partial block
                for j in range(n - e):
                    y[e + j] = x[e + j] * (scale if (w[j, q] >> _S8) >= thr else zero)
