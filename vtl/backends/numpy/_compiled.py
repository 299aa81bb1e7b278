"""Whether the NumPy backend's compiled kernels run: numba importable (``pip install
'vtl[cpu]'``) and ``VTL_NUMBA`` not ``0``. Without them the backend's NumPy kernels give
the same results (up to the rounding of sums)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from ..._switches import turned_off

__all__ = ["ENABLED", "available", "describe", "kernel", "turned_off"]


#: Whether the compiled kernels may run (``VTL_NUMBA=0`` turns them off).
ENABLED = not turned_off("VTL_NUMBA")

_found: bool | None = None
_why = "numba is not installed (pip install 'vtl[cpu]')"


def available() -> bool:
    """Whether :data:`ENABLED` is true and numba imports (an installed numba that fails to
    import, e.g. one too old for the installed NumPy, counts as absent)."""
    global _found, _why
    if not ENABLED:
        return False
    if _found is None:
        try:
            importlib.import_module("numba")
            _found = True
        except Exception as e:  # noqa: BLE001 - any failure to import means no kernels
            _found, _why = False, f"{type(e).__name__}: {e}"
    return _found


def describe() -> str:
    """What ``vtl info`` says of the compiled kernels."""
    if not ENABLED:
        return "not used: VTL_NUMBA=0"
    if not available():
        return f"not used: {_why}"
    from importlib.metadata import version

    return (f"numba {version('numba')} (Winograd 3x3 convolutions, im2col and col2im, 2x2 "
            "max pooling, batch and layer norm, exact GELU, SiLU, LSTM and GRU cells, Philox "
            "words, dropout, optimizer steps)")


def kernel(**options: Any) -> Callable[[Callable], Any]:
    """``numba.njit`` for the backend's kernels: without the GIL, cached on disk where numba
    finds a writable place for its cache (beside the module or in the user's cache
    directory), else compiled in each process (numba refuses ``cache=True`` at decoration
    time when there is none, e.g. on a read-only file system)."""
    import numba

    def wrap(fn: Callable) -> Any:
        try:
            return numba.njit(nogil=True, cache=True, **options)(fn)
        except RuntimeError:  # "cannot cache function ...: no locator available"
            return numba.njit(nogil=True, cache=False, **options)(fn)

    return wrap
