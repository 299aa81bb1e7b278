"""Reductions, statistics, argmax/argmin and cumulative sums/products.

A reduction over a run of axes of a contiguous array that leaves at least
``COLS_MIN`` trailing elements (``axis=0`` of a matrix), or at least two when the
run has at most ``COLS_ONE_PASS`` elements, folds columns in place
(``reduce_cols``: one thread per column, a long reduced axis cut into slices,
partial results folded again; a short one in one pass). Every other reduction moves the reduced axes
last (a view), makes that block contiguous when needed (one strided copy) and
reduces rows of length K with the ``reduce`` kernel: one thread per row when
rows are short, else one workgroup per row, and a long row split over up to
``MAX_SPLIT`` workgroups whose partial results (in the accumulator type) a
second dispatch folds. Reading is coalesced in every case (adjacent threads,
adjacent elements). argmax/argmin split rows the same way, carrying (value,
index) pairs. A float32 reduction may divide its output in its last pass (``mean``, ``var``:
no divide kernel after it), and ``var``'s second pass reads each output's centre (the first
pass's sums over the count) from a third binding, so no array of squared deviations is made.
"""

from __future__ import annotations

import builtins

import numpy as np

from . import _dtypes as D
from . import _kernels, _runtime
from ._array import WgpuArray, astype_raw, contiguous, empty, words_for_scalar
from ._array import prod as _prod
from ._elementwise import BINARY, _body, binary, default_float, default_int, unary
from ._manipulation import permute_dims, reshape
from ._recorder import REC, groups_for

_sq_dev = None  # (x - m)**2 as one fused kernel where it can be (set below)

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
    if D.kind(x.dtype) == "c":
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
    moved = [i for i in perm if x.shape[i] != 1]
    if moved != sorted(moved):
        x = permute_dims(x, perm)
    elif perm != list(range(x.ndim)):  # only axes of size 1 move: the same order in memory
        x = reshape(x, tuple(x.shape[i] for i in perm))
    x = contiguous(x)
    kshape = tuple(x.shape[: len(keep)])
    return x, _prod(kshape), _prod(x.shape[len(keep):]), kshape


def _out_shape(shape, axes, keepdims: bool, kshape) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if i in axes else s for i, s in enumerate(shape))
    return kshape


#: most workgroups a row is split over; the elements one split workgroup should get at least
MAX_SPLIT, SPLIT_MIN = 1024, 4096
#: fewest trailing elements for the column kernel; the workgroups a dispatch aims for
COLS_MIN, TARGET_GROUPS = 64, 2048
#: longest reduced axis the column kernel folds in one pass (no partial results), which
#: also takes fewer than COLS_MIN columns (no transpose copy): small shapes, one dispatch
COLS_ONE_PASS = 256


def _split(rows: int, K: int) -> int:
    """Workgroups per row: enough to fill the device when rows are few and long."""
    return builtins.max(1, builtins.min(MAX_SPLIT, K // SPLIT_MIN,
                                            TARGET_GROUPS * 2 // builtins.max(rows, 1)))


def _scratch(nbytes: int) -> WgpuArray:
    """A temporary buffer for partial results (any element type; bound whole)."""
    return empty((-(-nbytes // 4),), D.uint32)


_ACC_BYTES = {"f16": 2, "f32": 4, "i32": 4, "u32": 4, "f64": 8, "i64": 8, "u64": 8,
              "vec2<f32>": 8, "vec2<f64>": 16}


def _divide_fn(name: str) -> str:
    """WGSL ``fn name(x: f32, y: f32) -> f32``: float32 ``x / y`` as the ``divide`` kernel
    divides (correctly rounded where the device has float64)."""
    body = _body(BINARY, "divide", D.float32)
    fn = _DIVIDE_FNS.get((name, body))
    if fn is None:
        fn = _DIVIDE_FNS[(name, body)] = f"fn {name}(x: f32, y: f32) -> f32 {{ {body} }}"
    return fn


_DIVIDE_FNS: dict[tuple[str, str], str] = {}

#: the reduction kernels' ``centre_at`` (``{{CENTRE}}``): none, or (:func:`_centre`) a float32
#: row's (column's) centre for MAP
_NO_CENTRE = "fn centre_at(i: u32) {}"


def _centre() -> str:
    """``centre_at`` setting ``centre`` to the sum in the third binding (from word 8) over
    the count (word 9's bits), divided as ``divide`` divides: the mean the two passes' first
    one would give."""
    return ("@group(0) @binding(2) var<storage, read> CEN: array<f32>;\n"
            "var<private> centre: f32;\n" + _divide_fn("centre_div") + "\n"
            "fn centre_at(i: u32) { centre = centre_div(CEN[pw(8u) + i], bitcast<f32>(pw(9u))); }")


def _pass_args(subs: dict, bufs: tuple, words: list, cen, div) -> tuple:
    """``(subs, sig, bufs, words)`` of a pass: with the centres ``cen`` (``(sums, count's
    float32 bits)``, a pass that reads the input) bound in words 8 and 9, and the divisor
    ``div`` (float32 bits) of the output (``_OUT_DIV``) in word 10."""
    sig = "rw"
    if cen is not None:
        sums, nbits = cen
        subs, sig, bufs = {**subs, "CENTRE": _centre()}, "rwr", (*bufs, sums._st.buf)
        words = [*words, *[0] * (8 - len(words)), sums._offset, nbits]
    if div is not None:
        words = [*words, *[0] * (10 - len(words)), div]
    return subs, sig, bufs, words


#: a float32 reduction's output divided by word 10's float32 as ``divide`` divides (its
#: ``{{OUTDECL}}``: ``_divide_fn("out_div")``)
_OUT_DIV = "wrap_float32(f32(out_div(a, bitcast<f32>(pw(10u)))))"


def _rows_pass(src, off: int, rows: int, K: int, dst, dst_off: int, G: int, subs: dict,
               dts: tuple, cen=None, div=None) -> None:
    small = K <= 64 and G == 1
    subs, sig, bufs, words = _pass_args(subs, (src._st.buf, dst._st.buf),
                                        [rows, K, off, dst_off, 1 if small else 0, G], cen, div)
    k = _kernels.kernel("reduce", sig, dts, **subs)
    REC.dispatch(k, bufs, words, groups_for(rows) if small else rows * G)


_FOLD1 = "acc = comb(acc, mapv(src[base + k]));"
_FOLD4 = ("let v = src[base + k]; acc = comb(acc, mapv(v.x)); acc = comb(acc, mapv(v.y));"
          " acc = comb(acc, mapv(v.z)); acc = comb(acc, mapv(v.w));")


def _reduce_rows(xr: WgpuArray, rows: int, K: int, out: WgpuArray, subs: dict, dts,
                 cen=None, div=None) -> None:
    G = _split(rows, K)
    src, off, k_in = subs, xr._offset, K
    if K > 64 and not K & 3 and not off & 3 and D.itemsize(xr._dtype) == 4:
        src, off, k_in = {**subs, "ST": "vec4<{{T}}>", "FOLD": _FOLD4}, off >> 2, K >> 2
    if G == 1:
        _rows_pass(xr, off, rows, k_in, out, out._offset, 1, src, dts, cen, div)
        return
    acc = subs["A"]
    part = _scratch(rows * G * _ACC_BYTES[acc])
    _rows_pass(xr, off, rows, k_in, part, 0, G, {**src, "R": acc, "OUT": "a"}, dts, cen)
    _rows_pass(part, 0, rows, G, out, out._offset, 1,
               {**subs, "T": acc, "MAP": "return x;"}, dts, div=div)


def _col_split(P: int, K: int, C: int) -> tuple[int, int]:
    """Workgroups across ``C`` columns (256 each) and slices of the reduced axis ``K`` of
    the column kernels: one pass for a short axis, else enough slices for the device."""
    CB = -(-C // 256)
    S = 1 if K <= COLS_ONE_PASS else builtins.max(
        1, builtins.min(MAX_SPLIT, K // 16, TARGET_GROUPS // (P * CB)))
    return CB, S


def _cols(src, off: int, P: int, K: int, C: int, out, out_off: int, subs: dict, dts,
          mapped: bool = False, cen=None, div=None) -> None:
    """out[p, c] = fold over k of src[p, k, c] (contiguous), in passes of slices (``cen``,
    ``div``: the first pass's centres and the output's divisor, :func:`_pass_args`)."""
    CB, S = _col_split(P, K, C)
    acc = subs["A"]
    s2 = {**subs, "T": acc, "MAP": "return x;"} if mapped else subs
    if S == 1:
        s2, sig, bufs, words = _pass_args(s2, (src._st.buf, out._st.buf),
                                          [P, K, C, off, out_off, 1, CB], cen, div)
        REC.dispatch(_kernels.kernel("reduce_cols", sig, dts, **s2), bufs, words, P * CB)
        return
    part = _scratch(P * S * C * _ACC_BYTES[acc])
    s2, sig, bufs, words = _pass_args({**s2, "R": acc, "OUT": "a"}, (src._st.buf, part._st.buf),
                                      [P, K, C, off, 0, S, CB], cen, None)
    REC.dispatch(_kernels.kernel("reduce_cols", sig, dts, **s2), bufs, words, P * S * CB)
    _cols(part, 0, P, S, C, out, out_off, subs, dts, mapped=True, div=div)


def _col_plan(x: WgpuArray, axes: tuple[int, ...]):
    """(P, K, C) when ``x`` is contiguous, ``axes`` are consecutive and at least ``COLS_MIN``
    elements follow them; else None."""
    if not axes or not x._contig or axes[-1] - axes[0] != len(axes) - 1:
        return None
    C = _prod(x.shape[axes[-1] + 1:])
    K = _prod(x.shape[a] for a in axes)
    if C == 1 or (C < COLS_MIN and K > COLS_ONE_PASS):
        return None  # one column: rows of the row kernel (the column kernel's 1 thread of 256)
    return _prod(x.shape[:axes[0]]), K, C


def _reduce(x: WgpuArray, axis, keepdims: bool, fname: str, out_dt: np.dtype, acc: str,
            mapv: str, combine: str, init: str, cen=None, div=None) -> WgpuArray | None:
    """The reduction of ``x`` over ``axis``: ``mapv`` of each element folded by ``combine``
    from ``init`` in the accumulator type ``acc``, stored as ``out_dt``. ``cen``: each output
    element's centre for ``mapv``; ``div``: a float32 output's divisor (float32 bits; see
    :func:`_pass_args`). None with either where the input is over one binding
    (:func:`_fuse.reduce_chunked` binds neither)."""
    axes = _axes(axis, x.ndim, fname)
    dt = x.dtype
    subs = dict(T=D.wgsl(dt), R=D.wgsl(out_dt), A=acc, DT=D.NAME[dt], DR=D.NAME[out_dt],
                MAP=mapv, COMBINE=combine, INIT=init,
                OUT=f"wrap_{D.NAME[out_dt]}({D.wgsl(out_dt)}(a))",
                ST="{{T}}", FOLD=_FOLD1, CENTRE=_NO_CENTRE, OUTDECL="")
    if div is not None:
        subs.update(OUT=_OUT_DIV, OUTDECL=_divide_fn("out_div"))
    dts = (dt, out_dt)
    plan = _col_plan(x, axes)
    if plan is not None and x._st.buf.cap <= _runtime.get().max_binding:
        kshape = tuple(s for i, s in enumerate(x.shape) if i not in axes)
        out = empty(_out_shape(x.shape, axes, keepdims, kshape), out_dt)
        P, K, C = plan
        if P * C:
            _cols(x, x._offset, P, K, C, out, out._offset, subs, dts, cen=cen, div=div)
        return out
    xr, rows, K, kshape = _rows(x, axes)
    out = empty(_out_shape(x.shape, axes, keepdims, kshape), out_dt)
    if rows == 0:
        return out
    if xr._st.buf.cap > _runtime.get().max_binding:  # above one binding: in windows
        if cen is not None or div is not None:
            return None
        from ._fuse import reduce_chunked

        return reduce_chunked(xr, rows, K, out, subs)
    _reduce_rows(xr, rows, K, out, subs, dts, cen, div)
    return out


def _sum_dtype(x: WgpuArray, dtype) -> np.dtype:
    if dtype is not None:
        dt = np.dtype(dtype)
        D.check(dt, _runtime.get().features)
        return dt
    k = D.kind(x.dtype)
    if k == "b" or k == "i":
        return default_int() if x.dtype.itemsize <= default_int().itemsize else x.dtype
    if k == "u":
        return D.uint64 if default_int() == D.int64 else D.uint32
    return x.dtype


def _acc(dt: np.dtype) -> str:
    t = D.wgsl(dt)
    return "f32" if t == "f16" else t


def _cast_in(x: WgpuArray, dt: np.dtype) -> tuple[WgpuArray, str]:
    """(input, MAP body): a bool/integer input is converted to ``dt`` inside the reduction
    (as ``astype``), anything else by ``astype`` first."""
    a = _acc(dt)
    if x.dtype != dt:
        if D.kind(x.dtype) in "biu" and D.kind(dt) in "iuf" and a == D.wgsl(dt):
            return x, cast_body(x.dtype, dt)
        x = astype_raw(x, dt)
    return x, f"return {a}(x);"


def sum(x, /, *, axis=None, dtype=None, keepdims: bool = False) -> WgpuArray:
    x = _arr(x, "sum")
    dt = _sum_dtype(x, dtype)
    x, mp = _cast_in(x, dt)
    a = _acc(dt)
    return _reduce(x, axis, keepdims, "sum", dt, a, mp, "return a + b;", f"{a}(0)")


def prod(x, /, *, axis=None, dtype=None, keepdims: bool = False) -> WgpuArray:
    x = _arr(x, "prod")
    dt = _sum_dtype(x, dtype)
    x, mp = _cast_in(x, dt)
    a = _acc(dt)
    if D.kind(dt) == "c":  # complex product of (real, imag) pairs
        return _reduce(x, axis, keepdims, "prod", dt, a, f"return {a}(x);",
                       "return vec2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);",
                       f"{a}(1.0, 0.0)")
    return _reduce(x, axis, keepdims, "prod", dt, a, mp, "return a * b;", f"{a}(1)")


def _minmax(x, axis, keepdims, fname: str, op: str) -> WgpuArray:
    x = _real(_arr(x, fname), fname)
    axes = _axes(axis, x.ndim, fname)
    if builtins.any(x.shape[a] == 0 for a in axes) or (x.size == 0 and not axes and x.ndim == 0):
        raise ValueError(f"{fname}(): zero-size reduction has no identity")
    dt = x.dtype
    t = D.wgsl(dt)
    if D.kind(dt) == "f":
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
    if D.kind(dt) == "c":  # either part non-zero (or NaN)
        return f"any({t}) || isnan_{dt.name}(x)"
    return f"{t} || isnan_{dt.name}(x)" if D.kind(dt) == "f" else t


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


def _f32_bits(v: float) -> int:
    return words_for_scalar(v, D.float32)[0]


def mean(x, /, *, axis=None, keepdims: bool = False) -> WgpuArray:
    x = _arr(x, "mean")
    n = _count(x, axis)
    if x.dtype == D.float32:  # the sum's last pass divides (the same bits as a divide after)
        out = _reduce(x, axis, keepdims, "mean", D.float32, "f32", "return f32(x);",
                      "return a + b;", "f32(0)", div=_f32_bits(float(n) if n else float("nan")))
        if out is not None:
            return out
    s = sum(x, axis=axis, keepdims=keepdims,
            dtype=None if D.kind(x.dtype) in "fc" else default_float())
    return binary("divide", s, float(n) if n else float("nan"))


def var(x, /, *, axis=None, correction=0.0, keepdims: bool = False) -> WgpuArray:
    x = _real(_arr(x, "var"), "var")
    if D.kind(x.dtype) != "f":
        x = astype_raw(x, default_float())
    n = _count(x, axis)
    dof = n - correction
    dof = float(dof) if dof > 0 else 0.0  # as NumPy: inf (0/0: nan) at or past the count
    if x.dtype == D.float32 and x._st.buf.cap <= _runtime.get().max_binding:
        out = _squared_deviations(x, axis, keepdims, n, dof)
        if out is not None:
            return out
    m = mean(x, axis=axis, keepdims=True)
    return binary("divide", sum(_sq_dev(x, m), axis=axis, keepdims=keepdims), dof)


def _squared_deviations(x: WgpuArray, axis, keepdims: bool, n: int, dof: float
                        ) -> WgpuArray | None:
    """float32 ``var``: the sums of squared deviations from the mean over ``axis`` (of ``n``
    elements) divided by ``dof``, in two passes (accurate): the sums, then one reduction that
    subtracts each output's mean (its sum over ``n``) inside (no array of squared
    deviations) and divides in its last pass. None for an input over one binding."""
    sums = sum(x, axis=axis, keepdims=True)
    return _reduce(x, axis, keepdims, "var", D.float32, "f32", "let d = x - centre; return d * d;",
                   "return a + b;", "f32(0)", cen=(sums, _f32_bits(float(n))),
                   div=_f32_bits(dof))


def _sq_dev_fn(x, m):
    d = x - m
    return d * d


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
    out_dt = default_int()
    dt = xr.dtype
    t, r = D.wgsl(dt), D.wgsl(out_dt)
    subs = dict(T=t, DT=dt.name, OP=op, IN=t, OUT=r, LOAD="return Pair(src[j], k);",
                STORE=f"dst[j] = {r}(p.i);")
    isz = builtins.max(D.itemsize(dt), 4)
    pair = -(-(isz + 4) // isz) * isz  # bytes of one (value, index) pair
    plan = _col_plan(xr, axes) if axis is not None else None
    if plan is not None and xr._st.buf.cap <= _runtime.get().max_binding:
        kshape = tuple(s for i, s in enumerate(x.shape) if i not in axes)
        out = empty(_out_shape(x.shape, axes, keepdims, kshape), out_dt)
        P, K, C = plan
        if P * C:
            _arg_cols(xr, xr._offset, P, K, C, out, subs, pair, (dt, out_dt))
        return out
    xc, rows, K, kshape = _rows(xr, axes)
    if axis is None:
        shape = (1,) * x.ndim if keepdims else ()
    else:
        shape = _out_shape(x.shape, axes, keepdims, kshape)
    out = empty(shape, out_dt)
    G = _split(rows, K)
    if G > 1:  # (value, index) pairs of row parts, then one workgroup per row
        part = _scratch(rows * G * pair)
        k = _kernels.kernel("argreduce", "rw", (dt, out_dt),
                            **{**subs, "OUT": "Pair", "STORE": "dst[j] = p;"})
        REC.dispatch(k, (xc._st.buf, part._st.buf), [rows, K, xc._offset, 0, G], rows * G)
        subs.update(IN="Pair", LOAD="return src[j];")
        xc, K = part, G
    k = _kernels.kernel("argreduce", "rw", (dt, out_dt), **subs)
    REC.dispatch(k, (xc._st.buf, out._st.buf), [rows, K, 0 if G > 1 else xc._offset, 0, 1],
                 rows)
    return out


def _arg_cols(src, off: int, P: int, K: int, C: int, out, subs: dict, pair: int,
              dts: tuple) -> None:
    """argmax/argmin over the middle axis of a contiguous (P, K, C) block, in passes of
    slices carrying (value, index) pairs."""
    CB, S = _col_split(P, K, C)
    if S == 1:
        k = _kernels.kernel("argreduce_cols", "rw", dts, **subs)
        REC.dispatch(k, (src._st.buf, out._st.buf), [P, K, C, off, out._offset, 1, CB],
                     P * CB)
        return
    part = _scratch(P * S * C * pair)
    k = _kernels.kernel("argreduce_cols", "rw", dts,
                        **{**subs, "OUT": "Pair", "STORE": "dst[j] = p;"})
    REC.dispatch(k, (src._st.buf, part._st.buf), [P, K, C, off, 0, S, CB], P * S * CB)
    _arg_cols(part, 0, P, S, C, out, {**subs, "IN": "Pair", "LOAD": "return src[j];"}, pair,
              dts)


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
    if rows and K > SCAN_PARALLEL_K and D.kind(dt) != "c":
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


from ._fuse import cast_body, fuse  # noqa: E402
from ._sorting import SCAN_PARALLEL_K, scan_rows  # noqa: E402

_sq_dev = fuse(_sq_dev_fn)


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
