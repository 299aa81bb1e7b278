"""Regression tests for the conformance fixes found with the array API test suite
(data-apis/array-api-tests, see docs/guide/conformance.md): each test pins one behaviour
the standard specifies, with NumPy (plus the standard's special-case tables where
NumPy itself deviates) as the oracle."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import vtl
from tests.helpers import skip_unless_dtype, supported_dtypes, to_numpy

INF, NAN = math.inf, math.nan


def _assert_exact(actual, expected) -> None:
    """Equal shape, dtype and values, nan positions and the sign of every zero
    (real and imaginary parts separately)."""
    a, e = to_numpy(actual), np.asarray(expected)
    assert a.shape == e.shape, f"shape {a.shape} != {e.shape}"
    assert a.dtype == e.dtype, f"dtype {a.dtype} != {e.dtype}"
    parts = [(a.real, e.real), (a.imag, e.imag)] if a.dtype.kind == "c" else [(a, e)]
    for x, y in parts:
        np.testing.assert_array_equal(np.isnan(x), np.isnan(y))
        ok = ~np.isnan(y)
        np.testing.assert_array_equal(x[ok], y[ok])
        np.testing.assert_array_equal(np.signbit(x[ok]), np.signbit(y[ok]))


def _floor_divide_oracle(a: np.ndarray, b) -> np.ndarray:
    """NumPy's floor_divide, with the standard's cases for one infinite operand
    (``x1 / x2``: +-inf for an infinite dividend, a signed zero for an infinite divisor)."""
    with np.errstate(all="ignore"):
        out = np.floor_divide(a, b)
        one_inf = np.isinf(a) != np.isinf(b)
        return np.where(one_inf, np.true_divide(a, b), out).astype(out.dtype)


_SPECIAL = [INF, -INF, NAN, 0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 7.0, -7.0]


# -- floor_divide: one infinite operand --------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_floor_divide_infinite_operand_table(backend, dtype):
    skip_unless_dtype(backend, dtype)
    pairs = [(x, y) for x in _SPECIAL for y in _SPECIAL]
    a = np.array([p[0] for p in pairs], dtype=dtype)
    b = np.array([p[1] for p in pairs], dtype=dtype)
    expected = _floor_divide_oracle(a, b)
    # the standard's table, spelled out for the cases NumPy gets wrong
    assert expected[pairs.index((INF, 2.5))] == INF
    assert expected[pairs.index((-INF, 2.5))] == -INF
    assert expected[pairs.index((INF, -2.5))] == -INF
    i = pairs.index((1.0, -INF))
    assert expected[i] == 0 and np.signbit(expected[i])
    i = pairs.index((-1.0, INF))
    assert expected[i] == 0 and np.signbit(expected[i])
    x, y = vtl.asarray(a), vtl.asarray(b)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        _assert_exact(vtl.floor_divide(x, y), expected)
        _assert_exact(x // y, expected)
        z = vtl.asarray(a)
        z //= y
        _assert_exact(z, expected)


@pytest.mark.parametrize("scalar", [INF, -INF, 3.0, -0.5])
def test_floor_divide_infinite_with_python_scalar(backend, scalar):
    a = np.array(_SPECIAL, dtype="float32")
    x = vtl.asarray(a)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        _assert_exact(vtl.floor_divide(x, scalar), _floor_divide_oracle(a, np.float32(scalar)))
        _assert_exact(scalar // x, _floor_divide_oracle(np.float32(scalar), a))


@given(data=st.data())
def test_floor_divide_matches_oracle_property(backend, data):
    dtype = data.draw(st.sampled_from(
        [d for d in ("float32", "float64") if d in supported_dtypes(backend)]))
    shapes = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3))
    # no subnormals in or out: GPU kernels flush them (CuPy's), NumPy does not
    elems = st.sampled_from(_SPECIAL) | st.floats(-1e3, 1e3, width=32, allow_subnormal=False
                                                  ).filter(lambda v: v == 0 or abs(v) >= 1e-30)
    a = data.draw(hnp.arrays(dtype, shapes.input_shapes[0], elements=elems))
    b = data.draw(hnp.arrays(dtype, shapes.input_shapes[1], elements=elems))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        _assert_exact(vtl.floor_divide(vtl.asarray(a), vtl.asarray(b)), _floor_divide_oracle(a, b))


def test_floor_divide_integers_unchanged(backend):
    a = np.array([7, -7, 0, 5], dtype="int32")
    b = np.array([2, 2, 3, -3], dtype="int32")
    _assert_exact(vtl.floor_divide(vtl.asarray(a), vtl.asarray(b)), np.floor_divide(a, b))


# -- complex expm1 and tanh special cases ---------------------------------------------------
# (input, expected) from the standard's special-case lists (2024.12), plus conjugates
_EXPM1_CASES = [
    (complex(0.0, 0.0), complex(0.0, 0.0)),
    (complex(-0.0, 0.0), complex(0.0, 0.0)),
    (complex(INF, 0.0), complex(INF, 0.0)),
    (complex(INF, -0.0), complex(INF, -0.0)),
    (complex(-INF, INF), complex(-1.0, 0.0)),
    (complex(-INF, NAN), complex(-1.0, 0.0)),
    (complex(INF, INF), complex(INF, NAN)),
    (complex(INF, NAN), complex(INF, NAN)),
    (complex(NAN, 0.0), complex(NAN, 0.0)),
    (complex(NAN, -0.0), complex(NAN, -0.0)),
    (complex(NAN, 1.0), complex(NAN, NAN)),
    (complex(1.0, INF), complex(NAN, NAN)),
]


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_expm1_complex_special_cases(backend, dtype):
    skip_unless_dtype(backend, dtype)
    z = np.array([c[0] for c in _EXPM1_CASES], dtype=dtype)
    expected = np.array([c[1] for c in _EXPM1_CASES], dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = vtl.expm1(vtl.asarray(z))
    got = to_numpy(out)
    # -1 + 0j cases: the sign of the zero is unspecified
    free = np.isin(np.arange(len(z)), [4, 5])
    _assert_exact(got[~free], expected[~free])
    np.testing.assert_array_equal(got[free].real, -1.0)
    np.testing.assert_array_equal(got[free].imag, 0.0)


@given(data=st.data())
def test_expm1_complex_finite_matches_numpy(backend, data):
    dtype = data.draw(st.sampled_from(
        [d for d in ("complex64", "complex128") if d in supported_dtypes(backend)] or [None]))
    if dtype is None:
        return
    z = data.draw(hnp.arrays(dtype, hnp.array_shapes(min_dims=0, max_dims=2, min_side=0),
                             elements=st.complex_numbers(max_magnitude=20, width=64)))
    out = to_numpy(vtl.expm1(vtl.asarray(z)))
    expected = np.expm1(z)
    tol = 1e-5 if dtype == "complex64" else 1e-12
    np.testing.assert_allclose(out, expected, rtol=tol, atol=tol)
    assert out.dtype == expected.dtype


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_tanh_complex_infinite_real_part(backend, dtype):
    skip_unless_dtype(backend, dtype)
    ys = [0.5, 2.0, 3.0, 5.0, -0.5, -3.0, 0.0, -0.0]
    z = np.array([complex(INF, y) for y in ys] + [complex(-INF, y) for y in ys], dtype=dtype)
    # tanh(+-inf + yj) = +-1 + copysign(0, y) j for finite y (the standard says 1 + 0j for
    # y > 0; NumPy follows C99's 0 * sin(2y), whose sign varies)
    expected = np.array([complex(1.0, math.copysign(0.0, y)) for y in ys]
                        + [complex(-1.0, math.copysign(0.0, y)) for y in ys], dtype=dtype)
    _assert_exact(vtl.tanh(vtl.asarray(z)), expected)
    w = np.array([0.5 + 0.25j, -1.0 + 2.0j], dtype=dtype)
    np.testing.assert_allclose(to_numpy(vtl.tanh(vtl.asarray(w))), np.tanh(w), rtol=1e-5)


def test_expm1_tanh_complex_gradients_still_recorded(backend):
    skip_unless_dtype(backend, "complex64")
    z = vtl.asarray(np.array([0.5 + 0.25j], dtype="complex64"), requires_grad=True)
    vtl.sum(vtl.real(vtl.expm1(z) + vtl.tanh(z))).backward()
    zz = np.complex128(0.5 + 0.25j)
    expected = np.conj(np.exp(zz) + 1 - np.tanh(zz) ** 2)
    np.testing.assert_allclose(to_numpy(z.grad), [expected], rtol=1e-5)


# -- remainder and pow special cases (wgpu kernels; NumPy is right already) -----------------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_remainder_zero_takes_divisor_sign(backend, dtype):
    skip_unless_dtype(backend, dtype)
    a = np.array([0.0, -0.0, 0.0, -0.0, 5.0, -5.0, 7.5, -7.5, 4.0, -4.0], dtype=dtype)
    b = np.array([-2.0, -2.0, 2.0, 2.0, -2.5, 2.5, -2.0, 2.0, -2.0, 2.0], dtype=dtype)
    expected = np.remainder(a, b)
    _assert_exact(vtl.remainder(vtl.asarray(a), vtl.asarray(b)), expected)
    _assert_exact(vtl.asarray(a) % vtl.asarray(b), expected)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_pow_negative_infinite_base(backend, dtype):
    skip_unless_dtype(backend, dtype)
    b = np.array([2.0, 0.5, 3.0, 1.0, 4.5, -2.0, -0.5, -3.0, -1.0, 0.0], dtype=dtype)
    a = np.full_like(b, -INF)
    expected = np.power(a, b)
    _assert_exact(vtl.pow(vtl.asarray(a), vtl.asarray(b)), expected)
    _assert_exact(vtl.asarray(a) ** vtl.asarray(b), expected)


# -- the standalone wgpu library ----------------------------------------------------------------
def _wgpu_lib():
    xp = pytest.importorskip("vtl.backends.wgpu")
    if not xp.is_available():
        pytest.skip("no WebGPU adapter")
    return xp


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_wgpu_finfo_fields_are_python_numbers(dtype):
    xp = _wgpu_lib()
    f, ref = xp.finfo(getattr(xp, dtype)), np.finfo(dtype)
    for name in ("eps", "max", "min", "smallest_normal"):
        value = getattr(f, name)
        assert type(value) is float, name
        assert value == float(getattr(ref, name))
    assert type(f.bits) is int and f.bits == ref.bits
    assert f.dtype == np.dtype(dtype)
    assert xp.finfo(xp.ones(2, dtype=getattr(xp, dtype))).eps == f.eps


def test_wgpu_host_linalg_fft_signatures_match_standard():
    import inspect

    import array_api_strict as strict

    xp = _wgpu_lib()
    for ext, ref in ((xp.linalg, strict.linalg), (xp.fft, strict.fft)):
        for name in ("cholesky", "matrix_rank", "pinv", "qr", "svd", "solve", "det") \
                if ext is xp.linalg else ("fft", "ifft", "fftn", "ifftn", "rfft", "irfft",
                                           "rfftn", "irfftn", "hfft", "ihfft"):
            got = inspect.signature(getattr(ext, name))
            want = inspect.signature(getattr(ref, name))
            assert [(p.name, p.kind, p.default) for p in got.parameters.values()] == \
                [(p.name, p.kind, p.default) for p in want.parameters.values()], name


@pytest.mark.parametrize("mask", [True, False])
@pytest.mark.parametrize("shape", [(), (0,), (2, 3)])
def test_wgpu_zero_d_boolean_mask(mask, shape):
    xp = _wgpu_lib()
    ref = np.arange(math.prod(shape), dtype="float32").reshape(shape)
    x = xp.asarray(ref)
    got = xp.to_numpy(x[xp.asarray(mask)])
    expected = ref[np.asarray(mask)]
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)
    ref2 = ref.copy()
    ref2[np.asarray(mask)] = 5.0
    x[xp.asarray(mask)] = 5.0
    np.testing.assert_array_equal(xp.to_numpy(x), ref2)


# -- boolean masks with an empty axis ------------------------------------------------------
@pytest.mark.parametrize(("xshape", "mshape"), [((1,), (0,)), ((3, 2), (0,)), ((3, 2), (0, 2)),
                                                ((3, 2), (3, 0))])
def test_empty_mask_axis_selects_nothing(backend, xshape, mshape):
    ref = np.arange(math.prod(xshape), dtype="float32").reshape(xshape)
    mask = np.zeros(mshape, dtype=bool)
    x = vtl.asarray(ref)
    expected = ref[mask]
    got = x[vtl.asarray(mask)]
    assert got.shape == expected.shape and to_numpy(got).dtype == expected.dtype
    x[vtl.asarray(mask)] = 7.0
    np.testing.assert_array_equal(to_numpy(x), ref)
    with pytest.raises(IndexError, match="boolean index did not match"):
        x[vtl.asarray(np.zeros((2,), dtype=bool))]


def test_wgpu_from_dlpack_same_device_without_copy():
    xp = _wgpu_lib()
    x = xp.asarray(np.array([1.5, -2.0], dtype="float32"))
    assert xp.from_dlpack(x, copy=False) is x
    y = xp.from_dlpack(x, copy=True)
    assert y is not x
    np.testing.assert_array_equal(xp.to_numpy(y), [1.5, -2.0])
    with pytest.raises(ValueError, match="copy=False"):
        xp.from_dlpack(np.zeros(2, dtype="float32"), copy=False)


def test_asarray_nested_sequence_of_tensors(backend):
    ref = np.arange(6, dtype="float32").reshape(2, 3)
    a = vtl.asarray(ref)
    # the suite's reference values: a nested list of 0-d tensors of any backend
    t = vtl.asarray([[a[i, j] for i in range(2)] for j in range(3)], dtype=a.dtype)
    assert t.device == a.device
    np.testing.assert_array_equal(to_numpy(t), ref.T)
    with pytest.raises(TypeError, match="asarray"):
        vtl.asarray([object(), 1])


@pytest.mark.parametrize("mask", [True, False])
@pytest.mark.parametrize("shape", [(), (2,)])
def test_wgpu_python_bool_key(mask, shape):
    xp = _wgpu_lib()
    ref = np.arange(math.prod(shape), dtype="float32").reshape(shape)
    x = xp.asarray(ref)
    for key in (mask, (mask,)):
        got, expected = xp.to_numpy(x[key]), ref[key]
        assert got.shape == expected.shape
        np.testing.assert_array_equal(got, expected)
        ref[key] = 9.0
        x[key] = 9.0
        np.testing.assert_array_equal(xp.to_numpy(x), ref)


@pytest.mark.parametrize("fn", ["argmax", "argmin"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_arg_reductions_take_the_first_nan(backend, fn, dtype):
    """Several nans on an axis: the first one's index, as NumPy (a parallel reduction may
    return any of them)."""
    skip_unless_dtype(backend, dtype)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((32, 200)).astype(dtype)
    for row in range(32):
        x[row, rng.choice(200, size=row % 4, replace=False)] = np.nan
    t = vtl.asarray(x)
    for axis, keepdims in [(None, False), (1, False), (0, True)]:
        _assert_exact(getattr(vtl, fn)(t, axis=axis, keepdims=keepdims),
                      getattr(np, fn)(x, axis=axis, keepdims=keepdims))


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_division_by_zero_and_infinity(backend, dtype):
    """NumPy's complex division: a zero divisor gives inf/nan parts as real division does."""
    skip_unless_dtype(backend, dtype)
    a = np.array([1 + 1j, 1 - 2j, 0j, complex(INF, 1), complex(NAN, 0), 2 + 0j], dtype=dtype)
    b = np.array([0j, 0j, 0j, 2 + 0j, 1 + 0j, complex(INF, 0)], dtype=dtype)
    with np.errstate(all="ignore"):
        expected = a / b
    _assert_exact(vtl.asarray(a) / vtl.asarray(b), expected)
