"""vtl.autograd.Function: custom ops with forward/backward (PyTorch's semantics), checked
against finite differences and the built-in ops on every backend."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from helpers import assert_close, check_grad, skip_unless_dtype, to_numpy

import vtl


class Exp(vtl.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = vtl.exp(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y


class MulScale(vtl.autograd.Function):
    """Two tensor inputs, a Python number between them, two outputs."""

    @staticmethod
    def forward(ctx, a, k, b):
        ctx.save_for_backward(a, b)
        ctx.k = k
        return a * b * k, a + b

    @staticmethod
    def backward(ctx, g_prod, g_sum):
        a, b = ctx.saved_tensors
        return g_prod * b * ctx.k + g_sum, None, g_prod * a * ctx.k + g_sum


class ArgmaxWithValue(vtl.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        i = vtl.argmax(x, axis=0, keepdims=True)
        ctx.save_for_backward(i)
        ctx.mark_non_differentiable(i)
        ctx.shape = x.shape
        return vtl.take_along_axis(x, i, axis=0), i

    @staticmethod
    def backward(ctx, g, _):
        (i,) = ctx.saved_tensors
        out = vtl.zeros(ctx.shape, dtype=g.dtype, device=g.device)
        out[vtl.reshape(i, ())] = vtl.reshape(g, ())
        return out


def test_custom_op_gradients(backend):
    x = vtl.asarray([0.5, -1.0, 2.0], requires_grad=True)
    y = Exp.apply(x)
    assert y.grad_fn.name() == "ExpBackward"
    vtl.sum(y * y).backward()
    assert_close(x.grad, 2 * np.exp(2 * np.array([0.5, -1.0, 2.0], np.float32)), rtol=1e-5)
    a = vtl.asarray([1.0, 2.0], requires_grad=True)
    b = vtl.asarray([3.0, -1.0], requires_grad=True)
    p, s = MulScale.apply(a, 2.0, b)
    vtl.sum(p + 3.0 * s).backward()
    assert_close(a.grad, np.array([2 * 3 + 3, 2 * -1 + 3], np.float32))
    assert_close(b.grad, np.array([2 * 1 + 3, 2 * 2 + 3], np.float32))


def test_custom_op_finite_differences_and_second_order(backend):
    skip_unless_dtype(backend, "float64")
    x = np.array([0.3, -0.7, 1.2])
    check_grad(lambda t: Exp.apply(t), x)
    check_grad(lambda a, b: MulScale.apply(a, 1.5, b)[0] + MulScale.apply(a, 0.5, b)[1], x,
               x[::-1].copy())
    h = vtl.hessian(lambda t: vtl.sum(Exp.apply(t)))(vtl.asarray(x))
    np.testing.assert_allclose(to_numpy(h), np.diag(np.exp(x)), rtol=1e-12)


def test_unused_outputs_materialize_and_non_differentiable_outputs(backend):
    x = vtl.asarray([1.0, 5.0, 3.0], requires_grad=True)
    v, i = ArgmaxWithValue.apply(x)
    assert v.requires_grad and not i.requires_grad and i.dtype == vtl.int64
    vtl.sum(v).backward()
    np.testing.assert_array_equal(to_numpy(x.grad), [0.0, 1.0, 0.0])
    a = vtl.asarray([1.0, 2.0], requires_grad=True)
    p, _ = MulScale.apply(a, 1.0, vtl.asarray([4.0, 5.0]))
    vtl.sum(p).backward()  # the unused output's gradient arrives as zeros
    np.testing.assert_array_equal(to_numpy(a.grad), [4.0, 5.0])


def test_no_graph_without_grad(backend):
    x = vtl.asarray([1.0, 2.0])
    y = Exp.apply(x)
    assert y.grad_fn is None and not y.requires_grad
    with vtl.no_grad():
        assert Exp.apply(vtl.asarray([1.0], requires_grad=True)).grad_fn is None


def test_errors():
    class Bad(vtl.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return 3.0

    with pytest.raises(TypeError, match="must return a tensor"):
        Bad.apply(vtl.ones((2,), requires_grad=True))

    class WrongCount(vtl.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            return x * k

        @staticmethod
        def backward(ctx, g):
            return g

    y = WrongCount.apply(vtl.ones((2,), requires_grad=True), 2.0)
    with pytest.raises(RuntimeError, match="returned 1 gradient"):
        vtl.sum(y).backward()

    class GradForNumber(vtl.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            return x * k

        @staticmethod
        def backward(ctx, g):
            return g, g

    y = GradForNumber.apply(vtl.ones((2,), requires_grad=True), 2.0)
    with pytest.raises(RuntimeError, match="argument 1, which is not a tensor"):
        vtl.sum(y).backward()
    with pytest.raises(TypeError, match="not instantiated"):
        Exp()
    with pytest.raises(TypeError, match="tensors or None"):
        vtl.autograd.FunctionCtx(()).save_for_backward(3.0)


def test_saved_input_changed_in_place_raises():
    x = vtl.asarray([1.0, 2.0], requires_grad=True)
    h = x * 1.0
    p, _ = MulScale.apply(h, 1.0, vtl.asarray([1.0, 1.0]))
    with vtl.no_grad():
        h[0] = 5.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation|in-place"):
        vtl.sum(p).backward()


def test_outputs_do_not_keep_themselves_alive():
    x = vtl.asarray([1.0, 2.0], requires_grad=True)
    gc.disable()
    try:
        y, _ = MulScale.apply(Exp.apply(x), 2.0, x)
        ref = weakref.ref(y)
        del y
        assert ref() is None  # freed by reference counting: no cycle through the node
    finally:
        gc.enable()
