"""``kernels["lstm_cell"]`` and ``kernels["gru_cell"]`` of the CuPy backend (the contracts
are ``LstmCellKernel`` and ``GruCellKernel`` in ``vtl.backends.kernels``).

One ``ElementwiseKernel`` per direction and cell: a thread per element of the ``(..., H)``
state reads its four (three) gate values from the stacked ``(..., k * H)`` gate arrays by
index arithmetic (``raw`` parameters). Sigmoids are ``(1 + tanh(x / 2)) / 2`` as in the
portable code (``vtl/nn/functional/_rnn_fused.py``), whose protocol these classes follow.
Each kernel is described by its parameter lists and a C++ body, so the body can also be
compiled on the host for testing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._codegen import CTYPES

_RNN_PRELUDE = (
    "const ptrdiff_t H_ = (ptrdiff_t)H; const ptrdiff_t n_ = (ptrdiff_t)i / H_;\n"
    "const ptrdiff_t j_ = (ptrdiff_t)i - n_ * H_;\n"
)


def lstm_forward_spec(hidden: bool) -> tuple[list[str], list[str], str]:
    """``(inputs, outputs, body)`` of the LSTM forward kernel (``hidden``: a second gate
    array is added to the first)."""
    ins = ["raw T z", *(["raw T z2"] if hidden else []), "T cprev", "int64 H"]
    outs = ["T h", "T c", "T tc", "raw T act"]
    add = (lambda k: f" + z2[b_ + {k} * H_]") if hidden else (lambda k: "")
    body = _RNN_PRELUDE + "const ptrdiff_t b_ = n_ * 4 * H_ + j_;\nconst T half = 0.5;\n"
    for k, name in enumerate("ifgo"):
        body += f"const T z{name} = z[b_ + {k} * H_]{add(k)};\n"
    body += (
        "const T ig = half * tanh(half * zi) + half;\n"
        "const T fg = half * tanh(half * zf) + half;\n"
        "const T gg = tanh(zg);\n"
        "const T og = half * tanh(half * zo) + half;\n"
        "const T cn = fg * cprev + ig * gg;\n"
        "const T t = tanh(cn);\n"
        "c = cn; tc = t; h = og * t;\n"
        "act[b_] = ig; act[b_ + H_] = fg; act[b_ + 2 * H_] = gg; act[b_ + 3 * H_] = og;\n"
    )
    return ins, outs, body


def lstm_backward_spec(has_dh: bool, has_dc: bool, need_dc_prev: bool,
                       has_dh2: bool = False) -> tuple[list[str], list[str], str]:
    """``(inputs, outputs, body)`` of the LSTM backward kernel (``has_dh2``: a second
    gradient of ``h`` is added to the first)."""
    ins = ["raw T act", "T cprev", "T tc", *(["T dh"] if has_dh else []),
           *(["T dh2"] if has_dh2 else []), *(["T dc"] if has_dc else []), "int64 H"]
    outs = ["raw T dz", *(["T dcp"] if need_dc_prev else [])]
    body = _RNN_PRELUDE + (
        "const ptrdiff_t b_ = n_ * 4 * H_ + j_;\nconst T one = 1;\n"
        "const T ig = act[b_], fg = act[b_ + H_], gg = act[b_ + 2 * H_], "
        "og = act[b_ + 3 * H_];\n"
        "const T t = tc;\n"
    )
    if has_dh:
        body += f"const T dhs = {'dh + dh2' if has_dh2 else 'dh'};\n"
    terms = []
    if has_dh:
        terms.append("dhs * og * (one - t * t)")
    if has_dc:
        terms.append("dc")
    body += f"const T dct = {' + '.join(terms)};\n"
    body += f"const T dot = {'dhs * t' if has_dh else 'T(0)'};\n"
    body += (
        "dz[b_] = dct * gg * (ig * (one - ig));\n"
        "dz[b_ + H_] = dct * cprev * (fg * (one - fg));\n"
        "dz[b_ + 2 * H_] = dct * ig * (one - gg * gg);\n"
        "dz[b_ + 3 * H_] = dot * (og * (one - og));\n"
    )
    if need_dc_prev:
        body += "dcp = dct * fg;\n"
    return ins, outs, body


def gru_forward_spec() -> tuple[list[str], list[str], str]:
    """``(inputs, outputs, body)`` of the GRU forward kernel (``act``: ``r, z, n, h_n``)."""
    body = _RNN_PRELUDE + (
        "const ptrdiff_t b3 = n_ * 3 * H_ + j_, b4 = n_ * 4 * H_ + j_;\nconst T half = 0.5;\n"
        "const T r = half * tanh(half * (x[b3] + hg[b3])) + half;\n"
        "const T zz = half * tanh(half * (x[b3 + H_] + hg[b3 + H_])) + half;\n"
        "const T hn = hg[b3 + 2 * H_];\n"
        "const T nn = tanh(x[b3 + 2 * H_] + r * hn);\n"
        "h = nn + zz * (hprev - nn);\n"
        "act[b4] = r; act[b4 + H_] = zz; act[b4 + 2 * H_] = nn; act[b4 + 3 * H_] = hn;\n"
    )
    return ["raw T x", "raw T hg", "T hprev", "int64 H"], ["T h", "raw T act"], body


def gru_backward_spec(need_dh_prev: bool) -> tuple[list[str], list[str], str]:
    """``(inputs, outputs, body)`` of the GRU backward kernel."""
    body = _RNN_PRELUDE + (
        "const ptrdiff_t b3 = n_ * 3 * H_ + j_, b4 = n_ * 4 * H_ + j_;\nconst T one = 1;\n"
        "const T r = act[b4], zz = act[b4 + H_], nn = act[b4 + 2 * H_], "
        "hn = act[b4 + 3 * H_];\n"
        "const T g = dh;\n"
        "const T dzp = g * (hprev - nn) * (zz * (one - zz));\n"
        "const T dnp = (g - g * zz) * (one - nn * nn);\n"
        "const T drp = dnp * hn * (r * (one - r));\n"
        "dx[b3] = drp; dx[b3 + H_] = dzp; dx[b3 + 2 * H_] = dnp;\n"
        "dhg[b3] = drp; dhg[b3 + H_] = dzp; dhg[b3 + 2 * H_] = dnp * r;\n"
    )
    outs = ["raw T dx", "raw T dhg"]
    if need_dh_prev:
        outs.append("T dhp")
        body += "dhp = g * zz;\n"
    return ["raw T act", "T hprev", "T dh", "int64 H"], outs, body


class _ElementwiseCache:
    def __init__(self, cupy: Any) -> None:
        self._cp = cupy
        self._kernels: dict[tuple, Any] = {}

    def supports(self, dtype: Any) -> bool:
        return np.dtype(dtype) in CTYPES

    def _get(self, spec: Any, *flags: bool) -> Any:
        key = (spec.__name__, *flags)
        kern = self._kernels.get(key)
        if kern is None:
            ins, outs, body = spec(*flags)
            name = "vtl_" + spec.__name__ + "".join(str(int(k)) for k in flags)
            kern = self._kernels[key] = self._cp.ElementwiseKernel(
                ", ".join(ins), ", ".join(outs), body, name)
        return kern


class LstmCell(_ElementwiseCache):
    """``kernels["lstm_cell"]``: the LSTM cell's pointwise part, one launch each way, and
    whole time steps with the recurrent product (:class:`~.lstm_step.LstmSteps`)."""

    def __init__(self, cupy: Any) -> None:
        super().__init__(cupy)
        from .lstm_step import LstmSteps

        self.steps = LstmSteps(cupy)

    def step_forward(self, gates: Any, h: Any, w_hh: Any, c: Any, out: Any) -> Any:
        return self.steps.step_forward(gates, h, w_hh, c, out)

    def step_backward(self, act: Any, c_prev: Any, tc: Any, dz_next: Any, w_hh: Any,
                      dh: Any, dh2: Any, dc: Any, need_dc_prev: bool, out: Any) -> Any:
        return self.steps.step_backward(act, c_prev, tc, dz_next, w_hh, dh, dh2, dc,
                                        need_dc_prev, out)

    def forward(self, z: Any, z2: Any, cprev: Any, out: Any = None
                ) -> tuple[Any, Any, Any, Any]:
        cp = self._cp
        hs = cprev.shape[-1]
        with z.device:
            if out is None:
                h = cp.empty(cprev.shape, dtype=z.dtype)
                c = cp.empty_like(h)
                tc = cp.empty_like(h)
                act = cp.empty(z.shape, dtype=z.dtype)
            else:
                h, c, act, tc = out
            kern = self._get(lstm_forward_spec, z2 is not None)
            if z2 is None:
                kern(z, cprev, hs, h, c, tc, act)
            else:
                kern(z, z2, cprev, hs, h, c, tc, act)
        return h, c, act, tc

    def backward(self, act: Any, cprev: Any, tc: Any, dh: Any, dc: Any,
                 need_dc_prev: bool, dh2: Any = None, out: Any = None) -> tuple[Any, Any]:
        cp = self._cp
        if dh is None:
            dh, dh2 = dh2, None
        with act.device:
            dz = cp.empty(act.shape, dtype=act.dtype) if out is None else out
            dcp = cp.empty(tc.shape, dtype=act.dtype) if need_dc_prev else None
            kern = self._get(lstm_backward_spec, dh is not None, dc is not None, need_dc_prev,
                             dh2 is not None)
            args = [act, cprev, tc, *(a for a in (dh, dh2, dc) if a is not None),
                    tc.shape[-1], dz]
            if need_dc_prev:
                args.append(dcp)
            kern(*args)
        return dz, dcp


class GruCell(_ElementwiseCache):
    """``kernels["gru_cell"]``: the GRU cell's pointwise part, one launch each way."""

    def forward(self, x: Any, hg: Any, hprev: Any) -> tuple[Any, Any]:
        cp = self._cp
        hs = hprev.shape[-1]
        with x.device:
            h = cp.empty(hprev.shape, dtype=x.dtype)
            act = cp.empty(tuple(hprev.shape[:-1]) + (4 * hs,), dtype=x.dtype)
            self._get(gru_forward_spec)(x, hg, hprev, hs, h, act)
        return h, act

    def backward(self, act: Any, hprev: Any, dh: Any,
                 need_dh_prev: bool) -> tuple[Any, Any, Any]:
        cp = self._cp
        hs = hprev.shape[-1]
        with act.device:
            shape = tuple(hprev.shape[:-1]) + (3 * hs,)
            dx = cp.empty(shape, dtype=act.dtype)
            dhg = cp.empty(shape, dtype=act.dtype)
            dhp = cp.empty(hprev.shape, dtype=act.dtype) if need_dh_prev else None
            args = [act, hprev, dh, hs, dx, dhg, *([dhp] if need_dh_prev else [])]
            self._get(gru_backward_spec, need_dh_prev)(*args)
        return dx, dhg, dhp
