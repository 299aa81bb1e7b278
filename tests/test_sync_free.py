"""A training step never waits for the device: no read-back and no synchronous upload in
forward, backward, gradient clipping, optimizer or scheduler steps, nor in ``fit``'s loss
bookkeeping, on the GPU backends (wgpu, also on lavapipe; cupy where CUDA is present).

The counters wrap every entry point through which the backends wait: on wgpu the
recorder's read-back and ``synchronize``; on cupy CuPy's device synchronisation (through
``cupyx.allow_synchronize(False)``, which raises where CuPy waits), its read-backs
(``get``/``asnumpy``) and copies of host data to the device (``cupy.array``/``asarray``
of anything that is not already on the device)."""

from __future__ import annotations

import contextlib
import traceback
import warnings

import numpy as np
import pytest

import vtl
from vtl import nn, optim

GPU_BACKENDS = ("wgpu", "cupy")


@pytest.fixture(params=GPU_BACKENDS)
def gpu(request):
    name = request.param
    from conftest import BACKENDS

    b = vtl.backends.get(name)
    if name not in BACKENDS or not b.is_available:
        pytest.skip(f"backend {name} not selected or unavailable")
    return name


def _caller() -> str:
    """The innermost vtl frame of the current stack (where a wait comes from)."""
    for frame in reversed(traceback.extract_stack()[:-2]):
        if "/vtl/" in frame.filename:
            return f"{frame.filename.split('/vtl/')[-1]}:{frame.lineno} ({frame.name})"
    return "?"


@contextlib.contextmanager
def count_waits(name: str, strict: bool = True):
    """Yields a list that receives a description of every wait for the device (with
    ``strict`` on cupy, a wait that CuPy detects itself raises ``DeviceSynchronized``)."""
    waits: list[str] = []
    if name == "wgpu":
        from vtl.backends.wgpu._recorder import REC

        read, read_now, sync = REC.read, REC._read_now, REC.synchronize

        def counted_read(*a, **k):
            waits.append("read-back")
            return read(*a, **k)

        def counted_read_now(*a, **k):  # a later read that could not start at once
            waits.append("read-back")
            return read_now(*a, **k)

        def counted_sync(*a, **k):
            waits.append("synchronize")
            return sync(*a, **k)

        REC.read, REC._read_now, REC.synchronize = counted_read, counted_read_now, counted_sync
        try:
            yield waits
        finally:
            del REC.read, REC._read_now, REC.synchronize
        return
    import cupy
    import cupyx

    patched = []

    def wrap(owner, attr, what, host_only):
        orig = getattr(owner, attr)

        def counted(*a, **k):
            if not host_only or not isinstance(a[0] if a else None, cupy.ndarray):
                waits.append(f"{what} at {_caller()}")
            return orig(*a, **k)

        setattr(owner, attr, counted)
        patched.append((owner, attr, orig))

    wrap(cupy, "array", "upload (cupy.array of host data)", True)
    wrap(cupy, "asarray", "upload (cupy.asarray of host data)", True)
    wrap(cupy, "asnumpy", "read-back (cupy.asnumpy)", False)
    try:
        if strict:
            with warnings.catch_warnings():  # CuPy announces the detector's removal
                warnings.simplefilter("ignore", UserWarning)
                with cupyx.allow_synchronize(False):
                    yield waits
        else:
            yield waits
    finally:
        for owner, attr, orig in patched:
            setattr(owner, attr, orig)


class Lstm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.LSTM(12, 16, batch_first=True)
        self.fc = nn.Linear(16, 5)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.fc(out[:, -1, :])


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.1, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2)
        self.fc = nn.Linear(16, 5)

    def forward(self, x):
        return self.fc(vtl.mean(self.enc(x), axis=1))


MODELS = {
    "mlp": (lambda: nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Dropout(0.2),
                                  nn.Linear(32, 5)), (8, 20)),
    "cnn": (lambda: nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU(),
                                  nn.MaxPool2d(2), nn.Flatten(), nn.Linear(6 * 4 * 4, 5)),
            (4, 3, 8, 8)),
    "lstm": (Lstm, (4, 6, 12)),
    "transformer": (Encoder, (4, 6, 16)),
}


def _setup(gpu: str, model: str):
    make, shape = MODELS[model]
    vtl.random.seed(0)
    net = make().to(gpu)
    opt = optim.Adam(net.parameters(), lr=1e-3)
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
    rng = np.random.default_rng(0)
    x = vtl.asarray(rng.standard_normal(shape, dtype=np.float32), device=gpu)
    y = vtl.asarray(rng.integers(0, 5, shape[0]), device=gpu)
    return net, opt, sched, x, y


@pytest.mark.parametrize("model", list(MODELS))
def test_a_training_step_never_waits(gpu, model):
    net, opt, sched, x, y = _setup(gpu, model)

    def step():
        opt.zero_grad()
        loss = nn.functional.cross_entropy(net(x), y)
        loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        sched.step()
        return loss

    for _ in range(2):  # first steps may upload what later steps reuse (kernel tables)
        step()
    vtl.backends.get(gpu).synchronize()
    with count_waits(gpu) as waits:
        for _ in range(3):
            loss = step()
    assert waits == []
    assert np.isfinite(float(loss))  # the value is there when asked for


def test_fit_reads_the_loss_back_only_at_the_end_of_an_epoch(gpu):
    net, opt, _, x, y = _setup(gpu, "mlp")
    loader = [(x * float(i), y) for i in range(4)]  # batches already on the device
    vtl.train.fit(net, loader, nn.CrossEntropyLoss(), opt, epochs=1, progress=False)
    with count_waits(gpu, strict=False) as waits:
        history = vtl.train.fit(net, loader, nn.CrossEntropyLoss(), opt, epochs=1,
                                progress=False)
    # the epoch's means: one read of the loss sum and one of the accuracy count (cupy reads
    # its buffer of device-side errors along with a result: no wait of its own)
    waits = [w for w in waits if "(first_error)" not in w]
    assert len(waits) <= 2, waits
    assert 0.0 <= history.history["accuracy"][0] <= 1.0


def test_fit_logs_the_same_means_as_per_batch_values(backend):
    """The device-side sums give the means of the per-batch values, and the exact
    accuracy."""
    vtl.random.seed(0)
    net = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5)).to(backend)
    rng = np.random.default_rng(1)
    x = vtl.asarray(rng.standard_normal((24, 20), dtype=np.float32), device=backend)
    y = vtl.asarray(rng.integers(0, 5, 24), device=backend)
    seen = []

    class Record(vtl.train.Callback):
        def on_batch_end(self, state, batch, logs):
            seen.append(dict(logs))

    opt = optim.SGD(net.parameters(), lr=0.0)  # the model does not change
    loader = vtl.data.DataLoader(vtl.data.TensorDataset(x, y), batch_size=5)
    hist = vtl.train.fit(net, loader, nn.CrossEntropyLoss(), opt, epochs=1, progress=False,
                         callbacks=[Record()], metrics=("accuracy", "top5"))
    sizes = [5, 5, 5, 5, 4]
    for key in ("loss", "accuracy", "top5"):
        want = sum(s[key] * n for s, n in zip(seen, sizes, strict=True)) / sum(sizes)
        assert hist.history[key][0] == pytest.approx(want, rel=1e-6)
    assert hist.history["accuracy"][0] == vtl.metrics.accuracy(net(x), y)
    assert hist.history["top5"][0] == 1.0
    assert all(isinstance(v, float) for s in seen for v in s.values())
