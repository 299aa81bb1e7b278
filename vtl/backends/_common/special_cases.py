"""Special cases of the array API standard (2024.12) that a runtime's kernels miss, written
once against any array-API namespace ``xp`` (the cupy namespace applies them; the tests run
them on NumPy too).

Each ``*_special_cases(xp, x, out)`` takes a function's argument and the runtime's result and
returns the result with the standard's values where they differ:

* complex ``log``/``log1p``: an infinite part with a nan part gives ``+inf + nan j`` (CuPy
  mixes the parts as ``log(re**2 + im**2) + atan2(im, re) j``, a nan real part);
* complex ``log1p``: also the sign of a zero imaginary part carried to the result's
  imaginary part (CuPy gives ``log1p(-1 - 0j) == -inf + 0j``);
* complex ``acosh``: ``+-0 + nan j`` gives ``nan + pi/2 j`` (CuPy: ``nan + nan j``);
* complex ``tanh``: ``+-0 + inf j`` and ``+-0 + nan j`` give ``+-0 + nan j`` (CuPy:
  ``nan + nan j``).

These are NumPy's values too. :func:`python_remainder` is float ``remainder`` (Python's
``%``) from C's ``fmod``, as NumPy computes it; :func:`empty_solve` is ``linalg.solve`` of
a system without elements.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def _const(xp: Any, value: complex, like: Any) -> Any:
    """``value`` as a 0-d array of ``like``'s dtype on its device."""
    return xp.asarray(value, dtype=like.dtype, device=like.device)


def log_special_cases(xp: Any, x: Any, out: Any) -> Any:
    """Complex ``log(x)`` (``log1p(x)`` too): ``+inf + nan j`` where one part of ``x`` is
    infinite and the other nan."""
    a, b = xp.real(x), xp.imag(x)
    mixed = xp.logical_or(xp.logical_and(xp.isinf(a), xp.isnan(b)),
                          xp.logical_and(xp.isnan(a), xp.isinf(b)))
    return xp.where(mixed, _const(xp, complex(math.inf, math.nan), out), out)


def log1p_special_cases(xp: Any, x: Any, out: Any) -> Any:
    """Complex ``log1p(x)``: :func:`log_special_cases`, and the conjugate symmetry
    ``log1p(conj(x)) == conj(log1p(x))`` where ``x``'s imaginary part is a zero: the result's
    imaginary part (a zero or ``+-pi``) has the sign of that zero (``log1p(-1 - 0j)`` is
    ``-inf - 0j``, ``log1p(-inf - 0j)`` is ``inf - pi j``; CuPy gives ``+0`` and ``+pi``)."""
    out = log_special_cases(xp, x, out)
    a, b = xp.real(x), xp.imag(x)
    wrong = xp.logical_and(xp.logical_and(b == 0, xp.logical_not(xp.isnan(a))),
                           xp.signbit(xp.imag(out)) != xp.signbit(b))
    return xp.where(wrong, xp.conj(out), out)


def acosh_special_cases(xp: Any, x: Any, out: Any) -> Any:
    """Complex ``acosh(x)``: ``nan + pi/2 j`` where ``x`` is ``+-0 + nan j``."""
    a, b = xp.real(x), xp.imag(x)
    return xp.where(xp.logical_and(a == 0, xp.isnan(b)),
                    _const(xp, complex(math.nan, math.pi / 2), out), out)


def tanh_special_cases(xp: Any, x: Any, out: Any) -> Any:
    """Complex ``tanh(x)``: ``+-0 + nan j`` (the sign of ``x``'s real part) where ``x`` is
    ``+-0 + inf j`` or ``+-0 + nan j``."""
    a, b = xp.real(x), xp.imag(x)
    hit = xp.logical_and(a == 0, xp.logical_not(xp.isfinite(b)))
    value = xp.where(xp.signbit(a), _const(xp, complex(-0.0, math.nan), out),
                     _const(xp, complex(0.0, math.nan), out))
    return xp.where(hit, value, out)


def python_remainder(xp: Any, x1: Any, x2: Any, mod: Any) -> Any:
    """Float ``x1 % x2`` (Python's, the standard's) from ``mod = fmod(x1, x2)``, C's exact
    remainder with ``x1``'s sign, as NumPy's ``npy_remainder``: a nonzero ``mod`` of the other
    sign than ``x2`` gets ``x2`` added (``-3 % inf == inf``, ``3 % -inf == -inf``, while
    ``3 % inf == 3``), a zero takes ``x2``'s sign; nan, infinite ``x1`` and zero ``x2`` give
    nan (as ``fmod`` does)."""
    other_sign = xp.not_equal(xp.less(x2, 0), xp.less(mod, 0))
    mod = xp.where(xp.logical_and(mod != 0, other_sign), mod + x2, mod)
    return xp.where(mod == 0, xp.copysign(xp.zeros_like(mod), x2), mod)


def empty_solve(xp: Any, x1: Any, x2: Any) -> Any | None:
    """``linalg.solve(x1, x2)`` when ``x1`` or ``x2`` has no elements (an empty array of the
    result's shape and dtype), else ``None``; also ``None`` when the shapes do not fit
    (``x1`` is ``(..., M, M)``, ``x2`` is ``(M,)`` or ``(..., M, K)``), for the runtime's
    solve to report."""
    if (x1.size != 0 and x2.size != 0) or x1.ndim < 2 or x2.ndim < 1:
        return None
    m = x1.shape[-1]
    if x1.shape[-2] != m or (x2.shape[0] if x2.ndim == 1 else x2.shape[-2]) != m:
        return None
    if x2.ndim == 1:
        shape = tuple(x1.shape[:-1])
    else:
        shape = np.broadcast_shapes(x1.shape[:-2], x2.shape[:-2]) + tuple(x2.shape[-2:])
    return xp.empty(shape, dtype=xp.result_type(x1, x2), device=x1.device)
