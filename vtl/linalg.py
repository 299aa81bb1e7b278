"""``vtl.linalg``: the linear algebra extension of the array API standard (2024.12).

Every function works on stacks of matrices (leading batch axes) and calls the
backend's ``xp.linalg``; a backend whose namespace lacks the extension raises a
``RuntimeError`` naming the function. ``matmul``, ``matrix_transpose``,
``tensordot`` and ``vecdot`` are the main namespace's functions.

Inputs: the decompositions, ``det``/``slogdet``/``inv``/``solve``/
``matrix_power``/``matrix_rank``/``pinv`` and the norms need a floating-point
tensor (real or complex; integer and boolean tensors are a ``TypeError``, cast
with ``astype`` first); ``cross``/``outer``/``trace`` take any numeric tensor
and ``diagonal`` any tensor. ``cross`` takes a negative ``axis`` only, as the
standard says.

Gradients (PyTorch's conventions; complex tensors use the conjugate Wirtinger
derivative, so ``A^T`` becomes ``A^H`` in the rules):

* ``inv``, ``solve`` (both arguments, vector and batched right-hand sides),
  ``det``, ``slogdet`` (``logabsdet`` only; ``sign`` gets no gradient),
  ``matrix_power`` (negative powers through ``inv``), ``pinv``, ``trace``,
  ``diagonal``, ``outer``, ``cross``, ``vector_norm`` and ``matrix_norm`` with
  ``ord`` in ``'fro'``, ``1``, ``-1``, ``inf``, ``-inf`` accept real and complex
  inputs.
* ``cholesky``, ``qr``, ``eigh``, ``eigvalsh``, ``svd``, ``svdvals`` and
  ``matrix_norm`` with ``ord`` in ``'nuc'``, ``2``, ``-2`` differentiate real
  inputs only: recording them on a complex tensor that requires grad is a
  ``TypeError``.
* ``det``/``slogdet``/``inv``/``solve`` gradients use the inverse (or a
  solve), so backward at an exactly singular matrix raises the backend's
  ``LinAlgError`` (NumPy) or gives non-finite values (backends that do not
  check).
* ``cholesky``/``eigh``/``eigvalsh`` read one triangle of the input; their
  gradients are the symmetric ones (as PyTorch), which equal the derivative
  of ``f((A + A^T) / 2)``.
* ``eigh``/``svd`` gradients of the eigen-/singular vectors divide by
  differences of eigenvalues (squared singular values): repeated values give
  ``inf``/``nan``, as in PyTorch. Only gauge-invariant functions of the
  vectors have well-defined gradients.
* ``svd`` with ``full_matrices=True`` on a non-square matrix: gradients that
  reach ``U`` or ``Vh`` raise a ``RuntimeError`` (the extra columns are not
  unique); use ``full_matrices=False``. Gradients through ``S`` alone work.
* ``qr``: full-rank inputs; any shape in ``'reduced'`` mode. ``'complete'``
  mode with more rows than columns differentiates ``R`` only.
* ``pinv``: the rank must not change near the input (full-rank inputs).
* ``vector_norm``: ``ord=0`` is not differentiable (integer-valued); at the
  zero vector the gradient is zero; ``inf``/``-inf`` (and matrix ``1``/``inf``)
  share the gradient evenly between tied entries; matrix ``2``/``-2`` use the
  first singular vector pair when singular values tie.
"""

from __future__ import annotations

import math
import operator
from typing import Any, Literal, NamedTuple

import vtl as _vtl

from ._ops._core import (
    needs_grad,
    new,
    normalize_axes,
    record,
    record_multi,
    same_device,
    sum_to,
    tensor_arg,
)
from ._ops.linear_algebra import matmul, matrix_transpose, tensordot, vecdot
from ._tensor import Tensor
from .backends import Device
from .backends._dtypes import kind as _dkind

__all__ = [
    "EighResult", "QRResult", "SVDResult", "SlogdetResult",
    "cholesky", "cross", "det", "diagonal", "eigh", "eigvalsh", "inv", "matmul",
    "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "outer", "pinv",
    "qr", "slogdet", "solve", "svd", "svdvals", "tensordot", "trace", "vecdot",
    "vector_norm",
]


class EighResult(NamedTuple):
    eigenvalues: Tensor
    eigenvectors: Tensor


class QRResult(NamedTuple):
    Q: Tensor
    R: Tensor


class SlogdetResult(NamedTuple):
    sign: Tensor
    logabsdet: Tensor


class SVDResult(NamedTuple):
    U: Tensor
    S: Tensor
    Vh: Tensor


# -- helpers --------------------------------------------------------------------
def _lx(dev: Device, fname: str) -> Any:
    """The backend's ``xp.linalg.<fname>``; ``RuntimeError`` when it has none."""
    la = getattr(dev.xp, "linalg", None)
    fn = getattr(la, fname, None) if la is not None else None
    if fn is None:
        raise RuntimeError(
            f"linalg.{fname}(): the {dev.backend_name} backend's array namespace does not "
            "provide the linalg extension (xp.linalg." + fname + ")"
        )
    return fn


def _matrix(x: Any, fname: str, *, square: bool = False, kinds: str = "fc",
            argname: str = "x") -> Tensor:
    """Check that ``x`` is a stack of (square) matrices with a dtype of ``kinds``."""
    x = tensor_arg(x, f"linalg.{fname}", argname)
    if x.ndim < 2:
        raise ValueError(
            f"linalg.{fname}() needs {argname} with at least 2 dimensions (a stack of "
            f"matrices), got shape {x.shape}"
        )
    if square and x.shape[-1] != x.shape[-2]:
        raise ValueError(
            f"linalg.{fname}() needs square matrices (shape (..., M, M)), got shape {x.shape}"
        )
    _check_kind(x, fname, kinds, argname)
    return x


_KIND_NAMES = {"fc": "floating-point", "iufc": "numeric", "biufc": "numeric or boolean"}


def _check_kind(x: Tensor, fname: str, kinds: str, argname: str = "x") -> None:
    if _dkind(x.dtype) not in kinds:
        raise TypeError(
            f"linalg.{fname}() needs a {_KIND_NAMES[kinds]} tensor for {argname}, got "
            f"{x.dtype}" + ("; cast it with astype first" if kinds == "fc" else "")
        )


def _real_grad_only(x: Tensor, fname: str) -> None:
    if _dkind(x.dtype) == "c":
        raise TypeError(
            f"linalg.{fname}(): gradients for complex inputs are not supported; detach the "
            "tensor or differentiate its real and imaginary parts separately"
        )


def _H(x: Tensor) -> Tensor:
    """Conjugate transpose of the last two axes (plain transpose for real tensors)."""
    t = matrix_transpose(x)
    return _vtl.conj(t) if _dkind(t.dtype) == "c" else t


def _c(x: Tensor) -> Tensor:
    return _vtl.conj(x) if _dkind(x.dtype) == "c" else x


def _eye(n: int, m: int | None, like: Tensor, k: int = 0) -> Tensor:
    return _vtl.eye(n, m, k=k, dtype=like.dtype, device=like.device)


def _as_row(v: Tensor) -> Tensor:
    """``(..., k) -> (..., 1, k)``."""
    return _vtl.reshape(v, (*v.shape[:-1], 1, v.shape[-1]))


def _as_col(v: Tensor) -> Tensor:
    """``(..., k) -> (..., k, 1)``."""
    return _vtl.reshape(v, (*v.shape, 1))


def _diag_embed(v: Tensor) -> Tensor:
    """``(..., k) -> (..., k, k)`` with ``v`` on the diagonal."""
    return _as_row(v) * _eye(v.shape[-1], None, v)


def _mat_scalar(g: Tensor) -> Tensor:
    """``(...) -> (..., 1, 1)``, to scale a stack of matrices by per-matrix values."""
    return _vtl.reshape(g, (*g.shape, 1, 1))


# -- inverse, solve, determinants ------------------------------------------------
def inv(x: Tensor, /) -> Tensor:
    """Inverse of each square matrix in ``x`` (shape ``(..., M, M)``)."""
    x = _matrix(x, "inv", square=True)
    dev = x._device
    out = _lx(dev, "inv")(x._data)
    if needs_grad(x):
        def vjp(g: Tensor, out: Tensor) -> Tensor:
            h = _H(out)
            return _vtl.negative(matmul(matmul(h, g), h))

        return record(out, dev, "LinalgInvBackward", (x,), vjp, save_output=True)
    return new(out, dev)


def solve(x1: Tensor, x2: Tensor, /) -> Tensor:
    """Solve ``x1 @ out = x2``.

    ``x1`` has shape ``(..., M, M)``; a 1-D ``x2`` of shape ``(M,)`` is one
    right-hand side (result ``(..., M)``), otherwise ``x2`` has shape
    ``(..., M, K)`` with batch axes broadcasting against ``x1``'s.
    """
    x1 = _matrix(x1, "solve", square=True, argname="x1")
    x2 = tensor_arg(x2, "linalg.solve", "x2")
    _check_kind(x2, "solve", "fc", "x2")
    dev = same_device("linalg.solve", (x1, x2))
    m = x1.shape[-1]
    vec = x2.ndim == 1
    if x2.ndim == 0 or (x2.shape[0] if vec else x2.shape[-2]) != m:
        raise ValueError(
            f"linalg.solve(): x2 must have shape ({m},) or (..., {m}, K) to match x1 of "
            f"shape {x1.shape}, got {x2.shape}"
        )
    out = _solve_raw(dev, x1, x2, vec)
    if needs_grad(x1, x2):
        def vjp(g: Tensor, out: Tensor) -> tuple[Any, Any]:
            gm = _as_col(g) if vec else g
            gb = solve(_H(x1), gm)
            g1 = g2 = None
            if x1._requires_grad:
                xm = _as_col(out) if vec else out
                g1 = sum_to(_vtl.negative(matmul(gb, _H(xm))), x1)
            if x2._requires_grad:
                g2 = sum_to(_vtl.reshape(gb, gb.shape[:-1]) if vec else gb, x2)
            return g1, g2

        return record(out, dev, "LinalgSolveBackward", (x1, x2), vjp, saved=(x1, x2),
                      save_output=True)
    return new(out, dev)


def _batch_shape(s1: tuple[int, ...], s2: tuple[int, ...], fname: str) -> tuple[int, ...]:
    """Broadcast two batch shapes; ``ValueError`` naming ``fname`` when they clash."""
    nd = max(len(s1), len(s2))
    p1 = (1,) * (nd - len(s1)) + s1
    p2 = (1,) * (nd - len(s2)) + s2
    out = []
    for a, b in zip(p1, p2, strict=True):
        if a != b and a != 1 and b != 1:
            raise ValueError(
                f"linalg.{fname}(): batch shapes {s1} and {s2} do not broadcast"
            )
        out.append(b if a == 1 else a)
    return tuple(out)


def _solve_raw(dev: Device, x1: Tensor, x2: Tensor, vec: bool) -> Any:
    """Backend solve with the standard's broadcasting done here (CuPy does not
    broadcast batch axes; a 1-D ``x2`` becomes one column)."""
    xp = dev.xp
    m = x1.shape[-1]
    a, b = x1._data, x2._data
    ab = x1.shape[:-2]
    bb = () if vec else x2.shape[:-2]
    if vec:
        b = xp.reshape(b, (m, 1))
    if ab != bb:
        batch = _batch_shape(ab, bb, "solve")
        if ab != batch:
            a = xp.broadcast_to(a, (*batch, m, m))
        if bb != batch:
            b = xp.broadcast_to(b, (*batch, m, b.shape[-1]))
    out = _lx(dev, "solve")(a, b)
    return xp.reshape(out, out.shape[:-1]) if vec else out


def det(x: Tensor, /) -> Tensor:
    """Determinant of each square matrix (result shape ``(...)``).

    The gradient is ``g * conj(det) * inv(x)^H``: at an exactly singular
    matrix backward fails (NumPy's ``LinAlgError``) or is non-finite.
    """
    x = _matrix(x, "det", square=True)
    dev = x._device
    out = _lx(dev, "det")(x._data)
    if needs_grad(x):
        def vjp(g: Tensor, d: Tensor) -> Tensor:
            return _mat_scalar(g * _c(d)) * _H(inv(x))

        return record(out, dev, "LinalgDetBackward", (x,), vjp, saved=(x,), save_output=True)
    return new(out, dev)


def slogdet(x: Tensor, /) -> SlogdetResult:
    """Sign and natural log of the absolute determinant (``SlogdetResult``).

    Only ``logabsdet`` is differentiable (gradient ``g * inv(x)^H``).
    """
    x = _matrix(x, "slogdet", square=True)
    dev = x._device
    res = _lx(dev, "slogdet")(x._data)
    sign, logabs = res[0], res[1]
    if needs_grad(x):
        def vjp(gs: list, _: Any) -> Tensor | None:
            g = gs[1]
            if g is None:
                return None
            return sum_to(_mat_scalar(g) * _H(inv(x)), x)

        return SlogdetResult(*record_multi(
            (sign, logabs), dev, "LinalgSlogdetBackward", (x,), vjp, saved=(x,),
            differentiable=(False, True)))
    return SlogdetResult(new(sign, dev), new(logabs, dev))


def matrix_power(x: Tensor, n: int, /) -> Tensor:
    """``x`` raised to the integer power ``n`` (``n < 0`` inverts first; ``n = 0``: identity)."""
    x = _matrix(x, "matrix_power", square=True)
    if isinstance(n, bool) or not isinstance(n, int):
        try:
            n = operator.index(n)
        except TypeError:
            raise TypeError(
                f"linalg.matrix_power() needs an integer exponent n, got {type(n).__name__}"
            ) from None
    dev = x._device
    out = _lx(dev, "matrix_power")(x._data, n)
    if needs_grad(x):
        def vjp(g: Tensor, _: Any) -> Tensor:
            if n == 0:
                return _vtl.zeros_like(x)
            base = x if n > 0 else inv(x)
            k = abs(n)
            # powers[i] = base^i, i = 0..k-1
            powers = [None, base]
            for _i in range(2, k):
                powers.append(matmul(powers[-1], base))
            gb = None
            for i in range(k):
                left = g if i == 0 else matmul(_H(powers[i]), g)
                j = k - 1 - i
                term = left if j == 0 else matmul(left, _H(powers[j]))
                gb = term if gb is None else gb + term
            if n < 0:
                hb = _H(base)
                gb = _vtl.negative(matmul(matmul(hb, gb), hb))
            return sum_to(gb, x)

        return record(out, dev, "LinalgMatrixPowerBackward", (x,), vjp, saved=(x,))
    return new(out, dev)


def pinv(x: Tensor, /, *, rtol: float | Tensor | None = None) -> Tensor:
    """Moore-Penrose pseudo-inverse (singular values below ``rtol * max(S)`` are cut;
    default ``rtol = max(M, N) * eps``)."""
    x = _matrix(x, "pinv")
    dev = x._device
    rt = rtol._data if isinstance(rtol, Tensor) else rtol
    out = _lx(dev, "pinv")(x._data, rtol=rt)
    if needs_grad(x):
        def vjp(g: Tensor, p: Tensor) -> Tensor:
            # Golub & Pereyra: dP = -P dA P + P P^H dA^H (I - A P) + (I - P A) dA^H P^H P
            ph = _H(p)
            gh = _H(g)
            m, n = x.shape[-2], x.shape[-1]
            q = _eye(m, None, x) - matmul(x, p)
            r = _eye(n, None, x) - matmul(p, x)
            ga = _vtl.negative(matmul(matmul(ph, g), ph))
            ga = ga + matmul(matmul(q, gh), matmul(p, ph))
            ga = ga + matmul(matmul(ph, p), matmul(gh, r))
            return sum_to(ga, x)

        return record(out, dev, "LinalgPinvBackward", (x,), vjp, saved=(x,), save_output=True)
    return new(out, dev)


def matrix_rank(x: Tensor, /, *, rtol: float | Tensor | None = None) -> Tensor:
    """Number of singular values above ``rtol * max(S)`` (default ``max(M, N) * eps``);
    an integer tensor, not differentiable."""
    x = _matrix(x, "matrix_rank")
    dev = x._device
    rt = rtol._data if isinstance(rtol, Tensor) else rtol
    return new(_lx(dev, "matrix_rank")(x._data, rtol=rt), dev)


# -- decompositions -------------------------------------------------------------------
def cholesky(x: Tensor, /, *, upper: bool = False) -> Tensor:
    """Cholesky factor of each Hermitian positive-definite matrix: lower ``L`` with
    ``x = L L^H`` (or upper ``U`` with ``x = U^H U`` when ``upper=True``)."""
    x = _matrix(x, "cholesky", square=True)
    dev = x._device
    out = _lx(dev, "cholesky")(x._data, upper=upper)
    if needs_grad(x):
        _real_grad_only(x, "cholesky")

        def vjp(g: Tensor, out: Tensor) -> Tensor:
            el = matrix_transpose(out) if upper else out
            gl = matrix_transpose(g) if upper else g
            p = _vtl.tril(matmul(matrix_transpose(el), gl))
            s = (p + matrix_transpose(_vtl.tril(p, k=-1))) * 0.5
            li = inv(el)
            return matmul(matmul(matrix_transpose(li), s), li)

        return record(out, dev, "LinalgCholeskyBackward", (x,), vjp, save_output=True)
    return new(out, dev)


def _qr_tall_vjp(gq: Tensor | None, gr: Tensor | None, q: Tensor, r: Tensor) -> Tensor:
    """Gradient of reduced QR for ``m >= n`` (real)."""
    mm = None
    if gr is not None:
        mm = matmul(r, matrix_transpose(gr))
    if gq is not None:
        t = matmul(matrix_transpose(gq), q)
        mm = _vtl.negative(t) if mm is None else mm - t
    c = _vtl.tril(mm) + matrix_transpose(_vtl.tril(mm, k=-1))
    b = matmul(q, c)
    if gq is not None:
        b = b + gq
    return matmul(b, matrix_transpose(inv(r)))


def qr(x: Tensor, /, *, mode: Literal["reduced", "complete"] = "reduced") -> QRResult:
    """QR decomposition ``x = Q R`` (``QRResult``); ``mode`` is ``'reduced'`` or
    ``'complete'``."""
    x = _matrix(x, "qr")
    if mode not in ("reduced", "complete"):
        raise ValueError(f"linalg.qr(): mode must be 'reduced' or 'complete', got {mode!r}")
    dev = x._device
    res = _lx(dev, "qr")(x._data, mode=mode)
    q, r = res[0], res[1]
    if needs_grad(x):
        _real_grad_only(x, "qr")
        m, n = x.shape[-2], x.shape[-1]

        def vjp(gs: list, outs: tuple) -> Tensor | None:
            gq, gr = gs
            qq, rr = outs
            if gq is None and gr is None:
                return None
            if m >= n:
                if mode == "complete" and m > n:
                    if gq is not None:
                        raise RuntimeError(
                            "linalg.qr(): the gradient with respect to Q is not defined for "
                            "mode='complete' with more rows than columns; use mode='reduced'"
                        )
                    sel = _eye(n, m, x)
                    qq = matmul(qq, matrix_transpose(sel))
                    rr = matmul(sel, rr)
                    gr = matmul(sel, gr)
                return _qr_tall_vjp(gq, gr, qq, rr)
            # wide: x = [X | Y], R = [U | V] with X = Q U (square) and Y = Q V
            sx = _eye(n, m, x)
            sy = _eye(n, n - m, x, k=-m)
            y = matmul(x, sy)
            u = matmul(rr, sx)
            gu = gv = None
            if gr is not None:
                gu = matmul(gr, sx)
                gv = matmul(gr, sy)
            gq2 = gq
            if gv is not None:
                t = matmul(y, matrix_transpose(gv))
                gq2 = t if gq2 is None else gq2 + t
            gx = _qr_tall_vjp(gq2, gu, qq, u)
            ga = matmul(gx, matrix_transpose(sx))
            if gv is not None:
                ga = ga + matmul(matmul(qq, gv), matrix_transpose(sy))
            return ga

        return QRResult(*record_multi((q, r), dev, "LinalgQrBackward", (x,), vjp,
                                      saved=(x,), save_outputs=True))
    return QRResult(new(q, dev), new(r, dev))


def eigh(x: Tensor, /) -> EighResult:
    """Eigenvalues (ascending) and eigenvectors of symmetric/Hermitian matrices
    (``EighResult``); only the lower triangle is read."""
    x = _matrix(x, "eigh", square=True)
    dev = x._device
    res = _lx(dev, "eigh")(x._data)
    w, v = res[0], res[1]
    if needs_grad(x):
        _real_grad_only(x, "eigh")

        def vjp(gs: list, outs: tuple) -> Tensor | None:
            gw, gv = gs
            ww, vv = outs
            if gw is None and gv is None:
                return None
            vt = matrix_transpose(vv)
            if gv is None:
                inner = _diag_embed(gw)
            else:
                mm = matmul(vt, gv)
                skew = (mm - matrix_transpose(mm)) * 0.5
                e = _as_row(ww) - _as_col(ww) + _eye(ww.shape[-1], None, ww)
                inner = skew / e
                if gw is not None:
                    inner = inner + _diag_embed(gw)
            return matmul(matmul(vv, inner), vt)

        return EighResult(*record_multi((w, v), dev, "LinalgEighBackward", (x,), vjp,
                                        save_outputs=True))
    return EighResult(new(w, dev), new(v, dev))


def eigvalsh(x: Tensor, /) -> Tensor:
    """Eigenvalues (ascending) of symmetric/Hermitian matrices; only the lower triangle
    is read."""
    x = _matrix(x, "eigvalsh", square=True)
    dev = x._device
    out = _lx(dev, "eigvalsh")(x._data)
    if needs_grad(x):
        _real_grad_only(x, "eigvalsh")

        def vjp(g: Tensor, _: Any) -> Tensor:
            v = eigh(x).eigenvectors
            return matmul(v * _as_row(g), matrix_transpose(v))

        return record(out, dev, "LinalgEigvalshBackward", (x,), vjp, saved=(x,))
    return new(out, dev)


def _svd_vjp(gu: Tensor | None, gs: Tensor | None, gvh: Tensor | None, u: Tensor,
             s: Tensor, vh: Tensor, m: int, n: int) -> Tensor:
    """Gradient of the reduced SVD ``A = U diag(S) Vh`` (real; PyTorch's formula)."""
    k = s.shape[-1]
    if gu is None and gvh is None:
        return matmul(u * _as_row(gs), vh)
    srow, scol = _as_row(s), _as_col(s)
    s2 = s * s
    e = _as_row(s2) - _as_col(s2) + _eye(k, None, s)
    num = None
    if gu is not None:
        a = matmul(matrix_transpose(u), gu)
        num = (a - matrix_transpose(a)) * srow
    if gvh is not None:
        b = matmul(vh, matrix_transpose(gvh))
        t = scol * (b - matrix_transpose(b))
        num = t if num is None else num + t
    ga = num / e
    if gs is not None:
        ga = ga + _diag_embed(gs)
    if m > k and gu is not None:
        ga = matmul(u, ga)
        gus = gu / srow
        ga = ga + gus - matmul(u, matmul(matrix_transpose(u), gus))
        return matmul(ga, vh)
    if n > k and gvh is not None:
        ga = matmul(ga, vh)
        sgv = gvh / scol
        ga = ga + sgv - matmul(matmul(sgv, matrix_transpose(vh)), vh)
        return matmul(u, ga)
    return matmul(matmul(u, ga), vh)


def svd(x: Tensor, /, *, full_matrices: bool = True) -> SVDResult:
    """Singular value decomposition ``x = U diag(S) Vh`` (``SVDResult``; ``S``
    descending)."""
    x = _matrix(x, "svd")
    dev = x._device
    res = _lx(dev, "svd")(x._data, full_matrices=full_matrices)
    u, s, vh = res[0], res[1], res[2]
    if needs_grad(x):
        _real_grad_only(x, "svd")
        m, n = x.shape[-2], x.shape[-1]
        k = min(m, n)

        def vjp(gs: list, outs: tuple) -> Tensor | None:
            gu, gs_, gvh = gs
            uu, ss, vvh = outs
            if gu is None and gs_ is None and gvh is None:
                return None
            if full_matrices and m != n:
                if gu is not None or gvh is not None:
                    raise RuntimeError(
                        "linalg.svd(): gradients with respect to U or Vh are only defined "
                        "for full_matrices=False (or square matrices); got a matrix of shape "
                        f"{x.shape} with full_matrices=True"
                    )
                uu = matmul(uu, _eye(m, k, x))
                vvh = matmul(_eye(k, n, x), vvh)
            return _svd_vjp(gu, gs_, gvh, uu, ss, vvh, m, n)

        return SVDResult(*record_multi((u, s, vh), dev, "LinalgSvdBackward", (x,), vjp,
                                       saved=(x,), save_outputs=True))
    return SVDResult(new(u, dev), new(s, dev), new(vh, dev))


def svdvals(x: Tensor, /) -> Tensor:
    """Singular values (descending) of each matrix, shape ``(..., min(M, N))``."""
    x = _matrix(x, "svdvals")
    dev = x._device
    out = _lx(dev, "svdvals")(x._data)
    if needs_grad(x):
        _real_grad_only(x, "svdvals")

        def vjp(g: Tensor, _: Any) -> Tensor:
            u, _s, vh = svd(x, full_matrices=False)
            return matmul(u * _as_row(g), vh)

        return record(out, dev, "LinalgSvdvalsBackward", (x,), vjp, saved=(x,))
    return new(out, dev)


# -- products, diagonal, trace ------------------------------------------------------
def outer(x1: Tensor, x2: Tensor, /) -> Tensor:
    """Outer product of two 1-D tensors, shape ``(N, M)``."""
    x1 = tensor_arg(x1, "linalg.outer", "x1")
    x2 = tensor_arg(x2, "linalg.outer", "x2")
    if x1.ndim != 1 or x2.ndim != 1:
        raise ValueError(
            f"linalg.outer() needs two 1-D tensors, got shapes {x1.shape} and {x2.shape}"
        )
    _check_kind(x1, "outer", "iufc", "x1")
    _check_kind(x2, "outer", "iufc", "x2")
    dev = same_device("linalg.outer", (x1, x2))
    out = _lx(dev, "outer")(x1._data, x2._data)
    if needs_grad(x1, x2):
        def vjp(g: Tensor, _: Any) -> tuple[Any, Any]:
            g1 = sum_to(matmul(g, _c(x2)), x1) if x1._requires_grad else None
            g2 = sum_to(matmul(matrix_transpose(g), _c(x1)), x2) if x2._requires_grad else None
            return g1, g2

        return record(out, dev, "LinalgOuterBackward", (x1, x2), vjp, saved=(x1, x2))
    return new(out, dev)


def cross(x1: Tensor, x2: Tensor, /, *, axis: int = -1) -> Tensor:
    """Cross product of 3-element vectors along ``axis`` (negative, counted from the
    end; the other axes broadcast)."""
    x1 = tensor_arg(x1, "linalg.cross", "x1")
    x2 = tensor_arg(x2, "linalg.cross", "x2")
    _check_kind(x1, "cross", "iufc", "x1")
    _check_kind(x2, "cross", "iufc", "x2")
    dev = same_device("linalg.cross", (x1, x2))
    nd = min(x1.ndim, x2.ndim)
    if nd == 0:
        raise ValueError("linalg.cross() needs tensors with at least 1 dimension, got a 0-d one")
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise TypeError(f"linalg.cross(): axis must be an int, got {type(axis).__name__}")
    if axis >= 0:
        raise ValueError(
            f"linalg.cross(): axis must be negative (counted from the last axis), got {axis}"
        )
    if axis < -nd:
        raise IndexError(
            f"linalg.cross(): axis {axis} is out of bounds for tensors of {x1.ndim} and "
            f"{x2.ndim} dimensions"
        )
    if x1.shape[axis] != 3 or x2.shape[axis] != 3:
        raise ValueError(
            f"linalg.cross(): axis {axis} must have size 3 in both tensors, got shapes "
            f"{x1.shape} and {x2.shape}"
        )
    try:
        out = _lx(dev, "cross")(x1._data, x2._data, axis=axis)
    except ValueError as exc:
        raise ValueError(
            f"linalg.cross(): shapes {x1.shape} and {x2.shape} do not broadcast: {exc}"
        ) from None
    if needs_grad(x1, x2):
        def vjp(g: Tensor, _: Any) -> tuple[Any, Any]:
            g1 = sum_to(cross(_c(x2), g, axis=axis), x1) if x1._requires_grad else None
            g2 = sum_to(cross(g, _c(x1), axis=axis), x2) if x2._requires_grad else None
            return g1, g2

        return record(out, dev, "LinalgCrossBackward", (x1, x2), vjp, saved=(x1, x2))
    return new(out, dev)


def _diag_geometry(shape: tuple[int, ...], offset: int) -> tuple[int, int, int, int, int]:
    m, n = shape[-2], shape[-1]
    r0, c0 = max(-offset, 0), max(offset, 0)
    length = max(0, min(m - r0, n - c0))
    return m, n, r0, c0, length


def diagonal(x: Tensor, /, *, offset: int = 0) -> Tensor:
    """The ``offset``-th diagonal of each matrix (``offset > 0``: above the main one)."""
    x = _matrix(x, "diagonal", kinds="biufc")
    offset = operator.index(offset)
    dev = x._device
    out = _lx(dev, "diagonal")(x._data, offset=offset)
    if needs_grad(x):
        def vjp(g: Tensor, _: Any) -> Tensor:
            m, n, r0, c0, length = _diag_geometry(x.shape, offset)
            left = _eye(m, length, g, k=-r0) * _as_row(g)
            return matmul(left, _eye(length, n, g, k=c0))

        return record(out, dev, "LinalgDiagonalBackward", (x,), vjp)
    return new(out, dev)


def trace(x: Tensor, /, *, offset: int = 0, dtype: Any = None) -> Tensor:
    """Sum of the ``offset``-th diagonal of each matrix (``dtype`` as for ``sum``)."""
    x = _matrix(x, "trace", kinds="iufc")
    offset = operator.index(offset)
    dev = x._device
    if dtype is not None:
        from .backends._dtypes import to_dtype

        dtype = to_dtype(dtype)
    out = _lx(dev, "trace")(x._data, offset=offset, dtype=dtype)
    if needs_grad(x) and _dkind(out.dtype) in "fc":
        def vjp(g: Tensor, _: Any) -> Tensor:
            return sum_to(_mat_scalar(g) * _eye(x.shape[-2], x.shape[-1], g, k=offset), x)

        return record(out, dev, "LinalgTraceBackward", (x,), vjp)
    return new(out, dev)


# -- norms ----------------------------------------------------------------------------
def _sgn(x: Tensor) -> Tensor:
    """``x / |x|`` (0 at 0) for complex tensors, ``sign(x)`` for real ones."""
    return _vtl.sign(x)


def _safe(n: Tensor) -> Tensor:
    """``n`` with zeros replaced by ones (to divide by a norm that may be 0)."""
    return _vtl.where(n == 0, _vtl.ones_like(n), n)


def _tied_mask(a: Tensor, ref: Tensor, axes: tuple[int, ...]) -> Tensor:
    """Where ``a`` equals the (broadcast) extremum ``ref``, divided by the number of ties."""
    mask = _vtl.astype(a == ref, a.dtype)
    return mask / _vtl.sum(mask, axis=axes, keepdims=True)


def vector_norm(x: Tensor, /, *, axis: int | tuple[int, ...] | None = None,
                keepdims: bool = False, ord: int | float = 2) -> Tensor:  # noqa: A002
    """Vector ``ord``-norm over ``axis`` (all axes by default); the result has the real
    dtype matching ``x``."""
    x = tensor_arg(x, "linalg.vector_norm")
    _check_kind(x, "vector_norm", "fc")
    if isinstance(ord, bool) or not isinstance(ord, (int, float)):
        raise TypeError(f"linalg.vector_norm(): ord must be a number, got {type(ord).__name__}")
    axes = normalize_axes(axis, x.ndim, "linalg.vector_norm")
    dev = x._device
    out = _lx(dev, "vector_norm")(x._data, axis=None if axis is None else axes,
                                   keepdims=keepdims, ord=ord)
    if needs_grad(x) and ord != 0:
        kshape = tuple(1 if i in axes else s for i, s in enumerate(x.shape))

        def vjp(g: Tensor, nrm: Tensor) -> Tensor:
            gk = _vtl.reshape(g, kshape)
            nk = _vtl.reshape(nrm, kshape)
            if ord == 2:
                return sum_to(x * (gk / _safe(nk)), x)
            if ord == 1:
                return sum_to(_sgn(x) * gk, x)
            ax = _vtl.abs(x)
            if math.isinf(ord):
                return sum_to(_sgn(x) * _tied_mask(ax, nk, axes) * gk, x)
            zero = ax == 0
            pw = _vtl.where(zero, _vtl.zeros_like(ax),
                            _vtl.pow(_vtl.where(zero, _vtl.ones_like(ax), ax), ord - 1))
            scale = _vtl.where(nk == 0, _vtl.zeros_like(nk), gk / _vtl.pow(_safe(nk), ord - 1))
            return sum_to(_sgn(x) * pw * scale, x)

        return record(out, dev, "LinalgVectorNormBackward", (x,), vjp, saved=(x,),
                      save_output=True)
    return new(out, dev)


_MATRIX_ORDS = ("fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf)


def matrix_norm(x: Tensor, /, *, keepdims: bool = False,
                ord: int | float | Literal["fro", "nuc"] | None = "fro") -> Tensor:  # noqa: A002
    """Matrix norm of each matrix: ``'fro'`` (default), ``'nuc'``, ``1``/``-1`` (max/min
    column abs-sum), ``2``/``-2`` (largest/smallest singular value), ``inf``/``-inf``
    (max/min row abs-sum)."""
    x = _matrix(x, "matrix_norm")
    if ord is None:
        ord = "fro"  # noqa: A001
    if isinstance(ord, str):
        valid = ord in ("fro", "nuc")
    else:
        valid = isinstance(ord, (int, float)) and not isinstance(ord, bool) and ord in _MATRIX_ORDS
    if not valid:
        raise ValueError(
            "linalg.matrix_norm(): ord must be one of 'fro', 'nuc', 1, -1, 2, -2, inf, -inf; "
            f"got {ord!r}"
        )
    dev = x._device
    out = _lx(dev, "matrix_norm")(x._data, keepdims=keepdims, ord=ord)
    if needs_grad(x):
        if ord in ("nuc", 2, -2):
            _real_grad_only(x, "matrix_norm")

        def vjp(g: Tensor, nrm: Tensor) -> Tensor:
            gk = g if keepdims else _mat_scalar(g)
            nk = nrm if keepdims else _mat_scalar(nrm)
            if ord == "fro":
                return x * (gk / _safe(nk))
            if ord == "nuc":
                u, _s, vh = svd(x, full_matrices=False)
                return gk * matmul(u, vh)
            if ord in (2, -2):
                u, _s, vh = svd(x, full_matrices=False)
                k = u.shape[-1]
                i = 0 if ord == 2 else k - 1
                col = matmul(u, _eye(k, 1, u, k=-i))
                row = matmul(_eye(1, k, u, k=i), vh)
                return gk * matmul(col, row)
            red = -2 if ord in (1, -1) else -1
            sums = _vtl.sum(_vtl.abs(x), axis=red, keepdims=True)
            other = -1 if red == -2 else -2
            return _sgn(x) * _tied_mask(sums, nk, (other,)) * gk

        return record(out, dev, "LinalgMatrixNormBackward", (x,), vjp, saved=(x,),
                      save_output=True)
    return new(out, dev)


# autocast's float32 list: float16/bfloat16 inputs run in float32 inside autocast regions
def _autocast_float32() -> None:
    from . import _autocast

    g = globals()
    for name in ("vector_norm", "matrix_norm"):
        g[name] = _autocast.float32_unary(g[name])


_autocast_float32()
