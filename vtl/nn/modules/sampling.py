"""Resampling and rearranging layers: Upsample (and UpsamplingNearest2d,
UpsamplingBilinear2d), PixelShuffle, PixelUnshuffle, Fold and Unfold."""

from __future__ import annotations

from typing import Any

from ..._tensor import Tensor
from .. import functional as F
from ._utils import check_tensor
from .module import Module

__all__ = [
    "Fold", "PixelShuffle", "PixelUnshuffle", "Unfold", "Upsample", "UpsamplingBilinear2d",
    "UpsamplingNearest2d",
]


def _call(module: Module, fn: Any, input: Any, *args: Any) -> Any:  # noqa: A002
    """``fn(input, *args)`` with a ``ValueError`` prefixed by the layer and its settings."""
    if input.__class__ is not Tensor:
        check_tensor(module, input)
    try:
        return fn(input, *args)
    except ValueError as exc:
        raise ValueError(f"{type(module).__name__}({module.extra_repr()}): {exc}") from None


def _float_or_tuple(v: Any) -> Any:
    if v is None:
        return None
    return tuple(float(f) for f in v) if isinstance(v, (tuple, list)) else float(v)


class Upsample(Module):
    """Resample ``(N, C, d1[, d2[, d3]])`` inputs to ``size`` or by ``scale_factor`` with
    :func:`vtl.nn.functional.interpolate` (``mode``: ``'nearest'``, ``'nearest-exact'``,
    ``'linear'``, ``'bilinear'``, ``'bicubic'``, ``'trilinear'`` or ``'area'``).

    Args:
        size: Output spatial size: an int or a tuple (this or ``scale_factor``).
        scale_factor: Multiplier of the spatial size: a float or a tuple.
        mode: The interpolation algorithm (see above).
        align_corners: For the linear modes: align the corner pixels of input and output (default
            ``False``).
        recompute_scale_factor: Compute the interpolation from the output size rather than from
            ``scale_factor``.
    """

    def __init__(self, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
                 align_corners: bool | None = None,
                 recompute_scale_factor: bool | None = None) -> None:
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        self.scale_factor = _float_or_tuple(scale_factor)
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input: Any) -> Any:  # noqa: A002
        return _call(self, F.interpolate, input, self.size, self.scale_factor, self.mode,
                     self.align_corners, self.recompute_scale_factor)

    def extra_repr(self) -> str:
        if self.scale_factor is not None:
            info = f"scale_factor={self.scale_factor!r}"
        else:
            info = f"size={self.size!r}"
        return info + f", mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """2-D nearest-neighbour upsampling: ``Upsample(size, scale_factor, mode='nearest')``.

    Args:
        size: Output spatial size: an int or a tuple (this or ``scale_factor``).
        scale_factor: Multiplier of the spatial size: a float or a tuple.
    """

    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """2-D bilinear upsampling with ``align_corners=True`` (PyTorch's definition).

    Args:
        size: Output spatial size: an int or a tuple (this or ``scale_factor``).
        scale_factor: Multiplier of the spatial size: a float or a tuple.
    """

    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


class PixelShuffle(Module):
    """``(*, C * r**2, H, W)`` to ``(*, C, H * r, W * r)`` with ``r = upscale_factor``.

    Args:
        upscale_factor: The factor ``r`` by which height and width grow.
    """

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input: Any) -> Any:  # noqa: A002
        return _call(self, F.pixel_shuffle, input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """``(*, C, H * r, W * r)`` to ``(*, C * r**2, H, W)`` with ``r = downscale_factor``.

    Args:
        downscale_factor: The factor ``r`` by which height and width shrink.
    """

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input: Any) -> Any:  # noqa: A002
        return _call(self, F.pixel_unshuffle, input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"


class Fold(Module):
    """Combine sliding blocks ``(N, C * prod(kernel_size), L)`` into an ``(N, C,
    *output_size)`` image, summing overlaps (col2im; the adjoint of :class:`Unfold`).

    Args:
        output_size: Spatial size ``(H, W)`` of the output image: an int or a pair.
        kernel_size: Size of the blocks: an int or a pair.
        dilation: Spacing between the elements of a block.
        padding: Implicit zero padding on both sides of the image.
        stride: Stride of the blocks.
    """

    def __init__(self, output_size: Any, kernel_size: Any, dilation: Any = 1,
                 padding: Any = 0, stride: Any = 1) -> None:
        super().__init__()
        self.output_size = output_size
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input: Any) -> Any:  # noqa: A002
        return _call(self, F.fold, input, self.output_size, self.kernel_size, self.dilation,
                     self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, "
                f"dilation={self.dilation}, padding={self.padding}, stride={self.stride}")


class Unfold(Module):
    """Extract sliding blocks (im2col): ``(N, C, H, W)`` to ``(N, C * prod(kernel_size),
    L)``.

    Args:
        kernel_size: Size of the blocks: an int or a pair.
        dilation: Spacing between the elements of a block.
        padding: Implicit zero padding on both sides of the image.
        stride: Stride of the blocks.
    """

    def __init__(self, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
                 stride: Any = 1) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input: Any) -> Any:  # noqa: A002
        return _call(self, F.unfold, input, self.kernel_size, self.dilation, self.padding,
                     self.stride)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")
