"""The recorded graph and the reverse-mode engine.

Every differentiable op that sees an input requiring grad creates a
:class:`Node`: the op's vector-Jacobian product (VJP) rule plus edges to where
the input gradients go (another node's output, or a leaf tensor). The rule is
a closure written with vtl functions, so running it with grad mode on records
the graph of the gradient itself (``create_graph=True``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from . import grad_mode

if TYPE_CHECKING:
    from .._tensor import Tensor


class RemovableHandle:
    """Returned by ``register_hook``; ``remove()`` unregisters the hook."""

    __slots__ = ("_hooks", "_fn")

    def __init__(self, hooks: list, fn: Callable) -> None:
        self._hooks = hooks
        self._fn = fn

    def remove(self) -> None:
        if self._fn in self._hooks:
            self._hooks.remove(self._fn)


class Node:
    """One recorded operation (``tensor.grad_fn``)."""

    __slots__ = (
        "_name", "vjp", "edges", "saved", "versions", "out_meta", "out_data",
        "device", "hooks", "retained", "__weakref__",
    )

    def __init__(
        self,
        name: str,
        vjp: Callable,
        edges: tuple,
        saved: tuple,
        out_meta: tuple,
        out_data: tuple | None,
        device: Any,
    ) -> None:
        self._name = name
        self.vjp = vjp
        self.edges = edges
        if saved:
            counters = self.saved = tuple([t._version_counter() for t in saved])
            self.versions = tuple([c[0] for c in counters])
        else:
            self.saved = self.versions = ()
        self.out_meta = out_meta
        self.out_data = out_data
        self.device = device
        self.hooks: dict[int, list] | None = None
        self.retained: dict[int, Any] | None = None

    def name(self) -> str:
        """The op's name, e.g. ``'MulBackward'``."""
        return self._name

    @property
    def next_functions(self) -> tuple:
        """``(node_or_leaf, output_index)`` for each input, like PyTorch."""
        out = []
        for e in self.edges:
            if e is None:
                out.append((None, 0))
            elif isinstance(e, tuple):
                out.append(e)
            else:
                out.append((e, 0))
        return tuple(out)

    def __repr__(self) -> str:
        return f"<{self._name}>"

    def release(self) -> None:
        self.vjp = None
        self.saved = ()
        self.out_data = None

    def watch(self, t: Tensor) -> None:
        """Also check ``t``'s version before running the rule (saved outputs)."""
        c = t._version_counter()
        self.saved = (*self.saved, c)
        self.versions = (*self.versions, c[0])

    def _check_saved(self) -> None:
        for i, (c, v) in enumerate(zip(self.saved, self.versions, strict=True)):
            if c[0] != v:
                raise RuntimeError(
                    "one of the tensors needed for gradient computation has been modified "
                    f"by an in-place operation: saved tensor {i} of {self._name} is at "
                    f"version {c[0]}; expected version {v}. Compute the update out of "
                    "place, or clone the tensor first."
                )


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
                g = r
    return g


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
            if type(e) is tuple:
                child = e[0]
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
    from .._tensor import Tensor

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

    buffers: dict[Node, list] = {}
    root_edges = []
    assigned: set[int] = set()
    # gradients reaching each leaf are summed first, so its hooks see the total
    leaf_grads: dict[int, list] = {}
    for r, g in zip(roots, grads, strict=True):
        assigned.add(id(g))
        if r._grad_fn is None:
            # the root is itself a leaf
            _add_leaf_grad(leaf_grads, r, g)
            continue
        node, idx = r._grad_fn, r._out_idx
        buf = buffers.setdefault(node, [None] * len(node.out_meta))
        buf[idx] = g if buf[idx] is None else buf[idx] + g
        root_edges.append((node, idx))

    if not root_edges:
        _deliver_all(leaf_grads, capture, create_graph, assigned)
        return _captured(capture, inputs, allow_unused)

    deps = _collect(root_edges)
    useful = _prune(deps, set(capture)) if capture is not None else None
    ready = [n for n, _ in dict.fromkeys(root_edges) if deps[n] == 0]

    prev_mode = grad_mode.state.enabled
    grad_mode.state.enabled = create_graph
    try:
        while ready:
            node = ready.pop()
            gs = buffers.pop(node, None)
            results: Sequence[Any] = ()
            if gs is not None and (node.hooks or node.retained or capture is not None):
                for idx, g in enumerate(gs):
                    if g is None:
                        continue
                    if node.hooks and idx in node.hooks:
                        g = gs[idx] = _apply_hooks(node.hooks[idx], g)
                    if capture is None and node.retained and idx in node.retained:
                        t = node.retained[idx]()
                        if t is not None:
                            t.grad = g if t.grad is None else t.grad + g
                    if capture is not None and (node, idx) in capture:
                        capture[(node, idx)] = g
            if gs is not None and (useful is None or node in useful):
                if node.vjp is None:
                    raise _freed_error(node)
                if node.saved:
                    node._check_saved()
                results = _call_vjp(node, gs, Tensor)
                if not retain_graph:
                    node.release()
            for e, g in zip(node.edges, results or (None,) * len(node.edges), strict=True):
                if e is None:
                    continue
                if type(e) is tuple:
                    child, cidx = e
                    if g is not None:
                        _check_grad(node, g, child.out_meta[cidx])
                        buf = buffers.get(child)
                        if buf is None:
                            buf = buffers[child] = [None] * len(child.out_meta)
                        buf[cidx] = g if buf[cidx] is None else buf[cidx] + g
                    deps[child] -= 1
                    if deps[child] == 0:
                        ready.append(child)
                elif g is not None:
                    _check_grad(node, g, (e._data.shape, e._data.dtype))
                    _add_leaf_grad(leaf_grads, e, g)
        _deliver_all(leaf_grads, capture, create_graph, assigned)
    finally:
        grad_mode.state.enabled = prev_mode
    return _captured(capture, inputs, allow_unused)


def _call_vjp(node: Node, gs: list, Tensor: type) -> Sequence[Any]:
    outs = None
    if node.out_data is not None:
        outs = tuple(
            Tensor._from_node(d, node.device, node, i) for i, d in enumerate(node.out_data)
        )
    if len(node.out_meta) == 1:
        res = node.vjp(gs[0], outs[0] if outs is not None else None)
    else:
        res = node.vjp(gs, outs)
    if not isinstance(res, (tuple, list)):
        res = (res,)
    if len(res) != len(node.edges):
        raise RuntimeError(
            f"internal error: {node._name} returned {len(res)} gradients for "
            f"{len(node.edges)} inputs"
        )
    return res


def _check_grad(node: Node, g: Tensor, meta: tuple) -> None:
    shape, dtype = meta
    d = g._data
    if d.shape != shape or d.dtype != dtype:
        raise RuntimeError(
            f"internal error: {node._name} produced a gradient of shape {g.shape} and dtype "
            f"{g.dtype} for an input of shape {shape} and dtype {dtype}"
        )


def _add_leaf_grad(leaf_grads: dict[int, list], leaf: Tensor, g: Tensor) -> None:
    entry = leaf_grads.get(id(leaf))
    if entry is None:
        leaf_grads[id(leaf)] = [leaf, g]
    else:
        entry[1] = entry[1] + g


def _deliver_all(leaf_grads: dict[int, list], capture: dict | None, create_graph: bool,
                 assigned: set[int]) -> None:
    prev = grad_mode.state.enabled
    grad_mode.state.enabled = create_graph
    try:
        for leaf, g in leaf_grads.values():
            _deliver_leaf(leaf, g, capture, create_graph, assigned)
    finally:
        grad_mode.state.enabled = prev


def _deliver_leaf(
    leaf: Tensor, g: Tensor, capture: dict | None, create_graph: bool, assigned: set[int]
) -> None:
    g = _apply_hooks(getattr(leaf, "_hooks", None), g)
    if capture is not None:
        key = id(leaf)
        if key in capture:
            prev = capture[key]
            capture[key] = g if prev is None else prev + g
        return
    if leaf.grad is None:
        if not create_graph and (id(g) in assigned or getattr(g._data, "base", None) is not None):
            # .grad must own its storage: g may be the root gradient, a gradient already
            # given to another leaf, or a view of one, and in-place updates of one .grad
            # must not change another. Fresh results of the VJP rules are kept as they are.
            g = g._copy()
        leaf.grad = g
        assigned.add(id(g))
    else:
        leaf.grad = leaf.grad + g
        if not create_graph:
            leaf.grad = leaf.grad.detach()


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
