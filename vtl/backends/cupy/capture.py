"""Captures of the CuPy backend (``vtl.compile``): CUDA graphs.

The work of a call is captured on a side stream (CUDA cannot capture the legacy default
stream) into a ``cupy.cuda.Graph``; nothing runs while it is recorded, so :meth:`end`
launches the graph once for the captured call itself. Every allocation made while
recording comes from a memory pool of the capture's own, which nothing else allocates
from: the graph's temporaries keep their addresses for all replays, and memory freed
during the capture is reused only by the capture.

Per-step scalars (:class:`~vtl.backends.DynamicScalars`: an optimizer's learning rate
and bias corrections, a random draw's counter) live in a device buffer of slots that the
captured kernels read; before each launch their current values are copied there from
pinned host memory, on the stream of the launch (no wait for the device).
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from .._base import Capture, DynamicScalars

__all__ = ["CupyCapture"]

#: little-endian ``struct`` formats of the dtypes of per-step scalars (others: a view)
_FORMATS = {"<u4": "I", "<i4": "i", "<u8": "Q", "<i8": "q", "<f4": "f", "<f8": "d"}
#: bytes of per-step scalars one capture can hold
SLOT_BYTES = 1 << 16
#: pinned staging buffers in turn (each the size of the scalars the capture uses): the host
#: waits for the copy out of one only when it runs this many launches ahead of the device
RING = 64


class CupyCapture(Capture):
    """One captured call on CUDA device ``index``."""

    def __init__(self, cupy: Any, index: int) -> None:
        cp = self._cp = cupy
        self._device = cp.cuda.Device(index)
        self._dyn: list[tuple[DynamicScalars, int]] = []
        self._used = 0
        self.graph: Any = None
        with self._device:
            self.pool = cp.cuda.MemoryPool()
            self.stream = cp.cuda.Stream(non_blocking=True)
            with cp.cuda.using_allocator(self.pool.malloc):
                self._slots = cp.empty(SLOT_BYTES, dtype=np.uint8)
        self._ring: list = []  # made by end(), once the scalars' size is known
        self._turn = 0
        self._contexts = [self._device, cp.cuda.using_allocator(self.pool.malloc), self.stream]
        for ctx in self._contexts:
            ctx.__enter__()
        try:
            self.stream.begin_capture()
        except BaseException:
            self._leave()
            raise

    def _leave(self) -> None:
        while self._contexts:
            self._contexts.pop().__exit__(None, None, None)

    def scalars(self, values: Any, dtype: Any) -> DynamicScalars:
        dyn = DynamicScalars(values, dtype)
        n = len(dyn.values) * dyn.dtype.itemsize
        off = -(-self._used // 8) * 8
        if off + n > SLOT_BYTES:
            raise RuntimeError(f"vtl.compile: a captured call may use at most {SLOT_BYTES} "
                               "bytes of per-step scalars")
        self._used = off + n
        dyn.where = self._slots[off:off + n].view(dyn.dtype)
        self._dyn.append((dyn, off))
        return dyn

    def end(self) -> None:
        import cupyx

        try:
            self.graph = self.stream.end_capture()
        finally:
            self._leave()
        if self._dyn:
            with self._device:
                self._ring = [(cupyx.empty_pinned(self._used, dtype=np.uint8),
                               self._cp.cuda.Event(disable_timing=True)) for _ in range(RING)]
        # each staging buffer's view of each dynamic scalar's slot, and the buffer's bytes
        # with a packer per scalars object where struct has the dtype's format (a few
        # times faster than writing through a view)
        self._views = [[buf[off:off + len(d.values) * d.dtype.itemsize].view(d.dtype)
                        for d, off in self._dyn] for buf, _ in self._ring]
        self._bytes = [memoryview(buf).cast("B") for buf, _ in self._ring]
        self._packers = [None if _FORMATS.get(d.dtype.str) is None else
                         struct.Struct("<" + _FORMATS[d.dtype.str] * len(d.values)).pack_into
                         for d, _ in self._dyn]
        with self._device:
            self._launch()

    def abort(self) -> None:
        try:
            if self.stream.is_capturing():
                self.stream.end_capture()
        except Exception:  # noqa: BLE001 - the capture is broken already; drop it
            pass
        finally:
            self._leave()

    def replay(self) -> None:
        with self._device:
            self._launch()

    def _launch(self) -> None:
        cp = self._cp
        stream = cp.cuda.get_current_stream()
        if self._dyn:
            turn = self._turn
            buf, done = self._ring[turn]
            self._turn = (turn + 1) % RING
            done.synchronize()  # returns at once unless the host is RING launches ahead
            mem = self._bytes[turn]
            for (dyn, off), view, pack in zip(self._dyn, self._views[turn], self._packers,
                                              strict=True):
                if pack is None:
                    view[:] = dyn.values
                else:
                    try:
                        pack(mem, off, *dyn.values)
                    except (struct.error, OverflowError):  # a value the view converts
                        view[:] = dyn.values
            cp.cuda.runtime.memcpyAsync(self._slots.data.ptr, buf.ctypes.data, self._used,
                                        cp.cuda.runtime.memcpyHostToDevice, stream.ptr)
            done.record(stream)
        self.graph.launch(stream=stream)

    def copy_in(self, dst: Any, src: Any) -> None:
        if dst.flags.c_contiguous and src.flags.c_contiguous and dst.dtype == src.dtype \
                and dst.shape == src.shape and src.data.device_id == self._device.id:
            rt = self._cp.cuda.runtime
            rt.memcpyAsync(dst.data.ptr, src.data.ptr, dst.nbytes, rt.memcpyDeviceToDevice,
                           self._cp.cuda.get_current_stream().ptr)
        else:
            dst[...] = src

    def copy_out(self, src: Any, xp: Any) -> Any:
        cp = self._cp
        if not src.flags.c_contiguous:
            return cp.array(src, copy=True)
        with self._device:
            out = cp.empty(src.shape, dtype=src.dtype)
            rt = cp.cuda.runtime
            rt.memcpyAsync(out.data.ptr, src.data.ptr, src.nbytes, rt.memcpyDeviceToDevice,
                           cp.cuda.get_current_stream().ptr)
        return out

    def explain(self, exc: BaseException) -> str | None:
        text = f"{type(exc).__name__}: {exc}"
        if "captur" in text or "DeviceSynchronized" in text:
            return ("vtl.compile: while being captured, the function waited for the device: "
                    "it read a value on the host (.item(), float(), bool() or printing of a "
                    "tensor), copied host data to the device, or synchronized. A captured "
                    f"function must leave its values on the device; move such code out of it "
                    f"({text})")
        return None
