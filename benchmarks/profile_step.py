"""Where a benchmark step's time goes on a GPU backend.

Prints, for one of the mixed-precision steps of ``test_amp_bench.py`` or one of the eager
float32 steps of ``test_step_bench.py`` (``step-<model>`` for each of its networks:
``step-mlp``, ``step-resnet18``, ``step-encoder4`` ...):

* wall time per step (synchronized);
* kernels per step and GPU-busy time per step, and the kernels that take the most GPU
  time: on cupy through CUPTI (``torch.profiler``, which sees CuPy's kernels too), on wgpu
  through timestamp queries around each dispatch (``vtl.backends.wgpu.profile``);
* the host functions with the most own time over a few steps (``cProfile``).

    python benchmarks/profile_step.py transformer-bf16 --backend cupy
    python benchmarks/profile_step.py step-cnn --backend wgpu --steps 2
    python benchmarks/profile_step.py transformer-bf16 --without attention   # portable path
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from collections import defaultdict

import vtl
from benchmarks import test_amp_bench as amp
from benchmarks.test_step_bench import BATCH

STEPS = {
    "transformer-fp32": lambda b: _transformer(b, None),
    "transformer-bf16": lambda b: _transformer(b, "bfloat16"),
    "cnn-fp16": lambda b: _cnn(b),
    "cnn-fp32": lambda b: _cnn(b, None),
    **{f"step-{m}": (lambda b, m=m: _bench_step(b, m)) for m in BATCH},
}


def _bench_step(backend: str, model: str):
    from benchmarks.test_step_bench import _vtl_step

    return _vtl_step(model, backend, False)[0]


def _transformer(backend: str, low: str | None):
    batch, seq, d, _, _ = amp.TRANSFORMER
    x, y = amp._data((seq, d), batch)
    vtl.random.seed(0)
    return amp._vtl_step(backend, amp._encoder(vtl.nn, False), x, y, low, False)


def _cnn(backend: str, low: str | None = "float16"):
    x, y = amp._data((3, 32, 32), amp.CNN_BATCH)
    vtl.random.seed(0)
    return amp._vtl_step(backend, amp._cnn(vtl.nn), x, y, low, low is not None)


def _kernel_table(step, sync, steps: int, top: int) -> None:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        sync()
    per = defaultdict(lambda: [0, 0.0])
    for ev in prof.events():
        if ev.device_type.name == "CUDA":
            per[ev.name][0] += 1
            per[ev.name][1] += ev.device_time_total
    n = sum(c for c, _ in per.values()) / steps
    busy = sum(t for _, t in per.values()) / steps / 1e3
    print(f"kernels per step {n:.0f}, GPU busy {busy:.2f} ms per step")
    for name, (c, t) in sorted(per.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"  {t / steps / 1e3:8.3f} ms  {c / steps:6.1f}x  {name[:110]}")


def _dispatch_table(step, steps: int, top: int) -> None:
    """The wgpu kernels by device time (timestamp queries around each dispatch)."""
    from vtl.backends.wgpu.profile import available, kernel_times

    if not available():
        print("(the wgpu device has no timestamp queries inside passes: no kernel table)")
        return
    with kernel_times() as times:
        for _ in range(steps):
            step()
    print(times.table(top, per=steps))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=sorted(STEPS))
    ap.add_argument("--backend", default="cupy")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--without", action="append", default=[], metavar="KERNEL",
                    help="run without the backend's kernel KERNEL (its portable path)")
    ap.add_argument("--no-profile", action="store_true", help="only time the step")
    ap.add_argument("--sort", default="tottime", choices=["tottime", "cumulative"],
                    help="order of the host profile")
    ap.add_argument("--callers", action="append", default=[], metavar="FUNCTION",
                    help="also list the callers of the host functions matching FUNCTION")
    args = ap.parse_args()
    be = vtl.backends.require(args.backend)
    be.kernel("conv2d")  # the kernels are registered on first use
    for name in args.without:
        be._kernels.pop(name, None)
    step = STEPS[args.step](args.backend)
    sync = vtl.backends.require(args.backend).synchronize
    for _ in range(3):
        step()
    sync()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    issued = time.perf_counter()
    sync()
    end = time.perf_counter()
    print(f"{args.step} on {args.backend}: {(end - t0) / args.steps * 1e3:.2f} ms per step, "
          f"{(issued - t0) / args.steps * 1e3:.2f} ms of it issuing"
          + (f" (without {', '.join(args.without)})" if args.without else ""))
    if args.no_profile:
        return
    if args.backend == "cupy":
        _kernel_table(step, sync, args.steps, args.top)
    elif args.backend == "wgpu":
        _dispatch_table(step, args.steps, args.top)
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(args.steps):
        step()
    sync()
    pr.disable()
    stats = pstats.Stats(pr).sort_stats(args.sort)
    stats.print_stats(args.top)
    for name in args.callers:
        stats.print_callers(name)


if __name__ == "__main__":
    main()
