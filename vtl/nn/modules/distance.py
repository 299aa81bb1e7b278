"""CosineSimilarity and PairwiseDistance."""

from __future__ import annotations

from typing import Any

from .. import functional as F
from .module import Module

__all__ = ["CosineSimilarity", "PairwiseDistance"]


class CosineSimilarity(Module):
    """``F.cosine_similarity(x1, x2, dim, eps)``: the cosine along ``dim``.

    Args:
        dim: The axis of the vectors.
        eps: Lower bound of each norm, to avoid division by zero.
    """

    def __init__(self, dim: int = 1, eps: float = 1e-8) -> None:
        super().__init__()
        self.dim = dim
        self.eps = eps

    def extra_repr(self) -> str:
        return f"dim={self.dim}, eps={self.eps}"

    def forward(self, x1: Any, x2: Any) -> Any:
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """``F.pairwise_distance(x1, x2, p, eps, keepdim)``: ``||x1 - x2 + eps||_p`` along the
    last axis.

    Args:
        p: The norm degree.
        eps: Added to the difference, to avoid division by zero.
        keepdim: Keep the reduced last axis (size 1).
    """

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> None:
        super().__init__()
        self.norm = p
        self.eps = eps
        self.keepdim = keepdim

    def extra_repr(self) -> str:
        return f"p={self.norm}, eps={self.eps}, keepdim={self.keepdim}"

    def forward(self, x1: Any, x2: Any) -> Any:
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)
