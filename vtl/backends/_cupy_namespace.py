"""The cupy backend's array-API namespace: ``array_api_compat.cupy`` with the
standard's signed-zero special cases that CuPy itself misses.

* ``remainder``: a zero result takes the sign of the divisor (``0.0 % -2.0 == -0.0``);
  CuPy's kernel returns ``+0.0`` there.
* ``divide``: an infinite or zero quotient takes the sign ``sign(x1) * sign(x2)``
  (``inf / -0.0 == -inf``); CuPy's float division gives ``+inf`` there (and ``+0.0`` for
  0-d ``-0.0 / inf``). Same-dtype float32/float64 operands take one kernel, as before;
  float16 keeps CuPy's result.

Every other name is ``array_api_compat.cupy``'s own.
"""

from __future__ import annotations

from typing import Any

import array_api_compat.cupy as _acp
import cupy as _cupy
from array_api_compat.cupy import *  # noqa: F403

__all__ = list(_acp.__all__)

_zero_takes_sign = _cupy.ElementwiseKernel(
    "T r, T d", "T out", "out = (r == (T)0) ? copysign(r, d) : r", "vtl_remainder_zero_sign")


def remainder(x1: Any, x2: Any, /) -> Any:
    out = _acp.remainder(x1, x2)
    if out.dtype.kind == "f" and out.dtype.itemsize >= 4:
        d = x2 if isinstance(x2, _cupy.ndarray) else _cupy.asarray(x2, dtype=out.dtype)
        out = _zero_takes_sign(out, d.astype(out.dtype, copy=False), out)
    return out


_signed_quotient = _cupy.ElementwiseKernel(
    "T a, T b", "T out",
    "out = a / b; if (!isnan(out)) out = copysign(out, signbit(a) != signbit(b) ? (T)-1 : (T)1)",
    "vtl_divide_signed")
_quotient_takes_sign = _cupy.ElementwiseKernel(
    "A a, B b", "T out",
    "if (!isnan(out)) out = copysign(out, signbit((double)a) != signbit((double)b)"
    " ? (T)-1 : (T)1)",
    "vtl_quotient_sign")


def divide(x1: Any, x2: Any, /) -> Any:
    if (isinstance(x1, _cupy.ndarray) and isinstance(x2, _cupy.ndarray)
            and x1.dtype == x2.dtype and x1.dtype in (_cupy.float32, _cupy.float64)):
        return _signed_quotient(x1, x2)
    out = _acp.divide(x1, x2)
    if out.dtype in (_cupy.float32, _cupy.float64):
        a = x1 if isinstance(x1, _cupy.ndarray) else _cupy.asarray(x1, dtype=out.dtype)
        b = x2 if isinstance(x2, _cupy.ndarray) else _cupy.asarray(x2, dtype=out.dtype)
        out = _quotient_takes_sign(a, b, out)
    return out


def __getattr__(name: str) -> Any:
    return getattr(_acp, name)
