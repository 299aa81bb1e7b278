"""The cupy backend's array-API namespace: ``array_api_compat.cupy`` with the
standard's signed-zero special cases that CuPy itself misses.

* ``remainder``: a zero result takes the sign of the divisor (``0.0 % -2.0 == -0.0``);
  CuPy's kernel returns ``+0.0`` there.

Known CuPy deviation left as is: its float division gives ``+inf`` for
``inf / -0.0`` (and ``+0.0`` for 0-d ``-0.0 / inf``), where IEEE and NumPy give the
signed result.

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


def __getattr__(name: str) -> Any:
    return getattr(_acp, name)
