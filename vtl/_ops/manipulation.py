"""Manipulation functions: reshape, permute_dims, expand_dims, squeeze, concat,
stack, unstack, flip, roll, broadcast_to, broadcast_arrays, moveaxis, repeat, tile."""

from __future__ import annotations

from .._tensor import Tensor
from ._core import needs_grad, new, normalize_axis, record, sum_to, tensor_arg

__all__ = ["reshape", "permute_dims", "broadcast_to"]


def reshape(x: Tensor, /, shape: tuple[int, ...], *, copy: bool | None = None) -> Tensor:
    """Give ``x`` a new shape (one ``-1`` is inferred); a view when possible."""
    x = tensor_arg(x, "reshape")
    dev = x._device
    if isinstance(shape, int):
        shape = (shape,)
    shape = tuple(int(s) for s in shape)
    try:
        out = dev.xp.reshape(x._data, shape, copy=copy)
    except ValueError as exc:
        raise ValueError(f"reshape(): cannot reshape a tensor of shape {x.shape} to {shape}: "
                         f"{exc}") from None
    src_shape = x.shape
    if needs_grad(x):
        return record(out, dev, "ReshapeBackward", (x,), lambda g, _: reshape(g, src_shape))
    return new(out, dev)


def permute_dims(x: Tensor, /, axes: tuple[int, ...]) -> Tensor:
    """Permute the axes of ``x`` (a view)."""
    x = tensor_arg(x, "permute_dims")
    axes = tuple(normalize_axis(a, x.ndim, "permute_dims") for a in axes)
    if sorted(axes) != list(range(x.ndim)):
        raise ValueError(f"permute_dims(): {axes} is not a permutation of the {x.ndim} axes")
    dev = x._device
    out = dev.xp.permute_dims(x._data, axes)
    if needs_grad(x):
        inv = tuple(sorted(range(len(axes)), key=axes.__getitem__))
        return record(out, dev, "PermuteBackward", (x,), lambda g, _: permute_dims(g, inv))
    return new(out, dev)


def broadcast_to(x: Tensor, /, shape: tuple[int, ...]) -> Tensor:
    """Broadcast ``x`` to ``shape`` (a read-only view)."""
    x = tensor_arg(x, "broadcast_to")
    dev = x._device
    shape = tuple(int(s) for s in shape)
    try:
        out = dev.xp.broadcast_to(x._data, shape)
    except ValueError:
        raise ValueError(f"broadcast_to(): cannot broadcast shape {x.shape} to {shape}") from None
    if needs_grad(x):
        return record(out, dev, "BroadcastBackward", (x,), lambda g, _: sum_to(g, x))
    return new(out, dev)


