"""A fast ``scatter_add`` for the NumPy backend.

``np.add.at`` handles repeated indices but costs tens of nanoseconds per element,
which makes it the bottleneck of gradients of large gathers (im2col patches,
embeddings). This does the same sum with vectorised operations:

* rows of at most 8 elements (and 1-D targets) of a real floating dtype: one
  ``np.bincount`` per column (sums in float64, then added);
* otherwise the indices are sorted once (stable); rows whose index occurs for
  the ``r``-th time form round ``r``, in which every index is unique, so a plain
  fancy-index ``+=`` is exact. Indices repeated more than 16 times finish with
  one ``np.add.reduceat`` over their remaining rows.

Other dtypes and small inputs go to ``np.add.at``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._dtypes import kind as _dkind

_ROUNDS = 16
_SMALL = 256


def scatter_add(target: np.ndarray, indices: Any, values: Any) -> np.ndarray:
    """``target`` (updated in place) with ``values`` added at rows ``indices`` of axis 0."""
    indices = np.asarray(indices)
    n = indices.shape[0] if indices.ndim == 1 else -1
    kind = _dkind(target.dtype)
    if n < _SMALL or kind not in "fc" or target.ndim == 0:
        np.add.at(target, indices, values)
        return target
    rows = target.shape[0]
    if indices.min() < 0:
        indices = np.where(indices < 0, indices + rows, indices)
    values = np.broadcast_to(np.asarray(values), (n, *target.shape[1:]))
    row = math.prod(target.shape[1:])
    if row <= 8 and kind == "f" and target.flags.c_contiguous:
        cols = np.ascontiguousarray(values.reshape(n, row).T)  # one bincount per column
        t2 = target.reshape(rows, row)
        for j in range(row):
            t2[:, j] += np.bincount(indices, weights=cols[j], minlength=rows).astype(
                target.dtype, copy=False)
        return target
    order = np.argsort(indices, kind="stable")
    si = indices[order]
    first = np.empty(n, dtype=bool)
    first[0] = True
    np.not_equal(si[1:], si[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    if starts.size == n:  # no index repeats
        target[indices] += values
        return target
    rank = np.arange(n) - np.repeat(starts, np.diff(np.append(starts, n)))
    top = int(rank.max()) + 1
    for r in range(min(top, _ROUNDS)):
        sel = order[rank == r]
        target[indices[sel]] += values[sel]
    if top > _ROUNDS:
        tail = rank >= _ROUNDS
        ti = si[tail]
        heads = np.empty(ti.shape[0], dtype=bool)
        heads[0] = True
        np.not_equal(ti[1:], ti[:-1], out=heads[1:])
        st = np.flatnonzero(heads)
        target[ti[st]] += np.add.reduceat(values[order[tail]], st, axis=0)
    return target
