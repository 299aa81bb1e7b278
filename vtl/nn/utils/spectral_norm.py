"""Spectral normalization as a forward pre-hook (PyTorch's ``torch.nn.utils.spectral_norm``).

``spectral_norm(module)`` replaces the parameter ``weight`` by ``weight_orig`` and keeps
two buffers, ``weight_u`` and ``weight_v``: estimates of the leading left and right
singular vectors of the weight (as a matrix, ``dim`` first). Before every forward a pre-hook
sets ``module.weight = weight_orig / sigma`` with ``sigma = u . (W v)``; in training mode it
first runs ``n_power_iterations`` steps of the power method, updating ``weight_u`` and
``weight_v`` in place (Miyato et al., 2018). :func:`vtl.nn.utils.parametrizations.spectral_norm`
is the parametrization form.
"""

from __future__ import annotations

from typing import Any, TypeVar

import vtl

from ..._tensor import Tensor
from ..modules.module import Module, Parameter

__all__ = ["SpectralNorm", "remove_spectral_norm", "spectral_norm"]

T_module = TypeVar("T_module", bound=Module)


def _normalize(x: Tensor, eps: float) -> Tensor:
    """``x / max(||x||_2, eps)`` for a 1-D ``x`` (PyTorch's ``F.normalize(x, dim=0)``)."""
    return x / vtl.clip(vtl.linalg.vector_norm(x), min=eps)


def _mv(a: Tensor, x: Tensor) -> Tensor:
    return vtl.matmul(a, x)


def _conj_t(a: Tensor) -> Tensor:
    """The conjugate transpose of a matrix (the transpose of a real one)."""
    t = vtl.matrix_transpose(a)
    return vtl.conj(t) if vtl.isdtype(a.dtype, "complex floating") else t


def reshape_weight_to_matrix(weight: Tensor, dim: int) -> Tensor:
    """``weight`` as a matrix with axis ``dim`` first and the others flattened."""
    if dim != 0:
        weight = vtl.permute_dims(weight, (dim, *[d for d in range(weight.ndim) if d != dim]))
    return vtl.reshape(weight, (weight.shape[0], -1))


def _default_dim(module: Module) -> int:
    from ..modules.conv import _ConvTranspose

    return 1 if isinstance(module, _ConvTranspose) else 0


def _check_args(n_power_iterations: Any, eps: Any, fname: str) -> None:
    if isinstance(n_power_iterations, bool) or not isinstance(n_power_iterations, int) \
            or n_power_iterations <= 0:
        raise ValueError("Expected n_power_iterations to be positive, but got "
                         f"n_power_iterations={n_power_iterations}")
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or eps < 0:
        raise ValueError(f"{fname}(): eps must be a number >= 0, got {eps!r}")


class SpectralNorm:
    """The forward pre-hook of :func:`spectral_norm` (one per normalized tensor)."""

    _version: int = 1
    name: str
    dim: int
    n_power_iterations: int
    eps: float

    def __init__(self, name: str = "weight", n_power_iterations: int = 1, dim: int = 0,
                 eps: float = 1e-12) -> None:
        _check_args(n_power_iterations, eps, "spectral_norm")
        self.name = name
        self.dim = dim
        self.n_power_iterations = n_power_iterations
        self.eps = float(eps)

    def reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        return reshape_weight_to_matrix(weight, self.dim)

    def compute_weight(self, module: Module, do_power_iteration: bool) -> Tensor:
        """``weight_orig / sigma``; with ``do_power_iteration`` the power method first
        updates ``weight_u`` and ``weight_v`` in place (outside the graph)."""
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        weight_mat = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            with vtl.no_grad():
                wm = weight_mat.detach()
                for _ in range(self.n_power_iterations):
                    v[...] = _normalize(_mv(_conj_t(wm), u), self.eps)
                    u[...] = _normalize(_mv(wm, v), self.eps)
        # copies: the next power iteration writes into the buffers, and the graph of
        # sigma must keep the vectors it was computed with
        u = vtl.asarray(u, copy=True)
        v = vtl.asarray(v, copy=True)
        sigma = vtl.vecdot(u, _mv(weight_mat, v))
        return weight / sigma

    def remove(self, module: Module) -> None:
        with vtl.no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        delattr(module, self.name)
        delattr(module, self.name + "_u")
        delattr(module, self.name + "_v")
        delattr(module, self.name + "_orig")
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module: Module, inputs: Any) -> None:
        setattr(module, self.name,
                self.compute_weight(module, do_power_iteration=module.training))

    @staticmethod
    def apply(module: Module, name: str, n_power_iterations: int, dim: int,
              eps: float) -> SpectralNorm:
        if not isinstance(module, Module):
            raise TypeError(f"spectral_norm() expects a vtl.nn.Module, got "
                            f"{type(module).__name__}")
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, SpectralNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two spectral_norm hooks on the same "
                                   f"parameter {name}")
        if name not in module._parameters:
            raise ValueError(f"spectral_norm(): {type(module).__name__} has no parameter named "
                             f"{name!r}")
        weight = module._parameters[name]
        if weight is None:
            raise ValueError(f"`SpectralNorm` cannot be applied as parameter `{name}` is None")
        if weight.ndim < 1 or not -weight.ndim <= dim < weight.ndim:
            raise IndexError(f"spectral_norm(): dim {dim} is out of range for the "
                             f"{weight.ndim}-D parameter {name!r}")
        fn = SpectralNorm(name, n_power_iterations, dim % weight.ndim, eps)
        with vtl.no_grad():
            h, w = fn.reshape_weight_to_matrix(weight).shape
            gen = vtl.random.default_generator()
            u = _normalize(gen.normal(0.0, 1.0, (h,), dtype=weight.dtype,
                                      device=weight.device), fn.eps)
            v = _normalize(gen.normal(0.0, 1.0, (w,), dtype=weight.dtype,
                                      device=weight.device), fn.eps)
        delattr(module, fn.name)
        module.register_parameter(fn.name + "_orig", weight)
        setattr(module, fn.name, weight.detach())
        module.register_buffer(fn.name + "_u", u)
        module.register_buffer(fn.name + "_v", v)
        module.register_forward_pre_hook(fn)
        return fn


def spectral_norm(module: T_module, name: str = "weight", n_power_iterations: int = 1,
                  eps: float = 1e-12, dim: int | None = None) -> T_module:
    r"""Apply spectral normalization to the parameter ``name`` of ``module``:
    :math:`W_{SN} = W / \sigma(W)`, with :math:`\sigma` the largest singular value of
    the weight as a matrix (axis ``dim`` first, the others flattened), estimated by the
    power method.

    The parameter becomes ``name + '_orig'``; the buffers ``name + '_u'`` and
    ``name + '_v'`` hold the singular-vector estimates, drawn at random (from the default
    ``vtl.random`` generator) and normalized here; ``state_dict`` keys are those of
    PyTorch (``weight_orig``, ``weight_u``, ``weight_v``). Before every forward a
    pre-hook recomputes ``module.<name>``; in training mode it first runs
    ``n_power_iterations`` power-method steps, updating ``weight_u``/``weight_v`` in
    place, in eval mode it uses them as they are. ``dim`` defaults to 1 for transposed
    convolutions and 0 otherwise; ``eps`` guards the normalizations. Returns ``module``.

    Args:
        module: The module holding the tensor.
        name: Name of the parameter.
        n_power_iterations: Power-method steps per forward in training mode.
        eps: Guards the normalizations against division by zero.
        dim: The axis of the output channels (default: 1 for transposed convolutions, else 0).

    Returns:
        ``module``, modified in place.
    """
    if dim is None:
        dim = _default_dim(module)
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module: T_module, name: str = "weight") -> T_module:
    """Undo :func:`spectral_norm`: ``name`` becomes a plain parameter holding the current
    normalized weight (computed with the stored ``u`` and ``v``, no power iteration).
    ``ValueError`` if ``module`` has no spectral norm on ``name``.

    Args:
        module: The module holding the tensor.
        name: Name of the parameter.

    Returns:
        ``module``, modified in place.

    Raises:
        ValueError: If ``module`` has no spectral norm on ``name``.
    """
    hooks = module._forward_pre_hooks
    for k, hook in list(hooks.items()):
        if isinstance(hook, SpectralNorm) and hook.name == name:
            hook.remove(module)
            del hooks[k]
            return module
    raise ValueError(f"spectral_norm of '{name}' not found in {module}")
