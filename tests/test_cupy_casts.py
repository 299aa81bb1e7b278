"""The cupy backend's float32 <-> float16/bfloat16 casts (``vtl/backends/cupy/casts.py``):
on the host, the CUDA kernels built with the emulation of ``test_cupy_nn_kernels`` and
driven through the real wrapper, bit for bit against NumPy's and ml_dtypes' casts (nearest
even, overflow to infinity, subnormals, signed zeros and nans); on a GPU, the namespace's
``astype`` against NumPy's."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from test_cupy_nn_kernels import _DEV, FakeCupy, build_host_lib

from vtl.backends.cupy import casts as C

LOW = {"float16": np.dtype(np.float16), "bfloat16": np.dtype(ml_dtypes.bfloat16)}
_VARIANTS = [(spec, c, "int") for spec in (C.TO_LOW, C.FROM_LOW) for c in ("half", "bfloat16")]


@pytest.fixture(scope="module")
def casts_lib(tmp_path_factory):
    return build_host_lib(tmp_path_factory.mktemp("casts"), _VARIANTS)


@pytest.fixture
def host(casts_lib, monkeypatch):
    cp = FakeCupy(casts_lib, _VARIANTS)
    monkeypatch.setattr(C.CupyCasts, "_device_of", staticmethod(lambda a: _DEV))
    return cp, C.CupyCasts(cp)


def _floats(n: int) -> np.ndarray:
    """float32 values that exercise the rounding: specials, ties, both overflow edges and
    subnormals of either 16-bit format, random magnitudes."""
    rng = np.random.default_rng(n)
    special = np.array([0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, 65504.0, 65520.0,
                        -65519.99, 6e-8, -3e-8, 5.96e-8, 1e-40, -1e-45, 3.4e38, -3.39e38,
                        1.0 + 2.0**-11, 1.0 + 3 * 2.0**-11, 1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8],
                       np.float32)
    x = (rng.standard_normal(n) * np.exp(rng.uniform(-30, 30, n))).astype(np.float32)
    x[: min(n, special.size)] = special[: min(n, special.size)]
    return x


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(4,), (3, 8), (2, 5, 12), (1024,)])
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # float16 overflow
def test_casts_bit_for_bit(host, name, shape):
    cp, cast = host
    dt = LOW[name]
    x = _floats(int(np.prod(shape))).reshape(shape)
    cp.log.clear()
    low = cast(x, dt)
    assert cp.log == ["vtl_cast_to_low"] and low.dtype == dt and low.shape == shape
    np.testing.assert_array_equal(low.view(np.uint16), x.astype(dt).view(np.uint16))
    back = cast(low, np.float32)
    assert cp.log[-1] == "vtl_cast_from_low" and back.dtype == np.float32
    np.testing.assert_array_equal(back.view(np.uint32), low.astype(np.float32).view(np.uint32))


def test_casts_decline(host):
    _, cast = host
    x = np.zeros(16, np.float32)
    assert cast(x[:6], np.float16) is None  # not whole groups of four
    assert cast(x[::2], np.float16) is None  # not contiguous
    assert cast(np.zeros(17, np.float32)[1:], np.float16) is None  # not 16-byte aligned
    assert cast(x, np.float64) is None and cast(x.astype(np.float64), np.float16) is None
    assert cast(x.astype(np.float16), ml_dtypes.bfloat16) is None
    assert cast(x[:0], np.float16) is None


def test_namespace_astype_on_the_gpu():
    cp = pytest.importorskip("cupy")
    try:
        cp.cuda.runtime.getDeviceCount()
    except Exception:  # noqa: BLE001 - no driver / no device
        pytest.skip("no CUDA device")
    from vtl.backends.cupy import namespace as ns

    for dt in LOW.values():
        with np.errstate(over="ignore"):
            x = _floats(4096)
            want = x.astype(dt)
        got = ns.astype(cp.asarray(x), dt)
        assert ns._casts is not None and ns._casts.launches
        np.testing.assert_array_equal(cp.asnumpy(got).view(np.uint16), want.view(np.uint16))
        np.testing.assert_array_equal(cp.asnumpy(ns.astype(got, np.float32)).view(np.uint32),
                                      want.astype(np.float32).view(np.uint32))
        odd = cp.asarray(x[:4095])  # CuPy's cast: the same values (its nans may differ)
        np.testing.assert_array_equal(cp.asnumpy(ns.astype(odd, dt)).astype(np.float32),
                                      want[:4095].astype(np.float32))
