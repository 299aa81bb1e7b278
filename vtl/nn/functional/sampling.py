"""Resampling and rearranging: interpolate (and the deprecated upsample family),
pixel_shuffle/pixel_unshuffle, unfold (im2col) and fold (col2im).

Every resampling mode of :func:`interpolate` is separable: along each spatial axis
an output position reads ``K`` input positions (1 for the nearest modes, 2 for the
linear ones, 4 for bicubic, the window for area) with weights that depend only on
the sizes. The source indices and weights follow PyTorch's CPU kernels
(``aten/src/ATen/native/UpSample.h``), computed on the host in the precision
PyTorch uses (float32 for float16/float32 inputs, float64 for float64 inputs), and
each axis becomes ``K`` gathers (``take``) and a weighted sum, last axis first as
PyTorch's kernels nest them. The gradient is therefore the scatter-add of
``take``'s rule, and gradients of gradients work.

``unfold`` is one gather of every kernel tap of every block from the flattened
image (padding taps read an appended zero), ``fold`` its adjoint written as the
transposed gather: each output pixel sums the block entries that cover it, read by
one ``take`` (uncovered slots read an appended zero) and one sum, so fold is
portable too and differentiable (its gradient is ``unfold`` of the output
gradient, up to the scatter-add of ``take``'s rule).
"""

from __future__ import annotations

import math
import operator
import struct
import warnings
from collections import OrderedDict
from functools import lru_cache
from typing import Any

from ... import _autocast
from ..._tensor import Tensor
from ...capture import hold
from ._utils import namespace

__all__ = [
    "fold", "interpolate", "pixel_shuffle", "pixel_unshuffle", "unfold", "upsample",
    "upsample_bilinear", "upsample_nearest",
]

_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear", "area")
_LINEAR_RANK = {"linear": 3, "bilinear": 4, "bicubic": 4, "trilinear": 5}
_CUBIC_A = -0.75


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(x.shape)


# -- host precision helpers -----------------------------------------------------------------
_F32 = struct.Struct("f")


def _f32(v: float) -> float:
    """``v`` rounded to the nearest float32 (as a C ``(float)`` cast)."""
    return _F32.unpack(_F32.pack(v))[0]


def _f64(v: float) -> float:
    return v


# -- device arrays of the geometry (built once per device) ----------------------------------
_CACHE_SIZE = 64
_dev_cache: OrderedDict[tuple, Any] = OrderedDict()


def _device_key(xp: Any, x: Any) -> Any:
    if isinstance(x, Tensor):
        return x._device
    dev = x.device
    try:
        hash(dev)
        return (id(xp), dev)
    except TypeError:
        return (id(xp), repr(dev))


def _index_dtype(xp: Any, x: Any) -> Any:
    return xp.__array_namespace_info__().default_dtypes(device=x.device)["indexing"]


def _cached(key: tuple, xp: Any, x: Any, build: Any) -> Any:
    """``build()`` (arrays of ``x``'s namespace and device), kept per device."""
    k = key + (_device_key(xp, x),)
    hit = _dev_cache.get(k)
    if hit is not None:
        try:
            _dev_cache.move_to_end(k)
        except KeyError:  # dropped by another thread meanwhile
            pass
        hold(hit)
        return hit
    val = build()
    _dev_cache[k] = val
    while len(_dev_cache) > _CACHE_SIZE:
        _dev_cache.popitem(last=False)
    hold(val)
    return val


# -- argument checks ------------------------------------------------------------------------
def _ntuple(v: Any, n: int, what: str, fname: str, minimum: int) -> tuple[int, ...]:
    try:
        t = tuple(operator.index(a) for a in v) if isinstance(v, (tuple, list)) else \
            (operator.index(v),) * n
    except TypeError:
        raise TypeError(f"{fname}(): {what} must be an int or a tuple of {n} ints, "
                        f"got {v!r}") from None
    if len(t) != n:
        raise ValueError(f"{fname}(): {what} must be an int or a tuple of {n} ints, got {v!r}")
    if any(a < minimum for a in t):
        raise ValueError(f"{fname}(): {what} must be >= {minimum}, got {v!r}")
    return t


def _positive_int(v: Any, what: str, fname: str) -> int:
    try:
        r = operator.index(v)
    except TypeError:
        raise TypeError(f"{fname}(): {what} must be an int, got {type(v).__name__}") from None
    if r < 1:
        raise ValueError(f"{fname}(): {what} must be positive, got {r}")
    return r


# -- interpolate: the taps of one axis --------------------------------------------------------
def _scales_value(rnd: Any, scale: float | None, n_in: int, n_out: int) -> float:
    """PyTorch's ``compute_scales_value``: ``1 / scale`` when a scale is given, else
    ``in / out`` (in the kernel's precision)."""
    if scale is not None and scale > 0:
        return rnd(1.0 / scale)
    return rnd(rnd(float(n_in)) / rnd(float(n_out)))


def _area_scale(rnd: Any, n_in: int, n_out: int, align_corners: bool,
                scale: float | None) -> float:
    """PyTorch's ``area_pixel_compute_scale``."""
    if align_corners:
        return rnd(rnd(float(n_in - 1)) / rnd(float(n_out - 1))) if n_out > 1 else 0.0
    return _scales_value(rnd, scale, n_in, n_out)


def _source_index(rnd: Any, scale: float, dst: int, align_corners: bool, cubic: bool) -> float:
    """PyTorch's ``area_pixel_compute_source_index``."""
    if align_corners:
        return rnd(scale * rnd(float(dst)))
    src = rnd(rnd(scale * rnd(dst + 0.5)) - 0.5)
    return 0.0 if (not cubic and src < 0.0) else src


def _guard(rnd: Any, real: float, n_in: int) -> tuple[int, float]:
    """PyTorch's ``guard_index_and_lambda``: the lower index and the clamped fraction."""
    i = min(math.floor(real), n_in - 1)
    return i, min(max(rnd(real - float(i)), 0.0), 1.0)


def _cubic_coeffs(rnd: Any, t: float) -> tuple[float, float, float, float]:
    """PyTorch's ``get_cubic_upsample_coefficients`` (Keys' kernel with ``A = -0.75``)."""
    a = _CUBIC_A

    def conv1(x: float) -> float:  # |x| <= 1
        return rnd(rnd(rnd(rnd(rnd((a + 2.0) * x) - (a + 3.0)) * x) * x) + 1.0)

    def conv2(x: float) -> float:  # 1 < |x| < 2
        return rnd(rnd(rnd(rnd(rnd(rnd(a * x) - 5.0 * a) * x) + 8.0 * a) * x) - 4.0 * a)

    x2 = rnd(1.0 - t)
    return conv2(rnd(t + 1.0)), conv1(t), conv1(x2), conv2(rnd(x2 + 1.0))


@lru_cache(maxsize=256)
def _axis_taps(mode: str, n_in: int, n_out: int, align_corners: bool, scale: float | None,
               double: bool) -> tuple[tuple[tuple[int, ...], ...],
                                      tuple[tuple[float, ...], ...] | None,
                                      tuple[int, ...] | None]:
    """``(index, weight, count)`` of one axis: ``index[j][o]`` is the input position of
    tap ``j`` of output ``o`` and ``weight[j][o]`` its weight (``None`` for the nearest
    modes); ``count[o]`` is the window length of the area mode (else ``None``)."""
    rnd = _f64 if double else _f32
    outs = range(n_out)
    if mode == "nearest":  # PyTorch's nearest_idx (float32 scale, exact for 1x and 2x)
        if n_out == n_in:
            idx = tuple(outs)
        elif n_out == 2 * n_in:
            idx = tuple(o >> 1 for o in outs)
        else:
            sc = _scales_value(_f32, scale, n_in, n_out)
            idx = tuple(min(math.floor(_f32(_f32(float(o)) * sc)), n_in - 1) for o in outs)
        return (idx,), None, None
    if mode == "nearest-exact":  # PyTorch's nearest_exact_idx: floor((o + 0.5) * scale)
        sc = _scales_value(_f32, scale, n_in, n_out)
        idx = tuple(min(math.floor(_f32((o + 0.5) * sc)), n_in - 1) for o in outs)
        return (idx,), None, None
    if mode == "area":  # PyTorch's adaptive windows [floor(o*in/out), ceil((o+1)*in/out))
        starts = [(o * n_in) // n_out for o in outs]
        ends = [-((-(o + 1) * n_in) // n_out) for o in outs]
        k = max(e - b for b, e in zip(starts, ends, strict=True))
        idx = tuple(tuple(min(b + j, e - 1) for b, e in zip(starts, ends, strict=True))
                    for j in range(k))
        mask = tuple(tuple(1.0 if b + j < e else 0.0 for b, e in zip(starts, ends, strict=True))
                     for j in range(k))
        return idx, mask, tuple(e - b for b, e in zip(starts, ends, strict=True))
    scale_v = _area_scale(rnd, n_in, n_out, align_corners, scale)
    if mode == "bicubic":
        i_taps: list[list[int]] = [[], [], [], []]
        w_taps: list[list[float]] = [[], [], [], []]
        for o in outs:
            real = _source_index(rnd, scale_v, o, align_corners, True)
            i0, t = _guard(rnd, real, n_in)
            for j, c in enumerate(_cubic_coeffs(rnd, t)):
                i_taps[j].append(min(max(i0 - 1 + j, 0), n_in - 1))
                w_taps[j].append(c)
        return tuple(map(tuple, i_taps)), tuple(map(tuple, w_taps)), None
    # linear, bilinear, trilinear: PyTorch's compute_source_index_and_lambda
    i0s, i1s, l0s, l1s = [], [], [], []
    for o in outs:
        if n_out == n_in:
            i0, i1, l0, l1 = o, o, 1.0, 0.0
        else:
            real = _source_index(rnd, scale_v, o, align_corners, False)
            i0, l1 = _guard(rnd, real, n_in)
            i1 = i0 + (1 if i0 < n_in - 1 else 0)
            l0 = rnd(1.0 - l1)
        i0s.append(i0)
        i1s.append(i1)
        l0s.append(l0)
        l1s.append(l1)
    return (tuple(i0s), tuple(i1s)), (tuple(l0s), tuple(l1s)), None


def _resample_axis(xp: Any, x: Any, axis: int, mode: str, n_out: int, align_corners: bool,
                   scale: float | None) -> Any:
    """``x`` resampled to ``n_out`` positions along ``axis`` (a non-negative axis)."""
    n_in = x.shape[axis]
    if n_out == 0:  # area mode only (adaptive pooling to nothing)
        return x[(slice(None),) * axis + (slice(0, 0),)]
    if n_out == n_in and (mode in ("nearest", "linear", "bilinear", "trilinear", "area") or (
            scale is None and mode == "nearest-exact")):
        return x  # PyTorch's kernels copy here (nearest-exact's rule gives the identity)
    double = x.dtype == xp.float64
    idx, wts, count = _axis_taps(mode, n_in, n_out, align_corners, scale, double)
    trail = (1,) * (x.ndim - axis - 1)

    def build() -> tuple:
        idt = _index_dtype(xp, x)
        if mode == "area":  # every window slot in one index, a mask of the real ones
            ii = xp.asarray([i for t in idx for i in t], dtype=idt, device=x.device)
            mask = xp.reshape(xp.asarray([[m == 1.0 for m in t] for t in wts],
                                         device=x.device), (len(idx), n_out, *trail))
            cc = xp.reshape(xp.asarray([float(c) for c in count], dtype=x.dtype,
                                       device=x.device), (n_out, *trail))
            return ii, mask, cc
        ii = tuple(xp.asarray(list(t), dtype=idt, device=x.device) for t in idx)
        ww = None if wts is None else tuple(
            xp.reshape(xp.asarray(list(w), dtype=x.dtype, device=x.device), (n_out, *trail))
            for w in wts)
        return ii, ww, None

    key = ("interp", mode, n_in, n_out, align_corners, scale, str(x.dtype), x.ndim - axis)
    ii, ww, cc = _cached(key, xp, x, build)
    if mode == "area":  # PyTorch's adaptive average: the window's sum over its length
        t = xp.take(x, ii, axis=axis)
        t = xp.reshape(t, _shape(x)[:axis] + (len(idx), n_out) + _shape(x)[axis + 1:])
        return xp.sum(xp.where(ww, t, 0.0), axis=axis) / cc
    out = None
    for j, i in enumerate(ii):  # sum_j x[idx_j] * w_j in tap order, as PyTorch's kernels
        t = xp.take(x, i, axis=axis)
        if ww is not None:
            t = t * ww[j]
        out = t if out is None else out + t
    return out


def _output_geometry(input: Any, size: Any, scale_factor: Any,  # noqa: A002
                     recompute_scale_factor: bool | None, mode: str
                     ) -> tuple[tuple[int, ...], tuple[float | None, ...]]:
    dim = input.ndim - 2
    spatial = _shape(input)[2:]
    if size is not None and scale_factor is not None:
        raise ValueError("interpolate(): only one of size or scale_factor should be defined")
    if size is not None:
        if recompute_scale_factor:
            raise ValueError("interpolate(): recompute_scale_factor is not meaningful with an "
                             "explicit size")
        sizes = list(size) if isinstance(size, (tuple, list)) else [size] * dim
        if len(sizes) != dim:
            raise ValueError(f"interpolate(): input with spatial shape {spatial} and size "
                             f"{size!r} must have the same number of spatial dimensions "
                             f"(input (N, C, d1, ..., dK), size (o1, ..., oK))")
        try:
            out = tuple(operator.index(s) for s in sizes)
        except TypeError:
            raise TypeError(f"interpolate(): size must be an int or a tuple of ints, got "
                            f"{size!r}") from None
        scales: tuple[float | None, ...] = (None,) * dim
    elif scale_factor is not None:
        factors = list(scale_factor) if isinstance(scale_factor, (tuple, list)) \
            else [scale_factor] * dim
        if len(factors) != dim:
            raise ValueError(f"interpolate(): input with spatial shape {spatial} and "
                             f"scale_factor {scale_factor!r} must have the same number of "
                             f"spatial dimensions")
        try:
            factors = [float(f) for f in factors]
        except TypeError:
            raise TypeError(f"interpolate(): scale_factor must be a number or a tuple of "
                            f"numbers, got {scale_factor!r}") from None
        if any(not math.isfinite(f) or f <= 0 for f in factors):
            raise ValueError(f"interpolate(): scale_factor must be positive and finite, got "
                             f"{scale_factor!r}")
        out = tuple(math.floor(n * f) for n, f in zip(spatial, factors, strict=True))
        recompute = recompute_scale_factor or mode == "area"
        scales = (None,) * dim if recompute else tuple(factors)
    else:
        raise ValueError("interpolate(): either size or scale_factor should be defined")
    if any(o < 0 or (o == 0 and mode != "area") for o in out) or any(n <= 0 for n in spatial):
        raise ValueError(f"interpolate(): input and output sizes should be greater than 0, "
                         f"got input spatial shape {spatial} and output size {out}")
    return out, scales


def interpolate(input: Any, size: Any = None, scale_factor: Any = None,  # noqa: A002
                mode: str = "nearest", align_corners: bool | None = None,
                recompute_scale_factor: bool | None = None, antialias: bool = False) -> Any:
    """Resample the spatial axes of an ``(N, C, d1[, d2[, d3]])`` input to ``size`` or by
    ``scale_factor``.

    Modes as PyTorch: ``'nearest'`` (source ``floor(o * in / out)``, PyTorch's legacy
    rule), ``'nearest-exact'`` (``floor((o + 0.5) * in / out)``), ``'linear'`` (3-D
    input), ``'bilinear'`` and ``'bicubic'`` (4-D, Keys' cubic with ``A = -0.75``,
    borders replicated), ``'trilinear'`` (5-D) and ``'area'`` (adaptive average
    pooling). ``align_corners`` (linear modes only; default ``False``) maps the corner
    pixels' centres onto each other. With ``scale_factor`` the output size is
    ``floor(in * scale_factor)``; the kernels use ``1 / scale_factor`` as the step
    unless ``recompute_scale_factor=True`` (then ``in / out``), as PyTorch.
    ``antialias=True`` is not supported (``NotImplementedError``).

    Args:
        input: ``(N, C, d1[, d2[, d3]])``.
        size: Output spatial size: an int or a tuple (this or ``scale_factor``).
        scale_factor: Multiplier of the spatial size: a float or a tuple.
        mode: The algorithm (see above).
        align_corners: For the linear and cubic modes: align the corner pixels (default ``False``).
        recompute_scale_factor: Compute the interpolation from the output size rather than from
            ``scale_factor``.
        antialias: Must be ``False``: vtl has no anti-aliasing.

    Returns:
        The resampled tensor.

    Raises:
        ValueError: If ``mode``, the rank or the size arguments are invalid.
        NotImplementedError: If ``antialias=True``.
        TypeError: If a linear or cubic mode gets a non-floating input.
    """
    xp = namespace(input)
    if mode not in _MODES:
        raise ValueError(f"interpolate(): mode must be one of {', '.join(map(repr, _MODES))}, "
                         f"got {mode!r}")
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("interpolate(): align_corners option can only be set with the "
                             "interpolating modes: linear | bilinear | bicubic | trilinear")
        align_corners = False
    elif align_corners is None:
        align_corners = False
    if input.ndim not in (3, 4, 5):
        raise ValueError(f"interpolate(): expected a 3-D, 4-D or 5-D input (N, C, d1, ...), "
                         f"got shape {_shape(input)}")
    need = _LINEAR_RANK.get(mode)
    if need is not None and input.ndim != need:
        raise ValueError(f"interpolate(): got a {input.ndim}-D input, but {mode} mode needs a "
                         f"{need}-D input")
    if antialias:
        if not (mode in ("bilinear", "bicubic") and input.ndim == 4):
            raise ValueError("interpolate(): anti-alias option is restricted to bilinear and "
                             "bicubic modes and requires a 4-D input")
        raise NotImplementedError("interpolate(): antialias=True is not supported")
    if mode not in ("nearest", "nearest-exact") and not xp.isdtype(input.dtype,
                                                                     "real floating"):
        raise TypeError(f"interpolate(): {mode} mode needs a real floating-point input, got "
                        f"{input.dtype}")
    out, scales = _output_geometry(input, size, scale_factor, recompute_scale_factor, mode)
    x = input
    for a in reversed(range(len(out))):
        x = _resample_axis(xp, x, a + 2, mode, out[a], bool(align_corners), scales[a])
    return x


def upsample(input: Any, size: Any = None, scale_factor: Any = None,  # noqa: A002
             mode: str = "nearest", align_corners: bool | None = None) -> Any:
    """Deprecated alias of :func:`interpolate` (as in PyTorch; warns).

    Args:
        input: ``(N, C, d1[, d2[, d3]])``.
        size: Output spatial size: an int or a tuple (this or ``scale_factor``).
        scale_factor: Multiplier of the spatial size: a float or a tuple.
        mode: The algorithm (see above).
        align_corners: For the linear and cubic modes: align the corner pixels (default ``False``).

    Returns:
        The resampled tensor.
    """
    warnings.warn("nn.functional.upsample is deprecated. Use nn.functional.interpolate "
                  "instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Any, size: Any = None, scale_factor: Any = None) -> Any:  # noqa: A002
    """Deprecated: ``interpolate(input, size, scale_factor, mode='nearest')`` (warns).

    Args:
        input: ``(N, C, d1[, d2[, d3]])``.
        size: Output spatial size: an int or a tuple (this or ``scale_factor``).
        scale_factor: Multiplier of the spatial size: a float or a tuple.

    Returns:
        The resampled tensor.
    """
    warnings.warn("nn.functional.upsample_nearest is deprecated. Use "
                  "nn.functional.interpolate instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Any, size: Any = None, scale_factor: Any = None) -> Any:  # noqa: A002
    """Deprecated: ``interpolate(..., mode='bilinear', align_corners=True)`` (warns).

    Args:
        input: ``(N, C, d1[, d2[, d3]])``.
        size: Output spatial size: an int or a tuple (this or ``scale_factor``).
        scale_factor: Multiplier of the spatial size: a float or a tuple.

    Returns:
        The resampled tensor.
    """
    warnings.warn("nn.functional.upsample_bilinear is deprecated. Use "
                  "nn.functional.interpolate instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# -- pixel shuffle ----------------------------------------------------------------------------
def pixel_shuffle(input: Any, upscale_factor: int) -> Any:  # noqa: A002
    """Rearrange ``(*, C * r**2, H, W)`` into ``(*, C, H * r, W * r)`` with ``r =
    upscale_factor``: ``out[..., c, h*r + i, w*r + j] = in[..., c*r*r + i*r + j, h, w]``.

    Args:
        input: The input tensor.
        upscale_factor: The factor ``r``.

    Returns:
        A tensor of shape ``(*, C, H * r, W * r)``.

    Raises:
        ValueError: If the input has fewer than 3 dimensions or its channels are not divisible by
            ``r**2``.
    """
    xp = namespace(input)
    r = _positive_int(upscale_factor, "upscale_factor", "pixel_shuffle")
    if input.ndim < 3:
        raise ValueError(f"pixel_shuffle(): expected an input of at least 3 dimensions "
                         f"(*, C, H, W), got shape {_shape(input)}")
    *lead, c, h, w = _shape(input)
    if c % (r * r):
        raise ValueError(f"pixel_shuffle(): the channel axis ({c}) of input shape "
                         f"{_shape(input)} must be divisible by upscale_factor**2 ({r * r})")
    L = len(lead)
    x = xp.reshape(input, (*lead, c // (r * r), r, r, h, w))
    x = xp.permute_dims(x, (*range(L), L, L + 3, L + 1, L + 4, L + 2))
    return xp.reshape(x, (*lead, c // (r * r), h * r, w * r))


def pixel_unshuffle(input: Any, downscale_factor: int) -> Any:  # noqa: A002
    """The inverse of :func:`pixel_shuffle`: ``(*, C, H * r, W * r)`` into
    ``(*, C * r**2, H, W)`` with ``r = downscale_factor``.

    Args:
        input: The input tensor.
        downscale_factor: The factor ``r``.

    Returns:
        A tensor of shape ``(*, C * r**2, H, W)``.

    Raises:
        ValueError: If the input has fewer than 3 dimensions or its height or width is not
            divisible by ``r``.
    """
    xp = namespace(input)
    r = _positive_int(downscale_factor, "downscale_factor", "pixel_unshuffle")
    if input.ndim < 3:
        raise ValueError(f"pixel_unshuffle(): expected an input of at least 3 dimensions "
                         f"(*, C, H, W), got shape {_shape(input)}")
    *lead, c, h, w = _shape(input)
    if h % r or w % r:
        raise ValueError(f"pixel_unshuffle(): the spatial axes ({h}, {w}) of input shape "
                         f"{_shape(input)} must be divisible by downscale_factor ({r})")
    L = len(lead)
    x = xp.reshape(input, (*lead, c, h // r, r, w // r, r))
    x = xp.permute_dims(x, (*range(L), L, L + 2, L + 4, L + 1, L + 3))
    return xp.reshape(x, (*lead, c * r * r, h // r, w // r))


# -- unfold / fold ----------------------------------------------------------------------------
def _blocks(size: tuple[int, int], k: tuple[int, int], d: tuple[int, int],
            p: tuple[int, int], s: tuple[int, int]) -> tuple[int, int]:
    return tuple((size[a] + 2 * p[a] - d[a] * (k[a] - 1) - 1) // s[a] + 1 for a in range(2))


def _unfold_index(xp: Any, x: Any, h: int, w: int, k: tuple[int, int], d: tuple[int, int],
                  p: tuple[int, int], s: tuple[int, int], out: tuple[int, int]) -> Any:
    """The flat pixel (``r * W + c``, or ``H * W`` for a padding tap) read by every tap of
    every block, ordered ``(kh, kw, Ho, Wo)``."""

    def build() -> Any:
        idt = _index_dtype(xp, x)
        axes = []
        for a, size in enumerate((h, w)):
            pos = [[o * s[a] + t * d[a] - p[a] for o in range(out[a])] for t in range(k[a])]
            axes.append((xp.asarray(pos, dtype=idt, device=x.device),
                         xp.asarray([[0 <= v < size for v in row] for row in pos],
                                    device=x.device)))
        (rh, vh), (rw, vw) = axes
        rh = xp.reshape(rh, (k[0], 1, out[0], 1))
        vh = xp.reshape(vh, (k[0], 1, out[0], 1))
        rw = xp.reshape(rw, (1, k[1], 1, out[1]))
        vw = xp.reshape(vw, (1, k[1], 1, out[1]))
        idx = xp.where(vh & vw, rh * w + rw, xp.asarray(h * w, dtype=idt, device=x.device))
        return xp.reshape(idx, (-1,))

    return _cached(("unfold", h, w, k, d, p, s), xp, x, build)


@lru_cache(maxsize=64)
def _fold_covers(h: int, w: int, k: tuple[int, int], d: tuple[int, int], p: tuple[int, int],
                 s: tuple[int, int], out: tuple[int, int]) -> tuple[list, int, int]:
    """Per axis and position ``v``: the ``(tap, block)`` pairs with ``block * stride +
    tap * dilation - pad == v`` (in tap order), and the most pairs of one position."""
    covers = []
    for a, size in enumerate((h, w)):
        per: list[list[tuple[int, int]]] = [[] for _ in range(size)]
        for t in range(k[a]):
            for o in range(out[a]):
                v = o * s[a] + t * d[a] - p[a]
                if 0 <= v < size:
                    per[v].append((t, o))
        covers.append(per)
    return (covers, max(1, max(len(c) for c in covers[0])),
            max(1, max(len(c) for c in covers[1])))


def _fold_index(xp: Any, x: Any, h: int, w: int, k: tuple[int, int], d: tuple[int, int],
                p: tuple[int, int], s: tuple[int, int], out: tuple[int, int]) -> tuple[Any, int]:
    """For every output pixel ``(r, c)`` the ``K`` block entries that cover it, as flat
    positions into the ``(kh * kw * L)`` entries of one channel (``kh * kw * L``, the
    appended zero, for unused slots), ordered ``(H, W, K)``; and ``K``."""
    n_blocks = out[0] * out[1]
    covers, kh_max, kw_max = _fold_covers(h, w, k, d, p, s, out)

    def build() -> Any:
        idt = _index_dtype(xp, x)
        parts = []
        for a, (per, kmax) in enumerate(zip(covers, (kh_max, kw_max), strict=True)):
            # tap t of axis 0 and block row o contribute t*kw*L + o*Wo; of axis 1, t*L + o
            mult_t, mult_o = (k[1] * n_blocks, out[1]) if a == 0 else (n_blocks, 1)
            pos = [[t * mult_t + o * mult_o for t, o in c] + [0] * (kmax - len(c)) for c in per]
            ok = [[True] * len(c) + [False] * (kmax - len(c)) for c in per]
            parts.append((xp.asarray(pos, dtype=idt, device=x.device),
                          xp.asarray(ok, device=x.device)))
        (ph, vh), (pw, vw) = parts
        ph = xp.reshape(ph, (h, 1, kh_max, 1))
        vh = xp.reshape(vh, (h, 1, kh_max, 1))
        pw = xp.reshape(pw, (1, w, 1, kw_max))
        vw = xp.reshape(vw, (1, w, 1, kw_max))
        fill = xp.asarray(k[0] * k[1] * n_blocks, dtype=idt, device=x.device)
        return xp.reshape(xp.where(vh & vw, ph + pw, fill), (-1,))

    return _cached(("fold", h, w, k, d, p, s), xp, x, build), kh_max * kw_max


def _append_zero(xp: Any, x: Any) -> Any:
    """``x`` with one zero appended along its last axis."""
    z = xp.zeros(_shape(x)[:-1] + (1,), dtype=x.dtype, device=x.device)
    return xp.concat([x, z], axis=-1)


def _fold_args(kernel_size: Any, dilation: Any, padding: Any, stride: Any,
               fname: str) -> tuple[tuple[int, int], ...]:
    return (_ntuple(kernel_size, 2, "kernel_size", fname, 1),
            _ntuple(dilation, 2, "dilation", fname, 1),
            _ntuple(padding, 2, "padding", fname, 0),
            _ntuple(stride, 2, "stride", fname, 1))


def unfold(input: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0,  # noqa: A002
           stride: Any = 1) -> Any:
    """Extract sliding blocks (im2col): ``(N, C, H, W)`` (or unbatched ``(C, H, W)``) to
    ``(N, C * kh * kw, L)`` with ``L`` blocks in row-major order; row ``c * kh * kw +
    i * kw + j`` holds tap ``(i, j)`` of channel ``c``. Padding taps read zeros.

    Args:
        input: ``(N, C, H, W)`` or ``(C, H, W)``.
        kernel_size: Size of the blocks: an int or a pair.
        dilation: Spacing between the elements of a block.
        padding: Implicit zero padding on both sides.
        stride: Stride of the blocks.

    Returns:
        The blocks, ``(N, C * kh * kw, L)``.

    Raises:
        ValueError: If the input's shape does not fit the sizes.
    """
    xp = namespace(input)
    k, d, p, s = _fold_args(kernel_size, dilation, padding, stride, "unfold")
    if input.ndim not in (3, 4):
        raise ValueError(f"unfold(): expected a 3-D (unbatched) or 4-D (batched) input, got "
                         f"shape {_shape(input)}")
    x = input if input.ndim == 4 else xp.expand_dims(input, axis=0)
    n, c, h, w = _shape(x)
    if c == 0 or h == 0 or w == 0:
        raise ValueError(f"unfold(): expected non-empty channel and spatial axes, got input of "
                         f"shape {_shape(input)}")
    out = _blocks((h, w), k, d, p, s)
    if out[0] < 1 or out[1] < 1:
        raise ValueError(f"unfold(): given input with spatial size {(h, w)}, kernel_size={k}, "
                         f"dilation={d}, padding={p}, the array of sliding blocks has shape "
                         f"{out}, but its components must be at least one")
    idx = _unfold_index(xp, x, h, w, k, d, p, s, out)
    flat = xp.reshape(x, (n, c, h * w))
    if p != (0, 0):
        flat = _append_zero(xp, flat)
    cols = xp.reshape(xp.take(flat, idx, axis=2), (n, c * k[0] * k[1], out[0] * out[1]))
    return cols if input.ndim == 4 else cols[0, ...]


def fold(input: Any, output_size: Any, kernel_size: Any, dilation: Any = 1,  # noqa: A002
         padding: Any = 0, stride: Any = 1) -> Any:
    """Combine sliding blocks into an image (col2im), summing overlapping entries: the
    adjoint of :func:`unfold`. ``(N, C * kh * kw, L)`` (or unbatched ``(C * kh * kw, L)``)
    to ``(N, C, *output_size)``; ``L`` must be the number of blocks that fit.

    Args:
        input: ``(N, C * kh * kw, L)`` or ``(C * kh * kw, L)``.
        output_size: Spatial size ``(H, W)`` of the output: an int or a pair.
        kernel_size: Size of the blocks: an int or a pair.
        dilation: Spacing between the elements of a block.
        padding: Implicit zero padding on both sides.
        stride: Stride of the blocks.

    Returns:
        The image, ``(N, C, *output_size)``.

    Raises:
        ValueError: If the input's shape does not fit the sizes.
    """
    xp = namespace(input)
    k, d, p, s = _fold_args(kernel_size, dilation, padding, stride, "fold")
    size = _ntuple(output_size, 2, "output_size", "fold", 1)
    if input.ndim not in (2, 3):
        raise ValueError(f"fold(): expected a 2-D (unbatched) or 3-D (batched) input, got "
                         f"shape {_shape(input)}")
    y = input if input.ndim == 3 else xp.expand_dims(input, axis=0)
    n, ck, nl = _shape(y)
    kk = k[0] * k[1]
    if ck == 0 or ck % kk:
        raise ValueError(f"fold(): expected size of input's dimension 1 to be a non-zero "
                         f"multiple of kernel_size[0] * kernel_size[1] = {kk}, got input of "
                         f"shape {_shape(input)}")
    out = _blocks(size, k, d, p, s)
    if out[0] < 1 or out[1] < 1 or nl != out[0] * out[1]:
        raise ValueError(f"fold(): given output_size={size}, kernel_size={k}, dilation={d}, "
                         f"padding={p}, stride={s}, expected size of input's last dimension "
                         f"to match the number of sliding blocks {out[0]} * {out[1]} = "
                         f"{out[0] * out[1]}, got input of shape {_shape(input)}")
    c = ck // kk
    h, w = size
    idx, kmax = _fold_index(xp, y, h, w, k, d, p, s, out)
    flat = _append_zero(xp, xp.reshape(y, (n, c, kk * nl)))
    g = xp.take(flat, idx, axis=2)
    if kmax > 1:
        g = xp.sum(xp.reshape(g, (n, c, h * w, kmax)), axis=3)
    img = xp.reshape(g, (n, c, h, w))
    return img if input.ndim == 3 else img[0, ...]


# autocast (vtl.amp): PyTorch runs upsampling in float32
_autocast.apply(globals(), float32_ops=("interpolate", "upsample", "upsample_bilinear",
                                        "upsample_nearest"))
