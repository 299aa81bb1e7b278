"""Data type functions: astype, can_cast, finfo, iinfo, isdtype, result_type."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._tensor import Tensor
from ..backends import _dtypes
from ..backends._dtypes import kind as _dkind
from ..backends._dtypes import to_dtype
from ._core import needs_grad, new, record, tensor_arg

__all__ = ["astype", "can_cast", "finfo", "iinfo", "isdtype", "result_type"]


def astype(x: Tensor, dtype: Any, /, *, copy: bool = True, device: Any = None) -> Tensor:
    """Cast ``x`` to ``dtype`` (optionally onto ``device``); differentiable between
    floating dtypes.

    As the standard says, a complex tensor cannot be cast to a real or integer
    dtype (``TypeError``): take ``real(x)`` or ``imag(x)`` first. Casting it to
    ``bool`` is allowed.
    """
    x = tensor_arg(x, "astype")
    dt = to_dtype(dtype)
    if _dkind(x._data.dtype) == "c" and _dkind(dt) not in "cb":
        raise TypeError(
            f"astype(): cannot cast complex {x.dtype} to {dt}; use real(x) or imag(x) "
            "to choose the component"
        )
    if device is not None:
        from .transfer import to_device

        x = to_device(x, device)
    dev = x._device
    dev.backend.check_dtype(dt, dev.index)
    if not copy and x._data.dtype == dt:
        return x
    out = dev.xp.astype(x._data, dt, copy=copy)
    if needs_grad(x) and _dkind(dt) in "fc":
        src = x._data.dtype

        def vjp(g: Tensor, _: Any) -> Tensor:
            if _dkind(g._data.dtype) == "c" and _dkind(src) != "c":
                from .elementwise import real

                g = real(g)
            return astype(g, src)

        return record(out, dev, "AsTypeBackward", (x,), vjp)
    return new(out, dev)


def _dtype_of(obj: Any) -> Any:
    if isinstance(obj, Tensor):
        return obj._data.dtype
    return to_dtype(obj)


def can_cast(from_: Any, to: Any, /) -> bool:
    """Whether ``from_`` (a dtype or tensor) can be cast to ``to`` by promotion rules.

    Same-kind pairs follow the standard's promotion table; across kinds NumPy's
    "safe" casting decides (e.g. int16 -> float32 is allowed). For a tensor,
    ``to`` must also be supported on the tensor's device.
    """
    to = to_dtype(to)
    if isinstance(from_, Tensor):
        dev = from_._device
        if to.name not in dev.backend.dtypes(dev.index):
            return False
    return bool(np.can_cast(_dtype_of(from_), to, casting="safe"))


class finfo_object:
    """Machine limits of a floating-point dtype (``bits eps max min smallest_normal dtype``)."""

    def __init__(self, dtype: np.dtype) -> None:
        fi = np.finfo(dtype)
        self.bits = int(fi.bits)
        self.eps = float(fi.eps)
        self.max = float(fi.max)
        self.min = float(fi.min)
        self.smallest_normal = float(fi.smallest_normal)
        self.dtype = _dtypes.to_dtype(fi.dtype)

    def __repr__(self) -> str:
        return (f"finfo(bits={self.bits}, eps={self.eps}, max={self.max}, min={self.min}, "
                f"smallest_normal={self.smallest_normal}, dtype={self.dtype})")


class iinfo_object:
    """Limits of an integer dtype (``bits max min dtype``)."""

    def __init__(self, dtype: np.dtype) -> None:
        ii = np.iinfo(dtype)
        self.bits = int(ii.bits)
        self.max = int(ii.max)
        self.min = int(ii.min)
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"iinfo(bits={self.bits}, max={self.max}, min={self.min}, dtype={self.dtype})"


def finfo(type: Any, /) -> finfo_object:  # noqa: A002 - the standard's parameter name
    """Limits of a floating dtype (or of a floating tensor's dtype)."""
    dt = _dtype_of(type)
    if _dkind(dt) not in "fc":
        raise TypeError(f"finfo() needs a floating-point dtype, got {dt}")
    return finfo_object(dt)


def iinfo(type: Any, /) -> iinfo_object:  # noqa: A002
    """Limits of an integer dtype (or of an integer tensor's dtype)."""
    dt = _dtype_of(type)
    if _dkind(dt) not in "iu":
        raise TypeError(f"iinfo() needs an integer dtype, got {dt}")
    return iinfo_object(dt)


def isdtype(dtype: Any, kind: Any) -> bool:
    """Whether ``dtype`` is of ``kind`` (a dtype, a kind name, or a tuple of those)."""
    dt = to_dtype(dtype)
    if isinstance(kind, tuple):
        results = [isdtype(dt, k) for k in kind]  # every entry is validated
        return any(results)
    if isinstance(kind, str):
        try:
            return dt in _dtypes.KINDS[kind]
        except KeyError:
            raise ValueError(
                f"unknown dtype kind {kind!r}: expected one of {', '.join(_dtypes.KINDS)}"
            ) from None
    return dt == to_dtype(kind)


def result_type(*arrays_and_dtypes: Any) -> Any:
    """The dtype that type promotion gives for tensors, dtypes and scalars.

    Same-kind pairs follow the standard's table; mixed kinds (which the
    standard leaves unspecified) follow NumPy, as the backends' operators do.
    Python scalars are weak: they take the dtype of the tensors within a kind
    (``float32`` tensor and ``1.0``: ``float32``). NumPy scalars are not: as in
    NumPy, ``numpy.float64(1)`` counts as a 0-d array of ``float64`` (``float32``
    tensor and ``numpy.float64(1)``: ``float64``). Binary operators, the binary
    elementwise functions, ``where``, ``searchsorted`` and ``isin`` promote
    their operands by the same rule.
    """
    if not arrays_and_dtypes:
        raise ValueError("result_type() needs at least one argument")
    dtypes = []
    scalars = []
    for a in arrays_and_dtypes:
        if isinstance(a, Tensor):
            dtypes.append(a._data.dtype)
        elif isinstance(a, np.generic):  # first: np.float64 is a float subclass
            dtypes.append(to_dtype(a.dtype))
        elif isinstance(a, (bool, int, float, complex)):
            scalars.append(a)
        else:
            dtypes.append(to_dtype(a))
    if not dtypes:
        raise ValueError("result_type() needs at least one tensor or dtype besides scalars")
    res = dtypes[0]
    for d in dtypes[1:]:
        res = np.result_type(res, d)
    for s in scalars:
        res = _scalar_promote(res, s)
    return to_dtype(res)


def _scalar_promote(dt: np.dtype, s: Any) -> np.dtype:
    # Python scalars are "weak": they adopt the tensor's dtype within its kind.
    if isinstance(s, bool):
        return dt
    if isinstance(s, int):
        return dt if _dkind(dt) in "iufc" else np.dtype(np.int64)
    if isinstance(s, float):
        return dt if _dkind(dt) in "fc" else np.dtype(np.float64)
    return dt if _dkind(dt) == "c" else np.result_type(dt, np.complex64)
