"""Core array ops: matmul (float32 and float64, 128 to 4096), a 5-op elementwise
chain and reductions, vtl on each backend against raw NumPy / CuPy and PyTorch.

Sizes: matmul 128-4096 on the GPUs, up to 1024 on the CPU (``VTL_BENCH_FULL=1``
for all); elementwise and reductions on 2^24 float32 on the GPUs, 2^22 on the
CPU; ``VTL_BENCH_QUICK=1`` shrinks everything for a smoke run. Each vtl result
is checked against NumPy once, outside the timing. ``extra_info`` holds
TFLOP/s (matmul) or GB/s (elementwise, reductions).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from benchmarks.conftest import FULL, QUICK, Ref, cases, on_cpu

MATMUL_SIZES = (32, 64) if QUICK else (128, 512, 1024, 2048, 4096)
CPU_MATMUL_MAX = 1 << 30 if FULL else 1024
LOG2N_GPU, LOG2N_CPU = (14, 12) if QUICK else (24, 22)


@functools.lru_cache(maxsize=8)
def _host(shape: tuple[int, ...], dtype: str, seed: int, kind: str = "normal") -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "uniform":
        return rng.random(shape, dtype=np.float32).astype(dtype)
    return rng.standard_normal(shape, dtype=np.float64).astype(dtype)


def _rate(benchmark, key: str, amount: float) -> None:
    """Record ``amount / median`` (e.g. FLOP/s) when the timing ran."""
    if benchmark.stats is not None:
        benchmark.extra_info[key] = amount / benchmark.stats["median"]


def _matmul_params() -> list:
    out = []
    for n in MATMUL_SIZES:
        for p in cases(keep=lambda b, n=n: n <= CPU_MATMUL_MAX or not on_cpu(b)):
            out.append(pytest.param(n, *p.values, id=f"{n}-{p.id}"))
    return out


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("n", "backend", "impl"), _matmul_params())
def test_matmul(benchmark, dtype, n, backend, impl):
    benchmark.group = f"matmul-{dtype}-{n}-{backend}"
    r = Ref(backend, impl)
    if not r.supports(dtype):
        pytest.skip(f"{backend} has no {dtype}")
    ha, hb = _host((n, n), dtype, 0), _host((n, n), dtype, 1)
    a, b = r.asarray(ha), r.asarray(hb)
    mm = r.xp.matmul

    def run():
        c = mm(a, b)
        r.sync()
        return c

    c = run()
    if impl == "vtl" and n <= 1024:
        tol = 1e-4 if dtype == "float32" else 1e-10
        np.testing.assert_allclose(r.to_numpy(c), ha.astype(np.float64) @ hb,
                                   rtol=tol, atol=tol * n)
    benchmark(run)
    _rate(benchmark, "TFLOP/s", 2 * n**3 / 1e12)


def _size(backend: str) -> int:
    return 1 << (LOG2N_CPU if on_cpu(backend) else LOG2N_GPU)


def _chain(xp, a):
    """Five elementwise ops: multiply, add, tanh, subtract, exp."""
    return xp.exp(xp.tanh(a * 2.0 + 1.0) - a)


@pytest.mark.parametrize(("backend", "impl"), cases())
def test_elementwise_chain(benchmark, backend, impl):
    n = _size(backend)
    benchmark.group = f"elementwise-chain5-float32-2^{n.bit_length() - 1}-{backend}"
    r = Ref(backend, impl)
    h = _host((n,), "float32", 2, "uniform")
    a = r.asarray(h)

    def run():
        c = _chain(r.xp, a)
        r.sync()
        return c

    c = run()
    if impl == "vtl":
        np.testing.assert_allclose(r.to_numpy(c), _chain(np, h), rtol=1e-5, atol=1e-6)
    benchmark(run)
    # five unfused kernels, each reading and writing n floats (one binary op reads two)
    _rate(benchmark, "GB/s (unfused)", 11 * 4 * n / 1e9)


def _var(xp, a):
    return xp.var(a, correction=0) if xp.__name__ == "torch" else xp.var(a)


REDUCTIONS = {
    "sum": lambda xp, a: xp.sum(a),
    "sum-axis0": lambda xp, a: xp.sum(a, axis=0),
    "sum-axis-1": lambda xp, a: xp.sum(a, axis=-1),
    "mean": lambda xp, a: xp.mean(a),
    "max": lambda xp, a: xp.max(a),
    "argmax": lambda xp, a: xp.argmax(a),
    "var": _var,
}


@pytest.mark.parametrize("op", list(REDUCTIONS))
@pytest.mark.parametrize(("backend", "impl"), cases())
def test_reduction(benchmark, op, backend, impl):
    n = _size(backend)
    side = 1 << ((n.bit_length() - 1) // 2)
    shape = (side, n // side)
    benchmark.group = f"reduce-{op}-float32-{shape[0]}x{shape[1]}-{backend}"
    r = Ref(backend, impl)
    h = _host(shape, "float32", 3, "uniform")
    a = r.asarray(h)
    fn = REDUCTIONS[op]

    def run():
        c = fn(r.xp, a)
        r.sync()
        return c

    c = run()
    if impl == "vtl":
        got = r.to_numpy(c)
        if op == "argmax":
            assert h.reshape(-1)[int(got)] == h.max()
        else:
            np.testing.assert_allclose(got, fn(np, h.astype(np.float64)), rtol=1e-4)
    benchmark(run)
    _rate(benchmark, "GB/s", 4 * n / 1e9)
