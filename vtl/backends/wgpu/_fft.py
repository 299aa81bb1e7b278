"""The ``fft`` extension.

Transforms whose lengths are powers of two run on the device: a radix-2 Stockham
kernel (``wgsl/fft/fft.wgsl``, log2(n) passes, one dispatch each, batched over every
other axis; the transformed axis is moved last and made contiguous first), with
twiddle factors computed on the host once per (n, dtype). ``fft``/``ifft`` are
that kernel; ``rfft`` is a complex transform of the real input, cut to
n // 2 + 1; ``irfft`` rebuilds the Hermitian spectrum on the device and keeps
the real part of its inverse; ``hfft``/``ihfft`` are ``irfft``/``rfft`` of the
conjugate with the norm swapped, as NumPy; the n-dimensional ones repeat the
1-D transform over their axes. float32 (and integer/bool) input gives complex64,
float64 gives complex128 (needs ``shader-f64``).

Transforms with any other length (``HOST_FFT`` lists the functions this applies
to) read their input back and compute through host NumPy, then upload the
result. fftfreq, rfftfreq, fftshift and ifftshift run on the device.
"""

from __future__ import annotations

import math
import types

import numpy as np

from . import _dtypes as D
from . import _kernels
from ._array import (
    WgpuArray,
    astype_raw,
    check_dtype,
    contiguous,
    copy_into,
    empty,
    from_numpy,
    to_numpy,
    view,
)
from ._creation import arange
from ._elementwise import binary, default_float, unary
from ._manipulation import flip, moveaxis, roll
from ._recorder import REC, groups_for

#: transforms computed through host NumPy when a transformed length is not a power of two
HOST_FFT = ("fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft")
_NORMS = ("backward", "ortho", "forward")
_twiddles: dict = {}


def _pow2(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


def _arr(x, fname: str) -> WgpuArray:
    if not isinstance(x, WgpuArray):
        raise TypeError(f"fft.{fname}() expected a WgpuArray, got {type(x).__name__}")
    return x


def _norm(norm: str, fname: str) -> str:
    if norm not in _NORMS:
        raise ValueError(f"fft.{fname}(): norm must be one of {_NORMS}, got {norm!r}")
    return norm


def _complex_dtype(dt: np.dtype) -> np.dtype:
    if D.kind(dt) == "c":
        return dt
    if dt == D.float64:
        return D.complex128
    return D.COMPLEX_OF[default_float()]


def _real_dtype(dt: np.dtype) -> np.dtype:
    return D.REAL_OF[_complex_dtype(dt)]


def _axis(axis: int, ndim: int, fname: str) -> int:
    if not -ndim <= axis < ndim:
        raise IndexError(f"fft.{fname}(): axis {axis} is out of bounds for {ndim} dimensions")
    return axis % ndim


def _scale(norm: str, n: int, inverse: bool) -> float:
    if norm == "ortho":
        return 1.0 / math.sqrt(n)
    if (norm == "backward") == inverse:
        return 1.0 / n
    return 1.0


def _twiddle(n: int, dt: np.dtype) -> WgpuArray:
    """exp(-2 pi i m / n) for m < n / 2 (device array, cached)."""
    tw = _twiddles.get((n, dt))
    if tw is None:
        m = np.arange(max(n // 2, 1), dtype=np.float64)
        tw = _twiddles[(n, dt)] = from_numpy(np.exp(-2j * np.pi * m / n).astype(dt))
    return tw


def _resize(x: WgpuArray, n: int, axis: int) -> WgpuArray:
    """``x`` cut or zero-padded to length ``n`` along ``axis``."""
    m = x.shape[axis]
    if n == m:
        return x
    if n < m:
        shape = x.shape[:axis] + (n,) + x.shape[axis + 1:]
        return view(x, shape, x._strides, x._offset)
    from ._creation import zeros

    out = zeros(x.shape[:axis] + (n,) + x.shape[axis + 1:], dtype=x.dtype)
    copy_into(x, view(out, x.shape, out._strides, out._offset))
    return out


def _c2c(x: WgpuArray, n: int, axis: int, inverse: bool, scale: float) -> WgpuArray:
    """The complex transform (length ``n``, a power of two) of complex ``x`` along ``axis``,
    multiplied by ``scale``; a new array."""
    x = _resize(x, n, axis)
    xt = contiguous(moveaxis(x, axis, -1))
    dt = xt.dtype
    rows = xt.size // n if n else 0
    if n == 1 or rows == 0:
        out = empty(xt.shape, dt)
        copy_into(xt, out)
    else:
        half = n // 2
        tw = _twiddle(n, dt)
        k = _kernels.kernel("fft", "rrw", (dt,), T=D.wgsl(dt))
        bufs = [empty(xt.shape, dt), None]
        src = xt
        ns = 1
        i = 0
        while ns < n:
            dst = bufs[i & 1]
            if dst is None:
                dst = bufs[1] = empty(xt.shape, dt)
            words = [rows * half, half, ns, n // (2 * ns), 1 if inverse else 0,
                     src._offset, dst._offset, tw._offset]
            REC.dispatch(k, (src._st.buf, tw._st.buf, dst._st.buf), words,
                         groups_for(rows * half))
            src = dst
            ns *= 2
            i += 1
        out = src
    if scale != 1.0:
        out = binary("multiply", out, scale)
    return moveaxis(out, -1, axis)


def _as_complex(x: WgpuArray) -> WgpuArray:
    dt = _complex_dtype(x.dtype)
    check_dtype(dt)
    return x if x.dtype == dt else astype_raw(x, dt)


def _host_call(name: str, x: WgpuArray, **kw) -> WgpuArray:
    import array_api_compat.numpy as hnp

    h = to_numpy(x)
    out = getattr(hnp.fft, name)(h, **kw)
    want = (_real_dtype(x.dtype) if name in ("irfft", "hfft", "irfftn")
            else _complex_dtype(x.dtype))
    return from_numpy(out.astype(want, copy=False))


def _n(n, m: int, fname: str, default: int | None = None) -> int:
    if n is None:
        n = m if default is None else default
    if n < 1:
        raise ValueError(f"fft.{fname}(): invalid number of data points {n}")
    return int(n)


def fft(x, /, *, n=None, axis=-1, norm="backward") -> WgpuArray:
    """One-dimensional discrete Fourier transform (device kernel for powers of two)."""
    return _c2c_1d(x, n, axis, norm, False, "fft")


def ifft(x, /, *, n=None, axis=-1, norm="backward") -> WgpuArray:
    """One-dimensional inverse discrete Fourier transform."""
    return _c2c_1d(x, n, axis, norm, True, "ifft")


def _args_1d(x, n, axis, norm, fname: str, real: bool = False) -> tuple:
    """Checked ``(x, n, axis, norm)`` of a 1-D transform; ``real``: refuse complex input."""
    x = _arr(x, fname)
    if real and D.kind(x.dtype) == "c":
        raise TypeError(f"fft.{fname}() expects a real-valued array, got {x.dtype}")
    norm = _norm(norm, fname)
    ax = _axis(axis, x.ndim, fname)
    return x, _n(n, x.shape[ax], fname), ax, norm


def _c2c_1d(x, n, axis, norm, inverse: bool, fname: str) -> WgpuArray:
    x, n, ax, norm = _args_1d(x, n, axis, norm, fname)
    if not _pow2(n):
        return _host_call(fname, x, n=n, axis=ax, norm=norm)
    return _c2c(_as_complex(x), n, ax, inverse, _scale(norm, n, inverse))


def rfft(x, /, *, n=None, axis=-1, norm="backward") -> WgpuArray:
    """Transform of a real signal: the n // 2 + 1 non-negative frequencies."""
    x, n, ax, norm = _args_1d(x, n, axis, norm, "rfft", real=True)
    if not _pow2(n):
        return _host_call("rfft", x, n=n, axis=ax, norm=norm)
    y = _c2c(_as_complex(x), n, ax, False, _scale(norm, n, False))
    return _take(y, ax, 0, n // 2 + 1)


def _take(x: WgpuArray, axis: int, start: int, stop: int) -> WgpuArray:
    """A contiguous copy of ``x[..., start:stop, ...]`` along ``axis``."""
    shape = x.shape[:axis] + (stop - start,) + x.shape[axis + 1:]
    v = view(x, shape, x._strides, x._offset + start * x._strides[axis])
    out = empty(shape, x.dtype)
    copy_into(v, out)
    return out


def irfft(x, /, *, n=None, axis=-1, norm="backward") -> WgpuArray:
    """Inverse of :func:`rfft`: a real signal of length n (default 2 (m - 1))."""
    return _c2r(x, n, axis, norm, "irfft", conj=False)


def hfft(x, /, *, n=None, axis=-1, norm="backward") -> WgpuArray:
    """Transform of a Hermitian-symmetric signal (its n // 2 + 1 first values): real."""
    return _c2r(x, n, axis, norm, "hfft", conj=True)


def _c2r(x, n, axis, norm, fname: str, conj: bool) -> WgpuArray:
    x = _arr(x, fname)
    norm = _norm(norm, fname)
    ax = _axis(axis, x.ndim, fname)
    m = x.shape[ax]
    n = _n(n, m, fname, 2 * (m - 1))
    if not _pow2(n):
        return _host_call(fname, x, n=n, axis=ax, norm=norm)
    x = _as_complex(x)
    if conj:  # hfft(x) = irfft(conj(x)) with the norm's direction swapped
        x = unary("conj", x)
        norm = {"backward": "forward", "forward": "backward"}.get(norm, norm)
    h = n // 2 + 1
    xh = _resize(x, h, ax)
    # the Hermitian spectrum: y[:h] = x[:h], y[h:] = conj(x[n - h : 0 : -1])
    full_shape = x.shape[:ax] + (n,) + x.shape[ax + 1:]
    y = empty(full_shape, x.dtype)
    copy_into(xh, view(y, xh.shape, y._strides, y._offset))
    if n - h > 0:
        tail = _take(xh, ax, 1, n - h + 1)
        tail = unary("conj", flip(tail, axis=ax))
        copy_into(tail, view(y, tail.shape, y._strides, y._offset + h * y._strides[ax]))
    out = _c2c(y, n, ax, True, _scale(norm, n, True))
    return unary("real", out)


def ihfft(x, /, *, n=None, axis=-1, norm="backward") -> WgpuArray:
    """Inverse of :func:`hfft`: conj(rfft(x)) with the norm's direction swapped."""
    x, n, ax, norm = _args_1d(x, n, axis, norm, "ihfft", real=True)
    if not _pow2(n):
        return _host_call("ihfft", x, n=n, axis=ax, norm=norm)
    swapped = {"backward": "forward", "forward": "backward"}.get(norm, norm)
    return unary("conj", rfft(x, n=n, axis=ax, norm=swapped))


def _nd_args(x: WgpuArray, s, axes, fname: str):
    if s is not None:
        s = (s,) if isinstance(s, int) else tuple(s)
    if axes is not None:
        axes = (axes,) if isinstance(axes, int) else tuple(axes)
    if axes is None:
        axes = tuple(range(x.ndim)) if s is None else tuple(range(x.ndim - len(s), x.ndim))
    axes = tuple(_axis(a, x.ndim, fname) for a in axes)
    if s is None:
        s = tuple(x.shape[a] for a in axes)
    if len(s) != len(axes):
        raise ValueError(f"fft.{fname}(): s and axes must have the same length "
                         f"({len(s)} and {len(axes)})")
    s = tuple(x.shape[a] if v == -1 else int(v) for v, a in zip(s, axes, strict=True))
    return s, axes


def fftn(x, /, *, s=None, axes=None, norm="backward") -> WgpuArray:
    """n-dimensional transform: the 1-D transform over each of ``axes``."""
    return _c2c_nd(x, s, axes, norm, False, "fftn")


def ifftn(x, /, *, s=None, axes=None, norm="backward") -> WgpuArray:
    """n-dimensional inverse transform."""
    return _c2c_nd(x, s, axes, norm, True, "ifftn")


def _c2c_nd(x, s, axes, norm, inverse: bool, fname: str) -> WgpuArray:
    x = _arr(x, fname)
    norm = _norm(norm, fname)
    s, axes = _nd_args(x, s, axes, fname)
    for v in s:
        if v < 1:
            raise ValueError(f"fft.{fname}(): invalid number of data points {v}")
    if not all(_pow2(v) for v in s):
        return _host_call(fname, x, s=s, axes=axes, norm=norm)
    y = _as_complex(x)
    for v, a in zip(s, axes, strict=True):
        y = _c2c(y, v, a, inverse, _scale(norm, v, inverse))
    if not axes:
        y = astype_raw(y, y.dtype)
    return y


def rfftn(x, /, *, s=None, axes=None, norm="backward") -> WgpuArray:
    """n-dimensional transform of a real array: rfft over the last axis, fft over the rest."""
    x = _arr(x, "rfftn")
    if D.kind(x.dtype) == "c":
        raise TypeError(f"fft.rfftn() expects a real-valued array, got {x.dtype}")
    norm = _norm(norm, "rfftn")
    s, axes = _nd_args(x, s, axes, "rfftn")
    if not axes or not all(_pow2(v) for v in s):
        return _host_call("rfftn", x, s=s, axes=axes, norm=norm)
    y = rfft(x, n=s[-1], axis=axes[-1], norm=norm)
    for v, a in zip(s[:-1], axes[:-1], strict=True):
        y = _c2c(y, v, a, False, _scale(norm, v, False))
    return y


def irfftn(x, /, *, s=None, axes=None, norm="backward") -> WgpuArray:
    """Inverse of :func:`rfftn`: ifft over all axes but the last, irfft over the last."""
    x = _arr(x, "irfftn")
    norm = _norm(norm, "irfftn")
    if s is None:
        _, axes = _nd_args(x, None, axes, "irfftn")
        s = tuple(x.shape[a] for a in axes[:-1]) + ((2 * (x.shape[axes[-1]] - 1),)
                                                   if axes else ())
    else:
        s, axes = _nd_args(x, s, axes, "irfftn")
    if not axes or not all(_pow2(v) for v in s):
        return _host_call("irfftn", x, s=s, axes=axes, norm=norm)
    y = _as_complex(x)
    for v, a in zip(s[:-1], axes[:-1], strict=True):
        y = _c2c(y, v, a, True, _scale(norm, v, True))
    return irfft(y, n=s[-1], axis=axes[-1], norm=norm)


def fftfreq(n: int, /, *, d: float = 1.0, dtype=None, device=None) -> WgpuArray:
    dt = dtype or default_float()
    k = arange(n, dtype=dt, device=device)
    k = binary("subtract", k, binary("multiply", binary("greater_equal", k, (n + 1) // 2),
                                      float(n)))
    return binary("divide", k, float(n * d))


def rfftfreq(n: int, /, *, d: float = 1.0, dtype=None, device=None) -> WgpuArray:
    dt = dtype or default_float()
    return binary("divide", arange(n // 2 + 1, dtype=dt, device=device), float(n * d))


def _axes(x: WgpuArray, axes):
    if axes is None:
        return tuple(range(x.ndim))
    return (axes,) if isinstance(axes, int) else tuple(axes)


def fftshift(x: WgpuArray, /, *, axes=None) -> WgpuArray:
    ax = _axes(x, axes)
    return roll(x, tuple(x.shape[a] // 2 for a in ax), axis=ax)


def ifftshift(x: WgpuArray, /, *, axes=None) -> WgpuArray:
    ax = _axes(x, axes)
    return roll(x, tuple(-(x.shape[a] // 2) for a in ax), axis=ax)


fft = types.SimpleNamespace(
    fft=fft, ifft=ifft, fftn=fftn, ifftn=ifftn, rfft=rfft, irfft=irfft, rfftn=rfftn,
    irfftn=irfftn, hfft=hfft, ihfft=ihfft,
    fftfreq=fftfreq, rfftfreq=rfftfreq, fftshift=fftshift, ifftshift=ifftshift,
)
