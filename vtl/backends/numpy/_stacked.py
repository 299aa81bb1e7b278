"""Stacked matrix products of the NumPy backend (``matmul`` of arrays of three or more
dimensions, e.g. attention's per-head products) spread over the kernels' thread pool.

NumPy's ``matmul`` calls the BLAS once per matrix of the stack, one after the other; each
of those small products gains little from the BLAS's threads. Here the stack is cut
along its first axis into pieces that the pool's threads take in turn, each thread asking
NumPy's OpenBLAS for one thread of its own (as the tiled convolution does), so the
products run side by side. Each matrix of the stack is one BLAS call of the same shape on
one BLAS thread, so the values are those of ``np.matmul`` on one BLAS thread: OpenBLAS may
order a large product's sums differently when it runs it on several threads, and then the
two differ by the rounding of those sums.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._common.threads import num_threads

#: Multiply-adds (``batch * m * k * n``) from which a stacked product is spread over the
#: pool (a few hundred microseconds of work: a call to the pool costs tens of them); below
#: it NumPy's ``matmul`` runs it on the calling thread.
THRESHOLD = 1 << 24

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def matmul(x1: Any, x2: Any) -> Any | None:
    """``np.matmul(x1, x2)`` (as on one BLAS thread) for two stacks of matrices with the
    same leading dimensions and one float dtype, spread over the pool; ``None`` where it
    does not apply (other shapes or dtypes, too little work, one thread, or a BLAS whose
    threads cannot be set per calling thread)."""
    if x1.ndim < 3 or x1.ndim != x2.ndim or x1.shape[:-2] != x2.shape[:-2] \
            or x1.dtype != x2.dtype or x1.dtype not in _FLOATS:
        return None
    n = x1.shape[0]
    m, k = x1.shape[-2:]
    k2, p = x2.shape[-2:]
    threads = num_threads()
    if k != k2 or n < 2 or threads < 2 or math.prod(x1.shape[:-1]) * k * p < THRESHOLD:
        return None
    from .conv import _blas_threads_local, _pool_run

    if _blas_threads_local() is None:
        return None
    out = np.empty((*x1.shape[:-2], m, p), dtype=x1.dtype)
    step = -(-n // min(n, 2 * threads))
    starts = list(range(0, n, step))

    def run(i: int, j: int) -> None:
        for a in starts[i:j]:
            np.matmul(x1[a:a + step], x2[a:a + step], out=out[a:a + step])

    _pool_run(run, len(starts), threads)
    return out
