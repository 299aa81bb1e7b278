"""``WgpuArray``: a view (offset, shape, strides, dtype) of a pooled device buffer."""

from __future__ import annotations

import math
import operator
import struct
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from .._common.ranges import KNOWN_MAX, value_range
from . import _dtypes as D
from . import _runtime
from ._memory import POOL, Storage, set_known
from ._recorder import REC, groups_for


class Device:
    """The wgpu device (one per process)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "wgpu:0"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Device) or other == "wgpu:0" or other == "wgpu"

    def __hash__(self) -> int:
        return hash("wgpu:0")


DEVICE = Device()


_CS: dict[tuple, tuple] = {}


def c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major strides (elements) of ``shape`` (cached per shape)."""
    cs = _CS.get(shape)
    if cs is not None:
        return cs
    out = []
    acc = 1
    for s in reversed(shape):
        out.append(acc)
        acc *= s
    cs = tuple(reversed(out))
    if len(_CS) < 4096:
        _CS[tuple(shape)] = cs
    return cs


def prod(shape) -> int:
    return math.prod(shape)


class WgpuArray:
    """An n-d array on the wgpu device.

    Views (reshape of contiguous data, transposes, basic slicing, broadcasting)
    share the storage; strides and offset are in elements.
    """

    __slots__ = ("_st", "_shape", "_strides", "_offset", "_dtype", "_contig", "_base",
                 "__weakref__")
    __array_priority__ = 100

    def __init__(self, st: Storage, shape, strides, offset: int, dtype: np.dtype,
                 base: WgpuArray | None = None) -> None:
        self._base = base
        self._st = st
        self._shape = shape
        self._strides = strides
        self._offset = offset
        self._dtype = dtype
        self._contig = strides == c_strides(shape) or prod(shape) <= 1

    # -- attributes ---------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def base(self) -> WgpuArray | None:
        """The array whose storage this view shares (NumPy's ``base``), or ``None``."""
        return self._base

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def size(self) -> int:
        return prod(self._shape)

    @property
    def device(self) -> Device:
        return DEVICE

    @property
    def T(self) -> WgpuArray:
        if self.ndim != 2:
            raise ValueError(
                f"x.T requires a 2-D array, got {self.ndim}-D; use x.mT or permute_dims"
            )
        return view(self, self._shape[::-1], self._strides[::-1], self._offset)

    @property
    def mT(self) -> WgpuArray:
        if self.ndim < 2:
            raise ValueError(f"x.mT requires at least 2 dimensions, got {self.ndim}")
        s, t = self._shape, self._strides
        return view(self, s[:-2] + (s[-1], s[-2]), t[:-2] + (t[-1], t[-2]), self._offset)

    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d array")
        return self._shape[0]

    def __repr__(self) -> str:
        return f"WgpuArray({np.array2string(to_numpy(self), separator=', ')}, dtype={self._dtype})"

    def __array_namespace__(self, *, api_version: str | None = None) -> Any:
        if api_version not in (None, "2023.12", "2024.12"):
            raise ValueError(f"unsupported array API version {api_version!r}")
        import vtl.backends.wgpu as ns

        return ns

    def to_device(self, device: Any, /, *, stream: Any = None) -> WgpuArray:
        if device is DEVICE or device == DEVICE:
            return self
        raise ValueError(f"unknown device {device!r}: the wgpu library has one device, wgpu:0")

    # -- host conversion (synchronising) -----------------------------------------
    def __array__(self, dtype=None, copy=None):
        a = to_numpy(self)
        return a if dtype is None else a.astype(dtype)

    def _scalar(self, kind: str):
        if self.size != 1:
            raise TypeError(f"only arrays of size 1 can be converted to Python {kind}")
        return to_numpy(self).reshape(()).item()

    def __bool__(self) -> bool:
        if self.size != 1:
            raise ValueError("the truth value of an array with more than one element is ambiguous")
        return bool(self._scalar("bool"))

    def __int__(self) -> int:
        return int(self._scalar("int"))

    def __float__(self) -> float:
        return float(self._scalar("float"))

    def __complex__(self) -> complex:
        return complex(self._scalar("complex"))

    def __index__(self) -> int:
        if D.kind(self._dtype) not in "iu" or self.ndim != 0:
            raise TypeError("only 0-d integer arrays can be used as an index")
        return operator.index(self._scalar("int"))

    def item(self):
        return self._scalar("scalar")

    def tolist(self):
        return to_numpy(self).tolist()

    def __dlpack__(self, *, stream: Any = None, max_version=None, dl_device=None,
                   copy: bool | None = None):
        """Export through DLPack as a host (CPU) copy.

        WebGPU buffers cannot be shared with other libraries, so the exported
        tensor is always a fresh NumPy copy on the CPU (the standard allows a
        copy to ``dl_device=(kDLCPU, 0)``); ``copy=False`` raises ``BufferError``.
        """
        if copy is False:
            raise BufferError("wgpu arrays can only be exported through DLPack as a host copy "
                              "(copy=False is impossible)")
        if dl_device is not None and tuple(dl_device)[0] != 1:
            raise BufferError(f"wgpu arrays export through DLPack to the CPU only, "
                              f"not to device {tuple(dl_device)}")
        host = to_numpy(self)
        if max_version is None:
            return host.__dlpack__()
        return host.__dlpack__(max_version=max_version)

    def __dlpack_device__(self) -> tuple[int, int]:
        """``(kDLCPU, 0)``: the device of what ``__dlpack__`` exports (a host copy)."""
        return (1, 0)


def view(x: WgpuArray, shape, strides, offset) -> WgpuArray:
    return WgpuArray(x._st, tuple(shape), tuple(strides), offset, x._dtype,
                     x if x._base is None else x._base)


def empty(shape, dtype: np.dtype, upload: bool = False) -> WgpuArray:
    shape = tuple(int(s) for s in shape)
    for s in shape:
        if s < 0:
            raise ValueError(f"negative dimension {s} in shape {shape}")
    check_dtype(dtype)
    n = prod(shape)
    st = POOL.alloc(max(n, 1) * D.itemsize(dtype), upload=upload)
    return WgpuArray(st, shape, c_strides(shape), 0, dtype)


_new_array = WgpuArray.__new__
_alloc = POOL.alloc


def fresh(shape: tuple, dtype: np.dtype, n: int, isz: int) -> WgpuArray:
    """A new contiguous array of a checked ``dtype`` (``isz`` storage bytes per element)
    and a valid ``shape`` of ``n`` elements: the hot path of op results."""
    a = _new_array(WgpuArray)
    a._st = _alloc((n or 1) * isz)
    a._shape = shape
    a._strides = c_strides(shape)
    a._offset = 0
    a._dtype = dtype
    a._contig = True
    a._base = None
    return a


def check_dtype(dtype: np.dtype) -> None:
    """Check that arrays of ``dtype`` can live on this device.

    Raises:
        TypeError: naming the dtype when the library has no storage for it, or the adapter
            feature it needs (``shader-f64`` for float64/complex128) when this adapter
            lacks it.
    """
    D.check(dtype, _runtime.get().features)


def from_numpy(a: np.ndarray, dtype: np.dtype | None = None) -> WgpuArray:
    """Upload a host array (converted to ``dtype``)."""
    a = np.asarray(a)
    dt = np.dtype(dtype) if dtype is not None else a.dtype
    check_dtype(dt)
    host = np.ascontiguousarray(a.astype(dt, copy=False).astype(D.STORAGE[dt][1], copy=False))
    out = empty(a.shape, dt, upload=True)
    nbytes = host.nbytes
    if nbytes:
        data = host.tobytes()
        if nbytes % 4:
            data += b"\0" * (4 - nbytes % 4)
        _runtime.get().queue.write_buffer(out._st.buf.gpu, 0, data)
        if D.kind(dt) in "iu" and host.size <= KNOWN_MAX:
            set_known(out._st.buf, value_range(host))
    return out


def known_range(x: WgpuArray) -> tuple[int, int, int | None] | None:
    """``(lo, hi, lo2)`` bounding every value of the integer array ``x`` when known on the
    host (data uploaded, or gathered from uploaded data, and not written since); ``lo2``
    is the smallest value above a negative ``lo`` (``None`` when there is none or
    ``lo >= 0``)."""
    return x._st.buf.known


def span(x: WgpuArray) -> tuple[int, int]:
    """Lowest and one-past-highest element offsets a view touches."""
    lo = hi = x._offset
    for s, t in zip(x._shape, x._strides, strict=False):
        if s == 0:
            return x._offset, x._offset
        if t > 0:
            hi += (s - 1) * t
        else:
            lo += (s - 1) * t
    return lo, hi + 1


def to_numpy(x: WgpuArray) -> np.ndarray:
    """Copy ``x`` to a new NumPy array (submits pending work and waits)."""
    if x.size == 0:
        return np.empty(x._shape, x._dtype)
    where = _byte_span(x)
    return _from_bytes(x, REC.read(x._st.buf.gpu, where[2], where[3] - where[2]), where)


def to_numpy_later(x: WgpuArray) -> Callable[[], np.ndarray]:
    """A function giving :func:`to_numpy` of ``x`` as it is now: the copy to the host is
    recorded now, in order with the work (``Recorder.read_later``), so the call waits only
    for the work recorded before this, not for what is recorded after it."""
    if x.size == 0:
        return partial(to_numpy, x)
    where = _byte_span(x)
    read = REC.read_later(x._st.buf.gpu, where[2], where[3] - where[2])
    return lambda: _from_bytes(x, read(), where)


def _byte_span(x: WgpuArray) -> tuple[int, int, int, int]:
    """``(lo, hi, b0, b1)``: the elements ``[lo, hi)`` of ``x``'s buffer that hold it
    (:func:`span`) and the 4-byte aligned bytes ``[b0, b1)`` around them."""
    lo, hi = span(x)
    isz = D.STORAGE[x._dtype][1].itemsize
    return lo, hi, (lo * isz) // 4 * 4, -(-(hi * isz) // 4) * 4


def _from_bytes(x: WgpuArray, raw: Any, where: tuple[int, int, int, int]) -> np.ndarray:
    """``x`` as a new NumPy array from the bytes ``raw`` of its buffer at ``where``
    (:func:`_byte_span`)."""
    dt = x._dtype
    sdt = D.STORAGE[dt][1]
    lo, hi, b0, _ = where
    isz = sdt.itemsize
    flat = np.frombuffer(raw, dtype=np.uint8)
    first = lo * isz - b0
    base = flat[first:first + (hi - lo) * isz].view(sdt)
    arr = np.lib.stride_tricks.as_strided(
        base[x._offset - lo:], shape=x._shape, strides=tuple(t * isz for t in x._strides)
    )
    if dt == D.bool_:
        return np.asarray(arr != 0)  # a 0-d comparison gives a NumPy scalar, not an array
    return arr.astype(dt, copy=True)


def collapse(shape, *strides):
    """Drop size-1 dims and merge dims that are contiguous for every operand."""
    out_shape: list[int] = []
    out_strides: list[list[int]] = [[] for _ in strides]
    for i, s in enumerate(shape):
        if s == 1:
            continue
        if out_shape and all(
            st[-1] == sts[i] * s for st, sts in zip(out_strides, strides, strict=False)
        ):
            out_shape[-1] *= s
            for st, sts in zip(out_strides, strides, strict=False):
                st[-1] = sts[i]
            continue
        out_shape.append(s)
        for st, sts in zip(out_strides, strides, strict=False):
            st.append(sts[i])
    return tuple(out_shape), tuple(tuple(s) for s in out_strides)


def broadcast_shapes(*shapes) -> tuple[int, ...]:
    nd = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(nd):
        d = 1
        for s in shapes:
            k = len(s) - nd + i
            if k < 0:
                continue
            v = s[k]
            if v != 1:
                if d != 1 and d != v:
                    raise ValueError(
                        f"shapes {', '.join(str(tuple(x)) for x in shapes)} cannot be broadcast"
                    )
                d = v
        out.append(d)
    return tuple(out)


def broadcast_strides(x: WgpuArray, shape) -> tuple[int, ...]:
    """Strides of ``x`` broadcast to ``shape`` (0 on broadcast dims)."""
    nd = len(shape)
    pad = nd - x.ndim
    out = []
    for i in range(nd):
        k = i - pad
        if k < 0 or x._shape[k] == 1:
            out.append(0)
        else:
            out.append(x._strides[k])
    return tuple(out)


MAX_ND = 7


#: the strided kernel takes this many consecutive elements of the last axis an invocation
#: where the axis' length allows, the source reads along it contiguously (or broadcasts it)
#: and the array has at least ``_COPY_PER_MIN`` elements: its index arithmetic, a division
#: per dimension, is then shared by them (H100: a permute of the middle axes of 16 MiB 0.049
#: -> 0.022 ms; a 2-D transpose, whose source steps across rows, 0.043 -> 0.050 ms, so not)
_COPY_PER, _COPY_PER_MIN = 4, 4096


def copy_into(src: WgpuArray, dst: WgpuArray, body: str = "return {{R}}(x);") -> None:
    """dst[...] = cast(src) elementwise; src is broadcast to dst's shape."""
    n = dst.size
    if n == 0:
        return
    if (src._contig and dst._contig and src._shape == dst._shape and body == _CAST
            and D.kind(src._dtype) in "biuf" and D.kind(dst._dtype) in "biuf"):
        _flat_copy(src, dst, n)
        return
    sst = broadcast_strides(src, dst._shape)
    shape, (si, so) = collapse(dst._shape, sst, dst._strides)
    nd = len(shape)
    if nd > 9:
        raise ValueError(f"wgpu: views with {nd} non-mergeable dimensions are not supported")
    flags = (1 if si == c_strides(shape) else 0) | (2 if so == c_strides(shape) else 0)
    words = [n, nd, flags, src._offset, dst._offset, *shape, *si, *so]
    per = _COPY_PER if nd and n >= _COPY_PER_MIN and shape[-1] % _COPY_PER == 0 \
        and si[-1] in (0, 1) else 1
    k = unary_kernel(src._dtype, dst._dtype, body, per)
    REC.dispatch(k, (src._st.buf, dst._st.buf), words, groups_for(n // per))


_CAST = "return {{R}}(x);"
_COPIES: dict = {}


def _flat_copy(src: WgpuArray, dst: WgpuArray, n: int) -> None:
    """Contiguous copy/cast through a flat kernel (vec4 when no neighbour of ``dst`` can be
    overwritten by the last vector)."""
    from . import _fuse

    vec = (D.itemsize(src._dtype) == 4 and D.itemsize(dst._dtype) == 4
           and not src._offset & 3 and _fuse.tail_safe(dst, n))
    key = (src._dtype, dst._dtype, vec)
    f = _COPIES.get(key)
    if f is None:
        node = ("c", "astype", src._dtype, dst._dtype, (0,))
        f = _COPIES[key] = _fuse.flat(vec, ((_fuse.FULL, src._dtype),), (node,), (1,))
    _fuse.launch(f, n, [src], [dst])


_UN_CACHE: dict = {}


def unary_kernel(dt_in: np.dtype, dt_out: np.dtype, body: str, per: int = 1):
    """The strided elementwise kernel (``wgsl/elementwise/unary.wgsl``) of ``body``, ``per``
    elements of the last axis an invocation."""
    key = (dt_in, dt_out, body, per)
    k = _UN_CACHE.get(key)
    if k is None:
        k = _UN_CACHE[key] = _unary_kernel(dt_in, dt_out, body, per)
    return k


_WIDEN = {("u32", "i64"): "return i64(u64(x));", ("i32", "u64"): "return u64(i64(x));"}


def _unary_kernel(dt_in: np.dtype, dt_out: np.dtype, body: str, per: int):
    from . import _kernels

    tin, tout = D.wgsl(dt_in), D.wgsl(dt_out)
    if body == "return {{R}}(x);" and (tin, tout) in _WIDEN:
        # 32 -> 64 bits across signedness: extend by the source's signedness first
        # (a direct i64(u32) may be compiled as a sign extension)
        body = _WIDEN[(tin, tout)]
    if body == "return {{R}}(x);" and "c" in (D.kind(dt_in), D.kind(dt_out)):
        from ._complex import cast_body

        body = cast_body(dt_in, dt_out)
    if dt_out == D.bool_ and body == "return {{R}}(x);":
        body = "return select(0u, 1u, x != {{T}}(0));"
        if D.kind(dt_in) == "f":  # NaN is truthy; drivers may compile != as an ordered compare
            body = f"return select(0u, 1u, x != {{{{T}}}}(0) || isnan_{dt_in.name}(x));"
    return _kernels.kernel(
        "unary", "rw", (dt_in, dt_out), T=D.wgsl(dt_in), R=D.wgsl(dt_out), DR=dt_out.name,
        BODY=body, PER=f"{per}u",
    )


def contiguous(x: WgpuArray) -> WgpuArray:
    """``x`` itself when row-major contiguous, else a contiguous copy."""
    if x._contig:
        return x
    out = empty(x._shape, x._dtype)
    copy_into(x, out)
    return out


def astype_raw(x: WgpuArray, dtype: np.dtype) -> WgpuArray:
    check_dtype(dtype)
    out = empty(x._shape, dtype)
    copy_into(x, out)
    return out


_f32 = struct.Struct("f").pack
_u32 = struct.Struct("I").unpack


def words_for_scalar(value, dt: np.dtype) -> list[int]:
    """Three param words encoding a Python scalar converted to ``dt`` (see _kernels)."""
    t = D.wgsl(dt)
    if t in ("f32", "f16"):
        try:
            return [_u32(_f32(float(value)))[0], 0, 0]
        except OverflowError:
            return [0x7F800000 if value > 0 else 0xFF800000, 0, 0]
    if t == "f64":
        v = float(value)
        if math.isnan(v):
            return [1, 0x40000000, 0]
        sign = 0x80000000 if math.copysign(1.0, v) < 0 else 0
        if math.isinf(v):
            return [0, 0x40000000 | sign, 0]
        m, e = math.frexp(abs(v))
        mant = int(m * (1 << 53))
        return [mant & 0xFFFFFFFF, (mant >> 32) | sign, e - 53]
    if dt == D.bool_:
        return [1 if value else 0, 0, 0]
    v = int(value)
    info = np.iinfo(dt)
    if not info.min <= v <= info.max:
        raise OverflowError(f"Python integer {v} out of bounds for {dt}")
    return [v & 0xFFFFFFFF, (v >> 32) & 0xFFFFFFFF, 0]
