"""``kernel("philox")`` of the CuPy backend: Philox-4x32-10 in one CUDA launch.

The portable generator (``vtl.random.philox_words``) builds each of the ten rounds from
array-API ``uint32`` operations, about three hundred launches per draw; here a thread
computes one 128-bit block (``__umulhi`` for the high words) and writes its four words.
:func:`cuda_source` is plain C++ apart from the ``__global__`` and thread-index
built-ins, so the tests compile and run it on the host too.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._base import DynamicScalars

__all__ = ["Philox", "cuda_source"]

_MASK = 0xFFFFFFFF


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
    return f"""
extern "C" __global__ void {name}(unsigned int* __restrict__ out, const long long n,
    const long long nblocks, {params}) {{
{loads}  const long long stride = (long long)blockDim.x * gridDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < nblocks;
       i += stride) {{
    unsigned long long s = (unsigned long long)b0 + (unsigned long long)i;
    unsigned int c0 = (unsigned int)s;
    s = (unsigned long long)b1 + (s >> 32);
    unsigned int c1 = (unsigned int)s;
    s = (unsigned long long)b2 + (s >> 32);
    unsigned int c2 = (unsigned int)s;
    s = (unsigned long long)b3 + (s >> 32);
    unsigned int c3 = (unsigned int)s;
    unsigned int k0 = key0, k1 = key1;
    for (int r = 0; r < 10; ++r) {{
      if (r) {{ k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }}
      const unsigned int hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
      const unsigned int hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
      c0 = hi1 ^ c1 ^ k0; c1 = lo1; c2 = hi0 ^ c3 ^ k1; c3 = lo0;
    }}
    const long long w = 4 * i;
    out[w] = c0;
    if (w + 1 < n) out[w + 1] = c1;
    if (w + 2 < n) out[w + 2] = c2;
    if (w + 3 < n) out[w + 3] = c3;
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
