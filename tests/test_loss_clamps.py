"""Loss values and gradients at clamps, eps and thresholds, as PyTorch computes them.

Each oracle is PyTorch's documented formula (its forward and its backward rule)
written out in NumPy float64; where CPU PyTorch is installed the same points are
also compared with it.
"""

from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pytest
from helpers import assert_close, skip_unless_dtype, to_numpy

import vtl
import vtl.nn.functional as F

REDUCTIONS = ("mean", "sum", "none")
DTYPES = ("float32", "float64")
#: PyTorch's EPSILON in the BCE backward: declared float, so 1e-12 rounded to float32.
BCE_EPS = float(np.float32(1e-12))


def _reduce(x, reduction):
    return x.mean() if reduction == "mean" else x.sum() if reduction == "sum" else x


def _scale(shape, reduction):
    """d reduce(loss) / d loss (the same for every element)."""
    return 1.0 / math.prod(shape) if reduction == "mean" else 1.0


def _tol(dtype):
    return {"rtol": 2e-5, "atol": 1e-6} if dtype == "float32" else {"rtol": 1e-10,
                                                                      "atol": 1e-12}


def _grads(fn, arrays, dtype, upstream_seed=0):
    """``fn(*tensors)`` on the current backend and the gradients of ``sum(out * v)`` for
    every array (``None`` entries of ``arrays`` stay constants)."""
    ts = [vtl.asarray(a.astype(dtype), requires_grad=True) for a in arrays]
    out = fn(*ts)
    v = np.random.default_rng(upstream_seed).uniform(0.5, 1.5, out.shape)
    vtl.sum(out * vtl.asarray(v.astype(dtype))).backward()
    return out, [t.grad for t in ts], v


# -- binary_cross_entropy ---------------------------------------------------------------------
# probabilities at and near the clamps: log(x) or log(1 - x) below -100, x (1 - x) below eps
BCE_X = np.array([0.0, 1.0, 0.0, 1.0, 0.5, 1e-30, 1.0 - 2.0 ** -20, 0.25, 1e-7])
BCE_T = np.array([1.0, 0.0, 0.0, 1.0, 0.5, 1.0, 0.0, 0.75, 0.0])
BCE_W = np.array([2.0, 3.0, 1.0, 0.5, 1.5, 1.0, 0.25, 1.0, 2.0])


def bce_forward(x, t):
    """PyTorch: ``(t - 1) max(log1p(-x), -100) - t max(log(x), -100)``."""
    with np.errstate(divide="ignore"):
        return (t - 1) * np.maximum(np.log1p(-x), -100) - t * np.maximum(np.log(x), -100)


def bce_grad_input(x, t):
    """PyTorch's binary_cross_entropy_backward: ``(x - t) / max((1 - x) x, EPSILON)``."""
    return (x - t) / np.maximum((1 - x) * x, BCE_EPS)


def bce_grad_target(x):
    """PyTorch's binary_cross_entropy_target_backward: ``-logit(x)``."""
    with np.errstate(divide="ignore"):
        return -np.log(x / (1 - x))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_bce_gradient_at_the_clamps_is_pytorchs(backend, dtype, reduction, weighted):
    skip_unless_dtype(backend, dtype)
    x = BCE_X.astype(dtype).astype(np.float64)
    t, w = BCE_T, BCE_W if weighted else np.ones_like(BCE_T)
    wt = vtl.asarray(w.astype(dtype))
    out, (gx,), v = _grads(
        lambda a: F.binary_cross_entropy(a, vtl.asarray(t.astype(dtype)),
                                         wt if weighted else None, reduction=reduction),
        [x], dtype)
    assert_close(out, _reduce(w * bce_forward(x, t), reduction).astype(dtype), **_tol(dtype))
    expect = v * w * bce_grad_input(x, t) * _scale(x.shape, reduction)
    assert_close(gx, expect.astype(dtype), **_tol(dtype))
    # the clamped points get the finite rule's value, not the 0 of a clamped branch
    assert np.all(to_numpy(gx)[[0, 1, 5]] != 0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_bce_target_gradient_is_pytorchs(backend, dtype, reduction):
    skip_unless_dtype(backend, dtype)
    x = BCE_X.astype(dtype).astype(np.float64)
    out, (gx, gt), v = _grads(lambda a, b: F.binary_cross_entropy(a, b, reduction=reduction),
                              [x, BCE_T], dtype)
    s = _scale(x.shape, reduction)
    assert_close(gx, (v * bce_grad_input(x, BCE_T) * s).astype(dtype), **_tol(dtype))
    # -logit(x): +inf at x = 0 and -inf at x = 1, as in PyTorch
    assert_close(gt, (v * bce_grad_target(x) * s).astype(dtype), **_tol(dtype))


def test_bce_second_derivative_follows_the_rule(backend):
    """create_graph: the rule is differentiable (inside (0, 1): d/dx (x - t) / (x (1 - x)))."""
    x = np.array([0.2, 0.5, 0.9])
    t = np.array([1.0, 0.3, 0.0])
    xt = vtl.asarray(x, requires_grad=True)
    (g,) = vtl.autograd.grad(F.binary_cross_entropy(xt, vtl.asarray(t), reduction="sum"), [xt],
                             create_graph=True)
    assert_close(g, bce_grad_input(x, t), rtol=1e-5, atol=1e-6, check_dtype=False)
    vtl.sum(g).backward()
    p = x * (1 - x)
    assert_close(xt.grad, (p - (x - t) * (1 - 2 * x)) / p ** 2, rtol=1e-5, atol=1e-6,
                 check_dtype=False)


def test_bce_on_plain_arrays_needs_no_log_of_zero(backend):
    """The functional API keeps running on raw arrays (no grad), without warnings at 0 and 1."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = F.binary_cross_entropy(BCE_X, BCE_T, BCE_W, reduction="none")
        out_t = F.binary_cross_entropy(vtl.asarray(BCE_X, requires_grad=True),
                                       vtl.asarray(BCE_T), reduction="sum")
        out_t.backward()
    assert isinstance(out, np.ndarray)
    np.testing.assert_allclose(out, BCE_W * bce_forward(BCE_X, BCE_T), rtol=1e-12)
    assert_close(out_t, bce_forward(BCE_X, BCE_T).sum(), check_dtype=False)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_bce_of_subnormal_probabilities(backend, dtype):
    """Probabilities below float32's smallest normal: log(1e-40) is -92.10 (a driver that
    flushed them gave about -88.03), log(1e-45) is below the clamp."""
    skip_unless_dtype(backend, dtype)
    x = np.array([1e-45, 1e-40, 1e-38, 3e-39, 1e-30, 6e-8, 1e-5, 1e-7], dtype=dtype)
    t = np.array([1.0, 1.0, 0.75, 1.0, 1.0, 1.0, 0.5, 0.0], dtype=dtype)
    out = F.binary_cross_entropy(vtl.asarray(x), vtl.asarray(t), reduction="none")
    expected = bce_forward(x.astype(np.float64), t.astype(np.float64)).astype(dtype)
    assert_close(out, expected, rtol=3e-7 if dtype == "float32" else 1e-3, atol=0)


# -- gaussian_nll_loss ----------------------------------------------------------------------
GX = np.array([[0.5, -1.0, 2.0], [0.1, 0.2, 0.3], [1.0, 1.0, -0.5], [0.0, 0.4, 0.2]])
GT = np.array([[0.4, -1.0, 1.0], [0.0, 0.3, 0.3], [0.5, 1.5, 0.0], [0.0, -0.4, 0.2]])
# var at 0, below, at and above eps = 1e-6, in each of PyTorch's accepted shapes
GVARS = {
    "same": np.array([[0.0, 1e-8, 1e-6], [2.0, 1e-7, 0.5], [1e-6, 3.0, 0.0], [0.1, 5e-7, 1.0]]),
    "one fewer axis": np.array([0.0, 1e-9, 2.0, 5e-7]),
    "trailing 1": np.array([[0.0], [1e-9], [2.0], [5e-7]]),
    "leading 1": np.array([[0.0, 1e-7, 3.0]]),
}


def gaussian_oracle(x, t, var, eps, full):
    """PyTorch: ``v = var`` clamped to ``eps`` in a no-grad copy, ``0.5 (log v + d^2 / v)``
    (+ ``0.5 log 2 pi``); the gradients are those at ``v``, and var's passes the clamp."""
    if var.ndim == x.ndim - 1:
        var = var[..., None]
    v = np.maximum(np.broadcast_to(var, x.shape), eps)
    d = x - t
    loss = 0.5 * (np.log(v) + d ** 2 / v) + (0.5 * np.log(2 * np.pi) if full else 0.0)
    dv = 0.5 * (1 / v - d ** 2 / v ** 2)
    return loss, d / v, -d / v, dv


def _sum_to(g, shape):
    if len(shape) == g.ndim - 1:
        return g.sum(axis=-1)
    axes = tuple(i for i, s in enumerate(shape) if s == 1 and g.shape[i] != 1)
    return g.sum(axis=axes, keepdims=True)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("full", [False, True])
@pytest.mark.parametrize("shape", sorted(GVARS))
def test_gaussian_nll_gradient_passes_the_var_clamp(backend, dtype, reduction, full, shape):
    skip_unless_dtype(backend, dtype)
    x, t, var = (a.astype(dtype).astype(np.float64) for a in (GX, GT, GVARS[shape]))
    out, (gx, gt, gv), v = _grads(
        lambda a, b, c: F.gaussian_nll_loss(a, b, c, full, reduction=reduction), [x, t, var],
        dtype)
    loss, dx, dt, dv = gaussian_oracle(x, t, var, 1e-6, full)
    s = v * _scale(x.shape, reduction)
    assert_close(out, _reduce(loss, reduction).astype(dtype), **_tol(dtype))
    assert_close(gx, (s * dx).astype(dtype), **_tol(dtype))
    assert_close(gt, (s * dt).astype(dtype), **_tol(dtype))
    assert_close(gv, _sum_to(s * dv, var.shape).astype(dtype), **_tol(dtype))
    assert np.all(to_numpy(gv) != 0)  # below eps too: the gradient at eps, not 0


def test_gaussian_nll_scalar_var_and_bad_shapes(backend):
    x, t = vtl.asarray(GX), vtl.asarray(GT)
    loss, *_ = gaussian_oracle(GX, GT, np.full(GX.shape, 1e-9), 1e-6, False)
    assert_close(F.gaussian_nll_loss(x, t, 1e-9, reduction="none"), loss)
    with pytest.raises(ValueError, match=r"var must be >= 0, got -1\.0"):
        F.gaussian_nll_loss(x, t, -1.0)
    for bad in ((4, 2), (3,), (1, 1), (2, 4, 3)):  # PyTorch: "var is of incorrect size"
        with pytest.raises(ValueError, match=re.escape(f"var of shape {bad} does not fit")):
            F.gaussian_nll_loss(x, t, vtl.ones(bad))


# -- the other losses with a threshold, eps or mask, at their boundary points ----------------
def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _log_sigmoid(x):
    return -np.logaddexp(0, -x)


def _softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


D = np.array([-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0])  # input - target, at +-1 and 0


def _pointwise(fwd, grad):
    """(loss, d loss / d input) of a loss of ``d = input - target`` (target 0)."""
    return lambda x, t: (fwd(x - t), grad(x - t))


# name -> (vtl call on (input, target), inputs, PyTorch's forward and backward formulas,
#          torch call)
BOUNDARY = {
    "huber delta=1": (
        lambda a, b, r: F.huber_loss(a, b, reduction=r, delta=1.0), (D, 0 * D),
        _pointwise(lambda d: np.where(np.abs(d) < 1, 0.5 * d * d, np.abs(d) - 0.5),
                   lambda d: np.where(d <= -1, -1.0, np.where(d >= 1, 1.0, d))),
        lambda tf, a, b, r: tf.huber_loss(a, b, reduction=r, delta=1.0)),
    "huber delta=0.5": (
        lambda a, b, r: F.huber_loss(a, b, reduction=r, delta=0.5), (D, 0 * D),
        _pointwise(lambda d: np.where(np.abs(d) < .5, 0.5 * d * d, .5 * (np.abs(d) - .25)),
                   lambda d: np.where(d <= -.5, -.5, np.where(d >= .5, .5, d))),
        lambda tf, a, b, r: tf.huber_loss(a, b, reduction=r, delta=0.5)),
    "smooth_l1 beta=1": (
        lambda a, b, r: F.smooth_l1_loss(a, b, reduction=r, beta=1.0), (D, 0 * D),
        _pointwise(lambda d: np.where(np.abs(d) < 1, 0.5 * d * d / 1, np.abs(d) - 0.5),
                   lambda d: np.where(d < -1, -1.0, np.where(d > 1, 1.0, d / 1))),
        lambda tf, a, b, r: tf.smooth_l1_loss(a, b, reduction=r, beta=1.0)),
    "smooth_l1 beta=0": (
        lambda a, b, r: F.smooth_l1_loss(a, b, reduction=r, beta=0.0), (D, 0 * D),
        _pointwise(np.abs, np.sign),
        lambda tf, a, b, r: tf.smooth_l1_loss(a, b, reduction=r, beta=0.0)),
    "l1": (
        lambda a, b, r: F.l1_loss(a, b, reduction=r), (D, 0 * D), _pointwise(np.abs, np.sign),
        lambda tf, a, b, r: tf.l1_loss(a, b, reduction=r)),
    "poisson log_input": (
        lambda a, b, r: F.poisson_nll_loss(a, b, True, True, reduction=r),
        (np.array([-1.0, 0.0, 2.0, 0.5, 0.0]), np.array([0.0, 1.0, 0.0, 3.0, 2.0])),
        lambda x, t: (np.exp(x) - t * x + np.where(
            t > 1, t * np.log(np.maximum(t, 1)) - t + 0.5 * np.log(2 * np.pi * np.maximum(t, 1)),
            0), np.exp(x) - t),
        lambda tf, a, b, r: tf.poisson_nll_loss(a, b, True, True, reduction=r)),
    "poisson eps": (
        lambda a, b, r: F.poisson_nll_loss(a, b, False, reduction=r),
        (np.array([0.0, 0.0, 1e-9, 2.0]), np.array([0.0, 1.0, 2.0, 1.0])),
        lambda x, t: (x - t * np.log(x + 1e-8), 1 - t / (x + 1e-8)),
        lambda tf, a, b, r: tf.poisson_nll_loss(a, b, False, reduction=r)),
    "kl_div": (
        lambda a, b, r: F.kl_div(a, b, reduction=r),
        (np.log(np.array([0.2, 0.3, 0.5, 1e-30])), np.array([0.0, 0.5, 0.5, 0.0])),
        lambda x, t: (np.where(t == 0, 0, t * np.log(np.where(t == 0, 1, t))) - t * x, -t),
        lambda tf, a, b, r: tf.kl_div(a, b, reduction=r)),
    "kl_div log_target": (
        lambda a, b, r: F.kl_div(a, b, reduction=r, log_target=True),
        (np.log(np.array([0.2, 0.3, 0.5, 1e-30])), np.array([-50.0, 0.0, -1.0, -2.0])),
        lambda x, t: (np.exp(t) * (t - x), -np.exp(t)),
        lambda tf, a, b, r: tf.kl_div(a, b, reduction=r, log_target=True)),
    "bce_with_logits pos_weight": (
        lambda a, b, r: F.binary_cross_entropy_with_logits(
            a, b, reduction=r, pos_weight=vtl.asarray(np.array([2.0, 0.0, 3.0]), dtype=a.dtype)),
        (np.array([[-40.0, 0.0, 30.0], [1.0, -1.0, 0.0]]),
         np.array([[1.0, 0.5, 0.0], [0.0, 1.0, 1.0]])),
        lambda x, t: (
            (1 - t) * x - (1 + (np.array([2.0, 0.0, 3.0]) - 1) * t) * _log_sigmoid(x),
            (np.array([2.0, 0.0, 3.0]) * t + 1 - t) * _sigmoid(x)
            - np.array([2.0, 0.0, 3.0]) * t),
        lambda tf, a, b, r: tf.binary_cross_entropy_with_logits(
            a, b, reduction=r, pos_weight=a.new_tensor([2.0, 0.0, 3.0]))),
}


def _boundary_inputs(name, dtype):
    _, (x, t), *_ = BOUNDARY[name]
    return x.astype(dtype).astype(np.float64), t.astype(dtype).astype(np.float64)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", sorted(BOUNDARY))
def test_losses_at_boundary_points_follow_pytorchs_formulas(backend, name, reduction, dtype):
    skip_unless_dtype(backend, dtype)
    fn, _, oracle, _ = BOUNDARY[name]
    x, t = _boundary_inputs(name, dtype)
    out, (gx,), v = _grads(lambda a: fn(a, vtl.asarray(t.astype(dtype)), reduction), [x], dtype)
    loss, dx = oracle(x, t)
    assert_close(out, _reduce(loss, reduction).astype(dtype), **_tol(dtype))
    assert_close(gx, (v * dx * _scale(x.shape, reduction)).astype(dtype), **_tol(dtype))


def test_kl_div_negative_target_is_nan_as_xlogy(backend):
    """PyTorch's pointwise term is ``xlogy(t, t) - t x``: 0 at t = 0, nan for t < 0."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # log of a negative number
        out = F.kl_div(vtl.asarray([0.0, -1.0, 0.0]), vtl.asarray([0.0, -0.5, 0.5]),
                       reduction="none")
    assert_close(out, np.array([0.0, np.nan, 0.5 * np.log(0.5)], np.float32))


# cross-entropy: logits (3 rows, 4 classes), one ignored row; weights; label smoothing
CE_X = np.array([[1.0, -2.0, 0.0, 30.0], [0.5, 0.5, 0.5, 0.5], [2.0, 1.0, -1.0, 0.0]])
CE_T = np.array([3, -100, 0])
CE_W = np.array([1.0, 2.0, 0.5, 1.5])


def ce_oracle(x, t, w, eps, reduction, ignore=-100):
    """PyTorch: ``(1 - eps) nll(logp, t, w) + eps / C * smooth``, ``smooth_m = -sum_c w_c
    logp_mc`` (0 where ignored); ``'mean'`` divides both by the total weight ``sum w[t]``
    of the kept rows. Returns the loss and its gradient per logit for ``g = 1``."""
    c = x.shape[1]
    keep = t != ignore
    ts = np.where(keep, t, 0)
    logp = x - x.max(1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(1, keepdims=True))
    p = _softmax(x)
    wt = np.where(keep, w[ts], 0.0)
    nll = -wt * logp[np.arange(len(t)), ts]
    smooth = np.where(keep, -(logp * w).sum(1), 0.0)
    onehot = np.eye(c)[ts]
    g_nll = wt[:, None] * (p - onehot)
    g_smooth = np.where(keep[:, None], p * w.sum() - w, 0.0)
    den = wt.sum() if reduction == "mean" else 1.0
    per = (1 - eps) * nll + eps / c * smooth
    loss = per.sum() / den if reduction != "none" else per
    return loss, ((1 - eps) * g_nll + eps / c * g_smooth) / den


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("eps", [0.0, 0.2])
def test_cross_entropy_with_smoothing_weights_and_ignore(backend, reduction, weighted, eps):
    """Covers the fused ``cross_entropy`` kernel too (unweighted, no smoothing)."""
    w = CE_W if weighted else np.ones(4)
    xt = vtl.asarray(CE_X.astype(np.float32), requires_grad=True)
    out = F.cross_entropy(xt, vtl.asarray(CE_T), vtl.asarray(w.astype(np.float32))
                          if weighted else None, reduction=reduction, label_smoothing=eps)
    loss, gx = ce_oracle(CE_X, CE_T, w, eps, reduction)
    assert_close(out, np.asarray(loss, np.float32), rtol=2e-5, atol=2e-6)
    if reduction == "none":
        vtl.sum(out).backward()
    else:
        out.backward()
    assert_close(xt.grad, gx.astype(np.float32), rtol=2e-5, atol=2e-6)


@pytest.mark.filterwarnings("ignore:.*encountered in divide:RuntimeWarning")  # 0 / 0
def test_cross_entropy_all_ignored_mean_is_nan_with_zero_gradient(backend):
    for eps in (0.0, 0.1):
        xt = vtl.asarray(CE_X.astype(np.float32), requires_grad=True)
        out = F.cross_entropy(xt, vtl.asarray(np.array([-100, -100, -100])),
                              label_smoothing=eps)
        assert np.isnan(float(out))
        out.backward()
        assert_close(xt.grad, np.zeros_like(CE_X, np.float32))


@pytest.mark.filterwarnings("ignore:.*encountered in divide:RuntimeWarning")  # 0 / 0
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("all_ignored", [False, True])
def test_nll_loss_weights_and_ignore(backend, reduction, all_ignored):
    """PyTorch: ``-w[t] x[t]`` per kept row; ``'mean'`` divides by ``sum w[t]``; the gradient
    is ``-w[t] / den`` at the picked entries, 0 elsewhere (also when all rows are ignored)."""
    t = np.full(3, -100) if all_ignored else CE_T
    keep = t != -100
    ts = np.where(keep, t, 0)
    wt = np.where(keep, CE_W[ts], 0.0)
    per = -wt * CE_X[np.arange(3), ts]
    den = wt.sum() if reduction == "mean" else 1.0
    out, (gx,), v = _grads(lambda a: F.nll_loss(a, vtl.asarray(t), vtl.asarray(
        CE_W.astype(np.float32)), reduction=reduction), [CE_X], "float32")
    with np.errstate(invalid="ignore", divide="ignore"):
        loss = per if reduction == "none" else per.sum() / den
        expect = np.zeros_like(CE_X)
        expect[np.arange(3), ts] = np.where(keep, -wt / den, 0.0) * v
    assert_close(out, np.asarray(loss, np.float32), rtol=2e-5, atol=2e-6)
    assert_close(gx, expect.astype(np.float32), rtol=2e-5, atol=2e-6)
    if all_ignored and reduction == "mean":
        assert np.isnan(float(out))


# -- against CPU PyTorch itself --------------------------------------------------------------
def _torch_run(torch, fn, arrays, dtype, v):
    ts = [torch.tensor(a.astype(dtype), requires_grad=True) for a in arrays]
    out = fn(*ts)
    (out * torch.tensor(v.astype(dtype))).sum().backward()
    return out.detach().numpy(), [t.grad.numpy() for t in ts]


def _compare(out, grads, t_out, t_grads, dtype):
    assert_close(out, t_out, **_tol(dtype))
    for g, tg in zip(grads, t_grads, strict=True):
        assert_close(g, tg, **_tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_bce_matches_torch(backend, dtype, reduction):
    torch = pytest.importorskip("torch")
    skip_unless_dtype(backend, dtype)
    x = BCE_X.astype(dtype).astype(np.float64)
    w = BCE_W.astype(dtype)
    out, grads, v = _grads(lambda a, b: F.binary_cross_entropy(a, b, vtl.asarray(w),
                                                               reduction=reduction),
                           [x, BCE_T], dtype)
    t_out, t_grads = _torch_run(torch, lambda a, b: torch.nn.functional.binary_cross_entropy(
        a, b, torch.tensor(w), reduction=reduction), [x, BCE_T], dtype, v)
    _compare(out, grads, t_out, t_grads, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("full", [False, True])
@pytest.mark.parametrize("shape", sorted(GVARS))
def test_gaussian_nll_matches_torch(backend, dtype, reduction, full, shape):
    torch = pytest.importorskip("torch")
    skip_unless_dtype(backend, dtype)
    arrays = [GX, GT, GVARS[shape]]
    out, grads, v = _grads(lambda a, b, c: F.gaussian_nll_loss(a, b, c, full,
                                                               reduction=reduction),
                           arrays, dtype)
    t_out, t_grads = _torch_run(torch, lambda a, b, c: torch.nn.functional.gaussian_nll_loss(
        a, b, c, full, reduction=reduction), arrays, dtype, v)
    _compare(out, grads, t_out, t_grads, dtype)


@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides:UserWarning")  # torch's kl_div
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", sorted(BOUNDARY))
def test_losses_at_boundary_points_match_torch(backend, name, reduction, dtype):
    torch = pytest.importorskip("torch")
    skip_unless_dtype(backend, dtype)
    fn, _, _, tfn = BOUNDARY[name]
    x, t = _boundary_inputs(name, dtype)
    tt = torch.tensor(t.astype(dtype))
    out, grads, v = _grads(lambda a: fn(a, vtl.asarray(t.astype(dtype)), reduction), [x], dtype)
    t_out, t_grads = _torch_run(
        torch, lambda a: tfn(torch.nn.functional, a, tt, reduction), [x], dtype, v)
    _compare(out, grads, t_out, t_grads, dtype)


@pytest.mark.filterwarnings("ignore:.*encountered in divide:RuntimeWarning")  # 0 / 0
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("eps", [0.0, 0.2])
@pytest.mark.parametrize("all_ignored", [False, True])
def test_cross_entropy_matches_torch(backend, reduction, weighted, eps, all_ignored):
    torch = pytest.importorskip("torch")
    t = np.full(3, -100) if all_ignored else CE_T
    w = CE_W.astype(np.float32)
    vw = vtl.asarray(w) if weighted else None
    tw = torch.tensor(w) if weighted else None
    out, grads, v = _grads(lambda a: F.cross_entropy(
        a, vtl.asarray(t), vw, reduction=reduction, label_smoothing=eps), [CE_X], "float32")
    t_out, t_grads = _torch_run(torch, lambda a: torch.nn.functional.cross_entropy(
        a, torch.tensor(t), tw, reduction=reduction, label_smoothing=eps), [CE_X], "float32", v)
    _compare(out, grads, t_out, t_grads, "float32")
