"""Margin, ranking and embedding losses with PyTorch's names, defaults and formulas.

``margin_ranking_loss``, ``hinge_embedding_loss``, ``cosine_embedding_loss``,
``triplet_margin_loss``, ``triplet_margin_with_distance_loss``, ``multi_margin_loss``,
``multilabel_margin_loss`` and ``multilabel_soft_margin_loss``. Every one takes
``reduction='mean' | 'sum' | 'none'`` (keyword-only, as the other losses of
``vtl.nn.functional``) and is written with standard array-API calls, so autograd gives
the gradients on vtl tensors and the same code runs, without gradients, on NumPy, CuPy
or array-api-strict arrays.

Hinges are ``where(z > 0, z, 0)``: the derivative at the kink ``z == 0`` is 0 (as
PyTorch's multi-margin kernels; PyTorch's ``clamp_min`` passes 1 there). Class indices
are checked (``IndexError``); that check reads one flag back from the device.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ... import _autocast
from ._utils import check_reduction, namespace, reduce
from .activation import logsigmoid
from .loss import _check_targets

__all__ = [
    "cosine_embedding_loss", "hinge_embedding_loss", "margin_ranking_loss",
    "multi_margin_loss", "multilabel_margin_loss", "multilabel_soft_margin_loss",
    "triplet_margin_loss", "triplet_margin_with_distance_loss",
]

#: Added to each squared norm of ``cosine_embedding_loss`` (PyTorch's ``EPSILON``).
_COSINE_EPS = 1e-12


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(x.shape)


def _broadcast(shapes: dict[str, tuple[int, ...]], fname: str) -> tuple[int, ...]:
    """The broadcast shape of named shapes, or a ``ValueError`` listing them."""
    nd = max((len(s) for s in shapes.values()), default=0)
    out = []
    for i in range(nd):
        sizes = {s[len(s) - nd + i] for s in shapes.values() if len(s) - nd + i >= 0}
        sizes.discard(1)
        if len(sizes) > 1:
            given = ", ".join(f"{k} {v}" for k, v in shapes.items())
            raise ValueError(f"{fname}(): shapes do not broadcast together: {given}")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _check_float(xp: Any, x: Any, name: str, fname: str) -> None:
    if not xp.isdtype(x.dtype, "real floating"):
        raise TypeError(f"{fname}(): {name} must have a real floating-point dtype, got "
                        f"{x.dtype}")


def _as_input_dtype(xp: Any, target: Any, ref: Any, fname: str) -> Any:
    """An integer or bool ``target`` cast to the input's floating dtype (PyTorch promotes
    it; the array API leaves mixed-kind arithmetic undefined)."""
    if xp.isdtype(target.dtype, "real floating"):
        return target
    if xp.isdtype(target.dtype, ("integral", "bool")):
        return xp.astype(target, ref.dtype)
    raise TypeError(f"{fname}(): target must have a real dtype, got {target.dtype}")


def _hinge(xp: Any, z: Any) -> Any:
    """``max(z, 0)`` with derivative 0 at ``z == 0``."""
    return xp.where(z > 0, z, 0.0)


def margin_ranking_loss(input1: Any, input2: Any, target: Any, margin: float = 0.0, *,
                        reduction: str = "mean") -> Any:
    """``max(0, -y (x1 - x2) + margin)``: ``y = 1`` asks for ``x1`` ranked above ``x2``,
    ``y = -1`` for the opposite.

    The three arguments must have the same number of dimensions (as in PyTorch) and
    broadcast together; ``'none'`` returns the broadcast shape.
    """
    fname = "margin_ranking_loss"
    check_reduction(reduction, fname)
    xp = namespace(input1, input2, target)
    if not input1.ndim == input2.ndim == target.ndim:
        raise ValueError(f"{fname}(): input1, input2 and target must have the same number of "
                         f"dimensions, got shapes {_shape(input1)}, {_shape(input2)} and "
                         f"{_shape(target)}")
    _broadcast({"input1": _shape(input1), "input2": _shape(input2),
                "target": _shape(target)}, fname)
    _check_float(xp, input1, "input1", fname)
    _check_float(xp, input2, "input2", fname)
    y = _as_input_dtype(xp, target, input1, fname)
    return reduce(xp, _hinge(xp, -y * (input1 - input2) + margin), reduction)


def hinge_embedding_loss(input: Any, target: Any, margin: float = 1.0, *,  # noqa: A002
                         reduction: str = "mean") -> Any:
    """``x`` where ``y = 1``, ``max(0, margin - x)`` where ``y = -1``.

    As in PyTorch, a target that is neither 1 nor -1 gets both terms. ``input`` and
    ``target`` broadcast together.
    """
    fname = "hinge_embedding_loss"
    check_reduction(reduction, fname)
    xp = namespace(input, target)
    _check_float(xp, input, "input", fname)
    _broadcast({"input": _shape(input), "target": _shape(target)}, fname)
    margin_term = xp.where(target != 1, _hinge(xp, margin - input), 0.0)
    self_term = xp.where(target != -1, input, 0.0)
    return reduce(xp, margin_term + self_term, reduction)


def cosine_embedding_loss(input1: Any, input2: Any, target: Any, margin: float = 0.0, *,
                          reduction: str = "mean") -> Any:
    """``1 - cos(x1, x2)`` where ``y = 1``, ``max(0, cos(x1, x2) - margin)`` where
    ``y = -1`` (0 for other targets), the cosine taken along the last axis.

    Inputs ``(N, D)`` with a target ``(N,)``, or ``(D,)`` with a 0-d target. The
    cosine is PyTorch's: ``sum(x1 x2) / sqrt((|x1|^2 + 1e-12) (|x2|^2 + 1e-12))``.
    """
    fname = "cosine_embedding_loss"
    check_reduction(reduction, fname)
    xp = namespace(input1, input2, target)
    if target.ndim not in (0, 1):
        raise ValueError(f"{fname}(): expected a 0-d or 1-D target, got shape "
                         f"{_shape(target)} (multi-target is not supported)")
    want = target.ndim + 1
    if input1.ndim != want or input2.ndim != want:
        raise ValueError(f"{fname}(): a {target.ndim}-D target expects {want}-D inputs, got "
                         f"shapes {_shape(input1)} and {_shape(input2)}")
    _check_float(xp, input1, "input1", fname)
    _check_float(xp, input2, "input2", fname)
    batch = _broadcast({"input1": _shape(input1), "input2": _shape(input2)}, fname)[:-1]
    _broadcast({"inputs' batch": batch, "target": _shape(target)}, fname)
    prod = xp.sum(input1 * input2, axis=-1)
    mag1 = xp.sum(input1 * input1, axis=-1) + _COSINE_EPS
    mag2 = xp.sum(input2 * input2, axis=-1) + _COSINE_EPS
    cos = prod / xp.sqrt(mag1 * mag2)
    pos = xp.where(target == 1, 1.0 - cos, 0.0)
    neg = xp.where(target == -1, _hinge(xp, cos - margin), 0.0)
    return reduce(xp, pos + neg, reduction)


def _pairwise_distance(x1: Any, x2: Any, p: float = 2.0, eps: float = 1e-6) -> Any:
    """``||x1 - x2 + eps||_p`` along the last axis (PyTorch's ``pairwise_distance``)."""
    xp = namespace(x1, x2)
    return xp.linalg.vector_norm(x1 - x2 + eps, axis=-1, ord=p)


def _check_triplet(anchor: Any, positive: Any, negative: Any, margin: float,
                   reduction: str, fname: str) -> Any:
    check_reduction(reduction, fname)
    if margin <= 0:
        raise ValueError(f"{fname}(): margin must be greater than 0, got {margin}")
    xp = namespace(anchor, positive, negative)
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise ValueError(f"{fname}(): anchor, positive and negative must have the same number "
                         f"of dimensions, got {anchor.ndim}-D, {positive.ndim}-D and "
                         f"{negative.ndim}-D inputs")
    return xp


def triplet_margin_loss(anchor: Any, positive: Any, negative: Any, margin: float = 1.0,
                        p: float = 2.0, eps: float = 1e-6, swap: bool = False, *,
                        reduction: str = "mean") -> Any:
    """``max(d(a, p) - d(a, n) + margin, 0)`` with ``d(x, y) = ||x - y + eps||_p`` along
    the last axis; ``swap`` uses ``min(d(a, n), d(p, n))`` as the negative distance.

    Inputs of one rank (``(N, D)`` or unbatched ``(D,)``; more leading axes are kept)
    that broadcast together. ``margin`` must be positive, as in PyTorch.
    """
    fname = "triplet_margin_loss"
    xp = _check_triplet(anchor, positive, negative, margin, reduction, fname)
    if anchor.ndim == 0:
        raise ValueError(f"{fname}(): inputs need a feature axis, got 0-d inputs")
    for name, x in (("anchor", anchor), ("positive", positive), ("negative", negative)):
        _check_float(xp, x, name, fname)
    _broadcast({"anchor": _shape(anchor), "positive": _shape(positive),
                "negative": _shape(negative)}, fname)
    d_pos = _pairwise_distance(anchor, positive, p, eps)
    d_neg = _pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = xp.minimum(d_neg, _pairwise_distance(positive, negative, p, eps))
    return reduce(xp, _hinge(xp, margin + d_pos - d_neg), reduction)


def triplet_margin_with_distance_loss(
        anchor: Any, positive: Any, negative: Any, *,
        distance_function: Callable[[Any, Any], Any] | None = None, margin: float = 1.0,
        swap: bool = False, reduction: str = "mean") -> Any:
    """``max(d(a, p) - d(a, n) + margin, 0)`` for any distance ``d`` (a function of two
    tensors returning one distance per row; default: the Euclidean
    ``||x - y + 1e-6||_2`` along the last axis). ``swap`` uses
    ``min(d(a, n), d(p, n))``. ``margin`` must be positive, as in PyTorch.
    """
    fname = "triplet_margin_with_distance_loss"
    xp = _check_triplet(anchor, positive, negative, margin, reduction, fname)
    if distance_function is None:
        distance_function = _pairwise_distance
    elif not callable(distance_function):
        raise TypeError(f"{fname}(): distance_function must be callable, got "
                        f"{type(distance_function).__name__}")
    d_pos = distance_function(anchor, positive)
    d_neg = distance_function(anchor, negative)
    if swap:
        d_neg = xp.minimum(d_neg, distance_function(positive, negative))
    return reduce(xp, _hinge(xp, margin + d_pos - d_neg), reduction)


def _class_rows(input: Any, fname: str) -> tuple[Any, int]:  # noqa: A002
    """``input`` as ``(M, C)`` rows for the multi-class margin losses: ``(N, C)``,
    unbatched ``(C,)``, or 0-d (one class)."""
    xp = namespace(input)
    if input.ndim > 2 or (input.ndim >= 1 and input.shape[-1] == 0):
        raise ValueError(f"{fname}(): expected a non-empty (C,) or (N, C) input, got shape "
                         f"{_shape(input)}")
    _check_float(xp, input, "input", fname)
    c = 1 if input.ndim == 0 else input.shape[-1]
    return xp.reshape(input, (-1, c)), c


def multi_margin_loss(input: Any, target: Any, p: int = 1, margin: float = 1.0,  # noqa: A002
                      weight: Any = None, *, reduction: str = "mean") -> Any:
    """Multi-class hinge loss of class-index targets:
    ``sum_{i != y} w[y] max(0, margin - x[y] + x[i])^p / C`` per row, ``p`` 1 or 2.

    ``input`` ``(N, C)`` with ``target`` ``(N,)``, or ``(C,)`` with a 0-d (or
    one-element) target; ``weight`` ``(C,)`` weighs each row by its target's class.
    ``'none'`` returns the target's shape.
    """
    fname = "multi_margin_loss"
    check_reduction(reduction, fname)
    if p not in (1, 2) or isinstance(p, bool):
        raise ValueError(f"{fname}(): only p == 1 and p == 2 are supported, got {p!r}")
    xp = namespace(input, target, weight)
    rows, c = _class_rows(input, fname)
    m = rows.shape[0]
    if target.ndim > 1 or (target.ndim == 1 and target.shape[0] != m) \
            or (target.ndim == 0 and m != 1):
        raise ValueError(f"{fname}(): target must be 1-D with one class index per input row "
                         f"(expected shape ({m},)), got {_shape(target)} for input of shape "
                         f"{_shape(input)}")
    if not xp.isdtype(target.dtype, "integral"):
        raise TypeError(f"{fname}(): target must hold class indices of an integer dtype, got "
                        f"{target.dtype}")
    if weight is not None and (weight.ndim > 1 or weight.ndim == 1 and weight.shape[0] != c
                               or weight.ndim == 0 and c != 1):
        raise ValueError(f"{fname}(): weight must have shape ({c},) (one per class), got "
                         f"{_shape(weight)}")
    t = xp.reshape(target, (-1,))
    if m:
        _check_targets(xp, t, xp.zeros_like(t, dtype=xp.bool), c, fname)
    tcol = xp.reshape(t, (m, 1))
    picked = xp.take_along_axis(rows, tcol, axis=1)
    h = _hinge(xp, margin - picked + rows)
    if p == 2:
        h = h * h
    if weight is not None:
        h = h * xp.reshape(xp.take(xp.reshape(weight, (-1,)), t, axis=0), (m, 1))
    cls = xp.arange(c, dtype=t.dtype, device=t.device)
    h = xp.where(cls == tcol, 0.0, h)
    loss = xp.reshape(xp.sum(h, axis=1) / c, _shape(target))
    return reduce(xp, loss, reduction)


def multilabel_margin_loss(input: Any, target: Any, *,  # noqa: A002
                           reduction: str = "mean") -> Any:
    """Multi-label hinge loss: ``sum_{j, i} max(0, 1 - (x[y_j] - x[i])) / C`` per row,
    over the target classes ``y_j`` and the classes ``i`` that are not targets.

    ``target`` has the input's shape and integer dtype; each row lists class indices
    up to the first ``-1`` (the rest of the row is ignored, but every entry must lie in
    ``[-1, C)``, as PyTorch checks). ``'none'`` returns ``(N,)`` (0-d unbatched).
    """
    fname = "multilabel_margin_loss"
    check_reduction(reduction, fname)
    xp = namespace(input, target)
    rows, c = _class_rows(input, fname)
    m = rows.shape[0]
    ok = _shape(target) == _shape(input) if input.ndim == 2 else (
        target.ndim <= 1 and (target.shape[0] if target.ndim else 1) == c)
    if not ok:
        raise ValueError(f"{fname}(): target must have the input's shape {_shape(input)}, "
                         f"got {_shape(target)}")
    if not xp.isdtype(target.dtype, "integral"):
        raise TypeError(f"{fname}(): target must hold class indices of an integer dtype, got "
                        f"{target.dtype}")
    t = xp.reshape(target, (m, c))
    if m and bool(xp.any((t < -1) | (t >= c))):
        first = int(t[(t < -1) | (t >= c)][0])
        raise IndexError(f"{fname}(): target {first} is out of range for {c} classes "
                         f"(expected class indices in [0, {c}) and -1 ending each row's list)")
    # valid[n, j]: entry j comes before the row's first negative entry
    stopped = xp.cumulative_sum(xp.astype(t < 0, xp.int32), axis=1, dtype=xp.int32)
    valid = stopped == 0
    ts = xp.where(valid, t, 0)
    cls = xp.arange(c, dtype=t.dtype, device=t.device)
    hit = (xp.reshape(ts, (m, c, 1)) == cls) & xp.reshape(valid, (m, c, 1))
    is_target = xp.any(hit, axis=1)  # (M, C) over classes i
    picked = xp.take_along_axis(rows, ts, axis=1)  # x[y_j]: (M, C) over j
    z = 1.0 - xp.reshape(picked, (m, c, 1)) + xp.reshape(rows, (m, 1, c))
    keep = xp.reshape(valid, (m, c, 1)) & xp.logical_not(xp.reshape(is_target, (m, 1, c)))
    h = xp.where(keep & (z > 0), z, 0.0)
    loss = xp.sum(xp.reshape(h, (m, c * c)), axis=1) / c
    if input.ndim < 2:
        loss = xp.reshape(loss, ())
    return reduce(xp, loss, reduction)


def multilabel_soft_margin_loss(input: Any, target: Any, weight: Any = None, *,  # noqa: A002
                                reduction: str = "mean") -> Any:
    """Multi-label one-versus-all logistic loss:
    ``-mean_c w_c (y_c log sigmoid(x_c) + (1 - y_c) log sigmoid(-x_c))`` over the last
    (class) axis. ``target`` (0/1 or probabilities) and ``weight`` broadcast against
    the input; ``'none'`` returns the input's shape without the class axis.
    """
    fname = "multilabel_soft_margin_loss"
    check_reduction(reduction, fname)
    xp = namespace(input, target, weight)
    if input.ndim == 0:
        raise ValueError(f"{fname}(): input must have a class axis, got a 0-d input")
    _check_float(xp, input, "input", fname)
    shapes = {"input": _shape(input), "target": _shape(target)}
    if weight is not None:
        shapes["weight"] = _shape(weight)
    if _broadcast(shapes, fname) != _shape(input):
        given = ", ".join(f"{k} {v}" for k, v in shapes.items())
        raise ValueError(f"{fname}(): target and weight must broadcast to the input's shape "
                         f"{_shape(input)}, got {given}")
    y = _as_input_dtype(xp, target, input, fname)
    loss = -(y * logsigmoid(input) + (1.0 - y) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    loss = xp.sum(loss, axis=-1) / input.shape[-1]
    return reduce(xp, loss, reduction)


# autocast (vtl.amp): the list each op belongs to
_autocast.apply(globals(), float32_ops=tuple(__all__))
