"""Portable update rules: one parameter at a time, on raw backend arrays.

Each function takes the raw arrays of one parameter (``p``), its gradient
(``g``) and its state, plus Python-float hyper-parameters, and returns the new
arrays (the optimizer writes them back). Only standard array-API functions of
``xp`` are used and no autograd graph is built, so the rules run on every
backend. The arithmetic and its order match PyTorch's documented algorithms
and the fused programs in ``_programs.py``.
"""

from __future__ import annotations

import math
from typing import Any


def sgd(xp: Any, p: Any, g: Any, buf: Any | None, *, lr: float, momentum: float,
        dampening: float, nesterov: bool, weight_decay: float,
        maximize: bool) -> tuple[Any, Any | None]:
    """SGD with optional momentum/Nesterov; returns ``(p, momentum_buffer)``."""
    if maximize:
        g = -g
    if weight_decay != 0:
        g = g + weight_decay * p
    if momentum != 0:
        if buf is None:
            buf = xp.asarray(g, copy=True)
        else:
            buf = momentum * buf + (1.0 - dampening) * g
        g = g + momentum * buf if nesterov else buf
    return p - lr * g, buf


def adam_scalars(step: int, *, lr: float, beta1: float, beta2: float,
                 weight_decay: float) -> dict[str, float]:
    """The per-step scalars of Adam/AdamW (bias corrections, step size)."""
    bc1 = 1.0 - beta1**step
    bc2 = 1.0 - beta2**step
    return {
        "step_size": lr / bc1,
        "bc2_sqrt": math.sqrt(bc2),
        "decay": 1.0 - lr * weight_decay,
    }


def adam(xp: Any, p: Any, g: Any, m: Any, v: Any, vmax: Any | None, *, step: int, lr: float,
         beta1: float, beta2: float, eps: float, weight_decay: float, decoupled: bool,
         amsgrad: bool, maximize: bool) -> tuple[Any, Any, Any, Any | None]:
    """Adam (``decoupled=False``, L2 penalty) or AdamW; returns ``(p, m, v, vmax)``.

    ``step`` is the step number after incrementing (1 on the first step).
    """
    s = adam_scalars(step, lr=lr, beta1=beta1, beta2=beta2, weight_decay=weight_decay)
    if maximize:
        g = -g
    if weight_decay != 0:
        if decoupled:
            p = p * s["decay"]
        else:
            g = g + weight_decay * p
    m = m + (1.0 - beta1) * (g - m)
    v = v * beta2 + (1.0 - beta2) * (g * g)
    if amsgrad:
        vmax = xp.maximum(vmax, v)
        denom = xp.sqrt(vmax) / s["bc2_sqrt"] + eps
    else:
        denom = xp.sqrt(v) / s["bc2_sqrt"] + eps
    return p - s["step_size"] * (m / denom), m, v, vmax


def rmsprop(xp: Any, p: Any, g: Any, sq: Any, ga: Any | None, buf: Any | None, *, lr: float,
            alpha: float, eps: float, weight_decay: float, momentum: float, centered: bool,
            maximize: bool) -> tuple[Any, Any, Any | None, Any | None]:
    """RMSprop; returns ``(p, square_avg, grad_avg, momentum_buffer)``."""
    if maximize:
        g = -g
    if weight_decay != 0:
        g = g + weight_decay * p
    sq = sq * alpha + (1.0 - alpha) * (g * g)
    if centered:
        ga = ga + (1.0 - alpha) * (g - ga)
        avg = xp.sqrt(sq - ga * ga) + eps
    else:
        avg = xp.sqrt(sq) + eps
    if momentum > 0:
        buf = buf * momentum + g / avg
        return p - lr * buf, sq, ga, buf
    return p - lr * (g / avg), sq, ga, buf


def adagrad_lr(step: int, *, lr: float, lr_decay: float) -> float:
    """Adagrad's decayed learning rate at ``step`` (1 on the first step)."""
    return lr / (1.0 + (step - 1) * lr_decay)


def adagrad(xp: Any, p: Any, g: Any, s: Any, *, step: int, lr: float, lr_decay: float,
            weight_decay: float, eps: float, maximize: bool) -> tuple[Any, Any]:
    """Adagrad; returns ``(p, sum)``."""
    if maximize:
        g = -g
    if weight_decay != 0:
        g = g + weight_decay * p
    clr = adagrad_lr(step, lr=lr, lr_decay=lr_decay)
    s = s + g * g
    std = xp.sqrt(s) + eps
    return p - clr * (g / std), s


def nadam_scalars(step: int, mu_product: float, *, lr: float, beta1: float, beta2: float,
                  momentum_decay: float, weight_decay: float) -> dict[str, float]:
    """The per-step scalars of NAdam: ``mu_product`` is the product of the momentum
    coefficients μ₁…μₜ including this step's (``step`` counts from 1)."""
    mu = nadam_mu(step, beta1=beta1, momentum_decay=momentum_decay)
    mu_next = nadam_mu(step + 1, beta1=beta1, momentum_decay=momentum_decay)
    mu_product_next = mu_product * mu_next
    return {
        "bc2": 1.0 - beta2**step,
        "cg": -lr * (1.0 - mu) / (1.0 - mu_product),
        "cm": (-lr * mu_next) / (1.0 - mu_product_next),
        "decay": 1.0 - lr * weight_decay,
    }


def nadam_mu(step: int, *, beta1: float, momentum_decay: float) -> float:
    """NAdam's momentum coefficient μₜ (``step`` counts from 1)."""
    return beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))


def nadam(xp: Any, p: Any, g: Any, m: Any, v: Any, *, step: int, mu_product: float, lr: float,
          beta1: float, beta2: float, eps: float, weight_decay: float, momentum_decay: float,
          decoupled: bool, maximize: bool) -> tuple[Any, Any, Any]:
    """NAdam (PyTorch's algorithm; ``decoupled`` weight decay as in NAdamW); returns
    ``(p, m, v)``. ``mu_product`` already includes this step's μₜ."""
    s = nadam_scalars(step, mu_product, lr=lr, beta1=beta1, beta2=beta2,
                      momentum_decay=momentum_decay, weight_decay=weight_decay)
    if maximize:
        g = -g
    if weight_decay != 0:
        if decoupled:
            p = p * s["decay"]
        else:
            g = g + weight_decay * p
    m = m + (1.0 - beta1) * (g - m)
    v = v * beta2 + (1.0 - beta2) * (g * g)
    denom = xp.sqrt(v / s["bc2"]) + eps
    p = p + s["cg"] * g / denom
    p = p + s["cm"] * m / denom
    return p, m, v


def radam_scalars(step: int, *, lr: float, beta1: float, beta2: float,
                  weight_decay: float) -> dict[str, float]:
    """The per-step scalars of RAdam: bias corrections, the length of the approximated
    SMA ``rho_t`` and the rectification ``rect`` (``0.0`` while ``rho_t <= 5``)."""
    bc1 = 1.0 - beta1**step
    bc2 = 1.0 - beta2**step
    rho_inf = 2 / (1 - beta2) - 1
    rho_t = rho_inf - 2 * step * (beta2**step) / bc2
    rect = 0.0
    if rho_t > 5.0:
        rect = ((rho_t - 4) * (rho_t - 2) * rho_inf
                / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
    return {"bc1": bc1, "bc2": bc2, "rho_t": rho_t, "rect": rect, "lr": lr,
            "decay": 1.0 - lr * weight_decay,
            # the fused program's form: one rule for both phases
            "rc": rect * math.sqrt(bc2), "un": 0.0 if rho_t > 5.0 else 1.0}


def radam(xp: Any, p: Any, g: Any, m: Any, v: Any, *, step: int, lr: float, beta1: float,
          beta2: float, eps: float, weight_decay: float, decoupled: bool,
          maximize: bool) -> tuple[Any, Any, Any]:
    """RAdam (PyTorch's algorithm; ``decoupled`` weight decay as in RAdamW); returns
    ``(p, m, v)``."""
    s = radam_scalars(step, lr=lr, beta1=beta1, beta2=beta2, weight_decay=weight_decay)
    if maximize:
        g = -g
    if weight_decay != 0:
        if decoupled:
            p = p * s["decay"]
        else:
            g = g + weight_decay * p
    m = m + (1.0 - beta1) * (g - m)
    v = v * beta2 + (1.0 - beta2) * (g * g)
    mhat = m / s["bc1"]
    if s["rho_t"] > 5.0:
        adaptive = math.sqrt(s["bc2"]) / (xp.sqrt(v) + eps)
        return p - mhat * lr * adaptive * s["rect"], m, v
    return p - mhat * lr, m, v


def adamax(xp: Any, p: Any, g: Any, m: Any, u: Any, *, step: int, lr: float, beta1: float,
           beta2: float, eps: float, weight_decay: float,
           maximize: bool) -> tuple[Any, Any, Any]:
    """Adamax (the infinity-norm Adam); returns ``(p, exp_avg, exp_inf)``."""
    if maximize:
        g = -g
    if weight_decay != 0:
        g = g + weight_decay * p
    m = m + (1.0 - beta1) * (g - m)
    u = xp.maximum(u * beta2, xp.abs(g) + eps)
    clr = lr / (1.0 - beta1**step)
    return p + (-clr) * m / u, m, u
