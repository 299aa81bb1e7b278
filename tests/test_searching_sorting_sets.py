"""Searching, sorting, set and utility functions: values against NumPy, the
standard's special cases, errors, and gradients of where, sort and diff."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import (
    assert_close,
    check_grad,
    check_grad_matches_numpy,
    skip_unless_dtype,
    supported_dtypes,
)
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import vtl
from vtl._ops.sets import _isin_portable

DTYPES = ["float32", "float64", "int8", "int32", "int64", "uint8"]


def _elements(dtype: str, lo: int = -5, hi: int = 5) -> st.SearchStrategy:
    dt = np.dtype(dtype)
    if dt.kind == "f":
        # few distinct values, so ties are common
        return st.sampled_from([-2.0, -0.5, 0.0, 1.0, 1.5, 3.0])
    if dt.kind == "b":
        return st.booleans()
    return st.integers(0 if dt.kind == "u" else lo, hi)


@st.composite
def array_and_axis(draw, dtypes=DTYPES, min_dims=0, min_side=0):
    dtype = draw(st.sampled_from(dtypes))
    shape = draw(hnp.array_shapes(min_dims=min_dims, max_dims=3, min_side=min_side,
                                  max_side=5))
    x = draw(hnp.arrays(dtype, shape, elements=_elements(dtype)))
    axis = draw(st.integers(-x.ndim, x.ndim - 1)) if x.ndim else 0
    return x, axis


# -- utility ---------------------------------------------------------------------------
@given(case=array_and_axis(DTYPES + ["bool"]), keepdims=st.booleans(), whole=st.booleans())
def test_all_any_match_numpy(backend, case, keepdims, whole):
    x, axis = case
    skip_unless_dtype(backend, x.dtype)
    axis = None if whole or x.ndim == 0 else axis
    t = vtl.asarray(x)
    assert_close(vtl.all(t, axis=axis, keepdims=keepdims), np.all(x, axis=axis,
                                                                   keepdims=keepdims))
    assert_close(vtl.any(t, axis=axis, keepdims=keepdims), np.any(x, axis=axis,
                                                                   keepdims=keepdims))


def test_all_any_empty(backend):
    e = vtl.asarray(np.zeros((0, 2), dtype=bool))
    assert vtl.all(e).item() is True
    assert vtl.any(e).item() is False
    assert_close(vtl.all(e, axis=(0,)), np.ones(2, bool))


@given(case=array_and_axis(DTYPES + ["bool"], min_dims=1), n=st.integers(0, 3),
       edges=st.sampled_from(["none", "prepend", "append", "both"]))
def test_diff_matches_numpy(backend, case, n, edges):
    x, axis = case
    skip_unless_dtype(backend, x.dtype)
    kw, nkw = {}, {}
    eshape = list(x.shape)
    eshape[axis] = 2
    edge = np.ones(eshape, dtype=x.dtype)
    if edges in ("prepend", "both"):
        kw["prepend"], nkw["prepend"] = vtl.asarray(edge), edge
    if edges in ("append", "both"):
        kw["append"], nkw["append"] = vtl.asarray(edge), edge
    got = vtl.diff(vtl.asarray(x), axis=axis, n=n, **kw)
    assert_close(got, np.diff(x, axis=axis, n=n, **nkw))


def test_diff_errors(backend):
    x = vtl.ones((2, 3))
    with pytest.raises(ValueError, match="0-d"):
        vtl.diff(vtl.asarray(1.0))
    with pytest.raises(ValueError, match="non-negative"):
        vtl.diff(x, n=-1)
    with pytest.raises(TypeError, match="int for n"):
        vtl.diff(x, n=1.0)
    with pytest.raises(IndexError, match="out of bounds"):
        vtl.diff(x, axis=2)
    with pytest.raises(ValueError, match="prepend has shape"):
        vtl.diff(x, axis=1, prepend=vtl.ones((3, 1)))
    with pytest.raises(ValueError, match="append has shape"):
        vtl.diff(x, append=vtl.ones((2,)))
    with pytest.raises(TypeError, match="vtl.Tensor"):
        vtl.diff(x, prepend=1.0)


@pytest.mark.parametrize("n", [0, 1, 2, 3])
@pytest.mark.parametrize("edges", ["none", "prepend", "append", "both"])
def test_grad_diff(backend, n, edges):
    rng = np.random.default_rng(n)
    x = rng.standard_normal((3, 4))
    p = rng.standard_normal((3, 2))
    a = rng.standard_normal((3, 1))
    ins = [x]
    if edges in ("prepend", "both"):
        ins.append(p)
    if edges in ("append", "both"):
        ins.append(a)

    def f(*ts):
        kw = {}
        rest = list(ts[1:])
        if edges in ("prepend", "both"):
            kw["prepend"] = rest.pop(0)
        if edges in ("append", "both"):
            kw["append"] = rest.pop(0)
        return vtl.diff(ts[0], axis=1, n=n, **kw)

    check_grad(f, *ins)
    check_grad_matches_numpy(f, backend, *ins)


def test_grad_diff_axis0_and_long_n():
    x = np.random.default_rng(3).standard_normal((4, 2))
    check_grad(lambda t: vtl.diff(t, axis=0, n=2), x)
    check_grad(lambda t: vtl.diff(t, axis=0, n=4), x)   # empty result
    check_grad(lambda t: vtl.diff(t, axis=0, n=6), x)   # n beyond the length


# -- argmax / argmin / count_nonzero / nonzero -------------------------------------------
@given(case=array_and_axis(min_side=1), keepdims=st.booleans(), whole=st.booleans())
def test_argmax_argmin_match_numpy(backend, case, keepdims, whole):
    x, axis = case
    skip_unless_dtype(backend, x.dtype)
    axis = None if whole or x.ndim == 0 else axis
    t = vtl.asarray(x)
    for fn, ref in ((vtl.argmax, np.argmax), (vtl.argmin, np.argmin)):
        got = fn(t, axis=axis, keepdims=keepdims)
        want = np.asarray(ref(x, axis=axis, keepdims=keepdims)).astype(np.int64)
        assert_close(got, want)


def test_argmax_first_occurrence_nan_and_errors(backend):
    x = vtl.asarray(np.array([1.0, 3.0, 3.0, np.nan, 0.0], np.float32))
    assert vtl.argmax(vtl.asarray(np.array([1.0, 3.0, 3.0], np.float32))).item() == 1
    assert vtl.argmin(vtl.asarray(np.array([0.0, -2.0, -2.0], np.float32))).item() == 1
    assert vtl.argmax(x).item() == int(np.argmax(x.numpy()))
    with pytest.raises(ValueError, match="argmax.*empty"):
        vtl.argmax(vtl.zeros((0,)))
    with pytest.raises(ValueError, match="argmin.*size 0"):
        vtl.argmin(vtl.zeros((2, 0)), axis=1)
    assert vtl.argmax(vtl.zeros((0, 2)), axis=1).shape == (0,)
    with pytest.raises(IndexError, match="out of bounds"):
        vtl.argmax(vtl.zeros((2, 2)), axis=2)
    with pytest.raises(TypeError, match="axis"):
        vtl.argmin(vtl.zeros((2, 2)), axis=(0, 1))
    if "complex64" in supported_dtypes(backend):
        with pytest.raises(TypeError, match="real-valued"):
            vtl.argmax(vtl.asarray(np.ones(2, np.complex64)))
    z = vtl.argmax(vtl.asarray(np.float32(2.0)))
    assert z.shape == () and z.item() == 0 and z.dtype == vtl.int64
    assert vtl.argmin(vtl.asarray(np.float32(2.0)), axis=-1).item() == 0
    with pytest.raises(IndexError, match="out of bounds"):
        vtl.argmax(vtl.asarray(np.float32(2.0)), axis=1)


@given(case=array_and_axis(DTYPES + ["bool"]), keepdims=st.booleans(), whole=st.booleans())
def test_count_nonzero_matches_numpy(backend, case, keepdims, whole):
    x, axis = case
    skip_unless_dtype(backend, x.dtype)
    axis = None if whole or x.ndim == 0 else axis
    got = vtl.count_nonzero(vtl.asarray(x), axis=axis, keepdims=keepdims)
    want = np.asarray(np.count_nonzero(x, axis=axis, keepdims=keepdims), dtype=np.int64)
    assert_close(got, want)


def test_count_nonzero_complex_and_tuple_axis(backend):
    x = np.array([[0, 1j, 0], [2, 0, 1 + 1j]], dtype=np.complex64)
    if "complex64" in supported_dtypes(backend):
        assert_close(vtl.count_nonzero(vtl.asarray(x)), np.array(3, np.int64))
    y = np.arange(24).reshape(2, 3, 4) % 3
    assert_close(vtl.count_nonzero(vtl.asarray(y), axis=(0, 2)),
                 np.count_nonzero(y, axis=(0, 2)).astype(np.int64))


@given(case=array_and_axis(DTYPES + ["bool"], min_dims=1))
def test_nonzero_matches_numpy(backend, case):
    x, _ = case
    skip_unless_dtype(backend, x.dtype)
    got = vtl.nonzero(vtl.asarray(x))
    want = np.nonzero(x)
    assert isinstance(got, tuple) and len(got) == x.ndim
    for g, w in zip(got, want, strict=True):
        assert_close(g, w.astype(np.int64))


def test_nonzero_0d_raises(backend):
    with pytest.raises(ValueError, match="nonzero.*0-d"):
        vtl.nonzero(vtl.asarray(1.0))


# -- searchsorted ------------------------------------------------------------------------------
@given(data=st.data(), side=st.sampled_from(["left", "right"]), use_sorter=st.booleans())
def test_searchsorted_matches_numpy(backend, data, side, use_sorter):
    dtype = data.draw(st.sampled_from(DTYPES))
    skip_unless_dtype(backend, dtype)
    x1 = data.draw(hnp.arrays(dtype, st.integers(0, 8), elements=_elements(dtype)))
    x2 = data.draw(hnp.arrays(dtype, hnp.array_shapes(min_dims=0, max_dims=2, min_side=0,
                                                      max_side=4),
                              elements=_elements(dtype)))
    if use_sorter:
        sorter = np.argsort(x1, kind="stable")
        got = vtl.searchsorted(vtl.asarray(x1), vtl.asarray(x2), side=side,
                               sorter=vtl.asarray(sorter))
        want = np.searchsorted(x1, x2, side=side, sorter=sorter)
    else:
        x1 = np.sort(x1)
        got = vtl.searchsorted(vtl.asarray(x1), vtl.asarray(x2), side=side)
        want = np.searchsorted(x1, x2, side=side)
    assert_close(got, np.asarray(want, dtype=np.int64))


def test_searchsorted_sides_scalars_and_errors(backend):
    x1 = vtl.asarray(np.array([1.0, 2.0, 2.0, 3.0], np.float32))
    v = vtl.asarray(np.array([0.0, 2.0, 2.5, 9.0], np.float32))
    assert vtl.searchsorted(x1, v).tolist() == [0, 1, 3, 4]
    assert vtl.searchsorted(x1, v, side="right").tolist() == [0, 3, 3, 4]
    assert vtl.searchsorted(x1, 2.0, side="right").item() == 3
    ints = vtl.asarray(np.array([1, 3, 5]))
    assert vtl.searchsorted(ints, 2.5).item() == 1   # promotion, not truncation
    with pytest.raises(ValueError, match="1-D"):
        vtl.searchsorted(vtl.ones((2, 2)), v)
    with pytest.raises(ValueError, match="side"):
        vtl.searchsorted(x1, v, side="middle")
    with pytest.raises(ValueError, match="sorter has shape"):
        vtl.searchsorted(x1, v, sorter=vtl.asarray(np.array([0, 1])))
    with pytest.raises(TypeError, match="integer"):
        vtl.searchsorted(x1, v, sorter=x1)
    with pytest.raises(TypeError, match="x2"):
        vtl.searchsorted(x1, [1.0])


# -- where --------------------------------------------------------------------------------
@given(data=st.data())
def test_where_matches_numpy(backend, data):
    shapes = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=3, min_dims=0,
                                                         max_dims=3, max_side=3))
    c = data.draw(hnp.arrays(bool, shapes.input_shapes[0]))
    d1, d2 = data.draw(st.sampled_from([("float32", "float32"), ("int32", "float64"),
                                        ("int8", "int64"), ("uint8", "int16"),
                                        ("bool", "bool")]))
    skip_unless_dtype(backend, d1)
    skip_unless_dtype(backend, d2)
    a = data.draw(hnp.arrays(d1, shapes.input_shapes[1], elements=_elements(d1)))
    b = data.draw(hnp.arrays(d2, shapes.input_shapes[2], elements=_elements(d2)))
    got = vtl.where(vtl.asarray(c), vtl.asarray(a), vtl.asarray(b))
    assert_close(got, np.where(c, a, b))


def test_where_python_scalars(backend):
    c = np.array([True, False, True])
    a = np.array([1.0, 2.0, 3.0], np.float32)
    i = np.array([1, 2, 3], np.int32)
    ct = vtl.asarray(c)
    assert_close(vtl.where(ct, vtl.asarray(a), 0.5), np.where(c, a, np.float32(0.5)))
    assert_close(vtl.where(ct, -1, vtl.asarray(a)), np.where(c, np.float32(-1), a))
    assert_close(vtl.where(ct, vtl.asarray(i), 7), np.where(c, i, np.int32(7)))
    assert_close(vtl.where(ct, True, vtl.asarray(c)), np.where(c, True, c))
    if "float64" in supported_dtypes(backend):
        assert_close(vtl.where(ct, vtl.asarray(i), 0.5), np.where(c, i.astype(np.float64),
                                                                  0.5))
    assert_close(vtl.where(vtl.asarray(np.array(False)), vtl.asarray(a), 2.0),
                 np.full(3, 2.0, np.float32))


def test_where_errors(backend):
    c = vtl.asarray(np.array([True, False]))
    x = vtl.ones((2,))
    with pytest.raises(TypeError, match="at least one"):
        vtl.where(c, 1.0, 2.0)
    with pytest.raises(TypeError, match="bool condition"):
        vtl.where(vtl.ones((2,)), x, x)
    with pytest.raises(TypeError, match="condition"):
        vtl.where(np.array([True, False]), x, x)
    with pytest.raises(ValueError, match="broadcast"):
        vtl.where(c, x, vtl.ones((3,)))
    with pytest.raises(TypeError, match="x2"):
        vtl.where(c, x, [1.0, 2.0])


def test_grad_where(backend):
    rng = np.random.default_rng(0)
    c = vtl.asarray(rng.standard_normal((3, 1, 4)) > 0, backend="numpy")
    a = rng.standard_normal((2, 4))
    b = rng.standard_normal((3, 2, 1))

    def f(x1, x2):
        cond = c if x1.device == c.device else c.to(x1.device)
        return vtl.where(cond, x1, x2)

    check_grad(f, a, b)
    check_grad_matches_numpy(f, backend, a, b)
    check_grad(lambda x1: f(x1, x1), a)   # both branches from one tensor
    check_grad(lambda x1: vtl.where(c, x1, 0.0), a)
    check_grad(lambda x2: vtl.where(c, 2.5, x2), b)


def test_grad_where_mixed_dtypes_and_no_grad_branch():
    c = vtl.asarray(np.array([True, False, True]), backend="numpy")
    x = vtl.asarray(np.array([1.0, 2.0, 3.0], np.float32), backend="numpy", requires_grad=True)
    y = vtl.asarray(np.array([5.0, 6.0, 7.0]), backend="numpy")
    out = vtl.where(c, x, y)
    assert out.dtype == vtl.float64
    (g,) = vtl.autograd.grad(vtl.sum(out), [x])
    assert g.dtype == vtl.float32
    np.testing.assert_array_equal(g.numpy(), [1.0, 0.0, 1.0])
    i = vtl.asarray(np.array([1, 2, 3]), backend="numpy")
    (g,) = vtl.autograd.grad(vtl.sum(vtl.where(c, i, x)), [x])
    np.testing.assert_array_equal(g.numpy(), [0.0, 1.0, 0.0])


# -- sort / argsort --------------------------------------------------------------------------
@given(case=array_and_axis(min_dims=1), descending=st.booleans())
def test_sort_argsort_match_numpy_stable(backend, case, descending):
    x, axis = case
    skip_unless_dtype(backend, x.dtype)
    t = vtl.asarray(x)
    if descending:
        # a stable descending order keeps ties in their original order
        key = -x.astype(np.float64)
        want_idx = np.argsort(key, axis=axis, kind="stable")
    else:
        want_idx = np.argsort(x, axis=axis, kind="stable")
    assert_close(vtl.argsort(t, axis=axis, descending=descending),
                 want_idx.astype(np.int64))
    assert_close(vtl.sort(t, axis=axis, descending=descending),
                 np.take_along_axis(x, want_idx, axis=axis))
    got = vtl.argsort(t, axis=axis, descending=descending, stable=False).numpy()
    np.testing.assert_array_equal(np.take_along_axis(x, got, axis=axis),
                                  np.take_along_axis(x, want_idx, axis=axis))


def test_sort_ties_nan_and_0d(backend):
    x = np.array([3.0, 1.0, np.nan, 1.0, 3.0, -0.5], np.float32)
    t = vtl.asarray(x)
    assert_close(vtl.sort(t), np.sort(x))
    assert vtl.argsort(t).tolist() == [5, 1, 3, 0, 4, 2]
    assert vtl.argsort(t, descending=True).tolist() == [2, 0, 4, 1, 3, 5]
    assert_close(vtl.sort(t, descending=True),
                 np.array([np.nan, 3, 3, 1, 1, -0.5], np.float32))
    s = vtl.asarray(np.float32(2.0))
    assert_close(vtl.sort(s), np.array(2.0, np.float32))
    assert vtl.argsort(s).item() == 0
    assert_close(vtl.sort(s, axis=0, descending=True), np.array(2.0, np.float32))
    e = vtl.zeros((0, 3))
    assert vtl.sort(e, axis=0).shape == (0, 3)


def test_sort_errors(backend):
    x = vtl.ones((2, 3))
    with pytest.raises(IndexError, match="out of bounds"):
        vtl.sort(x, axis=2)
    with pytest.raises(TypeError, match="axis"):
        vtl.argsort(x, axis=None)
    if "complex64" in supported_dtypes(backend):
        with pytest.raises(TypeError, match="real-valued"):
            vtl.sort(vtl.asarray(np.ones(2, np.complex64)))


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("descending", [False, True])
def test_grad_sort(backend, axis, descending):
    x = np.random.default_rng(2).permutation(12).reshape(3, 4) * 0.37 - 1.0
    f = lambda t: vtl.sort(t, axis=axis, descending=descending)
    check_grad(f, x)
    check_grad_matches_numpy(f, backend, x)


def test_grad_sort_scatters_through_permutation_and_0d():
    x = vtl.asarray(np.array([3.0, 1.0, 2.0]), backend="numpy", requires_grad=True)
    w = vtl.asarray(np.array([10.0, 20.0, 30.0]), backend="numpy")
    (g,) = vtl.autograd.grad(vtl.sum(vtl.multiply(vtl.sort(x), w)), [x])
    np.testing.assert_array_equal(g.numpy(), [30.0, 10.0, 20.0])
    check_grad(lambda t: vtl.sort(t), 1.5)


# -- sets ---------------------------------------------------------------------------------
@given(data=st.data())
def test_unique_matches_numpy(backend, data):
    dtype = data.draw(st.sampled_from(DTYPES + ["bool"]))
    skip_unless_dtype(backend, dtype)
    x = data.draw(hnp.arrays(dtype, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0,
                                                     max_side=4),
                             elements=_elements(dtype)))
    t = vtl.asarray(x)
    want = np.unique_all(x)
    ra = vtl.unique_all(t)
    assert ra._fields == ("values", "indices", "inverse_indices", "counts")
    assert_close(ra.values, want.values)
    assert_close(ra.indices, want.indices.astype(np.int64))
    assert_close(ra.inverse_indices, want.inverse_indices.astype(np.int64).reshape(x.shape))
    assert_close(ra.counts, want.counts.astype(np.int64))
    rc = vtl.unique_counts(t)
    assert rc._fields == ("values", "counts")
    assert_close(rc.values, want.values)
    assert_close(rc.counts, want.counts.astype(np.int64))
    ri = vtl.unique_inverse(t)
    assert ri._fields == ("values", "inverse_indices")
    assert_close(ri.inverse_indices, want.inverse_indices.astype(np.int64).reshape(x.shape))
    assert_close(vtl.unique_values(t), want.values)
    # the inverse rebuilds x
    np.testing.assert_array_equal(ri.values.numpy()[ri.inverse_indices.numpy()], x)


def test_unique_nans_are_distinct_and_signed_zeros_merge(backend):
    x = np.array([[1.0, np.nan, -0.0], [np.nan, 1.0, 0.0]], np.float32)
    t = vtl.asarray(x)
    r = vtl.unique_all(t)
    v = r.values.numpy()
    assert v.shape == (4,)
    np.testing.assert_array_equal(v[:2], [0.0, 1.0])
    assert np.all(np.isnan(v[2:]))
    assert r.counts.tolist() == [2, 2, 1, 1]
    assert r.indices.tolist() == [2, 0, 1, 3]
    assert r.inverse_indices.shape == (2, 3)
    assert vtl.unique_counts(t).counts.tolist() == [2, 2, 1, 1]
    assert vtl.unique_values(t).shape == (4,)


@given(data=st.data(), invert=st.booleans())
def test_isin_matches_numpy(backend, data, invert):
    d1, d2 = data.draw(st.sampled_from([("float32", "float32"), ("int32", "int32"),
                                        ("int64", "float64"), ("uint8", "int8")]))
    skip_unless_dtype(backend, d1)
    skip_unless_dtype(backend, d2)
    x1 = data.draw(hnp.arrays(d1, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0,
                                                   max_side=4), elements=_elements(d1)))
    x2 = data.draw(hnp.arrays(d2, hnp.array_shapes(min_dims=0, max_dims=2, min_side=0,
                                                   max_side=4), elements=_elements(d2)))
    want = np.isin(x1, x2, invert=invert)
    assert_close(vtl.isin(vtl.asarray(x1), vtl.asarray(x2), invert=invert), want)
    # the portable path (for backends without a native isin) agrees
    dev = vtl.asarray(x1).device
    xp = dev.xp
    dt = np.result_type(x1, x2)
    a, b = vtl.asarray(x1.astype(dt)), vtl.asarray(x2.astype(dt))
    out = _isin_portable(xp, a._data, b._data, dev.backend.native_device(dev.index))
    np.testing.assert_array_equal(dev.backend.to_host(out), np.isin(x1, x2))


def test_isin_scalars_nan_and_errors(backend):
    x = np.array([1.0, np.nan, 2.0, -0.0], np.float32)
    t = vtl.asarray(x)
    assert vtl.isin(t, vtl.asarray(np.array([np.nan, 0.0], np.float32))).tolist() == [
        False, False, False, True]
    assert vtl.isin(t, 2).tolist() == [False, False, True, False]
    assert vtl.isin(t, 2.0, invert=True).tolist() == [True, True, False, True]
    r = vtl.isin(2, vtl.asarray(np.array([1, 2])))
    assert r.shape == () and r.item() is True
    with pytest.raises(TypeError, match="at least one"):
        vtl.isin(1, 2)
    with pytest.raises(TypeError, match="x2"):
        vtl.isin(t, [1.0])
    with pytest.raises(TypeError, match="invert"):
        vtl.isin(t, t, invert=1)


def test_non_differentiable_results_have_no_graph():
    x = vtl.asarray(np.array([2.0, 1.0, 2.0]), backend="numpy", requires_grad=True)
    for r in (vtl.argmax(x), vtl.argsort(x), vtl.count_nonzero(x), vtl.unique_values(x),
              vtl.isin(x, x), vtl.searchsorted(vtl.sort(x), x), *vtl.nonzero(x),
              *vtl.unique_all(x)):
        assert r.grad_fn is None and not r.requires_grad


def test_second_derivatives_sort_where_diff():
    c = vtl.asarray(np.array([[True, False, True], [False, False, True]]), backend="numpy")

    def grad_of(fn):
        def f(t):
            if not t.requires_grad:  # the finite-difference passes
                t = t.detach().requires_grad_()
            y = fn(t)
            (g,) = vtl.autograd.grad(vtl.sum(vtl.multiply(vtl.multiply(y, y), y)), [t],
                                     create_graph=True)
            return g
        return f

    x = [[0.3, -1.2, 2.0], [1.1, 0.4, -0.7]]
    check_grad(grad_of(lambda t: vtl.sort(t, axis=1, descending=True)), x)
    check_grad(grad_of(lambda t: vtl.where(c, t, 2.0)), x)
    check_grad(grad_of(lambda t: vtl.diff(t, axis=1, n=2, prepend=t)), x)


@pytest.mark.parametrize("grad", [False, True])
def test_descending_sort_keeps_equal_elements_in_order(backend, grad):
    """A descending sort is stable: -0.0 and 0.0 (equal) stay in their order, nan first,
    the same bits as the descending argsort's gather, with or without a graph."""
    xs = np.array([[np.nan, 1.0, -np.inf, np.nan, np.inf, -0.0, 0.0],
                   [0.0, -0.0, 3.0, np.nan, -0.0, 2.0, 0.0]], np.float32)
    x = vtl.asarray(xs, requires_grad=grad)
    got = vtl.sort(x, axis=1, descending=True).detach().numpy()
    idx = vtl.argsort(vtl.asarray(xs), axis=1, descending=True).numpy()
    want = np.take_along_axis(xs, idx, axis=1)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    np.testing.assert_array_equal(np.signbit(got[0, 4:6]), [True, False])  # -0.0, then 0.0
