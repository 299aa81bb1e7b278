"""AdamW: Adam with decoupled weight decay (PyTorch's ``torch.optim.AdamW``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .adam import Adam

__all__ = ["AdamW"]


class AdamW(Adam):
    r"""Adam with decoupled weight decay (Loshchilov & Hutter).

    Each step first shrinks the parameter, ``p = p (1 - lr · weight_decay)``,
    then applies the Adam update with the raw gradient (no L2 term). The
    moments are kept per parameter in ``state`` exactly as for :class:`Adam`.

    Args:
        params: The parameters to optimize: an iterable of tensors, or of dicts that each hold a
            ``'params'`` entry and per-group options overriding the defaults.
        lr: Learning rate.
        betas: Coefficients ``(β1, β2)`` of the running averages of the gradient and of its square,
            each in ``[0, 1)``.
        eps: Added to the denominator for numerical stability.
        weight_decay: Decoupled weight decay coefficient.
        amsgrad: Use the AMSGrad variant (the maximum of the second-moment averages).
        maximize: Maximize the objective instead of minimizing it.
        foreach: ``None``/``True`` allows the fused multi-tensor kernel where the backend has one;
            ``False`` updates the parameters one by one.

    Raises:
        ValueError: If a hyper-parameter is out of range or of the wrong type, or ``params`` is
            empty.
        TypeError: If ``params`` is a single tensor or holds something other than tensors.
    """

    _decoupled = True

    def __init__(self, params: Iterable[Any], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None) -> None:
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, maximize=maximize, foreach=foreach)
