"""Statistical functions: values against NumPy, the standard's special cases,
dtype rules, errors, and finite-difference checks of every VJP rule."""

from __future__ import annotations

import warnings

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

FLOATS = ["float32", "float64"]
INTS = ["int8", "int32", "int64", "uint8", "uint32"]


def _elements(dtype: str, lo: float = -10, hi: float = 10) -> st.SearchStrategy:
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return st.floats(lo, hi, width=8 * dt.itemsize, allow_subnormal=False)
    if dt.kind == "u":
        return st.integers(0, int(hi))
    if dt.kind == "b":
        return st.booleans()
    return st.integers(int(lo), int(hi))


@st.composite
def reduction_case(draw, dtypes, lo=-10, hi=10, min_side=0, axis_kind="multi"):
    dtype = draw(st.sampled_from(dtypes))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=min_side, max_side=4))
    x = draw(hnp.arrays(dtype, shape, elements=_elements(dtype, lo, hi)))
    nd = len(shape)
    if axis_kind == "single":
        axis = draw(st.one_of(st.none(), st.integers(-nd, nd - 1))) if nd else None
    else:
        axes = st.lists(st.integers(0, nd - 1), unique=True, max_size=nd) if nd else st.just([])
        axis = draw(st.one_of(
            st.none(),
            axes.map(tuple),
            st.integers(-nd, nd - 1) if nd else st.none(),
        ))
    keepdims = draw(st.booleans())
    return x, axis, keepdims


def _skip_missing(backend: str, x: np.ndarray) -> None:
    skip_unless_dtype(backend, x.dtype)


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn(*args, **kwargs)


# -- forward values -------------------------------------------------------------------
@given(case=reduction_case(FLOATS + INTS + ["bool"]))
def test_sum_matches_numpy(backend, case):
    x, axis, keepdims = case
    _skip_missing(backend, x)
    got = vtl.sum(vtl.asarray(x), axis=axis, keepdims=keepdims)
    want = np.sum(x, axis=axis, keepdims=keepdims)
    assert_close(got, want, rtol=1e-5 if x.dtype == np.float32 else None,
                 atol=1e-4 if x.dtype == np.float32 else None)


@given(case=reduction_case(FLOATS + INTS, lo=-2, hi=2))
def test_prod_matches_numpy(backend, case):
    x, axis, keepdims = case
    _skip_missing(backend, x)
    got = vtl.prod(vtl.asarray(x), axis=axis, keepdims=keepdims)
    assert_close(got, np.prod(x, axis=axis, keepdims=keepdims), rtol=1e-5, atol=1e-6)


@given(case=reduction_case(FLOATS))
def test_mean_var_std_match_numpy(backend, case):
    x, axis, keepdims = case
    _skip_missing(backend, x)
    t = vtl.asarray(x)
    tol = {"rtol": 1e-4, "atol": 1e-5} if x.dtype == np.float32 else {"rtol": 1e-9,
                                                                         "atol": 1e-10}
    assert_close(_quiet(vtl.mean, t, axis=axis, keepdims=keepdims),
                 _quiet(np.mean, x, axis=axis, keepdims=keepdims), **tol)
    for corr in (0.0, 1.0, 1.5):
        assert_close(_quiet(vtl.var, t, axis=axis, keepdims=keepdims, correction=corr),
                     _quiet(np.var, x, axis=axis, keepdims=keepdims, ddof=corr), **tol)
        assert_close(_quiet(vtl.std, t, axis=axis, keepdims=keepdims, correction=corr),
                     _quiet(np.std, x, axis=axis, keepdims=keepdims, ddof=corr), **tol)


@given(case=reduction_case(FLOATS + INTS, min_side=1))
def test_max_min_match_numpy(backend, case):
    x, axis, keepdims = case
    _skip_missing(backend, x)
    t = vtl.asarray(x)
    assert_close(vtl.max(t, axis=axis, keepdims=keepdims), np.max(x, axis=axis,
                                                                   keepdims=keepdims))
    assert_close(vtl.min(t, axis=axis, keepdims=keepdims), np.min(x, axis=axis,
                                                                   keepdims=keepdims))


@given(data=st.data(), include_initial=st.booleans())
def test_cumulative_match_numpy(backend, data, include_initial):
    dtype = data.draw(st.sampled_from(FLOATS + INTS + ["bool"]))
    skip_unless_dtype(backend, dtype)
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4))
    x = data.draw(hnp.arrays(dtype, shape, elements=_elements(dtype, -2, 2)))
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    t = vtl.asarray(x)
    for fn, ref in ((vtl.cumulative_sum, np.cumulative_sum),
                    (vtl.cumulative_prod, np.cumulative_prod)):
        got = fn(t, axis=axis, include_initial=include_initial)
        assert_close(got, ref(x, axis=axis, include_initial=include_initial),
                     rtol=1e-5, atol=1e-5)


def test_cumulative_axis_none_and_0d(backend):
    x = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    assert_close(vtl.cumulative_sum(vtl.asarray(x)), np.cumsum(x))
    assert_close(vtl.cumulative_prod(vtl.asarray(x), include_initial=True),
                 np.array([1, 1, 2, 6], dtype=np.float32))
    # a 0-d input acts as shape (1,), like NumPy
    assert_close(vtl.cumulative_sum(vtl.asarray(np.float32(4))), np.array([4], np.float32))
    with pytest.raises(ValueError, match="axis must be given"):
        vtl.cumulative_sum(vtl.ones((2, 2)))
    with pytest.raises(IndexError, match="out of bounds"):
        vtl.cumulative_prod(vtl.ones((2, 2)), axis=2)


# -- the standard's special cases and dtype rules ----------------------------------------
@pytest.mark.parametrize("dtype,want", [
    ("int8", "int64"), ("int32", "int64"), ("int64", "int64"), ("uint8", "uint64"),
    ("uint32", "uint64"), ("bool", "int64"), ("float32", "float32"), ("float64", "float64"),
])
def test_integer_promotion_default_dtype(backend, dtype, want):
    skip_unless_dtype(backend, dtype)
    skip_unless_dtype(backend, want)
    x = vtl.asarray(np.array([1, 1, 0], dtype=dtype))
    for fn in (vtl.sum, vtl.prod, vtl.cumulative_sum, vtl.cumulative_prod):
        assert fn(x).dtype == np.dtype(want), fn.__name__


def test_dtype_argument(backend):
    skip_unless_dtype(backend, "float64")
    x = np.array([100, 100, 100], dtype=np.int8)
    t = vtl.asarray(x)
    assert_close(vtl.sum(t, dtype=vtl.int8), np.sum(x, dtype=np.int8))
    assert_close(vtl.sum(t, dtype=vtl.float64), np.array(300.0))
    assert_close(vtl.prod(t, dtype=vtl.int32), np.prod(x, dtype=np.int32))
    assert_close(vtl.cumulative_sum(t, dtype=vtl.int16), np.cumsum(x, dtype=np.int16))
    with pytest.raises(TypeError, match="dtype"):
        vtl.sum(t, dtype="float128")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_var_std_with_correction_at_or_past_the_count(backend, dtype):
    """NumPy's divisor max(N - correction, 0) on every backend: inf where the deviations
    are not all zero, nan where they are (0 / 0), for every axis and keepdims."""
    x = np.array([[1.0, 2.0, 2.0], [4.0, 2.0, 7.0], [-3.0, 2.0, 0.5], [0.0, 2.0, 1.0]],
                 dtype=dtype)
    _skip_missing(backend, x)
    t = vtl.asarray(x)
    for axis, count in ((0, 4), (1, 3), (None, 12), ((0, 1), 12)):
        for corr in (count, count + 1, count + 2.5):
            for keepdims in (False, True):
                want = _quiet(np.var, x, axis=axis, ddof=corr, keepdims=keepdims)
                got = _quiet(vtl.var, t, axis=axis, correction=corr, keepdims=keepdims)
                np.testing.assert_array_equal(got.numpy(), want)
                got = _quiet(vtl.std, t, axis=axis, correction=corr, keepdims=keepdims)
                np.testing.assert_array_equal(
                    got.numpy(), _quiet(np.std, x, axis=axis, ddof=corr, keepdims=keepdims))


def test_empty_reductions(backend):
    e = vtl.asarray(np.zeros((0, 3), dtype=np.float32))
    assert_close(vtl.sum(e), np.array(0.0, dtype=np.float32))
    assert_close(vtl.prod(e), np.array(1.0, dtype=np.float32))
    assert_close(vtl.sum(e, axis=0), np.zeros(3, np.float32))
    assert_close(vtl.prod(e, axis=0), np.ones(3, np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert np.isnan(vtl.mean(e).item())
        assert np.all(np.isnan(vtl.mean(e, axis=0).numpy()))
    assert vtl.max(e, axis=1).shape == (0,)  # reducing a non-empty axis is fine
    for fn in (vtl.max, vtl.min):
        with pytest.raises(ValueError, match=f"{fn.__name__}.*size 0"):
            fn(e)
        with pytest.raises(ValueError, match="size 0"):
            fn(e, axis=0)


def test_nan_propagation(backend):
    x = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, 6.0]], dtype=np.float32)
    t = vtl.asarray(x)
    for fn, ref in ((vtl.sum, np.sum), (vtl.prod, np.prod), (vtl.mean, np.mean),
                    (vtl.var, np.var), (vtl.std, np.std), (vtl.max, np.max),
                    (vtl.min, np.min)):
        assert_close(fn(t, axis=1), ref(x, axis=1), rtol=1e-6)
        assert np.isnan(fn(t).item())
    assert_close(vtl.cumulative_sum(t, axis=1), np.cumsum(x, axis=1))


def test_zero_dim_and_empty_axis_tuple(backend):
    x = vtl.asarray(np.float32(2.5))
    for fn in (vtl.sum, vtl.prod, vtl.mean, vtl.max, vtl.min):
        assert_close(fn(x), np.array(2.5, dtype=np.float32))
    assert_close(vtl.var(x), np.array(0.0, np.float32))
    y = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert_close(vtl.sum(vtl.asarray(y), axis=()), y)
    assert_close(vtl.max(vtl.asarray(y), axis=(), keepdims=True), y)


def test_errors(backend):
    x = vtl.ones((2, 3))
    with pytest.raises(IndexError, match="out of bounds"):
        vtl.sum(x, axis=2)
    with pytest.raises(ValueError, match="repeated axis"):
        vtl.mean(x, axis=(0, -2))
    with pytest.raises(TypeError, match="vtl.Tensor"):
        vtl.prod(np.ones(3))
    ints = vtl.asarray([1, 2, 3])
    for fn in (vtl.mean, vtl.var, vtl.std):
        with pytest.raises(TypeError, match=f"{fn.__name__}.*floating"):
            fn(ints)
    if "complex64" in supported_dtypes(backend):
        c = vtl.asarray(np.array([1 + 1j, 2], dtype=np.complex64))
        for fn in (vtl.max, vtl.min, vtl.var, vtl.std):
            with pytest.raises(TypeError, match=fn.__name__):
                fn(c)
        assert_close(vtl.mean(c), np.mean(np.array([1 + 1j, 2], np.complex64)))
    with pytest.raises(ValueError, match="correction"):
        vtl.var(x, correction=-1)
    with pytest.raises(TypeError, match="correction"):
        vtl.std(x, correction="1")


# -- gradients -------------------------------------------------------------------------
RNG = np.random.default_rng(1)
A = RNG.standard_normal((3, 4))


@pytest.mark.parametrize("axis,keepdims", [(None, False), (0, False), (1, True),
                                           ((0, 1), True), (-1, False)])
def test_grad_sum_mean(backend, axis, keepdims):
    for fn in (vtl.sum, vtl.mean):
        f = lambda x, fn=fn: fn(x, axis=axis, keepdims=keepdims)
        check_grad(f, A)
        check_grad_matches_numpy(f, backend, A)


@pytest.mark.parametrize("correction", [0.0, 1.0, 2.5])
@pytest.mark.parametrize("axis,keepdims", [(None, False), (0, True), (1, False)])
def test_grad_var_std(backend, axis, keepdims, correction):
    for fn in (vtl.var, vtl.std):
        f = lambda x, fn=fn: fn(x, axis=axis, keepdims=keepdims, correction=correction)
        check_grad(f, A)
        check_grad_matches_numpy(f, backend, A)


def test_grad_std_zero_variance_is_zero(backend):
    x = np.array([[2.0, 2.0, 2.0], [1.0, 2.0, 4.0]])
    t = vtl.asarray(x, requires_grad=True)
    (g,) = vtl.autograd.grad(vtl.sum(vtl.std(t, axis=1)), [t])
    g = g.numpy()
    assert np.all(np.isfinite(g))
    np.testing.assert_array_equal(g[0], 0.0)
    # the other row is the ordinary derivative (x - mean) / (N * std)
    r = x[1]
    np.testing.assert_allclose(g[1], (r - r.mean()) / (3 * r.std()))


def test_grad_var_degenerate_correction_is_nonfinite():
    t = vtl.asarray(np.array([1.0, 3.0]), backend="numpy", requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        (g,) = vtl.autograd.grad(vtl.var(t, correction=2), [t])
    assert not np.any(np.isfinite(g.numpy()))


@pytest.mark.parametrize("x", [
    [[1.5, -2.0, 0.5, 3.0], [0.7, 1.1, -0.3, 2.0]],
    [[1.5, 0.0, 0.5, 3.0], [0.7, 1.1, -0.3, 2.0]],    # one zero
    [[0.0, 2.0, 0.0, 3.0], [0.0, 0.0, 0.0, 2.0]],     # several zeros per slice
])
@pytest.mark.parametrize("axis,keepdims", [(None, False), (0, False), (1, True),
                                           ((0, 1), False)])
def test_grad_prod_with_zeros(backend, x, axis, keepdims):
    f = lambda t: vtl.prod(t, axis=axis, keepdims=keepdims)
    check_grad(f, x)
    check_grad_matches_numpy(f, backend, x)


def test_grad_prod_single_zero_exact():
    x = vtl.asarray(np.array([2.0, 0.0, 3.0, 4.0]), backend="numpy", requires_grad=True)
    (g,) = vtl.autograd.grad(vtl.prod(x), [x])
    np.testing.assert_array_equal(g.numpy(), [0.0, 24.0, 0.0, 0.0])
    y = vtl.asarray(np.array([2.0, 0.0, 3.0, 0.0]), backend="numpy", requires_grad=True)
    (g,) = vtl.autograd.grad(vtl.prod(y), [y])
    np.testing.assert_array_equal(g.numpy(), [0.0, 0.0, 0.0, 0.0])


def test_grad_prod_3d_middle_axes_and_dtype(backend):
    x = RNG.standard_normal((2, 3, 2))
    x[0, 1, 1] = 0.0
    check_grad(lambda t: vtl.prod(t, axis=(0, 2)), x)
    check_grad(lambda t: vtl.prod(t, axis=1, dtype=vtl.float64), x)


def test_second_derivative_prod_and_cumprod_with_zeros():
    x = [[0.0, 2.0, -1.5], [1.2, 0.0, 0.0]]

    def grad_of(fn):
        def f(t):
            if not t.requires_grad:  # the finite-difference passes
                t = t.detach().requires_grad_()
            y = fn(t)
            (g,) = vtl.autograd.grad(vtl.sum(vtl.multiply(y, y)), [t], create_graph=True)
            return g
        return f

    check_grad(grad_of(lambda t: vtl.prod(t, axis=1)), x)
    check_grad(grad_of(lambda t: vtl.cumulative_prod(t, axis=1)), x)
    check_grad(grad_of(lambda t: vtl.std(t, axis=1, correction=1)), [[1.0, 2.0, 4.0]])


@pytest.mark.parametrize("fn", ["max", "min"])
@pytest.mark.parametrize("axis,keepdims", [(None, False), (0, True), (1, False)])
def test_grad_max_min_distinct(backend, fn, axis, keepdims):
    f = lambda t: getattr(vtl, fn)(t, axis=axis, keepdims=keepdims)
    check_grad(f, A)
    check_grad_matches_numpy(f, backend, A)


def test_grad_max_min_ties_split_evenly(backend):
    skip_unless_dtype(backend, "float64")
    x = np.array([[1.0, 3.0, 3.0, 2.0], [5.0, 5.0, 5.0, -1.0]])
    t = vtl.asarray(x, requires_grad=True)
    (g,) = vtl.autograd.grad(vtl.sum(vtl.max(t, axis=1)), [t])
    assert_close(g, [[0, 0.5, 0.5, 0], [1 / 3, 1 / 3, 1 / 3, 0]])
    (g,) = vtl.autograd.grad(vtl.max(t), [t])
    assert_close(g, [[0, 0, 0, 0], [1 / 3, 1 / 3, 1 / 3, 0]])
    y = np.array([[2.0, -1.0], [-1.0, 4.0], [-1.0, 0.0]])
    t = vtl.asarray(y, requires_grad=True)
    w = vtl.asarray([[10.0, 20.0]])
    (g,) = vtl.autograd.grad(vtl.sum(vtl.min(t, axis=0, keepdims=True) * w), [t])
    assert_close(g, [[0.0, 20.0], [5.0, 0.0], [5.0, 0.0]])


def test_grad_max_nan_goes_to_nan_inputs():
    x = vtl.asarray(np.array([1.0, np.nan, 3.0, np.nan]), backend="numpy",
                    requires_grad=True)
    (g,) = vtl.autograd.grad(vtl.max(x), [x])
    np.testing.assert_array_equal(g.numpy(), [0.0, 0.5, 0.0, 0.5])


@pytest.mark.parametrize("include_initial", [False, True])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_grad_cumulative_sum(backend, axis, include_initial):
    f = lambda t: vtl.cumulative_sum(t, axis=axis, include_initial=include_initial)
    check_grad(f, A)
    check_grad_matches_numpy(f, backend, A)


@pytest.mark.parametrize("x", [
    [[1.5, -2.0, 0.5, 3.0], [0.7, 1.1, -0.3, 2.0]],
    [[1.5, 0.0, 0.5, 3.0], [0.0, 1.1, -0.3, 2.0]],    # one zero per slice
    [[0.0, 2.0, 0.0, 3.0], [1.0, 0.0, 0.0, 0.0]],     # several zeros per slice
    [[0.0, 0.0, 0.0, 0.0], [2.0, 3.0, 1.5, 0.0]],
])
@pytest.mark.parametrize("include_initial", [False, True])
def test_grad_cumulative_prod_with_zeros(backend, x, include_initial):
    for axis in (0, 1):
        f = lambda t, axis=axis: vtl.cumulative_prod(t, axis=axis,
                                                     include_initial=include_initial)
        check_grad(f, x)
        check_grad_matches_numpy(f, backend, x)


def test_grad_cumulative_0d_and_dtype():
    check_grad(lambda t: vtl.cumulative_sum(t, include_initial=True), 1.5)
    check_grad(lambda t: vtl.cumulative_prod(t), 1.5)
    x = vtl.asarray(np.array([1.0, 2.0], np.float32), backend="numpy", requires_grad=True)
    y = vtl.cumulative_prod(x, dtype=vtl.float64)
    assert y.dtype == vtl.float64
    (g,) = vtl.autograd.grad(vtl.sum(y), [x])
    assert g.dtype == vtl.float32
    np.testing.assert_allclose(g.numpy(), [3.0, 1.0])


def test_integer_reductions_not_recorded():
    x = vtl.asarray(np.array([1.0, 2.0]), backend="numpy", requires_grad=True)
    assert vtl.sum(x, dtype=vtl.int64).grad_fn is None
    assert vtl.sum(x).grad_fn is not None
