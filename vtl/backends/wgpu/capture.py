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
"""

from __future__ import annotations

import heapq
from threading import get_ident
from typing import Any

from .._base import Capture, DynamicScalars
from . import _errors, _memory
from ._recorder import REC, _lib, pack

__all__ = ["WgpuCapture"]


class Reserve:
    """The buffers a capture owns (``Buf.owner``): those no array uses now are kept in
    ``free`` instead of the pool while the capture lives (a separate object, so that the
    buffers, which the pool keeps alive, do not keep the capture alive)."""

    __slots__ = ("free", "closed")

    def __init__(self) -> None:
        self.free: list[Any] = []
        self.closed = False


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
        self._thread = get_ident()
        with _memory._LOCK:
            if self._thread in REC.captures:
                raise RuntimeError("wgpu: this thread is already capturing")
            REC.captures[self._thread] = self

    def add(self, kernel, bg, bufs, words, groups: int, gy: int, gz: int, dynamic) -> None:
        """Keep one recorded dispatch (the recorder calls this, lock held)."""
        native = _lib is not None
        self.entries.append([kernel.pipeline._internal if native else kernel.pipeline,
                             bg._internal if native else bg, pack(words), groups, gy, gz,
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
        self._list = [tuple(e[:6]) for e in self.entries]
        self._bind_groups = [e[6] for e in self.entries]
        self.entries = []
        self._bufs = list(self.bufs.values())

    def abort(self) -> None:
        self._stop()

    def replay(self) -> None:
        with _memory._LOCK:
            for i, patches in self.dynamic:
                words = self.words[i]
                for pos, dyn, encode in patches:
                    w = encode(dyn.values)
                    words[pos:pos + len(w)] = w
                e = self._list[i]
                self._list[i] = (e[0], e[1], pack(words), *e[3:])
            REC.replay(self._list, self._bufs)
            if self.errors:
                _errors._state.pending = True

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
