"""Namespace fixes on every backend: device strings, the n-dimensional FFTs' default axes
for ``s=``, NumPy scalars in type promotion, and the special cases the cupy namespace
patches (checked here on numpy and wgpu against NumPy)."""

from __future__ import annotations

import numpy as np
import pytest

import vtl
from tests.helpers import assert_close, check_grad, skip_unless_dtype


# -- vtl.Device --------------------------------------------------------------------------------
@pytest.mark.parametrize("spec, name, index", [
    ("wgpu:0", "wgpu", 0), ("cupy:1", "cupy", 1), ("numpy:0", "numpy", 0),
    ("numpy", "numpy", 0), ("wgpu:12", "wgpu", 12), ("cpu", "numpy", 0), ("CuPy:2", "cupy", 2),
])
def test_device_strings_parse_the_index(spec, name, index):
    d = vtl.Device(spec)
    assert (d.backend_name, d.index) == (name, index)
    assert d is vtl.Device(name, index) and str(d) == f"{name}:{index}"
    assert d == spec


@pytest.mark.parametrize("spec", ["wgpu:x", "wgpu:-1", "wgpu:0:1", "gpu", "", "wgpu:", "wgpu:1.0",
                                  ":0", "tpu:0"])
def test_bad_device_strings_name_the_expected_form(spec):
    for make in (vtl.Device, lambda s: vtl.ones(2, device=s)):
        with pytest.raises(ValueError, match=r"expected 'backend\[:index\]' with backend one of "
                                             r"cupy, numpy, wgpu") as err:
            make(spec)
        assert repr(spec) in str(err.value)
    assert vtl.Device("numpy") != spec


def test_device_index_argument_is_checked():
    with pytest.raises(ValueError, match=r"backend\[:index\]"):
        vtl.Device("wgpu", -1)
    with pytest.raises(ValueError, match="index twice"):
        vtl.Device("wgpu:1", 1)
    with pytest.raises(TypeError, match="index must be an integer, got bool"):
        vtl.Device("numpy", True)
    with pytest.raises(TypeError, match="index must be an integer, got str"):
        vtl.Device("numpy", "1")
    with pytest.raises(TypeError, match="string like 'wgpu:0', got int"):
        vtl.Device(0)
    assert vtl.Device("numpy", np.int64(0)) is vtl.Device("numpy:0")


# -- vtl.fft: s= without axes= -----------------------------------------------------------------
ND = ("fftn", "ifftn", "rfftn", "irfftn")


@pytest.mark.parametrize("fname", ND)
def test_nd_fft_s_without_axes_takes_the_last_axes(backend, fname):
    """As NumPy (which deprecates it since 2.0), PyTorch and array-api-strict: ``s`` alone
    transforms the last ``len(s)`` axes (the standard asks callers to pass both)."""
    dtype = "float64" if fname == "rfftn" else "complex128"
    skip_unless_dtype(backend, "complex128")
    rng = np.random.default_rng(11)
    for shape in [(5,), (3, 4), (2, 3, 4)]:
        x = rng.standard_normal(shape)
        if dtype == "complex128":
            x = x + 1j * rng.standard_normal(shape)
        for k in range(1, len(shape) + 1):
            for s in {tuple(shape[-k:]), tuple(range(3, 3 + k)), (2,) * k}:
                for norm in ("backward", "ortho", "forward"):
                    got = getattr(vtl.fft, fname)(vtl.asarray(x), s=s, norm=norm)
                    last = tuple(range(len(shape) - k, len(shape)))
                    want = getattr(np.fft, fname)(x, s=s, axes=last, norm=norm)
                    assert_close(got, want, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("fname", ND)
def test_nd_fft_s_without_axes_single_precision(backend, fname):
    skip_unless_dtype(backend, "complex64")
    x = np.random.default_rng(12).standard_normal((2, 3, 4)).astype(np.float32)
    got = getattr(vtl.fft, fname)(vtl.asarray(x), s=(4, 6))
    want = getattr(np.fft, fname)(x.astype(np.float64), s=(4, 6), axes=(1, 2))
    assert_close(got, want.astype(got.dtype), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("fname", ND)
def test_nd_fft_s_without_axes_gradient(fname):
    x = np.random.default_rng(13).standard_normal((2, 3))
    if fname == "irfftn":
        check_grad(lambda t: vtl.fft.irfftn(t + 0j, s=(4,)), x)
    elif fname == "rfftn":
        check_grad(lambda t: vtl.real(vtl.fft.rfftn(t, s=(4,)) * (1 - 2j)), x)
    else:
        check_grad(lambda t: vtl.real(getattr(vtl.fft, fname)(t + 0j, s=(1, 5)) * (1 - 2j)), x)


def test_nd_fft_s_longer_than_the_input(backend):
    skip_unless_dtype(backend, "complex64")
    z = vtl.asarray(np.ones((2, 4), dtype=np.complex64))
    for fname in ND:
        arg = vtl.real(z) if fname == "rfftn" else z
        with pytest.raises(ValueError, match="s=\\(2, 2, 2\\) has 3 entries but the input has "
                                             "only 2 axes"):
            getattr(vtl.fft, fname)(arg, s=(2, 2, 2))
