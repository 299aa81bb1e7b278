"""``kernel("attention")`` of the CuPy backend: fused scaled dot-product attention, forward
and backward, without the ``(L, S)`` score matrix in memory (flash-attention style).

* forward: a thread per query row and a block of :data:`ROWS` rows per (batch, query
  block); key/value tiles of :data:`TILE` rows are staged in shared memory, the scores of
  a tile are kept in registers and folded into the output with an online softmax (one
  rescale per tile). It also writes the log-sum-exp of each row for the backward.
* backward: ``delta = rowsum(dO * O)`` (one CuPy reduction; for 16-bit dtypes one small
  kernel, ``vtl_attn_delta``, in float32 from the stored output), then one kernel for ``dQ``
  (a thread per query row, looping over key tiles) and one for ``dK`` and ``dV`` (a thread
  per key row, looping over query tiles), each recomputing the probabilities from the
  saved log-sum-exp.

Dropout of the weights (tiled kernels only) regenerates ``vtl.random``'s bits of each weight
in the kernel that uses it (Philox-4x32-10, one block per four adjacent keys), so nothing of
size ``(L, S)`` is stored and the portable path's mask is reproduced exactly.

Rows whose keys are all masked give zeros and zero gradients (PyTorch's safe softmax);
their log-sum-exp is stored as ``+inf``. Masks are additive float arrays addressed by
strides (zero strides broadcast), so an ``(L, S)`` or key-padding mask is never expanded.
Head dimensions up to :data:`MAX_DIM`. float32 and float64 are computed in their own
precision; float16 and bfloat16 are stored as 16-bit words in global memory (the
operands, the mask, the output and the gradients) and computed in float32, as the other
kernels of the backend (:mod:`vtl.backends.cupy.nn`): each value is widened when it is
loaded (shared memory and registers hold float32) and each result is rounded once when it
is stored; their log-sum-exp and ``delta`` are float32, and their shared memory is that of
float32.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from .._base import DynamicScalars
from .._common.dropout import keep_threshold
from .._common.packed_attention import packed_geometry
from .nn import FLOAT_NAMES, FLOAT_TYPES, PRELUDE, compute_dtype
from .random import PHILOX_BLOCK

__all__ = ["MAX_DIM", "ROWS", "TILE", "CupyAttention", "attention_source",
           "tiled_smem_bytes"]

ROWS = 64  # query (or key) rows per block: one thread each
TILE = 32  # key (or query) rows staged per shared-memory tile
MAX_DIM = 128
#: the layout arguments of the plain layout (contiguous (B, L, E) operands)
_PLAIN = (np.int32(0), np.int32(0), np.int64(0), np.int64(0), np.int64(0))


def _packed_layout(lay: int, n: int, e: int, gradient: bool) -> tuple:
    """The layout arguments of a packed projection's kernels (``lay`` 1 or 2, ``n``
    sequences, embedding ``e``): token widths of q/k/v (``3E``), of O and dO (``E``) and,
    where a ``gradient`` of the projection is written, of it (``3E``)."""
    return (np.int32(lay), np.int32(n), np.int64(3 * e), np.int64(e),
            np.int64(3 * e if gradient else 0))

_COMMON = r"""
#define INF __int_as_float(0x7f800000)
typedef {TS} TS;  /* as stored in global memory */
typedef {T} T;    /* as computed: shared memory, registers, log-sum-exp and delta */
{CONVERT}
#define D {D}
#define DV {DV}
#define ROWS {ROWS}
#define TILE {TILE}

// Operand layouts: lay 0, batch entry b's rows contiguous ((b * rows + r) * width); lay 1 and
// 2, column blocks of a packed projection ((N, T, C) and (T, N, C); token width c, nb = N):
// entry b = n * B2 + h is sequence n's head h, at columns h * width of each token.
__device__ __forceinline__ long long vtl_base(int b, int B2, int rows, int width, int lay,
                                              long long c) {{
    if (lay == 0) return (long long)b * rows * width;
    const int n = b / B2, h = b - n * B2;
    return (lay == 1 ? (long long)n * rows * c : (long long)n * c) + (long long)h * width;
}}

__device__ __forceinline__ long long vtl_rstride(int width, int lay, long long c, int nb) {{
    return lay == 0 ? (long long)width : (lay == 1 ? c : (long long)nb * c);
}}

__device__ __forceinline__ T mask_at(const TS* mask, long long base, long long ms, int j,
                                     int has_mask) {{
    return has_mask ? vtl_ld(mask[base + (long long)j * ms]) : (T)0;
}}
"""

_DELTA = r"""
// delta = rowsum(dO * O) over n rows of DV values, in T: a thread per row
extern "C" __global__ void __launch_bounds__(ROWS)
vtl_attn_delta(const TS* __restrict__ g, const TS* __restrict__ o, T* __restrict__ delta,
               long long n, int B2, int L, int lay, int nb, long long co) {
    const long long i = (long long)blockIdx.x * ROWS + threadIdx.x;
    if (i >= n) return;
    const int b = (int)(i / L), r = (int)(i - (long long)b * L);
    const long long at = vtl_base(b, B2, L, DV, lay, co)
                         + (long long)r * vtl_rstride(DV, lay, co, nb);
    const TS* gb = g + at;
    const TS* ob = o + at;
    T acc = 0;
    #pragma unroll 8
    for (int d = 0; d < DV; ++d) acc += vtl_ld(gb[d]) * vtl_ld(ob[d]);
    delta[i] = acc;
}
"""

_FORWARD = r"""
extern "C" __global__ void __launch_bounds__(ROWS)
vtl_attn_fwd(const TS* __restrict__ q, const TS* __restrict__ k, const TS* __restrict__ v,
             const TS* __restrict__ mask, TS* __restrict__ out, T* __restrict__ lse,
             int B2, int L, int S, long long mb1, long long mb2, long long ml, long long ms,
             int has_mask, int causal, T scale,
                int lay, int nb, long long cin, long long co, long long cgr) {
    __shared__ T ks[TILE][D];
    __shared__ T vs[TILE][DV];
    const int b = blockIdx.y;
    const int i = blockIdx.x * ROWS + threadIdx.x;
    const bool valid = i < L;
    T qr[D], o[DV], s[TILE];
    T m = -INF, l = 0;
    const long long rq = vtl_rstride(D, lay, cin, nb), rv = vtl_rstride(DV, lay, cin, nb);
    const TS* qb = q + vtl_base(b, B2, L, D, lay, cin) + (long long)(valid ? i : 0) * rq;
    #pragma unroll
    for (int d = 0; d < D; ++d) qr[d] = valid ? vtl_ld(qb[d]) : (T)0;
    #pragma unroll
    for (int d = 0; d < DV; ++d) o[d] = 0;
    const long long mbase = (long long)(b / B2) * mb1 + (long long)(b % B2) * mb2
                            + (long long)(valid ? i : 0) * ml;
    const TS* kb = k + vtl_base(b, B2, S, D, lay, cin);
    const TS* vb = v + vtl_base(b, B2, S, DV, lay, cin);
    int s_end = S;
    if (causal) s_end = min(S, (int)(blockIdx.x + 1) * ROWS);
    for (int j0 = 0; j0 < s_end; j0 += TILE) {
        __syncthreads();
        for (int e = threadIdx.x; e < TILE * D; e += ROWS) {
            const int r = e / D, c = e - r * D;
            ks[r][c] = (j0 + r < S) ? vtl_ld(kb[(long long)(j0 + r) * rq + c]) : (T)0;
        }
        for (int e = threadIdx.x; e < TILE * DV; e += ROWS) {
            const int r = e / DV, c = e - r * DV;
            vs[r][c] = (j0 + r < S) ? vtl_ld(vb[(long long)(j0 + r) * rv + c]) : (T)0;
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
    TS* ob = out + vtl_base(b, B2, L, DV, lay, co)
             + (long long)i * vtl_rstride(DV, lay, co, nb);
    if (l == (T)0) {
        #pragma unroll
        for (int d = 0; d < DV; ++d) ob[d] = vtl_st((T)0);
        lse[(long long)b * L + i] = INF;
    } else {
        const T inv = (T)1 / l;
        #pragma unroll
        for (int d = 0; d < DV; ++d) ob[d] = vtl_st(o[d] * inv);
        lse[(long long)b * L + i] = m + log(l);
    }
}
"""

_BACKWARD_DQ = r"""
extern "C" __global__ void __launch_bounds__(ROWS)
vtl_attn_bwd_dq(const TS* __restrict__ q, const TS* __restrict__ k, const TS* __restrict__ v,
                const TS* __restrict__ mask, const TS* __restrict__ g,
                const T* __restrict__ lse, const T* __restrict__ delta, TS* __restrict__ dq,
                int B2, int L, int S, long long mb1, long long mb2, long long ml,
                long long ms, int has_mask, int causal, T scale,
                int lay, int nb, long long cin, long long co, long long cgr) {
    __shared__ T ks[TILE][D];
    __shared__ T vs[TILE][DV];
    const int b = blockIdx.y;
    const int i = blockIdx.x * ROWS + threadIdx.x;
    const bool valid = i < L;
    const int ii = valid ? i : 0;
    T qr[D], gr[DV], acc[D];
    const long long rq = vtl_rstride(D, lay, cin, nb), rv = vtl_rstride(DV, lay, cin, nb);
    const TS* qb = q + vtl_base(b, B2, L, D, lay, cin) + (long long)ii * rq;
    const TS* gb = g + vtl_base(b, B2, L, DV, lay, co)
                   + (long long)ii * vtl_rstride(DV, lay, co, nb);
    #pragma unroll
    for (int d = 0; d < D; ++d) { qr[d] = valid ? vtl_ld(qb[d]) : (T)0; acc[d] = 0; }
    #pragma unroll
    for (int d = 0; d < DV; ++d) gr[d] = valid ? vtl_ld(gb[d]) : (T)0;
    const T li = valid ? lse[(long long)b * L + i] : INF;
    const T di = valid ? delta[(long long)b * L + i] : (T)0;
    const long long mbase = (long long)(b / B2) * mb1 + (long long)(b % B2) * mb2
                            + (long long)ii * ml;
    const TS* kb = k + vtl_base(b, B2, S, D, lay, cin);
    const TS* vb = v + vtl_base(b, B2, S, DV, lay, cin);
    int s_end = S;
    if (causal) s_end = min(S, (int)(blockIdx.x + 1) * ROWS);
    for (int j0 = 0; j0 < s_end; j0 += TILE) {
        __syncthreads();
        for (int e = threadIdx.x; e < TILE * D; e += ROWS) {
            const int r = e / D, c = e - r * D;
            ks[r][c] = (j0 + r < S) ? vtl_ld(kb[(long long)(j0 + r) * rq + c]) : (T)0;
        }
        for (int e = threadIdx.x; e < TILE * DV; e += ROWS) {
            const int r = e / DV, c = e - r * DV;
            vs[r][c] = (j0 + r < S) ? vtl_ld(vb[(long long)(j0 + r) * rv + c]) : (T)0;
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
    TS* out = dq + vtl_base(b, B2, L, D, lay, cgr)
              + (long long)i * vtl_rstride(D, lay, cgr, nb);
    #pragma unroll
    for (int d = 0; d < D; ++d) out[d] = vtl_st(acc[d] * scale);
}
"""

_BACKWARD_DKV = r"""
extern "C" __global__ void __launch_bounds__(ROWS)
vtl_attn_bwd_dkv(const TS* __restrict__ q, const TS* __restrict__ k, const TS* __restrict__ v,
                 const TS* __restrict__ mask, const TS* __restrict__ g,
                 const T* __restrict__ lse, const T* __restrict__ delta,
                 TS* __restrict__ dk, TS* __restrict__ dv,
                 int B2, int L, int S, long long mb1, long long mb2, long long ml,
                 long long ms, int has_mask, int causal, T scale,
                int lay, int nb, long long cin, long long co, long long cgr) {
    __shared__ T qs[TILE][D];
    __shared__ T gs[TILE][DV];
    __shared__ T ls[TILE];
    __shared__ T ds_[TILE];
    const int b = blockIdx.y;
    const int j = blockIdx.x * ROWS + threadIdx.x;
    const bool valid = j < S;
    const int jj = valid ? j : 0;
    T kr[D], vr[DV], dka[D], dva[DV];
    const long long rq = vtl_rstride(D, lay, cin, nb), rg_ = vtl_rstride(DV, lay, co, nb);
    const TS* kb = k + vtl_base(b, B2, S, D, lay, cin) + (long long)jj * rq;
    const TS* vb = v + vtl_base(b, B2, S, DV, lay, cin)
                   + (long long)jj * vtl_rstride(DV, lay, cin, nb);
    #pragma unroll
    for (int d = 0; d < D; ++d) { kr[d] = valid ? vtl_ld(kb[d]) : (T)0; dka[d] = 0; }
    #pragma unroll
    for (int d = 0; d < DV; ++d) { vr[d] = valid ? vtl_ld(vb[d]) : (T)0; dva[d] = 0; }
    const long long mcol = (long long)(b / B2) * mb1 + (long long)(b % B2) * mb2
                           + (long long)jj * ms;
    const TS* qb = q + vtl_base(b, B2, L, D, lay, cin);
    const TS* gb = g + vtl_base(b, B2, L, DV, lay, co);
    int i_start = 0;
    if (causal) i_start = ((int)(blockIdx.x * ROWS) / TILE) * TILE;
    for (int i0 = i_start; i0 < L; i0 += TILE) {
        __syncthreads();
        for (int e = threadIdx.x; e < TILE * D; e += ROWS) {
            const int r = e / D, c = e - r * D;
            qs[r][c] = (i0 + r < L) ? vtl_ld(qb[(long long)(i0 + r) * rq + c]) : (T)0;
        }
        for (int e = threadIdx.x; e < TILE * DV; e += ROWS) {
            const int r = e / DV, c = e - r * DV;
            gs[r][c] = (i0 + r < L) ? vtl_ld(gb[(long long)(i0 + r) * rg_ + c]) : (T)0;
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
            sc = sc * scale + (has_mask ? vtl_ld(mask[mcol + (long long)i * ml]) : (T)0);
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
    TS* dko = dk + vtl_base(b, B2, S, D, lay, cgr)
              + (long long)j * vtl_rstride(D, lay, cgr, nb);
    TS* dvo = dv + vtl_base(b, B2, S, DV, lay, cgr)
              + (long long)j * vtl_rstride(DV, lay, cgr, nb);
    #pragma unroll
    for (int d = 0; d < D; ++d) dko[d] = vtl_st(dka[d] * scale);
    #pragma unroll
    for (int d = 0; d < DV; ++d) dvo[d] = vtl_st(dva[d]);
}
"""

_TILED_COMMON = r"""
#define BQ 64
#define BK 64
#define BKQ 32            /* key tile of the dQ kernel */
#define KPT (BKQ / 8)
#define BQD 32            /* query tile of the dK/dV kernel */
#define QPT (BQD / 8)
#define NT 128
#define DC (D / 8)
#define DVC (DV / 8)
/* batch entry b's q, k, v (and dO) rows and their row strides (vtl_base, vtl_rstride) */
#define VTL_OPERANDS \
    const TS* qs = q + vtl_base(b, B2, L, D, lay, cin); \
    const TS* ks = k + vtl_base(b, B2, S, D, lay, cin); \
    const TS* vs_ = v + vtl_base(b, B2, S, DV, lay, cin); \
    const long long rq = vtl_rstride(D, lay, cin, nb), rv = vtl_rstride(DV, lay, cin, nb);
#define VTL_GRADIENT_IN \
    const TS* gs = g + vtl_base(b, B2, L, DV, lay, co); \
    const long long rgo = vtl_rstride(DV, lay, co, nb);
#ifdef __CUDACC__
#define VTL_SMEM(name) extern __shared__ __align__(16) unsigned char name[]
#else
#define VTL_SMEM(name) alignas(16) static unsigned char name[262144]
#endif

__device__ __forceinline__ T vtl_rowmax8(T x) {
    x = max(x, __shfl_xor_sync(0xffffffffu, x, 1));
    x = max(x, __shfl_xor_sync(0xffffffffu, x, 2));
    return max(x, __shfl_xor_sync(0xffffffffu, x, 4));
}

__device__ __forceinline__ T vtl_rowsum8(T x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    x += __shfl_xor_sync(0xffffffffu, x, 2);
    return x + __shfl_xor_sync(0xffffffffu, x, 4);
}

// rows x cols of src (row stride `rs`, rows from r0, at most `n` rows) into dst, transposed
// (dst[c * rows + r]) when `tr`, else row-major; zeros past `n`.
__device__ __forceinline__ void vtl_stage(T* dst, const TS* src, int rows, int cols, int r0,
                                          int n, bool tr, long long rs) {
    for (int e = threadIdx.x; e < rows * cols; e += NT) {
        const int r = e / cols, c = e - r * cols;
        const T x = (r0 + r < n) ? vtl_ld(src[(long long)(r0 + r) * rs + c]) : (T)0;
        if (tr) dst[c * rows + r] = x; else dst[e] = x;
    }
}

// dropout of attention weights: the Philox-4x32-10 word of flat element f of the draw
// whose counter and key words are dw[0..5]; one block (four words) is kept in `blk`/`wd`
// and recomputed only when f leaves it
struct VtlDrop {
    unsigned int dw[6];
    unsigned long long blk;
    unsigned int wd[4];
    unsigned int thr;
    T scale;
    int on;
};

__device__ __forceinline__ void vtl_drop_init(VtlDrop& d, const unsigned int* dmem,
        unsigned int w0, unsigned int w1, unsigned int w2, unsigned int w3, unsigned int w4,
        unsigned int w5, int has_drop, unsigned int thr, T dscale) {
    d.on = has_drop;
    if (has_drop == 2) {
        for (int k = 0; k < 6; ++k) d.dw[k] = dmem[k];
    } else {
        d.dw[0] = w0; d.dw[1] = w1; d.dw[2] = w2; d.dw[3] = w3; d.dw[4] = w4; d.dw[5] = w5;
    }
    d.blk = ~0ull;
    d.thr = thr;
    d.scale = dscale;
}

// the factor of weight f: 0 (dropped) or 1 / (1 - p); 1 without dropout
__device__ __forceinline__ T vtl_drop(VtlDrop& d, long long f) {
    if (!d.on) return (T)1;
    const unsigned long long blk = (unsigned long long)f >> 2;
    if (blk != d.blk) {
        d.blk = blk;
        vtl_philox_block(d.dw[0], d.dw[1], d.dw[2], d.dw[3], d.dw[4], d.dw[5], blk, d.wd);
    }
    return (d.wd[f & 3] >> 8) >= d.thr ? d.scale : (T)0;
}

// the score of query i and key j (before the softmax): -inf outside, masked or causal
__device__ __forceinline__ T vtl_score(T acc, int i, int j, int L, int S, const TS* mask,
                                       long long mrow, long long ml, long long ms,
                                       int has_mask, int causal, T scale) {
    if (i >= L || j >= S || (causal && j > i)) return -INF;
    T x = acc * scale;
    if (has_mask) x += vtl_ld(mask[mrow + (long long)i * ml + (long long)j * ms]);
    return x;
}
"""

_TILED_FORWARD = r"""
// a block of BQ query rows; thread (rg, cg) = (tid / 8, tid % 8) owns rows rg*4 .. rg*4+3,
// keys cg*8 .. cg*8+7 of each tile's scores and output columns cg*DVC .. cg*DVC+DVC-1
extern "C" __global__ void __launch_bounds__(NT)
vtl_attn_fwd_tiled(const TS* __restrict__ q, const TS* __restrict__ k, const TS* __restrict__ v,
                   const TS* __restrict__ mask, TS* __restrict__ out, T* __restrict__ lse,
                   int B2, int L, int S, long long mb1, long long mb2, long long ml,
                   long long ms, int has_mask, int causal, T scale,
                   const unsigned int* __restrict__ dmem, unsigned int dw0, unsigned int dw1,
                   unsigned int dw2, unsigned int dw3, unsigned int dw4, unsigned int dw5,
                   int has_drop, unsigned int thr, T dscale,
                   int lay, int nb, long long cin, long long co, long long cgr) {
    VtlDrop dr;
    vtl_drop_init(dr, dmem, dw0, dw1, dw2, dw3, dw4, dw5, has_drop, thr, dscale);
    VTL_SMEM(vtl_smem);
    T* qt = (T*)vtl_smem;                            // [D][BQ]
    T* kt = qt + D * BQ;                             // [D][BK], then P as [BK][BQ]
    T* vs = kt + (D > BQ ? D : BQ) * BK;             // [BK][DV]
    const int tid = threadIdx.x, rg = tid >> 3, cg = tid & 7;
    const int b = blockIdx.y, q0 = blockIdx.x * BQ;
    const long long mrow = (long long)(b / B2) * mb1 + (long long)(b % B2) * mb2;
    VTL_OPERANDS
    vtl_stage(qt, qs, BQ, D, q0, L, true, rq);
    T o[4][DVC], m[4], l[4];
    #pragma unroll
    for (int a = 0; a < 4; ++a) {
        m[a] = -INF; l[a] = 0;
        #pragma unroll
        for (int c = 0; c < DVC; ++c) o[a][c] = 0;
    }
    const int kend = causal ? min(S, q0 + BQ) : S;
    for (int k0 = 0; k0 < kend; k0 += BK) {
        __syncthreads();
        vtl_stage(kt, ks, BK, D, k0, S, true, rq);
        vtl_stage(vs, vs_, BK, DV, k0, S, false, rv);
        __syncthreads();
        T s[4][8];
        #pragma unroll
        for (int a = 0; a < 4; ++a)
            #pragma unroll
            for (int c = 0; c < 8; ++c) s[a][c] = 0;
        #pragma unroll 4
        for (int d = 0; d < D; ++d) {
            T qa[4], kb[8];
            #pragma unroll
            for (int a = 0; a < 4; ++a) qa[a] = qt[d * BQ + rg * 4 + a];
            #pragma unroll
            for (int c = 0; c < 8; ++c) kb[c] = kt[d * BK + cg * 8 + c];
            #pragma unroll
            for (int a = 0; a < 4; ++a)
                #pragma unroll
                for (int c = 0; c < 8; ++c) s[a][c] += qa[a] * kb[c];
        }
        #pragma unroll
        for (int a = 0; a < 4; ++a) {
            const int i = q0 + rg * 4 + a;
            T mx = -INF;
            #pragma unroll
            for (int c = 0; c < 8; ++c) {
                s[a][c] = vtl_score(s[a][c], i, k0 + cg * 8 + c, L, S, mask, mrow, ml, ms,
                                    has_mask, causal, scale);
                mx = max(mx, s[a][c]);
            }
            mx = vtl_rowmax8(mx);
            const T mnew = max(m[a], mx);
            const T base = (mnew == -INF) ? (T)0 : mnew;
            const T corr = (mnew == -INF) ? (T)1 : exp(m[a] - mnew);
            l[a] *= corr;
            #pragma unroll
            for (int c = 0; c < DVC; ++c) o[a][c] *= corr;
            #pragma unroll
            for (int c = 0; c < 8; ++c) {
                const T p = exp(s[a][c] - base);
                l[a] += p;
                s[a][c] = (p == (T)0) ? p : p * vtl_drop(dr, ((long long)b * L + i) * S
                                                             + k0 + cg * 8 + c);
            }
            m[a] = mnew;
        }
        __syncthreads();  // every thread is done with kt: it now holds P
        T* pt = kt;
        #pragma unroll
        for (int a = 0; a < 4; ++a)
            #pragma unroll
            for (int c = 0; c < 8; ++c) pt[(cg * 8 + c) * BQ + rg * 4 + a] = s[a][c];
        __syncthreads();
        #pragma unroll 4
        for (int j = 0; j < BK; ++j) {
            T pa[4], vb[DVC];
            #pragma unroll
            for (int a = 0; a < 4; ++a) pa[a] = pt[j * BQ + rg * 4 + a];
            #pragma unroll
            for (int c = 0; c < DVC; ++c) vb[c] = vs[j * DV + cg * DVC + c];
            #pragma unroll
            for (int a = 0; a < 4; ++a)
                #pragma unroll
                for (int c = 0; c < DVC; ++c) o[a][c] += pa[a] * vb[c];
        }
    }
    #pragma unroll
    for (int a = 0; a < 4; ++a) {
        const T lt = vtl_rowsum8(l[a]);
        const int i = q0 + rg * 4 + a;
        if (i >= L) continue;
        TS* ob = out + vtl_base(b, B2, L, DV, lay, co)
                 + (long long)i * vtl_rstride(DV, lay, co, nb) + cg * DVC;
        const T inv = (lt == (T)0) ? (T)0 : (T)1 / lt;
        #pragma unroll
        for (int c = 0; c < DVC; ++c) ob[c] = vtl_st(o[a][c] * inv);
        if (cg == 0) lse[(long long)b * L + i] = (lt == (T)0) ? INF : m[a] + log(lt);
    }
}
"""

_TILED_BACKWARD_DQ = r"""
// a block of BQ query rows, looping over key tiles: thread (rg, cg) owns rows rg*4..+3,
// keys cg*KPT.. of each tile and dQ columns cg*DC..+DC-1
extern "C" __global__ void __launch_bounds__(NT)
vtl_attn_bwd_dq_tiled(const TS* __restrict__ q, const TS* __restrict__ k,
                      const TS* __restrict__ v, const TS* __restrict__ mask,
                      const TS* __restrict__ g, const T* __restrict__ lse,
                      const T* __restrict__ delta, TS* __restrict__ dq,
                      int B2, int L, int S, long long mb1, long long mb2, long long ml,
                      long long ms, int has_mask, int causal, T scale,
                   const unsigned int* __restrict__ dmem, unsigned int dw0, unsigned int dw1,
                   unsigned int dw2, unsigned int dw3, unsigned int dw4, unsigned int dw5,
                   int has_drop, unsigned int thr, T dscale,
                   int lay, int nb, long long cin, long long co, long long cgr) {
    VtlDrop dr;
    vtl_drop_init(dr, dmem, dw0, dw1, dw2, dw3, dw4, dw5, has_drop, thr, dscale);
    VTL_SMEM(vtl_smem);
    T* qt = (T*)vtl_smem;          // [D][BQ]
    T* gt = qt + D * BQ;           // [DV][BQ]
    T* kt = gt + DV * BQ;          // [D][BKQ]
    T* vt = kt + D * BKQ;           // [DV][BKQ]
    T* kr = vt + DV * BKQ;          // [BKQ][D]
    T* dst = kr + BKQ * D;          // [BKQ][BQ]
    T* ls = dst + BKQ * BQ;         // [BQ]
    T* ds_ = ls + BQ;              // [BQ]
    const int tid = threadIdx.x, rg = tid >> 3, cg = tid & 7;
    const int b = blockIdx.y, q0 = blockIdx.x * BQ;
    const long long mrow = (long long)(b / B2) * mb1 + (long long)(b % B2) * mb2;
    VTL_OPERANDS
    VTL_GRADIENT_IN
    vtl_stage(qt, qs, BQ, D, q0, L, true, rq);
    vtl_stage(gt, gs, BQ, DV, q0, L, true, rgo);
    for (int e = tid; e < BQ; e += NT) {
        const bool in = q0 + e < L;
        ls[e] = in ? lse[(long long)b * L + q0 + e] : INF;
        ds_[e] = in ? delta[(long long)b * L + q0 + e] : (T)0;
    }
    T acc[4][DC];
    #pragma unroll
    for (int a = 0; a < 4; ++a)
        #pragma unroll
        for (int c = 0; c < DC; ++c) acc[a][c] = 0;
    const int kend = causal ? min(S, q0 + BQ) : S;
    for (int k0 = 0; k0 < kend; k0 += BKQ) {
        __syncthreads();
        vtl_stage(kt, ks, BKQ, D, k0, S, true, rq);
        vtl_stage(vt, vs_, BKQ, DV, k0, S, true, rv);
        vtl_stage(kr, ks, BKQ, D, k0, S, false, rq);
        __syncthreads();
        T s[4][KPT], dp[4][KPT];
        #pragma unroll
        for (int a = 0; a < 4; ++a)
            #pragma unroll
            for (int c = 0; c < KPT; ++c) { s[a][c] = 0; dp[a][c] = 0; }
        #pragma unroll 4
        for (int d = 0; d < D; ++d) {
            T qa[4], kb[KPT];
            #pragma unroll
            for (int a = 0; a < 4; ++a) qa[a] = qt[d * BQ + rg * 4 + a];
            #pragma unroll
            for (int c = 0; c < KPT; ++c) kb[c] = kt[d * BKQ + cg * KPT + c];
            #pragma unroll
            for (int a = 0; a < 4; ++a)
                #pragma unroll
                for (int c = 0; c < KPT; ++c) s[a][c] += qa[a] * kb[c];
        }
        #pragma unroll 4
        for (int d = 0; d < DV; ++d) {
            T ga[4], vb[KPT];
            #pragma unroll
            for (int a = 0; a < 4; ++a) ga[a] = gt[d * BQ + rg * 4 + a];
            #pragma unroll
            for (int c = 0; c < KPT; ++c) vb[c] = vt[d * BKQ + cg * KPT + c];
            #pragma unroll
            for (int a = 0; a < 4; ++a)
                #pragma unroll
                for (int c = 0; c < KPT; ++c) dp[a][c] += ga[a] * vb[c];
        }
        #pragma unroll
        for (int a = 0; a < 4; ++a) {
            const int r = rg * 4 + a;
            #pragma unroll
            for (int c = 0; c < KPT; ++c) {
                const T x = vtl_score(s[a][c], q0 + r, k0 + cg * KPT + c, L, S, mask, mrow, ml,
                                      ms, has_mask, causal, scale);
                const T p = (x == -INF || ls[r] == INF) ? (T)0 : exp(x - ls[r]);
                const T z = (p == (T)0) ? (T)0 : vtl_drop(dr, ((long long)b * L + q0 + r) * S
                                                              + k0 + cg * KPT + c);
                dst[(cg * KPT + c) * BQ + r] = p * (dp[a][c] * z - ds_[r]);
            }
        }
        __syncthreads();
        #pragma unroll 4
        for (int j = 0; j < BKQ; ++j) {
            T da[4], kb[DC];
            #pragma unroll
            for (int a = 0; a < 4; ++a) da[a] = dst[j * BQ + rg * 4 + a];
            #pragma unroll
            for (int c = 0; c < DC; ++c) kb[c] = kr[j * D + cg * DC + c];
            #pragma unroll
            for (int a = 0; a < 4; ++a)
                #pragma unroll
                for (int c = 0; c < DC; ++c) acc[a][c] += da[a] * kb[c];
        }
    }
    #pragma unroll
    for (int a = 0; a < 4; ++a) {
        const int i = q0 + rg * 4 + a;
        if (i >= L) continue;
        TS* o = dq + vtl_base(b, B2, L, D, lay, cgr)
                + (long long)i * vtl_rstride(D, lay, cgr, nb) + cg * DC;
        #pragma unroll
        for (int c = 0; c < DC; ++c) o[c] = vtl_st(acc[a][c] * scale);
    }
}
"""

_TILED_BACKWARD_DKV = r"""
// a block of BK key rows, looping over query tiles: thread (rg, cg) owns keys rg*4..+3,
// queries cg*QPT.. of each tile, and dK/dV columns cg*DC.. / cg*DVC..
extern "C" __global__ void __launch_bounds__(NT)
vtl_attn_bwd_dkv_tiled(const TS* __restrict__ q, const TS* __restrict__ k,
                       const TS* __restrict__ v, const TS* __restrict__ mask,
                       const TS* __restrict__ g, const T* __restrict__ lse,
                       const T* __restrict__ delta, TS* __restrict__ dk, TS* __restrict__ dv,
                       int B2, int L, int S, long long mb1, long long mb2, long long ml,
                       long long ms, int has_mask, int causal, T scale,
                   const unsigned int* __restrict__ dmem, unsigned int dw0, unsigned int dw1,
                   unsigned int dw2, unsigned int dw3, unsigned int dw4, unsigned int dw5,
                   int has_drop, unsigned int thr, T dscale,
                   int lay, int nb, long long cin, long long co, long long cgr) {
    VtlDrop dr;
    vtl_drop_init(dr, dmem, dw0, dw1, dw2, dw3, dw4, dw5, has_drop, thr, dscale);
    VTL_SMEM(vtl_smem);
    T* kt = (T*)vtl_smem;          // [D][BK]
    T* vt = kt + D * BK;           // [DV][BK]
    T* qt = vt + DV * BK;          // [D][BQD]
    T* qr = qt + D * BQD;           // [BQD][D]
    T* gt = qr + BQD * D;           // [DV][BQD]
    T* gr = gt + DV * BQD;          // [BQD][DV]
    T* pk = gr + BQD * DV;          // [BQD][BK]
    T* dk_ = pk + BQD * BK;         // [BQD][BK]
    T* ls = dk_ + BQD * BK;         // [BQD]
    T* ds_ = ls + BQD;              // [BQD]
    const int tid = threadIdx.x, rg = tid >> 3, cg = tid & 7;
    const int b = blockIdx.y, k0 = blockIdx.x * BK;
    const long long mrow = (long long)(b / B2) * mb1 + (long long)(b % B2) * mb2;
    VTL_OPERANDS
    VTL_GRADIENT_IN
    vtl_stage(kt, ks, BK, D, k0, S, true, rq);
    vtl_stage(vt, vs_, BK, DV, k0, S, true, rv);
    T adk[4][DC], adv[4][DVC];
    #pragma unroll
    for (int a = 0; a < 4; ++a) {
        #pragma unroll
        for (int c = 0; c < DC; ++c) adk[a][c] = 0;
        #pragma unroll
        for (int c = 0; c < DVC; ++c) adv[a][c] = 0;
    }
    const int qstart = causal ? (k0 / BQD) * BQD : 0;
    for (int q0 = qstart; q0 < L; q0 += BQD) {
        __syncthreads();
        vtl_stage(qt, qs, BQD, D, q0, L, true, rq);
        vtl_stage(qr, qs, BQD, D, q0, L, false, rq);
        vtl_stage(gt, gs, BQD, DV, q0, L, true, rgo);
        vtl_stage(gr, gs, BQD, DV, q0, L, false, rgo);
        for (int e = tid; e < BQD; e += NT) {
            const bool in = q0 + e < L;
            ls[e] = in ? lse[(long long)b * L + q0 + e] : INF;
            ds_[e] = in ? delta[(long long)b * L + q0 + e] : (T)0;
        }
        __syncthreads();
        T s[4][QPT], dp[4][QPT];
        #pragma unroll
        for (int a = 0; a < 4; ++a)
            #pragma unroll
            for (int c = 0; c < QPT; ++c) { s[a][c] = 0; dp[a][c] = 0; }
        #pragma unroll 4
        for (int d = 0; d < D; ++d) {
            T ka[4], qb[QPT];
            #pragma unroll
            for (int a = 0; a < 4; ++a) ka[a] = kt[d * BK + rg * 4 + a];
            #pragma unroll
            for (int c = 0; c < QPT; ++c) qb[c] = qt[d * BQD + cg * QPT + c];
            #pragma unroll
            for (int a = 0; a < 4; ++a)
                #pragma unroll
                for (int c = 0; c < QPT; ++c) s[a][c] += ka[a] * qb[c];
        }
        #pragma unroll 4
        for (int d = 0; d < DV; ++d) {
            T va[4], gb[QPT];
            #pragma unroll
            for (int a = 0; a < 4; ++a) va[a] = vt[d * BK + rg * 4 + a];
            #pragma unroll
            for (int c = 0; c < QPT; ++c) gb[c] = gt[d * BQD + cg * QPT + c];
            #pragma unroll
            for (int a = 0; a < 4; ++a)
                #pragma unroll
                for (int c = 0; c < QPT; ++c) dp[a][c] += va[a] * gb[c];
        }
        #pragma unroll
        for (int c = 0; c < QPT; ++c) {
            const int r = cg * QPT + c;
            #pragma unroll
            for (int a = 0; a < 4; ++a) {  // keys innermost: their dropout words are adjacent
                const int kk = rg * 4 + a;
                const T x = vtl_score(s[a][c], q0 + r, k0 + kk, L, S, mask, mrow, ml, ms,
                                      has_mask, causal, scale);
                const T p = (x == -INF || ls[r] == INF) ? (T)0 : exp(x - ls[r]);
                const T z = (p == (T)0) ? (T)0 : vtl_drop(dr, ((long long)b * L + q0 + r) * S
                                                              + k0 + kk);
                pk[r * BK + kk] = p * z;
                dk_[r * BK + kk] = p * (dp[a][c] * z - ds_[r]);
            }
        }
        __syncthreads();
        #pragma unroll 2
        for (int r = 0; r < BQD; ++r) {
            T pa[4], sa[4], gb[DVC], qb[DC];
            #pragma unroll
            for (int a = 0; a < 4; ++a) { pa[a] = pk[r * BK + rg * 4 + a];
                                          sa[a] = dk_[r * BK + rg * 4 + a]; }
            #pragma unroll
            for (int c = 0; c < DVC; ++c) gb[c] = gr[r * DV + cg * DVC + c];
            #pragma unroll
            for (int c = 0; c < DC; ++c) qb[c] = qr[r * D + cg * DC + c];
            #pragma unroll
            for (int a = 0; a < 4; ++a) {
                #pragma unroll
                for (int c = 0; c < DVC; ++c) adv[a][c] += pa[a] * gb[c];
                #pragma unroll
                for (int c = 0; c < DC; ++c) adk[a][c] += sa[a] * qb[c];
            }
        }
    }
    #pragma unroll
    for (int a = 0; a < 4; ++a) {
        const int j = k0 + rg * 4 + a;
        if (j >= S) continue;
        TS* ok = dk + vtl_base(b, B2, S, D, lay, cgr)
                 + (long long)j * vtl_rstride(D, lay, cgr, nb) + cg * DC;
        TS* ov = dv + vtl_base(b, B2, S, DV, lay, cgr)
                 + (long long)j * vtl_rstride(DV, lay, cgr, nb) + cg * DVC;
        #pragma unroll
        for (int c = 0; c < DC; ++c) ok[c] = vtl_st(adk[a][c] * scale);
        #pragma unroll
        for (int c = 0; c < DVC; ++c) ov[c] = vtl_st(adv[a][c]);
    }
}
"""


_DROPOUT_MASK = r"""
// the keep mask (1 kept, 0 dropped) of the attention weights' dropout, element f of the
// (batch, L, S) weights being the draw's word f, exactly as the tiled kernels apply it: for
// a kernel (cuDNN's) that takes the mask as a tensor; four elements (a Philox block) a thread
extern "C" __global__ void
vtl_attn_dropout_mask(TS* __restrict__ m, long long total, const unsigned int* __restrict__ dmem,
                      unsigned int dw0, unsigned int dw1, unsigned int dw2, unsigned int dw3,
                      unsigned int dw4, unsigned int dw5, int has_drop, unsigned int thr) {
    VtlDrop dr;
    vtl_drop_init(dr, dmem, dw0, dw1, dw2, dw3, dw4, dw5, has_drop, thr, (T)1);
    const long long f0 = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * 4;
    for (int c = 0; c < 4; ++c)
        if (f0 + c < total) m[f0 + c] = vtl_st(vtl_drop(dr, f0 + c));
}
"""


def attention_source(dtype: Any, d: int, dv: int, tiled: bool = False) -> str:
    """The CUDA source of the three kernels for ``dtype`` and head sizes ``d``, ``dv``: the
    thread-per-row kernels, or with ``tiled`` the register-tiled ones (``d`` and ``dv``
    multiples of 8; dynamic shared memory, :func:`tiled_smem_bytes`); for float16 and
    bfloat16 also ``vtl_attn_delta`` (the backward's ``rowsum(dO * O)`` in float32)."""
    name = FLOAT_NAMES[np.dtype(dtype)]
    stored, computed, convert = FLOAT_TYPES[name]
    if convert:  # 16-bit words, widened on load and rounded on store
        conv = (f"{PRELUDE}__device__ __forceinline__ T vtl_ld(TS x) "
                f"{{ return vtl_{name}_to_float(x); }}\n__device__ __forceinline__ TS "
                f"vtl_st(T x) {{ return vtl_float_to_{name}(x); }}\n")
    else:
        conv = ("__device__ __forceinline__ T vtl_ld(TS x) { return x; }\n"
                "__device__ __forceinline__ TS vtl_st(T x) { return x; }\n")
    head = _COMMON.format(TS=stored, T=computed, CONVERT=conv, D=d, DV=dv, ROWS=ROWS,
                          TILE=TILE)
    if computed == "double":
        head = head.replace("__int_as_float(0x7f800000)",
                            "__longlong_as_double(0x7ff0000000000000LL)")
    head += _DELTA
    if tiled:
        return (head + PHILOX_BLOCK + _TILED_COMMON + _TILED_FORWARD + _TILED_BACKWARD_DQ
                + _TILED_BACKWARD_DKV + _DROPOUT_MASK)
    return head + _FORWARD + _BACKWARD_DQ + _BACKWARD_DKV


def tiled_smem_bytes(itemsize: int, d: int, dv: int) -> dict[str, int]:
    """Dynamic shared memory of each tiled kernel, in bytes, for a compute type of
    ``itemsize`` bytes (float32's for float16 and bfloat16)."""
    bq = bk = 64
    bkq = bqd = 32  # the dQ kernel's key tile, the dK/dV kernel's query tile
    return {
        "vtl_attn_fwd_tiled": itemsize * (d * bq + max(d, bq) * bk + bk * dv),
        "vtl_attn_bwd_dq_tiled": itemsize * (d * bq + dv * bq + d * bkq + dv * bkq + bkq * d
                                             + bkq * bq + 2 * bq),
        "vtl_attn_bwd_dkv_tiled": itemsize * (d * bk + dv * bk + 2 * d * bqd + 2 * dv * bqd
                                              + 2 * bqd * bk + 2 * bqd),
    }


class CupyAttention:
    """``kernel("attention")`` (see :mod:`vtl.backends.cupy.attention`).

    ``tiled``: ``None`` (default) runs the register-tiled kernels wherever they apply (head
    sizes multiples of 8 whose shared memory fits the device), else the thread-per-row
    ones; ``True``/``False`` forces one family (``True`` declines what it cannot take).
    ``gemm``: a :class:`~vtl.backends.cupy._gemm_attention.GemmAttention` that computes the
    operands it takes (long float32/float64 sequences without dropout) by cuBLAS products.
    """

    def __init__(self, cupy: Any, tiled: bool | None = None, gemm: Any = None) -> None:
        self._cp = cupy
        self._tiled = tiled
        self._gemm = gemm  # a GemmAttention: float32/float64 long sequences by cuBLAS
        self._kernels: dict[tuple, Any] = {}
        self._lock = threading.Lock()
        self._smem_max: int | None = None

    def supports(self, dtype: Any) -> bool:
        return np.dtype(dtype) in FLOAT_NAMES

    def _use_tiled(self, dtype: Any, d: int, dv: int) -> bool | None:
        """Whether to run the tiled kernels; ``None``: decline (forced but impossible)."""
        if self._tiled is False:
            return False
        ok = d % 8 == 0 and dv % 8 == 0
        if ok:
            if self._smem_max is None:
                attrs = self._cp.cuda.Device().attributes
                self._smem_max = int(attrs.get("MaxSharedMemoryPerBlockOptin", 48 * 1024))
            need = tiled_smem_bytes(compute_dtype(dtype).itemsize, d, dv)
            ok = max(need.values()) <= self._smem_max
        if self._tiled is True and not ok:
            return None
        return ok

    def _kernel(self, kname: str, dtype: Any, d: int, dv: int, tiled: bool
                ) -> tuple[Any, int]:
        """``(kernel, dynamic shared memory bytes)`` of kernel ``kname`` of the source of
        ``tiled``'s family."""
        key = (kname, np.dtype(dtype).name, d, dv, tiled)
        got = self._kernels.get(key)
        if got is None:
            with self._lock:
                got = self._kernels.get(key)
                if got is None:
                    kern = self._cp.RawKernel(attention_source(dtype, d, dv, tiled), kname)
                    smem = tiled_smem_bytes(compute_dtype(dtype).itemsize, d, dv).get(kname, 0)
                    if smem > 48 * 1024:
                        kern.max_dynamic_shared_size_bytes = smem
                    got = self._kernels[key] = (kern, smem)
        return got

    def _launch(self, name: str, dtype: Any, d: int, dv: int, tiled: bool, rows: int,
                b: int, args: tuple) -> None:
        """Kernel ``name`` of ``tiled``'s family (``_tiled`` appended for the tiled ones; not
        to ``vtl_attn_delta``, a thread per row in both) over ``rows`` rows of ``b``
        batches."""
        own = tiled and name != "vtl_attn_delta"
        kern, smem = self._kernel(name + ("_tiled" if own else ""), dtype, d, dv, tiled)
        per = 64 if own else ROWS
        block = (128,) if own else (ROWS,)
        kern(((rows + per - 1) // per, b), block, args, shared_mem=smem)

    def _mask_args(self, mask: Any, b1: int, b2: int, n_q: int, n_k: int) -> tuple:
        if mask is None:
            return self._cp.empty(1, dtype=np.float32), 0, 0, 0, 0, 0
        m4 = self._cp.broadcast_to(mask, (b1, b2, n_q, n_k))
        item = m4.itemsize
        return (m4, *(s // item for s in m4.strides), 1)

    def _drop_args(self, dropout: Any, dtype: Any, tiled: bool) -> tuple:
        """The tiled kernels' dropout arguments: words in memory or as scalars, the mode
        (0 none, 1 scalars, 2 memory), the keep threshold and the scale."""
        if not tiled:
            return ()
        zeros = (np.uint32(0),) * 6
        ct = compute_dtype(dtype).type
        if dropout is None:
            return (self._cp.empty(1, dtype=np.uint32), *zeros, np.int32(0), np.uint32(0),
                    ct(1))
        p, words = dropout
        words = words()
        tail = (np.uint32(keep_threshold(p)), ct(1.0 / (1.0 - p)))
        if isinstance(words, DynamicScalars):
            return (words.where, *zeros, np.int32(2), *tail)
        return (self._cp.empty(1, dtype=np.uint32), *(np.uint32(w) for w in words),
                np.int32(1), *tail)

    def _geometry(self, mask: Any, batch: tuple[int, int], n_q: int, n_k: int, causal: bool,
                  scale: float, dropout: Any, dtype: Any, tiled: bool,
                  layout: tuple = _PLAIN) -> tuple[Any, tuple]:
        """``(the mask array, the arguments every kernel takes after its arrays)``: heads,
        lengths, the mask's strides, flags, scale, dropout and ``layout`` (:data:`_PLAIN`, or
        the packed projection's)."""
        mk, mb1, mb2, ml, ms, has = self._mask_args(mask, batch[0], batch[1], n_q, n_k)
        return mk, (np.int32(batch[1]), np.int32(n_q), np.int32(n_k), np.int64(mb1),
                    np.int64(mb2), np.int64(ml), np.int64(ms), np.int32(has),
                    np.int32(bool(causal)), compute_dtype(dtype).type(scale),
                    *self._drop_args(dropout, dtype, tiled), *layout)

    def forward(self, q: Any, k: Any, v: Any, mask: Any, causal: bool, scale: float,
                batch: tuple[int, int], dropout: Any = None) -> tuple[Any, Any] | None:
        cp = self._cp
        b, n_q, d = q.shape
        n_k, dv = v.shape[1], v.shape[2]
        if max(d, dv) > MAX_DIM or not (q.dtype == k.dtype == v.dtype) or \
                not self.supports(q.dtype) or (mask is not None and mask.dtype != q.dtype):
            return None
        if b == 0 or min(d, dv) == 0:  # CuPy would still run one block, of no batch entry
            return None
        if self._gemm is not None and self._gemm.takes(q, k, v, mask, dropout, causal):
            return self._gemm.forward(q, k, v, mask, causal, scale, batch)
        tiled = self._use_tiled(q.dtype, d, dv)
        if tiled is None or (dropout is not None and not tiled):
            return None  # dropout: the tiled kernels only
        q, k, v = (cp.ascontiguousarray(a) for a in (q, k, v))
        out = cp.empty((b, n_q, dv), dtype=q.dtype)
        lse = cp.empty((b, n_q), dtype=compute_dtype(q.dtype))  # and the scalars' type
        mk, geo = self._geometry(mask, batch, n_q, n_k, causal, scale, dropout, q.dtype, tiled)
        self._launch("vtl_attn_fwd", q.dtype, d, dv, tiled, n_q, b,
                     (q, k, v, mk, out, lse, *geo))
        return out, lse

    def backward(self, q: Any, k: Any, v: Any, out: Any, lse: Any, g: Any, mask: Any,
                 causal: bool, scale: float, batch: tuple[int, int], dropout: Any = None
                 ) -> tuple[Any, Any, Any]:
        cp = self._cp
        b, n_q, d = q.shape
        n_k, dv = v.shape[1], v.shape[2]
        if self._gemm is not None and self._gemm.takes(q, k, v, mask, dropout, causal):
            return self._gemm.backward(q, k, v, out, lse, g, mask, causal, scale, batch)
        tiled = bool(self._use_tiled(q.dtype, d, dv))
        q, k, v, g = (cp.ascontiguousarray(a) for a in (q, k, v, g))
        ct = compute_dtype(q.dtype)
        if ct == q.dtype:
            delta = (g * out).sum(axis=-1)
        else:  # in float32 from the 16-bit words, in one launch
            delta = cp.empty((b, n_q), dtype=ct)
            self._launch("vtl_attn_delta", q.dtype, d, dv, tiled, b * n_q, 1,
                         (g, cp.ascontiguousarray(out), delta, np.int64(b * n_q),
                          np.int32(1), np.int32(n_q), *_PLAIN[:3]))
        mk, geo = self._geometry(mask, batch, n_q, n_k, causal, scale, dropout, q.dtype, tiled)
        dq = cp.empty_like(q)
        self._launch("vtl_attn_bwd_dq", q.dtype, d, dv, tiled, n_q, b,
                     (q, k, v, mk, g, lse, delta, dq, *geo))
        dk = cp.empty_like(k)
        dvv = cp.empty_like(v)
        self._launch("vtl_attn_bwd_dkv", q.dtype, d, dv, tiled, n_k, b,
                     (q, k, v, mk, g, lse, delta, dk, dvv, *geo))
        return dq, dk, dvv

    def _packed(self, qkv: Any, heads: int, batch_first: bool, mask: Any) -> tuple | None:
        """``(N, L, E, tiled, layout)`` of a packed projection the kernels take, else None."""
        geo = packed_geometry(qkv.shape, heads, batch_first, MAX_DIM)
        if geo is None or not self.supports(qkv.dtype) or (
                mask is not None and mask.dtype != qkv.dtype):
            return None
        n, length, e = geo
        tiled = self._use_tiled(qkv.dtype, e // heads, e // heads)
        if tiled is None:
            return None
        return n, length, e, tiled, 1 if batch_first else 2

    def forward_packed(self, qkv: Any, heads: int, batch_first: bool, mask: Any,
                       causal: bool, scale: float, dropout: Any = None
                       ) -> tuple[Any, Any] | None:
        got = self._packed(qkv, heads, batch_first, mask)
        if got is None or (dropout is not None and not got[3]):
            return None  # dropout: the tiled kernels only
        cp = self._cp
        n, length, e, tiled, lay = got
        hd, dt = e // heads, qkv.dtype
        flat = cp.ascontiguousarray(qkv).reshape(-1)
        out = cp.empty((*qkv.shape[:2], e), dtype=dt)
        lse = cp.empty((n * heads, length), dtype=compute_dtype(dt))
        mk, geo = self._geometry(mask, (n, heads), length, length, causal, scale, dropout, dt,
                                 tiled, _packed_layout(lay, n, e, gradient=False))
        self._launch("vtl_attn_fwd", dt, hd, hd, tiled, length, n * heads,
                     (flat, flat[e:], flat[2 * e:], mk, out, lse, *geo))
        return out, lse

    def backward_packed(self, qkv: Any, out: Any, lse: Any, g: Any, heads: int,
                        batch_first: bool, mask: Any, causal: bool, scale: float,
                        dropout: Any = None) -> Any:
        cp = self._cp
        n, length, e, tiled, lay = self._packed(qkv, heads, batch_first, mask)
        hd, dt = e // heads, qkv.dtype
        flat = cp.ascontiguousarray(qkv).reshape(-1)
        g, out = cp.ascontiguousarray(g.astype(dt, copy=False)), cp.ascontiguousarray(out)
        ct = compute_dtype(dt)
        rows = n * heads * length
        delta = cp.empty((n * heads, length), dtype=ct)
        self._launch("vtl_attn_delta", dt, hd, hd, tiled, rows, 1,
                     (g, out, delta, np.int64(rows), np.int32(heads), np.int32(length),
                      np.int32(lay), np.int32(n), np.int64(e)))
        mk, geo = self._geometry(mask, (n, heads), length, length, causal, scale, dropout, dt,
                                 tiled, _packed_layout(lay, n, e, gradient=True))
        grad = cp.empty(qkv.shape, dtype=dt)
        gf = grad.reshape(-1)
        ins = (flat, flat[e:], flat[2 * e:], mk, g, lse, delta)
        self._launch("vtl_attn_bwd_dq", dt, hd, hd, tiled, length, n * heads,
                     (*ins, gf, *geo))
        self._launch("vtl_attn_bwd_dkv", dt, hd, hd, tiled, length, n * heads,
                     (*ins, gf[e:], gf[2 * e:], *geo))
        return grad
