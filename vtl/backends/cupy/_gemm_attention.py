"""The CuPy backend's kernels of attention by cuBLAS products
(:class:`~vtl.backends._common.gemm_attention.ChunkedAttention`: the float32/float64 path
of ``kernel("attention")`` for long sequences without dropout): ``vtl_gattn_softmax``, a
block per row of scores, and ``vtl_gattn_dsoftmax``, a block per row too.

The fused kernels (``attention.py``) compute every product on CUDA cores, one FMA per
score and operand element; PyTorch's float32 attention runs its products on tensor cores
(three TF32 products per float32 one). Here the products are cuBLAS's float32 (float64)
GEMMs, in full precision.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._common.gemm_attention import ChunkedAttention
from .nn import PRELUDE

__all__ = ["GemmAttention", "gemm_attention_source"]

_THREADS = 128

_SOURCE = r"""
typedef {T} T;
#define INF __int_as_float(0x7f800000)

__device__ __forceinline__ long long gattn_mask_row(int b, int B2, int i, long long mb1,
                                                    long long mb2, long long ml) {{
    return (long long)(b / B2) * mb1 + (long long)(b % B2) * mb2 + (long long)i * ml;
}}

// a block per row of the chunk's scores s ((entries, R, S), row-major: the queries
// i0 .. i0 + R - 1 of L, the first S keys): the scaled, masked scores' softmax in place and
// their log-sum-exp (+inf and zeros for a row with no key). Three passes over the row, the
// later two from L2: on the H100 faster than holding the row in registers or folding the
// maximum and sum in one pass (both measured, length 2048: 3.5 against 4.1 and 4.6 ms).
extern "C" __global__ void __launch_bounds__({THREADS})
vtl_gattn_softmax(T* __restrict__ s, T* __restrict__ lse, const T* __restrict__ mask,
                  int b0, int B2, int L, int S, long long mb1, long long mb2, long long ml,
                  long long ms, int has_mask, int causal, int R, int i0, T scale) {{
    __shared__ T red[{THREADS}];
    const long long row = blockIdx.x;
    const int bl = (int)(row / R), i = i0 + (int)(row - (long long)bl * R);
    const int b = b0 + bl;
    T* sr = s + row * (long long)S;
    const long long mbase = gattn_mask_row(b, B2, i, mb1, mb2, ml);
    const int end = causal ? min(S, i + 1) : S;  // keys after the query's position: masked
    const int t = threadIdx.x;
    // with a mask the first pass keeps the masked scores for the others; without, they
    // scale the scores again rather than write and read them back
    T m = -INF;
    for (int j = t; j < end; j += {THREADS}) {{
        T x = sr[j] * scale;
        if (has_mask) {{
            x += mask[mbase + (long long)j * ms];
            sr[j] = x;
        }}
        m = max(m, x);
    }}
    red[t] = m;
    __syncthreads();
    for (int w = {THREADS} / 2; w > 0; w >>= 1) {{
        if (t < w) red[t] = max(red[t], red[t + w]);
        __syncthreads();
    }}
    m = red[0];
    __syncthreads();
    const T sc = has_mask ? (T)1 : scale;
    T l = 0;
    if (m != -INF) {{
        for (int j = t; j < end; j += {THREADS}) l += exp(sr[j] * sc - m);
    }}
    red[t] = l;
    __syncthreads();
    for (int w = {THREADS} / 2; w > 0; w >>= 1) {{
        if (t < w) red[t] += red[t + w];
        __syncthreads();
    }}
    l = red[0];
    if (m == -INF) {{
        for (int j = t; j < S; j += {THREADS}) sr[j] = (T)0;
        if (t == 0) lse[(long long)b * L + i] = INF;
        return;
    }}
    const T inv = (T)1 / l;
    for (int j = t; j < S; j += {THREADS}) sr[j] = j < end ? exp(sr[j] * sc - m) * inv : (T)0;
    if (t == 0) lse[(long long)b * L + i] = m + log(l);
}}

// a block per row of the chunk's scores (rows and columns as vtl_gattn_softmax's): p =
// exp(scaled masked score - lse) in place of s, and ds = p * (dp - delta) * scale in place
// of dp (zeros past a causal row's last key and in a row with no key, neither read)
extern "C" __global__ void __launch_bounds__({THREADS})
vtl_gattn_dsoftmax(T* __restrict__ s, T* __restrict__ dp, const T* __restrict__ lse,
                   const T* __restrict__ delta, const T* __restrict__ mask, int b0, int B2,
                   int L, int S, long long mb1, long long mb2, long long ml, long long ms,
                   int has_mask, int causal, int R, int i0, T scale) {{
    const long long row = blockIdx.x;
    const int bl = (int)(row / R), i = i0 + (int)(row - (long long)bl * R);
    const int b = b0 + bl;
    const long long at = (long long)b * L + i;
    const T li = lse[at], dl = delta[at];
    T* sr = s + row * (long long)S;
    T* dr = dp + row * (long long)S;
    const long long mbase = gattn_mask_row(b, B2, i, mb1, mb2, ml);
    const int end = li == INF ? 0 : (causal ? min(S, i + 1) : S);
    for (int j = threadIdx.x; j < S; j += {THREADS}) {{
        T p = 0, d = 0;
        if (j < end) {{
            const T x = sr[j] * scale + (has_mask ? mask[mbase + (long long)j * ms] : (T)0);
            p = exp(x - li);
            d = p * (dr[j] - dl) * scale;
        }}
        sr[j] = p;
        dr[j] = d;
    }}
}}
"""


_ROW_DOTS = r"""
// a warp per row: d[r] = sum over the row's n entries of g * o (rows of contiguous arrays)
extern "C" __global__ void __launch_bounds__(256)
vtl_gattn_row_dots(const T* __restrict__ g, const T* __restrict__ o, T* __restrict__ d,
                   long long rows, int n) {{
    const long long r = (long long)blockIdx.x * 8 + threadIdx.x / 32;
    if (r >= rows) return;
    const int lane = threadIdx.x % 32;
    const T* gr = g + r * n;
    const T* orow = o + r * n;
    T acc = 0;
    for (int j = lane; j < n; j += 32) acc += gr[j] * orow[j];
    for (int w = 16; w > 0; w >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, w);
    if (lane == 0) d[r] = acc;
}}
"""


def gemm_attention_source(dtype: Any) -> str:
    """The CUDA source of the module's kernels (softmax, its gradient, the rows' dot
    products) for float32 or float64."""
    t = {"float32": "float", "float64": "double"}[np.dtype(dtype).name]
    return PRELUDE + (_SOURCE + _ROW_DOTS).format(T=t, THREADS=_THREADS)


class GemmAttention(ChunkedAttention):
    """:class:`ChunkedAttention` with cuBLAS products (the backend namespace's ``matmul``)
    and the CUDA kernels of this module; causal attention by blocks of query rows."""

    # blocks of 256 rows: at length 512 two blocks took 2.17 ms where four of 128 rows took
    # 2.29 on an H200 (their products too small for cuBLAS), as fast as 128 at 1024 and
    # 2048; on an H100 the 128-row call, host-bound there, took 2.19 against 2.34 ms
    causal_rows = 256
    causal_max_scores = 4096 * 4096
    # 256 MiB of scores a chunk: cuBLAS's batched products run at 15-18 TFLOP/s over 4
    # entries of 2048 x 2048 float32 scores and at 26-34 over 32 (H100), and the attention
    # of 32 x 8 such entries in 35.8 ms instead of 46.9 (causal 21.9 instead of 38.7)
    budget_factor = 4

    def __init__(self, cupy: Any, xp: Any) -> None:
        super().__init__(xp)
        self._cp = cupy
        self._kernels: dict[tuple[str, str], Any] = {}

    def matmul_into(self, a: Any, b: Any, out: Any, key: tuple, accumulate: bool = False,
                    causal_from: int | None = None) -> None:
        """Through cuBLAS (beta 1 to add), which sums the whole depth (``causal_from``
        unused)."""
        blas = getattr(self.xp, "blas", lambda: None)()
        if blas is None or not blas.matmul_into(a, b, out[key], accumulate):
            super().matmul_into(a, b, out, key, accumulate)

    def row_dots(self, g: Any, out: Any) -> Any:
        if g.dtype != out.dtype or g.shape != out.shape:
            return super().row_dots(g, out)
        cp, n = self._cp, g.shape[-1]
        if n == 0:  # sums over no entries
            return cp.zeros(g.shape[:-1], dtype=g.dtype)
        g, out = cp.ascontiguousarray(g), cp.ascontiguousarray(out)
        d = cp.empty(g.shape[:-1], dtype=g.dtype)
        if d.size:
            self._kernel("vtl_gattn_row_dots", g.dtype)(
                (-(-d.size // 8),), (256,), (g, out, d, np.int64(d.size), np.int32(n)))
        return d

    def _kernel(self, name: str, dtype: Any) -> Any:
        key = (name, np.dtype(dtype).name)
        kern = self._kernels.get(key)
        if kern is None:
            kern = self._kernels[key] = self._cp.RawKernel(gemm_attention_source(dtype), name)
        return kern

    def _args(self, scores: Any, mask: Any, geo: tuple, b0: int, i0: int, scale: float
              ) -> tuple:
        """The kernels' arguments after their arrays: the geometry of ``scores``'s rows
        (``(entries, R, S')``, the queries from ``i0``) and the scale."""
        dt = np.dtype(scores.dtype)
        b2, n_q, _, mb1, mb2, ml, ms, has, causal = geo
        mk = self._cp.empty(1, dtype=dt) if mask is None else mask
        return (mk, np.int32(b0), np.int32(b2), np.int32(n_q), np.int32(scores.shape[2]),
                *(np.int64(x) for x in (mb1, mb2, ml, ms)), np.int32(has), np.int32(causal),
                np.int32(scores.shape[1]), np.int32(i0), dt.type(scale))

    def softmax(self, scores: Any, lse: Any, mask: Any, geo: tuple, b0: int,
                scale: float, i0: int = 0, dropout: Any = None) -> None:
        assert dropout is None  # (takes_dropout is off)
        rows = scores.shape[0] * scores.shape[1]
        self._kernel("vtl_gattn_softmax", scores.dtype)(
            (rows,), (_THREADS,), (scores, lse, *self._args(scores, mask, geo, b0, i0, scale)))

    def dsoftmax(self, scores: Any, dp: Any, lse: Any, delta: Any, mask: Any, geo: tuple,
                 b0: int, scale: float, i0: int = 0, dropout: Any = None) -> None:
        assert dropout is None
        rows = scores.shape[0] * scores.shape[1]
        self._kernel("vtl_gattn_dsoftmax", scores.dtype)(
            (rows,), (_THREADS,),
            (scores, dp, lse, delta, *self._args(scores, mask, geo, b0, i0, scale)))
