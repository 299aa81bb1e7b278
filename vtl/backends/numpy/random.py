"""``kernel("philox")`` of the NumPy backend: Philox-4x32-10 words with 64-bit products.

The portable generator (``vtl.random.philox_words``) multiplies through 16-bit halves so
that it runs on any array-API namespace; NumPy has ``uint64``, so a 32x32-bit product is
one multiplication and the high and low words one shift and one mask each: a third of the
array passes, the same bits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._common.dropout import FusedDropout, keep_threshold
from .._common.threads import parallel_for
from .._dtypes import LOW_FLOATING
from . import _compiled
from .nn import _FLOATS

__all__ = ["NumpyDropout", "philox"]

_MASK = 0xFFFFFFFF
_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = 0x9E3779B9, 0xBB67AE85
_ROUNDS = 10
_SHIFT = np.uint64(32)
_LOW = np.uint64(_MASK)


def philox(n: int, key: tuple[int, int], counter: int, index: int = 0) -> np.ndarray:
    """The first ``n`` words of the stream of ``key`` from block ``counter`` (a 1-D
    ``uint32`` array; see ``vtl.backends.kernels.PhiloxKernel``).

    Blocks are independent, so they are made in pieces of :data:`_CHUNK` blocks (four
    ``uint64`` arrays that stay in cache, updated in place) spread over the kernels' thread
    pool; the bits do not depend on the pieces or the threads."""
    nblocks = -(-n // 4)
    if nblocks >= 2**32:
        raise ValueError(f"vtl.random: cannot draw {n} words at once (at most 2**34)")
    out = np.empty((nblocks, 4), dtype=np.uint32)
    if _compiled.available():
        from ._random_kernels import philox_blocks

        words = _words(counter, key)
        _in_pieces(lambda a, e: philox_blocks(out, a, e, *words), nblocks)
    else:
        _in_pieces(lambda a, e: _blocks(out, a, e, key, counter), nblocks)
    flat = out.reshape(-1)
    return flat if 4 * nblocks == n else flat[:n]


def _in_pieces(fn: Callable[[int, int], None], nblocks: int) -> None:
    """``fn(start, stop)`` for the pieces of :data:`_CHUNK` blocks of ``[0, nblocks)``,
    spread over the kernels' thread pool."""
    def run(i: int, j: int) -> None:
        for p in range(i, j):
            fn(p * _CHUNK, min(nblocks, (p + 1) * _CHUNK))

    parallel_for(run, -(-nblocks // _CHUNK))


#: blocks per piece: 4 counter arrays and 2 products of 8 bytes each, 1.5 MiB in all
_CHUNK = 1 << 15


def _blocks(out: np.ndarray, start: int, stop: int, key: tuple[int, int],
            counter: int) -> None:
    """Blocks ``counter + start .. counter + stop - 1`` into ``out[start:stop]``."""
    m = stop - start
    c = [np.arange(start, stop, dtype=np.uint64)]
    c[0] += np.uint64(counter & _MASK)
    for limb in range(1, 4):  # the 128-bit counter + i, limb by limb with the carries
        prev = c[limb - 1]
        w = prev >> _SHIFT
        w += np.uint64((counter >> (32 * limb)) & _MASK)
        prev &= _LOW
        c.append(w)
    c[3] &= _LOW
    c0, c1, c2, c3 = c
    p0 = np.empty(m, dtype=np.uint64)
    p1 = np.empty(m, dtype=np.uint64)
    k0, k1 = key
    for r in range(_ROUNDS):
        if r:
            k0 = (k0 + _W0) & _MASK
            k1 = (k1 + _W1) & _MASK
        np.multiply(c0, _M0, out=p0)
        np.multiply(c2, _M1, out=p1)
        # (c0, c1, c2, c3) <- (hi(p1) ^ c1 ^ k0, lo(p1), hi(p0) ^ c3 ^ k1, lo(p0)), in place
        np.right_shift(p1, _SHIFT, out=c0)
        c0 ^= c1
        c0 ^= np.uint64(k0)
        np.bitwise_and(p1, _LOW, out=c1)
        np.right_shift(p0, _SHIFT, out=c2)
        c2 ^= c3
        c2 ^= np.uint64(k1)
        np.bitwise_and(p0, _LOW, out=c3)
    block = out[start:stop]
    block[:, 0] = c0
    block[:, 1] = c1
    block[:, 2] = c2
    block[:, 3] = c3


def _words(counter: int, key: tuple[int, int]) -> tuple[np.uint64, ...]:
    """The four counter words (low first) and the two key words, as ``uint64``."""
    return (*(np.uint64((counter >> (32 * k)) & _MASK) for k in range(4)),
            np.uint64(key[0]), np.uint64(key[1]))


class NumpyDropout(FusedDropout):
    """``kernel("dropout")`` with numba (see ``vtl.backends.kernels.DropoutKernel``): each
    element's Philox word made where it is used, on the kernels' thread pool; float32 and
    float64 computed in the array's dtype, float16 and bfloat16 in float32 and rounded once
    (the portable path's arithmetic; no mask is kept for the backward either way)."""

    def supports(self, dtype: Any) -> bool:
        dt = np.dtype(dtype)
        return (dt in _FLOATS or dt in LOW_FLOATING) and _compiled.available()

    def _run(self, x: Any, p: float, words: Any) -> Any:
        if x.dtype in LOW_FLOATING:
            return self._run(x.astype(np.float32), p, words).astype(x.dtype)
        from ._random_kernels import dropout

        y = np.empty(x.shape, dtype=x.dtype)  # (ascontiguousarray makes a 0-d array 1-d)
        x = np.ascontiguousarray(x)
        n = x.size
        if not n:
            return y
        w = tuple(np.uint64(v) for v in words)
        thr = np.uint64(keep_threshold(p))
        scale = x.dtype.type(1.0 / (1.0 - p))
        xf, yf = x.reshape(-1), y.reshape(-1)
        _in_pieces(lambda a, e: dropout(xf, yf, a, e, *w, thr, scale), -(-n // 4))
        return y
