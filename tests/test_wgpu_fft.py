"""The wgpu library's FFT (a Stockham kernel for power-of-two lengths, host NumPy for
other lengths) against numpy.fft."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
xp = pytest.importorskip("vtl.backends.wgpu")
if not xp.is_available():
    pytest.skip("no WebGPU adapter", allow_module_level=True)

HAS_F64 = "float64" in xp.__array_namespace_info__().dtypes()
CDTYPES = ["complex64"] + (["complex128"] if HAS_F64 else [])
NORMS = ("backward", "ortho", "forward")
RNG = np.random.default_rng(11)


def host(a):
    return xp.to_numpy(a) if hasattr(xp, "to_numpy") else np.asarray(a)


def cdata(shape, dtype):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)


def check(got, expect, dtype):
    """Relative to the largest magnitude (the FFT's error scales with it)."""
    g = host(got)
    e = np.asarray(expect)
    assert g.shape == e.shape, (g.shape, e.shape)
    assert g.dtype == np.dtype(dtype), (g.dtype, dtype)
    scale = max(float(np.abs(e).max(initial=0.0)), 1e-30)
    tol = 2e-6 if np.dtype(dtype) in (np.complex64, np.float32) else 1e-12
    assert float(np.abs(g - e).max(initial=0.0)) <= tol * scale


def native(fn):
    """Run ``fn`` and assert that it did not go through the host (no readback, no wait)."""
    xp.synchronize()
    before = xp.runtime_info()["waits"]
    out = fn()
    assert xp.runtime_info()["waits"] == before
    return out


@pytest.mark.parametrize("dtype", CDTYPES)
@pytest.mark.parametrize("inverse", [False, True])
def test_c2c_every_power_of_two_up_to_4096(dtype, inverse):
    name = "ifft" if inverse else "fft"
    for p in range(13):
        n = 2 ** p
        a = cdata((2, n), dtype)
        for norm in NORMS:
            got = native(lambda a=a, norm=norm: getattr(xp.fft, name)(xp.asarray(a), norm=norm))
            check(got, getattr(np.fft, name)(a.astype(np.complex128), norm=norm), dtype)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_c2c_along_any_axis_and_strided_input(axis):
    a = cdata((8, 4, 16), "complex64")
    x = xp.asarray(a)
    check(xp.fft.fft(x, axis=axis), np.fft.fft(a, axis=axis), "complex64")
    v = x[::2, ::-1, 1:9]  # a non-contiguous view
    check(xp.fft.ifft(v, axis=axis), np.fft.ifft(a[::2, ::-1, 1:9], axis=axis), "complex64")


def test_c2c_pads_and_truncates():
    a = cdata((3, 6), "complex64")
    x = xp.asarray(a)
    check(native(lambda: xp.fft.fft(x, n=8)), np.fft.fft(a, n=8), "complex64")
    check(native(lambda: xp.fft.fft(x, n=4, axis=1)), np.fft.fft(a, n=4), "complex64")
    check(native(lambda: xp.fft.ifft(x, n=2, axis=0)), np.fft.ifft(a, n=2, axis=0), "complex64")


def test_real_input_dtypes():
    r = RNG.standard_normal((4, 8)).astype(np.float32)
    check(xp.fft.fft(xp.asarray(r)), np.fft.fft(r), "complex64")
    i = RNG.integers(-5, 5, (8,)).astype(np.int32)
    check(xp.fft.fft(xp.asarray(i)), np.fft.fft(i), "complex64")
    if HAS_F64:
        check(xp.fft.fft(xp.asarray(r.astype(np.float64))), np.fft.fft(r.astype(np.float64)),
              "complex128")


@pytest.mark.parametrize("n", [None, 4, 16, 5])
@pytest.mark.parametrize("norm", NORMS)
def test_rfft_irfft(n, norm):
    r = RNG.standard_normal((3, 8)).astype(np.float32)
    x = xp.asarray(r)
    check(xp.fft.rfft(x, n=n, norm=norm), np.fft.rfft(r, n=n, norm=norm), "complex64")
    check(xp.fft.rfft(x, n=n, axis=0, norm=norm), np.fft.rfft(r, n=n, axis=0, norm=norm),
          "complex64")
    spec = np.fft.rfft(RNG.standard_normal((3, 8)), axis=-1).astype(np.complex64)
    s = xp.asarray(spec)
    check(xp.fft.irfft(s, n=n, norm=norm), np.fft.irfft(spec, n=n, norm=norm), "float32")
    check(xp.fft.hfft(s, n=n, norm=norm), np.fft.hfft(spec, n=n, norm=norm), "float32")
    check(xp.fft.ihfft(x, n=n, norm=norm), np.fft.ihfft(r, n=n, norm=norm), "complex64")


def test_irfft_ignores_imaginary_parts_of_dc_and_nyquist():
    spec = np.array([1 + 5j, 2 - 1j, 3 + 2j, 4 + 7j, 0.5 - 3j], np.complex64)  # n = 8
    check(native(lambda: xp.fft.irfft(xp.asarray(spec))), np.fft.irfft(spec), "float32")


@pytest.mark.parametrize("dtype", CDTYPES)
def test_nd_transforms(dtype):
    a = cdata((4, 2, 8), dtype)
    x = xp.asarray(a)
    w = a.astype(np.complex128)
    check(native(lambda: xp.fft.fftn(x)), np.fft.fftn(w), dtype)
    check(xp.fft.ifftn(x, axes=(0, 2), norm="ortho"), np.fft.ifftn(w, axes=(0, 2), norm="ortho"),
          dtype)
    check(xp.fft.fftn(x, s=(2, 16), axes=(1, 2)), np.fft.fftn(w, s=(2, 16), axes=(1, 2)), dtype)
    rdt = "float32" if dtype == "complex64" else "float64"
    r = a.real.copy()
    check(xp.fft.rfftn(xp.asarray(r)), np.fft.rfftn(r.astype(np.float64)), dtype)
    check(xp.fft.rfftn(xp.asarray(r), axes=(0, 1), norm="forward"),
          np.fft.rfftn(r.astype(np.float64), axes=(0, 1), norm="forward"), dtype)
    spec = np.fft.rfftn(r.astype(np.float64)).astype(dtype)
    check(xp.fft.irfftn(xp.asarray(spec)), np.fft.irfftn(spec.astype(np.complex128)), rdt)
    check(xp.fft.irfftn(xp.asarray(spec), s=(4, 2, 8), axes=(0, 1, 2)),
          np.fft.irfftn(spec.astype(np.complex128), s=(4, 2, 8), axes=(0, 1, 2)), rdt)


@given(n=st.integers(1, 40), batch=st.integers(0, 3), norm=st.sampled_from(NORMS))
def test_any_length_matches_numpy(n, batch, norm):
    """Power-of-two lengths on the device, the others through host NumPy: same values."""
    a = cdata((batch, n), "complex64")
    check(xp.fft.fft(xp.asarray(a), norm=norm), np.fft.fft(a, norm=norm), "complex64")
    r = a.real.copy()
    check(xp.fft.rfft(xp.asarray(r), norm=norm), np.fft.rfft(r, norm=norm), "complex64")


def test_round_trip():
    a = cdata((5, 64), "complex64")
    x = xp.asarray(a)
    check(xp.fft.ifft(xp.fft.fft(x)), a, "complex64")
    r = a.real.copy()
    check(xp.fft.irfft(xp.fft.rfft(xp.asarray(r)), n=64), r, "float32")


def test_output_is_a_new_array():
    x = xp.asarray(cdata((4,), "complex64"))
    y = xp.fft.fft(x, n=1)
    y[...] = 7
    check(x[:1], host(x)[:1], "complex64")
    assert complex(x[0]) != 7


def test_errors():
    x = xp.asarray(cdata((4,), "complex64"))
    with pytest.raises(ValueError, match="norm"):
        xp.fft.fft(x, norm="bad")
    with pytest.raises(ValueError, match="data points"):
        xp.fft.fft(x, n=0)
    with pytest.raises(IndexError):
        xp.fft.fft(x, axis=1)
    with pytest.raises(TypeError, match="real-valued"):
        xp.fft.rfft(x)
    with pytest.raises(TypeError, match="real-valued"):
        xp.fft.ihfft(x)
    with pytest.raises(ValueError, match="same length"):
        xp.fft.fftn(xp.reshape(x, (2, 2)), s=(2, 2), axes=(0,))


def test_capabilities_document_the_native_lengths():
    caps = xp.__array_namespace_info__().capabilities()
    assert "power" in caps["fft device lengths"]
    assert xp.fft.fft.__doc__ and "device" in xp.fft.fft.__doc__
