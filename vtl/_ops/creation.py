"""Creation functions of the array API standard.

Every function takes ``dtype=``, ``device=`` (a Device or ``'cupy:0'``),
``backend=`` (a backend name) and ``requires_grad=``. Defaults follow
deep-learning practice: Python floats become float32, Python ints int64.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._tensor import Tensor
from ..backends import _dtypes, backend_of_native, resolve_device
from ..backends._base import Device
from ..backends._dtypes import to_dtype
from ._core import needs_grad, new, record, tensor_arg

__all__ = [
    "arange", "asarray", "empty", "empty_like", "eye", "from_dlpack", "full", "full_like",
    "linspace", "meshgrid", "ones", "ones_like", "tril", "triu", "zeros", "zeros_like",
]

_DEFAULT_FOR_HOST = {
    np.dtype("float64"): _dtypes.float32,
    np.dtype("complex128"): _dtypes.complex64,
}


def _finish(t: Tensor, requires_grad: bool) -> Tensor:
    if requires_grad:
        t.requires_grad_(True)
    return t


def _place(dtype: Any, device: Any, backend: str | None) -> tuple[Any, Device]:
    dev = resolve_device(device, backend)
    dt = None if dtype is None else to_dtype(dtype)
    if dt is not None:
        dev.backend.check_dtype(dt, dev.index)
    return dt, dev


def _native(dev: Device) -> Any:
    return dev.backend.native_device(dev.index)


def _scalar_dtype(value: Any) -> np.dtype:
    if isinstance(value, bool):
        return _dtypes.bool
    if isinstance(value, int):
        return _dtypes.int64
    if isinstance(value, float):
        return _dtypes.float32
    if isinstance(value, complex):
        return _dtypes.complex64
    raise TypeError(f"expected a Python bool, int, float or complex, got {type(value).__name__}")


def asarray(
    obj: Any, /, *, dtype: Any = None, device: Any = None, copy: bool | None = None,
    backend: str | None = None, requires_grad: bool = False,
) -> Tensor:
    """Convert ``obj`` (a Tensor, a backend array, a NumPy array, a buffer, a Python
    scalar or nested sequence) to a Tensor.

    Python floats become float32 and Python ints int64 unless ``dtype`` is given;
    arrays keep their dtype. ``copy=False`` raises ``ValueError`` if a copy is
    needed; ``copy=None`` copies only when necessary.
    """
    if isinstance(obj, Tensor):
        return _asarray_tensor(obj, dtype, device, copy, backend, requires_grad)
    if device is None and backend is None:
        src = backend_of_native(obj)
        dev = resolve_device(src.device_of(obj) if src is not None else None)
    else:
        dev = resolve_device(device, backend)
    dt = None if dtype is None else to_dtype(dtype)
    b = dev.backend
    if b.is_native(obj):
        if dt is not None:
            b.check_dtype(dt, dev.index)
        else:
            to_dtype(obj.dtype)
        raw = dev.xp.asarray(obj, dtype=dt, copy=copy)
        return _finish(new(raw, dev), requires_grad)
    other = backend_of_native(obj)
    if other is not None:
        if copy is False:
            raise ValueError(
                f"asarray(copy=False) cannot move a {other.name} array to {dev} without a copy"
            )
        host = other.to_host(obj)
        copy = None
    elif isinstance(obj, (bool, int, float, complex)) or _is_nested_sequence(obj):
        host = np.asarray(obj)
        if dt is None:
            dt = _DEFAULT_FOR_HOST.get(host.dtype, host.dtype)
            if host.dtype.kind == "O":
                raise TypeError(f"asarray() cannot convert {type(obj).__name__} of mixed types")
    else:
        try:
            host = np.asarray(obj)
        except Exception as exc:
            raise TypeError(f"asarray() cannot convert {type(obj).__name__}: {exc}") from None
        if host.dtype.kind == "O":
            raise TypeError(f"asarray() cannot convert an object of type {type(obj).__name__}")
    if dt is None:
        dt = to_dtype(host.dtype)
    b.check_dtype(dt, dev.index)
    if host.dtype != dt:
        host = host.astype(dt)
        copy = None
    if dev.backend_name == "numpy":
        raw = np.array(host, copy=copy if copy is not None else None)
    else:
        if copy is False:
            raise ValueError(f"asarray(copy=False) cannot place host data on {dev} without a copy")
        raw = b.from_host(host, dev.index)
    return _finish(new(raw, dev), requires_grad)


def _is_nested_sequence(obj: Any) -> bool:
    return isinstance(obj, (list, tuple))


def _asarray_tensor(
    x: Tensor, dtype: Any, device: Any, copy: bool | None, backend: str | None,
    requires_grad: bool,
) -> Tensor:
    from .dtype_functions import astype
    from .transfer import to_device

    out = x
    if device is not None or backend is not None:
        dev = resolve_device(device, backend)
        if dev is not x._device:
            if copy is False:
                raise ValueError(
                    f"asarray(copy=False) cannot move a tensor from {x.device} to {dev}"
                )
            out = to_device(out, dev)
    if dtype is not None and to_dtype(dtype) != out.dtype:
        if copy is False:
            raise ValueError(f"asarray(copy=False) cannot cast {out.dtype} to {to_dtype(dtype)}")
        out = astype(out, dtype)
    if copy and out is x:
        dev = x._device
        raw = dev.xp.asarray(x._data, copy=True)
        out = (record(raw, dev, "CloneBackward", (x,), lambda g, _: g)
               if needs_grad(x) else new(raw, dev))
    if requires_grad and not out._requires_grad:
        out.requires_grad_(True)
    return out


def _create(fn_name: str, shape: Any, dtype: Any, device: Any, backend: str | None,
            default: np.dtype = _dtypes.float32, **kw: Any) -> Tensor:
    dt, dev = _place(dtype, device, backend)
    shape = _shape_arg(shape, fn_name)
    raw = getattr(dev.xp, fn_name)(shape, dtype=dt or default, device=_native(dev), **kw)
    return new(raw, dev)


def _shape_arg(shape: Any, fname: str) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    try:
        shape = tuple(int(s) for s in shape)
    except TypeError:
        raise TypeError(
            f"{fname}(): shape must be an int or a tuple of ints, got {shape!r}"
        ) from None
    if any(s < 0 for s in shape):
        raise ValueError(f"{fname}(): negative dimension in shape {shape}")
    return shape


def zeros(shape: int | tuple[int, ...], *, dtype: Any = None, device: Any = None,
          backend: str | None = None, requires_grad: bool = False) -> Tensor:
    """A tensor of zeros (float32 unless ``dtype`` says otherwise)."""
    return _finish(_create("zeros", shape, dtype, device, backend), requires_grad)


def ones(shape: int | tuple[int, ...], *, dtype: Any = None, device: Any = None,
         backend: str | None = None, requires_grad: bool = False) -> Tensor:
    """A tensor of ones (float32 unless ``dtype`` says otherwise)."""
    return _finish(_create("ones", shape, dtype, device, backend), requires_grad)


def empty(shape: int | tuple[int, ...], *, dtype: Any = None, device: Any = None,
          backend: str | None = None, requires_grad: bool = False) -> Tensor:
    """An uninitialised tensor (float32 unless ``dtype`` says otherwise)."""
    return _finish(_create("empty", shape, dtype, device, backend), requires_grad)


def full(shape: int | tuple[int, ...], fill_value: bool | int | float | complex, *,
         dtype: Any = None, device: Any = None, backend: str | None = None,
         requires_grad: bool = False) -> Tensor:
    """A tensor filled with ``fill_value``; the dtype follows the scalar's kind."""
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    dt, dev = _place(dtype, device, backend)
    shape = _shape_arg(shape, "full")
    dt = dt or _scalar_dtype(fill_value)
    raw = dev.xp.full(shape, fill_value, dtype=dt, device=_native(dev))
    return _finish(new(raw, dev), requires_grad)


def _like(x: Tensor, dtype: Any, device: Any) -> tuple[Any, Any]:
    x = tensor_arg(x, "*_like")
    return (x.dtype if dtype is None else dtype), (x._device if device is None else device)


def zeros_like(x: Tensor, /, *, dtype: Any = None, device: Any = None,
               requires_grad: bool = False) -> Tensor:
    """Zeros with the shape (and by default dtype and device) of ``x``."""
    dt, dev = _like(x, dtype, device)
    return zeros(x.shape, dtype=dt, device=dev, requires_grad=requires_grad)


def ones_like(x: Tensor, /, *, dtype: Any = None, device: Any = None,
              requires_grad: bool = False) -> Tensor:
    """Ones with the shape (and by default dtype and device) of ``x``."""
    dt, dev = _like(x, dtype, device)
    return ones(x.shape, dtype=dt, device=dev, requires_grad=requires_grad)


def empty_like(x: Tensor, /, *, dtype: Any = None, device: Any = None,
               requires_grad: bool = False) -> Tensor:
    """Uninitialised with the shape (and by default dtype and device) of ``x``."""
    dt, dev = _like(x, dtype, device)
    return empty(x.shape, dtype=dt, device=dev, requires_grad=requires_grad)


def full_like(x: Tensor, /, fill_value: bool | int | float | complex, *, dtype: Any = None,
              device: Any = None, requires_grad: bool = False) -> Tensor:
    """``fill_value`` with the shape (and by default dtype and device) of ``x``."""
    dt, dev = _like(x, dtype, device)
    return full(x.shape, fill_value, dtype=dt, device=dev, requires_grad=requires_grad)


def arange(start: int | float, /, stop: int | float | None = None, step: int | float = 1, *,
           dtype: Any = None, device: Any = None, backend: str | None = None,
           requires_grad: bool = False) -> Tensor:
    """Evenly spaced values in ``[start, stop)``; int64 for integer arguments else float32."""
    dt, dev = _place(dtype, device, backend)
    if step == 0:
        raise ValueError("arange(): step must not be zero")
    if dt is None:
        ints = all(isinstance(v, int) for v in (start, stop, step) if v is not None)
        dt = _dtypes.int64 if ints else _dtypes.float32
    if stop is None:
        start, stop = 0, start
    raw = dev.xp.arange(start, stop, step, dtype=dt, device=_native(dev))
    return _finish(new(raw, dev), requires_grad)


def linspace(start: int | float | complex, stop: int | float | complex, /, num: int, *,
             dtype: Any = None, device: Any = None, endpoint: bool = True,
             backend: str | None = None, requires_grad: bool = False) -> Tensor:
    """``num`` evenly spaced values from ``start`` to ``stop`` (float32 by default)."""
    dt, dev = _place(dtype, device, backend)
    if num < 0:
        raise ValueError(f"linspace(): num must be non-negative, got {num}")
    if dt is None:
        dt = _dtypes.complex64 if isinstance(start, complex) or isinstance(stop, complex) \
            else _dtypes.float32
    raw = dev.xp.linspace(start, stop, num, dtype=dt, device=_native(dev), endpoint=endpoint)
    return _finish(new(raw, dev), requires_grad)


def eye(n_rows: int, n_cols: int | None = None, /, *, k: int = 0, dtype: Any = None,
        device: Any = None, backend: str | None = None, requires_grad: bool = False) -> Tensor:
    """A 2-D tensor with ones on the ``k``-th diagonal."""
    dt, dev = _place(dtype, device, backend)
    raw = dev.xp.eye(n_rows, n_cols, k=k, dtype=dt or _dtypes.float32, device=_native(dev))
    return _finish(new(raw, dev), requires_grad)


def from_dlpack(x: Any, /, *, device: Any = None, copy: bool | None = None) -> Tensor:
    """Import any DLPack producer (a CuPy/NumPy/PyTorch array, a Tensor...)."""
    if isinstance(x, Tensor):
        return asarray(x, device=device, copy=copy)
    if device is not None:
        dev = resolve_device(device)
    else:
        dev_type, index = x.__dlpack_device__()
        dev_type = int(dev_type)
        if dev_type == 1:  # kDLCPU
            dev = resolve_device("numpy")
        elif dev_type in (2, 3):  # kDLCUDA, kDLCUDAHost
            dev = resolve_device(f"cupy:{int(index) if dev_type == 2 else 0}")
        else:
            raise BufferError(f"from_dlpack(): no vtl backend for DLPack device type {dev_type}")
    raw = dev.backend.from_dlpack(x, dev.index, copy=copy)
    return new(raw, dev)


def meshgrid(*arrays: Tensor, indexing: str = "xy") -> list[Tensor]:
    """Coordinate grids from 1-D tensors (``indexing='xy'`` or ``'ij'``); differentiable."""
    from .manipulation import broadcast_to, reshape

    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid(): indexing must be 'xy' or 'ij', got {indexing!r}")
    if not arrays:
        return []
    arrays = tuple(tensor_arg(a, "meshgrid", "arrays") for a in arrays)
    for a in arrays:
        if a.ndim != 1:
            raise ValueError(f"meshgrid(): every input must be 1-D, got shape {a.shape}")
    dtypes = {a.dtype for a in arrays}
    if len(dtypes) > 1:
        raise TypeError(f"meshgrid(): inputs must share a dtype, got {sorted(map(str, dtypes))}")
    n = len(arrays)
    shape = [a.shape[0] for a in arrays]
    if indexing == "xy" and n >= 2:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, a in enumerate(arrays):
        pos = i
        if indexing == "xy" and n >= 2 and i < 2:
            pos = 1 - i
        view = [1] * n
        view[pos] = a.shape[0]
        out.append(broadcast_to(reshape(a, tuple(view)), tuple(shape)))
    return out


def _tri(name: str, x: Tensor, k: int) -> Tensor:
    x = tensor_arg(x, name)
    if x.ndim < 2:
        raise ValueError(f"{name}() needs a tensor with at least 2 dimensions, got {x.ndim}")
    dev = x._device
    out = getattr(dev.xp, name)(x._data, k=k)
    if needs_grad(x):
        fn = tril if name == "tril" else triu
        return record(out, dev, name.capitalize() + "Backward", (x,), lambda g, _: fn(g, k=k))
    return new(out, dev)


def tril(x: Tensor, /, *, k: int = 0) -> Tensor:
    """Lower triangle of the last two axes (zero above diagonal ``k``)."""
    return _tri("tril", x, k)


def triu(x: Tensor, /, *, k: int = 0) -> Tensor:
    """Upper triangle of the last two axes (zero below diagonal ``k``)."""
    return _tri("triu", x, k)


