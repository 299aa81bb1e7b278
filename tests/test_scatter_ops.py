"""PyTorch's gather/scatter family (vtl._ops.scatter): values against NumPy loops written
from PyTorch's documented formulas on every backend, gradients by finite differences,
the in-place methods' autograd, errors, and PyTorch itself where it is installed."""

from __future__ import annotations

import numpy as np
import pytest

import vtl
from tests.helpers import assert_close, check_grad

try:
    import torch
except ImportError:  # CI has no torch: the NumPy oracles still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")

RNG = np.random.default_rng(7)
X = RNG.standard_normal((3, 4, 2)).astype(np.float32)
M = RNG.random((3, 4)) > 0.5


def _np_gather(x, d, idx):
    out = np.empty(idx.shape, x.dtype)
    for pos in np.ndindex(idx.shape):
        src = list(pos)
        src[d] = idx[pos]
        out[pos] = x[tuple(src)]
    return out


def _np_scatter(x, d, idx, src, add):
    out = x.copy()
    for pos in np.ndindex(idx.shape):
        tgt = list(pos)
        tgt[d] = idx[pos]
        v = src[pos] if isinstance(src, np.ndarray) else src
        if add:
            out[tuple(tgt)] += v
        else:
            out[tuple(tgt)] = v
    return out


def _np_index_add(x, d, idx, src, alpha=1):
    out = np.moveaxis(x.copy(), d, 0)
    s = np.moveaxis(src, d, 0)
    for j, i in enumerate(idx):
        out[i] += alpha * s[j]
    return np.moveaxis(out, 0, d)


def _unique_index(shape, d, n):
    """An index of ``shape`` whose entries along ``d`` are distinct (no ambiguous write)."""
    idx = np.empty(shape, np.int32)
    for pos in np.ndindex(shape[:d] + shape[d + 1:]):
        perm = RNG.permutation(n)[:shape[d]]
        key = pos[:d] + (slice(None),) + pos[d:]
        idx[key] = perm
    return idx


@pytest.mark.parametrize("d", [0, 1, 2, -1])
def test_gather_scatter_scatter_add_match_the_formulas(backend, d):
    n = X.shape[d]
    ishape = tuple(min(2, s) if k != d % 3 else 3 for k, s in enumerate(X.shape))
    idx = RNG.integers(0, n, ishape).astype(np.int32)
    src = RNG.standard_normal((3, 4, 3)).astype(np.float32)
    x, i, s = vtl.asarray(X), vtl.asarray(idx), vtl.asarray(src)
    assert_close(vtl.gather(x, d, i), _np_gather(X, d % 3, idx))
    assert_close(x.gather(d, i), _np_gather(X, d % 3, idx))
    part = src[tuple(slice(0, m) for m in ishape)]
    assert_close(vtl.scatter_add(x, d, i, s), _np_scatter(X, d % 3, idx, part, True),
                 rtol=1e-6, atol=1e-6)
    u = _unique_index(tuple(min(m, X.shape[d % 3]) if k == d % 3 else m
                            for k, m in enumerate(ishape)), d % 3, n)
    part = src[tuple(slice(0, m) for m in u.shape)]
    assert_close(x.scatter(d, vtl.asarray(u), s), _np_scatter(X, d % 3, u, part, False))
    assert_close(vtl.scatter(x, d, vtl.asarray(u), 2.5), _np_scatter(X, d % 3, u, 2.5, False))
    assert_close(x.scatter(d, vtl.asarray(u), value=-1.0),
                 _np_scatter(X, d % 3, u, -1.0, False))
    assert_close(x.scatter(d, i, s, reduce="add"), _np_scatter(
        X, d % 3, idx, src[tuple(slice(0, m) for m in ishape)], True), rtol=1e-6, atol=1e-6)


def test_index_family_matches_the_formulas(backend):
    x = vtl.asarray(X)
    idx = np.array([3, 0, 3], np.int32)
    src = RNG.standard_normal((3, 3, 2)).astype(np.float32)
    i, s = vtl.asarray(idx), vtl.asarray(src)
    assert_close(vtl.index_select(x, 1, i), X[:, idx])
    assert_close(x.index_select(-1, vtl.asarray(np.array([1, 1, 0], np.int32))),
                 X[..., [1, 1, 0]])
    assert_close(vtl.index_add(x, 1, i, s, alpha=2.0), _np_index_add(X, 1, idx, src, 2.0),
                 rtol=1e-6, atol=1e-6)
    perm = np.array([2, 0, 1], np.int32)
    want = X.copy()
    want[:, perm] = src
    assert_close(x.index_copy(1, vtl.asarray(perm), s), want)
    want = X.copy()
    want[:, [3, 0]] = 7.0
    assert_close(x.index_fill(1, vtl.asarray(np.array([3, 0], np.int32)), 7.0), want)
    flat = vtl.asarray(np.array([0, 5, -1], np.int32))
    vals = vtl.asarray(np.array([1.0, 2.0, 3.0], np.float32))
    want = X.copy().reshape(-1)
    want[[0, 5, -1]] = [1, 2, 3]
    assert_close(x.put(flat, vals), want.reshape(X.shape))
    want = X.copy().reshape(-1)
    np.add.at(want, [0, 0, 5], [1, 2, 3])
    assert_close(x.put(vtl.asarray(np.array([0, 0, 5], np.int32)), vals, accumulate=True),
                 want.reshape(X.shape), rtol=1e-6, atol=1e-6)
    assert_close(x.take(vtl.asarray(np.array([[0, 23], [5, 5]], np.int32))),
                 X.reshape(-1)[[[0, 23], [5, 5]]])


def test_in_place_methods_write_self_and_return_it(backend):
    idx = vtl.asarray(np.array([[0, 2, 1, 0]], np.int32))
    src = vtl.asarray(np.ones((1, 4), np.float32))
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    cases = [
        ("scatter_", (0, idx, src), "scatter"),
        ("scatter_add_", (0, idx, src), "scatter_add"),
        ("index_add_", (1, vtl.asarray(np.array([1, 1], np.int32)),
                        vtl.asarray(np.ones((3, 2), np.float32))), "index_add"),
        ("index_copy_", (1, vtl.asarray(np.array([3, 1], np.int32)),
                         vtl.asarray(np.ones((3, 2), np.float32))), "index_copy"),
        ("index_fill_", (0, vtl.asarray(np.array([2], np.int32)), -3.0), "index_fill"),
        ("put_", (vtl.asarray(np.array([11], np.int32)), vtl.asarray(np.array([9.0],
                                                                          np.float32))), "put"),
    ]
    for name, args, out_of_place in cases:
        t = vtl.asarray(base)
        want = getattr(t, out_of_place)(*args).numpy()
        v0 = t._version
        assert getattr(t, name)(*args) is t, name
        assert t._version > v0
        assert_close(t, want)


def test_gradients_by_finite_differences():
    x = RNG.standard_normal((3, 4))
    src = RNG.standard_normal((3, 4))
    idx = vtl.asarray(np.array([[0, 2, 1, 0], [2, 2, 0, 1]]), backend="numpy")
    u = vtl.asarray(np.array([[0, 2, 1, 0], [1, 0, 2, 2]]), backend="numpy")
    sel = vtl.asarray(np.array([3, 0, 3]), backend="numpy")
    check_grad(lambda a: vtl.gather(a, 0, idx), x)
    check_grad(lambda a: vtl.gather(a, 1, u[:, :3] % 4), x)
    check_grad(lambda a, s: vtl.scatter_add(a, 0, idx, s), x, src)
    check_grad(lambda a, s: vtl.scatter(a, 0, u, s), x, src)
    check_grad(lambda a: vtl.scatter(a, 1, u, 0.5), x)
    check_grad(lambda a: vtl.index_select(a, 1, sel), x)
    check_grad(lambda a, s: vtl.index_add(a, 1, sel, s, alpha=-2.0), x, src[:, :3])
    check_grad(lambda a, s: vtl.index_copy(a, 1, sel[:2] - 1, s), x, src[:, :2])
    check_grad(lambda a, v: vtl.index_fill(a, 0, sel[:1] - 2, v[0]), x, src[0])
    check_grad(lambda a, s: vtl.put(a, sel, s, accumulate=True), x, src[0, :3])
    check_grad(lambda a, s: vtl.put(a, sel[1:], s), x, src[0, :2])


def test_gradient_of_a_gradient_through_gather():
    x = vtl.asarray(RNG.standard_normal((3, 4)), backend="numpy", requires_grad=True)
    idx = vtl.asarray(np.array([[0, 2, 1, 0]]), backend="numpy")
    (g,) = vtl.autograd.grad(vtl.sum(vtl.gather(x, 0, idx) ** 3), [x], create_graph=True)
    (gg,) = vtl.autograd.grad(vtl.sum(g), [x])
    want = np.zeros((3, 4))
    xv = x.numpy()
    for j, i in enumerate([0, 2, 1, 0]):
        want[i, j] += 6 * xv[i, j]
    assert_close(gg, want)


def test_in_place_scatter_records_for_autograd():
    """A non-leaf written in place takes over the new history (``x`` gets ``g`` where it
    was not overwritten, ``src`` the gathered gradient)."""
    x = vtl.asarray(RNG.standard_normal((3, 4)), backend="numpy", requires_grad=True)
    src = vtl.asarray(RNG.standard_normal((1, 4)), backend="numpy", requires_grad=True)
    idx = vtl.asarray(np.array([[0, 2, 1, 0]]), backend="numpy")
    t = x * 2.0
    t.scatter_(0, idx, src)
    vtl.sum(t * vtl.asarray(np.arange(12.0).reshape(3, 4), backend="numpy")).backward()
    want_x = 2 * np.arange(12.0).reshape(3, 4)
    for j, i in enumerate([0, 2, 1, 0]):
        want_x[i, j] = 0
    assert_close(x.grad, want_x)
    assert_close(src.grad, np.arange(12.0).reshape(3, 4)[[0, 2, 1, 0], range(4)][None])
    # y needs no grad itself: src's gradient still flows
    y = vtl.zeros((3, 4), dtype=vtl.float64, backend="numpy")
    src.grad = None
    y.index_add_(0, vtl.asarray(np.array([1]), backend="numpy"), src)
    vtl.sum(y * 3.0).backward()
    assert_close(src.grad, np.full((1, 4), 3.0))


def test_in_place_rules_apply():
    leaf = vtl.asarray(np.zeros((2, 3)), backend="numpy", requires_grad=True)
    idx = vtl.asarray(np.array([[0, 1, 0]]), backend="numpy")
    with pytest.raises(RuntimeError, match="leaf"):
        leaf.scatter_(0, idx, 1.0)
    with vtl.no_grad():
        leaf.scatter_(0, idx, 1.0)
    assert leaf.numpy()[0].tolist() == [1.0, 0.0, 1.0]
    a = vtl.asarray(np.ones(3), backend="numpy", requires_grad=True)
    b = a * 1.0
    c = vtl.sum(b * b)  # saves b
    b.index_fill_(0, vtl.asarray(np.array([0]), backend="numpy"), 0.0)
    with pytest.raises(RuntimeError, match="modified"):
        c.backward()


def test_errors_name_what_was_expected(backend):
    x = vtl.asarray(X)
    idx = vtl.asarray(np.zeros((2, 2, 2), np.int32))
    with pytest.raises(IndexError, match="out of bounds"):
        vtl.gather(x, 0, vtl.asarray(np.full((1, 1, 1), 5, np.int32))).numpy()
    with pytest.raises(ValueError, match="as many dimensions"):
        vtl.gather(x, 0, vtl.asarray(np.zeros((2, 2), np.int32)))
    with pytest.raises(ValueError, match="larger than"):
        vtl.gather(x, 0, vtl.asarray(np.zeros((1, 5, 1), np.int32)))
    with pytest.raises(TypeError, match="integer"):
        vtl.gather(x, 0, vtl.asarray(np.zeros((1, 1, 1), np.float32)))
    with pytest.raises(TypeError, match="dtype"):
        vtl.scatter_add(x, 0, idx, vtl.asarray(np.ones((2, 2, 2), np.int32)))
    with pytest.raises(TypeError, match="exactly one"):
        vtl.scatter(x, 0, idx)
    with pytest.raises(ValueError, match="reduce"):
        vtl.scatter(x, 0, idx, 1.0, reduce="multiply")
    with pytest.raises(ValueError, match="1-D"):
        vtl.index_select(x, 0, idx)
    with pytest.raises(ValueError, match="source must have shape"):
        vtl.index_add(x, 0, vtl.asarray(np.array([0], np.int32)), x)
    with pytest.raises(ValueError, match="elements"):
        vtl.put(x, vtl.asarray(np.array([0, 1], np.int32)),
                vtl.asarray(np.ones(3, np.float32)))
    with pytest.raises(IndexError):
        vtl.index_select(x, 3, vtl.asarray(np.array([0], np.int32)))


@needs_torch
def test_against_torch():
    x = RNG.standard_normal((3, 4, 2))
    idx = RNG.integers(0, 3, (2, 4, 2))
    src = RNG.standard_normal((3, 4, 2))
    tx, ti, ts = torch.tensor(x), torch.tensor(idx), torch.tensor(src)
    vx, vi, vs = (vtl.asarray(a, backend="numpy") for a in (x, idx, src))
    for d in (0, 1, 2):
        i = idx % x.shape[d]
        np.testing.assert_allclose(vtl.gather(vx, d, vtl.asarray(i, backend="numpy")).numpy(),
                                   torch.gather(tx, d, torch.tensor(i)).numpy())
        np.testing.assert_allclose(
            vtl.scatter_add(vx, d, vtl.asarray(i, backend="numpy"), vs).numpy(),
            torch.scatter_add(tx, d, torch.tensor(i), ts).numpy())
    sel = np.array([1, 0, 1, 2])
    np.testing.assert_allclose(vtl.index_add(vx, 0, vtl.asarray(sel, backend="numpy"),
                                             vtl.asarray(np.ones((4, 4, 2)), backend="numpy"),
                                             alpha=0.5).numpy(),
                               torch.index_add(tx, 0, torch.tensor(sel),
                                               torch.ones(4, 4, 2, dtype=torch.float64),
                                               alpha=0.5).numpy())
    np.testing.assert_allclose(vtl.index_fill(vx, 2, vtl.asarray([1], backend="numpy"),
                                              3.0).numpy(),
                               torch.index_fill(tx, 2, torch.tensor([1]), 3.0).numpy())
    # gradients of scatter_add / gather equal torch's (src of index's shape: torch's
    # backward refuses a larger one)
    src = src[:2]
    a = torch.tensor(x, requires_grad=True)
    b = torch.tensor(src, requires_grad=True)
    (torch.scatter_add(a, 1, ti % 4, b).gather(0, ti) ** 2).sum().backward()
    va = vtl.asarray(x, backend="numpy", requires_grad=True)
    vb = vtl.asarray(src, backend="numpy", requires_grad=True)
    vtl.sum(vtl.gather(vtl.scatter_add(va, 1, vi % 4, vb), 0, vi) ** 2).backward()
    np.testing.assert_allclose(va.grad.numpy(), a.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(vb.grad.numpy(), b.grad.numpy(), rtol=1e-12)


def test_no_device_waits_on_wgpu(wgpu):
    """Forward and backward of these ops read nothing back (indices are checked on the
    device; an error would show at the next read)."""
    from tests.test_sync_free import count_waits

    x = vtl.asarray(X[:, :, 0], backend="wgpu", requires_grad=True)
    src = vtl.asarray(np.ones((3, 4), np.float32), backend="wgpu", requires_grad=True)
    idx = vtl.asarray(np.array([[0, 2, 1, 0]], np.int32), backend="wgpu")
    sel = vtl.asarray(np.array([3, 0], np.int32), backend="wgpu")
    mask = vtl.asarray(M, backend="wgpu")
    with count_waits("wgpu") as waits:
        y = vtl.scatter_add(x, 0, idx, src) + vtl.scatter(x, 1, idx, src)
        y = vtl.gather(y, 0, idx).sum() + vtl.index_add(x, 1, sel, src[:, :2], alpha=2.0)
        y = vtl.index_copy(y, 1, sel, src[:, 1:3]) * vtl.index_fill(x, 0, sel[:1] - 1, 0.5)
        y = vtl.put(y, sel, src[0, :2], accumulate=True).index_select(1, sel)
        z = vtl.masked_scatter(x, mask, src).masked_fill(mask, 1.0)
        z = z.median(1).values + z.quantile(0.5, 1) + z.histc(4).sum()
        vtl.sum(y * y).backward()
        vtl.sum(z).backward()
    assert waits == []
