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
    (in training mode). Draws from ``generator`` or ``vtl.random``'s default.

    Args:
        p: Probability that an element (a channel, for the feature variants) is dropped, in ``[0,
            1]``.
        inplace: Write the result into the input and return it.
        generator: A :class:`vtl.random.Generator` to draw the mask from (default: ``vtl.random``'s
            default generator).

    Raises:
        ValueError: If ``p`` is not in ``[0, 1]``.

    Example:
        >>> drop = nn.Dropout(p=0.5)
        >>> sorted(set(drop(vtl.ones(6)).tolist()))  # training mode: zeros and 1 / (1 - p)
        [0.0, 2.0]
        >>> drop.eval()(vtl.ones(3)).tolist()
        [1.0, 1.0, 1.0]
    """

    _fn = staticmethod(F.dropout)


class Dropout1d(_DropoutNd):
    """Zero whole channels of ``(N, C, L)``/``(C, L)`` inputs.

    Args:
        p: Probability that an element (a channel, for the feature variants) is dropped, in ``[0,
            1]``.
        inplace: Write the result into the input and return it.
        generator: A :class:`vtl.random.Generator` to draw the mask from (default: ``vtl.random``'s
            default generator).

    Raises:
        ValueError: If ``p`` is not in ``[0, 1]``.
    """

    _fn = staticmethod(F.dropout1d)


class Dropout2d(_DropoutNd):
    """Zero whole channels of ``(N, C, H, W)``/``(C, H, W)`` inputs.

    Args:
        p: Probability that an element (a channel, for the feature variants) is dropped, in ``[0,
            1]``.
        inplace: Write the result into the input and return it.
        generator: A :class:`vtl.random.Generator` to draw the mask from (default: ``vtl.random``'s
            default generator).

    Raises:
        ValueError: If ``p`` is not in ``[0, 1]``.
    """

    _fn = staticmethod(F.dropout2d)


class Dropout3d(_DropoutNd):
    """Zero whole channels of ``(N, C, D, H, W)``/``(C, D, H, W)`` inputs.

    Args:
        p: Probability that an element (a channel, for the feature variants) is dropped, in ``[0,
            1]``.
        inplace: Write the result into the input and return it.
        generator: A :class:`vtl.random.Generator` to draw the mask from (default: ``vtl.random``'s
            default generator).

    Raises:
        ValueError: If ``p`` is not in ``[0, 1]``.
    """

    _fn = staticmethod(F.dropout3d)


class AlphaDropout(_DropoutNd):
    """Dropout for SELU networks (keeps zero mean and unit variance).

    Args:
        p: Probability that an element (a channel, for the feature variants) is dropped, in ``[0,
            1]``.
        inplace: Write the result into the input and return it.
        generator: A :class:`vtl.random.Generator` to draw the mask from (default: ``vtl.random``'s
            default generator).

    Raises:
        ValueError: If ``p`` is not in ``[0, 1]``.
    """

    _fn = staticmethod(F.alpha_dropout)


class FeatureAlphaDropout(_DropoutNd):
    """Alpha dropout of whole channels of ``(N, C, *)`` inputs: a dropped channel is set to
    SELU's negative saturation value and an affine map keeps zero mean and unit variance
    (see :func:`vtl.nn.functional.feature_alpha_dropout`).

    Args:
        p: Probability that an element (a channel, for the feature variants) is dropped, in ``[0,
            1]``.
        inplace: Write the result into the input and return it.
        generator: A :class:`vtl.random.Generator` to draw the mask from (default: ``vtl.random``'s
            default generator).

    Raises:
        ValueError: If ``p`` is not in ``[0, 1]``.
    """

    _fn = staticmethod(F.feature_alpha_dropout)
