"""Recurrent cells (PyTorch's gate layouts) and the loop over time used by
``nn.RNN``/``nn.LSTM``/``nn.GRU``.

Gate order in the stacked weights: LSTM ``i, f, g, o``; GRU ``r, z, n``. The
input projection of the whole sequence is one matrix product; the loop then
adds the recurrent projection step by step. Few recorded ops per step: gates
are split with one ``unstack`` and the sigmoids are ``(1 + tanh(x / 2)) / 2``
(all four LSTM gate activations are one scaled ``tanh``).
"""

from __future__ import annotations

from typing import Any

from ._utils import namespace
from .activation import relu
from .linear import linear

__all__ = ["gru_cell", "lstm_cell", "rnn_relu_cell", "rnn_tanh_cell"]


def _sig(x: Any, xp: Any) -> Any:
    """``sigmoid(x) = (1 + tanh(x / 2)) / 2``: stable for any ``x`` and cheaper to record."""
    return 0.5 * xp.tanh(0.5 * x) + 0.5


def _lstm_consts(xp: Any, like: Any) -> tuple[Any, Any]:
    """Per-gate scale and offset turning ``tanh(scale * x) * scale + offset`` into
    ``sigmoid`` for the gates ``i, f, o`` and ``tanh`` for ``g``."""
    scale = xp.asarray([[0.5], [0.5], [1.0], [0.5]], dtype=like.dtype, device=like.device)
    offset = xp.asarray([[0.5], [0.5], [0.0], [0.5]], dtype=like.dtype, device=like.device)
    return scale, offset


def _lstm_step(xp: Any, gi: Any, h: Any, c: Any, w_hh: Any, b_hh: Any,
               consts: tuple[Any, Any]) -> tuple[Any, Any]:
    hs = h.shape[-1]
    gates = gi + xp.matmul(h, xp.matrix_transpose(w_hh))
    if b_hh is not None:
        gates = gates + b_hh
    scale, offset = consts
    act = xp.tanh(xp.reshape(gates, tuple(gates.shape[:-1]) + (4, hs)) * scale) * scale + offset
    i, f, g, o = xp.unstack(act, axis=-2)
    c = f * c + i * g
    return o * xp.tanh(c), c


def _gru_step(xp: Any, gi: Any, h: Any, w_hh: Any, b_hh: Any) -> Any:
    hs = h.shape[-1]
    gh = xp.matmul(h, xp.matrix_transpose(w_hh))
    if b_hh is not None:
        gh = gh + b_hh
    split = tuple(gi.shape[:-1]) + (3, hs)
    i_r, i_z, i_n = xp.unstack(xp.reshape(gi, split), axis=-2)
    h_r, h_z, h_n = xp.unstack(xp.reshape(gh, split), axis=-2)
    r = _sig(i_r + h_r, xp)
    z = _sig(i_z + h_z, xp)
    n = xp.tanh(i_n + r * h_n)
    return n + z * (h - n)


def _rnn_step(xp: Any, gi: Any, h: Any, w_hh: Any, b_hh: Any, nonlinearity: str) -> Any:
    pre = gi + xp.matmul(h, xp.matrix_transpose(w_hh))
    if b_hh is not None:
        pre = pre + b_hh
    return xp.tanh(pre) if nonlinearity == "tanh" else relu(pre)


def _check_cell(input: Any, hx: Any, w_ih: Any, w_hh: Any, gates: int, fname: str) -> None:  # noqa: A002
    hs = w_hh.shape[1]
    if w_ih.ndim != 2 or w_hh.ndim != 2 or w_ih.shape[0] != gates * hs \
            or w_hh.shape[0] != gates * hs:
        raise ValueError(f"{fname}(): weights of shapes {tuple(w_ih.shape)} and "
                         f"{tuple(w_hh.shape)} are not ({gates}*hidden, input) and "
                         f"({gates}*hidden, hidden)")
    if input.ndim not in (1, 2) or input.shape[-1] != w_ih.shape[1]:
        raise ValueError(f"{fname}(): input of shape {tuple(input.shape)} does not match "
                         f"input_size {w_ih.shape[1]}")
    if tuple(hx.shape) != tuple(input.shape[:-1]) + (hs,):
        raise ValueError(f"{fname}(): hidden state of shape {tuple(hx.shape)} does not match "
                         f"input of shape {tuple(input.shape)} and hidden_size {hs}")


def rnn_tanh_cell(input: Any, hx: Any, w_ih: Any, w_hh: Any, b_ih: Any = None,  # noqa: A002
                  b_hh: Any = None) -> Any:
    """``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)``."""
    xp = namespace(input, hx, w_ih, w_hh)
    _check_cell(input, hx, w_ih, w_hh, 1, "rnn_tanh_cell")
    return _rnn_step(xp, linear(input, w_ih, b_ih), hx, w_hh, b_hh, "tanh")


def rnn_relu_cell(input: Any, hx: Any, w_ih: Any, w_hh: Any, b_ih: Any = None,  # noqa: A002
                  b_hh: Any = None) -> Any:
    """``h' = relu(x W_ih^T + b_ih + h W_hh^T + b_hh)``."""
    xp = namespace(input, hx, w_ih, w_hh)
    _check_cell(input, hx, w_ih, w_hh, 1, "rnn_relu_cell")
    return _rnn_step(xp, linear(input, w_ih, b_ih), hx, w_hh, b_hh, "relu")


def lstm_cell(input: Any, hx: tuple[Any, Any], w_ih: Any, w_hh: Any, b_ih: Any = None,  # noqa: A002
              b_hh: Any = None) -> tuple[Any, Any]:
    """One LSTM step: returns ``(h', c')``; gates ``i, f, g, o`` stacked in the weights."""
    h, c = hx
    xp = namespace(input, h, c, w_ih, w_hh)
    _check_cell(input, h, w_ih, w_hh, 4, "lstm_cell")
    if tuple(c.shape) != tuple(h.shape):
        raise ValueError(f"lstm_cell(): cell state of shape {tuple(c.shape)} differs from "
                         f"hidden state of shape {tuple(h.shape)}")
    return _lstm_step(xp, linear(input, w_ih, b_ih), h, c, w_hh, b_hh, _lstm_consts(xp, h))


def gru_cell(input: Any, hx: Any, w_ih: Any, w_hh: Any, b_ih: Any = None,  # noqa: A002
             b_hh: Any = None) -> Any:
    """One GRU step: ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``,
    ``h' = (1 - z) * n + z * h`` with gates ``r, z, n`` stacked in the weights."""
    xp = namespace(input, hx, w_ih, w_hh)
    _check_cell(input, hx, w_ih, w_hh, 3, "gru_cell")
    return _gru_step(xp, linear(input, w_ih, b_ih), hx, w_hh, b_hh)


def run_layer(mode: str, x: Any, h0: Any, c0: Any, w_ih: Any, w_hh: Any, b_ih: Any,
              b_hh: Any, reverse: bool) -> tuple[Any, Any, Any]:
    """One direction of one layer over a ``(L, N, in)`` sequence: returns the
    ``(L, N, hidden)`` outputs, the last hidden state and (LSTM) the last cell state."""
    xp = namespace(x, h0, w_ih, w_hh)
    if mode != "GRU" and b_ih is not None and b_hh is not None:
        b_ih, b_hh = b_ih + b_hh, None  # both biases enter the same sum: add them once
    # (L, N, gates * hidden): one product for all steps, split into steps by one op
    gi_steps = xp.unstack(linear(x, w_ih, b_ih), axis=0)
    steps = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
    outs: list[Any] = [None] * x.shape[0]
    h, c = h0, c0
    consts = _lstm_consts(xp, h0) if mode == "LSTM" else None
    for t in steps:
        gi = gi_steps[t]
        if mode == "LSTM":
            h, c = _lstm_step(xp, gi, h, c, w_hh, b_hh, consts)
        elif mode == "GRU":
            h = _gru_step(xp, gi, h, w_hh, b_hh)
        else:
            h = _rnn_step(xp, gi, h, w_hh, b_hh, "tanh" if mode == "RNN_TANH" else "relu")
        outs[t] = h
    return xp.stack(outs, axis=0), h, c
