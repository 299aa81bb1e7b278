"""The cupy backend's namespace fixes (``vtl/backends/cupy/namespace.py``) against NumPy:
the direct cuBLAS matmul over every operand layout, staged reductions, signed zeros."""

from __future__ import annotations

import numpy as np
import pytest

cp = pytest.importorskip("cupy")
try:
    cp.cuda.runtime.getDeviceCount()
except Exception:  # noqa: BLE001 - no driver / no device
    pytest.skip("no CUDA device", allow_module_level=True)

from vtl.backends.cupy import namespace as ns  # noqa: E402

RNG = np.random.default_rng(3)


def _on_device(v):
    """A host array as a CuPy array; a Python scalar as it is."""
    return cp.asarray(v) if isinstance(v, np.ndarray) else v


def _layouts(a: np.ndarray):
    """The same matrix as a C-order array, a Fortran-order array, a transposed view and a
    strided (non-contiguous) view."""
    yield cp.asarray(a)
    yield cp.asfortranarray(cp.asarray(a))
    yield cp.ascontiguousarray(cp.asarray(a.T)).T
    big = cp.zeros((a.shape[0], 2 * a.shape[1]), dtype=a.dtype)
    big[:, ::2] = cp.asarray(a)
    yield big[:, ::2]
    wide = cp.zeros((a.shape[0] + 2, a.shape[1] + 3), dtype=a.dtype)  # a slice, read in place
    wide[1:-1, 2:-1] = cp.asarray(a)
    yield wide[1:-1, 2:-1]
    tall = cp.zeros((a.shape[1] + 3, a.shape[0] + 1), dtype=a.dtype)
    tall[:-3, 1:] = cp.asarray(a.T)
    yield tall[:-3, 1:].T


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("mkn", [(5, 7, 3), (1, 9, 4), (6, 1, 1), (64, 256, 128), (3, 0, 4),
                                 (0, 4, 2)])
def test_matmul_every_layout_matches_numpy(dtype, mkn):
    m, k, n = mkn
    a = RNG.standard_normal((m, k)).astype(dtype)
    b = RNG.standard_normal((k, n)).astype(dtype)
    want = a.astype(np.float64) @ b.astype(np.float64)
    tol = 1e-5 if dtype == "float32" else 1e-12
    ns.matmul(cp.ones((1, 1), dtype=dtype), cp.ones((1, 1), dtype=dtype))
    assert ns._blas  # the direct cuBLAS path loaded
    direct = ns._blas.matmul(cp.asarray(a), cp.asfortranarray(cp.asarray(b)))
    assert direct is not None
    np.testing.assert_allclose(cp.asnumpy(direct), want, rtol=tol, atol=tol * max(k, 1))
    for x in _layouts(a):
        for y in _layouts(b):
            got = ns.matmul(x, y)
            assert got.shape == (m, n) and got.dtype == np.dtype(dtype)
            np.testing.assert_allclose(cp.asnumpy(got), want, rtol=tol, atol=tol * max(k, 1))


def test_matmul_errors_and_other_ranks():
    with pytest.raises(ValueError, match="not aligned"):
        ns.matmul(cp.ones((2, 3), dtype=cp.float32), cp.ones((4, 2), dtype=cp.float32))
    a = RNG.standard_normal((2, 3, 4))
    np.testing.assert_allclose(cp.asnumpy(ns.matmul(cp.asarray(a), cp.asarray(a[0].T))),
                               a @ a[0].T, rtol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shapes", [((4, 5, 3), (4, 3, 6)), ((2, 3, 5, 4), (2, 3, 4, 2)),
                                    ((3, 5, 4), (4, 7)), ((5, 4), (2, 4, 3)),
                                    ((2, 1, 5, 4), (1, 3, 4, 6)), ((1, 5, 4), (3, 4, 2)),
                                    ((0, 5, 4), (0, 4, 2)), ((3, 2, 0), (3, 0, 4))])
def test_batched_matmul_every_layout_matches_numpy(dtype, shapes):
    """Stacks of matrices (strided-batched cuBLAS; broadcasts, transposed and strided
    operands)."""
    a = RNG.standard_normal(shapes[0]).astype(dtype)
    b = RNG.standard_normal(shapes[1]).astype(dtype)
    want = a.astype(np.float64) @ b.astype(np.float64)
    tol = 1e-5 if dtype == "float32" else 1e-12
    k = a.shape[-1]

    def layouts(x):
        yield cp.asarray(x)
        yield cp.ascontiguousarray(cp.asarray(np.swapaxes(x, -1, -2))).swapaxes(-1, -2)
        big = cp.zeros((*x.shape[:-1], 2 * x.shape[-1]), dtype=x.dtype)
        big[..., ::2] = cp.asarray(x)
        yield big[..., ::2]
        pad = cp.zeros((*x.shape[:-2], x.shape[-2] + 3, x.shape[-1] + 2), dtype=x.dtype)
        pad[..., 1:-2, :-2] = cp.asarray(x)  # a block of rows of wider matrices
        yield pad[..., 1:-2, :-2]

    for x in layouts(a):
        for y in layouts(b):
            got = ns.matmul(x, y)
            assert got.shape == want.shape and got.dtype == np.dtype(dtype)
            np.testing.assert_allclose(cp.asnumpy(got), want, rtol=tol, atol=tol * max(k, 1))


@pytest.mark.parametrize("axis", [None, 0, (0, 2, 3), (2, 3), (1, 3), -1])
def test_staged_reductions_match_numpy(axis):
    x = RNG.standard_normal((8, 16, 32, 32))
    for arr in (x, x.transpose(0, 2, 3, 1)):
        for keepdims in (False, True):
            for name in ("sum", "mean"):
                got = getattr(ns, name)(cp.asarray(arr), axis=axis, keepdims=keepdims)
                want = getattr(np, name)(arr, axis=axis, keepdims=keepdims)
                assert got.shape == want.shape
                np.testing.assert_allclose(cp.asnumpy(got), want, rtol=1e-10, atol=1e-10)


def test_signed_zeros_survive():
    assert np.signbit(cp.asnumpy(ns.asarray(np.array(-0.0, np.float32))))
    assert np.all(np.signbit(cp.asnumpy(ns.full((3,), -0.0))))
    q = cp.asnumpy(ns.divide(cp.asarray([np.inf, 1.0]), cp.asarray([-0.0, -np.inf])))
    assert q[0] == -np.inf and q[1] == 0 and np.signbit(q[1])
    q = cp.asnumpy(ns.divide(cp.asarray([np.inf, 1.0]), -0.0))  # a Python scalar divisor
    assert q[0] == -np.inf and q[1] == -np.inf
    q = cp.asnumpy(ns.divide(ns.asarray(np.array(-0.0)), ns.asarray(np.array(np.inf))))
    assert q.shape == () and q == 0 and np.signbit(q)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_divide_is_numpys(dtype):
    """Zero, infinite and nan divisors and dividends, real divisors and Python scalars: the
    same parts, nan positions and signs as NumPy's division."""
    vals = np.array([0.0, -0.0, 1.0, -2.5, 3e-3, np.inf, -np.inf, np.nan])
    a = (vals[:, None] + 1j * vals[None, :]).reshape(-1).astype(dtype)
    x, y = np.meshgrid(a, a)
    x, y = x.reshape(-1), y.reshape(-1)
    rdt = np.float32 if dtype == "complex64" else np.float64
    cases = [(x, y), (a, np.array([0.0, -0.0, 2.0, np.inf, np.nan] * 13, rdt)[: a.size]),
             (a[:5], 0.0), (a[:5], 1 + 1j), (np.array(1 + 1j, dtype), np.array(0, rdt))]
    rtol = 1e-6 if dtype == "complex64" else 1e-14
    for p, q in cases:
        got = cp.asnumpy(ns.divide(_on_device(p), _on_device(q)))
        with np.errstate(all="ignore"):
            want = np.divide(p, q)
        assert got.dtype == want.dtype and got.shape == want.shape
        for part in (np.real, np.imag):
            g, w = part(got), part(want)
            np.testing.assert_allclose(g, w, rtol=rtol, atol=0)  # nan positions equal too
            ok = ~np.isnan(w)  # a nan's sign bit is the hardware's
            np.testing.assert_array_equal(np.signbit(g[ok]), np.signbit(w[ok]))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_floor_divide_is_numpys(dtype):
    """Bit for bit NumPy's floor_divide (values and signs of zeros) on quotients that round
    to zero or to an integer, signed zeros, infinities, nans, zero divisors, mixed dtypes,
    0-d operands and Python scalars."""
    vals = np.array([0.0, -0.0, 1.0, -1.0, 0.1, -0.1, 2.5, -7.0, 3e-30, -3e-30, 1e30, -1e30,
                     np.inf, -np.inf, np.nan], dtype)
    x, y = (v.reshape(-1) for v in np.meshgrid(vals, vals))
    r = np.random.default_rng(5)
    big = r.standard_normal(4096).astype(dtype) * 10.0 ** r.integers(-20, 20, 4096)
    cases = [(x, y), (big, big[::-1].copy()), (vals, np.array(-2.0, dtype)),
             (np.array(1.0, dtype), np.array(0.1, dtype)), (vals, 0.1), (3.0, vals)]
    if dtype == "float64":  # a quotient below the smallest subnormal; float32 with float64
        cases += [(np.array([-3.1e-302, 3.1e-302]), np.array([1.2552288e22, -1.0], np.float32))]
    for p, q in cases:
        got = cp.asnumpy(ns.floor_divide(_on_device(p), _on_device(q)))
        with np.errstate(all="ignore"):
            want = np.floor_divide(p, q)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)  # nan positions equal too
        np.testing.assert_array_equal(np.signbit(got[~np.isnan(want)]),
                                      np.signbit(want[~np.isnan(want)]))


@pytest.mark.parametrize("fn", ["var", "std"])
@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)])
def test_two_pass_var_and_std_of_large_arrays(fn, axis):
    x = RNG.standard_normal((300, 400)) * 10 + 5  # 120,000 elements: the two-pass path
    x[::7, 3] = 1e4
    for dt, tol in ((np.float64, 1e-12), (np.float32, 1e-5)):
        for correction, keepdims in ((0, False), (1, True)):
            got = getattr(ns, fn)(cp.asarray(x.astype(dt)), axis=axis, correction=correction,
                                  keepdims=keepdims)
            want = getattr(np, fn)(x.astype(dt), axis=axis, ddof=correction, keepdims=keepdims)
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_allclose(cp.asnumpy(got), want, rtol=tol)


@pytest.mark.parametrize("fn", ["argmax", "argmin"])
def test_arg_reductions_take_the_first_nan(fn):
    x = RNG.standard_normal((64, 300))
    for row in range(64):
        x[row, RNG.choice(300, size=row % 5, replace=False)] = np.nan
    for axis, keepdims in [(None, False), (1, False), (0, True), (-1, True)]:
        got = cp.asnumpy(getattr(ns, fn)(cp.asarray(x), axis=axis, keepdims=keepdims))
        np.testing.assert_array_equal(got, getattr(np, fn)(x, axis=axis, keepdims=keepdims))
    i = cp.asnumpy(getattr(ns, fn)(cp.asarray(np.array([1.0, np.nan, 2.0, np.nan]))))
    assert i == 1


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("fn", ["argmax", "argmin"])
def test_arg_reductions_order_special_values_as_numpy(fn, dtype):
    """Signed zeros are equal (the first wins), infinities and subnormals keep their order,
    and ties take the lowest index, along every axis."""
    tiny = np.finfo(dtype).smallest_subnormal
    vals = np.array([-0.0, 0.0, np.inf, -np.inf, tiny, -tiny, 1.0, -1.0, 3.5, -3.5,
                     np.finfo(dtype).max, -np.finfo(dtype).max], dtype)
    rng = np.random.default_rng(7)
    for _ in range(20):
        x = rng.choice(vals, size=(7, 9)).astype(dtype)
        for axis in (None, 0, 1):
            got = cp.asnumpy(getattr(ns, fn)(cp.asarray(x), axis=axis))
            np.testing.assert_array_equal(got, getattr(np, fn)(x, axis=axis))
    for pair in ([-0.0, 0.0], [0.0, -0.0], [-tiny, -0.0], [np.nan, np.inf, np.nan]):
        x = np.array(pair, dtype)
        assert int(getattr(ns, fn)(cp.asarray(x))) == int(getattr(np, fn)(x))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("accumulate", [False, True])
def test_matmul_into_slices(dtype, accumulate):
    """``Blas.matmul_into`` writes (or adds) the product into a slice of a larger array in
    place, batched or not, and touches nothing around it; it declines an ``out`` cuBLAS
    cannot write row by row."""
    blas = ns.blas()
    assert blas is not None
    tol = 1e-5 if dtype == "float32" else 1e-12
    a = RNG.standard_normal((3, 5, 4)).astype(dtype)
    b = RNG.standard_normal((3, 4, 6)).astype(dtype)
    host = RNG.standard_normal((4, 9, 8)).astype(dtype)
    for lhs, rhs, sl in ((a, b, np.s_[1:4, 2:7, 1:7]), (a[1], b[2], np.s_[2, 3:8, :6])):
        big = cp.asarray(host)
        want = host.copy()
        want[sl] = (want[sl] if accumulate else 0) + lhs.astype(np.float64) @ rhs
        x = cp.asarray(lhs)
        y = cp.ascontiguousarray(cp.asarray(np.swapaxes(rhs, -1, -2))).swapaxes(-1, -2)
        assert blas.matmul_into(x, y, big[sl], accumulate)
        np.testing.assert_allclose(cp.asnumpy(big), want, rtol=tol, atol=tol)
    out = cp.zeros((3, 6, 5), dtype=dtype).swapaxes(-1, -2)  # columns of unit stride
    assert not blas.matmul_into(cp.asarray(a), cp.asarray(b), out)
    assert not cp.any(out)
    assert not blas.matmul_into(cp.asarray(a), cp.asarray(b), cp.zeros((3, 5, 6), np.float16))
    assert not blas.matmul_into(cp.asarray(a), cp.asarray(b), cp.zeros((3, 5, 7), dtype))
