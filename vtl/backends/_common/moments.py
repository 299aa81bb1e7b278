"""Variance by NumPy's two-pass algorithm on top of a namespace's own ``mean`` and ``sum``.

NumPy's ``var`` is the mean (a sum divided by the count), the sum of the squared
deviations from it, and that sum divided by ``max(count - correction, 0)``. The cupy
backend's namespace uses this with its staged reductions: CuPy's own ``var`` of a
4096 x 4096 array took 12.8 ms on an H200, where its ``sum`` of the same array takes 34 µs
(PyTorch's ``var``: 40 µs).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any


def two_pass_var(mean: Callable[..., Any], sum_: Callable[..., Any], x: Any, axis: Any,
                 correction: float, keepdims: bool) -> Any:
    """``var(x, axis=axis, correction=correction, keepdims=keepdims)`` of a real float
    array through ``mean(x, axis=, keepdims=)`` and ``sum_(x, axis=, keepdims=)``."""
    if axis is None:
        count = x.size
    else:
        axes = (axis,) if isinstance(axis, int) else tuple(axis)
        count = math.prod(x.shape[a] for a in axes)
    d = x - mean(x, axis=axis, keepdims=True)
    d *= d
    return sum_(d, axis=axis, keepdims=keepdims) / max(count - correction, 0)
