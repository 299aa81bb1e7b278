"""Reads of small device flags that do not wait for the device when they are started.

An optimizer step skipped on the device (``GradScaler`` with a fused step) leaves a 0-d
flag whose value the host needs only later, to settle its step counts at the next step.
Reading it with ``cupy.asnumpy`` then would wait for everything queued since, the current
step's forward and backward included. :class:`FlagReads` instead copies the flag into a
slot of a pinned ring when the step is queued (``cudaMemcpyAsync`` on the current stream,
then an event); the read waits for that event only, long passed in a training loop.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["FlagReads"]


class FlagReads:
    """Asynchronous reads of flags of at most :attr:`SLOT_BYTES` bytes through a ring of
    :attr:`SLOTS` pinned slots per device. A slot is reused :attr:`SLOTS` reads later, after
    its copy finished; a read started that long ago and never finished sees a newer value."""

    SLOTS = 256
    SLOT_BYTES = 8

    def __init__(self, cupy: Any) -> None:
        self._cp = cupy
        self._rings: dict[int, list] = {}  # device id -> [pinned bytes, events, next slot]
        self._lock = threading.Lock()

    def start(self, raw: Any) -> Callable[[], np.ndarray] | None:
        """Start copying ``raw`` to the host; the returned function waits for that copy and
        gives the value. ``None`` for an array over :attr:`SLOT_BYTES` bytes or a stream
        that is being captured (the caller reads it the usual way)."""
        cp = self._cp
        n = raw.nbytes
        dev = raw.device
        with dev:
            stream = cp.cuda.get_current_stream()  # the flag's device's
        if n > self.SLOT_BYTES or stream.is_capturing():
            return None
        with self._lock:
            ring = self._rings.get(dev.id)
            if ring is None:
                import cupyx

                with dev:
                    ring = self._rings[dev.id] = [
                        cupyx.empty_pinned(self.SLOTS * self.SLOT_BYTES, dtype=np.uint8),
                        [cp.cuda.Event(disable_timing=True) for _ in range(self.SLOTS)], 0]
            host, events, i = ring
            ring[2] = (i + 1) % self.SLOTS
        event = events[i]
        event.synchronize()  # the slot's previous copy, SLOTS reads ago
        off = i * self.SLOT_BYTES
        with dev:
            rt = cp.cuda.runtime
            rt.memcpyAsync(host.ctypes.data + off, raw.data.ptr, n, rt.memcpyDeviceToHost,
                           stream.ptr)
            event.record(stream)
        view = host[off:off + n].view(raw.dtype).reshape(raw.shape)

        def read() -> np.ndarray:
            event.synchronize()
            return view.copy()

        return read
