"""interpolate/Upsample, pixel_shuffle/unshuffle, fold/unfold, InstanceNorm1d/2d/3d, RMSNorm,
LocalResponseNorm, EmbeddingBag, Embedding(scale_grad_by_freq), RReLU and Softmax2d:
NumPy oracles of PyTorch's formulas on every backend, float64 finite-difference gradients,
PyTorch as an extra oracle where it is installed, array-api-strict inputs and errors."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from helpers import assert_close, check_grad, check_grad_matches_numpy, to_numpy

import vtl
import vtl.nn.functional as F
from vtl import nn

try:
    import torch
except ImportError:  # pragma: no cover - torch is optional
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
RNG = np.random.default_rng(11)


def _rand(*shape, dtype="float64"):
    return RNG.standard_normal(shape).astype(dtype)


def _np(backend_name, x):
    return vtl.asarray(x, backend=backend_name)


# -- interpolate: NumPy oracle of PyTorch's source-index formulas (UpSample.h) -----------------
def _cubic1(x, op, a=-0.75):  # Keys' kernel for |x| <= 1
    a = op(a)
    return ((a + op(2)) * x - (a + op(3))) * x * x + op(1)


def _cubic2(x, op, a=-0.75):  # for 1 < |x| < 2
    a = op(a)
    return ((a * x - op(5) * a) * x + op(8) * a) * x - op(4) * a


def _axis_matrix(mode, n_in, n_out, align, scale, dtype):
    """The dense ``(n_out, n_in)`` resampling matrix of one axis, computed with NumPy
    scalars in PyTorch's precision (float32 arithmetic for float32 inputs)."""
    op = np.float64 if dtype == np.float64 else np.float32
    m = np.zeros((n_out, n_in))
    if mode == "area":
        for o in range(n_out):
            b, e = (o * n_in) // n_out, -((-(o + 1) * n_in) // n_out)
            m[o, b:e] = 1.0 / (e - b)
        return m

    def scales_value(t):
        return t(1.0 / scale) if scale else t(n_in) / t(n_out)

    if mode in ("nearest", "nearest-exact"):
        s = scales_value(np.float32)
        for o in range(n_out):
            if mode == "nearest":
                i = o if n_out == n_in else o >> 1 if n_out == 2 * n_in else \
                    int(np.floor(np.float32(o) * s))
            else:
                i = int(np.floor(np.float32((o + 0.5) * np.float64(s))))
            m[o, min(i, n_in - 1)] = 1.0
        return m
    if align:
        s = op(n_in - 1) / op(n_out - 1) if n_out > 1 else op(0)
    else:
        s = scales_value(op)
    for o in range(n_out):
        cubic = mode == "bicubic"
        if mode != "bicubic" and n_out == n_in:
            m[o, o] = 1.0
            continue
        real = s * op(o) if align else s * (op(o) + op(0.5)) - op(0.5)
        if not cubic and real < 0:
            real = op(0)
        i0 = min(int(np.floor(real)), n_in - 1)
        t = min(max(real - op(i0), op(0)), op(1))
        if cubic:
            coeffs = (_cubic2(t + op(1), op), _cubic1(t, op), _cubic1(op(1) - t, op),
                      _cubic2(op(2) - t, op))
            for j, w in enumerate(coeffs):
                m[o, min(max(i0 - 1 + j, 0), n_in - 1)] += w
        else:
            m[o, i0] += op(1) - t
            m[o, i0 + (1 if i0 < n_in - 1 else 0)] += t
    return m


def np_interpolate(x, size=None, scale_factor=None, mode="nearest", align_corners=None,
                   recompute_scale_factor=None):
    dims = x.ndim - 2
    if size is not None:
        out = (size,) * dims if isinstance(size, int) else tuple(size)
        scales = (None,) * dims
    else:
        f = (scale_factor,) * dims if not isinstance(scale_factor, tuple) else scale_factor
        out = tuple(int(math.floor(n * s)) for n, s in zip(x.shape[2:], f, strict=True))
        scales = (None,) * dims if recompute_scale_factor or mode == "area" else f
    y = x.astype(np.float64)
    for a in range(dims):
        m = _axis_matrix(mode, x.shape[2 + a], out[a], bool(align_corners), scales[a],
                         x.dtype.type)
        y = np.moveaxis(np.tensordot(y, m, axes=([2 + a], [1])), -1, 2 + a)
    return y.astype(x.dtype)


INTERP_CASES = [
    # (mode, spatial shape, kwargs)
    ("nearest", (5,), dict(scale_factor=2)),
    ("nearest", (4, 5), dict(size=(7, 3))),
    ("nearest", (5, 3), dict(scale_factor=1.7)),
    ("nearest", (3, 2, 4), dict(size=(5, 4, 2))),
    ("nearest-exact", (5, 4), dict(size=(3, 9))),
    ("nearest-exact", (6,), dict(scale_factor=0.5)),
    ("linear", (5,), dict(size=9, align_corners=False)),
    ("linear", (5,), dict(size=9, align_corners=True)),
    ("linear", (6,), dict(scale_factor=0.6)),
    ("bilinear", (4, 5), dict(size=(7, 3), align_corners=False)),
    ("bilinear", (4, 5), dict(size=(7, 3), align_corners=True)),
    ("bilinear", (3, 4), dict(scale_factor=2.5)),
    ("bilinear", (3, 4), dict(scale_factor=(1.5, 0.5), recompute_scale_factor=True)),
    ("bilinear", (4, 4), dict(size=1, align_corners=True)),
    ("bicubic", (4, 5), dict(size=(7, 3), align_corners=False)),
    ("bicubic", (4, 5), dict(size=(7, 3), align_corners=True)),
    ("bicubic", (5, 4), dict(scale_factor=1.5)),
    ("trilinear", (3, 2, 4), dict(size=(5, 3, 2), align_corners=False)),
    ("trilinear", (3, 2, 4), dict(size=(5, 3, 2), align_corners=True)),
    ("area", (7, 5), dict(size=(3, 2))),
    ("area", (6,), dict(scale_factor=0.5)),
    ("area", (3, 5, 4), dict(size=(2, 5, 3))),
]


def _case_id(c):
    return f"{c[0]}-{'x'.join(map(str, c[1]))}-{'-'.join(f'{k}={v}' for k, v in c[2].items())}"


@pytest.mark.parametrize("case", INTERP_CASES, ids=[_case_id(c) for c in INTERP_CASES])
def test_interpolate_matches_pytorch_formulas(backend, case):
    mode, spatial, kw = case
    for dt in ("float32", "float64") if backend == "numpy" else ("float32",):
        x = _rand(2, 3, *spatial, dtype=dt)
        got = F.interpolate(vtl.asarray(x), mode=mode, **kw)
        want = np_interpolate(x, mode=mode, **kw)
        if mode.startswith("nearest"):
            assert_close(got, want, rtol=0, atol=0)  # the same elements
        elif dt == "float64":
            assert_close(got, want, rtol=1e-12, atol=1e-12)
        else:
            assert_close(got, want, rtol=1e-5, atol=2e-6)


@needs_torch
@pytest.mark.parametrize("case", INTERP_CASES, ids=[_case_id(c) for c in INTERP_CASES])
def test_interpolate_against_torch(case):
    mode, spatial, kw = case
    for dt in ("float32", "float64"):
        x = _rand(2, 3, *spatial, dtype=dt)
        want = torch.nn.functional.interpolate(torch.from_numpy(x), mode=mode, **kw).numpy()
        got = F.interpolate(vtl.asarray(x, backend="numpy"), mode=mode, **kw)
        if mode.startswith("nearest"):
            assert_close(got, want, rtol=0, atol=0)
        else:
            assert_close(got, want, rtol=1e-5 if dt == "float32" else 1e-12,
                         atol=5e-6 if dt == "float32" else 1e-12)


def test_interpolate_known_values(backend):
    x = vtl.asarray(np.array([[[[1.0, 2.0], [3.0, 4.0]]]], np.float32))
    assert_close(F.interpolate(x, scale_factor=2),
                 np.array([[[[1, 1, 2, 2], [1, 1, 2, 2], [3, 3, 4, 4], [3, 3, 4, 4]]]],
                          np.float32))
    row = vtl.asarray(np.array([[[0.0, 1.0]]], np.float32))
    assert_close(F.interpolate(row, size=3, mode="linear", align_corners=True),
                 np.array([[[0.0, 0.5, 1.0]]], np.float32))
    assert_close(F.interpolate(row, size=4, mode="linear", align_corners=False),
                 np.array([[[0.0, 0.25, 0.75, 1.0]]], np.float32))
    assert_close(F.interpolate(row, size=4, mode="linear", align_corners=True),
                 np.array([[[0.0, 1 / 3, 2 / 3, 1.0]]], np.float32))
    # the same size is a copy; integer inputs are fine for the nearest modes
    same = F.interpolate(x, size=(2, 2), mode="bilinear")
    assert_close(same, to_numpy(x))
    ints = vtl.asarray(np.arange(6, dtype=np.int32).reshape(1, 1, 6))
    assert_close(F.interpolate(ints, size=3), np.array([[[0, 2, 4]]], np.int32))


@pytest.mark.parametrize("mode,spatial,kw", [
    ("nearest", (3, 4), dict(scale_factor=1.5)),
    ("linear", (4,), dict(size=7)),
    ("bilinear", (3, 4), dict(size=(5, 2), align_corners=False)),
    ("bilinear", (3, 4), dict(size=(5, 2), align_corners=True)),
    ("bicubic", (4, 3), dict(size=(3, 5))),
    ("trilinear", (2, 3, 2), dict(scale_factor=1.5)),
    ("area", (5, 4), dict(size=(2, 3))),
])
def test_interpolate_gradients(mode, spatial, kw):
    check_grad(lambda t: F.interpolate(t, mode=mode, **kw), _rand(1, 2, *spatial))


def test_interpolate_second_order():
    x = vtl.asarray(_rand(1, 1, 3, 3), backend="numpy", requires_grad=True)
    y = vtl.sum(F.interpolate(x, size=(4, 5), mode="bicubic") ** 2)
    (g,) = vtl.autograd.grad(y, [x], create_graph=True)
    (h,) = vtl.autograd.grad(vtl.sum(g), [x])
    assert h.shape == x.shape and np.all(np.isfinite(to_numpy(h)))


def test_interpolate_grad_on_every_backend(backend):
    check_grad_matches_numpy(lambda t: F.interpolate(t, size=(3, 5), mode="bilinear"),
                             backend, _rand(1, 2, 4, 3))
    check_grad_matches_numpy(lambda t: F.interpolate(t, size=(2, 2), mode="area"),
                             backend, _rand(1, 1, 5, 3))


def test_interpolate_errors(backend):
    x = vtl.asarray(np.zeros((1, 1, 4, 4), np.float32))
    with pytest.raises(ValueError, match="only one of size or scale_factor"):
        F.interpolate(x, size=3, scale_factor=2)
    with pytest.raises(ValueError, match="either size or scale_factor"):
        F.interpolate(x)
    with pytest.raises(ValueError, match="align_corners option can only be set"):
        F.interpolate(x, scale_factor=2, align_corners=True)
    with pytest.raises(ValueError, match="linear mode needs a 3-D input"):
        F.interpolate(x, scale_factor=2, mode="linear")
    with pytest.raises(ValueError, match="mode must be one of"):
        F.interpolate(x, scale_factor=2, mode="cubic")
    with pytest.raises(ValueError, match="same number of spatial dimensions"):
        F.interpolate(x, size=(2, 3, 4))
    with pytest.raises(ValueError, match="greater than 0"):
        F.interpolate(x, scale_factor=0.1)
    with pytest.raises(ValueError, match="recompute_scale_factor is not meaningful"):
        F.interpolate(x, size=2, recompute_scale_factor=True)
    with pytest.raises(ValueError, match="3-D, 4-D or 5-D"):
        F.interpolate(vtl.asarray(np.zeros((4, 4), np.float32)), size=2)
    with pytest.raises(TypeError, match="real floating-point"):
        F.interpolate(vtl.asarray(np.zeros((1, 1, 4, 4), np.int32)), size=2, mode="bilinear")
    with pytest.raises(NotImplementedError, match="antialias"):
        F.interpolate(x, size=2, mode="bilinear", antialias=True)
    with pytest.raises(ValueError, match="anti-alias"):
        F.interpolate(x, size=2, mode="nearest", antialias=True)
    with pytest.raises(TypeError, match="size must be"):
        F.interpolate(x, size=(2.5, 2))


def test_upsample_modules(backend):
    x = _rand(1, 2, 3, 4, dtype="float32")
    xt = vtl.asarray(x)
    assert_close(nn.Upsample(scale_factor=2)(xt), np_interpolate(x, scale_factor=2))
    assert_close(nn.Upsample(size=(5, 6), mode="bilinear", align_corners=True)(xt),
                 np_interpolate(x, size=(5, 6), mode="bilinear", align_corners=True),
                 rtol=1e-5, atol=2e-6)
    assert_close(nn.UpsamplingNearest2d(size=(6, 5))(xt), np_interpolate(x, size=(6, 5)))
    assert_close(nn.UpsamplingBilinear2d(scale_factor=2)(xt),
                 np_interpolate(x, scale_factor=2, mode="bilinear", align_corners=True),
                 rtol=1e-5, atol=2e-6)
    assert repr(nn.Upsample(scale_factor=2)) == "Upsample(scale_factor=2.0, mode='nearest')"
    with pytest.raises(ValueError, match=r"Upsample\(size=3, mode='linear'\).*3-D input"):
        nn.Upsample(size=3, mode="linear")(xt)
    with pytest.raises(TypeError, match="vtl.Tensor"):
        nn.Upsample(size=3)(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_close(F.upsample_bilinear(xt, size=(4, 4)),
                     to_numpy(F.interpolate(xt, size=(4, 4), mode="bilinear",
                                            align_corners=True)))
    with pytest.warns(UserWarning, match="deprecated"):
        F.upsample(xt, scale_factor=2)


@needs_torch
def test_upsample_modules_against_torch():
    x = _rand(2, 3, 4, 5, dtype="float32")
    for vm, tm in [(nn.UpsamplingBilinear2d(size=(7, 3)), torch.nn.UpsamplingBilinear2d((7, 3))),
                   (nn.UpsamplingNearest2d(scale_factor=3),
                    torch.nn.UpsamplingNearest2d(scale_factor=3)),
                   (nn.Upsample(scale_factor=1.5, mode="bicubic"),
                    torch.nn.Upsample(scale_factor=1.5, mode="bicubic"))]:
        assert_close(vm(vtl.asarray(x, backend="numpy")), tm(torch.from_numpy(x)).numpy(),
                     rtol=1e-5, atol=5e-6)


# -- pixel shuffle ----------------------------------------------------------------------------
def np_pixel_shuffle(x, r):
    *lead, c, h, w = x.shape
    out = np.empty((*lead, c // (r * r), h * r, w * r), x.dtype)
    for cc in range(c // (r * r)):
        for i in range(r):
            for j in range(r):
                out[..., cc, i::r, j::r] = x[..., cc * r * r + i * r + j, :, :]
    return out


def test_pixel_shuffle(backend):
    x = _rand(2, 8, 3, 2, dtype="float32")
    y = F.pixel_shuffle(vtl.asarray(x), 2)
    assert_close(y, np_pixel_shuffle(x, 2))
    assert_close(F.pixel_unshuffle(y, 2), x)
    assert_close(nn.PixelShuffle(2)(vtl.asarray(x)), np_pixel_shuffle(x, 2))
    assert_close(nn.PixelUnshuffle(2)(y), x)
    x5 = _rand(2, 1, 9, 2, 1, dtype="float32")  # extra leading axes
    assert_close(F.pixel_shuffle(vtl.asarray(x5), 3), np_pixel_shuffle(x5, 3))
    check_grad_matches_numpy(lambda t: F.pixel_shuffle(t, 2), backend, x)


def test_pixel_shuffle_grad_and_errors(backend):
    if backend == "numpy":
        check_grad(lambda t: F.pixel_unshuffle(t, 2), _rand(1, 2, 4, 2))
    x = vtl.asarray(np.zeros((1, 6, 2, 2), np.float32))
    with pytest.raises(ValueError, match="divisible by upscale_factor"):
        F.pixel_shuffle(x, 2)
    with pytest.raises(ValueError, match="divisible by downscale_factor"):
        F.pixel_unshuffle(vtl.asarray(np.zeros((1, 1, 3, 4), np.float32)), 2)
    with pytest.raises(ValueError, match="at least 3 dimensions"):
        F.pixel_shuffle(vtl.asarray(np.zeros((4, 4), np.float32)), 2)
    with pytest.raises(ValueError, match="positive"):
        F.pixel_shuffle(x, 0)
    with pytest.raises(TypeError, match="must be an int"):
        F.pixel_shuffle(x, 1.5)
    with pytest.raises(ValueError, match=r"PixelShuffle\(upscale_factor=4\)"):
        nn.PixelShuffle(4)(x)


# -- fold / unfold ----------------------------------------------------------------------------
def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def np_unfold(x, k, d=1, p=0, s=1):
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = map(_pair, (k, d, p, s))
    n, c, h, w = x.shape
    xp_ = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    ho = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    wo = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, c * kh * kw, ho * wo), x.dtype)
    for cc in range(c):
        for i in range(kh):
            for j in range(kw):
                for oh in range(ho):
                    for ow in range(wo):
                        out[:, (cc * kh + i) * kw + j, oh * wo + ow] = \
                            xp_[:, cc, oh * sh + i * dh, ow * sw + j * dw]
    return out


def np_fold(y, size, k, d=1, p=0, s=1):
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = map(_pair, (k, d, p, s))
    h, w = size
    n, ck, _ = y.shape
    c = ck // (kh * kw)
    out = np.zeros((n, c, h + 2 * ph, w + 2 * pw), y.dtype)
    ho = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    wo = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    for cc in range(c):
        for i in range(kh):
            for j in range(kw):
                for oh in range(ho):
                    for ow in range(wo):
                        out[:, cc, oh * sh + i * dh, ow * sw + j * dw] += \
                            y[:, (cc * kh + i) * kw + j, oh * wo + ow]
    return out[:, :, ph:ph + h, pw:pw + w]


FOLD_CASES = [
    dict(k=2), dict(k=(2, 3), s=2), dict(k=3, p=1), dict(k=2, d=2, p=(1, 0), s=(1, 2)),
    dict(k=1, s=3), dict(k=(3, 1), d=(1, 2), p=2, s=3),
]


@pytest.mark.parametrize("kw", FOLD_CASES, ids=[str(c) for c in FOLD_CASES])
def test_unfold_and_fold(backend, kw):
    x = _rand(2, 3, 5, 6, dtype="float32")
    args = (kw["k"], kw.get("d", 1), kw.get("p", 0), kw.get("s", 1))
    cols = F.unfold(vtl.asarray(x), *args)
    want = np_unfold(x, *args)
    assert_close(cols, want)
    y = _rand(*want.shape, dtype="float32")
    assert_close(F.fold(vtl.asarray(y), (5, 6), *args), np_fold(y, (5, 6), *args),
                 rtol=1e-5, atol=1e-6)
    # unbatched inputs and the modules
    assert_close(F.unfold(vtl.asarray(x[0]), *args), want[0])
    assert_close(nn.Fold((5, 6), *args)(vtl.asarray(y[1])), np_fold(y, (5, 6), *args)[1],
                 rtol=1e-5, atol=1e-6)
    assert_close(nn.Unfold(*args)(vtl.asarray(x)), want)


@pytest.mark.parametrize("kw", FOLD_CASES[:4], ids=[str(c) for c in FOLD_CASES[:4]])
def test_fold_is_the_adjoint_of_unfold_and_gradients(kw):
    args = (kw["k"], kw.get("d", 1), kw.get("p", 0), kw.get("s", 1))
    x = _rand(1, 2, 4, 5)
    cols = np_unfold(x, *args)
    y = _rand(*cols.shape)
    lhs = np.sum(to_numpy(F.unfold(vtl.asarray(x, backend="numpy"), *args)) * y)
    rhs = np.sum(x * to_numpy(F.fold(vtl.asarray(y, backend="numpy"), (4, 5), *args)))
    assert abs(lhs - rhs) < 1e-10
    check_grad(lambda t: F.unfold(t, *args), x)
    check_grad(lambda t: F.fold(t, (4, 5), *args), y)


def test_fold_unfold_grad_on_every_backend(backend):
    check_grad_matches_numpy(lambda t: F.unfold(t, 2, padding=1, stride=2), backend,
                             _rand(1, 2, 3, 4))
    check_grad_matches_numpy(lambda t: F.fold(t, (3, 4), 2, padding=1, stride=1), backend,
                             _rand(1, 8, 20))


@needs_torch
@pytest.mark.parametrize("kw", FOLD_CASES, ids=[str(c) for c in FOLD_CASES])
def test_fold_unfold_against_torch(kw):
    args = (kw["k"], kw.get("d", 1), kw.get("p", 0), kw.get("s", 1))
    x = _rand(2, 3, 5, 6)
    want = torch.nn.functional.unfold(torch.from_numpy(x), *args).numpy()
    assert_close(F.unfold(vtl.asarray(x, backend="numpy"), *args), want)
    y = _rand(*want.shape)
    assert_close(F.fold(vtl.asarray(y, backend="numpy"), (5, 6), *args),
                 torch.nn.functional.fold(torch.from_numpy(y), (5, 6), *args).numpy())


def test_fold_unfold_errors(backend):
    x = vtl.asarray(np.zeros((1, 2, 3, 3), np.float32))
    with pytest.raises(ValueError, match="components must be at least one"):
        F.unfold(x, 4)
    with pytest.raises(ValueError, match="3-D .* or 4-D"):
        F.unfold(vtl.asarray(np.zeros((3, 3), np.float32)), 2)
    with pytest.raises(ValueError, match="kernel_size must be >= 1"):
        F.unfold(x, 0)
    with pytest.raises(ValueError, match="padding must be >= 0"):
        F.unfold(x, 2, padding=-1)
    with pytest.raises(TypeError, match="kernel_size must be an int"):
        F.unfold(x, "2")
    y = vtl.asarray(np.zeros((1, 8, 4), np.float32))
    with pytest.raises(ValueError, match="number of sliding blocks 2 \\* 2 = 4"):
        F.fold(vtl.asarray(np.zeros((1, 8, 5), np.float32)), (3, 3), 2)
    with pytest.raises(ValueError, match="multiple of kernel_size"):
        F.fold(vtl.asarray(np.zeros((1, 6, 4), np.float32)), (3, 3), 2)
    with pytest.raises(ValueError, match="2-D .* or 3-D"):
        F.fold(vtl.asarray(np.zeros((8,), np.float32)), (3, 3), 2)
    assert F.fold(y, (3, 3), 2).shape == (1, 2, 3, 3)
    with pytest.raises(ValueError, match=r"Fold\(output_size=\(4, 4\)"):
        nn.Fold((4, 4), 2)(y)


# -- normalisation ----------------------------------------------------------------------------
def np_rms_norm(x, k, w=None, eps=None):
    eps = np.finfo(x.dtype).eps if eps is None else eps
    axes = tuple(range(x.ndim - k, x.ndim))
    x64 = x.astype(np.float64)
    out = x64 / np.sqrt(np.mean(x64 * x64, axis=axes, keepdims=True) + eps)
    return (out if w is None else out * w).astype(x.dtype)


def np_lrn(x, size, alpha=1e-4, beta=0.75, k=1.0):
    c = x.shape[1]
    sq = x.astype(np.float64) ** 2
    div = np.zeros_like(sq)
    for ch in range(c):
        lo, hi = max(0, ch - size // 2), min(c, ch + (size - 1) // 2 + 1)
        div[:, ch] = sq[:, lo:hi].sum(axis=1)
    return (x / (k + alpha / size * div) ** beta).astype(x.dtype)


def test_rms_norm(backend):
    x = _rand(2, 3, 4, dtype="float32")
    w = _rand(3, 4, dtype="float32")
    assert_close(F.rms_norm(vtl.asarray(x), 4), np_rms_norm(x, 1), rtol=1e-5, atol=1e-6)
    assert_close(F.rms_norm(vtl.asarray(x), (3, 4), vtl.asarray(w), eps=1e-3),
                 np_rms_norm(x, 2, w, 1e-3), rtol=1e-5, atol=1e-6)
    m = nn.RMSNorm([3, 4])
    assert_close(m.weight, np.ones((3, 4), np.float32))
    assert m.eps is None and repr(m) == "RMSNorm((3, 4), eps=None, elementwise_affine=True)"
    assert_close(m(vtl.asarray(x)), np_rms_norm(x, 2), rtol=1e-5, atol=1e-6)
    m2 = nn.RMSNorm(4, eps=0.5, elementwise_affine=False)
    assert m2.weight is None and list(m2.state_dict()) == []
    assert_close(m2(vtl.asarray(x)), np_rms_norm(x, 1, eps=0.5), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="does not end with normalized_shape"):
        F.rms_norm(vtl.asarray(x), 3)
    with pytest.raises(ValueError, match="weight must have shape"):
        F.rms_norm(vtl.asarray(x), 4, vtl.asarray(np.ones(3, np.float32)))
    with pytest.raises(ValueError, match=r"RMSNorm\(\(5,\)\): expected an input ending"):
        nn.RMSNorm(5)(vtl.asarray(x))
    with pytest.raises(TypeError, match="floating-point"):
        nn.RMSNorm(4)(vtl.asarray(np.zeros((2, 4), np.int32)))
    check_grad_matches_numpy(lambda t, g: F.rms_norm(t, 4, g), backend, x[0], w[0])


def test_rms_norm_and_lrn_gradients():
    check_grad(lambda t, g: F.rms_norm(t, (2, 3), g), _rand(2, 2, 3), _rand(2, 3))
    check_grad(lambda t: F.rms_norm(t, 3, eps=0.1), _rand(4, 3))
    check_grad(lambda t: F.local_response_norm(t, 3, alpha=0.3, beta=0.7, k=1.5),
               _rand(2, 5, 2))
    check_grad(lambda t: F.local_response_norm(t, 2, alpha=0.3), _rand(1, 3, 2, 2))


@pytest.mark.parametrize("shape,size", [((2, 5, 3), 3), ((2, 4, 2, 3), 2), ((1, 6, 2, 1, 2), 5),
                                        ((2, 3, 4), 1), ((1, 3, 2), 8)])
def test_local_response_norm(backend, shape, size):
    x = _rand(*shape, dtype="float32")
    assert_close(F.local_response_norm(vtl.asarray(x), size, alpha=0.2, beta=0.75, k=2.0),
                 np_lrn(x, size, 0.2, 0.75, 2.0), rtol=1e-5, atol=1e-6)
    m = nn.LocalResponseNorm(size)
    assert_close(m(vtl.asarray(x)), np_lrn(x, size), rtol=1e-5, atol=1e-6)


def test_local_response_norm_errors(backend):
    with pytest.raises(ValueError, match="3-D or higher"):
        F.local_response_norm(vtl.asarray(np.zeros((2, 3), np.float32)), 2)
    with pytest.raises(ValueError, match="size must be a positive int"):
        nn.LocalResponseNorm(0)
    with pytest.raises(ValueError, match=r"LocalResponseNorm\(2, .*3-D or higher"):
        nn.LocalResponseNorm(2)(vtl.asarray(np.zeros((2, 3), np.float32)))
    assert repr(nn.LocalResponseNorm(2)) == "LocalResponseNorm(2, alpha=0.0001, beta=0.75, k=1.0)"


def _np_instance(x, eps=1e-5):
    axes = tuple(range(2, x.ndim))
    m = x.mean(axis=axes, keepdims=True)
    v = ((x - m) ** 2).mean(axis=axes, keepdims=True)
    return (x - m) / np.sqrt(v + eps), m, v


@pytest.mark.parametrize("cls,nsp", [(nn.InstanceNorm1d, 1), (nn.InstanceNorm2d, 2),
                                     (nn.InstanceNorm3d, 3)])
def test_instance_norm_modules(backend, cls, nsp):
    x = _rand(2, 3, *(3,) * nsp, dtype="float32")
    m = cls(3)
    assert not m.affine and not m.track_running_stats and m.weight is None
    assert m.running_mean is None and list(m.state_dict()) == []
    want, mean, var = _np_instance(x.astype(np.float64))
    assert_close(m(vtl.asarray(x)), want.astype(np.float32), rtol=1e-4, atol=1e-5)
    assert_close(m(vtl.asarray(x[1])), want[1].astype(np.float32), rtol=1e-4, atol=1e-5)
    m.eval()  # without running statistics, eval also uses the input's statistics
    assert_close(m(vtl.asarray(x)), want.astype(np.float32), rtol=1e-4, atol=1e-5)

    t = cls(3, affine=True, track_running_stats=True, momentum=0.5)
    assert list(t.state_dict()) == ["weight", "bias", "running_mean", "running_var",
                                    "num_batches_tracked"]
    with vtl.no_grad():
        t.weight[...] = vtl.asarray(np.array([1.0, 2.0, 3.0], np.float32))
    y = t(vtl.asarray(x))
    shape = (1, 3) + (1,) * nsp
    assert_close(y, (want * np.reshape([1.0, 2.0, 3.0], shape)).astype(np.float32),
                 rtol=1e-4, atol=1e-5)
    m_sp = 3 ** nsp
    rm = 0.5 * mean.reshape(2, 3).mean(axis=0)
    rv = 0.5 + 0.5 * (var.reshape(2, 3) * m_sp / (m_sp - 1)).mean(axis=0)
    assert_close(t.running_mean, rm.astype(np.float32), rtol=1e-5, atol=1e-6)
    assert_close(t.running_var, rv.astype(np.float32), rtol=1e-5, atol=1e-6)
    t.eval()
    want_eval = (x - rm.reshape(shape)) / np.sqrt(rv.reshape(shape) + 1e-5) \
        * np.reshape([1.0, 2.0, 3.0], shape)
    assert_close(t(vtl.asarray(x)), want_eval.astype(np.float32), rtol=1e-4, atol=1e-5)


def test_instance_norm_errors_and_grad(backend):
    with pytest.raises(ValueError, match=r"InstanceNorm2d\(3\): expected a 3-D \(unbatched\)"):
        nn.InstanceNorm2d(3)(vtl.asarray(np.zeros((2, 3), np.float32)))
    with pytest.raises(ValueError, match="expected 3 channels"):
        nn.InstanceNorm1d(3, affine=True)(vtl.asarray(np.zeros((2, 4, 5), np.float32)))
    with pytest.warns(UserWarning, match="not num_features=3"):
        nn.InstanceNorm1d(3)(vtl.asarray(_rand(2, 4, 5, dtype="float32")))
    with pytest.raises(ValueError, match="more than 1 spatial element"):
        nn.InstanceNorm1d(3)(vtl.asarray(np.zeros((2, 3, 1), np.float32)))
    assert repr(nn.InstanceNorm3d(4)) == ("InstanceNorm3d(4, eps=1e-05, momentum=0.1, "
                                          "affine=False, track_running_stats=False)")
    if backend == "numpy":
        m = nn.InstanceNorm2d(2, affine=True).to(vtl.float64)
        check_grad(lambda t: m(t), _rand(2, 2, 2, 3))


@needs_torch
def test_norms_against_torch():
    x = _rand(2, 4, 3, 5, dtype="float32")
    for vm, tm in [(nn.InstanceNorm2d(4, affine=True, track_running_stats=True),
                    torch.nn.InstanceNorm2d(4, affine=True, track_running_stats=True)),
                   (nn.RMSNorm((3, 5)), torch.nn.RMSNorm((3, 5))),
                   (nn.LocalResponseNorm(3, 0.1, 0.8, 1.2),
                    torch.nn.LocalResponseNorm(3, 0.1, 0.8, 1.2))]:
        for train in (True, False):
            vm.train(train)
            tm.train(train)
            assert_close(vm(vtl.asarray(x, backend="numpy")),
                         tm(torch.from_numpy(x)).detach().numpy(), rtol=1e-5, atol=1e-5)
    assert_close(F.rms_norm(vtl.asarray(x, backend="numpy"), 5),
                 torch.nn.functional.rms_norm(torch.from_numpy(x), (5,)).numpy(),
                 rtol=1e-6, atol=1e-6)


# -- embedding_bag / Embedding(scale_grad_by_freq) --------------------------------------------
def np_embedding_bag(idx, w, offsets=None, mode="mean", psw=None, include_last=False,
                     padding_idx=None):
    """PyTorch's documented semantics, bag by bag."""
    if idx.ndim == 2:
        bags = [list(range(i * idx.shape[1], (i + 1) * idx.shape[1]))
                for i in range(idx.shape[0])]
        idx = idx.reshape(-1)
        psw = None if psw is None else psw.reshape(-1)
    else:
        ends = list(offsets[1:]) if include_last else list(offsets[1:]) + [len(idx)]
        bags = [list(range(b, e)) for b, e in zip(offsets, ends, strict=False)]
    out = np.zeros((len(bags), w.shape[1]), w.dtype)
    for b, members in enumerate(bags):
        members = [j for j in members if idx[j] != padding_idx]
        if not members:
            continue
        rows = w[idx[members]].astype(np.float64)
        if psw is not None:
            rows = rows * psw[members][:, None]
        out[b] = rows.sum(0) if mode == "sum" else rows.mean(0) if mode == "mean" \
            else rows.max(0)
    return out


BAG_IDX = np.array([1, 2, 4, 5, 4, 3, 7, 7, 0])
BAG_CASES = [
    (BAG_IDX, [0, 2, 2, 4], False), (BAG_IDX, [0, 3, 3, 9], True), (BAG_IDX, [0], False),
    (BAG_IDX, [0, 1, 2, 3, 4, 5, 6, 7, 8], False), (BAG_IDX.reshape(3, 3), None, False),
]


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 4])
def test_embedding_bag(backend, mode, padding_idx):
    w = _rand(10, 3, dtype="float32")
    for idx, offsets, last in BAG_CASES:
        got = F.embedding_bag(vtl.asarray(idx), vtl.asarray(w),
                              None if offsets is None else vtl.asarray(offsets), mode=mode,
                              include_last_offset=last, padding_idx=padding_idx)
        want = np_embedding_bag(idx, w, offsets, mode, None, last, padding_idx)
        assert_close(got, want, rtol=1e-5, atol=1e-6)
    if mode == "sum":
        psw = _rand(9, dtype="float32")
        got = F.embedding_bag(vtl.asarray(BAG_IDX), vtl.asarray(w), vtl.asarray([0, 4]),
                              mode="sum", per_sample_weights=vtl.asarray(psw),
                              padding_idx=padding_idx)
        assert_close(got, np_embedding_bag(BAG_IDX, w, [0, 4], "sum", psw, False, padding_idx),
                     rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_gradients(mode):
    w = _rand(10, 3)
    for idx, offsets, last in BAG_CASES[:2] + BAG_CASES[4:]:
        ix = vtl.asarray(idx, backend="numpy")
        off = None if offsets is None else vtl.asarray(offsets, backend="numpy")
        check_grad(lambda t, ix=ix, off=off, last=last: F.embedding_bag(
            ix, t, off, mode=mode, include_last_offset=last, padding_idx=4), w)
    if mode == "sum":
        check_grad(lambda t, p: F.embedding_bag(vtl.asarray(BAG_IDX.reshape(3, 3),
                                                             backend="numpy"), t, mode="sum",
                                                per_sample_weights=p),
                   w, _rand(3, 3))


def test_embedding_bag_grad_on_every_backend(backend):
    ix = BAG_IDX.astype(np.int64)
    for mode in ("sum", "max"):
        def f(t, mode=mode):
            return F.embedding_bag(vtl.asarray(ix, device=t.device), t,
                                   vtl.asarray([0, 2, 2, 5], device=t.device), mode=mode,
                                   padding_idx=4)
        check_grad_matches_numpy(f, backend, _rand(10, 3))


@needs_torch
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_against_torch(mode):
    w = _rand(10, 3, dtype="float32")
    for idx, offsets, last in BAG_CASES:
        for pad in (None, 4, 7):
            tw = torch.tensor(w, requires_grad=True)
            t_off = None if offsets is None else torch.tensor(offsets)
            e = torch.nn.functional.embedding_bag(torch.tensor(idx), tw, t_off, mode=mode,
                                                  include_last_offset=last, padding_idx=pad)
            g = _rand(*e.shape, dtype="float32")
            (e * torch.from_numpy(g)).sum().backward()
            vw = vtl.asarray(w, backend="numpy", requires_grad=True)
            a = F.embedding_bag(vtl.asarray(idx, backend="numpy"), vw,
                                None if offsets is None else vtl.asarray(offsets,
                                                                         backend="numpy"),
                                mode=mode, include_last_offset=last, padding_idx=pad)
            vtl.sum(a * vtl.asarray(g, backend="numpy")).backward()
            assert_close(a, e.detach().numpy(), rtol=1e-5, atol=1e-6)
            assert_close(vw.grad, tw.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_embedding_bag_errors(backend):
    w = vtl.asarray(np.zeros((5, 2), np.float32))
    i1 = vtl.asarray([0, 1, 2])
    with pytest.raises(ValueError, match="offsets must be None"):
        F.embedding_bag(vtl.asarray([[0, 1]]), w, vtl.asarray([0]))
    with pytest.raises(ValueError, match="needs 1-D offsets"):
        F.embedding_bag(i1, w)
    with pytest.raises(ValueError, match="mode must be"):
        F.embedding_bag(i1, w, vtl.asarray([0]), mode="min")
    with pytest.raises(ValueError, match="only supported for mode='sum'"):
        F.embedding_bag(i1, w, vtl.asarray([0]), per_sample_weights=vtl.ones(3))
    with pytest.raises(ValueError, match="must have the shape of input"):
        F.embedding_bag(i1, w, vtl.asarray([0]), mode="sum", per_sample_weights=vtl.ones(2))
    with pytest.raises(ValueError, match="not supported with mode='max'"):
        F.embedding_bag(i1, w, vtl.asarray([0]), mode="max", scale_grad_by_freq=True)
    with pytest.raises(TypeError, match="integer dtype"):
        F.embedding_bag(vtl.asarray([0.0]), w, vtl.asarray([0]))
    with pytest.raises(TypeError, match="offsets must have an integer dtype"):
        F.embedding_bag(i1, w, vtl.asarray([0.0]))
    with pytest.raises(ValueError, match="1-D .* or 2-D"):
        F.embedding_bag(vtl.asarray(np.zeros((1, 1, 1), np.int64)), w)
    with pytest.raises(ValueError, match="padding_idx 5 out of range"):
        F.embedding_bag(i1, w, vtl.asarray([0]), padding_idx=5)
    with pytest.raises(NotImplementedError, match="sparse"):
        F.embedding_bag(i1, w, vtl.asarray([0]), sparse=True)


def test_embedding_bag_module(backend):
    vtl.manual_seed(0)
    m = nn.EmbeddingBag(6, 3, mode="sum", padding_idx=2)
    assert m.weight.shape == (6, 3) and np.all(to_numpy(m.weight)[2] == 0)
    assert repr(m) == "EmbeddingBag(6, 3, mode='sum', padding_idx=2)"
    w = to_numpy(m.weight)
    idx = np.array([0, 2, 5, 1, 1])
    out = m(vtl.asarray(idx), vtl.asarray([0, 3]))
    assert_close(out, np_embedding_bag(idx, w, [0, 3], "sum", padding_idx=2), rtol=1e-5,
                 atol=1e-6)
    vtl.sum(out).backward()
    assert_close(m.weight.grad, np.array([[1] * 3, [2] * 3, [0] * 3, [0] * 3, [0] * 3,
                                          [1] * 3], np.float32))
    pre = nn.EmbeddingBag.from_pretrained(vtl.asarray(w), mode="max")
    assert not pre.weight.requires_grad and pre.mode == "max"
    assert_close(pre(vtl.asarray(idx.reshape(1, 5))), w[idx].max(0, keepdims=True))
    with pytest.raises(ValueError, match=r"EmbeddingBag\(6, 3, mode='sum'\): .*needs 1-D"):
        m(vtl.asarray(idx))
    with pytest.raises(TypeError, match="indices must be integers"):
        m(vtl.asarray([0.5]), vtl.asarray([0]))
    with pytest.raises(ValueError, match="mode must be"):
        nn.EmbeddingBag(3, 2, mode="prod")
    with pytest.raises(NotImplementedError, match="sparse"):
        nn.EmbeddingBag(3, 2, sparse=True)


def test_embedding_scale_grad_by_freq(backend):
    w = _rand(6, 2, dtype="float32")
    idx = np.array([[1, 3, 3], [3, 5, 1]])
    t = vtl.asarray(w, requires_grad=True)
    out = F.embedding(vtl.asarray(idx), t, scale_grad_by_freq=True)
    assert_close(out, w[idx])  # values unchanged
    g = _rand(2, 3, 2, dtype="float32")
    vtl.sum(out * vtl.asarray(g)).backward()
    counts = np.bincount(idx.reshape(-1), minlength=6)
    want = np.zeros_like(w)
    np.add.at(want, idx.reshape(-1), g.reshape(-1, 2) / counts[idx.reshape(-1)][:, None])
    assert_close(t.grad, want, rtol=1e-5, atol=1e-6)
    # the module, padding_idx, and embedding_bag in 'mean' mode
    e = nn.Embedding(6, 2, padding_idx=3, scale_grad_by_freq=True)
    assert "scale_grad_by_freq=True" in repr(e)
    vtl.sum(e(vtl.asarray(idx))).backward()
    want_e = np.zeros((6, 2), np.float32)
    want_e[[1, 5]] = 1.0
    assert_close(e.weight.grad, want_e)
    bag = nn.EmbeddingBag(6, 2, mode="mean", scale_grad_by_freq=True)
    vtl.sum(bag(vtl.asarray(idx))).backward()  # each row: (count / 3) / count = 1/3
    want_b = np.zeros((6, 2), np.float32)
    want_b[[1, 3, 5]] = 1.0 / 3.0
    assert_close(bag.weight.grad, want_b, rtol=1e-5, atol=1e-6)


def test_embedding_scale_grad_second_order():
    w = vtl.asarray(_rand(4, 2), backend="numpy", requires_grad=True)
    idx = vtl.asarray([0, 0, 2], backend="numpy")
    y = vtl.sum(F.embedding(idx, w, scale_grad_by_freq=True) ** 3)
    (g,) = vtl.autograd.grad(y, [w], create_graph=True)
    (h,) = vtl.autograd.grad(vtl.sum(g), [w])
    wn = to_numpy(w)
    want = np.zeros_like(wn)
    want[0] = 6 * wn[0]  # g[0] = (3 w0^2 + 3 w0^2) / 2, so d sum(g) / d w0 = 6 w0
    want[2] = 6 * wn[2]
    assert_close(h, want)


@needs_torch
def test_embedding_scale_grad_against_torch():
    w = _rand(8, 3, dtype="float32")
    idx = np.array([[1, 2, 4, 5], [4, 3, 1, 1]])
    tw = torch.tensor(w, requires_grad=True)
    torch.nn.functional.embedding(torch.tensor(idx), tw, padding_idx=2,
                                  scale_grad_by_freq=True).pow(2).sum().backward()
    vw = vtl.asarray(w, backend="numpy", requires_grad=True)
    vtl.sum(F.embedding(vtl.asarray(idx, backend="numpy"), vw, padding_idx=2,
                        scale_grad_by_freq=True) ** 2).backward()
    assert_close(vw.grad, tw.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_embedding_max_norm_with_scale_grad(backend):
    w = np.array([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0]], np.float32)
    t = vtl.asarray(w)
    F.embedding_bag(vtl.asarray([0, 1]), t, vtl.asarray([0]), max_norm=1.0, mode="sum")
    assert_close(t, np.array([[0.6, 0.8], [0.3, 0.4], [6.0, 8.0]], np.float32), rtol=1e-5)


# -- RReLU / Softmax2d ------------------------------------------------------------------------
def test_rrelu(backend):
    x = np.linspace(-3, 3, 400).astype(np.float32)
    xt = vtl.asarray(x)
    ev = F.rrelu(xt)  # eval: the mean slope
    assert_close(ev, np.where(x >= 0, x, x * (1 / 8 + 1 / 3) / 2), rtol=1e-6)
    y = to_numpy(F.rrelu(xt, 0.1, 0.3, training=True, generator=vtl.random.Generator(5)))
    neg = x < 0
    slopes = y[neg] / x[neg]
    assert np.all(y[~neg] == x[~neg])
    assert slopes.min() >= 0.1 - 1e-6 and slopes.max() <= 0.3 + 1e-6
    assert np.unique(np.round(slopes, 5)).size > 100  # one slope per element
    y2 = to_numpy(F.rrelu(xt, 0.1, 0.3, training=True, generator=vtl.random.Generator(5)))
    assert np.array_equal(y, y2)
    u = to_numpy(vtl.random.Generator(5).random((400,)))  # the same draw as the slopes
    assert_close(y[neg], x[neg] * (u[neg] * 0.2 + 0.1), rtol=1e-5, atol=1e-6)
    m = nn.RReLU(0.2, 0.4)
    assert repr(m) == "RReLU(lower=0.2, upper=0.4)"
    vtl.manual_seed(3)
    a = to_numpy(m(xt))
    vtl.manual_seed(3)
    assert np.array_equal(a, to_numpy(m(xt)))
    m.eval()
    assert_close(m(xt), np.where(x >= 0, x, x * 0.3), rtol=1e-6, atol=1e-7)
    with pytest.raises(ValueError, match="must not exceed"):
        nn.RReLU(0.5, 0.1)
    with pytest.raises(TypeError, match="floating-point"):
        nn.RReLU()(vtl.asarray([1, -1]))


def test_rrelu_gradients():
    x = _rand(3, 4)
    check_grad(lambda t: F.rrelu(t, 0.1, 0.3, training=True,
                                 generator=vtl.random.Generator(2)), x)
    check_grad(lambda t: F.rrelu(t), x)


def test_softmax2d_identity_bilinear(backend):
    x = _rand(2, 3, 2, 2, dtype="float32")
    e = np.exp(x - x.max(axis=1, keepdims=True))
    assert_close(nn.Softmax2d()(vtl.asarray(x)), e / e.sum(axis=1, keepdims=True),
                 rtol=1e-5, atol=1e-6)
    assert_close(nn.Softmax2d()(vtl.asarray(x[0])), (e / e.sum(axis=1, keepdims=True))[0],
                 rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match=r"Softmax2d: expected a 3-D"):
        nn.Softmax2d()(vtl.asarray(x[0, 0]))
    xt = vtl.asarray(x)
    assert nn.Identity(5, foo=1)(xt) is xt
    assert nn.Bilinear(2, 3, 4)(vtl.ones((5, 2)), vtl.ones((5, 3))).shape == (5, 4)


# -- plain array-API arrays (no autograd) ---------------------------------------------------
STRICT_CASES = {
    "interpolate_bilinear": lambda x, i: F.interpolate(x, size=(3, 5), mode="bilinear"),
    "interpolate_nearest": lambda x, i: F.interpolate(x, scale_factor=1.5),
    "interpolate_area": lambda x, i: F.interpolate(x, size=(1, 3), mode="area"),
    "unfold": lambda x, i: F.unfold(x, 2, padding=1),
    "fold": lambda x, i: F.fold(F.unfold(x, 2, padding=1), (2, 4), 2, padding=1),
    "pixel_shuffle": lambda x, i: F.pixel_shuffle(x, 1),
    "rms_norm": lambda x, i: F.rms_norm(x, 4),
    "local_response_norm": lambda x, i: F.local_response_norm(x, 2),
    "embedding_bag_mean": lambda x, i: F.embedding_bag(i, x[0, 0, ...], i[:2], mode="mean"),
    "embedding_bag_max": lambda x, i: F.embedding_bag(i, x[0, 0, ...], i[:2], mode="max"),
}


@pytest.mark.parametrize("device", ["CPU_DEVICE", "no_x64"])
@pytest.mark.parametrize("name", sorted(STRICT_CASES))
def test_functional_on_array_api_strict(name, device):
    xs = pytest.importorskip("array_api_strict")
    dev = xs.Device(device)
    x_np = (np.arange(8).reshape(1, 1, 2, 4) * 0.3 - 1.5).astype(np.float32)
    i_np = np.array([0, 1, 1])
    dt_int = xs.int32 if device == "no_x64" else xs.int64
    x = xs.asarray(x_np, device=dev)
    i = xs.asarray(i_np, dtype=dt_int, device=dev)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = STRICT_CASES[name](x, i)
    assert out.device == dev
    host = np.asarray(out.to_device(xs.Device("CPU_DEVICE")))
    expect = to_numpy(STRICT_CASES[name](vtl.asarray(x_np, backend="numpy"),
                                         vtl.asarray(i_np, backend="numpy")))
    np.testing.assert_allclose(host, expect, rtol=1e-6, atol=1e-6)


# -- no waits for the device in a step (after the first call built the geometry) -------------
@pytest.mark.parametrize("name", ["wgpu", "cupy"])
def test_steps_do_not_wait_for_the_device(name):
    from conftest import BACKENDS
    from test_sync_free import count_waits

    if name not in BACKENDS or not vtl.backends.get(name).is_available:
        pytest.skip(f"backend {name} not selected or unavailable")
    with vtl.use_backend(name):
        x = vtl.asarray(_rand(2, 4, 4, 4, dtype="float32"), requires_grad=True)
        w = vtl.asarray(_rand(10, 3, dtype="float32"), requires_grad=True)
        idx = vtl.asarray(BAG_IDX)
        off = vtl.asarray([0, 2, 2, 5])
        norm = nn.InstanceNorm2d(4, affine=True)

        def step():
            y = F.interpolate(x, size=(6, 3), mode="bicubic")
            y = F.pixel_shuffle(F.unfold(norm(y), 2, padding=1)[:, :, :8].reshape(2, 16, 2, 4), 2)
            z = F.fold(F.unfold(x, 2, stride=2), (4, 4), 2, stride=2)
            e = F.embedding_bag(idx, w, off, mode="max") + F.embedding_bag(
                idx, w, off, mode="mean", scale_grad_by_freq=True, padding_idx=4)
            loss = vtl.mean(y) + vtl.mean(F.rms_norm(z, 4)) + vtl.mean(
                F.local_response_norm(z, 3)) + vtl.mean(e) + vtl.mean(F.rrelu(z, training=True))
            loss.backward()

        step()  # builds and uploads the cached index arrays
        with count_waits(name) as waits:
            step()
        assert waits == []


def test_out_of_range_indices_raise(backend):
    w = vtl.asarray(_rand(4, 2, dtype="float32"), requires_grad=True)
    with pytest.raises(IndexError, match="out of bounds"):
        to_numpy(F.embedding(vtl.asarray([1, 7]), w, scale_grad_by_freq=True))
    with pytest.raises(IndexError, match="out of bounds"):
        to_numpy(F.embedding_bag(vtl.asarray([1, 9, 2]), w, vtl.asarray([0, 1]), mode="sum",
                                 scale_grad_by_freq=True))
