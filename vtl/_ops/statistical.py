"""Statistical functions: sum, prod, mean, var, std, max, min, cumulative_sum,
cumulative_prod.

Gradient conventions (PyTorch's):

* ``max``/``min``: the gradient is split evenly among all elements equal to
  the extremum (like ``torch.amax``/``amin``); when the result is NaN it is
  split among the NaN inputs of that slice.
* ``std``: where the standard deviation is zero the gradient is zero (PyTorch
  masks ``grad / (2 * std)`` to 0 there instead of producing NaN).
* ``var``/``std`` with ``N - correction <= 0``: the values are inf/NaN (as in
  NumPy) and so are the gradients (as in PyTorch).
* ``prod``/``cumulative_prod``: exact with zeros in the input (any number of
  them), without dividing by zero.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

from .._tensor import Tensor
from ..backends import _dtypes
from ..backends._dtypes import kind as _dkind
from ._aliases import torch_names, unbiased_to_correction
from ._core import (
    ONE_INPUT,
    _grad,
    meta,
    needs_grad,
    new,
    normalize_axes,
    normalize_axis,
    record,
    record_op,
    sum_to,
    tensor_arg,
)

__all__ = [
    "cumulative_prod", "cumulative_sum", "max", "mean", "min", "mode", "prod", "std", "sum",
    "var",
]

# -- helpers ----------------------------------------------------------------------
def _expand_reduced(g: Tensor, x: Tensor, axes: tuple[int, ...], keepdims: bool) -> Tensor:
    """Broadcast a gradient of a reduction back to the input's shape."""
    if not (_grad.enabled and g._requires_grad):
        # plain backward (no create_graph): work on the raw arrays
        xp = g._device.xp
        gd = g._data
        if not keepdims and gd.ndim:
            gd = xp.reshape(gd, tuple(1 if i in axes else s for i, s in enumerate(x.shape)))
        return new(_spread(g._device, x, gd), g._device)
    from .manipulation import broadcast_to, reshape

    if not keepdims:
        shape = tuple(1 if i in axes else s for i, s in enumerate(x.shape))
        g = reshape(g, shape)
    if g.shape == x.shape:
        return g
    return broadcast_to(g, x.shape)


def _spread(dev: Any, x: Tensor, value: Any) -> Any:
    """The gradient ``value`` of a reduction of ``x`` spread over ``x``'s shape
    (``Backend.spread``): a read-only broadcast view may serve where ``x`` is not a leaf,
    whose ``.grad`` it would become (a view whose elements share memory must not be updated
    in place by an optimizer)."""
    return dev._backend.spread(value, x._data, x._grad_fn is not None)


def _kept_shape(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(1 if i in axes else s for i, s in enumerate(shape))


def _count(shape: tuple[int, ...], axes: tuple[int, ...]) -> int:
    n = 1
    for a in axes:
        n *= shape[a]
    return n


def _acc_dtype(dt: Any, dev: Any) -> Any:
    """The standard's default result dtype of sum/prod/cumulative_* for input dtype ``dt``:
    small integers (and bool) widen to the default (unsigned) integer dtype."""
    kind = _dkind(dt)
    if kind in "fc":
        return dt
    default = dev.backend.default_dtypes(dev.index)["integral"]
    if kind == "b":
        return default
    if dt.itemsize < default.itemsize:
        if kind == "u":
            return _dtypes.ALL_DTYPES[f"uint{8 * default.itemsize}"]
        return default
    return dt


def _dtype_arg(dtype: Any, x: Tensor) -> Any:
    dev = x._device
    if dtype is None:
        return _acc_dtype(x._data.dtype, dev)
    dt = _dtypes.to_dtype(dtype)
    dev.backend.check_dtype(dt, dev.index)
    return dt


def _c(t: Tensor) -> Tensor:
    if _dkind(t._data.dtype) == "c":
        from .elementwise import conj

        return conj(t)
    return t


def _const(raw: Any, dev: Any) -> Tensor:
    """A constant (graph-free) tensor, for masks and weights of piecewise rules."""
    return new(raw, dev)


def _axis_slice(ndim: int, axis: int, sl: slice) -> tuple:
    return (slice(None),) * axis + (sl,)


def _flip(t: Tensor, axis: int) -> Tensor:
    """``t`` reversed along ``axis`` (differentiable)."""
    from .manipulation import flip

    return flip(t, axis=axis)


def _reverse_cumsum(t: Tensor, axis: int) -> Tensor:
    """``out[i] = sum(t[i:])`` along ``axis``."""
    return _flip(cumulative_sum(_flip(t, axis), axis=axis), axis)


def _real_check(x: Tensor, fname: str, allow_complex: bool = False,
                allow_int: bool = True) -> None:
    k = _dkind(x._data.dtype)
    if k == "c" and not allow_complex:
        raise TypeError(f"{fname}() needs a real-valued tensor, got dtype {x.dtype}")
    if not allow_int and k not in "fc":
        what = "floating-point" if allow_complex else "real floating-point"
        raise TypeError(f"{fname}() needs a {what} tensor, got dtype {x.dtype}")


# -- sums and products ----------------------------------------------------------------
@torch_names(dim="axis", keepdim="keepdims")
def sum(x: Tensor, /, *, axis: int | tuple[int, ...] | None = None, dtype: Any = None,
        keepdims: bool = False) -> Tensor:  # noqa: A001 - the standard's name
    """Sum over ``axis`` (all axes by default).

    Integer and bool inputs narrower than the default integer dtype are summed in
    the default (unsigned) integer dtype unless ``dtype`` is given; the sum of an
    empty axis is 0.

    Args:
        x: The input tensor.
        axis: An axis, a tuple of axes, or ``None`` for all (the flattened tensor).
        dtype: dtype of the sum (default: see above).
        keepdims: Keep the reduced axes (size 1).
        dim: PyTorch's name for ``axis`` (give one of the two).
        keepdim: PyTorch's name for ``keepdims`` (give one of the two).

    Returns:
        The reduced tensor.

    Raises:
        TypeError: If a parameter is given under both of its names.
    """
    x = tensor_arg(x, "sum")
    axes = normalize_axes(axis, x.ndim, "sum")
    dev = x._device
    dt = _dtype_arg(dtype, x)
    out = dev.xp.sum(x._data, axis=axes, dtype=dt, keepdims=keepdims)
    if needs_grad(x) and _dkind(out.dtype) in "fc":
        xm = meta(x)

        def vjp(g: Tensor, _: Any) -> Tensor:
            return sum_to(_expand_reduced(g, xm, axes, keepdims), xm)

        return record(out, dev, "SumBackward", (x,), vjp)
    return new(out, dev)


@torch_names(dim="axis", keepdim="keepdims")
def prod(x: Tensor, /, *, axis: int | tuple[int, ...] | None = None, dtype: Any = None,
         keepdims: bool = False) -> Tensor:
    """Product over ``axis`` (all axes by default); the product of an empty axis is 1.

    The gradient ``g * prod(x[j] for j != i)`` is formed from exclusive cumulative
    products from both sides, so it is exact when ``x`` contains zeros.

    Args:
        x: The input tensor.
        axis: An axis, a tuple of axes, or ``None`` for all (the flattened tensor).
        dtype: dtype of the product (default: see above).
        keepdims: Keep the reduced axes (size 1).
        dim: PyTorch's name for ``axis`` (give one of the two).
        keepdim: PyTorch's name for ``keepdims`` (give one of the two).

    Returns:
        The reduced tensor.

    Raises:
        TypeError: If a parameter is given under both of its names.
    """
    x = tensor_arg(x, "prod")
    axes = normalize_axes(axis, x.ndim, "prod")
    dev = x._device
    dt = _dtype_arg(dtype, x)
    out = dev.xp.prod(x._data, axis=axes, dtype=dt, keepdims=keepdims)
    if needs_grad(x) and _dkind(out.dtype) in "fc":
        def vjp(g: Tensor, _: Any) -> Tensor:
            from .elementwise import multiply
            from .manipulation import permute_dims, reshape

            keep = tuple(i for i in range(x.ndim) if i not in axes)
            perm = keep + axes
            kshape = tuple(x.shape[i] for i in keep)
            k = _count(x.shape, axes)
            xt = x if perm == tuple(range(x.ndim)) else permute_dims(x, perm)
            xt = reshape(xt, (*kshape, k))
            left = cumulative_prod(xt, axis=-1, include_initial=True)[..., :-1]
            right = cumulative_prod(_flip(xt, xt.ndim - 1), axis=-1, include_initial=True)
            right = _flip(right[..., :-1], xt.ndim - 1)
            others = multiply(left, right)
            gx = multiply(reshape(g, (*kshape, 1)), _c(others))
            gx = reshape(gx, tuple(x.shape[i] for i in perm))
            if perm != tuple(range(x.ndim)):
                inv = tuple(sorted(range(len(perm)), key=perm.__getitem__))
                gx = permute_dims(gx, inv)
            return sum_to(gx, x)

        return record(out, dev, "ProdBackward", (x,), vjp, saved=(x,))
    return new(out, dev)


# -- moments ----------------------------------------------------------------------------
@torch_names(dim="axis", keepdim="keepdims")
def mean(x: Tensor, /, *, axis: int | tuple[int, ...] | None = None,
         keepdims: bool = False) -> Tensor:
    """Arithmetic mean over ``axis`` of a floating-point tensor; NaN for an empty axis.

    Args:
        x: The input tensor.
        axis: An axis, a tuple of axes, or ``None`` for all (the flattened tensor).
        keepdims: Keep the reduced axes (size 1).
        dim: PyTorch's name for ``axis`` (give one of the two).
        keepdim: PyTorch's name for ``keepdims`` (give one of the two).

    Returns:
        The reduced tensor.

    Raises:
        TypeError: If ``x`` is not floating-point or complex, or a parameter is given under both
            of its names.
    """
    if x.__class__ is not Tensor:
        x = tensor_arg(x, "mean")
    data = x._data
    dt = data.dtype
    if _dkind(dt) not in "fc":
        _real_check(x, "mean", allow_complex=True, allow_int=False)
    shape = data.shape
    if axis is None:
        axes = tuple(range(len(shape)))
        n = data.size
    else:
        axes = normalize_axes(axis, len(shape), "mean")
        n = _count(shape, axes)
    dev = x._device
    if _dkind(dt) == "f" and (0 < n < 2**24 if dt.itemsize == 4 else 0 < n and dt.itemsize == 8):
        # the sum divided by the count: what NumPy's mean computes for these dtypes and
        # counts (the count is exact in the dtype), without its Python overhead
        out = dev._backend.sum_axes(data, axes, keepdims) / n
    else:
        out = dev.xp.mean(data, axis=axes, keepdims=keepdims)
    if x._requires_grad and _grad.enabled:
        return record_op(out, dev, "MeanBackward", x, ONE_INPUT,
                         partial(_mean_vjp, meta(x), axes, keepdims, n), (), _mean_raw)
    return new(out, dev)


def _mean_raw(vjp: partial, gd: Any) -> tuple:
    """Plain backward of mean: one division of the (reduced) gradient, spread over the
    input; ``vjp`` is ``partial(_mean_vjp, x, axes, keepdims, n)``."""
    x, axes, keepdims, n = vjp.args
    if not keepdims and gd.ndim:
        gd = x._device.xp.reshape(gd, _kept_shape(x._data.shape, axes))
    return (_spread(x._device, x, gd / n),)


def _mean_vjp(x: Tensor, axes: tuple[int, ...], keepdims: bool, n: int, g: Tensor,
              _: Any) -> Tensor:
    if not (_grad.enabled and g._requires_grad):
        return new(_mean_raw(partial(_mean_vjp, x, axes, keepdims, n), g._data)[0], g._device)
    from .elementwise import divide

    return divide(_expand_reduced(g, x, axes, keepdims), n)


def _centered(x: Tensor, axes: tuple[int, ...]) -> Tensor:
    from .elementwise import subtract

    return subtract(x, mean(x, axis=axes, keepdims=True))


def _var_factor(n: int, correction: float) -> float:
    d = n - correction
    return 1.0 / d if d != 0 else math.inf


def _check_correction(correction: Any, fname: str) -> float:
    if isinstance(correction, bool) or not isinstance(correction, (int, float)):
        raise TypeError(
            f"{fname}() expected a real number for correction, got {type(correction).__name__}"
        )
    if correction < 0:
        raise ValueError(f"{fname}(): correction must be non-negative, got {correction}")
    return correction


@torch_names(dim="axis", keepdim="keepdims", unbiased=("correction", unbiased_to_correction))
def var(x: Tensor, /, *, axis: int | tuple[int, ...] | None = None, correction: float = 0.0,
        keepdims: bool = False) -> Tensor:
    """Variance over ``axis`` with ``N - correction`` degrees of freedom
    (``correction=1`` for the unbiased sample variance).

    ``correction`` defaults to 0, the standard's default; PyTorch's ``torch.var`` defaults
    to 1: pass ``correction=1`` or ``unbiased=True`` (``Tensor.var`` defaults to 1).

    Args:
        x: The input tensor.
        axis: An axis, a tuple of axes, or ``None`` for all (the flattened tensor).
        correction: Subtracted from ``N`` in the divisor (0 by default; 1 for PyTorch's default).
            At or past ``N`` the divisor is 0, as in NumPy and PyTorch: the result is inf
            (nan where every deviation is 0) on every backend.
        keepdims: Keep the reduced axes (size 1).
        dim: PyTorch's name for ``axis`` (give one of the two).
        keepdim: PyTorch's name for ``keepdims`` (give one of the two).
        unbiased: PyTorch's older flag: ``True`` is ``correction=1``, ``False`` ``correction=0``.

    Returns:
        The reduced tensor.

    Raises:
        TypeError: If ``x`` is not real floating-point, ``correction`` is not a number, or a
            parameter is given under both of its names.
        ValueError: If ``correction`` is negative.
    """
    x = tensor_arg(x, "var")
    _real_check(x, "var", allow_int=False)
    correction = _check_correction(correction, "var")
    axes = normalize_axes(axis, x.ndim, "var")
    dev = x._device
    out = dev.xp.var(x._data, axis=axes, correction=correction, keepdims=keepdims)
    if needs_grad(x):
        factor = 2.0 * _var_factor(_count(x.shape, axes), correction)

        def vjp(g: Tensor, _: Any) -> Tensor:
            from .elementwise import multiply

            ge = _expand_reduced(g, x, axes, keepdims)
            return multiply(multiply(ge, _centered(x, axes)), factor)

        return record(out, dev, "VarBackward", (x,), vjp, saved=(x,))
    return new(out, dev)


@torch_names(dim="axis", keepdim="keepdims", unbiased=("correction", unbiased_to_correction))
def std(x: Tensor, /, *, axis: int | tuple[int, ...] | None = None, correction: float = 0.0,
        keepdims: bool = False) -> Tensor:
    """Standard deviation over ``axis`` with ``N - correction`` degrees of freedom.

    Where the standard deviation is 0 its gradient is 0 (PyTorch's convention).
    ``correction`` defaults to 0, the standard's default; PyTorch's ``torch.std`` defaults
    to 1: pass ``correction=1`` or ``unbiased=True`` (``Tensor.std`` defaults to 1).

    Args:
        x: The input tensor.
        axis: An axis, a tuple of axes, or ``None`` for all (the flattened tensor).
        correction: Subtracted from ``N`` in the divisor (0 by default; 1 for PyTorch's default).
            At or past ``N`` the divisor is 0, as in NumPy and PyTorch: the result is inf
            (nan where every deviation is 0) on every backend.
        keepdims: Keep the reduced axes (size 1).
        dim: PyTorch's name for ``axis`` (give one of the two).
        keepdim: PyTorch's name for ``keepdims`` (give one of the two).
        unbiased: PyTorch's older flag: ``True`` is ``correction=1``, ``False`` ``correction=0``.

    Returns:
        The reduced tensor.

    Raises:
        TypeError: If ``x`` is not real floating-point, ``correction`` is not a number, or a
            parameter is given under both of its names.
        ValueError: If ``correction`` is negative.
    """
    x = tensor_arg(x, "std")
    _real_check(x, "std", allow_int=False)
    correction = _check_correction(correction, "std")
    axes = normalize_axes(axis, x.ndim, "std")
    dev = x._device
    out = dev.xp.std(x._data, axis=axes, correction=correction, keepdims=keepdims)
    if needs_grad(x):
        factor = _var_factor(_count(x.shape, axes), correction)

        def vjp(g: Tensor, out: Tensor) -> Tensor:
            from .elementwise import divide, multiply
            from .searching import where

            zero = _const(dev.xp.equal(out._data, 0), dev)
            safe = where(zero, 1.0, out)
            scaled = where(zero, 0.0, divide(multiply(g, factor), safe))
            return multiply(_expand_reduced(scaled, x, axes, keepdims), _centered(x, axes))

        return record(out, dev, "StdBackward", (x,), vjp, saved=(x,), save_output=True)
    return new(out, dev)


# -- extrema ------------------------------------------------------------------------------
def _max_pair(x: Any, /, *, axis: Any, keepdims: bool) -> Any:
    """``vtl.max(x, dim=d)``: PyTorch's named tuple ``(values, indices)`` (``Tensor.max``)."""
    return tensor_arg(x, "max").max(axis, keepdims)


def _min_pair(x: Any, /, *, axis: Any, keepdims: bool) -> Any:
    """``vtl.min(x, dim=d)``: PyTorch's named tuple ``(values, indices)`` (``Tensor.min``)."""
    return tensor_arg(x, "min").min(axis, keepdims)


def _extremum(x: Tensor, axis: Any, keepdims: bool, fname: str) -> Tensor:
    x = tensor_arg(x, fname)
    _real_check(x, fname)
    axes = normalize_axes(axis, x.ndim, fname)
    for a in axes:
        if x.shape[a] == 0:
            raise ValueError(
                f"{fname}(): cannot reduce over axis {a} of size 0 (shape {x.shape}); "
                f"{fname} of an empty set is undefined"
            )
    dev = x._device
    xp = dev.xp
    out = getattr(xp, fname)(x._data, axis=axes, keepdims=keepdims)
    if needs_grad(x):
        def vjp(g: Tensor, out: Tensor) -> Tensor:
            from .elementwise import multiply

            o = out._data if keepdims else xp.reshape(out._data, _kept_shape(x.shape, axes))
            xd = x._data
            hit = xp.logical_or(xp.equal(xd, o), xp.logical_and(xp.isnan(xd), xp.isnan(o)))
            w = xp.astype(hit, xd.dtype)
            w = w / xp.sum(w, axis=axes, keepdims=True)
            return multiply(_expand_reduced(g, x, axes, keepdims), _const(w, dev))

        name = "AmaxBackward" if fname == "max" else "AminBackward"
        return record(out, dev, name, (x,), vjp, saved=(x,), save_output=True)
    return new(out, dev)


@torch_names(dim="axis", keepdim="keepdims", torch_form=_max_pair)
def max(x: Tensor, /, *, axis: int | tuple[int, ...] | None = None,
        keepdims: bool = False) -> Tensor:  # noqa: A001 - the standard's name
    """Maximum over ``axis`` (NaN propagates); ``ValueError`` for an empty axis.

    The gradient is split evenly among tied maxima (like ``torch.amax``). With PyTorch's
    ``dim=`` instead of ``axis=`` the result is PyTorch's named tuple ``(values, indices)``
    along that one axis (``torch.max(x, dim)``; the first maximal element, which gets the
    gradient).

    Args:
        x: The input tensor.
        axis: An axis, a tuple of axes, or ``None`` for all (the flattened tensor).
        keepdims: Keep the reduced axes (size 1).
        dim: PyTorch's name for ``axis`` (give one of the two).
        keepdim: PyTorch's name for ``keepdims`` (give one of the two).

    Returns:
        The maxima (with ``dim=``, the named tuple ``(values, indices)``).

    Raises:
        ValueError: If an axis is empty.
        TypeError: If a parameter is given under both of its names.
    """
    return _extremum(x, axis, keepdims, "max")


@torch_names(dim="axis", keepdim="keepdims", torch_form=_min_pair)
def min(x: Tensor, /, *, axis: int | tuple[int, ...] | None = None,
        keepdims: bool = False) -> Tensor:  # noqa: A001 - the standard's name
    """Minimum over ``axis`` (NaN propagates); ``ValueError`` for an empty axis.

    The gradient is split evenly among tied minima (like ``torch.amin``). With PyTorch's
    ``dim=`` instead of ``axis=`` the result is PyTorch's named tuple ``(values, indices)``
    along that one axis (``torch.min(x, dim)``; the first minimal element, which gets the
    gradient).

    Args:
        x: The input tensor.
        axis: An axis, a tuple of axes, or ``None`` for all (the flattened tensor).
        keepdims: Keep the reduced axes (size 1).
        dim: PyTorch's name for ``axis`` (give one of the two).
        keepdim: PyTorch's name for ``keepdims`` (give one of the two).

    Returns:
        The minima (with ``dim=``, the named tuple ``(values, indices)``).

    Raises:
        ValueError: If an axis is empty.
        TypeError: If a parameter is given under both of its names.
    """
    return _extremum(x, axis, keepdims, "min")


# -- cumulative ---------------------------------------------------------------------------
def _cumulative_args(x: Any, axis: Any, fname: str) -> tuple[Tensor, int]:
    x = tensor_arg(x, fname)
    if x.ndim == 0:
        from .manipulation import reshape

        x = reshape(x, (1,))  # like NumPy: a 0-d input is treated as shape (1,)
    if axis is None:
        if x.ndim > 1:
            raise ValueError(
                f"{fname}(): axis must be given for a tensor with more than one dimension "
                f"(got shape {x.shape})"
            )
        axis = 0
    return x, normalize_axis(axis, x.ndim, fname)


@torch_names(dim="axis")
def cumulative_sum(x: Tensor, /, *, axis: int | None = None, dtype: Any = None,
                   include_initial: bool = False) -> Tensor:
    """Running sum along ``axis`` (optional for 1-D input); with ``include_initial``
    the result starts with 0 and is one longer along ``axis``.

    Args:
        x: The input tensor.
        axis: The axis (optional for 1-D input).
        dtype: dtype of the sums (default: as for ``sum``).
        include_initial: Start with 0 (one more element).
        dim: PyTorch's name for ``axis`` (give one of the two).

    Returns:
        The running sums.

    Raises:
        TypeError: If a parameter is given under both of its names.
    """
    x, ax = _cumulative_args(x, axis, "cumulative_sum")
    dev = x._device
    dt = _dtype_arg(dtype, x)
    out = dev.xp.cumulative_sum(x._data, axis=ax, dtype=dt, include_initial=include_initial)
    if needs_grad(x) and _dkind(out.dtype) in "fc":
        def vjp(g: Tensor, _: Any) -> Tensor:
            if include_initial:
                g = g[_axis_slice(g.ndim, ax, slice(1, None))]
            return sum_to(_reverse_cumsum(g, ax), x)

        return record(out, dev, "CumsumBackward", (x,), vjp)
    return new(out, dev)


@torch_names(dim="axis")
def cumulative_prod(x: Tensor, /, *, axis: int | None = None, dtype: Any = None,
                    include_initial: bool = False) -> Tensor:
    """Running product along ``axis`` (optional for 1-D input); with
    ``include_initial`` the result starts with 1 and is one longer along ``axis``.

    The gradient is exact with zeros in ``x``: before the first zero of a slice it
    is ``reverse_cumsum(g * y) / x``; at the first zero it is recomputed with that
    zero replaced by one; after it, it is 0.

    Args:
        x: The input tensor.
        axis: The axis (optional for 1-D input).
        dtype: dtype of the products (default: as for ``prod``).
        include_initial: Start with 1 (one more element).
        dim: PyTorch's name for ``axis`` (give one of the two).

    Returns:
        The running products.

    Raises:
        TypeError: If a parameter is given under both of its names.
    """
    x, ax = _cumulative_args(x, axis, "cumulative_prod")
    dev = x._device
    dt = _dtype_arg(dtype, x)
    xp = dev.xp
    out = xp.cumulative_prod(x._data, axis=ax, dtype=dt, include_initial=include_initial)
    if needs_grad(x) and _dkind(out.dtype) in "fc":
        def vjp(g: Tensor, out: Tensor) -> Tensor:
            from .elementwise import divide, multiply
            from .searching import where

            y = out
            if include_initial:
                g = g[_axis_slice(g.ndim, ax, slice(1, None))]
                y = out[_axis_slice(out.ndim, ax, slice(1, None))]
            xd = x._data
            is_zero = xp.equal(xd, 0)
            nzeros = xp.cumulative_sum(xp.astype(is_zero, xp.int32), axis=ax)
            before = _const(xp.equal(nzeros, 0), dev)
            first = _const(xp.logical_and(is_zero, xp.equal(nzeros, 1)), dev)
            x_safe = where(before, x, 1)
            term1 = divide(_reverse_cumsum(multiply(g, _c(y)), ax), _c(x_safe))
            y1 = cumulative_prod(where(first, 1, x), axis=ax)
            term2 = _reverse_cumsum(multiply(g, _c(y1)), ax)
            gx = where(before, term1, where(first, term2, 0))
            return sum_to(gx, x)

        return record(out, dev, "CumprodBackward", (x,), vjp, saved=(x,), save_output=True)
    return new(out, dev)



# -- mode (PyTorch's) ---------------------------------------------------------------------
@torch_names(axis="dim", keepdims="keepdim", origin="The array API")
def mode(input: Tensor, dim: int = -1, keepdim: bool = False) -> Any:  # noqa: A002
    """PyTorch's ``torch.mode``: the named tuple ``(values, indices)`` of the most frequent
    value along ``dim`` (the smallest of the values tied for most frequent) and the index
    of its **last** occurrence along ``dim`` (what PyTorch's CPU kernel returns; PyTorch
    documents only "an" index). NaNs never equal each other, so each counts once.

    Computed on the device without a host sync: a stable sort, the start of each run of
    equal values (a second sort), the run lengths and their first maximum. The values are
    differentiable (the gradient goes to the returned index).

    Args:
        input: The input tensor.
        dim: The dim.
        keepdim: Keep the dim (size 1).
        axis: The array API's name for ``dim``.
        keepdims: The array API's name for ``keepdim``.

    Returns:
        The named tuple ``(values, indices)``.

    Raises:
        TypeError: If ``dim`` is not an int.
        IndexError: If ``input`` is 0-d.
        ValueError: If the dim is empty.
    """
    from .. import return_types
    from .indexing import take_along_axis
    from .manipulation import squeeze

    x = tensor_arg(input, "mode", "input")
    _real_check(x, "mode")
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"mode() expected an int for dim, got {dim!r}")
    dev = x._device
    xp = dev.xp
    idt = dev.backend.default_dtypes(dev.index)["indexing"]
    if x.ndim == 0:
        if dim not in (0, -1):
            raise IndexError(f"mode(): dim {dim} is out of range for a 0-d tensor")
        from .creation import zeros
        from .manipulation import reshape

        return return_types.mode(reshape(x, ()), zeros((), dtype=idt, device=dev))
    ax = normalize_axis(dim, x.ndim, "mode")
    n = x.shape[ax]
    if n == 0:
        raise ValueError(f"mode(): cannot take the mode along dim {dim} of size 0 (shape "
                         f"{x.shape})")
    dt = x._data
    perm = xp.moveaxis(xp.argsort(dt, axis=ax, stable=True), ax, -1)
    s = xp.moveaxis(xp.take_along_axis(dt, xp.moveaxis(perm, -1, ax), axis=ax), ax, -1)
    lead = s.shape[:-1]
    first = xp.ones((*lead, 1), dtype=xp.bool, device=dev.backend.native_device(dev.index))
    starts = xp.concat([first, s[..., 1:] != s[..., :-1]], axis=-1)  # a run begins here
    runs = xp.cumulative_sum(xp.astype(starts, idt), axis=-1) - 1  # run number per element
    begin = xp.argsort(xp.astype(starts, xp.int32), axis=-1, descending=True, stable=True)
    run_start = xp.take_along_axis(begin, runs, axis=-1)  # where each element's run begins
    pos = xp.arange(n, dtype=idt, device=dev.backend.native_device(dev.index))
    length = pos - run_start  # elements of the run so far, minus one
    end = xp.argmax(length, axis=-1, keepdims=True)  # the first longest run's last element
    idx = new(xp.moveaxis(xp.take_along_axis(perm, end, axis=-1), -1, ax), dev)
    values = take_along_axis(x, idx, axis=ax)
    if not keepdim:
        values, idx = squeeze(values, axis=ax), squeeze(idx, axis=ax)
    return return_types.mode(values, idx)


# autocast's float32 list: float16/bfloat16 inputs run in float32 inside autocast regions
def _autocast_float32() -> None:
    from .. import _autocast

    g = globals()
    for name in ("sum", "prod", "mean", "cumulative_sum", "cumulative_prod"):
        g[name] = _autocast.float32_unary(g[name])


_autocast_float32()
