"""The cupy backend's array-API conformance fixes (``vtl/backends/cupy/namespace.py``,
``linalg.py``, ``vtl/backends/_common/special_cases.py``, ``Tensor.__dlpack__``).

The special-case logic is array-API code: the first half of this file runs it here on
NumPy (``array_api_compat.numpy``) over results shaped like CuPy's (what CuPy's kernels
return, as its sources compute them), with NumPy and the standard's tables as the oracles.
The second half runs the cupy namespace and cupy tensors against the same oracles and skips
without CuPy or a CUDA device.
"""

from __future__ import annotations

import itertools
import math

import array_api_compat.numpy as anp
import numpy as np
import pytest

import vtl
from vtl.backends._common import special_cases as sc

# -- the standard's special cases (2024.12) --------------------------------------------------
INF, NAN, PI = math.inf, math.nan, math.pi
ANY_SIGN = "any sign"  # an imaginary part whose sign the standard leaves unspecified


def _pos_finite(v: float) -> bool:
    return math.isfinite(v) and v > 0


def _infinite_parts(a: float, b: float) -> tuple | None:
    """The rows that log's and acosh's tables share: an infinite or nan part (``b >= 0``)."""
    if a == -INF and _pos_finite(b):
        return INF, PI
    if a == INF and _pos_finite(b):
        return INF, 0.0
    if a == -INF and b == INF:
        return INF, 3 * PI / 4
    if a == INF and b == INF:
        return INF, PI / 4
    if math.isinf(a) and math.isnan(b):
        return INF, NAN
    if math.isnan(a) and math.isfinite(b):
        return NAN, NAN
    if math.isnan(a) and b == INF:
        return INF, NAN
    if math.isnan(a) and math.isnan(b):
        return NAN, NAN
    return None

def _log_table(a: float, b: float, log1p: bool) -> tuple | None:
    """The standard's table of complex ``log``/``log1p`` for ``b`` not negative."""
    zero_b = b == 0 and math.copysign(1, b) > 0
    if log1p:
        if a == -1 and zero_b:
            return -INF, 0.0
    else:
        if a == 0 and zero_b:
            return (-INF, PI) if math.copysign(1, a) < 0 else (-INF, 0.0)
    if math.isfinite(a) and b == INF:
        return INF, PI / 2
    if math.isfinite(a) and math.isnan(b):
        return NAN, NAN
    return _infinite_parts(a, b)


def _acosh_table(a: float, b: float) -> tuple | None:
    zero_b = b == 0 and math.copysign(1, b) > 0
    if a == 0 and zero_b:
        return 0.0, PI / 2
    if math.isfinite(a) and b == INF:
        return INF, PI / 2
    if math.isfinite(a) and a != 0 and math.isnan(b):
        return NAN, NAN
    if a == 0 and math.copysign(1, a) > 0 and math.isnan(b):
        return NAN, (PI / 2, ANY_SIGN)
    return _infinite_parts(a, b)


def _tanh_table(a: float, b: float, c99: bool) -> tuple | None:
    """``a`` is not negative here (``tanh(-z) == -tanh(z)`` gives the rest); ``c99``: the
    zero imaginary part of ``tanh(inf + b j)`` may have C99's sign (that of ``sin(2b)``, as
    NumPy and CuPy give), which vtl's ``tanh`` corrects to the standard's ``+0``."""
    plus_zero_a = a == 0 and math.copysign(1, a) > 0
    if plus_zero_a and b == 0 and math.copysign(1, b) > 0:
        return 0.0, 0.0
    if math.isfinite(a) and a != 0 and (b == INF or math.isnan(b)):
        return NAN, NAN
    if plus_zero_a and (b == INF or math.isnan(b)):
        return 0.0, NAN
    if a == INF and _pos_finite(b):
        return 1.0, (0.0, ANY_SIGN) if c99 else 0.0
    if a == INF and (b == INF or math.isnan(b)):
        return 1.0, (0.0, ANY_SIGN)
    if math.isnan(a) and b == 0 and math.copysign(1, b) > 0:
        return NAN, 0.0
    if math.isnan(a) and (b != 0 or math.isnan(b)):
        return NAN, NAN
    return None


def _negate(part: object) -> object:
    if isinstance(part, tuple):
        return (-part[0], part[1])
    return -part


def spec_value(fname: str, a: float, b: float, c99: bool = False) -> tuple | None:
    """``(real, imag)`` that the standard's special cases give for ``fname(a + b j)``, or
    ``None`` where it lists no case; an imaginary part ``(v, ANY_SIGN)`` may have either
    sign. The tables are written for ``b`` not negative; ``f(conj(z)) == conj(f(z))``
    (and for ``tanh``, ``tanh(-z) == -tanh(z)``) give the other half."""
    if fname == "tanh" and math.copysign(1, a) < 0 and not math.isnan(a):
        r = spec_value(fname, -a, -b, c99)
        return None if r is None else (_negate(r[0]), _negate(r[1]))
    if math.copysign(1, b) < 0 and not math.isnan(b):
        r = spec_value(fname, a, -b, c99)
        return None if r is None else (r[0], _negate(r[1]))
    if fname in ("log", "log1p"):
        return _log_table(a, b, fname == "log1p")
    if fname == "acosh":
        return _acosh_table(a, b)
    return _tanh_table(a, b, c99)


SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 2.5, -0.5, INF, -INF, NAN])
COMPLEX_FUNCTIONS = ("log", "log1p", "acosh", "tanh")
NUMPY_NAME = {"log": "log", "log1p": "log1p", "acosh": "arccosh", "tanh": "tanh"}


def special_grid(dtype: str) -> np.ndarray:
    """Every pair of special values as the real and imaginary parts of ``dtype`` numbers."""
    rdt = np.float32 if dtype == "complex64" else np.float64
    pairs = np.array(list(itertools.product(SPECIAL, SPECIAL)), dtype=rdt)
    z = np.empty(len(pairs), dtype=dtype)
    z.real, z.imag = pairs[:, 0], pairs[:, 1]
    return z


def _same_part(got: float, want: object, rtol: float) -> bool:
    any_sign = isinstance(want, tuple)
    w = want[0] if any_sign else want
    if math.isnan(w):
        return math.isnan(got)
    if any_sign:
        got, w = abs(got), abs(w)
    if w == 0 or math.isinf(w):
        return got == w and math.copysign(1, got) == math.copysign(1, w)
    return math.isclose(got, w, rel_tol=rtol)


def assert_spec_cases(fname: str, z: np.ndarray, got: np.ndarray, c99: bool = False) -> int:
    """``got == fname(z)`` matches the standard's table wherever it has a case (``c99``: see
    ``_tanh_table``); returns how many elements it checked."""
    rtol = 1e-6 if z.dtype == np.complex64 else 1e-14
    checked = 0
    for zi, gi in zip(z, got, strict=True):
        want = spec_value(fname, float(zi.real), float(zi.imag), c99)
        if want is None:
            continue
        checked += 1
        ok = _same_part(float(gi.real), want[0], rtol) and _same_part(float(gi.imag), want[1],
                                                                      rtol)
        assert ok, f"{fname}({zi}) = {gi}, the standard says {want}"
    return checked


def assert_same_values(got: np.ndarray, want: np.ndarray, rtol: float) -> None:
    """Equal values, nan positions and signs of zeros, part by part for complex."""
    assert got.dtype == want.dtype and got.shape == want.shape
    parts = (np.real, np.imag) if want.dtype.kind == "c" else (lambda v: v,)
    for part in parts:
        g, w = part(got), part(want)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=0)
        ok = ~np.isnan(w)
        np.testing.assert_array_equal(np.signbit(g[ok]), np.signbit(w[ok]))


def sign_free(fname: str, z: np.ndarray) -> np.ndarray:
    """Where the standard leaves the sign of ``fname(z)``'s imaginary part open."""
    def free(v: complex) -> bool:
        want = spec_value(fname, v.real, v.imag)
        return want is not None and isinstance(want[1], tuple)

    return np.array([free(complex(v)) for v in z], dtype=bool)


def _differs(got: np.ndarray, want: np.ndarray) -> bool:
    """Whether some real or imaginary part differs (nan equal to nan)."""
    return any(bool(np.any((part(got) != part(want)) & ~(np.isnan(part(got))
                                                        & np.isnan(part(want)))))
               for part in (np.real, np.imag))


def _parts(re: np.ndarray, im: np.ndarray, dtype: np.dtype) -> np.ndarray:
    out = np.empty(re.shape, dtype=dtype)
    out.real, out.imag = re, im
    return out


# -- what CuPy's kernels return (from CuPy's sources), for the oracle tests -----------------
def cupy_kernel_result(fname: str, z: np.ndarray) -> np.ndarray:
    """``fname(z)`` as CuPy computes it on the special values: its ``clog`` (thrust's port of
    FreeBSD's) sends any nan input through ``log(re**2 + im**2) + atan2(im, re) j``;
    ``log1p`` is ``log(1 + z)``, whose complex sum turns a ``-0`` imaginary part into ``+0``
    (seen on the H200: ``log1p(-1 - 0j)`` is ``-inf + 0j``); ``cacosh(+-0 + nan j)`` returns
    ``nan + nan j``; ``ctanh`` returns ``nan + nan j`` for every non-finite imaginary part.
    Elsewhere NumPy's value."""
    with np.errstate(all="ignore"):
        want = getattr(np, NUMPY_NAME[fname])(z)
        a, b = z.real, z.imag
        if fname in ("log", "log1p"):
            if fname == "log1p":
                a, b = a + 1, b + 0.0
                want = np.log(_parts(a, b, z.dtype))
            nan_in = np.isnan(a) | np.isnan(b)
            mixed = _parts(np.log(a * a + b * b), np.arctan2(b, a), z.dtype)
            return np.where(nan_in, mixed, want)
        if fname == "acosh":
            return np.where((a == 0) & np.isnan(b), complex(NAN, NAN), want).astype(z.dtype)
        return np.where((a == 0) & ~np.isfinite(b), complex(NAN, NAN), want).astype(z.dtype)


FIXES = {"log": sc.log_special_cases, "log1p": sc.log1p_special_cases,
         "acosh": sc.acosh_special_cases, "tanh": sc.tanh_special_cases}


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("fname", COMPLEX_FUNCTIONS)
def test_complex_special_cases_as_numpy_and_the_standard(fname, dtype):
    z = special_grid(dtype)
    with np.errstate(all="ignore"):
        want = getattr(np, NUMPY_NAME[fname])(z)
    kernel = cupy_kernel_result(fname, z)
    assert _differs(kernel, want)  # CuPy's kernels miss cases, which the fix restores
    got = np.asarray(FIXES[fname](anp, z, kernel))
    rtol = 1e-6 if dtype == "complex64" else 1e-15
    assert_same_values(got, want, rtol)
    assert assert_spec_cases(fname, z, got, c99=True) > 20
    # an already right result stays as it is
    assert_same_values(np.asarray(FIXES[fname](anp, z, want)), want, 0)


def _float_grid(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    vals = np.array([0.0, -0.0, 1.0, -1.0, 0.1, -0.1, 2.5, -7.0, 3e-30, -3e-30, 1e30, -1e30,
                     INF, -INF, NAN], dtype)
    x, y = (v.reshape(-1) for v in np.meshgrid(vals, vals))
    return x, y


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_python_remainder_is_numpys(dtype):
    """From C's fmod to Python's %, bit for bit NumPy's (signed zeros, infinite divisors:
    ``x1`` when the signs agree, else ``x2``), also broadcast and with 0-d divisors."""
    x, y = _float_grid(dtype)
    r = np.random.default_rng(5)
    big = (r.standard_normal(2048) * 10.0 ** r.integers(-20, 20, 2048)).astype(dtype)
    cases = [(x, y), (big, big[::-1].copy()), (x, np.array(-INF, dtype)),
             (x, np.array(INF, dtype)), (x.reshape(15, 15), y.reshape(15, 15)[:1])]
    for a, b in cases:
        with np.errstate(all="ignore"):
            got = sc.python_remainder(anp, a, b, np.fmod(a, b))
            want = np.remainder(a, b)
        assert_same_values(np.asarray(got), want, 0)
    fin = np.array([3.0, -3.0, 0.0, -0.0, 1e-30, -1e30], dtype)
    with np.errstate(all="ignore"):
        got = np.asarray(sc.python_remainder(anp, fin, np.array(INF, dtype), np.fmod(fin, INF)))
        assert_same_values(got, np.array([3.0, INF, 0.0, 0.0, 1e-30, INF], dtype), 0)
        got = np.asarray(sc.python_remainder(anp, fin, np.array(-INF, dtype),
                                             np.fmod(fin, -INF)))
        assert_same_values(got, np.array([-INF, -3.0, -0.0, -0.0, -INF, -1e30], dtype), 0)
        kernel = x - np.floor(x / y) * y  # CuPy's float remainder kernel
    assert np.isnan(kernel[np.isfinite(x) & np.isinf(y)]).all()


SOLVE_SHAPES = [((1, 1), (2, 1, 0)), ((1, 1), (1, 1, 0)), ((2, 1, 1), (2, 1, 0)),
                ((3, 3), (3, 0)), ((0, 0), (0, 2)), ((0, 0), (0,)), ((2, 0, 0), (2, 0, 3)),
                ((0, 2, 2), (0, 2, 1)), ((1, 1), (0, 1, 1)), ((0, 3, 3), (1, 3, 2)),
                ((4, 2, 2), (4, 2, 0))]


def identity_system(s1: tuple, s2: tuple, d1: str, d2: str) -> tuple[np.ndarray, np.ndarray]:
    """Identity matrices of shape ``s1`` and a right-hand side of ones of shape ``s2``."""
    return np.broadcast_to(np.eye(s1[-1], dtype=d1), s1).copy(), np.ones(s2, d2)


@pytest.mark.parametrize("s1, s2", SOLVE_SHAPES)
def test_empty_solve_has_numpys_shape_and_dtype(s1, s2):
    for d1, d2 in (("float32", "float32"), ("float32", "float64"), ("complex64", "float64")):
        x1, x2 = identity_system(s1, s2, d1, d2)
        got = sc.empty_solve(anp, x1, x2)
        want = np.linalg.solve(x1, x2)
        assert got.shape == want.shape and got.dtype == want.dtype and got.size == 0


def test_empty_solve_leaves_other_systems_to_the_runtime():
    assert sc.empty_solve(anp, np.eye(2), np.ones((2, 3))) is None
    assert sc.empty_solve(anp, np.eye(2), np.ones(0)) is None  # mismatched: the solver says
    assert sc.empty_solve(anp, np.ones((2, 3)), np.ones((2, 0))) is None  # not square
    assert sc.empty_solve(anp, np.ones((0, 0)), np.ones((1, 0))) is None


# -- the cupy backend (skipped without CuPy or a CUDA device) ----------------------------------
@pytest.fixture(scope="module")
def cp():
    cupy = pytest.importorskip("cupy")
    try:
        cupy.cuda.runtime.getDeviceCount()
    except Exception as err:  # noqa: BLE001 - no driver / no device
        pytest.skip(f"no CUDA device: {err}")
    if not vtl.backends.get("cupy").is_available:
        pytest.skip(f"cupy backend: {vtl.backends.get('cupy').unavailable_reason}")
    return cupy


@pytest.fixture(scope="module")
def ns(cp):
    from vtl.backends.cupy import namespace as _cupy_namespace

    return _cupy_namespace


@pytest.mark.parametrize("s1, s2", SOLVE_SHAPES)
def test_cupy_solve_of_systems_without_elements(cp, ns, s1, s2):
    for d1, d2 in (("float32", "float32"), ("float64", "float32"), ("complex128", "complex128")):
        x1, x2 = identity_system(s1, s2, d1, d2)
        want = np.linalg.solve(x1, x2)
        got = ns.linalg.solve(cp.asarray(x1), cp.asarray(x2))
        assert got.shape == want.shape and got.dtype == want.dtype
        t = vtl.linalg.solve(vtl.asarray(x1, backend="cupy"), vtl.asarray(x2, backend="cupy"))
        assert t.shape == want.shape and t.dtype == want.dtype and t.device.backend_name == "cupy"


def test_cupy_solve_still_solves(cp):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 4, 4)) + 4 * np.eye(4)
    for b in (rng.standard_normal((3, 4, 2)), rng.standard_normal(4), rng.standard_normal((4, 1))):
        aa = a if b.ndim != 2 else a[0]
        got = vtl.linalg.solve(vtl.asarray(aa, backend="cupy"), vtl.asarray(b, backend="cupy"))
        np.testing.assert_allclose(got.numpy(), np.linalg.solve(aa, b[..., None])[..., 0]
                                   if b.ndim == 1 else np.linalg.solve(aa, b), rtol=1e-10)
    x1 = vtl.asarray(np.array([[2.0]]), backend="cupy")
    x2 = vtl.asarray(np.array([[[4.0]], [[6.0]]]), backend="cupy")  # 1x1, stacked right side
    np.testing.assert_allclose(vtl.linalg.solve(x1, x2).numpy(), [[[2.0]], [[3.0]]])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cupy_remainder_is_numpys(cp, ns, dtype):
    x, y = _float_grid(dtype)
    r = np.random.default_rng(6)
    big = (r.standard_normal(4096) * 10.0 ** r.integers(-20, 20, 4096)).astype(dtype)
    cases = [(x, y), (big, big[::-1].copy()), (x, np.array(-INF, dtype)), (x, INF), (-3.0, y),
             (x.reshape(15, 15), y.reshape(15, 15)[:1]), (np.array(1.0, dtype), 0.1)]
    for a, b in cases:
        got = cp.asnumpy(ns.remainder(*(cp.asarray(v) if isinstance(v, np.ndarray) else v
                                        for v in (a, b))))
        with np.errstate(all="ignore"):
            want = np.remainder(a, b)
        assert_same_values(got, want, 0)


def test_cupy_tensor_remainder_operators_with_infinite_divisors(cp):
    host = np.array([3.0, -3.0, 0.0, -0.0, 1.5])
    t = vtl.asarray(host, backend="cupy")
    for d in (INF, -INF):
        assert_same_values((t % d).numpy(), np.remainder(host, d), 0)
        assert_same_values((d % t).numpy(), np.remainder(d, host), 0)
        u = vtl.asarray(host, backend="cupy")
        u %= d
        assert_same_values(u.numpy(), np.remainder(host, d), 0)
    assert_same_values((t % vtl.asarray(np.full(5, INF), backend="cupy")).numpy(),
                       np.array([3.0, INF, 0.0, 0.0, 1.5]), 0)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("fname", COMPLEX_FUNCTIONS)
def test_cupy_complex_special_cases(cp, ns, fname, dtype):
    z = special_grid(dtype)
    got = cp.asnumpy(getattr(ns, fname)(cp.asarray(z)))
    with np.errstate(all="ignore"):
        want = getattr(np, NUMPY_NAME[fname])(z)
    special = (~np.isfinite(z.real) | ~np.isfinite(z.imag) | (z == 0)) & ~sign_free(fname, z)
    assert_same_values(got[special], want[special], 1e-6 if dtype == "complex64" else 1e-15)
    tol = 1e-5 if dtype == "complex64" else 1e-13  # the finite values: rounding only
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)
    assert assert_spec_cases(fname, z, got, c99=True) > 20
    t = getattr(vtl, fname)(vtl.asarray(z, backend="cupy")).numpy()
    assert assert_spec_cases(fname, z, t) > 20


def test_cupy_dlpack_refuses_a_copy_free_export_to_the_cpu(cp):
    t = vtl.asarray(np.arange(3.0), backend="cupy")
    with pytest.raises(BufferError, match="without a copy"):
        t.__dlpack__(dl_device=(1, 0), copy=False)
    with pytest.raises(BufferError, match="without a copy"):
        t.__dlpack__(max_version=(1, 0), dl_device=(1, 0), copy=False)
    assert type(t.__dlpack__(max_version=(1, 0), dl_device=(1, 0), copy=True)).__name__ == \
        "PyCapsule"
    assert type(t.__dlpack__(dl_device=t.__dlpack_device__(), copy=False)).__name__ == \
        "PyCapsule"
