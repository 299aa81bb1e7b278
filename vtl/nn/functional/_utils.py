"""Shared helpers of ``vtl.nn.functional``: the namespace of the inputs,
stop-gradient, argument checks, reductions and special functions written with
standard array-API calls only."""

from __future__ import annotations

from typing import Any

from array_api_compat import array_namespace

from ..._tensor import Tensor
from ...backends import _dtypes

__all__ = ["array_namespace", "check_reduction", "detach", "erfc", "namespace", "reduce",
           "reshaped"]

_REDUCTIONS = ("mean", "sum", "none")


def reshaped(xp: Any, a: Any, shape: tuple[int, ...]) -> Any:
    """The raw array ``a`` in ``shape``: ``a`` itself where it has that shape already (no
    view object, which the autograd's bookkeeping would inspect), else ``xp.reshape``."""
    return a if a.shape == shape else xp.reshape(a, shape)


_SKIP = (bool, int, float, complex)
_vtl: Any = None


def namespace(*xs: Any) -> Any:
    """The array-API namespace of the array arguments (``vtl`` for vtl tensors);
    ``None`` and Python scalars are ignored."""
    global _vtl
    seen = False
    for x in xs:  # fast path: vtl tensors only (no array_namespace call)
        if x.__class__ is Tensor or isinstance(x, Tensor):
            seen = True
        elif x is not None and not isinstance(x, _SKIP):
            break
    else:
        if not seen:
            return array_namespace()
        if _vtl is None:
            import vtl

            _vtl = vtl
        return _vtl
    arrays = [x for x in xs if x is not None and not isinstance(x, _SKIP)]
    try:
        return array_namespace(*arrays)
    except TypeError:
        raise TypeError(_mixed_arrays(arrays)) from None


def _type_name(x: Any) -> str:
    t = type(x)
    if t is Tensor or isinstance(x, Tensor):
        return "vtl.Tensor"
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _mixed_arrays(arrays: list) -> str:
    """Why ``array_namespace`` refused ``arrays``: a mix of libraries, or a non-array."""
    names = list(dict.fromkeys(_type_name(x) for x in arrays))
    if "vtl.Tensor" in names:
        others = [n for n in names if n != "vtl.Tensor"]
        return (f"expected vtl.Tensor arguments, got vtl.Tensor mixed with {', '.join(others)}; "
                "convert them with vtl.asarray(...)")
    return (f"expected arrays of one array-API library, got {', '.join(names)}; convert them "
            "with vtl.asarray(...) (or the array library's asarray)")


def detach(x: Any) -> Any:
    """``x`` outside the autograd graph (a no-op for arrays without autograd)."""
    return x.detach() if isinstance(x, Tensor) else x


def is_floating(xp: Any, x: Any) -> bool:
    return xp.isdtype(x.dtype, "real floating")


def check_reduction(reduction: str, fname: str, extra: tuple[str, ...] = ()) -> None:
    if reduction not in _REDUCTIONS + extra:
        valid = ", ".join(repr(r) for r in _REDUCTIONS + extra)
        raise ValueError(f"{fname}(): reduction must be one of {valid}, got {reduction!r}")


def reduce(xp: Any, loss: Any, reduction: str) -> Any:
    """Apply ``'mean'``/``'sum'``/``'none'`` to an elementwise loss."""
    if reduction == "mean":
        return xp.mean(loss)
    if reduction == "sum":
        return xp.sum(loss)
    return loss


def check_same_shape(input: Any, target: Any, fname: str) -> None:  # noqa: A002
    if tuple(input.shape) != tuple(target.shape):
        raise ValueError(
            f"{fname}(): target shape {tuple(target.shape)} differs from input shape "
            f"{tuple(input.shape)}; reshape one of them (no implicit broadcasting)"
        )


def normalize_dim(dim: int, ndim: int, fname: str) -> int:
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"{fname}(): dim {dim} is out of range for a {ndim}-D input")
    return dim % n


# -- erfc (Cephes' rational approximations; relative error ~1e-15 in float64) ----------------
_T = (9.60497373987051638749e0, 9.00260197203842689217e1, 2.23200534594684319226e3,
      7.00332514112805075473e3, 5.55923013010394962768e4)
_U = (1.0, 3.35617141647503099647e1, 5.21357949780152679795e2, 4.59432382970980127987e3,
      2.26290000613890934246e4, 4.92673942608635921086e4)
_P = (2.46196981473530512524e-10, 5.64189564831068821977e-1, 7.46321056442269912687e0,
      4.86371970985681366614e1, 1.96520832956077098242e2, 5.26445194995477358631e2,
      9.34528527171957607540e2, 1.02755188689515710272e3, 5.57535335369399327526e2)
_Q = (1.0, 1.32281951154744992508e1, 8.67072140885989742329e1, 3.54937778887819891062e2,
      9.75708501743205489753e2, 1.82390916687909736289e3, 2.24633760818710981792e3,
      1.65666309194161350182e3, 5.57535340817727675546e2)
_R = (5.64189583547755073984e-1, 1.27536670759978104416e0, 5.01905042251180477414e0,
      6.16021097993053585195e0, 7.40974269950448939160e0, 2.97886665372100240670e0)
_S = (1.0, 2.26052863220117276590e0, 9.39603524938001434673e0, 1.20489539808096656605e1,
      1.70814450747565897222e1, 9.60896809063285878198e0, 3.36907645100081516050e0)


_F32 = _dtypes.float32


def low_float(x: Any) -> Any:
    """``x``'s dtype when it is float16 or bfloat16 (computed in float32 by the ops whose
    intermediate values need float32's range or precision), else ``None``."""
    dt = x.dtype
    return dt if dt in _dtypes.LOW_FLOATING else None


def _poly(x: Any, coefs: tuple[float, ...]) -> Any:
    r = x * coefs[0] + coefs[1]
    for c in coefs[2:]:
        r = r * x + c
    return r


def exp_neg_square(xp: Any, a: Any) -> Any:
    """``exp(-a^2)`` for ``0 <= a <= 32`` without the rounding of ``a^2`` (a relative error
    of ``a^2`` units in the last place): ``exp(-h^2) exp(-(a - h)(a + h))`` with ``h`` the
    value of ``a`` to 12 binary places in float64 (4 in float32), so ``h^2`` is exact."""
    q = 4096.0 if xp.finfo(a.dtype).bits == 64 else 16.0
    h = xp.floor(a * q) / q
    return xp.exp(-(h * h)) * xp.exp(-((a - h) * (a + h)))


def erf(xp: Any, x: Any) -> Any:
    """The error function of a real floating array (differentiable on vtl tensors):
    ``x T(x^2) / U(x^2)`` for ``|x| < 1`` (no cancellation near 0), ``1 - erfc(x)``
    beyond."""
    low = low_float(x)
    if low is not None:
        return xp.astype(erf(xp, xp.astype(x, _F32)), low)
    small = xp.abs(x) < 1.0
    xs = xp.where(small, x, 0.0)
    z = xs * xs
    return xp.where(small, xs * _poly(z, _T) / _poly(z, _U), 1.0 - erfc(xp, x))


def erfc(xp: Any, x: Any) -> Any:
    """The complementary error function, accurate in both tails.

    Each branch gets inputs clamped to its own region, so the branches that
    :func:`where` discards produce no inf/nan (in values or gradients). float16 and
    bfloat16 inputs are computed in float32 and rounded (their range cannot hold the
    polynomials' intermediate values).
    """
    low = low_float(x)
    if low is not None:
        return xp.astype(erfc(xp, xp.astype(x, _F32)), low)
    a = xp.abs(x)
    small = a < 1.0
    xs = xp.where(small, x, 0.0)  # |x| < 1: erfc = 1 - x T(x^2)/U(x^2)
    z = xs * xs
    erfc_small = 1.0 - xs * _poly(z, _T) / _poly(z, _U)
    ab = xp.clip(xp.where(small, 1.0, a), 1.0, 30.0)  # |x| >= 1 (erfc(30) underflows to 0)
    mid = ab < 8.0
    am = xp.where(mid, ab, 1.0)
    al = xp.where(mid, 8.0, ab)
    tail = xp.where(mid, _poly(am, _P) / _poly(am, _Q), _poly(al, _R) / _poly(al, _S))
    erfc_pos = exp_neg_square(xp, ab) * tail
    erfc_big = xp.where(x < 0, 2.0 - erfc_pos, erfc_pos)
    return xp.where(small, erfc_small, erfc_big)


def apply_inplace(input: Any, fn: Any, fname: str) -> Any:  # noqa: A002
    """``fn(input)`` written into ``input``, which is returned (PyTorch's ``inplace=True``).

    A vtl tensor follows the rules of vtl's in-place operators
    (``vtl._ops._core.inplace_apply``: a leaf that requires grad is refused while grad mode
    is on, the tensor takes over the result's history, its version counter moves). Another
    array-API array gets ``input[...] = fn(input)``; a ``TypeError`` says so when the array
    cannot be written (read-only, or an immutable array library)."""
    if isinstance(input, Tensor):
        from ..._ops._core import inplace_apply

        return inplace_apply(input, fn, fname)
    out = fn(input)
    if out is input:
        return input
    if tuple(out.shape) != tuple(input.shape) or out.dtype != input.dtype:
        raise TypeError(f"{fname}(inplace=True): the result (shape {tuple(out.shape)}, dtype "
                        f"{out.dtype}) cannot be written into the input (shape "
                        f"{tuple(input.shape)}, dtype {input.dtype}); use inplace=False")
    try:
        input[...] = out
    except (TypeError, ValueError, AttributeError) as e:
        raise TypeError(f"{fname}(inplace=True): cannot write into the input "
                        f"({_type_name(input)}: {e}); use inplace=False") from None
    return input
