"""PyTorch-style convenience methods on Tensor (``t.sum()``, ``t.reshape(...)``...),
each a thin call of the namespace function.

The namespace function is looked up when the method is called, so a method
works as soon as its function exists in ``vtl``. Reductions accept both the
array API names (``axis``, ``keepdims``) and PyTorch's (``dim``, ``keepdim``).

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

from typing import Any

from ._tensor import Tensor, _ns
from .backends import _dtypes


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


# -- reductions ---------------------------------------------------------------------
def sum(self: Tensor, axis: Any = None, *, keepdims: bool = False, dtype: Any = None,  # noqa: A001
        dim: Any = None, keepdim: bool | None = None) -> Tensor:
    """``vtl.sum(self, ...)``."""
    return _ns().sum(self, axis=_axis(axis, dim, "sum"), dtype=dtype,
                     keepdims=_keep(keepdims, keepdim))


def prod(self: Tensor, axis: Any = None, *, keepdims: bool = False, dtype: Any = None,
         dim: Any = None, keepdim: bool | None = None) -> Tensor:
    """``vtl.prod(self, ...)``."""
    return _ns().prod(self, axis=_axis(axis, dim, "prod"), dtype=dtype,
                      keepdims=_keep(keepdims, keepdim))


def mean(self: Tensor, axis: Any = None, *, keepdims: bool = False, dim: Any = None,
         keepdim: bool | None = None) -> Tensor:
    """``vtl.mean(self, ...)``."""
    return _ns().mean(self, axis=_axis(axis, dim, "mean"), keepdims=_keep(keepdims, keepdim))


def max(self: Tensor, axis: Any = None, *, keepdims: bool = False, dim: Any = None,  # noqa: A001
        keepdim: bool | None = None) -> Tensor:
    """``vtl.max(self, ...)`` (values only, unlike PyTorch's ``max(dim)``)."""
    return _ns().max(self, axis=_axis(axis, dim, "max"), keepdims=_keep(keepdims, keepdim))


def min(self: Tensor, axis: Any = None, *, keepdims: bool = False, dim: Any = None,  # noqa: A001
        keepdim: bool | None = None) -> Tensor:
    """``vtl.min(self, ...)`` (values only, unlike PyTorch's ``min(dim)``)."""
    return _ns().min(self, axis=_axis(axis, dim, "min"), keepdims=_keep(keepdims, keepdim))


def _correction(correction: Any, unbiased: bool | None) -> Any:
    if unbiased is None:
        return 1 if correction is None else correction
    if correction is not None:
        raise TypeError("pass either correction= or unbiased=, not both")
    return 1 if unbiased else 0


def std(self: Tensor, axis: Any = None, *, correction: int | float | None = None,
        keepdims: bool = False, dim: Any = None, keepdim: bool | None = None,
        unbiased: bool | None = None) -> Tensor:
    """``vtl.std(self, ...)`` with PyTorch's default ``correction=1``."""
    return _ns().std(self, axis=_axis(axis, dim, "std"),
                     correction=_correction(correction, unbiased),
                     keepdims=_keep(keepdims, keepdim))


def var(self: Tensor, axis: Any = None, *, correction: int | float | None = None,
        keepdims: bool = False, dim: Any = None, keepdim: bool | None = None,
        unbiased: bool | None = None) -> Tensor:
    """``vtl.var(self, ...)`` with PyTorch's default ``correction=1``."""
    return _ns().var(self, axis=_axis(axis, dim, "var"),
                     correction=_correction(correction, unbiased),
                     keepdims=_keep(keepdims, keepdim))


def argmax(self: Tensor, axis: int | None = None, *, keepdims: bool = False,
           dim: int | None = None, keepdim: bool | None = None) -> Tensor:
    """``vtl.argmax(self, ...)``."""
    return _ns().argmax(self, axis=_axis(axis, dim, "argmax"),
                        keepdims=_keep(keepdims, keepdim))


def argmin(self: Tensor, axis: int | None = None, *, keepdims: bool = False,
           dim: int | None = None, keepdim: bool | None = None) -> Tensor:
    """``vtl.argmin(self, ...)``."""
    return _ns().argmin(self, axis=_axis(axis, dim, "argmin"),
                        keepdims=_keep(keepdims, keepdim))


# -- shapes -----------------------------------------------------------------------------
def reshape(self: Tensor, *shape: Any, copy: bool | None = None) -> Tensor:
    """``vtl.reshape``: ``t.reshape(2, 3)`` or ``t.reshape((2, 3))``."""
    return _ns().reshape(self, _shape_args(shape, "reshape"), copy=copy)


def view(self: Tensor, *shape: Any) -> Tensor:
    """A reshaped view; ``ValueError`` when the data cannot be viewed in that shape."""
    return _ns().reshape(self, _shape_args(shape, "view"), copy=False)


def flatten(self: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Merge axes ``start_dim..end_dim`` into one (a 0-d tensor becomes 1-D)."""
    return _ns().reshape(self, _flat_shape(self.shape, start_dim, end_dim))


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


def squeeze(self: Tensor, dim: Any = None, *, axis: Any = None) -> Tensor:
    """``vtl.squeeze``; without an axis, removes every size-one axis."""
    return _ns().squeeze(self, _squeeze_axes(self, _axis(axis, dim, "squeeze")))


def _squeeze_axes(t: Tensor, ax: Any) -> Any:
    return tuple(i for i, s in enumerate(t.shape) if s == 1) if ax is None else ax


def unsqueeze(self: Tensor, dim: int) -> Tensor:
    """``vtl.expand_dims(self, axis=dim)``."""
    return _ns().expand_dims(self, axis=dim)


def permute(self: Tensor, *dims: Any) -> Tensor:
    """``vtl.permute_dims``: ``t.permute(2, 0, 1)`` or ``t.permute((2, 0, 1))``."""
    return _ns().permute_dims(self, _shape_args(dims, "permute"))


def transpose(self: Tensor, dim0: int, dim1: int) -> Tensor:
    """Swap two axes (a view)."""
    return _ns().permute_dims(self, _swapped(self.ndim, dim0, dim1))


def _swapped(n: int, a: int, b: int) -> tuple:
    for d in (a, b):
        if not -n <= d < n:
            raise IndexError(f"transpose(): dim {d} is out of range for a {n}-D tensor")
    p = list(range(n))
    a, b = a % n, b % n
    p[a], p[b] = p[b], p[a]
    return tuple(p)


def expand(self: Tensor, *sizes: Any) -> Tensor:
    """``vtl.broadcast_to``; ``-1`` keeps the size of that axis, as in PyTorch."""
    return _ns().broadcast_to(self, _expand_shape(self.shape, _shape_args(sizes, "expand")))


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


def tile(self: Tensor, *reps: Any) -> Tensor:
    """``vtl.tile`` (PyTorch's ``Tensor.repeat``): ``t.tile(2, 3)`` or ``t.tile((2, 3))``."""
    return _ns().tile(self, _shape_args(reps, "tile"))


# -- elementwise --------------------------------------------------------------------
def abs(self: Tensor) -> Tensor:  # noqa: A001
    """``vtl.abs(self)``."""
    return _ns().abs(self)


def exp(self: Tensor) -> Tensor:
    """``vtl.exp(self)``."""
    return _ns().exp(self)


def log(self: Tensor) -> Tensor:
    """``vtl.log(self)``."""
    return _ns().log(self)


def sqrt(self: Tensor) -> Tensor:
    """``vtl.sqrt(self)``."""
    return _ns().sqrt(self)


def tanh(self: Tensor) -> Tensor:
    """``vtl.tanh(self)``."""
    return _ns().tanh(self)


def clip(self: Tensor, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002
    """``vtl.clip(self, min, max)``; also available as ``clamp``."""
    return _ns().clip(self, min=min, max=max)


def matmul(self: Tensor, other: Tensor) -> Tensor:
    """``vtl.matmul(self, other)``."""
    return _ns().matmul(self, other)


# -- casts ----------------------------------------------------------------------------
def astype(self: Tensor, dtype: Any, *, copy: bool = True, device: Any = None) -> Tensor:
    """``vtl.astype(self, dtype, ...)``."""
    return _ns().astype(self, dtype, copy=copy, device=device)


def _cast(name: str, dtype: Any) -> Any:
    def method(self: Tensor) -> Tensor:
        return _ns().astype(self, dtype, copy=False)

    method.__name__ = name
    method.__qualname__ = f"Tensor.{name}"
    method.__doc__ = f"Cast to {dtype.name} (``self`` when it already is)."
    return method


_METHODS = {
    "sum": sum, "prod": prod, "mean": mean, "max": max, "min": min, "std": std, "var": var,
    "argmax": argmax, "argmin": argmin,
    "reshape": reshape, "view": view, "flatten": flatten, "squeeze": squeeze,
    "unsqueeze": unsqueeze, "permute": permute, "transpose": transpose, "expand": expand,
    "tile": tile,
    "abs": abs, "exp": exp, "log": log, "sqrt": sqrt, "tanh": tanh, "clip": clip,
    "clamp": clip, "matmul": matmul, "astype": astype,
    "float": _cast("float", _dtypes.float32), "double": _cast("double", _dtypes.float64),
    "long": _cast("long", _dtypes.int64), "int": _cast("int", _dtypes.int32),
    "bool": _cast("bool", _dtypes.bool),
}


def install() -> None:
    """Attach the methods to :class:`vtl.Tensor` (called once by ``vtl/__init__``).

    A name that ``Tensor`` itself already defines is left alone.
    """
    for name, fn in _METHODS.items():
        if name not in Tensor.__dict__ or getattr(Tensor.__dict__[name], "_vtl_method", False):
            fn._vtl_method = True  # type: ignore[attr-defined]
            setattr(Tensor, name, fn)
