"""Attention: scaled_dot_product_attention and multi_head_attention_forward.

Mask conventions follow PyTorch, which differ between the two:

* ``scaled_dot_product_attention``: a boolean ``attn_mask`` is ``True`` where a
  query may attend; a float mask is added to the scores. A query row with every
  key masked out gives zeros (PyTorch's safe softmax), with zero gradients.
* ``multi_head_attention_forward`` (``nn.MultiheadAttention``): boolean masks
  are ``True`` where attention is *not* allowed (``attn_mask`` and
  ``key_padding_mask``). With ``need_weights=False`` (as the Transformer layers call it)
  attention runs through ``scaled_dot_product_attention``, so through the backend's fused
  kernel where it has one, and a fully masked row gives zeros, as in PyTorch; with
  ``need_weights=True`` the weights are formed and a fully masked row gives nan, as
  PyTorch's path.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

from ... import _autocast
from ..._ops._core import _grad, needs_grad, new, record, record_multi
from ..._tensor import Tensor
from ._utils import detach, low_float, namespace
from .linear import dropout, linear
from .softmax import softmax

__all__ = ["multi_head_attention_forward", "scaled_dot_product_attention"]


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(x.shape)


def _float_mask(xp: Any, mask: Any, dtype: Any, allowed_when_true: bool) -> Any:
    """A boolean mask as an additive float mask (0 / -inf); float masks pass through."""
    if mask.dtype == xp.bool:
        keep = mask if allowed_when_true else xp.logical_not(mask)
        zeros = xp.zeros(_shape(mask), dtype=dtype, device=mask.device)
        return xp.where(keep, zeros, -math.inf)
    if not xp.isdtype(mask.dtype, "real floating"):
        raise TypeError(f"attention masks must be bool or floating-point, got {mask.dtype}")
    return mask


def _causal(xp: Any, n_q: int, n_k: int, dtype: Any, device: Any) -> Any:
    """Additive mask allowing query ``i`` to see keys ``j <= i`` (top-left aligned)."""
    i = xp.reshape(xp.arange(n_q, device=device), (-1, 1))
    j = xp.arange(n_k, device=device)
    zeros = xp.zeros((n_q, n_k), dtype=dtype, device=device)
    return xp.where(j <= i, zeros, -math.inf)


def scaled_dot_product_attention(query: Any, key: Any, value: Any, attn_mask: Any = None,
                                 dropout_p: float = 0.0, is_causal: bool = False,
                                 scale: float | None = None, enable_gqa: bool = False, *,
                                 generator: Any = None) -> Any:
    """``softmax(q k^T * scale + mask) v`` over ``(..., L, E)`` queries, ``(..., S, E)``
    keys and ``(..., S, Ev)`` values; ``scale`` defaults to ``1/sqrt(E)``.

    ``attn_mask`` broadcasts to ``(..., L, S)``: boolean (``True`` = may attend) or
    float (added). ``is_causal`` masks keys after each query (no ``attn_mask`` then).
    ``enable_gqa`` lets ``H_q`` query heads share ``H_q / H_kv`` key/value heads
    (axis -3). Dropout (``dropout_p``) is applied to the attention weights.

    Args:
        query: ``(..., L, E)``.
        key: ``(..., S, E)``.
        value: ``(..., S, Ev)``.
        attn_mask: Boolean (``True`` may attend) or additive float mask broadcasting to ``(..., L,
            S)``.
        dropout_p: Dropout probability on the attention weights.
        is_causal: Mask the keys after each query (not with ``attn_mask``).
        scale: The scale of the scores (default ``1/sqrt(E)``).
        enable_gqa: Allow fewer key/value heads than query heads (grouped-query attention).
        generator: A :class:`vtl.random.Generator` to draw from (default: ``vtl.random``'s default
            generator).

    Returns:
        The attention output, ``(..., L, Ev)``.

    Raises:
        ValueError: If the shapes do not match, both ``attn_mask`` and ``is_causal`` are given, or
            the heads do not group.
    """
    xp = namespace(query, key, value, attn_mask)
    if query.ndim < 2 or key.ndim != query.ndim or value.ndim != query.ndim:
        raise ValueError(f"scaled_dot_product_attention(): query, key and value must have "
                         f"the same rank >= 2, got shapes {_shape(query)}, {_shape(key)}, "
                         f"{_shape(value)}")
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise ValueError(f"scaled_dot_product_attention(): query {_shape(query)} and key "
                         f"{_shape(key)} need the same embedding size, key and value "
                         f"{_shape(value)} the same sequence length")
    if is_causal and attn_mask is not None:
        raise ValueError("scaled_dot_product_attention(): pass either attn_mask or "
                         "is_causal=True, not both")
    if enable_gqa and query.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        hq, hk = query.shape[-3], key.shape[-3]
        if hq % hk:
            raise ValueError(f"scaled_dot_product_attention(): {hq} query heads are not a "
                             f"multiple of {hk} key/value heads")
        key = xp.repeat(key, hq // hk, axis=key.ndim - 3)
        value = xp.repeat(value, hq // hk, axis=value.ndim - 3)
    sc = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    if dropout_p < 1.0:
        fused = _fused_attention(query, key, value, attn_mask, is_causal, sc, dropout_p,
                                 generator)
        if fused is not None:
            return fused
    return _sdpa(xp, query, key, value, attn_mask, dropout_p, is_causal, sc, generator)


def _sdpa(xp: Any, query: Any, key: Any, value: Any, attn_mask: Any, dropout_p: float,
          is_causal: bool, sc: float, generator: Any, drop_factor: Any = None) -> Any:
    """The portable attention (the oracle of the backends' fused kernels); ``drop_factor``
    (``0`` or ``1 / (1 - p)`` per weight; float32 for float16/bfloat16 operands) replaces a
    dropout draw."""
    n_q, n_k = query.shape[-2], key.shape[-2]
    scores = xp.matmul(query, xp.matrix_transpose(key)) * sc
    mask = None
    if is_causal:
        mask = _causal(xp, n_q, n_k, scores.dtype, query.device)
    elif attn_mask is not None:
        mask = xp.astype(_float_mask(xp, attn_mask, scores.dtype, True), scores.dtype)
    if mask is not None and n_k:  # without keys there is nothing to mask: zeros, as PyTorch
        scores = scores + mask
        dead = detach(xp.max(scores, axis=-1, keepdims=True)) == -math.inf
        scores = xp.where(dead, 0.0, scores)
        attn = xp.where(dead, 0.0, softmax(scores, -1))
    else:
        attn = softmax(scores, -1)
    if drop_factor is not None:
        low = low_float(attn)
        if low is not None:  # as dropout: float32 arithmetic, rounded once
            attn = xp.astype(xp.astype(attn, xp.float32) * drop_factor, low)
        else:
            attn = attn * drop_factor
    elif dropout_p > 0.0:
        attn = dropout(attn, dropout_p, True, generator=generator)
    return xp.matmul(attn, value)


def _fused_attention(q: Any, k: Any, v: Any, attn_mask: Any, is_causal: bool,
                     sc: float, dropout_p: float = 0.0, generator: Any = None) -> Any:
    """Attention as ONE graph node through the backend's ``attention`` kernel (no ``(L, S)``
    matrix; dropout with the portable path's bits), or ``None`` where the kernel does not
    apply (no kernel, mixed devices or dtypes, broadcast batch axes, rank above 4, a mask
    that needs a gradient)."""
    if not all(isinstance(t, Tensor) for t in (q, k, v)) or \
            not (attn_mask is None or isinstance(attn_mask, Tensor)):
        return None
    dev = q._device
    kern = dev.backend.kernel("attention")
    dt = q._data.dtype
    if kern is None or not kern.supports(dt) or q.ndim > 4:
        return None
    if any(t._device is not dev or t._data.dtype != dt for t in (k, v)):
        return None
    batch_shape = tuple(q.shape[:-2])
    if tuple(k.shape[:-2]) != batch_shape or tuple(v.shape[:-2]) != batch_shape:
        return None
    b1, b2 = (*batch_shape, 1, 1)[:2] if q.ndim < 4 else batch_shape
    n_q, n_k = q.shape[-2], k.shape[-2]
    xp = dev.xp
    mask = None
    if attn_mask is not None:
        if attn_mask.ndim > q.ndim:
            return None
        mask = _kernel_mask(attn_mask, dev, dt, q.ndim, (b1, b2, n_q, n_k))
        if mask is None:
            return None
    b = b1 * b2
    qd = xp.reshape(q._data, (b, n_q, q.shape[-1]))
    kd = xp.reshape(k._data, (b, n_k, k.shape[-1]))
    vd = xp.reshape(v._data, (b, n_k, v.shape[-1]))
    drop = None
    if dropout_p > 0.0:
        drop = (dropout_p, _DropWords(generator, b * n_q * n_k, dev))
    res = kern.forward(qd, kd, vd, mask, is_causal, sc, (b1, b2), drop)
    if res is None:
        return None
    out, lse = res
    shape = (*batch_shape, n_q, v.shape[-1])
    data = xp.reshape(out, shape)
    if not needs_grad(q, k, v):
        return new(data, dev)
    vjp = partial(_fused_attention_vjp, kern, (qd, kd, vd, out, lse, mask), (b1, b2),
                  (q, k, v), attn_mask, is_causal, sc, drop)
    return record(data, dev, "ScaledDotProductAttentionBackward", (q, k, v), vjp, (q, k, v))


def _kernel_mask(attn_mask: Tensor, dev: Any, dt: Any, ndim: int,
                 full: tuple[int, int, int, int]) -> Any:
    """``attn_mask`` (``True`` = may attend, or additive) as the additive 4-D raw array a
    fused kernel takes for scores of shape ``full`` (queries of rank ``ndim``), or ``None``
    where it cannot (another device, a gradient, a dtype or shape that does not fit)."""
    if attn_mask._device is not dev or attn_mask.requires_grad:
        return None
    xp = dev.xp
    md = attn_mask._data
    if md.dtype == xp.bool:
        md = _float_mask(xp, md, dt, True)
    elif xp.isdtype(md.dtype, "real floating"):
        md = xp.astype(md, dt)
    else:
        return None
    shape = (1,) * (ndim - md.ndim) + tuple(md.shape)
    if ndim == 3:
        shape = (shape[0], 1, *shape[1:])
    shape = (1,) * (4 - len(shape)) + shape
    if any(m not in (1, n) for m, n in zip(shape, full, strict=True)):
        return None
    return xp.reshape(md, shape)


class _DropWords:
    """The ``words`` of a fused kernel's dropout: drawn from the generator at the first
    call (when the kernel takes the call), the same words afterwards."""

    def __init__(self, generator: Any, n: int, device: Any) -> None:
        self.generator, self.n, self.device, self.words = generator, n, device, None

    def __call__(self) -> Any:
        if self.words is None:
            from ... import random

            gen = random.default_generator() if self.generator is None else self.generator
            self.words = gen._kernel_words(self.n, self.device)
        return self.words

    def factor(self, xp: Any, shape: tuple[int, ...], p: float, dtype: Any) -> Any:
        """The dropout factor of every weight (``0`` or ``1 / (1 - p)``) as a raw array."""
        from ... import random

        words = self.words
        if not isinstance(words, tuple):
            raise NotImplementedError(
                "scaled_dot_product_attention(): gradients of gradients through fused "
                "attention with dropout are not available inside vtl.compile")
        counter = sum(w << (32 * k) for k, w in enumerate(words[:4]))
        w = random.philox_words(xp, self.n, (words[4], words[5]), counter,
                                self.device.backend.native_device(self.device.index))
        keep = random._unit_float(xp, w, xp.float32) >= p
        return xp.reshape(xp.astype(keep, dtype) * (1.0 / (1.0 - p)), shape)


def _fused_attention_vjp(kern: Any, saved: tuple, batch: tuple[int, int], inputs: tuple,
                         attn_mask: Any, is_causal: bool, sc: float, drop: Any, g: Tensor,
                         _: Any) -> tuple:
    q, k, v = inputs
    needs = [t._requires_grad for t in inputs]
    if _grad.enabled:  # create_graph: differentiate the portable path (recomputed)
        import vtl

        factor = None
        if drop is not None:
            xp = q._device.xp
            shape = (*q.shape[:-1], k.shape[-2])
            fdt = q._data.dtype if low_float(q) is None else xp.float32
            factor = new(drop[1].factor(xp, shape, drop[0], fdt), q._device)
        ins = [t for t, n in zip(inputs, needs, strict=True) if n]
        with vtl.enable_grad():
            out = _sdpa(vtl, q, k, v, attn_mask, 0.0, is_causal, sc, None, factor)
            gs = iter(vtl.autograd.grad(out, ins, g, create_graph=True, allow_unused=True))
        return tuple(next(gs) if n else None for n in needs)
    qd, kd, vd, out, lse, mask = saved
    dev = g._device
    xp = dev.xp
    gd = xp.reshape(g._data, out.shape)
    dq, dk, dv = kern.backward(qd, kd, vd, out, lse, gd, mask, is_causal, sc, batch, drop)
    return tuple(new(xp.reshape(d, t.shape), dev) if n else None
                 for d, t, n in zip((dq, dk, dv), inputs, needs, strict=True))


def _packed_heads(qkv: Tensor, heads: int, batch_first: bool) -> tuple[Any, Any, Any]:
    """Queries, keys and values ``(N, heads, L, E / heads)``, each contiguous, from the packed
    projection ``qkv`` (``(L, N, 3E)``, or ``(N, L, 3E)`` when ``batch_first``): one copy
    forward and one backward (one graph node with three outputs)."""
    import vtl

    a, b, e3 = qkv.shape
    hd = e3 // 3 // heads
    perm = (2, 0, 3, 1, 4) if batch_first else (2, 1, 3, 0, 4)  # -> (3, N, heads, L, hd)
    n, length = (a, b) if batch_first else (b, a)
    dev = qkv._device
    xp = dev.xp
    x = xp.permute_dims(xp.reshape(qkv._data, (a, b, 3, heads, hd)), perm)
    x = xp.reshape(x, (3, n, heads, length, hd))  # the copy: C order
    outs = [x[i, ...] for i in range(3)]
    if not needs_grad(qkv):
        return tuple(new(o, dev) for o in outs)
    # each (N, heads, L, hd) gradient as the (a, b, heads, hd) block it came from
    back = (0, 2, 1, 3) if batch_first else (2, 0, 1, 3)
    dtype = qkv.dtype  # (not qkv: its values are not needed)

    def vjp(gs: list, _: Any) -> tuple:
        parts = [vtl.zeros((n, heads, length, hd), dtype=dtype, device=dev)
                 if g is None else g for g in gs]
        # stacked on the axis of the packing: (a, b, 3, heads, hd) in C order, so the
        # reshape back to (a, b, 3E) is a view (the stack is the one copy)
        g = vtl.stack([vtl.permute_dims(p, back) for p in parts], axis=2)
        return (vtl.reshape(g, (a, b, e3)),)

    return record_multi(outs, dev, "SplitHeadsBackward", (qkv,), vjp)


def _packed_attention(qkv: Tensor, heads: int, batch_first: bool, attn_mask: Any,
                      dropout_p: float, is_causal: bool, generator: Any = None) -> Tensor:
    """Multi-head self-attention of the packed projection ``qkv`` (``(L, N, 3E)``, or
    ``(N, L, 3E)`` when ``batch_first``) with the heads merged back: ``(L, N, E)`` (or
    ``(N, L, E)``). The backend's kernel reads the heads where the projection put them and
    writes the merged output and the projection's gradient directly (one graph node, no
    copies) where it takes packed operands; otherwise the heads are split with one copy
    each way and go through :func:`scaled_dot_product_attention`. ``attn_mask`` follows
    :func:`scaled_dot_product_attention` (``True`` or ``0`` = may attend), broadcasting to
    ``(N, heads, L, L)``."""
    sc = 1.0 / math.sqrt(qkv.shape[-1] // 3 // heads)
    if dropout_p < 1.0:
        fused = _fused_packed(qkv, heads, batch_first, attn_mask, dropout_p, is_causal, sc,
                              generator)
        if fused is not None:
            return fused
    qh, kh, vh = _packed_heads(qkv, heads, batch_first)
    out = scaled_dot_product_attention(qh, kh, vh, attn_mask=attn_mask, dropout_p=dropout_p,
                                       is_causal=is_causal, generator=generator)
    return _merge_heads(out, batch_first)


def _merge_heads(out: Any, batch_first: bool) -> Any:
    """``(N, heads, L, hd)`` -> ``(N, L, E)`` (``batch_first``) or ``(L, N, E)``."""
    import vtl

    n, heads, length, hd = out.shape
    perm = (0, 2, 1, 3) if batch_first else (2, 0, 1, 3)
    shape = (n, length, heads * hd) if batch_first else (length, n, heads * hd)
    return vtl.reshape(vtl.permute_dims(out, perm), shape)


def _fused_packed(qkv: Tensor, heads: int, batch_first: bool, attn_mask: Any,
                  dropout_p: float, is_causal: bool, sc: float, generator: Any) -> Any:
    """:func:`_packed_attention` as one graph node through the kernel's ``forward_packed``,
    or ``None`` where it does not apply."""
    if not isinstance(qkv, Tensor) or not (attn_mask is None or isinstance(attn_mask, Tensor)):
        return None
    dev = qkv._device
    kern = dev.backend.kernel("attention")
    dt = qkv._data.dtype
    if kern is None or not hasattr(kern, "forward_packed") or not kern.supports(dt):
        return None
    a, b, _ = qkv.shape
    n, length = (a, b) if batch_first else (b, a)
    mask = None
    if attn_mask is not None:
        if attn_mask.ndim > 4:
            return None
        mask = _kernel_mask(attn_mask, dev, dt, 4, (n, heads, length, length))
        if mask is None:
            return None
    drop = None
    if dropout_p > 0.0:
        drop = (dropout_p, _DropWords(generator, n * heads * length * length, dev))
    res = kern.forward_packed(qkv._data, heads, batch_first, mask, is_causal, sc, drop)
    if res is None:
        return None
    out, lse = res
    if not needs_grad(qkv):
        return new(out, dev)
    vjp = partial(_fused_packed_vjp, kern, (qkv._data, out, lse, mask), heads, batch_first,
                  qkv, attn_mask, is_causal, sc, drop)
    return record(out, dev, "ScaledDotProductAttentionBackward", (qkv,), vjp, (qkv,))


def _fused_packed_vjp(kern: Any, saved: tuple, heads: int, batch_first: bool, qkv: Tensor,
                      attn_mask: Any, is_causal: bool, sc: float, drop: Any, g: Tensor,
                      _: Any) -> tuple:
    if _grad.enabled:  # create_graph: differentiate the portable path (recomputed)
        import vtl

        qh, kh, vh = _packed_heads(qkv, heads, batch_first)
        factor = None
        if drop is not None:
            xp = qkv._device.xp
            fdt = qkv._data.dtype if low_float(qkv) is None else xp.float32
            factor = new(drop[1].factor(xp, (*qh.shape[:-1], kh.shape[-2]), drop[0], fdt),
                         qkv._device)
        with vtl.enable_grad():
            out = _sdpa(vtl, qh, kh, vh, attn_mask, 0.0, is_causal, sc, None, factor)
            return vtl.autograd.grad(_merge_heads(out, batch_first), [qkv], g,
                                     create_graph=True)
    qd, out, lse, mask = saved
    grad = kern.backward_packed(qd, out, lse, g._data, heads, batch_first, mask, is_causal,
                                sc, drop)
    return (new(grad, g._device),)


def _split_heads(xp: Any, x: Any, n: int, heads: int) -> Any:
    """``(L, N, E)`` -> ``(N, heads, L, E / heads)``."""
    length, _, e = x.shape
    x = xp.reshape(x, (length, n, heads, e // heads))
    return xp.permute_dims(x, (1, 2, 0, 3))


def multi_head_attention_forward(
        query: Any, key: Any, value: Any, embed_dim_to_check: int, num_heads: int,
        in_proj_weight: Any, in_proj_bias: Any, bias_k: Any, bias_v: Any,
        add_zero_attn: bool, dropout_p: float, out_proj_weight: Any, out_proj_bias: Any,
        training: bool = True, key_padding_mask: Any = None, need_weights: bool = True,
        attn_mask: Any = None, use_separate_proj_weight: bool = False,
        q_proj_weight: Any = None, k_proj_weight: Any = None, v_proj_weight: Any = None,
        static_k: Any = None, static_v: Any = None, average_attn_weights: bool = True,
        is_causal: bool = False, *, generator: Any = None) -> tuple[Any, Any]:
    """PyTorch's multi-head attention on sequence-first inputs: ``query (L, N, E)``,
    ``key (S, N, Ek)``, ``value (S, N, Ev)`` (or unbatched ``(L, E)``...).

    Returns ``(output (L, N, E), weights)``; ``weights`` is ``None`` unless
    ``need_weights``, else ``(N, L, S)`` averaged over heads or ``(N, heads, L, S)``.
    ``attn_mask`` is ``(L, S)`` or ``(N * heads, L, S)``; ``key_padding_mask`` is
    ``(N, S)``; boolean masks are ``True`` where attention is not allowed.
    ``is_causal`` without ``attn_mask`` masks keys after each query.

    Args:
        query: ``(L, N, E)`` (or ``(L, E)``).
        key: ``(S, N, Ek)``.
        value: ``(S, N, Ev)``.
        embed_dim_to_check: The expected ``E``.
        num_heads: Number of heads.
        in_proj_weight: Packed q/k/v projection ``(3E, E)``.
        in_proj_bias: Packed q/k/v bias ``(3E,)``, or ``None``.
        bias_k: Optional bias appended to the keys.
        bias_v: Optional bias appended to the values.
        add_zero_attn: Append a position of zeros to the keys and values.
        dropout_p: Dropout probability on the attention weights.
        out_proj_weight: Output projection ``(E, E)``.
        out_proj_bias: Output projection bias ``(E,)``.
        training: Apply dropout.
        key_padding_mask: ``(N, S)``: ``True`` (or a float added) marks keys to ignore.
        need_weights: Also return the attention weights.
        attn_mask: ``(L, S)`` or ``(N * num_heads, L, S)`` mask.
        use_separate_proj_weight: Use ``q/k/v_proj_weight`` instead of ``in_proj_weight``.
        q_proj_weight: Separate query projection.
        k_proj_weight: Separate key projection.
        v_proj_weight: Separate value projection.
        static_k: Not supported (must be ``None``).
        static_v: Not supported (must be ``None``).
        average_attn_weights: Average the returned weights over the heads.
        is_causal: A hint that ``attn_mask`` is causal.
        generator: A :class:`vtl.random.Generator` to draw from (default: ``vtl.random``'s default
            generator).

    Returns:
        ``(output, weights)`` as described above.

    Raises:
        ValueError: If the shapes or masks do not match.
        NotImplementedError: If ``static_k`` or ``static_v`` is given.
    """
    return _mha_forward(
        query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
        bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias, training,
        key_padding_mask, need_weights, attn_mask, use_separate_proj_weight, q_proj_weight,
        k_proj_weight, v_proj_weight, static_k, static_v, average_attn_weights, is_causal,
        generator=generator)


def _mha_forward(
        query: Any, key: Any, value: Any, embed_dim_to_check: int, num_heads: int,
        in_proj_weight: Any, in_proj_bias: Any, bias_k: Any, bias_v: Any,
        add_zero_attn: bool, dropout_p: float, out_proj_weight: Any, out_proj_bias: Any,
        training: bool = True, key_padding_mask: Any = None, need_weights: bool = True,
        attn_mask: Any = None, use_separate_proj_weight: bool = False,
        q_proj_weight: Any = None, k_proj_weight: Any = None, v_proj_weight: Any = None,
        static_k: Any = None, static_v: Any = None, average_attn_weights: bool = True,
        is_causal: bool = False, *, generator: Any = None,
        batch_first: bool = False) -> tuple[Any, Any]:
    """:func:`multi_head_attention_forward`, also on batch-first ``(N, L, E)`` inputs
    (``batch_first``; the output then is batch-first too). Self-attention without weights
    (``query is key is value``) projects q, k and v with one product and splits them into
    heads with one copy each way, in either layout."""
    packed = (query is key and key is value and isinstance(query, Tensor)
              and not use_separate_proj_weight and bias_k is None and bias_v is None
              and not add_zero_attn and not need_weights and static_k is None
              and static_v is None and query.ndim in (2, 3))
    transposed = batch_first and query.ndim == 3 and not packed
    if transposed:  # the general path works on sequence-first inputs
        xp = namespace(query, key, value)
        query, key, value = (xp.permute_dims(t, (1, 0, 2)) for t in (query, key, value))
    batch_first = batch_first and query.ndim == 3 and not transposed
    xp = namespace(query, key, value, in_proj_weight, in_proj_bias)
    fname = "multi_head_attention_forward"
    if static_k is not None or static_v is not None:
        raise NotImplementedError(f"{fname}(): static_k/static_v are not supported")
    batched = query.ndim == 3
    if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
        raise ValueError(f"{fname}(): query, key and value must all be 3-D (L, N, E) or 2-D "
                         f"(L, E), got shapes {_shape(query)}, {_shape(key)}, {_shape(value)}")
    if not batched:
        query, key, value = (xp.expand_dims(t, axis=1) for t in (query, key, value))
        if packed:
            key = value = query
        if key_padding_mask is not None:
            key_padding_mask = xp.expand_dims(key_padding_mask, axis=0)
    if batch_first:
        n, n_q, e = query.shape
    else:
        n_q, n, e = query.shape
    n_k = n_q if packed else key.shape[0]
    if e != embed_dim_to_check:
        raise ValueError(f"{fname}(): query of shape {_shape(query)} does not have embed_dim "
                         f"{embed_dim_to_check}")
    if e % num_heads:
        raise ValueError(f"{fname}(): embed_dim {e} is not divisible by num_heads {num_heads}")
    if not packed and (key.shape[:2] != value.shape[:2] or key.shape[1] != n):
        raise ValueError(f"{fname}(): key {_shape(key)} and value {_shape(value)} must share "
                         f"(S, N) and match the batch of query {_shape(query)}")
    hd = e // num_heads
    if packed:
        qkv = linear(query, in_proj_weight, in_proj_bias)
    elif use_separate_proj_weight:
        bq = bk = bv = None
        if in_proj_bias is not None:
            bq, bk, bv = in_proj_bias[:e], in_proj_bias[e:2 * e], in_proj_bias[2 * e:]
        q = linear(query, q_proj_weight, bq)
        k = linear(key, k_proj_weight, bk)
        v = linear(value, v_proj_weight, bv)
    else:
        ws = (in_proj_weight[:e, ...], in_proj_weight[e:2 * e, ...], in_proj_weight[2 * e:, ...])
        bs = (None, None, None) if in_proj_bias is None else \
            (in_proj_bias[:e], in_proj_bias[e:2 * e], in_proj_bias[2 * e:])
        q, k, v = (linear(t, w, b) for t, w, b in zip((query, key, value), ws, bs, strict=True))
    ref = qkv if packed else q
    mask = None
    causal_mask = attn_mask is None and is_causal
    if attn_mask is not None:
        mask = xp.astype(_float_mask(xp, attn_mask, ref.dtype, False), ref.dtype)
        if mask.ndim == 2:
            if _shape(mask) != (n_q, n_k):
                raise ValueError(f"{fname}(): 2-D attn_mask must have shape {(n_q, n_k)}, got "
                                 f"{_shape(mask)}")
        elif mask.ndim == 3:
            if _shape(mask) != (n * num_heads, n_q, n_k):
                raise ValueError(f"{fname}(): 3-D attn_mask must have shape "
                                 f"{(n * num_heads, n_q, n_k)}, got {_shape(mask)}")
            mask = xp.reshape(mask, (n, num_heads, n_q, n_k))
        else:
            raise ValueError(f"{fname}(): attn_mask must be 2-D or 3-D, got shape "
                             f"{_shape(mask)}")
    elif is_causal and need_weights:
        mask = _causal(xp, n_q, n_k, ref.dtype, ref.device)
    if causal_mask and not need_weights and (key_padding_mask is not None or
                                             bias_k is not None or add_zero_attn):
        mask = _causal(xp, n_q, n_k, ref.dtype, ref.device)  # combined with other masks below
    if bias_k is not None or bias_v is not None:
        if bias_k is None or bias_v is None:
            raise ValueError(f"{fname}(): bias_k and bias_v must be given together")
        k = xp.concat([k, xp.broadcast_to(xp.reshape(bias_k, (1, 1, e)), (1, n, e))], axis=0)
        v = xp.concat([v, xp.broadcast_to(xp.reshape(bias_v, (1, 1, e)), (1, n, e))], axis=0)
        mask, key_padding_mask = _pad_masks(xp, mask, key_padding_mask)
    if add_zero_attn:
        k = xp.concat([k, xp.zeros((1, n, e), dtype=k.dtype, device=k.device)], axis=0)
        v = xp.concat([v, xp.zeros((1, n, e), dtype=v.dtype, device=v.device)], axis=0)
        mask, key_padding_mask = _pad_masks(xp, mask, key_padding_mask)
    s_len = n_k if packed else k.shape[0]
    if key_padding_mask is not None:
        if _shape(key_padding_mask) != (n, s_len):
            raise ValueError(f"{fname}(): key_padding_mask must have shape {(n, s_len)}, got "
                             f"{_shape(key_padding_mask)}")
        kpm = xp.astype(_float_mask(xp, key_padding_mask, ref.dtype, False), ref.dtype)
        kpm = xp.reshape(kpm, (n, 1, 1, s_len))
        mask = kpm if mask is None else mask + kpm
    causal_only = causal_mask and key_padding_mask is None and bias_k is None and \
        not add_zero_attn
    if packed:  # (so need_weights is False)
        out = _packed_attention(qkv, num_heads, batch_first,
                                None if causal_only else mask,
                                dropout_p if training else 0.0, causal_only,
                                generator=generator)
        out = linear(out, out_proj_weight, out_proj_bias)
        if not batched:
            out = out[:, 0, :]
        return out, None
    qh, kh, vh = (_split_heads(xp, t, n, num_heads) for t in (q, k, v))
    if not need_weights:  # PyTorch's path: scaled_dot_product_attention (fused kernels)
        out = scaled_dot_product_attention(
            qh, kh, vh, attn_mask=None if causal_only else mask,
            dropout_p=dropout_p if training else 0.0, is_causal=causal_only,
            generator=generator)
        perm = (0, 2, 1, 3) if batch_first else (2, 0, 1, 3)
        shape = (n, n_q, e) if batch_first else (n_q, n, e)
        out = linear(xp.reshape(xp.permute_dims(out, perm), shape), out_proj_weight,
                     out_proj_bias)
        weights = None
    else:
        scores = xp.matmul(qh * (1.0 / math.sqrt(hd)), xp.matrix_transpose(kh))
        if mask is not None:
            scores = scores + mask
        attn = softmax(scores, -1)
        if dropout_p > 0.0 and training:
            attn = dropout(attn, dropout_p, True, generator=generator)
        out = xp.matmul(attn, vh)  # (N, heads, L, hd)
        out = xp.reshape(xp.permute_dims(out, (2, 0, 1, 3)), (n_q, n, e))
        out = linear(out, out_proj_weight, out_proj_bias)
        weights = xp.mean(attn, axis=1) if average_attn_weights else attn
        if not batched:
            weights = weights[0, ...]
    if not batched:
        out = out[:, 0, :]
    return (xp.permute_dims(out, (1, 0, 2)) if transposed else out), weights


def _pad_masks(xp: Any, mask: Any, kpm: Any) -> tuple[Any, Any]:
    """Append one allowed key column to the masks (for bias_k/bias_v or a zero key)."""
    if mask is not None:
        zeros = xp.zeros(_shape(mask)[:-1] + (1,), dtype=mask.dtype, device=mask.device)
        mask = xp.concat([mask, zeros], axis=-1)
    if kpm is not None:
        if kpm.dtype == xp.bool:
            col = xp.zeros((kpm.shape[0], 1), dtype=xp.bool, device=kpm.device)
        else:
            col = xp.zeros((kpm.shape[0], 1), dtype=kpm.dtype, device=kpm.device)
        kpm = xp.concat([kpm, col], axis=-1)
    return mask, kpm


# autocast (vtl.amp): the list each op belongs to
_autocast.apply(globals(), low_ops=('scaled_dot_product_attention',
                                    '_packed_attention'))
