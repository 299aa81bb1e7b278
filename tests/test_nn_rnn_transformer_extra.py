"""Packed sequences (``vtl.nn.utils.rnn``), ``LSTM(proj_size=)``, and the full
``Transformer`` with its decoder: NumPy references of PyTorch's equations, packed runs
against each sequence run on its own, float64 finite differences, errors, and PyTorch
(weights loaded by name) as an extra oracle when it is installed."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import assert_close, check_grad, check_grad_matches_numpy, to_numpy

import vtl
from vtl import nn
from vtl.nn.functional import _rnn
from vtl.nn.utils import rnn as R

try:
    import torch
except ImportError:  # pragma: no cover - torch is optional
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch not installed")
RNG = np.random.default_rng(5)
F32 = {"rtol": 1e-4, "atol": 1e-5}


def _rand(*shape, dtype="float64"):
    return RNG.standard_normal(shape).astype(dtype)


def sig(x):
    return 1 / (1 + np.exp(-x))


def _sd(m):
    return {k: to_numpy(v).astype(np.float64) for k, v in m.state_dict().items()}


# -- NumPy references -------------------------------------------------------------------------
def np_pack(x, lengths, batch_first=False):
    """PyTorch's packing of a padded (T, B, *) batch: sorted longest first (stable)."""
    if batch_first:
        x = np.swapaxes(x, 0, 1)
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    rows, sizes = [], []
    for t in range(max(lengths)):
        live = [j for j in order if lengths[j] > t]
        sizes.append(len(live))
        rows += [x[t, j] for j in live]
    return np.stack(rows), sizes, order


def np_lstm_proj(sd, x, h0, c0, layers, dirs):
    """PyTorch's LSTM with projections on (L, N, in): h_t = W_hr (o_t * tanh(c_t))."""
    length = x.shape[0]
    hn, cn = [], []
    inp = x
    for layer in range(layers):
        outs = []
        for d in range(dirs):
            sfx = f"_l{layer}" + ("_reverse" if d else "")
            wi, wh, wr = sd["weight_ih" + sfx], sd["weight_hh" + sfx], sd["weight_hr" + sfx]
            b = sd.get("bias_ih" + sfx, 0.0) + sd.get("bias_hh" + sfx, 0.0)
            hs = wr.shape[1]
            h, c = h0[layer * dirs + d], c0[layer * dirs + d]
            out = np.zeros((length, x.shape[1], wr.shape[0]))
            for t in (range(length - 1, -1, -1) if d else range(length)):
                g = inp[t] @ wi.T + h @ wh.T + b
                i, f, gg, o = (g[:, k * hs:(k + 1) * hs] for k in range(4))
                c = sig(f) * c + sig(i) * np.tanh(gg)
                h = (sig(o) * np.tanh(c)) @ wr.T
                out[t] = h
            outs.append(out)
            hn.append(h)
            cn.append(c)
        inp = np.concatenate(outs, axis=2)
    return inp, np.stack(hn), np.stack(cn)


def np_layer_norm(x, w, b, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def np_mha(sd, pre, q, k, v, heads, mask=None, kpm=None):
    """Batch-first (N, L, E) multi-head attention; masks are additive floats."""
    w, b = sd[pre + "in_proj_weight"], sd[pre + "in_proj_bias"]
    e = q.shape[-1]
    hd = e // heads
    n, lq, s_len = q.shape[0], q.shape[1], k.shape[1]

    def split(z):
        return z.reshape(n, -1, heads, hd).transpose(0, 2, 1, 3)

    qh = split(q @ w[:e].T + b[:e])
    kh = split(k @ w[e:2 * e].T + b[e:2 * e])
    vh = split(v @ w[2 * e:].T + b[2 * e:])
    sc = qh @ kh.transpose(0, 1, 3, 2) / math.sqrt(hd)
    if mask is not None:
        sc = sc + mask
    if kpm is not None:
        sc = sc + kpm[:, None, None, :]
    ex = np.exp(sc - sc.max(axis=-1, keepdims=True))
    a = ex / ex.sum(axis=-1, keepdims=True)
    out = (a @ vh).transpose(0, 2, 1, 3).reshape(n, lq, e)
    assert s_len == k.shape[1]
    return out @ sd[pre + "out_proj.weight"].T + sd[pre + "out_proj.bias"]


def _ln(sd, pre, x):
    return np_layer_norm(x, sd[pre + "weight"], sd[pre + "bias"])


def _ff(sd, pre, x):
    h = np.maximum(x @ sd[pre + "linear1.weight"].T + sd[pre + "linear1.bias"], 0)
    return h @ sd[pre + "linear2.weight"].T + sd[pre + "linear2.bias"]


def np_encoder_layer(sd, pre, x, heads, norm_first, mask=None, kpm=None):
    def sa(z):
        return np_mha(sd, pre + "self_attn.", z, z, z, heads, mask, kpm)

    if norm_first:
        x = x + sa(_ln(sd, pre + "norm1.", x))
        return x + _ff(sd, pre, _ln(sd, pre + "norm2.", x))
    x = _ln(sd, pre + "norm1.", x + sa(x))
    return _ln(sd, pre + "norm2.", x + _ff(sd, pre, x))


def np_decoder_layer(sd, pre, x, mem, heads, norm_first, tgt_mask=None, mem_mask=None,
                     tgt_kpm=None, mem_kpm=None):
    """PyTorch's TransformerDecoderLayer (relu, no dropout) on batch-first arrays."""
    def sa(z):
        return np_mha(sd, pre + "self_attn.", z, z, z, heads, tgt_mask, tgt_kpm)

    def ca(z):
        return np_mha(sd, pre + "multihead_attn.", z, mem, mem, heads, mem_mask, mem_kpm)

    if norm_first:
        x = x + sa(_ln(sd, pre + "norm1.", x))
        x = x + ca(_ln(sd, pre + "norm2.", x))
        return x + _ff(sd, pre, _ln(sd, pre + "norm3.", x))
    x = _ln(sd, pre + "norm1.", x + sa(x))
    x = _ln(sd, pre + "norm2.", x + ca(x))
    return _ln(sd, pre + "norm3.", x + _ff(sd, pre, x))


def _causal(n):
    return np.where(np.arange(n)[None, :] > np.arange(n)[:, None], -np.inf, 0.0)


def _bool_mask(mask):
    return np.where(mask, -np.inf, 0.0)


def _jitter_biases(m, scale=0.3):
    """Non-zero biases and norm shifts, so a wrong bias wiring shows."""
    with vtl.no_grad():
        for p in m.parameters():
            if p.ndim == 1:
                p[...] = p + vtl.asarray(_rand(*p.shape, dtype=np.dtype(p.dtype.name)) * scale,
                                         device=p.device)


# -- packing ----------------------------------------------------------------------------------
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_pack_pad_round_trip(backend, batch_first, enforce_sorted):
    lengths = [4, 3, 3, 1] if enforce_sorted else [2, 4, 1, 3]
    x = _rand(4, 4, 2, dtype="float32")  # (T, B, 2)
    xin = np.swapaxes(x, 0, 1).copy() if batch_first else x
    p = R.pack_padded_sequence(vtl.asarray(xin), lengths, batch_first=batch_first,
                               enforce_sorted=enforce_sorted)
    data, sizes, order = np_pack(x, lengths)
    assert isinstance(p, R.PackedSequence) and isinstance(p, tuple)
    assert_close(p.data, data)
    assert p.batch_sizes.tolist() == sizes and p.batch_sizes.dtype == vtl.int64
    assert p.batch_sizes.device == vtl.Device("numpy")
    if enforce_sorted:
        assert p.sorted_indices is None and p.unsorted_indices is None
    else:
        assert p.sorted_indices.tolist() == order
        assert p.sorted_indices.device == p.data.device
        assert [order[i] for i in p.unsorted_indices.tolist()] == list(range(4))
    padded, lens = R.pad_packed_sequence(p, batch_first=batch_first, padding_value=-2.0,
                                         total_length=5)
    ref = np.full((5, 4, 2), -2.0, np.float32)
    for j, n in enumerate(lengths):
        ref[:n, j] = x[:n, j]
    assert_close(padded, np.swapaxes(ref, 0, 1) if batch_first else ref)
    assert lens.tolist() == lengths and lens.dtype == vtl.int64
    assert lens.device == vtl.Device("numpy")
    seqs = R.unpack_sequence(p)
    assert [s.shape for s in seqs] == [(n, 2) for n in lengths]
    for j, s in enumerate(seqs):
        assert_close(s, x[:lengths[j], j])
    # lengths as a tensor; a PackedSequence rebuilt from its fields; unpad_sequence
    q = R.pack_padded_sequence(vtl.asarray(xin), vtl.asarray(lengths), batch_first=batch_first,
                               enforce_sorted=enforce_sorted)
    assert_close(q.data, data)
    rebuilt = R.PackedSequence(p.data, p.batch_sizes, p.sorted_indices)
    assert rebuilt.unsorted_indices is None if enforce_sorted else \
        rebuilt.unsorted_indices.tolist() == p.unsorted_indices.tolist()
    for j, s in enumerate(R.unpad_sequence(padded, lens, batch_first=batch_first)):
        assert_close(s, x[:lengths[j], j])


def test_pad_sequence_options(backend):
    seqs_np = [_rand(n, 2, 3, dtype="float32") for n in (2, 4, 1)]
    seqs = [vtl.asarray(s) for s in seqs_np]
    for batch_first in (False, True):
        for side in ("right", "left"):
            out = R.pad_sequence(seqs, batch_first=batch_first, padding_value=1.5,
                                 padding_side=side)
            ref = np.full((3, 4, 2, 3), 1.5, np.float32)
            for j, s in enumerate(seqs_np):
                if side == "right":
                    ref[j, :len(s)] = s
                else:
                    ref[j, 4 - len(s):] = s
            assert_close(out, ref if batch_first else np.swapaxes(ref, 0, 1))
    # integer sequences (token ids) pad with an integer value
    ids = [vtl.asarray([3, 1, 2]), vtl.asarray([5])]
    assert R.pad_sequence(ids, batch_first=True).tolist() == [[3, 1, 2], [5, 0, 0]]
    # pack_sequence / unpack_sequence
    p = R.pack_sequence(seqs, enforce_sorted=False)
    assert p.batch_sizes.tolist() == [3, 2, 1, 1]
    for s, ref in zip(R.unpack_sequence(p), seqs_np, strict=True):
        assert_close(s, ref)
    p2 = R.pack_sequence([seqs[1], seqs[0], seqs[2]])
    assert_close(p2.data, to_numpy(p.data))
    assert p2.sorted_indices is None
    # PackedSequence.to: dtype and device; the indices follow the data
    d = p.double()
    assert d.data.dtype == vtl.float64 and d.batch_sizes is p.batch_sizes
    assert d.sorted_indices.device == d.data.device
    c = p.cpu()
    assert c.data.device == vtl.Device("numpy") and c.unsorted_indices.device == c.data.device
    assert p.is_cuda == (backend == "cupy")


def test_packing_gradients_finite_differences():
    lengths = [2, 3, 1]

    def f(x):
        p = R.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        q = R.PackedSequence(vtl.sin(p.data) * 2, p.batch_sizes, p.sorted_indices)
        return R.pad_packed_sequence(q, padding_value=3.0)[0]

    check_grad(f, _rand(3, 3, 2))

    def g(a, b, c):
        return R.pad_sequence([a, b, c], padding_side="left", padding_value=-1.0) ** 2

    check_grad(g, _rand(2, 2), _rand(3, 2), _rand(1, 2))
    # the padding positions get no gradient
    x = vtl.asarray(_rand(3, 3), requires_grad=True)
    p = R.pack_padded_sequence(x, [3, 1, 2], enforce_sorted=False)
    vtl.sum(p.data).backward()
    assert to_numpy(x.grad).tolist() == [[1, 1, 1], [1, 0, 1], [1, 0, 0]]


def test_packing_gradients_match_numpy(backend):
    def f(x):
        p = R.pack_padded_sequence(x, [1, 3, 2], enforce_sorted=False)
        return R.pad_packed_sequence(R.PackedSequence(p.data * p.data, p.batch_sizes,
                                                      p.sorted_indices), batch_first=True)[0]

    check_grad_matches_numpy(f, backend, _rand(3, 3, 2))


def test_packing_errors(backend):
    x = vtl.ones((4, 3, 2))
    with pytest.raises(ValueError, match="sorted in decreasing order when enforce_sorted=True"):
        R.pack_padded_sequence(x, [2, 4, 1])
    with pytest.raises(ValueError, match=r"len\(lengths\) to be equal to batch_size, but got 2 "
                                         r"\(batch_size=3\)"):
        R.pack_padded_sequence(x, [4, 2])
    with pytest.raises(ValueError, match="every length must be > 0"):
        R.pack_padded_sequence(x, [4, 2, 0])
    with pytest.raises(ValueError, match="a length of 5 exceeds the 4 steps"):
        R.pack_padded_sequence(x, [5, 2, 1])
    with pytest.raises(TypeError, match="lengths to hold ints"):
        R.pack_padded_sequence(x, [4.0, 2, 1])
    with pytest.raises(TypeError, match="expected input to be a vtl.Tensor"):
        R.pack_padded_sequence(np.ones((4, 3, 2)), [4, 2, 1])
    p = R.pack_padded_sequence(x, [4, 2, 1])
    with pytest.raises(ValueError, match="total_length to be at least the length of the longest"):
        R.pad_packed_sequence(p, total_length=3)
    with pytest.raises(ValueError, match="empty list of sequences"):
        R.pad_sequence([])
    with pytest.raises(ValueError, match="trailing shape, dtype and device"):
        R.pad_sequence([vtl.ones((2, 3)), vtl.ones((2, 4))])
    with pytest.raises(ValueError, match="padding_side to be one of left or right"):
        R.pad_sequence([vtl.ones((2, 3))], padding_side="middle")
    with pytest.raises(ValueError, match="sum\\(batch_sizes\\) = 7 rows"):
        R.pad_packed_sequence(R.PackedSequence(vtl.ones((6, 2)), [3, 2, 1, 1]))
    with pytest.raises(ValueError, match="non-increasing"):
        R.pad_packed_sequence(R.PackedSequence(vtl.ones((5, 2)), [2, 3]))
    if backend != "numpy":
        with pytest.raises(ValueError, match="batch_sizes must be on the CPU"):
            R.PackedSequence(vtl.ones((3, 2)), vtl.asarray([2, 1]))
    with pytest.raises(TypeError, match="expected a PackedSequence"):
        R.pad_packed_sequence((vtl.ones((3, 2)), [2, 1]))
    with pytest.raises(ValueError, match=r"LSTM\(3, 4\): expected packed data of shape"):
        nn.LSTM(3, 4)(p)
    with pytest.raises(ValueError, match=r"LSTM\(2, 4\): expected hidden state h_0 of shape "
                                         r"\(1, 3, 4\), got \(1, 2, 4\)"):
        nn.LSTM(2, 4)(p, (vtl.zeros((1, 2, 4)), vtl.zeros((1, 2, 4))))


# -- recurrent layers on packed sequences -----------------------------------------------------
@pytest.mark.parametrize("cls,kw", [("LSTM", {}), ("GRU", {}), ("RNN", {}),
                                    ("LSTM", {"proj_size": 2})])
def test_packed_matches_separate_runs(backend, cls, kw):
    vtl.random.manual_seed(3)
    m = getattr(nn, cls)(3, 4, num_layers=2, bidirectional=True, batch_first=True, **kw)
    lengths = [2, 4, 1]
    x = _rand(3, 4, 3, dtype="float32")  # batch-first padded
    hw = kw.get("proj_size", 4)
    h0 = _rand(4, 3, hw, dtype="float32")
    c0 = _rand(4, 3, 4, dtype="float32")
    lstm = cls == "LSTM"

    def hx(cols):
        h = vtl.asarray(h0[:, cols])
        return (h, vtl.asarray(c0[:, cols])) if lstm else h

    p = R.pack_padded_sequence(vtl.asarray(x), lengths, batch_first=True,
                               enforce_sorted=False)
    out, state = m(p, hx(slice(None)))
    assert isinstance(out, R.PackedSequence) and out.batch_sizes is p.batch_sizes
    assert out.sorted_indices is p.sorted_indices
    padded, lens = R.pad_packed_sequence(out, batch_first=True)
    assert tuple(padded.shape) == (3, 4, 2 * hw) and lens.tolist() == lengths
    for j, n in enumerate(lengths):  # each sequence alone, unbatched and unpadded
        oj, sj = m(vtl.asarray(x[j, :n]), hx(j))
        assert_close(padded[j, :n], to_numpy(oj), **F32)
        assert np.all(to_numpy(padded[j, n:]) == 0)
        if lstm:
            assert_close(state[0][:, j], to_numpy(sj[0]), **F32)
            assert_close(state[1][:, j], to_numpy(sj[1]), **F32)
        else:
            assert_close(state[:, j], to_numpy(sj), **F32)
    # no initial state: zeros
    out0, _ = m(p)
    ref, _ = m(vtl.asarray(x[1, :4]))
    assert_close(R.pad_packed_sequence(out0, batch_first=True)[0][1], to_numpy(ref), **F32)


@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN_TANH"])
def test_packed_layer_gradients_finite_differences(mode):
    sizes = [3, 2, 1]  # lengths 3, 2, 1
    g = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1}[mode]
    hs, ps = 3, 2
    proj = mode == "LSTM"
    hw = ps if proj else hs
    data, h0, c0 = _rand(6, 2), _rand(3, hw), _rand(3, hs)
    wi, wh, bi, bh, wr = _rand(g * hs, 2), _rand(g * hs, hw), _rand(g * hs), _rand(g * hs), \
        _rand(ps, hs)
    for reverse in (False, True):
        def f(data, h0, c0, wi, wh, bi, bh, wr, reverse=reverse):
            out, h, c = _rnn.run_packed_layer(mode, data, sizes, h0, c0 if mode == "LSTM"
                                              else None, wi, wh, bi, bh, reverse,
                                              wr if proj else None)
            parts = [vtl.reshape(out, (-1,)), vtl.reshape(h, (-1,))]
            if c is not None:
                parts.append(vtl.reshape(c, (-1,)))
            return vtl.concat(parts, axis=0)

        check_grad(f, data, h0, c0, wi, wh, bi, bh, wr)


def test_packed_module_gradients_match_numpy(backend):
    def f(x, h0):
        vtl.random.manual_seed(9)
        m = nn.GRU(2, 3, bidirectional=True).to(x.device).to(x.dtype)
        p = R.pack_padded_sequence(x, [2, 3], enforce_sorted=False)
        out, h = m(p, h0)
        return vtl.concat([vtl.reshape(out.data, (-1,)), vtl.reshape(h, (-1,))], axis=0)

    check_grad_matches_numpy(f, backend, _rand(3, 2, 2), _rand(2, 2, 3))


# -- LSTM with projections --------------------------------------------------------------------
@pytest.mark.parametrize("bidir,batch_first,bias", [(False, False, True), (True, True, True),
                                                    (True, False, False)])
def test_lstm_proj_matches_numpy(backend, bidir, batch_first, bias):
    vtl.random.manual_seed(6)
    m = nn.LSTM(3, 5, num_layers=2, bias=bias, batch_first=batch_first, bidirectional=bidir,
                proj_size=2)
    dirs = 2 if bidir else 1
    x = _rand(4, 2, 3, dtype="float32")
    h0, c0 = _rand(2 * dirs, 2, 2), _rand(2 * dirs, 2, 5)
    ref, hn, cn = np_lstm_proj(_sd(m), x.astype(np.float64), h0, c0, 2, dirs)
    xin = np.swapaxes(x, 0, 1).copy() if batch_first else x
    out, (h, c) = m(vtl.asarray(xin), (vtl.asarray(h0.astype("float32")),
                                       vtl.asarray(c0.astype("float32"))))
    assert tuple(out.shape) == xin.shape[:2] + (2 * dirs,)
    assert_close(out, (np.swapaxes(ref, 0, 1) if batch_first else ref).astype("float32"), **F32)
    assert_close(h, hn.astype("float32"), **F32)
    assert_close(c, cn.astype("float32"), **F32)
    # zero initial state, unbatched input
    ref, hn, cn = np_lstm_proj(_sd(m), x[:, :1].astype(np.float64), np.zeros((2 * dirs, 1, 2)),
                               np.zeros((2 * dirs, 1, 5)), 2, dirs)
    out, (h, c) = m(vtl.asarray(x[:, 0]))
    assert_close(out, ref[:, 0].astype("float32"), **F32)
    assert tuple(h.shape) == (2 * dirs, 2) and tuple(c.shape) == (2 * dirs, 5)
    assert_close(c, cn[:, 0].astype("float32"), **F32)


def test_lstm_proj_parameters_and_errors(backend):
    m = nn.LSTM(3, 5, num_layers=2, bidirectional=True, proj_size=2)
    names = []
    for layer in range(2):
        for sfx in ("", "_reverse"):
            names += [f"{p}_l{layer}{sfx}" for p in ("weight_ih", "weight_hh", "bias_ih",
                                                      "bias_hh", "weight_hr")]
    assert list(m.state_dict()) == names
    assert m.weight_ih_l0.shape == (20, 3) and m.weight_hh_l0.shape == (20, 2)
    assert m.weight_ih_l1.shape == (20, 4) and m.weight_hr_l1_reverse.shape == (2, 5)
    bound = 1 / math.sqrt(5)
    assert all(np.all(np.abs(to_numpy(p)) <= bound) for p in m.parameters())
    assert repr(m) == "LSTM(3, 5, num_layers=2, bidirectional=True, proj_size=2)"
    assert list(nn.LSTM(3, 5, bias=False, proj_size=2).state_dict()) == \
        ["weight_ih_l0", "weight_hh_l0", "weight_hr_l0"]
    with pytest.raises(ValueError, match="proj_size has to be smaller than hidden_size"):
        nn.LSTM(3, 5, proj_size=5)
    with pytest.raises(ValueError, match="proj_size should be a positive integer or zero"):
        nn.LSTM(3, 5, proj_size=-1)
    with pytest.raises(ValueError, match="only supported for LSTM"):
        nn.RNNBase("GRU", 3, 5, proj_size=2)
    with pytest.raises(TypeError):
        nn.GRU(3, 5, proj_size=2)
    with pytest.raises(TypeError, match="hidden_size should be of type int, got float"):
        nn.LSTM(3, 5.0)
    x = vtl.ones((4, 2, 3))
    with pytest.raises(ValueError, match=r"expected hidden state h_0 of shape \(4, 2, 2\), got "
                                         r"\(4, 2, 5\)"):
        m(x, (vtl.zeros((4, 2, 5)), vtl.zeros((4, 2, 5))))
    with pytest.raises(ValueError, match=r"expected cell state c_0 of shape \(4, 2, 5\), got "
                                         r"\(4, 2, 2\)"):
        m(x, (vtl.zeros((4, 2, 2)), vtl.zeros((4, 2, 2))))


def test_lstm_proj_gradients():
    x, h0, c0 = _rand(3, 2, 2), _rand(2, 2), _rand(2, 3)
    wi, wh, b, wr = _rand(12, 2), _rand(12, 2), _rand(12), _rand(2, 3)
    for reverse in (False, True):
        def f(x, h0, c0, wi, wh, b, wr, reverse=reverse):
            out, h, c = _rnn.run_layer("LSTM", x, h0, c0, wi, wh, b, b * 0.5, reverse, wr)
            return vtl.concat([vtl.reshape(out, (-1,)), vtl.reshape(c, (-1,))], axis=0)

        check_grad(f, x, h0, c0, wi, wh, b, wr)


def test_lstm_proj_gradients_match_numpy(backend):
    def f(x):
        vtl.random.manual_seed(4)
        m = nn.LSTM(2, 3, bidirectional=True, proj_size=2).to(x.device).to(x.dtype)
        out, (h, c) = m(x)
        return vtl.concat([vtl.reshape(out, (-1,)), vtl.reshape(c, (-1,))], axis=0)

    check_grad_matches_numpy(f, backend, _rand(3, 2, 2))


# -- Transformer ------------------------------------------------------------------------------
def _names_encoder(pre):
    return [pre + n for n in (
        "self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
        "self_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight",
        "linear2.bias", "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias")]


def _names_decoder(pre):
    attn = ["in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]
    return ([pre + "self_attn." + n for n in attn] + [pre + "multihead_attn." + n for n in attn]
            + [pre + n for n in ("linear1.weight", "linear1.bias", "linear2.weight",
                                 "linear2.bias", "norm1.weight", "norm1.bias", "norm2.weight",
                                 "norm2.bias", "norm3.weight", "norm3.bias")])


def test_transformer_structure_and_init(backend):
    vtl.random.manual_seed(0)
    m = nn.Transformer(8, 2, 2, 1, 16)
    names = (_names_encoder("encoder.layers.0.") + _names_encoder("encoder.layers.1.")
             + ["encoder.norm.weight", "encoder.norm.bias"] + _names_decoder("decoder.layers.0.")
             + ["decoder.norm.weight", "decoder.norm.bias"])
    assert list(m.state_dict()) == names
    assert [n for n, _ in m.decoder.layers[0].named_children()] == [
        "self_attn", "multihead_attn", "linear1", "dropout", "linear2", "norm1", "norm2",
        "norm3", "dropout1", "dropout2", "dropout3"]
    for name, p in m.named_parameters():
        if p.ndim > 1:  # xavier-uniform
            bound = math.sqrt(6 / (p.shape[0] + p.shape[1]))
            assert np.all(np.abs(to_numpy(p)) <= bound), name
    assert m.d_model == 8 and m.nhead == 2 and not m.batch_first
    mask = nn.Transformer.generate_square_subsequent_mask(4)
    assert mask.dtype == vtl.float32 and tuple(mask.shape) == (4, 4)
    np.testing.assert_array_equal(to_numpy(mask), _causal(4).astype(np.float32))
    assert nn.Transformer.generate_square_subsequent_mask(3, dtype=vtl.float64).dtype == \
        vtl.float64
    assert list(nn.TransformerDecoderLayer(4, 2, 6, bias=False).state_dict()) == [
        "self_attn.in_proj_weight", "self_attn.out_proj.weight",
        "multihead_attn.in_proj_weight", "multihead_attn.out_proj.weight", "linear1.weight",
        "linear2.weight", "norm1.weight", "norm2.weight", "norm3.weight"]
    custom = nn.Transformer(4, 2, custom_encoder=nn.Identity(),
                            custom_decoder=nn.TransformerDecoder(
                                nn.TransformerDecoderLayer(4, 2, 6), 1))
    assert list(custom.state_dict())[0] == "decoder.layers.0.self_attn.in_proj_weight"


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_matches_numpy(backend, norm_first):
    vtl.random.manual_seed(1)
    m = nn.TransformerDecoderLayer(8, 2, 12, dropout=0.0, batch_first=True,
                                   norm_first=norm_first)
    _jitter_biases(m)
    sd = _sd(m)
    x, mem = _rand(2, 3, 8, dtype="float32"), _rand(2, 4, 8, dtype="float32")
    tkpm = np.array([[0.0, 0.0, -np.inf], [0.0, 0.0, 0.0]], np.float32)
    mkpm = np.array([[False, False, False, True], [False, True, False, False]])
    mmask = np.zeros((3, 4), bool)
    mmask[0, 2] = True
    ref = np_decoder_layer(sd, "", x.astype(np.float64), mem.astype(np.float64), 2, norm_first,
                           _causal(3), _bool_mask(mmask), tkpm.astype(np.float64),
                           _bool_mask(mkpm))
    out = m(vtl.asarray(x), vtl.asarray(mem), tgt_mask=nn.Transformer.
            generate_square_subsequent_mask(3), memory_mask=vtl.asarray(mmask),
            tgt_key_padding_mask=vtl.asarray(tkpm), memory_key_padding_mask=vtl.asarray(mkpm))
    assert_close(out, ref.astype(np.float32), **F32)
    # the causal flag alone masks the later targets
    out2 = m(vtl.asarray(x), vtl.asarray(mem), memory_mask=vtl.asarray(mmask),
             tgt_key_padding_mask=vtl.asarray(tkpm), memory_key_padding_mask=vtl.asarray(mkpm),
             tgt_is_causal=True)
    assert_close(out2, ref.astype(np.float32), **F32)


def test_transformer_matches_numpy(backend):
    vtl.random.manual_seed(2)
    m = nn.Transformer(8, 2, 2, 2, 12, dropout=0.1).eval()
    _jitter_biases(m)
    sd = _sd(m)
    src, tgt = _rand(5, 2, 8, dtype="float32"), _rand(3, 2, 8, dtype="float32")
    skpm = np.array([[False] * 5, [False, False, False, True, True]])
    mem = np.swapaxes(src, 0, 1).astype(np.float64)
    for i in range(2):
        mem = np_encoder_layer(sd, f"encoder.layers.{i}.", mem, 2, False, kpm=_bool_mask(skpm))
    mem = _ln(sd, "encoder.norm.", mem)
    y = np.swapaxes(tgt, 0, 1).astype(np.float64)
    for i in range(2):
        y = np_decoder_layer(sd, f"decoder.layers.{i}.", y, mem, 2, False, _causal(3),
                             mem_kpm=_bool_mask(skpm))
    ref = np.swapaxes(_ln(sd, "decoder.norm.", y), 0, 1).astype(np.float32)
    kw = {"src_key_padding_mask": vtl.asarray(skpm), "memory_key_padding_mask":
          vtl.asarray(skpm)}
    out = m(vtl.asarray(src), vtl.asarray(tgt),
            tgt_mask=nn.Transformer.generate_square_subsequent_mask(3), **kw)
    assert_close(out, ref, **F32)
    assert_close(m(vtl.asarray(src), vtl.asarray(tgt), tgt_is_causal=True, **kw), ref, **F32)
    # unbatched src/tgt
    out1 = m(vtl.asarray(src[:, 0]), vtl.asarray(tgt[:, 0]), tgt_is_causal=True)
    assert_close(out1, ref[:, 0], **F32)
    m.train()  # dropout on
    assert not np.allclose(to_numpy(m(vtl.asarray(src), vtl.asarray(tgt), **kw)), ref,
                           atol=1e-3)


def test_transformer_errors(backend):
    m = nn.Transformer(8, 2, 1, 1, 12)
    with pytest.raises(ValueError, match="the batch number of src and tgt must be equal"):
        m(vtl.ones((5, 2, 8)), vtl.ones((3, 3, 8)))
    with pytest.raises(ValueError, match="feature number of src and tgt must be equal to "
                                         "d_model=8"):
        m(vtl.ones((5, 2, 8)), vtl.ones((3, 2, 6)))
    with pytest.raises(ValueError, match="both 3-D"):
        m(vtl.ones((5, 2, 8)), vtl.ones((3, 8)))
    with pytest.raises(ValueError, match="activation should be relu/gelu, not tanh"):
        nn.TransformerDecoderLayer(8, 2, activation="tanh")
    with pytest.raises(TypeError, match="activation should be 'relu', 'gelu' or a callable"):
        nn.TransformerEncoderLayer(8, 2, activation=3)
    with pytest.raises(TypeError, match="expected a floating-point memory"):
        nn.TransformerDecoderLayer(8, 2, 12)(vtl.ones((3, 2, 8)), vtl.ones((3, 2, 8),
                                                                          dtype=vtl.int32))
    with pytest.raises(ValueError, match="expected a size >= 0"):
        nn.Transformer.generate_square_subsequent_mask(-1)
    # a callable activation (a module or a function) is used as given
    layer = nn.TransformerDecoderLayer(4, 2, 6, dropout=0.0, activation=nn.Tanh())
    assert layer(vtl.ones((2, 1, 4)), vtl.ones((3, 1, 4))).shape == (2, 1, 4)


def test_decoder_layer_gradients():
    vtl.random.manual_seed(3)
    m = nn.TransformerDecoderLayer(4, 2, 6, dropout=0.0, norm_first=True).double()
    mmask = np.array([[False, True, False], [False, False, True]])
    check_grad(lambda x, mem: m(x, mem, tgt_is_causal=True, memory_mask=vtl.asarray(mmask)),
               _rand(2, 1, 4), _rand(3, 1, 4))


def test_transformer_gradients_match_numpy(backend):
    def f(src, tgt):
        vtl.random.manual_seed(5)
        m = nn.Transformer(4, 2, 1, 1, 6, dropout=0.0).to(src.device).to(src.dtype)
        return m(src, tgt, tgt_is_causal=True)

    check_grad_matches_numpy(f, backend, _rand(3, 1, 4), _rand(2, 1, 4))


# -- PyTorch as an oracle ---------------------------------------------------------------------
def _load(vm, tm):
    sd = {k: v.detach().numpy() for k, v in tm.state_dict().items()}
    assert list(sd) == list(vm.state_dict())
    vm.load_state_dict(sd)


def _grads_equal(vm, tm, rtol=1e-9, atol=1e-10):
    tp = dict(tm.named_parameters())
    for name, p in vm.named_parameters():
        assert_close(p.grad, tp[name].grad.numpy(), rtol=rtol, atol=atol)


@needs_torch
@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")
@pytest.mark.parametrize("batch_first,norm_first,activation", [(False, False, "relu"),
                                                               (True, True, "gelu")])
def test_transformer_against_pytorch(batch_first, norm_first, activation):
    torch.manual_seed(0)
    kw = {"dropout": 0.0, "activation": activation, "batch_first": batch_first,
          "norm_first": norm_first}
    tm = torch.nn.Transformer(8, 2, 2, 2, 12, **kw).double()
    vm = nn.Transformer(8, 2, 2, 2, 12, **kw).double()
    _load(vm, tm)
    n, s_len, t_len = 2, 5, 3
    src = _rand(*((n, s_len, 8) if batch_first else (s_len, n, 8)))
    tgt = _rand(*((n, t_len, 8) if batch_first else (t_len, n, 8)))
    skpm = np.zeros((n, s_len), bool)
    skpm[1, -2:] = True
    tkpm = np.zeros((n, t_len))
    tkpm[0, -1] = -np.inf
    mmask = np.zeros((t_len, s_len), bool)
    mmask[0, 1] = True
    ts, tt = torch.tensor(src, requires_grad=True), torch.tensor(tgt, requires_grad=True)
    vs, vt = vtl.asarray(src, requires_grad=True), vtl.asarray(tgt, requires_grad=True)
    to = tm(ts, tt, tgt_mask=torch.nn.Transformer.generate_square_subsequent_mask(
                t_len, dtype=torch.float64), memory_mask=torch.tensor(mmask),
            src_key_padding_mask=torch.tensor(skpm), tgt_key_padding_mask=torch.tensor(tkpm),
            memory_key_padding_mask=torch.tensor(skpm), tgt_is_causal=True)
    vo = vm(vs, vt, tgt_mask=nn.Transformer.generate_square_subsequent_mask(
                t_len, dtype=vtl.float64), memory_mask=vtl.asarray(mmask),
            src_key_padding_mask=vtl.asarray(skpm), tgt_key_padding_mask=vtl.asarray(tkpm),
            memory_key_padding_mask=vtl.asarray(skpm), tgt_is_causal=True)
    assert_close(vo, to.detach().numpy(), rtol=1e-9, atol=1e-10)
    w = _rand(*to.shape)
    (to * torch.tensor(w)).sum().backward()
    vtl.sum(vo * vtl.asarray(w)).backward()
    assert_close(vs.grad, ts.grad.numpy(), rtol=1e-9, atol=1e-10)
    assert_close(vt.grad, tt.grad.numpy(), rtol=1e-9, atol=1e-10)
    _grads_equal(vm, tm)


@needs_torch
def test_decoder_against_pytorch():
    torch.manual_seed(1)
    tl = torch.nn.TransformerDecoderLayer(6, 3, 10, dropout=0.0, norm_first=True)
    vl = nn.TransformerDecoderLayer(6, 3, 10, dropout=0.0, norm_first=True)
    tm = torch.nn.TransformerDecoder(tl, 2, norm=torch.nn.LayerNorm(6)).double()
    vm = nn.TransformerDecoder(vl, 2, norm=nn.LayerNorm(6)).double()
    _load(vm, tm)
    tgt, mem = _rand(4, 2, 6), _rand(3, 2, 6)
    mmask = _rand(4, 3)  # float memory mask
    tt, tmem = torch.tensor(tgt, requires_grad=True), torch.tensor(mem, requires_grad=True)
    vt, vmem = vtl.asarray(tgt, requires_grad=True), vtl.asarray(mem, requires_grad=True)
    to = tm(tt, tmem, tgt_mask=torch.nn.Transformer.generate_square_subsequent_mask(
        4, dtype=torch.float64), memory_mask=torch.tensor(mmask))
    vo = vm(vt, vmem, tgt_is_causal=True, memory_mask=vtl.asarray(mmask))
    assert_close(vo, to.detach().numpy(), rtol=1e-9, atol=1e-10)
    to.pow(2).sum().backward()
    vtl.sum(vo ** 2).backward()
    assert_close(vmem.grad, tmem.grad.numpy(), rtol=1e-9, atol=1e-10)
    assert_close(vt.grad, tt.grad.numpy(), rtol=1e-9, atol=1e-10)
    _grads_equal(vm, tm)


@needs_torch
@pytest.mark.parametrize("kw", [{"kdim": 3, "vdim": 5, "add_bias_kv": True},
                                {"add_zero_attn": True, "batch_first": True},
                                {"bias": False, "add_bias_kv": True, "add_zero_attn": True}])
def test_multihead_attention_options_against_pytorch(kw):
    torch.manual_seed(2)
    tm = torch.nn.MultiheadAttention(6, 2, **kw).double()
    vm = nn.MultiheadAttention(6, 2, **kw).double()
    _load(vm, tm)
    bf = kw.get("batch_first", False)
    n, lq, s_len = 2, 3, 4

    def shape(length, e):
        return (n, length, e) if bf else (length, n, e)

    q = _rand(*shape(lq, 6))
    k, v = _rand(*shape(s_len, kw.get("kdim", 6))), _rand(*shape(s_len, kw.get("vdim", 6)))
    kpm = np.zeros((n, s_len), bool)
    kpm[1, 0] = True
    for mask in (_rand(n * 2, lq, s_len), RNG.random((lq, s_len)) < 0.3):
        if mask.dtype == bool:
            mask[:, -1] = False
        for avg in (True, False):
            tq = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
            vq = [vtl.asarray(a, requires_grad=True) for a in (q, k, v)]
            tm.zero_grad()
            vm.zero_grad()
            to, tw = tm(*tq, key_padding_mask=torch.tensor(kpm if mask.dtype == bool
                                                             else _bool_mask(kpm)),
                        attn_mask=torch.tensor(mask), average_attn_weights=avg)
            vo, vw = vm(*vq, key_padding_mask=vtl.asarray(kpm if mask.dtype == bool
                                                           else _bool_mask(kpm)),
                        attn_mask=vtl.asarray(mask), average_attn_weights=avg)
            assert_close(vo, to.detach().numpy(), rtol=1e-9, atol=1e-10)
            assert_close(vw, tw.detach().numpy(), rtol=1e-9, atol=1e-10)
            (to.sum() + tw.pow(2).sum()).backward()
            (vtl.sum(vo) + vtl.sum(vw ** 2)).backward()
            for a, b in zip(vq, tq, strict=True):
                assert_close(a.grad, b.grad.numpy(), rtol=1e-9, atol=1e-10)
            _grads_equal(vm, tm)
    assert vm(*[vtl.asarray(a) for a in (q, k, v)], need_weights=False)[1] is None


@needs_torch
def test_lstm_proj_against_pytorch():
    torch.manual_seed(3)
    tm = torch.nn.LSTM(3, 5, 2, batch_first=True, bidirectional=True, proj_size=2).double()
    vm = nn.LSTM(3, 5, 2, batch_first=True, bidirectional=True, proj_size=2).double()
    _load(vm, tm)
    x, h0, c0 = _rand(2, 4, 3), _rand(4, 2, 2), _rand(4, 2, 5)
    tx = torch.tensor(x, requires_grad=True)
    vx = vtl.asarray(x, requires_grad=True)
    to, (th, tc) = tm(tx, (torch.tensor(h0), torch.tensor(c0)))
    vo, (vh, vc) = vm(vx, (vtl.asarray(h0), vtl.asarray(c0)))
    for a, b in ((vo, to), (vh, th), (vc, tc)):
        assert_close(a, b.detach().numpy(), rtol=1e-9, atol=1e-10)
    (to.sum() + th.pow(2).sum() + tc.sum()).backward()
    (vtl.sum(vo) + vtl.sum(vh ** 2) + vtl.sum(vc)).backward()
    assert_close(vx.grad, tx.grad.numpy(), rtol=1e-9, atol=1e-10)
    _grads_equal(vm, tm)


@needs_torch
@pytest.mark.parametrize("cls,kw", [("LSTM", {"proj_size": 2}), ("GRU", {}), ("RNN", {})])
def test_packed_against_pytorch(cls, kw):
    torch.manual_seed(4)
    tm = getattr(torch.nn, cls)(3, 4, 2, bidirectional=True, **kw).double()
    vm = getattr(nn, cls)(3, 4, 2, bidirectional=True, **kw).double()
    _load(vm, tm)
    lengths = [3, 5, 1, 4]
    x = _rand(5, 4, 3)
    tx = torch.tensor(x, requires_grad=True)
    vx = vtl.asarray(x, requires_grad=True)
    tp = torch.nn.utils.rnn.pack_padded_sequence(tx, lengths, enforce_sorted=False)
    vp = R.pack_padded_sequence(vx, lengths, enforce_sorted=False)
    assert_close(vp.data, tp.data.detach().numpy())
    assert vp.batch_sizes.tolist() == tp.batch_sizes.tolist()
    assert vp.sorted_indices.tolist() == tp.sorted_indices.tolist()
    assert vp.unsorted_indices.tolist() == tp.unsorted_indices.tolist()
    h0 = _rand(4, 4, kw.get("proj_size", 4))
    c0 = _rand(4, 4, 4)
    lstm = cls == "LSTM"
    to, ts = tm(tp, (torch.tensor(h0), torch.tensor(c0)) if lstm else torch.tensor(h0))
    vo, vs = vm(vp, (vtl.asarray(h0), vtl.asarray(c0)) if lstm else vtl.asarray(h0))
    tpad, tlen = torch.nn.utils.rnn.pad_packed_sequence(to, batch_first=True,
                                                        padding_value=0.5, total_length=6)
    vpad, vlen = R.pad_packed_sequence(vo, batch_first=True, padding_value=0.5, total_length=6)
    assert_close(vpad, tpad.detach().numpy(), rtol=1e-9, atol=1e-10)
    assert vlen.tolist() == tlen.tolist()
    th, vh = (ts[0], vs[0]) if lstm else (ts, vs)
    assert_close(vh, th.detach().numpy(), rtol=1e-9, atol=1e-10)
    loss_t = tpad.pow(2).sum() + th.sum() + (ts[1].sum() if lstm else 0)
    loss_v = vtl.sum(vpad ** 2) + vtl.sum(vh) + (vtl.sum(vs[1]) if lstm else 0)
    loss_t.backward()
    loss_v.backward()
    assert_close(vx.grad, tx.grad.numpy(), rtol=1e-9, atol=1e-10)
    _grads_equal(vm, tm)
    # the utilities on their own
    seqs = [_rand(n, 2) for n in (2, 4, 1)]
    for bf in (False, True):
        for side in ("left", "right"):
            assert_close(R.pad_sequence([vtl.asarray(s) for s in seqs], bf, -1.0, side),
                         torch.nn.utils.rnn.pad_sequence([torch.tensor(s) for s in seqs], bf,
                                                         -1.0, side).numpy())
    tps = torch.nn.utils.rnn.pack_sequence([torch.tensor(s) for s in seqs],
                                           enforce_sorted=False)
    vps = R.pack_sequence([vtl.asarray(s) for s in seqs], enforce_sorted=False)
    assert_close(vps.data, tps.data.numpy())
