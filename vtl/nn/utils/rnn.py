"""Variable-length sequences for the recurrent layers (PyTorch's ``torch.nn.utils.rnn``).

A :class:`PackedSequence` holds a batch of sequences of different lengths without
padding: ``data`` stacks step 0 of every sequence, then step 1 of those that are long
enough, and so on, the sequences sorted from the longest; ``batch_sizes[t]`` (on the CPU,
that is the numpy backend) counts the sequences that have a step ``t``.
``sorted_indices``/``unsorted_indices`` (on the data's device) map between the caller's
batch order and the sorted one. ``nn.RNN``/``nn.LSTM``/``nn.GRU`` take one and return
their output packed the same way, with each sequence's final state taken at its own last
step and in the caller's batch order.

Packing and padding gather rows with one :func:`vtl.take` each, so gradients flow
through them to the padded or packed data. Lengths are host values (a list of ints or a
tensor, which is read on the host as PyTorch requires CPU lengths).
"""

from __future__ import annotations

import operator
from collections import namedtuple
from collections.abc import Sequence
from typing import Any

import vtl

from ..._tensor import Tensor

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence", "pack_sequence",
           "pad_packed_sequence", "pad_sequence", "unpack_sequence", "unpad_sequence"]

_CPU = "cpu"


def _type(x: Any) -> str:
    t = type(x)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _tensor(fname: str, x: Any, name: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{fname}(): expected {name} to be a vtl.Tensor, got {_type(x)}")
    return x


def _index_dtype(device: Any) -> Any:
    return vtl.__array_namespace_info__().default_dtypes(device=device)["indexing"]


def _indices(values: list[int], device: Any) -> Tensor:
    return vtl.asarray(values, dtype=_index_dtype(device), device=device)


def _int_list(fname: str, values: Any, name: str) -> list[int]:
    """Host ints from a list/tuple of ints or a 1-D integer tensor (read on the host)."""
    if isinstance(values, Tensor):
        if values.ndim != 1 or values.dtype not in (vtl.int8, vtl.int16, vtl.int32, vtl.int64,
                                                    vtl.uint8, vtl.uint16, vtl.uint32,
                                                    vtl.uint64):
            raise TypeError(f"{fname}(): expected {name} to be a 1-D integer tensor, got one "
                            f"of shape {tuple(values.shape)} and dtype {values.dtype}")
        return [int(v) for v in values.tolist()]
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{fname}(): expected {name} to be a list of ints or a 1-D integer "
                        f"tensor, got {_type(values)}")
    out = []
    for v in values:
        if isinstance(v, bool):
            raise TypeError(f"{fname}(): expected {name} to hold ints, got a bool")
        try:
            out.append(operator.index(v))
        except TypeError:
            raise TypeError(f"{fname}(): expected {name} to hold ints, got "
                            f"{_type(v)}") from None
    return out


def invert_permutation(permutation: Tensor | None) -> Tensor | None:
    """The inverse of a permutation of ``0..n-1`` (``None`` for ``None``), of its dtype
    and on its device.

    Args:
        permutation: A 1-D permutation of ``0..n-1``, or ``None``.

    Returns:
        The inverse permutation, or ``None``.

    Raises:
        ValueError: If ``permutation`` is not 1-D.
    """
    if permutation is None:
        return None
    _tensor("invert_permutation", permutation, "permutation")
    if permutation.ndim != 1:
        raise ValueError(f"invert_permutation(): expected a 1-D permutation, got shape "
                         f"{tuple(permutation.shape)}")
    return vtl.astype(vtl.argsort(permutation), permutation.dtype)


_Fields = namedtuple("_Fields", ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])


class PackedSequence(_Fields):
    """A batch of variable-length sequences, packed (PyTorch's ``PackedSequence``).

    Fields: ``data`` ``(sum(lengths), *)``; ``batch_sizes``, 1-D int64 on the CPU (numpy
    backend), the number of sequences at each step; ``sorted_indices`` (or ``None`` when
    the batch was given sorted), the caller's batch index of each sorted sequence, and
    ``unsorted_indices`` its inverse (computed when not given), both on ``data``'s device.
    Build one with :func:`pack_padded_sequence` or :func:`pack_sequence`; it is a named
    tuple, so ``data, batch_sizes, sorted_indices, unsorted_indices = packed`` works.

    Args:
        data: The packed values, ``(sum(lengths), *)``, or a ``(data, batch_sizes)`` pair.
        batch_sizes: The number of sequences at each step.
        sorted_indices: The caller's batch index of each sorted sequence, or ``None``.
        unsorted_indices: Its inverse (computed when not given).

    Raises:
        TypeError: If ``data`` is not a tensor (or a pair) or a field has a wrong type.
        ValueError: If ``batch_sizes`` is a tensor that is not on the CPU.
    """

    __slots__ = ()

    def __new__(cls, data: Any, batch_sizes: Any = None, sorted_indices: Tensor | None = None,
                unsorted_indices: Tensor | None = None) -> PackedSequence:
        if batch_sizes is None:  # PackedSequence((data, batch_sizes))
            if not isinstance(data, (tuple, list)) or len(data) != 2:
                raise TypeError("PackedSequence(): expected data and batch_sizes, or one "
                                f"(data, batch_sizes) pair, got {_type(data)}")
            data, batch_sizes = data
        _tensor("PackedSequence", data, "data")
        if not isinstance(batch_sizes, Tensor):
            batch_sizes = vtl.asarray(_int_list("PackedSequence", batch_sizes, "batch_sizes"),
                                      dtype=vtl.int64, device=_CPU)
        elif batch_sizes.device.backend_name != "numpy":
            raise ValueError(f"PackedSequence(): batch_sizes must be on the CPU (the numpy "
                             f"backend), got a tensor on {batch_sizes.device}")
        for name, idx in (("sorted_indices", sorted_indices),
                          ("unsorted_indices", unsorted_indices)):
            if idx is not None:
                _tensor("PackedSequence", idx, name)
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args: Any, **kwargs: Any) -> PackedSequence:
        """``data.to(...)`` (a device and/or dtype); the indices follow the data's device,
        ``batch_sizes`` stays on the CPU."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        dev = data.device
        s, u = (None if i is None else i.to(dev)
                for i in (self.sorted_indices, self.unsorted_indices))
        return type(self)(data, self.batch_sizes, s, u)

    def cpu(self) -> PackedSequence:
        """The same sequence with its data on the CPU (numpy backend)."""
        return self.to(_CPU)

    def double(self) -> PackedSequence:
        """The data cast to float64."""
        return self.to(vtl.float64)

    def float(self) -> PackedSequence:
        """The data cast to float32."""
        return self.to(vtl.float32)

    @property
    def is_cuda(self) -> bool:
        """Whether the data lives on a CUDA (cupy) device."""
        return self.data.device.backend_name == "cupy"


def _host_batch_sizes(sequence: PackedSequence, fname: str) -> list[int]:
    """``sequence.batch_sizes`` as host ints, checked against the data (no device read)."""
    if not isinstance(sequence, PackedSequence):
        raise TypeError(f"{fname}(): expected a PackedSequence, got {_type(sequence)}")
    bs = _int_list(fname, sequence.batch_sizes, "batch_sizes")
    if not bs or bs[-1] <= 0 or any(a < b for a, b in zip(bs, bs[1:], strict=False)):
        raise ValueError(f"{fname}(): batch_sizes must be a non-empty, non-increasing list of "
                         f"positive counts, got {bs}")
    if sequence.data.ndim < 1 or sequence.data.shape[0] != sum(bs):
        raise ValueError(f"{fname}(): data of shape {tuple(sequence.data.shape)} does not hold "
                         f"sum(batch_sizes) = {sum(bs)} rows")
    return bs


def _pad_row(data: Tensor, value: Any) -> Tensor:
    """A ``(1, *data.shape[1:])`` row of ``value`` (cast to an integer or bool dtype)."""
    if data.dtype == vtl.bool:
        value = bool(value)
    elif vtl.isdtype(data.dtype, "integral"):
        value = int(value)
    return vtl.full((1, *data.shape[1:]), value, dtype=data.dtype, device=data.device)


def pack_padded_sequence(input: Tensor, lengths: Any, batch_first: bool = False,  # noqa: A002
                         enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded batch ``(T, B, *)`` (``(B, T, *)`` with ``batch_first``) of sequences
    of the given ``lengths``.

    With ``enforce_sorted`` the lengths must be non-increasing (``sorted_indices`` is then
    ``None``); otherwise the batch is sorted here (longest first, ties in batch order) and
    the permutation kept in the result. Gradients flow back to ``input``.

    Args:
        input: The padded batch.
        lengths: The length of each sequence (ints or a 1-D tensor).
        batch_first: The batch is ``(B, T, *)`` instead of ``(T, B, *)``.
        enforce_sorted: Require the lengths to be non-increasing (else sort the batch here).

    Returns:
        A :class:`PackedSequence`.

    Raises:
        ValueError: If the input has fewer than 2 dimensions, or the lengths do not fit the batch
            or are unsorted with ``enforce_sorted``.
    """
    fname = "pack_padded_sequence"
    _tensor(fname, input, "input")
    if input.ndim < 2:
        raise ValueError(f"{fname}(): expected an input of at least 2 dimensions (T, B, *), "
                         f"got shape {tuple(input.shape)}")
    lens = _int_list(fname, lengths, "lengths")
    b_ax, t_ax = (0, 1) if batch_first else (1, 0)
    n, steps = input.shape[b_ax], input.shape[t_ax]
    if len(lens) != n:
        raise ValueError(f"{fname}(): expected len(lengths) to be equal to batch_size, but got "
                         f"{len(lens)} (batch_size={n})")
    if any(v <= 0 for v in lens):
        raise ValueError(f"{fname}(): every length must be > 0, got lengths {lens}")
    if max(lens) > steps:
        raise ValueError(f"{fname}(): a length of {max(lens)} exceeds the {steps} steps of the "
                         f"input of shape {tuple(input.shape)}"
                         + (" (batch_first=True: axis 1 is the sequence)" if batch_first
                            else ""))
    if enforce_sorted:
        if any(a < b for a, b in zip(lens, lens[1:], strict=False)):
            raise ValueError(f"{fname}(): lengths must be sorted in decreasing order when "
                             f"enforce_sorted=True, got {lens}; pass enforce_sorted=False to "
                             "pack an unsorted batch")
        order = list(range(n))
        sorted_indices = None
    else:
        order = sorted(range(n), key=lambda i: -lens[i])
        sorted_indices = _indices(order, input.device)
    slens = [lens[i] for i in order]
    batch_sizes = []
    k = n
    for t in range(slens[0]):
        while slens[k - 1] <= t:
            k -= 1
        batch_sizes.append(k)
    # rows of the flattened input, step by step
    idx = []
    for t, k in enumerate(batch_sizes):
        if batch_first:
            idx.extend(order[j] * steps + t for j in range(k))
        else:
            idx.extend(t * n + order[j] for j in range(k))
    rest = tuple(input.shape[2:])
    flat = vtl.reshape(input, (n * steps, *rest))
    data = vtl.take(flat, _indices(idx, input.device), axis=0)
    return PackedSequence(data, vtl.asarray(batch_sizes, dtype=vtl.int64, device=_CPU),
                          sorted_indices, None)


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False,
                        padding_value: float = 0.0,
                        total_length: int | None = None) -> tuple[Tensor, Tensor]:
    """Undo :func:`pack_padded_sequence`: ``(padded, lengths)`` with ``padded`` of shape
    ``(T, B, *)`` (``(B, T, *)`` with ``batch_first``) in the caller's batch order, padded
    with ``padding_value`` up to ``T = total_length`` (default: the longest length), and
    ``lengths`` a 1-D int64 tensor on the CPU. Gradients flow back to ``sequence.data``.

    Args:
        sequence: A :class:`PackedSequence`.
        batch_first: The batch is ``(B, T, *)`` instead of ``(T, B, *)``.
        padding_value: The fill value.
        total_length: Pad to this many steps (at least the longest length).

    Returns:
        ``(padded, lengths)``.

    Raises:
        ValueError: If ``total_length`` is shorter than the longest sequence.
    """
    fname = "pad_packed_sequence"
    bs = _host_batch_sizes(sequence, fname)
    data = sequence.data
    steps = len(bs)
    if total_length is not None:
        total_length = operator.index(total_length)
        if total_length < steps:
            raise ValueError(f"{fname}(): expected total_length to be at least the length of "
                             f"the longest sequence in input, but got total_length="
                             f"{total_length} and max sequence length being {steps}")
        steps = total_length
    n = bs[0]
    rows = data.shape[0]
    idx = [rows] * (steps * n)  # row `rows` is the padding row
    off = 0
    for t, k in enumerate(bs):
        for j in range(k):
            idx[j * steps + t if batch_first else t * n + j] = off + j
        off += k
    rest = tuple(data.shape[1:])
    src = vtl.concat([data, _pad_row(data, padding_value)], axis=0)
    out = vtl.take(src, _indices(idx, data.device), axis=0)
    out = vtl.reshape(out, ((n, steps) if batch_first else (steps, n)) + rest)
    lens = [sum(1 for k in bs if k > j) for j in range(n)]
    lengths = vtl.asarray(lens, dtype=vtl.int64, device=_CPU)
    if sequence.unsorted_indices is not None:
        out = vtl.take(out, sequence.unsorted_indices, axis=0 if batch_first else 1)
        lengths = vtl.take(lengths, sequence.unsorted_indices.to(_CPU), axis=0)
    return out, lengths


def _sequences(fname: str, sequences: Any) -> list[Tensor]:
    if isinstance(sequences, Tensor):
        if sequences.ndim < 1:
            raise ValueError(f"{fname}(): expected sequences, got a 0-d tensor")
        return [sequences[i, ...] for i in range(sequences.shape[0])]
    if not isinstance(sequences, Sequence) or isinstance(sequences, (str, bytes)):
        raise TypeError(f"{fname}(): expected a list of tensors, got {_type(sequences)}")
    seqs = list(sequences)
    if not seqs:
        raise ValueError(f"{fname}(): received an empty list of sequences")
    for k, s in enumerate(seqs):
        _tensor(fname, s, f"sequences[{k}]")
        if s.ndim < 1:
            raise ValueError(f"{fname}(): sequences[{k}] is 0-d; each sequence needs a leading "
                             "time dimension")
    first = seqs[0]
    for k, s in enumerate(seqs):
        if tuple(s.shape[1:]) != tuple(first.shape[1:]) or s.dtype != first.dtype \
                or s.device != first.device:
            raise ValueError(f"{fname}(): every sequence needs the trailing shape, dtype and "
                             f"device of sequences[0] ({tuple(first.shape[1:])}, {first.dtype},"
                             f" {first.device}), got sequences[{k}] with "
                             f"{tuple(s.shape[1:])}, {s.dtype}, {s.device}")
    return seqs


def pad_sequence(sequences: Sequence[Tensor], batch_first: bool = False,
                 padding_value: float = 0.0, padding_side: str = "right") -> Tensor:
    """Stack sequences of shapes ``(L_i, *)`` into ``(T, B, *)`` (``(B, T, *)`` with
    ``batch_first``), ``T = max L_i``, filling with ``padding_value`` on the right (or
    the left with ``padding_side='left'``). Gradients flow back to every sequence.

    Args:
        sequences: Tensors ``(L_i, *)`` with the same trailing shape.
        batch_first: The batch is ``(B, T, *)`` instead of ``(T, B, *)``.
        padding_value: The fill value.
        padding_side: ``'right'`` or ``'left'``.

    Returns:
        The padded batch.

    Raises:
        ValueError: If ``padding_side`` is unknown.
    """
    fname = "pad_sequence"
    if padding_side not in ("left", "right"):
        raise ValueError(f"{fname}(): expected padding_side to be one of left or right, but "
                         f"got {padding_side!r}")
    seqs = _sequences(fname, sequences)
    lens = [s.shape[0] for s in seqs]
    n, steps, total = len(seqs), max(lens), sum(lens)
    idx = [total] * (n * steps)  # row `total` is the padding row
    off = 0
    for j, ln in enumerate(lens):
        start = steps - ln if padding_side == "left" else 0
        for t in range(ln):
            tt = start + t
            idx[j * steps + tt if batch_first else tt * n + j] = off + t
        off += ln
    first = seqs[0]
    src = vtl.concat([*seqs, _pad_row(first, padding_value)], axis=0)
    out = vtl.take(src, _indices(idx, first.device), axis=0)
    return vtl.reshape(out, ((n, steps) if batch_first else (steps, n)) + tuple(first.shape[1:]))


def pack_sequence(sequences: Sequence[Tensor], enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of sequences ``(L_i, *)``: ``pack_padded_sequence(pad_sequence(
    sequences), lengths, enforce_sorted=enforce_sorted)``.

    Args:
        sequences: Tensors ``(L_i, *)``.
        enforce_sorted: Require the lengths to be non-increasing (else sort the batch here).

    Returns:
        A :class:`PackedSequence`.

    Raises:
        ValueError: If the lengths are unsorted with ``enforce_sorted``.
    """
    seqs = _sequences("pack_sequence", sequences)
    lengths = [s.shape[0] for s in seqs]
    return pack_padded_sequence(pad_sequence(seqs), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences: PackedSequence) -> list[Tensor]:
    """The list of sequences ``(L_i, *)`` of a packed batch, in the caller's order.

    Args:
        packed_sequences: A :class:`PackedSequence`.

    Returns:
        A list of tensors ``(L_i, *)``.
    """
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return [padded[j, :ln, ...] for j, ln in enumerate(lengths.tolist())]


def unpad_sequence(padded_sequences: Tensor, lengths: Any,
                   batch_first: bool = False) -> list[Tensor]:
    """The list of sequences ``(L_i, *)`` of a padded batch ``(T, B, *)`` (``(B, T, *)``
    with ``batch_first``).

    Args:
        padded_sequences: The padded batch.
        lengths: The length of each sequence.
        batch_first: The batch is ``(B, T, *)`` instead of ``(T, B, *)``.

    Returns:
        A list of tensors ``(L_i, *)``.

    Raises:
        ValueError: If the batch has fewer than 2 dimensions or the lengths do not fit.
    """
    fname = "unpad_sequence"
    _tensor(fname, padded_sequences, "padded_sequences")
    if padded_sequences.ndim < 2:
        raise ValueError(f"{fname}(): expected a padded batch of at least 2 dimensions, got "
                         f"shape {tuple(padded_sequences.shape)}")
    lens = _int_list(fname, lengths, "lengths")
    x = padded_sequences
    if not batch_first:
        x = vtl.moveaxis(x, 0, 1)
    if len(lens) != x.shape[0] or any(not 0 <= ln <= x.shape[1] for ln in lens):
        raise ValueError(f"{fname}(): lengths {lens} do not fit a batch of {x.shape[0]} "
                         f"sequences of at most {x.shape[1]} steps")
    return [x[j, :ln, ...] for j, ln in enumerate(lens)]
