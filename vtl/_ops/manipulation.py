"""Manipulation functions: reshape, permute_dims, expand_dims, squeeze, concat,
stack, unstack, flip, roll, broadcast_to, broadcast_arrays, broadcast_shapes,
moveaxis, repeat, tile.

Results are views of the input wherever the backend gives views (reshape of
contiguous data, permute_dims, moveaxis, expand_dims, squeeze, flip,
broadcast_to, unstack). Joining tensors of different dtypes (concat, stack)
applies :func:`vtl.result_type`; the gradient of each input is cast back to
its own dtype.
"""

from __future__ import annotations

from typing import Any

from .._tensor import Tensor
from ..backends._dtypes import kind as _dkind
from ._aliases import torch_names
from ._core import needs_grad, new, record, record_multi, same_device, sum_to, tensor_arg
from .views import maybe_view

__all__ = [
    "broadcast_arrays", "broadcast_shapes", "broadcast_to", "concat", "expand_dims", "flip",
    "moveaxis", "permute_dims", "repeat", "reshape", "roll", "squeeze", "stack", "tile",
    "unstack",
]


# -- helpers ------------------------------------------------------------------
def _int(v: Any, fname: str, what: str) -> int:
    if type(v) is int:
        return v
    if isinstance(v, bool) or not hasattr(v, "__index__"):
        raise TypeError(f"{fname}(): {what} must be an int, got {type(v).__name__}")
    return v.__index__()


def _axis(axis: Any, ndim: int, fname: str) -> int:
    """``axis`` in ``[0, ndim)``; ``IndexError`` as NumPy when out of range."""
    a = _int(axis, fname, "axis")
    if not -ndim <= a < ndim:
        raise IndexError(f"{fname}(): axis {a} is out of bounds for a {ndim}-D tensor")
    return a % ndim


def _axes(axis: Any, ndim: int, fname: str, what: str = "axis") -> tuple[int, ...]:
    """Distinct normalised axes from an int or a sequence of ints."""
    if type(axis) is int and 0 <= axis < ndim:
        return (axis,)
    seq = (axis,) if not isinstance(axis, (tuple, list)) else tuple(axis)
    out = tuple(_axis(a, ndim, fname) for a in seq)
    if len(set(out)) != len(out):
        raise ValueError(f"{fname}(): repeated axis in {what} {tuple(seq)}")
    return out


def _shape(shape: Any, fname: str) -> tuple[int, ...]:
    if type(shape) is tuple:
        for s in shape:
            if type(s) is not int:
                break
        else:
            return shape
    if isinstance(shape, int) and not isinstance(shape, bool):
        return (shape,)
    try:
        return tuple(_int(s, fname, "shape entries") for s in shape)
    except TypeError:
        raise TypeError(f"{fname}(): shape must be a tuple of ints, got {shape!r}") from None


def _joined(arrays: Any, fname: str) -> tuple[tuple[Tensor, ...], Any, list[Any]]:
    """Check the tensors of concat/stack; their device and raw data in the common dtype."""
    if not isinstance(arrays, (tuple, list)):
        raise TypeError(
            f"{fname}() expects a tuple or list of tensors, got {type(arrays).__name__}"
        )
    if not arrays:
        raise ValueError(f"{fname}() needs at least one tensor")
    ts = tuple(arrays)
    t0 = ts[0]
    if not isinstance(t0, Tensor):
        tensor_arg(t0, fname, "arrays")
    dev = t0._device
    dt = t0._data.dtype
    raws = []
    mixed = False
    for t in ts:
        if not isinstance(t, Tensor):
            tensor_arg(t, fname, "arrays")
        if t._device is not dev:
            same_device(fname, ts)
        r = t._data
        if r.dtype != dt:
            mixed = True
        raws.append(r)
    if mixed:
        from .dtype_functions import result_type

        dt = result_type(*ts)
        xp = dev.xp
        raws = [r if r.dtype == dt else xp.astype(r, dt) for r in raws]
    return ts, dev, raws


# -- shapes and views -----------------------------------------------------------
def reshape(x: Tensor, /, shape: tuple[int, ...], *, copy: bool | None = None) -> Tensor:
    """Give ``x`` a new shape (one ``-1`` is inferred); a view when possible.

    ``copy=False`` raises ``ValueError`` when a view is impossible.

    Args:
        x: The input tensor.
        shape: The new shape (one entry may be -1).
        copy: ``False`` forbids a copy, ``True`` forces one, ``None`` copies only when a view is
            impossible.

    Returns:
        The reshaped tensor.

    Raises:
        ValueError: If the sizes do not match, or ``copy=False`` and a view is impossible.
    """
    x = tensor_arg(x, "reshape")
    dev = x._device
    shape = _shape(shape, "reshape")
    if shape and min(shape) < 0 and (min(shape) < -1 or shape.count(-1) > 1):  # NumPy took -2
        raise ValueError(f"reshape(): cannot reshape a tensor of shape {x.shape} to {shape}: "
                         "sizes must be at least 0, with at most one -1 to infer")
    try:
        out = dev.xp.reshape(x._data, shape, copy=copy)
    except (ValueError, AttributeError) as exc:  # CuPy reports copy=False as AttributeError
        raise ValueError(f"reshape(): cannot reshape a tensor of shape {x.shape} to {shape}: "
                         f"{exc}") from None
    src_shape = x.shape
    if needs_grad(x):
        t = record(out, dev, "ReshapeBackward", (x,), lambda g, _: reshape(g, src_shape))
    else:
        t = new(out, dev)
    return maybe_view(t, x, "reshape", (shape, src_shape))


@torch_names(dims="axes")
def permute_dims(x: Tensor, /, axes: tuple[int, ...]) -> Tensor:
    """Permute the axes of ``x`` (a view).

    Args:
        x: The input tensor.
        axes: A permutation of ``range(x.ndim)``.
        dims: PyTorch's name for ``axis`` (give one of the two).

    Returns:
        A view.

    Raises:
        TypeError: If ``axes`` is not a tuple of ints, or a parameter is given under both of its
            names.
        ValueError: If ``axes`` is not a permutation.
    """
    x = tensor_arg(x, "permute_dims")
    if not isinstance(axes, (tuple, list)):
        raise TypeError(f"permute_dims(): axes must be a tuple of ints, got {axes!r}")
    if len(axes) != x.ndim:
        raise ValueError(
            f"permute_dims(): axes {tuple(axes)} do not match a {x.ndim}-D tensor"
        )
    if sorted(axes) != list(range(x.ndim)) or type(axes) is not tuple:
        axes = _axes(axes, x.ndim, "permute_dims", "axes")
    dev = x._device
    out = dev.xp.permute_dims(x._data, axes)
    if needs_grad(x):
        inv = tuple(sorted(range(len(axes)), key=axes.__getitem__))
        t = record(out, dev, "PermuteBackward", (x,), lambda g, _: permute_dims(g, inv))
    else:
        t = new(out, dev)
    return maybe_view(t, x, "permute", axes)


def moveaxis(x: Tensor, source: int | tuple[int, ...], destination: int | tuple[int, ...],
             /) -> Tensor:
    """Move axes ``source`` to positions ``destination`` (a view).

    Args:
        x: The input tensor.
        source: The axes to move.
        destination: Their new positions.

    Returns:
        A view.

    Raises:
        ValueError: If ``source`` and ``destination`` differ in length or repeat an axis.
    """
    x = tensor_arg(x, "moveaxis")
    n = x.ndim
    src = _axes(source, n, "moveaxis", "source")
    dst = _axes(destination, n, "moveaxis", "destination")
    if len(src) != len(dst):
        raise ValueError(
            f"moveaxis(): source {source} and destination {destination} must have the same "
            "number of elements"
        )
    order = [a for a in range(n) if a not in src]
    for d, s in sorted(zip(dst, src, strict=True)):
        order.insert(d, s)
    return permute_dims(x, tuple(order))


@torch_names(dim="axis")
def expand_dims(x: Tensor, /, axis: int | tuple[int, ...]) -> Tensor:
    """Insert a size-one axis at ``axis`` (in ``[-N-1, N]``); a view.

    A tuple of axes (positions in the result, as NumPy) is accepted as an extension.

    Args:
        x: The input tensor.
        axis: Position of the new axis, in ``[-N-1, N]`` (or a tuple).
        dim: PyTorch's name for ``axis`` (give one of the two).

    Returns:
        A view with the new axis.

    Raises:
        TypeError: If a parameter is given under both of its names.
    """
    x = tensor_arg(x, "expand_dims")
    n_new = len(axis) if isinstance(axis, (tuple, list)) else 1
    axes = _axes(axis, x.ndim + n_new, "expand_dims")
    shape = list(x.shape)
    for a in sorted(axes):
        shape.insert(a, 1)
    dev = x._device
    out = dev.xp.reshape(x._data, tuple(shape))
    src = x.shape
    if needs_grad(x):
        t = record(out, dev, "ExpandDimsBackward", (x,), lambda g, _: reshape(g, src))
    else:
        t = new(out, dev)
    return maybe_view(t, x, "expand_dims", (axes, src))


@torch_names(dim="axis")
def squeeze(x: Tensor, /, axis: int | tuple[int, ...]) -> Tensor:
    """Remove the size-one axes ``axis``; ``ValueError`` if one has another size.

    Args:
        x: The input tensor.
        axis: The size-one axes to remove.
        dim: PyTorch's name for ``axis`` (give one of the two).

    Returns:
        A view.

    Raises:
        ValueError: If an axis does not have size one.
        TypeError: If a parameter is given under both of its names.
    """
    x = tensor_arg(x, "squeeze")
    axes = _axes(axis, x.ndim, "squeeze")
    shape = x.shape
    for a in axes:
        if shape[a] != 1:
            raise ValueError(
                f"squeeze(): cannot remove axis {a} of size {shape[a]} (shape {shape}); "
                "only size-one axes can be squeezed"
            )
    dev = x._device
    out = dev.xp.squeeze(x._data, axis=axes)
    if needs_grad(x):
        t = record(out, dev, "SqueezeBackward", (x,), lambda g, _: reshape(g, shape))
    else:
        t = new(out, dev)
    return maybe_view(t, x, "squeeze", (axes, shape))


def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The shape that broadcasting ``shapes`` together gives (``ValueError`` if none).

    Args:
        *shapes: Shapes (tuples of ints).

    Returns:
        The broadcast shape.

    Raises:
        ValueError: If a shape has a negative size or the shapes do not broadcast.
    """
    ts = [_shape(s, "broadcast_shapes") for s in shapes]
    nd = max((len(s) for s in ts), default=0)
    out = [1] * nd
    for s in ts:
        off = nd - len(s)
        for i, d in enumerate(s):
            if d < 0:
                raise ValueError(f"broadcast_shapes(): negative dimension in shape {s}")
            cur = out[off + i]
            if d != 1:
                if cur != 1 and cur != d:
                    raise ValueError(
                        "broadcast_shapes(): shapes "
                        + ", ".join(str(t) for t in ts) + " cannot be broadcast together"
                    )
                out[off + i] = d
    return tuple(out)


def broadcast_to(x: Tensor, /, shape: tuple[int, ...]) -> Tensor:
    """Broadcast ``x`` to ``shape`` (a read-only view).

    Args:
        x: The input tensor.
        shape: The target shape.

    Returns:
        A read-only view.

    Raises:
        ValueError: If ``x`` does not broadcast to ``shape``.
    """
    x = tensor_arg(x, "broadcast_to")
    dev = x._device
    shape = _shape(shape, "broadcast_to")
    try:
        ok = len(shape) >= x.ndim and broadcast_shapes(x.shape, shape) == shape
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"broadcast_to(): cannot broadcast shape {x.shape} to {shape}")
    out = dev.xp.broadcast_to(x._data, shape)
    if needs_grad(x):
        return record(out, dev, "BroadcastBackward", (x,), lambda g, _: sum_to(g, x))
    return new(out, dev)


def broadcast_arrays(*arrays: Tensor) -> list[Tensor]:
    """Broadcast tensors against each other (read-only views); a list, as the standard.

    Args:
        *arrays: The tensors.

    Returns:
        A list of views.

    Raises:
        ValueError: If the shapes do not broadcast.
    """
    ts = [tensor_arg(a, "broadcast_arrays", "arrays") for a in arrays]
    if not ts:
        return []
    same_device("broadcast_arrays", ts)
    try:
        shape = broadcast_shapes(*(t.shape for t in ts))
    except ValueError:
        raise ValueError(
            "broadcast_arrays(): shapes " + ", ".join(str(t.shape) for t in ts)
            + " cannot be broadcast together"
        ) from None
    return [broadcast_to(t, shape) for t in ts]


# -- joining and splitting ----------------------------------------------------------
@torch_names(dim="axis")
def concat(arrays: tuple[Tensor, ...] | list[Tensor], /, *, axis: int | None = 0) -> Tensor:
    """Join tensors along an existing axis (flattened first when ``axis=None``).

    Args:
        arrays: The tensors (same shape but along ``axis``).
        axis: The axis to join along (``None``: flatten first).
        dim: PyTorch's name for ``axis`` (give one of the two).

    Returns:
        The joined tensor.

    Raises:
        ValueError: If a tensor is 0-d or the shapes do not fit.
        TypeError: If a parameter is given under both of its names.
    """
    ts, dev, raws = _joined(arrays, "concat")
    xp = dev.xp
    if axis is None:
        raws = [xp.reshape(r, (-1,)) for r in raws]
        ax = 0
    else:
        nd = ts[0].ndim
        if nd == 0:
            raise ValueError("concat(): 0-d tensors cannot be concatenated; use stack")
        ax = _axis(axis, nd, "concat")
        s0 = raws[0].shape
        for i, r in enumerate(raws[1:], 1):
            s = r.shape
            if len(s) != nd or (s[:ax] != s0[:ax] or s[ax + 1:] != s0[ax + 1:]):
                raise ValueError(
                    f"concat(): tensor {i} has shape {s} but tensor 0 has shape {s0}; all "
                    f"dimensions except axis {ax} must match"
                )
    out = xp.concat(raws, axis=ax)
    if needs_grad(*ts):
        sizes = [r.shape[ax] for r in raws]

        def vjp(g: Tensor, _: Any) -> tuple:
            res = []
            start = 0
            for t, n in zip(ts, sizes, strict=True):
                gi = None
                if t._requires_grad:
                    gi = g[(slice(None),) * ax + (slice(start, start + n),)]
                    if axis is None:
                        gi = reshape(gi, t.shape)
                    gi = sum_to(gi, t)
                res.append(gi)
                start += n
            return tuple(res)

        return record(out, dev, "ConcatBackward", ts, vjp)
    return new(out, dev)


@torch_names(dim="axis")
def stack(arrays: tuple[Tensor, ...] | list[Tensor], /, *, axis: int = 0) -> Tensor:
    """Join same-shaped tensors along a new axis ``axis`` (in ``[-N-1, N]``).

    Args:
        arrays: Same-shaped tensors.
        axis: Position of the new axis.
        dim: PyTorch's name for ``axis`` (give one of the two).

    Returns:
        The stacked tensor.

    Raises:
        ValueError: If the shapes differ.
        IndexError: If ``axis`` is out of range.
        TypeError: If a parameter is given under both of its names.
    """
    ts, dev, raws = _joined(arrays, "stack")
    s0 = ts[0].shape
    for i, t in enumerate(ts[1:], 1):
        if t.shape != s0:
            raise ValueError(
                f"stack(): all tensors must have the same shape; tensor 0 has shape {s0} "
                f"and tensor {i} has shape {t.shape}"
            )
    ax = _axis(axis, len(s0) + 1, "stack")
    out = dev.xp.stack(raws, axis=ax)
    if needs_grad(*ts):
        def vjp(g: Tensor, _: Any) -> tuple:
            lead = (slice(None),) * ax
            return tuple(
                sum_to(g[(*lead, i)], t) if t._requires_grad else None
                for i, t in enumerate(ts)
            )

        return record(out, dev, "StackBackward", ts, vjp)
    return new(out, dev)


@torch_names(dim="axis")
def unstack(x: Tensor, /, *, axis: int = 0) -> tuple[Tensor, ...]:
    """Split ``x`` along ``axis`` into a tuple of views.

    Args:
        x: The input tensor.
        axis: The axis to split.
        dim: PyTorch's name for ``axis`` (give one of the two).

    Returns:
        A tuple of views.

    Raises:
        ValueError: If ``x`` is 0-d.
        TypeError: If a parameter is given under both of its names.
    """
    x = tensor_arg(x, "unstack")
    if x.ndim == 0:
        raise ValueError("unstack() needs a tensor with at least one dimension, got a 0-d one")
    ax = _axis(axis, x.ndim, "unstack")
    dev = x._device
    outs = dev.xp.unstack(x._data, axis=ax)
    if needs_grad(x) and outs:
        part = x.shape[:ax] + x.shape[ax + 1:]
        dtype = x._data.dtype

        def vjp(gs: list, _: Any) -> Tensor:
            from .creation import zeros

            full = [zeros(part, dtype=dtype, device=dev) if g is None else g for g in gs]
            return stack(full, axis=ax)

        res = record_multi(outs, dev, "UnstackBackward", (x,), vjp)
    else:
        res = tuple(new(o, dev) for o in outs)
    lead = (slice(None),) * ax
    return tuple(maybe_view(t, x, "index", (*lead, i)) for i, t in enumerate(res))


# -- reordering ------------------------------------------------------------------------
@torch_names(dims="axis")
def flip(x: Tensor, /, *, axis: int | tuple[int, ...] | None = None) -> Tensor:
    """Reverse the order of elements along ``axis`` (all axes by default); a view.

    Args:
        x: The input tensor.
        axis: An axis, a tuple of axes, or ``None`` for all (the flattened tensor).
        dims: PyTorch's name for ``axis`` (give one of the two).

    Returns:
        A view.

    Raises:
        TypeError: If a parameter is given under both of its names.
    """
    x = tensor_arg(x, "flip")
    axes = tuple(range(x.ndim)) if axis is None else _axes(axis, x.ndim, "flip")
    dev = x._device
    out = dev.xp.flip(x._data, axis=axes) if axes else x._data
    if needs_grad(x):
        t = record(out, dev, "FlipBackward", (x,), lambda g, _: flip(g, axis=axes))
    else:
        t = new(out, dev)
    return maybe_view(t, x, "flip", axes)


@torch_names(shifts="shift", dims="axis")
def roll(x: Tensor, /, shift: int | tuple[int, ...], *,
         axis: int | tuple[int, ...] | None = None) -> Tensor:
    """Shift elements cyclically along ``axis`` (the flattened tensor when ``None``).

    Repeated axes add their shifts, as in NumPy.

    Args:
        x: The input tensor.
        shift: The shift (an int, or a tuple with ``axis``).
        axis: An axis, a tuple of axes, or ``None`` (the flattened tensor).
        shifts: PyTorch's name for ``shift`` (give one of the two).
        dims: PyTorch's name for ``axis`` (give one of the two).

    Returns:
        The rolled tensor.

    Raises:
        ValueError: If ``shift`` and ``axis`` do not fit together.
        TypeError: If a parameter is given under both of its names.
    """
    x = tensor_arg(x, "roll")
    shift_t = isinstance(shift, (tuple, list))
    shifts = tuple(_int(s, "roll", "shift") for s in shift) if shift_t \
        else (_int(shift, "roll", "shift"),)
    dev = x._device
    if axis is None:
        if shift_t:
            raise ValueError("roll(): a tuple shift needs a tuple axis of the same length")
        ax: Any = None
        sh: Any = shifts[0]
    else:
        axes = tuple(_axis(a, x.ndim, "roll") for a in
                     (axis if isinstance(axis, (tuple, list)) else (axis,)))
        if shift_t and len(shifts) != len(axes):
            raise ValueError(
                f"roll(): shift {tuple(shift)} and axis {tuple(axes)} must have the same length"
            )
        if not shift_t:
            shifts = shifts * len(axes)
        ax = axes
        sh = shifts
    out = dev.xp.roll(x._data, sh, axis=ax)
    if needs_grad(x):
        back = -sh if ax is None else tuple(-s for s in sh)
        return record(out, dev, "RollBackward", (x,), lambda g, _: roll(g, back, axis=ax))
    return new(out, dev)


# -- repetition ------------------------------------------------------------------------
@torch_names(dim="axis")
def repeat(x: Tensor, repeats: int | Tensor, /, *, axis: int | None = None) -> Tensor:
    """Repeat each element ``repeats`` times along ``axis`` (of the flattened tensor when
    ``None``). ``repeats`` is an int or a 1-D integer tensor of length 1 or
    ``x.shape[axis]``; a tensor makes the output shape data-dependent (a device sync).

    Args:
        x: The input tensor.
        repeats: An int, or a 1-D integer tensor (length 1 or ``x.shape[axis]``).
        axis: The axis (``None``: the flattened tensor).
        dim: PyTorch's name for ``axis`` (give one of the two).

    Returns:
        The repeated tensor.

    Raises:
        ValueError: If ``repeats`` is negative or of the wrong length, or the tensors are on
            different devices.
        TypeError: If ``repeats`` is not of an integer dtype, or a parameter is given under both of
            its names.
    """
    x = tensor_arg(x, "repeat")
    dev = x._device
    xp = dev.xp
    raw = x._data
    if axis is None:
        raw = xp.reshape(raw, (-1,))
        ax = 0
    else:
        ax = _axis(axis, x.ndim, "repeat")
    m = raw.shape[ax]
    if isinstance(repeats, Tensor):
        if repeats._device is not dev:
            from ._core import mixed_devices

            raise mixed_devices("repeat", dev, repeats._device)
        if _dkind(repeats._data.dtype) not in "iu":
            raise TypeError(f"repeat(): repeats must have an integer dtype, got {repeats.dtype}")
        if repeats.ndim > 1 or (repeats.ndim == 1 and repeats.shape[0] not in (1, m)):
            raise ValueError(
                f"repeat(): repeats of shape {repeats.shape} does not match the {m} elements "
                "along the axis; expected shape (1,) or "
                f"({m},)"
            )
        reps: Any = int(repeats.item()) if repeats.size == 1 else repeats
    else:
        reps = _int(repeats, "repeat", "repeats")
    if isinstance(reps, int) and reps < 0:
        raise ValueError(f"repeat(): repeats must be non-negative, got {reps}")
    try:
        out = xp.repeat(raw, _index_data(reps) if isinstance(reps, Tensor) else reps, axis=ax)
    except ValueError as exc:
        raise ValueError(f"repeat(): {exc}") from None
    if needs_grad(x):
        def vjp(g: Tensor, _: Any) -> Tensor:
            from .statistical import sum as vsum

            if isinstance(reps, int):
                s = g.shape
                g = vsum(reshape(g, s[:ax] + (m, reps) + s[ax + 1:]), axis=ax + 1)
            else:
                g = moveaxis(_segment_sum(moveaxis(g, ax, 0), reps), 0, ax)
            return reshape(g, x.shape) if axis is None else g

        return record(out, dev, "RepeatBackward", (x,), vjp)
    return new(out, dev)


def _index_dtype(dev: Any) -> Any:
    return dev.backend.default_dtypes(dev.index)["indexing"]


def _index_data(t: Tensor) -> Any:
    """Raw data of an integer tensor in the device's index dtype."""
    dt = _index_dtype(t._device)
    return t._data if t._data.dtype == dt else t._device.xp.astype(t._data, dt)


def _segment_sum(g: Tensor, reps: Tensor) -> Tensor:
    """Sum consecutive rows of ``g``: ``reps[i]`` rows go to row ``i`` (repeat's adjoint)."""
    dev = g._device
    xp = dev.xp
    m = reps.shape[0]
    nat = dev.backend.native_device(dev.index)
    target = xp.zeros((m, *g.shape[1:]), dtype=g._data.dtype, device=nat)
    idx = xp.repeat(xp.arange(m, dtype=_index_dtype(dev), device=nat), _index_data(reps))
    out = dev.backend.scatter_add(target, idx, g._data)
    if needs_grad(g):
        return record(out, dev, "SegmentSumBackward", (g,),
                      lambda h, _: repeat(h, reps, axis=0))
    return new(out, dev)


def tile(x: Tensor, repetitions: tuple[int, ...], /) -> Tensor:
    """Repeat the whole of ``x`` ``repetitions[i]`` times along each axis.

    Args:
        x: The input tensor.
        repetitions: Repetitions per axis.

    Returns:
        The tiled tensor.

    Raises:
        ValueError: If a repetition is negative.
    """
    x = tensor_arg(x, "tile")
    reps = _shape(repetitions, "tile")
    if any(r < 0 for r in reps):
        raise ValueError(f"tile(): repetitions must be non-negative, got {reps}")
    dev = x._device
    out = dev.xp.tile(x._data, reps)
    if needs_grad(x):
        d = max(x.ndim, len(reps))
        s = (1,) * (d - x.ndim) + x.shape
        r = (1,) * (d - len(reps)) + reps

        def vjp(g: Tensor, _: Any) -> Tensor:
            from .statistical import sum as vsum

            if d == 0:
                return g
            inter = tuple(v for pair in zip(r, s, strict=True) for v in pair)
            g = vsum(reshape(g, inter), axis=tuple(range(0, 2 * d, 2)))
            return reshape(g, x.shape)

        return record(out, dev, "TileBackward", (x,), vjp)
    return new(out, dev)

