"""Parameters as one flat vector and back (PyTorch's ``torch.nn.utils.convert_parameters``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import vtl

from ..._tensor import Tensor

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def _check_same_device(param: Any, device: Any, fname: str) -> Any:
    if not isinstance(param, Tensor):
        raise TypeError(f"{fname}(): expected an iterable of vtl tensors, got an element of "
                        f"type {type(param).__name__}")
    if device is not None and param.device != device:
        raise TypeError(f"{fname}(): Found two parameters on different devices ({device} and "
                        f"{param.device}), this is currently not supported.")
    return param.device


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """Flatten ``parameters`` (e.g. ``model.parameters()``) into one 1-D tensor, in order.

    The result is differentiable with respect to the parameters (a concatenation of
    their flattened views, promoted to a common dtype as ``vtl.concat`` does). All
    parameters must be on one device (``TypeError`` otherwise, as in PyTorch).

    Args:
        parameters: An iterable of tensors (e.g. ``model.parameters()``).

    Returns:
        A 1-D tensor.

    Raises:
        ValueError: If there are no parameters.
        TypeError: If the parameters are on different devices.
    """
    device = None
    flat = []
    for p in parameters:
        device = _check_same_device(p, device, "parameters_to_vector")
        flat.append(vtl.reshape(p, (-1,)))
    if not flat:
        raise ValueError("parameters_to_vector(): got no parameters")
    return vtl.concat(flat)


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Give each of ``parameters`` its slice of the 1-D tensor ``vec``, in order.

    As PyTorch's ``param.data = vec[i:j].view_as(param)``: each parameter object is kept
    (optimizers holding it stay valid) and takes the slice's data, shape and dtype,
    sharing storage with ``vec`` where the backend's slices are views; this happens
    outside the graph. ``vec`` must be 1-D with at least as many elements as the
    parameters hold (``ValueError`` otherwise, checked before any parameter changes).

    Args:
        vec: A 1-D tensor with as many elements as the parameters.
        parameters: An iterable of tensors.

    Raises:
        TypeError: If ``vec`` is not a tensor or is on another device.
        ValueError: If ``vec`` is not 1-D or its size differs.
    """
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected vtl.Tensor, but got: {type(vec).__name__}")
    if vec.ndim != 1:
        raise ValueError(f"vector_to_parameters(): vec must be 1-D, got shape {tuple(vec.shape)}")
    params = list(parameters)
    device = None
    total = 0
    for p in params:
        device = _check_same_device(p, device, "vector_to_parameters")
        total += p.size
    if device is not None and vec.device != device:
        raise TypeError(f"vector_to_parameters(): vec is on {vec.device}, the parameters on "
                        f"{device}")
    if total > vec.shape[0]:
        raise ValueError(f"vector_to_parameters(): the parameters hold {total} elements, vec "
                         f"has only {vec.shape[0]}")
    pointer = 0
    with vtl.no_grad():
        src = vec.detach()
        for p in params:
            n = p.size
            piece = vtl.reshape(src[pointer:pointer + n], p.shape)
            p._data = piece._data
            p._device = piece._device
            p._bump_version()
            pointer += n
