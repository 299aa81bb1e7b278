"""PyTorch idioms that port unchanged: top-level conveniences, the named tuples of
``t.max(dim)``/``sort``/``topk``/``kthvalue``, ``numel``/``dim``, ``"cuda"`` device strings and
``vtl.cuda``, ``inference_mode`` and ``set_num_threads`` (NumPy as the oracle; PyTorch's
own results where it is installed)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import to_numpy

import vtl
from vtl.backends._common import threads

RNG = np.random.default_rng(5)


def _torch():
    return pytest.importorskip("torch")


def test_tensor_from_numpy_and_factories(backend):
    t = vtl.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    assert t.dtype == vtl.float32 and t.requires_grad and t.device == vtl.Device(backend)
    data = [1, 2]
    u = vtl.tensor(data)
    data[0] = 5  # a copy
    assert u.dtype == vtl.int64 and to_numpy(u).tolist() == [1, 2]
    arr = np.arange(4.0)
    f = vtl.from_numpy(arr)
    arr[0] = 7.0  # shared memory, as torch.from_numpy
    assert f.device == vtl.Device("numpy") and to_numpy(f)[0] == 7.0
    with pytest.raises(TypeError, match="expected a numpy.ndarray"):
        vtl.from_numpy([1.0])
    vtl.manual_seed(11)
    a = vtl.rand(2, 3)
    b = vtl.randn((2, 3), dtype=vtl.float64)
    vtl.manual_seed(11)
    np.testing.assert_array_equal(to_numpy(vtl.rand((2, 3))), to_numpy(a))
    assert a.shape == (2, 3) and b.dtype == vtl.float64 and a.device == vtl.Device(backend)
    assert ((to_numpy(a) >= 0) & (to_numpy(a) < 1)).all()
    assert vtl.randn(3, requires_grad=True).requires_grad
    r = to_numpy(vtl.randint(5, (200,)))
    assert r.dtype == np.int64 and r.min() >= 0 and r.max() < 5
    r = to_numpy(vtl.randint(-3, 2, (2, 50)))
    assert r.shape == (2, 50) and r.min() >= -3 and r.max() < 2
    with pytest.raises(TypeError, match="needs a size"):
        vtl.randint(5)
    with pytest.raises(TypeError, match="sizes must be ints"):
        vtl.rand(2.5)


def test_cat_clamp_flatten(backend):
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    y = RNG.standard_normal((1, 3, 4)).astype(np.float32)
    np.testing.assert_array_equal(to_numpy(vtl.cat([vtl.asarray(x), vtl.asarray(y)])),
                                  np.concatenate([x, y]))
    np.testing.assert_array_equal(to_numpy(vtl.cat([vtl.asarray(x)] * 2, dim=2)),
                                  np.concatenate([x, x], axis=2))
    np.testing.assert_array_equal(to_numpy(vtl.clamp(vtl.asarray(x), -0.5, 0.5)),
                                  np.clip(x, -0.5, 0.5))
    np.testing.assert_array_equal(to_numpy(vtl.clamp(vtl.asarray(x), min=0.0)),
                                  np.maximum(x, 0))
    assert vtl.flatten(vtl.asarray(x)).shape == (24,)
    assert vtl.flatten(vtl.asarray(x), 1).shape == (2, 12)


def test_max_min_named_tuples(backend):
    x = np.array([[3.0, 1.0, 3.0], [0.0, 5.0, -2.0]])
    t = vtl.asarray(x, dtype=vtl.float32, requires_grad=True)
    r = t.max(1)
    assert type(r).__name__ == "max" and r._fields == ("values", "indices")
    np.testing.assert_array_equal(to_numpy(r.values), [3.0, 5.0])
    np.testing.assert_array_equal(to_numpy(r.indices), [0, 1])  # the first maximum
    values, indices = t.min(dim=0, keepdim=True)
    np.testing.assert_array_equal(to_numpy(values), [[0.0, 1.0, -2.0]])
    np.testing.assert_array_equal(to_numpy(indices), [[1, 0, 1]])
    vtl.sum(t.max(1).values).backward()  # the gradient goes to the chosen element only
    np.testing.assert_array_equal(to_numpy(t.grad), [[1, 0, 0], [0, 1, 0]])
    # no dim, or the array API's keywords: the values (vtl.max / vtl.min)
    assert float(t.max()) == 5.0
    np.testing.assert_array_equal(to_numpy(t.max(axis=1)), [3.0, 5.0])
    assert t.min(1, keepdims=True).shape == (2, 1)
    with pytest.raises(TypeError, match="both dim and axis"):
        t.max(1, axis=0)
    with pytest.raises(TypeError, match="takes one dim"):
        t.max((0, 1))
    s = vtl.asarray(2.5).max(0)
    assert float(s.values) == 2.5 and int(s.indices) == 0


def test_sort_topk_kthvalue(backend):
    x = RNG.standard_normal((3, 7)).astype(np.float32)
    t = vtl.asarray(x)
    v, i = t.sort(1)
    np.testing.assert_array_equal(to_numpy(v), np.sort(x, axis=1))
    np.testing.assert_array_equal(to_numpy(i), np.argsort(x, axis=1, kind="stable"))
    v, i = t.sort(0, descending=True)
    np.testing.assert_array_equal(to_numpy(v), -np.sort(-x, axis=0))
    v, i = t.topk(3)
    want = np.argsort(-x, axis=1, kind="stable")[:, :3]
    np.testing.assert_array_equal(to_numpy(i), want)
    np.testing.assert_array_equal(to_numpy(v), np.take_along_axis(x, want, 1))
    v, i = t.topk(2, dim=0, largest=False)
    np.testing.assert_array_equal(to_numpy(v), np.sort(x, axis=0)[:2])
    assert t.topk(0).values.shape == (3, 0)
    with pytest.raises(ValueError, match=r"k must be an int in \[0, 7\]"):
        t.topk(8)
    v, i = t.kthvalue(3, dim=1)
    np.testing.assert_array_equal(to_numpy(v), np.sort(x, axis=1)[:, 2])
    np.testing.assert_array_equal(to_numpy(i), np.argsort(x, axis=1, kind="stable")[:, 2])
    assert t.kthvalue(1, 0, keepdim=True).values.shape == (1, 7)
    with pytest.raises(ValueError, match=r"k must be an int in \[1, 3\]"):
        t.kthvalue(0, 0)
    g = vtl.asarray(x, requires_grad=True)
    vtl.sum(g.topk(2).values).backward()
    assert to_numpy(g.grad).sum() == 6.0


def test_named_tuples_match_pytorch():
    torch = _torch()
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    t, tt = vtl.asarray(x), torch.from_numpy(x)
    for name, args in (("max", (1,)), ("min", (0,)), ("sort", (1,)), ("topk", (3,)),
                       ("kthvalue", (2, 1))):
        ours, theirs = getattr(t, name)(*args), getattr(tt, name)(*args)
        np.testing.assert_array_equal(to_numpy(ours.values), theirs.values.numpy(), err_msg=name)
        np.testing.assert_array_equal(to_numpy(ours.indices), theirs.indices.numpy(),
                                      err_msg=name)


def test_numel_dim():
    t = vtl.ones((2, 3, 4))
    assert t.numel() == 24 and t.dim() == 3 and t.size == 24


def test_cuda_names():
    assert vtl.Device("cuda") == vtl.Device("cupy:0")
    assert vtl.Device("cuda:1") == vtl.Device("cupy", 1)
    assert vtl.Device("CUDA:2").backend_name == "cupy"
    with pytest.raises(ValueError, match="'cuda' for cupy"):
        vtl.Device("gpu")
    available = vtl.backends.get("cupy").is_available
    assert vtl.cuda.is_available() == available
    assert (vtl.cuda.device_count() > 0) == available
    if not available:
        with pytest.raises(RuntimeError, match="backend 'cupy' is not available"):
            vtl.cuda.synchronize()
        with pytest.raises(RuntimeError, match="not available"):
            vtl.ones((2,)).cuda()
        with pytest.raises(RuntimeError, match="not available"):
            vtl.nn.Linear(2, 2).cuda()
        return
    t = vtl.ones((2,)).cuda()
    assert t.device == vtl.Device("cuda:0")
    m = vtl.nn.Linear(2, 2).to("cuda")
    assert m.weight.device == vtl.Device("cupy:0")
    vtl.cuda.synchronize()
    assert vtl.cuda.current_device() == 0


def test_inference_mode():
    x = vtl.ones((2,), requires_grad=True)
    with vtl.inference_mode():
        assert not (x * 2).requires_grad
    with vtl.inference_mode(False):
        assert (x * 2).requires_grad

    @vtl.inference_mode
    def f(t):
        return t * 2

    assert not f(x).requires_grad and (x * 2).requires_grad


def test_set_num_threads(monkeypatch):
    monkeypatch.setattr(threads, "_limit", None)
    monkeypatch.setattr(threads, "usable_cpus", lambda: 8)
    monkeypatch.setenv("VTL_NUM_THREADS", "4")
    assert vtl.get_num_threads() == 4
    vtl.set_num_threads(2)
    assert vtl.get_num_threads() == 2  # overrides the environment
    vtl.set_num_threads(16)
    assert vtl.get_num_threads() == 8  # never more than the usable CPUs
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="positive int"):
            vtl.set_num_threads(bad)
