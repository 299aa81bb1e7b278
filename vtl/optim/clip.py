"""Gradient clipping: ``clip_grad_norm_`` and ``clip_grad_value_`` (in place).

Both work on the raw gradient arrays with standard array-API functions and
never read a value back to the host (the clipping factor stays on the device).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from .._tensor import Tensor, _new
from ..backends._common.norms import pairwise
from ..backends._dtypes import kind as _dkind

__all__ = ["clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm"]


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
    total = pairwise(op, parts)
    if math.isinf(norm_type) or norm_type in (0.0, 1.0):
        return total
    return xp.sqrt(total) if norm_type == 2.0 else total ** (1.0 / norm_type)


def _fused_norm(grads: list[Tensor], norm_type: float) -> tuple[Any, Any] | None:
    """``(kernel, joint norm)`` through the device's ``grad_norm`` kernel (a few launches),
    or ``None`` where it does not apply (no kernel, several devices or dtypes)."""
    dev = grads[0]._device
    kern = dev.backend.kernel("grad_norm")
    if kern is None:
        return None
    dt = grads[0]._data.dtype
    if not kern.supports(dt, norm_type) or \
            any(g._device is not dev or g._data.dtype != dt for g in grads):
        return None
    total = kern.norm([g._data for g in grads], norm_type)
    return None if total is None else (kern, total)


def _portable_norm(grads: list[Tensor], norm_type: float) -> Any:
    """The joint norm from each gradient's norm (sums of squares for the 2-norm), on the
    first gradient's device."""
    dev = grads[0]._device
    xp = dev.xp
    squares = norm_type == 2.0
    norms = []
    for g in grads:
        if g.size == 0:
            continue
        gxp = g._device.xp
        if squares and g._data.dtype in (gxp.float32, gxp.float64):
            n = gxp.vecdot(gxp.reshape(g._data, (-1,)), gxp.reshape(g._data, (-1,)))
        else:
            n = _norm(gxp, g._data, norm_type)
            if squares:
                n = n * n
        if g._device is not dev:
            n = _new(n, g._device).to(dev)._data
        norms.append(xp.astype(n, xp.float32) if n.dtype == xp.float16 else n)
    if not norms:
        return xp.asarray(0.0, dtype=grads[0]._data.dtype, device=grads[0]._data.device)
    dtype = norms[0].dtype
    for n in norms[1:]:
        dtype = xp.result_type(dtype, n.dtype)
    norms = [xp.astype(n, dtype, copy=False) for n in norms]
    if squares:
        return xp.sqrt(_combine(xp, norms, 1.0))
    return _combine(xp, norms, norm_type)


def _total_norm(grads: list[Tensor], norm_type: float, error_if_nonfinite: bool
                ) -> tuple[Any, Any]:
    """``(grad_norm kernel or None, 0-d joint norm array)``; raises for a non-finite norm
    when asked (the one read of a value back to the host)."""
    fused = _fused_norm(grads, norm_type)
    kern, total = (None, _portable_norm(grads, norm_type)) if fused is None else fused
    xp = grads[0]._device.xp
    if error_if_nonfinite and not bool(xp.all(xp.isfinite(total))):
        raise RuntimeError(
            f"clip_grad_norm_: the total norm of order {norm_type} of the gradients is "
            "non-finite; set error_if_nonfinite=False to clip anyway"
        )
    return kern, total


def _scale(grads: list[Tensor], total: Any, dev: Any, max_norm: float, kern: Any) -> None:
    """Multiply every gradient by ``min(max_norm / (total + 1e-6), 1)`` in place."""
    if kern is not None and all(g._device is dev for g in grads) and \
            kern.clip_([g._data for g in grads], total, max_norm):
        for g in grads:
            g._bump_version()
        return
    xp = dev.xp
    # minimum with a Python scalar: a kernel argument, not an uploaded 0-d array
    coef = xp.minimum(max_norm / (total + 1e-6), 1.0)
    for g in grads:
        gxp = g._device.xp
        c = coef if g._device is dev else _new(coef, dev).to(g._device)._data
        dt = g._data.dtype
        if _dkind(dt) == "c":
            dt = gxp.float32 if dt == gxp.complex64 else gxp.float64
        c = gxp.astype(c, dt, copy=False)
        g._data = g._data * c
        g._bump_version()


def clip_grad_norm_(parameters: Tensor | Iterable[Tensor], max_norm: float,
                    norm_type: float = 2.0, error_if_nonfinite: bool = False,
                    foreach: bool | None = None) -> Tensor:
    """Scale the gradients in place so that their joint ``norm_type`` norm is at most
    ``max_norm``; return the joint norm before clipping (a 0-d Tensor).

    The norm is taken over all gradients as if concatenated into one vector;
    gradients are multiplied by ``min(1, max_norm / (total_norm + 1e-6))``
    (PyTorch's rule). ``foreach`` is accepted for compatibility. Nothing is read back to
    the host unless ``error_if_nonfinite``; on the cupy backend the 1-, 2- and inf-norms
    of same-dtype gradients take three kernel launches in all (on the wgpu backend,
    ``2 * ceil(n / 12) + 1`` for ``n`` gradients).

    Args:
        parameters: A tensor or an iterable of tensors whose gradients are clipped (tensors without
            a gradient are skipped).
        max_norm: Largest allowed joint norm.
        norm_type: Order of the norm (``inf`` for the maximum).
        error_if_nonfinite: Raise if the joint norm is nan or infinite.
        foreach: Accepted for PyTorch compatibility.

    Returns:
        The joint norm of the gradients before clipping, a 0-d tensor.

    Raises:
        RuntimeError: If ``error_if_nonfinite`` and the joint norm is nan or infinite.

    Example:
        >>> w = vtl.asarray([3.0, 4.0], requires_grad=True)
        >>> vtl.sum(w * w).backward()          # grad (6, 8), norm 10
        >>> optim.clip_grad_norm_([w], max_norm=1.0).item()
        10.0
        >>> [round(v, 4) for v in w.grad.tolist()]
        [0.6, 0.8]
    """
    import vtl

    norm_type = float(norm_type)
    max_norm = float(max_norm)
    grads = _grads(parameters)
    if not grads:
        return vtl.asarray(0.0)
    dev = grads[0]._device
    kern, total = _total_norm(grads, norm_type, error_if_nonfinite)
    _scale(grads, total, dev, max_norm, kern)
    return _new(total, dev)


def get_total_norm(tensors: Tensor | Iterable[Tensor], norm_type: float = 2.0,
                   error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """The ``norm_type`` norm of ``tensors`` taken together as one vector (PyTorch's
    ``torch.nn.utils.get_total_norm``: pass the gradients, e.g. ``[p.grad for p in
    params]``).

    Args:
        tensors: A tensor or an iterable of tensors (``None`` entries are skipped).
        norm_type: Order of the norm (``inf`` for the maximum).
        error_if_nonfinite: Raise if the norm is nan or infinite.
        foreach: Accepted for PyTorch compatibility.

    Returns:
        The joint norm, a 0-d tensor on the first tensor's device.

    Raises:
        RuntimeError: If ``error_if_nonfinite`` and the norm is nan or infinite.
    """
    import vtl

    if isinstance(tensors, Tensor):
        tensors = [tensors]
    ts = [t for t in tensors if t is not None]
    if not ts:
        return vtl.asarray(0.0)
    _, total = _total_norm(ts, float(norm_type), error_if_nonfinite)
    return _new(total, ts[0]._device)


def clip_grads_with_norm_(parameters: Tensor | Iterable[Tensor], max_norm: float,
                          total_norm: Tensor, foreach: bool | None = None) -> None:
    """Scale the gradients in place by ``min(1, max_norm / (total_norm + 1e-6))``, given
    their joint norm (PyTorch's ``torch.nn.utils.clip_grads_with_norm_``; with
    :func:`get_total_norm` it splits :func:`clip_grad_norm_` in two).

    Args:
        parameters: A tensor or an iterable of tensors whose gradients are scaled.
        max_norm: Largest allowed joint norm.
        total_norm: The joint norm of the gradients (a 0-d tensor).
        foreach: Accepted for PyTorch compatibility.

    Raises:
        TypeError: If ``total_norm`` is not a Tensor.
    """
    if not isinstance(total_norm, Tensor):
        raise TypeError(f"clip_grads_with_norm_(): total_norm must be a Tensor, got "
                        f"{type(total_norm).__name__}")
    grads = _grads(parameters)
    if not grads:
        return
    dev = grads[0]._device
    total = total_norm.to(dev)._data
    _scale(grads, total, dev, float(max_norm), dev.backend.kernel("grad_norm"))


def clip_grad_value_(parameters: Tensor | Iterable[Tensor], clip_value: float,
                     foreach: bool | None = None) -> None:
    """Clamp every gradient to ``[-clip_value, clip_value]`` in place.

    Args:
        parameters: A tensor or an iterable of tensors whose gradients are clipped.
        clip_value: Largest allowed absolute value.
        foreach: Accepted for PyTorch compatibility.
    """
    clip_value = float(clip_value)
    for g in _grads(parameters):
        xp = g._device.xp
        g._data = xp.clip(g._data, min=-clip_value, max=clip_value)
        g._bump_version()
