"""``kernel("conv2d")`` through cuDNN's graph API (the ``nvidia-cudnn-frontend`` package),
where it is installed: forward, data gradient and weight gradient are one cuDNN call each
on the NCHW arrays, with no patch matrix in memory.

* Each (operation, dtype, shapes, padding, stride, dilation) builds one cuDNN graph once
  and keeps it; a call sets the thread's handle to CuPy's current stream, takes a
  workspace from CuPy's pool and executes (no host synchronisation, so steps stay
  sync-free and CUDA-graph capture works).
* Engines: with ``vtl.backends.cudnn.benchmark`` on (the default), the first call of a
  graph times every plan that qualifies and keeps the fastest (:func:`fastest_plan`);
  otherwise, and for padding that differs between the two sides of an axis (where some
  engines cuDNN builds compute wrong values), the first plan of cuDNN's heuristics that
  builds serves.
* Numerics: engines that round float32 inputs down (TF32: down-converting or tensor-core
  engines) are excluded unless
  ``vtl.set_float32_matmul_precision`` allows it where that setting exists, and
  non-deterministic engines (atomics) are always excluded, so a result is the same on
  every run and compiled steps equal eager ones bit for bit.
* float16/bfloat16 run with float32 accumulation on tensor cores (PyTorch's default for
  16-bit convolutions); the bias is added in float32, rounded once.
* The bias gradient is summed per channel in double in a fixed order and rounded once
  (:func:`~vtl.backends.cupy._batch_norm.channel_sums`, two launches).
* What cuDNN does not take (grouped convolutions, float64, a shape for which no engine
  remains) runs the im2col kernel of :class:`~vtl.backends.cupy.conv.CupyConv2d`; the
  reason is kept in :attr:`CudnnConv2d.declined` for ``vtl info`` and tests. A 16-bit
  convolution cuDNN declines runs that path in float32, rounded once.

``VTL_CUDNN=0`` turns this path off.
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any

import numpy as np

from ._batch_norm import channel_sums
from .conv import CupyConv2d
from .nn import _Kernels, channel_bias_

__all__ = ["CudnnConv2d", "GraphCache", "Handles", "c_strides", "direct_launch", "fastest_plan",
           "load_cudnn"]


def load_cudnn() -> tuple[Any, str | None]:
    """``(cudnn module, None)``, or ``(None, why not)``."""
    if os.environ.get("VTL_CUDNN", "1") == "0":
        return None, "turned off by VTL_CUDNN=0"
    try:
        import cudnn  # nvidia-cudnn-frontend
    except Exception as e:  # noqa: BLE001 - any import failure means "not available"
        return None, f"nvidia-cudnn-frontend is not importable ({type(e).__name__}: {e})"
    try:
        version = cudnn.backend_version()
    except Exception as e:  # noqa: BLE001 - the cuDNN library itself is missing
        return None, f"the cuDNN library cannot be loaded ({type(e).__name__}: {e})"
    if version < 90000:
        return None, f"cuDNN {version} is older than 9.0"
    return cudnn, None


_F32 = np.dtype(np.float32)
_LOW = {"float16": "HALF", "bfloat16": "BFLOAT16"}


class Handles:
    """A cuDNN handle per thread and device, bound to CuPy's current stream (set again
    only when the stream changes: ``set_stream`` costs a few microseconds)."""

    def __init__(self, cupy: Any, cudnn: Any) -> None:
        self._cp = cupy
        self._cudnn = cudnn
        self._local = threading.local()  # .handles: device -> [handle, the stream set on it]

    def get(self) -> Any:
        dev = self._cp.cuda.Device().id
        handles = getattr(self._local, "handles", None)
        if handles is None:
            handles = self._local.handles = {}
        entry = handles.get(dev)
        if entry is None:
            entry = handles[dev] = [self._cudnn.create_handle(), None]
        stream = self._cp.cuda.get_current_stream().ptr
        if entry[1] != stream:
            self._cudnn.set_stream(handle=entry[0], stream=stream)
            entry[1] = stream
        return entry[0]


class GraphCache:
    """Built cuDNN graphs by key, each built once (under a lock) by the caller's builder; a
    key whose build raised is remembered in :attr:`declined` with the reason."""

    def __init__(self) -> None:
        self.graphs: dict[tuple, Any] = {}
        self.declined: dict[tuple, str] = {}
        self._lock = threading.Lock()

    def get(self, key: tuple, build: Any) -> Any:
        """The built graph for ``key`` (``build(key)`` the first time), or ``None`` if
        cuDNN has no engine for it."""
        g = self.graphs.get(key)
        if g is not None or key in self.declined:
            return g
        with self._lock:
            g = self.graphs.get(key)
            if g is None and key not in self.declined:
                try:
                    g = build(key)
                except Exception as e:  # noqa: BLE001 - cuDNN refuses: the caller's own path
                    self.declined[key] = f"{type(e).__name__}: {e}"
                    return None
                self.graphs[key] = g
        return g


def c_strides(shape: tuple) -> tuple[int, ...]:
    """C-contiguous strides of ``shape``, in elements (hashable: part of graph keys)."""
    return tuple(int(s) for s in np.cumprod((1, *shape[:0:-1]))[::-1])


def direct_launch(graph: Any, uids: tuple[int, ...]) -> Any:
    """A launcher that hands the built plan its operand pointers directly, or ``None``.

    The frontend's ``execute`` normalises its arguments in Python on every call (42 us of
    host time for a small convolution on an H100, 15 us through this launcher). Its graphs
    that run on the cuDNN backend also take the pointer array in the backend's
    operand order (ascending uids); frontends without that entry point, or graphs a Python
    engine serves, return ``None`` and ``execute`` runs as before.
    """
    lowered = getattr(graph, "_lowered_graph", None)
    try:
        if lowered is None or not hasattr(lowered, "_execute_with_raw_ptrs") or \
                graph.selected_engine is not None:
            return None
        order = [int(u) for u in graph._variant_pack_uids()]
        index = graph._materialize_backend_plan(graph._plan_index).cpp_index
    except Exception:  # noqa: BLE001 - another frontend layout: the public execute serves
        return None
    if sorted(order) != sorted(int(u) for u in uids):
        return None
    slots = [order.index(int(u)) for u in uids]
    index = -1 if index is None else int(index)
    launch = lowered._execute_with_raw_ptrs
    count = len(order)
    pointers = ctypes.c_void_p * count

    def direct(handle: Any, ptrs: tuple[int, ...], workspace: int) -> None:
        packed = pointers()
        for slot, ptr in zip(slots, ptrs, strict=True):
            packed[slot] = ptr
        launch(ctypes.addressof(packed), count, workspace, handle.backend_handle, index)

    return direct


#: plans asking for more workspace than this are not timed (FFT engines can ask for
#: hundreds of MiB, and are not the fast ones where they do)
TUNE_WORKSPACE = 256 << 20
#: timed runs of each plan, after one untimed run
TUNE_RUNS = 4
#: the plans timed again after the first round (the fastest of it)
TUNE_RECHECK = 3
#: the largest deviation from the heuristics' plan a timed plan's result may show on random
#: operands, as a fraction of the result's largest magnitude (correct algorithms differ by
#: rounding, far less; a plan that computes something else, by the order of the values)
TUNE_TOLERANCE = {"float32": 1e-3, "tf32": 1e-2, "float16": 1e-2, "bfloat16": 3e-2}
#: a later plan of the heuristics' ranking serves only if it is faster than this fraction of
#: the best time so far (timing noise does not flip the choice between near-equal plans)
TUNE_MARGIN = 0.97


def fastest_plan(graph: Any, measure: Any, limit: int = TUNE_WORKSPACE) -> int | None:
    """Select the fastest plan of a cuDNN graph whose ranked plans are created.

    Each plan that builds and needs at most ``limit`` workspace bytes is selected in turn
    and timed by ``measure(workspace bytes)`` (seconds, of the graph's selected plan, or
    ``None`` if its result is wrong); the :data:`TUNE_RECHECK` fastest are timed again
    (the device's clocks may have risen meanwhile) and keep their better time. The
    fastest is left selected: an earlier one in the heuristics' order unless a later one
    is faster than :data:`TUNE_MARGIN` of it.

    Args:
        graph: A frontend ``pygraph`` after ``create_execution_plans``/``check_support``.
        measure: ``measure(workspace_bytes) -> seconds | None`` for the selected plan.
        limit: The most workspace bytes a timed plan may need.

    Returns:
        The selected plan's index, or ``None`` if no plan qualified (the first plan that
        builds, the heuristics' choice, is then selected again, as it is when ``measure``
        raises; the error propagates).
    """
    timed: list[list] = []  # [index, seconds], in the heuristics' order
    first = None
    try:
        for index in range(graph.get_execution_plan_count()):
            try:
                graph.build_plan_at_index(index)
                workspace = int(graph.get_workspace_size())
            except Exception:  # noqa: BLE001 - the plan declines this graph: not a candidate
                continue
            if first is None:
                first = index
            if workspace > limit:
                continue
            seconds = measure(workspace)
            if seconds is not None:
                timed.append([index, seconds])
        for entry in sorted(timed, key=lambda e: e[1])[:TUNE_RECHECK]:
            graph.build_plan_at_index(entry[0])
            again = measure(int(graph.get_workspace_size()))
            entry[1] = float("inf") if again is None else min(entry[1], again)
    except BaseException:
        if first is not None:  # the heuristics' plan, not whichever was being timed
            graph.build_plan_at_index(first)
        raise
    best = timed[0] if timed else None
    for entry in timed[1:]:
        if entry[1] < best[1] * TUNE_MARGIN:
            best = entry
    if best is None or best[1] == float("inf"):  # nothing qualified (or stayed right)
        if first is not None:
            graph.build_plan_at_index(first)
        return None
    graph.build_plan_at_index(best[0])
    return best[0]


def _capturing(stream: Any) -> bool:
    """Whether CUDA captures ``stream``'s work (a wait for the device would break it)."""
    try:
        return bool(stream.is_capturing())
    except Exception:  # noqa: BLE001 - cannot tell: do not wait
        return True


class _Built:
    """A built graph of one convolution geometry, its operand tensors, the workspace its
    selected plan needs and the launcher; ``tuned`` once its plan is final."""

    __slots__ = ("graph", "ta", "tb", "tout", "ws", "direct", "tuned", "timeable",
                 "tolerance")

    def __init__(self, graph: Any, ta: Any, tb: Any, tout: Any, timeable: bool = True,
                 tolerance: float = TUNE_TOLERANCE["float32"]) -> None:
        self.graph, self.ta, self.tb, self.tout = graph, ta, tb, tout
        self.tuned = False
        #: whether any qualifying plan may serve (see :meth:`CudnnConv2d._build`)
        self.timeable = timeable
        #: the largest deviation from the heuristics' plan a timed plan may show, as a
        #: fraction of the result's largest magnitude
        self.tolerance = tolerance
        self.select()

    def select(self) -> None:
        """Take the graph's selected plan's workspace size and launcher."""
        self.ws = self.graph.get_workspace_size()
        self.direct = direct_launch(self.graph, (self.ta.uid, self.tb.uid, self.tout.uid))


class CudnnConv2d(CupyConv2d):
    """:class:`CupyConv2d` with forward and both gradients of ungrouped float32, float16
    and bfloat16 convolutions done by cuDNN (float64 runs the im2col path, as do the 16-bit
    ones cuDNN declines, in float32)."""

    def supports(self, dtype: Any) -> bool:
        return super().supports(dtype) or np.dtype(dtype).name in _LOW

    def __init__(self, cupy: Any, cudnn: Any, matmul: Any = None) -> None:
        super().__init__(cupy, matmul=matmul)
        self._cudnn = cudnn
        self._cache = GraphCache()
        self._graphs = self._cache.graphs
        self._handles = Handles(cupy, cudnn)
        self.declined = self._cache.declined  # graph key -> why cuDNN did not serve it
        self._sum_kernels = _Kernels(cupy)  # the bias gradient's channel sums
        self.served = 0  # calls cuDNN executed (for tests and `vtl info`)
        self.tuned = 0  # graphs whose plan was chosen by timing
        self.untimed: list[str] = []  # why timings failed (those graphs keep the first plan)
        self._tune_lock = threading.Lock()

    # -- cuDNN plumbing ------------------------------------------------------------------
    def _handle(self) -> Any:
        return self._handles.get()

    def _allow_tf32(self) -> bool:
        try:
            import vtl

            get = getattr(vtl, "get_float32_matmul_precision", None)
            return get is not None and get() != "highest"
        except Exception:  # noqa: BLE001 - no such setting: strict float32
            return False

    def _graph(self, key: tuple) -> Any:
        """The built graph for ``key`` (``None`` if cuDNN has no engine for it)."""
        return self._cache.get(key, self._build)

    def _build(self, key: tuple) -> _Built:
        cudnn = self._cudnn
        op, dtype, x_shape, w_shape, y_shape, pad, stride, dil, tf32, _device = key
        low = dtype in _LOW
        dt = getattr(cudnn.data_type, _LOW[dtype]) if low else cudnn.data_type.FLOAT
        graph = cudnn.pygraph(io_data_type=dt, intermediate_data_type=cudnn.data_type.FLOAT,
                              compute_data_type=cudnn.data_type.FLOAT, handle=self._handle())

        def tensor(name: str, shape: tuple) -> Any:
            return graph.tensor(name=name, dim=list(shape), stride=list(c_strides(shape)),
                                data_type=dt)

        pre, post = [pad[0], pad[2]], [pad[1], pad[3]]
        common = {"pre_padding": pre, "post_padding": post, "stride": list(stride),
                  "dilation": list(dil), "compute_data_type": cudnn.data_type.FLOAT}
        if op == "fprop":
            a, b = tensor("X", x_shape), tensor("W", w_shape)
            out = graph.conv_fprop(image=a, weight=b, **common)
            shape = y_shape
        elif op == "dgrad":
            a, b = tensor("DY", y_shape), tensor("W", w_shape)
            out = graph.conv_dgrad(loss=a, filter=b, **common)
            shape = x_shape
        else:  # wgrad
            a, b = tensor("X", x_shape), tensor("DY", y_shape)
            out = graph.conv_wgrad(image=a, loss=b, **common)
            shape = w_shape
        out.set_output(True).set_dim(list(shape)).set_stride(list(c_strides(shape)))
        out.set_data_type(dt)
        graph.validate()
        graph.build_operation_graph()
        notes = [cudnn.numerical_note.NONDETERMINISTIC]
        if not (tf32 or low):  # tensor cores take float32 only as TF32
            notes += [cudnn.numerical_note.DOWN_CONVERT_INPUTS,
                      cudnn.numerical_note.TENSOR_CORE]
        graph.deselect_numeric_notes(notes)
        graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        graph.check_support()
        graph.build_plans()
        # with padding that differs between the two sides of an axis, some engines that
        # cuDNN lets build compute wrong values (seen on an H100 with cuDNN 9.19); the
        # heuristics' first plan is the one the tests check there
        symmetric = pad[0] == pad[1] and pad[2] == pad[3]
        # TF32 plans differ from a float32 one by about 1e-3 of the largest value
        tolerance = TUNE_TOLERANCE["tf32" if tf32 else dtype]
        return _Built(graph, a, b, out, timeable=symmetric, tolerance=tolerance)

    def _tune(self, built: _Built, a: Any, b: Any, out: Any) -> None:
        """Settle ``built``'s plan on its first call: where ``vtl.backends.cudnn.benchmark``
        is on and no capture is under way, the fastest plan on random operands of the
        call's shapes among those whose result there agrees with the heuristics' plan
        (within ``built.tolerance`` of the result's largest magnitude). A plan whose timing
        fails (out of memory for its workspace, an error at launch) is not a candidate; if
        the timing itself fails, the heuristics' plan serves. Either way the plan is final
        after this call."""
        from ... import capture
        from .. import cudnn as settings

        with self._tune_lock:
            if built.tuned:
                return
            m = self.m
            stream = m.cuda.get_current_stream()
            try:
                if built.timeable and settings.benchmark and not capture.active() \
                        and not _capturing(stream):
                    self._time_plans(built, a, b, out, stream)
            except Exception as e:  # noqa: BLE001 - timing is an optimisation: keep the plan
                self.untimed.append(f"{type(e).__name__}: {e}")
            finally:
                built.tuned = True

    def _time_plans(self, built: _Built, a: Any, b: Any, out: Any, stream: Any) -> None:
        m = self.m
        handle = self._handle()
        sa, sb = self._scratch(a, 1), self._scratch(b, 2)
        ptrs = {built.ta: sa.data.ptr, built.tb: sb.data.ptr, built.tout: out.data.ptr}
        ref = self._reference(built, ptrs, handle, out)
        if ref is None:
            return
        tol = built.tolerance * ref[1]
        start, stop = m.cuda.Event(), m.cuda.Event()

        def measure(workspace: int) -> float | None:
            try:
                work = m.empty(workspace, dtype=m.uint8) if workspace else None
                ptr = None if work is None else work.data.ptr
                built.graph.execute(ptrs, ptr, handle=handle)
                start.record(stream)
                for _ in range(TUNE_RUNS):
                    built.graph.execute(ptrs, ptr, handle=handle)
                stop.record(stream)
                stop.synchronize()
                if not self._deviation(out, ref[0]) <= tol:
                    return None  # a plan that computes something else
                return m.cuda.get_elapsed_time(start, stop) / 1e3
            except Exception:  # noqa: BLE001 - this plan cannot run here: not a candidate
                return None

        try:
            chosen = fastest_plan(built.graph, measure)
        finally:
            built.select()  # the workspace and launcher of whichever plan is selected now
        if chosen is not None:
            self.tuned += 1

    def _scratch(self, x: Any, seed: int) -> Any:
        """Standard normal values of ``x``'s shape and dtype (a generator of its own)."""
        m = self.m
        return m.random.RandomState(seed).standard_normal(x.shape, dtype=_F32).astype(x.dtype)

    def _reference(self, built: _Built, ptrs: dict, handle: Any, out: Any
                   ) -> tuple[Any, float] | None:
        """The selected plan's result on ``ptrs`` in float32 and its largest magnitude, or
        ``None`` where that is not a finite, non-zero number (nothing to check against)."""
        m = self.m
        work = m.empty(built.ws, dtype=m.uint8) if built.ws else None
        built.graph.execute(ptrs, None if work is None else work.data.ptr, handle=handle)
        ref = out.astype(_F32)
        scale = float(m.abs(ref).max())
        return (ref, scale) if np.isfinite(scale) and scale > 0 else None

    def _deviation(self, out: Any, ref: Any) -> float:
        """The largest absolute difference between ``out`` and ``ref`` (nan counts as
        infinite)."""
        d = float(self.m.abs(out.astype(_F32) - ref).max())
        return d if np.isfinite(d) else float("inf")

    def _run(self, built: _Built, a: Any, b: Any, out: Any) -> Any:
        if not built.tuned:
            self._tune(built, a, b, out)
        # from CuPy's pool (the capture's pool while vtl.compile captures), held to the launch
        ws = built.ws
        work = self.m.empty(ws, dtype=self.m.uint8) if ws else None
        ptr = 0 if work is None else work.data.ptr
        handle = self._handle()
        if built.direct is not None:
            built.direct(handle, (a.data.ptr, b.data.ptr, out.data.ptr), ptr)
        else:  # device pointers, not arrays: the frontend skips a DLPack export per operand
            built.graph.execute({built.ta: a.data.ptr, built.tb: b.data.ptr,
                                 built.tout: out.data.ptr}, ptr or None, handle=handle)
        self.served += 1
        return out

    def _key(self, op: str, dtype: Any, x_shape: tuple, w_shape: tuple, y_shape: tuple,
             padding: tuple, stride: tuple, dilation: tuple) -> tuple:
        name = np.dtype(dtype).name
        return (op, name, tuple(x_shape), tuple(w_shape), tuple(y_shape), tuple(padding),
                tuple(stride), tuple(dilation), name == "float32" and self._allow_tf32(),
                self.m.cuda.Device().id)  # a plan is built with that device's handle

    def _takes(self, dtype: Any, groups: int) -> bool:
        name = np.dtype(dtype).name
        return groups == 1 and (name == "float32" or name in _LOW)

    def _wide_forward(self, x: Any, w: Any, b: Any, stride: tuple, padding: tuple,
                      dilation: tuple, groups: int) -> tuple[Any, Any]:
        """A 16-bit convolution cuDNN does not take: the float32 path, rounded once."""
        y, ctx = self.forward_on_device(x.astype(_F32), w.astype(_F32),
                                        None if b is None else b.astype(_F32), stride,
                                        padding, dilation, groups)
        return y.astype(x.dtype), ("wide", ctx)

    def _wide_backward(self, ctx: Any, x_shape: tuple, w: Any, g: Any, *args: Any
                       ) -> tuple[Any, Any, Any]:
        grads = self.backward_on_device(ctx, x_shape, w.astype(_F32), g.astype(_F32), *args)
        return tuple(None if a is None else a.astype(g.dtype) for a in grads)

    # -- the kernel contract --------------------------------------------------------------
    def forward_on_device(self, x: Any, w: Any, b: Any, stride: tuple[int, int],
                          padding: tuple[int, int, int, int], dilation: tuple[int, int],
                          groups: int) -> tuple[Any, Any]:
        low = np.dtype(x.dtype).name in _LOW
        if not self._takes(x.dtype, groups) or 0 in x.shape:
            if low:
                return self._wide_forward(x, w, b, stride, padding, dilation, groups)
            return super().forward_on_device(x, w, b, stride, padding, dilation, groups)
        m = self.m
        from .._common.conv import out_size

        n, _, h, wd = x.shape
        o, _, kh, kw = w.shape
        ho = out_size(h, kh, stride[0], padding[0], padding[1], dilation[0])
        wo = out_size(wd, kw, stride[1], padding[2], padding[3], dilation[1])
        y_shape = (n, o, ho, wo)
        built = self._graph(self._key("fprop", x.dtype, x.shape, w.shape, y_shape, padding,
                                      stride, dilation))
        if built is None:
            if low:
                return self._wide_forward(x, w, b, stride, padding, dilation, groups)
            return super().forward_on_device(x, w, b, stride, padding, dilation, groups)
        x = m.ascontiguousarray(x)
        y = self._run(built, x, m.ascontiguousarray(w), m.empty(y_shape, dtype=x.dtype))
        if b is not None:
            if low:  # in float32, rounded once
                y = (y.astype(_F32) + b.astype(_F32).reshape(1, o, 1, 1)).astype(x.dtype)
            elif not channel_bias_(self._sum_kernels, y, b):
                y += b.reshape(1, o, 1, 1)
        return y, ("cudnn", x)

    def backward_on_device(self, col: Any, x_shape: tuple[int, ...], w: Any, g: Any,
                           stride: tuple[int, int], padding: tuple[int, int, int, int],
                           dilation: tuple[int, int], groups: int, need_x: bool,
                           need_w: bool, need_b: bool) -> tuple[Any, Any, Any]:
        wide = isinstance(col, tuple) and col and col[0] == "wide"
        if wide or (col is None and np.dtype(g.dtype).name in _LOW
                    and not self._takes(g.dtype, groups)):  # e.g. grouped, frozen weights
            return self._wide_backward(col[1] if wide else None, x_shape, w, g, stride,
                                       padding, dilation, groups, need_x, need_w, need_b)
        if not (isinstance(col, tuple) and col and col[0] == "cudnn") and \
                (col is not None or not self._takes(g.dtype, groups)):
            return super().backward_on_device(col, x_shape, w, g, stride, padding, dilation,
                                              groups, need_x, need_w, need_b)
        m = self.m
        g = m.ascontiguousarray(g)
        x = None if col is None else col[1]
        dx = dw = db = None
        if need_x:
            built = self._graph(self._key("dgrad", g.dtype, x_shape, w.shape, g.shape,
                                          padding, stride, dilation))
            if built is None and np.dtype(g.dtype).name in _LOW:
                dx = self._wide_backward(None, x_shape, w, g, stride, padding, dilation, 1,
                                         True, False, False)[0]
            elif built is None:
                dx = self._dgrad_fallback(x_shape, w, g, stride, padding, dilation)
            else:
                dx = self._run(built, g, m.ascontiguousarray(w), m.empty(x_shape, dtype=g.dtype))
        if need_w:
            built = self._graph(self._key("wgrad", g.dtype, x_shape, w.shape, g.shape,
                                          padding, stride, dilation))
            if built is None and np.dtype(g.dtype).name in _LOW:
                f32 = x.astype(_F32), w.astype(_F32), g.astype(_F32)
                dw = self._wgrad_fallback(*f32, stride, padding, dilation).astype(g.dtype)
            elif built is None:
                dw = self._wgrad_fallback(x, w, g, stride, padding, dilation)
            else:
                dw = self._run(built, x, g, m.empty(w.shape, dtype=g.dtype))
        if need_b:
            db = channel_sums(self._sum_kernels, m, g)
        return dx, dw, db

    def _dgrad_fallback(self, x_shape: tuple, w: Any, g: Any, stride: tuple, padding: tuple,
                        dilation: tuple) -> Any:
        """The data gradient by the im2col kernel (no patches of ``x`` are needed)."""
        dx, _, _ = super().backward_on_device(None, x_shape, w, g, stride, padding, dilation, 1,
                                              True, False, False)
        return dx

    def _wgrad_fallback(self, x: Any, w: Any, g: Any, stride: tuple, padding: tuple,
                        dilation: tuple) -> Any:
        """The weight gradient by the im2col kernel: rebuild the patches of ``x`` first."""
        _, col = super().forward_on_device(x, w, None, stride, padding, dilation, 1)
        _, dw, _ = super().backward_on_device(col, x.shape, w, g, stride, padding, dilation, 1,
                                              False, True, False)
        return dw
