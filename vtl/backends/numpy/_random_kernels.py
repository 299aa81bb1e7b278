"""Compiled Philox-4x32-10 of the NumPy backend (numba, the ``vtl[cpu]`` extra): the words
of ``vtl.random``'s draws, and dropout that makes each element's word where it is used
(no words or mask in memory). The same bits as ``vtl.backends.numpy.random``'s NumPy
passes; every integer is ``uint64`` so that no operation widens to a float.
"""

from __future__ import annotations

import numba as nb
import numpy as np

_OPTS = {"nogil": True, "cache": True}

_MASK = np.uint64(0xFFFFFFFF)
_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)
_S32 = np.uint64(32)
_S8 = np.uint64(8)


@nb.njit(inline="always", **_OPTS)
def _block(b, c0, c1, c2, c3, k0, k1):  # pragma: no cover - compiled
    """The four words of block ``counter + b`` (the 128-bit counter ``c0..c3``, low
    first)."""
    s = c0 + b
    x0 = s & _MASK
    s = c1 + (s >> _S32)
    x1 = s & _MASK
    s = c2 + (s >> _S32)
    x2 = s & _MASK
    x3 = (c3 + (s >> _S32)) & _MASK
    for _ in range(10):
        p0 = x0 * _M0
        p1 = x2 * _M1
        x0 = (p1 >> _S32) ^ x1 ^ k0
        x1 = p1 & _MASK
        x2 = (p0 >> _S32) ^ x3 ^ k1
        x3 = p0 & _MASK
        k0 = (k0 + _W0) & _MASK
        k1 = (k1 + _W1) & _MASK
    return x0, x1, x2, x3


@nb.njit(**_OPTS)
def philox_blocks(out, start, stop, c0, c1, c2, c3, k0, k1):  # pragma: no cover - compiled
    """Blocks ``start .. stop - 1`` of the draw into ``out`` (``(blocks, 4)`` uint32)."""
    for b in range(start, stop):
        x0, x1, x2, x3 = _block(np.uint64(b), c0, c1, c2, c3, k0, k1)
        out[b, 0] = x0
        out[b, 1] = x1
        out[b, 2] = x2
        out[b, 3] = x3


@nb.njit(**_OPTS)
def dropout(x, y, start, stop, c0, c1, c2, c3, k0, k1, thr, scale):  # pragma: no cover
    """``y[f] = x[f] * (scale if word f >> 8 >= thr else 0)`` for the elements of blocks
    ``start .. stop - 1`` (``x``, ``y`` flat)."""
    n = x.size
    zero = scale - scale
    full = min(stop, n // 4)
    for b in range(start, full):  # whole blocks: straight-line code the compiler vectorizes
        w0, w1, w2, w3 = _block(np.uint64(b), c0, c1, c2, c3, k0, k1)
        e = 4 * b
        y[e] = x[e] * (scale if (w0 >> _S8) >= thr else zero)
        y[e + 1] = x[e + 1] * (scale if (w1 >> _S8) >= thr else zero)
        y[e + 2] = x[e + 2] * (scale if (w2 >> _S8) >= thr else zero)
        y[e + 3] = x[e + 3] * (scale if (w3 >> _S8) >= thr else zero)
    for b in range(max(start, full), stop):  # the last, partial block
        w = _block(np.uint64(b), c0, c1, c2, c3, k0, k1)
        e = 4 * b
        for q in range(4):
            if e + q < n:
                y[e + q] = x[e + q] * (scale if (w[q] >> _S8) >= thr else zero)
