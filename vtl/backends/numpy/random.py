"""``kernel("philox")`` of the NumPy backend: Philox-4x32-10 words with 64-bit products.

The portable generator (``vtl.random.philox_words``) multiplies through 16-bit halves so
that it runs on any array-API namespace; NumPy has ``uint64``, so a 32x32-bit product is
one multiplication and the high and low words one shift and one mask each: a third of the
array passes, the same bits.
"""

from __future__ import annotations

import numpy as np

__all__ = ["philox"]

_MASK = 0xFFFFFFFF
_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = 0x9E3779B9, 0xBB67AE85
_ROUNDS = 10
_SHIFT = np.uint64(32)
_LOW = np.uint64(_MASK)


def philox(n: int, key: tuple[int, int], counter: int, index: int = 0) -> np.ndarray:
    """The first ``n`` words of the stream of ``key`` from block ``counter`` (a 1-D
    ``uint32`` array; see ``vtl.backends.kernels.PhiloxKernel``)."""
    nblocks = -(-n // 4)
    if nblocks >= 2**32:
        raise ValueError(f"vtl.random: cannot draw {n} words at once (at most 2**34)")
    c = [np.arange(nblocks, dtype=np.uint64)]
    c[0] += np.uint64(counter & _MASK)
    for limb in range(1, 4):  # the 128-bit counter + i, limb by limb with the carries
        prev = c[limb - 1]
        w = prev >> _SHIFT
        w += np.uint64((counter >> (32 * limb)) & _MASK)
        prev &= _LOW
        c.append(w)
    c[3] &= _LOW
    c0, c1, c2, c3 = c
    k0, k1 = key
    for r in range(_ROUNDS):
        if r:
            k0 = (k0 + _W0) & _MASK
            k1 = (k1 + _W1) & _MASK
        p0 = c0 * _M0
        p1 = c2 * _M1
        hi1 = p1 >> _SHIFT
        hi1 ^= c1
        hi1 ^= np.uint64(k0)
        hi0 = p0 >> _SHIFT
        hi0 ^= c3
        hi0 ^= np.uint64(k1)
        p1 &= _LOW
        p0 &= _LOW
        c0, c1, c2, c3 = hi1, p1, hi0, p0
    out = np.empty((nblocks, 4), dtype=np.uint32)
    out[:, 0] = c0
    out[:, 1] = c1
    out[:, 2] = c2
    out[:, 3] = c3
    flat = out.reshape(-1)
    return flat if 4 * nblocks == n else flat[:n]
