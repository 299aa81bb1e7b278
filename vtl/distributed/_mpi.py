"""The MPI engine (mpi4py): collectives on contiguous host NumPy buffers.

Every collective is started as a non-blocking request (``Iallreduce``,
``Ibcast``, ...) on the process group's own communicator (a duplicate of
``COMM_WORLD``) and polled until it completes or the group's timeout passes;
then :class:`DistributedTimeoutError` names the operation, the rank and the
timeout, instead of hanging forever on a rank that died or never arrived.
Arrays travel as buffers (``MPI.IN_PLACE`` where the result replaces the input),
never pickled.

A collective that timed out cannot be cancelled, and ``MPI_Finalize`` at exit
would wait for it forever; so after a timeout, or an uncaught exception in a
job of several ranks, this process calls ``MPI_Abort`` when it exits, which
ends every rank of the job (mpiexec then reports a non-zero exit status).
"""

from __future__ import annotations

import atexit
import sys
import time
from typing import Any

import numpy as np

from ._errors import DistributedTimeoutError, engine_missing

_MPI: Any = None


def load_mpi() -> Any:
    """``mpi4py.MPI`` (initialising MPI), or a RuntimeError saying what to install."""
    global _MPI
    if _MPI is None:
        try:
            from mpi4py import MPI
        except Exception as exc:  # ImportError, or a missing libmpi behind the wheel
            raise engine_missing("mpi", exc) from exc
        _MPI = MPI
        atexit.register(_abort_if_broken)  # runs before mpi4py finalizes MPI
    return _MPI


_broken: list[str] = []


def _abort_if_broken() -> None:
    if _broken and _MPI is not None and _MPI.Is_initialized() and not _MPI.Is_finalized():
        sys.stderr.write(f"vtl.distributed: {_broken[0]}; calling MPI_Abort so that the other "
                         "ranks do not hang\n")
        sys.stderr.flush()
        _MPI.COMM_WORLD.Abort(1)


def _abort_on_uncaught_exception(rank: int) -> None:
    """A rank that dies of an exception ends the job (as ``python -m mpi4py`` does) instead
    of waiting in ``MPI_Finalize`` while the others wait for it."""
    prev = sys.excepthook
    if getattr(prev, "_vtl_dist", False):
        return

    def hook(tp: Any, value: Any, tb: Any) -> None:
        prev(tp, value, tb)
        if not _broken:
            _broken.append(f"rank {rank} died of an uncaught {tp.__name__}")

    hook._vtl_dist = True  # type: ignore[attr-defined]
    sys.excepthook = hook


def _low(dtype: np.dtype) -> bool:
    """float16 or bfloat16 (which MPI's predefined types lack)."""
    return dtype.itemsize == 2 and dtype.kind in "fV"


def _op(MPI: Any, op: str, dtype: np.dtype) -> Any:
    if dtype == np.bool_:
        return {"max": MPI.LOR, "min": MPI.LAND}[op]
    return {"sum": MPI.SUM, "prod": MPI.PROD, "max": MPI.MAX, "min": MPI.MIN}[op]


# Poll a pending collective without sleeping for this long first: each Test call
# moves a pipelined transfer on, so sleeping between them slows large all-reduces.
_SPIN_S = 0.05

class MPIEngine:
    """Collectives over an MPI communicator with a deadline on each."""

    name = "mpi"

    def __init__(self, timeout: float) -> None:
        MPI = load_mpi()
        self.MPI = MPI
        self.comm = MPI.COMM_WORLD.Dup()
        self.rank = self.comm.Get_rank()
        self.world_size = self.comm.Get_size()
        self.timeout = timeout
        self.local_rank = self.comm.Split_type(MPI.COMM_TYPE_SHARED).Get_rank()
        if self.world_size > 1:
            _abort_on_uncaught_exception(self.rank)

    def _wait(self, req: Any, what: str) -> None:
        if req.Test():
            return
        start = time.monotonic()
        end = start + self.timeout
        spin_until = start + _SPIN_S
        pause = 0.0
        while not req.Test():
            now = time.monotonic()
            if now > end:
                msg = (f"{what} timed out after {self.timeout:g} s on rank {self.rank} of "
                       f"{self.world_size}: not every rank joined it (a rank died, hangs, or "
                       "skipped this collective)")
                _broken.append(msg)
                raise DistributedTimeoutError(
                    f"vtl.distributed: {msg}. The pending MPI operation cannot be cancelled: "
                    "this process group is unusable, and MPI_Abort ends the job when this "
                    "process exits (or call vtl.distributed.abort()). Set the limit with "
                    "init_process_group(timeout=seconds).")
            if now > spin_until:  # MPI progresses a large message only inside Test
                time.sleep(pause)
                pause = min(pause * 2 + 1e-5, 2e-4)

    def check(self) -> None:
        if _broken:
            raise RuntimeError(f"vtl.distributed: the process group is unusable: {_broken[0]}")

    def allreduce(self, buf: np.ndarray, op: str, what: str = "all_reduce") -> np.ndarray:
        self.check()
        if _low(buf.dtype):  # MPI has no float16/bfloat16: reduced in float32, rounded once
            wide = buf.astype(np.float32)
            self.allreduce(wide, op, what)
            buf[...] = wide.astype(buf.dtype)
            return buf
        req = self.comm.Iallreduce(self.MPI.IN_PLACE, buf, op=_op(self.MPI, op, buf.dtype))
        self._wait(req, what)
        return buf

    def broadcast(self, buf: np.ndarray, src: int, what: str = "broadcast") -> np.ndarray:
        self.check()
        self._wait(self.comm.Ibcast(buf.view(np.uint16) if _low(buf.dtype) else buf, root=src),
                   what)
        return buf

    def allgather(self, send: np.ndarray, what: str = "all_gather") -> np.ndarray:
        self.check()
        recv = np.empty((self.world_size, *send.shape), dtype=send.dtype)
        if _low(send.dtype):  # as 16-bit words (MPI has no float16/bfloat16)
            self._wait(self.comm.Iallgather(np.ascontiguousarray(send).view(np.uint16),
                                            recv.view(np.uint16)), what)
            return recv
        self._wait(self.comm.Iallgather(send, recv), what)
        return recv

    def reduce_scatter(self, send: np.ndarray, op: str,
                       what: str = "reduce_scatter") -> np.ndarray:
        self.check()
        if _low(send.dtype):  # reduced in float32, rounded once
            return self.reduce_scatter(send.astype(np.float32), op, what).astype(send.dtype)
        recv = np.empty(send.shape[1:], dtype=send.dtype)
        req = self.comm.Ireduce_scatter_block(send, recv, op=_op(self.MPI, op, send.dtype))
        self._wait(req, what)
        return recv

    def barrier(self, what: str = "barrier") -> None:
        self.check()
        self._wait(self.comm.Ibarrier(), what)

    def close(self) -> None:
        if not _broken and not self.MPI.Is_finalized():
            self.comm.Free()

    def abort(self, code: int) -> None:
        self.MPI.COMM_WORLD.Abort(code)
