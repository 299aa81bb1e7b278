"""``vtl.__array_namespace_info__()``: devices, dtypes and capabilities."""

from __future__ import annotations

from typing import Any

from . import backends
from .backends import _dtypes
from .backends._base import Device


class Info:
    """The inspection object of the array API standard for ``vtl``."""

    def capabilities(self) -> dict[str, Any]:
        return {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": 64}

    def default_device(self) -> Device:
        return backends.default_device()

    def devices(self) -> list[Device]:
        """Every device of every available backend."""
        out: list[Device] = []
        for name in backends.available_names():
            out.extend(backends.get(name).devices())
        return out

    def _device(self, device: Any) -> Device:
        return backends.resolve_device(device)

    def default_dtypes(self, *, device: Any = None) -> dict[str, Any]:
        dev = self._device(device)
        return dev.backend.default_dtypes(dev.index)

    def dtypes(self, *, device: Any = None, kind: Any = None) -> dict[str, Any]:
        """Supported dtypes on ``device`` (default device if ``None``), filtered by ``kind``."""
        dev = self._device(device)
        supported = dev.backend.dtypes(dev.index)
        if kind is None:
            return dict(supported)
        kinds = kind if isinstance(kind, tuple) else (kind,)
        allowed: set = set()
        for k in kinds:
            if isinstance(k, str):
                if k not in _dtypes.KINDS:
                    raise ValueError(
                        f"unknown dtype kind {k!r}: expected one of {', '.join(_dtypes.KINDS)}"
                    )
                allowed |= _dtypes.KINDS[k]
            else:
                allowed.add(_dtypes.to_dtype(k))
        return {n: d for n, d in supported.items() if d in allowed}


_INFO = Info()


def __array_namespace_info__() -> Info:
    """The array API inspection namespace (``capabilities``, ``devices``, ``dtypes``...).

    Returns:
        The inspection namespace.
    """
    return _INFO
