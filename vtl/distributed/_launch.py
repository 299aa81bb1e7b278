"""What the launcher (``mpiexec``/``mpirun``/``srun``) tells a process through its environment."""

from __future__ import annotations

import os

# (rank, size, local rank) variables of Open MPI, MPICH/Hydra (PMI), PMIx, MVAPICH and Slurm
_RANK = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "MV2_COMM_WORLD_RANK")
_SIZE = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE")
_LOCAL = ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "MV2_COMM_WORLD_LOCAL_RANK",
          "SLURM_LOCALID")


def _first_int(names: tuple[str, ...]) -> int | None:
    for n in names:
        v = os.environ.get(n)
        if v is not None and v.strip().lstrip("-").isdigit():
            return int(v)
    return None


def launched_by_mpi() -> bool:
    """Whether this process was started by an MPI launcher."""
    return _first_int(_RANK) is not None or _first_int(_SIZE) is not None


def env_world_size() -> int | None:
    """The launcher's world size, or None outside a launcher."""
    return _first_int(_SIZE)


def env_local_rank() -> int | None:
    """The rank among the processes of this host, or None when the launcher does not say."""
    return _first_int(_LOCAL)
