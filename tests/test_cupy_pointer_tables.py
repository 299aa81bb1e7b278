"""The cupy multi-tensor kernels' pointer tables (``vtl.backends.cupy.optim.PointerTables``):
a table dropped from the cache while its copy from pinned memory is still queued behind
the device's work arrives intact, whatever tables are made after it."""

from __future__ import annotations

import numpy as np

_SPIN = r"""
extern "C" __global__ void vtl_test_spin(long long cycles) {
    const long long start = clock64();
    while (clock64() - start < cycles) { }
}
"""


def _block_stream(cp, cycles: int = 400_000_000) -> None:
    """Queue a kernel that keeps the current stream busy for ``cycles`` clock cycles (about
    0.2 s): copies queued after it wait."""
    cp.RawKernel(_SPIN, "vtl_test_spin")((1,), (1,), (np.int64(cycles),))


def test_dropped_tables_keep_their_queued_copies(cupy_backend, monkeypatch):
    import vtl.backends.cupy.optim as cupy_optim

    cp = cupy_backend._cupy
    monkeypatch.setattr(cupy_optim, "_TABLES", 2)
    tables = cupy_optim.PointerTables(cp)
    _block_stream(cp)
    made = []
    for k in range(6):  # every third table drops the two before it, copies still queued
        ptrs = np.arange(8, dtype=np.uint64).reshape(4, 2) + np.uint64(1000 * (k + 1))
        starts = np.arange(4, dtype=np.int64) * (k + 1)
        made.append((ptrs, starts, tables.get(0, ptrs, starts)))
    assert tables.copying > 0  # the dropped tables' buffers, kept for their queued copies
    cp.cuda.get_current_stream().synchronize()
    for ptrs, starts, (d_ptrs, d_starts) in made:
        np.testing.assert_array_equal(d_ptrs.get(), ptrs.ravel())
        np.testing.assert_array_equal(d_starts.get(), starts)
    tables.get(0, np.zeros((1, 1), np.uint64), np.zeros(1, np.int64))
    assert tables.copying == 0  # released once their copies were seen to be done


def test_a_cached_table_is_made_once(cupy_backend):
    import vtl.backends.cupy.optim as cupy_optim

    cp = cupy_backend._cupy
    tables = cupy_optim.PointerTables(cp)
    ptrs = np.arange(6, dtype=np.uint64).reshape(3, 2)
    starts = np.array([0, 5, 9], dtype=np.int64)
    a = tables.get(0, ptrs, starts)
    b = tables.get(0, ptrs.copy(), starts.copy())
    assert a[0].data.ptr == b[0].data.ptr and a[1].data.ptr == b[1].data.ptr
    np.testing.assert_array_equal(b[0].get(), ptrs.ravel())
