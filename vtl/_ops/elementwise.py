"""Elementwise functions of the array API standard, with their VJP rules.

Gradients follow PyTorch's convention for complex inputs (the conjugate
Wirtinger derivative), so each rule multiplies by the *conjugate* of the
local derivative; for real tensors ``conj`` is the identity.
"""

from __future__ import annotations

from typing import Any

from .._tensor import Tensor
from ._core import binary_operands, needs_grad, new, record, sum_to, tensor_arg

__all__ = [
    "add", "subtract", "multiply", "divide", "negative", "positive", "exp", "log",
    "real", "conj",
]


def _c(t: Tensor) -> Tensor:
    """conj for complex tensors, identity otherwise (cheap for the real case)."""
    return conj(t) if t._data.dtype.kind == "c" else t


# -- arithmetic ---------------------------------------------------------------
def add(x1: Tensor | complex, x2: Tensor | complex, /) -> Tensor:
    """Elementwise ``x1 + x2`` with broadcasting."""
    dev, a, b = binary_operands(x1, x2, "add")
    out = dev.xp.add(a, b)
    if needs_grad(x1, x2):
        return record(out, dev, "AddBackward", (x1, x2), lambda g, _: (
            sum_to(g, x1) if isinstance(x1, Tensor) and x1._requires_grad else None,
            sum_to(g, x2) if isinstance(x2, Tensor) and x2._requires_grad else None,
        ))
    return new(out, dev)


def subtract(x1: Tensor | complex, x2: Tensor | complex, /) -> Tensor:
    """Elementwise ``x1 - x2`` with broadcasting."""
    dev, a, b = binary_operands(x1, x2, "subtract")
    out = dev.xp.subtract(a, b)
    if needs_grad(x1, x2):
        return record(out, dev, "SubBackward", (x1, x2), lambda g, _: (
            sum_to(g, x1) if isinstance(x1, Tensor) and x1._requires_grad else None,
            sum_to(negative(g), x2) if isinstance(x2, Tensor) and x2._requires_grad else None,
        ))
    return new(out, dev)


def multiply(x1: Tensor | complex, x2: Tensor | complex, /) -> Tensor:
    """Elementwise ``x1 * x2`` with broadcasting."""
    dev, a, b = binary_operands(x1, x2, "multiply")
    out = dev.xp.multiply(a, b)
    if needs_grad(x1, x2):
        saved = tuple(x for x in (x1, x2) if isinstance(x, Tensor))
        return record(out, dev, "MulBackward", (x1, x2), lambda g, _: (
            sum_to(multiply(g, _cs(x2)), x1)
            if isinstance(x1, Tensor) and x1._requires_grad else None,
            sum_to(multiply(g, _cs(x1)), x2)
            if isinstance(x2, Tensor) and x2._requires_grad else None,
        ), saved=saved)
    return new(out, dev)


def divide(x1: Tensor | complex, x2: Tensor | complex, /) -> Tensor:
    """Elementwise true division ``x1 / x2`` with broadcasting."""
    dev, a, b = binary_operands(x1, x2, "divide")
    out = dev.xp.divide(a, b)
    if needs_grad(x1, x2):
        saved = tuple(x for x in (x1, x2) if isinstance(x, Tensor))

        def vjp(g: Tensor, _: Any) -> tuple:
            g1 = g2 = None
            q = divide(g, _cs(x2))
            if isinstance(x1, Tensor) and x1._requires_grad:
                g1 = sum_to(q, x1)
            if isinstance(x2, Tensor) and x2._requires_grad:
                g2 = sum_to(negative(multiply(q, _cs(divide(x1, x2)))), x2)
            return g1, g2

        return record(out, dev, "DivBackward", (x1, x2), vjp, saved=saved)
    return new(out, dev)


def _cs(x: Tensor | complex) -> Tensor | complex:
    """Conjugate of a tensor or Python scalar operand."""
    if isinstance(x, Tensor):
        return _c(x)
    return x.conjugate() if isinstance(x, complex) else x


def negative(x: Tensor, /) -> Tensor:
    """Elementwise ``-x``."""
    x = tensor_arg(x, "negative")
    dev = x._device
    out = dev.xp.negative(x._data)
    if needs_grad(x):
        return record(out, dev, "NegBackward", (x,), lambda g, _: negative(g))
    return new(out, dev)


def positive(x: Tensor, /) -> Tensor:
    """Elementwise ``+x`` (a copy)."""
    x = tensor_arg(x, "positive")
    dev = x._device
    out = dev.xp.positive(x._data)
    if needs_grad(x):
        return record(out, dev, "PosBackward", (x,), lambda g, _: g)
    return new(out, dev)


# -- exponentials and logarithms -----------------------------------------------
def exp(x: Tensor, /) -> Tensor:
    """Elementwise ``e**x``."""
    x = tensor_arg(x, "exp")
    dev = x._device
    out = dev.xp.exp(x._data)
    if needs_grad(x):
        return record(out, dev, "ExpBackward", (x,), lambda g, out: multiply(g, _c(out)),
                      save_output=True)
    return new(out, dev)


def log(x: Tensor, /) -> Tensor:
    """Elementwise natural logarithm."""
    x = tensor_arg(x, "log")
    dev = x._device
    out = dev.xp.log(x._data)
    if needs_grad(x):
        return record(out, dev, "LogBackward", (x,), lambda g, _: divide(g, _c(x)),
                      saved=(x,))
    return new(out, dev)


# -- complex parts -----------------------------------------------------------------
def real(x: Tensor, /) -> Tensor:
    """Real part (identity for real tensors)."""
    x = tensor_arg(x, "real")
    dev = x._device
    out = dev.xp.real(x._data)
    if needs_grad(x):
        return record(out, dev, "RealBackward", (x,), lambda g, _: sum_to(g, x))
    return new(out, dev)


def conj(x: Tensor, /) -> Tensor:
    """Complex conjugate (identity for real tensors)."""
    x = tensor_arg(x, "conj")
    dev = x._device
    out = dev.xp.conj(x._data)
    if needs_grad(x):
        return record(out, dev, "ConjBackward", (x,), lambda g, _: conj(g))
    return new(out, dev)
