"""Recurrent layers: RNN, LSTM, GRU and their single-step cells.

Parameter names and shapes follow PyTorch (``weight_ih_l{k}``, ``weight_hh_l{k}``,
``bias_ih_l{k}``, ``bias_hh_l{k}``, ``_reverse`` for the backward direction; gates
stacked LSTM ``i, f, g, o``, GRU ``r, z, n``), so state dicts load either way.
Every weight and bias starts as ``U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))``.
Inputs are ``(L, N, H_in)``, ``(N, L, H_in)`` with ``batch_first``, unbatched
``(L, H_in)`` or a :class:`vtl.nn.utils.rnn.PackedSequence` (the output is then packed
too, and the final states are each sequence's state after its own last step, in the
caller's batch order; ``batch_first`` does not apply to packed data).
``LSTM(proj_size=P)`` adds ``weight_hr_l{k}`` ``(P, hidden)``
projecting every hidden state to ``P`` features.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import vtl

from ..._tensor import Tensor
from .. import functional as F
from .. import init
from ..functional import _rnn
from ..utils.rnn import PackedSequence, _host_batch_sizes
from ._utils import check_float, describe, empty, type_name
from .module import Module, Parameter

__all__ = ["GRU", "GRUCell", "LSTM", "LSTMCell", "RNN", "RNNBase", "RNNCell", "RNNCellBase"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _what(x: Any) -> str:
    if isinstance(x, Tensor):
        return "a single Tensor"
    if isinstance(x, (tuple, list)):
        return f"a {type(x).__name__} of {len(x)} items"
    return type_name(x)


def _state(module: Module, hx: Any, lstm: bool) -> tuple[Any, Any]:
    """``(h, c)`` from an LSTM's ``(h, c)`` pair (a tuple or list, as PyTorch takes it) or
    ``(h, None)`` from another layer's tensor ``h``; ``TypeError`` for anything else."""
    if lstm:
        if isinstance(hx, Tensor) or not isinstance(hx, (tuple, list)) or len(hx) != 2:
            raise TypeError(f"{describe(module)}: expected hx to be a tuple (h_0, c_0) of two "
                            f"tensors, got {_what(hx)}")
        h, c = hx
        check_float(module, h, "h_0")
        check_float(module, c, "c_0")
        return h, c
    if not isinstance(hx, Tensor):
        raise TypeError(f"{describe(module)}: expected hx to be a vtl.Tensor (h_0), got "
                        f"{_what(hx)}" + ("; only LSTM takes a (h_0, c_0) pair"
                                          if isinstance(hx, (tuple, list)) else ""))
    check_float(module, hx, "hx")
    return hx, None


class RNNBase(Module):
    """The shared machinery of :class:`RNN`, :class:`LSTM` and :class:`GRU`."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        name = type(self).__name__
        if mode not in _GATES:
            raise ValueError(f"{name}: unknown mode {mode!r}, expected one of {list(_GATES)}")
        sizes = {}
        for what, v in (("input_size", input_size), ("hidden_size", hidden_size),
                        ("num_layers", num_layers), ("proj_size", proj_size)):
            try:
                if isinstance(v, bool):
                    raise TypeError
                sizes[what] = operator.index(v)
            except TypeError:
                raise TypeError(f"{name}: {what} should be of type int, got "
                                f"{type(v).__name__}") from None
        input_size, hidden_size = sizes["input_size"], sizes["hidden_size"]
        num_layers, proj_size = sizes["num_layers"], sizes["proj_size"]
        if proj_size < 0:
            raise ValueError(f"{name}: proj_size should be a positive integer or zero to "
                             f"disable projections, got {proj_size}")
        if proj_size and mode != "LSTM":
            raise ValueError(f"{name}: proj_size argument is only supported for LSTM, not RNN "
                             "or GRU")
        if proj_size and proj_size >= hidden_size:
            raise ValueError(f"{name}: proj_size has to be smaller than hidden_size, got "
                             f"proj_size={proj_size} and hidden_size={hidden_size}")
        if not isinstance(dropout, (int, float)) or not 0 <= dropout <= 1 \
                or isinstance(dropout, bool):
            raise ValueError(f"{name}: dropout should be a number in range [0, 1] representing "
                             f"the probability of an element being zeroed, got {dropout!r}")
        if hidden_size <= 0 or num_layers <= 0:
            raise ValueError(f"{name}: hidden_size and num_layers must be positive, got "
                             f"{hidden_size} and {num_layers}")
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        g = _GATES[mode] * hidden_size
        dirs = 2 if bidirectional else 1
        real = proj_size if proj_size else hidden_size  # the width of h
        self._flat_weights_names: list[str] = []
        for layer in range(num_layers):
            for d in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                in_sz = input_size if layer == 0 else real * dirs
                shapes = [("weight_ih", (g, in_sz)), ("weight_hh", (g, real))]
                if bias:
                    shapes += [("bias_ih", (g,)), ("bias_hh", (g,))]
                if proj_size:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                for pname, shape in shapes:
                    setattr(self, pname + sfx, Parameter(empty(shape, device, dtype)))
                    self._flat_weights_names.append(pname + sfx)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0.0
        for p in self.parameters():
            init.uniform_(p, -stdv, stdv)

    def _describe(self) -> str:
        return f"{type(self).__name__}({self.input_size}, {self.hidden_size})"

    def _layer_params(self, layer: int, d: int) -> tuple[Any, Any, Any, Any, Any]:
        sfx = f"_l{layer}" + ("_reverse" if d else "")
        return (getattr(self, "weight_ih" + sfx), getattr(self, "weight_hh" + sfx),
                getattr(self, "bias_ih" + sfx) if self.bias else None,
                getattr(self, "bias_hh" + sfx) if self.bias else None,
                getattr(self, "weight_hr" + sfx) if self.proj_size else None)

    def _check_hidden(self, h: Any, shape: tuple[int, ...], what: str) -> None:
        if tuple(h.shape) != shape:
            raise ValueError(f"{self._describe()}: expected {what} of shape {shape}, got "
                             f"{tuple(h.shape)}")

    def _check_input(self, input: Any) -> None:  # noqa: A002
        check_float(self, input)
        if input.ndim not in (2, 3):
            raise ValueError(f"{self._describe()}: expected a 2-D (unbatched) or 3-D input, "
                             f"got input of shape {tuple(input.shape)}")
        if input.shape[-1] != self.input_size:
            raise ValueError(f"{self._describe()}: expected input with last dimension "
                             f"{self.input_size}, got input of shape {tuple(input.shape)}")
        batched = input.ndim == 3
        if input.shape[1 if batched and self.batch_first else 0] == 0:
            raise ValueError(f"{self._describe()}: expected a sequence of length > 0, got input "
                             f"of shape {tuple(input.shape)}"
                             + (" (batch_first=True: axis 1 is the sequence)"
                                if batched and self.batch_first else ""))

    def _initial_states(self, x: Any, hx: Any, n: int, batched: bool) -> tuple[Any, Any]:
        dirs = 2 if self.bidirectional else 1
        hshape = (self.num_layers * dirs, n, self.proj_size or self.hidden_size)
        cshape = (self.num_layers * dirs, n, self.hidden_size)
        lstm = self.mode == "LSTM"
        if hx is None:
            h0 = vtl.zeros(hshape, dtype=x.dtype, device=x.device)
            c0 = (vtl.zeros(cshape, dtype=x.dtype, device=x.device) if self.proj_size
                  else h0) if lstm else None
            return h0, c0
        h0, c0 = _state(self, hx, lstm)
        if not batched:
            if h0.ndim != 2 or (c0 is not None and c0.ndim != 2):
                raise ValueError(f"{self._describe()}: for an unbatched input expected 2-D "
                                 f"states, got hidden state of shape {tuple(h0.shape)}")
            h0 = vtl.expand_dims(h0, axis=1)
            c0 = None if c0 is None else vtl.expand_dims(c0, axis=1)
        self._check_hidden(h0, hshape, "hidden state h_0" if lstm else "hidden state")
        if lstm:
            self._check_hidden(c0, cshape, "cell state c_0")
        return h0, c0

    def forward(self, input: Any, hx: Any = None) -> tuple[Any, Any]:  # noqa: A002
        """``(output, h_n)`` (LSTM: ``(output, (h_n, c_n))``) for a padded or packed
        input, as PyTorch."""
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        self._check_input(input)
        batched = input.ndim == 3
        x = input
        if not batched:
            x = vtl.expand_dims(x, axis=1)
        elif self.batch_first:
            x = vtl.permute_dims(x, (1, 0, 2))
        h0, c0 = self._initial_states(x, hx, x.shape[1], batched)
        x, hn, cn = self._layers(x, h0, c0, None)
        if not batched:
            x = x[:, 0, :]
            hn = hn[:, 0, :]
            cn = None if cn is None else cn[:, 0, :]
        elif self.batch_first:
            x = vtl.permute_dims(x, (1, 0, 2))
        return x, ((hn, cn) if self.mode == "LSTM" else hn)

    def _forward_packed(self, input: PackedSequence, hx: Any) -> tuple[Any, Any]:  # noqa: A002
        data = input.data
        check_float(self, data, "input.data")
        if data.ndim != 2 or data.shape[-1] != self.input_size:
            raise ValueError(f"{self._describe()}: expected packed data of shape (sum of "
                             f"lengths, {self.input_size}), got {tuple(data.shape)}")
        sizes = _host_batch_sizes(input, type(self).__name__)
        h0, c0 = self._initial_states(data, hx, sizes[0], True)
        if hx is not None and input.sorted_indices is not None:  # into the sorted order
            h0 = vtl.take(h0, input.sorted_indices, axis=1)
            c0 = None if c0 is None else vtl.take(c0, input.sorted_indices, axis=1)
        x, hn, cn = self._layers(data, h0, c0, sizes)
        if input.unsorted_indices is not None:  # back to the caller's order
            hn = vtl.take(hn, input.unsorted_indices, axis=1)
            cn = None if cn is None else vtl.take(cn, input.unsorted_indices, axis=1)
        out = PackedSequence(x, input.batch_sizes, input.sorted_indices,
                             input.unsorted_indices)
        return out, ((hn, cn) if self.mode == "LSTM" else hn)

    def _layers(self, x: Any, h0: Any, c0: Any,
                sizes: list[int] | None) -> tuple[Any, Any, Any]:
        """Every layer and direction over ``x``: ``(L, N, in)``, or packed data with its
        batch ``sizes``; returns the last layer's output and the stacked final states."""
        dirs = 2 if self.bidirectional else 1
        lstm = self.mode == "LSTM"
        h_n, c_n = [], []
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                k = layer * dirs + d
                h, c = h0[k, ...], (c0[k, ...] if lstm else None)
                *ws, w_hr = self._layer_params(layer, d)
                if sizes is None:
                    out, h, c = _rnn.run_layer(self.mode, x, h, c, *ws, reverse=bool(d),
                                               w_hr=w_hr)
                else:
                    out, h, c = _rnn.run_packed_layer(self.mode, x, sizes, h, c, *ws,
                                                      reverse=bool(d), w_hr=w_hr)
                outs.append(out)
                h_n.append(h)
                c_n.append(c)
            x = outs[0] if dirs == 1 else vtl.concat(outs, axis=-1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        return x, vtl.stack(h_n, axis=0), (vtl.stack(c_n, axis=0) if lstm else None)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        return s


class RNN(RNNBase):
    """Elman RNN: ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)`` (or ``relu``
    with ``nonlinearity='relu'``). Returns ``(output, h_n)``."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 nonlinearity: str = "tanh", bias: bool = True, batch_first: bool = False,
                 dropout: float = 0.0, bidirectional: bool = False, device: Any = None,
                 dtype: Any = None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: unknown nonlinearity {nonlinearity!r} (use 'tanh' or "
                             "'relu')")
        self.nonlinearity = nonlinearity
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size,
                         hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         device=device, dtype=dtype)


class LSTM(RNNBase):
    """Long short-term memory; ``forward(input, (h_0, c_0))`` returns
    ``(output, (h_n, c_n))``. Gates ``i, f, g, o``.

    With ``proj_size > 0`` (smaller than ``hidden_size``) each step's hidden state is
    projected, ``h_t = W_hr (o_t * tanh(c_t))`` with ``weight_hr_l{k}`` of shape
    ``(proj_size, hidden_size)``: ``h`` and the output are ``proj_size`` wide (times two
    directions), ``c`` stays ``hidden_size`` wide, and ``weight_hh_l{k}`` is
    ``(4 * hidden_size, proj_size)``. Such a layer runs step by step (portable code).

    Example:
        >>> lstm = nn.LSTM(input_size=4, hidden_size=8, batch_first=True)
        >>> out, (h, c) = lstm(vtl.zeros((2, 5, 4)))
        >>> out.shape, h.shape, c.shape
        ((2, 5, 8), (1, 2, 8), (1, 2, 8))
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, proj_size, device=device, dtype=dtype)


class GRU(RNNBase):
    """Gated recurrent unit; returns ``(output, h_n)``. Gates ``r, z, n``."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, device: Any = None, dtype: Any = None) -> None:
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, device=device, dtype=dtype)


class RNNCellBase(Module):
    """Base of :class:`RNNCell`, :class:`LSTMCell` and :class:`GRUCell`: ``weight_ih``
    ``(num_chunks * hidden_size, input_size)``, ``weight_hh`` ``(num_chunks * hidden_size,
    hidden_size)`` and, with ``bias``, ``bias_ih``/``bias_hh``; all ``U(-1/sqrt(hidden_size),
    1/sqrt(hidden_size))`` at init."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        g = num_chunks * hidden_size
        self.weight_ih = Parameter(empty((g, input_size), device, dtype))
        self.weight_hh = Parameter(empty((g, hidden_size), device, dtype))
        if bias:
            self.bias_ih = Parameter(empty((g,), device, dtype))
            self.bias_hh = Parameter(empty((g,), device, dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0.0
        for p in self.parameters():
            init.uniform_(p, -stdv, stdv)

    def _describe(self) -> str:
        return f"{type(self).__name__}({self.input_size}, {self.hidden_size})"

    def _prepare(self, input: Any) -> tuple[bool, Any]:  # noqa: A002
        check_float(self, input)
        if input.ndim not in (1, 2) or input.shape[-1] != self.input_size:
            raise ValueError(f"{self._describe()}: expected a 1-D or 2-D input with last dimension "
                             f"{self.input_size}, got input of shape {tuple(input.shape)}")
        return input.ndim == 2, input

    def _zeros(self, input: Any) -> Any:  # noqa: A002
        return vtl.zeros(tuple(input.shape[:-1]) + (self.hidden_size,), dtype=input.dtype,
                         device=input.device)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        return s if self.bias else s + ", bias=False"


class _CellBase(RNNCellBase):
    _gates = 1

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__(input_size, hidden_size, bias, self._gates, device, dtype)


class RNNCell(_CellBase):
    """One Elman RNN step: ``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)``."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device: Any = None, dtype: Any = None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNNCell: unknown nonlinearity {nonlinearity!r}")
        super().__init__(input_size, hidden_size, bias, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Any, hx: Any = None) -> Any:  # noqa: A002
        self._prepare(input)
        h = self._zeros(input) if hx is None else _state(self, hx, False)[0]
        fn = _rnn.rnn_tanh_cell if self.nonlinearity == "tanh" else _rnn.rnn_relu_cell
        return fn(input, h, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)


class LSTMCell(_CellBase):
    """One LSTM step: ``forward(input, (h, c))`` returns ``(h', c')``."""

    _gates = 4

    def forward(self, input: Any, hx: Any = None) -> tuple[Any, Any]:  # noqa: A002
        self._prepare(input)
        if hx is None:
            z = self._zeros(input)
            hx = (z, z)
        else:
            hx = _state(self, hx, True)
        return _rnn.lstm_cell(input, hx, self.weight_ih, self.weight_hh, self.bias_ih,
                              self.bias_hh)


class GRUCell(_CellBase):
    """One GRU step: returns ``h'``."""

    _gates = 3

    def forward(self, input: Any, hx: Any = None) -> Any:  # noqa: A002
        self._prepare(input)
        h = self._zeros(input) if hx is None else _state(self, hx, False)[0]
        return _rnn.gru_cell(input, h, self.weight_ih, self.weight_hh, self.bias_ih,
                             self.bias_hh)
