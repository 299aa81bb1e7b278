"""The NumPy backend's tiled conv2d kernel against the whole-batch im2col kernel it replaced
(``StridedConv2d``, the reference) and a loop reference, over random shapes with stride,
padding, dilation, groups and bias, in float64 and float32, over several tiles and thread
counts (results independent of the thread count); and training-mode ``batch_norm`` as one
graph node against the composed ops it replaced (forward, running statistics, first and
second-order gradients) on every backend."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_close, check_grad, to_numpy
from test_nn_conv_pool import np_conv2d

import vtl
import vtl.nn.functional as F
from vtl import nn
from vtl.backends._common import threads as nc
from vtl.backends._common.conv import StridedConv2d, out_size
from vtl.backends.numpy import conv as npconv
from vtl.nn.functional import normalization as fnorm

RNG = np.random.default_rng(29)


def _random_case(rng):
    """``(x, w, b, stride, (t, b, l, r) padding, dilation, groups)`` of a random valid conv."""
    while True:
        g = int(rng.choice([1, 1, 2, 3]))
        cg, og = (int(v) for v in rng.integers(1, 4, 2))
        kh, kw = (int(v) for v in rng.integers(1, 4, 2))
        s = tuple(int(v) for v in rng.integers(1, 3, 2))
        d = tuple(int(v) for v in rng.integers(1, 3, 2))
        pad = tuple(int(v) for v in rng.integers(0, 3, 4))
        n = int(rng.integers(1, 6))
        h, w = (int(v) for v in rng.integers(3, 10, 2))
        if out_size(h, kh, s[0], pad[0], pad[1], d[0]) < 1 or \
                out_size(w, kw, s[1], pad[2], pad[3], d[1]) < 1:
            continue
        x = rng.standard_normal((n, g * cg, h, w))
        wt = rng.standard_normal((g * og, cg, kh, kw))
        b = rng.standard_normal(g * og) if rng.random() < 0.5 else None
        return x, wt, b, s, pad, d, g


def _grads(kern, x, w, b, geom, gy):
    out, ctx = kern.forward(x, w, b, *geom)
    return out, kern.backward(ctx, x.shape, w, gy, *geom, True, True, b is not None)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("tile", [1, 40, 1 << 17])
def test_tiled_conv_equals_whole_batch_kernel(monkeypatch, dtype, tile):
    """Random geometries, tiles of one image up to the whole batch: output and the three
    gradients equal the whole-batch im2col kernel and the loop reference."""
    monkeypatch.setattr(npconv, "TILE", tile)
    rng = np.random.default_rng(tile)
    kern, ref = npconv.NumpyConv2d(), StridedConv2d(np)
    assert kern.tiled
    rtol, atol = (1e-12, 1e-12) if dtype == np.float64 else (2e-5, 2e-5)
    for _ in range(12):
        x, w, b, s, pad, d, g = _random_case(rng)
        x, w = x.astype(dtype), w.astype(dtype)
        b = None if b is None else b.astype(dtype)
        geom = (s, pad, d, g)
        gy = rng.standard_normal(kern.forward(x, w, b, *geom)[0].shape).astype(dtype)
        out, got = _grads(kern, x, w, b, geom, gy)
        out_r, want = _grads(ref, x, w, b, geom, gy)
        assert out.dtype == dtype and out.shape == out_r.shape and out.flags.c_contiguous
        np.testing.assert_allclose(out, out_r, rtol=rtol, atol=atol)
        np.testing.assert_allclose(out, np_conv2d(x, w, b, s, pad, d, g).astype(dtype),
                                   rtol=rtol, atol=atol)
        for name, a, r in zip(("dx", "dw", "db"), got, want, strict=True):
            if r is None:
                assert a is None, name
                continue
            assert a.dtype == dtype and a.shape == r.shape, name
            np.testing.assert_allclose(a, r, rtol=rtol, atol=10 * atol, err_msg=name)


def test_tiled_conv_partial_gradients_and_layouts(monkeypatch):
    """Each gradient alone, no saved input (only the input's gradient wanted), a
    channels-last input and a broadcast output gradient."""
    monkeypatch.setattr(npconv, "TILE", 100)
    kern, ref = npconv.NumpyConv2d(), StridedConv2d(np)
    x = np.ascontiguousarray(RNG.standard_normal((5, 7, 6, 4))).transpose(0, 3, 1, 2)
    w, b = RNG.standard_normal((6, 2, 3, 2)), RNG.standard_normal(6)
    geom = ((2, 1), (1, 0, 2, 1), (1, 2), 2)
    out, ctx = kern.forward(x, w, b, *geom)
    gy = np.broadcast_to(0.5, out.shape)
    full = ref.backward(ref.forward(x, w, b, *geom)[1], x.shape, w, gy, *geom, True, True,
                        True)
    for i, need in enumerate(((True, False, False), (False, True, False),
                              (False, False, True))):
        res = kern.backward(ctx, x.shape, w, gy, *geom, *need)
        for j, v in enumerate(res):
            if j == i:
                np.testing.assert_allclose(v, full[j], rtol=1e-12, atol=1e-12)
            else:
                assert v is None
    dx, dw, db = kern.backward(None, x.shape, w, gy, *geom, True, False, False)
    np.testing.assert_allclose(dx, full[0], rtol=1e-12, atol=1e-12)
    assert dw is None and db is None


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_tiled_conv_independent_of_thread_count(monkeypatch, dtype):
    """1, 2 and 3 pool threads over many tiles: the same bits (the weight gradient is
    summed tile by tile in tile order on any number of threads)."""
    monkeypatch.delenv("VTL_NUM_THREADS", raising=False)
    monkeypatch.setattr(npconv, "TILE", 200)
    monkeypatch.setattr(npconv, "THRESHOLD", 0)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((11, 4, 9, 8)).astype(dtype)
    w, b = rng.standard_normal((6, 4, 3, 3)).astype(dtype), rng.standard_normal(6).astype(dtype)
    geom = ((1, 1), (1, 1, 1, 1), (1, 1), 1)
    results = []
    for n in (1, 2, 3):
        monkeypatch.setattr(nc, "usable_cpus", lambda n=n: n)
        kern = npconv.NumpyConv2d()
        assert len(npconv._tiles(11, 4 * 9 * 72)) > 3
        out, ctx = kern.forward(x, w, b, *geom)
        gy = np.cos(np.arange(out.size, dtype=dtype)).reshape(out.shape)
        results.append((out, *kern.backward(ctx, x.shape, w, gy, *geom, True, True, True)))
    for other in results[1:]:
        for a, r in zip(other, results[0], strict=True):
            np.testing.assert_array_equal(a, r)
    ref = StridedConv2d(np)
    out_r, ctx_r = ref.forward(x, w, b, *geom)
    want = ref.backward(ctx_r, x.shape, w, gy, *geom, True, True, True)
    tol = 1e-12 if dtype == np.float64 else 1e-4
    for a, r in zip(results[0], (out_r, *want), strict=True):
        np.testing.assert_allclose(a, r, rtol=tol, atol=tol)


def test_tiled_conv_through_the_api(monkeypatch):
    """A conv layer trained through vtl on the tiled kernel gives the whole-batch kernel's
    values and gradients."""
    monkeypatch.setattr(npconv, "TILE", 300)
    res = []
    for tiled in (True, False):
        monkeypatch.setattr(npconv.NumpyConv2d, "tiled", tiled)
        vtl.random.seed(0)
        conv = nn.Conv2d(3, 5, 3, stride=1, padding=1).double().to("numpy")
        x = vtl.asarray(np.linspace(-1, 1, 4 * 3 * 7 * 7).reshape(4, 3, 7, 7),
                        requires_grad=True)
        y = conv(x)
        assert y._grad_fn._name == "Conv2dBackward"
        vtl.sum(y * y).backward()
        res.append([to_numpy(t) for t in (y, x.grad, conv.weight.grad, conv.bias.grad)])
    for a, r in zip(*res, strict=True):
        np.testing.assert_allclose(a, r, rtol=1e-12, atol=1e-12)


# -- batch_norm as one graph node ---------------------------------------------------------


def _composed(monkeypatch):
    """Make training-mode batch_norm take the composed ops (the reference)."""
    monkeypatch.setattr(fnorm, "_batch_norm_tensor", lambda *a: None)


def _bn_run(shape, dtype, affine, seed):
    rng = np.random.default_rng(seed)
    xs = (rng.standard_normal(shape) * 3 + 1).astype(dtype)
    c = shape[1]
    ws = rng.standard_normal(c).astype(dtype) if affine else None
    bs = rng.standard_normal(c).astype(dtype) if affine else None
    x = vtl.asarray(xs, requires_grad=True)
    w = None if ws is None else vtl.asarray(ws, requires_grad=True)
    b = None if bs is None else vtl.asarray(bs, requires_grad=True)
    rm, rv = vtl.zeros(c, dtype=x.dtype), vtl.ones(c, dtype=x.dtype)
    y = F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.3)
    gy = vtl.asarray(np.cos(np.arange(xs.size)).reshape(shape).astype(dtype))
    vtl.sum(y * gy).backward()
    out = [y, rm, rv, x.grad]
    if affine:
        out += [w.grad, b.grad]
    return y, [to_numpy(t) for t in out]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", [(6, 3), (4, 5, 7), (3, 4, 5, 6)])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_node_equals_composed_ops(backend, monkeypatch, dtype, shape, affine):
    """Output, running statistics and gradients of x, weight and bias equal the composed
    ops' (float64 and float32; 2-D, 3-D and 4-D inputs; with and without affine)."""
    if dtype == np.float64 and "float64" not in vtl.__array_namespace_info__().dtypes(
            device=vtl.Device(backend, 0)):
        pytest.skip(f"{backend} has no float64")
    y, got = _bn_run(shape, dtype, affine, 1)
    assert y._grad_fn._name == "NativeBatchNormBackward"
    _composed(monkeypatch)
    y2, want = _bn_run(shape, dtype, affine, 1)
    assert y2._grad_fn._name != "NativeBatchNormBackward"
    rtol, atol = (1e-10, 1e-12) if dtype == np.float64 else (1e-4, 1e-5)
    for a, r in zip(got, want, strict=True):
        assert_close(a, r, rtol=rtol, atol=atol)


def test_batch_norm_node_gradients_finite_differences_and_second_order(monkeypatch):
    """float64 finite differences of the node, and gradients of gradients (create_graph)
    equal the composed ops'."""
    x, w, b = (RNG.standard_normal(s) for s in ((4, 3, 2, 2), (3,), (3,)))
    check_grad(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), x, w, b)

    def gradgrad():
        xt = vtl.asarray(x, requires_grad=True)
        wt = vtl.asarray(w, requires_grad=True)
        y = F.batch_norm(xt, None, None, wt, vtl.asarray(b), training=True)
        gx, gw = vtl.autograd.grad(vtl.sum(y * y * vtl.asarray(np.arange(48.0).reshape(
            4, 3, 2, 2))), [xt, wt], create_graph=True)
        vtl.sum(gx * gx).backward()
        return [to_numpy(t) for t in (gx, gw, xt.grad, wt.grad)]

    got = gradgrad()
    _composed(monkeypatch)
    for a, r in zip(got, gradgrad(), strict=True):
        np.testing.assert_allclose(a, r, rtol=1e-9, atol=1e-11)


def test_batch_norm_node_falls_back_on_mixed_dtypes_and_no_grad():
    """Mixed dtypes take the composed ops (promoting); without grad no node is recorded."""
    x = vtl.asarray(RNG.standard_normal((4, 3, 2)).astype(np.float32))
    w = vtl.asarray(np.ones(3), requires_grad=True)
    y = F.batch_norm(x, None, None, w, None, training=True)
    assert y.dtype == vtl.float64 and y._grad_fn._name != "NativeBatchNormBackward"
    with vtl.no_grad():
        assert F.batch_norm(x, None, None, training=True)._grad_fn is None


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", [(6, 3), (5, 4, 7), (3, 4, 5, 6)])
def test_numpy_batch_norm_kernel_equals_portable_node(monkeypatch, dtype, shape):
    """The NumPy backend's ``batch_norm`` kernel against the portable one-node rule on raw
    arrays (the kernel removed), float64 and float32, with and without affine."""
    be = vtl.backends.get("numpy")
    assert be.kernel("batch_norm") is not None
    for affine in (True, False):
        with vtl.use_backend("numpy"):
            y, got = _bn_run(shape, dtype, affine, 3)
            monkeypatch.delitem(be._kernels, "batch_norm")
            _, want = _bn_run(shape, dtype, affine, 3)
            monkeypatch.undo()
        rtol, atol = (1e-11, 1e-12) if dtype == np.float64 else (1e-4, 1e-5)
        for a, r in zip(got, want, strict=True):
            assert_close(a, r, rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_numpy_batch_norm_kernel_independent_of_thread_count(monkeypatch, dtype):
    """1, 2 and 3 pool threads: the same bits (per-image sums, then over images in order);
    a channels-last input and a broadcast output gradient."""
    from vtl.backends.numpy import nn as npnorm

    monkeypatch.delenv("VTL_NUM_THREADS", raising=False)
    monkeypatch.setattr(npnorm, "THRESHOLD", 0)
    kern = npnorm.NumpyBatchNorm()
    rng = np.random.default_rng(5)
    x = np.ascontiguousarray(rng.standard_normal((7, 5, 6, 4)).astype(dtype)
                             ).transpose(0, 3, 1, 2)
    w, b = rng.standard_normal(4).astype(dtype), rng.standard_normal(4).astype(dtype)
    g = np.broadcast_to(np.arange(6, dtype=dtype) / 4, x.shape)
    res = []
    for n in (1, 2, 3):
        monkeypatch.setattr(nc, "usable_cpus", lambda n=n: n)
        y, mean, var, saved = kern.forward(x, w, b, 1e-5)
        res.append((y, mean, var, *kern.backward(saved, w, g, True, True, True)))
    for other in res[1:]:
        for a, r in zip(other, res[0], strict=True):
            np.testing.assert_array_equal(a, r)
    y, mean, var = res[0][:3]
    xd = x.astype(np.float64)
    np.testing.assert_allclose(mean, xd.mean(axis=(0, 2, 3)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(var, xd.var(axis=(0, 2, 3)), rtol=1e-5)
    assert y.shape == x.shape and y.dtype == dtype
    assert not kern.supports(np.dtype(np.float16))
    assert kern.forward(x.astype(np.float16), None, None, 1e-5) is None


def _blas_thread_calls():
    """NumPy's OpenBLAS ``(openblas_get_num_threads, openblas_set_num_threads)``, or
    ``(None, None)``."""
    import ctypes
    import glob
    import os

    root = os.path.dirname(os.path.dirname(np.__file__))
    for path in sorted(glob.glob(os.path.join(root, "numpy.libs", "*openblas*"))):
        lib = ctypes.CDLL(path)
        for prefix, suffix in (("scipy_openblas_", "64_"), ("openblas_", "64_"),
                               ("openblas_", "")):
            get = getattr(lib, f"{prefix}get_num_threads{suffix}", None)
            put = getattr(lib, f"{prefix}set_num_threads{suffix}", None)
            if get is not None and put is not None:
                return get, put
    return None, None


def test_tiled_conv_gives_the_calling_thread_its_blas_threads_back(monkeypatch):
    """After pooled convolutions (each pool range asks for one BLAS thread while it
    works), the calling thread's BLAS runs on the process's thread count again: products
    after a convolution are not left on one thread."""
    local = npconv._blas_threads_local()
    count, set_count = _blas_thread_calls()
    if local is None or count is None:
        pytest.skip("NumPy's BLAS has no openblas_set_num_threads_local")
    monkeypatch.delenv("VTL_NUM_THREADS", raising=False)
    monkeypatch.setattr(nc, "usable_cpus", lambda: 2)
    before = count()
    kern = npconv.NumpyConv2d()
    x = RNG.standard_normal((16, 32, 32, 32)).astype(np.float32)
    w = RNG.standard_normal((64, 32, 3, 3)).astype(np.float32)

    def convolutions():
        for stride in ((2, 2), (1, 1), (2, 2)):
            out, ctx = kern.forward(x, w, None, stride, (1, 1, 1, 1), (1, 1), 1)
            yield
            kern.backward(ctx, x.shape, w, np.ones_like(out), stride, (1, 1, 1, 1), (1, 1),
                          1, True, True, False)
            yield

    for _ in convolutions():
        assert count() == before
    # a limit the program set at run time (as threadpoolctl does) is kept as well
    set_count(1)
    try:
        for _ in convolutions():
            assert count() == 1
    finally:
        set_count(before)



@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_numpy_running_statistics_update_equals_portable(monkeypatch, dtype):
    """The numpy kernel's in-place running-statistics update gives the portable update's
    bits; it declines mixed dtypes (the portable update takes them)."""
    kern = vtl.backends.get("numpy").kernel("batch_norm")
    rng = np.random.default_rng(4)
    x = rng.standard_normal((5, 3, 4, 2)).astype(dtype) * 3 + 1
    results = []
    for fused in (True, False):
        if not fused:
            monkeypatch.setattr(type(kern), "update_running", lambda *a: False)
        bn = nn.BatchNorm2d(3, momentum=0.3, dtype=dtype)
        for _ in range(3):
            bn(vtl.asarray(x, backend="numpy"))
        results.append((to_numpy(bn.running_mean), to_numpy(bn.running_var)))
    for a, b in zip(*results, strict=True):
        assert a.dtype == dtype
        np.testing.assert_array_equal(a, b)
    m32 = np.ones(3, np.float32)
    assert not kern.update_running(m32, m32, np.ones(3), np.ones(3), 0.1, 4)


def test_fewer_tiles_than_threads_run_side_by_side(monkeypatch):
    """Three tiles on a pool of sixteen threads: each tile on a thread of its own at the
    same time (a machine with many cores must not run a layer's few tiles one by one on
    the calling thread), and the calling thread's BLAS setting given back."""
    import threading

    monkeypatch.delenv("VTL_NUM_THREADS", raising=False)
    monkeypatch.setattr(nc, "usable_cpus", lambda: 16)
    meet = threading.Barrier(3, timeout=20)
    seen = []

    def tile(i, j):
        assert j == i + 1
        seen.append((i, threading.get_ident()))
        meet.wait()  # broken (an error) unless three tiles run at once

    npconv._pool_run(tile, 3, 16)
    assert sorted(i for i, _ in seen) == [0, 1, 2]
    assert len({t for _, t in seen}) == 3
    ran = []
    npconv._pool_run(lambda i, j: ran.append((i, j, threading.get_ident())), 1, 16)
    assert ran == [(0, 1, threading.get_ident())]  # one tile: on the calling thread


@pytest.mark.parametrize(("c", "o"), [(2, 6), (6, 2), (4, 4)])
def test_input_gradient_by_flipped_convolution_only_with_fewer_output_channels(monkeypatch, c,
                                                                              o):
    """A stride-1 convolution's input gradient is a convolution of the output gradient with
    the flipped weight only where the output has at most as many channels as the input
    (its patches would otherwise outgrow col2im's); either way it equals col2im's."""
    x = RNG.standard_normal((3, c, 7, 6))
    w = RNG.standard_normal((o, c, 3, 3))
    g = RNG.standard_normal((3, o, 7, 6))
    geom = ((1, 1), (1, 1, 1, 1), (1, 1), 1, 3, 3, 7, 6)
    assert (npconv._flipped(w, geom, x.shape) is None) == (o > c)
    kern = npconv.NumpyConv2d()

    def dx():
        return kern.backward(x, x.shape, w, g, (1, 1), (1, 1, 1, 1), (1, 1), 1, True, False,
                             False)[0]

    chosen = dx()
    monkeypatch.setattr(npconv, "FLIP", False)
    by_col2im = dx()
    assert_close(chosen, by_col2im, rtol=1e-12, atol=1e-12)
    assert_close(chosen, StridedConv2d(np).backward(x, x.shape, w, g, (1, 1), (1, 1, 1, 1),
                                                    (1, 1), 1, True, False, False)[0],
                 rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bias_gradient_sums_do_not_depend_on_the_thread_count(dtype, monkeypatch):
    """A convolution's bias gradient, per-image channel sums split over the pool by images:
    the same bits on one, two and five threads, and NumPy's sum within rounding."""
    monkeypatch.setattr(npconv, "THRESHOLD", 8)
    g = RNG.standard_normal((7, 5, 6, 9)).astype(dtype)
    got = []
    for t in (1, 2, 5):
        monkeypatch.setattr(npconv, "num_threads", lambda t=t: t)
        got.append(npconv.channel_sums(g))
    for other in got[1:]:
        np.testing.assert_array_equal(other, got[0])
    assert got[0].dtype == dtype and got[0].shape == (5,)
    np.testing.assert_allclose(got[0], g.astype(np.float64).sum(axis=(0, 2, 3)),
                               rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-5)
    strided = g[:, :, ::2]  # not contiguous: NumPy's own sum
    np.testing.assert_array_equal(npconv.channel_sums(strided), strided.sum(axis=(0, 2, 3)))
