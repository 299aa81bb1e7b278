"""The wgpu library's engine: views, pool, recorder, dispatch folding, dtypes, limits."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
xp = pytest.importorskip("vtl.backends.wgpu")
if not xp.is_available():
    pytest.skip("no WebGPU adapter", allow_module_level=True)

from vtl.backends.wgpu import _memory, _recorder, _runtime  # noqa: E402


def host(a):
    return xp.to_numpy(a)


def test_runtime_info_reports_adapter_features_and_dtypes():
    info = xp.runtime_info()
    assert info["adapter"] and "immediates" in info["features"]
    assert info["max_storage_binding"] > 0
    dts = xp.__array_namespace_info__().dtypes()
    assert {"bool", "int8", "int32", "uint32", "float32"} <= set(dts)
    feats = set(info["features"])
    assert ("float64" in dts) == ("shader-f64" in feats)
    assert ("int64" in dts) == ("shader-int64" in feats)
    assert all(isinstance(d, np.dtype) for d in dts.values())


def test_namespace_from_array():
    a = xp.ones(3)
    assert a.__array_namespace__() is xp
    assert a.device == xp.__array_namespace_info__().default_device()


def test_views_share_storage_copies_do_not():
    a = xp.asarray(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    for v in (xp.reshape(a, (6, 4)), xp.permute_dims(a, (2, 0, 1)), a[:, 1:, ::2],
              xp.expand_dims(a, axis=1), xp.broadcast_to(a[:, :1], (2, 5, 4)), a.mT,
              xp.squeeze(a[:1], axis=0), a[..., ::-1]):
        assert v._st is a._st
    t = xp.permute_dims(a, (1, 0, 2))
    r = xp.reshape(t, (-1,))  # not expressible as a view of t
    assert r._st is not a._st
    np.testing.assert_array_equal(host(r), np.arange(24).reshape(2, 3, 4).transpose(1, 0, 2)
                                  .reshape(-1))
    with pytest.raises(ValueError, match="copy"):
        xp.reshape(t, (-1,), copy=False)


def test_writes_through_a_view_reach_the_base():
    a = xp.zeros((3, 4))
    v = a[1:, ::2]
    v[...] = 5.0
    expect = np.zeros((3, 4), np.float32)
    expect[1:, ::2] = 5
    np.testing.assert_array_equal(host(a), expect)


def test_pool_reuses_buffers():
    x = xp.ones((256,))
    for _ in range(3):
        x = x + 1.0
    before = xp.memory_info()["buffers_created"]
    for _ in range(50):
        x = x + 1.0
    assert xp.memory_info()["buffers_created"] == before
    assert float(x[0]) == 54.0


def test_collected_array_returns_its_buffer():
    info0 = xp.memory_info()
    a = xp.ones((1000,))
    assert xp.memory_info()["in_use"] >= info0["in_use"] + 4000
    del a
    info1 = xp.memory_info()
    assert info1["in_use"] == info0["in_use"]
    assert info1["peak"] >= info0["in_use"] + 4000


def test_no_hidden_readbacks_in_a_loop_of_elementwise_ops(monkeypatch):
    monkeypatch.setattr(_recorder, "FLUSH_AFTER_S", float("inf"))  # no submit on age
    a = xp.ones((64, 64))
    b = xp.full((64,), 2.0)
    xp.synchronize()
    s0 = _recorder.REC.submits
    for _ in range(100):
        a = xp.tanh(a * b + 0.25) - a / 3.0
    assert _recorder.REC.submits == s0  # recorded, nothing submitted
    val = float(xp.sum(a))  # the readback is the one sync point
    assert _recorder.REC.submits == s0 + 1
    ref = np.ones((64, 64), np.float32)
    for _ in range(100):
        ref = np.tanh(ref * 2 + 0.25) - ref / 3
    assert val == pytest.approx(float(ref.sum()), rel=1e-4)


def test_a_long_recording_is_submitted_while_the_host_records_on(monkeypatch):
    """A pass that has recorded for ``FLUSH_AFTER_S`` with at least ``FLUSH_MIN``
    dispatches is submitted, so the device starts on it; values are unchanged."""
    monkeypatch.setattr(_recorder, "FLUSH_AFTER_S", 0.0)
    a = xp.ones((64, 64))
    xp.synchronize()
    s0 = _recorder.REC.submits
    for _ in range(_recorder.FLUSH_MIN - 1):
        a = a * 0.5
    assert _recorder.REC.submits == s0  # fewer than FLUSH_MIN dispatches: still open
    a = a + 1.0
    assert _recorder.REC.submits == s0 + 1 and _recorder.REC.pending == 0
    for _ in range(3 * _recorder.FLUSH_MIN):
        a = a * 1.0
    assert _recorder.REC.submits == s0 + 4
    np.testing.assert_array_equal(host(a), np.full((64, 64), 1 + 0.5 ** 7, np.float32))


def test_the_first_pass_after_a_wait_is_submitted_once_it_holds_enough_work(monkeypatch):
    """After a wait the device is idle: the open pass is submitted as soon as its dispatches
    hold ``IDLE_WORK`` workgroups, and later passes wait for the age rule again until the
    next wait; values are unchanged."""
    monkeypatch.setattr(_recorder, "FLUSH_AFTER_S", float("inf"))
    monkeypatch.setattr(_recorder, "POLL_IDLE", False)  # the device counts as busy
    rec = _recorder.REC
    a = xp.ones((64, 64))
    xp.synchronize()
    monkeypatch.setattr(_recorder, "IDLE_WORK", 1 << 30)
    s0 = rec.submits
    a = a * 0.5
    assert rec.submits == s0 and rec.pending == 1 and rec._work > 0  # too little work
    monkeypatch.setattr(_recorder, "IDLE_WORK", rec._work + 1)
    a = a + 1.0
    assert rec.submits == s0 + 1 and rec.pending == 0  # submitted while the host goes on
    for _ in range(5):
        a = a * 1.0
    assert rec.submits == s0 + 1 and rec.pending == 5  # the device is busy: no hurry
    xp.synchronize()
    assert rec.submits == s0 + 2
    a = a * 2.0
    a = a * 0.5
    assert rec.submits == s0 + 3 and rec.pending == 0  # idle again after the wait
    np.testing.assert_array_equal(host(a), np.full((64, 64), 1.5, np.float32))
    # a product's workgroup counts as the elementwise ones its tile's work is worth
    from vtl.backends.wgpu._dtypes import float32
    from vtl.backends.wgpu._linalg import matmul_kernel

    assert matmul_kernel(float32, (False, False)).weight == 4
    assert matmul_kernel(float32, (False, False), big=True).weight == 16
    xp.synchronize()
    monkeypatch.setattr(_recorder, "IDLE_WORK", 1 << 30)
    w0 = rec._work
    c = xp.ones((64, 128)) @ xp.ones((128, 64))
    assert rec._work - w0 >= 4  # at least the product's one 64x64 tile
    np.testing.assert_array_equal(host(c), np.full((64, 64), 128.0, np.float32))


def test_a_deep_products_workgroups_weigh_by_its_depth(monkeypatch):
    """A product's (or convolution's) workgroup weighs its kernel's weight per 64 of depth:
    a deep one alone holds IDLE_WORK and goes to the idle device at once, with the values
    of a shallow one."""
    from vtl.backends.wgpu import _kernels
    from vtl.backends.wgpu._dtypes import float32
    from vtl.backends.wgpu._linalg import matmul_kernel

    k = matmul_kernel(float32, (False, False))
    assert k.deep and _kernels.dispatch_work(k, [64, 64, 64], 3) == 3 * 4
    assert _kernels.dispatch_work(k, [64, 64, 16], 3) == 3 * 4  # never below the weight
    assert _kernels.dispatch_work(k, [64, 64, 4096], 3) == 3 * 4 * 64
    kb = matmul_kernel(float32, (False, False), big=True)
    assert _kernels.dispatch_work(kb, [128, 128, 2304], 1) == 16 * 36
    other = _kernels.Kernel(None, None, "reduce", 1)  # not a product: its depth word is not K
    assert not other.deep and _kernels.dispatch_work(other, [64, 64, 4096], 3) == 3

    monkeypatch.setattr(_recorder, "FLUSH_AFTER_S", float("inf"))
    monkeypatch.setattr(_recorder, "POLL_IDLE", False)
    rec = _recorder.REC
    rng = np.random.default_rng(5)
    an, bn = (rng.standard_normal(s).astype(np.float32) for s in ((64, 4096), (4096, 64)))
    a, b = xp.asarray(an), xp.asarray(bn)
    shallow = xp.asarray(an[:, :64]) @ xp.asarray(bn[:64])
    xp.synchronize()
    monkeypatch.setattr(_recorder, "IDLE_WORK", 4 * 32)  # a 64x64 tile over a depth of 2048
    s0 = rec.submits
    c = a @ b
    assert rec.submits == s0 + 1  # deep enough to go at once (the slices' sum records after)
    np.testing.assert_allclose(host(c), an @ bn, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(host(shallow), an[:, :64] @ bn[:64], rtol=1e-5, atol=1e-5)
    xp.synchronize()
    s0 = rec.submits
    c = xp.asarray(an[:, :64]) @ xp.asarray(bn[:64])
    assert rec.submits == s0 and rec.pending >= 1  # depth 64: a tile's weight, too little


def test_the_attention_softmax_weighs_its_rows():
    """The attention softmax's workgroup (several rows of up to ``TPR * SLOTS`` scores)
    weighs ``ROW_WEIGHT`` elementwise workgroups, so that attention's blocks reach
    ``HEAVY_WORK`` by their work; layer_norm's and softmax's count 1 (weighed fully, their
    forward alone would go in a submit of its own after a wait)."""
    import vtl
    import vtl.nn.functional as F
    from vtl.backends.wgpu import _kernels
    from vtl.backends.wgpu._row_lanes import SLOTS

    rng = np.random.default_rng(6)
    x = vtl.asarray(rng.standard_normal((8, 1024)).astype(np.float32), device="wgpu")
    F.layer_norm(x, (1024,))
    F.softmax(x, dim=-1)
    q, k, v = (vtl.asarray(rng.standard_normal((1, 2, 128, 16)).astype(np.float32),
                           device="wgpu") for _ in range(3))
    F.scaled_dot_product_attention(q, k, v)
    by_name: dict[str, list] = {}
    for p in _kernels._pipelines.values():
        by_name.setdefault(p.name, []).append(p)
    for name in ("layer_norm", "softmax"):
        assert by_name[name] and all(p.weight == 1 and not p.deep for p in by_name[name])
    soft = by_name.get("gattn_softmax")
    if not soft:
        pytest.skip("attention did not take the path by products here")
    assert all(p.weight == _kernels.ROW_WEIGHT == SLOTS // 2 for p in soft)
    assert _kernels.dispatch_work(soft[0], [0, 0, 0], 64) == 64 * SLOTS // 2


def test_a_pass_is_submitted_once_the_device_has_finished_the_last(monkeypatch):
    """POLL_IDLE: a pass that holds ``IDLE_WORK`` is submitted when a poll shows the
    device has finished all that was submitted before it, not only after a wait; while
    that work runs it stays open."""
    monkeypatch.setattr(_recorder, "FLUSH_AFTER_S", float("inf"))
    monkeypatch.setattr(_recorder, "POLL_IDLE", True)
    rec = _recorder.REC
    a = xp.ones((64, 64))
    xp.synchronize()
    monkeypatch.setattr(_recorder, "IDLE_WORK", 1)
    s0 = rec.submits
    a = a * 0.5  # after the wait: the idle rule
    assert rec.submits == s0 + 1 and rec._done_req > _recorder._counts[0] - 1
    _recorder._POLL(_recorder._runtime.get().device._internal, True, _recorder._NULL)
    assert _recorder._counts[0] == rec._done_req  # the device is done, no wait said so
    assert not rec._idle
    a = a + 1.0
    assert rec.submits == s0 + 2 and rec.pending == 0  # the poll found the device idle
    rec._done_req += 1000  # as if the device were still busy
    try:
        b = a * 3.0
        assert rec.submits == s0 + 2 and rec.pending == 1
    finally:
        rec._done_req -= 1000
    np.testing.assert_array_equal(host(b), np.full((64, 64), 4.5, np.float32))
    monkeypatch.setattr(_recorder, "POLL_IDLE", False)  # the default: no poll, no submit
    c = b * 2.0
    _recorder._POLL(_recorder._runtime.get().device._internal, True, _recorder._NULL)
    c = c + 1.0
    assert rec.pending == 1
    np.testing.assert_array_equal(host(c), np.full((64, 64), 10.0, np.float32))


def _counted_halvings(monkeypatch, x):
    """``x`` halved four times, compiled and captured, and the list to which each replay
    of it appends the submits it made."""
    import vtl

    def chain(t):
        for _ in range(4):
            t = t * 0.5
        return t

    f = vtl.compile(chain, warmup=0)
    f(x)
    rec = _recorder.REC
    replay, submitted = rec.replay, []

    def counted(entries, bufs):
        s0 = rec.submits
        replay(entries, bufs)
        submitted.append(rec.submits - s0)

    monkeypatch.setattr(rec, "replay", counted)
    return f, submitted


def test_a_replay_is_submitted_once_the_device_has_finished_the_last(monkeypatch):
    """A compiled call follows POLL_IDLE too: when the device is found done with what was
    submitted before, the replayed dispatches holding ``IDLE_WORK`` go at once; with the
    device busy they stay open."""
    import vtl

    monkeypatch.setattr(_recorder, "FLUSH_AFTER_S", float("inf"))
    x = vtl.asarray(np.ones((8, 8), np.float32), device="wgpu")
    f, submitted = _counted_halvings(monkeypatch, x)
    rec = _recorder.REC
    monkeypatch.setattr(_recorder, "POLL_IDLE", True)
    (x * 3.0).numpy()
    f(x)  # a submit of its own: the device is not idle after it
    monkeypatch.setattr(_recorder, "IDLE_WORK", 1)
    for idle in (True, False):
        monkeypatch.setattr(rec, "_device_idle", lambda idle=idle: idle)
        submitted.clear()
        out = f(x)
        assert not rec._idle and (submitted[0] > 0) == idle
    np.testing.assert_array_equal(out.numpy(), np.full((8, 8), 0.5 ** 4))


def test_a_pass_holding_heavy_work_is_submitted_while_the_device_is_busy(monkeypatch):
    """HEAVY_WORK: with the device busy (a submit since the last wait) a pass whose
    dispatches hold that much weighted work is submitted at once, recorded or replayed;
    below it, or with the rule off (0), it stays open for the age rule; values unchanged."""
    import vtl

    monkeypatch.setattr(_recorder, "FLUSH_AFTER_S", float("inf"))
    monkeypatch.setattr(_recorder, "POLL_IDLE", False)
    monkeypatch.setattr(_recorder, "IDLE_WORK", 1)
    rec = _recorder.REC
    a = xp.ones((64, 64))
    xp.synchronize()
    a = a * 0.5  # the idle device's first pass: submitted, the device now busy
    s0 = rec.submits
    assert not rec._idle and rec.pending == 0
    monkeypatch.setattr(_recorder, "HEAVY_WORK", 1 << 30)
    a = a + 1.0
    w = rec._work
    assert rec.submits == s0 and rec.pending == 1 and w > 0  # not heavy yet
    monkeypatch.setattr(_recorder, "HEAVY_WORK", 2 * w)
    a = a * 2.0
    assert rec.submits == s0 + 1 and rec.pending == 0  # two such dispatches: heavy
    monkeypatch.setattr(_recorder, "HEAVY_WORK", 0)
    for _ in range(3):
        a = a * 1.0
    assert rec.submits == s0 + 1 and rec.pending == 3  # no rule
    np.testing.assert_array_equal(host(a), np.full((64, 64), 3.0, np.float32))

    x = vtl.asarray(np.ones((8, 8), np.float32), device="wgpu")
    f, submitted = _counted_halvings(monkeypatch, x)
    for heavy, submits in ((1 << 30, False), (1, True)):
        (x * 3.0).numpy()
        (x * 2.0)  # the device busy: the idle rule does not apply to the replay
        rec.flush()
        monkeypatch.setattr(_recorder, "HEAVY_WORK", heavy)
        submitted.clear()
        out = f(x)
        assert not rec._idle and (submitted[0] > 0) == submits
        rec.flush()
    np.testing.assert_array_equal(out.numpy(), np.full((8, 8), 0.5 ** 4))


def test_the_next_pass_is_opened_while_the_host_waits():
    """A wait (synchronize, a readback) opens the next pass before it blocks; an empty pass
    opened so is not submitted by another wait, and its age counts from its first
    dispatch."""
    rec = _recorder.REC
    a = xp.ones((64, 64)) * 2.0
    xp.synchronize()
    assert rec.cpass is not None and rec.pending == 0
    s0 = rec.submits
    xp.synchronize()
    assert rec.submits == s0  # nothing recorded: no submit
    waited = _recorder.perf_counter()
    b = a + 1.0
    assert rec.pending == 1 and rec._opened >= waited
    assert float(xp.sum(b)) == 3.0 * 64 * 64  # the readback submits the pass
    assert rec.submits == s0 + 1 and rec.cpass is not None and rec.pending == 0
    assert float(xp.sum(b * 0.5)) == 1.5 * 64 * 64


def test_a_replay_is_submitted_by_age_as_recorded_work_is(monkeypatch):
    """A compiled call's replayed dispatches follow the same rule: once the pass has been
    open ``FLUSH_AFTER_S`` with ``FLUSH_MIN`` dispatches it is submitted at the end of a
    replay; without the age it stays open."""
    import vtl

    x = vtl.asarray(np.ones((8, 8), np.float32), device="wgpu")

    def chain(t):
        for _ in range(_recorder.FLUSH_MIN):
            t = t * 0.5
        return t

    f = vtl.compile(chain, warmup=0)
    f(x)
    xp.synchronize()
    monkeypatch.setattr(_recorder, "FLUSH_AFTER_S", float("inf"))
    out = f(x)
    assert _recorder.REC.pending > 0
    monkeypatch.setattr(_recorder, "FLUSH_AFTER_S", 0.0)
    s0 = _recorder.REC.submits
    out = f(x)  # what waited (and the replayed chain) submitted; the output's copy may wait
    assert _recorder.REC.submits >= s0 + 1 and _recorder.REC.pending <= 1
    np.testing.assert_array_equal(out.numpy(), np.full((8, 8), 0.5 ** _recorder.FLUSH_MIN))


def test_a_replay_after_a_wait_is_submitted_once_it_holds_enough_work(monkeypatch):
    """A compiled call replayed right after a wait follows the idle rule too: its pass is
    submitted once the replayed dispatches hold ``IDLE_WORK`` weighted workgroups (each
    entry carries its count), not only by age."""
    import vtl

    monkeypatch.setattr(_recorder, "FLUSH_AFTER_S", float("inf"))
    monkeypatch.setattr(_recorder, "POLL_IDLE", False)  # the device counts as busy
    x = vtl.asarray(np.ones((8, 8), np.float32), device="wgpu")
    f, submitted = _counted_halvings(monkeypatch, x)
    monkeypatch.setattr(_recorder, "IDLE_WORK", 1 << 30)
    xp.synchronize()
    f(x)
    assert submitted and sum(submitted) == 0  # too little work: still open
    xp.synchronize()
    monkeypatch.setattr(_recorder, "IDLE_WORK", 1)
    submitted.clear()
    out = f(x)
    assert submitted[0] == 1 and sum(submitted) == 1  # the first replayed dispatch went
    np.testing.assert_array_equal(out.numpy(), np.full((8, 8), 0.5 ** 4))


def test_waits_and_readbacks_use_the_native_callbacks(monkeypatch):
    """synchronize and readbacks wait on counted completion callbacks (no wgpu-py promise,
    no per-read buffer): the fast path must be active, not its fallback."""
    monkeypatch.setattr(_recorder, "FLUSH_AFTER_S", float("inf"))
    assert _recorder._ON_DONE is not None
    a = xp.ones((256, 256))
    done, mapped = _recorder._counts[0], _recorder._counts[1]
    b = a @ a
    xp.synchronize()
    # the submit's callback (POLL_IDLE) and the wait's own
    assert _recorder._counts[0] == _recorder.REC._done_req > done
    assert _recorder.REC.pending == 0
    np.testing.assert_array_equal(host(b), np.full((256, 256), 256, np.float32))
    assert _recorder._counts[1] == mapped + 1
    s0 = _recorder.REC.submits
    c = b[3:, ::-2] - 1.0  # recorded work and the readback's copy go in one submit
    np.testing.assert_array_equal(host(c), np.full((253, 128), 255, np.float32))
    assert _recorder.REC.submits == s0 + 1


def test_waits_block_after_their_spin(monkeypatch):
    monkeypatch.setattr(_recorder, "SPIN_S", 0.0)  # straight to the blocking poll
    a = xp.ones((128, 128))
    b = a @ a @ a
    xp.synchronize()
    assert _recorder.REC.pending == 0
    np.testing.assert_array_equal(host(b + 1.0), np.full((128, 128), 128 * 128 + 1, np.float32))


@pytest.mark.parametrize("n", [1, 3, 64, 1000, 5000])
def test_readbacks_of_every_size_reuse_or_free_their_staging(monkeypatch, n):
    monkeypatch.setattr(_recorder, "STAGING_MAX", 4096)  # larger reads: a one-off buffer
    h = np.arange(n, dtype=np.float32) - 7.5
    before = set(_recorder.REC._stagings)
    for _ in range(2):
        a = xp.asarray(h)
        np.testing.assert_array_equal(host(a * 2.0), h * 2)
        np.testing.assert_array_equal(host(a[1::3]), h[1::3])
        np.testing.assert_array_equal(host(xp.astype(a, xp.int8)), h.astype(np.int8))
    caps = set(_recorder.REC._stagings)
    assert all(cap <= 4096 for cap in caps - before)
    if 4 * n <= 4096:
        assert max(256, 1 << (4 * n - 1).bit_length()) in caps


def test_flush_threshold_submits_without_waiting(monkeypatch):
    monkeypatch.setattr(_recorder, "FLUSH_EVERY", 10)
    xp.synchronize()
    s0 = _recorder.REC.submits
    a = xp.ones(8)
    for _ in range(35):
        a = a + 1.0
    assert _recorder.REC.submits - s0 >= 3
    assert float(a[0]) == 36.0


def test_grid_folds_beyond_the_workgroup_limit(monkeypatch):
    rt = _runtime.get()
    monkeypatch.setattr(rt, "max_groups", 3)  # fold any grid over 3 workgroups into x/y
    n = 256 * 10 + 17
    h = np.arange(n, dtype=np.float32)
    a = xp.asarray(h)
    np.testing.assert_array_equal(host(a * 2.0 + a), h * 3)
    np.testing.assert_array_equal(host(xp.arange(n, dtype=xp.int32)), np.arange(n))
    m = h[: 40 * 64].reshape(40, 64)
    np.testing.assert_allclose(host(xp.sum(xp.asarray(m), axis=1)), m.sum(1), rtol=1e-6)


@pytest.mark.slow
def test_real_dispatch_over_65535_workgroups():
    n = 65536 * 256 + 3
    a = xp.full((n,), 1.5)
    b = a + a
    assert float(b[n - 1]) == 3.0 and float(b[0]) == 3.0


def test_unsupported_dtype_names_missing_feature(monkeypatch):
    rt = _runtime.get()
    monkeypatch.setattr(rt, "features", rt.features - {"shader-f64", "shader-int64"})
    with pytest.raises(TypeError, match="shader-f64"):
        xp.zeros(3, dtype=xp.float64)
    with pytest.raises(TypeError, match="shader-int64"):
        xp.asarray(np.arange(3, dtype=np.int64))
    assert "float64" not in xp.__array_namespace_info__().dtypes()
    assert xp.__array_namespace_info__().default_dtypes()["integral"] == np.int32
    with pytest.raises(TypeError, match="shader-f64"):
        xp.asarray(np.ones(2, np.complex128))
    assert "complex128" not in xp.__array_namespace_info__().dtypes()
    with pytest.raises(TypeError, match="not supported"):
        xp.asarray(np.ones(2, np.longdouble))


def test_allocation_beyond_binding_limit_is_a_clear_error():
    rt = _runtime.get()
    with pytest.raises(ValueError, match="max buffer size"):
        xp.empty((rt.max_buffer // 4 + 1,), dtype=xp.float32)
    # above one binding: allowed (contiguous elementwise ops work in windows), other ops refuse
    a = xp.empty((rt.max_binding // 4 + 1,), dtype=xp.float32)
    with pytest.raises(ValueError, match="max storage binding"):
        a[::2] * 2.0


def test_training_style_loop_memory_stays_flat():
    rng = np.random.default_rng(0)
    w = xp.asarray(rng.standard_normal((16, 8)).astype(np.float32))
    xb = xp.asarray(rng.standard_normal((32, 16)).astype(np.float32))
    yb = xp.asarray(rng.standard_normal((32, 8)).astype(np.float32))

    def step(w):
        err = xb @ w - yb
        grad = xb.mT @ err * (2.0 / 32)
        return w - 0.01 * grad, xp.mean(err * err)

    losses = []
    for _ in range(5):
        w, loss = step(w)
    xp.synchronize()
    base = xp.memory_info()
    for i in range(40):
        w, loss = step(w)
        if i % 10 == 0:
            losses.append(loss)
    after = xp.memory_info()
    losses = [float(v) for v in losses]
    # only the four kept losses may need new (256-byte) buffers
    assert after["buffers_created"] <= base["buffers_created"] + 4
    assert after["in_use"] <= base["in_use"] + 4 * 256
    assert losses[-1] < losses[0]


def test_pipelines_compiled_once_per_process():
    from vtl.backends.wgpu import _kernels

    a = xp.ones(4)
    _ = xp.hypot(a * 3.0, a)
    _ = xp.hypot(xp.ones((3, 2)) * 2.0, xp.ones(2))
    n = _kernels.stats()["pipelines"]
    for _ in range(5):
        _ = xp.hypot(a * 3.0, a)
    _ = xp.hypot(xp.ones((5, 2)) * 2.0, xp.ones(2))
    assert _kernels.stats()["pipelines"] == n


def test_bool_and_narrow_ints_round_trip_and_wrap():
    b = np.array([True, False, True])
    np.testing.assert_array_equal(host(xp.asarray(b)), b)
    i8 = np.array([127, -128, 5], np.int8)
    a = xp.asarray(i8)
    assert a.dtype == np.int8
    np.testing.assert_array_equal(host(a + a), i8 + i8)
    u8 = np.array([250, 3], np.uint8)
    np.testing.assert_array_equal(host(xp.asarray(u8) * 2), u8 * np.uint8(2))


def test_scalar_conversions_sync_and_check_size():
    a = xp.asarray(np.array([2.5], np.float32))
    assert float(a) == 2.5 and int(xp.asarray(np.int32(7))) == 7
    assert bool(xp.asarray(np.array(True)))
    with pytest.raises(ValueError):
        bool(xp.ones(3))
    with pytest.raises(TypeError):
        float(xp.ones(3))


def test_memory_pool_buckets():
    assert _memory.bucket(1) == 256
    assert _memory.bucket(1000) == 1024
    assert _memory.bucket(1025) >= 1025 and _memory.bucket(1025) <= 1280


def test_registry_offers_wgpu_without_any_flag():
    env = {k: v for k, v in os.environ.items() if not k.startswith("VTL_")}
    code = "import vtl; print(repr(vtl.backends.available()['wgpu']))"  # None: no reason
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert out.stdout.strip() == "None", (out.stdout, out.stderr)


def test_unrolled_loops_are_written_out():
    """``/* unroll */`` loops become one block per value of the counter, nested braces kept;
    an unclosed one is an error, not a silently truncated kernel."""
    from vtl.backends.wgpu._kernels import unroll

    src = ("let x = 1;\n  /* unroll */ for (var kk = 0u; kk < 3u; kk++) {\n"
           "    s += a[kk]; if (kk > 1u) { t += 1; }\n  }\nlet y = 2;")
    out = unroll(src)
    assert "for (" not in out and out.count("let kk = ") == 3
    assert [f"let kk = {k}u;" in out for k in range(3)] == [True] * 3
    assert out.startswith("let x = 1;") and out.endswith("let y = 2;")
    assert out.count("if (kk > 1u) { t += 1; }") == 3
    assert unroll("for (var i = 0u; i < 4u; i++) { s += 1; }") == \
        "for (var i = 0u; i < 4u; i++) { s += 1; }"  # unmarked loops stay loops
    with pytest.raises(RuntimeError, match="not closed"):
        unroll("/* unroll */ for (var k = 0u; k < 2u; k++) { s += 1;")


def test_unrolled_matmul_matches_numpy():
    """The matmul kernels (their depth loops written out) on both tilings."""
    from vtl.backends.wgpu import _linalg

    rng = np.random.default_rng(5)
    for m, k, n in ((33, 70, 45), (300, 40, 260)):
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        got = host(xp.asarray(a) @ xp.asarray(b))
        np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4)
    assert _linalg.big_tiles(xp.float32, 2048, 2048)


@pytest.mark.parametrize("name", ["float16", "float32", "float64"])
def test_trunc_and_round_keep_signed_zeros_and_round_half_to_even(name):
    """``trunc``/``round`` (the kernels' floor-based trunc_/rint_ helpers: some drivers'
    float64 builtins lose the sign of zeros and round 1.5 to 1) against NumPy, bit for bit:
    signed zeros, ties both ways, values past the mantissa, infinities."""
    feats = set(xp.runtime_info()["features"])
    if name == "float64" and "shader-f64" not in feats:
        pytest.skip("needs shader-f64")
    if name == "float16" and "shader-f16" not in feats:
        pytest.skip("needs shader-f16")
    x = np.array([-0.0, 0.0, -0.5, 0.5, 1.5, 2.5, -1.5, -2.5, 3.7, -3.7, 0.49999997, 1e4,
                  -2049.5, np.inf, -np.inf], dtype=name)
    if name != "float16":
        x = np.concatenate([x, np.array([2.0 ** 23 + 1, -(2.0 ** 30) - 0.5, 6e29], name)])
    for f in ("trunc", "round"):
        got = host(getattr(xp, f)(xp.asarray(x)))
        want = getattr(np, f)(x)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg=f)
        np.testing.assert_array_equal(got, want, err_msg=f)


@pytest.mark.parametrize(("shape", "view"), [
    ((4, 8, 16, 64), lambda a: a.transpose(0, 2, 1, 3)),  # a head split's permute
    ((2, 64, 3, 8, 16), lambda a: a.transpose(2, 0, 3, 1, 4)),
    ((64, 96), lambda a: a.T),
    ((48, 128), lambda a: a[:, ::-1]),  # negative strides along the last axis
    ((4096, 3), lambda a: a[::-1]),  # a last axis no multiple of four
    ((10, 10), lambda a: a.T),  # few elements: one an invocation
])
def test_strided_copies_and_casts_match_numpy(shape, view):
    """The strided elementwise kernel (several elements of the last axis an invocation where
    its length allows): copies, a strided destination, a cast and a unary op of views."""
    rng = np.random.default_rng(len(shape))
    a = rng.standard_normal(shape).astype(np.float32)
    ref = view(a)
    x = view_like(xp.asarray(a), view)
    np.testing.assert_array_equal(host(xp.reshape(x, (-1,))), ref.reshape(-1))
    np.testing.assert_array_equal(host(xp.stack([x, x], axis=-2)), np.stack([ref, ref], -2))
    np.testing.assert_array_equal(host(xp.astype(x, xp.float16)), ref.astype(np.float16))
    np.testing.assert_allclose(host(xp.abs(x)), np.abs(ref))


def view_like(x, view):
    """The NumPy view ``view`` applied to the wgpu array ``x`` (``.T``, ``transpose`` and
    slicing through the array API)."""

    class Shim:
        def __init__(self, arr):
            self.arr = arr

        def transpose(self, *axes):
            return xp.permute_dims(self.arr, axes)

        @property
        def T(self):  # noqa: N802 - NumPy's name
            return xp.permute_dims(self.arr, (1, 0))

        def __getitem__(self, key):
            return self.arr[key]

    return view(Shim(x))


def test_kernels_compile_without_runtime_checks_unless_asked():
    """The backend's shaders are trusted modules (no clamped indices, no loop counters) on
    wgpu-native, and ``VTL_WGPU_SHADER_CHECKS=1`` gives the checked ones: the same results
    either way (up to the rounding of a fused multiply-add), including a product on the
    large-tile kernel and a row-wise kernel."""
    from vtl.backends.wgpu import _shaders

    assert _shaders.trusted_available(_runtime.get().device)
    assert xp.runtime_info()["shader_runtime_checks"] is _shaders.CHECKED
    code = ("import numpy as np, vtl, vtl.backends.wgpu as xp\n"
            "from vtl.backends.wgpu import _linalg\n"
            "_linalg.BIG_MIN_TILES = 1\n"
            "r = np.random.default_rng(5)\n"
            "a, b = (r.standard_normal((250, 70)).astype(np.float32) for _ in range(2))\n"
            "assert _linalg.big_tiles(a.dtype, 250, 250)\n"
            "x = vtl.asarray(a, backend='wgpu')\n"
            "y = vtl.nn.functional.layer_norm(x, (70,))\n"
            "c = xp.to_numpy(xp.asarray(a) @ xp.asarray(b.T))\n"
            "print(xp.runtime_info()['shader_runtime_checks'], "
            "np.concatenate([c.ravel(), y.numpy().ravel()]).tobytes().hex())\n")
    outs = {}
    for checks in ("0", "1"):
        env = {k: v for k, v in os.environ.items() if k != "VTL_WGPU_SHADER_CHECKS"}
        env["VTL_WGPU_SHADER_CHECKS"] = checks
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, timeout=300,
                             cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        assert out.returncode == 0, out.stderr[-2000:]
        flag, data = out.stdout.split()
        assert flag == ("True" if checks == "1" else "False")
        outs[checks] = np.frombuffer(bytes.fromhex(data), np.float32)
    # a driver may contract the checked and the trusted code's products differently
    np.testing.assert_allclose(outs["0"], outs["1"], rtol=1e-5, atol=1e-5)
