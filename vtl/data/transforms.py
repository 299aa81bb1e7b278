"""Simple tensor transforms for datasets: normalize, one_hot, to_float."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import vtl

from .._tensor import Tensor

__all__ = ["normalize", "one_hot", "to_float"]


def _tensor(x: Any, fname: str) -> Tensor:
    if isinstance(x, Tensor):
        return x
    try:
        return vtl.asarray(x)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{fname}(): expected a tensor or array, got {type(x).__name__}") from exc


def to_float(x: Any, dtype: Any = None, scale: float | None = None) -> Tensor:
    """``x`` as a floating tensor (``float32`` unless ``dtype``), divided by ``scale``
    if given (``to_float(pixels, scale=255)`` maps uint8 images to ``[0, 1]``).

    Args:
        x: The input tensor or array.
        dtype: A real floating dtype (default ``float32``).
        scale: Divide by this (non-zero).

    Returns:
        The floating tensor.

    Raises:
        TypeError: If ``dtype`` is not real floating.
        ValueError: If ``scale`` is 0.
    """
    x = _tensor(x, "to_float")
    dt = vtl.float32 if dtype is None else dtype
    if not vtl.isdtype(dt, "real floating"):
        raise TypeError(f"to_float(): dtype must be a real floating dtype, got {dt}")
    out = vtl.astype(x, dt)
    if scale is not None:
        if scale == 0:
            raise ValueError("to_float(): scale must be non-zero")
        out = out / scale
    return out


def normalize(x: Any, mean: float | Sequence[float] | Tensor,
              std: float | Sequence[float] | Tensor, axis: int = -1) -> Tensor:
    """``(x - mean) / std``; sequences of per-channel values apply along ``axis``
    (``axis=1`` for NCHW images, ``-1`` for feature columns).

    Args:
        x: The input tensor.
        mean: A number or per-channel values.
        std: A number or per-channel values (non-zero).
        axis: The channel axis of per-channel values.

    Returns:
        The normalised tensor.

    Raises:
        ValueError: If ``mean`` or ``std`` is not a number or 1-D of the right length, or ``std``
            is 0.
        IndexError: If ``axis`` is out of range.
    """
    x = _tensor(x, "normalize")
    if not vtl.isdtype(x.dtype, "real floating"):
        x = to_float(x)

    def shaped(v: Any, name: str) -> Any:
        if isinstance(v, (int, float)):
            return float(v)
        t = vtl.asarray(v, dtype=x.dtype, device=x.device)
        if t.ndim == 0:
            return t
        if t.ndim != 1:
            raise ValueError(f"normalize(): {name} must be a number or 1-D, got shape {t.shape}")
        ax = axis if axis >= 0 else x.ndim + axis
        if not 0 <= ax < x.ndim:
            raise IndexError(f"normalize(): axis {axis} out of range for {x.ndim}-D input")
        if t.shape[0] != x.shape[ax]:
            raise ValueError(f"normalize(): {name} has {t.shape[0]} values, x has "
                             f"{x.shape[ax]} along axis {axis}")
        return vtl.reshape(t, (-1,) + (1,) * (x.ndim - ax - 1))

    m, s = shaped(mean, "mean"), shaped(std, "std")
    if isinstance(s, float) and s == 0.0:
        raise ValueError("normalize(): std must be non-zero")
    return (x - m) / s


def one_hot(labels: Any, num_classes: int, dtype: Any = None) -> Tensor:
    """``float32`` (or ``dtype``) rows with a 1 at each label; labels must lie in
    ``[0, num_classes)`` (``ValueError`` otherwise).

    Args:
        labels: Integer labels.
        num_classes: Number of classes.
        dtype: dtype of the result (default ``float32``).

    Returns:
        A tensor of shape ``labels.shape + (num_classes,)``.

    Raises:
        TypeError: If the labels are not integers.
        ValueError: If ``num_classes < 1`` or a label is out of range.
    """
    y = _tensor(labels, "one_hot")
    if not vtl.isdtype(y.dtype, "integral"):
        raise TypeError(f"one_hot(): labels must be integers, got {y.dtype}")
    if num_classes < 1:
        raise ValueError(f"one_hot(): num_classes must be >= 1, got {num_classes}")
    if y.size and (int(vtl.min(y)) < 0 or int(vtl.max(y)) >= num_classes):
        raise ValueError(f"one_hot(): labels must lie in [0, {num_classes}), got values in "
                         f"[{int(vtl.min(y))}, {int(vtl.max(y))}]")
    classes = vtl.arange(num_classes, dtype=y.dtype, device=y.device)
    return vtl.astype(y[..., None] == classes, vtl.float32 if dtype is None else dtype)
