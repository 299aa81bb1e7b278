"""The strided conv2d kernels (NumPy; CuPy's subclass with one-launch im2col/col2im) against the
portable gather path: forward values and every gradient, to tight tolerance, over
stride/padding/dilation/groups/bias variations; create_graph through the kernel's node;
the raw kernel against a loop reference; fallbacks and errors."""

from __future__ import annotations

import contextlib
import itertools
import re

import numpy as np
import pytest
from helpers import assert_close, check_grad, skip_unless_dtype, to_numpy
from test_nn_conv_pool import np_conv2d

import vtl
import vtl.nn.functional as F
from vtl.backends._common.conv import StridedConv2d
from vtl.backends.numpy.conv import NumpyConv2d

RNG = np.random.default_rng(7)

# (x shape, weight shape, stride, padding, dilation, groups, bias)
CASES = [
    ((2, 3, 8, 8), (4, 3, 3, 3), 1, 1, 1, 1, True),
    ((2, 3, 7, 9), (5, 3, 2, 3), (2, 1), (1, 2), 1, 1, False),
    ((1, 4, 9, 8), (6, 2, 3, 2), (1, 2), 0, (2, 1), 2, True),
    ((3, 6, 6, 7), (6, 1, 3, 3), 2, 1, 1, 6, True),
    ((2, 2, 5, 6), (3, 2, 4, 2), 1, "same", (1, 2), 1, True),  # asymmetric 'same'
    ((2, 3, 5, 5), (2, 3, 5, 5), 1, 0, 1, 1, True),  # output 1x1: many taps, few pixels
    ((2, 2, 10, 10), (3, 2, 2, 2), 3, 0, 1, 1, False),  # stride > kernel: skipped pixels
]


@contextlib.contextmanager
def portable(name="numpy"):
    be = vtl.backends.get(name)
    saved = be._kernels.pop("conv2d")
    try:
        yield
    finally:
        be._kernels["conv2d"] = saved


def _run(xs, ws, bs, args, dtype, v, backend="numpy"):
    x = vtl.asarray(xs.astype(dtype), backend=backend, requires_grad=True)
    w = vtl.asarray(ws.astype(dtype), backend=backend, requires_grad=True)
    b = None if bs is None else vtl.asarray(bs.astype(dtype), backend=backend,
                                            requires_grad=True)
    y = F.conv2d(x, w, b, *args)
    vtl.sum(y * vtl.asarray(v.astype(dtype), backend=backend)).backward()
    return [to_numpy(y), to_numpy(x.grad), to_numpy(w.grad)] + \
        ([] if b is None else [to_numpy(b.grad)])


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_kernel_equals_portable(backend, case, dtype):
    """On each backend with a conv2d kernel (NumPy, CuPy): values and gradients equal the
    same backend's portable gather path."""
    if vtl.backends.get(backend).kernel("conv2d") is None:
        pytest.skip(f"no conv2d kernel on {backend}")
    skip_unless_dtype(backend, dtype)
    xsh, wsh, s, p, d, g, has_b = case
    xs, ws = RNG.standard_normal(xsh), RNG.standard_normal(wsh)
    bs = RNG.standard_normal(wsh[0]) if has_b else None
    args = (s, p, d, g)
    y = F.conv2d(xs, ws, bs, *args)  # raw NumPy: the portable path
    v = RNG.standard_normal(y.shape)
    fast = _run(xs, ws, bs, args, dtype, v, backend)
    with portable(backend):
        ref = _run(xs, ws, bs, args, dtype, v, backend)
    tol = {"rtol": 1e-12, "atol": 1e-12} if dtype == np.float64 else \
        {"rtol": 2e-5, "atol": 2e-5}
    for a, r in zip(fast, ref, strict=True):
        assert a.shape == r.shape and a.dtype == r.dtype
        np.testing.assert_allclose(a, r, **tol)


@pytest.mark.parametrize("case", CASES[:4])
def test_kernel_raw_matches_loop_reference(case):
    """The raw kernel on NumPy arrays (what CuPy runs on its own arrays) against loops."""
    xsh, wsh, s, p, d, g, has_b = case
    kern = NumpyConv2d()
    s2 = (s, s) if isinstance(s, int) else s
    d2 = (d, d) if isinstance(d, int) else d
    p2 = (p, p) if isinstance(p, int) else p
    pad = (p2[0], p2[0], p2[1], p2[1])
    xs, ws = RNG.standard_normal(xsh), RNG.standard_normal(wsh)
    bs = RNG.standard_normal(wsh[0]) if has_b else None
    out, col = kern.forward(xs, ws, bs, s2, pad, d2, g)
    np.testing.assert_allclose(out, np_conv2d(xs, ws, bs, s2, pad, d2, g), rtol=1e-12,
                               atol=1e-12)
    gy = RNG.standard_normal(out.shape)
    dx, dw, db = kern.backward(col, xs.shape, ws, gy, s2, pad, d2, g, True, True, has_b)
    # adjoint identities: <conv(x), gy> is linear in x and in w
    dots = [np.sum(np_conv2d(e, ws, None, s2, pad, d2, g) * gy) for e in np.eye(xs.size)
            .reshape(-1, *xsh)[:5]]
    np.testing.assert_allclose(dx.reshape(-1)[:5], dots, rtol=1e-10, atol=1e-12)
    full = np.sum(np_conv2d(xs, ws, None, s2, pad, d2, g) * gy)
    np.testing.assert_allclose(np.sum(dw * ws), full, rtol=1e-10)
    if has_b:
        np.testing.assert_allclose(db, gy.sum(axis=(0, 2, 3)), rtol=1e-12)
    # only some gradients asked for; bias gradient without the patches
    dx2, dw2, db2 = kern.backward(None, xs.shape, ws, gy, s2, pad, d2, g, True, False, has_b)
    assert dw2 is None and np.allclose(dx2, dx)
    if has_b:
        np.testing.assert_allclose(db2, db, rtol=1e-12)


def test_kernel_second_order_and_finite_differences():
    """create_graph through the kernel's node: the vtl-function rule, checked by finite
    differences of first- and second-order quantities."""
    rng = np.random.default_rng(11)  # not the module's: its state depends on test order
    x, w, b = rng.standard_normal((2, 4, 5, 5)), rng.standard_normal((4, 2, 3, 2)), \
        rng.standard_normal(4)
    f = lambda x, w, b: F.conv2d(x, w, b, (2, 1), (1, 0), (1, 2), 2)  # noqa: E731
    check_grad(f, x, w, b)

    def gnorm(x, w, b):
        if not x.requires_grad:  # the finite-difference evaluations
            x = vtl.asarray(to_numpy(x), backend="numpy", requires_grad=True)
            w = vtl.asarray(to_numpy(w), backend="numpy", requires_grad=True)
        y = f(x, w, b)
        gx, gw = vtl.autograd.grad(vtl.sum(y * y * y), [x, w], create_graph=True)
        return vtl.sum(gx * gx) + vtl.sum(gw * gw)

    # gradients up to ~1e5: central differences are good to ~1e-8 of that, not to 1e-5
    check_grad(lambda x, w, b: gnorm(x, w, b), x, w, b, rtol=1e-4, atol=1e-3)
    xt, wt = (vtl.asarray(a, backend="numpy", requires_grad=True) for a in (x, w))
    res = vtl.autograd.grad(gnorm(xt, wt, vtl.asarray(b, backend="numpy")), [xt, wt])
    with portable():
        xt2, wt2 = (vtl.asarray(a, backend="numpy", requires_grad=True) for a in (x, w))
        ref = vtl.autograd.grad(gnorm(xt2, wt2, vtl.asarray(b, backend="numpy")), [xt2, wt2])
    for a, r in zip(res, ref, strict=True):
        assert_close(a, to_numpy(r), rtol=1e-10, atol=1e-10)


def test_kernel_reads_any_layout_and_conv1d():
    """Channels-last and strided inputs, a broadcast output gradient, unbatched input and
    conv1d go through the kernel with the portable results."""
    xs = RNG.standard_normal((2, 5, 6, 3)).transpose(0, 3, 1, 2)  # channels-last storage
    ws = RNG.standard_normal((4, 3, 3, 3))
    for xin in (xs, xs[:, :, ::2, :], xs[0]):
        x = vtl.asarray(np.array(xin), requires_grad=True, backend="numpy")
        y = F.conv2d(x, vtl.asarray(ws, backend="numpy"), None, 1, 1)
        if xin.ndim == 4:
            assert y._grad_fn._name == "Conv2dBackward"
        vtl.sum(y).backward()
        with portable():
            x2 = vtl.asarray(np.array(xin), requires_grad=True, backend="numpy")
            y2 = F.conv2d(x2, vtl.asarray(ws, backend="numpy"), None, 1, 1)
            vtl.sum(y2).backward()
        assert_close(y, to_numpy(y2), rtol=1e-12, atol=1e-12)
        assert_close(x.grad, to_numpy(x2.grad), rtol=1e-12, atol=1e-12)
    x1, w1 = RNG.standard_normal((2, 3, 9)), RNG.standard_normal((4, 3, 3))
    got = F.conv1d(vtl.asarray(x1, backend="numpy"), vtl.asarray(w1, backend="numpy"),
                   stride=2, padding=1)
    assert_close(got, np_conv2d(x1[:, :, None], w1[:, :, None], stride=(1, 2),
                                pad=(0, 0, 1, 1))[:, :, 0])
    check_grad(lambda x, w: F.conv1d(x, w, None, 2, 1, 2), x1, w1)


def test_kernel_fallbacks_and_errors():
    x32 = vtl.asarray(RNG.standard_normal((1, 2, 4, 4)).astype(np.float32), backend="numpy",
                      requires_grad=True)
    w64 = vtl.asarray(RNG.standard_normal((3, 2, 3, 3)), backend="numpy")
    y = F.conv2d(x32, w64)  # mixed dtypes: the portable path (promotes)
    assert y.dtype == vtl.float64 and y._grad_fn._name != "Conv2dBackward"
    w32 = vtl.astype(w64, vtl.float32)
    with vtl.no_grad():
        assert F.conv2d(x32, w32)._grad_fn is None
    xc = vtl.asarray(RNG.standard_normal((1, 2, 4, 4)) + 1j, backend="numpy")
    wc = vtl.asarray(RNG.standard_normal((3, 2, 3, 3)) + 0j, backend="numpy")
    assert_close(F.conv2d(xc, wc, padding=1),  # complex: the portable path
                 F.conv2d(to_numpy(xc), to_numpy(wc), padding=1), rtol=1e-12)
    with pytest.raises(ValueError, match="with groups=1 expects 1"):
        F.conv2d(x32, vtl.zeros((3, 1, 3, 3), dtype=vtl.float32))
    assert not NumpyConv2d().supports(np.dtype(np.complex128))
    assert not NumpyConv2d().supports(np.dtype(np.float16))


def kernel_geometry(s, p, d):
    """``(stride, (t, b, l, r) padding, dilation)`` of a case's ``s, p, d`` for the raw
    kernels, the padding made asymmetric (an extra bottom row)."""
    s2 = (s, s) if isinstance(s, int) else s
    d2 = (d, d) if isinstance(d, int) else d
    if p == "same":
        return s2, (1, 2, 1, 1), d2
    p2 = (p, p) if isinstance(p, int) else p
    return s2, (p2[0], p2[0] + 1, p2[1], p2[1]), d2


def test_cupy_conv_kernel_bodies_on_the_host(tmp_path, monkeypatch):
    """The CuPy im2col/col2im ElementwiseKernel bodies, compiled for the host, inside the
    CuPy kernel class running on NumPy arrays: equal to the strided NumPy kernel. Every
    launch also forms the constants of the geometry-compiled variant (``FOLD_MIN`` 0)."""
    from test_nn_lstm_fused import _call, _compile, _host_source

    from vtl.backends.cupy import _codegen as _cupy_kernels
    from vtl.backends.cupy import conv as cc

    monkeypatch.setattr(_cupy_kernels, "FOLD_MIN", 0)

    dtypes = {"float": np.float32, "double": np.float64}
    so = _compile(tmp_path, [_host_source(f"{s.__name__}_{c}{'_wide' * w}", s(dt, w), c)
                             for s in (cc.im2col_spec, cc.col2im_spec,
                                       cc.bias_transpose_spec)
                             for c, dt in dtypes.items() for w in (False, True)])

    class HostConv(cc.CupyConv2d):
        wide = False  # the 32-bit index arithmetic unless switched

        def _get(self, spec, dtype, wide=False, consts=None):
            names = ["O", "NB", "HW"] if spec is cc.bias_transpose_spec else cc._NARROWED
            assert [k for k, _ in consts] == names
            fn = getattr(so, f"{spec.__name__}_{_CT[np.dtype(dtype)]}{'_wide' * self.wide}")
            return lambda *args, size: _call(fn, *args, size)

    _CT = {np.dtype(v): k for k, v in dtypes.items()}
    host, ref = HostConv(np), StridedConv2d(np)
    for (xsh, wsh, s, p, d, g, has_b), wide in zip(CASES, itertools.cycle((False, True))):
        host.wide = wide
        s2, pad, d2 = kernel_geometry(s, p, d)
        for dt in dtypes.values():
            xs = RNG.standard_normal(xsh).astype(dt)
            ws = RNG.standard_normal(wsh).astype(dt)
            bs = RNG.standard_normal(wsh[0]).astype(dt) if has_b else None
            a = StridedConv2d.forward(host, xs, ws, bs, s2, pad, d2, g)
            r = ref.forward(xs, ws, bs, s2, pad, d2, g)
            np.testing.assert_array_equal(a[1], r[1])
            np.testing.assert_array_equal(a[0], r[0])
            gy = RNG.standard_normal(r[0].shape).astype(dt)
            ga = StridedConv2d.backward(host, a[1], xs.shape, ws, gy, s2, pad, d2, g, True,
                                        True, has_b)
            gr = ref.backward(r[1], xs.shape, ws, gy, s2, pad, d2, g, True, True, has_b)
            tol = 1e-12 if dt == np.float64 else 1e-5
            for u, v in zip(ga, gr, strict=True):
                if v is None:
                    assert u is None
                else:
                    np.testing.assert_allclose(u, v, rtol=tol, atol=tol)
            # the cupy kernel's own path: one product over all images without groups
            a2 = host.forward_on_device(xs, ws, bs, s2, pad, d2, g)
            np.testing.assert_allclose(a2[0], r[0], rtol=tol, atol=tol)
            assert a2[1].ndim == (2 if g == 1 else 4)
            for need in ((True, True, has_b), (True, False, False), (False, True, has_b)):
                ga2 = host.backward_on_device(a2[1], xs.shape, ws, gy, s2, pad, d2, g, *need)
                for u, v, wanted in zip(ga2, gr, need, strict=True):
                    if not wanted or v is None:
                        assert u is None
                    else:
                        np.testing.assert_allclose(u, v, rtol=tol, atol=tol)


@pytest.mark.parametrize("case", CASES)
def test_cupy_kernels_compiled_for_their_geometry(backend, case, monkeypatch):
    """The cupy kernels with their sizes compiled in as constants (as from ``FOLD_MIN``
    threads) give the portable path's values and gradients."""
    if backend != "cupy":
        pytest.skip("the cupy kernels")
    from vtl.backends.cupy import _codegen as _cupy_kernels

    monkeypatch.setattr(_cupy_kernels, "FOLD_MIN", 0)
    test_kernel_equals_portable(backend, case, np.float32)


def test_folded_kernel_bodies_declare_every_size_constant():
    """Every narrowed size of the im2col/col2im/bias kernels becomes a constant."""
    from vtl.backends.cupy import conv as cc
    from vtl.backends.cupy._codegen import fold_constants

    for spec, names in [(cc.im2col_spec, cc._NARROWED), (cc.col2im_spec, cc._NARROWED),
                        (cc.bias_transpose_spec, ["O", "NB", "HW"])]:
        geo = list(range(3, 3 + len(names)))
        for wide in (False, True):
            body = fold_constants(spec(np.float32, wide)[2], tuple(zip(names, geo, strict=True)))
            for name, value in zip(names, geo, strict=True):
                if f"{name}_" in body:
                    assert f" {name}_ = {value};" in body, (spec.__name__, name)
            assert not re.search(r"= \((int|ptrdiff_t)\)[A-Z]", body), spec.__name__


@pytest.mark.parametrize("case", CASES)
def test_cudnn_path_serves_and_equals_im2col(case):
    """With nvidia-cudnn-frontend installed, CuPy's conv2d runs ungrouped float32
    convolutions through cuDNN (deterministic engines, no TF32): forward and every gradient
    equal the im2col kernel's, and grouped ones still run the im2col kernel."""
    if "cupy" not in vtl.backends.available_names():
        pytest.skip("needs the cupy backend")
    from vtl.backends.cupy.conv import CupyConv2d
    from vtl.backends.cupy.cudnn import CudnnConv2d, load_cudnn

    be = vtl.backends.get("cupy")
    kern = be.kernel("conv2d")
    cudnn, why = load_cudnn()
    if cudnn is None:
        assert not isinstance(kern, CudnnConv2d)
        pytest.skip(f"cuDNN not available: {why}")
    assert isinstance(kern, CudnnConv2d)
    xsh, wsh, s, p, d, g, has_b = case
    xs, ws = RNG.standard_normal(xsh), RNG.standard_normal(wsh)
    bs = RNG.standard_normal(wsh[0]) if has_b else None
    args = (s, p, d, g)
    v = RNG.standard_normal(F.conv2d(xs, ws, bs, *args).shape)
    before = kern.served
    fast = _run(xs, ws, bs, args, np.float32, v, "cupy")
    served = kern.served - before
    assert served == (3 if g == 1 else 0), (served, kern.declined)
    saved = be._kernels["conv2d"]
    be._kernels["conv2d"] = CupyConv2d(saved.m, matmul=saved._mm)
    try:
        ref = _run(xs, ws, bs, args, np.float32, v, "cupy")
    finally:
        be._kernels["conv2d"] = saved
    for a, r in zip(fast, ref, strict=True):
        assert a.shape == r.shape and a.dtype == r.dtype
        np.testing.assert_allclose(a, r, rtol=2e-5, atol=2e-5)
    again = _run(xs, ws, bs, args, np.float32, v, "cupy")
    for a, r in zip(again, fast, strict=True):
        np.testing.assert_array_equal(a, r)  # deterministic engines


@pytest.mark.parametrize("timed", [True, False])
def test_cudnn_plans_chosen_by_timing_or_by_the_heuristics_equal_im2col(timed, monkeypatch):
    """``vtl.backends.cudnn.benchmark``: on, a convolution's first call times the plans of
    each of its graphs and keeps the fastest; off, the heuristics' first plan serves. Both
    equal the im2col kernel, and a later call repeats the first bit for bit."""
    if "cupy" not in vtl.backends.available_names():
        pytest.skip("needs the cupy backend")
    from vtl.backends.cupy.conv import CupyConv2d
    from vtl.backends.cupy.cudnn import CudnnConv2d, load_cudnn

    cudnn, why = load_cudnn()
    if cudnn is None:
        pytest.skip(f"cuDNN not available: {why}")
    monkeypatch.setattr(vtl.backends.cudnn, "benchmark", timed)
    be = vtl.backends.get("cupy")
    saved = be._kernels["conv2d"]
    xs, ws, bs = RNG.standard_normal((8, 16, 12, 12)), RNG.standard_normal((24, 16, 3, 3)), None
    args = (1, 1, 1, 1)  # stride, padding, dilation, groups
    v = RNG.standard_normal((8, 24, 12, 12))
    try:
        be._kernels["conv2d"] = fresh = CudnnConv2d(saved.m, cudnn, matmul=saved._mm)
        first = _run(xs, ws, bs, args, np.float32, v, "cupy")
        assert fresh.served == 3 and len(fresh._graphs) == 3, fresh.declined
        assert all(b.tuned for b in fresh._graphs.values())
        for b in fresh._graphs.values():  # the selected plan's own workspace
            assert b.ws == b.graph.get_workspace_size()
        assert fresh.tuned == (3 if timed else 0)
        again = _run(xs, ws, bs, args, np.float32, v, "cupy")
        assert fresh.tuned == (3 if timed else 0)
        be._kernels["conv2d"] = CupyConv2d(saved.m, matmul=saved._mm)
        ref = _run(xs, ws, bs, args, np.float32, v, "cupy")
    finally:
        be._kernels["conv2d"] = saved
    for a, b, r in zip(first, again, ref, strict=True):
        np.testing.assert_array_equal(a, b)
        # the engine timing picks may sum otherwise (Winograd, FFT): float32 rounding of
        # the result's scale (a Winograd weight gradient here: 7e-5 of values up to 60)
        np.testing.assert_allclose(a, r, rtol=2e-5, atol=1e-5 * np.abs(r).max())


@pytest.mark.parametrize("case", [c for c in CASES if c[5] == 1])
def test_cudnn_direct_launch_equals_frontend_execute(case):
    """The cuDNN graphs launch through the frontend's pointer-array entry point where it has
    one (skipping its per-call Python normalisation): forward and both gradients equal, bit
    for bit, what the frontend's public ``execute`` computes with the same plans."""
    if "cupy" not in vtl.backends.available_names():
        pytest.skip("needs the cupy backend")
    from vtl.backends.cupy.cudnn import CudnnConv2d

    kern = vtl.backends.get("cupy").kernel("conv2d")
    if not isinstance(kern, CudnnConv2d):
        pytest.skip("cuDNN not available")
    xsh, wsh, s, p, d, g, has_b = case
    xs, ws = RNG.standard_normal(xsh), RNG.standard_normal(wsh)
    bs = RNG.standard_normal(wsh[0]) if has_b else None
    args = (s, p, d, g)
    v = RNG.standard_normal(F.conv2d(xs, ws, bs, *args).shape)
    direct = _run(xs, ws, bs, args, np.float32, v, "cupy")
    graphs = dict(kern._graphs)
    assert graphs, kern.declined
    for built in graphs.values():
        if hasattr(built.graph._lowered_graph, "_execute_with_raw_ptrs"):
            assert built.direct is not None  # this frontend has the entry point: it is used
    launchers = {k: b.direct for k, b in graphs.items()}
    for b in graphs.values():
        b.direct = None
    try:
        public = _run(xs, ws, bs, args, np.float32, v, "cupy")
    finally:
        for k, b in graphs.items():
            b.direct = launchers[k]
    for a, r in zip(direct, public, strict=True):
        np.testing.assert_array_equal(a, r)


@pytest.mark.parametrize("case", [c for c in CASES if c[5] == 1])
@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_cudnn_16bit_matches_float32(case, name, monkeypatch):
    """float16/bfloat16 convolutions run through cuDNN (tensor cores, float32
    accumulation): forward and every gradient within a few 16-bit epsilons of the float32
    convolution of the same rounded values; a shape cuDNN declines runs the float32 path
    and rounds once."""
    if "cupy" not in vtl.backends.available_names():
        pytest.skip("needs the cupy backend")
    from vtl.backends.cupy.cudnn import CudnnConv2d

    kern = vtl.backends.get("cupy").kernel("conv2d")
    if not isinstance(kern, CudnnConv2d):
        pytest.skip("cuDNN not available")
    import ml_dtypes

    dt = np.dtype(np.float16) if name == "float16" else np.dtype(ml_dtypes.bfloat16)
    xsh, wsh, s, p, d, g, has_b = case
    rnd = (lambda a: a.astype(dt).astype(np.float32))
    xs, ws = rnd(RNG.standard_normal(xsh)), rnd(RNG.standard_normal(wsh))
    bs = rnd(RNG.standard_normal(wsh[0])) if has_b else None
    args = (s, p, d, g)
    v = rnd(RNG.standard_normal(F.conv2d(xs, ws, bs, *args).shape))
    ref = _run(xs, ws, bs, args, np.float32, v, "cupy")
    eps = float(np.finfo(dt).eps)
    before = kern.served
    low = _run(xs, ws, bs, args, dt, v, "cupy")
    assert kern.served - before == 3, kern.declined
    monkeypatch.setattr(CudnnConv2d, "_graph", lambda self, key: None)  # declined shapes
    wide = _run(xs, ws, bs, args, dt, v, "cupy")
    for got in (low, wide):
        for a, r in zip(got, ref, strict=True):
            assert a.dtype == dt and a.shape == r.shape
            scale = float(np.abs(r).max()) + 1.0
            np.testing.assert_allclose(a.astype(np.float32), r, rtol=4 * eps,
                                       atol=4 * eps * scale)


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_cupy_16bit_grouped_convolution_with_frozen_weights(name):
    """A 16-bit grouped convolution (which cuDNN's path leaves to the float32 im2col path)
    with a weight that needs no gradient: the input gradient still comes back."""
    if "cupy" not in vtl.backends.available_names():
        pytest.skip("needs the cupy backend")
    import ml_dtypes

    dt = np.dtype(np.float16) if name == "float16" else np.dtype(ml_dtypes.bfloat16)
    xs = RNG.standard_normal((2, 4, 6, 6)).astype(dt)
    ws = RNG.standard_normal((4, 1, 3, 3)).astype(dt)
    x = vtl.asarray(xs, backend="cupy", requires_grad=True)
    w = vtl.asarray(ws, backend="cupy")
    y = F.conv2d(x, w, None, 1, 1, 1, 4)
    vtl.sum(y.astype(vtl.float32)).backward()
    xr = vtl.asarray(xs.astype(np.float32), backend="cupy", requires_grad=True)
    vtl.sum(F.conv2d(xr, vtl.asarray(ws.astype(np.float32), backend="cupy"), None, 1, 1, 1,
                     4)).backward()
    assert x.grad.dtype == getattr(vtl, name)
    eps = float(np.finfo(dt).eps)
    np.testing.assert_allclose(x.grad.numpy().astype(np.float32), xr.grad.numpy(),
                               rtol=4 * eps, atol=4 * eps * 10)
