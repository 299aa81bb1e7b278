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
from ..backends._dtypes import kind as _dkind
from ..backends._dtypes import to_dtype
from ._aliases import torch_names
from ._core import needs_grad, new, record, same_device, tensor_arg

__all__ = [
    "arange", "asarray", "empty", "empty_like", "eye", "from_dlpack", "full", "full_like",
    "linspace", "meshgrid", "ones", "ones_like", "tril", "triu", "zeros", "zeros_like",
]

_DEFAULT_FOR_HOST = {
    np.dtype("float64"): _dtypes.float32,
    np.dtype("complex128"): _dtypes.complex64,
}


def _finish(t: Tensor, requires_grad: bool, fname: str) -> Tensor:
    if requires_grad:
        _check_grad_dtype(t._data.dtype, fname)
        t.requires_grad_(True)
    return t


def _check_grad_dtype(dt: np.dtype, fname: str) -> None:
    if _dkind(dt) not in "fc":
        raise TypeError(
            f"{fname}(requires_grad=True) needs a floating-point or complex dtype, got {dt}"
        )


def _place(dtype: Any, device: Any, backend: str | None) -> tuple[Any, Device]:
    dev = resolve_device(device, backend)
    dt = None if dtype is None else to_dtype(dtype)
    if dt is not None:
        dev.backend.check_dtype(dt, dev.index)
    return dt, dev


def _native(dev: Device) -> Any:
    return dev.backend.native_device(dev.index)


def _scalar_dtype(value: Any, fname: str) -> np.dtype:
    if isinstance(value, bool):
        return _dtypes.bool
    if isinstance(value, int):
        return _dtypes.int64
    if isinstance(value, float):
        return _dtypes.float32
    if isinstance(value, complex):
        return _dtypes.complex64
    raise TypeError(
        f"{fname}(): fill_value must be a Python bool, int, float or complex, got "
        f"{type(value).__name__}"
    )


def _copy_error(what: str) -> ValueError:
    return ValueError(f"asarray(copy=False): {what} needs a copy; use copy=None or copy=True")


def asarray(
    obj: Any, /, *, dtype: Any = None, device: Any = None, copy: bool | None = None,
    backend: str | None = None, requires_grad: bool = False,
) -> Tensor:
    """Convert ``obj`` (a Tensor, a backend array, a NumPy array, a buffer, a Python
    scalar or nested sequence) to a Tensor.

    Python floats become float32, Python ints int64 and complex numbers
    complex64 unless ``dtype`` is given; arrays and buffers keep their dtype.
    NumPy arrays and buffers are host data: they go to the default device
    (sharing memory on the numpy backend when no copy is needed); arrays of
    another runtime (e.g. CuPy) stay on their device unless ``device`` says
    otherwise. ``copy=True`` always copies, ``copy=False`` raises ``ValueError``
    when a copy would be needed, ``copy=None`` copies only when necessary.

    Args:
        obj: The data: a Tensor, an array, a buffer, a scalar or a nested sequence.
        dtype: dtype of the result (default: see above).
        device: Device of the result (a Device or a string like ``'cupy:0'``; default: the default
            device).
        copy: ``True`` always copies, ``False`` never (raising where a copy is needed), ``None``
            copies only when needed.
        backend: Put the result on this backend's first device instead.
        requires_grad: Whether the result requires a gradient.

    Returns:
        A Tensor.

    Raises:
        ValueError: If ``copy=False`` but a copy is needed.
        TypeError: If ``obj`` cannot be converted.

    Example:
        >>> x = vtl.asarray([[1.0, 2.0], [3.0, 4.0]])
        >>> x.dtype, x.shape
        (dtype('float32'), (2, 2))
        >>> vtl.asarray([1, 2]).dtype
        dtype('int64')
    """
    if isinstance(obj, Tensor):
        return _asarray_tensor(obj, dtype, device, copy, backend, requires_grad)
    dt = None if dtype is None else to_dtype(dtype)
    if requires_grad and dt is not None:
        _check_grad_dtype(dt, "asarray")
    if isinstance(obj, (np.ndarray, np.generic)):
        src = None
    else:
        src = backend_of_native(obj)
    if device is None and backend is None and src is not None:
        dev = resolve_device(src.device_of(obj))
    else:
        dev = resolve_device(device, backend)
    b = dev.backend
    if src is not None and src is b:  # a raw array of the target runtime
        if dt is not None:
            b.check_dtype(dt, dev.index)
        else:
            b.check_dtype(to_dtype(obj.dtype), dev.index)
        try:
            raw = dev.xp.asarray(obj, dtype=dt, copy=copy)
        except ValueError:
            if copy is False:
                raise _copy_error(f"converting {obj.dtype} to {dt}") from None
            raise
        return _finish(new(raw, dev), requires_grad, "asarray")
    host, copied = _to_host(obj, src, dt, copy)
    if dt is None:
        dt = to_dtype(host.dtype)
    if requires_grad:
        _check_grad_dtype(dt, "asarray")
    b.check_dtype(dt, dev.index)
    if host.dtype != dt:
        if copy is False:
            raise _copy_error(f"converting {host.dtype} data to {dt}")
        host = host.astype(dt)
        copied = True
    if dev.backend_name == "numpy":
        raw = host.copy() if copy and not copied else host
        if raw.ndim == 0 and not isinstance(raw, np.ndarray):
            raw = np.asarray(raw)
    else:
        if copy is False:
            raise _copy_error(f"placing host data on {dev}")
        raw = b.from_host(np.asarray(host, order="C"), dev.index)  # keeps 0-D shapes
    return _finish(new(raw, dev), requires_grad, "asarray")


def _tensors_to_host(obj: Any) -> Any:
    """A nested list/tuple with every Tensor in it replaced by its host copy."""
    if isinstance(obj, Tensor):
        return obj.numpy()
    if isinstance(obj, (list, tuple)):
        return [_tensors_to_host(o) for o in obj]
    return obj


def _to_host(obj: Any, src: Any, dt: Any, copy: bool | None) -> tuple[np.ndarray, bool]:
    """``obj`` as a NumPy array and whether that already made a copy."""
    if src is not None:  # an array of another runtime
        if copy is False:
            raise _copy_error(f"moving a {src.name} array to another device")
        return src.to_host(obj), True
    if isinstance(obj, (np.ndarray, np.generic)):
        if isinstance(obj, np.generic):
            if copy is False:
                raise _copy_error("a NumPy scalar")
            return np.asarray(obj), True
        return obj, False
    if isinstance(obj, (bool, int, float, complex, list, tuple)):
        if copy is False:
            raise _copy_error(f"a Python {type(obj).__name__}")
        try:
            host = np.asarray(obj) if dt is None else np.asarray(obj, dtype=dt)
        except (ValueError, TypeError, OverflowError) as exc:
            try:  # a sequence holding tensors of a non-host backend: copy them explicitly
                nested = _tensors_to_host(obj)
                host = np.asarray(nested) if dt is None else np.asarray(nested, dtype=dt)
            except (ValueError, TypeError, OverflowError):
                raise TypeError(
                    f"asarray() cannot convert this {type(obj).__name__}: {exc}") from None
        if _dkind(host.dtype) == "O":
            raise TypeError(
                f"asarray() cannot convert this {type(obj).__name__}: its elements are not "
                "all numbers of a common shape (or an int is out of range)"
            )
        if dt is None:
            host = host.astype(_DEFAULT_FOR_HOST.get(host.dtype, host.dtype), copy=False)
        return host, True
    if isinstance(obj, str):
        raise TypeError("asarray() cannot convert a str; strings are not a vtl dtype")
    try:
        view = memoryview(obj)
    except TypeError:
        view = None
    if view is not None:
        try:
            return np.asarray(view), False
        except (ValueError, TypeError) as exc:
            raise TypeError(f"asarray() cannot read the buffer of {type(obj).__name__}: "
                            f"{exc}") from None
    if copy is False:
        raise _copy_error(f"converting a {type(obj).__name__}")
    try:
        host = np.asarray(obj)
    except Exception as exc:
        raise TypeError(f"asarray() cannot convert {type(obj).__name__}: {exc}") from None
    if _dkind(host.dtype) == "O":
        raise TypeError(f"asarray() cannot convert an object of type {type(obj).__name__}")
    return host, True


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
        _check_grad_dtype(out._data.dtype, "asarray")
        if out is x:  # a new leaf sharing the data; the input keeps its flag
            out = x.detach()
        out.requires_grad_(True)
    return out


def _create(fn_name: str, shape: Any, dtype: Any, device: Any, backend: str | None,
            requires_grad: bool) -> Tensor:
    dt, dev = _place(dtype, device, backend)
    shape = _shape_arg(shape, fn_name)
    dt = dt or _dtypes.float32
    if requires_grad:
        _check_grad_dtype(dt, fn_name)
    raw = getattr(dev.xp, fn_name)(shape, dtype=dt, device=_native(dev))
    return _finish(new(raw, dev), requires_grad, fn_name)


def _int_arg(v: Any, fname: str, what: str) -> int:
    if isinstance(v, bool) or not hasattr(v, "__index__"):
        raise TypeError(f"{fname}(): {what} must be an int, got {type(v).__name__}")
    return v.__index__()


def _shape_arg(shape: Any, fname: str) -> tuple[int, ...]:
    if type(shape) is tuple:  # fast path: a tuple of non-negative Python ints
        for s in shape:
            if type(s) is not int or s < 0:
                break
        else:
            return shape
    if isinstance(shape, (tuple, list)):
        shape = tuple(_int_arg(s, fname, "every entry of shape") for s in shape)
    else:
        try:
            shape = (_int_arg(shape, fname, "shape"),)
        except TypeError:
            raise TypeError(
                f"{fname}(): shape must be an int or a tuple of ints, got {shape!r}"
            ) from None
    if any(s < 0 for s in shape):
        raise ValueError(f"{fname}(): negative dimension in shape {shape}")
    return shape


def zeros(shape: int | tuple[int, ...], *, dtype: Any = None, device: Any = None,
          backend: str | None = None, requires_grad: bool = False) -> Tensor:
    """A tensor of zeros (float32 unless ``dtype`` says otherwise).

    Args:
        shape: The shape: an int or a tuple of ints.
        dtype: dtype of the result (default ``float32``).
        device: Device of the result (a Device or a string like ``'cupy:0'``; default: the default
            device).
        backend: Put the result on this backend's first device instead.
        requires_grad: Whether the result requires a gradient.

    Returns:
        A tensor of zeros.
    """
    return _create("zeros", shape, dtype, device, backend, requires_grad)


def ones(shape: int | tuple[int, ...], *, dtype: Any = None, device: Any = None,
         backend: str | None = None, requires_grad: bool = False) -> Tensor:
    """A tensor of ones (float32 unless ``dtype`` says otherwise).

    Args:
        shape: The shape: an int or a tuple of ints.
        dtype: dtype of the result (default ``float32``).
        device: Device of the result (a Device or a string like ``'cupy:0'``; default: the default
            device).
        backend: Put the result on this backend's first device instead.
        requires_grad: Whether the result requires a gradient.

    Returns:
        A tensor of ones.
    """
    return _create("ones", shape, dtype, device, backend, requires_grad)


def empty(shape: int | tuple[int, ...], *, dtype: Any = None, device: Any = None,
          backend: str | None = None, requires_grad: bool = False) -> Tensor:
    """An uninitialised tensor (float32 unless ``dtype`` says otherwise).

    Args:
        shape: The shape: an int or a tuple of ints.
        dtype: dtype of the result (default ``float32``).
        device: Device of the result (a Device or a string like ``'cupy:0'``; default: the default
            device).
        backend: Put the result on this backend's first device instead.
        requires_grad: Whether the result requires a gradient.

    Returns:
        An uninitialised tensor.
    """
    return _create("empty", shape, dtype, device, backend, requires_grad)


def _check_fits(value: Any, dt: Any, fname: str) -> None:
    """An ``OverflowError`` for a real ``value`` that an integer ``dt`` cannot hold (nan,
    an infinity, or past its range once truncated, as PyTorch; a cast would wrap it or
    give a backend's own garbage)."""
    if _dkind(dt) not in "iu" or isinstance(value, (bool, complex)):
        return
    info = np.iinfo(np.dtype(to_dtype(dt)))
    v = value if isinstance(value, int) else None
    if v is None and value == value and abs(value) != float("inf"):
        v = int(value)
    if v is None or not info.min <= v <= info.max:
        raise OverflowError(f"{fname}(): fill value {value!r} cannot be converted to {dt} "
                            f"without overflow (its range is [{info.min}, {info.max}])")


def _fill_scalar(value: Any, fname: str) -> Any:
    if isinstance(value, Tensor):
        value = value.item()
    elif isinstance(value, np.generic):
        value = value.item()
    _scalar_dtype(value, fname)
    return value


def full(shape: int | tuple[int, ...], fill_value: bool | int | float | complex, *,
         dtype: Any = None, device: Any = None, backend: str | None = None,
         requires_grad: bool = False) -> Tensor:
    """A tensor filled with ``fill_value``; without ``dtype`` the dtype follows the
    scalar's kind (bool, int64, float32, complex64).

    Args:
        shape: The shape: an int or a tuple of ints.
        fill_value: The value of every element.
        dtype: dtype of the result (default: from the scalar's kind).
        device: Device of the result (a Device or a string like ``'cupy:0'``; default: the default
            device).
        backend: Put the result on this backend's first device instead.
        requires_grad: Whether the result requires a gradient.

    Returns:
        The filled tensor.
    """
    fill_value = _fill_scalar(fill_value, "full")
    dt, dev = _place(dtype, device, backend)
    shape = _shape_arg(shape, "full")
    dt = dt or _scalar_dtype(fill_value, "full")
    if requires_grad:
        _check_grad_dtype(dt, "full")
    _check_fits(fill_value, dt, "full")
    raw = dev.xp.full(shape, fill_value, dtype=dt, device=_native(dev))
    return _finish(new(raw, dev), requires_grad, "full")


def _like(x: Tensor, dtype: Any, device: Any, fname: str) -> tuple[Any, Any]:
    x = tensor_arg(x, fname)
    return (x.dtype if dtype is None else dtype), (x._device if device is None else device)


def zeros_like(x: Tensor, /, *, dtype: Any = None, device: Any = None,
               requires_grad: bool = False) -> Tensor:
    """Zeros with the shape (and by default dtype and device) of ``x``.

    Args:
        x: The tensor whose shape (and by default dtype and device) the result takes.
        dtype: dtype of the result (default: ``x``'s).
        device: Device of the result (default: ``x``'s).
        requires_grad: Whether the result requires a gradient.

    Returns:
        A tensor of zeros.
    """
    dt, dev = _like(x, dtype, device, "zeros_like")
    return _create("zeros", x.shape, dt, dev, None, requires_grad)


def ones_like(x: Tensor, /, *, dtype: Any = None, device: Any = None,
              requires_grad: bool = False) -> Tensor:
    """Ones with the shape (and by default dtype and device) of ``x``.

    Args:
        x: The tensor whose shape (and by default dtype and device) the result takes.
        dtype: dtype of the result (default: ``x``'s).
        device: Device of the result (default: ``x``'s).
        requires_grad: Whether the result requires a gradient.

    Returns:
        A tensor of ones.
    """
    dt, dev = _like(x, dtype, device, "ones_like")
    return _create("ones", x.shape, dt, dev, None, requires_grad)


def empty_like(x: Tensor, /, *, dtype: Any = None, device: Any = None,
               requires_grad: bool = False) -> Tensor:
    """Uninitialised with the shape (and by default dtype and device) of ``x``.

    Args:
        x: The tensor whose shape (and by default dtype and device) the result takes.
        dtype: dtype of the result (default: ``x``'s).
        device: Device of the result (default: ``x``'s).
        requires_grad: Whether the result requires a gradient.

    Returns:
        An uninitialised tensor.
    """
    dt, dev = _like(x, dtype, device, "empty_like")
    return _create("empty", x.shape, dt, dev, None, requires_grad)


def full_like(x: Tensor, /, fill_value: bool | int | float | complex, *, dtype: Any = None,
              device: Any = None, requires_grad: bool = False) -> Tensor:
    """``fill_value`` with the shape (and by default dtype and device) of ``x``.

    Args:
        x: The tensor whose shape (and by default dtype and device) the result takes.
        fill_value: The value of every element.
        dtype: dtype of the result (default: ``x``'s).
        device: Device of the result (default: ``x``'s).
        requires_grad: Whether the result requires a gradient.

    Returns:
        The filled tensor.
    """
    dt, dev = _like(x, dtype, device, "full_like")
    return full(x.shape, fill_value, dtype=dt, device=dev, requires_grad=requires_grad)


def _real_arg(v: Any, fname: str, what: str) -> Any:
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"{fname}(): {what} must be an int or a float, got {type(v).__name__}")
    return v


def arange(start: int | float, /, stop: int | float | None = None, step: int | float = 1, *,
           dtype: Any = None, device: Any = None, backend: str | None = None,
           requires_grad: bool = False) -> Tensor:
    """Evenly spaced values in ``[start, stop)``; int64 for integer arguments else float32.

    Args:
        start: The first value (the end, from 0, when ``stop`` is ``None``).
        stop: The end (excluded).
        step: The spacing (not 0).
        dtype: dtype of the result (default: see above).
        device: Device of the result (a Device or a string like ``'cupy:0'``; default: the default
            device).
        backend: Put the result on this backend's first device instead.
        requires_grad: Whether the result requires a gradient.

    Returns:
        A 1-D tensor.

    Raises:
        ValueError: If ``step`` is 0.
    """
    start = _real_arg(start, "arange", "start")
    stop = None if stop is None else _real_arg(stop, "arange", "stop")
    step = _real_arg(step, "arange", "step")
    dt, dev = _place(dtype, device, backend)
    if step == 0:
        raise ValueError("arange(): step must not be zero")
    if dt is None:
        ints = all(isinstance(v, int) for v in (start, stop, step) if v is not None)
        dt = _dtypes.int64 if ints else _dtypes.float32
    if requires_grad:
        _check_grad_dtype(dt, "arange")
    if stop is None:
        start, stop = 0, start
    raw = dev.xp.arange(start, stop, step, dtype=dt, device=_native(dev))
    return _finish(new(raw, dev), requires_grad, "arange")


def linspace(start: int | float | complex, stop: int | float | complex, /, num: int, *,
             dtype: Any = None, device: Any = None, endpoint: bool = True,
             backend: str | None = None, requires_grad: bool = False) -> Tensor:
    """``num`` evenly spaced values from ``start`` to ``stop`` (float32, or complex64 for
    a complex bound, by default).

    Args:
        start: The first value.
        stop: The last value (with ``endpoint``).
        num: Number of values (at least 0).
        dtype: dtype of the result (default ``float32``, or ``complex64`` for a complex bound).
        device: Device of the result (a Device or a string like ``'cupy:0'``; default: the default
            device).
        endpoint: Whether ``stop`` is included.
        backend: Put the result on this backend's first device instead.
        requires_grad: Whether the result requires a gradient.

    Returns:
        A 1-D tensor of ``num`` values.

    Raises:
        ValueError: If ``num`` is negative.
        TypeError: If ``num`` is not an int or complex bounds get a real dtype.
    """
    num = _int_arg(num, "linspace", "num")
    for v in (start, stop):
        if isinstance(v, bool) or not isinstance(v, (int, float, complex, np.number)):
            raise TypeError(
                f"linspace(): start and stop must be numbers, got {type(v).__name__}"
            )
    dt, dev = _place(dtype, device, backend)
    if num < 0:
        raise ValueError(f"linspace(): num must be non-negative, got {num}")
    if dt is None:
        dt = _dtypes.complex64 if isinstance(start, complex) or isinstance(stop, complex) \
            else _dtypes.float32
    if requires_grad:
        _check_grad_dtype(dt, "linspace")
    xp = dev.xp
    if isinstance(start, complex) or isinstance(stop, complex):
        if _dkind(dt) != "c":
            raise TypeError(f"linspace(): complex start/stop need a complex dtype, got {dt}")
        # real and imaginary parts separately (not every backend takes complex bounds)
        part = _dtypes.float64 if dt == _dtypes.complex128 else _dtypes.float32
        a, b = complex(start), complex(stop)
        kw = {"dtype": part, "device": _native(dev), "endpoint": endpoint}
        re = xp.astype(xp.linspace(a.real, b.real, num, **kw), dt)
        im = xp.astype(xp.linspace(a.imag, b.imag, num, **kw), dt)
        raw = re + im * 1j
    else:
        raw = xp.linspace(start, stop, num, dtype=dt, device=_native(dev), endpoint=endpoint)
    return _finish(new(raw, dev), requires_grad, "linspace")


def eye(n_rows: int, n_cols: int | None = None, /, *, k: int = 0, dtype: Any = None,
        device: Any = None, backend: str | None = None, requires_grad: bool = False) -> Tensor:
    """A 2-D tensor with ones on the ``k``-th diagonal (float32 by default).

    Args:
        n_rows: Number of rows.
        n_cols: Number of columns (default ``n_rows``).
        k: The diagonal: 0 the main one, positive above, negative below.
        dtype: dtype of the result (default ``float32``).
        device: Device of the result (a Device or a string like ``'cupy:0'``; default: the default
            device).
        backend: Put the result on this backend's first device instead.
        requires_grad: Whether the result requires a gradient.

    Returns:
        A 2-D tensor.

    Raises:
        ValueError: If a size is negative.
    """
    n_rows = _int_arg(n_rows, "eye", "n_rows")
    n_cols = n_rows if n_cols is None else _int_arg(n_cols, "eye", "n_cols")
    k = _int_arg(k, "eye", "k")
    if n_rows < 0 or n_cols < 0:
        raise ValueError(f"eye(): negative dimension in shape ({n_rows}, {n_cols})")
    dt, dev = _place(dtype, device, backend)
    dt = dt or _dtypes.float32
    if requires_grad:
        _check_grad_dtype(dt, "eye")
    raw = dev.xp.eye(n_rows, n_cols, k=k, dtype=dt, device=_native(dev))
    return _finish(new(raw, dev), requires_grad, "eye")


def _dlpack_source(x: Any) -> Device:
    try:
        dev_type, index = x.__dlpack_device__()
    except AttributeError:
        raise AttributeError(
            f"from_dlpack(): {type(x).__name__} does not implement __dlpack_device__"
        ) from None
    dev_type = int(dev_type)
    if dev_type == 1:  # kDLCPU
        return resolve_device("numpy")
    if dev_type in (2, 3):  # kDLCUDA, kDLCUDAHost
        return resolve_device(f"cupy:{int(index) if dev_type == 2 else 0}")
    raise BufferError(f"from_dlpack(): no vtl backend for DLPack device type {dev_type}")


def from_dlpack(x: Any, /, *, device: Any = None, copy: bool | None = None,
                requires_grad: bool = False) -> Tensor:
    """Import any DLPack producer (a NumPy/CuPy/PyTorch array, a Tensor...).

    Without ``device`` the result stays on the producer's device (sharing
    memory unless ``copy=True``). A ``device`` elsewhere copies through the
    host; with ``copy=False`` that raises ``BufferError``, as the standard says.

    Args:
        x: A DLPack producer.
        device: Device of the result (default: the producer's).
        copy: ``True`` always copies, ``False`` never (raising where a copy is needed), ``None``
            copies only when needed.
        requires_grad: Whether the result requires a gradient.

    Returns:
        A Tensor.

    Raises:
        BufferError: If ``copy=False`` but the data must move or be copied.
    """
    if isinstance(x, Tensor):
        if copy is False and device is not None and resolve_device(device) is not x._device:
            raise BufferError(
                f"from_dlpack(copy=False) cannot move data from {x._device} to {device}"
            )
        return asarray(x, device=device, copy=copy, requires_grad=requires_grad)
    src = _dlpack_source(x)
    dst = src if device is None else resolve_device(device)
    if dst is src:
        raw = src.backend.from_dlpack(x, src.index, copy=copy)
        t = new(raw, src)
        to_dtype(raw.dtype)
    else:
        if copy is False:
            raise BufferError(f"from_dlpack(copy=False) cannot move data from {src} to {dst}")
        from .transfer import to_device

        raw = src.backend.from_dlpack(x, src.index)
        to_dtype(raw.dtype)
        t = to_device(new(raw, src), dst)
    return _finish(t, requires_grad, "from_dlpack")


def meshgrid(*arrays: Tensor, indexing: str = "xy") -> list[Tensor]:
    """Coordinate grids from 1-D tensors (``indexing='xy'`` or ``'ij'``); differentiable.

    The grids are read-only broadcast views of the inputs (as PyTorch's
    meshgrid), not copies; a list, as the 2024.12 standard says.

    Args:
        *arrays: 1-D tensors of one dtype.
        indexing: ``'xy'`` (Cartesian) or ``'ij'`` (matrix indexing).

    Returns:
        A list of grids.

    Raises:
        ValueError: If ``indexing`` is unknown or an input is not 1-D.
        TypeError: If the inputs' dtypes differ.
    """
    from .manipulation import broadcast_to, reshape

    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid(): indexing must be 'xy' or 'ij', got {indexing!r}")
    if not arrays:
        return []
    arrays = tuple(tensor_arg(a, "meshgrid", "arrays") for a in arrays)
    same_device("meshgrid", arrays)
    for a in arrays:
        if a.ndim != 1:
            raise ValueError(f"meshgrid(): every input must be 1-D, got shape {a.shape}")
    dtypes = {a.dtype for a in arrays}
    if len(dtypes) > 1:
        raise TypeError(f"meshgrid(): inputs must share a dtype, got {sorted(map(str, dtypes))}")
    n = len(arrays)
    swap = indexing == "xy" and n >= 2
    shape = [a.shape[0] for a in arrays]
    if swap:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, a in enumerate(arrays):
        pos = 1 - i if swap and i < 2 else i
        view = [1] * n
        view[pos] = a.shape[0]
        out.append(broadcast_to(reshape(a, tuple(view)), tuple(shape)))
    return out


def _tri(name: str, x: Tensor, k: int) -> Tensor:
    x = tensor_arg(x, name)
    k = _int_arg(k, name, "k")
    if x.ndim < 2:
        raise ValueError(f"{name}() needs a tensor with at least 2 dimensions, got {x.ndim}")
    dev = x._device
    out = getattr(dev.xp, name)(x._data, k=k)
    if needs_grad(x):
        fn = tril if name == "tril" else triu
        return record(out, dev, name.capitalize() + "Backward", (x,), lambda g, _: fn(g, k=k))
    return new(out, dev)


@torch_names(diagonal="k")
def tril(x: Tensor, /, *, k: int = 0) -> Tensor:
    """Lower triangle of the last two axes (zero above diagonal ``k``).

    Args:
        x: A tensor of at least 2 dimensions.
        k: The diagonal: 0 the main one, positive above, negative below.
        diagonal: PyTorch's name for ``k`` (give one of the two).

    Returns:
        A tensor of ``x``'s shape.

    Raises:
        TypeError: If a parameter is given under both of its names.
    """
    return _tri("tril", x, k)


@torch_names(diagonal="k")
def triu(x: Tensor, /, *, k: int = 0) -> Tensor:
    """Upper triangle of the last two axes (zero below diagonal ``k``).

    Args:
        x: A tensor of at least 2 dimensions.
        k: The diagonal: 0 the main one, positive above, negative below.
        diagonal: PyTorch's name for ``k`` (give one of the two).

    Returns:
        A tensor of ``x``'s shape.

    Raises:
        TypeError: If a parameter is given under both of its names.
    """
    return _tri("triu", x, k)
