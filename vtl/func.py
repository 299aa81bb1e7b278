"""``vtl.func``: PyTorch's ``torch.func`` names for vtl's function transforms.

``grad``, ``vjp``, ``jvp`` and ``hessian`` are vtl's own (:mod:`vtl.autograd.functional`);
``jacrev`` and ``jacfwd`` both compute the Jacobian in reverse mode (one backward pass per
output element), so they give the same numbers as PyTorch's and differ only in cost;
``vmap`` calls the function once per batch element (:mod:`vtl.autograd.vmap`);
``functional_call`` runs a module with given parameters (:mod:`vtl.nn.utils.stateless`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .autograd.functional import grad, hessian, jacobian, jvp, value_and_grad, vjp
from .autograd.vmap import vmap
from .nn.utils.stateless import functional_call

__all__ = ["functional_call", "grad", "grad_and_value", "hessian", "jacfwd", "jacrev", "jvp",
           "vjp", "vmap"]


def grad_and_value(func: Callable, argnums: int | Sequence[int] = 0,
                   has_aux: bool = False) -> Callable:
    """``func`` -> a function returning ``(gradient, value)`` (``torch.func.grad_and_value``;
    with ``has_aux=True``: ``(gradient, (value, aux))``). The order is PyTorch's, the reverse
    of :func:`vtl.value_and_grad`."""
    vg = value_and_grad(func, argnums, has_aux)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        value, g = vg(*args, **kwargs)
        return g, value

    wrapped.__name__ = f"grad_and_value({getattr(func, '__name__', 'f')})"
    return wrapped


def jacrev(func: Callable, argnums: int | Sequence[int] = 0, *, has_aux: bool = False,
           chunk_size: int | None = None) -> Callable:
    """The Jacobian of ``func`` by reverse mode (``torch.func.jacrev``); see
    :func:`vtl.jacobian`. ``chunk_size`` is accepted for compatibility."""
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"jacrev: chunk_size must be None or a positive int, got {chunk_size!r}")
    return jacobian(func, argnums, has_aux)


def jacfwd(func: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False, *,
           randomness: str = "error") -> Callable:
    """The Jacobian of ``func`` (``torch.func.jacfwd``'s result). vtl computes it in reverse
    mode, like :func:`jacrev`: the same numbers, at the cost of one backward pass per output
    element instead of one forward pass per input element."""
    if randomness not in ("error", "different", "same"):
        raise ValueError(f"jacfwd: randomness must be 'error', 'different' or 'same', got "
                         f"{randomness!r}")
    return jacobian(func, argnums, has_aux)
