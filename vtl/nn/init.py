"""Parameter initialisation (``torch.nn.init``): in-place fills drawn from
``vtl.random`` (or ``generator=``), so the same seed gives the same weights on
every backend. Each function writes into ``tensor`` outside the graph and
returns it."""

from __future__ import annotations

import math
import warnings
from typing import Any

import vtl

from .._tensor import Tensor

__all__ = [
    "calculate_gain", "constant_", "dirac_", "eye_", "kaiming_normal_", "kaiming_uniform_",
    "normal_", "ones_", "orthogonal_", "sparse_", "trunc_normal_", "uniform_", "xavier_normal_",
    "xavier_uniform_", "zeros_",
]


def _gen(generator: Any) -> Any:
    return vtl.random.default_generator() if generator is None else generator


def _check(tensor: Any, fname: str) -> None:
    if not isinstance(tensor, Tensor):
        raise TypeError(f"init.{fname}() expects a vtl.Tensor, got {type(tensor).__name__}")


def _write(tensor: Tensor, values: Tensor) -> Tensor:
    with vtl.no_grad():
        if values.dtype != tensor.dtype:
            values = vtl.astype(values, tensor.dtype)
        tensor[...] = values
    return tensor


def _draw_dtype(tensor: Tensor, fname: str) -> Any:
    if tensor.dtype in (vtl.float16, vtl.bfloat16):  # drawn in float32, rounded once
        return vtl.float32
    if tensor.dtype not in (vtl.float32, vtl.float64):
        raise TypeError(f"init.{fname}() needs a floating-point tensor (float16, bfloat16, "
                        f"float32 or float64), got {tensor.dtype}")
    return tensor.dtype


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for a nonlinearity (PyTorch's table)."""
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
              "conv_transpose2d", "conv_transpose3d", "sigmoid")
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = float(param)
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    if tensor.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than "
                         f"2 dimensions (got shape {tuple(tensor.shape)})")
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _fan(tensor: Tensor, mode: str) -> int:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, *, generator: Any = None) -> Tensor:
    """Fill with ``U(a, b)``."""
    _check(tensor, "uniform_")
    if a > b:
        raise ValueError(f"init.uniform_(): a ({a}) must not exceed b ({b})")
    dt = _draw_dtype(tensor, "uniform_")
    return _write(tensor, _gen(generator).uniform(a, b, tensor.shape, dtype=dt,
                                                  device=tensor.device))


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, *,
            generator: Any = None) -> Tensor:
    """Fill with ``N(mean, std^2)``."""
    _check(tensor, "normal_")
    if std < 0:
        raise ValueError(f"init.normal_(): std must be >= 0, got {std}")
    dt = _draw_dtype(tensor, "normal_")
    return _write(tensor, _gen(generator).normal(mean, std, tensor.shape, dtype=dt,
                                                 device=tensor.device))


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0,
                  b: float = 2.0, *, generator: Any = None) -> Tensor:
    """Fill with ``N(mean, std^2)`` truncated to ``[a, b]`` (by redrawing the values
    outside; deterministic for a given generator state)."""
    _check(tensor, "trunc_normal_")
    if not a < b:
        raise ValueError(f"init.trunc_normal_(): need a < b, got a={a}, b={b}")
    dt = _draw_dtype(tensor, "trunc_normal_")
    g = _gen(generator)
    dev = tensor.device
    with vtl.no_grad():
        vals = g.normal(mean, std, tensor.shape, dtype=dt, device=dev)
        for _ in range(1000):
            bad = (vals < a) | (vals > b)
            if not bool(vtl.any(bad)):
                break
            vals = vtl.where(bad, g.normal(mean, std, tensor.shape, dtype=dt, device=dev), vals)
        else:
            raise ValueError(f"init.trunc_normal_(): [{a}, {b}] is too unlikely under "
                             f"N({mean}, {std}^2)")
    return _write(tensor, vals)


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill with ``val``."""
    _check(tensor, "constant_")
    return _write(tensor, vtl.full(tensor.shape, val, dtype=tensor.dtype, device=tensor.device))


def zeros_(tensor: Tensor) -> Tensor:
    """Fill ``tensor`` with zeros, in place, without recording a gradient; returns it.

    Example:
        >>> w = vtl.nn.init.zeros_(vtl.empty((2, 3)))
        >>> float(vtl.sum(w))
        0.0
    """
    return constant_(tensor, 0)


def ones_(tensor: Tensor) -> Tensor:
    """Fill ``tensor`` with ones, in place, without recording a gradient; returns it."""
    return constant_(tensor, 1)


def eye_(tensor: Tensor) -> Tensor:
    """Fill a 2-D tensor with the identity (ones on the main diagonal)."""
    _check(tensor, "eye_")
    if tensor.ndim != 2:
        raise ValueError(f"init.eye_(): only 2-D tensors are supported, got shape "
                         f"{tuple(tensor.shape)}")
    n, m = tensor.shape
    return _write(tensor, vtl.eye(n, m, dtype=tensor.dtype, device=tensor.device))


def _empty_warn(tensor: Tensor, fname: str) -> bool:
    if tensor.size == 0:
        warnings.warn(f"Initializing zero-element tensors is a no-op ({fname})",
                      UserWarning, stacklevel=3)
        return True
    return False


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, *, generator: Any = None) -> Tensor:
    """``U(-a, a)`` with ``a = gain * sqrt(6 / (fan_in + fan_out))`` (Glorot & Bengio)."""
    _check(tensor, "xavier_uniform_")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out)) if fan_in + fan_out else 0.0
    a = math.sqrt(3.0) * std
    return uniform_(tensor, -a, a, generator=generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, *, generator: Any = None) -> Tensor:
    """``N(0, std^2)`` with ``std = gain * sqrt(2 / (fan_in + fan_out))``."""
    _check(tensor, "xavier_normal_")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out)) if fan_in + fan_out else 0.0
    return normal_(tensor, 0.0, std, generator=generator)


def kaiming_uniform_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu", *, generator: Any = None) -> Tensor:
    """``U(-bound, bound)`` with ``bound = gain * sqrt(3 / fan)`` (He et al.), ``gain``
    from :func:`calculate_gain` with ``a`` the negative slope."""
    _check(tensor, "kaiming_uniform_")
    if _empty_warn(tensor, "kaiming_uniform_"):
        return tensor
    fan = _fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator=generator)


def kaiming_normal_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu", *, generator: Any = None) -> Tensor:
    """``N(0, std^2)`` with ``std = gain / sqrt(fan)``."""
    _check(tensor, "kaiming_normal_")
    if _empty_warn(tensor, "kaiming_normal_"):
        return tensor
    fan = _fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return normal_(tensor, 0.0, std, generator=generator)


def orthogonal_(tensor: Tensor, gain: float = 1.0, *, generator: Any = None) -> Tensor:
    """A (semi-)orthogonal matrix (Saxe et al.) from the QR decomposition of a
    normal matrix, signs fixed so the distribution is uniform; tensors with
    more than two dimensions are flattened to ``(shape[0], rest)``."""
    _check(tensor, "orthogonal_")
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported (got shape "
                         f"{tuple(tensor.shape)})")
    if tensor.size == 0:
        return tensor
    dt = _draw_dtype(tensor, "orthogonal_")
    rows = tensor.shape[0]
    cols = tensor.size // rows
    with vtl.no_grad():
        flat = _gen(generator).normal(0.0, 1.0, (rows, cols), dtype=dt, device=tensor.device)
        if rows < cols:
            flat = vtl.matrix_transpose(flat)
        q, r = vtl.linalg.qr(flat)
        d = vtl.linalg.diagonal(r)
        s = vtl.sign(d)
        q = q * vtl.where(s == 0, 1.0, s)
        if rows < cols:
            q = vtl.matrix_transpose(q)
        q = vtl.reshape(q * gain, tensor.shape)
    return _write(tensor, q)


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """Fill a 3-, 4- or 5-D tensor with the Dirac delta: a convolution with it keeps
    the identity of the input channels (as many as fit: ``min(out/groups, in)`` per
    group). With ``groups`` > 1 each of the ``groups`` blocks of ``shape[0] // groups``
    output channels gets its own identity (PyTorch's layout, kernel centre at
    ``size // 2`` along each spatial axis)."""
    _check(tensor, "dirac_")
    if tensor.ndim not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported (got shape "
                         f"{tuple(tensor.shape)})")
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ValueError(f"init.dirac_(): groups must be a positive int, got {groups!r}")
    out_ch, in_ch = tensor.shape[0], tensor.shape[1]
    if out_ch % groups != 0:
        raise ValueError(f"dim 0 must be divisible by groups (got shape {tuple(tensor.shape)} "
                         f"and groups={groups})")
    per_group = out_ch // groups
    dev, dt = tensor.device, tensor.dtype
    with vtl.no_grad():
        # channel part: out channel o (of group o // per_group) maps input channel o % per_group
        o = vtl.arange(out_ch, device=dev) % per_group
        i = vtl.arange(in_ch, device=dev)
        vals = vtl.astype(vtl.reshape(o, (out_ch, 1)) == vtl.reshape(i, (1, in_ch)), dt)
        for size in tensor.shape[2:]:  # one-hot at the centre of each spatial axis
            hot = vtl.astype(vtl.arange(size, device=dev) == size // 2, dt)
            vals = vtl.expand_dims(vals, axis=-1) * hot
    return _write(tensor, vals)


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01, *,
            generator: Any = None) -> Tensor:
    """Fill a 2-D tensor with ``N(0, std^2)`` values and zero ``ceil(sparsity * rows)``
    randomly chosen entries of every column (Martens, 2010), as PyTorch does.

    The zeroed rows of each column are the first ones of an independent random
    permutation of the rows (drawn, after the normal values, from ``generator`` or the
    default ``vtl.random`` generator; ranks of 32-bit random keys, ties broken by row)."""
    _check(tensor, "sparse_")
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported (got shape "
                         f"{tuple(tensor.shape)})")
    if isinstance(sparsity, bool) or not isinstance(sparsity, (int, float)) \
            or not 0.0 <= sparsity <= 1.0:
        raise ValueError(f"init.sparse_(): sparsity must be a number in [0, 1], got {sparsity!r}")
    if std < 0:
        raise ValueError(f"init.sparse_(): std must be >= 0, got {std}")
    dt = _draw_dtype(tensor, "sparse_")
    rows, cols = tensor.shape
    num_zeros = int(math.ceil(sparsity * rows))
    g = _gen(generator)
    dev = tensor.device
    with vtl.no_grad():
        vals = g.normal(0.0, std, (rows, cols), dtype=dt, device=dev)
        if num_zeros and tensor.size:
            keys = g.bits((rows, cols), device=dev)
            rank = vtl.argsort(vtl.argsort(keys, axis=0, stable=True), axis=0, stable=True)
            vals = vtl.where(rank < num_zeros, vtl.zeros((), dtype=dt, device=dev), vals)
    return _write(tensor, vals)
