"""LR schedulers: 60-step schedules against closed-form references written here
(PyTorch's documented formulas) and PyTorch itself when importable; state dict
round trips; errors."""

from __future__ import annotations

import math
from bisect import bisect_right

import numpy as np
import pytest

import vtl
from vtl import optim
from vtl.optim import lr_scheduler as S

STEPS = 60
LRS = (0.1, 0.02)


def _opt(cls=optim.SGD, **kw):
    a = vtl.asarray(np.ones(2), requires_grad=True)
    b = vtl.asarray(np.ones(3), requires_grad=True)
    return cls([{"params": [a]}, {"params": [b], "lr": LRS[1]}], lr=LRS[0], **kw)


def _schedule(make, steps=STEPS, opt_cls=optim.SGD, **opt_kw):
    """lrs (per group) after construction and after each of ``steps`` steps."""
    opt = _opt(opt_cls, **opt_kw)
    sched = make(opt)
    out = [[g["lr"] for g in opt.param_groups]]
    for _ in range(steps):
        opt.step()
        sched.step()
        out.append([g["lr"] for g in opt.param_groups])
        assert sched.get_last_lr() == out[-1]
    return np.array(out)


def _closed(fn, steps=STEPS):
    return np.array([[fn(b, e) for b in LRS] for e in range(steps + 1)])


def _linear(b, e, s=0.25, f=1.0, n=8):
    return b * (s + (f - s) * min(n, e) / n)


CASES = {
    "step": (lambda o: S.StepLR(o, step_size=7, gamma=0.5),
             lambda b, e: b * 0.5 ** (e // 7)),
    "step-default-gamma": (lambda o: S.StepLR(o, 10), lambda b, e: b * 0.1 ** (e // 10)),
    "multistep": (lambda o: S.MultiStepLR(o, [5, 12, 12, 40], gamma=0.3),
                  lambda b, e: b * 0.3 ** bisect_right([5, 12, 12, 40], e)),
    "exponential": (lambda o: S.ExponentialLR(o, gamma=0.95), lambda b, e: b * 0.95**e),
    "cosine": (lambda o: S.CosineAnnealingLR(o, T_max=25, eta_min=1e-3),
               lambda b, e: 1e-3 + (b - 1e-3) * (1 + math.cos(math.pi * e / 25)) / 2),
    "cosine-eta0": (lambda o: S.CosineAnnealingLR(o, T_max=60),
                    lambda b, e: b * (1 + math.cos(math.pi * e / 60)) / 2),
    "linear": (lambda o: S.LinearLR(o, start_factor=0.25, total_iters=8), _linear),
    "linear-decay": (lambda o: S.LinearLR(o, start_factor=1.0, end_factor=0.1, total_iters=30),
                     lambda b, e: _linear(b, e, 1.0, 0.1, 30)),
    "linear-defaults": (lambda o: S.LinearLR(o), lambda b, e: _linear(b, e, 1 / 3, 1.0, 5)),
    "lambda": (lambda o: S.LambdaLR(o, lambda e: 1.0 / (1 + e)), lambda b, e: b / (1 + e)),
    "sequential": (
        lambda o: S.SequentialLR(o, [S.LinearLR(o, start_factor=0.25, total_iters=8),
                                     S.ExponentialLR(o, gamma=0.9)], milestones=[10]),
        lambda b, e: _linear(b, e) if e < 10 else b * 0.9 ** (e - 10)),
    "sequential-3": (
        lambda o: S.SequentialLR(o, [S.ExponentialLR(o, gamma=0.9),
                                     S.StepLR(o, step_size=4, gamma=0.5),
                                     S.CosineAnnealingLR(o, T_max=20)], milestones=[6, 30]),
        lambda b, e: (b * 0.9**e if e < 6 else b * 0.5 ** ((e - 6) // 4) if e < 30
                      else b * (1 + math.cos(math.pi * (e - 30) / 20)) / 2)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_schedule_matches_closed_form(name):
    make, ref = CASES[name]
    np.testing.assert_allclose(_schedule(make), _closed(ref), rtol=1e-9, atol=1e-15)


def _torch():
    try:
        import torch
    except ImportError:
        pytest.skip("PyTorch is not installed")
    return torch


def _torch_equivalent(torch, name, opt):
    T = torch.optim.lr_scheduler
    src = {
        "step": lambda: T.StepLR(opt, step_size=7, gamma=0.5),
        "step-default-gamma": lambda: T.StepLR(opt, 10),
        "multistep": lambda: T.MultiStepLR(opt, [5, 12, 12, 40], gamma=0.3),
        "exponential": lambda: T.ExponentialLR(opt, gamma=0.95),
        "cosine": lambda: T.CosineAnnealingLR(opt, T_max=25, eta_min=1e-3),
        "cosine-eta0": lambda: T.CosineAnnealingLR(opt, T_max=60),
        "linear": lambda: T.LinearLR(opt, start_factor=0.25, total_iters=8),
        "linear-decay": lambda: T.LinearLR(opt, start_factor=1.0, end_factor=0.1,
                                           total_iters=30),
        "linear-defaults": lambda: T.LinearLR(opt),
        "lambda": lambda: T.LambdaLR(opt, lambda e: 1.0 / (1 + e)),
        "sequential": lambda: T.SequentialLR(
            opt, [T.LinearLR(opt, start_factor=0.25, total_iters=8),
                  T.ExponentialLR(opt, gamma=0.9)], milestones=[10]),
        "sequential-3": lambda: T.SequentialLR(
            opt, [T.ExponentialLR(opt, gamma=0.9), T.StepLR(opt, step_size=4, gamma=0.5),
                  T.CosineAnnealingLR(opt, T_max=20)], milestones=[6, 30]),
    }
    return src[name]()


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name", list(CASES))
def test_schedule_matches_torch(name):
    torch = _torch()
    a, b = torch.zeros(2, requires_grad=True), torch.zeros(3, requires_grad=True)
    opt = torch.optim.SGD([{"params": [a]}, {"params": [b], "lr": LRS[1]}], lr=LRS[0])
    sched = _torch_equivalent(torch, name, opt)
    out = [[g["lr"] for g in opt.param_groups]]
    for _ in range(STEPS):
        opt.step()
        sched.step()
        out.append([g["lr"] for g in opt.param_groups])
    np.testing.assert_allclose(_schedule(CASES[name][0]), np.array(out), rtol=1e-12)


# ------------------------------------------------------------- OneCycleLR
def ref_one_cycle(max_lr, total, pct=0.3, div=25.0, final_div=1e4, strategy="cos",
                  three_phase=False, base_m=0.85, max_m=0.95):
    init = max_lr / div
    lo = init / final_div

    def anneal(a, b, t):
        if strategy == "cos":
            return b + (a - b) / 2 * (math.cos(math.pi * t) + 1)
        return a + (b - a) * t

    if three_phase:
        phases = [(pct * total - 1, init, max_lr, max_m, base_m),
                  (2 * pct * total - 2, max_lr, init, base_m, max_m),
                  (total - 1, init, lo, max_m, max_m)]
    else:
        phases = [(pct * total - 1, init, max_lr, max_m, base_m),
                  (total - 1, max_lr, lo, base_m, max_m)]
    lrs, moms = [], []
    for step in range(total):
        start = 0.0
        for i, (end, a, b, ma, mb) in enumerate(phases):
            if step <= end or i == len(phases) - 1:
                t = (step - start) / (end - start)
                lrs.append(anneal(a, b, t))
                moms.append(anneal(ma, mb, t))
                break
            start = end
    return np.array(lrs), np.array(moms)


@pytest.mark.parametrize("kw", [{}, {"anneal_strategy": "linear"}, {"three_phase": True},
                                {"pct_start": 0.5, "div_factor": 10.0,
                                 "final_div_factor": 100.0}])
@pytest.mark.parametrize("opt_cls", [optim.SGD, optim.Adam])
def test_one_cycle(kw, opt_cls):
    total = 50
    opt_kw = {"momentum": 0.9} if opt_cls is optim.SGD else {}
    opt = _opt(opt_cls, **opt_kw)
    sched = S.OneCycleLR(opt, max_lr=[1.0, 0.5], total_steps=total, **kw)
    lrs, moms = [], []
    for _ in range(total):
        g = opt.param_groups[1]
        lrs.append(g["lr"])
        moms.append(g["momentum"] if opt_cls is optim.SGD else g["betas"][0])
        opt.step()
        if len(lrs) < total:
            sched.step()
    args = {k: v for k, v in kw.items()}
    ref_kw = {"pct": args.pop("pct_start", 0.3), "div": args.pop("div_factor", 25.0),
              "final_div": args.pop("final_div_factor", 1e4),
              "strategy": args.pop("anneal_strategy", "cos"),
              "three_phase": args.pop("three_phase", False)}
    ref_lr, ref_m = ref_one_cycle(0.5, total, **ref_kw)
    np.testing.assert_allclose(lrs, ref_lr, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(moms, ref_m, rtol=1e-12)
    assert opt.param_groups[0]["max_lr"] == 1.0
    sched.step()  # step number == total_steps is allowed, one more is not
    with pytest.raises(ValueError, match="total steps"):
        sched.step()


def test_one_cycle_matches_torch():
    torch = _torch()
    p = torch.zeros(2, requires_grad=True)
    topt = torch.optim.Adam([p], lr=0.1)
    tsched = torch.optim.lr_scheduler.OneCycleLR(topt, max_lr=0.3, epochs=4, steps_per_epoch=10,
                                                 three_phase=True)
    opt = optim.Adam([vtl.asarray(np.zeros(2), requires_grad=True)], lr=0.1)
    sched = S.OneCycleLR(opt, max_lr=0.3, epochs=4, steps_per_epoch=10, three_phase=True)
    for _ in range(39):
        assert opt.param_groups[0]["lr"] == pytest.approx(topt.param_groups[0]["lr"], rel=1e-12)
        assert opt.param_groups[0]["betas"] == pytest.approx(topt.param_groups[0]["betas"])
        topt.step()
        tsched.step()
        opt.step()
        sched.step()


def test_one_cycle_errors():
    opt = _opt()
    with pytest.raises(ValueError, match="total_steps"):
        S.OneCycleLR(opt, max_lr=1.0)
    with pytest.raises(ValueError, match="total_steps"):
        S.OneCycleLR(opt, max_lr=1.0, total_steps=0)
    with pytest.raises(ValueError, match="pct_start"):
        S.OneCycleLR(opt, max_lr=1.0, total_steps=10, pct_start=1.5)
    with pytest.raises(ValueError, match="anneal_strategy"):
        S.OneCycleLR(opt, max_lr=1.0, total_steps=10, anneal_strategy="exp")
    with pytest.raises(ValueError, match="momentum"):
        S.OneCycleLR(_opt(optim.Adagrad), max_lr=1.0, total_steps=10)
    with pytest.raises(ValueError, match="max_lr"):
        S.OneCycleLR(opt, max_lr=[1.0, 2.0, 3.0], total_steps=10)


# ------------------------------------------------------- ReduceLROnPlateau
def ref_plateau(metrics, lr, mode="min", factor=0.1, patience=10, threshold=1e-4,
                threshold_mode="rel", cooldown=0, min_lr=0.0, eps=1e-8):
    best = math.inf if mode == "min" else -math.inf
    bad = cool = 0
    out = []
    for m in metrics:
        if mode == "min":
            better = m < (best * (1 - threshold) if threshold_mode == "rel" else best - threshold)
        else:
            better = m > (best * (1 + threshold) if threshold_mode == "rel" else best + threshold)
        if better:
            best, bad = m, 0
        else:
            bad += 1
        if cool > 0:
            cool -= 1
            bad = 0
        if bad > patience:
            new = max(lr * factor, min_lr)
            if lr - new > eps:
                lr = new
            cool, bad = cooldown, 0
        out.append(lr)
    return out


def _metrics(mode):
    rng = np.random.default_rng(5)
    base = np.concatenate([np.linspace(1.0, 0.5, 15), np.full(25, 0.5), np.linspace(0.5, 0.3, 10),
                           np.full(30, 0.3)])
    base = base + rng.uniform(0, 1e-5, base.size)  # improvements below the threshold
    return list(base if mode == "min" else 2.0 - base)


@pytest.mark.parametrize("kw", [
    {}, {"mode": "max"}, {"patience": 3}, {"patience": 2, "cooldown": 4},
    {"threshold_mode": "abs", "threshold": 0.01, "patience": 3},
    {"mode": "max", "threshold_mode": "abs", "threshold": 1e-3, "patience": 1},
    {"patience": 0, "factor": 0.5, "min_lr": 0.01},
    {"patience": 1, "factor": 0.5, "min_lr": 0.0, "eps": 0.01},
    {"threshold": 0.0, "patience": 4},
])
def test_reduce_on_plateau(kw):
    opt = _opt()
    sched = S.ReduceLROnPlateau(opt, **kw)
    metrics = _metrics(kw.get("mode", "min"))
    got = []
    for m in metrics:
        opt.step()
        sched.step(vtl.asarray(m) if len(got) % 2 else m)  # tensor or float
        got.append(opt.param_groups[0]["lr"])
    assert sched.get_last_lr()[0] == got[-1]
    ref = ref_plateau(metrics, LRS[0], **kw)
    np.testing.assert_allclose(got, ref, rtol=1e-12)
    assert min(got) < LRS[0]  # the schedule did reduce


def test_reduce_on_plateau_per_group_min_lr_and_torch():
    opt = _opt()
    sched = S.ReduceLROnPlateau(opt, patience=0, factor=0.5, min_lr=[0.05, 0.0])
    for _ in range(5):
        sched.step(1.0)
    assert opt.param_groups[0]["lr"] == 0.05
    assert opt.param_groups[1]["lr"] == pytest.approx(LRS[1] * 0.5**4)
    torch = _torch()
    p = torch.zeros(1, requires_grad=True)
    topt = torch.optim.SGD([p], lr=0.1)
    tsched = torch.optim.lr_scheduler.ReduceLROnPlateau(topt, patience=2, cooldown=1,
                                                        threshold_mode="abs", threshold=1e-3)
    vopt = optim.SGD([vtl.asarray(np.zeros(1), requires_grad=True)], lr=0.1)
    vsched = S.ReduceLROnPlateau(vopt, patience=2, cooldown=1, threshold_mode="abs",
                                 threshold=1e-3)
    for m in _metrics("min"):
        tsched.step(m)
        vsched.step(m)
        assert vopt.param_groups[0]["lr"] == pytest.approx(topt.param_groups[0]["lr"])


def test_reduce_on_plateau_errors():
    opt = _opt()
    with pytest.raises(ValueError, match="factor"):
        S.ReduceLROnPlateau(opt, factor=1.0)
    with pytest.raises(ValueError, match="mode"):
        S.ReduceLROnPlateau(opt, mode="up")
    with pytest.raises(ValueError, match="threshold_mode"):
        S.ReduceLROnPlateau(opt, threshold_mode="pct")
    with pytest.raises(ValueError, match="min_lr"):
        S.ReduceLROnPlateau(opt, min_lr=[0.1])


# ----------------------------------------------------------- state dicts
@pytest.mark.parametrize("name", list(CASES))
def test_state_dict_round_trip(name):
    make, _ = CASES[name]
    opt = _opt()
    sched = make(opt)
    for _ in range(23):
        opt.step()
        sched.step()
    osd, ssd = opt.state_dict(), sched.state_dict()
    assert "optimizer" not in ssd
    opt2 = _opt()
    sched2 = make(opt2)
    opt2.load_state_dict(osd)
    sched2.load_state_dict(ssd)
    for _ in range(30):
        for o, s in ((opt, sched), (opt2, sched2)):
            o.step()
            s.step()
        assert [g["lr"] for g in opt2.param_groups] == [g["lr"] for g in opt.param_groups]


def test_plateau_state_dict_round_trip():
    metrics = _metrics("min")
    opt = _opt()
    sched = S.ReduceLROnPlateau(opt, patience=2, cooldown=1)
    for m in metrics[:20]:
        sched.step(m)
    opt2 = _opt()
    sched2 = S.ReduceLROnPlateau(opt2)
    opt2.load_state_dict(opt.state_dict())
    sched2.load_state_dict(sched.state_dict())
    for m in metrics[20:]:
        sched.step(m)
        sched2.step(m)
        assert opt.param_groups[0]["lr"] == opt2.param_groups[0]["lr"]


def test_lambda_state_dict_saves_callable_objects_not_functions():
    class Decay:
        def __init__(self):
            self.rate = 0.5

        def __call__(self, e):
            return self.rate**e

    opt = optim.SGD([vtl.asarray(np.ones(1), requires_grad=True)], lr=1.0)
    fn = Decay()
    sched = S.LambdaLR(opt, fn)
    fn.rate = 0.25
    sd = sched.state_dict()
    assert sd["lr_lambdas"] == [{"rate": 0.25}]
    fn2 = Decay()
    sched2 = S.LambdaLR(optim.SGD([vtl.asarray(np.ones(1), requires_grad=True)], lr=1.0), fn2)
    sched2.load_state_dict(sd)
    assert fn2.rate == 0.25 and sched2.last_epoch == 0
    sd = S.LambdaLR(opt, lambda e: 1.0).state_dict()
    assert sd["lr_lambdas"] == [None]


# --------------------------------------------------------------- errors, misc
def test_scheduler_errors():
    opt = _opt()
    with pytest.raises(TypeError, match="Optimizer"):
        S.StepLR(object(), 3)
    with pytest.raises(ValueError, match="step_size"):
        S.StepLR(opt, 0)
    with pytest.raises(ValueError, match="T_max"):
        S.CosineAnnealingLR(opt, T_max=0)
    with pytest.raises(ValueError, match="start_factor"):
        S.LinearLR(opt, start_factor=0.0)
    with pytest.raises(ValueError, match="end_factor"):
        S.LinearLR(opt, end_factor=1.5)
    with pytest.raises(ValueError, match="lr_lambdas"):
        S.LambdaLR(opt, [lambda e: 1.0])
    with pytest.raises(ValueError, match="milestones"):
        S.MultiStepLR(opt, [5, 3])
    with pytest.raises(KeyError, match="initial_lr"):
        S.StepLR(_opt(), 3, last_epoch=5)
    with pytest.raises(ValueError, match="milestones"):
        S.SequentialLR(opt, [S.StepLR(opt, 2), S.StepLR(opt, 3)], milestones=[])
    other = _opt()
    with pytest.raises(ValueError, match="different optimizer"):
        S.SequentialLR(opt, [S.StepLR(opt, 2), S.StepLR(other, 3)], milestones=[4])
    with pytest.raises(ValueError, match="at least one"):
        S.SequentialLR(opt, [], milestones=[])


def test_step_with_epoch_uses_closed_form_and_initial_lr_is_kept():
    opt = _opt()
    sched = S.StepLR(opt, step_size=3, gamma=0.5)
    assert all(g["initial_lr"] == lr for g, lr in zip(opt.param_groups, LRS, strict=True))
    sched.step(7)
    assert opt.param_groups[0]["lr"] == pytest.approx(LRS[0] * 0.25)
    resumed = S.StepLR(opt, step_size=3, gamma=0.5, last_epoch=7)
    assert resumed.base_lrs == list(LRS)


def test_scheduler_drives_training_lr(backend):
    """The optimizer step uses the lr the scheduler wrote into the group."""
    p = vtl.asarray(np.zeros(3, dtype=np.float32), requires_grad=True)
    opt = optim.SGD([p], lr=1.0)
    sched = S.StepLR(opt, step_size=1, gamma=0.5)
    total = 0.0
    for k in range(5):
        p.grad = vtl.ones_like(p)
        opt.step()
        total += 0.5**k
        sched.step()
    np.testing.assert_allclose(p.numpy(), -total * np.ones(3), rtol=1e-6)
