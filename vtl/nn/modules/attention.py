"""MultiheadAttention with PyTorch's parameters, masks and defaults."""

from __future__ import annotations

from typing import Any

from .. import init
from ..functional.attention import _mha_forward
from ._utils import check_float, check_tensor, empty
from .linear import Linear
from .module import Module, Parameter

__all__ = ["MultiheadAttention"]


class MultiheadAttention(Module):
    """Multi-head attention ``softmax(Q K^T / sqrt(d)) V`` over ``num_heads`` heads.

    Parameters as PyTorch: ``in_proj_weight (3E, E)`` (or ``q/k/v_proj_weight`` when
    ``kdim``/``vdim`` differ from ``embed_dim``), ``in_proj_bias (3E,)``, ``out_proj``
    (a Linear), optional ``bias_k``/``bias_v``. Init: xavier-uniform projections,
    zero biases, ``out_proj.weight`` with Linear's default init.

    ``forward(query, key, value, key_padding_mask=None, need_weights=True,
    attn_mask=None, average_attn_weights=True, is_causal=False)`` returns
    ``(output, weights)``; boolean masks are ``True`` where attention is not allowed.

    Args:
        embed_dim: Total dimension ``E`` of the model (split across the heads).
        num_heads: Number of parallel heads (``embed_dim`` must be divisible by it).
        dropout: Dropout probability on the attention weights.
        bias: Whether the input and output projections have biases.
        add_bias_kv: Add learned biases ``bias_k``/``bias_v`` to the keys and values (one more
            position).
        add_zero_attn: Add a batch of zeros to the keys and values (one more position).
        kdim: Number of features of the keys (default ``embed_dim``).
        vdim: Number of features of the values (default ``embed_dim``).
        batch_first: Inputs and outputs are ``(N, L, E)`` instead of ``(L, N, E)``.
        device: Device of the parameters and buffers (default: the current default device).
        dtype: Floating dtype of the parameters and buffers (default: the default dtype).

    Raises:
        ValueError: If ``embed_dim`` or ``num_heads`` is not positive, or ``embed_dim`` is not
            divisible by ``num_heads``.

    Example:
        >>> mha = nn.MultiheadAttention(embed_dim=8, num_heads=2, batch_first=True)
        >>> x = vtl.ones((2, 5, 8))
        >>> out, weights = mha(x, x, x)
        >>> out.shape, weights.shape
        ((2, 5, 8), (2, 5, 5))
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0,
                 bias: bool = True, add_bias_kv: bool = False, add_zero_attn: bool = False,
                 kdim: int | None = None, vdim: int | None = None, batch_first: bool = False,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"MultiheadAttention: embed_dim and num_heads must be > 0, got "
                             f"{embed_dim} and {num_heads}")
        if embed_dim % num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim ({embed_dim}) must be divisible "
                             f"by num_heads ({num_heads})")
        self.embed_dim = embed_dim
        self.kdim = embed_dim if kdim is None else kdim
        self.vdim = embed_dim if vdim is None else vdim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        self.add_zero_attn = add_zero_attn
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(empty((3 * embed_dim, embed_dim), device, dtype))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.q_proj_weight = Parameter(empty((embed_dim, embed_dim), device, dtype))
            self.k_proj_weight = Parameter(empty((embed_dim, self.kdim), device, dtype))
            self.v_proj_weight = Parameter(empty((embed_dim, self.vdim), device, dtype))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(empty((3 * embed_dim,), device, dtype))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, device=device, dtype=dtype)
        if add_bias_kv:
            self.bias_k = Parameter(empty((1, 1, embed_dim), device, dtype))
            self.bias_v = Parameter(empty((1, 1, embed_dim), device, dtype))
        else:
            self.bias_k = self.bias_v = None
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
            init.xavier_normal_(self.bias_v)

    def _describe(self) -> str:
        return f"MultiheadAttention(embed_dim={self.embed_dim}, num_heads={self.num_heads})"

    def forward(self, query: Any, key: Any, value: Any, key_padding_mask: Any = None,
                need_weights: bool = True, attn_mask: Any = None,
                average_attn_weights: bool = True, is_causal: bool = False) -> tuple[Any, Any]:
        check_float(self, query, "query")
        check_float(self, key, "key")
        check_float(self, value, "value")
        for name, mask in (("key_padding_mask", key_padding_mask), ("attn_mask", attn_mask)):
            if mask is not None:
                check_tensor(self, mask, name)
        batched = query.ndim == 3
        if query.ndim not in (2, 3) or query.shape[-1] != self.embed_dim:
            raise ValueError(f"{self._describe()}: expected query of shape (L, N, "
                             f"{self.embed_dim}) or (L, {self.embed_dim}), got "
                             f"{tuple(query.shape)}")
        for name, t, dim in (("key", key, self.kdim), ("value", value, self.vdim)):
            if t.ndim != query.ndim or t.shape[-1] != dim:
                raise ValueError(f"{self._describe()}: expected {name} of rank {query.ndim} "
                                 f"with last dimension {dim}, got {tuple(t.shape)}")
        try:
            out, weights = _mha_forward(
                query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight,
                self.in_proj_bias, self.bias_k, self.bias_v, self.add_zero_attn, self.dropout,
                self.out_proj.weight, self.out_proj.bias, training=self.training,
                key_padding_mask=key_padding_mask, need_weights=need_weights,
                attn_mask=attn_mask, use_separate_proj_weight=not self._qkv_same_embed_dim,
                q_proj_weight=self.q_proj_weight, k_proj_weight=self.k_proj_weight,
                v_proj_weight=self.v_proj_weight, average_attn_weights=average_attn_weights,
                is_causal=is_causal, batch_first=batched and self.batch_first)
        except ValueError as exc:
            raise ValueError(f"{self._describe()}: {exc}") from None
        return out, weights

    def extra_repr(self) -> str:
        return (f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, "
                f"dropout={self.dropout}, batch_first={self.batch_first}")
