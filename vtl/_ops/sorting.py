"""Sorting functions of the array API standard: sort (differentiable) and argsort.

NaNs sort last in ascending order and first in descending order. A 0-d tensor
is returned as is (``sort``) or gives index 0 (``argsort``), like PyTorch.
"""

from __future__ import annotations

from typing import Any

from .._tensor import Tensor
from ..backends._dtypes import kind as _dkind
from ._aliases import torch_names
from ._core import needs_grad, new, normalize_axis, record, tensor_arg

__all__ = ["argsort", "sort"]


def _sort_args(x: Any, axis: Any, fname: str) -> tuple[Tensor, int]:
    x = tensor_arg(x, fname)
    if _dkind(x._data.dtype) == "c":
        raise TypeError(f"{fname}() needs a real-valued tensor, got dtype {x.dtype}")
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise TypeError(f"{fname}() expected an int for axis, got {axis!r}")
    if x.ndim == 0 and axis in (0, -1):
        return x, 0
    return x, normalize_axis(axis, x.ndim, fname)


def _sort_pair(x: Any, /, *, axis: int, descending: bool, stable: bool) -> Any:
    """``vtl.sort(x, dim=d)``: PyTorch's named tuple ``(values, indices)`` (``Tensor.sort``;
    always a stable sort)."""
    return tensor_arg(x, "sort").sort(axis, descending, stable)


@torch_names(dim="axis", torch_form=_sort_pair)
def sort(x: Tensor, /, *, axis: int = -1, descending: bool = False,
         stable: bool = True) -> Tensor:
    """``x`` sorted along ``axis``; ties keep their order when ``stable``.

    Differentiable: the gradient is gathered back through the inverse permutation. With
    PyTorch's ``dim=`` instead of ``axis=`` the result is PyTorch's named tuple
    ``(values, indices)`` (``torch.sort(x, dim)``).
    """
    x, ax = _sort_args(x, axis, "sort")
    dev = x._device
    xp = dev.xp
    if x.ndim == 0:
        out = xp.asarray(x._data, copy=True)
        if needs_grad(x):
            return record(out, dev, "SortBackward", (x,), lambda g, _: g)
        return new(out, dev)
    if not needs_grad(x):
        return new(xp.sort(x._data, axis=ax, descending=descending, stable=stable), dev)
    perm = xp.argsort(x._data, axis=ax, descending=descending, stable=stable)
    out = xp.take_along_axis(x._data, perm, axis=ax)

    def vjp(g: Tensor, _: Any) -> Tensor:
        from .indexing import take_along_axis

        inv = new(xp.argsort(perm, axis=ax), dev)  # the inverse permutation (constant)
        return take_along_axis(g, inv, axis=ax)

    return record(out, dev, "SortBackward", (x,), vjp)


@torch_names(dim="axis")
def argsort(x: Tensor, /, *, axis: int = -1, descending: bool = False,
            stable: bool = True) -> Tensor:
    """Indices that sort ``x`` along ``axis`` (default index dtype)."""
    x, ax = _sort_args(x, axis, "argsort")
    dev = x._device
    xp = dev.xp
    if x.ndim == 0:
        idt = dev.backend.default_dtypes(dev.index)["indexing"]
        return new(xp.zeros((), dtype=idt, device=dev.backend.native_device(dev.index)), dev)
    return new(xp.argsort(x._data, axis=ax, descending=descending, stable=stable), dev)
