"""``vtl.distributed``: data-parallel training over MPI (mpi4py) and NCCL (CuPy).

>>> import vtl.distributed as dist
>>> dist.init_process_group()                 # rank/world size from mpiexec
>>> model = dist.DistributedDataParallel(model)
>>> sampler = dist.DistributedSampler(train_set, seed=0)
>>> loader = vtl.data.DataLoader(train_set, batch_size=64, sampler=sampler)
>>> vtl.train.fit(model, loader, loss_fn, opt, epochs)   # bars/checkpoints on rank 0

Launch with ``mpiexec -n 4 python train.py``. NumPy tensors use MPI on their
buffers, CuPy tensors NCCL (bootstrapped over MPI), wgpu tensors are staged
through host memory and MPI. Every collective is bounded by the group's
``timeout``: a rank that dies or never arrives makes the others raise
:class:`DistributedTimeoutError` (and the job is aborted when the process
exits) instead of hanging. Without a launcher, ``init_process_group()`` makes
a world of one process, so the same script also runs alone. Install the MPI
engine with ``pip install vtl[distributed]`` plus an MPI runtime (e.g. Debian's
``openmpi-bin``).
"""

from ._errors import DistributedTimeoutError
from .collectives import (
    ReduceOp,
    all_gather,
    all_gather_into_tensor,
    all_reduce,
    broadcast,
    reduce_scatter,
    reduce_scatter_tensor,
)
from .ddp import DistributedDataParallel
from .group import (
    abort,
    barrier,
    destroy_process_group,
    get_backend,
    get_local_rank,
    get_rank,
    get_world_size,
    init_process_group,
    is_available,
    is_initialized,
)
from .sampler import DistributedSampler

__all__ = [
    "init_process_group", "destroy_process_group", "is_initialized", "is_available",
    "get_rank", "get_world_size", "get_local_rank", "get_backend", "barrier", "abort",
    "all_reduce", "broadcast", "all_gather", "all_gather_into_tensor", "reduce_scatter",
    "reduce_scatter_tensor", "ReduceOp", "DistributedDataParallel", "DistributedSampler",
    "DistributedTimeoutError",
]
