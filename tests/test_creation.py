"""Creation functions vs NumPy on every backend: default dtypes, asarray's copy and
device semantics, errors, requires_grad and the gradients of tril/triu/meshgrid."""

from __future__ import annotations

import array

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
    skip_unless_dtype,
    supported_dtypes,
)

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float32", "float64", "complex64", "complex128"]


def _dtypes(backend):
    return [np.dtype(d) for d in DTYPES if d in supported_dtypes(backend)]


# -- default dtypes ---------------------------------------------------------------------
@pytest.mark.parametrize("obj,dtype", [
    (1.5, "float32"), (2, "int64"), (True, "bool"), (1 + 2j, "complex64"),
    ([1, 2.5], "float32"), ([[1, 2], [3, 4]], "int64"), ([True, False], "bool"),
    ([True, 2], "int64"), ([1, 2j], "complex64"), ([], "float32"), ((1.0, (2.0,))[:1], "float32"),
])
def test_python_scalars_and_sequences_default_dtypes(backend, obj, dtype):
    skip_unless_dtype(backend, dtype)
    t = vtl.asarray(obj)
    assert t.dtype == np.dtype(dtype)
    assert t.device == vtl.Device(backend, 0)
    assert_close(t, np.asarray(obj, dtype=dtype))


def test_numpy_arrays_keep_their_dtype(backend):
    for dt in _dtypes(backend):
        x = np.arange(6).reshape(2, 3).astype(dt)
        t = vtl.asarray(x)
        assert t.dtype == dt and t.device.type == backend
        assert_close(t, x)
    assert vtl.asarray(np.float64(2.5)).dtype == vtl.float64 if "float64" in \
        supported_dtypes(backend) else True


def test_full_infers_dtype_from_the_fill_value(backend):
    for v, dt in ((1.5, "float32"), (3, "int64"), (False, "bool"), (1j, "complex64")):
        if dt not in supported_dtypes(backend):
            continue
        t = vtl.full((2, 3), v)
        assert_close(t, np.full((2, 3), v, dtype=dt))
    assert_close(vtl.full(4, 7, dtype=vtl.int8), np.full(4, 7, np.int8))
    assert_close(vtl.full((), 2.5), np.float32(2.5))


def test_full_refuses_a_fill_value_an_integer_dtype_cannot_hold(backend):
    """As PyTorch: nan, an infinity or a value past the integer dtype's range (once
    truncated) is an OverflowError naming the range, on every backend (NumPy's cast gave
    -2147483648 silently); a fraction truncates, and values at the range's ends fit."""
    for v, dt in ((float("inf"), vtl.int32), (float("nan"), vtl.int64), (3e9, vtl.int32),
                  (-1, vtl.uint8), (256, vtl.uint8), (2**31, vtl.int32)):
        with pytest.raises(OverflowError, match=r"full\(\): fill value .* without overflow"):
            vtl.full((2,), v, dtype=dt)
    assert_close(vtl.full(3, 2.7, dtype=vtl.int32), np.full(3, 2, np.int32))
    assert_close(vtl.full(2, 255, dtype=vtl.uint8), np.full(2, 255, np.uint8))
    assert_close(vtl.full(2, -2**31, dtype=vtl.int32), np.full(2, -2**31, np.int32))


# -- asarray: copy / device semantics ----------------------------------------------------------
def test_asarray_numpy_copy_semantics_on_numpy():
    x = np.arange(6.0)
    t = vtl.asarray(x, backend="numpy")
    assert np.shares_memory(t.numpy(), x)
    assert not np.shares_memory(vtl.asarray(x, backend="numpy", copy=True).numpy(), x)
    assert np.shares_memory(vtl.asarray(x, backend="numpy", copy=False).numpy(), x)
    with pytest.raises(ValueError, match="copy=False"):
        vtl.asarray(x, backend="numpy", dtype=vtl.float32, copy=False)
    c = vtl.asarray(x, backend="numpy", dtype=vtl.float32)
    assert c.dtype == vtl.float32 and not np.shares_memory(c.numpy(), x)


def test_asarray_buffers():
    buf = array.array("f", [1.0, 2.0, 3.0])
    t = vtl.asarray(buf, backend="numpy", copy=False)
    assert t.dtype == vtl.float32
    buf[0] = 9.0
    assert t.numpy()[0] == 9.0  # the buffer is shared, not copied
    b = bytearray(b"\x01\x02")
    assert_close(vtl.asarray(b, backend="numpy"), np.array([1, 2], np.uint8))
    c = vtl.asarray(buf, backend="numpy", copy=True)
    buf[1] = -1.0
    assert c.numpy()[1] == 2.0
    assert_close(vtl.asarray(memoryview(b"\x05"), backend="numpy"), np.array([5], np.uint8))


def test_asarray_copy_false_raises_when_a_copy_is_needed(backend):
    for obj in (1.0, [1, 2], (3,), np.float32(1.0)):
        with pytest.raises(ValueError, match="copy=False"):
            vtl.asarray(obj, copy=False)
    if backend != "numpy":
        with pytest.raises(ValueError, match="copy=False"):
            vtl.asarray(np.ones(3, np.float32), copy=False)


def test_asarray_from_tensor(backend):
    t = vtl.asarray(np.arange(4, dtype=np.float32))
    assert vtl.asarray(t) is t
    assert vtl.asarray(t, copy=False) is t
    c = vtl.asarray(t, copy=True)
    c[0] = 100.0
    assert t.numpy()[0] == 0.0
    d = vtl.asarray(t, dtype=vtl.int32)
    assert_close(d, np.arange(4, dtype=np.int32))
    with pytest.raises(ValueError, match="copy=False"):
        vtl.asarray(t, dtype=vtl.int32, copy=False)
    g = vtl.asarray(t, requires_grad=True)
    assert g.requires_grad and not t.requires_grad  # the input is left alone
    assert vtl.asarray(g, requires_grad=True) is g


def test_asarray_moves_between_backends(backend, other_backends):
    t = vtl.asarray([1.0, 2.0])
    for o in other_backends:
        u = vtl.asarray(t, device=vtl.Device(o, 0))
        assert u.device.type == o
        assert_close(u, t.numpy())
        with pytest.raises(ValueError, match="copy=False"):
            vtl.asarray(t, device=vtl.Device(o, 0), copy=False)


def test_asarray_dtype_argument(backend):
    assert_close(vtl.asarray([1, 2], dtype=vtl.uint8), np.array([1, 2], np.uint8))
    assert_close(vtl.asarray(2.5, dtype="float32"), np.float32(2.5))
    if "complex64" in supported_dtypes(backend):
        assert_close(vtl.asarray([[1.5]], dtype=np.complex64), np.array([[1.5]], np.complex64))


@pytest.mark.parametrize("dtype", ["float128", np.longdouble, "U3", str, object, "int128", 3])
def test_unsupported_dtypes_raise_type_error_naming_them(backend, dtype):
    for fn in (lambda: vtl.zeros(3, dtype=dtype), lambda: vtl.asarray([1.0], dtype=dtype),
               lambda: vtl.arange(3, dtype=dtype)):
        with pytest.raises(TypeError) as exc:
            fn()
        msg = str(exc.value)
        assert "dtype" in msg
        if dtype in ("float128", np.longdouble):
            assert "float128" in msg


def test_unsupported_inputs(backend):
    with pytest.raises(TypeError, match="float128"):
        vtl.asarray(np.ones(2, np.longdouble))
    with pytest.raises(TypeError, match="str"):
        vtl.asarray("abc")
    with pytest.raises(TypeError, match="cannot convert"):
        vtl.asarray([[1, 2], [3]])
    with pytest.raises(TypeError, match="cannot convert"):
        vtl.asarray(object())
    with pytest.raises(TypeError, match="cannot convert"):
        vtl.asarray(None)


def test_bad_devices():
    with pytest.raises(ValueError, match="unknown device"):
        vtl.zeros(3, device="tpu")
    with pytest.raises(ValueError, match="bad device index"):
        vtl.ones(3, device="numpy:x")
    with pytest.raises(TypeError, match="device must be"):
        vtl.asarray([1.0], device=3)
    with pytest.raises(ValueError, match="unknown backend"):
        vtl.arange(3, backend="tpu")
    with pytest.raises(ValueError, match="out of range"):
        vtl.eye(2, device="numpy:5")


def test_shape_errors(backend):
    for fn in (vtl.zeros, vtl.ones, vtl.empty):
        with pytest.raises(ValueError, match="negative dimension"):
            fn((2, -1))
        with pytest.raises(TypeError, match="shape"):
            fn((2.0, 3))
        with pytest.raises(TypeError, match="shape"):
            fn("3")
    with pytest.raises(ValueError, match="negative dimension"):
        vtl.full(-1, 1.0)
    with pytest.raises(ValueError, match="negative dimension"):
        vtl.eye(-2)
    with pytest.raises(ValueError, match="non-negative"):
        vtl.linspace(0, 1, -1)
    with pytest.raises(TypeError, match="num"):
        vtl.linspace(0, 1, 2.5)
    with pytest.raises(ValueError, match="step"):
        vtl.arange(0, 3, 0)
    with pytest.raises(TypeError, match="start"):
        vtl.arange("3")
    with pytest.raises(TypeError, match="fill"):
        vtl.full(3, "x")
    with pytest.raises(ValueError, match="indexing"):
        vtl.meshgrid(vtl.zeros(2), indexing="yx")
    with pytest.raises(ValueError, match="1-D"):
        vtl.meshgrid(vtl.zeros((2, 2)))
    with pytest.raises(TypeError, match="share a dtype"):
        vtl.meshgrid(vtl.zeros(2), vtl.zeros(2, dtype=vtl.int32))
    with pytest.raises(ValueError, match="2 dimensions"):
        vtl.tril(vtl.zeros(3))


# -- values vs NumPy --------------------------------------------------------------------------
@given(data=st.data())
def test_zeros_ones_empty_full(backend, data):
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
    dt = data.draw(st.sampled_from(_dtypes(backend)))
    assert_close(vtl.zeros(shape, dtype=dt), np.zeros(shape, dt))
    assert_close(vtl.ones(shape, dtype=dt), np.ones(shape, dt))
    e = vtl.empty(shape, dtype=dt)
    assert e.shape == shape and e.dtype == dt
    assert_close(vtl.full(shape, True, dtype=dt), np.full(shape, True, dtype=dt))
    x = vtl.asarray(np.zeros(shape, dt))
    assert_close(vtl.zeros_like(x), np.zeros(shape, dt))
    assert_close(vtl.ones_like(x, dtype=vtl.int16), np.ones(shape, np.int16))
    assert_close(vtl.full_like(x, 1), np.full(shape, 1, dt))
    el = vtl.empty_like(x)
    assert el.shape == shape and el.dtype == dt and el.device == x.device


@given(start=st.integers(-20, 20), stop=st.integers(-20, 20) | st.none(),
       step=st.integers(-5, 5).filter(bool))
def test_arange_ints(backend, start, stop, step):
    t = vtl.arange(start, stop, step)
    ref = np.arange(start, step=step) if stop is None else np.arange(start, stop, step)
    assert_close(t, ref.astype(np.int64))


@given(start=st.floats(-10, 10), stop=st.floats(-10, 10),
       step=st.floats(0.25, 3) | st.floats(-3, -0.25))
def test_arange_floats(backend, start, stop, step):
    t = vtl.arange(start, stop, step)
    assert t.dtype == vtl.float32
    assert_close(t, np.arange(start, stop, step, dtype=np.float32), rtol=1e-5, atol=1e-5)


def test_arange_forms(backend):
    assert_close(vtl.arange(5), np.arange(5, dtype=np.int64))
    assert_close(vtl.arange(2.0), np.arange(2.0, dtype=np.float32))
    assert_close(vtl.arange(1, 2, 0.5), np.array([1.0, 1.5], np.float32))
    assert_close(vtl.arange(5, 1), np.zeros(0, np.int64))
    assert_close(vtl.arange(0, 5, 2, dtype=vtl.uint8), np.array([0, 2, 4], np.uint8))


@given(start=st.floats(-10, 10), stop=st.floats(-10, 10), num=st.integers(0, 12),
       endpoint=st.booleans())
def test_linspace(backend, start, stop, num, endpoint):
    t = vtl.linspace(start, stop, num, endpoint=endpoint)
    ref = np.linspace(start, stop, num, endpoint=endpoint)
    assert_close(t, ref.astype(np.float32), rtol=1e-5, atol=1e-5)


def test_linspace_complex_and_dtype(backend):
    skip_unless_dtype(backend, "complex64")
    assert_close(vtl.linspace(0, 1 + 2j, 5), np.linspace(0, 1 + 2j, 5).astype(np.complex64),
                 rtol=1e-6)
    assert_close(vtl.linspace(1j, -2.0, 4, endpoint=False),
                 np.linspace(1j, -2.0, 4, endpoint=False).astype(np.complex64), rtol=1e-6)
    assert_close(vtl.linspace(1j, 1j, 0), np.zeros(0, np.complex64))
    with pytest.raises(TypeError, match="complex dtype"):
        vtl.linspace(0, 1j, 3, dtype=vtl.float32)
    skip_unless_dtype(backend, "float64")
    assert_close(vtl.linspace(0, 1, 7, dtype=vtl.float64), np.linspace(0, 1, 7))


@given(n=st.integers(0, 5), m=st.integers(0, 5) | st.none(), k=st.integers(-6, 6))
def test_eye(backend, n, m, k):
    assert_close(vtl.eye(n, m, k=k), np.eye(n, m, k=k, dtype=np.float32))
    if "complex64" in supported_dtypes(backend):
        assert_close(vtl.eye(n, m, k=k, dtype=vtl.complex64),
                     np.eye(n, m, k=k, dtype=np.complex64))


@given(data=st.data())
def test_tril_triu(backend, data):
    x = data.draw(hnp.arrays(np.float32, hnp.array_shapes(min_dims=2, max_dims=4, max_side=4),
                             elements=st.floats(-10, 10, width=32)))
    k = data.draw(st.integers(-4, 4))
    t = vtl.asarray(x)
    assert_close(vtl.tril(t, k=k), np.tril(x, k=k))
    assert_close(vtl.triu(t, k=k), np.triu(x, k=k))
    b = vtl.asarray(x > 0)
    assert_close(vtl.tril(b), np.tril(x > 0))


@pytest.mark.parametrize("indexing", ["xy", "ij"])
@pytest.mark.parametrize("lens", [(), (3,), (2, 3), (2, 3, 4), (0, 2), (1, 4, 2, 3)])
def test_meshgrid(backend, indexing, lens):
    xs = [np.arange(n, dtype=np.float32) + 10 * i for i, n in enumerate(lens)]
    out = vtl.meshgrid(*[vtl.asarray(x) for x in xs], indexing=indexing)
    ref = np.meshgrid(*xs, indexing=indexing)
    assert isinstance(out, list) and len(out) == len(ref)
    for o, r in zip(out, ref, strict=True):
        assert_close(o, r)


def test_from_dlpack(backend):
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    t = vtl.from_dlpack(x)
    assert t.device.type == "numpy" and np.shares_memory(t.numpy(), x)
    assert not np.shares_memory(vtl.from_dlpack(x, copy=True).numpy(), x)
    u = vtl.from_dlpack(x, device=vtl.Device(backend, 0))
    assert u.device.type == backend
    assert_close(u, x)
    if backend != "numpy":
        with pytest.raises(BufferError, match="copy=False"):
            vtl.from_dlpack(x, device=vtl.Device(backend, 0), copy=False)
        with pytest.raises(BufferError, match="copy=False"):
            vtl.from_dlpack(vtl.asarray(x), device="numpy", copy=False)
    v = vtl.asarray([1.5, 2.5])
    w = vtl.from_dlpack(v)
    assert w.device == v.device
    assert_close(w, np.array([1.5, 2.5], np.float32))
    with pytest.raises(AttributeError):
        vtl.from_dlpack([1, 2])


# -- requires_grad ----------------------------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda **kw: vtl.zeros((2,), **kw), lambda **kw: vtl.ones(3, **kw),
    lambda **kw: vtl.empty((1, 2), **kw), lambda **kw: vtl.full((2,), 3, **kw),
    lambda **kw: vtl.arange(3, **kw), lambda **kw: vtl.linspace(0, 1, 4, **kw),
    lambda **kw: vtl.eye(2, **kw), lambda **kw: vtl.asarray([1, 2], **kw),
    lambda **kw: vtl.zeros_like(vtl.zeros(2), **kw),
    lambda **kw: vtl.ones_like(vtl.zeros(2), **kw),
    lambda **kw: vtl.full_like(vtl.zeros(2), 2.0, **kw),
    lambda **kw: vtl.empty_like(vtl.zeros(2), **kw),
    lambda dtype, **kw: vtl.from_dlpack(np.ones(2, dtype), **kw),
])
def test_requires_grad(backend, make):
    t = make(dtype=vtl.float32, requires_grad=True)
    assert t.requires_grad and t.is_leaf
    assert not make(dtype=vtl.float32).requires_grad
    with pytest.raises(TypeError, match="requires_grad"):
        make(dtype=vtl.int32, requires_grad=True)


def test_requires_grad_default_dtypes(backend):
    assert vtl.full(2, 1.0, requires_grad=True).requires_grad
    for fn in (lambda: vtl.full(2, 1, requires_grad=True),
               lambda: vtl.arange(3, requires_grad=True),
               lambda: vtl.asarray([1, 2], requires_grad=True),
               lambda: vtl.asarray(np.ones(2, np.int8), requires_grad=True)):
        with pytest.raises(TypeError, match="requires_grad=True"):
            fn()


# -- gradients --------------------------------------------------------------------------------
X = np.random.default_rng(1).standard_normal((2, 3, 4))


@pytest.mark.parametrize("f", [
    lambda x: vtl.tril(x), lambda x: vtl.tril(x, k=-1), lambda x: vtl.triu(x, k=1),
    lambda x: vtl.triu(x) * vtl.tril(x, k=2),
    lambda x: vtl.meshgrid(x[0, 0], x[1, :, 1])[0] * 2.0,
    lambda x: vtl.meshgrid(x[0, 0], x[1, :, 1], indexing="ij")[1],
    lambda x: vtl.meshgrid(x[0, 0], x[1, :, 1], x[0, 1], indexing="xy")[2],
    lambda x: vtl.asarray(x, copy=True) * 3.0,
], ids=["tril", "tril_k", "triu_k", "tri_product", "meshgrid_xy", "meshgrid_ij", "meshgrid_3",
        "clone"])
def test_check_grad(f):
    check_grad(f, X)


@pytest.mark.parametrize("f", [
    lambda x: vtl.tril(x, k=1), lambda x: vtl.triu(x),
    lambda x: vtl.meshgrid(x[0, 0], x[1, 1])[1] * vtl.meshgrid(x[0, 0], x[1, 1])[0],
])
def test_grad_matches_numpy(backend, f):
    check_grad_matches_numpy(f, backend, X)
