"""FractionalMaxPool2d and FractionalMaxPool3d."""

from __future__ import annotations

from typing import Any

from .. import functional as F
from ..functional.conv import _ntuple
from ._utils import check_float
from .module import Module

__all__ = ["FractionalMaxPool2d", "FractionalMaxPool3d"]


class _FractionalMaxPoolNd(Module):
    _nsp = 2

    def __init__(self, kernel_size: Any, output_size: Any = None, output_ratio: Any = None,
                 return_indices: bool = False, _random_samples: Any = None) -> None:
        super().__init__()
        name, n = type(self).__name__, self._nsp
        self.kernel_size = _ntuple(kernel_size, n, "kernel_size", name)
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = None if output_size is None else \
            _ntuple(output_size, n, "output_size", name)
        ratio = None
        if output_ratio is not None:
            ratio = tuple(output_ratio) if isinstance(output_ratio, (tuple, list)) \
                else (output_ratio,) * n
        self.output_ratio = ratio
        if output_size is None and output_ratio is None:
            raise ValueError(f"{name} requires specifying either an output size, or a pooling "
                             "ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        if ratio is not None and (len(ratio) != n or not all(0 < r < 1 for r in ratio)):
            raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")

    def forward(self, input: Any) -> Any:  # noqa: A002
        check_float(self, input)
        fn = F.fractional_max_pool2d if self._nsp == 2 else F.fractional_max_pool3d
        return fn(input, self.kernel_size, self.output_size, self.output_ratio,
                  self.return_indices, _random_samples=self._random_samples)

    def extra_repr(self) -> str:
        what = f"output_size={self.output_size}" if self.output_size is not None \
            else f"output_ratio={self.output_ratio}"
        return f"kernel_size={self.kernel_size}, {what}"


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """Fractional max pooling of ``(N, C, H, W)``/``(C, H, W)`` inputs (see
    :func:`vtl.nn.functional.fractional_max_pool2d`): pseudo-random, overlapping
    ``kernel_size`` windows reduce the input to ``output_size`` (or ``output_ratio`` of
    it); new windows are drawn from ``vtl.random`` at every call unless
    ``_random_samples`` fixes them."""

    _nsp = 2


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """Fractional max pooling of ``(N, C, T, H, W)``/``(C, T, H, W)`` inputs."""

    _nsp = 3
