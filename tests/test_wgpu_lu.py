"""Batched LU on the wgpu device: linalg.solve, inv, det and slogdet against NumPy."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
xp = pytest.importorskip("vtl.backends.wgpu")
if not xp.is_available():
    pytest.skip("no WebGPU adapter", allow_module_level=True)

from vtl.backends.wgpu import _lu  # noqa: E402

# the standard's floats: 16-bit solves compute in float32 and round (tests/test_dtypes_f16.py)
FLOATS = sorted(d for d in xp.__array_namespace_info__().dtypes(kind="real floating")
                if d in ("float32", "float64"))
RNG = np.random.default_rng(3)


def tol(dt):
    return dict(rtol=2e-3, atol=2e-4) if dt == "float32" else dict(rtol=1e-9, atol=1e-11)


def host(a):
    return xp.to_numpy(a)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", [1, 3, 16, 33, 64])
def test_solve_inv_det_match_numpy(dtype, n):
    if n > _lu.nmax(np.dtype(dtype)):
        pytest.skip(f"n={n} goes through the host for {dtype} on this device")
    a = (RNG.standard_normal((2, 3, n, n)) / np.sqrt(n) + np.eye(n)).astype(dtype)
    b = RNG.standard_normal((3, n, 4)).astype(dtype)  # broadcasts against a's batch
    v = RNG.standard_normal(n).astype(dtype)
    A = xp.asarray(a)
    got = host(xp.linalg.solve(A, xp.asarray(b)))
    assert got.dtype == a.dtype and got.shape == (2, 3, n, 4)
    np.testing.assert_allclose(got, np.linalg.solve(a, np.broadcast_to(b, (2, 3, n, 4))),
                               **tol(dtype))
    gv = host(xp.linalg.solve(A, xp.asarray(v)))
    assert gv.shape == (2, 3, n)
    np.testing.assert_allclose(a @ gv[..., None], np.broadcast_to(v[:, None], (2, 3, n, 1)),
                               **tol(dtype))
    np.testing.assert_allclose(host(xp.linalg.inv(A)), np.linalg.inv(a), **tol(dtype))
    d = host(xp.linalg.det(A))
    assert d.shape == (2, 3) and d.dtype == a.dtype
    np.testing.assert_allclose(d, np.linalg.det(a), rtol=tol(dtype)["rtol"] * 10)
    sg, la = xp.linalg.slogdet(A)
    ws, wl = np.linalg.slogdet(a)
    np.testing.assert_array_equal(host(sg), ws)
    np.testing.assert_allclose(host(la), wl, rtol=tol(dtype)["rtol"], atol=1e-4)
    assert host(la).shape == (2, 3) and host(sg).dtype == a.dtype


def test_pivoting_det_sign_views_and_singular():
    # a zero leading entry needs a row swap; each swap flips the determinant's sign
    p = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 2.0], [3.0, 0.0, 0.0]], np.float32)
    P = xp.asarray(p)
    np.testing.assert_allclose(host(xp.linalg.det(P)), 6.0, rtol=1e-6)
    np.testing.assert_allclose(host(xp.linalg.inv(P)), np.linalg.inv(p), rtol=1e-6)
    np.testing.assert_allclose(host(xp.linalg.det(P.mT)), 6.0, rtol=1e-6)  # a strided view
    s = xp.asarray(np.ones((2, 2), np.float32))
    assert host(xp.linalg.det(s)) == 0.0
    r = xp.linalg.slogdet(s)
    assert host(r.sign) == 0.0 and host(r.logabsdet) == -np.inf
    r = xp.linalg.slogdet(P)
    assert host(r.sign) == 1.0 and np.isclose(host(r.logabsdet), np.log(6.0))
    assert not np.isfinite(host(xp.linalg.solve(s, xp.asarray(np.ones(2, np.float32))))).all()
    e = xp.linalg.inv(xp.asarray(np.zeros((0, 3, 3), np.float32)))
    assert host(e).shape == (0, 3, 3)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_zero_pivot_columns_give_numpys_singular_det(dtype):
    """A column that is zero from the pivot down eliminates nothing (LAPACK's rule): det
    +0.0 and slogdet (+0.0, -inf) as NumPy, where 0 / 0 spread nan before (a zero matrix
    gave nan); a nonsingular batch entry beside it is unaffected."""
    if dtype not in xp.__array_namespace_info__().dtypes():
        pytest.skip(f"adapter lacks {dtype}")
    mats = np.array([np.zeros((3, 3)), [[1, 2, 3], [2, 4, 6], [0, 1, 1]],
                     [[0, 0, 0], [1, 2, 3], [4, 5, 7]], [[0, 1, 2], [0, 3, 4], [0, 5, 6]],
                     [[2, 1, 0], [1, 3, 1], [0, 1, 4]]], dtype)
    a = xp.asarray(mats)
    d = host(xp.linalg.det(a))
    sg, la = xp.linalg.slogdet(a)
    ws, wl = np.linalg.slogdet(mats)
    np.testing.assert_allclose(d, np.linalg.det(mats), rtol=1e-5, atol=1e-6)
    assert not np.signbit(d[:4]).any() and not np.signbit(host(sg)[:4]).any()
    np.testing.assert_array_equal(host(sg), ws)
    np.testing.assert_allclose(host(la), wl, rtol=1e-5)


def test_large_and_bad_shapes_go_through_the_host():
    n = _lu.nmax(np.dtype("float32")) + 1
    a = (RNG.standard_normal((n, n)) + n * np.eye(n)).astype(np.float32)
    np.testing.assert_allclose(host(xp.linalg.inv(xp.asarray(a))), np.linalg.inv(a),
                               rtol=1e-3, atol=1e-5)
    with pytest.raises(Exception, match="square"):
        xp.linalg.inv(xp.asarray(np.ones((2, 3), np.float32)))


def test_capabilities_name_the_device_solvers():
    caps = xp.__array_namespace_info__().capabilities()
    for name in _lu.NATIVE:
        assert name in caps["linalg device functions"]
    assert caps["data-dependent shapes"] is True
