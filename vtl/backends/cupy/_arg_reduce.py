"""``argmax``/``argmin`` of the cupy backend in one or two launches, with NumPy's answers.

NumPy returns the first index of the extreme; a nan is the extreme of any slice holding one
(its first nan wins); -0.0 and +0.0 are equal; the smallest subnormal is larger than zero.
CuPy's own float kernels flushed subnormals to zero on an H200, and the portable fix
(``vtl.backends._common.arg_reductions``: integer keys of the floats' bits, then a ``max``
and a ``min`` over ``where``) costs about nine launches. Here one kernel makes the same keys
in registers and keeps the best ``(key, index)`` pair per thread, then per block (ties go to
the smaller index, so the answer is the first extreme whatever the order of the folds):

* rows of at most :data:`THREAD_ROW` elements: a thread per row, one launch (``argmax`` of a
  batch of logits, as ``vtl.metrics.accuracy`` asks per training step);
* longer rows: ``S`` blocks of 256 threads per row, each writing its pair, and a second
  launch folding each row's ``S`` pairs (one block per row when the rows alone fill the
  device).

The reduced axis is moved last first (one copy, unless it is already last and the array
contiguous). Keys are ``long long``: a float's bits as a signed integer, negative values'
magnitude bits inverted (so the integers order as the floats do), -0.0 as +0.0, nan the
largest key; integers are their own keys; ``argmin`` takes the bitwise complement of the
keys (nan kept largest) and looks for the largest. The sources compile on the host too
(``tests/test_cupy_arg_reduce.py`` runs them under the CUDA emulation of the nn kernels'
tests).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .nn import slices_per_row

__all__ = ["ArgReduce", "THREAD_ROW", "arg_source", "key_body"]

#: rows up to this length take a thread each
THREAD_ROW = 128
#: threads per block, blocks the long-row kernel aims at, elements per block at least
_BLOCK = 256
_TARGET_BLOCKS = 1024
_MIN_PER_BLOCK = 4096

_LLMAX = "0x7fffffffffffffffLL"

#: dtype -> (the C type stored, the key computation from ``v``; ``largest`` in scope)
_FLOAT_KEYS = {
    "float32": ("float", "const int b = __float_as_int(v);",
                "(b & 0x7fffffff) > 0x7f800000", "b == (int)0x80000000", "b ^ 0x7fffffff"),
    "float64": ("double", "const long long b = __double_as_longlong(v);",
                "(b & 0x7fffffffffffffffLL) > 0x7ff0000000000000LL",
                "b == (long long)0x8000000000000000ULL", "b ^ 0x7fffffffffffffffLL"),
    "float16": ("unsigned short", "const int b = (int)(short)v;", "(v & 0x7fff) > 0x7c00",
                "v == 0x8000", "b ^ 0x7fff"),
    "bfloat16": ("unsigned short", "const int b = (int)(short)v;", "(v & 0x7fff) > 0x7f80",
                 "v == 0x8000", "b ^ 0x7fff"),
}
_INT_TYPES = {
    "bool": "unsigned char", "int8": "signed char", "int16": "short", "int32": "int",
    "int64": "long long", "uint8": "unsigned char", "uint16": "unsigned short",
    "uint32": "unsigned int",
}


def key_body(dtype_name: str) -> tuple[str, str]:
    """``(C type, body of vtl_key)`` for arrays of ``dtype_name``."""
    if dtype_name in _INT_TYPES:
        return _INT_TYPES[dtype_name], "const K k = (K)v; return largest ? k : ~k;"
    ctype, bits, nan, negzero, flip = _FLOAT_KEYS[dtype_name]
    return ctype, (f"{bits}\n  if ({nan}) return {_LLMAX};\n"
                   f"  const K k = ({negzero}) ? (K)0 : (b < 0 ? (K)({flip}) : (K)b);\n"
                   "  return largest ? k : ~k;")


def arg_source(dtype_name: str) -> str:
    """The CUDA source of the three kernels for ``dtype_name``: ``vtl_arg_rows`` (a thread
    per row), ``vtl_arg_blocks`` (``S`` blocks per row: the row's pair, or with ``S > 1``
    each block's pair) and ``vtl_arg_fold`` (a thread per row folds its ``S`` pairs)."""
    ctype, body = key_body(dtype_name)
    return f"""
typedef {ctype} V;
typedef long long K;
__device__ __forceinline__ K vtl_key(const V v, const int largest) {{
  {body}
}}
__device__ __forceinline__ bool vtl_better(const K k, const long long i, const K bk,
                                           const long long bi) {{
  return k > bk || (k == bk && i < bi);
}}
extern "C" __global__ void vtl_arg_rows(const V* __restrict__ x, const long long rows,
    const long long n, const int largest, long long* __restrict__ out) {{
  const long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const V* xr = x + r * n;
  K bk = vtl_key(xr[0], largest);
  long long bi = 0;
  for (long long k = 1; k < n; ++k) {{
    const K key = vtl_key(xr[k], largest);
    if (key > bk) {{ bk = key; bi = k; }}
  }}
  out[r] = bi;
}}
extern "C" __global__ void vtl_arg_blocks(const V* __restrict__ x, const long long n,
    const int S, const int largest, K* __restrict__ pkey, long long* __restrict__ pidx,
    long long* __restrict__ out) {{
  __shared__ K sk[{_BLOCK}];
  __shared__ long long si[{_BLOCK}];
  const unsigned t = threadIdx.x;
  const long long r = blockIdx.x / S;
  const long long s = blockIdx.x % S;
  const V* xr = x + r * n;
  K bk = (K)0x8000000000000000ULL;
  long long bi = n;  // none yet: any index of the row is smaller
  for (long long k = s * blockDim.x + t; k < n; k += (long long)S * blockDim.x) {{
    const K key = vtl_key(xr[k], largest);
    if (vtl_better(key, k, bk, bi)) {{ bk = key; bi = k; }}
  }}
  sk[t] = bk;
  si[t] = bi;
  __syncthreads();
  for (unsigned h = blockDim.x / 2; h > 0; h >>= 1) {{
    if (t < h && vtl_better(sk[t + h], si[t + h], sk[t], si[t])) {{
      sk[t] = sk[t + h];
      si[t] = si[t + h];
    }}
    __syncthreads();
  }}
  if (t == 0) {{
    if (S == 1) {{
      out[r] = si[0];
    }} else {{
      pkey[blockIdx.x] = sk[0];
      pidx[blockIdx.x] = si[0];
    }}
  }}
}}
extern "C" __global__ void vtl_arg_fold(const K* __restrict__ pkey,
    const long long* __restrict__ pidx, const long long rows, const int S,
    long long* __restrict__ out) {{
  const long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  K bk = pkey[r * S];
  long long bi = pidx[r * S];
  for (int s = 1; s < S; ++s) {{
    if (vtl_better(pkey[r * S + s], pidx[r * S + s], bk, bi)) {{
      bk = pkey[r * S + s];
      bi = pidx[r * S + s];
    }}
  }}
  out[r] = bi;
}}
"""


def plan(rows: int, n: int) -> tuple[str, int]:
    """``("rows", 1)`` for a thread per row, else ``("blocks", S)``: blocks per row."""
    if n <= THREAD_ROW:
        return "rows", 1
    return "blocks", slices_per_row(rows, n, _MIN_PER_BLOCK, _TARGET_BLOCKS)


class ArgReduce:
    """``argmax``/``argmin`` on CuPy arrays of the dtypes in :func:`key_body` (``None``
    for others, and for empty arrays, which the portable path refuses)."""

    def __init__(self, cupy: Any) -> None:
        self._cp = cupy
        self._modules: dict[str, Any] = {}

    def _kernels(self, name: str) -> Any:
        mod = self._modules.get(name)
        if mod is None:
            mod = self._modules[name] = self._cp.RawModule(code=arg_source(name))
        return mod

    def __call__(self, x: Any, axis: int | None, keepdims: bool, largest: bool) -> Any:
        cp = self._cp
        name = "bfloat16" if x.dtype.name == "bfloat16" else x.dtype.name
        if name not in _INT_TYPES and name not in _FLOAT_KEYS or x.size == 0 or (
                x.ndim == 0 and axis is not None):
            return None
        if axis is None:
            a = cp.ascontiguousarray(x).reshape(-1)
            rest: tuple[int, ...] = ()
        else:
            ax = axis % x.ndim
            a = cp.ascontiguousarray(cp.moveaxis(x, ax, -1))
            rest = x.shape[:ax] + x.shape[ax + 1:]
        n = a.shape[-1] if a.ndim else 1
        rows = math.prod(rest)
        out = cp.empty(rows, dtype=np.int64)
        mod = self._kernels(name)
        big = np.int32(1 if largest else 0)
        with a.device:
            how, s = plan(rows, n)
            if how == "rows":
                mod.get_function("vtl_arg_rows")(
                    (-(-rows // _BLOCK),), (_BLOCK,), (a, np.int64(rows), np.int64(n), big, out))
            else:
                pk = cp.empty(rows * s if s > 1 else 1, dtype=np.int64)
                pi = cp.empty(rows * s if s > 1 else 1, dtype=np.int64)
                mod.get_function("vtl_arg_blocks")(
                    (rows * s,), (_BLOCK,), (a, np.int64(n), np.int32(s), big, pk, pi, out))
                if s > 1:
                    mod.get_function("vtl_arg_fold")(
                        (-(-rows // _BLOCK),), (_BLOCK,), (pk, pi, np.int64(rows), np.int32(s),
                                                           out))
        if axis is None:
            return out.reshape((1,) * x.ndim) if keepdims else out.reshape(())
        shape = list(rest)
        if keepdims:
            shape.insert(axis % x.ndim, 1)
        return out.reshape(tuple(shape))
