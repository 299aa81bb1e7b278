"""What layers accept, and the errors for what they do not, with PyTorch as the reference.

Modules take vtl tensors (``vtl.nn.functional`` also takes raw arrays); layers with
floating-point parameters refuse integer and bool inputs; recurrent states have
PyTorch's structure; empty sequences and empty spatial axes are refused while an
empty batch is fine. Where CPU PyTorch is installed, the same modules (built by the
same factory from ``torch.nn``) are checked to accept and refuse the same inputs.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from helpers import assert_close, skip_unless_dtype, to_numpy

import vtl
import vtl.nn.functional as F
from vtl import nn

RNG = np.random.default_rng(0)


def _torch():
    return pytest.importorskip("torch")


def _maybe_torch():
    """CPU PyTorch for an extra comparison at the end of a vtl test, or ``None``."""
    try:
        import torch
    except ModuleNotFoundError:
        return None
    return torch


def _rand(shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


# name -> (factory taking the nn namespace (vtl.nn or torch.nn), argument names and shapes)
LAYERS = {
    "Linear": (lambda m: m.Linear(3, 2), [("input", (4, 3))]),
    "Bilinear": (lambda m: m.Bilinear(3, 2, 4), [("input1", (4, 3)), ("input2", (4, 2))]),
    "Conv1d": (lambda m: m.Conv1d(2, 3, 3), [("input", (1, 2, 5))]),
    "Conv2d": (lambda m: m.Conv2d(2, 3, 3, padding=1), [("input", (1, 2, 4, 4))]),
    "ConvTranspose1d": (lambda m: m.ConvTranspose1d(2, 3, 3), [("input", (1, 2, 4))]),
    "ConvTranspose2d": (lambda m: m.ConvTranspose2d(2, 3, 2), [("input", (1, 2, 3, 3))]),
    "RNN": (lambda m: m.RNN(3, 4), [("input", (5, 2, 3))]),
    "LSTM": (lambda m: m.LSTM(3, 4, batch_first=True), [("input", (2, 5, 3))]),
    "GRU": (lambda m: m.GRU(3, 4, num_layers=2), [("input", (5, 3))]),
    "RNNCell": (lambda m: m.RNNCell(3, 4), [("input", (2, 3))]),
    "LSTMCell": (lambda m: m.LSTMCell(3, 4), [("input", (2, 3))]),
    "GRUCell": (lambda m: m.GRUCell(3, 4), [("input", (3,))]),
    "MultiheadAttention": (lambda m: m.MultiheadAttention(4, 2),
                           [("query", (3, 2, 4)), ("key", (5, 2, 4)), ("value", (5, 2, 4))]),
    "BatchNorm1d": (lambda m: m.BatchNorm1d(3), [("input", (4, 3))]),
    "BatchNorm2d": (lambda m: m.BatchNorm2d(3), [("input", (2, 3, 2, 2))]),
    "LayerNorm": (lambda m: m.LayerNorm(3), [("input", (2, 3))]),
    "GroupNorm": (lambda m: m.GroupNorm(2, 4), [("input", (2, 4, 3))]),
    "PReLU": (lambda m: m.PReLU(3), [("input", (2, 3))]),
    "TransformerEncoderLayer": (lambda m: m.TransformerEncoderLayer(4, 2, 8, dropout=0.0),
                                [("src", (3, 2, 4))]),
}
# layers without parameters of their own (and losses): tensors only, any dtype they support
STATELESS = {
    "ReLU": (lambda m: m.ReLU(), [("input", (2, 3))]),
    "Softmax": (lambda m: m.Softmax(dim=1), [("input", (2, 3))]),
    "MaxPool2d": (lambda m: m.MaxPool2d(2), [("input", (1, 1, 4, 4))]),
    "AvgPool1d": (lambda m: m.AvgPool1d(2), [("input", (1, 2, 4))]),
    "AdaptiveAvgPool2d": (lambda m: m.AdaptiveAvgPool2d(2), [("input", (1, 1, 4, 4))]),
    "Dropout": (lambda m: m.Dropout(0.5), [("input", (2, 3))]),
    "Flatten": (lambda m: m.Flatten(), [("input", (2, 3, 2))]),
    "MSELoss": (lambda m: m.MSELoss(), [("input", (3,)), ("target", (3,))]),
    "BCELoss": (lambda m: m.BCELoss(), [("input", (3,)), ("target", (3,))]),
}
ALL = {**LAYERS, **STATELESS}


def _vtl_args(spec, dtype=np.float32):
    args = [_rand(shape) for _, shape in spec]
    if dtype == np.bool_:
        return [vtl.asarray(a > 0) for a in args]
    return [vtl.asarray(np.abs(a).clip(0, 1) if dtype == np.float32 else a.astype(dtype))
            for a in args]


@pytest.mark.parametrize("name", sorted(ALL))
def test_modules_take_vtl_tensors_only(backend, name):
    factory, spec = ALL[name]
    m = factory(nn)
    args = _vtl_args(spec)
    m(*args)  # tensors are fine
    for i, (arg, _) in enumerate(spec):
        host = args[i].numpy()
        for raw, given in ((host, "numpy.ndarray"), (host.tolist(), "list")):
            bad = args[:i] + [raw] + args[i + 1:]
            msg = (rf"expected {arg} to be a vtl\.Tensor, got {re.escape(given)}; "
                   r"convert it with vtl\.asarray")
            with pytest.raises(TypeError, match=msg):
                m(*bad)


@pytest.mark.parametrize("name", sorted(ALL))
def test_torch_modules_refuse_raw_arrays_too(name):
    torch = _torch()
    factory, spec = ALL[name]
    m = factory(torch.nn)
    m(*[torch.tensor(a.numpy()) for a in _vtl_args(spec)])
    with pytest.raises((TypeError, AttributeError)):
        m(*[a.numpy() for a in _vtl_args(spec)])


def test_the_message_names_the_layer(backend):
    with pytest.raises(TypeError, match=re.escape("Linear(in_features=3, out_features=2): "
                                                  "expected input to be a vtl.Tensor")):
        nn.Linear(3, 2)(np.ones((1, 3), np.float32))
    with pytest.raises(TypeError, match=re.escape("LSTM(3, 4): expected a floating-point "
                                                  "input, got int64")):
        nn.LSTM(3, 4)(vtl.ones((2, 1, 3), dtype=vtl.int64))
    # a Sequential reports the first layer's error, not an internal one
    with pytest.raises(TypeError, match=r"Linear\(in_features=3.*got list"):
        nn.Sequential(nn.Linear(3, 2), nn.ReLU())([[1.0, 2.0, 3.0]])


def test_functional_api_still_takes_raw_arrays(backend):
    x = _rand((2, 3))
    out = F.linear(x, _rand((4, 3)))
    assert isinstance(out, np.ndarray) and out.shape == (2, 4)
    assert isinstance(F.relu(x), np.ndarray)
    assert isinstance(F.max_pool2d(_rand((1, 1, 4, 4)), 2), np.ndarray)


def test_functional_api_names_mixed_and_non_array_arguments(backend):
    w = vtl.ones((4, 3))
    with pytest.raises(TypeError, match=r"expected vtl\.Tensor arguments, got vtl\.Tensor mixed "
                                        r"with numpy\.ndarray; convert them with vtl\.asarray"):
        F.linear(np.ones((2, 3), np.float32), w)
    with pytest.raises(TypeError, match=r"got vtl\.Tensor mixed with list"):
        F.conv2d([[[[1.0]]]], vtl.ones((1, 1, 1, 1)))
    with pytest.raises(TypeError, match=r"expected arrays of one array-API library, got list"):
        F.mse_loss([1.0, 2.0], [2.0, 2.0])


@pytest.mark.parametrize("dtype", ["int32", "int64", "bool"])
@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layers_refuse_integer_and_bool_inputs(backend, name, dtype):
    skip_unless_dtype(backend, dtype)
    factory, spec = LAYERS[name]
    m = factory(nn)
    args = _vtl_args(spec, np.dtype(dtype).type)
    with pytest.raises(TypeError, match=f"expected a floating-point {spec[0][0]}, got {dtype}"):
        m(*args)


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_torch_layers_refuse_integer_inputs_too(name):
    torch = _torch()
    factory, spec = LAYERS[name]
    m = factory(torch.nn)
    with pytest.raises((RuntimeError, NotImplementedError, ValueError)):
        m(*[torch.tensor(a.numpy()) for a in _vtl_args(spec, np.int64)])


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_embedding_and_relu_keep_taking_integers(backend, dtype):
    skip_unless_dtype(backend, dtype)
    emb = nn.Embedding(5, 3)
    idx = np.array([[0, 4], [2, 2]], dtype)
    assert_close(emb(vtl.asarray(idx)), to_numpy(emb.weight)[idx])
    assert_close(nn.ReLU()(vtl.asarray(np.array([-2, 3], dtype))), np.array([0, 3], dtype))
    with pytest.raises(TypeError, match=r"Embedding\(5, 3\): indices must be integers, got "
                                        r"dtype float32"):
        emb(vtl.asarray([1.0, 2.0]))
    with pytest.raises(TypeError, match=r"Embedding\(5, 3\): expected input to be a "
                                        r"vtl\.Tensor, got numpy\.ndarray"):
        emb(idx)


# -- recurrent states --------------------------------------------------------------------
def test_lstm_state_must_be_a_pair_of_tensors(backend):
    m = nn.LSTM(3, 4, num_layers=2)
    x = vtl.asarray(_rand((5, 2, 3)))
    h = vtl.asarray(_rand((2, 2, 4)))
    c = vtl.asarray(_rand((2, 2, 4)))
    out, (hn, cn) = m(x, (h, c))
    out_l, (hn_l, cn_l) = m(x, [h, c])  # a list, as PyTorch takes it
    assert_close(out_l, to_numpy(out))
    assert_close(cn_l, to_numpy(cn))
    # a (2, N, H) tensor would unpack into h_0 = h[0] and c_0 = h[1]
    with pytest.raises(TypeError, match=re.escape("LSTM(3, 4): expected hx to be a tuple "
                                                  "(h_0, c_0) of two tensors, got a single "
                                                  "Tensor")):
        m(x, h)
    with pytest.raises(TypeError, match="got a tuple of 3 items"):
        m(x, (h, c, c))
    with pytest.raises(TypeError, match="got a list of 1 items"):
        m(x, [h])
    with pytest.raises(TypeError, match=r"expected c_0 to be a vtl\.Tensor, got numpy\.ndarray"):
        m(x, (h, c.numpy()))
    with pytest.raises(TypeError, match="expected a floating-point h_0, got int32"):
        m(x, (vtl.astype(h, vtl.int32), c))


def test_lstm_cell_state_must_be_a_pair(backend):
    m = nn.LSTMCell(3, 4)
    x = vtl.asarray(_rand((3,)))
    hc = vtl.asarray(_rand((2, 4)))
    h, c = m(x, (hc[0], hc[1]))
    # unbatched input: a (2, H) tensor used to be taken as (h, c) without a word
    with pytest.raises(TypeError, match=re.escape("LSTMCell(3, 4): expected hx to be a tuple "
                                                  "(h_0, c_0) of two tensors, got a single "
                                                  "Tensor")):
        m(x, hc)
    assert h.shape == c.shape == (4,)


@pytest.mark.parametrize("cls", ["RNN", "GRU", "RNNCell", "GRUCell"])
def test_single_state_layers_take_one_tensor(backend, cls):
    m = getattr(nn, cls)(3, 4)
    cell = cls.endswith("Cell")
    x = vtl.asarray(_rand((2, 3) if cell else (5, 2, 3)))
    h = vtl.asarray(_rand((2, 4) if cell else (1, 2, 4)))
    m(x, h)
    with pytest.raises(TypeError, match=r"expected hx to be a vtl\.Tensor \(h_0\), got a tuple "
                                        r"of 2 items; only LSTM takes a \(h_0, c_0\) pair"):
        m(x, (h, h))
    with pytest.raises(TypeError, match=r"expected hx to be a vtl\.Tensor \(h_0\), got "
                                        r"numpy\.ndarray"):
        m(x, h.numpy())


def test_torch_takes_the_same_states():
    torch = _torch()
    m = torch.nn.LSTM(3, 4)
    x = torch.zeros((5, 2, 3))
    h = torch.zeros((1, 2, 4))
    m(x, (h, h))
    m(x, [h, h])
    with pytest.raises((RuntimeError, IndexError, TypeError)):
        m(x, h)
    with pytest.raises(RuntimeError):
        m(x, (h, h, h))
    with pytest.raises((AttributeError, TypeError)):
        torch.nn.GRU(3, 4)(x, (h, h))


# -- empty sequences, spatial axes and batches --------------------------------------------
@pytest.mark.parametrize("cls", ["RNN", "LSTM", "GRU"])
def test_recurrent_layers_refuse_empty_sequences(backend, cls):
    for batch_first, shape in ((False, (0, 2, 3)), (True, (2, 0, 3)), (False, (0, 3))):
        m = getattr(nn, cls)(3, 4, batch_first=batch_first)
        with pytest.raises(ValueError, match=re.escape(
                f"{cls}(3, 4): expected a sequence of length > 0, got input of shape {shape}")):
            m(vtl.zeros(shape))


@pytest.mark.parametrize("cls", ["RNN", "LSTM", "GRU"])
def test_recurrent_layers_take_an_empty_batch(backend, cls):
    m = getattr(nn, cls)(3, 4, num_layers=2, bidirectional=True)
    out, h = m(vtl.zeros((5, 0, 3)))
    assert out.shape == (5, 0, 8)
    assert (h[0] if cls == "LSTM" else h).shape == (4, 0, 4)
    torch = _maybe_torch()
    if torch is not None:
        t_out, _ = getattr(torch.nn, cls)(3, 4, num_layers=2, bidirectional=True)(
            torch.zeros((5, 0, 3)))
        assert tuple(t_out.shape) == out.shape


def test_torch_refuses_empty_sequences_and_spatial_axes():
    torch = _torch()
    with pytest.raises(RuntimeError, match="sequence length"):
        torch.nn.LSTM(3, 4)(torch.zeros((0, 2, 3)))
    for m, shape in EMPTY_SPATIAL:
        with pytest.raises(RuntimeError):
            m(torch.nn)(torch.zeros(shape))


EMPTY_SPATIAL = [
    (lambda m: m.Conv1d(1, 2, 1), (1, 1, 0)),
    (lambda m: m.Conv2d(1, 2, 3), (1, 1, 0, 5)),
    (lambda m: m.Conv2d(1, 2, 1, padding=1), (1, 1, 0, 5)),
    (lambda m: m.ConvTranspose1d(1, 2, 3), (1, 1, 0)),
    (lambda m: m.ConvTranspose2d(1, 2, 3), (2, 1, 4, 0)),
    (lambda m: m.MaxPool2d(2), (1, 1, 0, 4)),
    (lambda m: m.AvgPool2d(2, padding=1), (1, 1, 0, 4)),
    (lambda m: m.MaxPool1d(1), (1, 1, 0)),
    (lambda m: m.MaxPool1d(2), (2, 0, 4)),  # a pool's channel axis may not be empty either
    (lambda m: m.AvgPool1d(1), (0, 3)),
    (lambda m: m.AdaptiveAvgPool2d(2), (1, 1, 3, 0)),
]


@pytest.mark.parametrize("case", range(len(EMPTY_SPATIAL)))
def test_convolutions_and_pools_refuse_empty_spatial_axes(backend, case):
    factory, shape = EMPTY_SPATIAL[case]
    m = factory(nn)
    if type(m).__name__.startswith("Conv"):
        expect = f"expected an input with non-empty spatial dimensions, got shape {shape}"
    else:
        expect = ("expected non-empty channel and spatial axes (only the batch axis may be "
                  f"empty), got input of shape {shape}")
    with pytest.raises(ValueError, match=re.escape(expect)):
        m(vtl.zeros(shape))


def test_conv_functional_refuses_empty_spatial_axes_too(backend):
    with pytest.raises(ValueError, match=r"conv2d\(\): expected an input with non-empty "
                                         r"spatial dimensions, got shape \(1, 1, 3, 0\)"):
        F.conv2d(vtl.zeros((1, 1, 3, 0)), vtl.zeros((2, 1, 1, 1)), padding=1)


@pytest.mark.parametrize("case", [
    (lambda m: m.Linear(3, 2), (0, 3), (0, 2)),
    (lambda m: m.Conv1d(2, 3, 3), (0, 2, 5), (0, 3, 3)),
    (lambda m: m.Conv2d(2, 3, 3), (0, 2, 4, 4), (0, 3, 2, 2)),
    (lambda m: m.ConvTranspose2d(2, 3, 2), (0, 2, 3, 3), (0, 3, 4, 4)),
    (lambda m: m.MaxPool2d(2), (0, 1, 4, 4), (0, 1, 2, 2)),
    (lambda m: m.AvgPool2d(2), (0, 1, 4, 4), (0, 1, 2, 2)),
    (lambda m: m.LayerNorm(3), (0, 3), (0, 3)),
    (lambda m: m.BatchNorm1d(3), (0, 3), (0, 3)),
])
def test_an_empty_batch_is_fine(backend, case):
    factory, shape, out_shape = case
    m = factory(nn)
    x = vtl.zeros(shape, requires_grad=True)
    out = m(x)
    assert out.shape == out_shape
    vtl.sum(out).backward()
    assert x.grad.shape == shape
    torch = _maybe_torch()
    if torch is not None:
        assert tuple(factory(torch.nn)(torch.zeros(shape)).shape) == out_shape


def test_batch_norm_of_an_empty_batch_keeps_the_running_statistics(backend):
    """PyTorch: an empty result (weight and bias applied), running statistics untouched."""
    m = nn.BatchNorm1d(3)
    with vtl.no_grad():
        m.running_mean[...] = vtl.asarray([1.0, 2.0, 3.0])
    out = m(vtl.zeros((0, 3)))
    assert out.shape == (0, 3)
    assert_close(m.running_mean, np.array([1.0, 2.0, 3.0], np.float32))
    assert_close(m.running_var, np.ones(3, np.float32))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        m(vtl.zeros((1, 3)))


def test_attention_over_an_empty_key_sequence(backend):
    """PyTorch: the weights are empty and the output is the output projection's bias."""
    m = nn.MultiheadAttention(4, 2)
    with vtl.no_grad():
        m.out_proj.bias[...] = vtl.asarray([0.5, -1.0, 2.0, 0.0])
    out, w = m(vtl.asarray(_rand((3, 2, 4))), vtl.zeros((0, 2, 4)), vtl.zeros((0, 2, 4)))
    assert w.shape == (2, 3, 0)
    assert_close(out, np.broadcast_to(np.array([0.5, -1.0, 2.0, 0.0], np.float32), (3, 2, 4)))
    torch = _maybe_torch()
    if torch is not None:
        t_out, t_w = torch.nn.MultiheadAttention(4, 2)(torch.zeros((3, 2, 4)),
                                                       torch.zeros((0, 2, 4)),
                                                       torch.zeros((0, 2, 4)))
        assert tuple(t_w.shape) == w.shape and tuple(t_out.shape) == out.shape


@pytest.mark.parametrize("shape", [(0, 2, 5, 8), (2, 0, 5, 8)])
def test_attention_over_an_empty_batch_or_no_heads(backend, shape):
    """An empty batch (or zero heads) gives empty outputs and gradients on every backend
    (on cupy the fused kernels decline it: CuPy would still run one block)."""
    q = vtl.asarray(np.zeros(shape, np.float32), requires_grad=True)
    out = F.scaled_dot_product_attention(q, q, q, is_causal=True)
    assert out.shape == shape
    vtl.sum(out).backward()
    assert q.grad.shape == shape
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)
    assert layer(vtl.zeros((5, 0, 8))).shape == (5, 0, 8)


def test_softmax_over_an_empty_axis_is_empty(backend):
    for fn in (F.softmax, F.log_softmax):
        for shape, dim in (((2, 0), 1), ((0, 3), 1), ((2, 0), 0)):
            assert fn(vtl.zeros(shape), dim).shape == shape
