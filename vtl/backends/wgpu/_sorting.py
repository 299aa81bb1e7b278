"""Sorting, searching and sets on the device: sort, argsort, searchsorted, isin, the
unique_* functions, diff, and the parallel row scan behind cumulative_sum/prod.

Sorting is a bitonic sort of (key, id) pairs. Each value becomes an order-preserving
unsigned key (one 32-bit word, two for 64-bit dtypes): integers with the sign bit
flipped, floats with their bits flipped as by sign, every NaN the largest key and -0.0
the key of 0.0; descending order complements the key. The id (the element's position
along the sorted axis) breaks ties, so the sort is stable in both directions, as the
standard asks (equal elements keep their order; NaNs last ascending, first descending).
Rows along the axis are padded to a power of two P with the largest key, and all rows
sort at once: tiles of up to 4096 pairs sort in workgroup memory, larger merges take
global passes (up to four steps each, 16 elements per thread). One long row of 32-bit
keys (``RADIX_MIN`` or more) instead sorts by a stable LSD radix sort: 8 passes of
4-bit digits, each a tile histogram, a prefix sum and a stable scatter.
``searchsorted`` and ``isin`` are binary searches
over the same keys; ``unique_*`` sort the flattened input, flag group starts, prefix-sum
the flags and scatter, with one readback (the number of unique values) because the
result size depends on the data.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import _dtypes as D
from . import _kernels, _runtime
from ._array import WgpuArray, contiguous, empty, from_numpy, to_numpy, view
from ._elementwise import binary, default_int
from ._manipulation import concat, permute_dims, reshape
from ._recorder import REC, groups_for

_E = 16  # elements per thread in the register-blocked global steps (sort_step.wgsl)


def _tile(key_bytes: int) -> int:
    """Elements per workgroup of sort_local.wgsl: the largest power of two (1024 to 4096)
    whose keys and ids fit in the device's workgroup memory."""
    lim = int(_runtime.get().limits.get("max-compute-workgroup-storage-size", 16384))
    t = 4096
    while t > 1024 and t * (key_bytes + 4) > lim:
        t //= 2
    return t


class UniqueAllResult(NamedTuple):
    values: WgpuArray
    indices: WgpuArray
    inverse_indices: WgpuArray
    counts: WgpuArray


class UniqueCountsResult(NamedTuple):
    values: WgpuArray
    counts: WgpuArray


class UniqueInverseResult(NamedTuple):
    values: WgpuArray
    inverse_indices: WgpuArray


# -- keys -----------------------------------------------------------------------------

def _keyfn(dt: np.dtype, descending: bool = False) -> tuple[str, str]:
    """(key type, WGSL source of key(x), kmax(), kless(a, b), keq(a, b) and
    pair_gt(ka, ia, kb, ib)) for values of ``dt``; ``descending`` complements the key."""
    t = D.wgsl(dt)
    wide = t in ("i64", "u64", "f64")
    if not wide:
        kt = "u32"
        if t == "u32":
            body = "return x;"
        elif t == "i32":
            body = "return bitcast<u32>(x) ^ 0x80000000u;"
        else:  # f32, f16: through the f32 bits (f16 -> f32 is exact and monotonic)
            body = ("var b = bitcast<u32>(f32(x));\n"
                    "  if ((b & 0x7fffffffu) > 0x7f800000u) { return 0xffffffffu; }\n"
                    "  if ((b & 0x7fffffffu) == 0u) { b = 0u; }\n"
                    "  return select(b ^ 0x80000000u, ~b, (b >> 31u) != 0u);")
        inv = "~" if descending else ""
        fns = (f"fn key0(x: {t}) -> u32 {{\n  {body}\n}}\n"
               f"fn key(x: {t}) -> u32 {{ return {inv}key0(x); }}\n"
               "fn kmax() -> u32 { return 0xffffffffu; }\n"
               "fn kless(a: u32, b: u32) -> bool { return a < b; }\n"
               "fn keq(a: u32, b: u32) -> bool { return a == b; }\n")
    else:
        kt = "vec2<u32>"
        split = "return vec2<u32>(u32(b >> 32u), u32(b & 0xfffffffflu));"
        if t == "u64":
            body = f"let b = x; {split}"
        elif t == "i64":
            body = f"let b = bitcast<u64>(x) ^ 0x8000000000000000lu; {split}"
        else:
            body = ("var b = bitcast<u64>(x);\n"
                    "  let a = b & 0x7ffffffffffffffflu;\n"
                    "  if (a > 0x7ff0000000000000lu) { return vec2<u32>(0xffffffffu); }\n"
                    "  if (a == 0lu) { b = 0lu; }\n"
                    "  if ((b >> 63u) != 0lu) { b = ~b; } else { b = b ^ 0x8000000000000000lu; }\n"
                    f"  {split}")
        inv = "~" if descending else ""
        fns = (f"fn key0(x: {t}) -> vec2<u32> {{\n  {body}\n}}\n"
               f"fn key(x: {t}) -> vec2<u32> {{ return {inv}key0(x); }}\n"
               "fn kmax() -> vec2<u32> { return vec2<u32>(0xffffffffu); }\n"
               "fn kless(a: vec2<u32>, b: vec2<u32>) -> bool {\n"
               "  return a.x < b.x || (a.x == b.x && a.y < b.y);\n}\n"
               "fn keq(a: vec2<u32>, b: vec2<u32>) -> bool { return all(a == b); }\n")
    fns += (f"fn pair_gt(ka: {kt}, ia: u32, kb: {kt}, ib: u32) -> bool {{\n"
            "  return kless(kb, ka) || (keq(ka, kb) && ib < ia);\n}\n")
    return kt, fns


def _check_sortable(x, fname: str) -> WgpuArray:
    if not isinstance(x, WgpuArray):
        raise TypeError(f"{fname}() expected a WgpuArray, got {type(x).__name__}")
    if D.kind(x.dtype) not in "biuf":
        raise TypeError(f"{fname}() needs a real-valued array, got dtype {x.dtype}")
    return x


def _on_host(x: WgpuArray) -> bool:
    """float64 keys need 64-bit integers on the device; without them, compute on the host."""
    return D.wgsl(x.dtype) == "f64" and "shader-int64" not in _runtime.get().features


def _host_call(name: str, *args, **kwargs):
    """``name`` from the standard-conforming NumPy namespace, through host memory."""
    import array_api_compat.numpy as hnp

    conv = [to_numpy(a) if isinstance(a, WgpuArray) else a for a in args]
    kw = {k: to_numpy(v) if isinstance(v, WgpuArray) else v for k, v in kwargs.items()}
    res = getattr(hnp, name)(*conv, **kw)
    idt = default_int()

    def up(r):
        r = np.asarray(r)
        return from_numpy(r.astype(idt) if D.kind(r.dtype) in "iu" and r.dtype != idt
                          and name != "unique_values" else r)

    return type(res)(*(up(r) for r in res)) if isinstance(res, tuple) else up(res)


def _axis(axis, ndim: int, fname: str) -> int:
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{fname}() expected an int for axis, got {axis!r}")
    n = max(ndim, 1)
    if not -n <= axis < n:
        raise IndexError(f"{fname}(): axis {axis} is out of bounds for a {ndim}-D array")
    return int(axis) % n


def _pow2(k: int) -> int:
    return 1 << max(k - 1, 0).bit_length()


def _sort_rows(xr: WgpuArray, descending: bool):
    """Sort the rows of the contiguous (rows, K) block ``xr``: (keys, ids, P), the sorted
    keys and the row positions they came from, rows padded to P."""
    rows, K = xr.shape
    P = _pow2(K)
    N = rows * P
    if N >= 1 << 32:
        raise ValueError(f"sort(): {rows} rows of {K} elements are too many for the device")
    dt = xr.dtype
    kt, fns = _keyfn(dt, descending)
    keys = empty((N * (2 if kt != "u32" else 1),), D.uint32)
    ids = empty((N,), D.uint32)
    kk = _kernels.kernel("sort_keys", "rww", (dt,), T=D.wgsl(dt), KT=kt, KEYFN=fns)
    if rows == 1 and kt == "u32" and K >= RADIX_MIN:
        # one long row of 32-bit keys: LSD radix sort (8 passes of 4 bits), no padding
        REC.dispatch(kk, (xr._st.buf, keys._st.buf, ids._st.buf), [K, K, K, xr._offset],
                     groups_for(K))
        keys, ids = _radix(keys, ids, K)
        return keys, ids, K
    REC.dispatch(kk, (xr._st.buf, keys._st.buf, ids._st.buf), [N, K, P, xr._offset],
                 groups_for(N))
    if P > 1:
        bufs = (keys._st.buf, ids._st.buf)
        tile = _tile(4 if kt == "u32" else 8)
        loc = _kernels.kernel("sort_local", "ww", (dt,), KT=kt, KEYFN=fns, TILE=tile)
        tiles = groups_for(N, tile)
        REC.dispatch(loc, bufs, [N, P, 2, min(P, tile), 1], tiles)
        k = 2 * tile
        while k <= P:
            # the steps j = k/2 ... tile go through global memory, up to log2(_E) at once
            j = k // 2
            while j >= tile:
                e = min(_E, 2 * j // tile)
                step = _kernels.kernel("sort_step", "ww", (dt,), KT=kt, KEYFN=fns, E=e)
                REC.dispatch(step, bufs, [N // e, P, k, j], groups_for(N // e))
                j //= e
            REC.dispatch(loc, bufs, [N, P, k, k, tile // 2], tiles)
            k *= 2
    return keys, ids, P


#: one row at least this long with 32-bit keys sorts by radix (``_radix``), else bitonic
RADIX_MIN = 1 << 15


def _radix(keys: WgpuArray, ids: WgpuArray, n: int) -> tuple[WgpuArray, WgpuArray]:
    """Stable LSD radix sort of the first ``n`` u32 ``keys`` (ids = positions): per 4-bit
    digit, tile histograms, their prefix sums over the tiles (one workgroup per digit)
    and a stable scatter; three dispatches per digit."""
    k = _kernels.kernel("sort_radix", "rrwww", ())
    tiles = groups_for(n, 1024)
    hist = empty((16 * tiles + 16,), D.uint32)
    other = (empty((n,), D.uint32), empty((n,), D.uint32))
    cur = (keys, ids)
    for p, shift in enumerate(range(0, 32, 4)):
        bufs = (cur[0]._st.buf, cur[1]._st.buf, other[0]._st.buf, other[1]._st.buf,
                hist._st.buf)
        first = 1 if p == 0 else 0
        REC.dispatch(k, bufs, [n, tiles, shift, 0, first], tiles)
        REC.dispatch(k, bufs, [n, tiles, shift, 2, first], 16)
        REC.dispatch(k, bufs, [n, tiles, shift, 1, first], tiles)
        cur, other = other, cur
    return cur


def _sort_out(xr: WgpuArray, ids: WgpuArray, P: int, out_dt: np.dtype, values: bool):
    rows, K = xr.shape
    out = empty((rows, K), out_dt)
    n = rows * K
    expr = "src[pw(3u) + s * K + id]" if values else f"{D.wgsl(out_dt)}(id)"
    k = _kernels.kernel("sort_out", "rrw", (xr.dtype, out_dt), T=D.wgsl(xr.dtype),
                        R=D.wgsl(out_dt), EXPR=expr)
    REC.dispatch(k, (xr._st.buf, ids._st.buf, out._st.buf), [n, K, P, xr._offset],
                 groups_for(n))
    return out


def _sort_impl(x, axis, descending: bool, fname: str, values: bool) -> WgpuArray:
    x = _check_sortable(x, fname)
    out_dt = x.dtype if values else default_int()
    if x.ndim == 0:
        _axis(axis, 0, fname)
        if values:
            return contiguous_copy(x)
        return from_numpy(np.zeros((), out_dt))
    ax = _axis(axis, x.ndim, fname)
    if x.size == 0:
        return empty(x.shape, out_dt)
    if _on_host(x):
        return _host_call(fname, x, axis=ax, descending=descending)
    perm = [i for i in range(x.ndim) if i != ax] + [ax]
    xt = permute_dims(x, perm) if ax != x.ndim - 1 else x
    xr = reshape(contiguous(xt), (-1, x.shape[ax]))
    _, ids, P = _sort_rows(xr, descending)
    out = reshape(_sort_out(xr, ids, P, out_dt, values), xt.shape)
    if ax != x.ndim - 1:
        inv = [0] * x.ndim
        for i, p in enumerate(perm):
            inv[p] = i
        out = permute_dims(out, inv)
    return out


def contiguous_copy(x: WgpuArray) -> WgpuArray:
    from ._array import copy_into

    out = empty(x.shape, x.dtype)
    copy_into(x, out)
    return out


def sort(x, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> WgpuArray:
    """``x`` sorted along ``axis`` (always stable; NaNs last ascending, first descending)."""
    return _sort_impl(x, axis, descending, "sort", True)


def argsort(x, /, *, axis: int = -1, descending: bool = False,
            stable: bool = True) -> WgpuArray:
    """Indices (default index dtype) that sort ``x`` along ``axis``; always stable, also
    when descending (equal elements keep their order)."""
    return _sort_impl(x, axis, descending, "argsort", False)


# -- searching ------------------------------------------------------------------------

def _operand(v, dt: np.dtype) -> WgpuArray:
    from ._creation import asarray

    if isinstance(v, WgpuArray):
        return v if v.dtype == dt else _astype(v, dt)
    return asarray(v, dtype=dt)


def _astype(x: WgpuArray, dt: np.dtype) -> WgpuArray:
    from ._array import astype_raw

    return astype_raw(x, dt)


def _search(x1: WgpuArray, x2: WgpuArray, mode: int, out_dt: np.dtype) -> WgpuArray:
    """Binary search of each element of ``x2`` in the sorted 1-D ``x1`` (same dtype)."""
    x1 = contiguous(x1)
    x2c = contiguous(x2)
    out = empty(x2.shape, out_dt)
    n = x2.size
    if n == 0:
        return out
    dt = x1.dtype
    _, fns = _keyfn(dt)
    k = _kernels.kernel("search", "rrw", (dt, out_dt), T=D.wgsl(dt), R=D.wgsl(out_dt),
                        D=dt.name, KEYFN=fns)
    REC.dispatch(k, (x1._st.buf, x2c._st.buf, out._st.buf),
                 [n, x1.size, x1._offset, x2c._offset, mode], groups_for(n))
    return out


def searchsorted(x1, x2, /, *, side: str = "left", sorter=None) -> WgpuArray:
    """Insertion indices of ``x2`` into the ascending 1-D ``x1`` (or ``x1[sorter]``), in
    sort order (NaNs last, -0.0 equal to 0.0); default index dtype."""
    from ._indexing import take
    from ._info import result_type

    x1 = _check_sortable(x1, "searchsorted")
    if x1.ndim != 1:
        raise ValueError(f"searchsorted() needs a 1-D x1, got shape {x1.shape}")
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted(): side must be 'left' or 'right', got {side!r}")
    dt = result_type(x1, x2)
    a = _operand(x1, dt)
    b = _operand(x2, dt)
    _check_sortable(b, "searchsorted")
    if sorter is not None:
        if not isinstance(sorter, WgpuArray) or D.kind(sorter.dtype) not in "iu":
            raise TypeError("searchsorted(): sorter must be an integer WgpuArray")
        if a.size:
            a = take(a, sorter)
    if _on_host(a):
        return _host_call("searchsorted", a, b, side=side)
    return _search(a, b, 1 if side == "right" else 0, default_int())


def isin(x1, x2, /, *, invert: bool = False) -> WgpuArray:
    """Whether each element of ``x1`` equals an element of ``x2`` (bool, the shape of
    ``x1``); NaN is never found, -0.0 equals 0.0. Sorts ``x2`` and binary-searches."""
    from ._creation import full
    from ._info import result_type

    if not isinstance(x1, WgpuArray) and not isinstance(x2, WgpuArray):
        raise TypeError("isin() needs at least one WgpuArray argument")
    dt = result_type(x1, x2)
    a = _operand(x1, dt)
    b = _operand(x2, dt)
    if D.kind(dt) == "c":  # no order on complex values: through the host
        return from_numpy(np.asarray(np.isin(to_numpy(a), to_numpy(b), invert=invert)))
    _check_sortable(a, "isin")
    if b.size == 0:
        return full(a.shape, bool(invert), dtype=D.bool_)
    if _on_host(a):
        return from_numpy(np.asarray(np.isin(to_numpy(a), to_numpy(b), invert=invert)))
    bs = sort(reshape(b, (-1,)))
    return _search(bs, a, 3 if invert else 2, D.bool_)


# -- sets -----------------------------------------------------------------------------

def _scan_u32(a: WgpuArray) -> None:
    """In-place inclusive prefix sum of the contiguous uint32 ``a`` (offset 0)."""
    n = a.size
    k = _kernels.kernel("sort_scan", "ww", ())
    blocks = groups_for(n, 1024)
    sums = empty((blocks,), D.uint32)
    REC.dispatch(k, (a._st.buf, sums._st.buf), [n, 0], blocks)
    if blocks > 1:
        _scan_u32(sums)
        REC.dispatch(k, (a._st.buf, sums._st.buf), [n, 1], blocks)


def _unique(x, fname: str):
    """(values, indices, inverse (shape of x), counts) of the flattened ``x``."""
    if isinstance(x, WgpuArray) and D.kind(x.dtype) == "c":  # no device sort key for complex
        return tuple(_host_call("unique_all", x))
    x = _check_sortable(x, fname)
    idt = default_int()
    n = x.size
    if n == 0:
        e = empty((0,), idt)
        return empty((0,), x.dtype), e, empty(x.shape, idt), e
    if _on_host(x):
        return tuple(_host_call("unique_all", x))
    xr = reshape(contiguous(x), (1, n))
    keys, ids, _ = _sort_rows(xr, False)
    dt = x.dtype
    kt, fns = _keyfn(dt)
    subs = dict(T=D.wgsl(dt), KT=kt, R=D.wgsl(idt), KEYFN=fns,
                NANKEY="true" if D.kind(dt) == "f" else "false")
    k = _kernels.kernel("unique", "rrrwwww", (dt, idt), **subs)
    g = empty((n,), D.uint32)
    dummy = empty((1,), D.uint32)
    dvals = empty((1,), dt)
    didx = empty((1,), idt)
    REC.dispatch(k, (xr._st.buf, keys._st.buf, ids._st.buf, g._st.buf, dvals._st.buf,
                     didx._st.buf, dummy._st.buf), [n, xr._offset, 0, 0], groups_for(n))
    _scan_u32(g)
    U = int(to_numpy(view(g, (1,), (1,), n - 1))[0])  # the one readback: the result size
    values = empty((U,), dt)
    idx = empty((U + n,), idt)
    se = empty((2 * U,), D.uint32)
    REC.dispatch(k, (xr._st.buf, keys._st.buf, ids._st.buf, g._st.buf, values._st.buf,
                     idx._st.buf, se._st.buf), [n, xr._offset, 1, U], groups_for(n))
    indices = view(idx, (U,), (1,), 0)
    inverse = reshape(view(idx, (n,), (1,), U), x.shape)
    counts = _astype(binary("subtract", view(se, (U,), (1,), U), view(se, (U,), (1,), 0)),
                     idt)
    return values, indices, inverse, counts


def unique_values(x, /) -> WgpuArray:
    """Distinct values of the flattened ``x``, sorted; each NaN is distinct, -0.0 and 0.0
    are one value."""
    return _unique(x, "unique_values")[0]


def unique_counts(x, /) -> UniqueCountsResult:
    v, _, _, c = _unique(x, "unique_counts")
    return UniqueCountsResult(v, c)


def unique_inverse(x, /) -> UniqueInverseResult:
    v, _, inv, _ = _unique(x, "unique_inverse")
    return UniqueInverseResult(v, inv)


def unique_all(x, /) -> UniqueAllResult:
    return UniqueAllResult(*_unique(x, "unique_all"))


# -- diff -----------------------------------------------------------------------------

def diff(x, /, *, axis: int = -1, n: int = 1, prepend=None, append=None) -> WgpuArray:
    """n-th discrete difference along ``axis`` (``x[1:] - x[:-1]``, repeated ``n`` times);
    bool arrays give ``x[1:] != x[:-1]`` as NumPy."""
    if not isinstance(x, WgpuArray):
        raise TypeError(f"diff() expected a WgpuArray, got {type(x).__name__}")
    if x.ndim == 0:
        raise ValueError("diff() requires an array of at least one dimension")
    ax = _axis(axis, x.ndim, "diff")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"diff(): n must be a non-negative int, got {n!r}")
    parts = [p for p in (prepend, x, append) if p is not None]
    if len(parts) > 1:
        x = concat(parts, axis=ax)
    elif n == 0:
        return contiguous_copy(x)
    for _ in range(int(n)):
        m = x.shape[ax]
        if m == 0:
            break
        hi = tuple(slice(1, None) if d == ax else slice(None) for d in range(x.ndim))
        lo = tuple(slice(None, m - 1) if d == ax else slice(None) for d in range(x.ndim))
        x = binary("not_equal" if x.dtype == D.bool_ else "subtract", x[hi], x[lo])
    return x


# -- scans ----------------------------------------------------------------------------

#: rows longer than this scan in parallel blocks (``scan_rows``) rather than one thread
#: per row (lavapipe also caps a shader loop at 65,535 iterations)
SCAN_PARALLEL_K = 64


def scan_rows(xt: WgpuArray, out: WgpuArray, op: str, init: str, include_initial: bool) -> None:
    """Inclusive scan (``op`` '+' or '*') along the rows of the contiguous (..., K) array
    ``xt`` into the new contiguous ``out`` (..., K + include_initial), blocks of 1024 in
    parallel: per-block scans, a scan of the block totals (recursively), a combine pass.
    Real dtypes only."""
    K = xt.shape[-1]
    rows = xt.size // K if K else 0
    if rows == 0:
        return
    dt = xt.dtype
    t = D.wgsl(dt)
    nbk = -(-K // 1024)
    k = _kernels.kernel("scan_rows", "rww", (dt,), T=t, D=dt.name, OP=op, INIT=f"{t}({init})")
    sums = empty((rows, nbk), dt)
    kinit = 1 if include_initial else 0
    REC.dispatch(k, (xt._st.buf, out._st.buf, sums._st.buf),
                 [rows, K, xt._offset, kinit, 0, nbk], rows * nbk)
    if nbk > 1:
        scanned = empty((rows, nbk), dt)
        scan_rows(sums, scanned, op, init, False)
        REC.dispatch(k, (xt._st.buf, out._st.buf, scanned._st.buf),
                     [rows, K, xt._offset, kinit, 1, nbk], rows * nbk)


# -- nonzero --------------------------------------------------------------------------

def nonzero(x: WgpuArray) -> tuple[WgpuArray, ...]:
    """Indices of the non-zero elements of ``x`` (one default-int array per dimension,
    row-major order), on the device: flags, a prefix sum, one readback (the count), a
    scatter of the coordinates. Complex arrays and more than 24 dimensions go through
    the host."""
    idt = default_int()
    if D.kind(x.dtype) == "c" or x.ndim > 24:
        return tuple(from_numpy(i.astype(idt)) for i in np.nonzero(to_numpy(x)))
    n = x.size
    if n == 0:
        return tuple(empty((0,), idt) for _ in range(x.ndim))
    xc = contiguous(x)
    dt = xc.dtype
    truthy = f"x != {D.wgsl(dt)}(0)"
    if D.kind(dt) == "f":  # NaN is non-zero even where != compiles as an ordered compare
        truthy += f" || isnan_{dt.name}(x)"
    k = _kernels.kernel("nonzero", "rww", (dt, idt), T=D.wgsl(dt), R=D.wgsl(idt),
                        TRUTHY=truthy)
    g = empty((n,), D.uint32)
    dummy = empty((1,), idt)
    REC.dispatch(k, (xc._st.buf, g._st.buf, dummy._st.buf), [n, xc._offset, 0, 0, 0],
                 groups_for(n))
    _scan_u32(g)
    c = int(to_numpy(view(g, (1,), (1,), n - 1))[0])  # the one readback: the result size
    out = empty((x.ndim * c,), idt)
    if c:
        REC.dispatch(k, (xc._st.buf, g._st.buf, out._st.buf),
                     [n, xc._offset, 1, c, x.ndim, *x.shape], groups_for(n))
    return tuple(view(out, (c,), (1,), d * c) for d in range(x.ndim))
