"""Normalisation: layer/batch/group/instance norm against NumPy loop references,
running statistics (unbiased variance, momentum, cumulative average), train/eval
behaviour, float64 finite-difference gradients of the functions and layers,
state dicts, default inits, errors naming the layer and shapes,
array-api-strict inputs and PyTorch as an extra oracle."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from helpers import assert_close, check_grad, check_grad_matches_numpy, skip_unless_dtype, to_numpy

import vtl
import vtl.nn.functional as F
from vtl import nn

try:
    import torch
except ImportError:  # pragma: no cover - torch is optional
    torch = None

RNG = np.random.default_rng(7)


def _rand(*shape, dtype="float64"):
    return RNG.standard_normal(shape).astype(dtype)


# -- NumPy references: explicit loops over the normalised groups -----------------------------
def _norm_vec(v, eps):
    v = v.astype(np.float64)
    mean = sum(v) / len(v)
    var = sum((a - mean) ** 2 for a in v) / len(v)
    return (v - mean) / np.sqrt(var + eps), mean, var


def np_layer_norm(x, k, w=None, b=None, eps=1e-5):
    lead, tail = x.shape[:x.ndim - k], x.shape[x.ndim - k:]
    out = np.zeros(x.shape, np.float64)
    for idx in np.ndindex(*lead):
        out[idx] = _norm_vec(x[idx].reshape(-1), eps)[0].reshape(tail)
    if w is not None:
        out = out * w
    if b is not None:
        out = out + b
    return out.astype(x.dtype)


def np_batch_norm_train(x, eps=1e-5):
    """Normalised values plus the per-channel batch mean and biased variance."""
    c = x.shape[1]
    out = np.zeros(x.shape, np.float64)
    means, variances = np.zeros(c), np.zeros(c)
    for ch in range(c):
        vals = x[:, ch].reshape(-1)
        z, means[ch], variances[ch] = _norm_vec(vals, eps)
        out[:, ch] = z.reshape(x[:, ch].shape)
    return out, means, variances


def np_group_norm(x, g, eps=1e-5):
    n, c = x.shape[:2]
    out = np.zeros(x.shape, np.float64)
    per = c // g
    for b in range(n):
        for gi in range(g):
            block = x[b, gi * per:(gi + 1) * per]
            out[b, gi * per:(gi + 1) * per] = _norm_vec(block.reshape(-1), eps)[0].reshape(
                block.shape)
    return out


def _bshape(v, ndim):
    return v.reshape((1, -1) + (1,) * (ndim - 2))


# -- functional -------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,k", [((4, 5), 1), ((2, 3, 4), 2), ((3, 2, 2, 3), 3), ((6,), 1)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_layer_norm_matches_loops(backend, shape, k, dtype):
    skip_unless_dtype(backend, dtype)
    x = _rand(*shape, dtype=dtype)
    ns = shape[len(shape) - k:]
    w, b = _rand(*ns, dtype=dtype), _rand(*ns, dtype=dtype)
    tol = {"rtol": 1e-4, "atol": 1e-5} if dtype == "float32" else {}
    assert_close(F.layer_norm(vtl.asarray(x), ns, vtl.asarray(w), vtl.asarray(b)),
                 np_layer_norm(x, k, w, b), **tol)
    assert_close(F.layer_norm(vtl.asarray(x), ns, eps=0.5), np_layer_norm(x, k, eps=0.5), **tol)


@pytest.mark.parametrize("shape", [(5, 3), (4, 3, 6), (3, 2, 4, 5)])
def test_batch_norm_training_and_running_stats(backend, shape):
    x = _rand(*shape)
    c = shape[1]
    w, b = _rand(c), _rand(c)
    rm0, rv0 = _rand(c), RNG.random(c) + 0.5
    rm, rv = vtl.asarray(rm0.copy()), vtl.asarray(rv0.copy())
    out = F.batch_norm(vtl.asarray(x), rm, rv, vtl.asarray(w), vtl.asarray(b), training=True,
                       momentum=0.3)
    ref, mean, var = np_batch_norm_train(x)
    assert_close(out, ref * _bshape(w, x.ndim) + _bshape(b, x.ndim))
    n = x.size // c
    assert_close(rm, 0.7 * rm0 + 0.3 * mean)
    assert_close(rv, 0.7 * rv0 + 0.3 * var * n / (n - 1))  # unbiased running variance
    # eval mode uses (and does not change) the running statistics
    before = to_numpy(rm).copy()
    out = F.batch_norm(vtl.asarray(x), rm, rv, vtl.asarray(w), vtl.asarray(b), training=False)
    ref = (x - _bshape(before, x.ndim)) / np.sqrt(_bshape(to_numpy(rv), x.ndim) + 1e-5)
    assert_close(out, ref * _bshape(w, x.ndim) + _bshape(b, x.ndim))
    assert_close(rm, before)
    # training without running statistics
    assert_close(F.batch_norm(vtl.asarray(x), None, None, training=True),
                 np_batch_norm_train(x)[0])


def test_batch_norm_float32_running_stats_and_grad_free_update(backend):
    x = vtl.asarray(_rand(4, 3, dtype="float32"), requires_grad=True)
    rm, rv = vtl.zeros(3), vtl.ones(3)
    out = F.batch_norm(x, rm, rv, training=True)
    assert not rm.requires_grad and not rv.requires_grad and rm.dtype == vtl.float32
    vtl.sum(out * out).backward()  # the in-place update did not enter the graph
    assert x.grad.shape == (4, 3)


@pytest.mark.parametrize("groups", [1, 2, 4])
def test_group_norm_matches_loops(backend, groups):
    x = _rand(3, 4, 2, 3)
    w, b = _rand(4), _rand(4)
    ref = np_group_norm(x, groups) * _bshape(w, 4) + _bshape(b, 4)
    assert_close(F.group_norm(vtl.asarray(x), groups, vtl.asarray(w), vtl.asarray(b)), ref)
    assert_close(F.group_norm(vtl.asarray(x[..., 0]), groups), np_group_norm(x[..., 0], groups))


@pytest.mark.parametrize("shape", [(0, 6, 4), (0, 6), (2, 6, 0)])
def test_group_norm_of_no_elements(backend, shape):
    """As PyTorch: an empty input gives an empty output of its shape, zero parameter
    gradients and no warnings (no statistics of empty groups are taken)."""
    x = vtl.asarray(np.zeros(shape, np.float32), requires_grad=True)
    w, b = (vtl.asarray(np.ones(6, np.float32), requires_grad=True) for _ in range(2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = F.group_norm(x, 2, w, b)
        vtl.sum(y).backward()
    assert y.shape == shape and x.grad.shape == shape
    assert_close(w.grad, np.zeros(6, np.float32))
    assert_close(b.grad, np.zeros(6, np.float32))


def test_instance_norm_matches_loops(backend):
    x = _rand(3, 2, 4, 5)
    ref = np.stack([np_group_norm(x[i:i + 1], 2)[0] for i in range(3)])  # 1 channel per group
    rm, rv = vtl.zeros(2, dtype=vtl.float64), vtl.ones(2, dtype=vtl.float64)
    assert_close(F.instance_norm(vtl.asarray(x), rm, rv), ref)
    per = x.reshape(3, 2, -1)
    assert_close(rm, 0.1 * per.mean(axis=2).mean(axis=0))
    assert_close(rv, 0.9 + 0.1 * per.var(axis=2, ddof=1).mean(axis=0))


def test_norm_gradients_finite_differences():
    x = _rand(3, 4, 2, 2)
    w, b = _rand(4), _rand(4)
    check_grad(lambda x, w, b: F.layer_norm(x, (2, 2), w, b), x, _rand(2, 2), _rand(2, 2))
    check_grad(lambda x, w, b: F.layer_norm(x, (4, 2, 2), None, None), x, w, b)
    check_grad(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), x, w, b)
    check_grad(lambda x, w, b: F.group_norm(x, 2, w, b), x, w, b)
    check_grad(lambda x: F.instance_norm(x), x)
    rm, rv = _rand(4), RNG.random(4) + 0.5
    check_grad(lambda x, w, b, m, v: F.batch_norm(x, m, v, w, b, training=False), x, w, b,
               rm, rv)


def test_layer_norm_second_order_gradients():
    def g(x):
        if not x.requires_grad:
            x = vtl.asarray(x, requires_grad=True)
        y = F.layer_norm(x, (3,))
        (gx,) = vtl.autograd.grad(vtl.sum(y * y * vtl.asarray(np.arange(3.0))), [x],
                                  create_graph=True)
        return gx

    check_grad(g, _rand(2, 3))


def _second_order_node_vs_composite(monkeypatch, backend, node_fn, f, xs, ws):
    """Second-order gradients of ``f(x, w)`` (float64) through the one-node rule (the
    normalization module's ``node_fn``) equal those through the composite it replaces."""
    from vtl.nn.functional import normalization as norm

    def second(x, w):
        y = f(x, w)
        gx, gw = vtl.autograd.grad(vtl.sum(y * y * y), [x, w], create_graph=True)
        return vtl.sum(gx * gx) + vtl.sum(gw * vtl.cos(gw))

    res = []
    for node in (True, False):
        with monkeypatch.context() as m:
            if not node:
                m.setattr(norm, node_fn, lambda *a, **k: None)
            x = vtl.asarray(xs, backend=backend, requires_grad=True)
            w = vtl.asarray(ws, backend=backend, requires_grad=True)
            res.append([to_numpy(t) for t in vtl.autograd.grad(second(x, w), [x, w])])
    for a, r in zip(*res, strict=True):
        np.testing.assert_allclose(a, r, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_group_norm_one_node_equals_the_composite(backend, monkeypatch, dtype):
    """group_norm as one graph node (rows normalised by the backend's layer_norm kernel where
    it has one) against the composite of array-API ops it replaces: values, every gradient
    with each of weight and bias present or not, a channels-last input, and second-order
    gradients through the node's vtl-function rule."""
    from vtl.nn.functional import normalization as norm

    skip_unless_dtype(backend, dtype)
    tol = {"rtol": 1e-10, "atol": 1e-10} if dtype == "float64" else {"rtol": 1e-4, "atol": 1e-5}
    xs = _rand(3, 6, 5, 4, dtype=dtype)
    ws, bs = _rand(6, dtype=dtype), _rand(6, dtype=dtype)
    v = np.cos(np.arange(xs.size)).reshape(xs.shape).astype(dtype)

    def run(affine, channels_last):
        x = vtl.asarray(np.ascontiguousarray(xs.transpose(0, 2, 3, 1)) if channels_last
                        else xs, backend=backend)
        if channels_last:
            x = vtl.permute_dims(x, (0, 3, 1, 2))
        x.requires_grad_()
        w = vtl.asarray(ws, backend=backend, requires_grad=True) if "w" in affine else None
        b = vtl.asarray(bs, backend=backend, requires_grad=True) if "b" in affine else None
        y = F.group_norm(x, 3, w, b)
        vtl.sum(y * vtl.asarray(v, backend=backend)).backward()
        return y, [to_numpy(t) for t in (y, x.grad, w.grad if w is not None else None,
                                          b.grad if b is not None else None) if t is not None]

    for affine in ("wb", "w", "b", ""):
        for channels_last in (False, True):
            y, got = run(affine, channels_last)
            assert y._grad_fn._name == "GroupNormBackward"
            with monkeypatch.context() as m:
                m.setattr(norm, "_group_norm_tensor", lambda *a: None)
                y2, want = run(affine, channels_last)
            assert y2._grad_fn._name != "GroupNormBackward"
            for a, r in zip(got, want, strict=True):
                np.testing.assert_allclose(a, r, **tol)

    if dtype == "float64":  # float32 second derivatives of a cubic: rounding, not the rule
        _second_order_node_vs_composite(monkeypatch, backend, "_group_norm_tensor",
                                        lambda x, w: F.group_norm(x, 3, w, None), xs, ws)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_rms_norm_one_node_equals_the_composite(backend, monkeypatch, dtype):
    """rms_norm as one graph node against the composite of array-API ops it replaces:
    values and gradients with and without a weight, over one and two trailing axes, and
    second-order gradients through the node's vtl-function rule."""
    from vtl.nn.functional import normalization as norm

    skip_unless_dtype(backend, dtype)
    tol = {"rtol": 1e-10, "atol": 1e-10} if dtype == "float64" else {"rtol": 1e-4, "atol": 1e-5}
    xs = _rand(4, 3, 6, dtype=dtype)
    v = np.sin(np.arange(xs.size)).reshape(xs.shape).astype(dtype)

    def run(shape, weighted, eps):
        x = vtl.asarray(xs, backend=backend, requires_grad=True)
        ws = np.linspace(0.5, 2, math.prod(shape)).reshape(shape).astype(dtype)
        w = vtl.asarray(ws, backend=backend, requires_grad=True) if weighted else None
        y = F.rms_norm(x, shape, w, eps)
        vtl.sum(y * vtl.asarray(v, backend=backend)).backward()
        return y, [to_numpy(t) for t in (y, x.grad, None if w is None else w.grad)
                   if t is not None]

    kern = vtl.backends.get(backend).kernel("layer_norm")
    fused = kern is not None and getattr(kern, "takes_rms", False) and kern.supports(
        np.dtype(dtype))
    calls = []
    if fused:  # the backend's layer_norm kernel runs both ways in its rms mode
        for way in ("forward", "backward"):
            def spy(*a, _f=getattr(kern, way), _w=way, **kw):
                calls.append((_w, kw.get("rms")))
                return _f(*a, **kw)

            monkeypatch.setattr(kern, way, spy)
    for shape in ((6,), (3, 6)):
        for weighted in (True, False):
            for eps in (None, 0.1):
                calls.clear()
                y, got = run(shape, weighted, eps)
                assert y._grad_fn._name == "RmsNormBackward"
                assert calls == ([("forward", True), ("backward", True)] if fused else [])
                with monkeypatch.context() as m:
                    m.setattr(norm, "_layer_norm_tensor", lambda *a, **k: None)
                    y2, want = run(shape, weighted, eps)
                assert y2._grad_fn._name != "RmsNormBackward"
                for a, r in zip(got, want, strict=True):
                    np.testing.assert_allclose(a, r, **tol)
    if dtype == "float64":
        _second_order_node_vs_composite(monkeypatch, backend, "_layer_norm_tensor",
                                        lambda x, w: F.rms_norm(x, (6,), w), xs,
                                        np.linspace(0.5, 2, 6))


def test_norm_gradients_match_numpy_backend(backend):
    x, w, b = _rand(3, 4, 2, 2), _rand(4), _rand(4)
    check_grad_matches_numpy(lambda x, w, b: F.batch_norm(x, None, None, w, b, True), backend,
                             x, w, b)
    check_grad_matches_numpy(lambda x, w, b: F.group_norm(x, 2, w, b), backend, x, w, b)
    check_grad_matches_numpy(lambda x: F.layer_norm(x, (2, 2)), backend, x)
    w2, b2 = _rand(2, 2), _rand(2, 2)
    # weight and bias (one column sum for both gradients on wgpu), and each alone
    check_grad_matches_numpy(lambda x, w, b: F.layer_norm(x, (2, 2), w, b), backend, x, w2, b2)
    check_grad_matches_numpy(lambda x, w: F.layer_norm(x, (2, 2), w), backend, x, w2)
    check_grad_matches_numpy(lambda x, b: F.layer_norm(x, (2, 2), None, b), backend, x, b2)


def test_norm_functional_errors(backend):
    x = vtl.asarray(_rand(2, 3, 4))
    with pytest.raises(ValueError, match=r"layer_norm\(\): input of shape \(2, 3, 4\) does not "
                                         r"end with normalized_shape \(3,\)"):
        F.layer_norm(x, (3,))
    with pytest.raises(ValueError, match="weight must have shape"):
        F.layer_norm(x, (4,), vtl.ones(3))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        F.batch_norm(vtl.ones((1, 3)), None, None, training=True)
    with pytest.raises(ValueError, match=r"running_mean must have shape \(3,\)"):
        F.batch_norm(x, vtl.zeros(4), vtl.ones(3), training=True)
    with pytest.raises(ValueError, match="required in eval mode"):
        F.batch_norm(x, None, None, training=False)
    with pytest.raises(ValueError, match=r"3 channels of input shape \(2, 3, 4\) are not "
                                         r"divisible into num_groups=2"):
        F.group_norm(x, 2)
    with pytest.raises(TypeError, match="real floating-point"):
        F.layer_norm(vtl.ones((2, 3), dtype=vtl.int32), (3,))


# -- modules ----------------------------------------------------------------------------------
def test_batchnorm_module_train_eval_and_state_dict(backend):
    m = nn.BatchNorm2d(3)
    assert list(m.state_dict()) == ["weight", "bias", "running_mean", "running_var",
                                    "num_batches_tracked"]
    assert_close(m.weight, np.ones(3, np.float32))
    assert_close(m.bias, np.zeros(3, np.float32))
    assert_close(m.running_var, np.ones(3, np.float32))
    xs = [_rand(4, 3, 2, 2, dtype="float32") for _ in range(3)]
    rm, rv = np.zeros(3), np.ones(3)
    for x in xs:
        out = m(vtl.asarray(x))
        ref, mean, var = np_batch_norm_train(x)
        assert_close(out, ref.astype(np.float32), rtol=1e-4, atol=1e-5)
        rm, rv = 0.9 * rm + 0.1 * mean, 0.9 * rv + 0.1 * var * 16 / 15
    assert int(m.num_batches_tracked) == 3
    assert_close(m.running_mean, rm.astype(np.float32), rtol=1e-5, atol=1e-6)
    assert_close(m.running_var, rv.astype(np.float32), rtol=1e-5, atol=1e-6)
    m.eval()
    x = xs[0]
    ref = (x - _bshape(rm, 4)) / np.sqrt(_bshape(rv, 4) + 1e-5)
    assert_close(m(vtl.asarray(x)), ref.astype(np.float32), rtol=1e-4, atol=1e-5)
    assert int(m.num_batches_tracked) == 3  # eval does not count
    m2 = nn.BatchNorm2d(3)
    m2.load_state_dict(m.state_dict())
    m2.eval()
    assert_close(m2(vtl.asarray(x)), to_numpy(m(vtl.asarray(x))))
    assert int(m2.num_batches_tracked) == 3
    assert "BatchNorm2d(3, eps=1e-05, momentum=0.1" in repr(m)


def test_batchnorm_cumulative_average_and_no_tracking(backend):
    m = nn.BatchNorm1d(2, momentum=None, affine=False).double()
    assert list(m.parameters()) == []
    batches = [_rand(5, 2) for _ in range(3)]
    for x in batches:
        m(vtl.asarray(x))
    means = [x.mean(axis=0) for x in batches]
    assert_close(m.running_mean, np.mean(means, axis=0))  # 1/n weights: the plain average
    m.eval()
    m3 = nn.BatchNorm1d(2, track_running_stats=False).double()
    assert m3.running_mean is None and list(m3.state_dict()) == ["weight", "bias"]
    m3.eval()  # no running statistics: batch statistics even in eval mode
    x = _rand(6, 2, 3)
    assert_close(m3(vtl.asarray(x)), np_batch_norm_train(x)[0])
    m.reset_running_stats()
    assert int(m.num_batches_tracked) == 0 and float(vtl.sum(m.running_var)) == 2.0


def test_norm_module_errors_name_the_layer(backend):
    with pytest.raises(ValueError, match=r"BatchNorm2d\(3\): expected a 4-D \(N, C, H, W\) "
                                         r"input, got input of shape \(2, 3\)"):
        nn.BatchNorm2d(3)(vtl.ones((2, 3)))
    with pytest.raises(ValueError, match=r"BatchNorm1d\(3\): expected 3 channels \(axis 1\), "
                                         r"got input of shape \(2, 4, 5\)"):
        nn.BatchNorm1d(3)(vtl.ones((2, 4, 5)))
    with pytest.raises(ValueError, match=r"BatchNorm1d\(3\): .*more than 1 value"):
        nn.BatchNorm1d(3)(vtl.ones((1, 3)))
    with pytest.raises(ValueError, match=r"LayerNorm\(\(4,\)\): expected an input ending with "
                                         r"shape \(4,\), got input of shape \(2, 3\)"):
        nn.LayerNorm(4)(vtl.ones((2, 3)))
    with pytest.raises(ValueError, match=r"GroupNorm\(2, 4\): expected an input of shape "
                                         r"\(N, 4, \*\), got input of shape \(2, 3, 5\)"):
        nn.GroupNorm(2, 4)(vtl.ones((2, 3, 5)))
    with pytest.raises(ValueError, match="divisible"):
        nn.GroupNorm(3, 4)


def test_layer_and_group_norm_modules(backend):
    ln = nn.LayerNorm((2, 3), eps=1e-3)
    assert list(ln.state_dict()) == ["weight", "bias"] and ln.weight.shape == (2, 3)
    x = _rand(4, 2, 3, dtype="float32")
    assert_close(ln(vtl.asarray(x)), np_layer_norm(x, 2, eps=1e-3), rtol=1e-4, atol=1e-5)
    assert nn.LayerNorm(3, bias=False).bias is None
    assert nn.LayerNorm(3, elementwise_affine=False).weight is None
    gn = nn.GroupNorm(2, 4)
    x = _rand(2, 4, 3, dtype="float32")
    assert_close(gn(vtl.asarray(x)), np_group_norm(x, 2).astype(np.float32), rtol=1e-4,
                 atol=1e-5)
    gn2 = nn.GroupNorm(2, 4)
    with vtl.no_grad():
        gn.weight[...] = vtl.asarray(_rand(4, dtype="float32"))
    gn2.load_state_dict(gn.state_dict())
    assert_close(gn2(vtl.asarray(x)), to_numpy(gn(vtl.asarray(x))))


def _module_grad(m, x, eps=1e-6):
    """Finite differences of ``sum(m(x) * v)`` for the input and every parameter."""
    params = list(m.parameters())
    xt = vtl.asarray(x.copy(), requires_grad=True)
    out = m(xt)
    v = np.random.default_rng(0).standard_normal(out.shape)
    grads = vtl.autograd.grad(vtl.sum(out * vtl.asarray(v)), [xt, *params])
    targets = [("x", x)] + [("p", p) for p in params]
    for (kind, t), g in zip(targets, grads, strict=True):
        host = x if kind == "x" else t.numpy().copy()
        flat = host.reshape(-1)
        num = np.zeros(flat.size)
        for j in range(flat.size):
            vals = []
            for sgn in (1, -1):
                orig = flat[j]
                flat[j] = orig + sgn * eps
                if kind == "p":
                    with vtl.no_grad():
                        t[...] = vtl.asarray(host)
                with vtl.no_grad():
                    vals.append(float(vtl.sum(m(vtl.asarray(x.copy())) * vtl.asarray(v))))
                flat[j] = orig
            if kind == "p":
                with vtl.no_grad():
                    t[...] = vtl.asarray(host)
            num[j] = (vals[0] - vals[1]) / (2 * eps)
        np.testing.assert_allclose(to_numpy(g).reshape(-1), num, rtol=1e-5, atol=1e-6)


def test_norm_module_gradients():
    bn = nn.BatchNorm2d(2, track_running_stats=False).double()
    with vtl.no_grad():
        bn.weight[...] = vtl.asarray(_rand(2))
    _module_grad(bn, _rand(3, 2, 2, 2))
    bn_eval = nn.BatchNorm1d(3).double().eval()
    with vtl.no_grad():
        bn_eval.running_mean[...] = vtl.asarray(_rand(3))
    _module_grad(bn_eval, _rand(4, 3))
    _module_grad(nn.LayerNorm((2, 3)).double(), _rand(2, 2, 3))
    _module_grad(nn.GroupNorm(2, 4).double(), _rand(2, 4, 3))


# -- array-api-strict and PyTorch ------------------------------------------------------------------
xs = pytest.importorskip("array_api_strict")

STRICT_CASES = {
    "layer_norm": lambda x, rm, rv: F.layer_norm(x, (4, 5)),
    "group_norm": lambda x, rm, rv: F.group_norm(x, 1),
    "batch_norm_train": lambda x, rm, rv: F.batch_norm(x, rm, rv, training=True),
    "batch_norm_eval": lambda x, rm, rv: F.batch_norm(x, rm, rv, training=False),
    "instance_norm": lambda x, rm, rv: F.instance_norm(x),
}


@pytest.mark.parametrize("name", sorted(STRICT_CASES))
def test_norm_on_array_api_strict(name):
    dev = xs.Device("no_x64")
    x_np = _rand(2, 3, 4, 5, dtype="float32")
    rm_np, rv_np = _rand(3, dtype="float32"), np.full(3, 2.0, np.float32)
    rm, rv = xs.asarray(rm_np.copy(), device=dev), xs.asarray(rv_np.copy(), device=dev)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = STRICT_CASES[name](xs.asarray(x_np, device=dev), rm, rv)
    assert out.device == dev
    host = np.asarray(out.to_device(xs.Device("CPU_DEVICE")))
    vrm, vrv = vtl.asarray(rm_np.copy(), backend="numpy"), vtl.asarray(rv_np.copy(),
                                                                       backend="numpy")
    expect = to_numpy(STRICT_CASES[name](vtl.asarray(x_np, backend="numpy"), vrm, vrv))
    np.testing.assert_allclose(host, expect, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(rm.to_device(xs.Device("CPU_DEVICE"))),
                               to_numpy(vrm), rtol=1e-6)


@pytest.mark.skipif(torch is None, reason="PyTorch not installed")
def test_against_pytorch():
    x = _rand(4, 3, 5)
    for tm, vm in ((torch.nn.BatchNorm1d(3, momentum=0.2), nn.BatchNorm1d(3, momentum=0.2)),
                   (torch.nn.GroupNorm(3, 3), nn.GroupNorm(3, 3)),
                   (torch.nn.LayerNorm((3, 5)), nn.LayerNorm((3, 5)))):
        tm, vm = tm.double(), vm.double()
        vm.load_state_dict({k: v.numpy() for k, v in tm.state_dict().items()})
        for _ in range(2):
            assert_close(vm(vtl.asarray(x)), tm(torch.tensor(x)).detach().numpy())
        for k, v in tm.state_dict().items():
            assert_close(vm.state_dict()[k], v.numpy())
        tm.eval()
        vm.eval()
        assert_close(vm(vtl.asarray(x)), tm(torch.tensor(x)).detach().numpy())


@pytest.mark.parametrize("shape,k", [((7, 5), 1), ((3, 4, 300), 1), ((2, 3, 4, 6), 2), ((1, 1), 1)])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_kernel_equals_the_portable_path(backend, shape, k, affine, monkeypatch):
    """The backend's fused layer_norm (one graph node, one launch each way) against the
    portable rows, values and every gradient."""
    b = vtl.backends.get(backend)
    if b.kernel("layer_norm") is None:
        pytest.skip(f"{backend} has no layer_norm kernel")
    x = _rand(*shape)
    ns = shape[len(shape) - k:]
    w, bias = (_rand(*ns), _rand(*ns)) if affine else (None, None)
    g = _rand(*shape)

    def run():
        xt = vtl.asarray(x, requires_grad=True)
        wt = None if w is None else vtl.asarray(w, requires_grad=True)
        bt = None if bias is None else vtl.asarray(bias, requires_grad=True)
        y = F.layer_norm(xt, ns, wt, bt, eps=1e-3)
        assert y._grad_fn.name() == "LayerNormBackward"
        y.backward(vtl.asarray(g))
        return [to_numpy(t) for t in (y, xt.grad, *(() if w is None else (wt.grad, bt.grad)))]

    fused = run()
    monkeypatch.delitem(b._kernels, "layer_norm")
    portable = run()
    for a, p in zip(fused, portable, strict=True):
        assert_close(a, p, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(fused[0], np_layer_norm(x, k, w, bias, eps=1e-3), rtol=1e-4,
                               atol=1e-5)
