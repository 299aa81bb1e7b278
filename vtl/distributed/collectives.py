"""Collectives on vtl tensors: ``all_reduce``, ``broadcast``, ``all_gather``, ``reduce_scatter``.

As in PyTorch they work in place: the tensor passed in holds the result
afterwards (on the NumPy backend in its own buffer, so views see it; on other
backends the tensor's storage is replaced). They run outside autograd (no
graph is recorded) and bump the tensor's version counter, so a tensor saved
for a backward pass cannot be changed unnoticed.

The engine follows the tensor's backend: NumPy -> MPI on the array's buffer;
CuPy -> NCCL (when the group has it), else staged through host memory and
MPI; wgpu and any other backend -> staged through host memory and MPI.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._tensor import Tensor
from ..backends._dtypes import kind as _dkind
from . import group as _g

__all__ = ["all_reduce", "broadcast", "all_gather", "all_gather_into_tensor",
           "reduce_scatter", "reduce_scatter_tensor", "ReduceOp"]


class ReduceOp:
    """The reduction names (PyTorch's ``ReduceOp.SUM`` ...); plain strings work too."""

    SUM = "sum"
    MEAN = AVG = "mean"
    PRODUCT = "prod"
    MAX = "max"
    MIN = "min"


_OPS = ("sum", "mean", "prod", "max", "min")


def _check_op(op: Any, fname: str, dtype: np.dtype) -> str:
    op = op.lower() if isinstance(op, str) else op
    if op == "avg":
        op = "mean"
    if op not in _OPS:
        raise ValueError(f"{fname}: op must be one of {_OPS}, got {op!r}")
    if dtype == np.bool_ and op not in ("max", "min"):
        raise TypeError(f"{fname}: op={op!r} is not defined for bool tensors (use 'max' for "
                        "any, 'min' for all)")
    if _dkind(dtype) == "c" and op in ("max", "min"):
        raise TypeError(f"{fname}: op={op!r} is not defined for complex tensors")
    if op == "mean" and _dkind(dtype) not in "fc":
        raise TypeError(f"{fname}: op='mean' needs a floating-point or complex tensor, got "
                        f"dtype {dtype}; use 'sum'")
    return op


def _check_tensor(t: Any, fname: str, what: str = "tensor") -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(f"{fname}: {what} must be a vtl.Tensor, got {type(t).__name__}")
    return t


def _route(dev: Any, fname: str) -> tuple[Any, bool]:
    """``(engine, staged)``: the engine for tensors on ``dev`` and whether their data
    must be copied through host memory."""
    g = _g._require(fname)
    name = dev.backend_name
    if name == "numpy":
        return g.host, False
    if name == "cupy" and g.use_nccl:
        return g.nccl_engine(dev.index), False
    return g.host, True


def _to_engine(raw: Any, dev: Any, staged: bool) -> Any:
    """A contiguous buffer of the engine's kind holding ``raw``'s values."""
    if staged:
        return np.ascontiguousarray(dev.backend.to_host(raw)).copy()
    if dev.backend_name == "numpy":
        ok = raw.flags.c_contiguous and raw.flags.writeable
        return raw if ok else np.ascontiguousarray(raw).copy()
    xp = dev.xp
    return raw if raw.flags.c_contiguous else xp.asarray(raw, copy=True)


def _store(t: Tensor, buf: Any, staged: bool) -> None:
    """Make ``t`` hold ``buf``'s values (in its own buffer where it can) and bump its version."""
    raw = t._data
    dev = t._device
    if staged:
        t._data = dev.backend.from_host(np.ascontiguousarray(buf), dev.index)
    elif buf is not raw:
        if dev.backend_name == "numpy" and raw.flags.writeable:
            np.copyto(raw, buf.reshape(raw.shape))
        else:
            t._data = buf.reshape(raw.shape)
    t._bump_version()


def _reduce_raw(raw: Any, dev: Any, op: str, fname: str, *, inplace_ok: bool = False) -> Any:
    """All-reduce a raw array of ``dev``; returns a raw array of ``dev`` with the result
    (``raw`` itself when ``inplace_ok`` and the engine works on ``dev``'s memory)."""
    eng, staged = _route(dev, fname)
    buf = _to_engine(raw, dev, staged) if not inplace_ok or staged else raw
    eng.allreduce(buf, "sum" if op == "mean" else op, fname)
    if op == "mean" and eng.world_size > 1:
        buf /= eng.world_size
    return dev.backend.from_host(buf, dev.index) if staged else buf


def all_reduce(tensor: Tensor, op: str = "sum") -> Tensor:
    """Reduce ``tensor`` over all ranks, in place; every rank gets the result.

    ``op``: ``"sum"``, ``"mean"`` (floating point; the sum divided by the world
    size), ``"prod"``, ``"max"``, ``"min"`` (bool tensors: ``"max"`` = any,
    ``"min"`` = all). Returns ``tensor``.
    """
    t = _check_tensor(tensor, "all_reduce")
    op = _check_op(op, "all_reduce", np.dtype(t.dtype))
    dev = t._device
    eng, staged = _route(dev, "all_reduce")
    buf = _to_engine(t._data, dev, staged)
    eng.allreduce(buf, "sum" if op == "mean" else op, "all_reduce")
    if op == "mean" and eng.world_size > 1:
        buf /= eng.world_size
    _store(t, buf, staged)
    return t


def broadcast(tensor: Tensor, src: int = 0) -> Tensor:
    """Copy rank ``src``'s ``tensor`` into ``tensor`` on every rank, in place."""
    t = _check_tensor(tensor, "broadcast")
    dev = t._device
    eng, staged = _route(dev, "broadcast")
    if isinstance(src, bool) or not isinstance(src, int) or not 0 <= src < eng.world_size:
        raise ValueError(f"broadcast: src must be a rank in [0, {eng.world_size}), got {src!r}")
    buf = _to_engine(t._data, dev, staged)
    eng.broadcast(buf, src, "broadcast")
    _store(t, buf, staged)
    return t


def _gather_buf(t: Tensor, fname: str) -> tuple[Any, Any]:
    dev = t._device
    eng, staged = _route(dev, fname)
    return eng.allgather(_to_engine(t._data, dev, staged), fname), staged


def _check_like(out: Any, shape: tuple, t: Tensor, fname: str, what: str) -> None:
    _check_tensor(out, fname, what)
    if tuple(out.shape) != tuple(shape) or out.dtype != t.dtype or out._device is not t._device:
        raise ValueError(f"{fname}: {what} must have shape {tuple(shape)}, dtype {t.dtype} and "
                         f"device {t.device}; got shape {tuple(out.shape)}, dtype {out.dtype}, "
                         f"device {out.device}")


def all_gather(tensor_list: list[Tensor], tensor: Tensor) -> list[Tensor]:
    """Fill ``tensor_list[r]`` with rank ``r``'s ``tensor`` (PyTorch's signature).

    ``tensor_list`` holds ``world_size`` tensors of ``tensor``'s shape, dtype and
    device; each is overwritten in place. Returns ``tensor_list``.
    """
    t = _check_tensor(tensor, "all_gather")
    n = _g._require("all_gather").host.world_size
    if not isinstance(tensor_list, list) or len(tensor_list) != n:
        raise ValueError(f"all_gather: tensor_list must be a list of world_size={n} tensors, "
                         f"got {type(tensor_list).__name__} of length "
                         f"{len(tensor_list) if hasattr(tensor_list, '__len__') else '?'}")
    for i, o in enumerate(tensor_list):
        _check_like(o, t.shape, t, "all_gather", f"tensor_list[{i}]")
    recv, staged = _gather_buf(t, "all_gather")
    for i, o in enumerate(tensor_list):
        _store(o, recv[i].copy() if not staged else recv[i], staged)
    return tensor_list


def all_gather_into_tensor(output: Tensor, input: Tensor) -> Tensor:  # noqa: A002
    """Concatenate every rank's ``input`` along axis 0 into ``output`` (shape
    ``(world_size * input.shape[0], ...)``, or ``(world_size, ...)`` for a 0-d input)."""
    t = _check_tensor(input, "all_gather_into_tensor", "input")
    n = _g._require("all_gather_into_tensor").host.world_size
    shape = (n,) if t.ndim == 0 else (n * t.shape[0], *t.shape[1:])
    _check_like(output, shape, t, "all_gather_into_tensor", "output")
    recv, staged = _gather_buf(t, "all_gather_into_tensor")
    _store(output, recv.reshape(shape), staged)
    return output


def _scatter_buf(send: Any, t: Tensor, op: str, fname: str) -> tuple[Any, bool]:
    dev = t._device
    eng, staged = _route(dev, fname)
    recv = eng.reduce_scatter(send, "sum" if op == "mean" else op, fname)
    if op == "mean" and eng.world_size > 1:
        recv /= eng.world_size
    return recv, staged


def reduce_scatter_tensor(output: Tensor, input: Tensor, op: str = "sum") -> Tensor:  # noqa: A002
    """Reduce ``input`` (shape ``(world_size * k, ...)``) over ranks and give rank ``r``
    rows ``r*k .. (r+1)*k - 1`` of the result, in ``output`` (shape ``(k, ...)``)."""
    t = _check_tensor(input, "reduce_scatter_tensor", "input")
    n = _g._require("reduce_scatter_tensor").host.world_size
    op = _check_op(op, "reduce_scatter_tensor", np.dtype(t.dtype))
    if t.ndim == 0 or t.shape[0] % n:
        raise ValueError(f"reduce_scatter_tensor: input's first axis must be a multiple of "
                         f"world_size={n}, got shape {tuple(t.shape)}")
    k = t.shape[0] // n
    _check_like(output, (k, *t.shape[1:]), t, "reduce_scatter_tensor", "output")
    dev = t._device
    _, staged = _route(dev, "reduce_scatter_tensor")
    send = _to_engine(t._data, dev, staged).reshape((n, k, *t.shape[1:]))
    recv, staged = _scatter_buf(send, t, op, "reduce_scatter_tensor")
    _store(output, recv, staged)
    return output


def reduce_scatter(output: Tensor, input_list: Sequence[Tensor], op: str = "sum") -> Tensor:
    """Reduce ``input_list[r]`` over ranks into rank ``r``'s ``output`` (PyTorch's signature:
    ``input_list`` holds ``world_size`` tensors of ``output``'s shape)."""
    o = _check_tensor(output, "reduce_scatter", "output")
    n = _g._require("reduce_scatter").host.world_size
    if len(input_list) != n:
        raise ValueError(f"reduce_scatter: input_list must hold world_size={n} tensors, got "
                         f"{len(input_list)}")
    for i, x in enumerate(input_list):
        _check_like(x, o.shape, o, "reduce_scatter", f"input_list[{i}]")
    op = _check_op(op, "reduce_scatter", np.dtype(o.dtype))
    dev = o._device
    _, staged = _route(dev, "reduce_scatter")
    parts = [_to_engine(x._data, dev, staged) for x in input_list]
    xp = np if staged or dev.backend_name == "numpy" else dev.xp
    send = xp.stack(parts)
    recv, staged = _scatter_buf(send, o, op, "reduce_scatter")
    _store(o, recv, staged)
    return o
