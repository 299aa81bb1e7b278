"""Activation functions, written with ``xp = array_namespace(x)``.

They run on any array-API array (NumPy, CuPy, array-api-strict: no
gradients) and are differentiable on vtl tensors through the namespace's own
rules. Formulas follow PyTorch's definitions, including its derivative
conventions at kinks (``relu'(0) = 0``, ``leaky_relu'(0) = negative_slope``,
hardtanh's derivative 0 on the boundary). Branches that could overflow are
fed clamped inputs, so the branch that ``where`` discards never yields inf or
nan in values or gradients.

``inplace=True`` (and the ``relu_``/``elu_``/... forms) writes the result into the input
and returns it, as PyTorch: on a vtl tensor with the rules of vtl's in-place operators (a
leaf that requires grad is refused while grad mode is on; the tensor takes over the
result's history; its version counter moves, so a backward that saved it raises); on
another array-API array by ``input[...] = result`` where the array can be written. The
result is computed out of place first, so the write saves no memory.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

from ... import _autocast
from ..._ops._core import ONE_INPUT, _grad, new, record, record_op
from ..._tensor import Tensor
from ...backends._dtypes import kind as _dkind
from ._utils import apply_inplace, erfc, namespace, normalize_dim

__all__ = [
    "celu", "celu_", "elu", "elu_", "gelu", "glu", "hardshrink", "hardsigmoid", "hardswish",
    "hardtanh", "hardtanh_", "leaky_relu", "leaky_relu_", "logsigmoid", "mish", "prelu", "relu",
    "relu6", "relu_", "rrelu", "rrelu_", "selu", "selu_", "sigmoid", "silu", "softplus",
    "softshrink", "softsign", "swish", "tanh", "tanhshrink", "threshold", "threshold_",
]

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def relu(input: Any, inplace: bool = False) -> Any:  # noqa: A002 - PyTorch's argument name
    """``max(x, 0)``; derivative 0 at 0; nan stays nan (its gradient passes through,
    as PyTorch's). One recorded node on real floating vtl tensors; integer tensors
    keep their dtype.

    Args:
        input: The input tensor.
        inplace: Write the result into ``input`` and return it.

    Returns:
        A tensor of the input's shape.
    """
    if inplace:
        return apply_inplace(input, relu, "relu")
    if input.__class__ is Tensor or isinstance(input, Tensor):
        d = input._data
        if _dkind(d.dtype) == "f":
            dev = input._device
            kern = dev.backend.kernel("relu")
            out = None if kern is None else kern(d)
            if out is None:
                out = dev.xp.maximum(d, 0)
            if input._requires_grad and _grad.enabled:
                return record_op(out, dev, "ReluBackward", input, ONE_INPUT,
                                 partial(_relu_vjp, input), (input,), None)
            return new(out, dev)
        if _dkind(d.dtype) in "iu":  # integers stay integers (as PyTorch)
            return new(input._device.xp.maximum(d, 0), input._device)
    xp = namespace(input)
    return xp.where(input <= 0, 0.0, input)


def _relu_vjp(x: Tensor, g: Tensor, _: Any) -> Tensor:
    if not (_grad.enabled and g._requires_grad):  # plain backward: raw arrays
        dev = g._device
        kern = dev.backend.kernel("relu_backward")
        r = None if kern is None else kern(x._data, g._data)
        return new(dev.xp.where(x._data <= 0, 0, g._data) if r is None else r, dev)
    import vtl

    return vtl.where(x <= 0, 0.0, g)


def relu6(input: Any, inplace: bool = False) -> Any:  # noqa: A002
    """``min(max(x, 0), 6)``.

    Args:
        input: The input tensor.
        inplace: Write the result into ``input`` and return it.

    Returns:
        A tensor of the input's shape.
    """
    if inplace:
        return apply_inplace(input, relu6, "relu6")
    return hardtanh(input, 0.0, 6.0)


def leaky_relu(input: Any, negative_slope: float = 0.01, inplace: bool = False  # noqa: A002
               ) -> Any:
    """``x`` for ``x > 0``, else ``negative_slope * x``.

    Args:
        input: The input tensor.
        negative_slope: Slope for negative inputs.
        inplace: Write the result into ``input`` and return it.

    Returns:
        A tensor of the input's shape.
    """
    if inplace:
        return apply_inplace(input, partial(leaky_relu, negative_slope=negative_slope),
                             "leaky_relu")
    xp = namespace(input)
    return xp.where(input > 0, input, input * negative_slope)


def rrelu(input: Any, lower: float = 1.0 / 8.0, upper: float = 1.0 / 3.0,  # noqa: A002
          training: bool = False, inplace: bool = False, *, generator: Any = None) -> Any:
    """Randomized leaky ReLU: ``x`` for ``x >= 0``, else ``a * x``.

    In training mode each element draws its own slope ``a ~ U(lower, upper)`` from
    ``generator`` (default: ``vtl.random``'s); otherwise ``a = (lower + upper) / 2``.

    Args:
        input: The input tensor.
        lower: Lower bound of the uniform distribution of slopes.
        upper: Upper bound of the uniform distribution of slopes.
        training: Draw a slope per element; otherwise use ``(lower + upper) / 2``.
        inplace: Write the result into ``input`` and return it.
        generator: A :class:`vtl.random.Generator` to draw from (default: ``vtl.random``'s default
            generator).

    Returns:
        A tensor of the input's shape.

    Raises:
        ValueError: If ``lower > upper``.
        TypeError: If the input is not real floating-point.
    """
    lower, upper = float(lower), float(upper)
    if not lower <= upper:
        raise ValueError(f"rrelu(): lower ({lower}) must not exceed upper ({upper})")
    if inplace:
        return apply_inplace(input, partial(rrelu, lower=lower, upper=upper, training=training,
                                            generator=generator), "rrelu")
    xp = namespace(input)
    if not xp.isdtype(input.dtype, "real floating"):
        raise TypeError(f"rrelu() needs a real floating-point input, got {input.dtype}")
    if not training:
        return leaky_relu(input, (lower + upper) / 2.0)
    from ... import random

    g = random.default_generator() if generator is None else generator
    u = g._random_like(input, tuple(input.shape))
    slope = xp.astype(u, input.dtype) * (upper - lower) + lower
    return xp.where(input > 0, input, input * slope)


def rrelu_(input: Any, lower: float = 1.0 / 8.0, upper: float = 1.0 / 3.0,  # noqa: A002
           training: bool = False, *, generator: Any = None) -> Any:
    """:func:`rrelu` in place.

    Args:
        input: The input tensor.
        lower: Lower bound of the uniform distribution of slopes.
        upper: Upper bound of the uniform distribution of slopes.
        training: Draw a slope per element; otherwise use ``(lower + upper) / 2``.
        generator: A :class:`vtl.random.Generator` to draw from (default: ``vtl.random``'s default
            generator).

    Returns:
        ``input``, modified in place.
    """
    return rrelu(input, lower, upper, training, True, generator=generator)


def _neg_part(xp: Any, x: Any) -> Any:
    """``x`` where ``x <= 0``, else 0 (input of the exponential branches)."""
    return xp.where(x > 0, 0.0, x)


def elu(input: Any, alpha: float = 1.0, inplace: bool = False) -> Any:  # noqa: A002
    """``x`` for ``x > 0``, else ``alpha * (exp(x) - 1)``.

    Args:
        input: The input tensor.
        alpha: Scale of the negative part.
        inplace: Write the result into ``input`` and return it.

    Returns:
        A tensor of the input's shape.
    """
    if inplace:
        return apply_inplace(input, partial(elu, alpha=alpha), "elu")
    xp = namespace(input)
    return xp.where(input > 0, input, alpha * xp.expm1(_neg_part(xp, input)))


def selu(input: Any, inplace: bool = False) -> Any:  # noqa: A002
    """``scale * elu(x, alpha)`` with the self-normalising constants.

    Args:
        input: The input tensor.
        inplace: Write the result into ``input`` and return it.

    Returns:
        A tensor of the input's shape.
    """
    if inplace:
        return apply_inplace(input, selu, "selu")
    return _SELU_SCALE * elu(input, _SELU_ALPHA)


def celu(input: Any, alpha: float = 1.0, inplace: bool = False) -> Any:  # noqa: A002
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``.

    Args:
        input: The input tensor.
        alpha: The ``alpha`` of the formula (not 0).
        inplace: Write the result into ``input`` and return it.

    Returns:
        A tensor of the input's shape.

    Raises:
        ValueError: If ``alpha`` is 0.
    """
    if alpha == 0:
        raise ValueError("celu(): alpha must not be 0")
    if inplace:
        return apply_inplace(input, partial(celu, alpha=alpha), "celu")
    xp = namespace(input)
    return xp.where(input > 0, input, alpha * xp.expm1(_neg_part(xp, input) / alpha))


def gelu(input: Any, approximate: str = "none") -> Any:  # noqa: A002
    """``x * Phi(x)`` (``approximate='none'``, through an accurate erfc) or
    PyTorch's tanh approximation (``approximate='tanh'``).

    On a real floating tensor it is one graph node: the backend's ``gelu`` kernel (one
    launch each way) where it has one, else the portable formulas on the raw arrays.

    Args:
        input: The input tensor.
        approximate: ``'none'`` (exact) or ``'tanh'``.

    Returns:
        A tensor of the input's shape.

    Raises:
        ValueError: If ``approximate`` is not ``'none'`` or ``'tanh'``.
    """
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu(): approximate must be 'none' or 'tanh', got {approximate!r}")
    if isinstance(input, Tensor) and _dkind(input._data.dtype) == "f":
        return _gelu_tensor(input, approximate)
    return _gelu(namespace(input), input, approximate)


_SQRT1_2 = 1.0 / math.sqrt(2.0)
_SQRT2_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _gelu(xp: Any, x: Any, approximate: str) -> Any:
    """The portable forward (any namespace; raw arrays or tensors)."""
    if approximate == "none":
        return x * (0.5 * erfc(xp, x * -_SQRT1_2))
    inner = _SQRT2_PI * (x + 0.044715 * x * x * x)
    return 0.5 * x * (1.0 + xp.tanh(inner))


def _gelu_grad(xp: Any, x: Any, g: Any, approximate: str) -> Any:
    """``g * d gelu(x) / dx`` (any namespace): ``Phi(x) + x phi(x)`` for the exact form; for
    the tanh form ``(1 + t) / 2 + x (1 - t^2) u' / 2`` with ``t = tanh(u)``."""
    if approximate == "none":
        return g * (0.5 * erfc(xp, x * -_SQRT1_2) + x * xp.exp(-0.5 * x * x) * _INV_SQRT_2PI)
    t = xp.tanh(_SQRT2_PI * (x + 0.044715 * x * x * x))
    du = _SQRT2_PI * (1.0 + 3.0 * 0.044715 * x * x)
    return g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du)


def _gelu_tensor(x: Tensor, approximate: str) -> Tensor:
    dev = x._device
    xd = x._data
    kern = dev.backend.kernel("gelu")
    out = None
    if kern is not None and kern.supports(xd.dtype):
        out = kern.forward(xd, approximate)
    if out is None:
        kern = None
        out = _gelu(dev.xp, xd, approximate)
    if x._requires_grad and _grad.enabled:
        return record_op(out, dev, "GeluBackward", x, ONE_INPUT,
                         partial(_gelu_vjp, kern, x, approximate), (x,), None)
    return new(out, dev)


def _gelu_vjp(kern: Any, x: Tensor, approximate: str, g: Tensor, _: Any) -> Tensor:
    if not _grad.enabled:  # plain backward: raw arrays (create_graph: the rule below)
        dev = g._device
        r = None if kern is None else kern.backward(x._data, g._data, approximate)
        return new(_gelu_grad(dev.xp, x._data, g._data, approximate) if r is None else r, dev)
    import vtl

    return _gelu_grad(vtl, x, g, approximate)


def sigmoid(input: Any) -> Any:  # noqa: A002
    """``1 / (1 + exp(-x))``, evaluated through ``exp(-|x|)`` (no overflow).

    Args:
        input: The input tensor.

    Returns:
        A tensor of the input's shape.
    """
    if isinstance(input, Tensor) and _dkind(input._data.dtype) == "f":
        return _sigmoid_tensor(input)
    return _sigmoid_raw(namespace(input), input)


def _sigmoid_tensor(x: Tensor) -> Tensor:
    """sigmoid of a float tensor as ONE graph node: the formula on the raw arrays, and a
    backward ``g s (1 - s)`` from the output alone."""
    dev = x._device
    out = _sigmoid_raw(dev.xp, x._data)
    if x._requires_grad and _grad.enabled:
        return record(out, dev, "SigmoidBackward", (x,), _sigmoid_vjp, save_output=True)
    return new(out, dev)


def _sigmoid_vjp(g: Tensor, out: Tensor) -> Tensor:
    if not _grad.enabled:  # plain backward: raw arrays (create_graph: the rule below)
        s = out._data
        return new(g._data * s * (1.0 - s), g._device)
    return g * out * (1.0 - out)


def tanh(input: Any) -> Any:  # noqa: A002
    """Hyperbolic tangent.

    Args:
        input: The input tensor.

    Returns:
        A tensor of the input's shape.
    """
    return namespace(input).tanh(input)


def silu(input: Any, inplace: bool = False) -> Any:  # noqa: A002
    """``x * sigmoid(x)`` (also called swish).

    Args:
        input: The input tensor.
        inplace: Write the result into ``input`` and return it.

    Returns:
        A tensor of the input's shape.
    """
    if inplace:
        return apply_inplace(input, silu, "silu")
    if isinstance(input, Tensor) and _dkind(input._data.dtype) == "f":
        return _silu_tensor(input)
    return input * sigmoid(input)


def _sigmoid_raw(xp: Any, x: Any) -> Any:
    """``sigmoid(x)`` through ``exp(-|x|)`` (no overflow) with the namespace ``xp``: raw
    arrays, or tensors on the general path."""
    pos = x >= 0
    e = xp.exp(xp.where(pos, -x, x))
    return xp.where(pos, 1.0 / (1.0 + e), e / (1.0 + e))


def _silu_tensor(x: Tensor) -> Tensor:
    """silu of a float tensor as ONE graph node: the backend's ``silu`` kernel (one launch
    each way) where it has one, else the portable formula on the raw arrays."""
    dev = x._device
    xd = x._data
    kern = dev.backend.kernel("silu")
    out = None
    if kern is not None and kern.supports(xd.dtype):
        out = kern.forward(xd)
    if out is None:
        kern = None
        out = xd * _sigmoid_raw(dev.xp, xd)
    if x._requires_grad and _grad.enabled:
        return record_op(out, dev, "SiluBackward", x, ONE_INPUT, partial(_silu_vjp, kern, x),
                         (x,), None)
    return new(out, dev)


def _silu_vjp(kern: Any, x: Tensor, g: Tensor, _: Any) -> Tensor:
    """``g s (1 + x (1 - s))`` with ``s = sigmoid(x)``."""
    if not _grad.enabled:  # plain backward: raw arrays (create_graph: the rule below)
        dev = g._device
        r = None if kern is None else kern.backward(x._data, g._data)
        if r is None:
            s = _sigmoid_raw(dev.xp, x._data)
            r = g._data * s * (1.0 + x._data * (1.0 - s))
        return new(r, dev)
    s = sigmoid(x)
    return g * s * (1.0 + x * (1.0 - s))


swish = silu


def softplus(input: Any, beta: float = 1.0, threshold: float = 20.0) -> Any:  # noqa: A002
    """``log(1 + exp(beta * x)) / beta``; linear where ``beta * x > threshold``.

    Evaluated as ``max(z, 0) + log1p(exp(-|z|))`` with ``z = beta * x``.

    Args:
        input: The input tensor.
        beta: The ``beta`` of the formula.
        threshold: Where ``beta * x > threshold`` the result is ``x``.

    Returns:
        A tensor of the input's shape.
    """
    xp = namespace(input)
    z = input * beta if beta != 1 else input
    pos = z > 0
    zp = xp.where(pos, z, 0.0)
    zn = xp.where(pos, 0.0, z)
    sp = xp.where(pos, zp + xp.log1p(xp.exp(-zp)), xp.log1p(xp.exp(zn)))
    if beta != 1:
        sp = sp / beta
    return xp.where(z > threshold, input, sp)


def logsigmoid(input: Any) -> Any:  # noqa: A002
    """``log(sigmoid(x)) = -softplus(-x)``, stable for large ``|x|``.

    Args:
        input: The input tensor.

    Returns:
        A tensor of the input's shape.
    """
    return -softplus(-input, 1.0, math.inf)


def mish(input: Any, inplace: bool = False) -> Any:  # noqa: A002
    """``x * tanh(softplus(x))``.

    Args:
        input: The input tensor.
        inplace: Write the result into ``input`` and return it.

    Returns:
        A tensor of the input's shape.
    """
    if inplace:
        return apply_inplace(input, mish, "mish")
    xp = namespace(input)
    return input * xp.tanh(softplus(input, 1.0, math.inf))


def hardtanh(input: Any, min_val: float = -1.0, max_val: float = 1.0,  # noqa: A002
             inplace: bool = False) -> Any:
    """``clip(x, min_val, max_val)``; derivative 1 strictly inside, else 0.

    Args:
        input: The input tensor.
        min_val: Lower end of the linear region.
        max_val: Upper end of the linear region.
        inplace: Write the result into ``input`` and return it.

    Returns:
        A tensor of the input's shape.

    Raises:
        ValueError: If ``min_val > max_val``.
    """
    if min_val > max_val:
        raise ValueError(f"hardtanh(): min_val ({min_val}) must not exceed max_val ({max_val})")
    if inplace:
        return apply_inplace(input, partial(hardtanh, min_val=min_val, max_val=max_val),
                             "hardtanh")
    xp = namespace(input)
    inner = xp.where(input <= min_val, float(min_val), input)
    return xp.where(input >= max_val, float(max_val), inner)


def hardsigmoid(input: Any, inplace: bool = False) -> Any:  # noqa: A002
    """``0`` for ``x <= -3``, ``1`` for ``x >= 3``, else ``x / 6 + 1/2``.

    Args:
        input: The input tensor.
        inplace: Write the result into ``input`` and return it.

    Returns:
        A tensor of the input's shape.
    """
    if inplace:
        return apply_inplace(input, hardsigmoid, "hardsigmoid")
    return hardtanh(input / 6.0 + 0.5, 0.0, 1.0)


def hardswish(input: Any, inplace: bool = False) -> Any:  # noqa: A002
    """``0`` for ``x <= -3``, ``x`` for ``x >= 3``, else ``x * (x + 3) / 6``
    (derivative 0 at -3 and 1 at 3, as PyTorch).

    Args:
        input: The input tensor.
        inplace: Write the result into ``input`` and return it.

    Returns:
        A tensor of the input's shape.
    """
    if inplace:
        return apply_inplace(input, hardswish, "hardswish")
    xp = namespace(input)
    mid = input * (input + 3.0) / 6.0
    return xp.where(input <= -3.0, 0.0, xp.where(input < 3.0, mid, input))


def softsign(input: Any) -> Any:  # noqa: A002
    """``x / (1 + |x|)``.

    Args:
        input: The input tensor.

    Returns:
        A tensor of the input's shape.
    """
    xp = namespace(input)
    return input / (1.0 + xp.abs(input))


def tanhshrink(input: Any) -> Any:  # noqa: A002
    """``x - tanh(x)``.

    Args:
        input: The input tensor.

    Returns:
        A tensor of the input's shape.
    """
    return input - namespace(input).tanh(input)


def softshrink(input: Any, lambd: float = 0.5) -> Any:  # noqa: A002
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, else 0.

    Args:
        input: The input tensor.
        lambd: The threshold (at least 0).

    Returns:
        A tensor of the input's shape.

    Raises:
        ValueError: If ``lambd`` is negative.
    """
    if lambd < 0:
        raise ValueError(f"softshrink(): lambd must be >= 0, got {lambd}")
    xp = namespace(input)
    return xp.where(input > lambd, input - lambd,
                    xp.where(input < -lambd, input + lambd, input * 0.0))  # nan stays nan


def hardshrink(input: Any, lambd: float = 0.5) -> Any:  # noqa: A002
    """``x`` where ``|x| > lambd``, else 0.

    Args:
        input: The input tensor.
        lambd: The threshold.

    Returns:
        A tensor of the input's shape.
    """
    xp = namespace(input)
    return xp.where((input >= -lambd) & (input <= lambd), 0.0, input)


def threshold(input: Any, threshold: float, value: float,  # noqa: A002
              inplace: bool = False) -> Any:
    """``x`` where ``x > threshold``, else ``value``.

    Args:
        input: The input tensor.
        threshold: The value to compare with.
        value: The value of the elements at or below ``threshold``.
        inplace: Write the result into ``input`` and return it.

    Returns:
        A tensor of the input's shape.
    """
    if inplace:
        return apply_inplace(input, partial(_threshold, threshold=threshold, value=value),
                             "threshold")
    return _threshold(input, threshold, value)


def _threshold(input: Any, threshold: float, value: float) -> Any:  # noqa: A002
    xp = namespace(input)
    return xp.where(input <= threshold, float(value), input)


def prelu(input: Any, weight: Any) -> Any:  # noqa: A002
    """``x`` for ``x > 0``, else ``weight * x``; ``weight`` has one element or one per
    channel (axis 1 of the input).

    Args:
        input: The input tensor.
        weight: The slopes: one element, or one per channel (axis 1 of the input).

    Returns:
        A tensor of the input's shape.

    Raises:
        ValueError: If ``weight`` is not 1-D or its size is neither 1 nor the number of channels.
    """
    xp = namespace(input, weight)
    if weight.ndim != 1:
        raise ValueError(f"prelu(): weight must be 1-D, got shape {tuple(weight.shape)}")
    n = weight.shape[0]
    if n != 1:
        if input.ndim < 2 or input.shape[1] != n:
            raise ValueError(
                f"prelu(): weight has {n} elements but the input (shape "
                f"{tuple(input.shape)}) has {input.shape[1] if input.ndim >= 2 else 1} "
                "channels on axis 1"
            )
        weight = xp.reshape(weight, (n,) + (1,) * (input.ndim - 2))
    elif input.ndim == 0:
        weight = xp.reshape(weight, ())
    return xp.where(input > 0, input, weight * input)


def glu(input: Any, dim: int = -1) -> Any:  # noqa: A002
    """``a * sigmoid(b)`` where ``a, b`` are the halves of ``input`` along ``dim``.

    Args:
        input: The input tensor.
        dim: The axis split in halves ``a, b``; its size must be even.

    Returns:
        A tensor whose ``dim`` axis is half the input's.

    Raises:
        ValueError: If the size of ``dim`` is odd.
    """
    xp = namespace(input)
    d = normalize_dim(dim, input.ndim, "glu")
    n = input.shape[d] if input.ndim else 0
    if input.ndim == 0 or n % 2:
        raise ValueError(f"glu(): dim {dim} must have even size, got shape "
                         f"{tuple(input.shape)}")
    lead = (slice(None),) * d
    a = input[lead + (slice(0, n // 2),)]
    b = input[lead + (slice(n // 2, n),)]
    del xp
    return a * sigmoid(b)


# -- PyTorch's in-place forms ------------------------------------------------------------
def relu_(input: Any) -> Any:  # noqa: A002
    """``relu(input, inplace=True)``.

    Args:
        input: The input tensor.

    Returns:
        ``input``, modified in place.
    """
    return relu(input, inplace=True)


def elu_(input: Any, alpha: float = 1.0) -> Any:  # noqa: A002
    """``elu(input, alpha, inplace=True)``.

    Args:
        input: The input tensor.
        alpha: Scale of the negative part.

    Returns:
        ``input``, modified in place.
    """
    return elu(input, alpha, inplace=True)


def leaky_relu_(input: Any, negative_slope: float = 0.01) -> Any:  # noqa: A002
    """``leaky_relu(input, negative_slope, inplace=True)``.

    Args:
        input: The input tensor.
        negative_slope: Slope for negative inputs.

    Returns:
        ``input``, modified in place.
    """
    return leaky_relu(input, negative_slope, inplace=True)


def hardtanh_(input: Any, min_val: float = -1.0, max_val: float = 1.0) -> Any:  # noqa: A002
    """``hardtanh(input, min_val, max_val, inplace=True)``.

    Args:
        input: The input tensor.
        min_val: Lower end of the linear region.
        max_val: Upper end of the linear region.

    Returns:
        ``input``, modified in place.
    """
    return hardtanh(input, min_val, max_val, inplace=True)


def threshold_(input: Any, threshold: float, value: float) -> Any:  # noqa: A002
    """``threshold(input, threshold, value, inplace=True)``.

    Args:
        input: The input tensor.
        threshold: The value to compare with.
        value: The value of the elements at or below ``threshold``.

    Returns:
        ``input``, modified in place.
    """
    return apply_inplace(input, partial(_threshold, threshold=threshold, value=value),
                         "threshold")


def celu_(input: Any, alpha: float = 1.0) -> Any:  # noqa: A002
    """``celu(input, alpha, inplace=True)``.

    Args:
        input: The input tensor.
        alpha: The ``alpha`` of the formula (not 0).

    Returns:
        ``input``, modified in place.
    """
    return celu(input, alpha, inplace=True)


def selu_(input: Any) -> Any:  # noqa: A002
    """``selu(input, inplace=True)``.

    Args:
        input: The input tensor.

    Returns:
        ``input``, modified in place.
    """
    return selu(input, inplace=True)


# autocast (vtl.amp): the list each op belongs to
_autocast.apply(globals(), low_ops=('prelu',), float32_ops=('softplus',))
