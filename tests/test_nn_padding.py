"""Padding layers against NumPy's np.pad (PyTorch's modes map to NumPy's: reflect ->
reflect, replicate -> edge, circular -> wrap) on every backend, gradients, and
PyTorch itself where installed."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_close, check_grad, to_numpy

import vtl
from vtl import nn

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

_NP_MODE = {"Constant": "constant", "Zero": "constant", "Reflection": "reflect",
            "Replication": "edge", "Circular": "wrap"}
KINDS = list(_NP_MODE)


def _make(kind, d, padding):
    cls = getattr(nn, f"{kind}Pad{d}d")
    return cls(padding, 1.5) if kind == "Constant" else cls(padding)


def _np_pad(x, kind, d, pads):
    width = [(0, 0)] * (x.ndim - d) + [(pads[2 * i], pads[2 * i + 1]) for i in range(d)][::-1]
    if kind == "Constant":
        return np.pad(x, width, mode="constant", constant_values=1.5)
    return np.pad(x, width, mode=_NP_MODE[kind])


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("d", [1, 2, 3])
def test_pad_layers(backend, kind, d):
    rng = np.random.default_rng(d)
    x = rng.standard_normal((2, 3) + (4,) * d).astype(np.float32)
    pads = tuple(int(v) for v in rng.integers(0, 3, 2 * d))
    layer = _make(kind, d, pads)
    assert_close(layer(vtl.asarray(x)), _np_pad(x, kind, d, pads))
    # int padding, unbatched input
    layer = _make(kind, d, 2)
    assert_close(layer(vtl.asarray(x[0])), _np_pad(x[0], kind, d, (2,) * (2 * d)))


@pytest.mark.parametrize("kind", KINDS)
def test_pad_gradients(kind):
    x = np.random.default_rng(1).standard_normal((1, 2, 4, 5))
    check_grad(lambda a: _make(kind, 2, (1, 2, 2, 0))(a), x)


def test_constant_pad_crops_with_negative_padding(backend):
    x = np.arange(12, dtype=np.float32).reshape(1, 3, 4)
    got = nn.ConstantPad1d((-1, 2), 0.0)(vtl.asarray(x))
    assert_close(got, np.pad(x[..., 1:], [(0, 0), (0, 0), (0, 2)]))


def test_errors_and_repr():
    with pytest.raises(ValueError, match="4 values"):
        nn.ReflectionPad2d((1, 2))
    with pytest.raises(TypeError, match="int or a tuple"):
        nn.ZeroPad2d(1.5)
    with pytest.raises(ValueError, match=r"expected a 3-D \(unbatched\) or 4-D"):
        nn.ReplicationPad2d(1)(vtl.ones((4, 4)))
    with pytest.raises(ValueError, match="reflect"):
        nn.ReflectionPad1d(4)(vtl.ones((1, 1, 4)))
    assert repr(nn.ZeroPad2d(1)) == "ZeroPad2d((1, 1, 1, 1))"
    assert repr(nn.ConstantPad1d(2, 3.5)) == "ConstantPad1d(padding=(2, 2), value=3.5)"


@pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("d", [1, 2, 3])
def test_against_torch(kind, d):
    x = np.random.default_rng(0).standard_normal((2, 2) + (5,) * d)
    pads = (2, 1, 0, 3, 1, 1)[: 2 * d]
    ours = _make(kind, d, pads)
    theirs = getattr(torch.nn, f"{kind}Pad{d}d")(*((pads, 1.5) if kind == "Constant"
                                                  else (pads,)))
    tx = torch.tensor(x, requires_grad=True)
    vx = vtl.asarray(x, requires_grad=True)
    t_out, v_out = theirs(tx), ours(vx)
    np.testing.assert_array_equal(to_numpy(v_out), t_out.detach().numpy())
    w = np.random.default_rng(1).standard_normal(tuple(t_out.shape))
    (t_out * torch.tensor(w)).sum().backward()
    vtl.sum(v_out * vtl.asarray(w)).backward()
    np.testing.assert_allclose(to_numpy(vx.grad), tx.grad.numpy(), rtol=1e-12)
