"""Operators and methods of :class:`WgpuArray` (installed at import)."""

from __future__ import annotations

from ._array import WgpuArray, copy_into
from ._elementwise import binary, unary
from ._indexing import getitem, setitem
from ._linalg import matmul

_BINARY = {
    "add": "add", "sub": "subtract", "mul": "multiply", "truediv": "divide",
    "floordiv": "floor_divide", "mod": "remainder", "pow": "pow", "and": "bitwise_and",
    "or": "bitwise_or", "xor": "bitwise_xor", "lshift": "bitwise_left_shift",
    "rshift": "bitwise_right_shift",
}
_COMPARE = {"eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal",
            "gt": "greater", "ge": "greater_equal"}
_OPERANDS = (WgpuArray, bool, int, float, complex)


def _fwd(name: str):
    def op(self, other):
        if not isinstance(other, _OPERANDS):
            return NotImplemented
        return binary(name, self, other)

    return op


def _rev(name: str):
    def op(self, other):
        if not isinstance(other, _OPERANDS):
            return NotImplemented
        return binary(name, other, self)

    return op


def _inplace(name: str):
    def op(self, other):
        if not isinstance(other, _OPERANDS):
            return NotImplemented
        res = binary(name, self, other)
        if res.shape != self.shape:
            raise ValueError(f"in-place {name} would change the shape {self.shape} to {res.shape}")
        if res.dtype != self.dtype:
            raise TypeError(f"in-place {name} would change the dtype {self.dtype} to {res.dtype}")
        copy_into(res, self)
        return self

    return op


def _unary(name: str):
    def op(self):
        return unary(name, self)

    return op


def _imatmul(self, other):
    res = matmul(self, other)
    if res.shape != self.shape:
        raise ValueError("in-place matmul would change the shape")
    copy_into(res, self)
    return self


def install() -> None:
    for d, name in _BINARY.items():
        setattr(WgpuArray, f"__{d}__", _fwd(name))
        setattr(WgpuArray, f"__r{d}__", _rev(name))
        setattr(WgpuArray, f"__i{d}__", _inplace(name))
    for d, name in _COMPARE.items():
        setattr(WgpuArray, f"__{d}__", _fwd(name))
    for d, name in {"neg": "negative", "pos": "positive", "abs": "abs",
                    "invert": "bitwise_invert"}.items():
        setattr(WgpuArray, f"__{d}__", _unary(name))
    WgpuArray.__matmul__ = lambda self, other: (
        matmul(self, other) if isinstance(other, WgpuArray) else NotImplemented)
    WgpuArray.__rmatmul__ = lambda self, other: (
        matmul(other, self) if isinstance(other, WgpuArray) else NotImplemented)
    WgpuArray.__imatmul__ = _imatmul
    WgpuArray.__getitem__ = getitem
    WgpuArray.__setitem__ = setitem
    WgpuArray.__hash__ = None
