"""The cupy multi-tensor kernels' pointer tables (``vtl.backends.cupy.optim.PointerTables``):
a table dropped from the cache while its copy from pinned memory is still queued behind
the device's work arrives intact, whatever tables are made after it."""

from __future__ import annotations

import numpy as np
import pytest

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
    import cupyx

    import vtl.backends.cupy.optim as cupy_optim

    cp = cupy_backend._cupy
    monkeypatch.setattr(cupy_optim, "_TABLES", 2)
    tables = cupy_optim.PointerTables(cp)
    # freed pinned blocks of the tables' size in CuPy's pinned pool: the tables made while
    # the stream is busy take these (a new cudaHostAlloc would wait for the device)
    blocks = [cupyx.empty_pinned(12, dtype=np.int64) for _ in range(12)]
    blocks += [cp.empty(12, dtype=np.int64) for _ in range(12)]  # and device blocks
    del blocks
    _block_stream(cp)
    made = []
    for k in range(6):  # every third table drops the two before it, copies still queued
        ptrs = np.arange(8, dtype=np.uint64).reshape(4, 2) + np.uint64(1000 * (k + 1))
        starts = np.arange(4, dtype=np.int64) * (k + 1)
        made.append((ptrs, starts, tables.get(0, ptrs, starts)))
    assert tables.copying == 4  # the dropped tables' buffers, kept for their queued copies
    cp.cuda.get_current_stream().synchronize()
    for ptrs, starts, (d_ptrs, d_starts) in made:
        np.testing.assert_array_equal(d_ptrs.get(), ptrs.ravel())
        np.testing.assert_array_equal(d_starts.get(), starts)
    assert tables.copying == 0
    # once their copies have run, the spares are reused (the cache is full: two drop)
    before = {id(buf) for buf, _ in tables._spare} | {id(e[2]) for e in tables._cache.values()}
    tables.get(0, np.zeros((4, 2), np.uint64), np.zeros(4, np.int64))
    assert id(tables._cache[next(reversed(tables._cache))][2]) in before


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


# -- the cache's bookkeeping on any machine: a stand-in for CuPy whose stream runs its
# queued copies only when told, and whose pinned pool hands freed blocks out again --------

class _Stream:
    ptr = 0

    def __init__(self) -> None:
        self.queue: list = []
        self.capturing = False

    def is_capturing(self) -> bool:
        return self.capturing

    def run(self) -> None:
        while self.queue:
            self.queue.pop(0)()


class _Event:
    def __init__(self, block: bool = False, disable_timing: bool = False) -> None:
        self.done = True

    def record(self, stream: _Stream) -> None:
        self.done = False
        stream.queue.append(lambda: setattr(self, "done", True))


class _Device(np.ndarray):
    """A "device" array: NumPy memory with CuPy's ``data.ptr``."""

    @property
    def data(self):  # type: ignore[override]
        import types

        return types.SimpleNamespace(ptr=self.ctypes.data)


class _FakeCupy:
    def __init__(self) -> None:
        import ctypes
        import types

        self.stream = _Stream()
        self.free: list[np.ndarray] = []  # the pinned pool's freed blocks, reused first

        def memcpy(dst, src, nbytes, kind, stream_ptr):  # runs when the stream gets to it
            self.stream.queue.append(lambda: ctypes.memmove(dst, src, nbytes))

        self.cuda = types.SimpleNamespace(
            get_current_stream=lambda: self.stream, Event=_Event,
            runtime=types.SimpleNamespace(memcpyAsync=memcpy, memcpyHostToDevice=1))

    def empty(self, n, dtype):
        return np.zeros(n, dtype=dtype).view(_Device)

    def empty_pinned(self, n, dtype):
        import weakref

        nbytes = n * np.dtype(dtype).itemsize
        block = next((b for b in self.free if b.size >= nbytes), None)
        if block is None:
            block = np.empty(nbytes, dtype=np.uint8)
        else:
            self.free.remove(block)
        arr = block[:nbytes].view(dtype)
        weakref.finalize(arr, self.free.append, block)
        return arr


@pytest.fixture
def fake_cupy(monkeypatch):
    import sys
    import types

    fake = _FakeCupy()
    monkeypatch.setitem(sys.modules, "cupyx", types.SimpleNamespace(
        empty_pinned=fake.empty_pinned))
    return fake


def _table(k: int) -> tuple[np.ndarray, np.ndarray]:
    return (np.arange(8, dtype=np.uint64).reshape(4, 2) + np.uint64(1000 * (k + 1)),
            np.arange(4, dtype=np.int64) * (k + 1))


def test_queued_copies_deliver_their_own_tables(fake_cupy, monkeypatch):
    import vtl.backends.cupy.optim as cupy_optim

    monkeypatch.setattr(cupy_optim, "_TABLES", 2)
    tables = cupy_optim.PointerTables(fake_cupy)
    made = [(*_table(k), tables.get(0, *_table(k))) for k in range(7)]
    assert tables.copying == 6  # the three drops of two tables: buffers wait for copies
    fake_cupy.stream.run()
    for ptrs, starts, (d_ptrs, d_starts) in made:
        np.testing.assert_array_equal(d_ptrs, ptrs.ravel())
        np.testing.assert_array_equal(d_starts, starts)
    assert tables.copying == 0


def test_spares_are_reused_once_copied_and_stay_bounded(fake_cupy, monkeypatch):
    import vtl.backends.cupy.optim as cupy_optim

    monkeypatch.setattr(cupy_optim, "_TABLES", 2)
    tables = cupy_optim.PointerTables(fake_cupy)
    for k in range(2):
        tables.get(0, *_table(k))
    first = {id(e[2]) for e in tables._cache.values()}
    tables.get(0, *_table(2))  # drops both: their copies are still queued, so a new buffer
    assert id(tables._cache[next(reversed(tables._cache))][2]) not in first
    fake_cupy.stream.run()
    tables.get(0, *_table(3))
    tables.get(0, *_table(4))  # drops two more; a spare whose copy has run is taken
    assert id(tables._cache[next(reversed(tables._cache))][2]) in first
    for k in range(5, 40):
        tables.get(0, *_table(k))
        fake_cupy.stream.run()
    assert len(tables._spare) <= 2 * cupy_optim._TABLES


def test_a_buffer_copied_from_inside_a_capture_is_never_reused(fake_cupy, monkeypatch):
    import vtl.backends.cupy.optim as cupy_optim

    monkeypatch.setattr(cupy_optim, "_TABLES", 1)
    tables = cupy_optim.PointerTables(fake_cupy)
    fake_cupy.stream.capturing = True
    tables.get(0, *_table(0))  # a graph node that copies from this buffer at each replay
    captured = tables._cache[next(iter(tables._cache))][2]
    fake_cupy.stream.capturing = False
    fake_cupy.stream.run()
    for k in range(1, 6):
        tables.get(0, *_table(k))
        fake_cupy.stream.run()
        assert all(buf is not captured for buf, _ in tables._spare)
        assert all(e[2] is not captured for e in tables._cache.values())
