"""Manipulation functions: views where the layout allows, strided copies otherwise."""

from __future__ import annotations

import numpy as np

from . import _dtypes as D
from ._array import (
    WgpuArray,
    astype_raw,
    broadcast_shapes,
    broadcast_strides,
    c_strides,
    copy_into,
    empty,
    prod,
    view,
)


def _arr(x, fname: str) -> WgpuArray:
    if not isinstance(x, WgpuArray):
        raise TypeError(f"{fname}() expected a WgpuArray, got {type(x).__name__}")
    return x


def _axis(axis: int, ndim: int, fname: str) -> int:
    if not -ndim <= axis < ndim:
        raise IndexError(f"{fname}(): axis {axis} is out of bounds for a {ndim}-D array")
    return axis % ndim


def reshape(x: WgpuArray, /, shape, *, copy: bool | None = None) -> WgpuArray:
    x = _arr(x, "reshape")
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    if shape.count(-1) > 1:
        raise ValueError("reshape(): at most one dimension may be -1")
    n = x.size
    if -1 in shape:
        rest = prod(s for s in shape if s != -1)
        if rest == 0 or n % rest:
            raise ValueError(f"reshape(): cannot reshape an array of size {n} into {shape}")
        shape = tuple(n // rest if s == -1 else s for s in shape)
    if prod(shape) != n or any(s < 0 for s in shape):
        raise ValueError(f"reshape(): cannot reshape an array of size {n} into shape {shape}")
    if x._contig and not copy:
        return view(x, shape, c_strides(shape), x._offset)
    if copy is False:
        raise ValueError("reshape(copy=False): the array is not contiguous, a copy is needed")
    out = empty(shape, x._dtype)
    copy_into(x, _as(out, x._shape))
    return out


def _as(out: WgpuArray, shape) -> WgpuArray:
    """``out`` (contiguous) viewed with ``shape`` (same size)."""
    return view(out, tuple(shape), c_strides(tuple(shape)), out._offset)


def permute_dims(x: WgpuArray, /, axes) -> WgpuArray:
    x = _arr(x, "permute_dims")
    axes = tuple(_axis(a, x.ndim, "permute_dims") for a in axes)
    if sorted(axes) != list(range(x.ndim)):
        raise ValueError(f"permute_dims(): axes {axes} are not a permutation of {x.ndim} dims")
    return view(x, tuple(x._shape[a] for a in axes), tuple(x._strides[a] for a in axes),
                x._offset)


def matrix_transpose(x: WgpuArray, /) -> WgpuArray:
    return _arr(x, "matrix_transpose").mT


def expand_dims(x: WgpuArray, /, axis=0) -> WgpuArray:
    x = _arr(x, "expand_dims")
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    nd = x.ndim + len(axes)
    norm = sorted(_axis(a, nd, "expand_dims") for a in axes)
    if len(set(norm)) != len(norm):
        raise ValueError("expand_dims(): repeated axis")
    shape, strides = list(x._shape), list(x._strides)
    for a in norm:
        shape.insert(a, 1)
        strides.insert(a, 0)
    return view(x, shape, strides, x._offset)


def squeeze(x: WgpuArray, /, axis) -> WgpuArray:
    x = _arr(x, "squeeze")
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    norm = {_axis(a, x.ndim, "squeeze") for a in axes}
    for a in norm:
        if x._shape[a] != 1:
            raise ValueError(f"squeeze(): axis {a} has size {x._shape[a]}, not 1")
    keep = [i for i in range(x.ndim) if i not in norm]
    return view(x, [x._shape[i] for i in keep], [x._strides[i] for i in keep], x._offset)


def broadcast_to(x: WgpuArray, /, shape) -> WgpuArray:
    x = _arr(x, "broadcast_to")
    shape = tuple(int(s) for s in shape)
    if len(shape) < x.ndim or broadcast_shapes(x._shape, shape) != shape:
        raise ValueError(f"broadcast_to(): cannot broadcast shape {x._shape} to {shape}")
    return view(x, shape, broadcast_strides(x, shape), x._offset)


def broadcast_arrays(*arrays: WgpuArray) -> list[WgpuArray]:
    shape = broadcast_shapes(*(a.shape for a in arrays))
    return [broadcast_to(a, shape) for a in arrays]


def _common(arrays, fname: str) -> np.dtype:
    if not arrays:
        raise ValueError(f"{fname}() needs at least one array")
    dt = arrays[0].dtype
    for a in arrays[1:]:
        dt = D.result_type(dt, _arr(a, fname).dtype)
    return dt


def concat(arrays, /, *, axis: int | None = 0) -> WgpuArray:
    arrays = [_arr(a, "concat") for a in arrays]
    dt = _common(arrays, "concat")
    if axis is None:
        arrays = [reshape(a, (-1,)) for a in arrays]
        axis = 0
    nd = arrays[0].ndim
    if nd == 0:
        raise ValueError("concat(): 0-d arrays cannot be concatenated")
    ax = _axis(axis, nd, "concat")
    base = arrays[0].shape
    for a in arrays:
        if a.ndim != nd or any(a.shape[i] != base[i] for i in range(nd) if i != ax):
            raise ValueError(
                f"concat(): shapes {[a.shape for a in arrays]} differ outside axis {axis}"
            )
    total = sum(a.shape[ax] for a in arrays)
    shape = base[:ax] + (total,) + base[ax + 1:]
    out = empty(shape, dt)
    pos = 0
    for a in arrays:
        k = a.shape[ax]
        if k:
            dst = view(out, a.shape, out._strides, pos * out._strides[ax])
            copy_into(a, dst)
        pos += k
    return out


def stack(arrays, /, *, axis: int = 0) -> WgpuArray:
    arrays = [_arr(a, "stack") for a in arrays]
    if not arrays:
        raise ValueError("stack() needs at least one array")
    shape = arrays[0].shape
    for a in arrays:
        if a.shape != shape:
            raise ValueError(
                f"stack(): all arrays need the same shape, got {[a.shape for a in arrays]}"
            )
    ax = _axis(axis, len(shape) + 1, "stack")
    return concat([expand_dims(a, axis=ax) for a in arrays], axis=ax)


def unstack(x: WgpuArray, /, *, axis: int = 0) -> tuple[WgpuArray, ...]:
    x = _arr(x, "unstack")
    if x.ndim == 0:
        raise ValueError("unstack() needs at least a 1-D array")
    ax = _axis(axis, x.ndim, "unstack")
    shape = x._shape[:ax] + x._shape[ax + 1:]
    strides = x._strides[:ax] + x._strides[ax + 1:]
    return tuple(view(x, shape, strides, x._offset + i * x._strides[ax])
                 for i in range(x._shape[ax]))


def flip(x: WgpuArray, /, *, axis=None) -> WgpuArray:
    x = _arr(x, "flip")
    axes = range(x.ndim) if axis is None else (
        (axis,) if isinstance(axis, int) else tuple(axis))
    strides = list(x._strides)
    off = x._offset
    for a in {_axis(a, x.ndim, "flip") for a in axes}:
        if x._shape[a] > 0:
            off += (x._shape[a] - 1) * strides[a]
        strides[a] = -strides[a]
    return copy_view(view(x, x._shape, strides, off))


def copy_view(x: WgpuArray) -> WgpuArray:
    out = empty(x._shape, x._dtype)
    copy_into(x, out)
    return out


def roll(x: WgpuArray, /, shift, *, axis=None) -> WgpuArray:
    x = _arr(x, "roll")
    if axis is None:
        return reshape(roll(reshape(x, (-1,)), shift, axis=0), x.shape)
    shifts = (shift,) if isinstance(shift, int) else tuple(shift)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    if len(shifts) != len(axes):
        if len(shifts) == 1:
            shifts = shifts * len(axes)
        else:
            raise ValueError("roll(): shift and axis must have the same length")
    out = x
    for s, a in zip(shifts, axes, strict=False):
        a = _axis(a, x.ndim, "roll")
        n = x.shape[a]
        if n == 0:
            continue
        s %= n
        if s == 0:
            continue
        src = out
        out = empty(x.shape, x.dtype)
        st = src._strides
        # out[..., s:] = src[..., :n-s]; out[..., :s] = src[..., n-s:]
        sh1 = x.shape[:a] + (n - s,) + x.shape[a + 1:]
        sh2 = x.shape[:a] + (s,) + x.shape[a + 1:]
        copy_into(view(src, sh1, st, src._offset),
                  view(out, sh1, out._strides, s * out._strides[a]))
        copy_into(view(src, sh2, st, src._offset + (n - s) * st[a]),
                  view(out, sh2, out._strides, 0))
    return out if out is not x else copy_view(x)


def moveaxis(x: WgpuArray, source, destination, /) -> WgpuArray:
    x = _arr(x, "moveaxis")
    src = (source,) if isinstance(source, int) else tuple(source)
    dst = (destination,) if isinstance(destination, int) else tuple(destination)
    if len(src) != len(dst):
        raise ValueError("moveaxis(): source and destination need the same length")
    src = [_axis(a, x.ndim, "moveaxis") for a in src]
    dst = [_axis(a, x.ndim, "moveaxis") for a in dst]
    order = [i for i in range(x.ndim) if i not in src]
    for d, s in sorted(zip(dst, src, strict=False)):
        order.insert(d, s)
    return permute_dims(x, order)


def tile(x: WgpuArray, repetitions, /) -> WgpuArray:
    x = _arr(x, "tile")
    reps = tuple(repetitions)
    nd = max(x.ndim, len(reps))
    reps = (1,) * (nd - len(reps)) + reps
    xs = (1,) * (nd - x.ndim) + x.shape
    # view x as (1, s0, 1, s1, ...) broadcast to (r0, s0, r1, s1, ...)
    inter = []
    for r, s in zip(reps, xs, strict=False):
        inter += [r, s]
    xv = reshape(x, tuple(v for s in xs for v in (1, s)))
    b = broadcast_to(xv, tuple(inter))
    return reshape(copy_view(b), tuple(r * s for r, s in zip(reps, xs, strict=False)))


def repeat(x: WgpuArray, repeats, /, *, axis: int | None = None) -> WgpuArray:
    x = _arr(x, "repeat")
    if axis is None:
        x = reshape(x, (-1,))
        axis = 0
    ax = _axis(axis, x.ndim, "repeat")
    if isinstance(repeats, WgpuArray):
        from ._array import to_numpy

        reps = to_numpy(repeats).reshape(-1)
        if reps.size == 1:
            repeats = int(reps[0])
        else:
            from ._creation import asarray
            from ._indexing import take

            idx = np.repeat(np.arange(x.shape[ax]), reps)
            return take(x, asarray(idx.astype(np.int32)), axis=ax)
    r = int(repeats)
    if r < 0:
        raise ValueError("repeat(): repeats must be non-negative")
    e = expand_dims(x, axis=ax + 1)
    shape = x.shape[:ax + 1] + (r,) + x.shape[ax + 1:]
    b = copy_view(broadcast_to(e, shape))
    return reshape(b, x.shape[:ax] + (x.shape[ax] * r,) + x.shape[ax + 1:])


def astype(x: WgpuArray, dtype, /, *, copy: bool = True, device=None) -> WgpuArray:
    x = _arr(x, "astype")
    dt = np.dtype(dtype)
    if D.kind(x.dtype) == "c" and D.kind(dt) not in "cb":  # the standard forbids dropping imag
        raise TypeError(f"astype(): cannot cast complex {x.dtype} to {dt}; take real(x) "
                        "or imag(x) first")
    if dt == x.dtype and not copy:
        return x
    return astype_raw(x, dt)
