"""What gradient clipping's portable norm (``vtl.optim.clip``) and the backends'
``grad_norm`` kernels that reproduce it share: the order in which per-array norms combine."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["pairwise"]


def pairwise(op: Callable[[Any, Any], Any], parts: list[Any]) -> Any:
    """``parts`` (at least one) combined by ``op`` as a pairwise tree: neighbours first, an
    odd one out carried to the next level (the order fixes the rounding)."""
    while len(parts) > 1:
        pairs = [op(parts[i], parts[i + 1]) for i in range(0, len(parts) - 1, 2)]
        parts = pairs + ([parts[-1]] if len(parts) % 2 else [])
    return parts[0]
