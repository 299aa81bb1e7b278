"""Value ranges of integer data uploaded from host memory, recorded by the GPU backends so
that class indices can be checked on the host instead of by reading the device back."""

from __future__ import annotations

import numpy as np

#: largest integer upload whose value range is recorded
KNOWN_MAX = 1 << 22


def value_range(host: np.ndarray) -> tuple[int, int, int | None]:
    """``(lo, hi, lo2)``: the extremes of ``host`` and, when ``lo`` is negative (a padding
    value such as an ignore index), the smallest value above it (``None``: there is none)."""
    lo, hi = int(host.min()), int(host.max())
    lo2 = None
    if lo < 0 and hi > lo:
        lo2 = int(host[host > lo].min())
    return lo, hi, lo2


def targets_in_range(known: tuple[int, int, int | None], c: int, ignore_index: int) -> bool:
    """Whether data of the value range ``known`` (:func:`value_range`) holds only class
    indices in ``[0, c)`` or ``ignore_index``."""
    lo, hi, lo2 = known
    if lo < 0 and lo == ignore_index:  # a negative ignore index pads the targets
        if lo2 is None:
            return True  # every target is ignored
        lo = lo2
    return 0 <= lo and hi < c
