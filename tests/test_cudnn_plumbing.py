"""The cupy backend's cuDNN plumbing without a GPU (fakes for CuPy and the frontend): a
handle per thread and device bound to the current stream, graphs built once per key with
refusals remembered, the direct launcher's fallback to the frontend's ``execute``, and the
choice of a convolution's plan by timing (``vtl.backends.cudnn.benchmark``)."""

from __future__ import annotations

import threading

import pytest

import vtl
from vtl.backends.cupy import cudnn as cupy_cudnn
from vtl.backends.cupy.cudnn import GraphCache, Handles, direct_launch, fastest_plan


class _Cupy:
    """``cupy.cuda.Device().id`` and ``cupy.cuda.get_current_stream().ptr``."""

    def __init__(self):
        self.device, self.stream = 0, 0xABC
        outer = self

        class cuda:  # noqa: N801 - mirrors cupy.cuda
            class Device:  # noqa: D106
                @property
                def id(self):
                    return outer.device

            @staticmethod
            def get_current_stream():
                return type("S", (), {"ptr": outer.stream})()

        self.cuda = cuda


class _Handle:
    pass


class _Cudnn:
    """Handles that live only as long as their thread keeps them (so a later thread's new
    handle may reuse a dead one's ``id``), and the ``set_stream`` calls by handle id."""

    def __init__(self):
        self.made, self.bound = 0, []

    def create_handle(self):
        self.made += 1
        return _Handle()

    def set_stream(self, handle, stream):
        self.bound.append((id(handle), stream))


def test_a_handle_per_thread_and_device_bound_to_the_current_stream():
    cp, cudnn = _Cupy(), _Cudnn()
    handles = Handles(cp, cudnn)
    h = handles.get()
    assert handles.get() is h and cudnn.bound == [(id(h), 0xABC)]  # bound once
    cp.stream = 0xDEF
    assert handles.get() is h and cudnn.bound[-1] == (id(h), 0xDEF)
    cp.device = 1
    h1 = handles.get()
    assert h1 is not h and cudnn.bound[-1] == (id(h1), 0xDEF)
    for _ in range(8):  # one thread after another, each with a new handle to bind
        t = threading.Thread(target=handles.get)
        t.start()
        t.join()
    assert cudnn.made == 2 + 8 and len(cudnn.bound) == 3 + 8


def test_graphs_are_built_once_and_refusals_remembered():
    cache, calls = GraphCache(), []

    def build(key):
        calls.append(key)
        if key == "no":
            raise RuntimeError("no engine")
        return ("graph", key)

    assert cache.get("a", build) == ("graph", "a") and cache.get("a", build) == ("graph", "a")
    assert cache.get("no", build) is None and cache.get("no", build) is None
    assert calls == ["a", "no"]
    assert cache.declined == {"no": "RuntimeError: no engine"}


def test_direct_launch_falls_back_where_the_frontend_lacks_its_entry_point():
    class Old:  # a graph of an older frontend: no lowered graph
        pass

    class Lowered:  # no _execute_with_raw_ptrs
        pass

    class Newer:
        _lowered_graph = Lowered()
        selected_engine = None

    assert direct_launch(Old(), (1, 2, 3)) is None
    assert direct_launch(Newer(), (1, 2, 3)) is None


class _Graph:
    """A built frontend graph: ``plans`` of (seconds a run takes, or ``None`` where the plan
    declines the graph; workspace bytes), the heuristics' first plan that builds selected."""

    def __init__(self, plans):
        self.plans = plans
        self.selected = next(i for i, (t, _) in enumerate(plans) if t is not None)
        self.runs: list[int] = []
        self.wrong: set[int] = set()  # plans whose results differ from the first's

    def get_execution_plan_count(self):
        return len(self.plans)

    def build_plan_at_index(self, index):
        if self.plans[index][0] is None:
            raise RuntimeError("cudnnGraphNotSupportedError: declined")
        self.selected = index

    def get_workspace_size(self):
        return self.plans[self.selected][1]

    def execute(self, ptrs, workspace, handle=None):
        assert (workspace is None) == (self.plans[self.selected][1] == 0)
        self.runs.append(self.selected)


def _timer(graph):
    return lambda workspace: None if graph.selected in graph.wrong else \
        graph.plans[graph.selected][0]


def test_the_fastest_plan_that_builds_and_fits_the_workspace_limit_is_selected():
    g = _Graph([(None, 0), (3.0, 0), (None, 0), (2.0, 1 << 30), (1.5, 64), (1.0, 0), (9.0, 0)])
    assert fastest_plan(g, _timer(g), limit=1 << 20) == 5 and g.selected == 5
    g = _Graph([(None, 0), (2.0, 0), (1.0, 1 << 30)])  # the only faster one needs too much
    assert fastest_plan(g, _timer(g), limit=1 << 20) == 1 and g.selected == 1


def test_a_later_plan_must_beat_the_earlier_by_the_margin():
    m = cupy_cudnn.TUNE_MARGIN
    g = _Graph([(1.0, 0), (1.0 * (m + 0.01), 0), (1.0, 0)])  # near-equal: the heuristics' order
    assert fastest_plan(g, _timer(g)) == 0 and g.selected == 0
    g = _Graph([(1.0, 0), (1.0 * (m - 0.01), 0)])
    assert fastest_plan(g, _timer(g)) == 1


def test_the_fastest_few_are_timed_again_and_keep_their_better_time():
    g = _Graph([(2.0, 0), (3.0, 0), (1.5, 0), (9.0, 0)])
    slow_first = {1: [5.0, 1.0], 0: [2.0, 2.0], 2: [1.5, 1.5], 3: [4.0, 4.0]}  # clocks rising

    def measure(workspace):
        return slow_first[g.selected].pop(0)

    assert fastest_plan(g, measure) == 2  # plan 1 was 5.0 at first: not among the 3 fastest
    g = _Graph([(2.0, 0), (3.0, 0), (1.5, 0), (9.0, 0)])
    slow_first = {0: [4.0, 2.0], 1: [3.0, 1.0], 2: [1.5, 1.5], 3: [9.0, 9.0]}
    assert fastest_plan(g, measure) == 1


def test_a_plan_whose_result_is_wrong_is_never_chosen():
    g = _Graph([(None, 0), (3.0, 0), (1.0, 0), (2.0, 0)])
    g.wrong = {2}
    assert fastest_plan(g, _timer(g)) == 3 and g.selected == 3


def test_a_plan_wrong_on_its_second_timing_is_refused_too():
    g = _Graph([(None, 0), (2.0, 0), (1.0, 0)])
    answers = {1: [2.0, None], 2: [1.0, None]}  # right once, then not: neither serves

    def measure(workspace):
        return answers[g.selected].pop(0)

    assert fastest_plan(g, measure) is None and g.selected == 1  # the heuristics' plan


def test_no_plan_qualifying_selects_the_heuristics_plan_again():
    g = _Graph([(None, 0), (1.0, 1 << 40), (None, 0), (2.0, 1 << 40)])
    assert fastest_plan(g, _timer(g), limit=1 << 20) is None and g.selected == 1
    g = _Graph([(1.0, 0), (2.0, 0)])
    g.wrong = {0, 1}
    assert fastest_plan(g, _timer(g)) is None and g.selected == 0


class _Clock:
    """CuPy's events, stream, pool and elapsed time, for :meth:`CudnnConv2d._tune`: an
    event pair's elapsed time is that of the runs of the graph's plan between them."""

    uint8 = "uint8"

    def __init__(self, graph, capturing=False):
        clock = self
        self.graph, self.capturing, self.waits = graph, capturing, 0

        class Event:
            def record(self, stream=None):
                self.mark = len(clock.graph.runs)

            def synchronize(self):
                clock.waits += 1

        class Stream:
            def is_capturing(self):
                return clock.capturing

        class cuda:  # noqa: N801 - mirrors cupy.cuda
            @staticmethod
            def get_current_stream():
                return Stream()

            @staticmethod
            def get_elapsed_time(start, stop):
                runs = clock.graph.runs[start.mark:stop.mark]
                return 1e3 * sum(clock.graph.plans[i][0] for i in runs)

        cuda.Event = Event
        self.cuda = cuda

    def empty(self, n, dtype=None):
        return type("A", (), {"data": type("D", (), {"ptr": 0x1000})()})()


class _Operand:
    data = type("D", (), {"ptr": 0x2000})()
    dtype = "float32"


def _tuner(graph, capturing=False, timeable=True):
    conv = cupy_cudnn.CudnnConv2d.__new__(cupy_cudnn.CudnnConv2d)
    conv.m = clock = _Clock(graph, capturing)
    conv._scratch = lambda x, seed: x
    conv._reference = lambda built, ptrs, handle, out: (graph.runs.append(graph.selected)
                                                         or ("ref", 1.0))
    conv._deviation = lambda out, ref: 1.0 if graph.runs[-1] in graph.wrong else 0.0
    conv._handle = lambda: "handle"
    conv._tune_lock = threading.Lock()
    conv.tuned = 0
    conv.untimed = []
    ta, tb, tout = (type("T", (), {"uid": u})() for u in (1, 2, 3))
    return conv, clock, cupy_cudnn._Built(graph, ta, tb, tout, timeable)


def test_a_convolution_plan_is_timed_once_on_its_first_call(monkeypatch):
    monkeypatch.setattr(vtl.backends.cudnn, "benchmark", True)
    g = _Graph([(None, 0), (3.0, 0), (1.0, 4096), (2.0, 0)])
    conv, clock, built = _tuner(g)
    assert built.ws == 0
    conv._tune(built, _Operand(), _Operand(), _Operand())
    assert built.tuned and g.selected == 2 and built.ws == 4096 and conv.tuned == 1
    # the heuristics' plan once for the reference, then each candidate once untimed and
    # TUNE_RUNS times timed, and the fastest few again
    timings = 3 + min(3, cupy_cudnn.TUNE_RECHECK)
    assert clock.waits == timings and len(g.runs) == 1 + timings * (1 + cupy_cudnn.TUNE_RUNS)
    conv._tune(built, _Operand(), _Operand(), _Operand())
    assert clock.waits == timings and conv.tuned == 1


def test_a_faster_plan_that_computes_something_else_is_not_taken(monkeypatch):
    monkeypatch.setattr(vtl.backends.cudnn, "benchmark", True)
    g = _Graph([(None, 0), (3.0, 0), (1.0, 4096), (2.0, 0)])
    g.wrong = {2}
    conv, clock, built = _tuner(g)
    conv._tune(built, _Operand(), _Operand(), _Operand())
    assert built.tuned and g.selected == 3 and conv.tuned == 1


def test_a_plan_that_fails_to_run_is_not_a_candidate(monkeypatch):
    monkeypatch.setattr(vtl.backends.cudnn, "benchmark", True)
    g = _Graph([(None, 0), (3.0, 0), (1.0, 4096), (2.0, 0)])
    execute = g.execute

    def failing(ptrs, workspace, handle=None):
        if g.selected == 2:
            raise MemoryError("out of memory allocating the workspace")
        execute(ptrs, workspace, handle)

    g.execute = failing
    conv, clock, built = _tuner(g)
    conv._tune(built, _Operand(), _Operand(), _Operand())
    assert built.tuned and g.selected == 3 and built.ws == 0 and conv.untimed == []


def test_timing_that_fails_keeps_the_heuristics_plan_consistently(monkeypatch):
    monkeypatch.setattr(vtl.backends.cudnn, "benchmark", True)
    g = _Graph([(None, 0), (3.0, 0), (1.0, 4096)])
    conv, clock, built = _tuner(g)

    def broken(*args):
        raise RuntimeError("no memory for the scratch operands")

    conv._deviation = broken  # fails while the second plan is being checked
    conv._tune(built, _Operand(), _Operand(), _Operand())
    # every candidate failed: the heuristics' plan, with its own workspace and launcher
    assert built.tuned and g.selected == 1 and built.ws == 0 and conv.tuned == 0
    g2 = _Graph([(None, 0), (3.0, 0), (1.0, 4096)])
    conv, clock, built = _tuner(g2)
    conv._reference = broken
    conv._tune(built, _Operand(), _Operand(), _Operand())
    assert built.tuned and g2.selected == 1 and built.ws == 0
    assert conv.untimed == ["RuntimeError: no memory for the scratch operands"]


def test_fastest_plan_puts_the_heuristics_plan_back_when_measuring_raises():
    g = _Graph([(None, 0), (3.0, 0), (1.0, 4096)])

    def measure(workspace):
        if g.selected == 2:
            raise KeyboardInterrupt
        return 1.0

    with pytest.raises(KeyboardInterrupt):
        fastest_plan(g, measure)
    assert g.selected == 1


@pytest.mark.parametrize("why", ["benchmark off", "vtl.compile captures", "CUDA captures",
                                 "asymmetric padding"])
def test_no_timing_where_it_is_off_would_wait_in_a_capture_or_may_be_wrong(monkeypatch, why):
    monkeypatch.setattr(vtl.backends.cudnn, "benchmark", why != "benchmark off")
    if why == "vtl.compile captures":
        monkeypatch.setattr(vtl.capture, "active", lambda: True)
    g = _Graph([(None, 0), (3.0, 0), (1.0, 4096)])
    conv, clock, built = _tuner(g, capturing=why == "CUDA captures",
                                timeable=why != "asymmetric padding")
    conv._tune(built, _Operand(), _Operand(), _Operand())
    assert built.tuned and g.selected == 1 and built.ws == 0  # the heuristics' plan, kept
    assert clock.waits == 0 and g.runs == [] and conv.tuned == 0
