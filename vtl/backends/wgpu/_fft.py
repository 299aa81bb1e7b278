"""The ``fft`` extension.

The transforms (fft, ifft, fftn, ifftn, rfft, irfft, rfftn, irfftn, hfft, ihfft)
read their input back and compute through host NumPy (``HOST_FFT``), then
upload the result; their outputs or inputs are complex, so they need complex
dtypes on the device (not supported by this library yet: they raise
``TypeError``). fftfreq, rfftfreq, fftshift and ifftshift run on the device.
"""

from __future__ import annotations

import types

from ._array import WgpuArray, from_numpy, to_numpy
from ._creation import arange
from ._elementwise import binary, default_float
from ._manipulation import roll

#: transforms computed through host NumPy
HOST_FFT = ("fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft")


def _host(name: str):
    def fn(x, /, *args, **kwargs):
        import array_api_compat.numpy as hnp

        h = to_numpy(x) if isinstance(x, WgpuArray) else x
        return from_numpy(getattr(hnp.fft, name)(h, *args, **kwargs))

    from ._linalg import host_signature

    fn.__name__ = name
    fn.__doc__ = f"``fft.{name}`` (computed through host NumPy)."
    kw = {"s": None, "axes": None} if name.endswith("n") else {"n": None, "axis": -1}
    fn.__signature__ = host_signature(("x",), {**kw, "norm": "backward"})
    return fn


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
    fftfreq=fftfreq, rfftfreq=rfftfreq, fftshift=fftshift, ifftshift=ifftshift,
    **{name: _host(name) for name in HOST_FFT},
)
