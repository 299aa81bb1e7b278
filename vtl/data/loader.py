"""Samplers, batch collation and the DataLoader (with a background prefetch thread)."""

from __future__ import annotations

import numbers
import queue
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

import vtl

from .._tensor import Tensor
from ..backends import Device, default_device, resolve_device
from .dataset import Subset, TensorDataset

__all__ = ["DataLoader", "RandomSampler", "SequentialSampler", "default_collate"]

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
    """``0, 1, ..., n - 1``."""

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


class _Failure:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


def _put(q: queue.Queue[Any], stop: threading.Event, item: Any) -> bool:
    while not stop.is_set():
        try:
            q.put(item, timeout=0.05)
            return True
        except queue.Full:
            continue
    return False


def _produce(items: Iterator[Any], q: queue.Queue[Any], stop: threading.Event) -> None:
    # holds no reference to the iterator object, so dropping that object stops the thread
    try:
        for item in items:
            if not _put(q, stop, item):
                return
        _put(q, stop, _END)
    except BaseException as exc:  # handed to the consumer
        exc.add_note("DataLoader: raised in the prefetch thread")
        _put(q, stop, _Failure(exc))


class _PrefetchIterator:
    """Runs ``items`` in a daemon thread, ``depth`` batches ahead.

    Errors in the thread are raised in the consumer (the same exception
    object). Dropping the iterator tells the thread to stop without waiting for
    it; :meth:`close` also waits, at most ``timeout`` seconds. A thread stuck in
    a dataset call that never returns cannot be stopped: it is a daemon thread,
    so it never blocks interpreter exit.
    """

    def __init__(self, items: Iterator[Any], depth: int) -> None:
        self._q: queue.Queue[Any] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._done = False
        self._thread = threading.Thread(target=_produce, args=(items, self._q, self._stop),
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
    """Batches of a dataset, optionally shuffled, prepared in a background thread.

    * ``batch_size`` samples per batch; ``drop_last`` drops a final short batch;
      ``len(loader)`` is the number of batches.
    * ``shuffle=True`` draws a new order each epoch from ``vtl.random`` with
      ``seed`` and the epoch counter (``seed=None``: drawn once from the default
      generator), so a seed gives the same order on every backend.
      ``set_epoch(e)`` picks the epoch (to resume). ``sampler`` (any iterable of
      indices) replaces the built-in order and excludes ``shuffle``.
    * ``collate_fn(list_of_samples)`` builds a batch; by default: for a
      :class:`TensorDataset` (or a Subset of one) a tuple of tensors gathered with
      one ``vtl.take`` per tensor (no per-sample Python loop), otherwise
      :func:`default_collate`.
    * ``device=``/``backend=`` place the batches there (default: where the
      dataset's tensors are; new tensors on the default device).
    * ``prefetch`` batches are prepared ahead in a daemon thread (0: none). The
      thread stops when the epoch ends or the iterator is closed/dropped;
      ``iterator.close()`` waits for it at most a second (and warns if it is
      still busy), dropping the iterator does not wait, and the thread never
      keeps the interpreter from exiting, even when stuck in a ``__getitem__``
      that does not return. Batches bound for a backend that records into one
      command stream (wgpu) are made in the consumer's thread.
    * An exception raised by the dataset's ``__getitem__`` (or by the collate
      function) reaches the consumer as the same exception, of the same type
      (so ``except KeyError`` still works), with a note (``add_note``) naming
      the dataset index (or the batch's indices) and, from the prefetch thread,
      saying so.
    """

    def __init__(self, dataset: Any, batch_size: int = 1, shuffle: bool = False,
                 sampler: Iterable[int] | None = None, drop_last: bool = False,
                 collate_fn: Callable[[list[Any]], Any] | None = None,
                 seed: int | None = None, prefetch: int = 2, device: Any = None,
                 backend: str | None = None) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"DataLoader: batch_size must be a positive int, got {batch_size!r}")
        if isinstance(prefetch, bool) or not isinstance(prefetch, int) or prefetch < 0:
            raise ValueError(f"DataLoader: prefetch must be an int >= 0, got {prefetch!r}")
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler option is mutually exclusive with shuffle")
        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.collate_fn = collate_fn
        self.prefetch = prefetch
        self.device = None if device is None and backend is None else \
            resolve_device(device, backend)
        if sampler is None:
            sampler = RandomSampler(dataset, seed) if shuffle else SequentialSampler(dataset)
        self.sampler = sampler
        self.seed = getattr(sampler, "seed", seed)

    @property
    def epoch(self) -> int:
        """The epoch the next iteration will use (shuffled loaders)."""
        return getattr(self.sampler, "epoch", 0)

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration use the order of ``epoch``."""
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)

    def _num_samples(self) -> int:
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
            try:
                if self.collate_fn is not None:
                    batch = self.collate_fn(samples)
                    batch = _move(batch, device) if device is not None else batch
                else:
                    batch = default_collate(samples, device)
            except Exception as exc:
                exc.add_note(f"DataLoader: raised while collating the samples at dataset "
                             f"indices {_short(b)}")
                raise
            yield batch

    def __iter__(self) -> Iterator[Any]:
        batches = self._index_batches()  # in the caller's thread: advances the epoch
        device = self.device
        if device is None and _tensor_source(self.dataset) is None:
            device = default_device()  # the caller's default (thread-local)
        items = self._batches(batches, device)
        target = device
        if target is None:
            src = _tensor_source(self.dataset)
            target = src[0].tensors[0]._device if src is not None else None
        if self.prefetch == 0 or (target is not None and target.backend_name == "wgpu"):
            return items
        return _PrefetchIterator(items, self.prefetch)

    def __repr__(self) -> str:
        return (f"DataLoader(dataset={type(self.dataset).__name__}, batch_size={self.batch_size}, "
                f"shuffle={self.shuffle}, drop_last={self.drop_last})")


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
