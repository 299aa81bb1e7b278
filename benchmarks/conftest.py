"""Benchmark fixtures: each case runs on every available backend, and the
reference libraries run in the same session so ratios are meaningful.

Run with ``make bench`` or ``pytest benchmarks --benchmark-only
--benchmark-enable --benchmark-json=bench.json``; ``python benchmarks/report.py
bench.json`` prints the vtl/reference ratios.

Every case is parametrized with ``impl``: ``vtl`` (on the ``backend`` of the
case) and the references of that backend, timed in the same process. The
numpy backend is compared with raw NumPy and PyTorch on the CPU (``numpy``,
``torch-cpu``); the accelerator backends (cupy, wgpu) with raw CuPy and PyTorch
on CUDA (``cupy``, ``torch-cuda``) where those are importable and have a GPU.
A case's ``benchmark.group`` is ``<case>-<backend>``.

Environment:

* ``VTL_TEST_BACKENDS=numpy,wgpu`` restricts the backends (default: all available).
* ``VTL_BENCH_QUICK=1`` shrinks every size (a smoke run on a laptop or on lavapipe)
  and deselects the cases whose size parameter ``n`` exceeds 256 (the wgpu
  library's SGEMM sizes).
* ``VTL_BENCH_FULL=1`` also runs the big sizes on the CPU (matmul above 1024 etc.).
* ``VTL_BENCH_KEEP_DATA=1`` keeps the raw per-round timings in the JSON (large).
* ``VTL_BENCH_BUDGET_S=400`` skips the cases that would start after that many
  seconds, so a run under a hard time limit still ends and writes its JSON.

Smoke runs: ``VTL_BENCH_QUICK=1 pytest benchmarks -o addopts= --benchmark-disable`` runs
every case once, with the agreement tests (about a minute with wgpu on lavapipe);
``VTL_BENCH_QUICK=1 pytest benchmarks --benchmark-only --benchmark-min-rounds=1
--benchmark-max-time=0.00001 --benchmark-json=b.json`` also writes the JSON for report.py.
The full run on the GPU machine is ``benchmarks/gpu_run.sh``.

GPU timings synchronize inside the timed call (:func:`synchronize`, ``Ref.sync``).
TensorFloat-32 is off for CuPy and PyTorch, so float32 means float32.
"""

from __future__ import annotations

import importlib
import os
import platform
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("CUPY_TF32", "0")
importlib.import_module("vtl")  # before NumPy, so that it can shorten OpenBLAS's idle spin

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from vtl import backends  # noqa: E402

QUICK = os.environ.get("VTL_BENCH_QUICK", "").strip() not in ("", "0")
FULL = os.environ.get("VTL_BENCH_FULL", "").strip() not in ("", "0")
BUDGET_S = float(os.environ.get("VTL_BENCH_BUDGET_S", "0") or 0)
_START = time.monotonic()

CPU_REFS = ("numpy", "torch-cpu")
GPU_REFS = ("cupy", "torch-cuda")


def _selected() -> list[str]:
    env = os.environ.get("VTL_TEST_BACKENDS", "").strip()
    if env:
        return [b.strip() for b in env.split(",") if b.strip()]
    return backends.available_names()


@pytest.fixture(params=_selected())
def backend(request: pytest.FixtureRequest) -> str:
    return _require(request.param)


def _require(name: str) -> str:
    b = backends.get(name)
    if not b.is_available:
        pytest.skip(f"backend {name} unavailable: {b.unavailable_reason}")
    return name


def pytest_collection_modifyitems(config: Any, items: list) -> None:
    if not QUICK:
        return
    big = [it for it in items if isinstance(_param(it, "n"), int) and _param(it, "n") > 256]
    if big:
        config.hook.pytest_deselected(items=big)
        items[:] = [it for it in items if it not in big]


def _param(item: Any, name: str) -> Any:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get(name) if callspec is not None else None


@pytest.fixture(autouse=True)
def _time_budget() -> None:
    if BUDGET_S and time.monotonic() - _START > BUDGET_S:
        pytest.skip(f"VTL_BENCH_BUDGET_S={BUDGET_S:g} s spent before this case")


def synchronize(backend: str) -> None:
    """Wait for queued device work so the timing covers the computation."""
    backends.get(backend).synchronize()


def on_cpu(backend: str) -> bool:
    """Whether ``backend`` computes on the CPU (numpy; wgpu on a software adapter)."""
    if backend == "numpy":
        return True
    if backend == "wgpu":
        b = backends.get("wgpu")
        return b.is_available and b.info().get("adapter_type") == "CPU"
    return False


def references(backend: str) -> tuple[str, ...]:
    """The reference implementations a vtl backend is compared with."""
    return CPU_REFS if backend == "numpy" else GPU_REFS


def cases(refs: tuple[str, ...] = ("raw", "torch"),
          keep: Callable[[str], bool] | None = None) -> list[Any]:
    """``(backend, impl)`` parameters: vtl on each selected backend plus its references.

    ``refs`` picks the kinds of reference: ``raw`` (NumPy or CuPy) and/or ``torch``;
    ``keep(backend)`` drops backends (e.g. the CPU for the biggest sizes).
    """
    out = []
    for b in _selected():
        if keep is not None and not keep(b):
            continue
        names = ["vtl"] + [r for r in references(b)
                           if ("torch" if r.startswith("torch") else "raw") in refs]
        out.extend(pytest.param(b, n, id=f"{b}-{n}") for n in names)
    return out


class Ref:
    """One implementation of a case: ``xp`` (namespace), ``asarray``, ``sync``, ``to_numpy``."""

    def __init__(self, backend: str, impl: str) -> None:
        self.impl = impl
        self.backend = backend
        if impl == "vtl":
            import vtl

            _require(backend)
            self.xp = vtl
            self.asarray = lambda a: vtl.asarray(a, backend=backend)
            self.sync = lambda: synchronize(backend)
            self.to_numpy = lambda x: x.numpy()
        elif impl == "numpy":
            self.xp = np
            self.asarray = np.asarray
            self.sync = lambda: None
            self.to_numpy = np.asarray
        elif impl == "cupy":
            cp = cupy_or_skip()
            self.xp = cp
            self.asarray = cp.asarray
            self.sync = cp.cuda.Device().synchronize
            self.to_numpy = cp.asnumpy
        elif impl in ("torch-cpu", "torch-cuda"):
            torch = torch_or_skip(impl.split("-")[1])
            dev = impl.split("-")[1]
            self.xp = torch
            self.device = dev
            self.asarray = lambda a: torch.from_numpy(np.ascontiguousarray(a)).to(dev)
            self.sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
            self.to_numpy = lambda x: x.detach().cpu().numpy()
        else:
            raise ValueError(f"unknown implementation {impl!r}")

    def supports(self, dtype: str) -> bool:
        if self.impl != "vtl":
            return True
        import vtl

        return dtype in vtl.__array_namespace_info__().dtypes(
            device=backends.get(self.backend).device(0))


def peak_mib(backend: str, impl: str, run: Callable[[], Any]) -> float | None:
    """Peak device memory allocated by ``run()`` above what was allocated before, in MiB:
    PyTorch's ``max_memory_allocated``, or for vtl on cupy the bytes CuPy's pool handed out
    and had not taken back, followed through a ``cupy.cuda.MemoryHook`` (the same measure:
    blocks the pool keeps for reuse are not counted); ``None`` elsewhere."""
    if impl == "torch-cuda":
        import torch

        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        run()
        torch.cuda.synchronize()
        return (torch.cuda.max_memory_allocated() - base) / 2**20
    if impl == "vtl" and backend == "cupy":
        import cupy as cp

        class Peak(cp.cuda.MemoryHook):
            name = "vtl-bench-peak"

            def __init__(self) -> None:
                self.live: dict[int, int] = {}
                self.now = self.peak = 0

            def malloc_postprocess(self, device_id, size, mem_size, mem_ptr, pmem_id):
                self.live[mem_ptr] = mem_size
                self.now += mem_size
                self.peak = max(self.peak, self.now)

            def free_postprocess(self, device_id, mem_size, mem_ptr, pmem_id):
                self.now -= self.live.pop(mem_ptr, 0)

        cp.cuda.Device().synchronize()
        hook = Peak()
        with hook:
            run()
            cp.cuda.Device().synchronize()
        return hook.peak / 2**20
    return None


#: benchmark id -> the arguments of :func:`kernels_per_step` for it: counted when the JSON is
#: written, after every case is timed (a CUPTI profile could slow the launches timed after it)
_LAUNCH_COUNTS: dict[str, tuple] = {}


def count_launches_later(benchmark: Any, backend: str, impl: str, run: Callable[[], Any],
                         sync: Callable[[], Any]) -> None:
    """Have :func:`kernels_per_step` of ``run`` stored in this case's ``extra_info["kernels"]``
    once all cases are timed (where it counts anything: keeps ``run`` alive until then)."""
    if (impl == "vtl" and backend in ("cupy", "wgpu")) or impl == "torch-cuda":
        _LAUNCH_COUNTS[benchmark.fullname] = (backend, impl, run, sync)


def kernels_per_step(backend: str, impl: str, run: Callable[[], Any], sync: Callable[[], Any],
                     steps: int = 3) -> float | None:
    """Device launches per call of ``run()``: CUDA kernels, copies and fills counted through
    CUPTI (``torch.profiler``, which sees CuPy's and those a CUDA graph replays) for vtl on
    cupy and for PyTorch on CUDA; the recorded dispatches for vtl on wgpu; ``None``
    elsewhere (or without a CUDA PyTorch to count with)."""
    if impl == "vtl" and backend == "wgpu":
        from vtl.backends.wgpu._recorder import REC

        sync()
        before = REC.dispatches
        for _ in range(steps):
            run()
        sync()
        return (REC.dispatches - before) / steps
    if not (impl == "torch-cuda" or (impl == "vtl" and backend == "cupy")):
        return None
    try:
        import torch
        from torch.profiler import ProfilerActivity, profile

        if not torch.cuda.is_available():
            return None
    except ImportError:
        return None
    sync()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            run()
        sync()
    n = sum(1 for ev in prof.events() if ev.device_type.name == "CUDA")
    return n / steps


def cupy_or_skip() -> Any:
    try:
        import cupy as cp

        cp.cuda.runtime.getDeviceCount()
    except Exception as e:  # no CuPy, or no CUDA device
        pytest.skip(f"CuPy with a CUDA device is not available ({type(e).__name__})")
    return cp


def torch_or_skip(device: str = "cpu") -> Any:
    torch = pytest.importorskip("torch")
    if device == "cuda":
        if not torch.cuda.is_available():
            pytest.skip("PyTorch CUDA is not available")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    return torch


def pytest_benchmark_update_machine_info(config: Any, machine_info: dict) -> None:
    """Record the GPU and the library versions in the JSON (``report.py`` prints them)."""
    info: dict[str, Any] = {"python": platform.python_version(), "numpy": np.__version__,
                            "cpu_count": os.cpu_count(), "quick": QUICK, "full": FULL}
    import vtl

    info["vtl"] = getattr(vtl, "__version__", "?")
    info["backends"] = ",".join(_selected())
    try:
        import torch

        info["torch"] = torch.__version__
        info["torch_threads"] = torch.get_num_threads()
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
    except Exception:
        pass
    try:
        import cupy as cp

        info["cupy"] = cp.__version__
        info["cuda_runtime"] = cp.cuda.runtime.runtimeGetVersion()
        if "gpu" not in info:
            name = cp.cuda.runtime.getDeviceProperties(0)["name"]
            info["gpu"] = name.decode() if isinstance(name, bytes) else str(name)
    except Exception:
        pass
    b = backends.get("wgpu")
    if b._probed and b.is_available:
        w = b.info()
        info["wgpu"] = w.get("wgpu")
        info["wgpu_adapter"] = f"{w.get('adapter')} ({w.get('backend_type')})"
    machine_info["vtl_bench"] = info


def pytest_benchmark_update_json(config: Any, benchmarks: Any, output_json: dict) -> None:
    """Keep the JSON small: drop every round's raw timing (``VTL_BENCH_KEEP_DATA=1`` keeps them).
    A fast case runs tens of thousands of rounds; their list would make the file tens of MB.

    Then count the device launches of the cases :func:`count_launches_later` was given
    (``extra_info["kernels"]``), now that every case has been timed.
    """
    if os.environ.get("VTL_BENCH_KEEP_DATA", "").strip() in ("", "0"):
        for b in output_json.get("benchmarks", []):
            b.get("stats", {}).pop("data", None)
    for b in output_json.get("benchmarks", []):
        case = _LAUNCH_COUNTS.pop(b.get("fullname"), None)
        if case is not None:
            n = kernels_per_step(*case)
            if n is not None:
                b.setdefault("extra_info", {})["kernels"] = round(n, 1)
    _LAUNCH_COUNTS.clear()
