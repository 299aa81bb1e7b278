"""Whether the NumPy backend's compiled kernels run: numba installed (``pip install
'vtl[cpu]'``) and ``VTL_NUMBA`` not ``0``. Without them the backend's NumPy kernels give
the same results (up to the rounding of sums)."""

from __future__ import annotations

import importlib.util
import os

__all__ = ["ENABLED", "available", "describe"]

#: Whether the compiled kernels may run (``VTL_NUMBA=0`` turns them off).
ENABLED = os.environ.get("VTL_NUMBA", "1").strip() not in ("0", "false", "False", "")

_found: bool | None = None


def available() -> bool:
    """Whether numba is installed and :data:`ENABLED` is true."""
    global _found
    if _found is None:
        _found = importlib.util.find_spec("numba") is not None
    return _found and ENABLED


def describe() -> str:
    """What ``vtl info`` says of the compiled kernels."""
    if not ENABLED:
        return "not used: VTL_NUMBA=0"
    if not available():
        return "not used: numba is not installed (pip install 'vtl[cpu]')"
    from importlib.metadata import version

    return (f"numba {version('numba')} (Winograd 3x3 convolutions, batch norm)")
