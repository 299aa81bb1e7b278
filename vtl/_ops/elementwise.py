"""Elementwise functions of the array API standard (2024.12), with their VJP rules.

Dtypes: each function accepts the dtype category the standard names for it
(e.g. ``sin`` floating-point, ``bitwise_and`` integer or boolean, ``logical_and``
boolean) and raises ``TypeError`` otherwise, the same on every backend.
Binary functions take one Python scalar operand (``vtl.add(x, 1)``), which
adopts the tensor's dtype where its kind fits, or one NumPy scalar operand, which
promotes as a 0-d tensor of its own dtype (``float32`` tensor ``* numpy.float64(2)``
is ``float64``, as in NumPy; see :func:`vtl.result_type`).

Gradients follow PyTorch: for complex inputs each rule multiplies by the
*conjugate* of the local derivative (for real tensors ``conj`` is the
identity); piecewise-constant or integer-valued functions (``floor``, ``ceil``,
``trunc``, ``round``, ``sign``, ``floor_divide``, ``nextafter``, comparisons,
logical and bitwise functions) record no graph. Choices at kinks:

* ``abs``: ``sign(x)`` (0 at 0); complex: ``x / |x|`` (0 at 0).
* ``maximum``/``minimum``: on ties the gradient is split evenly (half to each).
* ``clip``: the gradient reaches ``x`` where ``min <= x <= max`` (ties included)
  and a tensor bound where it was the one selected.
* ``pow``: no gradient to the base where the exponent is 0; the exponent's
  gradient ``x1**x2 * log(x1)`` is taken as 0 where ``x1 == 0`` and
  ``real(x2) >= 0`` (so ``x**2`` at ``x = 0`` gives no nan).
* ``hypot`` and ``atan2`` at ``(0, 0)``, and ``copysign`` at ``x1 = 0``: 0.
* ``copysign``: zero gradient to ``x2``; ``remainder``: ``-floor(x1 / x2)`` to ``x2``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from .._tensor import Tensor, _new
from ..autograd import grad_mode
from ..backends._dtypes import kind as _dkind
from ._core import (
    _OPERAND_TYPES,
    TensorMeta,
    _reduce_raw,
    binary_operands,
    needs_grad,
    new,
    plain_grad,
    raw_grad,
    record,
    record_op,
    sum_to,
    tensor_arg,
)
from .views import maybe_view

__all__ = [
    "abs", "acos", "acosh", "add", "asin", "asinh", "atan", "atan2", "atanh",
    "bitwise_and", "bitwise_invert", "bitwise_left_shift", "bitwise_or",
    "bitwise_right_shift", "bitwise_xor", "ceil", "clip", "conj", "copysign", "cos",
    "cosh", "divide", "equal", "exp", "expm1", "floor", "floor_divide", "greater",
    "greater_equal", "hypot", "imag", "isfinite", "isinf", "isnan", "less", "less_equal",
    "log", "log1p", "log2", "log10", "logaddexp", "logical_and", "logical_not",
    "logical_or", "logical_xor", "maximum", "minimum", "multiply", "negative",
    "nextafter", "not_equal", "positive", "pow", "real", "reciprocal", "remainder",
    "round", "sign", "signbit", "sin", "sinh", "sqrt", "square", "subtract", "tan",
    "tanh", "trunc",
]

_grad = grad_mode.state

# dtype categories of the standard, as NumPy dtype kinds
_ALL = ("biufc", "any")
_NUMERIC = ("iufc", "numeric")
_REAL = ("iuf", "real numeric")
_FLOAT = ("fc", "floating-point")
_RFLOAT = ("f", "real floating-point")
_COMPLEX = ("c", "complex floating-point")
_INT_BOOL = ("biu", "integer or boolean")
_INT = ("iu", "integer")
_BOOL = ("b", "boolean")


def _dtype_error(fname: str, what: str, dtype: Any) -> TypeError:
    return TypeError(f"{fname}() expected a tensor of {what} dtype, got {dtype}")


def _unary_doc(doc: str, what: str) -> str:
    """``doc`` with the Args, Returns and Raises sections of a unary function."""
    return doc and (f"{doc}\n\nArgs:\n    x: The input tensor, of a {what} dtype.\n\n"
                    "Returns:\n    A tensor of ``x``'s shape.\n\n"
                    "Raises:\n    TypeError: If ``x`` is not a tensor or its dtype is not "
                    f"{what}.")


def _binary_doc(doc: str, what: str) -> str:
    """``doc`` with the Args, Returns and Raises sections of a binary function."""
    kind = "of any dtype" if what == "any" else f"of a {what} dtype"
    bad = "" if what == "any" else f", or an operand's dtype is not {what}"
    return doc and (f"{doc}\n\nArgs:\n    x1: The first operand: a tensor {kind}, or a Python "
                    f"scalar.\n    x2: The second operand: a tensor {kind}, or a Python "
                    "scalar;\n        the two broadcast together.\n\n"
                    "Returns:\n    A tensor of the broadcast shape.\n\n"
                    f"Raises:\n    TypeError: If neither operand is a tensor{bad}.\n"
                    "    ValueError: If the tensors are on different devices.")


def _c(t: Tensor) -> Tensor:
    """conj for complex tensors, identity otherwise (cheap for the real case)."""
    return conj(t) if _dkind(t._data.dtype) == "c" else t


def _cs(x: Tensor | complex) -> Tensor | complex:
    """Conjugate of a tensor or Python scalar operand."""
    if isinstance(x, Tensor):
        return _c(x)
    return x.conjugate() if isinstance(x, complex) else x


def _raw(x: Any) -> Any:
    return x._data if isinstance(x, Tensor) else x


def _req(x: Any) -> bool:
    return isinstance(x, Tensor) and x._requires_grad


def _const(value: complex, dtype: Any, dev: Any) -> Any:
    """A 0-d raw array of ``dtype`` on ``dev`` (for scalars in rules)."""
    return dev.xp.asarray(value, dtype=dtype, device=dev.backend.native_device(dev.index))


def _operand(x: Any, dt: Any, dev: Any) -> Any:
    """Raw operand for ``where``: tensors' data; scalars as they are when the standard
    lets them adopt ``dt`` (an int/float scalar with a floating dtype), else a 0-d array."""
    if isinstance(x, Tensor):
        return x._data
    if _dkind(dt) in "fc" and isinstance(x, (int, float)) and not isinstance(x, bool):
        return x
    return _const(x, dt, dev)


def _as_tensor(x: Any, like: Tensor) -> Tensor:
    """``x`` as a Tensor of ``like``'s dtype when it is a Python scalar."""
    if isinstance(x, Tensor):
        return x
    return new(_const(x, like._data.dtype, like._device), like._device)


def _where(cond: Any, a: Tensor | complex, b: Tensor | complex) -> Tensor:
    """``where(cond, a, b)`` for a raw boolean ``cond``; differentiable in ``a`` and ``b``.

    Used by the VJP rules to select gradients without multiplying by masks
    (so a nan or inf on the unselected side never leaks through).
    """
    t = a if isinstance(a, Tensor) else b
    dev = t._device
    dt = t._data.dtype
    out = dev.xp.where(cond, _operand(a, dt, dev), _operand(b, dt, dev))
    if needs_grad(a, b):
        def vjp(g: Tensor, _: Any) -> tuple:
            return (sum_to(_where(cond, g, 0), a) if _req(a) else None,
                    sum_to(_where(cond, 0, g), b) if _req(b) else None)

        return record(out, dev, "WhereBackward", (a, b), vjp)
    return new(out, dev)


# -- factories ------------------------------------------------------------------
def _unary(name: str, cat: tuple[str, str], doc: str,
           rule: Callable[[Tensor, Tensor, Tensor | None], Tensor] | None = None,
           uses: str = "", xp_name: str | None = None,
           cfix: Callable[[Any, Any, Any], Any] | None = None) -> Callable[[Tensor], Tensor]:
    """Build ``name(x, /)``; ``rule(g, x, out)`` gives the gradient (``uses`` says
    which of ``"x"``/``"out"`` it reads); ``cfix(xp, x, out)`` patches complex results."""
    kinds, what = cat
    xname = xp_name or name
    save_out = "out" in uses
    bwd = name.capitalize() + "Backward"

    def op(x: Tensor, /) -> Tensor:
        if not isinstance(x, Tensor):
            x = tensor_arg(x, name)
        data = x._data
        if _dkind(data.dtype) not in kinds:
            raise _dtype_error(name, what, data.dtype)
        dev = x._device
        out = getattr(dev.xp, xname)(data)
        if cfix is not None and _dkind(data.dtype) == "c":
            out = cfix(dev.xp, data, out)
        if rule is not None and x._requires_grad and _grad.enabled:
            return record(out, dev, bwd, (x,), lambda g, o: rule(g, x, o),
                          saved=(x,) if "x" in uses else (), save_output=save_out)
        return new(out, dev)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = _unary_doc(doc, what)
    return op


def _binary(name: str, cat: tuple[str, str], doc: str,
            rule: Callable[..., tuple] | None = None, xp_name: str | None = None,
            saves: bool = True, plain: Callable[..., Any] | None = None,
            forward: Callable[[Any, Any, Any], Any] | None = None,
            raw: Callable[..., tuple] | None = None,
            ) -> Callable[[Any, Any], Tensor]:
    """Build ``name(x1, x2, /)``.

    ``rule(g, x1, x2, need1, need2)`` returns unreduced gradients (or ``None``)
    for the operands (Tensors or the Python scalar); broadcasting is undone here.
    ``plain(dev, g, a, b, need1, need2)``, when given, computes the same on the raw
    arrays (``a``, ``b``: the operands' data or the Python scalar) for plain
    backward (no ``create_graph``) of real operands, or returns ``None`` to defer
    to ``rule``; it also gives the node its raw rule (see ``vtl.autograd.graph``):
    ``raw`` when given, else :func:`_binary_raw`. The raw rule gets the node's
    Tensor rule, ``partial(_binary_vjp, rule, plain, x1, x2, t1, t2, need1, need2)``,
    whose arguments it reads, and the raw output gradient.
    ``forward(xp, a, b)``, when given, computes the result instead of ``xp.<name>``.
    """
    kinds, what = cat
    xname = xp_name or name
    bwd = "".join(p.capitalize() for p in name.split("_")) + "Backward"

    def build(operator: bool) -> Callable[[Any, Any], Tensor]:
        def op(x1: Tensor | complex, x2: Tensor | complex, /) -> Tensor:
            t1 = isinstance(x1, Tensor)
            t2 = isinstance(x2, Tensor)
            if t1 and t2:
                dev = x1._device
                if x2._device is not dev:
                    binary_operands(x1, x2, name)  # raises the mixed-devices error
                a, b = x1._data, x2._data
            elif t1 and (x2.__class__ is float or x2.__class__ is int):
                dev, a, b = x1._device, x1._data, x2
            else:
                if operator and not isinstance(x2, _OPERAND_TYPES):
                    return NotImplemented  # Tensor.__<op>__(x1, x2): let x2's reflected op try
                dev, a, b = binary_operands(x1, x2, name)
            if (t1 or isinstance(x1, np.generic)) and _dkind(a.dtype) not in kinds:
                raise _dtype_error(name, what, a.dtype)
            if (t2 or isinstance(x2, np.generic)) and _dkind(b.dtype) not in kinds:
                raise _dtype_error(name, what, b.dtype)
            if forward is None:
                out = getattr(dev.xp, xname)(a, b)
            else:
                out = forward(dev.xp, a, b)
            if rule is not None and _grad.enabled:
                n1 = t1 and x1._requires_grad
                n2 = t2 and x2._requires_grad
                if n1 or n2:
                    # plain rules are for real operands (a real result means real operands)
                    p = None if _dkind(out.dtype) == "c" else plain
                    e1, e2 = x1 if n1 else None, x2 if n2 else None
                    if not saves:  # the rule reads no values: keep the operands' metadata
                        saved: tuple = ()
                        if t1:
                            x1 = TensorMeta(x1)
                        if t2:
                            x2 = TensorMeta(x2)
                    elif t1 and t2:
                        saved = (x1, x2)
                    else:
                        saved = (x1,) if t1 else (x2,)
                    return record_op(out, dev, bwd, e1, e2,
                                     partial(_binary_vjp, rule, p, x1, x2, t1, t2, n1, n2),
                                     saved, None if p is None else raw)
            return new(out, dev)

        return op

    if raw is None:
        raw = _binary_raw
    op = build(False)
    # the operator form, which Tensor.__<op>__ calls: the same function, returning
    # NotImplemented for an operand it does not take (no checking wrapper in between)
    op.operator = build(True)
    op.operator.__name__ = name
    op.operator.__qualname__ = f"{name}.operator"
    op.__name__ = op.__qualname__ = name
    op.__doc__ = _binary_doc(doc, what)
    return op


def _binary_raw(vjp: partial, gd: Any) -> tuple:
    """The raw rule of a binary function (plain backward of real operands): the plain
    rule, then each gradient reduced to its input's shape and dtype."""
    rule, plain, x1, x2, t1, t2, n1, n2 = vjp.args
    dev = x1._device if t1 else x2._device
    r = plain(dev, gd, x1._data if t1 else x1, x2._data if t2 else x2, n1, n2)
    if r is None:  # the plain rule defers to the Tensor rule
        g1, g2 = _binary_vjp(rule, None, x1, x2, t1, t2, n1, n2, _new(gd, dev), None)
        return (None if g1 is None else g1._data, None if g2 is None else g2._data)
    r1, r2 = r
    return (raw_grad(r1, x1, dev) if n1 else None), (raw_grad(r2, x2, dev) if n2 else None)


def _binary_vjp(rule: Callable[..., tuple], plain: Callable[..., Any] | None, x1: Any, x2: Any,
                t1: bool, t2: bool, n1: bool, n2: bool, g: Tensor, _: Any) -> tuple:
    if plain is not None and not _grad.enabled:
        gd = g._data
        dev = g._device
        r = plain(dev, gd, x1._data if t1 else x1, x2._data if t2 else x2, n1, n2)
        if r is not None:
            if n1 and not n2:  # the usual case: a gradient for x1 only
                r1 = r[0]
                xd = x1._data
                if r1 is not gd and r1.shape == xd.shape and r1.dtype == xd.dtype:
                    return _new(r1, dev), None
                return _plain_result(r1, g, x1, dev), None
            return (_plain_result(r[0], g, x1, dev) if n1 else None,
                    _plain_result(r[1], g, x2, dev) if n2 else None)
    g1, g2 = rule(g, x1, x2, n1, n2)
    return (sum_to(g1, x1) if n1 else None, sum_to(g2, x2) if n2 else None)


def _plain_result(r: Any, g: Tensor, x: Tensor, dev: Any) -> Tensor:
    """Input ``x``'s gradient from the raw result ``r`` of a plain rule (``g`` itself
    when the rule passed the output gradient through)."""
    xd = x._data
    if r.shape == xd.shape and r.dtype == xd.dtype:
        return g if r is g._data else _new(r, dev)
    return plain_grad(r, x, dev)


def _add_raw(vjp: partial, gd: Any, negate: bool = False) -> tuple:
    """The raw rule of add (of subtract with ``negate``): ``gd`` for the first input and
    ``gd`` (``-gd``) for the second, each reduced to its input's shape and dtype."""
    _, _, x1, x2, t1, t2, n1, n2 = vjp.args
    r1 = r2 = None
    shape, dtype = gd.shape, gd.dtype
    if n1:
        xd = x1._data  # (raw_grad, with its common case first)
        r1 = gd if xd.shape == shape and xd.dtype == dtype else raw_grad(gd, x1, x1._device)
    if n2:
        g2 = -gd if negate else gd
        xd = x2._data
        if xd.dtype != dtype:
            r2 = raw_grad(g2, x2, x2._device)
        else:  # (raw_grad's same-dtype case: a bias's sum goes straight to the backend)
            r2 = g2 if xd.shape == shape else _reduce_raw(g2, xd.shape, x2._device)
    return r1, r2


def _subtract_raw(vjp: partial, gd: Any) -> tuple:
    return _add_raw(vjp, gd, True)


def _add_plain(dev: Any, g: Any, a: Any, b: Any, n1: bool, n2: bool) -> tuple:
    return g, g


def _subtract_plain(dev: Any, g: Any, a: Any, b: Any, n1: bool, n2: bool) -> tuple:
    return g, (-g if n2 else None)


def _multiply_plain(dev: Any, g: Any, a: Any, b: Any, n1: bool, n2: bool) -> tuple | None:
    return (g * b if n1 else None), (g * a if n2 else None)


def _pow_plain(dev: Any, g: Any, a: Any, b: Any, n1: bool, n2: bool) -> tuple | None:
    # only a Python-number exponent; otherwise the full rule
    if n2 or not isinstance(b, (int, float)):
        return None
    if b == 0:
        return g * (g * 0), None  # as the rule: the local derivative g * 0, times g
    if b == 2:
        return g * (a + a), None  # a + a is 2a exactly (a Python 2 costs NumPy a conversion)
    return g * (dev.xp.pow(a, b - 1) * b), None


# -- arithmetic -------------------------------------------------------------------
add = _binary("add", _NUMERIC, "Elementwise ``x1 + x2`` with broadcasting.",
              lambda g, x1, x2, n1, n2: (g, g), saves=False, plain=_add_plain, raw=_add_raw)
subtract = _binary("subtract", _NUMERIC, "Elementwise ``x1 - x2`` with broadcasting.",
                   lambda g, x1, x2, n1, n2: (g, negative(g) if n2 else None), saves=False,
                   plain=_subtract_plain, raw=_subtract_raw)
multiply = _binary(
    "multiply", _NUMERIC, "Elementwise ``x1 * x2`` with broadcasting.",
    lambda g, x1, x2, n1, n2: (multiply(g, _cs(x2)) if n1 else None,
                               multiply(g, _cs(x1)) if n2 else None),
    plain=_multiply_plain)


def _divide_rule(g: Tensor, x1: Any, x2: Any, n1: bool, n2: bool) -> tuple:
    q = divide(g, _cs(x2))
    return q, (negative(multiply(q, _cs(divide(x1, x2)))) if n2 else None)


divide = _binary("divide", _NUMERIC,
                 "Elementwise true division ``x1 / x2``; integer inputs give a floating "
                 "result (as NumPy).", _divide_rule)


def _pow_rule(g: Tensor, x1: Any, x2: Any, n1: bool, n2: bool) -> tuple:
    dev = g._device
    xp = dev.xp
    g1 = g2 = None
    if n1:
        if isinstance(x2, Tensor):
            d = _where(xp.equal(x2._data, 0), 0, multiply(x2, pow(x1, subtract(x2, 1))))
        elif x2 == 0:
            d = multiply(g, 0)
        else:
            d = multiply(pow(x1, x2 - 1), x2)
        g1 = multiply(g, _c(d))
    if n2:  # x2 is a tensor here
        base = _as_tensor(x1, g)
        if base._data.dtype != g._data.dtype:
            from .dtype_functions import astype

            base = astype(base, g._data.dtype)
        ex = x2._data
        if _dkind(ex.dtype) == "c":
            ex = xp.real(ex)
        zero_base = xp.logical_and(xp.equal(base._data, 0), xp.greater_equal(ex, 0))
        d = _where(zero_base, 0, multiply(pow(base, x2), log(_where(zero_base, 1, base))))
        g2 = multiply(g, _c(d))
    return g1, g2


def _pow_forward(xp: Any, a: Any, b: Any) -> Any:
    if (b.__class__ is int or b.__class__ is float) and b == 2 and _dkind(a.dtype) in "iuf":
        return xp.multiply(a, a)  # as NumPy's ``x ** 2`` (a fast square, exact)
    return xp.pow(a, b)


pow = _binary(  # noqa: A001 - the standard's name
    "pow", _NUMERIC,
    "Elementwise ``x1 ** x2``; a real ``x1`` to the Python number 2 is computed as "
    "``x1 * x1`` (as NumPy's ``**``). Gradients: none to ``x1`` where ``x2 == 0``; the "
    "exponent's gradient is 0 where ``x1 == 0`` and ``real(x2) >= 0`` (as PyTorch).",
    _pow_rule, plain=_pow_plain, forward=_pow_forward)


def _remainder_rule(g: Tensor, x1: Any, x2: Any, n1: bool, n2: bool) -> tuple:
    g2 = None
    if n2:
        g2 = negative(multiply(g, floor_divide(_raw_t(x1), _raw_t(x2))))
    return g, g2


def _raw_t(x: Any) -> Any:
    """A tensor operand without its graph (for piecewise-constant factors in rules)."""
    return x.detach() if isinstance(x, Tensor) else x


remainder = _binary(
    "remainder", _REAL,
    "Elementwise remainder of ``x1 / x2`` with the sign of ``x2`` (Python's ``%``). "
    "Gradients: 1 to ``x1``, ``-floor(x1 / x2)`` to ``x2``.", _remainder_rule)
_floor_divide = _binary("floor_divide", _REAL, "", xp_name="floor_divide")


def _isinf_operand(xp: Any, v: Any) -> Any:
    return math.isinf(v) if isinstance(v, (int, float)) else xp.isinf(v)


def floor_divide(x1: Tensor | float, x2: Tensor | float, /) -> Tensor:
    """Elementwise ``floor(x1 / x2)`` (Python's ``//``); not differentiable (no graph).

    Floating point: where exactly one operand is infinite the result is ``x1 / x2``
    (``inf // 2 == inf``, ``1 // -inf == -0.0``), as the standard's special cases say
    (NumPy gives nan and -1 there).

    Args:
        x1: The dividend (a tensor or a scalar).
        x2: The divisor (a tensor or a scalar).

    Returns:
        A tensor of the broadcast shape.

    Raises:
        TypeError: If neither operand is a tensor or a dtype is not real numeric.
    """
    out = _floor_divide(x1, x2)
    data = out._data
    if _dkind(data.dtype) != "f":
        return out
    dev, a, b = binary_operands(x1, x2, "floor_divide")
    xp = dev.xp
    inf1, inf2 = _isinf_operand(xp, a), _isinf_operand(xp, b)
    if inf1 is True or inf1 is False:
        if inf2 is True or inf2 is False:
            return out
        cond = xp.logical_not(inf2) if inf1 else inf2
    elif inf2 is True or inf2 is False:
        cond = xp.logical_not(inf1) if inf2 else inf1
    else:
        cond = xp.logical_xor(inf1, inf2)
    return new(xp.where(cond, xp.divide(a, b), data), dev)


def _max_rule(greater_is_first: bool) -> Callable[..., tuple]:
    def rule(g: Tensor, x1: Any, x2: Any, n1: bool, n2: bool) -> tuple:
        xp = g._device.xp
        a, b = _raw(x1), _raw(x2)
        tie = xp.equal(a, b)
        half = _where(tie, multiply(g, 0.5), g)
        lose1 = xp.less(a, b) if greater_is_first else xp.greater(a, b)
        g1 = _where(lose1, 0, half) if n1 else None
        g2 = None
        if n2:
            lose2 = xp.greater(a, b) if greater_is_first else xp.less(a, b)
            g2 = _where(lose2, 0, half)
        return g1, g2

    return rule


def _max_plain(greater_is_first: bool) -> Callable[..., tuple]:
    """The same selection as :func:`_max_rule` on raw arrays (plain backward)."""
    def plain(dev: Any, g: Any, a: Any, b: Any, n1: bool, n2: bool) -> tuple:
        xp = dev.xp
        backend = dev._backend
        tie = xp.equal(a, b)
        # where the backend can tell without a device sync that there is no tie, the
        # halving pass is skipped (same values)
        half = g if backend.known_all_false(tie) else xp.where(tie, g * 0.5, g)
        # where(lose, 0, g), through the backend's kernel where it has one (NumPy's where
        # branches per element)
        zero = backend.kernel("zero_where")
        r1 = r2 = None
        if n1:
            lose = xp.less(a, b) if greater_is_first else xp.greater(a, b)
            r1 = None if zero is None else zero(lose, half)
            if r1 is None:
                r1 = xp.where(lose, 0.0, half)
        if n2:
            lose = xp.greater(a, b) if greater_is_first else xp.less(a, b)
            r2 = None if zero is None else zero(lose, half)
            if r2 is None:
                r2 = xp.where(lose, 0.0, half)
        return r1, r2

    return plain


def _max_raw(greater_is_first: bool) -> Callable[[partial, Any], tuple]:
    """The raw rule of maximum (minimum): for a gradient to ``x1`` alone, where ``x1`` has
    the output's shape (``maximum(h, 0.0)``), the backend's ``minmax_backward`` kernel when
    it has one; otherwise :func:`_binary_raw`."""
    def raw(vjp: partial, gd: Any) -> tuple:
        _, _, x1, x2, t1, t2, n1, n2 = vjp.args
        if n1 and not n2:
            backend = x1._device._backend
            kernel = backend.kernel("minmax_backward")
            if kernel is not None:
                r = kernel(x1._data, x2._data if t2 else x2, gd, greater_is_first)
                if r is not None:
                    return r, None
        return _binary_raw(vjp, gd)

    return raw


maximum = _binary(
    "maximum", _REAL,
    "Elementwise maximum (nan if either is nan). On ties the gradient is split evenly "
    "between ``x1`` and ``x2`` (as PyTorch).", _max_rule(True), plain=_max_plain(True),
    raw=_max_raw(True))
minimum = _binary(
    "minimum", _REAL,
    "Elementwise minimum (nan if either is nan). On ties the gradient is split evenly "
    "between ``x1`` and ``x2`` (as PyTorch).", _max_rule(False), plain=_max_plain(False),
    raw=_max_raw(False))


def _atan2_rule(g: Tensor, x1: Any, x2: Any, n1: bool, n2: bool) -> tuple:
    x1, x2 = _as_tensor(x1, g), _as_tensor(x2, g)
    d = add(multiply(x1, x1), multiply(x2, x2))
    d = _where(g._device.xp.equal(d._data, 0), 1, d)
    return (divide(multiply(g, x2), d) if n1 else None,
            negative(divide(multiply(g, x1), d)) if n2 else None)


atan2 = _binary(
    "atan2", _RFLOAT,
    "Elementwise angle of the point ``(x2, x1)`` (quadrant-aware ``atan(x1 / x2)``). "
    "The gradient at ``(0, 0)`` is 0.", _atan2_rule)


def _hypot_rule(g: Tensor, x1: Any, x2: Any, n1: bool, n2: bool) -> tuple:
    x1, x2 = _as_tensor(x1, g), _as_tensor(x2, g)
    h = hypot(x1, x2)
    h = _where(g._device.xp.equal(h._data, 0), 1, h)
    q = divide(g, h)
    return (multiply(q, x1) if n1 else None, multiply(q, x2) if n2 else None)


hypot = _binary(
    "hypot", _RFLOAT,
    "Elementwise ``sqrt(x1**2 + x2**2)`` without undue overflow. The gradient at "
    "``(0, 0)`` is 0.", _hypot_rule)


def _logaddexp_rule(g: Tensor, x1: Any, x2: Any, n1: bool, n2: bool) -> tuple:
    # d/dx1 = exp(x1 - out) with x1 - out <= 0: never overflows, for any gap
    out = logaddexp(x1, x2)
    g1 = multiply(g, exp(subtract(x1, out))) if n1 else None
    g2 = multiply(g, exp(subtract(x2, out))) if n2 else None
    return g1, g2


logaddexp = _binary("logaddexp", _RFLOAT,
                    "Elementwise ``log(exp(x1) + exp(x2))``, computed stably.",
                    _logaddexp_rule)


def _copysign_rule(g: Tensor, x1: Any, x2: Any, n1: bool, n2: bool) -> tuple:
    g1 = g2 = None
    if n1:
        # d/dx1 |x1| * s(x2) = sign(x1) * s(x2); 0 at x1 == 0 (as PyTorch)
        s2 = copysign(1.0, x2.detach()) if isinstance(x2, Tensor) else math.copysign(1.0, x2)
        g1 = multiply(g, multiply(sign(x1.detach()), s2))
    if n2:
        from .creation import zeros_like

        g2 = zeros_like(x2)
    return g1, g2


copysign = _binary(
    "copysign", _RFLOAT,
    "Elementwise ``|x1|`` with the sign bit of ``x2``. Gradients: ``sign(x1) * "
    "copysign(1, x2)`` to ``x1`` (0 at 0), zero to ``x2``.", _copysign_rule)
nextafter = _binary("nextafter", _RFLOAT,
                    "The next representable value after ``x1`` in the direction of ``x2``; "
                    "not differentiable (no graph).")

# -- comparisons, logical and bitwise (no graph) --------------------------------------
equal = _binary("equal", _ALL, "Elementwise ``x1 == x2`` (a bool tensor).")
not_equal = _binary("not_equal", _ALL, "Elementwise ``x1 != x2`` (a bool tensor).")
greater = _binary("greater", _REAL, "Elementwise ``x1 > x2`` (a bool tensor).")
greater_equal = _binary("greater_equal", _REAL, "Elementwise ``x1 >= x2`` (a bool tensor).")
less = _binary("less", _REAL, "Elementwise ``x1 < x2`` (a bool tensor).")
less_equal = _binary("less_equal", _REAL, "Elementwise ``x1 <= x2`` (a bool tensor).")
logical_and = _binary("logical_and", _BOOL, "Elementwise logical AND of bool tensors.")
logical_or = _binary("logical_or", _BOOL, "Elementwise logical OR of bool tensors.")
logical_xor = _binary("logical_xor", _BOOL, "Elementwise logical XOR of bool tensors.")
bitwise_and = _binary("bitwise_and", _INT_BOOL, "Elementwise bitwise AND (``x1 & x2``).")
bitwise_or = _binary("bitwise_or", _INT_BOOL, "Elementwise bitwise OR (``x1 | x2``).")
bitwise_xor = _binary("bitwise_xor", _INT_BOOL, "Elementwise bitwise XOR (``x1 ^ x2``).")
_left_shift = _binary("bitwise_left_shift", _INT, "", xp_name="bitwise_left_shift")
_right_shift = _binary("bitwise_right_shift", _INT, "", xp_name="bitwise_right_shift")


def _check_shift(fname: str, x2: Any) -> None:
    if isinstance(x2, int) and x2 < 0:
        raise ValueError(f"{fname}() needs a non-negative shift, got {x2}")


def bitwise_left_shift(x1: Tensor | int, x2: Tensor | int, /) -> Tensor:
    """Elementwise ``x1 << x2`` for integer tensors; shifts must be ``>= 0`` (negative
    tensor shifts are not checked, to avoid a device sync, and give unspecified results).

    Args:
        x1: An integer tensor (or an int).
        x2: The shifts, ``>= 0`` (a tensor or an int).

    Returns:
        A tensor of the broadcast shape.

    Raises:
        TypeError: If an operand is not of an integer dtype.
        ValueError: If a Python int shift is negative.
    """
    _check_shift("bitwise_left_shift", x2)
    return _left_shift(x1, x2)


def bitwise_right_shift(x1: Tensor | int, x2: Tensor | int, /) -> Tensor:
    """Elementwise arithmetic ``x1 >> x2`` for integer tensors; shifts must be ``>= 0``.

    Args:
        x1: An integer tensor (or an int).
        x2: The shifts, ``>= 0`` (a tensor or an int).

    Returns:
        A tensor of the broadcast shape.

    Raises:
        TypeError: If an operand is not of an integer dtype.
        ValueError: If a Python int shift is negative.
    """
    _check_shift("bitwise_right_shift", x2)
    return _right_shift(x1, x2)


# -- unary: signs and parts ------------------------------------------------------------
negative = _unary("negative", _NUMERIC, "Elementwise ``-x``.",
                  lambda g, x, o: negative(g))
positive = _unary("positive", _NUMERIC, "Elementwise ``+x`` (a copy).", lambda g, x, o: g)


def _abs_rule(g: Tensor, x: Tensor, out: Any) -> Tensor:
    if _dkind(x._data.dtype) == "c":
        m = abs(x)
        nz = _where(x._device.xp.equal(m._data, 0), 1, m)
        return multiply(g, divide(x, nz))
    return multiply(g, sign(x.detach()))


abs = _unary(  # noqa: A001 - the standard's name
    "abs", _NUMERIC,
    "Elementwise absolute value (the modulus for complex; a real result). Gradient: "
    "``sign(x)`` (0 at 0); complex: ``x / |x|`` (0 at 0).", _abs_rule, uses="x")
sign = _unary("sign", _NUMERIC,
              "Elementwise sign: -1, 0 or 1 (nan for nan); ``x / |x|`` for complex (0 at "
              "0). Not differentiable (no graph).")
signbit = _unary("signbit", _RFLOAT,
                 "Whether the sign bit is set (true for ``-0.0`` and negative nan).")


def _int_preserving(name: str, doc: str) -> Callable[[Tensor], Tensor]:
    def op(x: Tensor, /) -> Tensor:
        if not isinstance(x, Tensor):
            x = tensor_arg(x, name)
        data = x._data
        k = _dkind(data.dtype)
        if k not in "iuf":
            raise _dtype_error(name, "real numeric", data.dtype)
        dev = x._device
        xp = dev.xp
        if k != "f":  # integers are already integral: a copy, same dtype
            return new(xp.asarray(data, copy=True), dev)
        return new(getattr(xp, name)(data), dev)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = _unary_doc(doc, "real numeric")
    return op


ceil = _int_preserving("ceil", "Elementwise ceiling (same dtype; no graph).")
floor = _int_preserving("floor", "Elementwise floor (same dtype; no graph).")
trunc = _int_preserving("trunc", "Elementwise rounding toward zero (same dtype; no graph).")


def round(x: Tensor, /) -> Tensor:  # noqa: A001 - the standard's name
    """Round to the nearest integer, halves to even (same dtype; no graph). Complex
    tensors round their real and imaginary parts.

    Args:
        x: The input tensor.

    Returns:
        The rounded tensor, of ``x``'s dtype.

    Raises:
        TypeError: If ``x`` is not numeric.
    """
    if not isinstance(x, Tensor):
        x = tensor_arg(x, "round")
    data = x._data
    k = _dkind(data.dtype)
    if k not in "iufc":
        raise _dtype_error("round", "numeric", data.dtype)
    dev = x._device
    if k in "iu":
        return new(dev.xp.asarray(data, copy=True), dev)
    return new(dev.xp.round(data), dev)


def real(x: Tensor, /) -> Tensor:
    """Real part (a copy for real tensors).

    Args:
        x: The input tensor.

    Returns:
        The real parts.

    Raises:
        TypeError: If ``x`` is not numeric.
    """
    if not isinstance(x, Tensor):
        x = tensor_arg(x, "real")
    data = x._data
    k = _dkind(data.dtype)
    if k not in "iufc":
        raise _dtype_error("real", "numeric", data.dtype)
    dev = x._device
    out = dev.xp.real(data) if k == "c" else dev.xp.asarray(data, copy=True)
    if x._requires_grad and _grad.enabled:
        t = record(out, dev, "RealBackward", (x,), lambda g, _: sum_to(g, x))
    else:
        t = new(out, dev)
    return maybe_view(t, x, "real") if k == "c" else t


def imag(x: Tensor, /) -> Tensor:
    """Imaginary part of a complex tensor (real dtype).

    Args:
        x: A complex tensor.

    Returns:
        The imaginary parts, of the real dtype.

    Raises:
        TypeError: If ``x`` is not complex.
    """
    if not isinstance(x, Tensor):
        x = tensor_arg(x, "imag")
    data = x._data
    if _dkind(data.dtype) != "c":
        raise _dtype_error("imag", "complex floating-point", data.dtype)
    dev = x._device
    out = dev.xp.imag(data)
    if x._requires_grad and _grad.enabled:
        t = record(out, dev, "ImagBackward", (x,), lambda g, _: sum_to(multiply(g, 1j), x))
    else:
        t = new(out, dev)
    return maybe_view(t, x, "imag")


conj = _unary("conj", _NUMERIC, "Complex conjugate (a copy for real tensors).",
              lambda g, x, o: conj(g))

isfinite = _unary("isfinite", _NUMERIC, "Whether each element is finite (bool; no graph).")
isinf = _unary("isinf", _NUMERIC, "Whether each element is +-inf (bool; no graph).")
isnan = _unary("isnan", _NUMERIC, "Whether each element is nan (bool; no graph).")
logical_not = _unary("logical_not", _BOOL, "Elementwise logical NOT of a bool tensor.")
bitwise_invert = _unary("bitwise_invert", _INT_BOOL, "Elementwise bitwise NOT (``~x``).")

# -- powers, exponentials and logarithms ----------------------------------------------
square = _unary("square", _NUMERIC, "Elementwise ``x * x``.",
                lambda g, x, o: multiply(g, _c(multiply(x, 2))), uses="x")
sqrt = _unary("sqrt", _FLOAT, "Elementwise principal square root.",
              lambda g, x, o: divide(g, _c(multiply(o, 2))), uses="out")
reciprocal = _unary("reciprocal", _FLOAT, "Elementwise ``1 / x``.",
                    lambda g, x, o: negative(multiply(g, _c(multiply(o, o)))), uses="out")
exp = _unary("exp", _FLOAT, "Elementwise ``e**x``.",
             lambda g, x, o: multiply(g, _c(o)), uses="out")
def _cconst(xp: Any, re: float, im: float, like: Any) -> Any:
    return xp.asarray(complex(re, im), dtype=like.dtype)


def _signed_zero_imag(xp: Any, b: Any, re: float, like: Any) -> Any:
    """``re + copysign(0, b) j``, elementwise."""
    return xp.where(xp.signbit(b), _cconst(xp, re, -0.0, like), _cconst(xp, re, 0.0, like))


def _expm1_cfix(xp: Any, x: Any, out: Any) -> Any:
    """The standard's complex special cases of expm1 that NumPy's formula misses."""
    a, b = xp.real(x), xp.imag(x)
    out = xp.add(out, complex(0.0, -0.0))  # a real part of -0 becomes +0 (expm1(-0+0j))
    zero_b = b == 0
    out = xp.where(xp.logical_and(a == math.inf, zero_b), _signed_zero_imag(xp, b, math.inf, x),
                   out)
    out = xp.where(xp.logical_and(xp.isnan(a), zero_b), _signed_zero_imag(xp, b, math.nan, x),
                   out)
    bad_b = xp.logical_not(xp.isfinite(b))
    out = xp.where(xp.logical_and(a == -math.inf, bad_b), _cconst(xp, -1.0, 0.0, x), out)
    return xp.where(xp.logical_and(a == math.inf, bad_b), _cconst(xp, math.inf, math.nan, x),
                    out)


def _tanh_cfix(xp: Any, x: Any, out: Any) -> Any:
    """tanh(+-inf + bj) for finite b is +-1 with a zero imaginary part of b's sign."""
    a, b = xp.real(x), xp.imag(x)
    fin = xp.isfinite(b)
    out = xp.where(xp.logical_and(a == math.inf, fin), _signed_zero_imag(xp, b, 1.0, x), out)
    return xp.where(xp.logical_and(a == -math.inf, fin), _signed_zero_imag(xp, b, -1.0, x), out)


expm1 = _unary("expm1", _FLOAT, "Elementwise ``exp(x) - 1``, accurate near 0 (complex special "
               "cases as the standard says).",
               lambda g, x, o: multiply(g, _c(add(o, 1))), uses="out", cfix=_expm1_cfix)
log = _unary("log", _FLOAT, "Elementwise natural logarithm.",
             lambda g, x, o: divide(g, _c(x)), uses="x")
log1p = _unary("log1p", _FLOAT, "Elementwise ``log(1 + x)``, accurate near 0.",
               lambda g, x, o: divide(g, _c(add(x, 1))), uses="x")
log2 = _unary("log2", _FLOAT, "Elementwise base-2 logarithm.",
              lambda g, x, o: divide(g, _c(multiply(x, math.log(2.0)))), uses="x")
log10 = _unary("log10", _FLOAT, "Elementwise base-10 logarithm.",
               lambda g, x, o: divide(g, _c(multiply(x, math.log(10.0)))), uses="x")

# -- trigonometric and hyperbolic -------------------------------------------------------
sin = _unary("sin", _FLOAT, "Elementwise sine.",
             lambda g, x, o: multiply(g, _c(cos(x))), uses="x")
cos = _unary("cos", _FLOAT, "Elementwise cosine.",
             lambda g, x, o: negative(multiply(g, _c(sin(x)))), uses="x")
tan = _unary("tan", _FLOAT, "Elementwise tangent.",
             lambda g, x, o: multiply(g, _c(add(multiply(o, o), 1))), uses="out")
sinh = _unary("sinh", _FLOAT, "Elementwise hyperbolic sine.",
              lambda g, x, o: multiply(g, _c(cosh(x))), uses="x")
cosh = _unary("cosh", _FLOAT, "Elementwise hyperbolic cosine.",
              lambda g, x, o: multiply(g, _c(sinh(x))), uses="x")
tanh = _unary("tanh", _FLOAT, "Elementwise hyperbolic tangent.",
              lambda g, x, o: multiply(g, _c(subtract(1, multiply(o, o)))), uses="out",
              cfix=_tanh_cfix)
asin = _unary("asin", _FLOAT, "Elementwise inverse sine.",
              lambda g, x, o: divide(g, _c(sqrt(subtract(1, multiply(x, x))))), uses="x")
acos = _unary("acos", _FLOAT, "Elementwise inverse cosine.",
              lambda g, x, o: negative(divide(g, _c(sqrt(subtract(1, multiply(x, x)))))),
              uses="x")
atan = _unary("atan", _FLOAT, "Elementwise inverse tangent.",
              lambda g, x, o: divide(g, _c(add(multiply(x, x), 1))), uses="x")
asinh = _unary("asinh", _FLOAT, "Elementwise inverse hyperbolic sine.",
               lambda g, x, o: divide(g, _c(sqrt(add(multiply(x, x), 1)))), uses="x")
acosh = _unary("acosh", _FLOAT, "Elementwise inverse hyperbolic cosine.",
               lambda g, x, o: divide(g, _c(multiply(sqrt(subtract(x, 1)), sqrt(add(x, 1))))),
               uses="x")
atanh = _unary("atanh", _FLOAT, "Elementwise inverse hyperbolic tangent.",
               lambda g, x, o: divide(g, _c(subtract(1, multiply(x, x)))), uses="x")


# -- clip ---------------------------------------------------------------------------------
def _clip_bound(v: Any, argname: str, x: Tensor) -> Any:
    """Validate a bound of clip; returns the raw bound (array or Python scalar) or None."""
    if v is None:
        return None
    xk = _dkind(x._data.dtype)
    if isinstance(v, Tensor):
        if v._device is not x._device:
            from ._core import mixed_devices

            raise mixed_devices("clip", x._device, v._device)
        k = _dkind(v._data.dtype)
        if k not in "iuf":
            raise TypeError(f"clip() expected {argname} of real numeric dtype, got "
                            f"{v._data.dtype}")
        if (k == "f") != (xk == "f"):
            raise TypeError(f"clip() needs {argname} of the same kind as x (integer or "
                            f"floating-point), got {v._data.dtype} for x of {x._data.dtype}")
        return v._data
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"clip() expected {argname} to be None, an int, a float or a "
                        f"vtl.Tensor, got {type(v).__name__}")
    if isinstance(v, float) and xk != "f":
        raise TypeError(f"clip() got a float {argname}={v!r} for x of integer dtype "
                        f"{x._data.dtype}")
    return v


def clip(x: Tensor, /, min: Tensor | float | None = None,  # noqa: A002 - standard names
         max: Tensor | float | None = None) -> Tensor:  # noqa: A002
    """Clamp each element of ``x`` to ``[min, max]`` (each bound a scalar, a tensor or
    ``None``); the result has ``x``'s dtype and the broadcast shape (nan propagates). As
    ``np.clip`` with scalar bounds, ``x`` is replaced by a bound only where it lies beyond
    it, so zeros keep their sign (``clip(-5.0, -0.0, 0.0)`` is ``-0.0``), with tensor
    bounds too.

    Gradients: to ``x`` where ``min <= x <= max`` (ties included, as PyTorch), to a
    tensor bound where it was selected (``max`` wins when ``min > max``).

    Args:
        x: The input tensor.
        min: Lower bound: a scalar, a tensor, or ``None``.
        max: Upper bound: a scalar, a tensor, or ``None``.

    Returns:
        The clamped tensor.

    Raises:
        TypeError: If ``x`` is not real numeric or a bound is invalid.
    """
    if not isinstance(x, Tensor):
        x = tensor_arg(x, "clip")
    data = x._data
    if _dkind(data.dtype) not in "iuf":
        raise _dtype_error("clip", "real numeric", data.dtype)
    lo = _clip_bound(min, "min", x)
    hi = _clip_bound(max, "max", x)
    dev = x._device
    xp = dev.xp
    if lo is None and hi is None:
        out = xp.asarray(data, copy=True)
    else:
        out = xp.clip(data, lo, hi)
    if needs_grad(x, min, max):
        def vjp(g: Tensor, _: Any) -> tuple:
            if lo is None and hi is None:
                return g, None, None
            m_hi = m_lo = None
            if hi is not None:
                m_hi = xp.greater(data, hi)
                if lo is not None:
                    if isinstance(lo, (int, float)) and isinstance(hi, (int, float)):
                        if lo > hi:  # two Python bounds: decide on the host
                            m_hi = xp.ones_like(m_hi)
                    else:
                        m_hi = xp.logical_or(m_hi, xp.greater(lo, hi))
            if lo is not None:
                m_lo = xp.less(data, lo)
                if m_hi is not None:
                    m_lo = xp.logical_and(m_lo, xp.logical_not(m_hi))
            out_m = m_lo if m_hi is None else m_hi if m_lo is None else xp.logical_or(m_lo, m_hi)
            gx = sum_to(_where(out_m, 0, g), x) if _req(x) else None
            gmin = sum_to(_where(m_lo, g, 0), min) if _req(min) else None
            gmax = sum_to(_where(m_hi, g, 0), max) if _req(max) else None
            return gx, gmin, gmax

        saved = tuple(t for t in (x, min, max) if isinstance(t, Tensor))
        return record(out, dev, "ClipBackward", (x, min, max), vjp, saved=saved)
    return new(out, dev)


# autocast's float32 list: float16/bfloat16 inputs run in float32 inside autocast regions
def _autocast_float32() -> None:
    from .. import _autocast

    g = globals()
    for name in ("exp", "expm1", "log", "log1p", "log2", "log10", "sinh", "cosh", "tan",
                 "acos", "asin", "reciprocal"):
        g[name] = _autocast.float32_unary(g[name])
    fn = g["pow"]
    wrapped = _autocast.float32_binary(fn)
    wrapped.operator = _autocast.float32_binary(fn.operator)
    g["pow"] = wrapped


_autocast_float32()
