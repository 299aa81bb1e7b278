"""Threads: training and inference in several threads at once give each thread the
numbers it gets alone, on every backend (the wgpu backend shares one device, one recorder
and one buffer pool between threads)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import vtl
from vtl import nn, optim

THREADS = 3


def _run_threads(fns, timeout: float = 300.0) -> list:
    """Run each function in its own thread (started together); their results, in order."""
    results: list = [None] * len(fns)
    errors: list = []
    start = threading.Barrier(len(fns))

    def run(i, fn):
        try:
            start.wait(timeout)
            results[i] = fn()
        except BaseException as exc:  # reported in the main thread
            errors.append(exc)

    ts = [threading.Thread(target=run, args=(i, fn)) for i, fn in enumerate(fns)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout)
    assert not any(t.is_alive() for t in ts), "a thread did not finish"
    if errors:
        raise errors[0]
    return results


def _setup(seed: int, backend: str):
    vtl.random.seed(seed)
    model = nn.Sequential(nn.Linear(12, 24), nn.ReLU(), nn.Linear(24, 3)).to(backend)
    rng = np.random.default_rng(seed)
    x = vtl.asarray(rng.standard_normal((32, 12)).astype(np.float32), backend=backend)
    y = vtl.asarray(rng.integers(0, 3, 32), backend=backend)
    return model, x, y


def _train(model, x, y, backend: str, steps: int) -> list[float]:
    with vtl.use_backend(backend):
        opt = optim.Adam(model.parameters(), lr=1e-2)
        losses = []
        for _ in range(steps):
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss))
        return losses


def test_concurrent_training_matches_training_alone(backend):
    steps = 12
    alone = [_train(*_setup(s, backend), backend, steps) for s in range(THREADS)]
    setups = [_setup(s, backend) for s in range(THREADS)]
    together = _run_threads([lambda st=st: _train(*st, backend, steps) for st in setups])
    assert together == alone  # bit for bit: the same kernels on the same data


def test_concurrent_inference_on_one_model(backend):
    model, _, _ = _setup(0, backend)
    model.eval()
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal((8, 12)).astype(np.float32) for _ in range(THREADS)]

    def infer(a):
        with vtl.use_backend(backend), vtl.no_grad():
            out = []
            for _ in range(10):
                out.append(model(vtl.asarray(a)).numpy())
            return out

    alone = [infer(a) for a in inputs]
    together = _run_threads([lambda a=a: infer(a) for a in inputs])
    for got, want in zip(together, alone, strict=True):
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)


def test_many_small_ops_and_readbacks_in_threads(backend):
    """Allocation, release and readback from several threads at once (the buffer pool and
    the staging buffers are shared)."""

    def work(seed):
        rng = np.random.default_rng(seed)
        with vtl.use_backend(backend):
            for i in range(40):
                n = int(rng.integers(1, 300))
                a = rng.standard_normal(n).astype(np.float32)
                b = rng.standard_normal(n).astype(np.float32)
                ta, tb = vtl.asarray(a), vtl.asarray(b)
                got = (ta * tb + ta).numpy()
                np.testing.assert_allclose(got, a * b + a, rtol=1e-6, atol=1e-6)
                if i % 7 == 0:
                    assert float(vtl.sum(ta > 0)) == float(np.sum(a > 0))
        return True

    assert _run_threads([lambda s=s: work(s) for s in range(THREADS + 1)]) == [True] * 4


def test_arrays_made_in_one_thread_are_read_in_another(backend):
    made = {}

    def make():
        with vtl.use_backend(backend):
            made["x"] = vtl.asarray(np.arange(64, dtype=np.float32)) * 2

    t = threading.Thread(target=make)
    t.start()
    t.join(60)
    with vtl.use_backend(backend):
        np.testing.assert_array_equal(made["x"].numpy(), np.arange(64) * 2.0)


def test_wgpu_pool_accounting_after_threads(wgpu):
    import gc

    import vtl.backends.wgpu as xp

    gc.collect()  # the garbage of earlier tests goes back to the pool first
    xp.synchronize()
    before = xp.memory_info()["in_use"]

    def churn():
        for _ in range(50):
            a = xp.ones((128,), dtype=xp.float32)
            b = a + a
            del a, b
        return True

    _run_threads([churn] * THREADS)
    gc.collect()
    assert xp.memory_info()["in_use"] == before


@pytest.mark.parametrize("n", [2])
def test_wgpu_readback_while_another_thread_records(wgpu, n):
    """One thread reads back in a loop while others record: the open pass is never ended
    under a recording thread (``Encoding must not have ended``)."""
    import vtl.backends.wgpu as xp

    stop = threading.Event()

    def record():
        a = xp.ones((256,), dtype=xp.float32)
        k = 0
        while not stop.is_set() and k < 400:
            a = a * 1.0 + 0.0
            k += 1
        return float(xp.sum(a))

    def read():
        try:
            x = xp.arange(16, dtype=xp.float32)
            for _ in range(60):
                assert xp.to_numpy(x).tolist() == list(range(16))
        finally:
            stop.set()
        return 16.0

    out = _run_threads([read] + [record] * n)
    assert out[0] == 16.0 and all(v == 256.0 for v in out[1:])
