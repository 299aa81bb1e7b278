"""Linear algebra functions of the main namespace: matmul, matrix_transpose,
tensordot, vecdot."""

from __future__ import annotations

from typing import Any

from .._tensor import Tensor
from ._core import mixed_devices, needs_grad, new, record, sum_to, tensor_arg

__all__ = ["matmul", "matrix_transpose"]


def matrix_transpose(x: Tensor, /) -> Tensor:
    """Swap the last two axes."""
    x = tensor_arg(x, "matrix_transpose")
    if x.ndim < 2:
        raise ValueError(f"matrix_transpose() needs at least 2 dimensions, got shape {x.shape}")
    dev = x._device
    out = dev.xp.matrix_transpose(x._data)
    if needs_grad(x):
        return record(out, dev, "TransposeBackward", (x,), lambda g, _: matrix_transpose(g))
    return new(out, dev)


def matmul(x1: Tensor, x2: Tensor, /) -> Tensor:
    """Matrix product with NumPy's rules for 1-D operands and batch broadcasting."""
    x1 = tensor_arg(x1, "matmul", "x1")
    x2 = tensor_arg(x2, "matmul", "x2")
    dev = x1._device
    if x2._device is not dev:
        raise mixed_devices("matmul", dev, x2._device)
    if x1.ndim == 0 or x2.ndim == 0:
        raise ValueError("matmul() does not accept 0-d tensors; use multiply")
    k1 = x1.shape[-1]
    k2 = x2.shape[-2] if x2.ndim > 1 else x2.shape[0]
    if k1 != k2:
        raise ValueError(
            f"matmul(): inner dimensions differ: x1 has shape {x1.shape}, x2 has shape "
            f"{x2.shape} ({k1} != {k2})"
        )
    out = dev.xp.matmul(x1._data, x2._data)
    if needs_grad(x1, x2):
        return record(out, dev, "MatmulBackward", (x1, x2), lambda g, _: _matmul_vjp(g, x1, x2),
                      saved=(x1, x2))
    return new(out, dev)


def _matmul_vjp(g: Tensor, x1: Tensor, x2: Tensor) -> tuple[Any, Any]:
    from .elementwise import conj
    from .manipulation import reshape

    a = reshape(x1, (1, x1.shape[0])) if x1.ndim == 1 else x1
    b = reshape(x2, (x2.shape[0], 1)) if x2.ndim == 1 else x2
    gm = g
    if x1.ndim == 1 and x2.ndim == 1:
        gm = reshape(g, (1, 1))
    elif x1.ndim == 1:
        gm = reshape(g, (*g.shape[:-1], 1, g.shape[-1]))
    elif x2.ndim == 1:
        gm = reshape(g, (*g.shape, 1))
    if a._data.dtype.kind == "c" or b._data.dtype.kind == "c":
        a, b = conj(a), conj(b)
    g1 = g2 = None
    if x1._requires_grad:
        g1 = matmul(gm, matrix_transpose(b))
        if x1.ndim == 1:
            g1 = reshape(g1, g1.shape[:-2] + (x1.shape[0],))
        g1 = sum_to(g1, x1)
    if x2._requires_grad:
        g2 = matmul(matrix_transpose(a), gm)
        if x2.ndim == 1:
            g2 = reshape(g2, g2.shape[:-1])
        g2 = sum_to(g2, x2)
    return g1, g2
