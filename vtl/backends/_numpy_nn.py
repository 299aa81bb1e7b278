"""Fused nn kernels of the NumPy backend (``backend.kernels``).

* ``relu_backward``: ``where(x <= 0, 0, g)`` (nan in ``x`` passes ``g``), equal to the
  portable expression bit for bit, computed through the bits: ``g`` AND a mask of all ones
  (``x > 0`` or nan) or all zeros (+0.0). NumPy's masked selections (``where``,
  ``copyto(where=)``, ``putmask``) branch per element and ran 3-7x slower on a mix of signs.
  From :data:`THRESHOLD` elements of C-contiguous arrays the passes are split over the
  kernels' thread pool (``_numpy_conv.parallel_for``; NumPy releases the GIL in ufuncs).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _numpy_conv as _pool

#: elements from which a pass is split over the pool
THRESHOLD = 1 << 18
#: the unsigned integers of each float dtype's width (its bits)
_BITS = {np.dtype(np.float32): np.dtype(np.uint32), np.dtype(np.float64): np.dtype(np.uint64)}


def _masked(x: Any, g: Any, out: Any, bits: Any) -> None:
    """``out = where(x <= 0, 0, g)`` through the bits of ``g``."""
    m = np.less_equal(x, 0).astype(bits)
    m -= 1  # x <= 0: 0; otherwise (x > 0 or nan) all ones
    np.bitwise_and(g.view(bits), m, out=out.view(bits))


def relu_backward(x: Any, g: Any) -> Any:
    if type(x) is not np.ndarray or type(g) is not np.ndarray or x.shape != g.shape \
            or x.dtype != g.dtype:
        return None
    bits = _BITS.get(x.dtype)
    if bits is None:
        return None
    out = np.empty_like(g)  # C-contiguous when g is
    threads = _pool.num_threads() if x.size >= THRESHOLD else 1
    if threads <= 1 or not (x.flags.c_contiguous and g.flags.c_contiguous):
        _masked(x, g, out, bits)
        return out
    xf, gf, of = x.reshape(-1), g.reshape(-1), out.reshape(-1)
    _pool.parallel_for(lambda i, j: _masked(xf[i:j], gf[i:j], of[i:j], bits), xf.size,
                       threads)
    return out


def register(backend: Any) -> None:
    backend.kernels["relu_backward"] = relu_backward
