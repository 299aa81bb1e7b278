"""Stochastic weight averaging and exponential moving averages of a model
(PyTorch's ``torch.optim.swa_utils``).

``AveragedModel`` keeps a copy of a model whose parameters are a running average
of the model's (equal weights by default: SWA; or an EMA through
:func:`get_ema_multi_avg_fn`); ``SWALR`` anneals the learning rate to a constant
for the averaging phase; ``update_bn`` recomputes BatchNorm statistics for the
averaged weights with one pass over the data.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from copy import deepcopy
from typing import Any

import vtl

from .._tensor import Tensor
from ..backends._dtypes import kind as _dkind
from ..nn.modules.module import Module
from ..nn.modules.normalization import _BatchNorm
from .lr_scheduler import LRScheduler, _check_optimizer, _choice, _integer, _per_group
from .optimizer import Optimizer

__all__ = [
    "AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn", "get_swa_multi_avg_fn",
    "get_ema_avg_fn", "get_swa_avg_fn",
]

ParamList = Sequence[Tensor]


def _is_float(t: Tensor) -> bool:
    return _dkind(t._data.dtype) in "fc"


def _lerp(start: Tensor, end: Tensor, weight: Any) -> Tensor:
    """``start + weight (end - start)`` as PyTorch's ``lerp`` computes it: from the
    nearer end (``end - (end - start)(1 - weight)`` once ``|weight| >= 0.5``)."""
    diff = end - start
    if isinstance(weight, Tensor):
        return vtl.where(vtl.abs(weight) < 0.5, start + weight * diff,
                         end - diff * (1 - weight))
    if abs(weight) < 0.5:
        return start + weight * diff
    return end - diff * (1 - weight)


def _assign(dst: Tensor, value: Tensor) -> None:
    """Write ``value`` into ``dst`` in place (cast to ``dst``'s dtype, truncating toward
    zero for integers as PyTorch's ``copy_`` does)."""
    if value.dtype != dst.dtype:
        value = vtl.astype(value, dst.dtype)
    dst[...] = value


def _as_float(t: Tensor) -> Tensor:
    """An integer tensor as float32 (the dtype PyTorch computes the average of integer
    buffers in); float tensors unchanged."""
    return t if _is_float(t) else vtl.astype(t, vtl.float32)


def get_ema_multi_avg_fn(decay: float = 0.999) -> Callable[[ParamList, ParamList, Any], None]:
    """An in-place exponential moving average over lists of tensors, for
    :class:`AveragedModel`'s ``multi_avg_fn``:
    ``ema = decay * ema + (1 - decay) * param`` (as ``lerp(ema, param, 1 - decay)``)."""
    _check_decay(decay)

    def ema_update(ema_param_list: ParamList, current_param_list: ParamList, _: Any) -> None:
        with vtl.no_grad():
            for p_ema, p_model in zip(ema_param_list, current_param_list, strict=True):
                if _is_float(p_ema):
                    _assign(p_ema, _lerp(p_ema, p_model, 1 - decay))
                else:
                    _assign(p_ema, _as_float(p_ema) * decay + _as_float(p_model) * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn() -> Callable[[ParamList, ParamList, Any], None]:
    """An in-place equal-weight running average over lists of tensors, for
    :class:`AveragedModel`'s ``multi_avg_fn``: ``avg += (param - avg) / (n + 1)`` where
    ``n`` (an int or a 0-d tensor) is the number of models averaged so far."""

    def swa_update(averaged_param_list: ParamList, current_param_list: ParamList,
                   num_averaged: Any) -> None:
        with vtl.no_grad():
            for p_avg, p_model in zip(averaged_param_list, current_param_list, strict=True):
                if _is_float(p_avg):
                    n = (vtl.astype(num_averaged, p_avg.dtype)
                         if isinstance(num_averaged, Tensor) else num_averaged)
                    _assign(p_avg, _lerp(p_avg, p_model, 1 / (n + 1)))
                else:
                    a = _as_float(p_avg)
                    _assign(p_avg, a + (_as_float(p_model) - a) / _count(num_averaged, a))

    return swa_update


def get_ema_avg_fn(decay: float = 0.999) -> Callable[[Tensor, Tensor, Any], Tensor]:
    """An exponential moving average of one tensor, for :class:`AveragedModel`'s
    ``avg_fn``: returns ``decay * ema + (1 - decay) * param``."""
    _check_decay(decay)

    def ema_update(ema_param: Tensor, current_param: Tensor, num_averaged: Any) -> Tensor:
        with vtl.no_grad():
            return decay * _as_float(ema_param) + (1 - decay) * _as_float(current_param)

    return ema_update


def get_swa_avg_fn() -> Callable[[Tensor, Tensor, Any], Tensor]:
    """An equal-weight running average of one tensor, for :class:`AveragedModel`'s
    ``avg_fn``: returns ``avg + (param - avg) / (n + 1)``."""

    def swa_update(averaged_param: Tensor, current_param: Tensor, num_averaged: Any) -> Tensor:
        with vtl.no_grad():
            a = _as_float(averaged_param)
            return a + (_as_float(current_param) - a) / _count(num_averaged, a)

    return swa_update


def _count(num_averaged: Any, like: Tensor) -> Any:
    """``num_averaged + 1`` in ``like``'s dtype (a 0-d tensor stays on the device)."""
    if isinstance(num_averaged, Tensor):
        return vtl.astype(num_averaged, like.dtype) + 1
    return num_averaged + 1


def _check_decay(decay: Any) -> None:
    if isinstance(decay, bool) or not isinstance(decay, (int, float)) or not 0.0 <= decay <= 1.0:
        raise ValueError(f"Invalid decay value {decay!r} provided. Please provide a value in "
                         "[0,1] range.")


class AveragedModel(Module):
    r"""A copy of ``model`` whose parameters are a running average of ``model``'s,
    for stochastic weight averaging (SWA) and exponential moving averages (EMA).

    ``update_parameters(model)`` folds in the model's current parameters: the
    first call copies them, later calls apply ``avg_fn(averaged, current,
    n_averaged)`` (returns the new value, one tensor at a time) or
    ``multi_avg_fn(averaged_list, current_list, n_averaged)`` (updates in
    place, once per device and dtype); without either, the equal-weight average
    ``averaged + (current - averaged) / (n_averaged + 1)`` (:func:`get_swa_avg_fn`).
    ``n_averaged`` (a buffer, saved in ``state_dict``) counts the calls. With ``use_buffers=True``
    the buffers (e.g. BatchNorm's running statistics) are averaged too;
    otherwise they are copied from ``model`` at every update. ``device`` moves
    the copy (e.g. ``"numpy"`` to keep the average on the host).

    The decision "first call or not" is made from a host copy of
    ``n_averaged``, so an update does not wait for the device (the buffer is read
    back once only after something else changed it, e.g. ``load_state_dict``).
    ``avg_fn``/``multi_avg_fn`` are not saved in ``state_dict``.
    """

    def __init__(self, model: Module, device: Any = None,
                 avg_fn: Callable[[Tensor, Tensor, Any], Tensor] | None = None,
                 multi_avg_fn: Callable[[ParamList, ParamList, Any], None] | None = None,
                 use_buffers: bool = False) -> None:
        super().__init__()
        if not isinstance(model, Module):
            raise TypeError(f"AveragedModel: expected a vtl.nn.Module, got "
                            f"{type(model).__name__}")
        if avg_fn is not None and multi_avg_fn is not None:
            raise ValueError("AveragedModel: only one of avg_fn and multi_avg_fn should be "
                             "provided")
        if not isinstance(use_buffers, bool):
            raise TypeError(f"AveragedModel: use_buffers must be True or False, got "
                            f"{use_buffers!r}")
        self.module = deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        counter_device = device
        if counter_device is None:
            first = next(itertools.chain(self.module.parameters(), self.module.buffers()), None)
            counter_device = None if first is None else first.device
        self.register_buffer("n_averaged", vtl.zeros((), dtype=vtl.int64, device=counter_device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers
        self._n_seen: tuple[Any, int, int] | None = None  # (buffer, its version, value)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The averaged model's forward pass."""
        return self.module(*args, **kwargs)

    def _count(self) -> int:
        """``n_averaged`` as an int, read back only when the buffer changed elsewhere."""
        n = self.n_averaged
        seen = self._n_seen
        if seen is not None and seen[0] is n and seen[1] == n._version:
            return seen[2]
        value = int(n.item())
        self._n_seen = (n, n._version, value)
        return value

    def update_parameters(self, model: Module) -> None:
        """Fold ``model``'s current parameters (and buffers with ``use_buffers``) into
        the average."""
        if self.use_buffers:
            self_param = list(itertools.chain(self.module.parameters(), self.module.buffers()))
            model_param = list(itertools.chain(model.parameters(), model.buffers()))
        else:
            self_param = list(self.parameters())
            model_param = list(model.parameters())
        count = self._count()
        with vtl.no_grad():
            averaged: list[Tensor] = []
            current: list[Tensor] = []
            for p_avg, p_model in zip(self_param, model_param, strict=False):
                p_model_ = p_model.detach()
                if p_model_.device != p_avg.device:
                    p_model_ = p_model_.to(p_avg.device)
                averaged.append(p_avg)
                current.append(p_model_)
                if count == 0:
                    _assign(p_avg, p_model_)
            if count > 0:
                n = self.n_averaged
                if self.multi_avg_fn is not None:
                    for (dev, _), (avgs, curs) in _group_by_device_and_dtype(
                            averaged, current).items():
                        self.multi_avg_fn(avgs, curs, n if n.device == dev else n.to(dev))
                else:
                    fn = self.avg_fn or get_swa_avg_fn()
                    for p_avg, p_model_ in zip(averaged, current, strict=True):
                        nd = n if n.device == p_avg.device else n.to(p_avg.device)
                        _assign(p_avg, fn(p_avg.detach(), p_model_, nd))
            if not self.use_buffers:
                # keep the buffers in sync with the source model
                for b_swa, b_model in zip(self.module.buffers(), model.buffers(), strict=True):
                    b = b_model.detach()
                    _assign(b_swa, b if b.device == b_swa.device else b.to(b_swa.device))
            n = self.n_averaged
            n[...] = n + 1
        self._n_seen = (n, n._version, count + 1)


def _group_by_device_and_dtype(averaged: list[Tensor], current: list[Tensor]
                               ) -> dict[tuple[Any, Any], tuple[list[Tensor], list[Tensor]]]:
    groups: dict[tuple[Any, Any], tuple[list[Tensor], list[Tensor]]] = {}
    for a, c in zip(averaged, current, strict=True):
        key = (a.device, a.dtype)
        avgs, curs = groups.setdefault(key, ([], []))
        avgs.append(a)
        curs.append(c)
    return groups


def update_bn(loader: Iterable[Any], model: Module, device: Any = None) -> None:
    """Recompute the running statistics of every BatchNorm layer of ``model`` with one
    pass over ``loader``.

    The statistics are reset and accumulated as a cumulative average over the
    batches (``momentum=None`` during the pass); each batch is a tensor, or a
    list/tuple whose first element is the input. ``device`` moves each batch
    first. The model's training mode and the layers' momenta are restored.
    """
    momenta: dict[Module, Any] = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    try:
        with vtl.no_grad():
            for batch in loader:
                if isinstance(batch, (list, tuple)):
                    batch = batch[0]
                if device is not None:
                    batch = batch.to(device)
                model(batch)
    finally:
        for module, momentum in momenta.items():
            module.momentum = momentum
        model.train(was_training)


class SWALR(LRScheduler):
    """Anneal each group's lr from its current value to ``swa_lr`` (one value, or one
    per group) over ``anneal_epochs`` steps, with ``anneal_strategy`` ``"cos"``
    (``(1 - cos(π t)) / 2``) or ``"linear"`` (``t``), then keep it at ``swa_lr``.

    It anneals from whatever lr the group has when it starts (e.g. after another
    scheduler), as PyTorch's: at step ``k`` the lr is
    ``swa_lr α(k) + lr₀ (1 - α(k))``, ``α(k) = f(min(1, k / anneal_epochs))``.
    """

    _fields = {**LRScheduler._fields, "anneal_epochs": _integer(0),
               "_anneal_strategy": _choice("cos", "linear")}

    def __init__(self, optimizer: Optimizer, swa_lr: float | Sequence[float],
                 anneal_epochs: int = 10, anneal_strategy: str = "cos",
                 last_epoch: int = -1) -> None:
        _check_optimizer(optimizer, "SWALR")
        swa_lrs = _per_group(swa_lr, len(optimizer.param_groups), "swa_lr")
        for lr in swa_lrs:
            if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not lr >= 0:
                raise ValueError(f"SWALR: swa_lr must be a non-negative number, got {lr!r}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError("anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy!r}")
        if isinstance(anneal_epochs, bool) or not isinstance(anneal_epochs, int) \
                or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got "
                             f"{anneal_epochs!r}")
        for lr, group in zip(swa_lrs, optimizer.param_groups, strict=True):
            group["swa_lr"] = lr
        self._anneal_strategy = anneal_strategy
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    def anneal_func(self, t: float) -> float:
        """The annealing fraction at ``t`` in [0, 1]."""
        if self._anneal_strategy == "cos":
            return (1 - math.cos(math.pi * t)) / 2
        return t

    @staticmethod
    def _get_initial_lr(lr: float, swa_lr: float, alpha: float) -> float:
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self) -> list[float]:
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_t = max(0, min(1, (step - 1) / max(1, self.anneal_epochs)))
        prev_alpha = self.anneal_func(prev_t)
        prev_lrs = [self._get_initial_lr(group["lr"], group["swa_lr"], prev_alpha)
                    for group in self.optimizer.param_groups]
        t = max(0, min(1, step / max(1, self.anneal_epochs)))
        alpha = self.anneal_func(t)
        return [group["swa_lr"] * alpha + lr * (1 - alpha)
                for group, lr in zip(self.optimizer.param_groups, prev_lrs, strict=True)]
