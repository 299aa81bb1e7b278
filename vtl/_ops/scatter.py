"""PyTorch's gather/scatter family: ``gather``, ``scatter``, ``scatter_add``,
``index_select``, ``index_add``, ``index_copy``, ``index_fill`` and ``put`` (out of
place; the in-place ``Tensor`` methods ``scatter_``, ``index_add_`` ... write these
results through the in-place rules of ``vtl._ops._core``).

Each op is a composition of the differentiable gather/scatter pair of
:mod:`vtl._ops.indexing` on the flattened tensor: the positions an index tensor names are
turned into flat row numbers once, then a gather (``_gather_rows``, whose VJP is a
scatter-add), a scatter-add (``_scatter_add``, whose VJP is a gather) or an index write
(``_index_put``, whose VJPs zero the written positions and gather the written values).
Gradients of gradients work, as for indexing. Every index is bounds-checked: an index
outside ``[-n, n)`` is an ``IndexError`` on every backend (at once on the host; on a GPU
at the thread's next read of a result, see :func:`vtl._ops.indexing._norm_index`).
Negative indices count from the end, as in NumPy (PyTorch refuses them in ``gather``
and ``scatter``).
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from .._tensor import Tensor
from ._core import normalize_axis, tensor_arg
from .indexing import (
    _gather_rows,
    _index_put,
    _index_tensor,
    _norm_index,
    _parse,
    _scatter_add,
    _take,
)

__all__ = ["gather", "index_add", "index_copy", "index_fill", "index_select", "put",
           "scatter", "scatter_add"]


def _vtl() -> Any:
    import vtl

    return vtl


def _dim(dim: Any, ndim: int, fname: str) -> int:
    try:
        d = operator.index(dim)
    except TypeError:
        raise TypeError(f"{fname}(): dim must be an int, got {type(dim).__name__}") from None
    return normalize_axis(d, ndim, fname)


def _same_ndim(index: Tensor, x: Tensor, fname: str, what: str = "input") -> None:
    if index.ndim != max(x.ndim, 1) and not (index.ndim == 0 and x.ndim <= 1):
        raise ValueError(f"{fname}(): index must have as many dimensions as {what} "
                         f"({x.ndim}), got shape {index.shape}")


def _fits(index_shape: tuple[int, ...], shape: tuple[int, ...], skip: int | None,
          fname: str, what: str) -> None:
    """``index_shape[k] <= shape[k]`` for every axis ``k`` other than ``skip`` (a 0-d
    shape counts as ``(1,)``)."""
    for k, (m, n) in enumerate(zip(index_shape or (1,), shape or (1,), strict=True)):
        if k != skip and m > n:
            raise ValueError(f"{fname}(): index of shape {index_shape} is larger than "
                             f"{what} of shape {shape} along dimension {k}")


def _linear(idx: Any, ishape: tuple[int, ...], shape: tuple[int, ...], d: int,
            dev: Any) -> Any:
    """Flat (row-major) positions in an array of ``shape`` of the elements an index tensor
    (checked raw indices ``idx`` of shape ``ishape``) names along axis ``d``: element
    ``j`` of the index stands for ``shape``'s element with coordinate ``idx[j]`` on axis
    ``d`` and ``j``'s own coordinates on the other axes. A raw 1-D array."""
    xp = dev.xp
    nd = len(shape)
    strides = [1] * nd
    for k in range(nd - 2, -1, -1):
        strides[k] = strides[k + 1] * shape[k + 1]
    lin = idx if strides[d] == 1 else xp.multiply(idx, strides[d])
    idt = lin.dtype
    nat = dev.backend.native_device(dev.index)
    for k in range(nd):
        if k == d or ishape[k] == 1:
            continue
        coord = xp.arange(ishape[k], dtype=idt, device=nat)
        if strides[k] != 1:
            coord = coord * strides[k]
        lin = xp.add(lin, xp.reshape(coord, tuple(ishape[k] if j == k else 1
                                                  for j in range(nd))))
    if tuple(lin.shape) != ishape:
        lin = xp.broadcast_to(lin, ishape)
    return xp.reshape(lin, (-1,))


def _flat(x: Tensor) -> Tensor:
    return _vtl().reshape(x, (-1,))


def _rows(index: Tensor, x_shape: tuple[int, ...], d: int, fname: str) -> Any:
    """The flat positions in ``x_shape`` that ``index`` names along ``d`` (checked)."""
    dev = index._device
    shape = x_shape or (1,)
    ishape = index.shape or (1,)
    raw = index._data if index.ndim else dev.xp.reshape(index._data, (1,))
    idx = _norm_index(raw, shape[d], d, dev, False, f"{fname}(): ")
    return _linear(idx, ishape, shape, d, dev)


def _part(src: Tensor, ishape: tuple[int, ...]) -> Tensor:
    """The leading ``ishape`` block of ``src`` (the elements a scatter reads)."""
    if src.ndim != len(ishape):
        ishape = ishape or (1,)
    if src.shape == ishape:
        return src
    return src[tuple(slice(0, m) for m in ishape)]


def _same_dtype(src: Tensor, x: Tensor, fname: str, what: str = "src") -> None:
    if src._data.dtype != x._data.dtype:
        raise TypeError(f"{fname}(): {what} has dtype {src.dtype} but input has dtype "
                        f"{x.dtype}; they must be equal (cast one with .to(dtype))")
    if src._device is not x._device:
        raise ValueError(f"{fname}(): {what} is on {src._device} but input is on "
                         f"{x._device}; move it with .to(...) first")


def gather(input: Tensor, dim: int, index: Tensor, *,  # noqa: A002 - PyTorch's names
           sparse_grad: bool = False) -> Tensor:
    """PyTorch's ``gather``: ``out[i][j][k] = input[index[i][j][k]][j][k]`` for ``dim=0``
    (likewise for the other dims). ``index`` has ``input``'s number of dimensions and is no
    larger than ``input`` along the other dims; the result has ``index``'s shape. The
    gradient is a scatter-add (repeated indices accumulate). ``sparse_grad`` is accepted
    and has no effect (vtl has no sparse tensors)."""
    x = tensor_arg(input, "gather", "input")
    index = _index_tensor(index, x, "gather")
    _same_ndim(index, x, "gather")
    d = _dim(dim, x.ndim, "gather")
    _fits(index.shape, x.shape, d, "gather", "input")
    rows = _rows(index, x.shape, d, "gather")
    return _vtl().reshape(_gather_rows(_flat(x), rows), index.shape)


def _scatter_args(input: Any, dim: Any, index: Any, src: Any, fname: str  # noqa: A002
                  ) -> tuple[Tensor, int, Tensor]:
    x = tensor_arg(input, fname, "input")
    index = _index_tensor(index, x, fname)
    _same_ndim(index, x, fname)
    d = _dim(dim, x.ndim, fname)
    _fits(index.shape, x.shape, d, fname, "input")
    if isinstance(src, Tensor):
        _same_dtype(src, x, fname)
        _same_ndim(index, src, fname, "src")
        _fits(index.shape, src.shape, None, fname, "src")
    return x, d, index


def scatter_add(input: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:  # noqa: A002
    """PyTorch's ``scatter_add`` (out of place): ``input`` with ``src[i][j][k]`` added at
    ``[index[i][j][k]][j][k]`` for ``dim=0`` (repeated indices accumulate). ``src`` has
    ``input``'s dtype; only its leading ``index.shape`` block is read. Gradients: ``g`` to
    ``input``, ``gather(g, dim, index)`` to ``src``."""
    src = tensor_arg(src, "scatter_add", "src")
    x, d, index = _scatter_args(input, dim, index, src, "scatter_add")
    vals = _flat(_part(src, index.shape))
    out = _scatter_add(_flat(x), _rows(index, x.shape, d, "scatter_add"), vals)
    return _vtl().reshape(out, x.shape)


def scatter(input: Tensor, dim: int, index: Tensor, src: Any = None, *,  # noqa: A002
            value: Any = None, reduce: str | None = None) -> Tensor:
    """PyTorch's ``scatter`` (out of place): ``input`` with ``src[i][j][k]`` written at
    ``[index[i][j][k]][j][k]`` for ``dim=0``; ``src`` may be a tensor of ``input``'s dtype
    (its leading ``index.shape`` block is read) or a scalar, also given as ``value=``. Where
    ``index`` repeats a position, which write wins is unspecified (as in PyTorch).
    Gradients: ``g`` with the written positions zeroed to ``input``, ``gather(g, dim,
    index)`` to ``src``. ``reduce='add'`` is :func:`scatter_add` (of a scalar too);
    PyTorch's ``reduce='multiply'`` is not supported (a ``ValueError``)."""
    if (src is None) == (value is None):
        raise TypeError("scatter() needs exactly one of src (a tensor or a scalar) and "
                        "value=")
    src = value if src is None else src
    if reduce is not None:
        if reduce != "add":
            raise ValueError(f"scatter(): reduce must be None or 'add', got {reduce!r} "
                             "(vtl has no multiplying scatter)")
        x = tensor_arg(input, "scatter", "input")
        if not isinstance(src, Tensor):
            src = _vtl().full(tuple(getattr(index, "shape", ())), _scalar(src, x, "scatter"),
                              dtype=x.dtype, device=x.device)
        return scatter_add(x, dim, index, src)
    x, d, index = _scatter_args(input, dim, index, src, "scatter")
    rows = _rows(index, x.shape, d, "scatter")
    flat = _flat(x)
    if isinstance(src, Tensor):
        vals: Any = _flat(_part(src, index.shape))
    else:
        vals = _scalar(src, x, "scatter")
        if index.size != 1:  # one value per index entry
            vals = _vtl().full((index.size,), vals, dtype=x.dtype, device=x.device)
    out = _index_put(flat, [("a", rows, 0)], True, vals)
    return _vtl().reshape(out, x.shape)


def _scalar(v: Any, x: Tensor, fname: str) -> Any:
    """A Python/NumPy scalar as a Python value of ``x``'s kind (PyTorch casts it)."""
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, Tensor) or not isinstance(v, (bool, int, float, complex)):
        raise TypeError(f"{fname}(): expected a scalar or a tensor, got {type(v).__name__}")
    k = x._data.dtype.kind
    if k == "b":
        return bool(v)
    if k in "iu":
        if isinstance(v, complex):
            raise TypeError(f"{fname}(): cannot write a complex value into an {x.dtype} "
                            "tensor")
        return int(v)
    if k == "f":
        if isinstance(v, complex):
            raise TypeError(f"{fname}(): cannot write a complex value into a {x.dtype} "
                            "tensor")
        return float(v)
    return complex(v)


def _index_1d(index: Any, x: Tensor, fname: str) -> Tensor:
    index = _index_tensor(index, x, fname)
    if index.ndim > 1:
        raise ValueError(f"{fname}(): index must be 1-D (or 0-d), got shape {index.shape}")
    return index


def index_select(input: Tensor, dim: int, index: Tensor) -> Tensor:  # noqa: A002
    """The slices of ``input`` along ``dim`` at the positions ``index`` (1-D), in that
    order (PyTorch's ``index_select``); the gradient is a scatter-add."""
    x = tensor_arg(input, "index_select", "input")
    index = _index_1d(index, x, "index_select")
    d = _dim(dim, x.ndim, "index_select")
    raw = index._data if index.ndim else x._device.xp.reshape(index._data, (1,))
    if x.ndim == 0:  # a 0-d tensor is one element along dim 0
        out = _take(_vtl().reshape(x, (1,)), raw, 0, "index_select(): ")
        return _vtl().reshape(out, ()) if index.ndim == 0 else out
    return _take(x, raw, d, "index_select(): ")


def _moved_source(x: Tensor, d: int, index: Tensor, source: Tensor, fname: str) -> Tensor:
    """``source`` checked against ``input`` (``input``'s shape with ``dim`` of size
    ``len(index)``), as a tensor."""
    source = tensor_arg(source, fname, "source")
    _same_dtype(source, x, fname, "source")
    want = tuple(index.size if k == d else s for k, s in enumerate(x.shape))
    if source.shape != want and not (x.ndim == 0 and source.size == 1):
        raise ValueError(f"{fname}(): source must have shape {want} (input's shape with "
                         f"dim {d} of size len(index) = {index.size}), got {source.shape}")
    return source


def index_add(input: Tensor, dim: int, index: Tensor, source: Tensor, *,  # noqa: A002
              alpha: Any = 1) -> Tensor:
    """``input`` with ``alpha * source`` added at the slices ``index`` (1-D) along ``dim``,
    out of place (PyTorch's ``index_add``); repeated indices accumulate. Gradients: ``g``
    to ``input``, ``alpha * index_select(g, dim, index)`` to ``source``."""
    x = tensor_arg(input, "index_add", "input")
    index = _index_1d(index, x, "index_add")
    d = _dim(dim, x.ndim, "index_add")
    source = _moved_source(x, d, index, source, "index_add")
    v = _vtl()
    if alpha != 1:
        source = v.multiply(source, alpha)
        if source.dtype != x.dtype:
            raise TypeError(f"index_add(): alpha={alpha!r} changes source's dtype to "
                            f"{source.dtype}, input has {x.dtype}")
    xs = x if x.ndim else v.reshape(x, (1,))
    src = v.reshape(source, xs.shape[:d] + (index.size,) + xs.shape[d + 1:])
    ishape = tuple(index.size if k == d else s for k, s in enumerate(xs.shape))
    idx = v.reshape(index, (index.size,) + (1,) * (xs.ndim - 1 - d))
    idx = v.broadcast_to(v.reshape(idx, (1,) * d + idx.shape), ishape)
    rows = _rows(idx, xs.shape, d, "index_add")
    out = _scatter_add(_flat(xs), rows, _flat(src))
    return v.reshape(out, x.shape)


def _dim_key(index: Tensor, d: int) -> tuple:
    return (slice(None),) * d + (index,)


def index_copy(input: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:  # noqa: A002
    """``input`` with the slices ``index`` (1-D) along ``dim`` replaced by those of
    ``source``, out of place (PyTorch's ``index_copy``; a repeated index: which copy wins
    is unspecified). Gradients: ``g`` with those slices zeroed to ``input``,
    ``index_select(g, dim, index)`` to ``source``."""
    x = tensor_arg(input, "index_copy", "input")
    index = _index_1d(index, x, "index_copy")
    d = _dim(dim, x.ndim, "index_copy")
    source = _moved_source(x, d, index, source, "index_copy")
    if x.ndim == 0:
        return _vtl().reshape(index_copy(_vtl().reshape(x, (1,)), 0, index,
                                         _vtl().reshape(source, (1,))), ())
    items, adv = _parse(_dim_key(_vtl().reshape(index, (index.size,)), d), x)
    return _index_put(x, items, adv, source)


def index_fill(input: Tensor, dim: int, index: Tensor, value: Any) -> Tensor:  # noqa: A002
    """``input`` with the slices ``index`` (1-D) along ``dim`` set to ``value`` (a scalar
    or a 0-d tensor), out of place (PyTorch's ``index_fill``). Gradients: ``g`` with those
    slices zeroed to ``input``; their sum to a 0-d tensor ``value``."""
    x = tensor_arg(input, "index_fill", "input")
    index = _index_1d(index, x, "index_fill")
    d = _dim(dim, x.ndim, "index_fill")
    if isinstance(value, Tensor):
        if value.ndim:
            raise ValueError(f"index_fill(): value must be a scalar or a 0-d tensor, got "
                             f"shape {value.shape}")
        if value._data.dtype != x._data.dtype:
            value = _vtl().astype(value, x.dtype)
    else:
        value = _scalar(value, x, "index_fill")
    if x.ndim == 0:
        return _vtl().reshape(index_fill(_vtl().reshape(x, (1,)), 0, index, value), ())
    items, adv = _parse(_dim_key(_vtl().reshape(index, (index.size,)), d), x)
    return _index_put(x, items, adv, value)


def put(input: Tensor, index: Tensor, source: Tensor,  # noqa: A002
        accumulate: bool = False) -> Tensor:
    """``input`` with ``source``'s elements written (``accumulate=True``: added) at the
    positions ``index`` of the flattened ``input``, out of place (PyTorch's ``put``).
    ``source`` has as many elements as ``index`` and ``input``'s dtype."""
    x = tensor_arg(input, "put", "input")
    index = _index_tensor(index, x, "put")
    source = tensor_arg(source, "put", "source")
    _same_dtype(source, x, "put", "source")
    if source.size != index.size:
        raise ValueError(f"put(): source has {source.size} elements but index has "
                         f"{index.size}; they must match")
    dev = x._device
    flat = _flat(x)
    idx = _norm_index(dev.xp.reshape(index._data, (-1,)), max(x.size, 0), 0, dev, False,
                      "put(): ")
    vals = _flat(source)
    if accumulate:
        out = _scatter_add(flat, idx, vals)
    else:
        out = _index_put(flat, [("a", idx, 0)], True, vals)
    return _vtl().reshape(out, x.shape)
