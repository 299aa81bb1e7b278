"""The cupy backend's array-API namespace: ``array_api_compat.cupy`` with the
standard's signed-zero special cases that CuPy itself misses.

* float ``remainder`` is NumPy's algorithm (``fmod``, then Python's sign convention;
  ``_special_cases.python_remainder``): CuPy's ``x - floor(x / y) * y`` gives nan for a
  finite ``x`` and an infinite ``y`` (the standard: ``x`` when the signs agree, else
  ``y``), ``+0.0`` for ``0.0 % -2.0`` (the standard: ``-0.0``), and ``0.0`` for
  ``1.0 % 0.1`` (NumPy and Python: ``0.09999999999999995``, consistent with
  ``1.0 // 0.1 == 9.0``).
* complex ``log``, ``log1p``, ``acosh`` and ``tanh`` get the standard's special cases with
  infinite and nan parts that CuPy's kernels miss (``_special_cases``): ``log(inf + nan j)``
  is ``inf + nan j`` (CuPy: ``nan + nan j``), ``acosh(0 + nan j)`` is ``nan + pi/2 j``,
  ``tanh(0 + inf j)`` is ``0 + nan j``.
* ``linalg.solve`` of systems without elements (``linalg.py``): CuPy's batched solver
  raised ``ZeroDivisionError`` for a right-hand side without columns.
* ``asarray`` of a 0-d host value and ``full``/``full_like`` with ``-0.0``: CuPy fills
  zeros with a memset, which drops the sign of ``-0.0`` (so ``inf / -0.0`` of uploaded 0-d
  arrays gave ``+inf``); 0-d host values go in as one-element arrays, and a ``-0.0`` fill is
  negated from ``+0.0``. CuPy's division itself keeps the standard's signs.
* ``divide``/``floor_divide`` with a 0-d operand divide one-element arrays instead (kept
  from before the memset was found to be the cause of the sign losses).
* float ``floor_divide`` is NumPy's algorithm (``(x - fmod(x, y)) / y``, corrected to the
  floor): CuPy's ``floor(x / y)`` loses the sign of a quotient that rounds to zero
  (``-3e-302 // 1e22`` gave ``-0.0``, NumPy ``-1.0``) and rounds up near integers
  (``1.0 // 0.1`` gave ``10.0``, NumPy ``9.0``).
* complex ``divide`` is NumPy's algorithm: CuPy's gives ``nan`` parts for a zero divisor
  (NumPy: ``(1 + 1j) / 0 == inf + inf*j``).
* ``argmax``/``argmin`` return NumPy's index (the first extreme, the first nan, signed zeros
  equal, subnormals apart from zero; ``_arg_reductions``): CuPy's reduction returned one of
  several nans, and its float32 kernels on an H200 took the smallest subnormal for zero.
* ``matmul`` of float32/float64 matrices and stacks of them is one direct cuBLAS call
  (``gemm`` or ``gemmStridedBatched`` through ``blas.py``; C- or Fortran-order operands, so
  transposed views need no copy): CuPy's ``matmul`` costs 20-40 microseconds of host time
  per call in its generalized-ufunc and dispatch layers, which dominates small layers and
  recurrent steps, and its cuBLAS bindings refuse to be captured into a CUDA graph.
* ``sum``/``mean`` of large arrays: CuPy's generic reduction runs one thread block per
  output element, so a full reduction of a non-contiguous array (one block for millions of
  elements) or a reduction over leading and trailing axes together (e.g. a bias gradient
  over N, H, W) is up to a hundred times slower than its CUB path. Such inputs are made
  contiguous, and the trailing reduced axes are summed first (CUB's segmented reduction).
  A ``sum`` of float32/float64 over leading axes only (``axis=0`` of a matrix: 3x
  PyTorch's time through CuPy on an H200) is the nn kernels' column sum instead, in double
  in a fixed order.
  ``var``/``std`` of large float arrays are NumPy's two-pass algorithm: fused kernels
  (``_moments``, one to four launches, in double) over all axes or trailing ones, else on
  these staged reductions (``_common.moments.two_pass_var``); CuPy's own ``var`` took
  12.8 ms for 4096 x 4096 elements, its ``sum`` 34 µs.

* float16 and bfloat16: products are cuBLAS calls with float32 compute (``blas.py``);
  ``sum``, ``prod``, ``mean``, ``var``, ``std`` and ``cumulative_sum``/``cumulative_prod``
  (without ``dtype=``) accumulate in float32 and round the result once, as PyTorch's; a
  Python scalar in ``where`` takes the array's low-precision dtype.

Every other name is ``array_api_compat.cupy``'s own.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import array_api_compat.cupy as _acp
import cupy as _cupy
import ml_dtypes as _ml_dtypes
import numpy as _np
from array_api_compat.cupy import *  # noqa: F403

from .._common.arg_reductions import first_arg_extreme
from .._common.moments import two_pass_var
from .._common.special_cases import (
    acosh_special_cases,
    log1p_special_cases,
    log_special_cases,
    python_remainder,
    tanh_special_cases,
)
from .._dtypes import LOW_FLOATING
from . import linalg  # noqa: F401 - the linalg extension, with solve fixed
from .blas import Blas

__all__ = list(_acp.__all__)

_this = sys.modules[__name__]  # the namespace the special cases run on (its asarray keeps -0.0)


def remainder(x1: Any, x2: Any, /) -> Any:
    dt = _cupy.result_type(x1, x2)
    if dt.kind != "f":
        return _acp.remainder(x1, x2)
    a, b = _as_dtype(x1, dt), _as_dtype(x2, dt)
    return python_remainder(_this, a, b, _cupy.fmod(a, b))


remainder.__doc__ = _acp.remainder.__doc__


def _complex_special_cases(name: str, fix):
    cupy_fn = getattr(_acp, name)

    def wrapped(x: Any, /) -> Any:
        out = cupy_fn(x)
        return fix(_this, x, out) if x.dtype.kind == "c" else out

    wrapped.__name__ = name
    wrapped.__doc__ = cupy_fn.__doc__
    return wrapped


log = _complex_special_cases("log", log_special_cases)
log1p = _complex_special_cases("log1p", log1p_special_cases)
acosh = _complex_special_cases("acosh", acosh_special_cases)
tanh = _complex_special_cases("tanh", tanh_special_cases)


def _as_1d(x: Any) -> Any:
    return x.reshape(1) if isinstance(x, _cupy.ndarray) and x.ndim == 0 else x


def _zero_d_safe(fn):
    def wrapped(x1: Any, x2: Any, /) -> Any:
        a, b = _as_1d(x1), _as_1d(x2)
        if a is x1 and b is x2:
            return fn(x1, x2)
        out = fn(a, b)
        return out.reshape(_cupy.broadcast_shapes(getattr(x1, "shape", ()),
                                                  getattr(x2, "shape", ())))
    wrapped.__name__ = fn.__name__
    wrapped.__doc__ = fn.__doc__
    return wrapped


_real_divide = _zero_d_safe(_acp.divide)
_floor_divide = _zero_d_safe(_acp.floor_divide)

# NumPy's npy_floor_divide (npy_divmod), operation for operation
_float_floor_divide = _cupy.ElementwiseKernel(
    "T a, T b", "T out",
    """
    if (b == (T)0) {
      out = a / b;
    } else {
      const T mod = fmod(a, b);
      T div = (a - mod) / b;
      if (mod != (T)0 && ((b < (T)0) != (mod < (T)0))) div -= (T)1;
      if (div != (T)0) {
        T fl = floor(div);
        if (div - fl > (T)0.5) fl += (T)1;
        out = fl;
      } else {
        out = copysign((T)0, a / b);
      }
    }
    """, "vtl_floor_divide")

# NumPy's complex division (Smith's algorithm, with a zero divisor giving inf or nan parts
# as real division does); CuPy's (thrust's) gives nan + nan*j for (1 + 1j) / 0. Products
# and sums are the rounding intrinsics, which the compiler does not contract into fused
# multiply-adds: NumPy rounds each one (an fma left 5e-9 where NumPy gives -0.0).
_complex_divide = _cupy.ElementwiseKernel(
    "T a, T b", "T out",
    """
    const auto ar = a.real(), ai = a.imag(), br = b.real(), bi = b.imag();
    const auto abr = fabs(br), abi = fabs(bi);
    if (abr >= abi) {
      if (abr == 0 && abi == 0) {
        out = T(ar / abr, ai / abr);
      } else {
        const auto rat = bi / br;
        const auto scl = 1 / vtl_add(br, vtl_mul(bi, rat));
        out = T(vtl_mul(vtl_add(ar, vtl_mul(ai, rat)), scl),
                vtl_mul(vtl_add(ai, -vtl_mul(ar, rat)), scl));
      }
    } else {
      const auto rat = br / bi;
      const auto scl = 1 / vtl_add(bi, vtl_mul(br, rat));
      out = T(vtl_mul(vtl_add(vtl_mul(ar, rat), ai), scl),
              vtl_mul(vtl_add(vtl_mul(ai, rat), -ar), scl));
    }
    """, "vtl_complex_divide", preamble="""
    __device__ inline float vtl_mul(float a, float b) { return __fmul_rn(a, b); }
    __device__ inline double vtl_mul(double a, double b) { return __dmul_rn(a, b); }
    __device__ inline float vtl_add(float a, float b) { return __fadd_rn(a, b); }
    __device__ inline double vtl_add(double a, double b) { return __dadd_rn(a, b); }
    """)


def _as_dtype(x: Any, dtype: Any) -> Any:
    if isinstance(x, _cupy.ndarray):
        return x.astype(dtype, copy=False)
    return asarray(x, dtype=dtype)


def _complex(x: Any) -> bool:
    return x.__class__ is complex or getattr(x, "dtype", None) is not None and x.dtype.kind == "c"


def divide(x1: Any, x2: Any, /) -> Any:
    if _complex(x1) or _complex(x2):
        dt = _cupy.result_type(x1, x2)
        return _complex_divide(_as_dtype(x1, dt), _as_dtype(x2, dt))
    return _real_divide(x1, x2)


divide.__doc__ = _acp.divide.__doc__


def floor_divide(x1: Any, x2: Any, /) -> Any:
    dt = _cupy.result_type(x1, x2)
    if dt.kind == "f" and dt.itemsize >= 4:
        return _float_floor_divide(_as_dtype(x1, dt), _as_dtype(x2, dt))
    return _floor_divide(x1, x2)


floor_divide.__doc__ = _acp.floor_divide.__doc__


_arg_kernels: list = []


def _first_index(name: str, largest: bool):
    """``argmax``/``argmin`` with NumPy's answers: the first index of the extreme, the first
    nan, signed zeros equal; one or two launches (``_arg_reduce``), else the portable
    ``_arg_reductions``; complex input goes to CuPy's."""
    cupy_fn = getattr(_acp, name)

    def wrapped(x: Any, /, *, axis: Any = None, keepdims: bool = False) -> Any:
        if x.dtype.kind == "c":
            return cupy_fn(x, axis=axis, keepdims=keepdims)
        if not _arg_kernels:
            from ._arg_reduce import ArgReduce

            _arg_kernels.append(ArgReduce(_cupy))
        out = _arg_kernels[0](x, axis, keepdims, largest)
        if out is not None:
            return out
        return first_arg_extreme(_acp, x, axis, keepdims, largest)

    wrapped.__name__ = name
    wrapped.__doc__ = cupy_fn.__doc__
    return wrapped


argmax = _first_index("argmax", True)
argmin = _first_index("argmin", False)


def asarray(obj: Any, /, *, dtype: Any = None, device: Any = None, copy: Any = None) -> Any:
    if isinstance(obj, (float, _np.floating, _np.complexfloating, complex)) or (
            isinstance(obj, _np.ndarray) and obj.ndim == 0):
        one = _acp.asarray(_np.asarray(obj).reshape(1), dtype=dtype, device=device, copy=copy)
        return one.reshape(())
    return _acp.asarray(obj, dtype=dtype, device=device, copy=copy)


def _negative_zero(value: Any) -> bool:
    return isinstance(value, float) and value == 0 and math.copysign(1.0, value) < 0


def full(shape: Any, fill_value: Any, *, dtype: Any = None, device: Any = None) -> Any:
    if _negative_zero(fill_value):
        out = _acp.full(shape, 0.0, dtype=dtype, device=device)
        return _cupy.negative(out, out=out) if out.dtype.kind == "f" else out
    return _acp.full(shape, fill_value, dtype=dtype, device=device)


def full_like(x: Any, /, fill_value: Any, *, dtype: Any = None, device: Any = None) -> Any:
    if _negative_zero(fill_value):
        out = _acp.full_like(x, 0.0, dtype=dtype, device=device)
        return _cupy.negative(out, out=out) if out.dtype.kind == "f" else out
    return _acp.full_like(x, fill_value, dtype=dtype, device=device)


_blas: Any = None  # the Blas of this module's products (False where it cannot load)


_casts: Any = None  # the float32 <-> float16/bfloat16 cast kernels (loaded on first use)


def astype(x: Any, dtype: Any, /, *, copy: bool = True, device: Any = None) -> Any:
    global _casts
    if device is None and x.__class__ is _cupy.ndarray and x.dtype != dtype:
        if _casts is None:
            from .casts import CupyCasts

            _casts = CupyCasts(_cupy)
        out = _casts(x, dtype)
        if out is not None:
            return out
    return _acp.astype(x, dtype, copy=copy, device=device)


astype.__doc__ = _acp.astype.__doc__


def blas() -> Blas | None:
    """The direct cuBLAS products of this namespace (loaded on first use); ``None`` where
    cuBLAS's symbols cannot be loaded (CuPy's ``matmul`` then serves)."""
    global _blas
    if _blas is None:
        try:
            _blas = Blas(_cupy)
        except (OSError, AttributeError, RuntimeError):  # no cuBLAS symbols: CuPy's path
            _blas = False
    return _blas or None


def matmul(x1: Any, x2: Any, /) -> Any:
    if (isinstance(x1, _cupy.ndarray) and isinstance(x2, _cupy.ndarray)
            and x1.ndim >= 2 and x2.ndim >= 2):
        b = _blas if _blas else blas()
        if b is not None:
            out = b.matmul(x1, x2)
            if out is not None:
                return out
    return _acp.matmul(x1, x2)


_BIG_REDUCTION = 1 << 16


def _reduce_in_stages(fn, x: Any, axis: Any, keepdims: bool, **kw: Any) -> Any:
    if x.size < _BIG_REDUCTION or x.ndim < 2:
        return fn(x, axis=axis, keepdims=keepdims, **kw)
    if not x.flags.c_contiguous:
        x = _cupy.ascontiguousarray(x)
    axes = (tuple(range(x.ndim)) if axis is None else
            tuple(sorted(a % x.ndim for a in ((axis,) if isinstance(axis, int) else axis))))
    k = 0
    while k < len(axes) and axes[len(axes) - 1 - k] == x.ndim - 1 - k:
        k += 1
    if k == 0 or k == len(axes):  # no trailing run, or only one: CuPy's own path
        return fn(x, axis=axes, keepdims=keepdims, **kw)
    part = fn(x, axis=axes[-k:], keepdims=True, **kw)
    out = fn(part, axis=axes[:-k], keepdims=True, **kw)
    if keepdims:
        return out
    return out.reshape(tuple(n for i, n in enumerate(x.shape) if i not in axes))


_F32 = _np.dtype("float32")


def _wide(fn: Any) -> Any:
    """``fn`` of a float16/bfloat16 ``x`` computed in float32 and rounded to ``x``'s dtype
    (when no ``dtype=`` is asked for)."""
    def wide(x: Any, /, **kw: Any) -> Any:
        if x.dtype in LOW_FLOATING and kw.get("dtype") in (None, x.dtype):
            kw.pop("dtype", None)
            return fn(x.astype(_F32), **kw).astype(x.dtype)
        return fn(x, **kw)

    wide.__name__ = wide.__qualname__ = fn.__name__
    wide.__doc__ = fn.__doc__
    return wide


_col_kernels: list = []


def _leading_sum(x: Any, axis: Any, dtype: Any, keepdims: bool) -> Any:
    """``sum`` of a large float32/float64 ``x`` over its leading axes by the nn kernels'
    column sums (summed in double in a fixed order, one or two launches: CuPy's reduction
    over a leading axis reads it column by column); ``None`` where it does not apply."""
    if axis is None or x.ndim < 2 or x.size < _BIG_REDUCTION or x.dtype not in (
            _np.float32, _np.float64) or dtype not in (None, x.dtype):
        return None
    from ._moments import axes_split

    k = axes_split(x.ndim, axis, leading=True)
    if not k or k == x.ndim:  # (no axis reduced, or all: CuPy's own paths)
        return None
    from .nn import _Kernels, column_sums

    if not _col_kernels:
        _col_kernels.append(_Kernels(_cupy))
    rest = x.shape[k:]
    with x.device:
        done = column_sums(_col_kernels[0], _cupy, _cupy.ascontiguousarray(x).reshape(
            math.prod(x.shape[:k]), math.prod(rest)))
    if done is None:
        return None
    return done[0].reshape(((1,) * k if keepdims else ()) + rest)


@_wide
def sum(x: Any, /, *, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Any:
    out = _leading_sum(x, axis, dtype, keepdims)
    if out is not None:
        return out
    return _reduce_in_stages(_acp.sum, x, axis, keepdims, dtype=dtype)


@_wide
def mean(x: Any, /, *, axis: Any = None, keepdims: bool = False) -> Any:
    return _reduce_in_stages(_acp.mean, x, axis, keepdims)


prod = _wide(_acp.prod)
cumulative_sum = _wide(_acp.cumulative_sum)
cumulative_prod = _wide(_acp.cumulative_prod)


def _weak(s: Any, other: Any) -> Any:
    if isinstance(s, (int, float)) and not isinstance(s, bool) \
            and getattr(other, "dtype", None) in LOW_FLOATING:
        return _cupy.asarray(s, dtype=other.dtype)
    return s


def where(condition: Any, x1: Any, x2: Any, /) -> Any:
    return _acp.where(condition, _weak(x1, x2), _weak(x2, x1))


def clip(x: Any, /, min: Any = None, max: Any = None) -> Any:  # noqa: A002
    """The standard's ``clip`` without waiting for the device (array_api_compat's writes
    through boolean masks, which reads a count back): ``maximum``/``minimum`` with the
    bounds in ``x``'s dtype (Python numbers as kernel arguments, no upload); a NaN bound or
    element gives NaN; the result has ``x``'s dtype and the broadcast shape."""
    dt = x.dtype
    if dt.kind in "iu":
        info = _np.iinfo(dt)
        if type(min) is int and min <= info.min:
            min = None
        if type(max) is int and max >= info.max:
            max = None
    host = _np.dtype("float32") if dt == _np.dtype(_ml_dtypes.bfloat16) else dt

    def bound(v: Any) -> Any:
        if isinstance(v, (bool, int, float)):
            return host.type(v)
        return v.astype(dt, copy=False)

    out = x
    if min is not None:
        out = _cupy.maximum(out, bound(min))
    if max is not None:
        out = _cupy.minimum(out, bound(max))
    if out is x:
        return x.copy()
    return out.astype(dt, copy=False)


# CuPy has no bfloat16 loops in most of its ufuncs: it runs them through float32 and
# returns float32. The functions below give bfloat16 back when their floating inputs are
# all bfloat16 (the float32 result rounded once, as PyTorch computes bfloat16 math).
_BF16 = _np.dtype(_ml_dtypes.bfloat16)
_WIDE = frozenset({_F32, _np.dtype("float64"), _np.dtype("float16")})
_KEEP_BF16 = (
    "abs", "acos", "acosh", "add", "asin", "asinh", "atan", "atan2", "atanh", "ceil", "clip",
    "copysign", "cos", "cosh", "divide", "exp", "expm1", "floor", "floor_divide", "hypot",
    "log", "log1p", "log2", "log10", "logaddexp", "maximum", "minimum", "multiply", "negative",
    "nextafter", "positive", "pow", "reciprocal", "remainder", "round", "sign", "sin", "sinh",
    "sqrt", "square", "subtract", "tan", "tanh", "trunc", "where", "max", "min", "matmul",
    "tensordot", "vecdot", "take", "take_along_axis", "concat", "stack",
)


def _bf16_result(args: tuple) -> bool:
    """Whether ``args`` hold a bfloat16 array and no wider floating array."""
    bf = False
    for a in args:
        if isinstance(a, (list, tuple)):
            a = a[0] if a else None
        dt = getattr(a, "dtype", None)
        if dt is None:
            continue
        if dt == _BF16:
            bf = True
        elif dt in _WIDE:
            return False
    return bf


def _keep_bf16(fn: Any) -> Any:
    def op(*args: Any, **kw: Any) -> Any:
        out = fn(*args, **kw)
        if out.__class__ is _cupy.ndarray and out.dtype == _F32 and _bf16_result(args):
            return out.astype(_BF16)
        return out

    op.__name__ = op.__qualname__ = getattr(fn, "__name__", "op")
    op.__doc__ = fn.__doc__
    op.__wrapped__ = fn
    return op


for _name in _KEEP_BF16:
    globals()[_name] = _keep_bf16(globals().get(_name) or getattr(_acp, _name))
del _name


def _two_pass(x: Any) -> bool:
    """Whether ``var``/``std`` of ``x`` run NumPy's two-pass algorithm on the staged
    ``mean``/``sum`` (large float arrays)."""
    return x.dtype.kind == "f" and x.dtype.itemsize >= 4 and x.size >= _BIG_REDUCTION


_moment_kernels: list = []


def _large_var(x: Any, axis: Any, correction: float, keepdims: bool) -> Any:
    """The two-pass variance of a large float array: the fused kernels (``_moments``: over
    all axes or trailing ones), else on the staged ``mean``/``sum``."""
    if not _moment_kernels:
        from ._moments import Moments

        _moment_kernels.append(Moments(_cupy))
    out = _moment_kernels[0].var(x, axis, correction, keepdims)
    if out is not None:
        return out
    return two_pass_var(mean, sum, x, axis, correction, keepdims)


@_wide
def var(x: Any, /, *, axis: Any = None, correction: float = 0.0, keepdims: bool = False
        ) -> Any:
    if _two_pass(x):
        return _large_var(x, axis, correction, keepdims)
    return _acp.var(x, axis=axis, correction=correction, keepdims=keepdims)


@_wide
def std(x: Any, /, *, axis: Any = None, correction: float = 0.0, keepdims: bool = False
        ) -> Any:
    if _two_pass(x):
        return _cupy.sqrt(_large_var(x, axis, correction, keepdims))
    return _acp.std(x, axis=axis, correction=correction, keepdims=keepdims)


var.__doc__ = _acp.var.__doc__
std.__doc__ = _acp.std.__doc__


def __getattr__(name: str) -> Any:
    return getattr(_acp, name)
