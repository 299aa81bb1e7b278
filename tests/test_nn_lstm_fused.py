"""The fused LSTM/GRU cell ops (``lstm_cell_pointwise``, ``gru_cell_pointwise``):
values against a NumPy oracle and PyTorch, gradients (first and second order) against
finite differences, the backend-kernel path through a simulated kernel, and the CuPy
kernel bodies compiled for the host."""

from __future__ import annotations

import numpy as np
import pytest

import vtl
from tests.helpers import (
    assert_close,
    check_grad,
    check_grad_matches_numpy,
    supported_dtypes,
    to_numpy,
)
from vtl import nn
from vtl.autograd.graph import edge_node
from vtl.nn.functional._rnn_fused import (
    gru_cell_pointwise,
    gru_layer,
    lstm_cell_pointwise,
    lstm_layer,
)

try:
    import torch
except ImportError:  # pragma: no cover - torch is optional
    torch = None


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _lstm_ref(z, c_prev):
    hs = c_prev.shape[-1]
    zi, zf, zg, zo = (z[..., k * hs:(k + 1) * hs] for k in range(4))
    c = _sigmoid(zf) * c_prev + _sigmoid(zi) * np.tanh(zg)
    return _sigmoid(zo) * np.tanh(c), c


def _gru_ref(x, hg, h_prev):
    hs = h_prev.shape[-1]
    xr, xz, xn = (x[..., k * hs:(k + 1) * hs] for k in range(3))
    hr, hz, hn = (hg[..., k * hs:(k + 1) * hs] for k in range(3))
    r, z = _sigmoid(xr + hr), _sigmoid(xz + hz)
    n = np.tanh(xn + r * hn)
    return (1 - z) * n + z * h_prev


def _float_dtypes(backend):
    return [d for n, d in supported_dtypes(backend).items() if n in ("float32", "float64")]


@pytest.mark.parametrize("lead", [(5,), (), (2, 3), (0,)])
@pytest.mark.parametrize("hidden", [False, True])
def test_lstm_forward_matches_numpy(backend, lead, hidden):
    rng = np.random.default_rng(0)
    hs = 3
    for dt in _float_dtypes(backend):
        z = (rng.standard_normal(lead + (4 * hs,)) * 3).astype(dt)
        z2 = (rng.standard_normal(lead + (4 * hs,)) * 3).astype(dt)
        c0 = rng.standard_normal(lead + (hs,)).astype(dt)
        h, c = lstm_cell_pointwise(vtl.asarray(z), vtl.asarray(c0),
                                   vtl.asarray(z2) if hidden else None)
        eh, ec = _lstm_ref(z + z2 if hidden else z, c0)
        assert_close(h, eh.astype(dt))
        assert_close(c, ec.astype(dt))
        # the same function on plain arrays (forward only)
        ph, pc = lstm_cell_pointwise(z, c0, z2 if hidden else None)
        np.testing.assert_allclose(ph, eh, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(pc, ec, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("lead", [(4,), (), (2, 3)])
def test_gru_forward_matches_numpy(backend, lead):
    rng = np.random.default_rng(1)
    hs = 2
    for dt in _float_dtypes(backend):
        x, hg = (rng.standard_normal((2,) + lead + (3 * hs,)) * 3).astype(dt)
        h0 = rng.standard_normal(lead + (hs,)).astype(dt)
        h = gru_cell_pointwise(vtl.asarray(x), vtl.asarray(hg), vtl.asarray(h0))
        assert_close(h, _gru_ref(x, hg, h0).astype(dt))
        np.testing.assert_allclose(gru_cell_pointwise(x, hg, h0), _gru_ref(x, hg, h0),
                                   rtol=1e-5, atol=1e-6)


def test_extreme_gates_saturate_without_nan(backend):
    z = vtl.asarray(np.array([[1e4, -1e4, -1e4, 1e4, -1e4, 1e4, -1e4, 1e4]], np.float32))
    h, c = lstm_cell_pointwise(z, vtl.asarray(np.array([[2.0, 3.0]], np.float32)))
    # i = (1, 0), f = (0, 1), g = (-1, 1), o = (0, 1)
    assert_close(c, np.array([[-1.0, 3.0]], np.float32))
    assert_close(h, np.array([[0.0, np.tanh(3.0)]], np.float32))


def _lstm_fn(v_h, v_c, with_hidden):
    def f(z, c0, *z2):
        h, c = lstm_cell_pointwise(z, c0, z2[0] if with_hidden else None)
        return h * vtl.asarray(v_h) + c * vtl.asarray(v_c)
    return f


@pytest.mark.parametrize("with_hidden", [False, True])
@pytest.mark.parametrize("outputs", ["both", "h", "c"])
def test_lstm_gradients_finite_differences(with_hidden, outputs):
    rng = np.random.default_rng(2)
    z, z2 = rng.standard_normal((2, 3, 8)) * 2
    c0 = rng.standard_normal((3, 2))
    v_h = rng.standard_normal((3, 2)) * (outputs != "c")
    v_c = rng.standard_normal((3, 2)) * (outputs != "h")
    args = (z, c0, z2) if with_hidden else (z, c0)
    check_grad(_lstm_fn(v_h, v_c, with_hidden), *args)


def test_lstm_second_order_finite_differences():
    """Gradients of gradients (create_graph=True) through the vtl-function rule."""
    rng = np.random.default_rng(3)
    z, z2 = rng.standard_normal((2, 2, 4))
    c0 = rng.standard_normal((2, 1))
    v_h, v_c = rng.standard_normal((2, 2, 1))

    def grads(z, c0, z2):
        for t in (z, c0, z2):
            t.requires_grad_(True)  # a no-op on the checked inputs, needed on the others
        h, c = lstm_cell_pointwise(z, c0, z2)
        loss = vtl.sum(h * vtl.asarray(v_h) + c * c * vtl.asarray(v_c))
        gz, gc, g2 = vtl.autograd.grad(loss, [z, c0, z2], create_graph=True)
        return vtl.concat([vtl.reshape(gz, (-1,)), vtl.reshape(gc, (-1,)),
                           vtl.reshape(g2, (-1,))])

    check_grad(grads, z, c0, z2, rtol=1e-4, atol=1e-6)


def test_gru_gradients_first_and_second_order():
    rng = np.random.default_rng(4)
    x, hg = rng.standard_normal((2, 3, 6)) * 2
    h0 = rng.standard_normal((3, 2))
    check_grad(lambda x, hg, h0: gru_cell_pointwise(x, hg, h0), x, hg, h0)
    v = rng.standard_normal((3, 2))

    def grads(x, hg, h0):
        for t in (x, hg, h0):
            t.requires_grad_(True)
        h = gru_cell_pointwise(x, hg, h0)
        gs = vtl.autograd.grad(vtl.sum(h * h * vtl.asarray(v)), [x, hg, h0], create_graph=True)
        return vtl.concat([vtl.reshape(g, (-1,)) for g in gs])

    check_grad(grads, x, hg, h0, rtol=1e-4, atol=1e-6)


def test_gradients_only_where_required(backend):
    rng = np.random.default_rng(5)
    z = vtl.asarray(rng.standard_normal((2, 8)).astype(np.float32), requires_grad=True)
    c0 = vtl.asarray(rng.standard_normal((2, 2)).astype(np.float32))
    h, c = lstm_cell_pointwise(z, c0)
    vtl.sum(h + c).backward()
    assert z.grad is not None and z.grad.shape == (2, 8) and c0.grad is None
    with vtl.no_grad():
        h, _ = lstm_cell_pointwise(z, c0)
    assert h.grad_fn is None and not h.requires_grad


def test_cell_records_few_nodes():
    """One LSTMCell/GRUCell step is three graph nodes (two projections and the gate op);
    a recurrent layer is one node per direction plus its input projection."""
    def count(t):
        seen, stack = set(), [t.grad_fn]
        while stack:
            n = stack.pop()
            if n is None or n in seen:
                continue
            seen.add(n)
            stack.extend(edge_node(e) for e in n.edges if edge_node(e) is not None)
        return seen

    x = vtl.ones((2, 3))
    h = vtl.ones((2, 4))
    m = nn.LSTMCell(3, 4)
    h1, c1 = m(x, (h, h))
    assert h1.grad_fn is c1.grad_fn and h1.grad_fn.name() == "LstmCellBackward"
    assert len(count(h1)) <= 3
    g = nn.GRUCell(3, 4)
    assert len(count(g(x, h))) <= 3
    # a whole layer: the input projection, the bias sum (LSTM) and the recurrence
    out, _ = nn.LSTM(3, 4)(vtl.ones((5, 2, 3)))
    assert out.grad_fn.name() == "LstmLayerBackward" and len(count(out)) <= 3
    out, _ = nn.GRU(3, 4)(vtl.ones((5, 2, 3)))
    assert out.grad_fn.name() == "GruLayerBackward" and len(count(out)) <= 2


def _layer_ref(gates, h0, c0, w, reverse):
    out = np.empty(gates.shape[:2] + h0.shape[-1:])
    h, c = h0, c0
    for t in (range(len(gates) - 1, -1, -1) if reverse else range(len(gates))):
        h, c = _lstm_ref(gates[t] + h @ w.T, c)
        out[t] = h
    return out, h, c


@pytest.mark.parametrize("reverse", [False, True])
def test_lstm_layer_matches_loop(backend, reverse):
    rng = np.random.default_rng(11)
    gates = rng.standard_normal((4, 2, 12)).astype(np.float32)
    h0, c0 = rng.standard_normal((2, 2, 3)).astype(np.float32)
    w = rng.standard_normal((12, 3)).astype(np.float32)
    res = lstm_layer(vtl.asarray(gates), vtl.asarray(h0), vtl.asarray(c0), vtl.asarray(w),
                     reverse)
    for a, e in zip(res, _layer_ref(gates, h0, c0, w, reverse), strict=True):
        assert_close(a, e.astype(np.float32))
    for a, e in zip(lstm_layer(gates, h0, c0, w, reverse), _layer_ref(gates, h0, c0, w, reverse),
                    strict=True):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("outputs", ["all", "out", "hn", "cn", "out_mid"])
def test_lstm_layer_gradients_finite_differences(reverse, outputs):
    rng = np.random.default_rng(12)
    gates = rng.standard_normal((3, 2, 8))
    h0, c0 = rng.standard_normal((2, 2, 2))
    w = rng.standard_normal((8, 2))
    vs = rng.standard_normal((3, 2, 2)), rng.standard_normal((2, 2)), rng.standard_normal((2, 2))
    if outputs == "out_mid":  # only an inner step's output is used
        vs = (vs[0] * np.array([0, 1, 0])[:, None, None], 0 * vs[1], 0 * vs[2])
    elif outputs != "all":
        vs = tuple(v * (k == ["out", "hn", "cn"].index(outputs)) for k, v in enumerate(vs))

    def f(gates, h0, c0, w):
        out, hn, cn = lstm_layer(gates, h0, c0, w, reverse)
        return (vtl.sum(out * vtl.asarray(vs[0])) + vtl.sum(hn * vtl.asarray(vs[1]))
                + vtl.sum(cn * vtl.asarray(vs[2])))

    check_grad(f, gates, h0, c0, w)


def test_lstm_layer_second_order_finite_differences():
    rng = np.random.default_rng(13)
    gates = rng.standard_normal((2, 1, 4))
    h0, c0 = rng.standard_normal((2, 1, 1))
    w = rng.standard_normal((4, 1))
    v = rng.standard_normal((2, 1, 1))

    def grads(gates, h0, c0, w):
        for t in (gates, h0, c0, w):
            t.requires_grad_(True)
        out, hn, cn = lstm_layer(gates, h0, c0, w, True)
        loss = vtl.sum(out * out * vtl.asarray(v)) + vtl.sum(cn * cn)
        gs = vtl.autograd.grad(loss, [gates, h0, c0, w], create_graph=True)
        return vtl.concat([vtl.reshape(g, (-1,)) for g in gs])

    check_grad(grads, gates, h0, c0, w, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("reverse", [False, True])
def test_gradients_on_backend_match_numpy(backend, reverse):
    rng = np.random.default_rng(14)
    gates = rng.standard_normal((3, 2, 8))
    h0, c0 = rng.standard_normal((2, 2, 2))
    w = rng.standard_normal((8, 2))

    def layer(gates, h0, c0, w):
        out, hn, cn = lstm_layer(gates, h0, c0, w, reverse)
        return vtl.concat([vtl.reshape(out, (-1,)), vtl.reshape(cn * 2, (-1,))])

    check_grad_matches_numpy(layer, backend, gates, h0, c0, w)

    def cells(z, c0, z2, hg):
        h, c = lstm_cell_pointwise(z, c0, z2)
        return vtl.concat([h, c, gru_cell_pointwise(z[:, :6], hg, c0)], axis=-1)

    check_grad_matches_numpy(cells, backend, gates[0], c0, gates[1], gates[2, :, :6])


@pytest.mark.parametrize("reverse", [False, True])
def test_layer_gradients_of_a_strided_output_gradient(backend, reverse):
    """The output's gradient as a batch-first view (each step a strided slice), as
    ``LSTM(batch_first=True)`` hands it to the layer: the step kernels read it in place."""
    rng = np.random.default_rng(15)
    gates = rng.standard_normal((4, 3, 20))
    h0, c0 = rng.standard_normal((2, 3, 5))
    w = rng.standard_normal((20, 5))

    def layer(gates, h0, c0, w):
        out, hn, cn = lstm_layer(gates, h0, c0, w, reverse)
        return vtl.permute_dims(out, (1, 0, 2))  # (N, L, H): its gradient is strided over L

    check_grad_matches_numpy(layer, backend, gates, h0, c0, w)


def test_lstm_layer_errors(backend):
    z = vtl.zeros((3, 2, 8))
    h = vtl.zeros((2, 2))
    with pytest.raises(ValueError, match=r"lstm_layer\(\): expected gates"):
        lstm_layer(vtl.zeros((0, 2, 8)), h, h, vtl.zeros((8, 2)))
    with pytest.raises(ValueError, match=r"lstm_layer\(\): states"):
        lstm_layer(z, h, h, vtl.zeros((8, 3)))
    with pytest.raises(TypeError, match="cannot mix"):
        lstm_layer(z, h, h, np.zeros((8, 2), np.float32))


def _gru_layer_ref(gates, h0, w, b, reverse):
    out = np.empty(gates.shape[:2] + h0.shape[-1:])
    h = h0
    for t in (range(len(gates) - 1, -1, -1) if reverse else range(len(gates))):
        h = _gru_ref(gates[t], h @ w.T + (0 if b is None else b), h)
        out[t] = h
    return out, h


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_gru_layer_matches_loop(backend, reverse, bias):
    rng = np.random.default_rng(15)
    gates = rng.standard_normal((4, 2, 9)).astype(np.float32)
    h0 = rng.standard_normal((2, 3)).astype(np.float32)
    w = rng.standard_normal((9, 3)).astype(np.float32)
    b = rng.standard_normal(9).astype(np.float32) if bias else None
    expected = _gru_layer_ref(gates, h0, w, b, reverse)
    res = gru_layer(vtl.asarray(gates), vtl.asarray(h0), vtl.asarray(w),
                    None if b is None else vtl.asarray(b), reverse)
    for a, e in zip(res, expected, strict=True):
        assert_close(a, e.astype(np.float32))
    for a, e in zip(gru_layer(gates, h0, w, b, reverse), expected, strict=True):
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("outputs", ["all", "out", "hn", "out_mid"])
def test_gru_layer_gradients_finite_differences(reverse, outputs):
    rng = np.random.default_rng(16)
    gates = rng.standard_normal((3, 2, 6))
    h0 = rng.standard_normal((2, 2))
    w = rng.standard_normal((6, 2))
    b = rng.standard_normal(6)
    vo, vh = rng.standard_normal((3, 2, 2)), rng.standard_normal((2, 2))
    if outputs == "out_mid":
        vo, vh = vo * np.array([0, 1, 0])[:, None, None], 0 * vh
    elif outputs == "out":
        vh = 0 * vh
    elif outputs == "hn":
        vo = 0 * vo

    def f(gates, h0, w, b):
        out, hn = gru_layer(gates, h0, w, b, reverse)
        return vtl.sum(out * vtl.asarray(vo)) + vtl.sum(hn * vtl.asarray(vh))

    check_grad(f, gates, h0, w, b)
    check_grad(lambda gates, h0, w: f(gates, h0, w, None), gates, h0, w)


def test_gru_layer_second_order_finite_differences():
    rng = np.random.default_rng(17)
    gates = rng.standard_normal((2, 1, 3))
    h0 = rng.standard_normal((1, 1))
    w = rng.standard_normal((3, 1))
    b = rng.standard_normal(3)
    v = rng.standard_normal((2, 1, 1))

    def grads(gates, h0, w, b):
        for t in (gates, h0, w, b):
            t.requires_grad_(True)
        out, hn = gru_layer(gates, h0, w, b, False)
        loss = vtl.sum(out * out * vtl.asarray(v)) + vtl.sum(hn)
        gs = vtl.autograd.grad(loss, [gates, h0, w, b], create_graph=True)
        return vtl.concat([vtl.reshape(g, (-1,)) for g in gs])

    check_grad(grads, gates, h0, w, b, rtol=1e-4, atol=1e-6)


def test_gru_layer_errors(backend):
    with pytest.raises(ValueError, match=r"gru_layer\(\): expected gates"):
        gru_layer(vtl.zeros((0, 2, 6)), vtl.zeros((2, 2)), vtl.zeros((6, 2)))
    with pytest.raises(ValueError, match=r"gru_layer\(\): w_hh"):
        gru_layer(vtl.zeros((3, 2, 6)), vtl.zeros((2, 2)), vtl.zeros((6, 2)), vtl.zeros(5))


class SimulatedLstm:
    """A ``lstm_cell`` backend kernel written with NumPy-style formulas of its own."""

    def __init__(self, xp):
        self.xp = xp
        self.calls = {"forward": 0, "backward": 0}

    def supports(self, dtype) -> bool:
        return dtype.kind == "f"

    def forward(self, z, z2, c_prev, out=None):
        res = self._forward(z, z2, c_prev)
        if out is None:
            return res
        for dst, v in zip(out, (res[0], res[1], res[2], res[3]), strict=True):
            dst[...] = v  # the layer's whole-sequence buffers
        return out[0], out[1], out[2], out[3]

    def _forward(self, z, z2, c_prev):
        self.calls["forward"] += 1
        xp = self.xp
        if z2 is not None:
            z = z + z2
        hs = c_prev.shape[-1]
        sig = 1.0 / (1.0 + xp.exp(-z))
        i, f, o = sig[..., :hs], sig[..., hs:2 * hs], sig[..., 3 * hs:]
        g = xp.tanh(z[..., 2 * hs:3 * hs])
        c = f * c_prev + i * g
        tc = xp.tanh(c)
        return o * tc, c, xp.concat([i, f, g, o], axis=-1), tc

    def backward(self, act, c_prev, tc, dh, dc, need_dc_prev, dh2=None, out=None):
        dz, dcp = self._backward(act, c_prev, tc, dh, dc, need_dc_prev, dh2)
        if out is not None:
            out[...] = dz
            dz = out
        return dz, dcp

    def _backward(self, act, c_prev, tc, dh, dc, need_dc_prev, dh2=None):
        self.calls["backward"] += 1
        xp = self.xp
        hs = c_prev.shape[-1]
        i, f, g, o = (act[..., k * hs:(k + 1) * hs] for k in range(4))
        dh = xp.zeros_like(tc) if dh is None else dh
        dh = dh if dh2 is None else dh + dh2
        dc = xp.zeros_like(tc) if dc is None else dc
        dct = dc + dh * o * (1 - tc ** 2)
        dz = xp.concat([dct * g * i * (1 - i), dct * c_prev * f * (1 - f),
                        dct * i * (1 - g ** 2), dh * tc * o * (1 - o)], axis=-1)
        return dz, (dct * f if need_dc_prev else None)


class SimulatedGru:
    """A ``gru_cell`` backend kernel written with NumPy-style formulas of its own."""

    def __init__(self, xp):
        self.xp = xp
        self.calls = {"forward": 0, "backward": 0}

    def supports(self, dtype) -> bool:
        return dtype.kind == "f"

    def forward(self, x, hg, h_prev):
        self.calls["forward"] += 1
        xp = self.xp
        hs = h_prev.shape[-1]
        r = 1.0 / (1.0 + xp.exp(-(x[..., :hs] + hg[..., :hs])))
        z = 1.0 / (1.0 + xp.exp(-(x[..., hs:2 * hs] + hg[..., hs:2 * hs])))
        hn = hg[..., 2 * hs:]
        n = xp.tanh(x[..., 2 * hs:] + r * hn)
        return (1 - z) * n + z * h_prev, xp.concat([r, z, n, hn], axis=-1)

    def backward(self, act, h_prev, dh, need_dh_prev):
        self.calls["backward"] += 1
        xp = self.xp
        hs = h_prev.shape[-1]
        r, z, n, hn = (act[..., k * hs:(k + 1) * hs] for k in range(4))
        dn = dh * (1 - z) * (1 - n ** 2)
        dzp = dh * (h_prev - n) * z * (1 - z)
        dr = dn * hn * r * (1 - r)
        return (xp.concat([dr, dzp, dn], axis=-1), xp.concat([dr, dzp, dn * r], axis=-1),
                dh * z if need_dh_prev else None)


@pytest.fixture
def simulated_kernels(backend, monkeypatch):
    b = vtl.backends.get(backend)
    kerns = {"lstm_cell": SimulatedLstm(b.xp), "gru_cell": SimulatedGru(b.xp)}
    for name, k in kerns.items():
        monkeypatch.setitem(b._kernels, name, k)
    return kerns


def _run_layers(seed):
    """Forward + backward of LSTMCell, GRUCell, LSTM and GRU; outputs and all grads."""
    rng = np.random.default_rng(seed)
    vtl.random.manual_seed(seed)
    mods = [nn.LSTMCell(3, 4), nn.GRUCell(3, 4), nn.LSTM(3, 4, 2, bidirectional=True),
            nn.GRU(3, 4)]
    x = vtl.asarray(rng.standard_normal((2, 3)).astype(np.float32), requires_grad=True)
    h = vtl.asarray(rng.standard_normal((2, 4)).astype(np.float32), requires_grad=True)
    c = vtl.asarray(rng.standard_normal((2, 4)).astype(np.float32), requires_grad=True)
    xs = vtl.asarray(rng.standard_normal((5, 2, 3)).astype(np.float32), requires_grad=True)
    h1, c1 = mods[0](x, (h, c))
    outs = [h1, c1, mods[1](x, h), mods[2](xs)[0], mods[3](xs)[0]]
    loss = sum(vtl.sum(o * o) for o in outs)
    loss.backward()
    res = [to_numpy(o) for o in outs] + [to_numpy(t.grad) for t in (x, h, c, xs)]
    res += [to_numpy(p.grad) for m in mods for p in m.parameters()]
    return res


def test_simulated_kernel_matches_portable(backend, simulated_kernels):
    with_kernel = _run_layers(7)
    calls = {k: dict(v.calls) for k, v in simulated_kernels.items()}
    # LSTMCell 1 + bidirectional 2-layer LSTM 2 * 2 * 5 steps; GRUCell 1 + GRU 5 steps
    assert calls["lstm_cell"] == {"forward": 21, "backward": 21}
    assert calls["gru_cell"] == {"forward": 6, "backward": 6}
    b = vtl.backends.get(backend)
    for name in simulated_kernels:
        del b._kernels[name]
    portable = _run_layers(7)
    assert len(with_kernel) == len(portable)
    for a, p in zip(with_kernel, portable, strict=True):
        np.testing.assert_allclose(a, p, rtol=1e-5, atol=1e-6)


def test_kernel_not_used_for_unsupported_dtype(backend, simulated_kernels):
    for k in simulated_kernels.values():
        k.supports = lambda dtype: False
    z = vtl.zeros((1, 8), requires_grad=True)
    h, c = lstm_cell_pointwise(z, vtl.zeros((1, 2)))
    vtl.sum(h + c).backward()
    assert simulated_kernels["lstm_cell"].calls == {"forward": 0, "backward": 0}


def test_errors(backend):
    z = vtl.zeros((2, 8))
    c = vtl.zeros((2, 2))
    with pytest.raises(ValueError, match=r"lstm_cell_pointwise\(\): gates of shape \(2, 8\)"):
        lstm_cell_pointwise(z, vtl.zeros((2, 3)))
    with pytest.raises(ValueError, match="hidden_gates of shape"):
        lstm_cell_pointwise(z, c, vtl.zeros((2, 4)))
    with pytest.raises(ValueError, match="0-d"):
        lstm_cell_pointwise(z, vtl.zeros(()))
    if "float64" in supported_dtypes(backend):
        with pytest.raises(TypeError, match="dtype"):
            lstm_cell_pointwise(z, vtl.zeros((2, 2), dtype=vtl.float64))
    with pytest.raises(TypeError, match="cannot mix"):
        lstm_cell_pointwise(z, np.zeros((2, 2), np.float32))
    with pytest.raises(TypeError, match="real floating"):
        lstm_cell_pointwise(vtl.zeros((2, 8), dtype=vtl.int32), vtl.zeros((2, 2),
                                                                           dtype=vtl.int32))
    with pytest.raises(ValueError, match=r"gru_cell_pointwise\(\)"):
        gru_cell_pointwise(vtl.zeros((2, 6)), vtl.zeros((2, 6)), vtl.zeros((2, 3)))
    with pytest.raises(TypeError, match="hidden_gates is required"):
        gru_cell_pointwise(vtl.zeros((2, 6)), None, vtl.zeros((2, 2)))


@pytest.mark.skipif(torch is None, reason="PyTorch not installed")
@pytest.mark.parametrize("cls", ["LSTMCell", "GRUCell", "LSTM", "GRU"])
def test_gradients_match_pytorch(cls):
    torch.manual_seed(0)
    tm = getattr(torch.nn, cls)(3, 5).double()
    vm = getattr(nn, cls)(3, 5, dtype=vtl.float64)
    vm.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    rng = np.random.default_rng(8)
    shape = (4, 2, 3) if cls in ("LSTM", "GRU") else (2, 3)
    x = rng.standard_normal(shape)
    tx = torch.tensor(x, requires_grad=True)
    vx = vtl.asarray(x, requires_grad=True)
    tout, vout = tm(tx), vm(vx)
    if cls == "LSTMCell":
        tl, vl = (tout[0] * 2 + tout[1] ** 2).sum(), vtl.sum(vout[0] * 2 + vout[1] ** 2)
    elif cls == "LSTM":
        tl = (tout[0] ** 2).sum() + tout[1][1].sum()
        vl = vtl.sum(vout[0] ** 2) + vtl.sum(vout[1][1])
    elif cls == "GRU":
        tl, vl = (tout[0] ** 2).sum(), vtl.sum(vout[0] ** 2)
    else:
        tl, vl = (tout ** 2).sum(), vtl.sum(vout ** 2)
    tl.backward()
    vl.backward()
    np.testing.assert_allclose(to_numpy(vx.grad), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    for name, p in tm.named_parameters():
        np.testing.assert_allclose(to_numpy(getattr(vm, name).grad), p.grad.numpy(),
                                   rtol=1e-10, atol=1e-12, err_msg=name)


def test_on_array_api_strict():
    xps = pytest.importorskip("array_api_strict")
    rng = np.random.default_rng(9)
    z = rng.standard_normal((2, 8)).astype(np.float32)
    c0 = rng.standard_normal((2, 2)).astype(np.float32)
    h, c = lstm_cell_pointwise(xps.asarray(z), xps.asarray(c0))
    eh, ec = _lstm_ref(z, c0)
    np.testing.assert_allclose(np.asarray(h), eh, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(c), ec, rtol=1e-5, atol=1e-6)
    x, hg = rng.standard_normal((2, 2, 6)).astype(np.float32)
    out = gru_cell_pointwise(xps.asarray(x), xps.asarray(hg), xps.asarray(c0))
    np.testing.assert_allclose(np.asarray(out), _gru_ref(x, hg, c0), rtol=1e-5, atol=1e-6)


# -- the CuPy kernel bodies, compiled for the host ------------------------------------------
def _host_source(name, spec, ctype):
    """A C++ function running an ElementwiseKernel body over ``size`` elements: raw
    parameters are pointers, elementwise inputs values, elementwise outputs references."""
    ins, outs, body = spec
    params, pre = [], []
    for p in ins + outs:
        parts = p.split()
        pname = parts[-1]
        if parts[0] == "raw":
            params.append(f"T* {pname}")
        elif parts[0] == "T":
            params.append(f"T* {pname}_p")
            ref = "const T" if p in ins else "T&"
            pre.append(f"{ref} {pname} = {pname}_p[i];")
        else:
            params.append(f"long long {pname}")
    return (f"namespace {name}_ns {{ typedef {ctype} T;\n"
            f'extern "C" void {name}({", ".join(params)}, long long size) {{\n'
            f"for (ptrdiff_t i = 0; i < size; ++i) {{\n" + "\n".join(pre) + "\n"
            + body + "}\n}\n}\n")


def _compile(tmp_path, sources):
    import ctypes
    import shutil
    import subprocess

    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    src = tmp_path / "k.cpp"
    src.write_text("#include <cmath>\n#include <cstddef>\nusing std::tanh;\n" + "".join(sources))
    lib = tmp_path / "k.so"
    subprocess.run([cxx, "-O1", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True,
                   capture_output=True)
    return ctypes.CDLL(str(lib))


def _call(fn, *args):
    import ctypes

    fn(*[a.ctypes.data_as(ctypes.c_void_p) if isinstance(a, np.ndarray) else
         ctypes.c_longlong(a) for a in args])


def test_cupy_kernel_bodies_on_the_host(tmp_path):
    from vtl.backends.cupy import rnn as ck
    from vtl.nn.functional import _rnn_fused as rf

    specs = {"lf0": ck.lstm_forward_spec(False), "lf1": ck.lstm_forward_spec(True),
             "gf": ck.gru_forward_spec(), "gb0": ck.gru_backward_spec(False),
             "gb1": ck.gru_backward_spec(True)}
    for a in (0, 1):
        for b in (0, 1):
            for d in (0, 1):
                for e in (0, a):
                    if a or b:
                        specs[f"lb{a}{b}{d}{e}"] = ck.lstm_backward_spec(bool(a), bool(b),
                                                                         bool(d), bool(e))
    dtypes = {"float": np.float32, "double": np.float64}
    so = _compile(tmp_path, [_host_source(f"{k}_{c}", s, c) for k, s in specs.items()
                             for c in dtypes])
    rng = np.random.default_rng(10)
    n, hs = 3, 5
    for ctype, dt in dtypes.items():
        tol = {"rtol": 1e-5, "atol": 1e-6} if dt == np.float32 else {"rtol": 1e-12,
                                                                       "atol": 1e-14}
        z, z2 = (rng.standard_normal((2, n, 4 * hs)) * 2).astype(dt)
        c0, dh, dc, dh2 = rng.standard_normal((4, n, hs)).astype(dt)
        for hidden in (False, True):
            h, c, tc = np.empty((3, n, hs), dt)
            act = np.empty((n, 4 * hs), dt)
            args = (z, z2) if hidden else (z,)
            _call(getattr(so, f"lf{int(hidden)}_{ctype}"), *args, c0, hs, h, c, tc, act,
                  n * hs)
            eh, ec, eact, etc = rf._lstm_forward(np, z, z2 if hidden else None, c0, hs)
            np.testing.assert_allclose(h, eh, **tol)
            np.testing.assert_allclose(c, ec, **tol)
            np.testing.assert_allclose(tc, etc, **tol)
            np.testing.assert_allclose(act, np.concatenate(eact, axis=-1), **tol)
        for key in [k for k in specs if k.startswith("lb")]:
            has_dh, has_dc, need, has_dh2 = (bool(int(ch)) for ch in key[2:])
            dz = np.empty((n, 4 * hs), dt)
            dcp = np.empty((n, hs), dt)
            grads = [g for g, use in ((dh, has_dh), (dh2, has_dh2), (dc, has_dc)) if use]
            _call(getattr(so, f"{key}_{ctype}"), act, c0, tc, *grads, hs, dz,
                  *([dcp] if need else []), n * hs)
            edh = (dh + dh2 if has_dh2 else dh) if has_dh else None
            edz, edcp = rf._lstm_backward(np, eact, c0, etc, edh, dc if has_dc else None, hs,
                                          need)
            np.testing.assert_allclose(dz, edz, **tol, err_msg=key)
            if need:
                np.testing.assert_allclose(dcp, edcp, **tol, err_msg=key)
        x, hg = (rng.standard_normal((2, n, 3 * hs)) * 2).astype(dt)
        h = np.empty((n, hs), dt)
        gact = np.empty((n, 4 * hs), dt)
        _call(getattr(so, f"gf_{ctype}"), x, hg, c0, hs, h, gact, n * hs)
        eh, egact = rf._gru_forward(np, x, hg, c0, hs)
        np.testing.assert_allclose(h, eh, **tol)
        np.testing.assert_allclose(gact, np.concatenate(egact, axis=-1), **tol)
        for need in (False, True):
            dx, dhg = np.empty((2, n, 3 * hs), dt)
            dhp = np.empty((n, hs), dt)
            _call(getattr(so, f"gb{int(need)}_{ctype}"), gact, c0, dh, hs, dx, dhg,
                  *([dhp] if need else []), n * hs)
            edx, edhg, edhp = rf._gru_backward(np, egact, c0, dh, hs, need)
            np.testing.assert_allclose(dx, edx, **tol)
            np.testing.assert_allclose(dhg, edhg, **tol)
            if need:
                np.testing.assert_allclose(dhp, edhp, **tol)
