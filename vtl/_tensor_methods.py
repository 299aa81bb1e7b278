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
* PyTorch's ``repeat`` (whole-tensor repetition) is ``t.tile(...)``; the array
  API's ``vtl.repeat`` repeats elements.

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


def bind() -> None:
    """Bind the ``vtl`` namespace the methods call (once, by ``vtl/__init__``)."""
    global _vtl
    import vtl

    _vtl = vtl


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
