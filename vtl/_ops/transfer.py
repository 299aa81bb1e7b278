"""Moving tensors between devices (differentiable)."""

from __future__ import annotations

from typing import Any

from .._tensor import Tensor
from ..backends import resolve_device
from ..backends._base import Device
from ._core import needs_grad, new, record, tensor_arg

__all__ = ["to_device"]


def _move_raw(raw: Any, src: Device, dst: Device) -> Any:
    if src.backend_name == dst.backend_name:
        if src.backend_name == "cupy":
            return dst.backend.from_dlpack(raw, dst.index)
        return raw
    return dst.backend.from_host(src.backend.to_host(raw), dst.index)


def to_device(x: Tensor, device: Any, /, *, stream: Any = None) -> Tensor:
    """Copy ``x`` to ``device`` (a Device or ``'cupy:0'``); the same tensor if already there.

    Data goes through DLPack within a backend and through host memory between
    backends. Gradients flow back to the source device.

    Args:
        x: The input tensor.
        device: The target device.
        stream: Not supported (must be ``None``).

    Returns:
        A tensor on ``device``.

    Raises:
        ValueError: If ``stream`` is given.
    """
    if stream is not None:
        raise ValueError("to_device(): the stream argument is not supported")
    x = tensor_arg(x, "to_device")
    dst = resolve_device(device)
    src = x._device
    if dst is src:
        return x
    dst.backend.check_dtype(x._data.dtype, dst.index)
    out = _move_raw(x._data, src, dst)
    if needs_grad(x):
        return record(out, dst, "ToDeviceBackward", (x,), lambda g, _: to_device(g, src))
    return new(out, dst)
