"""linear, bilinear, embedding, embedding_bag, one_hot, pad and the dropout family."""

from __future__ import annotations

import math
import operator
from functools import partial
from typing import Any

from ... import _autocast
from ..._ops._core import _grad, needs_grad, new, raw_matmul, record
from ..._tensor import Tensor
from ...backends._base import index_error
from ...backends._dtypes import kind as _dkind
from ._utils import apply_inplace, detach, low_float, namespace

__all__ = [
    "alpha_dropout", "bilinear", "dropout", "dropout1d", "dropout2d", "dropout3d",
    "embedding", "embedding_bag", "feature_alpha_dropout", "linear", "linear_relu", "one_hot",
    "pad",
]


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(x.shape)


def linear(input: Any, weight: Any, bias: Any = None) -> Any:  # noqa: A002
    """``input @ weight.T + bias`` with ``weight`` of shape ``(out, in)``.

    On real floating vtl tensors of one dtype and device with a 2-D ``weight``,
    this is one recorded node (``LinearBackward``).

    Args:
        input: The input, ``(*, in)``.
        weight: The weight, ``(out, in)`` (or ``(in,)``).
        bias: An optional bias, ``(out,)``.

    Returns:
        A tensor of shape ``(*, out)``.

    Raises:
        ValueError: If ``weight`` is not 1-D or 2-D or the shapes do not match.
    """
    if input.__class__ is Tensor or isinstance(input, Tensor):
        res = _linear_tensor(input, weight, bias)
        if res is not None:
            return res
    xp = namespace(input, weight, bias)
    if weight.ndim not in (1, 2):
        raise ValueError(f"linear(): weight must be 1-D or 2-D, got shape {_shape(weight)}")
    fan_in = weight.shape[-1]
    if input.ndim == 0 or input.shape[-1] != fan_in:
        raise ValueError(
            f"linear(): input of shape {_shape(input)} does not match weight of shape "
            f"{_shape(weight)} (expected the last input axis to have size {fan_in})"
        )
    w = xp.matrix_transpose(weight) if weight.ndim == 2 else weight
    out = xp.matmul(input, w)
    if bias is not None:
        out = out + bias
    return out


def linear_relu(input: Any, weight: Any, bias: Any = None) -> Any:  # noqa: A002
    """``relu(linear(input, weight, bias))`` as one op: the same values and gradients.

    On real floating vtl tensors of one dtype and device with a 2-D ``weight`` it is one
    recorded node (``LinearReluBackward``), and the GPU backends apply the ReLU in the
    product's epilogue (one launch where ``linear`` and ``relu`` take two). The node
    keeps the output, not the product before the ReLU, for its backward (as PyTorch's
    ``relu`` does): an in-place change to the output before ``backward`` raises.
    ``nn.Sequential`` runs a ``Linear`` followed by a ``ReLU`` through it, and so do the
    Transformer layers' feed-forward blocks with ``activation="relu"``.

    Args:
        input: The input, ``(*, in)``.
        weight: The weight, ``(out, in)`` (or ``(in,)``).
        bias: An optional bias, ``(out,)``.

    Returns:
        A tensor of shape ``(*, out)``.

    Raises:
        ValueError: If ``weight`` is not 1-D or 2-D or the shapes do not match.
    """
    if input.__class__ is Tensor or isinstance(input, Tensor):
        res = _linear_tensor(input, weight, bias, relu=True)
        if res is not None:
            return res
    from .activation import relu

    return relu(linear(input, weight, bias))


def _linear_tensor(x: Tensor, w: Any, b: Any, relu: bool = False) -> Tensor | None:
    """The fused linear op (with ``relu``, followed by a ReLU), or ``None`` when the
    arguments need the general path."""
    if not isinstance(w, Tensor) or not (b is None or isinstance(b, Tensor)):
        return None
    xd, wd = x._data, w._data
    dev = x._device
    dt = xd.dtype
    if wd.ndim != 2 or xd.ndim == 0 or _dkind(dt) != "f" or wd.dtype != dt \
            or w._device is not dev or xd.shape[-1] != wd.shape[1]:
        return None
    if b is not None:
        bd = b._data
        if b._device is not dev or bd.dtype != dt or bd.shape not in ((wd.shape[0],), ()):
            return None
    xp = dev.xp
    x2 = xd if xd.ndim == 2 else xp.reshape(xd, (-1, wd.shape[1]))
    kern = dev.backend.kernel("linear")  # the backend's fused matmul + bias (+ ReLU)
    bias = None if b is None else bd
    out = None
    if kern is not None and relu:
        out = kern(x2, wd, bias, relu=True)
    if out is None:
        out = None if kern is None else kern(x2, wd, bias)
        if out is None:
            out = raw_matmul(dev, x2, wd.T)
            if b is not None:
                out += bd  # out is a fresh array (a backend without in-place add rebinds it)
        if relu:
            out = xp.maximum(out, 0)
    if xd.ndim != 2:
        out = xp.reshape(out, xd.shape[:-1] + (wd.shape[0],))
    if _grad.enabled and (x._requires_grad or w._requires_grad
                          or (b is not None and b._requires_grad)):
        if relu:
            return record(out, dev, "LinearReluBackward", (x, w, b),
                          partial(_linear_relu_vjp, x, w, b), (x, w), save_output=True)
        return record(out, dev, "LinearBackward", (x, w, b), partial(_linear_vjp, x, w, b),
                      (x, w), raw=_linear_raw)
    return new(out, dev)


def _linear_relu_vjp(x: Tensor, w: Tensor, b: Tensor | None, g: Tensor, out: Tensor
                     ) -> tuple:
    from .activation import _relu_vjp

    # relu's mask from its output: out <= 0 exactly where the product was (nan passes)
    return _linear_vjp(x, w, b, _relu_vjp(out, g, None), None)


def _linear_plain(x: Tensor, w: Tensor, b: Tensor | None, gd: Any) -> tuple:
    """The raw gradients ``(gx, gw, gb)`` (``None`` where not needed) of ``linear`` for the
    raw output gradient ``gd``: the backend's ``linear`` and ``linear_grad_weight`` kernels
    where it has them."""
    gx = gw = gb = None
    n_out, n_in = w.shape
    dev = x._device
    xp = dev.xp
    xd = x._data
    if gd.ndim != 2:
        gd = xp.reshape(gd, (-1, n_out))
        xd = xp.reshape(xd, (-1, n_in))
    if x._requires_grad:
        lin = dev.backend.kernel("linear")  # g @ w is linear(g, w.T) = g @ w.T.T
        r = None if lin is None else lin(gd, w._data.T, None)
        if r is None:
            r = raw_matmul(dev, gd, w._data)
        gx = r if r.shape == x._data.shape else xp.reshape(r, x._data.shape)
    want_b = b is not None and b._requires_grad
    kern = dev.backend.kernel("linear_grad_weight") if w._requires_grad else None
    res = None if kern is None else kern(gd, xd, want_b and b._data.ndim == 1)
    if res is not None:  # the backend's fused g.T @ x (+ column sums of g)
        gw, gb = res
    elif w._requires_grad:
        gw = raw_matmul(dev, gd.T, xd)
    if want_b and gb is None:
        r = dev._backend.sum_axes(gd, 0)
        gb = r if b._data.ndim else xp.sum(r)
    return gx, gw, gb


def _linear_raw(vjp: Any, gd: Any) -> tuple:
    """Plain backward's rule on raw arrays (the arguments of ``vjp``, the partial of
    :func:`_linear_vjp`)."""
    x, w, b = vjp.args
    return _linear_plain(x, w, b, gd)


def _linear_vjp(x: Tensor, w: Tensor, b: Tensor | None, g: Tensor, _: Any) -> tuple:
    if not _grad.enabled:  # plain backward: raw arrays
        dev = g._device
        return tuple(None if d is None else new(d, dev)
                     for d in _linear_plain(x, w, b, g._data))
    import vtl

    gx = gw = gb = None
    n_out, n_in = w.shape
    g2, x2 = g, x
    if g.ndim != 2:
        g2 = vtl.reshape(g, (-1, n_out))
        x2 = vtl.reshape(x, (-1, n_in))
    if x._requires_grad:
        gx = vtl.matmul(g2, w)
        if x.ndim != 2:
            gx = vtl.reshape(gx, x.shape)
    if w._requires_grad:
        gw = vtl.matmul(vtl.matrix_transpose(g2), x2)
    if b is not None and b._requires_grad:
        gb = vtl.sum(g2, axis=0)
        if b.ndim == 0:
            gb = vtl.sum(gb)
    return gx, gw, gb


def bilinear(input1: Any, input2: Any, weight: Any, bias: Any = None) -> Any:
    """``y_k = x1^T W_k x2 + b_k`` with ``weight`` of shape ``(out, in1, in2)``.

    Args:
        input1: The first input, ``(*, in1)``.
        input2: The second input, ``(*, in2)``.
        weight: The weight, ``(out, in1, in2)``.
        bias: An optional bias, ``(out,)``.

    Returns:
        A tensor of shape ``(*, out)``.

    Raises:
        ValueError: If the shapes do not match.
    """
    xp = namespace(input1, input2, weight, bias)
    if weight.ndim != 3 or input1.shape[-1] != weight.shape[1] \
            or input2.shape[-1] != weight.shape[2] or input1.shape[:-1] != input2.shape[:-1]:
        raise ValueError(
            f"bilinear(): inputs of shapes {_shape(input1)} and {_shape(input2)} do not match "
            f"weight of shape {_shape(weight)} (out, in1, in2)"
        )
    # (..., in1) x (out, in1, in2) -> (..., out, in2), then contract in2
    t = xp.tensordot(input1, weight, axes=([input1.ndim - 1], [1]))
    out = xp.sum(t * xp.expand_dims(input2, axis=-2), axis=-1)
    if bias is not None:
        out = out + bias
    return out


# -- embedding / one_hot --------------------------------------------------------------------
def embedding(input: Any, weight: Any, padding_idx: int | None = None,  # noqa: A002
              max_norm: float | None = None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Any:
    """Rows of ``weight`` at the integer indices ``input``: shape ``input.shape + (dim,)``.

    Every index must lie in ``[0, num_embeddings)``: a negative index is an ``IndexError``
    like one past the end (as PyTorch; NumPy-style wrapping from the end does not apply).
    On a GPU the indices are checked on the device and the error is raised at the thread's
    next read of a result. ``padding_idx`` itself may be negative: it counts from the end
    (``-1`` is row ``num_embeddings - 1``).

    The gradient is a scatter-add into ``weight`` (repeated indices accumulate);
    rows at ``padding_idx`` get no gradient. ``scale_grad_by_freq`` divides the
    gradient of each row by how often its index occurs in ``input``. ``max_norm``
    renormalises, in place and outside the graph, the referenced rows whose
    ``norm_type``-norm exceeds it (as PyTorch does). ``sparse=True`` (sparse
    gradients) is not supported.

    Args:
        input: Integer indices of the rows, in ``[0, num_embeddings)``.
        weight: The embedding matrix, ``(num_embeddings, dim)``.
        padding_idx: A row that gets no gradient (negative values count from the end).
        max_norm: Renormalise each looked-up row whose norm exceeds this (in place, in ``weight``).
        norm_type: The p of the p-norm for ``max_norm``.
        scale_grad_by_freq: Divide each row's gradient by its index's frequency in ``input``.
        sparse: Must be ``False``: vtl has no sparse gradients.

    Returns:
        A tensor of shape ``input.shape + (dim,)``.

    Raises:
        NotImplementedError: If ``sparse=True``.
        IndexError: If an index is outside ``[0, num_embeddings)`` (negative included).
        ValueError: If ``padding_idx`` is outside ``[-num_embeddings, num_embeddings)``.
    """
    xp = namespace(input, weight)
    if sparse:
        raise NotImplementedError("embedding(): sparse gradients (sparse=True) are not "
                                  "supported; use sparse=False (dense gradients)")
    _check_table(xp, input, weight, "embedding")
    n = weight.shape[0]
    padding_idx = _padding_index(padding_idx, n, "embedding")
    flat = xp.reshape(input, (-1,))
    idx = _row_indices(xp, flat, weight, "embedding")
    if max_norm is not None:
        _renorm_rows(xp, weight, idx, flat, max_norm, norm_type)
    rows = _gather_rows(xp, weight, idx)
    if scale_grad_by_freq:
        rows = _scale_grad_by_freq(rows, weight, idx, flat)
    if padding_idx is not None:
        keep = xp.expand_dims(flat != padding_idx, axis=1)
        rows = xp.where(keep, rows, detach(rows))  # same values; no gradient to the row
    return xp.reshape(rows, _shape(input) + (weight.shape[1],))


def _check_table(xp: Any, input: Any, weight: Any, fname: str) -> None:  # noqa: A002
    if weight.ndim != 2:
        raise ValueError(f"{fname}(): weight must be 2-D (num_embeddings, embedding_dim), "
                         f"got shape {_shape(weight)}")
    if not xp.isdtype(input.dtype, "integral"):
        raise TypeError(f"{fname}(): indices must have an integer dtype, got {input.dtype}")


def _padding_index(padding_idx: int | None, n: int, fname: str) -> int | None:
    if padding_idx is None:
        return None
    if not -n <= padding_idx < n:
        raise ValueError(f"{fname}(): padding_idx {padding_idx} out of range for {n} "
                         f"embeddings")
    return padding_idx % n


def _row_indices(xp: Any, flat: Any, weight: Any, fname: str) -> Any:
    """The 1-D integer indices ``flat`` checked as rows of ``weight``: each must lie in
    ``[0, num_embeddings)``, a negative one is an ``IndexError`` too (PyTorch's rule, not
    NumPy's wrap). For vtl tensors the raw checked index array (on a GPU checked on the
    device: the error is raised at the thread's next read of a result, and a bad entry
    reads nothing); for other arrays ``flat`` itself, after reading its extremes."""
    n = weight.shape[0]
    if isinstance(weight, Tensor):
        from ..._ops.indexing import _index_tensor, _norm_index

        flat = _index_tensor(flat, weight, fname)
        return _norm_index(flat._data, n, 0, weight._device, False, f"{fname}(): ",
                           negative=False)
    if flat.shape[0]:
        mn, mx = int(xp.min(flat)), int(xp.max(flat))
        if mn < 0 or mx >= n:
            raise index_error(f"{fname}(): ", mn if mn < 0 else mx, 0, n, negative=False)
    return flat


def _gather_rows(xp: Any, weight: Any, idx: Any) -> Any:
    """The rows of ``weight`` at the indices ``idx`` of :func:`_row_indices`: ``(m, dim)``,
    with the scatter-add gradient into ``weight``."""
    if isinstance(weight, Tensor):
        from ..._ops.indexing import _take_checked

        return _take_checked(weight, idx, 0, (idx.shape[0],))
    return xp.take(weight, idx, axis=0)


def _row_index(xp: Any, idx: Any, n: int) -> Any:
    """The raw checked indices ``idx`` (:func:`_row_indices`) clipped into ``[0, n)``: an
    out-of-range index was reported by the check (on a GPU the error is raised later); the
    clip only keeps the counting scatter inside the table."""
    return xp.clip(idx, 0, n - 1)


def _row_counts(weight: Tensor, idx: Any, flat: Any) -> Any:
    """Raw ``(num_embeddings, 1)`` counts of each row in the raw checked 1-D ``idx`` (one
    scatter-add on the device), in ``weight``'s dtype. ``flat``: the indices as given; an
    entry outside ``[0, num_embeddings)`` (whose check fails: on a GPU the error comes at
    the next read) counts nothing, so ``max_norm`` renormalises no row for it."""
    dev = weight._device
    xp = dev.xp
    native = dev.backend.native_device(dev.index)
    dt = weight._data.dtype
    n = weight.shape[0]
    raw = flat._data if isinstance(flat, Tensor) else flat
    valid = xp.astype(xp.reshape((raw >= 0) & (raw < n), (-1, 1)), dt)
    z = xp.zeros((n, 1), dtype=dt, device=native)
    return dev.backend.scatter_add(z, _row_index(xp, idx, n), valid)


def _scale_grad_by_freq(rows: Any, weight: Any, idx: Any, flat: Any) -> Any:
    """``rows`` (``weight`` gathered at the checked indices ``idx``, of the given indices
    ``flat``) whose gradient is divided by the number of times each row's index occurs in
    ``flat``; the values are unchanged."""
    if not (isinstance(rows, Tensor) and needs_grad(rows)):
        return rows  # no gradient to scale
    dev = rows._device
    xp = dev.xp
    rows_idx = _row_index(xp, idx, weight.shape[0])
    counts = xp.maximum(_row_counts(weight, idx, flat), 1.0)  # 0 only where a check failed
    inv = new(1.0 / xp.take(counts, rows_idx, axis=0), dev)  # (m, 1)
    return record(rows._data, dev, "ScaleGradByFreqBackward", (rows,),
                  partial(_scale_grad_vjp, inv))


def _scale_grad_vjp(inv: Tensor, g: Tensor, _: Any) -> Tensor:
    """``g / frequency``. Under ``create_graph`` the scaled gradient passes gradients through
    unscaled, as PyTorch's double backward of ``embedding`` (the first backward did the
    scaling)."""
    dev = g._device
    out = g._data * inv._data
    if needs_grad(g):
        return record(out, dev, "ScaleGradByFreqDoubleBackward", (g,), lambda h, _: h)
    return new(out, dev)


def embedding_bag(input: Any, weight: Any, offsets: Any = None,  # noqa: A002
                  max_norm: float | None = None, norm_type: float = 2.0,
                  scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights: Any = None, include_last_offset: bool = False,
                  padding_idx: int | None = None) -> Any:
    """Sums, means or maxima of bags of rows of ``weight``, without building the
    ``(bags, bag_size, dim)`` lookup.

    ``input`` is either 2-D ``(B, N)`` (each row a bag of ``N`` indices; ``offsets``
    must be ``None``) or 1-D with 1-D ``offsets`` giving the start of each bag
    (``include_last_offset=True``: ``offsets`` has ``B + 1`` entries, the last one
    the end of the last bag). ``mode``: ``'sum'``, ``'mean'`` or ``'max'``
    (per dimension; the gradient goes to the first maximum). ``per_sample_weights``
    (``input``'s shape; ``'sum'`` only) scales each row first. Indices equal to
    ``padding_idx`` are left out of their bag (and of the mean's count); an empty bag
    gives zeros. ``scale_grad_by_freq`` divides each row's gradient by how often its
    index occurs in ``input`` (not with ``'max'``). Returns ``(B, dim)``.

    Every index must lie in ``[0, num_embeddings)``: a negative one is an ``IndexError``
    too, as in :func:`embedding` (``padding_idx`` itself may count from the end).

    Offsets are not read on the host: indices before ``offsets[0]`` (PyTorch requires
    ``offsets[0] == 0``) or after the last offset of ``include_last_offset`` belong to
    no bag.

    Args:
        input: Integer indices: 2-D ``(B, N)`` or 1-D with ``offsets``.
        weight: The embedding matrix, ``(num_embeddings, dim)``.
        offsets: 1-D start of each bag in a 1-D ``input``.
        max_norm: Renormalise each looked-up row whose norm exceeds this (in place, in ``weight``).
        norm_type: The p of the p-norm for ``max_norm``.
        scale_grad_by_freq: Divide each row's gradient by its index's frequency in ``input``.
        mode: ``'sum'``, ``'mean'`` or ``'max'``.
        sparse: Must be ``False``: vtl has no sparse gradients.
        per_sample_weights: Weights of the looked-up rows (``'sum'`` only), of ``input``'s shape.
        include_last_offset: Whether ``offsets`` has one more entry, the end of the last bag.
        padding_idx: Indices equal to it are left out of their bag (negative values count
            from the end).

    Returns:
        A tensor of shape ``(B, dim)``.

    Raises:
        NotImplementedError: If ``sparse=True``.
        IndexError: If an index is outside ``[0, num_embeddings)`` (negative included).
        ValueError: If ``mode``, the shapes or the offsets are invalid.
        TypeError: If a dtype is wrong.
    """
    xp = namespace(input, weight, offsets, per_sample_weights)
    if sparse:
        raise NotImplementedError("embedding_bag(): sparse gradients (sparse=True) are not "
                                  "supported; use sparse=False (dense gradients)")
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"embedding_bag(): mode must be 'sum', 'mean' or 'max', got {mode!r}")
    _check_table(xp, input, weight, "embedding_bag")
    if not xp.isdtype(weight.dtype, "real floating"):
        raise TypeError(f"embedding_bag(): weight must have a real floating dtype, got "
                        f"{weight.dtype}")
    if scale_grad_by_freq and mode == "max":
        raise ValueError("embedding_bag(): scale_grad_by_freq is not supported with "
                         "mode='max'")
    n_emb, dim = weight.shape
    padding_idx = _padding_index(padding_idx, n_emb, "embedding_bag")
    if per_sample_weights is not None:
        if mode != "sum":
            raise ValueError(f"embedding_bag(): per_sample_weights is only supported for "
                             f"mode='sum', got mode={mode!r}")
        if _shape(per_sample_weights) != _shape(input):
            raise ValueError(f"embedding_bag(): per_sample_weights must have the shape of "
                             f"input {_shape(input)}, got {_shape(per_sample_weights)}")
        if per_sample_weights.dtype != weight.dtype:
            raise TypeError(f"embedding_bag(): per_sample_weights must have weight's dtype "
                            f"{weight.dtype}, got {per_sample_weights.dtype}")
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("embedding_bag(): if input is 2-D (bags of equal size), offsets "
                             "must be None")
    elif input.ndim == 1:
        if offsets is None:
            raise ValueError("embedding_bag(): a 1-D input needs 1-D offsets (the start of "
                             "each bag), got None")
        if offsets.ndim != 1:
            raise ValueError(f"embedding_bag(): offsets must be 1-D, got shape "
                             f"{_shape(offsets)}")
        if not xp.isdtype(offsets.dtype, "integral"):
            raise TypeError(f"embedding_bag(): offsets must have an integer dtype, got "
                            f"{offsets.dtype}")
        if include_last_offset and offsets.shape[0] < 1:
            raise ValueError("embedding_bag(): include_last_offset=True needs at least one "
                             "offset")
    else:
        raise ValueError(f"embedding_bag(): input must be 1-D (with offsets) or 2-D (B, N), "
                         f"got shape {_shape(input)}")
    flat = xp.reshape(input, (-1,))
    idx = _row_indices(xp, flat, weight, "embedding_bag")
    if max_norm is not None:
        _renorm_rows(xp, weight, idx, flat, max_norm, norm_type)
    rows = _gather_rows(xp, weight, idx)  # (n, dim)
    if scale_grad_by_freq:
        rows = _scale_grad_by_freq(rows, weight, idx, flat)
    valid = None if padding_idx is None else flat != padding_idx
    if per_sample_weights is not None:
        rows = rows * xp.expand_dims(xp.reshape(per_sample_weights, (-1,)), axis=1)
    if input.ndim == 2:
        return _bags_2d(xp, rows, valid, _shape(input), mode)
    return _bags_1d(xp, rows, valid, flat, offsets, include_last_offset, mode)


def _bags_2d(xp: Any, rows: Any, valid: Any, shape: tuple[int, int], mode: str) -> Any:
    b, m = shape
    dim = rows.shape[1]
    rows = xp.reshape(rows, (b, m, dim))
    if valid is not None:
        valid = xp.reshape(valid, (b, m, 1))
    if mode == "max":
        if m == 0:
            return xp.zeros((b, dim), dtype=rows.dtype, device=rows.device)
        v = detach(rows)
        if valid is not None:
            v = xp.where(valid, v, -math.inf)
        arg = xp.argmax(v, axis=1, keepdims=True)  # the first maximum of each bag
        out = xp.take_along_axis(rows, arg, axis=1)[:, 0, :]
        if valid is not None:
            out = xp.where(xp.any(valid, axis=1), out, 0.0)
        return out
    if valid is not None:
        rows = xp.where(valid, rows, 0.0)
    out = xp.sum(rows, axis=1)
    if mode == "mean":
        if valid is None:
            return out / m if m else out
        count = xp.sum(xp.astype(valid, rows.dtype), axis=1)
        out = out / xp.maximum(count, 1.0)
    return out


def _segment_sum(xp: Any, values: Any, seg: Any, n_seg: int) -> Any:
    """Per segment ``s < n_seg`` the sum of the rows ``values[j]`` with ``seg[j] == s``
    (rows with ``seg[j] == n_seg`` belong to none): one scatter-add on vtl tensors, a
    one-hot matrix product on other arrays."""
    if isinstance(values, Tensor):
        from ..._ops.indexing import _scatter_rows

        raw_seg = seg._data if isinstance(seg, Tensor) else seg
        return _scatter_rows(values, raw_seg, n_seg + 1)[:n_seg, ...]
    ids = xp.arange(n_seg, dtype=seg.dtype, device=seg.device)
    onehot = xp.astype(xp.expand_dims(ids, axis=1) == xp.expand_dims(seg, axis=0), values.dtype)
    return xp.matmul(onehot, values)


def _bags_1d(xp: Any, rows: Any, valid: Any, flat: Any, offsets: Any, include_last: bool,
             mode: str) -> Any:
    n, dim = rows.shape
    n_bags = offsets.shape[0] - (1 if include_last else 0)
    if n == 0 or n_bags == 0:
        return xp.zeros((n_bags, dim), dtype=rows.dtype, device=rows.device)
    offsets = detach(offsets)
    pos = xp.arange(n, dtype=offsets.dtype, device=offsets.device)
    if isinstance(offsets, Tensor):  # the bag of each index
        bag = xp.searchsorted(offsets, pos, side="right") - 1
    else:  # (array-api-strict's searchsorted ignores the device's index dtype)
        le = xp.expand_dims(offsets, axis=0) <= xp.expand_dims(pos, axis=1)
        bag = xp.sum(xp.astype(le, offsets.dtype), axis=1, dtype=offsets.dtype) - 1
    bag = xp.where((bag < 0) | (bag >= n_bags), n_bags, bag)  # before the first / after the end
    seg = bag if valid is None else xp.where(valid, bag, n_bags)  # padding: in no bag
    fd = rows.dtype
    ones = xp.ones((n, 1), dtype=fd, device=rows.device)
    count = None
    if mode == "mean" or mode == "max" or valid is not None:
        count = _segment_sum(xp, ones, seg, n_bags)  # (n_bags, 1) members of each bag
    if mode != "max":
        out = _segment_sum(xp, rows, seg, n_bags)
        if mode == "mean":
            out = out / xp.maximum(count, 1.0)
        return out
    # max: a segmented prefix maximum (Hillis-Steele, ties kept on the left) finds the index
    # of the first maximum of each bag per dimension; one differentiable gather reads it
    v = detach(rows)
    v = xp.where(xp.expand_dims(seg < n_bags, axis=1), v, -math.inf)
    idt = seg.dtype
    arg = xp.broadcast_to(xp.expand_dims(xp.arange(n, dtype=idt, device=rows.device), axis=1),
                          (n, dim))
    step = 1
    while step < n:
        same = xp.expand_dims(bag[step:] == bag[:-step], axis=1)  # bags are contiguous
        left_v, cur_v = v[:-step, ...], v[step:, ...]
        take_left = same & (left_v >= cur_v)
        v = xp.concat([v[:step, ...], xp.where(take_left, left_v, cur_v)], axis=0)
        arg = xp.concat([arg[:step, ...], xp.where(take_left, arg[:-step, ...],
                                                   arg[step:, ...])], axis=0)
        step *= 2
    if include_last:
        ends = offsets[1:]
    else:
        ends = xp.concat([offsets[1:], xp.full((1,), n, dtype=offsets.dtype,
                                               device=offsets.device)])
    last = xp.clip(xp.astype(ends, idt) - 1, 0, n - 1)  # the last member of each bag
    bag_arg = xp.take(arg, last, axis=0)  # (n_bags, dim)
    out = xp.take_along_axis(rows, bag_arg, axis=0)
    return xp.where(count > 0, out, 0.0)


def _renorm_rows(xp: Any, weight: Any, idx: Any, flat: Any, max_norm: float,
                 norm_type: float) -> None:
    """Renormalise in place the rows of ``weight`` that the checked indices ``idx`` (of the
    given ``flat``) look up and whose norm exceeds ``max_norm``."""
    w = detach(weight)
    if isinstance(weight, Tensor):  # one scatter-add marks the rows in use
        used = new(weight._device.xp.reshape(_row_counts(weight, idx, flat), (-1,)) > 0,
                   weight._device)
    else:
        used = xp.any(xp.expand_dims(flat, axis=1) == xp.arange(
            weight.shape[0], dtype=flat.dtype, device=flat.device), axis=0)
    if norm_type == math.inf:
        norms = xp.max(xp.abs(w), axis=1)
    else:
        norms = xp.sum(xp.abs(w) ** norm_type, axis=1) ** (1.0 / norm_type)
    scale = xp.where(used & (norms > max_norm), max_norm / (norms + 1e-7), 1.0)
    new_w = w * xp.expand_dims(xp.astype(scale, w.dtype), axis=1)
    if isinstance(weight, Tensor):
        import vtl

        with vtl.no_grad():
            weight[...] = new_w
    else:
        weight[...] = new_w


def one_hot(tensor: Any, num_classes: int = -1) -> Any:
    """``tensor.shape + (num_classes,)`` array of 0/1 in the default integer dtype;
    ``num_classes=-1`` uses ``max(tensor) + 1``. Values outside
    ``[0, num_classes)`` raise ``ValueError``.

    Args:
        tensor: Integer class values.
        num_classes: Number of classes (-1: ``max(tensor) + 1``).

    Returns:
        A tensor of shape ``tensor.shape + (num_classes,)`` in the default integer dtype.

    Raises:
        TypeError: If ``tensor`` is not of an integer dtype.
        ValueError: If ``num_classes`` is invalid or a value is outside ``[0, num_classes)``.

    Example:
        >>> nn.functional.one_hot(vtl.asarray([0, 2]), num_classes=3).tolist()
        [[1, 0, 0], [0, 0, 1]]
    """
    xp = namespace(tensor)
    if not xp.isdtype(tensor.dtype, "integral"):
        raise TypeError(f"one_hot(): tensor must have an integer dtype, got {tensor.dtype}")
    size = math.prod(tensor.shape)
    if num_classes == -1:
        if size == 0:
            raise ValueError("one_hot(): cannot infer num_classes from an empty tensor")
        num_classes = int(xp.max(tensor)) + 1
    elif num_classes < 0:
        raise ValueError(f"one_hot(): num_classes must be -1 or >= 0, got {num_classes}")
    if size and (bool(xp.any(tensor < 0)) or bool(xp.any(tensor >= num_classes))):
        raise ValueError(f"one_hot(): class values must be in [0, {num_classes})")
    dt = xp.__array_namespace_info__().default_dtypes(device=tensor.device)["integral"]
    classes = xp.arange(num_classes, dtype=tensor.dtype, device=tensor.device)
    return xp.astype(xp.expand_dims(tensor, axis=-1) == classes, dt)


# -- pad ------------------------------------------------------------------------------------
def pad(input: Any, pad: Any, mode: str = "constant", value: float | None = None) -> Any:  # noqa: A002
    """Pad the last ``len(pad) // 2`` axes: ``pad = (left_last, right_last,
    left_second_last, ...)`` as in PyTorch.

    Modes: ``'constant'`` (with ``value``, default 0; negative pads crop),
    ``'reflect'`` (mirror without the edge; pads must be smaller than the axis),
    ``'replicate'`` (repeat the edge) and ``'circular'`` (wrap around; pads at most
    the axis size). Differentiable: the non-constant modes gather with
    ``take`` (scatter-add gradients).

    Args:
        input: The input tensor.
        pad: Pad sizes ``(left_last, right_last, left_second_last, ...)``, an even number of ints.
        mode: ``'constant'``, ``'reflect'``, ``'replicate'`` or ``'circular'``.
        value: The fill value of ``'constant'`` mode (default 0).

    Returns:
        The padded tensor.

    Raises:
        ValueError: If ``pad`` has an odd length or too many values, or ``mode`` is unknown, or
            ``value`` is given with another mode.
    """
    xp = namespace(input)
    pads = [operator.index(p) for p in pad]
    if len(pads) % 2:
        raise ValueError(f"pad(): pad must have an even length, got {len(pads)}")
    k = len(pads) // 2
    if k > input.ndim:
        raise ValueError(f"pad(): {len(pads)} pad values for a {input.ndim}-D input "
                         f"(at most {2 * input.ndim})")
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise ValueError(f"pad(): mode must be 'constant', 'reflect', 'replicate' or "
                         f"'circular', got {mode!r}")
    if mode != "constant" and value not in (None, 0, 0.0):
        raise ValueError(f"pad(): value is only used in 'constant' mode, got mode={mode!r}")
    out = input
    for i in range(k):
        axis = input.ndim - 1 - i
        lo, hi = pads[2 * i], pads[2 * i + 1]
        if lo == 0 and hi == 0:
            continue
        if mode == "constant":
            out = _pad_constant(xp, out, axis, lo, hi, 0.0 if value is None else value)
        else:
            out = _pad_gather(xp, out, axis, lo, hi, mode)
    return out


def _pad_constant(xp: Any, x: Any, axis: int, lo: int, hi: int, value: float) -> Any:
    n = x.shape[axis]
    start, stop = max(-lo, 0), n - max(-hi, 0)
    if start > stop:
        raise ValueError(f"pad(): negative padding ({lo}, {hi}) removes more than the "
                         f"{n} elements of axis {axis}")
    if start or stop != n:
        x = x[(slice(None),) * axis + (slice(start, stop),)]
    parts = []
    for width in (max(lo, 0), None, max(hi, 0)):
        if width is None:
            parts.append(x)
        elif width:
            shape = list(x.shape)
            shape[axis] = width
            parts.append(xp.full(tuple(shape), value, dtype=x.dtype, device=x.device))
    return xp.concat(parts, axis=axis) if len(parts) > 1 else x


def _pad_gather(xp: Any, x: Any, axis: int, lo: int, hi: int, mode: str) -> Any:
    n = x.shape[axis]
    if lo < 0 or hi < 0:
        raise ValueError(f"pad(): negative padding is only supported in 'constant' mode, "
                         f"got ({lo}, {hi})")
    if mode == "reflect" and (lo >= n or hi >= n):
        raise ValueError(f"pad(): reflect padding ({lo}, {hi}) must be smaller than the "
                         f"size {n} of axis {axis}")
    if mode == "circular" and (lo > n or hi > n):
        raise ValueError(f"pad(): circular padding ({lo}, {hi}) must not exceed the "
                         f"size {n} of axis {axis}")
    if n == 0:
        raise ValueError(f"pad(): cannot {mode}-pad an empty axis {axis}")
    idx = []
    for j in range(-lo, n + hi):
        if mode == "replicate":
            idx.append(min(max(j, 0), n - 1))
        elif mode == "circular":
            idx.append(j % n)
        else:  # reflect
            idx.append(-j if j < 0 else (2 * (n - 1) - j if j >= n else j))
    dt = xp.__array_namespace_info__().default_dtypes(device=x.device)["indexing"]
    return xp.take(x, xp.asarray(idx, dtype=dt, device=x.device), axis=axis)


# -- dropout --------------------------------------------------------------------------------
def _uniform_like(x: Any, shape: tuple[int, ...], generator: Any) -> Any:
    from ... import random

    g = random.default_generator() if generator is None else generator
    return g._random_like(x, shape)


def _check_p(p: float, fname: str) -> None:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{fname}(): dropout probability has to be between 0 and 1, got {p}")


def _masked(input: Any, shape: tuple[int, ...], p: float, generator: Any) -> Any:  # noqa: A002
    namespace(input)  # a TypeError for what is not an array or tensor
    if p == 1.0:
        return input * 0.0
    if shape == _shape(input):
        fused = _fused_dropout(input, p, generator)
        if fused is not None:
            return fused
    keep = _uniform_like(input, shape, generator) >= p
    if isinstance(input, Tensor) and needs_grad(input):
        return _mask_node(input, keep, p)
    return _scaled(input, keep, p)


def _scaled(a: Any, keep: Any, p: float) -> Any:
    """``a * keep / (1 - p)`` of an array or tensor ``a`` and a boolean ``keep`` broadcasting
    to it, in float32 for float16/bfloat16 (rounded once: PyTorch's; ``1/(1-p)`` may not
    fit), else in ``a``'s dtype: the arithmetic of the portable path."""
    xp = namespace(a)
    low = low_float(a)
    if low is not None:
        wide = xp.astype(a, xp.float32)
        return xp.astype(wide * (xp.astype(keep, xp.float32) * (1.0 / (1.0 - p))), low)
    return a * (xp.astype(keep, a.dtype) * (1.0 / (1.0 - p)))


def _mask_node(input: Tensor, keep: Any, p: float) -> Tensor:  # noqa: A002
    """Dropout by a drawn mask as ONE graph node that keeps only the boolean mask (the
    multiply of the portable path would keep the input, its float32 copy for a 16-bit one,
    and a float mask of the input's size)."""
    keep = keep._data if isinstance(keep, Tensor) else keep
    dev = input._device

    def vjp(g: Tensor, _: Any) -> tuple:
        if _grad.enabled:  # create_graph: the scale of each element as a constant
            xp = dev.xp
            ones = xp.ones(tuple(g.shape), dtype=g._data.dtype, device=g._data.device)
            return (g * new(_scaled(ones, keep, p), dev),)
        return (new(_scaled(g._data, keep, p), dev),)

    return record(_scaled(input._data, keep, p), dev, "DropoutMaskBackward", (input,), vjp)


def _fused_dropout(input: Any, p: float, generator: Any) -> Any:  # noqa: A002
    """Dropout as ONE graph node through the backend's ``dropout`` kernel (the bits of the
    portable path, generated inside the kernel; no mask in memory), or ``None`` where no
    kernel takes it."""
    if not isinstance(input, Tensor) or not 0.0 < p < 1.0:
        return None
    dev = input._device
    kern = dev.backend.kernel("dropout")
    if kern is None or not kern.supports(input._data.dtype):
        return None
    from ... import random

    gen = random.default_generator() if generator is None else generator
    words = gen._kernel_words(int(input.size), dev)
    data = kern.forward(input._data, p, words)
    if data is None:
        return None
    if not needs_grad(input):
        return new(data, dev)
    return record(data, dev, "DropoutBackward", (input,),
                  partial(_fused_dropout_vjp, kern, p, words))


def _fused_dropout_vjp(kern: Any, p: float, words: Any, g: Tensor, _: Any) -> tuple:
    dev = g._device
    if _grad.enabled:  # create_graph: the scale of each element as a constant
        xp = dev.xp
        ones = xp.ones(tuple(g.shape), dtype=g._data.dtype, device=g._data.device)
        return (g * new(kern.backward(ones, p, words), dev),)
    return (new(kern.backward(g._data, p, words), dev),)


def dropout(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False,  # noqa: A002
            *, generator: Any = None) -> Any:
    """Zero each element with probability ``p`` and scale the rest by ``1/(1-p)``
    when ``training``; the identity otherwise. Draws from ``generator`` (default:
    ``vtl.random``'s). ``inplace=True`` writes the result into ``input`` and returns it
    (see ``vtl.nn.functional.relu``).

    Args:
        input: The input tensor.
        p: Probability that an element (a channel, for the feature variants) is dropped, in ``[0,
            1]``.
        training: Apply dropout; otherwise return the input unchanged.
        inplace: Write the result into ``input`` and return it.
        generator: A :class:`vtl.random.Generator` to draw from (default: ``vtl.random``'s default
            generator).

    Returns:
        A tensor of the input's shape.

    Raises:
        ValueError: If ``p`` is not in ``[0, 1]``.
    """
    _check_p(p, "dropout")
    if not training or p == 0.0:
        return input
    if inplace:
        return apply_inplace(input, lambda x: _masked(x, _shape(x), p, generator), "dropout")
    return _masked(input, _shape(input), p, generator)


def _feature_dropout(input: Any, p: float, training: bool, generator: Any, spatial: int,  # noqa: A002
                     fname: str, inplace: bool = False) -> Any:
    _check_p(p, fname)
    nd = input.ndim
    if nd not in (spatial + 1, spatial + 2):
        raise ValueError(
            f"{fname}(): expected a {spatial + 1}-D (unbatched) or {spatial + 2}-D (batched) "
            f"input, got shape {_shape(input)}"
        )
    if not training or p == 0.0:
        return input
    lead = nd - spatial
    shape = _shape(input)[:lead] + (1,) * spatial
    if inplace:
        return apply_inplace(input, lambda x: _masked(x, shape, p, generator), fname)
    return _masked(input, shape, p, generator)


def dropout1d(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False,  # noqa: A002
              *, generator: Any = None) -> Any:
    """Zero whole channels of ``(N, C, L)`` or ``(C, L)`` inputs.

    Args:
        input: The input tensor.
        p: Probability that an element (a channel, for the feature variants) is dropped, in ``[0,
            1]``.
        training: Apply dropout; otherwise return the input unchanged.
        inplace: Write the result into ``input`` and return it.
        generator: A :class:`vtl.random.Generator` to draw from (default: ``vtl.random``'s default
            generator).

    Returns:
        A tensor of the input's shape.

    Raises:
        ValueError: If ``p`` is not in ``[0, 1]``.
    """
    return _feature_dropout(input, p, training, generator, 1, "dropout1d", inplace)


def dropout2d(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False,  # noqa: A002
              *, generator: Any = None) -> Any:
    """Zero whole channels of ``(N, C, H, W)`` or ``(C, H, W)`` inputs.

    Args:
        input: The input tensor.
        p: Probability that an element (a channel, for the feature variants) is dropped, in ``[0,
            1]``.
        training: Apply dropout; otherwise return the input unchanged.
        inplace: Write the result into ``input`` and return it.
        generator: A :class:`vtl.random.Generator` to draw from (default: ``vtl.random``'s default
            generator).

    Returns:
        A tensor of the input's shape.

    Raises:
        ValueError: If ``p`` is not in ``[0, 1]``.
    """
    return _feature_dropout(input, p, training, generator, 2, "dropout2d", inplace)


def dropout3d(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False,  # noqa: A002
              *, generator: Any = None) -> Any:
    """Zero whole channels of ``(N, C, D, H, W)`` or ``(C, D, H, W)`` inputs.

    Args:
        input: The input tensor.
        p: Probability that an element (a channel, for the feature variants) is dropped, in ``[0,
            1]``.
        training: Apply dropout; otherwise return the input unchanged.
        inplace: Write the result into ``input`` and return it.
        generator: A :class:`vtl.random.Generator` to draw from (default: ``vtl.random``'s default
            generator).

    Returns:
        A tensor of the input's shape.

    Raises:
        ValueError: If ``p`` is not in ``[0, 1]``.
    """
    return _feature_dropout(input, p, training, generator, 3, "dropout3d", inplace)


_ALPHA_PRIME = -1.7580993408473766  # -scale * alpha of SELU


def alpha_dropout(input: Any, p: float = 0.5, training: bool = False, inplace: bool = False,  # noqa: A002
                  *, generator: Any = None) -> Any:
    """Dropout that keeps SELU's zero mean and unit variance: dropped elements
    become ``alpha'`` and an affine map restores the statistics.

    Args:
        input: The input tensor.
        p: Probability that an element (a channel, for the feature variants) is dropped, in ``[0,
            1]``.
        training: Apply dropout; otherwise return the input unchanged.
        inplace: Write the result into ``input`` and return it.
        generator: A :class:`vtl.random.Generator` to draw from (default: ``vtl.random``'s default
            generator).

    Returns:
        A tensor of the input's shape.

    Raises:
        ValueError: If ``p`` is not in ``[0, 1]``.
    """
    _check_p(p, "alpha_dropout")
    if not training or p == 0.0:
        return input
    if inplace:
        return apply_inplace(input, partial(alpha_dropout, p=p, training=True,
                                            generator=generator), "alpha_dropout")
    return _alpha_masked(input, _shape(input), p, generator)


def _alpha_masked(input: Any, shape: tuple[int, ...], p: float, generator: Any) -> Any:  # noqa: A002
    """PyTorch's alpha-dropout arithmetic with a keep mask of ``shape`` (broadcast)."""
    xp = namespace(input)
    if p == 1.0:
        return input * 0.0
    keep = xp.astype(_uniform_like(input, shape, generator) >= p, input.dtype)
    a = ((1.0 - p) * (1.0 + p * _ALPHA_PRIME**2)) ** -0.5
    b = -a * _ALPHA_PRIME * p
    return (input * keep + _ALPHA_PRIME * (1.0 - keep)) * a + b


def feature_alpha_dropout(input: Any, p: float = 0.5, training: bool = False,  # noqa: A002
                          inplace: bool = False, *, generator: Any = None) -> Any:
    """Alpha dropout of whole channels: each channel of an ``(N, C, *)`` input (one mask
    value per ``(n, c)``) is either kept or set to SELU's negative saturation value
    ``alpha'``, then an affine map restores zero mean and unit variance, as
    :func:`alpha_dropout`. The identity unless ``training`` (PyTorch's default
    ``training=False``).

    Args:
        input: The input tensor.
        p: Probability that an element (a channel, for the feature variants) is dropped, in ``[0,
            1]``.
        training: Apply dropout; otherwise return the input unchanged.
        inplace: Write the result into ``input`` and return it.
        generator: A :class:`vtl.random.Generator` to draw from (default: ``vtl.random``'s default
            generator).

    Returns:
        A tensor of the input's shape.

    Raises:
        ValueError: If ``p`` is not in ``[0, 1]``.
        ValueError: If the input has fewer than 2 dimensions.
    """
    _check_p(p, "feature_alpha_dropout")
    if input.ndim < 2:
        raise ValueError(f"feature_alpha_dropout(): feature dropout requires at least 2 "
                         f"dimensions in the input, got shape {_shape(input)}")
    if not training or p == 0.0 or math.prod(_shape(input)) == 0:
        return input
    shape = _shape(input)[:2] + (1,) * (input.ndim - 2)
    if inplace:
        return apply_inplace(input, lambda x: _alpha_masked(x, shape, p, generator),
                             "feature_alpha_dropout")
    return _alpha_masked(input, shape, p, generator)


# autocast (vtl.amp): the list each op belongs to
_autocast.apply(globals(), low_ops=('linear', 'linear_relu', 'bilinear'))
