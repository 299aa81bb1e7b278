"""``kernel("philox")`` of the wgpu backend: Philox-4x32-10 in one dispatch
(``wgsl/random/philox.wgsl``).

The portable generator (``vtl.random.philox_words``) builds each of the ten rounds from
array-API ``uint32`` operations, hundreds of dispatches per draw; here an invocation
computes one 128-bit block (the 32x32-bit products through 16-bit halves, as the portable
code does) and writes its four words.
"""

from __future__ import annotations

from typing import Any

from .._base import DynamicScalars
from . import _dtypes as D
from . import _kernels, _runtime
from ._array import empty
from ._recorder import REC, groups_for

__all__ = ["philox"]

_MASK = 0xFFFFFFFF


def philox(n: int, key: Any, counter: Any, index: int = 0) -> Any:
    """The first ``n`` words of the stream of ``key`` from block ``counter`` (a 1-D
    ``uint32`` array; see ``vtl.backends.kernels.PhiloxKernel``); ``None`` (the portable
    path) for a draw larger than one storage binding. ``counter`` may be the
    :class:`~vtl.backends.DynamicScalars` of a captured draw (four counter words and two
    key words, encoded anew at each replay)."""
    nblocks = -(-n // 4)
    if 4 * n > _runtime.get().max_binding or nblocks >= 2**32:
        return None
    out = empty((n,), D.uint32)
    if n:
        k = _kernels.kernel("philox", "w", ())
        if isinstance(counter, DynamicScalars):
            words = [n, nblocks, out._offset, *counter.values]
            dynamic = [(3, counter, list)]
        else:
            words = [n, nblocks, out._offset,
                     *((counter >> (32 * j)) & _MASK for j in range(4)),
                     key[0] & _MASK, key[1] & _MASK]
            dynamic = None
        REC.dispatch(k, (out._st.buf,), words, groups_for(nblocks), dynamic=dynamic)
    return out
