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


def _unique(name: str, x):
    import array_api_compat.numpy as hnp

    res = getattr(hnp, name)(_h(x))
    fields = []
    for f, v in zip(res._fields, res, strict=True):
        fields.append(from_numpy(v) if f == "values" else _int(v))
    return type(res)(*fields)


def unique_values(x, /):
    """Distinct values, sorted; NaNs stay distinct, signed zeros merge (as the standard)."""
    import array_api_compat.numpy as hnp

    return from_numpy(hnp.unique_values(_h(x)))


def unique_counts(x, /):
    return _unique("unique_counts", x)


def unique_inverse(x, /):
    return _unique("unique_inverse", x)


def unique_all(x, /):
    return _unique("unique_all", x)


def diff(x, /, *, axis: int = -1, n: int = 1, prepend=None, append=None):
    kw = {}
    if prepend is not None:
        kw["prepend"] = _h(prepend)
    if append is not None:
        kw["append"] = _h(append)
    return from_numpy(np.diff(_h(x), n=n, axis=axis, **kw))
