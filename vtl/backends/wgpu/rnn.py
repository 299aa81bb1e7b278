"""``kernel("lstm_cell")`` and ``kernel("gru_cell")`` of the wgpu backend (the contracts
are ``LstmCellKernel``/``GruCellKernel`` in ``vtl.backends.kernels``): the cells'
pointwise parts in one dispatch each way (``wgsl/nn/lstm_fwd.wgsl``, ``lstm_bwd.wgsl``,
``gru_fwd.wgsl``, ``gru_bwd.wgsl``), where the portable code takes about twenty.

A thread per element of the ``(N, H)`` state reads its gates from the stacked ``(N, kH)``
arrays, as the CuPy kernels do; ``tanh`` is the body of the library's unary
``tanh`` (float64 through ``math64.wgsl``), shared with the sigmoid (``_ACTIVATIONS``).
A buffer may not be bound for reading and for writing in one dispatch: the previous cell
state, which a layer keeps in the same whole-sequence buffer as the new one, is read
through the output's binding (the regions do not overlap); any other input that shares a
buffer with an output is copied first.
"""

from __future__ import annotations

from typing import Any

from . import _dtypes as D
from . import _kernels
from ._array import WgpuArray, astype_raw, contiguous, copy_into, empty
from ._elementwise import UNARY, _body
from ._recorder import REC, groups_for

_FLOATS = (D.float32, D.float64)
#: the dtypes of the LSTM and GRU kernels: float16/bfloat16 computed in float32, rounded once
_RNN_FLOATS = (D.float32, D.float64, D.float16, D.bfloat16)
_CELL_KERNELS: dict = {}  # (template, dtype, flag values) -> kernel
#: the forward kernels' activations: tanh is the body of the library's unary ``tanh``, the
#: sigmoid (1 + tanh(x / 2)) / 2
_ACTIVATIONS = """fn tanh_v(x: {{T}}) -> {{T}} {
  {{TANH}}
}

fn sigmoid_v(x: {{T}}) -> {{T}} {
  let half = {{T}}(0.5);
  return half * tanh_v(half * x) + half;
}"""


def _wide(*arrays: Any) -> list:
    """16-bit arrays as float32 (``None`` kept): a 16-bit cell runs the float32 kernel."""
    return [None if a is None else astype_raw(a, D.float32) for a in arrays]


def _readable(reads: list, writes: list) -> list:
    """``reads`` contiguous, each a copy where it shares a buffer with one of ``writes``."""
    written = {w._st.buf.uid for w in writes}
    out = []
    for r in reads:
        r = contiguous(r)
        if r._st.buf.uid in written:
            r = astype_raw(r, r.dtype)
        out.append(r)
    return out


class _Cell:
    """What both cells share: dtypes, stand-ins for unused bindings, the dispatch."""

    def __init__(self) -> None:
        self._unused: dict = {}  # (dtype, writable) -> a one-element array bound unread

    def supports(self, dtype: Any) -> bool:
        return dtype in _FLOATS

    def _stand_in(self, dt: Any, writable: bool = False) -> WgpuArray:
        a = self._unused.get((dt, writable))
        if a is None:
            a = self._unused[(dt, writable)] = empty((1,), dt)
        return a

    @staticmethod
    def _dispatch(name: str, sig: str, arrays: list, n: int, h: int, offsets: list | None = None,
                  **flags: int) -> None:
        """Run ``name`` over the ``n`` state elements with ``arrays`` bound in order (their
        element offsets, or ``offsets``, are the words after ``n`` and ``h``)."""
        dt = arrays[0].dtype
        key = (name, dt, *flags.values())
        k = _CELL_KERNELS.get(key)
        if k is None:
            k = _CELL_KERNELS[key] = _kernels.kernel(
                name, sig, (dt,), T=D.wgsl(dt), DT=dt.name, ACTIVATIONS=_ACTIVATIONS,
                TANH=_body(UNARY, "tanh", dt), **flags)
        offs = offsets if offsets is not None else [a._offset for a in arrays]
        REC.dispatch(k, tuple(a._st.buf for a in arrays), [n, h, *offs], groups_for(n))


class WgpuLstmCell(_Cell):
    """The LSTM cell's pointwise forward and backward on float32/float64 arrays (16-bit
    cells computed by them in float32, rounded once), and whole time steps with the
    recurrent product (:class:`WgpuLstmSteps`, any of the four float dtypes)."""

    def __init__(self) -> None:
        super().__init__()
        self.steps = WgpuLstmSteps()

    def supports(self, dtype: Any) -> bool:
        return dtype in _RNN_FLOATS

    @staticmethod
    def _narrow(results: tuple, dt: Any, out: Any) -> tuple:
        """float32 ``results`` rounded once to ``dt`` (into ``out`` where given)."""
        low = tuple(None if r is None else astype_raw(r, dt) for r in results)
        if out is None:
            return low
        for o, r in zip(out, low, strict=True):
            copy_into(r, o)
        return tuple(out)

    def recurrent_weight(self, w_hh: Any) -> Any:
        """``W_hh^T`` ``(H, 4H)``, laid out once per layer call for :meth:`step_forward`."""
        return self.steps.recurrent_weight(w_hh)

    def step_forward(self, *args: Any) -> Any:
        return self.steps.step_forward(*args)

    def step_backward(self, *args: Any) -> Any:
        return self.steps.step_backward(*args)

    def layer_forward(self, *args: Any) -> Any:
        return self.steps.layer_forward(*args)

    def layer_backward(self, *args: Any) -> Any:
        return self.steps.layer_backward(*args)

    def forward(self, z: Any, z2: Any, cprev: Any, out: Any = None
                ) -> tuple[Any, Any, Any, Any]:
        dt = z.dtype
        if dt not in _FLOATS:  # float16/bfloat16: the float32 kernel, rounded once
            return self._narrow(self.forward(*_wide(z, z2, cprev)), dt, out)
        if out is None:
            h, c, tc = (empty(cprev.shape, dt) for _ in range(3))
            act = empty(z.shape, dt)
        else:
            h, c, act, tc = out
        writes = [h, c, tc, act]
        n = cprev.size
        if n:
            in_c = cprev._contig and cprev._st.buf is c._st.buf and (
                cprev._offset + n <= c._offset or c._offset + n <= cprev._offset)
            first = _readable([z, self._stand_in(dt) if z2 is None else z2], writes)
            # the previous step of the same sequence buffer is read through c's binding
            cp = self._stand_in(dt) if in_c else _readable([cprev], writes)[0]
            arrays = [*first, cp, *writes]
            offsets = [a._offset for a in arrays]
            if in_c:
                offsets[2] = cprev._offset
            self._dispatch("lstm_fwd", "rrrwwww", arrays, n, cprev.shape[-1], offsets,
                           HIDDEN=int(z2 is not None), CPREV_IN_C=int(in_c))
        return h, c, act, tc

    def backward(self, act: Any, cprev: Any, tc: Any, dh: Any, dc: Any,
                 need_dc_prev: bool, dh2: Any = None, out: Any = None) -> tuple[Any, Any]:
        if dh is None:
            dh, dh2 = dh2, None
        dt = act.dtype
        if dt not in _FLOATS:  # float16/bfloat16: the float32 kernel, rounded once
            wide = _wide(act, cprev, tc, dh, dc, dh2)
            dz, dcp = self.backward(*wide[:5], need_dc_prev, wide[5])
            dz = self._narrow((dz,), dt, None if out is None else (out,))[0]
            return dz, None if dcp is None else astype_raw(dcp, dt)
        dz = empty(act.shape, dt) if out is None else out
        dcp = empty(tc.shape, dt) if need_dc_prev else None
        if tc.size:
            unused = self._stand_in(dt)
            writes = [dz, self._stand_in(dt, True) if dcp is None else dcp]
            reads = _readable([act, cprev, tc, *(unused if a is None else a
                                                 for a in (dh, dh2, dc))], writes)
            self._dispatch("lstm_bwd", "rrrrrrww", reads + writes, tc.size, tc.shape[-1],
                           HAS_DH=int(dh is not None), HAS_DH2=int(dh2 is not None),
                           HAS_DC=int(dc is not None), NEED_DCP=int(dcp is not None))
        return dz, dcp


class WgpuLstmSteps(_Cell):
    """Whole LSTM time steps with the recurrent product inside, one dispatch each way
    (``wgsl/nn/lstm_step_fwd.wgsl``, ``lstm_step_bwd.wgsl``): a workgroup per 16 hidden
    units x 2 batch rows, its invocations splitting the product's inner dimension 8 ways
    and reading ``W_hh^T`` (forward, :meth:`recurrent_weight`) or ``W_hh`` (backward) with
    neighbouring invocations on neighbouring units. At a recurrent step's small batch this
    keeps many more multiprocessors busy than tiles of 16 x 16 outputs (4x faster each way
    on an H100 at batch 64, hidden size 256)."""

    #: storage bindings of the forward and backward kernels (a device with fewer per stage
    #: declines), and the forward's workgroup memory per element size
    BINDINGS = {"lstm_step_fwd": 8, "lstm_step_bwd": 10}
    SHARED_ELEMENTS = 1024
    #: batch rows of a workgroup
    ROWS = 2

    def recurrent_weight(self, w_hh: Any) -> Any:
        """``W_hh^T`` as a C-contiguous ``(H, 4H)`` array (``w_hh`` itself where the steps
        decline anyway)."""
        if type(w_hh) is not WgpuArray or w_hh.ndim != 2 or w_hh.dtype not in _RNN_FLOATS \
                or not self._fits("lstm_step_fwd", w_hh.dtype):
            return w_hh
        return contiguous(w_hh.mT)

    def _kernel(self, name: str, sig: str, dt: Any, **flags: int) -> Any:
        key = (name, dt, *flags.items())
        k = _CELL_KERNELS.get(key)
        if k is None:
            cdt = D.compute_dtype(dt)
            k = _CELL_KERNELS[key] = _kernels.kernel(
                name, sig, (dt,) if cdt == dt else (dt, cdt), T=D.wgsl(dt), C=D.wgsl(cdt),
                D=dt.name, DT=cdt.name, ACTIVATIONS=_ACTIVATIONS.replace("{{T}}", "{{C}}"),
                TANH=_body(UNARY, "tanh", cdt).replace("{{T}}", "{{C}}"), **flags)
        return k

    @staticmethod
    def _fits(name: str, dt: Any, n: int = 0) -> bool:
        """Whether the device's limits take kernel ``name`` over ``dt`` for a batch of ``n``
        rows (its workgroups along y)."""
        from . import _runtime

        rt = _runtime.get()
        if -(-n // WgpuLstmSteps.ROWS) > rt.max_groups:
            return False
        limits = rt.limits
        per_stage = int(limits.get("max-storage-buffers-per-shader-stage", 8))
        shared = int(limits.get("max-compute-workgroup-storage-size", 16384))
        return per_stage >= WgpuLstmSteps.BINDINGS[name] and \
            shared >= WgpuLstmSteps.SHARED_ELEMENTS * D.itemsize(D.compute_dtype(dt))

    @staticmethod
    def _same(a: Any, b: Any) -> bool:
        return a._st.buf is b._st.buf

    def step_forward(self, gates: Any, h: Any, w_hh: Any, c: Any, out: Any
                     ) -> tuple[Any, Any, Any, Any] | None:
        """``(h, c, act, tc)`` of one step written into ``out``; ``None`` to decline.
        ``w_hh`` is :meth:`recurrent_weight`'s ``W_hh^T``."""
        arrays = (gates, h, w_hh, c, *out)
        if not all(type(a) is WgpuArray and a.dtype == gates.dtype for a in arrays) \
                or gates.dtype not in _RNN_FLOATS or h.ndim != 2 \
                or w_hh.shape != (h.shape[1], 4 * h.shape[1]) \
                or not self._fits("lstm_step_fwd", gates.dtype, h.shape[0]):
            return None
        hout, cout, act, tc = out
        n, hs = h.shape
        if not (hout._contig and cout._contig and act._contig and tc._contig):
            return None
        writes = [hout, cout, tc, act]
        h_in = h._contig and self._same(h, hout)
        c_in = c._contig and self._same(c, cout)
        gin, win = _readable([gates, w_hh], writes)
        stand = self._stand_in(gates.dtype)
        hr = stand if h_in else _readable([h], writes)[0]
        cr = stand if c_in else _readable([c], writes)[0]
        offsets = [gin._offset, (h if h_in else hr)._offset, win._offset,
                   (c if c_in else cr)._offset, *(a._offset for a in writes)]
        k = self._kernel("lstm_step_fwd", "rrrrwwww", gates.dtype, H_IN_H=int(h_in),
                         C_IN_C=int(c_in))
        REC.dispatch(k, tuple(a._st.buf for a in (gin, hr, win, cr, *writes)),
                     [n, hs, *offsets], -(-hs // 16), -(-n // self.ROWS))
        return hout, cout, act, tc

    def _takes(self, dt: Any, n: int, *arrays: Any) -> bool:
        return dt in _RNN_FLOATS and all(
            a is None or (type(a) is WgpuArray and a.dtype == dt) for a in arrays) \
            and self._fits("lstm_step_fwd", dt, n) and self._fits("lstm_step_bwd", dt, n)

    @staticmethod
    def _step_rows(a: Any) -> bool:
        """Whether each step of a ``(T, N, X)`` array is ``N`` rows of ``X`` contiguous
        elements (any non-negative strides between steps and rows)."""
        st, rs, cs = a._strides
        return (cs == 1 or a.shape[2] == 1) and st >= 0 and rs >= 0

    def layer_forward(self, gates: Any, h0: Any, c0: Any, w_hh: Any, reverse: bool
                      ) -> tuple[Any, Any, Any, Any] | None:
        """Every step of one layer, the :meth:`step_forward` dispatches one after another
        with their offsets computed (no views nor checks per step; the steps after the
        first read the previous state through the outputs' bindings): ``(h_all, c_all,
        act_all, tc_all)`` from the input gates ``(T, N, 4H)``; ``None`` to decline."""
        if type(gates) is not WgpuArray or gates.ndim != 3 or 0 in gates.shape \
                or getattr(h0, "ndim", 0) != 2 \
                or not self._takes(gates.dtype, h0.shape[0], h0, c0, w_hh):
            return None
        dt = gates.dtype
        steps, (n, hs) = gates.shape[0], h0.shape
        if gates.shape[1:] != (n, 4 * hs) or c0.shape != (n, hs) or w_hh.shape != (4 * hs, hs) \
                or 0 in h0.shape:
            return None
        wt = self.recurrent_weight(w_hh)
        nh = n * hs
        h_all, c_all, tc_all = (empty((steps, n, hs), dt) for _ in range(3))
        act_all = empty((steps, n, 4 * hs), dt)
        writes = [h_all, c_all, tc_all, act_all]
        # the outputs are new buffers: no input shares one with them
        gin = gates if self._step_rows(gates) and gates._strides[1] == 4 * hs \
            else contiguous(gates)
        win, h0r, c0r = (contiguous(a) for a in (wt, h0, c0))
        st = gin._strides[0]
        stand = self._stand_in(dt)
        first = self._kernel("lstm_step_fwd", "rrrrwwww", dt, H_IN_H=0, C_IN_C=0)
        rest = self._kernel("lstm_step_fwd", "rrrrwwww", dt, H_IN_H=1, C_IN_C=1)
        out_bufs = tuple(a._st.buf for a in writes)
        o_h, o_c, o_tc, o_a = (a._offset for a in writes)
        groups = (-(-hs // 16), -(-n // self.ROWS))
        prev = None
        for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
            at = t * nh
            if prev is None:
                k, bufs = first, (gin._st.buf, h0r._st.buf, win._st.buf, c0r._st.buf, *out_bufs)
                hp, cp = h0r._offset, c0r._offset
            else:
                k, bufs = rest, (gin._st.buf, stand._st.buf, win._st.buf, stand._st.buf,
                                 *out_bufs)
                hp, cp = o_h + prev * nh, o_c + prev * nh
            REC.dispatch(k, bufs, [n, hs, gin._offset + t * st, hp, win._offset, cp,
                                   o_h + at, o_c + at, o_tc + at, o_a + 4 * at], *groups)
            prev = t
        return h_all, c_all, act_all, tc_all

    def layer_backward(self, saved: tuple, w_hh: Any, dout: Any, dhn: Any, dcn: Any,
                       need_c0: bool, reverse: bool) -> tuple[Any, Any] | None:
        """Every step of one layer backwards, the :meth:`step_backward` dispatches one after
        another with their offsets computed: ``(dz_all, dc0)`` as the cupy backend's
        ``layer_backward`` (``saved`` = ``(c0, c_all, act_all, tc_all)``); ``None`` to
        decline."""
        if dout is None and dhn is None and dcn is None:
            return None
        c0, c_all, act_all, tc_all = saved
        dt = getattr(tc_all, "dtype", None)
        if getattr(tc_all, "ndim", 0) != 3 or 0 in tc_all.shape or not self._takes(
                dt, tc_all.shape[1], c0, c_all, act_all, tc_all, w_hh, dout, dhn, dcn):
            return None
        steps, n, hs = tc_all.shape
        if act_all.shape != (steps, n, 4 * hs) or c_all.shape != tc_all.shape \
                or w_hh.shape != (4 * hs, hs) or c0.shape != (n, hs) \
                or not (c_all._contig and act_all._contig and tc_all._contig) \
                or any(a is not None and a.shape != (n, hs) for a in (dhn, dcn)) \
                or (dout is not None and dout.shape != (steps, n, hs)):
            return None
        nh = n * hs
        dz_all = empty((steps, n, 4 * hs), dt)
        dcs = (empty((n, hs), dt), empty((n, hs), dt))
        # the outputs are new buffers: no input shares one with them
        c0, w, dhn, dcn = (None if a is None else contiguous(a) for a in (c0, w_hh, dhn, dcn))
        if dout is not None and not self._step_rows(dout):
            dout = contiguous(dout)
        stand, stand_w = self._stand_in(dt), self._stand_in(dt, True)
        order = list(range(steps - 1, -1, -1) if reverse else range(steps))
        groups = (-(-hs // 16), -(-n // self.ROWS))
        a_off, c_off, tc_off, z_off = (a._offset for a in (act_all, c_all, tc_all, dz_all))
        d2 = dout if dout is not None else stand
        st2, ld2 = (dout._strides[0], dout._strides[1]) if dout is not None else (0, hs)
        dc = dcn
        for k in range(steps - 1, -1, -1):
            t, last = order[k], k == steps - 1
            dh1 = dhn if last else None
            need = k > 0 or need_c0
            dcp = dcs[k % 2] if need else stand_w
            cprev, cp_off = (c0, c0._offset) if k == 0 else (c_all, c_off + order[k - 1] * nh)
            kern = self._kernel("lstm_step_bwd", "rrrrrrrrww", dt, HAS_DZ=int(not last),
                                DZ_IN_DZ=int(not last), HAS_DH=int(dh1 is not None),
                                HAS_DH2=int(dout is not None), HAS_DC=int(dc is not None),
                                NEED_DCP=int(need))
            reads = (act_all, cprev, tc_all, w, stand if dh1 is None else dh1, d2,
                     stand if dc is None else dc, stand)
            words = [n, hs, a_off + 4 * t * nh, cp_off, tc_off + t * nh, w._offset,
                     stand._offset if dh1 is None else dh1._offset,
                     d2._offset + t * st2, stand._offset if dc is None else dc._offset,
                     z_off + 4 * order[k + 1] * nh if not last else stand._offset,
                     z_off + 4 * t * nh, dcp._offset, ld2]
            REC.dispatch(kern, tuple(a._st.buf for a in (*reads, dz_all, dcp)), words, *groups)
            dc = dcp if need else None
        return dz_all, (dcs[0] if need_c0 else None)

    def step_backward(self, act: Any, c_prev: Any, tc: Any, dz_next: Any, w_hh: Any,
                      dh: Any, dh2: Any, dc: Any, need_dc_prev: bool, out: Any
                      ) -> tuple[Any, Any] | None:
        """``(d_gates, d_c_prev)`` of one step with ``dh = dz_next @ W_hh + dh + dh2``
        formed inside (``None`` terms left out); ``None`` to decline."""
        given = [a for a in (act, c_prev, tc, dz_next, w_hh, dh, dh2, dc, out) if a is not None]
        dt = act.dtype
        if not all(type(a) is WgpuArray and a.dtype == dt for a in given) \
                or dt not in _RNN_FLOATS or tc.ndim != 2 or not out._contig \
                or not self._fits("lstm_step_bwd", dt, tc.shape[0]):
            return None
        n, hs = tc.shape
        dcp = empty((n, hs), dt) if need_dc_prev else None
        stand = self._stand_in(dt)
        writes = [out, dcp if dcp is not None else self._stand_in(dt, True)]
        dz_in = dz_next is not None and dz_next._contig and self._same(dz_next, out)
        # dh2 (a step of the output's gradient) is read with its row stride: a batch-first
        # output's gradient is strided over time, and a copy per step would be a dispatch
        rows2 = dh2 is not None and dh2.ndim == 2 and dh2._strides[1] == 1 \
            and dh2._st.buf.uid not in {w._st.buf.uid for w in writes}
        copied2 = None if rows2 else dh2  # dh2 is bound as it is below when rows2
        reads = _readable([act, c_prev, tc, w_hh, *(stand if a is None else a
                                                     for a in (dh, copied2, dc))], writes)
        if rows2:
            reads[5] = dh2
        znext = stand if dz_next is None or dz_in else _readable([dz_next], writes)[0]
        offsets = [a._offset for a in reads] + [
            dz_next._offset if dz_in else znext._offset, out._offset, writes[1]._offset,
            dh2._strides[0] if rows2 else hs]
        k = self._kernel("lstm_step_bwd", "rrrrrrrrww", dt, HAS_DZ=int(dz_next is not None),
                         DZ_IN_DZ=int(dz_in), HAS_DH=int(dh is not None),
                         HAS_DH2=int(dh2 is not None), HAS_DC=int(dc is not None),
                         NEED_DCP=int(dcp is not None))
        REC.dispatch(k, tuple(a._st.buf for a in (*reads, znext, *writes)),
                     [n, hs, *offsets], -(-hs // 16), -(-n // self.ROWS))
        return out, dcp


class WgpuGruCell(_Cell):
    """The GRU cell's pointwise forward and backward on float32/float64 arrays (16-bit
    cells computed by them in float32, rounded once)."""

    def supports(self, dtype: Any) -> bool:
        return dtype in _RNN_FLOATS

    def forward(self, x: Any, hg: Any, hprev: Any) -> tuple[Any, Any]:
        dt = x.dtype
        if dt not in _FLOATS:  # float16/bfloat16: the float32 kernel, rounded once
            return tuple(astype_raw(r, dt) for r in self.forward(*_wide(x, hg, hprev)))
        hs = hprev.shape[-1]
        h = empty(hprev.shape, dt)
        act = empty((*hprev.shape[:-1], 4 * hs), dt)
        if hprev.size:
            reads = _readable([x, hg, hprev], [h, act])
            self._dispatch("gru_fwd", "rrrww", [*reads, h, act], hprev.size, hs)
        return h, act

    def backward(self, act: Any, hprev: Any, dh: Any, need_dh_prev: bool
                 ) -> tuple[Any, Any, Any]:
        dt = act.dtype
        if dt not in _FLOATS:  # float16/bfloat16: the float32 kernel, rounded once
            return tuple(None if r is None else astype_raw(r, dt)
                         for r in self.backward(*_wide(act, hprev, dh), need_dh_prev))
        hs = hprev.shape[-1]
        shape = (*hprev.shape[:-1], 3 * hs)
        dx, dhg = empty(shape, dt), empty(shape, dt)
        dhp = empty(hprev.shape, dt) if need_dh_prev else None
        if hprev.size:
            writes = [dx, dhg, self._stand_in(dt, True) if dhp is None else dhp]
            reads = _readable([act, hprev, dh], writes)
            self._dispatch("gru_bwd", "rrrwww", [*reads, *writes], hprev.size, hs,
                           NEED_DHP=int(dhp is not None))
        return dx, dhg, dhp
