"""linear_cross_entropy: ``cross_entropy(linear(input, linear_weight, linear_bias), target)``
in one call, optionally in batch chunks that never hold the whole ``(N, C)`` logits
(PyTorch 2.13's ``torch.nn.functional.linear_cross_entropy``)."""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any

from ._utils import check_reduction, namespace
from .linear import linear
from .loss import cross_entropy

__all__ = ["linear_cross_entropy"]

_ACC_POLICIES = ("accurate", "balanced", "compact", "auto")


@dataclasses.dataclass
class LinearCrossEntropyOptions:
    """Asks :func:`linear_cross_entropy` for its chunked computation: the batch is processed
    ``batch_chunk_size`` rows at a time (default: ``ceil(N / max(1, C // in_features))``
    rows, so a chunk's logits are about the size of the input), each chunk under
    :func:`vtl.utils.checkpoint.checkpoint`, so neither forward nor backward keeps more than
    one chunk's logits. ``acc_dtype``: the floating dtype the logits and loss are computed
    in (default: the input's); the result is cast back. ``allow_retain_graph``,
    ``chunking_method`` and ``acc_policy`` (PyTorch's tuning knobs for its own kernels) are
    validated and kept, but vtl has one chunked algorithm, whatever their value.
    """

    allow_retain_graph: bool = False
    batch_chunk_size: int | None = None
    chunking_method: str | None = "auto"
    acc_policy: str = "auto"
    acc_dtype: Any = None

    def __post_init__(self) -> None:
        if self.batch_chunk_size is not None and (
                isinstance(self.batch_chunk_size, bool) or not isinstance(self.batch_chunk_size,
                                                                          int)
                or self.batch_chunk_size < 1):
            raise ValueError(f"LinearCrossEntropyOptions: batch_chunk_size must be a positive "
                             f"int or None, got {self.batch_chunk_size!r}")
        if self.acc_policy not in _ACC_POLICIES:
            raise ValueError(f"LinearCrossEntropyOptions: acc_policy must be one of "
                             f"{_ACC_POLICIES}, got {self.acc_policy!r}")
        if self.chunking_method is not None and not isinstance(self.chunking_method, str):
            raise TypeError(f"LinearCrossEntropyOptions: chunking_method must be a str or None, "
                            f"got {type(self.chunking_method).__name__}")


def linear_cross_entropy(input: Any, linear_weight: Any, target: Any, *,  # noqa: A002
                         linear_bias: Any = None, weight: Any = None, reduction: str = "mean",
                         ignore_index: int | None = None, label_smoothing: float = 0.0,
                         options: LinearCrossEntropyOptions | None = None) -> Any:
    """Cross-entropy of the logits ``linear(input, linear_weight, linear_bias)``.

    ``input`` ``(N, in_features)`` or ``(in_features,)``; ``linear_weight`` ``(C,
    *out_features, in_features)`` (``out_features`` make a K-dimensional loss whose logits
    are ``(N, C, *out_features)``); ``linear_bias`` ``(C, *out_features)``; ``target``
    class indices or probabilities (of the logits' shape), ``weight``, ``reduction``,
    ``ignore_index`` (``None`` means -100; not with probabilities) and ``label_smoothing``
    as :func:`cross_entropy`. With ``options`` (a :class:`LinearCrossEntropyOptions`) the
    batch is processed in chunks (class-index targets, ``label_smoothing == 0`` and no
    ``out_features`` only; other cases warn and take the reference path, as PyTorch).
    """
    xp = namespace(input, linear_weight, linear_bias, weight)
    check_reduction(reduction, "linear_cross_entropy")
    if input.ndim not in (1, 2):
        raise ValueError(f"linear_cross_entropy(): expected input with dimensionality 1 or 2, "
                         f"got shape {tuple(input.shape)}")
    if linear_weight.ndim < 2:
        raise ValueError(f"linear_cross_entropy(): expected linear_weight with dimensionality "
                         f"at least 2, got shape {tuple(linear_weight.shape)}")
    in_features = input.shape[-1]
    if in_features != linear_weight.shape[-1]:
        raise ValueError(f"linear_cross_entropy(): expected equal input and linear_weight last "
                         f"dimensions (in_features), got {in_features} and "
                         f"{linear_weight.shape[-1]}")
    batch = tuple(input.shape[:-1])
    c = linear_weight.shape[0]
    out_features = tuple(linear_weight.shape[1:-1])
    if linear_bias is not None and tuple(linear_bias.shape) != (c, *out_features):
        raise ValueError(f"linear_cross_entropy(): expected linear_bias shape "
                         f"{(c, *out_features)}, got {tuple(linear_bias.shape)}")
    if out_features and not batch:
        raise ValueError(f"linear_cross_entropy(): K-dimensional loss defined by linear_weight "
                         f"shape {tuple(linear_weight.shape)} requires batched input, (N, "
                         f"{in_features}), got unbatched input with shape {tuple(input.shape)}")
    logits_shape = (*batch, c, *out_features)
    probabilities = tuple(target.shape) == logits_shape
    if probabilities and ignore_index is not None:
        raise ValueError("linear_cross_entropy(): ignore_index cannot be specified when target "
                         "contains probabilities")
    ii = -100 if ignore_index is None else ignore_index
    if options is not None and not isinstance(options, LinearCrossEntropyOptions):
        raise TypeError(f"linear_cross_entropy(): options must be a LinearCrossEntropyOptions "
                        f"or None, got {type(options).__name__}")
    integer_target = xp.isdtype(target.dtype, "integral")
    if options is not None:
        if out_features or label_smoothing != 0.0 or not integer_target or probabilities:
            warnings.warn("linear_cross_entropy: ``options`` ignored; the chunked path needs "
                          "label_smoothing == 0, integer class-index targets and out_features "
                          f"== (); got label_smoothing={label_smoothing}, target.dtype="
                          f"{target.dtype}, out_features={out_features}.", stacklevel=2)
        else:
            return _chunked(xp, input, linear_weight, target, linear_bias, weight, reduction,
                            ii, options)
    w2, b2 = linear_weight, linear_bias
    if out_features:
        w2 = xp.reshape(linear_weight, (math.prod(out_features) * c, in_features))
        if linear_bias is not None:
            b2 = xp.reshape(linear_bias, (math.prod(out_features) * c,))
    logits = xp.reshape(linear(input, w2, b2), logits_shape)
    return cross_entropy(logits, target, weight, ignore_index=ii, reduction=reduction,
                         label_smoothing=label_smoothing)


def _chunked(xp: Any, input: Any, w: Any, target: Any, b: Any, weight: Any,  # noqa: A002
             reduction: str, ignore_index: int, options: LinearCrossEntropyOptions) -> Any:
    from ...utils.checkpoint import checkpoint

    batched = input.ndim == 2
    x = input if batched else xp.expand_dims(input, axis=0)
    t = target if batched else xp.expand_dims(target, axis=0)
    n, in_features = x.shape
    c = w.shape[0]
    if tuple(t.shape) != (n,):
        want = (n,) if batched else ()
        raise ValueError(f"linear_cross_entropy(): expected a target of shape {want} for input "
                         f"of shape {tuple(input.shape)}, got {tuple(target.shape)}")
    size = options.batch_chunk_size or max(1, -(-n // max(1, c // max(1, in_features))))
    acc = options.acc_dtype
    out_dtype = x.dtype

    def piece(xc: Any, tc: Any, wc: Any, bc: Any) -> Any:
        if acc is not None:
            xc, wc = xp.astype(xc, acc), xp.astype(wc, acc)
            bc = None if bc is None else xp.astype(bc, acc)
        red = "none" if reduction == "none" else "sum"
        wt = None if weight is None or acc is None else xp.astype(weight, acc)
        wt = weight if wt is None else wt
        return cross_entropy(linear(xc, wc, bc), tc, wt, ignore_index=ignore_index,
                             reduction=red)

    parts = []
    for lo in range(0, n, size):
        xc, tc = x[lo:lo + size, ...], t[lo:lo + size]
        if b is None:
            parts.append(checkpoint(lambda a, ww, tc=tc: piece(a, tc, ww, None), xc, w))
        else:
            parts.append(checkpoint(lambda a, ww, bb, tc=tc: piece(a, tc, ww, bb), xc, w, b))
    if reduction == "none":
        out = xp.astype(xp.concat(parts, axis=0) if len(parts) > 1 else parts[0], out_dtype)
        return out if batched else out[0]
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    if reduction == "mean":
        ignored = t == ignore_index
        if weight is None:
            denom = xp.sum(xp.astype(xp.logical_not(ignored), total.dtype))
        else:
            picked = xp.take(weight, xp.where(ignored, 0, t), axis=0)
            denom = xp.sum(xp.where(ignored, 0.0, xp.astype(picked, total.dtype)))
        total = total / denom
    return xp.astype(total, out_dtype)
