"""normalize, cosine_similarity, pairwise_distance, pdist, cdist and their modules:
PyTorch's formulas in NumPy as the oracle on every backend, float64 finite-difference
gradients, and PyTorch itself where it is installed."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_close, check_grad, to_numpy

import vtl
import vtl.nn.functional as F
from vtl import nn

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
rng = np.random.default_rng(0)


def _np_norm(x, p, axis, keepdims=False):
    a = np.abs(x)
    if p == np.inf:
        return a.max(axis=axis, keepdims=keepdims)
    if p == 0:
        return (a != 0).sum(axis=axis, keepdims=keepdims).astype(x.dtype)
    return (a ** p).sum(axis=axis, keepdims=keepdims) ** (1.0 / p)


@pytest.mark.parametrize("p,dim", [(2.0, 1), (1.0, 0), (3.0, -1)])
def test_normalize(backend, p, dim):
    x = rng.standard_normal((3, 4, 2)).astype(np.float32)
    x[0, :, 0] = 0.0  # a zero vector along dim 1 stays zero
    want = x / np.maximum(_np_norm(x, p, dim, keepdims=True), 1e-12)
    assert_close(F.normalize(vtl.asarray(x), p=p, dim=dim), want)


@pytest.mark.parametrize("s1,s2,dim", [((4, 5), (4, 5), 1), ((3, 4, 5), (1, 4, 5), -1),
                                       ((6,), (6,), 0), ((2, 3, 4), (3, 1), 1)])
def test_cosine_similarity(backend, s1, s2, dim):
    a = rng.standard_normal(s1).astype(np.float32)
    b = rng.standard_normal(s2).astype(np.float32)
    shape = np.broadcast_shapes(s1, s2)
    a_, b_ = np.broadcast_to(a, shape), np.broadcast_to(b, shape)
    na = np.maximum(np.linalg.norm(a_, axis=dim, keepdims=True), 1e-8)
    nb = np.maximum(np.linalg.norm(b_, axis=dim, keepdims=True), 1e-8)
    want = np.sum(a_ / na * (b_ / nb), axis=dim)
    got = F.cosine_similarity(vtl.asarray(a), vtl.asarray(b), dim=dim)
    assert got.shape == want.shape
    assert_close(got, want)
    assert_close(nn.CosineSimilarity(dim=dim)(vtl.asarray(a), vtl.asarray(b)), want)


@pytest.mark.parametrize("p,keepdim", [(2.0, False), (1.0, True), (np.inf, False), (0.5, False)])
def test_pairwise_distance(backend, p, keepdim):
    a = rng.standard_normal((5, 3)).astype(np.float32)
    b = rng.standard_normal((5, 3)).astype(np.float32)
    want = _np_norm(a - b + 1e-6, p, -1, keepdims=keepdim)
    assert_close(F.pairwise_distance(vtl.asarray(a), vtl.asarray(b), p=p, keepdim=keepdim),
                 want, rtol=1e-5)
    assert_close(nn.PairwiseDistance(p=p, keepdim=keepdim)(vtl.asarray(a), vtl.asarray(b)),
                 want, rtol=1e-5)


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, np.inf])
def test_pdist(backend, p):
    x = rng.standard_normal((5, 3)).astype(np.float32)
    want = [_np_norm(x[i] - x[j], p, -1) for i in range(5) for j in range(i + 1, 5)]
    got = F.pdist(vtl.asarray(x), p=p)
    assert got.shape == (10,)
    assert_close(got, np.array(want, dtype=np.float32), rtol=1e-5)
    assert F.pdist(vtl.asarray(x[:1])).shape == (0,)


@pytest.mark.parametrize("mode", ["use_mm_for_euclid_dist_if_necessary",
                                  "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist"])
@pytest.mark.parametrize("p", [2.0, 1.0])
def test_cdist(backend, mode, p):
    a = rng.standard_normal((2, 30, 4)).astype(np.float32)
    b = rng.standard_normal((1, 7, 4)).astype(np.float32)
    want = _np_norm(a[..., :, None, :] - b[..., None, :, :], p, -1)
    got = F.cdist(vtl.asarray(a), vtl.asarray(b), p=p, compute_mode=mode)
    assert got.shape == (2, 30, 7)
    assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_gradients_float64():
    x = rng.standard_normal((3, 4))
    y = rng.standard_normal((3, 4))
    check_grad(lambda a: F.normalize(a, dim=1), x)
    check_grad(lambda a, b: F.cosine_similarity(a, b, dim=1), x, y)
    check_grad(lambda a, b: F.pairwise_distance(a, b, p=3.0), x, y)
    check_grad(lambda a: F.pdist(a), x)
    check_grad(lambda a, b: F.cdist(a, b, compute_mode="use_mm_for_euclid_dist"), x, y[:2])
    check_grad(lambda a, b: F.cdist(a, b, p=1.5), x, y[:2])


def test_gradients_match_numpy_backend(backend):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    y = rng.standard_normal((3, 4)).astype(np.float32)
    grads = {}
    for name in ("numpy", backend):
        a = vtl.asarray(x, backend=name, requires_grad=True)
        b = vtl.asarray(y, backend=name, requires_grad=True)
        loss = (vtl.sum(F.cosine_similarity(a, b)) + vtl.sum(F.pdist(a))
                + vtl.sum(F.normalize(b) * a))
        loss.backward()
        grads[name] = (to_numpy(a.grad), to_numpy(b.grad))
    for g, w in zip(grads[backend], grads["numpy"], strict=True):
        assert_close(g, w, rtol=1e-4, atol=1e-5)


def test_coincident_points_have_zero_gradient(backend):
    x = vtl.asarray(np.ones((3, 2), dtype=np.float32), requires_grad=True)
    vtl.sum(F.pdist(x)).backward()
    assert np.all(np.isfinite(to_numpy(x.grad)))
    x = vtl.asarray(np.ones((30, 2), dtype=np.float32), requires_grad=True)
    vtl.sum(F.cdist(x, x)).backward()
    assert_close(x.grad, np.zeros((30, 2), dtype=np.float32))


def test_plain_numpy_arrays():
    import array_api_strict as xp

    a = xp.asarray(rng.standard_normal((3, 4)))
    b = xp.asarray(rng.standard_normal((3, 4)))
    got = F.cosine_similarity(a, b)
    a_, b_ = np.asarray(a), np.asarray(b)
    want = (a_ * b_).sum(1) / np.linalg.norm(a_, axis=1) / np.linalg.norm(b_, axis=1)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)
    assert np.asarray(F.pdist(a)).shape == (3,)


def test_errors():
    a = vtl.ones((3, 4))
    with pytest.raises(ValueError, match="do not broadcast"):
        F.cosine_similarity(a, vtl.ones((2, 4)))
    with pytest.raises(IndexError, match="out of range"):
        F.normalize(a, dim=2)
    with pytest.raises(ValueError, match="must be 2-D"):
        F.pdist(vtl.ones((2, 3, 4)))
    with pytest.raises(ValueError, match="same number of columns"):
        F.cdist(a, vtl.ones((2, 5)))
    with pytest.raises(ValueError, match="compute_mode"):
        F.cdist(a, a, compute_mode="fast")
    with pytest.raises(ValueError, match="non-negative"):
        F.pairwise_distance(a, a, p=-1)
    with pytest.raises(TypeError, match="real floating"):
        F.normalize(vtl.ones((3,), dtype=vtl.int32), dim=0)


@needs_torch
def test_against_torch():
    x = rng.standard_normal((6, 5))
    y = rng.standard_normal((6, 5))
    tx, ty = torch.tensor(x, requires_grad=True), torch.tensor(y, requires_grad=True)
    vx = vtl.asarray(x, requires_grad=True)
    vy = vtl.asarray(y, requires_grad=True)
    pairs = [
        (lambda a, b: torch.nn.functional.normalize(a, p=3.0, dim=0) * b,
         lambda a, b: F.normalize(a, p=3.0, dim=0) * b),
        (torch.nn.functional.cosine_similarity, F.cosine_similarity),
        (lambda a, b: torch.nn.functional.pairwise_distance(a, b, p=1.5, keepdim=True),
         lambda a, b: F.pairwise_distance(a, b, p=1.5, keepdim=True)),
        (lambda a, b: torch.nn.functional.pdist(a + b, p=2.5),
         lambda a, b: F.pdist(a + b, p=2.5)),
        (lambda a, b: torch.cdist(a, b), lambda a, b: F.cdist(a, b)),
        (lambda a, b: torch.cdist(a, b, p=1.0, compute_mode="use_mm_for_euclid_dist"),
         lambda a, b: F.cdist(a, b, p=1.0, compute_mode="use_mm_for_euclid_dist")),
    ]
    for tf, vf in pairs:
        for t in (tx, ty, vx, vy):
            t.grad = None
        tout = tf(tx, ty)
        vout = vf(vx, vy)
        np.testing.assert_allclose(to_numpy(vout), tout.detach().numpy(), rtol=1e-10)
        (tout * torch.arange(tout.numel(), dtype=tout.dtype).reshape(tout.shape)).sum().backward()
        w = vtl.reshape(vtl.arange(vout.size, dtype=vout.dtype), vout.shape)
        vtl.sum(vout * w).backward()
        np.testing.assert_allclose(to_numpy(vx.grad), tx.grad.numpy(), rtol=1e-8, atol=1e-12)
        np.testing.assert_allclose(to_numpy(vy.grad), ty.grad.numpy(), rtol=1e-8, atol=1e-12)
