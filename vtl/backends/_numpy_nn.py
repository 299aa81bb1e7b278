"""Fused nn kernels of the NumPy backend (``backend.kernels``) that split large arrays over
the kernels' thread pool (``_numpy_conv.parallel_for``; NumPy releases the GIL in ufuncs):

* ``relu_backward``: ``where(x <= 0, 0, g)`` (nan in ``x`` passes ``g``), equal to the
  portable expression bit for bit. Below :data:`THRESHOLD` elements, with one thread, or
  for other layouts it returns ``None`` and the caller takes the portable path.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _numpy_conv as _pool

#: elements from which a pass is split over the pool
THRESHOLD = 1 << 18
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def relu_backward(x: Any, g: Any) -> Any:
    if (type(x) is not np.ndarray or type(g) is not np.ndarray or x.shape != g.shape
            or x.dtype != g.dtype or x.dtype not in _FLOATS or x.size < THRESHOLD
            or not (x.flags.c_contiguous and g.flags.c_contiguous)):
        return None
    threads = _pool.num_threads()
    if threads <= 1:
        return None
    xf, gf = x.reshape(-1), g.reshape(-1)
    out = np.empty_like(g)
    of = out.reshape(-1)

    def chunk(i: int, j: int) -> None:
        np.copyto(of[i:j], gf[i:j])
        np.copyto(of[i:j], 0, where=np.less_equal(xf[i:j], 0))

    _pool.parallel_for(chunk, xf.size, threads)
    return out


def register(backend: Any) -> None:
    backend.kernels["relu_backward"] = relu_backward
