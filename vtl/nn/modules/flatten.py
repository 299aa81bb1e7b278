"""Flatten and Unflatten."""

from __future__ import annotations

import math
from typing import Any

from ..._tensor import Tensor
from ..functional._utils import namespace
from ._utils import check_tensor
from .module import Module

__all__ = ["Flatten", "Unflatten"]


class Flatten(Module):
    """Merge axes ``start_dim .. end_dim`` into one (default: all but the batch axis).

    Args:
        start_dim: First axis to merge.
        end_dim: Last axis to merge.
    """

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input: Any) -> Any:  # noqa: A002
        if input.__class__ is not Tensor:
            check_tensor(self, input)
        xp = namespace(input)
        shape = tuple(input.shape)
        n = max(len(shape), 1)
        s, e = self.start_dim, self.end_dim
        if not (-n <= s < n and -n <= e < n):
            raise IndexError(f"Flatten(start_dim={s}, end_dim={e}): dimension out of range for "
                             f"input of shape {shape}")
        s, e = s % n, e % n
        if not shape:
            return xp.reshape(input, (1,))
        if s > e:
            raise ValueError(f"Flatten(start_dim={self.start_dim}, end_dim={self.end_dim}): "
                             f"start_dim comes after end_dim for input of shape {shape}")
        new = shape[:s] + (math.prod(shape[s:e + 1]),) + shape[e + 1:]
        return xp.reshape(input, new)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Split axis ``dim`` into ``unflattened_size`` (one entry may be -1).

    Args:
        dim: The axis to split.
        unflattened_size: The sizes it is split into (their product is the axis size; one may be
            -1).

    Raises:
        TypeError: If ``unflattened_size`` is not a non-empty tuple or list of ints.
    """

    def __init__(self, dim: int, unflattened_size: tuple[int, ...]) -> None:
        super().__init__()
        if not isinstance(unflattened_size, (tuple, list)) or not unflattened_size:
            raise TypeError("Unflatten: unflattened_size must be a non-empty tuple of ints, "
                            f"got {unflattened_size!r}")
        self.dim = dim
        self.unflattened_size = tuple(unflattened_size)

    def forward(self, input: Any) -> Any:  # noqa: A002
        if input.__class__ is not Tensor:
            check_tensor(self, input)
        xp = namespace(input)
        shape = tuple(input.shape)
        n = len(shape)
        if not -n <= self.dim < n:
            raise IndexError(f"Unflatten(dim={self.dim}): dimension out of range for input of "
                             f"shape {shape}")
        d = self.dim % n
        sizes = list(self.unflattened_size)
        known = math.prod(s for s in sizes if s != -1)
        if sizes.count(-1) > 1 or (-1 not in sizes and known != shape[d]) or (
                -1 in sizes and (known == 0 or shape[d] % known)):
            raise ValueError(f"Unflatten(dim={self.dim}, unflattened_size="
                             f"{self.unflattened_size}): cannot split axis {d} of size "
                             f"{shape[d]} (input shape {shape})")
        if -1 in sizes:
            sizes[sizes.index(-1)] = shape[d] // known
        return xp.reshape(input, shape[:d] + tuple(sizes) + shape[d + 1:])

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
