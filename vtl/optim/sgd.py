"""Stochastic gradient descent (PyTorch's ``torch.optim.SGD``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .. import capture as _capture
from .._tensor import Tensor
from . import _functional as F
from . import _programs
from .optimizer import Optimizer, _check_flags, _check_number, _set, _zeros_like

__all__ = ["SGD"]


class SGD(Optimizer):
    r"""SGD with optional momentum, dampening, Nesterov momentum and weight decay.

    With gradient :math:`g` (negated when ``maximize``), weight decay
    :math:`\lambda`, momentum :math:`\mu`, dampening :math:`\tau`::

        g = g + λ p
        b = g (first step),  b = μ b + (1 - τ) g (later steps)
        g = g + μ b (nesterov)  or  g = b
        p = p - lr g

    Args:
        params: The parameters to optimize: an iterable of tensors, or of dicts that each hold a
            ``'params'`` entry and per-group options overriding the defaults.
        lr: Learning rate.
        momentum: Momentum factor.
        dampening: Dampening of the momentum.
        weight_decay: Weight decay (an L2 penalty added to the gradient).
        nesterov: Use Nesterov momentum (needs ``momentum > 0`` and zero dampening).
        maximize: Maximize the objective instead of minimizing it.
        foreach: ``None``/``True`` allows the fused multi-tensor kernel where the backend has one;
            ``False`` updates the parameters one by one.

    Raises:
        ValueError: If a hyper-parameter is out of range or of the wrong type, or ``params`` is
            empty.
        TypeError: If ``params`` is a single tensor or holds something other than tensors.

    Example:
        >>> w = vtl.asarray([1.0, -1.0], requires_grad=True)
        >>> opt = optim.SGD([w], lr=0.1, momentum=0.9)
        >>> vtl.sum(w ** 2).backward()
        >>> opt.step()
        >>> [round(v, 4) for v in w.tolist()]   # w - lr * 2w
        [0.8, -0.8]
    """

    _state_names = {"buf": "momentum_buffer"}
    _state_keys = frozenset({"momentum_buffer"})

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, momentum: float = 0.0,
                 dampening: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False,
                 *, maximize: bool = False, foreach: bool | None = None) -> None:
        defaults = {"lr": lr, "momentum": momentum, "dampening": dampening,
                    "weight_decay": weight_decay, "nesterov": nesterov,
                    "maximize": maximize, "foreach": foreach}
        super().__init__(params, defaults)

    def _check_group(self, group: dict[str, Any]) -> None:
        _check_number("lr", group["lr"], cls="SGD")
        _check_number("momentum", group["momentum"], cls="SGD")
        _check_number("weight_decay", group["weight_decay"], cls="SGD")
        _check_number("dampening", group["dampening"], cls="SGD")
        _check_flags(group, ("nesterov", "maximize", "foreach"), "SGD")
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError("SGD: Nesterov momentum requires a momentum and zero dampening")

    def _init_state(self, p: Tensor, group: dict[str, Any]) -> dict[str, Any]:
        return {"momentum_buffer": None}

    _plan_depends_on = ()

    def _plan_key(self, state: dict[str, Any], group: dict[str, Any],
                  deps: tuple[str, ...]) -> tuple | None:
        # a first momentum step creates the parameter's buffer: planned alone
        if group["momentum"] != 0 and state.get("momentum_buffer") is None:
            return None
        return ()

    def _plan(self, p: Tensor, state: dict[str, Any], group: dict[str, Any]):
        mu = group["momentum"]
        first = False
        if mu != 0 and state.get("momentum_buffer") is None:
            if _capture.current(p._device) is not None:
                raise _capture.CaptureError(
                    "vtl.compile: SGD's first momentum step (buffer = gradient) would be "
                    "replayed every step: take a step eagerly before the capture (with a "
                    "GradScaler, one that is not skipped)")
            state["momentum_buffer"] = _zeros_like(p)
            first = True
        prog = _programs.sgd(momentum=mu != 0, first=first, nesterov=group["nesterov"],
                             weight_decay=group["weight_decay"] != 0,
                             maximize=group["maximize"])
        values = {"lr": group["lr"], "wd": group["weight_decay"], "mu": mu,
                  "omd": 1.0 - group["dampening"]}
        return prog, tuple(values[s] for s in prog.scalars)

    def _portable(self, p: Tensor, state: dict[str, Any], group: dict[str, Any]) -> Any:
        buf = state.get("momentum_buffer")
        new_p, new_buf = F.sgd(
            p._device.xp, p._data, p.grad._data, None if buf is None else buf._data,
            lr=group["lr"], momentum=group["momentum"], dampening=group["dampening"],
            nesterov=group["nesterov"], weight_decay=group["weight_decay"],
            maximize=group["maximize"],
        )
        if new_buf is not None:
            _set(state, "momentum_buffer", p, new_buf)
        return new_p
