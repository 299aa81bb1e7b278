"""The process group: which engines serve this process, its rank and the world size."""

from __future__ import annotations

import datetime
import os
from typing import Any

from . import _launch
from ._local import LocalEngine

__all__ = [
    "init_process_group", "destroy_process_group", "is_initialized", "get_rank",
    "get_world_size", "get_local_rank", "get_backend", "barrier", "abort", "is_available",
]

_DEFAULT_TIMEOUT = 1800.0  # seconds, as PyTorch's default for CPU process groups
_BACKENDS = ("auto", "mpi", "nccl")


class _Group:
    """The engines of the initialised group: ``host`` (MPI, or local for a world of one)
    for NumPy/staged tensors, and NCCL (made on first use) for CuPy tensors."""

    def __init__(self, backend: str, host: Any, use_nccl: bool, timeout: float) -> None:
        self.backend = backend
        self.host = host
        self.use_nccl = use_nccl
        self.timeout = timeout
        self.nccl: Any = None

    def nccl_engine(self, device_index: int) -> Any:
        if self.nccl is None:
            from ._nccl import NCCLEngine

            self.nccl = NCCLEngine(self.host, device_index, self.timeout)
        return self.nccl


_group: _Group | None = None


def _seconds(timeout: Any) -> float:
    if timeout is None:
        env = os.environ.get("VTL_DIST_TIMEOUT")
        return float(env) if env else _DEFAULT_TIMEOUT
    if isinstance(timeout, datetime.timedelta):
        timeout = timeout.total_seconds()
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f"init_process_group: timeout must be a positive number of seconds "
                         f"or a datetime.timedelta, got {timeout!r}")
    return float(timeout)


def is_available() -> bool:
    """Whether the MPI engine (mpi4py with an MPI library) can be loaded.

    Returns:
        A bool.
    """
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


def init_process_group(backend: str = "auto", *, rank: int | None = None,
                       world_size: int | None = None, timeout: Any = None) -> None:
    """Join the data-parallel job; every rank calls it once, before any collective.

    ``backend``:

    * ``"auto"``: MPI when the process was launched by ``mpiexec``/``mpirun``
      (or ``world_size > 1``), otherwise a world of one process that needs no
      MPI at all; CuPy tensors use NCCL when CuPy has it, NumPy tensors MPI,
      other backends (wgpu) are staged through host memory and MPI.
    * ``"mpi"``: MPI for every tensor (CuPy ones staged through the host), even
      in a single process not started by a launcher.
    * ``"nccl"``: NCCL for CuPy tensors (an error if CuPy lacks it), MPI for
      the rest and to hand out NCCL's unique id.

    Rank and world size come from the MPI communicator (the launcher's
    environment); ``rank``/``world_size`` given here are checked against it.
    ``timeout`` (seconds or ``datetime.timedelta``; default env
    ``VTL_DIST_TIMEOUT`` or 1800) bounds every collective: a rank that dies or
    never arrives makes the others raise
    :class:`~vtl.distributed.DistributedTimeoutError` instead of hanging. A
    missing engine raises ``RuntimeError`` saying what to install.

    Args:
        backend: ``'auto'``, ``'mpi'`` or ``'nccl'`` (see above).
        rank: This process's rank, checked against MPI's.
        world_size: The number of processes, checked against MPI's.
        timeout: Bound of every collective: seconds or a ``datetime.timedelta``.

    Raises:
        RuntimeError: If the group is already initialised or the engine is missing.
        ValueError: If ``backend`` is unknown, or ``rank``/``world_size`` is invalid or differs
            from MPI's.
    """
    global _group
    if _group is not None:
        raise RuntimeError("init_process_group: the default process group is already "
                           "initialised; call destroy_process_group() first")
    if backend not in _BACKENDS:
        raise ValueError(f"init_process_group: backend must be one of {_BACKENDS}, got "
                         f"{backend!r}")
    for name, v in (("rank", rank), ("world_size", world_size)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            raise ValueError(f"init_process_group: {name} must be a non-negative int, got {v!r}")
    secs = _seconds(timeout)
    launched = _launch.launched_by_mpi()
    want_mpi = backend == "mpi" or launched or (world_size is not None and world_size > 1)
    use_nccl = False
    if backend == "nccl":
        from ._nccl import load_nccl

        load_nccl()  # raises with an install hint
        use_nccl = True
    elif backend == "auto":
        from ._nccl import nccl_available

        use_nccl = nccl_available()
    if want_mpi:
        from ._mpi import MPIEngine

        host: Any = MPIEngine(secs)
    else:
        host = LocalEngine(secs)
    if world_size is not None and world_size != host.world_size:
        how = ("" if launched else "; this process was not started by an MPI launcher: run "
               f"`mpiexec -n {world_size} python ...`")
        raise ValueError(f"init_process_group: world_size={world_size} was given but the "
                         f"job has {host.world_size} process(es){how}")
    if rank is not None and rank != host.rank:
        raise ValueError(f"init_process_group: rank={rank} was given but MPI says this "
                         f"process is rank {host.rank}")
    host.barrier("init_process_group")  # every rank has arrived (or a timeout error)
    name = "nccl" if use_nccl else ("mpi" if want_mpi else "local")
    _group = _Group(name, host, use_nccl, secs)


def _require(what: str) -> _Group:
    if _group is None:
        raise RuntimeError(f"vtl.distributed.{what}: the default process group is not "
                           "initialised; call vtl.distributed.init_process_group() first")
    return _group


def is_initialized() -> bool:
    """Whether :func:`init_process_group` has been called (and not destroyed).

    Returns:
        A bool.
    """
    return _group is not None


def get_rank() -> int:
    """This process's rank, ``0 .. world_size - 1``.

    Returns:
        The rank, an int.

    Raises:
        RuntimeError: If the process group is not initialised.
    """
    return _require("get_rank").host.rank


def get_world_size() -> int:
    """The number of processes in the group.

    Returns:
        The world size, an int.

    Raises:
        RuntimeError: If the process group is not initialised.
    """
    return _require("get_world_size").host.world_size


def get_local_rank() -> int:
    """The rank among the processes on this host (pick the GPU with it).

    Returns:
        The local rank, an int.

    Raises:
        RuntimeError: If the process group is not initialised.
    """
    g = _require("get_local_rank")
    env = _launch.env_local_rank()
    return g.host.local_rank if env is None else env


def get_backend() -> str:
    """``"mpi"``, ``"nccl"`` (MPI plus NCCL for CuPy tensors) or ``"local"`` (one process).

    Returns:
        The backend's name.

    Raises:
        RuntimeError: If the process group is not initialised.
    """
    return _require("get_backend").backend


def barrier() -> None:
    """Wait until every rank has reached this call (bounded by the group's timeout)."""
    _require("barrier").host.barrier("barrier")


def destroy_process_group() -> None:
    """Leave the group (free its communicators); :func:`init_process_group` may follow."""
    global _group
    g = _require("destroy_process_group")
    _group = None
    if g.nccl is not None:
        g.nccl.close()
    g.host.close()


def abort(code: int = 1) -> None:
    """End every process of the job at once (``MPI_Abort``); use after a timeout error.

    Args:
        code: The exit code.
    """
    if _group is not None:
        _group.host.abort(code)
    try:
        from ._mpi import _MPI
    except ImportError:  # pragma: no cover
        _MPI = None
    if _MPI is not None:
        _MPI.COMM_WORLD.Abort(code)
    os._exit(code)
