"""The numpy backend's array-API namespace: ``array_api_compat.numpy`` with float16 and
bfloat16 (``ml_dtypes``) products and reductions computed in float32.

NumPy has no BLAS for float16 and ``ml_dtypes.bfloat16`` none at all, and a sum of many
low-precision numbers in their own dtype loses most of its digits. As PyTorch does on
the CPU, vtl computes these in float32 and rounds the result once to the low dtype:

* ``matmul``, ``tensordot``, ``vecdot`` (the result's dtype is the operands' promoted
  dtype, e.g. ``bfloat16 @ bfloat16 -> bfloat16``; NumPy itself gives ``float32`` for
  bfloat16 products);
* ``sum``, ``prod``, ``mean``, ``var``, ``std``, ``cumulative_sum``, ``cumulative_prod``
  with ``dtype=`` ``None`` or the input's (float32 accumulators, a low-precision result).

A stack of float32 or float64 products (``matmul`` of arrays of three or more dimensions)
runs its matrices side by side on the kernels' thread pool, each on one BLAS thread
(``_stacked``; equal to NumPy's up to the rounding of sums that OpenBLAS orders differently
on several threads). ``clip`` gives zeros the sign that ``np.clip`` gives them with
scalar bounds, whatever the bounds. Every other name is ``array_api_compat.numpy``'s own
(NumPy's elementwise ufuncs take float16 and bfloat16 directly, ``ml_dtypes`` registers the
latter's).
"""

from __future__ import annotations

import types
from typing import Any

import array_api_compat.numpy as _anp
import numpy as _np
from array_api_compat.numpy import *  # noqa: F403

from .._dtypes import LOW_FLOATING
from . import _stacked

__all__ = list(_anp.__all__)

_F32 = _np.dtype("float32")
_F16 = _np.dtype("float16")
#: bounds that np.clip takes by its scalar rule
_SCALARS = (int, float, _np.generic)


def _is_low(dt: Any) -> bool:
    return dt.itemsize == 2 and dt in LOW_FLOATING  # the size test first: the common case


def _wide(a: Any) -> Any:
    return a.astype(_F32) if _is_low(a.dtype) else a


def _product(fn: Any, x1: Any, x2: Any, **kw: Any) -> Any:
    dt = _np.result_type(x1.dtype, x2.dtype)
    return _np.asarray(fn(_wide(x1), _wide(x2), **kw)).astype(dt, copy=False)


def matmul(x1: Any, x2: Any, /) -> Any:
    if _is_low(x1.dtype) or _is_low(x2.dtype):
        return _product(_anp.matmul, x1, x2)
    if getattr(x1, "ndim", 0) > 2:  # a stack of products: side by side on the pool
        out = _stacked.matmul(x1, x2)
        if out is not None:
            return out
    return _anp.matmul(x1, x2)


def tensordot(x1: Any, x2: Any, /, *, axes: Any = 2) -> Any:
    if _is_low(x1.dtype) or _is_low(x2.dtype):
        return _product(_anp.tensordot, x1, x2, axes=axes)
    return _anp.tensordot(x1, x2, axes=axes)


def vecdot(x1: Any, x2: Any, /, *, axis: int = -1) -> Any:
    if _is_low(x1.dtype) or _is_low(x2.dtype):
        return _product(_anp.vecdot, x1, x2, axis=axis)
    return _anp.vecdot(x1, x2, axis=axis)


def _low_result(fn: Any, x: Any, **kw: Any) -> Any:
    """``fn`` of a float16/bfloat16 ``x`` in float32, rounded to ``x``'s dtype."""
    return _np.asarray(fn(x.astype(_F32), **kw)).astype(x.dtype, copy=False)


def sum(x: Any, /, *, axis: Any = None, dtype: Any = None,  # noqa: A001 - the standard's
        keepdims: bool = False) -> Any:
    if _is_low(x.dtype) and (dtype is None or dtype == x.dtype):
        return _low_result(_anp.sum, x, axis=axis, keepdims=keepdims)
    return _anp.sum(x, axis=axis, dtype=dtype, keepdims=keepdims)


def prod(x: Any, /, *, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Any:
    if _is_low(x.dtype) and (dtype is None or dtype == x.dtype):
        return _low_result(_anp.prod, x, axis=axis, keepdims=keepdims)
    return _anp.prod(x, axis=axis, dtype=dtype, keepdims=keepdims)


def cumulative_sum(x: Any, /, *, axis: Any = None, dtype: Any = None,
                   include_initial: bool = False) -> Any:
    if _is_low(x.dtype) and (dtype is None or dtype == x.dtype):
        return _low_result(_anp.cumulative_sum, x, axis=axis, include_initial=include_initial)
    return _anp.cumulative_sum(x, axis=axis, dtype=dtype, include_initial=include_initial)


def cumulative_prod(x: Any, /, *, axis: Any = None, dtype: Any = None,
                    include_initial: bool = False) -> Any:
    if _is_low(x.dtype) and (dtype is None or dtype == x.dtype):
        return _low_result(_anp.cumulative_prod, x, axis=axis, include_initial=include_initial)
    return _anp.cumulative_prod(x, axis=axis, dtype=dtype, include_initial=include_initial)


def mean(x: Any, /, *, axis: Any = None, keepdims: bool = False) -> Any:
    if _is_low(x.dtype):
        return _low_result(_anp.mean, x, axis=axis, keepdims=keepdims)
    return _anp.mean(x, axis=axis, keepdims=keepdims)


def var(x: Any, /, *, axis: Any = None, correction: float = 0.0, keepdims: bool = False
        ) -> Any:
    if _is_low(x.dtype):
        return _low_result(_anp.var, x, axis=axis, correction=correction, keepdims=keepdims)
    return _anp.var(x, axis=axis, correction=correction, keepdims=keepdims)


def std(x: Any, /, *, axis: Any = None, correction: float = 0.0, keepdims: bool = False
        ) -> Any:
    if _is_low(x.dtype):
        return _low_result(_anp.std, x, axis=axis, correction=correction, keepdims=keepdims)
    return _anp.std(x, axis=axis, correction=correction, keepdims=keepdims)


_SCALARS = (int, float)


def where(condition: Any, x1: Any, x2: Any, /) -> Any:
    # a Python scalar beside a float16/bfloat16 array takes its dtype (NumPy would promote
    # a float scalar beside ml_dtypes' bfloat16 to float32)
    if x1.__class__ in _SCALARS:
        if _is_low(getattr(x2, "dtype", _F32)):
            x1 = _np.asarray(x1, dtype=x2.dtype)
    elif x2.__class__ in _SCALARS and _is_low(getattr(x1, "dtype", _F32)):
        x2 = _np.asarray(x2, dtype=x1.dtype)
    return _anp.where(condition, x1, x2)


def sort(x: Any, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> Any:
    """``array_api_compat.numpy.sort``, but a descending float sort keeps equal elements
    in their order (its ascending sort reversed put ``0.0`` before an earlier ``-0.0``):
    the elements gathered by the descending stable ``argsort`` (nan first)."""
    if descending and (x.dtype.kind == "f" or _is_low(x.dtype)) and x.ndim:
        idx = _anp.argsort(x, axis=axis, descending=True, stable=True)
        return _np.take_along_axis(x, idx, axis=axis)
    return _anp.sort(x, axis=axis, descending=descending, stable=stable)


def clip(x: Any, /, min: Any = None, max: Any = None, **kw: Any) -> Any:  # noqa: A002
    """``array_api_compat.numpy.clip`` with the signed zeros of ``np.clip``'s rule for
    scalar bounds whatever the bounds: ``x`` replaced by ``min`` where it is below (or
    ``min`` is nan), then by ``max`` where it is above (or ``max`` is nan), so a zero ``x``
    inside the bounds keeps its sign. ``np.clip`` with array bounds takes ``maximum``/
    ``minimum`` loops that may pick either of two equal zeros (``clip(-5.0, -0.0, 0.0)``
    gave ``+0.0`` with the bounds as arrays, ``-0.0`` with them as scalars); the other
    values agree, so only the zeros of the result are redone. bfloat16 is clipped in
    float32 (NumPy's ``clip`` has no bfloat16 loop), which holds its values exactly."""
    dt = x.dtype
    if _is_low(dt) and dt != _F16 and not kw:
        lo, hi = (None if b is None else _np.asarray(b, dtype=dt).astype(_F32)
                  for b in (min, max))
        return _np.asarray(clip(x.astype(_F32), lo, hi)).astype(dt)[()]
    out = _anp.clip(x, min, max, **kw)
    if (min is None and max is None) or not (dt.kind == "f" or _is_low(dt)) or (
            isinstance(min, _SCALARS) and isinstance(max, _SCALARS)):
        return out  # two scalar bounds: np.clip's own rule already (one: maximum/minimum)
    res = _np.asarray(out)
    zero = res == 0
    if not zero.any():
        return out
    v = _np.broadcast_to(x, res.shape)[zero]
    for bound, beyond in ((min, _np.less), (max, _np.greater)):
        if bound is not None:
            b = _np.broadcast_to(_np.asarray(bound, dtype=dt), res.shape)[zero]
            v = _np.where(beyond(v, b), b, v)
    res[zero] = v
    return res if res.ndim else res[()]


for _f in (matmul, tensordot, vecdot, sum, prod, cumulative_sum, cumulative_prod, mean, var,
           std, where):
    _f.__doc__ = getattr(_anp, _f.__name__).__doc__
del _f


class _Linalg(types.ModuleType):
    """``array_api_compat.numpy.linalg`` with float16/bfloat16 norms computed in float32
    (its ``vector_norm`` returns float64 for bfloat16)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(_anp.linalg, name)


def _norm(name: str) -> Any:
    fn = getattr(_anp.linalg, name)

    def norm(x: Any, /, **kw: Any) -> Any:
        if _is_low(x.dtype):
            return _low_result(fn, x, **kw)
        return fn(x, **kw)

    norm.__name__ = norm.__qualname__ = name
    norm.__doc__ = fn.__doc__
    return norm


linalg = _Linalg(__name__ + ".linalg", _anp.linalg.__doc__)
linalg.vector_norm = _norm("vector_norm")
linalg.matrix_norm = _norm("matrix_norm")
