"""NAdam, RAdam, Adamax and LBFGS: trajectories against NumPy implementations of
PyTorch's documented algorithms (and PyTorch itself when importable) on every backend,
through the portable rules, the backend's fused kernel and a simulated fused kernel
running the kernel programs; state round trips; captured steps; errors."""

from __future__ import annotations

import ctypes
import math
import shutil
import subprocess

import numpy as np
import pytest

import vtl
from tests.helpers import supported_dtypes
from vtl import optim
from vtl.optim import _programs
from vtl.optim import lbfgs as _lbfgs

STEPS = 30
SHAPES = [(3, 4), (5,), ()]


# ---------------------------------------------------------------- problem
def _grad(p: np.ndarray, k: int) -> np.ndarray:
    """A gradient that depends on the parameter and changes sign over time."""
    return np.asarray(2.0 * (p - 0.5) + 0.3 * np.cos(3.0 * p + k))


def _init(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) for s in SHAPES]


def _dtype(backend: str):
    return np.float64 if "float64" in supported_dtypes(backend) else np.float32


def _tol(dtype) -> dict:
    return {"rtol": 1e-9, "atol": 1e-11} if dtype == np.float64 else {"rtol": 2e-4, "atol": 2e-5}


def _params(dtype, init=None):
    return [vtl.asarray(a.astype(dtype), requires_grad=True) for a in (init or _init())]


def _steps(opt, ps, dtype, start: int, stop: int) -> None:
    for k in range(start, stop):
        opt.zero_grad()
        for p in ps:
            p.grad = vtl.asarray(_grad(p.numpy().astype(np.float64), k).astype(dtype))
        opt.step()


def _run_vtl(cls, kwargs, dtype, steps=STEPS):
    ps = _params(dtype)
    opt = cls(ps, **kwargs)
    _steps(opt, ps, dtype, 0, steps)
    return ps, opt


# ------------------------------------------------------ NumPy references
# Written from the pseudo-code in PyTorch's documentation of each optimizer.
def ref_nadam(ps, steps, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
              momentum_decay=4e-3, decoupled_weight_decay=False, maximize=False):
    b1, b2 = betas
    ps = [p.copy() for p in ps]
    m = [np.zeros_like(p) for p in ps]
    v = [np.zeros_like(p) for p in ps]
    mu_prod = 1.0
    for k in range(steps):
        t = k + 1
        mu_t = b1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))
        mu_next = b1 * (1 - 0.5 * 0.96 ** ((t + 1) * momentum_decay))
        mu_prod *= mu_t
        for i, p in enumerate(ps):
            g = _grad(p, k)
            if maximize:
                g = -g
            if weight_decay:
                if decoupled_weight_decay:
                    p = p - lr * weight_decay * p
                else:
                    g = g + weight_decay * p
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            mhat = mu_next * m[i] / (1 - mu_prod * mu_next) + (1 - mu_t) * g / (1 - mu_prod)
            vhat = v[i] / (1 - b2**t)
            ps[i] = p - lr * mhat / (np.sqrt(vhat) + eps)
    return ps


def ref_radam(ps, steps, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
              decoupled_weight_decay=False, maximize=False):
    b1, b2 = betas
    ps = [p.copy() for p in ps]
    m = [np.zeros_like(p) for p in ps]
    v = [np.zeros_like(p) for p in ps]
    rho_inf = 2 / (1 - b2) - 1
    for k in range(steps):
        t = k + 1
        for i, p in enumerate(ps):
            g = _grad(p, k)
            if maximize:
                g = -g
            if weight_decay:
                if decoupled_weight_decay:
                    p = p - lr * weight_decay * p
                else:
                    g = g + weight_decay * p
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            mhat = m[i] / (1 - b1**t)
            rho_t = rho_inf - 2 * t * b2**t / (1 - b2**t)
            if rho_t > 5:
                l_t = np.sqrt(1 - b2**t) / (np.sqrt(v[i]) + eps)
                r_t = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf
                                / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
                ps[i] = p - lr * mhat * r_t * l_t
            else:
                ps[i] = p - lr * mhat
    return ps


def ref_adamax(ps, steps, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
               maximize=False):
    b1, b2 = betas
    ps = [p.copy() for p in ps]
    m = [np.zeros_like(p) for p in ps]
    u = [np.zeros_like(p) for p in ps]
    for k in range(steps):
        t = k + 1
        for i, p in enumerate(ps):
            g = _grad(p, k)
            if maximize:
                g = -g
            if weight_decay:
                g = g + weight_decay * p
            m[i] = b1 * m[i] + (1 - b1) * g
            u[i] = np.maximum(b2 * u[i], np.abs(g) + eps)
            ps[i] = p - lr * m[i] / ((1 - b1**t) * u[i])
    return ps


CASES = [
    (optim.NAdam, ref_nadam, {}),
    (optim.NAdam, ref_nadam, {"lr": 0.05, "betas": (0.8, 0.99), "momentum_decay": 0.05}),
    (optim.NAdam, ref_nadam, {"lr": 0.05, "weight_decay": 0.1}),
    (optim.NAdam, ref_nadam, {"lr": 0.05, "weight_decay": 0.2, "decoupled_weight_decay": True,
                              "maximize": True}),
    (optim.RAdam, ref_radam, {}),
    (optim.RAdam, ref_radam, {"lr": 0.05, "betas": (0.8, 0.9), "eps": 1e-6}),
    (optim.RAdam, ref_radam, {"lr": 0.05, "betas": (0.9, 0.99), "weight_decay": 0.1}),
    (optim.RAdam, ref_radam, {"lr": 0.05, "weight_decay": 0.2, "decoupled_weight_decay": True,
                              "maximize": True}),
    (optim.Adamax, ref_adamax, {}),
    (optim.Adamax, ref_adamax, {"lr": 0.05, "betas": (0.8, 0.9), "eps": 1e-3}),
    (optim.Adamax, ref_adamax, {"lr": 0.05, "weight_decay": 0.1, "maximize": True}),
]
IDS = [f"{c.__name__}-{'-'.join(f'{k}={v}' for k, v in kw.items()) or 'defaults'}"
       for c, _, kw in CASES]


class SimulatedFused:
    """A ``multi_tensor_apply`` kernel that evaluates the kernel program with ``xp``."""

    def __init__(self, xp):
        self.xp = xp
        self.calls = 0

    def supports(self, dtype) -> bool:
        return dtype.kind == "f"

    def __call__(self, prog, tensors, scalars) -> None:
        self.calls += 1
        for arrs in tensors:
            for name, val in zip(prog.writes, prog.evaluate(self.xp, arrs, scalars), strict=True):
                arrs[prog.arrays.index(name)][...] = val


@pytest.mark.parametrize(("cls", "ref", "kwargs"), CASES, ids=IDS)
@pytest.mark.parametrize("foreach", [None, False])
def test_trajectory_matches_reference(backend, cls, ref, kwargs, foreach):
    dtype = _dtype(backend)
    ps, _ = _run_vtl(cls, {**kwargs, "foreach": foreach}, dtype)
    expected = ref([a.astype(dtype).astype(np.float64) for a in _init()], STEPS, **kwargs)
    for p, e, a0 in zip(ps, expected, _init(), strict=True):
        assert p.dtype == dtype and p.shape == e.shape
        np.testing.assert_allclose(p.numpy(), e, **_tol(dtype))
        assert not np.allclose(p.numpy(), a0)


@pytest.mark.parametrize(("cls", "ref", "kwargs"), CASES, ids=IDS)
def test_simulated_fused_program_matches_reference(cls, ref, kwargs, monkeypatch):
    """The kernel programs (what the wgpu/cupy kernels compile) against the reference."""
    b = vtl.backends.get("numpy")
    kern = SimulatedFused(b.xp)
    monkeypatch.setitem(b._kernels, "multi_tensor_apply", kern)
    with vtl.use_backend("numpy"):
        ps, _ = _run_vtl(cls, kwargs, np.float64)
    assert kern.calls == STEPS  # one launch per step for the whole group
    expected = ref(_init(), STEPS, **kwargs)
    for p, e in zip(ps, expected, strict=True):
        np.testing.assert_allclose(p.numpy(), e, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize(("cls", "ref", "kwargs"), CASES, ids=IDS)
def test_fused_and_portable_agree(backend, cls, ref, kwargs):
    """The backend's own fused kernel (if any) against the portable rules, float32."""
    a, _ = _run_vtl(cls, {**kwargs, "foreach": None}, np.float32, steps=12)
    b, _ = _run_vtl(cls, {**kwargs, "foreach": False}, np.float32, steps=12)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-5, atol=1e-6)


PROGRAMS = [
    *[_programs.nadam(weight_decay=w, decoupled=d, maximize=m)
      for w, d, m in ((False, False, False), (True, False, True), (True, True, False))],
    *[_programs.radam(weight_decay=w, decoupled=d, maximize=m)
      for w, d, m in ((False, False, False), (True, False, True), (True, True, False))],
    _programs.adamax(weight_decay=False, maximize=False),
    _programs.adamax(weight_decay=True, maximize=True),
]

_SHIM = """
#include <math.h>
#define __global__
#define __restrict__ __restrict
struct Dim { unsigned int x; };
static Dim blockIdx = {0}, blockDim = {1}, threadIdx = {0}, gridDim = {1};
"""


def test_cupy_kernel_source_on_the_host(tmp_path):
    """The CUDA source the cupy backend compiles for each new program, built as C++ for
    the CPU (one thread), updates the arrays as the program's own evaluation does."""
    from vtl.backends.cupy.optim import cuda_source

    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    names = [f"k{i}" for i in range(len(PROGRAMS))]
    src = _SHIM + "".join(cuda_source(prog, np.float64, name=n, scalars_in_memory=True)
                          for prog, n in zip(PROGRAMS, names, strict=True))
    (tmp_path / "k.cpp").write_text(src)
    lib = tmp_path / "k.so"
    subprocess.run([cxx, "-O1", "-shared", "-fPIC", "-o", str(lib), str(tmp_path / "k.cpp")],
                   check=True, capture_output=True)
    so = ctypes.CDLL(str(lib))
    rng = np.random.default_rng(0)
    for prog, name in zip(PROGRAMS, names, strict=True):
        fn = getattr(so, name)
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong,
                       ctypes.c_void_p]
        tensors = [[np.abs(rng.standard_normal(s)) if a in ("v", "u") else
                    rng.standard_normal(s) for a in prog.arrays] for s in ((3, 4), (5,))]
        scalars = rng.uniform(0.1, 0.9, len(prog.scalars))
        want = [prog.evaluate(np, arrs, scalars) for arrs in tensors]
        ptrs = np.array([a.ctypes.data for arrs in tensors for a in arrs], dtype=np.uint64)
        starts = np.array([0, 12], dtype=np.int64)
        fn(ptrs.ctypes.data, starts.ctypes.data, 2, 17, scalars.ctypes.data)
        for arrs, w in zip(tensors, want, strict=True):
            for a, val in zip(prog.writes, w, strict=True):
                np.testing.assert_allclose(arrs[prog.arrays.index(a)], val, rtol=1e-14,
                                           err_msg=f"{prog.name} {a}")


def _torch():
    try:
        import torch
    except ImportError:
        pytest.skip("PyTorch is not installed")
    return torch


@pytest.fixture
def torch64():
    """PyTorch with float64 as its default dtype (NAdam keeps mu_product in it)."""
    torch = _torch()
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield torch
    torch.set_default_dtype(old)


@pytest.mark.parametrize(("cls", "ref", "kwargs"), CASES, ids=IDS)
@pytest.mark.parametrize("foreach", [None, False])
def test_trajectory_matches_torch(torch64, cls, ref, kwargs, foreach):
    t = torch64
    tp = [t.tensor(a, dtype=t.float64, requires_grad=True) for a in _init()]
    topt = getattr(t.optim, cls.__name__)(tp, **kwargs, foreach=False)
    for k in range(STEPS):
        topt.zero_grad()
        for p in tp:
            p.grad = t.from_numpy(_grad(p.detach().numpy(), k))
        topt.step()
    with vtl.use_backend("numpy"):
        ps, opt = _run_vtl(cls, {**kwargs, "foreach": foreach}, np.float64)
    for p, q in zip(ps, tp, strict=True):
        np.testing.assert_allclose(p.numpy(), q.detach().numpy(), rtol=1e-12, atol=1e-14)
        ts, vs = topt.state[q], opt.state[p]
        assert int(ts["step"]) == vs["step"] == STEPS
        if "mu_product" in ts:
            assert float(ts["mu_product"]) == pytest.approx(vs["mu_product"], rel=1e-14)


def test_defaults_and_signatures_are_pytorchs():
    p = [vtl.asarray(np.ones(2), requires_grad=True)]
    assert optim.NAdam(p).defaults == {
        "lr": 2e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0,
        "momentum_decay": 4e-3, "decoupled_weight_decay": False, "maximize": False,
        "foreach": None}
    assert optim.RAdam(p).defaults == {
        "lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0,
        "decoupled_weight_decay": False, "maximize": False, "foreach": None}
    assert optim.Adamax(p).defaults == {
        "lr": 2e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0, "foreach": None,
        "maximize": False}
    assert optim.Adamax(p, 0.1, (0.5, 0.6), 1e-3, 0.2, False).defaults["foreach"] is False
    d = optim.LBFGS(p).defaults
    assert d == {"lr": 1, "max_iter": 20, "max_eval": 25, "tolerance_grad": 1e-7,
                 "tolerance_change": 1e-9, "history_size": 100, "line_search_fn": None}
    assert optim.LBFGS(p, max_iter=7).defaults["max_eval"] == 8


# ---------------------------------------------------------- state dicts
STATE_CASES = [CASES[3], CASES[6], CASES[10]]


@pytest.mark.parametrize(("cls", "ref", "kwargs"), STATE_CASES,
                         ids=[c.__name__ for c, _, _ in STATE_CASES])
def test_state_dict_round_trip_continues_identically(backend, cls, ref, kwargs):
    dtype = _dtype(backend)
    ps, opt = _run_vtl(cls, kwargs, dtype, steps=4)
    sd = opt.state_dict()
    keys = {"NAdam": {"step", "mu_product", "exp_avg", "exp_avg_sq"},
            "RAdam": {"step", "exp_avg", "exp_avg_sq"},
            "Adamax": {"step", "exp_avg", "exp_inf"}}[cls.__name__]
    assert set(sd["state"][0]) == keys
    qs = [vtl.asarray(p.numpy(), requires_grad=True) for p in ps]
    opt2 = cls(qs, **kwargs)
    opt2.load_state_dict(sd)
    _steps(opt, ps, dtype, 4, 9)  # the saved state dict is a copy: later steps leave it
    _steps(opt2, qs, dtype, 4, 9)
    for p, q in zip(ps, qs, strict=True):
        np.testing.assert_array_equal(p.numpy(), q.numpy())
    assert opt2.state_dict()["state"][0]["step"] == 9
    assert sd["state"][0]["step"] == 4


def test_state_dict_through_a_checkpoint(tmp_path):
    ps, opt = _run_vtl(optim.NAdam, {"lr": 0.05}, np.float64, steps=3)
    net = vtl.nn.Linear(1, 1)
    vtl.save_checkpoint(tmp_path / "c.safetensors", net, opt)
    qs = [vtl.asarray(p.numpy(), requires_grad=True) for p in ps]
    opt2 = optim.NAdam(qs, lr=0.05)
    vtl.load_checkpoint(tmp_path / "c.safetensors", net, opt2)
    assert opt2.state[qs[0]]["mu_product"] == opt.state[ps[0]]["mu_product"]
    _steps(opt, ps, np.float64, 3, 6)
    _steps(opt2, qs, np.float64, 3, 6)
    for p, q in zip(ps, qs, strict=True):
        np.testing.assert_array_equal(p.numpy(), q.numpy())


def test_nadam_loads_pytorch_style_mu_product_and_refuses_bad_state():
    ps, opt = _run_vtl(optim.NAdam, {}, np.float64, steps=2)
    sd = opt.state_dict()
    sd["state"][0]["mu_product"] = vtl.asarray(np.float64(0.5))  # a 0-d tensor
    opt.load_state_dict(sd)
    assert opt.state[ps[0]]["mu_product"] == 0.5
    sd["state"][0]["mu_product"] = "x"
    with pytest.raises(ValueError, match="mu_product"):
        opt.load_state_dict(sd)
    del sd["state"][0]["mu_product"]
    with pytest.raises(ValueError, match="lacks"):
        opt.load_state_dict(sd)
    sd = optim.Adamax([vtl.asarray(np.ones(3), requires_grad=True)]).state_dict()
    sd["state"] = {0: {"step": 1, "exp_avg": np.zeros(3), "exp_avg_sq": np.zeros(3)}}
    with pytest.raises(ValueError, match="unknown state 'exp_avg_sq'"):
        optim.Adamax([vtl.asarray(np.ones(3), requires_grad=True)]).load_state_dict(sd)


def test_errors():
    p = [vtl.asarray(np.ones(2), requires_grad=True)]
    for cls in (optim.NAdam, optim.RAdam, optim.Adamax):
        with pytest.raises(ValueError, match="lr"):
            cls(p, lr=-1.0)
        with pytest.raises(ValueError, match="beta2"):
            cls(p, betas=(0.9, 1.0))
        with pytest.raises(ValueError, match="betas"):
            cls(p, betas=0.9)
        with pytest.raises(ValueError, match="eps"):
            cls(p, eps=-1e-8)
        with pytest.raises(ValueError, match="weight_decay"):
            cls(p, weight_decay=-0.1)
        with pytest.raises(ValueError, match="maximize"):
            cls(p, maximize=1)
    with pytest.raises(ValueError, match="momentum_decay"):
        optim.NAdam(p, momentum_decay=-1.0)
    with pytest.raises(ValueError, match="decoupled_weight_decay"):
        optim.RAdam(p, decoupled_weight_decay="yes")
    c = vtl.asarray(np.ones(2, dtype=np.complex128), requires_grad=True)
    c.grad = vtl.asarray(np.ones(2, dtype=np.complex128))
    with pytest.raises(TypeError, match="complex"):
        optim.NAdam([c]).step()


# ------------------------------------------------------------ captured steps
def test_captured_steps_equal_eager_across_radam_rectification(backend):
    """RAdam's update switches form at the step where rho_t passes 5 (here step 6): a
    step captured before it replays the right rule after it; CyclicLR cycling betas[0]
    inside the captured function reaches the replays too."""
    from vtl import nn

    def train(compiled: bool, cls):
        vtl.random.seed(0)
        net = nn.Linear(4, 3).to(backend)
        opt = cls(net.parameters(), lr=0.05)
        sched = optim.lr_scheduler.CyclicLR(opt, 0.01, 0.05, step_size_up=3)
        rng = np.random.default_rng(0)
        xs = [vtl.asarray(rng.standard_normal((5, 4), dtype=np.float32), device=backend)
              for _ in range(10)]

        def step(x):
            opt.zero_grad()
            loss = vtl.mean(net(x) ** 2)
            loss.backward()
            opt.step()
            sched.step()
            return loss

        f = vtl.compile(step) if compiled else step
        losses = [float(f(x)) for x in xs]
        if compiled and vtl.backends.get(backend).can_capture:
            assert f.captures == 1
        return losses, [p.numpy() for p in net.parameters()]

    for cls in (optim.RAdam, optim.NAdam, optim.Adamax):
        eager, pe = train(False, cls)
        comp, pc = train(True, cls)
        assert comp == eager
        for a, b in zip(pe, pc, strict=True):
            np.testing.assert_array_equal(a, b)


def test_adam_family_steps_never_wait(backend):
    if backend == "numpy":
        pytest.skip("the numpy backend does not wait")
    from test_sync_free import count_waits

    for cls in (optim.NAdam, optim.RAdam, optim.Adamax):
        ps = [vtl.asarray(a.astype(np.float32), requires_grad=True) for a in _init()]
        grads = [vtl.asarray(np.ones(s, dtype=np.float32)) for s in SHAPES]
        for foreach in (None, False):
            opt = cls(ps, foreach=foreach)
            sched = optim.lr_scheduler.CyclicLR(opt, 1e-3, 1e-2, step_size_up=2)
            with count_waits(backend) as waits:
                for _ in range(7):  # through RAdam's switch
                    for p, g in zip(ps, grads, strict=True):
                        p.grad = g
                    opt.step()
                    sched.step()
            assert waits == [], (cls.__name__, foreach, waits)


# ------------------------------------------------------------------ LBFGS
def _rosen(x):
    return (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2


def _rosen_grad(x: np.ndarray) -> np.ndarray:
    return np.array([-2 * (1 - x[0]) - 400 * x[0] * (x[1] - x[0] ** 2),
                     200 * (x[1] - x[0] ** 2)])


X0 = np.array([-1.5, 2.0])


def _lbfgs_vtl(kwargs, steps, dtype=np.float64, autograd=True):
    x = vtl.asarray(X0.astype(dtype), requires_grad=True)
    opt = optim.LBFGS([x], **kwargs)

    def closure():
        opt.zero_grad()
        if autograd:
            loss = _rosen(x)
            loss.backward()
            return loss
        v = x.numpy().astype(np.float64)
        x.grad = vtl.asarray(_rosen_grad(v).astype(dtype))
        return vtl.asarray(_rosen(v))

    path, losses = [], []
    for _ in range(steps):
        losses.append(float(opt.step(closure)))
        path.append(x.numpy().astype(np.float64))
    return np.array(path), losses, opt, x, closure


def test_lbfgs_strong_wolfe_minimises_rosenbrock(backend):
    skip = "float64" not in supported_dtypes(backend)
    if skip:
        pytest.skip(f"{backend} lacks float64")
    path, losses, opt, x, _ = _lbfgs_vtl({"line_search_fn": "strong_wolfe"}, 3)
    np.testing.assert_allclose(path[-1], [1.0, 1.0], atol=1e-5)
    assert _rosen(path[-1]) < 1e-9
    assert losses[0] == pytest.approx(_rosen(X0))
    st = opt.state[x]
    assert st["n_iter"] > 20 and st["func_evals"] >= st["n_iter"]
    assert len(st["old_dirs"]) == len(st["old_stps"]) == len(st["ro"]) <= 100


def ref_lbfgs_fixed_step(x, steps, lr, max_iter, history_size, tolerance_grad=1e-7,
                         tolerance_change=1e-9):
    """L-BFGS without line search (the two-loop recursion, a fixed step ``lr``, the first
    step scaled by min(1, 1/|g|_1)), as documented for PyTorch's LBFGS."""
    x = x.copy()
    n_total = 0
    s_hist, y_hist = [], []
    h_diag, d, t, g_prev = 1.0, None, None, None
    path = []
    for _ in range(steps):
        loss, g = _rosen(x), _rosen_grad(x)
        if np.max(np.abs(g)) <= tolerance_grad:
            path.append(x.copy())
            continue
        for it in range(1, max_iter + 1):
            n_total += 1
            if n_total == 1:
                d = -g
            else:
                y, s = g - g_prev, d * t
                if y @ s > 1e-10:
                    if len(s_hist) == history_size:
                        s_hist.pop(0)
                        y_hist.pop(0)
                    s_hist.append(s)
                    y_hist.append(y)
                    h_diag = (y @ s) / (y @ y)
                q = -g
                alphas = []
                for s_i, y_i in zip(reversed(s_hist), reversed(y_hist), strict=True):
                    a = (s_i @ q) / (y_i @ s_i)
                    alphas.append(a)
                    q = q - a * y_i
                r = q * h_diag
                for (s_i, y_i), a in zip(zip(s_hist, y_hist, strict=True), reversed(alphas),
                                         strict=True):
                    b = (y_i @ r) / (y_i @ s_i)
                    r = r + (a - b) * s_i
                d = r
            g_prev, prev_loss = g, loss
            t = min(1.0, 1.0 / np.sum(np.abs(g))) * lr if n_total == 1 else lr
            if g @ d > -tolerance_change:
                break
            x = x + t * d
            if it == max_iter:
                break
            loss, g = _rosen(x), _rosen_grad(x)
            if it + 1 >= max_iter * 5 // 4:  # max_eval (evaluations: 1 + it)
                break
            if np.max(np.abs(g)) <= tolerance_grad or np.max(np.abs(d * t)) <= tolerance_change \
                    or abs(loss - prev_loss) < tolerance_change:
                break
        path.append(x.copy())
    return np.array(path)


@pytest.mark.parametrize(("lr", "max_iter", "history_size"), [(0.05, 7, 2), (0.1, 20, 100)])
def test_lbfgs_fixed_step_matches_reference(backend, lr, max_iter, history_size):
    dtype = _dtype(backend)
    kw = {"lr": lr, "max_iter": max_iter, "history_size": history_size}
    path, _, _, _, _ = _lbfgs_vtl(kw, 4, dtype=dtype, autograd=False)
    expected = ref_lbfgs_fixed_step(X0.astype(dtype).astype(np.float64), 4, lr, max_iter,
                                    history_size)
    tol = {"rtol": 1e-8, "atol": 1e-10} if dtype == np.float64 else {"rtol": 1e-3, "atol": 1e-4}
    np.testing.assert_allclose(path, expected, **tol)


def test_strong_wolfe_conditions_hold():
    """The line search returns a step satisfying both strong Wolfe conditions."""
    c1, c2 = 1e-4, 0.9
    d = np.array([1.0, 0.3])

    def f(x):
        return float(np.sum(np.cos(2 * x) + 0.1 * x**4)), -2 * np.sin(2 * x) + 0.4 * x**3

    for x0, t0 in ((np.array([0.2, 0.1]), 1.0), (np.array([0.1, 0.0]), 30.0),
                   (np.array([0.4, -0.2]), 1e-3)):
        f0, g0 = f(x0)
        gtd = float(g0 @ d)
        assert gtd < 0

        def obj(x, t, d):
            return f(x + t * d)

        f_new, g_new, t, evals = _lbfgs._strong_wolfe(
            obj, lambda a, b: float(a @ b), lambda a: float(np.max(np.abs(a))), x0, t0, d,
            f0, g0, gtd)
        assert f_new == pytest.approx(f(x0 + t * d)[0])
        assert f_new <= f0 + c1 * t * gtd
        assert abs(float(g_new @ d)) <= -c2 * gtd
        assert 1 <= evals <= 25


def test_cubic_interpolate():
    # the minimiser of the cubic through two points with slopes (a quadratic here)
    q = lambda x: (x - 0.3) ** 2  # noqa: E731
    assert _lbfgs._cubic_interpolate(0.0, q(0.0), -0.6, 1.0, q(1.0), 1.4) == pytest.approx(0.3)
    # a cubic without a minimum: the middle of the bounds
    assert _lbfgs._cubic_interpolate(0.0, 0.0, 1.0, 1.0, 2 / 3, 1.0, bounds=(0.2, 0.6)) == 0.4
    # degenerate (a zero denominator; PyTorch's tensors give nan): the middle too
    assert _lbfgs._cubic_interpolate(0.0, 0.0, 0.0, 1.0, 0.0, 0.0, bounds=(0.2, 0.6)) == 0.4
    assert _lbfgs._cubic_interpolate(1.0, 0.0, -1.0, 1.0, 0.0, 1.0) == 1.0


LBFGS_TORCH = [({"line_search_fn": "strong_wolfe"}, 3), ({"lr": 0.1}, 4),
               ({"line_search_fn": "strong_wolfe", "max_iter": 5, "history_size": 3}, 4),
               ({"lr": 0.05, "max_iter": 7, "history_size": 2}, 6)]


@pytest.mark.parametrize(("kw", "steps"), LBFGS_TORCH)
def test_lbfgs_matches_torch(kw, steps):
    torch = _torch()
    tx = torch.tensor(X0, dtype=torch.float64, requires_grad=True)
    topt = torch.optim.LBFGS([tx], **kw)

    def closure():
        topt.zero_grad()
        loss = _rosen(tx)
        loss.backward()
        return loss

    tpath = []
    for _ in range(steps):
        topt.step(closure)
        tpath.append(tx.detach().numpy().copy())
    with vtl.use_backend("numpy"):
        path, _, opt, x, _ = _lbfgs_vtl(kw, steps)
    # PyTorch's CPU kernels fuse multiply-adds; the iterates agree to rounding
    np.testing.assert_allclose(path, np.array(tpath), rtol=1e-9, atol=1e-12)
    ts, vs = topt.state[tx], opt.state[x]
    assert (ts["func_evals"], ts["n_iter"]) == (vs["func_evals"], vs["n_iter"])
    assert len(ts["old_dirs"]) == len(vs["old_dirs"])


def test_lbfgs_several_parameters_and_a_missing_gradient(backend):
    dtype = _dtype(backend)
    a = vtl.asarray(np.array([[-1.5]], dtype=dtype), requires_grad=True)
    b = vtl.asarray(np.array(2.0, dtype=dtype), requires_grad=True)
    unused = vtl.asarray(np.ones(3, dtype=dtype), requires_grad=True)
    opt = optim.LBFGS([a, unused, b], line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = _rosen([a[0, 0], b])
        loss.backward()
        return loss

    for _ in range(3):
        opt.step(closure)
    tol = 1e-5 if dtype == np.float64 else 1e-2
    np.testing.assert_allclose([a.numpy()[0, 0], b.numpy()], [1.0, 1.0], atol=tol)
    np.testing.assert_array_equal(unused.numpy(), np.ones(3))


def test_lbfgs_state_dict_round_trip_and_checkpoint(tmp_path):
    kw = {"line_search_fn": "strong_wolfe", "max_iter": 4, "history_size": 3}
    _, _, opt, x, _ = _lbfgs_vtl(kw, 2)
    sd = opt.state_dict()
    st = sd["state"][0]
    k = st["old_dirs"].shape[0]
    assert st["old_dirs"].shape == st["old_stps"].shape == (k, 2) and st["ro"].shape == (k,)
    assert 1 <= k <= 3 and isinstance(st["t"], (int, float)) and 4 < st["n_iter"] <= 8

    def resumed(load):
        y = vtl.asarray(x.numpy(), requires_grad=True)
        opt2 = optim.LBFGS([y], **kw)
        load(opt2)

        def closure():
            opt2.zero_grad()
            loss = _rosen(y)
            loss.backward()
            return loss
        return opt2, y, closure

    def go(o, p, c):
        for _ in range(2):
            o.step(c)
        return p.numpy()

    opt2, y, c2 = resumed(lambda o: o.load_state_dict(sd))
    net = vtl.nn.Linear(1, 1)
    vtl.save_checkpoint(tmp_path / "l.safetensors", net, opt)
    opt3, z, c3 = resumed(lambda o: vtl.load_checkpoint(tmp_path / "l.safetensors", net, o))

    def closure():
        opt.zero_grad()
        loss = _rosen(x)
        loss.backward()
        return loss

    ref = go(opt, x, closure)
    np.testing.assert_array_equal(go(opt2, y, c2), ref)
    np.testing.assert_array_equal(go(opt3, z, c3), ref)
    # PyTorch's list form of the history is accepted too
    st_list = dict(st, old_dirs=list(st["old_dirs"]), old_stps=list(st["old_stps"]),
                   ro=[float(r) for r in st["ro"].numpy()], al=[None] * 3)
    opt4, _, _ = resumed(lambda o: o.load_state_dict({**sd, "state": {0: st_list}}))
    assert len(opt4.state_dict()["state"][0]["old_dirs"]) == k


def test_lbfgs_errors():
    x = vtl.asarray(np.ones(2), requires_grad=True)
    with pytest.raises(ValueError, match="parameter groups"):
        optim.LBFGS([{"params": [x]}, {"params": [vtl.asarray(np.ones(1), requires_grad=True)]}])
    with pytest.raises(ValueError, match="line_search_fn"):
        optim.LBFGS([x], line_search_fn="armijo")
    with pytest.raises(ValueError, match="history_size"):
        optim.LBFGS([x], history_size=0)
    with pytest.raises(ValueError, match="max_iter"):
        optim.LBFGS([x], max_iter=1.5)
    with pytest.raises(ValueError, match="lr"):
        optim.LBFGS([x], lr=-1)
    with pytest.raises(TypeError, match="closure"):
        optim.LBFGS([x]).step()
    with pytest.raises(ValueError, match="one dtype"):
        optim.LBFGS([x, vtl.asarray(np.ones(2, dtype=np.float32), requires_grad=True)])
    with pytest.raises(TypeError, match="floating"):
        optim.LBFGS([vtl.asarray(np.ones(2, dtype=np.complex128), requires_grad=True)])
    opt = optim.LBFGS([x])
    sd = opt.state_dict()
    bad = {**sd, "state": {0: {"n_iter": 1, "old_dirs": np.zeros((2, 2)),
                               "old_stps": np.zeros((1, 2)), "ro": np.zeros(2)}}}
    with pytest.raises(ValueError, match="history lengths differ"):
        opt.load_state_dict(bad)
    bad = {**sd, "state": {0: {"d": np.zeros(3)}}}
    with pytest.raises(ValueError, match="'d'"):
        opt.load_state_dict(bad)
    bad = {**sd, "state": {0: {"momentum_buffer": np.zeros(2)}}}
    with pytest.raises(ValueError, match="unknown state"):
        opt.load_state_dict(bad)
    assert opt.state == {}


def test_lbfgs_stops_at_once_on_a_stationary_point():
    x = vtl.asarray(np.ones(2), requires_grad=True)
    opt = optim.LBFGS([x])
    calls = []

    def closure():
        calls.append(1)
        opt.zero_grad()
        loss = _rosen(x)
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert float(loss) == 0.0 and len(calls) == 1
    assert opt.state[x] == {"func_evals": 1, "n_iter": 0}


def test_lbfgs_step_cannot_be_captured(backend):
    if not vtl.backends.get(backend).can_capture:
        pytest.skip("the numpy backend runs eagerly")
    x = vtl.asarray(np.array([-1.5, 2.0], dtype=np.float32), requires_grad=True)
    opt = optim.LBFGS([x], max_iter=2)

    def closure():
        opt.zero_grad()
        loss = _rosen(x)
        loss.backward()
        return loss

    step = vtl.compile(lambda: opt.step(closure) * 1.0)
    step()  # eager warm-up call
    with pytest.raises(vtl.CaptureError, match="LBFGS"):
        step()
