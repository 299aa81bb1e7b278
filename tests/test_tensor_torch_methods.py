"""PyTorch's Tensor methods and top-level functions (vtl/_tensor_methods.py,
vtl/_ops/torch_functions.py): values against NumPy oracles written from PyTorch's
documented formulas on every backend, gradients by finite differences, the in-place
rules, memory layout, the standard's names left as they are, and PyTorch itself where it
is installed."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import vtl
from tests.helpers import assert_close, check_grad
from vtl import Tensor

try:
    import torch
except ImportError:  # CI has no torch: the NumPy oracles still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")

RNG = np.random.default_rng(11)
B = RNG.standard_normal((3, 4)).astype(np.float32)
P = (np.abs(B) + 0.5).astype(np.float32)
S = RNG.standard_normal((4, 4)).astype(np.float32)
V = RNG.standard_normal(4).astype(np.float32)
M = RNG.random((3, 4)) > 0.5
I = np.array([3, 0, 2, 0, 1, 5, 3], np.int32)

METHODS = [
    "gather", "scatter", "scatter_", "scatter_add", "scatter_add_", "index_select",
    "index_add", "index_add_", "index_copy", "index_copy_", "index_fill", "index_fill_",
    "put", "put_", "take", "masked_fill", "masked_fill_", "masked_select", "masked_scatter",
    "masked_scatter_", "contiguous", "repeat", "expand_as", "chunk", "split", "clamp_",
    "clip_", "fill_", "zero_", "add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_",
    "copy_", "new_zeros", "new_ones", "new_full", "new_empty", "new_tensor", "type_as",
    "nonzero", "where", "norm", "softmax", "log_softmax", "t", "mm", "bmm", "dot", "outer",
    "allclose", "isclose", "equal", "eq", "ne", "lt", "gt", "le", "ge", "isnan", "isinf",
    "isfinite", "sign", "round", "floor", "ceil", "trunc", "unbind", "narrow", "triu",
    "tril", "diag", "diagonal", "trace", "logsumexp", "float_power", "lerp", "addmm",
    "baddbmm", "sigmoid", "relu", "relu_", "sigmoid_", "tanh_", "exp_", "neg_", "abs_",
    "sqrt_", "pow_", "data_ptr", "element_size", "is_contiguous", "stride",
    "storage_offset", "unfold", "logical_and", "logical_or", "logical_not", "logical_xor",
    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_left_shift",
    "bitwise_right_shift", "remainder", "fmod", "pow", "sin", "cos", "neg", "negative",
    "reciprocal", "rsqrt", "square", "amax", "amin", "aminmax", "nansum", "nanmean",
    "median", "quantile", "histc", "bincount", "unique", "argsort", "msort",
]
TOP_LEVEL = [
    "gather", "scatter", "scatter_add", "index_select", "index_add", "index_copy",
    "index_fill", "put", "masked_fill", "masked_select", "masked_scatter", "narrow", "chunk",
    "split", "unbind", "t", "mm", "bmm", "dot", "outer", "addmm", "baddbmm", "trace", "diag",
    "diagonal", "norm", "softmax", "log_softmax", "logsumexp", "sigmoid", "relu", "allclose",
    "isclose", "eq", "ne", "lt", "gt", "le", "ge", "fmod", "float_power", "lerp", "neg",
    "rsqrt", "bitwise_not", "amax", "amin", "aminmax", "nansum", "nanmean", "median",
    "quantile", "histc", "bincount", "unique", "msort",
]


def _declaring_class(name):
    for cls in Tensor.__mro__:
        if cls is not object and name in vars(cls):
            return cls
    return None


def test_methods_are_declared_with_docstrings():
    for name in METHODS:
        cls = _declaring_class(name)
        assert cls is not None, name
        fn = vars(cls)[name]
        assert inspect.isfunction(fn) and fn.__doc__, name
    for name in ("nbytes", "itemsize"):
        assert isinstance(vars(_declaring_class(name))[name], property)
    for name in TOP_LEVEL:
        assert callable(getattr(vtl, name)) and getattr(vtl, name).__doc__, name


def test_standard_names_keep_their_semantics(backend):
    x = vtl.asarray(B)
    assert vtl.equal(x, x).shape == x.shape  # elementwise, as the standard says
    assert x.equal(x) is True and x.equal(x[:2]) is False  # PyTorch's bool
    assert list(inspect.signature(vtl.round).parameters) == ["x"]
    assert_close(vtl.repeat(vtl.asarray(V), 2), np.repeat(V, 2))  # elements
    assert_close(vtl.asarray(V).repeat(2), np.tile(V, 2))  # PyTorch's: the whole tensor
    assert_close(vtl.take(x, vtl.asarray(np.array([1, 0], np.int32)), axis=1), B[:, [1, 0]])
    assert x.size == 12 and x.numel() == 12
    assert_close(vtl.triu(vtl.asarray(S), diagonal=1), np.triu(S, 1))  # keyword alias
    assert_close(vtl.tril(vtl.asarray(S), k=-1), np.tril(S, -1))


def test_splits_and_views(backend):
    x = vtl.asarray(B)
    parts = x.split(3, 1)
    assert [p.shape for p in parts] == [(3, 3), (3, 1)]
    assert_close(parts[1], B[:, 3:])
    assert [p.shape[1] for p in vtl.split(x, [1, 0, 3], dim=1)] == [1, 0, 3]
    assert [p.shape[0] for p in x.chunk(2)] == [2, 1]
    assert len(vtl.chunk(vtl.asarray(np.zeros(6, np.float32)), 4)) == 3  # ceil(6/4) = 2 each
    assert_close(x.narrow(1, -3, 2), B[:, 1:3])
    assert_close(x.unbind(1)[2], B[:, 2])
    assert_close(x.t(), B.T)
    assert_close(x.expand_as(vtl.zeros((2, 3, 4))), np.broadcast_to(B, (2, 3, 4)))
    assert_close(x.repeat(2, 1, 3), np.tile(B, (2, 1, 3)))
    a = RNG.standard_normal((5, 7)).astype(np.float32)
    want = np.stack([a[:, i:i + 3] for i in range(0, 5, 2)], axis=1)  # (5, 3 windows, 3)
    assert_close(vtl.asarray(a).unfold(1, 3, 2), want)
    assert_close(vtl.asarray(a).unfold(0, 2, 2), np.stack([a[0:2].T, a[2:4].T]))
    with pytest.raises(ValueError, match="add up"):
        x.split([1, 2], 1)
    with pytest.raises(ValueError, match="exceeds"):
        x.narrow(1, 2, 3)
    with pytest.raises(ValueError, match="at least one per dim"):
        x.repeat(2)
    with pytest.raises(ValueError, match="at most 2"):
        vtl.zeros((1, 1, 1)).t()


def test_products_and_diagonals(backend):
    x, s, v = vtl.asarray(B), vtl.asarray(S), vtl.asarray(V)
    assert_close(x.mm(s), B @ S, rtol=1e-5, atol=1e-5)
    b3 = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    c3 = RNG.standard_normal((2, 4, 2)).astype(np.float32)
    assert_close(vtl.asarray(b3).bmm(vtl.asarray(c3)), b3 @ c3, rtol=1e-5, atol=1e-5)
    assert_close(v.dot(v), np.dot(V, V), rtol=1e-5)
    assert_close(v.outer(v[:3]), np.outer(V, V[:3]))
    assert_close(x.addmm(x, s, beta=0.5, alpha=2.0), 0.5 * B + 2 * (B @ S), rtol=1e-5,
                 atol=1e-5)
    nan = vtl.full((3, 4), float("nan"))
    assert_close(vtl.addmm(nan, x, s, beta=0), B @ S, rtol=1e-5, atol=1e-5)
    assert_close(vtl.baddbmm(vtl.asarray(b3[:, :, :2]), vtl.asarray(b3), vtl.asarray(c3),
                             alpha=-1.0), b3[:, :, :2] - b3 @ c3, rtol=1e-5, atol=1e-5)
    assert_close(s.trace(), np.trace(S), rtol=1e-5)
    for k in (0, 2, -1):
        assert_close(v.diag(k), np.diag(V, k))
        assert_close(s.diag(k), np.diag(S, k))
    c = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    assert_close(vtl.asarray(c).diagonal(1, -1, 0), np.diagonal(c, 1, -1, 0))
    assert_close(s.triu(1), np.triu(S, 1))
    with pytest.raises(ValueError, match="2-D"):
        x.mm(v)
    with pytest.raises(ValueError, match="cannot be multiplied"):
        x.mm(x)


def test_masks(backend):
    x, m = vtl.asarray(B), vtl.asarray(M)
    assert_close(x.masked_fill(m, -1.0), np.where(M, -1.0, B).astype(np.float32))
    assert_close(x.masked_fill(m[0], vtl.asarray(2.0)), np.where(M[0], 2.0, B).astype(
        np.float32))
    assert_close(x.masked_select(m), B[M])
    src = np.arange(12, dtype=np.float32)
    want = B.copy()
    want[M] = src[:M.sum()]
    assert_close(x.masked_scatter(m, vtl.asarray(src)), want)
    assert_close(x.where(m, 0.0), np.where(M, B, 0).astype(np.float32))
    nz = vtl.asarray(M).nonzero()
    assert_close(nz, np.argwhere(M).astype(nz.numpy().dtype))
    assert_close(vtl.asarray(M).nonzero(as_tuple=True)[1], np.nonzero(M)[1].astype(
        nz.numpy().dtype))
    with pytest.raises(TypeError, match="bool"):
        x.masked_fill(x, 0.0)
    with pytest.raises(IndexError, match="out of bounds"):
        x.masked_scatter(vtl.asarray(np.ones((3, 4), bool)), vtl.asarray(src[:3])).numpy()
    with pytest.raises(ValueError, match="empty"):
        x.masked_scatter(m, vtl.asarray(src[:0]))
    assert_close(x.masked_scatter(vtl.zeros((3, 4), dtype=vtl.bool), vtl.asarray(src[:0])), B)


def test_elementwise(backend):
    x, p = vtl.asarray(B), vtl.asarray(P)
    assert_close(x.fmod(0.7), np.fmod(B, np.float32(0.7)), rtol=1e-5, atol=1e-6)
    assert_close(x.fmod(-0.7), np.fmod(B, np.float32(-0.7)), rtol=1e-5, atol=1e-6)
    assert_close(x.remainder(0.7), np.mod(B, np.float32(0.7)), rtol=1e-5, atol=1e-6)
    for w in (0.3, 0.8):
        assert_close(x.lerp(p, w), B + w * (P - B), rtol=1e-5, atol=1e-6)
    assert_close(x.lerp(p, p / 3), B + P / 3 * (P - B), rtol=1e-5, atol=1e-6)
    assert_close(x.round(decimals=2), np.round(B * 100) / 100, rtol=1e-6)
    assert_close((x * 1000).round(decimals=-2), np.round(B * 1000 / 100) * 100, rtol=1e-6)
    assert_close(p.rsqrt(), 1 / np.sqrt(P), rtol=1e-5)
    assert_close(x.sigmoid(), 1 / (1 + np.exp(-B)), rtol=1e-5, atol=1e-6)
    assert_close(x.relu(), np.maximum(B, 0))
    assert_close(x.neg(), -B)
    assert_close(x.sign(), np.sign(B))
    assert_close(x.square(), B * B)
    assert_close(x.lt(0.0), B < 0)
    assert_close(x.ge(x), np.ones(B.shape, bool))
    assert_close(x.add(p, alpha=2), B + 2 * P, rtol=1e-6)
    assert_close(x.sub(p, alpha=0.5), B - 0.5 * P, rtol=1e-6)
    assert_close(x.div(p, rounding_mode="trunc"), np.trunc(B / P), rtol=1e-6)
    assert_close(x.div(p, rounding_mode="floor"), np.floor(B / P), rtol=1e-6)
    i = vtl.asarray(np.array([-7, 7], np.int32))
    assert_close(i.div(2, rounding_mode="trunc"), np.array([-3, 3], np.int32))
    big = np.array([2**30 + 1, -(2**30) - 1, -8], np.int32)  # exact beyond float32
    assert_close(vtl.asarray(big).div(vtl.asarray(np.array([3, 3, -3], np.int32)),
                                      rounding_mode="trunc"),
                 np.array([357913941, -357913941, 2], np.int32))
    assert_close(i.bitwise_not(), ~np.array([-7, 7], np.int32))
    close = B + 1e-7
    close[0, 0] = 1.0
    assert_close(x.isclose(vtl.asarray(close)), np.isclose(B, close, rtol=1e-5, atol=1e-8))
    inf = vtl.asarray(np.array([np.inf, np.nan, 1.0], np.float32))
    assert_close(inf.isclose(inf), [True, False, True])
    assert_close(inf.isclose(inf, equal_nan=True), [True, True, True])
    assert x.allclose(x + 1e-9) is True and x.allclose(x + 1) is False
    if "float64" in vtl.__array_namespace_info__().dtypes(device=x.device):
        assert_close(p.float_power(2.5), P.astype(np.float64) ** 2.5, rtol=1e-12)


def test_reductions_and_statistics(backend):
    a = B.copy()
    a[1, 2] = np.nan
    x, xn = vtl.asarray(B), vtl.asarray(a)
    assert_close(x.amax(1), B.max(1))
    assert_close(x.amin((0, 1), True), B.min(keepdims=True).reshape(1, 1))
    mn, mx = x.aminmax(dim=0)
    assert_close(mn, B.min(0))
    assert_close(mx, B.max(0))
    assert_close(xn.nansum(1), np.nansum(a, 1), rtol=1e-6)
    assert_close(xn.nanmean(), np.nanmean(a), rtol=1e-6)
    s = np.sort(B, axis=1)
    med = x.median(1)
    assert_close(med.values, s[:, 1])  # the lower median of 4: the 2nd smallest
    assert_close(vtl.take_along_axis(x, vtl.expand_dims(med.indices, axis=1), axis=1)[:, 0],
                 s[:, 1])
    assert_close(x.median(), np.sort(B.reshape(-1))[5])
    assert_close(xn.median(1, keepdim=True).values[1], np.array([np.nan], np.float32))
    assert np.isnan(xn.median().item())
    for mode in ("linear", "lower", "higher", "midpoint", "nearest"):
        assert_close(x.quantile(0.3, dim=1, interpolation=mode),
                     np.quantile(B, 0.3, axis=1, method=mode).astype(np.float32), rtol=1e-5,
                     atol=1e-6)
    q = vtl.asarray(np.array([0.1, 0.5, 0.95], np.float32))
    assert_close(x.quantile(q, 0, keepdim=True),
                 np.quantile(B, [0.1, 0.5, 0.95], axis=0, keepdims=True).astype(np.float32),
                 rtol=1e-5, atol=1e-6)
    assert_close(xn.quantile(0.5, 1)[1], np.float32(np.nan))
    for bad in (-0.1, 1.5):
        with pytest.raises(IndexError):
            x.quantile(vtl.asarray(np.array([0.5, bad], np.float32)), 1).numpy()
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        x.quantile(1.5)
    assert_close(x.norm(), np.linalg.norm(B), rtol=1e-5)
    assert_close(x.norm(1, 1), np.abs(B).sum(1), rtol=1e-5)
    assert_close(x.norm(float("inf"), 0, True), np.abs(B).max(0, keepdims=True))
    assert_close(x.softmax(1), np.exp(B) / np.exp(B).sum(1, keepdims=True), rtol=1e-5,
                 atol=1e-6)
    lse = np.log(np.exp(B).sum(0))
    assert_close(x.logsumexp(0), lse, rtol=1e-5)
    assert_close(x.log_softmax(0), B - lse, rtol=1e-5, atol=1e-6)
    assert_close(x.argsort(1, True), np.argsort(-B, 1, kind="stable").astype(
        x.argsort(1).numpy().dtype))
    assert_close(x.msort(), np.sort(B, 0))


def test_counting(backend):
    x = vtl.asarray(B)
    h, _ = np.histogram(B, bins=5, range=(B.min(), B.max()))
    assert_close(x.histc(5), h.astype(np.float32))
    h, _ = np.histogram(B[(B >= -1) & (B <= 1)], bins=4, range=(-1, 1))
    assert_close(x.histc(4, -1, 1), h.astype(np.float32))
    i = vtl.asarray(I)
    bc = i.bincount()
    assert_close(bc, np.bincount(I).astype(bc.numpy().dtype))
    assert i.bincount(minlength=9).shape == (9,)
    w = np.linspace(0, 1, 7).astype(np.float32)
    assert_close(i.bincount(vtl.asarray(w)), np.bincount(I, w).astype(np.float32), rtol=1e-6)
    vals, inv, counts = i.unique(return_inverse=True, return_counts=True)
    u, ninv, ncounts = np.unique(I, return_inverse=True, return_counts=True)
    assert_close(vals, u)
    assert_close(inv, ninv.astype(inv.numpy().dtype))
    assert_close(counts, ncounts.astype(counts.numpy().dtype))
    with pytest.raises(ValueError, match="non-negative"):
        vtl.asarray(np.array([-1, 2], np.int32)).bincount()
    with pytest.raises(ValueError, match="dim"):
        i.unique(dim=0)


def test_new_tensors_and_layout(backend):
    x = vtl.asarray(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    assert x.new_zeros(2, 3).dtype == vtl.float32 and x.new_ones((2,)).device == x.device
    assert x.new_full((2,), 3).tolist() == [3.0, 3.0]
    assert x.new_empty(1, 2).shape == (1, 2)
    assert x.new_tensor([1, 2]).dtype == vtl.float32
    assert x.new_zeros(2, dtype=vtl.int32).dtype == vtl.int32
    assert vtl.asarray(I).type_as(x).dtype == vtl.float32
    assert x.stride() == (12, 4, 1) and x.stride(0) == 12 and x.is_contiguous()
    assert x.element_size() == 4 and x.itemsize == 4 and x.nbytes == 96
    y = vtl.permute_dims(x, (2, 0, 1))
    assert y.stride() == (1, 12, 4) and not y.is_contiguous()
    c = y.contiguous()
    assert c.is_contiguous() and c.stride() == (6, 3, 1)
    assert_close(c, np.transpose(np.arange(24, dtype=np.float32).reshape(2, 3, 4), (2, 0, 1)))
    assert x.contiguous() is x
    z = x[:, 1:, ::2]
    assert z.stride() == (12, 4, 2) and z.storage_offset() == 4
    assert z.data_ptr() - x.data_ptr() == 4 * 4
    assert x[1].data_ptr() != x.data_ptr() and x[0].data_ptr() == x.data_ptr()


@needs_torch
def test_layout_matches_torch():
    a = np.arange(24.0).reshape(2, 3, 4)
    t, v = torch.tensor(a), vtl.asarray(a, backend="numpy")
    for f in (lambda u: u.transpose(0, 2), lambda u: u[:, 1:, ::2], lambda u: u[1],
              lambda u: u.permute(2, 0, 1)[1:]):
        tt, vv = f(t), f(v)
        assert vv.stride() == tt.stride()
        assert vv.storage_offset() == tt.storage_offset()
        assert vv.is_contiguous() == tt.is_contiguous()


def test_in_place_arithmetic_and_fills(backend):
    x = vtl.asarray(B.copy())
    assert x.add_(vtl.asarray(P), alpha=3) is x
    x.sub_(1).mul_(2).div_(4)
    want = (B + 3 * P - 1) * 2 / 4
    assert_close(x, want, rtol=1e-6, atol=1e-6)
    x.clamp_(min=0.0)
    assert_close(x, np.maximum(want, 0), rtol=1e-6, atol=1e-6)
    x.fill_(2.5)
    assert_close(x, np.full(B.shape, 2.5, np.float32))
    x.zero_()
    assert_close(x, np.zeros(B.shape, np.float32))
    x.copy_(vtl.asarray(np.arange(4)))  # broadcast, cast from an integer dtype
    assert_close(x, np.broadcast_to(np.arange(4, dtype=np.float32), B.shape))
    x.masked_fill_(vtl.asarray(M), -1.0)
    assert_close(x, np.where(M, -1, np.arange(4)).astype(np.float32))
    x.relu_()
    x.pow_(2)
    assert_close(x, np.where(M, 0, np.arange(4) ** 2).astype(np.float32))
    with pytest.raises(TypeError, match="dtype"):
        vtl.asarray(I).div_(2)
    with pytest.raises(ValueError, match="shape"):
        vtl.asarray(V).add_(vtl.asarray(B))


def test_in_place_autograd_rules():
    leaf = vtl.asarray(np.ones(3), backend="numpy", requires_grad=True)
    for op in (lambda t: t.add_(1.0), lambda t: t.fill_(0.0), lambda t: t.zero_(),
               lambda t: t.clamp_(0, 1), lambda t: t.copy_(t.detach())):
        with pytest.raises(RuntimeError, match="leaf"):
            op(leaf)
    a = vtl.asarray(RNG.standard_normal(3), backend="numpy", requires_grad=True)
    w = vtl.asarray(RNG.standard_normal(3), backend="numpy", requires_grad=True)
    b = a * 2.0
    b.add_(w, alpha=-3.0)
    b.mul_(b)  # reads its own old value
    vtl.sum(b).backward()
    y = 2 * a.numpy() - 3 * w.numpy()
    assert_close(a.grad, 2 * y * 2)
    assert_close(w.grad, 2 * y * -3)
    # fill_ / zero_ cut the old history; copy_ takes src's
    a.grad = None
    src = vtl.asarray(RNG.standard_normal(3), backend="numpy", requires_grad=True)
    c = a * 1.0
    c.zero_()
    c.copy_(src)
    vtl.sum(c * 2.0 + a).backward()
    assert_close(a.grad, np.ones(3))
    assert_close(src.grad, np.full(3, 2.0))
    # through a view: the base takes the write
    a.grad = None
    d = a * 1.0
    d[1:].mul_(5.0)
    vtl.sum(d).backward()
    assert_close(a.grad, [1.0, 5.0, 5.0])
    # a tensor saved for backward and changed in place makes backward raise
    e = a * 1.0
    f = vtl.sum(e * e)
    e.sigmoid_()
    with pytest.raises(RuntimeError, match="modified"):
        f.backward()


def test_gradients_by_finite_differences():
    b = RNG.standard_normal((3, 4))
    s = RNG.standard_normal((4, 4))
    m = vtl.asarray(M, backend="numpy")
    check_grad(lambda x: vtl.median(x, 1).values, b)
    check_grad(lambda x: vtl.median(x), b)
    check_grad(lambda x: vtl.quantile(x, 0.3, 1), b)
    check_grad(lambda x: vtl.quantile(x, vtl.asarray([0.2, 0.9], dtype=vtl.float64,
                                                     backend="numpy"), 0,
                                      interpolation="midpoint"), b)
    check_grad(lambda x: vtl.diag(x[0], 1), b)
    check_grad(lambda x: vtl.diag(x, -1), s)
    check_grad(lambda x: vtl.diagonal(x, 1, 1, 0), b)
    check_grad(lambda x, y: vtl.lerp(x, y, 0.8), b, s[:3])
    check_grad(lambda x, y, w: vtl.lerp(x, y, w), b, s[:3], np.abs(s[1:]) / 2)
    check_grad(lambda x: vtl.fmod(x * 3, 0.7), b)
    check_grad(lambda x, v: vtl.masked_fill(x, m, v[0, 0]), b, s)
    check_grad(lambda x, v: vtl.masked_scatter(x, m, v), b, s)
    check_grad(lambda x: x.unfold(1, 2, 1), b)
    check_grad(lambda x: vtl.norm(x, 3, 1), b)
    check_grad(lambda x: vtl.norm(x, "nuc"), b)
    check_grad(lambda x: vtl.nanmean(x, 0), b)
    check_grad(lambda x, y, z: vtl.addmm(x, y, z, beta=0.5, alpha=2.0), b, b, s)
    check_grad(lambda x: x.rsqrt(), np.abs(b) + 0.5)
    check_grad(lambda x: x.round(decimals=1) + x, b)
    check_grad(lambda x: vtl.amax(x, 1), b)
    check_grad(lambda x: x.narrow(1, 1, 2).chunk(2, 1)[1] * x.split([3, 1], 1)[0][:, :1], b)
    check_grad(lambda x: x.contiguous(), b.T)
    check_grad(lambda x: x.mT.contiguous(), b)


@needs_torch
def test_against_torch():
    a = RNG.standard_normal((3, 4))
    a[1, 2] = np.nan
    b = RNG.standard_normal((3, 4))
    p = np.abs(b) + 0.5
    s = RNG.standard_normal((4, 4))
    v = RNG.standard_normal(4)
    i = I.astype(np.int64)
    cases = [
        ("amax", b, (1,)), ("amin", b, ((0, 1), True)), ("nansum", a, (1,)),
        ("nanmean", a, (0, True)), ("median", b, ()), ("median", b, (1,)),
        ("median", a, (1, True)), ("median", a, ()), ("quantile", b, (0.3, 1)),
        ("quantile", b, (np.array([0.1, 0.5, 0.95]), 0, True)), ("quantile", a, (0.5, 1)),
        ("norm", b, ()), ("norm", b, (3, 1, True)), ("norm", b, ("nuc",)),
        ("softmax", b, (1,)), ("log_softmax", b, (0,)), ("logsumexp", b, (1,)),
        ("t", b, ()), ("mm", b, (s,)), ("dot", v, (v,)), ("outer", v, (v[:3],)),
        ("addmm", b, (b, s), {"beta": 0.5, "alpha": 2}), ("trace", s, ()), ("diag", v, (2,)),
        ("diag", v, (-1,)), ("diag", s, (1,)), ("diagonal", s, (1,)),
        ("diagonal", RNG.standard_normal((2, 3, 4)), (-1, 0, 2)), ("triu", s, (1,)),
        ("fmod", b * 5, (1.5,)), ("fmod", b * 5, (-1.5,)), ("float_power", p, (2.5,)),
        ("lerp", b, (p, 0.3)), ("lerp", b, (p, 0.8)), ("lerp", b, (p, p / 3)),
        ("round", b, (), {"decimals": 2}), ("round", b * 1000, (), {"decimals": -2}),
        ("isclose", a, (a,), {"equal_nan": True}), ("masked_fill", b, (M, -1.0)),
        ("masked_select", b, (M,)), ("masked_scatter", b, (M, s)), ("nonzero", M, ()),
        ("nonzero", M, (), {"as_tuple": True}), ("where", b, (M, 0.0)),
        ("repeat", b, (2, 1, 2)), ("expand_as", v, (b,)), ("chunk", b, (3, 1)),
        ("split", b, ([1, 3], 1)), ("unbind", b, (1,)), ("narrow", b, (1, -3, 2)),
        ("unfold", RNG.standard_normal((5, 7)), (1, 3, 2)), ("aminmax", b, (), {"dim": 1}),
        ("histc", b, (5,)), ("histc", b, (4, -1, 1)), ("bincount", i, (None, 10)),
        ("bincount", i, (np.linspace(0, 1, 7),)),
        ("unique", i, (), {"return_inverse": True, "return_counts": True}),
        ("argsort", b, (1, True)), ("msort", b, ()), ("take", b, (np.array([[0, 11]]),)),
        ("div", b, (p,), {"rounding_mode": "trunc"}),
        ("div", -i, (2,), {"rounding_mode": "trunc"}), ("add", b, (p,), {"alpha": 2}),
        ("sub", b, (p,), {"alpha": 0.5}), ("type_as", i, (b,)),
    ]

    def conv(x, lib):
        if isinstance(x, np.ndarray):
            return torch.tensor(x) if lib == "torch" else vtl.asarray(x, backend="numpy")
        return x

    def flat(r):
        if isinstance(r, (tuple, list)):
            return [y for x in r for y in flat(x)]
        return [r.numpy()]

    for name, x, args, *kw in cases:
        kw = kw[0] if kw else {}
        want = getattr(conv(x, "torch"), name)(*[conv(y, "torch") for y in args], **kw)
        got = getattr(conv(x, "vtl"), name)(*[conv(y, "vtl") for y in args], **kw)
        for g, w in zip(flat(got), flat(want), strict=True):
            assert g.shape == w.shape, name
            np.testing.assert_allclose(g, w, rtol=1e-7, atol=1e-9, equal_nan=True,
                                       err_msg=name)


@needs_torch
def test_gradients_match_torch_with_ties():
    a = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]])
    for name, args in [("amax", (1,)), ("amin", ()), ("median", ()), ("median", (1,)),
                       ("quantile", (0.4,)), ("norm", (float("inf"),)), ("nanmean", ()),
                       ("logsumexp", (1,)), ("msort", ()), ("diag", (1,)),
                       ("diagonal", (-1,))]:
        t = torch.tensor(a, requires_grad=True)
        r = getattr(t, name)(*args)
        (r[0] if isinstance(r, tuple) else r).pow(2).sum().backward()
        v = vtl.asarray(a, backend="numpy", requires_grad=True)
        r = getattr(v, name)(*args)
        vtl.sum((r[0] if isinstance(r, tuple) else r) ** 2).backward()
        np.testing.assert_allclose(v.grad.numpy(), t.grad.numpy(), rtol=1e-12, err_msg=name)


def test_gradients_on_the_backend_equal_numpys(backend):
    from tests.helpers import check_grad_matches_numpy

    idx = np.array([[0, 2, 1, 0], [2, 2, 0, 1]], np.int32)

    def scatter_chain(x, s):
        i = vtl.asarray(idx, device=x.device)
        y = vtl.scatter_add(x, 0, i, s).index_select(1, i[0])
        return vtl.gather(y, 1, i % 4).masked_fill(i > 1, 0.0)

    check_grad_matches_numpy(scatter_chain, backend, B, B)
    check_grad_matches_numpy(lambda x: x.median(1).values + x.quantile(0.25, 1), backend, B)
    check_grad_matches_numpy(lambda x, y: x.lerp(y, 0.7).fmod(0.5).unfold(1, 2, 1), backend,
                             B, P)


def test_in_place_methods_write_through_views(backend):
    x = vtl.zeros((2, 3))
    x[0].fill_(1)
    x.t()[1].add_(5)
    x[:, 2].masked_fill_(vtl.asarray([True, False]), -1.0)
    x[1].scatter_(0, vtl.asarray(np.array([0], np.int32)), 9.0)
    assert x.tolist() == [[1.0, 6.0, -1.0], [9.0, 5.0, 0.0]]  # what PyTorch gives


@pytest.mark.parametrize("name", ["log1p", "expm1", "log2", "log10", "tan", "sinh", "cosh",
                                  "asin", "acos", "atan", "asinh", "acosh", "atanh",
                                  "signbit", "conj", "atan2", "hypot", "maximum", "minimum",
                                  "logaddexp", "copysign", "floor_divide"])
def test_thin_methods_equal_the_namespace_functions(name):
    x = vtl.asarray(np.array([0.25, 0.5, 0.75], np.float32), backend="numpy")
    y = x + 1 if name == "acosh" else x
    fn = getattr(vtl, name)
    args = () if len(inspect.signature(fn).parameters) == 1 else (x * 2,)
    assert_close(getattr(y, name)(*args), fn(y, *args).numpy())


def test_more_thin_methods():
    x = vtl.asarray(np.array([[0.0, 2.0, -1.0], [3.0, 0.0, 5.0]], np.float32), backend="numpy")
    assert_close(x.clamp_min(0.5), np.maximum(x.numpy(), 0.5))
    assert_close(x.clamp_max(0.5), np.minimum(x.numpy(), 0.5))
    assert_close(x.true_divide(2), x.numpy() / 2)
    assert_close(x.diff(dim=0), np.diff(x.numpy(), axis=0))
    assert x.count_nonzero(1).tolist() == [2, 2]
