"""The wgpu library's reductions on large arrays: few dispatches (long rows split over many
workgroups, columns folded in place) and NumPy's results."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
xp = pytest.importorskip("vtl.backends.wgpu")
if not xp.is_available():
    pytest.skip("no WebGPU adapter", allow_module_level=True)

from vtl.backends.wgpu import _reduction  # noqa: E402
from vtl.backends.wgpu._recorder import REC  # noqa: E402

N = 1 << 20
INT = np.dtype(xp.__array_namespace_info__().default_dtypes()["integral"])
HAS = xp.__array_namespace_info__().dtypes()


def counted(fn):
    """(host result, dispatches recorded by fn)."""
    d0 = REC.dispatches
    out = fn()
    return xp.to_numpy(out), REC.dispatches - d0


@pytest.fixture(scope="module")
def big():
    rng = np.random.default_rng(0)
    return rng.uniform(0.5, 1.5, N).astype(np.float32)


def test_full_float32_reductions_few_dispatches(big):
    a = xp.asarray(big)
    ref = np.sum(big, dtype=np.float64)
    for fn, want, most in ((xp.sum, ref, 2), (xp.mean, ref / N, 3)):
        got, nd = counted(lambda fn=fn: fn(a))
        assert nd <= most and got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-5)
    for fn, npf in ((xp.max, np.max), (xp.min, np.min), (xp.argmax, np.argmax),
                    (xp.argmin, np.argmin)):
        got, nd = counted(lambda fn=fn: fn(a))
        assert nd <= 2
        assert got == npf(big) and got.dtype == np.asarray(npf(big)).dtype.newbyteorder("=")
    got, nd = counted(lambda: xp.var(a))
    assert nd <= 4  # the sums (2), the squared deviations' sums divided (2)
    np.testing.assert_allclose(got, np.var(big.astype(np.float64)), rtol=1e-5)
    np.testing.assert_allclose(xp.to_numpy(xp.std(a, correction=1)),
                               np.std(big.astype(np.float64), ddof=1), rtol=1e-5)


def _divided(s, n):
    from vtl.backends.wgpu._elementwise import binary

    return xp.to_numpy(binary("divide", s, float(n)))


def _two_pass_var(a, axis):
    """The sums divided into the mean, then the sum of the squared deviations' array divided
    by the count: the formula the second reduction computes in one kernel."""
    n = _reduction._count(a, axis)
    m = xp.asarray(_divided(_reduction.sum(a, axis=axis, keepdims=True), n))
    return _divided(_reduction.sum(_reduction._sq_dev(a, m), axis=axis), n)


@pytest.mark.parametrize(("shape", "axis"), [
    ((1 << 18,), None),  # one long row split over workgroups, vec4 loads
    ((4097, 3), None),  # one row of odd length
    ((300, 2049), 1),  # rows, not a multiple of 4
    ((5000, 80), 0),  # columns sliced (partial sums)
    ((3, 200, 70), 1),  # columns of P blocks
    ((7, 6, 5), (0, 2)),  # rows of a transposed copy
    ((64, 3), 0),  # short columns, one pass
])
def test_float32_var_subtracts_the_mean_inside_its_sum(shape, axis):
    """float32 mean, var and std: the mean is the sum's reduction dividing in its last pass;
    var sums the squared deviations from each output's mean (its sum over the count) in the
    reduction itself, no array of them written, and divides in its last pass. The two
    passes' accuracy (data whose mean is large against its spread) and the values of the
    sums then a divide, up to a rounding (a device may fuse the multiply-add)."""
    rng = np.random.default_rng(7)
    h = (rng.standard_normal(shape) * 3 + 1e4).astype(np.float32)
    a = xp.asarray(h)
    d0 = REC.dispatches
    s = xp.sum(a, axis=axis)
    sums = REC.dispatches - d0
    mean = xp.to_numpy(xp.mean(a, axis=axis))
    assert REC.dispatches - d0 == 2 * sums  # no division after the sum
    np.testing.assert_array_equal(mean, _divided(s, _reduction._count(a, axis)))
    d0 = REC.dispatches
    got = xp.to_numpy(xp.var(a, axis=axis))
    assert REC.dispatches - d0 == 2 * sums  # no squared deviations' array, no division
    want = np.var(h.astype(np.float64), axis=axis)
    np.testing.assert_allclose(got, want, rtol=2e-5)
    np.testing.assert_allclose(got, _two_pass_var(a, axis), rtol=1e-6)
    np.testing.assert_allclose(xp.to_numpy(xp.std(a, axis=axis, correction=1)),
                               np.std(h.astype(np.float64), axis=axis, ddof=1), rtol=1e-5)


def test_var_over_more_than_one_binding_takes_the_mean_and_squares(monkeypatch):
    """An input over one binding goes through the windowed reduction, which binds no
    centres: var takes the mean and the squares' sum there, with the same values."""
    from vtl.backends.wgpu import _runtime

    h = np.random.default_rng(8).standard_normal((16, 3000)).astype(np.float32) + 50
    whole = xp.to_numpy(xp.var(xp.asarray(h)))
    monkeypatch.setattr(_runtime.get(), "max_binding", 64 * 1024)  # 16384 float32
    d0 = REC.dispatches
    windowed = xp.to_numpy(xp.var(xp.asarray(h)))
    assert REC.dispatches - d0 > 5  # the windows, the squared deviations, their sums
    np.testing.assert_allclose(windowed, whole, rtol=1e-6)
    np.testing.assert_allclose(windowed, np.var(h.astype(np.float64)), rtol=2e-5)


def test_split_rows_are_used():
    # the cause of slow full reductions: one workgroup looping over a whole long row
    assert _reduction._split(1, N) > 100
    assert _reduction._split(4096, 4096) == 1


def test_integer_and_bool_reductions_exact():
    rng = np.random.default_rng(1)
    h = rng.integers(-(1 << 20), 1 << 20, N, dtype=np.int32)
    a = xp.asarray(h)
    got, nd = counted(lambda: xp.sum(a))
    assert nd <= 2 and got == np.sum(h, dtype=INT) and got.dtype == INT
    assert xp.to_numpy(xp.max(a)) == h.max() and xp.to_numpy(xp.min(a)) == h.min()
    h8 = rng.integers(-128, 128, N, dtype=np.int8)
    got = xp.to_numpy(xp.sum(xp.asarray(h8), dtype=xp.int8))  # wraps as NumPy
    assert got == np.sum(h8, dtype=np.int8)
    hb = np.zeros(N, bool)
    hb[N - 3] = True
    b = xp.asarray(hb)
    assert bool(xp.to_numpy(xp.any(b))) and not bool(xp.to_numpy(xp.all(b)))
    assert xp.to_numpy(xp.count_nonzero(b)) == 1
    assert xp.to_numpy(xp.argmax(b)) == N - 3


def test_argmax_first_occurrence_and_nan_across_workgroups():
    h = np.zeros(N, np.float32)
    h[[7, 600_000, N - 1]] = 5  # ties in different workgroups of a split row
    a = xp.asarray(h)
    assert xp.to_numpy(xp.argmax(a)) == 7
    assert xp.to_numpy(xp.argmin(a)) == 0
    h[[900_000, 300_000]] = np.nan  # the first NaN wins, as NumPy
    a = xp.asarray(h)
    for fn, npf in ((xp.argmax, np.argmax), (xp.argmin, np.argmin)):
        assert xp.to_numpy(fn(a)) == npf(h) == 300_000
    assert np.isnan(xp.to_numpy(xp.max(a))) and np.isnan(xp.to_numpy(xp.sum(a)))
    m = h.reshape(256, -1)
    np.testing.assert_array_equal(xp.to_numpy(xp.argmax(xp.asarray(m), axis=1)),
                                  np.argmax(m, axis=1))
    # columns (axis=0 folded in place, in slices): ties and NaNs in different slices
    c = np.zeros((2048, 300), np.float32)
    c[[3, 1500], 7] = 2
    c[[1000, 40], 8] = np.nan
    c[[5, 2000], 9] = -2
    c[2047, 10] = 1
    a = xp.asarray(c)
    for fn, npf in ((xp.argmax, np.argmax), (xp.argmin, np.argmin)):
        got, nd = counted(lambda fn=fn: fn(a, axis=0))
        assert nd <= 3  # no transpose copy
        np.testing.assert_array_equal(got, npf(c, axis=0))
        np.testing.assert_array_equal(xp.to_numpy(fn(a, axis=0, keepdims=True)),
                                      npf(c, axis=0, keepdims=True))
    c3 = c.reshape(4, 512, 300)
    np.testing.assert_array_equal(xp.to_numpy(xp.argmax(xp.asarray(c3), axis=1)),
                                  np.argmax(c3, axis=1))


@pytest.mark.parametrize("shape,axis", [((1024, 1024), 0), ((1024, 1024), -1),
                                        ((4, 300, 130), 1), ((3, 5, 64, 70), (1, 2)),
                                        ((300, 1000), 0), ((7, 100_003), 1)])
def test_axis_reductions(shape, axis):
    rng = np.random.default_rng(2)
    h = rng.uniform(0.5, 1.5, shape).astype(np.float32)
    a = xp.asarray(h)
    for kd in (False, True):
        got, nd = counted(lambda kd=kd: xp.sum(a, axis=axis, keepdims=kd))
        assert nd <= 3  # no transpose copy
        np.testing.assert_allclose(got, np.sum(h, axis=axis, keepdims=kd, dtype=np.float64),
                                   rtol=1e-5)
        assert got.shape == np.sum(h, axis=axis, keepdims=kd).shape
        np.testing.assert_array_equal(xp.to_numpy(xp.max(a, axis=axis, keepdims=kd)),
                                      np.max(h, axis=axis, keepdims=kd))
    hi = rng.integers(-1000, 1000, shape).astype(np.int32)
    np.testing.assert_array_equal(xp.to_numpy(xp.sum(xp.asarray(hi), axis=axis)),
                                  np.sum(hi, axis=axis, dtype=INT))
    np.testing.assert_allclose(xp.to_numpy(xp.var(a, axis=axis)),
                               np.var(h.astype(np.float64), axis=axis), rtol=1e-4)
    if isinstance(axis, int):
        np.testing.assert_array_equal(xp.to_numpy(xp.argmin(a, axis=axis)),
                                      np.argmin(h, axis=axis))


def test_one_dispatch_for_short_rows():
    a = xp.asarray(np.ones((512, 2048), np.float32))
    got, nd = counted(lambda: xp.sum(a, axis=-1))
    assert nd == 1
    np.testing.assert_array_equal(got, np.full(512, 2048, np.float32))


@pytest.mark.parametrize(("shape", "axis"), [((4096, 64, 4, 4), (2, 3)), ((2048, 256, 1), 1),
                                          ((300, 1, 70, 1), (2, 3)), ((5, 1), 0)])
def test_trailing_axes_with_one_column_reduce_as_rows(monkeypatch, shape, axis):
    """Reduced axes followed only by axes of size 1 (a bias gradient's per-channel sums over
    the pixels) are rows of the row kernel, in place: not the column kernel, whose workgroups
    would each have one working thread."""
    names = []
    real = REC.dispatch
    monkeypatch.setattr(REC, "dispatch", lambda k, *a, **kw: (names.append(k.name),
                                                               real(k, *a, **kw))[1])
    h = np.random.default_rng(3).uniform(0.5, 1.5, shape).astype(np.float32)
    a = xp.asarray(h)
    for kd in (False, True):
        names.clear()
        got = xp.to_numpy(xp.sum(a, axis=axis, keepdims=kd))
        assert names == ["reduce"]
        np.testing.assert_allclose(got, np.sum(h, axis=axis, keepdims=kd, dtype=np.float64),
                                   rtol=1e-5)


def test_empty_and_signed_zero():
    for shape, axis in (((0, 100), 0), ((100, 0), 1), ((100, 0), 0), ((0,), None)):
        h = np.zeros(shape, np.float32)
        got = xp.to_numpy(xp.sum(xp.asarray(h), axis=axis))
        np.testing.assert_array_equal(got, np.sum(h, axis=axis))
        assert got.shape == np.sum(h, axis=axis).shape
        assert xp.to_numpy(xp.prod(xp.asarray(h), axis=axis)).shape == got.shape
    e = xp.asarray(np.zeros((0, 5000), np.float32))
    for fn in (xp.argmax, xp.argmin, xp.max, xp.sum, xp.var):
        assert fn(e, axis=1).shape == (0,)
    neg = np.full(N, -0.0, np.float32)
    small = xp.to_numpy(xp.sum(xp.asarray(neg[:8])))  # one thread per row
    large = xp.to_numpy(xp.sum(xp.asarray(neg)))  # split over workgroups
    assert large == 0 and np.signbit(large) == np.signbit(small)


def test_other_dtypes_split():
    rng = np.random.default_rng(3)
    if "complex64" in HAS:
        c = (rng.uniform(0, 1, N) + 1j * rng.uniform(0, 1, N)).astype(np.complex64)
        got = xp.to_numpy(xp.sum(xp.asarray(c)))
        np.testing.assert_allclose(got, np.sum(c.astype(np.complex128)), rtol=1e-5)
    if "float64" in HAS:
        d = rng.standard_normal(N)
        np.testing.assert_allclose(xp.to_numpy(xp.sum(xp.asarray(d))), np.sum(d),
                                   rtol=1e-12, atol=1e-9)
        assert xp.to_numpy(xp.argmax(xp.asarray(d))) == np.argmax(d)
