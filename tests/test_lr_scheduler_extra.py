"""ConstantLR, PolynomialLR, MultiplicativeLR, CosineAnnealingWarmRestarts, CyclicLR and
ChainedScheduler (and SequentialLR around them): lr (and momentum) sequences against
closed forms written here from PyTorch's documentation, and against PyTorch itself when
importable; state dict round trips; captured steps; errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

import vtl
from vtl import optim
from vtl.optim import lr_scheduler as S

STEPS = 40
LRS = (0.1, 0.02)


def _opt(optim_mod, cls="SGD", array=None, **kw):
    array = array or (lambda n: vtl.asarray(np.ones(n), requires_grad=True))
    a, b = array(2), array(3)
    return getattr(optim_mod.optim, cls)([{"params": [a]}, {"params": [b], "lr": LRS[1]}],
                                         lr=LRS[0], **kw)


def _momenta(opt):
    return [g["betas"][0] if "betas" in g else g.get("momentum", 0.0)
            for g in opt.param_groups]


def _schedule(make, sched_mod=S, optim_mod=vtl, steps=STEPS, cls="SGD", epochs=None, **kw):
    """lrs and momenta (per group) after construction and after each step."""
    if optim_mod is vtl:
        opt = _opt(vtl, cls, **kw)
    else:
        opt = _opt(optim_mod, cls, array=lambda n: optim_mod.ones(n, requires_grad=True), **kw)
    sched = make(sched_mod, opt)
    lrs, moms = [[g["lr"] for g in opt.param_groups]], [_momenta(opt)]
    for i in range(steps):
        opt.step()
        if epochs is None:
            sched.step()
        else:
            sched.step(epochs[i])
        lrs.append([g["lr"] for g in opt.param_groups])
        moms.append(_momenta(opt))
        assert list(sched.get_last_lr()) == lrs[-1]
    return np.array(lrs), np.array(moms)


def _closed(fn, steps=STEPS):
    return np.array([[fn(b, e) for b in LRS] for e in range(steps + 1)])


def _warm_restart(b, e, t0, mult=1, eta_min=0.0):
    """SGDR: T_cur and T_i of (possibly fractional) epoch ``e``."""
    t_i, start = t0, 0
    while e >= start + t_i:
        start += t_i
        t_i *= mult
    return eta_min + (b - eta_min) * (1 + math.cos(math.pi * (e - start) / t_i)) / 2


def _triangle(e, up, down):
    """The fraction of the amplitude at iteration ``e`` of a cycle of up + down steps."""
    pos = e % (up + down)
    return pos / up if pos <= up else (up + down - pos) / down


def _cyclic(base, top, e, up, down=None, scale=lambda cycle, e: 1.0):
    down = up if down is None else down
    cycle = math.floor(1 + e / (up + down))
    return base + (top - base) * _triangle(e, up, down) * scale(cycle, e)


CYCLIC_BASE, CYCLIC_MAX = [0.01, 0.002], [0.1, 0.05]


def _cyc(**kw):
    return lambda m, o: m.CyclicLR(o, CYCLIC_BASE, CYCLIC_MAX, **kw)


CASES = {
    "constant": (lambda m, o: m.ConstantLR(o, factor=0.5, total_iters=4),
                 lambda b, e: b * (0.5 if e < 4 else 1.0)),
    "constant-defaults": (lambda m, o: m.ConstantLR(o),
                          lambda b, e: b * (1 / 3 if e < 5 else 1.0)),
    "polynomial": (lambda m, o: m.PolynomialLR(o, total_iters=25, power=2.0),
                   lambda b, e: b * (1 - min(e, 25) / 25) ** 2),
    "polynomial-defaults": (lambda m, o: m.PolynomialLR(o),
                            lambda b, e: b * (1 - min(e, 5) / 5)),
    "multiplicative": (lambda m, o: m.MultiplicativeLR(o, lambda e: 0.95),
                       lambda b, e: b * 0.95**e),
    "multiplicative-per-group": (
        lambda m, o: m.MultiplicativeLR(o, [lambda e: 0.9, lambda e: 1 - 0.01 * e]),
        None),
    "warm-restarts": (lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=7, eta_min=1e-3),
                      lambda b, e: _warm_restart(b, e, 7, 1, 1e-3)),
    "warm-restarts-mult": (lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2),
                           lambda b, e: _warm_restart(b, e, 3, 2)),
    "chained": (lambda m, o: m.ChainedScheduler([m.ConstantLR(o, factor=0.1, total_iters=3),
                                                 m.ExponentialLR(o, gamma=0.9)]),
                lambda b, e: b * 0.9**e * (0.1 if e < 3 else 1.0)),
    "chained-with-optimizer": (
        lambda m, o: m.ChainedScheduler([m.PolynomialLR(o, total_iters=30, power=0.5),
                                         m.MultiplicativeLR(o, lambda e: 0.98)], optimizer=o),
        lambda b, e: b * (1 - min(e, 30) / 30) ** 0.5 * 0.98**e),
    "sequential-new": (
        lambda m, o: m.SequentialLR(o, [m.ConstantLR(o, factor=0.25, total_iters=10),
                                        m.PolynomialLR(o, total_iters=20, power=1.5)],
                                    milestones=[6]),
        lambda b, e: b * 0.25 if e < 6 else b * (1 - min(e - 6, 20) / 20) ** 1.5),
    "sequential-multiplicative": (  # restarted at the milestone without a closed form
        lambda m, o: m.SequentialLR(o, [m.ExponentialLR(o, gamma=0.9),
                                        m.MultiplicativeLR(o, lambda e: 0.8 + 0.01 * e)],
                                    milestones=[5]),
        None),
    "sequential-chained": (
        lambda m, o: m.SequentialLR(
            o, [m.ChainedScheduler([m.ConstantLR(o, factor=0.5, total_iters=2),
                                    m.ExponentialLR(o, gamma=0.9)]),
                m.CosineAnnealingWarmRestarts(o, T_0=8)], milestones=[12]),
        None),
    "sequential-milestone-0": (
        lambda m, o: m.SequentialLR(o, [m.ExponentialLR(o, gamma=0.5),
                                        m.ConstantLR(o, factor=0.5, total_iters=4)],
                                    milestones=[0]),
        lambda b, e: b * (0.5 if e < 4 else 1.0)),
    "cyclic-triangular": (_cyc(step_size_up=4), None),
    "cyclic-asymmetric": (_cyc(step_size_up=3, step_size_down=5), None),
    "cyclic-triangular2": (_cyc(step_size_up=4, mode="triangular2"), None),
    "cyclic-exp-range": (_cyc(step_size_up=5, mode="exp_range", gamma=0.97), None),
    "cyclic-scale-fn-iterations": (
        _cyc(step_size_up=3, scale_fn=lambda x: 1 / (1 + 0.05 * x), scale_mode="iterations",
             base_momentum=[0.7, 0.75], max_momentum=0.95), None),
    "cyclic-no-momentum": (_cyc(step_size_up=6, cycle_momentum=False), None),
}

CYCLIC_SCALES = {
    "cyclic-triangular": ({"up": 4}, lambda c, e: 1.0),
    "cyclic-asymmetric": ({"up": 3, "down": 5}, lambda c, e: 1.0),
    "cyclic-triangular2": ({"up": 4}, lambda c, e: 1 / 2 ** (c - 1)),
    "cyclic-exp-range": ({"up": 5}, lambda c, e: 0.97**e),
    "cyclic-scale-fn-iterations": ({"up": 3}, lambda c, e: 1 / (1 + 0.05 * e)),
    "cyclic-no-momentum": ({"up": 6}, lambda c, e: 1.0),
}


def _expected(name):
    make, ref = CASES[name]
    if ref is not None:
        return _closed(ref)
    if name == "multiplicative-per-group":
        fns = [lambda e: 0.9**e, lambda e: math.prod(1 - 0.01 * k for k in range(1, e + 1))]
        return np.array([[b * f(e) for b, f in zip(LRS, fns, strict=True)]
                         for e in range(STEPS + 1)])
    if name in CYCLIC_SCALES:
        kw, scale = CYCLIC_SCALES[name]
        return np.array([[_cyclic(b, t, e, scale=scale, **kw)
                          for b, t in zip(CYCLIC_BASE, CYCLIC_MAX, strict=True)]
                         for e in range(STEPS + 1)])
    if name == "sequential-multiplicative":
        def f(b, e):
            if e < 5:
                return b * 0.9**e
            # restarted at epoch 0 from the lr it finds: lr * lr_lambda(0) at the milestone
            return b * 0.9**4 * math.prod(0.8 + 0.01 * k for k in range(0, e - 5 + 1))
        return _closed(f)
    if name == "sequential-chained":
        # PyTorch's ExponentialLR multiplies at epoch 0 unless it is its construction step
        return _closed(lambda b, e: b * 0.9 ** (e + 1) * (0.5 if e < 2 else 1.0) if e < 12
                       else _warm_restart(b, e - 12, 8))
    raise KeyError(name)


@pytest.mark.parametrize("name", list(CASES))
def test_schedule_matches_closed_form(name):
    lrs, _ = _schedule(CASES[name][0])
    np.testing.assert_allclose(lrs, _expected(name), rtol=1e-9, atol=1e-15)


@pytest.mark.parametrize("cls", ["SGD", "Adam"])
@pytest.mark.parametrize("name", list(CYCLIC_SCALES))
def test_cyclic_momentum_matches_closed_form(name, cls):
    """Momentum (SGD) or betas[0] (Adam) cycles inversely between the bounds."""
    kw, scale = CYCLIC_SCALES[name]
    _, moms = _schedule(CASES[name][0], cls=cls)
    if name == "cyclic-no-momentum":
        np.testing.assert_array_equal(moms, 0.0 if cls == "SGD" else 0.9)
        return
    base_m, max_m = ([0.7, 0.75], [0.95, 0.95]) if "scale-fn" in name else ([0.8] * 2, [0.9] * 2)
    expected = np.array([[hi - (hi - lo) * (_cyclic(0.0, 1.0, e, scale=scale, **kw))
                          for lo, hi in zip(base_m, max_m, strict=True)]
                         for e in range(STEPS + 1)])
    np.testing.assert_allclose(moms, expected, rtol=1e-12, atol=1e-15)


FRACTIONAL = [0.5 * k for k in range(STEPS)]


@pytest.mark.parametrize(("t0", "mult"), [(4, 1), (2, 3)])
def test_warm_restarts_fractional_epochs(t0, mult):
    def make(m, o):
        return m.CosineAnnealingWarmRestarts(o, T_0=t0, T_mult=mult, eta_min=1e-4)

    lrs, _ = _schedule(make, epochs=FRACTIONAL)
    expected = np.array([[_warm_restart(b, e, t0, mult, 1e-4) for b in LRS]
                         for e in [0, *FRACTIONAL]])
    np.testing.assert_allclose(lrs, expected, rtol=1e-9, atol=1e-15)


def _torch():
    try:
        import torch
    except ImportError:
        pytest.skip("PyTorch is not installed")
    return torch


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize(("name", "cls"), [(n, "SGD") for n in CASES]
                         + [(n, "Adam") for n in CYCLIC_SCALES])  # betas[0] cycles
def test_schedule_matches_torch(name, cls):
    torch = _torch()
    version = tuple(int(v) for v in torch.__version__.split("+")[0].split(".")[:2])
    if name == "sequential-milestone-0" and version < (2, 13):
        pytest.skip("vtl follows PyTorch 2.13's SequentialLR at milestone 0")
    ours = _schedule(CASES[name][0], cls=cls)
    theirs = _schedule(CASES[name][0], torch.optim.lr_scheduler, torch, cls=cls)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-12, atol=1e-16)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-12, atol=1e-16)


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize(("t0", "mult"), [(4, 1), (2, 3)])
def test_warm_restarts_fractional_epochs_match_torch(t0, mult):
    torch = _torch()

    def make(m, o):
        return m.CosineAnnealingWarmRestarts(o, T_0=t0, T_mult=mult, eta_min=1e-4)

    epochs = [*FRACTIONAL[:10], 3.25, 1.0, *FRACTIONAL[20:]]  # jumps back and forth too
    ours, _ = _schedule(make, steps=len(epochs), epochs=epochs)
    theirs, _ = _schedule(make, torch.optim.lr_scheduler, torch, steps=len(epochs),
                          epochs=epochs)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)


# ----------------------------------------------------------- state dicts
@pytest.mark.parametrize("name", list(CASES))
def test_state_dict_round_trip(name):
    make = CASES[name][0]
    cls = "Adam" if name.startswith("cyclic") else "SGD"
    opt = _opt(vtl, cls)
    sched = make(S, opt)
    for _ in range(13):
        opt.step()
        sched.step()
    osd, ssd = opt.state_dict(), sched.state_dict()
    assert "optimizer" not in ssd
    opt2 = _opt(vtl, cls)
    sched2 = make(S, opt2)
    opt2.load_state_dict(osd)
    sched2.load_state_dict(ssd)
    for _ in range(20):
        for o, s in ((opt, sched), (opt2, sched2)):
            o.step()
            s.step()
        assert [g["lr"] for g in opt2.param_groups] == [g["lr"] for g in opt.param_groups]
        assert _momenta(opt2) == _momenta(opt)
        assert sched2.get_last_lr() == sched.get_last_lr()


def test_state_dict_through_a_checkpoint(tmp_path):
    net = vtl.nn.Linear(2, 1)
    opt = optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    sched = S.CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=2)
    for e in (0.5, 1.5, 4.25):
        sched.step(e)
    vtl.save_checkpoint(tmp_path / "c.safetensors", net, opt, sched)
    opt2 = optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    sched2 = S.CosineAnnealingWarmRestarts(opt2, T_0=3, T_mult=2)
    vtl.load_checkpoint(tmp_path / "c.safetensors", net, opt2, sched2)
    assert (sched2.T_cur, sched2.T_i, sched2.last_epoch) == (sched.T_cur, sched.T_i, 4)
    for s in (sched, sched2):
        s.step()
    assert sched2.get_last_lr() == sched.get_last_lr()


def test_cyclic_state_saves_callable_objects_not_functions():
    class Scale:
        def __init__(self):
            self.rate = 0.5

        def __call__(self, x):
            return self.rate**x

    fn = Scale()
    sched = _cyc(step_size_up=2, scale_fn=fn)(S, _opt(vtl))
    fn.rate = 0.25
    sd = sched.state_dict()
    assert sd["_scale_fn_custom"] == {"rate": 0.25}
    fn2 = Scale()
    sched2 = _cyc(step_size_up=2, scale_fn=fn2)(S, _opt(vtl))
    sched2.load_state_dict(sd)
    assert fn2.rate == 0.25
    assert _cyc(step_size_up=2, scale_fn=lambda x: 1.0)(S, _opt(vtl)).state_dict()[
        "_scale_fn_custom"] is None
    with pytest.raises(ValueError, match="_scale_fn_custom"):
        _cyc(step_size_up=2)(S, _opt(vtl)).load_state_dict(sd)


def test_load_state_dict_checks_fields():
    sched = S.CosineAnnealingWarmRestarts(_opt(vtl), T_0=3)
    sd = sched.state_dict()
    with pytest.raises(ValueError, match="T_mult"):
        sched.load_state_dict({**sd, "T_mult": 0})
    chained = S.ChainedScheduler([S.ConstantLR(_opt(vtl))])
    with pytest.raises(ValueError, match="scheduler 0"):
        chained.load_state_dict({**chained.state_dict(), "_schedulers": [{"factor": 2.0}]})
    cyc = _cyc(step_size_up=2)(S, _opt(vtl))
    with pytest.raises(ValueError, match="scale_mode"):
        cyc.load_state_dict({**cyc.state_dict(), "scale_mode": "epochs"})


# ------------------------------------------------------------ captured steps
def test_schedulers_inside_a_captured_step_equal_eager(backend):
    def train(compiled):
        vtl.random.seed(0)
        net = vtl.nn.Linear(3, 2).to(backend)
        opt = optim.SGD(net.parameters(), lr=0.1, momentum=0.5)
        cyc = S.CyclicLR(opt, 0.01, 0.1, step_size_up=2)
        chained = S.ChainedScheduler([S.CosineAnnealingWarmRestarts(opt, T_0=3),
                                      S.MultiplicativeLR(opt, lambda e: 0.97)])
        rng = np.random.default_rng(1)
        xs = [vtl.asarray(rng.standard_normal((4, 3), dtype=np.float32), device=backend)
              for _ in range(8)]

        def step(x):
            opt.zero_grad()
            loss = vtl.mean(net(x) ** 2)
            loss.backward()
            opt.step()
            cyc.step()
            chained.step()
            return loss

        f = vtl.compile(step) if compiled else step
        return [float(f(x)) for x in xs], [p.numpy() for p in net.parameters()]

    eager, pe = train(False)
    comp, pc = train(True)
    assert comp == eager
    for a, b in zip(pe, pc, strict=True):
        np.testing.assert_array_equal(a, b)


# --------------------------------------------------------------- errors, misc
def test_errors():
    opt = _opt(vtl)
    with pytest.raises(ValueError, match="factor"):
        S.ConstantLR(opt, factor=1.5)
    with pytest.raises(ValueError, match="total_iters"):
        S.ConstantLR(opt, total_iters=-1)
    with pytest.raises(ValueError, match="total_iters"):
        S.PolynomialLR(opt, total_iters=0)
    with pytest.raises(TypeError, match="function"):
        S.MultiplicativeLR(opt, 0.9)
    with pytest.raises(ValueError, match="lr_lambdas"):
        S.MultiplicativeLR(opt, [lambda e: 1.0])
    with pytest.raises(ValueError, match="T_0"):
        S.CosineAnnealingWarmRestarts(opt, T_0=0)
    with pytest.raises(ValueError, match="T_mult"):
        S.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=1.5)
    with pytest.raises(ValueError, match="eta_min"):
        S.CosineAnnealingWarmRestarts(opt, T_0=2, eta_min="0")
    with pytest.raises(ValueError, match="epoch"):
        S.CosineAnnealingWarmRestarts(opt, T_0=2).step(-1)
    with pytest.raises(ValueError, match="mode"):
        S.CyclicLR(opt, 0.01, 0.1, mode="sine")
    with pytest.raises(ValueError, match="scale_mode"):
        S.CyclicLR(opt, 0.01, 0.1, scale_fn=lambda x: 1.0, scale_mode="epochs")
    with pytest.raises(ValueError, match="step_size_up"):
        S.CyclicLR(opt, 0.01, 0.1, step_size_up=0)
    with pytest.raises(ValueError, match="max_lr"):
        S.CyclicLR(opt, 0.01, [0.1])
    p = [vtl.asarray(np.ones(1), requires_grad=True)]
    with pytest.raises(ValueError, match="momentum"):
        S.CyclicLR(optim.Adagrad(p), 0.01, 0.1)
    S.CyclicLR(optim.Adagrad(p), 0.01, 0.1, cycle_momentum=False)
    with pytest.raises(ValueError, match="at least one"):
        S.ChainedScheduler([])
    with pytest.raises(ValueError, match="different optimizer"):
        S.ChainedScheduler([S.ConstantLR(opt), S.ConstantLR(_opt(vtl))])
    with pytest.raises(ValueError, match="different optimizer"):
        S.ChainedScheduler([S.ConstantLR(opt)], optimizer=_opt(vtl))
    with pytest.raises(ValueError, match="ReduceLROnPlateau"):
        S.ChainedScheduler([S.ConstantLR(opt), S.ReduceLROnPlateau(opt)])
    with pytest.raises(TypeError, match="not a scheduler"):
        S.ChainedScheduler([object()], optimizer=opt)


def test_step_with_epoch_uses_the_closed_form():
    opt = _opt(vtl)
    sched = S.PolynomialLR(opt, total_iters=10, power=2.0)
    sched.step(4)
    assert opt.param_groups[0]["lr"] == pytest.approx(LRS[0] * 0.6**2)
    sched = S.ConstantLR(_opt(vtl), factor=0.5, total_iters=3)
    sched.step(5)
    assert sched.get_last_lr() == [LRS[0], LRS[1]]


def test_new_names_are_exported():
    for name in ("ConstantLR", "PolynomialLR", "MultiplicativeLR", "CyclicLR",
                 "CosineAnnealingWarmRestarts", "ChainedScheduler", "SequentialLR"):
        assert name in S.__all__ and hasattr(optim.lr_scheduler, name)
