"""Built-in parametrizations (PyTorch's ``torch.nn.utils.parametrizations``), registered
with :func:`vtl.nn.utils.parametrize.register_parametrization`.

* :func:`weight_norm`: ``module.weight = g * v / ||v||`` from
  ``parametrizations.weight.original0`` (``g``) and ``original1`` (``v``);
* :func:`spectral_norm`: ``module.weight = W / sigma(W)`` from
  ``parametrizations.weight.original`` and the power-method buffers
  ``parametrizations.weight.0._u`` and ``._v``;
* :func:`orthogonal`: an orthogonal (or unitary) ``module.weight``.

The ``state_dict`` keys are PyTorch's.
"""

from __future__ import annotations

import vtl

from ..._tensor import Tensor
from ..modules.module import Module
from . import parametrize
from .spectral_norm import _check_args, _conj_t, _default_dim, _mv, _normalize
from .weight_norm import _weight_norm, norm_except_dim

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


class _WeightNorm(Module):
    def __init__(self, dim: int | None = 0) -> None:
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return _weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight: Tensor) -> tuple[Tensor, Tensor]:
        return norm_except_dim(weight, 2, self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    r"""Weight normalization as a parametrization: ``module.<name>`` becomes
    :math:`g \, v / \lVert v \rVert`, computed on every read, with the magnitude ``g``
    (``parametrizations.<name>.original0``: the norm over every axis but ``dim``) and the
    direction ``v`` (``original1``) as the parameters. ``dim=None`` takes one norm over
    the whole tensor. Remove it with
    ``parametrize.remove_parametrizations(module, name)``. Returns ``module``.

    Unlike PyTorch, loading a ``state_dict`` saved with the hook form
    (:func:`vtl.nn.utils.weight_norm`: keys ``weight_g``/``weight_v``) into a module
    parametrized this way is not converted automatically (rename the two keys to
    ``parametrizations.<name>.original0``/``original1``).
    """
    if not isinstance(module, Module):
        raise TypeError(f"weight_norm() expects a vtl.nn.Module, got {type(module).__name__}")
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is not None and dim != -1 and not -weight.ndim <= dim < weight.ndim:
        raise IndexError(f"weight_norm(): dim {dim} is out of range for the {weight.ndim}-D "
                         f"tensor {name!r}")
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module


class _SpectralNorm(Module):
    def __init__(self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0,
                 eps: float = 1e-12) -> None:
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [-{ndim}, "
                             f"{ndim - 1}] but got {dim})")
        _check_args(n_power_iterations, eps, "spectral_norm")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = float(eps)
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            weight_mat = self._reshape_weight_to_matrix(weight.detach())
            h, w = weight_mat.shape
            gen = vtl.random.default_generator()
            with vtl.no_grad():
                u = gen.normal(0.0, 1.0, (h,), dtype=weight.dtype, device=weight.device)
                v = gen.normal(0.0, 1.0, (w,), dtype=weight.dtype, device=weight.device)
                self.register_buffer("_u", _normalize(u, self.eps))
                self.register_buffer("_v", _normalize(v, self.eps))
            self._power_method(weight_mat, 15)

    def _reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        if self.dim != 0:
            weight = vtl.permute_dims(
                weight, (self.dim, *[d for d in range(weight.ndim) if d != self.dim]))
        return vtl.reshape(weight, (weight.shape[0], -1))

    def _power_method(self, weight_mat: Tensor, n_power_iterations: int) -> None:
        """``n_power_iterations`` steps of the power method, written into ``_u`` and ``_v``
        in place (outside the graph)."""
        with vtl.no_grad():
            wm = weight_mat.detach()
            for _ in range(n_power_iterations):
                self._u[...] = _normalize(_mv(wm, self._v), self.eps)
                self._v[...] = _normalize(_mv(_conj_t(wm), self._u), self.eps)

    def forward(self, weight: Tensor) -> Tensor:
        if weight.ndim == 1:
            return weight / vtl.clip(vtl.linalg.vector_norm(weight), min=self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        u = vtl.asarray(self._u, copy=True)
        v = vtl.asarray(self._v, copy=True)
        sigma = vtl.vecdot(u, _mv(weight_mat, v))
        return weight / sigma

    def right_inverse(self, value: Tensor) -> Tensor:
        return value


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1,
                  eps: float = 1e-12, dim: int | None = None) -> Module:
    r"""Spectral normalization as a parametrization: ``module.<name>`` becomes
    :math:`W / \sigma(W)`, computed on every read, with :math:`\sigma` the largest
    singular value of the weight as a matrix (axis ``dim`` first) estimated by the power
    method. The vectors ``u`` and ``v`` (buffers ``parametrizations.<name>.0._u`` and
    ``._v``) are drawn from the default ``vtl.random`` generator and refined by 15 power
    iterations here; each read in training mode runs ``n_power_iterations`` more (in
    place), in eval mode none. A 1-D tensor is divided by its norm. ``dim`` defaults to 1
    for transposed convolutions and 0 otherwise. Returns ``module``.
    """
    if not isinstance(module, Module):
        raise TypeError(f"spectral_norm() expects a vtl.nn.Module, got {type(module).__name__}")
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = _default_dim(module)
    parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module
