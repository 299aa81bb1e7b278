"""Fused kernels of ``vtl.nn`` ops on the CuPy backend (``linear``, ``linear_grad_weight``,
``relu``, ``relu_backward``, ``cross_entropy``, ``layer_norm``, ``gelu``; the contracts are in
``vtl.backends.kernels``).

Each replaces a chain of portable array-API calls (one CuPy launch and 10-20 us of host
time each) by fewer launches; the portable versions stay the reference
(``tests/test_cupy_nn_kernels.py`` checks that both agree). Kernels take raw arrays and
return ``None`` when they do not handle the arguments (the caller then takes the portable
path). Float32, float64, float16 and bfloat16.

float16 and bfloat16 arrays are read and written as 16-bit words (``unsigned short``: no
``cuda_fp16.h``/``cuda_bf16.h``, so NVRTC needs no headers and the host build needs no CUDA
types); ``vtl_ld`` widens a word to float32 and ``vtl_st`` rounds a float32 to the nearest
even 16-bit value (overflow to inf, nan kept), by integer operations that give bit for bit
``__half2float``/``__float2half_rn`` and ``__bfloat162float``/``__float2bfloat16_rn``. All
arithmetic is float32 and each result is rounded once; statistics that a backward reads
(cross-entropy's row maxima and sums, layer_norm's means and reciprocal deviations) stay
float32. For float32 and float64 the two are the identity.

* ``linear``: ``x @ w.T + b`` as one cuBLAS gemm (the namespace's ``matmul``) and one
  in-place bias add;
* ``linear_grad_weight``: ``g.T @ x`` (one gemm) and the bias gradient ``sum(g, axis=0)``
  (one column-sum kernel, summed in a fixed order: deterministic);
* ``relu``: ``maximum(x, 0)``, float32 four elements a thread;
* ``relu_backward``: ``where(x <= 0, 0, g)`` in one launch (float32 four elements a thread);
* ``cross_entropy``: log-softmax, the picked log probability, the ignore mask and the
  sum/mean in ONE launch (one warp per row; the rows and the reduction in one block up to
  ``CE_ONE_BLOCK`` logits and ``CE_ONE_BLOCK_ROWS`` rows, above that a second one-block
  launch sums the per-row losses and checks the targets);
  the reduction runs in a fixed order (no atomics), so results are deterministic. Its
  gradient ``(softmax - onehot) * g`` (masked, divided by the count for ``'mean'``) is
  one more launch.

Class indices of ``cross_entropy`` are validated without a host sync: the kernel itself
checks every target, gives nan for a target outside ``[0, C)`` (it never reads out of
bounds) and records the first bad target of the first failing call in a small device
buffer. That buffer is read lazily, by the first host read of any array of the backend
after the call (``CupyBackend.to_host``: ``float(loss)``, ``loss.item()``,
``.numpy()``...), which raises the ``IndexError`` the portable path raises. Targets
uploaded from host memory (``vtl.asarray``) have a value range recorded at upload; when
that range shows a possibly bad target, the caller checks eagerly as the portable path
does (one sync), so that an error is raised by the call itself.

The CUDA sources are built from :class:`Spec` objects (parameter list + body), so the
same code can be compiled by NVRTC (CuPy), by ``nvcc`` for a syntax check, or for the
host with a small emulation of the CUDA built-ins (the tests do both).
"""

from __future__ import annotations

import re
import weakref
from typing import Any, NamedTuple

import numpy as np

from .._common.ranges import KNOWN_MAX, targets_in_range, value_range
from .._common.row_blocks import row_blocks
from .._dtypes import bfloat16, float16
from ._codegen import CTYPES
from .checks import ErrorBuffers

_TCTYPES = {
    np.dtype(np.int8): "signed char", np.dtype(np.int16): "short",
    np.dtype(np.int32): "int", np.dtype(np.int64): "long long",
    np.dtype(np.uint8): "unsigned char", np.dtype(np.uint16): "unsigned short",
    np.dtype(np.uint32): "unsigned int",
}
_I64 = np.int64
_I32 = np.int32


class Spec(NamedTuple):
    """One CUDA kernel: ``extern "C" __global__ void name(params) { body }``; parameter
    types may use ``T`` (the float type as stored), ``A`` (the type it is computed in) and
    ``TI`` (the target's integer type)."""

    name: str
    params: tuple[tuple[str, str], ...]
    body: str


_PRELUDE = r"""
// a grid-stride loop of i over [0, n): each thread from its global index, by the grid's size
#define VTL_GRID_LOOP(i, n) \
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x, \
       vtl_stride_##i = (long long)blockDim.x * gridDim.x; i < (n); i += vtl_stride_##i)
__device__ __forceinline__ float vtl_exp(float a) { return expf(a); }
__device__ __forceinline__ double vtl_exp(double a) { return exp(a); }
__device__ __forceinline__ float vtl_log(float a) { return logf(a); }
__device__ __forceinline__ double vtl_log(double a) { return log(a); }
__device__ __forceinline__ float vtl_nan(float) { return __int_as_float(0x7fc00000); }
__device__ __forceinline__ double vtl_nan(double) {
  return __longlong_as_double(0x7ff8000000000000LL);
}
__device__ __forceinline__ float vtl_neg_inf(float) { return __int_as_float(0xff800000); }
__device__ __forceinline__ double vtl_neg_inf(double) {
  return __longlong_as_double((long long)0xfff0000000000000ULL);
}
__device__ __forceinline__ float vtl_half_to_float(unsigned short h) {
  const unsigned s = ((unsigned)h & 0x8000u) << 16;
  unsigned e = ((unsigned)h >> 10) & 0x1fu, m = (unsigned)h & 0x3ffu;
  if (e == 0x1fu) return __uint_as_float(s | 0x7f800000u | (m << 13));
  if (e == 0) {
    if (m == 0) return __uint_as_float(s);
    e = 113;
    while (!(m & 0x400u)) { m <<= 1; --e; }
    return __uint_as_float(s | (e << 23) | ((m & 0x3ffu) << 13));
  }
  return __uint_as_float(s | ((e + 112) << 23) | (m << 13));
}
__device__ __forceinline__ unsigned short vtl_float_to_half(float f) {
  const unsigned u = __float_as_uint(f);
  const unsigned s = (u >> 16) & 0x8000u;
  const unsigned a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (unsigned short)(s | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x47800000u) return (unsigned short)(s | 0x7c00u);
  if (a >= 0x38800000u) {  // a normal half: rebias, round the 13 dropped bits to even
    const unsigned r = a - 0x38000000u + 0xfffu + ((a >> 13) & 1u);
    return (unsigned short)(s | (r >> 13));
  }
  const unsigned e = a >> 23;  // a subnormal half (or zero): shift the significand
  if (e < 102) return (unsigned short)s;
  const unsigned m = (a & 0x7fffffu) | 0x800000u, sh = 126 - e;
  unsigned r = m >> sh;
  const unsigned rem = m & ((1u << sh) - 1u), half = 1u << (sh - 1);
  if (rem > half || (rem == half && (r & 1u))) ++r;
  return (unsigned short)(s | r);
}
__device__ __forceinline__ float vtl_bfloat16_to_float(unsigned short h) {
  return __uint_as_float((unsigned)h << 16);
}
__device__ __forceinline__ unsigned short vtl_float_to_bfloat16(float f) {
  const unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
  return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
"""

#: one warp's softmax statistics of a row (cross-entropy, softmax), after vtl_ld/vtl_st
_ROW_STATS = r"""
/* sh = the maximum of the n values xr[c * stride] (a nan wins; 0 where it is not finite) and
   s = sum(exp(x - sh)), both in every lane of the warp (lane = this thread's) */
__device__ __forceinline__ void vtl_row_stats(const T* xr, const long long n,
                                              const long long stride, const int lane,
                                              A& sh, A& s) {
  const unsigned FULL = 0xffffffffu;
  A mx = vtl_neg_inf((A)0);
  for (long long c = lane; c < n; c += 32) {
    const A v = vtl_ld(xr[c * stride]);
    if (isnan(v) || v > mx) mx = v;
  }
  for (int o = 16; o > 0; o >>= 1) {
    const A v = __shfl_down_sync(FULL, mx, o);
    if (isnan(v) || v > mx) mx = v;
  }
  mx = __shfl_sync(FULL, mx, 0);
  sh = isfinite(mx) ? mx : (A)0;
  A t = 0;
  for (long long c = lane; c < n; c += 32) t += vtl_exp(vtl_ld(xr[c * stride]) - sh);
  for (int o = 16; o > 0; o >>= 1) t += __shfl_down_sync(FULL, t, o);
  s = __shfl_sync(FULL, t, 0);
}
"""

#: the float types of the kernels by name: (the C type stored, the C type computed in, the
#: conversion between them: ``vtl_{name}_to_float``/``vtl_float_to_{name}``, or none)
FLOAT_TYPES = {
    "float": ("float", "float", False),
    "double": ("double", "double", False),
    "half": ("unsigned short", "float", True),
    "bfloat16": ("unsigned short", "float", True),
}
#: the name in :data:`FLOAT_TYPES` of each dtype the kernels take
FLOAT_NAMES = {**CTYPES, np.dtype(float16): "half", np.dtype(bfloat16): "bfloat16"}
_F32 = np.dtype(np.float32)
#: the device functions every source of :func:`cuda_source` starts with (float/double math
#: overloads, the 16-bit conversions), for the backend's other kernel sources
PRELUDE = _PRELUDE


def compute_dtype(dtype: Any) -> np.dtype:
    """The dtype kernels compute ``dtype`` in (and keep its statistics in): float32 for
    float16 and bfloat16, else ``dtype`` itself."""
    dt = np.dtype(dtype)
    return dt if dt in CTYPES else _F32


def cuda_source(spec: Spec, ctype: str, tctype: str = "int", name: str | None = None) -> str:
    """CUDA C++ source of ``spec`` for the float type ``ctype`` (a name in
    :data:`FLOAT_TYPES`) and target type ``tctype`` (the kernel is called ``name``, default
    ``spec.name``)."""
    stored, computed, convert = FLOAT_TYPES[ctype]
    ld, st = (f"vtl_{ctype}_to_float(v)", f"vtl_float_to_{ctype}(v)") if convert else ("v", "v")
    params = ",\n    ".join(f"{t} {n}" for t, n in spec.params)
    return (f"typedef {stored} T;\ntypedef {computed} A;\ntypedef {tctype} TI;\n{_PRELUDE}"
            f"__device__ __forceinline__ A vtl_ld(T v) {{ return {ld}; }}\n"
            f"__device__ __forceinline__ T vtl_st(A v) {{ return {st}; }}\n{_ROW_STATS}\n"
            f'extern "C" __global__ void {name or spec.name}(\n    {params}) {{\n'
            f"{spec.body}}}\n")


# -- kernels ---------------------------------------------------------------------------------
# Bodies read stored values through ``vtl_ld`` (to ``A``), compute in ``A`` and write
# through ``vtl_st`` (rounded to ``T``): see the module docstring.

#: ``out[i, j] += b[j * sb]`` over a contiguous (total / N, N) ``out`` (``relu``: then
#: ``maximum(out, 0)``): a thread per column of a block of 256 (its bias loaded once), rows
#: ``blockIdx.y, blockIdx.y + gridDim.y, ...`` (no division per element); see
#: :func:`_bias_grid`
BIAS_ADD = Spec("vtl_bias_add", (
    ("T* __restrict__", "out"), ("const T* __restrict__", "b"), ("const long long", "sb"),
    ("const long long", "N"), ("const long long", "total"), ("const int", "relu")), r"""
  const long long col = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= N) return;
  const auto bv = vtl_ld(b[col * sb]);
  const long long rows = total / N;
  for (long long r = blockIdx.y; r < rows; r += gridDim.y) {
    auto v = vtl_ld(out[r * N + col]) + bv;
    if (relu && v <= 0) v = 0;  // maximum(v, 0): nan passes
    out[r * N + col] = vtl_st(v);
  }
""")

#: ``out[j] = sum_m g[m * sgm + j * sgn]`` with block (32, 8) and a 1-D grid of
#: ``ceil(N / 32) * S`` blocks: block ``b`` sums columns ``32 * (b % nbx)...`` over row slab
#: ``b / nbx`` (``S`` slabs of ``ceil(M / S)`` rows), eight row phases per column summed in
#: a fixed order (in double). With one slab the sum is rounded into ``out``; with more each
#: slab's sums go to ``part[slab * N + j]`` and :data:`COL_SUM_FINISH` adds them in order.
def _col_sum_spec(name: str, g_type: str, load: str) -> Spec:
    return Spec(name, (
        (g_type, "g"), ("T* __restrict__", "out"), ("double* __restrict__", "part"),
        ("const long long", "M"), ("const long long", "N"), ("const long long", "sgm"),
        ("const long long", "sgn"), ("const long long", "S")), r"""
  __shared__ double part_[8][33];
  const long long nbx = (N + 31) / 32;
  const long long slab = blockIdx.x / nbx;
  const long long col = (blockIdx.x - slab * nbx) * 32 + threadIdx.x;
  const long long rows = (M + S - 1) / S;
  const long long m1 = (slab + 1) * rows < M ? (slab + 1) * rows : M;
  double acc = 0;
  if (col < N) {
    for (long long m = slab * rows + threadIdx.y; m < m1; m += 8)
      acc += (double)""" + load + r""";
  }
  part_[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && col < N) {
    double s = part_[0][threadIdx.x];
    for (int k = 1; k < 8; ++k) s += part_[k][threadIdx.x];
    if (S == 1) out[col] = vtl_st((A)s);
    else part[slab * N + col] = s;
  }
""")


COL_SUM = _col_sum_spec("vtl_col_sum", "const T* __restrict__",
                        "vtl_ld(g[m * sgm + col * sgn])")
#: :data:`COL_SUM` of values already in the compute type ``A`` (float32 products of 16-bit
#: data), rounded once into ``T``
COL_SUM_WIDE = _col_sum_spec("vtl_col_sum_wide", "const A* __restrict__",
                             "g[m * sgm + col * sgn]")

#: ``out[j] = sum_s part[s * N + j]`` in slab order (the second launch of :data:`COL_SUM`)
COL_SUM_FINISH = Spec("vtl_col_sum_finish", (
    ("const double* __restrict__", "part"), ("T* __restrict__", "out"), ("const long long", "N"),
    ("const long long", "S")), r"""
  const long long col = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (col < N) {
    double s = part[col];
    for (long long k = 1; k < S; ++k) s += part[k * N + col];
    out[col] = vtl_st((A)s);
  }
""")

#: ``out[i] = x[i] <= 0 ? 0 : g[i]`` over contiguous arrays (nan in ``x`` passes ``g``; the
#: stored ``g`` is copied, never rounded)
RELU_BACKWARD = Spec("vtl_relu_backward", (
    ("const T* __restrict__", "x"), ("const T* __restrict__", "g"), ("T* __restrict__", "out"),
    ("const long long", "n")), r"""
  VTL_GRID_LOOP(i, n) {
    out[i] = vtl_ld(x[i]) <= (A)0 ? (T)0 : g[i];
  }
""")

#: :data:`RELU_BACKWARD` four floats at a time (float32, ``n4 = n / 4``, 16-byte aligned
#: operands): a vector load moves four times the bytes per thread, which a memory-bound
#: kernel needs to approach the device's bandwidth
RELU_BACKWARD4 = Spec("vtl_relu_backward4", (
    ("const float4* __restrict__", "x"), ("const float4* __restrict__", "g"),
    ("float4* __restrict__", "out"), ("const long long", "n4")), r"""
  VTL_GRID_LOOP(i, n4) {
    const float4 a = x[i], b = g[i];
    float4 o;
    o.x = a.x <= 0.f ? 0.f : b.x;
    o.y = a.y <= 0.f ? 0.f : b.y;
    o.z = a.z <= 0.f ? 0.f : b.z;
    o.w = a.w <= 0.f ? 0.f : b.w;
    out[i] = o;
  }
""")


#: ``out[n, c, p] += b[c]`` over a contiguous float32 ``out`` of ``n4 * 4`` elements, ``C``
#: channels of ``P4 * 4`` elements each (``P4 * C * N < 2**31``): four elements a thread,
#: the channel by one 32-bit division per four
CHANNEL_BIAS4 = Spec("vtl_channel_bias4", (
    ("float4* __restrict__", "out"), ("const float* __restrict__", "b"), ("const int", "P4"),
    ("const int", "C"), ("const long long", "n4")), r"""
  VTL_GRID_LOOP(i, n4) {
    const float bv = b[((unsigned)i / (unsigned)P4) % (unsigned)C];
    float4 v = out[i];
    v.x += bv;
    v.y += bv;
    v.z += bv;
    v.w += bv;
    out[i] = v;
  }
""")


def channel_bias_(kernels: Any, y: Any, b: Any) -> bool:
    """``y += b.reshape(1, C, 1, ...)`` for a contiguous float32 ``y`` of shape ``(N, C,
    ...)`` through :data:`CHANNEL_BIAS4` where it applies (whole float4 per channel run,
    aligned, fewer than 2**31 elements); ``False`` where it does not (nothing done).

    Args:
        kernels: The :class:`_Kernels` that compiles it.
        y: The output, updated in place.
        b: The ``(C,)`` bias.

    Returns:
        Whether the kernel ran.
    """
    c = y.shape[1] if y.ndim >= 2 else 0
    per = y.size // (y.shape[0] * c) if c and y.shape[0] else 0
    if not (per and per % 4 == 0 and y.size < 2**31 and y.flags.c_contiguous
            and b.shape == (c,) and b.dtype == y.dtype and b.flags.c_contiguous
            and vector4(y)):
        return False
    n4 = y.size // 4
    kernels.get(CHANNEL_BIAS4, y.dtype)((_blocks(n4),), (256,),
                                        (y, b, np.int32(per // 4), np.int32(c), _I64(n4)))
    return True


#: :data:`RELU_BACKWARD` for float16/bfloat16, eight elements a thread (16-byte loads and
#: stores, ``n8 = n / 8``; the CuPy kernel of 2-byte elements moved about 1 TB/s on the
#: H100): ``x <= 0`` is read from the bits (a zero of either sign, or the sign bit set on
#: anything but a nan, ``em`` being the dtype's exponent mask) and ``g`` copied
RELU_BACKWARD8H = Spec("vtl_relu_backward8h", (
    ("const uint4* __restrict__", "x"), ("const uint4* __restrict__", "g"),
    ("uint4* __restrict__", "out"), ("const long long", "n8"), ("const int", "em")), r"""
  const unsigned mask = (unsigned)em;
  auto pick = [mask](unsigned a, unsigned b) {
    unsigned r = 0u;
    for (int h = 0; h < 32; h += 16) {
      const unsigned u = (a >> h) & 0xffffu, mag = u & 0x7fffu;
      const bool le0 = mag == 0u || ((u & 0x8000u) && mag <= mask);
      r |= (le0 ? 0u : (b >> h) & 0xffffu) << h;
    }
    return r;
  };
  VTL_GRID_LOOP(i, n8) {
    const uint4 a = x[i], b = g[i];
    uint4 o;
    o.x = pick(a.x, b.x);
    o.y = pick(a.y, b.y);
    o.z = pick(a.z, b.z);
    o.w = pick(a.w, b.w);
    out[i] = o;
  }
""")
#: the exponent mask of each 16-bit float's bits (:data:`RELU_BACKWARD8H`)
_EXP_MASK = {np.dtype(float16): 0x7C00, np.dtype(bfloat16): 0x7F80}

#: ``out = maximum(x, 0)`` (nan stays nan, -0.0 gives +0.0) over ``n4`` float4 of float32
RELU4 = Spec("vtl_relu4", (
    ("const float4* __restrict__", "x"), ("float4* __restrict__", "out"),
    ("const long long", "n4")), r"""
  VTL_GRID_LOOP(i, n4) {
    const float4 a = x[i];
    float4 o;
    o.x = a.x > 0.f || a.x != a.x ? a.x : 0.f;
    o.y = a.y > 0.f || a.y != a.y ? a.y : 0.f;
    o.z = a.z > 0.f || a.z != a.z ? a.z : 0.f;
    o.w = a.w > 0.f || a.w != a.w ? a.w : 0.f;
    out[i] = o;
  }
""")


def address(a: Any) -> int:
    """The address of the first element of a CuPy array (or of a NumPy one, the host
    builds' stand-in)."""
    return a.ctypes.data if isinstance(a, np.ndarray) else a.data.ptr


def aligned(*arrays: Any, per: int, nbytes: int = 16) -> bool:
    """Whether contiguous ``arrays`` can be read ``per`` elements (``nbytes`` bytes) at a
    time: sizes divisible by ``per`` and data aligned to ``nbytes`` (CuPy's pool aligns
    allocations; a view may start anywhere)."""
    return all(a.size % per == 0 and address(a) % nbytes == 0 for a in arrays)


def vector4(*arrays: Any) -> bool:
    """Whether contiguous float32 ``arrays`` of one size can be read as ``float4``."""
    return all(a.dtype == np.float32 for a in arrays) and aligned(*arrays, per=4)


_CE_PARAMS = (
    ("const T* __restrict__", "x"), ("const TI* __restrict__", "t"),
    ("T* __restrict__", "out"), ("A* __restrict__", "saved"),
    ("long long* __restrict__", "err"), ("const long long", "M"), ("const long long", "C"),
    ("const long long", "sxm"), ("const long long", "sxc"), ("const long long", "st"),
    ("const int", "mode"), ("const int", "phase"), ("const int", "has_ignore"),
    ("const long long", "ignore"))

#: Cross-entropy of logit rows ``x[m * sxm + c * sxc]`` against targets ``t[m * st]``, as
#: the portable log_softmax/nll_loss: ``sh = max(x)`` (nan-propagating; 0 when not finite),
#: ``s = sum(exp(x - sh))``, ``loss = -((x[t] - sh) - log(s))``, 0 where ``t == ignore``
#: (``has_ignore``), nan for a target outside ``[0, C)``. ``saved[2m] = sh``,
#: ``saved[2m + 1] = s`` (for the gradient), ``saved[2M]`` = the number of targets not
#: ignored, ``saved[2M + 1 + m]`` = the row losses of a reduced mode (``saved`` holds
#: ``A``: float32 for 16-bit logits). ``mode`` 0: row losses into ``out[m]``; 1: their
#: sum, 2: their mean into ``out[0]`` (in double, in a fixed order). Phase 0: one warp per
#: row (blocks of 256 threads); a single block goes on with phase 1 itself, else a second
#: launch (phase 1, one block) does it: the sum, the count and the first bad target,
#: recorded in ``err = [flag, target, C]`` unless a previous call's error is still there.
CROSS_ENTROPY = Spec("vtl_cross_entropy", _CE_PARAMS, r"""
  const int tid = threadIdx.x;
  if (phase == 0) {
    const int lane = tid & 31;
    const long long nwarps = ((long long)gridDim.x * blockDim.x) >> 5;
    for (long long m = ((long long)blockIdx.x * blockDim.x + tid) >> 5; m < M; m += nwarps) {
      const T* xr = x + m * sxm;
      const long long tv = (long long)t[m * st];  // loaded early: its latency overlaps
      A sh, s;
      vtl_row_stats(xr, C, sxc, lane, sh, s);
      if (lane == 0) {
        saved[2 * m] = sh;
        saved[2 * m + 1] = s;
        A loss = 0;
        if (!(has_ignore && tv == ignore)) {
          loss = (tv >= 0 && tv < C) ? -((vtl_ld(xr[tv * sxc]) - sh) - vtl_log(s))
                                     : vtl_nan((A)0);
        }
        if (mode == 0) {
          out[m] = vtl_st(loss);
        } else {
          saved[2 * M + 1 + m] = loss;
        }
      }
    }
    if (gridDim.x > 1) return;
    __syncthreads();
  }
  __shared__ double s_sum[256];
  __shared__ long long s_cnt[256];
  __shared__ long long s_bad[256];
  double acc = 0;
  long long cnt = 0;
  long long bad = M;
  for (long long m = tid; m < M; m += blockDim.x) {
    const long long tv = (long long)t[m * st];
    if (has_ignore && tv == ignore) continue;
    ++cnt;
    if ((tv < 0 || tv >= C) && m < bad) bad = m;
    if (mode != 0) acc += (double)saved[2 * M + 1 + m];
  }
  s_sum[tid] = acc;
  s_cnt[tid] = cnt;
  s_bad[tid] = bad;
  __syncthreads();
  for (int h = 128; h > 0; h >>= 1) {
    if (tid < h) {
      s_sum[tid] += s_sum[tid + h];
      s_cnt[tid] += s_cnt[tid + h];
      if (s_bad[tid + h] < s_bad[tid]) s_bad[tid] = s_bad[tid + h];
    }
    __syncthreads();
  }
  if (tid == 0) {
    const long long first = s_bad[0];
    if (first < M && err[0] == 0) {
      err[1] = (long long)t[first * st];
      err[2] = C;
      err[0] = 1;
    }
    if (mode != 0) {
      const double total = s_sum[0];
      out[0] = vtl_st((A)(mode == 2 ? total / (double)s_cnt[0] : total));
      saved[2 * M] = (A)s_cnt[0];
    }
  }
""")

#: softmax/log_softmax of contiguous (M, N) rows and their gradients, one warp per row
#: (blocks of 256 threads, a grid-stride loop over the rows), computed in ``A``. ``mode`` 0:
#: ``exp(x - sh) / s``; 1: ``(x - sh) - log(s)``, with ``sh`` the row's maximum
#: (nan-propagating; 0 when not finite) and ``s = sum(exp(x - sh))``, the portable
#: formulas; 2: ``y (g - sum(g y))`` from softmax's output ``y = x``; 3: ``g - exp(y)
#: sum(g)`` from log_softmax's.
SOFTMAX = Spec("vtl_softmax", (
    ("const T* __restrict__", "x"), ("const T* __restrict__", "g"),
    ("T* __restrict__", "out"), ("const long long", "M"), ("const long long", "N"),
    ("const int", "mode")), r"""
  const unsigned FULL = 0xffffffffu;
  const int lane = threadIdx.x & 31;
  const long long nwarps = ((long long)gridDim.x * blockDim.x) >> 5;
  for (long long m = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5; m < M;
       m += nwarps) {
    const T* xr = x + m * N;
    T* yr = out + m * N;
    if (mode >= 2) {
      const T* gr = g + m * N;
      A t = 0;
      for (long long c = lane; c < N; c += 32) {
        const A gv = vtl_ld(gr[c]);
        t += mode == 2 ? gv * vtl_ld(xr[c]) : gv;
      }
      for (int o = 16; o > 0; o >>= 1) t += __shfl_down_sync(FULL, t, o);
      t = __shfl_sync(FULL, t, 0);
      for (long long c = lane; c < N; c += 32) {
        const A y = vtl_ld(xr[c]);
        const A gv = vtl_ld(gr[c]);
        yr[c] = vtl_st(mode == 2 ? y * (gv - t) : gv - vtl_exp(y) * t);
      }
      continue;
    }
    A sh, s;
    vtl_row_stats(xr, N, 1, lane, sh, s);
    const A ls = vtl_log(s);
    for (long long c = lane; c < N; c += 32) {
      const A z = vtl_ld(xr[c]) - sh;
      yr[c] = vtl_st(mode == 1 ? z - ls : vtl_exp(z) / s);
    }
  }
""")

#: Gradient of ``vtl_cross_entropy`` with respect to the logits, contiguous (M, C):
#: ``g_m * (exp(x - sh_m) / s_m - [c == t_m])``, divided by ``saved[2M]`` for the mean,
#: 0 where ignored, nan for a bad target; ``g_m = g[m * sg]`` (``sg = 0``: one value).
CROSS_ENTROPY_GRAD = Spec("vtl_cross_entropy_grad", (
    ("const T* __restrict__", "x"), ("const TI* __restrict__", "t"),
    ("const A* __restrict__", "saved"), ("const T* __restrict__", "g"),
    ("T* __restrict__", "out"), ("const long long", "M"), ("const long long", "C"),
    ("const long long", "sxm"), ("const long long", "sxc"), ("const long long", "st"),
    ("const long long", "sg"), ("const int", "mode"), ("const int", "has_ignore"),
    ("const long long", "ignore")), r"""
  const long long total = M * C;
  VTL_GRID_LOOP(i, total) {
    const long long m = i / C;
    const long long c = i - m * C;
    const long long tv = (long long)t[m * st];
    A r = 0;
    if (!(has_ignore && tv == ignore)) {
      if (tv >= 0 && tv < C) {
        A gm = vtl_ld(g[m * sg]);
        if (mode == 2) gm = gm / saved[2 * M];
        const A p = vtl_exp(vtl_ld(x[m * sxm + c * sxc]) - saved[2 * m]) / saved[2 * m + 1];
        r = (p - (tv == c ? (A)1 : (A)0)) * gm;
      } else {
        r = vtl_nan((A)0);
      }
    }
    out[i] = vtl_st(r);
  }
""")

#: layer_norm of the contiguous rows of ``x`` (M, N), a warp per row (blocks of 256
#: threads: eight rows): the mean, then the variance of the deviations (shuffle sums in
#: ``A``), ``y = (x - mu) r w + b`` (``flags`` 1: ``w``, 2: ``b``; 4: rms_norm, ``mu = 0``)
#: and ``stats[2 row] = mu``,
#: ``stats[2 row + 1] = r = 1 / sqrt(var + eps)`` (in ``A``)
LAYER_NORM_FWD = Spec("vtl_layer_norm_fwd", (
    ("const T* __restrict__", "x"), ("const T* __restrict__", "w"),
    ("const T* __restrict__", "b"), ("T* __restrict__", "y"), ("A* __restrict__", "stats"),
    ("const long long", "M"), ("const int", "N"), ("const A", "eps"), ("const int", "flags")),
    r"""
  const long long row = (long long)blockIdx.x * 8 + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= M) return;
  const T* xr = x + row * N;
  A mu = 0;
  if (!(flags & 4)) {
    A s = 0;
    for (int j = lane; j < N; j += 32) s += vtl_ld(xr[j]);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    mu = s / N;
  }
  A q = 0;
  for (int j = lane; j < N; j += 32) { const A d = vtl_ld(xr[j]) - mu; q += d * d; }
  for (int o = 16; o > 0; o >>= 1) q += __shfl_xor_sync(0xffffffffu, q, o);
  const A r = (A)1 / sqrt(q / N + eps);
  T* yr = y + row * N;
  for (int j = lane; j < N; j += 32) {
    A v = (vtl_ld(xr[j]) - mu) * r;
    if (flags & 1) v *= vtl_ld(w[j]);
    if (flags & 2) v += vtl_ld(b[j]);
    yr[j] = vtl_st(v);
  }
  if (lane == 0) { stats[2 * row] = mu; stats[2 * row + 1] = r; }
""")

#: the layer_norm gradient of the rows ``[blockIdx.x R, (blockIdx.x + 1) R)``: (``flags`` 8) a
#: warp per row, ``dx = r (gw - mean(gw) - xh mean(gw xh))`` with ``xh = (x - mu) r``,
#: ``gw = g w`` (``flags`` 1) or ``g`` (``flags`` 4: rms_norm's, without ``mean(gw)``); then a
#: thread per column, the block's partial sums in double of ``g xh`` (``flags`` 16: the
#: weight gradient's, the products in ``A``) and of ``g`` (``flags`` 32: the bias
#: gradient's) into rows ``2 blockIdx.x`` and ``2 blockIdx.x + 1`` of ``part`` (2P, N),
#: summed by :data:`LAYER_NORM_PARAMS`. The rows of a block are read twice, the second
#: time mostly from cache, and no (M, N) temporary is written.
LAYER_NORM_BWD = Spec("vtl_layer_norm_bwd", (
    ("const T* __restrict__", "x"), ("const T* __restrict__", "w"),
    ("const A* __restrict__", "stats"), ("const T* __restrict__", "g"),
    ("T* __restrict__", "dx"), ("double* __restrict__", "part"), ("const long long", "M"),
    ("const int", "N"), ("const long long", "R"), ("const int", "flags")), r"""
  const long long r0 = (long long)blockIdx.x * R;
  const long long r1 = r0 + R < M ? r0 + R : M;
  const int lane = threadIdx.x & 31;
  if (flags & 8) {
    for (long long row = r0 + (threadIdx.x >> 5); row < r1; row += blockDim.x >> 5) {
      const T* xr = x + row * N;
      const T* gr = g + row * N;
      const A mu = stats[2 * row], r = stats[2 * row + 1];
      A c1 = 0, c2 = 0;
      for (int j = lane; j < N; j += 32) {
        const A xh = (vtl_ld(xr[j]) - mu) * r;
        const A gv = vtl_ld(gr[j]);
        const A gw = (flags & 1) ? gv * vtl_ld(w[j]) : gv;
        c1 += gw;
        c2 += gw * xh;
      }
      for (int o = 16; o > 0; o >>= 1) {
        c1 += __shfl_xor_sync(0xffffffffu, c1, o);
        c2 += __shfl_xor_sync(0xffffffffu, c2, o);
      }
      c1 = (flags & 4) ? (A)0 : c1 / N;  /* rms_norm: no mean(gw) term */
      c2 /= N;
      for (int j = lane; j < N; j += 32) {
        const A xh = (vtl_ld(xr[j]) - mu) * r;
        const A gv = vtl_ld(gr[j]);
        const A gw = (flags & 1) ? gv * vtl_ld(w[j]) : gv;
        dx[row * N + j] = vtl_st(r * (gw - c1 - xh * c2));
      }
    }
  }
  if (flags & 48) {
    double* pw = part + 2 * (long long)blockIdx.x * N;
    for (int c = threadIdx.x; c < N; c += blockDim.x) {
      double sw = 0, sb = 0;
      for (long long row = r0; row < r1; ++row) {
        const A gv = vtl_ld(g[row * N + c]);
        if (flags & 16) sw += (double)(gv * ((vtl_ld(x[row * N + c]) - stats[2 * row])
                                             * stats[2 * row + 1]));
        sb += (double)gv;
      }
      if (flags & 16) pw[c] = sw;
      if (flags & 32) pw[N + c] = sb;
    }
  }
""")

#: the weight and bias gradients of layer_norm from the ``P`` blocks' partial sums of
#: :data:`LAYER_NORM_BWD` (``flags`` 16: ``dw``, 32: ``db``): blocks of 32 columns x 8
#: slices, slice ``s`` summing the partials ``s, s + 8, ...`` in double, then the slices
#: in order (a fixed order: deterministic), rounded once
LAYER_NORM_PARAMS = Spec("vtl_layer_norm_params", (
    ("const double* __restrict__", "part"), ("T* __restrict__", "dw"), ("T* __restrict__", "db"),
    ("const long long", "P"), ("const int", "N"), ("const int", "flags")), r"""
  __shared__ double acc[2][8][32];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int c = blockIdx.x * 32 + tx;
  double sw = 0, sb = 0;
  if (c < N) {
    for (long long p = ty; p < P; p += 8) {
      sw += part[2 * p * N + c];
      sb += part[(2 * p + 1) * N + c];
    }
  }
  acc[0][ty][tx] = sw;
  acc[1][ty][tx] = sb;
  __syncthreads();
  if (ty == 0 && c < N) {
    for (int k = 1; k < 8; ++k) { sw += acc[0][k][tx]; sb += acc[1][k][tx]; }
    if (flags & 16) dw[c] = vtl_st((A)sw);
    if (flags & 32) db[c] = vtl_st((A)sb);
  }
""")

#: the bodies of the GELU kernels (``y`` from ``x``, and ``g``), by (direction, form): plain C++
#: apart from CUDA's overloaded math functions, so the tests compile them on the host too
GELU_BODIES = {
    ("fwd", "none"): "y = x * ((T)0.5 * erfc(-x * (T)0.70710678118654752440));",
    ("fwd", "tanh"): ("y = (T)0.5 * x * ((T)1 + tanh((T)0.79788456080286535588 * "
                      "(x + (T)0.044715 * x * x * x)));"),
    ("bwd", "none"): ("y = g * ((T)0.5 * erfc(-x * (T)0.70710678118654752440) "
                      "+ x * exp((T)-0.5 * x * x) * (T)0.39894228040143267794);"),
    ("bwd", "tanh"): ("const T t = tanh((T)0.79788456080286535588 * "
                      "(x + (T)0.044715 * x * x * x)); "
                      "const T du = (T)0.79788456080286535588 * ((T)1 + (T)0.134145 * x * x); "
                      "y = g * ((T)0.5 * ((T)1 + t) + (T)0.5 * x * ((T)1 - t * t) * du);"),
}


#: the bodies of the SiLU kernels (``y`` from ``x``, and ``g``), by direction: ``x s`` and
#: ``g s (1 + x (1 - s))`` with ``s = 1 / (1 + exp(-x))`` (0 for large negative ``x``)
SILU_BODIES = {
    "fwd": "y = x / ((T)1 + exp(-x));",
    "bwd": "const T s = (T)1 / ((T)1 + exp(-x)); y = g * s * ((T)1 + x * ((T)1 - s));",
}


def _activation_spec(name: str, which: str, body: str) -> Spec:
    """An elementwise activation kernel ``name`` over ``n`` contiguous elements as a
    :class:`Spec`: ``body`` (a ``"bwd"`` one also reads ``g``) computed in ``A`` (float32
    for float16 and bfloat16)."""
    ins = (("const T* __restrict__", "X"),) + (
        (("const T* __restrict__", "G"),) if which == "bwd" else ())
    load_g = "    const A g = vtl_ld(G[i]);\n" if which == "bwd" else ""
    body = re.sub(r"\bT\b", "A", body)
    return Spec(name, (*ins, ("T* __restrict__", "Y"), ("const long long", "n")), rf"""
  VTL_GRID_LOOP(i, n) {{
    const A x = vtl_ld(X[i]);
{load_g}    A y;
    {body}
    Y[i] = vtl_st(y);
  }}
""")


#: the GELU kernels of float16 and bfloat16 arrays, by (direction, form)
GELU_SPECS = {(w, f): _activation_spec(f"vtl_gelu_{w}_{f}", w, body)
              for (w, f), body in GELU_BODIES.items()}
#: the SiLU kernels of float16 and bfloat16 arrays, by direction
SILU_SPECS = {w: _activation_spec(f"vtl_silu_{w}", w, body) for w, body in SILU_BODIES.items()}

SPECS = (BIAS_ADD, COL_SUM, COL_SUM_WIDE, COL_SUM_FINISH, RELU_BACKWARD, CROSS_ENTROPY,
         CROSS_ENTROPY_GRAD, LAYER_NORM_FWD, LAYER_NORM_BWD, LAYER_NORM_PARAMS,
         *GELU_SPECS.values(),
         *SILU_SPECS.values(), SOFTMAX)

#: largest M * C and M whose cross-entropy (rows and reduction) runs in one block, one
#: launch (eight warps, each a row at a time: at most 64 rows per warp)
CE_ONE_BLOCK = 1 << 16
CE_ONE_BLOCK_ROWS = 512
#: column sums: rows per slab of ``vtl_col_sum`` (one slab, one launch, up to twice this), and
#: the number of blocks aimed at when there are more (enough to fill the GPU)
COL_SUM_SLAB_ROWS = 256
COL_SUM_BLOCKS = 512
_CE_MODES = {"none": 0, "sum": 1, "mean": 2}


def _blocks(n: int, per: int = 256, cap: int = 1 << 16) -> int:
    return max(1, min(-(-n // per), cap))


def _bias_grid(rows: int, cols: int) -> tuple[int, int]:
    """The grid of :data:`BIAS_ADD` over ``(rows, cols)``: blocks of 256 columns, and
    enough row phases to fill the GPU (each thread adds its column's bias down its rows)."""
    gx = -(-cols // 256)
    return gx, max(1, min(rows, 65535, -(-8192 // gx)))


def slices_per_row(rows: int, n: int, min_per_slice: int, target_blocks: int) -> int:
    """Blocks per row of ``n`` elements for a reduction whose ``rows`` alone may not fill the
    device: enough for ``target_blocks`` in all, each slice at least ``min_per_slice``
    elements long (one block per row at the least)."""
    return max(1, min(n // min_per_slice, -(-target_blocks // rows), 65535))


def _elem_strides(a: Any) -> tuple[int, ...] | None:
    """Strides of ``a`` in elements, or ``None`` when one is not a whole element."""
    isz = a.itemsize
    out = []
    for s in a.strides:
        if s % isz:
            return None
        out.append(s // isz)
    return tuple(out)


def column_sums(kernels: Any, cupy: Any, g: Any, dtype: Any = None) -> tuple[Any, int] | None:
    """``(sum(g, axis=0), launches)`` of a 2-D ``g`` by :data:`COL_SUM` (and
    :data:`COL_SUM_FINISH` when the rows are split into slabs): summed in double in a fixed
    order and rounded once, so deterministic; ``None`` when a stride is not a whole
    element. ``dtype``: a 16-bit result of float32 ``g`` (:data:`COL_SUM_WIDE`)."""
    out_dt = g.dtype if dtype is None else np.dtype(dtype)
    spec = COL_SUM if out_dt == g.dtype else COL_SUM_WIDE
    m, n = g.shape
    st = _elem_strides(g)
    if st is None:
        return None
    nbx = -(-n // 32)
    slabs = 1
    if m > 2 * COL_SUM_SLAB_ROWS:
        slabs = max(1, min(-(-COL_SUM_BLOCKS // nbx), -(-m // COL_SUM_SLAB_ROWS)))
    out = cupy.empty((n,), dtype=out_dt)
    part = cupy.empty((slabs if slabs > 1 else 0, n), dtype=np.float64)
    kernels.get(spec, out_dt)((nbx * slabs,), (32, 8), (
        g, out, part, _I64(m), _I64(n), _I64(st[0]), _I64(st[1]), _I64(slabs)))
    if slabs == 1:
        return out, 1
    kernels.get(COL_SUM_FINISH, out_dt)((-(-n // 256),), (256,), (part, out, _I64(n),
                                                                   _I64(slabs)))
    return out, 2


def _sum_rounded_once(cupy: Any, g: Any) -> Any:
    """``sum(g, axis=0)`` by CuPy (16-bit: summed in float32, rounded once)."""
    if g.dtype in CTYPES:
        return cupy.sum(g, axis=0)
    return cupy.sum(g.astype(_F32), axis=0).astype(g.dtype)


class _Kernels:
    """RawKernels compiled once per (spec, float type, target type)."""

    def __init__(self, cupy: Any) -> None:
        self._cp = cupy
        self._compiled: dict[tuple, Any] = {}

    def get(self, spec: Spec, dtype: Any, tdtype: Any = None) -> Any:
        key = (spec.name, dtype, tdtype)
        k = self._compiled.get(key)
        if k is None:
            src = cuda_source(spec, FLOAT_NAMES[np.dtype(dtype)],
                              _TCTYPES[np.dtype(tdtype)] if tdtype is not None else "int")
            k = self._compiled[key] = self._cp.RawKernel(src, spec.name)
        return k


class CupyNN:
    """``linear``, ``linear_grad_weight`` and ``relu_backward`` (bound methods are the
    registered kernels); ``launches`` counts the launches they made. float16/bfloat16: the
    products are the ``matmul`` given (float32 compute), the bias is added in float32 and
    rounded once, bias gradients are summed in double and rounded once."""

    #: the CUDA device of an array (a context manager with ``id``)
    _device_of = staticmethod(lambda a: a.device)

    def __init__(self, cupy: Any, matmul: Any = None) -> None:
        self._cp = cupy
        self._mm = cupy.dot if matmul is None else matmul  # 2-D float ``a @ b``
        self._k = _Kernels(cupy)
        self._relu_strided: Any = None
        self.launches = 0

    def _ok2(self, *xs: Any) -> bool:
        nd = self._cp.ndarray
        x0 = xs[0]
        return all(type(x) is nd and x.ndim == 2 and x.dtype == x0.dtype for x in xs) \
            and x0.dtype in FLOAT_NAMES

    def linear(self, x: Any, w: Any, b: Any, relu: bool = False) -> Any:
        """``x @ w.T + b`` for 2-D ``x`` (M, in), ``w`` (out, in), ``b`` (out,) or None;
        with ``relu``, ``maximum(x @ w.T + b, 0)`` (in the bias's launch)."""
        if not self._ok2(x, w) or x.shape[1] != w.shape[1] or 0 in x.shape or 0 in w.shape:
            return None
        if b is not None and (type(b) is not self._cp.ndarray or b.dtype != x.dtype
                              or b.shape != (w.shape[0],) or b.strides[0] % b.itemsize):
            return None
        cp = self._cp
        with self._device_of(x):
            out = self._mm(x, w.T)
            self.launches += 1
            if b is None:
                if relu:
                    cp.maximum(out, 0, out=out)
                    self.launches += 1
                return out
            if not out.flags.c_contiguous:
                out = cp.ascontiguousarray(out)
            total = out.size
            self._k.get(BIAS_ADD, x.dtype)(
                _bias_grid(*out.shape), (256,),
                (out, b, _I64(b.strides[0] // b.itemsize), _I64(out.shape[1]), _I64(total),
                 np.int32(relu)))
            self.launches += 1
        return out

    def linear_grad_weight(self, g: Any, x: Any, bias: bool) -> Any:
        """``(g.T @ x, sum(g, axis=0) if bias else None)`` for 2-D ``g`` (M, out) and
        ``x`` (M, in)."""
        if not self._ok2(g, x) or g.shape[0] != x.shape[0] or 0 in g.shape or 0 in x.shape:
            return None
        cp = self._cp
        with self._device_of(g):
            gw = self._mm(g.T, x)
            self.launches += 1
            if not bias:
                return gw, None
            summed = column_sums(self._k, cp, g)
            if summed is None:
                gb = _sum_rounded_once(cp, g)
                self.launches += 1
            else:
                gb, launches = summed
                self.launches += launches
        return gw, gb

    def relu(self, x: Any) -> Any:
        """``maximum(x, 0)`` four float32 elements a thread (:data:`RELU4`) where ``x`` is
        contiguous, aligned and whole float4s; ``None`` otherwise (CuPy's ``maximum``)."""
        cp = self._cp
        if type(x) is not cp.ndarray or x.dtype != np.float32 or not x.flags.c_contiguous \
                or not x.size or not vector4(x):
            return None
        with self._device_of(x):
            out = cp.empty(x.shape, dtype=x.dtype)
            n4 = x.size // 4
            self._k.get(RELU4, x.dtype)((_blocks(n4),), (256,), (x, out, _I64(n4)))
            self.launches += 1
            return out

    def relu_backward(self, x: Any, g: Any) -> Any:
        """``where(x <= 0, 0, g)`` (relu's gradient; nan in ``x`` passes ``g`` through)."""
        cp = self._cp
        if (type(x) is not cp.ndarray or type(g) is not cp.ndarray or x.shape != g.shape
                or x.dtype != g.dtype or x.dtype not in FLOAT_NAMES):
            return None
        with self._device_of(x):
            shape = x.shape
            if x.dtype not in CTYPES:  # 16-bit: the contiguous kernel (strided: copies)
                x = cp.ascontiguousarray(x)
                g = cp.ascontiguousarray(g)
            if x.flags.c_contiguous and g.flags.c_contiguous:
                out = cp.empty(shape, dtype=x.dtype)
                n = x.size
                if n and vector4(x, g, out):
                    self._k.get(RELU_BACKWARD4, x.dtype)((_blocks(n // 4),), (256,),
                                                         (x, g, out, _I64(n // 4)))
                    self.launches += 1
                elif n and x.dtype in _EXP_MASK and aligned(x, g, out, per=8):
                    self._k.get(RELU_BACKWARD8H, x.dtype)(
                        (_blocks(n // 8),), (256,),
                        (x, g, out, _I64(n // 8), _I32(_EXP_MASK[x.dtype])))
                    self.launches += 1
                elif n:
                    self._k.get(RELU_BACKWARD, x.dtype)((_blocks(n),), (256,),
                                                        (x, g, out, _I64(n)))
                    self.launches += 1
                return out
            if self._relu_strided is None:
                self._relu_strided = cp.ElementwiseKernel(
                    "T x, T g", "T out", "out = x <= (T)0 ? (T)0 : g", "vtl_relu_backward_nd")
            self.launches += 1
            return self._relu_strided(x, g)


# -- known value ranges of uploaded integer arrays -----------------------------------------------

_KNOWN: dict[int, tuple[Any, tuple[int, int, int | None]]] = {}


def _forget(key: int, ref: Any) -> None:
    hit = _KNOWN.get(key)
    if hit is not None and hit[0] is ref:
        del _KNOWN[key]


def note_upload(raw: Any, host: np.ndarray) -> None:
    """Record the value range of the integer array ``raw`` just copied from ``host``
    (a heuristic only: the range is not updated when ``raw`` is written in place)."""
    n = host.size
    if not 0 < n <= KNOWN_MAX:
        return
    key = id(raw)
    try:
        ref = weakref.ref(raw, lambda r, k=key: _forget(k, r))
    except TypeError:
        return
    _KNOWN[key] = (ref, value_range(host))


def known_range(raw: Any) -> tuple[int, int, int | None] | None:
    """``(lo, hi, lo2)`` recorded at the upload of ``raw`` (``lo2``: the smallest value
    above a negative ``lo``), or ``None``."""
    hit = _KNOWN.get(id(raw))
    if hit is None or hit[0]() is not raw:
        return None
    return hit[1]


class CupyCrossEntropy:
    """``kernels["cross_entropy"]`` (the protocol of ``vtl/nn/functional/loss.py``):
    ``fwd(x, t, reduction, ignore_index)`` -> ``(loss, saved)``;
    ``grad(x, t, saved, g, reduction, ignore_index)`` -> the logits' gradient. ``x`` is
    (M, C) float32/float64/float16/bfloat16 with any strides, ``t`` (M,) integers up to 32
    bits or int64. The loss and the gradient have ``x``'s dtype; for 16-bit logits the
    arithmetic, the reduction's row losses and ``saved`` are float32 (wider for the sum).

    Bad targets are reported lazily (module docstring), per thread: ``pending`` says
    whether this thread's error buffers have calls since they were last read;
    :meth:`check_pending` reads them and raises."""

    _device_of = staticmethod(lambda a: a.device)

    def __init__(self, cupy: Any) -> None:
        self._cp = cupy
        self._k = _Kernels(cupy)
        self._errors = ErrorBuffers(cupy, 3)
        self.launches = 0

    @property
    def pending(self) -> set[int]:
        """The devices whose error buffer (of this thread) has calls since its last read."""
        return self._errors.pending

    def supports(self, x: Any, t: Any) -> bool:
        nd = self._cp.ndarray
        return (type(x) is nd and type(t) is nd and x.ndim == 2 and t.ndim == 1
                and x.dtype in FLOAT_NAMES and t.dtype in _TCTYPES
                and x.shape[0] == t.shape[0]
                and x.shape[0] > 0 and x.shape[1] > 0
                and self._device_of(x).id == self._device_of(t).id
                and _elem_strides(x) is not None and _elem_strides(t) is not None)

    @staticmethod
    def targets_valid(t: Any, c: int, ignore_index: int) -> bool | None:
        """``True`` when no host check is needed: the recorded range of uploaded targets
        shows them valid, or no range is known (the kernel checks on the device and the
        error is raised by the next host read); ``None`` when a recorded range shows a
        possibly bad target (the caller checks eagerly, naming the first one)."""
        kr = known_range(t)
        return True if kr is None or targets_in_range(kr, c, ignore_index) else None

    @staticmethod
    def _args(x: Any, t: Any, reduction: str, ignore_index: int) -> tuple:
        """What both kernels take: ``(mode, m, c, (m, c, x's and t's element strides),
        (has_ignore, ignore))``, the scalars as kernel arguments."""
        m, c = x.shape
        sxm, sxc = _elem_strides(x)
        (st,) = _elem_strides(t)
        if -(1 << 63) <= ignore_index < (1 << 63):
            ig = (_I32(1), _I64(ignore_index))
        else:
            ig = (_I32(0), _I64(0))
        return (_CE_MODES[reduction], m, c,
                (_I64(m), _I64(c), _I64(sxm), _I64(sxc), _I64(st)), ig)

    def fwd(self, x: Any, t: Any, reduction: str, ignore_index: int) -> tuple[Any, Any]:
        cp = self._cp
        mode, m, c, dims, ig = self._args(x, t, reduction, ignore_index)
        dev = self._device_of(x).id
        with self._device_of(x):
            err = self._errors.get(dev)
            out = cp.empty((m,) if mode == 0 else (), dtype=x.dtype)
            saved = cp.empty((3 * m + 1,), dtype=compute_dtype(x.dtype))
            kern = self._k.get(CROSS_ENTROPY, x.dtype, t.dtype)
            one = m * c <= CE_ONE_BLOCK and m <= CE_ONE_BLOCK_ROWS
            blocks = 1 if one else _blocks(m, 8, 1 << 13)
            base = (x, t, out, saved, err, *dims, _I32(mode))
            kern((blocks,), (256,), (*base, _I32(0), *ig))
            self.launches += 1
            if not one:
                kern((1,), (256,), (*base, _I32(1), *ig))
                self.launches += 1
        return out, saved

    def grad(self, x: Any, t: Any, saved: Any, g: Any, reduction: str,
             ignore_index: int) -> Any:
        cp = self._cp
        mode, m, c, dims, ig = self._args(x, t, reduction, ignore_index)
        with self._device_of(x):
            if g.dtype != x.dtype:
                g = g.astype(x.dtype)
            sg = _elem_strides(g)[0] if mode == 0 and g.ndim else 0
            out = cp.empty((m, c), dtype=x.dtype)
            self._k.get(CROSS_ENTROPY_GRAD, x.dtype, t.dtype)(
                (_blocks(m * c),), (256,),
                (x, t, saved, g, out, *dims, _I64(sg), _I32(mode), *ig))
            self.launches += 1
        return out

    def check_pending(self) -> None:
        """Read the error buffers of the devices with calls since the last check; raise
        ``IndexError`` (as the portable path) for the first bad target found."""
        found = self._errors.first_error()
        if found is not None:
            _, value, c = found
            raise IndexError(f"cross_entropy(): target {value} is out of bounds for {c} "
                             "classes")


#: layer_norm's backward: blocks of at least this many rows, and at most this many blocks
LN_BLOCK_ROWS = 8
LN_MAX_BLOCKS = 256


def _ln_blocks(m: int) -> tuple[int, int]:
    """``(blocks, rows per block)`` of layer_norm's backward over ``m`` rows (each block's
    column partial sums cost ``2 N`` doubles)."""
    return row_blocks(m, LN_BLOCK_ROWS, LN_MAX_BLOCKS)


class CupyLayerNorm:
    """``kernel("layer_norm")``: a warp per row each way (shuffle reductions, the mean and
    then the variance of the deviations: :data:`LAYER_NORM_FWD`, :data:`LAYER_NORM_BWD`;
    with ``rms=True`` rms_norm's rows, no centring); the backward's blocks also sum their
    rows' weight and bias gradient terms, which :data:`LAYER_NORM_PARAMS` adds up (two
    launches in all, no (M, N) temporary). float16/bfloat16 rows are computed in
    float32 and rounded once; their statistics ``mean``/``rstd`` are float32 (the contract's
    "float32 or wider"), and so are the products ``g * xhat`` summed for the weight
    gradient."""

    _device_of = staticmethod(lambda a: a.device)
    #: the device address of an array's first element
    _address = staticmethod(address)

    def __init__(self, cupy: Any) -> None:
        self._cp = cupy
        self._k = _Kernels(cupy)
        self.launches = 0

    #: forward and backward take ``rms=True`` (``LayerNormKernel``)
    takes_rms = True

    def supports(self, dtype: Any) -> bool:
        return np.dtype(dtype) in FLOAT_NAMES

    def forward(self, x: Any, w: Any, b: Any, eps: float, rms: bool = False) -> tuple | None:
        cp = self._cp
        if type(x) is not cp.ndarray or x.ndim != 2 or x.dtype not in FLOAT_NAMES \
                or 0 in x.shape or x.shape[1] >= 2**31:
            return None
        for p in (w, b):
            if p is not None and (type(p) is not cp.ndarray or p.dtype != x.dtype
                                  or p.shape != (x.shape[1],)):
                return None
        m, n = x.shape
        dt = x.dtype
        adt = compute_dtype(dt)
        with self._device_of(x):
            x = cp.ascontiguousarray(x)
            w = None if w is None else cp.ascontiguousarray(w)
            b = None if b is None else cp.ascontiguousarray(b)
            y = cp.empty((m, n), dtype=dt)
            stats = cp.empty((m, 2), dtype=adt)
            flags = (1 if w is not None else 0) | (2 if b is not None else 0) | (4 if rms else 0)
            self._k.get(LAYER_NORM_FWD, dt)((-(-m // 8),), (256,), (
                x, x if w is None else w, x if b is None else b, y, stats, _I64(m),
                _I32(n), adt.type(eps), _I32(flags)))
            self.launches += 1
        return y, stats[:, 0:1], stats[:, 1:2]

    def backward(self, x: Any, w: Any, mean: Any, rstd: Any, g: Any, need_x: bool,
                 need_w: bool, need_b: bool, rms: bool = False) -> tuple | None:
        cp = self._cp
        m, n = x.shape
        dt = x.dtype
        adt = compute_dtype(dt)
        base = mean.base
        if (base is None or rstd.base is not base or base.shape != (m, 2)
                or base.dtype != adt or self._address(mean) != self._address(base)
                or g.shape != (m, n) or (g.dtype != dt and dt in CTYPES)):
            return None  # not the statistics of forward()
        with self._device_of(x):
            if g.dtype != dt:  # 16-bit rows: their float32 statistics need this kernel
                g = g.astype(dt)
            x = cp.ascontiguousarray(x)
            g = cp.ascontiguousarray(g)
            w = None if w is None else cp.ascontiguousarray(w)
            dx = cp.empty((m, n), dtype=dt) if need_x else None
            blocks, rows = _ln_blocks(m)
            sums = (16 if need_w else 0) | (32 if need_b else 0)
            part = cp.empty((2 * blocks if sums else 0, n), dtype=np.float64)
            if need_x or sums:
                self._k.get(LAYER_NORM_BWD, dt)((blocks,), (256,), (
                    x, x if w is None else w, base, g, x if dx is None else dx, part, _I64(m),
                    _I32(n), _I64(rows), _I32((1 if w is not None else 0) | (4 if rms else 0)
                                              | (8 if need_x else 0) | sums)))
                self.launches += 1
            dw = cp.empty((n,), dtype=dt) if need_w else None
            db = cp.empty((n,), dtype=dt) if need_b else None
            if sums:
                self._k.get(LAYER_NORM_PARAMS, dt)((-(-n // 32),), (32, 8), (
                    part, x if dw is None else dw, x if db is None else db, _I64(blocks),
                    _I32(n), _I32(sums)))
                self.launches += 1
        return dx, dw, db


class _Elementwise:
    """An elementwise activation each way in one launch: an ``ElementwiseKernel`` of its
    ``_BODIES`` (any strides) for float32/float64, a kernel of its ``_SPECS`` over
    contiguous elements (computed in float32, rounded once) for float16/bfloat16; both
    keyed by ``(direction, form)``."""

    _BODIES: dict[tuple[str, str], str] = {}
    _SPECS: dict[tuple[str, str], Spec] = {}
    _device_of = staticmethod(lambda a: a.device)

    def __init__(self, cupy: Any) -> None:
        self._cp = cupy
        self._compiled: dict[tuple, Any] = {}
        self._k = _Kernels(cupy)
        self.launches = 0

    def supports(self, dtype: Any) -> bool:
        return np.dtype(dtype) in FLOAT_NAMES

    def _kernel(self, which: str, form: str) -> Any:
        k = self._compiled.get((which, form))
        if k is None:
            ins = "T x" if which == "fwd" else "T x, T g"
            k = self._compiled[(which, form)] = self._cp.ElementwiseKernel(
                ins, "T y", self._BODIES[(which, form)], self._SPECS[(which, form)].name)
        return k

    def _low(self, which: str, form: str, x: Any, g: Any = None) -> Any:
        """The float16/bfloat16 kernel on contiguous copies of the operands."""
        cp = self._cp
        with self._device_of(x):
            out = cp.empty(x.shape, dtype=x.dtype)
            x = cp.ascontiguousarray(x)  # (a 0-d array may come back 1-d)
            ins = (x,) if g is None else (x, cp.ascontiguousarray(g))
            n = x.size
            if n:
                self._k.get(self._SPECS[(which, form)], x.dtype)(
                    (_blocks(n),), (256,), (*ins, out, _I64(n)))
                self.launches += 1
        return out

    def _apply(self, which: str, form: str, x: Any, g: Any = None) -> Any:
        """The kernel of ``(which, form)`` on ``x`` (and ``g``); ``None`` for arrays it does
        not take."""
        cp = self._cp
        if type(x) is not cp.ndarray or x.dtype not in FLOAT_NAMES:
            return None
        if g is not None and (type(g) is not cp.ndarray or g.dtype != x.dtype
                              or g.shape != x.shape):
            return None
        if x.dtype not in CTYPES:
            return self._low(which, form, x, g)
        self.launches += 1
        k = self._kernel(which, form)
        return k(x) if g is None else k(x, g)


class CupyGelu(_Elementwise):
    """``kernel("gelu")``: one launch each way (:data:`GELU_BODIES`, :data:`GELU_SPECS`)."""

    _BODIES = GELU_BODIES
    _SPECS = GELU_SPECS

    def forward(self, x: Any, approximate: str) -> Any:
        return self._apply("fwd", approximate, x)

    def backward(self, x: Any, g: Any, approximate: str) -> Any:
        return self._apply("bwd", approximate, x, g)


class CupySilu(_Elementwise):
    """``kernel("silu")``: one launch each way (:data:`SILU_BODIES`, :data:`SILU_SPECS`)."""

    _BODIES = {(w, ""): b for w, b in SILU_BODIES.items()}
    _SPECS = {(w, ""): spec for w, spec in SILU_SPECS.items()}

    def forward(self, x: Any) -> Any:
        return self._apply("fwd", "", x)

    def backward(self, x: Any, g: Any) -> Any:
        return self._apply("bwd", "", x, g)


class KernelFamily:
    """A family of :class:`Spec` kernels on CuPy arrays of the four float dtypes: the
    RawKernels compiled once (``_k``) and a count of launches."""

    #: the CUDA device of an array (a context manager with ``id``)
    _device_of = staticmethod(lambda a: a.device)

    def __init__(self, cupy: Any) -> None:
        self._cp = cupy
        self._k = _Kernels(cupy)
        self.launches = 0

    def supports(self, dtype: Any) -> bool:
        return np.dtype(dtype) in FLOAT_NAMES


class CupySoftmax(KernelFamily):
    """``kernel("softmax")``: softmax/log_softmax over the last axis and their gradients,
    one launch each (:data:`SOFTMAX`, a warp per row), float32/float64 and float16/bfloat16
    rows computed in float32 and rounded once."""

    def _run(self, mode: int, x: Any, g: Any) -> Any:
        cp = self._cp
        if type(x) is not cp.ndarray or x.ndim == 0 or x.size == 0 \
                or x.dtype not in FLOAT_NAMES or (g is not None and (
                    type(g) is not cp.ndarray or g.dtype != x.dtype or g.shape != x.shape)):
            return None
        n = x.shape[-1]
        m = x.size // n
        with self._device_of(x):
            x = cp.ascontiguousarray(x)
            g = x if g is None else cp.ascontiguousarray(g)
            out = cp.empty(x.shape, dtype=x.dtype)
            blocks = min(-(-m // 8), 65535)  # eight rows (warps) a block
            self._k.get(SOFTMAX, x.dtype)((blocks,), (256,),
                                          (x, g, out, _I64(m), _I64(n), _I32(mode)))
            self.launches += 1
        return out

    def forward(self, x: Any, log: bool) -> Any:
        return self._run(1 if log else 0, x, None)

    def backward(self, y: Any, g: Any, log: bool) -> Any:
        return self._run(3 if log else 2, y, g)


#: ``g`` times the derivative of ``erf`` / ``erfc`` at ``x`` (``kernel("special").grad``)
SPECIAL_GRAD_BODIES = {
    "erf": "y = g * (T)(1.12837916709551257390 * exp(-(double)x * (double)x));",
    "erfc": "y = g * (T)(-1.12837916709551257390 * exp(-(double)x * (double)x));",
}


class CupySpecial:
    """``kernel("special")``: ``erf``, ``erfc`` and ``erfinv`` of float32/float64 arrays by
    ``cupyx.scipy.special`` (CUDA's functions, one launch), the gradients of ``erf`` and
    ``erfc`` one ``ElementwiseKernel`` launch each (:data:`SPECIAL_GRAD_BODIES`)."""

    _NAMES = frozenset({"erf", "erfc", "erfinv"})

    def __init__(self, cupy: Any) -> None:
        self._cp = cupy
        self._grads: dict[str, Any] = {}

    def supports(self, name: str, dtype: Any) -> bool:
        return name in self._NAMES and np.dtype(dtype) in CTYPES

    def _takes(self, *arrays: Any) -> bool:
        x = arrays[0]
        return all(type(a) is self._cp.ndarray and a.dtype in CTYPES and a.dtype == x.dtype
                   and a.shape == x.shape for a in arrays)

    def __call__(self, name: str, x: Any) -> Any:
        if name not in self._NAMES or not self._takes(x):
            return None
        import cupyx.scipy.special as special

        return getattr(special, name)(x)

    def grad(self, name: str, x: Any, g: Any) -> Any:
        if name not in SPECIAL_GRAD_BODIES or not self._takes(x, g):
            return None
        k = self._grads.get(name)
        if k is None:
            k = self._grads[name] = self._cp.ElementwiseKernel(
                "T x, T g", "T y", SPECIAL_GRAD_BODIES[name], f"vtl_{name}_grad")
        return k(x, g)


__all__ = ["CE_ONE_BLOCK", "FLOAT_NAMES", "FLOAT_TYPES", "GELU_BODIES", "GELU_SPECS",
           "SILU_BODIES", "SILU_SPECS", "SPECS", "CupyCrossEntropy", "CupyGelu",
           "CupyLayerNorm", "CupyNN", "CupySilu", "CupySoftmax", "CupySpecial", "KernelFamily",
           "SOFTMAX",
           "SPECIAL_GRAD_BODIES", "slices_per_row",
           "Spec", "compute_dtype",
           "PRELUDE", "cuda_source", "known_range", "note_upload"]
