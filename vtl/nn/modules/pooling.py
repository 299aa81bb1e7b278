"""Pooling layers: max, average, adaptive average, adaptive max and power-average pooling,
and max unpooling (1-D, 2-D and 3-D)."""

from __future__ import annotations

from typing import Any

from ..._tensor import Tensor
from .. import functional as F
from ._utils import check_tensor
from .module import Module

__all__ = [
    "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d", "LPPool1d",
    "LPPool2d", "LPPool3d", "MaxPool1d", "MaxPool2d", "MaxPool3d", "MaxUnpool1d", "MaxUnpool2d",
    "MaxUnpool3d",
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
    """Maximum over windows of ``(N, C, L)``/``(C, L)`` inputs.

    Args:
        kernel_size: Size of the window: an int or a tuple.
        stride: Stride of the window (default: ``kernel_size``).
        padding: Implicit ``-inf`` padding on both sides (at most half the kernel size).
        dilation: Spacing between the elements of a window.
        return_indices: Also return the indices of the maxima (for :class:`MaxUnpool1d`).
        ceil_mode: Use ``ceil`` instead of ``floor`` to compute the output size.
    """

    _fn = staticmethod(F.max_pool1d)


class MaxPool2d(_MaxPoolNd):
    """Maximum over windows of ``(N, C, H, W)``/``(C, H, W)`` inputs (gradient to the
    first maximum of each window).

    Args:
        kernel_size: Size of the window: an int or a tuple.
        stride: Stride of the window (default: ``kernel_size``).
        padding: Implicit ``-inf`` padding on both sides (at most half the kernel size).
        dilation: Spacing between the elements of a window.
        return_indices: Also return the indices of the maxima (for :class:`MaxUnpool2d`).
        ceil_mode: Use ``ceil`` instead of ``floor`` to compute the output size.
    """

    _fn = staticmethod(F.max_pool2d)


class MaxPool3d(_MaxPoolNd):
    """Maximum over windows of ``(N, C, D, H, W)``/``(C, D, H, W)`` inputs (gradient to
    the first maximum of each window).

    Args:
        kernel_size: Size of the window: an int or a tuple.
        stride: Stride of the window (default: ``kernel_size``).
        padding: Implicit ``-inf`` padding on both sides (at most half the kernel size).
        dilation: Spacing between the elements of a window.
        return_indices: Also return the indices of the maxima (for :class:`MaxUnpool3d`).
        ceil_mode: Use ``ceil`` instead of ``floor`` to compute the output size.
    """

    _fn = staticmethod(F.max_pool3d)


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
    """Mean over windows of ``(N, C, L)``/``(C, L)`` inputs.

    Args:
        kernel_size: Size of the window: an int or a tuple.
        stride: Stride of the window (default: ``kernel_size``).
        padding: Implicit zero padding on both sides (at most half the kernel size).
        ceil_mode: Use ``ceil`` instead of ``floor`` to compute the output size.
        count_include_pad: Include the zero padding in the averages' divisors.
    """

    def forward(self, input: Any) -> Any:  # noqa: A002
        return _named_errors(self, F.avg_pool1d, input, self.kernel_size, self.stride,
                             self.padding, self.ceil_mode, self.count_include_pad)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool2d(_AvgPoolNd):
    """Mean over windows of ``(N, C, H, W)``/``(C, H, W)`` inputs (``count_include_pad``,
    ``ceil_mode`` and ``divisor_override`` as PyTorch).

    Args:
        kernel_size: Size of the window: an int or a tuple.
        stride: Stride of the window (default: ``kernel_size``).
        padding: Implicit zero padding on both sides (at most half the kernel size).
        ceil_mode: Use ``ceil`` instead of ``floor`` to compute the output size.
        count_include_pad: Include the zero padding in the averages' divisors.
        divisor_override: If given, the divisor of every window's sum.
    """

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


class AvgPool3d(_AvgPoolNd):
    """Mean over windows of ``(N, C, D, H, W)``/``(C, D, H, W)`` inputs
    (``count_include_pad``, ``ceil_mode`` and ``divisor_override`` as PyTorch).

    Args:
        kernel_size: Size of the window: an int or a tuple.
        stride: Stride of the window (default: ``kernel_size``).
        padding: Implicit zero padding on both sides (at most half the kernel size).
        ceil_mode: Use ``ceil`` instead of ``floor`` to compute the output size.
        count_include_pad: Include the zero padding in the averages' divisors.
        divisor_override: If given, the divisor of every window's sum.
    """

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True,
                 divisor_override: int | None = None) -> None:
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)
        self.divisor_override = divisor_override

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"

    def forward(self, input: Any) -> Any:  # noqa: A002
        return _named_errors(self, F.avg_pool3d, input, self.kernel_size, self.stride,
                             self.padding, self.ceil_mode, self.count_include_pad,
                             self.divisor_override)


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
    """Average ``(N, C, L)``/``(C, L)`` inputs to ``output_size`` positions.

    Args:
        output_size: Target output size: an int or a tuple (``None`` keeps that axis).
    """

    _pool = staticmethod(F.adaptive_avg_pool1d)


class AdaptiveAvgPool2d(_AdaptiveAvgPoolNd):
    """Average ``(N, C, H, W)``/``(C, H, W)`` inputs to ``output_size`` (an int or a pair;
    ``None`` keeps that axis).

    Args:
        output_size: Target output size: an int or a tuple (``None`` keeps that axis).
    """

    _pool = staticmethod(F.adaptive_avg_pool2d)


class AdaptiveAvgPool3d(_AdaptiveAvgPoolNd):
    """Average ``(N, C, D, H, W)``/``(C, D, H, W)`` inputs to ``output_size`` (an int or a
    triple; ``None`` keeps that axis).

    Args:
        output_size: Target output size: an int or a tuple (``None`` keeps that axis).
    """

    _pool = staticmethod(F.adaptive_avg_pool3d)


class _AdaptiveMaxPoolNd(Module):
    _pool: Any = None  # the functional op, set by each subclass

    def __init__(self, output_size: Any, return_indices: bool = False) -> None:
        super().__init__()
        self.output_size = output_size
        self.return_indices = return_indices

    def forward(self, input: Any) -> Any:  # noqa: A002
        return _named_errors(self, type(self)._pool, input, self.output_size,
                             self.return_indices)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    """Maximum of ``(N, C, L)``/``(C, L)`` inputs over adaptive windows to ``output_size``
    positions (``return_indices`` also returns the position of each maximum).

    Args:
        output_size: Target output size: an int or a tuple (``None`` keeps that axis).
        return_indices: Also return the indices of the maxima.
    """

    _pool = staticmethod(F.adaptive_max_pool1d)


class AdaptiveMaxPool2d(_AdaptiveMaxPoolNd):
    """Maximum of ``(N, C, H, W)``/``(C, H, W)`` inputs over adaptive windows to
    ``output_size`` (an int or a pair; ``None`` keeps that axis).

    Args:
        output_size: Target output size: an int or a tuple (``None`` keeps that axis).
        return_indices: Also return the indices of the maxima.
    """

    _pool = staticmethod(F.adaptive_max_pool2d)


class AdaptiveMaxPool3d(_AdaptiveMaxPoolNd):
    """Maximum of ``(N, C, D, H, W)``/``(C, D, H, W)`` inputs over adaptive windows to
    ``output_size`` (an int or a triple; ``None`` keeps that axis).

    Args:
        output_size: Target output size: an int or a tuple (``None`` keeps that axis).
        return_indices: Also return the indices of the maxima.
    """

    _pool = staticmethod(F.adaptive_max_pool3d)


class _LPPoolNd(Module):
    _fn: Any = None

    def __init__(self, norm_type: float, kernel_size: Any, stride: Any = None,
                 ceil_mode: bool = False) -> None:
        super().__init__()
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = ceil_mode

    def forward(self, input: Any) -> Any:  # noqa: A002
        return _named_errors(self, type(self)._fn, input, self.norm_type, self.kernel_size,
                             self.stride, self.ceil_mode)

    def extra_repr(self) -> str:
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, ceil_mode={self.ceil_mode}")


class LPPool1d(_LPPoolNd):
    """Power-average pooling of ``(N, C, L)``/``(C, L)`` inputs: the ``norm_type``-norm
    of each window (PyTorch's formula, see ``vtl.nn.functional.lp_pool1d``).

    Args:
        norm_type: The power ``p`` (``inf`` gives max pooling).
        kernel_size: Size of the window: an int or a tuple.
        stride: Stride of the window (default: ``kernel_size``).
        ceil_mode: Use ``ceil`` instead of ``floor`` to compute the output size.
    """

    _fn = staticmethod(F.lp_pool1d)


class LPPool2d(_LPPoolNd):
    """Power-average pooling of ``(N, C, H, W)``/``(C, H, W)`` inputs (see
    ``vtl.nn.functional.lp_pool2d``).

    Args:
        norm_type: The power ``p`` (``inf`` gives max pooling).
        kernel_size: Size of the window: an int or a tuple.
        stride: Stride of the window (default: ``kernel_size``).
        ceil_mode: Use ``ceil`` instead of ``floor`` to compute the output size.
    """

    _fn = staticmethod(F.lp_pool2d)


class LPPool3d(_LPPoolNd):
    """Power-average pooling of ``(N, C, D, H, W)``/``(C, D, H, W)`` inputs (see
    ``vtl.nn.functional.lp_pool3d``).

    Args:
        norm_type: The power ``p`` (``inf`` gives max pooling).
        kernel_size: Size of the window: an int or a tuple.
        stride: Stride of the window (default: ``kernel_size``).
        ceil_mode: Use ``ceil`` instead of ``floor`` to compute the output size.
    """

    _fn = staticmethod(F.lp_pool3d)


class _MaxUnpoolNd(Module):
    _fn: Any = None

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding = padding

    def forward(self, input: Any, indices: Any, output_size: Any = None) -> Any:  # noqa: A002
        return _named_errors(self, type(self)._fn, input, indices, self.kernel_size,
                             self.stride, self.padding, output_size)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    """The partial inverse of ``MaxPool1d``: ``forward(input, indices, output_size=None)``
    puts each value at its index of a zero output.

    Args:
        kernel_size: Size of the max-pooling window.
        stride: Stride of the max-pooling window (default: ``kernel_size``).
        padding: Padding of the max pooling.
    """

    _fn = staticmethod(F.max_unpool1d)


class MaxUnpool2d(_MaxUnpoolNd):
    """The partial inverse of ``MaxPool2d`` (see ``MaxUnpool1d``).

    Args:
        kernel_size: Size of the max-pooling window.
        stride: Stride of the max-pooling window (default: ``kernel_size``).
        padding: Padding of the max pooling.
    """

    _fn = staticmethod(F.max_unpool2d)


class MaxUnpool3d(_MaxUnpoolNd):
    """The partial inverse of ``MaxPool3d`` (see ``MaxUnpool1d``).

    Args:
        kernel_size: Size of the max-pooling window.
        stride: Stride of the max-pooling window (default: ``kernel_size``).
        padding: Padding of the max pooling.
    """

    _fn = staticmethod(F.max_unpool3d)
