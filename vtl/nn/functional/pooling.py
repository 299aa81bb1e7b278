"""Pooling: max_pool1d/2d/3d, avg_pool1d/2d/3d, adaptive_avg_pool1d/2d/3d,
adaptive_max_pool1d/2d/3d, lp_pool1d/2d/3d and max_unpool1d/2d/3d.

All windows come from ONE gather of the channels-last pixel rows (the cached
tap index of ``_im2col``; padding taps read fill rows of ``-inf`` or 0), and
results are ``(N, C, Ho, Wo)`` views of channels-last storage. Max pooling
takes the ``argmax`` over each window's taps (no graph) and then gathers the
chosen pixels with one differentiable ``take``, so the gradient is one
scatter-add to the first maximum of each window (PyTorch's rule for ties)
and nan propagates. Average pooling sums the gathered taps and divides by
PyTorch's divisors (``count_include_pad``, ``ceil_mode``,
``divisor_override``). Adaptive average pooling averages PyTorch's windows
``[floor(i*L/O), ceil((i+1)*L/O))`` separably (rows, then columns).

A backend may provide faster max/avg pooling on raw arrays as ``backend.kernel("pool2d")``
(the contract is ``Pool2dKernel`` in ``vtl.backends.kernels``; the kernels are
``vtl/backends/*/pool.py``). On vtl tensors of such a
backend max_pool1d/2d and avg_pool1d/2d are then ONE graph node whose plain
backward calls the kernel; with ``create_graph=True`` the rule is the portable
path's VJP written with vtl functions (a scatter-add of the output gradient),
so higher-order gradients work. Kernel results equal the portable ones (max:
exactly, the same element of each window; avg: up to rounding).

3-D max and average pooling are separable: a 2-D pool over the height and width
of all ``N*C*D`` planes, then a ``(kD, 1)`` 2-D pool over the depth of the result
seen as ``(N, C, D, H_out*W_out)`` (both on the backend kernels where there are
some). The maximum of a box is the maximum over depth of the per-slice maxima,
and the first maximum in ``(d, h, w)`` order is the first one of the first slice
that holds it, so values, indices and gradients are those of one 3-D window;
PyTorch's average divisors are products of per-axis factors, so the two passes
divide by the 3-D divisor (``divisor_override`` is applied once, in the depth
pass, after a plain sum over each plane's window).

Adaptive max pooling gathers every output's window (PyTorch's windows, padded to
the largest one by repeating its first element) with one ``take`` of a cached
index, takes the ``argmax`` (no graph) and gathers the chosen elements with one
differentiable ``take``. Power-average pooling (``lp_pool*``) is PyTorch's
formula on ``avg_pool*`` of ``x ** p``.

Max unpooling inverts the scatter ``out[index] = x`` without a scatter (the
standard has none): the flat target of every input element is sorted once
(``argsort``), each output position finds its last writer with
``searchsorted``, and one differentiable ``take`` reads it (zero where there
is none).
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

from ..._ops._core import needs_grad, new, record
from ..._tensor import Tensor
from ...autograd import grad_mode
from ...backends._common.pool import avg_divisors
from ._im2col import (
    adaptive_index,
    arange_host,
    gather_rows,
    host_index,
    on_device,
    pixel_rows,
    raw,
    tap_index,
)
from ._utils import detach, namespace
from .activation import relu
from .conv import _ntuple, _shape

__all__ = [
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d",
    "adaptive_max_pool2d", "adaptive_max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
    "lp_pool1d", "lp_pool2d", "lp_pool3d", "max_pool1d", "max_pool2d", "max_pool3d",
    "max_unpool1d", "max_unpool2d", "max_unpool3d",
    "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
    "adaptive_max_pool3d_with_indices", "max_pool1d_with_indices", "max_pool2d_with_indices",
    "max_pool3d_with_indices",
]

_grad = grad_mode.state


def _pool_out(size: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    num = size + 2 * p - d * (k - 1) - 1
    out = (num + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:  # the last window must start inside
        out -= 1
    return out


def _check_nonempty(input: Any, nsp: int, fname: str) -> None:  # noqa: A002
    """``ValueError`` for an empty channel or spatial axis (PyTorch's pools allow only an
    empty batch)."""
    shape = _shape(input)
    if 0 in shape[-nsp - 1:]:
        raise ValueError(f"{fname}(): expected non-empty channel and spatial axes (only the "
                         f"batch axis may be empty), got input of shape {shape}")


def _pool_args(input: Any, kernel_size: Any, stride: Any, padding: Any, dilation: Any,  # noqa: A002
               ceil_mode: bool, nsp: int, fname: str) -> tuple[Any, ...]:
    if input.ndim not in (nsp + 1, nsp + 2):
        raise ValueError(f"{fname}(): expected a {nsp + 1}-D (unbatched) or {nsp + 2}-D "
                         f"(batched) input, got shape {_shape(input)}")
    k = _ntuple(kernel_size, nsp, "kernel_size", fname)
    s = k if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0) \
        else _ntuple(stride, nsp, "stride", fname)
    p = _ntuple(padding, nsp, "padding", fname, minimum=0)
    d = _ntuple(dilation, nsp, "dilation", fname)
    if any(p[a] > k[a] // 2 for a in range(nsp)):
        raise ValueError(f"{fname}(): padding {p} should be at most half of the kernel size "
                         f"{k}")
    _check_nonempty(input, nsp, fname)
    spatial = _shape(input)[-nsp:]
    out = tuple(_pool_out(spatial[a], k[a], s[a], p[a], d[a], ceil_mode) for a in range(nsp))
    if any(o < 1 for o in out):
        raise ValueError(f"{fname}(): input of shape {_shape(input)} is too small for "
                         f"kernel_size={k}, stride={s}, padding={p}, dilation={d} "
                         f"(output size {out})")
    return k, s, p, d, out


def _windows(xp: Any, x: Any, k: tuple[int, int], s: tuple[int, int], p: tuple[int, int],
             d: tuple[int, int], out: tuple[int, int], value: float) -> tuple[Any, Any, Any]:
    """Every window of the 4-D ``x`` by one gather: ``(pixels, index, windows)`` with the
    pixel rows ``(N*H*W + fill, C)`` (fill rows hold ``value``), the raw tap index and
    ``windows = take(pixels, index)`` reshaped to ``(N*Ho*Wo, kh*kw, C)``."""
    idx, fill = tap_index(xp, x, k, s, d, p, out)
    pix = pixel_rows(xp, x, fill, value)
    win = gather_rows(xp, pix, idx)
    return pix, idx, xp.reshape(win, (x.shape[0] * out[0] * out[1], k[0] * k[1], x.shape[1]))


def _channels_first(xp: Any, res: Any, n: int, out: tuple[int, int]) -> Any:
    """``(N*Ho*Wo, C)`` rows as an ``(N, C, Ho, Wo)`` view."""
    return xp.permute_dims(xp.reshape(res, (n, out[0], out[1], res.shape[-1])), (0, 3, 1, 2))


def _max_pool(input: Any, kernel_size: Any, stride: Any, padding: Any, dilation: Any,  # noqa: A002
              ceil_mode: bool, return_indices: bool, nsp: int, fname: str) -> Any:
    xp = namespace(input)
    if not xp.isdtype(input.dtype, "real floating"):
        raise TypeError(f"{fname}() needs a real floating-point input, got {input.dtype}")
    k, s, p, d, out = _pool_args(input, kernel_size, stride, padding, dilation, ceil_mode, nsp,
                                 fname)
    kern = _kernel(input)
    if kern is not None:
        return _max_pool_kernel(kern, input, k, s, p, d, out, return_indices, nsp)
    x = input
    if nsp == 1:
        x = xp.expand_dims(x, axis=-2)
        k, s, p, d, out = _lift_1d(k, s, p, d, out)
    batched = x.ndim == 4
    if not batched:
        x = xp.expand_dims(x, axis=0)
    n, c, h, w = x.shape
    kk = k[0] * k[1]
    idx, fill = tap_index(xp, x, k, s, d, p, out)
    pix = pixel_rows(xp, x, fill, -math.inf)  # (N*H*W + fill, C)
    # the argmax (first maximum of each window, nan first) on the raw arrays, no graph
    rpix, rxp = raw(detach(pix), xp)
    m = n * out[0] * out[1]
    win = rxp.reshape(rxp.take(rpix, idx, axis=0), (m, kk, c))
    am = rxp.argmax(win, axis=1)  # (m, C): the tap of each maximum
    if fill:  # a padding tap wins only a window of -inf: its first input tap instead
        real = rxp.reshape(idx < n * h * w, (m, kk))
        first = rxp.argmax(rxp.astype(real, rxp.int8), axis=1, keepdims=True)
        am = rxp.where(rxp.take_along_axis(real, am, axis=1), am, first)
    geometry = (n, h, w, k, s, d, p, out, (1, 1))
    base = on_device(arange_host(0, m * kk, kk, (m, 1)), "tap0", geometry, rxp, rpix)
    # element (not row) numbers of the taps: row * C + channel
    idx_c = on_device(host_index(*geometry)[0] * c, "rows*c", geometry + (c,), rxp, rpix)
    src = rxp.reshape(rxp.take(idx_c, rxp.reshape(am + base, (-1,)), axis=0), (m, c))
    lane = on_device(arange_host(0, c, 1, (c,)), "lane", (c,), rxp, rpix)
    src = rxp.reshape(src + lane, (-1,))
    # the one differentiable gather: gradients go to the chosen pixels only
    res = xp.reshape(gather_rows(xp, xp.reshape(pix, (-1,)), src), (m, c))
    res = _channels_first(xp, res, n, out)
    if nsp == 1:
        res = res[..., 0, :]
    if not batched:
        res = res[0, ...]
    if not return_indices:
        return res
    spatial = on_device(host_index(*geometry)[2], "spatial", geometry, rxp, rpix)
    lk = on_device(arange_host(0, out[0] * out[1] * kk, kk, (1, -1, 1)), "tap1", geometry,
                   rxp, rpix)
    tap = rxp.reshape(rxp.reshape(am, (n, out[0] * out[1], c)) + lk, (-1,))
    pos = rxp.take(spatial, tap, axis=0)
    pos = rxp.permute_dims(rxp.reshape(pos, (n, out[0], out[1], c)), (0, 3, 1, 2))
    if isinstance(input, Tensor):
        pos = new(pos, input._device)
    if nsp == 1:
        pos = pos[..., 0, :]
    if not batched:
        pos = pos[0, ...]
    return res, pos


def _kernel(x: Any) -> Any:
    """The backend's ``pool2d`` kernel for the tensor ``x``, or ``None`` (portable path,
    also for an empty batch or channel axis, which the kernels need not handle)."""
    if not isinstance(x, Tensor) or 0 in x._data.shape:
        return None
    kern = x._device.backend.kernel("pool2d")
    return kern if kern is not None and kern.supports(x._data.dtype) else None


def _as_2d(x_shape: tuple[int, ...], k: tuple[int, ...], s: tuple[int, ...],
           p: tuple[int, ...], d: tuple[int, ...], out: tuple[int, ...], nsp: int) -> tuple:
    """The 4-D shape of a pooling input (a height-1 image for 1-D pools, a batch of one
    for unbatched inputs), the 2-D geometry and the result's shape."""
    if nsp == 2:
        shape4 = x_shape if len(x_shape) == 4 else (1, *x_shape)
    else:
        shape4 = (*x_shape[:-1], 1, x_shape[-1]) if len(x_shape) == 3 else \
            (1, x_shape[0], 1, x_shape[1])
        k, s, p, d, out = _lift_1d(k, s, p, d, out)
    return shape4, (k, s, p, d, out), x_shape[:-nsp] + out[-nsp:]


def _max_pool_kernel(kern: Any, x: Tensor, k: tuple[int, ...], s: tuple[int, ...],
                     p: tuple[int, ...], d: tuple[int, ...], out: tuple[int, ...],
                     return_indices: bool, nsp: int) -> Any:
    """max_pool1d/2d of a tensor as one graph node on the backend's kernel."""
    dev = x._device
    rxp = dev.xp
    shape4, geom, res_shape = _as_2d(tuple(x.shape), k, s, p, d, out, nsp)
    y, arg = kern.max_forward(rxp.reshape(x._data, shape4), *geom)
    y = rxp.reshape(y, res_shape)
    if needs_grad(x):
        res = record(y, dev, "MaxPool2dBackward", (x,),
                     partial(_max_pool_vjp, kern, arg, tuple(x.shape), shape4, geom))
    else:
        res = new(y, dev)
    if not return_indices:
        return res
    r, q = _chosen(rxp, arg, geom)
    pos = rxp.reshape(r * shape4[3] + q, res_shape)
    return res, new(pos, dev)


def _chosen(rxp: Any, arg: Any, geom: tuple) -> tuple[Any, Any]:
    """Input row and column (possibly in the padding) of each window's chosen tap."""
    k, s, p, d, out = geom
    a = rxp.astype(arg, rxp.int64)
    ho = rxp.reshape(rxp.arange(out[0], dtype=rxp.int64, device=arg.device), (out[0], 1))
    wo = rxp.arange(out[1], dtype=rxp.int64, device=arg.device)
    r = (a // k[1]) * d[0] + (ho * s[0] - p[0])
    q = (a % k[1]) * d[1] + (wo * s[1] - p[1])
    return r, q


def _max_pool_vjp(kern: Any, arg: Any, x_shape: tuple[int, ...], shape4: tuple[int, ...],
                  geom: tuple, g: Tensor, _: Any) -> Tensor:
    k, s, p, d, out = geom
    dev = g._device
    rxp = dev.xp
    if not _grad.enabled:
        g4 = rxp.reshape(g._data, arg.shape)
        return new(rxp.reshape(kern.max_backward(arg, shape4, g4, k, s, p, d), x_shape), dev)
    # create_graph: the portable rule, a scatter-add of g to the chosen elements (padding
    # taps to one extra element that is dropped)
    import vtl

    from ..._ops.indexing import _scatter_rows

    n, c, h, w = shape4
    r, q = _chosen(rxp, arg, geom)
    total = n * c * h * w
    plane = rxp.reshape(rxp.arange(n * c, dtype=rxp.int64, device=arg.device) * (h * w),
                        (n, c, 1, 1))
    inside = (r >= 0) & (r < h) & (q >= 0) & (q < w)
    flat = rxp.where(inside, plane + r * w + q, total)
    dx = _scatter_rows(vtl.reshape(g, (-1,)), rxp.reshape(flat, (-1,)), total + 1)
    return vtl.reshape(dx[:total], x_shape)


def max_pool2d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """Maximum over ``kernel_size`` windows of ``(N, C, H, W)`` or ``(C, H, W)`` inputs
    (padding counts as ``-inf``; ``stride`` defaults to ``kernel_size``). With
    ``return_indices`` also the flat ``h * W + w`` input index of each maximum: the first
    maximal (or nan) input element of the window, never a padding position (a window of
    ``-inf`` gives its first input element, as PyTorch).

    Args:
        input: The input tensor.
        kernel_size: Size of the window: an int or a tuple.
        stride: Stride of the window (default: ``kernel_size``).
        padding: Implicit ``-inf`` padding on both sides (at most half the kernel size).
        dilation: Spacing between the elements of a window.
        ceil_mode: Use ``ceil`` instead of ``floor`` to compute the output size.
        return_indices: Also return the indices of the maxima.

    Returns:
        The output, and with ``return_indices`` also the indices: ``(output, indices)``.

    Raises:
        ValueError: If the input's rank or a size argument is invalid.
    """
    return _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices,
                     2, "max_pool2d")


def max_pool1d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """Maximum over windows of ``(N, C, L)`` or ``(C, L)`` inputs.

    Args:
        input: The input tensor.
        kernel_size: Size of the window: an int or a tuple.
        stride: Stride of the window (default: ``kernel_size``).
        padding: Implicit ``-inf`` padding on both sides (at most half the kernel size).
        dilation: Spacing between the elements of a window.
        ceil_mode: Use ``ceil`` instead of ``floor`` to compute the output size.
        return_indices: Also return the indices of the maxima.

    Returns:
        The output, and with ``return_indices`` also the indices: ``(output, indices)``.

    Raises:
        ValueError: If the input's rank or a size argument is invalid.
    """
    return _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices,
                     1, "max_pool1d")


def _lift_1d(k: tuple, s: tuple, p: tuple, d: tuple, out: tuple) -> tuple:
    """The geometry of a 1-D pool as that of a 2-D pool over a height-1 image."""
    return (1, *k), (1, *s), (0, *p), (1, *d), (1, *out)


def _divided_by_windows(xp: Any, total: Any, hw: tuple[int, int], k: tuple, s: tuple,
                        p: tuple, out: tuple, count_include_pad: bool, divisor_override: Any,
                        dtype: Any, device: Any) -> Any:
    """``total`` (sums over each window, ``(..., Ho, Wo)``) divided by the windows' divisors
    over an ``hw`` input (:func:`vtl.backends._common.pool.avg_divisors`, host arithmetic on
    the geometry)."""
    div = avg_divisors(hw, k, s, p, out, count_include_pad, divisor_override)
    if isinstance(div, float):
        return total / div
    return total / xp.asarray(div.tolist(), dtype=dtype, device=device)


def _avg_pool(input: Any, kernel_size: Any, stride: Any, padding: Any, ceil_mode: bool,  # noqa: A002
              count_include_pad: bool, divisor_override: Any, nsp: int, fname: str) -> Any:
    xp = namespace(input)
    if not xp.isdtype(input.dtype, "real floating"):
        raise TypeError(f"{fname}() needs a real floating-point input, got {input.dtype}")
    if divisor_override is not None and divisor_override == 0:
        raise ValueError(f"{fname}(): divisor_override must be non-zero")
    k, s, p, d, out = _pool_args(input, kernel_size, stride, padding, 1, ceil_mode, nsp, fname)
    kern = _kernel(input)
    if kern is not None:
        return _avg_pool_kernel(kern, input, k, s, p, out, count_include_pad, divisor_override,
                                nsp)
    x = input
    if nsp == 1:
        x = xp.expand_dims(x, axis=-2)
        k, s, p, d, out = _lift_1d(k, s, p, d, out)
    batched = x.ndim == 4
    if not batched:
        x = xp.expand_dims(x, axis=0)
    total = _channels_first(xp, xp.sum(_windows(xp, x, k, s, p, d, out, 0.0)[2], axis=1),
                            x.shape[0], out)
    res = _divided_by_windows(xp, total, x.shape[-2:], k, s, p, out, count_include_pad,
                              divisor_override, x.dtype, x.device)
    if nsp == 1:
        res = res[..., 0, :]
    return res if batched else res[0, ...]


def _avg_pool_kernel(kern: Any, x: Tensor, k: tuple[int, ...], s: tuple[int, ...],
                     p: tuple[int, ...], out: tuple[int, ...], count_include_pad: bool,
                     divisor_override: Any, nsp: int) -> Tensor:
    """avg_pool1d/2d of a tensor as one graph node on the backend's kernel."""
    dev = x._device
    rxp = dev.xp
    shape4, geom, res_shape = _as_2d(tuple(x.shape), k, s, p, (1,) * nsp, out, nsp)
    k2, s2, p2, _, out2 = geom
    opts = (count_include_pad, divisor_override)
    y = kern.avg_forward(rxp.reshape(x._data, shape4), k2, s2, p2, out2, *opts)
    y = rxp.reshape(y, res_shape)
    if needs_grad(x):
        return record(y, dev, "AvgPool2dBackward", (x,),
                      partial(_avg_pool_vjp, kern, tuple(x.shape), shape4, geom, opts))
    return new(y, dev)


def _avg_pool_vjp(kern: Any, x_shape: tuple[int, ...], shape4: tuple[int, ...], geom: tuple,
                  opts: tuple, g: Tensor, _: Any) -> Tensor:
    k, s, p, _, out = geom
    dev = g._device
    rxp = dev.xp
    n, c, h, w = shape4
    if not _grad.enabled:
        g4 = rxp.reshape(g._data, (n, c, *out))
        return new(rxp.reshape(kern.avg_backward(shape4, g4, k, s, p, *opts), x_shape), dev)
    # create_graph: the portable rule, g / divisor scattered to every tap (padding taps
    # to fill rows that are dropped)
    import vtl

    from ..._ops.indexing import _scatter_rows

    g4 = _divided_by_windows(vtl, vtl.reshape(g, (n, c, *out)), (h, w), k, s, p, out, *opts,
                             g.dtype, g.device)
    geometry = (n, h, w, k, s, (1, 1), p, out, (1, 1))
    host, fill, _ = host_index(*geometry)
    idx = on_device(host, "rows", geometry, vtl, g)
    kk = k[0] * k[1]
    m = n * out[0] * out[1]
    rows = vtl.reshape(vtl.permute_dims(g4, (0, 2, 3, 1)), (m, 1, c))
    rows = vtl.reshape(vtl.broadcast_to(rows, (m, kk, c)), (m * kk, c))
    dx = _scatter_rows(rows, idx, n * h * w + fill)[:n * h * w, ...]
    dx = vtl.permute_dims(vtl.reshape(dx, (n, h, w, c)), (0, 3, 1, 2))
    return vtl.reshape(dx, x_shape)


def avg_pool2d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
               ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = None) -> Any:
    """Mean over ``kernel_size`` windows of ``(N, C, H, W)`` or ``(C, H, W)`` inputs.

    ``count_include_pad`` counts the zero padding in the divisor; windows that a
    ``ceil_mode`` output lets run past the padding are divided by their clipped
    size (PyTorch's divisors); ``divisor_override`` replaces the divisor.

    Args:
        input: The input tensor.
        kernel_size: Size of the window: an int or a tuple.
        stride: Stride of the window (default: ``kernel_size``).
        padding: Implicit zero padding on both sides (at most half the kernel size).
        ceil_mode: Use ``ceil`` instead of ``floor`` to compute the output size.
        count_include_pad: Include the zero padding in the averages' divisors.
        divisor_override: If given, the divisor of every window's sum.

    Returns:
        The pooled tensor.

    Raises:
        ValueError: If the input's rank or a size argument is invalid.
    """
    return _avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override, 2, "avg_pool2d")


def avg_pool1d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
               ceil_mode: bool = False, count_include_pad: bool = True) -> Any:
    """Mean over windows of ``(N, C, L)`` or ``(C, L)`` inputs.

    Args:
        input: The input tensor.
        kernel_size: Size of the window: an int or a tuple.
        stride: Stride of the window (default: ``kernel_size``).
        padding: Implicit zero padding on both sides (at most half the kernel size).
        ceil_mode: Use ``ceil`` instead of ``floor`` to compute the output size.
        count_include_pad: Include the zero padding in the averages' divisors.

    Returns:
        The pooled tensor.

    Raises:
        ValueError: If the input's rank or a size argument is invalid.
    """
    return _avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, None,
                     1, "avg_pool1d")


def _adaptive_axis(xp: Any, x: Any, axis: int, out: int) -> Any:
    n = x.shape[axis]
    if out == n:
        return x
    lead = (slice(None),) * (axis % x.ndim)
    if n % out == 0:
        shape = list(x.shape)
        a = axis % x.ndim
        shape[a:a + 1] = [out, n // out]
        return xp.mean(xp.reshape(x, tuple(shape)), axis=a + 1)
    parts = []
    for i in range(out):
        start, end = (i * n) // out, -((-(i + 1) * n) // out)
        parts.append(xp.mean(x[lead + (slice(start, end), ...)], axis=axis))
    return xp.stack(parts, axis=axis)


def _adaptive_size(output_size: Any, input: Any, nsp: int, fname: str) -> tuple[int, ...]:  # noqa: A002
    if input.ndim not in (nsp + 1, nsp + 2):
        raise ValueError(f"{fname}(): expected a {nsp + 1}-D (unbatched) or {nsp + 2}-D "
                         f"(batched) input, got shape {_shape(input)}")
    if not isinstance(output_size, (tuple, list)):
        output_size = (output_size,) * nsp
    if len(output_size) != nsp:
        raise ValueError(f"{fname}(): output_size must be an int or a tuple of {nsp}, "
                         f"got {output_size!r}")
    _check_nonempty(input, nsp, fname)
    spatial = _shape(input)[-nsp:]
    out = tuple(spatial[a] if o is None else int(o) for a, o in enumerate(output_size))
    if any(o < 1 for o in out) or any(v == 0 for v in spatial):
        raise ValueError(f"{fname}(): cannot pool input of shape {_shape(input)} to output "
                         f"size {out}")
    return out


def adaptive_avg_pool2d(input: Any, output_size: Any) -> Any:  # noqa: A002
    """Average ``(N, C, H, W)``/``(C, H, W)`` over PyTorch's adaptive windows to
    ``output_size`` (an int, or a pair whose ``None`` entries keep that size).

    Args:
        input: The input tensor.
        output_size: Target output size: an int or a tuple (``None`` keeps that axis).

    Returns:
        The pooled tensor.

    Raises:
        ValueError: If the input's rank or a size argument is invalid.
    """
    xp = namespace(input)
    ho, wo = _adaptive_size(output_size, input, 2, "adaptive_avg_pool2d")
    if ho == wo == 1:  # global average pooling: one mean over each plane
        return xp.mean(input, axis=(-2, -1), keepdims=True)
    return _adaptive_axis(xp, _adaptive_axis(xp, input, -2, ho), -1, wo)


def adaptive_avg_pool1d(input: Any, output_size: Any) -> Any:  # noqa: A002
    """Average ``(N, C, L)``/``(C, L)`` over adaptive windows to ``output_size``.

    Args:
        input: The input tensor.
        output_size: Target output size: an int or a tuple (``None`` keeps that axis).

    Returns:
        The pooled tensor.

    Raises:
        ValueError: If the input's rank or a size argument is invalid.
    """
    xp = namespace(input)
    (lo,) = _adaptive_size(output_size, input, 1, "adaptive_avg_pool1d")
    return _adaptive_axis(xp, input, -1, lo)


# -- 3-D max and average pooling (separable: height/width, then depth) -----------------------
def _planes(xp: Any, input: Any) -> tuple[Any, tuple[int, ...]]:  # noqa: A002
    """A 5-D input (batch of one for a 4-D one) as ``(N, C*D, H, W)``, and its 5-D shape."""
    x = input if input.ndim == 5 else xp.expand_dims(input, axis=0)
    n, c, depth, h, w = _shape(x)
    return xp.reshape(x, (n, c * depth, h, w)), (n, c, depth, h, w)


def _back_to_3d(xp: Any, y: Any, input: Any, out: tuple[int, ...]) -> Any:  # noqa: A002
    """``(N, C, D_out, H_out*W_out)`` as ``(N, C, D_out, H_out, W_out)`` (unbatched: 4-D)."""
    y = xp.reshape(y, (*_shape(y)[:3], *out[1:]))
    return y if input.ndim == 5 else y[0, ...]


def max_pool3d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """Maximum over ``kernel_size`` windows of ``(N, C, D, H, W)`` or ``(C, D, H, W)``
    inputs (padding counts as ``-inf``; ``stride`` defaults to ``kernel_size``), as
    ``torch.nn.functional.max_pool3d``. With ``return_indices`` also the flat
    ``d * H * W + h * W + w`` input index of each maximum (the first one of a window in
    that order; the gradient goes to it).

    Args:
        input: The input tensor.
        kernel_size: Size of the window: an int or a tuple.
        stride: Stride of the window (default: ``kernel_size``).
        padding: Implicit ``-inf`` padding on both sides (at most half the kernel size).
        dilation: Spacing between the elements of a window.
        ceil_mode: Use ``ceil`` instead of ``floor`` to compute the output size.
        return_indices: Also return the indices of the maxima.

    Returns:
        The output, and with ``return_indices`` also the indices: ``(output, indices)``.

    Raises:
        ValueError: If the input's rank or a size argument is invalid.
        TypeError: If the input is not real floating-point.
    """
    fname = "max_pool3d"
    xp = namespace(input)
    if not xp.isdtype(input.dtype, "real floating"):
        raise TypeError(f"{fname}() needs a real floating-point input, got {input.dtype}")
    k, s, p, d, out = _pool_args(input, kernel_size, stride, padding, dilation, ceil_mode, 3,
                                 fname)
    x4, (n, c, depth, h, w) = _planes(xp, input)
    first = _max_pool(x4, k[1:], s[1:], p[1:], d[1:], ceil_mode, return_indices, 2, fname)
    y1, i1 = first if return_indices else (first, None)
    hw = out[1] * out[2]
    y1 = xp.reshape(y1, (n, c, depth, hw))
    second = _max_pool(y1, (k[0], 1), (s[0], 1), (p[0], 0), (d[0], 1), ceil_mode,
                       return_indices, 2, fname)
    if not return_indices:
        return _back_to_3d(xp, second, input, out)
    y, i2 = second
    # i2 = depth * hw + column; the plane pass's index of that depth and column
    dz = i2 // hw
    it = i2.dtype
    dev = i2.device
    plane = xp.reshape(xp.arange(n * c, dtype=it, device=dev) * depth, (n, c, 1, 1))
    col = xp.reshape(xp.arange(hw, dtype=it, device=dev), (1, 1, 1, hw))
    flat = (plane + dz) * hw + col  # the depth pass picks no padding slice
    hw_idx = xp.take(xp.reshape(i1, (-1,)), xp.reshape(flat, (-1,)), axis=0)
    idx = dz * (h * w) + xp.reshape(hw_idx, _shape(dz))
    return _back_to_3d(xp, y, input, out), _back_to_3d(xp, idx, input, out)


def avg_pool3d(input: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
               ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = None) -> Any:
    """Mean over ``kernel_size`` windows of ``(N, C, D, H, W)`` or ``(C, D, H, W)`` inputs,
    as ``torch.nn.functional.avg_pool3d`` (``count_include_pad``, ``ceil_mode`` divisors
    and ``divisor_override`` as in PyTorch).

    Args:
        input: The input tensor.
        kernel_size: Size of the window: an int or a tuple.
        stride: Stride of the window (default: ``kernel_size``).
        padding: Implicit zero padding on both sides (at most half the kernel size).
        ceil_mode: Use ``ceil`` instead of ``floor`` to compute the output size.
        count_include_pad: Include the zero padding in the averages' divisors.
        divisor_override: If given, the divisor of every window's sum.

    Returns:
        The pooled tensor.

    Raises:
        ValueError: If the input's rank or a size argument is invalid.
    """
    return _avg_pool3d(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                       divisor_override, "avg_pool3d")


def _avg_pool3d(input: Any, kernel_size: Any, stride: Any, padding: Any, ceil_mode: bool,  # noqa: A002
                count_include_pad: bool, divisor_override: int | None, fname: str) -> Any:
    xp = namespace(input)
    if not xp.isdtype(input.dtype, "real floating"):
        raise TypeError(f"{fname}() needs a real floating-point input, got {input.dtype}")
    if divisor_override is not None and divisor_override == 0:
        raise ValueError(f"{fname}(): divisor_override must be non-zero")
    k, s, p, _, out = _pool_args(input, kernel_size, stride, padding, 1, ceil_mode, 3, fname)
    x4, (n, c, depth, _, _) = _planes(xp, input)
    plane_div = None if divisor_override is None else 1  # a plain sum; divided once below
    y1 = _avg_pool(x4, k[1:], s[1:], p[1:], ceil_mode, count_include_pad, plane_div, 2, fname)
    y1 = xp.reshape(y1, (n, c, depth, out[1] * out[2]))
    y = _avg_pool(y1, (k[0], 1), (s[0], 1), (p[0], 0), ceil_mode, count_include_pad,
                  divisor_override, 2, fname)
    return _back_to_3d(xp, y, input, out)


# -- adaptive pooling ------------------------------------------------------------------------
def adaptive_avg_pool3d(input: Any, output_size: Any) -> Any:  # noqa: A002
    """Average ``(N, C, D, H, W)``/``(C, D, H, W)`` over PyTorch's adaptive windows to
    ``output_size`` (an int, or a triple whose ``None`` entries keep that size).

    Args:
        input: The input tensor.
        output_size: Target output size: an int or a tuple (``None`` keeps that axis).

    Returns:
        The pooled tensor.

    Raises:
        ValueError: If the input's rank or a size argument is invalid.
    """
    xp = namespace(input)
    do, ho, wo = _adaptive_size(output_size, input, 3, "adaptive_avg_pool3d")
    return _adaptive_axis(xp, _adaptive_axis(xp, _adaptive_axis(xp, input, -3, do), -2, ho),
                          -1, wo)


def _adaptive_max(input: Any, output_size: Any, return_indices: bool, nsp: int,  # noqa: A002
                  fname: str) -> Any:
    xp = namespace(input)
    if not xp.isdtype(input.dtype, "real floating"):
        raise TypeError(f"{fname}() needs a real floating-point input, got {input.dtype}")
    out = _adaptive_size(output_size, input, nsp, fname)
    batched = input.ndim == nsp + 2
    x = input if batched else xp.expand_dims(input, axis=0)
    n, c = _shape(x)[:2]
    spatial = _shape(x)[2:]
    size = math.prod(spatial)
    o = math.prod(out)
    host, kk = adaptive_index(spatial, out)
    flat_x = xp.reshape(x, (n * c * size,))
    # the argmax (first maximum of each window, nan first) on the raw arrays, no graph
    rx, rxp = raw(detach(flat_x), xp)
    idx = on_device(host, "adaptive", (spatial, out), rxp, rx)
    win = rxp.take(rxp.reshape(rx, (n * c, size)), idx, axis=1)  # (N*C, O*K)
    am = rxp.argmax(rxp.reshape(win, (n * c, o, kk)), axis=2)  # (N*C, O)
    it = am.dtype
    taps = rxp.reshape(rxp.arange(o, dtype=it, device=am.device) * kk, (1, o))
    pos = rxp.reshape(rxp.take(rxp.astype(idx, it), rxp.reshape(am + taps, (-1,)), axis=0),
                      (n * c, o))
    base = rxp.reshape(rxp.arange(n * c, dtype=it, device=am.device) * size, (n * c, 1))
    # the one differentiable gather: gradients go to the chosen elements only
    res = gather_rows(xp, flat_x, rxp.reshape(pos + base, (-1,)))
    res = xp.reshape(res, (n, c, *out))
    if not batched:
        res = res[0, ...]
    if not return_indices:
        return res
    pos = rxp.reshape(pos, (n, c, *out))
    if isinstance(input, Tensor):
        pos = new(pos, input._device)
    return res, (pos if batched else pos[0, ...])


def adaptive_max_pool1d(input: Any, output_size: Any, return_indices: bool = False) -> Any:  # noqa: A002
    """Maximum of ``(N, C, L)``/``(C, L)`` over PyTorch's adaptive windows
    ``[floor(i*L/O), ceil((i+1)*L/O))``; with ``return_indices`` also the input
    position of each maximum (the first one; the gradient goes to it).

    Args:
        input: The input tensor.
        output_size: Target output size: an int or a tuple (``None`` keeps that axis).
        return_indices: Also return the indices of the maxima.

    Returns:
        The output, and with ``return_indices`` also the indices: ``(output, indices)``.

    Raises:
        ValueError: If the input's rank or a size argument is invalid.
    """
    return _adaptive_max(input, output_size, return_indices, 1, "adaptive_max_pool1d")


def adaptive_max_pool2d(input: Any, output_size: Any, return_indices: bool = False) -> Any:  # noqa: A002
    """Maximum of ``(N, C, H, W)``/``(C, H, W)`` over adaptive windows to ``output_size``
    (an int, or a pair whose ``None`` entries keep that size); with ``return_indices``
    also the flat ``h * W + w`` input index of each maximum.

    Args:
        input: The input tensor.
        output_size: Target output size: an int or a tuple (``None`` keeps that axis).
        return_indices: Also return the indices of the maxima.

    Returns:
        The output, and with ``return_indices`` also the indices: ``(output, indices)``.

    Raises:
        ValueError: If the input's rank or a size argument is invalid.
    """
    return _adaptive_max(input, output_size, return_indices, 2, "adaptive_max_pool2d")


def adaptive_max_pool3d(input: Any, output_size: Any, return_indices: bool = False) -> Any:  # noqa: A002
    """Maximum of ``(N, C, D, H, W)``/``(C, D, H, W)`` over adaptive windows to
    ``output_size``; with ``return_indices`` also the flat ``d * H * W + h * W + w``
    input index of each maximum.

    Args:
        input: The input tensor.
        output_size: Target output size: an int or a tuple (``None`` keeps that axis).
        return_indices: Also return the indices of the maxima.

    Returns:
        The output, and with ``return_indices`` also the indices: ``(output, indices)``.

    Raises:
        ValueError: If the input's rank or a size argument is invalid.
    """
    return _adaptive_max(input, output_size, return_indices, 3, "adaptive_max_pool3d")


# -- power-average pooling -------------------------------------------------------------------
def _lp_pool(input: Any, norm_type: float, kernel_size: Any, stride: Any, ceil_mode: bool,  # noqa: A002
             nsp: int, fname: str) -> Any:
    xp = namespace(input)
    if isinstance(norm_type, bool) or not isinstance(norm_type, (int, float)):
        raise TypeError(f"{fname}(): norm_type must be a number, got {norm_type!r}")
    if norm_type == 0:
        raise ValueError(f"{fname}(): norm_type must be non-zero, got {norm_type!r}")
    k = _ntuple(kernel_size, nsp, "kernel_size", fname)
    if not xp.isdtype(input.dtype, "real floating"):
        raise TypeError(f"{fname}() needs a real floating-point input, got {input.dtype}")
    powered = input ** float(norm_type)
    if nsp == 3:
        out = _avg_pool3d(powered, k, stride, 0, ceil_mode, True, None, fname)
    else:
        out = _avg_pool(powered, k, stride, 0, ceil_mode, True, None, nsp, fname)
    return (xp.sign(out) * relu(xp.abs(out)) * float(math.prod(k))) ** (1.0 / norm_type)


def lp_pool1d(input: Any, norm_type: float, kernel_size: Any, stride: Any = None,  # noqa: A002
              ceil_mode: bool = False) -> Any:
    """Power-average pooling of ``(N, C, L)``/``(C, L)`` inputs, PyTorch's formula:
    ``(sign(a) * relu(|a|) * k) ** (1 / p)`` with ``a = avg_pool1d(x ** p)``
    (the p-norm of each window; ``p = 1`` sums). No padding.

    Args:
        input: The input tensor.
        norm_type: The power ``p``.
        kernel_size: Size of the window: an int or a tuple.
        stride: Stride of the window (default: ``kernel_size``).
        ceil_mode: Use ``ceil`` instead of ``floor`` to compute the output size.

    Returns:
        The pooled tensor.

    Raises:
        ValueError: If the input's rank or a size argument is invalid.
    """
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 1, "lp_pool1d")


def lp_pool2d(input: Any, norm_type: float, kernel_size: Any, stride: Any = None,  # noqa: A002
              ceil_mode: bool = False) -> Any:
    """Power-average pooling of ``(N, C, H, W)``/``(C, H, W)`` inputs:
    ``(sign(a) * relu(|a|) * kH * kW) ** (1 / p)`` with ``a = avg_pool2d(x ** p)``.

    Args:
        input: The input tensor.
        norm_type: The power ``p``.
        kernel_size: Size of the window: an int or a tuple.
        stride: Stride of the window (default: ``kernel_size``).
        ceil_mode: Use ``ceil`` instead of ``floor`` to compute the output size.

    Returns:
        The pooled tensor.

    Raises:
        ValueError: If the input's rank or a size argument is invalid.
    """
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 2, "lp_pool2d")


def lp_pool3d(input: Any, norm_type: float, kernel_size: Any, stride: Any = None,  # noqa: A002
              ceil_mode: bool = False) -> Any:
    """Power-average pooling of ``(N, C, D, H, W)``/``(C, D, H, W)`` inputs:
    ``(sign(a) * relu(|a|) * kD * kH * kW) ** (1 / p)`` with ``a = avg_pool3d(x ** p)``.

    Args:
        input: The input tensor.
        norm_type: The power ``p``.
        kernel_size: Size of the window: an int or a tuple.
        stride: Stride of the window (default: ``kernel_size``).
        ceil_mode: Use ``ceil`` instead of ``floor`` to compute the output size.

    Returns:
        The pooled tensor.

    Raises:
        ValueError: If the input's rank or a size argument is invalid.
    """
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 3, "lp_pool3d")


# -- max unpooling ---------------------------------------------------------------------------
def _unpool_size(input: Any, kernel_size: Any, stride: Any, padding: Any,  # noqa: A002
                 output_size: Any, nsp: int, fname: str) -> tuple[int, ...]:
    """PyTorch's output size: ``(L - 1) * stride - 2 * padding + kernel_size`` per axis, or
    ``output_size`` (``nsp`` or ``nsp + 2`` entries) when it lies strictly within one
    stride of that."""
    k = _ntuple(kernel_size, nsp, "kernel_size", fname)
    s = k if stride is None else _ntuple(stride, nsp, "stride", fname)
    p = _ntuple(padding, nsp, "padding", fname, minimum=0)
    spatial = _shape(input)[-nsp:]
    default = tuple((spatial[a] - 1) * s[a] - 2 * p[a] + k[a] for a in range(nsp))
    if output_size is None:
        size = default
    else:
        size = tuple(int(v) for v in output_size)
        if len(size) == nsp + 2:
            size = size[2:]
        if len(size) != nsp:
            raise ValueError(f"{fname}(): output_size must have {nsp} or {nsp + 2} entries, "
                             f"got {tuple(output_size)}")
        for a in range(nsp):
            lo, hi = default[a] - s[a], default[a] + s[a]
            if not lo < size[a] < hi:
                raise ValueError(f"{fname}(): invalid output_size {tuple(output_size)} (axis "
                                 f"{a} must be between {lo} and {hi}, exclusive)")
    if any(v < 1 for v in size):
        raise ValueError(f"{fname}(): input of shape {_shape(input)} with kernel_size={k}, "
                         f"stride={s}, padding={p} gives an empty output {size}")
    return size


def _max_unpool(input: Any, indices: Any, kernel_size: Any, stride: Any, padding: Any,  # noqa: A002
                output_size: Any, nsp: int, fname: str) -> Any:
    xp = namespace(input, indices)
    if input.ndim not in (nsp + 1, nsp + 2):
        raise ValueError(f"{fname}(): expected a {nsp + 1}-D (unbatched) or {nsp + 2}-D "
                         f"(batched) input, got shape {_shape(input)}")
    if _shape(indices) != _shape(input):
        raise ValueError(f"{fname}(): indices of shape {_shape(indices)} must have the "
                         f"input's shape {_shape(input)}")
    if not xp.isdtype(indices.dtype, "integral"):
        raise TypeError(f"{fname}() expected integer indices, got {indices.dtype}")
    _check_nonempty(input, nsp, fname)
    out = _unpool_size(input, kernel_size, stride, padding, output_size, nsp, fname)
    batched = input.ndim == nsp + 2
    x = input if batched else xp.expand_dims(input, axis=0)
    ind = indices if batched else xp.expand_dims(indices, axis=0)
    n, c = _shape(x)[:2]
    planes, lin, lout = n * c, math.prod(_shape(x)[2:]), math.prod(out)
    if planes == 0:
        res = xp.zeros((n, c, *out), dtype=x.dtype, device=x.device)
        return res if batched else res[0, ...]
    flat_x = xp.reshape(x, (planes * lin,))
    # an index outside [-L_out, L_out) is an IndexError (take's check; on an accelerator
    # raised at the next read of a result); negative ones count from the end
    it = ind.dtype
    try:
        checked = xp.take(xp.arange(lout, dtype=it, device=x.device), xp.reshape(ind, (-1,)),
                          axis=0)
    except IndexError as exc:
        raise IndexError(f"{fname}(): an index is out of range for an output of {out} "
                         f"({lout} elements per plane): {exc}") from None
    rchk, rxp = raw(detach(checked), xp)
    dev = rchk.device
    base = rxp.reshape(rxp.arange(planes, dtype=it, device=dev) * lout, (planes, 1))
    target = rxp.reshape(rxp.reshape(rchk, (planes, lin)) + base, (-1,))
    order = rxp.argsort(target, stable=True)
    srt = rxp.take(target, order, axis=0)
    q = rxp.arange(planes * lout, dtype=it, device=dev)
    last = rxp.astype(rxp.searchsorted(srt, q, side="right"), it) - 1  # the last writer
    pos = rxp.clip(last, 0, planes * lin - 1)
    hit = (last >= 0) & (rxp.take(srt, pos, axis=0) == q)
    vals = gather_rows(xp, flat_x, rxp.take(order, pos, axis=0))
    if isinstance(x, Tensor):
        hit = new(hit, x._device)
    res = xp.reshape(xp.where(hit, vals, xp.zeros_like(vals)), (n, c, *out))
    return res if batched else res[0, ...]


def max_unpool1d(input: Any, indices: Any, kernel_size: Any, stride: Any = None,  # noqa: A002
                 padding: Any = 0, output_size: Any = None) -> Any:
    """The partial inverse of ``max_pool1d``: zeros of length
    ``(L - 1) * stride - 2 * padding + kernel_size`` (or ``output_size``) with each input
    value put at its index (as returned by ``max_pool1d(..., return_indices=True)``);
    of several values sent to one position, the last one is kept.

    Args:
        input: The pooled values.
        indices: Their indices, from the max pooling.
        kernel_size: Size of the max-pooling window.
        stride: Stride of the max pooling (default: ``kernel_size``).
        padding: Padding of the max pooling.
        output_size: The output's spatial size (default: computed from the other arguments).

    Returns:
        The unpooled tensor.

    Raises:
        ValueError: If the input's rank or a size argument is invalid.
    """
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 1,
                       "max_unpool1d")


def max_unpool2d(input: Any, indices: Any, kernel_size: Any, stride: Any = None,  # noqa: A002
                 padding: Any = 0, output_size: Any = None) -> Any:
    """The partial inverse of ``max_pool2d``: each value of ``(N, C, H, W)``/``(C, H, W)``
    put at its flat ``h * W_out + w`` index of a zero output (see :func:`max_unpool1d`).

    Args:
        input: The pooled values.
        indices: Their indices, from the max pooling.
        kernel_size: Size of the max-pooling window.
        stride: Stride of the max pooling (default: ``kernel_size``).
        padding: Padding of the max pooling.
        output_size: The output's spatial size (default: computed from the other arguments).

    Returns:
        The unpooled tensor.

    Raises:
        ValueError: If the input's rank or a size argument is invalid.
    """
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 2,
                       "max_unpool2d")


def max_unpool3d(input: Any, indices: Any, kernel_size: Any, stride: Any = None,  # noqa: A002
                 padding: Any = 0, output_size: Any = None) -> Any:
    """The partial inverse of ``max_pool3d``: each value of ``(N, C, D, H, W)``/
    ``(C, D, H, W)`` put at its flat ``d * H_out * W_out + h * W_out + w`` index of a zero
    output (see :func:`max_unpool1d`).

    Args:
        input: The pooled values.
        indices: Their indices, from the max pooling.
        kernel_size: Size of the max-pooling window.
        stride: Stride of the max pooling (default: ``kernel_size``).
        padding: Padding of the max pooling.
        output_size: The output's spatial size (default: computed from the other arguments).

    Returns:
        The unpooled tensor.

    Raises:
        ValueError: If the input's rank or a size argument is invalid.
    """
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 3,
                       "max_unpool3d")


# -- the ``*_with_indices`` entry points: always ``(output, indices)`` ------------------------
def max_pool1d_with_indices(input: Any, kernel_size: Any, stride: Any = None,  # noqa: A002
                            padding: Any = 0, dilation: Any = 1, ceil_mode: bool = False,
                            return_indices: bool = False) -> Any:
    """:func:`max_pool1d` returning ``(output, indices)`` whatever ``return_indices`` says
    (PyTorch's ``max_pool1d_with_indices``).

    Args:
        input: The input tensor.
        kernel_size: Size of the window: an int or a tuple.
        stride: Stride of the window (default: ``kernel_size``).
        padding: Implicit ``-inf`` padding on both sides (at most half the kernel size).
        dilation: Spacing between the elements of a window.
        ceil_mode: Use ``ceil`` instead of ``floor`` to compute the output size.
        return_indices: Ignored (the indices are always returned).

    Returns:
        ``(output, indices)``.

    Raises:
        ValueError: If the input's rank or a size argument is invalid.
    """
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input: Any, kernel_size: Any, stride: Any = None,  # noqa: A002
                            padding: Any = 0, dilation: Any = 1, ceil_mode: bool = False,
                            return_indices: bool = False) -> Any:
    """:func:`max_pool2d` returning ``(output, indices)`` whatever ``return_indices`` says
    (PyTorch's ``max_pool2d_with_indices``).

    Args:
        input: The input tensor.
        kernel_size: Size of the window: an int or a tuple.
        stride: Stride of the window (default: ``kernel_size``).
        padding: Implicit ``-inf`` padding on both sides (at most half the kernel size).
        dilation: Spacing between the elements of a window.
        ceil_mode: Use ``ceil`` instead of ``floor`` to compute the output size.
        return_indices: Ignored (the indices are always returned).

    Returns:
        ``(output, indices)``.

    Raises:
        ValueError: If the input's rank or a size argument is invalid.
    """
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool3d_with_indices(input: Any, kernel_size: Any, stride: Any = None,  # noqa: A002
                            padding: Any = 0, dilation: Any = 1, ceil_mode: bool = False,
                            return_indices: bool = False) -> Any:
    """:func:`max_pool3d` returning ``(output, indices)`` whatever ``return_indices`` says
    (PyTorch's ``max_pool3d_with_indices``).

    Args:
        input: The input tensor.
        kernel_size: Size of the window: an int or a tuple.
        stride: Stride of the window (default: ``kernel_size``).
        padding: Implicit ``-inf`` padding on both sides (at most half the kernel size).
        dilation: Spacing between the elements of a window.
        ceil_mode: Use ``ceil`` instead of ``floor`` to compute the output size.
        return_indices: Ignored (the indices are always returned).

    Returns:
        ``(output, indices)``.

    Raises:
        ValueError: If the input's rank or a size argument is invalid.
    """
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def adaptive_max_pool1d_with_indices(input: Any, output_size: Any,  # noqa: A002
                                     return_indices: bool = False) -> Any:
    """:func:`adaptive_max_pool1d` returning ``(output, indices)``.

    Args:
        input: The input tensor.
        output_size: Target output size: an int or a tuple (``None`` keeps that axis).
        return_indices: Ignored (the indices are always returned).

    Returns:
        ``(output, indices)``.

    Raises:
        ValueError: If the input's rank or a size argument is invalid.
    """
    return adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input: Any, output_size: Any,  # noqa: A002
                                     return_indices: bool = False) -> Any:
    """:func:`adaptive_max_pool2d` returning ``(output, indices)``.

    Args:
        input: The input tensor.
        output_size: Target output size: an int or a tuple (``None`` keeps that axis).
        return_indices: Ignored (the indices are always returned).

    Returns:
        ``(output, indices)``.

    Raises:
        ValueError: If the input's rank or a size argument is invalid.
    """
    return adaptive_max_pool2d(input, output_size, True)


def adaptive_max_pool3d_with_indices(input: Any, output_size: Any,  # noqa: A002
                                     return_indices: bool = False) -> Any:
    """:func:`adaptive_max_pool3d` returning ``(output, indices)``.

    Args:
        input: The input tensor.
        output_size: Target output size: an int or a tuple (``None`` keeps that axis).
        return_indices: Ignored (the indices are always returned).

    Returns:
        ``(output, indices)``.

    Raises:
        ValueError: If the input's rank or a size argument is invalid.
    """
    return adaptive_max_pool3d(input, output_size, True)
