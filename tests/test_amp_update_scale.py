"""``GradScaler.update`` in one launch (``kernel("amp_update_scale")``) against the portable
rule it replaces (``vtl.amp.grad_scaler._update_scale``), bit for bit: scales at the edges
of float32's range (the largest that still grows, infinity, subnormal products), trackers
about to grow and wrapping, found flags, factors that are not powers of two.

* On the host (given a C++ compiler): the cupy kernel's CUDA source, with the emulation of
  the CUDA built-ins of ``test_cupy_nn_kernels``.
* On every backend that has the kernel (cupy, wgpu): the kernel on the device against the
  portable rule on the same device, and ``GradScaler.update`` as one launch.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools

import numpy as np
import pytest
from helpers import to_numpy
from test_cupy_nn_kernels import _SHIM, compile_host

import vtl
from vtl.amp.grad_scaler import _update_scale
from vtl.backends.cupy.optim import CupyAmpUpdateScale

F32_MAX = float(np.finfo(np.float32).max)
SCALES = [65536.0, 1.0, 2.0**127 - 2.0**103, 2.0**127, F32_MAX, float("inf"), 2.0**-126,
          3.0e-39, 0.0, 1.7e38]
TRACKERS = [0, 1, 2, 2**31 - 1]
FOUND = [0.0, 1.0, 2.0]
FACTORS = [(2.0, 0.5), (1.1, 0.3), (3.0, 0.25), (1e39, 0.5)]
INTERVALS = [1, 3, -2**31]

CASES = list(itertools.product(SCALES, TRACKERS, FOUND, FACTORS, INTERVALS))


def _portable_numpy(s, t, f, growth, backoff, interval):
    xp = vtl.asarray(0.0, backend="numpy")._data.__array_namespace__()
    with np.errstate(all="ignore"):
        scale, tracker = _update_scale(xp, np.asarray(s, np.float32), np.asarray(t, np.int32),
                                       np.asarray(f, np.float32), growth, backoff, interval)
    return np.float32(scale), np.int32(tracker)


class _HostCupy:
    """The CuPy calls of ``CupyAmpUpdateScale`` on NumPy arrays: ``RawKernel`` builds the
    CUDA source for the host."""

    ndarray = np.ndarray

    def __init__(self, tmp):
        self.tmp, self.launches = tmp, []

    def RawKernel(self, code, name):  # noqa: N802
        launcher = f"""
extern "C" void launch(float* scale, int* tracker, const float* found, float growth,
                       float backoff, float threshold, int interval) {{
  vtl_launch(1, 1, 1, 1, [=] {{
    {name}(scale, tracker, found, growth, backoff, threshold, interval); }});
}}
"""
        src = _SHIM + code.replace('extern "C" __global__', "static") + launcher
        fn = compile_host(self.tmp / "update_scale.cpp", src).launch
        fn.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_float] * 3 + [ctypes.c_int]

        def launch(grid, block, args):
            assert grid == (1,) and block == (1,)
            assert [type(a) for a in args[3:]] == [np.float32] * 3 + [np.int32]
            self.launches.append(name)
            fn(*(a.ctypes.data for a in args[:3]), *args[3:])

        return launch


class _HostUpdateScale(CupyAmpUpdateScale):
    @staticmethod
    def _device(a):
        return contextlib.nullcontext()


def test_host_build_of_the_cupy_kernel(tmp_path):
    fake = _HostCupy(tmp_path)
    kern = _HostUpdateScale(fake)
    for s, t, f, (growth, backoff), interval in CASES:
        scale, tracker, found = (np.array(s, np.float32), np.array(t, np.int32),
                                 np.array(f, np.float32))
        assert kern(scale, tracker, found, growth, backoff, interval)
        want = _portable_numpy(s, t, f, growth, backoff, interval)
        case = (s, t, f, growth, backoff, interval)
        assert scale.view(np.uint32) == want[0].view(np.uint32), case
        assert tracker == want[1], case
    assert fake.launches == ["vtl_amp_update_scale"] * len(CASES)
    one = np.array(1.0, np.float32)
    assert not kern(one.astype(np.float64), np.array(0, np.int32), one, 2.0, 0.5, 3)
    assert not kern(one, np.array([0], np.int32), one, 2.0, 0.5, 3)
    assert not kern(one, np.array(0, np.int32), one, 2.0, 0.5, 2**31)
    assert len(fake.launches) == len(CASES)


def _kernel(backend):
    dev = vtl.asarray(0.0, backend=backend)._device
    kern = dev.backend.kernel("amp_update_scale")
    if kern is None:
        pytest.skip(f"the {backend} backend has no amp_update_scale kernel")
    return dev, kern


def test_kernel_is_the_portable_rule(backend):
    dev, kern = _kernel(backend)
    xp = dev.xp
    native = dev.backend.native_device(dev.index)

    def arrays(s, t, f):
        return (xp.asarray(s, dtype=vtl.float32, device=native),
                xp.asarray(t, dtype=vtl.int32, device=native),
                xp.asarray(f, dtype=vtl.float32, device=native))

    got, want = [], []
    for s, t, f, (growth, backoff), interval in CASES:
        scale, tracker, found = arrays(s, t, f)
        assert kern(scale, tracker, found, growth, backoff, interval)
        got.append((scale, tracker))
        scale, tracker, found = arrays(s, t, f)
        with np.errstate(all="ignore"):
            want.append(_update_scale(xp, scale, tracker, found, growth, backoff, interval))
    for case, (gs, gt), (ws, wt) in zip(CASES, got, want, strict=True):
        gs, ws = (np.asarray(dev.backend.to_host(a), np.float32) for a in (gs, ws))
        assert gs.view(np.uint32) == ws.view(np.uint32), case
        assert dev.backend.to_host(gt) == dev.backend.to_host(wt), case


def test_kernel_declines_what_it_does_not_take(backend):
    dev, kern = _kernel(backend)
    xp = dev.xp
    native = dev.backend.native_device(dev.index)
    s = xp.asarray(8.0, dtype=vtl.float32, device=native)
    t = xp.asarray(0, dtype=vtl.int32, device=native)
    f = xp.asarray(0.0, dtype=vtl.float32, device=native)
    s64 = xp.asarray(8.0, dtype=vtl.int64, device=native)
    assert not kern(s64, t, f, 2.0, 0.5, 3)  # not float32
    assert not kern(s, xp.asarray([0], dtype=vtl.int32, device=native), f, 2.0, 0.5, 3)
    assert not kern(s, t, f, 2.0, 0.5, 2**31)  # an interval beyond int32: never reached
    assert dev.backend.to_host(s) == 8.0 and dev.backend.to_host(t) == 0


def test_update_is_one_launch_on_wgpu():
    pytest.importorskip("wgpu")
    try:
        _kernel("wgpu")
    except Exception as e:  # noqa: BLE001 - no adapter
        pytest.skip(f"wgpu unavailable: {e}")
    from vtl.backends.wgpu._recorder import REC

    w = vtl.nn.Parameter(vtl.ones(3, backend="wgpu"))
    opt = vtl.optim.SGD([w], lr=0.1)
    sc = vtl.amp.GradScaler("wgpu", init_scale=4.0, growth_interval=1)
    sc.scale(vtl.sum(w * 2.0)).backward()
    sc.step(opt)
    before = REC.dispatches
    sc.update()
    assert REC.dispatches - before == 1
    assert sc.get_scale() == 8.0 and sc._get_growth_tracker() == 0
    np.testing.assert_array_equal(to_numpy(w), np.float32(1) - np.float32(0.1) * 2)
