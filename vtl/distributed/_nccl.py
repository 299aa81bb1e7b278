"""The NCCL engine (``cupy.cuda.nccl``): collectives on CuPy arrays of one GPU per rank.

The communicator is made on first use, for the GPU of the first CuPy tensor
seen; its unique id goes from rank 0 to the others over the host engine (MPI),
so no extra network set-up is needed (a world of one needs none at all).
Operations are queued on the current CUDA stream; an event after each is
polled with the group's timeout, and on expiry the communicator is aborted
(``ncclCommAbort``) and :class:`DistributedTimeoutError` raised.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ..backends import _dtypes
from ..backends._dtypes import kind as _dkind
from ._errors import DistributedTimeoutError, engine_missing


def load_nccl() -> Any:
    """``cupy.cuda.nccl``, or a RuntimeError saying what to install."""
    try:
        import cupy  # noqa: F401
        from cupy.cuda import nccl
    except Exception as exc:
        raise engine_missing("nccl", exc) from exc
    if not getattr(nccl, "available", True):
        raise engine_missing("nccl", RuntimeError("CuPy was built without NCCL"))
    return nccl


def nccl_available() -> bool:
    try:
        load_nccl()
    except RuntimeError:
        return False
    return True


def _id_bytes(uid: Any) -> np.ndarray:
    """The 128 bytes of an NCCL unique id as int8 (CuPy gives ``bytes`` or a tuple of ints)."""
    if isinstance(uid, (bytes, bytearray)):
        return np.frombuffer(bytes(uid), dtype=np.int8)
    return np.asarray(uid, dtype=np.int64).astype(np.int8)


def _communicator(nccl: Any, world_size: int, uid: np.ndarray, rank: int) -> Any:
    """``NcclCommunicator`` from the id's bytes; older CuPy wants a tuple of ints."""
    try:
        return nccl.NcclCommunicator(world_size, uid.tobytes(), rank)
    except TypeError:
        return nccl.NcclCommunicator(world_size, tuple(int(v) for v in uid), rank)


class NCCLEngine:
    """Collectives on CuPy buffers through one NCCL communicator."""

    name = "nccl"

    def __init__(self, host: Any, device_index: int, timeout: float) -> None:
        import cupy

        nccl = load_nccl()
        self.cupy, self.nccl = cupy, nccl
        self.rank, self.world_size = host.rank, host.world_size
        self.device_index = device_index
        self.timeout = timeout
        uid = np.zeros(128, dtype=np.int8)
        if self.rank == 0:
            uid[:] = _id_bytes(nccl.get_unique_id())
        host.broadcast(uid, 0, "NCCL set-up (broadcast of the unique id)")
        with cupy.cuda.Device(device_index):
            self.comm = _communicator(nccl, self.world_size, uid, self.rank)
        n = nccl
        self._dtypes = {np.dtype(k): v for k, v in (
            ("int8", n.NCCL_INT8), ("uint8", n.NCCL_UINT8), ("int32", n.NCCL_INT32),
            ("uint32", n.NCCL_UINT32), ("int64", n.NCCL_INT64), ("uint64", n.NCCL_UINT64),
            ("float16", n.NCCL_FLOAT16), ("float32", n.NCCL_FLOAT32),
            ("float64", n.NCCL_FLOAT64))}
        # ncclBfloat16 (9) since NCCL 2.10; CuPy's bindings may not name it
        self._dtypes[_dtypes.bfloat16] = getattr(n, "NCCL_BFLOAT16", 9)
        self._ops = {"sum": n.NCCL_SUM, "prod": n.NCCL_PROD, "max": n.NCCL_MAX,
                     "min": n.NCCL_MIN}
        self._broken: str | None = None

    # NCCL has no bool, int16 or complex types: bool and int16 go as bytes/halves of
    # the same width where the op allows, complex as pairs of floats (sums only)
    def _view(self, buf: Any, op: str | None) -> tuple[Any, int]:
        dt = np.dtype(buf.dtype)
        if dt == np.bool_:
            buf = buf.view(self.cupy.uint8)
        elif _dkind(dt) == "c":
            if op not in (None, "sum"):
                raise TypeError(f"NCCL cannot apply op={op!r} to complex data")
            buf = buf.view(np.dtype(f"f{dt.itemsize // 2}"))
        elif np.dtype(buf.dtype) not in self._dtypes:
            raise TypeError(f"NCCL has no data type for {dt}")
        return buf, self._dtypes[np.dtype(buf.dtype)]

    def _check(self, buf: Any) -> None:
        if self._broken:
            raise RuntimeError(f"vtl.distributed: the NCCL communicator is unusable: "
                               f"{self._broken}")
        if buf.device.id != self.device_index:
            raise ValueError(f"vtl.distributed: this rank's NCCL communicator is on GPU "
                             f"{self.device_index}, got a tensor on GPU {buf.device.id}; keep "
                             "every tensor of a rank on one GPU")

    def _wait(self, stream: Any, what: str) -> None:
        ev = stream.record()
        end = time.monotonic() + self.timeout
        pause = 0.0
        while not ev.done:
            if time.monotonic() > end:
                self._broken = (f"{what} timed out after {self.timeout:g} s on rank "
                                f"{self.rank} of {self.world_size}")
                self.comm.abort()
                raise DistributedTimeoutError(
                    f"vtl.distributed: {self._broken}: not every rank joined it (a rank died, "
                    "hangs, or skipped this collective); the NCCL communicator was aborted")
            time.sleep(pause)
            pause = min(pause * 2 + 2e-5, 1e-3)

    def allreduce(self, buf: Any, op: str, what: str = "all_reduce") -> Any:
        self._check(buf)
        v, dt = self._view(buf, op)
        if np.dtype(buf.dtype) == np.bool_ and op not in ("max", "min"):
            raise TypeError(f"op={op!r} is not defined for bool data")
        with self.cupy.cuda.Device(self.device_index):
            s = self.cupy.cuda.get_current_stream()
            self.comm.allReduce(v.data.ptr, v.data.ptr, v.size, dt, self._ops[op], s.ptr)
            self._wait(s, what)
        return buf

    def broadcast(self, buf: Any, src: int, what: str = "broadcast") -> Any:
        self._check(buf)
        v, dt = self._view(buf, None)
        with self.cupy.cuda.Device(self.device_index):
            s = self.cupy.cuda.get_current_stream()
            self.comm.broadcast(v.data.ptr, v.data.ptr, v.size, dt, src, s.ptr)
            self._wait(s, what)
        return buf

    def allgather(self, send: Any, what: str = "all_gather") -> Any:
        self._check(send)
        with self.cupy.cuda.Device(self.device_index):
            recv = self.cupy.empty((self.world_size, *send.shape), dtype=send.dtype)
            v, dt = self._view(send, None)
            r, _ = self._view(recv, None)
            s = self.cupy.cuda.get_current_stream()
            self.comm.allGather(v.data.ptr, r.data.ptr, v.size, dt, s.ptr)
            self._wait(s, what)
        return recv

    def reduce_scatter(self, send: Any, op: str, what: str = "reduce_scatter") -> Any:
        self._check(send)
        with self.cupy.cuda.Device(self.device_index):
            recv = self.cupy.empty(send.shape[1:], dtype=send.dtype)
            v, dt = self._view(send, op)
            r, _ = self._view(recv, op)
            s = self.cupy.cuda.get_current_stream()
            self.comm.reduceScatter(v.data.ptr, r.data.ptr, r.size, dt, self._ops[op], s.ptr)
            self._wait(s, what)
        return recv

    def close(self) -> None:
        if not self._broken:
            self.comm.destroy()
