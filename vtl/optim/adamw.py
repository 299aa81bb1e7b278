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
    """

    _decoupled = True

    def __init__(self, params: Iterable[Any], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None) -> None:
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, maximize=maximize, foreach=foreach)
