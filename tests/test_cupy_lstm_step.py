"""Fused LSTM time steps of the CuPy backend (``vtl/backends/cupy/rnn.py``): the
recurrent product and the cell in one launch each way.

* On the host (given a C++20 compiler), through the CUDA emulation of
  ``test_cupy_nn_kernels``: each step against float64 NumPy math, sizes that are not
  multiples of the blocks (16 units x 2 rows, 8 slices of the inner dimension), every
  combination of incoming gradients, and an empty batch or state (no launch).
* Behind ``nn.LSTM`` on the numpy backend (the host build registered as its
  ``lstm_cell`` kernel): outputs and every gradient equal the portable path's, for one
  and two layers, bidirectional, losses on ``h_n`` or ``c_n`` only, batch-first; step by
  step and by whole layers (``layer_forward``/``layer_backward``: the steps' launches with
  addresses computed), the two bit for bit.
* On a GPU (the cupy backend): ``nn.LSTM`` with the fused steps against the portable path,
  and ``nn.LSTM``/``nn.GRU`` under 16-bit autocast; on cupy and wgpu, whole layers against
  step by step, bit for bit.
"""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest
from helpers import use_kernel
from nn_kernel_checks import assert_rnn_kernel_under_autocast
from test_cupy_nn_kernels import _DEV, _HOST_MATH, FakeCupy, build_host_lib

import vtl
from vtl import nn
from vtl.backends.cupy import rnn as S

_VARIANTS = [(s, c, "int") for s in S.STEP_SPECS for c in ("float", "double", "half", "bfloat16")]
_LOW = {"float16": np.dtype(np.float16), "bfloat16": np.dtype(ml_dtypes.bfloat16)}


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return build_host_lib(tmp_path_factory.mktemp("cupy_lstm_step"), _VARIANTS, _HOST_MATH)


@pytest.fixture
def steps(lib, monkeypatch):
    monkeypatch.setattr(S.LstmSteps, "_device_of", staticmethod(lambda a: _DEV))
    monkeypatch.setattr(S.LstmSteps, "_address", staticmethod(lambda a: a.ctypes.data))
    cp = FakeCupy(lib, _VARIANTS)
    return cp, S.LstmSteps(cp)


def _sig(z):
    return 1 / (1 + np.exp(-z))


def np_step(g, h, w, c):
    z = g + h @ w.T
    hs = h.shape[1]
    i, f, gg, o = (z[:, k * hs:(k + 1) * hs] for k in range(4))
    i, f, gg, o = _sig(i), _sig(f), np.tanh(gg), _sig(o)
    cn = f * c + i * gg
    return o * np.tanh(cn), cn, np.concatenate([i, f, gg, o], axis=1), np.tanh(cn)


def np_step_backward(act, cprev, tc, dz_next, w, dh, dh2, dc):
    hs = tc.shape[1]
    i, f, gg, o = (act[:, k * hs:(k + 1) * hs] for k in range(4))
    dhs = np.zeros_like(tc)
    for term in (None if dz_next is None else dz_next @ w, dh, dh2):
        if term is not None:
            dhs = dhs + term
    dct = dhs * o * (1 - tc * tc) + (0 if dc is None else dc)
    dz = np.concatenate([dct * gg * i * (1 - i), dct * cprev * f * (1 - f),
                         dct * i * (1 - gg * gg), dhs * tc * o * (1 - o)], axis=1)
    return dz, dct * f


def _tol(dt):
    return {"rtol": 2e-5, "atol": 2e-5} if dt == np.float32 else {"rtol": 1e-12, "atol": 1e-12}


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize(("n", "hs"), [(1, 1), (5, 20), (17, 3), (16, 33)])
def test_step_forward_on_the_host(steps, dt, n, hs):
    cp, st = steps
    rng = np.random.default_rng(n * hs)
    g = rng.standard_normal((n, 4 * hs)).astype(dt)
    h, c = (rng.standard_normal((n, hs)).astype(dt) for _ in range(2))
    w = (rng.standard_normal((4 * hs, hs)) / np.sqrt(hs)).astype(dt)
    out = tuple(np.empty(s, dt) for s in ((n, hs), (n, hs), (n, 4 * hs), (n, hs)))
    cp.log.clear()
    wt = st.recurrent_weight(w)
    assert wt.shape == (hs, 4 * hs) and wt.flags.c_contiguous
    got = st.step_forward(g, h, wt, c, out)
    assert cp.log == ["vtl_lstm_step_fwd"]
    assert st.step_forward(g, h, w, c, out) is None  # W_hh itself, not W_hh^T: declined
    ref = np_step(*(a.astype(np.float64) for a in (g, h, w, c)))
    for a, r in zip(got, ref, strict=True):
        np.testing.assert_allclose(a, r, **_tol(dt))


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize(("n", "hs"), [(3, 5), (17, 18)])
@pytest.mark.parametrize("which", list(itertools.product([0, 1], repeat=4)))
def test_step_backward_on_the_host(steps, dt, n, hs, which):
    cp, st = steps
    rng = np.random.default_rng(n + hs + sum(which))
    act = _sig(rng.standard_normal((n, 4 * hs))).astype(dt)
    cprev, tc = (rng.standard_normal((n, hs)).astype(dt) for _ in range(2))
    w = rng.standard_normal((4 * hs, hs)).astype(dt)
    terms = [rng.standard_normal(s).astype(dt) if on else None
             for on, s in zip(which, ((n, 4 * hs), (n, hs), (n, hs), (n, hs)), strict=True)]
    dz_next, dh, dh2, dc = terms
    out = np.empty((n, 4 * hs), dt)
    cp.log.clear()
    dz, dcp = st.step_backward(act, cprev, tc, dz_next, w, dh, dh2, dc, True, out)
    assert cp.log == ["vtl_lstm_step_bwd"] and dz is out
    rdz, rdcp = np_step_backward(*(None if a is None else a.astype(np.float64)
                                   for a in (act, cprev, tc, dz_next, w, dh, dh2, dc)))
    np.testing.assert_allclose(dz, rdz, **_tol(dt))
    np.testing.assert_allclose(dcp, rdcp, **_tol(dt))
    _, none = st.step_backward(act, cprev, tc, dz_next, w, dh, dh2, dc, False, out)
    assert none is None


def test_steps_decline_while_a_graph_is_captured(steps, monkeypatch):
    """Under ``vtl.compile`` (a stream capturing into a CUDA graph) the caller runs the
    product and the cell's kernel instead: faster when replayed."""
    cp, st = steps
    n, hs = 3, 4
    g, w = np.ones((n, 4 * hs), np.float32), np.ones((4 * hs, hs), np.float32)
    h = np.ones((n, hs), np.float32)
    out = tuple(np.empty(s, np.float32) for s in ((n, hs), (n, hs), (n, 4 * hs), (n, hs)))

    class Stream:
        def __init__(self, ptr, capturing):
            self.ptr, self._capturing = ptr, capturing

        def is_capturing(self):
            return self._capturing

    for stream, declines in ((Stream(0, False), False), (Stream(7, False), False),
                             (Stream(7, True), True)):
        monkeypatch.setattr(cp.cuda, "get_current_stream", lambda s=stream: s, raising=False)
        cp.log.clear()
        assert (st.step_forward(g, h, np.ascontiguousarray(w.T), h, out) is None) == declines
        assert (st.recurrent_weight(w) is w) == declines
        assert (st.step_backward(out[2], h, h, None, w, h, None, None, True,
                                 np.empty((n, 4 * hs), np.float32)) is None) == declines
        assert cp.log == ([] if declines else ["vtl_lstm_step_fwd", "vtl_lstm_step_bwd"])


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_step_backward_reads_a_strided_output_gradient(steps, monkeypatch, dt):
    """``dh2`` as a step of a batch-first output's gradient (rows apart by L * H): read in
    place with its row stride, not copied."""
    cp, st = steps
    n, hs, length = 5, 7, 3
    rng = np.random.default_rng(21)
    act = _sig(rng.standard_normal((n, 4 * hs))).astype(dt)
    cprev, tc = (rng.standard_normal((n, hs)).astype(dt) for _ in range(2))
    w = rng.standard_normal((4 * hs, hs)).astype(dt)
    dout = rng.standard_normal((n, length, hs)).astype(dt)  # (N, L, H)
    dh2 = dout[:, 1, :]
    assert not dh2.flags.c_contiguous
    monkeypatch.setattr(st, "_contiguous", lambda a: a if a is None or a is not dh2 else 1 / 0)
    cp.log.clear()
    dz, dcp = st.step_backward(act, cprev, tc, None, w, None, dh2, None, True,
                               np.empty((n, 4 * hs), dt))
    assert cp.log == ["vtl_lstm_step_bwd"]
    rdz, rdcp = np_step_backward(*(None if a is None else a.astype(np.float64)
                                   for a in (act, cprev, tc, None, w, None, dh2, None)))
    np.testing.assert_allclose(dz, rdz, **_tol(dt))
    np.testing.assert_allclose(dcp, rdcp, **_tol(dt))


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_16bit_steps_on_the_host(steps, name):
    """16-bit steps: read as 16-bit words, computed in float32, each result rounded once."""
    cp, st = steps
    dt = _LOW[name]
    n, hs = 5, 20
    rng = np.random.default_rng(8)
    r = (lambda *shape: rng.standard_normal(shape).astype(dt))
    g, h, c, w = r(n, 4 * hs), r(n, hs), r(n, hs), (r(4 * hs, hs) * 0.2).astype(dt)
    out = tuple(np.empty(sh, dt) for sh in ((n, hs), (n, hs), (n, 4 * hs), (n, hs)))
    got = st.step_forward(g, h, st.recurrent_weight(w), c, out)
    ref = np_step(*(a.astype(np.float64) for a in (g, h, w, c)))
    eps = float(np.finfo(dt).eps)
    for a, b in zip(got, ref, strict=True):
        assert a.dtype == dt
        np.testing.assert_allclose(a.astype(np.float64), b, rtol=2 * eps, atol=2 * eps)
    act, tc = got[2], got[3]
    dz_next, dh2 = r(n, 4 * hs), r(n, hs)
    dz, dcp = st.step_backward(act, c, tc, dz_next, w, None, dh2, None, True,
                               np.empty((n, 4 * hs), dt))
    rdz, rdcp = np_step_backward(*(None if a is None else a.astype(np.float64)
                                   for a in (act, c, tc, dz_next, w, None, dh2, None)))
    scale = float(np.abs(rdz).max())
    np.testing.assert_allclose(dz.astype(np.float64), rdz, rtol=2 * eps, atol=2 * eps * scale)
    np.testing.assert_allclose(dcp.astype(np.float64), rdcp, rtol=2 * eps,
                               atol=2 * eps * float(np.abs(rdcp).max()))


def test_an_empty_batch_launches_no_step(steps):
    """CuPy launches at least one block even for an empty grid, and the steps clamp their
    reads to row N - 1: an empty batch (or state) must not reach the kernels."""
    cp, st = steps
    for n, hs in ((0, 4), (3, 0)):
        g = np.ones((n, 4 * hs), np.float32)
        h = np.ones((n, hs), np.float32)
        w = np.ones((4 * hs, hs), np.float32)
        out = tuple(np.empty(sh, np.float32) for sh in ((n, hs), (n, hs), (n, 4 * hs),
                                                         (n, hs)))
        cp.log.clear()
        assert st.step_forward(g, h, np.ascontiguousarray(w.T), h, out) is None
        assert st.step_backward(out[2], h, h, None, w, h, None, None, True,
                                np.empty((n, 4 * hs), np.float32)) is None
        assert cp.log == []


def test_steps_decline(steps):
    _, st = steps
    f = np.ones((2, 4), np.float32)
    out = (np.empty((2, 1), np.float32),) * 2 + (np.empty((2, 4), np.float32),
                                                 np.empty((2, 1), np.float32))
    one = np.ones((2, 1), np.float32)
    assert st.step_forward(f.astype(np.float16), one, np.ones((4, 1), np.float32), one,
                           out) is None  # mixed dtypes
    assert st.step_forward(f, one, np.ones((4, 1), np.float64), one, out) is None


class _StepsOnly:
    """An ``lstm_cell`` kernel whose every step is a fused one (the pointwise methods
    must not be reached)."""

    def __init__(self, st):
        self.step_forward, self.step_backward = st.step_forward, st.step_backward
        self.recurrent_weight = st.recurrent_weight

    def supports(self, dtype):
        return np.dtype(dtype) in (np.float32, np.float64)

    def forward(self, *a, **k):
        raise AssertionError("a fused step declined")

    backward = forward


def _lstm_run(dt, layers, bidirectional, loss_on, backend="numpy"):
    vtl.random.seed(3)
    m = nn.LSTM(6, 9, num_layers=layers, bidirectional=bidirectional)
    m = m.to(dtype=getattr(vtl, np.dtype(dt).name)).to(backend)
    rng = np.random.default_rng(1)
    d = 2 if bidirectional else 1
    x = vtl.asarray(rng.standard_normal((5, 3, 6)).astype(dt), backend=backend,
                    requires_grad=True)
    h0 = vtl.asarray(rng.standard_normal((layers * d, 3, 9)).astype(dt), backend=backend,
                     requires_grad=True)
    c0 = vtl.asarray(rng.standard_normal((layers * d, 3, 9)).astype(dt), backend=backend,
                     requires_grad=True)
    if loss_on == "batch_first":  # the output's gradient: a strided view of each step
        m.batch_first = True
        x = vtl.asarray(np.swapaxes(x.numpy(), 0, 1).copy(), backend=backend,
                        requires_grad=True)
    out, (hn, cn) = m(x, (h0, c0))
    if loss_on == "h_n":
        loss = (hn * hn).sum()
    elif loss_on == "c_n":
        loss = (cn * cn).sum()
    else:
        loss = (out * out).sum() + (cn * hn).sum()
    loss.backward()
    return [t.numpy() for t in (out, hn, cn, x.grad, h0.grad, c0.grad)] + \
        [p.grad.numpy() for p in m.parameters()]


class _LayersOnly(_StepsOnly):
    """An ``lstm_cell`` kernel that runs whole layers (``layer_forward``/``layer_backward``,
    their steps launched by address); a step of its own must not be reached."""

    def __init__(self, st):
        self.layer_forward, self.layer_backward = st.layer_forward, st.layer_backward
        self.recurrent_weight = st.recurrent_weight
        self.st = st

    def step_forward(self, *a):
        raise AssertionError("a layer declined")

    step_backward = step_forward


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize(("layers", "bidirectional", "loss_on"),
                         [(1, False, "all"), (2, True, "all"), (1, True, "h_n"),
                          (1, False, "c_n"), (2, False, "batch_first")])
@pytest.mark.parametrize("whole", [False, True], ids=["steps", "layers"])
def test_lstm_with_fused_steps_equals_portable(steps, dt, layers, bidirectional, loss_on,
                                               whole):
    """Through the fused steps one call each (``steps``) and through the layers' launches by
    address (``layers``): outputs and every gradient equal the portable path's (the same
    kernels in the same order: equal to rounding of the portable path only)."""
    cp, st = steps
    with use_kernel("lstm_cell", (_LayersOnly if whole else _StepsOnly)(st)):
        cp.log.clear()
        got = _lstm_run(dt, layers, bidirectional, loss_on)
        assert "vtl_lstm_step_fwd" in cp.log and "vtl_lstm_step_bwd" in cp.log
    with use_kernel("lstm_cell", None):
        want = _lstm_run(dt, layers, bidirectional, loss_on)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, **_tol(dt))


def test_layers_equal_steps_bit_for_bit(steps):
    """A layer's launches by address and the steps' launches one call each: the same
    kernels on the same operands, so the same bits."""
    _, st = steps
    runs = []
    for kern in (_StepsOnly(st), _LayersOnly(st)):
        with use_kernel("lstm_cell", kern):
            runs.append(_lstm_run(np.float32, 2, True, "all"))
    for a, b in zip(*runs, strict=True):
        np.testing.assert_array_equal(a, b)


def test_layers_decline(steps):
    """Operands the layer launches do not take: the steps (or the portable path) run."""
    _, st = steps
    g = np.ones((3, 2, 8), np.float32)
    h = np.ones((2, 2), np.float32)
    w = np.ones((8, 2), np.float32)
    assert st.layer_forward(g, h, h, w, False) is not None
    assert st.layer_forward(g[:, :, ::2], h, h, w, False) is None  # strided gate rows
    # each step's rows contiguous, the steps 40 elements apart: read in place, the same bits
    wide = np.random.default_rng(2).standard_normal((3, 5, 8)).astype(np.float32)
    got = st.layer_forward(wide[:, :2], h, h, w, True)
    want = st.layer_forward(np.ascontiguousarray(wide[:, :2]), h, h, w, True)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)
    assert st.layer_forward(g, h, h, w.astype(np.float64), False) is None  # mixed dtypes
    assert st.layer_forward(g, h[:1], h[:1], w, False) is None  # batch mismatch
    assert st.layer_forward(g[:0], h, h, w, False) is None  # no steps
    assert st.layer_forward(g, h[0], h[0], w, False) is None  # a 1-d state
    assert st.layer_backward((h, h, g, h), w, None, h, None, True, False) is None  # 2-d
    saved = (h, np.ones((3, 2, 2), np.float32), g, np.ones((3, 2, 2), np.float32))
    assert st.layer_backward(saved, w, None, None, None, True, False) is None  # no gradient
    assert st.layer_backward(saved, w, None, h, None, True, False) is not None
    assert st.layer_backward(saved, w, np.ones((3, 2, 3), np.float32), None, None, True,
                             False) is None  # the output gradient's shape


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_cupy_rnn_16bit_under_autocast(cupy_backend, kind, name):
    """Under autocast the LSTM (fused steps, and the cell's pointwise kernels in float32)
    and the GRU cell kernel take the low dtype: close to the portable path."""
    assert_rnn_kernel_under_autocast("cupy", name, kind)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_cupy_lstm_fused_steps_match_portable(cupy_backend, dt):
    kern = cupy_backend.kernel("lstm_cell")
    before = kern.steps.launches
    got = _lstm_run(dt, 2, True, "all", backend="cupy")
    assert kern.steps.launches > before
    with use_kernel("lstm_cell", None, backend="cupy"):
        want = _lstm_run(dt, 2, True, "all", backend="cupy")
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, **_tol(dt))


class _WithoutLayers:
    """A backend's ``lstm_cell`` kernel with its whole-layer methods hidden: one launch per
    step call."""

    def __init__(self, kern):
        self._kern = kern

    def __getattr__(self, name):
        if name in ("layer_forward", "layer_backward"):
            raise AttributeError(name)
        return getattr(self._kern, name)


class _CountingLayers:
    """A backend's ``lstm_cell`` kernel whose whole-layer methods count the layers they ran."""

    def __init__(self, kern):
        self._kern, self.ran = kern, [0, 0]

    def __getattr__(self, name):
        return getattr(self._kern, name)

    def layer_forward(self, *a):
        res = self._kern.layer_forward(*a)
        self.ran[0] += res is not None
        return res

    def layer_backward(self, *a):
        res = self._kern.layer_backward(*a)
        self.ran[1] += res is not None
        return res


@pytest.mark.parametrize("loss_on", ["all", "h_n", "c_n", "batch_first"])
def test_gpu_layers_equal_steps(backend, loss_on):
    """On the GPU backends the LSTM runs whole layers, their steps launched by address
    (cupy) or by offsets into the sequence buffers (wgpu): the same kernels as step by step,
    so the same bits, for the outputs and every gradient."""
    kern = vtl.backends.get(backend).kernel("lstm_cell")
    if backend == "numpy" or getattr(kern, "layer_backward", None) is None:
        pytest.skip(f"{backend}'s LSTM has no whole-layer launches both ways")
    counting = _CountingLayers(kern)
    runs = []
    for k in (counting, _WithoutLayers(kern)):
        with use_kernel("lstm_cell", k, backend=backend):
            runs.append(_lstm_run(np.float32, 2, True, loss_on, backend=backend))
    assert counting.ran == [4, 4]  # two layers, two directions
    for a, b in zip(*runs, strict=True):
        np.testing.assert_array_equal(a, b)
