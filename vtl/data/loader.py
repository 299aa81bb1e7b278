"""Samplers, batch collation and the DataLoader (worker processes or a prefetch thread)."""

from __future__ import annotations

import hashlib
import multiprocessing
import numbers
import os
import pickle
import queue
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

import vtl

from .._tensor import Tensor
from ..backends import Device, default_device, resolve_device
from . import _worker
from ._worker import get_worker_info
from .dataset import IterableDataset, Subset, TensorDataset

__all__ = ["DataLoader", "RandomSampler", "SequentialSampler", "default_collate",
           "get_worker_info"]

_EPOCH_SHIFT = 64  # epoch e draws from Philox blocks e * 2**64 onwards: disjoint streams


def _fresh_seed() -> int:
    return int(vtl.random.default_generator().randint(0, 2**63, backend="numpy").item())


def epoch_permutation(n: int, seed: int, epoch: int) -> np.ndarray:
    """The order of epoch ``epoch``: a permutation of ``range(n)`` from the Philox
    stream of ``seed`` at block ``epoch * 2**64`` (the same on every backend)."""
    g = vtl.random.Generator(seed)
    st = g.get_state()
    st["counter"] = (epoch << _EPOCH_SHIFT) % 2**128
    g.set_state(st)
    return np.asarray(g.permutation(n, backend="numpy").numpy(), dtype=np.int64)


class SequentialSampler:
    """``0, 1, ..., n - 1``.

    Args:
        data_source: The dataset (its length is used).
    """

    def __init__(self, data_source: Any) -> None:
        self.n = data_source if isinstance(data_source, int) else len(data_source)

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.n))

    def __len__(self) -> int:
        return self.n


class RandomSampler:
    """A new permutation each epoch, from ``seed`` and the epoch counter.

    Each ``iter()`` uses the current epoch and then advances it; ``set_epoch``
    picks one (to resume a run). ``seed=None`` draws a seed from the default
    ``vtl.random`` generator once, at construction.

    Args:
        data_source: The dataset (its length is used).
        seed: Seed of the permutations (``None``: drawn once from the default generator).
    """

    def __init__(self, data_source: Any, seed: int | None = None) -> None:
        self.n = data_source if isinstance(data_source, int) else len(data_source)
        self.seed = _fresh_seed() if seed is None else int(seed)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def indices(self, epoch: int | None = None) -> np.ndarray:
        return epoch_permutation(self.n, self.seed, self.epoch if epoch is None else epoch)

    def __iter__(self) -> Iterator[int]:
        perm = self.indices()
        self.epoch += 1
        return iter(perm.tolist())

    def __len__(self) -> int:
        return self.n


def _to(t: Tensor, device: Device | None) -> Tensor:
    return t if device is None or t._device is device else t.to_device(device)


def default_collate(batch: Sequence[Any], device: Device | None = None) -> Any:
    """Stack a list of samples into a batch, field by field.

    Tensors are stacked along a new first axis (``vtl.stack``); NumPy arrays and
    Python numbers become Tensors (Python floats as ``float32``, ints as
    ``int64`` -- int32 on a device without int64 --, bools as ``bool``);
    tuples/lists and dicts are collated per field; strings and other objects
    are returned as lists. Tensors go to ``device`` (default: where they are;
    new tensors: the default device).

    Args:
        batch: The samples (all with the same structure).
        device: Device of the batch tensors.

    Returns:
        The batch, with the samples' structure.

    Raises:
        ValueError: If ``batch`` is empty or its samples have different numbers of fields.
    """
    if not batch:
        raise ValueError("default_collate(): empty batch")
    first = batch[0]
    if isinstance(first, Tensor):
        return vtl.stack([_to(b, device) for b in batch])
    dev = device if device is not None else default_device()
    if isinstance(first, np.ndarray) or isinstance(first, np.generic):
        return vtl.asarray(np.stack([np.asarray(b) for b in batch]), device=dev)
    if isinstance(first, bool):
        return vtl.asarray(list(batch), dtype=vtl.bool, device=dev)
    if isinstance(first, numbers.Integral):
        idt = vtl.__array_namespace_info__().default_dtypes(device=dev)["indexing"]
        return vtl.asarray(list(batch), dtype=idt, device=dev)
    if isinstance(first, numbers.Real):
        return vtl.asarray(list(batch), dtype=vtl.float32, device=dev)
    if isinstance(first, (str, bytes)):
        return list(batch)
    if isinstance(first, Mapping):
        return {k: default_collate([b[k] for b in batch], device) for k in first}
    if isinstance(first, (tuple, list)):
        n = len(first)
        if any(len(b) != n for b in batch):
            raise ValueError("default_collate(): samples have different numbers of fields")
        out = [default_collate([b[i] for b in batch], device) for i in range(n)]
        return tuple(out) if isinstance(first, tuple) else out
    return list(batch)


def _tensor_source(dataset: Any) -> tuple[TensorDataset, np.ndarray | None] | None:
    """``(TensorDataset, index map or None)`` when batches can be gathered with take."""
    if isinstance(dataset, TensorDataset) and type(dataset).__getitem__ is \
            TensorDataset.__getitem__:
        return dataset, None
    if isinstance(dataset, Subset):
        inner = _tensor_source(dataset.dataset)
        if inner is not None:
            base, imap = inner
            idx = np.asarray(dataset.indices, dtype=np.int64)
            return base, idx if imap is None else imap[idx]
    return None


_END = object()
_POLL_S = 0.1  # the consumer's wait slice: keeps Ctrl-C responsive on every platform
# The consumer (the main thread, where Ctrl-C lands) waits on queue.SimpleQueue, whose get is
# one C lock: a KeyboardInterrupt there leaves nothing half done. queue.Queue's get waits on
# a threading.Condition, and a signal arriving while the Condition takes its lock back can
# leave the lock released and raise "RuntimeError: release unlocked lock" instead.


class _Failure:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


def _put(q: queue.SimpleQueue[Any], room: threading.Semaphore, stop: threading.Event,
         item: Any) -> bool:
    """Put ``item`` once the queue has room (a slot of ``room``), unless told to stop."""
    while not stop.is_set():
        if room.acquire(timeout=0.05):
            q.put(item)
            return True
    return False


def _produce(items: Iterator[Any], q: queue.SimpleQueue[Any], room: threading.Semaphore,
             stop: threading.Event) -> None:
    # holds no reference to the iterator object, so dropping that object stops the thread
    try:
        for item in items:
            if not _put(q, room, stop, item):
                return
        _put(q, room, stop, _END)
    except BaseException as exc:  # handed to the consumer
        exc.add_note("DataLoader: raised in the prefetch thread")
        _put(q, room, stop, _Failure(exc))


class _PrefetchIterator:
    """Runs ``items`` in a daemon thread, ``depth`` batches ahead.

    Errors in the thread are raised in the consumer (the same exception
    object). Dropping the iterator tells the thread to stop without waiting for
    it; :meth:`close` also waits, at most ``timeout`` seconds. A thread stuck in
    a dataset call that never returns cannot be stopped: it is a daemon thread,
    so it never blocks interpreter exit.
    """

    def __init__(self, items: Iterator[Any], depth: int) -> None:
        self._q: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._room = threading.Semaphore(depth)  # at most ``depth`` items queued
        self._stop = threading.Event()
        self._done = False
        self._thread = threading.Thread(target=_produce,
                                        args=(items, self._q, self._room, self._stop),
                                        daemon=True, name="vtl-data-prefetch")
        self._thread.start()

    def __iter__(self) -> _PrefetchIterator:
        return self

    def __next__(self) -> Any:
        if self._done:
            raise StopIteration
        while True:
            try:
                item = self._q.get(timeout=_POLL_S)
                break
            except queue.Empty:
                continue
        self._room.release()
        if item is _END:
            self.close()
            raise StopIteration
        if isinstance(item, _Failure):
            self.close()
            raise item.exc
        return item

    def close(self, timeout: float = 1.0) -> None:
        """Stop the thread and wait for it, at most ``timeout`` seconds.

        Warns (``RuntimeWarning``) when the thread is still busy in the dataset
        after that; it then ends by itself when that call returns.
        """
        self._done = True
        self._stop.set()
        t = self._thread
        if t is threading.current_thread() or not t.is_alive():
            return
        t.join(timeout)
        if t.is_alive():
            warnings.warn(f"DataLoader: the prefetch thread is still inside the dataset "
                          f"(__getitem__ or collate_fn) after {timeout} s; it is left to end "
                          "by itself (a daemon thread, it does not block exit)",
                          RuntimeWarning, stacklevel=2)

    def __del__(self) -> None:
        # never waits: __del__ runs wherever the garbage collector does, and at exit
        stop = getattr(self, "_stop", None)
        if stop is not None:
            stop.set()


def _short(idx: np.ndarray, k: int = 8) -> str:
    head = ", ".join(str(int(i)) for i in idx[:k])
    return f"[{head}{', ...' if len(idx) > k else ''}] ({len(idx)} samples)"


class DataLoader:
    """Batches of a dataset, optionally shuffled, prepared in background worker
    processes (``num_workers``) or a background thread.

    * ``batch_size`` samples per batch; ``drop_last`` drops a final short batch;
      ``len(loader)`` is the number of batches.
    * ``shuffle=True`` draws a new order each epoch from ``vtl.random`` with
      ``seed`` and the epoch counter (``seed=None``: drawn once from ``generator``, a
      :class:`vtl.random.Generator`, or else the default generator), so a seed gives
      the same order on every backend. ``set_epoch(e)`` picks the epoch (to resume).
      ``sampler`` (any iterable of indices) replaces the built-in order and excludes
      ``shuffle``.
    * ``collate_fn(list_of_samples)`` builds a batch; by default: for a
      :class:`TensorDataset` (or a Subset of one) a tuple of tensors gathered with
      one ``vtl.take`` per tensor (no per-sample Python loop), otherwise
      :func:`default_collate`.
    * ``device=``/``backend=`` place the batches there (default: where the
      dataset's tensors are; new tensors on the default device).
    * An :class:`~vtl.data.IterableDataset` is batched in the order it yields samples
      (``shuffle`` and ``sampler`` do not apply); ``len(loader)`` needs its ``__len__``.
    * An exception raised by the dataset's ``__getitem__`` (or by the collate
      function) reaches the consumer as the same exception, of the same type
      (so ``except KeyError`` still works), with a note (``add_note``) naming
      the dataset index (or the batch's indices) and, from the prefetch thread,
      saying so.

    **Without workers** (``num_workers=0``, the default) ``prefetch`` batches are prepared
    ahead in a daemon thread (0: none). The thread stops when the epoch ends or the
    iterator is closed/dropped; ``iterator.close()`` waits for it at most a second (and
    warns if it is still busy), dropping the iterator does not wait, and the thread never
    keeps the interpreter from exiting, even when stuck in a ``__getitem__`` that does not
    return. Batches bound for a backend that records into one command stream (wgpu) are
    made in the consumer's thread.

    **With workers** (``num_workers=N > 0``, PyTorch's semantics):

    * N worker processes fetch samples and collate them, each on the host: a worker makes
      ``numpy`` its default backend, runs ``__getitem__`` and ``collate_fn`` there and
      sends NumPy arrays; the main process turns them into tensors on the loader's device
      (so workers never touch a GPU, and the batches equal those of ``num_workers=0``: the
      index batches are drawn in the main process and the results are delivered in their
      order, whichever worker finishes first). A ``collate_fn``'s vtl tensors come back
      as tensors on the device, anything else (NumPy arrays, strings ...) as it is.
    * ``prefetch_factor`` (default 2) batches per worker are requested ahead.
    * ``persistent_workers=True`` keeps the workers between epochs (a new iterator
      replaces the previous one); otherwise they start with each iterator and stop when
      it ends, is closed (``iterator.close()``) or is garbage collected. Workers also
      stop by themselves when the main process dies, and ignore Ctrl-C (the main
      process handles it and stops them).
    * ``worker_init_fn(worker_id)`` runs first in each worker; :func:`get_worker_info`
      tells the worker's id, the number of workers, its seed and its dataset copy (an
      :class:`~vtl.data.IterableDataset` shards itself with it). Each process worker
      seeds the default ``vtl.random`` generator and Python's ``random`` with
      ``base_seed + worker_id``; ``base_seed`` is derived (without drawing from it) from
      the state of ``generator`` (or the default generator) and a count of this loader's
      iterators, so a run is reproducible and the main process draws exactly the numbers
      it draws with ``num_workers=0``.
    * An exception in a worker is raised in the main process when its batch is due, of
      the same class where that class can be rebuilt from a message (else
      ``RuntimeError``), with the worker's traceback in the message and the same notes;
      a worker process that dies (e.g. killed) raises ``RuntimeError`` naming its pid
      and exit code. ``timeout`` (seconds, 0 = none) bounds the wait for one batch
      (``RuntimeError`` after it).
    * Start method: ``multiprocessing_context`` (a start method name or a
      ``multiprocessing`` context); by default ``'forkserver'`` where the platform has it
      (Linux, macOS), else ``'spawn'``. Not ``'fork'``: a forked child inherits the
      parent's threads' locks and devices (the wgpu/Vulkan and CUDA runtimes, BLAS pools,
      the prefetch thread) in whatever state they were, which can deadlock or crash;
      the fork server is a clean single-threaded process (it has ``vtl`` imported, so a
      worker starts in milliseconds). These start methods pickle the dataset,
      ``collate_fn`` and ``worker_init_fn`` (vtl tensors in them are sent as host
      arrays): define them at module level of a file. Where they cannot be pickled (a
      local class or function, a lambda, a class defined in a notebook), the workers
      run as **threads** of the main process instead, with a ``RuntimeWarning`` saying
      why (same batches and order; ``get_worker_info`` works per thread; the generators
      are not reseeded, as threads share them with the main thread; useful only where
      ``__getitem__`` releases the GIL). ``multiprocessing_context='fork'`` is accepted
      for a process that runs no GPU backend and no threads.
    * A :class:`TensorDataset` (or a Subset of one) with the default ``collate_fn`` is
      still gathered in the main process, one ``vtl.take`` per tensor and batch: workers
      could only add copies to that, so none are started for it.
    * ``pin_memory`` is accepted for PyTorch code and changes nothing on any backend:
      the numpy backend's batches are host memory already, wgpu has no page-locked host
      memory (uploads are staged by the driver), and the cupy backend copies batches
      with ``cupy.asarray`` from ordinary host memory.

    Args:
        dataset: A map-style dataset (``__getitem__`` and ``__len__``) or an
            :class:`IterableDataset`.
        batch_size: Samples per batch.
        shuffle: Draw a new order each epoch.
        sampler: An iterable of indices replacing the built-in order (not with ``shuffle``).
        drop_last: Drop a final short batch.
        collate_fn: Builds a batch from a list of samples (default: see above).
        seed: Seed of the shuffling (``None``: drawn once from ``generator``).
        prefetch: Batches prepared ahead by the background thread without workers (0: none). A vtl
            addition.
        device: Device of the batches.
        backend: Backend of the batches (instead of ``device``).
        num_workers: Number of worker processes (0: none).
        pin_memory: Accepted for PyTorch code; changes nothing.
        timeout: Seconds to wait for a worker's batch (0: no limit).
        worker_init_fn: Called with the worker id first in each worker.
        multiprocessing_context: A start method name or a ``multiprocessing`` context.
        generator: A :class:`vtl.random.Generator` for the shuffling seed and the workers' base
            seed (not with ``seed``).
        prefetch_factor: Batches requested ahead per worker (with workers only; default 2).
        persistent_workers: Keep the workers between epochs (with workers only).

    Raises:
        ValueError: If an option is out of range or options conflict (``sampler`` with ``shuffle``,
            ``seed`` with ``generator``, worker options without workers, ``shuffle`` or ``sampler``
            with an IterableDataset).
        TypeError: If ``worker_init_fn`` is not callable or ``generator`` is not a Generator.

    Example:
        >>> ds = vtl.data.TensorDataset(vtl.arange(10.0), vtl.arange(10))
        >>> loader = vtl.data.DataLoader(ds, batch_size=4, shuffle=True, seed=0)
        >>> [xb.shape for xb, yb in loader]
        [(4,), (4,), (2,)]
        >>> len(loader)
        3
    """

    def __init__(self, dataset: Any, batch_size: int = 1, shuffle: bool = False,
                 sampler: Iterable[int] | None = None, drop_last: bool = False,
                 collate_fn: Callable[[list[Any]], Any] | None = None,
                 seed: int | None = None, prefetch: int = 2, device: Any = None,
                 backend: str | None = None, *, num_workers: int = 0,
                 pin_memory: bool = False, timeout: float = 0,
                 worker_init_fn: Callable[[int], Any] | None = None,
                 multiprocessing_context: Any = None, generator: Any = None,
                 prefetch_factor: int | None = None,
                 persistent_workers: bool = False) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"DataLoader: batch_size must be a positive int, got {batch_size!r}")
        if isinstance(prefetch, bool) or not isinstance(prefetch, int) or prefetch < 0:
            raise ValueError(f"DataLoader: prefetch must be an int >= 0, got {prefetch!r}")
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError("DataLoader: num_workers option should be a non-negative int; use "
                             f"num_workers=0 to disable multiprocessing (got {num_workers!r})")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
            raise ValueError(f"DataLoader: timeout option should be non-negative, got {timeout!r}")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("DataLoader: prefetch_factor option could only be specified in "
                             "multiprocessing. Let num_workers > 0 to enable multiprocessing, "
                             "otherwise set prefetch_factor to None.")
        if prefetch_factor is not None and (isinstance(prefetch_factor, bool) or not
                                            isinstance(prefetch_factor, int)
                                            or prefetch_factor < 1):
            raise ValueError(f"DataLoader: prefetch_factor must be a positive int, got "
                             f"{prefetch_factor!r}")
        if persistent_workers and num_workers == 0:
            raise ValueError("DataLoader: persistent_workers option needs num_workers > 0")
        if worker_init_fn is not None and not callable(worker_init_fn):
            raise TypeError(f"DataLoader: worker_init_fn must be callable, got "
                            f"{type(worker_init_fn).__name__}")
        if generator is not None and not isinstance(generator, vtl.random.Generator):
            raise TypeError(f"DataLoader: generator must be a vtl.random.Generator, got "
                            f"{type(generator).__name__}")
        if generator is not None and seed is not None:
            raise ValueError("DataLoader: pass seed or generator, not both")
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle:
                raise ValueError("DataLoader with IterableDataset: expected unspecified shuffle "
                                 f"option, but got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified sampler "
                                 f"option, but got sampler={sampler}")
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler option is mutually exclusive with shuffle")
        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.collate_fn = collate_fn
        self.prefetch = prefetch
        self.num_workers = num_workers
        self.pin_memory = bool(pin_memory)
        self.timeout = float(timeout)
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = _mp_context(multiprocessing_context)
        self.generator = generator
        self.prefetch_factor = 2 if prefetch_factor is None and num_workers else prefetch_factor
        self.persistent_workers = bool(persistent_workers)
        self.device = None if device is None and backend is None else \
            resolve_device(device, backend)
        if self._iterable:
            sampler = None
        elif sampler is None:
            if shuffle:
                if seed is None and generator is not None:
                    seed = int(generator.randint(0, 2**63, backend="numpy").item())
                sampler = RandomSampler(dataset, seed)
            else:
                sampler = SequentialSampler(dataset)
        self.sampler = sampler
        self.seed = getattr(sampler, "seed", seed)
        self._iterators = 0  # how many iterators this loader made (worker seeds)
        self._pool: _WorkerPool | None = None  # the persistent workers
        self._pool_finalizer: Any = None

    @property
    def epoch(self) -> int:
        """The epoch the next iteration will use (shuffled loaders)."""
        return getattr(self.sampler, "epoch", 0)

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration use the order of ``epoch``."""
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)

    def _num_samples(self) -> int:
        if self._iterable:
            return len(self.dataset)
        return len(self.sampler)  # type: ignore[arg-type]

    def __len__(self) -> int:
        n = self._num_samples()
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def _index_batches(self) -> list[np.ndarray]:
        idx = np.fromiter(iter(self.sampler), dtype=np.int64)
        bs = self.batch_size
        stop = len(idx) - len(idx) % bs if self.drop_last else len(idx)
        return [idx[i:i + bs] for i in range(0, stop, bs)]

    def _batches(self, batches: list[np.ndarray], device: Device | None) -> Iterator[Any]:
        src = _tensor_source(self.dataset) if self.collate_fn is None else None
        if src is not None:
            base, imap = src
            for b in batches:
                rows = b if imap is None else imap[b]
                out = []
                for t in base.tensors:
                    dt = vtl.int32 if t.shape[0] < 2**31 else vtl.int64
                    ix = vtl.asarray(rows.astype(np.int32 if dt == vtl.int32 else np.int64),
                                     device=t._device)
                    out.append(_to(vtl.take(t, ix, axis=0), device))
                yield tuple(out)
            return
        ds = self.dataset
        for b in batches:
            samples = []
            for i in b:
                try:
                    samples.append(ds[int(i)])
                except Exception as exc:
                    exc.add_note(f"DataLoader: raised by dataset[{int(i)}] "
                                 f"({type(ds).__name__}.__getitem__)")
                    raise
            yield self._collate(samples, device, b)

    def _collate(self, samples: list[Any], device: Device | None, b: Any) -> Any:
        try:
            if self.collate_fn is not None:
                batch = self.collate_fn(samples)
                return _move(batch, device) if device is not None else batch
            return default_collate(samples, device)
        except Exception as exc:
            what = f"at dataset indices {_short(b)}" if b is not None else \
                f"of a batch of {len(samples)} samples"
            exc.add_note(f"DataLoader: raised while collating the samples {what}")
            raise

    def _iterable_batches(self, device: Device | None) -> Iterator[Any]:
        it = iter(self.dataset)
        bs = self.batch_size
        while True:
            samples = []
            for _ in range(bs):
                try:
                    samples.append(next(it))
                except StopIteration:
                    break
            if not samples or (self.drop_last and len(samples) < bs):
                return
            yield self._collate(samples, device, None)

    def __iter__(self) -> Iterator[Any]:
        self._iterators += 1
        if self._iterable:
            device = self.device if self.device is not None else default_device()
            if self.num_workers:
                return self._worker_iterator(None, device)
            items = self._iterable_batches(device)
            if self.prefetch == 0 or device.backend_name == "wgpu":
                return items
            return _PrefetchIterator(items, self.prefetch)
        batches = self._index_batches()  # in the caller's thread: advances the epoch
        device = self.device
        src = _tensor_source(self.dataset)
        if device is None and src is None:
            device = default_device()  # the caller's default (thread-local)
        if self.num_workers and not (src is not None and self.collate_fn is None):
            return self._worker_iterator(batches, device)
        items = self._batches(batches, device)
        target = device
        if target is None:
            target = src[0].tensors[0]._device if src is not None else None
        if self.prefetch == 0 or (target is not None and target.backend_name == "wgpu"):
            return items
        return _PrefetchIterator(items, self.prefetch)

    # -- workers --------------------------------------------------------------------------------
    def _base_seed(self) -> int:
        """The workers' base seed: a hash of the generator's state and the iterator count
        (the generator is not advanced, so the main process's stream is that of
        ``num_workers=0``)."""
        gen = self.generator if self.generator is not None else \
            vtl.random.default_generator()
        st = gen.get_state()
        digest = hashlib.sha256(f"{st['seed']}:{st['counter']}:{self._iterators}".encode())
        return int.from_bytes(digest.digest()[:8], "little") >> 1

    def _new_pool(self) -> _WorkerPool:
        return _WorkerPool(self.dataset, self.collate_fn, self.worker_init_fn,
                           self.num_workers, self._base_seed(), self._iterable,
                           self.batch_size, self.drop_last, self.multiprocessing_context)

    def _worker_iterator(self, batches: list[np.ndarray] | None,
                         device: Device) -> _WorkerIterator:
        if self.persistent_workers:
            pool = self._pool
            if pool is None or pool.closed:
                pool = self._pool = self._new_pool()
                self._pool_finalizer = weakref.finalize(self, pool.shutdown)
            return _WorkerIterator(pool, batches, device, self.prefetch_factor, self.timeout,
                                   owns_pool=False)
        return _WorkerIterator(self._new_pool(), batches, device, self.prefetch_factor,
                               self.timeout, owns_pool=True)

    def __repr__(self) -> str:
        return (f"DataLoader(dataset={type(self.dataset).__name__}, batch_size={self.batch_size}, "
                f"shuffle={self.shuffle}, drop_last={self.drop_last}, "
                f"num_workers={self.num_workers})")


def _mp_context(ctx: Any) -> Any:
    """The multiprocessing context of the workers (see :class:`DataLoader`)."""
    if ctx is None:
        methods = multiprocessing.get_all_start_methods()
        return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
    if isinstance(ctx, str):
        if ctx not in multiprocessing.get_all_start_methods():
            raise ValueError(f"DataLoader: multiprocessing_context {ctx!r} is not a start method "
                             f"of this platform ({multiprocessing.get_all_start_methods()})")
        return multiprocessing.get_context(ctx)
    if isinstance(ctx, multiprocessing.context.BaseContext):
        return ctx
    raise TypeError(f"DataLoader: multiprocessing_context must be a start method name or a "
                    f"multiprocessing context, got {type(ctx).__name__}")


_JOIN_S = 1.0  # how long shutdown waits for the workers before terminating them


class _WorkerPool:
    """The workers of a DataLoader: processes (or threads, see :class:`DataLoader`), one
    task queue each, one result queue, a done flag."""

    def __init__(self, dataset: Any, collate_fn: Any, worker_init_fn: Any, num_workers: int,
                 base_seed: int, iterable: bool, batch_size: int, drop_last: bool,
                 ctx: Any) -> None:
        self.closed = False
        self.epoch = 0  # the iterator being served (stale results are dropped)
        self.num_workers = num_workers
        objects = (dataset, collate_fn, worker_init_fn)
        method = ctx.get_start_method()
        payload: Any = objects
        pickled = False
        self.mode = "process"
        if method != "fork":
            try:
                payload = _worker.dumps(objects)
                pickled = True
            except (pickle.PicklingError, TypeError, AttributeError, ValueError) as exc:
                self.mode = "thread"
                payload = objects
                warnings.warn(
                    f"DataLoader: the dataset, collate_fn or worker_init_fn cannot be pickled "
                    f"({type(exc).__name__}: {exc}), which worker processes started with "
                    f"{method!r} need; the {num_workers} workers run as threads of this "
                    "process instead. Define them at module level of a file (not in an "
                    "interactive session or a notebook) to get processes.",
                    RuntimeWarning, stacklevel=5)
        if self.mode == "process":
            if method == "forkserver":
                _preload_forkserver(ctx)
            self.result_queue = ctx.Queue()
            self.done_event = ctx.Event()
            self.index_queues = [ctx.Queue() for _ in range(num_workers)]
        else:
            self.result_queue = queue.SimpleQueue()  # read by the main thread (see _POLL_S)
            self.done_event = threading.Event()
            self.index_queues = [queue.Queue() for _ in range(num_workers)]
        self.workers: list[Any] = []
        try:
            for wid in range(num_workers):
                spec = _worker.WorkerSpec(payload, pickled, wid, num_workers, base_seed + wid,
                                          iterable, batch_size, drop_last, os.getpid(),
                                          self.mode == "process")
                args = (spec, self.index_queues[wid], self.result_queue, self.done_event)
                if self.mode == "process":
                    w = ctx.Process(target=_worker.worker_loop, args=args, daemon=True,
                                    name=f"vtl-data-worker-{wid}")
                else:
                    w = threading.Thread(target=_worker.worker_loop, args=args, daemon=True,
                                         name=f"vtl-data-worker-{wid}")
                w.start()
                self.workers.append(w)
        except BaseException:
            self.shutdown()
            raise

    def check_alive(self) -> None:
        """``RuntimeError`` if a worker process ended while it should be serving."""
        if self.mode != "process" or self.closed:
            return
        dead = [w for w in self.workers if w.exitcode is not None]
        if dead:
            codes = ", ".join(
                f"pid {w.pid}: {'killed by signal ' + str(-w.exitcode) if w.exitcode < 0 else 'exit code ' + str(w.exitcode)}"  # noqa: E501
                for w in dead)
            self.shutdown()
            raise RuntimeError(f"DataLoader worker(s) exited unexpectedly ({codes})")

    def shutdown(self) -> None:
        """Stop the workers: tell them, wait for them (a second in all), then terminate the
        processes still running (still inside the dataset). Safe to call more than once."""
        if self.closed:
            return
        self.closed = True
        self.done_event.set()
        for q in self.index_queues:
            try:
                q.put(None)
            except (OSError, ValueError):
                pass
        stuck = []
        deadline = time.monotonic() + _JOIN_S  # idle workers see the flag within _POLL_S
        for w in self.workers:
            w.join(max(0.0, deadline - time.monotonic()))
        for w in self.workers:
            if w.is_alive():
                if self.mode == "process":  # busy in the dataset: nothing of it is needed
                    w.terminate()
                    w.join(_JOIN_S)
                else:
                    stuck.append(w)
        if self.mode == "process":
            for q in [*self.index_queues, self.result_queue]:
                q.cancel_join_thread()
                q.close()
        if stuck:
            warnings.warn(f"DataLoader: {len(stuck)} worker thread(s) still inside the dataset "
                          f"after {_JOIN_S} s; they end by themselves when that call returns "
                          "(daemon threads, they do not block exit)", RuntimeWarning,
                          stacklevel=2)


def _preload_forkserver(ctx: Any) -> None:
    """Have the fork server import vtl once, so that workers start without importing it
    (only effective before the server starts; other preloads are kept)."""
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    current = list(getattr(server, "_preload_modules", None) or [])
    if "vtl.data._forkserver_preload" not in current:
        ctx.set_forkserver_preload([*current, "vtl.data._forkserver_preload"])


class _WorkerIterator:
    """An epoch of a DataLoader with workers: dispatches the tasks round-robin, at most
    ``prefetch_factor`` per worker ahead, and delivers the results in task order."""

    def __init__(self, pool: _WorkerPool, batches: list[np.ndarray] | None, device: Device,
                 prefetch_factor: int, timeout: float, owns_pool: bool) -> None:
        self._pool = pool
        pool.epoch += 1
        self._epoch = pool.epoch
        self._batches = batches  # None: an iterable dataset (tasks until every worker ends)
        self._device = device
        self._ahead = prefetch_factor * pool.num_workers
        self._timeout = timeout
        self._owns = owns_pool
        self._send = 0
        self._rcvd = 0
        self._outstanding: dict[int, int] = {}  # task index -> worker
        self._results: dict[int, Any] = {}
        self._active = set(range(pool.num_workers))
        self._cursor = 0
        self._done = False
        if owns_pool:
            self._finalizer = weakref.finalize(self, pool.shutdown)

    def __iter__(self) -> _WorkerIterator:
        return self

    def _more_tasks(self) -> bool:
        if self._batches is None:
            return bool(self._active)
        return self._send < len(self._batches)

    def _dispatch(self) -> None:
        pool = self._pool
        while len(self._outstanding) < self._ahead and self._more_tasks():
            wid = self._pick()
            indices = None if self._batches is None else self._batches[self._send]
            pool.index_queues[wid].put((self._epoch, self._send, indices))
            self._outstanding[self._send] = wid
            self._send += 1

    def _pick(self) -> int:
        """The next worker, round-robin over those still active."""
        n = self._pool.num_workers
        while True:
            wid = self._cursor % n
            self._cursor += 1
            if wid in self._active:
                return wid

    def __next__(self) -> Any:
        if self._done:
            raise StopIteration
        pool = self._pool
        if pool.epoch != self._epoch or pool.closed:
            self._done = True
            raise RuntimeError("this DataLoader iterator is no longer served: its loader's "
                               "persistent workers moved on to a newer iterator (or stopped)")
        try:
            while True:
                self._dispatch()
                if self._rcvd in self._results:
                    item = self._results.pop(self._rcvd)
                    self._rcvd += 1
                    if isinstance(item, _worker.IterableEnd):
                        self._active.discard(item.worker_id)
                        continue
                    if isinstance(item, _worker.WorkerError):
                        self._finish()
                        item.reraise()
                    return _worker.place(item, self._device)
                if not self._outstanding:
                    self._finish()
                    raise StopIteration
                self._receive()
        except StopIteration:
            raise
        except BaseException:
            self._finish()
            raise

    def _receive(self) -> None:
        """Wait for one result of this epoch (checking the workers and the timeout)."""
        pool = self._pool
        waited = 0.0
        while True:
            try:
                epoch, idx, data = pool.result_queue.get(timeout=_POLL_S)
            except queue.Empty:
                waited += _POLL_S
                pool.check_alive()
                if self._timeout and waited >= self._timeout:
                    raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds "
                                       "waiting for a batch from its workers") from None
                continue
            if epoch != self._epoch:
                continue  # left over from an earlier iterator of persistent workers
            self._outstanding.pop(idx, None)
            self._results[idx] = data
            return

    def _finish(self) -> None:
        self._done = True
        if self._owns:
            self._pool.shutdown()

    def close(self) -> None:
        """End this iteration now (and stop its workers unless they are persistent)."""
        self._finish()

    def __len__(self) -> int:
        if self._batches is None:
            raise TypeError("len() of a DataLoader iterator over an IterableDataset")
        return len(self._batches)


def _move(batch: Any, device: Device) -> Any:
    if isinstance(batch, Tensor):
        return _to(batch, device)
    if isinstance(batch, tuple):
        return tuple(_move(b, device) for b in batch)
    if isinstance(batch, list):
        return [_move(b, device) for b in batch]
    if isinstance(batch, dict):
        return {k: _move(v, device) for k, v in batch.items()}
    return batch
