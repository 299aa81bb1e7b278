"""``vtl.backends.wgpu.profile.kernel_times``: every dispatch in the block timed under its
kernel's name (across query sets), the recorder left as it was (also after an error), the
capacity, nesting and a device without the timestamp features."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
wx = pytest.importorskip("vtl.backends.wgpu")
if not wx.is_available():
    pytest.skip("wgpu backend unavailable", allow_module_level=True)

from vtl.backends.wgpu import _runtime, profile  # noqa: E402
from vtl.backends.wgpu._recorder import REC  # noqa: E402

pytestmark = pytest.mark.skipif(not profile.available(),
                                reason="the adapter has no timestamp queries inside passes")


def _work():
    """Five dispatches of three kernels, the result read back."""
    a = wx.asarray(np.arange(4096, dtype=np.float32))
    b = wx.exp(a * 1e-3)
    c = wx.sum(b)
    d = wx.matmul(wx.reshape(b, (64, 64)), wx.reshape(a, (64, 64)))
    return float(c), np.asarray(d)


def _names(fn) -> list[str]:
    """The kernel names ``fn`` dispatches, logged at the recorder."""
    names: list[str] = []
    record = REC._record

    def logged(kernel, *args, **kwargs):
        names.append(kernel.name)
        return record(kernel, *args, **kwargs)

    REC._record = logged
    try:
        fn()
    finally:
        del REC._record
    return names


def test_every_dispatch_timed_by_name(monkeypatch):
    monkeypatch.setattr(profile, "_SET_SIZE", 4)  # two dispatches per query set
    want = _names(_work)
    assert len(want) >= 3
    with profile.kernel_times() as times:
        got = _work()
    assert "_record" not in vars(REC)
    assert times.names == want and times.untimed == 0
    assert times.durations.shape == times.starts.shape == (len(want),)
    assert (times.durations >= 0).all() and (times.starts >= 0).all()
    assert times.starts.min() == 0 and times.span >= times.durations.max()
    table = times.by_kernel()
    assert sum(n for n, _ in table.values()) == len(want)
    assert list(table) == sorted(table, key=lambda k: -table[k][1])
    assert abs(sum(t for _, t in table.values()) - times.busy) < 1e-9
    text = times.table(top=2)
    assert text.startswith(f"{len(want)} dispatches") and len(text.splitlines()) == 3
    np.testing.assert_allclose(got[1], _work()[1])  # the timed work computed the same


def test_a_long_block_is_timed_whole(monkeypatch):
    """The recorder's submit by age is off inside a timed block (it would end the pass
    between a dispatch and its end timestamp) and back on after it."""
    from vtl.backends.wgpu import _recorder

    monkeypatch.setattr(_recorder, "FLUSH_AFTER_S", 0.0)
    a = wx.ones((64, 64))
    with profile.kernel_times() as times:
        for _ in range(3 * _recorder.FLUSH_MIN):
            a = a * 1.0
        assert _recorder.FLUSH_AFTER_S == float("inf")
    assert _recorder.FLUSH_AFTER_S == 0.0
    assert len(times.names) == 3 * _recorder.FLUSH_MIN and times.untimed == 0
    np.testing.assert_array_equal(np.asarray(a), np.ones((64, 64), np.float32))


def test_a_block_right_after_a_wait_is_timed_whole(monkeypatch):
    """The idle rule (submit the first pass after a wait once it holds ``IDLE_WORK``
    workgroups) is off inside a timed block, which begins with a wait, and back on after
    it: dispatches as large as the rule's threshold are timed like any other."""
    from vtl.backends.wgpu import _recorder

    monkeypatch.setattr(_recorder, "IDLE_WORK", 1)
    a = wx.ones((64, 64))
    with profile.kernel_times() as times:
        for _ in range(4):
            a = a * 2.0
        assert _recorder.IDLE_WORK == float("inf")
    assert _recorder.IDLE_WORK == 1
    assert len(times.names) == 4 and times.untimed == 0 and times.busy >= 0
    np.testing.assert_array_equal(np.asarray(a), np.full((64, 64), 16.0, np.float32))


def test_capacity_errors_and_nesting(monkeypatch):
    with profile.kernel_times(capacity=2) as times:
        _work()
    assert len(times.names) == 2 and times.untimed >= 1
    assert "untimed" not in times.table() and "not timed" in times.table()
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="capacity must be a positive int"):
            with profile.kernel_times(capacity=bad):
                pass
    with profile.kernel_times():
        with pytest.raises(RuntimeError, match="do not nest"):
            with profile.kernel_times():
                pass
    with pytest.raises(ZeroDivisionError):  # the block's error passes; the recorder is reset
        with profile.kernel_times():
            _work()
            1 / 0  # noqa: B018
    assert "_record" not in vars(REC)
    with profile.kernel_times() as empty:
        pass
    assert empty.names == [] and empty.span == 0.0 and empty.busy == 0.0
    rt = _runtime.get()
    monkeypatch.setattr(rt, "features", rt.features - {"timestamp-query-inside-passes"})
    assert not profile.available()
    with pytest.raises(RuntimeError, match="lacks timestamp-query-inside-passes"):
        with profile.kernel_times():
            pass
