"""Convolution layers: Conv1d/2d/3d and ConvTranspose1d/2d/3d."""

from __future__ import annotations

import math
from typing import Any

from ..._tensor import Tensor
from ...backends._dtypes import kind as _dkind
from .. import functional as F
from .. import init
from ..functional.conv import _ntuple
from ._utils import check_float, empty
from .module import Module, Parameter

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


class _ConvNd(Module):
    _nsp = 2
    _transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", output_padding: Any = 0, *, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        name = type(self).__name__
        n = self._nsp
        if groups < 1 or in_channels % groups or out_channels % groups:
            raise ValueError(f"{name}: in_channels ({in_channels}) and out_channels "
                             f"({out_channels}) must be divisible by groups ({groups})")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"{name}: padding_mode must be one of {_PADDING_MODES}, got "
                             f"{padding_mode!r}")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _ntuple(kernel_size, n, "kernel_size", name)
        self.stride = _ntuple(stride, n, "stride", name)
        self.dilation = _ntuple(dilation, n, "dilation", name)
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"{name}: padding must be 'same', 'valid', an int or a tuple, "
                                 f"got {padding!r}")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError(f"{name}: padding='same' is not supported for strided "
                                 "convolutions")
            self.padding: Any = padding
        else:
            self.padding = _ntuple(padding, n, "padding", name, minimum=0)
        self.output_padding = _ntuple(output_padding, n, "output_padding", name, minimum=0)
        self.groups = groups
        self.padding_mode = padding_mode
        if self._transposed:
            shape = (in_channels, out_channels // groups, *self.kernel_size)
        else:
            shape = (out_channels, in_channels // groups, *self.kernel_size)
        self.weight = Parameter(empty(shape, device, dtype))
        if bias:
            self.bias = Parameter(empty((out_channels,), device, dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyTorch's default: ``kaiming_uniform_(weight, a=sqrt(5))`` and bias
        ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))`` with ``fan_in`` from the weight."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
            init.uniform_(self.bias, -bound, bound)

    def _describe(self) -> str:
        return (f"{type(self).__name__}({self.in_channels}, {self.out_channels}, "
                f"kernel_size={self.kernel_size}, groups={self.groups})")

    def _check_input(self, x: Any) -> None:
        if x.__class__ is not Tensor or _dkind(x._data.dtype) in "iub":
            check_float(self, x)
        n = self._nsp
        if x.ndim not in (n + 1, n + 2):
            raise ValueError(f"{self._describe()}: expected a {n + 1}-D (unbatched) or "
                             f"{n + 2}-D (batched) input, got input of shape {tuple(x.shape)}")
        c = x.shape[-n - 1]
        if c != self.in_channels:
            raise ValueError(f"{self._describe()}: expected input with {self.in_channels} "
                             f"channels (axis {-n - 1}), got input of shape {tuple(x.shape)}")

    def _mode_pads(self) -> tuple[int, ...]:
        """The padding of each side, last axis first (for ``F.pad``)."""
        out: list[int] = []
        for a in reversed(range(self._nsp)):
            if self.padding == "valid":
                lo = hi = 0
            elif self.padding == "same":
                total = self.dilation[a] * (self.kernel_size[a] - 1)
                lo, hi = total // 2, total - total // 2
            else:
                lo = hi = self.padding[a]
            out += [lo, hi]
        return tuple(out)

    def extra_repr(self) -> str:
        n = self._nsp
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * n:
            s += f", padding={self.padding!r}" if isinstance(self.padding, str) \
                else f", padding={self.padding}"
        if self.dilation != (1,) * n:
            s += f", dilation={self.dilation}"
        if self._transposed and self.output_padding != (0,) * n:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class _Conv(_ConvNd):
    _fn: Any = None

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device=device, dtype=dtype)

    def forward(self, input: Any) -> Any:  # noqa: A002
        self._check_input(input)
        fn = type(self)._fn
        if self.padding_mode != "zeros":
            x = F.pad(input, self._mode_pads(), mode=self.padding_mode)
            return fn(x, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)
        return fn(input, self.weight, self.bias, self.stride, self.padding, self.dilation,
                  self.groups)


class Conv1d(_Conv):
    """1-D convolution over ``(N, C_in, L)`` or ``(C_in, L)`` inputs; weight
    ``(out_channels, in_channels / groups, k)``. ``padding_mode`` ``'zeros'``,
    ``'reflect'``, ``'replicate'`` or ``'circular'``."""

    _nsp = 1
    _fn = staticmethod(F.conv1d)


class Conv2d(_Conv):
    """2-D convolution over ``(N, C_in, H, W)`` or ``(C_in, H, W)`` inputs; weight
    ``(out_channels, in_channels / groups, kH, kW)``; padding an int, a pair,
    ``'valid'`` or ``'same'``. Default init as PyTorch (see ``reset_parameters``)."""

    _nsp = 2
    _fn = staticmethod(F.conv2d)


class Conv3d(_Conv):
    """3-D convolution over ``(N, C_in, D, H, W)`` or ``(C_in, D, H, W)`` inputs; weight
    ``(out_channels, in_channels / groups, kD, kH, kW)``; padding an int, a triple,
    ``'valid'`` or ``'same'``; ``padding_mode`` ``'zeros'``, ``'reflect'``,
    ``'replicate'`` or ``'circular'``. Default init as PyTorch (see ``reset_parameters``)."""

    _nsp = 3
    _fn = staticmethod(F.conv3d)


class _ConvTranspose(_ConvNd):
    _transposed = True
    _fn: Any = None

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, output_padding: Any = 0, groups: int = 1, bias: bool = True,
                 dilation: Any = 1, padding_mode: str = "zeros", device: Any = None,
                 dtype: Any = None) -> None:
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for '
                             f"{type(self).__name__}, got {padding_mode!r}")
        if isinstance(padding, str):
            raise ValueError(f"{type(self).__name__}: padding must be an int or a tuple, got "
                             f"{padding!r}")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, output_padding, device=device, dtype=dtype)

    def _output_padding(self, input: Any, output_size: Any) -> tuple[int, ...]:  # noqa: A002
        if output_size is None:
            return self.output_padding
        n = self._nsp
        size = tuple(output_size)[-n:]
        if len(size) != n:
            raise ValueError(f"{self._describe()}: output_size must have {n} or {n + 2} "
                             f"entries, got {tuple(output_size)}")
        pads = []
        for a in range(n):
            lo = ((input.shape[-n + a] - 1) * self.stride[a] - 2 * self.padding[a]
                  + self.dilation[a] * (self.kernel_size[a] - 1) + 1)
            hi = lo + self.stride[a] - 1
            if not lo <= size[a] <= hi:
                raise ValueError(f"{self._describe()}: requested output size {size} is not "
                                 f"reachable from input of shape {tuple(input.shape)} "
                                 f"(axis {a} can be {lo}..{hi})")
            pads.append(size[a] - lo)
        return tuple(pads)

    def forward(self, input: Any, output_size: Any = None) -> Any:  # noqa: A002
        self._check_input(input)
        op = self._output_padding(input, output_size)
        return type(self)._fn(input, self.weight, self.bias, self.stride, self.padding, op,
                              self.groups, self.dilation)


class ConvTranspose1d(_ConvTranspose):
    """Transposed 1-D convolution; weight ``(in_channels, out_channels / groups, k)``."""

    _nsp = 1
    _fn = staticmethod(F.conv_transpose1d)


class ConvTranspose2d(_ConvTranspose):
    """Transposed 2-D convolution; weight ``(in_channels, out_channels / groups, kH, kW)``;
    ``forward(input, output_size=None)`` can pick the output size (via output_padding)."""

    _nsp = 2
    _fn = staticmethod(F.conv_transpose2d)


class ConvTranspose3d(_ConvTranspose):
    """Transposed 3-D convolution; weight ``(in_channels, out_channels / groups, kD, kH,
    kW)``; ``forward(input, output_size=None)`` can pick the output size (via
    output_padding)."""

    _nsp = 3
    _fn = staticmethod(F.conv_transpose3d)
