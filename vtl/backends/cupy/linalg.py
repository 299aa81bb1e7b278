"""The cupy backend's ``linalg`` extension: ``array_api_compat.cupy.linalg`` with ``solve``
of systems without elements answered here.

CuPy's batched solver (``cupy.cublas.batched_gesv``, used for stacks of matrices up to
256 x 256) builds its pointer arrays with ``cupy.arange(start, stop, step)``, whose step is
the byte size of one right-hand side: with no right-hand-side columns (``x2`` of shape
``(..., M, 0)``, e.g. a 1 x 1 system with a stacked ``(2, 1, 0)`` right-hand side) the step
is 0 and ``arange`` raises ``ZeroDivisionError``. Such results are empty arrays of the
result's shape and dtype (``_special_cases.empty_solve``).

Every other name is ``array_api_compat.cupy.linalg``'s own.
"""

from __future__ import annotations

from typing import Any

import array_api_compat.cupy as _acp
import array_api_compat.cupy.linalg as _acl
from array_api_compat.cupy.linalg import *  # noqa: F403

from .._common.special_cases import empty_solve

__all__ = list(_acl.__all__)


def solve(x1: Any, x2: Any, /) -> Any:
    with x1.device:  # (array_api_compat.cupy's empty() allocates on the current device)
        out = empty_solve(_acp, x1, x2)
    return _acl.solve(x1, x2) if out is None else out


solve.__doc__ = _acl.solve.__doc__


def __getattr__(name: str) -> Any:
    return getattr(_acl, name)
