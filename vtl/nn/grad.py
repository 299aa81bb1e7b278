"""``vtl.nn.grad``: gradients of the convolutions with respect to their input and weight
(PyTorch's ``torch.nn.grad``).

``convNd_input(input_size, weight, grad_output, ...)`` is the vector-Jacobian product of
``convNd`` with respect to an input of shape ``input_size``; ``convNd_weight(input,
weight_size, grad_output, ...)`` the one with respect to a weight of shape
``weight_size``. Both come from autograd through the convolution (it is linear in each
argument, so the point it is taken at does not matter) and are differentiable when
``weight``/``input`` or ``grad_output`` require grad.
"""

from __future__ import annotations

from typing import Any

import vtl

from .. import autograd
from ..autograd.grad_mode import enable_grad
from . import functional as F

__all__ = ["conv1d_input", "conv1d_weight", "conv2d_input", "conv2d_weight", "conv3d_input",
           "conv3d_weight"]

_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}


def _vjp(nsp: int, wrt: str, given: Any, size: Any, grad_output: Any, stride: Any,
         padding: Any, dilation: Any, groups: int) -> Any:
    fname = f"conv{nsp}d_{wrt}"
    for name, t in (("grad_output", grad_output), ("input" if wrt == "weight" else "weight",
                                                   given)):
        if not isinstance(t, vtl.Tensor):
            raise TypeError(f"{fname}(): expected {name} to be a vtl.Tensor, got "
                            f"{type(t).__name__}")
    try:
        shape = tuple(int(s) for s in size)
    except TypeError:
        raise TypeError(f"{fname}(): expected a sequence of ints as the {wrt} size, got "
                        f"{size!r}") from None
    z = vtl.zeros(shape, dtype=given.dtype, device=given.device, requires_grad=True)
    with enable_grad():
        x, w = (z, given) if wrt == "input" else (given, z)
        y = _CONV[nsp](x, w, None, stride, padding, dilation, groups)
    if tuple(y.shape) != tuple(grad_output.shape):
        raise ValueError(f"{fname}(): grad_output has shape {tuple(grad_output.shape)} but the "
                         f"convolution gives {tuple(y.shape)}")
    need = given.requires_grad or grad_output.requires_grad
    return autograd.grad(y, z, grad_output, create_graph=need)[0]


def conv1d_input(input_size: Any, weight: Any, grad_output: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Any:
    """Gradient of :func:`~vtl.nn.functional.conv1d` with respect to its input."""
    return _vjp(1, "input", weight, input_size, grad_output, stride, padding, dilation, groups)


def conv1d_weight(input: Any, weight_size: Any, grad_output: Any, stride: Any = 1,  # noqa: A002
                  padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Any:
    """Gradient of :func:`~vtl.nn.functional.conv1d` with respect to its weight."""
    return _vjp(1, "weight", input, weight_size, grad_output, stride, padding, dilation, groups)


def conv2d_input(input_size: Any, weight: Any, grad_output: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Any:
    """Gradient of :func:`~vtl.nn.functional.conv2d` with respect to its input."""
    return _vjp(2, "input", weight, input_size, grad_output, stride, padding, dilation, groups)


def conv2d_weight(input: Any, weight_size: Any, grad_output: Any, stride: Any = 1,  # noqa: A002
                  padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Any:
    """Gradient of :func:`~vtl.nn.functional.conv2d` with respect to its weight."""
    return _vjp(2, "weight", input, weight_size, grad_output, stride, padding, dilation, groups)


def conv3d_input(input_size: Any, weight: Any, grad_output: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Any:
    """Gradient of :func:`~vtl.nn.functional.conv3d` with respect to its input."""
    return _vjp(3, "input", weight, input_size, grad_output, stride, padding, dilation, groups)


def conv3d_weight(input: Any, weight_size: Any, grad_output: Any, stride: Any = 1,  # noqa: A002
                  padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Any:
    """Gradient of :func:`~vtl.nn.functional.conv3d` with respect to its weight."""
    return _vjp(3, "weight", input, weight_size, grad_output, stride, padding, dilation, groups)
