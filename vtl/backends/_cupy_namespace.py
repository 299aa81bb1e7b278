"""The cupy backend's array-API namespace: ``array_api_compat.cupy`` with the
standard's signed-zero special cases that CuPy itself misses.

* ``remainder``: a zero result takes the sign of the divisor (``0.0 % -2.0 == -0.0``);
  CuPy's kernel returns ``+0.0`` there.
* ``divide``: CuPy loses the sign of a zero quotient (``-0.0 / inf``) and of an
  infinite one (``inf / -0.0``) when both operands are 0-d arrays; they are divided
  as 1-element arrays instead.

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


def divide(x1: Any, x2: Any, /) -> Any:
    if (isinstance(x1, _cupy.ndarray) and isinstance(x2, _cupy.ndarray)
            and x1.ndim == 0 and x2.ndim == 0):
        return _acp.divide(x1.reshape(1), x2.reshape(1)).reshape(())
    return _acp.divide(x1, x2)


def __getattr__(name: str) -> Any:
    return getattr(_acp, name)
