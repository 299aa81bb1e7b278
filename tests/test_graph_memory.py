"""Backward rules that read no values keep no inputs alive: the operands of ``+`` and ``-``,
the input of ``sum`` and ``mean``, of the fused dropout and of the packed projection's head
split are freed as soon as nothing else needs them (PyTorch keeps none of them either), and
the gradients stay those of the rules that kept them."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from helpers import to_numpy

import vtl
from vtl.nn import functional as F
from vtl.nn.functional.attention import _packed_heads

OPS = {
    "add": lambda h, c: h + c,
    "radd": lambda h, c: c + h,
    "subtract": lambda h, c: h - c,
    "rsubtract": lambda h, c: c - h,
    "add-broadcast": lambda h, c: h + c[:1],
    "sum": lambda h, c: vtl.sum(h, axis=0),
    "sum-all": lambda h, c: vtl.sum(h),
    "mean": lambda h, c: vtl.mean(h, axis=1, keepdims=True),
    "mean-all": lambda h, c: vtl.mean(h),
}


def _freed_after(backend, op):
    """``op(h, c)`` of a non-leaf ``h`` and a leaf ``c``: whether ``h`` was freed before the
    backward, and the gradients of both."""
    rng = np.random.default_rng(0)
    x = vtl.asarray(rng.standard_normal((4, 3)).astype(np.float32), backend=backend,
                    requires_grad=True)
    c = vtl.asarray(rng.standard_normal((4, 3)).astype(np.float32), backend=backend,
                    requires_grad=True)
    h = x * 2.0  # its node keeps x, a leaf, not h
    ref = weakref.ref(h)
    y = op(h, c)
    del h
    gc.collect()
    freed = ref() is None
    (y * y).sum().backward()
    return freed, to_numpy(x.grad), None if c.grad is None else to_numpy(c.grad)


@pytest.mark.parametrize("name", sorted(OPS))
def test_rules_without_values_free_their_inputs(backend, name):
    freed, gx, gc_ = _freed_after(backend, OPS[name])
    assert freed, f"{name} kept its input alive until the backward"
    # the gradients against the same computation on NumPy, by hand
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3)).astype(np.float64)
    c = rng.standard_normal((4, 3)).astype(np.float64)
    h = 2 * x
    y = {"add": h + c, "radd": h + c, "subtract": h - c, "rsubtract": c - h,
         "add-broadcast": h + c[:1], "sum": h.sum(0), "sum-all": h.sum(),
         "mean": h.mean(1, keepdims=True), "mean-all": h.mean()}[name]
    dy = 2 * y
    dh = {"add": dy, "radd": dy, "subtract": dy, "rsubtract": -dy, "add-broadcast": dy,
          "sum": np.broadcast_to(dy, h.shape), "sum-all": np.full(h.shape, dy),
          "mean": np.broadcast_to(dy / 3, h.shape), "mean-all": np.full(h.shape, dy / 12)}[name]
    np.testing.assert_allclose(gx, 2 * dh, rtol=1e-5, atol=1e-6)
    dc = {"add": dy, "radd": dy, "subtract": -dy, "rsubtract": dy}.get(name)
    if dc is not None:
        np.testing.assert_allclose(gc_, dc, rtol=1e-5, atol=1e-6)
    elif name == "add-broadcast":
        np.testing.assert_allclose(gc_[:1], dy.sum(0, keepdims=True), rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(gc_[1:], 0)


def test_second_order_through_add_and_mean(backend):
    """create_graph through the metadata the rules keep: d/dx of d/dx mean((x + x*x)^2)."""
    xs = np.array([0.5, -1.0, 2.0], np.float32)
    x = vtl.asarray(xs, backend=backend, requires_grad=True)
    y = vtl.mean((x + x * x) ** 2)
    (g,) = vtl.autograd.grad(y, x, create_graph=True)
    (gg,) = vtl.autograd.grad(vtl.sum(g), x)
    u = xs + xs * xs
    np.testing.assert_allclose(to_numpy(g), 2 * u * (1 + 2 * xs) / 3, rtol=1e-5)
    np.testing.assert_allclose(to_numpy(gg), (2 * (1 + 2 * xs) ** 2 + 4 * u) / 3, rtol=1e-5)


def test_fused_dropout_frees_its_input(backend):
    x = vtl.ones((64, 64), backend=backend, requires_grad=True)
    h = x * 3.0
    ref = weakref.ref(h)
    y = F.dropout(h, 0.5)
    del h
    gc.collect()
    assert ref() is None
    y.sum().backward()
    kept = to_numpy(y) != 0
    np.testing.assert_array_equal(to_numpy(x.grad), np.where(kept, 6.0, 0.0))


def test_head_split_frees_the_packed_projection(backend):
    x = vtl.ones((2, 5, 12), backend=backend, requires_grad=True)
    qkv = x * 1.5
    ref = weakref.ref(qkv)
    q, k, v = _packed_heads(qkv, 2, True)
    del qkv
    gc.collect()
    assert ref() is None
    (q.sum() + 2 * v.sum()).backward()
    g = to_numpy(x.grad)
    np.testing.assert_array_equal(g[..., :4], 1.5)
    np.testing.assert_array_equal(g[..., 4:8], 0.0)
    np.testing.assert_array_equal(g[..., 8:], 3.0)
