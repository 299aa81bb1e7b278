"""Reads of small device flags started without waiting (``Backend.read_flag_later``): the
value as it was when the read started, whatever the device does after; on cupy the pinned
ring reused, on wgpu a copy recorded in order whose read waits for nothing recorded after
it; numpy reads when called."""

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


def test_numpy_reads_when_called(backend):
    if backend in ("cupy", "wgpu"):
        pytest.skip(f"{backend} starts the copy at once (above)")
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


def test_wgpu_later_reads_give_the_values_when_recorded(wgpu):
    from vtl.backends.wgpu import _recorder

    wx = wgpu.xp
    flag = wx.zeros((), dtype=np.float32)
    halves = wx.asarray(np.arange(6, dtype=np.float16))
    reads = []
    for k in range(5):  # several pending at once: each has a staging buffer of its own
        flag[()] = float(k)
        reads.append(wgpu.read_flag_later(flag))
    odd = wgpu.read_flag_later(halves[3:4])  # an offset inside a 4-byte word
    flag[()] = -1.0
    big = wgpu.read_flag_later(wx.arange(_recorder.LATER_MAX, dtype=wx.float32))
    assert [float(r()) for r in reversed(reads)] == [4.0, 3.0, 2.0, 1.0, 0.0]
    np.testing.assert_array_equal(odd(), np.float16([3.0]))
    np.testing.assert_array_equal(big(), np.arange(_recorder.LATER_MAX, dtype=np.float32))
    assert float(wgpu.read_flag_later(flag)()) == -1.0
    assert wgpu.read_flag_later(wx.zeros((0,), dtype=np.float32))().shape == (0,)


def test_a_wgpu_later_read_leaves_later_work_unsubmitted(wgpu):
    from vtl.backends.wgpu._recorder import REC

    wx = wgpu.xp
    flag = wx.ones((), dtype=np.float32)
    read = wgpu.read_flag_later(flag)
    REC.flush()  # the copy goes with this submit
    x = wx.ones((8,), dtype=np.float32)
    y = x + x  # recorded after the copy
    pending, submits = REC.pending, REC.submits
    assert pending > 0
    assert float(read()) == 1.0
    assert (REC.pending, REC.submits) == (pending, submits)  # the read submitted nothing
    np.testing.assert_array_equal(wx.to_numpy(y), np.full(8, 2.0, np.float32))
    read = wgpu.read_flag_later(flag)  # still in the open pass: the read submits it
    assert float(read()) == 1.0
