"""Checks shared by the tests of the backends' fused nn kernels (linear, relu backward,
cross-entropy): NumPy references and comparisons with the portable paths."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from helpers import use_kernel

import vtl
from vtl import optim
from vtl.nn import functional as F

_INF, _NAN = np.inf, np.nan
#: logits with inf, nan and huge entries (a row of -inf only, a nan, a target at +inf), and
#: their targets
CE_SPECIAL_LOGITS = np.array(
    [[1.0, _INF, 0.0], [-_INF, -_INF, -_INF], [_NAN, 0.0, 1.0], [2.0, -_INF, 0.5],
     [1e30, -1e30, 0.0], [1.0, _INF, 0.0]], np.float32)
CE_SPECIAL_TARGETS = np.array([0, 1, 2, 0, 0, 1])


def np_cross_entropy(x: np.ndarray, t: np.ndarray, reduction: str,
                     ignore_index: int = -100) -> tuple[np.ndarray, np.ndarray]:
    """Cross-entropy of logits ``x`` (m, c) and class indices ``t`` in float64: the loss and
    its gradient with respect to ``x``."""
    x = x.astype(np.float64)
    m = x.max(1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    logp = (x - m) - np.log(np.exp(x - m).sum(1, keepdims=True))
    keep = t != ignore_index
    ts = np.where(keep, t, 0)
    per = np.where(keep, -logp[np.arange(len(t)), ts], 0.0)
    p = np.exp(logp)
    p[np.arange(len(t)), ts] -= 1.0  # minus the one-hot targets
    g = p * keep[:, None]
    if reduction == "mean":
        return per.sum() / keep.sum(), g / keep.sum()
    if reduction == "sum":
        return per.sum(), g
    return per, g


def ce_case(rng: np.random.Generator, m: int, c: int, dtype: Any, tdtype: Any,
            high: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Logits (m, c) of ``dtype`` and targets of ``tdtype`` below ``high`` (default ``c``);
    target 1 is ignored (-100) when ``tdtype`` is signed and ``m > 2``."""
    x = (3 * rng.standard_normal((m, c))).astype(dtype)
    t = rng.integers(0, c if high is None else high, m)
    if np.dtype(tdtype) != np.uint8 and m > 2:
        t[1] = -100
    return x, t.astype(tdtype)


def backward_scaled(loss: vtl.Tensor, v: np.ndarray, reduction: str, backend: str) -> None:
    """Backward of ``loss`` weighted by ``v`` per row (reduction 'none') or by 1.5."""
    if reduction == "none":
        (loss * vtl.asarray(v, backend=backend)).sum().backward()
    else:
        (loss * 1.5).backward()


def scaled_grad(g: np.ndarray, v: np.ndarray, reduction: str) -> np.ndarray:
    """The gradient ``g`` of the loss weighted as in :func:`backward_scaled`."""
    return g * (v[:, None] if reduction == "none" else 1.5)


def ce_special_reference() -> np.ndarray:
    """Per-row losses of :data:`CE_SPECIAL_LOGITS` by the portable path (numpy backend,
    its cross-entropy kernel set aside)."""
    with use_kernel("cross_entropy", None):
        return F.cross_entropy(vtl.asarray(CE_SPECIAL_LOGITS, backend="numpy"),
                               vtl.asarray(CE_SPECIAL_TARGETS, backend="numpy"),
                               reduction="none").numpy()


def check_ce_special_values(backend: str) -> None:
    """``cross_entropy`` on ``backend``: the special logits give the portable path's losses,
    and the mean over only ignored targets is nan (0/0, as PyTorch and the portable path)."""
    got = F.cross_entropy(vtl.asarray(CE_SPECIAL_LOGITS, backend=backend),
                          vtl.asarray(CE_SPECIAL_TARGETS, backend=backend),
                          reduction="none").numpy()
    np.testing.assert_allclose(got, ce_special_reference(), rtol=1e-6, equal_nan=True)
    allign = F.cross_entropy(vtl.asarray(CE_SPECIAL_LOGITS[:2], backend=backend),
                             vtl.asarray([-100, -100], backend=backend))
    assert math.isnan(float(allign))


def train(net: Any, x: vtl.Tensor, y: vtl.Tensor, steps: int,
          lr: float = 1e-2) -> tuple[list[float], list[np.ndarray]]:
    """``steps`` Adam steps of ``net`` on the cross-entropy of ``net(x)`` and ``y``: the
    losses and the final parameters (NumPy copies)."""
    opt = optim.Adam(net.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        losses.append(float(loss))
    return losses, [p.to("numpy").numpy().copy() for p in net.parameters()]


def assert_same_training(actual: tuple, desired: tuple, loss_tol: dict[str, float],
                         param_tol: dict[str, float]) -> None:
    """Two results of :func:`train` agree: the losses within ``loss_tol``, the parameters
    within ``param_tol``."""
    np.testing.assert_allclose(actual[0], desired[0], **loss_tol)
    for a, d in zip(actual[1], desired[1], strict=True):
        np.testing.assert_allclose(a, d, **param_tol)


def np_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: Any, causal: bool,
                 scale: float, g: np.ndarray, o: Any = None, z: Any = None) -> tuple:
    """NumPy's attention and its gradients ``(out, dq, dk, dv)`` (rows with every key
    masked: zeros). ``z``: the dropout factors of the weights (0 or ``1 / (1 - p)``); ``o``:
    take ``rowsum(dO * O)`` from that output (a kernel's rounded one) instead of the exact
    ``rowsum(dP * P)``."""
    s = q @ np.swapaxes(k, -1, -2) * scale
    if mask is not None:
        s = s + mask
    if causal:
        n_q, n_k = s.shape[-2:]
        s = np.where(np.arange(n_k)[None, :] <= np.arange(n_q)[:, None], s, -np.inf)
    mx = s.max(-1, keepdims=True)
    dead = mx == -np.inf
    e = np.where(dead, 0.0, np.exp(s - np.where(dead, 0.0, mx)))
    p = np.where(dead, 0.0, e / np.where(dead, 1.0, e.sum(-1, keepdims=True)))
    pz = p if z is None else p * z
    dp = g @ np.swapaxes(v, -1, -2)
    if z is not None:  # the gradient of the undropped weights
        dp = dp * z
    delta = (dp * p).sum(-1, keepdims=True) if o is None else (g * o).sum(-1, keepdims=True)
    ds = p * (dp - delta)
    return (pz @ v, ds @ k * scale, np.swapaxes(ds, -1, -2) @ q * scale,
            np.swapaxes(pz, -1, -2) @ g)


def rnn_under_autocast(backend: str, name: str, kind: str) -> list[np.ndarray]:
    """A small ``nn.LSTM`` (with an ``nn.LSTMCell``; ``kind`` "lstm") or ``nn.GRU`` (``kind``
    "gru") run forward and backward under ``autocast(dtype=name)`` on ``backend``: its
    outputs (checked to be of the low dtype) and every gradient, as NumPy arrays."""
    low = getattr(vtl, name)
    f32 = vtl.float32
    vtl.random.seed(3)
    m = (vtl.nn.LSTM if kind == "lstm" else vtl.nn.GRU)(6, 20).to(backend)
    cell = vtl.nn.LSTMCell(6, 20).to(backend) if kind == "lstm" else None
    x = vtl.asarray(np.random.default_rng(1).standard_normal((5, 4, 6)).astype(np.float32),
                    backend=backend, requires_grad=True)
    with vtl.autocast(backend, dtype=low):
        out = m(x)[0]
        hc = None if cell is None else cell(x[0])
    outs = [out] if hc is None else [out, hc[0]]
    assert all(o.dtype == low for o in outs)
    loss = (out.astype(f32) ** 2).sum()
    if hc is not None:
        loss = loss + (hc[0] * hc[1]).astype(f32).sum()
    loss.backward()
    params = [*m.parameters(), *(() if cell is None else cell.parameters())]
    return [o.to("numpy").numpy().astype(np.float32) for o in outs] + \
        [t.to("numpy").numpy() for t in (x.grad, *(p.grad for p in params))]


def assert_rnn_kernel_under_autocast(backend: str, name: str, kind: str,
                                     after_kernel_run: Any = None) -> None:
    """:func:`rnn_under_autocast` with the backend's ``{kind}_cell`` kernel and without it
    (the portable path) agree within the low dtype's tolerance; ``after_kernel_run()`` is
    called after the kernel's run (for checks of what it dispatched)."""
    from helpers import use_kernel

    be = vtl.backends.get(backend)
    kern = be.kernel(f"{kind}_cell")
    runs = []
    for k in (kern, None):
        with use_kernel(f"{kind}_cell", k, backend=backend):
            runs.append(rnn_under_autocast(backend, name, kind))
        if k is not None and after_kernel_run is not None:
            after_kernel_run()
    tol = 3e-2 if name == "bfloat16" else 4e-3
    for a, b in zip(*runs, strict=True):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
