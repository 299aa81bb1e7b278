"""PyTorch's ``torch.cuda`` names for vtl's cupy backend: device strings ``"cuda"`` and
``"cuda:N"`` name the cupy backend's devices, so ``model.to("cuda")`` ports unchanged."""

from __future__ import annotations

__all__ = ["current_device", "device_count", "is_available", "synchronize"]


def _backend():
    from . import backends

    return backends.get("cupy")


def is_available() -> bool:
    """Whether the cupy backend (CuPy and a CUDA device) is usable.

    Returns:
        A bool.
    """
    return _backend().is_available


def device_count() -> int:
    """The CUDA devices the cupy backend sees (0 when it is unavailable).

    Returns:
        The number of devices.
    """
    b = _backend()
    return b.device_count() if b.is_available else 0


def current_device() -> int:
    """The index of the current CUDA device.

    Returns:
        The device index, an int.
    """
    _require()
    import cupy

    return int(cupy.cuda.runtime.getDevice())


def synchronize(device: int | None = None) -> None:
    """Wait for the work queued on CUDA device ``device`` (default: the current one).

    Args:
        device: A device index (default: the current one).
    """
    _require().synchronize(current_device() if device is None else int(device))


def _require():
    from . import backends

    return backends.require("cupy")
