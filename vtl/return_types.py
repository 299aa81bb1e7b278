"""The named tuples that PyTorch-style Tensor methods return (PyTorch's
``torch.return_types``): ``values, indices = t.max(dim)`` or ``t.max(dim).indices``."""

from __future__ import annotations

from typing import NamedTuple

from ._tensor import Tensor

__all__ = ["aminmax", "kthvalue", "max", "median", "min", "mode", "sort", "topk"]


class max(NamedTuple):  # noqa: A001, N801 - PyTorch's names
    """The maxima along a dim and where they are (the first maximal element)."""

    values: Tensor
    indices: Tensor


class min(NamedTuple):  # noqa: A001, N801
    """The minima along a dim and where they are (the first minimal element)."""

    values: Tensor
    indices: Tensor


class sort(NamedTuple):  # noqa: N801
    """Sorted values along a dim and the positions they came from."""

    values: Tensor
    indices: Tensor


class topk(NamedTuple):  # noqa: N801
    """The ``k`` largest (or smallest) values along a dim and their positions."""

    values: Tensor
    indices: Tensor


class kthvalue(NamedTuple):  # noqa: N801
    """The ``k``-th smallest value along a dim and its position."""

    values: Tensor
    indices: Tensor


class mode(NamedTuple):  # noqa: N801
    """The most frequent value along a dim (the smallest of those tied) and the position of
    its last occurrence."""

    values: Tensor
    indices: Tensor


class median(NamedTuple):  # noqa: N801
    """The lower median along a dim and its position."""

    values: Tensor
    indices: Tensor


class aminmax(NamedTuple):  # noqa: N801
    """The minimum and the maximum (``vtl.aminmax``)."""

    min: Tensor
    max: Tensor
