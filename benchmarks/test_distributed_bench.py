"""vtl.distributed in one process: what data parallelism costs per training step.

* ``ddp-step-numpy``: a training step of an MLP 256-512-512-10 (batch 64) with
  ``DistributedDataParallel`` (``vtl``: bucket packing, the all-reduce of a world
  of one, unpacking) next to the same step without the wrapper (``no-ddp``).
* ``ddp-step-cupy-nccl``: the same on the cupy backend with a real one-rank NCCL
  communicator on GPU 0 (``init_process_group("nccl")``), so the NCCL call and
  its completion polling are in the timing; skips without CuPy/NCCL.
* ``all-reduce-cupy-nccl``: ``all_reduce`` of 1M float32 on that communicator.

Timings for several processes (MPI on the CPU: all-reduce per buffer size, step
time for 1 vs 2 ranks) come from ``benchmarks/distributed_bench.py``, which
launches itself with ``mpiexec``; see docs/benchmarks.md.
"""

from __future__ import annotations

import numpy as np
import pytest

import vtl
import vtl.distributed as dist
from vtl import backends, nn, optim


def _nccl_or_skip() -> None:
    if not backends.get("cupy").is_available:
        pytest.skip(f"cupy unavailable: {backends.get('cupy').unavailable_reason}")
    from vtl.distributed._nccl import nccl_available

    if not nccl_available():
        pytest.skip("CuPy has no NCCL (pip install nvidia-nccl-cu12)")


@pytest.fixture
def group(request: pytest.FixtureRequest):
    dist.init_process_group(request.param)
    yield request.param
    dist.destroy_process_group()


def _step(backend: str, wrap: bool):
    vtl.random.seed(0)
    m = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                      nn.Linear(512, 10)).to(backend)
    model = dist.DistributedDataParallel(m) if wrap else m
    opt = optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    rng = np.random.default_rng(0)
    x = vtl.asarray(rng.standard_normal((64, 256)).astype(np.float32), backend=backend)
    y = vtl.asarray(rng.integers(0, 10, 64), backend=backend)

    def step() -> None:
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
        backends.get(backend).synchronize()

    step()
    return step


@pytest.mark.parametrize("group", ["auto"], indirect=True)
@pytest.mark.parametrize("impl", ["vtl", "no-ddp"])
def test_ddp_step_numpy(benchmark, group, impl):
    benchmark.group = "ddp-step-numpy"
    benchmark(_step("numpy", impl == "vtl"))


@pytest.mark.parametrize("impl", ["vtl", "no-ddp"])
def test_ddp_step_cupy_nccl(benchmark, impl):
    _nccl_or_skip()
    dist.init_process_group("nccl")
    try:
        step = _step("cupy", impl == "vtl")
        benchmark.group = "ddp-step-cupy-nccl"
        benchmark(step)
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("impl", ["vtl"])
def test_all_reduce_cupy_nccl(benchmark, impl):
    _nccl_or_skip()
    dist.init_process_group("nccl")
    try:
        t = vtl.ones(2**20, backend="cupy")
        dist.all_reduce(t)
        assert dist.get_backend() == "nccl" and dist.group._group.nccl is not None
        benchmark.group = "all-reduce-cupy-nccl"
        benchmark(dist.all_reduce, t)
    finally:
        dist.destroy_process_group()
