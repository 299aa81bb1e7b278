"""Creation functions (array API): data is generated on the device where possible."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import _dtypes as D
from . import _kernels
from ._array import (
    DEVICE,
    WgpuArray,
    c_strides,
    check_dtype,
    collapse,
    copy_into,
    from_numpy,
    to_numpy,
    view,
    words_for_scalar,
)
from ._array import (
    empty as _empty,
)
from ._elementwise import default_float, default_int
from ._recorder import REC, groups_for


def _check_device(device: Any) -> None:
    if device is not None and not (device is DEVICE or device == DEVICE):
        raise ValueError(f"unknown device {device!r}: the wgpu library has one device, wgpu:0")


def _dtype(dtype: Any) -> np.dtype | None:
    if dtype is None:
        return None
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"expected a dtype such as float32, got {dtype!r}") from None
    check_dtype(dt)
    return dt


def _shape(shape) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(s) for s in shape)


def fill_view(out: WgpuArray, start, step=0) -> None:
    """out[...] = start + i * step (i: row-major index within ``out``)."""
    n = out.size
    if n == 0:
        return
    dt = out._dtype
    if D.kind(dt) == "c":
        from ._complex import fill_view as fill_complex

        return fill_complex(out, start, step)
    if step == 0 and out._contig:  # flat kernel: vec4 stores, chunked above one binding
        from ._fuse import fill

        return fill(out, start)
    shape, (so,) = collapse(out._shape, out._strides)
    flags = 2 if so == c_strides(shape) else 0
    words = [n, len(shape), flags, 0, out._offset, *words_for_scalar(start, dt),
             *words_for_scalar(step, dt), *shape, *so]
    k = _kernels.kernel("fill", "w", (dt,), T=D.wgsl(dt), D=dt.name)
    REC.dispatch(k, (out._st.buf,), words, groups_for(n))


def _scalar_value(v, dt: np.dtype):
    if dt == D.bool_:
        return bool(v)
    if D.kind(dt) in "iu":
        return int(v)
    if D.kind(dt) == "c":
        return complex(v)
    return float(v)


def empty(shape, *, dtype=None, device=None) -> WgpuArray:
    _check_device(device)
    return _empty(_shape(shape), _dtype(dtype) or default_float())


def full(shape, fill_value, *, dtype=None, device=None) -> WgpuArray:
    _check_device(device)
    dt = _dtype(dtype)
    if dt is None:
        if isinstance(fill_value, bool):
            dt = D.bool_
        elif isinstance(fill_value, int):
            dt = default_int()
        elif isinstance(fill_value, float):
            dt = default_float()
        elif isinstance(fill_value, complex):
            dt = D.COMPLEX_OF[default_float()]
        elif isinstance(fill_value, np.generic):
            dt = fill_value.dtype
            check_dtype(dt)
        else:
            raise TypeError(f"full(): unsupported fill value type {type(fill_value).__name__}")
    out = _empty(_shape(shape), dt)
    fill_view(out, _scalar_value(fill_value, dt))
    return out


def zeros(shape, *, dtype=None, device=None) -> WgpuArray:
    return full(shape, 0, dtype=_dtype(dtype) or default_float(), device=device)


def ones(shape, *, dtype=None, device=None) -> WgpuArray:
    return full(shape, 1, dtype=_dtype(dtype) or default_float(), device=device)


def empty_like(x: WgpuArray, /, *, dtype=None, device=None) -> WgpuArray:
    return empty(x.shape, dtype=dtype or x.dtype, device=device)


def full_like(x: WgpuArray, /, fill_value, *, dtype=None, device=None) -> WgpuArray:
    return full(x.shape, fill_value, dtype=dtype or x.dtype, device=device)


def zeros_like(x: WgpuArray, /, *, dtype=None, device=None) -> WgpuArray:
    return full(x.shape, 0, dtype=dtype or x.dtype, device=device)


def ones_like(x: WgpuArray, /, *, dtype=None, device=None) -> WgpuArray:
    return full(x.shape, 1, dtype=dtype or x.dtype, device=device)


def arange(start, /, stop=None, step=1, *, dtype=None, device=None) -> WgpuArray:
    _check_device(device)
    if stop is None:
        start, stop = 0, start
    if step == 0:
        raise ValueError("arange(): step must not be zero")
    n = max(0, math.ceil((stop - start) / step))
    dt = _dtype(dtype)
    if dt is None:
        if all(isinstance(v, (int, np.integer)) for v in (start, stop, step)):
            dt = default_int()
        else:
            dt = default_float()
    out = _empty((n,), dt)
    fill_view(out, _scalar_value(start, dt), _scalar_value(step, dt))
    return out


def linspace(start, stop, /, num: int, *, dtype=None, device=None,
             endpoint: bool = True) -> WgpuArray:
    _check_device(device)
    if num < 0:
        raise ValueError(f"linspace(): num must be non-negative, got {num}")
    cplx = isinstance(start, complex) or isinstance(stop, complex)
    dt = _dtype(dtype) or (D.COMPLEX_OF[default_float()] if cplx else default_float())
    if D.kind(dt) == "c":
        from ._complex import linspace as linspace_complex

        return linspace_complex(start, stop, num, dt, endpoint)
    if cplx:
        raise TypeError(f"linspace(): complex start/stop need a complex dtype, got {dt}")
    if D.kind(dt) != "f":
        host = np.linspace(start, stop, num, endpoint=endpoint).astype(dt)
        return from_numpy(host)
    div = (num - 1) if endpoint else num
    step = (stop - start) / div if div > 0 else 0.0
    out = _empty((num,), dt)
    fill_view(out, float(start), float(step))
    if endpoint and num > 1:
        fill_view(view(out, (1,), (1,), num - 1), float(stop))
    return out


def eye(n_rows: int, n_cols: int | None = None, /, *, k: int = 0, dtype=None,
        device=None) -> WgpuArray:
    _check_device(device)
    m = n_rows if n_cols is None else n_cols
    out = zeros((n_rows, m), dtype=dtype, device=device)
    if k >= 0:
        length, off = max(0, min(n_rows, m - k)), k
    else:
        length, off = max(0, min(n_rows + k, m)), -k * m
    if length > 0:
        fill_view(view(out, (length,), (m + 1,), off), 1)
    return out


def _tri(x: WgpuArray, k: int, upper: bool, fname: str) -> WgpuArray:
    from ._array import contiguous

    if not isinstance(x, WgpuArray):
        raise TypeError(f"{fname}() expected a WgpuArray, got {type(x).__name__}")
    if x.ndim < 2:
        raise ValueError(f"{fname}() needs an array with at least 2 dimensions, got {x.ndim}")
    x = contiguous(x)
    out = _empty(x.shape, x.dtype)
    n = out.size
    if n:
        dt = x.dtype
        words = [n, x.shape[-2], x.shape[-1], k, 1 if upper else 0, x._offset, 0]
        kern = _kernels.kernel("tri", "rw", (dt,), T=D.wgsl(dt))
        REC.dispatch(kern, (x._st.buf, out._st.buf), words, groups_for(n))
    return out


def tril(x: WgpuArray, /, *, k: int = 0) -> WgpuArray:
    return _tri(x, k, False, "tril")


def triu(x: WgpuArray, /, *, k: int = 0) -> WgpuArray:
    return _tri(x, k, True, "triu")


def asarray(obj: Any, /, *, dtype=None, device=None, copy: bool | None = None) -> WgpuArray:
    """Convert a WgpuArray, NumPy array, buffer, Python scalar or nested sequence."""
    _check_device(device)
    dt = _dtype(dtype)
    if isinstance(obj, WgpuArray):
        if dt is not None and dt != obj.dtype:
            if copy is False:
                raise ValueError("asarray(copy=False) cannot change the dtype without a copy")
            out = _empty(obj.shape, dt)
            copy_into(obj, out)
            return out
        if copy:
            out = _empty(obj.shape, obj.dtype)
            copy_into(obj, out)
            return out
        return obj
    if copy is False:
        raise ValueError("asarray(copy=False) cannot place host data on the wgpu device")
    if isinstance(obj, (list, tuple)) and any(isinstance(o, WgpuArray) for o in _flat(obj)):
        obj = _host_nested(obj)
    host = np.asarray(obj)
    if (dt is not None and D.kind(dt) in "iu" and D.kind(host.dtype) in "fO"
            and isinstance(obj, (list, tuple))):
        try:  # Python ints past int64 (NumPy made the list float64: 2**63 + 1 lost its 1)
            host = np.asarray(obj, dtype=dt)
        except (OverflowError, TypeError, ValueError):
            pass
    if D.kind(host.dtype) == "O":
        raise TypeError(f"asarray() cannot convert an object of type {type(obj).__name__}")
    if dt is None:
        if not isinstance(obj, np.ndarray) and not isinstance(obj, np.generic):
            if D.kind(host.dtype) == "f":
                dt = default_float()
            elif D.kind(host.dtype) == "c":
                dt = D.COMPLEX_OF[default_float()]
            elif D.kind(host.dtype) in "iu":
                dt = default_int() if D.kind(host.dtype) == "i" else host.dtype
                if D.kind(host.dtype) == "i" and host.dtype == np.int64:
                    dt = default_int()
            else:
                dt = host.dtype
        else:
            dt = host.dtype
    check_dtype(dt)
    return from_numpy(host, dt)


def _flat(obj):
    for o in obj:
        if isinstance(o, (list, tuple)):
            yield from _flat(o)
        else:
            yield o


def _host_nested(obj):
    if isinstance(obj, (list, tuple)):
        return [_host_nested(o) for o in obj]
    if isinstance(obj, WgpuArray):
        return to_numpy(obj)
    return obj


def from_dlpack(x: Any, /, *, device=None, copy: bool | None = None) -> WgpuArray:
    """Import through host memory (wgpu buffers cannot alias foreign memory)."""
    _check_device(device)
    if isinstance(x, WgpuArray):  # already on the device: no copy needed unless asked
        return asarray(x, copy=True) if copy else x
    if copy is False:
        raise ValueError("from_dlpack(copy=False): the wgpu device cannot alias host memory")
    return from_numpy(np.from_dlpack(x))


def meshgrid(*arrays: WgpuArray, indexing: str = "xy") -> list[WgpuArray]:
    from ._manipulation import broadcast_to, reshape

    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid(): indexing must be 'xy' or 'ij', got {indexing!r}")
    n = len(arrays)
    shape = [a.size for a in arrays]
    if indexing == "xy" and n >= 2:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, a in enumerate(arrays):
        pos = i
        if indexing == "xy" and n >= 2 and i < 2:
            pos = 1 - i
        s = [1] * n
        s[pos] = a.size
        out.append(_materialize(broadcast_to(reshape(a, tuple(s)), tuple(shape))))
    return out


def _materialize(x: WgpuArray) -> WgpuArray:
    out = _empty(x.shape, x.dtype)
    copy_into(x, out)
    return out
