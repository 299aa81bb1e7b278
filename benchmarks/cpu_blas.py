"""NumPy's BLAS on the matrix products of the CPU training steps, at each thread count,
beside PyTorch's product of the same operands at the full count.

The numpy backend's Linear layers, LSTM/GRU steps and attention run their products in
NumPy's BLAS (OpenBLAS in NumPy's wheels) with every BLAS thread. This script shows how
each product's time moves with the BLAS's thread count and how far it is from PyTorch's
(MKL or oneDNN on x86)::

    python -m benchmarks.cpu_blas [--threads 1,2,4,8,16] [--seconds 0.2]

Each line: the product ``M x K x N`` (``(M, K) @ (K, N)``, float32), its best time in
microseconds at each thread count, then PyTorch's (``-`` without PyTorch).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from typing import Any

if __name__ == "__main__":  # NumPy's BLAS reads its thread count when it loads
    import sys

    _arg = sys.argv[sys.argv.index("--threads") + 1] if "--threads" in sys.argv[:-1] else ""
    _n = str(max(int(v) for v in _arg.split(","))) if _arg else str(os.cpu_count() or 1)
    for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_v, _n)
    import vtl  # noqa: F401 - before NumPy (vtl/_openblas.py)

import numpy as np  # noqa: E402

#: name -> ``(M, K, N)``: products of the steps in ``benchmarks/cpu_models.py``
PRODUCTS: dict[str, tuple[int, int, int]] = {
    "lstm step h @ W_hh^T": (32, 256, 1024),
    "lstm step dz @ W_hh": (32, 1024, 256),
    "lstm input projection": (1024, 128, 1024),
    "lstm W_hh gradient": (1024, 1024, 256),
    "mlp layer 1": (64, 784, 1024),
    "mlp layer 2": (64, 1024, 1024),
    "mlp weight gradient": (1024, 64, 1024),
    "vgg fc": (32, 4096, 256),
    "vgg fc weight gradient": (256, 32, 4096),
    "transformer qkv": (1024, 256, 768),
    "transformer ff2": (1024, 1024, 256),
    "transformer weight gradient": (256, 1024, 1024),
}


def _set_blas_threads() -> Callable[[int], Any] | None:
    """``set(n)``: the calling thread's BLAS thread count (``None`` where NumPy's BLAS has
    no per-thread setting)."""
    from vtl.backends.numpy import conv

    return conv._blas_threads_local()


def _best(fn: Callable[[], Any], seconds: float) -> float:
    """Best seconds of one call of ``fn`` over five rounds filling about ``seconds``."""
    from benchmarks.cpu_models import _best as mean_of

    fn()
    reps = max(1, int(seconds / 5 / max(mean_of(fn, 1), 1e-7)))
    return min(mean_of(fn, reps) for _ in range(5))


def main(argv: list[str] | None = None) -> None:
    from benchmarks.cpu_scaling import parse_counts

    counts, seconds = parse_counts(argv, __doc__, "BLAS thread")
    setn = _set_blas_threads()
    if setn is None:
        print("NumPy's BLAS sets no thread count per thread here: one column, at its own count")
        counts = counts[-1:]
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        torch.set_num_threads(max(counts))
    rng = np.random.default_rng(0)
    print(f"{'product':30s} {'M x K x N':>16s}" + "".join(f"{t:>9d}" for t in counts)
          + "  PyTorch  (us; columns: BLAS threads)")
    for name, (m, k, n) in PRODUCTS.items():
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        row = []
        prev = setn(max(counts)) if setn is not None else None
        try:
            for t in counts:
                if setn is not None:
                    setn(t)
                row.append(f"{_best(partial(np.matmul, a, b), seconds) * 1e6:9.1f}")
        finally:
            if setn is not None:
                setn(prev)
        if torch is not None:
            ta, tb = torch.from_numpy(a), torch.from_numpy(b)
            ref = f"{_best(partial(torch.matmul, ta, tb), seconds) * 1e6:9.1f}"
        else:
            ref = f"{'-':>9s}"
        print(f"{name:30s} {f'{m}x{k}x{n}':>16s}" + "".join(row) + ref, flush=True)


if __name__ == "__main__":
    main()
