"""Reverse-mode automatic differentiation.

``Tensor.backward()`` accumulates into leaves' ``.grad``; :func:`grad`
returns gradients of outputs with respect to given tensors; the functional
transforms (``vtl.grad``, ``vjp``, ``jvp``, ``jacobian``, ``hessian``) live in
:mod:`vtl.autograd.functional`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .graph import Node, RemovableHandle, run_backward

if TYPE_CHECKING:
    from .._tensor import Tensor


def _as_seq(x: object) -> list:
    from .._tensor import Tensor

    if isinstance(x, Tensor):
        return [x]
    return list(x)  # type: ignore[call-overload]


def backward(tensors: Tensor | Sequence[Tensor], grad_tensors: Sequence[Tensor] | None = None,
             retain_graph: bool | None = None, create_graph: bool = False) -> None:
    """Accumulate gradients of ``tensors`` into the leaves (several roots at once)."""
    from .._tensor import _root_gradient

    roots = _as_seq(tensors)
    gs = [None] * len(roots) if grad_tensors is None else _as_seq(grad_tensors)
    for r in roots:
        if not r.requires_grad:
            raise RuntimeError("backward(): a root tensor does not require grad")
    grads = [_root_gradient(r, g) for r, g in zip(roots, gs, strict=True)]
    run_backward(roots, grads, create_graph if retain_graph is None else retain_graph,
                 create_graph)


def grad(outputs: Tensor | Sequence[Tensor], inputs: Tensor | Sequence[Tensor],
         grad_outputs: Tensor | Sequence[Tensor] | None = None,
         retain_graph: bool | None = None, create_graph: bool = False,
         allow_unused: bool = False) -> tuple[Tensor | None, ...]:
    """Gradients of ``outputs`` with respect to ``inputs`` (``.grad`` is left alone).

    Like ``torch.autograd.grad``: ``inputs`` may be leaves or intermediate
    tensors; ``create_graph=True`` makes the result differentiable.
    """
    from .._tensor import _root_gradient

    outs = _as_seq(outputs)
    ins = _as_seq(inputs)
    gos = [None] * len(outs) if grad_outputs is None else _as_seq(grad_outputs)
    for o in outs:
        if not o.requires_grad:
            raise RuntimeError(
                "grad(): an output does not require grad; it does not depend on any input "
                "that requires grad"
            )
    grads = [_root_gradient(o, g) for o, g in zip(outs, gos, strict=True)]
    res = run_backward(outs, grads, create_graph if retain_graph is None else retain_graph,
                       create_graph, inputs=ins, allow_unused=allow_unused)
    return tuple(res or ())


__all__ = [
    "Node", "RemovableHandle", "backward", "enable_grad", "grad", "is_grad_enabled",
    "no_grad", "set_grad_enabled",
]
