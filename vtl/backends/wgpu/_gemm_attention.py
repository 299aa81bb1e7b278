"""The wgpu backend's kernels of attention by products
(:class:`~vtl.backends._common.gemm_attention.ChunkedAttention`: the float32 path of
``kernel("attention")`` for long sequences without dropout): ``gattn_softmax``, a
workgroup per row of scores, and ``gattn_dsoftmax``, an invocation per score
(``wgsl/nn/gattn_*.wgsl``). The products are the library's tiled matrix product.
"""

from __future__ import annotations

import importlib
from typing import Any

from .._common import gemm_attention as C
from .._common.gemm_attention import ChunkedAttention
from . import _dtypes as D
from . import _kernels
from ._array import WgpuArray, words_for_scalar
from ._recorder import REC, groups_for

__all__ = ["WgpuGemmAttention"]


class WgpuGemmAttention(ChunkedAttention):
    """:class:`ChunkedAttention` over the wgpu array library (float32)."""

    dtypes = ("float32",)
    causal_max_scores = 0  # measured (H100): the fused kernels are faster for causal ones

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

    def _words(self, geo: tuple, b0: int, scale: float, scores: Any, lse: Any,
               mask: Any) -> list[int]:
        """Words 0-13 of both kernels: ``geo`` with the keys ``S`` the scores' columns."""
        return [b0, geo[0], geo[1], scores.shape[2], *geo[3:],
                words_for_scalar(scale, D.float32)[0], scores._offset, lse._offset,
                0 if mask is None else mask._offset]

    def softmax(self, scores: Any, lse: Any, mask: Any, geo: tuple, b0: int,
                scale: float, i0: int = 0) -> None:
        rows = scores.shape[0] * scores.shape[1]
        REC.dispatch(_kernels.kernel("gattn_softmax", "wwr", (D.float32,), C="f32"),
                     (scores._st.buf, lse._st.buf, self._mask_buffer(mask)),
                     [*self._words(geo, b0, scale, scores, lse, mask), rows,
                      scores.shape[1], i0], rows)
        self.launches += 1

    def dsoftmax(self, scores: Any, dp: Any, lse: Any, delta: Any, mask: Any, geo: tuple,
                 b0: int, scale: float, i0: int = 0) -> None:
        n = scores.size
        REC.dispatch(_kernels.kernel("gattn_dsoftmax", "wwrrr", (D.float32,)),
                     (scores._st.buf, dp._st.buf, lse._st.buf, delta._st.buf,
                      self._mask_buffer(mask)),
                     [*self._words(geo, b0, scale, scores, lse, mask), n, dp._offset,
                      delta._offset, scores.shape[1], i0], groups_for(n))
        self.launches += 1
