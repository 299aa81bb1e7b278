"""vtl.fft: every function against numpy.fft on each backend, errors, and the VJP rules
against finite differences (including second order)."""

from __future__ import annotations

import inspect

import array_api_strict
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import vtl
from tests.helpers import (
    assert_close,
    check_grad,
    check_grad_matches_numpy,
    skip_unless_dtype,
    to_numpy,
)

NORMS = ("backward", "ortho", "forward")
C2C_1D = ("fft", "ifft")
R2C_1D = ("rfft", "ihfft")
C2R_1D = ("irfft", "hfft")
ALL_1D = C2C_1D + R2C_1D + C2R_1D
ALL_ND = ("fftn", "ifftn", "rfftn", "irfftn")
COMPLEX_OF = {"float32": np.complex64, "float64": np.complex128,
              "complex64": np.complex64, "complex128": np.complex128}
REAL_OF = {"float32": np.float32, "float64": np.float64,
           "complex64": np.float32, "complex128": np.float64}


def _data(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    x = rng.standard_normal(shape)
    if dtype.startswith("complex"):
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def _input_dtypes(fname: str) -> tuple[str, ...]:
    if fname in ("rfft", "ihfft", "rfftn"):
        return ("float32", "float64")
    return ("float32", "float64", "complex64", "complex128")


def _expected_dtype(fname: str, dtype: str) -> type:
    if fname in ("irfft", "hfft", "irfftn"):
        return REAL_OF[dtype]
    return COMPLEX_OF[dtype]


def _tols(dtype: str) -> dict[str, float]:
    if dtype in ("float32", "complex64"):
        return {"rtol": 1e-4, "atol": 1e-4}
    return {"rtol": 1e-9, "atol": 1e-9}


def _compare(fname: str, x: np.ndarray, dtype: str, **kw: object) -> None:
    expected = getattr(np.fft, fname)(x.astype(np.float64 if x.dtype.kind == "f" else
                                               np.complex128), **kw)
    got = getattr(vtl.fft, fname)(vtl.asarray(x), **kw)
    assert got.device == vtl.asarray(x).device
    assert_close(got, expected.astype(_expected_dtype(fname, dtype)), **_tols(dtype))


# -- signatures -------------------------------------------------------------------------
@pytest.mark.parametrize("name", array_api_strict.fft.__all__)
def test_signature_matches_the_standard(name):
    ours = inspect.signature(getattr(vtl.fft, name))
    spec = inspect.signature(getattr(array_api_strict.fft, name))
    assert [(p.name, p.kind, p.default) for p in ours.parameters.values()] == [
        (p.name, p.kind, p.default) for p in spec.parameters.values()]
    assert set(vtl.fft.__all__) == set(array_api_strict.fft.__all__)


# -- one-dimensional transforms ------------------------------------------------------------
@given(data=st.data())
def test_1d_transforms_match_numpy(backend, data):
    fname = data.draw(st.sampled_from(ALL_1D), label="fname")
    dtype = data.draw(st.sampled_from(_input_dtypes(fname)), label="dtype")
    skip_unless_dtype(backend, dtype)
    shape = data.draw(st.lists(st.integers(1, 7), min_size=1, max_size=3).map(tuple),
                      label="shape")
    axis = data.draw(st.integers(-len(shape), len(shape) - 1), label="axis")
    n = data.draw(st.none() | st.integers(1, 10), label="n")
    if fname in C2R_1D and n is None:
        assume(shape[axis] >= 2)
    norm = data.draw(st.sampled_from(NORMS), label="norm")
    x = _data(np.random.default_rng(data.draw(st.integers(0, 2**16))), shape, dtype)
    _compare(fname, x, dtype, n=n, axis=axis, norm=norm)


@pytest.mark.parametrize("fname", ALL_1D)
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
def test_1d_dtype_and_padding_truncation(backend, fname, dtype):
    if dtype not in _input_dtypes(fname):
        return
    skip_unless_dtype(backend, dtype)
    skip_unless_dtype(backend, COMPLEX_OF[dtype])  # every 1-D transform involves complex data
    x = _data(np.random.default_rng(1), (2, 6), dtype)
    for n in (None, 3, 4, 9, 12):  # odd/even, trimming and zero-padding
        _compare(fname, x, dtype, n=n, axis=1)
        _compare(fname, x, dtype, n=n, axis=-1, norm="ortho")
    out = getattr(vtl.fft, fname)(vtl.asarray(x), n=5, axis=0)
    assert out.dtype == _expected_dtype(fname, dtype)
    size = 5 // 2 + 1 if fname in R2C_1D else 5
    assert out.shape == (size, 6)


def test_real_input_to_complex_transforms(backend):
    skip_unless_dtype(backend, "complex64")
    x = _data(np.random.default_rng(2), (5,), "float32")
    for fname in ("fft", "ifft", "irfft", "hfft", "fftn", "ifftn", "irfftn"):
        _compare(fname, x, "float32")


def test_inverse_pairs_round_trip(backend):
    skip_unless_dtype(backend, "complex64")
    rng = np.random.default_rng(3)
    z = vtl.asarray(_data(rng, (4, 7), "complex64"))
    r = vtl.asarray(_data(rng, (4, 7), "float32"))
    for norm in NORMS:
        assert_close(vtl.fft.ifft(vtl.fft.fft(z, norm=norm), norm=norm), to_numpy(z), atol=1e-5)
        assert_close(vtl.fft.ifftn(vtl.fft.fftn(z, norm=norm), norm=norm), to_numpy(z),
                     atol=1e-5)
        assert_close(vtl.fft.irfft(vtl.fft.rfft(r, norm=norm), n=7, norm=norm), to_numpy(r),
                     atol=1e-5)
        assert_close(vtl.fft.irfftn(vtl.fft.rfftn(r, norm=norm), s=(4, 7), axes=(0, 1),
                                    norm=norm), to_numpy(r), atol=1e-5)
        assert_close(vtl.fft.hfft(vtl.fft.ihfft(r, norm=norm), n=7, norm=norm), to_numpy(r),
                     atol=1e-5)


# -- n-dimensional transforms ---------------------------------------------------------------
@st.composite
def _nd_case(draw, fname):
    shape = draw(st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple))
    ndim = len(shape)
    if draw(st.booleans()):
        axes, s = None, None
    else:
        perm = draw(st.permutations(range(ndim)))
        k = draw(st.integers(1, ndim))
        axes = [a - ndim if draw(st.booleans()) else a for a in perm[:k]]
        s = draw(st.none() | st.lists(st.integers(1, 7) | st.just(-1), min_size=k,
                                      max_size=k))
    last = (axes or list(range(ndim)))[-1]
    if fname == "irfftn":
        if s is not None and s[-1] == -1:  # NumPy deviates here (see the next test)
            s[-1] = 2 * (shape[last] - 1)
        assume(s is not None or shape[last] >= 2)
        assume(s is None or s[-1] >= 1)
    return shape, axes, s


@pytest.mark.parametrize("fname", ALL_ND)
@given(data=st.data())
def test_nd_transforms_match_numpy(backend, fname, data):
    dtype = data.draw(st.sampled_from(_input_dtypes(fname)), label="dtype")
    skip_unless_dtype(backend, dtype)
    skip_unless_dtype(backend, COMPLEX_OF[dtype])
    shape, axes, s = data.draw(_nd_case(fname), label="case")
    norm = data.draw(st.sampled_from(NORMS), label="norm")
    x = _data(np.random.default_rng(data.draw(st.integers(0, 2**16))), shape, dtype)
    _compare(fname, x, dtype, s=s, axes=axes, norm=norm)


@pytest.mark.parametrize("fname", ALL_ND)
def test_nd_axes_order_and_sizes(backend, fname):
    dtype = _input_dtypes(fname)[-1]
    skip_unless_dtype(backend, dtype)
    skip_unless_dtype(backend, COMPLEX_OF[dtype])
    x = _data(np.random.default_rng(4), (3, 4, 5), dtype)
    for axes, s in [((2, 0), (6, 2)), ((0, 2), (2, 6)), ((-1,), (3,)), ((1, 2, 0), (5, -1, 4)),
                    ((0, 1, 2), None)]:
        for norm in NORMS:
            _compare(fname, x, dtype, s=s, axes=axes, norm=norm)


def test_irfftn_minus_one_uses_every_input_bin(backend):
    """The standard: s[i] == -1 uses all elements of the input along axis i."""
    x = _data(np.random.default_rng(5), (3, 4), "complex128")
    skip_unless_dtype(backend, "complex128")
    got = vtl.fft.irfftn(vtl.asarray(x), s=(-1, -1), axes=(0, 1))
    assert_close(got, np.fft.irfftn(x, s=(3, 6), axes=(0, 1)), rtol=1e-9, atol=1e-9)
    assert_close(vtl.fft.irfftn(vtl.asarray(x), s=(-1,), axes=(0,)),
                 np.fft.irfftn(x, s=(4,), axes=(0,)), rtol=1e-9, atol=1e-9)


def test_fftn_without_axes_is_a_complex_copy(backend):
    skip_unless_dtype(backend, "complex64")
    x = vtl.asarray(np.arange(6.0, dtype=np.float32).reshape(2, 3))
    for fname in ("fftn", "ifftn"):
        out = getattr(vtl.fft, fname)(x, axes=())
        assert_close(out, np.arange(6.0).reshape(2, 3).astype(np.complex64))
    z = vtl.asarray(np.array(2.0 + 1j, dtype=np.complex64))  # 0-D: no axes to transform
    assert_close(vtl.fft.fftn(z), np.array(2.0 + 1j, dtype=np.complex64))


# -- shifts --------------------------------------------------------------------------------
@given(data=st.data())
def test_shifts_match_numpy(backend, data):
    dtype = data.draw(st.sampled_from(["float32", "float64", "complex64", "int32", "bool"]),
                      label="dtype")
    skip_unless_dtype(backend, dtype)
    shape = data.draw(st.lists(st.integers(0, 6), min_size=0, max_size=3).map(tuple),
                      label="shape")
    ndim = len(shape)
    if ndim and data.draw(st.booleans()):
        axes = data.draw(st.lists(st.integers(-ndim, ndim - 1), min_size=1, max_size=ndim,
                                  unique_by=lambda a: a % ndim), label="axes")
        if len(axes) == 1 and data.draw(st.booleans()):
            axes = axes[0]
    else:
        axes = None
    x = (np.random.default_rng(0).standard_normal(shape) * 10).astype(dtype)
    for fname in ("fftshift", "ifftshift"):
        got = getattr(vtl.fft, fname)(vtl.asarray(x), axes=axes)
        expected = getattr(np.fft, fname)(x, axes=axes) if ndim else x
        assert_close(got, expected)


def test_shifts_invert_each_other_for_odd_lengths(backend):
    x = vtl.asarray(np.arange(15.0).reshape(3, 5))
    y = vtl.fft.fftshift(x)
    assert_close(y, np.fft.fftshift(np.arange(15.0).reshape(3, 5)))
    assert_close(vtl.fft.ifftshift(y), np.arange(15.0).reshape(3, 5))
    assert not np.array_equal(to_numpy(vtl.fft.fftshift(y)), np.arange(15.0).reshape(3, 5))


# -- frequencies -----------------------------------------------------------------------------
@given(n=st.integers(1, 12), d=st.sampled_from([1.0, 0.5, 2, 1e-3, -0.25]),
       dtype=st.sampled_from([None, "float32", "float64"]))
def test_frequencies_match_numpy(backend, n, d, dtype):
    if dtype is not None:
        skip_unless_dtype(backend, dtype)
    want = vtl.float32 if dtype is None else np.dtype(dtype)
    for fname in ("fftfreq", "rfftfreq"):
        got = getattr(vtl.fft, fname)(n, d=d, dtype=None if dtype is None else want)
        assert got.device == vtl.Device(backend, 0)
        assert got.dtype == want
        assert_close(got, getattr(np.fft, fname)(n, d=d).astype(want), rtol=1e-6, atol=0)


def test_frequency_values_and_device(backend):
    assert_close(vtl.fft.fftfreq(5, dtype=vtl.float64),
                 np.array([0.0, 1.0, 2.0, -2.0, -1.0]) / 5)
    assert_close(vtl.fft.fftfreq(4, d=0.5, dtype=vtl.float64), np.array([0.0, 0.5, -1.0, -0.5]))
    assert_close(vtl.fft.rfftfreq(4, d=0.5, dtype=vtl.float64), np.array([0.0, 0.5, 1.0]))
    assert_close(vtl.fft.rfftfreq(1, dtype=vtl.float64), np.array([0.0]))
    dev = vtl.Device(backend, 0)
    with vtl.use_backend("numpy"):
        assert vtl.fft.fftfreq(3, device=dev).device == dev
        assert vtl.fft.rfftfreq(3, device=str(dev)).device == dev
    assert vtl.fft.fftfreq(np.int64(3)).shape == (3,)


# -- errors -----------------------------------------------------------------------------------
def test_errors(backend):
    skip_unless_dtype(backend, "complex64")
    x = vtl.asarray(np.ones((2, 4), dtype=np.float32))
    z = vtl.asarray(np.ones((2, 4), dtype=np.complex64))
    for fname in ALL_1D:
        f = getattr(vtl.fft, fname)
        with pytest.raises(ValueError, match=f"{fname}\\(\\): norm"):
            f(x, norm="Ortho")
        with pytest.raises(ValueError, match="invalid number of data points"):
            f(x, n=0)
        with pytest.raises(ValueError, match="positive"):
            f(x, n=-2)
        with pytest.raises(TypeError, match="n must be an integer"):
            f(x, n=4.0)
        with pytest.raises(TypeError, match="n must be an integer"):
            f(x, n=True)
        with pytest.raises(IndexError, match="out of bounds"):
            f(x, axis=2)
        with pytest.raises(IndexError, match="out of bounds"):
            f(x, axis=-3)
        with pytest.raises(TypeError, match="axis must be an integer"):
            f(x, axis=(0,))
        with pytest.raises(IndexError, match="0-D"):
            f(vtl.asarray(np.float32(1.0)))
        with pytest.raises(TypeError, match="floating-point"):
            f(vtl.asarray(np.ones(4, dtype=np.int32)))
        with pytest.raises(TypeError, match="vtl.Tensor"):
            f(np.ones(4))
    for fname in ("rfft", "ihfft", "rfftn"):
        with pytest.raises(TypeError, match="real floating-point"):
            getattr(vtl.fft, fname)(z)
    for fname in ("fft", "rfft", "ihfft", "ifft"):
        with pytest.raises(ValueError, match="empty"):
            getattr(vtl.fft, fname)(vtl.asarray(np.ones((2, 0), dtype=np.float32)))
    for fname in C2R_1D:
        with pytest.raises(ValueError, match="2\\*\\(M-1\\)"):
            getattr(vtl.fft, fname)(vtl.asarray(np.ones((3, 1), dtype=np.complex64)))
    for fname in ALL_ND:
        f = getattr(vtl.fft, fname)
        arg = x if fname == "rfftn" else z
        with pytest.raises(ValueError, match="has 3 entries but the input has only 2 axes"):
            f(arg, s=(2, 2, 2))
        with pytest.raises(ValueError, match="same length"):
            f(arg, s=(2,), axes=(0, 1))
        with pytest.raises(ValueError, match="repeated axis"):
            f(arg, axes=(1, -1))
        with pytest.raises(ValueError, match="positive"):
            f(arg, s=(0, 2), axes=(0, 1))
        with pytest.raises(IndexError, match="out of bounds"):
            f(arg, axes=(0, 2))
        with pytest.raises(ValueError, match="norm"):
            f(arg, norm="none")
        with pytest.raises(TypeError, match="floating-point"):
            f(vtl.asarray(np.ones((2, 2), dtype=np.int64)))
    for fname in ("rfftn", "irfftn"):
        with pytest.raises(ValueError, match="at least one axis"):
            getattr(vtl.fft, fname)(x, axes=())
    with pytest.raises(ValueError, match="2\\*\\(M-1\\)"):
        vtl.fft.irfftn(vtl.asarray(np.ones((3, 1), dtype=np.complex64)))
    for fname in ("fftshift", "ifftshift"):
        with pytest.raises(IndexError, match="out of bounds"):
            getattr(vtl.fft, fname)(x, axes=2)
        with pytest.raises(ValueError, match="repeated axis"):
            getattr(vtl.fft, fname)(x, axes=(0, -2))
    for fname in ("fftfreq", "rfftfreq"):
        f = getattr(vtl.fft, fname)
        with pytest.raises(ValueError, match="positive"):
            f(0)
        with pytest.raises(TypeError, match="integer"):
            f(4.0)
        with pytest.raises(ValueError, match="non-zero"):
            f(4, d=0.0)
        with pytest.raises(TypeError, match="real number"):
            f(4, d="1")
        with pytest.raises(TypeError, match="real floating-point dtype"):
            f(4, dtype=vtl.int32)
        with pytest.raises(TypeError, match="real floating-point dtype"):
            f(4, dtype=vtl.complex64)


# -- gradients -----------------------------------------------------------------------------
def _weighted(fname: str, w: np.ndarray, **kw: object):
    """``f(x) = real(transform(x) * w)`` with a fixed complex ``w`` (mixes both parts)."""
    def f(x):
        y = getattr(vtl.fft, fname)(x, **kw)
        return vtl.real(y * vtl.asarray(w.astype(y.dtype), device=x.device))
    return f


def _weight_for(fname: str, shape: tuple[int, ...], **kw: object) -> np.ndarray:
    rng = np.random.default_rng(7)
    out = getattr(np.fft, fname)(np.ones(shape), **kw)
    w = rng.standard_normal(out.shape)
    return w + 1j * rng.standard_normal(out.shape) if out.dtype.kind == "c" else w


CASES_1D = [
    {}, {"n": 3}, {"n": 4}, {"n": 8}, {"n": 9}, {"n": 1}, {"n": 2},
    {"axis": 0, "norm": "ortho"}, {"axis": 0, "n": 6, "norm": "forward"},
    {"n": 4, "norm": "ortho"}, {"n": 7, "norm": "forward"},
]


@pytest.mark.parametrize("fname", ALL_1D)
@pytest.mark.parametrize("kw", CASES_1D, ids=str)
def test_grad_1d_real_input(fname, kw):
    x = np.random.default_rng(5).standard_normal((3, 5))
    w = _weight_for(fname, x.shape, **kw)
    check_grad(_weighted(fname, w, **kw), x)


@pytest.mark.parametrize("fname", C2C_1D + C2R_1D)
@pytest.mark.parametrize("kw", CASES_1D, ids=str)
def test_grad_1d_complex_input(fname, kw):
    rng = np.random.default_rng(6)
    re, im = rng.standard_normal((3, 5)), rng.standard_normal((3, 5))
    w = _weight_for(fname, re.shape, **kw)
    g = _weighted(fname, w, **kw)
    check_grad(lambda a, b: g(a + b * 1j), re, im)


def test_grad_complex_input_is_complex_and_real_input_real():
    for fname in ("fft", "irfft", "hfft", "fftn", "irfftn"):
        f = getattr(vtl.fft, fname)
        for dtype in (np.float32, np.complex64):
            x = vtl.asarray(np.ones((2, 4), dtype=dtype), requires_grad=True)
            (g,) = vtl.autograd.grad(vtl.sum(vtl.real(f(x))), [x])
            assert g.dtype == dtype and g.shape == (2, 4)


CASES_ND = [
    {}, {"axes": (1, 0)}, {"axes": (0, 2), "s": (3, 5)}, {"axes": (2, 1), "s": (4, 3)},
    {"axes": (-1,), "s": (2,), "norm": "ortho"}, {"axes": (0, 1, 2), "s": (1, -1, 6),
                                                  "norm": "forward"},
    {"axes": (1, 2), "s": (5, 7), "norm": "ortho"},
]


@pytest.mark.parametrize("fname", ALL_ND)
@pytest.mark.parametrize("kw", CASES_ND, ids=str)
def test_grad_nd_real_input(fname, kw):
    x = np.random.default_rng(8).standard_normal((2, 3, 4))
    w = _weight_for(fname, x.shape, **kw)
    check_grad(_weighted(fname, w, **kw), x)


@pytest.mark.parametrize("fname", ("fftn", "ifftn", "irfftn"))
@pytest.mark.parametrize("kw", CASES_ND, ids=str)
def test_grad_nd_complex_input(fname, kw):
    rng = np.random.default_rng(9)
    re, im = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3, 4))
    w = _weight_for(fname, re.shape, **kw)
    g = _weighted(fname, w, **kw)
    check_grad(lambda a, b: g(a + b * 1j), re, im)


@pytest.mark.parametrize("fname", ("fftshift", "ifftshift"))
@pytest.mark.parametrize("axes", [None, 0, (1,), (-1, 0)])
def test_grad_shifts(fname, axes):
    x = np.random.default_rng(10).standard_normal((3, 5))
    check_grad(lambda t: getattr(vtl.fft, fname)(t, axes=axes), x)
    rng = np.random.default_rng(11)
    re, im = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    check_grad(lambda a, b: vtl.real(getattr(vtl.fft, fname)(a + b * 1j, axes=axes) * (1 - 2j)),
               re, im)


def test_grad_composition_fft_conv():
    """A circular convolution through rfft/irfft, differentiated in both operands."""
    rng = np.random.default_rng(12)
    a, b = rng.standard_normal((2, 6)), rng.standard_normal((2, 6))

    def conv(x, k):
        return vtl.fft.irfft(vtl.fft.rfft(x) * vtl.fft.rfft(k), n=6)

    check_grad(conv, a, b)
    got = conv(vtl.asarray(a), vtl.asarray(b))
    expected = np.stack([[np.sum(a[r] * np.roll(b[r][::-1], j + 1)) for j in range(6)]
                         for r in range(2)])
    assert_close(got, expected, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("kw", [{}, {"n": 5, "norm": "ortho"}, {"n": 8, "norm": "forward"}],
                         ids=str)
def test_second_order_fft(kw):
    w = _weight_for("fft", (2, 6), **kw)

    def loss(x):
        y = vtl.fft.fft(x, **kw)
        p = vtl.real(y * vtl.conj(y))
        return vtl.sum(vtl.exp(p * 0.05) * vtl.asarray(w.real))

    def complex_loss(re, im):
        y = vtl.fft.fft(re + im * 1j, **kw)
        return vtl.sum(vtl.exp(vtl.real(y * vtl.conj(y)) * 0.05) * vtl.asarray(w.real))

    rng = np.random.default_rng(13)
    x = rng.standard_normal((2, 6))
    check_grad(vtl.grad(loss), x, rtol=1e-4)
    def both(re, im):
        g_re, g_im = vtl.grad(complex_loss, argnums=(0, 1))(re, im)
        return g_re + g_im * 0.5

    check_grad(both, x, rng.standard_normal((2, 6)), rtol=1e-4)


@pytest.mark.parametrize("kw", [{}, {"n": 5, "norm": "ortho"}, {"n": 8, "norm": "forward"},
                                {"n": 3}], ids=str)
def test_second_order_rfft(kw):
    w = _weight_for("rfft", (2, 6), **kw)

    def loss(x):
        y = vtl.fft.rfft(x, **kw)
        p = vtl.real(y * vtl.conj(y))
        return vtl.sum(vtl.exp(p * 0.05) * vtl.asarray(w.real))

    x = np.random.default_rng(14).standard_normal((2, 6))
    check_grad(vtl.grad(loss), x, rtol=1e-4)

    def loss_irfft(re, im):  # and irfft, the adjoint rfft's rule uses
        y = vtl.fft.irfft(re + im * 1j, n=kw.get("n"))
        return vtl.sum(vtl.exp(y * 0.1))

    rng = np.random.default_rng(15)
    re, im = rng.standard_normal((2, 4)), rng.standard_normal((2, 4))
    check_grad(lambda a, b: vtl.grad(loss_irfft, argnums=(0, 1))(a, b)[1], re, im, rtol=1e-4)


@pytest.mark.parametrize("fname,kw", [
    ("fft", {"n": 7}), ("ifft", {"norm": "ortho"}), ("rfft", {"n": 4}), ("irfft", {"n": 9}),
    ("hfft", {}), ("ihfft", {"n": 3, "norm": "forward"}), ("fftn", {"axes": (1, 0)}),
    ("ifftn", {"s": (3, 6), "axes": (0, 1)}), ("rfftn", {}),
    ("irfftn", {"s": (2, 5), "axes": (1, 0)}), ("fftshift", {}), ("ifftshift", {"axes": 1}),
], ids=str)
def test_grad_matches_numpy_backend(backend, fname, kw):
    x = np.random.default_rng(16).standard_normal((4, 5))
    if fname in ("fftshift", "ifftshift"):
        check_grad_matches_numpy(lambda t: getattr(vtl.fft, fname)(t, **kw), backend, x)
        return
    skip_unless_dtype(backend, "complex128")
    w = _weight_for(fname, x.shape, **kw)
    check_grad_matches_numpy(_weighted(fname, w, **kw), backend, x)
