"""Device buffers: a size-bucketed pool.

Every array owns a :class:`Storage` (views share it). When the last array
using a storage is collected, its buffer goes back to the pool and is handed
to the next allocation of the same bucket, so steady-state loops create no
new buffers (and their cached bind groups stay valid).

GPU reuse inside one open command buffer is safe (dispatches run in order);
a *host* write (``queue.write_buffer``) lands before the open command buffer
runs, so uploads only get buffers not used by pending work.

A collected array's buffer is queued for release (``Storage.__del__`` may run on any
thread, at any allocation, even inside the pool's own code) and the queue is drained under
the runtime lock by the next allocation or statistics call.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque

from . import _runtime

_MIN_BYTES = 256
_uid = itertools.count(1)
_caps: dict[int, int] = {}  # nbytes -> bucket capacity


def bucket(nbytes: int) -> int:
    """Capacity class for ``nbytes``: powers of two split into 4 steps, at least 256 B."""
    if nbytes <= _MIN_BYTES:
        return _MIN_BYTES
    top = 1 << (nbytes - 1).bit_length()
    step = top // 8
    return ((nbytes + step - 1) // step) * step


#: uid -> Buf of the buffers whose integer contents are known on the host (see Buf.known)
KNOWN: dict[int, Buf] = {}


class Buf:
    """One GPU buffer and the batch that last used it.

    ``known`` is ``(lo, hi, lo2)`` (``vtl.backends._common.ranges.value_range``), the smallest and
    largest value of integer data uploaded from the host (or gathered from such a buffer)
    and the smallest above a negative ``lo``, or ``None``. It lets checks of
    class indices run on the host without a readback; any dispatch that binds the
    buffer for writing, and the buffer's return to the pool, forget it.
    """

    __slots__ = ("gpu", "cap", "uid", "batch", "known", "owner")

    def __init__(self, gpu, cap: int) -> None:
        self.gpu = gpu
        self.cap = cap
        self.uid = next(_uid)
        self.batch = -1
        self.known = None
        self.owner = None  # the Reserve of the capture (vtl.compile) that uses it


def set_known(buf: Buf, known) -> None:
    """Record (or with ``None`` forget) the host-known value range of ``buf``'s data."""
    buf.known = known
    if known is None:
        KNOWN.pop(buf.uid, None)
    else:
        KNOWN[buf.uid] = buf


class Storage:
    """An array's claim on a pooled buffer; returns it to the pool when collected."""

    __slots__ = ("buf", "nbytes", "__weakref__")

    def __init__(self, buf: Buf, nbytes: int) -> None:
        self.buf = buf
        self.nbytes = nbytes

    def __del__(self) -> None:
        try:
            _RELEASED.append(self.buf)  # thread-safe; drained by Pool._drain
        except Exception:  # interpreter shutdown
            pass


#: buffers of collected storages, waiting to go back to the pool
_RELEASED: deque = deque()


class Pool:
    def __init__(self) -> None:
        # per bucket, a heap of (uid, Buf): the lowest-numbered free buffer is handed out
        # first, so a steady-state loop gets the same buffers (and cached bind groups) every
        # iteration instead of cycling through permutations of a LIFO stack
        self.free: dict[int, list[tuple[int, Buf]]] = {}
        # every live buffer, so a GPU buffer is never part of collectable garbage: when an
        # array dies in a reference cycle, the collector finalizes every object of the cycle
        # (PEP 442), which would release the GPU buffer that Storage.__del__ hands back here
        self.live: dict[int, Buf] = {}
        self.in_use = 0
        self.pooled = 0
        self.peak = 0
        self.created = 0
        self.reused = 0

    def alloc(self, nbytes: int, upload: bool = False) -> Storage:
        """A storage of at least ``nbytes``; ``upload=True`` for host writes (see module doc).

        Arrays larger than one storage binding (``max_storage_binding``) are allowed up
        to the adapter's maximum buffer size: contiguous elementwise operations process
        them in windows; other operations refuse them with a ``ValueError``.
        """
        with _LOCK:
            if _RELEASED:
                self._drain()
            cap = _caps.get(nbytes)
            if cap is None:
                cap = self._cap(nbytes)
            lst = self.free.get(cap)
            buf = None
            if lst:
                if upload:
                    from ._recorder import REC

                    cur = REC.batch if REC.pending else -2
                    for i, (_, b) in enumerate(lst):
                        if b.batch != cur:
                            buf = b
                            lst[i] = lst[-1]
                            lst.pop()
                            heapq.heapify(lst)
                            break
                else:
                    buf = heapq.heappop(lst)[1]
            if buf is None:
                buf = self._create(_runtime.get(), cap)
            else:
                self.pooled -= cap
                self.reused += 1
            self.in_use += cap
            if self.in_use > self.peak:
                self.peak = self.in_use
            return Storage(buf, nbytes)

    @staticmethod
    def _cap(nbytes: int) -> int:
        rt = _runtime.get()
        if nbytes > rt.max_buffer:
            raise ValueError(
                f"cannot allocate {nbytes} bytes: one wgpu array may hold at most "
                f"{rt.max_buffer} bytes (the adapter's max buffer size)"
            )
        cap = bucket(max(nbytes, 4))
        if cap > rt.max_binding:
            cap = -(-nbytes // 256) * 256
            if cap > rt.max_buffer:
                cap = -(-nbytes // 16) * 16
        if len(_caps) < 4096:
            _caps[nbytes] = cap
        return cap

    def _create(self, rt, cap: int) -> Buf:
        U = rt.wgpu.BufferUsage
        try:
            gpu = rt.device.create_buffer(size=cap, usage=U.STORAGE | U.COPY_SRC | U.COPY_DST)
        except Exception as exc:
            self._trim()
            from . import _kernels

            _kernels.clear_bind_groups()
            try:
                gpu = rt.device.create_buffer(
                    size=cap, usage=U.STORAGE | U.COPY_SRC | U.COPY_DST
                )
            except Exception:
                raise MemoryError(
                    f"wgpu: cannot allocate a buffer of {cap} bytes "
                    f"({self.in_use} bytes in use): {exc}"
                ) from None
        self.created += 1
        buf = Buf(gpu, cap)
        self.live[buf.uid] = buf
        return buf

    def _drain(self) -> None:
        """Return the queued buffers of collected storages to the pool (lock held)."""
        pop = _RELEASED.popleft
        while _RELEASED:
            self.release(pop())

    def release(self, buf: Buf) -> None:
        """Put ``buf`` back in the pool (runtime lock held); a buffer that a capture's
        replays use stays with the capture (counted in use)."""
        if buf.known is not None:
            set_known(buf, None)
        owner = buf.owner
        if owner is not None:
            if not owner.closed:
                owner.free.append(buf)
                return
            buf.owner = None
        self.in_use -= buf.cap
        self.pooled += buf.cap
        heapq.heappush(self.free.setdefault(buf.cap, []), (buf.uid, buf))

    def trim(self) -> None:
        """Destroy every pooled (unused) buffer."""
        from . import _kernels

        with _LOCK:
            self._drain()
            self._trim()
            _kernels.clear_bind_groups()

    def _trim(self) -> None:
        for lst in self.free.values():
            for _, b in lst:
                self.live.pop(b.uid, None)
                b.gpu.destroy()
        self.free.clear()
        self.pooled = 0

    def info(self) -> dict[str, int]:
        with _LOCK:
            self._drain()
        return {"in_use": self.in_use, "pooled": self.pooled, "peak": self.peak,
                "buffers_created": self.created, "reused": self.reused}


_LOCK = _runtime.LOCK
POOL = Pool()
