"""Out-of-range integer indices raise ``IndexError`` on every backend, on every index path.

On the numpy backend (and for indices in host memory) the error comes from the call; on a
GPU the indices are checked on the device and the error is raised by the thread's next
read of a result (``.numpy()``, ``float()``, ``.item()``) or ``synchronize()``, with the
failing entries reading and writing nothing. Either way the test reads the result.
"""

from __future__ import annotations

import re
import threading

import numpy as np
import pytest

import vtl
from vtl import backends, nn

MSG = re.compile(r"index (-?\d+) is out of bounds for axis (\d+) with size (\d+)")


def _raises(fn, value: int, axis: int, size: int) -> None:
    """``fn()`` and reading its result raise the IndexError naming value/axis/size."""
    with pytest.raises(IndexError) as info:
        out = fn()
        if out is not None:
            out.numpy()
        vtl.backends.get(vtl.get_backend()).synchronize()
    m = MSG.search(str(info.value))
    assert m is not None, str(info.value)
    assert (int(m[1]), int(m[2]), int(m[3])) == (value, axis, size)


def _device_ints(values) -> vtl.Tensor:
    """Integers computed on the device (their values are not known on the host)."""
    a = np.asarray(values, dtype=np.int64)
    return vtl.asarray(a + 1) - 1


def _t(idx):
    """``idx`` as a tensor (``take`` takes tensors only, as the standard says)."""
    return idx if isinstance(idx, vtl.Tensor) else vtl.asarray(idx)


@pytest.fixture(params=["device", "uploaded", "host"])
def make_index(request):
    """Index arrays made on the device, uploaded from NumPy, or given as NumPy arrays."""
    kind = request.param
    if kind == "device":
        return _device_ints
    if kind == "uploaded":
        return lambda v: vtl.asarray(np.asarray(v, dtype=np.int64))
    return lambda v: np.asarray(v, dtype=np.int64)


def test_take_and_getitem(backend, make_index):
    x = vtl.asarray(np.arange(10.0, dtype=np.float32))
    _raises(lambda: vtl.take(x, _t(make_index([1, 12]))), 12, 0, 10)
    _raises(lambda: x[make_index([3, -11])], -11, 0, 10)
    _raises(lambda: x[make_index([10])], 10, 0, 10)
    # in range, negative included: NumPy's values
    np.testing.assert_array_equal(x[make_index([0, -1, -10, 9])].numpy(), [0, 9, 0, 9])


def test_the_error_names_the_axis(backend, make_index):
    x = vtl.asarray(np.arange(12.0, dtype=np.float32).reshape(3, 4))
    _raises(lambda: x[:, make_index([0, 4])], 4, 1, 4)
    _raises(lambda: x[make_index([0, 1]), make_index([0, 4])], 4, 1, 4)
    _raises(lambda: x[make_index([3]), make_index([0])], 3, 0, 3)
    _raises(lambda: vtl.take(x, _t(make_index([5])), axis=1), 5, 1, 4)
    # a bad index of one axis must not land on a valid element through the flat offset
    np.testing.assert_array_equal(
        x[make_index([0, 2]), make_index([3, -4])].numpy(), [3.0, 8.0])


def test_take_along_axis(backend):
    x = vtl.asarray(np.arange(12.0, dtype=np.float32).reshape(3, 4))
    for make in (_device_ints, lambda v: vtl.asarray(np.asarray(v, np.int64))):
        _raises(lambda m=make: vtl.take_along_axis(x, m([[0], [4], [1]]), axis=1), 4, 1, 4)
        _raises(lambda m=make: vtl.take_along_axis(x, m([[0, 1, 3, 2]]), axis=0), 3, 0, 3)
        got = vtl.take_along_axis(x, make([[0], [-1], [1]]), axis=1).numpy()
        np.testing.assert_array_equal(got, [[0.0], [7.0], [9.0]])


def test_a_failed_write_writes_nothing(backend, make_index):
    x = vtl.asarray(np.arange(10.0, dtype=np.float32))

    def write():
        x[make_index([6, 12])] = 5.0

    _raises(write, 12, 0, 10)
    np.testing.assert_array_equal(x.numpy(), np.arange(10.0))

    def write_tensor():
        x[make_index([1, -20])] = vtl.asarray(np.array([7.0, 8.0], np.float32))

    _raises(write_tensor, -20, 0, 10)
    np.testing.assert_array_equal(x.numpy(), np.arange(10.0))
    x[make_index([1, -1])] = 3.0  # and a good write still writes
    np.testing.assert_array_equal(x.numpy()[[0, 1, 9]], [0.0, 3.0, 3.0])


def test_embedding(backend):
    vtl.random.seed(0)
    emb = nn.Embedding(10, 3)
    _raises(lambda: emb(_device_ints([[1, 12], [0, 2]])), 12, 0, 10)
    _raises(lambda: emb(_device_ints([1000])), 1000, 0, 10)
    _raises(lambda: emb(vtl.asarray(np.array([3, 10]))), 10, 0, 10)
    # unlike take and x[idx] (NumPy), embedding takes no negative index (PyTorch)
    _raises(lambda: emb(_device_ints([3, -1])), -1, 0, 10)
    _raises(lambda: emb(vtl.asarray(np.array([[0, 2], [-10, 1]]))), -10, 0, 10)
    ref = emb.weight.numpy()[[3, 9, 0]]
    np.testing.assert_array_equal(emb(_device_ints([3, 9, 0])).numpy(), ref)


def test_gradient_never_lands_on_a_wrapped_row(backend):
    w = vtl.asarray(np.ones((10, 2), np.float32), requires_grad=True)
    with pytest.raises(IndexError, match="index 12 is out of bounds"):
        loss = vtl.sum(vtl.take(w, _device_ints([1, 12]), axis=0))
        loss.backward()
        w.grad.numpy()
    if w.grad is not None:  # the GPU backends ran the backward before the read raised
        g = w.grad.numpy()
        assert g[2].tolist() == [0.0, 0.0]  # 12 % 10: nothing there
        assert g[1].tolist() == [1.0, 1.0]


def test_the_error_is_raised_once_and_work_goes_on(backend):
    x = vtl.asarray(np.arange(10.0, dtype=np.float32))
    _raises(lambda: x[_device_ints([11])], 11, 0, 10)
    np.testing.assert_array_equal((x[_device_ints([2, 3])] + 1).numpy(), [3.0, 4.0])
    assert float(vtl.sum(x)) == 45.0


def test_the_first_bad_index_is_reported(backend):
    x = vtl.asarray(np.arange(10.0, dtype=np.float32))
    if backend == "numpy":
        pytest.skip("numpy raises at the first call")
    y = x[_device_ints([15])]  # no error at the call on a GPU: nothing was read
    z = vtl.take(x, _device_ints([-30]))
    with pytest.raises(IndexError, match="index 15 is out of bounds"):
        (y + z).numpy()
    assert float(vtl.sum(x)) == 45.0


@pytest.mark.parametrize("gpu", ["wgpu", "cupy"])
def test_a_device_check_does_not_wait_for_the_device(gpu, monkeypatch):
    b = backends.get(gpu)
    if not b.is_available:
        pytest.skip(f"{gpu}: {b.unavailable_reason}")
    with vtl.use_backend(gpu):
        x = vtl.asarray(np.arange(10.0, dtype=np.float32))
        idx = _device_ints([1, 2])
        calls = []
        orig = b.to_host
        b.to_host = lambda raw: calls.append(1) or orig(raw)
        try:
            y = x[idx]
            vtl.take(x, idx)
            x[idx] = 1.0
        finally:
            del b.to_host
        assert not calls
        if gpu == "wgpu":
            from vtl.backends.wgpu import _recorder
            from vtl.backends.wgpu._recorder import REC

            monkeypatch.setattr(_recorder, "FLUSH_AFTER_S", float("inf"))
            before = REC.submits
            vtl.take(x, _device_ints([3]))
            assert REC.submits == before  # recorded, not submitted
        np.testing.assert_array_equal(y.numpy(), [1.0, 2.0])  # read before the write


def test_errors_belong_to_the_thread_that_made_them(backend):
    if backend == "numpy":
        pytest.skip("numpy raises at the call")
    x = vtl.asarray(np.arange(10.0, dtype=np.float32))
    seen: dict[str, object] = {}
    bad_done = threading.Event()
    good_read = threading.Event()

    def bad():
        with vtl.use_backend(backend):
            y = x[_device_ints([20])]
            bad_done.set()
            good_read.wait(60)
            try:
                y.numpy()
                seen["bad"] = None
            except IndexError as exc:
                seen["bad"] = exc

    def good():
        with vtl.use_backend(backend):
            bad_done.wait(60)
            try:
                seen["good"] = x[_device_ints([1, 2])].numpy().tolist()
            finally:
                good_read.set()

    ts = [threading.Thread(target=bad), threading.Thread(target=good)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert seen["good"] == [1.0, 2.0]
    assert isinstance(seen["bad"], IndexError)


def test_standalone_wgpu_library(wgpu):
    import vtl.backends.wgpu as xp

    x = xp.asarray(np.arange(10.0, dtype=np.float32))
    j = xp.asarray(np.array([1, 2])) * 6  # on the device
    for fn in (lambda: xp.take(x, j), lambda: x[j],
               lambda: xp.take_along_axis(x, j, axis=0)):
        with pytest.raises(IndexError, match="index 12 is out of bounds for axis 0"):
            xp.to_numpy(fn())
    with pytest.raises(IndexError, match="index 12 is out of bounds"):
        x[j] = 1.0
        xp.synchronize()
    np.testing.assert_array_equal(xp.to_numpy(x), np.arange(10.0))
    with pytest.raises(IndexError, match="index 10 is out of bounds"):
        x[[1, 10]]  # host indices: at once
    t = xp.zeros((4, 2), dtype=xp.float32)
    with pytest.raises(IndexError, match="scatter_add\\(\\): index 4 is out of bounds"):
        xp.scatter_add(t, xp.asarray(np.array([0, 3])) + 1,
                       xp.ones((2, 2), dtype=xp.float32))
        xp.to_numpy(t)
    np.testing.assert_array_equal(xp.to_numpy(t)[1], [1.0, 1.0])  # the valid row was added
    assert float(xp.sum(x)) == 45.0
