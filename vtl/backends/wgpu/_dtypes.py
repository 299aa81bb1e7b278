"""Dtypes of the wgpu library and how each is stored on the device.

Dtypes are NumPy dtype objects. Storage in WGSL buffers:

========================  ===========  =========================================
dtype                     WGSL type    note
========================  ===========  =========================================
bool                      u32          0 or 1
int8, int16, int32        i32          8/16-bit values are widened; results wrap
uint8, uint16, uint32     u32          to the narrow range on every store
int64 / uint64            i64 / u64    needs ``shader-int64``
float16                   f16          needs ``shader-f16``
bfloat16                  f32          a float32 word whose low 16 bits are zero:
                                       results round to bfloat16 on every store
float32                   f32
float64                   f64          needs ``shader-f64``
complex64                 vec2<f32>    (real, imag) pairs, as NumPy lays them out
complex128                vec2<f64>    needs ``shader-f64``
========================  ===========  =========================================

bfloat16 (``ml_dtypes.bfloat16``) is widened like the small integers: kernels compute
in float32 and round to the nearest bfloat16 (ties to even) when they store a result
(``WRAP``), so every kernel that handles float32 handles it, at float32's memory cost.

A complex array's real and imaginary parts are float views of its storage
(:func:`part`): strides and offset doubled, the imaginary part one element on.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

bool_ = np.dtype("bool")
int8, int16, int32, int64 = (np.dtype(n) for n in ("int8", "int16", "int32", "int64"))
uint8, uint16, uint32, uint64 = (np.dtype(n) for n in ("uint8", "uint16", "uint32", "uint64"))
float16, float32, float64 = (np.dtype(n) for n in ("float16", "float32", "float64"))
bfloat16 = np.dtype(ml_dtypes.bfloat16)
complex64, complex128 = np.dtype("complex64"), np.dtype("complex128")

ALL = (bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, bfloat16,
       float32, float64, complex64, complex128)
#: complex dtype -> the float dtype of its parts, and back
REAL_OF = {complex64: float32, complex128: float64}
COMPLEX_OF = {float32: complex64, float64: complex128}

#: dtype -> (WGSL storage type, host storage dtype)
STORAGE: dict[np.dtype, tuple[str, np.dtype]] = {
    bool_: ("u32", uint32), int8: ("i32", int32), int16: ("i32", int32), int32: ("i32", int32),
    uint8: ("u32", uint32), uint16: ("u32", uint32), uint32: ("u32", uint32),
    int64: ("i64", int64), uint64: ("u64", uint64),
    float16: ("f16", float16), bfloat16: ("f32", float32), float32: ("f32", float32),
    float64: ("f64", float64),
    complex64: ("vec2<f32>", complex64), complex128: ("vec2<f64>", complex128),
}
NAME: dict[np.dtype, str] = {d: d.name for d in ALL}
#: dtype -> device feature it needs
FEATURE: dict[np.dtype, str] = {
    float16: "shader-f16", float64: "shader-f64", int64: "shader-int64", uint64: "shader-int64",
    complex128: "shader-f64",
}
#: WGSL expression that wraps a widened value ``v`` to the narrow range on store
WRAP: dict[np.dtype, str] = {
    int8: "(v << 24u) >> 24u", int16: "(v << 16u) >> 16u",
    uint8: "v & 0xffu", uint16: "v & 0xffffu",
    # round to nearest even on the upper 16 bits; nan stays nan
    bfloat16: "select(bitcast<f32>((bitcast<u32>(v) + 0x7fffu + ((bitcast<u32>(v) >> 16u) & 1u))"
              " & 0xffff0000u), v, (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u)",
}


#: dtype -> name (``np.dtype.name`` is computed on each access)
NAME = {dt: dt.name for dt in ALL}


def wgsl(dt: np.dtype) -> str:
    return STORAGE[dt][0]


def compute_dtype(dt: np.dtype) -> np.dtype:
    """The dtype kernels compute a float ``dt`` in: float32 for float16 and bfloat16, else
    ``dt`` itself."""
    return float32 if dt in (float16, bfloat16) else dt


def itemsize(dt: np.dtype) -> int:
    """Bytes per element in device storage."""
    return STORAGE[dt][1].itemsize


def kind(dt: np.dtype) -> str:
    """NumPy's ``dt.kind``, except ``"f"`` for bfloat16 (which NumPy calls ``"V"``)."""
    k = dt.kind
    if k == "V" and dt.name == "bfloat16":
        return "f"
    return k


def is_float(dt: np.dtype) -> bool:
    return kind(dt) == "f"


def is_int(dt: np.dtype) -> bool:
    return dt.kind in "iu"


def is_complex(dt: np.dtype) -> bool:
    return dt.kind == "c"


def supported(features: frozenset) -> dict[str, np.dtype]:
    """Dtypes usable with ``features`` (name -> dtype)."""
    return {d.name: d for d in ALL if FEATURE.get(d) is None or FEATURE[d] in features}


def check(dt: np.dtype, features: frozenset) -> None:
    """``TypeError`` naming the missing feature when ``dt`` cannot live on the device."""
    if dt not in STORAGE:
        raise TypeError(
            f"dtype {dt} is not supported by the wgpu backend "
            f"(supported: {', '.join(d.name for d in ALL)})"
        )
    feat = FEATURE.get(dt)
    if feat is not None and feat not in features:
        raise TypeError(
            f"dtype {dt} needs the adapter feature {feat!r}, which this adapter lacks"
        )


def result_type(a: np.dtype, b: np.dtype) -> np.dtype:
    """Array-array promotion (the standard's table; mixed kinds as NumPy)."""
    if a == b:
        return a
    return np.result_type(a, b)
