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

from benchmarks.conftest import _selected

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
if "wgpu" not in _selected():
    pytest.skip("the wgpu backend is not selected (VTL_TEST_BACKENDS)", allow_module_level=True)
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


def _best(benchmark) -> float:
    """The fastest round in seconds; nan under ``--benchmark-disable`` (no stats)."""
    return benchmark.stats["min"] if benchmark.stats is not None else float("nan")


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
    benchmark.extra_info["GB/s"] = 3 * 4 * N_EW / _best(benchmark) / 1e9


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
    benchmark.extra_info["GB/s (unfused)"] = 14 * 4 * N_EW / _best(benchmark) / 1e9


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
    benchmark.extra_info["TFLOP/s"] = 2 * n**3 / _best(benchmark) / 1e12


#: products of other shapes than square ones: ``name -> (shape of a, shape of b)``, float32
PRODUCTS = {
    # an LSTM's recurrent product per time step (batch 64, hidden 256, four gates)
    "lstm-step-64x256x1024": ((64, 256), (256, 1024)),
    # its input projection over 64 steps at once
    "lstm-input-4096x128x1024": ((4096, 128), (128, 1024)),
    # tall-skinny: many rows through a narrow layer
    "tall-65536x256x256": ((65536, 256), (256, 256)),
    # a weight gradient: a long inner dimension, a small result
    "wgrad-256x65536x256": ((256, 65536), (65536, 256)),
    # attention's head-batched products (batch 32 x 8 heads, sequence 512, head dim 64)
    "heads-qk-256x512x64x512": ((256, 512, 64), (256, 64, 512)),
    "heads-pv-256x512x512x64": ((256, 512, 512), (256, 512, 64)),
}


@pytest.mark.parametrize("shape", list(PRODUCTS))
@pytest.mark.parametrize("lib", LIBS)
def test_products(benchmark, lib, shape):
    """``a @ b`` of the tall-skinny, long-inner and head-batched shapes in ``PRODUCTS``
    (the aim: at least 0.6x CuPy's speed). The first call's result is checked against
    NumPy on a few rows."""
    sa, sb = PRODUCTS[shape]
    _fits(4 * max(np.prod(sa), np.prod(sb), np.prod((*sa[:-1], sb[-1]))))
    rng = np.random.default_rng(0)
    ha = rng.standard_normal(sa, dtype=np.float32)
    hb = rng.standard_normal(sb, dtype=np.float32)
    m = xp if lib == "wgpu" else cp
    a, b = m.asarray(ha), m.asarray(hb)
    sync = xp.synchronize if lib == "wgpu" else _cupy_sync

    def run():
        c = a @ b
        sync()
        return c

    c = run()
    got = xp.to_numpy(c) if lib == "wgpu" else cp.asnumpy(c)
    ref = ha[..., :8, :].astype(np.float64) @ hb
    np.testing.assert_allclose(got[..., :8, :], ref, rtol=1e-3,
                               atol=1e-3 * np.sqrt(sa[-1]))
    benchmark(run)
    flop = 2 * np.prod(sa) * sb[-1]
    benchmark.extra_info["TFLOP/s"] = flop / _best(benchmark) / 1e12


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
    benchmark.extra_info["us/op"] = _best(benchmark) / loops * 1e6


# -- sorting, scans and batched solves ---------------------------------------------------
N_SORT = min(N_EW, 1 << 22)


def _lib(lib: str):
    """(array module, synchronise) of ``lib``."""
    return (xp, xp.synchronize) if lib == "wgpu" else (cp, _cupy_sync)


def _host(lib: str, a) -> np.ndarray:
    return xp.to_numpy(a) if lib == "wgpu" else cp.asnumpy(a)


@pytest.mark.parametrize("lib", LIBS)
def test_sort_float32(benchmark, lib):
    """``sort`` of N_SORT (2^22 by default) random float32 values."""
    _fits(N_SORT * 8)
    h = np.random.default_rng(0).standard_normal(N_SORT, dtype=np.float32)
    m, sync = _lib(lib)
    a = m.asarray(h)

    def run():
        s = m.sort(a)
        sync()
        return s

    np.testing.assert_array_equal(_host(lib, run()), np.sort(h))
    benchmark(run)
    benchmark.extra_info["n"] = N_SORT
    benchmark.extra_info["Gkeys/s"] = N_SORT / _best(benchmark) / 1e9


@pytest.mark.parametrize("shape", ["1d", "2d_last_axis"])
@pytest.mark.parametrize("lib", LIBS)
def test_cumulative_sum_float32(benchmark, lib, shape):
    """``cumulative_sum`` of N_SORT float32 values: one long row, or rows of 1024 along the
    last axis of a 2-D array."""
    _fits(N_SORT * 4)
    shp = (N_SORT,) if shape == "1d" else (N_SORT // 1024, 1024)
    h = np.random.default_rng(0).uniform(0, 1, shp).astype(np.float32)
    m, sync = _lib(lib)
    a = m.asarray(h)
    if lib == "wgpu":
        def fn():
            return xp.cumulative_sum(a, axis=-1)
    else:
        def fn():
            return cp.cumsum(a, axis=-1)

    def run():
        c = fn()
        sync()
        return c

    got = _host(lib, run())
    np.testing.assert_allclose(got, np.cumsum(h.astype(np.float64), axis=-1),
                               rtol=1e-3, atol=1e-2 * shp[-1] ** 0.5)
    benchmark(run)
    benchmark.extra_info["n"] = N_SORT
    benchmark.extra_info["GB/s"] = 2 * 4 * N_SORT / _best(benchmark) / 1e9


@pytest.mark.parametrize("lib", LIBS)
def test_linalg_solve_batched_64(benchmark, lib):
    """``linalg.solve`` of a batch of 256 well-conditioned 64x64 float32 systems (one
    right-hand side vector each, as a (..., 64, 1) matrix)."""
    b_, n = 256, 64
    rng = np.random.default_rng(0)
    ha = (rng.standard_normal((b_, n, n)) + n * np.eye(n)).astype(np.float32)
    hb = rng.standard_normal((b_, n, 1)).astype(np.float32)
    m, sync = _lib(lib)
    a, b = m.asarray(ha), m.asarray(hb)

    def run():
        x = m.linalg.solve(a, b)
        sync()
        return x

    np.testing.assert_allclose(_host(lib, run()), np.linalg.solve(ha.astype(np.float64), hb),
                               rtol=1e-3, atol=1e-4)
    benchmark(run)
    benchmark.extra_info["systems/s"] = b_ / _best(benchmark)
    # LU (2/3 n^3) plus two triangular solves (2 n^2) per system
    benchmark.extra_info["GFLOP/s"] = b_ * (2 * n**3 / 3 + 2 * n**2) / _best(benchmark) / 1e9


# -- fused elementwise chains -------------------------------------------------------------

def _chain5(m, a):
    c = m.tanh(a * 2.0 + 1.0) - a / 3.0
    return m.exp(-c)


@pytest.mark.parametrize("mode", ["unfused", "fused"])
def test_elementwise_chain_5_ops_fused(benchmark, mode):
    """The 5-op chain of ``test_elementwise_chain_5_ops`` on wgpu, op by op (6 kernels)
    or traced by ``xp.fuse`` into one kernel that reads and writes N floats once."""
    _fits(N_EW * 4)
    a = xp.asarray(np.linspace(0, 1, N_EW, dtype=np.float32))
    fn = xp.fuse(lambda x: _chain5(xp, x)) if mode == "fused" else (lambda x: _chain5(xp, x))

    def run():
        c = fn(a)
        xp.synchronize()
        return c

    # equal to the unfused result up to fused multiply-adds a device compiler may form
    np.testing.assert_allclose(xp.to_numpy(run()), xp.to_numpy(_chain5(xp, a)), rtol=1e-6)
    benchmark(run)
    traffic = (2 if mode == "fused" else 14) * 4 * N_EW
    benchmark.extra_info["GB/s"] = traffic / _best(benchmark) / 1e9
    benchmark.extra_info["dispatches"] = 1 if mode == "fused" else 6
