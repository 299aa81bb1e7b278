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

import math

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

    Args:
        module: The module holding the tensor.
        name: Name of the parameter.
        dim: The axis kept by the norm (``None``: one norm over the whole tensor).

    Returns:
        ``module``, modified in place.

    Raises:
        TypeError: If ``module`` is not a Module.
        ValueError: If ``name`` is not a tensor of ``module``.
        IndexError: If ``dim`` is out of range.
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

    Args:
        module: The module holding the tensor.
        name: Name of the parameter.
        n_power_iterations: Power-method steps per forward in training mode.
        eps: Guards the normalizations against division by zero.
        dim: The axis of the output channels (default: 1 for transposed convolutions, else 0).

    Returns:
        ``module``, modified in place.

    Raises:
        TypeError: If ``module`` is not a Module.
        ValueError: If ``name`` is not a tensor of ``module``.
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


# -- orthogonal -----------------------------------------------------------------------------------
_ORTH_MAPS = ("matrix_exp", "cayley", "householder")

# Padé [13/13] coefficients and the bound on the 1-norm up to which it is accurate in double
# precision (Higham, "The scaling and squaring method for the matrix exponential revisited",
# 2005); larger matrices are scaled by 2**-s first and squared s times afterwards.
_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0,
           129060195264000.0, 10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0,
           40840800.0, 960960.0, 16380.0, 182.0, 1.0)
_THETA13 = 5.371920351148152


def _mH(x: Tensor) -> Tensor:
    """The conjugate transpose of the last two axes."""
    t = vtl.matrix_transpose(x)
    return vtl.conj(t) if vtl.isdtype(x.dtype, "complex floating") else t


def _eye_like(x: Tensor, n: int) -> Tensor:
    return vtl.eye(n, dtype=x.dtype, device=x.device)


def _matrix_exp(a: Tensor) -> Tensor:
    """``exp(a)`` of (a batch of) square matrices by scaling and squaring with a Padé
    [13/13] approximant, differentiable through vtl's matmul and solve. The number of
    squarings depends on the largest 1-norm in the batch, read from the device (one
    synchronisation per call)."""
    n = a.shape[-1]
    norm = float(vtl.max(vtl.sum(vtl.abs(a), axis=-2)))
    s = max(0, math.ceil(math.log2(norm / _THETA13))) if norm > _THETA13 else 0
    if s:
        a = a / (2.0 ** s)
    b = _PADE13
    ident = vtl.broadcast_to(_eye_like(a, n), a.shape)
    a2 = a @ a
    a4 = a2 @ a2
    a6 = a4 @ a2
    u = a @ (a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2)
             + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * ident)
    v = a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 \
        + b[0] * ident
    r = vtl.linalg.solve(v - u, v + u)
    for _ in range(s):
        r = r @ r
    return r


def _householder_product(a: Tensor, tau: Tensor) -> Tensor:
    """The first ``k`` columns of ``H_1 H_2 ... H_k``, ``H_i = I - tau_i v_i v_i^H`` with
    ``v_i`` column ``i`` of ``a`` below the diagonal and 1 on it (PyTorch's
    ``linalg.householder_product``, LAPACK's ``orgqr``), written with vtl functions."""
    n, k = a.shape[-2], a.shape[-1]
    rows = vtl.arange(n, device=a.device)
    q = vtl.broadcast_to(vtl.eye(n, k, dtype=a.dtype, device=a.device), a.shape)
    for i in range(k - 1, -1, -1):
        col = a[..., :, i]
        v = vtl.where(rows > i, col, vtl.astype(rows == i, a.dtype))
        v = vtl.expand_dims(v, axis=-1)  # (..., n, 1)
        t = vtl.expand_dims(vtl.expand_dims(tau[..., i], axis=-1), axis=-1)
        q = q - t * (v @ (_mH(v) @ q))
    return q


def _geqrf(a: Tensor) -> tuple[Tensor, Tensor]:
    """LAPACK's ``geqrf`` (outside the graph): the Householder QR of ``a`` as ``R`` on and
    above the diagonal, the reflectors below it (unit first component implied), and their
    scalars ``tau`` (0 where a column needs no reflection)."""
    a = vtl.asarray(a, copy=True)
    n, k = a.shape[-2], a.shape[-1]
    taus = []
    rows = vtl.arange(n, device=a.device)
    for j in range(min(n, k)):
        x = a[..., :, j]
        below = vtl.astype(rows > j, a.dtype)
        alpha = x[..., j]
        xnorm = vtl.linalg.vector_norm(x * below, axis=-1)
        norm = vtl.sqrt(vtl.abs(alpha) ** 2 + xnorm ** 2)
        beta = vtl.where(alpha >= 0, -norm, norm)
        trivial = xnorm == 0
        safe_beta = vtl.where(trivial, vtl.ones_like(beta), beta)
        tau = vtl.where(trivial, vtl.zeros_like(beta), (beta - alpha) / safe_beta)
        scale = vtl.where(trivial, vtl.zeros_like(alpha), 1.0 / (alpha - safe_beta))
        v = x * below * vtl.expand_dims(scale, axis=-1) \
            + vtl.astype(rows == j, a.dtype)  # (..., n): 1 at j, reflector below
        # apply H = I - tau v v^H to the columns after j, then store R's entry and v
        vm = vtl.expand_dims(v, axis=-1)
        rest = a - vtl.expand_dims(vtl.expand_dims(tau, axis=-1), axis=-1) \
            * (vm @ (_mH(vm) @ a))
        cols = vtl.arange(k, device=a.device)
        newcol = vtl.where(rows < j, x, vtl.where(rows == j, vtl.expand_dims(
            vtl.where(trivial, alpha, beta), axis=-1), v))
        a = vtl.where(cols > j, rest, vtl.where(cols == j, vtl.expand_dims(newcol, axis=-1), a))
        taus.append(tau)
    return a, vtl.stack(taus, axis=-1)


def _is_orthogonal(q: Tensor) -> bool:
    n, k = q.shape[-2], q.shape[-1]
    eps = 10.0 * n * float(vtl.finfo(q.dtype).eps)
    return bool(vtl.all(vtl.abs(_mH(q) @ q - _eye_like(q, k)) <= eps))


def _make_orthogonal(a: Tensor) -> Tensor:
    """The ``Q`` of the QR decomposition of ``a`` whose ``R`` has a positive diagonal."""
    q, r = vtl.linalg.qr(a)
    d = vtl.linalg.diagonal(r)
    absd = vtl.abs(d)
    s = vtl.where(absd == 0, vtl.ones_like(d), d / vtl.where(absd == 0, vtl.ones_like(absd),
                                                              absd))
    return q * vtl.expand_dims(s, axis=-2)


class _Orthogonal(Module):
    def __init__(self, weight: Tensor, orthogonal_map: str, *,
                 use_trivialization: bool = True) -> None:
        super().__init__()
        if vtl.isdtype(weight.dtype, "complex floating") and orthogonal_map == "householder":
            raise ValueError("The householder parametrization does not support complex tensors.")
        self.shape = tuple(weight.shape)
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X: Tensor) -> Tensor:  # noqa: N803 - PyTorch's name
        n, k = X.shape[-2], X.shape[-1]
        transposed = n < k
        if transposed:
            X = vtl.matrix_transpose(X)
            n, k = k, n
        if self.orthogonal_map in ("matrix_exp", "cayley"):
            X = vtl.tril(X)
            if n != k:
                X = vtl.concat([X, vtl.zeros((*X.shape[:-2], n, n - k), dtype=X.dtype,
                                             device=X.device)], axis=-1)
            A = X - _mH(X)
            if self.orthogonal_map == "matrix_exp":
                Q = _matrix_exp(A)
            else:
                ident = _eye_like(A, n)
                Q = vtl.linalg.solve(ident - 0.5 * A, ident + 0.5 * A)
            if n != k:
                Q = Q[..., :k]
        else:
            A = vtl.tril(X, k=-1)
            tau = 2.0 / (1.0 + vtl.sum(A * A, axis=-2))
            Q = _householder_product(A, tau)
            sign = vtl.trunc(vtl.linalg.diagonal(X.detach()))  # PyTorch's .int()
            Q = Q * vtl.expand_dims(sign, axis=-2)
        if self.__dict__["_buffers"].get("base", _MISSING) is not _MISSING:
            Q = self.base @ Q
        if transposed:
            Q = vtl.matrix_transpose(Q)
        return Q

    def right_inverse(self, Q: Tensor) -> Tensor:  # noqa: N803 - PyTorch's name
        with vtl.no_grad():
            if tuple(Q.shape) != self.shape:
                raise ValueError(f"Expected a matrix or batch of matrices of shape "
                                 f"{self.shape}. Got a tensor of shape {tuple(Q.shape)}.")
            Q_init = Q  # noqa: N806
            n, k = Q.shape[-2], Q.shape[-1]
            transpose = n < k
            if transpose:
                Q = vtl.matrix_transpose(Q)
                n, k = k, n
            if "base" not in self.__dict__["_buffers"]:
                if self.orthogonal_map in ("cayley", "matrix_exp"):
                    raise NotImplementedError(
                        "It is not possible to assign to the matrix exponential or the Cayley "
                        "parametrizations when use_trivialization=False.")
                A, tau = _geqrf(Q)
                d = vtl.linalg.diagonal(A)
                sign = vtl.where(tau == 0, -vtl.sign(d), vtl.sign(d))
                diag = vtl.eye(n, k, dtype=vtl.bool, device=A.device)
                A = vtl.where(diag, vtl.expand_dims(sign, axis=-2), A)
                return vtl.matrix_transpose(A) if transpose else A
            if n == k:
                Q = vtl.asarray(Q, copy=True) if _is_orthogonal(Q) else _make_orthogonal(Q)
            else:
                N = vtl.random.normal(0.0, 1.0, (*Q.shape[:-2], n, n - k),  # noqa: N806
                                      dtype=Q.dtype, device=Q.device)
                Q = _make_orthogonal(vtl.concat([Q, N], axis=-1))
            self.base = Q
            neg_id = -vtl.broadcast_to(vtl.eye(Q_init.shape[-2], Q_init.shape[-1],
                                                dtype=Q_init.dtype, device=Q_init.device),
                                        Q_init.shape)
            return vtl.asarray(neg_id, copy=True)


_MISSING = object()


def orthogonal(module: Module, name: str = "weight", orthogonal_map: str | None = None, *,
               use_trivialization: bool = True) -> Module:
    r"""Make ``module.<name>`` (a matrix or a batch of matrices) orthogonal, or unitary for
    complex tensors: :math:`Q^H Q = I` (or :math:`Q Q^H = I` for wide matrices), as a
    parametrization (PyTorch's ``parametrizations.orthogonal``).

    ``orthogonal_map``: ``"matrix_exp"`` (the exponential of a skew-symmetric matrix; the
    default for square or complex matrices), ``"cayley"`` (the Cayley transform) or
    ``"householder"`` (a product of Householder reflectors; the default otherwise).
    ``use_trivialization=True`` (the default) keeps a buffer ``base``
    (``parametrizations.<name>.0.base``) that the map multiplies, so assigning an
    orthogonal matrix to ``module.<name>`` stores it there exactly. The current weight
    becomes the initial value (made orthogonal by a QR decomposition when it is not;
    completed with random columns from the default ``vtl.random`` generator when the
    matrix is not square). ``matrix_exp`` reads one scalar from the device per forward
    (its scaling); the others do not. Returns ``module``.

    Args:
        module: The module holding the tensor.
        name: Name of the parameter.
        orthogonal_map: ``'matrix_exp'``, ``'cayley'`` or ``'householder'`` (default: see above).
        use_trivialization: Keep the ``base`` buffer (see above).

    Returns:
        ``module``, modified in place.

    Raises:
        TypeError: If ``module`` is not a Module.
        ValueError: If ``name`` is not a tensor of ``module``, it is not a (batch of) matrices, or
            ``orthogonal_map`` is unknown.
    """
    if not isinstance(module, Module):
        raise TypeError(f"orthogonal() expects a vtl.nn.Module, got {type(module).__name__}")
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of "
                         f"{weight.ndim} dimensions.")
    if orthogonal_map is None:
        square = weight.shape[-2] == weight.shape[-1]
        orthogonal_map = "matrix_exp" if square or vtl.isdtype(weight.dtype, "complex floating") \
            else "householder"
    if orthogonal_map not in _ORTH_MAPS:
        raise ValueError('orthogonal_map has to be one of "matrix_exp", "cayley", '
                         f'"householder". Got: {orthogonal_map}')
    orth = _Orthogonal(weight, orthogonal_map, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module
