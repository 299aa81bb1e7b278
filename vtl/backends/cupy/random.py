"""``kernel("philox")`` and ``kernel("dropout")`` of the CuPy backend: Philox-4x32-10 in
one CUDA launch, and dropout that generates those words where it uses them.

The portable generator (``vtl.random.philox_words``) builds each of the ten rounds from
array-API ``uint32`` operations, about three hundred launches per draw; here a thread
computes one 128-bit block (``__umulhi`` for the high words) and writes its four words.
:func:`cuda_source` is plain C++ apart from the ``__global__`` and thread-index
built-ins, so the tests compile and run it on the host too.

The dropout kernel (:func:`dropout_spec`) computes, in a thread per 128-bit block, the
words the portable dropout would draw for its four elements and applies ``x * (keep ?
scale : 0)`` at once, in float32 for 16-bit floats: one launch each way, no mask stored.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._base import DynamicScalars
from .._common.dropout import FusedDropout, keep_threshold
from .nn import FLOAT_NAMES, Spec, compute_dtype
from .nn import cuda_source as nn_source

__all__ = ["PHILOX_BLOCK", "CupyDropout", "Philox", "cuda_source", "dropout_source",
           "dropout_spec"]

_MASK = 0xFFFFFFFF


#: ``vtl_philox_block(b0, b1, b2, b3, key0, key1, i, c)``: the four words of block ``counter +
#: i`` of the stream (the counter's words ``b0..b3``, low first, and the key's) into
#: ``c[0..3]``; the one Philox-4x32-10 of the CuPy backend's sources (words, dropout,
#: attention)
PHILOX_BLOCK = r"""
#ifndef VTL_PHILOX_BLOCK
#define VTL_PHILOX_BLOCK
__device__ __forceinline__ void vtl_philox_block(unsigned int b0, unsigned int b1,
    unsigned int b2, unsigned int b3, unsigned int key0, unsigned int key1,
    unsigned long long i, unsigned int* c) {
  unsigned long long s = (unsigned long long)b0 + i;
  unsigned int c0 = (unsigned int)s;
  s = (unsigned long long)b1 + (s >> 32);
  unsigned int c1 = (unsigned int)s;
  s = (unsigned long long)b2 + (s >> 32);
  unsigned int c2 = (unsigned int)s;
  s = (unsigned long long)b3 + (s >> 32);
  unsigned int c3 = (unsigned int)s;
  unsigned int k0 = key0, k1 = key1;
  for (int r = 0; r < 10; ++r) {
    if (r) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
    const unsigned int hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const unsigned int hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    c0 = hi1 ^ c1 ^ k0; c1 = lo1; c2 = hi0 ^ c3 ^ k1; c3 = lo0;
  }
  c[0] = c0; c[1] = c1; c[2] = c2; c[3] = c3;
}
#endif
"""


def cuda_source(name: str = "vtl_philox", words_in_memory: bool = False) -> str:
    """CUDA C++ of the kernel ``name(unsigned* out, long long n, long long nblocks,
    unsigned c0, unsigned c1, unsigned c2, unsigned c3, unsigned k0, unsigned k1)``; with
    ``words_in_memory`` the six counter and key words are read from ``const unsigned*
    words`` instead (a captured draw's per-step words, ``vtl.compile``)."""
    if words_in_memory:
        params = "const unsigned int* __restrict__ words"
        loads = ("  const unsigned int b0 = words[0], b1 = words[1], b2 = words[2], "
                 "b3 = words[3], key0 = words[4], key1 = words[5];\n")
    else:
        params = ("const unsigned int b0, const unsigned int b1, const unsigned int b2, "
                  "const unsigned int b3, const unsigned int key0, const unsigned int key1")
        loads = ""
    return PHILOX_BLOCK + f"""
extern "C" __global__ void {name}(unsigned int* __restrict__ out, const long long n,
    const long long nblocks, {params}) {{
{loads}  const long long stride = (long long)blockDim.x * gridDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < nblocks;
       i += stride) {{
    unsigned int c[4];
    vtl_philox_block(b0, b1, b2, b3, key0, key1, (unsigned long long)i, c);
    const long long w = 4 * i;
    out[w] = c[0];
    if (w + 1 < n) out[w + 1] = c[1];
    if (w + 2 < n) out[w + 2] = c[2];
    if (w + 3 < n) out[w + 3] = c[3];
  }}
}}
"""


class Philox:
    """``kern(n, key, counter, index)``: the words of ``vtl.random``'s stream on CUDA device
    ``index`` (see ``vtl.backends.kernels.PhiloxKernel``)."""

    def __init__(self, cupy: Any) -> None:
        self._cp = cupy
        self._kernels: dict[bool, Any] = {}

    def __call__(self, n: int, key: Any, counter: Any, index: int = 0) -> Any:
        nblocks = -(-n // 4)
        if nblocks >= 2**32:
            raise ValueError(f"vtl.random: cannot draw {n} words at once (at most 2**34)")
        cp = self._cp
        dynamic = isinstance(counter, DynamicScalars)
        with cp.cuda.Device(index):
            out = cp.empty(n, dtype=cp.uint32)
            if not n:
                return out
            kern = self._kernels.get(dynamic)
            if kern is None:  # compiled on first use on each device
                kern = self._kernels[dynamic] = cp.RawKernel(
                    cuda_source(words_in_memory=dynamic), "vtl_philox")
            if dynamic:
                words: tuple = (counter.where,)
            else:
                words = (*(np.uint32((counter >> (32 * k)) & _MASK) for k in range(4)),
                         np.uint32(key[0]), np.uint32(key[1]))
            blocks = min(-(-nblocks // 256), 65536)
            kern((blocks,), (256,), (out, np.int64(n), np.int64(nblocks), *words))
        return out


# -- kernel("dropout"): the bits of a draw generated where they are used --------------------
_DROPOUT_BODY = r"""
  const long long nblocks = (n + 3) >> 2;
  const long long stride = (long long)blockDim.x * gridDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < nblocks;
       i += stride) {
    unsigned int w[4];
    vtl_philox_block(b0, b1, b2, b3, key0, key1, (unsigned long long)i, w);
    const long long e = 4 * i;
    #pragma unroll
    for (int q = 0; q < 4; ++q)
      if (e + q < n) y[e + q] = vtl_st(vtl_ld(x[e + q]) * ((w[q] >> 8) >= thr ? scale : (A)0));
  }
"""
_U32 = "const unsigned int"
_WORD_PARAMS = tuple((_U32, n) for n in ("b0", "b1", "b2", "b3", "key0", "key1"))
_WORD_LOADS = ("  const unsigned int b0 = words[0], b1 = words[1], b2 = words[2], "
               "b3 = words[3], key0 = words[4], key1 = words[5];\n")


def dropout_spec(words_in_memory: bool = False, name: str = "vtl_dropout") -> Spec:
    """The kernel ``name(const T* x, T* y, long long n, <words>, unsigned thr, A scale)``:
    ``y = x * (keep ? scale : 0)`` (computed in ``A``, rounded once to ``T``) with element
    ``f``'s bit from word ``f`` of the draw; ``<words>`` are the six counter and key words,
    or ``const unsigned* words`` with ``words_in_memory`` (a captured draw's per-step
    words)."""
    words = ((f"{_U32}* __restrict__", "words"),) if words_in_memory else _WORD_PARAMS
    params = (("const T* __restrict__", "x"), ("T* __restrict__", "y"),
              ("const long long", "n"), *words, (_U32, "thr"), ("const A", "scale"))
    return Spec(name, params, (_WORD_LOADS if words_in_memory else "") + _DROPOUT_BODY)


def dropout_source(dtype: Any, words_in_memory: bool = False,
                   name: str = "vtl_dropout") -> str:
    """CUDA C++ of :func:`dropout_spec` for ``dtype`` (float16, bfloat16, float32 or
    float64)."""
    return PHILOX_BLOCK + nn_source(dropout_spec(words_in_memory, name),
                                    FLOAT_NAMES[np.dtype(dtype)])


class CupyDropout(FusedDropout):
    """``kernel("dropout")`` (see ``vtl.backends.kernels.DropoutKernel``): one launch each
    way, a thread per Philox block (four elements)."""

    def __init__(self, cupy: Any) -> None:
        self._cp = cupy
        self._kernels: dict[tuple[str, bool], Any] = {}

    def supports(self, dtype: Any) -> bool:
        return np.dtype(dtype) in FLOAT_NAMES

    def _run(self, x: Any, p: float, words: Any) -> Any:
        cp = self._cp
        dt = np.dtype(x.dtype)
        dynamic = isinstance(words, DynamicScalars)
        key = (dt.name, dynamic)
        kern = self._kernels.get(key)
        if kern is None:
            kern = self._kernels[key] = cp.RawKernel(dropout_source(dt, dynamic),
                                                     "vtl_dropout")
        x = cp.ascontiguousarray(x)
        y = cp.empty_like(x)
        n = x.size
        if not n:
            return y
        w = (words.where,) if dynamic else tuple(np.uint32(v) for v in words)
        nblocks = (n + 3) // 4
        blocks = min((nblocks + 255) // 256, 65536)
        scale = compute_dtype(dt).type(1.0 / (1.0 - p))  # applied in A, as the portable path
        kern((blocks,), (256,), (x, y, np.int64(n), *w, np.uint32(keep_threshold(p)),
                                 scale))
        return y

