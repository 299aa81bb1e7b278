"""Attention by cuBLAS products over chunks of the batch: the float32/float64 path of the
CuPy backend's ``kernel("attention")`` for long sequences without dropout.

The fused kernels (``attention.py``) compute every product on CUDA cores, one FMA per
score and operand element; PyTorch's float32 attention runs its products on tensor cores
(three TF32 products per float32 one). Here the products are cuBLAS's float32 (float64)
GEMMs, in full precision, and the rest is two kernels:

* forward, per chunk of batch entries: ``S = Q K^T`` (cuBLAS), ``vtl_gattn_softmax`` (a
  block per row: scale, additive mask, causal mask, the row's log-sum-exp, ``P`` in place
  of ``S``), ``O = P V`` (cuBLAS);
* backward, per chunk: ``S = Q K^T`` and ``dP = dO V^T`` (cuBLAS), ``vtl_gattn_dsoftmax``
  (``P`` again from the saved log-sum-exp, in place of ``S``; ``dS = P (dP - delta) *
  scale`` in place of ``dP``), then ``dQ = dS K``, ``dK = dS^T Q``, ``dV = P^T dO``.

A chunk holds as many whole batch entries as fit :data:`BUDGET` bytes of scores (the
backward holds two such arrays), so memory stays bounded whatever the batch; a single
entry whose scores exceed it, dropout, 16-bit dtypes and packed projections are left to
the fused kernels. The log-sum-exp is the fused kernels' (``+inf`` for a row whose keys
are all masked, whose output and gradients are zeros), so either backward takes either
forward's result. ``VTL_CUPY_GEMM_ATTENTION=0`` turns the path off.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._switches import turned_off
from .nn import PRELUDE

__all__ = ["BUDGET", "ENABLED", "MIN_SCORES", "GemmAttention", "gemm_attention_source"]

#: bytes of scores one chunk may hold
BUDGET = 64 << 20
#: the fewest scores per batch entry (query rows x keys) for which this path is taken
MIN_SCORES = 128 * 128
#: whether the path may run (``VTL_CUPY_GEMM_ATTENTION=0`` turns it off)
ENABLED = not turned_off("VTL_CUPY_GEMM_ATTENTION")
_THREADS = 128

_SOURCE = r"""
typedef {T} T;
#define INF __int_as_float(0x7f800000)

__device__ __forceinline__ long long gattn_mask_row(int b, int B2, int i, long long mb1,
                                                    long long mb2, long long ml) {{
    return (long long)(b / B2) * mb1 + (long long)(b % B2) * mb2 + (long long)i * ml;
}}

// a block per row of the chunk's scores s ((entries, L, S), row-major): the scaled, masked
// scores' softmax in place and their log-sum-exp (+inf and zeros for a row with no key)
extern "C" __global__ void __launch_bounds__({THREADS})
vtl_gattn_softmax(T* __restrict__ s, T* __restrict__ lse, const T* __restrict__ mask,
                  int b0, int B2, int L, int S, long long mb1, long long mb2, long long ml,
                  long long ms, int has_mask, int causal, T scale) {{
    __shared__ T red[{THREADS}];
    const long long row = blockIdx.x;
    const int bl = (int)(row / L), i = (int)(row - (long long)bl * L);
    const int b = b0 + bl;
    T* sr = s + row * (long long)S;
    const long long mbase = gattn_mask_row(b, B2, i, mb1, mb2, ml);
    const int end = causal ? min(S, i + 1) : S;  // keys after the query's position: masked
    const int t = threadIdx.x;
    T m = -INF;
    for (int j = t; j < end; j += {THREADS}) {{
        const T x = sr[j] * scale + (has_mask ? mask[mbase + (long long)j * ms] : (T)0);
        sr[j] = x;
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
    T l = 0;
    if (m != -INF) {{
        for (int j = t; j < end; j += {THREADS}) l += exp(sr[j] - m);
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
    for (int j = t; j < S; j += {THREADS}) sr[j] = j < end ? exp(sr[j] - m) * inv : (T)0;
    if (t == 0) lse[(long long)b * L + i] = m + log(l);
}}

// each of the chunk's n scores: p = exp(scaled masked score - lse) in place of s, and
// ds = p * (dp - delta) * scale in place of dp
extern "C" __global__ void __launch_bounds__(256)
vtl_gattn_dsoftmax(T* __restrict__ s, T* __restrict__ dp, const T* __restrict__ lse,
                   const T* __restrict__ delta, const T* __restrict__ mask, int b0, int B2,
                   int L, int S, long long mb1, long long mb2, long long ml, long long ms,
                   int has_mask, int causal, T scale, long long n) {{
    const long long stride = (long long)gridDim.x * 256;
    for (long long e = (long long)blockIdx.x * 256 + threadIdx.x; e < n; e += stride) {{
        const long long row = e / S;
        const int j = (int)(e - row * S);
        const int bl = (int)(row / L), i = (int)(row - (long long)bl * L);
        const int b = b0 + bl;
        const long long at = (long long)b * L + i;
        const T li = lse[at];
        T p = 0;
        if (li != INF && !(causal && j > i)) {{
            const T x = s[e] * scale + (has_mask ? mask[gattn_mask_row(b, B2, i, mb1, mb2, ml)
                                                        + (long long)j * ms] : (T)0);
            p = exp(x - li);
        }}
        s[e] = p;
        dp[e] = p * (dp[e] - delta[at]) * scale;
    }}
}}
"""


def gemm_attention_source(dtype: Any) -> str:
    """The CUDA source of the two kernels for float32 or float64."""
    t = {"float32": "float", "float64": "double"}[np.dtype(dtype).name]
    return PRELUDE + _SOURCE.format(T=t, THREADS=_THREADS)


class GemmAttention:
    """The products of attention by cuBLAS (``matmul``: the backend's namespace's), the
    rest by two kernels; see the module's note."""

    def __init__(self, cupy: Any, matmul: Any) -> None:
        self._cp = cupy
        self._matmul = matmul
        self._kernels: dict[tuple[str, str], Any] = {}

    def takes(self, q: Any, k: Any, v: Any, mask: Any, dropout: Any) -> bool:
        """Whether this path computes the attention of ``(B, L, D)`` operands."""
        dt = np.dtype(q.dtype)
        if not ENABLED or dropout is not None or dt.name not in ("float32", "float64"):
            return False
        if not (q.dtype == k.dtype == v.dtype) or (mask is not None and mask.dtype != dt):
            return False
        b, n_q, _ = q.shape
        n_k = k.shape[1]
        per = n_q * n_k
        return b > 0 and min(q.shape[2], v.shape[2]) > 0 and per >= MIN_SCORES \
            and per * dt.itemsize <= BUDGET

    def _kernel(self, name: str, dtype: Any) -> Any:
        key = (name, np.dtype(dtype).name)
        kern = self._kernels.get(key)
        if kern is None:
            kern = self._kernels[key] = self._cp.RawKernel(gemm_attention_source(dtype), name)
        return kern

    def _chunks(self, b: int, n_q: int, n_k: int, itemsize: int) -> list[tuple[int, int]]:
        per = max(1, BUDGET // (n_q * n_k * itemsize))
        return [(s, min(b, s + per)) for s in range(0, b, per)]

    def _geometry(self, mask: Any, batch: tuple[int, int], n_q: int, n_k: int, causal: bool,
                  dt: np.dtype) -> tuple:
        """``(mask array, B2, L, S, mb1, mb2, ml, ms, has_mask, causal)``."""
        cp = self._cp
        if mask is None:
            m4, strides, has = cp.empty(1, dtype=dt), (0, 0, 0, 0), 0
        else:
            m4 = cp.broadcast_to(mask, (batch[0], batch[1], n_q, n_k))
            strides, has = tuple(s // m4.itemsize for s in m4.strides), 1
        return (m4, np.int32(batch[1]), np.int32(n_q), np.int32(n_k),
                *(np.int64(s) for s in strides), np.int32(has), np.int32(bool(causal)))

    def forward(self, q: Any, k: Any, v: Any, mask: Any, causal: bool, scale: float,
                batch: tuple[int, int]) -> tuple[Any, Any]:
        cp = self._cp
        dt = np.dtype(q.dtype)
        b, n_q, _ = q.shape
        n_k, dv = v.shape[1], v.shape[2]
        q, k, v = (cp.ascontiguousarray(a) for a in (q, k, v))
        mk, b2, len_q, len_k, *geo = self._geometry(mask, batch, n_q, n_k, causal, dt)
        out = cp.empty((b, n_q, dv), dtype=dt)
        lse = cp.empty((b, n_q), dtype=dt)
        kern = self._kernel("vtl_gattn_softmax", dt)
        kt = k.transpose(0, 2, 1)
        for s, e in self._chunks(b, n_q, n_k, dt.itemsize):
            scores = self._matmul(q[s:e], kt[s:e])
            kern(((e - s) * n_q,), (_THREADS,),
                 (scores, lse, mk, np.int32(s), b2, len_q, len_k, *geo, dt.type(scale)))
            out[s:e] = self._matmul(scores, v[s:e])
        return out, lse

    def backward(self, q: Any, k: Any, v: Any, out: Any, lse: Any, g: Any, mask: Any,
                 causal: bool, scale: float, batch: tuple[int, int]
                 ) -> tuple[Any, Any, Any]:
        cp = self._cp
        dt = np.dtype(q.dtype)
        b, n_q, _ = q.shape
        n_k = k.shape[1]
        q, k, v, g = (cp.ascontiguousarray(a) for a in (q, k, v, g))
        delta = (g * out).sum(axis=-1)
        mk, b2, len_q, len_k, *geo = self._geometry(mask, batch, n_q, n_k, causal, dt)
        dq, dk, dvv = cp.empty(q.shape, dtype=dt), cp.empty(k.shape, dtype=dt), \
            cp.empty(v.shape, dtype=dt)
        kern = self._kernel("vtl_gattn_dsoftmax", dt)
        kt, vt = k.transpose(0, 2, 1), v.transpose(0, 2, 1)
        for s, e in self._chunks(b, n_q, n_k, dt.itemsize):
            scores = self._matmul(q[s:e], kt[s:e])
            dp = self._matmul(g[s:e], vt[s:e])
            n = (e - s) * n_q * n_k
            kern((max(1, min(-(-n // 256), 65536)),), (256,),
                 (scores, dp, lse, delta, mk, np.int32(s), b2, len_q, len_k, *geo,
                  dt.type(scale), np.int64(n)))
            dq[s:e] = self._matmul(dp, k[s:e])
            dk[s:e] = self._matmul(dp.transpose(0, 2, 1), q[s:e])
            dvv[s:e] = self._matmul(scores.transpose(0, 2, 1), g[s:e])
        return dq, dk, dvv
