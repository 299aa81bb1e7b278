"""The recorder: dispatches go into one open compute pass.

Work is submitted only when data must reach the host (a readback), on
:func:`synchronize`, or every ``FLUSH_EVERY`` dispatches, so a loop of small
ops costs one ``dispatch_workgroups`` each and no submit.
"""

from __future__ import annotations

import struct

from . import _kernels, _runtime

FLUSH_EVERY = 2048
_pack = struct.Struct("32I").pack
_MASK = 0xFFFFFFFF
_WG = 256


class Recorder:
    def __init__(self) -> None:
        self.encoder = None
        self.cpass = None
        self.pending = 0
        self.batch = 0
        self.submits = 0
        self.dispatches = 0
        self._pipeline = None
        self._sync_buf = None

    def dispatch(self, kernel, bufs, words, groups: int, gy: int = 1, gz: int = 1) -> None:
        """Record ``kernel`` over ``groups`` x ``gy`` x ``gz`` workgroups.

        A 1-D grid above the per-dimension limit folds into x/y; kernels then
        number their groups ``wid.y * num_workgroups.x + wid.x``.
        """
        if groups <= 0 or gy <= 0 or gz <= 0:
            return
        cp = self.cpass
        if cp is None:
            dev = _runtime.get().device
            self.encoder = dev.create_command_encoder()
            cp = self.cpass = self.encoder.begin_compute_pass()
            self._pipeline = None
        if self._pipeline is not kernel.pipeline:
            cp.set_pipeline(kernel.pipeline)
            self._pipeline = kernel.pipeline
        cp.set_bind_group(0, _kernels.bind_group(kernel.layout, bufs))
        n = len(words)
        if n < 32:
            words = list(words) + [0] * (32 - n)
        cp.set_immediates(0, _pack(*[w & _MASK for w in words]), 0, 128)
        maxg = _runtime.get().max_groups
        if groups <= maxg:
            cp.dispatch_workgroups(groups, gy, gz)
        else:
            if gy != 1 or gz != 1:
                raise ValueError(f"wgpu: a {groups}x{gy}x{gz} grid exceeds the dispatch limit")
            y = -(-groups // maxg)
            cp.dispatch_workgroups(-(-groups // y), y, 1)
        batch = self.batch
        for b in bufs:
            b.batch = batch
        self.pending += 1
        self.dispatches += 1
        if self.pending >= FLUSH_EVERY:
            self.flush()

    def flush(self) -> None:
        """Submit recorded work (does not wait)."""
        if self.cpass is None:
            return
        self.cpass.end()
        _runtime.get().queue.submit([self.encoder.finish()])
        self.cpass = self.encoder = self._pipeline = None
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


def synchronize() -> None:
    """Wait for every recorded operation to finish on the device."""
    REC.synchronize()


def groups_for(n: int, per_group: int = _WG) -> int:
    return -(-n // per_group)
