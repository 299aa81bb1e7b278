"""Namespace fixes on every backend: device strings, the n-dimensional FFTs' default axes
for ``s=``, NumPy scalars in type promotion, and the special cases the cupy namespace
patches (checked here on numpy and wgpu against NumPy)."""

from __future__ import annotations

import numpy as np
import pytest

import vtl
from tests.helpers import assert_close, check_grad, skip_unless_dtype, supported_dtypes
from tests.test_cupy_conformance import (
    COMPLEX_FUNCTIONS,
    INF,
    NAN,
    NUMPY_NAME,
    SOLVE_SHAPES,
    assert_same_values,
    assert_spec_cases,
    identity_system,
    spec_value,
    special_grid,
)


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


# -- NumPy scalars in type promotion ---------------------------------------------------------
TENSOR_DTYPES = ("bool", "int8", "uint8", "int32", "int64", "uint64", "float32", "float64",
                 "complex64", "complex128")
SCALAR_DTYPES = ("bool", "int8", "int64", "uint64", "float32", "float64", "complex64",
                 "complex128")


def _np_scalar(dtype: str) -> np.generic:
    return np.dtype(dtype).type(True if dtype == "bool" else 2)


def _host(dtype: str) -> np.ndarray:
    return np.array([1, 2, 3]).astype(dtype) if dtype != "bool" else np.array([True, False, True])


@pytest.mark.parametrize("sdt", SCALAR_DTYPES)
def test_result_type_takes_a_numpy_scalar_as_an_array_of_its_dtype(sdt):
    s = _np_scalar(sdt)
    assert vtl.result_type(s) == np.dtype(sdt)
    for tdt in TENSOR_DTYPES:
        t = vtl.asarray(_host(tdt), backend="numpy")
        want = np.result_type(_host(tdt), s)  # NumPy 2: a NumPy scalar is not weak
        assert vtl.result_type(t, s) == want == vtl.result_type(s, t)
        assert vtl.result_type(t, s) == vtl.result_type(t, vtl.asarray(s, backend="numpy"))
    assert vtl.result_type(vtl.float32, np.float64(1)) == vtl.float64
    assert vtl.result_type(vtl.float32, 1.0) == vtl.float32  # Python scalars stay weak
    assert vtl.result_type(vtl.int8, 1) == vtl.int8


def _binary_cases(tdt: str, sdt: str):
    """(name, vtl function of (tensor, scalar), NumPy function) for the dtype pair."""
    kinds = {np.dtype(tdt).kind, np.dtype(sdt).kind}
    if np.result_type(np.dtype(tdt), np.dtype(sdt)).kind in "iub":
        yield "and", lambda a, b: a & b, lambda a, b: a & b
    if "b" in kinds:  # arithmetic refuses a bool operand, tensor or NumPy scalar
        return
    yield "add", lambda a, b: a + b, np.add
    yield "radd", lambda a, b: b + a, lambda a, b: b + a
    yield "multiply", vtl.multiply, np.multiply
    yield "rsub", lambda a, b: b - a, lambda a, b: b - a
    if "c" not in kinds:
        yield "less", lambda a, b: a < b, np.less
        yield "maximum", vtl.maximum, np.maximum


@pytest.mark.parametrize("tdt", TENSOR_DTYPES)
def test_binary_ops_promote_numpy_scalars_as_numpy(backend, tdt):
    """``tensor op numpy_scalar`` has the dtype (and values) NumPy gives, the dtype of
    ``vtl.result_type``; a float32 tensor with ``numpy.float64(1)`` is float64."""
    have = supported_dtypes(backend)
    skip_unless_dtype(backend, tdt)
    host = _host(tdt)
    t = vtl.asarray(host)
    for sdt in SCALAR_DTYPES:
        s = _np_scalar(sdt)
        if sdt not in have or np.result_type(host, s).name not in have:
            continue
        for name, f, ref in _binary_cases(tdt, sdt):
            got = f(t, s)
            want = ref(host, s)
            assert got.dtype == want.dtype, (name, tdt, sdt)
            if name != "less":
                assert got.dtype == vtl.result_type(t, s), (name, tdt, sdt)
            assert_close(got, want)


def test_numpy_scalars_with_where_searchsorted_isin(backend):
    skip_unless_dtype(backend, "float64")
    x = vtl.asarray(np.array([0.1, 0.5, 2.0], dtype=np.float32))
    host = x.numpy()
    c = x > 0.3
    for s in (np.float64(0.1), np.float32(0.1), np.int64(3)):
        got = vtl.where(c, x, s)
        want = np.where(host > 0.3, host, s)
        assert_close(got, want)
        assert got.dtype == vtl.result_type(x, s)
        assert_close(vtl.where(c, s, x), np.where(host > 0.3, s, host))
    assert vtl.where(c, x, 0.1).dtype == vtl.float32  # a Python float stays weak
    # np.float64(0.1) is below float32(0.1): compared in float64, as NumPy does
    for side in ("left", "right"):
        got = vtl.searchsorted(x, np.float64(0.1), side=side)
        assert int(got) == int(np.searchsorted(host, np.float64(0.1), side=side))
    assert int(vtl.searchsorted(x, np.float32(0.1), side="right")) == 1
    assert not bool(vtl.isin(np.float64(0.1), x))  # float32(0.1) != 0.1 in float64
    assert bool(vtl.isin(np.float32(0.1), x))
    np.testing.assert_array_equal(vtl.isin(x, np.float64(0.5)).numpy(), [False, True, False])


def test_numpy_scalar_errors_and_in_place_ops(backend):
    skip_unless_dtype(backend, "float64")
    t = vtl.asarray(np.array([1.0, 2.0], dtype=np.float32))
    with pytest.raises(TypeError, match="in-place add would change the dtype from float32 to "
                                        "float64"):
        t += np.float64(1)  # as with a 0-d float64 tensor
    t += np.float32(1)
    assert_close(t, np.array([2.0, 3.0], dtype=np.float32))
    d = vtl.asarray(np.array([1.0, 2.0]))
    d *= np.float32(2)
    assert_close(d, np.array([2.0, 4.0]))
    with pytest.raises(TypeError, match="NumPy float128 scalar: expected a scalar of one of the "
                                        "dtypes bool, int8"):
        _ = t + np.longdouble(1)
    for bad in (np.bool_(True), vtl.asarray(True)):  # a bool 0-d array either way
        with pytest.raises(TypeError, match="add\\(\\) expected a tensor of numeric dtype, "
                                            "got bool"):
            _ = t + bad
    with pytest.raises(TypeError, match="NumPy <U1 scalar"):
        _ = t * np.str_("a")
    with pytest.raises(TypeError, match="bitwise_and\\(\\) expected a tensor of integer or "
                                        "boolean dtype, got float64"):
        _ = vtl.asarray(np.array([1, 2], dtype=np.int32)) & np.float64(1)
    with pytest.raises(TypeError, match="unsupported dtype float128"):
        vtl.where(t > 1, t, np.longdouble(1))


# -- special cases the cupy namespace patches, on every backend ------------------------------
def _remainder_cases(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """Every special divisor with finite, zero, infinite and nan dividends, and small finite
    divisors with the dividends whose quotient stays small."""
    xs = [0.0, -0.0, 1.0, -1.0, 2.5, -7.0, 1e30, -1e30, 3e-30, -3e-30, INF, -INF, NAN]
    pairs = [(a, b) for a in xs for b in (INF, -INF, 0.0, -0.0, NAN)]
    pairs += [(a, b) for a in xs[:6] + [NAN, INF, -INF] for b in (2.5, -7.0)]
    x, y = np.array(pairs, dtype).T
    return x.copy(), y.copy()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_remainder_special_cases_on_every_backend(backend, dtype):
    """``%``, ``%=`` and ``remainder`` with infinite divisors: ``x1`` when the signs agree,
    else ``x2`` (the standard, NumPy and Python); signed zeros and nans as NumPy."""
    skip_unless_dtype(backend, dtype)
    x, y = _remainder_cases(dtype)
    with np.errstate(all="ignore"):
        want = np.remainder(x, y)
    assert_same_values((vtl.asarray(x) % vtl.asarray(y)).numpy(), want, 0)
    assert_same_values(vtl.remainder(vtl.asarray(x), vtl.asarray(y)).numpy(), want, 0)
    for d in (INF, -INF):
        with np.errstate(all="ignore"):
            want = np.remainder(x, np.array(d, dtype))
        assert_same_values((vtl.asarray(x) % d).numpy(), want, 0)
        t = vtl.asarray(x)
        t %= d
        assert_same_values(t.numpy(), want, 0)
        with np.errstate(all="ignore"):
            assert_same_values((d % vtl.asarray(y)).numpy(),
                               np.remainder(np.array(d, dtype), y), 0)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("fname", COMPLEX_FUNCTIONS)
def test_complex_special_cases_on_every_backend(backend, fname, dtype):
    """The standard's tables of complex ``log``, ``log1p``, ``acosh`` and ``tanh`` (with
    their symmetries), and NumPy's values on the other special inputs."""
    skip_unless_dtype(backend, dtype)
    z = special_grid(dtype)
    got = getattr(vtl, fname)(vtl.asarray(z)).numpy()
    assert assert_spec_cases(fname, z, got) > 20
    with np.errstate(all="ignore"):
        want = getattr(np, NUMPY_NAME[fname])(z)
    other = [spec_value(fname, float(v.real), float(v.imag)) is None for v in z]
    assert_same_values(got[other], want[other], 1e-6 if dtype == "complex64" else 1e-14)


@pytest.mark.parametrize("s1, s2", SOLVE_SHAPES)
def test_solve_of_systems_without_elements_on_every_backend(backend, s1, s2):
    x1, x2 = identity_system(s1, s2, "float32", "float32")
    got = vtl.linalg.solve(vtl.asarray(x1), vtl.asarray(x2))
    want = np.linalg.solve(x1, x2)
    assert got.shape == want.shape and got.dtype == want.dtype


def test_dlpack_copy_free_export_to_the_cpu(backend):
    """A copy-free export to another device is the standard's ``BufferError``: always on
    wgpu (its buffers never leave the device without a copy) and cupy; numpy tensors are on
    the CPU already."""
    t = vtl.asarray(np.arange(3.0, dtype=np.float32))
    if backend == "numpy":
        np.testing.assert_array_equal(
            np.from_dlpack(_Export(t, dl_device=(1, 0), copy=False)), [0.0, 1.0, 2.0])
    else:
        with pytest.raises(BufferError):
            t.__dlpack__(dl_device=(1, 0), copy=False)
    with pytest.raises(BufferError):
        t.__dlpack__(dl_device=(14, 0), copy=False)  # kDLOneAPI: no backend exports there


class _Export:
    """Hands ``t.__dlpack__`` fixed keyword arguments (for ``numpy.from_dlpack``)."""

    def __init__(self, t: vtl.Tensor, **kw: object) -> None:
        self.t, self.kw = t, kw

    def __dlpack__(self, **_: object) -> object:
        return self.t.__dlpack__(**self.kw)

    def __dlpack_device__(self) -> tuple:
        return self.t.__dlpack_device__()
