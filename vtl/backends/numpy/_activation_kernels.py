"""Compiled exact GELU of the NumPy backend (numba, the ``vtl[cpu]`` extra): each way in one
pass over flat pieces ``[i, j)`` for the kernels' thread pool, in float64 with the C
library's ``erfc`` (the portable path builds ``erfc`` from a rational approximation out of
about a hundred NumPy operations), each result rounded once to the arrays' dtype. The tanh
form stays NumPy's: its vectorized ``tanh`` is faster than the C library's in a loop.
"""

from __future__ import annotations

import math

from ._compiled import kernel

#: 1 / sqrt(2) and 1 / sqrt(2 pi)
_SQRT1_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


@kernel()
def gelu_forward(x, i, j, out):  # pragma: no cover - compiled
    """``out = x Phi(x) = x erfc(-x / sqrt(2)) / 2`` over ``[i, j)`` of the flat arrays."""
    xs, os = x[i:j], out[i:j]
    for k in range(os.size):
        v = float(xs[k])
        os[k] = v * (0.5 * math.erfc(-v * _SQRT1_2))


@kernel()
def gelu_backward(x, g, i, j, out):  # pragma: no cover - compiled
    """``out = g (Phi(x) + x phi(x))`` over ``[i, j)`` of the flat arrays."""
    xs, gs, os = x[i:j], g[i:j], out[i:j]
    for k in range(os.size):
        v = float(xs[k])
        d = 0.5 * math.erfc(-v * _SQRT1_2) + v * math.exp(-0.5 * v * v) * _INV_SQRT_2PI
        os[k] = float(gs[k]) * d
