"""NAdam (PyTorch's ``torch.optim.NAdam``)."""

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
    _scalar_state,
    _set,
    _zeros_like,
)

__all__ = ["NAdam"]


class NAdam(Optimizer):
    r"""Adam with Nesterov momentum (Dozat, 2016), with PyTorch's momentum schedule.

    Per step ``t`` (from 1), with gradient ``g`` (negated when ``maximize``)::

        p = p (1 - lr λ)  (decoupled_weight_decay)   or   g = g + λ p
        μₜ = β1 (1 - ½ · 0.96^(t ψ))        μₜ₊₁ = β1 (1 - ½ · 0.96^((t+1) ψ))
        m = β1 m + (1 - β1) g               v = β2 v + (1 - β2) g²
        denom = sqrt(v / (1 - β2ᵗ)) + eps
        p = p - lr (1 - μₜ) / (1 - ∏ᵢ≤ₜ μᵢ) · g / denom
              - lr μₜ₊₁ / (1 - ∏ᵢ≤ₜ₊₁ μᵢ) · m / denom

    where ``ψ`` is ``momentum_decay`` and ``λ`` is ``weight_decay``.
    ``decoupled_weight_decay=True`` gives NAdamW. State per parameter: ``step``
    (int), ``mu_product`` (float, ∏ μᵢ so far), ``exp_avg`` and ``exp_avg_sq``.
    The step count and μ product are kept on the host, so a step never reads a
    device value; they reach the fused kernel as per-step scalars.

    Args:
        params: The parameters to optimize: an iterable of tensors, or of dicts that each hold a
            ``'params'`` entry and per-group options overriding the defaults.
        lr: Learning rate.
        betas: Coefficients ``(β1, β2)`` of the running averages of the gradient and of its square,
            each in ``[0, 1)``.
        eps: Added to the denominator for numerical stability.
        weight_decay: Weight decay (an L2 penalty added to the gradient).
        momentum_decay: The ``ψ`` of the momentum schedule.
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
    _plan_depends_on = ("step", "mu_product")
    _state_keys = frozenset({"step", "mu_product", *_state_names.values()})
    _required_state = ("step", "mu_product", "exp_avg", "exp_avg_sq")

    def __init__(self, params: Iterable[Any], lr: float = 2e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False) -> None:
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "momentum_decay": momentum_decay,
                    "decoupled_weight_decay": decoupled_weight_decay, "maximize": maximize,
                    "foreach": foreach}
        super().__init__(params, defaults)

    def _check_group(self, group: dict[str, Any]) -> None:
        cls = type(self).__name__
        _check_number("lr", group["lr"], cls=cls)
        _check_number("eps", group["eps"], cls=cls)
        _check_betas(group, cls)
        _check_number("weight_decay", group["weight_decay"], cls=cls)
        _check_number("momentum_decay", group["momentum_decay"], cls=cls)
        _check_flags(group, ("decoupled_weight_decay", "maximize", "foreach"), cls)

    def _init_state(self, p: Tensor, group: dict[str, Any]) -> dict[str, Any]:
        _check_real(p, type(self).__name__)
        return {"step": 0, "mu_product": 1.0, "exp_avg": _zeros_like(p),
                "exp_avg_sq": _zeros_like(p)}

    def _advance(self, state: dict[str, Any], group: dict[str, Any]) -> None:
        state["step"] += 1
        state["mu_product"] *= F.nadam_mu(state["step"], beta1=group["betas"][0],
                                          momentum_decay=group["momentum_decay"])

    def _plan(self, p: Tensor, state: dict[str, Any], group: dict[str, Any]):
        beta1, beta2 = group["betas"]
        wd = group["weight_decay"]
        prog = _programs.nadam(weight_decay=wd != 0,
                               decoupled=group["decoupled_weight_decay"],
                               maximize=group["maximize"])
        values = F.nadam_scalars(state["step"], state["mu_product"], lr=group["lr"],
                                 beta1=beta1, beta2=beta2,
                                 momentum_decay=group["momentum_decay"], weight_decay=wd)
        values.update(wd=wd, omb1=1.0 - beta1, b2=beta2, omb2=1.0 - beta2, eps=group["eps"])
        return prog, tuple(values[s] for s in prog.scalars)

    def _portable(self, p: Tensor, state: dict[str, Any], group: dict[str, Any]) -> Any:
        beta1, beta2 = group["betas"]
        new_p, m, v = F.nadam(
            p._device.xp, p._data, p.grad._data, state["exp_avg"]._data,
            state["exp_avg_sq"]._data, step=state["step"], mu_product=state["mu_product"],
            lr=group["lr"], beta1=beta1, beta2=beta2, eps=group["eps"],
            weight_decay=group["weight_decay"], momentum_decay=group["momentum_decay"],
            decoupled=group["decoupled_weight_decay"], maximize=group["maximize"],
        )
        _set(state, "exp_avg", p, m)
        _set(state, "exp_avg_sq", p, v)
        return new_p

    def _load_value(self, p: Tensor, idx: Any, key: str, value: Any) -> Any:
        if key == "mu_product":  # a number (or PyTorch's 0-d tensor)
            return _scalar_state(value, f"{type(self).__name__}.load_state_dict: state "
                                        f"'mu_product' of parameter {idx}")
        return super()._load_value(p, idx, key, value)
