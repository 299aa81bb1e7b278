"""Casts between float32 and float16/bfloat16 of contiguous CuPy arrays, four elements a
thread (16-byte float32 and 8-byte 16-bit loads and stores). CuPy's copy kernel moves one
2-byte element a thread; under autocast every weight is cast down each step and every
weight gradient back up, dozens of small casts a step. Rounded to nearest even, as NumPy
and ``ml_dtypes`` round, through the backend's conversions (``vtl_st``/``vtl_ld``); a nan
stays a nan of its sign."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from .nn import _I64, Spec, _blocks, _Kernels, aligned

__all__ = ["FROM_LOW", "TO_LOW", "CupyCasts"]

_F32 = np.dtype(np.float32)
_LOW = frozenset({np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)})

#: float32 to the 16-bit ``T``: ``n4`` groups of four elements
TO_LOW = Spec("vtl_cast_to_low", (
    ("const float4* __restrict__", "x"), ("uint2* __restrict__", "out"),
    ("const long long", "n4")), r"""
  VTL_GRID_LOOP(i, n4) {
    const float4 a = x[i];
    uint2 o;
    o.x = (unsigned)vtl_st(a.x) | ((unsigned)vtl_st(a.y) << 16);
    o.y = (unsigned)vtl_st(a.z) | ((unsigned)vtl_st(a.w) << 16);
    out[i] = o;
  }
""")

#: the 16-bit ``T`` to float32: ``n4`` groups of four elements
FROM_LOW = Spec("vtl_cast_from_low", (
    ("const uint2* __restrict__", "x"), ("float4* __restrict__", "out"),
    ("const long long", "n4")), r"""
  VTL_GRID_LOOP(i, n4) {
    const uint2 a = x[i];
    float4 o;
    o.x = vtl_ld((T)(a.x & 0xffffu));
    o.y = vtl_ld((T)(a.x >> 16));
    o.z = vtl_ld((T)(a.y & 0xffffu));
    o.w = vtl_ld((T)(a.y >> 16));
    out[i] = o;
  }
""")


class CupyCasts:
    """``cast(x, dtype)``: ``x`` cast between float32 and float16/bfloat16 by
    :data:`TO_LOW`/:data:`FROM_LOW`, or ``None`` for a cast they do not do (other dtypes, a
    size not a multiple of four, non-contiguous or unaligned data: CuPy's ``astype``)."""

    _device_of = staticmethod(lambda a: a.device)

    def __init__(self, cupy: Any) -> None:
        self._cp = cupy
        self._k = _Kernels(cupy)
        self.launches = 0

    def __call__(self, x: Any, dtype: Any) -> Any | None:
        dt = np.dtype(dtype)
        src = x.dtype
        if src == _F32 and dt in _LOW:
            spec, low = TO_LOW, dt
        elif src in _LOW and dt == _F32:
            spec, low = FROM_LOW, src
        else:
            return None
        n = x.size
        if not n or not x.flags.c_contiguous or not aligned(x, per=4, nbytes=x.itemsize * 4):
            return None
        cp = self._cp
        with self._device_of(x):
            out = cp.empty(x.shape, dtype=dt)  # the pool's blocks: 256-byte aligned
            if not aligned(out, per=4, nbytes=dt.itemsize * 4):
                return None
            self._k.get(spec, low)((_blocks(n // 4),), (256,), (x, out, _I64(n // 4)))
            self.launches += 1
        return out
