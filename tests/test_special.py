"""``vtl.special`` (and ``vtl.erf``/``erfc``/``erfinv``, the Tensor methods): values against
the C library and PyTorch, special values, gradients by finite differences and to second
order, 16-bit and integer inputs, and each backend's ``kernel("special")`` against the
portable code it replaces, on every backend."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import check_grad, use_kernel

import vtl
from vtl.backends.numpy import _compiled

X64 = np.concatenate([np.linspace(-6.0, 6.0, 241), [-27.0, -9.3, 1e-300, 5e-324, 0.5, 1.0,
                                                     9.3, 27.0]])
Y64 = np.concatenate([np.linspace(-0.999, 0.999, 199), [1 - 2.0**-53, -(1 - 1e-12), 1e-300,
                                                        0.5, 0.4999999, 0.5000001]])


def _host(backend: str, dtype) -> bool:
    return np.dtype(dtype).name in vtl.__array_namespace_info__().dtypes(
        device=vtl.Device(backend, 0))


def _oracle(name: str, x: np.ndarray) -> np.ndarray:
    return np.array([getattr(math, name)(float(v)) for v in x])


def _rel(got: np.ndarray, want: np.ndarray, floor: float) -> float:
    m = np.abs(want) > floor
    return float(np.max(np.abs(got[m] - want[m]) / np.abs(want[m])))


@pytest.mark.parametrize("name", ["erf", "erfc"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_erf_erfc_values(backend, name, dtype):
    if not _host(backend, dtype):
        pytest.skip(f"{backend} has no {dtype}")
    x = X64.astype(dtype)
    got = getattr(vtl, name)(vtl.asarray(x, device=backend))
    assert got.dtype == getattr(vtl, dtype)
    want = _oracle(name, x)
    floor = 1e-300 if dtype == "float64" else 1.2e-38
    assert _rel(got.numpy().astype(np.float64), want, floor) < (
        1e-14 if dtype == "float64" else 1e-6)
    np.testing.assert_array_equal(np.signbit(got.numpy()[want == 0]),
                                  np.signbit(want[want == 0]))


def test_special_values(backend):
    inf, nan = math.inf, math.nan
    x = vtl.asarray([inf, -inf, nan, 0.0, -0.0], device=backend)
    np.testing.assert_array_equal(vtl.erf(x).numpy(), [1.0, -1.0, nan, 0.0, -0.0])
    assert np.signbit(vtl.erf(x).numpy()[4])
    np.testing.assert_array_equal(vtl.erfc(x).numpy(), [0.0, 2.0, nan, 1.0, 1.0])
    y = vtl.asarray([1.0, -1.0, 1.5, -2.0, nan, 0.0, -0.0], device=backend)
    got = vtl.erfinv(y).numpy()
    np.testing.assert_array_equal(got, [inf, -inf, nan, nan, nan, 0.0, -0.0])
    assert np.signbit(got[6]) and not np.signbit(got[5])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_erfinv_inverts_erf(backend, dtype):
    if not _host(backend, dtype):
        pytest.skip(f"{backend} has no {dtype}")
    y = Y64.astype(dtype)
    y = y[np.abs(y) < 1]  # (float32 rounds the largest to 1)
    x = vtl.erfinv(vtl.asarray(y, device=backend)).numpy().astype(np.float64)
    yr = y.astype(np.float64)
    far = np.abs(yr) > 0.5
    # relative residuals of erf(x) near 0 and of erfc(|x|) near 1 (x's last-place
    # rounding alone moves the latter by up to 2 x^2 units, 70 at the end of float64)
    resid = np.where(far, (_oracle("erfc", np.abs(x)) - (1 - np.abs(yr))) / (1 - np.abs(yr)),
                     (_oracle("erf", x) - yr) / np.where(yr == 0, 1, yr))
    assert np.max(np.abs(resid)) < (2e-14 if dtype == "float64" else 2e-6)


def test_erfinv_matches_pytorch(backend):
    torch = pytest.importorskip("torch")
    for dtype, rtol in (("float64", 2e-15), ("float32", 5e-7)):
        if not _host(backend, dtype):
            continue
        y = Y64.astype(dtype)
        got = vtl.erfinv(vtl.asarray(y, device=backend)).numpy()
        want = torch.erfinv(torch.from_numpy(y)).numpy()
        m = np.isfinite(want)
        np.testing.assert_allclose(got[m], want[m], rtol=rtol, atol=0)


@pytest.mark.parametrize("name", ["erf", "erfc", "erfinv"])
def test_gradients_by_finite_differences(name):
    x = np.linspace(-0.9, 0.9, 7) * (1 if name == "erfinv" else 3)
    check_grad(getattr(vtl.special, name), x)


@pytest.mark.parametrize("name", ["erf", "erfc", "erfinv"])
def test_gradients_on_every_backend_and_second_order(backend, name):
    dt = vtl.float64 if _host(backend, "float64") else vtl.float32
    xs = np.linspace(-0.8, 0.8, 9)
    x = vtl.asarray(xs, dtype=dt, device=backend, requires_grad=True)
    (g,) = vtl.autograd.grad(vtl.sum(getattr(vtl, name)(x)), [x], create_graph=True)
    if name == "erfinv":
        y = np.array([float(v) for v in vtl.erfinv(vtl.asarray(xs, dtype=vtl.float64))])
        d1 = math.sqrt(math.pi) / 2 * np.exp(y * y)
        d2 = 2 * y * d1 * d1
    else:
        s = 1.0 if name == "erf" else -1.0
        d1 = s * 2 / math.sqrt(math.pi) * np.exp(-xs * xs)
        d2 = -2 * xs * d1
    tol = {"rtol": 1e-12} if dt == vtl.float64 else {"rtol": 2e-6, "atol": 1e-7}
    np.testing.assert_allclose(g.numpy(), d1, **tol)
    (h,) = vtl.autograd.grad(vtl.sum(g), [x])
    np.testing.assert_allclose(h.numpy(), d2, **tol)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16bit_inputs_are_computed_in_float32(backend, dtype):
    if not _host(backend, dtype):
        pytest.skip(f"{backend} has no {dtype}")
    x = vtl.asarray(np.linspace(-2.5, 2.5, 11), dtype=getattr(vtl, dtype), device=backend,
                    requires_grad=True)
    for name in ("erf", "erfc", "erfinv"):
        arg = x * 0.3 if name == "erfinv" else x
        y = getattr(vtl, name)(arg)
        assert y.dtype == x.dtype
        ref = getattr(vtl, name)(vtl.astype(arg.detach(), vtl.float32))
        np.testing.assert_array_equal(y.numpy().astype(np.float32),
                                      vtl.astype(ref, x.dtype).numpy().astype(np.float32))
        (g,) = vtl.autograd.grad(vtl.sum(y), [x])
        assert g.dtype == x.dtype


def test_integer_input_and_errors(backend):
    y = vtl.erf(vtl.asarray([0, 1, -2], device=backend))
    assert y.dtype == vtl.__array_namespace_info__().default_dtypes(
        device=vtl.Device(backend, 0))["real floating"]
    np.testing.assert_allclose(y.numpy(), [0.0, math.erf(1), math.erf(-2)], rtol=1e-6)
    with pytest.raises(TypeError, match="complex"):
        vtl.erf(vtl.asarray([1 + 1j], device=backend))


def test_tensor_methods_and_in_place(backend):
    x = vtl.asarray([0.25, -0.5], device=backend)
    np.testing.assert_array_equal(x.erf().numpy(), vtl.erf(x).numpy())
    np.testing.assert_array_equal(x.erfc().numpy(), vtl.erfc(x).numpy())
    np.testing.assert_array_equal(x.erfinv().numpy(), vtl.erfinv(x).numpy())
    want = vtl.erf(x).numpy()
    assert x.erf_() is x
    np.testing.assert_array_equal(x.numpy(), want)
    w = vtl.asarray([0.25, -0.5], device=backend, requires_grad=True)
    y = w * 1.0
    y.erfinv_()
    vtl.sum(y).backward()
    np.testing.assert_allclose(w.grad.numpy(),
                               math.sqrt(math.pi) / 2 * np.exp(y.detach().numpy() ** 2),
                               rtol=1e-5)


def test_ndtr_expit_logit(backend):
    x = vtl.asarray([-3.0, 0.0, 2.0], device=backend)
    np.testing.assert_allclose(vtl.special.ndtr(x).numpy(),
                               [0.5 * math.erfc(-v / math.sqrt(2)) for v in (-3, 0, 2)],
                               rtol=1e-6)
    np.testing.assert_array_equal(vtl.special.expit(x).numpy(), vtl.sigmoid(x).numpy())
    p = vtl.special.expit(x)
    np.testing.assert_allclose(vtl.special.logit(p).numpy(), x.numpy(), rtol=1e-5, atol=1e-6)
    got = vtl.special.logit(vtl.asarray([0.0, 1.0], device=backend), eps=1e-6).numpy()
    p = np.clip(np.array([0.0, 1.0], dtype=got.dtype), got.dtype.type(1e-6),
                got.dtype.type(1 - 1e-6))
    np.testing.assert_allclose(got, np.log(p / (1 - p)), rtol=1e-6)


class _Spy:
    def __init__(self, kern):
        self.kern, self.calls = kern, []

    def supports(self, name, dtype):
        return self.kern.supports(name, dtype)

    def __call__(self, name, x):
        self.calls.append(name)
        return self.kern(name, x)

    def grad(self, name, x, g):
        self.calls.append(name + "_grad")
        return self.kern.grad(name, x, g)


@pytest.mark.parametrize("name", ["erf", "erfc"])
def test_the_kernel_matches_the_portable_code(backend, name):
    """The backend's kernel (where it has one) against the portable code it replaces, on
    random values of every magnitude, forward and gradient: the two agree where both are
    accurate, and the kernel is within its dtype's tolerance of the float64 oracle
    everywhere (deep in the tails too)."""
    be = vtl.backends.get(backend)
    kern = be.kernel("special")
    rng = np.random.default_rng(4)
    ran = False
    for dtype in ("float32", "float64"):
        if kern is None or not kern.supports(name, getattr(vtl, dtype)):
            continue
        ran = True
        xs = (rng.standard_normal(300) * rng.choice([0.01, 1, 3, 8], 300)).astype(dtype)
        runs = []
        for k in (_Spy(kern), None):
            with use_kernel("special", k, backend):
                x = vtl.asarray(xs, device=backend, requires_grad=True)
                y = getattr(vtl, name)(x)
                vtl.sum(y * 1.5).backward()
                runs.append((y.detach().numpy(), x.grad.numpy()))
            if k is not None:
                assert k.calls == [name, name + "_grad"]
        (yk, gk), (yp, gp) = runs
        rtol = 1e-13 if dtype == "float64" else 2e-6
        mid = np.abs(xs) < 3
        np.testing.assert_allclose(yk[mid], yp[mid], rtol=rtol)
        np.testing.assert_allclose(gk[mid], gp[mid], rtol=rtol)
        x64 = xs.astype(np.float64)
        d = 1.5 * 2 / math.sqrt(math.pi) * np.exp(-x64 * x64) * (1 if name == "erf" else -1)
        floor = 1e-300 if dtype == "float64" else 1e-36
        assert _rel(yk.astype(np.float64), _oracle(name, x64), floor) < rtol
        assert _rel(gk.astype(np.float64), d, floor) < rtol
    if backend != "numpy" or _compiled.available():
        assert ran


@pytest.mark.parametrize("name", ["erf", "erfc"])
def test_gradient_at_special_values(backend, name):
    """The gradient 2/sqrt(pi) exp(-x^2) (negated for erfc) is 0 at +-inf and far out
    (where exp(-x^2) underflows), nan at nan, and finite near the underflow, on every
    backend, as the float64 oracle."""
    xs = np.array([np.inf, -np.inf, 1e20, -3e19, 40.0, 29.0, 10.0, 0.5, np.nan], np.float32)
    x = vtl.asarray(xs, device=backend, requires_grad=True)
    vtl.sum(getattr(vtl, name)(x)).backward()
    got = x.grad.numpy()
    x64 = xs.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        want = 2 / math.sqrt(math.pi) * np.exp(-x64 * x64) * (1 if name == "erf" else -1)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(xs))
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=1e-6, atol=1e-45,
                               equal_nan=True)


def test_non_contiguous_input_through_the_kernel(backend):
    x = vtl.asarray(np.linspace(-3, 3, 60, dtype=np.float32).reshape(6, 10), device=backend,
                    requires_grad=True)
    v = x.T[::2]
    y = vtl.erfc(v)
    (g,) = vtl.autograd.grad(vtl.sum(y), [x])
    want = np.array([[math.erfc(float(a)) for a in row] for row in v.detach().numpy()])
    np.testing.assert_allclose(y.detach().numpy(), want, rtol=1e-6)
    d = np.zeros((6, 10))
    d.T[::2] = -2 / math.sqrt(math.pi) * np.exp(-v.detach().numpy().astype(np.float64) ** 2)
    np.testing.assert_allclose(g.numpy(), d, rtol=1e-6, atol=1e-7)


# -- the gamma family, xlogy, sinc, entr -------------------------------------------------------

G64 = np.concatenate([np.linspace(-20.3, 30.7, 511), [0.5, 1.0, 2.0, 1e-8, 100.5, 1e5,
                                                       -0.5, -2.5, 3.0]])
G64 = G64[(G64 > 0) | (np.abs(G64 - np.round(G64)) > 1e-3)]  # (PyTorch is loose at poles)


def _close(got, want, rtol):
    """Relative to the larger of the value and 1 (the functions cross zero)."""
    err = np.abs(got - want) / np.maximum(np.abs(want), 1.0)
    assert err.max() < rtol, (err.max(), G64[err.argmax()] if err.size == G64.size else None)


@pytest.mark.parametrize("order", [None, 0, 1, 2, 3])
def test_gamma_family_matches_pytorch(backend, order):
    torch = pytest.importorskip("torch")
    if not _host(backend, "float64"):
        pytest.skip(f"{backend} has no float64")
    x = vtl.asarray(G64, device=backend)
    t = torch.from_numpy(G64)
    if order is None:
        got, want = vtl.lgamma(x), torch.lgamma(t)
    else:
        got, want = vtl.polygamma(order, x), torch.polygamma(order, t)
    # PyTorch's trigamma is good to about 5e-10 (1.6449340676 at 1, where pi^2/6 is
    # 1.6449340668): checked against exact values below
    _close(got.numpy(), want.numpy(), 1e-9 if order == 1 else 3e-13)


def test_polygamma_exact_values(backend):
    if not _host(backend, "float64"):
        pytest.skip(f"{backend} has no float64")
    x = vtl.asarray([1.0, 0.5, 2.0, -0.5], dtype=vtl.float64, device=backend)
    pi2 = math.pi ** 2
    np.testing.assert_allclose(vtl.polygamma(1, x).numpy(),
                               [pi2 / 6, pi2 / 2, pi2 / 6 - 1, pi2 / 2 + 4], rtol=2e-15)
    zeta3 = 1.2020569031595942
    np.testing.assert_allclose(vtl.polygamma(2, x[:2]).numpy(), [-2 * zeta3, -14 * zeta3],
                               rtol=2e-15)
    np.testing.assert_allclose(vtl.digamma(x[:2]).numpy(),
                               [-0.5772156649015329, -0.5772156649015329 - 2 * math.log(2)],
                               rtol=2e-15)


def test_gamma_family_special_values(backend):
    inf, nan = math.inf, math.nan
    x = vtl.asarray([0.0, -1.0, -3.0, inf, -inf, nan, 1.0, 2.0], device=backend)
    np.testing.assert_array_equal(vtl.lgamma(x).numpy(), [inf, inf, inf, inf, inf, nan, 0, 0])
    np.testing.assert_array_equal(vtl.digamma(x).numpy()[:6], [-inf, nan, nan, inf, nan, nan])
    np.testing.assert_array_equal(vtl.polygamma(1, x).numpy()[:6], [inf, inf, inf, 0, nan, nan])
    np.testing.assert_array_equal(vtl.polygamma(2, x).numpy()[:6],
                                  [-inf, -inf, -inf, 0, nan, nan])


def test_gamma_family_float32_is_float64_rounded(backend):
    if not _host(backend, "float64"):
        pytest.skip(f"{backend} has no float64")
    xs = np.array([0.3, 1.5, -2.7, 12.0, 40.5])
    x32 = vtl.asarray(xs.astype(np.float32), device=backend)
    x64 = vtl.asarray(xs.astype(np.float32).astype(np.float64), device=backend)
    for fn in (vtl.lgamma, vtl.digamma, lambda t: vtl.polygamma(2, t)):
        y = fn(x32)
        assert y.dtype == vtl.float32
        np.testing.assert_array_equal(y.numpy(), fn(x64).numpy().astype(np.float32))


@pytest.mark.parametrize("name", ["lgamma", "digamma", "polygamma2"])
def test_gamma_gradients_by_finite_differences(name):
    fn = (lambda t: vtl.polygamma(2, t)) if name == "polygamma2" else getattr(vtl, name)
    check_grad(fn, np.array([0.3, 1.7, 6.2, -0.4, -2.6]), rtol=1e-6)


def test_gamma_gradients_to_any_order(backend):
    if not _host(backend, "float64"):
        pytest.skip(f"{backend} has no float64")
    xs = np.array([0.7, 3.2, -1.4])
    x = vtl.asarray(xs, device=backend, requires_grad=True)
    (g,) = vtl.autograd.grad(vtl.sum(vtl.lgamma(x)), [x], create_graph=True)
    (h,) = vtl.autograd.grad(vtl.sum(g), [x], create_graph=True)
    (k,) = vtl.autograd.grad(vtl.sum(h), [x])
    for got, order in ((g, 0), (h, 1), (k, 2)):
        np.testing.assert_allclose(got.numpy(), vtl.polygamma(order, x.detach()).numpy(),
                                   rtol=1e-12)


def test_xlogy_xlog1py_sinc_entr_match_pytorch(backend):
    torch = pytest.importorskip("torch")
    nan, inf = math.nan, math.inf
    xs = np.array([0.0, 0.0, 0.0, 1.5, -2.0, 3.0, 2.0, nan])
    ys = np.array([0.0, nan, 2.0, 0.0, 3.0, inf, -0.5, 1.0])
    tx, ty = torch.from_numpy(xs), torch.from_numpy(ys)
    dt = vtl.float64 if _host(backend, "float64") else vtl.float32
    x, y = (vtl.asarray(a, dtype=dt, device=backend) for a in (xs, ys))
    for ours, theirs in ((vtl.xlogy, torch.xlogy), (vtl.special.xlog1py,
                                                   torch.special.xlog1py)):
        np.testing.assert_allclose(ours(x, y).numpy(), theirs(tx, ty).numpy(), rtol=1e-6,
                                   equal_nan=True)
    np.testing.assert_allclose(vtl.xlogy(2.0, y).numpy(), torch.xlogy(2.0, ty).numpy(),
                               rtol=1e-6, equal_nan=True)
    zs = np.array([0.0, 0.5, 1.0, -1.5, 1e-9, -3.0, 0.25, nan])
    z = vtl.asarray(zs, dtype=dt, device=backend)
    np.testing.assert_allclose(vtl.sinc(z).numpy(), torch.sinc(torch.from_numpy(zs)).numpy(),
                               rtol=1e-6, atol=1e-7, equal_nan=True)
    es = np.array([-1.0, 0.0, 0.5, 1.0, 3.0, nan])
    np.testing.assert_allclose(vtl.special.entr(vtl.asarray(es, dtype=dt, device=backend))
                               .numpy(), torch.special.entr(torch.from_numpy(es)).numpy(),
                               rtol=1e-6, equal_nan=True)


def test_xlogy_and_sinc_gradients_match_pytorch():
    torch = pytest.importorskip("torch")
    xs, ys = np.array([0.0, 1.5, -2.0]), np.array([0.7, 2.0, 3.0])
    x, y = (vtl.asarray(a, requires_grad=True) for a in (xs, ys))
    vtl.sum(vtl.xlogy(x, y) + vtl.sinc(x)).backward()
    tx, ty = (torch.tensor(a, requires_grad=True) for a in (xs, ys))
    (torch.xlogy(tx, ty) + torch.sinc(tx)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(y.grad.numpy(), ty.grad.numpy(), rtol=1e-6, atol=1e-12)


def test_gamma_errors_methods_and_aliases(backend):
    x = vtl.asarray([1.5, 2.5], device=backend)
    with pytest.raises(ValueError, match="non-negative"):
        vtl.polygamma(-1, x)
    with pytest.raises(TypeError, match="must be an int"):
        vtl.polygamma(1.0, x)
    with pytest.raises(TypeError, match="expected a tensor"):
        vtl.xlogy(1.0, 2.0)
    assert vtl.special.gammaln is vtl.lgamma and vtl.special.psi is vtl.digamma
    np.testing.assert_array_equal(x.lgamma().numpy(), vtl.lgamma(x).numpy())
    np.testing.assert_array_equal(x.polygamma(1).numpy(), vtl.polygamma(1, x).numpy())
    np.testing.assert_array_equal(x.xlogy(x).numpy(), vtl.xlogy(x, x).numpy())
    np.testing.assert_array_equal(x.sinc().numpy(), vtl.sinc(x).numpy())
    want = vtl.digamma(x).numpy()
    assert x.digamma_() is x
    np.testing.assert_array_equal(x.numpy(), want)
