"""Device time per kernel on the wgpu backend: :func:`kernel_times` writes a GPU timestamp
before and after every dispatch recorded inside it (the adapter's ``timestamp-query`` and
``timestamp-query-inside-passes`` features) and, when it ends, reads them back as each
dispatch's duration under its kernel's name. It is what a CUDA profiler's kernel table
gives for CuPy, for finding where a step's device time goes on any GPU::

    from vtl.backends.wgpu.profile import kernel_times

    with kernel_times() as times:
        train_step()
    print(times.table())

Only eager dispatches are timed (a ``vtl.compile`` replay records none), at most
``capacity`` of them. The timestamps are taken in the command stream: dispatches that the
GPU overlaps share time, so the durations may add up to more than :attr:`KernelTimes.span`.
Timing adds a little work around every dispatch; the totals are for ranking kernels, not
for timing steps (use the benchmarks for that).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from . import _recorder, _runtime
from ._recorder import FLUSH_EVERY, REC

__all__ = ["KernelTimes", "available", "kernel_times"]

_FEATURES = ("timestamp-query", "timestamp-query-inside-passes")
#: timestamps per query set (WebGPU's limit on one set)
_SET_SIZE = 4096


def available() -> bool:
    """Whether the device can time dispatches (both timestamp features)."""
    return all(f in _runtime.get().features for f in _FEATURES)


@dataclass
class KernelTimes:
    """The timed dispatches: ``names[i]`` ran from ``starts[i]`` for ``durations[i]``
    seconds (times from the first timestamp); filled when :func:`kernel_times` ends."""

    names: list[str] = field(default_factory=list)
    starts: np.ndarray = field(default_factory=lambda: np.zeros(0))
    durations: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: dispatches recorded after ``capacity`` was reached (not timed)
    untimed: int = 0

    @property
    def span(self) -> float:
        """Seconds from the first dispatch's start to the last one's end."""
        if not self.names:
            return 0.0
        return float(np.max(self.starts + self.durations))

    @property
    def busy(self) -> float:
        """The sum of the dispatches' durations, in seconds."""
        return float(self.durations.sum())

    def by_kernel(self) -> dict[str, tuple[int, float]]:
        """``name -> (dispatches, seconds)``, the longest total first."""
        out: dict[str, list] = {}
        for name, d in zip(self.names, self.durations.tolist(), strict=True):
            e = out.setdefault(name, [0, 0.0])
            e[0] += 1
            e[1] += d
        return {k: (n, t) for k, (n, t) in sorted(out.items(), key=lambda kv: -kv[1][1])}

    def table(self, top: int = 30, per: int = 1) -> str:
        """The kernels by total time, one line each (milliseconds per ``per`` calls of the
        timed code, e.g. per step)."""
        lines = [f"{len(self.names) / per:.0f} dispatches, busy {1e3 * self.busy / per:.3f} ms, "
                 f"span {1e3 * self.span / per:.3f} ms (per {per})"]
        for name, (n, t) in list(self.by_kernel().items())[:top]:
            lines.append(f"{1e3 * t / per:10.3f} ms {n / per:8.1f}x  {name}")
        if self.untimed:
            lines.append(f"({self.untimed} dispatches past the capacity were not timed)")
        return "\n".join(lines)


#: whether a kernel_times block is under way (one at a time)
_timing = False


@contextmanager
def kernel_times(capacity: int = 4096) -> Iterator[KernelTimes]:
    """Time every dispatch recorded in the block (up to ``capacity``); the
    :class:`KernelTimes` it yields is filled when the block ends. Work recorded before the
    block is finished first, so none of it is counted. Raises ``RuntimeError`` where the
    device lacks the timestamp features."""
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
        raise ValueError(f"kernel_times(): capacity must be a positive int, got {capacity!r}")
    rt = _runtime.get()
    missing = [f for f in _FEATURES if f not in rt.features]
    if missing:
        raise RuntimeError(f"kernel_times(): the wgpu device lacks {', '.join(missing)} "
                           f"(adapter: {rt.adapter.info.get('device', '?')})")
    global _timing
    if _timing:
        raise RuntimeError("kernel_times(): already timing (blocks do not nest)")
    REC.synchronize()
    sets: list = []  # query sets of _SET_SIZE timestamps, made as the dispatches need them
    names: list[str] = []
    result = KernelTimes()
    record = REC._record

    def timed(kernel, *args, **kwargs):
        if len(names) >= capacity:
            result.untimed += 1
            return record(kernel, *args, **kwargs)
        if REC.pending + 1 >= FLUSH_EVERY:  # the dispatch would end the pass: end it first
            REC._flush()
        if REC.cpass is None:
            REC._open()
        q, i = divmod(2 * len(names), _SET_SIZE)
        if q == len(sets):
            sets.append(rt.device.create_query_set(type="timestamp", count=_SET_SIZE))
        REC.cpass._write_timestamp(sets[q], i)
        record(kernel, *args, **kwargs)
        REC.cpass._write_timestamp(sets[q], i + 1)
        names.append(kernel.name)

    # a submit by age or by the idle rule inside record() would end the pass between a
    # dispatch and its end timestamp: timed blocks submit by count only
    age, idle = _recorder.FLUSH_AFTER_S, _recorder.IDLE_WORK
    _recorder.FLUSH_AFTER_S = _recorder.IDLE_WORK = float("inf")
    REC._record = timed
    _timing = True
    try:
        yield result
    finally:
        _timing = False
        del REC._record
        _recorder.FLUSH_AFTER_S, _recorder.IDLE_WORK = age, idle
        REC.synchronize()
    if names:
        left = 2 * len(names)
        parts = []
        for qs in sets:
            parts.append(_read(rt, qs, min(left, _SET_SIZE)))
            left -= _SET_SIZE
        stamps = np.concatenate(parts).reshape(-1, 2)
        first = int(stamps[:, 0].min())
        result.names = names
        result.starts = (stamps[:, 0] - first) * 1e-9
        result.durations = np.maximum(stamps[:, 1].astype(np.int64)
                                      - stamps[:, 0].astype(np.int64), 0) * 1e-9
    for qs in sets:
        qs.destroy()


def _read(rt, queries, count: int) -> np.ndarray:
    """The first ``count`` timestamps of ``queries`` (nanoseconds, as uint64)."""
    usage = rt.wgpu.BufferUsage
    buf = rt.device.create_buffer(size=8 * count, usage=usage.QUERY_RESOLVE | usage.COPY_SRC)
    try:
        enc = rt.device.create_command_encoder()
        enc.resolve_query_set(queries, 0, count, buf, 0)
        rt.queue.submit([enc.finish()])
        return np.frombuffer(bytes(rt.queue.read_buffer(buf, 0, 8 * count)), dtype=np.uint64)
    finally:
        buf.destroy()
