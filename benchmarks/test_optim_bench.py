"""One optimizer step over ~10M float32 parameters in 100 tensors (100 x 1000 each).

Cases per backend: ``vtl`` (default ``foreach=None``: the backend's fused
multi-tensor kernel when it has one), ``portable`` (``foreach=False``: the
array-API rules, one parameter at a time) and, on the numpy backend,
``torch`` (PyTorch on the CPU). ``report.py`` prints vtl / reference ratios,
so ``vtl / portable`` is the fused speed-up.

Aims: fused at least 5x faster than portable on the GPUs (cupy, wgpu); the
numpy backend close to PyTorch CPU.
"""

from __future__ import annotations

import numpy as np
import pytest

import vtl
from benchmarks.conftest import synchronize
from vtl import optim

N_TENSORS = 100
SHAPE = (100, 1000)  # 100 x 100k = 10M parameters
CONFIGS = {
    "adam": (optim.Adam, {"lr": 1e-3}),
    "adamw": (optim.AdamW, {"lr": 1e-3, "weight_decay": 1e-2}),
    "sgd-momentum": (optim.SGD, {"lr": 1e-2, "momentum": 0.9}),
}


def _data(seed: int = 0) -> tuple[list[np.ndarray], list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    ps = [rng.standard_normal(SHAPE, dtype=np.float32) for _ in range(N_TENSORS)]
    gs = [rng.standard_normal(SHAPE, dtype=np.float32) * 1e-2 for _ in range(N_TENSORS)]
    return ps, gs


@pytest.mark.parametrize("impl", ["vtl", "portable", "torch"])
@pytest.mark.parametrize("config", list(CONFIGS))
def test_optimizer_step(benchmark, backend, config, impl):
    benchmark.group = f"optim-{config}-10M-{backend}"
    cls, kwargs = CONFIGS[config]
    ps, gs = _data()
    if impl in ("vtl", "portable"):
        params = [vtl.asarray(p, backend=backend, requires_grad=True) for p in ps]
        for p, g in zip(params, gs, strict=True):
            p.grad = vtl.asarray(g, backend=backend)
        opt = cls(params, **kwargs, foreach=None if impl == "vtl" else False)
        opt.step()  # state allocation and kernel compilation outside the timing
        synchronize(backend)

        def run():
            opt.step()
            synchronize(backend)

    else:
        torch = pytest.importorskip("torch")
        if backend != "numpy":
            pytest.skip("PyTorch CPU is the reference of the numpy backend")
        tparams = [torch.tensor(p, requires_grad=True) for p in ps]
        for p, g in zip(tparams, gs, strict=True):
            p.grad = torch.from_numpy(g)
        topt = getattr(torch.optim, cls.__name__)(tparams, **kwargs)
        topt.step()

        def run():
            topt.step()

    benchmark(run)
    benchmark.extra_info["params"] = N_TENSORS * SHAPE[0] * SHAPE[1]


def test_fused_and_portable_agree_on_the_benchmark_problem(backend):
    """Three Adam steps on a slice of the benchmark's data: both paths agree."""
    ps, gs = _data()
    out = []
    for foreach in (None, False):
        params = [vtl.asarray(p[:10], backend=backend, requires_grad=True) for p in ps[:5]]
        for p, g in zip(params, gs, strict=True):
            p.grad = vtl.asarray(g[:10], backend=backend)
        opt = optim.Adam(params, lr=1e-2, foreach=foreach)
        for _ in range(3):
            opt.step()
        out.append([p.numpy() for p in params])
    for a, b in zip(*out, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
