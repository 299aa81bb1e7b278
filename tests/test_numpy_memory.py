"""The NumPy backend's request that glibc keep freed memory for reuse
(``vtl/backends/numpy/_memory.py``): applied when the backend loads, visible in
``vtl info``, a large array then comes from the heap instead of a fresh mapping, and
nothing changes with ``VTL_KEEP_FREED_MEMORY=0`` or when the process sets glibc's own
variables. Each case runs in a fresh interpreter (the setting is process-wide)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
    reason="the setting applies to glibc's malloc only")

_PROBE = r"""
import ctypes
import numpy as np
import vtl
from vtl.backends.numpy import _memory

class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                                               "usmblks", "fsmblks", "uordblks", "fordblks",
                                               "keepcost")]

mallinfo2 = getattr(ctypes.CDLL(None), "mallinfo2", None)  # glibc 2.33+
if mallinfo2 is None:
    mallinfo2 = lambda: MallInfo2()  # noqa: E731 - no reading: both cases read "heap"
else:
    mallinfo2.restype = MallInfo2
vtl.asarray(np.ones(3), backend="numpy") + 1  # loads the backend
before = mallinfo2().hblkhd
a = np.empty(8 << 20, dtype=np.uint8)  # 8 MiB: above glibc's default mmap threshold
mapped = mallinfo2().hblkhd - before
print(_memory.state())
print("mapped" if mapped >= 8 << 20 else "heap")
"""


def _probe(**env: str) -> list[str]:
    full = {k: v for k, v in os.environ.items()
            if k not in ("VTL_KEEP_FREED_MEMORY", "MALLOC_MMAP_THRESHOLD_",
                         "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")}
    full.update(env)
    out = subprocess.run([sys.executable, "-c", _PROBE], env=full, capture_output=True,
                         text=True, timeout=120, check=True)
    return out.stdout.strip().splitlines()


def _mallinfo2() -> bool:
    import ctypes

    return hasattr(ctypes.CDLL(None), "mallinfo2")


def test_freed_memory_is_kept_for_reuse():
    state, where = _probe()
    assert state.startswith("freed memory kept for reuse"), state
    assert where == "heap"
    state, _ = _probe(GLIBC_TUNABLES="glibc.rtld.optional_static_tls=2048")  # not malloc's
    assert state.startswith("freed memory kept for reuse"), state


@pytest.mark.parametrize(("env", "why"), [
    ({"VTL_KEEP_FREED_MEMORY": "0"}, "VTL_KEEP_FREED_MEMORY=0"),
    ({"MALLOC_TRIM_THRESHOLD_": "131072"}, "MALLOC_TRIM_THRESHOLD_ is set"),
    ({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=131072"},
     "GLIBC_TUNABLES sets malloc's tunables")])
def test_left_alone(env, why):
    state, where = _probe(**env)
    assert state == f"unchanged: {why}"
    if _mallinfo2():
        assert where == "mapped"


def test_vtl_info_reports_it():
    import vtl

    info = vtl.backends.get("numpy").info()
    assert info["memory"].startswith(("freed memory kept", "unchanged"))
