"""PyTorch-style convenience methods of Tensor (``t.sum()``, ``t.reshape(...)``...),
declared in :class:`TensorMethods`, which ``Tensor`` inherits; each is a thin call of
the namespace function.

The namespace function is looked up on ``vtl`` when the method is called (``vtl`` is
bound to this module by :func:`bind`, called once by ``vtl/__init__``: ``vtl``'s
modules import ``Tensor``, so this module cannot import them). Reductions accept both
the array API names (``axis``, ``keepdims``) and PyTorch's (``dim``, ``keepdim``).

Differences from PyTorch, on purpose:

* ``t.size`` is the array API attribute (the number of elements), not a method;
  PyTorch's ``t.size()`` is ``t.shape``.
* ``t.max(dim)``/``t.min(dim)`` (a dim given positionally or as ``dim=``) return
  PyTorch's named tuple ``(values, indices)``, as ``t.sort``, ``t.topk`` and
  ``t.kthvalue`` do (``vtl.return_types``); with the array API's ``axis=``/``keepdims=``
  they return the values (``vtl.max``), so array-API style calls keep working.
* ``t.squeeze(d)`` raises ``ValueError`` when axis ``d`` does not have size one
  (PyTorch silently leaves it); ``t.squeeze()`` removes every size-one axis.
* ``t.repeat(2, 3)`` is PyTorch's (whole-tensor repetition, ``vtl.tile``); the array
  API's ``vtl.repeat`` repeats elements (PyTorch's ``repeat_interleave``).
* Where the standard defines a name, ``vtl.<name>`` keeps the standard's meaning and the
  method has PyTorch's: ``t.equal(u)`` is a Python bool (``vtl.equal`` compares
  elementwise), ``t.take(i)`` indexes the flattened tensor (``vtl.take`` takes along an
  axis), ``t.round(decimals=2)`` (``vtl.round`` has no ``decimals``), ``t.nonzero()``
  is a ``(count, ndim)`` tensor (``vtl.nonzero`` and ``as_tuple=True``: a tuple).
* The in-place methods (``add_``, ``scatter_``, ``masked_fill_``, ``copy_`` ...) follow
  the in-place operators' rules (``vtl._ops._core.inplace``): an error for a leaf that
  requires grad while grad mode is on; the version counter moves; a recorded result
  rebases the tensor's (and its views' bases') history. The result's dtype must be the
  tensor's own (``float32.add_(float64)`` is a ``TypeError``; PyTorch casts), except
  ``copy_``, which casts, broadcasts and moves ``src`` as PyTorch does.
* ``stride()``, ``storage_offset()`` and ``is_contiguous()`` describe the backend
  array's layout (``Backend.layout``); ``data_ptr()`` is an address on numpy and cupy,
  and a number naming the storage and byte offset on wgpu (buffers have no address).

``t.std()``/``t.var()`` use PyTorch's default ``correction=1`` (Bessel's
correction); ``vtl.std``/``vtl.var`` keep the standard's ``correction=0``.

``t.half()``/``t.bfloat16()``/``t.float()`` cast to float16/bfloat16/float32 (vtl's two
extension dtypes beside the standard's 13).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .backends import _dtypes

if TYPE_CHECKING:
    from ._tensor import Tensor

#: the ``vtl`` namespace, bound by :func:`bind`
_vtl: Any = None
#: ``vtl._ops._core`` (the in-place rules), bound by :func:`bind`
_core: Any = None


def bind() -> None:
    """Bind the ``vtl`` namespace the methods call (once, by ``vtl/__init__``)."""
    global _vtl, _core
    import vtl
    from vtl._ops import _core as core

    _vtl = vtl
    _core = core


def _inplace(t: Tensor, fname: str, fn: Any, *operands: Any) -> Tensor:
    """``t = fn(t)`` written into ``t``'s storage with the rules of the in-place operators
    (``vtl._ops._core.inplace``): a leaf that requires grad (or a view PyTorch refuses to
    write) is an error while grad mode is on; the version counter moves, so a backward
    that saved ``t`` raises; when the result is recorded (``t`` or one of ``operands``
    requires grad) ``t`` takes over its history and the rule reads a snapshot of ``t``'s
    old values (``fn(snapshot, *operands)``, ``t`` among the operands replaced by the
    snapshot too). The shape and dtype must stay."""
    _core.check_inplace(t, fname)
    if _core.needs_grad(t, *operands):
        s = _core._inplace_source(t, None, fname)
        return _core.assign_result(t, fn(s, *[s if o is t else o for o in operands]), fname)
    return _core.assign_result(t, fn(t, *operands), fname)


def _scaled(other: Any, alpha: Any, fname: str) -> Any:
    """``alpha * other`` (PyTorch's ``alpha=`` of ``add``/``sub``)."""
    if alpha == 1:
        return other
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, complex)):
        raise TypeError(f"Tensor.{fname}(): alpha must be a number, got {alpha!r}")
    return _vtl.multiply(other, alpha)


def _divided(a: Any, b: Any, rounding_mode: str | None) -> Tensor:
    if rounding_mode is None:
        return _vtl.divide(a, b)
    if rounding_mode == "floor":
        return _vtl.floor_divide(a, b)
    if rounding_mode == "trunc":
        if _vtl.result_type(a, b).kind in "iu":  # exact: the floor quotient, moved to zero
            q = _vtl.floor_divide(a, b)
            inexact = _vtl.not_equal(_vtl.remainder(a, b), 0)
            return _vtl.where(_vtl.logical_and(inexact, q < 0), q + 1, q)
        return _vtl.trunc(_vtl.divide(a, b))
    raise ValueError(f"div(): rounding_mode must be None, 'trunc' or 'floor', got "
                     f"{rounding_mode!r}")


def _overwrite(s: Tensor, value: Tensor) -> Tensor:
    """``value`` broadcast to ``s``'s shape, recorded as a function of ``s`` (whose
    gradient is zero), so an in-place write of it replaces ``s``'s history."""
    return _vtl.where(_vtl.ones((), dtype=_dtypes.bool, device=s.device), value, s)


def _size_arg(size: tuple, fname: str) -> tuple:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        return tuple(size[0])
    return tuple(size)


def _axis(axis: Any, dim: Any, fname: str) -> Any:
    if dim is None:
        return axis
    if axis is not None:
        raise TypeError(f"Tensor.{fname}() got both axis= and dim=; pass one of them")
    return tuple(dim) if isinstance(dim, list) else dim


def _return_types() -> Any:
    from . import return_types

    return return_types


def _take_first(idx: Tensor, dim: int, k: int) -> Tensor:
    """The first ``k`` entries of ``idx`` along ``dim`` (``k=-1``: the last one only)."""
    key: list[Any] = [slice(None)] * idx.ndim
    key[dim] = slice(k, None) if k < 0 else slice(0, k)
    return idx[tuple(key)]


def _extreme(t: Tensor, dim: Any, keepdim: bool, axis: Any, keepdims: bool | None,
             fname: str) -> Any:
    """``t.max``/``t.min``: the namespace's reduction, or PyTorch's named tuple for a dim."""
    if dim is None or axis is not None or keepdims is not None:
        if dim is not None and axis is not None:
            raise TypeError(f"Tensor.{fname}() got both dim and axis=; pass one of them")
        ax = axis if dim is None else dim
        keep = bool(keepdims) if keepdims is not None else bool(keepdim)
        return getattr(_vtl, fname)(t, axis=tuple(ax) if isinstance(ax, list) else ax,
                                    keepdims=keep)
    if isinstance(dim, (tuple, list)):
        raise TypeError(f"Tensor.{fname}(dim) takes one dim, got {dim!r} (use axis= to "
                        "reduce over several)")
    if not t.ndim:  # PyTorch: a 0-d tensor is its own extreme along dim 0 or -1
        if dim not in (0, -1):
            raise IndexError(f"Tensor.{fname}(): dim {dim} is out of range for a 0-d tensor")
        return getattr(_return_types(), fname)(t, _vtl.zeros((), dtype=_vtl.int64,
                                                             device=t.device))
    arg = getattr(_vtl, "argmax" if fname == "max" else "argmin")(t, axis=dim, keepdims=True)
    values = _vtl.take_along_axis(t, arg, axis=dim)
    if not keepdim:
        values, arg = _vtl.squeeze(values, axis=dim), _vtl.squeeze(arg, axis=dim)
    return getattr(_return_types(), fname)(values, arg)


def _keep(keepdims: bool, keepdim: bool | None) -> bool:
    return keepdims if keepdim is None else bool(keepdim)


def _shape_args(shape: tuple, fname: str) -> tuple:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return shape


def _correction(correction: Any, unbiased: bool | None) -> Any:
    if unbiased is None:
        return 1 if correction is None else correction
    if correction is not None:
        raise TypeError("pass either correction= or unbiased=, not both")
    return 1 if unbiased else 0


def _cast_to(t: Tensor, name: str, method: str) -> Tensor:
    """``t`` cast to the dtype ``name``; a ``TypeError`` naming the method when vtl has no
    such dtype."""
    try:
        dt = _dtypes.to_dtype(name)
    except TypeError:
        raise TypeError(f"Tensor.{method}(): vtl has no {name} dtype (its tensors hold the "
                        f"dtypes {', '.join(_dtypes.ALL_DTYPES)}); use .float() for float32"
                        ) from None
    return _vtl.astype(t, dt, copy=False)


def _flat_shape(shape: tuple, start: int, end: int) -> tuple:
    n = len(shape)
    if n == 0:
        if start not in (0, -1) or end not in (0, -1):
            raise IndexError(f"flatten(): dims ({start}, {end}) out of range for a 0-d tensor")
        return (1,)
    for d in (start, end):
        if not -n <= d < n:
            raise IndexError(f"flatten(): dim {d} is out of range for a {n}-D tensor")
    s, e = start % n, end % n
    if s > e:
        raise ValueError(f"flatten(): start_dim {start} comes after end_dim {end}")
    k = 1
    for v in shape[s:e + 1]:
        k *= v
    return (*shape[:s], k, *shape[e + 1:])


def _squeeze_axes(t: Any, ax: Any) -> Any:
    return tuple(i for i, s in enumerate(t.shape) if s == 1) if ax is None else ax


def _swapped(n: int, a: int, b: int) -> tuple:
    for d in (a, b):
        if not -n <= d < n:
            raise IndexError(f"transpose(): dim {d} is out of range for a {n}-D tensor")
    p = list(range(n))
    a, b = a % n, b % n
    p[a], p[b] = p[b], p[a]
    return tuple(p)


def _expand_shape(shape: tuple, sizes: tuple) -> tuple:
    off = len(sizes) - len(shape)
    out = []
    for i, s in enumerate(sizes):
        if s == -1:
            if i < off:
                raise ValueError(f"expand(): -1 is not allowed for the new leading axis {i}")
            s = shape[i - off]
        out.append(s)
    return tuple(out)


class TensorMethods:
    """PyTorch-style methods of :class:`vtl.Tensor` (see the module docstring)."""

    __slots__ = ()

    # -- reductions -------------------------------------------------------------------
    def sum(self, axis: Any = None, *, keepdims: bool = False, dtype: Any = None,
            dim: Any = None, keepdim: bool | None = None) -> Tensor:
        """``vtl.sum(self, ...)``."""
        return _vtl.sum(self, axis=_axis(axis, dim, "sum"), dtype=dtype,
                        keepdims=_keep(keepdims, keepdim))

    def prod(self, axis: Any = None, *, keepdims: bool = False, dtype: Any = None,
             dim: Any = None, keepdim: bool | None = None) -> Tensor:
        """``vtl.prod(self, ...)``."""
        return _vtl.prod(self, axis=_axis(axis, dim, "prod"), dtype=dtype,
                         keepdims=_keep(keepdims, keepdim))

    def mean(self, axis: Any = None, *, keepdims: bool = False, dim: Any = None,
             keepdim: bool | None = None) -> Tensor:
        """``vtl.mean(self, ...)``."""
        return _vtl.mean(self, axis=_axis(axis, dim, "mean"),
                         keepdims=_keep(keepdims, keepdim))

    def max(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None,
            keepdims: bool | None = None) -> Any:
        """The maximum (``vtl.max``); with ``dim`` (PyTorch's form), the named tuple
        ``(values, indices)`` of the maxima along ``dim`` (the first maximal element; the
        gradient goes to it); with ``axis=``/``keepdims=``, ``vtl.max``'s values."""
        return _extreme(self, dim, keepdim, axis, keepdims, "max")

    def min(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None,
            keepdims: bool | None = None) -> Any:
        """The minimum (``vtl.min``); with ``dim``, the named tuple ``(values, indices)`` of
        the minima along ``dim``; with ``axis=``/``keepdims=``, ``vtl.min``'s values."""
        return _extreme(self, dim, keepdim, axis, keepdims, "min")

    def sort(self, dim: int = -1, descending: bool = False, stable: bool = False) -> Any:
        """The named tuple ``(values, indices)`` of the values sorted along ``dim`` (a stable
        sort whatever ``stable`` says) and the positions they came from."""
        idx = _vtl.argsort(self, axis=dim, descending=bool(descending), stable=True)
        return _return_types().sort(_vtl.take_along_axis(self, idx, axis=dim), idx)

    def topk(self, k: int, dim: int = -1, largest: bool = True, sorted: bool = True  # noqa: A002
             ) -> Any:
        """The named tuple ``(values, indices)`` of the ``k`` largest (``largest=False``:
        smallest) values along ``dim``, largest first (ties in their order along ``dim``)."""
        n = self.shape[dim] if self.ndim else 1
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= n:
            raise ValueError(f"topk(): k must be an int in [0, {n}] for dim {dim} of size {n}, "
                             f"got {k!r}")
        t = self if self.ndim else _vtl.reshape(self, (1,))
        idx = _vtl.argsort(t, axis=dim, descending=bool(largest), stable=True)
        idx = _take_first(idx, dim, k)
        values = _vtl.take_along_axis(t, idx, axis=dim)
        if not self.ndim:
            values, idx = _vtl.reshape(values, ()), _vtl.reshape(idx, ())
        return _return_types().topk(values, idx)

    def kthvalue(self, k: int, dim: int = -1, keepdim: bool = False) -> Any:
        """The named tuple ``(values, indices)`` of the ``k``-th smallest value along
        ``dim`` (``k`` from 1) and its position."""
        n = self.shape[dim] if self.ndim else 1
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= n:
            raise ValueError(f"kthvalue(): k must be an int in [1, {n}] for dim {dim} of size "
                             f"{n}, got {k!r}")
        t = self if self.ndim else _vtl.reshape(self, (1,))
        idx = _vtl.argsort(t, axis=dim, stable=True)
        idx = _take_first(_take_first(idx, dim, k), dim, -1)  # the k-th: the last of k
        values = _vtl.take_along_axis(t, idx, axis=dim)
        if not keepdim or not self.ndim:
            values = _vtl.squeeze(values, axis=dim if self.ndim else 0)
            idx = _vtl.squeeze(idx, axis=dim if self.ndim else 0)
        return _return_types().kthvalue(values, idx)

    def mode(self, dim: int = -1, keepdim: bool = False) -> Any:
        """The named tuple ``(values, indices)`` of the most frequent value along ``dim``
        (the smallest of those tied) and its last position (``vtl.mode``)."""
        return _vtl.mode(self, dim, keepdim)

    def cumsum(self, dim: int, *, dtype: Any = None) -> Tensor:
        """``vtl.cumulative_sum(self, axis=dim, dtype=dtype)``."""
        return _vtl.cumulative_sum(self, axis=dim, dtype=dtype)

    def cumprod(self, dim: int, *, dtype: Any = None) -> Tensor:
        """``vtl.cumulative_prod(self, axis=dim, dtype=dtype)``."""
        return _vtl.cumulative_prod(self, axis=dim, dtype=dtype)

    def numel(self) -> int:
        """The number of elements (PyTorch's ``numel()``; the array API's ``t.size``)."""
        return self.size

    def dim(self) -> int:
        """The number of axes (PyTorch's ``dim()``; the array API's ``t.ndim``)."""
        return self.ndim

    def cuda(self, device: int | None = None) -> Tensor:
        """A copy on the cupy backend (PyTorch's ``.cuda()``: ``"cuda"`` names cupy)."""
        return self.to_device(f"cupy:{0 if device is None else int(device)}")

    def std(self, axis: Any = None, *, correction: int | float | None = None,
            keepdims: bool = False, dim: Any = None, keepdim: bool | None = None,
            unbiased: bool | None = None) -> Tensor:
        """``vtl.std(self, ...)`` with PyTorch's default ``correction=1``."""
        return _vtl.std(self, axis=_axis(axis, dim, "std"),
                        correction=_correction(correction, unbiased),
                        keepdims=_keep(keepdims, keepdim))

    def var(self, axis: Any = None, *, correction: int | float | None = None,
            keepdims: bool = False, dim: Any = None, keepdim: bool | None = None,
            unbiased: bool | None = None) -> Tensor:
        """``vtl.var(self, ...)`` with PyTorch's default ``correction=1``."""
        return _vtl.var(self, axis=_axis(axis, dim, "var"),
                        correction=_correction(correction, unbiased),
                        keepdims=_keep(keepdims, keepdim))

    def argmax(self, axis: int | None = None, *, keepdims: bool = False,
               dim: int | None = None, keepdim: bool | None = None) -> Tensor:
        """``vtl.argmax(self, ...)``."""
        return _vtl.argmax(self, axis=_axis(axis, dim, "argmax"),
                           keepdims=_keep(keepdims, keepdim))

    def argmin(self, axis: int | None = None, *, keepdims: bool = False,
               dim: int | None = None, keepdim: bool | None = None) -> Tensor:
        """``vtl.argmin(self, ...)``."""
        return _vtl.argmin(self, axis=_axis(axis, dim, "argmin"),
                           keepdims=_keep(keepdims, keepdim))

    # -- shapes -------------------------------------------------------------------------
    def reshape(self, *shape: Any, copy: bool | None = None) -> Tensor:
        """``vtl.reshape``: ``t.reshape(2, 3)`` or ``t.reshape((2, 3))``."""
        return _vtl.reshape(self, _shape_args(shape, "reshape"), copy=copy)

    def view(self, *shape: Any) -> Tensor:
        """A reshaped view; ``ValueError`` when the data cannot be viewed in that shape."""
        return _vtl.reshape(self, _shape_args(shape, "view"), copy=False)

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
        """Merge axes ``start_dim..end_dim`` into one (a 0-d tensor becomes 1-D)."""
        return _vtl.reshape(self, _flat_shape(self.shape, start_dim, end_dim))

    def squeeze(self, dim: Any = None, *, axis: Any = None) -> Tensor:
        """``vtl.squeeze``; without an axis, removes every size-one axis."""
        return _vtl.squeeze(self, _squeeze_axes(self, _axis(axis, dim, "squeeze")))

    def unsqueeze(self, dim: int) -> Tensor:
        """``vtl.expand_dims(self, axis=dim)``."""
        return _vtl.expand_dims(self, axis=dim)

    def permute(self, *dims: Any) -> Tensor:
        """``vtl.permute_dims``: ``t.permute(2, 0, 1)`` or ``t.permute((2, 0, 1))``."""
        return _vtl.permute_dims(self, _shape_args(dims, "permute"))

    def transpose(self, dim0: int, dim1: int) -> Tensor:
        """Swap two axes (a view)."""
        return _vtl.permute_dims(self, _swapped(self.ndim, dim0, dim1))

    def flip(self, *dims: Any) -> Tensor:
        """``vtl.flip``: ``t.flip(0, 1)`` or ``t.flip((0, 1))`` (PyTorch's ``dims``)."""
        return _vtl.flip(self, axis=_shape_args(dims, "flip"))

    def roll(self, shifts: Any, dims: Any = None) -> Tensor:
        """``vtl.roll(self, shifts, axis=dims)`` (the flattened tensor when ``dims`` is
        ``None``)."""
        if isinstance(shifts, list):
            shifts = tuple(shifts)
        return _vtl.roll(self, shifts, axis=tuple(dims) if isinstance(dims, list) else dims)

    def expand(self, *sizes: Any) -> Tensor:
        """``vtl.broadcast_to``; ``-1`` keeps the size of that axis, as in PyTorch."""
        return _vtl.broadcast_to(self, _expand_shape(self.shape, _shape_args(sizes, "expand")))

    def tile(self, *reps: Any) -> Tensor:
        """``vtl.tile`` (PyTorch's ``Tensor.repeat``): ``t.tile(2, 3)`` or ``t.tile((2, 3))``."""
        return _vtl.tile(self, _shape_args(reps, "tile"))

    # -- elementwise ----------------------------------------------------------------------
    def abs(self) -> Tensor:
        """``vtl.abs(self)``."""
        return _vtl.abs(self)

    def exp(self) -> Tensor:
        """``vtl.exp(self)``."""
        return _vtl.exp(self)

    def log(self) -> Tensor:
        """``vtl.log(self)``."""
        return _vtl.log(self)

    def sqrt(self) -> Tensor:
        """``vtl.sqrt(self)``."""
        return _vtl.sqrt(self)

    def tanh(self) -> Tensor:
        """``vtl.tanh(self)``."""
        return _vtl.tanh(self)

    def clip(self, min: Any = None, max: Any = None) -> Tensor:
        """``vtl.clip(self, min, max)``; also available as ``clamp``."""
        return _vtl.clip(self, min=min, max=max)

    def clamp(self, min: Any = None, max: Any = None) -> Tensor:
        """``vtl.clip(self, min, max)`` (PyTorch's name of ``clip``)."""
        return _vtl.clip(self, min=min, max=max)

    def matmul(self, other: Tensor) -> Tensor:
        """``vtl.matmul(self, other)``."""
        return _vtl.matmul(self, other)

    # -- gather / scatter / index (vtl._ops.scatter) -------------------------------------
    def gather(self, dim: int, index: Tensor, *, sparse_grad: bool = False) -> Tensor:
        """``vtl.gather(self, dim, index)``."""
        return _vtl.gather(self, dim, index, sparse_grad=sparse_grad)

    def scatter(self, dim: int, index: Tensor, src: Any = None, *, value: Any = None,
                reduce: str | None = None) -> Tensor:
        """``vtl.scatter(self, dim, index, src)`` (out of place)."""
        return _vtl.scatter(self, dim, index, src, value=value, reduce=reduce)

    def scatter_(self, dim: int, index: Tensor, src: Any = None, *, value: Any = None,
                 reduce: str | None = None) -> Tensor:
        """:meth:`scatter` written into ``self`` (in place)."""
        return _inplace(self, "scatter_", lambda s, src: _vtl.scatter(
            s, dim, index, src, value=value, reduce=reduce), src)

    def scatter_add(self, dim: int, index: Tensor, src: Tensor) -> Tensor:
        """``vtl.scatter_add(self, dim, index, src)`` (out of place)."""
        return _vtl.scatter_add(self, dim, index, src)

    def scatter_add_(self, dim: int, index: Tensor, src: Tensor) -> Tensor:
        """:meth:`scatter_add` written into ``self`` (in place)."""
        return _inplace(self, "scatter_add_",
                        lambda s, src: _vtl.scatter_add(s, dim, index, src), src)

    def index_select(self, dim: int, index: Tensor) -> Tensor:
        """``vtl.index_select(self, dim, index)``."""
        return _vtl.index_select(self, dim, index)

    def index_add(self, dim: int, index: Tensor, source: Tensor, *, alpha: Any = 1) -> Tensor:
        """``vtl.index_add(self, dim, index, source, alpha=alpha)`` (out of place)."""
        return _vtl.index_add(self, dim, index, source, alpha=alpha)

    def index_add_(self, dim: int, index: Tensor, source: Tensor, *,
                   alpha: Any = 1) -> Tensor:
        """:meth:`index_add` written into ``self`` (in place)."""
        return _inplace(self, "index_add_", lambda s, source: _vtl.index_add(
            s, dim, index, source, alpha=alpha), source)

    def index_copy(self, dim: int, index: Tensor, source: Tensor) -> Tensor:
        """``vtl.index_copy(self, dim, index, source)`` (out of place)."""
        return _vtl.index_copy(self, dim, index, source)

    def index_copy_(self, dim: int, index: Tensor, source: Tensor) -> Tensor:
        """:meth:`index_copy` written into ``self`` (in place)."""
        return _inplace(self, "index_copy_",
                        lambda s, source: _vtl.index_copy(s, dim, index, source), source)

    def index_fill(self, dim: int, index: Tensor, value: Any) -> Tensor:
        """``vtl.index_fill(self, dim, index, value)`` (out of place)."""
        return _vtl.index_fill(self, dim, index, value)

    def index_fill_(self, dim: int, index: Tensor, value: Any) -> Tensor:
        """:meth:`index_fill` written into ``self`` (in place)."""
        return _inplace(self, "index_fill_",
                        lambda s, value: _vtl.index_fill(s, dim, index, value), value)

    def put(self, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
        """``vtl.put(self, index, source, accumulate)``: ``source`` written (or added) at
        the positions ``index`` of the flattened tensor, out of place."""
        return _vtl.put(self, index, source, accumulate)

    def put_(self, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
        """:meth:`put` written into ``self`` (in place)."""
        return _inplace(self, "put_", lambda s, source: _vtl.put(s, index, source, accumulate),
                        source)

    def take(self, index: Tensor) -> Tensor:
        """The elements of the flattened tensor at ``index`` (any shape; the result has
        ``index``'s shape), PyTorch's ``take``; ``vtl.take`` is the standard's, along an
        axis."""
        return _vtl.take(_vtl.reshape(self, (-1,)), index, axis=0)

    def masked_fill(self, mask: Tensor, value: Any) -> Tensor:
        """``vtl.masked_fill(self, mask, value)``."""
        return _vtl.masked_fill(self, mask, value)

    def masked_fill_(self, mask: Tensor, value: Any) -> Tensor:
        """:meth:`masked_fill` written into ``self`` (in place)."""
        return _inplace(self, "masked_fill_", lambda s, value: _vtl.masked_fill(s, mask, value),
                        value)

    def masked_select(self, mask: Tensor) -> Tensor:
        """``vtl.masked_select(self, mask)``."""
        return _vtl.masked_select(self, mask)

    def masked_scatter(self, mask: Tensor, source: Tensor) -> Tensor:
        """``vtl.masked_scatter(self, mask, source)`` (out of place)."""
        return _vtl.masked_scatter(self, mask, source)

    def masked_scatter_(self, mask: Tensor, source: Tensor) -> Tensor:
        """:meth:`masked_scatter` written into ``self`` (in place)."""
        return _inplace(self, "masked_scatter_",
                        lambda s, source: _vtl.masked_scatter(s, mask, source), source)

    # -- shapes and views (PyTorch's forms) ----------------------------------------------
    def repeat(self, *sizes: Any) -> Tensor:
        """PyTorch's ``repeat``: the whole tensor repeated ``sizes[i]`` times along each
        dim (``vtl.tile``; leading sizes add dims). ``vtl.repeat`` is the standard's
        element repetition (PyTorch's ``repeat_interleave``)."""
        reps = _size_arg(sizes, "repeat")
        if len(reps) < self.ndim:
            raise ValueError(f"Tensor.repeat(): {len(reps)} sizes given for a "
                             f"{self.ndim}-D tensor; give at least one per dim")
        return _vtl.tile(self, reps)

    def expand_as(self, other: Tensor) -> Tensor:
        """``self.expand(other.shape)``."""
        return _vtl.broadcast_to(self, other.shape)

    def chunk(self, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
        """``vtl.chunk(self, chunks, dim)``."""
        return _vtl.chunk(self, chunks, dim)

    def split(self, split_size: Any, dim: int = 0) -> tuple[Tensor, ...]:
        """``vtl.split(self, split_size, dim)`` (an int size or a list of sizes)."""
        return _vtl.split(self, split_size, dim)

    def unbind(self, dim: int = 0) -> tuple[Tensor, ...]:
        """``vtl.unbind(self, dim)``."""
        return _vtl.unbind(self, dim)

    def narrow(self, dim: int, start: int, length: int) -> Tensor:
        """``vtl.narrow(self, dim, start, length)`` (a view)."""
        return _vtl.narrow(self, dim, start, length)

    def unfold(self, dimension: int, size: int, step: int) -> Tensor:
        """Every window of ``size`` elements along ``dimension``, ``step`` apart: that dim
        becomes the window count ``(n - size) // step + 1`` and a last dim of length
        ``size`` is added (a copy through one gather; PyTorch returns a view)."""
        nd = max(self.ndim, 1)
        if isinstance(dimension, bool) or not isinstance(dimension, int) or \
                not -nd <= dimension < nd:
            raise IndexError(f"Tensor.unfold(): dimension {dimension!r} is out of range for "
                             f"a {self.ndim}-D tensor")
        n = self.shape[dimension] if self.ndim else 1
        for what, v in (("size", size), ("step", step)):
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"Tensor.unfold(): {what} must be an int, got {v!r}")
        if not 0 <= size <= n or step <= 0:
            raise ValueError(f"Tensor.unfold(): size must be in [0, {n}] and step positive, "
                             f"got size={size}, step={step}")
        t = self if self.ndim else _vtl.reshape(self, (1,))
        d = dimension % t.ndim
        k = (n - size) // step + 1
        idx = _vtl.reshape(_vtl.arange(k, device=self.device), (k, 1)) * step + \
            _vtl.arange(size, device=self.device)
        out = _vtl.take(t, idx, axis=d)  # ... k, size ... at d, d + 1
        return _vtl.moveaxis(out, d + 1, -1) if self.ndim else _vtl.reshape(out, (k, size))

    def t(self) -> Tensor:
        """``vtl.t(self)``: the transpose of a 2-D tensor (0-d and 1-D as they are)."""
        return _vtl.t(self)

    def contiguous(self) -> Tensor:
        """``self`` when its elements lie in row-major order without gaps, else a
        row-major copy (differentiable)."""
        if self.is_contiguous():
            return self
        # flattening a tensor whose elements are not in row-major order copies them in
        # that order (the standard has no memory-order argument)
        return _vtl.reshape(_vtl.reshape(self, (-1,)), self.shape)

    def triu(self, diagonal: int = 0) -> Tensor:
        """``vtl.triu(self, k=diagonal)``."""
        return _vtl.triu(self, k=diagonal)

    def tril(self, diagonal: int = 0) -> Tensor:
        """``vtl.tril(self, k=diagonal)``."""
        return _vtl.tril(self, k=diagonal)

    def diag(self, diagonal: int = 0) -> Tensor:
        """``vtl.diag(self, diagonal)``."""
        return _vtl.diag(self, diagonal)

    def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
        """``vtl.diagonal(self, offset, dim1, dim2)`` (PyTorch's dims)."""
        return _vtl.diagonal(self, offset, dim1, dim2)

    def trace(self) -> Tensor:
        """``vtl.trace(self)`` (2-D)."""
        return _vtl.trace(self)

    # -- memory layout ------------------------------------------------------------------
    def stride(self, dim: int | None = None) -> Any:
        """The step in elements between neighbours along each dim (a tuple), or along
        ``dim``."""
        st = self._device.backend.layout(self._data)[0]
        return st if dim is None else st[dim]

    def storage_offset(self) -> int:
        """The position of the first element in the storage, in elements."""
        return self._device.backend.layout(self._data)[1]

    def data_ptr(self) -> int:
        """The address of the first element (numpy, cupy); on wgpu, whose buffers have no
        address, a number naming the storage and the byte offset (equal for tensors that
        start at the same element of one storage)."""
        return self._device.backend.layout(self._data)[2]

    def is_contiguous(self) -> bool:
        """Whether the elements lie in row-major order without gaps (dims of size one
        ignored)."""
        st = self._device.backend.layout(self._data)[0]
        want = 1
        for n, s in zip(reversed(self.shape), reversed(st), strict=True):
            if n != 1:
                if s != want:
                    return False
                want *= n
        return True

    def element_size(self) -> int:
        """The size of one element in bytes."""
        return self._data.dtype.itemsize

    @property
    def itemsize(self) -> int:
        """The size of one element in bytes (``element_size()``)."""
        return self._data.dtype.itemsize

    @property
    def nbytes(self) -> int:
        """The size of the elements in bytes (``numel() * element_size()``)."""
        return self.size * self._data.dtype.itemsize

    # -- new tensors like this one ------------------------------------------------------
    def new_zeros(self, *size: Any, dtype: Any = None, device: Any = None,
                  requires_grad: bool = False) -> Tensor:
        """Zeros of ``size``, of this tensor's dtype and device unless given."""
        out = _vtl.zeros(_size_arg(size, "new_zeros"), dtype=dtype or self.dtype,
                         device=device or self.device)
        return out.requires_grad_(True) if requires_grad else out

    def new_ones(self, *size: Any, dtype: Any = None, device: Any = None,
                 requires_grad: bool = False) -> Tensor:
        """Ones of ``size``, of this tensor's dtype and device unless given."""
        out = _vtl.ones(_size_arg(size, "new_ones"), dtype=dtype or self.dtype,
                        device=device or self.device)
        return out.requires_grad_(True) if requires_grad else out

    def new_empty(self, *size: Any, dtype: Any = None, device: Any = None,
                  requires_grad: bool = False) -> Tensor:
        """An uninitialised tensor of ``size``, of this tensor's dtype and device unless
        given."""
        out = _vtl.empty(_size_arg(size, "new_empty"), dtype=dtype or self.dtype,
                         device=device or self.device)
        return out.requires_grad_(True) if requires_grad else out

    def new_full(self, size: Any, fill_value: Any, *, dtype: Any = None, device: Any = None,
                 requires_grad: bool = False) -> Tensor:
        """``fill_value`` in every element of ``size``, of this tensor's dtype and device
        unless given."""
        out = _vtl.full(tuple(size), fill_value, dtype=dtype or self.dtype,
                        device=device or self.device)
        return out.requires_grad_(True) if requires_grad else out

    def new_tensor(self, data: Any, *, dtype: Any = None, device: Any = None,
                   requires_grad: bool = False) -> Tensor:
        """A copy of ``data`` (a tensor is detached), of this tensor's dtype and device
        unless given."""
        from ._tensor import Tensor

        if isinstance(data, Tensor):
            data = data.detach()
        return _vtl.asarray(data, dtype=dtype or self.dtype, device=device or self.device,
                            copy=True, requires_grad=requires_grad)

    def type_as(self, other: Tensor) -> Tensor:
        """Cast to ``other``'s dtype (``self`` when it already has it)."""
        return _vtl.astype(self, other.dtype, copy=False)

    # -- in place -------------------------------------------------------------------------
    def fill_(self, value: Any) -> Tensor:
        """Write ``value`` (a scalar or a 0-d tensor) into every element."""
        from ._tensor import Tensor

        if isinstance(value, Tensor) and value.ndim:
            raise ValueError(f"Tensor.fill_(): value must be a scalar or a 0-d tensor, got "
                             f"shape {value.shape}")
        return _inplace(self, "fill_", lambda s, value: _vtl.masked_fill(
            s, _vtl.ones((), dtype=_dtypes.bool, device=s.device), value), value)

    def zero_(self) -> Tensor:
        """Write zeros into every element."""
        return self.fill_(0)

    def copy_(self, src: Any, non_blocking: bool = False) -> Tensor:
        """Write ``src`` into this tensor: broadcast to its shape, cast to its dtype, moved
        to its device (differentiable in ``src``)."""
        from ._tensor import Tensor

        del non_blocking
        if not isinstance(src, Tensor):
            raise TypeError(f"Tensor.copy_() expected a vtl.Tensor, got {type(src).__name__}")

        def fn(s: Tensor, src: Tensor) -> Tensor:
            v = src if src.device == s.device else src.to_device(s.device)
            if v.dtype != s.dtype:
                v = _vtl.astype(v, s.dtype)
            return _overwrite(s, v)

        return _inplace(self, "copy_", fn, src)

    def clamp_(self, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002
        """:meth:`clamp` in place."""
        return _inplace(self, "clamp_", lambda s, lo, hi: _vtl.clip(s, min=lo, max=hi), min, max)

    def clip_(self, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002
        """:meth:`clip` in place."""
        return _inplace(self, "clip_", lambda s, lo, hi: _vtl.clip(s, min=lo, max=hi), min, max)

    def add(self, other: Any, *, alpha: Any = 1) -> Tensor:
        """``self + alpha * other``."""
        return _vtl.add(self, _scaled(other, alpha, "add"))

    def add_(self, other: Any, *, alpha: Any = 1) -> Tensor:
        """``self += alpha * other``."""
        return _inplace(self, "add_", lambda s, o: _vtl.add(s, _scaled(o, alpha, "add_")),
                        other)

    def sub(self, other: Any, *, alpha: Any = 1) -> Tensor:
        """``self - alpha * other``."""
        return _vtl.subtract(self, _scaled(other, alpha, "sub"))

    def sub_(self, other: Any, *, alpha: Any = 1) -> Tensor:
        """``self -= alpha * other``."""
        return _inplace(self, "sub_",
                        lambda s, o: _vtl.subtract(s, _scaled(o, alpha, "sub_")), other)

    def mul(self, other: Any) -> Tensor:
        """``self * other``."""
        return _vtl.multiply(self, other)

    def mul_(self, other: Any) -> Tensor:
        """``self *= other``."""
        return _inplace(self, "mul_", _vtl.multiply, other)

    def div(self, other: Any, *, rounding_mode: str | None = None) -> Tensor:
        """``self / other``; ``rounding_mode='floor'`` or ``'trunc'`` rounds the quotient
        (``'floor'``: ``vtl.floor_divide``)."""
        return _divided(self, other, rounding_mode)

    def div_(self, other: Any, *, rounding_mode: str | None = None) -> Tensor:
        """:meth:`div` in place."""
        return _inplace(self, "div_", lambda s, o: _divided(s, o, rounding_mode), other)

    def relu_(self) -> Tensor:
        """:meth:`relu` in place."""
        return _inplace(self, "relu_", _vtl.relu)

    def sigmoid_(self) -> Tensor:
        """:meth:`sigmoid` in place."""
        return _inplace(self, "sigmoid_", _vtl.sigmoid)

    def erf_(self) -> Tensor:
        """:meth:`erf` in place."""
        return _inplace(self, "erf_", _vtl.erf)

    def erfc_(self) -> Tensor:
        """:meth:`erfc` in place."""
        return _inplace(self, "erfc_", _vtl.erfc)

    def erfinv_(self) -> Tensor:
        """:meth:`erfinv` in place."""
        return _inplace(self, "erfinv_", _vtl.erfinv)

    def lgamma_(self) -> Tensor:
        """:meth:`lgamma` in place."""
        return _inplace(self, "lgamma_", _vtl.lgamma)

    def digamma_(self) -> Tensor:
        """:meth:`digamma` in place."""
        return _inplace(self, "digamma_", _vtl.digamma)

    def tanh_(self) -> Tensor:
        """:meth:`tanh` in place."""
        return _inplace(self, "tanh_", _vtl.tanh)

    def exp_(self) -> Tensor:
        """:meth:`exp` in place."""
        return _inplace(self, "exp_", _vtl.exp)

    def neg_(self) -> Tensor:
        """:meth:`neg` in place."""
        return _inplace(self, "neg_", _vtl.negative)

    def abs_(self) -> Tensor:
        """:meth:`abs` in place."""
        return _inplace(self, "abs_", _vtl.abs)

    def sqrt_(self) -> Tensor:
        """:meth:`sqrt` in place."""
        return _inplace(self, "sqrt_", _vtl.sqrt)

    def pow_(self, exponent: Any) -> Tensor:
        """:meth:`pow` in place."""
        return _inplace(self, "pow_", _vtl.pow, exponent)

    # -- elementwise (PyTorch's names) ----------------------------------------------------
    def sin(self) -> Tensor:
        """``vtl.sin(self)``."""
        return _vtl.sin(self)

    def cos(self) -> Tensor:
        """``vtl.cos(self)``."""
        return _vtl.cos(self)

    def neg(self) -> Tensor:
        """``vtl.negative(self)``."""
        return _vtl.negative(self)

    def negative(self) -> Tensor:
        """``vtl.negative(self)``."""
        return _vtl.negative(self)

    def reciprocal(self) -> Tensor:
        """``vtl.reciprocal(self)``."""
        return _vtl.reciprocal(self)

    def rsqrt(self) -> Tensor:
        """``1 / sqrt(self)``."""
        return _vtl.rsqrt(self)

    def square(self) -> Tensor:
        """``vtl.square(self)``."""
        return _vtl.square(self)

    def pow(self, exponent: Any) -> Tensor:
        """``vtl.pow(self, exponent)``."""
        return _vtl.pow(self, exponent)

    def float_power(self, exponent: Any) -> Tensor:
        """``vtl.float_power(self, exponent)`` (in float64)."""
        return _vtl.float_power(self, exponent)

    def remainder(self, other: Any) -> Tensor:
        """``vtl.remainder(self, other)`` (the sign of ``other``)."""
        return _vtl.remainder(self, other)

    def fmod(self, other: Any) -> Tensor:
        """``vtl.fmod(self, other)`` (the sign of ``self``)."""
        return _vtl.fmod(self, other)

    def lerp(self, end: Tensor, weight: Any) -> Tensor:
        """``vtl.lerp(self, end, weight)``."""
        return _vtl.lerp(self, end, weight)

    def sign(self) -> Tensor:
        """``vtl.sign(self)``."""
        return _vtl.sign(self)

    def round(self, decimals: int = 0) -> Tensor:
        """Round to the nearest integer (halves to even), or to ``decimals`` decimal
        places (``round(x * 10**decimals) / 10**decimals``, as PyTorch computes it)."""
        if isinstance(decimals, bool) or not isinstance(decimals, int):
            raise TypeError(f"Tensor.round(): decimals must be an int, got {decimals!r}")
        if decimals == 0:
            return _vtl.round(self)
        if self.dtype.kind not in "fc":
            raise TypeError(f"Tensor.round(decimals={decimals}) needs a floating-point "
                            f"tensor, got {self.dtype}")
        if decimals > 0:
            scale = 10.0 ** decimals
            return _vtl.divide(_vtl.round(_vtl.multiply(self, scale)), scale)
        scale = 10.0 ** -decimals
        return _vtl.multiply(_vtl.round(_vtl.divide(self, scale)), scale)

    def floor(self) -> Tensor:
        """``vtl.floor(self)``."""
        return _vtl.floor(self)

    def ceil(self) -> Tensor:
        """``vtl.ceil(self)``."""
        return _vtl.ceil(self)

    def trunc(self) -> Tensor:
        """``vtl.trunc(self)``."""
        return _vtl.trunc(self)

    def isnan(self) -> Tensor:
        """``vtl.isnan(self)``."""
        return _vtl.isnan(self)

    def isinf(self) -> Tensor:
        """``vtl.isinf(self)``."""
        return _vtl.isinf(self)

    def isfinite(self) -> Tensor:
        """``vtl.isfinite(self)``."""
        return _vtl.isfinite(self)

    def sigmoid(self) -> Tensor:
        """``vtl.sigmoid(self)``."""
        return _vtl.sigmoid(self)

    def erf(self) -> Tensor:
        """``vtl.erf(self)``."""
        return _vtl.erf(self)

    def erfc(self) -> Tensor:
        """``vtl.erfc(self)``."""
        return _vtl.erfc(self)

    def erfinv(self) -> Tensor:
        """``vtl.erfinv(self)``."""
        return _vtl.erfinv(self)

    def lgamma(self) -> Tensor:
        """``vtl.lgamma(self)``."""
        return _vtl.lgamma(self)

    def digamma(self) -> Tensor:
        """``vtl.digamma(self)``."""
        return _vtl.digamma(self)

    def polygamma(self, n: int) -> Tensor:
        """``vtl.polygamma(n, self)``."""
        return _vtl.polygamma(n, self)

    def xlogy(self, other: Any) -> Tensor:
        """``vtl.xlogy(self, other)``."""
        return _vtl.xlogy(self, other)

    def sinc(self) -> Tensor:
        """``vtl.sinc(self)``."""
        return _vtl.sinc(self)

    def relu(self) -> Tensor:
        """``vtl.relu(self)``."""
        return _vtl.relu(self)

    def softmax(self, dim: int, dtype: Any = None) -> Tensor:
        """``vtl.softmax(self, dim, dtype)``."""
        return _vtl.softmax(self, dim, dtype)

    def log_softmax(self, dim: int, dtype: Any = None) -> Tensor:
        """``vtl.log_softmax(self, dim, dtype)``."""
        return _vtl.log_softmax(self, dim, dtype)

    def logsumexp(self, dim: Any, keepdim: bool = False) -> Tensor:
        """``vtl.logsumexp(self, dim, keepdim)``."""
        return _vtl.logsumexp(self, dim, keepdim)

    def where(self, condition: Tensor, other: Any) -> Tensor:
        """``vtl.where(condition, self, other)`` (PyTorch's argument order)."""
        return _vtl.where(condition, self, other)

    def eq(self, other: Any) -> Tensor:
        """``self == other`` elementwise."""
        return _vtl.equal(self, other)

    def ne(self, other: Any) -> Tensor:
        """``self != other`` elementwise."""
        return _vtl.not_equal(self, other)

    def lt(self, other: Any) -> Tensor:
        """``self < other`` elementwise."""
        return _vtl.less(self, other)

    def le(self, other: Any) -> Tensor:
        """``self <= other`` elementwise."""
        return _vtl.less_equal(self, other)

    def gt(self, other: Any) -> Tensor:
        """``self > other`` elementwise."""
        return _vtl.greater(self, other)

    def ge(self, other: Any) -> Tensor:
        """``self >= other`` elementwise."""
        return _vtl.greater_equal(self, other)

    def equal(self, other: Tensor) -> Any:
        """Whether ``other`` has this shape and equal elements: a Python bool (PyTorch's
        ``equal``; ``vtl.equal`` is the standard's elementwise comparison)."""
        from ._tensor import Tensor

        if not isinstance(other, Tensor):
            raise TypeError(f"Tensor.equal() expected a vtl.Tensor, got "
                            f"{type(other).__name__}")
        return self.shape == other.shape and bool(_vtl.all(_vtl.equal(self, other)))

    def isclose(self, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08,
                equal_nan: bool = False) -> Tensor:
        """``vtl.isclose(self, other, ...)``."""
        return _vtl.isclose(self, other, rtol, atol, equal_nan)

    def allclose(self, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08,
                 equal_nan: bool = False) -> Any:
        """``vtl.allclose(self, other, ...)`` (a Python bool)."""
        return _vtl.allclose(self, other, rtol, atol, equal_nan)

    def logical_and(self, other: Tensor) -> Tensor:
        """``vtl.logical_and(self, other)``."""
        return _vtl.logical_and(self, other)

    def logical_or(self, other: Tensor) -> Tensor:
        """``vtl.logical_or(self, other)``."""
        return _vtl.logical_or(self, other)

    def logical_xor(self, other: Tensor) -> Tensor:
        """``vtl.logical_xor(self, other)``."""
        return _vtl.logical_xor(self, other)

    def logical_not(self) -> Tensor:
        """``vtl.logical_not(self)``."""
        return _vtl.logical_not(self)

    def bitwise_and(self, other: Any) -> Tensor:
        """``vtl.bitwise_and(self, other)``."""
        return _vtl.bitwise_and(self, other)

    def bitwise_or(self, other: Any) -> Tensor:
        """``vtl.bitwise_or(self, other)``."""
        return _vtl.bitwise_or(self, other)

    def bitwise_xor(self, other: Any) -> Tensor:
        """``vtl.bitwise_xor(self, other)``."""
        return _vtl.bitwise_xor(self, other)

    def bitwise_not(self) -> Tensor:
        """``vtl.bitwise_invert(self)``."""
        return _vtl.bitwise_invert(self)

    def bitwise_left_shift(self, other: Any) -> Tensor:
        """``vtl.bitwise_left_shift(self, other)``."""
        return _vtl.bitwise_left_shift(self, other)

    def bitwise_right_shift(self, other: Any) -> Tensor:
        """``vtl.bitwise_right_shift(self, other)``."""
        return _vtl.bitwise_right_shift(self, other)

    # -- more elementwise methods (thin calls of the namespace functions) ----------------
    def log1p(self) -> Tensor:
        """``vtl.log1p(self)``."""
        return _vtl.log1p(self)

    def expm1(self) -> Tensor:
        """``vtl.expm1(self)``."""
        return _vtl.expm1(self)

    def log2(self) -> Tensor:
        """``vtl.log2(self)``."""
        return _vtl.log2(self)

    def log10(self) -> Tensor:
        """``vtl.log10(self)``."""
        return _vtl.log10(self)

    def tan(self) -> Tensor:
        """``vtl.tan(self)``."""
        return _vtl.tan(self)

    def sinh(self) -> Tensor:
        """``vtl.sinh(self)``."""
        return _vtl.sinh(self)

    def cosh(self) -> Tensor:
        """``vtl.cosh(self)``."""
        return _vtl.cosh(self)

    def asin(self) -> Tensor:
        """``vtl.asin(self)``."""
        return _vtl.asin(self)

    def acos(self) -> Tensor:
        """``vtl.acos(self)``."""
        return _vtl.acos(self)

    def atan(self) -> Tensor:
        """``vtl.atan(self)``."""
        return _vtl.atan(self)

    def asinh(self) -> Tensor:
        """``vtl.asinh(self)``."""
        return _vtl.asinh(self)

    def acosh(self) -> Tensor:
        """``vtl.acosh(self)``."""
        return _vtl.acosh(self)

    def atanh(self) -> Tensor:
        """``vtl.atanh(self)``."""
        return _vtl.atanh(self)

    def signbit(self) -> Tensor:
        """``vtl.signbit(self)``."""
        return _vtl.signbit(self)

    def conj(self) -> Tensor:
        """``vtl.conj(self)``."""
        return _vtl.conj(self)

    def atan2(self, other: Any) -> Tensor:
        """``vtl.atan2(self, other)``."""
        return _vtl.atan2(self, other)

    def hypot(self, other: Any) -> Tensor:
        """``vtl.hypot(self, other)``."""
        return _vtl.hypot(self, other)

    def maximum(self, other: Any) -> Tensor:
        """``vtl.maximum(self, other)``."""
        return _vtl.maximum(self, other)

    def minimum(self, other: Any) -> Tensor:
        """``vtl.minimum(self, other)``."""
        return _vtl.minimum(self, other)

    def logaddexp(self, other: Any) -> Tensor:
        """``vtl.logaddexp(self, other)``."""
        return _vtl.logaddexp(self, other)

    def copysign(self, other: Any) -> Tensor:
        """``vtl.copysign(self, other)``."""
        return _vtl.copysign(self, other)

    def floor_divide(self, other: Any) -> Tensor:
        """``vtl.floor_divide(self, other)``."""
        return _vtl.floor_divide(self, other)

    def true_divide(self, other: Any) -> Tensor:
        """``vtl.divide(self, other)``."""
        return _vtl.divide(self, other)

    def clamp_min(self, min: Any) -> Tensor:  # noqa: A002
        """``vtl.clip(self, min=min)``."""
        return _vtl.clip(self, min=min)

    def clamp_max(self, max: Any) -> Tensor:  # noqa: A002
        """``vtl.clip(self, max=max)``."""
        return _vtl.clip(self, max=max)

    def diff(self, n: int = 1, dim: int = -1, prepend: Tensor | None = None,
             append: Tensor | None = None) -> Tensor:
        """``vtl.diff(self, axis=dim, n=n, prepend=prepend, append=append)``."""
        return _vtl.diff(self, axis=dim, n=n, prepend=prepend, append=append)

    def count_nonzero(self, dim: Any = None) -> Tensor:
        """``vtl.count_nonzero(self, axis=dim)``."""
        return _vtl.count_nonzero(self, axis=tuple(dim) if isinstance(dim, list) else dim)

    # -- products -------------------------------------------------------------------------
    def mm(self, mat2: Tensor) -> Tensor:
        """``vtl.mm(self, mat2)``."""
        return _vtl.mm(self, mat2)

    def bmm(self, mat2: Tensor) -> Tensor:
        """``vtl.bmm(self, mat2)``."""
        return _vtl.bmm(self, mat2)

    def dot(self, other: Tensor) -> Tensor:
        """``vtl.dot(self, other)``."""
        return _vtl.dot(self, other)

    def outer(self, vec2: Tensor) -> Tensor:
        """``vtl.outer(self, vec2)``."""
        return _vtl.outer(self, vec2)

    def addmm(self, mat1: Tensor, mat2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
        """``vtl.addmm(self, mat1, mat2, beta=beta, alpha=alpha)``."""
        return _vtl.addmm(self, mat1, mat2, beta=beta, alpha=alpha)

    def baddbmm(self, batch1: Tensor, batch2: Tensor, *, beta: Any = 1,
                alpha: Any = 1) -> Tensor:
        """``vtl.baddbmm(self, batch1, batch2, beta=beta, alpha=alpha)``."""
        return _vtl.baddbmm(self, batch1, batch2, beta=beta, alpha=alpha)

    # -- reductions and statistics (PyTorch's) --------------------------------------------
    def norm(self, p: Any = "fro", dim: Any = None, keepdim: bool = False,
             dtype: Any = None) -> Tensor:
        """``vtl.norm(self, p, dim, keepdim, dtype)``."""
        return _vtl.norm(self, p, dim, keepdim, dtype)

    def amax(self, dim: Any = (), keepdim: bool = False) -> Tensor:
        """``vtl.amax(self, dim, keepdim)``."""
        return _vtl.amax(self, dim, keepdim)

    def amin(self, dim: Any = (), keepdim: bool = False) -> Tensor:
        """``vtl.amin(self, dim, keepdim)``."""
        return _vtl.amin(self, dim, keepdim)

    def aminmax(self, *, dim: int | None = None, keepdim: bool = False) -> Any:
        """``vtl.aminmax(self, dim=dim, keepdim=keepdim)``: the named tuple ``(min, max)``."""
        return _vtl.aminmax(self, dim=dim, keepdim=keepdim)

    def nansum(self, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
        """``vtl.nansum(self, dim, keepdim, dtype=dtype)``."""
        return _vtl.nansum(self, dim, keepdim, dtype=dtype)

    def nanmean(self, dim: Any = None, keepdim: bool = False, *,
                dtype: Any = None) -> Tensor:
        """``vtl.nanmean(self, dim, keepdim, dtype=dtype)``."""
        return _vtl.nanmean(self, dim, keepdim, dtype=dtype)

    def median(self, dim: int | None = None, keepdim: bool = False) -> Any:
        """``vtl.median(self, dim, keepdim)``: the lower median; with ``dim``, the named
        tuple ``(values, indices)``."""
        return _vtl.median(self, dim, keepdim)

    def quantile(self, q: Any, dim: int | None = None, keepdim: bool = False, *,
                 interpolation: str = "linear") -> Tensor:
        """``vtl.quantile(self, q, dim, keepdim, interpolation=...)``."""
        return _vtl.quantile(self, q, dim, keepdim, interpolation=interpolation)

    def histc(self, bins: int = 100, min: Any = 0, max: Any = 0) -> Tensor:  # noqa: A002
        """``vtl.histc(self, bins, min, max)``."""
        return _vtl.histc(self, bins, min, max)

    def bincount(self, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
        """``vtl.bincount(self, weights, minlength)``."""
        return _vtl.bincount(self, weights, minlength)

    def unique(self, sorted: bool = True, return_inverse: bool = False,  # noqa: A002
               return_counts: bool = False, dim: int | None = None) -> Any:
        """``vtl.unique(self, ...)``."""
        return _vtl.unique(self, sorted, return_inverse, return_counts, dim)

    def argsort(self, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
        """The positions that sort the tensor along ``dim`` (``vtl.argsort``; always a
        stable sort)."""
        return _vtl.argsort(self, axis=dim, descending=bool(descending), stable=True)

    def msort(self) -> Tensor:
        """``vtl.msort(self)``: sorted along the first dim."""
        return _vtl.msort(self)

    def nonzero(self, *, as_tuple: bool = False) -> Any:
        """The indices of the non-zero elements: a ``(count, ndim)`` tensor, or with
        ``as_tuple=True`` one 1-D tensor per dim (``vtl.nonzero``). A device sync (the
        count depends on the data)."""
        t = self if self.ndim else _vtl.reshape(self, (1,))
        idx = _vtl.nonzero(t)
        if as_tuple:
            return idx
        out = _vtl.stack(idx, axis=1)
        return out if self.ndim else out[:, :0]

    # -- casts ----------------------------------------------------------------------------
    def astype(self, dtype: Any, *, copy: bool = True, device: Any = None) -> Tensor:
        """``vtl.astype(self, dtype, ...)``."""
        return _vtl.astype(self, dtype, copy=copy, device=device)

    def half(self) -> Tensor:
        """Cast to float16 (PyTorch's ``half()``; ``self`` when it already is). A device
        without float16 (a wgpu adapter lacking ``shader-f16``) raises ``TypeError``."""
        return _cast_to(self, "float16", "half")

    def bfloat16(self) -> Tensor:
        """Cast to bfloat16 (``self`` when it already is)."""
        return _cast_to(self, "bfloat16", "bfloat16")

    def double(self) -> Tensor:
        """Cast to float64 (``self`` when it already is)."""
        return _vtl.astype(self, _dtypes.float64, copy=False)

    def long(self) -> Tensor:
        """Cast to int64 (``self`` when it already is)."""
        return _vtl.astype(self, _dtypes.int64, copy=False)

    # last: these names shadow the builtins in the rest of the class body
    def float(self) -> Tensor:
        """Cast to float32 (``self`` when it already is)."""
        return _vtl.astype(self, _dtypes.float32, copy=False)

    def int(self) -> Tensor:
        """Cast to int32 (``self`` when it already is)."""
        return _vtl.astype(self, _dtypes.int32, copy=False)

    def bool(self) -> Tensor:
        """Cast to bool (``self`` when it already is)."""
        return _vtl.astype(self, _dtypes.bool, copy=False)

    def any(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None,
            keepdims: bool | None = None) -> Tensor:
        """``vtl.any`` over ``dim`` (or ``axis``; all axes by default)."""
        return _vtl.any(self, axis=_axis(axis, dim, "any"), keepdims=_keep(keepdim, keepdims))

    def all(self, dim: Any = None, keepdim: bool = False, *, axis: Any = None,
            keepdims: bool | None = None) -> Tensor:
        """``vtl.all`` over ``dim`` (or ``axis``; all axes by default)."""
        return _vtl.all(self, axis=_axis(axis, dim, "all"), keepdims=_keep(keepdim, keepdims))
