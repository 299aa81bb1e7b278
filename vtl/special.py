"""``vtl.special``: PyTorch's ``torch.special`` functions of the error-function and gamma
families, ``xlogy``/``xlog1py``, ``sinc``, ``entr`` and the logistic pair, on every backend,
differentiable.

``erf``, ``erfc``, ``erfinv``, ``lgamma``, ``digamma``, ``polygamma``, ``xlogy`` and
``sinc`` are also top-level ``vtl`` functions and ``Tensor`` methods, as in PyTorch. The
error and gamma functions are one graph node each; integer and bool inputs give the default
float dtype, as in PyTorch.

* Error functions: a backend's ``kernel("special")`` computes ``erf``/``erfc`` (and their
  gradients) in one launch where it has one: the numpy backend with numba (the ``vtl[cpu]``
  extra, the C library's functions in float64), cupy (CUDA's), wgpu (float32, the portable
  rational approximations in WGSL). Elsewhere the portable code runs: Cephes' rational
  approximations of ``erfc`` built from array-API operations, accurate to a few units in
  the last place in float64 and in both tails; ``erfinv`` starts from Giles'
  single-precision approximation and takes four Newton steps on ``erf`` (on ``log(erfc)``
  beyond ``±0.5``, where the residual of ``erf`` would cancel). float16 and bfloat16 inputs
  are computed in float32 and rounded once.
* Gamma family (``vtl/_ops/gamma.py`` describes the algorithms): Lanczos' ``lgamma`` and a
  recurrence plus asymptotic series for ``polygamma``, with reflection below 1/2; float32
  and 16-bit inputs are computed in float64 where the device has it, and rounded once.
"""

from __future__ import annotations

import math
from typing import Any

from ._ops import gamma as _gamma
from ._ops._core import _grad, new, record
from ._tensor import Tensor
from .backends import _dtypes
from .nn.functional import _utils

__all__ = ["digamma", "entr", "erf", "erfc", "erfinv", "expit", "gammaln", "lgamma", "logit",
           "ndtr", "polygamma", "psi", "sinc", "xlog1py", "xlogy"]

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_SQRT_PI_OVER_2 = math.sqrt(math.pi) / 2.0
_SQRT1_2 = 1.0 / math.sqrt(2.0)

# Giles, "Approximating the erfinv function" (GPU Computing Gems, 2011), single precision:
# erfinv(y) ~ y p(w), w = -log((1 - y)(1 + y)), central (w < 5) and tail polynomials
_GILES_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                  0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_GILES_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
               0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


#: Newton steps after Giles' start: each about doubles the correct digits
_NEWTON_STEPS = 4


def erfinv_portable(xp: Any, y: Any) -> Any:
    """``erfinv`` of the real floating array ``y`` with the array-API namespace ``xp``:
    Giles' approximation, then Newton steps on ``erf`` (on ``log(erfc)`` for
    ``|y| > 0.5``); ``±inf`` at ``±1``, nan outside ``[-1, 1]``."""
    a = xp.abs(y)
    inside = a < 1.0
    ai = xp.where(inside, a, 0.0)
    w = -xp.log((1.0 - ai) * (1.0 + ai))
    central = w < 5.0
    wc = xp.where(central, w, 5.0) - 2.5
    wt = xp.sqrt(xp.where(central, 5.0, w)) - 3.0
    x = ai * xp.where(central, _utils._poly(wc, _GILES_CENTRAL),
                      _utils._poly(wt, _GILES_TAIL))
    far = ai > 0.5
    # beyond 0.5, Newton on log(erfc(x)) = log(1 - y) (1 - y is exact there): nearly
    # linear in the tail, where Giles' start (fitted for float32's range) is far off
    log_tail = xp.log(xp.where(far, 1.0 - ai, 0.5))
    xn = xp.where(far, 0.0, x)
    xf = xp.where(far, x, 1.0)
    for _ in range(_NEWTON_STEPS):
        xn = xn - (_utils.erf(xp, xn) - xp.where(far, 0.0, ai)) / (
            _TWO_OVER_SQRT_PI * xp.exp(-xn * xn))
        c = _utils.erfc(xp, xf)
        xf = xf + (xp.log(c) - log_tail) * c / (_TWO_OVER_SQRT_PI * xp.exp(-xf * xf))
    x = xp.where(far, xf, xn)
    x = xp.where(inside, x, xp.where(a == 1.0, xp.full_like(x, math.inf), math.nan))
    x = xp.where(xp.isnan(y), y, x)
    return xp.copysign(x, y)


def _portable(name: str, xp: Any, x: Any) -> Any:
    if name == "erf":
        return _utils.erf(xp, x)
    if name == "erfc":
        return _utils.erfc(xp, x)
    return erfinv_portable(xp, x)


def _float_input(x: Any, fname: str) -> Tensor:
    """``x`` as a real floating tensor (integers and bools in the default float dtype)."""
    if not isinstance(x, Tensor):
        import vtl

        x = vtl.asarray(x)
    k = _dtypes.kind(x._data.dtype)
    if k == "c":
        raise TypeError(f"{fname}(): complex input is not supported (got {x.dtype})")
    if k != "f":
        import vtl

        dev = x._device
        return vtl.astype(x, dev.backend.default_dtypes(dev.index)["real floating"])
    return x


def _in_float32(xp: Any, fn: Any, x: Any, *more: Any) -> Any:
    """``fn(x, *more)`` of raw arrays of one dtype; 16-bit floats computed in float32 and the
    result rounded once."""
    if x.dtype not in _dtypes.LOW_FLOATING:
        return fn(x, *more)
    wide = [xp.astype(a, _dtypes.float32) for a in (x, *more)]
    return xp.astype(fn(*wide), x.dtype)


def _raw(name: str, dev: Any, x: Any) -> Any:
    """``name`` of the raw real floating array ``x``: the backend's kernel, else the
    portable code."""
    xp = dev.xp
    kern = dev.backend.kernel("special")

    def run(src: Any) -> Any:
        out = kern(name, src) if kern is not None and kern.supports(name, src.dtype) else None
        return _portable(name, xp, src) if out is None else out

    return _in_float32(xp, run, x)


def _raw_grad(name: str, dev: Any, x: Any, g: Any) -> Any:
    """``g`` times the derivative of ``erf``/``erfc`` at ``x`` (raw arrays)."""
    xp = dev.xp
    kern = dev.backend.kernel("special")

    def run(xs: Any, gs: Any) -> Any:
        out = kern.grad(name, xs, gs) if kern is not None and kern.supports(name, xs.dtype) \
            else None
        if out is None:
            out = gs * (xp.exp(-xs * xs) * (_TWO_OVER_SQRT_PI if name == "erf"
                                            else -_TWO_OVER_SQRT_PI))
        return out

    return _in_float32(xp, run, x, g)


def _unary(name: str, input: Any) -> Tensor:  # noqa: A002
    x = _float_input(input, name)
    dev = x._device
    out = _raw(name, dev, x._data)
    if not (x._requires_grad and _grad.enabled):
        return new(out, dev)
    if name == "erfinv":
        return record(out, dev, "ErfinvBackward0", (x,), _erfinv_vjp, save_output=True)
    return record(out, dev, f"{name.capitalize()}Backward0", (x,),
                  lambda g, _out, x=x: _erf_like_vjp(name, g, x), saved=(x,))


def _erf_like_vjp(name: str, g: Tensor, x: Tensor) -> Tensor:
    if not _grad.enabled:  # plain backward: one launch where the backend has the kernel
        return new(_raw_grad(name, g._device, x._data, g._data), g._device)
    import vtl

    s = _TWO_OVER_SQRT_PI if name == "erf" else -_TWO_OVER_SQRT_PI
    return g * (vtl.exp(-x * x) * s)


def _erfinv_vjp(g: Tensor, out: Tensor) -> Tensor:
    import vtl

    if not _grad.enabled:
        xp = g._device.xp
        y = out._data
        return new(g._data * (xp.exp(y * y) * _SQRT_PI_OVER_2), g._device)
    return g * (vtl.exp(out * out) * _SQRT_PI_OVER_2)


def erf(input: Any) -> Tensor:  # noqa: A002
    """The error function ``2 / sqrt(pi) * integral from 0 to x of exp(-t^2) dt``
    (``torch.special.erf``).

    Args:
        input: A real tensor (integers give the default float dtype).

    Returns:
        A floating tensor of the input's shape.

    Raises:
        TypeError: If the input is complex.

    Example:
        >>> [round(v, 6) for v in vtl.special.erf(vtl.asarray([0.0, 0.5, -2.0])).tolist()]
        [0.0, 0.5205, -0.995322]
    """
    return _unary("erf", input)


def erfc(input: Any) -> Tensor:  # noqa: A002
    """The complementary error function ``1 - erf(x)``, accurate in the right tail where
    ``1 - erf(x)`` would round to zero (``torch.special.erfc``).

    Args:
        input: A real tensor (integers give the default float dtype).

    Returns:
        A floating tensor of the input's shape.

    Raises:
        TypeError: If the input is complex.

    Example:
        >>> x = vtl.asarray([10.0], dtype=vtl.float64)
        >>> f"{float(vtl.special.erfc(x)[0]):.6e}", float(1 - vtl.special.erf(x)[0])
        ('2.088488e-45', 0.0)
    """
    return _unary("erfc", input)


def erfinv(input: Any) -> Tensor:  # noqa: A002
    """The inverse of :func:`erf` on ``[-1, 1]``: ``±inf`` at ``±1``, nan outside
    (``torch.special.erfinv``).

    Args:
        input: A real tensor (integers give the default float dtype).

    Returns:
        A floating tensor of the input's shape.

    Raises:
        TypeError: If the input is complex.

    Example:
        >>> [round(v, 6) for v in vtl.special.erfinv(vtl.asarray([0.0, 0.5, -1.0])).tolist()]
        [0.0, 0.476936, -inf]
    """
    return _unary("erfinv", input)


def ndtr(input: Any) -> Tensor:  # noqa: A002
    """The standard normal distribution function ``(1 + erf(x / sqrt(2))) / 2``, computed as
    ``erfc(-x / sqrt(2)) / 2`` (accurate in the left tail; ``torch.special.ndtr``).

    Args:
        input: A real tensor (integers give the default float dtype).

    Returns:
        A floating tensor of the input's shape.
    """
    x = _float_input(input, "ndtr")
    return erfc(x * -_SQRT1_2) * 0.5


def expit(input: Any) -> Tensor:  # noqa: A002
    """The logistic sigmoid ``1 / (1 + exp(-x))`` (``torch.special.expit``, ``vtl.sigmoid``).

    Args:
        input: A real floating tensor.

    Returns:
        A tensor of the input's shape.
    """
    import vtl

    return vtl.sigmoid(input)


def logit(input: Any, eps: float | None = None) -> Tensor:  # noqa: A002
    """``log(p / (1 - p))``, the inverse of :func:`expit`; with ``eps``, ``p`` is first
    clamped to ``[eps, 1 - eps]`` (``torch.special.logit``).

    Args:
        input: A real tensor of probabilities.
        eps: ``None``, or the clamp bound.

    Returns:
        A floating tensor of the input's shape.
    """
    import vtl

    x = _float_input(input, "logit")
    if eps is not None:
        x = vtl.clip(x, eps, 1.0 - eps)
    return vtl.log(x / (1.0 - x))


# -- the gamma family --------------------------------------------------------------------------

def _wide_raw(fn: Any, dev: Any, x: Any) -> Any:
    """``fn(xp, x)`` of the raw array ``x``, computed in float64 where the device has it for
    narrower floats, and rounded once to ``x``'s dtype."""
    xp = dev.xp
    if x.dtype != _dtypes.float64 and "float64" in dev.backend.dtypes(dev.index):
        return xp.astype(fn(xp, xp.astype(x, _dtypes.float64)), x.dtype)
    if x.dtype in _dtypes.LOW_FLOATING:
        return xp.astype(fn(xp, xp.astype(x, _dtypes.float32)), x.dtype)
    return fn(xp, x)


def _check_order(n: Any) -> int:
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"polygamma(): n must be an int, got {type(n).__name__}")
    if n < 0:
        raise ValueError(f"polygamma(): n must be non-negative, got {n}")
    return n


def _gamma_node(x: Tensor, fn: Any, name: str, order: int) -> Tensor:
    """``fn(xp, x)`` (:func:`_wide_raw`) as one graph node whose derivative is
    ``polygamma(order, x)``."""
    dev = x._device
    out = _wide_raw(fn, dev, x._data)
    if not (x._requires_grad and _grad.enabled):
        return new(out, dev)
    return record(out, dev, name, (x,), lambda g, _out, x=x: _gamma_vjp(order, g, x),
                  saved=(x,))


def _polygamma_tensor(n: int, x: Tensor) -> Tensor:
    return _gamma_node(x, lambda xp, a: _gamma.polygamma(xp, n, a), f"PolygammaBackward{n}",
                       n + 1)


def _gamma_vjp(order: int, g: Tensor, x: Tensor) -> Tensor:
    """``g`` times ``polygamma(order, x)`` (the derivative of lgamma is polygamma 0, of
    polygamma n polygamma n + 1)."""
    if not _grad.enabled:  # plain backward on raw arrays
        dev = g._device
        d = _wide_raw(lambda xp, a: _gamma.polygamma(xp, order, a), dev, x._data)
        return new(g._data * d, dev)
    return g * _polygamma_tensor(order, x)


def lgamma(input: Any) -> Tensor:  # noqa: A002
    """``log |Gamma(x)|`` (``torch.lgamma``, ``torch.special.gammaln``): ``+inf`` at the
    poles (0 and the negative integers) and at ``±inf``.

    Args:
        input: A real tensor (integers give the default float dtype).

    Returns:
        A floating tensor of the input's shape.

    Raises:
        TypeError: If the input is complex.

    Example:
        >>> [round(v, 6) for v in vtl.lgamma(vtl.asarray([0.5, 3.0, -2.5])).tolist()]
        [0.572365, 0.693147, -0.056244]
    """
    return _gamma_node(_float_input(input, "lgamma"), _gamma.lgamma, "LgammaBackward0", 0)


def polygamma(n: int, input: Any) -> Tensor:  # noqa: A002
    """The ``n``-th derivative of the digamma function (``torch.polygamma``): ``n = 0`` is
    :func:`digamma`. At the poles (0 and the negative integers) PyTorch's values: the
    digamma is ``-inf`` at 0 and nan at the negative integers, higher orders
    ``(-1)^(n+1) inf``; at ``+inf`` the limits (``inf`` for the digamma, 0 above).

    Args:
        n: The order, a non-negative int.
        input: A real tensor (integers give the default float dtype).

    Returns:
        A floating tensor of the input's shape.

    Raises:
        TypeError: If ``n`` is not an int or the input is complex.
        ValueError: If ``n`` is negative.

    Example:
        >>> [round(v, 6) for v in vtl.polygamma(1, vtl.asarray([1.0, 0.5])).tolist()]
        [1.644934, 4.934802]
    """
    n = _check_order(n)
    return _polygamma_tensor(n, _float_input(input, "polygamma"))


def digamma(input: Any) -> Tensor:  # noqa: A002
    """The logarithmic derivative of the gamma function (``torch.digamma``,
    ``torch.special.psi``): ``-inf`` at 0, nan at the negative integers.

    Args:
        input: A real tensor (integers give the default float dtype).

    Returns:
        A floating tensor of the input's shape.

    Raises:
        TypeError: If the input is complex.

    Example:
        >>> round(float(vtl.digamma(vtl.asarray(1.0))), 6)   # minus Euler's constant
        -0.577216
    """
    return _polygamma_tensor(0, _float_input(input, "digamma"))


gammaln = lgamma
psi = digamma


def _pair(x: Any, y: Any, fname: str) -> tuple[Tensor, Tensor]:
    """``x`` and ``y`` as floating tensors (one may be a Python number) of one device."""
    import vtl

    if not isinstance(x, Tensor) and not isinstance(y, Tensor):
        raise TypeError(f"{fname}(): expected a tensor among the arguments, got "
                        f"{type(x).__name__} and {type(y).__name__}")
    like = x if isinstance(x, Tensor) else y
    x, y = (a if isinstance(a, Tensor) else vtl.asarray(a, device=like.device) for a in (x, y))
    return _float_input(x, fname), _float_input(y, fname)


def xlogy(input: Any, other: Any) -> Tensor:  # noqa: A002
    """``input * log(other)``, 0 where ``input`` is 0 (unless ``other`` is nan)
    (``torch.xlogy``, ``torch.special.xlogy``); one of the two may be a Python number.

    Args:
        input: A real tensor or number.
        other: A real tensor or number.

    Returns:
        A floating tensor of the broadcast shape.

    Raises:
        TypeError: If neither argument is a tensor, or one is complex.

    Example:
        >>> vtl.xlogy(vtl.asarray([0.0, 2.0]), vtl.asarray([0.0, 1.0])).tolist()
        [0.0, 0.0]
    """
    import vtl

    x, y = _pair(input, other, "xlogy")
    return x * _log_where_used(x, y, vtl.log(y))


def _log_where_used(x: Tensor, y: Tensor, ly: Tensor) -> Tensor:
    """``ly`` (a log of ``y``) with 0 where ``x`` is 0 and ``ly`` is not finite (``y`` not
    nan), so that ``x * ly`` is 0 there; elsewhere ``ly`` itself, so the gradient of ``x *
    ly`` with respect to ``x`` is ``ly`` even at 0, as PyTorch's."""
    import vtl

    drop = (x == 0) & ~vtl.isfinite(ly) & ~vtl.isnan(y)
    return vtl.where(drop, 0.0, ly)


def xlog1py(input: Any, other: Any) -> Tensor:  # noqa: A002
    """``input * log1p(other)``, 0 where ``input`` is 0 (unless ``other`` is nan)
    (``torch.special.xlog1py``); one of the two may be a Python number.

    Args:
        input: A real tensor or number.
        other: A real tensor or number.

    Returns:
        A floating tensor of the broadcast shape.

    Raises:
        TypeError: If neither argument is a tensor, or one is complex.
    """
    import vtl

    x, y = _pair(input, other, "xlog1py")
    return x * _log_where_used(x, y, vtl.log1p(y))


def sinc(input: Any) -> Tensor:  # noqa: A002
    """The normalized sinc ``sin(pi x) / (pi x)``, 1 at 0 (``torch.sinc``).

    Args:
        input: A real tensor (integers give the default float dtype).

    Returns:
        A floating tensor of the input's shape.
    """
    import vtl

    x = _float_input(input, "sinc")
    zero = x == 0
    px = vtl.where(zero, 1.0, x) * math.pi
    return vtl.where(zero, 1.0, vtl.sin(px) / px)


def entr(input: Any) -> Tensor:  # noqa: A002
    """The elementwise entropy ``-x log(x)``: 0 at 0, ``-inf`` below
    (``torch.special.entr``).

    Args:
        input: A real tensor (integers give the default float dtype).

    Returns:
        A floating tensor of the input's shape.
    """
    import vtl

    x = _float_input(input, "entr")
    pos = x > 0
    out = vtl.where(pos, -x * vtl.log(vtl.where(pos, x, 1.0)), 0.0)
    out = vtl.where(x < 0, -math.inf, out)
    return vtl.where(vtl.isnan(x), x, out)
