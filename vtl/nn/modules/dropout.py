"""Dropout layers: active in training mode, the identity in eval mode."""

from __future__ import annotations

from typing import Any

from ..._tensor import Tensor
from .. import functional as F
from ._utils import check_tensor
from .module import Module

__all__ = ["AlphaDropout", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "FeatureAlphaDropout"]


class _DropoutNd(Module):
    _fn: Any = None

    def __init__(self, p: float = 0.5, inplace: bool = False, *, generator: Any = None) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace
        self.generator = generator

    def forward(self, input: Any) -> Any:  # noqa: A002
        if input.__class__ is not Tensor:
            check_tensor(self, input)
        return type(self)._fn(input, self.p, self.training, self.inplace, generator=self.generator)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """Zero elements with probability ``p`` and scale the rest by ``1/(1-p)``
    (in training mode). Draws from ``generator`` or ``vtl.random``'s default."""

    _fn = staticmethod(F.dropout)


class Dropout1d(_DropoutNd):
    """Zero whole channels of ``(N, C, L)``/``(C, L)`` inputs."""

    _fn = staticmethod(F.dropout1d)


class Dropout2d(_DropoutNd):
    """Zero whole channels of ``(N, C, H, W)``/``(C, H, W)`` inputs."""

    _fn = staticmethod(F.dropout2d)


class Dropout3d(_DropoutNd):
    """Zero whole channels of ``(N, C, D, H, W)``/``(C, D, H, W)`` inputs."""

    _fn = staticmethod(F.dropout3d)


class AlphaDropout(_DropoutNd):
    """Dropout for SELU networks (keeps zero mean and unit variance)."""

    _fn = staticmethod(F.alpha_dropout)


class FeatureAlphaDropout(_DropoutNd):
    """Alpha dropout of whole channels of ``(N, C, *)`` inputs: a dropped channel is set to
    SELU's negative saturation value and an affine map keeps zero mean and unit variance
    (see :func:`vtl.nn.functional.feature_alpha_dropout`)."""

    _fn = staticmethod(F.feature_alpha_dropout)
