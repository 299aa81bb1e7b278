"""The Backend protocol and the Device type.

A backend is an array-API namespace (``xp``) plus the few things the standard
lacks: host transfer, DLPack import, ``scatter_add``, random bits,
``synchronize`` and optional fused kernels. Everything above ``vtl.backends``
talks to a runtime only through these objects.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import Any, ClassVar

import numpy as np

from . import _dtypes
from . import kernels as _kernel_contracts

#: the message of an integer index outside its axis (``name``: the operation's prefix, e.g.
#: ``"take(): "``), as the backends' :meth:`Backend.check_indices` raise it
INDEX_ERROR = "{name}index {value} is out of bounds for axis {axis} with size {size}"
#: the message of :meth:`Backend.check_indices` with ``negative=False`` (an index outside
#: ``[0, size)``, e.g. of ``embedding``)
NONNEG_INDEX_ERROR = (INDEX_ERROR + " (the valid range is [0, {size}); negative indices are "
                      "not allowed)")


def index_error(what: str, value: int, axis: int, size: int,
                negative: bool = True) -> IndexError:
    """The ``IndexError`` of the index ``value`` outside an axis of size ``size``:
    :data:`INDEX_ERROR`, or :data:`NONNEG_INDEX_ERROR` where negative indices are not
    allowed (``negative=False``)."""
    message = INDEX_ERROR if negative else NONNEG_INDEX_ERROR
    return IndexError(message.format(name=what, value=value, axis=axis, size=size))


class Device:
    """A place where tensors live: a backend name and an index (``cupy:0``).

    ``Device("wgpu", 1)`` and ``Device("wgpu:1")`` are the same device; the index
    defaults to 0 and ``"cpu"`` names the numpy backend. Other forms (an unknown
    backend, an index that is not a non-negative integer, ``"wgpu:0:1"``) raise
    ``ValueError``. Devices are interned, so ``a.device is b.device`` whenever they are equal.

    Args:
        backend: A backend name, or a string ``'backend:index'``.
        index: The device index (default 0).

    Raises:
        ValueError: If the backend is unknown or the index is not a non-negative integer.
    """

    __slots__ = ("backend_name", "index", "_backend", "xp", "array_type", "__weakref__")
    _interned: ClassVar[dict[tuple[str, int], Device]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __new__(cls, backend: str, index: int | None = None) -> Device:
        if index.__class__ is int:
            dev = cls._interned.get((backend, index))
            if dev is not None:
                return dev
        key = _device_key(backend, index)
        dev = cls._interned.get(key)
        if dev is None:
            with cls._lock:
                dev = cls._interned.get(key)
                if dev is None:
                    dev = object.__new__(cls)
                    object.__setattr__(dev, "backend_name", key[0])
                    object.__setattr__(dev, "index", key[1])
                    object.__setattr__(dev, "_backend", None)
                    object.__setattr__(dev, "xp", None)
                    object.__setattr__(dev, "array_type", None)
                    cls._interned[key] = dev
        return dev

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("vtl.Device is immutable")

    def __reduce__(self):
        return (Device, (self.backend_name, self.index))

    @property
    def backend(self) -> Backend:
        """The :class:`Backend` object serving this device."""
        b = self._backend
        if b is None:
            from . import get

            b = get(self.backend_name)
            object.__setattr__(self, "_backend", b)
            if b.is_available:
                b.device(self.index)
        return b

    def _bind(self, backend: Backend) -> Device:
        if self.xp is None:
            object.__setattr__(self, "_backend", backend)
            object.__setattr__(self, "array_type", backend.array_type)
            object.__setattr__(self, "xp", backend.xp)
        return self

    @property
    def type(self) -> str:
        """The backend name, like ``torch.device.type``."""
        return self.backend_name

    def __str__(self) -> str:
        return f"{self.backend_name}:{self.index}"

    def __repr__(self) -> str:
        return f"Device('{self.backend_name}:{self.index}')"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Device):
            return self is other
        if isinstance(other, str):
            try:
                return parse_device_string(other) is self
            except ValueError:
                return False
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.backend_name, self.index))


def _device_form() -> str:
    from . import KNOWN_BACKENDS

    return (f"expected 'backend[:index]' with backend one of {', '.join(sorted(KNOWN_BACKENDS))} "
            "(or 'cpu' for numpy, 'cuda' for cupy) and index a non-negative integer, "
            "e.g. 'wgpu:0'")


def _device_key(spec: Any, index: Any) -> tuple[str, int]:
    """``(backend name, index)`` of ``Device(spec, index)``; ``spec`` may carry the index
    (``"wgpu:1"``), ``"cpu"`` stands for ``"numpy"``."""
    from . import KNOWN_BACKENDS

    if not isinstance(spec, str):
        raise TypeError(f"a device is named by a string like 'wgpu:0', got {type(spec).__name__}")
    name, colon, idx = spec.partition(":")
    name = name.strip().lower()
    if name == "cpu":
        name = "numpy"
    elif name == "cuda":  # PyTorch's name for the NVIDIA GPUs: the cupy backend
        name = "cupy"
    if name not in KNOWN_BACKENDS:
        raise ValueError(f"unknown device {spec!r}: {_device_form()}")
    if colon:
        idx = idx.strip()
        if not (idx.isascii() and idx.isdigit()):
            raise ValueError(f"bad device index in {spec!r}: {_device_form()}")
        if index is not None:
            raise ValueError(f"Device({spec!r}, {index!r}) gives the index twice: "
                             f"pass Device({spec!r}) or Device({name!r}, {index!r})")
        return name, int(idx)
    if index is None:
        return name, 0
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
        raise TypeError(f"a device index must be an integer, got {type(index).__name__}")
    if index < 0:
        raise ValueError(f"bad device index {index} for {name!r}: {_device_form()}")
    return name, int(index)


def parse_device_string(spec: str) -> Device:
    """Turn ``"cupy"``, ``"cupy:1"`` or ``"cpu"`` into a :class:`Device`; any other form
    (``"wgpu:x"``, ``"wgpu:-1"``, ``"wgpu:0:1"``, ``"gpu"``, ``""``) is a ``ValueError``
    naming the expected form ``backend[:index]`` and the known backends."""
    return Device(*_device_key(spec, None))


class DynamicScalars:
    """Per-step scalars of a captured kernel launch (``vtl.compile``): a kernel given one
    instead of numbers reads the values from where its backend's capture puts them before
    each replay (device memory, or the launch's parameters), and the host code that owns
    them (an optimizer, a random generator) calls :meth:`set` before each replay.

    Args:
        values: The scalars of the first replay.
        dtype: Their dtype.
    """

    __slots__ = ("values", "dtype", "where")

    def __init__(self, values: Any, dtype: Any) -> None:
        self.values = tuple(values)
        self.dtype = np.dtype(dtype)
        self.where: Any = None  # the backend's: a device slot, or the dispatches to patch

    def set(self, values: Any) -> None:
        """The values for the next replay (as many as before)."""
        values = tuple(values)
        if len(values) != len(self.values):
            raise ValueError(f"DynamicScalars.set: expected {len(self.values)} values, got "
                             f"{len(values)}")
        self.values = values


class Capture:
    """The device work of one call recorded for replays (``vtl.compile``); made by
    :meth:`Backend.begin_capture`, which starts recording this thread's work on the device.
    """

    def scalars(self, values: Any, dtype: Any) -> DynamicScalars:
        """Scalars that kernels recorded in this capture read anew at each replay."""
        return DynamicScalars(values, dtype)

    def end(self) -> None:
        """Stop recording; the recorded call's work has run when this returns (backends
        that do not run work while recording run it here)."""
        raise NotImplementedError

    def replay(self) -> None:
        """Run the recorded work again, with the current values of its dynamic scalars."""
        raise NotImplementedError

    def abort(self) -> None:
        """Stop recording after an error, dropping what was recorded."""
        raise NotImplementedError

    def explain(self, exc: BaseException) -> str | None:
        """What an error raised while recording means for the user (e.g. a read of a
        device value, which no capture can hold), or ``None`` to re-raise it as it is."""
        return None

    def copy_in(self, dst: Any, src: Any) -> None:
        """Copy the raw array ``src`` into the captured input ``dst`` (same shape and dtype)
        before a replay."""
        dst[...] = src

    def copy_out(self, src: Any, xp: Any) -> Any:
        """A new raw array holding the captured output ``src`` after a replay."""
        return xp.asarray(src, copy=True)


class Backend:
    """One runtime that vtl can run on.

    Subclasses set ``name`` and implement :meth:`_load` (import the runtime and
    return its array-API namespace) plus the host-transfer hooks. ``xp`` is
    loaded lazily, so importing vtl never imports an optional runtime.
    """

    name: ClassVar[str] = ""
    #: whether :meth:`begin_capture` records work for ``vtl.compile`` (else it runs eagerly)
    can_capture: ClassVar[bool] = False
    #: whether the device runs behind the host (a host read waits for the work queued
    #: before it): code that can leave a value on the device then does
    asynchronous: ClassVar[bool] = False
    #: the module (prefix) of the runtime's array type: an array from it probes the backend
    #: when it is first handed to vtl (``vtl.asarray(cupy_array)`` before any cupy tensor)
    native_module: ClassVar[str | None] = None
    #: The runtime's array class; results of other types go through :meth:`normalize`.
    array_type: type = object

    def __init__(self) -> None:
        self._xp: Any = None
        self._error: str | None = None
        self._probed = False
        self._kernels: dict[str, Any] = {}

    # -- availability ---------------------------------------------------------
    def _load(self) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    def _ensure(self) -> None:
        if not self._probed:
            try:
                self._xp = self._load()
            except Exception as exc:  # any import/driver failure means "unavailable"
                self._error = f"{type(exc).__name__}: {exc}"
            self._probed = True

    @property
    def is_available(self) -> bool:
        """Whether the runtime imports and has at least one device."""
        self._ensure()
        return self._error is None

    @property
    def unavailable_reason(self) -> str | None:
        """Why the backend cannot be used, or ``None`` when it can."""
        self._ensure()
        return self._error

    @property
    def xp(self) -> Any:
        """The backend's array-API namespace; ``RuntimeError`` when unavailable."""
        if self._xp is None:
            self._ensure()
            if self._error is not None:
                raise RuntimeError(f"backend {self.name!r} is not available: {self._error}")
        return self._xp

    # -- devices ----------------------------------------------------------------
    def device_count(self) -> int:
        return 1

    def devices(self) -> list[Device]:
        """All devices of this backend (empty when unavailable)."""
        if not self.is_available:
            return []
        return [Device(self.name, i)._bind(self) for i in range(self.device_count())]

    def device(self, index: int = 0) -> Device:
        count = self.device_count() if self.is_available else 0
        if not 0 <= index < max(count, 1) or not self.is_available:
            if not self.is_available:
                raise RuntimeError(
                    f"backend {self.name!r} is not available: {self.unavailable_reason}"
                )
            raise ValueError(
                f"device index {index} out of range for backend {self.name!r} "
                f"({count} device(s))"
            )
        return Device(self.name, index)._bind(self)

    def native_device(self, index: int) -> Any:
        """The runtime's own device object for ``device=`` arguments of ``xp``."""
        return None

    def device_of(self, raw: Any) -> Device:
        """The vtl Device holding a raw array of this backend."""
        return Device(self.name, 0)._bind(self)

    # -- dtypes -----------------------------------------------------------------
    def dtypes(self, index: int = 0) -> dict[str, np.dtype]:
        """Dtypes supported on device ``index`` (name -> dtype)."""
        return dict(_dtypes.ALL_DTYPES)

    def default_dtypes(self, index: int = 0) -> dict[str, np.dtype]:
        return {
            "real floating": _dtypes.float32,
            "complex floating": _dtypes.complex64,
            "integral": _dtypes.int64,
            "indexing": _dtypes.int64,
        }

    def check_dtype(self, dtype: np.dtype, index: int = 0) -> None:
        """Raise ``TypeError`` when ``dtype`` is not supported on the device."""
        cache = self.__dict__.setdefault("_dtype_sets", {})
        supported = cache.get(index)
        if supported is None:
            supported = cache[index] = frozenset(self.dtypes(index).values())
        if dtype not in supported:
            raise TypeError(f"dtype {dtype.name} is not supported on {self.name}:{index}")

    # -- data movement ----------------------------------------------------------
    def to_host(self, raw: Any) -> np.ndarray:
        """Copy (or view, for CPU backends) a raw array into a NumPy array."""
        raise NotImplementedError

    def from_host(self, arr: np.ndarray, index: int = 0) -> Any:
        """Copy a NumPy array onto device ``index``."""
        raise NotImplementedError

    def read_flag(self, raw: Any) -> np.ndarray:
        """:meth:`to_host` for vtl's own reads of a small device flag (an optimizer's skip
        flag): the errors that kernels recorded on the device stay pending for the user's
        next read (``float(loss)``, ``.item()``), so such a read costs one transfer."""
        return self.to_host(raw)

    def read_flag_later(self, raw: Any) -> Callable[[], np.ndarray]:
        """A function giving :meth:`read_flag` of ``raw`` as it is now, for a value needed
        later (``raw`` is not written again meanwhile): a backend that can start the copy
        without waiting does, so that the eventual read waits only for that copy; this
        version reads when called."""
        return partial(self.read_flag, raw)

    def from_dlpack(self, obj: Any, index: int = 0, copy: bool | None = None) -> Any:
        return self.xp.from_dlpack(obj, copy=copy)

    def is_native(self, obj: Any) -> bool:
        """Whether ``obj`` is a raw array of this backend."""
        raise NotImplementedError

    def normalize(self, raw: Any) -> Any:
        """Turn a result that is not ``array_type`` (e.g. a NumPy scalar) into one."""
        return raw

    def same_storage(self, a: Any, b: Any) -> bool:
        """Whether the raw arrays ``a`` and ``b`` are views of one allocation (so a write
        into one shows in the other). This version follows NumPy's ``base``, which
        points to the array owning the memory; a backend without it overrides."""
        return (a if a.base is None else a.base) is (b if b.base is None else b.base)

    def layout(self, raw: Any) -> tuple[tuple[int, ...], int, int]:
        """Where the raw array's elements lie: ``(strides, offset, address)``, the strides
        and the offset from the start of its allocation in elements, and the address of
        its first element (PyTorch's ``stride()``, ``storage_offset()``, ``data_ptr()``).
        This version reads NumPy's ``strides``, ``base`` and ``__array_interface__``; a
        backend without them overrides."""
        isz = raw.dtype.itemsize
        root = raw
        while isinstance(root.base, type(raw)):
            root = root.base
        ptr = raw.__array_interface__["data"][0]
        start = root.__array_interface__["data"][0]
        return tuple(st // isz for st in raw.strides), (ptr - start) // isz, ptr

    # -- extras the standard lacks ----------------------------------------------
    def synchronize(self, index: int = 0) -> None:
        """Wait until all queued work on the device is finished."""

    def check_indices(self, idx: Any, n: int, axis: int, what: str = "", *,
                      negative: bool = True) -> Any:
        """The integer array ``idx`` as indices of an axis of size ``n``: wrapped from
        ``[-n, n)`` to ``[0, n)``, in a dtype the namespace's ``take`` accepts.

        An index outside ``[-n, n)`` is an ``IndexError`` naming it, ``axis`` and ``n``
        (``what`` prefixes the message, e.g. ``"take(): "``). With ``negative=False`` the
        valid range is ``[0, n)`` and a negative index is an ``IndexError`` too (PyTorch's
        ``embedding``); the message then names that range (:func:`index_error`). This
        version reads the extremes, so it raises at once; GPU backends check on the device
        instead and raise at the thread's next read of a result (``to_host``) or
        ``synchronize``.
        """
        xp = self.xp
        size = 1
        for s in idx.shape:
            size *= s
        idt = self.default_dtypes()["indexing"]
        if idx.dtype != idt:
            idx = xp.astype(idx, idt)
        if not size:
            return idx
        mn, mx = int(xp.min(idx)), int(xp.max(idx))
        lo = -n if negative else 0
        if mn < lo or mx >= n:
            raise index_error(what, mn if mn < lo else mx, axis, n, negative)
        return xp.where(idx < 0, idx + n, idx) if mn < 0 else idx

    def write_index(self, data: Any, key: tuple, value: Any) -> None:
        """``data[key] = value`` for a key holding index arrays from :meth:`check_indices`
        (a backend that checks on the device makes a failed check write nothing)."""
        data[key] = value

    def scatter_add(self, target: Any, indices: Any, values: Any) -> Any:
        """Return ``target`` with ``values`` added at rows ``indices`` of axis 0.

        Repeated indices accumulate (unlike ``target[indices] += values``).
        ``indices`` is a 1-D integer array; ``values`` has shape
        ``indices.shape + target.shape[1:]``.  May update ``target`` in place.
        """
        raise NotImplementedError

    def sum_axes(self, a: Any, axes: Any, keepdims: bool = False) -> Any:
        """``sum(a, axis=axes, keepdims=keepdims)`` of a floating array in its own dtype: the
        reductions of gradients and of ``mean``, where the namespace's checks are not needed."""
        return self.xp.sum(a, axis=axes, keepdims=keepdims)

    def ones_like(self, a: Any) -> Any:
        """A new array of ones of ``a``'s shape and dtype (the seed of ``backward()``)."""
        return self.xp.ones_like(a)

    def known_all_false(self, mask: Any) -> bool:
        """Whether the boolean array ``mask`` is known to have no true element, where
        that costs no device sync (host memory); ``False`` means "not known"."""
        return False

    def spread(self, value: Any, like: Any, view: bool) -> Any:
        """``value`` broadcast to the shape of ``like`` (an array, or anything with its
        ``shape``, ``size`` and ``dtype``), in ``value``'s dtype and on its device: the
        gradient of a reduction. With ``view`` a backend may return a read-only broadcast
        view (no copy) where it has one and it is cheaper; otherwise, and always without
        ``view``, a new array (one that may become a leaf's ``.grad``, updated in place)."""
        r = self.xp.empty(like.shape, dtype=value.dtype, device=value.device)
        r[...] = value
        return r

    def kernel(self, name: str) -> Any | None:
        """The optional kernel ``name`` (one of ``vtl.backends.kernels.KERNELS``, whose
        contract it follows), or ``None`` when this backend has none: the caller runs the
        portable path. An unknown name is a ``ValueError``."""
        kern = self._kernels.get(name)
        if kern is None:
            if not self._probed:  # the kernels are registered when the runtime loads
                self._ensure()
                return self.kernel(name)
            if name not in _kernel_contracts.KERNELS:
                _kernel_contracts.check(name, None)
        return kern

    def register_kernel(self, name: str, impl: Any) -> None:
        """Provide the optional kernel ``name``; ``impl`` must follow its contract in
        ``vtl.backends.kernels`` (checked here: ``ValueError`` for an unknown name,
        ``TypeError`` for a missing method)."""
        _kernel_contracts.check(name, impl)
        self._kernels[name] = impl

    @property
    def kernel_names(self) -> list[str]:
        """The names of the optional kernels this backend provides (after loading)."""
        self._ensure()
        return sorted(self._kernels)

    def memory_info(self, index: int = 0) -> dict[str, int]:
        return {}

    def begin_capture(self, index: int = 0) -> Capture:
        """Start recording this thread's work on device ``index`` for replays
        (``vtl.compile``); only where :attr:`can_capture`."""
        raise NotImplementedError(f"backend {self.name!r} does not capture work")

    def info(self) -> dict[str, Any]:
        """Versions and device details for ``vtl info``."""
        return {}

    def __repr__(self) -> str:
        state = "available" if self.is_available else f"unavailable: {self.unavailable_reason}"
        return f"<vtl backend {self.name!r} ({state})>"
