"""``kernel("lstm_cell")`` of the NumPy backend (see ``LstmCellKernel`` in
``vtl.backends.kernels``) where numba is installed (the ``vtl[cpu]`` extra): the cell's
pointwise work in two compiled passes and NumPy's vectorized ``tanh`` each way forward,
one compiled pass backward, with the portable path's operations in its order (the same
bits). A layer's time steps form their recurrent product ``h @ W_hh^T`` in the orientation
OpenBLAS runs fastest for their shape (:class:`_LstmRecurrent`), the weight laid out once
per layer call; the LSTM's forward runs all its steps in one loop (``layer_forward``),
checks and buffers set up once.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _compiled
from .nn import _FLOATS

__all__ = ["NumpyGruCell", "NumpyLstmCell"]


def _recurrent_weight(w_hh: Any) -> Any:
    """``W_hh^T`` C-contiguous, formed once per layer call (the kernels'
    ``recurrent_weight``): ``h @ W_hh^T`` then runs faster in OpenBLAS than with the
    transposed view, and lands row-major."""
    return np.ascontiguousarray(np.asarray(w_hh).T)


def _by_columns(rows: int, hs: int) -> bool:
    """Whether an LSTM step's ``h @ W_hh^T`` (``h`` of ``rows x hs``) runs as
    ``(W_hh @ h^T)^T``: OpenBLAS then walks the ``4 * hs`` weight rows as its long side, in
    0.5-0.75x the time from ``hs`` 256 (or 128 with 16 rows and more) on; smaller products
    run faster the other way."""
    return hs >= 256 or (hs >= 128 and rows >= 16)


class _LstmRecurrent:
    """``W_hh`` laid out for the steps' products ``h @ W_hh^T``, formed once per layer call
    (the LSTM kernel's ``recurrent_weight``): ``W_hh`` itself where the products run by
    columns (:func:`_by_columns`), ``W_hh^T`` made contiguous where they run by rows (faster
    than with the transposed view). Both orientations give the same products up to the
    rounding of their sums; one shape always takes the same one."""

    __slots__ = ("_t", "w")

    def __init__(self, w_hh: Any) -> None:
        self.w = np.ascontiguousarray(w_hh)
        self._t: Any = None

    def buffer(self, rows: int) -> Any:
        """A C-contiguous array that :meth:`product` of ``rows`` rows writes into."""
        width, hs = self.w.shape
        shape = (width, rows) if _by_columns(rows, hs) else (rows, width)
        return np.empty(shape, dtype=self.w.dtype)

    def product(self, h: Any, buf: Any) -> Any:
        """``h @ W_hh^T`` written into ``buf`` (from :meth:`buffer`), as a ``(rows, 4H)``
        view."""
        if _by_columns(*h.shape):
            np.matmul(self.w, h.T, out=buf)
            return buf.T
        if self._t is None:
            self._t = np.ascontiguousarray(self.w.T)
        return np.matmul(h, self._t, out=buf)


def _spread(a: Any, shape: tuple[int, ...]) -> Any:
    """``a`` broadcast to ``shape`` (``a`` itself where it has that shape)."""
    return a if a.shape == tuple(shape) else np.broadcast_to(a, shape)


def _rows(a: Any, width: int) -> Any:
    """``a`` as a 2-D ``(rows, width)`` array (a view where the layout allows)."""
    return a.reshape(-1, width) if width else a.reshape(a.size, 0)


def _lstm_rows(g2: Any, hg: Any, with_hg: bool, c_prev: Any, hs: int, z: Any, c: Any,
               tc: Any, h: Any) -> None:
    """The LSTM cell forward on ``(rows, 4H)`` gates and ``(rows, H)`` states, written into
    ``z`` (the activated gates), ``c``, ``tc = tanh(c)`` and ``h``: the portable cell's
    operations in its order."""
    from ._rnn_kernels import lstm_post, lstm_pre

    lstm_pre(g2, hg, with_hg, hs, z)
    np.tanh(z, out=z)
    lstm_post(z, c_prev, hs, c)
    np.tanh(c, out=tc)
    np.multiply(z[:, 3 * hs:], tc, out=h)


class NumpyLstmCell:
    """The LSTM cell's kernel on NumPy arrays (float32, float64) with numba."""

    def supports(self, dtype: Any) -> bool:
        return np.dtype(dtype) in _FLOATS and _compiled.available()

    def forward(self, gates: Any, hidden_gates: Any, c_prev: Any, out: Any = None
                ) -> tuple[Any, Any, Any, Any]:
        hs = c_prev.shape[-1]
        dt = gates.dtype
        if out is None:
            h, c, tc = (np.empty(c_prev.shape, dtype=dt) for _ in range(3))
            act = np.empty(gates.shape, dtype=dt)
        else:  # C-contiguous (the protocol's): their rows below are views
            h, c, act, tc = out
        g2 = _rows(gates, 4 * hs)
        hg = g2 if hidden_gates is None else \
            _rows(_spread(hidden_gates, gates.shape), 4 * hs)
        _lstm_rows(g2, hg, hidden_gates is not None, _rows(_spread(c_prev, c.shape), hs), hs,
                   _rows(act, 4 * hs), _rows(c, hs), _rows(tc, hs), _rows(h, hs))
        return h, c, act, tc

    recurrent_weight = _LstmRecurrent

    def layer_forward(self, gates: Any, h0: Any, c0: Any, w_hh: Any, reverse: bool
                      ) -> tuple[Any, Any, Any, Any] | None:
        """Every time step of ``lstm_layer``: ``(h_all, c_all, act_all, tc_all)``, each step's
        arrays at its index; ``None`` to decline. The operations of :meth:`step_forward`
        in its order (the same bits), with the per-step checks and views done once."""
        if gates.ndim != 3 or h0.ndim != 2 or c0.ndim != 2 or any(
                type(a) is not np.ndarray or a.dtype != gates.dtype
                for a in (gates, h0, c0, w_hh)) or gates.dtype not in _FLOATS:
            return None
        n, rows, width = gates.shape
        hs = width // 4
        dt = gates.dtype
        w = _LstmRecurrent(w_hh)
        h_all, c_all, tc_all = (np.empty((n, rows, hs), dtype=dt) for _ in range(3))
        act_all = np.empty((n, rows, width), dtype=dt)
        buf = w.buffer(rows)
        h, c = h0, c0
        for t in range(n - 1, -1, -1) if reverse else range(n):
            gh = w.product(h, buf)
            _lstm_rows(gates[t], gh, True, c, hs, act_all[t], c_all[t], tc_all[t], h_all[t])
            h, c = h_all[t], c_all[t]
        return h_all, c_all, act_all, tc_all

    def step_forward(self, gates: Any, h: Any, w: _LstmRecurrent, c: Any, out: Any
                     ) -> tuple[Any, Any, Any, Any] | None:
        """One time step of ``lstm_layer`` with its recurrent product ``h @ W_hh^T``, ``w``
        being :meth:`recurrent_weight`'s (``None``: declined for layouts it does not
        take)."""
        if h.ndim != 2 or any(type(a) is not np.ndarray or a.dtype != gates.dtype
                              for a in (gates, h, w.w, c, *out)):
            return None
        return self.forward(gates, w.product(h, w.buffer(h.shape[0])), c, out)

    def backward(self, act: Any, c_prev: Any, tc: Any, dh: Any, dc: Any,
                 need_dc_prev: bool, dh2: Any = None, out: Any = None) -> tuple[Any, Any]:
        from ._rnn_kernels import lstm_backward

        hs = tc.shape[-1]
        dt = act.dtype
        dz = np.empty(act.shape, dtype=dt) if out is None else out
        dcp = np.empty(tc.shape, dtype=dt) if need_dc_prev else None
        shape = tc.shape

        def rows(a: Any) -> Any:
            return _rows(_spread(a, shape), hs)

        t2 = rows(tc)
        flags = np.array([dh is not None, dh2 is not None, dc is not None, need_dc_prev])
        lstm_backward(_rows(act, 4 * hs), rows(c_prev), t2,
                      t2 if dh is None else rows(dh), t2 if dh2 is None else rows(dh2),
                      t2 if dc is None else rows(dc), flags, hs, _rows(dz, 4 * hs),
                      np.empty((1, 1), dt) if dcp is None else _rows(dcp, hs))
        return dz, dcp


class NumpyGruCell:
    """The GRU cell's kernel on NumPy arrays (float32, float64) with numba: three compiled
    passes around NumPy's ``tanh`` forward, one pass backward, the portable cell's
    operations in its order (the same bits). ``act`` is ``(..., 4H)``: ``r, z, n, h_n``."""

    def supports(self, dtype: Any) -> bool:
        return np.dtype(dtype) in _FLOATS and _compiled.available()

    recurrent_weight = staticmethod(_recurrent_weight)

    def forward(self, gates: Any, hidden_gates: Any, h_prev: Any) -> tuple[Any, Any]:
        from ._rnn_kernels import gru_mid, gru_post, gru_pre

        hs = h_prev.shape[-1]
        dt = gates.dtype
        shape = np.broadcast_shapes(gates.shape[:-1], hidden_gates.shape[:-1],
                                    h_prev.shape[:-1])
        act = np.empty((*shape, 4 * hs), dtype=dt)
        h = np.empty((*shape, hs), dtype=dt)
        a2 = _rows(act, 4 * hs)
        x2 = _rows(_spread(gates, (*shape, 3 * hs)), 3 * hs)
        gru_pre(x2, _rows(_spread(hidden_gates, (*shape, 3 * hs)), 3 * hs), hs, a2)
        np.tanh(a2[:, :2 * hs], out=a2[:, :2 * hs])
        gru_mid(x2, hs, a2)
        np.tanh(a2[:, 2 * hs:3 * hs], out=a2[:, 2 * hs:3 * hs])
        gru_post(a2, _rows(_spread(h_prev, h.shape), hs), hs, _rows(h, hs))
        return h, act

    def backward(self, act: Any, h_prev: Any, dh: Any,
                 need_dh_prev: bool) -> tuple[Any, Any, Any]:
        from ._rnn_kernels import gru_backward

        hs = act.shape[-1] // 4
        dt = act.dtype
        lead = act.shape[:-1]
        dx = np.empty((*lead, 3 * hs), dtype=dt)
        dhg = np.empty((*lead, 3 * hs), dtype=dt)
        dhp = np.empty((*lead, hs), dtype=dt) if need_dh_prev else None
        gru_backward(_rows(act, 4 * hs), _rows(_spread(h_prev, (*lead, hs)), hs),
                     _rows(_spread(dh, (*lead, hs)), hs), hs, need_dh_prev,
                     _rows(dx, 3 * hs), _rows(dhg, 3 * hs),
                     np.empty((1, 1), dt) if dhp is None else _rows(dhp, hs))
        return dx, dhg, dhp
