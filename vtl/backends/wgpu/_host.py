"""Functions computed on the host for now (sorting, sets, searchsorted, diff).

They read their inputs back (a synchronisation) and upload the result; device
kernels for them are future work.
"""

from __future__ import annotations

import numpy as np

from ._array import WgpuArray, from_numpy, to_numpy


def _h(x):
    return to_numpy(x) if isinstance(x, WgpuArray) else x


def _int(a: np.ndarray) -> WgpuArray:
    from ._elementwise import default_int

    return from_numpy(a.astype(default_int()))


def sort(x, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> WgpuArray:
    h = np.sort(_h(x), axis=axis, kind="stable")
    return from_numpy(np.flip(h, axis=axis) if descending else h)


def argsort(x, /, *, axis: int = -1, descending: bool = False, stable: bool = True):
    h = _h(x)
    if descending:
        n = h.shape[axis] if h.ndim else 1
        r = np.flip(np.argsort(np.flip(h, axis=axis), axis=axis, kind="stable"), axis=axis)
        return _int(n - 1 - r)
    return _int(np.argsort(h, axis=axis, kind="stable"))


def searchsorted(x1, x2, /, *, side: str = "left", sorter=None):
    h1 = _h(x1)
    if sorter is not None:
        h1 = h1[_h(sorter)]
    return _int(np.asarray(np.searchsorted(h1, _h(x2), side=side)))


def unique_values(x, /):
    return from_numpy(np.unique(_h(x).reshape(-1)))


def unique_counts(x, /):
    v, c = np.unique(_h(x).reshape(-1), return_counts=True)
    return from_numpy(v), _int(c)


def unique_inverse(x, /):
    h = _h(x)
    v, inv = np.unique(h.reshape(-1), return_inverse=True)
    return from_numpy(v), _int(inv.reshape(h.shape))


def unique_all(x, /):
    h = _h(x)
    v, idx, inv, c = np.unique(h.reshape(-1), return_index=True, return_inverse=True,
                               return_counts=True)
    return from_numpy(v), _int(idx), _int(inv.reshape(h.shape)), _int(c)


def diff(x, /, *, axis: int = -1, n: int = 1, prepend=None, append=None):
    kw = {}
    if prepend is not None:
        kw["prepend"] = _h(prepend)
    if append is not None:
        kw["append"] = _h(append)
    return from_numpy(np.diff(_h(x), n=n, axis=axis, **kw))
