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
