"""What the GPU backends' fused dropout kernels share: the keep threshold of a probability,
so that a kernel comparing raw Philox words keeps exactly the elements
``vtl.nn.functional.dropout`` keeps, and the ``DropoutKernel`` contract's two methods over a
backend's one launch (:class:`FusedDropout`)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["FusedDropout", "keep_threshold"]


def keep_threshold(p: float) -> int:
    """The smallest 24-bit value ``w >> 8`` that dropout of probability ``p`` keeps: ``u = (w
    >> 8) * 2**-24 >= float32(p)`` exactly when ``w >> 8 >= ceil(float32(p) * 2**24)``."""
    return math.ceil(float(np.float32(p)) * 2.0 ** 24)


class FusedDropout:
    """``forward``/``backward`` of ``kernel("dropout")`` over the backend's
    ``_run(x, p, words)`` (the same launch each way: the mask is regenerated) and
    ``supports(dtype)``; ``p`` outside ``(0, 1)`` is left to the portable path."""

    def supports(self, dtype: Any) -> bool:
        raise NotImplementedError

    def _run(self, x: Any, p: float, words: Any) -> Any:
        raise NotImplementedError

    def forward(self, x: Any, p: float, words: Any) -> Any | None:
        if not self.supports(x.dtype) or not 0.0 < p < 1.0:
            return None
        return self._run(x, p, words)

    def backward(self, g: Any, p: float, words: Any) -> Any:
        return self._run(g, p, words)
