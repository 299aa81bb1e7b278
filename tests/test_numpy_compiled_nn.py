"""The NumPy backend's compiled (numba, ``vtl[cpu]``) kernels against the NumPy passes or
portable paths they replace: batch norm's statistics, output and three gradients in
float64 and float32 (a mean much larger than the spread, 2-D to 5-D inputs, the same bits
on any number of threads); Philox words bit for bit (counters that carry across words,
draws that are not whole blocks); fused dropout bit for bit against the portable dropout,
its gradient and the generator state it leaves; the LSTM cell bit for bit against the
portable cell (every combination of incoming gradients), the GRU cell likewise, and LSTM
and GRU layers against the portable layers; layer norm against the portable rows in
float64 and float32, pieces summed in the same order on any number of threads; 2x2
stride-2 max pooling bit for bit against the NumPy passes (signed zeros, infinities, nans,
odd sizes, padding, ceil mode); every optimizer's update program compiled into one pass
against the ufunc step."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from helpers import to_numpy, use_kernel
from test_nn_fastpaths import all_programs

import vtl
from vtl.backends._common import threads as nc
from vtl.backends.numpy import _compiled
from vtl.backends.numpy import nn as npnn
from vtl.backends.numpy import pool as nppool
from vtl.backends.numpy import random as nprandom
from vtl.backends.numpy import rnn as nprnn
from vtl.nn import functional as F
from vtl.nn.functional import _rnn_fused

pytestmark = pytest.mark.skipif(not _compiled.available(),
                                reason="numba is not installed (pip install 'vtl[cpu]')")


def _run(monkeypatch, compiled, x, w, b, g, need=(True, True, True)):
    monkeypatch.setattr(_compiled, "ENABLED", compiled)
    kern = npnn.NumpyBatchNorm()
    y, mean, var, saved = kern.forward(x, w, b, 1e-5)
    assert isinstance(saved, npnn._CompiledSaved) == compiled
    return (y, mean, var, *kern.backward(saved, w, g, *need))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", [(6, 5), (4, 3, 7), (5, 4, 6, 7), (2, 3, 4, 5, 3)])
@pytest.mark.parametrize("affine", [True, False])
def test_compiled_batch_norm_equals_numpy(monkeypatch, dtype, shape, affine):
    rng = np.random.default_rng(len(shape))
    c = shape[1]
    x = (rng.standard_normal(shape) * 3 + 1).astype(dtype)
    w = rng.standard_normal(c).astype(dtype) if affine else None
    b = rng.standard_normal(c).astype(dtype) if affine else None
    g = rng.standard_normal(shape).astype(dtype)
    need = (True, affine, affine)
    got = _run(monkeypatch, True, x, w, b, g, need)
    want = _run(monkeypatch, False, x, w, b, g, need)
    tol = 1e-12 if dtype == np.float64 else 2e-5
    for name, a, r in zip(("y", "mean", "var", "dx", "dw", "db"), got, want, strict=True):
        if r is None:
            assert a is None, name
            continue
        assert a.dtype == dtype and a.shape == r.shape, name
        np.testing.assert_allclose(a, r, rtol=tol, atol=tol * max(1.0, float(np.abs(r).max())),
                                   err_msg=name)


def test_compiled_batch_norm_large_mean(monkeypatch):
    """float32 data of mean 1e4 and spread 1, 10^6 values a channel: the shifted float64
    sums keep the mean and the variance (a plain sum of squares would lose the variance to
    cancellation, float32 sums the mean to rounding)."""
    rng = np.random.default_rng(1)
    x = (1e4 + rng.standard_normal((25, 3, 40000))).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    y, mean, var, *_ = _run(monkeypatch, True, x, None, None, g)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(var, x64.var(axis=(0, 2)), rtol=1e-5)
    np.testing.assert_allclose(mean, x64.mean(axis=(0, 2)), rtol=1e-7)
    np.testing.assert_allclose(y.std(axis=(0, 2)), 1.0, rtol=1e-3)


def test_compiled_batch_norm_independent_of_thread_count(monkeypatch):
    monkeypatch.delenv("VTL_NUM_THREADS", raising=False)
    monkeypatch.setattr(npnn, "THRESHOLD", 0)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((9, 4, 5, 6)).astype(np.float32)
    w, b = rng.standard_normal(4).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    results = []
    for n in (1, 2, 3):
        monkeypatch.setattr(nc, "usable_cpus", lambda n=n: n)
        results.append(_run(monkeypatch, True, x, w, b, g))
    for other in results[1:]:
        for a, r in zip(other, results[0], strict=True):
            np.testing.assert_array_equal(a, r)


def test_numba_that_fails_to_import_counts_as_absent(monkeypatch):
    """An installed numba that raises on import (e.g. too old for the NumPy present): the
    NumPy kernels run, and ``vtl info`` says why."""
    import sys

    import vtl
    import vtl.nn.functional as F

    monkeypatch.setitem(sys.modules, "numba", None)  # import numba raises ImportError
    monkeypatch.setattr(_compiled, "_found", None)
    assert not _compiled.available()
    assert _compiled.describe().startswith("not used: ModuleNotFoundError")
    x = vtl.asarray(np.ones((2, 8, 6, 6), np.float32), backend="numpy")
    w = vtl.asarray(np.ones((8, 8, 3, 3), np.float32), backend="numpy")
    y = F.conv2d(x, w, padding=1)
    assert float(y[0, 0, 2, 2]) == 72.0
    z = F.batch_norm(x, None, None, training=True)
    assert z.shape == x.shape
    monkeypatch.setattr(_compiled, "_found", None)


@pytest.mark.parametrize(("n", "counter", "key"), [
    (1, 0, (1, 2)), (13, 2**32 - 3, (5, 7)), (100003, 2**64 - 5, (0xFFFFFFFF, 3)),
    (1 << 18, 2**96 + 2**40 - 7, (123, 456)), (4 * (1 << 15) + 2, 2**128 - 9, (9, 0))])
def test_compiled_philox_equals_numpy(monkeypatch, n, counter, key):
    """Counters that carry from word to word (and wrap at 2**128), draws longer than one
    piece of the pool and not whole blocks: the same words."""
    monkeypatch.setattr(_compiled, "ENABLED", False)
    want = nprandom.philox(n, key, counter % 2**128)
    monkeypatch.setattr(_compiled, "ENABLED", True)
    got = nprandom.philox(n, key, counter % 2**128)
    assert got.dtype == np.uint32 and got.shape == (n,)
    np.testing.assert_array_equal(got, want)


def _dropout(x, p, g, seed):
    vtl.random.seed(seed)
    t = vtl.asarray(x, backend="numpy", requires_grad=True)
    out = F.dropout(t, p)
    out.backward(vtl.asarray(g, backend="numpy"))
    return out, to_numpy(out), to_numpy(t.grad), vtl.random.default_generator().get_state()


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize(("shape", "p"), [((7, 9), 0.5), ((1031,), 0.1), ((2, 3, 5), 0.9),
                                          ((4, 4), 1e-9), ((300, 1000), 0.3)])
def test_compiled_dropout_is_the_portable_dropout(dt, shape, p):
    """Bit for bit, signed zeros and NaNs included; 16-bit inputs computed in float32 and
    rounded once, as the portable path (a scale of 1/(1-p) beyond float16's range too)."""
    dt = np.dtype(dt)
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype(dt)
    idx = np.arange(0, x.size, 97)  # dropped infinities and NaNs give NaN, as x * 0.0
    x.flat[idx] = np.array([np.inf, -np.inf, np.nan, -0.0], dt)[np.arange(idx.size) % 4]
    g = rng.standard_normal(shape).astype(dt)
    with use_kernel("dropout", None), np.errstate(invalid="ignore"):  # inf * 0.0
        _, ref, ref_grad, ref_state = _dropout(x, p, g, 21)
    out, got, got_grad, state = _dropout(x, p, g, 21)
    assert out.grad_fn.name() == "DropoutBackward" and got.dtype == dt
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(ref))
    np.testing.assert_array_equal(got_grad, ref_grad)
    assert state == ref_state


def test_compiled_dropout_zero_dim():
    x = np.float32(2.0)
    with use_kernel("dropout", None):
        _, ref, ref_grad, _ = _dropout(x, 0.5, np.float32(1.5), 5)
    out, got, got_grad, _ = _dropout(x, 0.5, np.float32(1.5), 5)
    assert got.shape == () and got_grad.shape == ()
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(got_grad, ref_grad)


def test_compiled_philox_and_dropout_independent_of_thread_count(monkeypatch):
    """Draws of many pieces (a small piece size) on 1, 2 and 3 threads: the same bits."""
    monkeypatch.delenv("VTL_NUM_THREADS", raising=False)
    monkeypatch.setattr(nprandom, "_CHUNK", 37)
    x = np.random.default_rng(9).standard_normal(5003).astype(np.float32)
    results = []
    for n in (1, 2, 3):
        monkeypatch.setattr(nc, "usable_cpus", lambda n=n: n)
        words = nprandom.philox(4 * 1000 + 3, (11, 12), 2**32 - 100)
        dropped = nprandom.NumpyDropout()._run(x, 0.3, (5, 6, 7, 8, 9, 10))
        results.append((words, dropped))
    monkeypatch.setattr(_compiled, "ENABLED", False)
    np.testing.assert_array_equal(results[0][0],
                                  nprandom.philox(4 * 1000 + 3, (11, 12), 2**32 - 100))
    for other in results[1:]:
        for a, r in zip(other, results[0], strict=True):
            np.testing.assert_array_equal(a, r)


def test_compiled_dropout_declines_other_dtypes():
    kern = nprandom.NumpyDropout()
    assert not kern.supports(np.complex64) and not kern.supports(np.int32)
    assert kern.supports(np.float32) and kern.supports(np.float64)
    assert kern.supports(np.float16) and kern.supports(ml_dtypes.bfloat16)
    x = np.ones(6, np.complex64)
    vtl.random.seed(4)
    y = F.dropout(vtl.asarray(x, backend="numpy"), 0.5)
    assert y.dtype == vtl.complex64 and y.grad_fn is None


def _cell(gates, c_prev, hg, seeds):
    """``lstm_cell_pointwise`` forward and the gradients from the outputs in ``seeds``."""
    ts = [vtl.asarray(a, backend="numpy", requires_grad=True) for a in (gates, c_prev, hg)
          if a is not None]
    h, c = _rnn_fused.lstm_cell_pointwise(ts[0], ts[1], ts[2] if hg is not None else None)
    loss = None
    for out, v in zip((h, c), seeds, strict=True):
        if v is not None:
            term = vtl.sum(out * vtl.asarray(v, backend="numpy"))
            loss = term if loss is None else loss + term
    loss.backward()
    return [to_numpy(h), to_numpy(c)] + [to_numpy(t.grad) for t in ts]


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("with_hg", [False, True])
@pytest.mark.parametrize("seeds", ["h", "c", "hc"])
def test_compiled_lstm_cell_is_the_portable_cell(dt, with_hg, seeds):
    rng = np.random.default_rng(len(seeds) + 2 * with_hg)
    gates = (rng.standard_normal((3, 2, 4 * 5)) * 2).astype(dt)
    hg = rng.standard_normal(gates.shape).astype(dt) if with_hg else None
    c_prev = rng.standard_normal((3, 2, 5)).astype(dt)
    vs = tuple(rng.standard_normal((3, 2, 5)).astype(dt) if k in seeds else None
               for k in "hc")
    got = _cell(gates, c_prev, hg, vs)
    with use_kernel("lstm_cell", None):
        want = _cell(gates, c_prev, hg, vs)
    for a, r in zip(got, want, strict=True):
        assert a.dtype == dt
        np.testing.assert_array_equal(a, r)


def _layer(x, dt, loss="all", **kw):
    vtl.random.seed(0)
    m = vtl.nn.LSTM(6, 8, **kw)
    if dt == np.float64:
        m = m.double()
    outs = []
    for _ in range(2):  # a second call after the weights changed in place
        t = vtl.asarray(x, backend="numpy", requires_grad=True)
        out, (h, c) = m(t)
        total = vtl.sum(out * out)
        if loss == "all":
            total = total + vtl.sum(h) + vtl.sum(c * c)
        total.backward()
        outs += [to_numpy(out), to_numpy(h), to_numpy(c), to_numpy(t.grad)] + \
            [to_numpy(p.grad) for p in m.parameters()]
        with vtl.no_grad():
            for p in m.parameters():
                p.mul_(0.5)
                p.grad = None
    return outs


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize(("kw", "loss"), [({}, "all"), ({}, "out"),
                                          ({"num_layers": 2, "bidirectional": True}, "all"),
                                          ({"batch_first": True, "bias": False}, "out")])
def test_compiled_lstm_layer_matches_the_portable_layer(dt, kw, loss):
    """The steps' recurrent product runs in another orientation, so the values agree to
    rounding; a loss on the output alone reaches the steps only through their outputs;
    the second call runs after the weights changed in place."""
    x = np.random.default_rng(7).standard_normal((5, 3, 6)).astype(dt)
    got = _layer(x, dt, loss, **kw)
    with use_kernel("lstm_cell", None):
        want = _layer(x, dt, loss, **kw)
    tol = 1e-12 if dt == np.float64 else 2e-6
    for a, r in zip(got, want, strict=True):
        assert a.dtype == dt
        np.testing.assert_allclose(a, r, rtol=tol, atol=tol)


@pytest.mark.parametrize("columns", [False, True])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_compiled_lstm_layer_in_either_product_orientation(monkeypatch, dt, columns):
    """The steps' ``h @ W_hh^T`` as ``(W_hh @ h^T)^T`` (the layout large layers take, read
    by the cell as a transposed view) or by rows: the portable layer's values and
    gradients to rounding, and the per-step path's bits."""
    monkeypatch.setattr(nprnn, "_by_columns", lambda rows, hs: columns)
    x = np.random.default_rng(12).standard_normal((4, 3, 6)).astype(dt)
    got = _layer(x, dt, "all", num_layers=2, bidirectional=True)
    with use_kernel("lstm_cell", _StepsOnlyCell()):
        steps = _layer(x, dt, "all", num_layers=2, bidirectional=True)
    with use_kernel("lstm_cell", None):
        want = _layer(x, dt, "all", num_layers=2, bidirectional=True)
    tol = 1e-12 if dt == np.float64 else 2e-6
    for a, s, r in zip(got, steps, want, strict=True):
        np.testing.assert_array_equal(a, s)
        np.testing.assert_allclose(a, r, rtol=tol, atol=tol)


def test_lstm_recurrent_product_orientation_by_shape():
    rng = np.random.default_rng(13)
    for rows, hs, columns in ((32, 256, True), (4, 256, True), (16, 128, True),
                              (8, 128, False), (64, 64, False)):
        assert nprnn._by_columns(rows, hs) is columns
        w = rng.standard_normal((4 * hs, hs)).astype(np.float32)
        h = rng.standard_normal((rows, hs)).astype(np.float32)
        rec = nprnn.NumpyLstmCell.recurrent_weight(w)
        buf = rec.buffer(rows)
        got = rec.product(h, buf)
        assert got.shape == (rows, 4 * hs) and np.shares_memory(got, buf)
        np.testing.assert_allclose(got, h.astype(np.float64) @ w.T.astype(np.float64),
                                   rtol=1e-4, atol=1e-4)


class _StepsOnlyCell(nprnn.NumpyLstmCell):
    """The compiled cell without its whole-layer loop (its steps one call each)."""

    layer_forward = None


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize(("kw", "loss"), [({}, "all"),
                                          ({"num_layers": 2, "bidirectional": True}, "out"),
                                          ({"batch_first": True}, "all")])
def test_compiled_lstm_layer_loop_is_the_step_path(monkeypatch, dt, kw, loss):
    """The kernel's whole-layer forward (``layer_forward``) runs the steps' operations in
    their order: the outputs and every gradient are the per-step path's bits."""
    calls = []
    real = nprnn.NumpyLstmCell.layer_forward

    def counted(self, *a):
        calls.append(a[-1])
        return real(self, *a)

    monkeypatch.setattr(nprnn.NumpyLstmCell, "layer_forward", counted)
    x = np.random.default_rng(8).standard_normal((5, 3, 6)).astype(dt)
    got = _layer(x, dt, loss, **kw)
    assert calls and (True in calls) == bool(kw.get("bidirectional"))
    with use_kernel("lstm_cell", _StepsOnlyCell()):
        want = _layer(x, dt, loss, **kw)
    for a, r in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, r)


def test_lstm_layer_final_states_are_not_views_of_the_output():
    rng = np.random.default_rng(11)
    gates = vtl.asarray(rng.standard_normal((4, 2, 12)).astype(np.float32), backend="numpy")
    h0 = vtl.asarray(np.zeros((2, 3), np.float32), backend="numpy")
    w = vtl.asarray(rng.standard_normal((12, 3)).astype(np.float32), backend="numpy")
    out, hn, cn = _rnn_fused.lstm_layer(gates, h0, h0, w)
    assert not np.shares_memory(to_numpy(out), to_numpy(hn))
    np.testing.assert_array_equal(to_numpy(out)[-1], to_numpy(hn))


def test_compiled_lstm_cell_declines_other_dtypes():
    kern = nprnn.NumpyLstmCell()
    assert kern.supports(np.float32) and kern.supports(np.float64)
    assert not kern.supports(np.float16) and not kern.supports(np.complex64)
    x = vtl.asarray(np.ones((2, 3, 4), np.float16), backend="numpy")
    out, _ = vtl.nn.LSTM(4, 3).half()(x)
    assert out.dtype == vtl.float16


def _ln(x, ns, affine, g, seed=1):
    rng = np.random.default_rng(seed)
    xt = vtl.asarray(x, backend="numpy", requires_grad=True)
    w = vtl.asarray(rng.standard_normal(ns).astype(x.dtype), backend="numpy",
                    requires_grad=True) if affine else None
    b = vtl.asarray(rng.standard_normal(ns).astype(x.dtype), backend="numpy",
                    requires_grad=True) if affine else None
    y = F.layer_norm(xt, ns, w, b, 1e-5)
    y.backward(vtl.asarray(g, backend="numpy"))
    return [to_numpy(y), to_numpy(xt.grad)] + \
        ([to_numpy(w.grad), to_numpy(b.grad)] if affine else [])


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize(("shape", "ns", "affine"), [
    ((8, 130, 64), (64,), True), ((3, 5), (5,), False), ((700, 6, 7), (6, 7), True),
    ((1, 1), (1,), True)])
def test_compiled_layer_norm_matches_the_portable_rows(dt, shape, ns, affine):
    rng = np.random.default_rng(2)
    x = (rng.standard_normal(shape) * 3 + 100).astype(dt)  # a mean far from 0
    g = rng.standard_normal(shape).astype(dt)
    got = _ln(x, ns, affine, g)
    with use_kernel("layer_norm", None):
        want = _ln(x, ns, affine, g)
    tol = 1e-11 if dt == np.float64 else 3e-5
    for a, r in zip(got, want, strict=True):
        assert a.dtype == dt and a.shape == r.shape
        scale = max(1.0, float(np.abs(r).max()))
        np.testing.assert_allclose(a, r, rtol=0, atol=tol * scale)


@pytest.mark.parametrize("need", ["w", "b", "wb", "x"])
def test_compiled_layer_norm_partial_gradients_and_read_only_input(need):
    """Only some gradients wanted, of a read-only (broadcast) input."""
    rng = np.random.default_rng(4)
    row = rng.standard_normal(9).astype(np.float32)
    g = rng.standard_normal((5, 9)).astype(np.float32)

    def run():
        x = vtl.broadcast_to(vtl.asarray(row, backend="numpy", requires_grad="x" in need),
                             (5, 9))
        w = vtl.asarray(np.linspace(0.5, 2, 9, dtype=np.float32), backend="numpy",
                        requires_grad="w" in need)
        b = vtl.asarray(np.zeros(9, np.float32), backend="numpy", requires_grad="b" in need)
        y = F.layer_norm(x, (9,), w, b)
        y.backward(vtl.asarray(g, backend="numpy"))
        return [to_numpy(y)] + [to_numpy(t.grad) for t in (w, b) if t.grad is not None]

    got = run()
    with use_kernel("layer_norm", None):
        want = run()
    assert len(got) == len(want) == 1 + ("w" in need) + ("b" in need)
    for a, r in zip(got, want, strict=True):
        np.testing.assert_allclose(a, r, rtol=2e-5, atol=2e-5)


def test_compiled_layer_norm_independent_of_thread_count(monkeypatch):
    monkeypatch.delenv("VTL_NUM_THREADS", raising=False)
    monkeypatch.setattr(npnn, "THRESHOLD", 0)
    monkeypatch.setattr(npnn, "LN_ROWS", 7)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((50, 9)).astype(np.float32)
    g = rng.standard_normal((50, 9)).astype(np.float32)
    results = []
    for n in (1, 2, 3):
        monkeypatch.setattr(nc, "usable_cpus", lambda n=n: n)
        results.append(_ln(x, (9,), True, g))
    for other in results[1:]:
        for a, r in zip(other, results[0], strict=True):
            np.testing.assert_array_equal(a, r)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("need_h_prev", [False, True])
def test_compiled_gru_cell_is_the_portable_cell(dt, need_h_prev):
    rng = np.random.default_rng(4)
    arrays = (rng.standard_normal((3, 2, 24)) * 2, rng.standard_normal((3, 2, 24)),
              rng.standard_normal((3, 2, 8)))
    v = rng.standard_normal((3, 2, 8)).astype(dt)

    def run():
        ts = [vtl.asarray(a.astype(dt), backend="numpy",
                          requires_grad=k < 2 or need_h_prev) for k, a in enumerate(arrays)]
        h = _rnn_fused.gru_cell_pointwise(*ts)
        vtl.sum(h * vtl.asarray(v, backend="numpy")).backward()
        return [to_numpy(h)] + [to_numpy(t.grad) for t in ts if t.grad is not None]

    got = run()
    with use_kernel("gru_cell", None):
        want = run()
    assert len(got) == len(want) == (4 if need_h_prev else 3)
    for a, r in zip(got, want, strict=True):
        assert a.dtype == dt
        np.testing.assert_array_equal(a, r)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("kw", [{}, {"num_layers": 2, "bidirectional": True},
                                {"batch_first": True, "bias": False}])
def test_compiled_gru_layer_matches_the_portable_layer(dt, kw):
    def run():
        vtl.random.seed(0)
        m = vtl.nn.GRU(6, 8, **kw)
        if dt == np.float64:
            m = m.double()
        t = vtl.asarray(x, backend="numpy", requires_grad=True)
        out, h = m(t)
        (vtl.sum(out * out) + vtl.sum(h)).backward()
        return [to_numpy(out), to_numpy(h), to_numpy(t.grad)] + \
            [to_numpy(p.grad) for p in m.parameters()]

    x = np.random.default_rng(8).standard_normal((5, 3, 6)).astype(dt)
    got = run()
    with use_kernel("gru_cell", None):
        want = run()
    tol = 1e-12 if dt == np.float64 else 2e-6
    for a, r in zip(got, want, strict=True):
        assert a.dtype == dt
        np.testing.assert_allclose(a, r, rtol=tol, atol=tol)


def test_kernels_compile_where_numba_cannot_cache(monkeypatch):
    """numba refuses ``cache=True`` where it finds no writable place for its cache (a
    read-only install and home): the kernel is compiled in the process instead."""
    import numba

    real = numba.njit
    calls = []

    def njit(*args, **options):
        if args or "cache" not in options:  # numba's own uses
            return real(*args, **options)
        calls.append(options["cache"])
        if options["cache"]:
            raise RuntimeError("cannot cache function 'f': no locator available for file")
        return real(**options)

    monkeypatch.setattr(numba, "njit", njit)

    @_compiled.kernel()
    def twice(a):  # pragma: no cover - compiled
        return a * 2

    assert calls == [True, False]
    assert twice(np.float32(3)) == 6


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize(("shape", "padding", "ceil"), [
    ((2, 3, 8, 8), 0, False), ((2, 3, 7, 9), 0, False), ((2, 3, 7, 9), 0, True),
    ((1, 2, 6, 10), 1, False), ((4, 5, 32, 32), 0, False)])
def test_compiled_max_pool_2x2_is_the_numpy_pool(monkeypatch, dt, shape, padding, ceil):
    rng = np.random.default_rng(12)
    x = rng.standard_normal(shape).astype(dt)
    for step, value in ((13, 0.0), (17, -0.0), (29, np.nan), (31, np.inf), (37, -np.inf)):
        x.flat[::step] = value
    g = rng.standard_normal(shape).astype(dt)

    def run():
        t = vtl.asarray(x, backend="numpy", requires_grad=True)
        y, idx = F.max_pool2d(t, 2, padding=padding, ceil_mode=ceil, return_indices=True)
        y.backward(vtl.asarray(g[..., :y.shape[2], :y.shape[3]], backend="numpy"))
        return to_numpy(y), to_numpy(idx), to_numpy(t.grad)

    got = run()
    monkeypatch.setattr(_compiled, "ENABLED", False)
    want = run()
    for a, r in zip(got, want, strict=True):
        assert a.dtype == r.dtype and a.shape == r.shape
        np.testing.assert_array_equal(a.view(np.uint8), r.view(np.uint8))


def test_compiled_max_pool_takes_only_2x2_stride_2():
    kern = nppool.NumpyPool2d()
    assert kern._two_by_two(np.dtype(np.float32), 4, (2, 2), (2, 2), (1, 1))
    for k, s, d in (((3, 3), (2, 2), (1, 1)), ((2, 2), (1, 1), (1, 1)),
                    ((2, 2), (2, 2), (2, 2))):
        assert not kern._two_by_two(np.dtype(np.float32), 4, k, s, d)
    assert not kern._two_by_two(np.dtype(np.float16), 4, (2, 2), (2, 2), (1, 1))


def _optimizer_arrays(rng, prog, n, dtype):
    """Values that reach every branch: signed zeros, infinities and nans among ordinary
    numbers, and zero second moments (a division by zero)."""
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -2.5, 3.0])
    arrs = []
    for _ in prog.arrays:
        a = rng.standard_normal(n) * 2
        pick = rng.random(n) < 0.1
        a[pick] = rng.choice(special, int(pick.sum()))
        arrs.append(a.astype(dtype))
    return arrs


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:overflow:RuntimeWarning")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_optimizer_steps_equal_the_ufunc_steps(monkeypatch, dtype):
    """Every optimizer's program, compiled into one pass: the ufunc path's bits (signed
    zeros included; nans where it has nans: ``max`` propagates them as ``np.maximum``),
    on pieces spread over three threads, next to a Fortran-ordered tensor (the ufunc
    path) and a 0-d one."""
    from vtl.backends.numpy import optim as npoptim

    monkeypatch.setattr(npoptim, "CHUNK", 256)
    monkeypatch.setattr(npoptim, "MIN_PIECE", 64)
    monkeypatch.setattr(npoptim, "PARALLEL_MIN", 0)
    monkeypatch.setenv("VTL_NUM_THREADS", "3")
    rng = np.random.default_rng(11)
    for prog in all_programs():
        scalars = tuple(float(s) for s in rng.uniform(0.05, 1.5, len(prog.scalars)))
        shapes = [(1000,), (3, 7), (), (5, 4)]
        tensors = [_optimizer_arrays(rng, prog, int(np.prod(s)), dtype) for s in shapes]
        tensors = [[a.reshape(s) for a in arrs] for arrs, s in zip(tensors, shapes, strict=True)]
        tensors[3] = [np.asfortranarray(a.reshape(4, 5).T) for a in tensors[3]]
        results = []
        for compiled in (True, False):
            monkeypatch.setattr(_compiled, "ENABLED", compiled)
            copies = [tuple(a.copy(order="K") for a in arrs) for arrs in tensors]
            npoptim.MultiTensorApply()(prog, copies, scalars)
            results.append(copies)
        for got, want in zip(*results, strict=True):
            for name, a, b in zip(prog.arrays, got, want, strict=True):
                assert a.dtype == dtype
                np.testing.assert_array_equal(a, b, err_msg=f"{prog.name} {name}")
                same = ~np.isnan(b)  # (a nan's sign and payload are not defined)
                np.testing.assert_array_equal(np.signbit(a[same]), np.signbit(b[same]),
                                              err_msg=f"{prog.name} {name}")


def test_compiled_optimizer_step_is_used():
    from vtl.backends.numpy import optim as npoptim
    from vtl.optim import _programs as P

    kern = npoptim.MultiTensorApply()
    prog = P.adam(amsgrad=False, weight_decay=False, decoupled=False, maximize=False)
    arrs = tuple(np.ones(8, np.float32) for _ in prog.arrays)
    kern(prog, [arrs], tuple(0.5 for _ in prog.scalars))
    assert prog.key in kern._steps
    assert kern._step(prog, np.dtype(np.float16)) is None


def test_compiled_program_max_is_numpy_maximum():
    from vtl.backends.numpy._optim_kernels import _maximum

    special = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan]
    for x in special:
        for y in special:
            want = np.maximum(np.float64(x), np.float64(y))
            got = _maximum(np.float64(x), np.float64(y))
            assert (np.isnan(got) and np.isnan(want)) or \
                (got == want and np.signbit(got) == np.signbit(want)), (x, y)


_CONV_GEOMETRIES = [  # (N, C, H, W, O, kh, kw, stride, padding (t, b, l, r), dilation, groups)
    (3, 4, 9, 8, 6, 3, 3, (2, 2), (1, 1, 1, 1), (1, 1), 1),
    (2, 3, 11, 7, 4, 3, 2, (2, 1), (2, 0, 1, 3), (1, 2), 1),
    (2, 6, 8, 8, 4, 1, 1, (2, 2), (0, 0, 0, 0), (1, 1), 2),
    (1, 2, 5, 6, 2, 5, 5, (3, 2), (4, 4, 4, 4), (1, 1), 1),  # taps wholly in the padding
    (2, 4, 7, 7, 8, 3, 3, (1, 1), (0, 2, 2, 0), (2, 2), 4),
    (2, 3, 4, 4, 2, 2, 2, (1, 1), (0, 0, 0, 0), (1, 1), 1),
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("geometry", _CONV_GEOMETRIES)
def test_compiled_im2col_and_col2im_equal_the_numpy_passes(monkeypatch, dtype, geometry):
    """The tiled convolution's patches and their gradient added back, compiled from the
    unpadded input, against the padded NumPy copies and adds: the same bits (nan and
    signed zeros included), strides, paddings, dilations and groups of every kind."""
    from vtl.backends._common.conv import out_size
    from vtl.backends.numpy import conv as npconv

    n, c, h, w, o, kh, kw, stride, pads, dil, groups = geometry
    ho = out_size(h, kh, stride[0], pads[0], pads[1], dil[0])
    wo = out_size(w, kw, stride[1], pads[2], pads[3], dil[1])
    geom = (stride, pads, dil, groups, kh, kw, ho, wo)
    k = c // groups * kh * kw
    rng = np.random.default_rng(sum(geometry[:5]))
    x = rng.standard_normal((n, c, h, w)).astype(dtype)
    x.flat[::7] = -0.0
    x.flat[3] = np.nan
    dcol = rng.standard_normal((groups, k, n * ho * wo)).astype(dtype)
    dcol.flat[5] = np.inf
    got, want = [], []
    for compiled, out in ((True, got), (False, want)):
        monkeypatch.setattr(_compiled, "ENABLED", compiled)
        assert npconv._compiled_taps(x) == compiled
        out.append(npconv._im2col_tile(x, geom, k).copy())
        dx = np.empty_like(x)
        npconv._col2im_tile(dcol, dx, geom)
        out.append(dx)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)
        same = ~np.isnan(b)
        np.testing.assert_array_equal(np.signbit(a[same]), np.signbit(b[same]))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("size", [0, 1, 7, 1 << 12 | 5])
def test_compiled_masks_equal_the_numpy_passes(monkeypatch, dtype, size):
    """ReLU's gradient (nan inputs pass the gradient, zeros and negatives give +0.0) and
    ``where(mask, 0, g)`` in one compiled pass, split over the pool when large (here from
    4096 elements): the NumPy passes' bits."""
    monkeypatch.setenv("VTL_NUM_THREADS", "3")
    monkeypatch.setattr(npnn, "THRESHOLD", 1 << 12)
    rng = np.random.default_rng(size)
    x = rng.standard_normal(size).astype(dtype)
    x[::5] = 0.0
    x[1::7] = -0.0
    x[2::11] = np.nan
    g = rng.standard_normal(size).astype(dtype)
    g[::3] = -0.0
    g[1::13] = np.nan
    mask = rng.random(size) < 0.4
    shape = (size,) if size < 8 else (size // 5, 5) if size % 5 == 0 else (size,)
    got, want = [], []
    for compiled, out in ((True, got), (False, want)):
        monkeypatch.setattr(_compiled, "ENABLED", compiled)
        out.append(npnn.relu_backward(x.reshape(shape), g.reshape(shape)))
        out.append(npnn.zero_where(mask.reshape(shape), g.reshape(shape)))
    for a, b in zip(got, want, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_array_equal(a.view(f"u{a.itemsize}"), b.view(f"u{b.itemsize}"))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("size", [1, 7, 1 << 12 | 5])
def test_compiled_gelu_equals_the_portable_formulas(monkeypatch, dtype, size):
    """The exact GELU and its gradient in one compiled pass each (float64 through the C
    library's erfc, rounded once), split over the pool when large (here from 4096
    elements), against the portable formulas (erfc's rational approximation) computed in
    float64 and rounded: within a few units in the last place, infinities and nan as
    PyTorch; the tanh form is declined; ``F.gelu`` runs the kernel both ways."""
    from vtl.nn.functional import activation as act

    monkeypatch.setenv("VTL_NUM_THREADS", "3")
    monkeypatch.setattr(npnn, "THRESHOLD", 1 << 12)
    rng = np.random.default_rng(size)
    x = (4 * rng.standard_normal(size)).astype(dtype)
    x[:min(size, 5)] = [0.0, -40.0, 40.0, np.inf, -np.inf][:min(size, 5)]
    g = rng.standard_normal(size).astype(dtype)
    kern = npnn.NumpyGelu()
    assert kern.supports(np.dtype(dtype)) and not kern.supports(np.dtype(np.float16))
    y, dx = kern.forward(x, "none"), kern.backward(x, g, "none")
    x64, g64 = x.astype(np.float64), g.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        want_y = act._gelu(np, x64, "none")
        want_dx = act._gelu_grad(np, x64, g64, "none")
    fin = np.isfinite(x)
    eps = np.finfo(dtype).eps
    for got, want in ((y, want_y), (dx, want_dx)):
        assert got.dtype == dtype and got.shape == x.shape
        np.testing.assert_allclose(got[fin], want[fin], rtol=8 * eps,
                                   atol=8 * eps * float(np.abs(want[fin]).max() + 1))
        # the limits where the portable formulas give them (gelu(inf) = inf, x -> -inf
        # gives 0), nan where they give nan (-inf * 0 and the gradient at infinities)
        np.testing.assert_array_equal(got[~fin], want[~fin].astype(dtype))
    if size >= 5:
        assert y[1] == 0 and y[2] == 40 and dx[1] == 0 and dx[2] == g[2]
    assert kern.forward(x, "tanh") is None and kern.backward(x, g, "tanh") is None
    calls = []
    for way in ("forward", "backward"):
        def spy(*a, _f=getattr(kern, way), _w=way):
            calls.append(_w)
            return _f(*a)

        monkeypatch.setattr(kern, way, spy)
    with use_kernel("gelu", kern):
        t = vtl.asarray(x, backend="numpy", requires_grad=True)
        out = F.gelu(t)
        out.backward(vtl.asarray(g, backend="numpy"))
    assert calls == ["forward", "backward"]
    np.testing.assert_array_equal(to_numpy(out), y)
    np.testing.assert_array_equal(to_numpy(t.grad), dx)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_compiled_silu_equals_the_portable_formula(monkeypatch, dtype):
    """SiLU and its gradient in one compiled pass each (float64, rounded once), split over
    the pool (here from 4096 elements), against ``x * sigmoid(x)`` and ``g s (1 + x (1 -
    s))`` in float64: within a few units in the last place; the tails, infinities and nan
    as the composite gives them."""
    monkeypatch.setenv("VTL_NUM_THREADS", "3")
    monkeypatch.setattr(npnn, "THRESHOLD", 1 << 12)
    rng = np.random.default_rng(8)
    x = (6 * rng.standard_normal(5000)).astype(dtype)
    x[:6] = [0.0, -100.0, 100.0, np.inf, -np.inf, np.nan]
    g = rng.standard_normal(x.size).astype(dtype)
    kern = npnn.NumpySilu()
    assert kern.supports(np.dtype(dtype)) and not kern.supports(np.dtype(np.float16))
    y, dx = kern.forward(x.reshape(50, 100)), kern.backward(x.reshape(50, 100),
                                                           g.reshape(50, 100))
    assert y.shape == dx.shape == (50, 100) and y.dtype == dx.dtype == dtype
    x64, g64 = x.astype(np.float64), g.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        s = 1.0 / (1.0 + np.exp(-x64))
        want_y, want_dx = x64 * s, g64 * s * (1.0 + x64 * (1.0 - s))
    eps = float(np.finfo(dtype).eps)
    for got, want in ((y.reshape(-1), want_y), (dx.reshape(-1), want_dx)):
        np.testing.assert_allclose(got, want.astype(dtype), rtol=4 * eps, atol=1e-300)
    assert kern.backward(x, g.astype(np.float16)) is None
