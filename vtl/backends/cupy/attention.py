"""``kernel("attention")`` of the CuPy backend: fused scaled dot-product attention, forward
and backward, without the ``(L, S)`` score matrix in memory (flash-attention style).

* forward: a thread per query row and a block of :data:`ROWS` rows per (batch, query
  block); key/value tiles of :data:`TILE` rows are staged in shared memory, the scores of
  a tile are kept in registers and folded into the output with an online softmax (one
  rescale per tile). It also writes the log-sum-exp of each row for the backward.
* backward: ``delta = rowsum(dO * O)`` (one CuPy reduction), then one kernel for ``dQ``
  (a thread per query row, looping over key tiles) and one for ``dK`` and ``dV`` (a thread
  per key row, looping over query tiles), each recomputing the probabilities from the
  saved log-sum-exp.

Rows whose keys are all masked give zeros and zero gradients (PyTorch's safe softmax);
their log-sum-exp is stored as ``+inf``. Masks are additive float arrays addressed by
strides (zero strides broadcast), so an ``(L, S)`` or key-padding mask is never expanded.
Head dimensions up to :data:`MAX_DIM`; compute in the operands' precision (float32 or
float64).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

__all__ = ["MAX_DIM", "ROWS", "TILE", "CupyAttention", "attention_source"]

ROWS = 64  # query (or key) rows per block: one thread each
TILE = 32  # key (or query) rows staged per shared-memory tile
MAX_DIM = 128

_CTYPE = {"float32": "float", "float64": "double"}

_COMMON = r"""
#define INF __int_as_float(0x7f800000)
typedef {T} T;
#define D {D}
#define DV {DV}
#define ROWS {ROWS}
#define TILE {TILE}

__device__ __forceinline__ T mask_at(const T* mask, long long base, long long ms, int j,
                                     int has_mask) {{
    return has_mask ? mask[base + (long long)j * ms] : (T)0;
}}
"""

_FORWARD = r"""
extern "C" __global__ void __launch_bounds__(ROWS)
vtl_attn_fwd(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
             const T* __restrict__ mask, T* __restrict__ out, T* __restrict__ lse,
             int B2, int L, int S, long long mb1, long long mb2, long long ml, long long ms,
             int has_mask, int causal, T scale) {
    __shared__ T ks[TILE][D];
    __shared__ T vs[TILE][DV];
    const int b = blockIdx.y;
    const int i = blockIdx.x * ROWS + threadIdx.x;
    const bool valid = i < L;
    T qr[D], o[DV], s[TILE];
    T m = -INF, l = 0;
    const T* qb = q + ((long long)b * L + (valid ? i : 0)) * D;
    #pragma unroll
    for (int d = 0; d < D; ++d) qr[d] = valid ? qb[d] : (T)0;
    #pragma unroll
    for (int d = 0; d < DV; ++d) o[d] = 0;
    const long long mbase = (long long)(b / B2) * mb1 + (long long)(b % B2) * mb2
                            + (long long)(valid ? i : 0) * ml;
    const T* kb = k + (long long)b * S * D;
    const T* vb = v + (long long)b * S * DV;
    int s_end = S;
    if (causal) s_end = min(S, (int)(blockIdx.x + 1) * ROWS);
    for (int j0 = 0; j0 < s_end; j0 += TILE) {
        __syncthreads();
        for (int e = threadIdx.x; e < TILE * D; e += ROWS) {
            const int r = e / D, c = e - r * D;
            ks[r][c] = (j0 + r < S) ? kb[(long long)(j0 + r) * D + c] : (T)0;
        }
        for (int e = threadIdx.x; e < TILE * DV; e += ROWS) {
            const int r = e / DV, c = e - r * DV;
            vs[r][c] = (j0 + r < S) ? vb[(long long)(j0 + r) * DV + c] : (T)0;
        }
        __syncthreads();
        if (!valid) continue;
        T tmax = -INF;
        #pragma unroll
        for (int jj = 0; jj < TILE; ++jj) {
            const int j = j0 + jj;
            T sc = -INF;
            if (j < S && !(causal && j > i)) {
                T acc = 0;
                #pragma unroll
                for (int d = 0; d < D; ++d) acc += qr[d] * ks[jj][d];
                sc = acc * scale + mask_at(mask, mbase, ms, j, has_mask);
            }
            s[jj] = sc;
            tmax = max(tmax, sc);
        }
        if (tmax == -INF) continue;
        const T mnew = max(m, tmax);
        const T corr = (m == -INF) ? (T)0 : exp(m - mnew);
        l *= corr;
        #pragma unroll
        for (int d = 0; d < DV; ++d) o[d] *= corr;
        #pragma unroll
        for (int jj = 0; jj < TILE; ++jj) {
            const T p = (s[jj] == -INF) ? (T)0 : exp(s[jj] - mnew);
            l += p;
            #pragma unroll
            for (int d = 0; d < DV; ++d) o[d] += p * vs[jj][d];
        }
        m = mnew;
    }
    if (!valid) return;
    T* ob = out + ((long long)b * L + i) * DV;
    if (l == (T)0) {
        #pragma unroll
        for (int d = 0; d < DV; ++d) ob[d] = 0;
        lse[(long long)b * L + i] = INF;
    } else {
        const T inv = (T)1 / l;
        #pragma unroll
        for (int d = 0; d < DV; ++d) ob[d] = o[d] * inv;
        lse[(long long)b * L + i] = m + log(l);
    }
}
"""

_BACKWARD_DQ = r"""
extern "C" __global__ void __launch_bounds__(ROWS)
vtl_attn_bwd_dq(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                const T* __restrict__ mask, const T* __restrict__ g,
                const T* __restrict__ lse, const T* __restrict__ delta, T* __restrict__ dq,
                int B2, int L, int S, long long mb1, long long mb2, long long ml,
                long long ms, int has_mask, int causal, T scale) {
    __shared__ T ks[TILE][D];
    __shared__ T vs[TILE][DV];
    const int b = blockIdx.y;
    const int i = blockIdx.x * ROWS + threadIdx.x;
    const bool valid = i < L;
    const int ii = valid ? i : 0;
    T qr[D], gr[DV], acc[D];
    const T* qb = q + ((long long)b * L + ii) * D;
    const T* gb = g + ((long long)b * L + ii) * DV;
    #pragma unroll
    for (int d = 0; d < D; ++d) { qr[d] = valid ? qb[d] : (T)0; acc[d] = 0; }
    #pragma unroll
    for (int d = 0; d < DV; ++d) gr[d] = valid ? gb[d] : (T)0;
    const T li = valid ? lse[(long long)b * L + i] : INF;
    const T di = valid ? delta[(long long)b * L + i] : (T)0;
    const long long mbase = (long long)(b / B2) * mb1 + (long long)(b % B2) * mb2
                            + (long long)ii * ml;
    const T* kb = k + (long long)b * S * D;
    const T* vb = v + (long long)b * S * DV;
    int s_end = S;
    if (causal) s_end = min(S, (int)(blockIdx.x + 1) * ROWS);
    for (int j0 = 0; j0 < s_end; j0 += TILE) {
        __syncthreads();
        for (int e = threadIdx.x; e < TILE * D; e += ROWS) {
            const int r = e / D, c = e - r * D;
            ks[r][c] = (j0 + r < S) ? kb[(long long)(j0 + r) * D + c] : (T)0;
        }
        for (int e = threadIdx.x; e < TILE * DV; e += ROWS) {
            const int r = e / DV, c = e - r * DV;
            vs[r][c] = (j0 + r < S) ? vb[(long long)(j0 + r) * DV + c] : (T)0;
        }
        __syncthreads();
        if (!valid || li == INF) continue;
        for (int jj = 0; jj < TILE; ++jj) {
            const int j = j0 + jj;
            if (j >= S || (causal && j > i)) break;
            T sc = 0;
            #pragma unroll
            for (int d = 0; d < D; ++d) sc += qr[d] * ks[jj][d];
            sc = sc * scale + mask_at(mask, mbase, ms, j, has_mask);
            if (sc == -INF) continue;
            const T p = exp(sc - li);
            T dp = 0;
            #pragma unroll
            for (int d = 0; d < DV; ++d) dp += gr[d] * vs[jj][d];
            const T ds = p * (dp - di);
            #pragma unroll
            for (int d = 0; d < D; ++d) acc[d] += ds * ks[jj][d];
        }
    }
    if (!valid) return;
    T* out = dq + ((long long)b * L + i) * D;
    #pragma unroll
    for (int d = 0; d < D; ++d) out[d] = acc[d] * scale;
}
"""

_BACKWARD_DKV = r"""
extern "C" __global__ void __launch_bounds__(ROWS)
vtl_attn_bwd_dkv(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                 const T* __restrict__ mask, const T* __restrict__ g,
                 const T* __restrict__ lse, const T* __restrict__ delta,
                 T* __restrict__ dk, T* __restrict__ dv,
                 int B2, int L, int S, long long mb1, long long mb2, long long ml,
                 long long ms, int has_mask, int causal, T scale) {
    __shared__ T qs[TILE][D];
    __shared__ T gs[TILE][DV];
    __shared__ T ls[TILE];
    __shared__ T ds_[TILE];
    const int b = blockIdx.y;
    const int j = blockIdx.x * ROWS + threadIdx.x;
    const bool valid = j < S;
    const int jj = valid ? j : 0;
    T kr[D], vr[DV], dka[D], dva[DV];
    const T* kb = k + ((long long)b * S + jj) * D;
    const T* vb = v + ((long long)b * S + jj) * DV;
    #pragma unroll
    for (int d = 0; d < D; ++d) { kr[d] = valid ? kb[d] : (T)0; dka[d] = 0; }
    #pragma unroll
    for (int d = 0; d < DV; ++d) { vr[d] = valid ? vb[d] : (T)0; dva[d] = 0; }
    const long long mcol = (long long)(b / B2) * mb1 + (long long)(b % B2) * mb2
                           + (long long)jj * ms;
    const T* qb = q + (long long)b * L * D;
    const T* gb = g + (long long)b * L * DV;
    int i_start = 0;
    if (causal) i_start = ((int)(blockIdx.x * ROWS) / TILE) * TILE;
    for (int i0 = i_start; i0 < L; i0 += TILE) {
        __syncthreads();
        for (int e = threadIdx.x; e < TILE * D; e += ROWS) {
            const int r = e / D, c = e - r * D;
            qs[r][c] = (i0 + r < L) ? qb[(long long)(i0 + r) * D + c] : (T)0;
        }
        for (int e = threadIdx.x; e < TILE * DV; e += ROWS) {
            const int r = e / DV, c = e - r * DV;
            gs[r][c] = (i0 + r < L) ? gb[(long long)(i0 + r) * DV + c] : (T)0;
        }
        for (int e = threadIdx.x; e < TILE; e += ROWS) {
            ls[e] = (i0 + e < L) ? lse[(long long)b * L + i0 + e] : INF;
            ds_[e] = (i0 + e < L) ? delta[(long long)b * L + i0 + e] : (T)0;
        }
        __syncthreads();
        if (!valid) continue;
        for (int r = 0; r < TILE; ++r) {
            const int i = i0 + r;
            if (i >= L) break;
            if ((causal && j > i) || ls[r] == INF) continue;
            T sc = 0;
            #pragma unroll
            for (int d = 0; d < D; ++d) sc += qs[r][d] * kr[d];
            sc = sc * scale + (has_mask ? mask[mcol + (long long)i * ml] : (T)0);
            if (sc == -INF) continue;
            const T p = exp(sc - ls[r]);
            T dp = 0;
            #pragma unroll
            for (int d = 0; d < DV; ++d) { dva[d] += p * gs[r][d]; dp += gs[r][d] * vr[d]; }
            const T dsc = p * (dp - ds_[r]);
            #pragma unroll
            for (int d = 0; d < D; ++d) dka[d] += dsc * qs[r][d];
        }
    }
    if (!valid) return;
    T* dko = dk + ((long long)b * S + j) * D;
    T* dvo = dv + ((long long)b * S + j) * DV;
    #pragma unroll
    for (int d = 0; d < D; ++d) dko[d] = dka[d] * scale;
    #pragma unroll
    for (int d = 0; d < DV; ++d) dvo[d] = dva[d];
}
"""


def attention_source(dtype: Any, d: int, dv: int) -> str:
    """The CUDA source of the three kernels for ``dtype`` and head sizes ``d``, ``dv``."""
    t = _CTYPE[np.dtype(dtype).name]
    head = _COMMON.format(T=t, D=d, DV=dv, ROWS=ROWS, TILE=TILE)
    if t == "double":
        head = head.replace("__int_as_float(0x7f800000)",
                            "__longlong_as_double(0x7ff0000000000000LL)")
    return head + _FORWARD + _BACKWARD_DQ + _BACKWARD_DKV


class CupyAttention:
    """``kernel("attention")`` (see :mod:`vtl.backends.cupy.attention`)."""

    def __init__(self, cupy: Any) -> None:
        self._cp = cupy
        self._modules: dict[tuple, Any] = {}
        self._lock = threading.Lock()

    def supports(self, dtype: Any) -> bool:
        return np.dtype(dtype).name in _CTYPE

    def _module(self, dtype: Any, d: int, dv: int) -> Any:
        key = (np.dtype(dtype).name, d, dv)
        mod = self._modules.get(key)
        if mod is None:
            with self._lock:
                mod = self._modules.get(key)
                if mod is None:
                    mod = self._modules[key] = self._cp.RawModule(
                        code=attention_source(dtype, d, dv))
        return mod

    def _mask_args(self, mask: Any, b1: int, b2: int, n_q: int, n_k: int) -> tuple:
        if mask is None:
            return self._cp.empty(1, dtype=np.float32), 0, 0, 0, 0, 0
        m4 = self._cp.broadcast_to(mask, (b1, b2, n_q, n_k))
        item = m4.itemsize
        return (m4, *(s // item for s in m4.strides), 1)

    def forward(self, q: Any, k: Any, v: Any, mask: Any, causal: bool, scale: float,
                batch: tuple[int, int]) -> tuple[Any, Any] | None:
        cp = self._cp
        b, n_q, d = q.shape
        n_k, dv = v.shape[1], v.shape[2]
        if max(d, dv) > MAX_DIM or not (q.dtype == k.dtype == v.dtype) or \
                not self.supports(q.dtype) or (mask is not None and mask.dtype != q.dtype):
            return None
        q, k, v = (cp.ascontiguousarray(a) for a in (q, k, v))
        out = cp.empty((b, n_q, dv), dtype=q.dtype)
        lse = cp.empty((b, n_q), dtype=q.dtype)
        mk, mb1, mb2, ml, ms, has = self._mask_args(mask, batch[0], batch[1], n_q, n_k)
        f = self._module(q.dtype, d, dv).get_function("vtl_attn_fwd")
        grid = ((n_q + ROWS - 1) // ROWS, b)
        f(grid, (ROWS,), (q, k, v, mk, out, lse, np.int32(batch[1]), np.int32(n_q),
                          np.int32(n_k), np.int64(mb1), np.int64(mb2), np.int64(ml),
                          np.int64(ms), np.int32(has), np.int32(bool(causal)),
                          q.dtype.type(scale)))
        return out, lse

    def backward(self, q: Any, k: Any, v: Any, out: Any, lse: Any, g: Any, mask: Any,
                 causal: bool, scale: float, batch: tuple[int, int]) -> tuple[Any, Any, Any]:
        cp = self._cp
        b, n_q, d = q.shape
        n_k, dv = v.shape[1], v.shape[2]
        q, k, v, g = (cp.ascontiguousarray(a) for a in (q, k, v, g))
        delta = (g * out).sum(axis=-1)
        mk, mb1, mb2, ml, ms, has = self._mask_args(mask, batch[0], batch[1], n_q, n_k)
        mod = self._module(q.dtype, d, dv)
        geo = (np.int32(batch[1]), np.int32(n_q), np.int32(n_k), np.int64(mb1), np.int64(mb2),
               np.int64(ml), np.int64(ms), np.int32(has), np.int32(bool(causal)),
               q.dtype.type(scale))
        dq = cp.empty_like(q)
        mod.get_function("vtl_attn_bwd_dq")(((n_q + ROWS - 1) // ROWS, b), (ROWS,),
                                             (q, k, v, mk, g, lse, delta, dq, *geo))
        dk = cp.empty_like(k)
        dvv = cp.empty_like(v)
        mod.get_function("vtl_attn_bwd_dkv")(((n_k + ROWS - 1) // ROWS, b), (ROWS,),
                                              (q, k, v, mk, g, lse, delta, dk, dvv, *geo))
        return dq, dk, dvv
