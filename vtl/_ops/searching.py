"""Searching functions of the array API standard: argmax, argmin, count_nonzero,
nonzero, searchsorted, where.

Only ``where`` is differentiable (with respect to ``x1`` and ``x2``); the others
return integer indices.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from .._tensor import Tensor
from ..backends._dtypes import kind as _dkind
from ..backends._dtypes import to_dtype
from ._aliases import torch_names
from ._core import (
    SCALAR_TYPES,
    _grad,
    mixed_devices,
    needs_grad,
    new,
    normalize_axes,
    normalize_axis,
    record,
    sum_to,
    tensor_arg,
)
from .dtype_functions import _scalar_promote, result_type

__all__ = ["argmax", "argmin", "count_nonzero", "nonzero", "searchsorted", "where"]


def _arg_extremum(x: Any, axis: int | None, keepdims: bool, fname: str) -> Tensor:
    x = tensor_arg(x, fname)
    if _dkind(x._data.dtype) == "c":
        raise TypeError(f"{fname}() needs a real-valued tensor, got dtype {x.dtype}")
    if axis is None:
        if x.size == 0:
            raise ValueError(f"{fname}() of an empty tensor (shape {x.shape}) is undefined")
    else:
        if isinstance(axis, bool) or not isinstance(axis, int):
            raise TypeError(f"{fname}() expected an int or None for axis, got {axis!r}")
        axis = 0 if x.ndim == 0 and axis in (0, -1) else normalize_axis(axis, x.ndim, fname)
        if x.ndim and x.shape[axis] == 0:
            raise ValueError(
                f"{fname}(): cannot search along axis {axis} of size 0 (shape {x.shape})"
            )
    dev = x._device
    if x.ndim == 0:
        out = dev.xp.zeros((), dtype=_index_dtype(dev), device=dev.backend.native_device(
            dev.index))
        return new(out, dev)
    out = getattr(dev.xp, fname)(x._data, axis=axis, keepdims=keepdims)
    return new(out, dev)


def _index_dtype(dev: Any) -> Any:
    return dev.backend.default_dtypes(dev.index)["indexing"]


@torch_names(dim="axis", keepdim="keepdims")
def argmax(x: Tensor, /, *, axis: int | None = None, keepdims: bool = False) -> Tensor:
    """Index of the first maximum along ``axis`` (of the flattened tensor for ``None``)."""
    return _arg_extremum(x, axis, keepdims, "argmax")


@torch_names(dim="axis", keepdim="keepdims")
def argmin(x: Tensor, /, *, axis: int | None = None, keepdims: bool = False) -> Tensor:
    """Index of the first minimum along ``axis`` (of the flattened tensor for ``None``)."""
    return _arg_extremum(x, axis, keepdims, "argmin")


@torch_names(dim="axis", keepdim="keepdims")
def count_nonzero(x: Tensor, /, *, axis: int | tuple[int, ...] | None = None,
                  keepdims: bool = False) -> Tensor:
    """Number of non-zero (``True``) elements over ``axis``, in the default index dtype."""
    x = tensor_arg(x, "count_nonzero")
    axes = normalize_axes(axis, x.ndim, "count_nonzero")
    dev = x._device
    xp = dev.xp
    out = xp.count_nonzero(x._data, axis=axes, keepdims=keepdims)
    idt = _index_dtype(dev)
    if out.dtype != idt:
        out = xp.astype(out, idt)
    return new(out, dev)


def nonzero(x: Tensor, /) -> tuple[Tensor, ...]:
    """Indices of the non-zero elements, one index tensor per axis (C order)."""
    x = tensor_arg(x, "nonzero")
    if x.ndim == 0:
        raise ValueError("nonzero() needs a tensor with at least one dimension, got a 0-d tensor")
    dev = x._device
    return tuple(new(i, dev) for i in dev.xp.nonzero(x._data))


def _scalar_operand(v: Any, fname: str, argname: str) -> Any:
    """A Python scalar, or a NumPy scalar of a vtl dtype (which promotes as a 0-d array
    of that dtype, see :func:`vtl.result_type`)."""
    if isinstance(v, np.generic):
        to_dtype(v.dtype)  # a TypeError for dtypes vtl lacks
        return v
    if isinstance(v, SCALAR_TYPES):
        return v
    raise TypeError(
        f"{fname}() expected a vtl.Tensor or a Python scalar for {argname}, "
        f"got {type(v).__name__}"
    )


def searchsorted(x1: Tensor, x2: Tensor | int | float, /, *,
                 side: Literal["left", "right"] = "left", sorter: Tensor | None = None) -> Tensor:
    """Insertion indices of ``x2`` into the ascending 1-D ``x1`` (or ``x1[sorter]``).

    ``side='left'`` gives ``x1[i-1] < v <= x1[i]``, ``'right'`` gives
    ``x1[i-1] <= v < x1[i]``; NaNs sort last, as in :func:`sort`.
    """
    x1 = tensor_arg(x1, "searchsorted", "x1")
    if x1.ndim != 1:
        raise ValueError(f"searchsorted() needs a 1-D x1, got shape {x1.shape}")
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted(): side must be 'left' or 'right', got {side!r}")
    dev = x1._device
    xp = dev.xp
    if isinstance(x2, Tensor):
        if x2._device is not dev:
            raise mixed_devices("searchsorted", dev, x2._device)
    else:
        x2 = _scalar_operand(x2, "searchsorted", "x2")
    for t in (x1, x2):
        if isinstance(t, complex) or (isinstance(t, (Tensor, np.generic))
                                      and _dkind(t.dtype) == "c"):
            raise TypeError("searchsorted() needs real-valued x1 and x2, got a complex operand")
    dt = result_type(x1, x2)
    a = x1._data if x1._data.dtype == dt else xp.astype(x1._data, dt)
    if isinstance(x2, Tensor):
        b = x2._data if x2._data.dtype == dt else xp.astype(x2._data, dt)
    else:
        b = xp.asarray(x2, dtype=dt, device=dev.backend.native_device(dev.index))
    s = None
    if sorter is not None:
        sorter = tensor_arg(sorter, "searchsorted", "sorter")
        if sorter._device is not dev:
            raise mixed_devices("searchsorted", dev, sorter._device)
        if _dkind(sorter._data.dtype) not in "iu":
            raise TypeError(f"searchsorted(): sorter must have an integer dtype, got "
                            f"{sorter.dtype}")
        if sorter.shape != x1.shape:
            raise ValueError(f"searchsorted(): sorter has shape {sorter.shape}, expected "
                             f"the shape of x1 {x1.shape}")
        s = sorter._data
    out = xp.searchsorted(a, b, side=side, sorter=s)
    idt = _index_dtype(dev)
    if out.dtype != idt:
        out = xp.astype(out, idt)
    return new(out, dev)


def where(condition: Tensor, x1: Tensor | bool | int | float | complex,
          x2: Tensor | bool | int | float | complex, /) -> Tensor:
    """Elements of ``x1`` where ``condition`` is true, else of ``x2`` (broadcast).

    One of ``x1``/``x2`` may be a Python scalar; the dtype follows type promotion.
    Differentiable with respect to ``x1`` and ``x2``.
    """
    condition = tensor_arg(condition, "where", "condition")
    if _dkind(condition._data.dtype) != "b":
        raise TypeError(f"where() needs a bool condition, got dtype {condition.dtype}")
    dev = condition._device
    xp = dev.xp
    t1 = isinstance(x1, Tensor)
    t2 = isinstance(x2, Tensor)
    if not (t1 or t2):
        raise TypeError(
            "where() needs at least one of x1 and x2 to be a vtl.Tensor, got "
            f"{type(x1).__name__} and {type(x2).__name__}"
        )
    if t1 and t2:
        for t in (x1, x2):
            if t._device is not dev:
                raise mixed_devices("where", dev, t._device)
        a, b = x1._data, x2._data
        if a.dtype != b.dtype:
            dt = result_type(x1, x2)
            a = a if a.dtype == dt else xp.astype(a, dt)
            b = b if b.dtype == dt else xp.astype(b, dt)
    else:
        t = x1 if t1 else x2
        if t._device is not dev:
            raise mixed_devices("where", dev, t._device)
        raw = t._data
        s = _scalar_operand(x2 if t1 else x1, "where", "x2" if t1 else "x1")
        strong = isinstance(s, np.generic)  # a NumPy scalar: a 0-d array of its dtype
        dt = result_type(t, s) if strong else _scalar_promote(raw.dtype, s)
        changed = dt != raw.dtype  # the scalar changes the dtype (e.g. int tensor, float)
        if changed:
            raw = xp.astype(raw, dt)
        if strong or changed:
            s = xp.asarray(s, dtype=dt, device=dev.backend.native_device(dev.index))
        # else: a Python scalar of the tensor's kind (the standard's where takes it as is)
        a, b = (raw, s) if t1 else (s, raw)
    try:
        out = xp.where(condition._data, a, b)
    except ValueError:
        shapes = [condition.shape] + [t.shape for t in (x1, x2) if isinstance(t, Tensor)]
        raise ValueError(f"where(): shapes {', '.join(map(str, shapes))} cannot be "
                         "broadcast together") from None
    if needs_grad(x1, x2) and _dkind(out.dtype) in "fc":
        def vjp(g: Tensor, _: Any) -> tuple:
            g1 = g2 = None
            if not (_grad.enabled and g._requires_grad):  # plain backward: raw arrays
                c, gd = condition._data, g._data
                if t1 and x1._requires_grad:
                    g1 = sum_to(new(xp.where(c, gd, 0), dev), x1)
                if t2 and x2._requires_grad:
                    g2 = sum_to(new(xp.where(c, 0, gd), dev), x2)
                return g1, g2
            if t1 and x1._requires_grad:
                g1 = sum_to(where(condition, g, 0), x1)
            if t2 and x2._requires_grad:
                g2 = sum_to(where(condition, 0, g), x2)
            return g1, g2

        return record(out, dev, "WhereBackward", (x1, x2), vjp, saved=(condition,))
    return new(out, dev)
