"""Attention by batched matrix products over chunks of the batch, for the GPU backends'
``kernel("attention")``: the products go to the backend's GEMM (cuBLAS on cupy, the tiled
product on wgpu) and the rest to two kernels of the backend.

* forward, per chunk of batch entries: ``S = Q K^T``, ``softmax`` (a kernel: scale,
  additive mask, causal mask, the rows' log-sum-exp, ``P`` in place of ``S``), ``O = P V``;
* backward, per chunk: ``S = Q K^T``, ``dP = dO V^T``, ``dsoftmax`` (a kernel: ``P`` again
  from the saved log-sum-exp in place of ``S``, ``dS = P (dP - delta) * scale`` in place of
  ``dP``; a backend's :meth:`~ChunkedAttention.weights_and_grads` may have the products
  store ``P`` and ``dS`` themselves), then ``dQ = dS K``, ``dK = dS^T Q``, ``dV = P^T dO``.

Causal attention (on backends whose kernels take a row offset, :attr:`causal_rows`) runs
these products per block of query rows, each over the keys up to its last row only: with
eight blocks the products and the score traffic are 36/64 of the whole rows'. A chunk then
holds as many entries as one block's scores allow.

The fused kernels compute every product on the GPU's vector units one score at a time; a
GEMM runs the same products at several times their rate. A chunk holds as many whole batch
entries as fit the backend's budget of scores (:data:`BUDGET` times its
:attr:`ChunkedAttention.budget_factor`; the backward holds two such arrays), so
memory stays bounded whatever the batch; a single entry whose scores exceed it and packed
projections are left to the fused kernels, and so is dropout unless the backend's
kernels apply it (:attr:`ChunkedAttention.takes_dropout`: the softmax writes the weights
times their dropout factors, ``vtl.random``'s bits of the fused kernels, so either path
gives the same numbers; backward ``dS = P (dP Z - delta)``). The log-sum-exp is the fused
kernels' (``+inf`` for a row whose keys are all masked, whose output and gradients are
zeros), so either backward takes either forward's result. ``VTL_GEMM_ATTENTION=0`` turns
the path off.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._switches import turned_off

__all__ = ["BUDGET", "ENABLED", "MIN_SCORES", "ChunkedAttention"]

#: bytes of scores one chunk may hold
BUDGET = 64 << 20
#: the fewest scores per batch entry (query rows x keys) for which the path is taken
MIN_SCORES = 128 * 128
#: whether the path may run (``VTL_GEMM_ATTENTION=0`` turns it off)
ENABLED = not turned_off("VTL_GEMM_ATTENTION")


class ChunkedAttention:
    """The driver; a backend gives its namespace ``xp`` (whose ``matmul`` is its GEMM),
    the dtypes it takes and the two kernels (:meth:`softmax`, :meth:`dsoftmax`)."""

    #: dtype names the backend's kernels take
    dtypes: tuple[str, ...] = ("float32", "float64")
    #: the most scores per batch entry for which causal attention takes the path (where
    #: there are no row blocks the products compute every score, masked or not, and the
    #: fused kernels, which skip the masked key blocks, are faster beyond this)
    causal_max_scores = 1024 * 1024
    #: causal attention by blocks of at least this many query rows, each block's products
    #: over the keys up to its last row (0: whole rows; the backend's kernels then need no
    #: row offset)
    causal_rows = 0
    #: and at most this many blocks
    causal_blocks = 8
    #: the backend's chunks hold this many times :data:`BUDGET` bytes of scores
    budget_factor = 1
    #: the backend's kernels take dropout (the ``dropout`` of :meth:`softmax`/:meth:`dsoftmax`)
    takes_dropout = False
    #: the fewest scores per batch entry for which causal attention or attention with dropout
    #: takes the path (below it the fused kernels, which skip masked key blocks and draw the
    #: dropout bits in place, launch fewer kernels)
    min_scores_causal_or_dropout = MIN_SCORES

    def __init__(self, xp: Any) -> None:
        self.xp = xp

    # -- the backend's part ---------------------------------------------------------
    def mask_strides(self, m4: Any) -> tuple[int, int, int, int]:
        """The element strides of the broadcast 4-d mask view ``m4``."""
        return tuple(s // m4.itemsize for s in m4.strides)

    def softmax(self, scores: Any, lse: Any, mask: Any, geo: tuple, b0: int,
                scale: float, i0: int = 0, dropout: Any = None) -> None:
        """``scores`` (``(entries, R, S')``, contiguous; the chunk's first entry is ``b0``,
        its rows the queries ``i0 .. i0 + R - 1``, its columns the first ``S'`` keys) in
        place: the softmax of ``scores * scale + mask`` over each row (causal: keys after
        the row's position masked), and each row's log-sum-exp into ``lse`` ``(B, L)``
        (``+inf`` and zeros for a row with no key). ``geo``: ``(B2, L, S, mb1, mb2, ml, ms,
        has_mask, causal)``, the mask entry of batch entry ``b`` being ``(b // B2, b % B2)``.
        ``i0`` is 0 and the scores whole rows (``R = L``, ``S' = S``) unless
        :attr:`causal_rows` is set. ``dropout`` (``(p, words)`` as the fused kernels take it,
        where :attr:`takes_dropout`): the weights times their dropout factors."""
        raise NotImplementedError

    def dsoftmax(self, scores: Any, dp: Any, lse: Any, delta: Any, mask: Any, geo: tuple,
                 b0: int, scale: float, i0: int = 0, dropout: Any = None) -> None:
        """In place: ``P = exp(scores * scale + mask - lse)`` (0 where masked or the row has
        no key) into ``scores``, ``P (dp - delta) * scale`` into ``dp`` (rows and columns as
        in :meth:`softmax`); with ``dropout``, ``P Z`` and ``P (dp Z - delta) * scale``
        (``Z`` the weights' dropout factors)."""
        raise NotImplementedError

    def weights_and_grads(self, q: Any, kt: Any, g: Any, vt: Any, lse: Any, delta: Any,
                          mask: Any, geo: tuple, b0: int, scale: float, i0: int = 0,
                          dropout: Any = None) -> tuple[Any, Any]:
        """The backward's ``(P, dS)`` of a block: ``S = q @ kt``, ``dP = g @ vt`` and
        :meth:`dsoftmax` over them (arguments as there). A backend whose products apply
        :meth:`dsoftmax`'s arithmetic as they store their results overrides it."""
        scores = self.xp.matmul(q, kt)
        dp = self.xp.matmul(g, vt)
        self.dsoftmax(scores, dp, lse, delta, mask, geo, b0, scale, i0, dropout)
        return scores, dp

    def product(self, q: Any, kt: Any, causal_from: int | None = None) -> Any:
        """The scores ``q @ kt`` of a block; ``causal_from``: the block's row ``r`` is the
        query ``causal_from + r`` of a causal attention, so its scores of later keys are
        never read (a backend may leave them uncomputed)."""
        return self.xp.matmul(q, kt)

    def matmul_into(self, a: Any, b: Any, out: Any, key: tuple, accumulate: bool = False,
                    causal_from: int | None = None) -> None:
        """``out[key] = a @ b`` (``accumulate``: ``+=``); a backend whose GEMM writes (and
        adds) into a slice in place overrides it. ``causal_from``: ``a``'s row ``r`` is zero
        after column ``causal_from + r`` (a causal block's weights or their gradient), so
        a backend may sum only up to there."""
        res = self.xp.matmul(a, b)
        out[key] = out[key] + res if accumulate else res

    def row_dots(self, g: Any, out: Any) -> Any:
        """``sum(g * out, axis=-1)`` of two ``(B, L, Dv)`` arrays (the backward's ``delta``);
        a backend with a kernel for it overrides it."""
        return self.xp.sum(g * out, axis=-1)

    # -- the driver -----------------------------------------------------------------
    def takes(self, q: Any, k: Any, v: Any, mask: Any, dropout: Any,
              causal: bool = False) -> bool:
        """Whether this path computes the attention of ``(B, L, D)`` operands."""
        if not (q.dtype == k.dtype == v.dtype) or (mask is not None and mask.dtype != q.dtype):
            return False
        return self.takes_split(q.dtype, q.shape[0], q.shape[1], k.shape[1], q.shape[2],
                                v.shape[2], mask, dropout, causal)

    def takes_split(self, dtype: Any, b: int, n_q: int, n_k: int, d: int, dv: int,
                    mask: Any, dropout: Any, causal: bool) -> bool:
        """Whether this path computes the attention of ``b`` split heads of ``n_q`` queries
        and ``n_k`` keys (head sizes ``d``, ``dv``) of ``dtype`` (a mask of that dtype)."""
        dt = np.dtype(dtype)
        if not ENABLED or (dropout is not None and not self.takes_dropout) \
                or dt.name not in self.dtypes:
            return False
        per = n_q * n_k
        if causal and per > self.causal_max_scores:
            return False
        if (causal or dropout is not None) and per < self.min_scores_causal_or_dropout:
            return False
        return b > 0 and min(d, dv) > 0 and per >= MIN_SCORES \
            and per * dt.itemsize <= BUDGET * self.budget_factor

    def chunks(self, b: int, n_q: int, n_k: int, itemsize: int) -> list[tuple[int, int]]:
        """``(first, end)`` batch entries of each chunk."""
        per = max(1, BUDGET * self.budget_factor // (n_q * n_k * itemsize))
        return [(s, min(b, s + per)) for s in range(0, b, per)]

    def row_blocks(self, n_q: int, n_k: int, causal: bool) -> list[tuple[int, int, int]]:
        """``(first row, end row, end key)`` of each block of query rows the products run
        over: the whole rows, or for causal attention (where :attr:`causal_rows` is set)
        blocks each ending its keys after its last row."""
        least = self.causal_rows
        if not causal or not least or n_q < 2 * least:
            return [(0, n_q, n_k)]
        rows = max(least, -(-n_q // self.causal_blocks))
        align = min(32, least)
        rows = -(-rows // align) * align
        return [(q0, min(n_q, q0 + rows), min(n_k, q0 + rows)) for q0 in range(0, n_q, rows)]

    def _geometry(self, mask: Any, batch: tuple[int, int], n_q: int, n_k: int,
                  causal: bool) -> tuple[Any, tuple]:
        if mask is None:
            m4, strides, has = None, (0, 0, 0, 0), 0
        else:
            m4 = self.xp.broadcast_to(mask, (batch[0], batch[1], n_q, n_k))
            strides, has = self.mask_strides(m4), 1
        return m4, (batch[1], n_q, n_k, *strides, has, int(bool(causal)))

    def _transposed(self, a: Any) -> Any:
        return self.xp.permute_dims(a, (0, 2, 1))

    def forward(self, q: Any, k: Any, v: Any, mask: Any, causal: bool, scale: float,
                batch: tuple[int, int], dropout: Any = None) -> tuple[Any, Any]:
        xp = self.xp
        b, n_q, _ = q.shape
        n_k, dv = v.shape[1], v.shape[2]
        m4, geo = self._geometry(mask, batch, n_q, n_k, causal)
        out = xp.empty((b, n_q, dv), dtype=q.dtype)
        lse = xp.empty((b, n_q), dtype=q.dtype)
        kt = self._transposed(k)
        blocks = self.row_blocks(n_q, n_k, causal)
        rows = max(q1 - q0 for q0, q1, _ in blocks)  # a chunk holds one block's scores
        for s, e in self.chunks(b, rows, n_k, np.dtype(q.dtype).itemsize):
            for q0, q1, kend in blocks:
                diag = q0 if causal else None
                scores = self.product(q[s:e, q0:q1], kt[s:e, :, :kend], diag)
                self.softmax(scores, lse, m4, geo, s, scale, q0, dropout)
                self.matmul_into(scores, v[s:e, :kend], out, np.s_[s:e, q0:q1],
                                 causal_from=diag)
        return out, lse

    def backward(self, q: Any, k: Any, v: Any, out: Any, lse: Any, g: Any, mask: Any,
                 causal: bool, scale: float, batch: tuple[int, int], dropout: Any = None
                 ) -> tuple[Any, Any, Any]:
        xp = self.xp
        b, n_q, _ = q.shape
        n_k = k.shape[1]
        delta = self.row_dots(g, out)
        m4, geo = self._geometry(mask, batch, n_q, n_k, causal)
        # the last block first: its products cover the keys of every other block, so it
        # writes the key and value gradients and the others add to them
        blocks = self.row_blocks(n_q, n_k, causal)[::-1]
        dq = xp.empty(q.shape, dtype=q.dtype)
        dk = xp.empty(k.shape, dtype=q.dtype)
        dvv = xp.empty(v.shape, dtype=q.dtype)
        kmax = blocks[0][2]
        if kmax < n_k:  # keys after the last query of a causal attention have no gradient
            dk[:, kmax:] = 0
            dvv[:, kmax:] = 0
        kt, vt = self._transposed(k), self._transposed(v)
        rows = max(q1 - q0 for q0, q1, _ in blocks)
        for s, e in self.chunks(b, rows, n_k, np.dtype(q.dtype).itemsize):
            for n, (q0, q1, kend) in enumerate(blocks):
                scores, dp = self.weights_and_grads(
                    q[s:e, q0:q1], kt[s:e, :, :kend], g[s:e, q0:q1], vt[s:e, :, :kend], lse,
                    delta, m4, geo, s, scale, q0, dropout)
                self.matmul_into(dp, k[s:e, :kend], dq, np.s_[s:e, q0:q1],
                                 causal_from=q0 if causal else None)
                self.matmul_into(self._transposed(dp), q[s:e, q0:q1], dk, np.s_[s:e, :kend],
                                 n > 0)
                self.matmul_into(self._transposed(scores), g[s:e, q0:q1], dvv,
                                 np.s_[s:e, :kend], n > 0)
        return dq, dk, dvv
