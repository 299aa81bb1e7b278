"""What runs inside DataLoader workers: the worker loop, :func:`get_worker_info`, and the
host form of batches (NumPy arrays, turned into tensors in the main process).

Workers are processes (or, where processes cannot serve, threads; see
:class:`vtl.data.DataLoader`). A worker computes everything on the host: it makes vtl's
default backend ``numpy`` for itself, collates samples into NumPy arrays and sends those;
the main process places them on the loader's device. So a worker never touches a GPU.
"""

from __future__ import annotations

import io
import numbers
import os
import pickle
import queue
import random
import signal
import sys
import threading
import traceback
import types
from collections.abc import Mapping
from dataclasses import dataclass
from multiprocessing.reduction import ForkingPickler
from typing import Any

import numpy as np

__all__ = ["WorkerInfo", "get_worker_info"]

_POLL_S = 0.1  # how often an idle worker checks that it should go on


@dataclass(frozen=True)
class WorkerInfo:
    """Describes the DataLoader worker this code runs in (:func:`get_worker_info`).

    Args:
        id: The worker's index, ``0 .. num_workers - 1``.
        num_workers: How many workers the loader has.
        seed: The seed of this worker.
        dataset: This worker's copy of the dataset.
    """

    #: the worker's index, ``0 .. num_workers - 1``
    id: int
    #: how many workers the loader has
    num_workers: int
    #: the seed of this worker: the loader's base seed (one per iterator) plus ``id``;
    #: process workers seed the default ``vtl.random`` generator and Python's ``random``
    #: with it (take ``seed % 2**32`` for NumPy)
    seed: int
    #: this worker's copy of the dataset (process workers) or the dataset (threads)
    dataset: Any


class _Local(threading.local):
    info: WorkerInfo | None = None


_local = _Local()


def get_worker_info() -> WorkerInfo | None:
    """In a DataLoader worker, a :class:`WorkerInfo` (``id``, ``num_workers``, ``seed``,
    ``dataset``); in the main process (or with ``num_workers=0``) ``None``.

    An :class:`~vtl.data.IterableDataset` uses it in ``__iter__`` to give each worker its
    own share of the data (otherwise every worker yields the whole dataset)::

        def __iter__(self):
            info = vtl.data.get_worker_info()
            if info is None:
                return iter(range(self.start, self.end))
            return iter(range(self.start + info.id, self.end, info.num_workers))

    Returns:
        A :class:`WorkerInfo` in a worker, else ``None``.
    """
    return _local.info


# -- the host form of a batch -------------------------------------------------------------------
class HostArray:
    """A NumPy array that becomes a tensor in the main process.

    ``kind``: ``'array'`` (a tensor of the array's dtype), ``'bool'``, ``'int'``
    (the device's default index dtype), ``'float'`` (float32) -- the conversions of
    :func:`vtl.data.default_collate` -- and ``requires_grad`` for a tensor made by a
    custom collate function."""

    __slots__ = ("data", "kind", "requires_grad")

    def __init__(self, data: Any, kind: str = "array", requires_grad: bool = False) -> None:
        self.data, self.kind, self.requires_grad = data, kind, requires_grad

    def __reduce__(self) -> Any:
        return (HostArray, (self.data, self.kind, self.requires_grad))


def host_collate(batch: list[Any]) -> Any:
    """:func:`vtl.data.default_collate` on the host: the same structure, with
    :class:`HostArray` where it makes tensors (see :func:`place`)."""
    from .._tensor import Tensor

    if not batch:
        raise ValueError("default_collate(): empty batch")
    first = batch[0]
    if isinstance(first, Tensor):
        return HostArray(np.stack([b.numpy() for b in batch]))
    if isinstance(first, (np.ndarray, np.generic)):
        return HostArray(np.stack([np.asarray(b) for b in batch]))
    if isinstance(first, bool):
        return HostArray(list(batch), "bool")
    if isinstance(first, numbers.Integral):
        return HostArray(list(batch), "int")
    if isinstance(first, numbers.Real):
        return HostArray(list(batch), "float")
    if isinstance(first, (str, bytes)):
        return list(batch)
    if isinstance(first, Mapping):
        return {k: host_collate([b[k] for b in batch]) for k in first}
    if isinstance(first, (tuple, list)):
        n = len(first)
        if any(len(b) != n for b in batch):
            raise ValueError("default_collate(): samples have different numbers of fields")
        out = [host_collate([b[i] for b in batch]) for i in range(n)]
        return tuple(out) if isinstance(first, tuple) else out
    return list(batch)


def to_host(obj: Any) -> Any:
    """The output of a custom ``collate_fn`` with each vtl tensor as a :class:`HostArray`
    (inside tuples, named tuples, lists and dicts); everything else as it is."""
    from .._tensor import Tensor

    if isinstance(obj, Tensor):
        return HostArray(obj.detach().numpy(), "array", obj.requires_grad)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(to_host(o) for o in obj))
    if isinstance(obj, (tuple, list)):
        return type(obj)(to_host(o) for o in obj)
    if isinstance(obj, dict):
        return type(obj)((k, to_host(v)) for k, v in obj.items())
    return obj


def place(obj: Any, device: Any) -> Any:
    """Turn the :class:`HostArray` leaves of ``obj`` into tensors on ``device`` (in the
    main process), as :func:`vtl.data.default_collate` would have made them."""
    import vtl

    if isinstance(obj, HostArray):
        kind = obj.kind
        if kind == "array":
            t = vtl.asarray(obj.data, device=device)
            if obj.requires_grad:
                t.requires_grad_(True)
            return t
        if kind == "bool":
            return vtl.asarray(obj.data, dtype=vtl.bool, device=device)
        if kind == "int":
            idt = vtl.__array_namespace_info__().default_dtypes(device=device)["indexing"]
            return vtl.asarray(obj.data, dtype=idt, device=device)
        return vtl.asarray(obj.data, dtype=vtl.float32, device=device)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(place(o, device) for o in obj))
    if isinstance(obj, (tuple, list)):
        return type(obj)(place(o, device) for o in obj)
    if isinstance(obj, dict):
        return type(obj)((k, place(v, device)) for k, v in obj.items())
    return obj


# -- what crosses the process boundary ---------------------------------------------------------
class _HostPickler(ForkingPickler):
    """Pickles vtl tensors as NumPy-backend tensors, so a worker rebuilds them on the host
    whatever device they live on in the main process."""

    def reducer_override(self, obj: Any) -> Any:
        from .._tensor import Tensor

        if isinstance(obj, (type, types.FunctionType)) and obj.__module__ == "__main__" \
                and not hasattr(sys.modules.get("__main__"), "__file__"):
            # pickled by reference to a module a new process cannot import (an interactive
            # session, a notebook): refuse here, so the loader can say so and use threads
            raise pickle.PicklingError(
                f"{obj.__qualname__} is defined in an interactive session (its __main__ "
                "has no file), which a worker process cannot import")
        if isinstance(obj, Tensor):
            if obj._grad_fn is not None:
                obj = obj.detach()
            return (_rebuild_host_tensor, (obj.numpy(), obj.requires_grad,
                                           type(obj).__name__ == "Parameter"))
        return NotImplemented


def _rebuild_host_tensor(host: Any, requires_grad: bool, parameter: bool) -> Any:
    import vtl

    t = vtl.asarray(host, device="numpy", copy=True)
    if parameter:
        from ..nn import Parameter

        return Parameter(t, requires_grad)
    if requires_grad:
        t.requires_grad_(True)
    return t


def dumps(obj: Any) -> bytes:
    """``obj`` pickled for a worker process (see :class:`_HostPickler`)."""
    buf = io.BytesIO()
    _HostPickler(buf, pickle.HIGHEST_PROTOCOL).dump(obj)
    return buf.getvalue()


class WorkerError:
    """An exception raised in a worker, as the main process re-raises it: its class (when
    it can be pickled), message, notes and the worker's formatted traceback."""

    def __init__(self, exc: BaseException, worker_id: int, where: str) -> None:
        try:
            self.cls: bytes | None = pickle.dumps(type(exc))
        except Exception:
            self.cls = None
        self.type_name = f"{type(exc).__module__}.{type(exc).__qualname__}"
        self.message = str(exc) if not isinstance(exc, KeyError) else repr(exc.args[0]) \
            if len(exc.args) == 1 else str(exc)
        self.notes = [str(n) for n in getattr(exc, "__notes__", ())]
        self.tb = "".join(traceback.format_exception(exc))
        self.worker_id = worker_id
        self.where = where

    def reraise(self) -> None:
        """Raise the worker's exception in this process: of the same class where that
        class can be rebuilt from one message, else a ``RuntimeError``; the message has
        the worker's traceback."""
        msg = (f"Caught {self.type_name} in DataLoader worker {self.where} "
               f"{self.worker_id}.\nOriginal {self.tb}")
        exc: BaseException | None = None
        cls = None
        if self.cls is not None:
            try:
                cls = pickle.loads(self.cls)
            except Exception:
                cls = None
        if isinstance(cls, type) and issubclass(cls, BaseException):
            try:
                exc = cls(_KeyErrorMessage(msg) if issubclass(cls, KeyError) else msg)
            except Exception:
                exc = None
        if exc is None:
            exc = RuntimeError(msg)
        for n in self.notes:
            exc.add_note(n)
        raise exc


class _KeyErrorMessage(str):
    """Shows a KeyError's multi-line message as written (``KeyError`` prints its repr)."""

    def __repr__(self) -> str:
        return str(self)


class IterableEnd:
    """A worker's answer once its share of an iterable dataset is used up."""

    def __init__(self, worker_id: int) -> None:
        self.worker_id = worker_id


# -- the worker loop ---------------------------------------------------------------------------
@dataclass
class WorkerSpec:
    """What a worker needs: the dataset and functions (or their pickle), the batching."""

    payload: Any  # (dataset, collate_fn, worker_init_fn): the objects, or dumps() of them
    pickled: bool
    worker_id: int
    num_workers: int
    seed: int
    iterable: bool
    batch_size: int
    drop_last: bool
    main_pid: int
    is_process: bool


def _main_alive(pid: int) -> bool:
    if os.name != "posix":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def worker_loop(spec: WorkerSpec, index_queue: Any, result_queue: Any, done_event: Any) -> None:
    """Serve tasks until told to stop (``None`` on ``index_queue`` or ``done_event``).

    A task is ``(epoch, task_index, indices)``: the samples at ``indices`` of a map-style
    dataset, or (``indices is None``) the next batch of an iterable dataset (restarted
    when ``epoch`` changes). The answer ``(epoch, task_index, batch)`` carries the batch
    in host form, a :class:`WorkerError` or an :class:`IterableEnd`.
    """
    from ..backends import use_backend

    if spec.is_process:
        try:  # Ctrl-C is the main process's to handle: it stops the workers
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        except (ValueError, OSError):
            pass
    with use_backend("numpy"):  # this thread's default: samples are made on the host
        _serve(spec, index_queue, result_queue, done_event)


def _serve(spec: WorkerSpec, index_queue: Any, result_queue: Any, done_event: Any) -> None:
    wid = spec.worker_id
    where = "process" if spec.is_process else "thread"
    try:
        if spec.pickled:
            dataset, collate_fn, init_fn = pickle.loads(spec.payload)
        else:
            dataset, collate_fn, init_fn = spec.payload
        _local.info = WorkerInfo(wid, spec.num_workers, spec.seed, dataset)
        if spec.is_process:
            import vtl

            vtl.random.seed(spec.seed % 2**64)
            random.seed(spec.seed)
        if init_fn is not None:
            init_fn(wid)
        init_error = None
    except BaseException as exc:  # reported with the first task's answer
        init_error = WorkerError(exc, wid, where)
        dataset = collate_fn = None

    epoch = None
    it = None
    exhausted = False
    try:
        while True:
            try:
                task = index_queue.get(timeout=_POLL_S)
            except queue.Empty:
                if done_event.is_set() or (spec.is_process and not _main_alive(spec.main_pid)):
                    break
                continue
            if task is None or done_event.is_set():
                break
            task_epoch, idx, indices = task
            if init_error is not None:
                result_queue.put((task_epoch, idx, init_error))
                continue
            if task_epoch != epoch:  # a new iteration (persistent workers)
                epoch, it, exhausted = task_epoch, None, False
            try:
                if spec.iterable:
                    if exhausted:
                        out: Any = IterableEnd(wid)
                    else:
                        if it is None:
                            it = iter(dataset)
                        out = _next_iterable_batch(it, spec, collate_fn, wid)
                        exhausted = isinstance(out, IterableEnd)
                else:
                    out = _map_batch(dataset, indices, collate_fn)
            except BaseException as exc:
                out = WorkerError(exc, wid, where)
            result_queue.put((task_epoch, idx, out))
    finally:
        _local.info = None
        if spec.is_process and done_event.is_set():
            # the main process stops reading: do not wait at exit to flush the queue
            result_queue.cancel_join_thread()


def _collate(samples: list[Any], collate_fn: Any) -> Any:
    if collate_fn is None:
        return host_collate(samples)
    return to_host(collate_fn(samples))


def _map_batch(dataset: Any, indices: Any, collate_fn: Any) -> Any:
    samples = []
    for i in indices:
        try:
            samples.append(dataset[int(i)])
        except Exception as exc:
            exc.add_note(f"DataLoader: raised by dataset[{int(i)}] "
                         f"({type(dataset).__name__}.__getitem__)")
            raise
    try:
        return _collate(samples, collate_fn)
    except Exception as exc:
        head = ", ".join(str(int(i)) for i in list(indices)[:8])
        more = ", ..." if len(indices) > 8 else ""
        exc.add_note(f"DataLoader: raised while collating the samples at dataset indices "
                     f"[{head}{more}] ({len(indices)} samples)")
        raise


def _next_iterable_batch(it: Any, spec: WorkerSpec, collate_fn: Any, wid: int) -> Any:
    samples = []
    for _ in range(spec.batch_size):
        try:
            samples.append(next(it))
        except StopIteration:
            break
    if not samples or (spec.drop_last and len(samples) < spec.batch_size):
        return IterableEnd(wid)
    return _collate(samples, collate_fn)
