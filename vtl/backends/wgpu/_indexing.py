"""Indexing: basic (views), integer-array and boolean (gather/scatter kernels), take,
take_along_axis, nonzero and the scatter_add extra.

Integer index arrays are checked as NumPy checks them: an index outside ``[-n, n)`` is an
``IndexError``. Indices in host memory (Python ints and lists, NumPy arrays) and device
arrays whose values are known on the host (uploaded data, ``_memory.Buf.known``) are
checked at the call; other device indices by the kernel that wraps them
(:func:`check_indices`), which records the first bad one in the thread's error buffer: the
``IndexError`` is raised by the thread's next readback or ``synchronize()`` (``_errors``).
No kernel reads or writes out of bounds.
"""

from __future__ import annotations

import operator

import numpy as np

from . import _dtypes as D
from . import _errors, _kernels
from ._array import (
    WgpuArray,
    astype_raw,
    broadcast_shapes,
    c_strides,
    contiguous,
    copy_into,
    empty,
    from_numpy,
    prod,
    to_numpy,
    view,
)
from ._elementwise import binary
from ._manipulation import broadcast_to, permute_dims, reshape
from ._memory import set_known
from ._recorder import REC, groups_for


def _is_index_array(k) -> bool:
    return isinstance(k, (WgpuArray, np.ndarray, list))


def _expand(key, ndim: int):
    if not isinstance(key, tuple):
        key = (key,)
    n_ell = sum(1 for k in key if k is Ellipsis)
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = 0
    for k in key:
        if k is None or k is Ellipsis:
            continue
        if _is_index_array(k) and _as_index_dtype(k) == D.bool_:
            used += np.ndim(k) if not isinstance(k, WgpuArray) else k.ndim
        else:
            used += 1
    if used > ndim:
        raise IndexError(f"too many indices for array: array is {ndim}-D, {used} were indexed")
    if n_ell:
        i = key.index(Ellipsis)
        key = key[:i] + (slice(None),) * (ndim - used) + key[i + 1:]
    else:
        key = key + (slice(None),) * (ndim - used)
    return key


def _as_index_dtype(k):
    if isinstance(k, WgpuArray):
        return k.dtype
    return np.asarray(k).dtype


def _basic(x: WgpuArray, key) -> WgpuArray:
    shape, strides = [], []
    off = x._offset
    d = 0
    for k in key:
        if k is None:
            shape.append(1)
            strides.append(0)
            continue
        size, st = x._shape[d], x._strides[d]
        if isinstance(k, slice):
            start, stop, step = k.indices(size)
            n = len(range(start, stop, step))
            if n:
                off += start * st
            shape.append(n)
            strides.append(st * step)
        else:
            try:
                i = operator.index(k)
            except TypeError:
                raise IndexError(f"unsupported index {k!r}") from None
            if not -size <= i < size:
                raise IndexError(f"index {i} is out of bounds for axis {d} with size {size}")
            off += (i % size) * st
        d += 1
    return view(x, shape, strides, off)


def _bool_key(key):
    """A Python bool, alone or as the only entry of a tuple, as a 0-d boolean mask."""
    k = key[0] if isinstance(key, tuple) and len(key) == 1 else key
    if isinstance(k, (bool, np.bool_)):
        from ._creation import asarray

        return asarray(bool(k))
    return key


def getitem(x: WgpuArray, key) -> WgpuArray:
    return _getitem(x, key, None)


def _getitem(x: WgpuArray, key, fill: str | None) -> WgpuArray:
    if type(key) is tuple and len(key) == 2 and key[1] is Ellipsis:
        key = key[0]
    if type(key) is int and x._shape:  # x[i], x[i, ...]: the hot path of per-step loops
        n = x._shape[0]
        if -n <= key < n:
            return view(x, x._shape[1:], x._strides[1:], x._offset + (key % n) * x._strides[0])
    key = _bool_key(key)
    if isinstance(key, WgpuArray) and key.dtype == D.bool_ and key.ndim == 0:
        # a new leading axis of size 1, or 0 for a False mask (as NumPy)
        v = _basic(x, (None,) + (slice(None),) * x.ndim)
        return _copy(v if bool(key) else _basic(v, (slice(0, 0),) + (slice(None),) * x.ndim))
    key = _expand(key, x.ndim)
    if not any(_is_index_array(k) for k in key):
        if any(isinstance(k, bool) for k in key):
            raise IndexError("boolean scalar indices are not supported")
        return _basic(x, key)
    return _advanced(x, key, fill)


def _advanced(x: WgpuArray, key, fill: str | None = None) -> WgpuArray:
    # boolean masks -> integer index arrays (data-dependent: reads the mask back)
    k2 = []
    d = 0  # the dimension of x that k indexes first
    for k in key:
        if _is_index_array(k) and _as_index_dtype(k) == D.bool_:
            ms = tuple(k.shape) if isinstance(k, WgpuArray) else np.shape(k)
            if any(m not in (s, 0) for m, s in zip(ms, x.shape[d:], strict=False)):
                raise IndexError(f"boolean index of shape {ms} does not match the indexed "
                                 f"dimensions {x.shape[d:d + len(ms)]}")
            d += len(ms)
            k2.extend(nonzero(k) if isinstance(k, WgpuArray) and k.ndim else
                      np.nonzero(to_numpy(k) if isinstance(k, WgpuArray) else np.asarray(k)))
        else:
            d += k is not None
            k2.append(k)
    key = tuple(k2)
    # ints and slices first (a view); index arrays keep full dims
    basic_key = []
    arrays = []
    for k in key:
        if _is_index_array(k):
            basic_key.append(slice(None))
            arrays.append(k)
        else:
            basic_key.append(k)
            arrays.append(None)
    y = _basic(x, basic_key)
    # positions in y of the array-indexed dims
    pos, arrs, d = [], [], 0
    for k, a in zip(key, arrays, strict=False):
        if k is None:
            d += 1
            continue
        if a is not None:
            pos.append(d)
            arrs.append(a)
            d += 1
        elif isinstance(k, slice):
            d += 1
    for a in arrs:
        if _as_index_dtype(a).kind not in "iu":
            raise IndexError(f"index arrays must be integers, got {_as_index_dtype(a)}")
    rest = [i for i in range(y.ndim) if i not in pos]
    yp = contiguous(permute_dims(y, pos + rest))
    ishape = yp.shape[: len(pos)]
    xaxes = _array_axes(key)
    total = prod(ishape)
    strides = c_strides(ishape)
    # an index that fails its check becomes one that puts the flat row out of range
    idx = [check_indices(a, s, ax, bad=-(-total // max(st, 1)))
           if isinstance(a, WgpuArray) else _host_index(a, s, ax)
           for a, s, ax, st in zip(arrs, ishape, xaxes, strides, strict=False)]
    bshape = broadcast_shapes(*(a.shape for a in idx))
    flat = None
    stride = 1
    for a, s in reversed(list(zip(idx, ishape, strict=False))):
        term = binary("multiply", a, stride) if stride != 1 else a
        flat = term if flat is None else binary("add", flat, term)
        stride *= s
    flat = contiguous(broadcast_to(flat, bshape))
    out = _gather(yp, flat, 1, total, prod(yp.shape[len(pos):]), fill)
    out = reshape(out, bshape + yp.shape[len(pos):])
    adjacent = pos == list(range(pos[0], pos[0] + len(pos)))
    if adjacent and pos[0] > 0:
        nb = len(bshape)
        p0 = pos[0]
        order = list(range(nb, nb + p0)) + list(range(nb)) + list(range(nb + p0, out.ndim))
        out = permute_dims(out, order)
    return out


_CHECK_SUBS = {
    "i32": {"WRAP": "if (w < 0) { w += n; }", "NONNEG": " && w >= 0",
            "LO": "bitcast<u32>(v)", "HI": "select(0u, 0xffffffffu, v < 0)"},
    "u32": {"WRAP": "", "NONNEG": "", "LO": "v", "HI": "0u"},
    "i64": {"WRAP": "if (w < i64(0)) { w += n; }", "NONNEG": " && w >= i64(0)",
            "LO": "u32(bitcast<u64>(v) & u64(0xffffffffu))",
            "HI": "u32(bitcast<u64>(v) >> 32u)"},
    "u64": {"WRAP": "", "NONNEG": "", "LO": "u32(v & u64(0xffffffffu))", "HI": "u32(v >> 32u)"},
}


def _host_error(bad: int, n: int, axis: int, what: str) -> IndexError:
    return IndexError(f"{what}index {bad} is out of bounds for axis {axis} with size {n}")


def check_indices(idx: WgpuArray, n: int, axis: int = 0, what: str = "",
                  dtype: np.dtype | None = None, bad: int | None = None, *,
                  negative: bool = True) -> WgpuArray:
    """``idx`` (integers) wrapped from ``[-n, n)`` to ``[0, n)`` as a contiguous array of
    ``dtype`` (default: int32, or the input's own int32/int64 when no kernel is needed):
    the indices of an axis of size ``n``. ``negative=False``: the valid range is ``[0, n)``,
    negative indices are out of range too (and the message names the range).

    Out-of-range indices raise ``IndexError`` naming the index, ``axis`` and ``n`` (with the
    prefix ``what``, e.g. ``"take(): "``): at once when the values are known on the host,
    else at the thread's next readback (module doc); the result then holds ``bad``
    (default ``n``) there, a value that the gather and scatter kernels skip.
    """
    if D.kind(idx.dtype) not in "iu":
        raise IndexError(f"{what}index arrays must be integers, got {idx.dtype}")
    odt = D.int32 if dtype is None else np.dtype(dtype)
    if idx.size == 0:
        return astype_raw(idx, odt) if idx.dtype != odt else contiguous(idx)
    if n == 0:
        raise IndexError(f"{what}index is out of bounds for axis {axis} with size 0")
    kr = idx._st.buf.known
    if kr is not None and kr[0] >= 0 and kr[1] < n:  # valid, none negative: no kernel
        keep = idx.dtype == odt or (dtype is None and idx.dtype in (D.int32, D.int64))
        return contiguous(idx if keep else astype_raw(idx, odt))
    src = contiguous(idx)
    out = empty(src.shape, odt)
    subs = dict(_CHECK_SUBS[D.wgsl(src.dtype)])
    if not negative:
        subs["WRAP"] = ""  # a negative index fails the check
    k = _kernels.kernel("index_check", "rww", (src.dtype, odt), I=D.wgsl(src.dtype),
                        O=D.wgsl(odt), **subs)
    m = src.size
    code = _errors.code(what) if negative else _errors.code(what, _errors.NONNEG_INDEX)
    REC.dispatch(k, (src._st.buf, out._st.buf, _errors.buffer()),
                 [m, n, src._offset, out._offset, axis, code,
                  n if bad is None else bad], groups_for(m))
    set_known(out._st.buf, (0, n - 1, None))  # every value is in range (or an error raised)
    return out


def _host_index(k, n: int, axis: int, what: str = "") -> WgpuArray:
    """A host index array (list, NumPy), checked and wrapped on the host, uploaded as int32."""
    a = np.asarray(k)
    if D.kind(a.dtype) not in "iu":
        raise IndexError(f"{what}index arrays must be integers, got {a.dtype}")
    if a.size:
        lo, hi = int(a.min()), int(a.max())
        if lo < -n or hi >= n:
            raise _host_error(lo if lo < -n else hi, n, axis, what)
        if lo < 0:
            a = np.where(a < 0, a + n, a)
    return from_numpy(a.astype(np.int32))


def _array_axes(key) -> list[int]:
    """The axis of the indexed array that each index array of ``key`` indexes."""
    axes, d = [], 0
    for k in key:
        if k is None:
            continue
        if _is_index_array(k):
            axes.append(d)
        d += 1
    return axes


def _gather(src: WgpuArray, idx: WgpuArray, pre: int, A: int, post: int,
            fill: str | None = None) -> WgpuArray:
    """out[q, j, p] = src[q, idx[j], p] with src contiguous (pre, A, post); ``fill`` (WGSL,
    default zero) where ``idx[j]`` is outside ``[-A, A)``."""
    known = src._st.buf.known  # gathered values stay in the source's known range
    src = contiguous(src)
    idx = contiguous(idx)
    nidx = idx.size
    out = empty((pre * nidx * post,), src.dtype)
    n = out.size
    if n:
        if A == 0:
            raise IndexError("cannot take from an empty axis")
        t = D.wgsl(src.dtype)
        k = _kernels.kernel("gather", "rrw", (src.dtype,), T=t, I=D.wgsl(idx.dtype),
                            FILL=fill or f"{t}(0)")
        REC.dispatch(k, (src._st.buf, idx._st.buf, out._st.buf),
                     [n, nidx, post, A, src._offset, idx._offset, 0], groups_for(n))
        if known is not None:
            set_known(out._st.buf, known)
    return out


def take(x: WgpuArray, indices: WgpuArray, /, *, axis: int | None = None) -> WgpuArray:
    if not isinstance(x, WgpuArray) or not isinstance(indices, WgpuArray):
        raise TypeError("take() expects WgpuArray arguments")
    if D.kind(indices.dtype) not in "iu":
        raise TypeError(f"take(): indices must be integers, got {indices.dtype}")
    if axis is None:
        if x.ndim != 1:
            raise ValueError("take(): axis is required for arrays with more than 1 dimension")
        axis = 0
    if not -x.ndim <= axis < x.ndim:
        raise IndexError(f"take(): axis {axis} is out of bounds for a {x.ndim}-D array")
    ax = axis % x.ndim
    pre, A, post = prod(x.shape[:ax]), x.shape[ax], prod(x.shape[ax + 1:])
    idx = check_indices(indices, A, ax, "take(): ") if A or not indices.size else indices
    out = _gather(x, idx, pre, A, post)
    return reshape(out, x.shape[:ax] + indices.shape + x.shape[ax + 1:])


def take_along_axis(x: WgpuArray, indices: WgpuArray, /, *, axis: int = -1) -> WgpuArray:
    from ._creation import arange

    if x.ndim != indices.ndim:
        raise ValueError("take_along_axis(): x and indices need the same number of dimensions")
    if not -x.ndim <= axis < x.ndim:
        raise IndexError(f"take_along_axis(): axis {axis} is out of bounds")
    ax = axis % x.ndim
    shape = list(broadcast_shapes(
        tuple(s for i, s in enumerate(x.shape) if i != ax),
        tuple(s for i, s in enumerate(indices.shape) if i != ax)))
    shape.insert(ax, indices.shape[ax])
    shape = tuple(shape)
    xc = contiguous(x)
    cs = c_strides(x.shape)
    A = x.shape[ax]
    if D.kind(indices.dtype) not in "iu":
        raise TypeError(f"take_along_axis(): indices must be integers, got {indices.dtype}")
    idx = check_indices(indices, A, ax, "take_along_axis(): ") if A else indices
    if idx.dtype != D.int32:
        idx = astype_raw(idx, D.int32)
    flat = binary("multiply", idx, cs[ax]) if cs[ax] != 1 else idx
    for d in range(x.ndim):
        if d == ax or shape[d] == 1:
            continue
        r = arange(shape[d], dtype=D.int32)
        r = reshape(binary("multiply", r, cs[d]), tuple(shape[d] if i == d else 1
                                                        for i in range(x.ndim)))
        flat = binary("add", flat, r)
    flat = contiguous(broadcast_to(flat, shape))
    return reshape(_gather(xc, flat, 1, xc.size, 1), shape)


def _storage_ids(x: WgpuArray) -> WgpuArray:
    """An int32 array of x's shape holding each element's offset in its buffer."""
    from ._creation import arange, full

    ids = full(x.shape, x._offset, dtype=D.int32)
    for d, (s, st) in enumerate(zip(x.shape, x._strides, strict=False)):
        if s > 1 and st:
            r = reshape(binary("multiply", arange(s, dtype=D.int32), st),
                        tuple(s if i == d else 1 for i in range(x.ndim)))
            ids = binary("add", ids, r)
    return ids


def setitem(x: WgpuArray, key, value) -> None:
    from ._creation import fill_view

    key = _bool_key(key)
    keyt = _expand(key if not isinstance(key, WgpuArray) or key.ndim else (key,), x.ndim) \
        if not (isinstance(key, WgpuArray) and key.ndim == 0 and key.dtype == D.bool_) else key
    if isinstance(keyt, tuple) and not any(_is_index_array(k) for k in keyt):
        target = _basic(x, keyt)
        if isinstance(value, WgpuArray):
            if value._st is x._st:
                value = contiguous(value) if not value._contig else _copy(value)
            value = _drop_leading_ones(value, target.ndim)
            if broadcast_shapes(value.shape, target.shape) != target.shape:
                raise ValueError(
                    f"could not broadcast value of shape {value.shape} into {target.shape}")
            copy_into(value, target)
        else:
            fill_view(target, _scalar(value, x.dtype))
        return
    sel = contiguous(_getitem(_storage_ids(x), key, "-1"))  # -1: a failed index, skipped
    if isinstance(value, WgpuArray):
        v = value if value.dtype == x.dtype else astype_raw(value, x.dtype)
        v = _drop_leading_ones(v, sel.ndim)
        v = contiguous(broadcast_to(v, sel.shape))
        if v._st is x._st:
            v = _copy(v)
    else:
        from ._creation import full

        v = full(sel.shape, _scalar(value, x.dtype), dtype=x.dtype)
    n = sel.size
    if n:
        k = _kernels.kernel("scatter", "rrwr", (x.dtype,), T=D.wgsl(x.dtype))
        REC.dispatch(k, (sel._st.buf, v._st.buf, x._st.buf, _errors.buffer(write=False)),
                     [n, 0, sel._offset, v._offset], groups_for(n))


def _drop_leading_ones(v: WgpuArray, ndim: int) -> WgpuArray:
    """``v`` without leading size-1 dims beyond ``ndim`` (NumPy's assignment rule)."""
    k = 0
    while v.ndim - k > ndim and v.shape[k] == 1:
        k += 1
    return view(v, v.shape[k:], v._strides[k:], v._offset) if k else v


def _copy(v: WgpuArray) -> WgpuArray:
    out = empty(v.shape, v.dtype)
    copy_into(v, out)
    return out


def _scalar(value, dt: np.dtype):
    if isinstance(value, np.generic):
        value = value.item()
    if not isinstance(value, (bool, int, float, complex)):
        raise TypeError(f"cannot assign a {type(value).__name__} to a wgpu array")
    if D.kind(dt) == "c":
        return complex(value)
    if isinstance(value, complex):
        raise TypeError(f"cannot assign a complex to an array of dtype {dt}")
    if dt == D.bool_:
        return bool(value)
    if D.kind(dt) in "iu":
        if isinstance(value, float):
            raise TypeError(f"cannot assign a float to an array of dtype {dt}")
        return int(value)
    return float(value)


def nonzero(x: WgpuArray, /) -> tuple[WgpuArray, ...]:
    """Indices of non-zero elements, on the device (data-dependent: reads back the count)."""
    from ._sorting import nonzero as nonzero_device

    if x.ndim == 0:
        raise ValueError("nonzero() is not defined for 0-d arrays")
    return nonzero_device(x)


#: float32 -> float16 bits, rounded to nearest even (overflow to inf, nan kept): defined for
#: every input, where pack2x16float is not outside float16's finite range
_F16_BITS = """
fn f16_bits(f: f32) -> u32 {
  let u = bitcast<u32>(f);
  let s = (u >> 16u) & 0x8000u;
  let a = u & 0x7fffffffu;
  if (a > 0x7f800000u) { return s | 0x7e00u | ((a >> 13u) & 0x3ffu); }
  if (a >= 0x47800000u) { return s | 0x7c00u; }
  if (a >= 0x38800000u) { return s | ((a - 0x38000000u + 0xfffu + ((a >> 13u) & 1u)) >> 13u); }
  let e = a >> 23u;
  if (e < 102u) { return s; }
  let m = (a & 0x7fffffu) | 0x800000u;
  let sh = 126u - e;
  var r = m >> sh;
  let rem = m & ((1u << sh) - 1u);
  let half = 1u << (sh - 1u);
  if (rem > half || (rem == half && (r & 1u) == 1u)) { r += 1u; }
  return s | r;
}
"""


def scatter_add(target: WgpuArray, indices: WgpuArray, values: WgpuArray) -> WgpuArray:
    """``target[indices[i]] += values[i]`` along axis 0, repeated indices accumulating.

    Updates ``target`` in place and returns it. 32-bit dtypes, float16 and bfloat16 use
    atomics on the device (one dispatch: float16 a compare-exchange loop on the 32-bit
    word holding the element, each sum rounded once; bfloat16 on its float32 word, rounded
    to bfloat16); other dtypes go through the host.
    """
    if not target._contig:
        raise ValueError("scatter_add(): target must be contiguous")
    rowsize = prod(target.shape[1:])
    k = indices.size
    if values.dtype != target.dtype:
        values = astype_raw(values, target.dtype)
    if k == 0 or rowsize == 0:
        return target
    t = D.wgsl(target.dtype)
    if t not in ("f32", "f16", "i32", "u32"):
        host = to_numpy(target)
        np.add.at(host, to_numpy(indices).astype(np.int64), to_numpy(values))
        copy_into(from_numpy(host), target)
        return target
    n0 = target.shape[0]
    idx = check_indices(reshape(indices, (k,)), n0, 0, "scatter_add(): ")
    v = values
    if not (v._contig and v._shape == (k,) + target.shape[1:]):
        v = contiguous(broadcast_to(values, (k,) + target.shape[1:]))
    n = k * rowsize
    helpers = ""
    if t == "f32":
        at = "u32"
        add = ("var old = atomicLoad(&dst[j]);\n  loop {\n"
               "    let r = atomicCompareExchangeWeak(&dst[j], old, "
               f"bitcast<u32>(wrap_{target.dtype.name}(bitcast<f32>(old) + v)));\n"
               "    if (r.exchanged) { break; }\n    old = r.old_value;\n  }")
    elif t == "f16":  # the element is one half of a 32-bit word; the other keeps its bits
        at = "u32"
        add = ("let w = j >> 1u;\n  let sh = (j & 1u) * 16u;\n"
               "  var old = atomicLoad(&dst[w]);\n  loop {\n"
               "    let bits = f16_bits(unpack2x16float(old)[j & 1u] + f32(v));\n"
               "    let nw = (old & ~(0xffffu << sh)) | (bits << sh);\n"
               "    let r = atomicCompareExchangeWeak(&dst[w], old, nw);\n"
               "    if (r.exchanged) { break; }\n    old = r.old_value;\n  }")
        helpers = _F16_BITS
    else:
        at = t
        add = "atomicAdd(&dst[j], v);"
    kern = _kernels.kernel("scatter_add", "rrw", (target.dtype,), T=t, AT=at, ADD=add,
                           I=D.wgsl(idx.dtype), HELPERS=helpers)
    REC.dispatch(kern, (idx._st.buf, v._st.buf, target._st.buf),
                 [n, target._offset, idx._offset, v._offset, rowsize,
                  idx._strides[0] if idx.ndim else 0, n0], groups_for(n))
    return target
