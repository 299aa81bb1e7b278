"""Statistical functions: sum, prod, mean, var, std, max, min, cumulative_sum,
cumulative_prod."""

from __future__ import annotations

from typing import Any

from .._tensor import Tensor
from ._core import needs_grad, new, normalize_axes, record, tensor_arg

__all__ = ["sum"]


def _expand_reduced(g: Tensor, x: Tensor, axes: tuple[int, ...], keepdims: bool) -> Tensor:
    """Broadcast a gradient of a reduction back to the input's shape."""
    from .manipulation import broadcast_to, reshape

    if not keepdims:
        shape = tuple(1 if i in axes else s for i, s in enumerate(x.shape))
        g = reshape(g, shape)
    return broadcast_to(g, x.shape)


def sum(x: Tensor, /, *, axis: int | tuple[int, ...] | None = None, dtype: Any = None,
        keepdims: bool = False) -> Tensor:  # noqa: A001 - the standard's name
    """Sum over ``axis`` (all axes by default)."""
    x = tensor_arg(x, "sum")
    axes = normalize_axes(axis, x.ndim, "sum")
    dev = x._device
    if dtype is not None:
        from ..backends._dtypes import to_dtype

        dtype = to_dtype(dtype)
    out = dev.xp.sum(x._data, axis=axes, dtype=dtype, keepdims=keepdims)
    if needs_grad(x) and out.dtype.kind in "fc":
        def vjp(g: Tensor, _: Any) -> Tensor:
            from ._core import sum_to

            return sum_to(_expand_reduced(g, x, axes, keepdims), x)

        return record(out, dev, "SumBackward", (x,), vjp)
    return new(out, dev)
