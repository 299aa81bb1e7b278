"""RMSprop (PyTorch's ``torch.optim.RMSprop``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .._tensor import Tensor
from . import _functional as F
from . import _programs
from .optimizer import Optimizer, _check_flags, _check_number, _check_real, _set, _zeros_like

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    r"""RMSprop with optional centering, momentum and weight decay.

    ``g`` is the gradient (negated when ``maximize``, plus ``weight_decay * p``)::

        s = α s + (1 - α) g²
        ḡ = α ḡ + (1 - α) g,  avg = sqrt(s - ḡ²) + eps   (centered)
        avg = sqrt(s) + eps                              (otherwise)
        b = μ b + g / avg,  p = p - lr b                  (momentum > 0)
        p = p - lr g / avg                               (otherwise)

    Args:
        params: The parameters to optimize: an iterable of tensors, or of dicts that each hold a
            ``'params'`` entry and per-group options overriding the defaults.
        lr: Learning rate.
        alpha: Smoothing constant of the squared-gradient average.
        eps: Added to the denominator for numerical stability.
        weight_decay: Weight decay (an L2 penalty added to the gradient).
        momentum: Momentum factor.
        centered: Normalise by the estimated variance of the gradient.
        maximize: Maximize the objective instead of minimizing it.
        foreach: ``None``/``True`` allows the fused multi-tensor kernel where the backend has one;
            ``False`` updates the parameters one by one.

    Raises:
        ValueError: If a hyper-parameter is out of range or of the wrong type, or ``params`` is
            empty.
        TypeError: If ``params`` is a single tensor or holds something other than tensors.
    """

    _state_names = {"sq": "square_avg", "ga": "grad_avg", "buf": "momentum_buffer"}
    _plan_depends_on = ()
    _state_keys = frozenset({"step", *_state_names.values()})
    _required_state = ("step", "square_avg")

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, alpha: float = 0.99,
                 eps: float = 1e-8, weight_decay: float = 0.0, momentum: float = 0.0,
                 centered: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None) -> None:
        defaults = {"lr": lr, "alpha": alpha, "eps": eps, "weight_decay": weight_decay,
                    "momentum": momentum, "centered": centered, "maximize": maximize,
                    "foreach": foreach}
        super().__init__(params, defaults)

    def _check_group(self, group: dict[str, Any]) -> None:
        for key in ("lr", "eps", "momentum", "weight_decay", "alpha"):
            _check_number(key, group[key], cls="RMSprop")
        _check_flags(group, ("centered", "maximize", "foreach"), "RMSprop")

    def _init_state(self, p: Tensor, group: dict[str, Any]) -> dict[str, Any]:
        _check_real(p, "RMSprop")
        return {"step": 0, "square_avg": _zeros_like(p)}

    def _advance(self, state: dict[str, Any], group: dict[str, Any]) -> None:
        state["step"] += 1
        p_like = state["square_avg"]
        if group["centered"] and state.get("grad_avg") is None:
            state["grad_avg"] = _zeros_like(p_like)
        if group["momentum"] > 0 and state.get("momentum_buffer") is None:
            state["momentum_buffer"] = _zeros_like(p_like)

    def _plan(self, p: Tensor, state: dict[str, Any], group: dict[str, Any]):
        prog = _programs.rmsprop(centered=group["centered"], momentum=group["momentum"] > 0,
                                 weight_decay=group["weight_decay"] != 0,
                                 maximize=group["maximize"])
        values = {"wd": group["weight_decay"], "alpha": group["alpha"],
                  "oma": 1.0 - group["alpha"], "eps": group["eps"], "mu": group["momentum"],
                  "lr": group["lr"]}
        return prog, tuple(values[s] for s in prog.scalars)

    def _portable(self, p: Tensor, state: dict[str, Any], group: dict[str, Any]) -> Any:
        ga = state.get("grad_avg") if group["centered"] else None
        buf = state.get("momentum_buffer") if group["momentum"] > 0 else None
        new_p, sq, new_ga, new_buf = F.rmsprop(
            p._device.xp, p._data, p.grad._data, state["square_avg"]._data,
            None if ga is None else ga._data, None if buf is None else buf._data,
            lr=group["lr"], alpha=group["alpha"], eps=group["eps"],
            weight_decay=group["weight_decay"], momentum=group["momentum"],
            centered=group["centered"], maximize=group["maximize"],
        )
        _set(state, "square_avg", p, sq)
        if new_ga is not None:
            _set(state, "grad_avg", p, new_ga)
        if new_buf is not None:
            _set(state, "momentum_buffer", p, new_buf)
        return new_p
