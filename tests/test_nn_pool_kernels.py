"""The pool2d kernels (NumPy's strided kernel; CuPy's ElementwiseKernels) against the portable
gather path: max_pool/avg_pool values, indices and gradients over kernel/stride/padding/
dilation/ceil_mode variations, ties, nan, -inf and signed zeros; one graph node; create_graph
through the portable rule; finite differences; the CuPy kernel bodies compiled for the host."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from helpers import assert_close, check_grad, skip_unless_dtype, to_numpy
from hypothesis import given
from hypothesis import strategies as st
from test_nn_conv_pool import np_avg_pool2d, np_max_pool2d

import vtl
import vtl.nn.functional as F
from vtl.backends._common.pool import StridedPool2d
from vtl.backends.numpy.pool import NumpyPool2d

RNG = np.random.default_rng(11)

# (x shape, kernel, stride, padding, dilation, ceil_mode)
MAX_CASES = [
    ((2, 3, 8, 8), 2, None, 0, 1, False),  # the CNN case: disjoint 2x2 windows
    ((2, 3, 7, 9), 2, None, 0, 1, True),  # ceil_mode: windows past the edge
    ((1, 4, 9, 8), 3, 2, 1, 1, False),  # overlapping, padded
    ((2, 2, 9, 10), (3, 2), (2, 1), (1, 1), (2, 3), True),  # dilation
    ((1, 2, 6, 7), (2, 3), 3, (1, 1), 1, True),  # stride past the kernel: skipped pixels
    ((2, 3, 5, 5), 1, 2, 0, 1, False),  # one tap
    ((1, 1, 20, 20), 16, 4, 8, 1, True),  # 256 taps: a wider tap number
]
# (x shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
AVG_CASES = [
    ((2, 3, 8, 8), 2, None, 0, False, True, None),
    ((2, 3, 7, 9), 3, 2, 1, True, True, None),
    ((2, 3, 7, 9), 3, 2, 1, True, False, None),
    ((1, 2, 6, 7), (2, 3), (3, 1), (1, 1), False, False, None),
    ((1, 2, 6, 7), (2, 3), (1, 2), (0, 1), True, True, 5),
]


@contextlib.contextmanager
def portable(name="numpy"):
    """The portable gather path: the backend's pool2d kernel removed."""
    be = vtl.backends.get(name)
    saved = be._kernels.pop("pool2d", None)
    try:
        yield
    finally:
        if saved is not None:
            be._kernels["pool2d"] = saved


def _need_kernel(backend):
    if vtl.backends.get(backend).kernel("pool2d") is None:
        pytest.skip(f"no pool2d kernel on {backend}")


def _max_run(xs, args, dtype, v, backend):
    x = vtl.asarray(xs.astype(dtype), backend=backend, requires_grad=True)
    y, idx = F.max_pool2d(x, *args, return_indices=True)
    y.backward(vtl.asarray(v.astype(dtype), backend=backend))
    return y, to_numpy(y), to_numpy(idx), to_numpy(x.grad)


def _ties(shape):
    """Small integers: many ties, including -0.0 against 0.0."""
    xs = RNG.integers(-2, 3, shape).astype(np.float64)
    xs[RNG.random(shape) < 0.2] = -0.0
    return xs


@pytest.mark.parametrize("case", MAX_CASES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("data", ["normal", "ties", "special"])
def test_max_pool_kernel_equals_portable(backend, case, dtype, data):
    """Values (bit for bit: the same element of each window), indices and gradients equal
    the same backend's portable gather path."""
    _need_kernel(backend)
    skip_unless_dtype(backend, dtype)
    shape, *args = case
    xs = RNG.standard_normal(shape) if data == "normal" else _ties(shape)
    if data == "special":
        flat = xs.reshape(-1)
        pick = RNG.permutation(flat.size)
        flat[pick[:3]] = np.nan
        flat[pick[3:8]] = -np.inf
        flat[pick[8:10]] = np.inf
        xs[0, 0] = -np.inf  # whole windows of -inf (and padding)
    with portable(backend):
        yr = F.max_pool2d(vtl.asarray(xs.astype(dtype), backend=backend), *args)
    v = RNG.standard_normal(yr.shape)
    y, *fast = _max_run(xs, args, dtype, v, backend)
    assert y._grad_fn._name == "MaxPool2dBackward"
    with portable(backend):
        _, *ref = _max_run(xs, args, dtype, v, backend)
    np.testing.assert_array_equal(fast[0], ref[0])
    np.testing.assert_array_equal(np.signbit(fast[0]), np.signbit(ref[0]))
    np.testing.assert_array_equal(fast[1], ref[1])
    assert fast[1].dtype == ref[1].dtype
    t = {"rtol": 1e-12, "atol": 1e-12} if dtype == np.float64 else {"rtol": 1e-5, "atol": 1e-6}
    assert fast[2].dtype == ref[2].dtype
    np.testing.assert_allclose(fast[2], ref[2], **t)


@pytest.mark.parametrize("path", ["kernel", "portable"])
def test_max_pool_never_picks_padding(backend, path):
    """As PyTorch: a window of -inf (and padding) picks its first input element, so the
    indices are the input's and every output's gradient reaches the input; a nan in a
    window still wins it."""
    x = np.full((1, 1, 4, 4), -np.inf, np.float32)
    x2 = x.copy()
    x2[0, 0, 0, 0] = np.nan
    want_idx = np.array([0, 1, 4, 5])
    ctx = portable(backend) if path == "portable" else contextlib.nullcontext()
    with ctx:
        for xs in (x, x2):
            t = vtl.asarray(xs, backend=backend, requires_grad=True)
            y, idx = F.max_pool2d(t, 3, 2, 1, return_indices=True)
            vtl.sum(F.max_pool2d(t, 3, 2, 1)).backward()
            np.testing.assert_array_equal(to_numpy(idx).reshape(-1), want_idx)
            assert float(np.nansum(to_numpy(t.grad))) == 4.0
            assert np.isnan(to_numpy(y).reshape(-1)[0]) == bool(np.isnan(xs).any())
        t = vtl.asarray(np.full((2, 3, 5, 5), -np.inf, np.float32), backend=backend)
        _, idx = F.max_pool2d(t, 2, 2, 1, ceil_mode=True, return_indices=True)
        assert to_numpy(idx).min() >= 0 and to_numpy(idx).max() < 25


@pytest.mark.parametrize("case", AVG_CASES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_avg_pool_kernel_equals_portable(backend, case, dtype):
    _need_kernel(backend)
    skip_unless_dtype(backend, dtype)
    shape, *args = case
    xs = RNG.standard_normal(shape)

    def run():
        x = vtl.asarray(xs.astype(dtype), backend=backend, requires_grad=True)
        y = F.avg_pool2d(x, *args)
        vtl.sum(y * y).backward()
        return y, to_numpy(y), to_numpy(x.grad)

    y, *fast = run()
    assert y._grad_fn._name == "AvgPool2dBackward"
    with portable(backend):
        _, *ref = run()
    t = {"rtol": 1e-12, "atol": 1e-12} if dtype == np.float64 else {"rtol": 2e-5, "atol": 1e-6}
    for a, r in zip(fast, ref, strict=True):
        assert a.shape == r.shape and a.dtype == r.dtype
        np.testing.assert_allclose(a, r, **t)
    k, s, p, ceil, cip, div = args
    k2 = (k, k) if isinstance(k, int) else k
    s2 = k2 if s is None else ((s, s) if isinstance(s, int) else s)
    p2 = (p, p) if isinstance(p, int) else p
    np.testing.assert_allclose(fast[0], np_avg_pool2d(xs, k2, s2, p2, ceil, cip, div),
                               **t)


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", [MAX_CASES[0], MAX_CASES[2], MAX_CASES[3]])
def test_pool_kernels_16bit(backend, case, name):
    """float16/bfloat16 pooling on a backend whose kernel takes it: max values and indices
    equal the float32 kernel's on the same rounded values, gradients and averages are the
    float32 results rounded once (sums in float32)."""
    import ml_dtypes

    _need_kernel(backend)
    dt = np.dtype(np.float16) if name == "float16" else np.dtype(ml_dtypes.bfloat16)
    skip_unless_dtype(backend, dt)
    if not vtl.backends.get(backend).kernel("pool2d").supports(dt):
        pytest.skip(f"the {backend} pool2d kernel does not take {name}")
    shape, k, s, p, d, ceil = case
    xs = _ties(shape) if name == "bfloat16" else RNG.standard_normal(shape)
    xs = xs.astype(dt).astype(np.float32)
    res = {}
    for wdt in (np.float32, dt):
        x = vtl.asarray(xs.astype(wdt), backend=backend, requires_grad=True)
        y, idx = F.max_pool2d(x, k, s, p, d, ceil, return_indices=True)
        assert y._grad_fn._name == "MaxPool2dBackward" and y.dtype == x.dtype
        gy = np.cos(np.arange(y.size)).reshape(y.shape).astype(dt).astype(wdt)
        y.backward(vtl.asarray(gy, backend=backend))
        x2 = vtl.asarray(xs.astype(wdt), backend=backend, requires_grad=True)
        a = F.avg_pool2d(x2, 3, 2, 1, ceil, False)
        assert a._grad_fn._name == "AvgPool2dBackward"
        vtl.sum(a * vtl.asarray(np.sin(np.arange(a.size)).reshape(a.shape).astype(dt)
                                .astype(wdt), backend=backend)).backward()
        res[np.dtype(wdt).name] = [to_numpy(t) for t in (y, idx, x.grad, a, x2.grad)]
    want, got = res["float32"], res[name]
    np.testing.assert_array_equal(got[0].astype(np.float32), want[0])
    np.testing.assert_array_equal(got[1], want[1])
    eps = float(np.finfo(dt).eps)
    for g, w in zip(got[2:], want[2:], strict=True):
        assert g.dtype == dt
        np.testing.assert_allclose(g.astype(np.float32), w.astype(dt).astype(np.float32),
                                   rtol=eps, atol=eps * 1e-3)


@given(st.data())
def test_pool_kernels_random_geometry(backend, data):
    """Random geometries and layouts: kernel results equal the loop references."""
    _need_kernel(backend)
    d = data.draw
    k = (d(st.integers(1, 3)), d(st.integers(1, 3)))
    s = (d(st.integers(1, 3)), d(st.integers(1, 3)))
    p = (d(st.integers(0, k[0] // 2)), d(st.integers(0, k[1] // 2)))
    dil = (d(st.integers(1, 2)), d(st.integers(1, 2)))
    ceil = d(st.booleans())
    h = d(st.integers((k[0] - 1) * dil[0] + 1, 7))
    w = d(st.integers((k[1] - 1) * dil[1] + 1, 7))
    xs = RNG.integers(-3, 4, (2, 3, h, w)).astype(np.float64)
    if d(st.booleans()):  # channels-last storage, as conv results on the portable path
        xs = np.ascontiguousarray(xs.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    x = vtl.asarray(xs, backend=backend)
    out, idx = F.max_pool2d(x, k, s, p, dil, ceil, return_indices=True)
    ref, ridx = np_max_pool2d(np.array(xs), k, s, p, dil, ceil)
    assert_close(out, ref)
    np.testing.assert_array_equal(to_numpy(idx), ridx)
    cip = d(st.booleans())
    assert_close(F.avg_pool2d(x, k, s, p, ceil, cip), np_avg_pool2d(np.array(xs), k, s, p, ceil,
                                                                     cip))


def test_raw_kernel_against_loops():
    """The raw NumPy kernel (what CuPy's class inherits the protocol of) against loops."""
    kern = NumpyPool2d()
    for shape, k, s, p, d, ceil in MAX_CASES[:5]:
        k2 = (k, k) if isinstance(k, int) else k
        s2 = k2 if s is None else ((s, s) if isinstance(s, int) else s)
        p2 = (p, p) if isinstance(p, int) else p
        d2 = (d, d) if isinstance(d, int) else d
        xs = _ties(shape)
        ref, ridx = np_max_pool2d(xs, k2, s2, p2, d2, ceil)
        y, arg = kern.max_forward(xs, k2, s2, p2, d2, ref.shape[2:])
        np.testing.assert_array_equal(y, ref)
        g = RNG.standard_normal(y.shape)
        dx = kern.max_backward(arg, xs.shape, g, k2, s2, p2, d2)
        want = np.zeros(xs.size)
        planes = np.arange(xs.shape[0] * xs.shape[1]).reshape(ridx.shape[:2] + (1, 1))
        np.add.at(want, (planes * xs.shape[2] * xs.shape[3] + ridx).reshape(-1), g.reshape(-1))
        np.testing.assert_allclose(dx, want.reshape(xs.shape), rtol=1e-12, atol=1e-12)


def test_kernel_blocks_cover_every_plane(monkeypatch):
    """Inputs larger than one block (split by images, and by channels within an image)."""
    from vtl.backends._common import pool as _numpy_pool

    kern = NumpyPool2d()
    xs = RNG.standard_normal((3, 5, 6, 6))
    ref, _ = np_max_pool2d(xs, (2, 2), (2, 2))
    for block in (36 * 5 * 2, 36 * 2, 7):  # two images, two channels, one plane per block
        monkeypatch.setattr(_numpy_pool, "BLOCK", block)
        y, arg = kern.max_forward(xs, (2, 2), (2, 2), (0, 0), (1, 1), (3, 3))
        np.testing.assert_array_equal(y, ref)
        dx = kern.max_backward(arg, xs.shape, np.ones_like(y), (2, 2), (2, 2), (0, 0), (1, 1))
        assert dx.sum() == y.size and np.all(dx[xs.reshape(3, 5, 3, 2, 3, 2).max(axis=(3, 5))
                                              .repeat(2, 2).repeat(2, 3) == xs] == 1)


def test_one_node_layouts_and_shapes():
    """1-D and unbatched inputs, channels-last and strided inputs and a broadcast output
    gradient go through the kernel as one node with the portable results."""
    xs = RNG.standard_normal((2, 5, 6, 3)).transpose(0, 3, 1, 2)  # channels-last storage
    for xin in (xs, xs[:, :, ::2, :], xs[0]):
        for fn in (lambda t: F.max_pool2d(t, 2, 1, 1), lambda t: F.avg_pool2d(t, 3, 2, 1)):
            x = vtl.asarray(np.array(xin), requires_grad=True, backend="numpy")
            y = fn(x)
            assert y._grad_fn.edges[0] is x  # one node straight on the input
            vtl.sum(y).backward()
            with portable():
                x2 = vtl.asarray(np.array(xin), requires_grad=True, backend="numpy")
                y2 = fn(x2)
                vtl.sum(y2).backward()
            assert_close(y, to_numpy(y2), rtol=1e-12, atol=1e-12)
            assert_close(x.grad, to_numpy(x2.grad), rtol=1e-12, atol=1e-12)
    x1 = RNG.standard_normal((2, 3, 9))
    for xin in (x1, x1[0]):
        x = vtl.asarray(xin, backend="numpy", requires_grad=True)
        y, idx = F.max_pool1d(x, 3, 2, 1, 2, True, return_indices=True)
        ref, ridx = np_max_pool2d(np.atleast_3d(xin.reshape(-1, 3, 9))[:, :, None, :], (1, 3),
                                  (1, 2), (0, 1), (1, 2), True)
        assert_close(y, ref[:, :, 0].reshape(y.shape))
        np.testing.assert_array_equal(to_numpy(idx), ridx[:, :, 0].reshape(y.shape))
        avg = F.avg_pool1d(x, 3, 2, 1, True, False)
        aref = np_avg_pool2d(xin.reshape(-1, 3, 1, 9), (1, 3), (1, 2), (0, 1), True, False)
        assert_close(avg, aref[:, :, 0].reshape(avg.shape))
    with vtl.no_grad():
        assert F.max_pool2d(vtl.asarray(xs, requires_grad=True), 2)._grad_fn is None


def test_finite_differences():
    x = RNG.permutation(np.linspace(-2, 2, 2 * 2 * 5 * 6)).reshape(2, 2, 5, 6)  # no ties
    check_grad(lambda x: F.max_pool2d(x, (3, 2), (2, 1), 1, (1, 2), True), x)
    check_grad(lambda x: F.max_pool2d(x, 2), x)
    check_grad(lambda x: F.max_pool1d(x, 2, 1, 1), x[:, :, 0])
    check_grad(lambda x: F.avg_pool2d(x, 3, 2, 1, True, False), x)
    check_grad(lambda x: F.avg_pool2d(x, (2, 3), (1, 2), (1, 0), True, True, 4), x[0])
    check_grad(lambda x: F.avg_pool1d(x, 3, 2, 1), x[:, :, 0])


@pytest.mark.parametrize("which", ["max", "avg"])
def test_create_graph_through_the_kernel_node(which):
    """Second order: the portable vtl-function rule, by finite differences and against the
    portable path."""
    if which == "max":
        f = lambda x: F.max_pool2d(x, 2, 1, 1, ceil_mode=True)  # noqa: E731
    else:
        f = lambda x: F.avg_pool2d(x, 3, 2, 1, True, False)  # noqa: E731

    def gnorm(x):
        if not x.requires_grad:  # the finite-difference evaluations
            x = vtl.asarray(to_numpy(x), backend="numpy", requires_grad=True)
        y = f(x)
        (gx,) = vtl.autograd.grad(vtl.sum(y * y * y), [x], create_graph=True)
        return gx * gx

    xs = RNG.permutation(np.linspace(-1, 1, 2 * 2 * 5 * 4)).reshape(2, 2, 5, 4)
    check_grad(gnorm, xs, rtol=1e-4, atol=1e-5)
    xt = vtl.asarray(xs, backend="numpy", requires_grad=True)
    (res,) = vtl.autograd.grad(vtl.sum(gnorm(xt)), [xt])
    with portable():
        xt2 = vtl.asarray(xs, backend="numpy", requires_grad=True)
        (ref,) = vtl.autograd.grad(vtl.sum(gnorm(xt2)), [xt2])
    assert_close(res, to_numpy(ref), rtol=1e-10, atol=1e-10)


def test_fallbacks_and_errors():
    be = vtl.backends.get("numpy")
    kern = be.kernel("pool2d")
    assert not kern.supports(np.dtype(np.float16)) and not kern.supports(np.dtype(np.int64))
    assert not kern.supports(np.dtype(np.complex128))
    with pytest.raises(TypeError, match="real floating-point"):
        F.max_pool2d(vtl.asarray(np.ones((1, 1, 4, 4), np.int64), backend="numpy"), 2)
    with pytest.raises(ValueError, match="at most half"):
        F.avg_pool2d(vtl.asarray(np.ones((1, 1, 4, 4)), backend="numpy"), 2, padding=2)
    assert StridedPool2d.arg_dtype(255) == np.uint8 and StridedPool2d.arg_dtype(256) == np.int32


_CT = {"float32": "float", "float64": "double", "int32": "int", "int64": "long long",
       "uint16": "unsigned short"}
#: CUDA's bit casts and qualifiers for the host build of the 16-bit conversions (PRELUDE)
_HOST_CUDA = r"""
#include <cstring>
static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline double __longlong_as_double(long long i) {
  double d; std::memcpy(&d, &i, 8); return d;
}
static inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
#define __device__
#define __forceinline__ inline
#include <cmath>
"""


def _host_source(name, spec):
    """A C++ function running an ElementwiseKernel body over ``size`` elements (raw
    parameters as pointers, scalars by value)."""
    ins, outs, body = spec
    params = []
    for p in ins + outs:
        parts = p.split()
        params.append(f"{_CT[parts[1]]}* {parts[2]}" if parts[0] == "raw"
                      else f"{_CT[parts[0]]} {parts[1]}")
    return (f'extern "C" void {name}({", ".join(params)}, long long size) {{\n'
            f"for (ptrdiff_t i = 0; i < size; ++i) {{\n{body}}}\n}}\n")


def _max_geometry(shape, k, s, p, d, ceil):
    """A case's ``(k, s, p, d)`` as pairs and its output size (``ceil_mode`` applied; with
    dilation 1 also the average pool's)."""
    k2 = (k, k) if isinstance(k, int) else k
    s2 = k2 if s is None else ((s, s) if isinstance(s, int) else s)
    p2 = (p, p) if isinstance(p, int) else p
    d2 = (d, d) if isinstance(d, int) else d
    return k2, s2, p2, d2, F.max_pool2d(np.zeros(shape), k2, s2, p2, d2, ceil).shape[2:]


def test_cupy_pool_kernel_bodies_on_the_host(tmp_path):
    """The CuPy ElementwiseKernel bodies (32- and 64-bit index arithmetic), compiled for the
    host, inside the CuPy kernel class running on NumPy arrays: equal to the strided NumPy
    kernel (bit for bit); the float16/bfloat16 bodies equal the float32 ones on the same
    values, rounded once."""
    import ctypes
    import shutil
    import subprocess

    import ml_dtypes

    from vtl.backends.cupy import nn as cp_nn
    from vtl.backends.cupy import pool as cp_pool

    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    specs = [cp_pool.max_forward_spec, cp_pool.max_backward_spec, cp_pool.avg_forward_spec,
             cp_pool.avg_backward_spec]
    dtypes = [np.dtype(np.float32), np.dtype(np.float64)]
    low = [np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)]
    src = tmp_path / "pool.cpp"
    src.write_text("#include <cstddef>\n" + _HOST_CUDA + cp_nn.PRELUDE + "".join(
        _host_source(f"{s.__name__}_{dt.name}_{int(w)}", s(dt, w)) for s in specs
        for dt in dtypes + low for w in (False, True)))
    lib = tmp_path / "pool.so"
    subprocess.run([cxx, "-O2", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True,
                   capture_output=True)
    so = ctypes.CDLL(str(lib))

    def launcher(spec, dtype, wide):
        ins, outs, _ = spec(dtype, wide)
        fn = getattr(so, f"{spec.__name__}_{np.dtype(dtype).name}_{int(wide)}")
        kinds = [p.split()[0] for p in ins + outs]
        fn.argtypes = [ctypes.c_void_p if k == "raw" else
                       ctypes.c_double if k == "float64" else ctypes.c_longlong
                       for k in kinds] + [ctypes.c_longlong]

        def call(*args, size):
            assert len(args) == len(kinds)
            for a, k in zip(args, kinds, strict=True):
                if k == "raw":
                    assert a.flags.c_contiguous
            fn(*[a.ctypes.data if isinstance(a, np.ndarray) else a for a in args], size)

        return call

    class HostPool(cp_pool.CupyPool2d):
        wide = False

        def _on(self, a):
            return contextlib.nullcontext()

        def _get(self, spec, dtype, wide, args, size):
            assert not wide  # small arrays: 32-bit index arithmetic
            return launcher(spec, dtype, self.wide)

    assert cp_pool._wide(5, 2 ** 31) and not cp_pool._wide(2 ** 31 - 1, 3)
    host, ref = HostPool(np), StridedPool2d(np)
    for dt, wide in [(dt, w) for dt in dtypes for w in (False, True)]:
        host.wide = wide
        for shape, k, s, p, d, ceil in MAX_CASES:
            k2, s2, p2, d2, out = _max_geometry(shape, k, s, p, d, ceil)
            for xs in (RNG.standard_normal(shape), _ties(shape)):
                xs = xs.astype(dt)
                xs.reshape(-1)[RNG.permutation(xs.size)[:3]] = np.nan
                xs[-1, -1] = -np.inf
                ya, aa = host.max_forward(xs, k2, s2, p2, d2, out)
                yr, ar = ref.max_forward(xs, k2, s2, p2, d2, out)
                np.testing.assert_array_equal(ya.view(f"u{dt.itemsize}"),
                                              yr.view(f"u{dt.itemsize}"))
                np.testing.assert_array_equal(aa, ar)
                g = RNG.standard_normal(ya.shape).astype(dt)
                np.testing.assert_array_equal(host.max_backward(aa, shape, g, k2, s2, p2, d2),
                                              ref.max_backward(ar, shape, g, k2, s2, p2, d2))
        for shape, k, s, p, ceil, cip, div in AVG_CASES:
            k2, s2, p2, _, out = _max_geometry(shape, k, s, p, 1, ceil)
            xs = RNG.standard_normal(shape).astype(dt)
            np.testing.assert_array_equal(host.avg_forward(xs, k2, s2, p2, out, cip, div),
                                          ref.avg_forward(xs, k2, s2, p2, out, cip, div))
            g = RNG.standard_normal((*shape[:2], *out)).astype(dt)
            np.testing.assert_array_equal(host.avg_backward(shape, g, k2, s2, p2, cip, div),
                                          ref.avg_backward(shape, g, k2, s2, p2, cip, div))
    host.wide = False
    f32 = np.dtype(np.float32)

    def same(got, want32):
        """``got`` (16-bit) is ``want32`` rounded once, bit for bit."""
        np.testing.assert_array_equal(got.view(np.uint16), want32.astype(got.dtype)
                                      .view(np.uint16))

    for dt in low:
        assert host.supports(dt)
        for shape, k, s, p, d, ceil in MAX_CASES[:4]:
            k2, s2, p2, d2, out = _max_geometry(shape, k, s, p, d, ceil)
            xs = _ties(shape).astype(dt)
            xs.reshape(-1)[:2] = np.nan
            ya, aa = host.max_forward(xs, k2, s2, p2, d2, out)
            yr, ar = host.max_forward(xs.astype(f32), k2, s2, p2, d2, out)
            assert ya.dtype == dt
            same(ya, yr)
            np.testing.assert_array_equal(aa, ar)
            g = RNG.standard_normal(ya.shape).astype(dt)
            same(host.max_backward(aa, shape, g, k2, s2, p2, d2),
                 host.max_backward(ar, shape, g.astype(f32), k2, s2, p2, d2))
        for shape, k, s, p, ceil, cip, div in AVG_CASES:
            k2, s2, p2, _, out = _max_geometry(shape, k, s, p, 1, ceil)
            xs = RNG.standard_normal(shape).astype(dt)
            same(host.avg_forward(xs, k2, s2, p2, out, cip, div),
                 host.avg_forward(xs.astype(f32), k2, s2, p2, out, cip, div))
            g = RNG.standard_normal((*shape[:2], *out)).astype(dt)
            same(host.avg_backward(shape, g, k2, s2, p2, cip, div),
                 host.avg_backward(shape, g.astype(f32), k2, s2, p2, cip, div))


@pytest.mark.parametrize("which", ["max", "avg"])
def test_cupy_kernels_compiled_for_their_geometry(backend, which, monkeypatch):
    """The cupy pool kernels with their sizes compiled in as constants (as from
    ``FOLD_MIN`` threads) give the portable path's values, indices and gradients."""
    if backend != "cupy":
        pytest.skip("the cupy kernels")
    from vtl.backends.cupy import _codegen as _cupy_kernels

    monkeypatch.setattr(_cupy_kernels, "FOLD_MIN", 0)
    if which == "max":
        for case in MAX_CASES:
            test_max_pool_kernel_equals_portable(backend, case, np.float32, "ties")
    else:
        for case in AVG_CASES:
            test_avg_pool_kernel_equals_portable(backend, case, np.float32)
