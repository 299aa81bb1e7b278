"""Benchmarks of the wgpu library against CuPy (when importable) in the same process.

Run on a GPU machine::

    python -m pytest benchmarks/test_wgpu_bench.py --benchmark-only --benchmark-enable

Every timed function synchronises before returning, so device time is measured,
not just the launch. ``extra_info`` records bandwidth (GB/s) or TFLOP/s.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
xp = pytest.importorskip("vtl.backends.wgpu")
if not xp.is_available():
    pytest.skip("no WebGPU adapter", allow_module_level=True)

try:
    import cupy as cp

    cp.cuda.runtime.getDeviceCount()
except Exception:  # no CuPy / no CUDA
    cp = None

N_EW = 1 << int(os.environ.get("VTL_BENCH_LOG2N", "26"))
MAX_BIND = xp.runtime_info()["max_storage_binding"]


def _fits(nbytes: int) -> None:
    if nbytes > MAX_BIND:
        pytest.skip(f"{nbytes} bytes exceed this adapter's binding limit ({MAX_BIND})")


def _cupy_sync():
    cp.cuda.Device().synchronize()


LIBS = ["wgpu"] + (["cupy"] if cp is not None else [])


@pytest.mark.parametrize("lib", LIBS)
def test_elementwise_add(benchmark, lib):
    _fits(N_EW * 4)
    h = np.ones(N_EW, np.float32)
    if lib == "wgpu":
        a, b = xp.asarray(h), xp.asarray(h)

        def run():
            c = a + b
            xp.synchronize()
            return c
    else:
        a, b = cp.asarray(h), cp.asarray(h)

        def run():
            c = a + b
            _cupy_sync()
            return c

    run()
    benchmark(run)
    benchmark.extra_info["GB/s"] = 3 * 4 * N_EW / benchmark.stats["min"] / 1e9


@pytest.mark.parametrize("lib", LIBS)
def test_elementwise_chain_5_ops(benchmark, lib):
    _fits(N_EW * 4)
    h = np.linspace(0, 1, N_EW, dtype=np.float32)
    m = xp if lib == "wgpu" else cp
    a = m.asarray(h)
    sync = xp.synchronize if lib == "wgpu" else _cupy_sync

    def run():
        c = m.tanh(a * 2.0 + 1.0) - a / 3.0
        c = m.exp(-c)
        sync()
        return c

    run()
    benchmark(run)
    # 6 kernels, each reads and writes N floats (a binary op with an array reads two)
    benchmark.extra_info["GB/s (unfused)"] = 14 * 4 * N_EW / benchmark.stats["min"] / 1e9


@pytest.mark.parametrize("n", [1024, 2048, 4096])
@pytest.mark.parametrize("lib", LIBS)
def test_sgemm(benchmark, lib, n):
    _fits(n * n * 4)
    rng = np.random.default_rng(0)
    ha = rng.standard_normal((n, n), dtype=np.float32)
    hb = rng.standard_normal((n, n), dtype=np.float32)
    if lib == "wgpu":
        a, b = xp.asarray(ha), xp.asarray(hb)

        def run():
            c = a @ b
            xp.synchronize()
            return c
    else:
        a, b = cp.asarray(ha), cp.asarray(hb)

        def run():
            c = a @ b
            _cupy_sync()
            return c

    c = run()
    if n <= 1024:
        ref = ha.astype(np.float64) @ hb
        got = xp.to_numpy(c) if lib == "wgpu" else cp.asnumpy(c)
        np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-2)
    benchmark(run)
    benchmark.extra_info["TFLOP/s"] = 2 * n**3 / benchmark.stats["min"] / 1e12


@pytest.mark.parametrize("lib", LIBS)
def test_small_op_record_cost(benchmark, lib):
    """Per-op cost of a small elementwise op in a loop, recorded but not synchronised
    (the sync after the loop is amortised over 1,000 ops)."""
    h = np.ones(1024, np.float32)
    m = xp if lib == "wgpu" else cp
    sync = xp.synchronize if lib == "wgpu" else _cupy_sync
    a = m.asarray(h)
    b = m.asarray(h)
    loops = 1000

    def run():
        c = a
        for _ in range(loops):
            c = c + b
        sync()
        return c

    run()
    benchmark(run)
    benchmark.extra_info["us/op"] = benchmark.stats["min"] / loops * 1e6
