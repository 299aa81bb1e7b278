"""Weight normalization as a forward pre-hook (PyTorch's ``torch.nn.utils.weight_norm``).

``weight_norm(module, "weight", dim=0)`` replaces the parameter ``weight`` by a magnitude
``weight_g`` and a direction ``weight_v`` (both :class:`~vtl.nn.Parameter`, so
``state_dict`` has the keys ``weight_g`` and ``weight_v``) and recomputes
``module.weight = weight_g * weight_v / ||weight_v||`` before every forward (Salimans &
Kingma, 2016). :func:`vtl.nn.utils.parametrizations.weight_norm` is the parametrization
form of the same reparameterization.
"""

from __future__ import annotations

from typing import Any, TypeVar

import vtl

from ..._tensor import Tensor
from ..modules.module import Module, Parameter

__all__ = ["WeightNorm", "remove_weight_norm", "weight_norm"]

T_module = TypeVar("T_module", bound=Module)


def norm_except_dim(v: Tensor, pow: float = 2, dim: int = 0) -> Tensor:  # noqa: A002
    """The ``pow``-norm of ``v`` over every axis but ``dim``, keeping those axes as size 1
    (PyTorch's ``torch.norm_except_dim``); ``dim=-1`` is the norm of the whole tensor (a 0-d
    tensor), as in PyTorch (it does not mean the last axis here)."""
    if dim == -1:
        return vtl.linalg.vector_norm(v, ord=pow)
    if v.ndim == 0:
        raise IndexError(f"norm_except_dim(): dim {dim} is out of range for a 0-d tensor")
    if not -v.ndim <= dim < v.ndim:
        raise IndexError(f"norm_except_dim(): dim {dim} is out of range for a {v.ndim}-D tensor")
    dim %= v.ndim
    axes = tuple(a for a in range(v.ndim) if a != dim)
    if not axes:  # a 1-D tensor: the norm of each single element
        return vtl.abs(v) if pow != 0 else vtl.astype(v != 0, v.dtype)
    return vtl.linalg.vector_norm(v, ord=pow, axis=axes, keepdims=True)


def _weight_norm(v: Tensor, g: Tensor, dim: int) -> Tensor:
    """``v * (g / norm_except_dim(v, 2, dim))`` (PyTorch's ``torch._weight_norm``)."""
    return v * (g / norm_except_dim(v, 2, dim))


class WeightNorm:
    """The forward pre-hook of :func:`weight_norm` (one per reparameterized tensor)."""

    name: str
    dim: int

    def __init__(self, name: str, dim: int | None) -> None:
        self.name = name
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module: Module) -> Tensor:
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        return _weight_norm(v, g, self.dim)

    @staticmethod
    def apply(module: Module, name: str, dim: int | None) -> WeightNorm:
        if not isinstance(module, Module):
            raise TypeError(f"weight_norm() expects a vtl.nn.Module, got {type(module).__name__}")
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two weight_norm hooks on the same "
                                   f"parameter {name}")
        weight = module._parameters.get(name)
        if weight is None:
            raise ValueError(f"weight_norm(): {type(module).__name__} has no parameter named "
                             f"{name!r}")
        fn = WeightNorm(name, dim)
        if fn.dim != -1 and not -weight.ndim <= fn.dim < weight.ndim:
            raise IndexError(f"weight_norm(): dim {dim} is out of range for the {weight.ndim}-D "
                             f"parameter {name!r}")
        with vtl.no_grad():
            g = norm_except_dim(weight, 2, fn.dim)
        del module._parameters[name]
        module.register_parameter(name + "_g", Parameter(g.detach()))
        module.register_parameter(name + "_v", Parameter(weight.detach()))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module: Module) -> None:
        with vtl.no_grad():
            weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight.detach()))

    def __call__(self, module: Module, inputs: Any) -> None:
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module: T_module, name: str = "weight", dim: int | None = 0) -> T_module:
    r"""Apply weight normalization to the parameter ``name`` of ``module``:
    :math:`w = g \, v / \lVert v \rVert`.

    The parameter is replaced by ``name + '_g'`` (the magnitude: the norm of the weight
    over every axis but ``dim``, kept as size-1 axes) and ``name + '_v'`` (the direction:
    the weight itself), and ``module.<name>`` is recomputed from them by a forward
    pre-hook before every forward. ``dim=None`` (or ``-1``, as in PyTorch) takes one norm
    over the whole tensor (``weight_g`` is then 0-d). Returns ``module``.

    >>> m = weight_norm(vtl.nn.Linear(20, 40))
    >>> m.weight_g.shape, m.weight_v.shape
    ((40, 1), (40, 20))

    Args:
        module: The module holding the tensor.
        name: Name of the parameter.
        dim: The axis kept by the norm (``None`` or -1: one norm over the whole tensor).

    Returns:
        ``module``, modified in place.
    """
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module: T_module, name: str = "weight") -> T_module:
    """Undo :func:`weight_norm`: ``name`` becomes a plain parameter again, holding the
    current normalized weight. ``ValueError`` if ``module`` has no weight norm on ``name``.

    Args:
        module: The module holding the tensor.
        name: Name of the parameter.

    Returns:
        ``module``, modified in place.

    Raises:
        ValueError: If ``module`` has no weight norm on ``name``.
    """
    hooks = module._forward_pre_hooks
    for k, hook in list(hooks.items()):
        if isinstance(hook, WeightNorm) and hook.name == name:
            hook.remove(module)
            del hooks[k]
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")
