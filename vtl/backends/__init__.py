"""The backend registry: which runtimes vtl can run on, and the default one.

``numpy`` is always available; ``cupy`` needs CuPy and a CUDA device;
``wgpu`` needs wgpu-py and a WebGPU adapter (Vulkan, Metal or D3D12).
Importing vtl never fails because an optional runtime is missing: each backend
is probed lazily and reports why it is unavailable.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from typing import Any

from ._base import Backend, Device, parse_device_string
from ._cupy import CupyBackend
from ._numpy import NumpyBackend


class WgpuBackend(Backend):
    """Slot for the WebGPU backend (``vtl.backends.wgpu``)."""

    name = "wgpu"

    def _load(self) -> Any:
        from . import wgpu as xp  # the package provides the whole backend

        return xp._load_backend(self)

    def native_device(self, index: int) -> Any:
        return self.xp.__array_namespace_info__().default_device()

    def is_native(self, obj: Any) -> bool:
        return self.is_available and isinstance(obj, self.array_type)

    def normalize(self, raw: Any) -> Any:
        return self.xp.asarray(raw)

    def to_host(self, raw: Any) -> Any:
        return self.xp.to_numpy(raw)

    def from_host(self, arr: Any, index: int = 0) -> Any:
        return self.xp.from_host(arr)

    def from_dlpack(self, obj: Any, index: int = 0, copy: bool | None = None) -> Any:
        return self.xp.from_dlpack(obj, copy=copy)

    def dtypes(self, index: int = 0) -> dict[str, Any]:
        return self.xp.__array_namespace_info__().dtypes()

    def default_dtypes(self, index: int = 0) -> dict[str, Any]:
        return self.xp.__array_namespace_info__().default_dtypes()

    def check_dtype(self, dtype: Any, index: int = 0) -> None:
        self.xp.check_dtype(dtype)

    def synchronize(self, index: int = 0) -> None:
        self.xp.synchronize()

    def scatter_add(self, target: Any, indices: Any, values: Any) -> Any:
        return self.xp.scatter_add(target, indices, values)

    def check_indices(self, idx: Any, n: int, axis: int, what: str = "") -> Any:
        from .wgpu._indexing import check_indices

        return check_indices(idx, n, axis, what)

    def memory_info(self, index: int = 0) -> dict[str, int]:
        return self.xp.memory_info()

    def info(self) -> dict[str, Any]:
        return self.xp.runtime_info()


_REGISTRY: dict[str, Backend] = {
    "numpy": NumpyBackend(),
    "cupy": CupyBackend(),
    "wgpu": WgpuBackend(),
}
KNOWN_BACKENDS = frozenset(_REGISTRY)


class _DefaultState(threading.local):
    name: str | None = None


_state = _DefaultState()
_global_default = [os.environ.get("VTL_BACKEND", "numpy").strip().lower() or "numpy"]


def get(name: str) -> Backend:
    """The :class:`Backend` called ``name``; ``ValueError`` if unknown."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(
            f"unknown backend {name!r}: known backends are {', '.join(_REGISTRY)}"
        ) from None


def register(backend: Backend) -> None:
    """Add or replace a backend in the registry (for third-party runtimes)."""
    global KNOWN_BACKENDS
    _REGISTRY[backend.name] = backend
    KNOWN_BACKENDS = frozenset(_REGISTRY)


def available() -> dict[str, str | None]:
    """Every known backend mapped to ``None`` if usable, else the reason it is not."""
    return {name: b.unavailable_reason for name, b in _REGISTRY.items()}


def available_names() -> list[str]:
    """Names of the backends that can be used on this machine."""
    return [name for name, b in _REGISTRY.items() if b.is_available]


#: the extra of pyproject.toml that installs a backend's runtime
_EXTRAS = {"cupy": "cuda", "wgpu": "wgpu"}


def require(name: str) -> Backend:
    """The backend ``name`` if usable; ``ValueError``/``RuntimeError`` otherwise (naming the
    ``pip install`` that adds a runtime that is not installed)."""
    b = get(name)
    if not b.is_available:
        reason = b.unavailable_reason or ""
        hint = ""
        if name in _EXTRAS and "ModuleNotFoundError" in reason:
            hint = f"; install it with: pip install -e '.[{_EXTRAS[name]}]'"
        raise RuntimeError(f"backend {name!r} is not available: {reason}{hint}")
    return b


def get_backend() -> str:
    """Name of the default backend for new tensors (env ``VTL_BACKEND``, else numpy)."""
    return _state.name or _global_default[0]


def set_backend(name: str) -> None:
    """Make ``name`` the default backend for new tensors (process-wide)."""
    require(name)
    _state.name = None
    _global_default[0] = name


@contextlib.contextmanager
def use_backend(name: str) -> Iterator[Backend]:
    """Temporarily make ``name`` the default backend in this thread."""
    b = require(name)
    previous = _state.name
    _state.name = name
    try:
        yield b
    finally:
        _state.name = previous


def default_device() -> Device:
    """The device new tensors go to when no ``device=``/``backend=`` is given."""
    return require(get_backend()).device(0)


def resolve_device(device: Any = None, backend: str | None = None) -> Device:
    """Turn the ``device=``/``backend=`` arguments of creation functions into a Device."""
    if backend is None and device.__class__ is Device and device.xp is not None:
        return device
    if device is None:
        if backend is None:
            return default_device()
        return require(str(backend)).device(0)
    if isinstance(device, Device):
        dev = device
    elif isinstance(device, str):
        dev = parse_device_string(device)
    else:
        raise TypeError(
            f"device must be a vtl.Device or a string like 'cupy:0', got {type(device).__name__}"
        )
    if backend is not None and dev.backend_name != backend:
        raise ValueError(f"device {dev} does not belong to backend {backend!r}")
    if dev.xp is None:
        dev = require(dev.backend_name).device(dev.index)
    return dev


def backend_of_native(obj: Any) -> Backend | None:
    """The backend whose raw array type ``obj`` is, among loaded backends."""
    for b in _REGISTRY.values():
        if b._probed and b._error is None and b.is_native(obj):
            return b
    return None


__all__ = [
    "Backend",
    "Device",
    "available",
    "available_names",
    "default_device",
    "get",
    "get_backend",
    "register",
    "require",
    "resolve_device",
    "set_backend",
    "use_backend",
]
