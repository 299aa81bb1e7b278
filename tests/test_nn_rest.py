"""affine_grid/grid_sample, channel_shuffle, gumbel_softmax, feature_alpha_dropout, the
``*_with_indices`` pools, fractional max pooling, BatchNorm3d (and ``bias=``), lazy layers,
SyncBatchNorm, AdaptiveLogSoftmaxWithLoss, linear_cross_entropy, NLLLoss2d, CrossMapLRN2d,
conv_tbc, vtl.nn.grad, Buffer, Container and RNNCellBase: NumPy oracles of PyTorch's
formulas on every backend, float64 finite-difference gradients, PyTorch as an extra oracle
where installed, and several ranks through ``mpiexec`` for SyncBatchNorm."""

from __future__ import annotations

import importlib.util
import itertools
import math
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from helpers import assert_close, check_grad, check_grad_matches_numpy, to_numpy

import vtl
import vtl.distributed as dist
import vtl.nn.functional as F
from vtl import nn, optim

try:
    import torch
except ImportError:  # pragma: no cover - torch is optional
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
RNG = np.random.default_rng(23)


def _rand(*shape, dtype="float64"):
    return RNG.standard_normal(shape).astype(dtype)


# -- grid_sample: NumPy oracle of PyTorch's GridSampler.h --------------------------------------
def _unnorm(c, size, ac):
    return (c + 1) / 2 * (size - 1) if ac else ((c + 1) * size - 1) / 2


def _reflect(c, twice_lo, twice_hi):
    if twice_lo == twice_hi:
        return 0.0
    lo, span = twice_lo / 2, (twice_hi - twice_lo) / 2
    c = abs(c - lo)
    extra, flips = math.fmod(c, span), math.floor(c / span)
    return extra + lo if flips % 2 == 0 else span - extra + lo


def _pad(c, size, pm, ac):
    if pm == "border":
        return min(max(c, 0.0), size - 1.0)
    if pm == "reflection":
        c = _reflect(c, 0, 2 * (size - 1)) if ac else _reflect(c, -1, 2 * size - 1)
        return min(max(c, 0.0), size - 1.0)
    return c


def np_grid_sample(x, grid, mode, pm, ac):
    """Per output point: unnormalise, pad, interpolate (bilinear/trilinear or nearest)."""
    n, c = x.shape[:2]
    sizes = x.shape[2:]
    nsp = len(sizes)
    out_sp = grid.shape[1:-1]
    out = np.zeros((n, c, *out_sp))
    for b in range(n):
        for o in itertools.product(*(range(s) for s in out_sp)):
            g = grid[(b, *o)]
            # coordinates per spatial axis, first axis first (grid holds x, y[, z])
            pos = [_pad(_unnorm(g[nsp - 1 - a], sizes[a], ac), sizes[a], pm, ac)
                   for a in range(nsp)]

            def read(idx, b=b):
                if all(0 <= i < s for i, s in zip(idx, sizes, strict=True)):
                    return x[(b, slice(None), *idx)]
                return np.zeros(c)

            if mode == "nearest":
                out[(b, slice(None), *o)] = read([int(np.rint(p)) for p in pos])
                continue
            lows = [math.floor(p) for p in pos]
            acc = np.zeros(c)
            for bits in itertools.product((0, 1), repeat=nsp):
                w = 1.0
                for p, lo, bit in zip(pos, lows, bits, strict=True):
                    w *= (p - lo) if bit else (lo + 1 - p)
                acc += w * read([lo + bit for lo, bit in zip(lows, bits, strict=True)])
            out[(b, slice(None), *o)] = acc
    return out


def _grid(*shape, scale=1.2):
    return RNG.uniform(-scale, scale, shape)


@pytest.mark.parametrize("pm", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_grid_sample_2d_matches_oracle(backend, mode, pm):
    x = _rand(2, 2, 3, 4, dtype="float32")
    g = _grid(2, 3, 2, 2).astype("float32")
    for ac in (False, True):
        y = F.grid_sample(vtl.asarray(x), vtl.asarray(g), mode=mode, padding_mode=pm,
                          align_corners=ac)
        assert_close(y, np_grid_sample(x.astype("float64"), g.astype("float64"), mode, pm, ac)
                     .astype("float32"), rtol=1e-5, atol=1e-5)


def test_grid_sample_3d_matches_oracle(backend):
    x = _rand(1, 2, 2, 3, 3, dtype="float32")
    g = _grid(1, 2, 2, 2, 3).astype("float32")
    for mode, pm, ac in (("bilinear", "zeros", False), ("bilinear", "reflection", True),
                         ("nearest", "border", False)):
        y = F.grid_sample(vtl.asarray(x), vtl.asarray(g), mode=mode, padding_mode=pm,
                          align_corners=ac)
        assert_close(y, np_grid_sample(x.astype("float64"), g.astype("float64"), mode, pm, ac)
                     .astype("float32"), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("pm", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("ac", [False, True])
def test_grid_sample_gradients_finite_differences(pm, ac):
    x = _rand(1, 2, 3, 4)
    g = _grid(1, 2, 3, 2, scale=1.1)
    check_grad(lambda a, b: F.grid_sample(a, b, padding_mode=pm, align_corners=ac), x, g)
    x3 = _rand(1, 1, 2, 3, 2)
    g3 = _grid(1, 1, 2, 2, 3, scale=1.1)
    check_grad(lambda a, b: F.grid_sample(a, b, padding_mode=pm, align_corners=ac), x3, g3)


def test_grid_sample_bicubic_and_nearest_gradients():
    x = _rand(1, 1, 4, 4)
    g = _grid(1, 2, 2, 2, scale=1.1)
    for pm in ("zeros", "border", "reflection"):
        check_grad(lambda a, b, pm=pm: F.grid_sample(a, b, mode="bicubic", padding_mode=pm,
                                                     align_corners=False), x, g)
    # nearest: the input gets the gradient of a gather, the grid none
    check_grad(lambda a: F.grid_sample(a, vtl.asarray(g), mode="nearest", align_corners=True),
               x)


def test_grid_sample_gradients_on_backend(backend):
    x = _rand(1, 2, 3, 3)
    g = _grid(1, 2, 2, 2)
    check_grad_matches_numpy(lambda a, b: F.grid_sample(a, b, align_corners=False), backend,
                             x, g)


def test_grid_sample_checks_and_warning():
    x = vtl.ones((1, 1, 2, 2))
    g = vtl.zeros((1, 2, 2, 2))
    with pytest.warns(UserWarning, match="align_corners=False"):
        F.grid_sample(x, g)
    with pytest.raises(ValueError, match="mode"):
        F.grid_sample(x, g, mode="area", align_corners=False)
    with pytest.raises(ValueError, match="padding_mode"):
        F.grid_sample(x, g, padding_mode="circular", align_corners=False)
    with pytest.raises(ValueError, match="size 2 in its last"):
        F.grid_sample(x, vtl.zeros((1, 2, 2, 3)), align_corners=False)
    with pytest.raises(ValueError, match="same batch size"):
        F.grid_sample(x, vtl.zeros((2, 2, 2, 2)), align_corners=False)
    with pytest.raises(ValueError, match="bicubic"):
        F.grid_sample(vtl.ones((1, 1, 2, 2, 2)), vtl.zeros((1, 1, 1, 1, 3)), mode="bicubic",
                      align_corners=False)
    with pytest.raises(TypeError, match="same dtype"):
        F.grid_sample(x, vtl.zeros((1, 2, 2, 2), dtype=vtl.float64), align_corners=False)


def test_affine_grid_matches_oracle(backend):
    for size in ((2, 1, 3, 4), (2, 1, 2, 3, 4)):
        nsp = len(size) - 2
        theta = _rand(2, nsp, nsp + 1, dtype="float32")
        for ac in (False, True):
            axes = [np.linspace(-1, 1, s) if ac else (2 * np.arange(s) + 1) / s - 1
                    for s in size[2:]]
            mesh = np.meshgrid(*axes, indexing="ij")  # (D,) H, W
            base = np.stack([*reversed(mesh), np.ones_like(mesh[0])], axis=-1)
            expect = np.einsum("...k,njk->n...j", base, theta.astype("float64"))
            got = F.affine_grid(vtl.asarray(theta), size, align_corners=ac)
            assert_close(got, expect.astype("float32"), rtol=1e-5, atol=1e-6)
    check_grad(lambda t: F.affine_grid(t, (1, 1, 2, 3), align_corners=False), _rand(1, 2, 3))
    with pytest.raises(ValueError, match=r"\(N, 2, 3\)"):
        F.affine_grid(vtl.zeros((1, 3, 4)), (1, 1, 2, 2), align_corners=False)
    with pytest.raises(ValueError, match="4-D and 5-D"):
        F.affine_grid(vtl.zeros((1, 2, 3)), (1, 1, 2), align_corners=False)


def test_spatial_transformer_identity(backend):
    """affine_grid of the identity + grid_sample reproduces the image."""
    x = _rand(2, 3, 4, 5, dtype="float32")
    theta = np.tile(np.eye(2, 3, dtype="float32"), (2, 1, 1))
    for ac in (False, True):
        grid = F.affine_grid(vtl.asarray(theta), x.shape, align_corners=ac)
        assert_close(F.grid_sample(vtl.asarray(x), grid, align_corners=ac), x, rtol=1e-5,
                     atol=1e-5)


@needs_torch
def test_affine_grid_grid_sample_match_torch():
    x = _rand(2, 2, 4, 5)
    g = _grid(2, 3, 4, 2)
    for mode, pm, ac in itertools.product(("bilinear", "nearest", "bicubic"),
                                          ("zeros", "border", "reflection"), (False, True)):
        xt, gt = torch.tensor(x, requires_grad=True), torch.tensor(g, requires_grad=True)
        yt = torch.nn.functional.grid_sample(xt, gt, mode=mode, padding_mode=pm,
                                             align_corners=ac)
        w = RNG.standard_normal(tuple(yt.shape))
        (yt * torch.tensor(w)).sum().backward()
        xv, gv = vtl.asarray(x, requires_grad=True), vtl.asarray(g, requires_grad=True)
        yv = F.grid_sample(xv, gv, mode=mode, padding_mode=pm, align_corners=ac)
        vtl.sum(yv * vtl.asarray(w)).backward()
        np.testing.assert_allclose(yv.numpy(), yt.detach().numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(xv.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(gv.grad.numpy(), gt.grad.numpy(), rtol=1e-9, atol=1e-11)
    x5, g5 = _rand(1, 2, 3, 3, 4), _grid(1, 2, 2, 3, 3)
    for pm in ("zeros", "border", "reflection"):
        yt = torch.nn.functional.grid_sample(torch.tensor(x5), torch.tensor(g5), padding_mode=pm,
                                             align_corners=False)
        yv = F.grid_sample(vtl.asarray(x5), vtl.asarray(g5), padding_mode=pm,
                           align_corners=False)
        np.testing.assert_allclose(yv.numpy(), yt.numpy(), rtol=1e-10, atol=1e-12)
    for size in ((2, 3, 4, 5), (2, 3, 2, 4, 5)):
        th = _rand(2, len(size) - 2, len(size) - 1)
        for ac in (False, True):
            np.testing.assert_allclose(
                F.affine_grid(vtl.asarray(th), size, align_corners=ac).numpy(),
                torch.nn.functional.affine_grid(torch.tensor(th), size, align_corners=ac)
                .numpy(), rtol=1e-12, atol=1e-14)


# -- channel_shuffle ---------------------------------------------------------------------------
def test_channel_shuffle(backend):
    x = _rand(2, 6, 2, dtype="float32")
    expect = x.reshape(2, 3, 2, 2).transpose(0, 2, 1, 3).reshape(2, 6, 2)
    assert_close(F.channel_shuffle(vtl.asarray(x), 3), expect)
    assert_close(F.native_channel_shuffle(vtl.asarray(x), 3), expect)
    m = nn.ChannelShuffle(3)
    assert repr(m) == "ChannelShuffle(groups=3)"
    assert_close(m(vtl.asarray(x)), expect)
    with pytest.raises(ValueError, match="more than 2 dimensions"):
        F.channel_shuffle(vtl.ones((2, 4)), 2)
    with pytest.raises(ValueError, match="divisible"):
        F.channel_shuffle(vtl.ones((1, 4, 2)), 3)
    with pytest.raises(ValueError, match="positive"):
        F.channel_shuffle(vtl.ones((1, 4, 2)), 0)


# -- gumbel_softmax ----------------------------------------------------------------------------
def test_gumbel_softmax_formula_and_straight_through(backend):
    logits = _rand(3, 5, dtype="float32")
    tau = 0.7
    u = to_numpy(vtl.random.Generator(4).random((3, 5))).astype("float64")
    z = (logits - np.log(-np.log1p(-u))) / tau
    soft = np.exp(z - z.max(1, keepdims=True))
    soft /= soft.sum(1, keepdims=True)
    x = vtl.asarray(logits, requires_grad=True)
    y = F.gumbel_softmax(x, tau=tau, generator=vtl.random.Generator(4))
    assert_close(y, soft.astype("float32"), rtol=1e-5, atol=1e-6)
    yh = F.gumbel_softmax(x, tau=tau, hard=True, generator=vtl.random.Generator(4))
    assert_close(yh, np.eye(5, dtype="float32")[soft.argmax(1)], atol=1e-6)
    w = vtl.asarray(_rand(3, 5, dtype="float32"))
    g_soft = vtl.autograd.grad(vtl.sum(y * w), x)[0]
    g_hard = vtl.autograd.grad(vtl.sum(yh * w), x)[0]
    assert_close(g_hard, to_numpy(g_soft), rtol=1e-5, atol=1e-6)
    # dim= picks the axis the one-hot runs along
    yd = F.gumbel_softmax(vtl.asarray(logits.T.copy()), hard=True, dim=0)
    assert_close(vtl.sum(yd, axis=0), np.ones(3, "float32"))


def test_gumbel_softmax_samples_follow_softmax():
    logits = np.log(np.array([0.2, 0.5, 0.3]))
    x = vtl.asarray(np.tile(logits, (20000, 1)))
    vtl.random.seed(3)
    counts = to_numpy(F.gumbel_softmax(x, hard=True)).mean(0)
    np.testing.assert_allclose(counts, [0.2, 0.5, 0.3], atol=0.015)
    with pytest.warns(UserWarning, match="eps"):
        F.gumbel_softmax(vtl.asarray(logits), eps=1e-5)
    with pytest.raises(TypeError, match="floating"):
        F.gumbel_softmax(vtl.asarray([1, 2]))


# -- feature_alpha_dropout ---------------------------------------------------------------------
def test_feature_alpha_dropout(backend):
    p = 0.4
    x = _rand(4, 6, 3, dtype="float32")
    u = to_numpy(vtl.random.Generator(8).random((4, 6, 1)))
    keep = (u >= p).astype("float64")
    alpha = 1.7580993408473766
    a = 1 / math.sqrt((alpha * alpha * p + 1) * (1 - p))
    expect = x * keep * a + (keep - 1) * alpha * a + alpha * a * p  # ATen's _dropout_impl
    got = F.feature_alpha_dropout(vtl.asarray(x), p, training=True,
                                  generator=vtl.random.Generator(8))
    assert_close(got, expect.astype("float32"), rtol=1e-5, atol=1e-6)
    xv = vtl.asarray(x)
    assert F.feature_alpha_dropout(xv, p) is xv  # training=False by default, as PyTorch
    m = nn.FeatureAlphaDropout(p)
    assert m.eval()(xv) is xv
    assert m.train()(vtl.ones((2, 3))).shape == (2, 3)  # 2-D: one mask value per element
    assert_close(F.feature_alpha_dropout(xv, 1.0, training=True), np.zeros_like(x))
    with pytest.raises(ValueError, match="at least 2"):
        F.feature_alpha_dropout(vtl.ones(3), 0.5, training=True)
    with pytest.raises(ValueError, match="between 0 and 1"):
        F.feature_alpha_dropout(xv, 1.5)


def test_feature_alpha_dropout_keeps_selu_statistics():
    z = vtl.random.Generator(2).standard_normal((200, 200, 4))
    y = to_numpy(F.feature_alpha_dropout(z, 0.2, training=True,
                                         generator=vtl.random.Generator(3)))
    assert abs(y.mean()) < 0.03 and abs(y.std() - 1) < 0.03
    per = y.reshape(200 * 200, 4)
    dropped = np.isclose(per, per[:, :1]).all(axis=1)  # a dropped channel is constant
    assert 0.17 < dropped.mean() < 0.23


# -- *_with_indices ----------------------------------------------------------------------------
def test_with_indices_aliases(backend):
    x1, x2, x3 = (vtl.asarray(_rand(*s, dtype="float32"))
                  for s in ((1, 2, 6), (1, 2, 4, 4), (1, 1, 2, 4, 4)))
    cases = [(F.max_pool1d_with_indices, F.max_pool1d, x1, (2,)),
             (F.max_pool2d_with_indices, F.max_pool2d, x2, (2,)),
             (F.max_pool3d_with_indices, F.max_pool3d, x3, (2,)),
             (F.adaptive_max_pool1d_with_indices, F.adaptive_max_pool1d, x1, (4,)),
             (F.adaptive_max_pool2d_with_indices, F.adaptive_max_pool2d, x2, (3,)),
             (F.adaptive_max_pool3d_with_indices, F.adaptive_max_pool3d, x3, (2,))]
    for alias, fn, x, args in cases:
        out, idx = alias(x, *args)
        ref, ridx = fn(x, *args, return_indices=True)
        assert_close(out, to_numpy(ref))
        np.testing.assert_array_equal(to_numpy(idx), to_numpy(ridx))


# -- BatchNorm1d/2d/3d -------------------------------------------------------------------------
def _np_batch_norm(x, w, b, eps=1e-5):
    axes = (0, *range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    m = x.mean(axes, keepdims=True)
    v = x.var(axes, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * w.reshape(shape) + (0 if b is None else b.reshape(shape))


def test_batchnorm3d_and_bias_false(backend):
    x = _rand(2, 3, 2, 2, 3, dtype="float32")
    bn = nn.BatchNorm3d(3, momentum=0.2)
    assert repr(bn) == ("BatchNorm3d(3, eps=1e-05, momentum=0.2, affine=True, "
                        "track_running_stats=True)")
    assert_close(bn(vtl.asarray(x)), _np_batch_norm(x, np.ones(3), np.zeros(3))
                 .astype("float32"), rtol=1e-4, atol=1e-5)
    n = x.size // 3
    assert_close(bn.running_mean, (0.2 * x.mean((0, 2, 3, 4))).astype("float32"), atol=1e-6)
    assert_close(bn.running_var, (0.8 + 0.2 * x.var((0, 2, 3, 4)) * n / (n - 1))
                 .astype("float32"), rtol=1e-5)
    bn.eval()
    rm, rv = to_numpy(bn.running_mean), to_numpy(bn.running_var)
    assert_close(bn(vtl.asarray(x)), ((x - rm.reshape(1, 3, 1, 1, 1))
                                      / np.sqrt(rv.reshape(1, 3, 1, 1, 1) + 1e-5)),
                 rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="5-D"):
        bn(vtl.ones((2, 3, 2, 2)))
    nb = nn.BatchNorm2d(3, bias=False)
    assert nb.bias is None and "bias" not in nb.state_dict()
    assert "bias=False" in repr(nb)
    assert [k for k, _ in nb.named_parameters()] == ["weight"]
    x4 = _rand(2, 3, 2, 2, dtype="float32")
    assert_close(nb(vtl.asarray(x4)), _np_batch_norm(x4, np.ones(3), None).astype("float32"),
                 rtol=1e-4, atol=1e-5)
    assert nn.InstanceNorm1d(3, affine=True, bias=False).bias is None
    for bad, m in (((2, 3, 2, 2), nn.BatchNorm1d(3)), ((2, 3), nn.BatchNorm2d(3))):
        with pytest.raises(ValueError):
            m(vtl.ones(bad))


@needs_torch
def test_batchnorm_matches_torch():
    x = _rand(3, 2, 2, 3, 2)
    try:
        torch.nn.BatchNorm3d(2, bias=False)
    except TypeError:
        pytest.skip("this PyTorch's BatchNorm has no bias= argument")
    for momentum in (0.1, None):
        t = torch.nn.BatchNorm3d(2, momentum=momentum, bias=False).double()
        v = nn.BatchNorm3d(2, momentum=momentum, bias=False).double()
        for _ in range(2):
            yt = t(torch.tensor(x))
            yv = v(vtl.asarray(x))
        np.testing.assert_allclose(yv.numpy(), yt.detach().numpy(), rtol=1e-10, atol=1e-12)
        for name in ("running_mean", "running_var"):
            np.testing.assert_allclose(getattr(v, name).numpy(), getattr(t, name).numpy(),
                                       rtol=1e-12)
        assert sorted(v.state_dict()) == sorted(t.state_dict())


# -- lazy layers -------------------------------------------------------------------------------
def test_lazy_linear_materializes_like_linear(backend):
    x = vtl.asarray(_rand(3, 5, dtype="float32"))
    vtl.random.seed(11)
    ref = nn.Linear(5, 4)
    vtl.random.seed(11)
    m = nn.LazyLinear(4)
    assert repr(m) == "LazyLinear(in_features=0, out_features=4, bias=True)"
    assert isinstance(m.weight, nn.UninitializedParameter) and m.has_uninitialized_params()
    assert repr(m.weight) == "<UninitializedParameter>"
    w_obj = m.weight
    y = m(x)
    assert type(m) is nn.Linear and m.in_features == 5 and m.weight is w_obj
    assert type(m.weight) is nn.Parameter and m.weight.shape == (4, 5)
    assert_close(m.weight, to_numpy(ref.weight))
    assert_close(m.bias, to_numpy(ref.bias))
    assert_close(y, to_numpy(ref(x)), rtol=1e-5, atol=1e-6)
    vtl.sum(m(x)).backward()
    assert m.weight.grad.shape == (4, 5)
    with pytest.raises(ValueError, match="last dimension 5"):
        m(vtl.ones((2, 3)))


def test_lazy_conv_and_norm_layers(backend):
    cases = [(nn.LazyConv1d(4, 3), (2, 3, 6), nn.Conv1d, (4, 3, 3)),
             (nn.LazyConv2d(4, 3, groups=2, padding=1), (1, 2, 4, 4), nn.Conv2d, (4, 1, 3, 3)),
             (nn.LazyConv3d(2, 2, bias=False), (1, 2, 3, 3, 3), nn.Conv3d, (2, 2, 2, 2, 2)),
             (nn.LazyConvTranspose1d(4, 3), (3, 5), nn.ConvTranspose1d, (3, 4, 3)),
             (nn.LazyConvTranspose2d(4, 2, stride=2, groups=2), (1, 2, 3, 3),
              nn.ConvTranspose2d, (2, 2, 2, 2)),
             (nn.LazyConvTranspose3d(1, 2), (1, 2, 2, 2, 2), nn.ConvTranspose3d,
              (2, 1, 2, 2, 2))]
    for m, shape, cls, wshape in cases:
        x = vtl.asarray(_rand(*shape, dtype="float32"))
        y = m(x)
        assert type(m) is cls and tuple(m.weight.shape) == wshape
        assert m.in_channels == shape[-m._nsp - 1]
        eager = cls(m.in_channels, m.out_channels, m.kernel_size, stride=m.stride,
                    padding=m.padding, groups=m.groups, bias=m.bias is not None)
        eager.load_state_dict(m.state_dict())
        assert_close(y, to_numpy(eager(x)), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.LazyConv2d(4, 3, groups=2)(vtl.ones((1, 3, 4, 4)))
    with pytest.raises(ValueError, match="3-D .*4-D"):
        nn.LazyConv2d(4, 3)(vtl.ones((4, 4)))
    for m, shape, cls in ((nn.LazyBatchNorm1d(), (4, 3), nn.BatchNorm1d),
                          (nn.LazyBatchNorm2d(momentum=0.5), (2, 3, 2, 2), nn.BatchNorm2d),
                          (nn.LazyBatchNorm3d(affine=False), (2, 3, 1, 2, 2), nn.BatchNorm3d),
                          (nn.LazyInstanceNorm1d(), (3, 5), nn.InstanceNorm1d),
                          (nn.LazyInstanceNorm2d(affine=True), (2, 3, 2, 2),
                           nn.InstanceNorm2d)):
        x = _rand(*shape, dtype="float32")
        y = m(vtl.asarray(x))
        assert type(m) is cls and m.num_features == 3
        if isinstance(m, nn.BatchNorm1d | nn.BatchNorm2d | nn.BatchNorm3d):
            assert_close(y, _np_batch_norm(x, np.ones(3), np.zeros(3)).astype("float32"),
                         rtol=1e-4, atol=1e-5)
            assert m.running_mean.shape == (3,) and int(m.num_batches_tracked) == 1
        if m.affine:
            assert_close(m.weight, np.ones(3, "float32"))


def test_lazy_load_state_dict_and_optimizer_after_first_forward():
    ref = nn.Sequential(nn.Linear(5, 3), nn.BatchNorm1d(3))
    lazy = nn.Sequential(nn.LazyLinear(3), nn.LazyBatchNorm1d())
    assert lazy[0].weight.shape == (0,)  # a placeholder
    lazy.load_state_dict(ref.state_dict())  # materialises with the checkpoint's shapes
    assert type(lazy[0]) is nn.LazyLinear and lazy[0].weight.shape == (3, 5)
    x = vtl.asarray(_rand(4, 5, dtype="float32"))
    assert_close(lazy(x), to_numpy(ref(x)), rtol=1e-5, atol=1e-6)
    assert type(lazy[0]) is nn.Linear and lazy[0].in_features == 5
    assert type(lazy[1]) is nn.BatchNorm1d
    # the documented order: first forward, then the optimizer
    m = nn.LazyLinear(2)
    m(x)
    opt = optim.Adam(m.parameters(), lr=0.1)
    before = to_numpy(m.weight).copy()
    vtl.sum(m(x) ** 2).backward()
    opt.step()
    assert not np.allclose(to_numpy(m.weight), before)
    with pytest.raises(TypeError, match="vtl.Tensor"):
        nn.LazyLinear(2)([1.0, 2.0])
    u = nn.UninitializedParameter()
    u.materialize((2, 3))
    assert type(u) is nn.Parameter and u.shape == (2, 3) and u.requires_grad
    b = nn.UninitializedBuffer(dtype=vtl.float64)
    b.materialize(4)
    assert type(b) is vtl.Tensor and b.shape == (4,) and b.dtype == vtl.float64


# -- SyncBatchNorm -----------------------------------------------------------------------------
def test_sync_batchnorm_without_group_is_batchnorm(backend):
    x = _rand(4, 3, 2, dtype="float32")
    s, b = nn.SyncBatchNorm(3, momentum=0.3), nn.BatchNorm1d(3, momentum=0.3)
    assert_close(s(vtl.asarray(x)), to_numpy(b(vtl.asarray(x))))
    assert_close(s.running_var, to_numpy(b.running_var))
    # any rank >= 2, as PyTorch's SyncBatchNorm
    assert nn.SyncBatchNorm(3)(vtl.asarray(_rand(2, 3, 2, 2, 2, dtype="float32"))).shape \
        == (2, 3, 2, 2, 2)
    with pytest.raises(ValueError, match="at least 2"):
        s(vtl.ones(3))
    dist.init_process_group()  # a world of one: plain batch norm
    try:
        assert_close(s.eval()(vtl.asarray(x)), to_numpy(b.eval()(vtl.asarray(x))))
        assert_close(s.train()(vtl.asarray(x)), to_numpy(b.train()(vtl.asarray(x))))
    finally:
        dist.destroy_process_group()


def test_convert_sync_batchnorm_shares_state():
    bn2 = nn.BatchNorm2d(3, bias=False, momentum=None)
    bn2.eval()
    model = nn.Sequential(nn.Conv2d(3, 3, 1), bn2, nn.Sequential(nn.BatchNorm1d(4)))
    conv = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    assert conv is model
    s = model[1]
    assert type(s) is nn.SyncBatchNorm and s.weight is bn2.weight and s.bias is None
    assert s.running_mean is bn2.running_mean and s.momentum is None and not s.training
    assert type(model[2][0]) is nn.SyncBatchNorm and model[2][0].num_features == 4
    assert list(model.state_dict()) == ["0.weight", "0.bias", "1.weight", "1.running_mean",
                                        "1.running_var", "1.num_batches_tracked", "2.0.weight",
                                        "2.0.bias", "2.0.running_mean", "2.0.running_var",
                                        "2.0.num_batches_tracked"]
    single = nn.SyncBatchNorm.convert_sync_batchnorm(nn.BatchNorm3d(2))
    assert type(single) is nn.SyncBatchNorm
    with pytest.raises(ValueError, match="process group"):
        nn.SyncBatchNorm(3, process_group="group")


ROOT = Path(__file__).resolve().parent.parent
SYNC_WORKER = Path(__file__).resolve().parent / "distributed_workers" / "syncbn_worker.py"
MPIEXEC = shutil.which("mpiexec") or shutil.which("mpirun")
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_rmaps_base_oversubscribe": "1",
           "OMPI_MCA_btl_vader_single_copy_mechanism": "none", "OMPI_MCA_btl": "self,vader",
           "OMPI_MCA_oob_tcp_if_include": "lo"}


@pytest.mark.skipif(MPIEXEC is None or importlib.util.find_spec("mpi4py") is None,
                    reason="needs an MPI launcher (mpiexec) and mpi4py")
def test_sync_batchnorm_on_two_ranks_equals_whole_batch():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env.update(MPI_ENV, VTL_BACKEND="numpy")
    p = subprocess.run([MPIEXEC, "-n", "2", sys.executable, str(SYNC_WORKER)], env=env,
                       capture_output=True, text=True, timeout=120)
    out = p.stdout + p.stderr
    if p.returncode and "mpi4py" in out and "syncbn ok" not in out:
        pytest.skip(f"MPI cannot start here: {out[-300:]}")
    assert p.returncode == 0, out
    assert "syncbn ok rank 0" in out and "syncbn ok rank 1" in out


# -- AdaptiveLogSoftmaxWithLoss ----------------------------------------------------------------
def _np_log_softmax(z):
    z = z - z.max(1, keepdims=True)
    return z - np.log(np.exp(z).sum(1, keepdims=True))


def _np_asm_log_prob(m, x):
    head = _np_log_softmax(x @ to_numpy(m.head.weight).T.astype("float64")
                           + (0 if m.head.bias is None else to_numpy(m.head.bias)))
    parts = [head[:, :m.shortlist_size]]
    for i, proj in enumerate(m.tail):
        h = x @ to_numpy(proj[0].weight).T.astype("float64")
        parts.append(_np_log_softmax(h @ to_numpy(proj[1].weight).T.astype("float64"))
                     + head[:, m.shortlist_size + i:m.shortlist_size + i + 1])
    return np.concatenate(parts, axis=1)


def test_adaptive_log_softmax(backend):
    m = nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3, 6], div_value=2.0, head_bias=True)
    x = _rand(5, 8, dtype="float32")
    t = np.array([0, 4, 9, 2, 7])
    lp = _np_asm_log_prob(m, x.astype("float64"))
    np.testing.assert_allclose(np.exp(lp).sum(1), 1.0, rtol=1e-10)
    out = m(vtl.asarray(x), vtl.asarray(t))
    assert out._fields == ("output", "loss")
    assert_close(out.output, lp[np.arange(5), t].astype("float32"), rtol=1e-5, atol=1e-5)
    assert_close(out.loss, np.float32(-lp[np.arange(5), t].mean()), rtol=1e-5, atol=1e-5)
    assert_close(m.log_prob(vtl.asarray(x)), lp.astype("float32"), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(to_numpy(m.predict(vtl.asarray(x))), lp.argmax(1))
    one = m(vtl.asarray(x[1]), vtl.asarray(t[1]))
    assert one.output.shape == () and one.loss.shape == ()
    assert_close(one.output, np.float32(lp[1, t[1]]), rtol=1e-5, atol=1e-5)
    vtl.sum(out.loss).backward()
    assert m.tail[1][0].weight.grad is not None and m.head.bias.grad is not None


def test_adaptive_log_softmax_gradients_and_errors():
    m = nn.AdaptiveLogSoftmaxWithLoss(4, 6, [2, 4], div_value=2.0).double()
    x = _rand(3, 4)
    t = vtl.asarray(np.array([1, 3, 5]))
    check_grad(lambda a: m(a, t).output, x)
    with pytest.raises(RuntimeError, match=r"Target values should be in \[0, 5\]"):
        m(vtl.asarray(x), vtl.asarray(np.array([0, 6, 1])))
    with pytest.raises(ValueError, match="cutoffs"):
        nn.AdaptiveLogSoftmaxWithLoss(4, 6, [4, 2])
    with pytest.raises(ValueError, match="cutoffs"):
        nn.AdaptiveLogSoftmaxWithLoss(4, 6, [2, 6])
    with pytest.raises(ValueError, match="same size in the batch"):
        m(vtl.asarray(x), vtl.asarray(np.array([1, 2])))
    with pytest.raises(ValueError, match="2-D input"):
        m(vtl.asarray(x[0]), t)


@needs_torch
def test_adaptive_log_softmax_matches_torch():
    tm = torch.nn.AdaptiveLogSoftmaxWithLoss(6, 12, [3, 7], div_value=2.0,
                                             head_bias=True).double()
    vm = nn.AdaptiveLogSoftmaxWithLoss(6, 12, [3, 7], div_value=2.0, head_bias=True).double()
    vm.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    x = _rand(7, 6)
    t = np.array([0, 11, 5, 3, 8, 2, 7])
    ot = tm(torch.tensor(x, requires_grad=True), torch.tensor(t))
    xv = vtl.asarray(x, requires_grad=True)
    ov = vm(xv, vtl.asarray(t))
    np.testing.assert_allclose(ov.output.numpy(), ot.output.detach().numpy(), rtol=1e-10)
    np.testing.assert_allclose(float(ov.loss), float(ot.loss.detach()), rtol=1e-10)
    ot.loss.backward()
    ov.loss.backward()
    for (name, pt), (_, pv) in zip(tm.named_parameters(), vm.named_parameters(), strict=True):
        np.testing.assert_allclose(pv.grad.numpy(), pt.grad.numpy(), rtol=1e-9, atol=1e-12,
                                   err_msg=name)
    np.testing.assert_allclose(vm.log_prob(vtl.asarray(x)).numpy(),
                               tm.log_prob(torch.tensor(x)).detach().numpy(), rtol=1e-10)
    np.testing.assert_array_equal(vm.predict(vtl.asarray(x)).numpy(),
                                  tm.predict(torch.tensor(x)).numpy())


# -- NLLLoss2d ---------------------------------------------------------------------------------
def test_nllloss2d_is_deprecated_nllloss(backend):
    with pytest.warns(FutureWarning, match="NLLLoss2d"):
        m = nn.NLLLoss2d(ignore_index=1)
    assert isinstance(m, nn.NLLLoss)
    x = _rand(2, 3, 2, 2, dtype="float32")
    t = np.array([[[0, 1], [2, 0]], [[1, 2], [2, 2]]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        ref = nn.NLLLoss(ignore_index=1)
    assert_close(m(vtl.asarray(x), vtl.asarray(t)),
                 to_numpy(ref(vtl.asarray(x), vtl.asarray(t))))


# -- fractional max pooling --------------------------------------------------------------------
def _np_intervals(u, n_in, n_out, k, dtype):
    """PyTorch's generate_intervals, in the input's precision."""
    t = np.dtype(dtype).type
    seq = np.zeros(n_out, dtype=int)
    if n_out > 1:
        alpha = t(n_in - k) / t(n_out - 1)
        for i in range(n_out - 1):
            seq[i] = int((t(i) + t(u)) * alpha) - int(t(u) * alpha)
    seq[n_out - 1] = n_in - k
    return seq


def np_fractional_max_pool(x, k, out, samples):
    n, c, *sizes = x.shape
    nsp = len(sizes)
    res = np.zeros((n, c, *out), x.dtype)
    idx = np.zeros((n, c, *out), int)
    for b, ch in itertools.product(range(n), range(c)):
        # sample j drives the width in 2-D (reversed axes), the time axis in 3-D
        axes_of = list(reversed(range(nsp))) if nsp == 2 else list(range(nsp))
        starts = [_np_intervals(samples[b, ch, axes_of.index(a)], sizes[a], out[a], k[a],
                                x.dtype) for a in range(nsp)]
        for o in itertools.product(*(range(s) for s in out)):
            lo = [starts[a][o[a]] for a in range(nsp)]
            win = x[(b, ch, *(slice(lo[a], lo[a] + k[a]) for a in range(nsp)))]
            j = np.unravel_index(int(np.argmax(win)), win.shape)
            pos = [lo[a] + j[a] for a in range(nsp)]
            res[(b, ch, *o)] = win[j]
            idx[(b, ch, *o)] = np.ravel_multi_index(pos, sizes)
    return res, idx


def test_fractional_max_pool_matches_oracle(backend):
    for shape, k, out in (((2, 2, 7, 6), (2, 3), (4, 3)), ((1, 2, 4, 5, 5), (2, 2, 3), (3, 2, 3))):
        nsp = len(k)
        x = _rand(*shape, dtype="float32")
        u = RNG.uniform(0, 1, (shape[0], shape[1], nsp)).astype("float32")
        fn = F.fractional_max_pool2d if nsp == 2 else F.fractional_max_pool3d
        y, i = fn(vtl.asarray(x), k, output_size=out, return_indices=True,
                  _random_samples=vtl.asarray(u))
        ry, ri = np_fractional_max_pool(x, k, out, u)
        assert_close(y, ry)
        np.testing.assert_array_equal(to_numpy(i), ri)
    # output_ratio, unbatched input, drawn samples; the module
    m = nn.FractionalMaxPool2d(2, output_ratio=0.5)
    assert repr(m) == "FractionalMaxPool2d(kernel_size=(2, 2), output_ratio=(0.5, 0.5))"
    assert m(vtl.asarray(_rand(3, 8, 6, dtype="float32"))).shape == (3, 4, 3)
    y, i = nn.FractionalMaxPool3d(2, output_size=2, return_indices=True)(
        vtl.asarray(_rand(1, 1, 4, 4, 4, dtype="float32")))
    assert y.shape == i.shape == (1, 1, 2, 2, 2)
    with pytest.raises(ValueError, match="does not fit"):
        F.fractional_max_pool2d(vtl.ones((1, 1, 4, 4)), 3, output_size=3)
    with pytest.raises(ValueError, match="output_size or an output_ratio"):
        F.fractional_max_pool2d(vtl.ones((1, 1, 4, 4)), 2)
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.FractionalMaxPool2d(2, output_ratio=1.5)


def test_fractional_max_pool_gradient():
    u = vtl.asarray(RNG.uniform(0, 1, (1, 2, 2)))
    check_grad(lambda a: F.fractional_max_pool2d(a, 2, output_size=(3, 2), _random_samples=u),
               _rand(1, 2, 5, 4))


@needs_torch
def test_fractional_max_pool_matches_torch():
    for shape, k, out in (((2, 3, 9, 7), (2, 3), (4, 3)), ((1, 2, 6, 7, 8), (2, 2, 3), (3, 4, 3))):
        nsp = len(k)
        x = _rand(*shape)
        u = RNG.uniform(0, 1, (shape[0], shape[1], nsp))
        tf = torch.nn.functional.fractional_max_pool2d if nsp == 2 else \
            torch.nn.functional.fractional_max_pool3d
        vf = F.fractional_max_pool2d if nsp == 2 else F.fractional_max_pool3d
        xt = torch.tensor(x, requires_grad=True)
        yt, it = tf(xt, k, output_size=out, return_indices=True, _random_samples=torch.tensor(u))
        xv = vtl.asarray(x, requires_grad=True)
        yv, iv = vf(xv, k, output_size=out, return_indices=True, _random_samples=vtl.asarray(u))
        g = RNG.standard_normal(tuple(yt.shape))
        (yt * torch.tensor(g)).sum().backward()
        vtl.sum(yv * vtl.asarray(g)).backward()
        np.testing.assert_array_equal(yv.numpy(), yt.detach().numpy())
        np.testing.assert_array_equal(iv.numpy(), it.numpy())
        np.testing.assert_allclose(xv.grad.numpy(), xt.grad.numpy(), rtol=1e-12)


# -- linear_cross_entropy ----------------------------------------------------------------------
def test_linear_cross_entropy(backend):
    from vtl.nn.functional.linear_cross_entropy import LinearCrossEntropyOptions

    x = _rand(7, 4, dtype="float32")
    w = _rand(6, 4, dtype="float32")
    b = _rand(6, dtype="float32")
    t = RNG.integers(0, 6, 7)
    t[3] = -100
    z = x.astype("float64") @ w.T + b
    lp = z - z.max(1, keepdims=True)
    lp -= np.log(np.exp(lp).sum(1, keepdims=True))
    keep = t != -100
    nll = np.where(keep, -lp[np.arange(7), np.where(keep, t, 0)], 0.0)
    expect = {"none": nll, "sum": nll.sum(), "mean": nll.sum() / keep.sum()}
    for red, opts in itertools.product(("mean", "sum", "none"),
                                       (None, LinearCrossEntropyOptions(batch_chunk_size=3))):
        got = F.linear_cross_entropy(vtl.asarray(x), vtl.asarray(w), vtl.asarray(t),
                                     linear_bias=vtl.asarray(b), reduction=red, options=opts)
        assert_close(got, expect[red].astype("float32"), rtol=1e-5, atol=1e-5)
    m = nn.LinearCrossEntropyLoss(4, 6, bias=True, options=LinearCrossEntropyOptions())
    with vtl.no_grad():
        m.linear.weight[...] = vtl.asarray(w)
        m.linear.bias[...] = vtl.asarray(b)
    assert_close(m(vtl.asarray(x), vtl.asarray(t)), np.float32(expect["mean"]), rtol=1e-5,
                 atol=1e-6)


def test_linear_cross_entropy_chunks_give_reference_gradients():
    from vtl.nn.functional.linear_cross_entropy import LinearCrossEntropyOptions

    x, w, b = _rand(5, 3), _rand(4, 3), _rand(4)
    t = vtl.asarray(np.array([0, 3, 1, 1, 2]))
    cw = vtl.asarray(RNG.uniform(0.5, 2.0, 4))
    for opts in (None, LinearCrossEntropyOptions(batch_chunk_size=2)):
        check_grad(lambda a, ww, bb, opts=opts: F.linear_cross_entropy(
            a, ww, t, linear_bias=bb, weight=cw, options=opts), x, w, b)
    # K-dimensional loss: logits (N, C, *out_features)
    w3 = _rand(4, 2, 3)
    t3 = vtl.asarray(RNG.integers(0, 4, (5, 2)))
    y = F.linear_cross_entropy(vtl.asarray(x), vtl.asarray(w3), t3, label_smoothing=0.2)
    logits = np.einsum("nf,cof->nco", x, w3)
    assert_close(y, to_numpy(F.cross_entropy(vtl.asarray(logits), t3, label_smoothing=0.2)))
    with pytest.warns(UserWarning, match="options.*ignored"):
        F.linear_cross_entropy(vtl.asarray(x), vtl.asarray(w3), t3,
                               options=LinearCrossEntropyOptions())
    with pytest.raises(ValueError, match="in_features"):
        F.linear_cross_entropy(vtl.asarray(x), vtl.asarray(_rand(4, 2)), t)
    with pytest.raises(ValueError, match="batch_chunk_size"):
        LinearCrossEntropyOptions(batch_chunk_size=0)


@needs_torch
def test_linear_cross_entropy_matches_torch():
    tm = torch.nn.LinearCrossEntropyLoss(4, 5, out_features=(3,), bias=True,
                                         label_smoothing=0.1).double()
    vm = nn.LinearCrossEntropyLoss(4, 5, out_features=(3,), bias=True,
                                   label_smoothing=0.1).double()
    vm.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    x, t = _rand(7, 4), RNG.integers(0, 5, (7, 3))
    np.testing.assert_allclose(float(vm(vtl.asarray(x), vtl.asarray(t))),
                               float(tm(torch.tensor(x), torch.tensor(t)).detach()), rtol=1e-12)
    assert repr(vm) == repr(tm)


# -- CrossMapLRN2d, conv_tbc, nn.grad ----------------------------------------------------------
def np_cross_map_lrn2d(x, size, alpha, beta, k):
    """PyTorch's running-sum kernel, transcribed."""
    sq = x * x
    c = x.shape[1]
    scale = np.zeros_like(x)
    pre = int((size - 1) / 2 + 1)
    for j in range(min(pre, c)):
        scale[:, 0] += sq[:, j]
    for j in range(1, c):
        scale[:, j] = scale[:, j - 1]
        if j < c - pre + 1:
            scale[:, j] += sq[:, j + pre - 1]
        if j > pre:
            scale[:, j] -= sq[:, j - pre]
    return x * (k + alpha / size * scale) ** -beta


def test_cross_map_lrn2d(backend):
    x = _rand(2, 6, 2, 3, dtype="float32")
    for size in (1, 2, 3, 5):
        m = nn.CrossMapLRN2d(size, alpha=0.1, beta=0.75, k=2.0)
        assert_close(m(vtl.asarray(x)), np_cross_map_lrn2d(x.astype("float64"), size, 0.1, 0.75,
                                                           2.0).astype("float32"),
                     rtol=1e-5, atol=1e-6)
    assert repr(nn.CrossMapLRN2d(3)) == "CrossMapLRN2d(3, alpha=0.0001, beta=0.75, k=1)"
    with pytest.raises(ValueError, match="4D"):
        nn.CrossMapLRN2d(3)(vtl.ones((2, 3, 4)))
    check_grad(lambda a: nn.CrossMapLRN2d(3, 0.5, 0.75, 1.0)(a), _rand(1, 4, 2, 2))


def test_conv_tbc(backend):
    x, w, b = _rand(6, 2, 3, dtype="float32"), _rand(3, 3, 4, dtype="float32"), \
        _rand(4, dtype="float32")
    for pad in (0, 1):
        xp = np.pad(x.astype("float64"), ((pad, pad), (0, 0), (0, 0)))
        t_out = xp.shape[0] - 3 + 1
        expect = np.stack([np.einsum("kbc,kco->bo", xp[i:i + 3], w) for i in range(t_out)]) + b
        assert_close(F.conv_tbc(vtl.asarray(x), vtl.asarray(w), vtl.asarray(b), pad),
                     expect.astype("float32"), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="bias"):
        F.conv_tbc(vtl.asarray(x), vtl.asarray(w), None)


def test_nn_grad_convolutions(backend):
    x = _rand(2, 4, 5, 6, dtype="float32")
    w = _rand(6, 2, 3, 2, dtype="float32")
    xv, wv = vtl.asarray(x, requires_grad=True), vtl.asarray(w, requires_grad=True)
    y = F.conv2d(xv, wv, stride=2, padding=1, groups=2)
    go = vtl.asarray(_rand(*y.shape, dtype="float32"))
    gx, gw = vtl.autograd.grad(y, (xv, wv), go)
    assert_close(nn.grad.conv2d_input(x.shape, vtl.asarray(w), go, 2, 1, 1, 2), to_numpy(gx),
                 rtol=1e-5, atol=1e-5)
    assert_close(nn.grad.conv2d_weight(vtl.asarray(x), w.shape, go, 2, 1, 1, 2), to_numpy(gw),
                 rtol=1e-5, atol=1e-5)
    x1, w1 = _rand(1, 2, 7, dtype="float32"), _rand(3, 2, 2, dtype="float32")
    y1 = F.conv1d(vtl.asarray(x1), vtl.asarray(w1), dilation=2)
    g1 = vtl.ones(y1.shape)
    assert nn.grad.conv1d_input(x1.shape, vtl.asarray(w1), g1, dilation=2).shape == x1.shape
    assert nn.grad.conv1d_weight(vtl.asarray(x1), w1.shape, g1, dilation=2).shape == w1.shape
    with pytest.raises(ValueError, match="grad_output has shape"):
        nn.grad.conv2d_input(x.shape, vtl.asarray(w), vtl.ones((1, 1)), groups=2)


# -- Buffer, Container, RNNCellBase ------------------------------------------------------------
def test_buffer_container_rnncellbase():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.stats = nn.Buffer(vtl.zeros(3))
            self.scratch = nn.Buffer(vtl.ones(2), persistent=False)

    m = M()
    assert [n for n, _ in m.named_buffers()] == ["stats", "scratch"]
    assert list(m.state_dict()) == ["stats"] and not list(m.parameters())
    m.to(dtype=vtl.float64)
    assert m.stats.dtype == vtl.float64
    with pytest.warns(FutureWarning, match="Container is deprecated"):
        c = nn.Container(lin=nn.Linear(2, 3))
    assert [n for n, _ in c.named_children()] == ["lin"]
    for cell in (nn.RNNCell(3, 4), nn.LSTMCell(3, 4), nn.GRUCell(3, 4, bias=False)):
        assert isinstance(cell, nn.RNNCellBase)
    base = nn.RNNCellBase(3, 4, True, num_chunks=2)
    assert base.weight_ih.shape == (8, 3) and base.bias_hh.shape == (8,)
    assert np.abs(to_numpy(base.weight_hh)).max() <= 0.5
    from vtl.nn.parameter import Buffer, Parameter, UninitializedParameter

    assert Buffer is nn.Buffer and Parameter is nn.Parameter
    assert UninitializedParameter is nn.UninitializedParameter


@needs_torch
def test_every_torch_nn_name_is_known():
    """Names of torch.nn that vtl.nn lacks are the ones listed here; a new PyTorch name
    makes this test say so."""
    import torch.nn as tnn

    missing = {n for n in dir(tnn) if not n.startswith("_") and not hasattr(nn, n)}
    known = {"DataParallel", "attention", "common_types", "factory_kwargs", "intrinsic",
             "parallel", "qat", "quantizable", "quantized"}
    assert missing <= known, sorted(missing - known)
