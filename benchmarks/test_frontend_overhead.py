"""The cost vtl's frontend adds to a backend call: ``vtl.add`` and ``vtl.matmul``
on small and large inputs against the raw backend function, same run.

Aim: at most 2 µs added per op on the numpy backend.
"""

from __future__ import annotations

import numpy as np
import pytest

import vtl
from benchmarks.conftest import synchronize

SIZES = {"small": 1_000, "large": 1_000_000}
MATMUL = {"small": 32, "large": 512}


def _data(backend: str, shape: tuple[int, ...]) -> vtl.Tensor:
    rng = np.random.default_rng(0)
    return vtl.asarray(rng.standard_normal(shape).astype(np.float32), backend=backend)


def _time_binary(benchmark, backend: str, impl: str, name: str, x: vtl.Tensor) -> None:
    """Time ``name(x, x)`` through vtl or straight on the backend's namespace."""
    fn, a = (getattr(vtl, name), x) if impl == "vtl" else (getattr(x.device.xp, name), x._data)

    def run():
        out = fn(a, a)
        synchronize(backend)
        return out

    benchmark(run)


@pytest.mark.parametrize("impl", ["vtl", "raw"])
@pytest.mark.parametrize("size", list(SIZES))
def test_add(benchmark, backend, size, impl):
    benchmark.group = f"add-{size}-{backend}"
    _time_binary(benchmark, backend, impl, "add", _data(backend, (SIZES[size],)))


@pytest.mark.parametrize("impl", ["vtl", "raw"])
@pytest.mark.parametrize("size", list(MATMUL))
def test_matmul(benchmark, backend, size, impl):
    benchmark.group = f"matmul-{size}-{backend}"
    n = MATMUL[size]
    _time_binary(benchmark, backend, impl, "matmul", _data(backend, (n, n)))


@pytest.mark.parametrize("impl", ["vtl", "raw"])
def test_add_with_grad_recording(benchmark, backend, impl):
    """The price of recording the graph for one op (requires_grad input)."""
    benchmark.group = f"add-recorded-small-{backend}"
    x = _data(backend, (SIZES["small"],))
    if impl == "vtl":
        x.requires_grad_(True)
    _time_binary(benchmark, backend, impl, "add", x)
