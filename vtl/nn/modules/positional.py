"""Sinusoidal positional encoding (the PyTorch transformer tutorial's module)."""

from __future__ import annotations

import math
from typing import Any

import vtl

from ._utils import check_float
from .dropout import Dropout
from .module import Module

__all__ = ["PositionalEncoding"]


class PositionalEncoding(Module):
    """Add ``pe[pos, 2i] = sin(pos / 10000^(2i/d))``, ``pe[pos, 2i+1] = cos(...)`` to a
    ``(L, N, d_model)`` input (``(N, L, d_model)`` with ``batch_first``), then dropout.

    ``pe`` is a persistent buffer of shape ``(max_len, 1, d_model)`` as in the tutorial.

    Args:
        d_model: Number of features of the inputs.
        dropout: Dropout probability applied after the addition.
        max_len: Longest sequence supported.
        batch_first: Inputs are ``(N, L, d_model)`` instead of ``(L, N, d_model)``.
        device: Device of the parameters and buffers (default: the current default device).
        dtype: Floating dtype of the parameters and buffers (default: the default dtype).

    Raises:
        ValueError: If ``d_model`` or ``max_len`` is not positive.
    """

    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 5000, *,
                 batch_first: bool = False, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        if d_model <= 0 or max_len <= 0:
            raise ValueError(f"PositionalEncoding: d_model and max_len must be > 0, got "
                             f"{d_model} and {max_len}")
        self.d_model = d_model
        self.max_len = max_len
        self.batch_first = batch_first
        self.dropout = Dropout(dropout)
        dt = vtl.float32 if dtype is None else dtype
        position = vtl.reshape(vtl.arange(max_len, dtype=dt, device=device), (-1, 1))
        div = vtl.exp(vtl.arange(0, d_model, 2, dtype=dt, device=device)
                      * (-math.log(10000.0) / d_model))
        angles = position * div  # (max_len, ceil(d/2))
        pe = vtl.stack([vtl.sin(angles), vtl.cos(angles)], axis=2)
        pe = vtl.reshape(pe, (max_len, -1))[:, :d_model]
        self.register_buffer("pe", vtl.astype(vtl.reshape(pe, (max_len, 1, d_model)), dt))

    def forward(self, x: Any) -> Any:
        check_float(self, x)
        if x.ndim != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"PositionalEncoding(d_model={self.d_model}): expected a 3-D input "
                             f"with last dimension {self.d_model}, got input of shape "
                             f"{tuple(x.shape)}")
        length = x.shape[1] if self.batch_first else x.shape[0]
        if length > self.max_len:
            raise ValueError(f"PositionalEncoding(d_model={self.d_model}): sequence length "
                             f"{length} exceeds max_len={self.max_len}")
        pe = self.pe[:length]
        if self.batch_first:
            pe = vtl.permute_dims(pe, (1, 0, 2))
        return self.dropout(x + pe)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, max_len={self.max_len}"
