"""Helpers shared by the layers: factory arguments and input checks.

Modules take vtl tensors only (``vtl.nn.functional`` also runs on raw arrays).
The checks are a class identity test and a dtype-kind test, so a layer call pays
well under a microsecond for them; the messages are built only on failure. The
hottest layers inline the fast test and call the checker only when it fails::

    if x.__class__ is not Tensor or _dkind(x._data.dtype) in "iub":
        check_float(self, x)  # raises, or passes a Tensor subclass such as Parameter
"""

from __future__ import annotations

from typing import Any

import vtl

from ..._tensor import Tensor
from ...backends._dtypes import kind as _dkind


def empty(shape: tuple[int, ...], device: Any = None, dtype: Any = None) -> Any:
    """An uninitialised float tensor for a new parameter (float32 unless ``dtype``)."""
    return vtl.empty(shape, dtype=vtl.float32 if dtype is None else dtype, device=device)


def check_ndim(module: Any, x: Any, allowed: tuple[int, ...], what: str) -> None:
    if x.ndim not in allowed:
        raise ValueError(f"{module._describe()}: expected {what}, got input of shape "
                         f"{tuple(x.shape)}")


def describe(module: Any) -> str:
    """The module's short description for error messages (its class name by default)."""
    d = getattr(module, "_describe", None)
    return d() if d is not None else type(module).__name__


def type_name(x: Any) -> str:
    """``list``, ``numpy.ndarray``, ... (the module is omitted for builtins)."""
    t = type(x)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def not_a_tensor(module: Any, x: Any, name: str = "input") -> TypeError:
    return TypeError(f"{describe(module)}: expected {name} to be a vtl.Tensor, got "
                     f"{type_name(x)}; convert it with vtl.asarray(...)")


def check_tensor(module: Any, x: Any, name: str = "input") -> None:
    """``TypeError`` unless ``x`` is a vtl Tensor."""
    if x.__class__ is not Tensor and not isinstance(x, Tensor):
        raise not_a_tensor(module, x, name)


def check_float(module: Any, x: Any, name: str = "input") -> None:
    """``TypeError`` unless ``x`` is a vtl Tensor of a floating-point (or complex) dtype,
    as PyTorch's layers refuse integer and bool inputs."""
    if x.__class__ is not Tensor and not isinstance(x, Tensor):
        raise not_a_tensor(module, x, name)
    if _dkind(x._data.dtype) in "iub":
        raise TypeError(f"{describe(module)}: expected a floating-point {name}, got "
                        f"{x._data.dtype}")
