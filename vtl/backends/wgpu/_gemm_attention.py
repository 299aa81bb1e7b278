"""The wgpu backend's kernels of attention by products
(:class:`~vtl.backends._common.gemm_attention.ChunkedAttention`: the float32 path of
``kernel("attention")`` for long sequences, dropout included): ``gattn_softmax``, a
row of scores by 32 to 256 invocations, several rows a workgroup (held in registers up to
4096 keys), ``gattn_dsoftmax``, an invocation per score (four adjacent keys with dropout),
and ``gattn_row_dots``, the backward's ``delta`` in one pass (``wgsl/nn/gattn_*.wgsl``;
their dropout variants draw the fused kernels' bits, ``attention_dropout.wgsl``). The
products are the library's tiled matrix product; those into the outputs and gradients
store into their slices (and add to them) from the product's epilogue. Without dropout the
backward's ``gattn_dsoftmax`` is two epilogues instead: ``S = Q K^T`` stores the weights
``P`` (``gattn_weights_epilogue``) and ``dP = dO V^T`` the scores' gradient
(``gattn_dscores_epilogue``), the same arithmetic on the same values (the same bits) with
two fewer passes over the scores and one launch less a block.
"""

from __future__ import annotations

import importlib
from typing import Any

from .._common import gemm_attention as C
from .._common.gemm_attention import ChunkedAttention
from . import _dtypes as D
from . import _kernels, _linalg
from ._array import WgpuArray, contiguous, empty, words_for_scalar
from ._linalg import PLAIN
from ._recorder import REC, groups_for
from ._row_lanes import lane_subs, row_groups, row_lanes
from .attention import drop_words

__all__ = ["WgpuGemmAttention"]

#: the first word of the kernels' dropout (``DROP_AT`` in ``gattn_*.wgsl``)
_DROP_AT = 20


class WgpuGemmAttention(ChunkedAttention):
    """:class:`ChunkedAttention` over the wgpu array library (float32)."""

    dtypes = ("float32",)
    # causal attention by blocks of 256 query rows (H100, batch 32, 8 heads, head dim 64,
    # forward and backward: 6.56 -> 4.41 ms at 512 and 75.8 -> 38.4 ms at 2048 against the
    # fused kernels; 128-row blocks the same, 512 slower)
    causal_rows = 256
    causal_max_scores = 4096 * 4096
    # with dropout, the path against the fused kernels in whole training steps (H100): a
    # 2-layer d_model 512 encoder at sequence 256 22.3 -> 19.3 ms and a 4-layer one 45.4 ->
    # 39.7 ms, but at sequence 128 (host-bound steps, where the path's extra launches count)
    # a 2-layer d_model 256 encoder 5.2 -> 7.7 ms and a causal decoder 11.3 -> 16.5 ms
    takes_dropout = True
    min_scores_causal_or_dropout = 256 * 256

    @property
    def budget_factor(self) -> int:  # type: ignore[override]
        """Chunks of up to four times the shared budget, as cupy's (larger batches of the
        products), as far as the device binds a buffer that large."""
        from ._runtime import get

        return max(1, min(4, get().max_binding // C.BUDGET))

    def __init__(self) -> None:
        super().__init__(importlib.import_module(__package__))
        self.launches = 0
        self._no_mask: Any = None
        self._kernels: dict[tuple, Any] = {}

    def product(self, q: Any, kt: Any, causal_from: int | None = None) -> Any:
        """Causal: the tiles whose every key follows every query left at zero, their
        depth loop skipped."""
        if causal_from is not None:
            scores = empty((q.shape[0], q.shape[1], kt.shape[2]), q.dtype)
            if scores.size and _linalg.matmul_into(q, kt, scores, epi=_causal(PLAIN, True),
                                                   words=_block_words((), causal_from)):
                return scores
        return super().product(q, kt, causal_from)

    def matmul_into(self, a: Any, b: Any, out: Any, key: tuple, accumulate: bool = False,
                    causal_from: int | None = None) -> None:
        """The product written (or added) into the slice by the product's own stores; with
        ``causal_from`` each tile of rows sums over the keys up to its last query only."""
        if causal_from is not None and not accumulate:
            if _linalg.matmul_into(a, b, out[key], epi=_causal(PLAIN, False),
                                   words=_block_words((), causal_from)):
                return
        if not _linalg.matmul_into(a, b, out[key], accumulate):
            super().matmul_into(a, b, out, key, accumulate)

    #: whether the backward's products store the weights and the scores' gradient
    #: themselves (no dropout; else the products, then ``gattn_dsoftmax``)
    fused_backward = True

    def weights_and_grads(self, q: Any, kt: Any, g: Any, vt: Any, lse: Any, delta: Any,
                          mask: Any, geo: tuple, b0: int, scale: float, i0: int = 0,
                          dropout: Any = None) -> tuple[Any, Any]:
        if dropout is not None or not self.fused_backward:
            return super().weights_and_grads(q, kt, g, vt, lse, delta, mask, geo, b0, scale,
                                             i0, dropout)
        nb, rows, keys = q.shape[0], q.shape[1], kt.shape[2]
        p = empty((nb, rows, keys), D.float32)
        ds = empty((nb, rows, keys), D.float32)
        sw = words_for_scalar(scale, D.float32)[0]
        causal = bool(geo[8])  # the tiles after the diagonal: weights and gradients 0
        pwords = (b0, *geo, sw, 0, lse._offset, 0 if mask is None else mask._offset)
        if p.size == 0 or not _linalg.matmul_into(
                q, kt, p, epi=_epilogue("weights", causal),
                extra=(lse._st.buf, self._mask_buffer(mask)), words=_block_words(pwords, i0)):
            return super().weights_and_grads(q, kt, g, vt, lse, delta, mask, geo, b0, scale,
                                             i0, dropout)
        if not _linalg.matmul_into(
                g, vt, ds, epi=_epilogue("dscores", causal), extra=(p._st.buf, delta._st.buf),
                words=_block_words((b0, geo[1], p._offset, delta._offset, sw), i0)):
            raise RuntimeError("attention: no product for the scores' gradient")  # not reached
        return p, ds

    def _mask_buffer(self, mask: Any) -> Any:
        """The mask's buffer, or a one-element array's where there is none (a read-only
        binding must not share a buffer with the dispatch's writable ones)."""
        if mask is not None:
            return mask._st.buf
        if self._no_mask is None:
            self._no_mask = self.xp.zeros((1,), dtype=D.float32)
        return self._no_mask._st.buf

    def takes(self, q: Any, k: Any, v: Any, mask: Any, dropout: Any,
              causal: bool = False) -> bool:
        if not all(type(a) is WgpuArray for a in (q, k, v)):
            return False
        if mask is not None and (type(mask) is not WgpuArray or mask.ndim > 4):
            return False
        return super().takes(q, k, v, mask, dropout, causal)

    def mask_strides(self, m4: Any) -> tuple[int, int, int, int]:
        return tuple(0 if n == 1 else s for n, s in zip(m4.shape, m4._strides, strict=True))

    def _kernel(self, name: str, sig: str, dropout: Any, tpr: int = 0) -> Any:
        """Kernel ``name`` (bindings ``sig``), cached, its dropout variant where ``dropout``
        is given (``tpr``: the softmax's invocations per row; kernels without these
        placeholders ignore them)."""
        key = (name, dropout is not None, tpr)
        k = self._kernels.get(key)
        if k is None:
            drop = {"DROPOUT": "false", "PHILOX": "",
                    "DROP": "fn drop4(p: vec4<f32>, row: u32, j: u32) -> vec4<f32> { return p; }"}
            if dropout is not None:
                drop = {"DROPOUT": "true", "DROP": _kernels.source("attention_dropout"),
                        "PHILOX": _kernels.source("philox_rounds")}
            extra = lane_subs(tpr) if tpr else {}
            k = self._kernels[key] = _kernels.kernel(name, sig, (D.float32,), C="f32", **drop,
                                                     WEIGHT=_kernels.source("gattn_weight"),
                                                     **extra)
        return k

    def _words(self, geo: tuple, b0: int, scale: float, scores: Any, lse: Any,
               mask: Any, n: int, i0: int, dropout: Any, tail: tuple = ()
               ) -> tuple[list[int], Any]:
        """Both kernels' words (``gattn_softmax.wgsl``: 0-19, then the dropout's) and the
        dropout's capture patch."""
        words = [b0, *geo, words_for_scalar(scale, D.float32)[0], scores._offset, lse._offset,
                 0 if mask is None else mask._offset, n, scores.shape[1], i0,
                 scores.shape[2], *tail]
        words += [0] * (_DROP_AT - len(words))
        dwords, patch = drop_words(dropout, _DROP_AT)
        return words + dwords, patch

    def softmax(self, scores: Any, lse: Any, mask: Any, geo: tuple, b0: int,
                scale: float, i0: int = 0, dropout: Any = None) -> None:
        rows = scores.shape[0] * scores.shape[1]
        words, patch = self._words(geo, b0, scale, scores, lse, mask, rows, i0, dropout)
        tpr = row_lanes(scores.shape[2])
        REC.dispatch(self._kernel("gattn_softmax", "wwr", dropout, tpr),
                     (scores._st.buf, lse._st.buf, self._mask_buffer(mask)), words,
                     row_groups(rows, tpr), dynamic=patch)
        self.launches += 1

    def row_dots(self, g: Any, out: Any) -> Any:
        """``sum(g * out, axis=-1)`` by one kernel, sixteen invocations a row."""
        if g.dtype != D.float32 or out.dtype != D.float32 or g.shape != out.shape \
                or g.shape[-1] == 0:
            return super().row_dots(g, out)
        g, out = contiguous(g), contiguous(out)
        d = empty(g.shape[:-1], D.float32)
        if d.size:
            REC.dispatch(self._kernel("gattn_row_dots", "rrw", None),
                         (g._st.buf, out._st.buf, d._st.buf),
                         [d.size, g.shape[-1], g._offset, out._offset, d._offset],
                         -(-d.size // 16))
            self.launches += 1
        return d

    def dsoftmax(self, scores: Any, dp: Any, lse: Any, delta: Any, mask: Any, geo: tuple,
                 b0: int, scale: float, i0: int = 0, dropout: Any = None) -> None:
        n = scores.size if dropout is None else \
            scores.shape[0] * scores.shape[1] * -(-scores.shape[2] // 4)
        words, patch = self._words(geo, b0, scale, scores, lse, mask, n, i0, dropout,
                                   (dp._offset, delta._offset))
        REC.dispatch(self._kernel("gattn_dsoftmax", "wwrrr", dropout),
                     (scores._st.buf, dp._st.buf, lse._st.buf, delta._st.buf,
                      self._mask_buffer(mask)), words, groups_for(n), dynamic=patch)
        self.launches += 1


_EPILOGUES: dict[str, dict] = {}


def _epilogue(name: str, causal: bool = False) -> dict:
    """The product epilogue ``gattn_<name>_epilogue.wgsl`` (``weights``: ``P`` from the
    scores; ``dscores``: ``dS`` from ``dP``) for ``_linalg.matmul_into``; ``causal``: its
    tiles after the diagonal skipped (:func:`_causal`)."""
    if causal:
        return _causal(_epilogue(name), True)
    epi = _EPILOGUES.get(name)
    if epi is None:
        call = {"weights": "attn_weight(b, row, col + c, v[c])",
                "dscores": "attn_dscore(b, row, col + c, M, N, v[c])"}[name]
        decl = _kernels.source(f"gattn_{name}_epilogue")
        if name == "weights":
            decl += "\n" + _kernels.source("gattn_weight")
        epi = _EPILOGUES[name] = {**PLAIN, "DECL": decl, "EPI": call}
    return epi


#: the last immediates word: a block's first query row, for the epilogues and ``_causal``
_ROW_WORD = 31
_CAUSAL: dict[tuple, dict] = {}


def _causal(epi: dict, tiles: bool) -> dict:
    """``epi`` for a causal block's product (its first query row in word 31,
    :func:`_block_words`): ``tiles``, a product of scores (rows the queries, columns the
    keys) that skips the depth loop of tiles whose every key follows every query (storing
    ``epi`` of zeros: their scores are never read, their weights and gradients are zeros);
    else a product by weights (rows the queries, depth the keys) whose tiles sum over the
    keys up to their last query."""
    key = (epi["EPI"], epi["DECL"], tiles)
    out = _CAUSAL.get(key)
    if out is None:
        w = f"pw({_ROW_WORD}u)"
        if tiles:
            fn = (f"fn attn_after_diagonal(m0: u32, n0: u32) -> bool {{ return n0 > {w} + m0 "
                  "+ TILE - 1u; }")
            out = {**epi, "DECL": epi["DECL"] + "\n" + fn,
                   "KEND": "select(K, 0u, attn_after_diagonal(m0, n0))"}
        else:
            out = {**epi, "KEND": f"min(K, {w} + m0 + TILE)"}
        _CAUSAL[key] = out
    return out


def _block_words(words: tuple, first_row: int) -> tuple:
    """An epilogue's ``words`` (from word 14) followed by the block's first query row in
    word 31."""
    return (*words, *[0] * (_ROW_WORD - 14 - len(words)), first_row)
