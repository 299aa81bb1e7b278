"""The NumPy backend's threaded nn kernels (``vtl/backends/numpy/nn.py``) against the
portable expressions, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import use_kernel
from nn_kernel_checks import (
    backward_scaled,
    ce_case,
    check_ce_special_values,
    np_cross_entropy,
    scaled_grad,
)

import vtl
import vtl.nn.functional as F
from vtl.backends.numpy import nn as nk

SPECIAL = [np.nan, 0.0, -0.0, np.inf, -np.inf, 1.0, -1.0, 5e-45, -5e-45]


@pytest.fixture
def three_threads(monkeypatch):
    """Chunks on a pool of three threads, from 7 elements on (uneven ranges)."""
    monkeypatch.setattr(nk, "THRESHOLD", 7)
    monkeypatch.setattr(nk._pool, "num_threads", lambda: 3)


def _check_relu(x, g):
    got = nk.relu_backward(x, g)
    want = np.where(x <= 0, 0, g)
    assert got.dtype == want.dtype and got.shape == want.shape
    itype = {np.dtype("float32"): np.uint32, np.dtype("float64"): np.uint64}[x.dtype]
    np.testing.assert_array_equal(got.view(itype), want.view(itype))


def _operands(dtype, shape, seed=1):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    k = min(x.size, len(SPECIAL))
    x.reshape(-1)[:k] = SPECIAL[:k]
    g.reshape(-1)[-k:] = SPECIAL[:k]
    return x, g


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(7,), (5, 11), (2, 3, 4, 5)])
def test_relu_backward_equals_portable(three_threads, dtype, shape):
    """Bit for bit (signed zeros, nan and infinite gradients, nan inputs), in chunks on
    three threads."""
    _check_relu(*_operands(dtype, shape))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_relu_backward_on_one_thread_any_layout_and_rank(dtype, monkeypatch):
    monkeypatch.setattr(nk._pool, "num_threads", lambda: 1)
    for shape in [(), (1,), (3, 5), (4, 6, 2)]:
        _check_relu(*_operands(dtype, shape))
    x, g = _operands(dtype, (6, 8), seed=3)
    _check_relu(x[:, ::2], g[:, ::2])  # strided
    _check_relu(np.asfortranarray(x), g.T.copy().T)  # Fortran order
    _check_relu(x.T, g.T)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("shape", [(7,), (5, 11), (2, 3, 4, 5)])
def test_relu_equals_numpys_maximum_bit_for_bit(three_threads, dtype, shape):
    """``kernel("relu")`` in chunks on three threads: NumPy's ``maximum(x, 0)`` bit for
    bit (nan stays, -0.0 gives +0.0)."""
    x, _ = _operands(dtype, shape)
    got, want = nk.relu(x), np.maximum(x, 0)
    assert got.dtype == want.dtype and got.shape == want.shape
    itype = np.dtype(f"u{x.itemsize}")
    np.testing.assert_array_equal(got.view(itype), want.view(itype))


def test_relu_declines_what_numpy_does_as_well_in_one_call(three_threads, monkeypatch):
    x, _ = _operands("float32", (6, 8))
    assert nk.relu(x[:, ::2]) is None  # not C-contiguous
    assert nk.relu(x[:1, :6]) is None  # below the threshold
    assert nk.relu(np.arange(12)) is None  # integers
    monkeypatch.setattr(nk._pool, "num_threads", lambda: 1)
    assert nk.relu(x) is None  # one thread: one NumPy call


def test_relu_through_the_kernel_records_one_node(three_threads, monkeypatch):
    calls = []

    def spy(x):
        calls.append(x.shape)
        return nk.relu(x)

    numpy_backend = vtl.backends.get("numpy")
    numpy_backend.kernel("relu")  # loaded first: loading registers the backend's own relu
    monkeypatch.setitem(numpy_backend._kernels, "relu", spy)
    x, _ = _operands("float32", (5, 11))
    t = vtl.asarray(x, backend="numpy", requires_grad=True)
    y = F.relu(t)
    assert calls == [(5, 11)]
    np.testing.assert_array_equal(np.asarray(y._data).view(np.uint32),
                                  np.maximum(x, 0).view(np.uint32))
    assert y.grad_fn.name() == "ReluBackward" and y.grad_fn.next_functions[0][0] is t
    y.sum().backward()
    np.testing.assert_array_equal(np.asarray(t.grad._data), np.where(x <= 0, 0, 1))


def _check_zero_where(mask, g):
    got = nk.zero_where(mask, g)
    want = np.where(mask, 0, g)
    assert got.dtype == want.dtype and got.shape == want.shape
    itype = {np.dtype("float32"): np.uint32, np.dtype("float64"): np.uint64}[g.dtype]
    np.testing.assert_array_equal(got.view(itype), want.view(itype))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("threads", [1, 3])
def test_zero_where_equals_where(monkeypatch, dtype, threads):
    """Bit for bit (signed zeros, nan and infinite gradients where the mask is set), in
    one pass and in chunks on three threads, on any layout and rank."""
    monkeypatch.setattr(nk, "THRESHOLD", 7 if threads > 1 else 1 << 18)
    monkeypatch.setattr(nk._pool, "num_threads", lambda: threads)
    for shape in [(), (1,), (7,), (5, 11), (2, 3, 4, 5)]:
        x, g = _operands(dtype, shape)
        _check_zero_where(np.asarray(x < 0.5), g)
    x, g = _operands(dtype, (6, 8), seed=3)
    _check_zero_where(x[:, ::2] < 0, g[:, ::2])  # strided
    _check_zero_where(x.T < 0, g.T)


def test_zero_where_declines_what_it_does_not_handle():
    g = np.ones((4, 4), np.float32)
    assert nk.zero_where(g < 0, g.astype(np.float16)) is None
    assert nk.zero_where(g[:2] < 0, g) is None  # shapes differ
    assert nk.zero_where(g, g) is None  # not a boolean mask
    assert nk.zero_where(g < 0, [1.0]) is None  # not an array


def test_maximum_gradient_through_zero_where():
    """maximum's plain backward (mask, tie halving) on the NumPy kernel equals the
    portable rule, including nan inputs and non-finite gradients."""
    a = np.array([[1.0, -1.0, 0.0, np.nan, 2.0, -3.0]], np.float32)
    gs = np.array([[np.inf, np.inf, 4.0, 5.0, np.nan, -np.inf]], np.float32)
    x = vtl.asarray(a, backend="numpy", requires_grad=True)
    vtl.maximum(x * 1.0, 0.0).backward(vtl.asarray(gs, backend="numpy"))
    np.testing.assert_array_equal(x.grad.numpy(), [[np.inf, 0.0, 2.0, 5.0, np.nan, 0.0]])


def test_relu_backward_declines_what_it_does_not_handle(three_threads):
    x = np.ones((4, 4), np.float32)
    assert nk.relu_backward(x, x.astype(np.float64)) is None  # mixed dtypes
    assert nk.relu_backward(x.astype(np.float16), x.astype(np.float16)) is None
    assert nk.relu_backward(x, x[:2]) is None  # shapes differ
    assert nk.relu_backward(x, [1.0]) is None  # not arrays


def test_relu_gradient_through_the_kernel(three_threads):
    rng = np.random.default_rng(2)
    xs = rng.standard_normal((6, 9)).astype(np.float32)
    xs[0, :3] = [0.0, np.nan, -0.0]
    x = vtl.asarray(xs, backend="numpy", requires_grad=True)
    gs = rng.standard_normal((6, 9)).astype(np.float32)
    F.relu(x).backward(vtl.asarray(gs, backend="numpy"))
    np.testing.assert_array_equal(x.grad.numpy(), np.where(xs <= 0, 0, gs))


def _minmax_reference(a, b, g, greater_is_first):
    """The portable rule: g / 2 on ties, 0 where a loses, else g."""
    lose = a < b if greater_is_first else a > b
    return np.where(lose, 0, np.where(a == b, g * 0.5, g)).astype(g.dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("greater_is_first", [True, False])
def test_minmax_backward_equals_portable(monkeypatch, dtype, threads, greater_is_first):
    """Bit for bit against the portable rule (signed zeros, ties, nan inputs, non-finite
    gradients), with a Python number, a same-shaped and a broadcast ``b``, in one pass and
    in chunks on three threads, on any layout."""
    monkeypatch.setattr(nk, "THRESHOLD", 7 if threads > 1 else 1 << 18)
    monkeypatch.setattr(nk._pool, "num_threads", lambda: threads)
    itype = {np.dtype("float32"): np.uint32, np.dtype("float64"): np.uint64}[np.dtype(dtype)]
    assert nk.minmax_backward(*_operands(dtype, ())[:1], 0.0, _operands(dtype, ())[1],
                              greater_is_first) is None  # 0-d: the general path
    for shape in [(1,), (7,), (5, 11), (2, 3, 4, 5)]:
        a, g = _operands(dtype, shape)
        b_arr, _ = _operands(dtype, shape, seed=2)
        if a.size > 2:
            b_arr.reshape(-1)[:2] = a.reshape(-1)[1:3]  # a couple of ties at other places
        for b in (0.0, -1.0, b_arr, b_arr[..., :1]):
            got = nk.minmax_backward(a, b, g, greater_is_first)
            want = _minmax_reference(a, b, g, greater_is_first)
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got.view(itype), want.view(itype))
    a, g = _operands(dtype, (6, 8), seed=3)
    for a_, g_ in ((a[:, ::2], g[:, ::2]), (a.T, g.T)):
        got = nk.minmax_backward(a_, 0.0, g_, greater_is_first)
        want = _minmax_reference(a_, 0.0, g_, greater_is_first)
        np.testing.assert_array_equal(got.view(itype), want.view(itype))


def test_minmax_backward_declines_what_it_does_not_handle():
    a = np.ones((4, 4), np.float32)
    assert nk.minmax_backward(a, 0.0, a.astype(np.float64), True) is None  # mixed dtypes
    assert nk.minmax_backward(a[:1], a, a, True) is None  # a is broadcast
    assert nk.minmax_backward(a.astype(np.float16), 0.0, a.astype(np.float16), True) is None
    assert nk.minmax_backward([1.0], 0.0, a, True) is None  # not an array


@pytest.mark.parametrize("fn", ["maximum", "minimum"])
def test_minmax_gradients_through_the_kernel_and_without(fn, monkeypatch):
    """The kernel's path (a gradient to x1 alone, x1 of the output's shape) and the general
    path give the same gradients as the portable rule."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal((5, 6)).astype(np.float32)
    b = rng.standard_normal((5, 6)).astype(np.float32)
    a[0, :3] = [0.0, -0.0, 1.0]
    b[0, :3] = [0.0, 0.0, 1.0]  # ties
    gs = rng.standard_normal((5, 6)).astype(np.float32)
    results = []
    for through_kernel in (True, False):
        if not through_kernel:
            kernels = dict(vtl.backends.get("numpy")._kernels)
            kernels.pop("minmax_backward")
            monkeypatch.setattr(vtl.backends.get("numpy"), "_kernels", kernels)
        x = vtl.asarray(a, backend="numpy", requires_grad=True)
        getattr(vtl, fn)(x, vtl.asarray(b)).backward(vtl.asarray(gs))
        results.append(x.grad.numpy())
    want = _minmax_reference(a, b, gs, fn == "maximum")
    np.testing.assert_array_equal(results[0], want)
    np.testing.assert_array_equal(results[1], want)


# -- cross-entropy -------------------------------------------------------------------------------

def _portable_ce(x, t, reduction, ignore_index=-100):
    """The portable path's loss and gradient (the numpy backend's kernel set aside)."""
    with use_kernel("cross_entropy", None):
        xt = vtl.asarray(x, backend="numpy", requires_grad=True)
        loss = F.cross_entropy(xt, vtl.asarray(t, backend="numpy"), reduction=reduction,
                               ignore_index=ignore_index)
        backward_scaled(loss, np.linspace(0.5, 2.0, len(t)), reduction, "numpy")
    return np.asarray(loss._data), np.asarray(xt.grad._data)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("m", "c", "tdtype"), [(7, 5, np.int64), (1, 3, np.int32),
                                                 (64, 10, np.uint8), (33, 1000, np.int64)])
def test_cross_entropy_kernel_equals_the_portable_path(reduction, dtype, m, c, tdtype):
    """The loss by the portable path's operations (bit for bit), the gradient within
    rounding of the portable path's and of a float64 reference; ignored targets."""
    x, t = ce_case(np.random.default_rng(m * c), m, c, dtype, tdtype)
    kern = vtl.backends.get("numpy").kernel("cross_entropy")
    assert kern.supports(x, t) and kern.targets_valid(t, c, -100)
    xt = vtl.asarray(x, backend="numpy", requires_grad=True)
    loss = F.cross_entropy(xt, vtl.asarray(t, backend="numpy"), reduction=reduction)
    assert loss.grad_fn.name() == "CrossEntropyBackward"
    v = np.linspace(0.5, 2.0, m)
    backward_scaled(loss, v, reduction, "numpy")
    want, gwant = _portable_ce(x, t, reduction)
    got = np.asarray(loss._data)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    tol = {"rtol": 2e-5, "atol": 1e-6} if dtype == np.float32 else {"rtol": 1e-12, "atol": 1e-14}
    np.testing.assert_allclose(xt.grad.numpy(), gwant, **tol)
    ref, gref = np_cross_entropy(x, t.astype(np.int64), reduction)
    np.testing.assert_allclose(xt.grad.numpy(), scaled_grad(gref, v, reduction), **tol)


def test_cross_entropy_kernel_special_values_and_edges():
    check_ce_special_values("numpy")
    kern = vtl.backends.get("numpy").kernel("cross_entropy")
    x = np.zeros((0, 4), np.float32)
    t = np.zeros(0, np.int64)
    for reduction, want in (("sum", 0.0), ("none", np.zeros(0, np.float32))):
        np.testing.assert_array_equal(kern.fwd(x, t, reduction, -100)[0], want)
    assert np.isnan(kern.fwd(x, t, "mean", -100)[0])
    assert not kern.supports(np.zeros((2, 0), np.float32), np.zeros(2, np.int64))  # no class
    assert not kern.supports(np.zeros((2, 3), np.float16), np.zeros(2, np.int64))
    assert not kern.supports(np.zeros((2, 3), np.float32), np.zeros(2, np.float32))
    assert not kern.targets_valid(np.array([0, 3]), 3, -100)
    assert kern.targets_valid(np.array([0, -100, 2]), 3, -100)


def test_cross_entropy_kernel_out_of_range_target_raises_as_the_portable_path():
    x = vtl.asarray(np.zeros((2, 3), np.float32), backend="numpy")
    with pytest.raises(IndexError, match="cross_entropy"):
        F.cross_entropy(x, vtl.asarray(np.array([0, 3]), backend="numpy"))
