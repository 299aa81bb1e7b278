"""DataLoader(num_workers=N): worker processes give the batches of num_workers=0, in its
order; get_worker_info, worker_init_fn and seeds; IterableDataset sharding; persistent
workers; errors, dead workers and timeouts; clean shutdown; the thread fallback.

Workers start with the default start method (forkserver on Linux): the datasets live in
tests/data_worker_datasets.py so that a worker imports only numpy and vtl to unpickle them.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import time
import warnings

import data_worker_datasets as dwd
import numpy as np
import pytest
from helpers import to_numpy

import vtl
from vtl.data import DataLoader, TensorDataset, get_worker_info

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


def _children_gone(timeout: float = 5.0) -> list:
    end = time.monotonic() + timeout
    while True:
        gc.collect()
        left = [p for p in multiprocessing.active_children()
                if p.name.startswith("vtl-data-worker")]
        if not left or time.monotonic() > end:
            return left
        time.sleep(0.02)


def _same(a, b) -> None:
    """Two batches are equal: structure, values, dtypes and devices."""
    if isinstance(a, vtl.Tensor):
        assert isinstance(b, vtl.Tensor)
        assert a.dtype == b.dtype and a.device == b.device and a.shape == b.shape
        np.testing.assert_array_equal(to_numpy(a), to_numpy(b))
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    elif isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same(x, y)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _same(a[k], b[k])
    else:
        assert a == b


@pytest.mark.parametrize("shuffle,drop_last", [(True, False), (False, True)])
def test_same_batches_and_order_as_without_workers(backend, shuffle, drop_last):
    ds = dwd.Rows(23)
    kw = dict(batch_size=4, shuffle=shuffle, drop_last=drop_last, seed=3 if shuffle else None)
    ref = list(DataLoader(ds, **kw))
    got = list(DataLoader(ds, num_workers=2, **kw))
    assert len(got) == len(ref) == (5 if drop_last else 6)
    for a, b in zip(ref, got, strict=True):
        _same(a, b)
    assert got[0][0].device == vtl.backends.default_device()
    assert got[0][1].dtype == vtl.__array_namespace_info__().default_dtypes(
        device=got[0][1].device)["indexing"]
    assert got[0][2]["name"] == ["s" + str(int(i)) for i in to_numpy(got[0][1])]
    assert not _children_gone()


def test_tensor_samples_and_bools(backend):
    ds = dwd.TensorRows(7)
    ref = list(DataLoader(ds, batch_size=3))
    got = list(DataLoader(ds, batch_size=3, num_workers=2))
    for a, b in zip(ref, got, strict=True):
        _same(a, b)
    assert got[0][1].dtype == vtl.bool


def test_custom_collate_and_device(backend):
    ds = dwd.Rows(10)
    ref = list(DataLoader(ds, batch_size=4, collate_fn=dwd.pair_collate, backend=backend))
    got = list(DataLoader(ds, batch_size=4, collate_fn=dwd.pair_collate, backend=backend,
                          num_workers=2, prefetch_factor=1))
    for a, b in zip(ref, got, strict=True):
        _same(a, b)
    assert got[0][0].device == vtl.backends.get(backend).device(0)
    assert isinstance(got[0][1], np.ndarray)  # NumPy from collate_fn stays NumPy


def test_worker_info_init_fn_and_seeds():
    assert get_worker_info() is None
    loader = DataLoader(dwd.WhoAmI(8), batch_size=2, num_workers=2,
                        worker_init_fn=dwd.set_tag, backend="numpy")
    rows = [tuple(to_numpy(t) for t in b) for b in loader]
    ids = np.concatenate([r[1] for r in rows])
    np.testing.assert_array_equal(ids, [0, 0, 1, 1, 0, 0, 1, 1])  # round-robin by batch
    assert set(np.concatenate([r[2] for r in rows])) == {2}
    seeds = np.concatenate([r[3] for r in rows])
    assert seeds[2] == seeds[0] + 1  # base_seed + worker id
    tags = np.concatenate([r[6] for r in rows])
    np.testing.assert_array_equal(tags, 100 + ids)
    draws = np.concatenate([r[5] for r in rows])
    assert len(set(draws[ids == 0])) == 4 and len(set(draws[ids == 1])) == 4
    pids = set(np.concatenate([r[4] for r in rows]).tolist())
    assert len(pids) == 2 and os.getpid() not in pids
    # the main process draws the same numbers as with num_workers=0 ...
    vtl.random.seed(5)
    list(loader)
    after_workers = vtl.random.uniform(size=(3,), backend="numpy")
    vtl.random.seed(5)
    list(DataLoader(dwd.Rows(8), batch_size=2))
    np.testing.assert_array_equal(to_numpy(after_workers),
                                  to_numpy(vtl.random.uniform(size=(3,), backend="numpy")))
    # ... and a new iterator gives the workers new seeds, reproducibly
    vtl.random.seed(5)
    a = [to_numpy(b[3]) for b in loader]
    b = [to_numpy(b[3]) for b in loader]
    vtl.random.seed(5)
    loader2 = DataLoader(dwd.WhoAmI(8), batch_size=2, num_workers=2, backend="numpy")
    loader2._iterators = loader._iterators - 2
    c = [to_numpy(b[3]) for b in loader2]
    assert a[0][0] != b[0][0]
    np.testing.assert_array_equal(np.concatenate(a), np.concatenate(c))


def test_iterable_dataset_sharding_as_pytorch():
    ds = dwd.Range(0, 10)
    plain = [to_numpy(b).tolist() for b in DataLoader(ds, batch_size=3, backend="numpy")]
    assert plain == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    got = [to_numpy(b).tolist() for b in DataLoader(ds, batch_size=3, num_workers=2,
                                                   backend="numpy")]
    # each worker batches its own share; batches alternate between the workers
    assert got == [[0, 2, 4], [1, 3, 5], [6, 8], [7, 9]]
    dropped = [to_numpy(b).tolist() for b in DataLoader(ds, batch_size=3, num_workers=2,
                                                       drop_last=True, backend="numpy")]
    assert dropped == [[0, 2, 4], [1, 3, 5]]
    unsharded = [to_numpy(b).tolist() for b in DataLoader(dwd.Range(0, 4, shard=False),
                                                         batch_size=4, num_workers=2,
                                                         backend="numpy")]
    assert unsharded == [[0, 1, 2, 3], [0, 1, 2, 3]]  # every worker yields the whole stream
    assert len(DataLoader(ds, batch_size=3)) == 4
    if torch is not None:
        class TorchRange(torch.utils.data.IterableDataset):
            def __iter__(self):
                info = torch.utils.data.get_worker_info()
                return iter(range(info.id, 10, info.num_workers))

        expect = [b.tolist() for b in torch.utils.data.DataLoader(
            TorchRange(), batch_size=3, num_workers=2, multiprocessing_context="fork")]
        assert got == expect
    with pytest.raises(ValueError, match="IterableDataset: expected unspecified shuffle"):
        DataLoader(ds, shuffle=True)


def test_persistent_workers_keep_their_processes():
    loader = DataLoader(dwd.WhoAmI(6), batch_size=2, num_workers=2, persistent_workers=True,
                        backend="numpy")
    pids = [set(np.concatenate([to_numpy(b[4]) for b in loader]).tolist()) for _ in range(3)]
    assert pids[0] == pids[1] == pids[2] and len(pids[0]) == 2
    it = iter(loader)
    next(it)
    fresh = iter(loader)  # takes the workers over: the old iterator is done
    assert len(list(fresh)) == 3
    with pytest.raises(RuntimeError, match="no longer served"):
        next(it)
    del loader, it, fresh
    assert not _children_gone()
    other = DataLoader(dwd.WhoAmI(6), batch_size=2, num_workers=2, backend="numpy")
    p1 = set(np.concatenate([to_numpy(b[4]) for b in other]).tolist())
    p2 = set(np.concatenate([to_numpy(b[4]) for b in other]).tolist())
    assert p1.isdisjoint(p2)


@pytest.mark.parametrize("error", [KeyError, ValueError])
def test_worker_error_is_raised_with_its_traceback(error):
    loader = DataLoader(dwd.Broken(10, bad=5, error=error), batch_size=2, num_workers=2,
                        backend="numpy")
    with pytest.raises(error) as info:
        list(loader)
    msg = str(info.value)
    assert "in DataLoader worker process 0" in msg  # batch 2 (indices 4, 5) is worker 0's
    assert "Original Traceback" in msg and "sample 5 is broken" in msg
    assert "data_worker_datasets.py" in msg and "__getitem__" in msg
    assert any("dataset[5]" in n for n in getattr(info.value, "__notes__", []))
    assert not _children_gone()


def test_dead_worker_and_timeout():
    with pytest.raises(RuntimeError, match=r"exited unexpectedly \(pid [0-9]+: exit code 7\)"):
        list(DataLoader(dwd.Dies(8, bad=3), batch_size=2, num_workers=2, backend="numpy"))
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="timed out after 0.3 seconds"):
        list(DataLoader(dwd.Sleepy(4, 3.0), batch_size=2, num_workers=2, timeout=0.3,
                        backend="numpy"))
    assert time.monotonic() - t0 < 2.9  # did not wait for the sleeping worker
    assert not _children_gone()


def test_abandoned_iterator_stops_its_workers():
    it = iter(DataLoader(dwd.Rows(40), batch_size=2, num_workers=2, backend="numpy"))
    next(it)
    assert len(multiprocessing.active_children()) >= 2
    del it
    assert not _children_gone()
    it = iter(DataLoader(dwd.Rows(40), batch_size=2, num_workers=2, backend="numpy"))
    next(it)
    it.close()
    assert not _children_gone()
    with pytest.raises(StopIteration):
        next(it)


def test_unpicklable_dataset_falls_back_to_threads(backend):
    class Local(vtl.data.Dataset):  # a local class cannot be pickled
        def __len__(self):
            return 6

        def __getitem__(self, i):
            made_on = vtl.ones((1,)).device.backend_name  # worker threads make host tensors
            return i * 2, get_worker_info().id, made_on == "numpy"

    with pytest.warns(RuntimeWarning, match="cannot be pickled.*run as threads"):
        batches = list(DataLoader(Local(), batch_size=2, num_workers=2))
    got = [tuple(to_numpy(t).tolist() for t in b) for b in batches]
    assert got == [([0, 2], [0, 0], [True, True]), ([4, 6], [1, 1], [True, True]),
                   ([8, 10], [0, 0], [True, True])]
    assert batches[0][0].device == vtl.backends.default_device()
    assert get_worker_info() is None


def test_tensor_dataset_is_gathered_in_the_main_process(backend):
    x = vtl.asarray(np.arange(20, dtype=np.float32).reshape(10, 2))
    ds = TensorDataset(x, vtl.arange(10))
    ref = list(DataLoader(ds, batch_size=4, shuffle=True, seed=1))
    got = list(DataLoader(ds, batch_size=4, shuffle=True, seed=1, num_workers=2))
    for a, b in zip(ref, got, strict=True):
        _same(a, b)
    assert not multiprocessing.active_children()


def test_arguments_are_checked():
    ds = dwd.Rows(4)
    with pytest.raises(ValueError, match="num_workers option should be a non-negative"):
        DataLoader(ds, num_workers=-1)
    with pytest.raises(ValueError, match="prefetch_factor option could only be specified"):
        DataLoader(ds, prefetch_factor=2)
    with pytest.raises(ValueError, match="prefetch_factor must be a positive int"):
        DataLoader(ds, num_workers=1, prefetch_factor=0)
    with pytest.raises(ValueError, match="persistent_workers option needs num_workers > 0"):
        DataLoader(ds, persistent_workers=True)
    with pytest.raises(ValueError, match="timeout option should be non-negative"):
        DataLoader(ds, timeout=-1)
    with pytest.raises(ValueError, match="is not a start method"):
        DataLoader(ds, num_workers=1, multiprocessing_context="teleport")
    with pytest.raises(TypeError, match="worker_init_fn must be callable"):
        DataLoader(ds, num_workers=1, worker_init_fn=3)
    with pytest.raises(TypeError, match="generator must be a vtl.random.Generator"):
        DataLoader(ds, generator=np.random.default_rng())
    with pytest.raises(ValueError, match="seed or generator"):
        DataLoader(ds, shuffle=True, seed=1, generator=vtl.random.Generator(2))
    loader = DataLoader(ds, num_workers=2, pin_memory=True)
    assert loader.prefetch_factor == 2 and loader.pin_memory
    default = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() \
        else "spawn"
    assert loader.multiprocessing_context.get_start_method() == default


def test_generator_draws_the_shuffle_seed():
    g1, g2 = vtl.random.Generator(11), vtl.random.Generator(11)
    a = [to_numpy(b[1]).tolist() for b in DataLoader(dwd.Rows(9), batch_size=3, shuffle=True,
                                                    generator=g1, backend="numpy")]
    b = [to_numpy(b[1]).tolist() for b in DataLoader(dwd.Rows(9), batch_size=3, shuffle=True,
                                                    generator=g2, num_workers=2,
                                                    backend="numpy")]
    assert a == b and sorted(sum(a, [])) == list(range(9))


def test_fork_context_is_accepted_where_available():
    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("no fork start method on this platform")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork of a threaded process
        got = [to_numpy(b[1]).tolist() for b in DataLoader(dwd.Rows(6), batch_size=3,
                                                          num_workers=2, backend="numpy",
                                                          multiprocessing_context="fork")]
    assert got == [[0, 1, 2], [3, 4, 5]]
