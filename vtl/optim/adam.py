"""Adam (PyTorch's ``torch.optim.Adam``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .._tensor import Tensor
from . import _functional as F
from . import _programs
from .optimizer import Optimizer, _check_flags, _check_number, _check_real, _set, _zeros_like

__all__ = ["Adam"]


class Adam(Optimizer):
    r"""Adam with optional L2 weight decay and AMSGrad.

    Per step ``t`` (starting at 1), with gradient ``g`` (negated when
    ``maximize``; plus ``weight_decay * p`` for Adam's L2 penalty)::

        m = β1 m + (1 - β1) g            v = β2 v + (1 - β2) g²
        v̂ = max(v̂, v) (amsgrad)          denom = sqrt(v or v̂) / sqrt(1 - β2ᵗ) + eps
        p = p - lr / (1 - β1ᵗ) · m / denom

    State per parameter: ``step`` (int), ``exp_avg``, ``exp_avg_sq`` and, with
    ``amsgrad``, ``max_exp_avg_sq``.

    Args:
        params: The parameters to optimize: an iterable of tensors, or of dicts that each hold a
            ``'params'`` entry and per-group options overriding the defaults.
        lr: Learning rate.
        betas: Coefficients ``(β1, β2)`` of the running averages of the gradient and of its square,
            each in ``[0, 1)``.
        eps: Added to the denominator for numerical stability.
        weight_decay: Weight decay (an L2 penalty added to the gradient).
        amsgrad: Use the AMSGrad variant (the maximum of the second-moment averages).
        maximize: Maximize the objective instead of minimizing it.
        foreach: ``None``/``True`` allows the fused multi-tensor kernel where the backend has one;
            ``False`` updates the parameters one by one.

    Raises:
        ValueError: If a hyper-parameter is out of range or of the wrong type, or ``params`` is
            empty.
        TypeError: If ``params`` is a single tensor or holds something other than tensors.

    Example:
        >>> w = vtl.asarray([1.0, -1.0], requires_grad=True)
        >>> opt = optim.Adam([w], lr=0.1)
        >>> vtl.sum(w ** 2).backward()
        >>> opt.step()
        >>> [round(v, 4) for v in w.tolist()]      # the first step moves each weight by lr
        [0.9, -0.9]
    """

    _state_names = {"m": "exp_avg", "v": "exp_avg_sq", "vmax": "max_exp_avg_sq"}
    _plan_depends_on = ("step",)
    _state_keys = frozenset({"step", *_state_names.values()})
    _required_state = ("step", "exp_avg", "exp_avg_sq")
    _decoupled = False

    def __init__(self, params: Iterable[Any], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, amsgrad: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None) -> None:
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "amsgrad": amsgrad, "maximize": maximize, "foreach": foreach}
        super().__init__(params, defaults)

    def _check_group(self, group: dict[str, Any]) -> None:
        cls = type(self).__name__
        _check_number("lr", group["lr"], cls=cls)
        _check_number("eps", group["eps"], cls=cls)
        betas = group["betas"]
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise ValueError(f"{cls}: betas must be a pair of floats, got {betas!r}")
        _check_number("beta1 (betas[0])", betas[0], cls=cls, high=1.0, high_open=True)
        _check_number("beta2 (betas[1])", betas[1], cls=cls, high=1.0, high_open=True)
        _check_number("weight_decay", group["weight_decay"], cls=cls)
        _check_flags(group, ("amsgrad", "maximize", "foreach"), cls)

    def _init_state(self, p: Tensor, group: dict[str, Any]) -> dict[str, Any]:
        _check_real(p, type(self).__name__)
        state = {"step": 0, "exp_avg": _zeros_like(p), "exp_avg_sq": _zeros_like(p)}
        if group["amsgrad"]:
            state["max_exp_avg_sq"] = _zeros_like(p)
        return state

    def _advance(self, state: dict[str, Any], group: dict[str, Any]) -> None:
        state["step"] += 1
        if group["amsgrad"] and state.get("max_exp_avg_sq") is None:
            state["max_exp_avg_sq"] = _new_like(state["exp_avg"])

    def _plan(self, p: Tensor, state: dict[str, Any], group: dict[str, Any]):
        beta1, beta2 = group["betas"]
        wd = group["weight_decay"]
        prog = _programs.adam(amsgrad=group["amsgrad"], weight_decay=wd != 0,
                              decoupled=self._decoupled, maximize=group["maximize"])
        values = F.adam_scalars(state["step"], lr=group["lr"], beta1=beta1, beta2=beta2,
                                weight_decay=wd)
        values.update(wd=wd, omb1=1.0 - beta1, b2=beta2, omb2=1.0 - beta2, eps=group["eps"])
        return prog, tuple(values[s] for s in prog.scalars)

    def _portable(self, p: Tensor, state: dict[str, Any], group: dict[str, Any]) -> Any:
        beta1, beta2 = group["betas"]
        vmax = state.get("max_exp_avg_sq") if group["amsgrad"] else None
        new_p, m, v, new_vmax = F.adam(
            p._device.xp, p._data, p.grad._data, state["exp_avg"]._data,
            state["exp_avg_sq"]._data, None if vmax is None else vmax._data,
            step=state["step"], lr=group["lr"], beta1=beta1, beta2=beta2, eps=group["eps"],
            weight_decay=group["weight_decay"], decoupled=self._decoupled,
            amsgrad=group["amsgrad"], maximize=group["maximize"],
        )
        _set(state, "exp_avg", p, m)
        _set(state, "exp_avg_sq", p, v)
        if new_vmax is not None:
            _set(state, "max_exp_avg_sq", p, new_vmax)
        return new_p


def _new_like(t: Tensor) -> Tensor:
    from .._tensor import _new

    return _new(t._device.xp.zeros_like(t._data), t._device)
