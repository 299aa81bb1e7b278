"""Convolutions: conv1d/2d/3d and conv_transpose1d/2d/3d.

Written with standard array-API calls only (``xp = array_namespace(x)``):
im2col by ONE gather (``take`` of a cached row index, see ``_im2col``) of the
channels-last pixels into a ``(N*Ho*Wo, kh*kw*C)`` matrix, then ONE matrix
product with the weight (groups by reshaping to a batch of matrices); padding
taps read appended fill rows. The gather's gradient is one scatter-add, and
the VJP rules of ``take``/``matmul`` are written with vtl functions, so
gradients of gradients work. Results are ``(N, C_out, Ho, Wo)`` views of
channels-last storage, which the next convolution or pool reads without a
copy. A transposed convolution is the convolution of the stride-dilated,
padded input with the flipped, transposed weight; the zeros between pixels
and the padding are fill taps of the same gather.

A backend may provide a faster ``conv2d`` on raw arrays as ``backend.kernel("conv2d")``
(the contract is ``Conv2dKernel`` in ``vtl.backends.kernels``; the kernels are
``vtl/backends/*/conv.py``).
On vtl tensors conv2d and conv1d are then ONE graph node whose plain backward
calls the kernel; with ``create_graph=True`` the rule is the portable path's
VJP written with vtl functions (:func:`_conv2d_vjp_graph`), so higher-order
gradients work. Kernel results equal the portable ones up to rounding.

3-D convolutions are 2-D ones over the height and width: ONE gather (``take``
of a cached depth index) stacks, for every output depth, the ``kD`` input depth
slices under its kernel taps (a zero slice where a tap falls on padding, or on
the zeros between the slices of a transposed convolution's stride-dilated
input) into the channels of a batch of ``N*D_out`` images; the weight's depth
taps join its input channels. conv3d is then one conv2d (the backend kernel
where there is one), conv_transpose3d one conv_transpose2d; the gradients come
from those ops and the gather's scatter-add.
"""

from __future__ import annotations

import operator
from functools import partial
from typing import Any

from ... import _autocast
from ..._ops._core import needs_grad, new, plain_grad, record, same_device
from ..._tensor import Tensor
from ...autograd import grad_mode
from ._im2col import axis_index, gather_rows, on_device, pixel_rows, tap_index
from ._utils import namespace

__all__ = ["conv1d", "conv2d", "conv3d", "conv_tbc", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d"]

_grad = grad_mode.state


def _ntuple(v: Any, n: int, what: str, fname: str, minimum: int = 1) -> tuple[int, ...]:
    try:
        t = (operator.index(v),) * n if not isinstance(v, (tuple, list)) else \
            tuple(operator.index(a) for a in v)
    except TypeError:
        raise TypeError(f"{fname}(): {what} must be an int or a tuple of {n} ints, "
                        f"got {v!r}") from None
    if len(t) != n:
        raise ValueError(f"{fname}(): {what} must be an int or a tuple of {n} ints, got {v!r}")
    if any(a < minimum for a in t):
        raise ValueError(f"{fname}(): {what} must be >= {minimum}, got {v!r}")
    return t


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(x.shape)


def _out_size(size: int, k: int, s: int, p_lo: int, p_hi: int, d: int) -> int:
    return (size + p_lo + p_hi - d * (k - 1) - 1) // s + 1


def _conv_padding(padding: Any, ksize: tuple[int, ...], stride: tuple[int, ...],
                  dilation: tuple[int, ...], fname: str) -> list[tuple[int, int]]:
    """Per spatial axis ``(low, high)`` padding from an int, a tuple, ``'valid'`` or ``'same'``."""
    n = len(ksize)
    if isinstance(padding, str):
        if padding == "valid":
            return [(0, 0)] * n
        if padding == "same":
            if any(s != 1 for s in stride):
                raise ValueError(f"{fname}(): padding='same' is not supported for strided "
                                 f"convolutions (stride={stride})")
            out = []
            for k, d in zip(ksize, dilation, strict=True):
                total = d * (k - 1)
                out.append((total // 2, total - total // 2))
            return out
        raise ValueError(f"{fname}(): padding must be 'valid', 'same', an int or a tuple, "
                         f"got {padding!r}")
    return [(p, p) for p in _ntuple(padding, n, "padding", fname, minimum=0)]


def _gather_conv2d(xp: Any, x: Any, weight: Any, stride: tuple[int, int],
                   lo: tuple[int, int], out: tuple[int, int], dilation: tuple[int, int],
                   groups: int, bias: Any = None, dil: tuple[int, int] = (1, 1)) -> Any:
    """Portable conv2d of a 4-D input: one gather of all patches, one matrix product.

    ``lo``: the padding before the first row/column (negative crops); ``out``: the
    output size; ``dil``: the input's own stride dilation (zeros between pixels, for
    transposed convolutions). Returns ``(N, C_out, Ho, Wo)`` stored channels-last.
    """
    n, c = x.shape[:2]
    o, cg, kh, kw = _shape(weight)
    ho, wo = out
    idx, fill = tap_index(xp, x, (kh, kw), stride, dilation, lo, out, dil)
    col = gather_rows(xp, pixel_rows(xp, x, fill, 0.0), idx)  # (N*Ho*Wo*kh*kw, C)
    k = kh * kw
    m = n * ho * wo
    if groups == 1:
        wm = xp.reshape(xp.permute_dims(weight, (2, 3, 1, 0)), (k * c, o))
        res = xp.matmul(xp.reshape(col, (m, k * c)), wm)
    else:
        og = o // groups
        col = xp.permute_dims(xp.reshape(col, (m, k, groups, cg)), (2, 0, 1, 3))
        wm = xp.permute_dims(xp.reshape(weight, (groups, og, cg, kh, kw)), (0, 3, 4, 2, 1))
        res = xp.matmul(xp.reshape(col, (groups, m, k * cg)), xp.reshape(wm, (groups, k * cg, og)))
        res = xp.reshape(xp.permute_dims(res, (1, 0, 2)), (m, o))
    if bias is not None:
        res = res + bias
    return xp.permute_dims(xp.reshape(res, (n, ho, wo, o)), (0, 3, 1, 2))


def _conv2d_core(xp: Any, x: Any, weight: Any, bias: Any, s: tuple[int, int],
                 pad: tuple[int, int, int, int], d: tuple[int, int], groups: int,
                 out: tuple[int, int]) -> Any:
    """conv2d of a 4-D input: the backend's kernel (one graph node) when it has one for
    the operands, else the portable gather path."""
    if isinstance(x, Tensor) and isinstance(weight, Tensor) and \
            (bias is None or isinstance(bias, Tensor)):
        dev = x._device
        kern = dev.backend.kernel("conv2d")
        dt = x._data.dtype
        if kern is not None and kern.supports(dt) and weight._data.dtype == dt and \
                (bias is None or bias._data.dtype == dt):
            same_device("conv2d", [x, weight] if bias is None else [x, weight, bias])
            bd = None if bias is None else bias._data
            done = kern.forward(x._data, weight._data, bd, s, pad, d, groups)
            if done is not None:  # None: the kernel does not take these arguments
                res, ctx = done
                if not needs_grad(x, weight, bias):
                    return new(res, dev)
                keep = weight._requires_grad or (bias is not None and bias._requires_grad)
                geometry = (s, pad, d, groups, out)
                vjp = partial(_conv2d_vjp, kern, ctx if keep else None, x, weight, bias,
                              geometry)
                inputs = (x, weight) if bias is None else (x, weight, bias)
                return record(res, dev, "Conv2dBackward", inputs, vjp, saved=(x, weight))
    return _gather_conv2d(xp, x, weight, s, pad[::2], out, d, groups, bias)


def _conv2d_vjp(kern: Any, ctx: Any, x: Tensor, weight: Tensor, bias: Tensor | None,
                geometry: tuple, g: Tensor, _: Any) -> tuple:
    s, pad, d, groups, out = geometry
    nx = x._requires_grad
    nw = weight._requires_grad
    nb = bias is not None and bias._requires_grad
    if _grad.enabled:  # create_graph: the portable rule with vtl functions
        dx, dw, db = _conv2d_vjp_graph(x, weight, g, s, pad[::2], d, groups, out, nx, nw, nb)
    else:
        dev = g._device
        rx, rw, rb = kern.backward(ctx, tuple(x.shape), weight._data, g._data, s, pad, d,
                                   groups, nx, nw, nb)
        dx = None if rx is None else plain_grad(rx, x, dev)
        dw = None if rw is None else plain_grad(rw, weight, dev)
        db = None if rb is None else plain_grad(rb, bias, dev)
    return (dx, dw) if bias is None else (dx, dw, db)


def _conv2d_vjp_graph(x: Tensor, weight: Tensor, g: Tensor, s: tuple[int, int],
                      lo: tuple[int, int], d: tuple[int, int], groups: int,
                      out: tuple[int, int], nx: bool, nw: bool, nb: bool) -> tuple:
    """The VJP of :func:`_gather_conv2d` written with vtl functions (differentiable):
    ``dW`` from the gathered patches, ``dx`` as the scatter-add of ``g @ W^T``."""
    import vtl

    from ..._ops.indexing import _scatter_rows

    n, c, h, w = x.shape
    o, cg, kh, kw = weight.shape
    og = o // groups
    k = kh * kw
    m = n * out[0] * out[1]
    idx, fill = tap_index(vtl, x, (kh, kw), s, d, lo, out)
    gr = vtl.reshape(vtl.permute_dims(g, (0, 2, 3, 1)), (m, o))
    gg = vtl.permute_dims(vtl.reshape(gr, (m, groups, og)), (1, 0, 2))  # (G, m, og)
    dx = dw = db = None
    if nw:
        col = gather_rows(vtl, pixel_rows(vtl, x, fill, 0.0), idx)  # (m*k, C)
        col = vtl.reshape(vtl.permute_dims(vtl.reshape(col, (m, k, groups, cg)), (2, 0, 1, 3)),
                          (groups, m, k * cg))
        dwm = vtl.matmul(vtl.matrix_transpose(col), gg)  # (G, k*cg, og)
        dw = vtl.permute_dims(vtl.reshape(dwm, (groups, kh, kw, cg, og)), (0, 4, 3, 1, 2))
        dw = vtl.reshape(dw, (o, cg, kh, kw))
    if nx:
        wm = vtl.permute_dims(vtl.reshape(weight, (groups, og, cg, kh, kw)), (0, 3, 4, 2, 1))
        wm = vtl.reshape(wm, (groups, k * cg, og))
        dcol = vtl.matmul(gg, vtl.matrix_transpose(wm))  # (G, m, k*cg)
        dcol = vtl.permute_dims(vtl.reshape(dcol, (groups, m, k, cg)), (1, 2, 0, 3))
        rows = _scatter_rows(vtl.reshape(dcol, (m * k, c)), idx, n * h * w + fill)
        dx = vtl.permute_dims(vtl.reshape(rows[:n * h * w, ...], (n, h, w, c)), (0, 3, 1, 2))
    if nb:
        db = vtl.sum(g, axis=(0, 2, 3))
    return dx, dw, db


def _check_conv(input: Any, weight: Any, bias: Any, groups: int, nsp: int, fname: str,  # noqa: A002
                transposed: bool = False) -> bool:
    """Check ranks and channels; returns whether the input is batched."""
    if weight.ndim != nsp + 2:
        raise ValueError(f"{fname}(): weight must be {nsp + 2}-D, got shape {_shape(weight)}")
    if input.ndim not in (nsp + 1, nsp + 2):
        raise ValueError(f"{fname}(): expected a {nsp + 1}-D (unbatched) or {nsp + 2}-D "
                         f"(batched) input, got shape {_shape(input)}")
    if isinstance(groups, bool) or operator.index(groups) < 1:
        raise ValueError(f"{fname}(): groups must be a positive int, got {groups!r}")
    if 0 in _shape(input)[-nsp:]:  # PyTorch: only the batch or channel axis may be empty
        raise ValueError(f"{fname}(): expected an input with non-empty spatial "
                         f"dimensions, got shape {_shape(input)}")
    c = input.shape[-nsp - 1]
    if transposed:
        if c != weight.shape[0]:
            raise ValueError(f"{fname}(): input of shape {_shape(input)} has {c} channels, but "
                             f"weight of shape {_shape(weight)} expects {weight.shape[0]}")
        if weight.shape[0] % groups:
            raise ValueError(f"{fname}(): in_channels {weight.shape[0]} is not divisible by "
                             f"groups={groups}")
        out_c = weight.shape[1] * groups
    else:
        if c != weight.shape[1] * groups:
            raise ValueError(
                f"{fname}(): input of shape {_shape(input)} has {c} channels, but weight of "
                f"shape {_shape(weight)} with groups={groups} expects "
                f"{weight.shape[1] * groups}")
        if weight.shape[0] % groups:
            raise ValueError(f"{fname}(): out_channels {weight.shape[0]} (weight shape "
                             f"{_shape(weight)}) is not divisible by groups={groups}")
        out_c = weight.shape[0]
    if bias is not None and _shape(bias) != (out_c,):
        raise ValueError(f"{fname}(): bias must have shape ({out_c},), got {_shape(bias)}")
    return input.ndim == nsp + 2


def conv2d(input: Any, weight: Any, bias: Any = None, stride: Any = 1,  # noqa: A002
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Any:
    """2-D cross-correlation of ``(N, C_in, H, W)`` (or ``(C_in, H, W)``) with a
    ``(C_out, C_in / groups, kH, kW)`` weight, as ``torch.nn.functional.conv2d``.

    ``padding``: an int, a pair, ``'valid'`` (none) or ``'same'`` (output size equals
    input size; stride 1 only; an odd total pads one more at the bottom/right).
    """
    xp = namespace(input, weight, bias)
    batched = _check_conv(input, weight, bias, groups, 2, "conv2d")
    s = _ntuple(stride, 2, "stride", "conv2d")
    d = _ntuple(dilation, 2, "dilation", "conv2d")
    (pt, pb), (pl, pr) = _conv_padding(padding, _shape(weight)[2:], s, d, "conv2d")
    x = input if batched else xp.expand_dims(input, axis=0)
    kh, kw = weight.shape[2:]
    h, w = x.shape[2:]
    ho, wo = _out_size(h, kh, s[0], pt, pb, d[0]), _out_size(w, kw, s[1], pl, pr, d[1])
    if ho < 1 or wo < 1:
        raise ValueError(
            f"conv2d(): input of shape {_shape(input)} (padded by {(pt, pb, pl, pr)}) is "
            f"smaller than the dilated kernel of shape {_shape(weight)} (dilation={d})")
    out = _conv2d_core(xp, x, weight, bias, s, (pt, pb, pl, pr), d, groups, (ho, wo))
    return out if batched else out[0, ...]


def conv1d(input: Any, weight: Any, bias: Any = None, stride: Any = 1,  # noqa: A002
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Any:
    """1-D cross-correlation of ``(N, C_in, L)`` (or ``(C_in, L)``) with a
    ``(C_out, C_in / groups, k)`` weight (computed as a conv2d of height 1)."""
    xp = namespace(input, weight, bias)
    batched = _check_conv(input, weight, bias, groups, 1, "conv1d")
    s = _ntuple(stride, 1, "stride", "conv1d")
    d = _ntuple(dilation, 1, "dilation", "conv1d")
    ((pl, pr),) = _conv_padding(padding, _shape(weight)[2:], s, d, "conv1d")
    x = input if batched else xp.expand_dims(input, axis=0)
    lo = _out_size(x.shape[2], weight.shape[2], s[0], pl, pr, d[0])
    if lo < 1:
        raise ValueError(f"conv1d(): input of shape {_shape(input)} (padded by {(pl, pr)}) is "
                         f"smaller than the dilated kernel of shape {_shape(weight)}")
    out = _conv2d_core(xp, xp.expand_dims(x, axis=2), xp.expand_dims(weight, axis=2), bias,
                       (1, s[0]), (0, 0, pl, pr), (1, d[0]), groups, (1, lo))
    out = out[:, :, 0, :]
    return out if batched else out[0, ...]


def _conv_transpose(input: Any, weight: Any, bias: Any, stride: Any, padding: Any,  # noqa: A002
                    output_padding: Any, groups: int, dilation: Any, nsp: int,
                    fname: str) -> Any:
    xp = namespace(input, weight, bias)
    batched = _check_conv(input, weight, bias, groups, nsp, fname, transposed=True)
    s = _ntuple(stride, nsp, "stride", fname)
    d = _ntuple(dilation, nsp, "dilation", fname)
    p = _ntuple(padding, nsp, "padding", fname, minimum=0)
    op = _ntuple(output_padding, nsp, "output_padding", fname, minimum=0)
    for a in range(nsp):
        if op[a] >= max(s[a], d[a]):
            raise ValueError(f"{fname}(): output_padding {op} must be smaller than either "
                             f"stride {s} or dilation {d}")
    x = input if batched else xp.expand_dims(input, axis=0)
    ks = _shape(weight)[2:]
    sizes = [(x.shape[2 + a] - 1) * s[a] - 2 * p[a] + d[a] * (ks[a] - 1) + op[a] + 1
             for a in range(nsp)]
    if any(v < 1 for v in sizes):
        raise ValueError(f"{fname}(): input of shape {_shape(input)} with weight of shape "
                         f"{_shape(weight)} gives an empty output {tuple(sizes)}")
    if nsp == 1:
        x = xp.expand_dims(x, axis=2)
        weight = xp.expand_dims(weight, axis=2)
        s, d, p, ks, sizes = (1, *s), (1, *d), (0, *p), (1, *ks), [1, *sizes]
    lo = tuple(d[a] * (ks[a] - 1) - p[a] for a in range(2))
    cin, cog = weight.shape[0], weight.shape[1]
    w = xp.reshape(weight, (groups, cin // groups, cog) + tuple(ks))
    w = xp.permute_dims(w, (0, 2, 1, 3, 4))
    w = xp.flip(xp.reshape(w, (groups * cog, cin // groups) + tuple(ks)), axis=(2, 3))
    out = _gather_conv2d(xp, x, w, (1, 1), lo, tuple(sizes), d, groups, bias, dil=s)
    if nsp == 1:
        out = out[:, :, 0, :]
    return out if batched else out[0, ...]


def conv_transpose2d(input: Any, weight: Any, bias: Any = None, stride: Any = 1,  # noqa: A002
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                     dilation: Any = 1) -> Any:
    """Transposed 2-D convolution (the gradient of conv2d with respect to its input)
    with a ``(C_in, C_out / groups, kH, kW)`` weight; output size
    ``(H - 1) * stride - 2 * padding + dilation * (kH - 1) + output_padding + 1``."""
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups,
                           dilation, 2, "conv_transpose2d")


def conv_transpose1d(input: Any, weight: Any, bias: Any = None, stride: Any = 1,  # noqa: A002
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                     dilation: Any = 1) -> Any:
    """Transposed 1-D convolution with a ``(C_in, C_out / groups, k)`` weight."""
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups,
                           dilation, 1, "conv_transpose1d")


def _index_array(xp: Any, x: Any, host: Any, what: str, geometry: tuple) -> Any:
    """The host index ``host`` as an index array of ``xp`` on ``x``'s device (cached)."""
    arr = on_device(host, what, geometry, xp, x)
    return new(arr, x._device) if isinstance(x, Tensor) else arr


def _fold_depth(xp: Any, x: Any, kd: int, s: int, d: int, lo: int, out: int, dil: int,
                groups: int) -> Any:
    """``(N, C, D, H, W)`` as ``(N*D_out, G*kD*C/G, H, W)`` (stored channels-last): image
    ``n*D_out + z`` holds, group by group and tap by tap, the input depth slice under
    tap ``t`` of output depth ``z`` (at ``z*s + t*d - lo`` of the input dilated by
    ``dil``), or zeros where that is no input slice."""
    n, c, depth, h, w = _shape(x)
    xl = xp.permute_dims(x, (0, 2, 3, 4, 1))  # (N, D, H, W, C)
    host, missing = axis_index(depth, kd, s, d, lo, out, dil)
    if not (kd == 1 and out == depth and s == 1 and lo == 0 and dil == 1):
        if missing:
            zero = xp.zeros((n, 1, h, w, c), dtype=x.dtype, device=x.device)
            xl = xp.concat([xl, zero], axis=1)
        idx = _index_array(xp, x, host, "depth", (depth, kd, s, d, lo, out, dil))
        xl = xp.take(xl, idx, axis=1)  # (N, D_out*kD, H, W, C)
    cg = c // groups
    xl = xp.permute_dims(xp.reshape(xl, (n, out, kd, h, w, groups, cg)), (0, 1, 3, 4, 5, 2, 6))
    xl = xp.reshape(xl, (n * out, h, w, groups * kd * cg))
    return xp.permute_dims(xl, (0, 3, 1, 2))


def _unfold_depth(xp: Any, y: Any, n: int, out: int) -> Any:
    """``(N*D_out, C, H, W)`` as ``(N, C, D_out, H, W)`` (a view of channels-last storage)."""
    _, c, h, w = _shape(y)
    y = xp.reshape(xp.permute_dims(y, (0, 2, 3, 1)), (n, out, h, w, c))
    return xp.permute_dims(y, (0, 4, 1, 2, 3))


def conv3d(input: Any, weight: Any, bias: Any = None, stride: Any = 1,  # noqa: A002
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Any:
    """3-D cross-correlation of ``(N, C_in, D, H, W)`` (or ``(C_in, D, H, W)``) with a
    ``(C_out, C_in / groups, kD, kH, kW)`` weight, as ``torch.nn.functional.conv3d``.

    ``padding``: an int, a triple, ``'valid'`` (none) or ``'same'`` (output size equals
    input size; stride 1 only; an odd total pads one more at the end of that axis).
    Computed as one conv2d over ``N*D_out`` images whose channels hold the ``kD`` input
    depth slices under each output depth.
    """
    xp = namespace(input, weight, bias)
    batched = _check_conv(input, weight, bias, groups, 3, "conv3d")
    groups = operator.index(groups)
    s = _ntuple(stride, 3, "stride", "conv3d")
    d = _ntuple(dilation, 3, "dilation", "conv3d")
    ks = _shape(weight)[2:]
    pads = _conv_padding(padding, ks, s, d, "conv3d")
    x = input if batched else xp.expand_dims(input, axis=0)
    sizes = tuple(_out_size(x.shape[2 + a], ks[a], s[a], pads[a][0], pads[a][1], d[a])
                  for a in range(3))
    if any(v < 1 for v in sizes):
        raise ValueError(
            f"conv3d(): input of shape {_shape(input)} (padded by "
            f"{tuple(p for lh in pads for p in lh)}) is smaller than the dilated kernel of "
            f"shape {_shape(weight)} (dilation={d})")
    o, cg, kd, kh, kw = _shape(weight)
    x2 = _fold_depth(xp, x, kd, s[0], d[0], pads[0][0], sizes[0], 1, groups)
    w2 = xp.reshape(xp.permute_dims(weight, (0, 2, 1, 3, 4)), (o, kd * cg, kh, kw))
    (pt, pb), (pl, pr) = pads[1], pads[2]
    y = _conv2d_core(xp, x2, w2, bias, s[1:], (pt, pb, pl, pr), d[1:], groups, sizes[1:])
    out = _unfold_depth(xp, y, x.shape[0], sizes[0])
    return out if batched else out[0, ...]


def conv_transpose3d(input: Any, weight: Any, bias: Any = None, stride: Any = 1,  # noqa: A002
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                     dilation: Any = 1) -> Any:
    """Transposed 3-D convolution (the gradient of conv3d with respect to its input) of
    ``(N, C_in, D, H, W)`` (or ``(C_in, D, H, W)``) with a
    ``(C_in, C_out / groups, kD, kH, kW)`` weight; output size per axis
    ``(D - 1) * stride - 2 * padding + dilation * (kD - 1) + output_padding + 1``.
    Computed as one conv_transpose2d over ``N*D_out`` images whose channels hold the
    input depth slices under each output depth's taps."""
    fname = "conv_transpose3d"
    xp = namespace(input, weight, bias)
    batched = _check_conv(input, weight, bias, groups, 3, fname, transposed=True)
    groups = operator.index(groups)
    s = _ntuple(stride, 3, "stride", fname)
    d = _ntuple(dilation, 3, "dilation", fname)
    p = _ntuple(padding, 3, "padding", fname, minimum=0)
    op = _ntuple(output_padding, 3, "output_padding", fname, minimum=0)
    for a in range(3):
        if op[a] >= max(s[a], d[a]):
            raise ValueError(f"{fname}(): output_padding {op} must be smaller than either "
                             f"stride {s} or dilation {d}")
    x = input if batched else xp.expand_dims(input, axis=0)
    ks = _shape(weight)[2:]
    sizes = tuple((x.shape[2 + a] - 1) * s[a] - 2 * p[a] + d[a] * (ks[a] - 1) + op[a] + 1
                  for a in range(3))
    if any(v < 1 for v in sizes):
        raise ValueError(f"{fname}(): input of shape {_shape(input)} with weight of shape "
                         f"{_shape(weight)} gives an empty output {sizes}")
    cin, cog, kd, kh, kw = _shape(weight)
    cg = cin // groups
    # output depth z, tap t reads input slice (z + p - t*d) / s when that is a whole number
    x2 = _fold_depth(xp, x, kd, 1, -d[0], -p[0], sizes[0], s[0], groups)
    w2 = xp.permute_dims(xp.reshape(weight, (groups, cg, cog, kd, kh, kw)), (0, 3, 1, 2, 4, 5))
    w2 = xp.reshape(w2, (groups * kd * cg, cog, kh, kw))
    y = _conv_transpose(x2, w2, bias, s[1:], p[1:], op[1:], groups, d[1:], 2, fname)
    out = _unfold_depth(xp, y, x.shape[0], sizes[0])
    return out if batched else out[0, ...]


def conv_tbc(input: Any, weight: Any, bias: Any, pad: int = 0) -> Any:  # noqa: A002
    """1-D convolution in time-batch-channels layout (PyTorch's ``conv_tbc``): ``input``
    ``(T, B, C_in)``, ``weight`` ``(k, C_in, C_out)``, ``bias`` ``(C_out,)``, ``pad`` zeros
    on both ends of the time axis; returns ``(T + 2 * pad - k + 1, B, C_out)``."""
    xp = namespace(input, weight, bias)
    if input.ndim != 3:
        raise ValueError(f"conv_tbc(): expected a 3-D (T, B, C_in) input, got shape "
                         f"{tuple(input.shape)}")
    if weight.ndim != 3 or weight.shape[1] != input.shape[2]:
        raise ValueError(f"conv_tbc(): expected a 3-D (k, {input.shape[2]}, C_out) weight for "
                         f"input of shape {tuple(input.shape)}, got weight of shape "
                         f"{tuple(weight.shape)}")
    if bias is None or tuple(bias.shape) != (weight.shape[2],):
        raise ValueError(f"conv_tbc(): expected a bias of shape ({weight.shape[2]},), got "
                         f"{None if bias is None else tuple(bias.shape)}")
    x = xp.permute_dims(input, (1, 2, 0))
    w = xp.permute_dims(weight, (2, 1, 0))
    y = conv1d(x, w, bias, 1, operator.index(pad))
    return xp.permute_dims(y, (2, 0, 1))


# autocast (vtl.amp): the list each op belongs to
_autocast.apply(
    globals(),
    low_ops=("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
        "conv_transpose3d"),
)
