"""LinearCrossEntropyLoss: a classifier head and its cross-entropy in one module."""

from __future__ import annotations

import math
from typing import Any

from .. import functional as F
from ..functional.linear_cross_entropy import LinearCrossEntropyOptions
from ._utils import check_tensor
from .linear import Linear
from .loss import _WeightedLoss

__all__ = ["LinearCrossEntropyLoss", "LinearCrossEntropyOptions"]


class LinearCrossEntropyLoss(_WeightedLoss):
    """Cross-entropy of ``linear(input)`` against ``target`` with the linear layer inside
    (``self.linear``: ``Linear(in_features, num_classes * prod(out_features), bias)``, its
    weight viewed as ``(num_classes, *out_features, in_features)`` in forward), as PyTorch
    2.13. ``weight``, ``reduction``, ``ignore_index`` (``None``: -100),
    ``label_smoothing`` and ``options`` as :func:`vtl.nn.functional.linear_cross_entropy`.
    """

    def __init__(self, in_features: int, num_classes: int, *, out_features: tuple[int, ...] = (),
                 bias: bool = False, device: Any = None, dtype: Any = None,
                 reduction: str = "mean", weight: Any = None, ignore_index: int | None = None,
                 label_smoothing: float = 0.0,
                 options: LinearCrossEntropyOptions | None = None) -> None:
        if weight is not None and tuple(weight.shape) != (num_classes,):
            raise ValueError(f"LinearCrossEntropyLoss: expected weight shape to be "
                             f"{(num_classes,)}, got {tuple(weight.shape)}")
        if not 0.0 <= label_smoothing <= 1.0:
            raise ValueError(f"LinearCrossEntropyLoss: expected label_smoothing to be in range "
                             f"[0, 1], got {label_smoothing}")
        super().__init__(weight, reduction)
        self.num_classes = num_classes
        self.out_features = tuple(out_features)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing
        self.linear = Linear(in_features, math.prod(self.out_features) * num_classes, bias=bias,
                             device=device, dtype=dtype)
        self.options = options

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        check_tensor(self, input)
        check_tensor(self, target, "target")
        lin = self.linear
        w = lin.weight.reshape((self.num_classes, *self.out_features, lin.in_features))
        b = None if lin.bias is None else lin.bias.reshape((self.num_classes,
                                                             *self.out_features))
        return F.linear_cross_entropy(input, w, target, linear_bias=b, weight=self.weight,
                                      reduction=self.reduction, ignore_index=self.ignore_index,
                                      label_smoothing=self.label_smoothing, options=self.options)

    def extra_repr(self) -> str:
        return (f"in_features={self.linear.in_features}, num_classes={self.num_classes}, "
                f"out_features={self.out_features}, bias={self.linear.bias is not None}, "
                f"reduction={self.reduction}, ignore_index={self.ignore_index}, "
                f"label_smoothing={self.label_smoothing}, options={self.options}")
