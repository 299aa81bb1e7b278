"""The NumPy backend's stacked matrix products (``matmul`` of 3-D and larger arrays, spread
over the kernels' thread pool with one BLAS thread each): NumPy's values exactly, on any
number of threads, for contiguous and transposed stacks; declined where it does not apply;
attention's gradients through it."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import check_grad

import vtl
from vtl.backends._common import threads as nc
from vtl.backends.numpy import _stacked
from vtl.backends.numpy import conv as npconv
from vtl.backends.numpy import namespace as npns

needs_local_blas = pytest.mark.skipif(npconv._blas_threads_local() is None,
                                      reason="NumPy's BLAS has no per-thread thread count")


@needs_local_blas
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("shapes", [((5, 7, 6), (5, 6, 4)), ((3, 2, 9, 5), (3, 2, 5, 8)),
                                    ((2, 4, 3), (2, 3, 1))])
def test_stacked_matmul_equals_numpy(monkeypatch, dtype, threads, shapes):
    monkeypatch.setattr(_stacked, "THRESHOLD", 0)
    monkeypatch.setattr(nc, "usable_cpus", lambda n=threads: n)
    monkeypatch.delenv("VTL_NUM_THREADS", raising=False)
    rng = np.random.default_rng(len(shapes[0]) + threads)
    a = rng.standard_normal(shapes[0]).astype(dtype)
    b = rng.standard_normal(shapes[1][:-2] + shapes[1][:-3:-1]).astype(dtype)
    b = np.swapaxes(b, -1, -2)  # a transposed view, as attention's K^T
    want = np.matmul(a, b)
    got = _stacked.matmul(a, b)
    assert got is not None and got.dtype == dtype
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(npns.matmul(a, b), want)


@needs_local_blas
def test_stacked_matmul_long_sums_equal_one_blas_thread(monkeypatch):
    """With long inner dimensions each matrix's product is NumPy's on one BLAS thread (a
    multi-threaded OpenBLAS may order the sums differently: equal up to that rounding)."""
    monkeypatch.setattr(_stacked, "THRESHOLD", 0)
    monkeypatch.setattr(nc, "usable_cpus", lambda: 2)
    monkeypatch.delenv("VTL_NUM_THREADS", raising=False)
    rng = np.random.default_rng(5)
    a = rng.standard_normal((4, 64, 500)).astype(np.float32)
    b = rng.standard_normal((4, 500, 96)).astype(np.float32)
    got = _stacked.matmul(a, b)
    local = npconv._blas_threads_local()
    prev = local(1)
    try:
        want = np.matmul(a, b)
    finally:
        local(prev)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, np.matmul(a, b), rtol=1e-5, atol=1e-4)


def test_stacked_matmul_declines(monkeypatch):
    monkeypatch.setattr(_stacked, "THRESHOLD", 0)
    monkeypatch.setattr(nc, "usable_cpus", lambda: 2)
    monkeypatch.delenv("VTL_NUM_THREADS", raising=False)
    a = np.ones((4, 3, 5), np.float32)
    assert _stacked.matmul(a, np.ones((1, 5, 2), np.float32)) is None  # broadcast stack
    assert _stacked.matmul(a, np.ones((4, 5, 2), np.float64)) is None  # mixed dtypes
    assert _stacked.matmul(a.astype(np.int64), np.ones((4, 5, 2), np.int64)) is None
    assert _stacked.matmul(a, np.ones((5, 2), np.float32)) is None  # a matrix
    assert _stacked.matmul(a[:1], np.ones((1, 5, 2), np.float32)) is None  # one matrix
    monkeypatch.setattr(nc, "usable_cpus", lambda: 1)
    assert _stacked.matmul(a, np.ones((4, 5, 2), np.float32)) is None  # one thread
    # the namespace falls back to NumPy's matmul, broadcasting included
    np.testing.assert_array_equal(npns.matmul(a, np.ones((1, 5, 2), np.float32)),
                                  np.matmul(a, np.ones((1, 5, 2), np.float32)))


def test_attention_gradients_through_stacked_products(monkeypatch):
    monkeypatch.setattr(_stacked, "THRESHOLD", 0)
    monkeypatch.setattr(nc, "usable_cpus", lambda: 2)
    monkeypatch.delenv("VTL_NUM_THREADS", raising=False)
    used = []
    real = _stacked.matmul

    def spy(a, b):
        out = real(a, b)
        used.append(out is not None)
        return out

    monkeypatch.setattr(_stacked, "matmul", spy)
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((3, 2, 5, 4)) for _ in range(3))
    check_grad(lambda q, k, v: vtl.nn.functional.scaled_dot_product_attention(q, k, v),
               q, k, v)
    assert any(used)
