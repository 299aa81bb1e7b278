"""The C allocator's reuse of freed memory, which the NumPy backend asks for when it loads.

A training step allocates the same large arrays (activations, their gradients, patch and
scratch buffers) every step. glibc's ``malloc`` hands blocks above its mmap threshold
straight back to the OS on ``free`` and returns free memory at the top of its heaps once
it exceeds the trim threshold, so every step pays page faults again for memory it just
released: a quarter of a small CNN's step on a 2-core machine. The backend raises the mmap
threshold to :data:`MMAP_THRESHOLD` and the trim threshold to :data:`TRIM_THRESHOLD`
(``mallopt``), as glibc's ``MALLOC_MMAP_THRESHOLD_``/``MALLOC_TRIM_THRESHOLD_`` would: up to
that much freed memory stays with the process for reuse (PyTorch's CUDA allocator keeps
device memory the same way).

Nothing is changed where the C library is not glibc, where the process sets those
variables or malloc's ``GLIBC_TUNABLES`` itself, or with ``VTL_KEEP_FREED_MEMORY=0``.
"""

from __future__ import annotations

import ctypes
import os
import platform

from ._compiled import turned_off

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "keep_freed_memory", "state"]

#: Blocks up to this size come from the heap (and are reused) rather than fresh mappings:
#: glibc's largest mmap threshold on 64-bit systems.
MMAP_THRESHOLD = 32 << 20
#: Free memory kept at the top of a heap before it is returned to the OS.
TRIM_THRESHOLD = 256 << 20

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_state = "not set"


def _why_not() -> str | None:
    if turned_off("VTL_KEEP_FREED_MEMORY"):
        return "VTL_KEEP_FREED_MEMORY=0"
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return "the C library is not glibc"
    for var in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"):
        if var in os.environ:
            return f"{var} is set"
    if "glibc.malloc." in os.environ.get("GLIBC_TUNABLES", ""):
        return "GLIBC_TUNABLES sets malloc's tunables"
    return None


def keep_freed_memory() -> None:
    """Raise glibc's mmap and trim thresholds (once; see the module's docstring)."""
    global _state
    if _state != "not set":
        return
    why = _why_not()
    if why is not None:
        _state = f"unchanged: {why}"
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        _state = "unchanged: no mallopt"
        return
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    if not mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD):
        _state = "unchanged: mallopt refused the mmap threshold"
    elif not mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD):
        _state = (f"mmap threshold {MMAP_THRESHOLD >> 20} MiB; mallopt refused the trim "
                  "threshold")
    else:
        _state = (f"freed memory kept for reuse (malloc's mmap threshold "
                  f"{MMAP_THRESHOLD >> 20} MiB, trim threshold {TRIM_THRESHOLD >> 20} MiB)")


def state() -> str:
    """What :func:`keep_freed_memory` did (``vtl info``)."""
    return _state
