"""Indexing: ``__getitem__``/``__setitem__`` (basic, integer-array and boolean),
``take`` and ``take_along_axis``."""

from __future__ import annotations

from typing import Any

from .._tensor import Tensor
from ._core import assign_result, check_inplace, needs_grad, new, record

__all__: list[str] = []


def _raw_key(key: Any, x: Tensor) -> Any:
    if isinstance(key, Tensor):
        if key._device is not x._device:
            raise ValueError(f"index tensor is on {key._device} but the tensor is on {x._device}")
        return key._data
    if isinstance(key, tuple):
        return tuple(_raw_key(k, x) for k in key)
    return key


def _getitem(x: Tensor, key: Any) -> Tensor:
    dev = x._device
    rk = _raw_key(key, x)
    out = x._data[rk]
    if needs_grad(x):
        from .creation import zeros_like

        def vjp(g: Tensor, _: Any) -> Tensor:
            z = zeros_like(x)
            return _index_add(z, key, g)

        return record(out, dev, "IndexBackward", (x,), vjp)
    t = new(out, dev)
    return t


def _index_add(z: Tensor, key: Any, g: Tensor) -> Tensor:
    """``z`` with ``g`` added at ``key`` (repeated integer indices accumulate)."""
    from .creation import zeros_like

    zz = zeros_like(z)
    zz._data[_raw_key(key, z)] = g._data
    from .elementwise import add

    return add(z, zz)


def _setitem(x: Tensor, key: Any, value: Any) -> None:
    check_inplace(x, "__setitem__")
    rv = value._data if isinstance(value, Tensor) else value
    if isinstance(value, Tensor) and value._device is not x._device:
        raise ValueError(f"value is on {value._device} but the tensor is on {x._device}")
    if needs_grad(x, value):
        raise NotImplementedError("differentiable __setitem__ is not implemented yet")
    x._data[_raw_key(key, x)] = rv
    x._version_counter()[0] += 1
    _ = assign_result
