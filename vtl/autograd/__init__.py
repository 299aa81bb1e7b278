"""Reverse-mode automatic differentiation.

``Tensor.backward()`` accumulates into leaves' ``.grad``; :func:`grad`
returns gradients of outputs with respect to given tensors; the functional
transforms (``vtl.grad``, ``vjp``, ``jvp``, ``jacobian``, ``hessian``) live in
:mod:`vtl.autograd.functional`; custom ops subclass :class:`Function`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .anomaly import detect_anomaly, is_anomaly_enabled, set_detect_anomaly
from .function import Function, FunctionCtx
from .grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from .graph import Node, RemovableHandle, run_backward

if TYPE_CHECKING:
    from .._tensor import Tensor


def _as_seq(x: object) -> list:
    from .._tensor import Tensor

    if isinstance(x, Tensor):
        return [x]
    return list(x)  # type: ignore[call-overload]


def _root_grads(where: str, outs: list, gos: object) -> list:
    from .._tensor import _root_gradient

    gl = [None] * len(outs) if gos is None else _as_seq(gos)
    if len(gl) != len(outs):
        raise ValueError(f"{where}: got {len(gl)} gradient(s) for {len(outs)} tensor(s)")
    for i, o in enumerate(outs):
        if not o.requires_grad:
            raise RuntimeError(
                f"{where}: element {i} of the tensors does not require grad and has no "
                "grad_fn; it does not depend on any tensor created with requires_grad=True"
            )
    return [_root_gradient(o, g) for o, g in zip(outs, gl, strict=True)]


def backward(tensors: Tensor | Sequence[Tensor],
             grad_tensors: Tensor | Sequence[Tensor | None] | None = None,
             retain_graph: bool | None = None, create_graph: bool = False,
             inputs: Tensor | Sequence[Tensor] | None = None) -> None:
    """Accumulate the gradients of several roots into the leaves' ``.grad`` in one pass.

    Like ``torch.autograd.backward``: ``grad_tensors`` holds one gradient per
    root (``None`` for single-element roots); with ``inputs`` only those
    tensors (leaves or not) accumulate ``.grad``.

    Args:
        tensors: The roots: a tensor or a sequence of tensors.
        grad_tensors: The gradient of each root (``None`` for a single-element root).
        retain_graph: Keep the graph for another backward pass (default: ``create_graph``).
        create_graph: Record the backward pass, so that the gradients can be differentiated again.
        inputs: Only these tensors accumulate ``.grad`` (default: all leaves).

    Raises:
        RuntimeError: If the graph was freed by an earlier backward pass, or (with ``inputs``) an
            input does not require grad.
    """
    roots = _as_seq(tensors)
    grads = _root_grads("backward()", roots, grad_tensors)
    retain = create_graph if retain_graph is None else retain_graph
    if inputs is None:
        run_backward(roots, grads, retain, create_graph)
        return
    ins = _as_seq(inputs)
    res = run_backward(roots, grads, retain, create_graph, inputs=ins, allow_unused=True)
    for t, g in zip(ins, res or (), strict=True):
        if g is None:
            continue
        if not create_graph:
            g = g.detach()
        t.grad = g if t.grad is None else t.grad + g


def grad(outputs: Tensor | Sequence[Tensor], inputs: Tensor | Sequence[Tensor],
         grad_outputs: Tensor | Sequence[Tensor | None] | None = None,
         retain_graph: bool | None = None, create_graph: bool = False,
         allow_unused: bool | None = None,
         materialize_grads: bool = False) -> tuple[Tensor | None, ...]:
    """Gradients of ``outputs`` with respect to ``inputs`` (no ``.grad`` is touched).

    Like ``torch.autograd.grad``: ``inputs`` may be leaves or intermediate
    tensors; ``grad_outputs`` holds one gradient per output (``None`` for
    single-element outputs); ``create_graph=True`` makes the results
    differentiable (and retains the graph). An input the outputs do not depend
    on raises, unless ``allow_unused=True`` (its gradient is ``None``) or
    ``materialize_grads=True`` (zeros).

    Args:
        outputs: A tensor or a sequence of tensors.
        inputs: The tensors to differentiate with respect to.
        grad_outputs: The gradient of each output (``None`` for a single-element output).
        retain_graph: Keep the graph for another backward pass (default: ``create_graph``).
        create_graph: Record the backward pass, so that the gradients can be differentiated again.
        allow_unused: Give ``None`` for an input the outputs do not depend on, instead of raising
            (default: ``materialize_grads``).
        materialize_grads: Give zeros instead of ``None`` for unused inputs.

    Returns:
        A tuple with the gradient of each input.

    Raises:
        ValueError: If ``inputs`` is empty, or ``materialize_grads=True`` with
            ``allow_unused=False``.
        RuntimeError: If an input is unused (without ``allow_unused``) or does not require grad, or
            the graph was freed.

    Example:
        >>> x = vtl.asarray([1.0, 2.0], requires_grad=True)
        >>> (g,) = vtl.autograd.grad(vtl.sum(x ** 2), x)
        >>> g.tolist(), x.grad is None
        ([2.0, 4.0], True)
    """
    outs = _as_seq(outputs)
    ins = _as_seq(inputs)
    if not ins:
        raise ValueError("grad(): inputs is empty")
    if allow_unused is None:
        allow_unused = materialize_grads
    elif materialize_grads and not allow_unused:
        raise ValueError("grad(): materialize_grads=True needs allow_unused to be True or None")
    grads = _root_grads("grad()", outs, grad_outputs)
    res = list(run_backward(outs, grads, create_graph if retain_graph is None else retain_graph,
                            create_graph, inputs=ins, allow_unused=allow_unused) or ())
    if materialize_grads:
        from .._ops.creation import zeros_like

        res = [zeros_like(t) if g is None else g for g, t in zip(res, ins, strict=True)]
    return tuple(res)


__all__ = [
    "Function", "FunctionCtx", "Node", "RemovableHandle", "backward", "detect_anomaly",
    "enable_grad", "grad", "inference_mode", "is_anomaly_enabled", "is_grad_enabled", "no_grad",
    "set_detect_anomaly", "set_grad_enabled",
]
