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
* ``t.max(dim)``/``t.min(dim)`` return the values only (use ``argmax``/``argmin``
  for the indices).
* ``t.squeeze(d)`` raises ``ValueError`` when axis ``d`` does not have size one
  (PyTorch silently leaves it); ``t.squeeze()`` removes every size-one axis.
* PyTorch's ``repeat`` (whole-tensor repetition) is ``t.tile(...)``; the array
  API's ``vtl.repeat`` repeats elements.

``t.std()``/``t.var()`` use PyTorch's default ``correction=1`` (Bessel's
correction); ``vtl.std``/``vtl.var`` keep the standard's ``correction=0``.
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

    def max(self, axis: Any = None, *, keepdims: bool = False, dim: Any = None,
            keepdim: bool | None = None) -> Tensor:
        """``vtl.max(self, ...)`` (values only, unlike PyTorch's ``max(dim)``)."""
        return _vtl.max(self, axis=_axis(axis, dim, "max"), keepdims=_keep(keepdims, keepdim))

    def min(self, axis: Any = None, *, keepdims: bool = False, dim: Any = None,
            keepdim: bool | None = None) -> Tensor:
        """``vtl.min(self, ...)`` (values only, unlike PyTorch's ``min(dim)``)."""
        return _vtl.min(self, axis=_axis(axis, dim, "min"), keepdims=_keep(keepdims, keepdim))

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
