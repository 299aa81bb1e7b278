"""The per-step scalars of a cupy capture (``vtl/backends/cupy/capture.py``), with NumPy and
host memory standing in for CuPy and the device: before each launch every scalars object's
current values reach its slot, in its dtype, whether written by ``struct`` or by a view."""

from __future__ import annotations

import ctypes
import sys
import types

import numpy as np
import pytest
from test_cupy_nn_kernels import _Dev

from vtl.backends._base import DynamicScalars
from vtl.backends.cupy import capture as C


class _Ptr:
    def __init__(self, a):
        self.ptr = a.ctypes.data


class _DevArray(np.ndarray):
    """A host array with CuPy's ``.data.ptr``."""

    @property
    def data(self):
        return _Ptr(self)


class _Stream(_Dev):
    ptr = 0

    def begin_capture(self):
        pass

    def end_capture(self):
        return _Graph()

    def is_capturing(self):
        return False


class _Graph:
    launches = 0

    def launch(self, stream=None):
        _Graph.launches += 1


def _fake_cupy():
    def memcpy(dst, src, n, kind, stream):
        ctypes.memmove(dst, src, n)

    cuda = types.SimpleNamespace(
        Device=lambda index=0: _Dev(), MemoryPool=lambda: types.SimpleNamespace(malloc=None),
        Stream=lambda non_blocking=True: _Stream(), using_allocator=lambda f: _Dev(),
        Event=lambda disable_timing=True: types.SimpleNamespace(
            synchronize=lambda: None, record=lambda s: None),
        get_current_stream=lambda: _Stream(),
        runtime=types.SimpleNamespace(memcpyAsync=memcpy, memcpyHostToDevice=1))
    return types.SimpleNamespace(
        cuda=cuda, empty=lambda n, dtype: np.zeros(n, dtype).view(_DevArray))


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
def test_scalars_reach_their_slots_before_each_launch(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupyx", types.SimpleNamespace(
        empty_pinned=lambda n, dtype: np.zeros(n, dtype)))
    cap = C.CupyCapture(_fake_cupy(), 0)
    words = cap.scalars((1, 2, 3, 2**32 - 1, 5, 6), "uint32")
    lr = cap.scalars((0.1, 1e-3, 2.5), "float32")
    big = cap.scalars((1e300, -2.0), "float64")
    half = cap.scalars((0.5, 65504.0), "float16")  # no struct format of ours: a view
    cap.end()

    def slots():
        return [np.array(d.where) for d in (words, lr, big, half)]

    for step in range(3):
        if step:
            words.set((7 + step, 0, 0, 1 << 31, 9, 10))
            lr.set((np.float64(0.1 / step), 1e39 if step == 2 else 1e-4, -0.0))  # 1e39: inf
            big.set((step, np.float32(0.25)))
            half.set((step, -1.0))
            cap.replay()
        got = slots()
        for arr, d in zip(got, (words, lr, big, half), strict=True):
            want = np.array(d.values, dtype=np.float64).astype(d.dtype)
            np.testing.assert_array_equal(arr, want)
            assert arr.dtype == d.dtype
    assert isinstance(words, DynamicScalars)
    assert np.isinf(slots()[1][1])  # beyond float32: the view's conversion, as before
