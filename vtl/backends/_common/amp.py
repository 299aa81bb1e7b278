"""What ``GradScaler.update``'s portable rule (``vtl.amp.grad_scaler``) and the backends'
``amp_update_scale`` kernels share: the bound below which a scale may grow."""

from __future__ import annotations

import numpy as np

__all__ = ["update_threshold"]

_F32_MAX = (2.0 - 2.0**-23) * 2.0**127


def update_threshold(growth_factor: float) -> np.float32:
    """The float32 scales below which ``scale * growth_factor`` is taken as finite: the
    products from ``2**128 - 2**103`` on round to inf (compared without forming an
    overflowing product), the bound rounded to float32 as a weak Python scalar would be."""
    with np.errstate(over="ignore"):
        return np.float32((_F32_MAX + 2.0**103) / growth_factor)
