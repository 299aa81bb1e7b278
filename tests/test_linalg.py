"""vtl.linalg: every function against numpy.linalg on each backend (batched inputs,
float32/float64, complex where it matters), the error cases, and every VJP rule
against finite differences (second order for inv, det and solve)."""

from __future__ import annotations

import math
import types

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import vtl
from tests.helpers import (
    assert_close,
    check_grad,
    check_grad_matches_numpy,
    skip_unless_dtype,
    to_numpy,
)

LA = vtl.linalg
FLOATS = ("float32", "float64")
BATCH = hnp.array_shapes(min_dims=0, max_dims=2, min_side=1, max_side=3)
SIZE = st.integers(1, 4)
SEED = st.integers(0, 2**31 - 1)


@pytest.fixture(autouse=True)
def _needs_linalg_extension(request):
    """Skip numeric tests on a backend whose namespace lacks the linalg extension."""
    if "backend" in request.fixturenames:
        name = request.getfixturevalue("backend")
        if not hasattr(vtl.backends.get(name).xp, "linalg"):
            pytest.skip(f"backend {name} has no linalg extension")


def _tols(dtype: str) -> dict[str, float]:
    if dtype in ("float32", "complex64"):
        return {"rtol": 2e-4, "atol": 2e-4}
    return {"rtol": 1e-8, "atol": 1e-9}


def _well(rng: np.random.Generator, shape: tuple[int, ...], dtype: str = "float64") -> np.ndarray:
    """Random square matrices made well conditioned (diagonally dominant)."""
    n = shape[-1]
    a = rng.standard_normal(shape)
    if dtype.startswith("complex"):
        a = a + 1j * rng.standard_normal(shape)
    return (a + (n + 2) * np.eye(n)).astype(dtype)


def _spd(rng: np.random.Generator, shape: tuple[int, ...], dtype: str = "float64") -> np.ndarray:
    """Symmetric positive-definite matrices ``B B^T + n I``."""
    n = shape[-1]
    b = rng.standard_normal(shape)
    return (b @ np.swapaxes(b, -1, -2) + n * np.eye(n)).astype(dtype)


def _spectral(rng: np.random.Generator, batch: tuple[int, ...], m: int, n: int,
              dtype: str = "float64") -> np.ndarray:
    """Matrices with well separated singular values (or eigenvalues when symmetric)."""
    k = min(m, n)
    u, _ = np.linalg.qr(rng.standard_normal((*batch, m, m)))
    v, _ = np.linalg.qr(rng.standard_normal((*batch, n, n)))
    s = np.zeros((*batch, m, n))
    idx = np.arange(k)
    s[..., idx, idx] = 1.0 + 1.5 * np.arange(k)[::-1]
    return (u @ s @ v).astype(dtype)


def _sym_spectral(rng: np.random.Generator, batch: tuple[int, ...], n: int,
                  dtype: str = "float64") -> np.ndarray:
    q, _ = np.linalg.qr(rng.standard_normal((*batch, n, n)))
    w = np.linspace(-2.0, 3.0, n) if n > 1 else np.array([1.5])
    return ((q * w[..., None, :]) @ np.swapaxes(q, -1, -2)).astype(dtype)


def _t(a: np.ndarray) -> vtl.Tensor:
    return vtl.asarray(a)


# -- forward: inverse, solve, determinants ----------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS)
@given(batch=BATCH, n=SIZE, seed=SEED)
def test_inv_det_slogdet(backend, dtype, batch, n, seed):
    skip_unless_dtype(backend, dtype)
    rng = np.random.default_rng(seed)
    a = _well(rng, (*batch, n, n), dtype)
    if n > 1:
        a[..., [0, 1], :] = a[..., [1, 0], :]  # negative determinants too
    x = _t(a)
    tol = _tols(dtype)
    assert_close(LA.inv(x), np.linalg.inv(a), **tol)
    assert_close(LA.det(x), np.asarray(np.linalg.det(a)), **tol)
    res = LA.slogdet(x)
    sign, logabs = np.linalg.slogdet(a)
    assert isinstance(res, LA.SlogdetResult)
    assert_close(res.sign, np.asarray(sign), **tol)
    assert_close(res.logabsdet, np.asarray(logabs), **tol)


def test_inv_det_complex_and_empty_batch(backend):
    skip_unless_dtype(backend, "complex128")
    rng = np.random.default_rng(1)
    a = _well(rng, (2, 3, 3), "complex128")
    assert_close(LA.inv(_t(a)), np.linalg.inv(a), **_tols("float64"))
    assert_close(LA.det(_t(a)), np.linalg.det(a), **_tols("float64"))
    s, l_ = LA.slogdet(_t(a))
    assert_close(s, np.linalg.slogdet(a)[0], **_tols("float64"))
    assert_close(l_, np.linalg.slogdet(a)[1], **_tols("float64"))
    e = np.zeros((0, 2, 2), dtype=np.float32)
    assert_close(LA.inv(_t(e)), e)


@pytest.mark.parametrize("dtype", FLOATS)
@given(batch=BATCH, n=SIZE, k=st.integers(1, 3), kind=st.sampled_from(["vec", "mat", "bcast"]),
       seed=SEED)
def test_solve(backend, dtype, batch, n, k, kind, seed):
    skip_unless_dtype(backend, dtype)
    rng = np.random.default_rng(seed)
    a = _well(rng, (*batch, n, n), dtype)
    if kind == "vec":
        b = rng.standard_normal(n).astype(dtype)
    elif kind == "mat":
        b = rng.standard_normal((*batch, n, k)).astype(dtype)
    else:  # x2 has extra and size-1 batch axes that broadcast against x1's
        b = rng.standard_normal((2, *(1 for _ in batch), n, k)).astype(dtype)
    expected = np.linalg.solve(a, b)
    assert_close(LA.solve(_t(a), _t(b)), expected, **_tols(dtype))


def test_solve_unbatched_matrix_batched_rhs(backend):
    rng = np.random.default_rng(2)
    a = _well(rng, (3, 3), "float32")
    b = rng.standard_normal((4, 3, 2)).astype(np.float32)
    assert_close(LA.solve(_t(a), _t(b)), np.linalg.solve(a, b), **_tols("float32"))


@pytest.mark.parametrize("dtype", FLOATS)
@given(batch=BATCH, n=SIZE, p=st.integers(-3, 4), seed=SEED)
def test_matrix_power(backend, dtype, batch, n, p, seed):
    skip_unless_dtype(backend, dtype)
    rng = np.random.default_rng(seed)
    a = (_well(rng, (*batch, n, n), "float64") / (n + 2)).astype(dtype)
    assert_close(LA.matrix_power(_t(a), p), np.linalg.matrix_power(a, p), **_tols(dtype))


# -- forward: decompositions -----------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("upper", [False, True])
@given(batch=BATCH, n=SIZE, seed=SEED)
def test_cholesky(backend, dtype, upper, batch, n, seed):
    skip_unless_dtype(backend, dtype)
    a = _spd(np.random.default_rng(seed), (*batch, n, n), dtype)
    assert_close(LA.cholesky(_t(a), upper=upper), np.linalg.cholesky(a, upper=upper),
                 **_tols(dtype))


def _fix_signs(v: np.ndarray) -> np.ndarray:
    """Columns scaled so that their largest-magnitude entry is positive."""
    idx = np.argmax(np.abs(v), axis=-2)[..., None, :]
    return v * np.sign(np.take_along_axis(v, idx, axis=-2))


@pytest.mark.parametrize("dtype", FLOATS)
@given(batch=BATCH, n=SIZE, seed=SEED)
def test_eigh_eigvalsh(backend, dtype, batch, n, seed):
    skip_unless_dtype(backend, dtype)
    a = _sym_spectral(np.random.default_rng(seed), batch, n, dtype)
    w_np, v_np = np.linalg.eigh(a)
    res = LA.eigh(_t(a))
    assert isinstance(res, LA.EighResult)
    tol = _tols(dtype)
    assert_close(res.eigenvalues, w_np, **tol)
    assert_close(_fix_signs(to_numpy(res.eigenvectors)), _fix_signs(v_np), **tol)
    assert_close(LA.eigvalsh(_t(a)), w_np, **tol)


def test_eigh_complex_hermitian(backend):
    skip_unless_dtype(backend, "complex128")
    rng = np.random.default_rng(3)
    b = rng.standard_normal((2, 3, 3)) + 1j * rng.standard_normal((2, 3, 3))
    a = b + np.conj(np.swapaxes(b, -1, -2))
    w, v = LA.eigh(_t(a))
    assert_close(w, np.linalg.eigvalsh(a), **_tols("float64"))
    vv = to_numpy(v)
    recon = (vv * to_numpy(w)[..., None, :]) @ np.conj(np.swapaxes(vv, -1, -2))
    np.testing.assert_allclose(recon, a, atol=1e-10)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("mode", ["reduced", "complete"])
@given(batch=BATCH, m=SIZE, n=SIZE, seed=SEED)
def test_qr(backend, dtype, mode, batch, m, n, seed):
    skip_unless_dtype(backend, dtype)
    a = _spectral(np.random.default_rng(seed), batch, m, n, dtype)
    q_np, r_np = np.linalg.qr(a, mode=mode)
    res = LA.qr(_t(a), mode=mode)
    assert isinstance(res, LA.QRResult)
    q, r = to_numpy(res.Q), to_numpy(res.R)
    assert q.shape == q_np.shape and r.shape == r_np.shape
    assert q.dtype == r.dtype == np.dtype(dtype)
    tol = _tols(dtype)
    np.testing.assert_allclose(q @ r, a, rtol=tol["rtol"] * 10, atol=tol["atol"] * 10)
    np.testing.assert_allclose(np.swapaxes(q, -1, -2) @ q, np.broadcast_to(
        np.eye(q.shape[-1]), (*batch, q.shape[-1], q.shape[-1])), atol=tol["atol"] * 10)
    np.testing.assert_allclose(np.abs(r), np.abs(r_np), rtol=tol["rtol"] * 10,
                               atol=tol["atol"] * 10)
    np.testing.assert_array_equal(np.tril(r, -1), 0)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("full", [False, True])
@given(batch=BATCH, m=SIZE, n=SIZE, seed=SEED)
def test_svd_svdvals(backend, dtype, full, batch, m, n, seed):
    skip_unless_dtype(backend, dtype)
    a = _spectral(np.random.default_rng(seed), batch, m, n, dtype)
    u_np, s_np, vh_np = np.linalg.svd(a, full_matrices=full)
    res = LA.svd(_t(a), full_matrices=full)
    assert isinstance(res, LA.SVDResult)
    u, s, vh = (to_numpy(t) for t in res)
    assert u.shape == u_np.shape and vh.shape == vh_np.shape
    tol = _tols(dtype)
    assert_close(res.S, s_np, **tol)
    k = min(m, n)
    recon = (u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :]
    np.testing.assert_allclose(recon, a, rtol=tol["rtol"] * 10, atol=tol["atol"] * 10)
    assert_close(LA.svdvals(_t(a)), s_np, **tol)


@pytest.mark.parametrize("dtype", FLOATS)
@given(batch=BATCH, m=SIZE, n=SIZE, seed=SEED)
def test_pinv_matrix_rank(backend, dtype, batch, m, n, seed):
    skip_unless_dtype(backend, dtype)
    rng = np.random.default_rng(seed)
    a = _spectral(rng, batch, m, n, dtype)
    tol = _tols(dtype)
    assert_close(LA.pinv(_t(a)), np.linalg.pinv(a), rtol=tol["rtol"] * 10,
                 atol=tol["atol"] * 10)
    assert_close(LA.matrix_rank(_t(a)), np.linalg.matrix_rank(a).astype(np.int64),
                 check_dtype=False)
    # a rank-1 matrix
    r1 = (rng.standard_normal((*batch, m, 1)) @ rng.standard_normal((*batch, 1, n)))
    r1 = r1.astype(dtype)
    rank = to_numpy(LA.matrix_rank(_t(r1)))
    np.testing.assert_array_equal(rank, np.ones(batch, dtype=rank.dtype))
    assert rank.dtype.kind in "iu"
    # rtol cuts singular values
    s_max = 1.0 + 1.5 * (min(m, n) - 1)
    rank = to_numpy(LA.matrix_rank(_t(a), rtol=(s_max - 0.1) / s_max))
    np.testing.assert_array_equal(rank, np.ones(batch, dtype=rank.dtype))


def test_pinv_rtol_tensor(backend):
    a = np.diag([4.0, 2.0, 0.5]).astype(np.float32)
    out = LA.pinv(_t(a), rtol=vtl.asarray(0.2, dtype=vtl.float32))
    assert_close(out, np.diag([0.25, 0.5, 0.0]).astype(np.float32))


# -- forward: norms ------------------------------------------------------------------
MATRIX_ORDS = ["fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("ord", MATRIX_ORDS)
@given(batch=BATCH, m=SIZE, n=SIZE, keepdims=st.booleans(), seed=SEED)
def test_matrix_norm(backend, dtype, ord, batch, m, n, keepdims, seed):  # noqa: A002
    skip_unless_dtype(backend, dtype)
    a = np.random.default_rng(seed).standard_normal((*batch, m, n)).astype(dtype)
    expected = np.linalg.matrix_norm(a, ord=ord, keepdims=keepdims)
    assert_close(LA.matrix_norm(_t(a), ord=ord, keepdims=keepdims), expected, **_tols(dtype))


def test_matrix_norm_default_and_complex(backend):
    skip_unless_dtype(backend, "complex128")
    rng = np.random.default_rng(4)
    a = rng.standard_normal((2, 3, 4)) + 1j * rng.standard_normal((2, 3, 4))
    for ord in MATRIX_ORDS:  # noqa: A001
        assert_close(LA.matrix_norm(_t(a), ord=ord), np.linalg.matrix_norm(a, ord=ord),
                     **_tols("float64"))
    assert_close(LA.matrix_norm(_t(a.real)), np.linalg.matrix_norm(a.real))


VECTOR_ORDS = [2, 1, 3, 0.5, 0, -1, math.inf, -math.inf]


@pytest.mark.parametrize("dtype", FLOATS)
@given(data=st.data(), ord=st.sampled_from(VECTOR_ORDS), keepdims=st.booleans(), seed=SEED)
def test_vector_norm(backend, dtype, data, ord, keepdims, seed):  # noqa: A002
    skip_unless_dtype(backend, dtype)
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4))
    nd = len(shape)
    axis = data.draw(st.one_of(
        st.none(),
        st.integers(-nd, nd - 1) if nd else st.none(),
        st.lists(st.integers(0, nd - 1), unique=True, min_size=1).map(tuple) if nd
        else st.none(),
    ))
    a = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    expected = np.linalg.vector_norm(a, axis=axis, ord=ord, keepdims=keepdims)
    out = LA.vector_norm(_t(a), axis=axis, ord=ord, keepdims=keepdims)
    assert_close(out, np.asarray(expected), **_tols(dtype))


def test_vector_norm_complex_and_special(backend):
    skip_unless_dtype(backend, "complex128")
    rng = np.random.default_rng(5)
    a = rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))
    for ord in VECTOR_ORDS:  # noqa: A001
        out = LA.vector_norm(_t(a), axis=-1, ord=ord)
        assert_close(out, np.linalg.vector_norm(a, axis=-1, ord=ord), **_tols("float64"))
    z = np.zeros(3, dtype=np.float32)
    assert_close(LA.vector_norm(_t(z)), np.asarray(0.0, dtype=np.float32))
    w = np.array([1.0, -np.inf, 2.0], dtype=np.float32)
    assert_close(LA.vector_norm(_t(w)), np.asarray(np.inf, dtype=np.float32))
    assert_close(LA.vector_norm(_t(w), ord=-math.inf), np.asarray(1.0, dtype=np.float32))


# -- forward: trace, diagonal, products, re-exports ---------------------------------------
@given(batch=BATCH, m=SIZE, n=SIZE, offset=st.integers(-4, 4), seed=SEED,
       dtype=st.sampled_from(["float32", "float64", "int32", "int64", "uint8", "bool"]))
def test_diagonal_trace(backend, batch, m, n, offset, seed, dtype):
    skip_unless_dtype(backend, dtype)
    a = (np.random.default_rng(seed).standard_normal((*batch, m, n)) * 4).astype(dtype)
    assert_close(LA.diagonal(_t(a), offset=offset),
                 np.linalg.diagonal(a, offset=offset))
    if dtype == "bool":
        with pytest.raises(TypeError, match="trace"):
            LA.trace(_t(a))
        return
    expected = np.asarray(np.linalg.trace(a, offset=offset))
    assert_close(LA.trace(_t(a), offset=offset), expected, **_tols(dtype))


def test_trace_dtype(backend):
    skip_unless_dtype(backend, "float64")
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = LA.trace(_t(a), dtype=vtl.float64)
    assert_close(out, np.asarray(np.trace(a, dtype=np.float64)))
    ai = np.arange(9, dtype=np.int8).reshape(3, 3)
    assert_close(LA.trace(_t(ai)), np.asarray(np.trace(ai)))  # promoted to the default int


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
@given(n=st.integers(0, 4), m=st.integers(0, 4), seed=SEED)
def test_outer(backend, dtype, n, m, seed):
    skip_unless_dtype(backend, dtype)
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(n) * 5).astype(dtype)
    b = (rng.standard_normal(m) * 5).astype(dtype)
    assert_close(LA.outer(_t(a), _t(b)), np.outer(a, b), **_tols(dtype))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
@given(s1=hnp.array_shapes(min_dims=0, max_dims=2, min_side=1, max_side=3),
       axis=st.integers(-3, -1), seed=SEED)
def test_cross(backend, dtype, s1, axis, seed):
    skip_unless_dtype(backend, dtype)
    rng = np.random.default_rng(seed)
    shape1 = list(s1) + [3]
    shape2 = [1] * len(s1) + [3]
    nd = len(shape1)
    if -axis > nd:
        axis = -1
    # move the size-3 axis to position `axis`
    shape1.insert(nd + axis, shape1.pop())
    shape2.insert(nd + axis, shape2.pop())
    a = (rng.standard_normal(shape1) * 5).astype(dtype)
    b = (rng.standard_normal(shape2) * 5).astype(dtype)
    assert_close(LA.cross(_t(a), _t(b), axis=axis), np.cross(a, b, axis=axis),
                 **_tols(dtype))


def test_reexports(backend):
    assert LA.matmul is vtl.matmul
    assert LA.matrix_transpose is vtl.matrix_transpose
    assert LA.tensordot is vtl.tensordot
    assert LA.vecdot is vtl.vecdot
    rng = np.random.default_rng(6)
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    assert_close(LA.matmul(_t(a), _t(b)), a @ b, **_tols("float32"))
    assert_close(LA.matrix_transpose(_t(a)), np.swapaxes(a, -1, -2))
    assert_close(LA.tensordot(_t(a), _t(b), axes=1), np.tensordot(a, b, axes=1),
                 **_tols("float32"))
    c = rng.standard_normal((3, 4)).astype(np.float32)
    assert_close(LA.vecdot(_t(a), _t(c)), np.sum(a * c, axis=-1), **_tols("float32"))
    assert_close(LA.vecdot(_t(a), _t(a), axis=-2), np.sum(a * a, axis=-2), **_tols("float32"))


def test_all_names():
    for name in LA.__all__:
        assert hasattr(LA, name), name
    fns = [n for n in LA.__all__ if not n.endswith("Result")]
    assert len(fns) == 23


# -- errors ---------------------------------------------------------------------------
SQUARE_FNS = ["inv", "det", "slogdet", "cholesky", "eigh", "eigvalsh"]
MATRIX_FNS = SQUARE_FNS + ["qr", "svd", "svdvals", "pinv", "matrix_rank", "matrix_norm",
                           "diagonal", "trace"]


@pytest.mark.parametrize("fname", MATRIX_FNS)
def test_matrix_argument_errors(backend, fname):
    fn = getattr(LA, fname)
    with pytest.raises(ValueError, match=fname + r".*at least 2 dimensions"):
        fn(vtl.ones((3,)))
    with pytest.raises(TypeError, match=fname):
        fn(np.ones((3, 3)))
    if fname in SQUARE_FNS:
        with pytest.raises(ValueError, match=fname + r".*square"):
            fn(vtl.ones((2, 3, 4)))
    if fname not in ("diagonal", "trace"):
        with pytest.raises(TypeError, match=fname + r".*floating-point.*int32"):
            fn(vtl.ones((3, 3), dtype=vtl.int32))


def test_matrix_power_errors(backend):
    with pytest.raises(ValueError, match="square"):
        LA.matrix_power(vtl.ones((2, 3)), 2)
    with pytest.raises(TypeError, match="integer exponent"):
        LA.matrix_power(vtl.ones((2, 2)), 1.5)
    with pytest.raises(TypeError, match="floating-point"):
        LA.matrix_power(vtl.ones((2, 2), dtype=vtl.int64), 2)
    assert_close(LA.matrix_power(vtl.ones((2, 2)), np.int64(2)),
                 np.full((2, 2), 2.0, dtype=np.float32))


def test_solve_errors(backend):
    a = vtl.asarray(np.eye(3, dtype=np.float32))
    with pytest.raises(ValueError, match=r"solve.*x2 must have shape"):
        LA.solve(a, vtl.ones((4,)))
    with pytest.raises(ValueError, match=r"solve.*x2 must have shape"):
        LA.solve(a, vtl.ones((2, 3)))
    with pytest.raises(ValueError, match=r"solve.*x2 must have shape"):
        LA.solve(a, vtl.asarray(1.0))
    with pytest.raises(ValueError, match=r"solve.*broadcast"):
        LA.solve(vtl.ones((2, 3, 3)), vtl.ones((3, 3, 1)))
    with pytest.raises(ValueError, match="square"):
        LA.solve(vtl.ones((3, 2)), vtl.ones((3,)))
    with pytest.raises(TypeError, match=r"solve.*x2"):
        LA.solve(a, vtl.ones((3,), dtype=vtl.int32))


def test_singular_matrix_raises_on_numpy():
    with vtl.use_backend("numpy"):
        with pytest.raises(np.linalg.LinAlgError):
            LA.inv(vtl.zeros((2, 2)))
        with pytest.raises(np.linalg.LinAlgError):
            LA.cholesky(vtl.asarray([[1.0, 2.0], [2.0, 1.0]]))
        # det itself is fine at a singular matrix; its gradient needs the inverse
        x = vtl.asarray([[1.0, 2.0], [2.0, 4.0]], requires_grad=True)
        d = LA.det(x)
        assert d.item() == 0.0
        with pytest.raises(np.linalg.LinAlgError):
            d.backward()


def test_cross_errors(backend):
    a = vtl.ones((2, 3))
    with pytest.raises(ValueError, match="axis must be negative"):
        LA.cross(a, a, axis=1)
    with pytest.raises(IndexError, match="out of bounds"):
        LA.cross(a, a, axis=-3)
    with pytest.raises(ValueError, match="size 3"):
        LA.cross(vtl.ones((2, 4)), vtl.ones((2, 4)))
    with pytest.raises(ValueError, match="size 3"):
        LA.cross(a, vtl.ones((2, 3)), axis=-2)
    with pytest.raises(ValueError, match="broadcast"):
        LA.cross(a, vtl.ones((4, 3)))
    with pytest.raises(ValueError, match="at least 1 dimension"):
        LA.cross(vtl.asarray(1.0), a)
    with pytest.raises(TypeError, match="numeric"):
        LA.cross(vtl.ones((3,), dtype=vtl.bool), vtl.ones((3,)))


def test_other_argument_errors(backend):
    with pytest.raises(ValueError, match="1-D"):
        LA.outer(vtl.ones((2, 2)), vtl.ones((2,)))
    with pytest.raises(TypeError, match="numeric"):
        LA.outer(vtl.ones((2,), dtype=vtl.bool), vtl.ones((2,)))
    with pytest.raises(ValueError, match="mode"):
        LA.qr(vtl.ones((2, 2)), mode="r")
    for bad in ("bad", 3, 0, True, [2]):
        with pytest.raises(ValueError, match="ord must be one of"):
            LA.matrix_norm(vtl.ones((2, 2)), ord=bad)
    with pytest.raises(IndexError, match="out of bounds"):
        LA.vector_norm(vtl.ones((2, 2)), axis=2)
    with pytest.raises(ValueError, match="repeated"):
        LA.vector_norm(vtl.ones((2, 2)), axis=(0, -2))
    with pytest.raises(TypeError, match="vector_norm.*floating-point"):
        LA.vector_norm(vtl.ones((2,), dtype=vtl.int32))
    with pytest.raises(TypeError, match="ord must be a number"):
        LA.vector_norm(vtl.ones((2,)), ord="fro")


def test_backend_without_linalg_extension():
    fake = types.SimpleNamespace(xp=types.SimpleNamespace(), backend_name="fake")
    with pytest.raises(RuntimeError, match=r"linalg\.inv\(\).*fake.*linalg extension"):
        LA._lx(fake, "inv")


def test_mixed_devices(backend, other_backends):
    if not other_backends:
        pytest.skip("one backend only")
    a = vtl.ones((3, 3))
    b = vtl.ones((3,), backend=other_backends[0])
    with pytest.raises(ValueError, match="different devices"):
        LA.solve(a, b)


# -- gradients ---------------------------------------------------------------------------
RNG = np.random.default_rng(1234)


def _second(f, index: int = 0, seed: int = 7):
    """``x -> d/dx_index sum(f(x) * w)``, built with create_graph (for second order)."""
    def h(*xs):
        for x in xs:
            if not x.requires_grad:
                x.requires_grad_()
        y = f(*xs)
        w = vtl.asarray(np.random.default_rng(seed).standard_normal(y.shape), backend="numpy")
        return vtl.autograd.grad(vtl.sum(y * w), list(xs), create_graph=True)[index]
    return h


def test_grad_inv():
    a = _well(RNG, (2, 3, 3))
    check_grad(LA.inv, a)
    check_grad(_second(LA.inv), a)


def test_grad_det_slogdet():
    a = _well(RNG, (2, 3, 3))
    a[0, [0, 1]] = a[0, [1, 0]]  # one negative determinant
    check_grad(LA.det, a)
    check_grad(_second(LA.det), a)
    check_grad(lambda x: LA.slogdet(x).logabsdet, a)
    check_grad(lambda x: LA.slogdet(x).logabsdet * 2 + LA.slogdet(x).sign, a)
    x = vtl.asarray(a, requires_grad=True)
    assert not LA.slogdet(x).sign.requires_grad
    check_grad(LA.det, _well(RNG, (1, 1)))


@pytest.mark.parametrize("bshape", [(2, 3, 2), (3,), (1, 3, 4), (4, 1, 3, 1)])
def test_grad_solve(bshape):
    a = _well(RNG, (2, 3, 3) if len(bshape) != 4 else (3, 3))
    b = RNG.standard_normal(bshape)
    check_grad(LA.solve, a, b)
    check_grad(_second(LA.solve, 0), a, b)
    check_grad(_second(LA.solve, 1), a, b)


def test_grad_solve_one_argument():
    a = _well(RNG, (3, 3))
    b = RNG.standard_normal((3, 2))
    ta = vtl.asarray(a, backend="numpy")
    check_grad(lambda bb: LA.solve(ta, bb), b)
    tb = vtl.asarray(b, backend="numpy")
    check_grad(lambda aa: LA.solve(aa, tb), a)


@pytest.mark.parametrize("p", [-3, -1, 0, 1, 2, 3])
def test_grad_matrix_power(p):
    a = _well(RNG, (2, 3, 3)) / 5
    check_grad(lambda x: LA.matrix_power(x, p), a)


def _sym(x):
    return (x + vtl.matrix_transpose(x)) * 0.5


@pytest.mark.parametrize("upper", [False, True])
def test_grad_cholesky(upper):
    b = RNG.standard_normal((2, 3, 3))
    check_grad(lambda x: LA.cholesky(vtl.matmul(x, vtl.matrix_transpose(x))
                                     + vtl.asarray(3 * np.eye(3), backend="numpy"),
                                     upper=upper), b)
    check_grad(lambda x: LA.cholesky(_sym(x), upper=upper), _spd(RNG, (3, 3)))


def test_grad_eigh_eigvalsh():
    a = _sym_spectral(RNG, (2,), 3) + RNG.standard_normal((2, 3, 3)) * 0.05
    check_grad(lambda x: LA.eigh(_sym(x)).eigenvalues, a)
    check_grad(lambda x: LA.eigvalsh(_sym(x)), a)
    # eigenvectors: gauge-invariant functions (sign flips of columns cancel)
    check_grad(lambda x: LA.eigh(_sym(x)).eigenvectors ** 2, a)
    check_grad(lambda x: _recon_eigh(LA.eigh(_sym(x))), a)
    check_grad(_second(lambda x: LA.eigvalsh(_sym(x))), a)


def _recon_eigh(res):
    w, v = res
    return vtl.matmul(v * vtl.reshape(w ** 3, (*w.shape[:-1], 1, w.shape[-1])),
                      vtl.matrix_transpose(v))


@pytest.mark.parametrize("shape", [(4, 3), (3, 3), (3, 5), (2, 4, 2)])
def test_grad_qr(shape):
    a = _spectral(RNG, shape[:-2], *shape[-2:])
    check_grad(lambda x: LA.qr(x).Q, a)
    check_grad(lambda x: LA.qr(x).R, a)
    check_grad(lambda x: vtl.matmul(LA.qr(x).Q, LA.qr(x).R * 2), a)
    check_grad(lambda x: LA.qr(x, mode="complete").R, a)
    if shape[-2] <= shape[-1]:
        check_grad(lambda x: LA.qr(x, mode="complete").Q, a)


def test_grad_qr_complete_tall_q_raises():
    x = vtl.asarray(_spectral(RNG, (), 4, 2), requires_grad=True)
    q, _r = LA.qr(x, mode="complete")
    with pytest.raises(RuntimeError, match="mode='complete'"):
        vtl.sum(q).backward()


@pytest.mark.parametrize("shape", [(4, 3), (3, 3), (3, 5), (2, 2, 3)])
def test_grad_svd(shape):
    a = _spectral(RNG, shape[:-2], *shape[-2:])
    check_grad(lambda x: LA.svd(x, full_matrices=False).S, a)
    check_grad(LA.svdvals, a)
    check_grad(lambda x: LA.svd(x, full_matrices=False).U ** 2, a)
    check_grad(lambda x: LA.svd(x, full_matrices=False).Vh ** 2, a)

    def uv(x):
        u, s, vh = LA.svd(x, full_matrices=False)
        return vtl.matmul(u, vh) + vtl.matmul(u * vtl.reshape(s ** 2, (*s.shape[:-1], 1,
                                                                       s.shape[-1])), vh)

    check_grad(uv, a)
    check_grad(lambda x: LA.svd(x).S, a)  # full_matrices=True, S only
    if shape[-1] == shape[-2]:
        check_grad(lambda x: LA.svd(x).U ** 2 + LA.svd(x).Vh ** 2, a)


def test_grad_svd_full_nonsquare_raises():
    x = vtl.asarray(_spectral(RNG, (), 4, 2), requires_grad=True)
    u, s, vh = LA.svd(x)
    with pytest.raises(RuntimeError, match="full_matrices=False"):
        vtl.sum(u).backward()


@pytest.mark.parametrize("shape", [(4, 3), (3, 3), (2, 5), (2, 2, 3)])
def test_grad_pinv(shape):
    a = _spectral(RNG, shape[:-2], *shape[-2:])
    check_grad(LA.pinv, a)


@pytest.mark.parametrize("ord", MATRIX_ORDS)
@pytest.mark.parametrize("keepdims", [False, True])
def test_grad_matrix_norm(ord, keepdims):  # noqa: A002
    a = _spectral(RNG, (2,), 3, 4) + RNG.standard_normal((2, 3, 4)) * 0.1
    check_grad(lambda x: LA.matrix_norm(x, ord=ord, keepdims=keepdims), a)


def test_grad_matrix_norm_ties():
    # equal column sums: the gradient is shared evenly between the tied columns
    x = vtl.asarray([[1.0, -1.0], [2.0, 2.0]], backend="numpy", requires_grad=True)
    LA.matrix_norm(x, ord=1).backward()
    assert_close(x.grad, np.array([[0.5, -0.5], [0.5, 0.5]], dtype=np.float32))


@pytest.mark.parametrize("ord", [2, 1, 3, 0.5, -1, -2.5, math.inf, -math.inf])
@pytest.mark.parametrize("axis", [None, -1, (0, 2)])
def test_grad_vector_norm(ord, axis):  # noqa: A002
    a = RNG.uniform(0.5, 2.0, (2, 3, 4)) * RNG.choice([-1.0, 1.0], (2, 3, 4))
    check_grad(lambda x: LA.vector_norm(x, ord=ord, axis=axis), a)
    check_grad(lambda x: LA.vector_norm(x, ord=ord, axis=axis, keepdims=True), a)


def test_grad_vector_norm_special():
    for ord in (2, 1, 3, 0.5, math.inf, -math.inf):  # noqa: A001
        x = vtl.zeros((3,), dtype=vtl.float64, requires_grad=True)
        LA.vector_norm(x, ord=ord).backward()
        assert_close(x.grad, np.zeros(3))
    x = vtl.asarray([1.0, 0.0, -2.0], requires_grad=True)
    y = LA.vector_norm(x, ord=0)
    assert not y.requires_grad
    assert y.item() == 2.0
    check_grad(lambda t: LA.vector_norm(t, ord=2), np.array(3.0))  # 0-d
    x = vtl.asarray([3.0, -3.0, 1.0], requires_grad=True)
    LA.vector_norm(x, ord=math.inf).backward()
    assert_close(x.grad, np.array([0.5, -0.5, 0.0], dtype=np.float32))
    check_grad(_second(lambda t: LA.vector_norm(t, ord=3)), RNG.uniform(0.5, 1.5, 4))


@pytest.mark.parametrize("offset", [-1, 0, 2])
def test_grad_trace_diagonal(offset):
    a = RNG.standard_normal((2, 3, 4))
    check_grad(lambda x: LA.trace(x, offset=offset), a)
    check_grad(lambda x: LA.diagonal(x, offset=offset), a)
    check_grad(lambda x: LA.diagonal(x, offset=offset) ** 2, a)
    check_grad(lambda x: LA.diagonal(x, offset=5), a)


def test_grad_trace_dtype():
    x = vtl.asarray(RNG.standard_normal((3, 3)).astype(np.float32), requires_grad=True)
    LA.trace(x, dtype=vtl.float64).backward()
    assert x.grad.dtype == vtl.float32
    assert_close(x.grad, np.eye(3, dtype=np.float32))


def test_grad_outer_cross():
    check_grad(LA.outer, RNG.standard_normal(3), RNG.standard_normal(4))
    check_grad(LA.cross, RNG.standard_normal((2, 3)), RNG.standard_normal((3,)))
    check_grad(lambda a, b: LA.cross(a, b, axis=-2), RNG.standard_normal((2, 3, 2)),
               RNG.standard_normal((1, 3, 1)))
    check_grad(lambda a, b: LA.outer(a, b) ** 2, RNG.standard_normal(2), RNG.standard_normal(3))


def _cplx(f, c: complex = 0.3 - 0.7j):
    """A real-valued function of (re, im) through a complex computation."""
    def g(re, im):
        y = f(re + im * 1j)
        return vtl.real(y * c) if y.dtype.kind == "c" else y
    return g


@pytest.mark.parametrize("name", ["inv", "det", "logabsdet", "pinv", "power2", "power-1",
                                  "trace", "diagonal", "fro", "mat1", "matinf", "vec2",
                                  "vec3", "vecinf", "solve_a"])
def test_grad_complex(name):
    n = 3
    fns = {
        "inv": LA.inv, "det": LA.det, "logabsdet": lambda z: LA.slogdet(z).logabsdet,
        "pinv": LA.pinv, "power2": lambda z: LA.matrix_power(z, 2),
        "power-1": lambda z: LA.matrix_power(z, -1), "trace": lambda z: LA.trace(z, offset=1),
        "diagonal": LA.diagonal, "fro": LA.matrix_norm,
        "mat1": lambda z: LA.matrix_norm(z, ord=1),
        "matinf": lambda z: LA.matrix_norm(z, ord=math.inf),
        "vec2": LA.vector_norm, "vec3": lambda z: LA.vector_norm(z, ord=3, axis=-1),
        "vecinf": lambda z: LA.vector_norm(z, ord=math.inf, axis=-2),
        "solve_a": lambda z: LA.solve(z, vtl.asarray(np.arange(6.0).reshape(3, 2),
                                                     backend="numpy")),
    }
    re = RNG.standard_normal((2, n, n)) + (n + 2) * np.eye(n)
    im = RNG.standard_normal((2, n, n))
    check_grad(_cplx(fns[name]), re, im)


def test_grad_complex_products():
    check_grad(_cplx(lambda z: LA.outer(z, z * 2 + 1)), RNG.standard_normal(3),
               RNG.standard_normal(3))
    check_grad(_cplx(lambda z: LA.cross(z, z * z)), RNG.standard_normal((2, 3)),
               RNG.standard_normal((2, 3)))
    b = RNG.standard_normal(3)
    check_grad(lambda re, im, br, bi: _cplx(lambda z: LA.solve(z, br + bi * 1j))(re, im),
               _well(RNG, (3, 3)), RNG.standard_normal((3, 3)), b, RNG.standard_normal(3))


@pytest.mark.parametrize("fname", ["cholesky", "qr", "eigh", "eigvalsh", "svd", "svdvals"])
def test_complex_grad_unsupported(fname):
    z = vtl.asarray(np.eye(2) * (1 + 0j), requires_grad=True)
    with pytest.raises(TypeError, match=fname + r".*complex"):
        getattr(LA, fname)(z)
    with pytest.raises(TypeError, match="matrix_norm.*complex"):
        LA.matrix_norm(z, ord="nuc")
    with vtl.no_grad():
        getattr(LA, fname)(z)  # forward alone is fine


CROSS_BACKEND = {
    "inv": (LA.inv, lambda r: (_well(r, (2, 3, 3)),)),
    "det": (LA.det, lambda r: (_well(r, (2, 3, 3)),)),
    "solve": (LA.solve, lambda r: (_well(r, (2, 3, 3)), r.standard_normal((2, 3, 2)))),
    "cholesky": (lambda x: LA.cholesky(_sym(x)), lambda r: (_spd(r, (2, 3, 3)),)),
    "eigh": (lambda x: LA.eigh(_sym(x)).eigenvectors ** 2,
             lambda r: (_sym_spectral(r, (2,), 3),)),
    "svd": (lambda x: LA.svd(x, full_matrices=False).U ** 2 + LA.svd(x).S[..., None, :],
            lambda r: (_spectral(r, (2,), 4, 3),)),
    "qr": (lambda x: LA.qr(x).Q, lambda r: (_spectral(r, (2,), 4, 3),)),
    "pinv": (LA.pinv, lambda r: (_spectral(r, (2,), 3, 4),)),
    "matrix_norm": (lambda x: LA.matrix_norm(x, ord="nuc"),
                    lambda r: (_spectral(r, (2,), 3, 4),)),
    "vector_norm": (lambda x: LA.vector_norm(x, axis=-1, ord=3),
                    lambda r: (r.standard_normal((2, 5)),)),
    "matrix_power": (lambda x: LA.matrix_power(x, -2), lambda r: (_well(r, (2, 3, 3)),)),
    "trace": (LA.trace, lambda r: (r.standard_normal((2, 3, 4)),)),
    "cross": (LA.cross, lambda r: (r.standard_normal((2, 3)), r.standard_normal((2, 3)))),
}


@pytest.mark.parametrize("name", sorted(CROSS_BACKEND))
def test_grad_matches_numpy(backend, name):
    f, make = CROSS_BACKEND[name]
    check_grad_matches_numpy(f, backend, *make(np.random.default_rng(11)), rtol=2e-3,
                             atol=2e-4)
