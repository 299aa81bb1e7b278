"""RAdam (PyTorch's ``torch.optim.RAdam``)."""

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

__all__ = ["RAdam"]


class RAdam(Optimizer):
    r"""Rectified Adam (Liu et al., 2019).

    Per step ``t`` (from 1), with gradient ``g`` (negated when ``maximize``)::

        p = p (1 - lr λ)  (decoupled_weight_decay)   or   g = g + λ p
        m = β1 m + (1 - β1) g          v = β2 v + (1 - β2) g²
        m̂ = m / (1 - β1ᵗ)
        ρ∞ = 2 / (1 - β2) - 1          ρₜ = ρ∞ - 2 t β2ᵗ / (1 - β2ᵗ)
        if ρₜ > 5:  l = sqrt(1 - β2ᵗ) / (sqrt(v) + eps)
                    r = sqrt((ρₜ - 4)(ρₜ - 2) ρ∞ / ((ρ∞ - 4)(ρ∞ - 2) ρₜ))
                    p = p - lr m̂ r l
        else:       p = p - lr m̂

    ``decoupled_weight_decay=True`` gives RAdamW. State per parameter: ``step``
    (int), ``exp_avg``, ``exp_avg_sq``. The choice between the two updates is
    made on the host from the step count (no device read); the fused kernel runs
    one rule for both phases, ``p - m̂ lr (r sqrt(1 - β2ᵗ) / (sqrt(v) + eps) + u)``
    with ``r = 0, u = 1`` before the rectification starts (PyTorch's
    multi-tensor form), so a captured step stays valid across the switch.

    Args:
        params: The parameters to optimize: an iterable of tensors, or of dicts that each hold a
            ``'params'`` entry and per-group options overriding the defaults.
        lr: Learning rate.
        betas: Coefficients ``(β1, β2)`` of the running averages of the gradient and of its square,
            each in ``[0, 1)``.
        eps: Added to the denominator for numerical stability.
        weight_decay: Weight decay (an L2 penalty added to the gradient).
        decoupled_weight_decay: Apply the weight decay to the parameter directly (AdamW style)
            instead of adding it to the gradient.
        foreach: ``None``/``True`` allows the fused multi-tensor kernel where the backend has one;
            ``False`` updates the parameters one by one.
        maximize: Maximize the objective instead of minimizing it.

    Raises:
        ValueError: If a hyper-parameter is out of range or of the wrong type, or ``params`` is
            empty.
        TypeError: If ``params`` is a single tensor or holds something other than tensors.
    """

    _state_names = {"m": "exp_avg", "v": "exp_avg_sq"}
    _plan_depends_on = ("step",)
    _state_keys = frozenset({"step", *_state_names.values()})
    _required_state = ("step", "exp_avg", "exp_avg_sq")

    def __init__(self, params: Iterable[Any], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, decoupled_weight_decay: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False) -> None:
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "decoupled_weight_decay": decoupled_weight_decay, "maximize": maximize,
                    "foreach": foreach}
        super().__init__(params, defaults)

    def _check_group(self, group: dict[str, Any]) -> None:
        cls = type(self).__name__
        _check_number("lr", group["lr"], cls=cls)
        _check_number("eps", group["eps"], cls=cls)
        _check_betas(group, cls)
        _check_number("weight_decay", group["weight_decay"], cls=cls)
        _check_flags(group, ("decoupled_weight_decay", "maximize", "foreach"), cls)

    def _init_state(self, p: Tensor, group: dict[str, Any]) -> dict[str, Any]:
        _check_real(p, type(self).__name__)
        return {"step": 0, "exp_avg": _zeros_like(p), "exp_avg_sq": _zeros_like(p)}

    def _advance(self, state: dict[str, Any], group: dict[str, Any]) -> None:
        state["step"] += 1

    def _plan(self, p: Tensor, state: dict[str, Any], group: dict[str, Any]):
        beta1, beta2 = group["betas"]
        wd = group["weight_decay"]
        prog = _programs.radam(weight_decay=wd != 0,
                               decoupled=group["decoupled_weight_decay"],
                               maximize=group["maximize"])
        values = F.radam_scalars(state["step"], lr=group["lr"], beta1=beta1, beta2=beta2,
                                 weight_decay=wd)
        values.update(wd=wd, omb1=1.0 - beta1, b2=beta2, omb2=1.0 - beta2, eps=group["eps"])
        return prog, tuple(values[s] for s in prog.scalars)

    def _portable(self, p: Tensor, state: dict[str, Any], group: dict[str, Any]) -> Any:
        beta1, beta2 = group["betas"]
        new_p, m, v = F.radam(
            p._device.xp, p._data, p.grad._data, state["exp_avg"]._data,
            state["exp_avg_sq"]._data, step=state["step"], lr=group["lr"], beta1=beta1,
            beta2=beta2, eps=group["eps"], weight_decay=group["weight_decay"],
            decoupled=group["decoupled_weight_decay"], maximize=group["maximize"],
        )
        _set(state, "exp_avg", p, m)
        _set(state, "exp_avg_sq", p, v)
        return new_p
