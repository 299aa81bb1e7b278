"""Pooling layers: max, average and adaptive average pooling (1-D and 2-D)."""

from __future__ import annotations

from typing import Any

from ..._tensor import Tensor
from .. import functional as F
from ._utils import check_tensor
from .module import Module

__all__ = [
    "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AvgPool1d", "AvgPool2d", "MaxPool1d", "MaxPool2d",
]


def _named_errors(module: Module, fn: Any, *args: Any) -> Any:
    """``fn(*args)``, with a ``ValueError`` prefixed by the layer and its settings."""
    if args[0].__class__ is not Tensor:
        check_tensor(module, args[0])
    try:
        return fn(*args)
    except ValueError as exc:
        raise ValueError(f"{type(module).__name__}({module.extra_repr()}): {exc}") from None


class _MaxPoolNd(Module):
    _fn: Any = None

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 dilation: Any = 1, return_indices: bool = False,
                 ceil_mode: bool = False) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input: Any) -> Any:  # noqa: A002
        return _named_errors(self, type(self)._fn, input, self.kernel_size, self.stride,
                             self.padding, self.dilation, self.ceil_mode, self.return_indices)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPoolNd):
    """Maximum over windows of ``(N, C, L)``/``(C, L)`` inputs."""

    _fn = staticmethod(F.max_pool1d)


class MaxPool2d(_MaxPoolNd):
    """Maximum over windows of ``(N, C, H, W)``/``(C, H, W)`` inputs (gradient to the
    first maximum of each window)."""

    _fn = staticmethod(F.max_pool2d)


class _AvgPoolNd(Module):
    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad


class AvgPool1d(_AvgPoolNd):
    """Mean over windows of ``(N, C, L)``/``(C, L)`` inputs."""

    def forward(self, input: Any) -> Any:  # noqa: A002
        return _named_errors(self, F.avg_pool1d, input, self.kernel_size, self.stride,
                             self.padding, self.ceil_mode, self.count_include_pad)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool2d(_AvgPoolNd):
    """Mean over windows of ``(N, C, H, W)``/``(C, H, W)`` inputs (``count_include_pad``,
    ``ceil_mode`` and ``divisor_override`` as PyTorch)."""

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True,
                 divisor_override: int | None = None) -> None:
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)
        self.divisor_override = divisor_override

    def forward(self, input: Any) -> Any:  # noqa: A002
        return _named_errors(self, F.avg_pool2d, input, self.kernel_size, self.stride,
                             self.padding, self.ceil_mode, self.count_include_pad,
                             self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class _AdaptiveAvgPoolNd(Module):
    _pool: Any = None  # the functional op, set by each subclass

    def __init__(self, output_size: Any) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, input: Any) -> Any:  # noqa: A002
        return _named_errors(self, type(self)._pool, input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptiveAvgPoolNd):
    """Average ``(N, C, L)``/``(C, L)`` inputs to ``output_size`` positions."""

    _pool = staticmethod(F.adaptive_avg_pool1d)


class AdaptiveAvgPool2d(_AdaptiveAvgPoolNd):
    """Average ``(N, C, H, W)``/``(C, H, W)`` inputs to ``output_size`` (an int or a pair;
    ``None`` keeps that axis)."""

    _pool = staticmethod(F.adaptive_avg_pool2d)
