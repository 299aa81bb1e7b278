"""Manipulation functions vs NumPy on every backend, their errors and their gradients."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import vtl
from tests.helpers import (
    assert_close,
    check_grad,
    check_grad_matches_numpy,
    draw_array,
    draw_dtype,
)


def _dtype(backend, data):
    return draw_dtype(data, backend)


def _array(data, dtype, shape=None, min_dims=0, max_dims=4, min_side=0):
    return draw_array(data, dtype, shape, min_dims, max_dims, min_side)


def _axis(data, ndim):
    return data.draw(st.integers(-ndim, ndim - 1), label="axis")


# -- forward results vs NumPy ----------------------------------------------------------
@given(data=st.data())
def test_reshape_permute_moveaxis(backend, data):
    x = _array(data, _dtype(backend, data))
    t = vtl.asarray(x)
    assert_close(vtl.reshape(t, (-1,)), x.reshape(-1))
    assert_close(vtl.reshape(t, (x.size, 1) if x.size else (0, 3)),
                 x.reshape((x.size, 1) if x.size else (0, 3)))
    perm = tuple(data.draw(st.permutations(range(x.ndim)), label="perm"))
    assert_close(vtl.permute_dims(t, perm), np.transpose(x, perm))
    if x.ndim:
        src, dst = _axis(data, x.ndim), _axis(data, x.ndim)
        assert_close(vtl.moveaxis(t, src, dst), np.moveaxis(x, src, dst))
        assert_close(vtl.moveaxis(t, (0,), (-1,)), np.moveaxis(x, (0,), (-1,)))


def test_reshape_refuses_sizes_below_minus_one(backend):
    """As PyTorch and the standard: one -1 at most and no other negative size, on every
    backend (NumPy took -2 as -1)."""
    t = vtl.arange(8)
    for shape in ((-2, 4), (4, -3), (-1, -1)):
        with pytest.raises(ValueError, match="reshape"):
            vtl.reshape(t, shape)
    assert vtl.reshape(t, (2, -1)).shape == (2, 4)


@given(data=st.data())
def test_expand_dims_squeeze(backend, data):
    x = _array(data, _dtype(backend, data))
    t = vtl.asarray(x)
    ax = data.draw(st.integers(-x.ndim - 1, x.ndim), label="ax")
    e = vtl.expand_dims(t, ax)
    assert_close(e, np.expand_dims(x, ax))
    assert_close(vtl.squeeze(e, ax), x)
    assert_close(vtl.expand_dims(t, axis=(0, -1)), np.expand_dims(x, (0, -1)))
    ones = tuple(i for i, s in enumerate(x.shape) if s == 1)
    assert_close(vtl.squeeze(t, ones), np.squeeze(x, ones))


@given(data=st.data())
def test_flip_roll(backend, data):
    x = _array(data, _dtype(backend, data))
    t = vtl.asarray(x)
    assert_close(vtl.flip(t), np.flip(x))
    shift = data.draw(st.integers(-7, 7), label="shift")
    assert_close(vtl.roll(t, shift), np.roll(x, shift))
    if x.ndim:
        ax = _axis(data, x.ndim)
        assert_close(vtl.flip(t, axis=ax), np.flip(x, axis=ax))
        assert_close(vtl.roll(t, shift, axis=ax), np.roll(x, shift, axis=ax))
        axes = tuple(sorted(set(data.draw(st.lists(st.integers(0, x.ndim - 1), min_size=1),
                                          label="axes"))))
        assert_close(vtl.flip(t, axis=axes), np.flip(x, axis=axes))
        shifts = tuple(range(1, len(axes) + 1))
        assert_close(vtl.roll(t, shifts, axis=axes), np.roll(x, shifts, axis=axes))
        assert_close(vtl.roll(t, 2, axis=axes), np.roll(x, 2, axis=axes))


@given(data=st.data())
def test_concat_stack_unstack(backend, data):
    dt = _dtype(backend, data)
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=3))
    ax = _axis(data, len(shape))
    xs = []
    for _ in range(data.draw(st.integers(1, 3), label="n")):
        s = list(shape)
        s[ax] = data.draw(st.integers(0, 3))
        xs.append(_array(data, dt, tuple(s)))
    ts = [vtl.asarray(x) for x in xs]
    assert_close(vtl.concat(ts, axis=ax), np.concatenate(xs, axis=ax))
    assert_close(vtl.concat(tuple(ts), axis=None), np.concatenate(xs, axis=None))
    same = [_array(data, dt, shape) for _ in range(2)]
    sax = data.draw(st.integers(-len(shape) - 1, len(shape)), label="sax")
    st_ = vtl.stack([vtl.asarray(y) for y in same], axis=sax)
    assert_close(st_, np.stack(same, axis=sax))
    parts = vtl.unstack(st_, axis=sax)
    assert isinstance(parts, tuple) and len(parts) == 2
    for p, y in zip(parts, same, strict=True):
        assert_close(p, y)


def test_stack_and_unstack_zero_d(backend):
    a, b = vtl.asarray(1.5), vtl.asarray(2.5)
    assert_close(vtl.stack([a, b]), np.array([1.5, 2.5], np.float32))
    assert vtl.unstack(vtl.zeros((0, 3))) == ()


@given(data=st.data())
def test_broadcast(backend, data):
    shapes = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=4, max_side=3))
    dt = _dtype(backend, data)
    xs = [_array(data, dt, s) for s in shapes.input_shapes]
    outs = vtl.broadcast_arrays(*[vtl.asarray(x) for x in xs])
    assert isinstance(outs, list)
    for o, e in zip(outs, np.broadcast_arrays(*xs), strict=True):
        assert_close(o, e)
    assert vtl.broadcast_shapes(*shapes.input_shapes) == np.broadcast_shapes(
        *shapes.input_shapes) == shapes.result_shape
    assert_close(vtl.broadcast_to(vtl.asarray(xs[0]), shapes.result_shape),
                 np.broadcast_to(xs[0], shapes.result_shape))


def test_broadcast_shapes_edge_cases():
    assert vtl.broadcast_shapes() == ()
    assert vtl.broadcast_shapes((3, 0), (1, 1)) == (3, 0)
    assert vtl.broadcast_shapes((2, 1), (0,)) == (2, 0)
    with pytest.raises(ValueError, match="cannot be broadcast"):
        vtl.broadcast_shapes((2, 3), (3, 2))


@given(data=st.data())
def test_repeat(backend, data):
    x = _array(data, _dtype(backend, data))
    t = vtl.asarray(x)
    r = data.draw(st.integers(0, 3), label="r")
    assert_close(vtl.repeat(t, r), np.repeat(x, r))
    if x.ndim:
        ax = _axis(data, x.ndim)
        assert_close(vtl.repeat(t, r, axis=ax), np.repeat(x, r, axis=ax))
        reps = np.asarray(data.draw(st.lists(st.integers(0, 3), min_size=x.shape[ax],
                                             max_size=x.shape[ax])), dtype=np.int64)
        assert_close(vtl.repeat(t, vtl.asarray(reps), axis=ax), np.repeat(x, reps, axis=ax))
        one = np.array([r], dtype=np.int32)
        assert_close(vtl.repeat(t, vtl.asarray(one), axis=ax), np.repeat(x, one, axis=ax))


@given(data=st.data())
def test_tile(backend, data):
    x = _array(data, _dtype(backend, data), max_dims=3)
    reps = tuple(data.draw(st.lists(st.integers(0, 3), max_size=4), label="reps"))
    assert_close(vtl.tile(vtl.asarray(x), reps), np.tile(x, reps))


def test_mixed_dtypes_promote(backend):
    a = vtl.asarray(np.ones((2,), np.float32))
    b = vtl.asarray(np.ones((3,), np.int8))
    c = vtl.asarray(np.ones((2,), np.uint8))
    assert vtl.concat([a, b]).dtype == vtl.float32
    assert vtl.stack([b[:2], c]).dtype == vtl.int16
    assert_close(vtl.concat([b, c]), np.concatenate([np.ones(3, np.int8), np.ones(2, np.uint8)]))


# -- views -------------------------------------------------------------------------------------
def test_views_share_memory():
    x = np.arange(24.0).reshape(2, 3, 4)
    t = vtl.asarray(x, backend="numpy")
    for v in (vtl.reshape(t, (6, 4)), vtl.permute_dims(t, (2, 0, 1)), vtl.moveaxis(t, 0, -1),
              vtl.expand_dims(t, 1), vtl.squeeze(vtl.expand_dims(t, 0), 0), vtl.flip(t, axis=1),
              vtl.broadcast_to(t, (5, 2, 3, 4)), vtl.unstack(t, axis=1)[0]):
        assert np.shares_memory(v.numpy(), x)
    assert not np.shares_memory(vtl.reshape(t, (6, 4), copy=True).numpy(), x)
    with pytest.raises(ValueError, match="reshape"):
        vtl.reshape(vtl.permute_dims(t, (2, 1, 0)), (-1,), copy=False)


# -- errors -------------------------------------------------------------------------------------
def test_axis_errors(backend):
    t = vtl.zeros((2, 1, 3))
    for fn in (lambda: vtl.expand_dims(t, 4), lambda: vtl.expand_dims(t, -5),
               lambda: vtl.squeeze(t, 3), lambda: vtl.flip(t, axis=-4),
               lambda: vtl.roll(t, 1, axis=3), lambda: vtl.moveaxis(t, 3, 0),
               lambda: vtl.concat([t, t], axis=3), lambda: vtl.stack([t, t], axis=4),
               lambda: vtl.unstack(t, axis=-4), lambda: vtl.repeat(t, 2, axis=3),
               lambda: vtl.permute_dims(t, (0, 1, 3)), lambda: vtl.squeeze(vtl.asarray(1.0), 0)):
        with pytest.raises(IndexError, match="out of bounds"):
            fn()
    with pytest.raises(ValueError, match="size 2"):
        vtl.squeeze(t, 0)
    with pytest.raises(ValueError, match="repeated axis"):
        vtl.flip(t, axis=(0, -3))
    with pytest.raises(ValueError, match="repeated axis"):
        vtl.moveaxis(t, (0, 0), (1, 2))
    with pytest.raises(ValueError, match="same number"):
        vtl.moveaxis(t, (0, 1), (1,))
    with pytest.raises(ValueError, match="permutation|do not match"):
        vtl.permute_dims(t, (0, 1))
    with pytest.raises(ValueError, match="repeated axis"):
        vtl.permute_dims(t, (0, 0, 1))
    with pytest.raises(TypeError, match="axis must be an int"):
        vtl.flip(t, axis=1.0)
    with pytest.raises(ValueError, match="at least one dimension"):
        vtl.unstack(vtl.asarray(1.0))
    with pytest.raises(ValueError, match="same length"):
        vtl.roll(t, (1, 2), axis=(0,))
    with pytest.raises(ValueError, match="tuple axis"):
        vtl.roll(t, (1, 2))


def test_shape_errors(backend):
    a, b = vtl.zeros((2, 3)), vtl.zeros((3, 3))
    with pytest.raises(ValueError, match="all dimensions except axis 1"):
        vtl.concat([a, b], axis=1)
    assert vtl.concat([a, b]).shape == (5, 3)
    with pytest.raises(ValueError, match="all dimensions except"):
        vtl.concat([a, vtl.zeros((2, 3, 1))])
    with pytest.raises(ValueError, match="0-d"):
        vtl.concat([vtl.asarray(1.0)])
    with pytest.raises(ValueError, match="same shape"):
        vtl.stack([a, b])
    with pytest.raises(ValueError, match="at least one"):
        vtl.concat([])
    with pytest.raises(TypeError, match="tuple or list"):
        vtl.stack(a)
    with pytest.raises(TypeError, match="vtl.Tensor"):
        vtl.concat([a, np.zeros((2, 3))])
    with pytest.raises(ValueError, match="cannot broadcast"):
        vtl.broadcast_to(a, (3, 3))
    with pytest.raises(ValueError, match="cannot broadcast"):
        vtl.broadcast_to(a, (3,))
    with pytest.raises(ValueError, match="cannot be broadcast"):
        vtl.broadcast_arrays(a, b)
    with pytest.raises(ValueError, match="reshape"):
        vtl.reshape(a, (4, 2))
    with pytest.raises(ValueError, match="non-negative"):
        vtl.repeat(a, -1)
    with pytest.raises(ValueError, match="non-negative"):
        vtl.tile(a, (2, -1))
    with pytest.raises(ValueError, match="expected shape"):
        vtl.repeat(a, vtl.asarray([1, 2]), axis=1)
    with pytest.raises(TypeError, match="integer dtype"):
        vtl.repeat(a, vtl.asarray([1.0, 2.0]), axis=0)
    with pytest.raises(TypeError, match="vtl.Tensor"):
        vtl.reshape(np.zeros(3), (3,))


def _on_other_device(t):
    """The same data on a second device of the same backend (a test-only device)."""
    from vtl._tensor import _new

    b = t.device.backend
    return _new(t._data, vtl.Device(t.device.backend_name, 7)._bind(b))


def test_mixed_devices(backend, other_backends):
    a = vtl.zeros((2, 3))
    others = [vtl.zeros((2, 3), backend=o) for o in other_backends]
    if backend == "numpy":  # a second CPU device exists only as a test fixture
        others.append(_on_other_device(a))
    for b in others:
        for fn in (vtl.concat, vtl.stack, lambda ts: vtl.broadcast_arrays(*ts)):
            with pytest.raises(ValueError, match="different devices"):
                fn([a, b])
        with pytest.raises(ValueError, match="different devices"):
            vtl.repeat(a, vtl.asarray(np.ones(2, np.int64), device=b.device), axis=0)


# -- gradients -------------------------------------------------------------------------------------
RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 3, 4))


@pytest.mark.parametrize("name,f", [
    ("reshape", lambda x: vtl.reshape(x, (4, 6))),
    ("permute_dims", lambda x: vtl.permute_dims(x, (2, 0, 1))),
    ("moveaxis", lambda x: vtl.moveaxis(x, (0, 1), (-1, 0))),
    ("expand_dims", lambda x: vtl.expand_dims(x, -2)),
    ("squeeze", lambda x: vtl.squeeze(vtl.expand_dims(x, 0), 0)),
    ("flip", lambda x: vtl.flip(x, axis=(0, 2))),
    ("flip_all", lambda x: vtl.flip(x)),
    ("roll", lambda x: vtl.roll(x, (1, -2), axis=(1, 2))),
    ("roll_flat", lambda x: vtl.roll(x, 5)),
    ("broadcast_to", lambda x: vtl.broadcast_to(vtl.reshape(x, (2, 1, 3, 4)), (3, 2, 5, 3, 4))),
    ("broadcast_arrays", lambda x: vtl.broadcast_arrays(x, vtl.reshape(x[0, 0], (4,)))[1]),
    ("repeat_int", lambda x: vtl.repeat(x, 3, axis=1)),
    ("repeat_flat", lambda x: vtl.repeat(x, 2)),
    ("repeat_zero", lambda x: vtl.repeat(x, 0, axis=2)),
    ("repeat_tensor", lambda x: vtl.repeat(x, vtl.asarray([2, 0, 3], backend=x.device.type),
                                           axis=1)),
    ("repeat_tensor_flat", lambda x: vtl.repeat(
        x[0, 0], vtl.asarray([1, 2, 0, 4], backend=x.device.type))),
    ("tile", lambda x: vtl.tile(x, (2, 1, 3))),
    ("tile_more_dims", lambda x: vtl.tile(x, (2, 1, 1, 2))),
    ("tile_fewer_dims", lambda x: vtl.tile(x, (3,))),
    ("concat", lambda x: vtl.concat([x, x[:, :1] * 2.0, x], axis=1)),
    ("concat_none", lambda x: vtl.concat([x, x[0]], axis=None)),
    ("stack", lambda x: vtl.stack([x, x * 3.0], axis=-1)),
    ("unstack", lambda x: vtl.unstack(x, axis=1)[1] * 2.0 + vtl.unstack(x, axis=1)[2]),
    ("unstack_one_used", lambda x: vtl.unstack(x, axis=-1)[0]),
])
def test_check_grad(name, f):
    check_grad(f, X)


@pytest.mark.parametrize("name,f", [
    ("flip", lambda x: vtl.flip(x, axis=1)),
    ("roll", lambda x: vtl.roll(x, 2, axis=(0, 2))),
    ("repeat_tensor", lambda x: vtl.repeat(x, vtl.asarray([1, 3], backend=x.device.type),
                                           axis=0)),
    ("tile", lambda x: vtl.tile(x, (2, 2))),
    ("concat", lambda x: vtl.concat([x, x], axis=-1)),
    ("stack_unstack", lambda x: vtl.stack(vtl.unstack(x, axis=2)[::-1], axis=0)),
    ("moveaxis", lambda x: vtl.moveaxis(x, 0, 2)),
])
def test_grad_matches_numpy(backend, name, f):
    check_grad_matches_numpy(f, backend, X)


def test_grad_of_mixed_dtype_concat_is_cast_back(backend):
    a = vtl.asarray(np.ones((2,), np.float32), requires_grad=True)
    b = vtl.asarray(np.ones((3,)), dtype=vtl.float64, requires_grad=True)
    ga, gb = vtl.autograd.grad(vtl.sum(vtl.concat([a, b]) * 2.0), [a, b])
    assert ga.dtype == vtl.float32 and gb.dtype == vtl.float64
    assert_close(ga, np.full(2, 2.0, np.float32))


def test_unstack_gradient_with_unused_outputs(backend):
    x = vtl.asarray(X, requires_grad=True)
    parts = vtl.unstack(x, axis=0)
    vtl.sum(parts[1] * parts[1]).backward()
    expected = np.zeros_like(X)
    expected[1] = 2 * X[1]
    assert_close(x.grad, expected)


def test_second_order_through_repeat_and_tile():
    reps = vtl.asarray([2, 1, 0], backend="numpy")

    def f(x):
        return vtl.sum(vtl.tile(vtl.repeat(x, reps, axis=0), (2, 1)) ** 3)

    def df(x):  # first derivative; differentiable when x requires grad
        if not x.requires_grad:
            x = x.detach().requires_grad_()
        return vtl.autograd.grad(f(x), [x], create_graph=True)[0]

    check_grad(df, X[0])
