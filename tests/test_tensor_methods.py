"""PyTorch-style Tensor methods give the same results as the namespace functions
they call, on every backend."""

from __future__ import annotations

import numpy as np
import pytest

import vtl
from tests.helpers import assert_close

X = np.random.default_rng(3).uniform(0.5, 2.0, (2, 3, 4)).astype(np.float32)


def _same(a, b):
    assert isinstance(a, vtl.Tensor) and isinstance(b, vtl.Tensor)
    assert a.device == b.device
    assert_close(a, b.numpy())


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_min_take_axis_and_return_named_tuples_for_dim(backend, name):
    t = vtl.asarray(X)
    fn = getattr(vtl, name)
    m = getattr(t, name)
    _same(m(), fn(t))
    _same(m(axis=(0, 2), keepdims=True), fn(t, axis=(0, 2), keepdims=True))
    _same(m(axis=1), fn(t, axis=1))
    _same(m(1).values, fn(t, axis=1))  # PyTorch's form: (values, indices)
    _same(m(dim=-1, keepdim=True).values, fn(t, axis=-1, keepdims=True))
    with pytest.raises(TypeError, match="both dim and axis="):
        m(0, axis=0)


@pytest.mark.parametrize("name", ["sum", "prod", "mean"])
def test_reductions_accept_axis_dim_keepdims_keepdim(backend, name):
    t = vtl.asarray(X)
    fn = getattr(vtl, name)
    m = getattr(t, name)
    _same(m(), fn(t))
    _same(m(1), fn(t, axis=1))
    _same(m(axis=(0, 2), keepdims=True), fn(t, axis=(0, 2), keepdims=True))
    _same(m(dim=-1, keepdim=True), fn(t, axis=-1, keepdims=True))
    _same(m(dim=[0, 1]), fn(t, axis=(0, 1)))
    with pytest.raises(TypeError, match="both axis= and dim="):
        m(axis=0, dim=0)


def test_sum_and_prod_dtype(backend):
    t = vtl.asarray(np.arange(4, dtype=np.int8))
    _same(t.sum(dtype=vtl.int16), vtl.sum(t, dtype=vtl.int16))
    _same(t.prod(dtype=vtl.int32), vtl.prod(t, dtype=vtl.int32))


@pytest.mark.parametrize("name", ["std", "var"])
def test_std_var_use_pytorch_correction(backend, name):
    t = vtl.asarray(X)
    fn = getattr(vtl, name)
    m = getattr(t, name)
    _same(m(), fn(t, correction=1))
    _same(m(dim=1, keepdim=True), fn(t, axis=1, correction=1, keepdims=True))
    _same(m(0, correction=0), fn(t, axis=0))
    _same(m(unbiased=False), fn(t))
    ref = getattr(X.astype(np.float64), name)(axis=2, ddof=1).astype(np.float32)
    assert_close(m(2), ref, rtol=1e-5)
    with pytest.raises(TypeError, match="correction"):
        m(correction=1, unbiased=True)


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argmax_argmin(backend, name):
    t = vtl.asarray(X)
    fn, m = getattr(vtl, name), getattr(t, name)
    _same(m(), fn(t))
    _same(m(1), fn(t, axis=1))
    _same(m(dim=2, keepdim=True), fn(t, axis=2, keepdims=True))


def test_reshape_and_view(backend):
    t = vtl.asarray(X)
    for shape in ((6, 4), (-1,), (4, 3, 2)):
        _same(t.reshape(*shape), vtl.reshape(t, shape))
        _same(t.reshape(shape), vtl.reshape(t, shape))
        _same(t.view(*shape), vtl.reshape(t, shape))
        _same(t.view(list(shape)), vtl.reshape(t, shape))
    with pytest.raises(ValueError):
        t.mT.view(-1)  # a transposed tensor cannot be viewed flat
    assert t.mT.reshape(-1).shape == (24,)


@pytest.mark.parametrize("start,end,shape", [
    (0, -1, (24,)), (1, -1, (2, 12)), (0, 1, (6, 4)), (2, 2, (2, 3, 4)), (-2, -1, (2, 12)),
])
def test_flatten(backend, start, end, shape):
    t = vtl.asarray(X)
    f = t.flatten(start, end)
    _same(f, vtl.reshape(t, shape))
    assert f.shape == shape


def test_flatten_edge_cases(backend):
    s = vtl.asarray(2.0)
    _same(s.flatten(), vtl.reshape(s, (1,)))
    t = vtl.asarray(X)
    with pytest.raises(IndexError):
        t.flatten(0, 3)
    with pytest.raises(ValueError, match="after"):
        t.flatten(2, 1)


def test_squeeze_unsqueeze(backend):
    t = vtl.asarray(X.reshape(2, 1, 3, 1, 4))
    _same(t.squeeze(), vtl.squeeze(t, (1, 3)))
    _same(t.squeeze(1), vtl.squeeze(t, 1))
    _same(t.squeeze(dim=(1, 3)), vtl.squeeze(t, axis=(1, 3)))
    _same(t.squeeze(axis=-2), vtl.squeeze(t, -2))
    with pytest.raises(ValueError):
        t.squeeze(0)
    u = vtl.asarray(X)
    _same(u.unsqueeze(0), vtl.expand_dims(u, axis=0))
    _same(u.unsqueeze(-1), vtl.expand_dims(u, axis=-1))


def test_permute_transpose_expand_tile(backend):
    t = vtl.asarray(X)
    _same(t.permute(2, 0, 1), vtl.permute_dims(t, (2, 0, 1)))
    _same(t.permute((1, 2, 0)), vtl.permute_dims(t, (1, 2, 0)))
    _same(t.transpose(0, 2), vtl.permute_dims(t, (2, 1, 0)))
    _same(t.transpose(-1, -2), vtl.permute_dims(t, (0, 2, 1)))
    with pytest.raises(IndexError):
        t.transpose(0, 3)
    c = vtl.asarray(X[:, :1])
    _same(c.expand(5, 2, 3, 4), vtl.broadcast_to(c, (5, 2, 3, 4)))
    _same(c.expand((-1, 3, -1)), vtl.broadcast_to(c, (2, 3, 4)))
    with pytest.raises(ValueError, match="-1"):
        c.expand(-1, 2, 1, 4)
    _same(t.tile(2, 1, 1), vtl.tile(t, (2, 1, 1)))
    _same(t.tile((3,)), vtl.tile(t, (3,)))


@pytest.mark.parametrize("name", ["abs", "exp", "log", "sqrt", "tanh"])
def test_elementwise(backend, name):
    t = vtl.asarray(X - 1.0)
    if name in ("log", "sqrt"):
        t = vtl.asarray(X)
    _same(getattr(t, name)(), getattr(vtl, name)(t))


def test_clip_clamp_matmul(backend):
    t = vtl.asarray(X)
    _same(t.clip(0.8, 1.5), vtl.clip(t, 0.8, 1.5))
    _same(t.clamp(min=1.0), vtl.clip(t, min=1.0))
    _same(t.clamp(max=1.0), vtl.clip(t, max=1.0))
    m = vtl.asarray(X[0])
    _same(m.matmul(m.T), vtl.matmul(m, m.T))


def test_casts(backend):
    from tests.helpers import supported_dtypes

    t = vtl.asarray(X * 3)
    _same(t.astype(vtl.int16), vtl.astype(t, vtl.int16))
    casts = {"float": "float32", "double": "float64", "long": "int64", "int": "int32",
             "bool": "bool"}
    for method, dtype in casts.items():
        if dtype not in supported_dtypes(backend):
            continue
        out = getattr(t, method)()
        _same(out, vtl.astype(t, getattr(vtl, dtype)))
    assert t.float() is t  # already float32: no copy, as PyTorch


def test_methods_are_differentiable(backend):
    x = vtl.asarray(X, requires_grad=True)
    y = x.reshape(6, 4).transpose(0, 1).unsqueeze(0).expand(2, -1, -1).exp().sum(dim=0)
    y.mean().backward()
    assert_close(x.grad, np.exp(X) * 2 / 24, rtol=1e-5)


def test_size_stays_the_element_count(backend):
    t = vtl.asarray(X)
    assert t.size == 24 and t.shape == (2, 3, 4)
    assert not callable(t.size)


def test_methods_resolve_the_namespace_lazily(monkeypatch):
    calls = []
    orig = vtl.exp

    def spy(x):
        calls.append(x)
        return orig(x)

    monkeypatch.setattr(vtl, "exp", spy)
    t = vtl.asarray([0.0], backend="numpy")
    t.exp()
    assert calls == [t]
