"""Indexing: ``Tensor.__getitem__``/``__setitem__`` with NumPy's semantics
(basic, integer-array and boolean-mask keys), ``take`` and ``take_along_axis``.

Forward results use only standard functions of the backend namespace. A basic
key (ints, slices, ``...``, ``None``) indexes the backend array directly, so the
result is a view where the backend gives views, and it shares the version
counter of the indexed tensor. A key with integer arrays or boolean masks is
lowered to one basic index, a permutation that brings the indexed axes to the
front, a reshape that merges them, and one ``take`` of flat row indices; the
indexed block then moves to where NumPy puts it (in place of the first
advanced index when the advanced indices are adjacent, else in front).

Gradients of every gather are true scatter-adds (``Backend.scatter_add``), so
repeated indices accumulate; the scatter's own VJP is a gather, so gradients
of gradients work. Integer indices are bounds-checked (``IndexError``, as
NumPy) on every backend: on the host at once, on a GPU by the backend on the device
and raised at the thread's next read of a result (see :func:`_norm_index`).
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from .._tensor import Tensor
from ..backends._base import index_error
from ..backends._dtypes import kind as _dkind
from ._aliases import torch_names
from ._core import (
    assign_result,
    check_inplace,
    needs_grad,
    new,
    normalize_axis,
    record,
    sum_to,
    tensor_arg,
)
from .views import make_view

__all__ = ["take", "take_along_axis"]

_FULL = slice(None)


# -- small helpers ---------------------------------------------------------------------
def _index_dtype(dev: Any) -> Any:
    return dev.backend.default_dtypes(dev.index)["indexing"]


def _native(dev: Any) -> Any:
    return dev.backend.native_device(dev.index)


def _too_many(ndim: int, n: int) -> IndexError:
    return IndexError(
        f"too many indices for tensor: tensor is {ndim}-dimensional, but {n} were indexed"
    )


def _out_of_bounds(i: int, axis: int, n: int) -> IndexError:
    return IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")


def _inverse(perm: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(sorted(range(len(perm)), key=perm.__getitem__))


def _broadcast_shapes(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    """NumPy's broadcast of index-array shapes; ``IndexError`` when they clash."""
    nd = max((len(s) for s in shapes), default=0)
    out = [1] * nd
    for s in shapes:
        for i, n in enumerate(s, nd - len(s)):
            if n != out[i]:
                if out[i] == 1:
                    out[i] = n
                elif n != 1:
                    raise IndexError(
                        "shape mismatch: indexing arrays could not be broadcast together with "
                        "shapes " + " ".join(str(tuple(t)) for t in shapes)
                    )
    return tuple(out)


def _norm_index(arr: Any, n: int, axis: int, dev: Any, host: bool, what: str = "", *,
                negative: bool = True) -> Any:
    """Integer indices wrapped from ``[-n, n)`` to ``[0, n)``, on the device, in a dtype
    its ``take`` accepts; an index outside ``[-n, n)`` is an ``IndexError``, as in NumPy.
    With ``negative=False`` the valid range is ``[0, n)``: a negative index is an
    ``IndexError`` too (PyTorch's ``embedding``).

    Indices in host memory (Python sequences, NumPy arrays, tensors of the numpy backend)
    are checked here. Index arrays in accelerator memory are checked by the backend on the
    device (``Backend.check_indices``), without a sync: the error is raised by the next
    read of a result on that thread (``float(loss)``, ``.item()``, ``.numpy()``, printing)
    or ``synchronize()``, and the failing entries read and write nothing there.
    """
    if host or isinstance(arr, np.ndarray):
        idt = _index_dtype(dev)
        mn = 0
        if arr.size:
            mn, mx = int(arr.min()), int(arr.max())
            lo = -n if negative else 0
            if mn < lo or mx >= n:
                raise index_error(what, mn if mn < lo else mx, axis, n, negative)
        if host:
            arr = np.asarray(arr, dtype=idt)
            if mn < 0:
                arr = np.where(arr < 0, arr + n, arr)
            return dev.backend.from_host(np.ascontiguousarray(arr), dev.index)
        xp = dev.xp
        if arr.dtype != idt:
            arr = xp.astype(arr, idt)
        return xp.where(arr < 0, arr + n, arr) if mn < 0 else arr
    if negative:  # (the plain call: a backend written before ``negative`` still serves)
        return dev.backend.check_indices(arr, n, axis, what)
    return dev.backend.check_indices(arr, n, axis, what, negative=False)


# -- key parsing -------------------------------------------------------------------------
def _basic_key(key: tuple, shape: tuple[int, ...]) -> tuple | None:
    """A key of Python ints, slices, ``None`` and ``...`` checked against ``shape``
    (with ``...`` appended so that all-int keys give 0-d views), or ``None`` when the
    key holds anything else."""
    ndim = len(shape)
    consumed = 0
    ell = False
    for k in key:
        c = k.__class__
        if c is int or c is slice:
            consumed += 1
        elif k is None:
            continue
        elif k is Ellipsis:
            if ell:
                raise IndexError("an index can only have a single ellipsis ('...')")
            ell = True
        else:
            return None
    if consumed > ndim:
        raise _too_many(ndim, consumed)
    dim = 0
    for k in key:
        c = k.__class__
        if c is int:
            n = shape[dim]
            if not -n <= k < n:
                raise _out_of_bounds(k, dim, n)
            dim += 1
        elif c is slice:
            dim += 1
        elif k is Ellipsis:
            dim += ndim - consumed
    return key if ell else (*key, Ellipsis)


def _classify(k: Any, x: Tensor) -> tuple[str, Any, bool]:
    """One key entry as ``(kind, value, on_host)``; kinds: i(nt) s(lice) n(one)
    e(llipsis) a(rray of ints) b(oolean mask)."""
    if k is None:
        return "n", None, False
    if k is Ellipsis:
        return "e", None, False
    if isinstance(k, slice):
        return "s", k, False
    dev = x._device
    if isinstance(k, Tensor):
        if k._device is not dev:
            raise ValueError(
                f"index tensor is on {k._device} but the indexed tensor is on {dev}; "
                "move the index with .to(...) first"
            )
        kind = _array_kind(k._data, False)
        if kind == "b" and k.ndim == 0:
            return "b", bool(dev.backend.to_host(k._data)), True
        return kind, k._data, False
    if isinstance(k, (bool, np.bool_)):
        return "b", bool(k), True
    if isinstance(k, (int, np.integer)):
        return "i", int(k), False
    if isinstance(k, (list, tuple, np.ndarray)) or dev.backend.is_native(k):
        host = not dev.backend.is_native(k)
        if host:
            try:
                k = np.asarray(k)
            except ValueError as exc:
                raise IndexError(f"cannot use {k!r} as an index: {exc}") from None
            if k.size == 0 and _dkind(k.dtype) == "f":  # [] indexes nothing
                k = k.astype(np.intp)
        kind = _array_kind(k, host)
        if kind == "b" and k.ndim == 0:
            return "b", bool(k), True
        return kind, k, host
    try:
        return "i", operator.index(k), False
    except TypeError:
        raise IndexError(
            "only integers, slices (`:`), ellipsis (`...`), None and integer or boolean "
            f"tensors are valid indices, got {type(k).__name__}"
        ) from None


def _array_kind(arr: Any, host: bool) -> str:
    kind = _dkind(np.dtype(arr.dtype))
    if kind == "b":
        return "b"
    if kind in "iu":
        return "a"
    raise IndexError(f"tensors used as indices must be of integer or boolean type, got {arr.dtype}")


def _parse(key: tuple, x: Tensor) -> tuple[list[tuple[str, Any, int]], bool]:
    """Validate ``key`` against ``x`` and bring every array onto ``x``'s device.

    Returns ``(items, advanced)``: items are ``(kind, value, xdim)`` with ints and
    integer arrays bounds-checked and wrapped, masks shape-checked, 0-d masks as
    Python bools and ``'e'`` carrying the number of axes it stands for.
    """
    dev = x._device
    shape = x.shape
    ndim = len(shape)
    raw = [_classify(k, x) for k in key]
    consumed = 0
    n_ell = 0
    advanced = False
    for kind, v, _ in raw:
        if kind in "isa":
            consumed += 1
        elif kind == "b":
            advanced = True
            if not isinstance(v, bool):
                consumed += v.ndim
        elif kind == "e":
            n_ell += 1
        if kind == "a":
            advanced = True
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if consumed > ndim:
        raise _too_many(ndim, consumed)
    items: list[tuple[str, Any, int]] = []
    xdim = 0
    for kind, v, host in raw:
        if kind == "i":
            n = shape[xdim]
            if not -n <= v < n:
                raise _out_of_bounds(v, xdim, n)
            items.append(("i", v + n if v < 0 and advanced else v, xdim))
            xdim += 1
        elif kind == "s":
            items.append(("s", v, xdim))
            xdim += 1
        elif kind == "n":
            items.append(("n", None, xdim))
        elif kind == "e":
            m = ndim - consumed
            items.append(("e", m, xdim))
            xdim += m
        elif kind == "a":
            items.append(("a", _norm_index(v, shape[xdim], xdim, dev, host), xdim))
            xdim += 1
        elif isinstance(v, bool):
            items.append(("b", v, xdim))
        else:
            k = v.ndim
            for j in range(k):  # an empty mask axis selects nothing (as NumPy)
                if v.shape[j] != shape[xdim + j] and v.shape[j] != 0:
                    raise IndexError(
                        f"boolean index did not match indexed tensor along axis {xdim + j}; "
                        f"size of axis is {shape[xdim + j]} but size of corresponding boolean "
                        f"axis is {v.shape[j]}"
                    )
            if host:
                v = dev.backend.from_host(np.ascontiguousarray(v), dev.index)
            items.append(("b", v, xdim))
            xdim += k
    return items, advanced


def _raw_key(items: list[tuple[str, Any, int]]) -> tuple:
    out: list[Any] = []
    for kind, v, _ in items:
        out.append(Ellipsis if kind == "e" else v)
    return tuple(out)


# -- the differentiable gather/scatter pair ------------------------------------------------
def _gather_rows(x: Tensor, rows: Any) -> Tensor:
    """``x`` at the rows ``rows`` (a raw 1-D index array) of axis 0."""
    dev = x._device
    out = dev.xp.take(x._data, rows, axis=0)
    if needs_grad(x):
        n = x.shape[0]
        return record(out, dev, "GatherBackward", (x,), lambda g, _: _scatter_rows(g, rows, n))
    return new(out, dev)


def _scatter_rows(values: Tensor, rows: Any, n: int) -> Tensor:
    """Zeros with ``n`` rows plus ``values`` added at ``rows``: repeated rows accumulate."""
    dev = values._device
    xp = dev.xp
    z = xp.zeros((n, *values.shape[1:]), dtype=values._data.dtype, device=_native(dev))
    out = dev.backend.scatter_add(z, rows, values._data)
    if needs_grad(values):
        return record(out, dev, "ScatterAddBackward", (values,),
                      lambda g, _: _gather_rows(g, rows))
    return new(out, dev)


def _scatter_add(target: Tensor, indices: Any, values: Tensor) -> Tensor:
    """``target`` with ``values`` added at rows ``indices`` of axis 0, out of place.

    ``indices`` is a 1-D integer Tensor or raw array of in-range rows; ``values`` has
    shape ``indices.shape + target.shape[1:]``. Repeated rows accumulate.
    Differentiable in ``target`` (identity) and ``values`` (a gather).
    """
    dev = target._device
    rows = indices._data if isinstance(indices, Tensor) else indices
    out = dev.xp.asarray(target._data, copy=True)
    out = dev.backend.scatter_add(out, rows, values._data)
    if needs_grad(target, values):
        t_req, v_req = target._requires_grad, values._requires_grad
        return record(out, dev, "ScatterAddBackward", (target, values), lambda g, _: (
            g if t_req else None, _gather_rows(g, rows) if v_req else None))
    return new(out, dev)


def _embed(g: Tensor, key: tuple, shape: tuple[int, ...]) -> Tensor:
    """Zeros of ``shape`` with ``g`` written at the basic key ``key`` (no ``None``):
    the adjoint of basic indexing."""
    dev = g._device
    z = dev.xp.zeros(shape, dtype=g._data.dtype, device=_native(dev))
    z[key] = g._data
    if needs_grad(g):
        return record(z, dev, "EmbedBackward", (g,), lambda h, _: _getitem(h, key))
    return new(z, dev)


def _basic_grad(g: Tensor, key: tuple, shape: tuple[int, ...]) -> Tensor:
    """Gradient of ``x[key]`` for a checked basic key: ``g`` embedded in zeros."""
    from .manipulation import reshape

    ndim = len(shape)
    consumed = sum(1 for k in key if k.__class__ is int or k.__class__ is slice)
    set_key: list[Any] = []
    mid: list[int] = []
    gi = 0
    gshape = g.shape
    for k in key:
        if k is None:
            gi += 1
        elif k is Ellipsis:
            m = ndim - consumed
            set_key.extend([_FULL] * m)
            mid.extend(gshape[gi:gi + m])
            gi += m
        else:
            set_key.append(k)
            if k.__class__ is slice:
                mid.append(gshape[gi])
                gi += 1
    mid.extend(gshape[gi:])
    if tuple(mid) != gshape:
        g = reshape(g, tuple(mid))
    return _embed(g, tuple(set_key), shape)


# -- advanced indexing ------------------------------------------------------------------------
class _Plan:
    """An advanced key lowered to: ``y = x[pre]`` (basic), permute the indexed axes of
    ``y`` to the front, merge them into one axis of ``n_rows`` rows, ``take`` the flat
    ``rows``, unmerge the broadcast index shape and move it to ``out_pos``."""

    __slots__ = ("x_shape", "pre", "set_key", "none_dims", "perm", "adv_sizes", "rest_sizes",
                 "bshape", "rows", "n_rows", "out_perm", "y_shape")

    def __init__(self, items: list[tuple[str, Any, int]], x: Tensor) -> None:
        dev = x._device
        xp = dev.xp
        shape = x.shape
        ndim = len(shape)
        pre: list[Any] = []
        adv: list[tuple[int, Any, int]] = []   # (axis of y, index array, axis size)
        rest: list[int] = []
        none_dims: list[int] = []
        bshapes: list[tuple[int, ...]] = []
        adv_pos: list[int] = []
        n_before = 0
        ydim = 0
        xdim = 0
        for pos, (kind, v, _) in enumerate(items):
            if kind == "i":
                pre.append(v)
                adv_pos.append(pos)
                xdim += 1
                continue
            if kind in "sne":
                m = v if kind == "e" else 1
                if kind == "e":
                    pre.extend([_FULL] * m)
                else:
                    pre.append(v)
                if kind == "n":
                    none_dims.append(ydim)
                rest.extend(range(ydim, ydim + m))
                if not adv_pos:
                    n_before += m
                ydim += m
                if kind != "n":
                    xdim += m
                continue
            adv_pos.append(pos)
            if kind == "a":
                pre.append(_FULL)
                adv.append((ydim, v, shape[xdim]))
                bshapes.append(tuple(v.shape))
                ydim += 1
                xdim += 1
            elif isinstance(v, bool):
                bshapes.append((1 if v else 0,))
            else:
                nz = xp.nonzero(v)
                for j, idx in enumerate(nz):
                    adv.append((ydim + j, idx, shape[xdim + j]))
                bshapes.append(tuple(nz[0].shape))
                pre.extend([_FULL] * v.ndim)
                ydim += v.ndim
                xdim += v.ndim
        m = ndim - xdim
        pre.extend([_FULL] * m)
        rest.extend(range(ydim, ydim + m))
        bshape = _broadcast_shapes(bshapes)
        adjacent = adv_pos[-1] - adv_pos[0] + 1 == len(adv_pos)
        out_pos = n_before if adjacent else 0

        # flat row indices over the indexed axes (row-major in their order)
        idt = _index_dtype(dev)
        lin = None
        stride = 1
        for _, idx, n in reversed(adv):
            term = idx if stride == 1 else xp.multiply(idx, stride)
            lin = term if lin is None else xp.add(lin, term)
            stride *= n
        if lin is None:
            lin = xp.zeros(bshape, dtype=idt, device=_native(dev))
        elif tuple(lin.shape) != bshape:
            lin = xp.broadcast_to(lin, bshape)
        self.rows = xp.reshape(lin, (-1,))
        self.n_rows = stride
        self.adv_sizes = tuple(n for _, _, n in adv)
        self.bshape = bshape
        self.x_shape = shape

        trivial = all(k.__class__ is slice and k == _FULL for k in pre)
        self.pre = None if trivial else tuple(pre)
        self.set_key = None if trivial else tuple(k for k in pre if k is not None)
        perm = tuple(d for d, _, _ in adv) + tuple(rest)
        self.perm = None if perm == tuple(range(len(perm))) else perm
        self.y_shape: tuple[int, ...] = ()
        self.rest_sizes: tuple[int, ...] = ()
        self.none_dims = frozenset(none_dims)
        nb = len(bshape)
        nr = len(rest)
        self.out_perm = None if out_pos == 0 else (
            tuple(range(nb, nb + out_pos)) + tuple(range(nb)) + tuple(range(nb + out_pos, nb + nr))
        )

    def gather(self, data: Any, xp: Any) -> Any:
        y = data if self.pre is None else data[self.pre]
        yshape = tuple(y.shape)
        self.y_shape = yshape
        if self.perm is not None:
            y = xp.permute_dims(y, self.perm)
        nadv = len(self.adv_sizes)
        rest = tuple(y.shape[nadv:])
        self.rest_sizes = rest
        y = xp.reshape(y, (self.n_rows, *rest))
        out = xp.take(y, self.rows, axis=0)
        out = xp.reshape(out, self.bshape + rest)
        if self.out_perm is not None:
            out = xp.permute_dims(out, self.out_perm)
        return out

    def grad(self, g: Tensor) -> Tensor:
        """Scatter-add ``g`` (the output gradient) back to the shape of ``x``."""
        from .manipulation import permute_dims, reshape

        if self.out_perm is not None:
            g = permute_dims(g, _inverse(self.out_perm))
        size = 1
        for s in self.bshape:
            size *= s
        g = reshape(g, (size, *self.rest_sizes))
        z = _scatter_rows(g, self.rows, self.n_rows)
        z = reshape(z, self.adv_sizes + self.rest_sizes)
        if self.perm is not None:
            z = permute_dims(z, _inverse(self.perm))
        if self.pre is None:
            return z
        if self.none_dims:
            nd = self.none_dims
            z = reshape(z, tuple(s for i, s in enumerate(self.y_shape) if i not in nd))
        return _embed(z, self.set_key, self.x_shape)


# -- __getitem__ / __setitem__ ---------------------------------------------------------------
def _getitem(x: Tensor, key: Any) -> Tensor:
    """``x[key]`` with NumPy's semantics; differentiable (scatter-add gradient)."""
    if key.__class__ is Tensor and _dkind(key._data.dtype) in "iu" and key._data.ndim \
            and x._data.ndim and key._device is x._device:
        return _take(x, key._data, 0, "")  # x[idx]: the most common advanced key
    if key.__class__ is not tuple:
        key = (key,)
    shape = x._data.shape
    bkey = _basic_key(key, shape)
    if bkey is None:
        items, advanced = _parse(key, x)
        if advanced:
            return _getitem_advanced(x, items)
        bkey = _basic_key(_raw_key(items), shape)
    dev = x._device
    out = x._data[bkey]
    if needs_grad(x):
        xshape = tuple(shape)
        t = record(out, dev, "IndexBackward", (x,), lambda g, _: _basic_grad(g, bkey, xshape))
    else:
        t = new(out, dev)
    return make_view(t, x, "index", bkey)


def _getitem_advanced(x: Tensor, items: list[tuple[str, Any, int]]) -> Tensor:
    dev = x._device
    plan = _Plan(items, x)
    out = plan.gather(x._data, dev.xp)
    if needs_grad(x):
        return record(out, dev, "IndexBackward", (x,), lambda g, _: plan.grad(g))
    return new(out, dev)


def _getitem_items(x: Tensor, items: list[tuple[str, Any, int]], advanced: bool) -> Tensor:
    if advanced:
        return _getitem_advanced(x, items)
    return _getitem(x, _raw_key(items))


def _value_raw(value: Any, x: Tensor) -> Any:
    """The raw value to write into ``x``, after device and dtype-kind checks."""
    dt = x._data.dtype
    if isinstance(value, Tensor):
        if value._device is not x._device:
            raise ValueError(
                f"__setitem__(): the value is on {value._device} but the tensor is on "
                f"{x._device}; move it with .to(...) first"
            )
        if not np.can_cast(value._data.dtype, dt, "same_kind"):
            raise TypeError(
                f"__setitem__(): cannot write a {value.dtype} value into a {dt} tensor "
                "without losing information; cast it with vtl.astype first"
            )
        return value._data
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, (bool, int, float, complex)):
        kind = _dkind(dt)
        ok = (isinstance(value, bool) or (isinstance(value, int) and kind != "b")
              or (isinstance(value, float) and kind in "fc") or kind == "c")
        if not ok:
            raise TypeError(
                f"__setitem__(): cannot write a Python {type(value).__name__} into a {dt} "
                "tensor"
            )
        return value
    if isinstance(value, (list, tuple, np.ndarray)):
        host = np.asarray(value)
        if _dkind(host.dtype) not in "biufc" or not np.can_cast(host.dtype, dt, "same_kind"):
            raise TypeError(
                f"__setitem__(): cannot write a sequence of {host.dtype} into a {dt} tensor"
            )
        return x._device.backend.from_host(host.astype(dt), x._device.index)
    raise TypeError(
        "__setitem__() expected a vtl.Tensor or a Python scalar as the value, got "
        f"{type(value).__name__}"
    )


def _write(data: Any, rk: tuple, v: Any, dev: Any = None) -> None:
    try:
        if dev is None:
            data[rk] = v
        else:  # the key holds checked index arrays
            dev.backend.write_index(data, rk, v)
    except ValueError as exc:
        raise ValueError(f"__setitem__(): {exc}") from None


def _index_put(x: Tensor, items: list[tuple[str, Any, int]], advanced: bool,
               value: Any) -> Tensor:
    """``x`` with ``value`` written at the parsed key, out of place; differentiable.

    The gradient for ``x`` is ``g`` with the written region zeroed; for ``value`` it is
    ``g[key]`` summed to the value's shape (PyTorch's ``index_put`` convention, so with
    repeated indices every occurrence contributes).
    """
    dev = x._device
    v = _value_raw(value, x)
    out = dev.xp.asarray(x._data, copy=True)
    _write(out, _raw_key(items), v, dev if advanced else None)
    if needs_grad(x, value):
        x_req = x._requires_grad
        vt = value if isinstance(value, Tensor) and value._requires_grad else None

        def vjp(g: Tensor, _: Any) -> tuple[Any, Any]:
            gx = _index_put(g, items, advanced, 0) if x_req else None
            gv = None
            if vt is not None:
                gv = _getitem_items(g, items, advanced)
                if vt.ndim > gv.ndim:
                    from .manipulation import reshape

                    gv = reshape(gv, (1,) * (vt.ndim - gv.ndim) + gv.shape)
                gv = sum_to(gv, vt)
            return gx, gv

        return record(out, dev, "IndexPutBackward", (x, value), vjp)
    return new(out, dev)


def _setitem(x: Tensor, key: Any, value: Any) -> None:
    """``x[key] = value`` in place (bumps the version counter); differentiable when
    ``x`` or ``value`` requires grad: ``x`` then takes over the history of an
    out-of-place ``index_put``. Leaves that require grad are refused outside no_grad.
    """
    check_inplace(x, "__setitem__")
    if key.__class__ is not tuple:
        key = (key,)
    if needs_grad(x, value):
        items, advanced = _parse(key, x)
        assign_result(x, _index_put(x, items, advanced, value), "__setitem__")
        return
    v = _value_raw(value, x)
    rk = _basic_key(key, x._data.shape)
    dev = None
    if rk is None:
        items, advanced = _parse(key, x)
        rk = _raw_key(items)
        dev = x._device if advanced else None
    _write(x._data, rk, v, dev)
    x._bump_version()


# -- take / take_along_axis -----------------------------------------------------------------
def _index_tensor(indices: Any, x: Tensor, fname: str) -> Tensor:
    indices = tensor_arg(indices, fname, "indices")
    if indices._device is not x._device:
        raise ValueError(
            f"{fname}(): indices are on {indices._device} but x is on {x._device}; "
            "move them with .to(...) first"
        )
    if _dkind(indices._data.dtype) not in "iu":
        raise TypeError(f"{fname}() needs integer indices, got dtype {indices.dtype}")
    return indices


def take(x: Tensor, indices: Tensor, /, *, axis: int | None = None) -> Tensor:
    """Elements of ``x`` at ``indices`` along ``axis`` (optional only for 1-D ``x``).

    Negative indices count from the end; out-of-range ones raise ``IndexError``.
    ``indices`` may have any number of dimensions (NumPy's rule: they replace
    ``axis`` in the result). The gradient is a scatter-add, so repeated indices
    accumulate.

    Args:
        x: The input tensor.
        indices: Integer indices, of any number of dimensions.
        axis: The axis (optional only for 1-D ``x``).

    Returns:
        The selected elements.

    Raises:
        ValueError: If ``x`` is 0-d or ``axis`` is missing for a tensor of several dimensions.
        IndexError: If an index is out of range.
    """
    x = tensor_arg(x, "take")
    indices = _index_tensor(indices, x, "take")
    if x.ndim == 0:
        raise ValueError("take() needs x with at least one dimension, got a 0-d tensor")
    if axis is None:
        if x.ndim != 1:
            raise ValueError(
                f"take(): axis is required when x has more than one dimension (shape {x.shape})"
            )
        axis = 0
    ax = normalize_axis(axis, x.ndim, "take")
    return _take(x, indices._data, ax, "take(): ")


def _take(x: Tensor, indices: Any, ax: int, what: str) -> Tensor:
    """``take`` on checked arguments; ``indices`` is a raw integer array."""
    idx = _norm_index(indices, x.shape[ax], ax, x._device, False, what)
    return _take_checked(x, idx, ax, tuple(indices.shape))


def _take_checked(x: Tensor, idx: Any, ax: int, ishape: tuple[int, ...]) -> Tensor:
    """``take`` of the raw indices ``idx`` (of shape ``ishape``) that :func:`_norm_index`
    returned for axis ``ax`` of ``x``."""
    dev = x._device
    xp = dev.xp
    shape = x.shape
    rows = idx if len(ishape) == 1 else xp.reshape(idx, (-1,))
    out = xp.take(x._data, rows, axis=ax)
    if len(ishape) != 1:
        out = xp.reshape(out, shape[:ax] + ishape + shape[ax + 1:])
    if needs_grad(x):
        return record(out, dev, "TakeBackward", (x,),
                      lambda g, _: _take_grad(g, rows, ax, shape, ishape))
    return new(out, dev)


def _take_grad(g: Tensor, rows: Any, ax: int, shape: tuple[int, ...],
               ishape: tuple[int, ...]) -> Tensor:
    from .manipulation import permute_dims, reshape

    k = 1
    for s in ishape:
        k *= s
    if len(ishape) != 1:
        g = reshape(g, shape[:ax] + (k,) + shape[ax + 1:])
    if ax:
        g = permute_dims(g, (ax, *range(ax), *range(ax + 1, len(shape))))
    z = _scatter_rows(g, rows, shape[ax])
    if ax:
        z = permute_dims(z, (*range(1, ax + 1), 0, *range(ax + 1, len(shape))))
    return z


@torch_names(dim="axis")
def take_along_axis(x: Tensor, indices: Tensor, /, *, axis: int = -1) -> Tensor:
    """``out[..., j, ...] = x[..., indices[..., j, ...], ...]`` along ``axis``.

    ``indices`` has the same number of dimensions as ``x`` and broadcasts with it
    on the other axes. Negative indices count from the end; out-of-range ones
    raise ``IndexError``. The gradient is a scatter-add (repeats accumulate).

    Args:
        x: The input tensor.
        indices: Integer indices with ``x``'s number of dimensions.
        axis: The axis.
        dim: PyTorch's name for ``axis`` (give one of the two).

    Returns:
        A tensor of the broadcast shape.

    Raises:
        ValueError: If ``x`` is 0-d or the shapes do not fit.
        IndexError: If an index is out of range.
        TypeError: If a parameter is given under both of its names.
    """
    x = tensor_arg(x, "take_along_axis")
    indices = _index_tensor(indices, x, "take_along_axis")
    if x.ndim == 0:
        raise ValueError("take_along_axis() needs x with at least one dimension, got 0-d")
    if indices.ndim != x.ndim:
        raise ValueError(
            f"take_along_axis(): indices must have the same number of dimensions as x, got "
            f"shapes {indices.shape} and {x.shape}"
        )
    ax = normalize_axis(axis, x.ndim, "take_along_axis")
    shape = x.shape
    ishape = indices.shape
    out_shape = []
    for d, (n, m) in enumerate(zip(shape, ishape, strict=True)):
        if d == ax:
            out_shape.append(m)
        elif n == m or m == 1 or n == 1:
            out_shape.append(max(n, m) if n and m else 0)
        else:
            raise ValueError(
                f"take_along_axis(): shapes {shape} and {ishape} do not broadcast outside "
                f"axis {ax}"
            )
    out_shape_t = tuple(out_shape)
    dev = x._device
    xp = dev.xp
    idt = _index_dtype(dev)
    idx = _norm_index(indices._data, shape[ax], ax, dev, False, "take_along_axis(): ")
    strides = [1] * x.ndim
    for d in range(x.ndim - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    lin = idx if strides[ax] == 1 else xp.multiply(idx, strides[ax])
    for d in range(x.ndim):
        if d == ax or shape[d] == 1:
            continue
        view = tuple(out_shape_t[d] if k == d else 1 for k in range(x.ndim))
        coord = xp.arange(out_shape_t[d], dtype=idt, device=_native(dev)) * strides[d]
        lin = xp.add(lin, xp.reshape(coord, view))
    if tuple(lin.shape) != out_shape_t:
        lin = xp.broadcast_to(lin, out_shape_t)
    rows = xp.reshape(lin, (-1,))
    flat = xp.reshape(x._data, (-1,))
    out = xp.reshape(xp.take(flat, rows, axis=0), out_shape_t)
    if needs_grad(x):
        def vjp(g: Tensor, _: Any) -> Tensor:
            from .manipulation import reshape

            size = 1
            for s in shape:
                size *= s
            return reshape(_scatter_rows(reshape(g, (-1,)), rows, size), shape)

        return record(out, dev, "TakeAlongAxisBackward", (x,), vjp)
    return new(out, dev)
