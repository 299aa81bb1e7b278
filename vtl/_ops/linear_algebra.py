"""Linear algebra functions of the main namespace: matmul, matrix_transpose,
tensordot, vecdot.

Gradients follow PyTorch's convention for complex inputs: ``matmul``'s
gradients are ``g @ conj(x2)^T`` and ``conj(x1)^T @ g``, and ``vecdot``
(which conjugates ``x1``, as the standard says) gives ``conj(g) * x2`` for
``x1`` and ``g * x1`` for ``x2``.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from .. import _autocast
from .._tensor import Tensor
from ..backends._dtypes import kind as _dkind
from ._aliases import torch_names
from ._core import (
    _OPERAND_TYPES,
    _grad,
    mixed_devices,
    needs_grad,
    new,
    normalize_axis,
    plain_grad,
    raw_grad,
    raw_matmul,
    record,
    record_op,
    sum_to,
    tensor_arg,
)
from .views import maybe_view

__all__ = ["matmul", "matrix_transpose", "tensordot", "vecdot"]

_AUTOCAST = _autocast.ACTIVE


def _operands(x1: Any, x2: Any, fname: str) -> tuple[Tensor, Tensor]:
    x1 = tensor_arg(x1, fname, "x1")
    x2 = tensor_arg(x2, fname, "x2")
    if x2._device is not x1._device:
        raise mixed_devices(fname, x1._device, x2._device)
    for t in (x1, x2):
        if _dkind(t._data.dtype) == "b":
            raise TypeError(f"{fname}() needs numeric tensors, got dtype {t.dtype}")
    return x1, x2


def _c(t: Tensor) -> Tensor:
    from .elementwise import conj

    return conj(t) if _dkind(t._data.dtype) == "c" else t


def matrix_transpose(x: Tensor, /) -> Tensor:
    """Swap the last two axes."""
    x = tensor_arg(x, "matrix_transpose")
    if x.ndim < 2:
        raise ValueError(f"matrix_transpose() needs at least 2 dimensions, got shape {x.shape}")
    dev = x._device
    d = x._data
    out = d.T if d.ndim == 2 else dev.xp.matrix_transpose(d)
    if x._requires_grad and _grad.enabled:
        t = record(out, dev, "TransposeBackward", (x,), _transpose_vjp)
    else:
        t = new(out, dev)
    return maybe_view(t, x, "matrix_transpose")


def _transpose_vjp(g: Tensor, _: Any) -> Tensor:
    if not (_grad.enabled and g._requires_grad):  # plain backward: a view of the raw array
        d = g._data
        return new(d.T if d.ndim == 2 else g._device.xp.matrix_transpose(d), g._device)
    return matrix_transpose(g)


def _build_matmul(operator: bool) -> Any:
    def matmul(x1: Tensor, x2: Tensor, /) -> Tensor:
        if _AUTOCAST[0]:  # autocast: the operands in its low dtype
            x1, x2 = _autocast.low(x1, x2)
        if isinstance(x1, Tensor) and isinstance(x2, Tensor):
            d1, d2 = x1._data, x2._data
            s1, s2 = d1.shape, d2.shape
            dev = x1._device
            if len(s1) == 2 and len(s2) == 2 and s1[1] == s2[0] and x2._device is dev \
                    and _dkind(d1.dtype) != "b" and _dkind(d2.dtype) != "b":
                out = raw_matmul(dev, d1, d2)  # the common case needs no further checks
                n1 = x1._requires_grad
                n2 = x2._requires_grad
                if (n1 or n2) and _grad.enabled:
                    return record_op(out, dev, "MatmulBackward", x1 if n1 else None,
                                     x2 if n2 else None, partial(_matmul_vjp, x1, x2),
                                     (x1, x2), None if _dkind(out.dtype) == "c" else _matmul_raw)
                return new(out, dev)
        elif operator and not isinstance(x2, _OPERAND_TYPES):
            return NotImplemented  # Tensor.__matmul__: let x2's reflected op try
        return _matmul_general(x1, x2)

    return matmul


matmul = _build_matmul(False)
matmul.__qualname__ = "matmul"
matmul.__doc__ = """Matrix product with NumPy's rules: a 1-D ``x1`` is a row vector and a 1-D
``x2`` a column vector (the added axis is removed again); batch axes broadcast."""
# the operator form, which Tensor.__matmul__ calls: the same function, NotImplemented for
# an operand it does not take
matmul.operator = _build_matmul(True)
matmul.operator.__qualname__ = "matmul.operator"


def _matmul_general(x1: Any, x2: Any) -> Tensor:
    """:func:`matmul` past its 2-D fast path: checks, batches, 1-D operands."""
    x1, x2 = _operands(x1, x2, "matmul")
    dev = x1._device
    if x1.ndim == 0 or x2.ndim == 0:
        raise ValueError("matmul() does not accept 0-d tensors; use multiply")
    k1 = x1.shape[-1]
    k2 = x2.shape[-2] if x2.ndim > 1 else x2.shape[0]
    if k1 != k2:
        raise ValueError(
            f"matmul(): inner dimensions differ: x1 has shape {x1.shape}, x2 has shape "
            f"{x2.shape} ({k1} != {k2})"
        )
    b1, b2 = x1.shape[:-2], x2.shape[:-2]
    for m, n in zip(reversed(b1), reversed(b2), strict=False):
        if m != n and m != 1 and n != 1:
            raise ValueError(
                f"matmul(): batch dimensions of shapes {x1.shape} and {x2.shape} do not "
                "broadcast"
            )
    out = dev.xp.matmul(x1._data, x2._data)
    if needs_grad(x1, x2):
        return record(out, dev, "MatmulBackward", (x1, x2), partial(_matmul_vjp, x1, x2),
                      saved=(x1, x2))
    return new(out, dev)


def _matmul_raw(vjp: partial, gd: Any) -> tuple[Any, Any]:
    """The raw rule of the 2-D real product (plain backward); ``vjp`` is
    ``partial(_matmul_vjp, x1, x2)``."""
    x1, x2 = vjp.args
    d1, d2 = x1._data, x2._data
    g1 = g2 = None
    if x1._requires_grad:
        g1 = raw_matmul(x1._device, gd, d2.T)
        if g1.dtype != d1.dtype:
            g1 = raw_grad(g1, x1, x1._device)
    if x2._requires_grad:
        g2 = raw_matmul(x2._device, d1.T, gd)
        if g2.dtype != d2.dtype:
            g2 = raw_grad(g2, x2, x2._device)
    return g1, g2


def _matmul_vjp(x1: Tensor, x2: Tensor, g: Tensor, _: Any) -> tuple[Any, Any]:
    d1, d2 = x1._data, x2._data
    if not _grad.enabled and d1.ndim == 2 and d2.ndim == 2 and _dkind(d1.dtype) != "c" \
            and _dkind(d2.dtype) != "c":
        # plain backward of the common 2-D real case: straight on the raw arrays
        dev, gd = g._device, g._data
        g1 = g2 = None
        if x1._requires_grad:
            r = raw_matmul(dev, gd, d2.T)
            g1 = new(r, dev) if r.dtype == d1.dtype else plain_grad(r, x1, dev)
        if x2._requires_grad:
            r = raw_matmul(dev, d1.T, gd)
            g2 = new(r, dev) if r.dtype == d2.dtype else plain_grad(r, x2, dev)
        return g1, g2

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
    g1 = g2 = None
    if x1._requires_grad:
        g1 = matmul(gm, matrix_transpose(_c(b)))
        if x1.ndim == 1:
            g1 = reshape(g1, g1.shape[:-2] + (x1.shape[0],))
        g1 = sum_to(g1, x1)
    if x2._requires_grad:
        g2 = matmul(matrix_transpose(_c(a)), gm)
        if x2.ndim == 1:
            g2 = reshape(g2, g2.shape[:-1])
        g2 = sum_to(g2, x2)
    return g1, g2


def _tensordot_axes(axes: Any, nd1: int, nd2: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    if isinstance(axes, bool):
        raise TypeError("tensordot(): axes must be an int or a pair of sequences, got a bool")
    if isinstance(axes, int):
        if axes < 0:
            raise ValueError(f"tensordot(): axes must be non-negative, got {axes}")
        if axes > nd1 or axes > nd2:
            raise ValueError(
                f"tensordot(): cannot contract {axes} axes of tensors with {nd1} and {nd2} "
                "dimensions"
            )
        return tuple(range(nd1 - axes, nd1)), tuple(range(axes))
    try:
        s1, s2 = axes
    except (TypeError, ValueError):
        raise TypeError(
            f"tensordot(): axes must be an int or a pair of sequences of ints, got {axes!r}"
        ) from None
    s1 = (s1,) if isinstance(s1, int) else tuple(s1)
    s2 = (s2,) if isinstance(s2, int) else tuple(s2)
    if len(s1) != len(s2):
        raise ValueError(
            f"tensordot(): the two axis sequences must have the same length, got {s1} and {s2}"
        )
    a1 = tuple(normalize_axis(a, nd1, "tensordot") for a in s1)
    a2 = tuple(normalize_axis(a, nd2, "tensordot") for a in s2)
    if len(set(a1)) != len(a1) or len(set(a2)) != len(a2):
        raise ValueError(f"tensordot(): repeated axis in {s1} or {s2}")
    return a1, a2


@torch_names(dims="axes")
def tensordot(x1: Tensor, x2: Tensor, /, *,
              axes: int | tuple[Sequence[int], Sequence[int]] = 2) -> Tensor:
    """Contract ``x1`` and ``x2`` over ``axes``: the last ``axes`` axes of ``x1`` with the
    first ``axes`` of ``x2``, or the axes listed in a pair of sequences. Contracted
    axes must have equal sizes (they do not broadcast). The result has the free axes
    of ``x1`` followed by those of ``x2``."""
    x1, x2 = _operands(x1, x2, "tensordot")
    a1, a2 = _tensordot_axes(axes, x1.ndim, x2.ndim)
    for i, j in zip(a1, a2, strict=True):
        if x1.shape[i] != x2.shape[j]:
            raise ValueError(
                f"tensordot(): contracted axes differ in size: axis {i} of x1 (shape "
                f"{x1.shape}) and axis {j} of x2 (shape {x2.shape})"
            )
    dev = x1._device
    if x1.ndim == 0 or x2.ndim == 0:  # no axes to contract: a scalar times a tensor
        out = dev.xp.multiply(x1._data, x2._data)
    else:
        out = dev.xp.tensordot(x1._data, x2._data, axes=(list(a1), list(a2)))
    if needs_grad(x1, x2):
        r1, r2 = x1._requires_grad, x2._requires_grad

        def vjp(g: Tensor, _: Any) -> tuple[Any, Any]:
            return _tensordot_vjp(g, x1, x2, a1, a2, r1, r2)

        return record(out, dev, "TensordotBackward", (x1, x2), vjp, saved=(x1, x2))
    return new(out, dev)


def _tensordot_vjp(g: Tensor, x1: Tensor, x2: Tensor, a1: tuple[int, ...],
                   a2: tuple[int, ...], r1: bool, r2: bool) -> tuple[Any, Any]:
    from .manipulation import permute_dims

    nd1, nd2 = x1.ndim, x2.ndim
    f1 = tuple(d for d in range(nd1) if d not in a1)
    f2 = tuple(d for d in range(nd2) if d not in a2)
    nf1 = len(f1)
    g1 = g2 = None
    if r1:
        # dims of the contraction: free axes of x1, then x2's contracted axes ascending
        res = tensordot(g, _c(x2), axes=(tuple(range(nf1, g.ndim)), f2))
        s2 = sorted(a2)
        pos = dict(zip(f1, range(nf1), strict=True))
        for i, j in zip(a1, a2, strict=True):
            pos[i] = nf1 + s2.index(j)
        perm = tuple(pos[d] for d in range(nd1))
        if perm != tuple(range(nd1)):
            res = permute_dims(res, perm)
        g1 = sum_to(res, x1)
    if r2:
        # dims: x1's contracted axes ascending, then the free axes of x2
        res = tensordot(_c(x1), g, axes=(f1, tuple(range(nf1))))
        s1 = sorted(a1)
        pos = {d: len(a1) + k for k, d in enumerate(f2)}
        for i, j in zip(a1, a2, strict=True):
            pos[j] = s1.index(i)
        perm = tuple(pos[d] for d in range(nd2))
        if perm != tuple(range(nd2)):
            res = permute_dims(res, perm)
        g2 = sum_to(res, x2)
    return g1, g2


@torch_names(dim="axis")
def vecdot(x1: Tensor, x2: Tensor, /, *, axis: int = -1) -> Tensor:
    """Dot products ``sum(conj(x1) * x2, axis=axis)`` of vectors along ``axis``, with
    the other axes broadcast. ``axis`` counts from the end (``[-N, -1]``, N the smaller
    number of dimensions) and the two sizes along it must be equal."""
    x1, x2 = _operands(x1, x2, "vecdot")
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise TypeError(f"vecdot() expected an int for axis, got {axis!r}")
    if x1.ndim == 0 or x2.ndim == 0:
        raise ValueError(
            f"vecdot() needs tensors with at least one dimension, got shapes {x1.shape} and "
            f"{x2.shape}"
        )
    n = min(x1.ndim, x2.ndim)
    if axis >= 0:
        raise ValueError(
            f"vecdot(): axis must be negative (counted from the last dimension), got {axis}"
        )
    if axis < -n:
        raise IndexError(
            f"vecdot(): axis {axis} is out of bounds for tensors with {x1.ndim} and "
            f"{x2.ndim} dimensions"
        )
    if x1.shape[axis] != x2.shape[axis]:
        raise ValueError(
            f"vecdot(): x1 and x2 differ in size along axis {axis}: shapes {x1.shape} and "
            f"{x2.shape}"
        )
    b1 = x1.shape[:axis] + x1.shape[axis + 1:] if axis != -1 else x1.shape[:-1]
    b2 = x2.shape[:axis] + x2.shape[axis + 1:] if axis != -1 else x2.shape[:-1]
    for m, k in zip(reversed(b1), reversed(b2), strict=False):
        if m != k and m != 1 and k != 1:
            raise ValueError(f"vecdot(): shapes {x1.shape} and {x2.shape} do not broadcast")
    dev = x1._device
    out = dev.xp.vecdot(x1._data, x2._data, axis=axis)
    if needs_grad(x1, x2):
        r1, r2 = x1._requires_grad, x2._requires_grad

        def vjp(g: Tensor, _: Any) -> tuple[Any, Any]:
            from .elementwise import multiply
            from .manipulation import reshape

            nd = g.ndim + 1
            ax = nd + axis
            ge = reshape(g, g.shape[:ax] + (1,) + g.shape[ax:])
            g1 = sum_to(multiply(_c(ge), x2), x1) if r1 else None
            g2 = sum_to(multiply(ge, x1), x2) if r2 else None
            return g1, g2

        return record(out, dev, "VecdotBackward", (x1, x2), vjp, saved=(x1, x2))
    return new(out, dev)
