"""Loss functions with PyTorch's names, defaults and formulas.

Every loss takes ``reduction='mean' | 'sum' | 'none'`` (``kl_div`` also
``'batchmean'``). Input and target must have the same shape where PyTorch
would broadcast with a warning (a ``ValueError`` names both shapes). Stable
forms throughout: cross-entropy through ``log_softmax``, BCE-with-logits
through ``softplus``, logs clamped at -100 in ``binary_cross_entropy`` as in
PyTorch. Values are not validated on the device (that would need a host
sync): probabilities outside ``[0, 1]`` give nan. Class indices are checked
(``IndexError``), since a wrong index would silently read another class.

Gradients at the clamps are PyTorch's: ``binary_cross_entropy`` has its own
rule (``(x - t) / max(x (1 - x), 1e-12)``, finite at ``x = 0`` and ``x = 1``),
and the variance clamp of ``gaussian_nll_loss`` passes the gradient through.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

from ... import _autocast
from ..._ops._core import _grad, needs_grad, new, record, sum_to
from ..._tensor import Tensor
from ...autograd.grad_mode import no_grad
from ...backends._dtypes import kind as _dkind
from ._utils import _REDUCTIONS, check_reduction, check_same_shape, namespace, reduce
from .activation import softplus
from .softmax import log_softmax

__all__ = [
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "cross_entropy",
    "gaussian_nll_loss", "huber_loss", "kl_div", "l1_loss", "mse_loss", "nll_loss",
    "poisson_nll_loss", "smooth_l1_loss", "soft_margin_loss",
]


def _pointwise_setup(input: Any, target: Any, reduction: str, fname: str) -> Any:  # noqa: A002
    check_reduction(reduction, fname)
    xp = namespace(input, target)
    check_same_shape(input, target, fname)
    return xp


def mse_loss(input: Any, target: Any, *, reduction: str = "mean") -> Any:  # noqa: A002
    """``(input - target) ** 2``.

    On two real floating vtl tensors of one dtype and device this is one recorded
    node (``MseLossBackward``: ``2 (input - target) g``, divided by the count for
    ``'mean'``).
    """
    if isinstance(input, Tensor) and isinstance(target, Tensor):
        xd, yd = input._data, target._data
        dev = input._device
        if _dkind(xd.dtype) == "f" and yd.dtype == xd.dtype and target._device is dev \
                and xd.shape == yd.shape and reduction in _REDUCTIONS:
            xp = dev.xp
            d = xd - yd
            sq = d * d
            n = math.prod(xd.shape)
            if reduction == "mean":
                out = xp.sum(sq) / n if n else xp.mean(sq)
            elif reduction == "sum":
                out = xp.sum(sq)
            else:
                out = sq
            if _grad.enabled and (input._requires_grad or target._requires_grad):
                scale = 2.0 / n if reduction == "mean" and n else 2.0
                return record(out, dev, "MseLossBackward", (input, target),
                              partial(_mse_vjp, input, target, d, scale), (input, target))
            return new(out, dev)
    xp = _pointwise_setup(input, target, reduction, "mse_loss")
    d = input - target
    return reduce(xp, d * d, reduction)


def _mse_vjp(x: Tensor, y: Tensor, d: Any, scale: float, g: Tensor, _: Any) -> tuple:
    gx = gy = None
    if not _grad.enabled:  # plain backward: raw arrays
        dev = g._device
        r = d * (g._data * scale)
        if x._requires_grad:
            gx = new(r, dev)
        if y._requires_grad:
            gy = new(-r, dev)
        return gx, gy
    r = (x - y) * (g * scale)
    if x._requires_grad:
        gx = r
    if y._requires_grad:
        gy = -r
    return gx, gy


def l1_loss(input: Any, target: Any, *, reduction: str = "mean") -> Any:  # noqa: A002
    """``|input - target|`` (derivative 0 where they are equal)."""
    xp = _pointwise_setup(input, target, reduction, "l1_loss")
    return reduce(xp, xp.abs(input - target), reduction)


def huber_loss(input: Any, target: Any, *, reduction: str = "mean",  # noqa: A002
               delta: float = 1.0) -> Any:
    """``0.5 d^2`` where ``|d| < delta``, else ``delta * (|d| - 0.5 delta)``."""
    xp = _pointwise_setup(input, target, reduction, "huber_loss")
    if delta <= 0:
        raise ValueError(f"huber_loss(): delta must be > 0, got {delta}")
    d = input - target
    ad = xp.abs(d)
    loss = xp.where(ad < delta, 0.5 * d * d, delta * (ad - 0.5 * delta))
    return reduce(xp, loss, reduction)


def smooth_l1_loss(input: Any, target: Any, *, reduction: str = "mean",  # noqa: A002
                   beta: float = 1.0) -> Any:
    """``0.5 d^2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta`` (L1 for beta=0)."""
    xp = _pointwise_setup(input, target, reduction, "smooth_l1_loss")
    if beta < 0:
        raise ValueError(f"smooth_l1_loss(): beta must be >= 0, got {beta}")
    d = input - target
    ad = xp.abs(d)
    if beta == 0:
        return reduce(xp, ad, reduction)
    loss = xp.where(ad < beta, 0.5 * d * d / beta, ad - 0.5 * beta)
    return reduce(xp, loss, reduction)


def _weighted(loss: Any, weight: Any, fname: str) -> Any:
    if weight is None:
        return loss
    return loss * weight


def _log_or(xp: Any, x: Any, at_zero: float) -> Any:
    """``log(x)`` with the value ``at_zero`` where ``x == 0`` (no log(0) evaluated, so no
    warning and no nan in the gradient there); nan for ``x < 0``."""
    zero = x == 0
    return xp.where(zero, at_zero, xp.log(xp.where(zero, 1.0, x)))


def _bce_forward(xp: Any, x: Any, t: Any) -> Any:
    """PyTorch's elementwise BCE: ``(t - 1) max(log1p(-x), -100) - t max(log(x), -100)``."""
    one = x == 1
    log1m = xp.where(one, -100.0, xp.log1p(-xp.where(one, 0.0, x)))
    return (t - 1.0) * xp.maximum(log1m, -100.0) - t * xp.maximum(_log_or(xp, x, -100.0),
                                                                   -100.0)


def _neg_logit(x: Tensor) -> Tensor:
    """``-log(x / (1 - x))`` as ``-torch.logit(x)``: ``inf`` at 0, ``-inf`` at 1, nan outside
    ``[0, 1]``."""
    import vtl

    inside = (x > 0) & (x < 1)
    xs = vtl.where(inside, x, 0.5)
    edge = vtl.where(x == 0, math.inf, vtl.where(x == 1, -math.inf, vtl.full_like(x, math.nan)))
    return vtl.where(inside, -vtl.log(xs / (1.0 - xs)), edge)


#: PyTorch's ``EPSILON`` of the BCE gradient: 1e-12 rounded to float32, as it is declared.
_BCE_EPS = 9.999999960041972e-13


def _bce_vjp(x: Tensor, t: Tensor, g: Tensor, _: Any) -> tuple:
    """PyTorch's rules: ``g (x - t) / max(x (1 - x), eps)`` for the input (the clamped
    logs get a finite gradient, not 0) and ``-g logit(x)`` for the target."""
    import vtl

    gx = gt = None
    if x._requires_grad:
        gx = sum_to(g * (x - t) / vtl.maximum(x * (1.0 - x), _BCE_EPS), x)
    if isinstance(t, Tensor) and t._requires_grad:
        gt = sum_to(g * _neg_logit(x), t)
    return gx, gt


def binary_cross_entropy(input: Any, target: Any, weight: Any = None, *,  # noqa: A002
                         reduction: str = "mean") -> Any:
    """``-w (t log(x) + (1 - t) log(1 - x))`` for probabilities ``x``; each log is
    clamped at -100 as in PyTorch, whose gradient rule is used as well:
    ``w (x - t) / max(x (1 - x), 1e-12)`` for ``x`` and ``-w logit(x)`` for ``t``."""
    xp = _pointwise_setup(input, target, reduction, "binary_cross_entropy")
    if needs_grad(input, target):
        with no_grad():
            out = _bce_forward(xp, input, target)
        loss = record(out._data, out._device, "BinaryCrossEntropyBackward", (input, target),
                      partial(_bce_vjp, input, target), (input, target))
    else:
        loss = _bce_forward(xp, input, target)
    return reduce(xp, _weighted(loss, weight, "binary_cross_entropy"), reduction)


def binary_cross_entropy_with_logits(input: Any, target: Any, weight: Any = None, *,  # noqa: A002
                                     reduction: str = "mean", pos_weight: Any = None) -> Any:
    """``binary_cross_entropy(sigmoid(x), t)`` computed stably from logits:
    ``(1 - t) x + (1 + (pos_weight - 1) t) softplus(-x)``. ``pos_weight``
    broadcasts against the last (class) axis."""
    xp = _pointwise_setup(input, target, reduction, "binary_cross_entropy_with_logits")
    sp = softplus(-input, 1.0, math.inf)  # -log(sigmoid(x))
    if pos_weight is None:
        loss = (1.0 - target) * input + sp
    else:
        loss = (1.0 - target) * input + (1.0 + (pos_weight - 1.0) * target) * sp
    return reduce(xp, _weighted(loss, weight, "binary_cross_entropy_with_logits"), reduction)


def soft_margin_loss(input: Any, target: Any, *, reduction: str = "mean") -> Any:  # noqa: A002
    """``log(1 + exp(-t x))`` for targets ``t`` in {-1, 1}."""
    xp = _pointwise_setup(input, target, reduction, "soft_margin_loss")
    return reduce(xp, softplus(-target * input, 1.0, math.inf), reduction)


def poisson_nll_loss(input: Any, target: Any, log_input: bool = True, full: bool = False,  # noqa: A002
                     *, eps: float = 1e-8, reduction: str = "mean") -> Any:
    """Poisson negative log likelihood: ``exp(x) - t x`` (``log_input``) or
    ``x - t log(x + eps)``; ``full`` adds Stirling's term for ``t > 1``."""
    xp = _pointwise_setup(input, target, reduction, "poisson_nll_loss")
    if log_input:
        loss = xp.exp(input) - target * input
    else:
        loss = input - target * xp.log(input + eps)
    if full:
        big = target > 1
        ts = xp.where(big, target, 2.0)
        stirling = ts * xp.log(ts) - ts + 0.5 * xp.log(2.0 * math.pi * ts)
        loss = loss + xp.where(big, stirling, 0.0)
    return reduce(xp, loss, reduction)


def _clamped_copy(xp: Any, v: Any, lo: float) -> Any:
    """``max(v, lo)`` whose gradient is the identity's (PyTorch clamps a copy of ``var``
    in place under no_grad, so the gradient passes the clamp, evaluated at ``lo``)."""
    if needs_grad(v):
        with no_grad():
            out = xp.maximum(v, lo)
        return record(out._data, out._device, "CloneBackward", (v,), lambda g, _: g)
    return xp.maximum(v, lo)


def _gaussian_var(xp: Any, var: Any, input: Any) -> Any:  # noqa: A002
    """``var`` checked and shaped as PyTorch's ``gaussian_nll_loss`` takes it: the input's
    shape; one fewer trailing axis (homoscedastic: a trailing axis is added); or the
    input's rank with exactly one axis of size 1 where the input's differs."""
    if isinstance(var, (int, float)):
        if var < 0:
            raise ValueError(f"gaussian_nll_loss(): var must be >= 0, got {var}")
        return xp.full(input.shape, float(var), dtype=input.dtype, device=input.device)
    vshape, ishape = tuple(var.shape), tuple(input.shape)
    if vshape != ishape:
        if vshape == ishape[:-1]:
            var = xp.expand_dims(var, axis=-1)
        elif not (len(vshape) == len(ishape)
                  and sum(v for i, v in zip(ishape, vshape, strict=True) if i != v) == 1):
            raise ValueError(f"gaussian_nll_loss(): var of shape {vshape} does not fit input "
                             f"of shape {ishape} (expected {ishape}, {ishape[:-1]}, or "
                             f"{ishape} with one axis of size 1)")
    if bool(xp.any(var < 0)):
        raise ValueError("gaussian_nll_loss(): var has negative entries")
    return var


def gaussian_nll_loss(input: Any, target: Any, var: Any, full: bool = False,  # noqa: A002
                      eps: float = 1e-6, *, reduction: str = "mean") -> Any:
    """``0.5 (log(v) + (x - t)^2 / v)`` with ``v = max(var, eps)`` (+ ``0.5 log(2 pi)``
    when ``full``). ``var`` has the input's shape, one fewer trailing axis, or one axis
    of size 1 (broadcast), or is a number. As in PyTorch the clamp passes the gradient
    through: below ``eps``, ``var`` gets the gradient at ``eps``, not 0."""
    xp = _pointwise_setup(input, target, reduction, "gaussian_nll_loss")
    v = _clamped_copy(xp, _gaussian_var(xp, var, input), eps)
    loss = 0.5 * (xp.log(v) + (input - target) ** 2 / v)
    if full:
        loss = loss + 0.5 * math.log(2.0 * math.pi)
    return reduce(xp, loss, reduction)


def kl_div(input: Any, target: Any, *, reduction: str = "mean",  # noqa: A002
           log_target: bool = False) -> Any:
    """Pointwise KL divergence with ``input`` in log space: ``t (log t - x)`` (0 where
    ``t = 0``), or ``exp(t) (t - x)`` when ``log_target``. ``reduction='batchmean'``
    divides the sum by the batch size (the mathematically correct KL)."""
    check_reduction(reduction, "kl_div", ("batchmean",))
    check_same_shape(input, target, "kl_div")
    xp = namespace(input, target)
    if log_target:
        loss = xp.exp(target) * (target - input)
    else:
        loss = target * _log_or(xp, target, 0.0) - target * input  # xlogy(t, t) - t x
    if reduction == "batchmean":
        s = xp.sum(loss)
        return s / input.shape[0] if input.ndim else s
    return reduce(xp, loss, reduction)


# -- nll / cross-entropy --------------------------------------------------------------------
def _class_layout(input: Any, target: Any, fname: str) -> tuple[Any, Any, int, bool]:  # noqa: A002
    """``input`` as ``(M, C)`` rows and ``target`` as ``(M,)``; returns whether the
    input was unbatched (``(C,)`` with a 0-d target)."""
    xp = namespace(input, target)
    if input.ndim == 0:
        raise ValueError(f"{fname}(): input must have a class axis, got a 0-d input")
    unbatched = input.ndim == 1
    if unbatched:
        expect = ()
    else:
        expect = (input.shape[0],) + tuple(input.shape[2:])
    if tuple(target.shape) != expect:
        raise ValueError(
            f"{fname}(): class-index target of shape {tuple(target.shape)} does not match "
            f"input of shape {tuple(input.shape)} (expected target shape {expect})"
        )
    if not xp.isdtype(target.dtype, "integral"):
        raise TypeError(f"{fname}(): class-index targets need an integer dtype, got "
                        f"{target.dtype} (probability targets must have the input's shape)")
    c = input.shape[0] if unbatched else input.shape[1]
    if unbatched:
        rows = xp.reshape(input, (1, c))
    elif input.ndim == 2:
        rows = input
    else:
        rows = xp.reshape(xp.moveaxis(input, 1, -1), (-1, c))
    return rows, xp.reshape(target, (-1,)), c, unbatched


def _check_weight(weight: Any, c: int, fname: str) -> None:
    if weight is not None and tuple(weight.shape) != (c,):
        raise ValueError(f"{fname}(): weight must have shape ({c},) (one per class), got "
                         f"{tuple(weight.shape)}")


def _check_targets(xp: Any, t: Any, ignored: Any, c: int, fname: str) -> None:
    """``IndexError`` naming the first target outside ``[0, c)`` that is not ignored
    (a host sync on accelerators)."""
    bad = xp.logical_and(xp.logical_not(ignored), (t < 0) | (t >= c))
    if bool(xp.any(bad)):
        first = int(t[bad][0])
        raise IndexError(f"{fname}(): target {first} is out of bounds for {c} classes")


def _cross_entropy_fused(input: Tensor, target: Tensor, c: int, ignore_index: int,  # noqa: A002
                         reduction: str) -> Tensor | None:
    """The backend's fused cross-entropy kernel (``backend.kernel("cross_entropy")``) on
    (M, C) logits and (M,) class indices: one recorded node, ``CrossEntropyBackward``;
    ``None`` when the backend has none or the arguments need the general path.

    The targets are validated without a host sync when the backend knows their value
    range on the host (e.g. uploaded data); otherwise as the general path (one sync).
    """
    dev = input._device
    if target._device is not dev or reduction not in _REDUCTIONS:
        return None
    kern = dev.backend.kernel("cross_entropy")
    if kern is None:
        return None
    xd, td = input._data, target._data
    if not kern.supports(xd, td):
        return None
    if not kern.targets_valid(td, c, ignore_index):
        xp = dev.xp
        _check_targets(xp, td, td == ignore_index, c, "cross_entropy")
    loss, saved = kern.fwd(xd, td, reduction, ignore_index)
    if _grad.enabled and input._requires_grad:
        return record(loss, dev, "CrossEntropyBackward", (input,),
                      partial(_cross_entropy_vjp, kern, input, target, saved, ignore_index,
                              reduction), (input,))
    return new(loss, dev)


def _cross_entropy_vjp(kern: Any, x: Tensor, t: Tensor, saved: Any, ignore_index: int,
                       reduction: str, g: Tensor, _: Any) -> Tensor:
    if not _grad.enabled:  # plain backward: the backend's kernel on raw arrays
        return new(kern.grad(x._data, t._data, saved, g._data, reduction, ignore_index),
                   g._device)
    import vtl

    # create_graph: softmax(x) - onehot(t), weighted and scaled, in differentiable ops
    from .softmax import softmax

    c = x.shape[1]
    dev = x._device
    xp = dev.xp
    td = t._data
    ignored = td == ignore_index
    w = new(xp.astype(xp.logical_not(ignored), x._data.dtype), dev)
    cls = xp.arange(c, dtype=td.dtype, device=td.device)
    onehot = new(xp.astype(xp.expand_dims(td, axis=1) == cls, x._data.dtype), dev)
    scale = g * w if reduction == "none" else g * (w / vtl.sum(w) if reduction == "mean" else w)
    gx = (softmax(x, 1) - onehot) * vtl.expand_dims(scale, axis=1)
    return vtl.where(new(xp.expand_dims(ignored, axis=1), dev), 0.0, gx)


def _picked(xp: Any, logp: Any, t: Any, c: int, weight: Any, ignore_index: int,
            fname: str) -> tuple[Any, Any, Any]:
    """Per-row ``-w[t] logp[t]`` (0 where ignored), the per-row weights (0 where
    ignored) and the ignore mask."""
    ignored = t == ignore_index
    if t.shape[0]:
        _check_targets(xp, t, ignored, c, fname)
    ts = xp.where(ignored, 0, t)
    lp = xp.take_along_axis(logp, xp.expand_dims(ts, axis=1), axis=1)[:, 0]
    if weight is None:
        w = xp.astype(xp.logical_not(ignored), logp.dtype)
    else:
        w = xp.where(ignored, 0.0, xp.take(weight, ts, axis=0))
    loss = xp.where(ignored, 0.0, -(lp * w))
    return loss, w, ignored


def nll_loss(input: Any, target: Any, weight: Any = None, *, ignore_index: int = -100,  # noqa: A002
             reduction: str = "mean") -> Any:
    """Negative log likelihood of class indices: ``-weight[t] * input[t]`` along the
    class axis 1 (axis 0 for an unbatched ``(C,)`` input). ``'mean'`` divides by the
    total weight of the non-ignored targets (nan when all are ignored)."""
    check_reduction(reduction, "nll_loss")
    rows, t, c, unbatched = _class_layout(input, target, "nll_loss")
    _check_weight(weight, c, "nll_loss")
    xp = namespace(input, target, weight)
    loss, w, _ = _picked(xp, rows, t, c, weight, ignore_index, "nll_loss")
    return _reduce_nll(xp, loss, w, reduction, tuple(target.shape))


def _reduce_nll(xp: Any, loss: Any, w: Any, reduction: str, shape: tuple[int, ...]) -> Any:
    if reduction == "mean":
        return xp.sum(loss) / xp.sum(w)
    if reduction == "sum":
        return xp.sum(loss)
    return xp.reshape(loss, shape)


def cross_entropy(input: Any, target: Any, weight: Any = None, *,  # noqa: A002
                  ignore_index: int = -100, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Any:
    """Cross-entropy of unnormalised logits ``input`` (class axis 1, or 0 when
    unbatched) against class indices or class probabilities.

    * Class indices: ``nll_loss(log_softmax(input), ...)``; with label smoothing
      ``eps`` the loss is ``(1 - eps) * nll + eps / C * sum_c(-w_c logp_c)``, the
      smoothing term zeroed at ignored targets and, for ``'mean'``, divided by the
      same total target weight as the nll term (PyTorch's definition).
    * Probabilities (``target`` has the input's shape): ``-sum_c w_c t_c logp_c``
      with ``t`` smoothed to ``t (1 - eps) + eps / C``; ``'mean'`` divides by the
      number of rows (not by weights). ``ignore_index`` does not apply.

    Example:
        >>> logits = vtl.asarray([[2.0, 0.0], [0.0, 2.0]])
        >>> round(float(nn.functional.cross_entropy(logits, vtl.asarray([0, 1]))), 4)
        0.1269
    """
    check_reduction(reduction, "cross_entropy")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy(): label_smoothing must be in [0, 1], got "
                         f"{label_smoothing}")
    xp = namespace(input, target, weight)
    if input.ndim == 0:
        raise ValueError("cross_entropy(): input must have a class axis, got a 0-d input")
    cdim = 0 if input.ndim == 1 else 1
    c = input.shape[cdim]
    _check_weight(weight, c, "cross_entropy")
    if weight is None and label_smoothing == 0.0 and input.ndim == 2 \
            and isinstance(input, Tensor) and isinstance(target, Tensor):
        res = _cross_entropy_fused(input, target, c, ignore_index, reduction)
        if res is not None:
            return res
    logp = log_softmax(input, cdim)
    if tuple(target.shape) == tuple(input.shape) and xp.isdtype(target.dtype,
                                                                 "real floating"):
        return _cross_entropy_probs(xp, logp, target, weight, cdim, c, reduction,
                                    label_smoothing)
    rows, t, c, unbatched = _class_layout(logp, target, "cross_entropy")
    loss, w, ignored = _picked(xp, rows, t, c, weight, ignore_index, "cross_entropy")
    nll = _reduce_nll(xp, loss, w, reduction, tuple(target.shape))
    if label_smoothing == 0.0:
        return nll
    wrows = rows if weight is None else rows * weight
    smooth = xp.where(ignored, 0.0, -xp.sum(wrows, axis=1))
    if reduction == "mean":
        smooth = xp.sum(smooth) / xp.sum(w)
    elif reduction == "sum":
        smooth = xp.sum(smooth)
    else:
        smooth = xp.reshape(smooth, tuple(target.shape))
    return (1.0 - label_smoothing) * nll + (label_smoothing / c) * smooth


def _cross_entropy_probs(xp: Any, logp: Any, target: Any, weight: Any, cdim: int, c: int,
                         reduction: str, eps: float) -> Any:
    if eps > 0.0:
        target = target * (1.0 - eps) + eps / c
    prod = logp * target
    if weight is not None:
        prod = prod * xp.reshape(weight, (c,) + (1,) * (logp.ndim - cdim - 1))
    per = -xp.sum(prod, axis=cdim)
    if reduction == "mean":
        n = math.prod(logp.shape) // c if c else 0
        return xp.sum(per) / n if n else xp.sum(per) * math.nan
    if reduction == "sum":
        return xp.sum(per)
    return per


# autocast (vtl.amp): the list each op belongs to
_autocast.apply(globals(), float32_ops=tuple(__all__))
