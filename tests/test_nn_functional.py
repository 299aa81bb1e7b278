"""vtl.nn.functional: NumPy reference implementations written here, float64
finite-difference gradients, stability at extreme inputs, array-api-strict
arrays (no autograd, including the no_x64 device) and PyTorch as an extra
oracle for the losses when it is installed."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from helpers import assert_close, check_grad, check_grad_matches_numpy, skip_unless_dtype, to_numpy

import vtl
import vtl.nn.functional as F

try:
    import torch
    import torch.nn.functional as TF
except ImportError:  # pragma: no cover - torch is optional
    torch = None

xs = pytest.importorskip("array_api_strict")

_erf = np.vectorize(math.erf)
SELU_A, SELU_S = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def np_sigmoid(x):
    return 1 / (1 + np.exp(-x))


def np_softplus(x, beta=1.0, thr=20.0):
    with np.errstate(over="ignore"):
        return np.where(beta * x > thr, x, np.log1p(np.exp(beta * x)) / beta)


# name -> (vtl/xp function of one input, NumPy reference)
ACTIVATIONS = {
    "relu": (F.relu, lambda x: np.maximum(x, 0)),
    "relu6": (F.relu6, lambda x: np.clip(x, 0, 6)),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.2), lambda x: np.where(x > 0, x, 0.2 * x)),
    "elu": (lambda x: F.elu(x, 1.3), lambda x: np.where(x > 0, x, 1.3 * np.expm1(x))),
    "selu": (F.selu, lambda x: SELU_S * np.where(x > 0, x, SELU_A * np.expm1(x))),
    "celu": (lambda x: F.celu(x, 0.7),
             lambda x: np.maximum(0, x) + np.minimum(0, 0.7 * np.expm1(x / 0.7))),
    "gelu": (F.gelu, lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2)))),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"),
                  lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi)
                                                   * (x + 0.044715 * x**3)))),
    "sigmoid": (F.sigmoid, np_sigmoid),
    "tanh": (F.tanh, np.tanh),
    "silu": (F.silu, lambda x: x * np_sigmoid(x)),
    "swish": (F.swish, lambda x: x * np_sigmoid(x)),
    "mish": (F.mish, lambda x: x * np.tanh(np_softplus(x))),
    "softplus": (lambda x: F.softplus(x, 2.0, 5.0), lambda x: np_softplus(x, 2.0, 5.0)),
    "logsigmoid": (F.logsigmoid, lambda x: -np_softplus(-x, 1.0, np.inf)),
    "softsign": (F.softsign, lambda x: x / (1 + np.abs(x))),
    "hardtanh": (lambda x: F.hardtanh(x, -0.5, 0.8), lambda x: np.clip(x, -0.5, 0.8)),
    "hardsigmoid": (F.hardsigmoid, lambda x: np.clip(x / 6 + 0.5, 0, 1)),
    "hardswish": (F.hardswish, lambda x: x * np.clip(x + 3, 0, 6) / 6),
    "tanhshrink": (F.tanhshrink, lambda x: x - np.tanh(x)),
    "softshrink": (lambda x: F.softshrink(x, 0.3),
                   lambda x: np.where(x > 0.3, x - 0.3, np.where(x < -0.3, x + 0.3, 0))),
    "hardshrink": (lambda x: F.hardshrink(x, 0.3), lambda x: np.where(np.abs(x) > 0.3, x, 0)),
    "threshold": (lambda x: F.threshold(x, 0.1, 20.0), lambda x: np.where(x > 0.1, x, 20.0)),
}

# away from the kinks (0, +-0.3, 0.1, -0.5, 0.8, +-3, 6, 20/beta) for finite differences
GRID = np.array([-7.1, -4.2, -2.9, -1.7, -0.77, -0.41, -0.12, 0.06, 0.21, 0.47, 1.3, 2.2,
                 3.6, 5.4, 6.8, 11.0])


def _inputs(dtype):
    return np.concatenate([GRID, [0.0, -0.0, 25.0, -25.0]]).astype(dtype)


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_activation_forward(backend, name, dtype):
    skip_unless_dtype(backend, dtype)
    fn, ref = ACTIVATIONS[name]
    x = _inputs(dtype)
    out = fn(vtl.asarray(x))
    expect = ref(x.astype(np.float64)).astype(dtype)
    tol = {"rtol": 2e-6, "atol": 2e-7} if dtype == "float32" else {"rtol": 1e-12, "atol": 1e-14}
    assert_close(out, expect, **tol)
    # shapes: 0-d and empty inputs keep their shape
    assert fn(vtl.asarray(np.float32(0.5).astype(dtype))).shape == ()
    assert fn(vtl.zeros((2, 0), dtype=getattr(vtl, dtype))).shape == (2, 0)


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_grad(name):
    fn, _ = ACTIVATIONS[name]
    check_grad(fn, GRID.reshape(4, 4))


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_grad_on_backend(backend, name):
    check_grad_matches_numpy(ACTIVATIONS[name][0], backend, GRID)


@pytest.mark.parametrize("name", ["relu", "leaky_relu", "elu", "hardtanh", "hardsigmoid",
                                  "hardswish", "softplus", "sigmoid", "gelu"])
def test_activation_derivative_at_kinks_follows_pytorch(name):
    if torch is None:
        pytest.skip("torch not installed")
    tfn = {"relu": TF.relu, "leaky_relu": lambda x: TF.leaky_relu(x, 0.2),
           "elu": lambda x: TF.elu(x, 1.3), "hardtanh": lambda x: TF.hardtanh(x, -0.5, 0.8),
           "hardsigmoid": TF.hardsigmoid, "hardswish": TF.hardswish,
           "softplus": lambda x: TF.softplus(x, 2.0, 5.0), "sigmoid": torch.sigmoid,
           "gelu": TF.gelu}[name]
    pts = np.array([0.0, -0.5, 0.8, -3.0, 3.0, 2.5])
    t = torch.tensor(pts, requires_grad=True)
    tfn(t).sum().backward()
    x = vtl.asarray(pts, requires_grad=True)
    vtl.sum(ACTIVATIONS[name][0](x)).backward()
    np.testing.assert_allclose(to_numpy(x.grad), t.grad.numpy(), rtol=1e-7, atol=1e-12)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # nan/inf inputs on purpose
def test_activation_special_values_follow_pytorch():
    if torch is None:
        pytest.skip("torch not installed")
    pts = np.array([math.nan, math.inf, -math.inf, 0.0, -0.0])
    tfns = {"relu": TF.relu, "relu6": TF.relu6, "leaky_relu": lambda x: TF.leaky_relu(x, 0.2),
            "elu": lambda x: TF.elu(x, 1.3), "selu": TF.selu, "gelu": TF.gelu,
            "sigmoid": torch.sigmoid, "tanh": torch.tanh, "silu": TF.silu,
            "softplus": lambda x: TF.softplus(x, 2.0, 5.0), "logsigmoid": TF.logsigmoid,
            "softsign": TF.softsign, "hardtanh": lambda x: TF.hardtanh(x, -0.5, 0.8),
            "hardsigmoid": TF.hardsigmoid, "hardswish": TF.hardswish,
            "softshrink": lambda x: TF.softshrink(x, 0.3),
            "hardshrink": lambda x: TF.hardshrink(x, 0.3),
            "threshold": lambda x: TF.threshold(x, 0.1, 20.0)}
    for name, tfn in tfns.items():
        got = to_numpy(ACTIVATIONS[name][0](vtl.asarray(pts)))
        expect = tfn(torch.tensor(pts)).numpy()
        if name == "hardswish":  # vtl gives the limit 0 at -inf where PyTorch computes -inf*0
            assert got[2] == 0.0
            got[2] = expect[2]
        np.testing.assert_array_equal(got, expect, err_msg=name)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # nan/inf inputs on purpose
def test_activations_are_stable_at_extremes(backend):
    x = vtl.asarray([-1e4, -100.0, 100.0, 1e4], requires_grad=True)
    for fn in (F.sigmoid, F.softplus, F.logsigmoid, F.silu, F.mish, F.elu, F.selu, F.gelu,
               lambda t: F.softplus(t, 3.0, math.inf), F.celu):
        y = fn(x)
        assert np.isfinite(to_numpy(y)).all()
        (g,) = vtl.autograd.grad(vtl.sum(y), [x])
        assert np.isfinite(to_numpy(g)).all()
    assert_close(F.sigmoid(x.detach()),
                 np_sigmoid(np.array([-1e4, -100.0, 100.0, 1e4])).astype(np.float32))
    assert to_numpy(F.logsigmoid(x))[0] == pytest.approx(-1e4)
    assert to_numpy(F.softplus(vtl.asarray([1e4]), 1.0, math.inf))[0] == pytest.approx(1e4)
    assert np.isnan(to_numpy(F.relu(vtl.asarray([math.nan])))[0])
    np.testing.assert_array_equal(to_numpy(F.gelu(vtl.asarray([0.0, math.inf]))),
                                  [0.0, math.inf])


def test_gelu_tails_are_accurate():
    x = np.array([-12.0, -8.0, -5.0, -1.0, -0.5, 0.5, 1.0, 5.0, 9.0])
    expect = x * 0.5 * np.vectorize(math.erfc)(-x / math.sqrt(2))
    np.testing.assert_allclose(to_numpy(F.gelu(vtl.asarray(x))), expect, rtol=1e-13, atol=0)


def test_prelu_and_glu(backend):
    x = np.linspace(-2, 2, 24).reshape(2, 3, 4).astype(np.float32)
    w = np.array([0.1, 0.2, 0.3], dtype=np.float32)
    out = F.prelu(vtl.asarray(x), vtl.asarray(w))
    assert_close(out, np.where(x > 0, x, w[None, :, None] * x))
    assert_close(F.prelu(vtl.asarray(x), vtl.asarray(w[:1])), np.where(x > 0, x, 0.1 * x))
    a, b = x[..., :2], x[..., 2:]
    assert_close(F.glu(vtl.asarray(x)), a * np_sigmoid(b), rtol=1e-6)
    check_grad(lambda t, u: F.prelu(t, u), x.astype(np.float64) + 0.01, w)
    check_grad(lambda t: F.glu(t, 1), np.linspace(-2, 2, 12).reshape(2, 6))
    with pytest.raises(ValueError, match="channels"):
        F.prelu(vtl.asarray(x), vtl.asarray(np.ones(4, np.float32)))
    with pytest.raises(ValueError, match="even"):
        F.glu(vtl.asarray(x), 1)
    with pytest.raises(ValueError, match="approximate"):
        F.gelu(vtl.asarray(x), "fast")
    with pytest.raises(ValueError, match="min_val"):
        F.hardtanh(vtl.asarray(x), 1.0, -1.0)


# -- softmax family -------------------------------------------------------------------------
def np_logsumexp(x, axis, keepdims=False):
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_family(backend, dim):
    x = (np.arange(24).reshape(2, 3, 4) * 0.37 - 4).astype(np.float32)
    lse = np_logsumexp(x.astype(np.float64), dim, True)
    assert_close(F.log_softmax(vtl.asarray(x), dim), (x - lse).astype(np.float32), atol=3e-6)
    assert_close(F.softmax(vtl.asarray(x), dim), np.exp(x - lse).astype(np.float32), atol=1e-6)
    lse_neg = np_logsumexp(-x.astype(np.float64), dim, True)
    assert_close(F.softmin(vtl.asarray(x), dim), np.exp(-x - lse_neg).astype(np.float32),
                 atol=1e-6)
    assert_close(F.logsumexp(vtl.asarray(x), dim),
                 np_logsumexp(x.astype(np.float64), dim).astype(np.float32), atol=3e-6)
    assert_close(F.logsumexp(vtl.asarray(x), (0, 2), keepdim=True),
                 np_logsumexp(x.astype(np.float64), (0, 2), True).astype(np.float32), atol=3e-6)
    xd = x.astype(np.float64)
    for fn in (F.softmax, F.log_softmax, F.softmin):
        check_grad(lambda t, fn=fn: fn(t, dim), xd)
    check_grad(lambda t: F.logsumexp(t, dim), xd)
    check_grad(lambda t: F.logsumexp(t, None), xd)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # nan/inf inputs on purpose
def test_softmax_stability_and_special_values(backend):
    x = vtl.asarray([[1000.0, 1000.0, -1000.0], [-math.inf, 0.0, -math.inf]])
    assert_close(F.softmax(x, 1), np.array([[0.5, 0.5, 0], [0, 1, 0]], np.float32))
    assert_close(F.log_softmax(x, 1),
                 np.array([[-math.log(2), -math.log(2), -2000 - math.log(2)],
                           [-math.inf, 0, -math.inf]], np.float32))
    lse = F.logsumexp(vtl.asarray([[-math.inf, -math.inf], [math.inf, 1.0], [1e4, 1e4]]), 1)
    assert_close(lse, np.array([-math.inf, math.inf, 1e4 + math.log(2)], np.float32))
    x0 = vtl.asarray(3.0, requires_grad=True)
    assert float(F.softmax(x0, 0)) == 1.0 and float(F.log_softmax(x0, 0)) == 0.0
    assert F.softmax(vtl.asarray([1.0, 2.0]), 0, dtype=vtl.float64).dtype == vtl.float64


def test_softmax_implicit_dim_warns_like_pytorch(backend):
    x = vtl.asarray(np.ones((2, 3), np.float32))
    with pytest.warns(UserWarning, match="Implicit dimension"):
        out = F.softmax(x)
    assert_close(out, np.full((2, 3), 1 / 3, np.float32))
    with pytest.raises(IndexError, match="dim 2"):
        F.softmax(x, 2)
    with pytest.raises(TypeError, match="floating"):
        F.log_softmax(vtl.asarray([1, 2]), 0)


# -- linear, embedding, one_hot, pad -------------------------------------------------------------
def test_linear(backend):
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in [(2, 5, 3), (4, 3), (4,)])
    assert_close(F.linear(vtl.asarray(x), vtl.asarray(w), vtl.asarray(b)), x @ w.T + b,
                 rtol=1e-5, atol=1e-6)
    assert_close(F.linear(vtl.asarray(x[0, 0]), vtl.asarray(w)), x[0, 0] @ w.T, rtol=1e-5,
                 atol=1e-6)
    check_grad(F.linear, x[0].astype(np.float64), w, b)
    check_grad(lambda a, c: F.linear(a, c), x.astype(np.float64), w)
    check_grad_matches_numpy(F.linear, backend, x, w, b)
    with pytest.raises(ValueError, match=r"input of shape \(2, 5, 3\).*weight of shape \(4, 2\)"):
        F.linear(vtl.asarray(x), vtl.asarray(np.ones((4, 2), np.float32)))


def test_bilinear(backend):
    rng = np.random.default_rng(1)
    x1, x2 = rng.standard_normal((5, 3)), rng.standard_normal((5, 2))
    w, b = rng.standard_normal((4, 3, 2)), rng.standard_normal(4)
    expect = np.einsum("ni,kij,nj->nk", x1, w, x2) + b
    out = F.bilinear(*(vtl.asarray(a.astype(np.float32)) for a in (x1, x2, w, b)))
    assert_close(out, expect.astype(np.float32), rtol=1e-5, atol=1e-5)
    check_grad(F.bilinear, x1, x2, w, b)
    with pytest.raises(ValueError, match="bilinear"):
        F.bilinear(vtl.asarray(x2), vtl.asarray(x1), vtl.asarray(w))


def test_embedding_forward_and_scatter_add_grad(backend):
    w = np.arange(15, dtype=np.float32).reshape(5, 3)
    idx = np.array([[1, 3, 1], [4, 1, 0]])
    out = F.embedding(vtl.asarray(idx), vtl.asarray(w))
    assert_close(out, w[idx])
    wt = vtl.asarray(w, requires_grad=True)
    v = np.arange(18, dtype=np.float32).reshape(2, 3, 3)
    vtl.sum(F.embedding(vtl.asarray(idx), wt) * vtl.asarray(v)).backward()
    expect = np.zeros_like(w)
    np.add.at(expect, idx.reshape(-1), v.reshape(-1, 3))  # repeated index 1 accumulates 3 rows
    assert_close(wt.grad, expect)
    check_grad(lambda t: F.embedding(vtl.asarray(idx, backend="numpy"), t), w)


def test_embedding_padding_idx_and_max_norm(backend):
    w = np.arange(1, 16, dtype=np.float32).reshape(5, 3)
    idx = vtl.asarray([0, 2, 2, 4])
    wt = vtl.asarray(w, requires_grad=True)
    out = F.embedding(idx, wt, padding_idx=2)
    assert_close(out, w[[0, 2, 2, 4]])  # the padding row's values are returned as they are
    vtl.sum(out).backward()
    assert_close(wt.grad, np.array([[1] * 3, [0] * 3, [0] * 3, [0] * 3, [1] * 3], np.float32))
    wm = vtl.asarray(w.copy())
    out = F.embedding(vtl.asarray([1, 1, 3]), wm, max_norm=5.0)
    norms = np.linalg.norm(w, axis=1)
    expect = w.copy()
    for r in (1, 3):
        expect[r] *= 5.0 / (norms[r] + 1e-7)
    assert_close(wm, expect, rtol=1e-6)  # only the referenced rows were renormalised
    assert_close(out, expect[[1, 1, 3]], rtol=1e-6)
    with pytest.raises(TypeError, match="integer"):
        F.embedding(vtl.asarray([0.0]), wt)
    if backend == "numpy":  # device-resident indices are not read back to check bounds
        with pytest.raises(IndexError):
            F.embedding(vtl.asarray([7]), wt)
    with pytest.raises(ValueError, match="padding_idx"):
        F.embedding(idx, wt, padding_idx=9)


def _read_raises_index_error(fn, value, size):
    """``fn()`` and reading its result raise the ``IndexError`` naming ``value`` and the
    valid range ``[0, size)`` (on a GPU at the read)."""
    with pytest.raises(IndexError) as info:
        fn().numpy()
        vtl.backends.get(vtl.get_backend()).synchronize()
    msg = str(info.value)
    assert f"index {value} is out of bounds for axis 0 with size {size}" in msg, msg
    assert f"[0, {size})" in msg, msg


def _device_ints(values):
    """Integers computed on the device (not known on the host: a GPU checks them there)."""
    return vtl.asarray(np.asarray(values, dtype=np.int64) + 1) - 1


@pytest.mark.parametrize("make", [vtl.asarray, _device_ints], ids=["uploaded", "computed"])
def test_embedding_negative_index_raises(backend, make):
    # PyTorch: every index must lie in [0, num_embeddings); -1 does not wrap to the last row
    w = vtl.asarray(np.arange(15, dtype=np.float32).reshape(5, 3), requires_grad=True)
    _read_raises_index_error(lambda: F.embedding(make([0, -1]), w), -1, 5)
    _read_raises_index_error(lambda: F.embedding(make([[1, 2], [3, -5]]), w), -5, 5)
    _read_raises_index_error(lambda: F.embedding(make([-6]), w), -6, 5)
    _read_raises_index_error(lambda: F.embedding(make([2, -1]), w, padding_idx=-1), -1, 5)
    _read_raises_index_error(lambda: F.embedding(make([-1]), w, max_norm=1.0,
                                                 scale_grad_by_freq=True), -1, 5)
    _read_raises_index_error(lambda: F.embedding(make([5]), w), 5, 5)  # and past the end
    emb = vtl.nn.Embedding(4, 2, padding_idx=-1)
    _read_raises_index_error(lambda: emb(make([0, -1])), -1, 4)
    _read_raises_index_error(lambda: F.embedding_bag(make([[0, -2]]), w), -2, 5)
    # the error was raised once: valid lookups go on working
    assert_close(F.embedding(make([4, 0]), w), np.arange(15, dtype=np.float32).reshape(5, 3)[
        [4, 0]])
    # take and x[idx] keep NumPy's negative indices
    assert_close(vtl.take(w, make([-1]), axis=0), np.array([[12.0, 13.0, 14.0]], np.float32))


def test_embedding_padding_idx_negative_is_normalised(backend):
    w = np.arange(1, 16, dtype=np.float32).reshape(5, 3)
    idx = vtl.asarray([0, 4, 2, 4])
    wt = vtl.asarray(w, requires_grad=True)
    out = F.embedding(idx, wt, padding_idx=-1)  # row 4
    assert_close(out, w[[0, 4, 2, 4]])
    vtl.sum(out).backward()
    assert_close(wt.grad, np.array([[1] * 3, [0] * 3, [1] * 3, [0] * 3, [0] * 3], np.float32))
    wt2 = vtl.asarray(w, requires_grad=True)
    vtl.sum(F.embedding(idx, wt2, padding_idx=4)).backward()
    assert_close(wt2.grad, wt.grad.numpy())  # -1 and 4 name the same row
    emb = vtl.nn.Embedding(5, 3, padding_idx=-1)
    assert emb.padding_idx == 4
    assert emb.weight.numpy()[4].tolist() == [0.0, 0.0, 0.0]
    vtl.sum(emb(vtl.asarray([[4, 1], [4, 4]]))).backward()
    assert emb.weight.grad.numpy()[4].tolist() == [0.0, 0.0, 0.0]
    assert emb.weight.grad.numpy()[1].tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="padding_idx"):
        F.embedding(idx, wt, padding_idx=-6)


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8"])
def test_embedding_valid_indices_still_work(backend, dtype):
    w = np.arange(15, dtype=np.float32).reshape(5, 3)
    idx = np.array([[0, 4, 4], [2, 1, 0]], dtype=dtype)
    for make in (vtl.asarray, lambda a: vtl.asarray(a + 1) - 1):  # uploaded, computed
        wt = vtl.asarray(w, requires_grad=True)
        out = F.embedding(make(idx), wt, padding_idx=2, scale_grad_by_freq=True)
        assert_close(out, w[idx])
        vtl.sum(out).backward()
        assert_close(wt.grad, np.array([[1] * 3, [1] * 3, [0] * 3, [0] * 3, [1] * 3],
                                       np.float32))
    got = F.embedding_bag(vtl.asarray(idx), vtl.asarray(w), mode="sum")
    assert_close(got, w[idx].sum(1))


def test_one_hot(backend):
    t = np.array([[0, 2], [1, 3]])
    out = F.one_hot(vtl.asarray(t))
    assert out.dtype == vtl.int64
    assert_close(out, np.eye(4, dtype=np.int64)[t])
    assert F.one_hot(vtl.asarray(t), 6).shape == (2, 2, 6)
    with pytest.raises(ValueError, match=r"\[0, 3\)"):
        F.one_hot(vtl.asarray(t), 3)
    with pytest.raises(ValueError):
        F.one_hot(vtl.asarray([-1, 0]), 3)
    with pytest.raises(TypeError, match="integer"):
        F.one_hot(vtl.asarray([0.0]))


@pytest.mark.parametrize("mode,np_mode", [("constant", "constant"), ("reflect", "reflect"),
                                          ("replicate", "edge"), ("circular", "wrap")])
def test_pad_modes_match_numpy(backend, mode, np_mode):
    x = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    pad = (2, 1, 3, 0)
    out = F.pad(vtl.asarray(x), pad, mode=mode)
    expect = np.pad(x, ((0, 0), (0, 0), (3, 0), (2, 1)), mode=np_mode)
    assert_close(out, expect)
    check_grad(lambda t: F.pad(t, (1, 2, 2, 1), mode=mode),
               np.linspace(-1, 1, 15).reshape(3, 5))


def test_pad_constant_value_and_cropping(backend):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert_close(F.pad(vtl.asarray(x), (1, 1), value=-5.0),
                 np.pad(x, ((0, 0), (1, 1)), constant_values=-5.0))
    assert_close(F.pad(vtl.asarray(x), (-1, 2, 0, -2)),
                 np.pad(x[:1, 1:], ((0, 0), (0, 2))))
    assert_close(F.pad(vtl.asarray(x), (0, 0, 1, 0)), np.pad(x, ((1, 0), (0, 0))))
    check_grad(lambda t: F.pad(t, (-1, 2, 1, -1), value=3.0), x.astype(np.float64))
    with pytest.raises(ValueError, match="even"):
        F.pad(vtl.asarray(x), (1, 2, 3))
    with pytest.raises(ValueError, match="reflect"):
        F.pad(vtl.asarray(x), (4, 0), mode="reflect")
    with pytest.raises(ValueError, match="mode"):
        F.pad(vtl.asarray(x), (1, 1), mode="wrap")
    with pytest.raises(ValueError, match="at most"):
        F.pad(vtl.asarray(x), (1,) * 6)


# -- dropout --------------------------------------------------------------------------------
def test_dropout_training_flag_and_identity(backend):
    x = vtl.asarray(np.ones((4, 5), np.float32))
    assert F.dropout(x, 0.5, training=False) is x
    assert F.dropout(x, 0.0) is x
    assert_close(F.dropout(x, 1.0), np.zeros((4, 5), np.float32))
    with pytest.raises(ValueError, match="between 0 and 1"):
        F.dropout(x, 1.5)


def test_dropout_mask_scale_and_determinism(backend):
    n = 20000
    x = vtl.asarray(np.full(n, 2.0, np.float32), requires_grad=True)
    g = vtl.random.Generator(5)
    y = F.dropout(x, 0.3, generator=g)
    u = to_numpy(vtl.random.Generator(5).random(n))
    expect = np.where(u >= 0.3, 2.0 / 0.7, 0.0).astype(np.float32)
    assert_close(y, expect, rtol=1e-6)
    assert abs((to_numpy(y) == 0).mean() - 0.3) < 0.02
    vtl.sum(y).backward()
    assert_close(x.grad, np.where(u >= 0.3, 1 / 0.7, 0.0).astype(np.float32), rtol=1e-6)
    vtl.random.seed(9)
    a = to_numpy(F.dropout(x.detach(), 0.5))
    vtl.random.seed(9)
    np.testing.assert_array_equal(to_numpy(F.dropout(x.detach(), 0.5)), a)


def test_feature_dropout_zeroes_whole_channels(backend):
    x = vtl.asarray(np.ones((8, 16, 3, 3), np.float32))
    y = to_numpy(F.dropout2d(x, 0.5, generator=vtl.random.Generator(1)))
    per_channel = y.reshape(8, 16, 9)
    assert ((per_channel == 0).all(axis=2) | (per_channel == 2.0).all(axis=2)).all()
    assert 0.2 < (per_channel[..., 0] == 0).mean() < 0.8
    assert F.dropout1d(vtl.ones((3, 4)), 0.5).shape == (3, 4)
    assert F.dropout3d(vtl.ones((2, 3, 2, 2, 2)), 0.5).shape == (2, 3, 2, 2, 2)
    with pytest.raises(ValueError, match="dropout2d.*3-D.*4-D"):
        F.dropout2d(vtl.ones((2, 3)), 0.5)


def test_alpha_dropout_keeps_selu_statistics(backend):
    z = vtl.random.Generator(2).standard_normal(40000)
    y = to_numpy(F.alpha_dropout(z, 0.2, training=True, generator=vtl.random.Generator(3)))
    assert abs(y.mean()) < 0.03 and abs(y.std() - 1) < 0.03
    assert F.alpha_dropout(z, 0.2) is z  # training defaults to False, as PyTorch


# -- losses ---------------------------------------------------------------------------------
REDUCTIONS = ["mean", "sum", "none"]


def _reduce(x, reduction):
    return {"mean": np.mean, "sum": np.sum, "none": lambda a: a}[reduction](x)


def _pair(seed=0, shape=(3, 4)):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape), rng.standard_normal(shape)


def _huber(d, delta):
    ad = np.abs(d)
    return np.where(ad < delta, 0.5 * d * d, delta * (ad - 0.5 * delta))


POINTWISE = {
    "mse_loss": (lambda a, b, r: F.mse_loss(a, b, reduction=r), lambda a, b: (a - b) ** 2),
    "l1_loss": (lambda a, b, r: F.l1_loss(a, b, reduction=r), lambda a, b: np.abs(a - b)),
    "huber_loss": (lambda a, b, r: F.huber_loss(a, b, reduction=r, delta=0.7),
                   lambda a, b: _huber(a - b, 0.7)),
    "smooth_l1_loss": (lambda a, b, r: F.smooth_l1_loss(a, b, reduction=r, beta=0.7),
                       lambda a, b: _huber(a - b, 0.7) / 0.7),
    "bce_logits": (lambda a, b, r: F.binary_cross_entropy_with_logits(a, np_to(b, a),
                                                                      reduction=r),
                   lambda a, b: -(np_sigmoid01(b) * np.log(np_sigmoid(a))
                                  + (1 - np_sigmoid01(b)) * np.log(1 - np_sigmoid(a)))),
    "soft_margin": (lambda a, b, r: F.soft_margin_loss(a, b, reduction=r),
                    lambda a, b: np.log1p(np.exp(-b * a))),
    "poisson_nll": (lambda a, b, r: F.poisson_nll_loss(a, b, reduction=r),
                    lambda a, b: np.exp(a) - b * a),
}


def np_sigmoid01(b):
    return np_sigmoid(b)  # targets in (0, 1) derived from the second random input


def np_to(b, a):
    xp = a.__array_namespace__()
    return xp.divide(1.0, 1.0 + xp.exp(-b))


@pytest.mark.parametrize("name", sorted(POINTWISE))
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_pointwise_losses(backend, name, reduction):
    fn, ref = POINTWISE[name]
    a, b = _pair()
    out = fn(vtl.asarray(a.astype(np.float32)), vtl.asarray(b.astype(np.float32)), reduction)
    assert_close(out, _reduce(ref(a, b), reduction).astype(np.float32), rtol=2e-5, atol=2e-6)
    check_grad(lambda x, y: fn(x, y, reduction), a, b)


def test_binary_cross_entropy(backend):
    rng = np.random.default_rng(3)
    p = rng.uniform(0.05, 0.95, (4, 3))
    t = rng.uniform(0, 1, (4, 3))
    w = rng.uniform(0.5, 2, (3,))
    ref = -w * (t * np.log(p) + (1 - t) * np.log(1 - p))
    for r in REDUCTIONS:
        out = F.binary_cross_entropy(vtl.asarray(p), vtl.asarray(t), vtl.asarray(w), reduction=r)
        assert_close(out, _reduce(ref, r))
    check_grad(lambda x, y: F.binary_cross_entropy(x, y), p, t)
    # log clamped at -100: a confident wrong prediction costs 100, not inf
    out = F.binary_cross_entropy(vtl.asarray([0.0, 1.0]), vtl.asarray([1.0, 0.0]),
                                 reduction="none")
    assert_close(out, np.array([100.0, 100.0], np.float32))
    x = vtl.asarray([0.0, 1.0], requires_grad=True)
    vtl.sum(F.binary_cross_entropy(x, vtl.asarray([0.0, 1.0]))).backward()
    assert np.isfinite(to_numpy(x.grad)).all()


def test_bce_with_logits_pos_weight_and_stability(backend):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((5, 3)) * 3
    t = rng.integers(0, 2, (5, 3)).astype(np.float64)
    pw = np.array([0.5, 2.0, 3.0])
    w = rng.uniform(0.5, 1.5, (5, 3))
    ls = np.log(np_sigmoid(x))
    ref = -w * (pw * t * ls + (1 - t) * np.log(1 - np_sigmoid(x)))
    for r in REDUCTIONS:
        out = F.binary_cross_entropy_with_logits(vtl.asarray(x), vtl.asarray(t), vtl.asarray(w),
                                                 reduction=r, pos_weight=vtl.asarray(pw))
        assert_close(out, _reduce(ref, r), rtol=1e-9)
    check_grad(lambda a, b, c: F.binary_cross_entropy_with_logits(a, t_np(t), pos_weight=b,
                                                                  weight=c), x, pw, w)
    big = F.binary_cross_entropy_with_logits(vtl.asarray([1000.0, -1000.0]),
                                             vtl.asarray([0.0, 1.0]), reduction="none")
    assert_close(big, np.array([1000.0, 1000.0], np.float32))


def t_np(t):
    return vtl.asarray(t, backend="numpy")


def test_kl_div(backend):
    rng = np.random.default_rng(5)
    logq = np.log(rng.dirichlet(np.ones(4), 3))
    p = rng.dirichlet(np.ones(4), 3)
    p[0, 1] = 0.0
    pointwise = np.where(p > 0, p * (np.log(np.where(p > 0, p, 1)) - logq), 0.0)
    for r in REDUCTIONS:
        assert_close(F.kl_div(vtl.asarray(logq), vtl.asarray(p), reduction=r),
                     _reduce(pointwise, r))
    assert_close(F.kl_div(vtl.asarray(logq), vtl.asarray(p), reduction="batchmean"),
                 pointwise.sum() / 3)
    lp = np.log(rng.dirichlet(np.ones(4), 3))
    assert_close(F.kl_div(vtl.asarray(logq), vtl.asarray(lp), reduction="sum", log_target=True),
                 np.sum(np.exp(lp) * (lp - logq)))
    check_grad(lambda a: F.kl_div(a, t_np(p), reduction="batchmean"), logq)
    check_grad(lambda a, b: F.kl_div(a, b, log_target=True), logq, lp)
    with pytest.raises(ValueError, match="batchmean"):
        F.kl_div(vtl.asarray(logq), vtl.asarray(p), reduction="avg")


def test_gaussian_nll_loss(backend):
    rng = np.random.default_rng(6)
    x, t = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    var = rng.uniform(0.5, 2, (4, 3))
    ref = 0.5 * (np.log(var) + (x - t) ** 2 / var)
    for r in REDUCTIONS:
        assert_close(F.gaussian_nll_loss(vtl.asarray(x), vtl.asarray(t), vtl.asarray(var),
                                         reduction=r), _reduce(ref, r))
    assert_close(F.gaussian_nll_loss(vtl.asarray(x), vtl.asarray(t), vtl.asarray(var[:, :1]),
                                     full=True),
                 np.mean(0.5 * (np.log(var[:, :1]) + (x - t) ** 2 / var[:, :1])
                         + 0.5 * np.log(2 * np.pi)))
    check_grad(lambda a, b: F.gaussian_nll_loss(a, t_np(t), b), x, var)
    with pytest.raises(ValueError, match="negative"):
        F.gaussian_nll_loss(vtl.asarray(x), vtl.asarray(t), vtl.asarray(-var))


def test_poisson_full_and_no_log_input(backend):
    x = np.array([0.5, 1.5, 3.0])
    t = np.array([0.0, 2.0, 5.0])
    stirling = np.where(t > 1, t * np.log(np.where(t > 1, t, 1)) - t
                        + 0.5 * np.log(2 * np.pi * np.where(t > 1, t, 1)), 0)
    assert_close(F.poisson_nll_loss(vtl.asarray(x), vtl.asarray(t), full=True,
                                    reduction="none"), np.exp(x) - t * x + stirling)
    assert_close(F.poisson_nll_loss(vtl.asarray(x), vtl.asarray(t), log_input=False,
                                    reduction="sum"), np.sum(x - t * np.log(x + 1e-8)))


# cross-entropy / nll: a NumPy transcription of PyTorch's documented definitions
def np_cross_entropy(logits, target, weight=None, ignore_index=-100, reduction="mean",
                     eps=0.0):
    c = logits.shape[1]
    logp = logits - np_logsumexp(logits, 1, True)
    w = np.ones(c) if weight is None else weight
    if target.shape == logits.shape:  # probabilities
        t = target * (1 - eps) + eps / c
        wb = w.reshape((1, c) + (1,) * (logits.ndim - 2))
        per = -(logp * t * wb).sum(1)
        return {"mean": per.sum() / per.size, "sum": per.sum(), "none": per}[reduction]
    valid = target != ignore_index
    ts = np.where(valid, target, 0)
    picked = np.take_along_axis(logp, np.expand_dims(ts, 1), 1).squeeze(1)
    wt = np.where(valid, w[ts], 0.0)
    nll = -picked * wt
    smooth = np.where(valid, -(logp * w.reshape((1, c) + (1,) * (logits.ndim - 2))).sum(1), 0)
    if reduction == "mean":
        nll_r, smooth_r = nll.sum() / wt.sum(), smooth.sum() / wt.sum()
    elif reduction == "sum":
        nll_r, smooth_r = nll.sum(), smooth.sum()
    else:
        nll_r, smooth_r = nll, smooth
    return (1 - eps) * nll_r + eps / c * smooth_r


CE_CASES = [
    dict(), dict(weight=True), dict(ignore_index=1), dict(weight=True, ignore_index=2),
    dict(eps=0.2), dict(weight=True, eps=0.1), dict(weight=True, ignore_index=0, eps=0.3),
]


@pytest.mark.parametrize("case", CE_CASES, ids=lambda c: "-".join(c) or "plain")
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(6, 4), (3, 4, 2, 2)])
def test_cross_entropy_class_indices(backend, case, reduction, shape):
    rng = np.random.default_rng(7)
    logits = rng.standard_normal(shape) * 2
    target = rng.integers(0, 4, (shape[0],) + shape[2:])
    target.reshape(-1)[:2] = [case.get("ignore_index", 0), 3]
    weight = rng.uniform(0.5, 2, 4) if case.get("weight") else None
    ii = case.get("ignore_index", -100)
    eps = case.get("eps", 0.0)
    expect = np_cross_entropy(logits, target, weight, ii, reduction, eps)
    wt = None if weight is None else vtl.asarray(weight.astype(np.float32))
    out = F.cross_entropy(vtl.asarray(logits.astype(np.float32)), vtl.asarray(target), wt,
                          ignore_index=ii, reduction=reduction, label_smoothing=eps)
    assert_close(out, np.asarray(expect, np.float32), rtol=1e-5, atol=1e-6)
    if torch is not None:
        tw = None if weight is None else torch.tensor(weight)
        tout = TF.cross_entropy(torch.tensor(logits), torch.tensor(target), tw, ignore_index=ii,
                                reduction=reduction, label_smoothing=eps)
        np.testing.assert_allclose(expect, tout.numpy(), rtol=1e-12, atol=1e-12)
    tgt = vtl.asarray(target, backend="numpy")
    wgt = None if weight is None else vtl.asarray(weight, backend="numpy")
    check_grad(lambda x: F.cross_entropy(x, tgt, wgt, ignore_index=ii, reduction=reduction,
                                         label_smoothing=eps), logits)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("eps", [0.0, 0.25])
def test_cross_entropy_probabilities(backend, reduction, eps):
    rng = np.random.default_rng(8)
    logits = rng.standard_normal((3, 5, 2))
    probs = np.ascontiguousarray(np.moveaxis(rng.dirichlet(np.ones(5), (3, 2)), -1, 1))
    w = rng.uniform(0.5, 2, 5)
    expect = np_cross_entropy(logits, probs, w, reduction=reduction, eps=eps)
    out = F.cross_entropy(vtl.asarray(logits), vtl.asarray(probs), vtl.asarray(w),
                          reduction=reduction, label_smoothing=eps)
    assert_close(out, np.asarray(expect))
    if torch is not None:
        tout = TF.cross_entropy(torch.tensor(logits), torch.tensor(probs), torch.tensor(w),
                                reduction=reduction, label_smoothing=eps)
        np.testing.assert_allclose(expect, tout.numpy(), rtol=1e-12, atol=1e-12)
    check_grad(lambda x, p: F.cross_entropy(x, p, reduction=reduction, label_smoothing=eps),
               logits, probs)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # nan/inf inputs on purpose
def test_cross_entropy_unbatched_and_nll(backend):
    logits = np.array([0.5, -1.0, 2.0])
    out = F.cross_entropy(vtl.asarray(logits), vtl.asarray(2))
    assert_close(out, np.asarray(-(logits[2] - np_logsumexp(logits, 0))))
    rng = np.random.default_rng(9)
    logp = np.log(rng.dirichlet(np.ones(4), 5))
    t = np.array([0, 3, -100, 1, 3])
    w = np.array([1.0, 2.0, 0.5, 3.0])
    valid = t != -100
    ts = np.where(valid, t, 0)
    wt = np.where(valid, w[ts], 0)
    per = -logp[np.arange(5), ts] * wt
    for r, e in (("mean", per.sum() / wt.sum()), ("sum", per.sum()), ("none", per)):
        assert_close(F.nll_loss(vtl.asarray(logp), vtl.asarray(t), vtl.asarray(w), reduction=r),
                     e)
    check_grad(lambda x: F.nll_loss(x, vtl.asarray(t, backend="numpy")), logp)
    all_ignored = F.nll_loss(vtl.asarray(logp[:2]), vtl.asarray([-100, -100]))
    assert math.isnan(float(all_ignored))  # 0/0, as PyTorch


def test_cross_entropy_errors(backend):
    x = vtl.asarray(np.zeros((4, 3), np.float32))
    with pytest.raises(IndexError, match="target 3 is out of bounds for 3 classes"):
        F.cross_entropy(x, vtl.asarray([0, 1, 3, 0]))
    with pytest.raises(IndexError, match="-2"):
        F.nll_loss(x, vtl.asarray([0, -2, 1, 0]))
    with pytest.raises(ValueError, match=r"target of shape \(3,\).*\(4, 3\)"):
        F.cross_entropy(x, vtl.asarray([0, 1, 2]))
    with pytest.raises(ValueError, match="weight must have shape"):
        F.cross_entropy(x, vtl.asarray([0, 1, 2, 0]), vtl.asarray([1.0, 2.0]))
    with pytest.raises(ValueError, match="label_smoothing"):
        F.cross_entropy(x, vtl.asarray([0, 1, 2, 0]), label_smoothing=1.5)
    with pytest.raises(TypeError, match="integer dtype"):
        F.nll_loss(x, vtl.asarray([0.0, 1.0, 2.0, 0.0]))
    with pytest.raises(ValueError, match="reduction must be one of"):
        F.mse_loss(x, x, reduction="avg")
    with pytest.raises(ValueError, match=r"target shape \(4, 1\) differs from input shape"):
        F.mse_loss(x, vtl.asarray(np.zeros((4, 1), np.float32)))
    with pytest.raises(ValueError, match="delta"):
        F.huber_loss(x, x, delta=0.0)


# -- plain array-API arrays (no autograd) ---------------------------------------------------------
STRICT_CASES = {
    "gelu": lambda x, t: F.gelu(x),
    "sigmoid": lambda x, t: F.sigmoid(x),
    "mish": lambda x, t: F.mish(x),
    "log_softmax": lambda x, t: F.log_softmax(x, 1),
    "logsumexp": lambda x, t: F.logsumexp(x, 1),
    "cross_entropy": lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1),
    "bce_logits": lambda x, t: F.binary_cross_entropy_with_logits(x, x * 0 + 0.25),
    "pad": lambda x, t: F.pad(x, (1, 2), mode="reflect"),
    "one_hot": lambda x, t: F.one_hot(t, 4),
    "huber": lambda x, t: F.huber_loss(x, x * 0.5, reduction="sum"),
    "softplus": lambda x, t: F.softplus(x, 2.0),
    "embedding": lambda x, t: F.embedding(t, x),
}


@pytest.mark.parametrize("device", ["CPU_DEVICE", "no_x64"])
@pytest.mark.parametrize("name", sorted(STRICT_CASES))
def test_functional_on_array_api_strict(name, device):
    dev = xs.Device(device)
    x_np = (np.arange(12).reshape(3, 4) * 0.3 - 1.5).astype(np.float32)
    t_np = np.array([0, 2, 1])
    dt_int = xs.int32 if device == "no_x64" else xs.int64
    x = xs.asarray(x_np, device=dev)
    t = xs.asarray(t_np, dtype=dt_int, device=dev)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no implicit conversions or deprecations
        out = STRICT_CASES[name](x, t)
    assert out.device == dev
    host = np.asarray(out.to_device(xs.Device("CPU_DEVICE")))
    expect = to_numpy(STRICT_CASES[name](vtl.asarray(x_np, backend="numpy"),
                                         vtl.asarray(t_np, backend="numpy")))
    np.testing.assert_allclose(host, expect, rtol=1e-6, atol=1e-6)


def test_embedding_on_array_api_strict_rejects_negative_indices():
    w = xs.asarray(np.arange(6, dtype=np.float32).reshape(3, 2))
    with pytest.raises(IndexError, match=r"index -1 is out of bounds .*\[0, 3\)"):
        F.embedding(xs.asarray([0, -1]), w)
    with pytest.raises(IndexError, match=r"index -2 is out of bounds .*\[0, 3\)"):
        F.embedding_bag(xs.asarray([[0, -2]]), w)


def test_dropout_on_array_api_strict():
    x = xs.ones((100,), device=xs.Device("no_x64"))
    y = F.dropout(x, 0.5, generator=vtl.random.Generator(3))
    host = np.asarray(y.to_device(xs.Device("CPU_DEVICE")))
    ref = to_numpy(F.dropout(vtl.ones(100, backend="numpy"), 0.5,
                             generator=vtl.random.Generator(3)))
    np.testing.assert_array_equal(host, ref)  # the same mask as on vtl tensors
    a = np.ones(10, np.float32)
    assert isinstance(F.dropout(a, 0.5), np.ndarray)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_kernel_equals_the_portable_path(backend, approximate, monkeypatch):
    """The backend's fused GELU (one graph node, one launch each way) against the portable
    formulas, values and gradients, over the body and both tails."""
    b = vtl.backends.get(backend)
    if b.kernel("gelu") is None or not b.kernel("gelu").supports(np.dtype(np.float32)):
        pytest.skip(f"{backend} has no float32 gelu kernel")
    x = np.concatenate([np.linspace(-12, 12, 301), [-1e4, -30.0, 0.0, 30.0, 1e4]]).astype(
        np.float32).reshape(2, 153)
    g = np.linspace(-1, 1, x.size, dtype=np.float32).reshape(x.shape)

    def run():
        xt = vtl.asarray(x, requires_grad=True)
        y = F.gelu(xt, approximate)
        assert y._grad_fn.name() == "GeluBackward"
        y.backward(vtl.asarray(g))
        return to_numpy(y), to_numpy(xt.grad)

    fused = run()
    monkeypatch.delitem(b._kernels, "gelu")
    portable = run()
    for a, p in zip(fused, portable, strict=True):
        assert np.isfinite(a).all()
        np.testing.assert_allclose(a, p, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_silu_one_node_equals_the_composite(backend, dtype, monkeypatch):
    """silu as one graph node (the backend's fused kernel where it has one, one launch each
    way) against ``x * sigmoid(x)``: values and gradients over the body, both tails,
    infinities and nan; second-order gradients through the node's vtl-function rule."""
    from vtl.nn.functional import activation as act

    skip_unless_dtype(backend, dtype)
    x = np.concatenate([np.linspace(-12, 12, 297), [-1e4, -100.0, 0.0, 100.0, 1e4],
                        [-np.inf, np.inf, np.nan]]).astype(dtype).reshape(5, 61)
    g = np.linspace(-1, 1, x.size).astype(dtype).reshape(x.shape)
    kern = vtl.backends.get(backend).kernel("silu")
    fused = kern is not None and kern.supports(np.dtype(dtype))
    calls = []
    if fused:
        for way in ("forward", "backward"):
            def spy(*a, _f=getattr(kern, way), _w=way):
                calls.append(_w)
                return _f(*a)

            monkeypatch.setattr(kern, way, spy)

    def run(node):
        with monkeypatch.context() as m:
            if not node:
                m.setattr(act, "_silu_tensor", lambda t: t * F.sigmoid(t))
            xt = vtl.asarray(x, backend=backend, requires_grad=True)
            with np.errstate(invalid="ignore", over="ignore"):
                y = F.silu(xt)
                assert (y._grad_fn.name() == "SiluBackward") == node
                y.backward(vtl.asarray(g, backend=backend))
            return to_numpy(y), to_numpy(xt.grad)

    got, want = run(True), run(False)
    assert calls == (["forward", "backward"] if fused else [])
    # the derivative 1 + x (1 - s) cancels near x = -1.28: relative rounding grows there
    tol = {"rtol": 1e-12, "atol": 1e-15} if dtype == "float64" else {"rtol": 1e-5,
                                                                      "atol": 1e-7}
    for a, r in zip(got, want, strict=True):
        np.testing.assert_allclose(a, r, **tol)  # nan where the composite has nan
    if dtype == "float64":
        xs = np.linspace(-3, 3, 7)
        check_grad(lambda t: F.silu(t) * F.silu(t), xs)

        def second(t):
            (gx,) = vtl.autograd.grad(vtl.sum(F.silu(t) ** 3), [t], create_graph=True)
            return gx

        res = []
        for node in (True, False):
            with monkeypatch.context() as m:
                if not node:
                    m.setattr(act, "_silu_tensor", lambda t: t * F.sigmoid(t))
                t = vtl.asarray(xs, backend=backend, requires_grad=True)
                res.append(to_numpy(vtl.autograd.grad(vtl.sum(second(t) ** 2), [t])[0]))
        np.testing.assert_allclose(res[0], res[1], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sigmoid_one_node(backend, dtype):
    """sigmoid of a tensor is one graph node (``vtl.sigmoid`` and the method too): values as
    the stable formula over the body, the tails, infinities and nan, the gradient from the
    output as PyTorch's (``g s (1 - s)``), second order through the vtl-function rule."""
    skip_unless_dtype(backend, dtype)
    xs = np.concatenate([np.linspace(-30, 30, 121), [-np.inf, np.inf, np.nan]]).astype(dtype)
    x = vtl.asarray(xs, backend=backend, requires_grad=True)
    for y in (F.sigmoid(x), vtl.sigmoid(x), x.sigmoid()):
        assert y._grad_fn.name() == "SigmoidBackward"
    y = F.sigmoid(x)
    g = np.linspace(-1, 1, xs.size).astype(dtype)
    y.backward(vtl.asarray(g, backend=backend))
    x64 = xs.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        s = np.where(x64 >= 0, 1 / (1 + np.exp(-x64)), np.exp(x64) / (1 + np.exp(x64)))
    tol = 1e-6 if dtype == "float32" else 1e-15
    np.testing.assert_allclose(to_numpy(y), s, rtol=tol, atol=tol * 1e-3)
    ys = to_numpy(y).astype(np.float64)
    np.testing.assert_allclose(to_numpy(x.grad), g * ys * (1 - ys), rtol=4 * tol, atol=tol)
    if dtype == "float64":
        check_grad(lambda t: F.sigmoid(t) * F.sigmoid(2 * t), np.linspace(-3, 3, 7))

        def first(t):
            if not t.requires_grad:  # the finite-difference evaluations
                t = vtl.asarray(to_numpy(t), requires_grad=True)
            (gx,) = vtl.autograd.grad(vtl.sum(F.sigmoid(t) ** 3), [t], create_graph=True)
            return gx

        check_grad(first, np.linspace(-3, 3, 7))


@pytest.mark.parametrize("fn", [F.softmax, F.log_softmax])
def test_softmax_single_node_and_second_order(backend, fn):
    """softmax and log_softmax of a tensor are one graph node whose rule is differentiable:
    the Hessian of w . f(x) equals finite differences of its gradient."""
    skip_unless_dtype(backend, "float64")
    x = np.array([[0.3, -1.2, 2.0], [1.5, 0.1, -0.4]])
    w = vtl.asarray(np.array([[0.7, -0.2, 1.1], [0.4, 0.9, -1.3]]))
    xt = vtl.asarray(x, requires_grad=True)
    y = fn(xt, 1)
    assert y._grad_fn.name() in ("SoftmaxBackward", "LogSoftmaxBackward")

    def f(t):
        return vtl.sum(w * fn(t, 1))

    grad = vtl.grad(f)
    hess = to_numpy(vtl.hessian(f)(vtl.asarray(x))).reshape(6, 6)
    eps = 1e-6
    num = np.zeros((6, 6))
    for i in range(6):
        d = np.zeros(6)
        d[i] = eps
        hi = to_numpy(grad(vtl.asarray(x + d.reshape(2, 3)))).reshape(6)
        lo = to_numpy(grad(vtl.asarray(x - d.reshape(2, 3)))).reshape(6)
        num[:, i] = (hi - lo) / (2 * eps)
    np.testing.assert_allclose(hess, num, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_second_order(backend, approximate):
    """The GELU node's rule is differentiable (create_graph): its Hessian matches finite
    differences of its gradient."""
    skip_unless_dtype(backend, "float64")
    x = np.array([-2.5, -0.7, 0.0, 0.4, 1.9])

    def f(t):
        return vtl.sum(F.gelu(t, approximate) * vtl.asarray(np.arange(1.0, 6.0)))

    hess = np.diag(to_numpy(vtl.hessian(f)(vtl.asarray(x))))
    grad = vtl.grad(f)
    eps = 1e-6
    num = (to_numpy(grad(vtl.asarray(x + eps))) - to_numpy(grad(vtl.asarray(x - eps)))) / (2 * eps)
    np.testing.assert_allclose(hess, num, rtol=1e-5, atol=1e-7)
