"""Activation checkpointing (PyTorch's ``torch.utils.checkpoint``): trade compute for memory.

``checkpoint(fn, *args)`` returns what ``fn(*args)`` returns, but the graph recorded
inside ``fn`` is not kept: only the inputs are. When backward reaches the result, ``fn``
runs again, with grad mode on and the same random numbers (the state of the default
``vtl.random`` generator is saved at the forward and restored for the recomputation), and
the gradients flow through that recomputed graph. The gradients are those of
``fn(*args)`` without checkpointing, dropout included.

::

    def block(x):
        return layer2(vtl.nn.functional.dropout(vtl.nn.functional.relu(layer1(x)), 0.1))

    y = vtl.utils.checkpoint.checkpoint(block, x)          # intermediates of block dropped
    loss = vtl.sum(y ** 2); loss.backward()                # block runs again here
    out = checkpoint_sequential(model, 4, x)               # a Sequential in 4 segments

Two variants, as in PyTorch (``use_reentrant``):

* ``use_reentrant=False`` (the default): the forward runs with grad mode on, so that the
  graph of ``fn`` tells which tensors it reads -- its tensor arguments, and the tensors it
  reaches otherwise (a module's parameters, a tensor from an enclosing scope); that graph
  is then dropped, and one node that stands for ``fn`` connects the outputs to exactly
  those tensors. So gradients reach parameters ``fn`` closes over, also through
  ``vtl.autograd.grad`` and ``backward(inputs=...)``, even when no argument requires
  grad; ``create_graph=True`` (higher-order gradients) works through it; keyword
  arguments and outputs of any nesting of tuples, lists and dicts (non-tensor values pass
  through) are accepted. The memory of ``fn``'s intermediates is held while ``fn`` runs
  and released when it returns, as with the recomputation at backward time, so the peak
  is the same.
* ``use_reentrant=True``: the forward runs under ``no_grad``; the node's inputs are only
  the tensor arguments. At backward the recomputed graph is differentiated by a nested
  ``backward()`` that accumulates into the ``.grad`` of every leaf ``fn`` reads (as
  PyTorch's reentrant variant does): if no tensor argument requires grad, nothing is
  recorded (and a warning says so). As in PyTorch, it works with ``.backward()`` only:
  ``vtl.autograd.grad`` and ``backward(inputs=...)`` through it raise ``RuntimeError``.
  Keyword arguments are refused.

The random state: vtl has one default generator for every backend and device (Philox,
counter-based), so saving and restoring its state covers dropout on numpy, cupy and wgpu
alike. Draws from a user's own ``vtl.random.Generator`` inside ``fn`` are not replayed.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import vtl

from .._tensor import Tensor
from ..autograd import graph
from ..autograd.grad_mode import state as _grad_state
from ..backends._dtypes import kind as _dkind

__all__ = ["checkpoint", "checkpoint_sequential"]

_DETERMINISM_MODES = ("default", "none")


def _noop_context_fn() -> tuple[Any, Any]:
    return contextlib.nullcontext(), contextlib.nullcontext()


# -- outputs of any nesting --------------------------------------------------------------------
def _flatten(obj: Any, out: list[Tensor]) -> Any:
    """Replace each tensor in ``obj`` (tuples, lists, dicts) by its index in ``out``."""
    if isinstance(obj, Tensor):
        out.append(obj)
        return _Slot(len(out) - 1)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # named tuple
        return type(obj)(*(_flatten(o, out) for o in obj))
    if isinstance(obj, (tuple, list)):
        return type(obj)(_flatten(o, out) for o in obj)
    if isinstance(obj, dict):
        return type(obj)((k, _flatten(v, out)) for k, v in obj.items())
    return obj


def _unflatten(obj: Any, tensors: list[Tensor]) -> Any:
    if isinstance(obj, _Slot):
        return tensors[obj.index]
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_unflatten(o, tensors) for o in obj))
    if isinstance(obj, (tuple, list)):
        return type(obj)(_unflatten(o, tensors) for o in obj)
    if isinstance(obj, dict):
        return type(obj)((k, _unflatten(v, tensors)) for k, v in obj.items())
    return obj


class _Slot:
    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index


# -- the random state ------------------------------------------------------------------------
class _RngState:
    """The default generator's state at the forward; :meth:`replay` runs code with it and
    puts the generator back where it was afterwards."""

    def __init__(self, preserve: bool) -> None:
        self.state = vtl.random.get_state() if preserve else None

    @contextlib.contextmanager
    def replay(self) -> Any:
        if self.state is None:
            yield
            return
        now = vtl.random.get_state()
        vtl.random.set_state(self.state)
        try:
            yield
        finally:
            vtl.random.set_state(now)


def _stand_ins(args: tuple, positions: list[int]) -> list[Any]:
    """``args`` with each tensor replaced by a detached leaf sharing its data (requiring
    grad where the argument does)."""
    out = list(args)
    for i in positions:
        a = args[i]
        d = a.detach()
        if a._requires_grad:
            d.requires_grad_(True)
        out[i] = d
    return out


def _check_recomputed(first: list[Any], again: list[Tensor], mode: str) -> None:
    if mode == "none":
        return
    if len(first) != len(again):
        raise RuntimeError(f"checkpoint: the recomputed function returned {len(again)} "
                           f"tensor(s), the forward {len(first)}; a checkpointed function must "
                           "do the same work when it runs again")
    for i, (a, b) in enumerate(zip(first, again, strict=True)):
        if tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype or a.device != b.device:
            raise RuntimeError(
                f"checkpoint: recomputed output {i} has shape {tuple(b.shape)}, dtype "
                f"{b.dtype} on {b.device}; the forward gave shape {tuple(a.shape)}, dtype "
                f"{a.dtype} on {a.device}. A checkpointed function must do the same work "
                "when it runs again (pass determinism_check='none' to skip this check)")


# -- use_reentrant=False ----------------------------------------------------------------------
def _boundary(outputs: list[Tensor], marker: int, stand_in_ids: dict[int, int]
              ) -> tuple[list[int], list[Tensor], list[tuple[Any, int]]]:
    """What the graph recorded since ``marker`` (node keys count down) reads from outside:
    the positions of the argument stand-ins, the other leaves (e.g. parameters) and the
    (node, output index) of non-leaf tensors made before, each once, in order found."""
    arg_pos: dict[int, None] = {}
    leaves: dict[int, Tensor] = {}
    external: dict[tuple[Any, int], None] = {}
    seen: set[int] = set()
    stack: list[Any] = []

    def visit(e: Any) -> None:
        if e is None:
            return
        node, idx = graph.edge_target(e)
        if isinstance(node, graph.Node):
            if node.key > marker:  # made before the function ran
                external[(node, idx)] = None
            elif id(node) not in seen:
                seen.add(id(node))
                stack.append(node)
        elif id(node) in stand_in_ids:
            arg_pos[stand_in_ids[id(node)]] = None
        else:
            leaves[id(node)] = node

    for o in outputs:
        if o._requires_grad:
            f = o._grad_fn
            visit(o if f is None else (f, o._out_idx) if f.multi else f)
    while stack:
        for e in stack.pop().edges:
            visit(e)
    return list(arg_pos), list(leaves.values()), list(external)


def _proxy(node: Any, idx: int) -> Tensor:
    """A tensor standing for output ``idx`` of ``node`` (a non-leaf made before the
    checkpointed function ran): the graph position of the real one, zero data (a
    broadcast view of one element)."""
    shape, dtype = node.meta(idx)
    dev = node.device
    xp = dev.xp
    zero = xp.zeros((), dtype=dtype, device=dev.backend.native_device(dev.index))
    return Tensor._from_node(xp.broadcast_to(zero, shape), dev, node, idx)


@contextlib.contextmanager
def _cut_at(external: list[tuple[Any, int]]) -> Any:
    """Make the nodes in ``external`` look like leaves (no edges, no hooks) for a nested
    backward that must stop at them, then restore them."""
    saved = []
    for node, _ in external:
        if all(s[0] is not node for s in saved):
            saved.append((node, node.edges, node.hooks))
            node.edges = (None,) * len(node.edges)
            node.hooks = None
    try:
        yield
    finally:
        for node, edges, hooks in saved:
            node.edges = edges
            node.hooks = hooks


def _checkpoint_graph(function: Callable, args: tuple, kwargs: dict, preserve: bool,
                      context_fn: Callable, determinism_check: str) -> Any:
    from .._ops._core import record_multi, same_device

    rng = _RngState(preserve)
    positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
    grad_pos = [i for i in positions if args[i]._requires_grad]
    stand = _stand_ins(args, positions)
    stand_in_ids = {id(stand[i]): i for i in positions}
    fwd_ctx, recompute_ctx = context_fn()
    marker = graph._next_key()
    with fwd_ctx:
        result = function(*stand, **kwargs)
    flat: list[Tensor] = []
    structure = _flatten(result, flat)
    arg_pos, leaves, external = _boundary(flat, marker, stand_in_ids)
    diff = [o._requires_grad and _dkind(o._data.dtype) in "fc" for o in flat]
    # the recorded graph goes with these references; only the outputs' data stay
    metas = [_Meta(o) for o in flat]
    plain = [o.detach() for o in flat]
    del result
    flat.clear()
    if not any(diff):
        return _unflatten(structure, plain)
    proxies = [_proxy(node, idx) for node, idx in external]
    inputs: list[Tensor] = [args[i] for i in arg_pos] + leaves + proxies
    dev = same_device("checkpoint", [o for o, d in zip(plain, diff, strict=True) if d])

    def vjp(gs: Any, _outs: Any) -> list[Any]:
        if not isinstance(gs, list):  # a node of one output gets its gradient alone
            gs = [gs]
        create_graph = _grad_state.enabled
        # the arguments that require grad enter as views of themselves: the gradients of
        # the recomputed graph then depend on the real arguments (create_graph), and the
        # nested backward stops at the views
        again_args = list(args)
        with vtl.enable_grad():
            for i in grad_pos:
                again_args[i] = vtl.reshape(args[i], args[i].shape)
        views = [(again_args[i]._grad_fn, 0) for i in grad_pos]
        with rng.replay(), vtl.enable_grad(), recompute_ctx:
            again_result = function(*again_args, **kwargs)
        again: list[Tensor] = []
        _flatten(again_result, again)
        _check_recomputed(metas, again, determinism_check)
        roots, grads = [], []
        for o, g, d in zip(again, gs, diff, strict=True):
            if g is not None and d and o._requires_grad:
                roots.append(o)
                grads.append(g)
        targets = [again_args[i] for i in arg_pos] + leaves + proxies
        if not roots:
            return [None] * len(targets)
        with _cut_at(external + views):
            res = vtl.autograd.grad(roots, targets, grad_outputs=grads, allow_unused=True,
                                    create_graph=create_graph, retain_graph=create_graph)
        return list(res)

    outs = record_multi([o._data for o in plain], dev, "CheckpointBackward", inputs, vjp,
                        differentiable=diff)
    return _unflatten(structure, list(outs))


class _Meta:
    """Shape, dtype and device of a forward output (for the recomputation check)."""

    __slots__ = ("shape", "dtype", "device")

    def __init__(self, t: Tensor) -> None:
        self.shape, self.dtype, self.device = tuple(t.shape), t.dtype, t.device


# -- use_reentrant=True -----------------------------------------------------------------------
def _checkpoint_reentrant(function: Callable, args: tuple, preserve: bool,
                          determinism_check: str) -> Any:
    from .._ops._core import record_multi, same_device

    rng = _RngState(preserve)
    positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
    with vtl.no_grad():
        result = function(*args)
    needs = [i for i in positions if args[i]._requires_grad]
    if not needs:
        warnings.warn("checkpoint(use_reentrant=True): none of the inputs have "
                      "requires_grad=True. Gradients will be None", UserWarning, stacklevel=3)
        return result
    flat: list[Tensor] = []
    structure = _flatten(result, flat)
    diff = [_dkind(o._data.dtype) in "fc" for o in flat]
    if not flat:
        return result
    metas = [_Meta(o) for o in flat]
    dev = same_device("checkpoint", [*flat, *(args[i] for i in needs)])

    def vjp(gs: Any, _outs: Any) -> list[Any]:
        if graph.selective[0]:
            raise RuntimeError(
                "checkpoint(use_reentrant=True) is not compatible with vtl.autograd.grad() or "
                "with backward(inputs=...): its recomputed forward runs a full backward into "
                "the leaves' .grad; use .backward() without inputs, or use_reentrant=False"
            )
        if not isinstance(gs, list):  # a node of one output gets its gradient alone
            gs = [gs]
        create_graph = _grad_state.enabled
        again_args = _stand_ins(args, positions)
        with rng.replay(), vtl.enable_grad():
            again_result = function(*again_args)
        again: list[Tensor] = []
        _flatten(again_result, again)
        _check_recomputed(metas, again, determinism_check)
        roots, grads = [], []
        for o, g, d in zip(again, gs, diff, strict=True):
            if g is not None and d and o._requires_grad:
                roots.append(o)
                grads.append(g)
        if not roots:
            raise RuntimeError("checkpoint(use_reentrant=True): none of the outputs has "
                               "requires_grad=True; this checkpoint() is not necessary")
        vtl.autograd.backward(roots, grads, create_graph=create_graph)
        return [again_args[i].grad for i in needs]

    outs = record_multi([o._data for o in flat], dev, "CheckpointFunctionBackward",
                        [args[i] for i in needs], vjp, differentiable=diff)
    return _unflatten(structure, list(outs))


# -- the public functions ---------------------------------------------------------------------
def checkpoint(function: Callable[..., Any], *args: Any, use_reentrant: bool | None = False,
               preserve_rng_state: bool = True,
               context_fn: Callable[[], tuple[Any, Any]] = _noop_context_fn,
               determinism_check: str = "default", **kwargs: Any) -> Any:
    """Run ``function(*args, **kwargs)`` without keeping its intermediate results; they are
    recomputed when backward reaches its outputs (see the module docstring).

    * ``use_reentrant`` (default ``False``): the variant; ``None`` means ``False``.
    * ``preserve_rng_state`` (default ``True``): replay the default ``vtl.random``
      generator's state from the forward during the recomputation (the same dropout
      masks); ``False`` skips saving it (the recomputation then draws new numbers).
    * ``context_fn``: returns two context managers, entered around the forward and the
      recomputation (``use_reentrant=False`` only).
    * ``determinism_check``: ``"default"`` raises ``RuntimeError`` when the recomputed
      outputs differ in number, shape, dtype or device from the forward's; ``"none"``
      skips that.

    With grad mode off, ``function`` simply runs. Returns what ``function`` returns.
    """
    if not callable(function):
        raise TypeError(f"checkpoint() expects a callable, got {type(function).__name__}")
    if determinism_check not in _DETERMINISM_MODES:
        raise ValueError(f"checkpoint(): determinism_check should be one of "
                         f"{list(_DETERMINISM_MODES)}, but got {determinism_check!r}")
    if use_reentrant is None:
        use_reentrant = False
    if use_reentrant:
        if context_fn is not _noop_context_fn:
            raise ValueError("Passing `context_fn` is only supported when use_reentrant=False.")
        if kwargs:
            raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
        if not _grad_state.enabled:
            return function(*args)
        return _checkpoint_reentrant(function, args, bool(preserve_rng_state),
                                     determinism_check)
    if not _grad_state.enabled:
        return function(*args, **kwargs)
    return _checkpoint_graph(function, args, kwargs, bool(preserve_rng_state), context_fn,
                             determinism_check)


def checkpoint_sequential(functions: Any, segments: int, input: Any,  # noqa: A002
                          use_reentrant: bool | None = False, **kwargs: Any) -> Any:
    """Run a sequence of one-input functions (a :class:`vtl.nn.Sequential`, or a list of
    modules or callables) in ``segments`` chunks, each but the last under
    :func:`checkpoint` (the last one's graph is kept, as in PyTorch: its backward comes
    first). Only ``preserve_rng_state`` is accepted as a further keyword argument.
    """
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    from ..nn.modules.container import Sequential

    if isinstance(functions, Sequential):
        functions = list(functions.children())
    elif isinstance(functions, Iterable):
        functions = list(functions)
    else:
        raise TypeError(f"checkpoint_sequential() expects a Sequential or a list of functions, "
                        f"got {type(functions).__name__}")
    if isinstance(segments, bool) or not isinstance(segments, int) or segments < 1:
        raise ValueError(f"checkpoint_sequential(): segments must be a positive int, got "
                         f"{segments!r}")
    if not functions:
        raise ValueError("checkpoint_sequential(): no functions to run")

    def run_function(start: int, end: int) -> Callable[[Any], Any]:
        def forward(x: Any) -> Any:
            for j in range(start, end + 1):
                x = functions[j](x)
            return x
        return forward

    segment_size = len(functions) // segments
    end = -1
    if segment_size:
        for start in range(0, segment_size * (segments - 1), segment_size):
            end = start + segment_size - 1
            input = checkpoint(run_function(start, end), input, use_reentrant=use_reentrant,
                               preserve_rng_state=preserve)
    return run_function(end + 1, len(functions) - 1)(input)
