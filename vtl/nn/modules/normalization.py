"""Normalisation layers: BatchNorm1d/2d/3d, SyncBatchNorm, LazyBatchNorm1d/2d/3d,
InstanceNorm1d/2d/3d, LayerNorm, RMSNorm, GroupNorm and LocalResponseNorm."""

from __future__ import annotations

import warnings
from typing import Any

import vtl

from ..._tensor import Tensor
from ...backends._dtypes import kind as _dkind
from .. import functional as F
from .. import init
from ..functional.normalization import _cross_map_lrn2d
from ._utils import check_float, empty
from .module import Module, Parameter

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "CrossMapLRN2d", "GroupNorm",
           "InstanceNorm1d",
           "InstanceNorm2d", "InstanceNorm3d", "LayerNorm", "LocalResponseNorm", "RMSNorm"]


class _BatchNorm(Module):
    _ranks: tuple[int, ...] = ()
    _what = ""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, device: Any = None,
                 dtype: Any = None, *, bias: bool = True) -> None:
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = Parameter(empty((num_features,), device, dtype))
            if bias:
                self.bias = Parameter(empty((num_features,), device, dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            dt = vtl.float32 if dtype is None else dtype
            self.register_buffer("running_mean", vtl.zeros(num_features, dtype=dt,
                                                           device=device))
            self.register_buffer("running_var", vtl.ones(num_features, dtype=dt, device=device))
            self.register_buffer("num_batches_tracked", vtl.zeros((), dtype=vtl.int64,
                                                                  device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            with vtl.no_grad():
                self.running_mean[...] = 0.0
                self.running_var[...] = 1.0
                self.num_batches_tracked[...] = 0

    def reset_parameters(self) -> None:
        """Running mean 0, running variance 1, weight 1, bias 0 (PyTorch's defaults)."""
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def _describe(self) -> str:
        return f"{type(self).__name__}({self.num_features})"

    def forward(self, input: Any) -> Any:  # noqa: A002
        if input.__class__ is not Tensor or _dkind(input._data.dtype) in "iub":
            check_float(self, input)
        if input.ndim not in self._ranks and (self._ranks or input.ndim < 2):
            raise ValueError(f"{self._describe()}: expected {self._what}, got input of shape "
                             f"{tuple(input.shape)}")
        if input.shape[1] != self.num_features:
            raise ValueError(f"{self._describe()}: expected {self.num_features} channels "
                             f"(axis 1), got input of shape {tuple(input.shape)}")
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            with vtl.no_grad():
                self.num_batches_tracked[...] = self.num_batches_tracked + 1
            if self.momentum is None:  # cumulative moving average
                factor = 1.0 / float(self.num_batches_tracked)
        use_batch = self.training or self.running_mean is None
        track = not self.training or self.track_running_stats
        try:
            return self._normalize(input, self.running_mean if track else None,
                                   self.running_var if track else None, use_batch, factor)
        except ValueError as exc:
            raise ValueError(f"{self._describe()}: {exc}") from None

    def _normalize(self, input: Any, running_mean: Any, running_var: Any,  # noqa: A002
                   use_batch: bool, factor: float) -> Any:
        return F.batch_norm(input, running_mean, running_var, self.weight, self.bias,
                            use_batch, factor, self.eps)

    def extra_repr(self) -> str:
        nobias = ", bias=False" if self.affine and self.bias is None else ""
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}{nobias}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of ``(N, C)`` or ``(N, C, L)`` inputs: batch statistics and
    running-statistics updates in training mode, running statistics in eval mode."""

    _ranks = (2, 3)
    _what = "a 2-D (N, C) or 3-D (N, C, L) input"


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of ``(N, C, H, W)`` inputs (per channel)."""

    _ranks = (4,)
    _what = "a 4-D (N, C, H, W) input"


class BatchNorm3d(_BatchNorm):
    """Batch normalisation of ``(N, C, D, H, W)`` inputs (per channel)."""

    _ranks = (5,)
    _what = "a 5-D (N, C, D, H, W) input"


class LayerNorm(Module):
    """Normalise over the trailing ``normalized_shape`` axes; ``weight`` 1 and ``bias`` 0
    at init (``elementwise_affine``, ``bias``)."""

    def __init__(self, normalized_shape: Any, eps: float = 1e-5,
                 elementwise_affine: bool = True, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(int(s) for s in normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(empty(self.normalized_shape, device, dtype))
            if bias:
                self.bias = Parameter(empty(self.normalized_shape, device, dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def _describe(self) -> str:
        return f"LayerNorm({self.normalized_shape})"

    def forward(self, input: Any) -> Any:  # noqa: A002
        if input.__class__ is not Tensor or _dkind(input._data.dtype) in "iub":
            check_float(self, input)
        k = len(self.normalized_shape)
        if input.ndim < k or tuple(input.shape[input.ndim - k:]) != self.normalized_shape:
            raise ValueError(f"{self._describe()}: expected an input ending "
                             f"with shape {self.normalized_shape}, got input of shape "
                             f"{tuple(input.shape)}")
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class GroupNorm(Module):
    """Normalise ``(N, C, *)`` inputs over ``num_groups`` groups of channels; per-channel
    ``weight`` 1 and ``bias`` 0 at init (``affine``)."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        if num_groups < 1 or num_channels % num_groups:
            raise ValueError(f"GroupNorm: num_channels ({num_channels}) must be divisible by "
                             f"num_groups ({num_groups})")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        if affine:
            self.weight = Parameter(empty((num_channels,), device, dtype))
            self.bias = Parameter(empty((num_channels,), device, dtype))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def _describe(self) -> str:
        return f"GroupNorm({self.num_groups}, {self.num_channels})"

    def forward(self, input: Any) -> Any:  # noqa: A002
        if input.__class__ is not Tensor or _dkind(input._data.dtype) in "iub":
            check_float(self, input)
        if input.ndim < 2 or input.shape[1] != self.num_channels:
            raise ValueError(f"{self._describe()}: expected an "
                             f"input of shape (N, {self.num_channels}, *), got input of shape "
                             f"{tuple(input.shape)}")
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class _InstanceNorm(_BatchNorm):
    """Instance normalisation: each channel of each sample over its spatial positions."""

    _spatial = 0

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = False, track_running_stats: bool = False, device: Any = None,
                 dtype: Any = None, *, bias: bool = True) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype,
                         bias=bias)

    def forward(self, input: Any) -> Any:  # noqa: A002
        if input.__class__ is not Tensor or _dkind(input._data.dtype) in "iub":
            check_float(self, input)
        sp = self._spatial
        if input.ndim not in (sp + 1, sp + 2):
            raise ValueError(f"{self._describe()}: expected a {sp + 1}-D (unbatched) or "
                             f"{sp + 2}-D (batched) input, got input of shape "
                             f"{tuple(input.shape)}")
        c = input.shape[input.ndim - sp - 1]
        if c != self.num_features:
            if self.affine or self.track_running_stats:
                raise ValueError(f"{self._describe()}: expected {self.num_features} channels, "
                                 f"got input of shape {tuple(input.shape)}")
            warnings.warn(f"{self._describe()}: input of shape {tuple(input.shape)} has {c} "
                          f"channels, not num_features={self.num_features} (ignored, since "
                          "affine=False and track_running_stats=False)", stacklevel=2)
        batched = input.ndim == sp + 2
        x = input if batched else vtl.expand_dims(input, axis=0)
        use_input_stats = self.training or not self.track_running_stats
        try:
            out = F.instance_norm(x, self.running_mean, self.running_var, self.weight,
                                  self.bias, use_input_stats,
                                  0.0 if self.momentum is None else self.momentum, self.eps)
        except ValueError as exc:
            raise ValueError(f"{self._describe()}: {exc}") from None
        return out if batched else out[0, ...]


class InstanceNorm1d(_InstanceNorm):
    """Instance normalisation of ``(N, C, L)`` or ``(C, L)`` inputs; ``affine=False`` and
    ``track_running_stats=False`` by default, as PyTorch."""

    _spatial = 1


class InstanceNorm2d(_InstanceNorm):
    """Instance normalisation of ``(N, C, H, W)`` or ``(C, H, W)`` inputs."""

    _spatial = 2


class InstanceNorm3d(_InstanceNorm):
    """Instance normalisation of ``(N, C, D, H, W)`` or ``(C, D, H, W)`` inputs."""

    _spatial = 3


class RMSNorm(Module):
    """Root-mean-square normalisation over the trailing ``normalized_shape`` axes:
    ``x / sqrt(mean(x**2) + eps) * weight``; ``eps=None`` uses the input dtype's
    ``finfo().eps``; ``weight`` (``elementwise_affine``) starts at 1."""

    def __init__(self, normalized_shape: Any, eps: float | None = None,
                 elementwise_affine: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(int(s) for s in normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(empty(self.normalized_shape, device, dtype))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.weight is not None:
            init.ones_(self.weight)

    def _describe(self) -> str:
        return f"RMSNorm({self.normalized_shape})"

    def forward(self, input: Any) -> Any:  # noqa: A002
        if input.__class__ is not Tensor or _dkind(input._data.dtype) in "iub":
            check_float(self, input)
        k = len(self.normalized_shape)
        if input.ndim < k or tuple(input.shape[input.ndim - k:]) != self.normalized_shape:
            raise ValueError(f"{self._describe()}: expected an input ending with shape "
                             f"{self.normalized_shape}, got input of shape "
                             f"{tuple(input.shape)}")
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class LocalResponseNorm(Module):
    """Normalise each element by the squares of its ``size`` neighbouring channels:
    ``x / (k + alpha / size * sum(x**2)) ** beta`` (see
    :func:`vtl.nn.functional.local_response_norm`)."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75,
                 k: float = 1.0) -> None:
        super().__init__()
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"LocalResponseNorm: size must be a positive int, got {size!r}")
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input: Any) -> Any:  # noqa: A002
        if input.__class__ is not Tensor or _dkind(input._data.dtype) in "iub":
            check_float(self, input)
        try:
            return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)
        except ValueError as exc:
            raise ValueError(f"LocalResponseNorm({self.extra_repr()}): {exc}") from None

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


class CrossMapLRN2d(Module):
    """PyTorch's legacy cross-channel local response normalisation of ``(N, C, H, W)``
    inputs: ``x * (k + alpha / size * S) ** -beta`` with ``S`` the sum of squares over a
    window of channels computed as PyTorch's kernel does (channel 0 stays in every
    window; prefer :class:`LocalResponseNorm`)."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1) -> None:
        super().__init__()
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"CrossMapLRN2d: size must be a positive int, got {size!r}")
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input: Any) -> Any:  # noqa: A002
        check_float(self, input)
        return _cross_map_lrn2d(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
