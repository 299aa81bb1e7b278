"""``argmax``/``argmin`` with NumPy's answers, built from a namespace's ``max``/``min``,
``where`` and an integer ``min``, none of whose results depend on the order a parallel
reduction visits the elements.

NumPy returns the first index of the extreme along the axis; a nan is the extreme of any
slice holding one (its first nan wins); -0.0 and +0.0 are equal (the first wins). CuPy's
float32 ``argmax``/``argmin`` gave a later index on an H200 for some ties of equal values,
so the cupy backend's namespace takes its indices from here: the extreme value of each slice
(``max``/``min`` propagate nan), then the smallest index holding it (or holding a nan).
"""

from __future__ import annotations

from typing import Any


def first_arg_extreme(xp: Any, x: Any, axis: int | None, keepdims: bool,
                      largest: bool) -> Any:
    """``argmax`` (``largest``) or ``argmin`` of the real array ``x`` along ``axis`` (all
    axes flattened for ``None``), as NumPy: the first index of the extreme, nan first."""
    a = xp.reshape(x, (-1,)) if axis is None else x
    ax = 0 if axis is None else axis % max(x.ndim, 1)
    n = a.shape[ax]
    if n == 0:
        raise ValueError(f"{'argmax' if largest else 'argmin'}() of an empty axis")
    m = (xp.max if largest else xp.min)(a, axis=ax, keepdims=True)
    hit = a == m
    if x.dtype.kind == "f":  # a nan extreme: the nans are the hits (nan == nan is False)
        hit = xp.logical_or(hit, xp.isnan(a))
    shape = [1] * a.ndim
    shape[ax] = n
    index = xp.reshape(xp.arange(n, dtype=xp.int64), tuple(shape))
    out = xp.min(xp.where(hit, index, n), axis=ax, keepdims=keepdims)
    if axis is None and keepdims:
        out = xp.reshape(out, (1,) * x.ndim)
    return out
