"""Reads of small device flags started without waiting (``Backend.read_flag_later``): the
value as it was when the read started, whatever the stream does after; the pinned ring
reused; the other backends read when called."""

from __future__ import annotations

import numpy as np
import pytest

import vtl


def test_a_later_read_gives_the_value_when_it_started(cupy_backend, monkeypatch):
    from vtl.backends.cupy._flags import FlagReads

    cp = cupy_backend._cupy
    monkeypatch.setattr(FlagReads, "SLOTS", 3)
    cupy_backend.__dict__.pop("_flags", None)
    flag = cp.zeros((), dtype=np.float32)
    reads = []
    for k in range(7):  # more reads than slots: the ring wraps, each copy finished first
        flag.fill(k)
        reads.append(cupy_backend.read_flag_later(flag))
        if k == 3:
            big = cupy_backend.read_flag_later(cp.arange(4, dtype=np.float32))
    flag.fill(-1)
    assert [float(r()) for r in reads[-3:]] == [4.0, 5.0, 6.0]
    np.testing.assert_array_equal(big(), np.arange(4, dtype=np.float32))  # over 8 bytes
    assert float(cupy_backend.read_flag_later(flag)()) == -1.0
    cupy_backend.__dict__.pop("_flags", None)


def test_other_backends_read_when_called(backend):
    if backend == "cupy":
        pytest.skip("cupy starts the copy at once (above)")
    b = vtl.backends.get(backend)
    x = vtl.asarray(np.float32(2.0), backend=backend)
    read = b.read_flag_later(x._data)
    assert float(read()) == 2.0


def test_error_buffers_written_by_a_captured_kernel_are_checked_after_each_replay(
        monkeypatch):
    """A kernel that records errors in this thread's buffer and is captured runs again at
    each replay, with no Python around it: the replay itself marks the buffer for the next
    read (a bad target given to a replayed step raises at its next read, not in some later
    call). With NumPy standing in for CuPy."""
    from vtl import capture
    from vtl.backends.cupy.checks import ErrorBuffers

    bufs = ErrorBuffers(np, 3)
    bufs.get(0)
    bufs._state.pending.clear()
    session = capture._Session(None, None)
    monkeypatch.setattr(capture._state, "session", session)
    bufs.get(0)  # a kernel captured with this buffer
    monkeypatch.setattr(capture._state, "session", None)
    bufs._state.pending.clear()  # read after the capture
    for hook in session.hooks:  # a replay
        hook()
    assert bufs.pending == {0}
