"""Normalisation: layer_norm, batch_norm, group_norm and instance_norm.

Statistics use the biased variance (divide by ``n``) for normalising, as
PyTorch; ``batch_norm`` in training mode updates the running statistics in
place, outside the graph, with the unbiased variance (``n / (n - 1)``).
"""

from __future__ import annotations

import math
from typing import Any

from ..._tensor import Tensor
from ._utils import detach, namespace

__all__ = ["batch_norm", "group_norm", "instance_norm", "layer_norm"]


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(x.shape)


def _check_float(xp: Any, x: Any, fname: str) -> None:
    if not xp.isdtype(x.dtype, "real floating"):
        raise TypeError(f"{fname}() needs a real floating-point input, got {x.dtype}")


def _normalize(xp: Any, x: Any, axes: tuple[int, ...], eps: float) -> tuple[Any, Any, Any]:
    """``(x - mean) / sqrt(var + eps)`` over ``axes`` with the biased variance; also
    returns the mean and variance (keepdims)."""
    mean = xp.mean(x, axis=axes, keepdims=True)
    d = x - mean
    var = xp.mean(d * d, axis=axes, keepdims=True)
    return d / xp.sqrt(var + eps), mean, var


def _affine(xp: Any, out: Any, weight: Any, bias: Any, shape: tuple[int, ...]) -> Any:
    if weight is not None:
        out = out * xp.reshape(weight, shape)
    if bias is not None:
        out = out + xp.reshape(bias, shape)
    return out


def layer_norm(input: Any, normalized_shape: Any, weight: Any = None, bias: Any = None,  # noqa: A002
               eps: float = 1e-5) -> Any:
    """Normalise over the trailing ``normalized_shape`` axes, then scale by ``weight``
    and shift by ``bias`` (both of shape ``normalized_shape``)."""
    xp = namespace(input, weight, bias)
    _check_float(xp, input, "layer_norm")
    ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(ns)
    if k == 0 or input.ndim < k or _shape(input)[input.ndim - k:] != ns:
        raise ValueError(f"layer_norm(): input of shape {_shape(input)} does not end with "
                         f"normalized_shape {ns}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and _shape(t) != ns:
            raise ValueError(f"layer_norm(): {name} must have shape {ns}, got {_shape(t)}")
    axes = tuple(range(input.ndim - k, input.ndim))
    out, _, _ = _normalize(xp, input, axes, eps)
    return _affine(xp, out, weight, bias, ns)


def _write(buf: Any, value: Any) -> None:
    """``buf[...] = value`` outside the graph (running statistics are buffers)."""
    xp = namespace(buf)
    value = xp.astype(detach(value), buf.dtype)
    if isinstance(buf, Tensor):
        import vtl

        with vtl.no_grad():
            buf[...] = value
    else:
        buf[...] = value


def batch_norm(input: Any, running_mean: Any, running_var: Any, weight: Any = None,  # noqa: A002
               bias: Any = None, training: bool = False, momentum: float = 0.1,
               eps: float = 1e-5) -> Any:
    """Normalise each channel (axis 1) of ``(N, C, *)`` inputs.

    In training mode the batch statistics are used and, when given, the running
    statistics are updated in place: ``running = (1 - momentum) * running +
    momentum * batch`` (unbiased variance). In eval mode the running statistics
    are used (they must be given).
    """
    xp = namespace(input, running_mean, running_var, weight, bias)
    _check_float(xp, input, "batch_norm")
    if input.ndim < 2:
        raise ValueError(f"batch_norm(): expected an input of shape (N, C, *), got "
                         f"{_shape(input)}")
    c = input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        if t is not None and _shape(t) != (c,):
            raise ValueError(f"batch_norm(): {name} must have shape ({c},) for input of shape "
                             f"{_shape(input)}, got {_shape(t)}")
    shape = (1, c) + (1,) * (input.ndim - 2)
    if training:
        axes = (0, *range(2, input.ndim))
        n = math.prod(input.shape[a] for a in axes)
        if n == 0:  # an empty batch: an empty result, the running statistics unchanged
            return _affine(xp, input, weight, bias, shape)
        if n == 1:
            raise ValueError(f"batch_norm(): expected more than 1 value per channel when "
                             f"training, got input of shape {_shape(input)}")
        out, mean, var = _normalize(xp, input, axes, eps)
        if running_mean is not None:
            _write(running_mean, (1.0 - momentum) * detach(running_mean)
                   + momentum * xp.reshape(detach(mean), (c,)))
        if running_var is not None:
            _write(running_var, (1.0 - momentum) * detach(running_var)
                   + (momentum * n / (n - 1)) * xp.reshape(detach(var), (c,)))
    else:
        if running_mean is None or running_var is None:
            raise ValueError("batch_norm(): running_mean and running_var are required in "
                             "eval mode (training=False)")
        rm = xp.astype(xp.reshape(running_mean, shape), input.dtype)
        rv = xp.astype(xp.reshape(running_var, shape), input.dtype)
        out = (input - rm) / xp.sqrt(rv + eps)
    return _affine(xp, out, weight, bias, shape)


def group_norm(input: Any, num_groups: int, weight: Any = None, bias: Any = None,  # noqa: A002
               eps: float = 1e-5) -> Any:
    """Normalise ``(N, C, *)`` inputs over groups of ``C / num_groups`` channels (and all
    spatial positions), then apply the per-channel ``weight`` and ``bias``."""
    xp = namespace(input, weight, bias)
    _check_float(xp, input, "group_norm")
    if input.ndim < 2:
        raise ValueError(f"group_norm(): expected an input of shape (N, C, *), got "
                         f"{_shape(input)}")
    n, c = input.shape[:2]
    if num_groups < 1 or c % num_groups:
        raise ValueError(f"group_norm(): {c} channels of input shape {_shape(input)} are not "
                         f"divisible into num_groups={num_groups}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and _shape(t) != (c,):
            raise ValueError(f"group_norm(): {name} must have shape ({c},), got {_shape(t)}")
    x = xp.reshape(input, (n, num_groups, -1))
    out, _, _ = _normalize(xp, x, (2,), eps)
    out = xp.reshape(out, _shape(input))
    return _affine(xp, out, weight, bias, (1, c) + (1,) * (input.ndim - 2))


def instance_norm(input: Any, running_mean: Any = None, running_var: Any = None,  # noqa: A002
                  weight: Any = None, bias: Any = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Any:
    """Normalise each channel of each sample of ``(N, C, *)`` inputs over its spatial
    positions (batch_norm applied per sample)."""
    xp = namespace(input, running_mean, running_var, weight, bias)
    _check_float(xp, input, "instance_norm")
    if input.ndim < 3:
        raise ValueError(f"instance_norm(): expected an input of shape (N, C, L, ...), got "
                         f"{_shape(input)}")
    n, c = input.shape[:2]
    shape = (1, c) + (1,) * (input.ndim - 2)
    if use_input_stats:
        axes = tuple(range(2, input.ndim))
        out, mean, var = _normalize(xp, input, axes, eps)
        m = math.prod(input.shape[2:])
        if running_mean is not None:
            _write(running_mean, (1.0 - momentum) * detach(running_mean)
                   + momentum * xp.mean(xp.reshape(detach(mean), (n, c)), axis=0))
        if running_var is not None and m > 1:
            _write(running_var, (1.0 - momentum) * detach(running_var)
                   + (momentum * m / (m - 1)) * xp.mean(xp.reshape(detach(var), (n, c)), axis=0))
    else:
        if running_mean is None or running_var is None:
            raise ValueError("instance_norm(): running statistics are required when "
                             "use_input_stats=False")
        out = (input - xp.reshape(running_mean, shape)) / xp.sqrt(
            xp.reshape(running_var, shape) + eps)
    return _affine(xp, out, weight, bias, shape)
