"""The portable dropout (no backend kernel for the dtype) keeps only its boolean mask for the
backward: not the input, not a float32 copy of a 16-bit input, not a float mask."""

from __future__ import annotations

import gc
import tracemalloc

import ml_dtypes
import numpy as np
import pytest
from helpers import to_numpy, use_kernel

import vtl
from vtl.nn import functional as F

N = 1 << 20


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
def test_portable_dropout_keeps_one_byte_per_element(dtype):
    x = vtl.asarray(np.ones(N, dtype), requires_grad=True)
    with use_kernel("dropout", None, "numpy"):
        F.dropout(x * 2.0, 0.25).backward(vtl.ones_like(x))  # first-call imports and caches
        x.grad = None
        h = x * 2.0  # a non-leaf input, freed once the graph no longer needs it
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            y = F.dropout(h, 0.25)
            del h
            gc.collect()
            kept = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
    assert y.grad_fn.name() == "DropoutMaskBackward"
    out = np.dtype(dtype).itemsize * N
    # the output and the boolean mask (and the input, whose own grad node keeps nothing)
    assert kept <= out + 2 * N + (1 << 16), kept
    y.backward(vtl.ones_like(y))
    kept_mask = to_numpy(y) != 0
    np.testing.assert_array_equal(to_numpy(x.grad)[kept_mask],
                                  np.asarray(2 * (1 / 0.75), dtype))
    np.testing.assert_array_equal(to_numpy(x.grad)[~kept_mask], 0)


def _dropout_run(backend: str, x: np.ndarray, g: np.ndarray) -> tuple:
    vtl.random.seed(11)
    t = vtl.asarray(x, backend=backend, requires_grad=True)
    y = F.dropout(t, 0.3)
    y.backward(vtl.asarray(g, backend=backend))
    after = vtl.rand(1, device=vtl.backends.get(backend).device(0))  # the generator's state
    return to_numpy(y), to_numpy(t.grad), float(to_numpy(after)[0])


@pytest.mark.parametrize("dt", ["float32", "float16"])
def test_portable_dropout_node_matches_the_kernel_bits(backend, dt):
    """Forward, gradient and the generator's state: the mask node and the backend's kernel
    (where it has one) agree bit for bit, float32 and a 16-bit dtype."""
    if dt not in vtl.__array_namespace_info__().dtypes(
            device=vtl.backends.get(backend).device(0)):
        pytest.skip(f"{backend} has no {dt}")
    x = np.random.default_rng(3).standard_normal((37, 29)).astype(dt)
    g = np.random.default_rng(4).standard_normal((37, 29)).astype(dt)
    with use_kernel("dropout", None, backend):
        ref = _dropout_run(backend, x, g)
    got = _dropout_run(backend, x, g)
    bits = np.uint16 if dt == "float16" else np.uint32
    for a, r in zip(got[:2], ref[:2], strict=True):
        np.testing.assert_array_equal(a.view(bits), r.view(bits))
    assert got[2] == ref[2]
