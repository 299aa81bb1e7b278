"""The cupy backend's cuDNN plumbing without a GPU (fakes for CuPy and the frontend): a
handle per thread and device bound to the current stream, graphs built once per key with
refusals remembered, and the direct launcher's fallback to the frontend's ``execute``."""

from __future__ import annotations

import threading

from vtl.backends.cupy.cudnn import GraphCache, Handles, direct_launch


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
