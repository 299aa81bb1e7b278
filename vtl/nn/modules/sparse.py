"""Embedding: a lookup table of learned vectors."""

from __future__ import annotations

from typing import Any

import vtl

from .. import functional as F
from .. import init
from ._utils import check_tensor, empty
from .module import Module, Parameter

__all__ = ["Embedding"]


class Embedding(Module):
    """Rows of a ``(num_embeddings, embedding_dim)`` weight looked up by integer
    indices. Default init ``N(0, 1)`` with the ``padding_idx`` row zeroed (and
    kept out of the gradient), as PyTorch."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 max_norm: float | None = None, norm_type: float = 2.0,
                 scale_grad_by_freq: bool = False, sparse: bool = False,
                 _weight: Any = None, _freeze: bool = False, *, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"Embedding: padding_idx {padding_idx} must be within "
                                 f"[-{num_embeddings}, {num_embeddings})")
            padding_idx %= num_embeddings
        if scale_grad_by_freq or sparse:
            raise NotImplementedError("Embedding: scale_grad_by_freq and sparse are not "
                                      "supported")
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = padding_idx
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.sparse = sparse
        if _weight is None:
            self.weight = Parameter(empty((num_embeddings, embedding_dim), device, dtype),
                                    requires_grad=not _freeze)
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise ValueError(f"Embedding: _weight has shape {tuple(_weight.shape)}, "
                                 f"expected {(num_embeddings, embedding_dim)}")
            self.weight = Parameter(_weight, requires_grad=not _freeze)

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with vtl.no_grad():
                self.weight[self.padding_idx] = 0.0

    def _describe(self) -> str:
        return f"Embedding({self.num_embeddings}, {self.embedding_dim})"

    def forward(self, input: Any) -> Any:  # noqa: A002
        check_tensor(self, input)
        if not vtl.isdtype(input.dtype, "integral"):
            raise TypeError(f"{self._describe()}: indices must be integers, got dtype "
                            f"{input.dtype}")
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm,
                           self.norm_type)

    @classmethod
    def from_pretrained(cls, embeddings: Any, freeze: bool = True,
                        padding_idx: int | None = None, max_norm: float | None = None,
                        norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                        sparse: bool = False) -> Embedding:
        """An Embedding holding ``embeddings`` (2-D); frozen unless ``freeze=False``."""
        if embeddings.ndim != 2:
            raise ValueError(f"Embedding.from_pretrained: embeddings must be 2-D, got shape "
                             f"{tuple(embeddings.shape)}")
        rows, cols = embeddings.shape
        return cls(rows, cols, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse,
                   _weight=embeddings, _freeze=freeze)

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        return s
