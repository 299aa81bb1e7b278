"""Set functions of the array API standard: unique_all, unique_counts,
unique_inverse, unique_values, and ``isin`` (2025.12).

Uniqueness is value equality: every NaN is distinct (count 1 each), ``-0.0``
and ``+0.0`` are one value. Values come sorted ascending with NaNs last. The
results carry no gradient (like ``torch.unique``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .._tensor import Tensor
from ._core import SCALAR_TYPES, mixed_devices, new, tensor_arg

__all__ = ["isin", "unique_all", "unique_counts", "unique_inverse", "unique_values"]


class UniqueAllResult(NamedTuple):
    values: Tensor
    indices: Tensor
    inverse_indices: Tensor
    counts: Tensor


class UniqueCountsResult(NamedTuple):
    values: Tensor
    counts: Tensor


class UniqueInverseResult(NamedTuple):
    values: Tensor
    inverse_indices: Tensor


def _index(raw: Any, dev: Any) -> Tensor:
    idt = dev.backend.default_dtypes(dev.index)["indexing"]
    if raw.dtype != idt:
        raw = dev.xp.astype(raw, idt)
    return new(raw, dev)


def unique_all(x: Tensor, /) -> UniqueAllResult:
    """Unique values of the flattened ``x`` with first-occurrence ``indices``,
    ``inverse_indices`` (shape of ``x``) and ``counts``.

    Args:
        x: The input tensor.

    Returns:
        ``(values, indices, inverse_indices, counts)``.
    """
    x = tensor_arg(x, "unique_all")
    dev = x._device
    r = dev.xp.unique_all(x._data)
    return UniqueAllResult(new(r.values, dev), _index(r.indices, dev),
                           _index(r.inverse_indices, dev), _index(r.counts, dev))


def unique_counts(x: Tensor, /) -> UniqueCountsResult:
    """Unique values of the flattened ``x`` and how often each occurs.

    Args:
        x: The input tensor.

    Returns:
        ``(values, counts)``.
    """
    x = tensor_arg(x, "unique_counts")
    dev = x._device
    r = dev.xp.unique_counts(x._data)
    return UniqueCountsResult(new(r.values, dev), _index(r.counts, dev))


def unique_inverse(x: Tensor, /) -> UniqueInverseResult:
    """Unique values of the flattened ``x`` and the indices (shape of ``x``) that
    rebuild ``x`` from them.

    Args:
        x: The input tensor.

    Returns:
        ``(values, inverse_indices)``.
    """
    x = tensor_arg(x, "unique_inverse")
    dev = x._device
    r = dev.xp.unique_inverse(x._data)
    return UniqueInverseResult(new(r.values, dev), _index(r.inverse_indices, dev))


def unique_values(x: Tensor, /) -> Tensor:
    """Unique values of the flattened ``x`` (1-D, same dtype).

    Args:
        x: The input tensor.

    Returns:
        The unique values, a 1-D tensor.
    """
    x = tensor_arg(x, "unique_values")
    dev = x._device
    return new(dev.xp.unique_values(x._data), dev)


def _isin_portable(xp: Any, a: Any, b: Any, nd: Any) -> Any:
    """``isin`` from standard functions only: sort ``b``, binary-search ``a``."""
    bf = xp.reshape(b, (-1,))
    m = bf.shape[0]
    if m == 0:
        return xp.zeros(a.shape, dtype=xp.bool, device=nd)
    bs = xp.sort(bf)
    af = xp.reshape(a, (-1,))
    idx = xp.searchsorted(bs, af)
    idx = xp.clip(idx, 0, m - 1)
    found = xp.equal(xp.take(bs, idx), af)
    return xp.reshape(found, a.shape)


def isin(x1: Tensor | bool | int | float | complex, x2: Tensor | bool | int | float | complex,
         /, *, invert: bool = False) -> Tensor:
    """Whether each element of ``x1`` equals some element of ``x2`` (bool, shape of ``x1``).

    Equality is value equality after type promotion, so NaN is never found.
    ``invert=True`` gives the negation.

    Args:
        x1: The elements to look up (a tensor or a scalar).
        x2: The elements to look for (a tensor or a scalar).
        invert: Return the negation.

    Returns:
        A bool tensor of ``x1``'s shape.

    Raises:
        TypeError: If an operand is not a tensor or a scalar, neither is a tensor, or ``invert`` is
            not a bool.
        ValueError: If the tensors are on different devices.
    """
    from .dtype_functions import result_type

    t1 = isinstance(x1, Tensor)
    t2 = isinstance(x2, Tensor)
    if not (t1 or t2):
        raise TypeError(
            "isin() needs at least one of x1 and x2 to be a vtl.Tensor, got "
            f"{type(x1).__name__} and {type(x2).__name__}"
        )
    for t, name in ((x1, "x1"), (x2, "x2")):
        if not isinstance(t, (Tensor, *SCALAR_TYPES, np.generic)):
            raise TypeError(f"isin() expected a vtl.Tensor or a Python scalar for {name}, "
                            f"got {type(t).__name__}")
    # (a NumPy scalar promotes as a 0-d array of its dtype, see vtl.result_type)
    dev = x1._device if t1 else x2._device
    if t1 and t2 and x2._device is not dev:
        raise mixed_devices("isin", dev, x2._device)
    if not isinstance(invert, bool):
        raise TypeError(f"isin() expected a bool for invert, got {type(invert).__name__}")
    xp = dev.xp
    nd = dev.backend.native_device(dev.index)
    dt = result_type(x1, x2)
    a = (x1._data if x1._data.dtype == dt else xp.astype(x1._data, dt)) if t1 else \
        xp.asarray(x1, dtype=dt, device=nd)
    b = (x2._data if x2._data.dtype == dt else xp.astype(x2._data, dt)) if t2 else \
        xp.asarray(x2, dtype=dt, device=nd)
    native = getattr(xp, "isin", None)
    if native is not None:
        out = native(a, b, invert=invert)
        return new(out, dev)
    out = _isin_portable(xp, a, b, nd)
    if invert:
        out = xp.logical_not(out)
    return new(out, dev)
