"""vtl.vmap and vtl.func (torch.func's names): vmap against the batched computation on every
backend, in_dims/out_dims structures, per-sample gradients with functional_call, nesting,
gradients through vmap, randomness modes, the errors; and against torch.func where torch is
importable."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_close, to_numpy

import vtl
from vtl import nn

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

RNG = np.random.default_rng(0)
A = RNG.standard_normal((5, 3)).astype(np.float32)
B = RNG.standard_normal((3, 4)).astype(np.float32)


def test_vmap_matches_batched_computation(backend):
    x = vtl.asarray(A, device=backend)
    w = vtl.asarray(B, device=backend)
    out = vtl.vmap(lambda r, m: vtl.tanh(r @ m), in_dims=(0, None))(x, w)
    assert out.shape == (5, 4)
    assert_close(out, np.tanh(A @ B), rtol=1e-5, atol=1e-6)


def test_vmap_in_dims_out_dims_and_structures(backend):
    x = vtl.asarray(A, device=backend)  # map over axis 1 (size 3)
    y = vtl.asarray(A.T.copy(), device=backend)  # axis 0 (size 3)

    def f(pair, scale):
        a, b = pair
        return {"sum": a + b * scale, "prod": a * b}

    out = vtl.vmap(f, in_dims=((1, 0), None), out_dims={"sum": 1, "prod": 0})((x, y), 2.0)
    assert_close(out["sum"], A + 2.0 * A, rtol=1e-6)
    assert_close(out["prod"], (A * A).T, rtol=1e-6)
    neg = vtl.vmap(lambda r: r * 2, in_dims=-1, out_dims=-1)(x)
    assert_close(neg, 2 * A, rtol=1e-6)


def test_vmap_nested_and_unmapped_output(backend):
    x = vtl.asarray(A, device=backend)
    w = vtl.asarray(B, device=backend)
    outer = vtl.vmap(vtl.vmap(lambda a, b: a * b, in_dims=(None, 1)), in_dims=(0, None))
    res = outer(vtl.sum(x, axis=1), w)  # (5, 4, 3)
    assert_close(res, A.sum(1)[:, None, None] * B.T[None], rtol=1e-5)
    const, ys = vtl.vmap(lambda r, m: (m, r * 2), in_dims=(0, None), out_dims=(None, 0))(x, w)
    assert_close(const, B)
    assert_close(ys, 2 * A)


def test_gradient_through_vmap_matches_batched(backend):
    x = vtl.asarray(A, device=backend, requires_grad=True)
    vtl.sum(vtl.vmap(lambda r: vtl.sin(r) * r)(x) ** 2).backward()
    xb = vtl.asarray(A, device=backend, requires_grad=True)
    vtl.sum((vtl.sin(xb) * xb) ** 2).backward()
    assert_close(x.grad, to_numpy(xb.grad), rtol=1e-5, atol=1e-6)


def test_per_sample_gradients_with_functional_call(backend):
    vtl.random.seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).to(backend)
    params = {k: v.detach() for k, v in model.named_parameters()}
    x = vtl.asarray(A, device=backend)
    t = vtl.asarray(RNG.standard_normal((5, 2)).astype(np.float32), device=backend)

    def loss(p, xi, ti):
        return vtl.sum((vtl.func.functional_call(model, p, (xi[None],))[0] - ti) ** 2)

    per = vtl.vmap(vtl.func.grad(loss), in_dims=(None, 0, 0))(params, x, t)
    for i in range(5):
        model.zero_grad()
        loss(dict(model.named_parameters()), x[i], t[i]).backward()
        for name, p in model.named_parameters():
            assert_close(per[name][i], to_numpy(p.grad), rtol=1e-5, atol=1e-6)
    # the module's own parameters are back in place
    for name, p in model.named_parameters():
        assert p is model.get_parameter(name)
        assert isinstance(p, nn.Parameter)


def test_functional_call_tied_weights_strict_and_errors():
    lin, lin2 = nn.Linear(2, 2, bias=False), nn.Linear(2, 2, bias=False)
    lin2.weight = lin.weight
    model = nn.Sequential(lin, nn.ReLU(), lin2)  # the same weight under two names
    x = vtl.asarray([[1.0, -2.0]])
    w = vtl.asarray([[2.0, 0.0], [0.0, 2.0]])
    out = vtl.func.functional_call(model, {"0.weight": w}, x)
    assert_close(out, np.maximum(2 * np.array([[1.0, -2.0]], np.float32), 0) * 2)
    untied = vtl.func.functional_call(model, {"0.weight": w}, x, tie_weights=False)
    assert_close(untied, to_numpy(lin2(vtl.nn.functional.relu(x @ w.T))))
    with pytest.raises(KeyError, match="not parameters or buffers"):
        vtl.func.functional_call(model, {"nope": w}, x)
    with pytest.raises(KeyError, match="missing"):
        vtl.func.functional_call(nn.Linear(2, 2), {"weight": w}, x, strict=True)
    with pytest.raises(TypeError, match="must be a vtl.Tensor"):
        vtl.func.functional_call(model, {"0.weight": np.eye(2)}, x)
    assert model[0].weight is lin.weight


def test_randomness_modes():
    x = vtl.zeros((3, 4))

    def noisy(r):
        return r + vtl.random.normal(size=r.shape)

    with pytest.raises(RuntimeError, match="randomness"):
        vtl.vmap(noisy)(x)
    state = vtl.random.get_state()
    same = to_numpy(vtl.vmap(noisy, randomness="same")(x))
    np.testing.assert_array_equal(same[0], same[1])
    vtl.random.set_state(state)
    diff = to_numpy(vtl.vmap(noisy, randomness="different")(x))
    np.testing.assert_array_equal(diff[0], same[0])
    assert not np.array_equal(diff[0], diff[1])


def test_vmap_errors():
    x = vtl.zeros((3, 2))
    with pytest.raises(ValueError, match="different sizes"):
        vtl.vmap(lambda a, b: a + b)(x, vtl.zeros((4, 2)))
    with pytest.raises(ValueError, match="out of range"):
        vtl.vmap(lambda a: a, in_dims=2)(x)
    with pytest.raises(ValueError, match="maps no tensor"):
        vtl.vmap(lambda a: a, in_dims=None)(x)
    with pytest.raises(ValueError, match="size 0"):
        vtl.vmap(lambda a: a)(vtl.zeros((0, 2)))
    with pytest.raises(ValueError, match="not a Tensor"):
        vtl.vmap(lambda a, s: a * s)(x, 2.0)
    with pytest.raises(TypeError, match="must return Tensors"):
        vtl.vmap(lambda a: 1.0)(x)
    with pytest.raises(ValueError, match="differs between"):
        vtl.vmap(lambda a: a, out_dims=None)(vtl.asarray([[1.0], [2.0]]))
    with pytest.raises(ValueError, match="in_dims has 1 entries"):
        vtl.vmap(lambda a, b: a, in_dims=(0,))(x, x)
    with pytest.raises(ValueError, match="randomness"):
        vtl.vmap(lambda a: a, randomness="sometimes")


def test_func_names():
    f = lambda x: vtl.sum(x ** 3)  # noqa: E731
    x = vtl.asarray([1.0, 2.0])
    g, v = vtl.func.grad_and_value(f)(x)
    assert_close(g, np.float32([3.0, 12.0]))
    assert float(v) == 9.0
    assert_close(vtl.func.jacrev(lambda x: x ** 2)(x), np.diag(np.float32([2.0, 4.0])))
    assert_close(vtl.func.jacfwd(lambda x: x ** 2)(x), np.diag(np.float32([2.0, 4.0])))
    assert_close(vtl.func.hessian(f)(x), np.diag(np.float32([6.0, 12.0])))


@pytest.mark.skipif(torch is None, reason="needs torch")
def test_matches_torch_func():
    tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    vm = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    vm.load_state_dict({k: vtl.asarray(v.detach().numpy()) for k, v in tm.state_dict().items()})
    x = RNG.standard_normal((5, 3)).astype(np.float32)

    def tloss(p, xi):
        return (torch.func.functional_call(tm, p, (xi[None],)) ** 2).sum()

    def vloss(p, xi):
        return vtl.sum(vtl.func.functional_call(vm, p, (xi[None],)) ** 2)

    tp = {k: v.detach() for k, v in tm.named_parameters()}
    vp = {k: v.detach() for k, v in vm.named_parameters()}
    tg = torch.func.vmap(torch.func.grad(tloss), in_dims=(None, 0))(tp, torch.from_numpy(x))
    vg = vtl.vmap(vtl.func.grad(vloss), in_dims=(None, 0))(vp, vtl.asarray(x))
    for k in tg:
        assert_close(vg[k], tg[k].numpy(), rtol=1e-5, atol=1e-6)
