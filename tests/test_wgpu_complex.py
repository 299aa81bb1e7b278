"""Complex dtypes of the wgpu library (complex64; complex128 where the adapter has
``shader-f64``) against NumPy as the oracle, and the standard's special cases."""

from __future__ import annotations

import math
import os
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
xp = pytest.importorskip("vtl.backends.wgpu")
if not xp.is_available():
    pytest.skip("no WebGPU adapter", allow_module_level=True)

HAS_F64 = "float64" in xp.__array_namespace_info__().dtypes()
CDTYPES = ["complex64"] + (["complex128"] if HAS_F64 else [])
RNG = np.random.default_rng(7)
inf, nan, pi = math.inf, math.nan, math.pi
NP_NAME = {"asin": "arcsin", "acos": "arccos", "atan": "arctan", "asinh": "arcsinh",
           "acosh": "arccosh", "atanh": "arctanh", "conj": "conjugate", "pow": "power"}


def host(a):
    return xp.to_numpy(a) if hasattr(xp, "to_numpy") else np.asarray(a)


def cdata(shape, dtype, scale=3.0):
    z = RNG.uniform(-scale, scale, shape) + 1j * RNG.uniform(-scale, scale, shape)
    return z.astype(dtype)


def rtol(dtype) -> float:
    return 1e-5 if np.dtype(dtype) in (np.complex64, np.float32) else 1e-12


def check(got, expect, tol=None):
    g = host(got)
    e = np.asarray(expect)
    assert g.shape == e.shape, (g.shape, e.shape)
    assert g.dtype == e.dtype, (g.dtype, e.dtype)
    if e.dtype.kind in "fc":
        t = rtol(e.dtype) if tol is None else tol
        np.testing.assert_allclose(g, e, rtol=t, atol=t, equal_nan=True)
    else:
        np.testing.assert_array_equal(g, e)


# -- dtypes -------------------------------------------------------------------------------
def test_info_reports_complex_dtypes():
    info = xp.__array_namespace_info__()
    dts = info.dtypes(kind="complex floating")
    assert set(dts) == set(CDTYPES)
    assert info.default_dtypes()["complex floating"] == np.complex64
    assert "complex64" in xp.runtime_info()["dtypes"]
    assert xp.isdtype(xp.complex64, "complex floating")
    assert xp.result_type(xp.float32, xp.complex64) == np.complex64
    if HAS_F64:
        assert xp.result_type(xp.float64, xp.complex64) == np.complex128


# -- creation, astype, transfer ------------------------------------------------------------
@pytest.mark.parametrize("dtype", CDTYPES)
def test_creation(dtype):
    h = cdata((3, 4), dtype)
    check(xp.asarray(h), h)
    check(xp.asarray(h.tolist(), dtype=dtype), h)
    check(xp.zeros((2, 3), dtype=dtype), np.zeros((2, 3), dtype))
    check(xp.ones((2,), dtype=dtype), np.ones(2, dtype))
    check(xp.full((2, 2), 1.5 - 2j, dtype=dtype), np.full((2, 2), 1.5 - 2j, dtype))
    check(xp.eye(3, 4, k=1, dtype=dtype), np.eye(3, 4, k=1, dtype=dtype))
    check(xp.linspace(1j, 2 - 1j, 5, dtype=dtype), np.linspace(1j, 2 - 1j, 5).astype(dtype))
    check(xp.linspace(0, 3 + 3j, 4, endpoint=False, dtype=dtype),
          np.linspace(0, 3 + 3j, 4, endpoint=False).astype(dtype))
    x = xp.asarray(h)
    check(xp.zeros_like(x), np.zeros_like(h))
    check(xp.ones_like(x), np.ones_like(h))
    check(xp.full_like(x, 2j), np.full_like(h, 2j))
    assert xp.empty_like(x).dtype == np.dtype(dtype)
    assert xp.empty((2,), dtype=dtype).shape == (2,)
    assert complex(x[1, 2]) == complex(h[1, 2])
    assert x[0, 0].item() == complex(h[0, 0])


def test_default_complex_dtype():
    assert xp.asarray([1j, 2]).dtype == np.complex64
    assert xp.asarray(1 + 1j).dtype == np.complex64
    assert xp.full((2,), 1j).dtype == np.complex64
    assert xp.linspace(0, 1j, 3).dtype == np.complex64
    with pytest.raises(TypeError, match="complex"):
        xp.linspace(0, 1j, 3, dtype=xp.float32)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_astype(dtype):
    rdt = np.float32 if dtype == "complex64" else np.float64
    r = RNG.standard_normal((2, 3)).astype(rdt)
    check(xp.astype(xp.asarray(r), dtype), r.astype(dtype))
    i = np.array([-3, 0, 7], np.int32)
    check(xp.astype(xp.asarray(i), dtype), i.astype(dtype))
    b = np.array([True, False])
    check(xp.astype(xp.asarray(b), dtype), b.astype(dtype))
    z = np.array([0j, 1j, 2 + 0j, complex(0, nan), -0.0 + 0j], dtype)
    check(xp.astype(xp.asarray(z), xp.bool), z.astype(bool))
    for other in CDTYPES:
        check(xp.astype(xp.asarray(z), other), z.astype(other))
    for bad in (xp.float32, xp.int32, xp.uint8):
        with pytest.raises(TypeError, match="real"):
            xp.astype(xp.asarray(z), bad)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_views_and_manipulation(dtype):
    h = cdata((3, 4, 5), dtype)
    x = xp.asarray(h)
    check(x[::2, 1, ::-2], h[::2, 1, ::-2])
    check(xp.permute_dims(x, (2, 0, 1)), np.transpose(h, (2, 0, 1)))
    check(xp.reshape(x[:, 1:3], (6, 5)), h[:, 1:3].reshape(6, 5))
    check(xp.concat([x, x[:1]], axis=0), np.concatenate([h, h[:1]], 0))
    check(xp.stack([x[0], x[1]], axis=1), np.stack([h[0], h[1]], 1))
    check(xp.flip(x, axis=(0, 2)), np.flip(h, (0, 2)))
    check(xp.roll(x, -2, axis=2), np.roll(h, -2, axis=2))
    check(xp.tile(x[0], (2, 1)), np.tile(h[0], (2, 1)))
    check(xp.repeat(x, 2, axis=1), np.repeat(h, 2, axis=1))
    check(xp.moveaxis(x, 0, -1), np.moveaxis(h, 0, -1))
    check(xp.broadcast_to(x[:, :1], (3, 4, 5)), np.broadcast_to(h[:, :1], (3, 4, 5)))
    check(xp.take(x, xp.asarray([4, 0, 2]), axis=2), np.take(h, [4, 0, 2], axis=2))
    check(xp.tril(x[0]), np.tril(h[0]))
    mask = h.real > 0
    check(x[xp.asarray(mask)], h[mask])
    c = xp.asarray(h)
    e = h.copy()
    c[1, :, 2] = 3 - 1j
    e[1, :, 2] = 3 - 1j
    c[0] = xp.asarray(h[2])
    e[0] = h[2]
    c[xp.asarray(mask)] = 0.5
    e[mask] = 0.5
    check(c, e)
    check(xp.where(xp.asarray(mask), x, 2j), np.where(mask, h, 2j).astype(dtype))
    check(xp.where(xp.asarray(mask), x, xp.asarray(h[::-1].copy())), np.where(mask, h, h[::-1]))


# -- elementwise ---------------------------------------------------------------------------
UNARY = ["sqrt", "exp", "expm1", "log", "log1p", "log2", "log10", "sin", "cos", "tan", "sinh",
         "cosh", "tanh", "asin", "acos", "atan", "asinh", "acosh", "atanh", "sign", "square",
         "reciprocal", "abs", "conj", "negative", "positive", "real", "imag", "round",
         "isnan", "isinf", "isfinite"]


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("name", UNARY)
def test_unary_matches_numpy(name, dtype):
    # magnitudes from 1e-4 to 30: the careful forms (log1p near 0, hypot) are exercised
    mag = 10.0 ** RNG.uniform(-4, 1.5, 64)
    h = (mag * np.exp(1j * RNG.uniform(-pi, pi, 64))).astype(dtype).reshape(8, 8)
    got = getattr(xp, name)(xp.asarray(h))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expect = getattr(np, NP_NAME.get(name, name))(h)
    check(got, expect, tol=5e-6 if dtype == "complex64" else 1e-11)


def test_unary_on_strided_views():
    h = cdata((6, 5), "complex64")
    x = xp.asarray(h)
    check(xp.exp(x[::2, ::-1]), np.exp(h[::2, ::-1]))
    check(xp.real(x.mT), np.ascontiguousarray(h.T.real))
    check(xp.imag(x[1:, 2]), h[1:, 2].imag)


SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, inf, -inf, nan, 1e-3, 50.0]
GRID = np.array([complex(a, b) for a in SPECIAL for b in SPECIAL])


def _same(got: np.ndarray, exp: np.ndarray, tol: float) -> np.ndarray:
    """Elementwise match: NaN with NaN, infinities exactly, zeros exactly with their sign
    (some drivers lose signs of zeros that a CPU keeps), others to ``tol``."""
    if np.iscomplexobj(exp):
        return _same(got.real, exp.real, tol) & _same(got.imag, exp.imag, tol)
    got, exp = got.astype(float), exp.astype(float)
    with np.errstate(invalid="ignore"):
        close = (np.abs(got - exp) <= tol * np.abs(exp) + tol) & (exp != 0)
    zero = (got == 0) & (exp == 0) & (np.signbit(got) == np.signbit(exp))
    return (np.isnan(got) & np.isnan(exp)) | ((got == exp) & (exp != 0)) | zero | close


# Where NumPy departs from C99 / the standard (its expm1 turns infinite cases into NaN;
# its sign ignores a NaN next to an infinity; its reciprocal of 0 is nan+nanj; its
# tanh(+-inf + iy) has the zero imaginary part signed as sin(2y), the standard's as y)
def _numpy_departs(name: str, z: complex) -> bool:
    if name == "expm1":  # the standard: +-inf cases and nan + 0j -> nan + 0j; -0 -> +0
        return (math.isinf(z.real) or (math.isnan(z.real) and z.imag == 0)
                or (z.real == 0 and z.imag == 0))
    if name == "tanh":
        return math.isinf(z.real) and math.isfinite(z.imag)
    if name == "tan":
        return math.isinf(z.imag) and math.isfinite(z.real)
    if name == "sign":
        return math.isnan(z.real) or math.isnan(z.imag)
    return name == "reciprocal" and z == 0


def _zero_sign_unspecified(name: str, z: complex, got: complex) -> bool:
    """The standard's exp(-inf + i*(inf or nan)) is +-0 +-0j with unspecified signs."""
    return (name == "exp" and z.real == -inf and not math.isfinite(z.imag)
            and got == 0)


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("name", UNARY)
def test_special_values_match_numpy(name, dtype):
    h = GRID.astype(dtype)
    got = host(getattr(xp, name)(xp.asarray(h)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expect = getattr(np, NP_NAME.get(name, name))(h)
    ok = _same(got, expect, 1e-5 if dtype == "complex64" else 1e-12)
    bad = [(h[i], got[i], expect[i]) for i in np.nonzero(~ok)[0]
           if not _numpy_departs(name, complex(h[i]))
           and not _zero_sign_unspecified(name, complex(h[i]), complex(got[i]))]
    assert not bad, bad[:5]


def _is(v: float, want: float) -> bool:
    """Exact match including the sign of zero and of infinity; NaN matches NaN."""
    if math.isnan(want):
        return math.isnan(v)
    return v == want and math.copysign(1, v) == math.copysign(1, want)


# (function, input, expected) from the standard's special-case tables
STANDARD = [
    ("log", complex(-0.0, 0.0), complex(-inf, pi)),
    ("log", complex(0.0, 0.0), complex(-inf, 0.0)),
    ("log", complex(-inf, inf), complex(inf, 3 * pi / 4)),
    ("log1p", complex(-1.0, 0.0), complex(-inf, 0.0)),
    ("sqrt", complex(-0.0, 0.0), complex(0.0, 0.0)),
    ("sqrt", complex(inf, 2.0), complex(inf, 0.0)),
    ("sqrt", complex(2.0, inf), complex(inf, inf)),
    ("exp", complex(-inf, inf), complex(0.0, 0.0)),
    ("exp", complex(nan, 0.0), complex(nan, 0.0)),
    ("expm1", complex(-inf, nan), complex(-1.0, 0.0)),
    ("expm1", complex(inf, 0.0), complex(inf, 0.0)),
    ("expm1", complex(-0.0, 0.0), complex(0.0, 0.0)),
    ("tanh", complex(inf, 2.0), complex(1.0, 0.0)),
    ("tanh", complex(0.0, nan), complex(0.0, nan)),
    ("tanh", complex(nan, 0.0), complex(nan, 0.0)),
    ("sinh", complex(0.0, 0.0), complex(0.0, 0.0)),
    ("sinh", complex(inf, 0.0), complex(inf, 0.0)),
    ("cosh", complex(0.0, 0.0), complex(1.0, 0.0)),
    ("cosh", complex(nan, 0.0), complex(nan, 0.0)),
    ("atanh", complex(1.0, 0.0), complex(inf, 0.0)),
    ("atanh", complex(0.0, nan), complex(0.0, nan)),
    ("atanh", complex(inf, 2.0), complex(0.0, pi / 2)),
    ("atanh", complex(inf, nan), complex(0.0, nan)),
    ("asinh", complex(inf, inf), complex(inf, pi / 4)),
    ("asinh", complex(nan, 0.0), complex(nan, 0.0)),
    ("acosh", complex(0.0, 0.0), complex(0.0, pi / 2)),
    ("acosh", complex(-inf, 2.0), complex(inf, pi)),
    ("acos", complex(inf, inf), complex(pi / 4, -inf)),
    ("acos", complex(0.0, nan), complex(pi / 2, nan)),
    ("sign", complex(-0.0, 0.0), complex(0.0, 0.0)),
    ("sign", complex(nan, 1.0), complex(nan, nan)),
]


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize(("name", "z", "want"), STANDARD)
def test_standard_special_cases(name, z, want, dtype):
    got = complex(host(getattr(xp, name)(xp.asarray(np.array([z], dtype))))[0])
    if _zero_sign_unspecified(name, z, got):
        return
    tol = 1e-6
    for g, w in ((got.real, want.real), (got.imag, want.imag)):
        if math.isfinite(w) and w != 0:
            assert abs(g - w) <= tol * abs(w), (name, z, got, want)
        else:
            assert _is(g, w), (name, z, got, want)


# -- accuracy of the real functions inside the complex ones ---------------------------------
# (WGSL only requires exp to 3 + 2|x| ulp and sin/cos to an absolute 2^-11; drivers that use
# such approximations give exp(50) 1e-5 off, so the complex library has its own)
def _ulps(got: np.ndarray, exact: np.ndarray, rdt) -> np.ndarray:
    """|got - exact| in units of the last place of ``exact`` rounded to ``rdt``."""
    return np.abs(got.astype(np.float64) - exact) / np.spacing(np.abs(exact).astype(rdt))


def test_exp_float32_within_one_ulp():
    x = np.concatenate([np.linspace(-87.0, 88.72, 20001), np.linspace(50.0, 88.72, 4001),
                        RNG.uniform(-20, 20, 2000)]).astype(np.float32)
    got = host(xp.exp(xp.asarray(x.astype(np.complex64))))
    assert np.all(got.imag == 0)
    u = _ulps(got.real, np.exp(x.astype(np.float64)), np.float32)
    assert u.max() <= 1.0, (x[np.argmax(u)], u.max())
    # cosh/sinh near the overflow threshold (the scaled forms exp(|x|) / 2)
    x = np.linspace(-89.4, 89.4, 4001).astype(np.float32)
    for name in ("cosh", "sinh"):
        got = host(getattr(xp, name)(xp.asarray(x.astype(np.complex64)))).real
        u = _ulps(got, getattr(np, name)(x.astype(np.float64)), np.float32)
        assert u.max() <= 2.0, (name, x[np.argmax(u)], u.max())


def test_sin_cos_tan_float32_accuracy():
    """exp(iy) = cos y + i sin y, tan(x + 0i) = tan x: about 1 ulp plus the float32 range
    reduction's absolute error (2^-30) for |y| <= 1e4."""
    y = np.concatenate([np.linspace(-1e4, 1e4, 40001), np.linspace(-10, 10, 4001),
                        [1e-3, -1e-3, 1e-30, 50.0, 2.5, 1e4]]).astype(np.float32)
    y64 = y.astype(np.float64)
    z = host(xp.exp(xp.asarray((1j * y).astype(np.complex64))))
    for got, exact in ((z.real, np.cos(y64)), (z.imag, np.sin(y64))):
        err = np.abs(got - exact) - 2.0 ** -30
        assert np.all(err <= 2 * np.spacing(np.abs(exact).astype(np.float32))), \
            (y[np.argmax(err)], err.max())
    t = host(xp.tan(xp.asarray(y.astype(np.complex64))))
    exact = np.tan(y64)
    err = np.abs(t.real - exact) - 2.0 ** -30 * (1 + exact * exact)
    assert np.all(err <= 4 * np.spacing(np.abs(exact).astype(np.float32))), \
        (y[np.argmax(err)], err.max())


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("name", ["exp", "expm1", "sinh", "cosh", "sin", "cos"])
def test_large_results_accurate(name, dtype):
    """Results near the overflow threshold and large arguments of sin/cos, against NumPy's
    complex128: each part to a few ulp of its own size."""
    big = 709.5 if dtype == "complex128" else 88.5
    h = np.array([50 + 50j, 0.001 + 50j, 50 + 0.001j, -50 + 3j, 20 - 1e3j, 3 + 1e4j,
                  big + 1.2j, big - 0.3j, 1e-3j + big, 1.0 + 1e4j], dtype)
    if name in ("sin", "cos"):
        h = h * 1j  # large imaginary parts there
    got = host(getattr(xp, name)(xp.asarray(h)))
    with np.errstate(over="ignore"):
        exact = getattr(np, name)(h.astype(np.complex128))
    tol = 8e-7 if dtype == "complex64" else 2e-14
    for g, e in ((got.real, exact.real), (got.imag, exact.imag)):
        fin = np.isfinite(e.astype(h.real.dtype))
        assert np.all(np.abs(g - e)[fin] <= tol * np.abs(e)[fin]), (h[fin], g[fin], e[fin])


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide", "pow", "equal",
                                  "not_equal"])
def test_binary_matches_numpy(name, dtype):
    a = cdata((4, 1, 3), dtype)
    b = cdata((5, 3), dtype)
    b[0, 0] = a[0, 0, 0]  # an equal pair
    b[1, 1] = 2.0  # an integer exponent (exact products in pow)
    got = getattr(xp, name)(xp.asarray(a), xp.asarray(b))
    expect = getattr(np, NP_NAME.get(name, name))(a, b)
    check(got, expect, tol=2e-5 if dtype == "complex64" else 1e-11)


def test_binary_mixed_and_scalars():
    a = cdata((3,), "complex64")
    r = RNG.standard_normal(3).astype(np.float32)
    x, y = xp.asarray(a), xp.asarray(r)
    check(x * y, a * r)
    check(y - x, r - a)
    check(x + 2, a + np.complex64(2))
    check(1j * y, (1j * r).astype(np.complex64))
    check(x / (2 - 1j), a / np.complex64(2 - 1j))
    check(2.5 ** x, np.complex64(2.5) ** a, tol=2e-5)
    check(xp.asarray([1, 2], dtype=xp.int32) + 1j, np.array([1 + 1j, 2 + 1j], np.complex64))
    check(x == x, np.ones(3, bool))
    check(x != xp.conj(x), a != np.conj(a))
    if HAS_F64:
        check(xp.asarray(r.astype(np.float64)) * 1j, (r.astype(np.float64) * 1j))
    z = xp.asarray(a)
    z *= 2j
    check(z, a * np.complex64(2j))


def test_complex_division_by_zero_as_numpy():
    a = np.array([1 + 1j, 0j, 1 + 0j], np.complex64)
    b = np.zeros(3, np.complex64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(xp.asarray(a) / xp.asarray(b), a / b)


def test_round_complex():
    h = np.array([1.5 + 2.5j, -0.5 - 1.49j, 2.675 + 0.125j], np.complex64)
    check(xp.round(xp.asarray(h)), np.round(h))
    check(xp.round(xp.asarray(h), decimals=1), np.round(h, 1), tol=1e-6)


@pytest.mark.parametrize("name", ["less", "greater_equal", "maximum", "floor_divide",
                                  "remainder", "atan2"])
def test_binary_undefined_for_complex(name):
    x = xp.asarray([1j])
    with pytest.raises(TypeError, match="complex"):
        getattr(xp, name)(x, x)


@pytest.mark.parametrize("name", ["floor", "ceil", "trunc", "signbit", "exp2"])
def test_unary_undefined_for_complex(name):
    with pytest.raises(TypeError, match="complex"):
        getattr(xp, name)(xp.asarray([1j]))


@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3,
                                                  max_side=3),
       data=st.data())
def test_add_multiply_broadcast_property(shapes, data):
    elems = st.complex_numbers(max_magnitude=1e3, allow_nan=False, width=64)
    a = data.draw(hnp.arrays(np.complex64, shapes.input_shapes[0], elements=elems))
    b = data.draw(hnp.arrays(np.complex64, shapes.input_shapes[1], elements=elems))
    check(xp.add(xp.asarray(a), xp.asarray(b)), np.add(a, b), tol=1e-5)
    got = host(xp.multiply(xp.asarray(a), xp.asarray(b)))
    np.testing.assert_allclose(got, np.multiply(a, b), rtol=1e-5, atol=1e-3)


# -- reductions and linear algebra --------------------------------------------------------
@pytest.mark.parametrize("dtype", CDTYPES)
def test_reductions(dtype):
    h = cdata((3, 4, 5), dtype, scale=1.0)
    x = xp.asarray(h)
    tol = 1e-5 if dtype == "complex64" else 1e-12
    check(xp.sum(x), np.sum(h), tol)
    check(xp.sum(x, axis=(0, 2), keepdims=True), np.sum(h, axis=(0, 2), keepdims=True), tol)
    check(xp.prod(x, axis=1), np.prod(h, axis=1), tol)
    check(xp.mean(x, axis=0), np.mean(h, axis=0), tol)
    check(xp.cumulative_sum(x, axis=2), np.cumsum(h, axis=2), tol)
    check(xp.cumulative_prod(x, axis=1, include_initial=True),
          np.cumulative_prod(h, axis=1, include_initial=True), tol)
    check(xp.count_nonzero(xp.asarray(np.array([0j, 1j, 2, complex(0, nan)], dtype))),
          np.asarray(3, xp.__array_namespace_info__().default_dtypes()["indexing"]))
    check(xp.any(xp.asarray(np.array([[0j, 1j], [0j, 0j]], dtype)), axis=1),
          np.array([True, False]))
    check(xp.linalg.vector_norm(x, axis=-1), np.linalg.norm(h, axis=-1), tol)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_matmul_vecdot(dtype):
    a = cdata((2, 3, 4), dtype, 1.0)
    b = cdata((4, 5), dtype, 1.0)
    tol = 1e-5 if dtype == "complex64" else 1e-12
    x, y = xp.asarray(a), xp.asarray(b)
    check(x @ y, a @ b, tol)
    check(xp.matmul(x[0].mT, xp.asarray(a[1])), a[0].T @ a[1], tol)
    check(xp.matmul(x[0, 0], y), a[0, 0] @ b, tol)
    check(xp.matmul(y.mT, y[:, 0]), b.T @ b[:, 0], tol)
    check(xp.vecdot(x, x), np.sum(np.conj(a) * a, axis=-1), tol)
    check(xp.linalg.vecdot(x[0], xp.asarray(a[1]), axis=0),
          np.sum(np.conj(a[0]) * a[1], axis=0), tol)
    r = RNG.standard_normal((4,)).astype(np.float32 if dtype == "complex64" else np.float64)
    check(xp.vecdot(xp.asarray(r), y.mT), np.sum(r * b.T, axis=-1), tol)
    check(xp.tensordot(x, y, axes=1), np.tensordot(a, b, axes=1), tol)


@pytest.mark.parametrize("dtype", CDTYPES)
def test_host_linalg(dtype):
    a = cdata((2, 3, 3), dtype, 1.0) + 3 * np.eye(3, dtype=dtype)
    x = xp.asarray(a)
    tol = 1e-4 if dtype == "complex64" else 1e-10
    check(xp.linalg.inv(x), np.linalg.inv(a), tol)
    check(xp.linalg.det(x), np.linalg.det(a), tol)
    check(xp.linalg.solve(x, xp.asarray(a[..., :1])), np.linalg.solve(a, a[..., :1]), tol)


# -- vtl on the wgpu backend: autograd through complex ops ---------------------------------
def test_vtl_tensor_complex_autograd_on_wgpu():
    import vtl
    from vtl import backends

    if not backends.get("wgpu").is_available:
        pytest.skip(f"vtl's wgpu backend: {backends.get('wgpu').unavailable_reason}")
    h = cdata((4,), "complex64", 1.0)
    grads = {}
    for b in ("numpy", "wgpu"):
        z = vtl.asarray(h, backend=b, requires_grad=True)
        loss = vtl.sum(vtl.real(vtl.exp(z) * vtl.conj(z)) + vtl.abs(z * z))
        loss.backward()
        grads[b] = z.grad.numpy()
    assert grads["wgpu"].dtype == np.complex64
    np.testing.assert_allclose(grads["wgpu"], grads["numpy"], rtol=1e-5, atol=1e-5)



@pytest.mark.parametrize("name", ["max", "min", "argmax", "argmin", "var", "std"])
def test_real_only_reductions_refuse_complex(name):
    with pytest.raises(TypeError, match=f"{name}.*complex"):
        getattr(xp, name)(xp.asarray([1j, 2]))


def test_numeric_kind_includes_complex():
    assert "complex64" in xp.__array_namespace_info__().dtypes(kind="numeric")
    assert xp.isdtype(xp.complex64, "numeric")


def test_fill_keeps_negative_zero():
    """full/setitem with -0.0 keep the sign, also through strided views (the parts of a
    complex array are stride-2 float views)."""
    z = host(xp.full((3,), complex(-0.0, -0.0)))
    assert np.signbit(z.real).all() and np.signbit(z.imag).all()
    a = xp.ones((4,))
    a[::2] = -0.0
    assert np.signbit(host(a)).tolist() == [True, False, True, False]
    check(xp.repeat(xp.asarray(np.array([complex(0.0, -0.0)], np.complex64)), 2),
          np.array([complex(0.0, -0.0)] * 2, np.complex64))
    r = host(xp.repeat(xp.asarray(np.array([complex(0.0, -0.0)], np.complex64)), 2))
    assert np.signbit(r.imag).all()
