"""A full training step (forward, cross-entropy loss, backward, Adam step) of two
networks, vtl on each backend against the same network in PyTorch (CPU for the
numpy backend, CUDA for cupy and wgpu):

* ``mlp-784-256-128-10``: Linear+ReLU, Linear+ReLU, Linear on flattened 28x28 inputs;
* ``cifar10-cnn``: the network of ``examples/cifar10_cnn.py`` (three conv3x3+ReLU+
  maxpool2 blocks with 64/128/256 channels, Linear(4096, 256)+ReLU, Linear(256, 10))
  on 3x32x32 images.

Batch 128, Adam (lr 1e-3), random data of the real shapes (no dataset download);
``VTL_BENCH_QUICK=1`` uses batch 4.
"""

from __future__ import annotations

import numpy as np
import pytest

import vtl
from benchmarks.conftest import QUICK, Ref, cases
from vtl import nn, optim

BATCH = 4 if QUICK else 128


def _mlp(m):
    return m.Sequential(m.Linear(784, 256), m.ReLU(), m.Linear(256, 128), m.ReLU(),
                        m.Linear(128, 10))


def _cnn(m):
    return m.Sequential(
        m.Conv2d(3, 64, 3, padding=1), m.ReLU(), m.MaxPool2d(2),
        m.Conv2d(64, 128, 3, padding=1), m.ReLU(), m.MaxPool2d(2),
        m.Conv2d(128, 256, 3, padding=1), m.ReLU(), m.MaxPool2d(2),
        m.Flatten(), m.Linear(256 * 4 * 4, 256), m.ReLU(), m.Linear(256, 10),
    )


MODELS = {"mlp-784-256-128-10": (_mlp, (784,)), "cifar10-cnn": (_cnn, (3, 32, 32))}


def _batch(model: str, batch: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, *MODELS[model][1]), dtype=np.float32)
    return x, rng.integers(0, 10, batch)


def _vtl_setup(model: str, backend: str, xs, ys, state=None):
    vtl.random.seed(0)
    net = MODELS[model][0](nn)
    if state is not None:
        net.load_state_dict(state)
    net = net.to(backend)
    opt = optim.Adam(net.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    x, y = vtl.asarray(xs, backend=backend), vtl.asarray(ys, backend=backend)

    def step():
        opt.zero_grad()
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        return loss

    return net, step


def _torch_setup(torch, model: str, device: str, xs, ys):
    torch.manual_seed(0)
    net = MODELS[model][0](torch.nn).to(device)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    x, y = torch.from_numpy(xs).to(device), torch.from_numpy(ys).to(device)

    def step():
        opt.zero_grad()
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    return net, step


@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize(("backend", "impl"), cases(refs=("torch",)))
def test_train_step(benchmark, model, backend, impl):
    benchmark.group = f"train-step-{model}-b{BATCH}-adam-{backend}"
    r = Ref(backend, impl)
    xs, ys = _batch(model, BATCH)
    if impl == "vtl":
        _, step = _vtl_setup(model, backend, xs, ys)
    else:
        _, step = _torch_setup(r.xp, model, r.device, xs, ys)

    def run():
        loss = step()
        r.sync()
        return loss

    run()  # optimizer state, kernel compilation and caches outside the timing
    assert np.isfinite(float(run()))
    benchmark(run)
    benchmark.extra_info["samples/s"] = (BATCH / benchmark.stats["median"]
                                         if benchmark.stats is not None else None)


@pytest.mark.parametrize("model", list(MODELS))
def test_train_step_matches_pytorch(model):
    """The two implementations of each case compute the same thing (two steps)."""
    torch = pytest.importorskip("torch")
    xs, ys = _batch(model, 4)
    tnet, tstep = _torch_setup(torch, model, "cpu", xs, ys)
    state = {k: v.detach().numpy().copy() for k, v in tnet.state_dict().items()}
    vnet, vstep = _vtl_setup(model, "numpy", xs, ys, state)
    for _ in range(2):
        np.testing.assert_allclose(float(vstep()), float(tstep()), rtol=1e-4)
    # Adam moves a weight by about lr per step whatever its gradient's size, so weights whose
    # gradients are ~0 may differ by a fraction of lr
    for k, v in tnet.state_dict().items():
        np.testing.assert_allclose(vnet.state_dict()[k].numpy(), v.numpy(), rtol=1e-3, atol=3e-4)
