"""The NumPy conv2d/pool2d kernels on several threads: the pool-split paths (per-image
products and the wide one-product layout) against the single-threaded path with uneven
image chunks and several cache blocks per chunk, over stride/padding/dilation/groups/bias
variations and partial gradients; one usable CPU; ``VTL_NUM_THREADS``; the thread pool's
ranges, errors, nesting and fork handling."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from helpers import assert_close, to_numpy
from test_nn_conv_kernels import CASES, kernel_geometry
from test_nn_conv_pool import np_avg_pool2d, np_conv2d, np_max_pool2d

import vtl
import vtl.nn.functional as F
from vtl.backends._common import conv as common_conv
from vtl.backends._common import pool as common_pool
from vtl.backends._common import threads as nc
from vtl.backends.numpy import conv as npconv
from vtl.backends.numpy import pool as npool
from vtl.backends.numpy.conv import NumpyConv2d
from vtl.backends.numpy.pool import NumpyPool2d

RNG = np.random.default_rng(23)


def _geometry(case):
    """``(x shape, w shape, stride, (t, b, l, r) padding, dilation, groups, bias)`` of a
    case of test_nn_conv_kernels, with an odd batch (uneven chunks) and an asymmetric pad."""
    xsh, wsh, s, p, d, g, has_b = case
    s2, pad, d2 = kernel_geometry(s, p, d)
    return (7, *xsh[1:]), wsh, s2, pad, d2, g, has_b


@pytest.fixture
def threads(monkeypatch):
    """``set(n, one_product)``: ``n`` pool threads on any machine, every input above the
    threshold, blocks of one or two images, and the wide layout from ``one_product``
    (the whole-batch im2col paths; the tiled kernel: tests/test_numpy_kernels_conv_bn.py)."""

    def set_(n, one_product=None, block=None):
        monkeypatch.delenv("VTL_NUM_THREADS", raising=False)
        monkeypatch.setattr(NumpyConv2d, "tiled", False)
        monkeypatch.setattr(nc, "usable_cpus", lambda: n)
        monkeypatch.setattr(npconv, "THRESHOLD", 0)
        monkeypatch.setattr(npool, "THRESHOLD", 0)
        monkeypatch.setattr(common_conv, "ONE_PRODUCT_THREADS", one_product or n + 1)
        if block is not None:
            monkeypatch.setattr(common_conv, "BLOCK", block)

    return set_


def _conv_all(xs, ws, bs, s, pad, d, g, gy):
    kern = NumpyConv2d()
    out, col = kern.forward(xs, ws, bs, s, pad, d, g)
    res = {"out": out}
    for need in ((True, True, True), (True, False, False), (False, True, False),
                 (False, False, True)):
        r = kern.backward(col, xs.shape, ws, gy, s, pad, d, g, *need[:2], need[2] and bs
                          is not None)
        for name, v, wanted in zip(("dx", "dw", "db"), r, need, strict=True):
            if not wanted or name == "db" and bs is None:
                assert v is None
            else:
                res[f"{name}{need}"] = v
    # without the patches (no weight gradient wanted): the input gradient alone
    res["dx_nocol"] = kern.backward(None, xs.shape, ws, gy, s, pad, d, g, True, False,
                                    False)[0]
    return res, col


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("mode", ["per-image", "wide"])
def test_conv_threads_equal_single_thread(threads, monkeypatch, case, mode):
    """Three threads over seven images (chunks of 2, 2, 3), one- or two-image blocks: every
    output and gradient equals the single-threaded kernel (float64, to rounding of the
    weight gradient's sum over images) and the loop reference's forward values."""
    xsh, wsh, s, pad, d, g, has_b = _geometry(case)
    xs, ws = RNG.standard_normal(xsh), RNG.standard_normal(wsh)
    bs = RNG.standard_normal(wsh[0]) if has_b else None
    monkeypatch.setattr(npconv, "THRESHOLD", 1 << 60)
    gy = RNG.standard_normal(np_conv2d(xs, ws, bs, s, pad, d, g).shape)
    ref, col1 = _conv_all(xs, ws, bs, s, pad, d, g, gy)
    assert col1.ndim == 4
    per_image = int(np.prod(col1.shape[1:]))
    threads(3, one_product=3 if mode == "wide" else None, block=per_image * 2 - 1)
    got, col = _conv_all(xs, ws, bs, s, pad, d, g, gy)
    assert col.ndim == (3 if mode == "wide" else 4)
    assert got.keys() == ref.keys()
    np.testing.assert_allclose(got["out"], np_conv2d(xs, ws, bs, s, pad, d, g), rtol=1e-12,
                               atol=1e-12)
    for name, v in got.items():
        assert v.shape == ref[name].shape and v.dtype == ref[name].dtype, name
        np.testing.assert_allclose(v, ref[name], rtol=1e-12, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("mode", ["per-image", "wide"])
def test_conv_threads_float32_layouts_and_broadcast_gradient(threads, mode):
    """float32, a channels-last input and a broadcast output gradient (what sum() gives)."""
    xs = np.ascontiguousarray(RNG.standard_normal((5, 6, 7, 4)).astype(np.float32)
                              ).transpose(0, 3, 1, 2)
    ws = RNG.standard_normal((6, 4, 3, 3)).astype(np.float32)
    bs = RNG.standard_normal(6).astype(np.float32)
    geom = ((1, 1), (1, 1, 1, 1), (1, 1), 1)
    single = NumpyConv2d()
    out1, col1 = single.forward(xs, ws, bs, *geom)
    gy = np.broadcast_to(np.float32(0.5), out1.shape)
    ref = single.backward(col1, xs.shape, ws, gy, *geom, True, True, True)
    threads(2, one_product=2 if mode == "wide" else None)
    kern = NumpyConv2d()
    out, col = kern.forward(xs, ws, bs, *geom)
    assert out.dtype == np.float32 and out.flags.c_contiguous
    np.testing.assert_allclose(out, out1, rtol=1e-5, atol=1e-5)
    for a, r in zip(kern.backward(col, xs.shape, ws, gy, *geom, True, True, True), ref,
                    strict=True):
        assert a.dtype == np.float32 and a.shape == r.shape
        np.testing.assert_allclose(a, r, rtol=1e-5, atol=1e-4)


def test_conv_one_cpu(monkeypatch):
    """One usable CPU: the pool is not used (every range runs on the calling thread) and
    a large convolution gives the reference values."""
    monkeypatch.delenv("VTL_NUM_THREADS", raising=False)
    monkeypatch.setattr(npool, "THRESHOLD", 0)
    monkeypatch.setattr(nc.os, "sched_getaffinity", lambda pid: {0}, raising=False)
    monkeypatch.setattr(nc, "_cpus", (float("-inf"), 1))  # the mask read again
    assert nc.usable_cpus() == 1 and nc.num_threads() == 1
    seen = set()
    submit = nc.ThreadPoolExecutor.submit
    monkeypatch.setattr(nc.ThreadPoolExecutor, "submit",
                        lambda *a, **k: pytest.fail("pool used") or submit(*a, **k))
    nc.parallel_for(lambda i, j: seen.add((i, j, threading.get_ident())), 9)
    assert seen == {(0, 9, threading.get_ident())}
    monkeypatch.setattr(npconv, "THRESHOLD", 0)  # the threaded code paths, on one thread
    monkeypatch.setattr(NumpyConv2d, "tiled", False)  # the whole-batch im2col layouts
    xs, ws = RNG.standard_normal((4, 3, 9, 9)), RNG.standard_normal((5, 3, 3, 3))
    pad = (1, 1, 1, 1)
    full = None
    for one_product in (4, 1):  # per-image products, then the wide layout
        monkeypatch.setattr(common_conv, "ONE_PRODUCT_THREADS", one_product)
        kern = NumpyConv2d()
        out, col = kern.forward(xs, ws, np.zeros(5), (1, 1), pad, (1, 1), 1)
        assert col.ndim == (4 if one_product > 1 else 3)
        ref = np_conv2d(xs, ws, None, (1, 1), pad)
        np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-12)
        if full is None:
            gy = RNG.standard_normal(out.shape)
            full = np.sum(ref * gy)
        dx, dw, db = kern.backward(col, xs.shape, ws, gy, (1, 1), pad, (1, 1), 1, True, True,
                                   True)
        np.testing.assert_allclose(db, gy.sum(axis=(0, 2, 3)), rtol=1e-12)
        np.testing.assert_allclose(np.sum(dw * ws), full, rtol=1e-10)
        np.testing.assert_allclose(np.sum(dx * xs), full, rtol=1e-10)
    y, _ = NumpyPool2d().max_forward(xs, (2, 2), (2, 2), (0, 0), (1, 1), (4, 4))
    np.testing.assert_array_equal(y, np_max_pool2d(xs, (2, 2), (2, 2))[0])


def test_num_threads_env(monkeypatch):
    """VTL_NUM_THREADS caps the usable CPUs; bad values are errors naming the variable."""
    monkeypatch.setattr(nc, "usable_cpus", lambda: 8)
    monkeypatch.delenv("VTL_NUM_THREADS", raising=False)
    assert nc.num_threads() == 8
    for env, want in (("3", 3), (" 1 ", 1), ("8", 8), ("64", 8), ("", 8)):
        monkeypatch.setenv("VTL_NUM_THREADS", env)
        assert nc.num_threads() == want, env
    for bad in ("0", "-2", "two", "1.5"):
        monkeypatch.setenv("VTL_NUM_THREADS", bad)
        with pytest.raises(ValueError, match="VTL_NUM_THREADS must be a positive integer"):
            nc.num_threads()


def test_pass_threads_one_per_grain(monkeypatch):
    """A memory-bound pass takes one thread per PASS_GRAIN elements (at least two once
    split), at most the pool's; 1 below its threshold; every thread with the grain off."""
    monkeypatch.setattr(nc, "usable_cpus", lambda: 16)
    monkeypatch.delenv("VTL_NUM_THREADS", raising=False)
    monkeypatch.setattr(nc, "PASS_GRAIN", 1 << 17)
    assert nc.pass_threads(1 << 19, 1 << 20) == 1
    assert nc.pass_threads(1 << 18, 1 << 18) == 2
    assert nc.pass_threads(1 << 20, 1 << 20) == 8
    assert nc.pass_threads(3 << 19, 1 << 20) == 12
    assert nc.pass_threads(1 << 24, 1 << 20) == 16
    monkeypatch.setattr(nc, "usable_cpus", lambda: 2)
    assert nc.pass_threads(1 << 20, 1 << 20) == 2
    monkeypatch.setattr(nc, "usable_cpus", lambda: 1)
    assert nc.pass_threads(1 << 20, 1 << 20) == 1
    monkeypatch.setattr(nc, "usable_cpus", lambda: 16)
    monkeypatch.setattr(nc, "PASS_GRAIN", 0)
    assert nc.pass_threads(1 << 20, 1 << 20) == 16
    assert nc.pass_threads(5, 1 << 20) == 1


def test_passes_split_by_the_grain_give_the_same_bits(monkeypatch):
    """Batch norm and ReLU's gradient over the pool, split by the grain (8 threads for a
    million elements on 16) and over every thread: the single-threaded values."""
    from vtl.backends.numpy import nn as npnn

    x = RNG.standard_normal((4, 64, 64, 64)).astype(np.float32)
    g = RNG.standard_normal(x.shape).astype(np.float32)
    w = RNG.standard_normal(64).astype(np.float32)

    def run():
        xt = vtl.asarray(x, requires_grad=True)
        wt = vtl.asarray(w, requires_grad=True)
        y = F.relu(F.batch_norm(xt, None, None, wt, None, training=True))
        y.backward(vtl.asarray(g))
        return y.numpy(), xt.grad.numpy(), wt.grad.numpy()

    monkeypatch.delenv("VTL_NUM_THREADS", raising=False)
    monkeypatch.setattr(nc, "usable_cpus", lambda: 1)
    ref = run()
    monkeypatch.setattr(nc, "usable_cpus", lambda: 16)
    calls = []
    pf = nc.parallel_for
    monkeypatch.setattr(nc, "parallel_for", lambda fn, n, t=None: (calls.append(t), pf(fn, n, t)))
    for grain, want in ((1 << 17, 8), (0, 16)):
        monkeypatch.setattr(nc, "PASS_GRAIN", grain)
        calls.clear()
        got = run()
        assert want in calls, (grain, calls)
        for a, b in zip(got, ref, strict=True):
            np.testing.assert_array_equal(a, b)
    assert npnn.THRESHOLD <= x.size


def test_usable_cpus_follows_affinity(monkeypatch):
    """The mask is read again once CPUS_TTL has passed since the last read."""
    mask = {0, 2, 5}
    monkeypatch.setattr(nc.os, "sched_getaffinity", lambda pid: mask, raising=False)
    monkeypatch.setattr(nc, "_cpus", (float("-inf"), 1))
    assert nc.usable_cpus() == 3
    mask = {0}
    assert nc.usable_cpus() == 3  # within CPUS_TTL: the mask read before
    monkeypatch.setattr(nc, "_cpus", (nc._cpus[0] - nc.CPUS_TTL, 3))
    assert nc.usable_cpus() == 1


def test_parallel_for_ranges_errors_nesting(monkeypatch):
    monkeypatch.setattr(nc, "usable_cpus", lambda: 4)
    monkeypatch.delenv("VTL_NUM_THREADS", raising=False)
    for n, t in ((10, 3), (2, 4), (7, 7), (1, 3), (0, 3), (5, None)):
        got = []
        lock = threading.Lock()

        def rec(i, j, got=got, lock=lock):
            with lock:
                got.append((i, j))

        nc.parallel_for(rec, n, t)
        got.sort()
        cover = [k for i, j in got for k in range(i, j)]
        assert cover == list(range(n)), (n, t, got)
        if n:
            assert all(j > i for i, j in got) and len(got) == min(t or 4, n)
            assert max(j - i for i, j in got) - min(j - i for i, j in got) <= 1
    # work really runs on several threads, and every range finishes before the return
    idents, done = set(), []
    barrier = threading.Barrier(3, timeout=10)

    def meet(i, j):
        idents.add(threading.get_ident())
        barrier.wait()  # deadlocks (times out) unless three ranges run at once
        done.append(i)

    nc.parallel_for(meet, 3, 3)
    assert len(idents) == 3 and sorted(done) == [0, 1, 2]
    # an error in one range is raised once the others have finished
    finished = []

    def fail(i, j):
        if i == 0:
            raise KeyError("boom")
        threading.Event().wait(0.05)
        finished.append(i)

    with pytest.raises(KeyError, match="boom"):
        nc.parallel_for(fail, 4, 4)
    assert sorted(finished) == [1, 2, 3]
    # a nested parallel_for inside a range runs inline (no waiting on a busy pool)
    inner = []

    def outer(i, j):
        nc.parallel_for(lambda a, b: inner.append((i, a, b, threading.get_ident())), 3)

    nc.parallel_for(outer, 2, 2)
    assert sorted(x[:3] for x in inner) == [(0, 0, 3), (1, 0, 3)]


def test_pool_is_replaced_after_fork(monkeypatch):
    """A forked child has none of the parent's pool threads: it gets a new pool."""
    monkeypatch.setattr(nc, "usable_cpus", lambda: 2)
    nc.parallel_for(lambda i, j: None, 2, 2)
    first = nc._pool
    assert first is not None and nc._executor(1) is first
    pid = nc.os.getpid()
    monkeypatch.setattr(nc.os, "getpid", lambda: pid + 1)
    assert nc._executor(1) is not first
    done = []
    nc.parallel_for(lambda i, j: done.append(i), 2, 2)
    assert sorted(done) == [0, 1]


POOL_CASES = [
    ((7, 3, 8, 8), (2, 2), (2, 2), (0, 0), (1, 1), False),
    ((5, 2, 9, 8), (3, 3), (2, 2), (1, 1), (1, 1), True),
    ((5, 3, 9, 10), (3, 2), (2, 1), (1, 1), (2, 3), False),
]


@pytest.mark.parametrize("case", POOL_CASES)
def test_pool_threads_equal_single_thread(threads, monkeypatch, case):
    """Max/avg pooling on three threads over blocks of one to a few planes: the values,
    tap numbers and gradients of the single-threaded kernel (and the loop references)."""
    shape, k, s, p, d, ceil = case
    xs = RNG.standard_normal(shape)
    xs[0, 0, :2, :2] = 1.0  # ties
    xs[-1, -1, 1, 1] = np.nan
    ref_y, _ = np_max_pool2d(xs, k, s, p, d, ceil)
    out = ref_y.shape[2:]
    g = RNG.standard_normal(ref_y.shape)
    single = NumpyPool2d()
    y1, a1 = single.max_forward(xs, k, s, p, d, out)
    dx1 = single.max_backward(a1, xs.shape, g, k, s, p, d)
    avg_out = np_avg_pool2d(xs, k, s, p, ceil, True).shape[2:]
    ga = RNG.standard_normal((*shape[:2], *avg_out))
    av1 = single.avg_forward(xs, k, s, p, avg_out, True, None)
    ad1 = single.avg_backward(xs.shape, ga, k, s, p, False, None)
    threads(3)
    monkeypatch.setattr(common_pool, "BLOCK", shape[2] * shape[3] * 2 + 1)
    kern = NumpyPool2d()
    y, a = kern.max_forward(xs, k, s, p, d, out)
    np.testing.assert_array_equal(y, y1)
    np.testing.assert_array_equal(y, ref_y)
    np.testing.assert_array_equal(a, a1)
    np.testing.assert_array_equal(kern.max_backward(a, xs.shape, g, k, s, p, d), dx1)
    av = kern.avg_forward(xs, k, s, p, avg_out, True, None)
    np.testing.assert_array_equal(av, av1)
    if d == (1, 1):
        np.testing.assert_allclose(av, np_avg_pool2d(xs, k, s, p, ceil, True), rtol=1e-12)
    np.testing.assert_array_equal(kern.avg_backward(xs.shape, ga, k, s, p, False, None), ad1)


def test_cnn_layers_through_the_api(backend, threads):
    """conv2d + relu + max_pool2d through vtl on two threads (both layouts) equals the
    single-threaded kernels and the portable gather path, values and gradients."""
    if backend != "numpy":
        pytest.skip("the threaded kernels are NumPy's")
    xs = RNG.standard_normal((5, 3, 8, 8))
    ws, bs = RNG.standard_normal((4, 3, 3, 3)), RNG.standard_normal(4)

    def run():
        x = vtl.asarray(xs, requires_grad=True)
        w, b = vtl.asarray(ws, requires_grad=True), vtl.asarray(bs, requires_grad=True)
        y = F.max_pool2d(F.relu(F.conv2d(x, w, b, padding=1)), 2)
        assert y._grad_fn._name != "ConvBackward"
        vtl.sum(y * y).backward()
        return [to_numpy(t) for t in (y, x.grad, w.grad, b.grad)]

    ref = run()
    be = vtl.backends.get("numpy")
    saved = be._kernels.pop("conv2d")
    try:
        portable = run()
    finally:
        be._kernels["conv2d"] = saved
    for one_product in (None, 2):
        threads(2, one_product=one_product, block=30)
        for a, r, q in zip(run(), ref, portable, strict=True):
            assert_close(a, r, rtol=1e-12, atol=1e-12)
            assert_close(a, q, rtol=1e-10, atol=1e-10)
