"""Utility functions of the array API standard: all, any, diff."""

from __future__ import annotations

from typing import Any

from .._tensor import Tensor
from ..backends._dtypes import kind as _dkind
from ._aliases import torch_names
from ._core import (
    mixed_devices,
    needs_grad,
    new,
    normalize_axes,
    normalize_axis,
    record,
    sum_to,
    tensor_arg,
)

__all__ = ["all", "any", "diff"]


@torch_names(dim="axis", keepdim="keepdims")
def all(x: Tensor, /, *, axis: int | tuple[int, ...] | None = None,
        keepdims: bool = False) -> Tensor:  # noqa: A001 - the standard's name
    """Whether every element over ``axis`` is true (non-zero); ``True`` for an empty axis."""
    x = tensor_arg(x, "all")
    axes = normalize_axes(axis, x.ndim, "all")
    dev = x._device
    return new(dev.xp.all(x._data, axis=axes, keepdims=keepdims), dev)


@torch_names(dim="axis", keepdim="keepdims")
def any(x: Tensor, /, *, axis: int | tuple[int, ...] | None = None,
        keepdims: bool = False) -> Tensor:  # noqa: A001 - the standard's name
    """Whether some element over ``axis`` is true (non-zero); ``False`` for an empty axis."""
    x = tensor_arg(x, "any")
    axes = normalize_axes(axis, x.ndim, "any")
    dev = x._device
    return new(dev.xp.any(x._data, axis=axes, keepdims=keepdims), dev)


def _axis_slice(axis: int, sl: slice) -> tuple:
    return (slice(None),) * axis + (sl,)


def _edge_arg(t: Any, x: Tensor, axis: int, argname: str) -> Tensor:
    t = tensor_arg(t, "diff", argname)
    if t._device is not x._device:
        raise mixed_devices("diff", x._device, t._device)
    if t.ndim != x.ndim or _shapes_differ(t.shape, x.shape, axis):
        raise ValueError(
            f"diff(): {argname} has shape {t.shape}, expected the shape of x {x.shape} "
            f"except along axis {axis}"
        )
    return t


def _shapes_differ(a: tuple[int, ...], b: tuple[int, ...], axis: int) -> bool:
    return [s for i, s in enumerate(a) if i != axis] != [s for i, s in enumerate(b) if i != axis]


@torch_names(dim="axis")
def diff(x: Tensor, /, *, axis: int = -1, n: int = 1, prepend: Tensor | None = None,
         append: Tensor | None = None) -> Tensor:
    """The ``n``-th forward difference ``out[i] = x[i+1] - x[i]`` along ``axis``.

    ``prepend``/``append`` are joined to ``x`` along ``axis`` first (for ``n >= 1``;
    ``n=0`` returns a copy of ``x``, as NumPy does). Bool tensors
    use ``not_equal`` (like NumPy). Differentiable in ``x``, ``prepend`` and ``append``.
    """
    x = tensor_arg(x, "diff")
    if x.ndim == 0:
        raise ValueError("diff() needs a tensor with at least one dimension, got a 0-d tensor")
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise TypeError(f"diff() expected an int for axis, got {axis!r}")
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"diff() expected an int for n, got {n!r}")
    if n < 0:
        raise ValueError(f"diff(): n must be non-negative, got {n}")
    ax = normalize_axis(axis, x.ndim, "diff")
    dev = x._device
    xp = dev.xp
    parts = [x]
    if prepend is not None:
        prepend = _edge_arg(prepend, x, ax, "prepend")
        parts.insert(0, prepend)
    if append is not None:
        append = _edge_arg(append, x, ax, "append")
        parts.append(append)
    if n == 0:  # like NumPy: x itself (a copy); prepend/append are not joined
        out = xp.asarray(x._data, copy=True)
        if needs_grad(x):
            return record(out, dev, "DiffBackward", (x,), lambda g, _: g)
        return new(out, dev)
    a = xp.concat([p._data for p in parts], axis=ax) if len(parts) > 1 else x._data
    sub = xp.not_equal if _dkind(a.dtype) == "b" else xp.subtract
    hi, lo = _axis_slice(ax, slice(1, None)), _axis_slice(ax, slice(None, -1))
    for _ in range(n):
        a = sub(a[hi], a[lo])
    if needs_grad(*parts) and _dkind(a.dtype) in "fc":
        total = sum(p.shape[ax] for p in parts)
        lens = [p.shape[ax] for p in parts]

        def vjp(g: Tensor, _: Any) -> tuple:
            from .creation import zeros, zeros_like
            from .elementwise import negative

            if total < n:  # empty output: every gradient is zero
                gc = None
            else:
                gc = g
                zshape = tuple(1 if i == ax else s for i, s in enumerate(g.shape))
                z = zeros(zshape, dtype=g.dtype, device=g.device)
                for _ in range(n):
                    gc = negative(diff(gc, axis=ax, prepend=z, append=z))
            grads = []
            start = 0
            for p, ln in zip(parts, lens, strict=True):
                if not p._requires_grad:
                    grads.append(None)
                elif gc is None:
                    grads.append(zeros_like(p))
                else:
                    gp = gc[_axis_slice(ax, slice(start, start + ln))]
                    grads.append(sum_to(gp, p))
                start += ln
            if prepend is None:
                grads.insert(0, None)
            if append is None:
                grads.append(None)
            return tuple(grads)

        return record(a, dev, "DiffBackward", (prepend, x, append), vjp)
    return new(a, dev)
