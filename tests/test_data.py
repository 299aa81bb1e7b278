"""vtl.data: datasets, random_split, DataLoader (order, seeds, prefetch thread), transforms."""

from __future__ import annotations

import gc
import threading
import time

import numpy as np
import pytest
from helpers import assert_close, to_numpy
from hypothesis import given
from hypothesis import strategies as st

import vtl
from vtl.data import (
    ConcatDataset,
    DataLoader,
    Dataset,
    Subset,
    TensorDataset,
    normalize,
    one_hot,
    random_split,
    to_float,
)


def _index_dtype():
    """int64, or the default device's index dtype where it lacks int64."""
    return vtl.__array_namespace_info__().default_dtypes(device=vtl.asarray(0).device)[
        "indexing"]


def _ds(n: int = 10) -> TensorDataset:
    x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    return TensorDataset(x, np.arange(n).astype(_index_dtype()))


def _labels(loader) -> list[list[int]]:
    return [to_numpy(b[1]).tolist() for b in loader]


class ListDataset(Dataset):
    """A non-tensor dataset: (numpy row, int label, float weight)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __getitem__(self, i: int):
        if not 0 <= i < self.n:
            raise IndexError(i)
        return np.full((2,), i, dtype=np.float32), i, float(i) / 2

    def __len__(self) -> int:
        return self.n


def _wait_no_prefetch_threads(timeout: float = 2.0) -> list[threading.Thread]:
    end = time.time() + timeout
    while True:
        gc.collect()
        alive = [t for t in threading.enumerate() if t.name == "vtl-data-prefetch"]
        if not alive or time.time() > end:
            return alive
        time.sleep(0.02)


# -- datasets -----------------------------------------------------------------------------
def test_tensor_dataset(backend):
    ds = _ds(6)
    assert len(ds) == 6
    x, y = ds[4]
    assert x.device == vtl.asarray(0).device
    assert_close(x, np.arange(12, 15, dtype=np.float32))
    assert int(y) == 4
    with pytest.raises(ValueError, match="size mismatch"):
        TensorDataset(np.zeros((3, 2)), np.zeros(4))
    with pytest.raises(ValueError, match="at least one tensor"):
        TensorDataset()
    with pytest.raises(ValueError, match="0-d"):
        TensorDataset(np.float32(1.0))


def test_abstract_dataset():
    with pytest.raises(NotImplementedError):
        Dataset()[0]
    with pytest.raises(NotImplementedError):
        len(Dataset())


def test_subset_and_concat(backend):
    ds = _ds(5)
    sub = Subset(ds, [4, 0, -1])
    assert len(sub) == 3
    assert [int(sub[i][1]) for i in range(3)] == [4, 0, 4]
    with pytest.raises(IndexError):
        Subset(ds, [5])
    with pytest.raises(IndexError):
        sub[3]
    cat = ConcatDataset([ds, sub])
    assert len(cat) == 8
    assert [int(cat[i][1]) for i in range(8)] == [0, 1, 2, 3, 4, 4, 0, 4]
    assert int(cat[-1][1]) == 4
    with pytest.raises(IndexError):
        cat[8]
    with pytest.raises(ValueError):
        ConcatDataset([])
    assert len(ds + sub) == 8


@given(n=st.integers(0, 40), parts=st.integers(1, 4), seed=st.integers(0, 2**63))
def test_random_split_partition(n, parts, seed):
    ds = list(range(n))
    lengths = [n // parts] * parts
    lengths[0] += n - sum(lengths)
    splits = random_split(ds, lengths, seed=seed)
    assert [len(s) for s in splits] == lengths
    seen = sorted(i for s in splits for i in s.indices)
    assert seen == list(range(n))
    again = random_split(ds, lengths, seed=seed)
    assert [s.indices for s in splits] == [s.indices for s in again]


def test_random_split_fractions_and_errors():
    ds = list(range(10))
    a, b, c = random_split(ds, [0.5, 0.3, 0.2], seed=1)
    assert (len(a), len(b), len(c)) == (5, 3, 2)
    a, b = random_split(ds, [0.55, 0.45], seed=1)  # 5.5 / 4.5: remainder to the first
    assert (len(a), len(b)) == (6, 4)
    assert random_split(ds, [5, 5], seed=1)[0].indices != random_split(ds, [5, 5],
                                                                       seed=2)[0].indices
    with pytest.raises(ValueError, match="sum of lengths"):
        random_split(ds, [3, 3], seed=0)
    with pytest.raises(ValueError, match="sum to 1"):
        random_split(ds, [0.5, 0.2], seed=0)
    with pytest.raises(ValueError, match="non-negative"):
        random_split(ds, [11, -1], seed=0)
    vtl.random.seed(5)
    x = random_split(ds, [5, 5])[0].indices
    vtl.random.seed(5)
    assert random_split(ds, [5, 5])[0].indices == x


# -- DataLoader ---------------------------------------------------------------------------
@pytest.mark.parametrize("prefetch", [0, 2])
def test_loader_sequential(backend, prefetch):
    ds = _ds(10)
    loader = DataLoader(ds, batch_size=4, prefetch=prefetch)
    assert len(loader) == 3
    batches = list(loader)
    assert [tuple(b[0].shape) for b in batches] == [(4, 3), (4, 3), (2, 3)]
    assert _labels(loader) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    xb, yb = batches[1]
    assert isinstance(batches[1], tuple)
    assert_close(xb, np.arange(30, dtype=np.float32).reshape(10, 3)[4:8])
    assert yb.dtype == _index_dtype()
    assert xb.device == ds.tensors[0].device
    dl = DataLoader(ds, batch_size=4, drop_last=True, prefetch=prefetch)
    assert len(dl) == 2
    assert _labels(dl) == [[0, 1, 2, 3], [4, 5, 6, 7]]


@pytest.mark.parametrize("n,bs,drop", [(10, 3, False), (10, 3, True), (9, 3, True),
                                       (1, 5, False), (1, 5, True), (0, 2, False)])
def test_loader_covers_each_sample_once(backend, n, bs, drop):
    loader = DataLoader(_ds(n), batch_size=bs, shuffle=True, drop_last=drop, seed=3)
    expected_batches = n // bs if drop else -(-n // bs)
    assert len(loader) == expected_batches
    for _ in range(2):
        labels = _labels(loader)
        assert len(labels) == expected_batches
        assert all(len(b) == bs for b in labels[:-1])
        flat = [i for b in labels for i in b]
        assert len(set(flat)) == len(flat)
        if drop:
            assert len(flat) == expected_batches * bs
        else:
            assert sorted(flat) == list(range(n))


@given(n=st.integers(0, 30), bs=st.integers(1, 8), drop=st.booleans(),
       seed=st.integers(0, 2**64 - 1), prefetch=st.integers(0, 3))
def test_loader_partition_property(n, bs, drop, seed, prefetch):
    loader = DataLoader(_ds(n), batch_size=bs, shuffle=True, drop_last=drop, seed=seed,
                        prefetch=prefetch)
    labels = _labels(loader)
    assert len(labels) == len(loader)
    flat = [i for b in labels for i in b]
    assert len(set(flat)) == len(flat) and set(flat) <= set(range(n))
    assert len(flat) == (n - n % bs if drop else n)
    assert all(len(b) == bs for b in labels[:-1])


def test_loader_gathers_tensor_datasets_without_per_item_calls(backend, monkeypatch):
    ds = _ds(9)

    def no_items(self, index):
        raise AssertionError("per-sample __getitem__ called")

    monkeypatch.setattr(TensorDataset, "__getitem__", no_items)
    assert _labels(DataLoader(ds, batch_size=4, shuffle=True, seed=0))
    assert _labels(DataLoader(Subset(ds, [8, 1, 2]), batch_size=2)) == [[8, 1], [2]]
    with pytest.raises(AssertionError, match="per-sample"):  # a collate_fn needs the samples
        list(DataLoader(ds, batch_size=4, collate_fn=list, prefetch=0))


def test_loader_reshuffles_and_is_deterministic(backend):
    ds = _ds(50)
    a = DataLoader(ds, batch_size=50, shuffle=True, seed=11)
    b = DataLoader(ds, batch_size=50, shuffle=True, seed=11)
    c = DataLoader(ds, batch_size=50, shuffle=True, seed=12)
    e0, e1 = _labels(a)[0], _labels(a)[0]
    assert e0 != e1  # a new order each epoch
    assert sorted(e0) == sorted(e1) == list(range(50))
    assert _labels(b)[0] == e0 and _labels(b)[0] == e1  # same seed, same epochs
    assert _labels(c)[0] != e0
    assert a.epoch == 2
    a.set_epoch(1)
    assert _labels(a)[0] == e1
    # the order is the Philox permutation of (seed, epoch), independent of the backend
    from vtl.data.loader import epoch_permutation

    assert e0 == epoch_permutation(50, 11, 0).tolist()


def test_loader_seed_none_uses_default_generator():
    ds = _ds(30)
    vtl.random.seed(7)
    first = _labels(DataLoader(ds, batch_size=30, shuffle=True))[0]
    vtl.random.seed(7)
    assert _labels(DataLoader(ds, batch_size=30, shuffle=True))[0] == first


def test_loader_same_order_on_every_backend(backend):
    ds = _ds(20)
    got = _labels(DataLoader(ds, batch_size=7, shuffle=True, seed=5))
    with vtl.use_backend("numpy"):
        ref = _labels(DataLoader(_ds(20), batch_size=7, shuffle=True, seed=5))
    assert got == ref


def test_loader_subset_of_tensor_dataset(backend):
    ds = _ds(10)
    sub = Subset(ds, [9, 3, 5, 1])
    assert _labels(DataLoader(sub, batch_size=3)) == [[9, 3, 5], [1]]
    sub2 = Subset(sub, [3, 0])
    assert _labels(DataLoader(sub2, batch_size=2)) == [[1, 9]]


def test_loader_generic_dataset_default_collate(backend):
    ds = ListDataset(5)
    loader = DataLoader(ds, batch_size=2)
    batches = list(loader)
    assert len(batches) == 3
    x, y, w = batches[0]
    assert tuple(x.shape) == (2, 2) and x.dtype == vtl.float32
    assert y.dtype == _index_dtype() and y.tolist() == [0, 1]
    assert w.dtype == vtl.float32 and w.tolist() == [0.0, 0.5]
    assert x.device == vtl.asarray(0).device
    dicts = [{"a": i, "s": str(i)} for i in range(3)]
    out = list(DataLoader(dicts, batch_size=3))[0]
    assert out["a"].tolist() == [0, 1, 2] and out["s"] == ["0", "1", "2"]


def test_loader_collate_fn_and_sampler(backend):
    ds = _ds(6)
    loader = DataLoader(ds, batch_size=2, collate_fn=lambda items: [int(y) for _, y in items],
                        sampler=[5, 4, 3, 2, 1, 0])
    assert list(loader) == [[5, 4], [3, 2], [1, 0]]
    assert len(loader) == 3
    with pytest.raises(ValueError, match="mutually exclusive"):
        DataLoader(ds, sampler=[0], shuffle=True)
    with pytest.raises(ValueError, match="batch_size"):
        DataLoader(ds, batch_size=0)
    with pytest.raises(ValueError, match="prefetch"):
        DataLoader(ds, prefetch=-1)


def test_loader_moves_batches_to_device(backend, other_backends):
    ds = _ds(5)
    with vtl.use_backend("numpy"):
        host = _ds(5)
    for xb, _ in DataLoader(host, batch_size=2, backend=backend):
        assert xb.device.backend_name == backend
    for xb, _, _ in DataLoader(ListDataset(4), batch_size=2, device=ds.tensors[0].device):
        assert xb.device == ds.tensors[0].device
    for name in other_backends:
        for xb, yb in DataLoader(ds, batch_size=2, backend=name):
            assert xb.device.backend_name == name and yb.device.backend_name == name


def test_prefetch_thread_ends_cleanly():
    assert not _wait_no_prefetch_threads()
    before = threading.active_count()
    loader = DataLoader(ListDataset(50), batch_size=2, prefetch=2)
    for _ in loader:  # full epoch
        pass
    it = iter(loader)  # abandoned after one batch
    next(it)
    del it
    it2 = iter(loader)
    next(it2)
    it2.close()
    with pytest.raises(StopIteration):
        next(it2)
    assert not _wait_no_prefetch_threads()
    assert threading.active_count() == before


def test_prefetch_propagates_errors():
    class Bad(ListDataset):
        def __getitem__(self, i):
            if i == 3:
                raise KeyError("broken sample")
            return super().__getitem__(i)

    with pytest.raises(KeyError, match="broken sample"):
        list(DataLoader(Bad(6), batch_size=2, prefetch=2))
    assert not _wait_no_prefetch_threads()


def test_prefetch_runs_ahead():
    fetched: list[int] = []

    class Slow(ListDataset):
        def __getitem__(self, i):
            fetched.append(i)
            return super().__getitem__(i)

    it = iter(DataLoader(Slow(8), batch_size=1, prefetch=3))
    next(it)
    end = time.time() + 2
    while len(fetched) < 4 and time.time() < end:
        time.sleep(0.01)
    assert len(fetched) >= 4  # consumer took 1, the thread prepared 3 more
    it.close()


# -- transforms ---------------------------------------------------------------------------
def test_to_float(backend):
    x = vtl.asarray(np.array([0, 51, 255], dtype=np.uint8))
    assert_close(to_float(x, scale=255), np.array([0, 0.2, 1], dtype=np.float32))
    assert to_float(x).dtype == vtl.float32
    with pytest.raises(TypeError):
        to_float(x, dtype=vtl.int32)
    with pytest.raises(ValueError):
        to_float(x, scale=0)


def test_normalize(backend):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 3)).astype(np.float32)
    mean, std = [1.0, 2.0, 3.0], [0.5, 1.0, 2.0]
    assert_close(normalize(vtl.asarray(a), mean, std),
                 (a - np.array(mean, np.float32)) / np.array(std, np.float32))
    img = rng.standard_normal((2, 3, 2, 2)).astype(np.float32)
    ref = (img - np.array(mean, np.float32)[:, None, None]) / np.array(std, np.float32)[:, None,
                                                                                          None]
    assert_close(normalize(vtl.asarray(img), mean, std, axis=1), ref)
    assert_close(normalize(vtl.asarray(a), 0.5, 2.0), (a - 0.5) / 2)
    with pytest.raises(ValueError, match="3 values"):
        normalize(vtl.asarray(a), [1.0, 2.0, 3.0], [1.0] * 3, axis=0)
    with pytest.raises(ValueError, match="non-zero"):
        normalize(vtl.asarray(a), 0.0, 0.0)


def test_one_hot(backend):
    y = np.array([2, 0, 1, 2])
    assert_close(one_hot(vtl.asarray(y), 3), np.eye(3, dtype=np.float32)[y])
    assert one_hot(vtl.asarray(y), 4, dtype=vtl.int32).dtype == vtl.int32
    with pytest.raises(ValueError, match=r"\[0, 2\)"):
        one_hot(vtl.asarray(y), 2)
    with pytest.raises(TypeError):
        one_hot(vtl.asarray([0.5]), 2)
