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

Every other name is ``array_api_compat.numpy``'s own (NumPy's elementwise ufuncs take
float16 and bfloat16 directly, ``ml_dtypes`` registers the latter's).
"""

from __future__ import annotations

from typing import Any

import array_api_compat.numpy as _anp
import numpy as _np
from array_api_compat.numpy import *  # noqa: F403

from .._dtypes import LOW_FLOATING

__all__ = list(_anp.__all__)

_F32 = _np.dtype("float32")


def _low(*arrays: Any) -> bool:
    return any(getattr(a, "dtype", None) in LOW_FLOATING for a in arrays)


def _wide(a: Any) -> Any:
    return a.astype(_F32) if a.dtype in LOW_FLOATING else a


def _product(fn: Any, x1: Any, x2: Any, **kw: Any) -> Any:
    if not _low(x1, x2):
        return fn(x1, x2, **kw)
    dt = _np.result_type(x1.dtype, x2.dtype)
    return _np.asarray(fn(_wide(x1), _wide(x2), **kw)).astype(dt, copy=False)


def matmul(x1: Any, x2: Any, /) -> Any:
    return _product(_anp.matmul, x1, x2)


def tensordot(x1: Any, x2: Any, /, *, axes: Any = 2) -> Any:
    return _product(_anp.tensordot, x1, x2, axes=axes)


def vecdot(x1: Any, x2: Any, /, *, axis: int = -1) -> Any:
    return _product(_anp.vecdot, x1, x2, axis=axis)


def _reduction(name: str) -> Any:
    fn = getattr(_anp, name)

    def reduce(x: Any, /, *args: Any, dtype: Any = None, **kw: Any) -> Any:
        if x.dtype in LOW_FLOATING and (dtype is None or dtype == x.dtype):
            return _np.asarray(fn(x.astype(_F32), *args, **kw)).astype(x.dtype, copy=False)
        if dtype is not None:
            kw["dtype"] = dtype
        return fn(x, *args, **kw)

    reduce.__name__ = reduce.__qualname__ = name
    reduce.__doc__ = fn.__doc__
    return reduce


def _moment(name: str) -> Any:
    fn = getattr(_anp, name)

    def moment(x: Any, /, **kw: Any) -> Any:
        if x.dtype in LOW_FLOATING:
            return _np.asarray(fn(x.astype(_F32), **kw)).astype(x.dtype, copy=False)
        return fn(x, **kw)

    moment.__name__ = moment.__qualname__ = name
    moment.__doc__ = fn.__doc__
    return moment


sum = _reduction("sum")  # noqa: A001 - the standard's names
prod = _reduction("prod")
cumulative_sum = _reduction("cumulative_sum")
cumulative_prod = _reduction("cumulative_prod")
mean = _moment("mean")
var = _moment("var")
std = _moment("std")


def _weak(s: Any, other: Any) -> Any:
    if isinstance(s, (int, float)) and not isinstance(s, bool) \
            and getattr(other, "dtype", None) in LOW_FLOATING:
        return _np.asarray(s, dtype=other.dtype)
    return s


def where(condition: Any, x1: Any, x2: Any, /) -> Any:
    # a Python scalar beside a float16/bfloat16 array takes its dtype (NumPy would promote
    # a float scalar beside ml_dtypes' bfloat16 to float32)
    return _anp.where(condition, _weak(x1, x2), _weak(x2, x1))
