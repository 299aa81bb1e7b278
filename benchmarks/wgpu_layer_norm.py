"""Device and wall time of the wgpu backend's layer_norm, forward + backward, by kernel
layout.

For each shape (rows x row length, float32, weight and bias) and each layout of the
kernels (below), one fwd+bwd call is timed on the device by GPU timestamps
(``vtl.backends.wgpu.profile``: microseconds per kernel and their sum) and on the wall
clock with a synchronize (the median of ``--reps`` calls, best of five rounds), next to
PyTorch CUDA's call in the same process where PyTorch sees a GPU; every layout's
gradients are checked against the first one's::

    python -m benchmarks.wgpu_layer_norm [--shapes 4096x1024 8192x512] [--reps 30]
                                         [--layouts scalar vec4 ...]

Layouts (``vtl.backends.wgpu.nn``'s settings): ``scalar`` (loads of one element),
``vec4`` (the default: float32 rows in vec4 loads), ``vec4-slots32`` (32 elements an
invocation: a row of up to 1024 in one subgroup of 32), ``vec4-cols32`` /
``vec4-cols64`` (the parameter sums' summing kernel over 32 / 64 loads of columns a
workgroup), ``vec4-blocks32`` / ``vec4-blocks64`` (the parameter sums over blocks of at
least 32 / 64 rows: fewer partial sums to add).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any
from unittest import mock

import numpy as np

SHAPES = ((4096, 1024), (8192, 512), (8192, 768), (2048, 4096))

#: layout name -> settings of vtl.backends.wgpu.nn (``width``: a forced load width)
LAYOUTS: dict[str, dict[str, Any]] = {
    "scalar": {"width": 1},
    "vec4": {},
    "vec4-slots32": {"LN_SLOTS": 32},
    "vec4-cols32": {"LN_SUM_COLS": 32},
    "vec4-cols64": {"LN_SUM_COLS": 64},
    "vec4-blocks32": {"LN_BLOCK_ROWS": 32, "LN_MAX_BLOCKS": 128, "LN_SUM_COLS": 32},
    "vec4-blocks64": {"LN_BLOCK_ROWS": 64, "LN_MAX_BLOCKS": 64, "LN_SUM_COLS": 32},
}


def _patches(layout: dict[str, Any]) -> AbstractContextManager:
    """The settings of ``layout`` patched into ``vtl.backends.wgpu.nn``."""
    from vtl.backends.wgpu import nn as wnn

    settings = {k: v for k, v in layout.items() if k != "width"}
    if "width" in layout:
        settings["_ln_width"] = lambda *_a, _w=layout["width"]: _w
    return mock.patch.multiple(wnn, **settings) if settings else nullcontext()


def wall_us(fn: Callable[[], Any], reps: int, rounds: int = 5) -> float:
    """The best of ``rounds`` medians of ``reps`` calls of ``fn``, in microseconds."""
    best = []
    for _ in range(rounds):
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        best.append(float(np.median(times)))
    return 1e6 * min(best)


def _case(shape: tuple[int, int], seed: int = 0) -> tuple[dict, dict]:
    """Host arrays (x, w, b, g) of ``shape`` and their vtl tensors on wgpu."""
    import vtl

    rng = np.random.default_rng(seed)
    host = {"x": rng.standard_normal(shape).astype(np.float32),
            "w": rng.standard_normal(shape[1]).astype(np.float32),
            "b": rng.standard_normal(shape[1]).astype(np.float32),
            "g": rng.standard_normal(shape).astype(np.float32)}
    dev = {k: vtl.asarray(a, backend="wgpu", requires_grad=k != "g") for k, a in host.items()}
    return host, dev


def _torch_call(host: dict) -> Callable[[], None] | None:
    """PyTorch CUDA's fwd+bwd with a synchronize, or None without PyTorch or a GPU."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    t = {k: torch.tensor(a, device="cuda", requires_grad=k != "g") for k, a in host.items()}

    def call() -> None:
        t["x"].grad = t["w"].grad = t["b"].grad = None
        torch.nn.functional.layer_norm(t["x"], t["x"].shape[-1:], t["w"], t["b"]).backward(t["g"])
        torch.cuda.synchronize()

    return call


def time_shape(shape: tuple[int, int], layouts: list[str], reps: int) -> list[str]:
    """The report's lines for rows of ``shape``: PyTorch's wall time (where it sees a GPU),
    then each layout's wall and device times (each line printed as it is measured)."""
    from vtl.backends.wgpu._recorder import REC
    from vtl.backends.wgpu.profile import kernel_times
    from vtl.nn import functional as F

    host, d = _case(shape)

    def call() -> None:
        d["x"].grad = d["w"].grad = d["b"].grad = None
        F.layer_norm(d["x"], shape[-1:], d["w"], d["b"]).backward(d["g"])

    def synced() -> None:
        call()
        REC.synchronize()

    lines = [f"{shape[0]} x {shape[1]} float32, fwd+bwd"]
    print("\n" + lines[0])
    ref = _torch_call(host)
    if ref is not None:
        for _ in range(5):
            ref()
        lines.append(f"  {'PyTorch CUDA':14s} wall {wall_us(ref, reps):8.1f} us")
        print(lines[-1])
    first = None
    for name in layouts:
        with _patches(LAYOUTS[name]):
            for _ in range(3):
                synced()
            grads = [d[k].grad.numpy() for k in ("x", "w", "b")]
            first = first or grads
            diff = max(float(np.abs(a - b).max()) for a, b in zip(grads, first, strict=True))
            with kernel_times() as kt:
                for _ in range(reps):
                    call()
                REC.synchronize()
            kernels = "  ".join(f"{k}={1e6 * t / reps:.1f}"
                                for k, (_n, t) in kt.by_kernel().items())
            lines.append(f"  {name:14s} wall {wall_us(synced, reps):8.1f} us  device "
                         f"{1e6 * kt.busy / reps:6.1f} us  [{kernels}]  max diff {diff:.1e}")
            print(lines[-1], flush=True)
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="*", default=None, metavar="MxN")
    ap.add_argument("--layouts", nargs="*", default=list(LAYOUTS), choices=list(LAYOUTS))
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args(argv)
    shapes = SHAPES if not args.shapes else tuple(
        tuple(int(v) for v in s.split("x")) for s in args.shapes)
    for shape in shapes:
        time_shape(shape, args.layouts, args.reps)


if __name__ == "__main__":
    main()
