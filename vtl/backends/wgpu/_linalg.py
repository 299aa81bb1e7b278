"""matmul (a register-blocked tiled kernel), tensordot, vecdot and ``linalg``."""

from __future__ import annotations

import types

from . import _dtypes as D
from . import _kernels
from ._array import (
    WgpuArray,
    astype_raw,
    broadcast_shapes,
    c_strides,
    collapse,
    contiguous,
    empty,
    prod,
    view,
)
from ._elementwise import binary, unary
from ._manipulation import matrix_transpose, permute_dims, reshape
from ._recorder import REC

_TILE = 64


def _arr(x, fname: str) -> WgpuArray:
    if not isinstance(x, WgpuArray):
        raise TypeError(f"{fname}() expected a WgpuArray, got {type(x).__name__}")
    return x


def matmul(x1: WgpuArray, x2: WgpuArray, /) -> WgpuArray:
    """Matrix product with NumPy's 1-D and batch-broadcasting rules."""
    a = _arr(x1, "matmul")
    b = _arr(x2, "matmul")
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul(): 0-d arrays are not allowed; use multiply")
    dt = D.result_type(a.dtype, b.dtype)
    if dt == D.bool_:
        raise TypeError("matmul(): boolean arrays are not supported")
    a = a if a.dtype == dt else astype_raw(a, dt)
    b = b if b.dtype == dt else astype_raw(b, dt)
    va, vb = a.ndim == 1, b.ndim == 1
    if va:
        a = view(a, (1, a.shape[0]), (0, a._strides[0]), a._offset)
    if vb:
        b = view(b, (b.shape[0], 1), (b._strides[0], 0), b._offset)
    M, K = a.shape[-2:]
    K2, N = b.shape[-2:]
    if K != K2:
        raise ValueError(
            f"matmul(): shapes {x1.shape} and {x2.shape} do not align ({K} != {K2})"
        )
    bshape = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    nb = prod(bshape)

    def batch_strides(x):
        pad = len(bshape) - (x.ndim - 2)
        return tuple(
            0 if i < pad or x.shape[i - pad] == 1 else x._strides[i - pad]
            for i in range(len(bshape))
        )

    sa, sb = batch_strides(a), batch_strides(b)
    cshape, (ca, cb) = collapse(bshape, sa, sb)
    if len(cshape) > 1:
        a = contiguous(view(a, bshape + (M, K), sa + a._strides[-2:], a._offset))
        b = contiguous(view(b, bshape + (K, N), sb + b._strides[-2:], b._offset))
        ca, cb = (M * K,), (K * N,)
    sab = ca[0] if ca else 0
    sbb = cb[0] if cb else 0
    out = empty(bshape + (M, N), dt)
    if out.size:
        if K == 0:
            from ._creation import fill_view

            fill_view(out, 0)
        else:
            k = _kernels.kernel("matmul", "rrw", (dt,), T=D.wgsl(dt), D=dt.name)
            words = [M, N, K, a._offset, b._offset, 0, sab, *a._strides[-2:], sbb,
                     *b._strides[-2:]]
            gx, gy = -(-N // _TILE), -(-M // _TILE)
            for b0 in range(0, nb, 65535):
                cnt = min(65535, nb - b0)
                w = list(words)
                w[3] += b0 * sab
                w[4] += b0 * sbb
                w[5] = b0 * M * N
                REC.dispatch(k, (a._st.buf, b._st.buf, out._st.buf), w, gx, gy, cnt)
    if va and vb:
        return reshape(out, bshape)
    if va:
        return reshape(out, bshape + (N,))
    if vb:
        return reshape(out, bshape + (M,))
    return out


def tensordot(x1: WgpuArray, x2: WgpuArray, /, *, axes=2) -> WgpuArray:
    a = _arr(x1, "tensordot")
    b = _arr(x2, "tensordot")
    if isinstance(axes, int):
        if axes < 0:
            raise ValueError("tensordot(): axes must be non-negative")
        ax_a = list(range(a.ndim - axes, a.ndim))
        ax_b = list(range(axes))
    else:
        ax_a, ax_b = ([axes[0]] if isinstance(axes[0], int) else list(axes[0]),
                      [axes[1]] if isinstance(axes[1], int) else list(axes[1]))
        ax_a = [x % a.ndim for x in ax_a]
        ax_b = [x % b.ndim for x in ax_b]
    if len(ax_a) != len(ax_b):
        raise ValueError("tensordot(): axes lists must have the same length")
    for i, j in zip(ax_a, ax_b, strict=False):
        if a.shape[i] != b.shape[j]:
            raise ValueError(f"tensordot(): shape mismatch on axes {i} and {j}")
    free_a = [i for i in range(a.ndim) if i not in ax_a]
    free_b = [i for i in range(b.ndim) if i not in ax_b]
    ka = prod(a.shape[i] for i in ax_a)
    am = reshape(permute_dims(a, free_a + ax_a), (prod(a.shape[i] for i in free_a), ka))
    bm = reshape(permute_dims(b, ax_b + free_b), (ka, prod(b.shape[i] for i in free_b)))
    out = matmul(am, bm)
    return reshape(out, tuple(a.shape[i] for i in free_a) + tuple(b.shape[i] for i in free_b))


def vecdot(x1: WgpuArray, x2: WgpuArray, /, *, axis: int = -1) -> WgpuArray:
    from ._reduction import sum as _sum

    a = _arr(x1, "vecdot")
    b = _arr(x2, "vecdot")
    n = max(a.ndim, b.ndim)
    if not -n <= axis < 0 and not 0 <= axis < n:
        raise IndexError(f"vecdot(): axis {axis} out of bounds")
    sa = a.shape[axis] if -a.ndim <= axis < a.ndim else None
    sb = b.shape[axis] if -b.ndim <= axis < b.ndim else None
    if sa != sb:
        raise ValueError(f"vecdot(): sizes along axis {axis} differ ({sa} and {sb})")
    return _sum(binary("multiply", a, b), axis=axis)


def vector_norm(x: WgpuArray, /, *, axis=None, keepdims: bool = False, ord=2) -> WgpuArray:
    from ._reduction import max as _max
    from ._reduction import min as _min
    from ._reduction import sum as _sum

    ax = unary("abs", x)
    if ord == 2:
        return unary("sqrt", _sum(binary("multiply", ax, ax), axis=axis, keepdims=keepdims))
    if ord == 1:
        return _sum(ax, axis=axis, keepdims=keepdims)
    if ord == float("inf"):
        return _max(ax, axis=axis, keepdims=keepdims)
    if ord == float("-inf"):
        return _min(ax, axis=axis, keepdims=keepdims)
    if ord == 0:
        from ._reduction import sum as s

        return s(unary("abs", binary("not_equal", x, 0)), axis=axis, keepdims=keepdims)
    p = float(ord)
    return binary("pow", _sum(binary("pow", ax, p), axis=axis, keepdims=keepdims), 1.0 / p)


def outer(x1: WgpuArray, x2: WgpuArray, /) -> WgpuArray:
    return binary("multiply", reshape(x1, (-1, 1)), reshape(x2, (1, -1)))


def diagonal(x: WgpuArray, /, *, offset: int = 0) -> WgpuArray:
    x = _arr(x, "diagonal")
    r, c = x.shape[-2:]
    s0, s1 = x._strides[-2:]
    if offset >= 0:
        n = max(0, min(r, c - offset))
        off = x._offset + offset * s1
    else:
        n = max(0, min(r + offset, c))
        off = x._offset - offset * s0
    return view(x, x.shape[:-2] + (n,), x._strides[:-2] + (s0 + s1,), off)


def trace(x: WgpuArray, /, *, offset: int = 0, dtype=None) -> WgpuArray:
    from ._reduction import sum as _sum

    return _sum(diagonal(x, offset=offset), axis=-1, dtype=dtype)


linalg = types.SimpleNamespace(
    matmul=matmul, matrix_transpose=matrix_transpose, tensordot=tensordot, vecdot=vecdot,
    vector_norm=vector_norm, outer=outer, diagonal=diagonal, trace=trace,
)
_unused = c_strides
