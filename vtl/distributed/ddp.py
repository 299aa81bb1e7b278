"""``DistributedDataParallel``: a Module wrapper that averages gradients over ranks.

How gradients are synchronised (the ChainerMN / PyTorch-DDP pattern):

* Parameters that require grad are grouped, in reverse registration order
  (roughly the order their gradients are produced), into buckets of one device
  and dtype of at most ``bucket_cap_mb`` MiB.
* Each parameter carries a gradient hook (``Tensor.register_hook``). A forward
  pass through the wrapper (with grad mode on and outside ``no_sync()``) arms
  the reducer; during the following ``backward()`` the hooks count the
  gradients arriving. When every parameter of a bucket has its gradient, the
  bucket's gradients are packed into one flat buffer, averaged over the ranks
  with one all-reduce, and unpacked back into ``.grad``. Buckets are reduced
  in index order on every rank (a bucket that completes early waits for the
  ones before it), so all ranks issue the same collectives in the same order.
* The reduced value of a parameter is its whole ``.grad``: what this backward
  adds to what earlier backwards under ``no_sync()`` accumulated (PyTorch's
  gradient-accumulation semantics).
* Parameters that get no gradient in a backward: with
  ``find_unused_parameters=True`` the forward pass walks the output's graph and
  counts the parameters it cannot reach as arrived (their gradient is zero, or
  what ``.grad`` already holds); otherwise their bucket stays incomplete, the
  next forward raises a ``RuntimeError`` naming them, and
  :meth:`DistributedDataParallel.sync_gradients` (call it before
  ``optimizer.step()``) completes the reduction by hand.

One backward per forward; ``vtl.autograd.grad`` (which does not touch
``.grad``) is not synchronised.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import vtl

from .._tensor import Tensor
from ..autograd.graph import edge_node
from ..nn.modules.module import Module
from . import collectives as _c
from . import group as _g
from ._buckets import Bucket, make_buckets

__all__ = ["DistributedDataParallel"]


def _tensors_in(obj: Any) -> Iterator[Tensor]:
    if isinstance(obj, Tensor):
        yield obj
    elif isinstance(obj, (tuple, list)):
        for o in obj:
            yield from _tensors_in(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _tensors_in(o)


def _reachable_leaves(outputs: Any) -> set[int]:
    """``id`` of every leaf tensor a backward from ``outputs`` can reach."""
    leaves: set[int] = set()
    seen: set[int] = set()
    stack = []
    for t in _tensors_in(outputs):
        if t._grad_fn is None:
            leaves.add(id(t))
        else:
            stack.append(t._grad_fn)
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for e in node.edges:
            if e is None:
                continue
            child = edge_node(e)
            if child is not None:
                stack.append(child)
            else:
                leaves.add(id(e))
    return leaves


class _Reducer:
    """The bucket bookkeeping of one wrapper."""

    def __init__(self, params: list[Tensor], cap_bytes: int) -> None:
        self.buckets: list[Bucket] = make_buckets(params, cap_bytes)
        self.where = {id(p): b for b in self.buckets for p in b.params}
        self.state = "idle"  # idle | armed | done
        self.fired = False
        self.next = 0

    def arm(self, outputs: Any, find_unused: bool) -> None:
        for b in self.buckets:
            b.reset()
        self.state, self.fired, self.next = "armed", False, 0
        if find_unused:
            used = _reachable_leaves(outputs)
            for b in self.buckets:
                for p in b.params:
                    if id(p) not in used:
                        b.arrived.add(id(p))
                b.complete = len(b.arrived) == len(b.params)

    def missing(self) -> list[Tensor]:
        return [p for b in self.buckets[self.next:] for p in b.params if id(p) not in b.arrived]

    def hook(self, p: Tensor, g: Tensor) -> Tensor | None:
        if self.state != "armed":
            return None
        self.fired = True
        b = self.where[id(p)]
        if id(p) in b.arrived:
            return None
        b.arrived.add(id(p))
        if len(b.arrived) < len(b.params):
            return None
        b.complete = True
        if b.index != self.next:
            return None  # p's gradient accumulates now; the bucket is reduced in turn
        repl = self._reduce(b, p, g)
        self._drain()
        return repl

    def _drain(self) -> None:
        self.next += 1
        while self.next < len(self.buckets) and self.buckets[self.next].complete:
            self._reduce(self.buckets[self.next])
            self.next += 1
        if self.next == len(self.buckets):
            self.state = "done"

    def _reduce(self, b: Bucket, current: Tensor | None = None,
                g: Tensor | None = None) -> Tensor | None:
        grads: list[Tensor | None] = []
        for q in b.params:
            if q is current:  # its hook is running: the engine has not added g yet
                grads.append(g if q.grad is None else q.grad + g)
            else:
                grads.append(q.grad)
        flat = b.pack(grads)
        flat = _c._reduce_raw(flat, b.params[0]._device, "mean", "DistributedDataParallel "
                              f"gradient all_reduce (bucket {b.index})", inplace_ok=True)
        repl = None
        for q, v in zip(b.params, b.unpack(flat), strict=True):
            if q is current:
                q.grad = None  # the engine stores the returned gradient as .grad
                repl = v
            else:
                q.grad = v
        return repl

    def flush(self) -> None:
        """Reduce every bucket not reduced yet, counting missing gradients as arrived."""
        if self.state == "done":
            return
        if self.state == "idle":
            self.next = 0
        for b in self.buckets[self.next:]:
            self._reduce(b)
        self.next = len(self.buckets)
        self.state = "done"


class DistributedDataParallel(Module):
    """Data-parallel training of ``module``: every rank holds a replica, sees its own
    share of each batch, and gets the gradients averaged over all ranks.

    On construction, parameters and buffers are broadcast from rank 0, so all
    replicas start equal. ``forward`` delegates to ``module`` (also reachable as
    ``.module``; ``state_dict`` keys carry the ``module.`` prefix, as in
    PyTorch). After ``loss.backward()`` every parameter's ``.grad`` is the mean
    over ranks (see the module docstring for the bucketed all-reduce), so
    ``optimizer.step()`` keeps the replicas identical. With
    ``broadcast_buffers`` (default) buffers such as BatchNorm statistics are
    re-broadcast from rank 0 before each forward.

    * ``no_sync()``: a context manager; backwards of forwards inside it only
      accumulate ``.grad`` locally (gradient accumulation); the first backward
      after it averages the accumulated gradients.
    * ``sync_gradients()``: finish the averaging by hand (parameters without a
      gradient count as zeros); a no-op once the backward has done it.
    * ``find_unused_parameters``: walk each output's graph so that parameters
      the loss does not use do not stall their bucket.

    Needs :func:`vtl.distributed.init_process_group` first.

    Args:
        module: The model to replicate.
        bucket_cap_mb: Size of the gradient buckets, in MiB (greater than 0).
        broadcast_buffers: Re-broadcast the buffers from rank 0 before each forward.
        find_unused_parameters: Walk each output's graph for parameters the loss does not use.

    Raises:
        TypeError: If ``module`` is not a Module.
        ValueError: If ``bucket_cap_mb`` is not positive.
        RuntimeError: If the process group is not initialised.
    """

    def __init__(self, module: Module, *, bucket_cap_mb: float = 25.0,
                 broadcast_buffers: bool = True, find_unused_parameters: bool = False) -> None:
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel: module must be a vtl.nn.Module, got "
                            f"{type(module).__name__}")
        if not bucket_cap_mb > 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be > 0, got "
                             f"{bucket_cap_mb!r}")
        _g._require("DistributedDataParallel")
        self.module = module
        self.broadcast_buffers = bool(broadcast_buffers)
        self.find_unused_parameters = bool(find_unused_parameters)
        self.bucket_cap_mb = float(bucket_cap_mb)
        self._require_sync = True
        params = [p for p in module.parameters() if p.requires_grad]
        self._sync_state(list(module.parameters()) + list(module.buffers()))
        cap = int(self.bucket_cap_mb * 2**20)
        self._reducer = _Reducer(list(reversed(params)), cap)
        self._handles = [p.register_hook(self._hook_for(p)) for p in params]

    def _hook_for(self, p: Tensor) -> Any:
        def hook(g: Tensor) -> Tensor | None:
            return self._reducer.hook(p, g)

        return hook

    def _sync_state(self, tensors: list[Tensor]) -> None:
        with vtl.no_grad():
            for t in tensors:
                if t is not None:
                    _c.broadcast(t, 0)

    @property
    def buckets(self) -> list[list[Tensor]]:
        """The parameters of each gradient bucket, in reduction order."""
        return [list(b.params) for b in self._reducer.buckets]

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        r = self._reducer
        if r.state == "armed" and r.fired:
            names = {id(p): n for n, p in self.module.named_parameters()}
            miss = [names.get(id(p), "?") for p in r.missing()]
            r.state = "idle"
            raise RuntimeError(
                "DistributedDataParallel: the previous backward produced no gradient for "
                f"parameter(s) {miss}, so their gradients were not averaged over ranks. Pass "
                "find_unused_parameters=True, or call sync_gradients() after backward() and "
                "before optimizer.step()")
        r.state = "idle"
        if self.broadcast_buffers and _g.get_world_size() > 1:
            self._sync_state(list(self.module.buffers()))
        out = self.module(*args, **kwargs)
        if self._require_sync and vtl.is_grad_enabled():
            r.arm(out, self.find_unused_parameters)
        return out

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Inside: backwards accumulate gradients locally, without communication."""
        prev = self._require_sync
        self._require_sync = False
        try:
            yield
        finally:
            self._require_sync = prev

    def sync_gradients(self) -> None:
        """Average ``.grad`` over ranks now, for whatever the last backward has not
        reduced (all of it when no forward armed the reducer); every rank must call it."""
        self._reducer.flush()
