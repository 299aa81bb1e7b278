"""Correctly rounded float32 division on the wgpu library (bit-for-bit NumPy)."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
xp = pytest.importorskip("vtl.backends.wgpu")
if not xp.is_available():
    pytest.skip("no WebGPU adapter", allow_module_level=True)

from vtl.backends.wgpu import _elementwise as E  # noqa: E402
from vtl.backends.wgpu import _kernels  # noqa: E402
from vtl.backends.wgpu._recorder import REC  # noqa: E402

F32 = np.dtype("float32")
HAS_F64 = "shader-f64" in xp.runtime_info()["features"]


def bits(a):
    return np.asarray(a, np.float32).view(np.uint32)


def _operands(n=1 << 14, seed=0):
    """Random magnitudes over the whole float32 range (subnormal and overflowing
    quotients included), plus every pair of special values."""
    rng = np.random.default_rng(seed)

    def rnd():
        e = rng.uniform(-149, 127, n)
        with np.errstate(over="ignore"):
            return (rng.uniform(1, 2, n) * 2.0 ** e * rng.choice([-1, 1], n)).astype(F32)

    sp = np.array([0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.1754942e-38, 3.4e38,
                   -3.4028235e38, 1, -1, 3], F32)
    sx, sy = np.meshgrid(sp, sp)
    x = np.concatenate([rnd(), sx.ravel(), rng.standard_normal(n).astype(F32)])
    y = np.concatenate([rnd(), sy.ravel(), rng.standard_normal(n).astype(F32)])
    return x, y


def assert_bits(got, ref):
    """Bit-for-bit equal, except that any NaN matches any NaN: IEEE 754 leaves the payload of
    a propagated NaN to the implementation (x86 keeps the operand's, NVIDIA returns its own)."""
    got, ref = np.asarray(got, np.float32), np.asarray(ref, np.float32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    ok = ~np.isnan(ref)
    np.testing.assert_array_equal(bits(got[ok]), bits(ref[ok]))


def _reference(x, y):
    with np.errstate(all="ignore"):
        return x / y


def test_divide_bit_exact():
    x, y = _operands()
    ref = _reference(x, y)
    a, b = xp.asarray(x), xp.asarray(y)
    for got in (a / b, xp.divide(a, b), xp.divide(a[1:], b[1:]),
                xp.fuse(lambda u, v: u / v)(a, b)):
        r = ref if got.shape == ref.shape else ref[1:]
        assert_bits(xp.to_numpy(got), r)
    # broadcast (strided kernel) and scalar operands
    m = np.ascontiguousarray(x[:64 * 63].reshape(64, 63))
    col = y[:64].reshape(64, 1)
    got = xp.to_numpy(xp.asarray(m) / xp.asarray(col))
    assert_bits(got, _reference(m, col))
    got = xp.to_numpy(xp.asarray(x) / 3.0)
    assert_bits(got, _reference(x, np.float32(3)))
    got = xp.to_numpy(7.0 / xp.asarray(y))
    assert_bits(got, _reference(np.float32(7), y))
    with np.errstate(all="ignore"):
        rec = np.float32(1) / y
    assert_bits(xp.to_numpy(xp.reciprocal(xp.asarray(y))), rec)


def _run_body(body, x, y):
    k = _kernels.kernel("binary", "rrw", (F32, F32), T="f32", R="f32", DT="float32",
                        DR="float32", BITS=32, BODY=body, UT="u32")
    a, b = xp.asarray(x), xp.asarray(y)
    out = xp.empty(x.shape, dtype=xp.float32)
    REC.dispatch(k, (a._st.buf, b._st.buf, out._st.buf), [x.size, 0, 3, 0, 0, 0],
                 -(-x.size // 256))
    return xp.to_numpy(out)


@pytest.mark.skipif(not HAS_F64, reason="needs shader-f64")
def test_divide_survives_an_approximate_device_division():
    """A GPU's division may be a reciprocal and a multiply (NVIDIA: 1 ulp off in about a
    third of the elements). The float32 kernel must stay exact when the device's float64
    division is approximate in the same way (emulated: x * (1 / y))."""
    x, y = _operands(seed=1)
    ref = _reference(x, y)
    with np.errstate(all="ignore"):
        approx = x * (np.float32(1) / y)
    hard = bits(approx) != bits(ref)
    assert hard.mean() > 0.1  # inputs where a reciprocal-multiply is off
    plain = _run_body("return x * (f32(1) / y);", x, y)  # the NVIDIA-like f32 division
    assert (bits(plain) != bits(ref)).mean() > 0.1  # ... fails there on the device too
    body = E.div_body(approx=lambda a, b: f"{a} * (1.0lf / {b})")
    assert_bits(_run_body(body, x, y), ref)


@pytest.mark.skipif(not HAS_F64, reason="needs shader-f64")
def test_floor_divide_is_the_exact_floor():
    """floor(x / y) of the exact quotient, as NumPy: 1 // 0.1 == 9 (the rounded quotient is
    10), x // x == 1 (a device's approximate division gave 0.99999994 and so 0)."""
    rng = np.random.default_rng(2)
    n = 1 << 14
    y = (rng.uniform(1, 2, n) * 2.0 ** rng.integers(-20, 20, n) * rng.choice([-1, 1], n))
    q = rng.uniform(-2.0 ** 23, 2.0 ** 23, n) * 2.0 ** rng.integers(-30, 0, n)
    y = y.astype(F32)
    x = np.concatenate([(q * y).astype(F32), y, np.float32([1, 1, -1, 0.5, -0.0, 0.0])])
    y = np.concatenate([y, y, np.float32([0.1, -0.1, 0.1, 3, 2, -2])])
    with np.errstate(all="ignore"):
        ref = np.floor_divide(x, y)
    assert ref[-6] == 9 and ref[-5] == -10
    assert_bits(xp.to_numpy(xp.floor_divide(xp.asarray(x), xp.asarray(y))), ref)


@pytest.mark.skipif(not HAS_F64, reason="needs shader-f64")
def test_remainder_is_numpys_exact_fmod():
    """float32 remainder bit for bit as NumPy over the whole range, quotients far past the
    mantissa included (1 % 1e-10), signed zeros as the standard says."""
    x, y = _operands(seed=3)
    x = np.concatenate([x, np.float32([1.0, 1.9106346, -0.0, 0.0, 7.5])])
    y = np.concatenate([y, np.float32([1e-10, 3e-30, np.inf, -np.inf, 0.1])])
    with np.errstate(all="ignore"):
        ref = np.remainder(x, y)
    assert_bits(xp.to_numpy(xp.remainder(xp.asarray(x), xp.asarray(y))), ref)
