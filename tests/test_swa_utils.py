"""vtl.optim.swa_utils: AveragedModel (SWA, EMA, buffers), update_bn and SWALR against
closed forms written from PyTorch's documentation and PyTorch itself when importable;
state dicts; no device waits in an update."""

from __future__ import annotations

import math

import numpy as np
import pytest

import vtl
from tests.helpers import supported_dtypes
from vtl import nn, optim
from vtl.optim import swa_utils
from vtl.optim.lr_scheduler import CosineAnnealingLR, SequentialLR

K = 4  # snapshots averaged


def _dtype(backend: str):
    return np.float64 if "float64" in supported_dtypes(backend) else np.float32


def _tol(dtype) -> dict:
    return {"rtol": 1e-12, "atol": 1e-14} if dtype == np.float64 else {"rtol": 1e-5,
                                                                       "atol": 1e-6}


def _model(dtype=np.float64):
    vtl.random.seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(),
                         nn.Linear(4, 2)).to(vtl.float64 if dtype == np.float64 else vtl.float32)


def _snapshots(model, k=K, seed=0):
    """``k`` sets of parameter values (in ``model.parameters()`` order)."""
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal(tuple(p.shape)) for p in model.parameters()] for _ in range(k)]


def _set(model, values, dtype, x=None):
    """Give ``model`` the parameter ``values``; a forward pass in training mode on ``x``
    moves the BatchNorm statistics."""
    with vtl.no_grad():
        for p, v in zip(model.parameters(), values, strict=True):
            p[...] = vtl.asarray(v.astype(dtype), device=p.device)
    if x is not None:
        model.train()
        model(vtl.asarray(x.astype(dtype), device=next(model.parameters()).device))


def _inputs(k=K, seed=1):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((6, 3)) for _ in range(k)]


# ----------------------------------------------------------- AveragedModel
def test_swa_is_the_mean_of_the_snapshots(backend):
    dtype = _dtype(backend)
    model = _model(dtype).to(backend)
    swa = swa_utils.AveragedModel(model)
    assert swa.n_averaged.dtype == vtl.int64 and int(swa.n_averaged.item()) == 0
    snaps, xs = _snapshots(model), _inputs()
    for snap, x in zip(snaps, xs, strict=True):
        _set(model, snap, dtype, x)
        swa.update_parameters(model)
    assert int(swa.n_averaged.item()) == K
    cast = [[s.astype(dtype).astype(np.float64) for s in snap] for snap in snaps]
    for i, p in enumerate(swa.parameters()):
        np.testing.assert_allclose(p.numpy(), np.mean([c[i] for c in cast], axis=0),
                                   **_tol(dtype))
    # buffers follow the model (use_buffers=False)
    for a, b in zip(swa.module.buffers(), model.buffers(), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    # the averaged model is a separate copy, and forward runs it
    assert all(p is not q for p, q in zip(swa.parameters(), model.parameters(), strict=True))
    swa.eval()
    x = vtl.asarray(xs[0].astype(dtype), device=backend)
    model.eval()
    _set(model, [p.numpy() for p in swa.parameters()], dtype)
    np.testing.assert_allclose(swa(x).numpy(), model(x).numpy(), **_tol(dtype))


@pytest.mark.parametrize("kind", ["multi", "single"])
def test_ema_closed_form(backend, kind):
    dtype = _dtype(backend)
    model = _model(dtype).to(backend)
    decay = 0.75
    if kind == "multi":
        ema = swa_utils.AveragedModel(model, multi_avg_fn=swa_utils.get_ema_multi_avg_fn(decay))
    else:
        ema = swa_utils.AveragedModel(model, avg_fn=swa_utils.get_ema_avg_fn(decay))
    snaps = _snapshots(model)
    expected = None
    for snap in snaps:
        _set(model, snap, dtype)
        ema.update_parameters(model)
        cur = [s.astype(dtype).astype(np.float64) for s in snap]
        expected = cur if expected is None else [decay * e + (1 - decay) * c
                                                 for e, c in zip(expected, cur, strict=True)]
    for p, e in zip(ema.parameters(), expected, strict=True):
        np.testing.assert_allclose(p.numpy(), e, **_tol(dtype))


@pytest.mark.parametrize("multi", [False, True])
def test_use_buffers_averages_the_buffers(backend, multi):
    dtype = _dtype(backend)
    model = _model(dtype).to(backend)
    fn = {"multi_avg_fn": swa_utils.get_swa_multi_avg_fn()} if multi else {}
    swa = swa_utils.AveragedModel(model, use_buffers=True, **fn)
    bn = model[1]
    means, counts = [], []
    for snap, x in zip(_snapshots(model), _inputs(), strict=True):
        _set(model, snap, dtype, x)
        _set(model, snap, dtype, x)  # two batches: num_batches_tracked 2, 4, 6, 8
        means.append(bn.running_mean.numpy().astype(np.float64))
        counts.append(int(bn.num_batches_tracked.item()))
        swa.update_parameters(model)
    np.testing.assert_allclose(swa.module[1].running_mean.numpy(), np.mean(means, axis=0),
                               **_tol(dtype))
    assert counts == [2, 4, 6, 8]
    assert swa.module[1].num_batches_tracked.dtype == vtl.int64
    assert int(swa.module[1].num_batches_tracked.item()) == 5  # 2, 3, 4, 5


def test_state_dict_round_trip_and_loading_resets_the_count(backend):
    dtype = _dtype(backend)
    model = _model(dtype).to(backend)
    swa = swa_utils.AveragedModel(model)
    snaps = _snapshots(model, 6)
    for snap in snaps[:3]:
        _set(model, snap, dtype)
        swa.update_parameters(model)
    sd = swa.state_dict()
    assert "n_averaged" in sd and "module.0.weight" in sd
    swa2 = swa_utils.AveragedModel(model)
    swa2.load_state_dict(sd)
    for snap in snaps[3:]:
        _set(model, snap, dtype)
        swa.update_parameters(model)
        swa2.update_parameters(model)
    for a, b in zip(swa.parameters(), swa2.parameters(), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert int(swa2.n_averaged.item()) == 6
    # loading a state with a count of 0 makes the next update a copy again
    fresh = swa_utils.AveragedModel(model).state_dict()
    swa2.load_state_dict(fresh)
    _set(model, snaps[0], dtype)
    swa2.update_parameters(model)
    for a, b in zip(swa2.parameters(), model.parameters(), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    with vtl.no_grad():  # so does writing the buffer directly
        swa2.n_averaged[...] = 0
    _set(model, snaps[1], dtype)
    swa2.update_parameters(model)
    np.testing.assert_array_equal(next(swa2.parameters()).numpy(),
                                  next(model.parameters()).numpy())


def test_averaged_copy_on_another_device(backend):
    if backend == "numpy":
        pytest.skip("needs a second backend")
    model = _model(np.float32).to(backend)
    swa = swa_utils.AveragedModel(model, device="numpy")
    assert next(swa.parameters()).device == vtl.Device("numpy", 0)
    assert swa.n_averaged.device == vtl.Device("numpy", 0)
    snaps = _snapshots(model, 2)
    for snap in snaps:
        _set(model, snap, np.float32)
        swa.update_parameters(model)
    np.testing.assert_allclose(next(swa.parameters()).numpy(),
                               (snaps[0][0].astype(np.float32) + snaps[1][0].astype(np.float32))
                               / 2, rtol=1e-6, atol=1e-6)


def test_an_update_does_not_wait(backend):
    if backend == "numpy":
        pytest.skip("the numpy backend does not wait")
    from test_sync_free import count_waits

    model = _model(np.float32).to(backend)
    for fn in ({}, {"multi_avg_fn": swa_utils.get_ema_multi_avg_fn(0.9)},
               {"avg_fn": swa_utils.get_ema_avg_fn(0.9)}):
        swa = swa_utils.AveragedModel(model, use_buffers=True, **fn)
        swa.update_parameters(model)  # reads the count once
        with count_waits(backend) as waits:
            for _ in range(3):
                swa.update_parameters(model)
        assert waits == []


def test_errors():
    model = _model()
    with pytest.raises(ValueError, match="only one"):
        swa_utils.AveragedModel(model, avg_fn=swa_utils.get_swa_avg_fn(),
                                multi_avg_fn=swa_utils.get_swa_multi_avg_fn())
    with pytest.raises(TypeError, match="Module"):
        swa_utils.AveragedModel(object())
    for bad in (-0.1, 1.5, "x"):
        with pytest.raises(ValueError, match="decay"):
            swa_utils.get_ema_multi_avg_fn(bad)
        with pytest.raises(ValueError, match="decay"):
            swa_utils.get_ema_avg_fn(bad)


def _torch():
    try:
        import torch
    except ImportError:
        pytest.skip("PyTorch is not installed")
    return torch


def _torch_model(torch, model):
    tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.ReLU(),
                             torch.nn.Linear(4, 2)).double()
    with torch.no_grad():
        for tp, p in zip(tm.parameters(), model.parameters(), strict=True):
            tp.copy_(torch.from_numpy(p.numpy()))
    return tm


# (PyTorch's get_swa_multi_avg_fn raises on integer buffers: use_buffers with
# num_batches_tracked; vtl's averages them as its get_swa_avg_fn does)
@pytest.mark.parametrize("variant", ["swa", "ema-multi", "ema-single", "swa-buffers",
                                     "ema-multi-buffers"])
def test_averaged_model_matches_torch(variant):
    torch = _torch()
    tsu = torch.optim.swa_utils
    model = _model()
    tm = _torch_model(torch, model)

    def kwargs(su):
        return {"swa": {}, "ema-multi": {"multi_avg_fn": su.get_ema_multi_avg_fn(0.8)},
                "ema-single": {"avg_fn": su.get_ema_avg_fn(0.8)},
                "swa-buffers": {"use_buffers": True},
                "ema-multi-buffers": {"use_buffers": True,
                                      "multi_avg_fn": su.get_ema_multi_avg_fn(0.6)}}[variant]

    ours = swa_utils.AveragedModel(model, **kwargs(swa_utils))
    theirs = tsu.AveragedModel(tm, **kwargs(tsu))
    for snap, x in zip(_snapshots(model, 5), _inputs(5), strict=True):
        _set(model, snap, np.float64, x)
        with torch.no_grad():
            for tp, v in zip(tm.parameters(), snap, strict=True):
                tp.copy_(torch.from_numpy(v))
        tm.train()
        tm(torch.from_numpy(x))
        ours.update_parameters(model)
        theirs.update_parameters(tm)
    ts = theirs.state_dict()
    sd = ours.state_dict()
    assert list(sd) == list(ts)
    for k, v in ts.items():
        np.testing.assert_allclose(sd[k].numpy(), v.numpy(), rtol=1e-13, atol=1e-15,
                                   err_msg=k)


# ---------------------------------------------------------------- update_bn
def test_update_bn_recomputes_the_statistics(backend):
    dtype = _dtype(backend)
    model = _model(dtype).to(backend)
    bn = model[1]
    bn.momentum = 0.3
    rng = np.random.default_rng(2)
    batches = [rng.standard_normal((5, 3)) * 2 + 1 for _ in range(3)]
    loader = [(vtl.asarray(b.astype(dtype), device=backend), "label") for b in batches]
    model.eval()
    swa_utils.update_bn(loader, model)
    assert bn.momentum == 0.3 and not model.training
    # the cumulative average over the batches of the batch statistics of layer 0's output
    w, b0 = model[0].weight.numpy().astype(np.float64), model[0].bias.numpy().astype(np.float64)
    hs = [bt.astype(dtype).astype(np.float64) @ w.T + b0 for bt in batches]
    np.testing.assert_allclose(bn.running_mean.numpy(), np.mean([h.mean(0) for h in hs], 0),
                               **_tol(dtype))
    np.testing.assert_allclose(bn.running_var.numpy(),
                               np.mean([h.var(0, ddof=1) for h in hs], 0), **_tol(dtype))
    assert int(bn.num_batches_tracked.item()) == 3
    # bare tensors and the device argument; a model without BatchNorm is left alone
    model.train()
    swa_utils.update_bn([vtl.asarray(b.astype(dtype)) for b in batches], model, device=backend)
    np.testing.assert_allclose(bn.running_mean.numpy(), np.mean([h.mean(0) for h in hs], 0),
                               **_tol(dtype))
    assert model.training
    swa_utils.update_bn(loader, nn.Linear(3, 2).to(backend))


def test_update_bn_matches_torch():
    torch = _torch()
    model = _model()
    tm = _torch_model(torch, model)
    batches = [np.random.default_rng(i).standard_normal((4, 3)) for i in range(3)]
    swa_utils.update_bn([vtl.asarray(b) for b in batches], model)
    torch.optim.swa_utils.update_bn([torch.from_numpy(b) for b in batches], tm)
    for (k, v), (tk, tv) in zip(model.state_dict().items(), tm.state_dict().items(),
                                strict=True):
        assert k == tk
        np.testing.assert_allclose(v.numpy(), tv.numpy(), rtol=1e-13, atol=1e-15)


# -------------------------------------------------------------------- SWALR
LRS = (0.1, 0.02)


def _opt(mod, array):
    return mod.optim.SGD([{"params": [array(2)]}, {"params": [array(3)], "lr": LRS[1]}],
                         lr=LRS[0])


def _anneal(strategy, t):
    return (1 - math.cos(math.pi * t)) / 2 if strategy == "cos" else t


def _swalr_closed(swa_lrs, epochs, strategy, steps):
    out = []
    for k in range(steps + 1):
        k_eff = max(1, k) if epochs == 0 else k
        a = _anneal(strategy, max(0, min(1, k_eff / max(1, epochs))))
        out.append([s * a + b * (1 - a) for s, b in zip(swa_lrs, LRS, strict=True)])
    return np.array(out)


SWALR_CASES = [(0.05, 5, "cos"), ([0.05, 0.01], 4, "linear"), (0.01, 0, "cos"),
               (0.2, 1, "linear"), (0.03, 10, "cos")]


def _swalr_lrs(mod, su, swa_lr, epochs, strategy, steps=12):
    array = (lambda n: vtl.asarray(np.ones(n), requires_grad=True)) if mod is vtl else \
        (lambda n: mod.ones(n, requires_grad=True))
    opt = _opt(mod, array)
    sched = su.SWALR(opt, swa_lr, anneal_epochs=epochs, anneal_strategy=strategy)
    out = [[g["lr"] for g in opt.param_groups]]
    for _ in range(steps):
        opt.step()
        sched.step()
        out.append([g["lr"] for g in opt.param_groups])
        assert list(sched.get_last_lr()) == out[-1]
    return np.array(out), sched, opt


@pytest.mark.parametrize(("swa_lr", "epochs", "strategy"), SWALR_CASES)
def test_swalr_closed_form(swa_lr, epochs, strategy):
    lrs, _, opt = _swalr_lrs(vtl, swa_utils, swa_lr, epochs, strategy)
    swa_lrs = swa_lr if isinstance(swa_lr, list) else [swa_lr] * 2
    np.testing.assert_allclose(lrs, _swalr_closed(swa_lrs, epochs, strategy, 12), rtol=1e-12)
    assert [g["swa_lr"] for g in opt.param_groups] == swa_lrs


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize(("swa_lr", "epochs", "strategy"), SWALR_CASES)
def test_swalr_matches_torch(swa_lr, epochs, strategy):
    torch = _torch()
    ours, _, _ = _swalr_lrs(vtl, swa_utils, swa_lr, epochs, strategy)
    theirs, _, _ = _swalr_lrs(torch, torch.optim.swa_utils, swa_lr, epochs, strategy)
    np.testing.assert_allclose(ours, theirs, rtol=1e-14)


@pytest.mark.filterwarnings("ignore")
def test_swa_training_recipe_matches_torch():
    """PyTorch's documented recipe: cosine annealing, then SWALR from ``swa_start`` (it
    anneals from wherever the first scheduler left the lr); and SWALR in a SequentialLR."""
    torch = _torch()

    def run(mod, su, S):
        array = (lambda n: vtl.asarray(np.ones(n), requires_grad=True)) if mod is vtl else \
            (lambda n: mod.ones(n, requires_grad=True))
        opt = _opt(mod, array)
        cos = S.CosineAnnealingLR(opt, T_max=20)
        swa = su.SWALR(opt, swa_lr=0.04, anneal_epochs=3)
        lrs = []
        for epoch in range(12):
            opt.step()
            (swa if epoch > 5 else cos).step()
            lrs.append([g["lr"] for g in opt.param_groups])
        opt2 = _opt(mod, array)
        seq = S.SequentialLR(opt2, [S.CosineAnnealingLR(opt2, T_max=20),
                                    su.SWALR(opt2, swa_lr=0.04, anneal_epochs=3)],
                             milestones=[6])
        for _ in range(12):
            opt2.step()
            seq.step()
            lrs.append([g["lr"] for g in opt2.param_groups])
        return np.array(lrs)

    ours = run(vtl, swa_utils, optim.lr_scheduler)
    theirs = run(torch, torch.optim.swa_utils, torch.optim.lr_scheduler)
    np.testing.assert_allclose(ours, theirs, rtol=1e-13)
    assert ours[-1, 0] == pytest.approx(0.04)


def test_swalr_state_dict_round_trip_and_errors():
    _, sched, opt = _swalr_lrs(vtl, swa_utils, 0.05, 6, "linear", steps=3)
    sd = sched.state_dict()
    assert sd["_anneal_strategy"] == "linear" and "anneal_func" not in sd
    _, sched2, opt2 = _swalr_lrs(vtl, swa_utils, 0.05, 6, "cos", steps=0)
    opt2.load_state_dict(opt.state_dict())
    sched2.load_state_dict(sd)
    for _ in range(5):
        for o, s in ((opt, sched), (opt2, sched2)):
            o.step()
            s.step()
        assert sched2.get_last_lr() == sched.get_last_lr()
    with pytest.raises(ValueError, match="_anneal_strategy"):
        sched.load_state_dict({**sd, "_anneal_strategy": "exp"})
    opt = _opt(vtl, lambda n: vtl.asarray(np.ones(n), requires_grad=True))
    with pytest.raises(ValueError, match="anneal_strategy"):
        swa_utils.SWALR(opt, 0.1, anneal_strategy="exp")
    with pytest.raises(ValueError, match="anneal_epochs"):
        swa_utils.SWALR(opt, 0.1, anneal_epochs=-1)
    with pytest.raises(ValueError, match="swa_lr"):
        swa_utils.SWALR(opt, [0.1])
    with pytest.raises(TypeError, match="Optimizer"):
        swa_utils.SWALR(object(), 0.1)
    assert set(swa_utils.__all__) == {
        "AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn", "get_swa_multi_avg_fn",
        "get_ema_avg_fn", "get_swa_avg_fn"}
    assert "SequentialLR" in dir(optim.lr_scheduler) and SequentialLR and CosineAnnealingLR
