"""Arrays larger than one storage binding: contiguous elementwise ops work in windows."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
xp = pytest.importorskip("vtl.backends.wgpu")
if not xp.is_available():
    pytest.skip("no WebGPU adapter", allow_module_level=True)

from vtl.backends.wgpu import _recorder, _runtime  # noqa: E402
from vtl.backends.wgpu._fuse import fuse  # noqa: E402

LIMIT = 64 * 1024  # bytes: 16384 float32 per binding


@pytest.fixture
def small_binding(monkeypatch):
    """Pretend the adapter binds at most LIMIT bytes, so small arrays take the chunked path."""
    monkeypatch.setattr(_runtime.get(), "max_binding", LIMIT)


def host(a):
    return xp.to_numpy(a)


@pytest.mark.parametrize("off", [0, 1, 4])
def test_chunked_binary_unary_scalar_and_cast(small_binding, off):
    n = 3 * (LIMIT // 4) + 7 + off
    rng = np.random.default_rng(0)
    h1, h2 = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    a, b = xp.asarray(h1)[off:], xp.asarray(h2)[off:]
    g1, g2 = h1[off:], h2[off:]
    d0 = _recorder.REC.dispatches
    c = a + b
    assert _recorder.REC.dispatches - d0 >= 4  # one dispatch per window
    np.testing.assert_array_equal(host(c), g1 + g2)
    np.testing.assert_array_equal(host(a * 2.0), g1 * np.float32(2))
    np.testing.assert_array_equal(host(1.0 - a), np.float32(1) - g1)
    np.testing.assert_array_equal(host(-a), -g1)
    np.testing.assert_array_equal(host(a > b), g1 > g2)
    np.testing.assert_array_equal(host(xp.astype(a, xp.int32)), g1.astype(np.int32))
    if "float64" in xp.__array_namespace_info__().dtypes():
        np.testing.assert_array_equal(host(xp.asarray(h1, dtype=xp.float64)[off:] * 3.0),
                                      g1.astype(np.float64) * 3)
    np.testing.assert_allclose(float(xp.sum(a)), g1.sum(dtype=np.float64), rtol=1e-4)
    np.testing.assert_allclose(float(xp.max(c)), (g1 + g2).max())
    np.testing.assert_allclose(float(xp.mean(a * a)), (g1.astype(np.float64) ** 2).mean(),
                               rtol=1e-4)


def test_chunked_broadcast_fuse_and_fill(small_binding):
    rows, cols = 300, 100  # 30,000 elements: two windows; a period of 100 crosses them
    h = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols) / 7
    r = np.linspace(-1, 1, cols, dtype=np.float32)
    a, row = xp.asarray(h), xp.asarray(r)
    np.testing.assert_array_equal(host(a * row), h * r)
    f = fuse(lambda x, y: (x - y) * 0.5 + x / 3.0)
    np.testing.assert_allclose(host(f(a, row)), host((a - row) * 0.5 + a / 3.0), rtol=1e-6)
    assert f.fallbacks == 0
    np.testing.assert_allclose(host(xp.sum(a, axis=1)), h.sum(axis=1), rtol=1e-5)
    z = xp.full((rows, cols), 2.5)
    np.testing.assert_array_equal(host(z), np.full((rows, cols), 2.5, np.float32))


def test_reductions_of_arrays_above_one_binding(small_binding):
    """The reductions the user guide lists for arrays over one binding: sum, prod, max,
    min and mean over all axes or the last one, var and std over all axes."""
    rows, cols = 100, 400  # 160,000 bytes: three bindings' worth
    h = np.random.default_rng(5).standard_normal((rows, cols)).astype(np.float32)
    a = xp.asarray(h)
    for fn, ref, axes in ((xp.sum, np.sum, (None, 1, -1)), (xp.max, np.max, (None, 1)),
                          (xp.min, np.min, (None, 1)), (xp.mean, np.mean, (None, 1)),
                          (xp.var, np.var, (None,)), (xp.std, np.std, (None,))):
        for axis in axes:
            np.testing.assert_allclose(host(fn(a, axis=axis)),
                                       ref(h.astype(np.float64), axis=axis),
                                       rtol=1e-4, atol=1e-4)
    p = xp.asarray(np.full((rows, cols), 1.0001, np.float32))
    np.testing.assert_allclose(host(xp.prod(p, axis=1)), np.full(rows, 1.0001**cols),
                               rtol=1e-4)
    np.testing.assert_allclose(float(xp.prod(p)), 1.0001**(rows * cols), rtol=1e-3)


def test_other_ops_refuse_arrays_above_one_binding(small_binding):
    a = xp.asarray(np.ones(LIMIT // 4 + 1, np.float32))
    with pytest.raises(ValueError, match="max storage binding"):
        xp.cumulative_sum(a)
    with pytest.raises(ValueError, match="max storage binding"):
        xp.sum(xp.reshape(a[:-1], (2, -1)), axis=0)  # needs a transposed copy
    with pytest.raises(ValueError, match="max storage binding"):
        a[::2] + 1.0
    with pytest.raises(ValueError, match="max storage binding"):
        xp.var(xp.ones((100, 400), dtype=xp.float32), axis=1)
    with pytest.raises(ValueError, match="max storage binding"):
        a[1:3] @ a[1:3]  # a view into the large buffer


@pytest.mark.slow
def test_add_above_the_real_binding_limit():
    rt = _runtime.get()
    if rt.max_binding > 256 << 20 or rt.max_buffer < rt.max_binding + (1 << 20):
        pytest.skip("binding limit too large to test here, or no larger buffers")
    n = rt.max_binding // 4 + 4096
    a = xp.ones((n,), dtype=xp.float32)
    b = a * 2.0
    c = a + b
    tail = host(c[n - 5000:])
    assert (tail == 3.0).all()
    assert float(c[0]) == 3.0
    assert float(xp.sum(c)) == pytest.approx(3.0 * n, rel=1e-5)
    del a, b, c
    xp.empty_cache()
