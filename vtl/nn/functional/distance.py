"""Distances and normalisation: ``normalize``, ``cosine_similarity``,
``pairwise_distance``, ``pdist`` and ``cdist`` with PyTorch's names, defaults and
formulas, written with standard array-API calls (differentiable on vtl tensors).

Where PyTorch clamps a norm from below (``normalize``'s and ``cosine_similarity``'s
``eps``), the clamp is ``maximum(norm, eps)``: below ``eps`` the norm is a constant,
so its gradient there is zero (PyTorch's ``cosine_similarity`` clamps outside autograd
and passes the gradient through). Above ``eps`` the two agree.
"""

from __future__ import annotations

from typing import Any

from ... import _autocast
from ._utils import namespace, normalize_dim

__all__ = ["cdist", "cosine_similarity", "normalize", "pairwise_distance", "pdist"]


def _check_float(xp: Any, x: Any, name: str, fname: str) -> None:
    if not xp.isdtype(x.dtype, "real floating"):
        raise TypeError(f"{fname}(): {name} must have a real floating dtype, got {x.dtype}")


def _check_p(p: float, fname: str) -> None:
    if isinstance(p, bool) or not isinstance(p, (int, float)) or p < 0:
        raise ValueError(f"{fname}(): p must be a non-negative number, got {p!r}")


def normalize(input: Any, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Any:  # noqa: A002
    """``input / max(||input||_p, eps)`` with the norm taken along ``dim``."""
    fname = "normalize"
    xp = namespace(input)
    _check_float(xp, input, "input", fname)
    _check_p(p, fname)
    axis = normalize_dim(dim, input.ndim, fname)
    if input.ndim == 0:
        raise ValueError(f"{fname}(): input must have at least 1 dimension, got a 0-D array")
    norm = xp.linalg.vector_norm(input, axis=axis, keepdims=True, ord=p)
    return input / xp.maximum(norm, eps)


def cosine_similarity(x1: Any, x2: Any, dim: int = 1, eps: float = 1e-8) -> Any:
    """Cosine of the angle between ``x1`` and ``x2`` along ``dim`` (they broadcast):
    ``sum(x1/max(||x1||, eps) * x2/max(||x2||, eps))``, PyTorch's stable form."""
    fname = "cosine_similarity"
    xp = namespace(x1, x2)
    _check_float(xp, x1, "x1", fname)
    _check_float(xp, x2, "x2", fname)
    ndim = max(x1.ndim, x2.ndim)
    if ndim == 0:
        raise ValueError(f"{fname}(): inputs must have at least 1 dimension, got 0-D arrays")
    try:
        shape = xp.broadcast_shapes(tuple(x1.shape), tuple(x2.shape))
    except ValueError:
        raise ValueError(f"{fname}(): x1 of shape {tuple(x1.shape)} and x2 of shape "
                         f"{tuple(x2.shape)} do not broadcast") from None
    axis = normalize_dim(dim, ndim, fname)
    a = xp.broadcast_to(x1, shape)
    b = xp.broadcast_to(x2, shape)
    na = xp.maximum(xp.linalg.vector_norm(a, axis=axis, keepdims=True), eps)
    nb = xp.maximum(xp.linalg.vector_norm(b, axis=axis, keepdims=True), eps)
    return xp.sum((a / na) * (b / nb), axis=axis)


def pairwise_distance(x1: Any, x2: Any, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> Any:
    """``||x1 - x2 + eps||_p`` along the last axis (the inputs broadcast)."""
    fname = "pairwise_distance"
    xp = namespace(x1, x2)
    _check_float(xp, x1, "x1", fname)
    _check_float(xp, x2, "x2", fname)
    _check_p(p, fname)
    if max(x1.ndim, x2.ndim) == 0:
        raise ValueError(f"{fname}(): inputs must have at least 1 dimension, got 0-D arrays")
    return xp.linalg.vector_norm(x1 - x2 + eps, axis=-1, keepdims=keepdim, ord=p)


_CDIST_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                "donot_use_mm_for_euclid_dist")


def _row_pairs(xp: Any, n: int, device: Any) -> tuple[Any, Any]:
    idx = xp.__array_namespace_info__().default_dtypes(device=device)["indexing"]
    rows = [i for i in range(n) for _ in range(i + 1, n)]
    cols = [j for i in range(n) for j in range(i + 1, n)]
    return (xp.asarray(rows, dtype=idx, device=device),
            xp.asarray(cols, dtype=idx, device=device))


def pdist(input: Any, p: float = 2.0) -> Any:  # noqa: A002
    """The ``p``-norm distances between the rows of an ``(N, M)`` input: the ``N(N-1)/2``
    pairs ``i < j`` in row-major order (SciPy's condensed form)."""
    fname = "pdist"
    xp = namespace(input)
    _check_float(xp, input, "input", fname)
    _check_p(p, fname)
    if input.ndim != 2:
        raise ValueError(f"{fname}(): input must be 2-D (N, M), got shape {tuple(input.shape)}")
    n = input.shape[0]
    if n < 2:
        return xp.zeros((0,), dtype=input.dtype, device=input.device)
    rows, cols = _row_pairs(xp, n, input.device)
    diff = xp.take(input, rows, axis=0) - xp.take(input, cols, axis=0)
    return xp.linalg.vector_norm(diff, axis=-1, ord=p)


def cdist(x1: Any, x2: Any, p: float = 2.0,
          compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Any:
    """The ``p``-norm distance between each row of ``x1`` (``(B..., P, M)``) and each row
    of ``x2`` (``(B..., R, M)``): shape ``(B..., P, R)``; batch axes broadcast.

    ``p=2`` uses ``|a|^2 + |b|^2 - 2 a.b`` through one matrix product with
    ``compute_mode='use_mm_for_euclid_dist'``, or by default when either side has more
    than 25 rows (``'use_mm_for_euclid_dist_if_necessary'``); ``'donot_use_mm_for_euclid_dist'``
    and other ``p`` take the direct differences.
    """
    fname = "cdist"
    xp = namespace(x1, x2)
    _check_float(xp, x1, "x1", fname)
    _check_float(xp, x2, "x2", fname)
    _check_p(p, fname)
    if x1.ndim < 2 or x2.ndim < 2:
        raise ValueError(f"{fname}(): x1 and x2 must be at least 2-D, got shapes "
                         f"{tuple(x1.shape)} and {tuple(x2.shape)}")
    if x1.shape[-1] != x2.shape[-1]:
        raise ValueError(f"{fname}(): x1 and x2 must have the same number of columns, got "
                         f"{x1.shape[-1]} and {x2.shape[-1]}")
    if compute_mode not in _CDIST_MODES:
        raise ValueError(f"{fname}(): compute_mode must be one of "
                         f"{', '.join(map(repr, _CDIST_MODES))}, got {compute_mode!r}")
    rows = max(x1.shape[-2], x2.shape[-2])
    if p == 2 and (compute_mode == "use_mm_for_euclid_dist"
                   or (compute_mode == _CDIST_MODES[0] and rows > 25)):
        sq1 = xp.sum(x1 * x1, axis=-1)[..., :, None]
        sq2 = xp.sum(x2 * x2, axis=-1)[..., None, :]
        d2 = sq1 + sq2 - 2.0 * xp.matmul(x1, xp.matrix_transpose(x2))
        d2 = xp.maximum(d2, 0.0)
        # sqrt has an infinite slope at 0: keep the coincident pairs' gradient at zero
        pos = d2 > 0
        return xp.where(pos, xp.sqrt(xp.where(pos, d2, 1.0)), 0.0)
    diff = x1[..., :, None, :] - x2[..., None, :, :]
    return xp.linalg.vector_norm(diff, axis=-1, ord=p)


# autocast (vtl.amp): the list each op belongs to
_autocast.apply(
    globals(),
    float32_ops=("cdist", "cosine_similarity", "normalize", "pairwise_distance", "pdist"),
)
