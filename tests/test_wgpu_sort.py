"""Sorting, searching and sets of the wgpu library (device kernels) against NumPy."""

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

DTYPES = sorted(xp.__array_namespace_info__().dtypes(kind=("bool", "integral",
                                                           "real floating")))
FLOATS = [d for d in DTYPES if d.startswith("float")]
IDX = np.dtype(xp.__array_namespace_info__().default_dtypes()["indexing"])
DRAWN = [d for d in DTYPES if d != "bfloat16"]  # hypothesis cannot build bfloat16 arrays
RNG = np.random.default_rng(7)


def host(a):
    return xp.to_numpy(a)


def ref_argsort(h: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """Stable argsort; descending keeps equal elements in their original order (as
    array_api_strict: flip, stable argsort, flip back)."""
    if not descending:
        return np.argsort(h, axis=axis, kind="stable")
    n = h.shape[axis]
    r = np.flip(np.argsort(np.flip(h, axis=axis), axis=axis, kind="stable"), axis=axis)
    return n - 1 - r


def check_sort(h: np.ndarray, axis: int, descending: bool) -> None:
    a = xp.asarray(h)
    want = ref_argsort(h, axis, descending)
    got = host(xp.argsort(a, axis=axis, descending=descending))
    assert got.dtype == IDX and got.shape == h.shape
    np.testing.assert_array_equal(got, want)
    s = host(xp.sort(a, axis=axis, descending=descending))
    w = np.take_along_axis(h, want, axis=axis)
    assert s.dtype == h.dtype and s.shape == h.shape
    np.testing.assert_array_equal(s, w)
    if h.dtype.kind == "f":  # -0.0 / 0.0 keep their stable positions
        np.testing.assert_array_equal(np.signbit(s), np.signbit(w))


def dup_values(dtype: str, shape, special: bool = True) -> np.ndarray:
    """Few distinct values (many ties); floats with NaN, +-inf and -0.0 mixed in."""
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return RNG.random(shape) > 0.5
    if dt.kind in "iu":
        info = np.iinfo(dt)
        pool = np.array([info.min, info.max, 0, 1, 2, info.max - 1, info.min + 1], dtype=dt)
        return pool[RNG.integers(0, len(pool), shape)]
    pool = np.array([-1.5, 0.0, -0.0, 2.0, 3.0, -7.0], dtype=dt)
    if special:
        pool = np.concatenate([pool, np.array([np.nan, -np.nan, np.inf, -np.inf], dt)])
    return pool[RNG.integers(0, len(pool), shape)]


@given(data=st.data())
def test_sort_argsort_hypothesis(data):
    dtype = data.draw(st.sampled_from(DRAWN))
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=6))
    h = data.draw(hnp.arrays(dtype, shape))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    check_sort(h, axis, data.draw(st.booleans()))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("descending", [False, True])
def test_sort_every_dtype_ties_and_specials(dtype, descending):
    for shape, axis in [((37,), 0), ((5, 9, 4), 1), ((6, 70), 0), ((3, 1500), -1),
                        ((4, 1, 3), 1)]:
        check_sort(dup_values(dtype, shape), axis, descending)


@pytest.mark.parametrize("descending", [False, True])
def test_sort_large_multi_workgroup(descending):
    # one long row of 32-bit keys: the radix sort (many tiles)
    check_sort(dup_values("float32", (60_000,)), 0, descending)
    check_sort(dup_values("uint8", (40_000,)), 0, descending)
    # several long rows: bitonic with global merge passes (several steps per pass)
    h2 = RNG.standard_normal((2, 9_000)).astype(np.float32)
    h2[:, ::3] = 0.5
    check_sort(h2, 1, descending)
    check_sort(RNG.integers(-50, 50, (2100, 3)).astype(np.int32), 0, descending)
    if "int64" in DTYPES:  # 64-bit keys: bitonic even for one row (16 elements per thread)
        check_sort(dup_values("int64", (20_000,)), 0, descending)


def test_radix_more_than_256_tiles():
    # over 256 tiles of 1024: each thread of the per-digit tile scan sums several tiles
    h = RNG.integers(-(2**31), 2**31, 300_000, dtype=np.int64).astype(np.int32)
    h[::3] = 7
    check_sort(h, 0, False)


def test_unique_large():
    h = RNG.integers(-3000, 3000, 50_000).astype(np.float32)
    h[::101] = -0.0
    check_unique(h)


def test_sort_nan_order_and_signed_zero_stability():
    h = np.array([np.nan, 1.0, -0.0, -np.inf, 0.0, -np.nan, -1.0, np.inf, -0.0], np.float32)
    s = host(xp.sort(xp.asarray(h)))
    np.testing.assert_array_equal(s, [-np.inf, -1.0, -0.0, 0.0, -0.0, 1.0, np.inf, np.nan,
                                      np.nan])
    assert list(np.signbit(s[2:5])) == [True, False, True]
    d = host(xp.argsort(xp.asarray(h), descending=True))
    np.testing.assert_array_equal(d, [0, 5, 7, 1, 2, 4, 8, 6, 3])  # NaNs first, ties in order


def test_sort_0d_empty_and_size1():
    for dt in ("float32", "int32"):
        z = xp.asarray(np.array(3, dt))
        assert host(xp.sort(z)).shape == () and host(xp.sort(z)) == 3
        assert host(xp.argsort(z)).shape == () and host(xp.argsort(z)) == 0
        e = xp.asarray(np.zeros((2, 0, 3), dt))
        assert host(xp.sort(e, axis=1)).shape == (2, 0, 3)
        assert host(xp.argsort(e, axis=0)).dtype == IDX
        check_sort(np.arange(6, dtype=dt).reshape(6, 1), 1, False)
        check_sort(np.arange(6, dtype=dt)[::-1].reshape(6, 1), 0, True)


def test_sort_strided_views_and_errors():
    h = RNG.standard_normal((6, 8)).astype(np.float32)
    a = xp.asarray(h)
    v = a[::2, 1::3]
    np.testing.assert_array_equal(host(xp.sort(v, axis=0)), np.sort(h[::2, 1::3], axis=0))
    np.testing.assert_array_equal(host(xp.argsort(a.mT, axis=1)),
                                  np.argsort(h.T, axis=1, kind="stable"))
    with pytest.raises(IndexError, match="axis"):
        xp.sort(a, axis=2)
    with pytest.raises(TypeError, match="axis"):
        xp.argsort(a, axis=None)
    with pytest.raises(TypeError, match="WgpuArray"):
        xp.sort(h)


# -- searchsorted / isin ----------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted_every_dtype(dtype, side):
    x1 = np.sort(dup_values(dtype, (50,)), kind="stable")
    x2 = dup_values(dtype, (4, 7))
    got = host(xp.searchsorted(xp.asarray(x1), xp.asarray(x2), side=side))
    np.testing.assert_array_equal(got, np.searchsorted(x1, x2, side=side).astype(IDX))
    # through a sorter (an unsorted x1)
    u = dup_values(dtype, (33,))
    srt = np.argsort(u, kind="stable")
    got = host(xp.searchsorted(xp.asarray(u), xp.asarray(x2), side=side,
                               sorter=xp.asarray(srt)))
    np.testing.assert_array_equal(got, np.searchsorted(u, x2, side=side,
                                                       sorter=srt).astype(IDX))


def test_searchsorted_scalars_empty_and_errors():
    x1 = xp.asarray(np.array([1.0, 2.0, 2.0, 3.0, np.nan], np.float32))
    assert int(xp.searchsorted(x1, 2.0)) == 1
    assert int(xp.searchsorted(x1, 2.0, side="right")) == 3
    assert int(xp.searchsorted(x1, float("nan"))) == 4
    assert int(xp.searchsorted(x1, float("nan"), side="right")) == 5
    e = xp.asarray(np.zeros(0, np.float32))
    assert host(xp.searchsorted(e, xp.asarray(np.ones(3, np.float32)))).tolist() == [0, 0, 0]
    with pytest.raises(ValueError, match="1-D"):
        xp.searchsorted(xp.reshape(x1[:4], (2, 2)), 1.0)
    with pytest.raises(ValueError, match="side"):
        xp.searchsorted(x1, 1.0, side="middle")


@pytest.mark.parametrize("dtype", DTYPES)
def test_isin_every_dtype(dtype):
    a = dup_values(dtype, (5, 6))
    b = dup_values(dtype, (9,))
    for inv in (False, True):
        got = host(xp.isin(xp.asarray(a), xp.asarray(b), invert=inv))
        np.testing.assert_array_equal(got, np.isin(a, b, invert=inv))
    assert host(xp.isin(xp.asarray(a), xp.asarray(b[:0]))).sum() == 0


# -- unique ---------------------------------------------------------------------------

def check_unique(h: np.ndarray) -> None:
    a = xp.asarray(h)
    want = np.unique_all(h)
    r = xp.unique_all(a)
    assert r._fields == ("values", "indices", "inverse_indices", "counts")
    v = host(r.values)
    np.testing.assert_array_equal(v, want.values)
    np.testing.assert_array_equal(host(r.indices), want.indices.astype(IDX))
    np.testing.assert_array_equal(host(r.inverse_indices),
                                  want.inverse_indices.reshape(h.shape).astype(IDX))
    np.testing.assert_array_equal(host(r.counts), want.counts.astype(IDX))
    assert host(r.counts).dtype == IDX and host(r.indices).dtype == IDX
    np.testing.assert_array_equal(host(xp.unique_values(a)), want.values)
    c = xp.unique_counts(a)
    np.testing.assert_array_equal(host(c.counts), want.counts)
    i = xp.unique_inverse(a)
    np.testing.assert_array_equal(host(i.inverse_indices), want.inverse_indices.reshape(h.shape))


@pytest.mark.parametrize("dtype", DTYPES)
def test_unique_every_dtype(dtype):
    # floats without NaN here (NumPy's unique_all gives NaNs the index of the first NaN)
    check_unique(dup_values(dtype, (4, 25), special=False))
    check_unique(dup_values(dtype, (3000,), special=False))


@given(data=st.data())
def test_unique_hypothesis(data):
    dtype = data.draw(st.sampled_from(DRAWN))
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5))
    elems = st.floats(-3, 3, width=np.dtype(dtype).itemsize * 8) if dtype in FLOATS else None
    check_unique(data.draw(hnp.arrays(dtype, shape, elements=elems)))


@pytest.mark.parametrize("dtype", FLOATS)
def test_unique_each_nan_distinct_signed_zeros_merge(dtype):
    h = np.array([[1.0, np.nan, -0.0], [np.nan, 1.0, 0.0]], dtype)
    r = xp.unique_all(xp.asarray(h))
    v = host(r.values)
    assert v.shape == (4,)
    np.testing.assert_array_equal(v[:2], [0.0, 1.0])
    assert np.signbit(v[0])  # the first occurrence of the zero group
    assert np.isnan(v[2:]).all()
    assert host(r.counts).tolist() == [2, 2, 1, 1]
    assert host(r.indices).tolist() == [2, 0, 1, 3]
    assert host(r.inverse_indices).tolist() == [[1, 2, 0], [3, 1, 0]]


def test_unique_empty_and_0d():
    r = xp.unique_all(xp.asarray(np.zeros((0, 3), np.float32)))
    assert host(r.values).shape == (0,) and host(r.inverse_indices).shape == (0, 3)
    r = xp.unique_inverse(xp.asarray(np.array(5, np.int32)))
    assert host(r.values).tolist() == [5] and host(r.inverse_indices).shape == ()


# -- diff -----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "int32", "uint8", "bool"])
def test_diff_matches_numpy(dtype):
    h = dup_values(dtype, (4, 6), special=False)
    a = xp.asarray(h)
    for n in (0, 1, 2, 7):
        for axis in (0, -1):
            np.testing.assert_array_equal(host(xp.diff(a, axis=axis, n=n)),
                                          np.diff(h, axis=axis, n=n))
    p = h[:, :1]
    np.testing.assert_array_equal(host(xp.diff(a, prepend=xp.asarray(p), append=xp.asarray(p))),
                                  np.diff(h, prepend=p, append=p))


# -- parallel scans (cumulative_sum / cumulative_prod along long rows) -----------------

@pytest.mark.parametrize("dtype", ["float32", "int32", "uint8", "int64"])
def test_cumulative_sum_long_rows(dtype):
    if dtype not in DTYPES:
        pytest.skip(f"{dtype} unavailable")
    h = dup_values(dtype, (100_003,), special=False) if dtype != "float32" else \
        RNG.uniform(0, 1, 100_003).astype(np.float32)
    got = host(xp.cumulative_sum(xp.asarray(h)))
    want = np.cumsum(h, dtype=got.dtype)
    if dtype == "float32":
        np.testing.assert_allclose(got, np.cumsum(h.astype(np.float64)), rtol=1e-4)
    else:
        np.testing.assert_array_equal(got, want)  # integers wrap like NumPy
    h2 = RNG.uniform(0, 1, (3, 2500, 2)).astype(np.float32)
    for inc in (False, True):
        g2 = host(xp.cumulative_sum(xp.asarray(h2), axis=1, include_initial=inc))
        w2 = np.cumsum(h2.astype(np.float64), axis=1)
        if inc:
            w2 = np.concatenate([np.zeros((3, 1, 2)), w2], axis=1)
        np.testing.assert_allclose(g2, w2, rtol=1e-5)


def test_cumulative_prod_long_rows():
    h = RNG.choice(np.array([1.0, -1.0, 1.0001, 0.9999], np.float32), (2, 3000))
    np.testing.assert_allclose(host(xp.cumulative_prod(xp.asarray(h), axis=1)),
                               np.cumprod(h.astype(np.float64), axis=1), rtol=1e-4)
    hi = RNG.integers(-3, 4, 777).astype(np.int32)
    np.testing.assert_array_equal(host(xp.cumulative_prod(xp.asarray(hi), include_initial=True)),
                                  np.concatenate([[1], np.cumprod(hi)]).astype(np.int64))


def test_float64_without_int64_goes_through_the_host(monkeypatch):
    # float64 keys need shader-int64; an adapter without it computes on the host
    if "float64" not in DTYPES:
        pytest.skip("no float64")
    from vtl.backends.wgpu import _sorting

    monkeypatch.setattr(_sorting, "_on_host", lambda x: x.dtype == np.float64)
    h = np.array([[3.0, np.nan, -0.0, 1.0], [0.0, 2.0, 2.0, -1.0]])
    check_sort(h, 1, True)
    check_sort(h, 0, False)
    check_unique(h)
    x1 = np.sort(h[1])
    np.testing.assert_array_equal(host(xp.searchsorted(xp.asarray(x1), xp.asarray(h))),
                                  np.searchsorted(x1, h).astype(IDX))
    np.testing.assert_array_equal(host(xp.isin(xp.asarray(h), xp.asarray(x1[:2]))),
                                  np.isin(h, x1[:2]))


# -- nonzero and boolean masks --------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_nonzero_every_dtype(dtype):
    for shape in [(7,), (3, 5), (2, 3, 4), (3000,), (0, 4)]:
        h = dup_values(dtype, shape)
        got = xp.nonzero(xp.asarray(h))
        want = np.nonzero(h)
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert host(g).dtype == IDX
            np.testing.assert_array_equal(host(g), w)


def test_nonzero_nan_views_none_and_masks():
    h = np.array([[0.0, np.nan, -0.0], [1.0, 0.0, -2.0]], np.float32)
    r, c = xp.nonzero(xp.asarray(h))
    assert host(r).tolist() == [0, 1, 1] and host(c).tolist() == [1, 0, 2]
    a = xp.asarray(np.arange(12, dtype=np.int32).reshape(3, 4))
    (i,) = xp.nonzero(a[1:, ::2][:, 0] > 100)  # a strided view, no non-zero
    assert host(i).shape == (0,)
    m = a % 3 == 0
    np.testing.assert_array_equal(host(a[m]), np.arange(12).reshape(3, 4)[host(m)])
    np.testing.assert_array_equal(host(a[:, m[0]]), host(a)[:, host(m)[0]])
    with pytest.raises(ValueError, match="0-d"):
        xp.nonzero(xp.asarray(np.array(1.0, np.float32)))


def test_complex_isin_nonzero_through_the_host_and_sort_refuses():
    if "complex64" not in xp.__array_namespace_info__().dtypes():
        pytest.skip("no complex dtypes")
    h = np.array([[1 + 2j, 3, 0], [0, 3j, np.nan]], np.complex64)
    a = xp.asarray(h)
    b = np.array([3, 1 + 2j, np.nan], np.complex64)
    np.testing.assert_array_equal(host(xp.isin(a, xp.asarray(b))), np.isin(h, b))
    for g, w in zip(xp.nonzero(a), np.nonzero(h), strict=True):
        np.testing.assert_array_equal(host(g), w)
    with pytest.raises(TypeError, match="real-valued"):
        xp.sort(a)
    with pytest.raises(TypeError, match="real-valued"):
        xp.argsort(a)
