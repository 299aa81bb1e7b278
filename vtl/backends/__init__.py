"""The backend registry: which runtimes vtl can run on, and the default one.

``numpy`` is always available; ``cupy`` needs CuPy and a CUDA device;
``wgpu`` needs wgpu-py and a WebGPU adapter (Vulkan, Metal or D3D12).
Importing vtl never fails because an optional runtime is missing: each backend
is probed lazily and reports why it is unavailable.

Each backend is a package of its own (``vtl/backends/numpy``, ``cupy``, ``wgpu``) with the
same file names for the same job: ``backend.py`` (the :class:`Backend` object and the one
``register`` of its kernels), ``namespace.py`` where vtl adjusts the runtime's namespace,
and ``conv.py``, ``pool.py``, ``nn.py``, ``rnn.py``, ``optim.py``, ``random.py`` for the
kernels it has (their contracts: :mod:`vtl.backends.kernels`). What several backends
share is in ``vtl/backends/_common``; no backend package imports another. A backend's
package is imported when the backend is first asked for, so ``import vtl`` imports none
of the runtimes.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from typing import Any

from ._base import Backend, Capture, Device, DynamicScalars, parse_device_string

#: name -> the Backend object, or the ``module:class`` that makes it on first use
_REGISTRY: dict[str, Backend | str] = {
    "numpy": "vtl.backends.numpy.backend:NumpyBackend",
    "cupy": "vtl.backends.cupy.backend:CupyBackend",
    "wgpu": "vtl.backends.wgpu.backend:WgpuBackend",
}
KNOWN_BACKENDS = frozenset(_REGISTRY)
#: the modules of the built-in backends' array types (their classes' ``native_module``)
_NATIVE_MODULES = {"cupy": "cupy", "wgpu": "vtl.backends.wgpu"}
_registry_lock = threading.Lock()


class _DefaultState(threading.local):
    name: str | None = None


_state = _DefaultState()
_global_default = [os.environ.get("VTL_BACKEND", "numpy").strip().lower() or "numpy"]


def get(name: str) -> Backend:
    """The :class:`Backend` called ``name``; ``ValueError`` if unknown.

    Args:
        name: The backend's name.

    Returns:
        The :class:`Backend`.

    Raises:
        ValueError: If ``name`` is not a known backend.
    """
    b = _REGISTRY.get(name)
    if b.__class__ is str:
        return _instantiate(name)
    if b is None:
        raise ValueError(
            f"unknown backend {name!r}: known backends are {', '.join(_REGISTRY)}"
        )
    return b  # type: ignore[return-value]


def _instantiate(name: str) -> Backend:
    import importlib

    with _registry_lock:
        b = _REGISTRY[name]
        if isinstance(b, str):
            module, _, cls = b.partition(":")
            b = _REGISTRY[name] = getattr(importlib.import_module(module), cls)()
    return b


def register(backend: Backend) -> None:
    """Add or replace a backend in the registry (for third-party runtimes).

    Args:
        backend: The :class:`Backend` to add.
    """
    global KNOWN_BACKENDS
    _REGISTRY[backend.name] = backend
    KNOWN_BACKENDS = frozenset(_REGISTRY)


def available() -> dict[str, str | None]:
    """Every known backend mapped to ``None`` if usable, else the reason it is not.

    Returns:
        A dict of backend names to ``None`` or a reason.
    """
    return {name: get(name).unavailable_reason for name in list(_REGISTRY)}


def available_names() -> list[str]:
    """Names of the backends that can be used on this machine.

    Returns:
        A list of names.
    """
    return [name for name in list(_REGISTRY) if get(name).is_available]


#: the extra of pyproject.toml that installs a backend's runtime
_EXTRAS = {"cupy": "cuda", "wgpu": "wgpu"}


def require(name: str) -> Backend:
    """The backend ``name`` if usable; ``ValueError``/``RuntimeError`` otherwise (naming the
    ``pip install`` that adds a runtime that is not installed).

    Args:
        name: The backend's name.

    Returns:
        The :class:`Backend`.

    Raises:
        ValueError: If ``name`` is not a known backend.
        RuntimeError: If the backend is not usable on this machine.
    """
    b = get(name)
    if not b.is_available:
        reason = b.unavailable_reason or ""
        hint = ""
        if name in _EXTRAS and "ModuleNotFoundError" in reason:
            hint = f"; install it with: pip install -e '.[{_EXTRAS[name]}]'"
        raise RuntimeError(f"backend {name!r} is not available: {reason}{hint}")
    return b


def get_backend() -> str:
    """Name of the default backend for new tensors (env ``VTL_BACKEND``, else numpy).

    Returns:
        The backend's name.
    """
    return _state.name or _global_default[0]


def set_backend(name: str) -> None:
    """Make ``name`` the default backend for new tensors (process-wide).

    Args:
        name: The backend's name.

    Raises:
        ValueError: If ``name`` is not a known backend.
        RuntimeError: If the backend is not usable on this machine.
    """
    require(name)
    _state.name = None
    _global_default[0] = name


@contextlib.contextmanager
def use_backend(name: str) -> Iterator[Backend]:
    """Temporarily make ``name`` the default backend in this thread.

    Args:
        name: The backend's name.

    Yields:
        The :class:`Backend`.

    Raises:
        ValueError: If ``name`` is not a known backend.
        RuntimeError: If the backend is not usable on this machine.
    """
    b = require(name)
    previous = _state.name
    _state.name = name
    try:
        yield b
    finally:
        _state.name = previous


def default_device() -> Device:
    """The device new tensors go to when no ``device=``/``backend=`` is given.

    Returns:
        A :class:`Device`.
    """
    return require(get_backend()).device(0)


def resolve_device(device: Any = None, backend: str | None = None) -> Device:
    """Turn the ``device=``/``backend=`` arguments of creation functions into a Device.

    Args:
        device: A :class:`Device`, a string like ``'cupy:0'``, or ``None``.
        backend: A backend name, or ``None``.

    Returns:
        The :class:`Device` (default: the default device).

    Raises:
        TypeError: If ``device`` is not a Device or a string.
        ValueError: If ``device`` does not belong to ``backend``.
        RuntimeError: If the backend is not usable on this machine.
    """
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
    """The backend whose raw array type ``obj`` is, among loaded backends (a backend not
    loaded yet is loaded when ``obj``'s type comes from its runtime's module)."""
    module = type(obj).__module__ + "."
    for name, b in list(_REGISTRY.items()):
        if b.__class__ is str:  # not made yet: made when obj comes from its runtime
            prefix = _NATIVE_MODULES.get(name)
            if prefix is None or not module.startswith(prefix + "."):
                continue
            b = get(name)
        if not isinstance(b, Backend) or b._error is not None:
            continue
        if not b._probed and not (b.native_module and module.startswith(b.native_module + ".")):
            continue
        if b.is_native(obj):
            return b
    return None


from . import cudnn  # noqa: E402 - settings that read the registry above when called

__all__ = [
    "Backend",
    "Capture",
    "Device",
    "DynamicScalars",
    "available",
    "available_names",
    "cudnn",
    "default_device",
    "get",
    "get_backend",
    "register",
    "require",
    "resolve_device",
    "set_backend",
    "use_backend",
]
