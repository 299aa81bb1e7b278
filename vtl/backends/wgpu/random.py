"""``kernel("philox")`` of the wgpu backend: Philox-4x32-10 in one dispatch
(``wgsl/random/philox.wgsl``).

The portable generator (``vtl.random.philox_words``) builds each of the ten rounds from
array-API ``uint32`` operations, hundreds of dispatches per draw; here an invocation
computes one 128-bit block (the 32x32-bit products through 16-bit halves, as the portable
code does) and writes its four words.
"""

from __future__ import annotations

from typing import Any

from . import _dtypes as D
from . import _kernels, _runtime
from ._array import empty
from ._recorder import REC, groups_for

__all__ = ["philox"]

_MASK = 0xFFFFFFFF


def philox(n: int, key: tuple[int, int], counter: int, index: int = 0) -> Any:
    """The first ``n`` words of the stream of ``key`` from block ``counter`` (a 1-D
    ``uint32`` array; see ``vtl.backends.kernels.PhiloxKernel``); ``None`` (the portable
    path) for a draw larger than one storage binding."""
    nblocks = -(-n // 4)
    if 4 * n > _runtime.get().max_binding or nblocks >= 2**32:
        return None
    out = empty((n,), D.uint32)
    if n:
        k = _kernels.kernel("philox", "w", ())
        words = [n, nblocks, out._offset, *((counter >> (32 * j)) & _MASK for j in range(4)),
                 key[0] & _MASK, key[1] & _MASK]
        REC.dispatch(k, (out._st.buf,), words, groups_for(nblocks))
    return out
