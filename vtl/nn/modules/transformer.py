"""Transformer, its encoder and decoder stacks and their layers (PyTorch's structure,
names and defaults, so PyTorch state dicts load by name).

Masks follow ``nn.MultiheadAttention``: boolean masks are ``True`` where attention is not
allowed, float masks are added to the scores. An ``is_causal`` flag with its mask given
is a hint, as in PyTorch (the mask is used); with no mask it masks every later key.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import vtl

from .. import functional as F
from .. import init
from ._utils import check_float
from .activation import ReLU
from .attention import MultiheadAttention
from .container import ModuleList, _plain
from .dropout import Dropout
from .linear import Linear
from .module import Module
from .normalization import LayerNorm

__all__ = ["Transformer", "TransformerDecoder", "TransformerDecoderLayer", "TransformerEncoder",
           "TransformerEncoderLayer"]


def _activation(owner: str, activation: Any) -> Callable:
    """``'relu'``/``'gelu'`` as the functional, a callable (function or module) as is."""
    if isinstance(activation, str):
        if activation == "relu":
            return F.relu
        if activation == "gelu":
            return F.gelu
        raise ValueError(f"{owner}: activation should be relu/gelu, not {activation}")
    if not callable(activation):
        raise TypeError(f"{owner}: activation should be 'relu', 'gelu' or a callable, got "
                        f"{type(activation).__name__}")
    return activation


def _activated(layer: Any, x: Any) -> Any:
    """``layer.activation(layer.linear1(x))``, as one op (``F.linear_relu``) where the
    activation is the ReLU and neither module has hooks."""
    act, lin = layer.activation, layer.linear1
    if (act is F.relu or _plain(act, ReLU)) and _plain(lin, Linear):
        return lin._forward_relu(x)
    return act(lin(x))


def _causal_hint(is_causal: bool | None) -> bool:
    # None (PyTorch's "detect from the mask") and False both leave the mask as given
    return bool(is_causal)


class TransformerEncoderLayer(Module):
    """Self-attention and a feed-forward block, each with dropout, a residual
    connection and LayerNorm (after the block, or before it with ``norm_first``).

    Sub-modules as PyTorch: ``self_attn``, ``linear1``, ``dropout``, ``linear2``,
    ``norm1``, ``norm2``, ``dropout1``, ``dropout2``. ``activation``: ``'relu'``,
    ``'gelu'`` or a callable.

    Args:
        d_model: Number of features of the inputs.
        nhead: Number of attention heads.
        dim_feedforward: Width of the feed-forward block.
        dropout: Dropout probability.
        activation: ``'relu'``, ``'gelu'`` or a callable, for the feed-forward block.
        layer_norm_eps: The ``eps`` of the LayerNorms.
        batch_first: Inputs and outputs are ``(N, L, E)`` instead of ``(L, N, E)``.
        norm_first: Apply LayerNorm before each block (pre-norm) instead of after it.
        bias: Whether the Linear and LayerNorm layers have biases.
        device: Device of the parameters and buffers (default: the current default device).
        dtype: Floating dtype of the parameters and buffers (default: the default dtype).

    Raises:
        ValueError: If ``activation`` is a string other than ``'relu'`` or ``'gelu'``.
        TypeError: If ``activation`` is neither a string nor callable.
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: str | Callable = "relu",
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.batch_first = batch_first
        self.activation = _activation("TransformerEncoderLayer", activation)

    def _sa_block(self, x: Any, attn_mask: Any, key_padding_mask: Any, is_causal: bool) -> Any:
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x: Any) -> Any:
        return self.dropout2(self.linear2(self.dropout(_activated(self, x))))

    def forward(self, src: Any, src_mask: Any = None, src_key_padding_mask: Any = None,
                is_causal: bool = False) -> Any:
        check_float(self, src, "src")
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x


class TransformerEncoder(Module):
    """``num_layers`` deep copies of ``encoder_layer`` applied in turn (``layers``), then
    an optional final ``norm``.

    ``enable_nested_tensor`` and ``mask_check`` are accepted for PyTorch compatibility;
    vtl has no nested tensors, so every position is computed (PyTorch's fast path may
    instead return zeros at padded positions in inference).

    Args:
        encoder_layer: The layer copied ``num_layers`` times.
        num_layers: Number of layers.
        norm: An optional final normalisation layer.
        enable_nested_tensor: Accepted for PyTorch compatibility (no effect).
        mask_check: Accepted for PyTorch compatibility (no effect).

    Raises:
        TypeError: If ``encoder_layer`` is not a Module.
    """

    def __init__(self, encoder_layer: TransformerEncoderLayer, num_layers: int,
                 norm: Module | None = None, enable_nested_tensor: bool = True,
                 mask_check: bool = True) -> None:
        super().__init__()
        if not isinstance(encoder_layer, Module):
            raise TypeError(f"TransformerEncoder: expected encoder_layer to be a Module, got "
                            f"{type(encoder_layer).__name__}")
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check

    def forward(self, src: Any, mask: Any = None, src_key_padding_mask: Any = None,
                is_causal: bool | None = None) -> Any:
        check_float(self, src, "src")
        x = src
        causal = _causal_hint(is_causal)
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                      is_causal=causal)
        return x if self.norm is None else self.norm(x)


class TransformerDecoderLayer(Module):
    """Self-attention, attention over the encoder's output (``memory``) and a feed-forward
    block, each with dropout, a residual connection and LayerNorm (after the block, or
    before it with ``norm_first``).

    Sub-modules as PyTorch: ``self_attn``, ``multihead_attn``, ``linear1``, ``dropout``,
    ``linear2``, ``norm1``, ``norm2``, ``norm3``, ``dropout1``, ``dropout2``, ``dropout3``.
    ``activation``: ``'relu'``, ``'gelu'`` or a callable.

    Args:
        d_model: Number of features of the inputs.
        nhead: Number of attention heads.
        dim_feedforward: Width of the feed-forward block.
        dropout: Dropout probability.
        activation: ``'relu'``, ``'gelu'`` or a callable, for the feed-forward block.
        layer_norm_eps: The ``eps`` of the LayerNorms.
        batch_first: Inputs and outputs are ``(N, L, E)`` instead of ``(L, N, E)``.
        norm_first: Apply LayerNorm before each block (pre-norm) instead of after it.
        bias: Whether the Linear and LayerNorm layers have biases.
        device: Device of the parameters and buffers (default: the current default device).
        dtype: Floating dtype of the parameters and buffers (default: the default dtype).

    Raises:
        ValueError: If ``activation`` is a string other than ``'relu'`` or ``'gelu'``.
        TypeError: If ``activation`` is neither a string nor callable.
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: str | Callable = "relu",
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, **kw)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                 batch_first=batch_first, **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.batch_first = batch_first
        self.activation = _activation("TransformerDecoderLayer", activation)

    def _sa_block(self, x: Any, attn_mask: Any, key_padding_mask: Any, is_causal: bool) -> Any:
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _mha_block(self, x: Any, mem: Any, attn_mask: Any, key_padding_mask: Any,
                   is_causal: bool) -> Any:
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask,
                                key_padding_mask=key_padding_mask, need_weights=False,
                                is_causal=is_causal)[0]
        return self.dropout2(x)

    def _ff_block(self, x: Any) -> Any:
        return self.dropout3(self.linear2(self.dropout(_activated(self, x))))

    def forward(self, tgt: Any, memory: Any, tgt_mask: Any = None, memory_mask: Any = None,
                tgt_key_padding_mask: Any = None, memory_key_padding_mask: Any = None,
                tgt_is_causal: bool = False, memory_is_causal: bool = False) -> Any:
        check_float(self, tgt, "tgt")
        check_float(self, memory, "memory")
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask,
                                   tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask,
                                    memory_key_padding_mask, memory_is_causal)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask,
                                              tgt_is_causal))
            x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask,
                                               memory_is_causal))
            x = self.norm3(x + self._ff_block(x))
        return x


class TransformerDecoder(Module):
    """``num_layers`` deep copies of ``decoder_layer`` applied in turn (``layers``), each
    attending to ``memory``, then an optional final ``norm``.

    Args:
        decoder_layer: The layer copied ``num_layers`` times.
        num_layers: Number of layers.
        norm: An optional final normalisation layer.

    Raises:
        TypeError: If ``decoder_layer`` is not a Module.
    """

    def __init__(self, decoder_layer: TransformerDecoderLayer, num_layers: int,
                 norm: Module | None = None) -> None:
        super().__init__()
        if not isinstance(decoder_layer, Module):
            raise TypeError(f"TransformerDecoder: expected decoder_layer to be a Module, got "
                            f"{type(decoder_layer).__name__}")
        self.layers = ModuleList([copy.deepcopy(decoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt: Any, memory: Any, tgt_mask: Any = None, memory_mask: Any = None,
                tgt_key_padding_mask: Any = None, memory_key_padding_mask: Any = None,
                tgt_is_causal: bool | None = None, memory_is_causal: bool = False) -> Any:
        check_float(self, tgt, "tgt")
        x = tgt
        causal = _causal_hint(tgt_is_causal)
        for layer in self.layers:
            x = layer(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                      tgt_key_padding_mask=tgt_key_padding_mask,
                      memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=causal,
                      memory_is_causal=memory_is_causal)
        return x if self.norm is None else self.norm(x)


class Transformer(Module):
    """The encoder-decoder transformer of "Attention Is All You Need" (PyTorch's
    ``nn.Transformer``): ``encoder`` (a :class:`TransformerEncoder` of
    ``num_encoder_layers`` layers and a final LayerNorm) and ``decoder`` (likewise), or
    ``custom_encoder``/``custom_decoder``. Every parameter of two or more dimensions starts
    xavier-uniform.

    ``forward(src, tgt, ...)`` encodes ``src`` (``(S, N, E)``, ``(N, S, E)`` with
    ``batch_first``, or unbatched ``(S, E)``) and decodes ``tgt`` against it; masks as
    in :class:`TransformerEncoder` and :class:`TransformerDecoder`.

    Args:
        d_model: Number of features of the inputs.
        nhead: Number of attention heads.
        num_encoder_layers: Number of encoder layers.
        num_decoder_layers: Number of decoder layers.
        dim_feedforward: Width of the feed-forward block.
        dropout: Dropout probability.
        activation: ``'relu'``, ``'gelu'`` or a callable, for the feed-forward block.
        custom_encoder: A module used as the encoder instead.
        custom_decoder: A module used as the decoder instead.
        layer_norm_eps: The ``eps`` of the LayerNorms.
        batch_first: Inputs and outputs are ``(N, L, E)`` instead of ``(L, N, E)``.
        norm_first: Apply LayerNorm before each block (pre-norm) instead of after it.
        bias: Whether the Linear and LayerNorm layers have biases.
        device: Device of the parameters and buffers (default: the current default device).
        dtype: Floating dtype of the parameters and buffers (default: the default dtype).

    Raises:
        ValueError: If ``activation`` is a string other than ``'relu'`` or ``'gelu'``.
        TypeError: If ``activation`` is neither a string nor callable.
    """

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: str | Callable = "relu",
                 custom_encoder: Module | None = None, custom_decoder: Module | None = None,
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout,
                                            activation, layer_norm_eps, batch_first,
                                            norm_first, bias, **kw)
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
            self.encoder = TransformerEncoder(layer, num_encoder_layers, norm)
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout,
                                            activation, layer_norm_eps, batch_first,
                                            norm_first, bias, **kw)
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
            self.decoder = TransformerDecoder(layer, num_decoder_layers, norm)
        self._reset_parameters()
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def _reset_parameters(self) -> None:
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)

    def forward(self, src: Any, tgt: Any, src_mask: Any = None, tgt_mask: Any = None,
                memory_mask: Any = None, src_key_padding_mask: Any = None,
                tgt_key_padding_mask: Any = None, memory_key_padding_mask: Any = None,
                src_is_causal: bool | None = None, tgt_is_causal: bool | None = None,
                memory_is_causal: bool = False) -> Any:
        check_float(self, src, "src")
        check_float(self, tgt, "tgt")
        if src.ndim != tgt.ndim or src.ndim not in (2, 3):
            raise ValueError(f"Transformer: expected src and tgt both 3-D (batched) or both "
                             f"2-D (unbatched), got shapes {tuple(src.shape)} and "
                             f"{tuple(tgt.shape)}")
        if src.ndim == 3:
            ax = 0 if self.batch_first else 1
            if src.shape[ax] != tgt.shape[ax]:
                raise ValueError(f"Transformer: the batch number of src and tgt must be equal, "
                                 f"got shapes {tuple(src.shape)} and {tuple(tgt.shape)}"
                                 + (" (batch_first=True: axis 0 is the batch)"
                                    if self.batch_first else ""))
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise ValueError(f"Transformer: the feature number of src and tgt must be equal "
                             f"to d_model={self.d_model}, got shapes {tuple(src.shape)} and "
                             f"{tuple(tgt.shape)}")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device: Any = None, dtype: Any = None) -> Any:
        """A ``(sz, sz)`` float mask for causal attention: ``-inf`` above the diagonal (a
        position may not attend to later ones), ``0`` on and below it. ``dtype`` defaults
        to float32, ``device`` to the default device."""
        if not isinstance(sz, int) or isinstance(sz, bool) or sz < 0:
            raise ValueError(f"generate_square_subsequent_mask(): expected a size >= 0, got "
                             f"{sz!r}")
        dtype = vtl.float32 if dtype is None else dtype
        i = vtl.reshape(vtl.arange(sz, device=device), (sz, 1))
        j = vtl.reshape(vtl.arange(sz, device=device), (1, sz))
        zeros = vtl.zeros((sz, sz), dtype=dtype, device=device)
        return vtl.where(j > i, vtl.full((), -math.inf, dtype=dtype, device=device), zeros)
