"""The Tensor object: operators (forward, reflected, in-place) with tensors,
Python scalars and NumPy scalars; conversions; repr; NumPy/DLPack interop;
moving and copying; .T/.mT; the .grad setter; hashing."""

from __future__ import annotations

import operator

import numpy as np
import pytest
from helpers import assert_close, skip_unless_dtype
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import vtl

ARITH = ["add", "sub", "mul", "truediv", "floordiv", "mod", "pow"]
BITWISE = ["and_", "or_", "xor", "lshift", "rshift"]
COMPARE = ["eq", "ne", "lt", "le", "gt", "ge"]
INPLACE = {"add": "iadd", "sub": "isub", "mul": "imul", "truediv": "itruediv",
           "floordiv": "ifloordiv", "mod": "imod", "pow": "ipow", "and_": "iand",
           "or_": "ior", "xor": "ixor", "lshift": "ilshift", "rshift": "irshift",
           "matmul": "imatmul"}

F_VALUES = np.array([[1.5, -2.25, 3.0], [0.5, 4.0, -1.0]], np.float32)
F_OTHER = np.array([[2.0, 0.5, -1.5], [3.0, -0.25, 2.0]], np.float32)
I_VALUES = np.array([[7, -3, 12], [5, 1, -8]], np.int32)
I_OTHER = np.array([[2, 3, 1], [4, 2, 3]], np.int32)  # positive: valid divisors, shifts, powers
B_VALUES = np.array([[True, False, True], [False, False, True]])
B_OTHER = np.array([[True, True, False], [False, True, True]])


def ops_for(kind):
    if kind == "f":
        return ARITH + COMPARE
    if kind == "i":
        return [o for o in ARITH if o != "truediv"] + BITWISE + COMPARE
    return ["and_", "or_", "xor", "eq", "ne"]


def data(kind):
    return {"f": (F_VALUES, F_OTHER), "i": (I_VALUES, I_OTHER), "b": (B_VALUES, B_OTHER)}[kind]


def scalars(kind):
    """(scalar operand, NumPy's operand) pairs: Python scalars of the kind (weak: the tensor's
    dtype wins) and NumPy scalars (0-d arrays of their dtype, promoted as NumPy does)."""
    if kind == "f":
        return [(2.0, 2.0), (3, 3), (np.float64(2.0), np.float64(2.0)),
                (np.float32(0.5), np.float32(0.5)), (np.int64(2), np.int64(2))]
    if kind == "i":
        return [(2, 2), (np.int64(3), np.int64(3)), (np.int8(1), np.int8(1))]
    return [(True, True), (np.bool_(False), np.bool_(False))]


def check(result, expected):
    """``result`` is a Tensor equal to the NumPy ``expected`` (values, shape and dtype)."""
    assert isinstance(result, vtl.Tensor), type(result)
    assert_close(result, expected)


# ------------------------------------------------------------------- operators
@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # (-x) ** 0.5
@pytest.mark.parametrize("kind", ["f", "i", "b"])
def test_binary_operators_with_tensors(backend, kind):
    an, bn = data(kind)
    a, b = vtl.asarray(an), vtl.asarray(bn)
    for name in ops_for(kind):
        op = getattr(operator, name)
        check(op(a, b), op(an, bn))
        check(op(b, a), op(bn, an)) if name not in ("pow", "lshift", "rshift") else None
        # broadcasting against a row
        check(op(a, b[1]), op(an, bn[1]))


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # (-x) ** 0.5
@pytest.mark.parametrize("kind", ["f", "i", "b"])
def test_operators_with_python_and_numpy_scalars(backend, kind):
    an, _ = data(kind)
    a = vtl.asarray(an)
    positive = np.abs(an) + 1 if kind != "b" else an  # valid right operands of pow/shifts
    p = vtl.asarray(positive)
    for s, py in scalars(kind):
        for name in ops_for(kind):
            op = getattr(operator, name)
            # forward: Python scalars are "weak", the tensor's dtype wins (array API, NEP 50);
            # NumPy scalars promote as in NumPy
            check(op(a, s), op(an, py))
            # reflected
            right = positive if name in ("pow", "lshift", "rshift", "truediv", "floordiv",
                                         "mod") else an
            t = p if right is positive else a
            check(op(s, t), op(py, right))


def test_operator_result_dtype_follows_tensor(backend):
    skip_unless_dtype(backend, "int64")
    for dt in ("float32", "float64", "int8", "int16", "uint8"):
        skip_unless_dtype(backend, dt)
        a = vtl.asarray(np.array([1, 2], dtype=dt))
        assert (a + 1).dtype == np.dtype(dt)
        assert (1 + a).dtype == np.dtype(dt)
        # NumPy scalars are 0-d arrays of their dtype, as in NumPy
        an = np.array([1, 2], dtype=dt)
        assert (a * np.int64(2)).dtype == (an * np.int64(2)).dtype
        assert (np.float64(2) * a).dtype == (np.float64(2) * an).dtype


def test_matmul_operators(backend):
    mn = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    vn = np.array([0.5, -1.0], np.float32)
    m, v = vtl.asarray(mn), vtl.asarray(vn)
    check(m @ m, mn @ mn)
    check(m @ v, mn @ vn)
    check(v @ m, vn @ mn)
    check(m.__rmatmul__(v), vn @ mn)
    mm = vtl.asarray(mn.copy())
    ref = mm
    mm @= m
    assert mm is ref
    check(mm, mn @ mn)
    with pytest.raises(TypeError):
        m @ 2.0


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # (-x) ** 0.5
@pytest.mark.parametrize("kind", ["f", "i", "b"])
def test_inplace_operators(backend, kind):
    an, bn = data(kind)
    for name in ops_for(kind):
        if name in COMPARE:
            continue
        op, iop = getattr(operator, name), getattr(operator, INPLACE[name])
        keep = [(s, py) for s, py in scalars(kind)  # scalars that keep the tensor's dtype
                if not isinstance(s, np.generic) or np.result_type(an, s) == an.dtype]
        for other, other_np in [(vtl.asarray(bn), bn), (vtl.asarray(bn[0]), bn[0])] + keep:
            if kind == "i" and name in ("pow", "lshift", "rshift") and np.any(
                    np.asarray(other_np) < 0):
                continue
            a = vtl.asarray(an.copy())
            ref, v0 = a, a._version
            a = iop(a, other)
            assert a is ref, f"{name}= must return the same tensor"
            assert a._version == v0 + 1
            check(a, op(an, other_np).astype(an.dtype))


def test_inplace_writes_storage_seen_by_views(backend):
    a = vtl.asarray(np.array([1.0, 2.0], np.float32))
    d = a.detach()  # shares storage
    a += 1
    a *= np.float32(3)
    check(d, np.array([6.0, 9.0], np.float32))
    assert d._version == a._version == 2
    with pytest.raises(TypeError, match="would change the dtype from float32 to float64"):
        a *= np.float64(3)  # a NumPy float64 scalar promotes (as a 0-d float64 tensor would)
    check(d, np.array([6.0, 9.0], np.float32))
    assert a.dtype == vtl.float32 and a._version == 2


def test_inplace_errors(backend):
    a = vtl.asarray(np.array([1, 2], np.int32))
    with pytest.raises(TypeError, match="dtype"):
        a /= 2  # true division of ints gives floats
    with pytest.raises(TypeError, match="dtype"):
        a += vtl.asarray([0.5, 0.5])
    f = vtl.asarray([1.0, 2.0])
    with pytest.raises(ValueError, match="shape"):
        f += vtl.ones((3, 2))
    with pytest.raises(TypeError):
        f += [1.0, 2.0]


@pytest.mark.parametrize("kind", ["f", "i", "b"])
def test_unary_operators(backend, kind):
    an, _ = data(kind)
    a = vtl.asarray(an)
    if kind != "b":
        check(-a, -an)
        check(+a, +an)
        check(abs(a), np.abs(an))
    if kind != "f":
        check(~a, ~an)
    else:
        with pytest.raises(TypeError):
            _ = ~a


def test_unsupported_operands_return_notimplemented(backend):
    a = vtl.asarray([1.0, 2.0])
    for bad in ([1.0, 2.0], (1.0,), "x", None, np.array([1.0, 2.0]), object()):
        assert a.__add__(bad) is NotImplemented
        assert a.__radd__(bad) is NotImplemented
        assert a.__iadd__(bad) is NotImplemented
        with pytest.raises(TypeError):
            a + bad
        with pytest.raises(TypeError):
            bad * a
    assert (a == None) is False  # noqa: E711 - falls back to identity
    assert (a != "x") is True


def test_numpy_defers_to_tensor(backend):
    a = vtl.asarray(np.array([1.0, 2.0], np.float32))
    for s in (np.float64(2.0), np.float32(2.0), np.int64(2), np.int32(2)):
        for r in (s * a, s + a, s - a, s / a, s ** a, s < a, s == a):
            assert isinstance(r, vtl.Tensor), type(r)
        assert (s * a).dtype == (s * np.array([1.0, 2.0], np.float32)).dtype  # NumPy's
    check(np.float64(3) - a, np.float64(3) - np.array([1.0, 2.0], np.float32))
    # an ndarray operand is refused instead of becoming an object array or a silent copy
    with pytest.raises(TypeError):
        np.array([1.0, 2.0]) + a
    with pytest.raises(TypeError):
        a + np.array([1.0, 2.0])
    assert a.__array_ufunc__ is None


def test_operators_differentiable(backend):
    x = vtl.asarray([1.0, 2.0], requires_grad=True)
    y = vtl.sum((2 * x - 1) / (x + np.float32(1)) * x ** 2)
    y.backward()
    xn = x.numpy().astype(np.float64)
    # d/dx [(2x - 1) x^2 / (x + 1)]
    num = (2 * xn - 1) * xn**2
    expected = ((2 * xn**2 + 2 * (2 * xn - 1) * xn) * (xn + 1) - num) / (xn + 1) ** 2
    assert_close(x.grad, expected.astype(np.float32), rtol=1e-5)


@given(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3),
       st.sampled_from(["add", "sub", "mul", "truediv"]))
def test_binary_operators_broadcast_property(backend, shapes, name):
    rng = np.random.default_rng(0)
    s1, s2 = shapes.input_shapes
    an = rng.uniform(0.5, 2.0, s1).astype(np.float32)
    bn = rng.uniform(0.5, 2.0, s2).astype(np.float32)
    op = getattr(operator, name)
    check(op(vtl.asarray(an), vtl.asarray(bn)), op(an, bn))


# ------------------------------------------------------------------ conversions
def test_scalar_conversions(backend):
    assert bool(vtl.asarray([1.0])) is True
    assert bool(vtl.asarray(0.0)) is False
    assert int(vtl.asarray([[3.7]])) == 3
    assert float(vtl.asarray(np.array(2, np.int32))) == 2.0
    assert complex(vtl.asarray(1.5)) == 1.5 + 0j
    assert operator.index(vtl.asarray(np.array(4, np.int32))) == 4
    assert [10, 20, 30][vtl.asarray(1)] == 20
    assert list(range(vtl.asarray(3))) == [0, 1, 2]
    v = float(vtl.asarray(np.array(0.1, np.float32)))
    assert type(v) is float and v == float(np.float32(0.1))


def test_scalar_conversion_errors(backend):
    many = vtl.asarray([1.0, 2.0])
    with pytest.raises(ValueError, match="truth value.*ambiguous"):
        bool(many)
    for conv in (int, float, complex):
        with pytest.raises(ValueError, match="exactly one element"):
            conv(many)
    with pytest.raises(ValueError):
        bool(vtl.zeros((0,)))
    with pytest.raises(TypeError, match="integer"):
        operator.index(vtl.asarray(1.0))
    with pytest.raises(TypeError, match="integer"):
        operator.index(vtl.asarray([1, 2]))
    with pytest.raises(TypeError):
        operator.index(vtl.asarray(True))


def test_len_and_iter(backend):
    mn = np.arange(6, dtype=np.float32).reshape(3, 2)
    m = vtl.asarray(mn)
    assert len(m) == 3
    rows = list(m)
    assert len(rows) == 3 and all(isinstance(r, vtl.Tensor) for r in rows)
    for r, e in zip(rows, mn, strict=True):
        check(r, e)
    assert len(vtl.zeros((0, 4))) == 0 and list(vtl.zeros((0, 4))) == []
    with pytest.raises(TypeError, match="0-d"):
        len(vtl.asarray(1.0))
    with pytest.raises(TypeError, match="0-d"):
        iter(vtl.asarray(1.0))
    # iteration is differentiable
    x = vtl.asarray([1.0, 2.0, 3.0], requires_grad=True)
    total = vtl.asarray(0.0)
    for i, xi in enumerate(x):
        total = total + xi * (i + 1)
    total.backward()
    check(x.grad, np.array([1.0, 2.0, 3.0], np.float32))


def test_repr(backend):
    a = vtl.asarray(np.array([1.5, -2.0], np.float32))
    r = repr(a)
    assert r.startswith("vtl.Tensor([") and "1.5" in r and "-2." in r
    assert "dtype=float32" in r and f"device='{a.device}'" in r
    assert "requires_grad" not in r and "grad_fn" not in r
    x = vtl.asarray([1.0], requires_grad=True)
    assert "requires_grad=True" in repr(x)
    y = x * 2
    assert f"grad_fn=<{y.grad_fn.name()}>" in repr(y)
    assert str(y) == repr(y)
    assert "dtype=int64" in repr(vtl.asarray([1, 2]))
    assert "shape=(0, 3)" in repr(vtl.zeros((0, 3)))
    big = repr(vtl.zeros((100, 100)))
    assert "..." in big and len(big) < 2000


def test_numpy_item_tolist(backend):
    mn = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    m = vtl.asarray(mn)
    h = m.numpy()
    assert isinstance(h, np.ndarray) and h.dtype == np.float32
    np.testing.assert_array_equal(h, mn)
    assert m.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert vtl.asarray([[5.0]]).item() == 5.0 and type(vtl.asarray(5.0).item()) is float
    assert type(vtl.asarray(np.array(5, np.int32)).item()) is int
    assert type(vtl.asarray(True).item()) is bool
    assert vtl.asarray(7).tolist() == 7
    with pytest.raises(ValueError, match="exactly one element"):
        m.item()


def test_numpy_asarray_of_tensor(backend):
    mn = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    m = vtl.asarray(mn)
    if backend != "numpy":
        with pytest.raises(TypeError, match=r"\.numpy\(\)"):
            np.asarray(m)
        return
    h = np.asarray(m)
    np.testing.assert_array_equal(h, mn)
    assert np.asarray(m, dtype=np.float64).dtype == np.float64
    c = np.array(m, copy=True)
    c[0, 0] = 100
    assert m.numpy()[0, 0] == 1.0


def test_dlpack(backend):
    mn = np.arange(6, dtype=np.float32).reshape(2, 3)
    m = vtl.asarray(mn)
    dev_type, dev_id = m.__dlpack_device__()
    assert isinstance(dev_type, int) and isinstance(dev_id, int)
    back = vtl.from_dlpack(m)
    check(back, mn)
    if backend == "numpy":
        assert dev_type == 1  # kDLCPU
        np.testing.assert_array_equal(np.from_dlpack(m), mn)
        cap = m.__dlpack__()
        assert type(cap).__name__ == "PyCapsule"


def test_array_namespace(backend):
    a = vtl.asarray([1.0])
    assert a.__array_namespace__() is vtl
    assert a.__array_namespace__(api_version="2024.12") is vtl
    with pytest.raises(ValueError, match="2099.01"):
        a.__array_namespace__(api_version="2099.01")


def test_attributes(backend):
    a = vtl.zeros((2, 3, 4))
    assert a.shape == (2, 3, 4) and isinstance(a.shape, tuple)
    assert a.ndim == 3 and a.size == 24
    assert a.dtype == vtl.float32
    assert isinstance(a.device, vtl.Device) and a.device.backend_name == backend
    assert vtl.asarray(1.0).shape == () and vtl.asarray(1.0).size == 1
    assert vtl.zeros((0, 5)).size == 0
    t = vtl.Tensor([1.0, 2.0], requires_grad=True)  # a synonym of vtl.asarray
    assert isinstance(t, vtl.Tensor) and t.requires_grad and t.dtype == vtl.float32


# -------------------------------------------------------------- moving, copying
def test_to_and_to_device(backend):
    a = vtl.asarray(np.array([1.0, 2.0], np.float32))
    assert a.to_device(a.device) is a
    assert a.to(a.device) is a
    assert a.to(a.dtype) is a
    b = a.to(vtl.int32)
    assert b.dtype == vtl.int32
    check(b, np.array([1, 2], np.int32))
    assert a.to(dtype="int16").dtype == vtl.int16
    c = a.to(a, copy=True)
    assert c is not a
    c += 1
    check(a, np.array([1.0, 2.0], np.float32))
    i = vtl.asarray(np.array([1, 2], np.int32))
    assert a.to(i).dtype == vtl.int32
    with pytest.raises(ValueError, match="stream"):
        a.to_device(a.device, stream=1)


def test_cpu_and_cross_device(backend, other_backends):
    a = vtl.asarray(np.array([1.0, 2.0], np.float32), requires_grad=True)
    h = a.cpu()
    assert h.device.backend_name == "numpy"
    check(h, np.array([1.0, 2.0], np.float32))
    if backend == "numpy":
        assert h is a
    for other in other_backends:
        b = a.to(other)
        assert b.device.backend_name == other
        assert b.grad_fn is not None  # differentiable move
        vtl.sum(b * 3).backward()
        assert a.grad.device == a.device
        check(a.grad, np.full(2, 3.0, np.float32))
        a.grad = None


def test_clone(backend):
    x = vtl.asarray(np.array([1.0, 2.0], np.float32), requires_grad=True)
    c = x.clone()
    assert c is not x and not c.is_leaf
    check(c, x.numpy())
    with vtl.no_grad():
        c += 5
    check(x, np.array([1.0, 2.0], np.float32))  # own storage
    assert x._version == 0
    vtl.sum(x.clone() * 2).backward()
    check(x.grad, np.full(2, 2.0, np.float32))
    plain = vtl.asarray([1.0]).clone()
    assert plain.grad_fn is None and not plain.requires_grad


def test_transpose_properties(backend):
    mn = np.arange(6, dtype=np.float32).reshape(2, 3)
    m = vtl.asarray(mn)
    check(m.T, mn.T)
    check(m.mT, mn.T)
    bn = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    b = vtl.asarray(bn)
    check(b.mT, np.swapaxes(bn, -1, -2))
    for bad in (vtl.asarray(1.0), vtl.asarray([1.0, 2.0]), b):
        with pytest.raises(ValueError, match="2-D"):
            _ = bad.T
    with pytest.raises(ValueError):
        _ = vtl.asarray([1.0, 2.0]).mT
    x = vtl.asarray(mn, requires_grad=True)
    vtl.sum(x.T * vtl.asarray(np.arange(6, dtype=np.float32).reshape(3, 2))).backward()
    check(x.grad, np.arange(6, dtype=np.float32).reshape(3, 2).T)


# --------------------------------------------------------------- grad, hashing
def test_grad_setter_validation(backend, other_backends):
    x = vtl.asarray(np.array([1.0, 2.0], np.float32), requires_grad=True)
    g = vtl.asarray(np.array([0.5, 0.5], np.float32))
    x.grad = g
    assert x.grad is g
    x.grad = None
    assert x.grad is None
    with pytest.raises(TypeError, match="vtl.Tensor or None"):
        x.grad = np.array([0.5, 0.5], np.float32)
    with pytest.raises(ValueError, match="shape"):
        x.grad = vtl.zeros((3,))
    with pytest.raises(TypeError, match="dtype"):
        x.grad = vtl.zeros((2,), dtype=vtl.int32)
    for other in other_backends:
        with pytest.raises(ValueError, match="device"):
            x.grad = vtl.zeros((2,), backend=other)
    assert x.grad is None


def test_hash_by_identity(backend):
    a = vtl.asarray([1.0, 2.0])
    b = vtl.asarray([1.0, 2.0])
    assert hash(a) == hash(a) and hash(a) != hash(b)
    d = {a: "a", b: "b"}
    assert d[a] == "a" and d[b] == "b"
    s = {a, b, a}
    assert len(s) == 2
    # == is elementwise (a Tensor), not identity
    assert isinstance(a == b, vtl.Tensor)
    assert bool(vtl.all(a == b))


def test_getitem_and_setitem(backend):
    mn = np.arange(12, dtype=np.float32).reshape(3, 4)
    m = vtl.asarray(mn.copy())
    check(m[1], mn[1])
    check(m[:, 1:3], mn[:, 1:3])
    check(m[::-1, ::2], mn[::-1, ::2])
    check(m[..., 0], mn[..., 0])
    check(m[None, 0], mn[None, 0])
    v0 = m._version
    m[0, 0] = 100.0
    m[1] = vtl.asarray(np.full(4, 7.0, np.float32))
    expected = mn.copy()
    expected[0, 0] = 100.0
    expected[1] = 7.0
    check(m, expected)
    assert m._version == v0 + 2


def test_deepcopy_and_pickle_of_leaves(backend):
    import copy
    import pickle

    t = vtl.asarray([1.0, 2.0, 3.0], requires_grad=True)
    vtl.sum(t * t).backward()
    c = copy.deepcopy(t)
    assert c is not t and c.requires_grad and c.device == t.device
    assert_close(c, t.numpy())
    assert_close(c.grad, t.grad.numpy())
    with vtl.no_grad():
        c[0] = 10.0
    assert t.numpy()[0] == 1.0  # own storage
    p = pickle.loads(pickle.dumps(t))
    assert p.requires_grad and p.device == t.device
    assert_close(p, t.numpy())
    with pytest.raises(RuntimeError, match="leaf"):
        copy.deepcopy(t * 2)
    with pytest.raises(RuntimeError, match="leaf"):
        pickle.dumps(t * 2)
