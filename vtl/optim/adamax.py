"""Adamax (PyTorch's ``torch.optim.Adamax``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .._tensor import Tensor
from . import _functional as F
from . import _programs
from .optimizer import (
    Optimizer,
    _check_betas,
    _check_flags,
    _check_number,
    _check_real,
    _set,
    _zeros_like,
)

__all__ = ["Adamax"]


class Adamax(Optimizer):
    r"""Adamax: Adam with the infinity norm (Kingma & Ba, 2014, section 7).

    Per step ``t`` (from 1), with gradient ``g`` (negated when ``maximize``; plus
    ``weight_decay * p``)::

        m = β1 m + (1 - β1) g
        u = max(β2 u, |g| + eps)
        p = p - lr / (1 - β1ᵗ) · m / u

    State per parameter: ``step`` (int), ``exp_avg`` and ``exp_inf``.

    Args:
        params: The parameters to optimize: an iterable of tensors, or of dicts that each hold a
            ``'params'`` entry and per-group options overriding the defaults.
        lr: Learning rate.
        betas: Coefficients ``(β1, β2)`` of the running average of the gradient and of the decay of
            the infinity norm, each in ``[0, 1)``.
        eps: Added to the denominator for numerical stability.
        weight_decay: Weight decay (an L2 penalty added to the gradient).
        foreach: ``None``/``True`` allows the fused multi-tensor kernel where the backend has one;
            ``False`` updates the parameters one by one.
        maximize: Maximize the objective instead of minimizing it.

    Raises:
        ValueError: If a hyper-parameter is out of range or of the wrong type, or ``params`` is
            empty.
        TypeError: If ``params`` is a single tensor or holds something other than tensors.
    """

    _state_names = {"m": "exp_avg", "u": "exp_inf"}
    _plan_depends_on = ("step",)
    _state_keys = frozenset({"step", *_state_names.values()})
    _required_state = ("step", "exp_avg", "exp_inf")

    def __init__(self, params: Iterable[Any], lr: float = 2e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, foreach: bool | None = None, *,
                 maximize: bool = False) -> None:
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "foreach": foreach, "maximize": maximize}
        super().__init__(params, defaults)

    def _check_group(self, group: dict[str, Any]) -> None:
        cls = type(self).__name__
        _check_number("lr", group["lr"], cls=cls)
        _check_number("eps", group["eps"], cls=cls)
        _check_betas(group, cls)
        _check_number("weight_decay", group["weight_decay"], cls=cls)
        _check_flags(group, ("maximize", "foreach"), cls)

    def _init_state(self, p: Tensor, group: dict[str, Any]) -> dict[str, Any]:
        _check_real(p, type(self).__name__)
        return {"step": 0, "exp_avg": _zeros_like(p), "exp_inf": _zeros_like(p)}

    def _advance(self, state: dict[str, Any], group: dict[str, Any]) -> None:
        state["step"] += 1

    def _plan(self, p: Tensor, state: dict[str, Any], group: dict[str, Any]):
        beta1, beta2 = group["betas"]
        wd = group["weight_decay"]
        prog = _programs.adamax(weight_decay=wd != 0, maximize=group["maximize"])
        values = {"wd": wd, "omb1": 1.0 - beta1, "b2": beta2, "eps": group["eps"],
                  "nclr": -(group["lr"] / (1.0 - beta1 ** state["step"]))}
        return prog, tuple(values[s] for s in prog.scalars)

    def _portable(self, p: Tensor, state: dict[str, Any], group: dict[str, Any]) -> Any:
        beta1, beta2 = group["betas"]
        new_p, m, u = F.adamax(
            p._device.xp, p._data, p.grad._data, state["exp_avg"]._data,
            state["exp_inf"]._data, step=state["step"], lr=group["lr"], beta1=beta1,
            beta2=beta2, eps=group["eps"], weight_decay=group["weight_decay"],
            maximize=group["maximize"],
        )
        _set(state, "exp_avg", p, m)
        _set(state, "exp_inf", p, u)
        return new_p
