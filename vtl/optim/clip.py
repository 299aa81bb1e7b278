"""Gradient clipping: ``clip_grad_norm_`` and ``clip_grad_value_`` (in place).

Both work on the raw gradient arrays with standard array-API functions and
never read a value back to the host (the clipping factor stays on the device).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from .._tensor import Tensor, _new
from ..backends._dtypes import kind as _dkind

__all__ = ["clip_grad_norm_", "clip_grad_value_"]


def _grads(parameters: Tensor | Iterable[Tensor]) -> list[Tensor]:
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def _norm(xp: Any, g: Any, norm_type: float) -> Any:
    a = xp.abs(g)  # real also for complex gradients
    if math.isinf(norm_type):
        return xp.max(a) if norm_type > 0 else xp.min(a)
    if norm_type == 2.0:
        return xp.sqrt(xp.sum(a * a))
    if norm_type == 1.0:
        return xp.sum(a)
    if norm_type == 0.0:
        return xp.sum(xp.astype(a != 0, a.dtype))
    return xp.sum(a**norm_type) ** (1.0 / norm_type)


def _combine(xp: Any, norms: list[Any], norm_type: float) -> Any:
    """The ``norm_type`` norm of the vector of the 0-d ``norms`` (each gradient's norm), as
    a pairwise tree of elementwise ops: no stacking (CuPy's ``stack`` of many arrays uploads
    a table of their addresses, a wait for the device that a captured step cannot hold)."""
    if math.isinf(norm_type):
        parts = norms
        op = xp.maximum if norm_type > 0 else xp.minimum
    else:
        if norm_type == 2.0:
            parts = [n * n for n in norms]
        elif norm_type in (0.0, 1.0):
            parts = norms
        else:
            parts = [n ** norm_type for n in norms]
        op = xp.add
    while len(parts) > 1:
        pairs = [op(parts[i], parts[i + 1]) for i in range(0, len(parts) - 1, 2)]
        parts = pairs + ([parts[-1]] if len(parts) % 2 else [])
    total = parts[0]
    if math.isinf(norm_type) or norm_type in (0.0, 1.0):
        return total
    return xp.sqrt(total) if norm_type == 2.0 else total ** (1.0 / norm_type)


def clip_grad_norm_(parameters: Tensor | Iterable[Tensor], max_norm: float,
                    norm_type: float = 2.0, error_if_nonfinite: bool = False,
                    foreach: bool | None = None) -> Tensor:
    """Scale the gradients in place so that their joint ``norm_type`` norm is at most
    ``max_norm``; return the joint norm before clipping (a 0-d Tensor).

    The norm is taken over all gradients as if concatenated into one vector;
    gradients are multiplied by ``min(1, max_norm / (total_norm + 1e-6))``
    (PyTorch's rule). ``foreach`` is accepted for compatibility.
    """
    import vtl

    norm_type = float(norm_type)
    max_norm = float(max_norm)
    grads = _grads(parameters)
    if not grads:
        return vtl.asarray(0.0)
    dev = grads[0]._device
    xp = dev.xp
    norms = []
    for g in grads:
        if g.size == 0:
            continue
        n = _norm(g._device.xp, g._data, norm_type)
        if g._device is not dev:
            n = _new(n, g._device).to(dev)._data
        norms.append(xp.astype(n, xp.float32) if n.dtype == xp.float16 else n)
    if not norms:
        return _new(xp.asarray(0.0, dtype=grads[0]._data.dtype, device=grads[0]._data.device),
                    dev)
    dtype = norms[0].dtype
    for n in norms[1:]:
        dtype = xp.result_type(dtype, n.dtype)
    total = _combine(xp, [xp.astype(n, dtype) for n in norms], norm_type)
    total_t = _new(total, dev)
    if error_if_nonfinite and not bool(xp.all(xp.isfinite(total))):
        raise RuntimeError(
            f"clip_grad_norm_: the total norm of order {norm_type} of the gradients is "
            "non-finite; set error_if_nonfinite=False to clip anyway"
        )
    # minimum with a Python scalar: a kernel argument, not an uploaded 0-d array
    coef = xp.minimum(max_norm / (total + 1e-6), 1.0)
    for g in grads:
        gxp = g._device.xp
        c = coef if g._device is dev else _new(coef, dev).to(g._device)._data
        dt = g._data.dtype
        if _dkind(dt) == "c":
            dt = gxp.float32 if dt == gxp.complex64 else gxp.float64
        c = gxp.astype(c, dt)
        g._data = g._data * c
        g._bump_version()
    return total_t


def clip_grad_value_(parameters: Tensor | Iterable[Tensor], clip_value: float,
                     foreach: bool | None = None) -> None:
    """Clamp every gradient to ``[-clip_value, clip_value]`` in place."""
    clip_value = float(clip_value)
    for g in _grads(parameters):
        xp = g._device.xp
        g._data = xp.clip(g._data, min=-clip_value, max=clip_value)
        g._bump_version()
