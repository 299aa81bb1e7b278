"""softmax/log_softmax through a backend's ``kernel("softmax")`` (one launch each way over
the last axis) against the portable formulas it replaces, on every backend: random shapes
(rows longer than a workgroup, odd sizes), special rows (all -inf, an inf, a nan),
forward and gradients, every float dtype the kernel takes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import use_kernel

import vtl
from vtl import nn

F = nn.functional


class _Spy:
    def __init__(self, kern):
        self.kern, self.calls = kern, []

    def supports(self, dtype):
        return self.kern.supports(dtype)

    def forward(self, x, log):
        self.calls.append(("forward", log))
        return self.kern.forward(x, log)

    def backward(self, y, g, log):
        self.calls.append(("backward", log))
        return self.kern.backward(y, g, log)


def _kern(backend):
    kern = vtl.backends.get(backend).kernel("softmax")
    if kern is None:
        pytest.skip(f"{backend} has no softmax kernel")
    return kern


def _run(backend, xs, gs, log, kern, dtype):
    with use_kernel("softmax", kern, backend):
        x = vtl.asarray(xs, dtype=dtype, device=backend, requires_grad=True)
        y = (F.log_softmax if log else F.softmax)(x, dim=-1)
        (g,) = vtl.autograd.grad(y, [x], vtl.asarray(gs, dtype=dtype, device=backend))
    return y.detach().numpy().astype(np.float64), g.numpy().astype(np.float64)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("shape", [(3, 5), (11, 40), (2, 3, 300), (1, 1), (9, 600), (4, 1031),
                                   (3, 4500)])
def test_kernel_matches_the_portable_formulas(backend, shape, log):
    kern = _kern(backend)
    rng = np.random.default_rng(sum(shape))
    xs = rng.standard_normal(shape) * 4
    gs = rng.standard_normal(shape)
    for name in ("float32", "float64", "float16", "bfloat16"):
        dt = getattr(vtl, name)
        if name not in vtl.__array_namespace_info__().dtypes(device=vtl.Device(backend, 0)) \
                or not kern.supports(dt):
            continue
        spy = _Spy(kern)
        yk, gk = _run(backend, xs, gs, log, spy, dt)
        assert spy.calls == [("forward", log), ("backward", log)]
        yp, gp = _run(backend, xs, gs, log, None, dt)
        tol = {"float64": 1e-13, "float32": 2e-6}.get(name)
        if tol is None:  # 16-bit: computed in float32, rounded once; the portable path
            eps = float(np.finfo(np.float16).eps) if name == "float16" else 2.0**-7
            np.testing.assert_allclose(yk, yp, rtol=2 * eps, atol=2 * eps)
            np.testing.assert_allclose(gk, gp, rtol=8 * eps, atol=8 * eps)
        else:
            np.testing.assert_allclose(yk, yp, rtol=tol, atol=tol)
            np.testing.assert_allclose(gk, gp, rtol=tol * 10, atol=tol * 10)


def test_special_rows_as_the_portable_path(backend):
    kern = _kern(backend)
    inf, nan = math.inf, math.nan
    xs = np.array([[-inf, -inf, -inf], [1.0, inf, 2.0], [1.0, nan, 2.0], [-inf, 0.0, 1.0],
                   [80.0, 90.0, -1e30]])
    for log in (False, True):
        with use_kernel("softmax", kern, backend):
            yk = (F.log_softmax if log else F.softmax)(
                vtl.asarray(xs, device=backend), dim=-1).numpy()
        with use_kernel("softmax", None, backend):
            yp = (F.log_softmax if log else F.softmax)(
                vtl.asarray(xs, device=backend), dim=-1).numpy()
        np.testing.assert_allclose(yk, yp, rtol=1e-6, equal_nan=True)


def test_other_axes_take_the_portable_path(backend):
    spy = _Spy(_kern(backend))
    x = vtl.asarray(np.arange(6.0, dtype=np.float32).reshape(2, 3), device=backend)
    with use_kernel("softmax", spy, backend):
        y0 = F.softmax(x, dim=0)
        y1 = F.softmax(x, dim=1)
    assert spy.calls == [("forward", False)]
    np.testing.assert_allclose(y0.numpy().sum(0), [1, 1, 1], rtol=1e-6)
    np.testing.assert_allclose(y1.numpy().sum(1), [1, 1], rtol=1e-6)


def test_non_contiguous_rows(backend):
    """A transposed view and a strided slice go through the kernel as the portable path
    computes them."""
    kern = _kern(backend)
    rng = np.random.default_rng(9)
    base = rng.standard_normal((40, 30)).astype(np.float32)
    for view in (lambda t: t.T, lambda t: t[::3, 1::2]):
        outs = []
        for k in (_Spy(kern), None):
            with use_kernel("softmax", k, backend):
                x = vtl.asarray(base, device=backend, requires_grad=True)
                v = view(x)
                y = F.log_softmax(v, dim=-1)
                (g,) = vtl.autograd.grad(vtl.sum(y * y), [x])
            outs.append((y.detach().numpy(), g.numpy()))
            if k is not None:
                assert k.calls == [("forward", True), ("backward", True)]
        np.testing.assert_allclose(outs[0][0], outs[1][0], rtol=2e-6, atol=2e-6)
        np.testing.assert_allclose(outs[0][1], outs[1][1], rtol=2e-5, atol=2e-5)  # |g| ~ 20
