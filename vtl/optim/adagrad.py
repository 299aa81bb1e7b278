"""Adagrad (PyTorch's ``torch.optim.Adagrad``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .._tensor import Tensor, _new
from . import _functional as F
from . import _programs
from .optimizer import Optimizer, _check_flags, _check_number, _check_real, _set, state_dtype

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    r"""Adagrad with learning-rate decay and weight decay.

    Per step ``t`` (starting at 1), ``g`` the gradient (negated when
    ``maximize``, plus ``weight_decay * p``)::

        lr_t = lr / (1 + (t - 1) lr_decay)
        s = s + g²
        p = p - lr_t g / (sqrt(s) + eps)

    The sum ``s`` starts at ``initial_accumulator_value`` and is created, with
    ``step = 0``, when the parameter is added (as in PyTorch).

    Args:
        params: The parameters to optimize: an iterable of tensors, or of dicts that each hold a
            ``'params'`` entry and per-group options overriding the defaults.
        lr: Learning rate.
        lr_decay: Learning-rate decay.
        weight_decay: Weight decay (an L2 penalty added to the gradient).
        initial_accumulator_value: Initial value of the sum of squares.
        eps: Added to the denominator for numerical stability.
        maximize: Maximize the objective instead of minimizing it.
        foreach: ``None``/``True`` allows the fused multi-tensor kernel where the backend has one;
            ``False`` updates the parameters one by one.

    Raises:
        ValueError: If a hyper-parameter is out of range or of the wrong type, or ``params`` is
            empty.
        TypeError: If ``params`` is a single tensor or holds something other than tensors.
    """

    _state_names = {"s": "sum"}
    _plan_depends_on = ("step",)
    _state_keys = frozenset({"step", "sum"})
    _required_state = ("step", "sum")

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, lr_decay: float = 0.0,
                 weight_decay: float = 0.0, initial_accumulator_value: float = 0.0,
                 eps: float = 1e-10, *, maximize: bool = False,
                 foreach: bool | None = None) -> None:
        defaults = {"lr": lr, "lr_decay": lr_decay, "weight_decay": weight_decay,
                    "initial_accumulator_value": initial_accumulator_value, "eps": eps,
                    "maximize": maximize, "foreach": foreach}
        super().__init__(params, defaults)

    def _check_group(self, group: dict[str, Any]) -> None:
        for key in ("lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps"):
            _check_number(key, group[key], cls="Adagrad")
        _check_flags(group, ("maximize", "foreach"), "Adagrad")

    def _init_group(self, group: dict[str, Any]) -> None:
        for p in group["params"]:
            self.state[p] = self._init_state(p, group)

    def _init_state(self, p: Tensor, group: dict[str, Any]) -> dict[str, Any]:
        _check_real(p, "Adagrad")
        xp = p._device.xp
        init = group["initial_accumulator_value"]
        s = xp.full(p._data.shape, init, dtype=state_dtype(p._data.dtype),
                    device=p._data.device)
        return {"step": 0, "sum": _new(s, p._device)}

    def _advance(self, state: dict[str, Any], group: dict[str, Any]) -> None:
        state["step"] += 1

    def _plan(self, p: Tensor, state: dict[str, Any], group: dict[str, Any]):
        prog = _programs.adagrad(weight_decay=group["weight_decay"] != 0,
                                 maximize=group["maximize"])
        values = {"wd": group["weight_decay"], "eps": group["eps"],
                  "clr": F.adagrad_lr(state["step"], lr=group["lr"], lr_decay=group["lr_decay"])}
        return prog, tuple(values[s] for s in prog.scalars)

    def _portable(self, p: Tensor, state: dict[str, Any], group: dict[str, Any]) -> Any:
        new_p, s = F.adagrad(
            p._device.xp, p._data, p.grad._data, state["sum"]._data, step=state["step"],
            lr=group["lr"], lr_decay=group["lr_decay"], weight_decay=group["weight_decay"],
            eps=group["eps"], maximize=group["maximize"],
        )
        _set(state, "sum", p, s)
        return new_p
