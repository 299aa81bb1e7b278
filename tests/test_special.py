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
