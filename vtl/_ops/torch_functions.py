"""PyTorch's top-level functions that the array API standard does not define, written as
compositions of ``vtl`` functions (so they run on every backend and their gradients come
from the functions they call): views and splits (``narrow``, ``chunk``, ``split``,
``unbind``, ``t``), matrix products (``mm``, ``bmm``, ``dot``, ``outer``, ``addmm``,
``baddbmm``, ``trace``, ``diag``, ``diagonal``), masks (``masked_fill``,
``masked_select``, ``masked_scatter``), elementwise extras (``fmod``, ``float_power``,
``lerp``, ``rsqrt``, ``neg``, ``bitwise_not``, the comparison aliases ``eq``/``ne``/
``lt``/``gt``/``le``/``ge``, ``isclose``, ``allclose``), reductions (``amax``,
``amin``, ``aminmax``, ``nansum``, ``nanmean``, ``median``, ``quantile``, ``norm``,
``logsumexp``), counting (``histc``, ``bincount``, ``unique``), sorting (``msort``) and
the activations PyTorch has at top level (``softmax``, ``log_softmax``, ``sigmoid``,
``relu``).

Names the standard defines (``vtl.equal``, ``vtl.round``, ``vtl.take``, ``vtl.repeat``,
``vtl.nonzero``, ``vtl.max`` ...) keep the standard's semantics; PyTorch's differing forms
of those are ``Tensor`` methods (``t.equal(u)`` is PyTorch's bool, ``t.take(i)`` indexes
the flattened tensor, ``t.repeat(2, 3)`` tiles).
"""

from __future__ import annotations

import math
import operator
from typing import Any

from .._tensor import Tensor
from ._core import normalize_axis, tensor_arg

__all__ = [
    "addmm", "allclose", "amax", "amin", "aminmax", "baddbmm", "bincount", "bitwise_not",
    "bmm", "chunk", "diag", "diagonal", "dot", "eq", "float_power", "fmod", "ge", "gt",
    "histc", "isclose", "le", "lerp", "log_softmax", "logsumexp", "lt", "masked_fill",
    "masked_scatter", "masked_select", "median", "mm", "msort", "nanmean", "nansum",
    "narrow", "ne", "neg", "norm", "outer", "quantile", "relu", "rsqrt", "sigmoid",
    "softmax", "split", "t", "trace", "unbind", "unique",
]


def _vtl() -> Any:
    import vtl

    return vtl


def _int(v: Any, fname: str, what: str) -> int:
    if isinstance(v, bool):
        raise TypeError(f"{fname}(): {what} must be an int, got bool")
    try:
        return operator.index(v)
    except TypeError:
        raise TypeError(f"{fname}(): {what} must be an int, got {type(v).__name__}") from None


def _dim(dim: Any, ndim: int, fname: str) -> int:
    return normalize_axis(_int(dim, fname, "dim"), ndim, fname)


def _dims(dim: Any, ndim: int, fname: str) -> tuple[int, ...] | None:
    """``None``/``()`` (every axis), an int or a sequence of ints, as a tuple of axes."""
    if dim is None or (isinstance(dim, (tuple, list)) and not dim):
        return None
    if isinstance(dim, (tuple, list)):
        return tuple(_dim(d, ndim, fname) for d in dim)
    return (_dim(dim, ndim, fname),)


def _slice_along(x: Tensor, d: int, start: int, stop: int) -> Tensor:
    return x[(slice(None),) * d + (slice(start, stop),)]


# -- views and splits -----------------------------------------------------------------------
def narrow(input: Tensor, dim: int, start: Any, length: int) -> Tensor:  # noqa: A002
    """The ``length`` elements of ``input`` from ``start`` along ``dim`` (a view);
    ``start`` may be negative (counted from the end), as in PyTorch."""
    x = tensor_arg(input, "narrow", "input")
    if x.ndim == 0:
        raise ValueError("narrow() needs a tensor with at least one dimension, got a 0-d one")
    d = _dim(dim, x.ndim, "narrow")
    n = x.shape[d]
    start = _int(start, "narrow", "start")
    length = _int(length, "narrow", "length")
    if not -n <= start <= n:
        raise IndexError(f"narrow(): start {start} is out of range for dim {d} of size {n}")
    if start < 0:
        start += n
    if length < 0 or start + length > n:
        raise ValueError(f"narrow(): start ({start}) + length ({length}) exceeds the size "
                         f"of dim {d} ({n}), or length is negative")
    return _slice_along(x, d, start, start + length)


def split(tensor: Tensor, split_size_or_sections: Any, dim: int = 0) -> tuple[Tensor, ...]:
    """PyTorch's ``split``: pieces of ``split_size_or_sections`` elements along ``dim``
    (an int: equal pieces, the last one smaller when the size does not divide; a list of
    ints: one piece per entry, which must add up to the size of ``dim``). Views."""
    x = tensor_arg(tensor, "split", "tensor")
    if x.ndim == 0:
        raise ValueError("split() needs a tensor with at least one dimension, got a 0-d one")
    d = _dim(dim, x.ndim, "split")
    n = x.shape[d]
    if isinstance(split_size_or_sections, (list, tuple)):
        sizes = [_int(s, "split", "each section") for s in split_size_or_sections]
        if any(s < 0 for s in sizes) or sum(sizes) != n:
            raise ValueError(f"split(): sections {sizes} must be non-negative and add up "
                             f"to the size of dim {d} ({n})")
    else:
        k = _int(split_size_or_sections, "split", "split_size")
        if k < 0 or (k == 0 and n):
            raise ValueError(f"split(): split_size must be positive, got {k}")
        sizes = [min(k, n - i) for i in range(0, n, k)] if n else [0]
    out, start = [], 0
    for s in sizes:
        out.append(_slice_along(x, d, start, start + s))
        start += s
    return tuple(out)


def chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:  # noqa: A002
    """PyTorch's ``chunk``: at most ``chunks`` views along ``dim``, each of
    ``ceil(size / chunks)`` elements (the last smaller; fewer pieces when the size
    does not allow ``chunks`` of them)."""
    x = tensor_arg(input, "chunk", "input")
    c = _int(chunks, "chunk", "chunks")
    if c <= 0:
        raise ValueError(f"chunk(): chunks must be positive, got {c}")
    if x.ndim == 0:
        raise ValueError("chunk() needs a tensor with at least one dimension, got a 0-d one")
    d = _dim(dim, x.ndim, "chunk")
    n = x.shape[d]
    if n == 0:
        return (x,) * c
    return split(x, -(-n // c), d)


def unbind(input: Tensor, dim: int = 0) -> tuple[Tensor, ...]:  # noqa: A002
    """The slices of ``input`` along ``dim``, without that dim (``vtl.unstack``)."""
    return _vtl().unstack(tensor_arg(input, "unbind", "input"), axis=dim)


def t(input: Tensor) -> Tensor:  # noqa: A002
    """The transpose of a 2-D tensor; a 0-d or 1-D tensor as it is (PyTorch's ``t``)."""
    x = tensor_arg(input, "t", "input")
    if x.ndim > 2:
        raise ValueError(f"t() expects a tensor with at most 2 dimensions, got {x.ndim}; "
                         "use transpose(dim0, dim1) or mT")
    return _vtl().permute_dims(x, (1, 0)) if x.ndim == 2 else x


# -- matrix products ------------------------------------------------------------------------
def _ndim(x: Any, n: int, fname: str, what: str) -> Tensor:
    x = tensor_arg(x, fname, what)
    if x.ndim != n:
        raise ValueError(f"{fname}(): {what} must be a {n}-D tensor, got shape {x.shape}")
    return x


def mm(input: Tensor, mat2: Tensor) -> Tensor:  # noqa: A002
    """The product of two matrices (2-D tensors; ``vtl.matmul`` without broadcasting)."""
    a, b = _ndim(input, 2, "mm", "input"), _ndim(mat2, 2, "mm", "mat2")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"mm(): shapes {a.shape} and {b.shape} cannot be multiplied")
    return _vtl().matmul(a, b)


def bmm(input: Tensor, mat2: Tensor) -> Tensor:  # noqa: A002
    """Batched products of matrices: ``(b, n, m) @ (b, m, p)`` (3-D tensors, equal
    batch sizes, no broadcasting)."""
    a, b = _ndim(input, 3, "bmm", "input"), _ndim(mat2, 3, "bmm", "mat2")
    if a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        raise ValueError(f"bmm(): shapes {a.shape} and {b.shape} cannot be multiplied "
                         "batch by batch")
    return _vtl().matmul(a, b)


def dot(input: Tensor, tensor: Tensor) -> Tensor:  # noqa: A002
    """The dot product of two 1-D tensors of equal length (no conjugation), a 0-d
    tensor."""
    a, b = _ndim(input, 1, "dot", "input"), _ndim(tensor, 1, "dot", "tensor")
    if a.shape != b.shape:
        raise ValueError(f"dot(): the tensors have {a.shape[0]} and {b.shape[0]} elements; "
                         "they must match")
    return _vtl().matmul(a, b)


def outer(input: Tensor, vec2: Tensor) -> Tensor:  # noqa: A002
    """The outer product of two 1-D tensors (``vtl.linalg.outer``)."""
    return _vtl().linalg.outer(tensor_arg(input, "outer", "input"),
                               tensor_arg(vec2, "outer", "vec2"))


def _scaled_sum(input: Any, prod: Tensor, beta: Any, alpha: Any) -> Tensor:
    v = _vtl()
    if alpha != 1:
        prod = v.multiply(prod, alpha)
    if beta == 0:  # PyTorch: input is ignored (its nan and inf do not propagate)
        return v.broadcast_to(prod, v.broadcast_shapes(input.shape, prod.shape))
    return v.add(input if beta == 1 else v.multiply(input, beta), prod)


def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta: Any = 1,  # noqa: A002
          alpha: Any = 1) -> Tensor:
    """``beta * input + alpha * (mat1 @ mat2)`` (``input`` broadcasts to the product's
    shape; with ``beta=0`` it is ignored, nan and inf included)."""
    x = tensor_arg(input, "addmm", "input")
    return _scaled_sum(x, mm(mat1, mat2), beta, alpha)


def baddbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta: Any = 1,  # noqa: A002
            alpha: Any = 1) -> Tensor:
    """``beta * input + alpha * bmm(batch1, batch2)`` (``input`` broadcasts; ignored when
    ``beta=0``)."""
    x = tensor_arg(input, "baddbmm", "input")
    return _scaled_sum(x, bmm(batch1, batch2), beta, alpha)


def trace(input: Tensor) -> Tensor:  # noqa: A002
    """The sum of the main diagonal of a 2-D tensor (``vtl.linalg.trace``)."""
    return _vtl().linalg.trace(_ndim(input, 2, "trace", "input"))


def diagonal(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:  # noqa: A002
    """The diagonal ``offset`` (above the main one when positive) of the matrices that
    ``dim1`` and ``dim2`` span, as the last dim of the result (PyTorch's ``diagonal``;
    ``vtl.linalg.diagonal`` is the standard's, over the last two dims). A copy, not a
    view."""
    x = tensor_arg(input, "diagonal", "input")
    if x.ndim < 2:
        raise ValueError(f"diagonal() needs at least 2 dimensions, got shape {x.shape}")
    a, b = _dim(dim1, x.ndim, "diagonal"), _dim(dim2, x.ndim, "diagonal")
    if a == b:
        raise ValueError(f"diagonal(): dim1 and dim2 are both {a}; they must differ")
    rest = tuple(k for k in range(x.ndim) if k not in (a, b))
    v = _vtl()
    y = x if rest + (a, b) == tuple(range(x.ndim)) else v.permute_dims(x, rest + (a, b))
    return v.linalg.diagonal(y, offset=_int(offset, "diagonal", "offset"))


def diag(input: Tensor, diagonal: int = 0) -> Tensor:  # noqa: A002
    """PyTorch's ``diag``: a 1-D ``input`` becomes the square matrix with it on diagonal
    ``diagonal`` (zeros elsewhere); a 2-D ``input`` gives its diagonal ``diagonal``."""
    x = tensor_arg(input, "diag", "input")
    k = _int(diagonal, "diag", "diagonal")
    v = _vtl()
    if x.ndim == 2:
        return v.linalg.diagonal(x, offset=k)
    if x.ndim != 1:
        raise ValueError(f"diag() needs a 1-D or 2-D tensor, got shape {x.shape}")
    m = x.shape[0]
    n = m + abs(k)
    pad = v.concat([x, v.zeros((abs(k),), dtype=x.dtype, device=x.device)]) if k else x
    along = (n, 1) if k >= 0 else (1, n)  # rows hold x above the diagonal, columns below
    mask = v.astype(v.eye(n, k=k, device=x.device), v.bool)
    return v.where(mask, v.reshape(pad, along), v.zeros((), dtype=x.dtype, device=x.device))


# -- masks ------------------------------------------------------------------------------------
def _mask(mask: Any, x: Tensor, fname: str) -> Tensor:
    mask = tensor_arg(mask, fname, "mask")
    if mask.dtype != _vtl().bool:
        raise TypeError(f"{fname}(): mask must be a bool tensor, got dtype {mask.dtype}")
    if mask._device is not x._device:
        raise ValueError(f"{fname}(): mask is on {mask._device} but input is on "
                         f"{x._device}; move it with .to(...) first")
    return mask


def _value_of(value: Any, x: Tensor, fname: str) -> Any:
    """A scalar, or a 0-d tensor cast to ``x``'s dtype (PyTorch casts the value)."""
    if isinstance(value, Tensor):
        if value.ndim:
            raise ValueError(f"{fname}(): value must be a scalar or a 0-d tensor, got shape "
                             f"{value.shape}")
        return value if value.dtype == x.dtype else _vtl().astype(value, x.dtype)
    from .scatter import _scalar

    return _scalar(value, x, fname)


def masked_fill(input: Tensor, mask: Tensor, value: Any) -> Tensor:  # noqa: A002
    """``input`` with ``value`` (a scalar or a 0-d tensor) where the bool ``mask``
    (broadcast to ``input``'s shape) is true. Gradients: ``g`` where the mask is false to
    ``input``; the sum of ``g`` where it is true to a tensor ``value``."""
    x = tensor_arg(input, "masked_fill", "input")
    m = _mask(mask, x, "masked_fill")
    v = _vtl()
    val = _value_of(value, x, "masked_fill")
    if not isinstance(val, Tensor):
        val = v.asarray(val, dtype=x.dtype, device=x.device)
    out = v.where(m, val, x)
    if out.shape != x.shape:
        raise ValueError(f"masked_fill(): mask of shape {m.shape} does not broadcast to "
                         f"input's shape {x.shape}")
    return out


def masked_select(input: Tensor, mask: Tensor) -> Tensor:  # noqa: A002
    """The elements of ``input`` where ``mask`` is true, as a 1-D tensor (both broadcast
    together first). The length depends on the data: a device sync on a GPU."""
    x = tensor_arg(input, "masked_select", "input")
    m = _mask(mask, x, "masked_select")
    v = _vtl()
    xb, mb = v.broadcast_arrays(x, m)
    return v.reshape(xb, (-1,))[v.reshape(mb, (-1,))]


def masked_scatter(input: Tensor, mask: Tensor, source: Tensor) -> Tensor:  # noqa: A002
    """``input`` with the positions where ``mask`` (broadcast to ``input``'s shape) is
    true filled, in row-major order, by the leading elements of ``source`` (out of place;
    PyTorch's ``masked_scatter``). ``source`` has ``input``'s dtype and at least as many
    elements as the mask has true ones: a shortfall is an ``IndexError`` (on a GPU at the
    next read of a result, as for indexing; no sync here). Gradients: ``g`` where the
    mask is false to ``input``; to ``source``, ``g`` at the positions each element
    went to."""
    x = tensor_arg(input, "masked_scatter", "input")
    m = _mask(mask, x, "masked_scatter")
    source = tensor_arg(source, "masked_scatter", "source")
    if source.dtype != x.dtype:
        raise TypeError(f"masked_scatter(): source has dtype {source.dtype} but input has "
                        f"{x.dtype}; they must be equal")
    v = _vtl()
    m = v.reshape(v.broadcast_to(m, x.shape), (-1,))
    if source.size == 0:  # nothing to take from: only an all-false mask is valid
        if bool(v.any(m)):
            raise ValueError("masked_scatter(): the mask has true elements but source is "
                             "empty")
        return x
    idt = v.__array_namespace_info__().default_dtypes(device=x.device)["indexing"]
    rank = v.cumulative_sum(v.astype(m, idt)) - 1  # the source element of each true one
    pos = v.where(m, rank, v.zeros((), dtype=idt, device=x.device))
    vals = v.take(v.reshape(source, (-1,)), pos, axis=0)
    return v.reshape(v.where(m, vals, v.reshape(x, (-1,))), x.shape)


# -- elementwise --------------------------------------------------------------------------
def neg(input: Tensor) -> Tensor:  # noqa: A002
    """``-input`` (``vtl.negative``)."""
    return _vtl().negative(input)


def rsqrt(input: Tensor) -> Tensor:  # noqa: A002
    """``1 / sqrt(input)``."""
    v = _vtl()
    return v.reciprocal(v.sqrt(input))


def bitwise_not(input: Tensor) -> Tensor:  # noqa: A002
    """Elementwise bitwise NOT (``vtl.bitwise_invert``; logical NOT for bool)."""
    return _vtl().bitwise_invert(input)


def eq(input: Tensor, other: Any) -> Tensor:  # noqa: A002
    """``input == other`` elementwise (``vtl.equal``)."""
    return _vtl().equal(input, other)


def ne(input: Tensor, other: Any) -> Tensor:  # noqa: A002
    """``input != other`` elementwise (``vtl.not_equal``)."""
    return _vtl().not_equal(input, other)


def lt(input: Tensor, other: Any) -> Tensor:  # noqa: A002
    """``input < other`` elementwise (``vtl.less``)."""
    return _vtl().less(input, other)


def le(input: Tensor, other: Any) -> Tensor:  # noqa: A002
    """``input <= other`` elementwise (``vtl.less_equal``)."""
    return _vtl().less_equal(input, other)


def gt(input: Tensor, other: Any) -> Tensor:  # noqa: A002
    """``input > other`` elementwise (``vtl.greater``)."""
    return _vtl().greater(input, other)


def ge(input: Tensor, other: Any) -> Tensor:  # noqa: A002
    """``input >= other`` elementwise (``vtl.greater_equal``)."""
    return _vtl().greater_equal(input, other)


def fmod(input: Tensor, other: Any) -> Tensor:  # noqa: A002
    """C's ``fmod``: the remainder of ``input / other`` with the sign of ``input``
    (``vtl.remainder`` takes the sign of ``other``)."""
    v = _vtl()
    r = v.remainder(input, other)
    x = input if isinstance(input, Tensor) else v.asarray(input, dtype=r.dtype,
                                                          device=r.device)
    fix = v.logical_and(r != 0, v.not_equal(r < 0, x < 0))
    return v.where(fix, v.subtract(r, other), r)


def float_power(input: Any, exponent: Any) -> Tensor:  # noqa: A002
    """``input ** exponent`` computed in double precision (float64, or complex128 when
    an operand is complex); the backend must support float64."""
    v = _vtl()

    def wide(a: Any) -> Any:
        if isinstance(a, Tensor):
            return v.astype(a, v.complex128 if a.dtype.kind == "c" else v.float64)
        return a

    a, b = wide(input), wide(exponent)
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        raise TypeError("float_power() needs at least one tensor operand")
    if not isinstance(a, Tensor):
        a = v.asarray(a, dtype=b.dtype if not isinstance(a, complex) else v.complex128,
                      device=b.device)
    return v.pow(a, b)


def lerp(input: Tensor, end: Tensor, weight: Any) -> Tensor:  # noqa: A002
    """``input + weight * (end - input)``, computed as PyTorch does: from ``end`` when
    ``weight >= 0.5`` (exact at ``weight = 1``)."""
    v = _vtl()
    x = tensor_arg(input, "lerp", "input")
    diff = v.subtract(end, x)
    if not isinstance(weight, Tensor):
        if weight < 0.5:
            return v.add(x, v.multiply(diff, weight))
        return v.subtract(end, v.multiply(diff, 1 - weight))
    lo = v.add(x, v.multiply(weight, diff))
    hi = v.subtract(end, v.multiply(diff, v.subtract(1, weight)))
    return v.where(v.less(v.abs(weight), 0.5), lo, hi)


def isclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08,  # noqa: A002
            equal_nan: bool = False) -> Tensor:
    """Elementwise ``|input - other| <= atol + rtol * |other|`` (bool), with equal
    infinities close and, with ``equal_nan``, two nans close (PyTorch's ``isclose``)."""
    v = _vtl()
    a = tensor_arg(input, "isclose", "input")
    b = other if isinstance(other, Tensor) else v.asarray(other, dtype=a.dtype,
                                                          device=a.device)
    same = v.equal(a, b)
    if a.dtype.kind not in "fc" and b.dtype.kind not in "fc" and rtol == 0 and atol == 0:
        return same
    if a.dtype.kind not in "fc" or b.dtype.kind not in "fc":
        ft = v.float64 if "float64" in v.__array_namespace_info__().dtypes(
            device=a.device) else v.float32
        a, b = (t if t.dtype.kind in "fc" else v.astype(t, ft) for t in (a, b))
    with v.no_grad():
        fin = v.logical_and(v.isfinite(a), v.isfinite(b))
        zero = v.zeros((), dtype=a.dtype, device=a.device)
        fa, fb = v.where(fin, a, zero), v.where(fin, b, v.astype(zero, b.dtype))
        close = v.less_equal(v.abs(fa - fb), atol + rtol * v.abs(fb))
        out = v.logical_or(same, v.logical_and(close, fin))
        if equal_nan:
            out = v.logical_or(out, v.logical_and(v.isnan(a), v.isnan(b)))
    return out


def allclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08,  # noqa: A002
             equal_nan: bool = False) -> bool:
    """Whether every element of ``input`` is close to ``other`` (:func:`isclose`); a
    Python bool (a device sync)."""
    return bool(_vtl().all(isclose(input, other, rtol, atol, equal_nan)))


# -- reductions -------------------------------------------------------------------------------
def amax(input: Tensor, dim: Any = (), keepdim: bool = False) -> Tensor:  # noqa: A002
    """The maximum over ``dim`` (every dim by default; ``vtl.max``). Ties share the
    gradient evenly."""
    x = tensor_arg(input, "amax", "input")
    return _vtl().max(x, axis=_dims(dim, x.ndim, "amax"), keepdims=bool(keepdim))


def amin(input: Tensor, dim: Any = (), keepdim: bool = False) -> Tensor:  # noqa: A002
    """The minimum over ``dim`` (every dim by default; ``vtl.min``). Ties share the
    gradient evenly."""
    x = tensor_arg(input, "amin", "input")
    return _vtl().min(x, axis=_dims(dim, x.ndim, "amin"), keepdims=bool(keepdim))


def aminmax(input: Tensor, *, dim: int | None = None, keepdim: bool = False) -> Any:  # noqa: A002
    """The named tuple ``(min, max)`` over ``dim`` (every dim when ``None``)."""
    from .. import return_types

    x = tensor_arg(input, "aminmax", "input")
    ax = None if dim is None else _dim(dim, x.ndim, "aminmax")
    v = _vtl()
    return return_types.aminmax(v.min(x, axis=ax, keepdims=bool(keepdim)),
                                v.max(x, axis=ax, keepdims=bool(keepdim)))


def nansum(input: Tensor, dim: Any = None, keepdim: bool = False, *,  # noqa: A002
           dtype: Any = None) -> Tensor:
    """The sum over ``dim`` with nans counted as zero."""
    x = tensor_arg(input, "nansum", "input")
    v = _vtl()
    if x.dtype.kind in "fc":
        x = v.where(v.isnan(x), v.zeros((), dtype=x.dtype, device=x.device), x)
    return v.sum(x, axis=_dims(dim, x.ndim, "nansum"), keepdims=bool(keepdim), dtype=dtype)


def nanmean(input: Tensor, dim: Any = None, keepdim: bool = False, *,  # noqa: A002
            dtype: Any = None) -> Tensor:
    """The mean over ``dim`` of the elements that are not nan (nan where all are)."""
    x = tensor_arg(input, "nanmean", "input")
    v = _vtl()
    if x.dtype.kind not in "fc":
        raise TypeError(f"nanmean() needs a floating-point input, got {x.dtype}")
    if dtype is not None:
        x = v.astype(x, dtype)
    ax = _dims(dim, x.ndim, "nanmean")
    count = v.sum(v.astype(v.logical_not(v.isnan(x)), x.dtype), axis=ax,
                  keepdims=bool(keepdim))
    return v.divide(nansum(x, ax, keepdim), count)


def _kth_along(x: Tensor, d: int, k: Tensor | int) -> tuple[Tensor, Tensor]:
    """Values and indices of the ``k``-th smallest element along ``d`` (nans last),
    ``d`` kept with size one."""
    v = _vtl()
    order = v.argsort(x, axis=d, stable=True)
    if isinstance(k, int):
        pos = _slice_along(order, d, k, k + 1)
    else:
        pos = v.take_along_axis(order, k, axis=d)
    return v.take_along_axis(x, pos, axis=d), pos


def median(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Any:  # noqa: A002
    """PyTorch's ``median``: the lower median (the ``(n - 1) // 2``-th smallest value, not
    the mean of the two middle ones); nan when the values include a nan. Without ``dim``,
    of every element (a 0-d tensor); with ``dim``, the named tuple ``(values, indices)``
    along it. The gradient goes to the returned element (without ``dim``: shared evenly
    by the elements equal to the median, as PyTorch does)."""
    from .. import return_types

    x = tensor_arg(input, "median", "input")
    v = _vtl()
    if dim is None:  # the gradient is shared by the elements equal to the median
        flat = v.reshape(x, (-1,))
        if not flat.shape[0]:
            raise ValueError("median() of an empty tensor")
        med = v.reshape(median(flat.detach(), 0).values, ())
        if not (v.is_grad_enabled() and x.requires_grad):
            return med
        tied = v.equal(flat, med)
        count = v.maximum(v.sum(v.astype(tied, x.dtype)), 1)
        zero = v.zeros((), dtype=x.dtype, device=x.device)
        return med + v.sum(v.where(tied, flat - med, zero)) / count
    if x.ndim == 0:
        _dim(dim, 0, "median")
        idt = v.__array_namespace_info__().default_dtypes(device=x.device)["indexing"]
        return return_types.median(x, v.zeros((), dtype=idt, device=x.device))
    d = _dim(dim, x.ndim, "median")
    n = x.shape[d]
    if not n:
        raise ValueError(f"median(): dim {d} is empty")
    k: Any = (n - 1) // 2
    if x.dtype.kind == "f":  # a nan sorts last: pick it when there is one
        has_nan = v.any(v.isnan(x), axis=d, keepdims=True)
        idt = v.argsort(_slice_along(x, d, 0, 1), axis=d).dtype
        k = v.where(has_nan, v.asarray(n - 1, dtype=idt, device=x.device), k)
    values, indices = _kth_along(x, d, k)
    if not keepdim:
        values, indices = v.squeeze(values, axis=d), v.squeeze(indices, axis=d)
    return return_types.median(values, indices)


_QUANTILE_MODES = ("linear", "lower", "higher", "midpoint", "nearest")


def quantile(input: Tensor, q: Any, dim: int | None = None, keepdim: bool = False, *,  # noqa: A002
             interpolation: str = "linear") -> Tensor:
    """The ``q``-th quantiles (``q`` a float or a 1-D tensor in ``[0, 1]``) over ``dim``
    (of every element when ``None``), with PyTorch's ``interpolation`` between the two
    nearest sorted values (``'linear'``, ``'lower'``, ``'higher'``, ``'midpoint'``,
    ``'nearest'``); nan where the values include a nan. A 1-D ``q`` adds a leading
    dim of its length; a tensor ``q`` with a value outside ``[0, 1]`` is an ``IndexError``
    (on a GPU at the next read of a result: it is checked on the device)."""
    x = tensor_arg(input, "quantile", "input")
    v = _vtl()
    if x.dtype.kind != "f":
        raise TypeError(f"quantile() needs a floating-point input, got {x.dtype}")
    if interpolation not in _QUANTILE_MODES:
        raise ValueError(f"quantile(): interpolation must be one of {_QUANTILE_MODES}, got "
                         f"{interpolation!r}")
    scalar_q = not isinstance(q, Tensor)
    if scalar_q:
        if not 0 <= float(q) <= 1:
            raise ValueError(f"quantile(): q must be in [0, 1], got {q}")
        qt = v.asarray([float(q)], dtype=x.dtype, device=x.device)
    else:
        if q.ndim > 1:
            raise ValueError(f"quantile(): q must be a scalar or a 1-D tensor, got shape "
                             f"{q.shape}")
        if q.dtype != x.dtype:
            raise TypeError(f"quantile(): q has dtype {q.dtype} but input has {x.dtype}")
        qt = v.reshape(q, (-1,))
    if dim is None:
        y, d = v.reshape(x, (-1,)), 0
    else:
        y, d = x, _dim(dim, x.ndim, "quantile")
    if y.ndim == 0:
        y, d = v.reshape(y, (1,)), 0
    n = y.shape[d]
    if not n:
        raise ValueError(f"quantile(): dim {d} is empty")
    y = v.moveaxis(y, d, -1)
    order = v.argsort(y, axis=-1, stable=True)
    s = v.take_along_axis(y, order, axis=-1)  # sorted along the last dim, nans last
    m = qt.shape[0]
    # a q outside [0, 1] (or nan) points past the end: an IndexError from the gather (on a
    # GPU at the next read of a result), not a quiet wrap-around
    valid = v.logical_and(qt >= 0, qt <= 1)
    pos = v.where(valid, v.multiply(qt, n - 1), v.asarray(float(n), dtype=x.dtype,
                                                          device=x.device))
    lo_f, hi_f = v.floor(pos), v.ceil(pos)
    idt = order.dtype
    shape = s.shape[:-1] + (m,)

    def at(p: Tensor) -> Tensor:
        return v.take_along_axis(s, v.broadcast_to(v.astype(p, idt), shape), axis=-1)

    if interpolation == "lower":
        out = at(lo_f)
    elif interpolation == "higher":
        out = at(hi_f)
    elif interpolation == "nearest":
        out = at(v.round(pos))
    else:
        lo, hi = at(lo_f), at(hi_f)
        w = v.subtract(pos, lo_f) if interpolation == "linear" else 0.5
        out = v.add(lo, v.multiply(v.subtract(hi, lo), w))
    nan = v.any(v.isnan(s), axis=-1, keepdims=True)
    out = v.where(nan, v.asarray(math.nan, dtype=x.dtype, device=x.device), out)
    out = v.moveaxis(out, -1, 0)  # q's dim first
    if keepdim:
        if dim is None:
            out = v.reshape(out, (m,) + (1,) * x.ndim)
        else:
            out = v.expand_dims(out, axis=d + 1)
    if scalar_q or q.ndim == 0:
        out = v.reshape(out, out.shape[1:])
    return out


def norm(input: Tensor, p: Any = "fro", dim: Any = None, keepdim: bool = False,  # noqa: A002
         dtype: Any = None) -> Tensor:
    """PyTorch's ``norm``: the vector ``p``-norm over ``dim`` (every element when
    ``None``; ``'fro'`` is the 2-norm), or with ``p='nuc'`` the nuclear norm of the
    matrices over the two dims ``dim`` (the last two by default)."""
    x = tensor_arg(input, "norm", "input")
    v = _vtl()
    if dtype is not None:
        x = v.astype(x, dtype)
    if p == "nuc":
        if dim is None:
            dim = (-2, -1)
        if not isinstance(dim, (tuple, list)) or len(dim) != 2:
            raise ValueError(f"norm(p='nuc') needs two dims, got dim={dim!r}")
        a, b = (_dim(k, x.ndim, "norm") for k in dim)
        y = v.moveaxis(x, (a, b), (-2, -1))
        out = v.linalg.matrix_norm(y, ord="nuc", keepdims=bool(keepdim))
        if keepdim:
            out = v.moveaxis(out, (-2, -1), (a, b))
        return out
    if p == "fro":
        p = 2
    if isinstance(p, str):
        raise ValueError(f"norm(): p must be a number, 'fro' or 'nuc', got {p!r}")
    return v.linalg.vector_norm(x, axis=_dims(dim, x.ndim, "norm"), keepdims=bool(keepdim),
                                ord=p)


def logsumexp(input: Tensor, dim: Any, keepdim: bool = False) -> Tensor:  # noqa: A002
    """``log(sum(exp(input)))`` over ``dim``, computed stably
    (``vtl.nn.functional.logsumexp``)."""
    return _vtl().nn.functional.logsumexp(input, dim, keepdim)


def softmax(input: Tensor, dim: int, dtype: Any = None) -> Tensor:  # noqa: A002
    """``vtl.nn.functional.softmax`` along ``dim``."""
    return _vtl().nn.functional.softmax(input, dim, dtype)


def log_softmax(input: Tensor, dim: int, dtype: Any = None) -> Tensor:  # noqa: A002
    """``vtl.nn.functional.log_softmax`` along ``dim``."""
    return _vtl().nn.functional.log_softmax(input, dim, dtype)


def sigmoid(input: Tensor) -> Tensor:  # noqa: A002
    """``1 / (1 + exp(-input))`` (``vtl.nn.functional.sigmoid``)."""
    return _vtl().nn.functional.sigmoid(input)


def relu(input: Tensor) -> Tensor:  # noqa: A002
    """``max(input, 0)`` (``vtl.nn.functional.relu``)."""
    return _vtl().nn.functional.relu(input)


# -- counting and sorting ---------------------------------------------------------------------
def histc(input: Tensor, bins: int = 100, min: Any = 0, max: Any = 0) -> Tensor:  # noqa: A002
    """Counts of ``input``'s elements in ``bins`` equal bins over ``[min, max]`` (the data's
    own range when ``min == max``, widened by one on each side when that range is a
    point); elements outside the range and nans are not counted. Same dtype as
    ``input`` (floating point); computed on the device, no sync."""
    x = tensor_arg(input, "histc", "input")
    v = _vtl()
    if x.dtype.kind != "f":
        raise TypeError(f"histc() needs a floating-point input, got {x.dtype}")
    bins = _int(bins, "histc", "bins")
    if bins <= 0:
        raise ValueError(f"histc(): bins must be positive, got {bins}")
    if min > max:
        raise ValueError(f"histc(): min ({min}) must not exceed max ({max})")
    with v.no_grad():
        flat = v.reshape(x, (-1,))
        dev = x.device
        if min == max and flat.shape[0]:
            fin = v.isfinite(flat)
            big = v.asarray(math.inf, dtype=x.dtype, device=dev)
            lo = v.min(v.where(fin, flat, big))
            hi = v.max(v.where(fin, flat, -big))
            point = lo == hi
            lo, hi = v.where(point, lo - 1, lo), v.where(point, hi + 1, hi)
        else:
            lo = v.asarray(float(min) - (min == max), dtype=x.dtype, device=dev)
            hi = v.asarray(float(max) + (min == max), dtype=x.dtype, device=dev)
        inside = v.logical_and(flat >= lo, flat <= hi)
        safe = v.where(inside, flat, lo)
        b = v.floor((safe - lo) / (hi - lo) * bins)
        idx = v.astype(v.clip(b, 0, bins - 1), v.int32)
        w = v.astype(inside, x.dtype)
        zeros = v.zeros((bins,), dtype=x.dtype, device=dev)
        from .scatter import scatter_add

        return scatter_add(zeros, 0, idx, w)


def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:  # noqa: A002
    """How often each value ``0, 1, ..., max(input)`` occurs in the 1-D non-negative
    integer ``input`` (at least ``minlength`` bins); with ``weights`` (``input``'s shape),
    the sums of the weights instead (in their dtype). The length depends on the data: a
    device sync reads the largest value."""
    x = tensor_arg(input, "bincount", "input")
    v = _vtl()
    if x.dtype.kind not in "iu" or x.ndim != 1:
        raise TypeError(f"bincount() needs a 1-D integer tensor, got dtype {x.dtype} and "
                        f"shape {x.shape}")
    minlength = _int(minlength, "bincount", "minlength")
    if minlength < 0:
        raise ValueError(f"bincount(): minlength must be non-negative, got {minlength}")
    n = minlength
    if x.shape[0]:
        lo, hi = v.stack([v.min(x), v.max(x)]).tolist()
        if lo < 0:
            raise ValueError(f"bincount(): input must be non-negative, got {lo}")
        n = max(n, hi + 1)
    idt = v.int64 if "int64" in v.__array_namespace_info__().dtypes(device=x.device) \
        else v.int32
    if weights is None:
        w = v.ones(x.shape, dtype=idt, device=x.device)
    else:
        w = tensor_arg(weights, "bincount", "weights")
        if w.shape != x.shape:
            raise ValueError(f"bincount(): weights have shape {w.shape}, input has "
                             f"{x.shape}; they must match")
    from .scatter import scatter_add

    return scatter_add(v.zeros((n,), dtype=w.dtype, device=x.device), 0, x, w)


def unique(input: Tensor, sorted: bool = True, return_inverse: bool = False,  # noqa: A002
           return_counts: bool = False, dim: int | None = None) -> Any:
    """The distinct values of the flattened ``input``, ascending; with
    ``return_inverse``/``return_counts`` the tuple ``(values, inverse, counts)`` (those
    asked for) as PyTorch (``inverse`` has ``input``'s shape). ``sorted=False`` gives them
    sorted too; ``dim`` is not supported (a ``ValueError``). A device sync (the number of
    values depends on the data)."""
    x = tensor_arg(input, "unique", "input")
    if dim is not None:
        raise ValueError("unique(): dim= (unique slices) is not supported by vtl; unique "
                         "values of the flattened tensor are what dim=None gives")
    v = _vtl()
    vals = v.reshape(x, (-1,))
    r = v.unique_all(vals)
    order = v.argsort(r.values, stable=True)  # the standard leaves the order open
    values = v.take(r.values, order)
    if not (return_inverse or return_counts):
        return values
    out: list[Tensor] = [values]
    if return_inverse:
        rank = v.argsort(order, stable=True)  # the position of each value once sorted
        out.append(v.reshape(v.take(rank, v.reshape(r.inverse_indices, (-1,))), x.shape))
    if return_counts:
        out.append(v.take(r.counts, order))
    return tuple(out)


def msort(input: Tensor) -> Tensor:  # noqa: A002
    """``input`` sorted along its first dim (ascending, nans last)."""
    x = tensor_arg(input, "msort", "input")
    v = _vtl()
    return v.take_along_axis(x, v.argsort(x, axis=0, stable=True), axis=0)
