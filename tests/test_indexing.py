"""__getitem__/__setitem__, take and take_along_axis vs NumPy on every backend;
views, errors, gradients (scatter-add with accumulation, second order) and the
version counter."""

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
    supported_dtypes,
    to_numpy,
)


def _dtype(backend, data):
    return draw_dtype(data, backend)


def _array(data, dtype, shape=None, min_dims=0, max_dims=4, min_side=0):
    return draw_array(data, dtype, shape, min_dims, max_dims, min_side)


def _on_other_device(t):
    """The same data on a second device of the same backend (a test-only device)."""
    from vtl._tensor import _new

    b = t.device.backend
    return _new(t._data, vtl.Device(t.device.backend_name, 7)._bind(b))


def _t(key):
    """``key`` with every NumPy array turned into a Tensor on the default backend."""
    if isinstance(key, tuple):
        return tuple(_t(k) for k in key)
    if isinstance(key, np.ndarray):
        return vtl.asarray(key)
    return key


# -- getitem vs NumPy ---------------------------------------------------------------------
@given(data=st.data())
def test_basic_indexing(backend, data):
    x = _array(data, _dtype(backend, data))
    key = data.draw(hnp.basic_indices(x.shape, allow_newaxis=True, allow_ellipsis=True),
                    label="key")
    assert_close(vtl.asarray(x)[key], x[key])


@given(data=st.data())
def test_integer_array_indexing(backend, data):
    x = _array(data, _dtype(backend, data), min_dims=1, min_side=1)
    key = data.draw(hnp.integer_array_indices(
        x.shape, result_shape=hnp.array_shapes(min_dims=0, max_dims=2, max_side=5)), label="key")
    t = vtl.asarray(x)
    assert_close(t[_t(key)], x[key])
    as_lists = tuple(k.tolist() for k in key)
    if all(isinstance(k, list) for k in as_lists):
        assert_close(t[as_lists], x[tuple(np.asarray(k) for k in as_lists)])
    assert_close(t[_t(key[0])], x[key[0]])


@given(data=st.data())
def test_boolean_mask_indexing(backend, data):
    x = _array(data, _dtype(backend, data))
    start = data.draw(st.integers(0, x.ndim), label="start")
    stop = data.draw(st.integers(start, x.ndim), label="stop")
    mask = data.draw(hnp.arrays(np.bool_, x.shape[start:stop]), label="mask")
    t = vtl.asarray(x)
    key = (slice(None),) * start + (mask,)
    assert_close(t[_t(key)], x[key])
    if start == 0 and stop == x.ndim:
        assert_close(t[vtl.asarray(mask)], x[mask])


def test_boolean_mask_special_cases(backend):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = vtl.asarray(x)
    for key in [np.zeros((2, 3, 4), bool), np.zeros((2, 3), bool), np.ones((2,), bool),
                np.array(True), np.array(False), x > 10]:
        assert_close(t[vtl.asarray(key)], x[key])
    assert_close(t[True], x[True])
    assert_close(t[False], x[False])
    assert_close(t[[True, False]], x[np.array([True, False])])
    assert_close(t[:, [False, True, True]], x[:, np.array([False, True, True])])
    assert_close(t[vtl.asarray(x[..., 0] > 3), 1:], x[x[..., 0] > 3, 1:])


MIXED_KEYS = [
    (slice(None), 0, slice(None), [1, 2]),          # int and array not adjacent: block first
    (0, slice(None), [1, 2]),
    ([0], Ellipsis, [0]),                            # "..." separates them too
    (slice(None), [0, 1, 2], None, [0, 1, 2]),       # so does None
    (slice(None), [0, 1, 2], [0, 1, 2], None),
    (slice(None), None, [0, 1, 2], [0, 1, 2]),
    ([[0], [1]], slice(None), [1, 2, 0]),
    ([[0], [1]], [1, 2, 0]),                          # broadcast index arrays
    (slice(1, None), [2, -1, 0, 2]),
    (Ellipsis, [[0, 1]]),
    (Ellipsis, [0, 1], 0),
    ([0, 1], True),
    (slice(None), True, [0, 1]),
    (slice(None), True, True, [0, 1]),
    (slice(None), np.array([True, False, True]), slice(None), [0, 1]),
    (slice(None), np.ones((3, 4), bool), 1),
    (np.array(1), slice(None), [0, 0]),
    (np.int64(1), [2, 2, 2]),
    ([], slice(None)),
    (slice(None, None, -1), [[2, 1]], slice(None, None, -2)),
    ([1, 0], slice(None), slice(None), [4, -5]),
]


@pytest.mark.parametrize("key", MIXED_KEYS, ids=range(len(MIXED_KEYS)))
def test_mixed_keys(backend, key):
    x = np.arange(120, dtype=np.float32).reshape(2, 3, 4, 5)
    as_np = tuple(np.asarray(k, dtype=np.intp if k == [] else None) if isinstance(k, list)
                  else k for k in key)
    expect = x[as_np]
    assert_close(vtl.asarray(x)[key], expect)
    assert_close(vtl.asarray(x)[_t(as_np)], expect)


def test_zero_d_tensors_as_indices(backend):
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    t = vtl.asarray(x)
    i = vtl.asarray(2)
    assert_close(t[i], x[2])
    assert_close(t[1, i], x[1, 2])
    assert_close(t[vtl.asarray(-1), vtl.asarray([0, 3])], x[-1, [0, 3]])
    assert_close(t[vtl.asarray(True)], x[None])
    assert_close(t[vtl.asarray(False)], x[None][:0])
    s = vtl.asarray(x[0, 0])
    assert_close(s[()], x[0, 0])
    assert_close(s[...], x[0, 0])
    assert_close(s[None], x[0, 0][None])


def test_uint_and_small_int_index_dtypes(backend):
    x = np.arange(10, dtype=np.float32) * 1.5
    t = vtl.asarray(x)
    for dt in ("uint8", "int8", "int16", "uint32", "int32"):
        if dt in supported_dtypes(backend):
            idx = np.array([9, 0, 3, 3], dtype=dt)
            assert_close(t[vtl.asarray(idx)], x[idx])


def test_empty_results(backend):
    x = np.zeros((0, 3), np.float32)
    t = vtl.asarray(x)
    assert_close(t[[]], x[np.array([], np.intp)])
    assert_close(t[:, [0, 2]], x[:, [0, 2]])
    assert_close(t[t > 0], x[x > 0])
    y = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    assert_close(vtl.asarray(y)[vtl.asarray(np.zeros((2, 3), bool))], y[np.zeros((2, 3), bool)])


# -- views and copies ---------------------------------------------------------------------
def test_basic_indexing_gives_views(backend):
    if backend not in ("numpy", "cupy", "wgpu"):
        pytest.skip("backend without views")
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = vtl.asarray(x.copy())
    v = t[1:, ::2]
    v[0, 1] = -1.0
    x[1, 2] = -1.0
    assert_close(t, x)
    s = t[2, 3]          # an all-int key is a 0-d view too
    s[...] = 7.0
    x[2, 3] = 7.0
    assert_close(t, x)
    assert v._version == t._version  # views share the version counter


def test_advanced_indexing_copies(backend):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = vtl.asarray(x.copy())
    c = t[[1, 2]]
    c[0, 0] = 100.0
    m = t[t > 5]
    m[0] = 100.0
    assert_close(t, x)


# -- setitem vs NumPy ---------------------------------------------------------------------
@given(data=st.data())
def test_setitem_basic(backend, data):
    x = _array(data, _dtype(backend, data))
    key = data.draw(hnp.basic_indices(x.shape, allow_newaxis=True, allow_ellipsis=True),
                    label="key")
    region = x[key].shape
    drop = data.draw(st.integers(0, len(region)), label="drop")
    ones = data.draw(st.lists(st.booleans(), min_size=len(region), max_size=len(region)),
                     label="ones")
    vshape = tuple(1 if o else s for s, o in zip(region, ones, strict=True))[drop:]
    value = _array(data, x.dtype, shape=vshape)
    t = vtl.asarray(x.copy())
    before = t._version
    t[key] = vtl.asarray(value)
    expect = x.copy()
    expect[key] = value
    assert_close(t, expect)
    assert t._version == before + 1


@given(data=st.data())
def test_setitem_integer_arrays_and_masks(backend, data):
    x = _array(data, np.dtype("float32"), min_dims=1, min_side=1)
    n = x.shape[0]
    rows = data.draw(st.lists(st.integers(-n, n - 1), max_size=n, unique_by=lambda i: i % n),
                     label="rows")
    t = vtl.asarray(x.copy())
    t[rows] = 5.0
    expect = x.copy()
    expect[np.asarray(rows, np.intp)] = 5.0
    assert_close(t, expect)
    mask = data.draw(hnp.arrays(np.bool_, x.shape), label="mask")
    t[vtl.asarray(mask)] = vtl.asarray(-x[mask])
    expect[mask] = -x[mask]
    assert_close(t, expect)


def test_setitem_kinds_of_values(backend):
    x = np.zeros((3, 4), np.float32)
    t = vtl.asarray(x.copy())
    t[0] = 1                          # Python int into a float tensor
    t[1, 1:3] = vtl.asarray([2, 3], dtype=vtl.int32)
    t[2] = [4.0, 5.0, 6.0, 7.0]
    t[:, -1] = np.float64(9.5)
    t[vtl.asarray([0, 2]), vtl.asarray([1, 1])] = vtl.asarray([[8.0]])
    x[0] = 1
    x[1, 1:3] = [2, 3]
    x[2] = [4.0, 5.0, 6.0, 7.0]
    x[:, -1] = 9.5
    x[[0, 2], [1, 1]] = 8.0
    assert_close(t, x)
    b = vtl.zeros((2, 2), dtype=vtl.bool)
    b[0, 1] = True
    assert_close(b, np.array([[False, True], [False, False]]))
    if "complex64" in supported_dtypes(backend):
        c = vtl.zeros(3, dtype=vtl.complex64)
        c[1] = 2 + 1j
        assert_close(c, np.array([0, 2 + 1j, 0], np.complex64))
    s = vtl.asarray(np.float32(1.0))
    s[()] = 3.0
    assert_close(s, np.float32(3.0))


def test_setitem_errors(backend):
    t = vtl.zeros((3, 4))
    with pytest.raises(ValueError, match="__setitem__"):
        t[0] = vtl.ones(3)
    with pytest.raises(TypeError, match="cannot write"):
        t[0] = 1j
    with pytest.raises(TypeError, match="cannot write"):
        vtl.zeros(3, dtype=vtl.int32)[0] = 1.5
    with pytest.raises(TypeError, match="cannot write"):
        vtl.zeros(3, dtype=vtl.int32)[0] = vtl.asarray([1.5])
    with pytest.raises(TypeError, match="value"):
        t[0] = "a"
    with pytest.raises(IndexError, match="out of bounds"):
        t[3] = 1.0
    with pytest.raises(IndexError, match="out of bounds"):
        t[[0, 5]] = 1.0
    with pytest.raises(ValueError, match="devices|on "):
        t[0] = _on_other_device(vtl.ones(4))
    with pytest.raises(ValueError, match="index tensor"):
        t[_on_other_device(vtl.asarray([0]))] = 1.0
    leaf = vtl.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        leaf[0] = 1.0
    with vtl.no_grad():
        leaf[0] = 1.0
    assert_close(leaf.detach(), np.array([1, 0, 0], np.float32))
    assert leaf.is_leaf


# -- getitem errors -----------------------------------------------------------------------
def test_getitem_errors(backend, other_backends):
    t = vtl.zeros((2, 3))
    with pytest.raises(IndexError, match="index 2 is out of bounds for axis 0 with size 2"):
        t[2]
    with pytest.raises(IndexError, match="index -4 is out of bounds for axis 1"):
        t[0, -4]
    with pytest.raises(IndexError, match="index -4 is out of bounds for axis 1"):
        t[..., -4]
    with pytest.raises(IndexError, match="too many indices.*2-dimensional, but 3"):
        t[0, 0, 0]
    with pytest.raises(IndexError, match="too many indices"):
        t[[0], [0], :]
    with pytest.raises(IndexError, match="single ellipsis"):
        t[..., ...]
    with pytest.raises(IndexError, match="single ellipsis"):
        t[..., [0], ...]
    with pytest.raises(IndexError, match="out of bounds"):
        t[[0, 2]]
    if backend == "numpy":  # index tensors in accelerator memory are not read back
        with pytest.raises(IndexError, match="out of bounds"):
            t[vtl.asarray([-3])]
        with pytest.raises(IndexError, match="out of bounds"):
            t[:, vtl.asarray([[0, 3]])]
    with pytest.raises(IndexError, match="integer or boolean"):
        t[vtl.asarray([0.0])]
    with pytest.raises(IndexError, match="integer or boolean"):
        t[[0.5]]
    with pytest.raises(IndexError, match="valid indices"):
        t["a"]
    with pytest.raises(IndexError, match="boolean index did not match.*axis 1"):
        t[:, vtl.asarray([True, False])]
    with pytest.raises(IndexError, match="shape mismatch"):
        t[[0, 1], [0, 1, 2]]
    for other in [_on_other_device(vtl.asarray([0]))] + [
            vtl.asarray([0], backend=o) for o in other_backends]:
        with pytest.raises(ValueError, match="index tensor is on"):
            t[other]
        with pytest.raises(ValueError, match="index tensor is on"):
            t[0, other]


# -- take / take_along_axis -------------------------------------------------------------------
@given(data=st.data())
def test_take(backend, data):
    x = _array(data, _dtype(backend, data), min_dims=1, min_side=1)
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1), label="axis")
    n = x.shape[axis]
    idx = data.draw(hnp.arrays(np.int64, data.draw(hnp.array_shapes(min_dims=1, max_dims=2,
                                                                    min_side=0, max_side=5)),
                               elements=st.integers(-n, n - 1)), label="idx")
    t = vtl.asarray(x)
    assert_close(vtl.take(t, vtl.asarray(idx), axis=axis), np.take(x, idx, axis=axis))
    if x.ndim == 1:
        assert_close(vtl.take(t, vtl.asarray(idx)), np.take(x, idx))


@given(data=st.data())
def test_take_along_axis(backend, data):
    x = _array(data, _dtype(backend, data), min_dims=1, min_side=1)
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1), label="axis")
    n = x.shape[axis]
    ishape = list(data.draw(hnp.broadcastable_shapes(x.shape, min_dims=x.ndim,
                                                     max_dims=x.ndim), label="ishape"))
    ishape[axis] = data.draw(st.integers(0, 5), label="k")
    idx = data.draw(hnp.arrays(np.int64, tuple(ishape), elements=st.integers(-n, n - 1)),
                    label="idx")
    got = vtl.take_along_axis(vtl.asarray(x), vtl.asarray(idx), axis=axis)
    bshape = np.broadcast_shapes(
        tuple(1 if d == axis % x.ndim else s for d, s in enumerate(x.shape)),
        tuple(1 if d == axis % x.ndim else s for d, s in enumerate(ishape)))
    xb = np.broadcast_to(x, tuple(x.shape[d] if d == axis % x.ndim else s
                                  for d, s in enumerate(bshape)))
    ib = np.broadcast_to(idx, tuple(ishape[d] if d == axis % x.ndim else s
                                    for d, s in enumerate(bshape)))
    assert_close(got, np.take_along_axis(xb, ib, axis=axis))


def test_take_errors(backend):
    x = vtl.zeros((2, 3))
    i = vtl.asarray([0, 1])
    with pytest.raises(ValueError, match="axis is required"):
        vtl.take(x, i)
    with pytest.raises(TypeError, match="integer indices"):
        vtl.take(x, vtl.asarray([0.0]), axis=0)
    with pytest.raises(TypeError, match="vtl.Tensor"):
        vtl.take(x, [0, 1], axis=0)
    if backend == "numpy":  # index tensors in accelerator memory are not read back
        with pytest.raises(IndexError, match="out of bounds"):
            vtl.take(x, vtl.asarray([3]), axis=1)
        with pytest.raises(IndexError, match="out of bounds"):
            vtl.take_along_axis(x, vtl.asarray([[0], [-4]]), axis=1)
    with pytest.raises(IndexError, match="axis 2 is out of bounds"):
        vtl.take(x, i, axis=2)
    with pytest.raises(ValueError, match="0-d"):
        vtl.take(vtl.asarray(1.0), i)
    with pytest.raises(ValueError, match="indices are on"):
        vtl.take(x, _on_other_device(i), axis=0)
    with pytest.raises(ValueError, match="same number of dimensions"):
        vtl.take_along_axis(x, i)
    with pytest.raises(ValueError, match="do not broadcast"):
        vtl.take_along_axis(x, vtl.zeros((3, 1), dtype=vtl.int64), axis=1)
    with pytest.raises(ValueError, match="indices are on"):
        vtl.take_along_axis(x, _on_other_device(vtl.asarray([[0]])), axis=1)


# -- gradients ------------------------------------------------------------------------------
RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 4, 5))


@pytest.mark.parametrize("name,f", [
    ("int", lambda x: x[1]),
    ("slices", lambda x: x[1:, ::-2, 3:0:-1]),
    ("newaxis_ellipsis", lambda x: x[None, ..., 2, None]),
    ("all_ints", lambda x: x[2, 1, 0]),
    ("repeated_rows", lambda x: x[[0, 2, 0, 0]]),
    ("two_arrays", lambda x: x[[0, 0, 2], :, [4, 4, 1]]),
    ("broadcast_arrays", lambda x: x[:, [[0], [3]], [1, 1, 2]]),
    ("int_and_array_apart", lambda x: x[1, :, [0, 0, 3]]),
    ("negative", lambda x: x[-1, [-1, -4]]),
    ("mask", lambda x: x[vtl.asarray(np.asarray(X) > 0)]),
    ("mask_prefix", lambda x: x[vtl.asarray(X[:, :, 0] > 0), 1:]),
    ("mask_middle", lambda x: x[:, vtl.asarray(np.array([True, False, True, True]))]),
    ("zero_d_mask", lambda x: x[True]),
    ("nested", lambda x: x[[1, 1]][:, 2:][..., [0, 0]]),
])
def test_getitem_grad(name, f):
    check_grad(f, X)


def test_getitem_repeated_indices_accumulate(backend):
    x = vtl.asarray([1.0, 2.0, 3.0], requires_grad=True)
    vtl.sum(x[[0, 0, 2, 0]] * vtl.asarray([1.0, 10.0, 100.0, 1000.0])).backward()
    assert_close(x.grad, np.array([1011.0, 0.0, 100.0], np.float32))
    m = vtl.asarray(np.arange(6.0, dtype=np.float32).reshape(2, 3), requires_grad=True)
    vtl.sum(m[[1, 1], [2, 2]]).backward()
    assert_close(m.grad, np.array([[0, 0, 0], [0, 0, 2]], np.float32))
    x.grad = None
    vtl.sum(vtl.take(x, vtl.asarray([2, 2, 2]))).backward()
    assert_close(x.grad, np.array([0.0, 0.0, 3.0], np.float32))


def test_complex_getitem_grad_accumulates(backend):
    if "complex64" not in supported_dtypes(backend):
        pytest.skip(f"{backend} lacks complex64")
    x = vtl.asarray(np.array([1 + 1j, 2, 3j], np.complex64), requires_grad=True)
    w = vtl.asarray(np.array([1j, 2, 3, 4 - 1j], np.complex64))
    (g,) = vtl.autograd.grad(x[[0, 2, 0, 0]], [x], grad_outputs=w)
    assert_close(g, np.array([7 + 0j, 0, 2], np.complex64))
    (g,) = vtl.autograd.grad(vtl.take(x, vtl.asarray([1, 1])), [x],
                             grad_outputs=vtl.asarray(np.array([1j, 1j], np.complex64)))
    assert_close(g, np.array([0, 2j, 0], np.complex64))


@pytest.mark.parametrize("name,key,vshape", [
    ("row", (1,), (5,)),
    ("broadcast_value", (slice(None), 2), (1,)),
    ("scalar_shaped", (0, 1, 2), ()),
    ("extra_leading_ones", (0, slice(1, 3)), (1, 1, 5)),
    ("int_array", ([2, 0],), (4, 5)),
    ("mixed", (slice(None), [3, 1], 0), (3, 2)),
    ("mask", (X > 0.5,), ((X > 0.5).sum(),)),
    ("newaxis", (None, 1, ..., 4), (1, 4)),
])
def test_setitem_grad(name, key, vshape):
    def f(x, v):
        y = x * 1.0
        y[key] = v
        return y * y

    check_grad(f, X, RNG.standard_normal(vshape))


def test_setitem_grad_of_target_only():
    def f(x):
        y = vtl.exp(x) + 0.0
        y[:, [1, 3]] = 0.5
        return y

    check_grad(f, X)


def test_setitem_value_requiring_grad_into_plain_tensor(backend):
    v = vtl.asarray([2.0, 3.0], requires_grad=True)
    buf = vtl.zeros(4)
    buf[1:3] = v
    assert not buf.is_leaf and buf.requires_grad
    vtl.sum(buf * vtl.asarray([1.0, 10.0, 100.0, 1000.0])).backward()
    assert_close(v.grad, np.array([10.0, 100.0], np.float32))


def test_take_grads():
    check_grad(lambda x: vtl.take(x, vtl.asarray([3, 0, 3, -1]), axis=1), X)
    check_grad(lambda x: vtl.take(x, vtl.asarray([[2, 2], [0, 1]]), axis=-1), X)
    check_grad(lambda x: vtl.take(x[0, 0], vtl.asarray([4, 4, 4])), X)
    idx = np.array([[[0], [3], [3]], [[1], [1], [1]], [[2], [0], [-2]]])
    check_grad(lambda x: vtl.take_along_axis(x, vtl.asarray(idx), axis=1), X)
    idx = np.array([[[0, 4, 4], [1, 1, 1]]])
    check_grad(lambda x: vtl.take_along_axis(x[:, :1], vtl.asarray(idx), axis=2), X)
    check_grad(lambda x: vtl.take_along_axis(x, vtl.asarray(np.array([[[4], [0], [4], [-1]]])),
                                             axis=-1), X)


def _first_grad(f):
    def g(x):
        if not x.requires_grad:
            x.requires_grad_(True)
        (d,) = vtl.autograd.grad(vtl.sum(f(x) ** 3), [x], create_graph=True)
        return d
    return g


@pytest.mark.parametrize("name,f", [
    ("take", lambda x: vtl.take(x, vtl.asarray([1, 1, 0, 3]), axis=1)),
    ("take_along_axis", lambda x: vtl.take_along_axis(
        x, vtl.asarray(np.array([[[0], [0], [3]]])), axis=1)),
    ("getitem_repeated", lambda x: x[[2, 2, 0], 1:]),
    ("getitem_basic", lambda x: x[1:, None, 2]),
    ("getitem_mask", lambda x: x[vtl.asarray(X > 0)]),
])
def test_second_order(name, f):
    check_grad(_first_grad(f), X, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name,f", [
    ("basic", lambda x: x[1:, ::-1]),
    ("repeated", lambda x: x[[0, 0, 2], [1, 1, 1]]),
    ("mask", lambda x: x[x > 0]),
    ("take", lambda x: vtl.take(x, vtl.asarray([2, 2, 0], backend=x.device.type), axis=0)),
    ("take_along_axis", lambda x: vtl.take_along_axis(
        x, vtl.asarray([[0, 0], [3, 1], [2, 2], [4, 4]], backend=x.device.type), axis=1)),
])
def test_grads_match_numpy(backend, name, f):
    check_grad_matches_numpy(f, backend, X[0])


def test_setitem_grads_match_numpy(backend):
    def f(x, v):
        y = x * 2.0
        y[[1, 0], 2:] = v
        return y

    check_grad_matches_numpy(f, backend, X[0], RNG.standard_normal((2, 3)))


# -- version counter ----------------------------------------------------------------------------
def test_setitem_on_saved_tensor_is_detected(backend):
    x = vtl.asarray([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    z = y * y            # saves y
    y[0] = 5.0
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        z.backward(vtl.ones(3))
    y = x * 2
    z = vtl.exp(y)       # saves its output
    z[1:] = 0.0
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        vtl.sum(z).backward()


def test_setitem_through_a_view_is_detected(backend):
    x = vtl.asarray([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    z = y * y
    v = y[1:]
    with vtl.no_grad():
        v[0] = 7.0
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        z.backward(vtl.ones(3))


def test_no_grad_results(backend):
    x = vtl.asarray([1.0, 2.0], requires_grad=True)
    with vtl.no_grad():
        assert x[[0, 0]].grad_fn is None
        assert not x[0].requires_grad
    assert x[0].requires_grad and to_numpy(x[[1, 1]]).tolist() == [2.0, 2.0]
