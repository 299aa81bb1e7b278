"""``nn.functional.linear_relu`` (``relu(linear(x, w, b))`` as one op, the ReLU in the
product's epilogue on the GPU backends) against the two ops it replaces, on every backend:
values and gradients bit for bit (nan, negative and zero products, no bias, batched inputs,
a transposed weight), float64 finite differences, higher-order gradients, the in-place
check on its saved output; and the modules that use it (``Sequential``'s ``Linear`` +
``ReLU`` pairs, the Transformer layers' feed-forward blocks) against their unfused
forms."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import check_grad, skip_unless_dtype, to_numpy

import vtl
from vtl import nn
from vtl.nn import functional as F


def _grads(fn, x, w, b, seed):
    ts = [vtl.asarray(a, requires_grad=True) if a is not None else None for a in (x, w, b)]
    out = fn(*ts)
    g = vtl.asarray(np.random.default_rng(seed).standard_normal(out.shape).astype(x.dtype))
    vtl.sum(out * g).backward()
    return [to_numpy(out)] + [to_numpy(t.grad) for t in ts if t is not None]


def _unfused(x, w, b):
    return F.relu(F.linear(x, w, b))


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize(("lead", "k", "n", "bias"), [
    ((1,), 1, 1, True), ((7,), 5, 9, True), ((37,), 20, 70, False), ((2, 3, 5), 8, 6, True),
    ((130,), 33, 150, True)])
def test_linear_relu_is_relu_of_linear(backend, dt, lead, k, n, bias):
    skip_unless_dtype(backend, dt)
    rng = np.random.default_rng(k * n)
    x = rng.standard_normal((*lead, k)).astype(dt)
    w = rng.standard_normal((n, k)).astype(dt)
    b = rng.standard_normal(n).astype(dt) if bias else None
    x.reshape(-1, k)[0, 0] = np.nan  # a row of nan products: passes through, gradient too
    got = _grads(F.linear_relu, x, w, b, 1)
    want = _grads(_unfused, x, w, b, 1)
    assert got[0].dtype == dt and got[0].shape == (*lead, n)
    if got[0].size > 8:
        assert (got[0] == 0).any() and (got[0] > 0).any()
    for a, r in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, r)


def test_linear_relu_records_one_node(backend):
    x = vtl.asarray(np.ones((2, 3), np.float32), requires_grad=True)
    w = vtl.asarray(np.ones((4, 3), np.float32))
    y = F.linear_relu(x, w, None)
    assert y.grad_fn.name() == "LinearReluBackward"


def test_linear_relu_transposed_weight(backend):
    rng = np.random.default_rng(5)
    x = vtl.asarray(rng.standard_normal((6, 4)).astype(np.float32))
    wt = vtl.asarray(rng.standard_normal((4, 9)).astype(np.float32))
    w = vtl.matrix_transpose(wt)  # a strided view
    b = vtl.asarray(rng.standard_normal(9).astype(np.float32))
    np.testing.assert_array_equal(to_numpy(F.linear_relu(x, w, b)),
                                  to_numpy(_unfused(x, w, b)))


def test_linear_relu_gradient_against_finite_differences():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((4, 3))
    w = rng.standard_normal((5, 3))
    b = rng.standard_normal(5)
    # products kept away from the kink, where finite differences would cross it
    b += np.where(np.abs(x @ w.T + b).min(axis=0) < 0.1, 0.5, 0.0)
    assert (x @ w.T + b < 0).any()
    check_grad(F.linear_relu, x, w, b)


def test_linear_relu_second_order(backend):
    skip_unless_dtype(backend, np.float64)
    rng = np.random.default_rng(9)
    args = [rng.standard_normal(s) for s in ((3, 4), (2, 4), (2,))]

    def second(fn):
        x, w, b = (vtl.asarray(a, requires_grad=True) for a in args)
        (gx,) = vtl.autograd.grad(vtl.sum(fn(x, w, b) ** 2), (x,), create_graph=True)
        (gw,) = vtl.autograd.grad(vtl.sum(gx * gx), (w,))
        return to_numpy(gx), to_numpy(gw)

    for a, r in zip(second(F.linear_relu), second(_unfused), strict=True):
        np.testing.assert_allclose(a, r, rtol=1e-12, atol=1e-12)


def test_linear_relu_output_changed_in_place_raises(backend):
    x = vtl.asarray(np.ones((2, 3), np.float32), requires_grad=True)
    w = vtl.asarray(np.ones((4, 3), np.float32))
    y = F.linear_relu(x, w, None)
    y.mul_(2.0)
    with pytest.raises(RuntimeError, match="in-?place"):
        vtl.sum(y).backward()


def test_linear_relu_on_arrays_without_tensors():
    x = np.array([[1.0, -2.0]])
    w = np.array([[1.0, 1.0], [1.0, -1.0]])
    out = F.linear_relu(x, w, np.array([0.5, 0.0]))
    np.testing.assert_array_equal(np.asarray(out), [[0.0, 3.0]])


def test_linear_relu_under_autocast(backend):
    skip_unless_dtype(backend, np.float16)
    rng = np.random.default_rng(2)
    x, w, b = (vtl.asarray(rng.standard_normal(s).astype(np.float32))
               for s in ((5, 8), (6, 8), (6,)))
    with vtl.autocast(backend, dtype=vtl.float16):
        got = F.linear_relu(x, w, b)
        want = _unfused(x, w, b)
    assert got.dtype == vtl.float16
    np.testing.assert_array_equal(to_numpy(got), to_numpy(want))


def _node_names(t):
    seen, stack, names = set(), [t.grad_fn], []
    while stack:
        node = stack.pop()
        if not isinstance(node, vtl.autograd.graph.Node) or id(node) in seen:
            continue
        seen.add(id(node))
        names.append(node.name())
        stack.extend(f for f, _ in node.next_functions)
    return names


def _mlp_pair():
    vtl.random.seed(3)
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(inplace=True),
                         nn.Linear(16, 3), nn.ReLU())


def _train_twice(model, x, unfused):
    outs = []
    for _ in range(2):
        y = x
        if unfused:  # module by module, as Sequential did before
            for m in model:
                y = m(y)
        else:
            y = model(x)
        vtl.sum(y * y).backward()
        outs.append(to_numpy(y))
        outs += [to_numpy(p.grad) for p in model.parameters()]
        with vtl.no_grad():
            for p in model.parameters():
                p.sub_(0.1 * p.grad)
                p.grad = None
    return outs


def test_sequential_runs_linear_relu_pairs_fused(backend):
    x = vtl.asarray(np.random.default_rng(4).standard_normal((10, 6)).astype(np.float32))
    m = _mlp_pair()
    names = _node_names(m(x))
    assert names.count("LinearReluBackward") == 3 and "ReluBackward" not in names
    got = _train_twice(m, x, unfused=False)
    want = _train_twice(_mlp_pair(), x, unfused=True)
    for a, r in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, r)


def test_sequential_keeps_hooked_and_subclassed_modules_apart(backend):
    x = vtl.asarray(np.ones((2, 6), np.float32))
    m = _mlp_pair()
    seen = []
    m[0].register_forward_hook(lambda mod, args, out: seen.append(out.grad_fn.name()))
    m[3].register_forward_pre_hook(lambda mod, args: seen.append("pre"))

    class MyRelu(nn.ReLU):
        pass

    m[5] = MyRelu()
    names = _node_names(m(x))
    assert seen == ["LinearBackward", "pre"]  # both hooks ran: their pairs are not fused
    assert names.count("LinearReluBackward") == 0 and names.count("ReluBackward") == 3


@pytest.mark.parametrize("layer", ["encoder", "decoder"])
def test_transformer_feed_forward_relu_fused(backend, layer):
    rng = np.random.default_rng(6)
    src = vtl.asarray(rng.standard_normal((2, 5, 8)).astype(np.float32))

    def build(activation):
        vtl.random.seed(1)
        if layer == "encoder":
            return nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation=activation,
                                              batch_first=True)
        return nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, activation=activation,
                                          batch_first=True)

    def run(mod):
        out = mod(src) if layer == "encoder" else mod(src, src)
        vtl.sum(out * out).backward()
        return out, [to_numpy(out)] + [to_numpy(p.grad) for p in mod.parameters()]

    fused_out, got = run(build("relu"))
    plain_out, want = run(build(lambda t: F.relu(t)))
    assert "LinearReluBackward" in _node_names(fused_out)
    assert "LinearReluBackward" not in _node_names(plain_out)
    for a, r in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, r)


@pytest.mark.parametrize("big", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_wgpu_linear_relu_is_one_dispatch(wgpu, monkeypatch, big, bias):
    """The ReLU in the product's epilogue, in the 64x64 and the 128x128-tile kernels."""
    from vtl.backends.wgpu import _linalg
    from vtl.backends.wgpu._recorder import REC

    if big:  # every float32 product takes the large tiles
        monkeypatch.setattr(_linalg, "BIG_MIN_TILES", 1)
        monkeypatch.setattr(_linalg, "BIG_MIN_FILL", 0.0)
    rng = np.random.default_rng(7)
    x = vtl.asarray(rng.standard_normal((140, 24)).astype(np.float32), backend="wgpu")
    w = vtl.asarray(rng.standard_normal((130, 24)).astype(np.float32), backend="wgpu")
    b = vtl.asarray(rng.standard_normal(130).astype(np.float32), backend="wgpu") if bias \
        else None
    assert _linalg.big_tiles(np.dtype(np.float32), 140, 130) is big
    d0 = REC.dispatches
    got = F.linear_relu(x, w, b)
    assert REC.dispatches - d0 == 1
    want = F.relu(F.linear(x, w, b))
    np.testing.assert_array_equal(to_numpy(got), to_numpy(want))
    assert (to_numpy(got) == 0).any()
