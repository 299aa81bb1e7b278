"""What the GPU backends' fused dropout kernels share: the keep threshold of a probability,
so that a kernel comparing raw Philox words keeps exactly the elements
``vtl.nn.functional.dropout`` keeps."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["keep_threshold"]


def keep_threshold(p: float) -> int:
    """The smallest 24-bit value ``w >> 8`` that dropout of probability ``p`` keeps: ``u = (w
    >> 8) * 2**-24 >= float32(p)`` exactly when ``w >> 8 >= ceil(float32(p) * 2**24)``."""
    return math.ceil(float(np.float32(p)) * 2.0 ** 24)
