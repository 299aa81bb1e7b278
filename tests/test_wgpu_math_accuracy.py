"""Exact pow and accurate sin/cos/tan on the wgpu library (``wgsl/math/math32.wgsl``, the
float64 reduction of ``wgsl/math/math64.wgsl``) and the complex functions built on them,
against NumPy (and NumPy in float64 as the exact reference of float32 results)."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

import vtl

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
xp = pytest.importorskip("vtl.backends.wgpu")
if not xp.is_available():
    pytest.skip("no WebGPU adapter", allow_module_level=True)

DTYPES = xp.__array_namespace_info__().dtypes()
HAS_F64 = "float64" in DTYPES
HAS_F16 = "float16" in DTYPES
RNG = np.random.default_rng(20240611)
F32 = np.float32


def host(a) -> np.ndarray:
    return xp.to_numpy(a)


def quiet(fn, *args):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return fn(*args)


def ulp_error(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|got - exact| in units of the spacing of float32 at ``exact`` (a float64 array);
    0 where both are the same infinity or both NaN, inf where only one is finite."""
    with np.errstate(all="ignore"):
        return _ulp_error(got, exact)


def _ulp_error(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    got = got.astype(np.float64)
    ref = exact.astype(F32)
    spacing = np.spacing(np.abs(ref)).astype(np.float64)
    both_nan = np.isnan(got) & np.isnan(exact)
    finite = np.isfinite(ref) & np.isfinite(got)
    err = np.where(finite, np.abs(got - exact) / np.where(finite, spacing, 1.0), np.inf)
    err = np.where(~finite & (got == ref), 0.0, err)
    return np.where(both_nan, 0.0, err)


def random_float32(n: int, lo_bits: int = 0, hi_bits: int = 0x7f7fffff) -> np.ndarray:
    """float32 values uniform over their bit patterns up to ``hi_bits`` (finite by default),
    either sign."""
    bits = RNG.integers(lo_bits, hi_bits + 1, n, dtype=np.uint64).astype(np.uint32)
    sign = RNG.integers(0, 2, n, dtype=np.uint32) << np.uint32(31)
    return (bits | sign).view(F32)


def pow_reference(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return quiet(lambda a, b: np.power(a.astype(np.float64), b.astype(np.float64)), x, y)


def wgpu_pow(x, y) -> np.ndarray:
    return host(xp.pow(xp.asarray(x), xp.asarray(y)))


# -- pow ----------------------------------------------------------------------------------------

def test_pow_integral_results_are_exact():
    """Integer bases to integer exponents: every result that is a float32 is that float (5 ** 2
    was 24.999998, 7 ** 3 343.00003), and the others are the correctly rounded ones, ties to
    even as NumPy (58 ** 5 lies halfway between two floats)."""
    b = np.arange(-60, 61, dtype=F32)
    e = np.arange(-12, 13, dtype=F32)
    x, y = (a.ravel() for a in np.meshgrid(b, e))
    got = wgpu_pow(x, y)
    exact = pow_reference(x, y)
    representable = np.isfinite(exact) & (exact.astype(F32).astype(np.float64) == exact)
    assert representable.sum() > 1000
    np.testing.assert_array_equal(got[representable], exact[representable].astype(F32))
    np.testing.assert_array_equal(got[representable], quiet(np.power, x, y)[representable])
    # positive exponents: exact integers below 2^53 in float64, so the float64 result is the
    # exact value and its float32 rounding the correctly rounded one
    pos = (y > 0) & (np.abs(exact) < 2.0**53)
    np.testing.assert_array_equal(got[pos], exact[pos].astype(F32))
    assert wgpu_pow(np.array([58.0], F32), np.array([5.0], F32))[0] == F32(656356736.0)


@pytest.mark.parametrize("base, exponent", [
    (np.arange(0, 300, dtype=np.float64) ** 2, 0.5),
    (np.arange(0, 100, dtype=np.float64) ** 4, 0.25),
    (np.arange(0, 60, dtype=np.float64) ** 2, 1.5),
    (np.arange(1, 60, dtype=np.float64) ** 2, -0.5),
    (np.full(400, 2.0), np.arange(-200, 200) / 2.0),
    (np.full(277, 2.0), np.arange(-149, 128)),
    (np.full(60, 0.5), np.arange(-30, 30)),
])
def test_pow_exact_powers(base, exponent):
    """Results that are floats are exact whatever the exponent: 4 ** 0.5 == 2, 27 ** 1.5 ==
    729, 2 ** -149 (the smallest subnormal), 2 ** 127."""
    x = np.asarray(base, F32)
    y = np.broadcast_to(np.asarray(exponent, F32), x.shape).copy()
    got = wgpu_pow(x, y)
    exact = pow_reference(x, y)
    cr = exact.astype(F32)
    representable = np.isfinite(exact) & (np.abs(exact - cr) <= 1e-9 * np.abs(exact))
    assert representable.sum() >= 6
    np.testing.assert_array_equal(got[representable], cr[representable])
    assert ulp_error(got, exact).max() <= 0.51


def test_pow_scalar_exponents():
    """x ** 2 (a square), x ** 3, x ** 0.5, x ** -1 and 3 ** x through the array-scalar path:
    exact where the result is a float, otherwise within half an ulp plus 2^-30."""
    x = np.concatenate([np.arange(0, 200, dtype=F32), RNG.uniform(0, 50, 300).astype(F32)])
    a = xp.asarray(x)
    for s in (2, 2.0, 3, 3.0, 0.5, -1.0, -2, 10):
        got = host(a ** s)
        exact = pow_reference(x, np.full_like(x, s))
        err = ulp_error(got, exact)
        assert err.max() <= 0.51, (s, x[np.argmax(err)], got[np.argmax(err)])
        cr = exact.astype(F32)
        representable = np.isfinite(exact) & (cr.astype(np.float64) == exact)
        np.testing.assert_array_equal(got[representable], cr[representable])
    e = np.arange(-20, 21, dtype=F32)
    got = host(3.0 ** xp.asarray(e))
    exact = pow_reference(np.full_like(e, 3), e)
    assert ulp_error(got, exact).max() <= 0.5
    np.testing.assert_array_equal(got[e >= 0], exact[e >= 0].astype(F32))  # below 2^53
    i = np.arange(-7, 8, dtype=np.int32)
    np.testing.assert_array_equal(host(xp.asarray(i) ** 2), i**2)  # integers stay integers
    np.testing.assert_array_equal(host(xp.asarray(i) ** 2.0), i.astype(F32) ** 2)


SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, np.inf, -np.inf,
                    np.nan, 1e-45, -1e-45, 3e38, -3e38, 2.5, -2.5, 1e-30, 1e30, 7.0, -7.0],
                   F32)


def test_pow_special_cases_match_numpy():
    """pow(x, +-0) = 1 (also for NaN), pow(1, y) = 1 (also NaN), pow(-1, +-inf) = 1, zeros and
    infinities signed by the parity of y, pow(0, y < 0) = inf, NaN for x < 0 and y not an
    integer: bit for bit as NumPy (signed zeros included); finite results within an ulp."""
    x, y = (a.ravel() for a in np.meshgrid(SPECIAL, SPECIAL))
    got = wgpu_pow(x, y)
    want = quiet(np.power, x, y)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    special = np.isinf(want) | (want == 0) | (want == 1) | (want == -1)
    np.testing.assert_array_equal(got[special].view(np.uint32), want[special].view(np.uint32))
    assert ulp_error(got, pow_reference(x, y)).max() <= 0.51


@pytest.mark.parametrize("case", ["wide", "near one", "random bits", "subnormal results",
                                  "subnormal bases"])
def test_pow_accuracy(case):
    """Non-integral powers within half an ulp plus 2^-30 relative of the exact value (NumPy's
    own float32 power is up to an ulp off), and within 2 ulp of NumPy."""
    n = 20000
    if case == "wide":
        x = np.exp(RNG.uniform(-40, 40, n)).astype(F32)
        y = RNG.uniform(-4, 4, n).astype(F32)
    elif case == "near one":  # log2 x tiny, y huge: the fixed-point log2 keeps its relative error
        x = (1 + RNG.integers(-3000, 3000, n) * 2.0**-23).astype(F32)
        y = (RNG.uniform(-1, 1, n) * 2.0 ** RNG.uniform(0, 31, n)).astype(F32)
    elif case == "random bits":
        x = random_float32(n, 0, 0x7fffffff)
        y = random_float32(n, 0, 0x7fffffff)
    elif case == "subnormal results":
        x = RNG.uniform(0.01, 0.99, n).astype(F32)
        y = (np.log(2.0**-140) / np.log(x.astype(np.float64)) * RNG.uniform(0.9, 1.1, n))
        y = y.astype(F32)
    else:
        x = (RNG.integers(1, 2**23, n) * 2.0**-149).astype(F32)
        y = RNG.uniform(-1.2, 1.2, n).astype(F32)
    got = wgpu_pow(x, y)
    exact = pow_reference(x, y)
    err = ulp_error(got, exact)
    k = int(np.argmax(err))
    assert err[k] <= 0.51, (x[k], y[k], got[k], exact[k])
    want = quiet(np.power, x, y)
    near = ulp_error(got, want.astype(np.float64))
    assert near.max() <= 2.0


def test_pow_in_fused_chain():
    """A fused chain with pow (array and scalar exponents) gives the eager, exact values."""
    x = np.arange(1, 41, dtype=F32)
    e = np.tile(np.arange(0, 4, dtype=F32), 10)
    a, b = xp.asarray(x), xp.asarray(e)
    f = xp.fuse(lambda u, v: (u ** v + u ** 3.0) * 1.0 - u ** 0.5 + u ** 2)
    got = host(f(a, b))
    assert f.fallbacks == 0
    np.testing.assert_array_equal(got, host((a ** b + a ** 3.0) * 1.0 - a ** 0.5 + a ** 2))
    h = x.astype(np.float64)
    np.testing.assert_allclose(got, h**e + h**3 - np.sqrt(h) + h**2, rtol=2e-7)
    np.testing.assert_array_equal(host(xp.fuse(lambda u, v: u ** v)(a, b)),
                                  np.power(x, e))


@pytest.mark.skipif(not HAS_F16, reason="adapter without shader-f16")
def test_pow_and_trig_float16():
    """float16 goes through the float32 functions, as NumPy: exact powers stay exact."""
    x = np.arange(0, 30, dtype=np.float16)
    y = np.tile(np.arange(0, 3, dtype=np.float16), 10)
    np.testing.assert_array_equal(wgpu_pow(x, y), np.power(x, y))
    v = np.array([1000.0, -2000.0, 60000.0, 0.5], np.float16)
    for fn in ("sin", "cos", "tan"):
        np.testing.assert_allclose(host(getattr(xp, fn)(xp.asarray(v))), getattr(np, fn)(v),
                                   rtol=2e-3, atol=1e-3)


# -- sin, cos, tan ------------------------------------------------------------------------------

TOL = {"sin": 2.0, "cos": 2.0, "tan": 4.0}  # ulp of the exact value (tan: one division more)

# The float32 values closest to a multiple of pi/2 in their binades (x 2/pi within 2^-27 to
# 2^-30 of an integer), the hardest cases of the reduction.
HARD = np.array([float.fromhex(h) for h in (
    "0x1.f37c8ap+95", "0x1.47d0fep+34", "0x1.f37c8ap+96", "0x1.47d0fep+35", "0x1.f9cbe2p+7",
    "0x1.f37c8ap+97", "0x1.32ede2p+85", "0x1.628d4cp+40", "0x1.130930p+76", "0x1.47d0fep+36",
    "0x1.f9cbe2p+8", "0x1.b08c4ap+111", "0x1.4665d2p+25", "0x1.2d97c8p+2", "0x1.abb4b0p+89",
    "0x1.f37c8ap+98")], F32)


def trig_cases() -> np.ndarray:
    k = np.unique(np.round(np.logspace(0, 38, 3000)))
    near = np.concatenate([(k * np.pi / 2).astype(F32), (k * np.pi).astype(F32)])
    near = np.concatenate([near, np.nextafter(near, F32(np.inf)), np.nextafter(near, F32(0))])
    edges = np.array([3.4028235e38, 1e38, 2.0**-126, 2.0**-149, 2.0**-12, 2.0**-13,
                      0.7853981, 0.78539819, np.pi / 4, np.pi / 2, np.pi, 1e5, 105615.0,
                      1e6, 2.0**19, 2.0**24, 2.0**63, -5.458638e16], F32)
    out = np.concatenate([near, HARD, edges, random_float32(4000, 0, 0x00800000)])
    return np.concatenate([out, -out])


@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
@pytest.mark.parametrize("case", ["random bits", "ordinary", "hard"])
def test_trig_float32_accuracy(name, case):
    """sin/cos/tan of any finite float32 (cos(-5.458638e16) gave 1.0, the value is -0.134)
    within a few ulp of the exact value and of NumPy's float32 result."""
    if case == "random bits":
        x = random_float32(40000)
    elif case == "ordinary":
        x = RNG.uniform(-200, 200, 40000).astype(F32)
    else:
        x = trig_cases()
    got = host(getattr(xp, name)(xp.asarray(x)))
    exact = getattr(np, name)(x.astype(np.float64))
    err = ulp_error(got, exact)
    k = int(np.argmax(err))
    assert err[k] <= TOL[name], (x[k], got[k], exact[k])
    assert ulp_error(got, getattr(np, name)(x).astype(np.float64)).max() <= TOL[name] + 1


def test_trig_special_values():
    """inf -> NaN, NaN -> NaN; sin and tan keep -0.0 and tiny or subnormal arguments (as
    NumPy), cos of them is 1."""
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-45, -1e-45, 1e-40, -3e-39, 1e-20],
                 F32)
    a = xp.asarray(x)
    for name in ("sin", "cos", "tan"):
        got = host(getattr(xp, name)(a))
        want = quiet(getattr(np, name), x)
        assert np.isnan(got[:3]).all()
        np.testing.assert_array_equal(got[3:].view(np.uint32), want[3:].view(np.uint32))


def test_trig_in_fused_chain():
    """A fused chain with cos and sin of huge arguments equals the eager result."""
    x = trig_cases()[:4000]
    a = xp.asarray(x)
    f = xp.fuse(lambda u: xp.cos(u) * 2.0 + xp.sin(u))
    got = host(f(a))
    assert f.fallbacks == 0
    np.testing.assert_array_equal(got, host(xp.cos(a) * 2.0 + xp.sin(a)))
    exact = 2 * np.cos(x.astype(np.float64)) + np.sin(x.astype(np.float64))
    np.testing.assert_allclose(got, exact, rtol=0, atol=1e-6)


@pytest.mark.skipif(not HAS_F64, reason="adapter without shader-f64")
@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_trig_float64_huge_arguments(name):
    """float64 arguments up to 1.8e308 reduce exactly (they lost digits past 1e6)."""
    mp = pytest.importorskip("mpmath")
    mp.mp.prec = 1300
    bits = RNG.integers(0x4120000000000000, 0x7fefffffffffffff, 300, dtype=np.uint64)
    x = np.concatenate([bits.view(np.float64), [1e10, -5.458638e16, 3e38, 2.0**19, -2.0**19,
                                                1.7976931348623157e308,
                                                6381956970095103 * 2.0**797]])
    x = np.concatenate([x, -x[::7]])
    got = host(getattr(xp, name)(xp.asarray(x)))
    exact = np.array([float(getattr(mp, name)(mp.mpf(float(v)))) for v in x])
    err = np.abs(got - exact) / np.spacing(np.abs(exact))
    assert err.max() <= (4.0 if name == "tan" else 2.0), x[np.argmax(err)]


# -- complex ------------------------------------------------------------------------------------

CDTYPES = ["complex64"] + (["complex128"] if HAS_F64 else [])
CFUNCS = ["cos", "sin", "tan", "cosh", "sinh", "tanh", "exp", "expm1"]


def complex_cases(dtype: str) -> np.ndarray:
    top = 38 if dtype == "complex64" else 300
    n = 600

    def big():
        return 10.0 ** RNG.uniform(-3, top, n) * RNG.choice([-1.0, 1.0], n)

    small = RNG.uniform(-3, 3, n)
    logmax = 88.72 if dtype == "complex64" else 709.78
    edge = RNG.uniform(logmax - 1, logmax + 3, n) * RNG.choice([-1.0, 1.0], n)
    parts = [(small, big()), (big(), small), (big(), big()), (edge, small), (small, edge),
             (edge, big())]
    z = np.concatenate([re + 1j * im for re, im in parts])
    return z.astype(dtype)


def complex_close(got: np.ndarray, want: np.ndarray, tol: float) -> np.ndarray:
    """Per element: each part equal (same infinity, both NaN) or within ``tol`` times the larger
    finite magnitude of the two parts of ``want``, or within the smallest normal number (GPUs
    flush subnormal float32 results to zero: docs/conformance.md)."""
    with np.errstate(all="ignore"):
        return _complex_close(got, want, tol)


def _complex_close(got: np.ndarray, want: np.ndarray, tol: float) -> np.ndarray:
    ok = np.ones(got.shape, bool)
    scale = np.maximum(*(np.where(np.isfinite(w), np.abs(w), 0) for w in (want.real, want.imag)))
    tiny = np.finfo(want.real.dtype).tiny
    for g, w in ((got.real, want.real), (got.imag, want.imag)):
        fin = np.isfinite(g) & np.isfinite(w)
        close = np.abs(g - w) <= tol * scale + tiny
        ok &= np.where(fin, close, (g == w) | (np.isnan(g) & np.isnan(w)))
    return ok


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("name", CFUNCS)
def test_complex_huge_parts_match_numpy(dtype, name):
    """Complex functions with huge real or imaginary parts, and real parts past exp's overflow
    threshold, as NumPy (cosh(89.5 + 0.5j) was inf + inf j; the value is 3.2e38 + 1.8e38j).
    NumPy's expm1 is exp(z) - 1 and overflows where the result is finite: expm1 is checked
    against complex128 NumPy (complex64) or where NumPy's result is finite (complex128)."""
    z = complex_cases(dtype)
    got = host(getattr(xp, name)(xp.asarray(z)))
    want = quiet(getattr(np, name), z)
    keep = np.ones(z.shape, bool)
    if name == "expm1":
        if dtype == "complex64":
            want = quiet(lambda v: np.expm1(v).astype(np.complex64), z.astype(np.complex128))
        else:
            keep = np.isfinite(want.real) & np.isfinite(want.imag)
    tol = 2e-6 if dtype == "complex64" else 1e-14
    ok = complex_close(got, want, tol) | ~keep
    bad = np.flatnonzero(~ok)
    assert bad.size == 0, [(z[k], got[k], want[k]) for k in bad[:5]]


def test_complex_overflow_threshold_values():
    """Results past the float32 range of e^x alone, but finite, and the exactly reduced sin
    and cos of huge imaginary parts (through cosh/sinh)."""
    z = np.array([89.5 + 0.5j, -89.5 + 1.0j, 95.0 + 1.5707964j, 0.5 + 89.5j, 3.0 - 89.5j,
                  1e10j, -5.458638e16j, 3e38j, 1 + 1e30j], np.complex64)
    for name in ("cosh", "sinh", "cos", "sin", "exp"):
        got = host(getattr(xp, name)(xp.asarray(z)))
        want = quiet(getattr(np, name), z)
        assert complex_close(got, want, 2e-6).all(), (name, got, want)


# -- through vtl tensors ------------------------------------------------------------------------

def test_tensor_pow_is_exact(backend):
    """The Vandermonde matrix x_i ** j by broadcasting has integer entries exactly."""
    x = vtl.asarray([1.0, 2.0, 3.0, 4.0, 5.0, 7.0, 10.0])
    p = vtl.arange(5, dtype=vtl.float32)
    v = x[:, None] ** p[None, :]
    hx = np.array([1, 2, 3, 4, 5, 7, 10], F32)
    np.testing.assert_array_equal(np.asarray(v.tolist(), F32),
                                  hx[:, None] ** np.arange(5, dtype=F32)[None, :])
    np.testing.assert_array_equal(np.asarray((x ** 3).tolist(), F32), hx**3)
    np.testing.assert_array_equal(np.asarray(vtl.pow(x * x, 0.5).tolist(), F32), hx)


def test_tensor_trig_of_huge_arguments(backend):
    """vtl.sin/cos/tan of huge float32 arguments within a few ulp of the exact values."""
    hx = np.concatenate([HARD, np.array([-5.458638e16, 3.4e38, 1e10, 12345.678, 0.5], F32)])
    t = vtl.asarray(hx)
    for name in ("sin", "cos", "tan"):
        got = np.asarray(getattr(vtl, name)(t).tolist(), F32)
        err = ulp_error(got, getattr(np, name)(hx.astype(np.float64)))
        assert err.max() <= TOL[name] + 1, (name, hx[np.argmax(err)])


# -- the constant tables of the WGSL libraries ----------------------------------------------------

def _wgsl_words(src: str, name: str) -> list[int]:
    """The u32 words of the WGSL array or vec2 constant ``name`` (vec2 as low, high)."""
    import re

    m = re.search(rf"{name}(?::[^=]*)? = [^(]*\((.*?)\);", src, re.S)
    assert m, name
    return [int(w.rstrip("u"), 0) for w in re.findall(r"0x[0-9A-Fa-f]+u|\b\d+u\b", m.group(1))]


def test_wgsl_tables_match_their_definitions():
    """The bits of 2/pi, pi/4, ln2, 1/ln2 and the pow tables of wgsl/math/math32.wgsl and
    wgsl/math/math64.wgsl, recomputed with mpmath."""
    mp = pytest.importorskip("mpmath")
    from vtl.backends.wgpu import _kernels

    mp.mp.prec = 1500
    s32, s64 = _kernels.source("math32"), _kernels.source("math64")

    def frac_words(v, n):
        out = []
        for _ in range(n):
            v *= 2**32
            w = int(mp.floor(v))
            out.append(w)
            v -= w
        return out

    def q64(v):  # two's complement with 64 fraction bits, as (low, high)
        n = int(mp.nint(v * 2**64)) & (2**64 - 1)
        return [n & 0xffffffff, n >> 32]

    assert _wgsl_words(s32, "M32_2OPI") == [0] + frac_words(2 / mp.pi, 7)
    assert _wgsl_words(s64, "M64_2OPI") == [0, 0] + frac_words(2 / mp.pi, 37)
    assert _wgsl_words(s32, "M32_PIO4") == q64(mp.pi / 4)
    pio4 = int(mp.floor(mp.pi / 4 * 2**96))
    assert _wgsl_words(s64, "M64_PIO4") == [pio4 & 0xffffffff, (pio4 >> 32) & 0xffffffff,
                                            pio4 >> 64]
    assert _wgsl_words(s32, "M32_LN2") == q64(mp.log(2))
    assert _wgsl_words(s32, "M32_INVLN2M1") == q64(1 / mp.log(2) - 1)
    r = _wgsl_words(s32, "M32_LOGR")
    assert len(r) == 128 and r[0] == r[127] == 2048
    for i in range(1, 127):  # about 2^11 / c (2^12 / c above sqrt 2), c the bucket's centre
        c = 1 + (mp.mpf(i) + 0.5) / 128
        assert r[i] == int(mp.nint((2**11 if i < 53 else 2**12) / c)), i
    lg = _wgsl_words(s32, "M32_LOGT")
    assert lg == [w for ri in r for w in q64(-mp.log(mp.mpf(ri) / 2**11, 2))]
    assert _wgsl_words(s32, "M32_EXPT") == [w for j in range(16)
                                            for w in q64(mp.mpf(2) ** (mp.mpf(j) / 16) / 2)]
