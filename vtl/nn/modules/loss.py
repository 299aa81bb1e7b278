"""A module for every loss in ``vtl.nn.functional`` (``weight``/``pos_weight``
are buffers, so they move with ``.to()`` and are saved in ``state_dict``)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from .. import functional as F
from ..functional._utils import check_reduction
from ._utils import check_tensor
from .module import Module

__all__ = [
    "BCELoss", "BCEWithLogitsLoss", "CrossEntropyLoss", "GaussianNLLLoss", "HuberLoss",
    "KLDivLoss", "L1Loss", "MSELoss", "NLLLoss", "NLLLoss2d", "PoissonNLLLoss", "SmoothL1Loss",
    "SoftMarginLoss",
]
__all__ += [
    "CTCLoss", "CosineEmbeddingLoss", "HingeEmbeddingLoss", "MarginRankingLoss",
    "MultiLabelMarginLoss", "MultiLabelSoftMarginLoss", "MultiMarginLoss", "TripletMarginLoss",
    "TripletMarginWithDistanceLoss",
]


class _Loss(Module):
    _extra_reductions: tuple[str, ...] = ()

    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        check_reduction(reduction, type(self).__name__, self._extra_reductions)
        self.reduction = reduction

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}" if self.reduction != "mean" else ""

    def _check(self, input: Any, target: Any) -> None:  # noqa: A002
        check_tensor(self, input)
        check_tensor(self, target, "target")


class _WeightedLoss(_Loss):
    def __init__(self, weight: Any = None, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.register_buffer("weight", weight)


class MSELoss(_Loss):
    """Mean squared error."""

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        self._check(input, target)
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """Mean absolute error."""

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        self._check(input, target)
        return F.l1_loss(input, target, reduction=self.reduction)


class SoftMarginLoss(_Loss):
    """Two-class logistic loss for targets in {-1, 1}."""

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        self._check(input, target)
        return F.soft_margin_loss(input, target, reduction=self.reduction)


class HuberLoss(_Loss):
    """Quadratic below ``delta``, linear above."""

    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        super().__init__(reduction)
        self.delta = delta

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        self._check(input, target)
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class SmoothL1Loss(_Loss):
    """Quadratic below ``beta`` (scaled by ``1/beta``), L1 above."""

    def __init__(self, reduction: str = "mean", beta: float = 1.0) -> None:
        super().__init__(reduction)
        self.beta = beta

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        self._check(input, target)
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class BCELoss(_WeightedLoss):
    """Binary cross-entropy of probabilities."""

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        self._check(input, target)
        return F.binary_cross_entropy(input, target, self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Binary cross-entropy of logits (stable), with optional ``pos_weight``."""

    def __init__(self, weight: Any = None, reduction: str = "mean",
                 pos_weight: Any = None) -> None:
        super().__init__(reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        self._check(input, target)
        return F.binary_cross_entropy_with_logits(input, target, self.weight,
                                                  reduction=self.reduction,
                                                  pos_weight=self.pos_weight)


class NLLLoss(_WeightedLoss):
    """Negative log likelihood of class indices (input: log-probabilities)."""

    def __init__(self, weight: Any = None, ignore_index: int = -100,
                 reduction: str = "mean") -> None:
        super().__init__(weight, reduction)
        self.ignore_index = ignore_index

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        self._check(input, target)
        return F.nll_loss(input, target, self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class CrossEntropyLoss(_WeightedLoss):
    """Cross-entropy of logits against class indices or probabilities."""

    def __init__(self, weight: Any = None, ignore_index: int = -100, reduction: str = "mean",
                 label_smoothing: float = 0.0) -> None:
        super().__init__(weight, reduction)
        if not 0.0 <= label_smoothing <= 1.0:
            raise ValueError(f"CrossEntropyLoss: label_smoothing must be in [0, 1], got "
                             f"{label_smoothing}")
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        self._check(input, target)
        return F.cross_entropy(input, target, self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class KLDivLoss(_Loss):
    """KL divergence with log-space input; ``reduction='batchmean'`` for the true KL."""

    _extra_reductions = ("batchmean",)

    def __init__(self, reduction: str = "mean", log_target: bool = False) -> None:
        super().__init__(reduction)
        self.log_target = log_target

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        self._check(input, target)
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class PoissonNLLLoss(_Loss):
    """Poisson negative log likelihood."""

    def __init__(self, log_input: bool = True, full: bool = False, eps: float = 1e-8,
                 reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.log_input = log_input
        self.full = full
        self.eps = eps

    def forward(self, log_input: Any, target: Any) -> Any:
        self._check(log_input, target)
        return F.poisson_nll_loss(log_input, target, self.log_input, self.full, eps=self.eps,
                                  reduction=self.reduction)


class GaussianNLLLoss(_Loss):
    """Gaussian negative log likelihood with predicted variance."""

    def __init__(self, *, full: bool = False, eps: float = 1e-6,
                 reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.full = full
        self.eps = eps

    def forward(self, input: Any, target: Any, var: Any) -> Any:  # noqa: A002
        self._check(input, target)
        if not isinstance(var, (int, float)):
            check_tensor(self, var, "var")
        return F.gaussian_nll_loss(input, target, var, self.full, self.eps,
                                   reduction=self.reduction)


def _check_all(module: Module, **tensors: Any) -> None:
    for name, x in tensors.items():
        check_tensor(module, x, name)


class MarginRankingLoss(_Loss):
    """``max(0, -y (x1 - x2) + margin)`` for targets ``y`` in {1, -1}."""

    def __init__(self, margin: float = 0.0, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.margin = margin

    def forward(self, input1: Any, input2: Any, target: Any) -> Any:
        _check_all(self, input1=input1, input2=input2, target=target)
        return F.margin_ranking_loss(input1, input2, target, self.margin,
                                     reduction=self.reduction)


class HingeEmbeddingLoss(_Loss):
    """``x`` where ``y = 1``, ``max(0, margin - x)`` where ``y = -1``."""

    def __init__(self, margin: float = 1.0, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.margin = margin

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        self._check(input, target)
        return F.hinge_embedding_loss(input, target, self.margin, reduction=self.reduction)


class CosineEmbeddingLoss(_Loss):
    """``1 - cos(x1, x2)`` where ``y = 1``, ``max(0, cos(x1, x2) - margin)`` where
    ``y = -1``."""

    def __init__(self, margin: float = 0.0, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.margin = margin

    def forward(self, input1: Any, input2: Any, target: Any) -> Any:
        _check_all(self, input1=input1, input2=input2, target=target)
        return F.cosine_embedding_loss(input1, input2, target, self.margin,
                                       reduction=self.reduction)


class TripletMarginLoss(_Loss):
    """``max(d(a, p) - d(a, n) + margin, 0)`` with the ``p``-norm distance
    ``||x - y + eps||_p``; ``swap`` takes ``min(d(a, n), d(p, n))``."""

    def __init__(self, margin: float = 1.0, p: float = 2.0, eps: float = 1e-6,
                 swap: bool = False, reduction: str = "mean") -> None:
        super().__init__(reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginLoss: margin must be greater than 0, got {margin}")
        self.margin = margin
        self.p = p
        self.eps = eps
        self.swap = swap

    def forward(self, anchor: Any, positive: Any, negative: Any) -> Any:
        _check_all(self, anchor=anchor, positive=positive, negative=negative)
        return F.triplet_margin_loss(anchor, positive, negative, self.margin, self.p, self.eps,
                                     self.swap, reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    """Triplet margin loss for any ``distance_function`` (default: Euclidean)."""

    def __init__(self, *, distance_function: Callable[[Any, Any], Any] | None = None,
                 margin: float = 1.0, swap: bool = False, reduction: str = "mean") -> None:
        super().__init__(reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginWithDistanceLoss: margin must be greater than 0, "
                             f"got {margin}")
        if distance_function is not None and not callable(distance_function):
            raise TypeError(f"TripletMarginWithDistanceLoss: distance_function must be "
                            f"callable, got {type(distance_function).__name__}")
        self.distance_function = distance_function
        self.margin = margin
        self.swap = swap

    def forward(self, anchor: Any, positive: Any, negative: Any) -> Any:
        _check_all(self, anchor=anchor, positive=positive, negative=negative)
        return F.triplet_margin_with_distance_loss(
            anchor, positive, negative, distance_function=self.distance_function,
            margin=self.margin, swap=self.swap, reduction=self.reduction)


class MultiMarginLoss(_WeightedLoss):
    """Multi-class hinge loss of class indices (``p`` 1 or 2, per-class ``weight``)."""

    def __init__(self, p: int = 1, margin: float = 1.0, weight: Any = None,
                 reduction: str = "mean") -> None:
        if p not in (1, 2) or isinstance(p, bool):
            raise ValueError(f"MultiMarginLoss: only p == 1 and p == 2 are supported, got {p!r}")
        super().__init__(weight, reduction)
        if weight is not None and weight.ndim != 1:
            raise ValueError(f"MultiMarginLoss: weight must be 1-D (one per class), got "
                             f"shape {tuple(weight.shape)}")
        self.p = p
        self.margin = margin

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        self._check(input, target)
        return F.multi_margin_loss(input, target, self.p, self.margin, self.weight,
                                   reduction=self.reduction)


class MultiLabelMarginLoss(_Loss):
    """Multi-label hinge loss; each target row lists classes up to the first -1."""

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        self._check(input, target)
        return F.multilabel_margin_loss(input, target, reduction=self.reduction)


class MultiLabelSoftMarginLoss(_WeightedLoss):
    """Multi-label one-versus-all logistic loss, averaged over classes."""

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        self._check(input, target)
        return F.multilabel_soft_margin_loss(input, target, self.weight,
                                             reduction=self.reduction)


class CTCLoss(_Loss):
    """Connectionist temporal classification loss (see ``vtl.nn.functional.ctc_loss``)."""

    def __init__(self, blank: int = 0, reduction: str = "mean",
                 zero_infinity: bool = False) -> None:
        super().__init__(reduction)
        if isinstance(blank, bool) or not isinstance(blank, int) or blank < 0:
            raise ValueError(f"CTCLoss: blank must be a non-negative class index, got {blank!r}")
        self.blank = blank
        self.zero_infinity = zero_infinity

    def forward(self, log_probs: Any, targets: Any, input_lengths: Any,
                target_lengths: Any) -> Any:
        _check_all(self, log_probs=log_probs, targets=targets)
        return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank,
                          self.reduction, self.zero_infinity)


class NLLLoss2d(NLLLoss):
    """Deprecated alias of :class:`NLLLoss` (which takes ``(N, C, H, W)`` inputs too); warns
    with a ``FutureWarning`` as PyTorch."""

    def __init__(self, weight: Any = None, ignore_index: int = -100,
                 reduction: str = "mean") -> None:
        warnings.warn("`NLLLoss2d` has been deprecated. Please use `NLLLoss` instead as a "
                      "drop-in replacement.", FutureWarning, stacklevel=2)
        super().__init__(weight, ignore_index, reduction)
