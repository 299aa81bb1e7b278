"""vtl.autocast: PyTorch's op lists (output dtypes per op), gradients' dtypes, nesting,
threads, the decorator form, parameter-cast caching, and a model trained on Digits under
autocast reaching the float32 accuracy."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from helpers import supported_dtypes, to_numpy

import vtl
import vtl.nn.functional as F
from vtl import nn, optim
from vtl.nn.functional import _rnn

LOW = ["float16", "bfloat16"]
EPS = {"float16": 2.0**-10, "bfloat16": 2.0**-7}
RNG = np.random.default_rng(11)


def _need(backend: str, name: str) -> None:
    if name not in supported_dtypes(backend):
        pytest.skip(f"{backend} has no {name}")


def _x(*shape: int) -> vtl.Tensor:
    return vtl.asarray(RNG.standard_normal(shape).astype(np.float32))


@pytest.mark.parametrize("name", LOW)
def test_low_precision_list(backend, name):
    _need(backend, name)
    low = getattr(vtl, name)
    x = _x(4, 6)
    lin, conv = nn.Linear(6, 5), nn.Conv2d(2, 3, 3)
    img = _x(2, 2, 5, 5)
    q = _x(2, 3, 4, 8)
    seq = _x(2, 3, 6)
    cases = {
        "matmul": lambda: vtl.matmul(x, vtl.matrix_transpose(x)),
        "@": lambda: x @ vtl.matrix_transpose(x),
        "linear": lambda: lin(x),
        "F.linear": lambda: F.linear(x, lin.weight),
        "conv2d": lambda: conv(img),
        "conv1d": lambda: F.conv1d(_x(2, 2, 7), _x(4, 2, 3)),
        "conv_transpose2d": lambda: F.conv_transpose2d(img, _x(2, 3, 3, 3)),
        "sdpa": lambda: F.scaled_dot_product_attention(q, q, q),
        "lstm_cell": lambda: _rnn.lstm_cell(x, (_x(4, 3), _x(4, 3)), _x(12, 6), _x(12, 3))[0],
        "gru_cell": lambda: _rnn.gru_cell(x, _x(4, 3), _x(9, 6), _x(9, 3)),
        "LSTM": lambda: nn.LSTM(6, 4, batch_first=True)(seq)[0],
        "GRU": lambda: nn.GRU(6, 4)(seq)[1],
        "MultiheadAttention": lambda: nn.MultiheadAttention(6, 2, batch_first=True)(
            seq, seq, seq)[0],
        "relu after linear": lambda: F.relu(lin(x)),
        "batch_norm keeps the input's dtype": lambda: nn.BatchNorm2d(3)(conv(img)),
    }
    with vtl.autocast(dtype=low):
        for k, fn in cases.items():
            assert fn().dtype == low, k


@pytest.mark.parametrize("name", LOW)
def test_float32_list(backend, name):
    _need(backend, name)
    low = getattr(vtl, name)
    h = vtl.astype(_x(4, 6), low)
    y = vtl.asarray(np.arange(4) % 6)
    cases = {
        "exp": lambda: vtl.exp(h), "log": lambda: vtl.log(vtl.abs(h) + 1.0),
        "pow": lambda: vtl.pow(h, 2.0), "sum": lambda: vtl.sum(h), "mean": lambda: vtl.mean(h),
        "prod": lambda: vtl.prod(h, axis=1), "cumulative_sum": lambda: vtl.cumulative_sum(h,
                                                                                      axis=1),
        "softmax": lambda: F.softmax(h, dim=1), "log_softmax": lambda: F.log_softmax(h, dim=1),
        "logsumexp": lambda: F.logsumexp(h, dim=1), "softplus": lambda: F.softplus(h),
        "layer_norm": lambda: F.layer_norm(h, (6,)), "group_norm": lambda: F.group_norm(
            vtl.reshape(h, (4, 6, 1)), 2),
        "cross_entropy": lambda: F.cross_entropy(h, y), "nll_loss": lambda: F.nll_loss(h, y),
        "mse_loss": lambda: F.mse_loss(h, h * 0.5), "l1_loss": lambda: F.l1_loss(h, h),
        "bce_with_logits": lambda: F.binary_cross_entropy_with_logits(h, h * 0.0),
        "cosine_similarity": lambda: F.cosine_similarity(h, h),
        "reciprocal": lambda: vtl.reciprocal(h + 3.0), "** 2": lambda: h ** 2,
        "vector_norm": lambda: vtl.linalg.vector_norm(h, axis=1),
        "interpolate": lambda: F.interpolate(vtl.reshape(h, (1, 4, 6)), scale_factor=2),
        "cumsum": lambda: vtl.cumsum(h, 1),
    }
    with vtl.autocast(dtype=low):
        for k, fn in cases.items():
            assert fn().dtype == vtl.float32, k
        # untouched ops keep their input's dtype; mixed inputs take the widest
        assert F.relu(h).dtype == low and vtl.tanh(h).dtype == low
        assert (h + h).dtype == low and (h + vtl.ones(6)).dtype == vtl.float32
        # float64 is not cast down
        if "float64" in supported_dtypes(backend):
            d = vtl.astype(_x(3, 3), vtl.float64)
            assert (d @ d).dtype == vtl.float64


@pytest.mark.parametrize("name", LOW)
def test_backward_in_the_forward_dtypes(backend, name):
    _need(backend, name)
    low = getattr(vtl, name)
    vtl.random.seed(0)
    m = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    x, y = _x(5, 6), vtl.asarray(np.arange(5) % 3)
    with vtl.autocast(dtype=low):
        out = m(x)
        loss = F.cross_entropy(out, y)
    assert out.dtype == low and loss.dtype == vtl.float32
    loss.backward()
    grads = [p.grad for p in m.parameters()]
    assert all(g.dtype == vtl.float32 for g in grads)
    m2 = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    m2.load_state_dict(m.state_dict())
    F.cross_entropy(m2(x), y).backward()
    for g, p2 in zip(grads, m2.parameters(), strict=True):
        np.testing.assert_allclose(to_numpy(g), to_numpy(p2.grad), rtol=20 * EPS[name],
                                   atol=20 * EPS[name])


def test_nesting_disabling_and_state(backend):
    x = _x(3, 3)
    assert not vtl.amp.is_autocast_enabled()
    with vtl.autocast(dtype=vtl.bfloat16):
        assert vtl.amp.is_autocast_enabled() and vtl.amp.get_autocast_dtype() == vtl.bfloat16
        assert (x @ x).dtype == vtl.bfloat16
        with vtl.autocast(enabled=False):
            assert (x @ x).dtype == vtl.float32
            assert not vtl.amp.is_autocast_enabled()
        other = "cupy" if backend != "cupy" else "numpy"
        with vtl.autocast(other, dtype=vtl.bfloat16, enabled=False):  # another device's
            assert (x @ x).dtype == vtl.bfloat16
        assert (x @ x).dtype == vtl.bfloat16
    assert (x @ x).dtype == vtl.float32 and not vtl.amp.is_autocast_enabled()


def test_other_device_types_are_not_affected():
    x = _x(3, 3)  # numpy (the fixture is not used: the default backend)
    with vtl.use_backend("numpy"), vtl.autocast("cupy", dtype=vtl.bfloat16):
        assert (x @ x).dtype == vtl.float32
    with vtl.autocast("cpu", dtype=vtl.bfloat16):  # PyTorch's name for numpy
        assert (x @ x).dtype == vtl.bfloat16


def test_decorator_and_threads(backend):
    x = _x(3, 3)

    @vtl.autocast(dtype=vtl.bfloat16)
    def f(a):
        return a @ a

    assert f(x).dtype == vtl.bfloat16 and (x @ x).dtype == vtl.float32
    seen = []
    with vtl.autocast(dtype=vtl.bfloat16):
        th = threading.Thread(target=lambda: seen.append((x @ x).dtype))
        th.start()
        th.join()
        assert (x @ x).dtype == vtl.bfloat16
    assert seen == [vtl.float32]  # autocast is per thread


def test_parameter_casts_are_cached(backend):
    from vtl import _autocast

    lin = nn.Linear(4, 4)
    x = _x(2, 4)
    with vtl.autocast(dtype=vtl.bfloat16):
        a = _autocast.low(lin.weight)[0]
        b = _autocast.low(lin.weight)[0]
        assert a is b and a.dtype == vtl.bfloat16
        with vtl.no_grad():
            lin.weight *= 2.0  # a new version: cast again
        c = _autocast.low(lin.weight)[0]
        assert c is not a
        lin(x)
    assert not _autocast._tls.cache  # emptied when the outermost region ends


def test_bad_arguments():
    with pytest.raises(TypeError, match="float16 or vtl.bfloat16"):
        vtl.autocast(dtype=vtl.float32)
    with pytest.raises(ValueError, match="unknown device_type"):
        vtl.autocast("tpu")
    with pytest.raises(TypeError, match="enabled must be a bool"):
        vtl.autocast(enabled=1)


def _digits_accuracy(precision: str, backend: str) -> float:
    from vtl.datasets import Digits
    from vtl.train import evaluate, fit

    with vtl.use_backend(backend):
        tr, te = Digits(), Digits(train=False)
        vtl.random.seed(0)
        model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10)).to(backend)
        opt = optim.Adam(model.parameters(), lr=3e-3)
        loader = vtl.data.DataLoader(tr, batch_size=64, shuffle=True,
                                     generator=vtl.random.Generator(1))
        fit(model, loader, F.cross_entropy, opt, 8, progress=False, precision=precision)
        region = vtl.autocast(dtype=vtl.bfloat16 if precision == "bf16" else vtl.float16,
                              enabled=precision != "32")
        with region:
            logs = evaluate(model, vtl.data.DataLoader(te, batch_size=256), F.cross_entropy,
                            metrics=("accuracy",))
        return float(logs["accuracy"])


def test_digits_under_autocast_reaches_the_float32_accuracy(backend):
    acc32 = _digits_accuracy("32", backend)
    assert acc32 > 0.9
    for precision in ("bf16", "fp16"):
        if precision == "fp16" and "float16" not in vtl.__array_namespace_info__().dtypes(
                device=vtl.Device(backend, 0)):
            continue  # (a wgpu adapter without shader-f16)
        assert _digits_accuracy(precision, backend) >= acc32 - 0.01, precision


def test_fit_precision_arguments():
    from vtl.train import fit

    m = nn.Linear(2, 2)
    with pytest.raises(ValueError, match="precision must be"):
        fit(m, [], F.mse_loss, optim.SGD(m.parameters(), lr=0.1), 1, precision="16")
