"""Datasets for tests/test_data_workers.py, in a module of their own: worker processes
import it to unpickle them, and it imports nothing heavier than numpy and vtl."""

from __future__ import annotations

import os
import time

import numpy as np

import vtl
from vtl.data import Dataset, IterableDataset, get_worker_info


class Rows(Dataset):
    """Sample i: (float32 row, int label, {'x': float, 'name': str})."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        return np.full((3,), i, dtype=np.float32), i, {"x": i / 2, "name": f"s{i}"}


class TensorRows(Dataset):
    """Sample i: a vtl tensor made in __getitem__ (on the worker's default backend)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        return vtl.full((2,), float(i)), i % 2 == 0


class WhoAmI(Dataset):
    """Sample i: (i, worker id, num_workers, worker seed, pid, a draw from vtl.random,
    the value worker_init_fn stored)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.tag = -1

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        info = get_worker_info()
        return (i, info.id, info.num_workers, info.seed, os.getpid(),
                float(vtl.random.uniform(size=(), backend="numpy").item()), info.dataset.tag)


def set_tag(worker_id: int) -> None:
    """A worker_init_fn: marks the worker's dataset copy."""
    get_worker_info().dataset.tag = 100 + worker_id


class Broken(Dataset):
    """Raises ``error`` at index ``bad``."""

    def __init__(self, n: int, bad: int, error: type = KeyError) -> None:
        self.n, self.bad, self.error = n, bad, error

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        if i == self.bad:
            raise self.error(f"sample {i} is broken")
        return np.float32(i)


class Dies(Dataset):
    """The worker process exits (as if killed) at index ``bad``."""

    def __init__(self, n: int, bad: int) -> None:
        self.n, self.bad = n, bad

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        if i == self.bad:
            os._exit(7)
        return i


class Sleepy(Dataset):
    def __init__(self, n: int, seconds: float) -> None:
        self.n, self.seconds = n, seconds

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        time.sleep(self.seconds)
        return i


class Range(IterableDataset):
    """``range(start, end)``, sharded over workers with get_worker_info when ``shard``."""

    def __init__(self, start: int, end: int, shard: bool = True) -> None:
        self.start, self.end, self.shard = start, end, shard

    def __len__(self) -> int:
        return self.end - self.start

    def __iter__(self):
        info = get_worker_info()
        if info is None or not self.shard:
            return iter(range(self.start, self.end))
        return iter(range(self.start + info.id, self.end, info.num_workers))


def pair_collate(samples):
    """A collate_fn returning a vtl tensor, a NumPy array and a list."""
    xs = np.stack([s[0] for s in samples])
    return vtl.asarray(xs) * 2, xs, [s[1] for s in samples]
