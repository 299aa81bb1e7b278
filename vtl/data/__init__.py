"""Datasets and the DataLoader (PyTorch's ``torch.utils.data`` names).

>>> ds = vtl.data.TensorDataset(x, y)
>>> train, val = vtl.data.random_split(ds, [0.8, 0.2], seed=0)
>>> for xb, yb in vtl.data.DataLoader(train, batch_size=64, shuffle=True, seed=0):
...     ...
"""

from . import transforms
from ._worker import WorkerInfo, get_worker_info
from .dataset import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    Subset,
    TensorDataset,
    random_split,
)
from .loader import DataLoader, RandomSampler, SequentialSampler, default_collate
from .transforms import normalize, one_hot, to_float

__all__ = [
    "ConcatDataset", "DataLoader", "Dataset", "RandomSampler", "SequentialSampler", "Subset",
    "TensorDataset", "default_collate", "normalize", "one_hot", "random_split", "to_float",
    "transforms",
]
__all__ += ["ChainDataset", "IterableDataset", "WorkerInfo", "get_worker_info"]
