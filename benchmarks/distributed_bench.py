"""Data-parallel timings on the CPU: all-reduce time per buffer size, DDP step time per rank count.

Run it alone and it launches itself with ``mpiexec -n R`` for each ``--ranks``
count, then writes one JSON (and prints a table)::

    python benchmarks/distributed_bench.py --ranks 1,2 --out dist_bench.json [--quick]

Each launch measures, on rank 0 after a barrier, the median of ``--repeat`` runs of

* ``all_reduce`` (sum, in place, MPI engine) of float32 buffers of each size in
  ``--sizes`` (elements), and
* one training step of an MLP 256-512-512-10 wrapped in ``DistributedDataParallel``
  (forward, backward with the bucketed gradient all-reduce, SGD step) on a local
  batch of ``--batch`` samples, plus the same step without the wrapper
  (``no-ddp``), so their difference is the synchronisation cost.

With ``--ranks 1,2`` the per-step time of 1 vs 2 processes shows the
data-parallel overhead (each rank does the same local work; on 2 cores two ranks
also compete for the CPU). As root, Open MPI needs ``OMPI_ALLOW_RUN_AS_ROOT=1
OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1`` (set here for the child launches).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", default="1,2", help="comma-separated rank counts to launch")
    p.add_argument("--sizes", default="1024,65536,1048576,8388608",
                   help="all-reduce buffer sizes in float32 elements")
    p.add_argument("--batch", type=int, default=64, help="local batch per rank")
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--quick", action="store_true", help="small sizes, few repeats")
    p.add_argument("--out", default=None, help="write the results as JSON here")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args()


def _median(fn, repeat: int, barrier) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        barrier()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def worker(a: argparse.Namespace) -> dict | None:
    """One launch: every rank runs this; rank 0 returns the timings, the others None."""
    import vtl
    import vtl.distributed as dist
    from vtl import nn, optim

    dist.init_process_group(timeout=120)
    world = dist.get_world_size()
    res: dict = {"world_size": world, "backend": dist.get_backend(), "all_reduce": {},
                 "step": {}}
    for n in [int(s) for s in a.sizes.split(",")]:
        t = vtl.ones(n, dtype=vtl.float32, backend="numpy")
        res["all_reduce"][str(n)] = _median(lambda t=t: dist.all_reduce(t), a.repeat,
                                            dist.barrier)
    rng = np.random.default_rng(dist.get_rank())
    x = vtl.asarray(rng.standard_normal((a.batch, 256)).astype(np.float32))
    y = vtl.asarray(rng.integers(0, 10, a.batch))
    for impl in ("vtl", "no-ddp"):
        vtl.random.seed(0)
        m = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10))
        model = dist.DistributedDataParallel(m) if impl == "vtl" else m
        opt = optim.SGD(model.parameters(), lr=0.01)
        loss_fn = nn.CrossEntropyLoss()

        def step(model=model, opt=opt, loss_fn=loss_fn) -> None:
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()

        res["step"][impl] = _median(step, a.repeat, dist.barrier)
    rank = dist.get_rank()
    dist.destroy_process_group()
    return res if rank == 0 else None


def launch(a: argparse.Namespace, ranks: int) -> dict:
    mpiexec = shutil.which("mpiexec") or shutil.which("mpirun")
    if mpiexec is None:
        raise SystemExit("distributed_bench: no mpiexec on PATH (apt-get install openmpi-bin)")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", VTL_BACKEND="numpy")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    argv = [mpiexec, "-n", str(ranks), sys.executable, __file__, "--worker",
            "--sizes", a.sizes, "--batch", str(a.batch), "--repeat", str(a.repeat)]
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if p.returncode != 0 or line is None:
        raise SystemExit(f"distributed_bench: the {ranks}-rank launch failed:\n{p.stdout}\n"
                         f"{p.stderr[-3000:]}")
    return json.loads(line[len("RESULT "):])


def main() -> None:
    a = _args()
    if a.quick:
        a.sizes, a.repeat = "1024,65536", min(a.repeat, 5)
    if a.worker:
        res = worker(a)
        if res is not None:
            print("RESULT " + json.dumps(res), flush=True)
        return
    runs = [launch(a, int(r)) for r in a.ranks.split(",")]
    print(f"{'ranks':>5} {'size':>9} {'all_reduce ms':>14}")
    for r in runs:
        for n, s in r["all_reduce"].items():
            print(f"{r['world_size']:>5} {n:>9} {s * 1e3:>14.3f}")
    print(f"{'ranks':>5} {'DDP step ms':>12} {'plain step ms':>14}")
    for r in runs:
        print(f"{r['world_size']:>5} {r['step']['vtl'] * 1e3:>12.3f} "
              f"{r['step']['no-ddp'] * 1e3:>14.3f}")
    if a.out:
        Path(a.out).write_text(json.dumps({"runs": runs, "batch": a.batch}, indent=2))
        print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
