"""Recurrent cells (PyTorch's gate layouts) and the loop over time used by
``nn.RNN``/``nn.LSTM``/``nn.GRU``.

Gate order in the stacked weights: LSTM ``i, f, g, o``; GRU ``r, z, n``. The
input projection of the whole sequence is one matrix product; the loop then
adds the recurrent projection step by step. Few recorded ops per step: the
recurrent projection is one ``linear`` and the LSTM/GRU gate arithmetic one
fused op (:mod:`._rnn_fused`), which a backend may run as one kernel each way.
"""

from __future__ import annotations

from typing import Any

from ... import _autocast
from ._rnn_fused import gru_cell_pointwise, gru_layer, lstm_cell_pointwise, lstm_layer
from ._utils import namespace
from .activation import relu
from .linear import linear

__all__ = ["gru_cell", "lstm_cell", "rnn_relu_cell", "rnn_tanh_cell"]


def _lstm_step(gi: Any, h: Any, c: Any, w_hh: Any, b_hh: Any) -> tuple[Any, Any]:
    return lstm_cell_pointwise(gi, c, linear(h, w_hh, b_hh))


def _gru_step(gi: Any, h: Any, w_hh: Any, b_hh: Any) -> Any:
    return gru_cell_pointwise(gi, linear(h, w_hh, b_hh), h)


def _rnn_step(xp: Any, gi: Any, h: Any, w_hh: Any, b_hh: Any, nonlinearity: str) -> Any:
    pre = gi + linear(h, w_hh, b_hh)
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
    _check_cell(input, h, w_ih, w_hh, 4, "lstm_cell")
    if tuple(c.shape) != tuple(h.shape):
        raise ValueError(f"lstm_cell(): cell state of shape {tuple(c.shape)} differs from "
                         f"hidden state of shape {tuple(h.shape)}")
    return _lstm_step(linear(input, w_ih, b_ih), h, c, w_hh, b_hh)


def gru_cell(input: Any, hx: Any, w_ih: Any, w_hh: Any, b_ih: Any = None,  # noqa: A002
             b_hh: Any = None) -> Any:
    """One GRU step: ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``,
    ``h' = (1 - z) * n + z * h`` with gates ``r, z, n`` stacked in the weights."""
    _check_cell(input, hx, w_ih, w_hh, 3, "gru_cell")
    return _gru_step(linear(input, w_ih, b_ih), hx, w_hh, b_hh)


def _step(xp: Any, mode: str, gi: Any, h: Any, c: Any, w_hh: Any, b_hh: Any,
          w_hr: Any) -> tuple[Any, Any]:
    """One time step of any mode: ``(h', c')`` (``c'`` is ``None`` but for LSTM)."""
    if mode == "LSTM":
        h, c = _lstm_step(gi, h, c, w_hh, b_hh)
        return (h if w_hr is None else linear(h, w_hr)), c
    if mode == "GRU":
        return _gru_step(gi, h, w_hh, b_hh), None
    return _rnn_step(xp, gi, h, w_hh, b_hh, "tanh" if mode == "RNN_TANH" else "relu"), None


def _fold_biases(mode: str, b_ih: Any, b_hh: Any) -> tuple[Any, Any]:
    if mode != "GRU" and b_ih is not None and b_hh is not None:
        return b_ih + b_hh, None  # both biases enter the same sum: add them once
    return b_ih, b_hh


def run_layer(mode: str, x: Any, h0: Any, c0: Any, w_ih: Any, w_hh: Any, b_ih: Any,
              b_hh: Any, reverse: bool, w_hr: Any = None) -> tuple[Any, Any, Any]:
    """One direction of one layer over a ``(L, N, in)`` sequence: returns the
    ``(L, N, hidden)`` outputs, the last hidden state and (LSTM) the last cell state.

    ``w_hr`` (LSTM only, ``(proj_size, hidden)``) projects each step's hidden state:
    ``h_t = W_hr (o_t * tanh(c_t))``; the outputs and ``h`` are then ``proj_size`` wide.
    Such a layer runs step by step (the fused LSTM layer has no projection).
    """
    xp = namespace(x, h0, w_ih, w_hh)
    b_ih, b_hh = _fold_biases(mode, b_ih, b_hh)
    if mode == "LSTM" and w_hr is None and x.shape[0] > 0:
        # the whole recurrence is one op (one graph node, raw-array backward)
        return lstm_layer(linear(x, w_ih, b_ih if b_ih is not None else b_hh), h0, c0, w_hh,
                          reverse)
    if mode == "GRU" and x.shape[0] > 0:
        out, h = gru_layer(linear(x, w_ih, b_ih), h0, w_hh, b_hh, reverse)
        return out, h, None
    # (L, N, gates * hidden): one product for all steps, split into steps by one op
    gi_steps = xp.unstack(linear(x, w_ih, b_ih), axis=0)
    steps = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
    outs: list[Any] = [None] * x.shape[0]
    h, c = h0, c0
    for t in steps:
        h, c = _step(xp, mode, gi_steps[t], h, c, w_hh, b_hh, w_hr)
        outs[t] = h
    return xp.stack(outs, axis=0), h, c


def run_packed_layer(mode: str, data: Any, batch_sizes: list[int], h0: Any, c0: Any,
                     w_ih: Any, w_hh: Any, b_ih: Any, b_hh: Any, reverse: bool,
                     w_hr: Any = None) -> tuple[Any, Any, Any]:
    """One direction of one layer over a packed sequence: returns the packed outputs
    ``(sum(batch_sizes), hidden)``, and each sequence's final hidden (and LSTM cell) state,
    ``(batch_sizes[0], hidden)``.

    ``data`` holds the steps one after another, step ``t`` being the ``batch_sizes[t]``
    (non-increasing) longest sequences, as :class:`vtl.nn.utils.rnn.PackedSequence` lays
    them out. Step ``t`` runs on that many rows: forwards, a sequence's final state is the
    one after its own last step; backwards (``reverse``), a sequence starts from its row
    of ``h0`` at its own last step and ends at step 0. Step by step, portable code.
    """
    xp = namespace(data, h0, w_ih, w_hh)
    b_ih, b_hh = _fold_biases(mode, b_ih, b_hh)
    gi = linear(data, w_ih, b_ih)
    n_steps = len(batch_sizes)
    starts = [0] * n_steps
    for t in range(1, n_steps):
        starts[t] = starts[t - 1] + batch_sizes[t - 1]
    outs: list[Any] = [None] * n_steps
    if not reverse:
        h, c = h0, c0
        h_done: list[Any] = []
        c_done: list[Any] = []
        for t in range(n_steps):
            bs = batch_sizes[t]
            if h.shape[0] > bs:  # the sequences that ended at t - 1 leave the batch
                h = h[:bs, ...]
                c = None if c is None else c[:bs, ...]
            h, c = _step(xp, mode, gi[starts[t]:starts[t] + bs, ...], h, c, w_hh, b_hh, w_hr)
            outs[t] = h
            nxt = batch_sizes[t + 1] if t + 1 < n_steps else 0
            if nxt < bs:  # rows nxt..bs-1 took their last step
                h_done.append(h[nxt:bs, ...])
                if c is not None:
                    c_done.append(c[nxt:bs, ...])
        h_done.reverse()
        c_done.reverse()
        h_n = h_done[0] if len(h_done) == 1 else xp.concat(h_done, axis=0)
        c_n = None
        if c_done:
            c_n = c_done[0] if len(c_done) == 1 else xp.concat(c_done, axis=0)
        return xp.concat(outs, axis=0), h_n, c_n
    h = c = None
    for t in range(n_steps - 1, -1, -1):
        bs = batch_sizes[t]
        have = 0 if h is None else h.shape[0]
        if have < bs:  # rows have..bs-1 start here, from their initial states
            h = h0[have:bs, ...] if h is None else xp.concat([h, h0[have:bs, ...]], axis=0)
            if c0 is not None:
                c = c0[have:bs, ...] if c is None else xp.concat([c, c0[have:bs, ...]], axis=0)
        h, c = _step(xp, mode, gi[starts[t]:starts[t] + bs, ...], h, c, w_hh, b_hh, w_hr)
        outs[t] = h
    return xp.concat(outs, axis=0), h, c


# autocast (vtl.amp): the list each op belongs to
_autocast.apply(
    globals(),
    low_ops=("gru_cell", "lstm_cell", "rnn_relu_cell", "rnn_tanh_cell", "run_layer",
        "run_packed_layer"),
)
