"""vtl.nn.init: fan computation, gains, distribution statistics, determinism
and in-place semantics (PyTorch's documented formulas as the oracle)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import to_numpy

import vtl
from vtl.nn import init

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


@pytest.mark.parametrize("shape,fans", [((3, 5), (5, 3)), ((8, 4, 3, 3), (36, 72)),
                                        ((2, 6, 5), (30, 10))])
def test_fan_in_and_fan_out(shape, fans):
    assert init._calculate_fan_in_and_fan_out(vtl.empty(shape)) == fans
    if torch is not None:
        assert torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(shape)) == fans
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init._calculate_fan_in_and_fan_out(vtl.empty((4,)))


def test_calculate_gain():
    expect = {"linear": 1.0, "conv2d": 1.0, "sigmoid": 1.0, "tanh": 5 / 3,
              "relu": math.sqrt(2), "selu": 0.75, "leaky_relu": math.sqrt(2 / (1 + 0.01**2))}
    for name, g in expect.items():
        assert init.calculate_gain(name) == pytest.approx(g)
        if torch is not None:
            assert init.calculate_gain(name) == pytest.approx(torch.nn.init.calculate_gain(name))
    assert init.calculate_gain("leaky_relu", 0.2) == pytest.approx(math.sqrt(2 / 1.04))
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        init.calculate_gain("swishy")


def _stats(t):
    a = to_numpy(t).astype(np.float64)
    return a.min(), a.max(), a.mean(), a.std()


def test_uniform_normal_constant(backend):
    t = vtl.empty((200, 100))
    obj, v0 = t, t._version
    assert init.uniform_(t, -2.0, 3.0) is obj and t._version > v0
    lo, hi, mean, std = _stats(t)
    assert lo >= -2 and hi < 3 and abs(mean - 0.5) < 0.05 and abs(std - 5 / math.sqrt(12)) < 0.03
    init.normal_(t, 1.0, 0.5)
    _, _, mean, std = _stats(t)
    assert abs(mean - 1) < 0.01 and abs(std - 0.5) < 0.01
    for fn, val in ((lambda x: init.constant_(x, 0.25), 0.25), (init.zeros_, 0.0),
                    (init.ones_, 1.0)):
        fn(t)
        assert (to_numpy(t) == val).all()
    e = init.eye_(vtl.empty((3, 4)))
    np.testing.assert_array_equal(to_numpy(e), np.eye(3, 4, dtype=np.float32))


@pytest.mark.parametrize("shape", [(256, 128), (64, 32, 3, 3)])
def test_xavier_and_kaiming_statistics(backend, shape):
    fan_in, fan_out = init._calculate_fan_in_and_fan_out(vtl.empty(shape))
    t = vtl.empty(shape)
    init.xavier_uniform_(t, gain=2.0)
    a = 2.0 * math.sqrt(6 / (fan_in + fan_out))
    lo, hi, mean, std = _stats(t)
    assert -a <= lo and hi <= a and hi > 0.95 * a and abs(std - a / math.sqrt(3)) < 0.03 * a
    init.xavier_normal_(t)
    assert abs(_stats(t)[3] - math.sqrt(2 / (fan_in + fan_out))) < 0.03 * math.sqrt(
        2 / (fan_in + fan_out))
    init.kaiming_uniform_(t, a=math.sqrt(5))  # Linear/Conv default: bound 1/sqrt(fan_in)
    bound = 1 / math.sqrt(fan_in)
    lo, hi, _, std = _stats(t)
    assert -bound <= lo and hi <= bound and abs(std - bound / math.sqrt(3)) < 0.03 * bound
    init.kaiming_normal_(t, mode="fan_out", nonlinearity="relu")
    expect = math.sqrt(2) / math.sqrt(fan_out)
    assert abs(_stats(t)[3] - expect) < 0.03 * expect
    with pytest.raises(ValueError, match="Mode fan_avg not supported"):
        init.kaiming_normal_(t, mode="fan_avg")


def test_orthogonal(backend):
    for shape in ((6, 4), (4, 6), (3, 2, 2)):
        t = vtl.empty(shape, dtype=vtl.float64) if "float64" in vtl.__array_namespace_info__(
        ).dtypes(device=vtl.Device(backend)) else vtl.empty(shape)
        init.orthogonal_(t, gain=1.5)
        m = to_numpy(t).reshape(shape[0], -1).astype(np.float64)
        gram = m.T @ m if shape[0] >= m.shape[1] else m @ m.T
        np.testing.assert_allclose(gram, 2.25 * np.eye(gram.shape[0]), atol=1e-5)
    with pytest.raises(ValueError, match="2 or more dimensions"):
        init.orthogonal_(vtl.empty(3))


def test_trunc_normal(backend):
    t = init.trunc_normal_(vtl.empty((100, 100)), 0.5, 1.0, -1.0, 1.2)
    lo, hi, _, _ = _stats(t)
    assert lo >= -1.0 and hi <= 1.2 and lo < -0.95 and hi > 1.15


def test_determinism_and_generator(backend):
    vtl.random.seed(3)
    a = to_numpy(init.normal_(vtl.empty((5, 5))))
    vtl.random.seed(3)
    np.testing.assert_array_equal(to_numpy(init.normal_(vtl.empty((5, 5)))), a)
    g = vtl.random.Generator(3)
    b = to_numpy(init.kaiming_uniform_(vtl.empty((5, 5)), generator=g))
    expect = to_numpy(vtl.random.Generator(3).uniform(-1, 1, (5, 5)))
    np.testing.assert_allclose(b, expect * math.sqrt(3) * math.sqrt(2) / math.sqrt(5), atol=1e-6,
                               rtol=1e-6)


def test_parameter_init_outside_graph(backend):
    p = vtl.nn.Parameter(vtl.empty((3, 3)))
    init.xavier_uniform_(p)  # in-place on a leaf that requires grad: allowed (no_grad inside)
    assert p.requires_grad and p.grad_fn is None
    assert float(vtl.max(vtl.abs(p))) > 0


def test_errors(backend):
    with pytest.raises(TypeError, match="vtl.Tensor"):
        init.normal_(np.zeros(3))
    with pytest.raises(TypeError, match="float32 or float64"):
        init.uniform_(vtl.zeros(3, dtype=vtl.int32))
    with pytest.raises(ValueError, match="std"):
        init.normal_(vtl.empty(3), 0.0, -1.0)
    with pytest.raises(ValueError, match="2-D"):
        init.eye_(vtl.empty((2, 2, 2)))
    with pytest.warns(UserWarning, match="zero-element"):
        init.kaiming_uniform_(vtl.empty((0, 3)))
