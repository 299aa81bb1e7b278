"""Reductions, statistics, argmax/argmin and cumulative sums/products.

Every reduction moves the reduced axes last (a view), makes that block
contiguous when needed (one strided copy) and reduces rows of length K with
the ``reduce`` kernel: one workgroup per row, or one thread per row when rows
are short.
"""

from __future__ import annotations

import builtins

import numpy as np

from . import _dtypes as D
from . import _kernels, _runtime
from ._array import WgpuArray, astype_raw, contiguous, empty
from ._array import prod as _prod
from ._elementwise import binary, default_float, default_int, unary
from ._manipulation import permute_dims, reshape
from ._recorder import REC, groups_for

_MAXLIT = {"i32": "2147483647i", "u32": "4294967295u", "i64": "9223372036854775807li",
           "u64": "18446744073709551615lu"}
_MINLIT = {"i32": "(-2147483647i - 1i)", "u32": "0u", "i64": "(-9223372036854775807li - 1li)",
           "u64": "0lu"}


def _arr(x, fname: str) -> WgpuArray:
    if not isinstance(x, WgpuArray):
        raise TypeError(f"{fname}() expected a WgpuArray, got {type(x).__name__}")
    return x


def _real(x: WgpuArray, fname: str) -> WgpuArray:
    """``x``, or a ``TypeError``: complex numbers have no order (the standard's real-only
    reductions)."""
    if x.dtype.kind == "c":
        raise TypeError(f"{fname}() is not defined for complex dtypes (got {x.dtype})")
    return x


def _axes(axis, ndim: int, fname: str) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = []
    for a in axes:
        if not -builtins.max(ndim, 1) <= a < builtins.max(ndim, 1):
            raise IndexError(f"{fname}(): axis {a} is out of bounds for a {ndim}-D array")
        out.append(int(a) % builtins.max(ndim, 1))
    if len(set(out)) != len(out):
        raise ValueError(f"{fname}(): repeated axis in {axes}")
    return tuple(sorted(a for a in out if a < ndim))


def _rows(x: WgpuArray, axes: tuple[int, ...]):
    """(contiguous block with reduced axes last, rows, K, kept shape)."""
    keep = [i for i in range(x.ndim) if i not in axes]
    perm = keep + list(axes)
    if perm != list(range(x.ndim)):
        x = permute_dims(x, perm)
    x = contiguous(x)
    kshape = tuple(x.shape[: len(keep)])
    return x, _prod(kshape), _prod(x.shape[len(keep):]), kshape


def _out_shape(shape, axes, keepdims: bool, kshape) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if i in axes else s for i, s in enumerate(shape))
    return kshape


def _reduce(x: WgpuArray, axis, keepdims: bool, fname: str, out_dt: np.dtype, acc: str,
            mapv: str, combine: str, init: str) -> WgpuArray:
    axes = _axes(axis, x.ndim, fname)
    xr, rows, K, kshape = _rows(x, axes)
    out = empty(_out_shape(x.shape, axes, keepdims, kshape), out_dt)
    if rows == 0:
        return out
    dt = xr.dtype
    if xr._st.buf.cap > _runtime.get().max_binding:  # above one binding: in windows
        from ._fuse import reduce_chunked

        return reduce_chunked(xr, rows, K, out, dict(
            T=D.wgsl(dt), R=D.wgsl(out_dt), A=acc, DT=dt.name, DR=out_dt.name, MAP=mapv,
            COMBINE=combine, INIT=init))
    k = _kernels.kernel(
        "reduce", "rw", (dt, out_dt), T=D.wgsl(dt), R=D.wgsl(out_dt), A=acc, DT=dt.name,
        DR=out_dt.name, MAP=mapv, COMBINE=combine, INIT=init,
    )
    small = K <= 64
    words = [rows, K, xr._offset, 0, 1 if small else 0]
    REC.dispatch(k, (xr._st.buf, out._st.buf), words, groups_for(rows) if small else rows)
    return out


def _sum_dtype(x: WgpuArray, dtype) -> np.dtype:
    if dtype is not None:
        dt = np.dtype(dtype)
        D.check(dt, _runtime.get().features)
        return dt
    k = x.dtype.kind
    if k == "b" or k == "i":
        return default_int() if x.dtype.itemsize <= default_int().itemsize else x.dtype
    if k == "u":
        return D.uint64 if default_int() == D.int64 else D.uint32
    return x.dtype


def _acc(dt: np.dtype) -> str:
    t = D.wgsl(dt)
    return "f32" if t == "f16" else t


def sum(x, /, *, axis=None, dtype=None, keepdims: bool = False) -> WgpuArray:
    x = _arr(x, "sum")
    dt = _sum_dtype(x, dtype)
    if x.dtype != dt:
        x = astype_raw(x, dt)
    a = _acc(dt)
    return _reduce(x, axis, keepdims, "sum", dt, a, f"return {a}(x);", "return a + b;",
                   f"{a}(0)")


def prod(x, /, *, axis=None, dtype=None, keepdims: bool = False) -> WgpuArray:
    x = _arr(x, "prod")
    dt = _sum_dtype(x, dtype)
    if x.dtype != dt:
        x = astype_raw(x, dt)
    a = _acc(dt)
    if dt.kind == "c":  # complex product of (real, imag) pairs
        return _reduce(x, axis, keepdims, "prod", dt, a, f"return {a}(x);",
                       "return vec2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);",
                       f"{a}(1.0, 0.0)")
    return _reduce(x, axis, keepdims, "prod", dt, a, f"return {a}(x);", "return a * b;",
                   f"{a}(1)")


def _minmax(x, axis, keepdims, fname: str, op: str) -> WgpuArray:
    x = _real(_arr(x, fname), fname)
    axes = _axes(axis, x.ndim, fname)
    if builtins.any(x.shape[a] == 0 for a in axes) or (x.size == 0 and not axes and x.ndim == 0):
        raise ValueError(f"{fname}(): zero-size reduction has no identity")
    dt = x.dtype
    t = D.wgsl(dt)
    if dt.kind == "f":
        n = dt.name
        comb = f"if (isnan_{n}(a) || isnan_{n}(b)) {{ return a + b; }} return {op}(a, b);"
        init = f"{'' if op == 'min' else '-'}inf_{dt.name}()"
    else:
        comb = f"return {op}(a, b);"
        init = (_MAXLIT if op == "min" else _MINLIT)[t]
    return _reduce(x, axes, keepdims, fname, dt, t, "return x;", comb, init)


def max(x, /, *, axis=None, keepdims: bool = False) -> WgpuArray:  # noqa: A001
    return _minmax(x, axis, keepdims, "max", "max")


def min(x, /, *, axis=None, keepdims: bool = False) -> WgpuArray:  # noqa: A001
    return _minmax(x, axis, keepdims, "min", "min")


def _truthy(dt: np.dtype) -> str:
    """WGSL test ``x != 0`` (NaN counts as true even where != compiles as ordered)."""
    t = f"x != {D.wgsl(dt)}(0)"
    if dt.kind == "c":  # either part non-zero (or NaN)
        return f"any({t}) || isnan_{dt.name}(x)"
    return f"{t} || isnan_{dt.name}(x)" if dt.kind == "f" else t


def all(x, /, *, axis=None, keepdims: bool = False) -> WgpuArray:  # noqa: A001
    x = _arr(x, "all")
    return _reduce(x, axis, keepdims, "all", D.bool_, "u32",
                   f"return select(0u, 1u, {_truthy(x.dtype)});", "return a & b;", "1u")


def any(x, /, *, axis=None, keepdims: bool = False) -> WgpuArray:  # noqa: A001
    x = _arr(x, "any")
    return _reduce(x, axis, keepdims, "any", D.bool_, "u32",
                   f"return select(0u, 1u, {_truthy(x.dtype)});", "return a | b;", "0u")


def count_nonzero(x, /, *, axis=None, keepdims: bool = False) -> WgpuArray:
    x = _arr(x, "count_nonzero")
    dt = default_int()
    a = D.wgsl(dt)
    return _reduce(x, axis, keepdims, "count_nonzero", dt, a,
                   f"return select({a}(0), {a}(1), {_truthy(x.dtype)});",
                   "return a + b;", f"{a}(0)")


def _count(x: WgpuArray, axis) -> int:
    return _prod(x.shape[a] for a in _axes(axis, x.ndim, "mean"))


def mean(x, /, *, axis=None, keepdims: bool = False) -> WgpuArray:
    x = _arr(x, "mean")
    if x.dtype.kind not in "fc":
        x = astype_raw(x, default_float())
    n = _count(x, axis)
    s = sum(x, axis=axis, keepdims=keepdims)
    return binary("divide", s, float(n) if n else float("nan"))


def var(x, /, *, axis=None, correction=0.0, keepdims: bool = False) -> WgpuArray:
    x = _real(_arr(x, "var"), "var")
    if x.dtype.kind != "f":
        x = astype_raw(x, default_float())
    n = _count(x, axis)
    m = mean(x, axis=axis, keepdims=True)
    d = binary("subtract", x, m)
    s = sum(binary("multiply", d, d), axis=axis, keepdims=keepdims)
    dof = n - correction
    return binary("divide", s, float(dof) if dof > 0 else float("nan"))


def std(x, /, *, axis=None, correction=0.0, keepdims: bool = False) -> WgpuArray:
    _real(_arr(x, "std"), "std")
    return unary("sqrt", var(x, axis=axis, correction=correction, keepdims=keepdims))


def _arg(x, axis, keepdims: bool, fname: str, op: str) -> WgpuArray:
    x = _real(_arr(x, fname), fname)
    if axis is None:
        xr = reshape(x, (-1,))
        axes = (0,)
    else:
        xr = x
        axes = _axes(axis, x.ndim, fname)
        if x.ndim == 0:
            axes = ()
    if xr.ndim and builtins.any(xr.shape[a] == 0 for a in axes):
        raise ValueError(f"{fname}(): attempt to get {fname} of an empty sequence")
    xc, rows, K, kshape = _rows(xr, axes)
    if axis is None:
        shape = (1,) * x.ndim if keepdims else ()
    else:
        shape = _out_shape(x.shape, axes, keepdims, kshape)
    out_dt = default_int()
    out = empty(shape, out_dt)
    dt = xc.dtype
    k = _kernels.kernel("argreduce", "rw", (dt, out_dt), T=D.wgsl(dt), R=D.wgsl(out_dt),
                        DT=dt.name, OP=op)
    REC.dispatch(k, (xc._st.buf, out._st.buf), [rows, K, xc._offset, 0], rows)
    return out


def argmax(x, /, *, axis: int | None = None, keepdims: bool = False) -> WgpuArray:
    return _arg(x, axis, keepdims, "argmax", ">")


def argmin(x, /, *, axis: int | None = None, keepdims: bool = False) -> WgpuArray:
    return _arg(x, axis, keepdims, "argmin", "<")


def _scan(x, axis, dtype, include_initial: bool, fname: str, op: str, init: str) -> WgpuArray:
    x = _arr(x, fname)
    if axis is None:
        if x.ndim > 1:
            raise ValueError(f"{fname}(): axis is required for arrays with more than 1 dimension")
        if x.ndim == 0:
            x = reshape(x, (1,))
        axis = 0
    ax = _axes(axis, x.ndim, fname)[0]
    dt = _sum_dtype(x, dtype)
    if x.dtype != dt:
        x = astype_raw(x, dt)
    perm = [i for i in range(x.ndim) if i != ax] + [ax]
    xt = contiguous(permute_dims(x, perm))
    rows, K = _prod(xt.shape[:-1]), xt.shape[-1]
    kinit = 1 if include_initial else 0
    out_t = empty(xt.shape[:-1] + (K + kinit,), dt)
    if rows and K > SCAN_PARALLEL_K and dt.kind != "c":
        scan_rows(xt, out_t, op, init, include_initial)
    elif rows:
        k = _kernels.kernel("scan", "rw", (dt,), T=D.wgsl(dt), D=dt.name, OP=op,
                            INIT=f"{D.wgsl(dt)}({init})")
        REC.dispatch(k, (xt._st.buf, out_t._st.buf), [rows, K, xt._offset, 0, kinit],
                     groups_for(rows))
    inv = [0] * x.ndim
    for i, p in enumerate(perm):
        inv[p] = i
    return permute_dims(out_t, inv)


from ._sorting import SCAN_PARALLEL_K, scan_rows  # noqa: E402


def cumulative_sum(x, /, *, axis: int | None = None, dtype=None,
                   include_initial: bool = False) -> WgpuArray:
    return _scan(x, axis, dtype, include_initial, "cumulative_sum", "+", "0")


def cumulative_prod(x, /, *, axis: int | None = None, dtype=None,
                    include_initial: bool = False) -> WgpuArray:
    if _arr(x, "cumulative_prod").dtype.kind == "c" or (dtype is not None
                                                         and np.dtype(dtype).kind == "c"):
        from ._complex import cumulative_prod as cumprod_complex

        return cumprod_complex(x, axis, dtype, include_initial)
    return _scan(x, axis, dtype, include_initial, "cumulative_prod", "*", "1")
