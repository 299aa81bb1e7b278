"""The operators of :class:`vtl.Tensor` (the array API's arithmetic, bitwise, comparison,
reflected and in-place operators), declared in :class:`TensorOperators`, which
``Tensor`` inherits.

Each operator calls its namespace function (``t + u`` is ``vtl.add(t, u)``), so the
array-API object protocol and the functions share one implementation per op. A binary
operator returns ``NotImplemented`` for an operand that is not a Tensor, a Python scalar
or a NumPy scalar, so the other operand's reflected operator can try. Where the function
has an operator form (``vtl.add.operator``: the function itself, returning
``NotImplemented`` for such an operand instead of raising), the operator calls that.

The functions live in ``vtl._ops``, whose modules import ``Tensor``; this module cannot
import them, so :func:`bind` (called once by ``vtl/__init__``, after ``vtl._ops`` is
imported) binds them to this module's names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    import numpy as np

    from ._tensor import Tensor

#: what a binary operator takes besides a Tensor
Operand: TypeAlias = "Tensor | bool | int | float | complex | np.generic"


def _unbound(*args: Any) -> Any:
    raise RuntimeError("vtl is not fully imported: Tensor operators are not bound yet")


# The namespace functions (and operator forms, ``_op``) the operators call, bound by bind().
_add_op: Callable = _unbound
_subtract_op: Callable = _unbound
_multiply_op: Callable = _unbound
_divide_op: Callable = _unbound
_remainder_op: Callable = _unbound
_pow_op: Callable = _unbound
_matmul_op: Callable = _unbound
_bitwise_and_op: Callable = _unbound
_bitwise_or_op: Callable = _unbound
_bitwise_xor_op: Callable = _unbound
_equal_op: Callable = _unbound
_not_equal_op: Callable = _unbound
_less_op: Callable = _unbound
_less_equal_op: Callable = _unbound
_greater_op: Callable = _unbound
_greater_equal_op: Callable = _unbound
_add: Callable = _unbound
_subtract: Callable = _unbound
_multiply: Callable = _unbound
_divide: Callable = _unbound
_floor_divide: Callable = _unbound
_remainder: Callable = _unbound
_pow: Callable = _unbound
_matmul: Callable = _unbound
_bitwise_and: Callable = _unbound
_bitwise_or: Callable = _unbound
_bitwise_xor: Callable = _unbound
_bitwise_left_shift: Callable = _unbound
_bitwise_right_shift: Callable = _unbound
_negative: Callable = _unbound
_positive: Callable = _unbound
_abs: Callable = _unbound
_bitwise_invert: Callable = _unbound
#: ``vtl._ops._core.inplace``: ``t <op>= other`` through the out-of-place function
_inplace: Callable = _unbound
#: the operand types a binary operator takes (``vtl._ops._core._OPERAND_TYPES``)
_OPERAND_TYPES: tuple[type, ...] = ()


def bind() -> None:
    """Bind the functions the operators call (once, by ``vtl/__init__``)."""
    global _add_op, _subtract_op, _multiply_op, _divide_op, _remainder_op, _pow_op
    global _matmul_op, _bitwise_and_op, _bitwise_or_op, _bitwise_xor_op, _equal_op
    global _not_equal_op, _less_op, _less_equal_op, _greater_op, _greater_equal_op
    global _add, _subtract, _multiply, _divide, _floor_divide, _remainder, _pow, _matmul
    global _bitwise_and, _bitwise_or, _bitwise_xor, _bitwise_left_shift
    global _bitwise_right_shift, _negative, _positive, _abs, _bitwise_invert
    global _inplace, _OPERAND_TYPES
    from ._ops import _core
    from ._ops import elementwise as e
    from ._ops.linear_algebra import matmul

    _add, _add_op = e.add, e.add.operator
    _subtract, _subtract_op = e.subtract, e.subtract.operator
    _multiply, _multiply_op = e.multiply, e.multiply.operator
    _divide, _divide_op = e.divide, e.divide.operator
    _floor_divide = e.floor_divide  # no operator form: __floordiv__ checks the operand
    _remainder, _remainder_op = e.remainder, e.remainder.operator
    _pow, _pow_op = e.pow, e.pow.operator
    _matmul, _matmul_op = matmul, matmul.operator
    _bitwise_and, _bitwise_and_op = e.bitwise_and, e.bitwise_and.operator
    _bitwise_or, _bitwise_or_op = e.bitwise_or, e.bitwise_or.operator
    _bitwise_xor, _bitwise_xor_op = e.bitwise_xor, e.bitwise_xor.operator
    _bitwise_left_shift = e.bitwise_left_shift
    _bitwise_right_shift = e.bitwise_right_shift
    _equal_op, _not_equal_op = e.equal.operator, e.not_equal.operator
    _less_op, _less_equal_op = e.less.operator, e.less_equal.operator
    _greater_op, _greater_equal_op = e.greater.operator, e.greater_equal.operator
    _negative, _positive, _abs = e.negative, e.positive, e.abs
    _bitwise_invert = e.bitwise_invert
    _inplace = _core.inplace
    _OPERAND_TYPES = _core._OPERAND_TYPES


class TensorOperators:
    """The array API's operators of :class:`vtl.Tensor` (see the module docstring)."""

    __slots__ = ()

    # -- arithmetic -------------------------------------------------------------------
    def __add__(self, other: Operand, /) -> Tensor:
        """``self + other``: :func:`vtl.add`."""
        return _add_op(self, other)

    def __sub__(self, other: Operand, /) -> Tensor:
        """``self - other``: :func:`vtl.subtract`."""
        return _subtract_op(self, other)

    def __mul__(self, other: Operand, /) -> Tensor:
        """``self * other``: :func:`vtl.multiply`."""
        return _multiply_op(self, other)

    def __truediv__(self, other: Operand, /) -> Tensor:
        """``self / other``: :func:`vtl.divide`."""
        return _divide_op(self, other)

    def __floordiv__(self, other: Operand, /) -> Tensor:
        """``self // other``: :func:`vtl.floor_divide`."""
        if not isinstance(other, _OPERAND_TYPES):
            return NotImplemented
        return _floor_divide(self, other)

    def __mod__(self, other: Operand, /) -> Tensor:
        """``self % other``: :func:`vtl.remainder`."""
        return _remainder_op(self, other)

    def __pow__(self, other: Operand, /) -> Tensor:
        """``self ** other``: :func:`vtl.pow`."""
        return _pow_op(self, other)

    def __matmul__(self, other: Tensor, /) -> Tensor:
        """``self @ other``: :func:`vtl.matmul`."""
        return _matmul_op(self, other)

    # -- bitwise ----------------------------------------------------------------------
    def __and__(self, other: Operand, /) -> Tensor:
        """``self & other``: :func:`vtl.bitwise_and`."""
        return _bitwise_and_op(self, other)

    def __or__(self, other: Operand, /) -> Tensor:
        """``self | other``: :func:`vtl.bitwise_or`."""
        return _bitwise_or_op(self, other)

    def __xor__(self, other: Operand, /) -> Tensor:
        """``self ^ other``: :func:`vtl.bitwise_xor`."""
        return _bitwise_xor_op(self, other)

    def __lshift__(self, other: Operand, /) -> Tensor:
        """``self << other``: :func:`vtl.bitwise_left_shift`."""
        if not isinstance(other, _OPERAND_TYPES):
            return NotImplemented
        return _bitwise_left_shift(self, other)

    def __rshift__(self, other: Operand, /) -> Tensor:
        """``self >> other``: :func:`vtl.bitwise_right_shift`."""
        if not isinstance(other, _OPERAND_TYPES):
            return NotImplemented
        return _bitwise_right_shift(self, other)

    # -- comparisons (elementwise: a boolean tensor) ----------------------------------
    def __eq__(self, other: object, /) -> Tensor:  # type: ignore[override]
        """``self == other``: :func:`vtl.equal`."""
        return _equal_op(self, other)

    def __ne__(self, other: object, /) -> Tensor:  # type: ignore[override]
        """``self != other``: :func:`vtl.not_equal`."""
        return _not_equal_op(self, other)

    def __lt__(self, other: Operand, /) -> Tensor:
        """``self < other``: :func:`vtl.less`."""
        return _less_op(self, other)

    def __le__(self, other: Operand, /) -> Tensor:
        """``self <= other``: :func:`vtl.less_equal`."""
        return _less_equal_op(self, other)

    def __gt__(self, other: Operand, /) -> Tensor:
        """``self > other``: :func:`vtl.greater`."""
        return _greater_op(self, other)

    def __ge__(self, other: Operand, /) -> Tensor:
        """``self >= other``: :func:`vtl.greater_equal`."""
        return _greater_equal_op(self, other)

    # tensors hash by identity (== is elementwise; defining __eq__ would drop __hash__)
    __hash__ = object.__hash__

    # -- unary ------------------------------------------------------------------------
    def __neg__(self, /) -> Tensor:
        """``-self``: :func:`vtl.negative`."""
        return _negative(self)

    def __pos__(self, /) -> Tensor:
        """``+self``: :func:`vtl.positive`."""
        return _positive(self)

    def __abs__(self, /) -> Tensor:
        """``abs(self)``: :func:`vtl.abs`."""
        return _abs(self)

    def __invert__(self, /) -> Tensor:
        """``~self``: :func:`vtl.bitwise_invert`."""
        return _bitwise_invert(self)

    # -- reflected (``other <op> self`` where ``other`` is not a Tensor) -------------
    def __radd__(self, other: Operand, /) -> Tensor:
        """``other + self``: :func:`vtl.add`."""
        if not isinstance(other, _OPERAND_TYPES):
            return NotImplemented
        return _add(other, self)

    def __rsub__(self, other: Operand, /) -> Tensor:
        """``other - self``: :func:`vtl.subtract`."""
        if not isinstance(other, _OPERAND_TYPES):
            return NotImplemented
        return _subtract(other, self)

    def __rmul__(self, other: Operand, /) -> Tensor:
        """``other * self``: :func:`vtl.multiply`."""
        if not isinstance(other, _OPERAND_TYPES):
            return NotImplemented
        return _multiply(other, self)

    def __rtruediv__(self, other: Operand, /) -> Tensor:
        """``other / self``: :func:`vtl.divide`."""
        if not isinstance(other, _OPERAND_TYPES):
            return NotImplemented
        return _divide(other, self)

    def __rfloordiv__(self, other: Operand, /) -> Tensor:
        """``other // self``: :func:`vtl.floor_divide`."""
        if not isinstance(other, _OPERAND_TYPES):
            return NotImplemented
        return _floor_divide(other, self)

    def __rmod__(self, other: Operand, /) -> Tensor:
        """``other % self``: :func:`vtl.remainder`."""
        if not isinstance(other, _OPERAND_TYPES):
            return NotImplemented
        return _remainder(other, self)

    def __rpow__(self, other: Operand, /) -> Tensor:
        """``other ** self``: :func:`vtl.pow`."""
        if not isinstance(other, _OPERAND_TYPES):
            return NotImplemented
        return _pow(other, self)

    def __rmatmul__(self, other: Operand, /) -> Tensor:
        """``other @ self``: :func:`vtl.matmul`."""
        if not isinstance(other, _OPERAND_TYPES):
            return NotImplemented
        return _matmul(other, self)

    def __rand__(self, other: Operand, /) -> Tensor:
        """``other & self``: :func:`vtl.bitwise_and`."""
        if not isinstance(other, _OPERAND_TYPES):
            return NotImplemented
        return _bitwise_and(other, self)

    def __ror__(self, other: Operand, /) -> Tensor:
        """``other | self``: :func:`vtl.bitwise_or`."""
        if not isinstance(other, _OPERAND_TYPES):
            return NotImplemented
        return _bitwise_or(other, self)

    def __rxor__(self, other: Operand, /) -> Tensor:
        """``other ^ self``: :func:`vtl.bitwise_xor`."""
        if not isinstance(other, _OPERAND_TYPES):
            return NotImplemented
        return _bitwise_xor(other, self)

    def __rlshift__(self, other: Operand, /) -> Tensor:
        """``other << self``: :func:`vtl.bitwise_left_shift`."""
        if not isinstance(other, _OPERAND_TYPES):
            return NotImplemented
        return _bitwise_left_shift(other, self)

    def __rrshift__(self, other: Operand, /) -> Tensor:
        """``other >> self``: :func:`vtl.bitwise_right_shift`."""
        if not isinstance(other, _OPERAND_TYPES):
            return NotImplemented
        return _bitwise_right_shift(other, self)

    # -- in place: the result is written into self's storage; the dtype and shape must
    # stay, a leaf that requires grad is refused, a recorded op rebases self's history
    def __iadd__(self, other: Operand, /) -> Tensor:
        """``self += other``: :func:`vtl.add` in place."""
        return _inplace(self, other, _add, "add")

    def __isub__(self, other: Operand, /) -> Tensor:
        """``self -= other``: :func:`vtl.subtract` in place."""
        return _inplace(self, other, _subtract, "subtract")

    def __imul__(self, other: Operand, /) -> Tensor:
        """``self *= other``: :func:`vtl.multiply` in place."""
        return _inplace(self, other, _multiply, "multiply")

    def __itruediv__(self, other: Operand, /) -> Tensor:
        """``self /= other``: :func:`vtl.divide` in place."""
        return _inplace(self, other, _divide, "divide")

    def __ifloordiv__(self, other: Operand, /) -> Tensor:
        """``self //= other``: :func:`vtl.floor_divide` in place."""
        return _inplace(self, other, _floor_divide, "floor_divide")

    def __imod__(self, other: Operand, /) -> Tensor:
        """``self %= other``: :func:`vtl.remainder` in place."""
        return _inplace(self, other, _remainder, "remainder")

    def __ipow__(self, other: Operand, /) -> Tensor:
        """``self **= other``: :func:`vtl.pow` in place."""
        return _inplace(self, other, _pow, "pow")

    def __imatmul__(self, other: Tensor, /) -> Tensor:
        """``self @= other``: :func:`vtl.matmul` in place (the shape must stay)."""
        return _inplace(self, other, _matmul, "matmul")

    def __iand__(self, other: Operand, /) -> Tensor:
        """``self &= other``: :func:`vtl.bitwise_and` in place."""
        return _inplace(self, other, _bitwise_and, "bitwise_and")

    def __ior__(self, other: Operand, /) -> Tensor:
        """``self |= other``: :func:`vtl.bitwise_or` in place."""
        return _inplace(self, other, _bitwise_or, "bitwise_or")

    def __ixor__(self, other: Operand, /) -> Tensor:
        """``self ^= other``: :func:`vtl.bitwise_xor` in place."""
        return _inplace(self, other, _bitwise_xor, "bitwise_xor")

    def __ilshift__(self, other: Operand, /) -> Tensor:
        """``self <<= other``: :func:`vtl.bitwise_left_shift` in place."""
        return _inplace(self, other, _bitwise_left_shift, "bitwise_left_shift")

    def __irshift__(self, other: Operand, /) -> Tensor:
        """``self >>= other``: :func:`vtl.bitwise_right_shift` in place."""
        return _inplace(self, other, _bitwise_right_shift, "bitwise_right_shift")
