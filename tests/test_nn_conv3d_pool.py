"""3-D convolutions and pooling, adaptive max pooling and power-average pooling: NumPy
loop references written here (PyTorch's documented formulas), float64 finite-difference
gradients (and a second-order check), PyTorch's conventions (ties, nan, ceil_mode
divisors, divisor_override, return_indices), the modules, error messages,
array-api-strict inputs, and PyTorch as an extra oracle when it is installed."""

from __future__ import annotations

import contextlib
import itertools
import math
import warnings

import numpy as np
import pytest
from helpers import assert_close, check_grad, check_grad_matches_numpy, skip_unless_dtype, to_numpy

import vtl
import vtl.nn.functional as F
from vtl import nn

try:
    import torch
    import torch.nn.functional as TF
except ImportError:  # pragma: no cover - torch is optional
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch not installed")

RNG = np.random.default_rng(3)


def _rand(*shape, dtype="float64"):
    return RNG.standard_normal(shape).astype(dtype)


def _tol(dtype):
    return {"rtol": 1e-4, "atol": 1e-5} if dtype == "float32" else {}


def _triple(v):
    return (v,) * 3 if isinstance(v, int) else tuple(v)


# -- NumPy references ------------------------------------------------------------------------
def np_conv3d(x, w, b=None, stride=1, pads=(0,) * 6, dil=1, groups=1):
    """Cross-correlation by one strided slice per (tap, input channel); ``pads`` are
    ``(lo, hi)`` per axis, depth first."""
    stride, dil = _triple(stride), _triple(dil)
    n, c = x.shape[:2]
    o, cg = w.shape[:2]
    ks = w.shape[2:]
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pads[2 * a], pads[2 * a + 1]) for a in range(3)])
    out_sz = [(xp.shape[2 + a] - dil[a] * (ks[a] - 1) - 1) // stride[a] + 1 for a in range(3)]
    og = o // groups
    out = np.zeros((n, o, *out_sz), np.float64)
    for oc in range(o):
        g = oc // og
        for ci in range(cg):
            for taps in itertools.product(*(range(k) for k in ks)):
                sl = tuple(slice(taps[a] * dil[a], taps[a] * dil[a]
                                 + stride[a] * (out_sz[a] - 1) + 1, stride[a]) for a in range(3))
                out[:, oc] += xp[(slice(None), g * cg + ci) + sl] * w[(oc, ci) + taps]
    if b is not None:
        out += b[None, :, None, None, None]
    return out.astype(x.dtype)


def np_conv_transpose3d(x, w, b=None, stride=1, pad=0, out_pad=0, groups=1, dil=1):
    """Every input element scatters ``x * w`` to ``i * stride - pad + tap * dil``."""
    stride, pad, out_pad, dil = map(_triple, (stride, pad, out_pad, dil))
    n, c = x.shape[:2]
    og = w.shape[1]
    ks = w.shape[2:]
    sp = x.shape[2:]
    full = [(sp[a] - 1) * stride[a] + dil[a] * (ks[a] - 1) + 1 + out_pad[a] for a in range(3)]
    out = np.zeros((n, og * groups, *full), np.float64)
    cg = c // groups
    for g in range(groups):
        xg = x[:, g * cg:(g + 1) * cg]
        for taps in itertools.product(*(range(k) for k in ks)):
            sl = tuple(slice(taps[a] * dil[a], taps[a] * dil[a] + stride[a] * (sp[a] - 1) + 1,
                             stride[a]) for a in range(3))
            contrib = np.einsum("ncdhw,co->nodhw", xg, w[(slice(g * cg, (g + 1) * cg),
                                                          slice(None)) + taps])
            out[(slice(None), slice(g * og, (g + 1) * og)) + sl] += contrib
    sizes = [full[a] - 2 * pad[a] for a in range(3)]
    out = out[(slice(None), slice(None)) + tuple(slice(pad[a], pad[a] + sizes[a])
                                                 for a in range(3))]
    if b is not None:
        out = out + b[None, :, None, None, None]
    return out.astype(x.dtype)


def _pool_size(size, k, s, p, d, ceil_mode):
    num = size + 2 * p - d * (k - 1) - 1
    out = (num + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def np_max_pool(x, k, s, p, d, ceil_mode=False):
    """N-D max pooling of ``(N, C, *spatial)``: values and flat row-major input indices;
    the first maximum in tap order wins, the first nan wins over everything."""
    nsp = len(k)
    sp = x.shape[2:]
    out_sz = [_pool_size(sp[a], k[a], s[a], p[a], d[a], ceil_mode) for a in range(nsp)]
    vals = np.zeros(x.shape[:2] + tuple(out_sz), x.dtype)
    idx = np.zeros(x.shape[:2] + tuple(out_sz), np.int64)
    for nc in itertools.product(*map(range, x.shape[:2])):
        for o in itertools.product(*map(range, out_sz)):
            best, bi = -np.inf, -1
            for t in itertools.product(*map(range, k)):
                pos = [o[a] * s[a] - p[a] + t[a] * d[a] for a in range(nsp)]
                if all(0 <= pos[a] < sp[a] for a in range(nsp)):
                    v = x[nc + tuple(pos)]
                    if bi < 0 or v > best or (np.isnan(v) and not np.isnan(best)):
                        best, bi = v, int(np.ravel_multi_index(pos, sp))
            vals[nc + o], idx[nc + o] = best, bi
    return vals, idx


def np_avg_pool(x, k, s, p, ceil_mode=False, count_include_pad=True, divisor=None):
    """N-D average pooling with PyTorch's divisors (per axis: the window clipped to the
    padded input; without the padding for ``count_include_pad=False``)."""
    nsp = len(k)
    sp = x.shape[2:]
    out_sz = [_pool_size(sp[a], k[a], s[a], p[a], 1, ceil_mode) for a in range(nsp)]
    out = np.zeros(x.shape[:2] + tuple(out_sz), np.float64)
    for o in itertools.product(*map(range, out_sz)):
        lo = [o[a] * s[a] - p[a] for a in range(nsp)]
        hi = [min(lo[a] + k[a], sp[a] + p[a]) for a in range(nsp)]
        pool = math.prod(hi[a] - lo[a] for a in range(nsp))
        lo = [max(v, 0) for v in lo]
        hi = [min(hi[a], sp[a]) for a in range(nsp)]
        win = x[(slice(None), slice(None)) + tuple(slice(lo[a], hi[a]) for a in range(nsp))]
        total = win.astype(np.float64).sum(axis=tuple(range(2, 2 + nsp)))
        if divisor is not None:
            div = divisor
        else:
            div = pool if count_include_pad else math.prod(hi[a] - lo[a] for a in range(nsp))
        out[(slice(None), slice(None)) + o] = total / div
    return out.astype(x.dtype)


def _adaptive_windows(size, out):
    return [((i * size) // out, math.ceil((i + 1) * size / out)) for i in range(out)]


def np_adaptive_max(x, out):
    """Adaptive max pooling of ``(N, C, *spatial)``: values and flat input indices."""
    sp = x.shape[2:]
    wins = [_adaptive_windows(sp[a], out[a]) for a in range(len(sp))]
    vals = np.zeros(x.shape[:2] + tuple(out), x.dtype)
    idx = np.zeros(x.shape[:2] + tuple(out), np.int64)
    for nc in itertools.product(*map(range, x.shape[:2])):
        for o in itertools.product(*map(range, out)):
            best, bi = -np.inf, -1
            for pos in itertools.product(*(range(*wins[a][o[a]]) for a in range(len(sp)))):
                v = x[nc + pos]
                if bi < 0 or v > best or (np.isnan(v) and not np.isnan(best)):
                    best, bi = v, int(np.ravel_multi_index(pos, sp))
            vals[nc + o], idx[nc + o] = best, bi
    return vals, idx


def np_adaptive_avg(x, out):
    sp = x.shape[2:]
    wins = [_adaptive_windows(sp[a], out[a]) for a in range(len(sp))]
    res = np.zeros(x.shape[:2] + tuple(out), np.float64)
    for o in itertools.product(*map(range, out)):
        sl = tuple(slice(*wins[a][o[a]]) for a in range(len(sp)))
        res[(slice(None), slice(None)) + o] = x[(slice(None), slice(None)) + sl].mean(
            axis=tuple(range(2, 2 + len(sp))))
    return res.astype(x.dtype)


def np_lp_pool(x, p, k, s=None, ceil_mode=False):
    """PyTorch's formula: ``(sign(a) * relu(|a|) * prod(k)) ** (1/p)``,
    ``a = avg_pool(x ** p)`` (no padding, padding counted)."""
    s = k if s is None else s
    a = np_avg_pool(x.astype(np.float64) ** p, k, s, (0,) * len(k), ceil_mode)
    return ((np.sign(a) * np.maximum(np.abs(a), 0) * math.prod(k)) ** (1.0 / p)).astype(x.dtype)


# -- conv3d / conv_transpose3d ---------------------------------------------------------------
# (C_in, C_out, groups, kernel, stride, padding (as passed), pads (lo, hi per axis), dilation)
CONV3D_CASES = [
    (2, 3, 1, (2, 2, 2), 1, 0, (0,) * 6, 1),
    (4, 6, 2, (3, 2, 2), (2, 1, 2), (1, 0, 1), (1, 1, 0, 0, 1, 1), 1),
    (2, 2, 1, (2, 3, 2), 1, (0, 1, 2), (0, 0, 1, 1, 2, 2), (2, 1, 1)),
    (3, 3, 3, (2, 3, 2), 1, "same", (0, 1, 1, 1, 1, 1), (1, 1, 2)),
    (2, 4, 2, (1, 1, 1), 1, "valid", (0,) * 6, 1),
]


@pytest.mark.parametrize("case", CONV3D_CASES)
def test_conv3d_matches_loops(backend, case):
    cin, cout, g, k, s, p, pads, d = case
    dtype = "float64" if backend == "numpy" else "float32"
    x, w, b = _rand(2, cin, 4, 5, 5, dtype=dtype), _rand(cout, cin // g, *k, dtype=dtype), \
        _rand(cout, dtype=dtype)
    ref = np_conv3d(x, w, b, s, pads, d, g)
    out = F.conv3d(vtl.asarray(x), vtl.asarray(w), vtl.asarray(b), s, p, d, g)
    assert_close(out, ref, **_tol(dtype))
    # unbatched input, no bias
    out1 = F.conv3d(vtl.asarray(x[1]), vtl.asarray(w), None, s, p, d, g)
    assert_close(out1, np_conv3d(x[1:], w, None, s, pads, d, g)[0], **_tol(dtype))


def test_conv3d_float64_on_every_backend(backend):
    skip_unless_dtype(backend, "float64")
    x, w = _rand(1, 2, 3, 4, 3), _rand(2, 2, 2, 2, 2)
    assert_close(F.conv3d(vtl.asarray(x), vtl.asarray(w), None, 1, 1),
                 np_conv3d(x, w, None, 1, (1,) * 6), rtol=1e-10, atol=1e-12)


# (C_in, C_out, groups, kernel, stride, padding, output_padding, dilation)
CONVT3D_CASES = [
    (2, 3, 1, (2, 2, 2), 1, 0, 0, 1),
    (4, 2, 2, (3, 2, 2), (2, 1, 2), (1, 0, 1), (1, 0, 1), 1),
    (2, 2, 1, (2, 3, 2), (3, 2, 1), (0, 1, 0), (2, 1, 0), (1, 2, 2)),
    (2, 2, 2, (3, 1, 2), 1, (2, 0, 1), 0, (2, 1, 1)),
]


@pytest.mark.parametrize("case", CONVT3D_CASES)
def test_conv_transpose3d_matches_loops(backend, case):
    cin, cout, g, k, s, p, op, d = case
    dtype = "float64" if backend == "numpy" else "float32"
    x, w, b = _rand(2, cin, 3, 2, 3, dtype=dtype), _rand(cin, cout // g, *k, dtype=dtype), \
        _rand(cout, dtype=dtype)
    ref = np_conv_transpose3d(x, w, b, s, p, op, g, d)
    out = F.conv_transpose3d(vtl.asarray(x), vtl.asarray(w), vtl.asarray(b), s, p, op, g, d)
    assert_close(out, ref, **_tol(dtype))
    out1 = F.conv_transpose3d(vtl.asarray(x[0]), vtl.asarray(w), None, s, p, op, g, d)
    assert_close(out1, np_conv_transpose3d(x[:1], w, None, s, p, op, g, d)[0], **_tol(dtype))


def test_conv_transpose3d_is_the_adjoint_of_conv3d(backend):
    """<conv3d(x, w), y> == <x, conv_transpose3d(y, w)>: the defining identity."""
    x, w = _rand(1, 4, 5, 4, 5, dtype="float32"), _rand(4, 2, 3, 2, 3, dtype="float32")
    kw = dict(stride=(2, 1, 2), padding=(1, 0, 1), dilation=(1, 2, 1), groups=2)
    y = F.conv3d(vtl.asarray(x), vtl.asarray(w), **kw)
    g = _rand(*y.shape, dtype="float32")
    xt = F.conv_transpose3d(vtl.asarray(g), vtl.asarray(w), output_padding=(0, 0, 0), **kw)
    assert xt.shape == x.shape
    np.testing.assert_allclose(np.sum(to_numpy(y).astype(np.float64) * g),
                               np.sum(x * to_numpy(xt).astype(np.float64)), rtol=1e-4)


def test_conv3d_empty_batch(backend):
    out = F.conv3d(vtl.zeros((0, 2, 3, 3, 3)), vtl.ones((4, 2, 2, 2, 2)))
    assert out.shape == (0, 4, 2, 2, 2)
    out = F.conv_transpose3d(vtl.zeros((0, 2, 3, 3, 3)), vtl.ones((2, 4, 2, 2, 2)), stride=2)
    assert out.shape == (0, 4, 6, 6, 6)


def test_conv3d_gradients_finite_differences():
    x, w, b = _rand(1, 4, 4, 3, 3), _rand(2, 2, 2, 2, 2), _rand(2)
    check_grad(lambda x, w, b: F.conv3d(x, w, b, (2, 1, 1), (1, 0, 1), (1, 2, 1), 2), x, w, b)
    check_grad(lambda x, w: F.conv3d(x, w, None, 1, "same"), x[:, :2], _rand(2, 2, 2, 1, 2))
    check_grad(lambda x, w, b: F.conv_transpose3d(x, w, b, (2, 1, 2), (1, 0, 1), (1, 0, 1), 2,
                                                  (1, 2, 1)),
               _rand(1, 4, 2, 3, 2), _rand(4, 1, 2, 2, 2), b)


def test_conv3d_second_order_gradients():
    """d/dx of the gradient (create_graph): conv3d composes differentiable ops."""
    w = _rand(2, 2, 2, 2, 2)

    def grad_x(x):
        if not x.requires_grad:  # the finite-difference evaluations pass plain tensors
            x = vtl.asarray(x, requires_grad=True)
        y = F.conv3d(x, vtl.asarray(w, backend="numpy"), padding=(1, 0, 1), stride=(2, 1, 1))
        (gx,) = vtl.autograd.grad(vtl.sum(y * y * y), [x], create_graph=True)
        return gx

    check_grad(grad_x, _rand(1, 2, 3, 3, 2))


def test_conv3d_gradients_match_numpy_backend(backend):
    x, w, b = _rand(1, 4, 4, 4, 3), _rand(4, 2, 2, 3, 2), _rand(4)
    check_grad_matches_numpy(lambda x, w, b: F.conv3d(x, w, b, (2, 1, 1), 1, 1, 2), backend,
                             x, w, b)
    check_grad_matches_numpy(lambda x, w: F.conv_transpose3d(x, w, None, 2, 1, 1), backend,
                             x[:, :, :2, :3], _rand(4, 2, 2, 2, 2))


@contextlib.contextmanager
def portable_conv(backend_name):
    """conv2d and the pools through the portable gather path (the backend's kernels removed)."""
    be = vtl.backends.get(backend_name)
    saved = {k: be._kernels.pop(k) for k in ("conv2d", "pool2d") if k in be._kernels}
    try:
        yield
    finally:
        be._kernels.update(saved)


def test_kernel_and_portable_paths_agree(backend):
    """conv3d and the 3-D pools give the same values and gradients with the backend's 2-D
    kernels and on the portable gather path."""
    x, w = _rand(1, 2, 4, 5, 4, dtype="float32"), _rand(4, 2, 2, 3, 2, dtype="float32")

    def run():
        xt, wt = vtl.asarray(x, requires_grad=True), vtl.asarray(w, requires_grad=True)
        y = F.conv3d(xt, wt, None, 1, (1, 0, 1))
        y = F.max_pool3d(y, 2, 1, 1) + F.avg_pool3d(y, 2, 1, 1, count_include_pad=False)
        vtl.sum(y * y).backward()
        return [to_numpy(v) for v in (y, xt.grad, wt.grad)]

    fast = run()
    with portable_conv(backend):
        slow = run()
    for a, b in zip(fast, slow, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


def test_conv3d_errors(backend):
    x = vtl.asarray(_rand(1, 2, 4, 4, 4))
    w = vtl.asarray(_rand(3, 2, 2, 2, 2))
    with pytest.raises(ValueError, match=r"conv3d\(\): input of shape \(1, 5, 4, 4, 4\) has 5 "
                                         r"channels, but weight of shape \(3, 2, 2, 2, 2\)"):
        F.conv3d(vtl.asarray(_rand(1, 5, 4, 4, 4)), w)
    with pytest.raises(ValueError, match=r"conv3d\(\): expected a 4-D \(unbatched\) or 5-D"):
        F.conv3d(vtl.asarray(_rand(4, 4, 4)), w)
    with pytest.raises(ValueError, match="weight must be 5-D"):
        F.conv3d(x, vtl.asarray(_rand(3, 2, 2, 2)))
    with pytest.raises(ValueError, match="not supported for strided"):
        F.conv3d(x, w, stride=(1, 2, 1), padding="same")
    with pytest.raises(ValueError, match="smaller than the dilated kernel"):
        F.conv3d(x, w, dilation=(4, 1, 1))
    with pytest.raises(ValueError, match=r"bias must have shape \(3,\)"):
        F.conv3d(x, w, vtl.asarray(_rand(2)))
    with pytest.raises(ValueError, match=r"stride must be an int or a tuple of 3 ints"):
        F.conv3d(x, w, stride=(1, 2))
    with pytest.raises(ValueError, match="padding must be 'valid', 'same'"):
        F.conv3d(x, w, padding="full")
    with pytest.raises(ValueError, match="divisible by groups=2"):
        F.conv3d(vtl.asarray(_rand(1, 4, 4, 4, 4)), vtl.asarray(_rand(3, 2, 2, 2, 2)), groups=2)
    with pytest.raises(ValueError, match=r"conv_transpose3d\(\): output_padding"):
        F.conv_transpose3d(x, vtl.asarray(_rand(2, 3, 2, 2, 2)), stride=2,
                           output_padding=(0, 2, 0))
    with pytest.raises(ValueError, match=r"conv_transpose3d\(\): input of shape .* has 3 "
                                         "channels"):
        F.conv_transpose3d(vtl.asarray(_rand(1, 3, 2, 2, 2)), vtl.asarray(_rand(2, 3, 2, 2, 2)))
    with pytest.raises(ValueError, match="empty output"):
        F.conv_transpose3d(x, vtl.asarray(_rand(2, 3, 2, 2, 2)), padding=(3, 0, 0))
    with pytest.raises(TypeError, match="dilation must be an int or a tuple"):
        F.conv3d(x, w, dilation=1.5)


# -- 3-D pooling -----------------------------------------------------------------------------
# (kernel, stride, padding, dilation, ceil_mode)
MAX3D_CASES = [
    ((2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1), False),
    ((3, 2, 2), (2, 1, 2), (1, 1, 0), (1, 1, 1), True),
    ((2, 2, 3), (1, 2, 2), (1, 0, 1), (2, 1, 1), True),
]


@pytest.mark.parametrize("case", MAX3D_CASES)
def test_max_pool3d_matches_loops(backend, case):
    k, s, p, d, ceil = case
    x = _rand(2, 2, 4, 5, 5, dtype="float32")
    vals, idx = np_max_pool(x, k, s, p, d, ceil)
    out, ind = F.max_pool3d(vtl.asarray(x), k, s, p, d, ceil, return_indices=True)
    assert_close(out, vals)
    np.testing.assert_array_equal(to_numpy(ind), idx)
    out1 = F.max_pool3d(vtl.asarray(x[1]), k, s, p, d, ceil)
    assert_close(out1, vals[1])


def test_max_pool3d_ties_go_to_the_first_and_nan_propagates(backend):
    x = np.zeros((1, 1, 2, 2, 4), np.float32)
    x[0, 0, 1, 0, 0] = 5.0
    x[0, 0, 1, 1, 1] = 5.0  # a later tie in (d, h, w) order
    x[0, 0, 0, 1, 3] = np.nan
    xt = vtl.asarray(x, requires_grad=True)
    out, ind = F.max_pool3d(xt, 2, return_indices=True)
    vals, idx = np_max_pool(x, (2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1))
    assert_close(out, vals)
    np.testing.assert_array_equal(to_numpy(ind), idx)
    assert to_numpy(ind).ravel().tolist() == [8, 7]  # d * H * W + h * W + w
    vtl.sum(out).backward()
    g = np.zeros_like(x)
    g.reshape(-1)[[8, 7]] = 1.0
    assert_close(xt.grad, g)


# (kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
AVG3D_CASES = [
    ((2, 2, 2), None, 0, False, True, None),
    ((3, 2, 3), (2, 1, 2), (1, 1, 1), True, True, None),
    ((3, 3, 2), (2, 2, 1), (1, 1, 0), True, False, None),
    ((2, 3, 2), 1, (1, 1, 0), False, True, 5),
    ((3, 2, 2), (2, 2, 2), (1, 0, 1), True, False, 3),
]


@pytest.mark.parametrize("case", AVG3D_CASES)
def test_avg_pool3d_matches_loops(backend, case):
    k, s, p, ceil, cip, div = case
    x = _rand(2, 2, 4, 5, 5, dtype="float32")
    ref = np_avg_pool(x, k, k if s is None else _triple(s), _triple(p), ceil, cip, div)
    assert_close(F.avg_pool3d(vtl.asarray(x), k, s, p, ceil, cip, div), ref, **_tol("float32"))
    assert_close(F.avg_pool3d(vtl.asarray(x[0]), k, s, p, ceil, cip, div), ref[0],
                 **_tol("float32"))


def test_pool3d_gradients_finite_differences():
    x = _rand(1, 2, 3, 4, 3)
    check_grad(lambda x: F.max_pool3d(x, 2, (1, 2, 1), 1, ceil_mode=True), x)
    check_grad(lambda x: F.max_pool3d(x, (2, 2, 1), 1, 0, (1, 2, 1)), x)
    check_grad(lambda x: F.avg_pool3d(x, (2, 3, 2), (1, 2, 1), 1, True, False), x)
    check_grad(lambda x: F.avg_pool3d(x, 2, divisor_override=3), x)
    check_grad(lambda x: F.adaptive_avg_pool3d(x, (2, 3, 2)), x)


def test_pool3d_gradients_match_numpy_backend(backend):
    x = _rand(1, 2, 4, 4, 3)
    check_grad_matches_numpy(lambda x: F.max_pool3d(x, 2, 1, 1), backend, x)
    check_grad_matches_numpy(lambda x: F.avg_pool3d(x, 3, 2, 1, True, False), backend, x)
    check_grad_matches_numpy(lambda x: F.adaptive_max_pool3d(x, (3, 2, 2)), backend, x)
    check_grad_matches_numpy(lambda x: F.lp_pool3d(x * x + 0.5, 2, 2, 1), backend, x)


def test_pool3d_empty_batch(backend):
    x = vtl.zeros((0, 2, 3, 3, 3))
    assert F.max_pool3d(x, 2, return_indices=True)[1].shape == (0, 2, 1, 1, 1)
    assert F.avg_pool3d(x, 2).shape == (0, 2, 1, 1, 1)


# -- adaptive pooling ------------------------------------------------------------------------
@pytest.mark.parametrize("out", [(2, 3, 2), (3, None, 4), 1, (4, 5, 3)])
def test_adaptive_pool3d_matches_loops(backend, out):
    x = _rand(2, 2, 4, 5, 3, dtype="float32")
    size = tuple(x.shape[2 + a] if o is None else o
                 for a, o in enumerate(out if isinstance(out, tuple) else (out,) * 3))
    assert_close(F.adaptive_avg_pool3d(vtl.asarray(x), out), np_adaptive_avg(x, size),
                 **_tol("float32"))
    vals, idx = np_adaptive_max(x, size)
    v, i = F.adaptive_max_pool3d(vtl.asarray(x), out, return_indices=True)
    assert_close(v, vals)
    np.testing.assert_array_equal(to_numpy(i), idx)
    assert_close(F.adaptive_max_pool3d(vtl.asarray(x[1]), out), vals[1])


@pytest.mark.parametrize("out", [(2, 3), (3, None), 4, (5, 7)])
def test_adaptive_max_pool2d_matches_loops(backend, out):
    x = _rand(2, 3, 5, 7, dtype="float32")
    x[1, 2, 3, 4] = np.nan
    x[0, 1, 0, 0] = x[0, 1, 1, 1] = 9.0  # a tie inside one window
    size = tuple(x.shape[2 + a] if o is None else o
                 for a, o in enumerate(out if isinstance(out, tuple) else (out,) * 2))
    vals, idx = np_adaptive_max(x, size)
    v, i = F.adaptive_max_pool2d(vtl.asarray(x), out, return_indices=True)
    assert_close(v, vals)
    np.testing.assert_array_equal(to_numpy(i), idx)
    v1, i1 = F.adaptive_max_pool2d(vtl.asarray(x[0]), out, True)
    assert_close(v1, vals[0])
    np.testing.assert_array_equal(to_numpy(i1), idx[0])
    assert_close(F.adaptive_max_pool2d(vtl.asarray(x), out), vals)


@pytest.mark.parametrize("out", [1, 3, 4, 7, 9])
def test_adaptive_max_pool1d_matches_loops(backend, out):
    x = _rand(2, 3, 7, dtype="float32")
    vals, idx = np_adaptive_max(x, (out,))
    v, i = F.adaptive_max_pool1d(vtl.asarray(x), out, return_indices=True)
    assert_close(v, vals)
    np.testing.assert_array_equal(to_numpy(i), idx)
    assert_close(F.adaptive_max_pool1d(vtl.asarray(x[1]), out), vals[1])


def test_adaptive_max_gradients():
    check_grad(lambda x: F.adaptive_max_pool1d(x, 3), _rand(2, 2, 7))
    check_grad(lambda x: F.adaptive_max_pool2d(x, (3, 2)), _rand(1, 2, 5, 4))
    check_grad(lambda x: F.adaptive_max_pool3d(x, (2, 3, 2)), _rand(1, 2, 3, 4, 3))
    # ties: the gradient goes to the first maximum only
    x = vtl.asarray(np.ones((1, 1, 2, 3)), backend="numpy", requires_grad=True)
    vtl.sum(F.adaptive_max_pool2d(x, 1)).backward()
    assert to_numpy(x.grad).ravel().tolist() == [1, 0, 0, 0, 0, 0]


def test_adaptive_max_gradients_match_numpy_backend(backend):
    x = _rand(2, 3, 5, 7)
    check_grad_matches_numpy(lambda x: F.adaptive_max_pool2d(x, (2, 3)), backend, x)
    check_grad_matches_numpy(lambda x: F.adaptive_max_pool1d(x, 3), backend, x[0])


# -- power-average pooling -------------------------------------------------------------------
@pytest.mark.parametrize("p", [1, 2, 1.5, 3.0])
def test_lp_pool_matches_formula(backend, p):
    x = np.abs(_rand(2, 2, 4, 5, 5, dtype="float32")) + 0.1
    if p == 1:  # sign(a) * relu(|a|): a negative mean stays negative
        x[0, 0] = -x[0, 0]
    xt = vtl.asarray(x)
    assert_close(F.lp_pool1d(xt[0, 0], p, 3, 2, True),
                 np_lp_pool(x[0, 0], p, (3,), (2,), True), **_tol("float32"))
    assert_close(F.lp_pool2d(xt[0], p, (2, 3)), np_lp_pool(x[0], p, (2, 3)), **_tol("float32"))
    assert_close(F.lp_pool2d(xt[0, 0], p, 2, (1, 2), True),
                 np_lp_pool(x[0, :1], p, (2, 2), (1, 2), True)[0], **_tol("float32"))
    assert_close(F.lp_pool3d(xt, p, 2, (1, 2, 2)), np_lp_pool(x, p, (2, 2, 2), (1, 2, 2)),
                 **_tol("float32"))


def test_lp_pool_gradients():
    x = np.abs(_rand(1, 2, 4, 5)) + 0.5
    check_grad(lambda x: F.lp_pool2d(x, 2, 2, 1, True), x)
    check_grad(lambda x: F.lp_pool1d(x, 1.5, 3, 2), x[0])
    check_grad(lambda x: F.lp_pool3d(x, 3, (2, 2, 1)), x[:, None])


# -- max unpooling ---------------------------------------------------------------------------
def np_max_unpool(x, idx, out):
    """Zeros of ``(N, C, *out)`` with ``x`` written at the flat indices in order (the last
    write to a position stays, as PyTorch's CPU loop)."""
    res = np.zeros(x.shape[:2] + (math.prod(out),), x.dtype)
    xf, idf = x.reshape(x.shape[:2] + (-1,)), idx.reshape(idx.shape[:2] + (-1,))
    for n, c in itertools.product(*map(range, x.shape[:2])):
        for j in range(xf.shape[2]):
            res[n, c, idf[n, c, j]] = xf[n, c, j]
    return res.reshape(x.shape[:2] + tuple(out))


# (nsp, input spatial, kernel, stride, padding, output_size)
UNPOOL_CASES = [
    (1, (7,), 2, None, 0, None),
    (2, (5, 6), 3, 2, 1, (5, 6)),
    (2, (4, 6), 2, None, 0, (1, 2, 5, 7)),
    (3, (3, 4, 4), (1, 2, 2), None, 0, None),
    (3, (4, 4, 3), 2, 1, 1, (4, 4, 3)),
]


@pytest.mark.parametrize("case", UNPOOL_CASES)
def test_max_unpool_inverts_max_pool(backend, case):
    nsp, sp, k, s, p, osz = case
    x = _rand(2, 2, *sp, dtype="float32")
    pool = getattr(F, f"max_pool{nsp}d")
    unpool = getattr(F, f"max_unpool{nsp}d")
    v, i = pool(vtl.asarray(x), k, s, p, return_indices=True)
    out = unpool(v, i, k, s, p, osz)
    kk = (k,) * nsp if isinstance(k, int) else k
    ss = kk if s is None else (s,) * nsp
    size = tuple((v.shape[2 + a] - 1) * ss[a] - 2 * p + kk[a] for a in range(nsp)) \
        if osz is None else tuple(osz)[-nsp:]
    ref = np_max_unpool(to_numpy(v), to_numpy(i), size)
    assert_close(out, ref)
    assert_close(unpool(v[0], i[0], k, s, p, osz), ref[0])


def test_max_unpool_last_write_wins_and_gradients(backend):
    x = np.array([[[1.0, 2.0, 3.0, 4.0]]], np.float32)
    idx = np.array([[[3, 0, 3, 1]]])
    xt = vtl.asarray(x, requires_grad=True)
    out = F.max_unpool1d(xt, vtl.asarray(idx), 2, output_size=(7,))
    assert to_numpy(out).ravel().tolist() == [2.0, 4.0, 0.0, 3.0, 0.0, 0.0, 0.0]
    vtl.sum(out * vtl.asarray(np.arange(1, 8, dtype=np.float32))).backward()
    # the derivative of the output: none for the overwritten value
    assert to_numpy(xt.grad).ravel().tolist() == [0.0, 1.0, 4.0, 2.0]


def test_max_unpool_gradients():
    x = _rand(1, 2, 4, 5)
    _, i = F.max_pool2d(vtl.asarray(x, backend="numpy"), 2, 1, return_indices=True)
    check_grad(lambda v: F.max_unpool2d(v, i, 2, 1), _rand(*i.shape))
    x3 = _rand(1, 1, 2, 4, 4)
    _, i3 = F.max_pool3d(vtl.asarray(x3, backend="numpy"), 2, return_indices=True)
    check_grad(lambda v: F.max_unpool3d(v, i3, 2), _rand(*i3.shape))


def test_max_unpool_gradients_match_numpy_backend(backend):
    x = _rand(1, 2, 4, 6)
    _, i = F.max_pool2d(vtl.asarray(x, backend="numpy"), 2, return_indices=True)
    idx = to_numpy(i)
    check_grad_matches_numpy(lambda v: F.max_unpool2d(v, vtl.asarray(idx, device=v.device), 2),
                             backend, _rand(*idx.shape))


def test_max_unpool_errors(backend):
    x = vtl.ones((1, 1, 2, 2))
    i = vtl.asarray(np.array([[[[0, 1], [2, 3]]]]))
    with pytest.raises(ValueError, match=r"max_unpool2d\(\): indices of shape \(1, 1, 2\) must "
                                         r"have the input's shape \(1, 1, 2, 2\)"):
        F.max_unpool2d(x, i[..., 0], 2)
    with pytest.raises(TypeError, match=r"max_unpool2d\(\) expected integer indices"):
        F.max_unpool2d(x, x, 2)
    with pytest.raises(ValueError, match=r"max_unpool2d\(\): invalid output_size \(6, 4\) \(axis "
                                         "0 must be between 2 and 6"):
        F.max_unpool2d(x, i, 2, output_size=(6, 4))
    with pytest.raises(ValueError, match=r"max_unpool2d\(\): output_size must have 2 or 4"):
        F.max_unpool2d(x, i, 2, output_size=(4, 4, 4))
    with pytest.raises(ValueError, match=r"max_unpool3d\(\): expected a 4-D \(unbatched\) or "
                                         "5-D"):
        F.max_unpool3d(x[0, 0], i[0, 0], 2)
    bad = vtl.asarray(np.array([[[[0, 1], [2, 16]]]]))
    with pytest.raises(IndexError, match="out of bounds"):  # at the first read on a GPU
        to_numpy(F.max_unpool2d(x, bad, 2))


# -- errors ----------------------------------------------------------------------------------
def test_pool_errors(backend):
    x = vtl.asarray(_rand(1, 2, 4, 4, 4))
    with pytest.raises(ValueError, match=r"max_pool3d\(\): expected a 4-D \(unbatched\) or "
                                         "5-D"):
        F.max_pool3d(x[0, 0], 2)
    with pytest.raises(ValueError, match=r"max_pool3d\(\): padding .* at most half"):
        F.max_pool3d(x, 2, padding=(0, 2, 0))
    with pytest.raises(ValueError, match=r"avg_pool3d\(\): input of shape .* is too small"):
        F.avg_pool3d(x, (5, 1, 1))
    with pytest.raises(ValueError, match="divisor_override must be non-zero"):
        F.avg_pool3d(x, 2, divisor_override=0)
    with pytest.raises(TypeError, match=r"max_pool3d\(\) needs a real floating-point input"):
        F.max_pool3d(vtl.ones((1, 1, 2, 2, 2), dtype=vtl.int32), 2)
    with pytest.raises(ValueError, match=r"kernel_size must be an int or a tuple of 3"):
        F.avg_pool3d(x, (2, 2))
    with pytest.raises(ValueError, match=r"adaptive_max_pool2d\(\): output_size must be an int "
                                         "or a tuple of 2"):
        F.adaptive_max_pool2d(x[0], (2, 2, 2))
    with pytest.raises(ValueError, match=r"adaptive_max_pool1d\(\): expected a 2-D"):
        F.adaptive_max_pool1d(x, 2)
    with pytest.raises(ValueError, match=r"adaptive_max_pool3d\(\): cannot pool"):
        F.adaptive_max_pool3d(x, 0)
    with pytest.raises(TypeError, match=r"adaptive_max_pool2d\(\) needs a real floating"):
        F.adaptive_max_pool2d(vtl.ones((1, 2, 2), dtype=vtl.int32), 1)
    with pytest.raises(ValueError, match=r"adaptive_avg_pool3d\(\): expected a 4-D"):
        F.adaptive_avg_pool3d(x[0, 0], 2)
    with pytest.raises(ValueError, match=r"lp_pool2d\(\): norm_type must be non-zero"):
        F.lp_pool2d(x[0], 0, 2)
    with pytest.raises(TypeError, match=r"lp_pool1d\(\): norm_type must be a number"):
        F.lp_pool1d(x[0, 0], "2", 2)
    with pytest.raises(ValueError, match=r"lp_pool1d\(\): input of shape .* is too small"):
        F.lp_pool1d(x[0, 0], 2, 5)
    with pytest.raises(ValueError, match=r"lp_pool3d\(\): kernel_size must be an int or a "
                                         "tuple of 3"):
        F.lp_pool3d(x, 2, (2, 2))


# -- modules ---------------------------------------------------------------------------------
def test_conv3d_module(backend):
    vtl.random.manual_seed(0)
    m = nn.Conv3d(4, 6, (2, 3, 2), stride=(1, 2, 1), padding=1, dilation=(2, 1, 1), groups=2)
    assert m.weight.shape == (6, 2, 2, 3, 2) and m.bias.shape == (6,)
    bound = 1 / math.sqrt(2 * 2 * 3 * 2)  # kaiming_uniform(a=sqrt(5)) and the bias bound
    assert np.abs(to_numpy(m.weight)).max() <= bound + 1e-7
    assert np.abs(to_numpy(m.bias)).max() <= bound + 1e-7
    x = _rand(2, 4, 4, 5, 4, dtype="float32")
    w, b = to_numpy(m.weight), to_numpy(m.bias)
    ref = np_conv3d(x, w, b, (1, 2, 1), (1,) * 6, (2, 1, 1), 2)
    assert_close(m(vtl.asarray(x)), ref, **_tol("float32"))
    assert_close(m(vtl.asarray(x[0])), ref[0], **_tol("float32"))
    assert set(m.state_dict()) == {"weight", "bias"}
    assert "Conv3d(4, 6, kernel_size=(2, 3, 2), stride=(1, 2, 1)" in repr(m)
    assert nn.Conv3d(2, 2, 1, bias=False).bias is None


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_conv3d_padding_modes(backend, mode):
    m = nn.Conv3d(2, 3, (3, 2, 3), padding="same", padding_mode=mode)
    x = _rand(1, 2, 4, 4, 5, dtype="float32")
    np_mode = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode]
    xp = np.pad(x, [(0, 0), (0, 0), (1, 1), (0, 1), (1, 1)], mode=np_mode)
    ref = np_conv3d(xp, to_numpy(m.weight), to_numpy(m.bias))
    assert_close(m(vtl.asarray(x)), ref, **_tol("float32"))


def test_conv_transpose3d_module(backend):
    m = nn.ConvTranspose3d(4, 2, (2, 3, 2), stride=2, padding=(0, 1, 0), groups=2)
    assert m.weight.shape == (4, 1, 2, 3, 2)
    x = _rand(1, 4, 2, 3, 2, dtype="float32")
    w, b = to_numpy(m.weight), to_numpy(m.bias)
    out = m(vtl.asarray(x))
    assert_close(out, np_conv_transpose3d(x, w, b, 2, (0, 1, 0), 0, 2), **_tol("float32"))
    out = m(vtl.asarray(x), output_size=(5, 6, 5))
    assert out.shape == (1, 2, 5, 6, 5)
    assert_close(out, np_conv_transpose3d(x, w, b, 2, (0, 1, 0), (1, 1, 1), 2),
                 **_tol("float32"))
    with pytest.raises(ValueError, match=r"ConvTranspose3d\(4, 2.*requested output size"):
        m(vtl.asarray(x), output_size=(7, 6, 5))
    with pytest.raises(ValueError, match='Only "zeros" padding mode'):
        nn.ConvTranspose3d(2, 2, 2, padding_mode="reflect")
    with pytest.raises(ValueError, match=r"Conv3d\(2, 2.*expected input with 2 channels"):
        nn.Conv3d(2, 2, 2)(vtl.ones((1, 3, 2, 2, 2)))
    with pytest.raises(ValueError, match=r"Conv3d\(2, 2.*expected a 4-D \(unbatched\) or 5-D"):
        nn.Conv3d(2, 2, 2)(vtl.ones((2, 2, 2)))


def test_conv3d_module_gradients():
    """The layers' gradients (input and parameters) are those of the functional ops they
    call, which finite differences confirm."""
    vtl.random.manual_seed(1)
    cases = [
        (nn.Conv3d(2, 2, 2, padding=(1, 0, 1), padding_mode="circular").double(),
         _rand(1, 2, 2, 3, 2),
         lambda x, w, b: F.conv3d(F.pad(x, (1, 1, 0, 0, 1, 1), mode="circular"), w, b)),
        (nn.ConvTranspose3d(2, 2, 2, stride=(2, 1, 1)).double(), _rand(1, 2, 2, 2, 2),
         lambda x, w, b: F.conv_transpose3d(x, w, b, (2, 1, 1))),
    ]
    for m, x, fn in cases:
        w, b = to_numpy(m.weight), to_numpy(m.bias)
        check_grad(fn, x, w, b)
        xt = vtl.asarray(x, backend="numpy", requires_grad=True)
        v = _rand(*m(xt).shape)
        vtl.sum(m(xt) * vtl.asarray(v, backend="numpy")).backward()
        ts = [vtl.asarray(a, backend="numpy", requires_grad=True) for a in (x, w, b)]
        expect = vtl.autograd.grad(vtl.sum(fn(*ts) * vtl.asarray(v, backend="numpy")), ts)
        for got, e in zip((xt.grad, m.weight.grad, m.bias.grad), expect, strict=True):
            assert_close(got, to_numpy(e))


def test_pool_modules(backend):
    x = _rand(2, 2, 4, 5, 4, dtype="float32")
    xt = vtl.asarray(x)
    m = nn.MaxPool3d(2, 1, 1, return_indices=True)
    v, i = m(xt)
    vals, idx = np_max_pool(x, (2, 2, 2), (1, 1, 1), (1, 1, 1), (1, 1, 1))
    assert_close(v, vals)
    np.testing.assert_array_equal(to_numpy(i), idx)
    assert repr(m) == "MaxPool3d(kernel_size=2, stride=1, padding=1, dilation=1, ceil_mode=False)"
    m = nn.AvgPool3d((2, 3, 2), (1, 2, 2), 1, True, False, None)
    assert_close(m(xt), np_avg_pool(x, (2, 3, 2), (1, 2, 2), (1, 1, 1), True, False),
                 **_tol("float32"))
    assert_close(nn.AvgPool3d(2, divisor_override=3)(xt),
                 np_avg_pool(x, (2,) * 3, (2,) * 3, (0,) * 3, divisor=3), **_tol("float32"))
    assert not isinstance(nn.AvgPool3d(2), nn.AvgPool2d)
    assert_close(nn.AdaptiveAvgPool3d((2, None, 3))(xt), np_adaptive_avg(x, (2, 5, 3)),
                 **_tol("float32"))
    assert_close(nn.AdaptiveMaxPool3d(2)(xt), np_adaptive_max(x, (2, 2, 2))[0])
    v, i = nn.AdaptiveMaxPool2d((3, None), return_indices=True)(xt[0])
    vals, idx = np_adaptive_max(x[0], (3, 4))
    assert_close(v, vals)
    np.testing.assert_array_equal(to_numpy(i), idx)
    assert_close(nn.AdaptiveMaxPool1d(3)(xt[0, 0]), np_adaptive_max(x[0, 0], (3,))[0])
    assert repr(nn.AdaptiveMaxPool2d((3, None))) == "AdaptiveMaxPool2d(output_size=(3, None))"
    xa = np.abs(x) + 0.1
    assert_close(nn.LPPool1d(2, 3, 1)(vtl.asarray(xa[0, 0])), np_lp_pool(xa[0, 0], 2, (3,), (1,)),
                 **_tol("float32"))
    assert_close(nn.LPPool2d(1.5, (2, 3), ceil_mode=True)(vtl.asarray(xa[0])),
                 np_lp_pool(xa[0], 1.5, (2, 3), None, True), **_tol("float32"))
    assert_close(nn.LPPool3d(2, 2)(vtl.asarray(xa)), np_lp_pool(xa, 2, (2, 2, 2)),
                 **_tol("float32"))
    assert repr(nn.LPPool2d(2, 3)) == "LPPool2d(norm_type=2, kernel_size=3, stride=None, " \
        "ceil_mode=False)"
    v, i = nn.MaxPool2d(2, return_indices=True)(xt[0])
    m = nn.MaxUnpool2d(2)
    assert repr(m) == "MaxUnpool2d(kernel_size=2, stride=2, padding=0)"
    up = m(v, i, output_size=xt[0].shape)
    assert up.shape == (2, 4, 5, 4)
    assert_close(up, np_max_unpool(to_numpy(v), to_numpy(i), (5, 4)))
    v3, i3 = nn.MaxPool3d(2, return_indices=True)(xt)
    assert_close(nn.MaxUnpool3d(2)(v3, i3, xt.shape),
                 np_max_unpool(to_numpy(v3), to_numpy(i3), (4, 5, 4)))
    v1, i1 = nn.MaxPool1d(2, return_indices=True)(xt[0, 0])
    assert_close(nn.MaxUnpool1d(2)(v1, i1), np_max_unpool(to_numpy(v1), to_numpy(i1), (4,)))
    with pytest.raises(ValueError, match=r"^MaxUnpool2d\(kernel_size=2.*\): max_unpool2d\(\)"):
        m(v, i[..., 0])
    with pytest.raises(ValueError, match=r"^MaxPool3d\(kernel_size=2.*\): max_pool3d\(\)"):
        nn.MaxPool3d(2)(vtl.ones((2, 2)))
    with pytest.raises(ValueError, match=r"^AdaptiveMaxPool2d\(output_size=0\)"):
        nn.AdaptiveMaxPool2d(0)(xt[0])
    with pytest.raises(TypeError, match="expected input to be a vtl.Tensor"):
        nn.LPPool2d(2, 2)(x[0])


# -- array-api-strict inputs (the functions use only the standard) ----------------------------
STRICT_CASES = {
    "conv3d": lambda x, w: F.conv3d(x, w, None, (2, 1, 1), (1, 0, 1), 1, 1),
    "conv3d_same_groups": lambda x, w: F.conv3d(x[:, :2, ...], w[:2, :1, ...], None, 1, "same",
                                                1, 2),
    "conv_transpose3d": lambda x, w: F.conv_transpose3d(x, w, None, 2, 1, 1),
    "max_pool3d": lambda x, w: F.max_pool3d(x, 2, 1, 1, return_indices=True)[1],
    "avg_pool3d": lambda x, w: F.avg_pool3d(x, 3, 2, 1, True, False),
    "adaptive_max_pool2d": lambda x, w: F.adaptive_max_pool2d(x[0, ...], (2, 3)),
    "adaptive_avg_pool3d": lambda x, w: F.adaptive_avg_pool3d(x, (2, 3, 2)),
    "lp_pool2d": lambda x, w: F.lp_pool2d(x[0, ...] * x[0, ...], 2, 2),
    "max_unpool3d": lambda x, w: F.max_unpool3d(*F.max_pool3d(x, 2, 1, return_indices=True),
                                                2, 1),
}


@pytest.mark.parametrize("name", sorted(STRICT_CASES))
def test_on_array_api_strict(name):
    xs = pytest.importorskip("array_api_strict")
    # array_api_strict's argmax cannot return its int32 index on the no_x64 device
    dev = xs.Device("CPU_DEVICE" if "max" in name else "no_x64")
    x_np, w_np = _rand(1, 3, 4, 5, 4, dtype="float32"), _rand(3, 3, 2, 3, 2, dtype="float32")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = STRICT_CASES[name](xs.asarray(x_np, device=dev), xs.asarray(w_np, device=dev))
    assert out.device == dev
    host = np.asarray(out.to_device(xs.Device("CPU_DEVICE")))
    expect = to_numpy(STRICT_CASES[name](vtl.asarray(x_np, backend="numpy"),
                                         vtl.asarray(w_np, backend="numpy")))
    np.testing.assert_allclose(host, expect, rtol=1e-5, atol=1e-5)


# -- PyTorch as an extra oracle ----------------------------------------------------------------
@needs_torch
def test_against_pytorch(backend):
    dtype = "float64" if backend == "numpy" else "float32"
    tol = _tol(dtype)
    T = torch.tensor
    x, b = _rand(2, 4, 5, 4, 5, dtype=dtype), _rand(6, dtype=dtype)
    xv = vtl.asarray(x)
    w = _rand(6, 2, 3, 2, 2, dtype=dtype)
    for s, p, d in [((2, 1, 1), (1, 0, 1), (1, 2, 1)), (1, "same", (2, 1, 1)), (1, "valid", 1)]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's note about 'same' with even kernels
            ref = TF.conv3d(T(x), T(w), T(b), s, p, d, 2).numpy()
        assert_close(F.conv3d(xv, vtl.asarray(w), vtl.asarray(b), s, p, d, 2), ref, **tol)
    wt = _rand(4, 3, 2, 3, 2, dtype=dtype)
    assert_close(F.conv_transpose3d(xv, vtl.asarray(wt), vtl.asarray(b), (2, 1, 2), (1, 1, 0),
                                    (1, 0, 1), 2, (1, 1, 2)),
                 TF.conv_transpose3d(T(x), T(wt), T(b), (2, 1, 2), (1, 1, 0), (1, 0, 1), 2,
                                     (1, 1, 2)).numpy(), **tol)
    for ceil in (False, True):
        tv, ti = TF.max_pool3d(T(x), 3, 2, 1, (1, 1, 2), ceil, True)
        vv, vi = F.max_pool3d(xv, 3, 2, 1, (1, 1, 2), ceil, True)
        assert_close(vv, tv.numpy())
        np.testing.assert_array_equal(to_numpy(vi), ti.numpy())
        for cip, div in [(True, None), (False, None), (False, 7)]:
            assert_close(F.avg_pool3d(xv, (3, 2, 3), (2, 1, 2), 1, ceil, cip, div),
                         TF.avg_pool3d(T(x), (3, 2, 3), (2, 1, 2), 1, ceil, cip, div).numpy(),
                         **tol)
    for fn, tfn, out in [(F.adaptive_max_pool1d, TF.adaptive_max_pool1d, 3),
                         (F.adaptive_max_pool2d, TF.adaptive_max_pool2d, (3, None)),
                         (F.adaptive_max_pool3d, TF.adaptive_max_pool3d, (2, 3, 4))]:
        nsp = 1 if fn is F.adaptive_max_pool1d else 2 if fn is F.adaptive_max_pool2d else 3
        xs_ = x.reshape(x.shape[:2] + (-1,)) if nsp == 1 else x[:, :, 0] if nsp == 2 else x
        tv, ti = tfn(T(xs_), out, True)
        vv, vi = fn(vtl.asarray(xs_), out, True)
        assert_close(vv, tv.numpy())
        np.testing.assert_array_equal(to_numpy(vi), ti.numpy())
    assert_close(F.adaptive_avg_pool3d(xv, (2, None, 3)),
                 TF.adaptive_avg_pool3d(T(x), (2, None, 3)).numpy(), **tol)
    xa = np.abs(x) + 0.1
    xav = vtl.asarray(xa)
    assert_close(F.lp_pool1d(xav[0, 0, 0], 2, 3, 2, True),
                 TF.lp_pool1d(T(xa[0, 0, 0]), 2, 3, 2, True).numpy(), **tol)
    assert_close(F.lp_pool2d(xav[0], 1.5, (2, 3), None, True),
                 TF.lp_pool2d(T(xa[0]), 1.5, (2, 3), None, True).numpy(), **tol)
    for nsp in (1, 2, 3):
        xs_ = x[0, 0, 0] if nsp == 1 else x[0] if nsp == 2 else x
        tv, ti = getattr(TF, f"max_pool{nsp}d")(T(xs_), 2, 1, 1, return_indices=True)
        vi = vtl.asarray(ti.numpy())
        size = xs_.shape[-nsp:]
        assert_close(getattr(F, f"max_unpool{nsp}d")(vtl.asarray(tv.numpy()), vi, 2, 1, 1,
                                                     size),
                     getattr(TF, f"max_unpool{nsp}d")(tv, ti, 2, 1, 1, size).numpy())
    if hasattr(TF, "lp_pool3d"):
        assert_close(F.lp_pool3d(xav, 3, 2, (1, 2, 2)),
                     TF.lp_pool3d(T(xa), 3, 2, (1, 2, 2)).numpy(), **tol)


@needs_torch
def test_gradients_against_pytorch():
    x = _rand(1, 4, 4, 5, 4)
    w = _rand(4, 2, 2, 3, 2)

    def both(f_vtl, f_torch, *arrays):
        vs = [vtl.asarray(a, backend="numpy", requires_grad=True) for a in arrays]
        ts = [torch.tensor(a, requires_grad=True) for a in arrays]
        yv, yt = f_vtl(*vs), f_torch(*ts)
        g = _rand(*yt.shape)
        vtl.sum(yv * vtl.asarray(g, backend="numpy")).backward()
        (yt * torch.tensor(g)).sum().backward()
        for v, t in zip(vs, ts, strict=True):
            np.testing.assert_allclose(to_numpy(v.grad), t.grad.numpy(), rtol=1e-10, atol=1e-12)

    both(lambda x, w: F.conv3d(x, w, None, (2, 1, 1), 1, 1, 2),
         lambda x, w: TF.conv3d(x, w, None, (2, 1, 1), 1, 1, 2), x, w)
    both(lambda x, w: F.conv_transpose3d(x, w, None, 2, 1, 1, 2),
         lambda x, w: TF.conv_transpose3d(x, w, None, 2, 1, 1, 2), x, _rand(4, 1, 2, 2, 2))
    both(lambda x: F.max_pool3d(x, 2, 1, 1), lambda x: TF.max_pool3d(x, 2, 1, 1), x)
    both(lambda x: F.avg_pool3d(x, 3, 2, 1, True, False),
         lambda x: TF.avg_pool3d(x, 3, 2, 1, True, False), x)
    both(lambda x: F.adaptive_max_pool2d(x, (3, 2)), lambda x: TF.adaptive_max_pool2d(x, (3, 2)),
         x[0])
    both(lambda x: F.lp_pool2d(x, 2, 2), lambda x: TF.lp_pool2d(x, 2, 2), np.abs(x[0]) + 0.1)
    # disjoint windows: PyTorch's gradient gathers g at every index, also at one written
    # twice (overlapping windows); here only the value that stays gets one
    _, i = TF.max_pool2d(torch.tensor(x[0]), 2, 2, 1, return_indices=True)
    both(lambda v: F.max_unpool2d(v, vtl.asarray(i.numpy(), backend="numpy"), 2, 2, 1, (5, 4)),
         lambda v: TF.max_unpool2d(v, i, 2, 2, 1, (5, 4)), _rand(*i.shape))


@needs_torch
def test_modules_against_pytorch():
    x = _rand(1, 4, 4, 5, 4)
    T = torch.tensor
    pairs = [
        (nn.Conv3d(4, 2, 3, padding="same", padding_mode="replicate", groups=2),
         torch.nn.Conv3d(4, 2, 3, padding="same", padding_mode="replicate", groups=2)),
        (nn.ConvTranspose3d(4, 2, 2, stride=2, padding=(1, 0, 0), output_padding=(1, 0, 0)),
         torch.nn.ConvTranspose3d(4, 2, 2, stride=2, padding=(1, 0, 0),
                                  output_padding=(1, 0, 0))),
    ]
    for vm, tm in pairs:
        vm, tm = vm.double(), tm.double()
        vm.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
        assert_close(vm(vtl.asarray(x, backend="numpy")), tm(T(x)).detach().numpy())
