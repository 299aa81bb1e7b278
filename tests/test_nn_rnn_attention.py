"""Recurrent layers, attention, the transformer encoder layer and the positional
encoding: NumPy loop references written here, float64 finite differences for
the functions and layers, train/eval behaviour, PyTorch state-dict names and
default inits, masks, errors naming the layer and shapes, and PyTorch as an
extra oracle when it is installed."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from helpers import assert_close, check_grad, check_grad_matches_numpy, to_numpy

import vtl
import vtl.nn.functional as F
from vtl import nn
from vtl.nn.functional import _rnn

try:
    import torch
except ImportError:  # pragma: no cover - torch is optional
    torch = None

RNG = np.random.default_rng(11)


def _rand(*shape, dtype="float64"):
    return RNG.standard_normal(shape).astype(dtype)


def sig(x):
    return 1 / (1 + np.exp(-x))


# -- NumPy references -----------------------------------------------------------------------
def np_cell(mode, x, h, c, wi, wh, bi, bh):
    gi, gh = x @ wi.T + bi, h @ wh.T + bh
    hs = h.shape[-1]
    if mode == "LSTM":
        g = gi + gh
        i, f, gg, o = (g[:, k * hs:(k + 1) * hs] for k in range(4))
        c = sig(f) * c + sig(i) * np.tanh(gg)
        return sig(o) * np.tanh(c), c
    if mode == "GRU":
        r = sig(gi[:, :hs] + gh[:, :hs])
        z = sig(gi[:, hs:2 * hs] + gh[:, hs:2 * hs])
        n = np.tanh(gi[:, 2 * hs:] + r * gh[:, 2 * hs:])
        return (1 - z) * n + z * h, None
    pre = gi + gh
    return (np.tanh(pre) if mode == "RNN_TANH" else np.maximum(pre, 0)), None


def np_recurrent(m, x, h0=None, c0=None):
    """Sequence-first (L, N, in) reference for an RNN/LSTM/GRU module's weights."""
    sd = {k: to_numpy(v) for k, v in m.state_dict().items()}
    dirs = 2 if m.bidirectional else 1
    length, n = x.shape[:2]
    hs = m.hidden_size
    if h0 is None:
        h0 = np.zeros((m.num_layers * dirs, n, hs))
        c0 = np.zeros_like(h0)
    hn, cn = [], []
    layer_in = x
    for layer in range(m.num_layers):
        outs = []
        for d in range(dirs):
            sfx = f"_l{layer}" + ("_reverse" if d else "")
            wi, wh = sd["weight_ih" + sfx], sd["weight_hh" + sfx]
            bi = sd.get("bias_ih" + sfx, np.zeros(wi.shape[0]))
            bh = sd.get("bias_hh" + sfx, np.zeros(wi.shape[0]))
            h, c = h0[layer * dirs + d], c0[layer * dirs + d] if c0 is not None else None
            out = np.zeros((length, n, hs))
            for t in (range(length - 1, -1, -1) if d else range(length)):
                h, c = np_cell(m.mode, layer_in[t], h, c, wi, wh, bi, bh)
                out[t] = h
            outs.append(out)
            hn.append(h)
            cn.append(c)
        layer_in = np.concatenate(outs, axis=2)
    return layer_in, np.stack(hn), (np.stack(cn) if m.mode == "LSTM" else None)


def np_sdpa(q, k, v, mask=None, scale=None):
    """Loops over query rows; ``mask`` is an additive float mask (-inf = masked)."""
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    out = np.zeros(q.shape[:-1] + (v.shape[-1],))
    for idx in np.ndindex(*q.shape[:-2]):
        for i in range(q.shape[-2]):
            s = np.array([q[idx][i] @ k[idx][j] * scale for j in range(k.shape[-2])])
            if mask is not None:
                s = s + np.broadcast_to(mask, q.shape[:-2] + (q.shape[-2], k.shape[-2]))[idx][i]
            if np.all(s == -np.inf):
                continue  # safe softmax: a fully masked row gives zeros
            e = np.exp(s - s.max())
            out[idx][i] = (e / e.sum()) @ v[idx]
    return out


def np_mha(m, q, k, v, attn_mask=None, kpm=None):
    """Batch-first reference of MultiheadAttention (float additive masks)."""
    sd = {key: to_numpy(val) for key, val in m.state_dict().items()}
    e, h = m.embed_dim, m.num_heads
    w, b = sd["in_proj_weight"], sd["in_proj_bias"]
    qp, kp, vp = q @ w[:e].T + b[:e], k @ w[e:2 * e].T + b[e:2 * e], v @ w[2 * e:].T + b[2 * e:]
    n, lq, s_len = q.shape[0], q.shape[1], k.shape[1]
    hd = e // h
    out = np.zeros((n, lq, e))
    weights = np.zeros((n, h, lq, s_len))
    for bi in range(n):
        for hi in range(h):
            sl = slice(hi * hd, (hi + 1) * hd)
            sc = qp[bi, :, sl] @ kp[bi, :, sl].T / math.sqrt(hd)
            if attn_mask is not None:
                sc = sc + attn_mask
            if kpm is not None:
                sc = sc + kpm[bi][None, :]
            ex = np.exp(sc - sc.max(axis=1, keepdims=True))
            a = ex / ex.sum(axis=1, keepdims=True)
            weights[bi, hi] = a
            out[bi, :, sl] = a @ vp[bi, :, sl]
    return out @ sd["out_proj.weight"].T + sd["out_proj.bias"], weights


def np_layer_norm(x, w, b, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def _bool_to_float(mask, masked_when_true):
    bad = mask if masked_when_true else ~mask
    return np.where(bad, -np.inf, 0.0)


# -- recurrent layers -------------------------------------------------------------------------
@pytest.mark.parametrize("cls", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("layers,bidir,batch_first,bias", [(1, False, False, True),
                                                           (2, True, True, True),
                                                           (2, False, False, False)])
def test_recurrent_matches_loops(backend, cls, layers, bidir, batch_first, bias):
    vtl.random.manual_seed(1)
    kw = {"nonlinearity": "relu"} if cls == "RNN" and bias else {}
    m = getattr(nn, cls)(3, 4, layers, bias=bias, batch_first=batch_first,
                         bidirectional=bidir, **kw).double()
    x = _rand(5, 2, 3)
    ref, hn, cn = np_recurrent(m, x)
    xin = np.transpose(x, (1, 0, 2)) if batch_first else x
    out, state = m(vtl.asarray(xin))
    assert_close(out, np.transpose(ref, (1, 0, 2)) if batch_first else ref)
    if cls == "LSTM":
        assert_close(state[0], hn)
        assert_close(state[1], cn)
    else:
        assert_close(state, hn)
    # initial state given, unbatched input
    dirs = 2 if bidir else 1
    h0 = _rand(layers * dirs, 1, 4)
    c0 = _rand(layers * dirs, 1, 4)
    ref, hn, cn = np_recurrent(m, x[:, :1], h0, c0 if cls == "LSTM" else None)
    hx = (vtl.asarray(h0[:, 0]), vtl.asarray(c0[:, 0])) if cls == "LSTM" \
        else vtl.asarray(h0[:, 0])
    out, state = m(vtl.asarray(x[:, 0]), hx)
    assert_close(out, ref[:, 0])
    assert_close(state[0] if cls == "LSTM" else state, hn[:, 0])


def test_recurrent_state_dict_names_and_init(backend):
    m = nn.LSTM(3, 5, num_layers=2, bidirectional=True)
    names = []
    for layer in range(2):
        for sfx in ("", "_reverse"):
            names += [f"{p}_l{layer}{sfx}" for p in ("weight_ih", "weight_hh", "bias_ih",
                                                      "bias_hh")]
    assert list(m.state_dict()) == names
    assert m.weight_ih_l0.shape == (20, 3) and m.weight_ih_l1.shape == (20, 10)
    assert m.weight_hh_l1_reverse.shape == (20, 5) and m.bias_hh_l0.shape == (20,)
    bound = 1 / math.sqrt(5)
    allw = np.concatenate([to_numpy(p).reshape(-1) for p in m.parameters()])
    assert np.all(np.abs(allw) <= bound) and allw.std() > bound / 3
    assert nn.GRU(2, 3).weight_hh_l0.shape == (9, 3)
    assert list(nn.RNN(2, 3, bias=False).state_dict()) == ["weight_ih_l0", "weight_hh_l0"]
    m2 = nn.LSTM(3, 5, num_layers=2, bidirectional=True)
    m2.load_state_dict(m.state_dict())
    x = vtl.asarray(_rand(4, 2, 3, dtype="float32"))
    assert_close(m2(x)[0], to_numpy(m(x)[0]))
    assert repr(m) == "LSTM(3, 5, num_layers=2, bidirectional=True)"


def test_recurrent_dropout_train_eval(backend):
    vtl.random.manual_seed(2)
    m = nn.GRU(3, 8, num_layers=2, dropout=0.5).double()
    x = vtl.asarray(_rand(4, 2, 3))
    a, b = m(x)[0], m(x)[0]
    assert not np.allclose(to_numpy(a), to_numpy(b))  # dropout between layers in training
    m.eval()
    ref, _, _ = np_recurrent(m, to_numpy(x))
    assert_close(m(x)[0], ref)
    assert_close(m(x)[0], ref)


def test_cells_match_loops(backend):
    x, h, c = _rand(3, 4), _rand(3, 5), _rand(3, 5)
    for cls, mode, gates in ((nn.LSTMCell, "LSTM", 4), (nn.GRUCell, "GRU", 3),
                             (nn.RNNCell, "RNN_TANH", 1)):
        m = cls(4, 5).double()
        assert m.weight_ih.shape == (gates * 5, 4)
        args = [to_numpy(p) for p in (m.weight_ih, m.weight_hh, m.bias_ih, m.bias_hh)]
        rh, rc = np_cell(mode, x, h, c, *args)
        if mode == "LSTM":
            oh, oc = m(vtl.asarray(x), (vtl.asarray(h), vtl.asarray(c)))
            assert_close(oc, rc)
        else:
            oh = m(vtl.asarray(x), vtl.asarray(h))
        assert_close(oh, rh)
        zero = m(vtl.asarray(x[0]))  # unbatched, zero state
        assert (zero[0] if mode == "LSTM" else zero).shape == (5,)
    m = nn.RNNCell(4, 5, nonlinearity="relu").double()
    args = [to_numpy(p) for p in (m.weight_ih, m.weight_hh, m.bias_ih, m.bias_hh)]
    assert_close(m(vtl.asarray(x), vtl.asarray(h)), np_cell("RNN_RELU", x, h, None, *args)[0])


def test_cell_gradients_finite_differences():
    x, h, c = _rand(2, 3), _rand(2, 4), _rand(2, 4)
    wi4, wh4, b4 = _rand(16, 3), _rand(16, 4), _rand(16)
    check_grad(lambda x, h, c, wi, wh, b: vtl.concat(
        _rnn.lstm_cell(x, (h, c), wi, wh, b, b * 0.5), axis=1), x, h, c, wi4, wh4, b4)
    check_grad(lambda x, h, wi, wh, b: _rnn.gru_cell(x, h, wi, wh, b, b[::-1]), x, h,
               wi4[:12], wh4[:12], b4[:12])
    check_grad(lambda x, h, wi, wh: _rnn.rnn_tanh_cell(x, h, wi, wh), x, h, wi4[:4], wh4[:4])
    check_grad(lambda x, h, wi, wh: _rnn.rnn_relu_cell(x, h, wi, wh), x, h, wi4[:4] + 3.0,
               wh4[:4])


def _module_grad(m, inputs, fn=None, eps=1e-6):
    """Finite differences of ``sum(fn(m, *inputs) * v)`` for float inputs and every
    parameter of ``m`` (float64)."""
    fn = fn or (lambda mod, *ts: mod(*ts))
    params = list(m.parameters())
    xts = [vtl.asarray(x.copy(), requires_grad=True) for x in inputs]
    out = fn(m, *xts)
    v = np.random.default_rng(0).standard_normal(out.shape)
    grads = vtl.autograd.grad(vtl.sum(out * vtl.asarray(v)), [*xts, *params], allow_unused=True)
    targets = [("x", x) for x in inputs] + [("p", p) for p in params]

    def value():
        with vtl.no_grad():
            return float(vtl.sum(fn(m, *[vtl.asarray(x.copy()) for x in inputs])
                                 * vtl.asarray(v)))

    for (kind, t), g in zip(targets, grads, strict=True):
        host = t if kind == "x" else t.numpy().copy()
        flat = host.reshape(-1)
        num = np.zeros(flat.size)
        for j in range(flat.size):
            vals = []
            orig = flat[j]
            for sgn in (1, -1):
                flat[j] = orig + sgn * eps
                if kind == "p":
                    with vtl.no_grad():
                        t[...] = vtl.asarray(host)
                vals.append(value())
            flat[j] = orig
            if kind == "p":
                with vtl.no_grad():
                    t[...] = vtl.asarray(host)
            num[j] = (vals[0] - vals[1]) / (2 * eps)
        a = np.zeros(flat.size) if g is None else to_numpy(g).reshape(-1)
        np.testing.assert_allclose(a, num, rtol=1e-5, atol=1e-6)


def test_recurrent_module_gradients():
    vtl.random.manual_seed(4)
    _module_grad(nn.LSTM(2, 2, bidirectional=True).double(), [_rand(3, 1, 2)],
                 fn=lambda m, x: m(x)[0])
    _module_grad(nn.GRU(2, 2, num_layers=2, batch_first=True).double(), [_rand(1, 3, 2)],
                 fn=lambda m, x: m(x)[1])
    _module_grad(nn.RNN(2, 3).double(), [_rand(3, 2), _rand(1, 3)],
                 fn=lambda m, x, h: m(x, h)[0])


def test_recurrent_errors_name_the_layer(backend):
    m = nn.LSTM(3, 4)
    with pytest.raises(ValueError, match=r"LSTM\(3, 4\): expected input with last dimension "
                                         r"3, got input of shape \(5, 2, 2\)"):
        m(vtl.ones((5, 2, 2)))
    with pytest.raises(ValueError, match=r"LSTM\(3, 4\): expected a 2-D \(unbatched\) or 3-D"):
        m(vtl.ones((3,)))
    with pytest.raises(ValueError, match=r"LSTM\(3, 4\): expected hidden state h_0 of shape "
                                         r"\(1, 2, 4\), got \(1, 3, 4\)"):
        m(vtl.ones((5, 2, 3)), (vtl.ones((1, 3, 4)), vtl.ones((1, 3, 4))))
    with pytest.raises(ValueError, match="cell state c_0"):
        m(vtl.ones((5, 2, 3)), (vtl.ones((1, 2, 4)), vtl.ones((1, 2, 5))))
    with pytest.raises(ValueError, match=r"GRU\(3, 4\): expected hidden state of shape"):
        nn.GRU(3, 4)(vtl.ones((5, 2, 3)), vtl.ones((2, 2, 4)))
    with pytest.raises(ValueError, match="nonlinearity"):
        nn.RNN(3, 4, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match="dropout"):
        nn.LSTM(3, 4, dropout=1.5)
    with pytest.raises(ValueError, match="proj_size has to be smaller than hidden_size"):
        nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(ValueError, match=r"LSTMCell\(3, 4\): expected a 1-D or 2-D input"):
        nn.LSTMCell(3, 4)(vtl.ones((2, 5)))


# -- attention --------------------------------------------------------------------------------
def test_sdpa_matches_loops(backend):
    q, k, v = _rand(2, 3, 4, 5), _rand(2, 3, 6, 5), _rand(2, 3, 6, 2)
    T = vtl.asarray
    assert_close(F.scaled_dot_product_attention(T(q), T(k), T(v)), np_sdpa(q, k, v))
    assert_close(F.scaled_dot_product_attention(T(q), T(k), T(v), scale=0.2),
                 np_sdpa(q, k, v, scale=0.2))
    causal = np.where(np.arange(6)[None, :] <= np.arange(4)[:, None], 0.0, -np.inf)
    assert_close(F.scaled_dot_product_attention(T(q), T(k), T(v), is_causal=True),
                 np_sdpa(q, k, v, causal))
    bmask = RNG.random((3, 4, 6)) > 0.4
    bmask[1, 2] = False  # a fully masked row gives zeros
    out = F.scaled_dot_product_attention(T(q), T(k), T(v), attn_mask=T(bmask))
    assert_close(out, np_sdpa(q, k, v, _bool_to_float(bmask, False)))
    assert np.all(to_numpy(out)[:, 1, 2] == 0)
    fmask = _rand(4, 6)
    assert_close(F.scaled_dot_product_attention(T(q), T(k), T(v), attn_mask=T(fmask)),
                 np_sdpa(q, k, v, fmask))
    kv1 = _rand(2, 1, 6, 5)  # grouped-query attention: one key/value head for 3 query heads
    assert_close(F.scaled_dot_product_attention(T(q), T(kv1), T(kv1), enable_gqa=True),
                 np_sdpa(q, np.repeat(kv1, 3, axis=1), np.repeat(kv1, 3, axis=1)))


@pytest.mark.parametrize("kind", ["none", "causal", "bool", "float"])
def test_sdpa_without_keys_gives_zeros(backend, kind):
    """As PyTorch: zero keys (S = 0) give zeros of shape (..., L, Ev), masked or not, and
    a zero gradient for the queries."""
    q = vtl.asarray(_rand(2, 3, 4, 5), requires_grad=True)
    k, v = vtl.asarray(_rand(2, 3, 0, 5)), vtl.asarray(_rand(2, 3, 0, 2))
    kw = {"none": {}, "causal": {"is_causal": True},
          "bool": {"attn_mask": vtl.asarray(np.ones((4, 0), bool))},
          "float": {"attn_mask": vtl.asarray(_rand(4, 0))}}[kind]
    out = F.scaled_dot_product_attention(q, k, v, **kw)
    assert_close(out, np.zeros((2, 3, 4, 2)))
    vtl.sum(out).backward()
    assert_close(q.grad, np.zeros((2, 3, 4, 5)))


def test_sdpa_gradients():
    q, k, v = _rand(2, 3, 4), _rand(2, 5, 4), _rand(2, 5, 3)
    mask = RNG.random((3, 5)) > 0.3
    mask[0] = False
    check_grad(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), q, k, v)
    check_grad(lambda q, k, v: F.scaled_dot_product_attention(
        q, k, v, attn_mask=vtl.asarray(mask)), q, k, v)  # no nan from the dead row
    check_grad(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m), q, k,
               v, _rand(3, 5))
    check_grad(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), q, k, v)


def test_sdpa_dropout_and_errors(backend):
    q = vtl.asarray(_rand(1, 4, 3))
    a = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5, generator=vtl.random.Generator(1))
    b = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5, generator=vtl.random.Generator(1))
    assert_close(a, to_numpy(b))
    assert not np.allclose(to_numpy(a), to_numpy(F.scaled_dot_product_attention(q, q, q)))
    with pytest.raises(ValueError, match="either attn_mask or is_causal"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=vtl.ones((4, 4)), is_causal=True)
    with pytest.raises(ValueError, match="same embedding size"):
        F.scaled_dot_product_attention(q, vtl.ones((1, 4, 2)), q)
    with pytest.raises(TypeError, match="bool or floating"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=vtl.ones((4, 4), dtype=vtl.int32))


def test_multihead_attention_matches_loops(backend):
    vtl.random.manual_seed(5)
    m = nn.MultiheadAttention(6, 2, batch_first=True).double()
    with vtl.no_grad():
        m.in_proj_bias[...] = vtl.asarray(_rand(18))
        m.out_proj.bias[...] = vtl.asarray(_rand(6))
    q, k, v = _rand(2, 3, 6), _rand(2, 4, 6), _rand(2, 4, 6)
    am = RNG.random((3, 4)) > 0.7
    am[:, 0] = False  # every query keeps key 0 (fully masked rows are tested separately)
    kpm = np.array([[False, False, True, False], [False, True, False, False]])
    ref, w = np_mha(m, q, k, v, _bool_to_float(am, True), _bool_to_float(kpm, True))
    out, weights = m(vtl.asarray(q), vtl.asarray(k), vtl.asarray(v), attn_mask=vtl.asarray(am),
                     key_padding_mask=vtl.asarray(kpm))
    assert_close(out, ref)
    assert_close(weights, w.mean(axis=1))
    out, weights = m(vtl.asarray(q), vtl.asarray(k), vtl.asarray(v), average_attn_weights=False)
    ref, w = np_mha(m, q, k, v)
    assert_close(out, ref)
    assert_close(weights, w)
    assert m(vtl.asarray(q), vtl.asarray(k), vtl.asarray(v), need_weights=False)[1] is None
    # float masks, a 3-D (N * heads, L, S) mask, sequence-first and unbatched inputs
    fm = _rand(4, 3, 4)
    m.batch_first = False
    out, _ = m(vtl.asarray(q.transpose(1, 0, 2)), vtl.asarray(k.transpose(1, 0, 2)),
               vtl.asarray(v.transpose(1, 0, 2)), attn_mask=vtl.asarray(fm))
    ref = np.stack([_mha_3d(m, q[i], k[i], v[i], fm[2 * i:2 * i + 2]) for i in range(2)],
                   axis=1)
    assert_close(out, ref)
    out, w = m(vtl.asarray(q[0]), vtl.asarray(k[0]), vtl.asarray(v[0]))
    ref, wr = np_mha(m, q[:1], k[:1], v[:1])
    assert_close(out, ref[0])
    assert_close(w, wr[0].mean(axis=0))


def _mha_3d(m, q, k, v, masks):
    """One sample with a different additive mask per head."""
    outs = []
    sd = {key: to_numpy(val) for key, val in m.state_dict().items()}
    e, h = m.embed_dim, m.num_heads
    w, b = sd["in_proj_weight"], sd["in_proj_bias"]
    qp, kp, vp = q @ w[:e].T + b[:e], k @ w[e:2 * e].T + b[e:2 * e], v @ w[2 * e:].T + b[2 * e:]
    hd = e // h
    for hi in range(h):
        sl = slice(hi * hd, (hi + 1) * hd)
        sc = qp[:, sl] @ kp[:, sl].T / math.sqrt(hd) + masks[hi]
        ex = np.exp(sc - sc.max(axis=1, keepdims=True))
        outs.append((ex / ex.sum(axis=1, keepdims=True)) @ vp[:, sl])
    return np.concatenate(outs, axis=1) @ sd["out_proj.weight"].T + sd["out_proj.bias"]


def test_multihead_attention_init_state_dict_and_options(backend):
    m = nn.MultiheadAttention(8, 2)
    assert list(m.state_dict()) == ["in_proj_weight", "in_proj_bias", "out_proj.weight",
                                    "out_proj.bias"]
    bound = math.sqrt(6 / (8 + 24))  # xavier_uniform on (3E, E)
    assert np.all(np.abs(to_numpy(m.in_proj_weight)) <= bound)
    assert np.all(to_numpy(m.in_proj_bias) == 0) and np.all(to_numpy(m.out_proj.bias) == 0)
    assert np.all(np.abs(to_numpy(m.out_proj.weight)) <= 1 / math.sqrt(8))
    m2 = nn.MultiheadAttention(8, 2, kdim=3, vdim=5, add_bias_kv=True, bias=False)
    assert list(m2.state_dict()) == ["q_proj_weight", "k_proj_weight", "v_proj_weight",
                                     "bias_k", "bias_v", "out_proj.weight"]
    q, k, v = vtl.ones((4, 2, 8)), vtl.ones((6, 2, 3)), vtl.ones((6, 2, 5))
    out, w = m2(q, k, v, key_padding_mask=vtl.zeros((2, 6), dtype=vtl.bool))
    assert out.shape == (4, 2, 8) and w.shape == (2, 4, 7)  # one extra key from bias_k
    m3 = nn.MultiheadAttention(8, 2, add_zero_attn=True)
    assert m3(q, q, q, attn_mask=vtl.zeros((4, 4)))[1].shape == (2, 4, 5)
    causal = m(q, q, q, is_causal=True)[1]
    assert np.all(np.triu(to_numpy(causal)[0], 1) == 0)


def test_multihead_attention_masked_row_is_nan_and_dropout(backend):
    m = nn.MultiheadAttention(4, 1, dropout=0.5)
    q = vtl.asarray(_rand(3, 1, 4, dtype="float32"))
    mask = np.zeros((3, 3), bool)
    mask[1] = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        m.eval()
        out, _ = m(q, q, q, attn_mask=vtl.asarray(mask))
    assert np.all(np.isnan(to_numpy(out)[1])) and not np.any(np.isnan(to_numpy(out)[0]))
    a = to_numpy(m(q, q, q)[0])
    assert_close(m(q, q, q)[0], a)  # eval: deterministic
    m.train()
    assert not np.allclose(to_numpy(m(q, q, q)[1]), to_numpy(m(q, q, q)[1]))


def test_attention_module_gradients():
    vtl.random.manual_seed(6)
    m = nn.MultiheadAttention(4, 2, batch_first=True).double()
    q, k = _rand(1, 3, 4), _rand(1, 2, 4)
    mask = vtl.asarray(np.array([[False, True], [False, False], [True, False]]))
    _module_grad(m, [q, k], fn=lambda mod, q, k: mod(q, k, k, attn_mask=mask)[0])
    _module_grad(m, [q], fn=lambda mod, q: mod(q, q, q, need_weights=True)[1])


def test_attention_errors_name_the_layer(backend):
    m = nn.MultiheadAttention(8, 2)
    with pytest.raises(ValueError, match="divisible by num_heads"):
        nn.MultiheadAttention(6, 4)
    with pytest.raises(ValueError, match=r"MultiheadAttention\(embed_dim=8, num_heads=2\): "
                                         r"expected query of shape \(L, N, 8\)"):
        m(vtl.ones((3, 2, 6)), vtl.ones((3, 2, 6)), vtl.ones((3, 2, 6)))
    with pytest.raises(ValueError, match=r"MultiheadAttention.*key of rank 3 with last "
                                         r"dimension 8, got \(3, 2, 5\)"):
        m(vtl.ones((3, 2, 8)), vtl.ones((3, 2, 5)), vtl.ones((3, 2, 8)))
    x = vtl.ones((3, 2, 8))
    with pytest.raises(ValueError, match=r"2-D attn_mask must have shape \(3, 3\)"):
        m(x, x, x, attn_mask=vtl.zeros((3, 4)))
    with pytest.raises(ValueError, match=r"3-D attn_mask must have shape \(4, 3, 3\)"):
        m(x, x, x, attn_mask=vtl.zeros((2, 3, 3)))
    with pytest.raises(ValueError, match=r"key_padding_mask must have shape \(2, 3\)"):
        m(x, x, x, key_padding_mask=vtl.zeros((3, 2), dtype=vtl.bool))


# -- transformer encoder layer and positional encoding ------------------------------------
def np_encoder_layer(m, x, mask=None, activation="relu"):
    sd = {k: to_numpy(v) for k, v in m.state_dict().items()}
    act = (lambda z: np.maximum(z, 0)) if activation == "relu" else \
        (lambda z: 0.5 * z * (1 + np.vectorize(math.erf)(z / math.sqrt(2))))

    def sa(z):
        return np_mha(m.self_attn, z, z, z, mask)[0]

    def ff(z):
        return act(z @ sd["linear1.weight"].T + sd["linear1.bias"]) @ sd["linear2.weight"].T \
            + sd["linear2.bias"]

    def n1(z):
        return np_layer_norm(z, sd["norm1.weight"], sd["norm1.bias"])

    def n2(z):
        return np_layer_norm(z, sd["norm2.weight"], sd["norm2.bias"])

    if m.norm_first:
        x = x + sa(n1(x))
        return x + ff(n2(x))
    x = n1(x + sa(x))
    return n2(x + ff(x))


@pytest.mark.parametrize("norm_first,activation", [(False, "relu"), (True, "gelu")])
def test_transformer_encoder_layer_matches_loops(backend, norm_first, activation):
    vtl.random.manual_seed(7)
    m = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.2, activation=activation,
                                   batch_first=True, norm_first=norm_first).double()
    assert [n for n, _ in m.named_children()] == ["self_attn", "linear1", "dropout", "linear2",
                                                  "norm1", "norm2", "dropout1", "dropout2"]
    with vtl.no_grad():
        for p in m.parameters():
            if p.ndim == 1:
                p[...] = vtl.asarray(_rand(*p.shape) * 0.3) + p
    x = _rand(2, 5, 8)
    causal = np.where(np.arange(5)[None, :] <= np.arange(5)[:, None], 0.0, -np.inf)
    m.eval()
    ref = np_encoder_layer(m, x, causal, activation)
    assert_close(m(vtl.asarray(x), src_mask=vtl.asarray(causal)), ref, rtol=1e-9, atol=1e-10)
    assert_close(m(vtl.asarray(x), is_causal=True), ref, rtol=1e-9, atol=1e-10)
    m.train()
    assert not np.allclose(to_numpy(m(vtl.asarray(x))), np_encoder_layer(m, x, None, activation))
    enc = nn.TransformerEncoder(m, 2, norm=nn.LayerNorm(8).double()).eval()
    assert len(enc.layers) == 2 and enc.layers[0] is not m
    assert enc.layers[1].linear1.weight is not m.linear1.weight
    assert "layers.1.self_attn.in_proj_weight" in enc.state_dict()
    assert enc(vtl.asarray(x)).shape == (2, 5, 8)


def test_transformer_encoder_layer_gradients():
    vtl.random.manual_seed(8)
    m = nn.TransformerEncoderLayer(4, 2, 6, dropout=0.0).double()
    _module_grad(m, [_rand(3, 1, 4)], fn=lambda mod, x: mod(x, is_causal=True))


def test_transformer_encoder_layer_errors(backend):
    with pytest.raises(ValueError, match="activation should be relu/gelu"):
        nn.TransformerEncoderLayer(8, 2, activation="tanh")
    m = nn.TransformerEncoderLayer(8, 2, 16)
    with pytest.raises(ValueError, match=r"MultiheadAttention\(embed_dim=8"):
        m(vtl.ones((3, 2, 6)))


def test_positional_encoding(backend):
    pe = nn.PositionalEncoding(6, dropout=0.0, max_len=10)
    assert pe.pe.shape == (10, 1, 6) and list(pe.state_dict()) == ["pe"]
    ref = np.zeros((10, 6))
    for pos in range(10):
        for i in range(0, 6, 2):
            ref[pos, i] = math.sin(pos / 10000 ** (i / 6))
            ref[pos, i + 1] = math.cos(pos / 10000 ** (i / 6))
    x = _rand(4, 3, 6, dtype="float32")
    assert_close(pe(vtl.asarray(x)), (x + ref[:4, None, :]).astype(np.float32), rtol=1e-5,
                 atol=1e-5)
    peb = nn.PositionalEncoding(6, dropout=0.0, max_len=10, batch_first=True)
    assert_close(peb(vtl.asarray(x)), (x + ref[None, :3, :]).astype(np.float32), rtol=1e-5,
                 atol=1e-5)
    odd = nn.PositionalEncoding(5, max_len=4)  # an odd d_model keeps the last sine column
    assert odd.pe.shape == (4, 1, 5)
    assert abs(float(odd.pe[3, 0, 4]) - math.sin(3 / 10000 ** (4 / 5))) < 1e-6
    drop = nn.PositionalEncoding(6, dropout=0.5, max_len=10)
    y = to_numpy(drop(vtl.asarray(np.ones((4, 3, 6), np.float32))))
    assert np.any(y == 0)
    drop.eval()
    assert not np.any(to_numpy(drop(vtl.asarray(np.ones((4, 3, 6), np.float32)))) == 0)
    with pytest.raises(ValueError, match=r"PositionalEncoding\(d_model=6\): sequence length 11 "
                                         r"exceeds max_len=10"):
        pe(vtl.ones((11, 1, 6)))
    with pytest.raises(ValueError, match=r"PositionalEncoding\(d_model=6\): expected a 3-D"):
        pe(vtl.ones((3, 5)))
    g = vtl.asarray(x.astype(np.float64), requires_grad=True)
    vtl.sum(pe.double()(g)).backward()
    assert_close(g.grad, np.ones_like(x, dtype=np.float64))


def test_gradients_match_numpy_backend(backend):
    q, k, v = _rand(2, 3, 4), _rand(2, 5, 4), _rand(2, 5, 3)
    check_grad_matches_numpy(lambda q, k, v: F.scaled_dot_product_attention(q, k, v,
                                                                            is_causal=True),
                             backend, q, k, v)
    wi, wh = _rand(16, 3), _rand(16, 4)
    check_grad_matches_numpy(lambda x, h, wi, wh: _rnn.lstm_cell(x, (h, h), wi, wh)[1],
                             backend, _rand(2, 3), _rand(2, 4), wi, wh)


# -- PyTorch --------------------------------------------------------------------------------------
def _load_from_torch(vm, tm):
    sd = {k: v.detach().numpy() for k, v in tm.state_dict().items()}
    assert list(sd) == list(vm.state_dict())
    vm.load_state_dict(sd)


@pytest.mark.skipif(torch is None, reason="PyTorch not installed")
def test_against_pytorch():
    torch.manual_seed(0)
    x = _rand(2, 5, 3)
    for cls in ("RNN", "LSTM", "GRU"):
        tm = getattr(torch.nn, cls)(3, 4, 2, batch_first=True, bidirectional=True).double()
        vm = getattr(nn, cls)(3, 4, 2, batch_first=True, bidirectional=True).double()
        _load_from_torch(vm, tm)
        to, th = tm(torch.tensor(x))
        vo, vh = vm(vtl.asarray(x))
        assert_close(vo, to.detach().numpy())
        assert_close(vh[0] if cls == "LSTM" else vh,
                     (th[0] if cls == "LSTM" else th).detach().numpy())
    tm = torch.nn.MultiheadAttention(6, 3, batch_first=True, kdim=4, vdim=5).double()
    vm = nn.MultiheadAttention(6, 3, batch_first=True, kdim=4, vdim=5).double()
    _load_from_torch(vm, tm)
    q, k, v = _rand(2, 3, 6), _rand(2, 4, 4), _rand(2, 4, 5)
    kpm = np.array([[False, True, False, False], [False, False, False, True]])
    to, tw = tm(torch.tensor(q), torch.tensor(k), torch.tensor(v),
                key_padding_mask=torch.tensor(kpm))
    vo, vw = vm(vtl.asarray(q), vtl.asarray(k), vtl.asarray(v),
                key_padding_mask=vtl.asarray(kpm))
    assert_close(vo, to.detach().numpy())
    assert_close(vw, tw.detach().numpy())
    tm = torch.nn.TransformerEncoderLayer(6, 2, 10, batch_first=True, norm_first=True).double()
    vm = nn.TransformerEncoderLayer(6, 2, 10, batch_first=True, norm_first=True).double()
    _load_from_torch(vm, tm)
    tm.eval()
    vm.eval()
    xe = _rand(2, 4, 6)
    assert_close(vm(vtl.asarray(xe), is_causal=True),
                 tm(torch.tensor(xe), src_mask=torch.nn.Transformer.generate_square_subsequent_mask(
                     4, dtype=torch.float64), is_causal=True).detach().numpy(),
                 rtol=1e-9, atol=1e-10)


# -- plain array-API arrays (no autograd) ---------------------------------------------------------
def _strict_cases(xp, dev):
    r = np.random.default_rng(0)

    def a(*shape):
        return xp.asarray(r.standard_normal(shape).astype(np.float32), device=dev)

    q, w, wo = a(2, 3, 4), a(12, 4), a(4, 4)
    mask = xp.asarray(np.array([[False, True], [False, False]]), device=dev)
    kpm = xp.asarray(np.zeros((3, 2), bool), device=dev)
    tril = xp.asarray(np.tril(np.ones((3, 3), bool)), device=dev)
    h, wi, wh = xp.zeros((3, 5), dtype=q.dtype, device=dev), a(20, 4), a(20, 5)
    return {
        "sdpa_causal": lambda: F.scaled_dot_product_attention(q, q, q, is_causal=True),
        "sdpa_bool": lambda: F.scaled_dot_product_attention(q, q, q, attn_mask=tril),
        "mha": lambda: F.multi_head_attention_forward(
            q, q, q, 4, 2, w, None, None, None, False, 0.0, wo, None, key_padding_mask=kpm,
            attn_mask=mask)[0],
        "lstm_cell": lambda: _rnn.lstm_cell(q[0, ...], (h, h), wi, wh)[1],
        "gru_cell": lambda: _rnn.gru_cell(q[0, ...], h, wi[:15, ...], wh[:15, ...]),
        "lstm_layer": lambda: _rnn.run_layer("LSTM", q, h, h, wi, wh, None, None, True)[0],
    }


@pytest.mark.parametrize("name", ["gru_cell", "lstm_cell", "lstm_layer", "mha", "sdpa_bool",
                                  "sdpa_causal"])
def test_attention_and_cells_on_array_api_strict(name):
    xs = pytest.importorskip("array_api_strict")
    dev = xs.Device("no_x64")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = _strict_cases(xs, dev)[name]()
    assert out.device == dev
    host = np.asarray(out.to_device(xs.Device("CPU_DEVICE")))
    with vtl.use_backend("numpy"):
        expect = to_numpy(_strict_cases(vtl, None)[name]())
    np.testing.assert_allclose(host, expect, rtol=1e-5, atol=1e-5)
