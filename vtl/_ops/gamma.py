"""The log-gamma and polygamma functions on real floating arrays of any array-API namespace
(``vtl.special``'s portable code).

* ``lgamma``: Lanczos' approximation (g = 7, nine terms) for ``x >= 0.5``, the reflection
  ``log(pi / |sin(pi x)|) - lgamma(1 - x)`` below, with ``sin(pi x)`` taken of ``x`` reduced
  to ``[-1/2, 1/2]`` first (exact), so arguments near the poles and large negative ones keep
  their accuracy; ``+inf`` at the poles (0 and the negative integers) and at ``±inf``.
* ``polygamma(n, x)``, ``n >= 0`` (``n = 0``: digamma): for ``x >= 0.5`` the recurrence
  ``psi_n(y) = psi_n(y + 1) + (-1)^(n+1) n! / y^(n+1)`` up to ``y >= 10 + 3n``, then the
  asymptotic series (Bernoulli numbers to ``B_14``: ``log y - 1/(2y) - ...`` for the digamma,
  ``(-1)^(n+1) n! zeta(n+1, y)`` by Euler-Maclaurin beyond); below 0.5 the reflection
  ``psi_n(x) = (-1)^n psi_n(1 - x) - pi^(n+1) Q_n(cot(pi x))``, ``Q_n`` the polynomial with
  ``d^n/dx^n cot(pi x) = pi^n Q_n(cot(pi x))`` (``Q_0(c) = c``, ``Q_{k+1} = -(1 + c^2)
  Q_k'``). At the poles (the non-positive integers): PyTorch's values, ``-inf`` for the
  digamma at 0 and nan at the negative integers, ``(-1)^(n+1) inf`` for ``n >= 1``.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

__all__ = ["lgamma", "polygamma"]

_LANCZOS_G = 7.0
_LANCZOS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028,
            771.32342877765313, -176.61502916214059, 12.507343278686905,
            -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
#: B_2, B_4, ..., B_14
_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6)


def _abs_sin_pi(xp: Any, x: Any) -> Any:
    """``|sin(pi x)|`` from ``x`` reduced to ``[-1/2, 1/2]`` first (exactly), so that the
    product with pi is accurate near the integers too."""
    return xp.abs(xp.sin(math.pi * (x - xp.round(x))))


def _lanczos(xp: Any, x: Any) -> Any:
    """``lgamma(x)`` for ``x >= 0.5``."""
    z = x - 1.0
    a = xp.full_like(z, _LANCZOS[0])
    for i, c in enumerate(_LANCZOS[1:], start=1):
        a = a + c / (z + float(i))
    t = z + (_LANCZOS_G + 0.5)
    return _HALF_LOG_2PI + (z + 0.5) * xp.log(t) - t + xp.log(a)


def lgamma(xp: Any, x: Any) -> Any:
    """``log |Gamma(x)|`` of the real floating array ``x``."""
    low = x < 0.5
    right = _lanczos(xp, xp.where(low, 1.0 - x, x))  # 1 - x >= 0.5 where low
    s = _abs_sin_pi(xp, x)
    pole = xp.logical_and(low, x == xp.floor(x))
    left = math.log(math.pi) - xp.log(xp.where(s == 0.0, 1.0, s)) - right
    out = xp.where(low, left, right)
    out = xp.where(xp.logical_or(x == 1.0, x == 2.0), 0.0, out)  # exactly, as Gamma is 1
    out = xp.where(pole, math.inf, out)
    return xp.where(xp.isinf(x), math.inf, out)


@cache
def _cot_poly(n: int) -> tuple[float, ...]:
    """The coefficients (constant first) of ``Q_n`` with ``d^n/dx^n cot(pi x) = pi^n
    Q_n(cot(pi x))``."""
    q = [0.0, 1.0]  # Q_0(c) = c
    for _ in range(n):
        d = [k * q[k] for k in range(1, len(q))] + [0.0]  # Q'
        nxt = [0.0] * (len(d) + 2)
        for k, v in enumerate(d):  # -(1 + c^2) Q'
            nxt[k] -= v
            nxt[k + 2] -= v
        q = nxt
    while len(q) > 1 and q[-1] == 0.0:
        q.pop()
    return tuple(q)


def _ipow(y: Any, k: int) -> Any:
    """``y ** k`` for a positive int ``k`` by repeated squaring (every backend, any sign)."""
    out = None
    base = y
    while k:
        if k & 1:
            out = base if out is None else out * base
        k >>= 1
        if k:
            base = base * base
    return out


def _polygamma_right(xp: Any, n: int, y: Any) -> Any:
    """``psi_n(y)`` for ``y >= 0.5``."""
    sign = -1.0 if n % 2 == 0 else 1.0  # (-1)^(n+1)
    fact = float(math.factorial(n))
    target = 10.0 + 3.0 * n
    acc = xp.zeros_like(y)
    for _ in range(int(target)):
        below = y < target
        acc = acc + xp.where(below, sign * fact / _ipow(xp.where(below, y, 1.0), n + 1), 0.0)
        y = xp.where(below, y + 1.0, y)
    inv = 1.0 / y
    inv2 = inv * inv
    if n == 0:  # log y - 1/(2y) - sum B_2k / (2k y^2k)
        series = xp.zeros_like(y)
        p = inv2
        for k, b in enumerate(_BERNOULLI, start=1):
            series = series + (b / (2 * k)) * p
            p = p * inv2
        return acc + xp.log(y) - 0.5 * inv - series
    s = n + 1  # zeta(s, y) = y^(1-s)/(s-1) + y^-s/2 + sum B_2j/(2j)! (s)_(2j-1) y^(-s-2j+1)
    ys = _ipow(inv, s)
    zeta = ys * y / (s - 1) + 0.5 * ys
    term = ys * inv  # y^(-s-1)
    rising = float(s)  # (s)_1
    for j, b in enumerate(_BERNOULLI, start=1):
        zeta = zeta + (b / math.factorial(2 * j)) * rising * term
        rising *= (s + 2 * j - 1) * (s + 2 * j)
        term = term * inv2
    return acc + sign * fact * zeta


def polygamma(xp: Any, n: int, x: Any) -> Any:
    """The ``n``-th derivative of the digamma function of the real floating array ``x``."""
    low = x < 0.5
    y = xp.where(low, 1.0 - x, x)
    right = _polygamma_right(xp, n, xp.where(xp.isfinite(y), y, 1.0))
    r = x - xp.round(x)  # cot has period 1
    pole = xp.logical_and(low, r == 0.0)
    c = xp.cos(math.pi * r) / xp.sin(math.pi * xp.where(r == 0.0, 0.5, r))
    q = xp.zeros_like(c)
    for coef in reversed(_cot_poly(n)):
        q = q * c + coef
    left = (1.0 if n % 2 == 0 else -1.0) * right - math.pi ** (n + 1) * q
    out = xp.where(low, left, right)
    if n == 0:
        at_pole = xp.where(x == 0.0, xp.full_like(x, -math.inf), math.nan)
        big = math.inf
    else:
        at_pole = math.inf if n % 2 else -math.inf
        big = 0.0
    out = xp.where(pole, at_pole, out)
    out = xp.where(x == math.inf, big, out)
    out = xp.where(x == -math.inf, math.nan, out)
    return xp.where(xp.isnan(x), x, out)
