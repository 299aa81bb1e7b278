"""Forward + backward of the 3-layer MLP 128-64-64-32 (the upstream VTL autograd
benchmark) at batch 64 and 128: vtl on each backend, the same network written
by hand in NumPy (forward and backward), and PyTorch on the CPU when importable.

Aims (numpy backend): within 1.5x of hand-written NumPy, not slower than PyTorch.

``test_mlp_training_step`` times a whole training step of the same network built
from ``nn.Sequential(Linear, ReLU, ...)`` with ``mse_loss`` and an optimizer
(SGD with momentum, or Adam): zero_grad, forward, backward, step; PyTorch CPU
runs the same step in the same session. Aim: not slower than PyTorch.
"""

from __future__ import annotations

import numpy as np
import pytest

import vtl
from benchmarks.conftest import synchronize

SIZES = (128, 64, 64, 32)


def _params(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    ps = []
    for fan_in, fan_out in zip(SIZES[:-1], SIZES[1:], strict=True):
        bound = 1 / np.sqrt(fan_in)
        ps.append(rng.uniform(-bound, bound, (fan_in, fan_out)).astype(np.float32))
        ps.append(rng.uniform(-bound, bound, (fan_out,)).astype(np.float32))
    return ps


def _batch(batch: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    return (rng.standard_normal((batch, SIZES[0])).astype(np.float32),
            rng.standard_normal((batch, SIZES[-1])).astype(np.float32))


def vtl_step(params: list[vtl.Tensor], x: vtl.Tensor, y: vtl.Tensor) -> vtl.Tensor:
    h = x
    n = len(params) // 2
    for i in range(n):
        h = h @ params[2 * i] + params[2 * i + 1]
        if i < n - 1:
            h = vtl.maximum(h, 0.0)
    loss = vtl.mean((h - y) ** 2)
    loss.backward()
    return loss


def numpy_step(params: list[np.ndarray], x: np.ndarray, y: np.ndarray) -> list[np.ndarray]:
    acts = [x]
    pre = []
    h = x
    n = len(params) // 2
    for i in range(n):
        z = h @ params[2 * i] + params[2 * i + 1]
        pre.append(z)
        h = np.maximum(z, 0) if i < n - 1 else z
        acts.append(h)
    diff = h - y
    g = (2.0 / diff.size) * diff
    grads: list[np.ndarray] = [None] * len(params)  # type: ignore[list-item]
    for i in reversed(range(n)):
        if i < n - 1:
            g = g * (pre[i] > 0)
        grads[2 * i] = acts[i].T @ g
        grads[2 * i + 1] = g.sum(axis=0)
        g = g @ params[2 * i].T
    return grads


@pytest.mark.parametrize("batch", [64, 128])
@pytest.mark.parametrize("impl", ["vtl", "numpy", "torch"])
def test_mlp_forward_backward(benchmark, backend, batch, impl):
    benchmark.group = f"mlp-128-64-64-32-b{batch}-{backend}"
    xs, ys = _batch(batch)
    ps = _params()
    if impl == "vtl":
        params = [vtl.asarray(p, backend=backend, requires_grad=True) for p in ps]
        x, y = vtl.asarray(xs, backend=backend), vtl.asarray(ys, backend=backend)

        def run():
            for p in params:
                p.grad = None
            vtl_step(params, x, y)
            synchronize(backend)

    elif impl == "numpy":
        if backend != "numpy":
            pytest.skip("hand-written NumPy is the CPU reference")

        def run():
            numpy_step(ps, xs, ys)

    else:
        torch = pytest.importorskip("torch")
        if backend != "numpy":
            pytest.skip("PyTorch CPU is the CPU reference")
        tparams = [torch.tensor(p, requires_grad=True) for p in ps]
        tx, ty = torch.tensor(xs), torch.tensor(ys)

        def run():
            for p in tparams:
                p.grad = None
            h = tx
            n = len(tparams) // 2
            for i in range(n):
                h = h @ tparams[2 * i] + tparams[2 * i + 1]
                if i < n - 1:
                    h = torch.relu(h)
            torch.mean((h - ty) ** 2).backward()

    benchmark(run)


def _vtl_model(backend: str, ps: list[np.ndarray]) -> vtl.nn.Sequential:
    from vtl import nn

    layers: list[nn.Module] = []
    n = len(ps) // 2
    for i in range(n):
        lin = nn.Linear(SIZES[i], SIZES[i + 1])
        with vtl.no_grad():
            lin.weight[...] = vtl.asarray(np.ascontiguousarray(ps[2 * i].T))
            lin.bias[...] = vtl.asarray(ps[2 * i + 1])
        layers.append(lin)
        if i < n - 1:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers).to(backend)


def _torch_model(torch, ps: list[np.ndarray]):
    layers = []
    n = len(ps) // 2
    for i in range(n):
        lin = torch.nn.Linear(SIZES[i], SIZES[i + 1])
        with torch.no_grad():
            lin.weight.copy_(torch.tensor(ps[2 * i].T))
            lin.bias.copy_(torch.tensor(ps[2 * i + 1]))
        layers.append(lin)
        if i < n - 1:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


@pytest.mark.parametrize("opt", ["sgd", "adam"])
@pytest.mark.parametrize("batch", [64, 128])
@pytest.mark.parametrize("impl", ["vtl", "torch"])
def test_mlp_training_step(benchmark, backend, batch, impl, opt):
    benchmark.group = f"mlp-train-{opt}-b{batch}-{backend}"
    xs, ys = _batch(batch)
    ps = _params()
    if impl == "vtl":
        model = _vtl_model(backend, ps)
        x, y = vtl.asarray(xs, backend=backend), vtl.asarray(ys, backend=backend)
        optimizer = (vtl.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9) if opt == "sgd"
                     else vtl.optim.Adam(model.parameters(), lr=1e-4))
        mse = vtl.nn.functional.mse_loss

        def run():
            optimizer.zero_grad()
            mse(model(x), y).backward()
            optimizer.step()
            synchronize(backend)

    else:
        torch = pytest.importorskip("torch")
        if backend != "numpy":
            pytest.skip("PyTorch CPU is the CPU reference")
        model = _torch_model(torch, ps)
        x, y = torch.tensor(xs), torch.tensor(ys)
        optimizer = (torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9) if opt == "sgd"
                     else torch.optim.Adam(model.parameters(), lr=1e-4))
        mse = torch.nn.functional.mse_loss

        def run():
            optimizer.zero_grad()
            mse(model(x), y).backward()
            optimizer.step()

    benchmark(run)


def test_training_step_models_agree():
    """The vtl and PyTorch training steps start from the same network and loss."""
    torch = pytest.importorskip("torch")
    xs, ys = _batch(8)
    ps = _params()
    model = _vtl_model("numpy", ps)
    tmodel = _torch_model(torch, ps)
    loss = vtl.nn.functional.mse_loss(model(vtl.asarray(xs)), vtl.asarray(ys))
    tloss = torch.nn.functional.mse_loss(tmodel(torch.tensor(xs)), torch.tensor(ys))
    np.testing.assert_allclose(float(loss), float(tloss), rtol=1e-5)


def test_vtl_gradients_match_hand_written_numpy():
    """The benchmark's two CPU implementations compute the same thing."""
    xs, ys = _batch(8)
    ps = _params()
    params = [vtl.asarray(p, backend="numpy", requires_grad=True) for p in ps]
    vtl_step(params, vtl.asarray(xs), vtl.asarray(ys))
    for p, g in zip(params, numpy_step(ps, xs, ys), strict=True):
        np.testing.assert_allclose(p.grad.numpy(), g, rtol=1e-4, atol=1e-6)
