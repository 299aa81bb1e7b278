"""The numpy backend's CNN training steps with its convolution's tiling varied, side by side
with PyTorch CPU at the same thread count (``benchmarks/cpu_models.py``'s steps).

The tiled convolution cuts a layer's images into tiles of about ``TILE`` patch elements
(``WINOGRAD_TILE`` on the Winograd path), the same tiles on any number of threads, and the
pool's threads take them in turn. This script times the steps as shipped, with more,
smaller tiles, and with the tiles' products on the BLAS's own threads, to see what limits
a step on many cores::

    python -m benchmarks.cpu_tiling --threads 16 [--rounds 5] [vgg resnet]

Each variant is timed by ``cpu_models.compare`` (vtl and PyTorch interleaved, best of the
rounds); "as shipped" runs first and again last, which shows the machine's drift.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any
from unittest import mock

if __name__ == "__main__":  # NumPy's BLAS reads its thread count when it loads
    import sys

    _n = sys.argv[sys.argv.index("--threads") + 1] if "--threads" in sys.argv[:-1] else "2"
    for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_v, _n)
    import vtl  # noqa: F401 - before NumPy (vtl/_openblas.py)

from benchmarks import cpu_models  # noqa: E402


def _tiles_at_least(count: int) -> Callable[..., list[tuple[int, int]]]:
    """``conv._tiles`` with at most ``ceil(n / count)`` of a layer's ``n`` images a tile
    (``count`` tiles where ``count`` divides ``n``), and never more than ``conv.TILE``
    allows: the shipped function, asked for tiles of at most that many images."""
    from vtl.backends.numpy import conv

    shipped = conv._tiles

    def tiles(n: int, per_image: int, tile: int | None = None) -> list[tuple[int, int]]:
        limit = conv.TILE if tile is None else tile
        return shipped(n, per_image, min(limit, max(per_image, 1) * max(1, -(-n // count))))

    return tiles


def variants() -> dict[str, dict[str, Any]]:
    """Variant name -> attributes of ``vtl.backends.numpy.conv`` to set."""
    from vtl.backends.numpy import conv

    return {
        "as shipped": {},
        "about 16 tiles a layer": {"_tiles": _tiles_at_least(16)},
        "tiles / 4": {"TILE": conv.TILE // 4, "WINOGRAD_TILE": conv.WINOGRAD_TILE // 4},
        "tiles / 16": {"TILE": conv.TILE // 16, "WINOGRAD_TILE": conv.WINOGRAD_TILE // 16},
        "tiles' BLAS not one thread": {"ONE_BLAS_THREAD": False},
        "as shipped, again": {},
    }


def patched(attrs: dict[str, Any]) -> AbstractContextManager:
    """``vtl.backends.numpy.conv`` with ``attrs`` set, restored on exit."""
    from vtl.backends.numpy import conv

    return mock.patch.multiple(conv, **attrs) if attrs else nullcontext()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="*", default=["vgg", "resnet"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    cpu_models.set_threads(args.threads)
    print(f"{'model':8s} {'variant':28s} {'vtl ms':>8s} {'torch ms':>9s} {'ratio':>6s}  "
          f"({args.threads} threads)")
    for model in args.models:
        for name, attrs in variants().items():
            with patched(attrs):
                r = cpu_models.compare(model, args.rounds)
            print(f"{model:8s} {name:28s} {r['vtl_ms']:8.2f} {r['torch_ms']:9.2f} "
                  f"{r['ratio']:6.2f}", flush=True)


if __name__ == "__main__":
    main()
