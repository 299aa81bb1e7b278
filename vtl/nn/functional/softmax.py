"""softmax, log_softmax, softmin, logsumexp and gumbel_softmax; the first four in their
numerically stable forms (the maximum is subtracted first and kept out of the graph: the result
does not depend on it)."""

from __future__ import annotations

import math
import warnings
from functools import partial
from typing import Any

from ... import _autocast
from ..._ops._aliases import torch_names
from ..._ops._core import _grad, needs_grad, new, record
from ..._tensor import Tensor
from ._utils import detach, namespace, normalize_dim

__all__ = ["gumbel_softmax", "log_softmax", "logsumexp", "softmax", "softmin"]


def _implicit_dim(ndim: int, fname: str) -> int:
    warnings.warn(
        f"Implicit dimension choice for {fname} has been deprecated. "
        "Change the call to include dim=X as an argument.",
        UserWarning, stacklevel=3,
    )
    return 0 if ndim in (0, 1, 3) else 1


def _prepare(input: Any, dim: int | None, dtype: Any, fname: str) -> tuple[Any, Any, int]:  # noqa: A002
    xp = namespace(input)
    if dtype is not None:
        input = xp.astype(input, dtype)
    if not xp.isdtype(input.dtype, "real floating"):
        raise TypeError(f"{fname}() needs a real floating-point input, got {input.dtype}")
    if dim is None:
        dim = _implicit_dim(input.ndim, fname)
    return xp, input, normalize_dim(dim, input.ndim, fname)


def _shifted(xp: Any, x: Any, d: int) -> Any:
    """``x - max(x, axis=d)`` with a finite, constant shift (0 where the max is inf)."""
    if x.shape[d] == 0:  # an empty axis: nothing to shift (and no maximum to take)
        return x
    m = detach(xp.max(x, axis=d, keepdims=True))
    m = xp.where(xp.isfinite(m), m, 0.0)
    return x - m


@torch_names(axis="dim", origin="The array API")
def softmax(input: Any, dim: int | None = None, dtype: Any = None) -> Any:  # noqa: A002
    """``exp(x) / sum(exp(x))`` along ``dim`` (cast to ``dtype`` first if given).

    ``dim=None`` picks PyTorch's legacy implicit dimension with its warning.

    Args:
        input: The input tensor.
        dim: The axis (``None``: PyTorch's legacy implicit choice, with a warning).
        dtype: If given, ``input`` is cast to this dtype first.
        axis: The array API's name for ``dim`` (give one of the two).

    Returns:
        A tensor of the input's shape.

    Raises:
        TypeError: If the input is not real floating-point or a parameter is given under both
            names.

    Example:
        >>> F = nn.functional
        >>> [round(v, 4) for v in F.softmax(vtl.asarray([1.0, 1.0, 2.0]), dim=0).tolist()]
        [0.2119, 0.2119, 0.5761]
    """
    xp, x, d = _prepare(input, dim, dtype, "softmax")
    if x.ndim == 0:
        return xp.exp(x - x)
    if isinstance(x, Tensor) and x.shape[d]:
        return _softmax_tensor(x, d, False)
    e = xp.exp(_shifted(xp, x, d))
    return e / xp.sum(e, axis=d, keepdims=True)


@torch_names(axis="dim", origin="The array API")
def softmin(input: Any, dim: int | None = None, dtype: Any = None) -> Any:  # noqa: A002
    """``softmax(-x)``.

    Args:
        input: The input tensor.
        dim: The axis (``None``: PyTorch's legacy implicit choice, with a warning).
        dtype: If given, ``input`` is cast to this dtype first.
        axis: The array API's name for ``dim`` (give one of the two).

    Returns:
        A tensor of the input's shape.

    Raises:
        TypeError: If the input is not real floating-point or a parameter is given under both
            names.
    """
    xp, x, d = _prepare(input, dim, dtype, "softmin")
    del xp
    return softmax(-x, d)


@torch_names(axis="dim", origin="The array API")
def log_softmax(input: Any, dim: int | None = None, dtype: Any = None) -> Any:  # noqa: A002
    """``x - logsumexp(x)`` along ``dim``.

    Args:
        input: The input tensor.
        dim: The axis (``None``: PyTorch's legacy implicit choice, with a warning).
        dtype: If given, ``input`` is cast to this dtype first.
        axis: The array API's name for ``dim`` (give one of the two).

    Returns:
        A tensor of the input's shape.

    Raises:
        TypeError: If the input is not real floating-point or a parameter is given under both
            names.
    """
    xp, x, d = _prepare(input, dim, dtype, "log_softmax")
    if x.ndim == 0 or x.shape[d] == 0:
        return x - x
    if isinstance(x, Tensor):
        return _softmax_tensor(x, d, True)
    z = _shifted(xp, x, d)
    return z - xp.log(xp.sum(xp.exp(z), axis=d, keepdims=True))


def _kernel(dev: Any, x: Any, d: int) -> Any:
    """The backend's ``softmax`` kernel where it takes rows along the last axis ``d`` of
    ``x``'s dtype, else ``None``."""
    if d != x.ndim - 1:
        return None
    kern = dev.backend.kernel("softmax")
    return kern if kern is not None and kern.supports(x.dtype) else None


def _softmax_tensor(x: Tensor, d: int, log: bool) -> Tensor:
    """softmax (``log``: log_softmax) of a tensor along axis ``d`` as ONE graph node: the
    backend's ``softmax`` kernel over the last axis (one launch each way), else the same
    stable formula on the raw arrays; a backward from the output alone (``y (g - sum(g
    y))``, or ``g - exp(y) sum(g)``) instead of autograd through the passes."""
    dev = x._device
    xp = dev.xp
    kern = _kernel(dev, x._data, d)
    out = None if kern is None else kern.forward(x._data, log)
    if out is None:
        z = _shifted(xp, x._data, d)
        if log:
            out = z - xp.log(xp.sum(xp.exp(z), axis=d, keepdims=True))
        else:
            e = xp.exp(z)
            out = e / xp.sum(e, axis=d, keepdims=True)
    if needs_grad(x):
        return record(out, dev, "LogSoftmaxBackward" if log else "SoftmaxBackward", (x,),
                      partial(_softmax_vjp, d, log), save_output=True)
    return new(out, dev)


def _softmax_vjp(d: int, log: bool, g: Tensor, out: Tensor) -> Tensor:
    if not _grad.enabled:  # plain backward: raw arrays (create_graph: the rule below)
        dev = g._device
        xp = dev.xp
        gd, yd = g._data, out._data
        kern = _kernel(dev, yd, d)
        dx = None if kern is None or gd.dtype != yd.dtype else kern.backward(yd, gd, log)
        if dx is not None:
            return new(dx, dev)
        if log:
            return new(gd - xp.exp(yd) * xp.sum(gd, axis=d, keepdims=True), dev)
        return new(yd * (gd - xp.sum(gd * yd, axis=d, keepdims=True)), dev)
    import vtl

    if log:
        return g - vtl.exp(out) * vtl.sum(g, axis=d, keepdims=True)
    return out * (g - vtl.sum(g * out, axis=d, keepdims=True))


@torch_names(axis="dim", keepdims="keepdim", origin="The array API")
def logsumexp(input: Any, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A002
    """``log(sum(exp(x)))`` over ``dim`` (an int, a tuple, or None for all axes).

    Rows of ``-inf`` give ``-inf``; a ``+inf`` entry gives ``inf``; a reduction over an
    empty axis gives ``-inf`` (the log of an empty sum).

    Args:
        input: The input tensor.
        dim: An int, a tuple of ints, or ``None`` for all axes.
        keepdim: Keep the reduced axes (size 1).
        axis: The array API's name for ``dim`` (give one of the two).
        keepdims: The array API's name for ``keepdim`` (give one of the two).

    Returns:
        The reduced tensor.

    Raises:
        TypeError: If the input is not real floating-point or a parameter is given under both
            names.
    """
    xp = namespace(input)
    if not xp.isdtype(input.dtype, "real floating"):
        raise TypeError(f"logsumexp() needs a real floating-point input, got {input.dtype}")
    if dim is None:
        axes = tuple(range(input.ndim))
    elif isinstance(dim, int):
        axes = (normalize_dim(dim, input.ndim, "logsumexp"),)
    else:
        axes = tuple(normalize_dim(a, input.ndim, "logsumexp") for a in dim)
    if input.ndim == 0:
        return input
    if any(input.shape[a] == 0 for a in axes):  # log of an empty sum: -inf, as PyTorch
        out = xp.sum(input, axis=axes, keepdims=True) - math.inf
    else:
        m = detach(xp.max(input, axis=axes, keepdims=True))
        m = xp.where(xp.isfinite(m), m, 0.0)
        out = xp.log(xp.sum(xp.exp(input - m), axis=axes, keepdims=True)) + m
    if not keepdim:
        out = xp.squeeze(out, axis=axes)
    return out


def gumbel_softmax(logits: Any, tau: float = 1.0, hard: bool = False, eps: float = 1e-10,
                   dim: int = -1, *, generator: Any = None) -> Any:
    """Samples from the Gumbel-softmax (Concrete) distribution, as PyTorch.

    ``y = softmax((logits + g) / tau, dim)`` with ``g = -log(E)``, ``E ~ Exp(1)`` drawn
    from ``generator`` (default: ``vtl.random``'s). With ``hard=True`` the result is the
    one-hot vector of ``argmax(y)`` in the forward pass while the gradient is that of
    ``y`` (the straight-through estimator: ``y_hard - detach(y) + y``). ``eps`` is
    deprecated and unused (a value other than the default warns, as PyTorch).

    Args:
        logits: Unnormalised log-probabilities.
        tau: The temperature (positive).
        hard: Return one-hot vectors (with the soft gradient).
        eps: Deprecated and unused, as in PyTorch (a value other than the default warns).
        dim: The class axis.
        generator: A :class:`vtl.random.Generator` to draw from (default: ``vtl.random``'s default
            generator).

    Returns:
        A tensor of the logits' shape.

    Raises:
        TypeError: If ``logits`` is not real floating-point or ``tau`` is not a number.
    """
    from ... import random

    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", UserWarning,
                      stacklevel=2)
    xp = namespace(logits)
    if not xp.isdtype(logits.dtype, "real floating"):
        raise TypeError(f"gumbel_softmax() needs real floating-point logits, got "
                        f"{logits.dtype}")
    if isinstance(tau, bool) or not isinstance(tau, (int, float)):
        raise TypeError(f"gumbel_softmax(): tau must be a number, got {type(tau).__name__}")
    d = normalize_dim(dim, max(logits.ndim, 1), "gumbel_softmax")
    gen = random.default_generator() if generator is None else generator
    u = xp.astype(gen._random_like(detach(logits), tuple(logits.shape)), logits.dtype)
    # E = -log(1 - u) ~ Exp(1) for u uniform in [0, 1); clamped away from 0 (u == 0)
    e = xp.maximum(-xp.log1p(-u), xp.finfo(logits.dtype).smallest_normal)
    y_soft = softmax((logits - xp.log(e)) / tau, dim=d)
    if not hard:
        return y_soft
    if logits.ndim == 0:
        return y_soft - detach(y_soft) + 1.0
    idx = xp.argmax(detach(y_soft), axis=d, keepdims=True)
    n = logits.shape[d]
    pos = xp.reshape(xp.arange(n, dtype=idx.dtype, device=logits.device),
                     (n,) + (1,) * (logits.ndim - 1 - d))
    y_hard = xp.astype(pos == idx, logits.dtype)
    return y_hard - detach(y_soft) + y_soft


# autocast (vtl.amp): the list each op belongs to
_autocast.apply(globals(), float32_ops=('log_softmax', 'logsumexp', 'softmax', 'softmin'))
