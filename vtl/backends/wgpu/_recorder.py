"""The recorder: dispatches go into one open compute pass.

Work is submitted only when data must reach the host (a readback), on
:func:`synchronize`, or every ``FLUSH_EVERY`` dispatches, so a loop of small
ops costs one ``dispatch_workgroups`` each and no submit.

Recording calls wgpu-native's compute-pass functions directly through cffi when
they are reachable (wgpu-py's wrappers add about 3 µs per dispatch); errors in
recorded commands are still raised, by ``end()``/``finish()`` at the flush.
Per-dispatch parameters are packed into the pipeline's 128-byte immediates
block: the words given, then zeros.
"""

from __future__ import annotations

import struct

from . import _kernels, _runtime
from ._memory import KNOWN, set_known

FLUSH_EVERY = 2048
_MASK = 0xFFFFFFFF
_WG = 256
_NWORDS = _runtime.PARAM_BYTES // 4

try:  # the native entry points (wgpu-py's backend); the wrappers are the fallback
    from wgpu.backends.wgpu_native._ffi import ffi as _ffi
    from wgpu.backends.wgpu_native._ffi import lib as _lib

    _SET_PIPE = _lib.wgpuComputePassEncoderSetPipeline
    _SET_BG = _lib.wgpuComputePassEncoderSetBindGroup
    _SET_IMM = _lib.wgpuComputePassEncoderSetImmediates
    _DISPATCH = _lib.wgpuComputePassEncoderDispatchWorkgroups
    _NULL = _ffi.NULL
except Exception:  # pragma: no cover - another wgpu backend
    _lib = None

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
        self.dispatches = 0
        self._pipeline = None
        self._sync_buf = None
        self._keep: list = []  # objects the open pass uses that caches may drop

    def _open(self):
        rt = _runtime.get()
        self.encoder = rt.device.create_command_encoder()
        cp = self.cpass = self.encoder.begin_compute_pass()
        self._handle = cp._internal if _lib is not None else None
        self._pipeline = None
        return cp

    def dispatch(self, kernel, bufs, words, groups: int, gy: int = 1, gz: int = 1) -> None:
        """Record ``kernel`` over ``groups`` x ``gy`` x ``gz`` workgroups.

        A 1-D grid above the per-dimension limit folds into x/y; kernels then
        number their groups ``wid.y * num_workgroups.x + wid.x``.
        """
        if groups <= 0 or gy <= 0 or gz <= 0:
            return
        self.record(kernel, _kernels.bind_group(kernel.layout, bufs), bufs, words,
                    groups, gy, gz)

    def record(self, kernel, bg, bufs, words, groups: int, gy: int = 1, gz: int = 1) -> None:
        """Record ``kernel`` with the bind group ``bg`` over the buffers ``bufs``."""
        cp = self.cpass
        if cp is None:
            cp = self._open()
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
        self.pending += 1
        self.dispatches += 1
        if self.pending >= FLUSH_EVERY:
            self.flush()

    def keep(self, obj) -> None:
        """Keep ``obj`` (a bind group dropped from a cache) alive until the next flush."""
        if self.cpass is not None:
            self._keep.append(obj)

    def flush(self) -> None:
        """Submit recorded work (does not wait)."""
        if self.cpass is None:
            return
        self.cpass.end()
        _runtime.get().queue.submit([self.encoder.finish()])
        self.cpass = self.encoder = self._pipeline = self._handle = None
        self._keep = []
        self.pending = 0
        self.batch += 1
        self.submits += 1

    def synchronize(self) -> None:
        """Submit and wait until the device is idle (a tiny readback serves as the fence)."""
        self.flush()
        rt = _runtime.get()
        if self._sync_buf is None:
            U = rt.wgpu.BufferUsage
            self._sync_buf = rt.device.create_buffer(size=4, usage=U.STORAGE | U.COPY_SRC)
        rt.queue.read_buffer(self._sync_buf, 0, 4)


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
