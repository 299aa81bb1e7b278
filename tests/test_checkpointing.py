"""vtl.utils.checkpoint: gradients with checkpointing equal those without (dropout
included: the recomputation replays the random numbers), for both variants; parameters
the function closes over, autograd.grad, no input requiring grad, kwargs, nested outputs,
higher-order gradients, checkpoint_sequential, and the errors."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_close, to_numpy

import vtl
from vtl import nn
from vtl.nn import functional as F
from vtl.utils.checkpoint import checkpoint, checkpoint_sequential

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


def _model(seed: int = 0) -> nn.Module:
    vtl.random.seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.3), nn.Linear(8, 8),
                         nn.Tanh(), nn.Dropout(0.2), nn.Linear(8, 3))


def _grads(model, x, run) -> list[np.ndarray]:
    """Parameter gradients (and x's, if it requires grad) of sum(run(x)^2), with the
    default generator at a fixed state and a draw between forward and backward."""
    model.zero_grad()
    vtl.random.seed(7)
    y = run(x)
    vtl.random.normal(size=(5,))  # the main stream moves on before backward
    vtl.sum(y * y).backward()
    out = [to_numpy(p.grad) for p in model.parameters()]
    if x.requires_grad:
        out.append(to_numpy(x.grad))
        x.grad = None
    return out


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_gradients_equal_without_checkpointing(backend, use_reentrant):
    model = _model()
    x = vtl.asarray(np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32),
                    requires_grad=True)
    ref = _grads(model, x, model)
    got = _grads(model, x, lambda t: checkpoint(model, t, use_reentrant=use_reentrant))
    for a, b in zip(ref, got, strict=True):
        np.testing.assert_array_equal(a, b)  # the same ops on the same numbers
    got = _grads(model, x, lambda t: checkpoint_sequential(model, 3, t,
                                                           use_reentrant=use_reentrant))
    for a, b in zip(ref, got, strict=True):
        np.testing.assert_array_equal(a, b)


def test_rng_stream_of_the_main_process_is_unchanged(backend):
    model = _model()
    x = vtl.ones((3, 4))
    vtl.random.seed(1)
    vtl.sum(model(x)).backward()
    after_plain = to_numpy(vtl.random.uniform(size=(4,)))
    vtl.random.seed(1)
    vtl.sum(checkpoint(model, x)).backward()  # recomputation replays, then restores
    np.testing.assert_array_equal(after_plain, to_numpy(vtl.random.uniform(size=(4,))))


def test_without_preserved_rng_state_the_masks_differ(backend):
    vtl.random.seed(0)
    w = vtl.asarray(np.ones((16,), np.float32), requires_grad=True)

    def f(t):
        return F.dropout(t * w, 0.5)

    x = vtl.ones((16,))
    vtl.random.seed(3)
    y = checkpoint(f, x, preserve_rng_state=False)
    vtl.sum(y).backward()
    # the gradient of sum(dropout(w)) is the mask of the recomputation, not the forward's
    mask_fwd = to_numpy(y) != 0
    mask_bwd = to_numpy(w.grad) != 0
    assert not np.array_equal(mask_fwd, mask_bwd)


def test_closed_over_parameters_reach_autograd_grad(backend):
    model = _model()
    model.eval()
    x = vtl.asarray(np.random.default_rng(1).normal(size=(2, 4)).astype(np.float32))
    params = list(model.parameters())
    ref = vtl.autograd.grad(vtl.sum(model(x) ** 2), params)
    y = checkpoint(model, x)  # x does not require grad: the node still reaches the params
    assert y.requires_grad and y.grad_fn.name() == "CheckpointBackward"
    got = vtl.autograd.grad(vtl.sum(y ** 2), params)
    for a, b in zip(ref, got, strict=True):
        np.testing.assert_array_equal(to_numpy(a), to_numpy(b))
    assert all(p.grad is None for p in params)  # grad() touched no .grad


def test_closed_over_non_leaf_tensor(backend):
    rng = np.random.default_rng(2)
    w = vtl.asarray(rng.normal(size=(3, 3)).astype(np.float32), requires_grad=True)
    z = vtl.asarray(rng.normal(size=(2, 3)).astype(np.float32), requires_grad=True)

    def run(ck):
        h = vtl.exp(w) * 0.5  # made before the checkpointed function, read inside it
        h.register_hook(lambda g: g * 2)  # a hook on it sees the whole gradient, once
        f = lambda t: vtl.sum(vtl.tanh(t @ h @ w))  # noqa: E731
        return vtl.autograd.grad(checkpoint(f, z) if ck else f(z), [z, w])

    for a, b in zip(run(False), run(True), strict=True):
        assert_close(b, to_numpy(a), rtol=1e-6, atol=1e-6)


def test_kwargs_nested_outputs_and_non_tensors(backend):
    w = vtl.asarray(np.arange(1.0, 4.0, dtype=np.float32), requires_grad=True)

    def f(a, scale, *, shift):
        return {"y": (a * w * scale + shift, vtl.argmax(a)), "tag": "ok", "n": 3}

    x = vtl.asarray(np.array([0.5, -1.0, 2.0], np.float32), requires_grad=True)
    out = checkpoint(f, x, 2.0, shift=1.0)
    assert out["tag"] == "ok" and out["n"] == 3
    y, idx = out["y"]
    assert not idx.requires_grad and int(idx) == 2
    vtl.sum(y * y).backward()
    wn = np.arange(1.0, 4.0, dtype=np.float32)
    yy = to_numpy(x) * wn * 2 + 1
    assert_close(x.grad, 2 * yy * wn * 2, rtol=1e-5)
    assert_close(w.grad, 2 * yy * to_numpy(x) * 2, rtol=1e-5)


def test_second_order_gradients():
    x = vtl.asarray(np.array([0.3, -1.2, 2.0]), requires_grad=True)  # float64, numpy

    def f(t):
        return vtl.sum(vtl.sin(t) ** 3)

    (d1,) = vtl.autograd.grad(checkpoint(f, x), x, create_graph=True)
    (h1,) = vtl.autograd.grad(vtl.sum(d1), x)
    s, c = np.sin(to_numpy(x)), np.cos(to_numpy(x))
    assert_close(d1, 3 * s**2 * c, rtol=1e-12)
    assert_close(h1, 6 * s * c**2 - 3 * s**3, rtol=1e-12)


def test_grad_mode_off_and_no_differentiable_output(backend):
    calls = []

    def f(t):
        calls.append(vtl.is_grad_enabled())
        return t * 2

    x = vtl.ones((2,), requires_grad=True)
    with vtl.no_grad():
        y = checkpoint(f, x)
    assert not y.requires_grad and calls == [False]
    y = checkpoint(f, vtl.ones((2,)))  # nothing requires grad: no node
    assert not y.requires_grad


def test_reentrant_variant_limits():
    model = _model()
    x = vtl.ones((2, 4))
    with pytest.warns(UserWarning, match="none of the inputs have requires_grad=True"):
        y = checkpoint(model, x, use_reentrant=True)
    assert not y.requires_grad
    with pytest.raises(ValueError, match="Unexpected keyword arguments: shift"):
        checkpoint(lambda t, shift: t + shift, x, use_reentrant=True, shift=1.0)
    with pytest.raises(ValueError, match="context_fn"):
        checkpoint(model, x, use_reentrant=True,
                   context_fn=lambda: (vtl.no_grad(), vtl.no_grad()))


def test_errors_and_determinism_check():
    with pytest.raises(TypeError, match="expects a callable"):
        checkpoint(3, vtl.ones(2))
    with pytest.raises(ValueError, match="determinism_check should be one of"):
        checkpoint(lambda t: t, vtl.ones(2), determinism_check="strict")
    calls = []

    def changing(t):
        calls.append(1)
        return t[: 2 + len(calls)] * 2.0  # another shape the second time

    x = vtl.ones((5,), requires_grad=True)
    y = checkpoint(changing, x)
    with pytest.raises(RuntimeError, match="recomputed output 0 has shape"):
        vtl.sum(y).backward()
    with pytest.raises(ValueError, match="Unexpected keyword arguments: foo"):
        checkpoint_sequential([lambda t: t], 1, x, foo=1)
    with pytest.raises(ValueError, match="segments must be a positive int"):
        checkpoint_sequential([lambda t: t], 0, x)


def test_context_fn_wraps_forward_and_recomputation():
    seen = []

    class Mark:
        def __init__(self, name):
            self.name = name

        def __enter__(self):
            seen.append(self.name)

        def __exit__(self, *exc):
            return False

    x = vtl.ones((2,), requires_grad=True)
    y = checkpoint(lambda t: t * 3.0, x, context_fn=lambda: (Mark("fwd"), Mark("recompute")))
    assert seen == ["fwd"]
    vtl.sum(y).backward()
    assert seen == ["fwd", "recompute"]
    assert_close(x.grad, np.full(2, 3.0, dtype=np.float32))


def test_matches_torch_checkpoint():
    torch_ = pytest.importorskip("torch")
    from torch.utils.checkpoint import checkpoint as tcheckpoint

    rng = np.random.default_rng(4)
    w1, w2 = rng.normal(size=(4, 5)), rng.normal(size=(5, 2))
    x = rng.normal(size=(3, 4))

    def run_vtl():
        a, b = (vtl.asarray(w, requires_grad=True) for w in (w1, w2))
        xx = vtl.asarray(x, requires_grad=True)
        y = checkpoint(lambda t: vtl.tanh(t @ a) @ b, xx)
        vtl.sum(y ** 2).backward()
        return [to_numpy(t.grad) for t in (a, b, xx)]

    def run_torch():
        a, b = (torch_.tensor(w, requires_grad=True) for w in (w1, w2))
        xx = torch_.tensor(x, requires_grad=True)
        y = tcheckpoint(lambda t: torch_.tanh(t @ a) @ b, xx, use_reentrant=False)
        (y ** 2).sum().backward()
        return [t.grad.numpy() for t in (a, b, xx)]

    for a, b in zip(run_vtl(), run_torch(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_reentrant_variant_refuses_selective_backward():
    """The nested backward of the reentrant variant fills .grad: with vtl.autograd.grad or
    backward(inputs=) it would return wrong gradients, so it raises (as PyTorch does)."""
    w = vtl.asarray([[0.5, -1.0], [2.0, 0.25]], requires_grad=True)
    x = vtl.asarray([[1.0, 2.0]], requires_grad=True)
    y = vtl.sum(checkpoint(lambda t: vtl.tanh(t @ w), x, use_reentrant=True))
    with pytest.raises(RuntimeError, match="not compatible with vtl.autograd.grad"):
        vtl.autograd.grad(y, [x, w], retain_graph=True)
    with pytest.raises(RuntimeError, match="not compatible with vtl.autograd.grad"):
        y.backward(inputs=[x])
