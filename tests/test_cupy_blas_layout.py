"""How the cupy backend's direct cuBLAS product reads its operands (``Blas._layout`` and
``Blas._batch_stride``), checked on the host with NumPy views: every matrix of a batch is
read back from the operand's memory by the (operation, leading dimension, batch stride) the
product would hand cuBLAS, and must equal the view's own elements. Slices of wider matrices
(a block of query rows, the first keys) and broadcasts are read in place, not copied."""

from __future__ import annotations

import numpy as np
import pytest

from vtl.backends.cupy import blas

Blas = blas.Blas


def _read_back(x: np.ndarray, base: np.ndarray) -> np.ndarray:
    """The matrices of ``x`` (a view of the 1-d ``base``) as cuBLAS would address them."""
    op, ld = Blas._layout(x)
    step = Blas._batch_stride(x)
    item = x.itemsize
    start = (x.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // item
    r, c = x.shape[-2:]
    count = int(np.prod(x.shape[:-2], dtype=np.int64))
    out = np.empty((count, r, c), x.dtype)
    i, j = np.meshgrid(np.arange(r), np.arange(c), indexing="ij")
    for b in range(count):
        at = start + b * step + (i * ld + j if op == blas._OP_N else j * ld + i)
        out[b] = base[at]
    return out.reshape(x.shape)


def _views():
    base = np.arange(4 * 9 * 11, dtype=np.float32)
    a = base.reshape(4, 9, 11)
    yield "contiguous", a
    yield "rows of a block", a[1:3, 2:7]  # q[s:e, q0:q1]
    yield "first columns", a[:, :, :5]  # a padded leading dimension
    yield "transposed first keys", a.transpose(0, 2, 1)[:, :, :4]  # kt[s:e, :, :kend]
    yield "transposed", a.transpose(0, 2, 1)
    yield "one matrix", a[2, 1:8, 3:9]
    yield "broadcast", np.broadcast_to(a[1, :3, :4], (5, 3, 4))
    yield "two batch axes", base.reshape(2, 2, 9, 11)[:, :, 1:4, :6]
    yield "one row", a[:, 3:4, 2:9]
    yield "one column", a[:, 1:7, 4:5]


@pytest.mark.parametrize(("name", "x"), list(_views()), ids=[n for n, _ in _views()])
def test_operands_are_read_in_place(name, x):
    assert Blas._layout(x) is not None, name
    assert Blas._batch_stride(x) is not None, name
    base = x.base
    while base.base is not None:
        base = base.base
    np.testing.assert_array_equal(_read_back(x, base), x)


def test_layouts_that_need_a_copy():
    a = np.zeros((4, 6, 8), np.float32)
    assert Blas._layout(a[:, :, ::2]) is None  # no unit stride
    assert Blas._layout(a[:, ::-1]) is None  # a negative row stride
    assert Blas._layout(np.lib.stride_tricks.as_strided(a, (4, 6, 8), (192, 16, 4))) is None
    # batch axes that flatten to one stride, and some that do not
    assert Blas._batch_stride(a.reshape(2, 2, 6, 8)[:, :1]) == 96
    assert Blas._batch_stride(np.zeros((3, 4, 6, 8), np.float32)[:, 1:3]) is None
    assert Blas._batch_stride(a[::-1]) is None
    assert Blas._batch_stride(np.broadcast_to(a[:1], (3, 6, 8))) == 0


class _Data:
    def __init__(self, ptr: int) -> None:
        self.ptr, self.device_id = ptr, 0


class _Arr:
    """A NumPy view dressed as a CuPy array for the product's host logic (``data.ptr``)."""

    def __init__(self, x: np.ndarray) -> None:
        self.x = x

    def __getattr__(self, name):
        return getattr(self.x, name)

    @property
    def data(self):
        return _Data(self.x.__array_interface__["data"][0])

    def reshape(self, *shape):
        return _Arr(self.x.reshape(*shape))


class _FakeCupy:
    class cuda:  # noqa: N801 - CuPy's spelling
        class Device:
            def __init__(self, i):
                pass

            def __enter__(self):
                return self

            def __exit__(self, *a):
                return False

    @staticmethod
    def ascontiguousarray(x):
        return _Arr(np.ascontiguousarray(x.x))

    @staticmethod
    def broadcast_to(x, shape):
        return _Arr(np.broadcast_to(x.x, shape))


def _recording_blas(calls):
    b = Blas.__new__(Blas)
    b._cp = _FakeCupy
    b._plans = {}
    dt = np.dtype(np.float32)
    b._gemm = {dt: lambda *args: calls.append(("gemm", args[1:])) or 0}
    b._batched = {dt: lambda *args: calls.append(("batched", args[1:])) or 0}
    b._scalars = {dt: (1, 0)}
    b._handle = lambda device: None
    return b


def test_kept_plans_give_cublas_the_same_arguments():
    """The second product of operands of one layout takes the kept plan (no layout work) and
    hands cuBLAS the arguments the first one computed, pointers included; operands that
    need a copy are copied again each time (no plan kept for them)."""
    base = np.arange(4 * 9 * 11, dtype=np.float32)
    a3 = base.reshape(4, 9, 11)
    other = np.arange(4 * 11 * 9, dtype=np.float32).reshape(4, 11, 9)
    cases = [
        (a3[:, 2:7], other[:, :, :5]),  # slices read in place
        (a3.transpose(0, 2, 1)[:, :4], a3[:, :, :3]),  # transposed block, padded columns
        (a3[1:3, :, :6], np.broadcast_to(other[0, :6, :4], (2, 6, 4))),  # a broadcast b
        (a3[:, :, ::2], other[:, :6, :4]),  # a needs a copy (no unit stride)
    ]
    for an, bn in cases:
        calls: list = []
        blas_ = _recording_blas(calls)
        out = _Arr(np.empty((*np.broadcast_shapes(an.shape[:-2], bn.shape[:-2]),
                             an.shape[-2], bn.shape[-1]), np.float32))
        layout_calls: list = []

        def counted(x, calls=layout_calls):
            calls.append(1)
            return Blas._layout(x)

        blas_._layout = counted
        for _ in range(2):
            layout_calls.clear()
            assert blas_.matmul_into(_Arr(an), _Arr(bn), out)
        first, second = calls
        copied = Blas._layout(an) is None
        if copied:  # the copy's address differs between calls; the rest is the same
            assert first[1][:6] == second[1][:6]
            assert not any(key[0] == "ops" for key in blas_._plans)
            assert layout_calls  # worked out again
        else:
            assert first == second
            assert not layout_calls  # the kept plan: no layout work at all
