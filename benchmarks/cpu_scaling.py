"""How a CPU's throughput scales over threads for the work the numpy backend splits over
its thread pool: independent single-threaded BLAS products (the Winograd and im2col tiles'
products) and compiled tile transforms, one per thread, all threads at once.

A convolution layer on the numpy backend runs its tiles side by side on the pool's
threads, each tile's product on one BLAS thread. On a machine whose cores each give their
full speed to such work, ``T`` threads do ``T`` times the work of one; where they share
execution units, caches or memory bandwidth (hyper-threads, a virtual machine's CPUs), less.
This script measures how much less::

    python -m benchmarks.cpu_scaling [--threads 1,2,4,8,16] [--seconds 0.2]

For each kind of work and thread count it prints the time of one call (the mean over the
threads) and the throughput of all threads together relative to one thread's.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from collections.abc import Callable
from typing import Any

if __name__ == "__main__":  # NumPy's BLAS reads its thread count when it loads
    import sys

    _arg = sys.argv[sys.argv.index("--threads") + 1] if "--threads" in sys.argv[:-1] else ""
    _n = str(max(int(v) for v in _arg.split(","))) if _arg else str(os.cpu_count() or 1)
    for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_v, _n)
    import vtl  # noqa: F401 - before NumPy (vtl/_openblas.py)

import numpy as np  # noqa: E402

#: ``(rows, inner, columns)`` of the products: Winograd points of the CNN steps in
#: ``benchmarks/cpu_models.py`` (a tile's tiles by channels by channels)
PRODUCTS = ((2048, 32, 32), (512, 64, 64), (256, 128, 128))
#: ``(images, channels, side)`` of the Winograd input transforms
TRANSFORMS = ((3, 32, 32), (7, 64, 16))


def _one_blas_thread() -> Callable[[], None]:
    """A call that gives the calling thread one BLAS thread (as the conv tiles do), or a
    no-op where NumPy's BLAS has no per-thread setting."""
    from vtl.backends.numpy import conv

    local = conv._blas_threads_local()
    return (lambda: local(1)) if local is not None else (lambda: None)


def _together(make: Callable[[], Callable[[], None]], threads: int, seconds: float
              ) -> float:
    """Mean seconds of one call of the work ``make()`` gives, with ``threads`` threads each
    calling its own (own operands) in a loop at the same time."""
    one = _one_blas_thread()
    calls = [make() for _ in range(threads)]
    for c in calls:
        c()
    t = time.perf_counter()
    calls[0]()
    reps = max(3, int(seconds / max(time.perf_counter() - t, 1e-6)))
    times = [0.0] * threads
    start = threading.Barrier(threads)

    def run(k: int) -> None:
        one()
        start.wait()
        t0 = time.perf_counter()
        for _ in range(reps):
            calls[k]()
        times[k] = (time.perf_counter() - t0) / reps

    workers = [threading.Thread(target=run, args=(k,)) for k in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return sum(times) / threads


def _product(shape: tuple[int, int, int]) -> Callable[[], Callable[[], None]]:
    m, k, n = shape

    def make() -> Callable[[], None]:
        rng = np.random.default_rng(0)
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        out = np.empty((m, n), np.float32)
        return lambda: np.matmul(a, b, out=out)

    return make


def _transform(shape: tuple[int, int, int]) -> Callable[[], Callable[[], None]]:
    from vtl.backends.numpy import _winograd

    n, c, side = shape
    th = tw = -(-side // 4)

    def make() -> Callable[[], None]:
        x = np.random.default_rng(0).standard_normal((n, c, side, side), dtype=np.float32)
        v = np.empty((36, n * th * tw, c), np.float32)
        return lambda: _winograd.input_transform(x, 1, 1, th, tw, v)

    return make


def cases() -> list[tuple[str, Callable[[], Callable[[], None]]]]:
    """``(name, make)`` of each kind of work (the transforms where numba is installed)."""
    from vtl.backends.numpy import _winograd

    out: list[tuple[str, Any]] = [(f"matmul {m}x{k}x{n}", _product((m, k, n)))
                                  for m, k, n in PRODUCTS]
    if _winograd.available():
        out += [(f"winograd input transform {n}x{c}x{s}x{s}", _transform((n, c, s)))
                for n, c, s in TRANSFORMS]
    return out


def parse_counts(argv: list[str] | None, doc: str, what: str = "thread"
                 ) -> tuple[list[int], float]:
    """``(thread counts, seconds per measurement)`` from the command line ``argv``
    (``--threads 1,2,4``, default 1, 2, 4, ... up to the CPUs; ``--seconds``)."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--threads", default=None,
                    help=f"comma-separated {what} counts (default 1, 2, 4, ... up to the CPUs)")
    ap.add_argument("--seconds", type=float, default=0.2, help="time of each measurement")
    args = ap.parse_args(argv)
    if args.threads:
        return [int(v) for v in args.threads.split(",")], args.seconds
    cpus, counts = os.cpu_count() or 1, [1]
    while counts[-1] * 2 <= cpus:
        counts.append(counts[-1] * 2)
    if counts[-1] != cpus:
        counts.append(cpus)
    return counts, args.seconds


def main(argv: list[str] | None = None) -> None:
    counts, seconds = parse_counts(argv, __doc__)
    print(f"{'work':44s} {'threads':>7s} {'us/call':>9s} {'throughput':>10s}")
    for name, make in cases():
        base = None
        for t in counts:
            per = _together(make, t, seconds)
            base = per if base is None else base
            print(f"{name:44s} {t:7d} {per * 1e6:9.1f} {t * base / per:9.2f}x", flush=True)


if __name__ == "__main__":
    main()
