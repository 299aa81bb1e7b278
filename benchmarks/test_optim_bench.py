"""One optimizer step over ~10M float32 parameters in 100 tensors (100 x 1000 each).

Cases per backend: ``vtl`` (default ``foreach=None``: the backend's fused
multi-tensor kernel when it has one: CuPy elementwise kernels, one WGSL
dispatch per parameter tensor on wgpu), ``portable`` (``foreach=False``: the
array-API rules, one parameter at a time) and PyTorch's default step
(``torch-cpu`` for the numpy backend, ``torch-cuda`` for cupy and wgpu).
``report.py`` prints vtl / reference ratios, so ``vtl / portable`` is the
fused speed-up.

``VTL_BENCH_QUICK=1`` (or ``VTL_BENCH_OPTIM_SHAPE=10x100`` for another size)
uses 100 tensors of 10 x 100, e.g. on a software Vulkan driver.

Aims: fused at least 5x faster than portable on the GPUs (cupy, wgpu); the
numpy backend close to PyTorch CPU.
"""

from __future__ import annotations

import functools
import os

import numpy as np
import pytest

import vtl
from benchmarks.conftest import QUICK, Ref, cases, synchronize
from vtl import optim

N_TENSORS = 100
_shape = os.environ.get("VTL_BENCH_OPTIM_SHAPE") or ("10x100" if QUICK else "100x1000")
SHAPE = tuple(int(d) for d in _shape.split("x"))  # 100 x 100 x 1000 = 10M parameters
NUMEL = N_TENSORS * SHAPE[0] * SHAPE[1]
CONFIGS = {
    "adam": (optim.Adam, {"lr": 1e-3}),
    "adamw": (optim.AdamW, {"lr": 1e-3, "weight_decay": 1e-2}),
    "sgd-momentum": (optim.SGD, {"lr": 1e-2, "momentum": 0.9}),
}


@functools.lru_cache(maxsize=1)
def _data(seed: int = 0) -> tuple[list[np.ndarray], list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    ps = [rng.standard_normal(SHAPE, dtype=np.float32) for _ in range(N_TENSORS)]
    gs = [rng.standard_normal(SHAPE, dtype=np.float32) * 1e-2 for _ in range(N_TENSORS)]
    return ps, gs


def _cases() -> list:
    """vtl, portable and the PyTorch reference on each backend."""
    out = []
    for p in cases(refs=("torch",)):
        out.append(p)
        if p.values[1] == "vtl":
            out.append(pytest.param(p.values[0], "portable", id=f"{p.values[0]}-portable"))
    return out


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize(("backend", "impl"), _cases())
def test_optimizer_step(benchmark, backend, config, impl):
    size = f"{NUMEL // 1_000_000}M" if NUMEL % 1_000_000 == 0 else str(NUMEL)
    benchmark.group = f"optim-{config}-{size}-{backend}"
    cls, kwargs = CONFIGS[config]
    ps, gs = _data()
    if impl in ("vtl", "portable"):
        # copies: the numpy backend shares memory with its input, and steps update in place
        params = [vtl.asarray(p.copy(), backend=backend, requires_grad=True) for p in ps]
        for p, g in zip(params, gs, strict=True):
            p.grad = vtl.asarray(g, backend=backend)
        opt = cls(params, **kwargs, foreach=None if impl == "vtl" else False)
        opt.step()  # state allocation and kernel compilation outside the timing
        synchronize(backend)

        def run():
            opt.step()
            synchronize(backend)

    else:
        r = Ref(backend, impl)
        torch = r.xp
        tparams = [torch.tensor(p, device=r.device, requires_grad=True) for p in ps]
        for p, g in zip(tparams, gs, strict=True):
            p.grad = torch.from_numpy(g).to(r.device)
        topt = getattr(torch.optim, cls.__name__)(tparams, **kwargs)
        topt.step()
        r.sync()

        def run():
            topt.step()
            r.sync()

    benchmark(run)
    benchmark.extra_info["params"] = NUMEL


def test_fused_and_portable_agree_on_the_benchmark_problem(backend):
    """Three Adam steps on a slice of the benchmark's data: both paths agree."""
    ps, gs = _data()
    out = []
    for foreach in (None, False):
        params = [vtl.asarray(p[:10].copy(), backend=backend, requires_grad=True)
                  for p in ps[:5]]
        for p, g in zip(params, gs[:5], strict=True):
            p.grad = vtl.asarray(g[:10], backend=backend)
        opt = optim.Adam(params, lr=1e-2, foreach=foreach)
        for _ in range(3):
            opt.step()
        out.append([p.numpy() for p in params])
    for a, b in zip(*out, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
