"""The recorded graph and the reverse-mode engine.

Every differentiable op that sees an input requiring grad creates a
:class:`Node`: the op's vector-Jacobian product (VJP) rule plus edges to where
the input gradients go (another node's output, or a leaf tensor). The rule is
a closure written with vtl functions, so running it with grad mode on records
the graph of the gradient itself (``create_graph=True``).

A node may also carry a *raw* rule: the same vector-Jacobian product computed
on the backend's raw arrays (``raw(vjp, g_data) -> one raw array or None per
input``, each already of the input's shape and dtype; it gets the node's Tensor
rule too, so a rule that is a ``functools.partial`` can lend its arguments to
the raw one instead of a second closure being made per op). A plain backward (no
``create_graph``, gradients accumulated into ``.grad``) passes raw arrays from
node to node and wraps them into Tensors only where a Tensor is needed: for a
node without a raw rule, for hooks and retained gradients, and for the leaves'
``.grad``.

What lives where: this module owns the :class:`Node` class, the engine and the
walkers' view of edges (:func:`edge_node`, :func:`edge_target` read them back);
``vtl._ops._core`` is the only module that encodes edges and makes nodes (its
``record``, ``record_op``, ``record_multi`` and ``edge``), and ``vtl._tensor`` tells
the engine how to make tensors (:func:`register_tensor_type`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from heapq import heappop, heappush
from typing import TYPE_CHECKING, Any

from ..backends._dtypes import kind as _dkind
from . import grad_mode

if TYPE_CHECKING:
    from .._tensor import Tensor


class RemovableHandle:
    """Returned by ``register_hook``; ``remove()`` unregisters the hook.

    Args:
        hooks: The list the hook was added to.
        fn: The hook.
    """

    __slots__ = ("_hooks", "_fn")

    def __init__(self, hooks: list, fn: Callable) -> None:
        self._hooks = hooks
        self._fn = fn

    def remove(self) -> None:
        if self._fn in self._hooks:
            self._hooks.remove(self._fn)


# Nodes are numbered in creation order, counting down: an op's inputs always have
# larger keys than the op itself, so the engine, popping the smallest key from a
# heap of the nodes that have received a gradient, runs every node after all
# the nodes that feed it (a topological order without a graph traversal first).
_next_key = itertools.count(0, -1).__next__
# How many in-place changes tensors have seen, in all (one-element list). A tensor's
# version counter is ``[version, epoch]``: its own count and this count at its last
# change. A node records the count; while it is unchanged at backward, none of the
# node's saved tensors can have changed, and the per-tensor check is skipped.
epoch = [0]
#: whether anomaly detection is on (``vtl.autograd.detect_anomaly``): backward then takes
#: the general path and checks each rule's gradients
anomaly = [False]
#: node key -> the stack that recorded the node, while anomaly detection is on
anomaly_traces: dict[int, str] = {}


def bump_version(t: Tensor) -> None:
    """Count an in-place change of ``t``'s storage (for the saved-tensor checks)."""
    c = t._version_counter()
    c[0] += 1
    e = epoch[0] + 1
    epoch[0] = c[1] = e


def bump_versions(tensors: Any) -> None:
    """:func:`bump_version` of each tensor of ``tensors``, in order (an optimizer's step)."""
    e = epoch[0]
    for t in tensors:
        c = t._vc
        if c is None:
            c = t._version_counter()
        e += 1
        c[0] += 1
        c[1] = e
    epoch[0] = e


_object_new = object.__new__


class Node:
    """One recorded operation (``tensor.grad_fn``).

    ``edges`` has one entry per input: ``None`` (no gradient needed), the leaf tensor,
    the node that made it (an op with one output), or ``(node, output_index)`` (an op
    with several outputs, ``node.multi``); ``vtl._ops._core.edge`` makes one,
    :func:`edge_target` and :func:`edge_node` read one. Ops record nodes through
    ``vtl._ops._core`` (``record`` and its kin), not with this constructor.

    Args:
        name: The op's name, e.g. ``'MulBackward'``.
        vjp: The backward rule: output gradients to input gradients.
        edges: One entry per input (see above).
        saved: The tensors the rule reads (checked against in-place changes).
        out_meta: ``(shape, dtype)`` of the output, or a tuple of them.
        out_data: The outputs' arrays, where the rule needs them.
        device: The device of the op.
        raw: An optional rule on raw arrays.
    """

    __slots__ = (
        "_name", "vjp", "edges", "saved", "epoch", "out_meta", "out_data",
        "device", "hooks", "retained", "key", "multi", "raw", "__weakref__",
    )

    def __init__(
        self,
        name: str,
        vjp: Callable,
        edges: tuple,
        saved: Sequence[Tensor],
        out_meta: tuple,
        out_data: tuple | None,
        device: Any,
        raw: Callable | None = None,
    ) -> None:
        self._name = name
        self.vjp = vjp
        self.raw = raw
        self.edges = edges
        self.saved = tuple(saved)
        self.epoch = epoch[0]
        self.multi = len(out_meta) != 1
        self.out_meta = out_meta if self.multi else out_meta[0]
        self.out_data = out_data
        self.device = device
        self.hooks: dict[int, list] | None = None
        self.retained: dict[int, Any] | None = None
        self.key = _next_key()

    def meta(self, idx: int) -> tuple:
        """``(shape, dtype)`` of output ``idx`` (``out_meta`` is that pair for a node with
        one output, a tuple of them for several)."""
        return self.out_meta[idx] if self.multi else self.out_meta

    def name(self) -> str:
        """The op's name, e.g. ``'MulBackward'``."""
        return self._name

    @property
    def next_functions(self) -> tuple:
        """``(node_or_leaf, output_index)`` for each input, like PyTorch."""
        return tuple([(None, 0) if e is None else edge_target(e) for e in self.edges])

    def __repr__(self) -> str:
        return f"<{self._name}>"

    def release(self) -> None:
        self.vjp = self.raw = self.out_data = None
        self.saved = ()

    def watch(self, t: Tensor) -> None:
        """Also check ``t``'s version before running the rule (saved outputs: their
        counter, not the tensor, which refers to this node)."""
        self.saved = (*self.saved, t._version_counter())

    def _check_saved(self) -> None:
        """Raise if a saved tensor changed in place since recording (called when some
        tensor did, see :data:`epoch`). ``saved`` holds the tensors, or the version
        counters of saved outputs; a counter is ``[version, epoch of its last change]``."""
        for i, s in enumerate(self.saved):
            c = s if s.__class__ is list else getattr(s, "_vc", None)
            if c is not None and c[1] > self.epoch:
                raise RuntimeError(
                    "one of the tensors needed for gradient computation has been modified "
                    f"by an in-place operation: saved tensor {i} of {self._name} is at "
                    f"version {c[0]}, changed after the op saved it. Compute the update "
                    "out of place, or clone the tensor first."
                )


def edge_target(e: Any) -> tuple[Any, int]:
    """``(node, output_index)`` of a node edge, ``(leaf, 0)`` of a leaf edge."""
    return e if e.__class__ is tuple else (e, 0)


def edge_node(e: Any) -> Node | None:
    """The node an edge leads to (``None`` for a leaf or no edge)."""
    if e.__class__ is Node:
        return e
    return e[0] if e.__class__ is tuple else None


def _freed_error(node: Node) -> RuntimeError:
    return RuntimeError(
        f"trying to backward through the graph a second time ({node._name}): its saved "
        "values were freed after the first backward. Pass retain_graph=True to the first "
        "backward() if you need to backward through the graph again."
    )


def _apply_hooks(hooks: list | None, g: Tensor) -> Tensor:
    if hooks:
        for h in list(hooks):
            r = h(g)
            if r is not None:
                _check_hook_result(h, r, g)
                g = r
    return g


def _check_hook_result(hook: Callable, r: Any, g: Tensor) -> None:
    """Raise unless the hook's replacement gradient ``r`` matches ``g`` (as PyTorch: a hook
    may change a gradient's values, not its shape, dtype or device)."""
    name = getattr(hook, "__name__", type(hook).__name__)
    if not isinstance(r, _tensor_cls):
        raise TypeError(
            f"hook {name!r} returned {type(r).__name__}; expected a vtl.Tensor or None"
        )
    if r._device is not g._device or r._data.shape != g._data.shape \
            or r._data.dtype != g._data.dtype:
        raise ValueError(
            f"hook {name!r} changed the gradient from shape {g.shape}, dtype {g.dtype} on "
            f"{g._device} to shape {r.shape}, dtype {r.dtype} on {r._device}; a hook may "
            "change a gradient's values only"
        )


_state = grad_mode.state
# Whether plain backward checks the shape and dtype of every gradient a raw rule returns.
# The raw rules form their results in the input's shape and dtype (that is their
# contract, and the test suite turns this on to hold them to it); reading an array's
# shape costs a new tuple per edge, so a training step leaves it off. Results of Tensor
# rules and of hooks are always checked.
check_raw_rules = False
# whether any leaf tensor ever got a hook (until then, leaves need no hook lookup)
_leaf_hooks = False


def note_leaf_hook() -> None:
    """Called when a hook is registered on a leaf tensor."""
    global _leaf_hooks
    _leaf_hooks = True


# How the engine makes tensors: set once by register_tensor_type (vtl._tensor imports this
# module, so this module cannot import it; module globals keep the backward loop's lookups
# as cheap as they were).
_wrap: Callable[[Any, Any], Tensor] = None  # type: ignore[assignment]
_from_node: Callable[[Any, Any, Node, int], Tensor] = None  # type: ignore[assignment]
_tensor_cls: type[Tensor] = None  # type: ignore[assignment]


def register_tensor_type(wrap: Callable[[Any, Any], Tensor],
                         from_node: Callable[[Any, Any, Node, int], Tensor],
                         cls: type[Tensor]) -> None:
    """Tell the engine how to make tensors (called once, by ``vtl._tensor``).

    ``wrap(data, device)`` wraps a raw gradient array into a tensor outside the graph,
    ``from_node(data, device, node, idx)`` makes output ``idx`` of ``node`` (a saved
    output handed to a rule), and ``cls`` is the tensor class (leaf gradients are made
    as its instances, and a hook's result must be one).
    """
    global _wrap, _from_node, _tensor_cls
    _wrap, _from_node, _tensor_cls = wrap, from_node, cls


def _collect(roots: Sequence[tuple[Node, int]]) -> dict[Node, int]:
    """Nodes reachable from the roots, with their dependency counts."""
    deps: dict[Node, int] = {}
    stack = []
    for node, _ in roots:
        if node not in deps:
            deps[node] = 0
            stack.append(node)
    while stack:
        node = stack.pop()
        for e in node.edges:
            child = edge_node(e)
            if child is not None:
                if child in deps:
                    deps[child] += 1
                else:
                    deps[child] = 1
                    stack.append(child)
    return deps


def _prune(deps: dict[Node, int], targets: set) -> set[Node]:
    """Nodes from which some target (a leaf id or a (node, idx)) is reachable."""
    useful: dict[Node, bool] = {}
    for start in deps:
        if start in useful:
            continue
        stack = [(start, iter(start.edges))]
        useful[start] = False
        while stack:
            node, it = stack[-1]
            advanced = False
            for e in it:
                if e is None:
                    continue
                if e.__class__ is Node:
                    e = (e, 0)
                if type(e) is tuple:
                    if e in targets:
                        useful[node] = True
                    child = e[0]
                    if child not in useful:
                        useful[child] = False
                        stack.append((child, iter(child.edges)))
                        advanced = True
                        break
                    if useful[child]:
                        useful[node] = True
                elif id(e) in targets:
                    useful[node] = True
            if not advanced:
                stack.pop()
                if stack and useful[node]:
                    useful[stack[-1][0]] = True
    return {n for n, u in useful.items() if u}


#: How many backward passes with ``inputs`` (``vtl.autograd.grad``, ``backward(inputs=)``)
#: are running: a rule that runs its own full backward (reentrant checkpointing) refuses them.
selective = [0]


def run_backward(
    roots: Sequence[Tensor],
    grads: Sequence[Tensor],
    retain_graph: bool,
    create_graph: bool,
    inputs: Sequence[Tensor] | None = None,
    allow_unused: bool = False,
) -> list[Tensor | None] | None:
    """Propagate ``grads`` from ``roots`` back through the graph.

    With ``inputs=None`` gradients accumulate into the ``.grad`` of leaves
    (``Tensor.backward``); otherwise the gradients with respect to ``inputs``
    are returned and no ``.grad`` is touched (``vtl.autograd.grad``).
    """
    capture: dict[Any, Tensor | None] | None = None
    if inputs is not None:
        capture = {}
        for t in inputs:
            if not t.requires_grad:
                raise RuntimeError(
                    "one of the inputs does not require grad, so no gradient can be taken "
                    f"with respect to it (shape {tuple(t.shape)}, dtype {t.dtype})"
                )
            capture[t._grad_key()] = None
    prev_mode = _state.enabled
    _state.enabled = create_graph  # the rules record a graph only with create_graph
    selective[0] += capture is not None
    try:
        if capture is None and not create_graph and not anomaly[0]:
            _run_plain(roots, grads, retain_graph)
        else:
            _run_graph(roots, grads, retain_graph, create_graph, capture)
    finally:
        _state.enabled = prev_mode
        selective[0] -= capture is not None
    return None if capture is None else _captured(capture, inputs, allow_unused)


def _run_graph(roots: Sequence[Tensor], grads: Sequence[Tensor], retain_graph: bool,
               create_graph: bool, capture: dict | None) -> None:
    """:func:`run_backward` with ``create_graph`` or ``inputs`` (gradients into
    ``capture``): the gradients travel as Tensors, the nodes run their Tensor rules."""
    buffers, heap, assigned, leaf_grads, leaves = _seed(roots, grads, create_graph, False)
    useful = None
    if capture is not None and heap:
        useful = _prune(_collect([(n, 0) for _, n in heap]), set(capture))
    while heap:
        node = heappop(heap)[1]
        g = buffers.pop(node)
        if node.hooks or node.retained or capture is not None:
            g = _output_grads(node, g, capture)
        if useful is not None and node not in useful:
            continue
        res = _run_rule(node, g)
        if anomaly[0]:
            _check_finite(node, res)
        if not retain_graph:
            node.release()
        for e, gi in zip(node.edges, res):  # noqa: B905 - lengths checked in _run_rule
            if gi is None or e is None:
                continue
            if e.__class__ is Node:
                e = (e, 0)
            if type(e) is tuple:
                _check_grad(node, gi, *e[0].meta(e[1]))
                _buffer(buffers, heap, e[0], e[1], gi, create_graph)
            else:
                _check_grad(node, gi, e._data.shape, e._data.dtype)
                key = id(e)
                prev = leaf_grads.get(key)
                leaf_grads[key] = gi if prev is None else _sum(prev, gi, create_graph)
                leaves[key] = e
    _deliver_all(leaves, leaf_grads, capture, create_graph, assigned)


def _check_finite(node: Node, res: tuple) -> None:
    """Anomaly detection: ``RuntimeError`` at the first gradient of ``node``'s rule holding
    nan or inf, naming the op and where it was recorded."""
    for i, gi in enumerate(res):
        if gi is None or _dkind(gi._data.dtype) not in "fc":
            continue
        xp = gi._device.xp
        d = gi._data
        if bool(xp.all(xp.isfinite(d))):
            continue
        what = "nan" if bool(xp.any(xp.isnan(d))) else "inf"
        trace = anomaly_traces.get(node.key)
        where = f"; the op was recorded at:\n{trace}" if trace else ""
        raise RuntimeError(f"detect_anomaly: the backward of {node.name()} returned {what} "
                           f"values in its gradient for input {i}{where}")


def _run_plain(roots: Sequence[Tensor], grads: Sequence[Tensor], retain_graph: bool) -> None:
    """:func:`run_backward` into the leaves' ``.grad`` without ``create_graph``: the
    gradients travel as raw arrays (see the module docstring).

    The start, the output hooks and the delivery to the leaves are the functions of
    :func:`_run_graph`; the steps run for every node and edge (the checks of
    :func:`_run_rule` and :func:`_check_grad`, :func:`_buffer` for a node with one
    output, the sum per leaf) are written out in the loop instead: this is the hot path
    of a training step, where a function call per node or edge shows.

    A node that receives a gradient while no other node waits for one runs next without
    going through the heap and the buffers (``nxt``, its gradient ``nxt_g``): along a
    chain of ops, each node hands its gradient straight to the next."""
    _plain_loop(None, None, retain_graph, *_seed(roots, grads, False, True))


def run_plain_scalar(root: Tensor, retain_graph: bool) -> None:
    """``root.backward()`` for a real 0-d ``root`` made by an op with one output, without
    ``create_graph``: :func:`run_backward` with the gradient 1, started at ``root``'s node
    without the general start (``Tensor.backward``'s common case: a scalar loss)."""
    dev = root._device
    seed = dev._backend.ones_like(root._data)  # a fresh array (it may become a .grad)
    state = _state
    prev_mode = state.enabled
    state.enabled = False
    try:
        _plain_loop(root._grad_fn, seed, retain_graph, {}, [], _Given((id(seed),)), {}, {})
    finally:
        state.enabled = prev_mode


def _plain_loop(node: Node | None, gd: Any, retain_graph: bool, buffers: dict, heap: list,
                assigned: _Given, leaf_grads: dict[int, Any],
                leaves: dict[int, Tensor]) -> None:
    """The loop of :func:`_run_plain`: ``node`` (with its gradient ``gd``) runs first, then
    the nodes of ``heap``; the containers are :func:`_seed`'s."""
    tensor_cls = _tensor_cls
    while True:
        if node is None:  # no node handed on: the next one from the heap
            if not heap:
                break
            node = heappop(heap)[1]
            gd = buffers.pop(node)
        if node.hooks or node.retained:
            gd = _output_grads_raw(node, gd, assigned)
        vjp = node.vjp
        if vjp is None:
            raise _freed_error(node)
        if node.epoch != epoch[0]:
            node._check_saved()
        raw = node.raw
        if raw is not None:
            res = raw(vjp, gd)
            check = check_raw_rules
        else:
            res = _tensor_rule(node, gd)
            check = True
        if not retain_graph:  # free what the rules hold (inputs, saved output)
            node.vjp = node.raw = node.out_data = None
            node.saved = ()
        edges = node.edges
        if check and len(res) != len(edges):
            raise _count_error(node, len(res))
        nxt = nxt_g = None
        for e, d in zip(edges, res):  # noqa: B905 - one per input (checked with check)
            if d is None or e is None:
                continue
            cls = e.__class__
            if cls is Node:  # the node of a single output
                if check:
                    _check_raw(node, d, *e.out_meta, e.device)
                if e is nxt:
                    nxt_g = e.device.xp.add(nxt_g, d)
                    continue
                if nxt is None and not heap:  # no node waits: e runs next
                    nxt, nxt_g = e, d
                    continue
                if nxt is not None:  # two nodes wait now: both go through the heap
                    buffers[nxt] = nxt_g
                    heappush(heap, (nxt.key, nxt))
                    nxt = None
                prev = buffers.get(e)
                if prev is None:
                    buffers[e] = d
                    heappush(heap, (e.key, e))
                else:
                    buffers[e] = e.device.xp.add(prev, d)
            elif cls is tuple:  # (node, output index)
                child = e[0]
                if check:
                    _check_raw(node, d, *child.out_meta[e[1]], child.device)
                if nxt is not None:
                    buffers[nxt] = nxt_g
                    heappush(heap, (nxt.key, nxt))
                    nxt = None
                _buffer(buffers, heap, child, e[1], d, False, True)
            else:
                if check:
                    _check_raw(node, d, e._data.shape, e._data.dtype, e._device)
                base = getattr(d, "base", None)
                if getattr(e, "_grad", None) is None and id(d) not in assigned \
                        and not (_leaf_hooks and getattr(e, "_hooks", None)) \
                        and (id(d) not in assigned.parts if base is None
                             else _free_view(d, base, assigned, e._device)):
                    # the common case: a fresh gradient for a leaf without one or
                    # hooks becomes its .grad now (a later one is added to it)
                    dev = e._device
                    if d.__class__ is not dev.array_type:
                        d = dev._backend.normalize(d)
                    t = _object_new(tensor_cls)  # _new(d, dev), inlined
                    t._data = d
                    t._device = dev
                    t._grad_fn = None
                    t._requires_grad = False
                    t._vc = None
                    e._grad = t
                    if base is None:
                        assigned.add(id(d))
                    else:
                        _claim(assigned, d, dev)
                    continue
                key = id(e)
                prev = leaf_grads.get(key)
                if prev is None:
                    leaf_grads[key] = d
                    leaves[key] = e
                else:
                    leaf_grads[key] = e._device.xp.add(prev, d)
        # a node still in nxt is the only one waiting (any push to the heap moved it there)
        node, gd = nxt, nxt_g
    if leaf_grads:
        _deliver_all(leaves, leaf_grads, None, False, assigned, True)


def _seed(roots: Sequence[Tensor], grads: Sequence[Tensor], create_graph: bool,
          raw: bool) -> tuple[dict, list, set[int], dict[int, Any], dict[int, Tensor]]:
    """Start a backward pass from the gradients ``grads`` of ``roots`` (their raw arrays
    when ``raw``). Returns ``(buffers, heap, assigned, leaf_grads, leaves)``: the gradients
    of the nodes that have received one (a list for nodes with several outputs), the heap
    of those nodes by key (see _next_key), the ids of the raw arrays that must not become a
    leaf's ``.grad`` without a copy, the gradients reaching each leaf by id (summed first,
    so that its hooks see the total) and the leaves by id."""
    buffers: dict[Node, Any] = {}
    heap: list[tuple[int, Node]] = []
    assigned = _Given()
    leaf_grads: dict[int, Any] = {}
    leaves: dict[int, Tensor] = {}
    for r, g in zip(roots, grads, strict=True):
        d = g._data
        _claim(assigned, d, g._device)
        if raw:
            g = d
        node = r._grad_fn
        if node is None:  # the root is itself a leaf
            key = id(r)
            leaves[key] = r
            prev = leaf_grads.get(key)
            leaf_grads[key] = g if prev is None else _add(r._device, prev, g, create_graph, raw)
        else:
            _buffer(buffers, heap, node, r._out_idx, g, create_graph, raw)
    return buffers, heap, assigned, leaf_grads, leaves


def _run_rule(node: Node, g: Any) -> tuple:
    """Run the Tensor rule of ``node`` on its output gradient(s) ``g`` (Tensors; a list for
    several outputs), with the saved outputs as Tensors of the graph, after checking that
    the rule was not freed and that no saved tensor changed in place: one gradient (or
    ``None``) per input."""
    dev = node.device
    data = node.out_data
    vjp = node.vjp
    if vjp is None:
        raise _freed_error(node)
    if node.epoch != epoch[0]:
        node._check_saved()
    if node.multi:
        outs = None if data is None else tuple(
            [_from_node(d, dev, node, i) for i, d in enumerate(data)])
        res = vjp(g, outs)
    else:
        res = vjp(g, None if data is None else _from_node(data[0], dev, node, 0))
    if type(res) is not tuple:
        res = tuple(res) if isinstance(res, list) else (res,)
    if len(res) != len(node.edges):
        raise _count_error(node, len(res))
    return res


def _tensor_rule(node: Node, gd: Any) -> tuple:
    """Run the Tensor rule of ``node`` on the raw gradient(s) ``gd``; raw results."""
    dev = node.device
    if node.multi:
        res = _run_rule(node, [None if d is None else _wrap(d, dev) for d in gd])
    else:
        res = _run_rule(node, _wrap(gd, dev))
    return tuple([None if t is None else t._data for t in res])


def _output_grads_raw(node: Node, gd: Any, assigned: _Given) -> Any:
    """:func:`_output_grads` for raw gradients (wrapped for the hooks and ``.grad``)."""
    dev = node.device
    if node.multi:
        gs = _output_grads(node, [None if d is None else _wrap(d, dev) for d in gd], None)
        out = [None if g is None else g._data for g in gs]
    else:
        out = [_output_grads(node, _wrap(gd, dev), None)._data]
    if node.retained:  # a retained .grad must not share storage with a leaf's .grad
        for i, d in enumerate(out):
            if d is not None and i in node.retained:
                _claim(assigned, d, dev)
    return out if node.multi else out[0]


def _sum(a: Tensor, b: Tensor, create_graph: bool) -> Tensor:
    """``a + b`` for two gradients of equal shape and dtype (recorded with create_graph)."""
    if create_graph:
        return a + b
    dev = a._device
    return _wrap(dev.xp.add(a._data, b._data), dev)


def _add(dev: Any, a: Any, b: Any, create_graph: bool, raw: bool) -> Any:
    """``a + b`` for two gradients: raw arrays on the device ``dev`` when ``raw``, else
    Tensors (:func:`_sum`)."""
    return dev.xp.add(a, b) if raw else _sum(a, b, create_graph)


def _buffer(buffers: dict, heap: list, node: Node, idx: int, g: Any, create_graph: bool,
            raw: bool = False) -> None:
    """Add ``g`` (a Tensor, or a raw array when ``raw``) to the gradient of output ``idx``
    of ``node``."""
    if node.multi:
        buf = buffers.get(node)
        if buf is None:
            buf = buffers[node] = [None] * len(node.out_meta)
            heappush(heap, (node.key, node))
        prev = buf[idx]
        buf[idx] = g if prev is None else _add(node.device, prev, g, create_graph, raw)
        return
    prev = buffers.get(node)
    if prev is None:
        buffers[node] = g
        heappush(heap, (node.key, node))
    else:
        buffers[node] = _add(node.device, prev, g, create_graph, raw)


def _output_grads(node: Node, g: Any, capture: dict | None) -> Any:
    """Run the output hooks of ``node``, fill retained ``.grad`` and captured gradients."""
    gs = g if node.multi else [g]
    for idx, gi in enumerate(gs):
        if gi is None:
            continue
        if node.hooks and idx in node.hooks:
            gi = gs[idx] = _apply_hooks(node.hooks[idx], gi)
        if capture is None and node.retained and idx in node.retained:
            t = node.retained[idx]()
            if t is not None:
                t.grad = gi if t.grad is None else t.grad + gi
        if capture is not None and (node, idx) in capture:
            capture[(node, idx)] = gi
    return gs if node.multi else gs[0]


def _grad_error(node: Node, g: Tensor, shape: tuple, dtype: Any) -> RuntimeError:
    return RuntimeError(
        f"internal error: {node._name} produced a gradient of shape {g.shape} and dtype "
        f"{g.dtype} for an input of shape {shape} and dtype {dtype}"
    )


def _check_grad(node: Node, g: Tensor, shape: tuple, dtype: Any) -> None:
    """Raise unless the gradient ``g`` that ``node`` gave an input has its shape and dtype."""
    d = g._data
    if d.shape != shape or d.dtype is not dtype and d.dtype != dtype:
        raise _grad_error(node, g, shape, dtype)


def _check_raw(node: Node, d: Any, shape: tuple, dtype: Any, dev: Any) -> None:
    """:func:`_check_grad` for a raw gradient ``d`` on the device ``dev``."""
    if d.shape != shape or d.dtype != dtype:
        raise _grad_error(node, _wrap(d, dev), shape, dtype)


def _count_error(node: Node, n: int) -> RuntimeError:
    return RuntimeError(
        f"internal error: {node._name} returned {n} gradients for {len(node.edges)} inputs"
    )


class _Given(set):
    """The ids of the raw gradients given out whole (the root gradients, the leaves' and
    retained ``.grad`` arrays) and, in :attr:`parts`, per array owning memory, the element
    ranges of its views given out: another leaf's ``.grad`` may share none of them."""

    __slots__ = ("parts",)

    def __init__(self, ids: Any = ()) -> None:
        super().__init__(ids)
        self.parts: dict[int, list[tuple[int, int]]] = {}


def _claim(given: _Given, d: Any, dev: Any) -> None:
    """Mark the raw array ``d`` as given out: the array itself, or for a view the elements
    of its base that it covers."""
    given.add(id(d))
    base = getattr(d, "base", None)
    if base is not None:
        strides, offset, _ = dev.backend.layout(d)
        extent = 0 if d.size == 0 else 1 + sum(  # elements spanned from the first one
            (n - 1) * abs(st) for n, st in zip(d.shape, strides, strict=True))
        given.parts.setdefault(id(base), []).append((offset, offset + extent))


def _free_view(d: Any, base: Any, given: _Given, dev: Any) -> bool:
    """Whether the raw view ``d`` of ``base`` may become a leaf's ``.grad`` as it is: its
    elements lie in order in one block that no gradient given out shares (a reshaped
    fresh result, or one of the disjoint pieces of one)."""
    if id(base) in given or base.dtype != d.dtype:
        return False
    strides, offset, _ = dev.backend.layout(d)
    step = 1
    for n, st in zip(reversed(d.shape), reversed(strides), strict=True):
        if n != 1 and st != step:
            return False
        step *= n
    hi = offset + d.size
    return all(hi <= a or b <= offset for a, b in given.parts.get(id(base), ()))


def _deliver_all(leaves: dict[int, Tensor], leaf_grads: dict[int, Any],
                 capture: dict | None, create_graph: bool, assigned: _Given,
                 raw: bool = False) -> None:
    """Give each leaf its summed gradient (a raw array when ``raw``): into ``capture``,
    else into ``.grad``."""
    if not leaf_grads:
        return
    prev = _state.enabled
    _state.enabled = create_graph
    try:
        for key, g in leaf_grads.items():
            leaf = leaves[key]
            _deliver_leaf(leaf, _wrap(g, leaf._device) if raw else g, capture, create_graph,
                          assigned)
    finally:
        _state.enabled = prev


def _deliver_leaf(
    leaf: Tensor, g: Tensor, capture: dict | None, create_graph: bool, assigned: _Given
) -> None:
    hooks = getattr(leaf, "_hooks", None)
    if hooks:
        g = _apply_hooks(hooks, g)
    if capture is not None:
        key = id(leaf)
        if key in capture:
            prev = capture[key]
            capture[key] = g if prev is None else prev + g
        return
    cur = getattr(leaf, "_grad", None)
    if cur is None:
        gd = g._data
        base = getattr(gd, "base", None)
        if not create_graph and (id(gd) in assigned or (
                id(gd) in assigned.parts if base is None
                else not _free_view(gd, base, assigned, g._device))):
            # .grad must own its storage: g may be the root gradient, a gradient already
            # given to another leaf (or retained), or a view of one, and in-place updates
            # of one .grad must not change another. Fresh results of the rules are kept,
            # and so are reshaped views of all of one.
            g = g._copy()
        if hooks:
            leaf.grad = g  # a hook's result is checked like any assigned gradient
        else:
            leaf._grad = g
        _claim(assigned, g._data, g._device)
    elif create_graph:
        leaf.grad = cur + g
    else:
        leaf._grad = _sum(cur, g, False)


def _captured(capture: dict | None, inputs: Sequence[Tensor] | None, allow_unused: bool):
    if capture is None or inputs is None:
        return None
    out = []
    for t in inputs:
        g = capture[t._grad_key()]
        if g is None and not allow_unused:
            raise RuntimeError(
                "one of the differentiated tensors appears not to have been used in the "
                "graph; pass allow_unused=True if this is intended"
            )
        out.append(g)
    return out
