"""Embedding and EmbeddingBag: lookup tables of learned vectors."""

from __future__ import annotations

from typing import Any

import vtl

from .. import functional as F
from .. import init
from ._utils import check_tensor, empty
from .module import Module, Parameter

__all__ = ["Embedding", "EmbeddingBag"]


class Embedding(Module):
    """Rows of a ``(num_embeddings, embedding_dim)`` weight looked up by integer
    indices in ``[0, num_embeddings)`` (a negative index is an ``IndexError``, as in
    PyTorch; see :func:`vtl.nn.functional.embedding`). Default init ``N(0, 1)`` with the
    ``padding_idx`` row zeroed (and kept out of the gradient), as PyTorch; a negative
    ``padding_idx`` is stored counted from the end. ``scale_grad_by_freq`` divides each row's
    gradient by its index's frequency in the batch; ``sparse=True`` is not
    supported.

    Args:
        num_embeddings: Size of the dictionary (number of rows).
        embedding_dim: Size of each embedding vector.
        padding_idx: A row that is zero at init and gets no gradient (negative values count from
            the end).
        max_norm: Renormalise each looked-up row whose norm exceeds this (in place, in the weight).
        norm_type: The p of the p-norm for ``max_norm``.
        scale_grad_by_freq: Divide each row's gradient by its index's frequency in the batch.
        sparse: Must be ``False``: vtl has no sparse gradients.
        device: Device of the parameters and buffers (default: the current default device).
        dtype: Floating dtype of the parameters and buffers (default: the default dtype).

    Raises:
        NotImplementedError: If ``sparse=True``.
        ValueError: If ``padding_idx`` is out of range.

    Example:
        >>> emb = nn.Embedding(10, 4, padding_idx=0)
        >>> emb(vtl.asarray([[1, 2, 0]])).shape
        (1, 3, 4)
        >>> emb.weight[0].tolist()
        [0.0, 0.0, 0.0, 0.0]
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 max_norm: float | None = None, norm_type: float = 2.0,
                 scale_grad_by_freq: bool = False, sparse: bool = False,
                 _weight: Any = None, _freeze: bool = False, *, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        padding_idx = _check_padding(self, num_embeddings, padding_idx)
        if sparse:
            raise NotImplementedError(f"{type(self).__name__}: sparse gradients (sparse=True) "
                                      "are not supported; use sparse=False")
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
                           self.norm_type, self.scale_grad_by_freq)

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
        if self.scale_grad_by_freq:
            s += ", scale_grad_by_freq=True"
        return s


def _check_padding(module: Any, num_embeddings: int, padding_idx: int | None) -> int | None:
    if padding_idx is None:
        return None
    if not -num_embeddings <= padding_idx < num_embeddings:
        raise ValueError(f"{type(module).__name__}: padding_idx {padding_idx} must be within "
                         f"[-{num_embeddings}, {num_embeddings})")
    return padding_idx % num_embeddings


class EmbeddingBag(Module):
    """Sums, means or maxima over bags of embeddings, without materialising the rows of
    each bag (see :func:`vtl.nn.functional.embedding_bag`).

    ``forward(input, offsets=None, per_sample_weights=None)``: a 2-D ``(B, N)`` input
    (one bag per row) or a 1-D input with the bag starts ``offsets``, of indices in
    ``[0, num_embeddings)`` (a negative one is an ``IndexError``); returns
    ``(B, embedding_dim)``. Default init ``N(0, 1)`` with the ``padding_idx`` row
    zeroed, as PyTorch; ``sparse=True`` is not supported.

    Args:
        num_embeddings: Size of the dictionary (number of rows).
        embedding_dim: Size of each embedding vector.
        max_norm: Renormalise each looked-up row whose norm exceeds this (in place, in the weight).
        norm_type: The p of the p-norm for ``max_norm``.
        scale_grad_by_freq: Divide each row's gradient by its index's frequency in the batch.
        mode: ``'sum'``, ``'mean'`` or ``'max'`` of each bag.
        sparse: Must be ``False``: vtl has no sparse gradients.
        include_last_offset: Whether ``offsets`` has one more entry, the end of the last bag (as
            the CSR format).
        padding_idx: A row that is zero at init and gets no gradient (negative values count from
            the end).
        device: Device of the parameters and buffers (default: the current default device).
        dtype: Floating dtype of the parameters and buffers (default: the default dtype).

    Raises:
        NotImplementedError: If ``sparse=True``.
        ValueError: If ``mode`` is unknown, ``scale_grad_by_freq`` is used with ``mode='max'``, or
            ``padding_idx`` is out of range.
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, max_norm: float | None = None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean",
                 sparse: bool = False, _weight: Any = None, include_last_offset: bool = False,
                 padding_idx: int | None = None, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        padding_idx = _check_padding(self, num_embeddings, padding_idx)
        if sparse:
            raise NotImplementedError("EmbeddingBag: sparse gradients (sparse=True) are not "
                                      "supported; use sparse=False")
        if mode not in ("sum", "mean", "max"):
            raise ValueError(f"EmbeddingBag: mode must be 'sum', 'mean' or 'max', got {mode!r}")
        if scale_grad_by_freq and mode == "max":
            raise ValueError("EmbeddingBag: scale_grad_by_freq is not supported with "
                             "mode='max'")
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.mode = mode
        self.sparse = sparse
        self.include_last_offset = include_last_offset
        self.padding_idx = padding_idx
        if _weight is None:
            self.weight = Parameter(empty((num_embeddings, embedding_dim), device, dtype))
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise ValueError(f"EmbeddingBag: _weight has shape {tuple(_weight.shape)}, "
                                 f"expected {(num_embeddings, embedding_dim)}")
            self.weight = Parameter(_weight)

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with vtl.no_grad():
                self.weight[self.padding_idx] = 0.0

    def _describe(self) -> str:
        return f"EmbeddingBag({self.num_embeddings}, {self.embedding_dim}, mode={self.mode!r})"

    def forward(self, input: Any, offsets: Any = None,  # noqa: A002
                per_sample_weights: Any = None) -> Any:
        check_tensor(self, input)
        if not vtl.isdtype(input.dtype, "integral"):
            raise TypeError(f"{self._describe()}: indices must be integers, got dtype "
                            f"{input.dtype}")
        if offsets is not None:
            check_tensor(self, offsets, "offsets")
        if per_sample_weights is not None:
            check_tensor(self, per_sample_weights, "per_sample_weights")
        try:
            return F.embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type,
                                   self.scale_grad_by_freq, self.mode, self.sparse,
                                   per_sample_weights, self.include_last_offset,
                                   self.padding_idx)
        except ValueError as exc:
            raise ValueError(f"{self._describe()}: {exc}") from None

    @classmethod
    def from_pretrained(cls, embeddings: Any, freeze: bool = True,
                        max_norm: float | None = None, norm_type: float = 2.0,
                        scale_grad_by_freq: bool = False, mode: str = "mean",
                        sparse: bool = False, include_last_offset: bool = False,
                        padding_idx: int | None = None) -> EmbeddingBag:
        """An EmbeddingBag holding ``embeddings`` (2-D); frozen unless ``freeze=False``."""
        if embeddings.ndim != 2:
            raise ValueError(f"EmbeddingBag.from_pretrained: embeddings must be 2-D, got shape "
                             f"{tuple(embeddings.shape)}")
        rows, cols = embeddings.shape
        bag = cls(rows, cols, max_norm, norm_type, scale_grad_by_freq, mode, sparse,
                  _weight=embeddings, include_last_offset=include_last_offset,
                  padding_idx=padding_idx)
        bag.weight.requires_grad_(not freeze)
        return bag

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq:
            s += ", scale_grad_by_freq=True"
        s += f", mode={self.mode!r}"
        if self.include_last_offset:
            s += ", include_last_offset=True"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s
