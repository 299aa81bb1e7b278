"""Connectionist temporal classification loss (``ctc_loss``), PyTorch's semantics.

The forward (alpha) recursion runs in log space over the extended label sequence
``blank, l1, blank, l2, ..., blank`` of every sample at once: one vectorised update of
an ``(N, 2S + 1)`` array per time step, the loop over time only. It is written with
standard array-API calls, so autograd differentiates through it (the gradient is the
exact derivative with respect to ``log_probs``) and the same code runs, without
gradients, on NumPy, CuPy or array-api-strict arrays.

Unreachable states hold a large negative finite number rather than ``-inf``, so no
``inf - inf`` appears in a value or a gradient; a sample whose final value stays at
that level has no alignment and gets the loss ``inf`` (0 with ``zero_infinity``),
with a zero gradient.

Lengths decide the work's shape, so they are read on the host: Python integers and
sequences as they are; tensors and arrays are copied to the host once (as PyTorch
does). Targets are checked (class range, no blank), which reads one flag back from
the device.
"""

from __future__ import annotations

import math
import operator
from typing import Any

from ... import _autocast
from ...autograd.grad_mode import no_grad
from ._utils import check_reduction, namespace

__all__ = ["ctc_loss"]

#: The log-probability of an unreachable state: finite, so no ``inf - inf`` arises, and
#: far below any reachable path's value (which is a sum of at most T log-probabilities).
_NEG = -1e30


def _type(x: Any) -> str:
    t = type(x)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _host_ints(x: Any, name: str) -> tuple[list[int], bool]:
    """The values of an int, a sequence of ints, or a 0-d/1-D integer array, and
    whether they came as a scalar."""
    if isinstance(x, bool):
        raise TypeError(f"ctc_loss(): {name} must be an int, a sequence of ints or an integer "
                        "tensor, got bool")
    if isinstance(x, int):
        return [x], True
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        xp = namespace(x)
        if not xp.isdtype(x.dtype, "integral"):
            raise TypeError(f"ctc_loss(): {name} must have an integer dtype, got {x.dtype}")
        if x.ndim > 1:
            raise ValueError(f"ctc_loss(): {name} must be 0-d or 1-D, got shape "
                             f"{tuple(x.shape)}")
        if hasattr(x, "tolist"):
            vals = x.tolist()
        else:
            vals = int(x) if x.ndim == 0 else [int(x[i]) for i in range(x.shape[0])]
        return ([vals], True) if x.ndim == 0 else (list(vals), False)
    if isinstance(x, (list, tuple)):
        try:
            return [operator.index(v) for v in x], False
        except TypeError:
            raise TypeError(f"ctc_loss(): {name} must hold integers, got "
                            f"{[_type(v) for v in x]}") from None
    raise TypeError(f"ctc_loss(): {name} must be an int, a sequence of ints or an integer "
                    f"tensor, got {_type(x)}")


def _lengths(x: Any, n: int, batched: bool, name: str) -> list[int]:
    vals, scalar = _host_ints(x, name)
    if batched and scalar or len(vals) != n:
        want = f"({n},)" if batched else "a scalar or shape (1,)"
        raise ValueError(f"ctc_loss(): {name} must have one entry per sample, {want}, got "
                         f"{'a scalar' if scalar else f'{len(vals)} entries'}")
    return vals


def _lse(xp: Any, *terms: Any) -> Any:
    """``log(sum(exp(terms)))`` of finite arrays, the shift outside the graph."""
    with no_grad():
        m = terms[0]
        for t in terms[1:]:
            m = xp.maximum(m, t)
    s = xp.exp(terms[0] - m)
    for t in terms[1:]:
        s = s + xp.exp(t - m)
    return xp.log(s) + m


def ctc_loss(log_probs: Any, targets: Any, input_lengths: Any, target_lengths: Any,
             blank: int = 0, reduction: str = "mean", zero_infinity: bool = False) -> Any:
    """Connectionist temporal classification loss: ``-log`` of the total probability of
    every alignment of each target sequence to its input frames.

    Args:
        log_probs: ``(T, N, C)`` log-probabilities over ``C`` classes (blank included)
            for ``T`` frames of ``N`` samples, e.g. ``log_softmax(x, 2)``; ``(T, C)`` for
            one unbatched sample.
        targets: class indices (an integer dtype, never ``blank``): padded ``(N, S)``
            (row ``n`` holds ``target_lengths[n]`` labels, the rest is ignored) or
            concatenated ``(sum(target_lengths),)``; unbatched, the ``(target_length,)``
            labels.
        input_lengths: frames used per sample, each in ``[0, T]`` (ints, a sequence or an
            integer tensor of shape ``(N,)``; a scalar when unbatched).
        target_lengths: labels per sample, likewise.
        blank: the blank class, in ``[0, C)``.
        reduction: ``'mean'`` (each loss divided by its target length, clamped to at least
            1, then the mean over the batch), ``'sum'`` or ``'none'`` (``(N,)``, or 0-d
            unbatched).
        zero_infinity: give samples without any alignment (targets too long for their
            frames) the loss 0 instead of ``inf``. Their gradient is 0 either way.
    """
    fname = "ctc_loss"
    check_reduction(reduction, fname)
    xp = namespace(log_probs, targets)
    if log_probs.ndim not in (2, 3):
        raise ValueError(f"{fname}(): log_probs must be (T, N, C) or unbatched (T, C), got "
                         f"shape {tuple(log_probs.shape)}")
    if not xp.isdtype(log_probs.dtype, "real floating"):
        raise TypeError(f"{fname}(): log_probs must have a real floating-point dtype, got "
                        f"{log_probs.dtype}")
    if not xp.isdtype(targets.dtype, "integral"):
        raise TypeError(f"{fname}(): targets must hold class indices of an integer dtype, got "
                        f"{targets.dtype}")
    batched = log_probs.ndim == 3
    t_max, c = log_probs.shape[0], log_probs.shape[-1]
    n = log_probs.shape[1] if batched else 1
    if isinstance(blank, bool) or not isinstance(blank, int) or not 0 <= blank < c:
        raise ValueError(f"{fname}(): blank must be a class index in [0, {c}), got {blank!r}")
    il = _lengths(input_lengths, n, batched, "input_lengths")
    tl = _lengths(target_lengths, n, batched, "target_lengths")
    for name, vals, hi in (("input_lengths", il, t_max), ("target_lengths", tl, None)):
        for v in vals:
            if v < 0 or (hi is not None and v > hi):
                bound = f"in [0, {hi}] (T)" if hi is not None else ">= 0"
                raise ValueError(f"{fname}(): {name} must be {bound}, got {v}")

    # gather index of each sample's labels in the flattened targets (host lists)
    if targets.ndim == 2 and batched:
        if targets.shape[0] != n:
            raise ValueError(f"{fname}(): padded targets must have shape (N, S) with N = {n}, "
                             f"got {tuple(targets.shape)}")
        stride = targets.shape[1]
        starts = [i * stride for i in range(n)]
        for v in tl:
            if v > stride:
                raise ValueError(f"{fname}(): target_lengths value {v} exceeds the padded "
                                 f"targets' length {stride}")
    elif targets.ndim == 1:
        if targets.shape[0] != sum(tl):
            raise ValueError(f"{fname}(): concatenated targets must have sum(target_lengths) "
                             f"= {sum(tl)} entries, got {targets.shape[0]}")
        starts = [sum(tl[:i]) for i in range(n)]
    else:
        want = "(N, S) or (sum(target_lengths),)" if batched else "(target_length,)"
        raise ValueError(f"{fname}(): targets must have shape {want}, got "
                         f"{tuple(targets.shape)} for log_probs of shape "
                         f"{tuple(log_probs.shape)}")

    out_dtype = log_probs.dtype
    lp = log_probs if batched else xp.reshape(log_probs, (t_max, 1, c))
    if xp.finfo(lp.dtype).bits < 32:  # half precision cannot hold the recursion's range
        lp = xp.astype(lp, xp.float32)
    dt = lp.dtype
    dev = lp.device
    s_max = max(tl, default=0)
    big_l = 2 * s_max + 1
    int_dt = xp.int64 if n * max(big_l, c) >= 2**31 else xp.int32

    # extended labels (N, L): blank, l1, blank, l2, ..., blank (blank past each target)
    if s_max:
        last_entry = math.prod(targets.shape) - 1  # past a sample's labels: any valid entry
        idx = [min(starts[i] + min(k, max(tl[i] - 1, 0)), last_entry)
               for i in range(n) for k in range(s_max)]
        valid_h = [k < tl[i] for i in range(n) for k in range(s_max)]
        valid = xp.reshape(xp.asarray(valid_h, dtype=xp.bool, device=dev), (n, s_max))
        flat = xp.reshape(targets, (-1,))
        lab = xp.reshape(xp.take(flat, xp.asarray(idx, dtype=int_dt, device=dev), axis=0),
                         (n, s_max))
        outside = valid & ((lab < 0) | (lab >= c))
        if bool(xp.any(outside | (valid & (lab == blank)))):  # one read-back
            if bool(xp.any(outside)):
                raise IndexError(f"{fname}(): target {int(lab[outside][0])} is out of bounds "
                                 f"for {c} classes")
            raise ValueError(f"{fname}(): targets must not contain the blank index {blank}")
        lab = xp.astype(xp.where(valid, lab, blank), int_dt)
        blanks = xp.full((n, s_max), blank, dtype=int_dt, device=dev)
        ext = xp.reshape(xp.stack([blanks, lab], axis=2), (n, 2 * s_max))
        ext = xp.concat([ext, xp.full((n, 1), blank, dtype=int_dt, device=dev)], axis=1)
        # a label may be reached from two states back when it differs from the previous one
        differs = xp.concat([xp.zeros((n, 1), dtype=xp.bool, device=dev),
                             lab[:, 1:] != lab[:, :-1]], axis=1)
        no = xp.zeros((n, s_max), dtype=xp.bool, device=dev)
        skip = xp.reshape(xp.stack([no, differs], axis=2), (n, 2 * s_max))
        skip = xp.concat([skip, xp.zeros((n, 1), dtype=xp.bool, device=dev)], axis=1)
    else:
        ext = xp.full((n, 1), blank, dtype=int_dt, device=dev)
        skip = None

    # alpha before the first frame: all mass on a virtual start that steps to s = 0 or 1
    col = xp.arange(big_l, dtype=int_dt, device=dev)
    alpha = xp.where(col == 0, xp.zeros((n, big_l), dtype=dt, device=dev), _NEG)
    steps = max(il, default=0)
    if steps:
        offs = xp.reshape(xp.arange(n, dtype=int_dt, device=dev) * c, (n, 1))
        e = xp.take(xp.reshape(lp[:steps, ...], (steps, n * c)), xp.reshape(ext + offs, (-1,)),
                    axis=1)
        e = xp.maximum(xp.reshape(e, (steps, n, big_l)), _NEG)  # -inf log-probs stay finite
        frames = xp.unstack(e, axis=0)
        neg = xp.full((n, 2), _NEG, dtype=dt, device=dev)
        il_dev = xp.reshape(xp.asarray(il, dtype=int_dt, device=dev), (n, 1))
        shortest = min(il)
        for t in range(steps):
            a1 = xp.concat([neg[:, :1], alpha[:, :-1]], axis=1)
            if skip is None:
                new = _lse(xp, alpha, a1) + frames[t]
            else:
                a2 = xp.where(skip, xp.concat([neg, alpha[:, :-2]], axis=1), _NEG)
                new = _lse(xp, alpha, a1, a2) + frames[t]
            alpha = new if t < shortest else xp.where(il_dev > t, new, alpha)

    # log-likelihood: end in the last blank or the last label
    flat_alpha = xp.reshape(alpha, (-1,))
    last = xp.take(flat_alpha, xp.asarray([i * big_l + 2 * tl[i] for i in range(n)],
                                          dtype=int_dt, device=dev), axis=0)
    prev = xp.take(flat_alpha, xp.asarray([i * big_l + max(2 * tl[i] - 1, 0) for i in range(n)],
                                          dtype=int_dt, device=dev), axis=0)
    has_label = xp.asarray([v > 0 for v in tl], dtype=xp.bool, device=dev)
    ll = _lse(xp, last, xp.where(has_label, prev, _NEG))
    nll = -ll
    impossible = ll < 0.5 * _NEG
    loss = xp.where(impossible, 0.0 if zero_infinity else float("inf"), nll)
    if loss.dtype != out_dtype:
        loss = xp.astype(loss, out_dtype)
    if reduction == "mean":
        denom = xp.asarray([float(max(v, 1)) for v in tl], dtype=out_dtype, device=dev)
        return xp.mean(loss / denom)
    if reduction == "sum":
        return xp.sum(loss)
    return loss if batched else xp.reshape(loss, ())


# autocast (vtl.amp): the list each op belongs to
_autocast.apply(globals(), float32_ops=tuple(__all__))
