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
