"""Captures of the wgpu backend (``vtl.compile``): a replayed list of dispatches.

While a capture records a thread's work, every dispatch the recorder records for that
thread (it runs as usual) is also kept: its pipeline, bind group, grid and immediates
block. A replay records the list into the open compute pass without vtl's Python above
the recorder: a few native calls per dispatch.

The buffers the list uses keep their contents' roles between replays, so none of them
may serve another array meanwhile: from the end of the capture they are owned by it.
Those that are free go out of the pool (and those still in use stay out when their arrays
die) until the capture is collected.

Per-step scalars (:class:`~vtl.backends.DynamicScalars`) are immediates words of the
dispatches that use them, encoded anew from their values before each replay.

A replay's copies of the call's inputs into the captured buffers, and of its outputs into
new arrays, go through the array library once per pair of buffers; their dispatches are
kept (:class:`_Copies`) and recorded again as the replay's are when the same buffers meet
again (the pool hands a step's new arrays the buffers of the previous step's): a few native
calls instead of the library's Python for each copy.
"""

from __future__ import annotations

import heapq
import struct
from threading import get_ident
from typing import Any

from .._base import Capture, DynamicScalars
from . import _dtypes as D
from . import _errors, _kernels, _memory, _runtime
from ._array import WgpuArray, copy_into, fresh
from ._recorder import _MASK, REC, _ffi, _lib, pack

#: number of words -> ``pack_into(buffer, offset, *words)``
_PACK_INTO = [struct.Struct(f"<{n}I").pack_into for n in range(_runtime.PARAM_BYTES // 4 + 1)]

__all__ = ["WgpuCapture"]


class Reserve:
    """The buffers a capture owns (``Buf.owner``): those no array uses now are kept in
    ``free`` instead of the pool while the capture lives (a separate object, so that the
    buffers, which the pool keeps alive, do not keep the capture alive)."""

    __slots__ = ("free", "closed")

    def __init__(self) -> None:
        self.free: list[Any] = []
        self.closed = False


def _entry(kernel, bg, words, groups: int, gy: int, gz: int) -> tuple:
    """A dispatch as :meth:`Recorder.replay` takes it (native handles where available; the
    last item its weighted workgroups, for the recorder's idle rule)."""
    native = _lib is not None
    return (kernel.pipeline._internal if native else kernel.pipeline,
            bg._internal if native else bg, pack(words), groups, gy, gz,
            _kernels.dispatch_work(kernel, words, groups * gy * gz))


class _Collector:
    """Stands in for a capture while one copy records: keeps its dispatches."""

    __slots__ = ("entries", "bind_groups", "bufs")

    def __init__(self) -> None:
        self.entries: list[tuple] = []
        self.bind_groups: list[Any] = []  # kept alive with the entries
        self.bufs: dict[int, Any] = {}

    def add(self, kernel, bg, bufs, words, groups: int, gy: int, gz: int, dynamic) -> None:
        self.entries.append(_entry(kernel, bg, words, groups, gy, gz))
        self.bind_groups.append(bg)
        for b in bufs:
            self.bufs[b.uid] = b


class _Copies:
    """The recorded dispatches of copies between given buffers (at most :data:`SIZE`, the
    oldest dropped first): ``copy(src, dst)`` is ``dst[...] = src`` for arrays of one shape
    and dtype."""

    SIZE = 32

    def __init__(self) -> None:
        self._kept: dict[tuple, tuple] = {}

    def copy(self, src: WgpuArray, dst: WgpuArray) -> None:
        sb, db = src._st.buf, dst._st.buf
        key = (sb.uid, src._offset, src._strides, db.uid, dst._offset, dst._strides,
               src._shape, src._dtype)
        kept = self._kept.get(key)
        if kept is not None:
            with _memory._LOCK:
                if db.known is not None:  # as the recorder does for what it writes
                    _memory.set_known(db, None)
                REC.replay(kept[0], kept[1])
            return
        collector = _Collector()
        thread = get_ident()
        with _memory._LOCK:
            if thread in REC.captures:  # a capture records this thread: the plain copy
                copy_into(src, dst)
                return
            REC.captures[thread] = collector
        try:
            copy_into(src, dst)
        finally:
            with _memory._LOCK:
                REC.captures.pop(thread, None)
        if collector.entries:
            while len(self._kept) >= self.SIZE:
                self._kept.pop(next(iter(self._kept)))
            self._kept[key] = (collector.entries, list(collector.bufs.values()),
                               collector.bind_groups)


class WgpuCapture(Capture):
    """One captured call: the dispatches of the thread that made it."""

    def __init__(self) -> None:
        self.entries: list[list] = []
        self.words: list[list[int]] = []
        self.dynamic: list[tuple[int, list]] = []  # entry index, [(position, dyn, encode)]
        self.bufs: dict[int, Any] = {}  # uid -> Buf
        self.written: dict[int, Any] = {}
        self.reserve = Reserve()
        self.errors = False  # whether a dispatch may write the thread's error buffer
        self._copies = _Copies()
        self._thread = get_ident()
        with _memory._LOCK:
            if self._thread in REC.captures:
                raise RuntimeError("wgpu: this thread is already capturing")
            REC.captures[self._thread] = self

    def add(self, kernel, bg, bufs, words, groups: int, gy: int, gz: int, dynamic) -> None:
        """Keep one recorded dispatch (the recorder calls this, lock held)."""
        self.entries.append([*_entry(kernel, bg, words, groups, gy, gz),
                             bg])  # the last item keeps the bind group alive
        self.words.append(list(words))
        if dynamic:
            self.dynamic.append((len(self.entries) - 1, list(dynamic)))
        sig = kernel.layout[2]
        err = _errors._state.storage
        for i, b in enumerate(bufs):
            self.bufs[b.uid] = b
            if sig[i] == "w":
                self.written[b.uid] = b
                if err is not None and b is err.buf:
                    self.errors = True

    def scalars(self, values: Any, dtype: Any) -> DynamicScalars:
        return DynamicScalars(values, dtype)

    def _stop(self) -> None:
        with _memory._LOCK:
            REC.captures.pop(self._thread, None)

    def end(self) -> None:
        """Stop recording (the work ran while it was recorded) and take the buffers."""
        self._stop()
        pool = _memory.POOL
        with _memory._LOCK:
            pool._drain()
            for b in self.written.values():  # values known on the host change at replays
                if b.known is not None:
                    _memory.set_known(b, None)
            reserve = self.reserve
            for b in self.bufs.values():
                b.owner = reserve
            for cap, lst in pool.free.items():  # free buffers of the capture leave the pool
                mine = [e for e in lst if e[1].owner is reserve]
                if mine:
                    lst[:] = [e for e in lst if e[1].owner is not reserve]
                    heapq.heapify(lst)
                    for _, b in mine:
                        reserve.free.append(b)
                        pool.pooled -= cap
                        pool.in_use += cap
        self._list = [tuple(e[:7]) for e in self.entries]
        self._bind_groups = [e[7] for e in self.entries]
        self.entries = []
        self._bufs = list(self.bufs.values())
        # the immediates blocks a replay patches in place (the native entry points read a
        # block where it is), by the scalars written into them: [(scalars, encode,
        # [(block, byte offset), ...])], each scalars object encoded once per replay
        targets: dict[tuple[int, Any], tuple[Any, Any, list]] = {}
        self._blocks = []
        for i, patches in self.dynamic:
            block = bytearray(pack(self.words[i]))
            self._blocks.append((i, block))
            if _lib is not None:
                e = self._list[i]
                self._list[i] = (e[0], e[1], _ffi.from_buffer(block), *e[3:])
            for pos, dyn, encode in patches:
                key = (id(dyn), encode)
                if key not in targets:
                    targets[key] = (dyn, encode, [])
                targets[key][2].append((block, 4 * pos))
        self._targets = list(targets.values())

    def abort(self) -> None:
        self._stop()

    def replay(self) -> None:
        with _memory._LOCK:
            if self._targets:
                self._patch()
            REC.replay(self._list, self._bufs)
            if self.errors:
                _errors._state.pending = True

    def _patch(self) -> None:
        """Write the per-step scalars' words into the immediates blocks that read them."""
        for dyn, encode, places in self._targets:
            w = [v & _MASK for v in encode(dyn.values)]
            put = _PACK_INTO[len(w)]
            for block, off in places:
                put(block, off, *w)
        if _lib is None:  # the wrappers take the blocks' bytes
            for i, block in self._blocks:
                e = self._list[i]
                self._list[i] = (e[0], e[1], bytes(block), *e[3:])

    def copy_in(self, dst: Any, src: Any) -> None:
        if type(dst) is WgpuArray and type(src) is WgpuArray and src._shape == dst._shape \
                and src._dtype == dst._dtype:
            self._copies.copy(src, dst)
        else:
            dst[...] = src

    def copy_out(self, src: Any, xp: Any) -> Any:
        if type(src) is not WgpuArray:
            return xp.asarray(src, copy=True)
        n = src.size
        out = fresh(src._shape, src._dtype, n, D.itemsize(src._dtype))
        self._copies.copy(src, out)
        return out

    def explain(self, exc: BaseException) -> str | None:
        text = str(exc)
        if "while a capture records" in text:
            return ("vtl.compile: while being captured, the function read a value on the "
                    "host (.item(), float(), bool() or printing of a tensor) or synchronized; "
                    "a captured function must leave its values on the device: move such code "
                    "out of it")
        return None

    def __del__(self) -> None:
        """Hand the buffers back: free ones to the pool, the others when their arrays die."""
        try:
            reserve = self.reserve
            reserve.closed = True
            for b in reserve.free:
                b.batch = REC.batch  # replayed work may still be pending on it
                _memory._RELEASED.append(b)
            reserve.free = []
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
