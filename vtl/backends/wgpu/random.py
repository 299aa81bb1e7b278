"""Random kernels of the wgpu backend: ``kernel("philox")``, Philox-4x32-10 in one dispatch
(``wgsl/random/philox.wgsl``), and ``kernel("dropout")``, dropout with the generator's bits
computed where they are used (``wgsl/random/dropout.wgsl``).

The portable generator (``vtl.random.philox_words``) builds each of the ten rounds from
array-API ``uint32`` operations, hundreds of dispatches per draw; here an invocation
computes one 128-bit block (the 32x32-bit products through 16-bit halves, as the portable
code does; ``wgsl/random/philox_rounds.wgsl``) and writes its four words, or applies them
to four elements.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._base import DynamicScalars
from .._common.dropout import FusedDropout, keep_threshold
from . import _dtypes as D
from . import _kernels, _runtime
from ._array import contiguous, empty, words_for_scalar
from ._recorder import REC, groups_for

__all__ = ["WgpuDropout", "philox"]

_MASK = 0xFFFFFFFF


def _philox_source() -> str:
    return _kernels.source("philox_rounds")


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
        k = _kernels.kernel("philox", "w", (), PHILOX=_philox_source())
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


# -- kernel("dropout") ---------------------------------------------------------------------

#: dtype -> (storage type, compute type, store expression of the computed ``x``)
_DROPOUT_TYPES = {
    D.float32: ("f32", D.float32, "x"),
    D.bfloat16: ("f32", D.float32, "wrap_bfloat16(x)"),
    D.float16: ("f16", D.float32, "f16(x)"),
    D.float64: ("f64", D.float64, "x"),
}
_SCALE_AT = 12  # first immediate word of the scale (dropout.wgsl)


class WgpuDropout(FusedDropout):
    """``kernel("dropout")`` (see ``vtl.backends.kernels.DropoutKernel``): one dispatch each
    way, an invocation per Philox block (four elements), 256 per workgroup.

    float32, float16 and bfloat16 are computed in float32 and rounded once (the portable
    path's arithmetic), float64 in float64. The counter and key words may be the
    :class:`~vtl.backends.DynamicScalars` of a captured draw (``vtl.compile``): they are
    immediates words that each replay encodes anew. An array larger than one storage
    binding is processed in windows that fit one, a dispatch each. ``launches`` counts the
    dispatches. A float32 array whose offsets and length are multiples of 4 is read and
    written a vec4 per Philox block (``dropout_vec4.wgsl``, :attr:`VEC4`).
    """

    #: float32 arrays of whole vec4s take ``dropout_vec4.wgsl`` (the same values)
    VEC4 = True

    def __init__(self) -> None:
        self.launches = 0
        self._pipelines: dict[Any, Any] = {}

    def supports(self, dtype: Any) -> bool:
        dt = np.dtype(dtype)
        if dt not in _DROPOUT_TYPES:
            return False
        need = D.FEATURE.get(dt)
        return need is None or need in _runtime.get().features


    def _run(self, x: Any, p: float, words: Any) -> Any:
        dt = np.dtype(x.dtype)
        t, adt, store = _DROPOUT_TYPES[dt]
        x = contiguous(x)
        n = x.size
        y = empty(x.shape, dt)
        if not n:
            return y
        scale = 1.0 / (1.0 - p)
        if adt == D.float32:  # the scale as the portable path rounds it
            tail = [keep_threshold(p), *words_for_scalar(scale, D.float32)[:1]]
        else:
            tail = [keep_threshold(p), *words_for_scalar(scale, D.float64)]
        vec4 = (self.VEC4 and dt == D.float32 and not n & 3 and not x._offset & 3
                and not y._offset & 3)
        kern = self._pipelines.get((dt, vec4))
        if kern is None:
            if vec4:
                kern = _kernels.kernel("dropout_vec4", "rw", (dt,), label="dropout",
                                       PHILOX=_philox_source())
            else:
                kern = _kernels.kernel(
                    "dropout", "rw", (dt, adt), T=t, A=D.wgsl(adt), STORE=store,
                    SCALE=f"scal_{adt.name}({_SCALE_AT}u)", PHILOX=_philox_source())
            self._pipelines[(dt, vec4)] = kern
        dynamic = isinstance(words, DynamicScalars)
        draw = list(words.values) if dynamic else [w & _MASK for w in words]
        patch = [(5, words, list)] if dynamic else None
        rt = _runtime.get()
        xb, yb = x._st.buf, y._st.buf
        if xb.cap <= rt.max_binding and yb.cap <= rt.max_binding:
            nblocks = -(-n // 4)
            REC.dispatch(kern, (xb, yb), [n, nblocks, x._offset, y._offset, 0, *draw, *tail],
                         groups_for(nblocks), dynamic=patch)
            self.launches += 1
            return y
        # windows of whole Philox blocks that fit one binding, a dispatch each
        isz = D.itemsize(dt)
        align = max(int(rt.limits.get("min-storage-buffer-offset-alignment", 256)), 16)
        chunk = (rt.max_binding - 2 * align - 64) // isz // 4 * 4
        for e0 in range(0, n, chunk):
            cn = min(chunk, n - e0)
            wx = _window(xb, x._offset + e0, cn, isz, align)
            wy = _window(yb, y._offset + e0, cn, isz, align)
            bg = _kernels.window_bind_group(kern.layout, (wx, wy))
            nblocks = -(-cn // 4)
            w = [cn, nblocks, x._offset + e0 - wx[1] // isz, y._offset + e0 - wy[1] // isz,
                 e0 // 4, *draw, *tail]
            REC.record(kern, bg, (xb, yb), w, groups_for(nblocks), dynamic=patch)
            self.launches += 1
        return y


def _window(buf: Any, first: int, count: int, isz: int, align: int) -> tuple[Any, int, int]:
    """The binding window ``(buf, byte offset, byte size)`` holding elements ``[first, first
    + count)`` of ``buf``."""
    start = (first * isz) // align * align
    end = -(-((first + count) * isz) // 16) * 16
    return buf, start, min(end, buf.cap) - start
