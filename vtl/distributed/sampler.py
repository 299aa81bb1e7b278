"""``DistributedSampler``: each rank's disjoint share of a dataset, reshuffled every epoch."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..data.loader import epoch_permutation
from . import group as _g

__all__ = ["DistributedSampler"]


class DistributedSampler:
    """The indices of rank ``rank``'s share of ``dataset`` (PyTorch's semantics).

    Each epoch the order is a permutation of ``range(len(dataset))`` drawn from
    ``vtl.random`` with the shared ``seed`` and the epoch number (the same on every rank
    and backend; ``shuffle=False`` keeps ``0, 1, ...``). Rank ``r`` takes positions
    ``r, r + num_replicas, ...`` of it, so the shares are disjoint. When
    ``len(dataset)`` is not a multiple of ``num_replicas``, ``drop_last=False`` pads
    the order with its first indices so that every rank gets
    ``ceil(n / num_replicas)`` samples (a few appear twice per epoch), and
    ``drop_last=True`` drops the tail so that every rank gets
    ``floor(n / num_replicas)`` (each sample at most once).

    ``num_replicas``/``rank`` default to the process group's world size and rank
    (1 and 0 when it is not initialised). Pass the sampler to
    ``vtl.data.DataLoader(dataset, sampler=...)``. Like vtl's ``RandomSampler``,
    each ``iter()`` uses the current epoch and then advances it;
    ``set_epoch(e)`` (what PyTorch code calls every epoch, and what
    ``DataLoader.set_epoch`` forwards) picks one.

    Args:
        dataset: The dataset (its length is used).
        num_replicas: Number of ranks (default: the world size).
        rank: This rank (default: the process's rank).
        shuffle: Draw a new order each epoch.
        seed: Seed shared by all ranks.
        drop_last: Drop the tail instead of padding (see above).

    Raises:
        ValueError: If ``num_replicas`` is not positive or ``rank`` is out of range.
    """

    def __init__(self, dataset: Any, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False) -> None:
        init = _g.is_initialized()
        if num_replicas is None:
            num_replicas = _g.get_world_size() if init else 1
        if rank is None:
            rank = _g.get_rank() if init else 0
        if isinstance(num_replicas, bool) or not isinstance(num_replicas, int) or \
                num_replicas < 1:
            raise ValueError(f"DistributedSampler: num_replicas must be a positive int, got "
                             f"{num_replicas!r}")
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < num_replicas:
            raise ValueError(f"DistributedSampler: rank must be in [0, {num_replicas}), got "
                             f"{rank!r}")
        self.dataset = dataset
        self.n = dataset if isinstance(dataset, int) else len(dataset)
        self.num_replicas = num_replicas
        self.rank = rank
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        self.drop_last = bool(drop_last)
        self.epoch = 0
        if self.drop_last:
            self.num_samples = self.n // num_replicas
        else:
            self.num_samples = math.ceil(self.n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def set_epoch(self, epoch: int) -> None:
        """Use the order of ``epoch`` for the next iteration."""
        self.epoch = int(epoch)

    def indices(self, epoch: int | None = None) -> np.ndarray:
        """This rank's indices for ``epoch`` (default: the current one)."""
        e = self.epoch if epoch is None else int(epoch)
        if self.shuffle:
            order = epoch_permutation(self.n, self.seed, e)
        else:
            order = np.arange(self.n, dtype=np.int64)
        if self.total_size > self.n:  # pad by repeating the order from its start
            reps = math.ceil(self.total_size / max(self.n, 1))
            order = np.tile(order, reps)
        order = order[:self.total_size]
        return order[self.rank:self.total_size:self.num_replicas]

    def __iter__(self) -> Iterator[int]:
        idx = self.indices()
        self.epoch += 1
        return iter(idx.tolist())

    def __len__(self) -> int:
        return self.num_samples
