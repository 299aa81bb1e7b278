"""vtl.train: the fit loop, History, callbacks (checkpoint, early stopping, resume)."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

import vtl
from vtl import nn, optim
from vtl.train import (
    Callback,
    EarlyStopping,
    History,
    LambdaCallback,
    ModelCheckpoint,
    Resume,
    evaluate,
    fit,
)


def _blobs(n: int = 96, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    centers = np.array([[2.0, 0.0], [-2.0, 1.0], [0.0, -2.0]])
    x = centers[y] + 0.5 * rng.normal(size=(n, 2))
    return x.astype(np.float32), y.astype(np.int64)


def _batches(x: np.ndarray, y: np.ndarray, bs: int = 16) -> list[tuple[vtl.Tensor, vtl.Tensor]]:
    return [(vtl.asarray(x[i:i + bs]), vtl.asarray(y[i:i + bs])) for i in range(0, len(x), bs)]


def _model(seed: int = 0) -> nn.Module:
    vtl.random.seed(seed)
    return nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 3))


def _weights(model: nn.Module) -> dict[str, np.ndarray]:
    return {k: v.numpy().copy() for k, v in model.state_dict().items()}


def _ascent(params, lr: float) -> optim.SGD:
    """Gradient ascent: the loss rises every step (for early-stopping tests)."""
    return optim.SGD(params, lr=lr, maximize=True)


def test_fit_trains_and_records_history(backend):
    x, y = _blobs()
    train = _batches(x, y)
    model = _model()
    opt = optim.Adam(model.parameters(), lr=0.05)
    h = fit(model, train, nn.CrossEntropyLoss(), opt, 6, val_loader=train,
            metrics=("accuracy", "f1"), progress=False)
    assert isinstance(h, History) and len(h) == 6 and h.epoch == [1, 2, 3, 4, 5, 6]
    assert set(h.keys()) == {"loss", "accuracy", "f1", "val_loss", "val_accuracy", "val_f1", "lr"}
    assert h["loss"][-1] < 0.5 * h["loss"][0]
    assert h["val_accuracy"][-1] > 0.9
    assert h["lr"] == [0.05] * 6
    # the logged val values are those of evaluate() on the final model
    ev = evaluate(model, train, nn.CrossEntropyLoss(), ("accuracy",))
    assert ev["loss"] == pytest.approx(h["val_loss"][-1], rel=1e-5)
    assert ev["accuracy"] == pytest.approx(h["val_accuracy"][-1])
    # and these are sample-weighted means over the batches (uneven last batch)
    odd = _batches(x[:40], y[:40], bs=16)
    logits = model(vtl.asarray(x[:40])).numpy().astype(np.float64)
    logp = logits - logits.max(1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(1, keepdims=True))
    ev = evaluate(model, odd, nn.CrossEntropyLoss(), ("accuracy",))
    assert ev["loss"] == pytest.approx(-logp[np.arange(40), y[:40]].mean(), rel=1e-4)
    assert ev["accuracy"] == pytest.approx(np.mean(logits.argmax(1) == y[:40]))


class _Probe(nn.Module):
    """Records the train flag and grad mode seen by each forward call."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 3)
        self.seen: list[tuple[bool, bool]] = []

    def forward(self, x):
        self.seen.append((self.training, vtl.is_grad_enabled()))
        return self.lin(x)


def test_train_eval_modes_and_no_grad_validation(backend):
    x, y = _blobs(32)
    train, val = _batches(x, y), _batches(x[:16], y[:16])
    m = _Probe()
    fit(m, train, nn.CrossEntropyLoss(), optim.SGD(m.parameters(), lr=0.1), 2,
        val_loader=val, progress=False)
    # per epoch: 2 training batches (train mode, grad on), 1 validation batch (eval, no grad)
    assert m.seen == [(True, True)] * 2 + [(False, False)] + [(True, True)] * 2 + [(False, False)]
    m.eval()
    evaluate(m, val, None, ("accuracy",))
    assert m.training is False  # evaluate restores the previous mode
    m.train()
    r = evaluate(m, val, None, ("accuracy",))
    assert m.training is True and set(r) == {"accuracy"}


def test_progress_bars(backend, capsys):
    x, y = _blobs(32)
    m = _model()
    fit(m, _batches(x, y), nn.CrossEntropyLoss(), optim.SGD(m.parameters(), lr=0.1), 2,
        val_loader=_batches(x, y))
    err = capsys.readouterr().err
    assert "epoch 1/2" in err and "epoch 2/2" in err
    assert "loss=" in err and "accuracy=" in err and "val_accuracy=" in err
    fit(m, _batches(x, y), nn.CrossEntropyLoss(), optim.SGD(m.parameters(), lr=0.1), 1,
        progress=False)
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""


def test_schedulers(backend):
    x, y = _blobs(32)
    train = _batches(x, y)
    m = _model()
    opt = optim.SGD(m.parameters(), lr=0.1)
    h = fit(m, train, nn.CrossEntropyLoss(), opt, 3,
            scheduler=optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5), progress=False)
    assert h["lr"] == pytest.approx([0.1, 0.05, 0.025])
    opt = optim.SGD(m.parameters(), lr=0.1)
    sched = optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0 / (1 + step))
    fit(m, train, nn.CrossEntropyLoss(), opt, 2, scheduler=sched, scheduler_step="batch",
        progress=False)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.1 / 5)  # 2 epochs x 2 batches
    # ReduceLROnPlateau follows the monitored loss: with lr 0 nothing improves
    opt = optim.SGD(m.parameters(), lr=0.0)
    plateau = optim.lr_scheduler.ReduceLROnPlateau(opt, patience=0, factor=0.5, min_lr=0.0)
    opt.param_groups[0]["lr"] = 0.0
    fit(m, train, nn.CrossEntropyLoss(), opt, 2, val_loader=train, scheduler=plateau,
        progress=False)
    with pytest.raises(ValueError, match="scheduler_step"):
        fit(m, train, nn.CrossEntropyLoss(), opt, 1, scheduler=plateau, scheduler_step="batch")


def test_multi_input_batches_metric_callables_and_clipping(backend):
    class Two(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = nn.Linear(1, 1), nn.Linear(1, 1)

        def forward(self, u, v):
            return self.a(u) + self.b(v)

    rng = np.random.default_rng(1)
    u, v = rng.normal(size=(64, 1)).astype(np.float32), rng.normal(size=(64, 1)).astype(np.float32)
    t = 3 * u - 2 * v
    batches = [(vtl.asarray(u[i:i + 16]), vtl.asarray(v[i:i + 16]), vtl.asarray(t[i:i + 16]))
               for i in range(0, 64, 16)]
    vtl.random.seed(0)
    m = Two()

    def worst(out, target):
        return float(vtl.max(vtl.abs(out - target)).item())

    h = fit(m, batches, nn.MSELoss(), optim.Adam(m.parameters(), lr=0.1), 15,
            metrics=("mae", worst), clip_grad_norm=1.0, progress=False)
    assert h["loss"][-1] < 0.05 * h["loss"][0]
    assert h["worst"][-1] >= h["mae"][-1]


def test_early_stopping(backend):
    x, y = _blobs(32)
    train = _batches(x, y)
    m = _model()
    es = EarlyStopping(monitor="loss", patience=2)
    h = fit(m, train, nn.CrossEntropyLoss(), optim.SGD(m.parameters(), lr=0.0), 20,
            callbacks=[es], progress=False)
    # epoch 1 sets the best; epochs 2, 3, 4 do not improve; patience 2 stops after epoch 4
    assert len(h) == 4 and es.stopped_epoch == 4 and es.best_epoch == 1
    assert es.mode == "min" and EarlyStopping(monitor="val_accuracy").mode == "max"


def test_early_stopping_restores_best(backend):
    x, y = _blobs(32)
    train = _batches(x, y)
    m = _model()
    snap = {}
    keep = LambdaCallback(on_epoch_end=lambda s, e, logs: snap.setdefault(e, _weights(s.model)))
    es = EarlyStopping(monitor="val_loss", patience=1, restore_best=True)
    h = fit(m, train, nn.CrossEntropyLoss(), _ascent(m.parameters(), 0.5), 10, val_loader=train,
            callbacks=[keep, es], progress=False)
    assert h["val_loss"][0] < h["val_loss"][1] < h["val_loss"][2]
    assert es.best_epoch == 1 and len(h) == 3
    for k, w in _weights(m).items():
        np.testing.assert_array_equal(w, snap[1][k])
        assert not np.array_equal(w, snap[3][k])


def test_checkpoint_and_resume_match_an_uninterrupted_run(backend, tmp_path):
    x, y = _blobs(64)
    ds = vtl.data.TensorDataset(vtl.asarray(x), vtl.asarray(y))

    def setup():
        m = _model(3)
        opt = optim.Adam(m.parameters(), lr=0.02)
        sched = optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
        loader = vtl.data.DataLoader(ds, batch_size=16, shuffle=True, seed=7)
        return m, opt, sched, loader

    m, opt, sched, loader = setup()
    full = fit(m, loader, nn.CrossEntropyLoss(), opt, 4, scheduler=sched, progress=False)
    want = _weights(m)
    assert loader.epoch == 4  # a later fit() on this loader continues with new orders

    m, opt, sched, loader = setup()
    ck = ModelCheckpoint(tmp_path / "ck" / "e{epoch}.safetensors", every=2)
    fit(m, loader, nn.CrossEntropyLoss(), opt, 2, scheduler=sched, callbacks=[ck], progress=False)
    assert ck.last_path == str(tmp_path / "ck" / "e2.safetensors")

    m, opt, sched, loader = setup()
    h = fit(m, loader, nn.CrossEntropyLoss(), opt, 4, scheduler=sched, progress=False,
            resume_from=ck.last_path)
    assert h.epoch == [1, 2, 3, 4] and loader.epoch == 4
    np.testing.assert_allclose(h["loss"], full["loss"], rtol=1e-5)
    assert h["lr"] == pytest.approx(full["lr"])
    for k, w in _weights(m).items():
        np.testing.assert_allclose(w, want[k], rtol=1e-5, atol=1e-6)

    # the Resume callback does the same; missing_ok starts from scratch
    m, opt, sched, loader = setup()
    h = fit(m, loader, nn.CrossEntropyLoss(), opt, 3, scheduler=sched, progress=False,
            callbacks=[Resume(ck.last_path)])
    assert h.epoch == [1, 2, 3]
    m, opt, sched, loader = setup()
    h = fit(m, loader, nn.CrossEntropyLoss(), opt, 1, progress=False,
            callbacks=[Resume(tmp_path / "none.safetensors", missing_ok=True)])
    assert h.epoch == [1]
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        fit(m, loader, nn.CrossEntropyLoss(), opt, 1, resume_from=tmp_path / "none.safetensors")


def test_checkpoint_save_best_only(backend, tmp_path):
    x, y = _blobs(32)
    train = _batches(x, y)
    m = _model()
    ck = ModelCheckpoint(tmp_path / "best.safetensors", monitor="val_loss", save_best_only=True)
    saved = []
    probe = LambdaCallback(on_epoch_end=lambda s, e, logs: saved.append(ck.best))
    h = fit(m, train, nn.CrossEntropyLoss(), _ascent(m.parameters(), 0.5), 3, val_loader=train,
            callbacks=[ck, probe], progress=False)
    assert saved == [h["val_loss"][0]] * 3  # only epoch 1 (the best) was written
    info = vtl.load_checkpoint(ck.best_path, _model(5))
    assert info["epoch"] == 1
    assert info["metrics"]["val_loss"] == pytest.approx(h["val_loss"][0])
    with pytest.raises(KeyError, match="val_acc"):
        fit(m, train, nn.CrossEntropyLoss(), optim.SGD(m.parameters(), lr=0.1), 1,
            callbacks=[ModelCheckpoint(tmp_path / "x", monitor="val_acc", save_best_only=True)],
            progress=False)


def test_callback_hooks_order_and_stop(backend):
    x, y = _blobs(32)
    events = []

    class Rec(Callback):
        def on_train_begin(self, s):
            events.append("begin")

        def on_epoch_begin(self, s, e):
            events.append(f"e{e}")

        def on_batch_end(self, s, b, logs):
            events.append(f"b{b}")
            assert set(logs) == {"loss", "accuracy"}

        def on_epoch_end(self, s, e, logs):
            events.append(f"end{e}")
            s.stop_training = e == 2

        def on_train_end(self, s):
            events.append("done")

    m = _model()
    h = fit(m, _batches(x, y), nn.CrossEntropyLoss(), optim.SGD(m.parameters(), lr=0.1), 5,
            callbacks=[Rec()], progress=False)
    assert events == ["begin", "e1", "b0", "b1", "end1", "e2", "b0", "b1", "end2", "done"]
    assert len(h) == 2


def test_history_plot_png(tmp_path):
    pytest.importorskip("matplotlib")
    h = History()
    for e in range(1, 4):
        h.append(e, {"loss": 1.0 / e, "val_loss": 1.2 / e, "accuracy": 0.5 + 0.1 * e,
                     "lr": 0.1})
    out = h.plot(tmp_path / "sub" / "curve.png", title="t")
    data = open(out, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000
    with pytest.raises(KeyError, match="unknown keys"):
        h.plot(tmp_path / "c.png", keys=["f1"])
    with pytest.raises(ValueError, match="nothing recorded"):
        History().plot(tmp_path / "e.png")


def test_history_plot_without_matplotlib(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    h = History()
    h.append(1, {"loss": 1.0})
    with pytest.raises(ImportError, match=r"vtl\[plot\]"):
        h.plot(tmp_path / "c.png")


def test_history_bookkeeping():
    h = History()
    h.append(1, {"loss": 2.0})
    h.append(2, {"loss": 1.0, "val_loss": 3.0})
    assert math.isnan(h["val_loss"][0]) and h["val_loss"][1] == 3.0
    assert h.best("loss") == (2, 1.0) and h.best("loss", "max") == (1, 2.0)
    assert h.last() == {"loss": 1.0, "val_loss": 3.0}
    h2 = History()
    h2.load_state_dict(h.state_dict())
    assert h2.epoch == [1, 2] and h2["loss"] == [2.0, 1.0] and "loss" in h2
    with pytest.raises(KeyError, match="no 'acc'"):
        h.best("acc")


def test_errors(backend):
    x, y = _blobs(16)
    m = _model()
    opt = optim.SGD(m.parameters(), lr=0.1)
    loss = nn.CrossEntropyLoss()
    with pytest.raises(ValueError, match="epochs"):
        fit(m, _batches(x, y), loss, opt, -1)
    with pytest.raises(ValueError, match="no batches"):
        fit(m, [], loss, opt, 1, progress=False)
    with pytest.raises(TypeError, match="tuple"):
        fit(m, [vtl.asarray(x)], loss, opt, 1, progress=False)
    with pytest.raises(ValueError, match="no samples"):
        evaluate(m, [], loss)
    with pytest.raises(ValueError, match="always logged"):
        fit(m, _batches(x, y), loss, opt, 1, metrics=("loss",))
    with pytest.raises(ValueError, match="mode"):
        EarlyStopping(mode="up")
    with pytest.raises(ValueError, match="patience"):
        EarlyStopping(patience=-1)
    with pytest.raises(ValueError, match="every"):
        ModelCheckpoint("x", every=0)
    assert fit(m, _batches(x, y), loss, opt, 0).epoch == []
