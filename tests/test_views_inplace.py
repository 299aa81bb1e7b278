"""In-place writes through views, with PyTorch's semantics: the base takes the write
(gradients as if the base had been updated), other views see it, saved tensors changed
through a view are caught, and the writes PyTorch refuses raise. Every case runs on every
backend against the gradient PyTorch's rules give, and against PyTorch itself where it is
installed."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_close, to_numpy

import vtl
import vtl.nn.functional as F

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


def _slice_mul(m, a):
    b = a * 1.0
    v = b[0:2]
    v *= 3
    return m.sum(b)


def _reshape_mul(m, a):
    b = a * 1.0
    v = m.reshape(b, (3, 1))
    v *= 3
    return m.sum(b * b)


def _sibling_sees_write(m, a):
    b = a * 1.0
    w = b[1:]
    v = b[:2]
    v *= 3
    return m.sum(w * w)


def _write_value_into_plain_buffer(m, a):
    b = m.zeros((2, 3), dtype=a.dtype)
    r = b[1]
    r += a
    return m.sum(b * b)


def _relu_inplace_on_view(m, a):
    b = a * 1.0
    if m is vtl:
        F.relu_(b[0:2])
    else:
        torch.nn.functional.relu_(b[0:2])
    return m.sum(b * b)


def _chain_of_views(m, a):
    b = m.reshape(a * 1.0, (3, 1))
    t = b.T
    v = t[0, 1:]
    v *= 5
    return m.sum(b * m.reshape(a, (3, 1)))


def _permute_then_index(m, a):
    b = m.reshape(a * 2.0, (1, 3))
    p = m.permute_dims(b, (1, 0)) if m is vtl else b.permute(1, 0)
    q = p[2]
    q -= a[0]
    return m.sum(b ** 2)


def _unstack_view(m, a):
    b = m.reshape(a * 1.0, (3, 1))
    if m is vtl:
        r = vtl.unstack(b, axis=0)[1]  # PyTorch refuses writes into unbind's views;
        r *= 4.0  # vtl hands them to the base like an indexing view's
    else:
        r = b[1]
        r.mul_(4.0)
    return m.sum(b * b)


def _setitem_on_base_then_old_view(m, a):
    b = a * 1.0
    w = b[0:2]
    b[1] = a[2] * 10.0
    return m.sum(w * w)


def _expand_squeeze(m, a):
    b = a * 1.0
    e = m.expand_dims(b, axis=0) if m is vtl else b.unsqueeze(0)
    s = m.squeeze(e, axis=0) if m is vtl else e.squeeze(0)
    s += a * a
    return m.sum(b * e)


CASES = [_slice_mul, _reshape_mul, _sibling_sees_write, _write_value_into_plain_buffer,
         _relu_inplace_on_view, _chain_of_views, _permute_then_index, _unstack_view,
         _setitem_on_base_then_old_view, _expand_squeeze]

# d loss / d a, worked out by hand for a = [1, -2, 3] (and checked against PyTorch below)
EXPECTED = {
    "_slice_mul": [3.0, 3.0, 1.0],
    "_reshape_mul": [18.0, -36.0, 54.0],
    "_sibling_sees_write": [0.0, -36.0, 6.0],
    "_write_value_into_plain_buffer": [2.0, -4.0, 6.0],
    "_relu_inplace_on_view": [2.0, 0.0, 6.0],
    "_chain_of_views": [2.0, -20.0, 30.0],
    "_permute_then_index": [-2.0, -16.0, 20.0],
    "_unstack_view": [2.0, -64.0, 6.0],
    "_setitem_on_base_then_old_view": [2.0, 0.0, 600.0],
    "_expand_squeeze": [12.0, -12.0, 168.0],
}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
def test_gradient_through_view_writes(backend, case):
    a = vtl.asarray([1.0, -2.0, 3.0], requires_grad=True)
    case(vtl, a).backward()
    assert_close(a.grad, np.array(EXPECTED[case.__name__], dtype=np.float32))


@pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
def test_against_torch(case):
    x = np.array([1.0, -2.0, 3.0])
    ta = torch.tensor(x, requires_grad=True)
    case(torch, ta).backward()
    np.testing.assert_allclose(ta.grad.numpy(), EXPECTED[case.__name__])
    va = vtl.asarray(x, requires_grad=True)
    case(vtl, va).backward()
    np.testing.assert_allclose(to_numpy(va.grad), ta.grad.numpy(), rtol=1e-12)


def test_values_follow_the_write(backend):
    a = vtl.asarray([1.0, -2.0, 3.0], requires_grad=True)
    b = a * 1.0
    w = b[1:]
    v = b[:2]
    v *= 3
    assert_close(b, np.array([3.0, -6.0, 3.0], dtype=np.float32))
    assert_close(w, np.array([-6.0, 3.0], dtype=np.float32))


def test_saved_tensor_changed_through_a_view_raises(backend):
    a = vtl.asarray([1.0, -2.0, 3.0], requires_grad=True)
    b = a * 1.0
    c = b * b  # saves b
    v = vtl.reshape(b, (3, 1))[1:]
    v += 1
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        vtl.sum(c).backward()


def test_refused_writes(backend):
    a = vtl.asarray([1.0, -2.0, 3.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="view .* of a leaf tensor that requires grad"):
        v = a[0:2]
        v += 1
    with pytest.raises(RuntimeError, match="view .* of a leaf tensor that requires grad"):
        F.relu(a.T if a.ndim == 2 else vtl.reshape(a, (3, 1)), inplace=True)
    b = a * 1.0
    with vtl.no_grad():
        v = b[0:2]
    with pytest.raises(RuntimeError, match="made under no_grad"):
        v *= 2
    with vtl.no_grad():  # allowed: nothing is recorded
        w = a[0:2]
        w += 1
    assert_close(a, np.array([2.0, -1.0, 3.0], dtype=np.float32))


def test_views_of_a_complex_tensor_refuse_recorded_writes():
    c = vtl.asarray(np.array([1 + 2j, 3 - 1j], dtype=np.complex128))
    x = vtl.asarray([1.0, 2.0], dtype=vtl.float64, requires_grad=True)
    r = vtl.real(c * 1)
    with pytest.raises(RuntimeError, match="real"):
        r += x


def test_no_grad_writes_keep_histories(backend):
    """Optimizer-style updates (no_grad) through views change values only."""
    w = vtl.asarray(np.ones((2, 3), dtype=np.float32), requires_grad=True)
    y = vtl.sum(w) * 2.0
    with vtl.no_grad():
        row = w[0]
        row -= 1.0
    y.backward()
    assert_close(w.grad, np.full((2, 3), 2.0, dtype=np.float32))
    assert_close(w, np.array([[0, 0, 0], [1, 1, 1]], dtype=np.float32))
