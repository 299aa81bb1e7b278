"""Gradient clipping's fused kernel (``kernel("grad_norm")``, ``vtl/backends/cupy/optim.py``)
and the portable path it replaces.

* On the host (given a C++20 compiler): the CUDA source is compiled with the emulation of
  the CUDA built-ins of ``test_cupy_nn_kernels`` and driven through the real
  ``CupyGradNorm`` wrapper by a stand-in for CuPy; the norms (1, 2, inf, with nan and inf
  elements) and the clipping are compared with NumPy.
* The emulated kernel registered as the numpy backend's ``grad_norm`` kernel runs behind
  ``clip_grad_norm_``, ``get_total_norm`` and ``clip_grads_with_norm_``: same results as the
  portable path, in three launches.
* Every backend: the portable path against NumPy, and ``get_total_norm`` +
  ``clip_grads_with_norm_`` equal to ``clip_grad_norm_``.
* On a GPU (the cupy backend): the kernel against the portable path.
* The numpy backend's own ``grad_norm`` kernel (the 2-norm in NumPy; the scaling stays the
  portable path's): the portable path's norm and clipped gradients bit for bit.
"""

from __future__ import annotations

import contextlib
import ctypes
import math

import numpy as np
import pytest
from helpers import to_numpy, use_kernel
from test_cupy_nn_kernels import _SHIM, compile_host, host_args

import vtl
from vtl.backends.cupy import optim as G
from vtl.nn.utils import clip_grad_norm_, clip_grads_with_norm_, get_total_norm

RNG = np.random.default_rng(5)

_LAUNCHERS = r"""
using std::sqrt;
extern "C" void launch_vtl_norm_partials(unsigned gx, const unsigned long long* ptrs,
    const long long* starts, int n, long long total, int kind, T* partials) {
  vtl_launch(gx, 1, NORM_BLOCK, 1,
             [=] { vtl_norm_partials(ptrs, starts, n, total, kind, partials); });
}
extern "C" void launch_vtl_norm_finalize(unsigned gx, const T* partials, int n, int kind,
                                         T* out) {
  vtl_launch(gx, 1, NORM_BLOCK, 1, [=] { vtl_norm_finalize(partials, n, kind, out); });
}
extern "C" void launch_vtl_clip_scale(unsigned gx, const unsigned long long* ptrs,
    const long long* starts, int n, long long total, const T* norm, T max_norm) {
  vtl_launch(gx, 1, NORM_BLOCK, 1, [=] { vtl_clip_scale(ptrs, starts, n, total, norm, max_norm); });
}
extern "C" void launch_vtl_amp_unscale(unsigned gx, const unsigned long long* ptrs,
    const long long* starts, int n, long long total, const float* inv, float* found) {
  vtl_launch(gx, 1, NORM_BLOCK, 1, [=] { vtl_amp_unscale(ptrs, starts, n, total, inv, found); });
}
"""


class _HostFunction:
    def __init__(self, fn, dt, log):
        self.fn, self.dt, self.log = fn, dt, log

    def __call__(self, grid, block, args):
        (gx,) = grid
        assert block == (G.NORM_BLOCK,) and 1 <= gx <= G.NORM_MAX_BLOCKS
        conv = host_args(args, self.dt)
        self.log.append(self.fn.__name__)
        self.fn(ctypes.c_uint(gx), *conv)


class FakeCupy:
    """The CuPy calls of ``CupyGradNorm``, on NumPy arrays; ``RawKernel`` builds the CUDA
    source for the host."""

    ndarray = np.ndarray

    def __init__(self, tmp):
        self.tmp, self.built, self.log = tmp, {}, []

    def RawKernel(self, code, name):  # noqa: N802
        lib = self.built.get(code)
        if lib is None:
            k = len(self.built)
            src = _SHIM + code.replace('extern "C" __global__', "static") + _LAUNCHERS
            lib = self.built[code] = compile_host(self.tmp / f"g{k}.cpp", src)
        dt = np.dtype(np.float64 if "typedef double T;" in code else np.float32)
        return _HostFunction(getattr(lib, f"launch_{name}"), dt, self.log)

    def empty(self, shape, dtype):
        return np.full(shape, np.nan, dtype)


class _Tables:
    def get(self, device, ptrs, starts):
        return ptrs, starts


class HostGradNorm(G.CupyGradNorm):
    """The real wrapper with host addresses and no CUDA device."""

    def __init__(self, fake):
        super().__init__(fake)
        self._tables = _Tables()

    @staticmethod
    def _address(a):
        return a.ctypes.data

    @staticmethod
    def _device_id(a):
        return 0

    @staticmethod
    def _device(a):
        return contextlib.nullcontext()


@pytest.fixture(scope="module")
def fake_cupy(tmp_path_factory):
    return FakeCupy(tmp_path_factory.mktemp("gradnorm"))


@pytest.fixture(scope="module")
def host_kernel(fake_cupy):
    return HostGradNorm(fake_cupy)


def _np_norm(arrays, p):
    flat = np.concatenate([a.ravel().astype(np.float64) for a in arrays])
    if math.isinf(p):
        return np.max(np.abs(flat)) if flat.size else 0.0
    return np.sum(np.abs(flat) ** p) ** (1.0 / p)


def _arrays(dt, sizes=((3, 7), (1000,), (0,), (257, 3), (5,))):
    return [RNG.standard_normal(s).astype(dt) for s in sizes]


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("p", [1.0, 2.0, math.inf])
def test_host_kernel_norm_and_clip(host_kernel, dt, p):
    arrays = _arrays(dt)
    want = _np_norm(arrays, p)
    got = host_kernel.norm(arrays, p)
    assert got.shape == () and got.dtype == dt
    tol = 1e-5 if dt == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol)
    before = [a.copy() for a in arrays]
    for max_norm in (want / 3, want * 3):
        arrays = [b.copy() for b in before]
        assert host_kernel.clip_(arrays, got, float(max_norm))
        coef = min(dt(max_norm) / (got + dt(1e-6)), 1.0)
        for a, b in zip(arrays, before, strict=True):
            np.testing.assert_allclose(a, b * coef, rtol=tol, atol=0)


def test_host_kernel_many_blocks_is_deterministic(host_kernel, monkeypatch):
    # more elements than MAX_BLOCKS * BLOCK threads: each thread folds several (a grid of
    # four blocks: the emulation runs the threads one after another)
    monkeypatch.setattr(G, "NORM_MAX_BLOCKS", 4)
    arrays = [RNG.standard_normal(G.NORM_MAX_BLOCKS * G.NORM_BLOCK + 999).astype(np.float32),
              RNG.standard_normal(77).astype(np.float32)]
    a, b = host_kernel.norm(arrays, 2.0), host_kernel.norm(arrays, 2.0)
    assert a.tobytes() == b.tobytes()
    np.testing.assert_allclose(a, _np_norm(arrays, 2.0), rtol=1e-5)


@pytest.mark.parametrize("p", [1.0, 2.0, math.inf])
def test_host_kernel_special_values(host_kernel, p):
    a = _arrays(np.float32, ((40,), (9,)))
    a[1][3] = np.inf
    assert host_kernel.norm(a, p) == np.inf
    a[0][5] = np.nan
    assert np.isnan(host_kernel.norm(a, p))
    # a nan norm turns every gradient nan (PyTorch's rule)
    assert host_kernel.clip_(a, np.asarray(np.nan, np.float32), 1.0)
    assert np.isnan(a[0]).all() and np.isnan(a[1]).all()


def test_host_kernel_declines(host_kernel):
    f32 = np.ones(3, np.float32)
    assert host_kernel.norm([f32, np.ones(3, np.float64)], 2.0) is None  # mixed dtypes
    assert host_kernel.norm([np.ones((4, 4), np.float32)[:, ::2]], 2.0) is None
    assert host_kernel.norm([f32], 3.0) is None  # a norm it does not compute
    assert host_kernel.norm([np.ones(0, np.float32)], 2.0) is None
    assert not host_kernel.supports(np.float16, 2.0)
    assert not host_kernel.supports(np.float32, 0.5)
    assert host_kernel.supports(np.float64, math.inf)
    assert not host_kernel.clip_([f32], np.asarray(1.0), 1.0)  # norm of another dtype


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_host_amp_unscale(host_kernel, dt):
    """GradScaler's unscale in one launch: every element times ``inv``; the flag set by a
    non-finite product and never cleared."""
    arrays = _arrays(dt)
    want = [a.astype(np.float64) * 0.25 for a in arrays]
    inv = np.asarray(0.25, np.float32)
    found = np.zeros((), np.float32)
    host_kernel._cp.log.clear()
    assert host_kernel.unscale_(arrays, inv, found)
    assert host_kernel._cp.log == ["launch_vtl_amp_unscale"]
    assert float(found) == 0.0
    for a, w in zip(arrays, want, strict=True):
        np.testing.assert_allclose(a, w, rtol=1e-7)
    arrays[1][5] = np.inf
    assert host_kernel.unscale_(arrays, inv, found) and float(found) == 1.0
    arrays[1][5] = 0.0
    assert host_kernel.unscale_(arrays, inv, found) and float(found) == 1.0  # never cleared
    assert not host_kernel.unscale_(arrays, inv.astype(np.float64), found)
    assert not host_kernel.unscale_([arrays[0], arrays[1].astype(np.float16)], inv, found)


def _scaler_runs(kernels, backend="numpy"):
    """Scales and final parameters of a GradScaler run with overflows at steps 1 and 4,
    once per entry of ``kernels`` (registered as ``backend``'s ``amp_unscale``)."""
    runs = []
    for kern in kernels:
        with use_kernel("amp_unscale", kern, backend=backend):
            vtl.random.seed(0)
            net = vtl.nn.Linear(4, 3).to(backend)
            opt = vtl.optim.SGD(net.parameters(), lr=0.1)
            sc = vtl.amp.GradScaler(backend, init_scale=4.0, growth_interval=2)
            x = vtl.asarray(np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4),
                            backend=backend)
            scales = []
            for step in range(6):
                opt.zero_grad()
                loss = net(x).sum() * (np.inf if step in (1, 4) else 1.0)
                sc.scale(loss).backward()
                sc.step(opt)
                sc.update()
                scales.append(sc.get_scale())
            runs.append((scales, [p.numpy() for p in net.parameters()]))
    return runs


def _same_runs(runs):
    assert runs[0][0] == runs[1][0]
    for a, b in zip(runs[0][1], runs[1][1], strict=True):
        np.testing.assert_array_equal(a, b)


def test_grad_scaler_through_the_unscale_kernel(fake_cupy, host_kernel):
    """GradScaler with the emulated kernel: the same scales, skipped steps and parameters
    as the portable path over a run with overflows."""
    _same_runs(_scaler_runs([host_kernel.unscale_, None]))


def test_gpu_grad_scaler_unscale_kernel_matches_portable(cupy_backend):
    kern = cupy_backend.kernel("amp_unscale")
    assert kern is not None
    _same_runs(_scaler_runs([kern, None], backend="cupy"))


def _params(dt, backend="numpy"):
    ps = []
    for a in _arrays(dt, ((4, 3), (3,), (17, 2))):
        p = vtl.asarray(a, device=backend, requires_grad=True)
        p.grad = vtl.asarray(RNG.standard_normal(a.shape).astype(dt), device=backend)
        ps.append(p)
    return ps


@pytest.mark.parametrize("p", [1.0, 2.0, math.inf])
def test_clip_grad_norm_through_the_kernel(fake_cupy, host_kernel, p):
    ref = _params(np.float32)
    fused = [vtl.asarray(to_numpy(t), requires_grad=True) for t in ref]
    for f, r in zip(fused, ref, strict=True):
        f.grad = vtl.asarray(to_numpy(r.grad))
    with use_kernel("grad_norm", None):  # the portable path
        want = clip_grad_norm_(ref, 0.5, norm_type=p)
    fake_cupy.log.clear()
    with use_kernel("grad_norm", host_kernel):
        got = clip_grad_norm_(fused, 0.5, norm_type=p)
    assert fake_cupy.log == ["launch_vtl_norm_partials", "launch_vtl_norm_finalize",
                             "launch_vtl_clip_scale"]
    np.testing.assert_allclose(to_numpy(got), to_numpy(want), rtol=1e-5)
    for f, r in zip(fused, ref, strict=True):
        np.testing.assert_allclose(to_numpy(f.grad), to_numpy(r.grad), rtol=1e-5, atol=1e-7)


def test_split_clipping_through_the_kernel(fake_cupy, host_kernel):
    ps = _params(np.float64)
    grads = [to_numpy(p.grad).copy() for p in ps]  # the kernel scales the arrays in place
    fake_cupy.log.clear()
    with use_kernel("grad_norm", host_kernel):
        total = get_total_norm([p.grad for p in ps])
        clip_grads_with_norm_(ps, 1.0, total)
    assert len(fake_cupy.log) == 3
    n = _np_norm(grads, 2.0)
    np.testing.assert_allclose(to_numpy(total), n, rtol=1e-12)
    for p, g in zip(ps, grads, strict=True):
        np.testing.assert_allclose(to_numpy(p.grad), g * min(1.0 / (n + 1e-6), 1.0),
                                   rtol=1e-12)


def test_mixed_dtypes_take_the_portable_path(fake_cupy, host_kernel):
    ps = _params(np.float32)
    ps[1] = vtl.asarray(to_numpy(ps[1]).astype(np.float64), requires_grad=True)
    ps[1].grad = vtl.asarray(RNG.standard_normal(ps[1].shape))
    grads = [to_numpy(p.grad) for p in ps]
    fake_cupy.log.clear()
    with use_kernel("grad_norm", host_kernel):
        total = clip_grad_norm_(ps, 0.1)
    assert fake_cupy.log == []
    np.testing.assert_allclose(to_numpy(total), _np_norm(grads, 2.0), rtol=1e-5)


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.0, math.inf, -math.inf])
def test_portable_clip_matches_numpy(backend, p):
    ps = _params(np.float32, backend)
    grads = [to_numpy(t.grad).astype(np.float64) for t in ps]
    total = clip_grad_norm_(ps, 0.25, norm_type=p)
    flat = np.concatenate([g.ravel() for g in grads])
    if p == 0.0:
        want = float(np.count_nonzero(flat))
    elif p == -math.inf:
        want = np.min(np.abs(flat))
    else:
        want = _np_norm(grads, p)
    np.testing.assert_allclose(to_numpy(total), want, rtol=1e-5)
    coef = min(0.25 / (want + 1e-6), 1.0)
    for t, g in zip(ps, grads, strict=True):
        np.testing.assert_allclose(to_numpy(t.grad), g * coef, rtol=1e-5, atol=1e-7)


def test_split_clipping_equals_clip_grad_norm(backend):
    a = _params(np.float32, backend)
    b = [vtl.asarray(to_numpy(t), device=backend, requires_grad=True) for t in a]
    for x, y in zip(b, a, strict=True):
        x.grad = vtl.asarray(to_numpy(y.grad), device=backend)
    want = clip_grad_norm_(a, 0.3)
    total = get_total_norm([t.grad for t in b] + [None])
    clip_grads_with_norm_(b, 0.3, total)
    np.testing.assert_allclose(to_numpy(total), to_numpy(want), rtol=1e-6)
    for x, y in zip(b, a, strict=True):
        np.testing.assert_allclose(to_numpy(x.grad), to_numpy(y.grad), rtol=1e-6)
    assert float(get_total_norm([])) == 0.0
    with pytest.raises(TypeError, match="total_norm must be a Tensor"):
        clip_grads_with_norm_(b, 0.3, 1.0)
    bad = vtl.asarray([np.inf], device=backend)
    with pytest.raises(RuntimeError, match="non-finite"):
        get_total_norm([bad], error_if_nonfinite=True)


@pytest.mark.parametrize("p", [1.0, 2.0, math.inf])
def test_gpu_kernel_matches_portable(p):
    if "cupy" not in vtl.backends.available_names():
        pytest.skip("needs the cupy backend")
    be = vtl.backends.get("cupy")
    assert be.kernel("grad_norm") is not None
    sizes = ((1024, 1024), (3,), (513, 7), (0,), (300000,))
    grads = [RNG.standard_normal(s).astype(np.float32) for s in sizes]

    def run():
        ps = []
        for g in grads:
            t = vtl.asarray(np.zeros_like(g), device="cupy", requires_grad=True)
            t.grad = vtl.asarray(g, device="cupy")
            ps.append(t)
        total = clip_grad_norm_(ps, 1.0, norm_type=p)
        return [to_numpy(total)] + [to_numpy(t.grad) for t in ps]

    fused = run()
    with use_kernel("grad_norm", None, "cupy"):
        ref = run()
    for a, r in zip(fused, ref, strict=True):
        np.testing.assert_allclose(a, r, rtol=2e-5, atol=1e-9)


def test_wgpu_grad_scaler_unscale_kernel_matches_portable():
    be = vtl.backends.get("wgpu")
    if not be.is_available:
        pytest.skip(f"wgpu backend unavailable: {be.unavailable_reason}")
    kern = be.kernel("amp_unscale")
    assert kern is not None
    launches = kern.__self__.launches
    _same_runs(_scaler_runs([kern, None], backend="wgpu"))
    assert kern.__self__.launches > launches


def test_wgpu_unscale_sets_the_flag():
    be = vtl.backends.get("wgpu")
    if not be.is_available:
        pytest.skip(f"wgpu backend unavailable: {be.unavailable_reason}")
    from vtl.backends import wgpu as wx

    kern = be.kernel("amp_unscale")
    arrays = [wx.asarray(np.full(n, 2.0, np.float32)) for n in (5000, 3, 1)]
    inv, found = wx.asarray(np.float32(0.5)), wx.asarray(np.float32(0.0))
    assert kern(arrays, inv, found)
    assert float(np.asarray(found)) == 0.0
    for a in arrays:
        np.testing.assert_array_equal(np.asarray(a), 1.0)
    arrays[0][4321] = np.inf
    assert kern(arrays, inv, found) and float(np.asarray(found)) == 1.0
    arrays[0][4321] = 0.0
    assert kern(arrays, inv, found) and float(np.asarray(found)) == 1.0  # never cleared


def _numpy_clip(grads, max_norm, kernel):
    """``clip_grad_norm_`` of parameters with copies of ``grads`` on numpy, through the
    backend's kernel or the portable path: the total and the clipped gradients."""
    ps = []
    for g in grads:
        p = vtl.asarray(np.zeros(g.shape, g.dtype), backend="numpy", requires_grad=True)
        p.grad = vtl.asarray(g.copy(), backend="numpy")
        ps.append(p)
    ctx = contextlib.nullcontext() if kernel else use_kernel("grad_norm", None)
    with ctx:
        total = clip_grad_norm_(ps, max_norm)
    return to_numpy(total), [to_numpy(p.grad) for p in ps]


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("case", ["mixed sizes", "one", "empty and odd count", "nan", "inf",
                                  "small norm"])
def test_numpy_kernel_equals_the_portable_path_bit_for_bit(dt, case):
    rng = np.random.default_rng(len(case))
    shapes = {"one": [(5, 3)], "empty and odd count": [(0,), (4,), (2, 2), (0, 3), (7,)]}
    grads = [rng.standard_normal(s).astype(dt)
             for s in shapes.get(case, [(4, 3), (3,), (17, 2), (1,), (9, 9)])]
    if case == "nan":
        grads[1][0] = np.nan
    elif case == "inf":
        grads[2][3, 1] = np.inf
    elif case == "small norm":
        grads = [g * 1e-3 for g in grads]
    kern = vtl.backends.get("numpy").kernel("grad_norm")
    assert kern.supports(dt, 2.0)
    want, wgrads = _numpy_clip(grads, 0.5, kernel=False)
    got, ggrads = _numpy_clip(grads, 0.5, kernel=True)
    assert got.dtype == want.dtype and got.shape == want.shape == ()
    np.testing.assert_array_equal(got, want)
    for a, b in zip(ggrads, wgrads, strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    nonempty = [g for g in grads if g.size]
    np.testing.assert_array_equal(kern.norm(nonempty, 2.0), want)


def test_numpy_kernel_declines_what_the_portable_path_serves():
    kern = vtl.backends.get("numpy").kernel("grad_norm")
    f32 = np.ones(3, np.float32)
    assert not kern.supports(np.float32, 1.0) and not kern.supports(np.float16, 2.0)
    assert kern.norm([f32, np.ones(2)], 2.0) is None  # mixed dtypes
    assert kern.norm([f32], 1.0) is None
    assert kern.norm([], 2.0) is None
    shared = np.full(4, 3.0, np.float32)  # the scaling rebinds: shared arrays keep values
    p = vtl.asarray(np.zeros(4, np.float32), backend="numpy", requires_grad=True)
    p.grad = vtl.asarray(shared, backend="numpy")
    clip_grad_norm_([p], 1.0)
    assert shared.tolist() == [3.0] * 4
    np.testing.assert_allclose(p.grad.numpy(), 3.0 / (6.0 + 1e-6), rtol=1e-6)
