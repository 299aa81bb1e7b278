"""Optimizers: 60-step trajectories against NumPy implementations of PyTorch's
documented algorithms (and PyTorch itself when importable), on every backend,
through the portable rules, the backend's fused kernel and a simulated fused
kernel that runs the kernel programs; state round trips; errors."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

import vtl
from tests.helpers import supported_dtypes
from vtl import optim
from vtl.optim import _programs

STEPS = 60
SHAPES = [(3, 4), (5,), ()]


# ---------------------------------------------------------------- problem
def _grad(p: np.ndarray, k: int) -> np.ndarray:
    """A gradient that depends on the parameter and changes sign over time."""
    return 2.0 * (p - 0.5) + 0.3 * np.cos(3.0 * p + k)


def _init(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) for s in SHAPES]


def _dtype(backend: str):
    return np.float64 if "float64" in supported_dtypes(backend) else np.float32


def _tol(dtype) -> dict:
    return {"rtol": 1e-9, "atol": 1e-11} if dtype == np.float64 else {"rtol": 2e-4, "atol": 2e-5}


def _run_vtl(cls, kwargs, backend, dtype, steps=STEPS, params=None):
    ps = [vtl.asarray(a.astype(dtype), requires_grad=True) for a in (params or _init())]
    opt = cls(ps, **kwargs)
    for k in range(steps):
        opt.zero_grad()
        for p in ps:
            p.grad = vtl.asarray(_grad(p.numpy().astype(np.float64), k).astype(dtype))
        opt.step()
    return ps, opt


# ------------------------------------------------------ NumPy references
def ref_sgd(ps, steps, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0,
            nesterov=False, maximize=False):
    ps = [p.copy() for p in ps]
    bufs = [None] * len(ps)
    for k in range(steps):
        for i, p in enumerate(ps):
            g = _grad(p, k)
            if maximize:
                g = -g
            g = g + weight_decay * p
            if momentum:
                bufs[i] = g.copy() if bufs[i] is None else momentum * bufs[i] + (1 - dampening) * g
                g = g + momentum * bufs[i] if nesterov else bufs[i]
            ps[i] = p - lr * g
    return ps


def ref_adam(ps, steps, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
             amsgrad=False, maximize=False, decoupled=False):
    b1, b2 = betas
    ps = [p.copy() for p in ps]
    m = [np.zeros_like(p) for p in ps]
    v = [np.zeros_like(p) for p in ps]
    vmax = [np.zeros_like(p) for p in ps]
    for k in range(steps):
        t = k + 1
        for i, p in enumerate(ps):
            g = _grad(p, k)
            if maximize:
                g = -g
            if decoupled:
                p = p * (1 - lr * weight_decay)
            else:
                g = g + weight_decay * p
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            mhat = m[i] / (1 - b1**t)
            if amsgrad:
                vmax[i] = np.maximum(vmax[i], v[i])
                vhat = vmax[i] / (1 - b2**t)
            else:
                vhat = v[i] / (1 - b2**t)
            ps[i] = p - lr * mhat / (np.sqrt(vhat) + eps)
    return ps


def ref_adamw(ps, steps, weight_decay=1e-2, **kw):
    return ref_adam(ps, steps, weight_decay=weight_decay, decoupled=True, **kw)


def ref_rmsprop(ps, steps, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0,
                centered=False, maximize=False):
    ps = [p.copy() for p in ps]
    sq = [np.zeros_like(p) for p in ps]
    ga = [np.zeros_like(p) for p in ps]
    buf = [np.zeros_like(p) for p in ps]
    for k in range(steps):
        for i, p in enumerate(ps):
            g = _grad(p, k)
            if maximize:
                g = -g
            g = g + weight_decay * p
            sq[i] = alpha * sq[i] + (1 - alpha) * g * g
            if centered:
                ga[i] = alpha * ga[i] + (1 - alpha) * g
                denom = np.sqrt(sq[i] - ga[i] ** 2) + eps
            else:
                denom = np.sqrt(sq[i]) + eps
            if momentum > 0:
                buf[i] = momentum * buf[i] + g / denom
                ps[i] = p - lr * buf[i]
            else:
                ps[i] = p - lr * g / denom
    return ps


def ref_adagrad(ps, steps, lr=1e-2, lr_decay=0.0, weight_decay=0.0,
                initial_accumulator_value=0.0, eps=1e-10, maximize=False):
    ps = [p.copy() for p in ps]
    s = [np.full_like(p, initial_accumulator_value) for p in ps]
    for k in range(steps):
        t = k + 1
        for i, p in enumerate(ps):
            g = _grad(p, k)
            if maximize:
                g = -g
            g = g + weight_decay * p
            clr = lr / (1 + (t - 1) * lr_decay)
            s[i] = s[i] + g * g
            ps[i] = p - clr * g / (np.sqrt(s[i]) + eps)
    return ps


CASES = [
    (optim.SGD, ref_sgd, {}),
    (optim.SGD, ref_sgd, {"lr": 0.05}),
    (optim.SGD, ref_sgd, {"lr": 0.05, "momentum": 0.9}),
    (optim.SGD, ref_sgd, {"lr": 0.05, "momentum": 0.9, "dampening": 0.3}),
    (optim.SGD, ref_sgd, {"lr": 0.05, "momentum": 0.8, "nesterov": True}),
    (optim.SGD, ref_sgd, {"lr": 0.05, "momentum": 0.5, "weight_decay": 0.1, "maximize": True}),
    (optim.Adam, ref_adam, {}),
    (optim.Adam, ref_adam, {"lr": 0.05, "betas": (0.8, 0.9), "eps": 1e-6}),
    (optim.Adam, ref_adam, {"lr": 0.05, "amsgrad": True}),
    (optim.Adam, ref_adam, {"lr": 0.05, "weight_decay": 0.1}),
    (optim.Adam, ref_adam, {"lr": 0.02, "weight_decay": 0.1, "amsgrad": True, "maximize": True}),
    (optim.AdamW, ref_adamw, {}),
    (optim.AdamW, ref_adamw, {"lr": 0.05, "weight_decay": 0.3}),
    (optim.AdamW, ref_adamw, {"lr": 0.05, "weight_decay": 0.1, "amsgrad": True}),
    (optim.AdamW, ref_adamw, {"lr": 0.02, "maximize": True, "betas": (0.5, 0.0)}),
    (optim.RMSprop, ref_rmsprop, {}),
    (optim.RMSprop, ref_rmsprop, {"lr": 0.01, "alpha": 0.9, "centered": True}),
    (optim.RMSprop, ref_rmsprop, {"lr": 0.01, "momentum": 0.9}),
    (optim.RMSprop, ref_rmsprop, {"lr": 0.01, "momentum": 0.5, "centered": True,
                                  "weight_decay": 0.1, "maximize": True}),
    (optim.Adagrad, ref_adagrad, {}),
    (optim.Adagrad, ref_adagrad, {"lr": 0.1, "lr_decay": 0.05}),
    (optim.Adagrad, ref_adagrad, {"lr": 0.1, "initial_accumulator_value": 0.5,
                                  "weight_decay": 0.1, "eps": 1e-6}),
    (optim.Adagrad, ref_adagrad, {"lr": 0.1, "maximize": True}),
]
IDS = [f"{c.__name__}-{'-'.join(f'{k}={v}' for k, v in kw.items()) or 'defaults'}"
       for c, _, kw in CASES]


class SimulatedFused:
    """A ``multi_tensor_apply`` kernel that evaluates the kernel program with ``xp``."""

    def __init__(self, xp):
        self.xp = xp
        self.calls = 0
        self.tensors = 0

    def supports(self, dtype) -> bool:
        return dtype.kind == "f"

    def __call__(self, prog, tensors, scalars) -> None:
        self.calls += 1
        self.tensors += len(tensors)
        for arrs in tensors:
            for name, val in zip(prog.writes, prog.evaluate(self.xp, arrs, scalars), strict=True):
                arrs[prog.arrays.index(name)][...] = val


@pytest.fixture
def simulated_fused(backend, monkeypatch):
    b = vtl.backends.get(backend)
    kern = SimulatedFused(b.xp)
    monkeypatch.setitem(b._kernels, "multi_tensor_apply", kern)
    return kern


@pytest.mark.parametrize(("cls", "ref", "kwargs"), CASES, ids=IDS)
@pytest.mark.parametrize("foreach", [None, False])
def test_trajectory_matches_reference(backend, cls, ref, kwargs, foreach):
    dtype = _dtype(backend)
    ps, _ = _run_vtl(cls, {**kwargs, "foreach": foreach}, backend, dtype)
    expected = ref([a.astype(dtype).astype(np.float64) for a in _init()], STEPS, **kwargs)
    moved = False
    for p, e, a0 in zip(ps, expected, _init(), strict=True):
        assert p.dtype == dtype and p.shape == e.shape
        np.testing.assert_allclose(p.numpy(), e, **_tol(dtype))
        moved |= not np.allclose(p.numpy(), a0)
    assert moved


@pytest.mark.parametrize(("cls", "ref", "kwargs"), CASES, ids=IDS)
def test_simulated_fused_program_matches_reference(backend, simulated_fused, cls, ref, kwargs):
    dtype = _dtype(backend)
    ps, _ = _run_vtl(cls, kwargs, backend, dtype)
    assert simulated_fused.calls == STEPS  # one launch per step for the whole group
    assert simulated_fused.tensors == STEPS * len(SHAPES)
    expected = ref([a.astype(dtype).astype(np.float64) for a in _init()], STEPS, **kwargs)
    for p, e in zip(ps, expected, strict=True):
        np.testing.assert_allclose(p.numpy(), e, **_tol(dtype))


@pytest.mark.parametrize(("cls", "ref", "kwargs"), CASES, ids=IDS)
def test_fused_and_portable_agree(backend, cls, ref, kwargs):
    """The backend's own fused kernel (if any) against the portable rules, float32."""
    a, _ = _run_vtl(cls, {**kwargs, "foreach": None}, backend, np.float32, steps=20)
    b, _ = _run_vtl(cls, {**kwargs, "foreach": False}, backend, np.float32, steps=20)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-5, atol=1e-6)


def _torch():
    try:
        import torch as t
    except ImportError:
        pytest.skip("PyTorch is not installed")
    return t


@pytest.mark.parametrize(("cls", "ref", "kwargs"), CASES, ids=IDS)
def test_trajectory_matches_torch(cls, ref, kwargs):
    t = _torch()
    init = _init()
    tp = [t.tensor(a, dtype=t.float64, requires_grad=True) for a in init]
    topt = getattr(t.optim, cls.__name__)(tp, **kwargs, foreach=False)
    for k in range(STEPS):
        topt.zero_grad()
        for p in tp:
            p.grad = t.from_numpy(np.asarray(_grad(p.detach().numpy(), k)))
        topt.step()
    ps, _ = _run_vtl(cls, kwargs, "numpy", np.float64)
    for p, q in zip(ps, tp, strict=True):
        np.testing.assert_allclose(p.numpy(), q.detach().numpy(), rtol=1e-9, atol=1e-11)


def test_programs_are_valid_for_c_and_wgsl():
    with pytest.raises(ValueError, match="undefined"):
        _programs.Program("bad", ("p",), ("p",), (), (("p", "p + q"),))
    with pytest.raises(ValueError, match="bad token"):
        _programs.Program("bad", ("p",), ("p",), (), (("p", "p ** 2"),))
    prog = _programs.adam(amsgrad=True, weight_decay=True, decoupled=False, maximize=True)
    assert prog.temps == ("denom",)
    assert prog.writes == ("p", "m", "v", "vmax")


# ------------------------------------------------------------ state dicts
def _copy_sd(obj):
    """Deep copy of a state dict (tensors copied through vtl.asarray)."""
    if isinstance(obj, vtl.Tensor):
        return vtl.asarray(obj, copy=True)
    if isinstance(obj, dict):
        return {k: _copy_sd(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_copy_sd(v) for v in obj]
    return copy.copy(obj)


@pytest.mark.parametrize(("cls", "ref", "kwargs"), CASES, ids=IDS)
def test_state_dict_round_trip_resumes_exactly(backend, cls, ref, kwargs):
    dtype = _dtype(backend)
    ps, opt = _run_vtl(cls, kwargs, backend, dtype, steps=25)
    sd = opt.state_dict()
    qs = [vtl.asarray(p.numpy(), requires_grad=True) for p in ps]
    opt2 = cls(qs, **kwargs)
    opt2.load_state_dict(_copy_sd(sd))
    for k in range(25, 45):
        for o, xs in ((opt, ps), (opt2, qs)):
            o.zero_grad()
            for x in xs:
                x.grad = vtl.asarray(_grad(x.numpy().astype(np.float64), k).astype(dtype))
            o.step()
    for p, q in zip(ps, qs, strict=True):
        np.testing.assert_array_equal(p.numpy(), q.numpy())
    # the saved dict was a copy: later steps did not change it
    for k, st in sd["state"].items():
        for name, v in st.items():
            if isinstance(v, vtl.Tensor):
                assert not np.array_equal(v.numpy(), opt.state[ps[k]][name].numpy()) or \
                    np.all(v.numpy() == 0)


def test_state_dict_structure(backend):
    a = vtl.asarray(np.ones(3), requires_grad=True)
    b = vtl.asarray(np.ones((2, 2)), requires_grad=True)
    opt = optim.Adam([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=0.1, amsgrad=True)
    a.grad = vtl.ones_like(a)
    opt.step()
    sd = opt.state_dict()
    assert set(sd) == {"state", "param_groups"}
    assert sd["param_groups"][0]["params"] == [0] and sd["param_groups"][1]["params"] == [1]
    assert sd["param_groups"][1]["lr"] == 0.5 and sd["param_groups"][0]["lr"] == 0.1
    assert list(sd["state"]) == [0]  # b had no gradient yet
    st = sd["state"][0]
    assert st["step"] == 1
    assert {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"} <= set(st)
    assert isinstance(st["exp_avg"], vtl.Tensor)
    np.testing.assert_allclose(st["exp_avg"].numpy(), 0.1 * np.ones(3))


def test_load_state_dict_errors_leave_optimizer_unchanged(backend):
    a = vtl.asarray(np.ones(3), requires_grad=True)
    b = vtl.asarray(np.ones(2), requires_grad=True)
    opt = optim.SGD([a, b], lr=0.1, momentum=0.9)
    a.grad = vtl.ones_like(a)
    b.grad = vtl.ones_like(b)
    opt.step()
    good = opt.state_dict()
    before = _copy_sd(good)

    bad_groups = _copy_sd(good)
    bad_groups["param_groups"].append(dict(bad_groups["param_groups"][0]))
    with pytest.raises(ValueError, match="parameter group"):
        opt.load_state_dict(bad_groups)

    bad_size = _copy_sd(good)
    bad_size["param_groups"][0]["params"] = [0]
    bad_size["param_groups"][0]["lr"] = 123.0
    with pytest.raises(ValueError, match="1 parameter"):
        opt.load_state_dict(bad_size)

    bad_shape = _copy_sd(good)
    bad_shape["state"][1]["momentum_buffer"] = vtl.ones((5,))
    bad_shape["param_groups"][0]["lr"] = 123.0
    with pytest.raises(ValueError, match="shape"):
        opt.load_state_dict(bad_shape)

    bad_hyper = _copy_sd(good)
    bad_hyper["param_groups"][0]["lr"] = -1.0
    with pytest.raises(ValueError, match="lr"):
        opt.load_state_dict(bad_hyper)

    with pytest.raises(ValueError, match="'state'"):
        opt.load_state_dict({"param_groups": []})

    after = opt.state_dict()
    assert after["param_groups"] == before["param_groups"]
    for i in (0, 1):
        np.testing.assert_array_equal(after["state"][i]["momentum_buffer"].numpy(),
                                      before["state"][i]["momentum_buffer"].numpy())


def test_load_state_dict_casts_to_parameter_dtype(backend):
    p = vtl.asarray(np.ones(3, dtype=np.float32), requires_grad=True)
    opt = optim.Adam([p])
    sd = {"state": {0: {"step": 3, "exp_avg": np.ones(3), "exp_avg_sq": np.ones(3)}},
          "param_groups": [{**opt.state_dict()["param_groups"][0], "lr": 0.5}]}
    opt.load_state_dict(sd)
    assert opt.state[p]["exp_avg"].dtype == vtl.float32
    assert opt.state[p]["step"] == 3 and opt.param_groups[0]["lr"] == 0.5
    assert opt.param_groups[0]["params"][0] is p


# ---------------------------------------------------------- groups, misc
def test_per_group_hyperparameters(backend):
    dtype = _dtype(backend)
    init = _init()
    ps = [vtl.asarray(a.astype(dtype), requires_grad=True) for a in init]
    opt = optim.SGD([{"params": ps[:1], "lr": 0.2, "momentum": 0.5}, {"params": ps[1:]}],
                    lr=0.05)
    assert opt.param_groups[1]["lr"] == 0.05 and opt.param_groups[1]["momentum"] == 0.0
    for k in range(STEPS):
        opt.zero_grad()
        for p in ps:
            p.grad = vtl.asarray(_grad(p.numpy().astype(np.float64), k).astype(dtype))
        opt.step()
    e0 = ref_sgd([init[0].astype(dtype).astype(np.float64)], STEPS, lr=0.2, momentum=0.5)
    e1 = ref_sgd([a.astype(dtype).astype(np.float64) for a in init[1:]], STEPS, lr=0.05)
    for p, e in zip(ps, e0 + e1, strict=True):
        np.testing.assert_allclose(p.numpy(), e, **_tol(dtype))


def test_add_param_group_and_errors(backend):
    a = vtl.asarray(np.ones(2), requires_grad=True)
    b = vtl.asarray(np.ones(2), requires_grad=True)
    opt = optim.Adagrad([a], lr=0.1)
    opt.add_param_group({"params": b, "lr": 0.3})
    assert len(opt.param_groups) == 2 and opt.param_groups[1]["lr_decay"] == 0.0
    assert b in opt.state  # Adagrad creates its state eagerly
    with pytest.raises(ValueError, match="more than one"):
        opt.add_param_group({"params": [a]})
    with pytest.raises(ValueError, match="same parameter twice"):
        optim.SGD([a, a])
    with pytest.raises(ValueError, match="empty"):
        optim.SGD([])
    with pytest.raises(TypeError, match="single Tensor"):
        optim.SGD(a)
    with pytest.raises(TypeError, match="Tensors"):
        optim.SGD([np.ones(2)])
    with pytest.raises(ValueError, match="non-leaf"):
        optim.SGD([a * 2])
    with pytest.raises(ValueError, match="'params'"):
        opt.add_param_group({"lr": 0.1})


@pytest.mark.parametrize(("cls", "kwargs", "match"), [
    (optim.SGD, {"lr": -0.1}, "lr"),
    (optim.SGD, {"momentum": -0.5}, "momentum"),
    (optim.SGD, {"weight_decay": -1.0}, "weight_decay"),
    (optim.SGD, {"nesterov": True}, "Nesterov"),
    (optim.SGD, {"nesterov": True, "momentum": 0.9, "dampening": 0.1}, "Nesterov"),
    (optim.Adam, {"lr": -1e-3}, "lr"),
    (optim.Adam, {"lr": math.nan}, "lr"),
    (optim.Adam, {"betas": (1.0, 0.9)}, "beta1"),
    (optim.Adam, {"betas": (0.9, -0.1)}, "beta2"),
    (optim.Adam, {"betas": (0.9,)}, "betas"),
    (optim.Adam, {"eps": -1e-8}, "eps"),
    (optim.AdamW, {"weight_decay": -0.1}, "weight_decay"),
    (optim.AdamW, {"betas": (0.9, 1.5)}, "beta2"),
    (optim.RMSprop, {"alpha": -0.1}, "alpha"),
    (optim.RMSprop, {"momentum": -0.1}, "momentum"),
    (optim.RMSprop, {"eps": -1.0}, "eps"),
    (optim.Adagrad, {"lr_decay": -0.1}, "lr_decay"),
    (optim.Adagrad, {"initial_accumulator_value": -1.0}, "initial_accumulator_value"),
    (optim.Adagrad, {"lr": "fast"}, "lr"),
])
def test_bad_hyperparameters_raise(cls, kwargs, match):
    p = vtl.asarray(np.ones(2), requires_grad=True)
    with pytest.raises(ValueError, match=match):
        cls([p], **kwargs)
    with pytest.raises(ValueError, match=match):  # also in a group
        cls([{"params": [p], **kwargs}])


def test_defaults_match_pytorch():
    p = vtl.asarray(np.ones(2), requires_grad=True)
    d = optim.SGD([p]).defaults
    assert (d["lr"], d["momentum"], d["dampening"], d["weight_decay"], d["nesterov"]) == \
        (1e-3, 0.0, 0.0, 0.0, False)
    d = optim.Adam([p]).defaults
    assert (d["lr"], d["betas"], d["eps"], d["weight_decay"], d["amsgrad"]) == \
        (1e-3, (0.9, 0.999), 1e-8, 0.0, False)
    assert optim.AdamW([p]).defaults["weight_decay"] == 1e-2
    d = optim.RMSprop([p]).defaults
    assert (d["lr"], d["alpha"], d["eps"], d["momentum"], d["centered"]) == \
        (1e-2, 0.99, 1e-8, 0.0, False)
    d = optim.Adagrad([p]).defaults
    assert (d["lr"], d["lr_decay"], d["eps"], d["initial_accumulator_value"]) == \
        (1e-2, 0.0, 1e-10, 0.0)


def test_zero_grad_and_params_without_grad(backend):
    a = vtl.asarray(np.ones(3), requires_grad=True)
    b = vtl.asarray(np.ones(3), requires_grad=True)
    opt = optim.Adam([a, b], lr=0.1)
    a.grad = vtl.ones_like(a)
    opt.step()
    assert b not in opt.state and np.all(b.numpy() == 1)  # no grad: untouched, no state
    g = a.grad
    opt.zero_grad(set_to_none=False)
    assert a.grad is g and np.all(g.numpy() == 0)
    opt.zero_grad()
    assert a.grad is None


def test_step_bumps_version_and_updates_shared_storage(backend):
    base = vtl.asarray(np.ones(4), requires_grad=True)
    p = vtl.nn.Parameter(base.detach())
    v0 = p._version
    opt = optim.SGD([p], lr=0.5)
    p.grad = vtl.ones_like(p)
    opt.step()
    assert p._version == v0 + 1
    np.testing.assert_allclose(base.numpy(), 0.5 * np.ones(4))  # in place, like PyTorch


def test_step_with_closure_and_autograd(backend):
    dtype = _dtype(backend)
    w = vtl.asarray(np.array([1.0, -2.0], dtype=dtype), requires_grad=True)
    opt = optim.SGD([w], lr=0.1, momentum=0.9)

    def closure():
        opt.zero_grad()
        loss = vtl.sum(w * w)
        loss.backward()
        return loss

    losses = [float(opt.step(closure)) for _ in range(60)]
    assert losses[-1] < 1e-3 * losses[0]
    ref = ref_sgd_quadratic(np.array([1.0, -2.0]), 60)
    np.testing.assert_allclose(w.numpy(), ref, **_tol(dtype))


def ref_sgd_quadratic(w, steps, lr=0.1, mu=0.9):
    buf = None
    for _ in range(steps):
        g = 2 * w
        buf = g.copy() if buf is None else mu * buf + g
        w = w - lr * buf
    return w


def test_complex_parameters(backend):
    if "complex128" not in supported_dtypes(backend) and \
            "complex64" not in supported_dtypes(backend):
        pytest.skip("no complex dtypes")
    z = vtl.asarray(np.array([1 + 2j, -1j]), requires_grad=True)
    opt = optim.SGD([z], lr=0.1)
    z.grad = vtl.asarray(np.array([1 + 1j, 2 + 0j]))
    opt.step()
    np.testing.assert_allclose(z.numpy(), np.array([0.9 + 1.9j, -0.2 - 1j]))
    with pytest.raises(TypeError, match="complex"):
        optim.Adagrad([z])


def test_repr():
    p = vtl.asarray(np.ones(2), requires_grad=True)
    r = repr(optim.Adam([p], lr=0.5))
    assert r.startswith("Adam (") and "lr: 0.5" in r and "Parameter Group 0" in r


# ------------------------------------------------------------- clipping
@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf, 3.0])
@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_clip_grad_norm(backend, norm_type, max_norm):
    dtype = _dtype(backend)
    rng = np.random.default_rng(3)
    gs = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    ps = [vtl.asarray(np.zeros(s, dtype=dtype), requires_grad=True) for s in SHAPES]
    for p, g in zip(ps, gs, strict=True):
        p.grad = vtl.asarray(g)
    extra = vtl.asarray(np.zeros(2, dtype=dtype), requires_grad=True)  # no grad: skipped
    total = optim.clip_grad_norm_([*ps, extra], max_norm, norm_type=norm_type)
    flat = np.concatenate([g.astype(np.float64).ravel() for g in gs])
    if math.isinf(norm_type):
        expected = np.max(np.abs(flat))
    else:
        expected = np.sum(np.abs(flat) ** norm_type) ** (1 / norm_type)
    assert isinstance(total, vtl.Tensor) and total.shape == ()
    np.testing.assert_allclose(float(total), expected, rtol=1e-5)
    coef = min(1.0, max_norm / (expected + 1e-6))
    for p, g in zip(ps, gs, strict=True):
        np.testing.assert_allclose(p.grad.numpy(), g * coef, rtol=1e-5, atol=1e-7)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # inf * 0 -> nan, as in PyTorch
def test_clip_grad_norm_nonfinite_and_empty(backend):
    p = vtl.asarray(np.ones(2, dtype=np.float32), requires_grad=True)
    assert float(optim.clip_grad_norm_([p], 1.0)) == 0.0  # no gradients
    p.grad = vtl.asarray(np.array([np.inf, 1.0], dtype=np.float32))
    with pytest.raises(RuntimeError, match="non-finite"):
        optim.clip_grad_norm_(p, 1.0, error_if_nonfinite=True)
    assert math.isinf(float(optim.clip_grad_norm_(p, 1.0)))


def test_clip_grad_value(backend):
    rng = np.random.default_rng(4)
    g = rng.standard_normal((4, 3)).astype(np.float32)
    p = vtl.asarray(np.zeros((4, 3), dtype=np.float32), requires_grad=True)
    p.grad = vtl.asarray(g)
    optim.clip_grad_value_(p, 0.5)
    np.testing.assert_array_equal(p.grad.numpy(), np.clip(g, -0.5, 0.5))


# ------------------------------------------- CUDA kernel source, run on the host
def _all_programs():
    from itertools import product

    b = (False, True)
    for mom, first, nest, wd, mx in product(b, b, b, b, b):
        if (first or nest) and not mom:
            continue
        yield _programs.sgd(momentum=mom, first=first, nesterov=nest, weight_decay=wd,
                            maximize=mx)
    for ams, wd, dec, mx in product(b, b, b, b):
        yield _programs.adam(amsgrad=ams, weight_decay=wd, decoupled=dec, maximize=mx)
    for cen, mom, wd, mx in product(b, b, b, b):
        yield _programs.rmsprop(centered=cen, momentum=mom, weight_decay=wd, maximize=mx)
    for wd, mx in product(b, b):
        yield _programs.adagrad(weight_decay=wd, maximize=mx)


_SHIM = """
#include <math.h>
#define __global__
#define __restrict__ __restrict
struct Dim { unsigned int x; };
static Dim blockIdx, blockDim, threadIdx, gridDim;
extern "C" void set_grid(unsigned b, unsigned bd, unsigned t, unsigned gd) {
  blockIdx.x = b; blockDim.x = bd; threadIdx.x = t; gridDim.x = gd;
}
"""


def test_cuda_source_computes_the_program_on_the_host(tmp_path):
    """Compile the generated CUDA kernels as C++ for the CPU (simulating the thread
    grid) and check them against the programs evaluated with NumPy."""
    import ctypes
    import shutil
    import subprocess

    from vtl.backends.cupy.optim import cuda_source

    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    progs = list(dict.fromkeys(_all_programs()))
    dtypes = (np.float32, np.float64)
    src = [_SHIM]
    for i, prog in enumerate(progs):
        for dt in dtypes:
            name = f"k{i}_{np.dtype(dt).name}"
            src.append(f"namespace n{name} {{\n{cuda_source(prog, dt, name)}}}\n")
            src.append(f"namespace n{name}m {{\n"
                       f"{cuda_source(prog, dt, name + '_mem', scalars_in_memory=True)}}}\n")
    (tmp_path / "k.cpp").write_text("".join(src))
    lib = tmp_path / "k.so"
    subprocess.run([cxx, "-O1", "-shared", "-fPIC", "-o", str(lib), str(tmp_path / "k.cpp")],
                   check=True, capture_output=True)
    so = ctypes.CDLL(str(lib))
    rng = np.random.default_rng(7)
    sizes = (5, 1, 7)
    starts = np.cumsum((0, *sizes[:-1])).astype(np.int64)
    for i, prog in enumerate(progs):
        for dt in dtypes:
            fn = getattr(so, f"k{i}_{np.dtype(dt).name}")
            cscalar = ctypes.c_float if dt == np.float32 else ctypes.c_double
            fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong,
                           *[cscalar] * len(prog.scalars)]
            scalars = tuple(float(x) for x in rng.uniform(0.1, 0.9, len(prog.scalars)))
            tensors = []
            for n in sizes:
                arrs = []
                for a in prog.arrays:
                    x = rng.uniform(0.5, 2.0, n) if a in ("v", "vmax", "sq", "s") \
                        else rng.uniform(-0.2, 0.2, n)
                    arrs.append(x.astype(dt))
                tensors.append(arrs)
            expected = [prog.evaluate(np, [a.copy() for a in arrs], scalars)
                        for arrs in tensors]
            table = np.array([[a.ctypes.data for a in arrs] for arrs in tensors],
                             dtype=np.uint64)
            fresh = [[a.copy() for a in arrs] for arrs in tensors]
            for b, t in [(blk, thr) for blk in range(2) for thr in range(3)]:
                so.set_grid(b, 3, t, 2)
                fn(table.ctypes.data, starts.ctypes.data, len(sizes), sum(sizes), *scalars)
            # the variant of captured steps reads the same scalars from memory
            mem = getattr(so, f"k{i}_{np.dtype(dt).name}_mem")
            mem.argtypes = [ctypes.c_void_p] * 2 + [ctypes.c_int, ctypes.c_longlong,
                                                    ctypes.c_void_p]
            svec = np.array(scalars, dtype=dt)
            table2 = np.array([[a.ctypes.data for a in arrs] for arrs in fresh], dtype=np.uint64)
            for b, t in [(blk, thr) for blk in range(2) for thr in range(3)]:
                so.set_grid(b, 3, t, 2)
                mem(table2.ctypes.data, starts.ctypes.data, len(sizes), sum(sizes),
                    svec.ctypes.data)
            tol = {"rtol": 1e-5, "atol": 1e-6} if dt == np.float32 else {"rtol": 1e-12}
            for arrs, arrs2, exp in zip(tensors, fresh, expected, strict=True):
                for name, e in zip(prog.writes, exp, strict=True):
                    j = prog.arrays.index(name)
                    np.testing.assert_allclose(arrs[j], e, **tol,
                                               err_msg=f"{prog.name} {name} {dt}")
                    np.testing.assert_array_equal(arrs2[j], arrs[j])


@pytest.mark.parametrize("in_memory", [False, True])
def test_cuda_source_skip_flag_on_the_host(tmp_path, in_memory):
    """GradScaler's skip inside a capture: with a zero flag the kernel computes the
    program, with a nonzero one it writes nothing."""
    import ctypes
    import shutil
    import subprocess

    from vtl.backends.cupy.optim import cuda_source

    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    prog = _programs.adam(amsgrad=True, weight_decay=True, decoupled=False, maximize=False)
    src = _SHIM + cuda_source(prog, np.float32, "ks", scalars_in_memory=in_memory, skip=True)
    (tmp_path / "k.cpp").write_text(src)
    lib = tmp_path / "k.so"
    subprocess.run([cxx, "-O1", "-shared", "-fPIC", "-o", str(lib), str(tmp_path / "k.cpp")],
                   check=True, capture_output=True)
    so = ctypes.CDLL(str(lib))
    fn = so.ks
    nscal = 1 if in_memory else len(prog.scalars)
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong,
                   *([ctypes.c_void_p] if in_memory else [ctypes.c_float] * nscal),
                   ctypes.c_void_p]
    rng = np.random.default_rng(11)
    scalars = tuple(float(x) for x in rng.uniform(0.1, 0.9, len(prog.scalars)))
    svec = np.array(scalars, dtype=np.float32)
    for flag_value in (0.0, 1.0, np.inf):
        arrs = [rng.uniform(0.5, 2.0, 6).astype(np.float32) for _ in prog.arrays]
        before = [a.copy() for a in arrs]
        expected = prog.evaluate(np, [a.copy() for a in arrs], scalars)
        table = np.array([[a.ctypes.data for a in arrs]], dtype=np.uint64)
        starts = np.zeros(1, dtype=np.int64)
        flag = np.array(flag_value, dtype=np.float32)
        tail = (svec.ctypes.data,) if in_memory else scalars
        for t in range(3):
            so.set_grid(0, 3, t, 1)
            fn(table.ctypes.data, starts.ctypes.data, 1, 6, *tail, flag.ctypes.data)
        for name, e in zip(prog.writes, expected, strict=True):
            got = arrs[prog.arrays.index(name)]
            if flag_value:
                np.testing.assert_array_equal(got, before[prog.arrays.index(name)])
            else:
                np.testing.assert_allclose(got, e, rtol=1e-5, atol=1e-6, err_msg=name)


_SHIM16 = _SHIM + """
#include <string.h>
#define __device__
#define __forceinline__ inline
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline double __longlong_as_double(long long i) { double d; memcpy(&d, &i, 8); return d; }
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
"""


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_cuda_source_16bit_parameters_on_the_host(tmp_path, name):
    """The programs over 16-bit parameters and gradients with float32 states: computed in
    float32 from the widened values, each written 16-bit array rounded once."""
    import ctypes
    import shutil
    import subprocess

    import ml_dtypes

    from vtl.backends.cupy.optim import cuda_source

    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    dt = np.dtype(np.float16) if name == "float16" else np.dtype(ml_dtypes.bfloat16)
    progs = [_programs.adam(amsgrad=False, weight_decay=True, decoupled=True, maximize=False),
             _programs.sgd(momentum=True, first=False, nesterov=True, weight_decay=True,
                           maximize=False)]
    low = ("p", "g")
    src = [_SHIM16] + [f"namespace n{i} {{\n{cuda_source(p, dt, f'k{i}', low_arrays=low)}}}\n"
                       for i, p in enumerate(progs)]
    (tmp_path / "k.cpp").write_text("".join(src))
    lib = tmp_path / "k.so"
    subprocess.run([cxx, "-O1", "-shared", "-fPIC", "-o", str(lib), str(tmp_path / "k.cpp")],
                   check=True, capture_output=True)
    so = ctypes.CDLL(str(lib))
    rng = np.random.default_rng(3)
    n = 9
    for i, prog in enumerate(progs):
        fn = getattr(so, f"k{i}")
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong,
                       *[ctypes.c_float] * len(prog.scalars)]
        scalars = tuple(float(x) for x in rng.uniform(0.1, 0.9, len(prog.scalars)))
        arrs = [(rng.uniform(-0.2, 0.2, n) if a not in ("v", "vmax") else
                 rng.uniform(0.5, 2.0, n)).astype(dt if a in low else np.float32)
                for a in prog.arrays]
        wide = [a.astype(np.float32) for a in arrs]
        expected = prog.evaluate(np, [a.copy() for a in wide], scalars)
        table = np.array([[a.ctypes.data for a in arrs]], dtype=np.uint64)
        for t in range(n):
            so.set_grid(0, n, t, 1)
            fn(table.ctypes.data, np.zeros(1, np.int64).ctypes.data, 1, n, *scalars)
        for w, e in zip(prog.writes, expected, strict=True):
            got = arrs[prog.arrays.index(w)]
            if w in low:
                assert got.dtype == dt
                np.testing.assert_array_equal(got.view(np.uint16),
                                              np.asarray(e, np.float32).astype(dt)
                                              .view(np.uint16), err_msg=f"{prog.name} {w}")
            else:
                np.testing.assert_allclose(got, e, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", ["Adam", "NAdam", "SGD"])
def test_one_plan_per_state_in_a_step(backend, name):
    """The fused step plans once per distinct step count (and SGD's first momentum step
    per parameter): parameters whose step counts differ (one had no gradient for a while)
    get their own bias corrections, as the portable step computes them."""
    kw = {"momentum": 0.9, "dampening": 0.2} if name == "SGD" else {}
    runs = []
    for foreach in (None, False):
        ws = [vtl.asarray(np.full(4, 0.5 + i, np.float32), device=backend,
                          requires_grad=True) for i in range(3)]
        opt = getattr(optim, name)(ws, lr=0.1, foreach=foreach, **kw)
        for step in range(4):
            opt.zero_grad()
            live = ws if step >= 2 else ws[:1]  # ws[1:] get gradients from step 2 on
            vtl.sum(vtl.stack([vtl.sum(w * w * (1 + k)) for k, w in enumerate(live)])
                    ).backward()
            opt.step()
        runs.append([w.numpy() for w in ws])
        if name != "SGD":
            assert [opt.state[w]["step"] for w in ws] == [4, 2, 2]
    for a, b in zip(*runs, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)
