"""Elementwise functions: values against NumPy on every backend, the standard's
special cases, dtype/argument errors, gradients (finite differences, broadcasting,
scalar operands, second order) and the Tensor operators."""

from __future__ import annotations

import inspect
import math
import operator
import warnings

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

FLOAT = ("float32", "float64")
COMPLEX = ("complex64", "complex128")
SINT = ("int8", "int16", "int32", "int64")
UINT = ("uint8", "uint16", "uint32", "uint64")
INT = SINT + UINT
BOOL = ("bool",)
REAL = INT + FLOAT
NUMERIC = REAL + COMPLEX
ALL = BOOL + NUMERIC


def _same_dtype(f):
    """Oracle for ceil/floor/trunc/round: integers come back unchanged."""
    return lambda x: x.copy() if x.dtype.kind in "iu" else f(x)


# name: (numpy oracle, accepted dtypes, domain of real inputs)
UNARY = {
    "abs": (np.abs, NUMERIC, (-10, 10)),
    "acos": (np.arccos, FLOAT + COMPLEX, (-1, 1)),
    "acosh": (np.arccosh, FLOAT + COMPLEX, (1, 10)),
    "asin": (np.arcsin, FLOAT + COMPLEX, (-1, 1)),
    "asinh": (np.arcsinh, FLOAT + COMPLEX, (-10, 10)),
    "atan": (np.arctan, FLOAT + COMPLEX, (-10, 10)),
    "atanh": (np.arctanh, FLOAT + COMPLEX, (-0.99, 0.99)),
    "bitwise_invert": (np.invert, BOOL + INT, (-100, 100)),
    "ceil": (_same_dtype(np.ceil), REAL, (-10, 10)),
    "conj": (np.conj, NUMERIC, (-10, 10)),
    "cos": (np.cos, FLOAT + COMPLEX, (-10, 10)),
    "cosh": (np.cosh, FLOAT + COMPLEX, (-10, 10)),
    "exp": (np.exp, FLOAT + COMPLEX, (-10, 10)),
    "expm1": (np.expm1, FLOAT + COMPLEX, (-10, 10)),
    "floor": (_same_dtype(np.floor), REAL, (-10, 10)),
    "imag": (np.imag, COMPLEX, (-10, 10)),
    "isfinite": (np.isfinite, NUMERIC, (-10, 10)),
    "isinf": (np.isinf, NUMERIC, (-10, 10)),
    "isnan": (np.isnan, NUMERIC, (-10, 10)),
    "log": (np.log, FLOAT + COMPLEX, (0.01, 100)),
    "log1p": (np.log1p, FLOAT + COMPLEX, (-0.99, 100)),
    "log2": (np.log2, FLOAT + COMPLEX, (0.01, 100)),
    "log10": (np.log10, FLOAT + COMPLEX, (0.01, 100)),
    "logical_not": (np.logical_not, BOOL, None),
    "negative": (np.negative, NUMERIC, (-100, 100)),
    "positive": (np.positive, NUMERIC, (-100, 100)),
    "real": (np.real, NUMERIC, (-10, 10)),
    "reciprocal": (np.reciprocal, FLOAT + COMPLEX, (0.1, 10)),
    "round": (_same_dtype(np.round), NUMERIC, (-10, 10)),
    "sign": (np.sign, NUMERIC, (-10, 10)),
    "signbit": (np.signbit, FLOAT, (-10, 10)),
    "sin": (np.sin, FLOAT + COMPLEX, (-10, 10)),
    "sinh": (np.sinh, FLOAT + COMPLEX, (-10, 10)),
    "sqrt": (np.sqrt, FLOAT + COMPLEX, (0, 100)),
    "square": (np.square, NUMERIC, (-10, 10)),
    "tan": (np.tan, FLOAT + COMPLEX, (-1.5, 1.5)),
    "tanh": (np.tanh, FLOAT + COMPLEX, (-10, 10)),
    "trunc": (_same_dtype(np.trunc), REAL, (-10, 10)),
}

NZ = "nonzero"
# name: (numpy oracle, accepted dtypes, domain of x1, domain of x2)
BINARY = {
    "add": (np.add, NUMERIC, (-10, 10), (-10, 10)),
    "atan2": (np.arctan2, FLOAT, (-10, 10), (-10, 10)),
    "bitwise_and": (np.bitwise_and, BOOL + INT, (-100, 100), (-100, 100)),
    "bitwise_left_shift": (np.left_shift, INT, (-100, 100), (0, 7)),
    "bitwise_or": (np.bitwise_or, BOOL + INT, (-100, 100), (-100, 100)),
    "bitwise_right_shift": (np.right_shift, INT, (-100, 100), (0, 7)),
    "bitwise_xor": (np.bitwise_xor, BOOL + INT, (-100, 100), (-100, 100)),
    "copysign": (np.copysign, FLOAT, (-10, 10), (-10, 10)),
    "divide": (np.divide, FLOAT + COMPLEX, (-10, 10), (-10, 10, NZ)),
    "equal": (np.equal, ALL, (-3, 3), (-3, 3)),
    "floor_divide": (np.floor_divide, REAL, (-20, 20), (-5, 5, NZ)),
    "greater": (np.greater, REAL, (-3, 3), (-3, 3)),
    "greater_equal": (np.greater_equal, REAL, (-3, 3), (-3, 3)),
    "hypot": (np.hypot, FLOAT, (-10, 10), (-10, 10)),
    "less": (np.less, REAL, (-3, 3), (-3, 3)),
    "less_equal": (np.less_equal, REAL, (-3, 3), (-3, 3)),
    "logaddexp": (np.logaddexp, FLOAT, (-50, 50), (-50, 50)),
    "logical_and": (np.logical_and, BOOL, None, None),
    "logical_or": (np.logical_or, BOOL, None, None),
    "logical_xor": (np.logical_xor, BOOL, None, None),
    "maximum": (np.maximum, REAL, (-3, 3), (-3, 3)),
    "minimum": (np.minimum, REAL, (-3, 3), (-3, 3)),
    "multiply": (np.multiply, NUMERIC, (-10, 10), (-10, 10)),
    "nextafter": (np.nextafter, FLOAT, (-10, 10), (-10, 10)),
    "not_equal": (np.not_equal, ALL, (-3, 3), (-3, 3)),
    "pow": (np.power, NUMERIC, (0, 4), (0, 3)),
    "remainder": (np.remainder, REAL, (-20, 20), (-5, 5, NZ)),
    "subtract": (np.subtract, NUMERIC, (-10, 10), (-10, 10)),
}

SPEC_NAMES = {
    "abs", "acos", "acosh", "add", "asin", "asinh", "atan", "atan2", "atanh", "bitwise_and",
    "bitwise_left_shift", "bitwise_invert", "bitwise_or", "bitwise_right_shift", "bitwise_xor",
    "ceil", "clip", "conj", "copysign", "cos", "cosh", "divide", "equal", "exp", "expm1",
    "floor", "floor_divide", "greater", "greater_equal", "hypot", "imag", "isfinite", "isinf",
    "isnan", "less", "less_equal", "log", "log1p", "log2", "log10", "logaddexp", "logical_and",
    "logical_not", "logical_or", "logical_xor", "maximum", "minimum", "multiply", "negative",
    "nextafter", "not_equal", "positive", "pow", "real", "reciprocal", "remainder", "round",
    "sign", "signbit", "sin", "sinh", "square", "sqrt", "subtract", "tan", "tanh", "trunc",
}


# -- strategies -------------------------------------------------------------------------
def _f32_inside(lo: float, hi: float) -> tuple[float, float]:
    a, b = np.float32(lo), np.float32(hi)
    if a < lo:
        a = np.nextafter(a, np.float32(np.inf))
    if b > hi:
        b = np.nextafter(b, np.float32(-np.inf))
    return float(a), float(b)


def _elements(dtype: np.dtype, domain: tuple | None) -> st.SearchStrategy:
    if dtype.kind == "b":
        return st.booleans()
    lo, hi = domain[0], domain[1]
    nonzero = len(domain) > 2
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        s = st.integers(max(int(lo), int(info.min)), min(int(hi), int(info.max)))
        return s.filter(lambda v: v != 0) if nonzero else s
    if dtype.kind == "f":
        width = dtype.itemsize * 8
        if width == 32:
            lo, hi = _f32_inside(lo, hi)
        s = st.floats(lo, hi, width=width, allow_subnormal=False)
        return s.filter(lambda v: abs(v) >= 0.25) if nonzero else s
    # complex: magnitude bounded by the real domain, away from 0 and branch cuts
    part = dtype.itemsize * 4
    m = float(min(max(abs(lo), abs(hi)), 3.0))
    if part == 32:
        m = _f32_inside(-m, m)[1]
    p = st.floats(-m, m, width=part, allow_subnormal=False).filter(lambda v: abs(v) > 0.1)
    return st.builds(complex, p, p)


def _pick_dtype(data: st.DataObject, backend: str, allowed: tuple[str, ...]) -> np.dtype:
    have = supported_dtypes(backend)
    names = [d for d in allowed if d in have]
    if not names:
        pytest.skip(f"{backend} supports none of {allowed}")
    return np.dtype(data.draw(st.sampled_from(names), label="dtype"))


def _array(data: st.DataObject, dtype: np.dtype, shape: tuple, domain: tuple | None):
    return data.draw(hnp.arrays(dtype, shape, elements=_elements(dtype, domain)), label="x")


SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)
PAIRS = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3)


def _compare(actual, expected, backend: str) -> None:
    """assert_close with a few ulps of slack on backends other than numpy."""
    if backend == "numpy":
        assert_close(actual, expected)
        return
    dt = np.dtype(expected.dtype)
    if dt.kind in "fc":
        single = dt in (np.float32, np.complex64)
        assert_close(actual, expected, rtol=1e-4 if single else 1e-11,
                     atol=1e-5 if single else 1e-12)
    else:
        assert_close(actual, expected)


def _quiet(f, *args):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return f(*args)


# -- the namespace -------------------------------------------------------------------------
def test_every_spec_function_is_exported_with_standard_signature():
    import array_api_strict

    names = set(vtl._ops.elementwise.__all__)
    assert names == SPEC_NAMES
    assert set(UNARY) | set(BINARY) | {"clip"} == SPEC_NAMES
    for name in SPEC_NAMES:
        ours = inspect.signature(getattr(vtl, name))
        ref = inspect.signature(getattr(array_api_strict, name))
        assert [(p.name, p.kind, p.default) for p in ours.parameters.values()] == \
            [(p.name, p.kind, p.default) for p in ref.parameters.values()], name
        assert getattr(vtl, name).__doc__, name


# -- values against NumPy ----------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(UNARY))
@given(data=st.data())
def test_unary_matches_numpy(backend, name, data):
    oracle, allowed, domain = UNARY[name]
    dtype = _pick_dtype(data, backend, allowed)
    x = _array(data, dtype, data.draw(SHAPES, label="shape"), domain)
    out = getattr(vtl, name)(vtl.asarray(x))
    assert out.device == vtl.Device(backend, 0)
    _compare(out, _quiet(oracle, x), backend)


@pytest.mark.parametrize("name", sorted(BINARY))
@given(data=st.data())
def test_binary_matches_numpy_with_broadcasting(backend, name, data):
    oracle, allowed, d1, d2 = BINARY[name]
    dtype = _pick_dtype(data, backend, allowed)
    s1, s2 = data.draw(PAIRS, label="shapes").input_shapes
    x1, x2 = _array(data, dtype, s1, d1), _array(data, dtype, s2, d2)
    if name == "floor_divide" and backend == "cupy":
        # CuPy's kernels flush subnormal float32 results to zero, so a tiny negative
        # quotient floors to -0 there instead of -1 (documented in docs/guide/conformance.md)
        x1 = np.where(np.abs(x1) < 1e-30, 0, x1).astype(x1.dtype)
    out = getattr(vtl, name)(vtl.asarray(x1), vtl.asarray(x2))
    _compare(out, _quiet(oracle, x1, x2), backend)


def _py(v):
    return v.item() if isinstance(v, np.generic) else v


@pytest.mark.parametrize("name", sorted(BINARY))
@given(data=st.data())
def test_binary_with_python_scalar_operand(backend, name, data):
    oracle, allowed, d1, d2 = BINARY[name]
    dtype = _pick_dtype(data, backend, allowed)
    shape = data.draw(SHAPES, label="shape")
    if data.draw(st.booleans(), label="scalar first"):
        s = _py(data.draw(_elements(dtype, d1), label="scalar"))
        x = _array(data, dtype, shape, d2)
        out, expected = getattr(vtl, name)(s, vtl.asarray(x)), _quiet(oracle, s, x)
    else:
        x = _array(data, dtype, shape, d1)
        s = _py(data.draw(_elements(dtype, d2), label="scalar"))
        out, expected = getattr(vtl, name)(vtl.asarray(x), s), _quiet(oracle, x, s)
    assert type(s) in (bool, int, float, complex)
    assert out.dtype == dtype or out.dtype == np.bool_
    _compare(out, expected, backend)


@given(data=st.data())
def test_clip_matches_numpy(backend, data):
    dtype = _pick_dtype(data, backend, REAL)
    s1, s2, s3 = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=3, max_side=3),
                           label="shapes").input_shapes
    x = _array(data, dtype, s1, (-10, 10))
    lo = _array(data, dtype, s2, (-10, 0))
    hi = _array(data, dtype, s3, (0, 10))
    kind = data.draw(st.sampled_from(["tensors", "scalars", "min only", "max only", "none"]))
    if kind == "tensors":
        out, expected = vtl.clip(vtl.asarray(x), vtl.asarray(lo), vtl.asarray(hi)), \
            np.clip(x, lo, hi)
    elif kind == "scalars":
        a, b = _py(lo.reshape(-1)[0]) if lo.size else -1, _py(hi.reshape(-1)[0]) if hi.size else 1
        out, expected = vtl.clip(vtl.asarray(x), a, b), np.clip(x, a, b).astype(dtype)
    elif kind == "min only":
        out, expected = vtl.clip(vtl.asarray(x), min=vtl.asarray(lo)), np.maximum(x, lo)
    elif kind == "max only":
        out, expected = vtl.clip(vtl.asarray(x), max=vtl.asarray(hi)), np.minimum(x, hi)
    else:
        out, expected = vtl.clip(vtl.asarray(x)), x
    _compare(out, expected, backend)


# -- special values ---------------------------------------------------------------------------
NAN, INF = math.nan, math.inf


def _t(v, dtype="float64"):
    return vtl.asarray(np.asarray(v, dtype=dtype))


def _vals(t):
    return to_numpy(t).tolist()


def _same_float(a: float, b: float) -> bool:
    """nan matches nan; a float 0 must match its sign; an int 0 is a zero of either sign."""
    if isinstance(b, int):
        return a == b
    if math.isnan(b):
        return math.isnan(a)
    if b == 0 or math.isinf(b):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    return math.isclose(a, b, rel_tol=1e-12)


@pytest.mark.parametrize("name, args, expected", [
    # values the standard states, checked including the sign of zero
    ("abs", ([-0.0, -INF, NAN],), [0.0, INF, NAN]),
    ("sign", ([-0.0, 0.0, -3.0, INF, NAN],), [0, 0, -1.0, 1.0, NAN]),
    ("round", ([0.5, 1.5, 2.5, -0.5, -2.5, 3.7],), [0.0, 2.0, 2.0, -0.0, -2.0, 4.0]),
    ("copysign", ([1.0, 1.0, -2.0, NAN], [-0.0, 0.0, 3.0, -1.0]), [-1.0, 1.0, 2.0, NAN]),
    ("maximum", ([NAN, 1.0, -0.0], [1.0, NAN, 2.0]), [NAN, NAN, 2.0]),
    ("minimum", ([NAN, 1.0, 3.0], [1.0, NAN, 2.0]), [NAN, NAN, 2.0]),
    ("floor_divide", ([1.0, -1.0, 0.0, -7.0, 7.0], [0.0, 0.0, 0.0, 2.0, -2.0]),
     [INF, -INF, NAN, -4.0, -4.0]),
    ("remainder", ([5.0, -1.0, 1.0, -7.0, 7.0, INF], [0.0, 3.0, -3.0, 2.0, -2.0, 2.0]),
     [NAN, 2.0, -2.0, 1.0, -1.0, NAN]),
    ("divide", ([1.0, -1.0, 0.0], [0.0, 0.0, 0.0]), [INF, -INF, NAN]),
    ("sqrt", ([-1.0, -0.0, INF],), [NAN, -0.0, INF]),
    ("log", ([0.0, -1.0, 1.0, INF],), [-INF, NAN, 0.0, INF]),
    ("exp", ([-INF, NAN],), [0.0, NAN]),
    ("tanh", ([-INF, INF, -0.0],), [-1.0, 1.0, -0.0]),
    ("atan2", ([0.0, -0.0, 0.0, 1.0], [-0.0, -0.0, 0.0, -INF]), [math.pi, -math.pi, 0.0,
                                                                    math.pi]),
    ("hypot", ([INF, NAN, 3.0], [NAN, INF, 4.0]), [INF, INF, 5.0]),
    ("logaddexp", ([INF, -INF, 1000.0], [1.0, 2.0, 1000.0]), [INF, 2.0,
                                                              1000.0 + math.log(2.0)]),
    ("pow", ([NAN, 1.0, 0.0, -0.0, 2.0], [0.0, NAN, -1.0, -1.0, -INF]),
     [1.0, 1.0, INF, -INF, 0.0]),
    ("nextafter", ([0.0, 1.0], [1.0, 1.0]), [5e-324, 1.0]),
    ("signbit", ([-0.0, 0.0, -NAN, -INF],), [True, False, True, True]),
    ("isfinite", ([INF, NAN, 1.0],), [False, False, True]),
    ("isinf", ([-INF, NAN, 1.0],), [True, False, False]),
    ("isnan", ([INF, NAN, 1.0],), [False, True, False]),
    ("trunc", ([-0.5, 2.7, -INF],), [-0.0, 2.0, -INF]),
    ("ceil", ([-0.5, 2.1],), [-0.0, 3.0]),
    ("floor", ([-0.5, 2.9],), [-1.0, 2.0]),
    ("expm1", ([-0.0, -INF],), [-0.0, -1.0]),
    ("log1p", ([-1.0, -2.0],), [-INF, NAN]),
])
def test_special_values(backend, name, args, expected):
    if "float64" not in supported_dtypes(backend):
        pytest.skip(f"{backend} lacks float64")
    with np.errstate(all="ignore"):
        out = getattr(vtl, name)(*[_t(a) for a in args])
    got = _vals(out)
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        if isinstance(e, bool):
            assert g is e, (name, i, got)
        else:
            assert _same_float(g, e), (name, i, got, expected)


def test_clip_nan_and_bounds(backend):
    x = _t([NAN, -5.0, 0.5, 5.0], "float32")
    assert _vals(vtl.clip(x, -1.0, 1.0))[1:] == [-1.0, 0.5, 1.0]
    assert math.isnan(_vals(vtl.clip(x, -1.0, 1.0))[0])
    out = vtl.clip(_t([0.0, 0.0], "float32"), _t([NAN, -1.0], "float32"), 1.0)
    assert math.isnan(_vals(out)[0]) and _vals(out)[1] == 0.0
    i = vtl.asarray(np.array([-100, 0, 100], dtype=np.int8))
    out = vtl.clip(i, -128, 1000)
    assert out.dtype == vtl.int8 and _vals(out) == [-100, 0, 100]
    assert _vals(vtl.clip(i, -5, 5)) == [-5, 0, 5]


def _bits_equal(got, expected) -> None:
    """Equal values with the sign of every zero, nan where NumPy has nan."""
    g, e = to_numpy(got), np.asarray(expected)
    assert g.dtype == e.dtype and g.shape == e.shape
    nan = np.isnan(e)
    np.testing.assert_array_equal(np.isnan(g), nan)
    np.testing.assert_array_equal(g[~nan], e[~nan])
    np.testing.assert_array_equal(np.signbit(g[~nan]), np.signbit(e[~nan]))


def _clip_rule(x, lo, hi):
    """np.clip's rule (its loop for scalar bounds): x replaced by lo where x < lo or lo is
    nan, then by hi where above hi or hi is nan."""
    r = x.copy()
    if lo is not None:
        lo = np.asarray(lo, x.dtype)
        r = np.where((r < lo) | np.isnan(lo), lo, r)
    if hi is not None:
        hi = np.asarray(hi, x.dtype)
        r = np.where((r > hi) | np.isnan(hi), hi, r)
    return r.astype(x.dtype)


CLIP_VALUES = [-5.0, -0.0, 0.0, 5.0, NAN, -INF, INF]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_clip_keeps_signed_zeros_as_numpy(backend, dtype):
    """clip(-5, -0.0, 0.0) is -0.0 as np.clip gives it (a max/min of two zeros may pick
    either); the same for array bounds (every combination of values, broadcast), one
    bound, nan bounds and min > max."""
    if dtype not in supported_dtypes(backend):
        pytest.skip(f"{backend} lacks {dtype}")
    dtype = supported_dtypes(backend)[dtype]
    v = np.array(CLIP_VALUES, dtype=dtype)
    wide = v.astype(np.float32) if dtype.itemsize == 2 else v  # NumPy: no bfloat16 clip
    for lo in (-0.0, 0.0, -1.0, NAN, None):
        for hi in (-0.0, 0.0, 1.0, NAN, None):
            expected = _clip_rule(v, lo, hi)
            if lo is not None and hi is not None:  # the rule is NumPy's for scalar bounds
                _bits_equal(expected, _quiet(np.clip, wide, lo, hi).astype(dtype))
            _bits_equal(vtl.clip(vtl.asarray(v), lo, hi), expected)
    n = len(v)
    x = np.repeat(v, n * n).reshape(n, n, n)
    lo = np.broadcast_to(v.reshape(1, n, 1), x.shape)
    hi = v.reshape(n, 1)  # broadcast against (n, n, n)
    expected = _clip_rule(x, lo, hi)
    _bits_equal(vtl.clip(vtl.asarray(x), vtl.asarray(np.ascontiguousarray(lo)),
                         vtl.asarray(hi)), expected)
    _bits_equal(vtl.clip(vtl.asarray(x), min=vtl.asarray(np.ascontiguousarray(lo))),
                _clip_rule(x, lo, None))
    _bits_equal(vtl.clip(vtl.asarray(x), max=vtl.asarray(hi)), _clip_rule(x, None, hi))
    xt = vtl.asarray(np.array([-5.0, -0.0, 0.0, 5.0], dtype=dtype))
    neg, pos = vtl.asarray(np.full(4, -0.0, dtype)), vtl.asarray(np.zeros(4, dtype))
    _bits_equal(vtl.clip(xt, neg, pos), np.array([-0.0, -0.0, 0.0, 0.0], dtype))


@pytest.mark.parametrize("name", ["sinh", "tanh", "asinh", "atanh", "expm1", "log1p", "sin",
                                  "tan", "asin", "atan", "sqrt", "trunc", "round"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_odd_functions_keep_the_sign_of_zero(backend, name, dtype):
    """f(-0.0) is -0.0 (sinh was +0.0 in float16/float32 on wgpu), f(nan) nan."""
    if dtype not in supported_dtypes(backend):
        pytest.skip(f"{backend} lacks {dtype}")
    dtype = supported_dtypes(backend)[dtype]
    x = np.array([-0.0, 0.0, NAN], dtype=dtype)
    _bits_equal(getattr(vtl, name)(vtl.asarray(x)), np.array([-0.0, 0.0, NAN], dtype=dtype))


def _subnormals(dtype) -> np.ndarray:
    """Positive subnormals of ``dtype``: the smallest few, a spread over every binade, the
    largest."""
    info = np.finfo(dtype)
    bits = {np.dtype("float16"): np.uint16, np.dtype("float32"): np.uint32}[np.dtype(dtype)]
    top = int(np.asarray(info.smallest_normal, dtype).view(bits))
    rng = np.random.default_rng(7)
    m = [1, 2, 3, 5, top - 1] + [1 << k for k in range(top.bit_length() - 1)]
    m += list(rng.integers(1, top, 64))
    return np.array(sorted(set(m)), dtype=bits).view(dtype)


@pytest.mark.parametrize("name", ["log", "log2", "log10", "log1p"])
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_logs_of_subnormals_match_numpy(backend, name, dtype):
    """float32 log(1e-45) is -103.28 and log2 of it -149: a driver that flushes subnormal
    operands gave log(2**-126) for each; negative subnormals give nan, log1p(x) is x."""
    if dtype not in supported_dtypes(backend):
        pytest.skip(f"{backend} lacks {dtype}")
    f = getattr(vtl, name)
    sub = _subnormals(dtype)
    x = np.concatenate([sub, -sub[:4], np.array([0.0, -0.0, 1.0], dtype)])
    expected = _quiet(getattr(np, name), x)
    rtol = 3e-7 if dtype == "float32" else 1e-3  # two or three units in the last place
    assert_close(_quiet(f, vtl.asarray(x)), expected, rtol=rtol, atol=0)
    if name == "log1p":  # exactly x (correctly rounded)
        _bits_equal(f(vtl.asarray(sub)), sub)
    if name == "log2":  # exact for powers of two: 2**-149 ... 2**-127 in float32
        info = np.finfo(dtype)
        k = np.arange(info.minexp - info.nmant, info.minexp)
        _bits_equal(f(vtl.asarray(np.ldexp(np.ones(k.size, dtype), k))), k.astype(dtype))


def test_integer_semantics(backend):
    a = vtl.asarray(np.array([-7, 7, -7, 7], dtype=np.int32))
    b = vtl.asarray(np.array([2, -2, -2, 2], dtype=np.int32))
    assert _vals(vtl.floor_divide(a, b)) == [-4, -4, 3, 3]
    assert _vals(vtl.remainder(a, b)) == [1, -1, -1, 1]
    assert vtl.floor_divide(a, b).dtype == vtl.int32
    assert _vals(vtl.bitwise_right_shift(a, 1)) == [-4, 3, -4, 3]
    assert _vals(vtl.abs(a)) == [7, 7, 7, 7]
    u = vtl.asarray(np.array([0, 255], dtype=np.uint8))
    assert _vals(vtl.bitwise_invert(u)) == [255, 0]
    assert _vals(vtl.add(u, 1)) == [1, 0]  # wraps around
    assert vtl.ceil(a).dtype == vtl.int32 and _vals(vtl.round(a)) == _vals(a)
    for f in (vtl.ceil, vtl.floor, vtl.trunc, vtl.round, vtl.real, vtl.positive):
        out = f(a)
        out[0] = 100  # results never alias the input
        assert _vals(a)[0] == -7


def test_complex_results(backend):
    if "complex64" not in supported_dtypes(backend):
        pytest.skip(f"{backend} lacks complex64")
    z = vtl.asarray(np.array([3 + 4j, 0j, -1 - 1j], dtype=np.complex64))
    assert vtl.abs(z).dtype == vtl.float32
    assert_close(vtl.abs(z), np.array([5, 0, np.sqrt(2)], dtype=np.float32))
    with np.errstate(all="ignore"):  # NumPy's sign divides 0 by 0 before masking
        sz = vtl.sign(z)
    assert_close(sz, np.array([0.6 + 0.8j, 0, (-1 - 1j) / np.sqrt(2)],
                                       dtype=np.complex64))
    assert_close(vtl.real(z), np.array([3, 0, -1], dtype=np.float32))
    assert_close(vtl.imag(z), np.array([4, 0, -1], dtype=np.float32))
    assert_close(vtl.conj(z), np.array([3 - 4j, 0, -1 + 1j], dtype=np.complex64))
    assert_close(vtl.round(z * 0.5), np.array([2 + 2j, 0, -0.0 - 0.0j], dtype=np.complex64))


# -- errors -------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, dtype", [
    ("bitwise_and", "float32"), ("bitwise_or", "complex64"), ("bitwise_xor", "float64"),
    ("bitwise_left_shift", "bool"), ("bitwise_right_shift", "float32"),
    ("bitwise_invert", "float32"), ("logical_and", "int32"), ("logical_not", "float32"),
    ("sin", "int32"), ("exp", "bool"), ("sqrt", "int64"), ("atan2", "complex64"),
    ("hypot", "int32"), ("logaddexp", "complex64"), ("copysign", "int16"),
    ("nextafter", "int32"), ("signbit", "int32"), ("imag", "float32"), ("floor", "complex64"),
    ("ceil", "bool"), ("clip", "complex64"), ("maximum", "complex64"), ("less", "complex64"),
    ("remainder", "complex64"), ("floor_divide", "bool"), ("add", "bool"),
    ("negative", "bool"), ("abs", "bool"), ("pow", "bool"), ("round", "bool"),
])
def test_dtype_errors(backend, name, dtype):
    if dtype not in supported_dtypes(backend):
        pytest.skip(f"{backend} lacks {dtype}")
    x = vtl.ones(3, dtype=dtype)
    f = getattr(vtl, name)
    args = (x,) if name in UNARY or name == "clip" else (x, x)
    with pytest.raises(TypeError, match=rf"{name}\(\).*{dtype}"):
        f(*args)


def test_clip_bound_errors(backend):
    x = vtl.asarray([1.0, 2.0])
    i = vtl.asarray([1, 2])
    with pytest.raises(TypeError, match="clip"):
        vtl.clip(i, 0.5, None)
    with pytest.raises(TypeError, match="clip"):
        vtl.clip(x, i, None)
    with pytest.raises(TypeError, match="clip"):
        vtl.clip(x, [0.0], None)
    with pytest.raises(TypeError, match="clip"):
        vtl.clip(x, None, True)


def test_argument_errors(backend):
    x = vtl.asarray([1.0, 2.0])
    with pytest.raises(TypeError, match=r"sin\(\) expected a vtl.Tensor"):
        vtl.sin([1.0, 2.0])
    with pytest.raises(TypeError, match=r"add\(\) needs at least one vtl.Tensor"):
        vtl.add(1.0, 2.0)
    with pytest.raises(TypeError, match=r"multiply\(\) cannot combine"):
        vtl.multiply(x, [1.0, 2.0])
    with pytest.raises(TypeError, match=r"pow\(\) cannot combine"):
        vtl.pow(np.ones(2), x)
    with pytest.raises(TypeError, match=r"clip\(\) expected a vtl.Tensor"):
        vtl.clip(1.0, 0.0, 2.0)
    with pytest.raises(ValueError, match="non-negative shift"):
        vtl.bitwise_left_shift(vtl.asarray([1, 2]), -1)
    with pytest.raises(ValueError):
        vtl.add(x, vtl.ones(3))  # shapes do not broadcast


def _on_other_device(t: vtl.Tensor) -> vtl.Tensor:
    """A copy of ``t`` that claims to live on a second device of its backend."""
    u = t.clone()
    u._device = vtl.Device(t.device.backend_name, 1)
    return u


@pytest.mark.parametrize("name", ["add", "atan2", "maximum", "equal", "pow", "hypot"])
def test_mixed_devices_are_value_errors(backend, name):
    x = vtl.asarray([1.0, 2.0])
    with pytest.raises(ValueError, match=rf"{name}\(\).*different devices"):
        getattr(vtl, name)(x, _on_other_device(x))
    with pytest.raises(ValueError, match="different devices"):
        vtl.clip(x, _on_other_device(x), None)


def test_mixed_backends_are_value_errors(backend, other_backends):
    if not other_backends:
        pytest.skip("only one backend available")
    x = vtl.asarray([1.0, 2.0])
    y = vtl.asarray([1.0, 2.0], backend=other_backends[0])
    with pytest.raises(ValueError, match="different devices"):
        vtl.multiply(x, y)
    with pytest.raises(ValueError, match="different devices"):
        _ = x + y


# -- gradients -----------------------------------------------------------------------------
# name: domain where the function is smooth (inputs drawn uniformly from it)
GRAD_UNARY = {
    "abs": (0.2, 3), "acos": (-0.9, 0.9), "acosh": (1.2, 4), "asin": (-0.9, 0.9),
    "asinh": (-3, 3), "atan": (-3, 3), "atanh": (-0.9, 0.9), "conj": (-3, 3),
    "cos": (-3, 3), "cosh": (-3, 3), "exp": (-3, 3), "expm1": (-3, 3), "log": (0.2, 5),
    "log1p": (-0.8, 5), "log2": (0.2, 5), "log10": (0.2, 5), "negative": (-3, 3),
    "positive": (-3, 3), "real": (-3, 3), "reciprocal": (0.3, 3), "sin": (-3, 3),
    "sinh": (-3, 3), "sqrt": (0.2, 5), "square": (-3, 3), "tan": (-1.2, 1.2),
    "tanh": (-3, 3),
}
GRAD_BINARY = {
    "add": ((-3, 3), (-3, 3)), "subtract": ((-3, 3), (-3, 3)),
    "multiply": ((-3, 3), (-3, 3)), "divide": ((-3, 3), (0.5, 3)),
    "atan2": ((-3, 3), (0.3, 3)), "hypot": ((0.3, 3), (-3, -0.3)),
    "logaddexp": ((-5, 5), (-5, 5)), "maximum": ((-3, 3), (-3, 3)),
    "minimum": ((-3, 3), (-3, 3)), "copysign": ((0.3, 3), (-3, 3)),
    "pow": ((0.3, 3), (-2, 2)), "remainder": ((0.1, 3), (0.7, 1.3)),
}
NO_GRAPH = ["ceil", "floor", "trunc", "round", "sign", "signbit", "isnan", "isfinite",
            "isinf", "floor_divide", "nextafter", "equal", "not_equal", "less", "less_equal",
            "greater", "greater_equal"]


def _uniform(rng, dom, shape):
    return rng.uniform(dom[0], dom[1], size=shape)


def test_every_differentiable_function_has_a_grad_check():
    differentiable = set(GRAD_UNARY) | set(GRAD_BINARY) | {"clip", "abs", "imag"}
    assert differentiable | set(NO_GRAPH) >= {
        n for n in SPEC_NAMES if not n.startswith(("bitwise", "logical"))}


@pytest.mark.parametrize("name", sorted(GRAD_UNARY))
def test_unary_grad_finite_differences(name):
    rng = np.random.default_rng(sum(map(ord, name)))
    x = _uniform(rng, GRAD_UNARY[name], (2, 3))
    if name == "abs":
        x *= rng.choice([-1, 1], size=x.shape)
    check_grad(getattr(vtl, name), x)


@pytest.mark.parametrize("name", sorted(GRAD_BINARY))
@pytest.mark.parametrize("shapes", [((2, 3), (2, 3)), ((2, 1, 3), (4, 1)), ((3,), ())])
def test_binary_grad_finite_differences_with_broadcasting(name, shapes):
    rng = np.random.default_rng(7)
    d1, d2 = GRAD_BINARY[name]
    x1, x2 = _uniform(rng, d1, shapes[0]), _uniform(rng, d2, shapes[1])
    if name == "remainder":  # stay away from the jumps of floor(x1 / x2)
        x1 = np.floor(x1 / 1.0) + rng.uniform(0.3, 0.6, size=x1.shape)
        x2 = np.ones_like(x2) * rng.uniform(0.95, 1.05, size=x2.shape)
    check_grad(getattr(vtl, name), x1, x2)


@pytest.mark.parametrize("name", sorted(GRAD_BINARY))
def test_binary_grad_with_scalar_operands(name):
    rng = np.random.default_rng(3)
    d1, d2 = GRAD_BINARY[name]
    f = getattr(vtl, name)
    x1, x2 = _uniform(rng, d1, (2, 3)), _uniform(rng, d2, (2, 3))
    s1, s2 = float(np.mean(d1)) + 0.1, float(np.mean(d2)) + 0.1
    if name == "remainder":
        x1, s2 = np.array([[0.3, 1.4, 2.5], [0.2, 1.2, 2.2]]), 1.0
        s1, x2 = 2.5, np.array([[0.9, 1.1, 0.95], [1.05, 0.97, 1.02]])
    check_grad(lambda a: f(a, s2), x1)
    check_grad(lambda b: f(s1, b), x2)


def test_unary_grad_with_broadcasting_and_scalars():
    x = np.linspace(0.3, 2.0, 6).reshape(3, 2)
    check_grad(lambda a: vtl.sin(a) * vtl.asarray(np.ones((4, 1, 1)), backend="numpy"), x)
    check_grad(lambda a: vtl.sqrt(a) + 2.0, x)
    check_grad(lambda a: 2.0 ** vtl.tanh(a) - 1.0 / vtl.exp(a), x)


def test_abs_grad_sign_and_zero(backend):
    x = vtl.asarray([-2.0, 0.0, 3.0], requires_grad=True)
    vtl.sum(vtl.abs(x)).backward()
    assert _vals(x.grad) == [-1.0, 0.0, 1.0]


def _complex_check(f, z0, seed=0):
    """PyTorch convention: grad of real L w.r.t. z is dL/dRe(z) + 1j * dL/dIm(z)."""
    rng = np.random.default_rng(seed)
    out = to_numpy(f(vtl.asarray(z0, backend="numpy")))
    w = rng.standard_normal(out.shape) + 1j * rng.standard_normal(out.shape)
    w = w.astype(np.complex128) if out.dtype.kind == "c" else w.real

    def loss(z):
        y = f(vtl.asarray(z, backend="numpy"))
        return float(np.sum(np.real(to_numpy(y) * w)))

    eps = 1e-6
    num = np.zeros_like(z0)
    for j in range(z0.size):
        for unit in (1, 1j):
            zp, zm = z0.copy(), z0.copy()
            zp.reshape(-1)[j] += eps * unit
            zm.reshape(-1)[j] -= eps * unit
            num.reshape(-1)[j] += unit * (loss(zp) - loss(zm)) / (2 * eps)
    z = vtl.asarray(z0, backend="numpy", requires_grad=True)
    y = f(z)
    wt = vtl.asarray(w, backend="numpy")
    (g,) = vtl.autograd.grad(vtl.sum(vtl.real(y * wt)), [z])
    np.testing.assert_allclose(to_numpy(g), num, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["abs", "exp", "log", "sqrt", "sin", "tanh", "acos", "atanh",
                                  "acosh", "asinh", "reciprocal", "square", "real", "imag",
                                  "conj", "expm1", "log10", "tan", "cosh"])
def test_complex_grads_finite_differences(name):
    z = np.array([0.6 + 0.3j, -0.4 + 0.7j, 0.5 - 0.2j], dtype=np.complex128)
    _complex_check(getattr(vtl, name), z)


def test_complex_binary_grads_finite_differences():
    z = np.array([0.6 + 0.3j, -0.4 + 0.7j], dtype=np.complex128)
    w = vtl.asarray(np.array([1.1 - 0.5j, 0.3 + 0.9j]), backend="numpy")
    for f in (lambda a: a * w, lambda a: w / a, lambda a: a / w, lambda a: a ** w,
              lambda a: w ** a, lambda a: a ** 3, lambda a: a - w):
        _complex_check(f, z)


def test_pow_at_zero_base_has_no_nan():
    x = vtl.asarray([0.0, 1.0, 2.0], dtype=vtl.float64, requires_grad=True)
    vtl.sum(x ** 2).backward()
    assert _vals(x.grad) == [0.0, 2.0, 4.0]
    x.grad = None
    vtl.sum(x ** 0).backward()
    assert _vals(x.grad) == [0.0, 0.0, 0.0]
    y = vtl.asarray([2.0, 0.0, 1.0], dtype=vtl.float64, requires_grad=True)
    gx, gy = vtl.autograd.grad(vtl.sum(x ** y), [x, y])
    assert _vals(gx) == [0.0, 0.0, 1.0]
    assert _vals(gy) == [0.0, 0.0, pytest.approx(2.0 * math.log(2.0))]
    (gy,) = vtl.autograd.grad(vtl.sum(vtl.pow(0.0, y)), [y])
    assert _vals(gy) == [0.0, 0.0, 0.0]


def test_maximum_minimum_split_ties_evenly(backend):
    a = vtl.asarray([1.0, 2.0, 5.0], requires_grad=True)
    b = vtl.asarray([1.0, 3.0, 4.0], requires_grad=True)
    ga, gb = vtl.autograd.grad(vtl.sum(vtl.maximum(a, b)), [a, b])
    assert _vals(ga) == [0.5, 0.0, 1.0] and _vals(gb) == [0.5, 1.0, 0.0]
    ga, gb = vtl.autograd.grad(vtl.sum(vtl.minimum(a, b)), [a, b])
    assert _vals(ga) == [0.5, 1.0, 0.0] and _vals(gb) == [0.5, 0.0, 1.0]
    (ga,) = vtl.autograd.grad(vtl.sum(vtl.maximum(a, 2.0)), [a])  # relu-like with a tie
    assert _vals(ga) == [0.0, 0.5, 1.0]


def test_clip_grads(backend):
    x = vtl.asarray([-2.0, -1.0, 0.0, 1.0, 2.0], requires_grad=True)
    (g,) = vtl.autograd.grad(vtl.sum(vtl.clip(x, -1.0, 1.0)), [x])
    assert _vals(g) == [0.0, 1.0, 1.0, 1.0, 0.0]  # bounds are inside (as PyTorch)
    lo = vtl.asarray([-1.5], requires_grad=True)
    hi = vtl.asarray([[0.5], [3.0]], requires_grad=True)
    gx, glo, ghi = vtl.autograd.grad(vtl.sum(vtl.clip(x, lo, hi)), [x, lo, hi])
    assert _vals(gx) == [0.0, 2.0, 2.0, 1.0, 1.0]
    assert _vals(glo) == [2.0]
    assert _vals(ghi) == [[2.0], [0.0]]
    (gx,) = vtl.autograd.grad(vtl.sum(vtl.clip(x)), [x])
    assert _vals(gx) == [1.0] * 5
    # min > max: the result is max everywhere, so only max gets a gradient
    lo = vtl.asarray([1.5], requires_grad=True)
    hi = vtl.asarray([0.5], requires_grad=True)
    out = vtl.clip(x, lo, hi)
    assert _vals(out) == [0.5] * 5
    gx, glo, ghi = vtl.autograd.grad(vtl.sum(out), [x, lo, hi])
    assert _vals(gx) == [0.0] * 5 and _vals(glo) == [0.0] and _vals(ghi) == [5.0]


def test_clip_grad_finite_differences():
    rng = np.random.default_rng(5)
    x = rng.uniform(-3, 3, size=(2, 4))
    lo, hi = rng.uniform(-2, -0.5, size=(4,)), rng.uniform(0.5, 2, size=(2, 1))
    check_grad(lambda a, b, c: vtl.clip(a, b, c), x, lo, hi)
    check_grad(lambda a, c: vtl.clip(a, max=c), x, hi)
    check_grad(lambda a: vtl.clip(a, -1.0, 1.0), x)


def test_copysign_and_remainder_grads(backend):
    x = vtl.asarray([-2.0, 3.0, 0.0], requires_grad=True)
    y = vtl.asarray([1.0, -1.0, -1.0], requires_grad=True)
    gx, gy = vtl.autograd.grad(vtl.sum(vtl.copysign(x, y)), [x, y])
    assert _vals(gx) == [-1.0, -1.0, 0.0] and _vals(gy) == [0.0, 0.0, 0.0]
    a = vtl.asarray([7.5, -7.5], requires_grad=True)
    b = vtl.asarray([2.0, 2.0], requires_grad=True)
    ga, gb = vtl.autograd.grad(vtl.sum(vtl.remainder(a, b)), [a, b])
    assert _vals(ga) == [1.0, 1.0] and _vals(gb) == [-3.0, 4.0]


def test_hypot_atan2_grads_at_origin_are_zero(backend):
    a = vtl.asarray([0.0, 3.0], requires_grad=True)
    b = vtl.asarray([0.0, 4.0], requires_grad=True)
    ga, gb = vtl.autograd.grad(vtl.sum(vtl.hypot(a, b)), [a, b])
    assert _vals(ga) == [0.0, pytest.approx(0.6)] and _vals(gb) == [0.0, pytest.approx(0.8)]
    ga, gb = vtl.autograd.grad(vtl.sum(vtl.atan2(a, b)), [a, b])
    assert _vals(ga)[0] == 0.0 and _vals(gb)[0] == 0.0


def test_logaddexp_grad_is_stable(backend):
    a = vtl.asarray([1000.0, -1000.0, 0.0], requires_grad=True)
    b = vtl.asarray([0.0, 0.0, 0.0], requires_grad=True)
    ga, gb = vtl.autograd.grad(vtl.sum(vtl.logaddexp(a, b)), [a, b])
    assert _vals(ga) == [1.0, 0.0, 0.5] and _vals(gb) == [0.0, 1.0, 0.5]


@pytest.mark.parametrize("name", NO_GRAPH)
def test_piecewise_constant_functions_record_no_graph(backend, name):
    x = vtl.asarray([0.5, -1.5], requires_grad=True)
    out = getattr(vtl, name)(x) if name in UNARY else getattr(vtl, name)(x, x)
    assert not out.requires_grad and out.grad_fn is None


GRAD_RULES = sorted(set(GRAD_UNARY) | set(GRAD_BINARY))


@pytest.mark.parametrize("name", GRAD_RULES)
def test_grads_on_backend_match_numpy(backend, name):
    rng = np.random.default_rng(11)
    f = getattr(vtl, name)
    if name in GRAD_UNARY:
        x = _uniform(rng, GRAD_UNARY[name], (2, 3))
        check_grad_matches_numpy(f, backend, x)
    else:
        d1, d2 = GRAD_BINARY[name]
        x1, x2 = _uniform(rng, d1, (2, 3)), _uniform(rng, d2, (3,))
        if name == "remainder":
            x1, x2 = np.array([[0.3, 1.4, 2.5], [0.2, 1.2, 2.2]]), np.array([0.9, 1.1, 0.95])
        check_grad_matches_numpy(f, backend, x1, x2)


def test_clip_and_abs_grads_on_backend_match_numpy(backend):
    rng = np.random.default_rng(2)
    x = rng.uniform(-3, 3, size=(2, 4))
    lo, hi = rng.uniform(-2, -0.5, size=(4,)), rng.uniform(0.5, 2, size=(2, 1))
    check_grad_matches_numpy(lambda a, b, c: vtl.clip(a, b, c), backend, x, lo, hi)
    check_grad_matches_numpy(vtl.abs, backend, x)


# -- second order -----------------------------------------------------------------------------
def _second(f, x0: float) -> float:
    x = vtl.asarray(x0, dtype=vtl.float64, backend="numpy")
    return vtl.grad(vtl.grad(f))(x).item()


def test_second_order_closed_forms():
    t = math.tanh(0.7)
    assert _second(vtl.tanh, 0.7) == pytest.approx(-2 * t * (1 - t * t))
    assert _second(vtl.sin, 0.7) == pytest.approx(-math.sin(0.7))
    assert _second(lambda x: x ** 3, 0.7) == pytest.approx(6 * 0.7)
    assert _second(lambda x: vtl.pow(2.5, x), 0.7) == pytest.approx(2.5 ** 0.7 *
                                                                    math.log(2.5) ** 2)
    s = 1 / (1 + math.exp(-(0.7 - 0.2)))
    assert _second(lambda x: vtl.logaddexp(x, vtl.asarray(0.2, dtype=vtl.float64)),
                   0.7) == pytest.approx(s * (1 - s))


@pytest.mark.parametrize("f", [
    lambda x, y: vtl.tanh(x) * y, lambda x, y: vtl.sin(x * y), lambda x, y: vtl.pow(x, y),
    lambda x, y: vtl.logaddexp(x, y), lambda x, y: vtl.atan2(x, y), lambda x, y: vtl.hypot(x, y),
    lambda x, y: vtl.sqrt(x) / y, lambda x, y: vtl.maximum(x, y) * x,
])
def test_hessian_vector_products_finite_differences(f):
    rng = np.random.default_rng(4)
    x, y = rng.uniform(0.5, 2, size=3), rng.uniform(0.5, 2, size=3)

    def first(a, b):  # the gradient of sum(f), differentiated once more by check_grad
        ga, gb = vtl.grad(lambda u, v: vtl.sum(f(u, v)), argnums=(0, 1))(a, b)
        return ga + 2.0 * gb

    check_grad(first, x, y)


# -- operators -----------------------------------------------------------------------------------
ARITH_OPS = [
    (operator.add, "add"), (operator.sub, "subtract"), (operator.mul, "multiply"),
    (operator.truediv, "divide"), (operator.floordiv, "floor_divide"),
    (operator.mod, "remainder"), (operator.pow, "pow"),
]
INT_OPS = [
    (operator.and_, "bitwise_and"), (operator.or_, "bitwise_or"),
    (operator.xor, "bitwise_xor"), (operator.lshift, "bitwise_left_shift"),
    (operator.rshift, "bitwise_right_shift"),
]
CMP_OPS = [
    (operator.eq, "equal"), (operator.ne, "not_equal"), (operator.lt, "less"),
    (operator.le, "less_equal"), (operator.gt, "greater"), (operator.ge, "greater_equal"),
]
INPLACE = {"add": operator.iadd, "subtract": operator.isub, "multiply": operator.imul,
           "divide": operator.itruediv, "floor_divide": operator.ifloordiv,
           "remainder": operator.imod, "pow": operator.ipow, "bitwise_and": operator.iand,
           "bitwise_or": operator.ior, "bitwise_xor": operator.ixor,
           "bitwise_left_shift": operator.ilshift, "bitwise_right_shift": operator.irshift}


@pytest.mark.parametrize("op, name", ARITH_OPS + INT_OPS + CMP_OPS)
def test_operators_equal_functions(backend, op, name):
    if (op, name) in INT_OPS:
        a = vtl.asarray(np.array([[5, 12, 7]], dtype=np.int32))
        b = vtl.asarray(np.array([[1], [2]], dtype=np.int32))
        s = 3
    else:
        a = vtl.asarray(np.array([[1.5, 2.75, 3.25]], dtype=np.float32))
        b = vtl.asarray(np.array([[0.5], [2.0]], dtype=np.float32))
        s = 2.0 if name != "pow" else 2
    f = getattr(vtl, name)
    assert_close(op(a, b), to_numpy(f(a, b)))
    assert_close(op(a, s), to_numpy(f(a, s)))
    assert_close(op(s, a), to_numpy(f(s, a)))  # reflected form
    if name in INPLACE:
        c = vtl.asarray(a, copy=True)
        before = c
        c = INPLACE[name](c, b[:1])
        assert c is before
        assert_close(c, to_numpy(f(a, b[:1])))


def test_unary_operators(backend):
    a = vtl.asarray(np.array([1.5, -2.0], dtype=np.float32))
    assert_close(-a, np.array([-1.5, 2.0], dtype=np.float32))
    assert_close(+a, to_numpy(a))
    assert_close(abs(a), np.array([1.5, 2.0], dtype=np.float32))
    i = vtl.asarray(np.array([0, 5], dtype=np.int16))
    assert_close(~i, np.array([-1, -6], dtype=np.int16))
    assert_close(~vtl.asarray([True, False]), np.array([False, True]))


def test_matmul_operator(backend):
    a = vtl.asarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    b = vtl.asarray(np.ones((3, 2), dtype=np.float32))
    assert_close(a @ b, to_numpy(a) @ to_numpy(b))
    c = vtl.asarray(np.ones((2, 2), dtype=np.float32))
    c @= vtl.asarray(np.eye(2, dtype=np.float32))
    assert_close(c, np.ones((2, 2), dtype=np.float32))


def test_operators_with_numpy_scalars_and_errors(backend):
    a = vtl.asarray(np.array([1.0, 2.0], dtype=np.float32))
    assert_close(a * np.float32(2), np.array([2.0, 4.0], dtype=np.float32))
    # a NumPy scalar promotes as a 0-d array of its dtype, as in NumPy
    assert_close(np.float64(1) + a, np.float64(1) + np.array([1.0, 2.0], dtype=np.float32))
    with pytest.raises(TypeError):
        _ = a + "x"
    with pytest.raises(TypeError):
        _ = a & a
    with pytest.raises(TypeError):
        a += vtl.asarray([1 + 1j, 1j])  # would change the dtype
    with pytest.raises(ValueError):
        a *= vtl.ones((3, 2))  # would change the shape


def test_inplace_operator_keeps_graph(backend):
    x = vtl.asarray([1.0, 2.0], requires_grad=True)
    y = x * 1.0
    y *= x
    y += 1.0
    (g,) = vtl.autograd.grad(vtl.sum(y), [x])
    assert _vals(g) == [2.0, 4.0]
    with pytest.raises(RuntimeError, match="leaf"):
        x += 1.0
