"""Padding layers: ``ConstantPad``, ``ZeroPad``, ``ReflectionPad``, ``ReplicationPad`` and
``CircularPad`` in 1, 2 and 3 dimensions, each calling ``F.pad``.

``padding`` is an int (the same on every side) or a tuple of ``2 * d`` ints ordered as
``F.pad`` takes them: ``(left, right)``, ``(left, right, top, bottom)``,
``(left, right, top, bottom, front, back)``. The input is unbatched ``(C, *spatial)``
or batched ``(N, C, *spatial)``, as in PyTorch.
"""

from __future__ import annotations

import operator
from typing import Any

from .. import functional as F
from .module import Module

__all__ = [
    "CircularPad1d", "CircularPad2d", "CircularPad3d",
    "ConstantPad1d", "ConstantPad2d", "ConstantPad3d",
    "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d",
    "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d",
    "ZeroPad1d", "ZeroPad2d", "ZeroPad3d",
]


class _PadNd(Module):
    mode = "constant"
    dims = 1

    def __init__(self, padding: int | tuple[int, ...]) -> None:
        super().__init__()
        n = 2 * self.dims
        name = type(self).__name__
        if isinstance(padding, bool):
            raise TypeError(f"{name}: padding must be an int or a tuple of {n} ints, got bool")
        if isinstance(padding, int):
            self.padding = (padding,) * n
        else:
            try:
                pads = tuple(operator.index(p) for p in padding)
            except TypeError:
                raise TypeError(f"{name}: padding must be an int or a tuple of {n} ints, got "
                                f"{padding!r}") from None
            if len(pads) != n:
                raise ValueError(f"{name}: padding must have {n} values, got {len(pads)}")
            self.padding = pads

    def _check(self, input: Any) -> None:  # noqa: A002
        d = self.dims
        if input.ndim not in (d + 1, d + 2):
            raise ValueError(f"{type(self).__name__}: expected a {d + 1}-D (unbatched) or "
                             f"{d + 2}-D (batched) input, got shape {tuple(input.shape)}")

    def forward(self, input: Any) -> Any:  # noqa: A002
        self._check(input)
        return F.pad(input, self.padding, mode=self.mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding: int | tuple[int, ...], value: float) -> None:
        super().__init__(padding)
        self.value = value

    def forward(self, input: Any) -> Any:  # noqa: A002
        self._check(input)
        return F.pad(input, self.padding, mode="constant", value=self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pad the last axis with ``value``; negative padding crops.

    Args:
        padding: An int (the same on every side) or a tuple of ``2 * 1`` ints, ``(left, right)``.
        value: The fill value.

    Raises:
        TypeError: If ``padding`` is not an int or a tuple of ints.
        ValueError: If ``padding`` has the wrong number of values.
    """

    dims = 1


class ConstantPad2d(_ConstantPadNd):
    """Pad the last two axes with ``value``; negative padding crops.

    Args:
        padding: An int (the same on every side) or a tuple of ``2 * 2`` ints, ``(left, right, top,
            bottom)``.
        value: The fill value.

    Raises:
        TypeError: If ``padding`` is not an int or a tuple of ints.
        ValueError: If ``padding`` has the wrong number of values.
    """

    dims = 2


class ConstantPad3d(_ConstantPadNd):
    """Pad the last three axes with ``value``; negative padding crops.

    Args:
        padding: An int (the same on every side) or a tuple of ``2 * 3`` ints, ``(left, right, top,
            bottom, front, back)``.
        value: The fill value.

    Raises:
        TypeError: If ``padding`` is not an int or a tuple of ints.
        ValueError: If ``padding`` has the wrong number of values.
    """

    dims = 3


class _ZeroPadNd(_ConstantPadNd):
    def __init__(self, padding: int | tuple[int, ...]) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad1d(_ZeroPadNd):
    """Pad the last axis with zeros.

    Args:
        padding: An int (the same on every side) or a tuple of ``2 * 1`` ints, ``(left, right)``.

    Raises:
        TypeError: If ``padding`` is not an int or a tuple of ints.
        ValueError: If ``padding`` has the wrong number of values.
    """

    dims = 1


class ZeroPad2d(_ZeroPadNd):
    """Pad the last two axes with zeros.

    Args:
        padding: An int (the same on every side) or a tuple of ``2 * 2`` ints, ``(left, right, top,
            bottom)``.

    Raises:
        TypeError: If ``padding`` is not an int or a tuple of ints.
        ValueError: If ``padding`` has the wrong number of values.
    """

    dims = 2


class ZeroPad3d(_ZeroPadNd):
    """Pad the last three axes with zeros.

    Args:
        padding: An int (the same on every side) or a tuple of ``2 * 3`` ints, ``(left, right, top,
            bottom, front, back)``.

    Raises:
        TypeError: If ``padding`` is not an int or a tuple of ints.
        ValueError: If ``padding`` has the wrong number of values.
    """

    dims = 3


class ReflectionPad1d(_PadNd):
    """Mirror the last axis without repeating the edge (padding smaller than the axis).

    Args:
        padding: An int (the same on every side) or a tuple of ``2 * 1`` ints, ``(left, right)``.

    Raises:
        TypeError: If ``padding`` is not an int or a tuple of ints.
        ValueError: If ``padding`` has the wrong number of values.
    """

    mode, dims = "reflect", 1


class ReflectionPad2d(_PadNd):
    """Mirror the last two axes without repeating the edge.

    Args:
        padding: An int (the same on every side) or a tuple of ``2 * 2`` ints, ``(left, right, top,
            bottom)``.

    Raises:
        TypeError: If ``padding`` is not an int or a tuple of ints.
        ValueError: If ``padding`` has the wrong number of values.
    """

    mode, dims = "reflect", 2


class ReflectionPad3d(_PadNd):
    """Mirror the last three axes without repeating the edge.

    Args:
        padding: An int (the same on every side) or a tuple of ``2 * 3`` ints, ``(left, right, top,
            bottom, front, back)``.

    Raises:
        TypeError: If ``padding`` is not an int or a tuple of ints.
        ValueError: If ``padding`` has the wrong number of values.
    """

    mode, dims = "reflect", 3


class ReplicationPad1d(_PadNd):
    """Repeat the edge value of the last axis.

    Args:
        padding: An int (the same on every side) or a tuple of ``2 * 1`` ints, ``(left, right)``.

    Raises:
        TypeError: If ``padding`` is not an int or a tuple of ints.
        ValueError: If ``padding`` has the wrong number of values.
    """

    mode, dims = "replicate", 1


class ReplicationPad2d(_PadNd):
    """Repeat the edge values of the last two axes.

    Args:
        padding: An int (the same on every side) or a tuple of ``2 * 2`` ints, ``(left, right, top,
            bottom)``.

    Raises:
        TypeError: If ``padding`` is not an int or a tuple of ints.
        ValueError: If ``padding`` has the wrong number of values.
    """

    mode, dims = "replicate", 2


class ReplicationPad3d(_PadNd):
    """Repeat the edge values of the last three axes.

    Args:
        padding: An int (the same on every side) or a tuple of ``2 * 3`` ints, ``(left, right, top,
            bottom, front, back)``.

    Raises:
        TypeError: If ``padding`` is not an int or a tuple of ints.
        ValueError: If ``padding`` has the wrong number of values.
    """

    mode, dims = "replicate", 3


class CircularPad1d(_PadNd):
    """Wrap the last axis around (padding at most the axis size).

    Args:
        padding: An int (the same on every side) or a tuple of ``2 * 1`` ints, ``(left, right)``.

    Raises:
        TypeError: If ``padding`` is not an int or a tuple of ints.
        ValueError: If ``padding`` has the wrong number of values.
    """

    mode, dims = "circular", 1


class CircularPad2d(_PadNd):
    """Wrap the last two axes around.

    Args:
        padding: An int (the same on every side) or a tuple of ``2 * 2`` ints, ``(left, right, top,
            bottom)``.

    Raises:
        TypeError: If ``padding`` is not an int or a tuple of ints.
        ValueError: If ``padding`` has the wrong number of values.
    """

    mode, dims = "circular", 2


class CircularPad3d(_PadNd):
    """Wrap the last three axes around.

    Args:
        padding: An int (the same on every side) or a tuple of ``2 * 3`` ints, ``(left, right, top,
            bottom, front, back)``.

    Raises:
        TypeError: If ``padding`` is not an int or a tuple of ints.
        ValueError: If ``padding`` has the wrong number of values.
    """

    mode, dims = "circular", 3
