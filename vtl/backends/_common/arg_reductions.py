"""``argmax``/``argmin`` with NumPy's answers on a namespace whose float comparisons may
flush subnormals to zero, built from integer ``max``/``min``, ``where`` and comparisons.

NumPy returns the first index of the extreme along the axis; a nan is the extreme of any
slice holding one (its first nan wins); -0.0 and +0.0 are equal (the first wins); the
smallest subnormal is larger than zero. CuPy's float32 kernels on an H200 compared
``5e-45`` equal to ``0.0`` (flushed to zero), so its ``argmax``/``argmin`` gave the index
of a zero where NumPy gives the subnormal's. Here each float becomes an integer key of
its bits that orders as the floats do (negative floats' magnitude bits inverted, -0.0
as +0.0, every nan the extreme), and the first index holding the slice's extreme key is
the smallest such index (an integer ``min``, whatever order a parallel reduction takes).
"""

from __future__ import annotations

from typing import Any

from .._dtypes import kind as _dkind


def first_arg_extreme(xp: Any, x: Any, axis: int | None, keepdims: bool,
                      largest: bool) -> Any:
    """``argmax`` (``largest``) or ``argmin`` of the real array ``x`` along ``axis`` (all
    axes flattened for ``None``), as NumPy: the first index of the extreme, nan first."""
    if _dkind(x.dtype) == "f":
        x = _order_keys(xp, x, largest)
    a = xp.reshape(x, (-1,)) if axis is None else x
    ax = 0 if axis is None else axis % max(x.ndim, 1)
    n = a.shape[ax]
    if n == 0:
        raise ValueError(f"{'argmax' if largest else 'argmin'}() of an empty axis")
    m = (xp.max if largest else xp.min)(a, axis=ax, keepdims=True)
    hit = a == m
    shape = [1] * a.ndim
    shape[ax] = n
    index = xp.reshape(xp.arange(n, dtype=xp.int64), tuple(shape))
    out = xp.min(xp.where(hit, index, n), axis=ax, keepdims=keepdims)
    if axis is None and keepdims:
        out = xp.reshape(out, (1,) * x.ndim)
    return out


_KEY_DTYPES = {2: "int16", 4: "int32", 8: "int64"}


def _order_keys(xp: Any, x: Any, largest: bool) -> Any:
    """Integer keys of the float array ``x`` (its bits) in the floats' order: -0.0 and +0.0
    the same key, every nan the largest key (``largest``) or the smallest."""
    kdt = getattr(xp, _KEY_DTYPES[x.dtype.itemsize])
    imax = xp.iinfo(kdt).max
    imin = xp.iinfo(kdt).min
    b = x.view(kdt)
    key = xp.where(b < 0, b ^ imax, b)  # negative floats: larger magnitude, smaller key
    key = xp.where(b == imin, 0, key)  # -0.0 is +0.0
    return xp.where(xp.isnan(x), imax if largest else imin, key)
