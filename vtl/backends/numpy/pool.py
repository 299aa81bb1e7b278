"""``kernels["pool2d"]`` of the NumPy backend: the strided-slice pooling of
:mod:`vtl.backends._common.pool`, split over the CPU thread pool from :data:`THRESHOLD`
input elements (blocks of planes for max pooling, images for average pooling; NumPy
releases the GIL in its ufuncs and copies). Every block is computed exactly as on one
thread."""

from __future__ import annotations

import numpy as np

from .._common.pool import StridedPool2d
from .._common.threads import num_threads

__all__ = ["THRESHOLD", "NumpyPool2d"]

#: Input elements from which the kernel spreads its work over the thread pool.
THRESHOLD = 1 << 18


class NumpyPool2d(StridedPool2d):
    """:class:`StridedPool2d` on NumPy arrays, on the thread pool for large inputs."""

    def __init__(self) -> None:
        super().__init__(np)

    def _threads(self, size: int) -> int:
        """Pool threads for an input of ``size`` elements (1: the calling thread only)."""
        return num_threads() if size >= THRESHOLD else 1
