"""Compiled activations of the NumPy backend (numba, the ``vtl[cpu]`` extra), each way in
one pass over flat pieces ``[i, j)`` for the kernels' thread pool, in float64, each result
rounded once to the arrays' dtype: the exact GELU through the C library's ``erfc`` (the
portable path builds ``erfc`` from a rational approximation out of about a hundred NumPy
operations; the tanh form stays NumPy's, whose vectorized ``tanh`` is faster than the C
library's in a loop), SiLU (the portable path: about ten NumPy passes each way), and
``erf``/``erfc`` with their gradients (``kernel("special")``: the C library's functions).
"""

from __future__ import annotations

import math

import numpy as np

from ._compiled import kernel

#: 1 / sqrt(2), 1 / sqrt(2 pi) and 2 / sqrt(pi)
_SQRT1_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


@kernel()
def gelu_forward(x, i, j, out):  # pragma: no cover - compiled
    """``out = x Phi(x) = x erfc(-x / sqrt(2)) / 2`` over ``[i, j)`` of the flat arrays."""
    xs, os = x[i:j], out[i:j]
    for k in range(os.size):
        v = np.float64(xs[k])
        os[k] = v * (0.5 * math.erfc(-v * _SQRT1_2))


@kernel()
def gelu_backward(x, g, i, j, out):  # pragma: no cover - compiled
    """``out = g (Phi(x) + x phi(x))`` over ``[i, j)`` of the flat arrays."""
    xs, gs, os = x[i:j], g[i:j], out[i:j]
    for k in range(os.size):
        v = np.float64(xs[k])
        d = 0.5 * math.erfc(-v * _SQRT1_2) + v * math.exp(-0.5 * v * v) * _INV_SQRT_2PI
        os[k] = np.float64(gs[k]) * d


@kernel()
def silu_forward(x, i, j, out):  # pragma: no cover - compiled
    """``out = x / (1 + exp(-x))`` over ``[i, j)`` of the flat arrays."""
    xs, os = x[i:j], out[i:j]
    for k in range(os.size):
        v = np.float64(xs[k])
        os[k] = v / (1.0 + math.exp(-v))


@kernel()
def silu_backward(x, g, i, j, out):  # pragma: no cover - compiled
    """``out = g s (1 + x (1 - s))``, ``s = 1 / (1 + exp(-x))``, over ``[i, j)``."""
    xs, gs, os = x[i:j], g[i:j], out[i:j]
    for k in range(os.size):
        v = np.float64(xs[k])
        s = 1.0 / (1.0 + math.exp(-v))
        os[k] = np.float64(gs[k]) * s * (1.0 + v * (1.0 - s))


@kernel()
def erf_forward(x, i, j, out):  # pragma: no cover - compiled
    """``out = erf(x)`` over ``[i, j)`` of the flat arrays."""
    xs, os = x[i:j], out[i:j]
    for k in range(os.size):
        os[k] = math.erf(np.float64(xs[k]))


@kernel()
def erfc_forward(x, i, j, out):  # pragma: no cover - compiled
    """``out = erfc(x)`` over ``[i, j)`` of the flat arrays."""
    xs, os = x[i:j], out[i:j]
    for k in range(os.size):
        os[k] = math.erfc(np.float64(xs[k]))


@kernel()
def erf_backward(x, g, i, j, out):  # pragma: no cover - compiled
    """``out = g 2 exp(-x^2) / sqrt(pi)`` over ``[i, j)`` of the flat arrays."""
    xs, gs, os = x[i:j], g[i:j], out[i:j]
    for k in range(os.size):
        v = np.float64(xs[k])
        os[k] = np.float64(gs[k]) * (math.exp(-v * v) * _TWO_OVER_SQRT_PI)


@kernel()
def erfc_backward(x, g, i, j, out):  # pragma: no cover - compiled
    """``out = -g 2 exp(-x^2) / sqrt(pi)`` over ``[i, j)`` of the flat arrays."""
    xs, gs, os = x[i:j], g[i:j], out[i:j]
    for k in range(os.size):
        v = np.float64(xs[k])
        os[k] = np.float64(gs[k]) * (math.exp(-v * v) * -_TWO_OVER_SQRT_PI)
