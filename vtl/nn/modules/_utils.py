"""Helpers shared by the layers: factory arguments and input checks."""

from __future__ import annotations

from typing import Any

import vtl


def empty(shape: tuple[int, ...], device: Any = None, dtype: Any = None) -> Any:
    """An uninitialised float tensor for a new parameter (float32 unless ``dtype``)."""
    return vtl.empty(shape, dtype=vtl.float32 if dtype is None else dtype, device=device)


def check_ndim(module: Any, x: Any, allowed: tuple[int, ...], what: str) -> None:
    if x.ndim not in allowed:
        raise ValueError(f"{module._describe()}: expected {what}, got input of shape "
                         f"{tuple(x.shape)}")
