"""The 13 dtypes of the array API standard, and the extension dtypes float16 and
bfloat16.

vtl's dtype objects are NumPy's ``numpy.dtype`` instances: NumPy is always
installed, CuPy uses the same objects, and the wgpu backend adopts them too, so
a dtype never needs translating between backends (``t.dtype == numpy.float32``
holds on every device). ``bfloat16`` is ``ml_dtypes.bfloat16``'s NumPy dtype (the
package JAX and CuPy use); NumPy reports its ``kind`` as ``"V"``, so code that
sorts dtypes by kind uses :func:`kind`, which calls it ``"f"``.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

bool = np.dtype("bool")  # noqa: A001 - the standard's name
int8 = np.dtype("int8")
int16 = np.dtype("int16")
int32 = np.dtype("int32")
int64 = np.dtype("int64")
uint8 = np.dtype("uint8")
uint16 = np.dtype("uint16")
uint32 = np.dtype("uint32")
uint64 = np.dtype("uint64")
float16 = np.dtype("float16")
bfloat16 = np.dtype(ml_dtypes.bfloat16)
float32 = np.dtype("float32")
float64 = np.dtype("float64")
complex64 = np.dtype("complex64")
complex128 = np.dtype("complex128")

ALL_DTYPES: dict[str, np.dtype] = {
    d.name: d
    for d in (bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
              float16, bfloat16, float32, float64, complex64, complex128)
}

#: The 13 dtypes of the standard (without the extension dtypes float16 and bfloat16)
STANDARD_DTYPES: dict[str, np.dtype] = {
    n: d for n, d in ALL_DTYPES.items() if n not in ("float16", "bfloat16")
}
#: The low-precision floating dtypes (autocast's targets)
LOW_FLOATING = frozenset({float16, bfloat16})

_DTYPE_SET = frozenset(ALL_DTYPES.values())
_DTYPE_CLASSES = frozenset(type(d) for d in ALL_DTYPES.values())

SIGNED = frozenset({int8, int16, int32, int64})
UNSIGNED = frozenset({uint8, uint16, uint32, uint64})
INTEGRAL = SIGNED | UNSIGNED
REAL_FLOATING = frozenset({float16, bfloat16, float32, float64})
COMPLEX_FLOATING = frozenset({complex64, complex128})
FLOATING = REAL_FLOATING | COMPLEX_FLOATING
NUMERIC = INTEGRAL | FLOATING

KINDS: dict[str, frozenset] = {
    "bool": frozenset({bool}),
    "signed integer": SIGNED,
    "unsigned integer": UNSIGNED,
    "integral": INTEGRAL,
    "real floating": REAL_FLOATING,
    "complex floating": COMPLEX_FLOATING,
    "numeric": NUMERIC,
}


def kind(dt: np.dtype) -> str:
    """NumPy's ``dt.kind``, except ``"f"`` for bfloat16 (which NumPy calls ``"V"``)."""
    k = dt.kind
    if k == "V" and dt.name == "bfloat16":
        return "f"
    return k


def to_dtype(obj: object) -> np.dtype:
    """Normalise a dtype-like (``vtl.float32``, ``numpy.float32``, ``"float32"``,
    ``ml_dtypes.bfloat16``, ``"bfloat16"``).

    Raises ``TypeError`` for anything that is not one of vtl's 15 dtypes.
    """
    if obj.__class__ in _DTYPE_CLASSES and obj in _DTYPE_SET:
        return obj  # type: ignore[return-value]
    if isinstance(obj, np.dtype):
        dt = obj
    else:
        try:
            dt = np.dtype(obj)  # type: ignore[call-overload]
        except TypeError:
            raise TypeError(
                f"expected a dtype such as vtl.float32, got {obj!r}"
            ) from None
    if dt.name not in ALL_DTYPES or dt.byteorder == ">":
        raise TypeError(
            f"unsupported dtype {dt}: vtl supports {', '.join(ALL_DTYPES)}"
        )
    return ALL_DTYPES[dt.name]
