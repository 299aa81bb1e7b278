"""``__array_namespace_info__`` and the data-type functions."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _dtypes as D
from . import _runtime
from ._array import DEVICE, WgpuArray

_KINDS = {
    "bool": lambda d: d == D.bool_,
    "signed integer": lambda d: D.kind(d) == "i",
    "unsigned integer": lambda d: D.kind(d) == "u",
    "integral": lambda d: D.kind(d) in "iu",
    "real floating": lambda d: D.kind(d) == "f",
    "complex floating": lambda d: D.kind(d) == "c",
    "numeric": lambda d: D.kind(d) in "iufc",
}


class Info:
    """What this device supports (dtypes follow the adapter's features)."""

    def capabilities(self) -> dict[str, Any]:
        """The standard's capabilities. Data-dependent shapes cost one readback: the
        ``unique_*`` functions (sorted on the device), ``nonzero`` and boolean masks read
        back their result size. vtl adds ``"fft device lengths"``: the FFTs run on the
        device for powers of two, other lengths through host NumPy; and ``"linalg device
        functions"``: the solvers that run on the device, and up to which size."""
        return {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": 64,
                "fft device lengths": "powers of two (other lengths: host NumPy)",
                "linalg device functions": "solve, inv, det, slogdet of float matrices up to "
                                           "64x64 (larger ones and the decompositions: host "
                                           "NumPy)"}

    def default_device(self):
        return DEVICE

    def devices(self) -> list:
        return [DEVICE]

    def default_dtypes(self, *, device=None) -> dict[str, Any]:
        from ._elementwise import default_float, default_int

        return {"real floating": default_float(), "complex floating": D.COMPLEX_OF[default_float()],
                "integral": default_int(), "indexing": default_int()}

    def dtypes(self, *, device=None, kind=None) -> dict[str, np.dtype]:
        sup = D.supported(_runtime.get().features)
        if kind is None:
            return sup
        kinds = kind if isinstance(kind, tuple) else (kind,)
        out = {}
        for k in kinds:
            if isinstance(k, str):
                if k not in _KINDS:
                    raise ValueError(f"unknown dtype kind {k!r}")
                out.update({n: d for n, d in sup.items() if _KINDS[k](d)})
            else:
                d = np.dtype(k)
                if d.name in sup:
                    out[d.name] = d
        return out


_INFO = Info()


def __array_namespace_info__() -> Info:
    return _INFO


def _dt(x) -> np.dtype:
    return x.dtype if isinstance(x, WgpuArray) else np.dtype(x)


def result_type(*arrays_and_dtypes) -> np.dtype:
    dts = [_dt(a) for a in arrays_and_dtypes if not isinstance(a, (bool, int, float, complex))]
    scalars = [a for a in arrays_and_dtypes if isinstance(a, (bool, int, float, complex))]
    if not dts:
        raise TypeError("result_type() needs at least one array or dtype")
    dt = dts[0]
    for d in dts[1:]:
        dt = D.result_type(dt, d)
    for s in scalars:
        from ._elementwise import _scalar_dtype

        dt = _scalar_dtype(s, dt, "result_type")
    return dt


def can_cast(from_, to, /) -> bool:
    return bool(np.can_cast(_dt(from_), np.dtype(to), casting="safe"))


class finfo_object:
    """Limits of a floating dtype, as Python numbers (the standard's ``finfo`` fields)."""

    def __init__(self, dt: np.dtype) -> None:
        f = np.finfo(dt)
        self.bits, self.dtype = int(f.bits), f.dtype
        self.eps, self.max, self.min = float(f.eps), float(f.max), float(f.min)
        self.smallest_normal = float(f.smallest_normal)

    def __repr__(self) -> str:
        return (f"finfo(bits={self.bits}, eps={self.eps}, max={self.max}, min={self.min}, "
                f"smallest_normal={self.smallest_normal}, dtype={self.dtype})")


def finfo(type, /):
    return finfo_object(_dt(type))


def iinfo(type, /):
    return np.iinfo(_dt(type))


def isdtype(dtype, kind) -> bool:
    dtype = np.dtype(dtype)
    if isinstance(kind, tuple):
        return any(isdtype(dtype, k) for k in kind)
    if isinstance(kind, str):
        if kind not in _KINDS:
            raise ValueError(f"unknown dtype kind {kind!r}")
        return bool(_KINDS[kind](dtype))
    return dtype == np.dtype(kind)
