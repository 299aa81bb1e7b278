"""Shared machinery for the namespace functions: argument checks, wrapping
raw backend results into Tensors, and recording graph nodes.

How an op is written (see ``docs/dev/writing-an-op.md``, and ``elementwise.py`` for
many examples)::

    def exp(x, /):
        x = tensor_arg(x, "exp")
        dev = x._device
        out = dev.xp.exp(x._data)
        if needs_grad(x):
            return record(out, dev, "ExpBackward", (x,), lambda g, out: g * conj(out),
                          save_output=True)
        return new(out, dev)

A VJP rule gets the output gradient ``g`` (a Tensor) and the output tensor
(only when ``save_output=True``, else ``None``) and returns one gradient per
input (a Tensor or ``None``), already reduced to the input's shape and dtype
(use :func:`sum_to`). Rules use vtl functions, so they are differentiable.

This module is the only one that knows how the graph is encoded. The API that
``vtl._ops`` and ``vtl.nn.functional`` use to record:

* :func:`record`: a node with one output, for any operands;
* :func:`record_op`: the same for one or two inputs given as the inputs that need a
  gradient (one call, no loop: the recording path of the hot ops);
* :func:`record_multi`: a node with several outputs;
* :func:`edge`: the graph edge to one input (:data:`Edge`);
* ``raw=`` (``record``, ``record_op``): the rule on raw arrays that plain backward
  runs instead of the vtl-function rule, which stays the rule for ``create_graph``.

``vtl.autograd.graph`` owns the :class:`~vtl.autograd.graph.Node` class and the engine,
and reads edges back (``edge_node``, ``edge_target``); ``Node`` objects are made here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._tensor import Tensor, _new
from ..autograd import grad_mode
from ..autograd.graph import Node, _next_key
from ..autograd.graph import epoch as _epoch
from ..backends import Device, _precision
from ..backends._dtypes import ALL_DTYPES, LOW_FLOATING, to_dtype
from ..backends._dtypes import kind as _dkind
from .views import check_view_write, rebase_bases, refresh_views

new = _new
_object_new = object.__new__
SCALAR_TYPES = (bool, int, float, complex)
_grad = grad_mode.state


def tensor_arg(x: Any, fname: str, argname: str = "x") -> Tensor:
    """``x`` if it is a Tensor, else a ``TypeError`` naming the function."""
    if isinstance(x, Tensor):
        return x
    raise TypeError(
        f"{fname}() expected a vtl.Tensor for {argname}, got {type(x).__name__}; "
        "convert it with vtl.asarray(...)"
    )


def mixed_devices(fname: str, a: Device, b: Device) -> ValueError:
    return ValueError(
        f"{fname}(): tensors are on different devices ({a} and {b}); "
        "move one of them with .to(...) first"
    )


def same_device(fname: str, tensors: Sequence[Tensor]) -> Device:
    """The common device of ``tensors``; ``ValueError`` if they differ."""
    dev = tensors[0]._device
    for t in tensors[1:]:
        if t._device is not dev:
            raise mixed_devices(fname, dev, t._device)
    return dev


def numpy_scalar(v: np.generic, dev: Device, fname: str) -> Any:
    """A NumPy scalar as a raw 0-d array of its own dtype on ``dev``.

    NumPy scalars take part in type promotion as 0-d arrays, as in NumPy (so
    ``float32`` tensor ``+ numpy.float64(1)`` is ``float64``), unlike Python
    scalars, which adopt the tensor's dtype (see :func:`vtl.result_type`).
    """
    try:
        dt = to_dtype(v.dtype)
    except TypeError:
        raise TypeError(
            f"{fname}() cannot combine a vtl.Tensor with a NumPy {v.dtype} scalar: "
            f"expected a scalar of one of the dtypes {', '.join(ALL_DTYPES)}"
        ) from None
    dev.backend.check_dtype(dt, dev.index)
    return dev.backend.from_host(np.asarray(v, dtype=dt), dev.index)


def binary_operands(x1: Any, x2: Any, fname: str) -> tuple[Device, Any, Any]:
    """Device and raw operands of a binary elementwise function.

    One operand may be a Python scalar (array API 2024.12) or a NumPy scalar (a
    0-d array of its dtype, :func:`numpy_scalar`); tensors must share a device.
    """
    if isinstance(x1, Tensor):
        dev = x1._device
        if isinstance(x2, Tensor):
            if x2._device is not dev:
                raise mixed_devices(fname, dev, x2._device)
            return dev, x1._data, x2._data
        if isinstance(x2, np.generic):  # first: np.float64 is a float subclass
            return dev, x1._data, numpy_scalar(x2, dev, fname)
        if isinstance(x2, SCALAR_TYPES):
            return dev, x1._data, x2
        bad = x2
    elif isinstance(x2, Tensor):
        if isinstance(x1, np.generic):
            return x2._device, numpy_scalar(x1, x2._device, fname), x2._data
        if isinstance(x1, SCALAR_TYPES):
            return x2._device, x1, x2._data
        bad = x1
    else:
        raise TypeError(
            f"{fname}() needs at least one vtl.Tensor operand, got "
            f"{type(x1).__name__} and {type(x2).__name__}"
        )
    raise TypeError(
        f"{fname}() cannot combine a vtl.Tensor with {type(bad).__name__}; "
        "convert it with vtl.asarray(...) on the same device"
    )


def needs_grad(*xs: Any) -> bool:
    """Whether an op on ``xs`` must be recorded (grad mode on, an input requires grad)."""
    if not _grad.enabled:
        return False
    for x in xs:
        if isinstance(x, Tensor) and x._requires_grad:
            return True
    return False


# -- the graph: how an op's inputs become a node's edges ----------------------------------
# This module is the only one that encodes edges and builds nodes; ``vtl.autograd.graph``
# owns the Node class and the engine, and reads edges back (``edge_node``, ``edge_target``).

#: An edge of the graph, from a node to one of its op's inputs (``Node.edges``): the
#: input itself when it is a leaf tensor, the node that made it (an op with one output),
#: or ``(node, output_index)`` (an op with several outputs, ``node.multi``).
Edge = Tensor | Node | tuple[Node, int]


class _OneInput:
    __slots__ = ()

    def __repr__(self) -> str:
        return "ONE_INPUT"


#: ``record_op(..., x1, ONE_INPUT, ...)``: the op has one input only.
ONE_INPUT: Any = _OneInput()


class TensorMeta:
    """What a backward rule that reads no values knows of an input tensor: its shape and
    dtype, device and place in the graph. A rule keeps this instead of the tensor, so that
    the input's memory is freed as soon as nothing else needs it (the gradient of ``a + b``
    needs neither operand: PyTorch keeps neither). It stands in for the tensor's array too
    (``meta._data`` is itself), so that the helpers reading ``x._data.shape`` take it."""

    __slots__ = ("shape", "dtype", "_device", "_grad_fn", "_requires_grad")

    def __init__(self, x: Tensor) -> None:
        d = x._data
        self.shape = d.shape
        self.dtype = d.dtype
        self._device = x._device
        self._grad_fn = x._grad_fn
        self._requires_grad = x._requires_grad

    @property
    def _data(self) -> TensorMeta:
        return self

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n


def meta(x: Any) -> Any:
    """A :class:`TensorMeta` of a tensor ``x``; anything else unchanged."""
    return TensorMeta(x) if isinstance(x, Tensor) else x


def edge(x: Any) -> Edge | None:
    """The graph edge to ``x``, an input of an op being recorded (see :data:`Edge`);
    ``None`` when ``x`` needs no gradient (not a tensor, or one without requires_grad)."""
    if isinstance(x, Tensor) and x._requires_grad:
        f = x._grad_fn
        return x if f is None else (f, x._out_idx) if f.multi else f
    return None


def record(
    out: Any,
    dev: Device,
    name: str,
    inputs: Sequence[Any],
    vjp: Callable,
    saved: Sequence[Tensor] = (),
    save_output: bool = False,
    raw: Callable | None = None,
) -> Tensor:
    """Wrap the raw array ``out`` as the output of op ``name`` on ``inputs`` (its
    operands: tensors or not, one gradient of the rule each), recorded with the VJP rule
    ``vjp(g, out)`` (``out``: the output tensor when ``save_output``, else ``None``).

    ``saved`` lists the input tensors the rule reads: an in-place change to any of them
    before backward raises an error instead of a wrong gradient (with ``save_output``,
    the output is checked too). ``raw``: the rule on raw arrays for plain backward, see
    :func:`record_op`.
    """
    n = len(inputs)
    if n == 1 or n == 2:
        x1 = inputs[0]
        if not (isinstance(x1, Tensor) and x1._requires_grad):
            x1 = None
        x2 = ONE_INPUT
        if n == 2:
            x2 = inputs[1]
            if not (isinstance(x2, Tensor) and x2._requires_grad):
                x2 = None
        t = record_op(out, dev, name, x1, x2, vjp, tuple(saved), raw)
    else:
        t = record_op(out, dev, name, None, ONE_INPUT, vjp, tuple(saved), raw)
        t._grad_fn.edges = tuple([edge(x) for x in inputs])  # any number of inputs
    if save_output:
        node = t._grad_fn
        node.out_data = (t._data,)
        node.watch(t)
    return t


def record_op(out: Any, dev: Device, name: str, x1: Tensor | None, x2: Any, vjp: Callable,
              saved: tuple, raw: Callable | None) -> Tensor:
    """:func:`record` for an op of one or two inputs, given as the inputs that need a
    gradient: ``x1``, ``x2`` are the op's first and second input when it is a tensor
    that requires grad (the caller has checked), else ``None``; ``x2`` is
    :data:`ONE_INPUT` for an op of one input. ``saved`` is kept as given (a tuple). This
    is the recording path of the hot ops (one call, no loop, every argument given);
    :func:`record` and :func:`record_multi` are the general forms, and every node with
    one output is made here.

    ``raw(vjp, g_data)``, when not ``None``, is the rule on raw arrays for plain backward
    (no ``create_graph``; ``vjp``, written with vtl functions, stays the rule for
    ``create_graph``): one raw gradient (of the input's shape and dtype, see
    :func:`raw_grad`) or ``None`` per input. It gets ``vjp`` too, whose arguments it may
    read when ``vjp`` is a ``functools.partial`` (no second closure per op).
    """
    if x1 is not None:  # edge(x1), written out (a call per input shows here)
        f = x1._grad_fn
        x1 = x1 if f is None else (f, x1._out_idx) if f.multi else f
    edges: tuple
    if x2 is ONE_INPUT:
        edges = (x1,)
    else:
        if x2 is not None:
            f = x2._grad_fn
            x2 = x2 if f is None else (f, x2._out_idx) if f.multi else f
        edges = (x1, x2)
    if out.__class__ is not dev.array_type:
        out = dev._backend.normalize(out)
    # Node(name, vjp, edges, saved, ((out.shape, out.dtype),), None, dev, raw), built
    # without the type call
    node = _object_new(Node)
    node._name = name
    node.vjp = vjp
    node.raw = raw
    node.edges = edges
    node.saved = saved
    node.epoch = _epoch[0]
    node.out_meta = (out.shape, out.dtype)
    node.out_data = None
    node.device = dev
    node.hooks = node.retained = None
    node.key = _next_key()
    node.multi = False
    t = _object_new(Tensor)
    t._data = out
    t._device = dev
    t._vc = None
    t._grad_fn = node
    t._out_idx = 0
    t._requires_grad = True
    return t


def record_multi(
    outs: Sequence[Any],
    dev: Device,
    name: str,
    inputs: Sequence[Any],
    vjp: Callable,
    saved: Sequence[Tensor] = (),
    save_outputs: bool = False,
    differentiable: Sequence[bool] | None = None,
) -> tuple[Tensor, ...]:
    """Like :func:`record` for ops with several outputs.

    ``vjp(gs, outs)`` gets a list of output gradients (``None`` where an
    output received none) and the output tensors when ``save_outputs``.
    Outputs marked non-differentiable (e.g. integer indices) get no grad_fn.
    """
    ts = [_new(o, dev) for o in outs]
    diff = differentiable or [True] * len(ts)
    node = Node(
        name, vjp, tuple([edge(x) for x in inputs]), tuple(saved),
        tuple((t.shape, t._data.dtype) for t in ts),
        tuple(t._data for t in ts) if save_outputs else None, dev,
    )
    for i, (t, d) in enumerate(zip(ts, diff, strict=True)):
        if d:
            t._grad_fn = node
            t._out_idx = i
            t._requires_grad = True
        if save_outputs:
            node.watch(t)
    return tuple(ts)


def sum_to(g: Tensor, x: Tensor) -> Tensor:
    """Reduce gradient ``g`` to the shape and dtype of input ``x`` (undo broadcasting)."""
    gd, xd = g._data, x._data
    if gd.shape == xd.shape and gd.dtype == xd.dtype:
        return g
    if not (_grad.enabled and g._requires_grad) and gd.dtype == xd.dtype:
        # plain backward (no create_graph): reduce the raw arrays directly
        return _new(_reduce_raw(gd, xd.shape, g._device), g._device)
    from . import manipulation, statistical

    shape = x.shape
    gshape = g.shape
    if gshape != shape:
        nd = len(gshape) - len(shape)
        axes = tuple(range(nd)) + tuple(
            nd + i for i, s in enumerate(shape) if s == 1 and gshape[nd + i] != 1
        )
        if axes:
            g = statistical.sum(g, axis=axes)
        if g.shape != shape:
            g = manipulation.reshape(g, shape)
    dtype = x._data.dtype
    if g._data.dtype != dtype:
        from . import dtype_functions, elementwise

        if _dkind(g._data.dtype) == "c" and _dkind(dtype) != "c":
            g = elementwise.real(g)
        g = dtype_functions.astype(g, dtype)
    return g


def _reduce_raw(gd: Any, shape: tuple, dev: Device) -> Any:
    """Sum the raw array ``gd`` down to ``shape`` (the shape it was broadcast from)."""
    gshape = gd.shape
    nd = len(gshape) - len(shape)
    if nd == 1 and gshape[1:] == shape:  # e.g. a bias added to every row
        return dev._backend.sum_axes(gd, 0)
    axes = tuple(range(nd)) + tuple(
        nd + i for i, s in enumerate(shape) if s == 1 and gshape[nd + i] != 1
    )
    if axes:
        gd = dev._backend.sum_axes(gd, axes)
    if gd.shape != shape:
        gd = dev.xp.reshape(gd, shape)
    return gd


def raw_matmul(dev: Device, a: Any, b: Any) -> Any:
    """``a @ b`` of raw arrays; float16/bfloat16 operands, and every product while
    ``set_float32_matmul_precision`` is not ``"highest"``, go through the namespace's
    ``matmul`` (which computes low-precision products in float32 and applies the
    precision setting, where the runtime's ``@`` would not)."""
    if a.dtype in LOW_FLOATING or b.dtype in LOW_FLOATING or _precision._current != "highest":
        return dev.xp.matmul(a, b)
    return a @ b


def raw_grad(raw: Any, x: Tensor, dev: Device) -> Any:
    """:func:`plain_grad` as a raw array (for raw rules)."""
    xd = x._data
    if raw.dtype == xd.dtype:
        shape = xd.shape
        return raw if raw.shape == shape else _reduce_raw(raw, shape, dev)
    return sum_to(_new(raw, dev), x)._data


def plain_grad(raw: Any, x: Tensor, dev: Device) -> Tensor:
    """The gradient for input ``x`` from a raw (unreduced) gradient array, in plain
    backward: summed over broadcast axes and cast to ``x``'s dtype."""
    return _new(raw_grad(raw, x, dev), dev)


def normalize_axis(axis: int, ndim: int, fname: str) -> int:
    """``axis`` in ``[0, ndim)``; ``IndexError`` (as NumPy) when out of range."""
    if not -max(ndim, 1) <= axis < max(ndim, 1):
        raise IndexError(f"{fname}(): axis {axis} is out of bounds for a {ndim}-D tensor")
    return axis % ndim if ndim else 0


def normalize_axes(axis: int | Sequence[int] | None, ndim: int, fname: str) -> tuple[int, ...]:
    """A sorted tuple of distinct non-negative axes (all axes for ``None``)."""
    if axis is None:
        return tuple(range(ndim))
    if axis.__class__ is int:
        if 0 <= axis < ndim:
            return (axis,)
        axis = (axis,)
    elif isinstance(axis, int):
        axis = (axis,)
    out = tuple(normalize_axis(a, ndim, fname) for a in axis)
    if len(set(out)) != len(out):
        raise ValueError(f"{fname}(): repeated axis in {tuple(axis)}")
    return tuple(sorted(out))


# -- Tensor operators (declared in vtl._tensor_operators) ---------------------------------
#: what a binary operator takes besides a Tensor (else it returns ``NotImplemented``)
_OPERAND_TYPES = (Tensor, *SCALAR_TYPES, np.generic)


def inplace(t: Tensor, other: Any, fn: Callable, fname: str) -> Any:
    """``t <op>= other`` (``Tensor.__iadd__`` and the others) through the out-of-place
    function ``fn``, written into ``t``'s storage: ``NotImplemented`` for an operand type
    it does not take; an error for a leaf that requires grad (see :func:`check_inplace`).
    When recorded, ``t`` takes over the new node's history (:func:`assign_result`)."""
    if not isinstance(other, _OPERAND_TYPES):
        return NotImplemented
    check_inplace(t, fname)
    if needs_grad(t, other):
        src = _inplace_source(t, other, fname)
        return assign_result(t, fn(src, src if other is t else other), fname)
    return assign_result(t, fn(t, other), fname)


def inplace_apply(t: Tensor, fn: Callable[[Tensor], Tensor], fname: str) -> Tensor:
    """``t = fn(t)`` written into ``t``'s storage (``F.relu(t, inplace=True)`` and the other
    ``inplace=`` flags of ``vtl.nn.functional``), with the rules of the in-place operators:
    an error for a leaf that requires grad while grad mode is on (:func:`check_inplace`);
    the version counter moves, so a backward that saved ``t`` raises; when recorded, ``t``
    takes over the new node's history (:func:`assign_result`), and the rule reads a
    snapshot of the values from before the write. ``fn`` runs out of place: the write saves
    no memory."""
    check_inplace(t, fname)
    if needs_grad(t):
        return assign_result(t, fn(_inplace_source(t, None, fname)), fname)
    res = fn(t)
    return t if res is t else assign_result(t, res, fname)


_READS_NO_VALUES = frozenset({"add", "subtract"})


def _inplace_source(t: Tensor, other: Any, fname: str) -> Tensor:
    """The operand a recorded in-place op reads instead of ``t``: same history, but a
    separate object (and, when the op's rule reads values, a snapshot of the data).

    The rule then sees the value from before the write, and the graph holds no
    reference cycle through ``t`` (whose history is rebased onto the new node).
    """
    data = t._data if fname in _READS_NO_VALUES else t._device.xp.asarray(t._data, copy=True)
    s = new(data, t._device)
    if t._requires_grad:
        s._grad_fn = t._grad_fn
        s._out_idx = getattr(t, "_out_idx", 0)
        s._requires_grad = True
    return s


def check_inplace(t: Tensor, fname: str) -> None:
    """Refuse in-place changes to leaves that require grad, and to the views PyTorch
    refuses to write (see :mod:`vtl._ops.views`), while grad mode is on."""
    if _grad.enabled:
        if t._requires_grad and t._grad_fn is None:
            raise RuntimeError(
                f"in-place {fname} on a leaf tensor that requires grad; wrap the update in "
                "`with vtl.no_grad():` or use an out-of-place operation"
            )
        if getattr(t, "_view", None) is not None:
            check_view_write(t, fname)


def assign_result(t: Tensor, res: Tensor, fname: str) -> Tensor:
    """Write ``res`` into ``t``'s storage and let ``t`` take over ``res``'s history."""
    if res.shape != t.shape:
        raise ValueError(
            f"in-place {fname} would change the shape from {t.shape} to {res.shape}"
        )
    if res._data.dtype != t._data.dtype:
        raise TypeError(
            f"in-place {fname} would change the dtype from {t.dtype} to {res.dtype}; "
            "use the out-of-place form"
        )
    t._data[...] = res._data
    t._bump_version()
    if res._grad_fn is not None:
        if getattr(t, "_view", None) is not None:
            rebase_bases(t, res, fname)  # the bases up the chain take the write
        t._grad_fn = res._grad_fn
        t._out_idx = res._out_idx
        t._requires_grad = True
        refresh_views(t._vc, t)  # the other views of the storage see it
    return t
