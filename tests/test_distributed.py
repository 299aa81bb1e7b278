"""vtl.distributed: single-process behaviour here, several ranks through ``mpiexec``.

The multi-rank cases launch ``tests/distributed_workers/worker.py`` with
``mpiexec -n 2`` / ``-n 3``; the worker checks its results with NumPy oracles
on every rank. They skip (with the reason) where mpiexec or mpi4py is missing;
``make test`` installs both.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import assert_close

import vtl
import vtl.distributed as dist
from vtl import nn, optim

ROOT = Path(__file__).resolve().parent.parent
WORKER = Path(__file__).resolve().parent / "distributed_workers" / "worker.py"
MPIEXEC = shutil.which("mpiexec") or shutil.which("mpirun")

# Open MPI in CI: running as root, more ranks than cores, shared memory without ptrace,
# and the launcher's own traffic on the loopback interface only
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_rmaps_base_oversubscribe": "1",
           "OMPI_MCA_btl_vader_single_copy_mechanism": "none", "OMPI_MCA_btl": "self,vader",
           "OMPI_MCA_oob_tcp_if_include": "lo"}


def _mpi_missing() -> str | None:
    """Why ranks cannot be launched here, or None. mpi4py.MPI is imported in a child
    process (the wheel needs an MPI library at run time), never in the test process."""
    if MPIEXEC is None:
        return "no MPI launcher (mpiexec) on PATH"
    if importlib.util.find_spec("mpi4py") is None:
        return "mpi4py is not installed"
    p = subprocess.run([sys.executable, "-c", "from mpi4py import MPI"], capture_output=True,
                       text=True, timeout=60, env=dict(os.environ, **MPI_ENV))
    return None if p.returncode == 0 else f"mpi4py cannot load MPI: {p.stderr.strip()[-300:]}"


needs_mpi = pytest.mark.skipif(
    MPIEXEC is None or importlib.util.find_spec("mpi4py") is None,
    reason="needs an MPI launcher (mpiexec) and mpi4py: `pip install vtl[distributed]` and "
           "`apt-get install openmpi-bin` (make test installs both)")


@pytest.fixture(scope="module")
def mpi_ok() -> None:
    why = _mpi_missing()
    if why is not None:
        why += "; `pip install vtl[distributed]` and `apt-get install openmpi-bin`"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"`make test` installs MPI, yet {why}")  # never skip silently in CI
        pytest.skip(why)


def mpirun(n: int, mode: str, tmp: Path, timeout: float = 60) -> tuple[int, str, float]:
    """Run the worker in ``mode`` on ``n`` ranks; (exit status, output, seconds)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env.update(MPI_ENV, VTL_BACKEND="numpy")
    t0 = time.monotonic()
    p = subprocess.run([MPIEXEC, "-n", str(n), sys.executable, str(WORKER), mode, str(tmp)],
                       env=env, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout + p.stderr, time.monotonic() - t0


@pytest.fixture(autouse=True)
def _no_group():
    yield
    if dist.is_initialized():
        dist.destroy_process_group()


# -------------------------------------------------------------- several ranks (mpiexec)
@needs_mpi
@pytest.mark.usefixtures("mpi_ok")
@pytest.mark.parametrize("n", [2, 3])
def test_collectives_on_ranks(n, tmp_path):
    rc, out, _ = mpirun(n, "collectives", tmp_path)
    assert rc == 0, out
    for r in range(n):
        assert f"collectives ok rank {r}" in out, out


@needs_mpi
@pytest.mark.usefixtures("mpi_ok")
def test_wgpu_tensors_are_staged_through_host(tmp_path):
    if not vtl.backends.get("wgpu").is_available:
        pytest.skip(f"wgpu unavailable: {vtl.backends.get('wgpu').unavailable_reason}")
    rc, out, _ = mpirun(2, "staged", tmp_path)
    assert rc == 0, out
    assert "staged ok rank 0" in out and "staged ok rank 1" in out, out


@needs_mpi
@pytest.mark.usefixtures("mpi_ok")
def test_ddp_matches_single_process_training(tmp_path):
    """Parameters after DDP steps on 2 ranks (each half a batch; one bucket and one bucket
    per parameter; no_sync accumulation) equal one process on the whole batch; unused
    parameters; DistributedSampler shares cover the data."""
    rc, out, _ = mpirun(2, "ddp", tmp_path)
    assert rc == 0, out
    assert "ddp ok rank 0" in out and "ddp ok rank 1" in out, out


@needs_mpi
@pytest.mark.usefixtures("mpi_ok")
def test_fit_is_rank_aware(tmp_path):
    rc, out, _ = mpirun(2, "fit", tmp_path)
    assert rc == 0, out
    assert "fit ok rank 1" in out, out
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"ck{e}.safetensors" for e in (1, 2, 3)]


@needs_mpi
@pytest.mark.usefixtures("mpi_ok")
def test_rank_that_leaves_gives_clear_error_not_hang(tmp_path):
    rc, out, secs = mpirun(2, "timeout", tmp_path, timeout=60)
    assert rc != 0, out
    assert "all_reduce timed out after 1.5 s on rank 0 of 2" in out, out
    assert "DistributedTimeoutError" in out and "MPI_Abort" in out, out
    assert secs < 30, f"took {secs:.1f} s"


@needs_mpi
@pytest.mark.usefixtures("mpi_ok")
def test_ddp_example_on_two_ranks(tmp_path):
    env = dict(os.environ, **MPI_ENV)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    p = subprocess.run([MPIEXEC, "-n", "2", sys.executable, str(ROOT / "examples" / "ddp_train.py"),
                        "--backend", "numpy", "--quick"], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count("world size: 2") == 1, p.stdout  # printed by rank 0 only
    assert "final loss:" in p.stdout and "test accuracy:" in p.stdout, p.stdout


# ------------------------------------------------------------ one process, no launcher
def test_world_of_one_without_launcher(backend):
    dist.init_process_group()
    assert dist.is_initialized() and dist.get_rank() == 0 and dist.get_world_size() == 1
    assert dist.get_local_rank() == 0
    dist.barrier()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for op in ("sum", "mean", "max", "min", "prod"):
        t = vtl.asarray(x)
        assert dist.all_reduce(t, op) is t
        assert_close(t, x)
    t = vtl.asarray(x)
    dist.broadcast(t, 0)
    assert_close(t, x)
    outs = [vtl.zeros((2, 3))]
    dist.all_gather(outs, vtl.asarray(x))
    assert_close(outs[0], x)
    out = vtl.zeros((2, 3))
    dist.all_gather_into_tensor(out, vtl.asarray(x))
    assert_close(out, x)
    out = vtl.zeros((2, 3))
    dist.reduce_scatter_tensor(out, vtl.asarray(x))
    assert_close(out, x)
    out = vtl.zeros((2, 3))
    dist.reduce_scatter(out, [vtl.asarray(x)], op="max")
    assert_close(out, x)


def test_world_of_one_ddp_equals_plain_training(backend):
    dist.init_process_group()

    def run(wrap):
        vtl.random.seed(0)
        m = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2))
        model = dist.DistributedDataParallel(m) if wrap else m
        assert not wrap or model.module is m
        opt = optim.Adam(model.parameters(), lr=0.05)
        g = np.random.default_rng(1)
        for _ in range(3):
            x = vtl.asarray(g.standard_normal((5, 4)).astype(np.float32))
            opt.zero_grad()
            vtl.sum(model(x) ** 2).backward()
            opt.step()
        return [p.numpy() for p in m.parameters()]

    for a, b in zip(run(True), run(False), strict=True):
        assert_close(a, b)


def test_collective_errors():
    with pytest.raises(RuntimeError, match="init_process_group"):
        dist.all_reduce(vtl.ones(2))
    with pytest.raises(RuntimeError, match="init_process_group"):
        dist.get_rank()
    with pytest.raises(ValueError, match="backend must be one of"):
        dist.init_process_group("gloo")
    with pytest.raises(ValueError, match="timeout"):
        dist.init_process_group(timeout=-1)
    dist.init_process_group()
    with pytest.raises(RuntimeError, match="already"):
        dist.init_process_group()
    with pytest.raises(ValueError, match="op must be one of"):
        dist.all_reduce(vtl.ones(2), op="xor")
    with pytest.raises(TypeError, match="'mean' needs a floating-point"):
        dist.all_reduce(vtl.ones(2, dtype=vtl.int32), op="mean")
    with pytest.raises(TypeError, match="bool"):
        dist.all_reduce(vtl.ones(2, dtype=vtl.bool), op="sum")
    with pytest.raises(TypeError, match="vtl.Tensor"):
        dist.all_reduce(np.ones(2))
    with pytest.raises(ValueError, match="src must be a rank"):
        dist.broadcast(vtl.ones(2), 1)
    with pytest.raises(ValueError, match="world_size=1 tensors"):
        dist.all_gather([], vtl.ones(2))
    with pytest.raises(ValueError, match="shape"):
        dist.all_gather_into_tensor(vtl.zeros(3), vtl.ones(2))
    with pytest.raises(TypeError, match="vtl.nn.Module"):
        dist.DistributedDataParallel(lambda x: x)


def test_mismatched_world_size_is_an_error(monkeypatch):
    monkeypatch.setattr(dist.group._launch, "launched_by_mpi", lambda: False)
    with pytest.raises(ValueError, match="world_size=1 was given|rank=3"):
        dist.init_process_group(rank=3)


def test_missing_mpi_engine_says_what_to_install(monkeypatch):
    from vtl.distributed import _mpi

    monkeypatch.setattr(_mpi, "_MPI", None)
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    with pytest.raises(RuntimeError, match=r"pip install vtl\[distributed\]"):
        dist.init_process_group("mpi")
    assert not dist.is_initialized()


def test_missing_nccl_engine_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)
    monkeypatch.setitem(sys.modules, "cupy.cuda", None)
    with pytest.raises(RuntimeError, match=r"NCCL.*pip install vtl\[cuda\]"):
        dist.init_process_group("nccl")
    assert not dist.is_initialized()


def test_collective_records_no_graph_and_bumps_version():
    dist.init_process_group()
    w = vtl.asarray([1.0, 2.0], requires_grad=True)
    y = w * w  # saves w for backward
    dist.all_reduce(w)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        vtl.sum(y).backward()


def test_ddp_no_sync_and_unused_parameters_single_process():
    dist.init_process_group()

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.used = nn.Linear(3, 2)
            self.unused = nn.Linear(3, 2)

        def forward(self, x):
            return self.used(x)

    vtl.random.seed(0)
    d = dist.DistributedDataParallel(Net(), find_unused_parameters=True)
    x = vtl.ones((4, 3))
    with d.no_sync():
        vtl.sum(d(x)).backward()
    g1 = d.module.used.weight.grad.numpy().copy()
    vtl.sum(d(x)).backward()  # accumulates, then (world of one) averages: unchanged
    assert_close(d.module.used.weight.grad, 2 * g1)
    assert_close(d.module.unused.weight.grad, np.zeros((2, 3), np.float32))
    d2 = dist.DistributedDataParallel(Net())
    vtl.sum(d2(x)).backward()
    with pytest.raises(RuntimeError, match=r"unused\.weight.*find_unused_parameters"):
        d2(x)
    vtl.sum(d2(x)).backward()
    d2.sync_gradients()
    d2(x)  # no error after the explicit sync
    assert d2.state_dict().keys() == {"module." + k for k in d2.module.state_dict()}


# ------------------------------------------------------------------ DistributedSampler
@pytest.mark.parametrize("n,world", [(10, 3), (9, 3), (7, 4), (2, 3), (0, 2)])
@pytest.mark.parametrize("drop_last", [False, True])
def test_sampler_covers_data_once_per_epoch(n, world, drop_last):
    samplers = [dist.DistributedSampler(n, num_replicas=world, rank=r, seed=5,
                                        drop_last=drop_last) for r in range(world)]
    for _ in range(2):
        shares = [list(iter(s)) for s in samplers]
        assert len({len(s) for s in shares}) == 1
        assert all(len(sh) == len(s) for sh, s in zip(shares, samplers, strict=True))
        allidx = [i for sh in shares for i in sh]
        if drop_last:
            assert len(allidx) == len(set(allidx)) == world * (n // world)
        else:
            assert set(allidx) == set(range(n))
            assert len(allidx) == world * -(-n // world)  # padded with repeats
        assert all(0 <= i < n for i in allidx)
    orders = [samplers[0].indices(epoch=e).tolist() for e in range(3)]
    if n >= 9:
        assert orders[0] != orders[1]  # reshuffled per epoch
    assert samplers[0].indices(epoch=1).tolist() == orders[1]  # reproducible


def test_sampler_defaults_and_data_loader():
    s = dist.DistributedSampler(6, shuffle=False)
    assert (s.num_replicas, s.rank) == (1, 0) and list(s) == list(range(6))
    s = dist.DistributedSampler(10, num_replicas=2, rank=1, shuffle=False)
    assert list(s) == [1, 3, 5, 7, 9]
    ds = vtl.data.TensorDataset(vtl.arange(10))
    loader = vtl.data.DataLoader(ds, batch_size=2,
                                 sampler=dist.DistributedSampler(ds, num_replicas=2, rank=0))
    loader.set_epoch(4)
    got = np.concatenate([b[0].numpy() for b in loader])
    assert got.tolist() == loader.sampler.indices(epoch=4).tolist()
    with pytest.raises(ValueError, match="rank must be in"):
        dist.DistributedSampler(4, num_replicas=2, rank=2)
