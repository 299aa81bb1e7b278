"""matmul, matrix_transpose, tensordot and vecdot vs NumPy on every backend; their
errors; real (finite differences) and complex (PyTorch convention) gradients."""

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
    supported_dtypes,
    to_numpy,
)

DTYPES = ["float32", "float64", "int32", "int64", "complex64", "complex128"]


def _dtype(backend, data):
    names = [d for d in DTYPES if d in supported_dtypes(backend)]
    return np.dtype(data.draw(st.sampled_from(names), label="dtype"))


def _array(data, dtype, shape, label="x"):
    if dtype.kind == "f":
        elems = st.floats(-10, 10, width=32)
    elif dtype.kind == "c":
        elems = st.complex_numbers(max_magnitude=10, width=64)
    else:
        elems = st.integers(-20, 20)
    return data.draw(hnp.arrays(dtype, shape, elements=elems), label=label)


def _close(dtype):
    return {"rtol": 1e-4, "atol": 1e-4} if dtype.kind in "fc" else {}


def _on_other_device(t):
    from vtl._tensor import _new

    b = t.device.backend
    return _new(t._data, vtl.Device(t.device.backend_name, 7)._bind(b))


# -- forward results vs NumPy -------------------------------------------------------------------
@given(data=st.data())
def test_matmul(backend, data):
    dt = _dtype(backend, data)
    m, k, n = (data.draw(st.integers(0, 4), label=c) for c in "mkn")
    batch = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=2, max_side=3),
                      label="batch")
    kind1, kind2 = data.draw(st.sampled_from(["vec", "mat"]), label="k1"), \
        data.draw(st.sampled_from(["vec", "mat"]), label="k2")
    s1 = (k,) if kind1 == "vec" else batch.input_shapes[0] + (m, k)
    s2 = (k,) if kind2 == "vec" else batch.input_shapes[1] + (k, n)
    a, b = _array(data, dt, s1, "a"), _array(data, dt, s2, "b")
    got = vtl.matmul(vtl.asarray(a), vtl.asarray(b))
    assert_close(got, np.matmul(a, b), **_close(dt))
    assert_close(vtl.asarray(a) @ vtl.asarray(b), np.matmul(a, b), **_close(dt))


def test_matmul_mixed_dtypes(backend):
    if "float64" not in supported_dtypes(backend):
        pytest.skip("no float64")
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(3, dtype=np.float64)
    assert_close(vtl.asarray(a) @ vtl.asarray(b), a @ b)


@given(data=st.data())
def test_matrix_transpose(backend, data):
    dt = _dtype(backend, data)
    shape = data.draw(hnp.array_shapes(min_dims=2, max_dims=4, min_side=0, max_side=3))
    x = _array(data, dt, shape)
    assert_close(vtl.matrix_transpose(vtl.asarray(x)), np.swapaxes(x, -1, -2))
    assert_close(vtl.asarray(x).mT, np.swapaxes(x, -1, -2))


@given(data=st.data())
def test_tensordot_int_axes(backend, data):
    dt = _dtype(backend, data)
    n = data.draw(st.integers(0, 3), label="n")
    shared = data.draw(hnp.array_shapes(min_dims=n, max_dims=n, min_side=0, max_side=3))
    f1 = data.draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=1, max_side=3))
    f2 = data.draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=1, max_side=3))
    a, b = _array(data, dt, f1 + shared, "a"), _array(data, dt, shared + f2, "b")
    assert_close(vtl.tensordot(vtl.asarray(a), vtl.asarray(b), axes=n),
                 np.tensordot(a, b, axes=n), **_close(dt))


@given(data=st.data())
def test_tensordot_pair_axes(backend, data):
    dt = _dtype(backend, data)
    s1 = data.draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=3))
    ax1 = data.draw(st.lists(st.integers(0, len(s1) - 1), unique=True, max_size=len(s1)))
    perm = data.draw(st.permutations(range(len(ax1))))
    free = data.draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=1, max_side=3))
    # x2 holds the contracted axes (in the order of perm) interleaved after its free axes
    s2 = list(free) + [s1[ax1[p]] for p in perm]
    order = data.draw(st.permutations(range(len(s2))))
    s2 = [s2[o] for o in order]
    ax2 = [order.index(len(free) + i) for i in range(len(perm))]
    ax1 = [ax1[p] for p in perm]
    neg = data.draw(st.booleans())
    if neg:
        ax1 = [a - len(s1) for a in ax1]
    a, b = _array(data, dt, tuple(s1), "a"), _array(data, dt, tuple(s2), "b")
    assert_close(vtl.tensordot(vtl.asarray(a), vtl.asarray(b), axes=(ax1, ax2)),
                 np.tensordot(a, b, axes=(ax1, ax2)), **_close(dt))


@given(data=st.data())
def test_vecdot(backend, data):
    dt = _dtype(backend, data)
    shapes = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=1, max_dims=3,
                                                         max_side=3), label="shapes")
    s1, s2 = shapes.input_shapes
    axis = data.draw(st.integers(-min(len(s1), len(s2)), -1), label="axis")
    k = data.draw(st.integers(0, 4), label="k")
    s1 = tuple(k if i == len(s1) + axis else s for i, s in enumerate(s1))
    s2 = tuple(k if i == len(s2) + axis else s for i, s in enumerate(s2))
    a, b = _array(data, dt, s1, "a"), _array(data, dt, s2, "b")
    expect = np.sum(np.conj(a) * b, axis=axis).astype(np.result_type(a, b))
    assert_close(vtl.vecdot(vtl.asarray(a), vtl.asarray(b), axis=axis), expect, **_close(dt))


def test_vecdot_conjugates_x1(backend):
    if "complex64" not in supported_dtypes(backend):
        pytest.skip(f"{backend} lacks complex64")
    a = np.array([1 + 2j, 3 - 1j], np.complex64)
    b = np.array([2 - 1j, 1j], np.complex64)
    got = vtl.vecdot(vtl.asarray(a), vtl.asarray(b))
    assert_close(got, np.complex64(np.conj(a[0]) * b[0] + np.conj(a[1]) * b[1]))


# -- errors ----------------------------------------------------------------------------------------
def test_errors(backend, other_backends):
    a, b = vtl.ones((2, 3)), vtl.ones((4, 2))
    with pytest.raises(ValueError, match="inner dimensions"):
        vtl.matmul(a, b)
    with pytest.raises(ValueError, match="0-d"):
        vtl.matmul(vtl.asarray(1.0), a)
    with pytest.raises(ValueError, match="batch dimensions"):
        vtl.matmul(vtl.ones((2, 2, 3)), vtl.ones((3, 3, 1)))
    with pytest.raises(TypeError, match="numeric"):
        vtl.matmul(vtl.ones((2, 2), dtype=vtl.bool), vtl.ones((2, 2), dtype=vtl.bool))
    with pytest.raises(TypeError, match="vtl.Tensor"):
        vtl.matmul(a, [[1.0], [2.0], [3.0]])
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        vtl.matrix_transpose(vtl.ones(3))
    with pytest.raises(ValueError, match="contracted axes differ"):
        vtl.tensordot(a, b, axes=1)
    with pytest.raises(ValueError, match="non-negative"):
        vtl.tensordot(a, b, axes=-1)
    with pytest.raises(ValueError, match="cannot contract 3 axes"):
        vtl.tensordot(a, b, axes=3)
    with pytest.raises(ValueError, match="same length"):
        vtl.tensordot(a, b, axes=([0, 1], [1]))
    with pytest.raises(ValueError, match="repeated axis"):
        vtl.tensordot(a, vtl.ones((2, 2)), axes=([0, 0], [0, 1]))
    with pytest.raises(IndexError, match="out of bounds"):
        vtl.tensordot(a, b, axes=([2], [0]))
    with pytest.raises(TypeError, match="pair of sequences"):
        vtl.tensordot(a, b, axes="x")
    with pytest.raises(ValueError, match="axis must be negative"):
        vtl.vecdot(a, a, axis=0)
    with pytest.raises(IndexError, match="out of bounds"):
        vtl.vecdot(a, vtl.ones(3), axis=-2)
    with pytest.raises(ValueError, match="differ in size"):
        vtl.vecdot(a, vtl.ones((2, 4)))
    with pytest.raises(ValueError, match="do not broadcast"):
        vtl.vecdot(a, vtl.ones((4, 3)))
    with pytest.raises(ValueError, match="at least one dimension"):
        vtl.vecdot(vtl.asarray(1.0), vtl.asarray(1.0))
    for other in [_on_other_device(vtl.ones((3, 2)))] + [
            vtl.ones((3, 2), backend=o) for o in other_backends]:
        for fn in (vtl.matmul, lambda x, y: vtl.tensordot(x, y, axes=1)):
            with pytest.raises(ValueError, match="different devices"):
                fn(a, other)
        with pytest.raises(ValueError, match="different devices"):
            vtl.vecdot(a, vtl.matrix_transpose(other))


# -- gradients -----------------------------------------------------------------------------------
RNG = np.random.default_rng(0)


def _r(*shape):
    return RNG.standard_normal(shape)


@pytest.mark.parametrize("name,s1,s2", [
    ("vec_vec", (3,), (3,)),
    ("vec_mat", (3,), (3, 4)),
    ("mat_vec", (2, 3), (3,)),
    ("mat_mat", (2, 3), (3, 4)),
    ("batched", (2, 2, 3), (2, 3, 4)),
    ("broadcast_batch", (2, 1, 2, 3), (3, 3, 4)),
    ("batch_size_one", (1, 2, 3), (4, 3, 2)),
    ("vec_batched", (3,), (2, 3, 4)),
    ("batched_vec", (2, 2, 3), (3,)),
])
def test_matmul_grad(name, s1, s2):
    check_grad(vtl.matmul, _r(*s1), _r(*s2))


def test_matmul_grad_one_input():
    b = _r(3, 2)
    check_grad(lambda a: a @ vtl.asarray(b, backend="numpy"), _r(4, 3))
    check_grad(lambda x: vtl.matrix_transpose(x) @ x, _r(4, 3))


@pytest.mark.parametrize("name,s1,s2,axes", [
    ("outer", (2, 3), (4,), 0),
    ("one", (2, 3), (3, 4), 1),
    ("two", (2, 3, 4), (3, 4, 2), 2),
    ("pair", (2, 3, 4), (4, 2), ([2, 0], [0, 1])),
    ("pair_swapped", (2, 3, 4), (3, 5, 2), ([0, 1], [2, 0])),
    ("pair_negative", (2, 3, 4), (4, 3), ([-1, 1], [0, -1])),
    ("all", (2, 3), (3, 2), ([0, 1], [1, 0])),
])
def test_tensordot_grad(name, s1, s2, axes):
    check_grad(lambda a, b: vtl.tensordot(a, b, axes=axes), _r(*s1), _r(*s2))


@pytest.mark.parametrize("name,s1,s2,axis", [
    ("last", (2, 3), (2, 3), -1),
    ("broadcast", (2, 1, 3), (4, 3), -1),
    ("middle", (2, 3, 4), (3, 1), -2),
    ("vectors", (5,), (5,), -1),
])
def test_vecdot_grad(name, s1, s2, axis):
    check_grad(lambda a, b: vtl.vecdot(a, b, axis=axis), _r(*s1), _r(*s2))


def test_second_order_matmul_tensordot():
    def first(f):
        def g(a, b):
            for t in (a, b):
                if not t.requires_grad:
                    t.requires_grad_(True)
            ga, gb = vtl.autograd.grad(vtl.sum(f(a, b) ** 2), [a, b], create_graph=True)
            return ga * 2.0 + vtl.sum(gb)
        return g

    check_grad(first(vtl.matmul), _r(2, 3), _r(3, 2), rtol=1e-4, atol=1e-5)
    check_grad(first(lambda a, b: vtl.tensordot(a, b, axes=([1], [0]))), _r(2, 3), _r(3, 2),
               rtol=1e-4, atol=1e-5)
    check_grad(first(lambda a, b: vtl.vecdot(a, b)), _r(2, 3), _r(3), rtol=1e-4, atol=1e-5)


def _complex_grads_by_differences(f, xs, v, eps=1e-6):
    """d/dRe + i d/dIm of ``sum(real(f(xs) * conj(v)))`` for each complex input."""
    def loss(arrays):
        out = to_numpy(f(*[vtl.asarray(a, backend="numpy") for a in arrays]))
        return np.sum(np.real(out * np.conj(v)))

    grads = []
    for i, x in enumerate(xs):
        g = np.zeros_like(x)
        for j in range(x.size):
            for unit in (1.0, 1j):
                d = np.zeros(x.size, x.dtype)
                d[j] = eps * unit
                d = d.reshape(x.shape)
                plus = [a + d if k == i else a for k, a in enumerate(xs)]
                minus = [a - d if k == i else a for k, a in enumerate(xs)]
                g.reshape(-1)[j] += unit * (loss(plus) - loss(minus)) / (2 * eps)
        grads.append(g)
    return grads


@pytest.mark.parametrize("name,f,shapes", [
    ("matmul", vtl.matmul, [(2, 3), (3, 2)]),
    ("matmul_vec", vtl.matmul, [(3,), (2, 3, 2)]),
    ("tensordot", lambda a, b: vtl.tensordot(a, b, axes=([0], [1])), [(3, 2), (2, 3)]),
    ("vecdot", lambda a, b: vtl.vecdot(a, b), [(2, 3), (3,)]),
    ("getitem", lambda a, b: a[[0, 0, 1]] * b, [(2, 3), (3,)]),
])
def test_complex_grads_follow_pytorch(name, f, shapes):
    xs = [RNG.standard_normal(s) + 1j * RNG.standard_normal(s) for s in shapes]
    out = f(*[vtl.asarray(x, backend="numpy") for x in xs])
    v = RNG.standard_normal(out.shape) + 1j * RNG.standard_normal(out.shape)
    ts = [vtl.asarray(x, backend="numpy", requires_grad=True) for x in xs]
    gs = vtl.autograd.grad(f(*ts), ts, grad_outputs=vtl.asarray(v, backend="numpy"))
    for g, n in zip(gs, _complex_grads_by_differences(f, xs, v), strict=True):
        np.testing.assert_allclose(to_numpy(g), n, rtol=1e-5, atol=1e-6)


def test_matmul_complex_grad_formula(backend):
    if "complex64" not in supported_dtypes(backend):
        pytest.skip(f"{backend} lacks complex64")
    a = (_r(2, 3) + 1j * _r(2, 3)).astype(np.complex64)
    b = (_r(3, 4) + 1j * _r(3, 4)).astype(np.complex64)
    g = (_r(2, 4) + 1j * _r(2, 4)).astype(np.complex64)
    ta, tb = vtl.asarray(a, requires_grad=True), vtl.asarray(b, requires_grad=True)
    ga, gb = vtl.autograd.grad(ta @ tb, [ta, tb], grad_outputs=vtl.asarray(g))
    assert_close(ga, g @ b.conj().T, rtol=1e-5, atol=1e-5)
    assert_close(gb, a.conj().T @ g, rtol=1e-5, atol=1e-5)


def test_real_input_gets_real_grad_from_complex_product(backend):
    if "complex64" not in supported_dtypes(backend):
        pytest.skip(f"{backend} lacks complex64")
    a = vtl.asarray(_r(2, 3).astype(np.float32), requires_grad=True)
    b = vtl.asarray((_r(3) + 1j * _r(3)).astype(np.complex64))
    (ga,) = vtl.autograd.grad(vtl.sum(vtl.real(a @ b)), [a])
    assert ga.dtype == vtl.float32
    assert_close(ga, np.broadcast_to(np.real(b.numpy()), (2, 3)).astype(np.float32))


@pytest.mark.parametrize("name,f,shapes", [
    ("matmul", vtl.matmul, [(2, 2, 3), (3, 4)]),
    ("matmul_vec", vtl.matmul, [(3,), (3, 2)]),
    ("tensordot", lambda a, b: vtl.tensordot(a, b, axes=([0, 2], [1, 0])), [(2, 3, 4), (4, 2)]),
    ("vecdot", lambda a, b: vtl.vecdot(a, b, axis=-2), [(2, 3, 4), (3, 1)]),
])
def test_grads_match_numpy(backend, name, f, shapes):
    check_grad_matches_numpy(f, backend, *[_r(*s) for s in shapes])
