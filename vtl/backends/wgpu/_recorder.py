"""The recorder: dispatches go into one open compute pass.

Work is submitted when data must reach the host (a readback), on :func:`synchronize`,
every ``FLUSH_EVERY`` dispatches, and once the open pass has been recording for
``FLUSH_AFTER_S`` (with at least ``FLUSH_MIN`` dispatches in it): a loop of small ops costs
one ``dispatch_workgroups`` each, and the device starts on a long stretch of work (a
training step's forward) while the host still records the rest instead of waiting for
the whole of it. After a wait (a synchronize, a readback) the device is idle, so the first
pass is submitted as soon as it holds ``IDLE_WORK`` workgroups, however young: a call that
ends in a synchronize (a layer's forward and backward, a step whose loss is read) then
runs on the device while the host records the rest, instead of starting there at its
end; small kernels (a host-bound stretch) do not reach it soon. A later pass is submitted
at once too when it holds ``HEAVY_WORK``, far more than ``IDLE_WORK``. With ``POLL_IDLE`` each
submit also asks for a completion callback, and a later pass that holds ``IDLE_WORK`` is
submitted as soon as a poll that does not block shows the device has finished the
earlier ones (off by default: see its note). A replay (``vtl.compile``) applies the same
rules. A wait opens the next pass before it blocks, so the first dispatch after it does
not pay for opening one.

Recording calls wgpu-native's compute-pass functions directly through cffi when
they are reachable (wgpu-py's wrappers add about 3 µs per dispatch); errors in
recorded commands are still raised, by ``end()``/``finish()`` at the flush.
Per-dispatch parameters are packed into the pipeline's 128-byte immediates
block: the words given, then zeros.

Every method that touches the open pass, submits or reads back holds the runtime lock
(``_runtime.LOCK``), so threads may record and read at the same time; a readback also
copies the calling thread's error buffer (``_errors``) when a kernel may have written it,
and raises the error it records.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from functools import partial
from threading import get_ident
from time import perf_counter, sleep

from . import _errors, _kernels, _runtime
from ._memory import KNOWN, set_known

FLUSH_EVERY = 2048
#: a pass recording for this long (seconds) with at least ``FLUSH_MIN`` dispatches is
#: submitted: a submit costs some tens of microseconds of host time
FLUSH_AFTER_S, FLUSH_MIN = 0.0005, 8
#: the first pass after a wait is submitted once its dispatches hold this many workgroups
#: (weighted by their work: ``_kernels.dispatch_work``)
IDLE_WORK = 2048
#: a later pass holding ``IDLE_WORK`` is submitted too once the device has finished all
#: that was submitted before it (a completion callback per submit, read by a poll that
#: does not block). Off: it shortens a single layer's call (attention, a convolution,
#: layer_norm: 4-17% on an H100), but in a host-bound stretch, where the device idles,
#: each large-enough dispatch becomes a submit of its own: eager GPT, Transformer and LSTM
#: steps took 19-29% longer with it on an H100
POLL_IDLE = False
#: an open pass holding this many weighted workgroups (a few hundred microseconds of device
#: work) is submitted whatever its age, so the device does not wait for the host's
#: recording of a long synchronized call (0: no such rule). H100, one process alternating:
#: causal attention at 512 keys 8-9% faster, eager Transformer, GPT and ResNet-18 steps
#: within their noise (+-4%); 2^16 sped up single convolutions 4% more but ResNet-18 steps
#: took 2-4% longer
HEAVY_WORK = 1 << 17
_MASK = 0xFFFFFFFF
_LOCK = _runtime.LOCK
_WG = 256
_NWORDS = _runtime.PARAM_BYTES // 4

try:  # the native entry points (wgpu-py's backend); the wrappers are the fallback
    from wgpu.backends.wgpu_native._ffi import ffi as _ffi
    from wgpu.backends.wgpu_native._ffi import lib as _lib

    _SET_PIPE = _lib.wgpuComputePassEncoderSetPipeline
    _SET_BG = _lib.wgpuComputePassEncoderSetBindGroup
    _SET_IMM = _lib.wgpuComputePassEncoderSetImmediates
    _DISPATCH = _lib.wgpuComputePassEncoderDispatchWorkgroups
    _POLL = _lib.wgpuDevicePoll
    _NULL = _ffi.NULL
except Exception:  # pragma: no cover - another wgpu backend
    _lib = _ffi = None

# Completion callbacks that only count (a poll on any thread may run them); waits spin on
# the counts. [work-done callbacks, buffer-map callbacks, status of the last map]
_counts = [0, 0, 0]


def _count_done(_status, *_) -> None:
    _counts[0] += 1


def _count_mapped(status, *_) -> None:
    _counts[2] = status
    _counts[1] += 1


def _callback_info(struct: str, fn):
    """A ``struct`` (``WGPU...CallbackInfo``) that has ``fn`` called on any thread's poll.

    The callback's C type is read from the struct, since wgpu-native's headers changed it
    (a message argument was added to the work-done callback)."""
    info = _ffi.new(struct + " *")
    ctype = dict(_ffi.typeof(struct).fields)["callback"].type
    info.mode = _lib.WGPUCallbackMode_AllowProcessEvents
    cb = _ffi.callback(ctype, fn)
    _KEEP.append(cb)
    info.callback = cb
    return info


_KEEP: list = []  # the C callbacks, alive for the process
try:
    _DONE_INFO = _callback_info("WGPUQueueWorkDoneCallbackInfo", _count_done)
    _MAP_INFO = _callback_info("WGPUBufferMapCallbackInfo", _count_mapped)
    _ON_DONE = _lib.wgpuQueueOnSubmittedWorkDone
    _MAP = _lib.wgpuBufferMapAsync
    _MAPPED_RANGE = _lib.wgpuBufferGetConstMappedRange
    _UNMAP = _lib.wgpuBufferUnmap
    _MAP_READ = _lib.WGPUMapMode_Read
    _MAP_OK = _lib.WGPUMapAsyncStatus_Success
except Exception:  # pragma: no cover - another wgpu backend or header
    _ON_DONE = None

#: how long a wait polls without blocking before it blocks (seconds)
SPIN_S = 0.002
#: how long after the device is idle a wait still waits for its callback (seconds)
LOST_S = 10.0
#: readbacks up to this many bytes reuse one staging buffer per size class
STAGING_MAX = 1 << 24
#: ``Recorder.read_later``'s staging buffers (larger reads happen when called)
LATER_MAX = 256

#: number of words -> pack(words...) into the full immediates block (zero padded)
_PACKS = [struct.Struct(f"<{n}I{4 * (_NWORDS - n)}x").pack for n in range(_NWORDS + 1)]


def pack(words) -> bytes:
    """The immediates block for ``words`` (signed values are stored two's complement)."""
    p = _PACKS[len(words)]
    try:
        return p(*words)
    except struct.error:
        return p(*[w & _MASK for w in words])


class Recorder:
    def __init__(self) -> None:
        self.encoder = None
        self.cpass = None
        self._handle = None
        self.pending = 0
        self.batch = 0
        self.submits = 0
        self.waits = 0  # host waits for the device: readbacks and synchronizes
        self.dispatches = 0
        self._pipeline = None
        self._opened = 0.0  # when the open pass began recording (perf_counter)
        self._ahead = False  # the open pass was opened during a wait and holds nothing yet
        self._idle = True  # nothing submitted since the last wait: the device is idle
        self._work = 0  # weighted workgroups in the open pass
        self._done_req = 0  # completion callbacks requested: _counts[0] reaches it when idle
        self._dev = None  # the device's native handle, for polls
        self._sync_buf = None
        self._stagings: dict = {}  # size class -> mappable staging buffer
        self._later: list = []  # free staging buffers of read_later's size
        self._keep: list = []  # objects the open pass uses that caches may drop
        #: thread id -> the capture recording that thread's dispatches (``capture.py``)
        self.captures: dict = {}

    def _open(self):
        rt = _runtime.get()
        self.encoder = rt.device.create_command_encoder()
        cp = self.cpass = self.encoder.begin_compute_pass()
        self._handle = cp._internal if _lib is not None else None
        self._pipeline = None
        self._opened = perf_counter()
        self._ahead = False
        return cp

    def _open_ahead(self) -> None:
        """Open the next pass while the host waits for the device (opening one costs tens of
        microseconds of host time that the first dispatch after the wait would otherwise
        pay); its age counts from its first dispatch."""
        if self.cpass is None:
            self._open()
            self._ahead = True

    def dispatch(self, kernel, bufs, words, groups: int, gy: int = 1, gz: int = 1,
                 dynamic=None) -> None:
        """Record ``kernel`` over ``groups`` x ``gy`` x ``gz`` workgroups.

        A 1-D grid above the per-dimension limit folds into x/y; kernels then
        number their groups ``wid.y * num_workgroups.x + wid.x``. ``dynamic`` lists the
        ``(position, DynamicScalars, encode)`` of words that a capture re-encodes from
        the scalars' values at each replay (``encode(values)`` gives the words).
        """
        if groups <= 0 or gy <= 0 or gz <= 0:
            return
        with _LOCK:
            self._record(kernel, _kernels.bind_group(kernel.layout, bufs), bufs, words,
                         groups, gy, gz, dynamic)

    def record(self, kernel, bg, bufs, words, groups: int, gy: int = 1, gz: int = 1,
               dynamic=None) -> None:
        """Record ``kernel`` with the bind group ``bg`` over the buffers ``bufs`` (``dynamic``
        as for :meth:`dispatch`)."""
        with _LOCK:
            self._record(kernel, bg, bufs, words, groups, gy, gz, dynamic)

    def _record(self, kernel, bg, bufs, words, groups: int, gy: int, gz: int,
                dynamic=None) -> None:
        """Record one dispatch (lock held): every dispatch goes through here."""
        cp = self.cpass
        if cp is None:
            cp = self._open()
        elif self._ahead:
            self._ahead = False
            self._opened = perf_counter()
        maxg = _runtime.get().max_groups
        if groups > maxg:
            if gy != 1 or gz != 1:
                raise ValueError(f"wgpu: a {groups}x{gy}x{gz} grid exceeds the dispatch limit")
            gy = -(-groups // maxg)
            groups = -(-groups // gy)
        h = self._handle
        if h is not None:
            if self._pipeline is not kernel.pipeline:
                _SET_PIPE(h, kernel.pipeline._internal)
                self._pipeline = kernel.pipeline
            _SET_BG(h, 0, bg._internal, 0, _NULL)
            _SET_IMM(h, 0, pack(words), 128)
            _DISPATCH(h, groups, gy, gz)
        else:
            if self._pipeline is not kernel.pipeline:
                cp.set_pipeline(kernel.pipeline)
                self._pipeline = kernel.pipeline
            cp.set_bind_group(0, bg)
            cp.set_immediates(0, pack(words), 0, 128)
            cp.dispatch_workgroups(groups, gy, gz)
        batch = self.batch
        for b in bufs:
            b.batch = batch
        if KNOWN:
            _forget_written(kernel.layout[2], bufs)
        if self.captures:
            cap = self.captures.get(get_ident())
            if cap is not None:
                cap.add(kernel, bg, bufs, words, groups, gy, gz, dynamic)
        self.pending += 1
        self.dispatches += 1
        self._work += _kernels.dispatch_work(kernel, words, groups * gy * gz)
        if self._work >= IDLE_WORK and self._work_due():
            self._flush()
            return
        if self.pending >= FLUSH_EVERY or self._aged():
            self._flush()

    def _work_due(self) -> bool:
        """Whether the open pass, holding at least ``IDLE_WORK``, is submitted now: the
        device is idle (after a wait, or found so with ``POLL_IDLE``) or the pass holds
        ``HEAVY_WORK``."""
        return self._idle or POLL_IDLE and self._device_idle() \
            or 0 < HEAVY_WORK <= self._work

    def _device_idle(self) -> bool:
        """Whether the device has finished everything submitted (with :data:`POLL_IDLE`,
        which callers check first: a poll that does not block runs the completion callbacks
        due)."""
        if _ON_DONE is None:
            return False
        if _counts[0] < self._done_req:
            if self._dev is None:
                self._dev = _runtime.get().device._internal
            _POLL(self._dev, False, _NULL)
        return _counts[0] >= self._done_req

    def replay(self, entries, bufs) -> None:
        """Record captured dispatches again (lock held): ``entries`` of ``(pipeline, bind
        group, immediates block, groups, gy, gz, weighted workgroups)`` (native handles where
        available), and ``bufs`` the buffers they use."""
        n = 0
        cp = self.cpass
        if cp is None:
            cp = self._open()
        elif self._ahead:
            self._ahead = False
            self._opened = perf_counter()
        h = self._handle
        pipe = None
        for pipeline, bg, block, groups, gy, gz, work in entries:
            if cp is None:  # a submit below ended the pass: open one for what follows
                cp = self._open()
                h = self._handle
                pipe = None
            if h is not None:
                if pipeline is not pipe:
                    _SET_PIPE(h, pipeline)
                    pipe = pipeline
                _SET_BG(h, 0, bg, 0, _NULL)
                _SET_IMM(h, 0, block, 128)
                _DISPATCH(h, groups, gy, gz)
            else:
                if pipeline is not pipe:
                    cp.set_pipeline(pipeline)
                    pipe = pipeline
                cp.set_bind_group(0, bg)
                cp.set_immediates(0, block, 0, 128)
                cp.dispatch_workgroups(groups, gy, gz)
            n += 1
            self._work += work
            if self.pending + n >= FLUSH_EVERY or self._work >= IDLE_WORK \
                    and self._work_due():
                self.pending += n
                self.dispatches += n
                n = 0
                self._flush()
                cp = None
        self._pipeline = None  # the next _record sets its own pipeline
        self.pending += n
        self.dispatches += n
        batch = self.batch
        for b in bufs:
            b.batch = batch
        if self._aged():
            self._flush()

    def _aged(self) -> bool:
        """Whether the open pass has recorded long enough to submit (``FLUSH_AFTER_S``, with
        at least ``FLUSH_MIN`` dispatches): the device then starts on it while the host
        records on."""
        return self.pending >= FLUSH_MIN and perf_counter() - self._opened > FLUSH_AFTER_S

    def _no_wait_in_capture(self) -> None:
        if self.captures and get_ident() in self.captures:
            raise RuntimeError(
                "wgpu: a read of device data (or a synchronize) while a capture records this "
                "thread's work (vtl.compile); a captured function must leave its values on "
                "the device")

    def keep(self, obj) -> None:
        """Keep ``obj`` (a bind group dropped from a cache) alive until the next flush."""
        with _LOCK:
            if self.cpass is not None:
                self._keep.append(obj)

    def flush(self) -> None:
        """Submit recorded work (does not wait)."""
        with _LOCK:
            self._flush()

    def _flush(self) -> None:
        if self.cpass is None or self._ahead:  # nothing open, or an empty pass opened ahead
            return
        self.cpass.end()
        self._submit(self.encoder)

    def _submit(self, encoder) -> None:
        queue = _runtime.get().queue
        queue.submit([encoder.finish()])
        if POLL_IDLE and _ON_DONE is not None:
            _ON_DONE(queue._internal, _DONE_INFO[0])
            self._done_req += 1
        self.cpass = self.encoder = self._pipeline = self._handle = None
        self._ahead = False
        self._keep = []
        self.pending = 0
        self.batch += 1
        self.submits += 1
        self._idle = False
        self._work = 0

    def synchronize(self) -> None:
        """Submit and wait until the device is idle; raise the error a kernel recorded in
        the calling thread's error buffer, if any."""
        with _LOCK:
            self._no_wait_in_capture()
            err = _errors.pending()
            if err is not None:  # reading the error buffer is the wait
                _errors.check(self._read(err.gpu, 0, _errors.NBYTES, None))
                return
            self._synchronize()

    def _synchronize(self) -> None:
        self._flush()
        self.waits += 1
        rt = _runtime.get()
        if _ON_DONE is not None:
            _ON_DONE(rt.queue._internal, _DONE_INFO[0])
            self._done_req += 1
            self._open_ahead()
            _wait(rt.device._internal, 0, self._done_req)
            self._idle = True
            return
        if self._sync_buf is None:  # pragma: no cover - another wgpu backend
            U = rt.wgpu.BufferUsage
            self._sync_buf = rt.device.create_buffer(size=4, usage=U.STORAGE | U.COPY_SRC)
        rt.queue.read_buffer(self._sync_buf, 0, 4)
        self._idle = True

    def read(self, gpu, offset: int, size: int):
        """The ``size`` bytes of the buffer ``gpu`` from ``offset`` (both multiples of 4)
        after every recorded operation, as a ``bytes``-like object.

        The copy to a staging buffer goes into the same submit as the recorded work, and
        the staging buffer's mapping is the wait (see :func:`_wait`). When a kernel may
        have written the calling thread's error buffer, its words come along in the same
        copy and the error they record is raised (see ``_errors``).
        """
        with _LOCK:
            self._no_wait_in_capture()
            err = _errors.pending()
            if err is None:
                return self._read(gpu, offset, size, None)
            out = self._read(gpu, offset, size, err)
            _errors.check(out[size:])
            return out[:size]

    def _read(self, gpu, offset: int, size: int, err):
        self.waits += 1
        rt = _runtime.get()
        total = size + (_errors.NBYTES if err is not None else 0)
        if _ON_DONE is None:  # pragma: no cover - another wgpu backend or header
            self._flush()
            out = rt.queue.read_buffer(gpu, offset, size)
            if err is not None:
                out = bytes(out) + bytes(rt.queue.read_buffer(err.gpu, 0, _errors.NBYTES))
            self._idle = True
            return out
        staging, reuse = self._staging(rt, total)
        encoder = self.encoder
        if encoder is None:
            encoder = rt.device.create_command_encoder()
        else:
            self.cpass.end()
        encoder.copy_buffer_to_buffer(gpu, offset, staging, 0, size)
        if err is not None:
            encoder.copy_buffer_to_buffer(err.gpu, 0, staging, size, _errors.NBYTES)
        self._submit(encoder)
        self._open_ahead()
        try:
            return _mapped_bytes(staging, total)
        finally:
            self._idle = True
            if not reuse:
                staging.destroy()

    def read_later(self, gpu, offset: int, size: int) -> Callable[[], bytes]:
        """A function giving the ``size`` bytes of ``gpu`` from ``offset`` (multiples of 4)
        as they are after the operations recorded so far, for a value needed later (an
        optimizer's skip flag, read at its next step).

        The copy to a staging buffer of its own is recorded now, between the open pass's
        dispatches, and goes with their submit; the call maps that buffer, which waits
        only for that submit, not for the work recorded after it (a readback waits for
        everything). Errors recorded by kernels stay pending for the next :meth:`read`.
        Under a capture (the copy would be recorded into it) and for more than
        ``LATER_MAX`` bytes, the read happens when called."""
        if size > LATER_MAX or _ON_DONE is None:
            return partial(self._read_now, gpu, offset, size)
        with _LOCK:
            if self.captures and get_ident() in self.captures:
                return partial(self._read_now, gpu, offset, size)
            rt = _runtime.get()
            staging = self._later.pop() if self._later else rt.device.create_buffer(
                size=LATER_MAX, usage=rt.wgpu.BufferUsage.MAP_READ | rt.wgpu.BufferUsage.COPY_DST)
            if self.cpass is None:
                self._open()
            self.cpass.end()
            self.encoder.copy_buffer_to_buffer(gpu, offset, staging, 0, size)
            cp = self.cpass = self.encoder.begin_compute_pass()
            self._handle = cp._internal if _lib is not None else None
            self._pipeline = None
            if self._ahead:  # the pass now holds work: it is submitted like any other
                self._ahead = False
                self._opened = perf_counter()
            batch = self.batch
        return partial(self._read_copied, staging, size, batch)

    def _read_now(self, gpu, offset: int, size: int) -> bytes:
        with _LOCK:
            self._no_wait_in_capture()
            return self._read(gpu, offset, size, None)

    def _read_copied(self, staging, size: int, batch: int) -> bytes:
        """The bytes that :meth:`read_later` copied into ``staging`` (in submit ``batch``)."""
        with _LOCK:
            self._no_wait_in_capture()
            if self.batch == batch:  # the copy is still in the open pass's encoder
                self._flush()
            self.waits += 1
            try:
                return _mapped_bytes(staging, size)
            finally:
                self._later.append(staging)

    def _staging(self, rt, size: int):
        """A mappable buffer of at least ``size`` bytes and whether it is kept for reuse.

        Only :meth:`read` maps it, through the native calls (wgpu-py's map state of the
        object is not used)."""
        U = rt.wgpu.BufferUsage
        if size > STAGING_MAX:
            return rt.device.create_buffer(size=size, usage=U.MAP_READ | U.COPY_DST), False
        cap = max(256, 1 << (size - 1).bit_length())
        buf = self._stagings.get(cap)
        if buf is None:
            buf = self._stagings[cap] = rt.device.create_buffer(
                size=cap, usage=U.MAP_READ | U.COPY_DST)
        return buf, True


def _mapped_bytes(staging, size: int) -> bytes:
    """The first ``size`` bytes of the mappable buffer ``staging`` once the submit holding
    its copy is done: mapped, waited for (:func:`_wait`), copied out and unmapped."""
    handle = staging._internal
    _MAP(handle, _MAP_READ, 0, size, _MAP_INFO[0])
    _wait(_runtime.get().device._internal, 1)
    try:
        if _counts[2] != _MAP_OK:
            raise RuntimeError(f"wgpu: mapping a staging buffer failed (status {_counts[2]})")
        return bytes(_ffi.buffer(_MAPPED_RANGE(handle, 0, size), size))
    finally:
        _UNMAP(handle)


def _wait(dev, which: int, target: int | None = None) -> None:
    """Wait until the callbacks of kind ``which`` (0: work done, 1: mapped) reach ``target``
    (default: the one just requested; work-done callbacks of earlier submits may be due
    first, so a wait for all work passes the count that the last request makes).

    It polls without blocking for up to ``SPIN_S`` first: a blocking wait costs 50-200
    microseconds of thread wake-ups (more on a busy host), as much as a small kernel
    takes. The end is told by the callback, not by the poll's return value (whose upper
    bytes are not reliable).
    """
    if target is None:
        target = _counts[which] + 1
    end = perf_counter() + SPIN_S
    blocked = 0.0
    while _counts[which] < target:
        now = perf_counter()
        if now <= end:
            _POLL(dev, False, _NULL)
        elif not blocked:
            _POLL(dev, True, _NULL)  # every submission done; the callback runs in a poll
            blocked = perf_counter()
        elif now - blocked < LOST_S:  # it may be running on wgpu-py's poll thread
            sleep(1e-4)
            _POLL(dev, False, _NULL)
        else:
            raise RuntimeError(f"wgpu: the device reported no completion within {LOST_S} s "
                               "after it was idle (device lost?)")


REC = Recorder()


def _forget_written(sig, bufs) -> None:
    """Drop the host-known ranges of the buffers bound for writing (``sig``: 'r'/'w')."""
    for s, b in zip(sig, bufs, strict=False):
        if s == "w" and b.known is not None:
            set_known(b, None)


def synchronize() -> None:
    """Wait for every recorded operation to finish on the device."""
    REC.synchronize()


def groups_for(n: int, per_group: int = _WG) -> int:
    return -(-n // per_group)
