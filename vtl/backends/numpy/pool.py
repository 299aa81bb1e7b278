"""``kernels["pool2d"]`` of the NumPy backend: the strided-slice pooling of
:mod:`vtl.backends._common.pool`, split over the CPU thread pool from :data:`THRESHOLD`
input elements (blocks of planes for max pooling, images for average pooling; NumPy
releases the GIL in its ufuncs and copies). Every block is computed exactly as on one
thread."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._common.pool import StridedPool2d, _pads
from .._common.threads import parallel_for, pass_threads
from . import _compiled

__all__ = ["THRESHOLD", "NumpyPool2d"]

#: Input elements from which the kernel spreads its work over the thread pool.
THRESHOLD = 1 << 18


class NumpyPool2d(StridedPool2d):
    """:class:`StridedPool2d` on NumPy arrays, on the thread pool for large inputs."""

    def __init__(self) -> None:
        super().__init__(np)

    def _threads(self, size: int) -> int:
        """Pool threads for an input of ``size`` elements (1: the calling thread only)."""
        return pass_threads(size, THRESHOLD)

    def max_forward(self, x: Any, k: tuple[int, int], s: tuple[int, int],
                    p: tuple[int, int], d: tuple[int, int], out: tuple[int, int]
                    ) -> tuple[Any, Any]:
        """2x2 windows of stride 2 with numba (the ``vtl[cpu]`` extra) and no padding: one
        compiled pass; else the NumPy passes (which never pick a padding tap). The same
        results."""
        if not self._two_by_two(x.dtype, x.size, k, s, d) or any(
                _pads(*x.shape[2:], k, s, p, d, out)):
            return super().max_forward(x, k, s, p, d, out)
        from ._pool_kernels import max_forward_2x2

        n, c = x.shape[:2]
        src = np.ascontiguousarray(self._padded(x, k, s, p, d, out, -np.inf))
        planes = src.reshape(n * c, *src.shape[2:])
        y = np.empty((n, c, *out), dtype=x.dtype)
        arg = np.empty((n, c, *out), dtype=self.arg_dtype(k[0] * k[1]))
        y3, a3 = y.reshape(n * c, *out), arg.reshape(n * c, *out)
        parallel_for(lambda i, j: max_forward_2x2(planes, i, j, y3, a3), n * c,
                     self._threads(src.size))
        return y, arg

    def max_backward(self, arg: Any, x_shape: tuple[int, ...], g: Any, k: tuple[int, int],
                     s: tuple[int, int], p: tuple[int, int], d: tuple[int, int]) -> Any:
        if not self._two_by_two(g.dtype, arg.size, k, s, d):
            return super().max_backward(arg, x_shape, g, k, s, p, d)
        from ._pool_kernels import max_backward_2x2

        n, c = x_shape[:2]
        ho, wo = arg.shape[2:]
        if tuple(p) == (0, 0) and tuple(x_shape[2:]) == (2 * ho, 2 * wo):
            buf = dx = np.empty(x_shape, dtype=g.dtype)  # the windows cover every element
        else:
            buf, dx = self._grad_buffer(x_shape, k, s, p, d, (ho, wo), g.dtype)
        planes = buf.reshape(n * c, *buf.shape[2:])
        a3 = np.ascontiguousarray(arg).reshape(n * c, ho, wo)
        g3 = np.ascontiguousarray(g).reshape(n * c, ho, wo)
        parallel_for(lambda i, j: max_backward_2x2(a3, g3, i, j, planes), n * c,
                     self._threads(buf.size))
        return dx

    def _two_by_two(self, dtype: Any, size: int, k: tuple, s: tuple, d: tuple) -> bool:
        """Whether the compiled 2x2 stride-2 kernels take this max pooling."""
        return (tuple(k) == (2, 2) and tuple(s) == (2, 2) and tuple(d) == (1, 1)
                and size > 0 and self.supports(dtype) and _compiled.available())
