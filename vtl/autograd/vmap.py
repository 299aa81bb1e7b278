"""``vmap``: map a function over a batch axis of its tensor arguments (``torch.func.vmap``).

vtl has no per-op batching rules: ``vmap`` calls the function once per batch element, on
views of the arguments (``x[..., i, ...]``), and stacks the results. The results, their
gradients and the composition with the other transforms (``vmap(grad(f))`` for
per-sample gradients, ``grad`` of a vmapped function, nested ``vmap``) are those of
PyTorch's ``vmap``; the cost is one call of ``func`` per element, so it is a convenience
for code written per example, not a way to make it faster (write the batched form for
that).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from typing import Any

__all__ = ["vmap"]

_RANDOMNESS = ("error", "different", "same")


def _is_tensor(x: Any) -> bool:
    from .._tensor import Tensor

    return isinstance(x, Tensor)


def _broadcast_dims(dims: Any, tree: Any, where: str) -> list:
    """``dims`` (an int/None prefix tree of ``tree``) -> one entry per leaf of ``tree``."""
    if dims is None or isinstance(dims, int):
        if dims is not None:
            operator.index(dims)
        return [dims] * len(_leaves(tree))
    if isinstance(tree, (tuple, list)) and isinstance(dims, (tuple, list)):
        if len(dims) != len(tree):
            raise ValueError(f"{where} has {len(dims)} entries for a {type(tree).__name__} "
                             f"of {len(tree)}")
        return [d for t, s in zip(tree, dims, strict=True) for d in _broadcast_dims(s, t, where)]
    if isinstance(tree, dict) and isinstance(dims, dict):
        if set(dims) != set(tree):
            raise ValueError(f"{where} has keys {sorted(dims)} for a dict with keys "
                             f"{sorted(tree)}")
        return [d for k in tree for d in _broadcast_dims(dims[k], tree[k], where)]
    raise TypeError(f"{where} must be an int, None, or a tuple/list/dict matching the "
                    f"arguments' structure, got {type(dims).__name__} for "
                    f"{type(tree).__name__}")


def _leaves(tree: Any) -> list:
    if isinstance(tree, (tuple, list)):
        return [leaf for t in tree for leaf in _leaves(t)]
    if isinstance(tree, dict):
        return [leaf for t in tree.values() for leaf in _leaves(t)]
    return [tree]


def _rebuild(tree: Any, leaves: Any) -> Any:
    """``tree`` with its leaves replaced, in order, from the iterator ``leaves``."""
    if isinstance(tree, (tuple, list)):
        items = [_rebuild(t, leaves) for t in tree]
        if hasattr(tree, "_fields"):  # a named tuple
            return type(tree)(*items)
        return type(tree)(items)
    if isinstance(tree, dict):
        return type(tree)((k, _rebuild(v, leaves)) for k, v in tree.items())
    return next(leaves)


def _batch_size(leaves: list, dims: list) -> int:
    size = None
    for i, (x, d) in enumerate(zip(leaves, dims, strict=True)):
        if d is None:
            continue
        if not _is_tensor(x):
            raise ValueError(f"vmap: in_dims gives {d} for argument leaf {i}, which is a "
                             f"{type(x).__name__}, not a Tensor; use None for it")
        if not -x.ndim <= d < x.ndim:
            raise ValueError(f"vmap: in_dim {d} is out of range for an argument of shape "
                             f"{x.shape}")
        n = x.shape[d]
        if size is None:
            size = n
        elif n != size:
            raise ValueError(f"vmap: the mapped axes have different sizes ({size} and {n}); "
                             "every mapped argument needs the same batch size")
    if size is None:
        raise ValueError("vmap: in_dims maps no tensor argument (at least one must be mapped)")
    if size == 0:
        raise ValueError("vmap: the mapped axis has size 0; vmap calls the function once per "
                         "element, so it needs at least one")
    return size


def _select(x: Any, d: Any, i: int) -> Any:
    if d is None:
        return x
    d = d % x.ndim
    return x[(slice(None),) * d + (i,)]


def _stack(results: list, out_dims: Any) -> Any:
    import vtl

    first = results[0]
    dims = _broadcast_dims(out_dims, first, "vmap: out_dims")
    columns = list(zip(*(_leaves(r) for r in results), strict=True))
    stacked = []
    for col, d in zip(columns, dims, strict=True):
        if not all(_is_tensor(c) for c in col):
            kinds = sorted({type(c).__name__ for c in col if not _is_tensor(c)})
            raise TypeError(f"vmap: the function must return Tensors (or tuples/lists/dicts "
                            f"of them), got {', '.join(kinds)}")
        if d is None:
            if any(c.shape != col[0].shape or not bool(vtl.all(c == col[0])) for c in col[1:]):
                raise ValueError("vmap: out_dims is None for an output that differs between "
                                 "batch elements; give it an int out_dim")
            stacked.append(col[0])
            continue
        ndim = col[0].ndim + 1
        if not -ndim <= d < ndim:
            raise ValueError(f"vmap: out_dim {d} is out of range for an output of "
                             f"{col[0].ndim} dimensions (plus the batch dimension)")
        stacked.append(vtl.stack(list(col), axis=d))
    return _rebuild(first, iter(stacked))


def vmap(func: Callable, in_dims: Any = 0, out_dims: Any = 0, randomness: str = "error", *,
         chunk_size: int | None = None) -> Callable:
    """Vectorize ``func`` over an axis of its tensor arguments, as ``torch.func.vmap``.

    Args:
        func: takes tensors (or tuples/lists/dicts of them, and other values) and returns
            tensors or tuples/lists/dicts of them.
        in_dims: the mapped axis of each positional argument: an int for all of them, or a
            tuple with one entry per argument (an int, ``None`` for unmapped, or a nested
            structure matching the argument). Keyword arguments are not mapped.
        out_dims: where the batch axis goes in each output (int, or a structure matching
            the outputs; ``None`` for an output that is the same for every element).
        randomness: ``"error"`` (default) raises if ``func`` draws from vtl's default
            generator; ``"different"`` lets each element draw its own numbers;
            ``"same"`` gives every element the same numbers.
        chunk_size: accepted for compatibility; the elements run one at a time.

    Returns:
        The vectorized function. It calls ``func`` once per batch element on views of the
        arguments and stacks the results, so gradients flow through it, it nests, and it
        composes with ``vtl.grad`` (``vmap(grad(loss))`` gives per-sample gradients).

    Raises:
        ValueError: mapped axes of different or zero size, an axis out of range, or an
            unmapped (``None``) output that differs between elements.
        TypeError: ``func`` returns something other than tensors.
        RuntimeError: ``func`` draws random numbers under ``randomness="error"``.

    Example:
        >>> import vtl
        >>> x = vtl.asarray([[1.0, 2.0], [3.0, 4.0]])
        >>> vtl.vmap(lambda row: vtl.sum(row * row))(x).tolist()
        [5.0, 25.0]
    """
    if randomness not in _RANDOMNESS:
        raise ValueError(f"vmap: randomness must be one of {_RANDOMNESS}, got {randomness!r}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"vmap: chunk_size must be None or a positive int, got {chunk_size!r}")
    if not callable(func):
        raise TypeError(f"vmap: func must be callable, got {type(func).__name__}")

    @functools.wraps(func)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        from .. import random as vrandom

        if isinstance(in_dims, (tuple, list)) and len(in_dims) != len(args):
            raise ValueError(f"vmap: in_dims has {len(in_dims)} entries but the function "
                             f"got {len(args)} positional arguments")
        leaves = _leaves(list(args))
        dims = _broadcast_dims(in_dims if not isinstance(in_dims, (tuple, list))
                               else list(in_dims), list(args), "vmap: in_dims")
        size = _batch_size(leaves, dims)
        start = vrandom.get_state() if randomness != "different" else None
        results = []
        for i in range(size):
            if randomness == "same":
                vrandom.set_state(start)
            picked = [_select(x, d, i) for x, d in zip(leaves, dims, strict=True)]
            call_args = _rebuild(list(args), iter(picked))
            results.append(func(*call_args, **kwargs))
            if randomness == "error" and vrandom.get_state() != start:
                vrandom.set_state(start)
                raise RuntimeError("vmap: the function drew random numbers; pass "
                                   "randomness='different' (each element its own numbers) "
                                   "or 'same' (one draw shared by all elements)")
        return _stack(results, out_dims)

    return wrapped
