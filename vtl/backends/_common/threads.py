"""The CPU thread pool of the NumPy kernels: a persistent pool of :func:`num_threads`
threads (the usable CPUs, capped by ``VTL_NUM_THREADS``), :func:`parallel_for` over
contiguous ranges, and per-thread :func:`scratch` buffers. NumPy releases the GIL in copies,
ufuncs and BLAS calls, so memory-bound passes split over images or planes run in parallel.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

__all__ = ["PASS_GRAIN", "num_threads", "parallel_for", "pass_threads", "scratch", "set_limit",
           "usable_cpus"]

_pool: ThreadPoolExecutor | None = None
_pool_key: tuple[int, int] = (0, 0)
_pool_lock = threading.Lock()
_local = threading.local()


#: how long (s) :func:`usable_cpus` keeps the affinity mask it read: kernels ask for the
#: thread count many times a step, and the mask changes rarely (``taskset``, a cgroup)
CPUS_TTL = 1.0
_cpus: tuple[float, int] = (float("-inf"), 1)


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one, read
    again at most every :data:`CPUS_TTL` seconds)."""
    global _cpus
    now = time.monotonic()
    if now - _cpus[0] < CPUS_TTL:
        return _cpus[1]
    try:
        n = max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):
        n = max(os.cpu_count() or 1, 1)
    _cpus = (now, n)
    return n


#: the cap set by ``vtl.set_num_threads`` (``None``: ``VTL_NUM_THREADS``, else none)
_limit: int | None = None


def set_limit(n: int) -> None:
    """Cap the pool's threads at ``n`` (``vtl.set_num_threads``)."""
    global _limit
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_threads(): expected a positive int, got {n!r}")
    _limit = n


def num_threads() -> int:
    """Threads of the NumPy kernels' pool: the usable CPUs, capped by
    ``vtl.set_num_threads`` or else ``VTL_NUM_THREADS``."""
    n = usable_cpus()
    if _limit is not None:
        return min(n, _limit)
    env = os.environ.get("VTL_NUM_THREADS", "").strip()
    if env:
        try:
            cap = int(env)
        except ValueError:
            cap = 0
        if cap < 1:
            raise ValueError(f"VTL_NUM_THREADS must be a positive integer, got {env!r}")
        n = min(n, cap)
    return n


#: elements of a memory-bound pass per pool thread (at least two threads once a pass is split):
#: waking a thread costs tens of microseconds, more than it gains on fewer elements, so on
#: a many-core machine a pass of a million elements takes 8 threads, not all of them
#: (0: every thread from the pass's threshold on)
PASS_GRAIN = 1 << 17


def pass_threads(size: int, threshold: int) -> int:
    """Threads for a memory-bound pass over ``size`` elements: 1 below ``threshold``, else
    one per :data:`PASS_GRAIN` elements (at least 2), at most :func:`num_threads`."""
    if size < threshold:
        return 1
    n = num_threads()
    if PASS_GRAIN > 0:
        n = min(n, max(2, size // PASS_GRAIN))
    return n


def _executor(workers: int) -> ThreadPoolExecutor:
    """The persistent pool with room for ``workers`` threads (started on demand; a new pool
    after a fork, whose child has none of the parent's threads)."""
    global _pool, _pool_key
    pid = os.getpid()
    with _pool_lock:
        if _pool is None or _pool_key[0] != pid or _pool_key[1] < workers:
            size = max(workers, usable_cpus())
            # a replaced pool is not shut down (another thread may still submit to it);
            # its idle threads end when it is collected
            _pool = ThreadPoolExecutor(size, thread_name_prefix="vtl-numpy")
            _pool_key = (pid, size)
        return _pool


def scratch(slot: str, shape: tuple[int, ...], dtype: Any) -> Any:
    """A temporary of ``shape`` in this thread's reusable buffer ``slot`` (grown as needed
    and kept: one or two buffers of the largest temporaries seen per calling thread). Fresh
    large temporaries cost page faults on every call (the allocator hands them back to the
    OS), milliseconds per call for a layer of a small CNN."""
    dt = np.dtype(dtype)
    size = dt.itemsize
    for v in shape:
        size *= v
    bufs = getattr(_local, "scratch", None)
    if bufs is None:
        bufs = _local.scratch = {}
    buf = bufs.get(slot)
    if buf is None or buf.size < size:
        buf = bufs[slot] = np.empty(size, dtype=np.uint8)
    return buf[:size].view(dt).reshape(shape)


def _run_chunk(fn: Callable[[int, int], None], i: int, j: int) -> None:
    _local.inside = True
    try:
        fn(i, j)
    finally:
        _local.inside = False


def parallel_for(fn: Callable[[int, int], None], n: int, threads: int | None = None) -> None:
    """``fn(i, j)`` over ``[0, n)`` split into ``threads`` contiguous ranges (default
    :func:`num_threads`), one on the calling thread and the others on the pool; returns
    when all are done and re-raises the first error. Runs ``fn(0, n)`` inline for one
    thread, one item, or when called from inside the pool (no nested waits)."""
    t = min(num_threads() if threads is None else threads, n)
    if t <= 1 or getattr(_local, "inside", False):
        fn(0, n)
        return
    bounds = [n * i // t for i in range(t + 1)]
    pool = _executor(t - 1)
    futures = [pool.submit(_run_chunk, fn, bounds[i], bounds[i + 1]) for i in range(1, t)]
    err: BaseException | None = None
    try:
        _run_chunk(fn, bounds[0], bounds[1])
    except BaseException as e:  # noqa: BLE001 - re-raised below after the others finish
        err = e
    for f in futures:  # wait for every range: none may still write after the return
        try:
            f.result()
        except BaseException as e:  # noqa: BLE001
            err = err or e
    if err is not None:
        raise err
