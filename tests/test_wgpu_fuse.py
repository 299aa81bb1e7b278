"""The wgpu library's flat elementwise kernels (vec4 fast path) and ``fuse``."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
xp = pytest.importorskip("vtl.backends.wgpu")
if not xp.is_available():
    pytest.skip("no WebGPU adapter", allow_module_level=True)

from vtl.backends.wgpu import _recorder  # noqa: E402
from vtl.backends.wgpu._fuse import Fused, fuse  # noqa: E402


def host(a):
    return xp.to_numpy(a)


# A GPU driver may contract a fused `a * b + c` into one fused multiply-add (1 ulp apart
# from the unfused result); lavapipe (a CPU adapter) does not, so there results are exact.
EXACT = xp.runtime_info()["adapter_type"] == "CPU"


def same(got, ref):
    if EXACT:
        np.testing.assert_array_equal(got, ref)
    else:
        np.testing.assert_allclose(got, ref, rtol=2e-6, atol=1e-30)


def dispatches(fn):
    d0 = _recorder.REC.dispatches
    out = fn()
    return out, _recorder.REC.dispatches - d0


def _data(n, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(n).astype(dtype)
    if np.dtype(dtype).kind == "b":
        return rng.integers(0, 2, n).astype(bool)
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -100), min(info.max, 100), n).astype(dtype)


# -- the flat fast path -------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 3, 4, 5, 1023, 1025, 4099])
@pytest.mark.parametrize("off", [0, 1, 4])
def test_contiguous_binary_exact_with_tails_and_offsets(n, off):
    h1, h2 = _data(n + off, np.float32, 1), _data(n + off, np.float32, 2)
    a, b = xp.asarray(h1)[off:], xp.asarray(h2)[off:]
    g1, g2 = h1[off:], h2[off:]
    for got, ref in ((a + b, g1 + g2), (a - b, g1 - g2), (a * b, g1 * g2), (a / b, g1 / g2),
                     (xp.maximum(a, b), np.maximum(g1, g2)), (a < b, g1 < g2),
                     (a * 0.5, g1 * np.float32(0.5)), (3.0 - a, np.float32(3) - g1),
                     (-a, -g1), (xp.abs(a), np.abs(g1))):
        assert got.dtype == ref.dtype
        np.testing.assert_array_equal(host(got), ref)


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "uint8", "uint16", "uint32",
                                   "bool", "int64", "float64"])
def test_contiguous_binary_other_dtypes(dtype):
    dt = np.dtype(dtype)
    if dt.name not in xp.__array_namespace_info__().dtypes():
        pytest.skip(f"{dtype} not on this adapter")
    h1, h2 = _data(37, dt, 3), _data(37, dt, 4)
    a, b = xp.asarray(h1), xp.asarray(h2)
    if dt == np.bool_:
        pairs = ((a & b, h1 & h2), (a | b, h1 | h2), (a == b, h1 == h2))
    else:
        pairs = ((a + b, h1 + h2), (a * b, h1 * h2), (a - b, h1 - h2), (a >= b, h1 >= h2),
                 (a * 3, h1 * dt.type(3)))
    for got, ref in pairs:
        assert got.dtype == ref.dtype
        np.testing.assert_array_equal(host(got), ref)


def test_mixed_dtypes_cast_inside_the_kernel():
    hi = np.arange(-5, 6, dtype=np.int16)
    hf = np.linspace(-2, 2, 11, dtype=np.float32)
    i, f = xp.asarray(hi), xp.asarray(hf)
    got, nd = dispatches(lambda: i + f)
    assert nd == 1 and got.dtype == np.float32
    np.testing.assert_array_equal(host(got), hi + hf)
    np.testing.assert_array_equal(host(i / 2), hi.astype(np.float32) / np.float32(2))
    np.testing.assert_array_equal(host(xp.exp(i)), host(xp.exp(xp.astype(i, xp.float32))))
    h8 = np.array([100, -100, 7], np.int8)
    np.testing.assert_array_equal(host(xp.asarray(h8) * 3), h8 * np.int8(3))  # wraps


def test_one_dispatch_per_op_and_broadcast_last_dim():
    h = _data(7 * 8, np.float32).reshape(7, 8)
    r = _data(8, np.float32, 5)
    a, row = xp.asarray(h), xp.asarray(r)
    for got, ref in ((a + row, h + r), (row * a, r * h), (a - xp.asarray(r[None]), h - r)):
        np.testing.assert_array_equal(host(got), ref)
    _, nd = dispatches(lambda: a + row)
    assert nd == 1
    h6 = _data(5 * 6, np.float32).reshape(5, 6)  # period not a multiple of 4
    r6 = _data(6, np.float32, 6)
    np.testing.assert_array_equal(host(xp.asarray(h6) * xp.asarray(r6)), h6 * r6)
    s = xp.asarray(np.float32(2.5))  # a 0-d operand is splat
    np.testing.assert_array_equal(host(a / s), h / np.float32(2.5))


def test_where_flat_and_strided():
    h = _data(5 * 8, np.float32).reshape(5, 8)
    a = xp.asarray(h)
    m = a > 0
    np.testing.assert_array_equal(host(xp.where(m, a, 0.0)), np.where(h > 0, h, 0))
    np.testing.assert_array_equal(host(xp.where(m[0], a, -a)), np.where(h[0] > 0, h, -h))
    np.testing.assert_array_equal(host(xp.where(m.mT, a.mT, 1.0)), np.where(h.T > 0, h.T, 1))
    hi = np.arange(7, dtype=np.int32)
    np.testing.assert_array_equal(host(xp.where(xp.asarray(hi) > 3, xp.asarray(hi), 2.5)),
                                  np.where(hi > 3, hi, 2.5).astype(np.float32))


def test_strided_operands_keep_the_general_path():
    h = _data(6 * 8, np.float32).reshape(6, 8)
    a = xp.asarray(h)
    np.testing.assert_array_equal(host(a.mT + 1.0), h.T + np.float32(1))
    np.testing.assert_array_equal(host(a[:, ::2] * a[:, 1::2]), h[:, ::2] * h[:, 1::2])
    np.testing.assert_array_equal(host(a[:, :1] + a), h[:, :1] + h)


def test_vec4_tail_never_writes_past_a_view():
    a = xp.zeros(10)
    v = a[0:5]
    v += 1.0
    a[5:] = xp.ones(5) * 2.0
    w = a[1:6]
    w *= 3.0
    expect = np.zeros(10, np.float32)
    expect[:5] += 1
    expect[5:] = 2
    expect[1:6] *= 3
    np.testing.assert_array_equal(host(a), expect)
    z = xp.zeros(11)
    z[1:6] = 5.0  # fills of views: no vector store past the view
    z[8:] = -1.0
    np.testing.assert_array_equal(host(z), [0, 5, 5, 5, 5, 5, 0, 0, -1, -1, -1])
    b = xp.asarray(np.arange(9, dtype=np.float32))
    c = xp.astype(b[:6], xp.int32)  # a contiguous cast
    np.testing.assert_array_equal(host(c), np.arange(6, dtype=np.int32))
    np.testing.assert_array_equal(host(b), np.arange(9, dtype=np.float32))


@given(
    hnp.arrays(np.float32, hnp.array_shapes(min_dims=0, max_dims=3, max_side=9),
               elements=st.floats(-1e3, 1e3, width=32, allow_subnormal=False)),
    st.sampled_from(["add", "multiply", "subtract", "maximum"]),
    st.booleans(),
)
def test_binary_matches_numpy_on_random_shapes(h, name, row):
    other = h[-1:] if (row and h.ndim) else h
    got = host(getattr(xp, name)(xp.asarray(h), xp.asarray(other)))
    ref = getattr(np, name)(h, other)
    # drivers may flush subnormal float32 results to zero (NVIDIA's does; docs/guide/conformance.md)
    flushed = (np.abs(ref) < np.finfo(np.float32).smallest_normal) & (got == 0)
    np.testing.assert_array_equal(np.where(flushed, ref, got), ref)


# -- fuse ---------------------------------------------------------------------------------

def _chain(a):
    c = xp.tanh(a * 2.0 + 1.0) - a / 3.0
    return xp.exp(-c)


def test_fused_chain_equals_unfused_in_one_dispatch():
    h = np.linspace(-3, 3, 1001, dtype=np.float32)
    a = xp.asarray(h)
    ref = host(_chain(a))
    f = fuse(_chain)
    got, nd = dispatches(lambda: f(a))
    assert nd == 1 and f.fallbacks == 0
    same(host(got), ref)
    assert got.shape == a.shape and got.dtype == a.dtype
    got2 = f(xp.asarray(h)[1:])  # offset not a multiple of 4: one element per thread
    same(host(got2), ref[1:])


def test_fuse_several_outputs_closures_and_changing_scalars():
    rng = np.random.default_rng(0)
    hp, hg, hm = (rng.standard_normal(50).astype(np.float32) for _ in range(3))
    p, g, m = xp.asarray(hp), xp.asarray(hg), xp.asarray(hm)
    lr = [0.1]

    def step(p, g, m):  # momentum SGD; lr is read from the enclosing scope
        m2 = m * 0.9 + g
        return p - lr[0] * m2, m2

    f = fuse(step)
    for val in (0.1, 0.01):
        lr[0] = val
        (p2, m2), nd = dispatches(lambda: f(p, g, m))
        assert nd == 1
        e1, e2 = step(p, g, m)
        same(host(p2), host(e1))
        same(host(m2), host(e2))
    k = xp.asarray(np.float32(3))

    def uses_captured(x):
        return xp.where(x > 0, x * k, 0.0) + xp.clip(x, -0.5, 0.5)

    fu = fuse(uses_captured)
    got, nd = dispatches(lambda: fu(p))
    assert nd == 1
    same(host(got), host(uses_captured(p)))


def _edges(x):
    a = xp.abs(x)
    return (xp.clip(x, -0.0, 0.0), xp.sinh(x), xp.log(a), xp.log2(a), xp.log10(a),
            xp.log1p(x))


def test_fused_strided_and_flat_edge_values_agree_with_numpy():
    """clip's and sinh's signed zeros and the logs of subnormals are the same in a fused
    kernel, the flat kernels and the strided ones (one set of WGSL bodies)."""
    h = np.array([-5.0, -0.0, 0.0, 5.0, np.nan, 1e-45, 1e-40, -1e-45, 3e-39], np.float32)
    a = np.abs(h)
    with np.errstate(all="ignore"):
        expected = [np.clip(h, np.float32(-0.0), np.float32(0.0)), np.sinh(h), np.log(a),
                    np.log2(a), np.log10(a), np.log1p(h)]
    strided = xp.asarray(np.repeat(h, 2))[::2]
    f = fuse(_edges)
    for outs in (f(xp.asarray(h)), _edges(xp.asarray(h)), _edges(strided)):
        for got, e in zip(outs, expected, strict=True):
            g = host(got)
            np.testing.assert_allclose(g, e, rtol=3e-7, atol=0)
            num = ~np.isnan(e)
            np.testing.assert_array_equal(np.signbit(g[num]), np.signbit(e[num]))
    assert f.fallbacks == 0


def test_fuse_broadcasts_dtypes_and_strided_inputs():
    h = np.arange(24, dtype=np.int32).reshape(4, 6)
    r = np.linspace(0, 1, 6, dtype=np.float32)
    a, row = xp.asarray(h), xp.asarray(r)

    @fuse
    def f(x, y):
        return (x * 2 + 1) * y, x > 5

    got, mask = f(a, row)
    np.testing.assert_array_equal(host(got), (h * 2 + 1) * r)
    np.testing.assert_array_equal(host(mask), h > 5)
    got_t, _ = f(a.mT, xp.asarray(np.ones(4, np.float32)))  # strided input: copied first
    np.testing.assert_array_equal(host(got_t), (h.T * 2 + 1).astype(np.float32))
    assert isinstance(f, Fused) and f.fallbacks == 0


def test_fuse_falls_back_to_eager_when_not_elementwise():
    h = np.arange(6, dtype=np.float32)
    a = xp.asarray(h)
    f = fuse(lambda x: x / xp.sum(x))
    np.testing.assert_array_equal(host(f(a)), h / h.sum())
    assert f.fallbacks == 1
    g = fuse(lambda x: x * 2 if bool(x[0] > 0) else x)
    np.testing.assert_array_equal(host(g(a)), h)
    with pytest.raises(TypeError):  # errors of the function itself still surface
        fuse(lambda x: xp.exp(x, 1))(a)
