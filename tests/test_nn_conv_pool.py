"""Convolution and pooling: NumPy loop references written here, float64
finite-difference gradients (and a second-order check), PyTorch's conventions
(ties, nan, ceil_mode divisors, return_indices), modules with their default
inits, state dicts and error messages, array-api-strict inputs, and PyTorch as
an extra oracle when it is installed."""

from __future__ import annotations

import contextlib
import math
import warnings

import numpy as np
import pytest
from helpers import assert_close, check_grad, check_grad_matches_numpy, skip_unless_dtype, to_numpy
from hypothesis import given
from hypothesis import strategies as st

import vtl
import vtl.nn.functional as F
from vtl import nn

try:
    import torch
    import torch.nn.functional as TF
except ImportError:  # pragma: no cover - torch is optional
    torch = None

RNG = np.random.default_rng(1234)


# -- NumPy references (plain loops) ---------------------------------------------------------
def np_conv2d(x, w, b=None, stride=(1, 1), pad=(0, 0, 0, 0), dil=(1, 1), groups=1):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    pt, pb, pl, pr = pad
    xp = np.zeros((n, c, h + pt + pb, wd + pl + pr), x.dtype)
    xp[:, :, pt:pt + h, pl:pl + wd] = x
    ho = (h + pt + pb - dil[0] * (kh - 1) - 1) // stride[0] + 1
    wo = (wd + pl + pr - dil[1] * (kw - 1) - 1) // stride[1] + 1
    og = o // groups
    out = np.zeros((n, o, ho, wo), np.float64)
    for oc in range(o):
        g = oc // og
        for i in range(ho):
            for j in range(wo):
                acc = np.zeros(n)
                for ci in range(cg):
                    for a in range(kh):
                        for bb in range(kw):
                            acc += xp[:, g * cg + ci, i * stride[0] + a * dil[0],
                                      j * stride[1] + bb * dil[1]] * w[oc, ci, a, bb]
                out[:, oc, i, j] = acc
    if b is not None:
        out += b[None, :, None, None]
    return out.astype(x.dtype)


def np_conv_transpose2d(x, w, b=None, stride=(1, 1), pad=(0, 0), out_pad=(0, 0),
                        groups=1, dil=(1, 1)):
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    cg = c // groups
    ho = (h - 1) * stride[0] - 2 * pad[0] + dil[0] * (kh - 1) + out_pad[0] + 1
    wo = (wd - 1) * stride[1] - 2 * pad[1] + dil[1] * (kw - 1) + out_pad[1] + 1
    out = np.zeros((n, og * groups, ho, wo), np.float64)
    for ci in range(c):
        g = ci // cg
        for i in range(h):
            for j in range(wd):
                for a in range(kh):
                    for bb in range(kw):
                        r = i * stride[0] - pad[0] + a * dil[0]
                        s = j * stride[1] - pad[1] + bb * dil[1]
                        if 0 <= r < ho and 0 <= s < wo:
                            out[:, g * og:(g + 1) * og, r, s] += (
                                x[:, ci, i, j][:, None] * w[ci, :, a, bb][None, :])
    if b is not None:
        out += b[None, :, None, None]
    return out.astype(x.dtype)


def _pool_size(size, k, s, p, d, ceil_mode):
    num = size + 2 * p - d * (k - 1) - 1
    out = (num + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def np_max_pool2d(x, k, s, p=(0, 0), d=(1, 1), ceil_mode=False):
    """Values and flat indices; the first maximum (row-major) wins, nan wins."""
    n, c, h, w = x.shape
    ho = _pool_size(h, k[0], s[0], p[0], d[0], ceil_mode)
    wo = _pool_size(w, k[1], s[1], p[1], d[1], ceil_mode)
    out = np.full((n, c, ho, wo), -np.inf, x.dtype)
    idx = np.zeros((n, c, ho, wo), np.int64)
    for b in range(n):
        for ch in range(c):
            for i in range(ho):
                for j in range(wo):
                    best, bi = -np.inf, -1
                    for a in range(k[0]):
                        for bb in range(k[1]):
                            r, q = i * s[0] - p[0] + a * d[0], j * s[1] - p[1] + bb * d[1]
                            if 0 <= r < h and 0 <= q < w:
                                v = x[b, ch, r, q]
                                if bi < 0 or v > best or (np.isnan(v) and not np.isnan(best)):
                                    best, bi = v, r * w + q
                    out[b, ch, i, j], idx[b, ch, i, j] = best, bi
    return out, idx


def np_avg_pool2d(x, k, s, p=(0, 0), ceil_mode=False, count_include_pad=True, divisor=None):
    n, c, h, w = x.shape
    ho = _pool_size(h, k[0], s[0], p[0], 1, ceil_mode)
    wo = _pool_size(w, k[1], s[1], p[1], 1, ceil_mode)
    out = np.zeros((n, c, ho, wo), np.float64)
    for i in range(ho):
        for j in range(wo):
            h0, w0 = i * s[0] - p[0], j * s[1] - p[1]
            h1, w1 = min(h0 + k[0], h + p[0]), min(w0 + k[1], w + p[1])
            pool = (h1 - h0) * (w1 - w0)
            h0, w0, h1, w1 = max(h0, 0), max(w0, 0), min(h1, h), min(w1, w)
            total = x[:, :, h0:h1, w0:w1].astype(np.float64).sum(axis=(2, 3))
            if divisor is not None:
                div = divisor
            else:
                div = pool if count_include_pad else (h1 - h0) * (w1 - w0)
            out[:, :, i, j] = total / div
    return out.astype(x.dtype)


def np_adaptive_avg_pool2d(x, out):
    h, w = x.shape[-2:]
    res = np.zeros(x.shape[:-2] + tuple(out), np.float64)
    for i in range(out[0]):
        for j in range(out[1]):
            h0, h1 = (i * h) // out[0], math.ceil((i + 1) * h / out[0])
            w0, w1 = (j * w) // out[1], math.ceil((j + 1) * w / out[1])
            res[..., i, j] = x[..., h0:h1, w0:w1].mean(axis=(-2, -1))
    return res.astype(x.dtype)


def _tol(dtype):
    return {"rtol": 1e-4, "atol": 1e-5} if dtype == "float32" else {}


def _rand(*shape, dtype="float64"):
    return RNG.standard_normal(shape).astype(dtype)


# -- conv2d / conv1d -----------------------------------------------------------------------------
# (C_in, C_out, groups, kernel, stride, padding (as passed), pads (t, b, l, r), dilation)
CONV_CASES = [
    (3, 4, 1, (3, 3), 1, 0, (0, 0, 0, 0), 1),
    (4, 6, 2, (3, 2), 2, 1, (1, 1, 1, 1), 1),
    (2, 3, 1, (3, 3), (2, 1), (1, 2), (1, 1, 2, 2), (1, 2)),
    (4, 4, 4, (2, 2), 1, "same", (0, 1, 0, 1), 1),
    (2, 2, 1, (3, 3), 1, "same", (2, 2, 2, 2), 2),
    (3, 2, 1, (1, 1), 1, "valid", (0, 0, 0, 0), 1),
]


@pytest.mark.parametrize("case", CONV_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_conv2d_matches_loops(backend, case, dtype):
    skip_unless_dtype(backend, dtype)
    cin, cout, g, k, s, p, pads, d = case
    x, w, b = _rand(2, cin, 6, 7, dtype=dtype), _rand(cout, cin // g, *k, dtype=dtype), \
        _rand(cout, dtype=dtype)
    pair = (lambda v: (v, v) if isinstance(v, int) else v)
    ref = np_conv2d(x, w, b, pair(s), pads, pair(d), g)
    out = F.conv2d(vtl.asarray(x), vtl.asarray(w), vtl.asarray(b), s, p, d, g)
    assert_close(out, ref, **_tol(dtype))
    # unbatched input, no bias
    out1 = F.conv2d(vtl.asarray(x[1]), vtl.asarray(w), None, s, p, d, g)
    assert_close(out1, np_conv2d(x[1:], w, None, pair(s), pads, pair(d), g)[0], **_tol(dtype))


@pytest.mark.parametrize("case", [(4, 6, 2, 3, 2, 1, 1), (2, 3, 1, 2, 1, "same", 2),
                                  (3, 3, 3, 1, 1, 0, 1)])
def test_conv1d_matches_loops(backend, case):
    cin, cout, g, k, s, p, d = case
    x, w, b = _rand(2, cin, 9), _rand(cout, cin // g, k), _rand(cout)
    if p == "same":
        total = d * (k - 1)
        pads = (0, 0, total // 2, total - total // 2)
    else:
        pads = (0, 0, p, p)
    ref = np_conv2d(x[:, :, None], w[:, :, None], b, (1, s), pads, (1, d), g)[:, :, 0]
    assert_close(F.conv1d(vtl.asarray(x), vtl.asarray(w), vtl.asarray(b), s, p, d, g), ref)
    assert_close(F.conv1d(vtl.asarray(x[0]), vtl.asarray(w), None, s, p, d, g),
                 ref[0] - b[:, None], rtol=1e-10, atol=1e-12)


@given(data=st.data())
def test_conv2d_and_pools_random_configurations(backend, data):
    """Random shapes, strides, paddings, dilations and groups against the loops."""
    draw = data.draw
    g = draw(st.integers(1, 2), label="groups")
    cin, cout = g * draw(st.integers(1, 2)), g * draw(st.integers(1, 2))
    k = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    s = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    d = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    p = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    h = draw(st.integers(d[0] * (k[0] - 1) + 1, 7))
    w = draw(st.integers(d[1] * (k[1] - 1) + 1, 7))
    dtype = draw(st.sampled_from(["float32", "float64"]))
    skip_unless_dtype(backend, dtype)
    x = _rand(draw(st.integers(1, 2)), cin, h, w, dtype=dtype)
    wt = _rand(cout, cin // g, *k, dtype=dtype)
    ref = np_conv2d(x, wt, None, s, (p[0], p[0], p[1], p[1]), d, g)
    assert_close(F.conv2d(vtl.asarray(x), vtl.asarray(wt), None, s, p, d, g), ref, **_tol(dtype))
    pp = (min(p[0], k[0] // 2), min(p[1], k[1] // 2))
    ceil = draw(st.booleans())
    ref, _ = np_max_pool2d(x, k, s, pp, d, ceil)
    assert_close(F.max_pool2d(vtl.asarray(x), k, s, pp, d, ceil), ref)
    cip = draw(st.booleans(), label="count_include_pad")
    assert_close(F.avg_pool2d(vtl.asarray(x), k, s, pp, ceil, cip),
                 np_avg_pool2d(x, k, s, pp, ceil, cip), **_tol(dtype))


# (C_in, C_out, groups, kernel, stride, padding, output_padding, dilation)
CONVT_CASES = [
    (3, 2, 1, (3, 3), (1, 1), (0, 0), (0, 0), (1, 1)),
    (4, 6, 2, (3, 2), (2, 2), (1, 0), (1, 1), (1, 1)),
    (2, 3, 1, (2, 3), (3, 2), (0, 1), (2, 0), (1, 2)),
    (2, 2, 2, (3, 3), (1, 1), (2, 2), (0, 0), (1, 1)),
]


@pytest.mark.parametrize("case", CONVT_CASES)
def test_conv_transpose2d_matches_loops(backend, case):
    cin, cout, g, k, s, p, op, d = case
    x, w, b = _rand(2, cin, 4, 5), _rand(cin, cout // g, *k), _rand(cout)
    ref = np_conv_transpose2d(x, w, b, s, p, op, g, d)
    assert_close(F.conv_transpose2d(vtl.asarray(x), vtl.asarray(w), vtl.asarray(b), s, p, op,
                                    g, d), ref)
    ref1 = np_conv_transpose2d(x[:1], w, None, s, p, op, g, d)[0]
    assert_close(F.conv_transpose2d(vtl.asarray(x[0]), vtl.asarray(w), None, s, p, op, g, d),
                 ref1)


def test_conv_transpose1d_matches_loops(backend):
    x, w = _rand(2, 4, 6), _rand(4, 3, 3)
    ref = np_conv_transpose2d(x[:, :, None], w[:, :, None], None, (1, 2), (0, 1), (0, 1), 2,
                              (1, 1))[:, :, 0]
    assert_close(F.conv_transpose1d(vtl.asarray(x), vtl.asarray(w), None, 2, 1, 1, 2), ref)


def test_conv_transpose_is_the_adjoint_of_conv(backend):
    """<conv(x, w), y> == <x, conv_transpose(y, w)>: the defining identity."""
    x, w = _rand(2, 4, 7, 6), _rand(6, 2, 3, 3)
    y = F.conv2d(vtl.asarray(x), vtl.asarray(w), stride=2, padding=1, groups=2)
    g = _rand(*y.shape)
    xt = F.conv_transpose2d(vtl.asarray(g), vtl.asarray(w), stride=2, padding=1,
                            output_padding=(0, 1), groups=2)
    assert xt.shape == x.shape
    np.testing.assert_allclose(np.sum(to_numpy(y) * g), np.sum(x * to_numpy(xt)), rtol=1e-10)


def test_conv_gradients_finite_differences():
    x, w, b = _rand(2, 4, 5, 5), _rand(4, 2, 3, 2), _rand(4)
    check_grad(lambda x, w, b: F.conv2d(x, w, b, (2, 1), 1, (1, 2), 2), x, w, b)
    check_grad(lambda x, w: F.conv2d(x, w, padding="same"), x[:1], _rand(3, 4, 2, 2))
    check_grad(lambda x, w, b: F.conv1d(x, w, b, 2, 1), x[:, :, 0], _rand(3, 4, 3), b[:3])
    check_grad(lambda x, w, b: F.conv_transpose2d(x, w, b, 2, 1, 1, 2), x[:1], _rand(4, 1, 3, 3),
               b[:2])
    check_grad(lambda x, w: F.conv_transpose1d(x, w, None, 2), x[:1, :, 0], _rand(4, 2, 2))


def test_conv2d_second_order_gradients():
    """d/dx of the gradient (create_graph): conv2d composes differentiable ops."""
    w = _rand(3, 2, 2, 2)

    def grad_x(x):
        if not x.requires_grad:  # the finite-difference evaluations pass plain tensors
            x = vtl.asarray(x, requires_grad=True)
        wt = vtl.asarray(w, backend="numpy")
        y = F.conv2d(x, wt, padding=1)
        (gx,) = vtl.autograd.grad(vtl.sum(y * y * y), [x], create_graph=True)
        return gx

    check_grad(grad_x, _rand(1, 2, 3, 3))


def test_conv_gradients_match_numpy_backend(backend):
    x, w, b = _rand(2, 4, 5, 6), _rand(6, 2, 3, 3), _rand(6)
    check_grad_matches_numpy(lambda x, w, b: F.conv2d(x, w, b, 1, 1, 1, 2), backend, x, w, b)
    check_grad_matches_numpy(lambda x, w: F.conv_transpose2d(x, w, None, 2, 1), backend,
                             x[:, :, :3], _rand(4, 2, 3, 3))


def test_conv_errors(backend):
    x = vtl.asarray(_rand(2, 3, 5, 5))
    w = vtl.asarray(_rand(4, 3, 3, 3))
    with pytest.raises(ValueError, match=r"conv2d\(\): input of shape \(2, 5, 5, 5\) has 5 "
                                         r"channels, but weight of shape \(4, 3, 3, 3\)"):
        F.conv2d(vtl.asarray(_rand(2, 5, 5, 5)), w)
    with pytest.raises(ValueError, match=r"conv2d\(\): expected a 3-D \(unbatched\) or 4-D"):
        F.conv2d(vtl.asarray(_rand(5, 5)), w)
    with pytest.raises(ValueError, match="weight must be 4-D"):
        F.conv2d(x, vtl.asarray(_rand(4, 3, 3)))
    with pytest.raises(ValueError, match="not supported for strided"):
        F.conv2d(x, w, stride=2, padding="same")
    with pytest.raises(ValueError, match="smaller than the dilated kernel"):
        F.conv2d(x, w, dilation=3)
    with pytest.raises(ValueError, match=r"bias must have shape \(4,\)"):
        F.conv2d(x, w, vtl.asarray(_rand(3)))
    with pytest.raises(ValueError, match="divisible by groups=2"):
        F.conv2d(vtl.asarray(_rand(2, 6, 5, 5)), vtl.asarray(_rand(3, 3, 3, 3)), groups=2)
    with pytest.raises(ValueError, match="padding must be 'valid', 'same'"):
        F.conv2d(x, w, padding="full")
    with pytest.raises(ValueError, match="stride must be >= 1"):
        F.conv2d(x, w, stride=0)
    with pytest.raises(ValueError, match="output_padding"):
        F.conv_transpose2d(x, vtl.asarray(_rand(3, 2, 3, 3)), stride=2, output_padding=2)
    with pytest.raises(TypeError, match="stride must be an int or a tuple"):
        F.conv1d(x[0, :, 0], vtl.asarray(_rand(2, 3, 2)), stride=1.5)


def test_conv2d_backend_kernel_hook(backend):
    """A backend-registered conv2d kernel is used and receives normalised arguments."""
    x, w = vtl.asarray(_rand(1, 2, 4, 4)), vtl.asarray(_rand(3, 2, 3, 3))
    be = x.device.backend
    calls = []

    class Kernel:
        def supports(self, dtype):
            return True

        def forward(self, inp, weight, bias, stride, padding, dilation, groups):
            calls.append((tuple(inp.shape), stride, padding, dilation, groups))
            return be.xp.zeros((1, 3, 4, 4), dtype=inp.dtype), None

    saved = be._kernels.get("conv2d")
    be._kernels["conv2d"] = Kernel()
    try:
        out = F.conv2d(x[0], w, padding="same")
    finally:
        if saved is None:
            del be._kernels["conv2d"]
        else:
            be._kernels["conv2d"] = saved
    assert calls == [((1, 2, 4, 4), (1, 1), (1, 1, 1, 1), (1, 1), 1)]
    assert out.shape == (3, 4, 4)


# -- pooling --------------------------------------------------------------------------------------
POOL_CASES = [  # kernel, stride, padding, dilation, ceil_mode
    ((2, 2), None, (0, 0), (1, 1), False),
    ((3, 3), (2, 2), (1, 1), (1, 1), False),
    ((3, 2), (2, 3), (1, 0), (1, 1), True),
    ((2, 3), (1, 2), (1, 1), (2, 1), True),
    ((3, 3), (3, 3), (0, 1), (1, 1), True),
]


@pytest.mark.parametrize("case", POOL_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_max_pool2d_matches_loops(backend, case, dtype):
    skip_unless_dtype(backend, dtype)
    k, s, p, d, ceil = case
    x = _rand(2, 3, 7, 8, dtype=dtype)
    ref, ridx = np_max_pool2d(x, k, s or k, p, d, ceil)
    out, idx = F.max_pool2d(vtl.asarray(x), k, s, p, d, ceil, return_indices=True)
    assert_close(out, ref)
    np.testing.assert_array_equal(to_numpy(idx), ridx)
    assert_close(F.max_pool2d(vtl.asarray(x[0]), k, s, p, d, ceil), ref[0])


@pytest.mark.parametrize("case", POOL_CASES)
@pytest.mark.parametrize("count_include_pad", [True, False])
def test_avg_pool2d_matches_loops(backend, case, count_include_pad):
    k, s, p, _, ceil = case
    x = _rand(2, 3, 7, 8)
    ref = np_avg_pool2d(x, k, s or k, p, ceil, count_include_pad)
    assert_close(F.avg_pool2d(vtl.asarray(x), k, s, p, ceil, count_include_pad), ref)
    ref = np_avg_pool2d(x, k, s or k, p, ceil, count_include_pad, divisor=5)
    assert_close(F.avg_pool2d(vtl.asarray(x), k, s, p, ceil, count_include_pad, 5), ref)


@pytest.mark.parametrize("out", [(1, 1), (2, 3), (3, 5), (7, 8), (5, None), 4])
def test_adaptive_avg_pool2d_matches_loops(backend, out):
    x = _rand(2, 3, 7, 8)
    full = (out, out) if isinstance(out, int) else (out[0], 8 if out[1] is None else out[1])
    ref = np_adaptive_avg_pool2d(x, full)
    assert_close(F.adaptive_avg_pool2d(vtl.asarray(x), out), ref)
    assert_close(nn.AdaptiveAvgPool2d(out)(vtl.asarray(x[0])), ref[0])


def test_pool1d_matches_loops(backend):
    x = _rand(2, 3, 9)
    ref, ridx = np_max_pool2d(x[:, :, None], (1, 3), (1, 2), (0, 1), (1, 2), True)
    out, idx = F.max_pool1d(vtl.asarray(x), 3, 2, 1, 2, True, return_indices=True)
    assert_close(out, ref[:, :, 0])
    np.testing.assert_array_equal(to_numpy(idx), ridx[:, :, 0])
    ref = np_avg_pool2d(x[:, :, None], (1, 3), (1, 2), (0, 1), True, False)[:, :, 0]
    assert_close(F.avg_pool1d(vtl.asarray(x), 3, 2, 1, True, False), ref)
    assert_close(F.adaptive_avg_pool1d(vtl.asarray(x), 4),
                 np_adaptive_avg_pool2d(x[:, :, None], (1, 4))[:, :, 0])


def test_max_pool2d_ties_go_to_the_first_and_nan_propagates(backend):
    x = vtl.asarray(np.zeros((1, 1, 3, 3)), requires_grad=True)
    vtl.sum(F.max_pool2d(x, 2, 1)).backward()
    expect = np.array([[1.0, 1, 0], [1, 1, 0], [0, 0, 0]])  # each window's top-left element
    assert_close(x.grad[0, 0], expect)
    xn = np.arange(16.0).reshape(1, 1, 4, 4)
    xn[0, 0, 0, 1] = np.nan
    out = to_numpy(F.max_pool2d(vtl.asarray(xn), 2))
    assert np.isnan(out[0, 0, 0, 0]) and out[0, 0, 1, 1] == 15.0
    # -inf everywhere: the maximum is -inf, not the padding
    out = F.max_pool2d(vtl.asarray(np.full((1, 1, 2, 2), -np.inf)), 2, padding=1)
    assert np.all(to_numpy(out) == -np.inf)


def test_pool_gradients_finite_differences():
    x = RNG.permutation(np.linspace(-2, 2, 2 * 2 * 5 * 6)).reshape(2, 2, 5, 6)  # no ties
    check_grad(lambda x: F.max_pool2d(x, (3, 2), (2, 1), 1, (1, 2), True), x)
    check_grad(lambda x: F.max_pool1d(x, 2, 1, 1), x[:, :, 0])
    check_grad(lambda x: F.avg_pool2d(x, 3, 2, 1, True, False), x)
    check_grad(lambda x: F.avg_pool1d(x, 3, 2, 1), x[:, :, 0])
    check_grad(lambda x: F.adaptive_avg_pool2d(x, (3, 4)), x)
    check_grad(lambda x: F.adaptive_avg_pool1d(x, 4), x[:, :, 0])


def test_pool_gradients_match_numpy_backend(backend):
    x = RNG.permutation(np.linspace(-2, 2, 2 * 2 * 5 * 6)).reshape(2, 2, 5, 6)
    check_grad_matches_numpy(lambda x: F.max_pool2d(x, 3, 2, 1), backend, x)
    check_grad_matches_numpy(lambda x: F.avg_pool2d(x, 3, 2, 1, True), backend, x)
    check_grad_matches_numpy(lambda x: F.adaptive_avg_pool2d(x, 3), backend, x)


def test_pool_errors(backend):
    x = vtl.asarray(_rand(1, 2, 4, 4))
    with pytest.raises(ValueError, match="at most half of the kernel size"):
        F.max_pool2d(x, 2, padding=2)
    with pytest.raises(ValueError, match=r"expected a 3-D \(unbatched\) or 4-D"):
        F.avg_pool2d(vtl.asarray(_rand(4, 4)), 2)
    with pytest.raises(ValueError, match="too small"):
        F.max_pool2d(x, 5)
    with pytest.raises(TypeError, match="real floating-point"):
        F.max_pool2d(vtl.asarray(np.ones((1, 1, 4, 4), np.int64)), 2)
    with pytest.raises(ValueError, match="cannot pool"):
        F.adaptive_avg_pool2d(x, 0)
    with pytest.raises(ValueError, match=r"MaxPool2d\(kernel_size=5.*too small"):
        nn.MaxPool2d(5)(x)
    with pytest.raises(ValueError, match=r"AvgPool2d\(kernel_size=3.*\(1, 2, 2, 2\)"):
        nn.AvgPool2d(3)(vtl.asarray(_rand(1, 2, 2, 2)))


def test_pool_modules(backend):
    x = _rand(2, 3, 6, 7)
    ref, _ = np_max_pool2d(x, (3, 3), (2, 2), (1, 1), (1, 1), True)
    assert_close(nn.MaxPool2d(3, 2, 1, ceil_mode=True)(vtl.asarray(x)), ref)
    out, idx = nn.MaxPool2d(2, return_indices=True)(vtl.asarray(x))
    assert out.shape == idx.shape == (2, 3, 3, 3)
    assert_close(nn.AvgPool2d(2, 1, 1, count_include_pad=False)(vtl.asarray(x)),
                 np_avg_pool2d(x, (2, 2), (1, 1), (1, 1), False, False))
    assert_close(nn.MaxPool1d(2)(vtl.asarray(x[0])),
                 np_max_pool2d(x[0][:, :, None], (1, 2), (1, 2))[0][:, :, 0])
    assert_close(nn.AvgPool1d(3, 1, 1)(vtl.asarray(x[0])),
                 np_avg_pool2d(x[0][:, :, None], (1, 3), (1, 1), (0, 1))[:, :, 0])
    assert_close(nn.AdaptiveAvgPool1d(2)(vtl.asarray(x[0])),
                 np_adaptive_avg_pool2d(x[0][:, :, None], (1, 2))[:, :, 0])
    assert "kernel_size=3" in repr(nn.MaxPool2d(3))
    assert nn.MaxPool2d(3).state_dict() == {}


# -- modules ---------------------------------------------------------------------------------------
def test_conv2d_module_forward_init_and_state_dict(backend):
    vtl.random.manual_seed(0)
    m = nn.Conv2d(4, 6, (3, 2), stride=2, padding=1, groups=2)
    assert m.weight.shape == (6, 2, 3, 2) and m.bias.shape == (6,)
    fan_in = 2 * 3 * 2
    bound = 1 / math.sqrt(fan_in)  # kaiming_uniform(a=sqrt(5)) and the bias share this bound
    w, b = to_numpy(m.weight), to_numpy(m.bias)
    assert np.all(np.abs(w) <= bound) and np.all(np.abs(b) <= bound)
    assert w.std() > bound / 3  # really drawn, not constant
    x = _rand(2, 4, 5, 5, dtype="float32")
    ref = np_conv2d(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64),
                    (2, 2), (1, 1, 1, 1), (1, 1), 2)
    assert_close(m(vtl.asarray(x)), ref.astype(np.float32), rtol=1e-4, atol=1e-5)
    sd = m.state_dict()
    assert list(sd) == ["weight", "bias"]
    m2 = nn.Conv2d(4, 6, (3, 2), stride=2, padding=1, groups=2)
    m2.load_state_dict(sd)
    assert_close(m2(vtl.asarray(x)), to_numpy(m(vtl.asarray(x))))
    assert "Conv2d(4, 6, kernel_size=(3, 2), stride=(2, 2), padding=(1, 1), groups=2)" \
        == repr(m)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_conv_padding_modes(backend, mode):
    m = nn.Conv2d(2, 3, 3, padding=(1, 2), padding_mode=mode).double()
    x = _rand(1, 2, 4, 5)
    npmode = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode]
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (2, 2)), mode=npmode)
    ref = np_conv2d(xp, to_numpy(m.weight), to_numpy(m.bias))
    assert_close(m(vtl.asarray(x)), ref)
    m1 = nn.Conv1d(2, 3, 3, padding="same", padding_mode=mode, dilation=2).double()
    x1 = _rand(1, 2, 6)
    xp1 = np.pad(x1, ((0, 0), (0, 0), (2, 2)), mode=npmode)
    ref1 = np_conv2d(xp1[:, :, None], to_numpy(m1.weight)[:, :, None], to_numpy(m1.bias),
                     dil=(1, 2))[:, :, 0]
    assert_close(m1(vtl.asarray(x1)), ref1)


def test_conv_transpose_module(backend):
    m = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, groups=2).double()
    assert m.weight.shape == (4, 3, 3, 3)
    bound = 1 / math.sqrt(3 * 9)  # fan_in from the weight: shape[1] * k * k
    assert np.all(np.abs(to_numpy(m.weight)) <= bound)
    x = _rand(2, 4, 3, 3)
    for size, op in (((5, 5), (0, 0)), ((6, 5), (1, 0)), ((2, 4, 6, 6), (1, 1))):
        out = m(vtl.asarray(x), output_size=size)
        ref = np_conv_transpose2d(x, to_numpy(m.weight), to_numpy(m.bias), (2, 2), (1, 1), op,
                                  2)
        assert_close(out, ref)
    with pytest.raises(ValueError, match=r"ConvTranspose2d\(4, 6.*requested output size"):
        m(vtl.asarray(x), output_size=(9, 9))
    m1 = nn.ConvTranspose1d(2, 2, 2, stride=2).double()
    x1 = _rand(1, 2, 3)
    ref1 = np_conv_transpose2d(x1[:, :, None], to_numpy(m1.weight)[:, :, None],
                               to_numpy(m1.bias), (1, 2))[:, :, 0]
    assert_close(m1(vtl.asarray(x1)), ref1)
    with pytest.raises(ValueError, match="zeros"):
        nn.ConvTranspose2d(2, 2, 3, padding_mode="reflect")


def test_conv_module_errors_name_the_layer(backend):
    m = nn.Conv2d(3, 8, 3)
    with pytest.raises(ValueError, match=r"Conv2d\(3, 8, kernel_size=\(3, 3\), groups=1\): "
                                         r"expected input with 3 channels.*\(2, 4, 8, 8\)"):
        m(vtl.ones((2, 4, 8, 8)))
    with pytest.raises(ValueError, match=r"Conv2d\(3, 8.*4-D \(batched\) input, got input of "
                                         r"shape \(8, 8\)"):
        m(vtl.ones((8, 8)))
    with pytest.raises(ValueError, match=r"Conv1d\(3, 8.*expected input with 3 channels"):
        nn.Conv1d(3, 8, 3)(vtl.ones((2, 4, 8)))
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv2d(3, 8, 3, groups=2)
    with pytest.raises(ValueError, match="padding_mode"):
        nn.Conv2d(3, 8, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match="strided"):
        nn.Conv2d(3, 8, 3, stride=2, padding="same")


def check_module_grad(m, *xs, fn=None, eps=1e-6, rtol=1e-5, atol=1e-6):
    """Finite differences (float64) of ``sum(fn(m, *xs) * v)`` with respect to every
    input and every parameter of ``m``."""
    fn = fn or (lambda mod, *ts: mod(*ts))
    xs = [np.array(x, dtype=np.float64) for x in xs]
    ts = [vtl.asarray(x.copy(), backend="numpy", requires_grad=True) for x in xs]
    params = list(m.parameters())
    out = fn(m, *ts)
    v = np.random.default_rng(0).standard_normal(out.shape)
    grads = vtl.autograd.grad(vtl.sum(out * vtl.asarray(v)), ts + params, allow_unused=True)

    def value():
        with vtl.no_grad():
            return float(vtl.sum(fn(m, *[vtl.asarray(x.copy()) for x in xs]) * vtl.asarray(v)))

    for k, g in enumerate(grads):
        if k < len(xs):
            flat = xs[k].reshape(-1)
            get, put = (lambda j, f=flat: f[j]), (lambda j, val, f=flat: f.__setitem__(j, val))
        else:
            p = params[k - len(xs)]
            host = p.numpy().reshape(-1).copy()

            def put(j, val, p=p, host=host):
                host[j] = val
                with vtl.no_grad():
                    p[...] = vtl.asarray(host.reshape(p.shape))

            get = (lambda j, h=host: h[j])
            flat = host
        num = np.zeros(flat.size)
        for j in range(flat.size):
            orig = get(j)
            put(j, orig + eps)
            plus = value()
            put(j, orig - eps)
            minus = value()
            put(j, orig)
            num[j] = (plus - minus) / (2 * eps)
        a = np.zeros(flat.size) if g is None else to_numpy(g).reshape(-1)
        np.testing.assert_allclose(a, num, rtol=rtol, atol=atol,
                                   err_msg=f"gradient {k} disagrees with finite differences")


def test_conv_module_gradients():
    vtl.random.manual_seed(5)
    check_module_grad(nn.Conv2d(4, 2, (2, 3), stride=(1, 2), padding=1, groups=2).double(),
                      _rand(1, 4, 3, 4))
    check_module_grad(nn.Conv2d(2, 2, 3, padding="same", padding_mode="reflect").double(),
                      _rand(1, 2, 3, 3))
    check_module_grad(nn.Conv1d(2, 3, 2).double(), _rand(2, 2, 4))
    check_module_grad(nn.ConvTranspose2d(2, 2, 2, stride=2).double(), _rand(1, 2, 2, 2))
    check_module_grad(nn.ConvTranspose1d(2, 1, 3, padding=1).double(), _rand(1, 2, 3))


def test_small_cnn_trains(backend):
    """A Conv-BN-ReLU-Pool-Linear net lowers its loss on a fixed batch."""
    vtl.random.manual_seed(3)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 4 * 4, 2))
    x = vtl.asarray(_rand(8, 1, 8, 8, dtype="float32"))
    y = vtl.asarray(np.array([0, 1] * 4))
    params = list(model.parameters())
    losses = []
    for _ in range(15):
        loss = F.cross_entropy(model(x), y)
        for p in params:
            p.grad = None
        loss.backward()
        with vtl.no_grad():
            for p in params:
                p[...] = p - 0.1 * p.grad
        losses.append(float(loss))
    assert losses[-1] < 0.7 * losses[0]


# -- array-api-strict and PyTorch ------------------------------------------------------------------
xs = pytest.importorskip("array_api_strict")

STRICT_CASES = {
    "conv2d": lambda x, w: F.conv2d(x, w, None, 1, "same"),
    "conv2d_groups": lambda x, w: F.conv2d(x[:, :2, ...], w[:2, :1, ...], None, 2, 1, 1, 2),
    "conv_transpose2d": lambda x, w: F.conv_transpose2d(x, w, None, 2, 1, 1),
    "max_pool2d": lambda x, w: F.max_pool2d(x, 3, 2, 1, ceil_mode=True),
    "avg_pool2d": lambda x, w: F.avg_pool2d(x, 3, 2, 1, True, False),
    "adaptive_avg_pool2d": lambda x, w: F.adaptive_avg_pool2d(x, (3, 2)),
}


@pytest.mark.parametrize("name", sorted(STRICT_CASES))
def test_conv_pool_on_array_api_strict(name):
    # array_api_strict's own argmax cannot return its int32 index on the no_x64 device
    dev = xs.Device("CPU_DEVICE" if name == "max_pool2d" else "no_x64")
    x_np, w_np = _rand(2, 3, 5, 6, dtype="float32"), _rand(3, 3, 3, 3, dtype="float32")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = STRICT_CASES[name](xs.asarray(x_np, device=dev), xs.asarray(w_np, device=dev))
    assert out.device == dev
    host = np.asarray(out.to_device(xs.Device("CPU_DEVICE")))
    expect = to_numpy(STRICT_CASES[name](vtl.asarray(x_np, backend="numpy"),
                                         vtl.asarray(w_np, backend="numpy")))
    np.testing.assert_allclose(host, expect, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(torch is None, reason="PyTorch not installed")
def test_against_pytorch():
    x, w, b = _rand(2, 4, 7, 6), _rand(6, 2, 3, 2), _rand(6)
    T = torch.tensor
    assert_close(F.conv2d(vtl.asarray(x), vtl.asarray(w), vtl.asarray(b), 2, (1, 0), (2, 1), 2),
                 TF.conv2d(T(x), T(w), T(b), 2, (1, 0), (2, 1), 2).numpy())
    wt = _rand(4, 3, 3, 2)
    assert_close(F.conv_transpose2d(vtl.asarray(x), vtl.asarray(wt), None, 2, 1, 1, 2),
                 TF.conv_transpose2d(T(x), T(wt), None, 2, 1, 1, 2).numpy())
    for ceil in (False, True):
        tv, ti = TF.max_pool2d(T(x), 3, 2, 1, 1, ceil, True)
        vv, vi = F.max_pool2d(vtl.asarray(x), 3, 2, 1, 1, ceil, True)
        assert_close(vv, tv.numpy())
        np.testing.assert_array_equal(to_numpy(vi), ti.numpy())
        assert_close(F.avg_pool2d(vtl.asarray(x), 3, 2, 1, ceil, False),
                     TF.avg_pool2d(T(x), 3, 2, 1, ceil, False).numpy())
    assert_close(F.adaptive_avg_pool2d(vtl.asarray(x), (4, 5)),
                 TF.adaptive_avg_pool2d(T(x), (4, 5)).numpy())
    tm = torch.nn.Conv2d(4, 6, 3, padding="same", padding_mode="circular").double()
    vm = nn.Conv2d(4, 6, 3, padding="same", padding_mode="circular").double()
    vm.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    assert_close(vm(vtl.asarray(x)), tm(T(x)).detach().numpy())


# -- the im2col gather: index cache, fill rows, scatter-add --------------------------------------
@contextlib.contextmanager
def portable_conv(backend_name=None):
    """Run conv2d and the pools through the portable gather path (the backend's conv2d and
    pool2d kernels removed)."""
    be = vtl.backends.get(backend_name or vtl.asarray(1.0).device.backend.name)
    saved = {k: be._kernels.pop(k) for k in ("conv2d", "pool2d") if k in be._kernels}
    try:
        yield
    finally:
        be._kernels.update(saved)


@pytest.fixture
def gather_path(backend):
    with portable_conv(backend):
        yield backend


def test_im2col_index_cache_separates_shapes_and_devices(gather_path):
    from vtl.nn.functional import _im2col

    w = _rand(4, 3, 3, 3)
    for shape in [(2, 3, 6, 7), (1, 3, 7, 6), (2, 3, 6, 7), (3, 3, 5, 5)]:
        x = _rand(*shape)
        got = F.conv2d(vtl.asarray(x), vtl.asarray(w), None, 1, 1)
        assert_close(got, np_conv2d(x, w, pad=(1, 1, 1, 1)), rtol=1e-4, atol=1e-5)
        # the same geometry from raw NumPy arrays (functional form without vtl) is its own entry
        raw = F.conv2d(x, w, None, 1, 1)
        assert isinstance(raw, np.ndarray)
        np.testing.assert_allclose(raw, np_conv2d(x, w, pad=(1, 1, 1, 1)), rtol=1e-10)
    dev = vtl.asarray(1.0).device
    keys = [k for k in _im2col._dev_cache if k[0] == "rows"]
    mine = [k for k in keys if k[2] is dev]
    assert {k[1][:3] for k in mine} >= {(2, 6, 7), (1, 7, 6), (3, 5, 5)}
    for k in mine:  # the cached index lives on this backend
        assert dev.backend.is_native(_im2col._dev_cache[k])
    assert len(_im2col._dev_cache) <= _im2col.CACHE_SIZE


def test_im2col_cache_is_bounded(monkeypatch):
    from vtl.nn.functional import _im2col

    monkeypatch.setattr(_im2col, "CACHE_SIZE", 3)
    with portable_conv("numpy"):
        for s in range(4, 10):
            x = _rand(1, 1, s, s)
            F.avg_pool2d(vtl.asarray(x, backend="numpy"), 2)
        assert len(_im2col._dev_cache) <= 3 and len(_im2col._host_cache) <= 3
        x = _rand(1, 2, 4, 4)  # an evicted geometry is rebuilt correctly
        assert_close(F.avg_pool2d(vtl.asarray(x, backend="numpy"), 2),
                     np_avg_pool2d(x, (2, 2), (2, 2)))


def test_im2col_spread_fill_rows_gradients(monkeypatch):
    """Padding taps spread over few fill rows (many taps per row) still give exact
    values and gradients."""
    from vtl.nn.functional import _im2col

    monkeypatch.setattr(_im2col, "MAX_FILL", 2)
    monkeypatch.setattr(_im2col, "_host_cache", type(_im2col._host_cache)())
    monkeypatch.setattr(_im2col, "_dev_cache", type(_im2col._dev_cache)())
    x, w = _rand(2, 2, 4, 5), _rand(3, 2, 3, 3)
    with portable_conv("numpy"):
        assert_close(F.conv2d(vtl.asarray(x, backend="numpy"), vtl.asarray(w, backend="numpy"),
                              None, 1, 2), np_conv2d(x, w, pad=(2, 2, 2, 2)))
        check_grad(lambda x, w: F.conv2d(x, w, None, 1, 2), x, w)
        check_grad(lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True), x)
        check_grad(lambda x: F.avg_pool2d(x, 3, 1, 1, False, False), x)
    assert 0 < max(f for _, f, _ in _im2col._host_cache.values()) <= 2


def test_conv_pool_outputs_chain_without_copies(backend):
    """Conv/pool results are channels-last views; every later op reads them right."""
    x, w1, w2 = _rand(2, 3, 8, 8), _rand(4, 3, 3, 3), _rand(5, 4, 2, 2)
    y = F.max_pool2d(vtl.nn.functional.relu(F.conv2d(vtl.asarray(x), vtl.asarray(w1),
                                                      padding=1)), 2)
    z = F.conv2d(y, vtl.asarray(w2), stride=2)
    ry = np_max_pool2d(np.maximum(np_conv2d(x, w1, pad=(1, 1, 1, 1)), 0), (2, 2), (2, 2))[0]
    assert_close(y, ry)
    assert_close(z, np_conv2d(ry, w2, stride=(2, 2)))
    assert_close(vtl.reshape(z, (2, -1)), np_conv2d(ry, w2, stride=(2, 2)).reshape(2, -1))


def test_max_pool2d_second_order_gradients():
    def grad_x(x):
        if not x.requires_grad:
            x = vtl.asarray(x, requires_grad=True)
        y = F.max_pool2d(x, 2, 1, 1)
        (gx,) = vtl.autograd.grad(vtl.sum(y * y * y), [x], create_graph=True)
        return gx

    check_grad(grad_x, RNG.permutation(18).reshape(1, 2, 3, 3) / 7.0)


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128"])
@pytest.mark.parametrize("row", [(), (3,), (5, 7)])
def test_numpy_scatter_add_equals_add_at(dtype, row):
    from vtl.backends.numpy.scatter import scatter_add

    rng = np.random.default_rng(7)
    for n, rows, repeat in [(300, 40, 0), (5000, 30, 0), (3000, 5000, 0), (2000, 50, 1500)]:
        idx = rng.integers(-rows, rows, n)
        idx[:repeat] = 3  # one index far more often than the rounds cover
        vals = rng.standard_normal((n, *row))
        if dtype.startswith("complex"):
            vals = vals + 1j * rng.standard_normal((n, *row))
        vals = vals.astype(dtype)
        want = rng.standard_normal((rows, *row)).astype(dtype)
        got = scatter_add(want.copy(), idx, vals)
        np.add.at(want, idx, vals)
        np.testing.assert_allclose(got, want, rtol=1e-4 if dtype == "float32" else 1e-10,
                                   atol=1e-3 if dtype == "float32" else 1e-10)


# (stride, padding, dilation, groups) for conv2d against torch, forward and gradients
TORCH_CONV = [(1, 0, 1, 1), (2, 1, 1, 1), ((2, 1), (0, 2), (2, 1), 2), (3, 2, 2, 4),
              (1, "same", (1, 3), 1), ((1, 2), "valid", 1, 4), (2, (3, 1), 1, 2)]


@pytest.mark.skipif(torch is None, reason="PyTorch not installed")
@pytest.mark.parametrize("case", TORCH_CONV)
def test_conv2d_combinations_against_pytorch(backend, case):
    s, p, d, g = case
    x, w, b = _rand(2, 4, 9, 8), _rand(8, 4 // g, 3, 2), _rand(8)
    xt, wt, bt = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    with warnings.catch_warnings():  # PyTorch's note on 'same' with an even kernel
        warnings.simplefilter("ignore")
        want = TF.conv2d(xt, wt, bt, s, p, d, g)
    gy = _rand(*want.shape)
    want.backward(torch.tensor(gy))
    vx, vw, vb = (vtl.asarray(a, requires_grad=True) for a in (x, w, b))
    got = F.conv2d(vx, vw, vb, s, p, d, g)
    assert_close(got, want.detach().numpy(), rtol=1e-9, atol=1e-10)
    got.backward(vtl.asarray(gy))
    for v, t in ((vx, xt), (vw, wt), (vb, bt)):
        assert_close(v.grad, t.grad.numpy(), rtol=1e-9, atol=1e-10)
    x1 = _rand(2, 4, 11)
    s1 = s if isinstance(s, int) else s[1]
    p1 = p if isinstance(p, (int, str)) else p[1]
    d1 = d if isinstance(d, int) else d[1]
    assert_close(F.conv1d(vtl.asarray(x1), vtl.asarray(w[..., 0]), vtl.asarray(b), s1, p1, d1, g),
                 TF.conv1d(torch.tensor(x1), torch.tensor(w[..., 0]), torch.tensor(b), s1, p1,
                           d1, g).numpy(), rtol=1e-9, atol=1e-10)


# (stride, padding, output_padding, groups, dilation) for conv_transpose2d against torch
TORCH_CONVT = [(1, 0, 0, 1, 1), (2, 1, 1, 1, 1), ((2, 3), (0, 2), (1, 2), 2, 1),
               (2, 3, 0, 2, 2), (3, (1, 4), (2, 0), 1, (1, 2))]


@pytest.mark.skipif(torch is None, reason="PyTorch not installed")
@pytest.mark.parametrize("case", TORCH_CONVT)
def test_conv_transpose2d_combinations_against_pytorch(backend, case):
    s, p, op, g, d = case
    x, w, b = _rand(2, 4, 4, 5), _rand(4, 6 // g, 3, 3), _rand(6)
    xt, wt, bt = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    want = TF.conv_transpose2d(xt, wt, bt, s, p, op, g, d)
    gy = _rand(*want.shape)
    want.backward(torch.tensor(gy))
    vx, vw, vb = (vtl.asarray(a, requires_grad=True) for a in (x, w, b))
    got = F.conv_transpose2d(vx, vw, vb, s, p, op, g, d)
    assert_close(got, want.detach().numpy(), rtol=1e-9, atol=1e-10)
    got.backward(vtl.asarray(gy))
    for v, t in ((vx, xt), (vw, wt), (vb, bt)):
        assert_close(v.grad, t.grad.numpy(), rtol=1e-9, atol=1e-10)


# (kernel, stride, padding, dilation, ceil_mode) for the pools against torch
TORCH_POOL = [(2, None, 0, 1, False), (3, 2, 1, 1, True), ((3, 2), (1, 2), (1, 0), (2, 1), False),
              (3, 3, 1, 2, True), ((2, 4), 1, (1, 2), 1, True)]


@pytest.mark.skipif(torch is None, reason="PyTorch not installed")
@pytest.mark.parametrize("case", TORCH_POOL)
def test_pools_combinations_against_pytorch(backend, case):
    k, s, p, d, ceil = case
    x = RNG.permutation(2 * 3 * 9 * 10).reshape(2, 3, 9, 10) / 10.0  # no ties
    x[0, 0, :4, :4] = 0.5  # ... but a block of ties: the first (row-major) one wins
    xt = torch.tensor(x, requires_grad=True)
    tv, ti = TF.max_pool2d(xt, k, s, p, d, ceil, True)
    gy = _rand(*tv.shape)
    tv.backward(torch.tensor(gy))
    vx = vtl.asarray(x, requires_grad=True)
    vv, vi = F.max_pool2d(vx, k, s, p, d, ceil, True)
    assert_close(vv, tv.detach().numpy())
    np.testing.assert_array_equal(to_numpy(vi), ti.numpy())
    vv.backward(vtl.asarray(gy))
    assert_close(vx.grad, xt.grad.numpy())
    if d == 1:
        for cip in (True, False):
            xt.grad = None
            ta = TF.avg_pool2d(xt, k, s, p, ceil, cip)
            ta.backward(torch.tensor(_rand(*ta.shape)) * 0 + 1)
            vx.grad = None
            va = F.avg_pool2d(vx, k, s, p, ceil, cip)
            vtl.sum(va).backward()
            assert_close(va, ta.detach().numpy())
            assert_close(vx.grad, xt.grad.numpy())
