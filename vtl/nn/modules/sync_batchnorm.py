"""SyncBatchNorm: batch normalisation whose statistics cover the whole data-parallel
batch (every rank of ``vtl.distributed``'s process group)."""

from __future__ import annotations

import math
from typing import Any

import vtl

from ...autograd.function import Function, FunctionCtx
from ..functional.normalization import _write
from .module import Module
from .normalization import _BatchNorm

__all__ = ["SyncBatchNorm"]


def _world_size() -> int:
    """The process group's size, 1 when none is initialised."""
    from ... import distributed as dist

    return dist.get_world_size() if dist.is_initialized() else 1


class _AllReduceSum(Function):
    """``sum over ranks`` of a tensor; its gradient is again the sum over ranks of the
    incoming gradients (each rank's loss depends on every rank's contribution)."""

    @staticmethod
    def forward(ctx: FunctionCtx, x: Any) -> Any:
        from ... import distributed as dist

        return dist.all_reduce(vtl.asarray(x, copy=True), "sum")

    @staticmethod
    def backward(ctx: FunctionCtx, g: Any) -> Any:
        return _AllReduceSum.apply(g)


def _sync_batch_norm(x: Any, running_mean: Any, running_var: Any, weight: Any, bias: Any,
                     momentum: float, eps: float) -> Any:
    """Training-mode batch norm with the mean and (biased) variance of the global batch:
    one all-reduce of the per-channel sums and element count, one of the squared
    deviations from the global mean (both differentiable)."""
    c = x.shape[1]
    axes = (0, *range(2, x.ndim))
    shape = (1, c) + (1,) * (x.ndim - 2)
    n_local = math.prod(x.shape[a] for a in axes)
    count = vtl.full((1,), float(n_local), dtype=x.dtype, device=x.device)
    totals = _AllReduceSum.apply(vtl.concat([vtl.sum(x, axis=axes), count]))
    n = totals[c].detach()
    mean = totals[:c] / n
    d = x - vtl.reshape(mean, shape)
    var = _AllReduceSum.apply(vtl.sum(d * d, axis=axes)) / n
    out = d / vtl.sqrt(vtl.reshape(var, shape) + eps)
    if weight is not None:
        out = out * vtl.reshape(weight, shape)
    if bias is not None:
        out = out + vtl.reshape(bias, shape)
    with vtl.no_grad():
        if running_mean is not None:
            _write(running_mean, (1.0 - momentum) * running_mean
                   + momentum * vtl.astype(mean.detach(), running_mean.dtype))
        if running_var is not None:
            unbiased = var.detach() * (n / vtl.maximum(n - 1.0, 1.0))
            _write(running_var, (1.0 - momentum) * running_var
                   + momentum * vtl.astype(unbiased, running_var.dtype))
    return out


class SyncBatchNorm(_BatchNorm):
    """Batch normalisation of ``(N, C, *)`` inputs whose training-mode statistics are those
    of the batch of every rank together, when a ``vtl.distributed`` process group of more
    than one process is initialised (the mean and variance are all-reduced, and so are
    their gradients in backward). Without a process group, with one process, or in eval
    mode it is :class:`BatchNorm1d`/``2d``/``3d`` (any input with 2 or more dimensions).

    ``process_group``: ``None`` (the default group; ``vtl.distributed`` has no other).
    Every rank must call forward the same number of times (each call is a collective).
    Use :meth:`convert_sync_batchnorm` to replace the ``BatchNorm*d`` layers of a model.
    """

    _ranks = ()
    _what = "an input of at least 2 dimensions (N, C, *)"

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True,
                 process_group: Any = None, device: Any = None, dtype: Any = None, *,
                 bias: bool = True) -> None:
        _check_group(process_group, "SyncBatchNorm")
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype,
                         bias=bias)
        self.process_group = process_group

    def _normalize(self, input: Any, running_mean: Any, running_var: Any,  # noqa: A002
                   use_batch: bool, factor: float) -> Any:
        if not (use_batch and self.training) or _world_size() == 1:
            return super()._normalize(input, running_mean, running_var, use_batch, factor)
        return _sync_batch_norm(input, running_mean, running_var, self.weight, self.bias,
                                factor, self.eps)

    @classmethod
    def convert_sync_batchnorm(cls, module: Module, process_group: Any = None) -> Module:
        """Replace every ``BatchNorm1d``/``2d``/``3d`` in ``module`` (itself included) by a
        :class:`SyncBatchNorm` holding the same parameters, buffers (shared, not copied),
        settings, training mode and ``requires_grad``; returns the converted module."""
        from .lazy import _LazyModuleMixin
        from .normalization import BatchNorm1d, BatchNorm2d, BatchNorm3d

        _check_group(process_group, "convert_sync_batchnorm")
        out = module
        if isinstance(module, (BatchNorm1d, BatchNorm2d, BatchNorm3d)) \
                and not isinstance(module, _LazyModuleMixin):
            out = cls.__new__(cls)
            Module.__init__(out)
            for k in ("num_features", "eps", "momentum", "affine", "track_running_stats",
                      "training"):
                out.__dict__[k] = module.__dict__[k]
            out.process_group = process_group
            out._parameters.update(module._parameters)
            out._buffers.update(module._buffers)
            out._non_persistent.update(module._non_persistent)
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return out


def _check_group(process_group: Any, where: str) -> None:
    if process_group is not None:
        raise ValueError(f"{where}: vtl.distributed has only the default process group; pass "
                         f"process_group=None, got {process_group!r}")
