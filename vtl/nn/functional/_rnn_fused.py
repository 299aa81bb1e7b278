"""The pointwise parts of the LSTM and GRU cells as single recorded ops.

``lstm_cell_pointwise(gates, c_prev, hidden_gates=None) -> (h, c)`` takes the
pre-activation gates ``z = gates (+ hidden_gates)`` of shape ``(..., 4 * H)``
(PyTorch's order ``i, f, g, o``) and computes::

    i, f, o = sigmoid(z_i), sigmoid(z_f), sigmoid(z_o);  g = tanh(z_g)
    c = f * c_prev + i * g;  h = o * tanh(c)

``gru_cell_pointwise(gates, hidden_gates, h_prev) -> h`` takes the input and
hidden projections (each ``(..., 3 * H)``, order ``r, z, n``, biases included)::

    r = sigmoid(x_r + h_r);  z = sigmoid(x_z + h_z);  n = tanh(x_n + r * h_n)
    h = (1 - z) * n + z * h_prev

On vtl tensors each is one graph node. The forward keeps the activated gates (and
``tanh(c)``) for the backward, which in plain backward runs on the raw arrays in a few array
operations; with ``create_graph=True`` the rule is written with vtl functions (recomputing
the activations from the inputs), so higher-order gradients work. A backend may provide both
directions as fused kernels (``backend.kernel("lstm_cell")`` /
``backend.kernel("gru_cell")``; the contracts are ``LstmCellKernel``/``GruCellKernel`` in
``vtl.backends.kernels``); otherwise the portable array-API code runs. On other arrays
(NumPy, CuPy, array-api-strict) the functions compute the forward only. Sigmoids are ``(1 +
tanh(x / 2)) / 2``: stable for any ``x``.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from ..._ops._core import needs_grad, new, plain_grad, record, record_multi, same_device
from ..._tensor import Tensor
from ...autograd import grad_mode
from ...backends._dtypes import kind as _dkind
from ._utils import namespace

__all__ = ["gru_cell_pointwise", "gru_layer", "lstm_cell_pointwise", "lstm_layer"]

_grad = grad_mode.state


def _check(fname: str, gates: Any, state: Any, hidden_gates: Any, k: int) -> int:
    shape = tuple(state.shape)
    if len(shape) == 0:
        raise ValueError(f"{fname}(): the state must have at least 1 dimension, got a 0-d one")
    hs = shape[-1]
    want = shape[:-1] + (k * hs,)
    if tuple(gates.shape) != want:
        raise ValueError(f"{fname}(): gates of shape {tuple(gates.shape)} do not match the "
                         f"state of shape {shape} (expected {want})")
    if hidden_gates is not None and tuple(hidden_gates.shape) != want:
        raise ValueError(f"{fname}(): hidden_gates of shape {tuple(hidden_gates.shape)} "
                         f"differ from gates of shape {want}")
    for name, a in (("gates", gates), ("hidden_gates", hidden_gates), ("state", state)):
        if a is not None and a.dtype != gates.dtype:
            raise TypeError(f"{fname}(): {name} has dtype {a.dtype}, gates have dtype "
                            f"{gates.dtype}; all must share one real floating dtype")
    return hs


def _tensors(fname: str, *xs: Any) -> Any:
    ts = [x for x in xs if x is not None]
    for x in ts:
        if not isinstance(x, Tensor):
            raise TypeError(f"{fname}() cannot mix vtl.Tensor and {type(x).__name__} "
                            "arguments; convert them with vtl.asarray(...)")
    dev = same_device(fname, ts)
    if _dkind(ts[0]._data.dtype) != "f":
        raise TypeError(f"{fname}() needs a real floating dtype, got {ts[0].dtype}")
    return dev


def _sig(xp: Any, x: Any) -> Any:
    return 0.5 * xp.tanh(0.5 * x) + 0.5


def _chunks(xp: Any, z: Any, k: int, hs: int) -> tuple[Any, ...]:
    """The ``k`` gate chunks of ``z`` (``(..., k * hs)``) as views of shape ``(..., hs)``."""
    zr = xp.reshape(z, tuple(z.shape[:-1]) + (k, hs))
    return tuple(zr[..., j, :] for j in range(k))


# -- LSTM --------------------------------------------------------------------------------------
def _lstm_forward(xp: Any, z: Any, z2: Any, c_prev: Any, hs: int,
                  own: bool = False) -> tuple[Any, Any, Any, Any]:
    """Portable forward on raw arrays: ``(h, c, (i, f, g, o), tanh(c))``. ``own``: ``z``
    is a temporary that may be overwritten (fewer large allocations)."""
    zr = xp.reshape(z, tuple(z.shape[:-1]) + (4, hs))
    a = zr + xp.reshape(z2, zr.shape) if z2 is not None else (zr if own else None)
    g = xp.tanh((zr if a is None else a)[..., 2, :])
    if a is None:
        a = zr * 0.5
    else:
        a *= 0.5
    s = xp.tanh(a)  # sigmoid of all four chunks (the g slot goes unused)
    s *= 0.5
    s += 0.5
    i, f, o = s[..., 0, :], s[..., 1, :], s[..., 3, :]
    c = f * c_prev
    c += i * g
    tc = xp.tanh(c)
    return o * tc, c, (i, f, g, o), tc


def _lstm_backward(xp: Any, act: tuple, c_prev: Any, tc: Any, dh: Any, dc: Any, hs: int,
                   need_dc_prev: bool, out: Any = None) -> tuple[Any, Any]:
    """Portable plain backward on raw arrays: ``(d_gates (..., 4 * hs), d_c_prev)``;
    ``d_gates`` is written into ``out`` when given."""
    i, f, g, o = act
    if dh is not None:
        do = dh * tc * (o - o * o)
        dct = dh * o * (1.0 - tc * tc)
        if dc is not None:
            dct = dct + dc
    else:
        do = xp.zeros_like(tc)
        dct = dc
    di = dct * g * (i - i * i)
    df = dct * c_prev * (f - f * f)
    dg = dct * i * (1.0 - g * g)
    if out is None:
        dz = xp.reshape(xp.stack([di, df, dg, do], axis=-2), tuple(tc.shape[:-1]) + (4 * hs,))
    else:
        dz = out
        for k, d in enumerate((di, df, dg, do)):
            out[..., k * hs:(k + 1) * hs] = d
    return dz, (dct * f if need_dc_prev else None)


def lstm_cell_pointwise(gates: Any, c_prev: Any, hidden_gates: Any = None) -> tuple[Any, Any]:
    """The elementwise part of an LSTM step: ``(h, c)`` from the pre-activation
    ``gates (+ hidden_gates)`` (``(..., 4 * H)``, order ``i, f, g, o``) and the
    previous cell state ``c_prev`` (``(..., H)``). One graph node on vtl tensors."""
    fname = "lstm_cell_pointwise"
    hs = _check(fname, gates, c_prev, hidden_gates, 4)
    if isinstance(gates, Tensor) or isinstance(c_prev, Tensor) or isinstance(hidden_gates,
                                                                            Tensor):
        return _lstm_tensor(fname, gates, c_prev, hidden_gates, hs)
    xp = namespace(gates, c_prev, hidden_gates)
    h, c, _, _ = _lstm_forward(xp, gates, hidden_gates, c_prev, hs)
    return h, c


def _lstm_tensor(fname: str, gates: Tensor, c_prev: Tensor, hg: Tensor | None,
                 hs: int) -> tuple[Tensor, Tensor]:
    dev = _tensors(fname, gates, c_prev, hg)
    hgd = None if hg is None else hg._data
    kern = dev.backend.kernel("lstm_cell")
    if kern is not None and not kern.supports(gates._data.dtype):
        kern = None
    if kern is not None:
        h, c, act, tc = kern.forward(gates._data, hgd, c_prev._data)
    else:
        h, c, act, tc = _lstm_forward(dev.xp, gates._data, hgd, c_prev._data, hs)
    if not needs_grad(gates, c_prev, hg):
        return new(h, dev), new(c, dev)
    inputs = (gates, c_prev) if hg is None else (gates, c_prev, hg)
    vjp = partial(_lstm_vjp, kern, gates, c_prev, hg, act, tc, hs)
    return record_multi((h, c), dev, "LstmCellBackward", inputs, vjp, saved=inputs)


def _lstm_vjp(kern: Any, gates: Tensor, c_prev: Tensor, hg: Tensor | None, act: Any, tc: Any,
              hs: int, gs: list, _: Any) -> tuple:
    dh, dc = gs
    need_dc = c_prev._requires_grad
    if not _grad.enabled:  # plain backward: raw arrays
        dev = (dh if dh is not None else dc)._device
        dhd = None if dh is None else dh._data
        dcd = None if dc is None else dc._data
        if kern is not None:
            dz, dcp = kern.backward(act, c_prev._data, tc, dhd, dcd, need_dc)
        else:
            dz, dcp = _lstm_backward(dev.xp, act, c_prev._data, tc, dhd, dcd, hs, need_dc)
        gz = new(dz, dev)
        gc = None if dcp is None else plain_grad(dcp, c_prev, dev)
        if hg is None:
            return gz, gc
        return gz, gc, (gz if hg._requires_grad else None)
    return _lstm_vjp_graph(gates, c_prev, hg, dh, dc, hs)


def _lstm_vjp_graph(gates: Tensor, c_prev: Tensor, hg: Tensor | None, dh: Any, dc: Any,
                    hs: int, need_c: bool | None = None) -> tuple:
    """The rule with vtl functions (differentiable: ``create_graph=True``)."""
    import vtl

    z = gates if hg is None else gates + hg
    zi, zf, zg, zo = _chunks(vtl, z, 4, hs)
    i, f, o = _sig(vtl, zi), _sig(vtl, zf), _sig(vtl, zo)
    g = vtl.tanh(zg)
    c = f * c_prev + i * g
    tc = vtl.tanh(c)
    if dh is not None:
        do = dh * tc
        dct = dh * o * (1.0 - tc * tc)
        if dc is not None:
            dct = dct + dc
    else:
        do = vtl.zeros_like(tc)
        dct = dc
    di = dct * g * (i * (1.0 - i))
    df = dct * c_prev * (f * (1.0 - f))
    dg = dct * i * (1.0 - g * g)
    do = do * (o * (1.0 - o))
    dz = vtl.reshape(vtl.stack([di, df, dg, do], axis=-2), tuple(gates.shape))
    gc = dct * f if (c_prev._requires_grad if need_c is None else need_c) else None
    if hg is None:
        return dz, gc
    return dz, gc, (dz if hg._requires_grad else None)


# -- GRU ---------------------------------------------------------------------------------------
def _gru_forward(xp: Any, x: Any, hgate: Any, h_prev: Any, hs: int) -> tuple[Any, Any]:
    """Portable forward on raw arrays: ``(h, (r, z, n, h_n))``."""
    xr, xz, xn = _chunks(xp, x, 3, hs)
    hr, hz, hn = _chunks(xp, hgate, 3, hs)
    r = _sig(xp, xr + hr)
    z = _sig(xp, xz + hz)
    n = xp.tanh(xn + r * hn)
    h = n + z * (h_prev - n)
    return h, (r, z, n, hn)


def _gru_backward(xp: Any, act: tuple, h_prev: Any, dh: Any, hs: int,
                  need_dh_prev: bool) -> tuple[Any, Any, Any]:
    """Portable plain backward: ``(d_gates, d_hidden_gates, d_h_prev)``."""
    r, z, n, hn = act
    dzp = dh * (h_prev - n) * (z * (1.0 - z))
    dnp = (dh - dh * z) * (1.0 - n * n)
    drp = dnp * hn * (r * (1.0 - r))
    lead = tuple(dh.shape[:-1])
    dx = xp.reshape(xp.stack([drp, dzp, dnp], axis=-2), lead + (3 * hs,))
    dhg = xp.reshape(xp.stack([drp, dzp, dnp * r], axis=-2), lead + (3 * hs,))
    return dx, dhg, (dh * z if need_dh_prev else None)


def gru_cell_pointwise(gates: Any, hidden_gates: Any, h_prev: Any) -> Any:
    """The elementwise part of a GRU step: ``h`` from the input projection ``gates``
    and the hidden projection ``hidden_gates`` (each ``(..., 3 * H)`` with its bias,
    order ``r, z, n``) and the previous hidden state ``h_prev`` (``(..., H)``)."""
    fname = "gru_cell_pointwise"
    if hidden_gates is None:
        raise TypeError(f"{fname}(): hidden_gates is required")
    hs = _check(fname, gates, h_prev, hidden_gates, 3)
    if isinstance(gates, Tensor) or isinstance(h_prev, Tensor) or isinstance(hidden_gates,
                                                                            Tensor):
        return _gru_tensor(fname, gates, hidden_gates, h_prev, hs)
    xp = namespace(gates, hidden_gates, h_prev)
    return _gru_forward(xp, gates, hidden_gates, h_prev, hs)[0]


def _gru_tensor(fname: str, gates: Tensor, hg: Tensor, h_prev: Tensor, hs: int) -> Tensor:
    dev = _tensors(fname, gates, hg, h_prev)
    kern = dev.backend.kernel("gru_cell")
    if kern is not None and not kern.supports(gates._data.dtype):
        kern = None
    if kern is not None:
        h, act = kern.forward(gates._data, hg._data, h_prev._data)
    else:
        h, act = _gru_forward(dev.xp, gates._data, hg._data, h_prev._data, hs)
    if not needs_grad(gates, hg, h_prev):
        return new(h, dev)
    inputs = (gates, hg, h_prev)
    vjp = partial(_gru_vjp, kern, gates, hg, h_prev, act, hs)
    return record(h, dev, "GruCellBackward", inputs, vjp, saved=inputs)


def _gru_vjp(kern: Any, gates: Tensor, hg: Tensor, h_prev: Tensor, act: Any, hs: int,
             dh: Tensor, _: Any) -> tuple:
    need_h = h_prev._requires_grad
    if not _grad.enabled:
        dev = dh._device
        if kern is not None:
            dx, dhg, dhp = kern.backward(act, h_prev._data, dh._data, need_h)
        else:
            dx, dhg, dhp = _gru_backward(dev.xp, act, h_prev._data, dh._data, hs, need_h)
        return (new(dx, dev) if gates._requires_grad else None,
                new(dhg, dev) if hg._requires_grad else None,
                None if dhp is None else plain_grad(dhp, h_prev, dev))
    return _gru_vjp_graph(gates, hg, h_prev, dh, hs, need_h)


def _gru_vjp_graph(gates: Tensor, hg: Tensor, h_prev: Tensor, dh: Tensor, hs: int,
                   need_h: bool) -> tuple:
    """The GRU rule with vtl functions (differentiable: ``create_graph=True``)."""
    import vtl

    xr, xz, xn = _chunks(vtl, gates, 3, hs)
    hr, hz, hn = _chunks(vtl, hg, 3, hs)
    r = _sig(vtl, xr + hr)
    z = _sig(vtl, xz + hz)
    n = vtl.tanh(xn + r * hn)
    dzp = dh * (h_prev - n) * (z * (1.0 - z))
    dnp = (dh - dh * z) * (1.0 - n * n)
    drp = dnp * hn * (r * (1.0 - r))
    shape = tuple(gates.shape)
    dx = vtl.reshape(vtl.stack([drp, dzp, dnp], axis=-2), shape)
    dhg = vtl.reshape(vtl.stack([drp, dzp, dnp * r], axis=-2), shape)
    return dx, dhg, (dh * z if need_h else None)


# -- a whole LSTM layer (one direction) as one op ----------------------------------------------
def lstm_layer(gates: Any, h0: Any, c0: Any, w_hh: Any,
               reverse: bool = False) -> tuple[Any, Any, Any]:
    """One direction of one LSTM layer over a sequence: ``(out, h_n, c_n)``.

    ``gates`` are the input projections ``x_t W_ih^T + b`` of all steps,
    ``(L, N, 4 * H)`` (both biases folded in), ``h0``/``c0`` ``(N, H)``, ``w_hh``
    ``(4 * H, H)``; ``out`` is ``(L, N, H)`` in time order (steps run from the last
    to the first with ``reverse``). On vtl tensors this is one graph node whose
    plain backward runs the recurrence on raw arrays (one ``dz @ W_hh`` and the
    fused cell backward per step) and forms the ``W_hh`` gradient as one matrix
    product over all steps.
    """
    fname = "lstm_layer"
    if gates.ndim != 3 or h0.ndim != 2 or gates.shape[0] < 1:
        raise ValueError(f"{fname}(): expected gates of shape (L >= 1, N, 4*H) and states "
                         f"(N, H), got {tuple(gates.shape)} and {tuple(h0.shape)}")
    hs = _check(fname, gates[0, ...], c0, None, 4)
    if tuple(h0.shape) != tuple(c0.shape) or tuple(w_hh.shape) != (4 * hs, hs):
        raise ValueError(f"{fname}(): states of shapes {tuple(h0.shape)} and "
                         f"{tuple(c0.shape)} and w_hh of shape {tuple(w_hh.shape)} do not "
                         f"match hidden size {hs}")
    if isinstance(gates, Tensor) or isinstance(h0, Tensor):
        dev = _tensors(fname, gates, h0, c0, w_hh)
        if w_hh._data.dtype != gates._data.dtype or h0._data.dtype != gates._data.dtype:
            raise TypeError(f"{fname}(): all arguments must share one dtype")
        kern = dev.backend.kernel("lstm_cell")
        if kern is not None and not kern.supports(gates._data.dtype):
            kern = None
        out, hn, cn, state = _layer_forward(dev.xp, kern, gates._data, h0._data, c0._data,
                                            w_hh._data, hs, reverse)
        if not needs_grad(gates, h0, c0, w_hh):
            return new(out, dev), new(hn, dev), new(cn, dev)
        inputs = (gates, h0, c0, w_hh)
        vjp = partial(_layer_vjp, kern, inputs, state, hs, reverse)
        return record_multi((out, hn, cn), dev, "LstmLayerBackward", inputs, vjp,
                            saved=inputs, save_outputs=True)
    xp = namespace(gates, h0, c0, w_hh)
    return _layer_forward(xp, None, gates, h0, c0, w_hh, hs, reverse)[:3]


def _order(n: int, reverse: bool) -> range:
    return range(n - 1, -1, -1) if reverse else range(n)


def _layer_forward(xp: Any, kern: Any, gates: Any, h0: Any, c0: Any, w_hh: Any, hs: int,
                   reverse: bool) -> tuple[Any, Any, Any, tuple]:
    n = gates.shape[0]
    whole = getattr(kern, "layer_forward", None)
    res = None if whole is None else whole(gates, h0, c0, w_hh, reverse)
    if res is not None:  # the kernel ran every step: the same state, taken from its buffers
        h_all, c_all, act_all, tc_all = res
        order = list(_order(n, reverse))
        cprevs = [c0, *(c_all[t, ...] for t in order[:-1])]
        last = order[-1]
        return (h_all, xp.asarray(h_all[last, ...], copy=True),
                xp.asarray(c_all[last, ...], copy=True),
                ([act_all[t, ...] for t in order], [tc_all[t, ...] for t in order], cprevs,
                 (c0, c_all, act_all, tc_all)))
    w_t = xp.matrix_transpose(w_hh)
    outs: list[Any] = [None] * n
    acts, tcs, cprevs = [], [], []
    h, c = h0, c0
    if kern is not None:  # every step writes into slices of whole-sequence buffers
        shape = (n, *h0.shape)
        h_all = xp.empty(shape, dtype=gates.dtype, device=gates.device)
        c_all = xp.empty(shape, dtype=gates.dtype, device=gates.device)
        tc_all = xp.empty(shape, dtype=gates.dtype, device=gates.device)
        act_all = xp.empty(gates.shape, dtype=gates.dtype, device=gates.device)
    step = getattr(kern, "step_forward", None)
    prepare = getattr(kern, "recurrent_weight", None)
    w_step = w_hh if step is None or prepare is None else prepare(w_hh)
    for t in _order(n, reverse):
        cprevs.append(c)
        res = None
        if step is not None:  # the recurrent product inside the cell's launch
            res = step(gates[t, ...], h, w_step, c,
                       (h_all[t], c_all[t], act_all[t], tc_all[t]))
        if res is not None:
            h, c, act, tc = res
        else:
            gh = xp.matmul(h, w_t)
            if kern is not None:
                h, c, act, tc = kern.forward(gates[t, ...], gh, c,
                                             out=(h_all[t], c_all[t], act_all[t], tc_all[t]))
            else:
                gh += gates[t, ...]
                h, c, act, tc = _lstm_forward(xp, gh, None, c, hs, own=True)
        acts.append(act)
        tcs.append(tc)
        outs[t] = h
    if kern is not None:  # h_n and c_n of their own, not views of the saved buffers
        h, c = xp.asarray(h, copy=True), xp.asarray(c, copy=True)
        return h_all, h, c, (acts, tcs, cprevs, (c0, c_all, act_all, tc_all))
    return xp.stack(outs, axis=0), h, c, (acts, tcs, cprevs, None)


def _layer_vjp(kern: Any, inputs: tuple, state: tuple, hs: int, reverse: bool, gs: list,
               outs: Any) -> tuple:
    gates, h0, c0, w_hh = inputs
    dout, dhn, dcn = gs
    if _grad.enabled:
        return _layer_vjp_graph(inputs, hs, reverse, dout, dhn, dcn)
    dev = gates._device
    xp = dev.xp
    acts, tcs, cprevs, whole = state
    w = w_hh._data
    out = outs[0]._data
    n = gates.shape[0]
    order = list(_order(n, reverse))
    dod = None if dout is None else dout._data
    dh = None if dhn is None else dhn._data
    dc = None if dcn is None else dcn._data
    need_h0, need_c0 = h0._requires_grad, c0._requires_grad
    whole_backward = getattr(kern, "layer_backward", None)
    res = None if whole_backward is None or whole is None else \
        whole_backward(whole, w, dod, dh, dc, need_c0, reverse)
    if res is not None:  # the kernel ran every step backwards
        dz_all, dc = res
        dh = xp.matmul(dz_all[order[0], ...], w) if need_h0 else None
        return _layer_grads(gates, h0, c0, w_hh, dz_all, out, dh, dc, hs, reverse)
    # every step's gate gradient goes into one buffer
    dz_all = xp.empty(gates._data.shape, dtype=gates._data.dtype, device=out.device)
    step = getattr(kern, "step_backward", None)
    dz_next = None  # a fused step's gate gradient: the next step forms dz_next @ W_hh itself
    for k in range(n - 1, -1, -1):
        t = order[k]
        dh2 = None if dod is None else dod[t, ...]
        if dh is None and dc is None and dh2 is None and dz_next is None:
            dz_all[t, ...] = 0  # no gradient reached this step yet
            continue
        need_c = k > 0 or need_c0
        res = None
        if step is not None:
            res = step(acts[k], cprevs[k], tcs[k], dz_next, w, dh, dh2, dc, need_c, dz_all[t])
        if res is not None:
            dz_next, dc = res
            dh = None
            continue
        if dz_next is not None:  # a declined step after fused ones
            dh = xp.matmul(dz_next, w)
            dz_next = None
        if kern is not None:
            dz, dc = kern.backward(acts[k], cprevs[k], tcs[k], dh, dc, need_c, dh2,
                                   out=dz_all[t])
        else:
            if dh2 is not None:
                dh = dh2 if dh is None else dh + dh2
            dz, dc = _lstm_backward(xp, acts[k], cprevs[k], tcs[k], dh, dc, hs, need_c,
                                    dz_all[t, ...])
        dh = xp.matmul(dz, w) if (k > 0 or need_h0) else None
    if dz_next is not None:
        dh = xp.matmul(dz_next, w) if need_h0 else None
    return _layer_grads(gates, h0, c0, w_hh, dz_all, out, dh, dc, hs, reverse)


def _layer_grads(gates: Any, h0: Any, c0: Any, w_hh: Any, dz_all: Any, out: Any, dh: Any,
                 dc: Any, hs: int, reverse: bool) -> tuple:
    """The layer's four gradients from the gates' ``dz_all`` and ``h0``'s and ``c0``'s
    (``dh``, ``dc``; ``None`` where none reached them)."""
    dev = gates._device
    xp = dev.xp
    n = gates.shape[0]
    need_h0, need_c0 = h0._requires_grad, c0._requires_grad
    g_gates = new(dz_all, dev) if gates._requires_grad else None
    g_w = None
    if w_hh._requires_grad:
        h0d = xp.expand_dims(h0._data, axis=0)
        if n == 1:
            hprev = h0d
        elif reverse:
            hprev = xp.concat([out[1:, ...], h0d], axis=0)
        else:
            hprev = xp.concat([h0d, out[:-1, ...]], axis=0)
        nb = h0.shape[0]
        dzm = xp.reshape(dz_all, (n * nb, 4 * hs))
        g_w = new(xp.matmul(xp.matrix_transpose(dzm), xp.reshape(hprev, (n * nb, hs))), dev)
    g_h0 = None if not need_h0 or dh is None else plain_grad(dh, h0, dev)
    g_c0 = None if not need_c0 or dc is None else plain_grad(dc, c0, dev)
    return g_gates, g_h0, g_c0, g_w


def _layer_vjp_graph(inputs: tuple, hs: int, reverse: bool, dout: Any, dhn: Any,
                     dcn: Any) -> tuple:
    """The rule with vtl functions (``create_graph=True``): the forward states are
    recomputed from the inputs, then the recurrence runs backwards step by step."""
    import vtl

    gates, h0, c0, w_hh = inputs
    n = gates.shape[0]
    order = list(_order(n, reverse))
    w_t = vtl.matrix_transpose(w_hh)
    hprev, cprev, ghs = [], [], []
    h, c = h0, c0
    for t in order:
        hprev.append(h)
        cprev.append(c)
        gh = vtl.matmul(h, w_t)
        ghs.append(gh)
        h, c = lstm_cell_pointwise(gates[t, ...], c, gh)
    dh, dc = dhn, dcn
    dzs: list[Any] = [None] * n
    g_w = None
    for k in range(n - 1, -1, -1):
        t = order[k]
        if dout is not None:
            dh = dout[t, ...] if dh is None else dh + dout[t, ...]
        if dh is None and dc is None:
            dzs[t] = vtl.zeros_like(gates[t, ...])
            continue
        dz, dc = _lstm_vjp_graph(gates[t, ...], cprev[k], ghs[k], dh, dc, hs, True)[:2]
        dzs[t] = dz
        dh = vtl.matmul(dz, w_hh)
        gw = vtl.matmul(vtl.matrix_transpose(dz), hprev[k])
        g_w = gw if g_w is None else g_w + gw
    return (vtl.stack(dzs, axis=0) if gates._requires_grad else None,
            dh if h0._requires_grad else None,
            dc if c0._requires_grad else None,
            g_w if w_hh._requires_grad else None)


# -- a whole GRU layer (one direction) as one op -----------------------------------------------
def gru_layer(gates: Any, h0: Any, w_hh: Any, b_hh: Any = None,
              reverse: bool = False) -> tuple[Any, Any]:
    """One direction of one GRU layer over a sequence: ``(out, h_n)``.

    ``gates`` are the input projections ``x_t W_ih^T + b_ih`` of all steps,
    ``(L, N, 3 * H)``, ``h0`` ``(N, H)``, ``w_hh`` ``(3 * H, H)``, ``b_hh``
    ``(3 * H,)`` or ``None``. One graph node on vtl tensors, as :func:`lstm_layer`.
    """
    fname = "gru_layer"
    if gates.ndim != 3 or h0.ndim != 2 or gates.shape[0] < 1:
        raise ValueError(f"{fname}(): expected gates of shape (L >= 1, N, 3*H) and a state "
                         f"(N, H), got {tuple(gates.shape)} and {tuple(h0.shape)}")
    hs = _check(fname, gates[0, ...], h0, None, 3)
    if tuple(w_hh.shape) != (3 * hs, hs) or (b_hh is not None
                                             and tuple(b_hh.shape) != (3 * hs,)):
        raise ValueError(f"{fname}(): w_hh of shape {tuple(w_hh.shape)} or b_hh does not "
                         f"match hidden size {hs}")
    if isinstance(gates, Tensor) or isinstance(h0, Tensor):
        dev = _tensors(fname, gates, h0, w_hh, b_hh)
        for a in (w_hh, b_hh):
            if a is not None and a._data.dtype != gates._data.dtype:
                raise TypeError(f"{fname}(): all arguments must share one dtype")
        kern = dev.backend.kernel("gru_cell")
        if kern is not None and not kern.supports(gates._data.dtype):
            kern = None
        out, hn, state = _gru_layer_forward(dev.xp, kern, gates._data, h0._data, w_hh._data,
                                            None if b_hh is None else b_hh._data, hs, reverse)
        inputs = (gates, h0, w_hh) if b_hh is None else (gates, h0, w_hh, b_hh)
        if not needs_grad(*inputs):
            return new(out, dev), new(hn, dev)
        vjp = partial(_gru_layer_vjp, kern, inputs, state, hs, reverse)
        return record_multi((out, hn), dev, "GruLayerBackward", inputs, vjp, saved=inputs,
                            save_outputs=True)
    xp = namespace(gates, h0, w_hh, b_hh)
    return _gru_layer_forward(xp, None, gates, h0, w_hh, b_hh, hs, reverse)[:2]


def _gru_layer_forward(xp: Any, kern: Any, gates: Any, h0: Any, w_hh: Any, b_hh: Any, hs: int,
                       reverse: bool) -> tuple[Any, Any, list]:
    n = gates.shape[0]
    transposed = getattr(kern, "recurrent_weight", None)
    w_t = xp.matrix_transpose(w_hh) if transposed is None else transposed(w_hh)
    outs: list[Any] = [None] * n
    acts = []
    h = h0
    for t in _order(n, reverse):
        gh = xp.matmul(h, w_t)
        if b_hh is not None:
            gh += b_hh
        if kern is not None:
            h, act = kern.forward(gates[t, ...], gh, h)
        else:
            h, act = _gru_forward(xp, gates[t, ...], gh, h, hs)
        acts.append(act)
        outs[t] = h
    return xp.stack(outs, axis=0), h, acts


def _hprev(xp: Any, out: Any, h0: Any, reverse: bool) -> Any:
    """The state each step started from, ``(L, N, H)`` in time order."""
    h0d = xp.expand_dims(h0, axis=0)
    if out.shape[0] == 1:
        return h0d
    if reverse:
        return xp.concat([out[1:, ...], h0d], axis=0)
    return xp.concat([h0d, out[:-1, ...]], axis=0)


def _gru_layer_vjp(kern: Any, inputs: tuple, acts: list, hs: int, reverse: bool, gs: list,
                   outs: Any) -> tuple:
    gates, h0, w_hh = inputs[:3]
    b_hh = inputs[3] if len(inputs) > 3 else None
    dout, dhn = gs
    if _grad.enabled:
        return _gru_layer_vjp_graph(inputs, hs, reverse, dout, dhn)
    dev = gates._device
    xp = dev.xp
    w = w_hh._data
    out = outs[0]._data
    n, nb = gates.shape[0], h0.shape[0]
    order = list(_order(n, reverse))
    hprev = _hprev(xp, out, h0._data, reverse)
    dod = None if dout is None else dout._data
    dh = None if dhn is None else dhn._data
    dxs: list[Any] = [None] * n
    dhgs: list[Any] = [None] * n
    need_h0 = h0._requires_grad
    for k in range(n - 1, -1, -1):
        t = order[k]
        if dod is not None:
            dh = dod[t, ...] if dh is None else dh + dod[t, ...]
        if dh is None:  # no gradient reached this step yet
            dxs[t] = dhgs[t] = xp.zeros(gates.shape[1:], dtype=out.dtype, device=out.device)
            continue
        need = k > 0 or need_h0
        if kern is not None:
            dx, dhg, dhp = kern.backward(acts[k], hprev[t, ...], dh, need)
        else:
            dx, dhg, dhp = _gru_backward(xp, acts[k], hprev[t, ...], dh, hs, need)
        dxs[t], dhgs[t] = dx, dhg
        if need:
            dhp += xp.matmul(dhg, w)
        dh = dhp
    g_gates = new(xp.stack(dxs, axis=0), dev) if gates._requires_grad else None
    g_w = g_b = None
    if w_hh._requires_grad or (b_hh is not None and b_hh._requires_grad):
        dhg_all = xp.reshape(xp.stack(dhgs, axis=0), (n * nb, 3 * hs))
        if w_hh._requires_grad:
            g_w = new(xp.matmul(xp.matrix_transpose(dhg_all),
                                xp.reshape(hprev, (n * nb, hs))), dev)
        if b_hh is not None and b_hh._requires_grad:
            g_b = new(xp.sum(dhg_all, axis=0), dev)
    g_h0 = None if not need_h0 or dh is None else plain_grad(dh, h0, dev)
    res = (g_gates, g_h0, g_w)
    return res if b_hh is None else res + (g_b,)


def _gru_layer_vjp_graph(inputs: tuple, hs: int, reverse: bool, dout: Any, dhn: Any) -> tuple:
    """The rule with vtl functions (``create_graph=True``), as for :func:`lstm_layer`."""
    import vtl

    gates, h0, w_hh = inputs[:3]
    b_hh = inputs[3] if len(inputs) > 3 else None
    n = gates.shape[0]
    order = list(_order(n, reverse))
    w_t = vtl.matrix_transpose(w_hh)
    hprev, ghs = [], []
    h = h0
    for t in order:
        hprev.append(h)
        gh = vtl.matmul(h, w_t)
        if b_hh is not None:
            gh = gh + b_hh
        ghs.append(gh)
        h = gru_cell_pointwise(gates[t, ...], gh, h)
    dh = dhn
    dxs: list[Any] = [None] * n
    g_w = g_b = None
    for k in range(n - 1, -1, -1):
        t = order[k]
        if dout is not None:
            dh = dout[t, ...] if dh is None else dh + dout[t, ...]
        if dh is None:
            dxs[t] = vtl.zeros_like(gates[t, ...])
            continue
        dx, dhg, dhp = _gru_vjp_graph(gates[t, ...], ghs[k], hprev[k], dh, hs, True)
        dxs[t] = dx
        dh = dhp + vtl.matmul(dhg, w_hh)
        gw = vtl.matmul(vtl.matrix_transpose(dhg), hprev[k])
        gb = vtl.sum(dhg, axis=0)
        g_w = gw if g_w is None else g_w + gw
        g_b = gb if g_b is None else g_b + gb
    res = (vtl.stack(dxs, axis=0) if gates._requires_grad else None,
           dh if h0._requires_grad else None,
           g_w if w_hh._requires_grad else None)
    if b_hh is None:
        return res
    return res + (g_b if b_hh._requires_grad else None,)
