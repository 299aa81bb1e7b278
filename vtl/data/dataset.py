"""Datasets: indexable collections of samples (PyTorch's ``torch.utils.data`` names)."""

from __future__ import annotations

import bisect
import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

import vtl

from .._tensor import Tensor
from ..backends import resolve_device

__all__ = ["ChainDataset", "ConcatDataset", "Dataset", "IterableDataset", "Subset", "TensorDataset",
           "random_split"]


class Dataset:
    """A map-style dataset: subclasses implement ``__getitem__(i)`` and ``__len__()``."""

    def __getitem__(self, index: int) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__")

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} must implement __len__")

    def __add__(self, other: Dataset) -> ConcatDataset:
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset that is a stream of samples: subclasses implement ``__iter__`` (and may
    implement ``__len__``). A :class:`~vtl.data.DataLoader` batches consecutive samples.

    With ``num_workers > 0`` every worker iterates its own copy of the dataset, so each
    sample comes once per worker unless ``__iter__`` shards the stream with
    :func:`vtl.data.get_worker_info` (as in PyTorch)."""

    def __iter__(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")

    def __getitem__(self, index: int) -> Any:
        raise TypeError(f"{type(self).__name__} is an IterableDataset: iterate over it "
                        "instead of indexing it")

    def __len__(self) -> int:
        raise TypeError(f"{type(self).__name__} is an IterableDataset without __len__")

    def __add__(self, other: Any) -> ChainDataset:
        return ChainDataset([self, other])


class ChainDataset(IterableDataset):
    """Several iterable datasets one after the other."""

    def __init__(self, datasets: Sequence[Any]) -> None:
        self.datasets = list(datasets)

    def __iter__(self) -> Any:
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise TypeError(f"ChainDataset only supports IterableDataset, got "
                                f"{type(d).__name__}")
            yield from d

    def __len__(self) -> int:
        return sum(len(d) for d in self.datasets)


def _as_tensor(t: Any, device: Any, name: str) -> Tensor:
    if isinstance(t, Tensor):
        return t if device is None or t._device is device else t.to_device(device)
    try:
        return vtl.asarray(t, device=device)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name}: expected tensors or arrays, got {type(t).__name__}") from exc


class TensorDataset(Dataset):
    """Samples are the rows of tensors that share their first dimension.

    ``TensorDataset(x, y)[i] == (x[i], y[i])``. Arrays are turned into Tensors on
    the default backend (or ``backend=``/``device=``); a :class:`DataLoader`
    gathers whole batches with one ``vtl.take`` per tensor.

    Example:
        >>> ds = vtl.data.TensorDataset(vtl.zeros((3, 2)), vtl.asarray([0, 1, 2]))
        >>> len(ds), ds[1][0].shape, int(ds[1][1])
        (3, (2,), 1)
    """

    def __init__(self, *tensors: Any, device: Any = None, backend: str | None = None) -> None:
        if not tensors:
            raise ValueError("TensorDataset() needs at least one tensor")
        dev = None if device is None and backend is None else resolve_device(device, backend)
        ts = tuple(_as_tensor(t, dev, "TensorDataset()") for t in tensors)
        for t in ts:
            if t.ndim == 0:
                raise ValueError("TensorDataset(): tensors need at least one dimension, "
                                 "got a 0-d tensor")
        n = ts[0].shape[0]
        if any(t.shape[0] != n for t in ts):
            raise ValueError("TensorDataset(): size mismatch between tensors: first "
                             f"dimensions {[t.shape[0] for t in ts]}")
        self.tensors = ts

    def __getitem__(self, index: Any) -> tuple[Tensor, ...]:
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]

    def to(self, device: Any) -> TensorDataset:
        """Move every tensor to ``device`` (in place); returns ``self``."""
        dev = resolve_device(device)
        self.tensors = tuple(t.to_device(dev) for t in self.tensors)
        return self


def _check_index(i: Any, n: int, what: str) -> int:
    i = operator.index(i)
    if i < 0:
        i += n
    if not 0 <= i < n:
        raise IndexError(f"{what}: index {i} out of range for a dataset of {n} samples")
    return i


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``, in that order."""

    def __init__(self, dataset: Any, indices: Sequence[int]) -> None:
        if isinstance(indices, Tensor):
            indices = indices.numpy().tolist()
        self.dataset = dataset
        n = len(dataset)
        self.indices = [_check_index(i, n, "Subset()") for i in indices]

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, list):
            return [self.dataset[self.indices[i]] for i in index]
        return self.dataset[self.indices[_check_index(index, len(self), "Subset")]]

    def __len__(self) -> int:
        return len(self.indices)


class ConcatDataset(Dataset):
    """Several datasets one after the other."""

    def __init__(self, datasets: Sequence[Any]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset(): datasets should not be an empty iterable")
        self.cumulative_sizes: list[int] = []
        total = 0
        for d in self.datasets:
            total += len(d)
            self.cumulative_sizes.append(total)

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, index: Any) -> Any:
        i = _check_index(index, len(self), "ConcatDataset")
        k = bisect.bisect_right(self.cumulative_sizes, i)
        start = self.cumulative_sizes[k - 1] if k else 0
        return self.datasets[k][i - start]


def _split_lengths(n: int, lengths: Sequence[float]) -> list[int]:
    lengths = list(lengths)
    if not lengths:
        raise ValueError("random_split(): lengths is empty")
    if all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in lengths):
        out = [int(x) for x in lengths]
        if any(x < 0 for x in out):
            raise ValueError(f"random_split(): lengths must be non-negative, got {out}")
        if sum(out) != n:
            raise ValueError(f"random_split(): sum of lengths {sum(out)} does not equal the "
                             f"length of the dataset ({n})")
        return out
    fr = [float(x) for x in lengths]
    if any(not 0.0 <= f <= 1.0 for f in fr) or not math.isclose(sum(fr), 1.0, abs_tol=1e-6):
        raise ValueError(f"random_split(): fractions must lie in [0, 1] and sum to 1, got {fr}")
    out = [int(math.floor(n * f)) for f in fr]
    for i in range(n - sum(out)):  # remainders one by one, round-robin (PyTorch's rule)
        out[i % len(out)] += 1
    return out


def random_split(dataset: Any, lengths: Sequence[float], seed: int | None = None) -> list[Subset]:
    """Split ``dataset`` into non-overlapping random :class:`Subset` s.

    ``lengths`` are sample counts summing to ``len(dataset)`` or fractions summing
    to 1 (remainders go to the first subsets). The permutation comes from a
    ``vtl.random.Generator(seed)`` (the default generator when ``seed`` is None),
    so a seed gives the same split on every machine and backend.
    """
    n = len(dataset)
    sizes = _split_lengths(n, lengths)
    gen = vtl.random.default_generator() if seed is None else vtl.random.Generator(seed)
    perm = gen.permutation(n, backend="numpy").numpy().tolist()
    out, start = [], 0
    for k in sizes:
        out.append(Subset(dataset, perm[start:start + k]))
        start += k
    return out
