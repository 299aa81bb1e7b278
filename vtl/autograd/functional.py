"""JAX-style function transforms built on the tape: ``grad``, ``value_and_grad``,
``vjp``, ``jvp``, ``jacobian`` and ``hessian``.

Each transform calls the function on stand-ins of the differentiated arguments
(fresh leaves that share the arguments' data) with grad mode on, then runs the
reverse-mode engine. Transforms nest (``grad(grad(f))``, ``jacobian(grad(f))``,
mixed partials through closures): when the call happens inside another
transform, or the function's graph reaches tensors that require grad other
than the differentiated arguments, the gradients are computed with
``create_graph=True`` and the results stay connected to that outer graph.
Otherwise results are detached. Gradients of complex inputs follow PyTorch's
convention (the conjugate Wirtinger derivative).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..backends._dtypes import kind as _dkind
from . import grad_mode
from .graph import edge_node

if TYPE_CHECKING:
    from .._tensor import Tensor


class _Level(threading.local):
    depth: int = 0  # how many transforms are evaluating their function in this thread


_level = _Level()
# every stand-in leaf made by a transform: a finished inner transform leaves them in the
# graph of its (create_graph) results, and they do not make an outer result "nested"
_standins: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def _argnums(argnums: int | Sequence[int], nargs: int, where: str) -> tuple[tuple[int, ...], bool]:
    single = isinstance(argnums, int)
    try:
        nums = (argnums,) if single else tuple(argnums)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{where}: argnums must be an int or a sequence of ints, got "
                        f"{type(argnums).__name__}") from None
    if not nums:
        raise ValueError(f"{where}: argnums is empty")
    for i in nums:
        if not isinstance(i, int) or isinstance(i, bool):
            raise TypeError(f"{where}: argnums must be ints, got {type(i).__name__}")
        if not -nargs <= i < nargs:
            raise ValueError(f"{where}: argnums {i} is out of range for {nargs} positional "
                             "argument(s)")
    out = tuple(i % nargs for i in nums)
    if len(set(out)) != len(out):
        raise ValueError(f"{where}: repeated argument in argnums {nums}")
    return out, single


def _track(x: Any, where: str, outer: bool) -> Tensor:
    """A differentiable stand-in for ``x`` (connected to ``x``'s graph when ``outer``)."""
    from .._ops._core import record
    from .._tensor import Tensor

    if not isinstance(x, Tensor):
        raise TypeError(f"{where}: differentiated arguments must be vtl Tensors, got "
                        f"{type(x).__name__}")
    if _dkind(x.dtype) not in "fc":
        raise TypeError(f"{where}: can only differentiate with respect to floating-point or "
                        f"complex tensors, got dtype {x.dtype}")
    if outer and x.requires_grad:
        return record(x._data, x._device, "AliasBackward", (x,), lambda g, _: g)
    t = x.detach().requires_grad_(True)
    _standins[id(t)] = t
    return t


def _track_args(args: Sequence[Any], nums: Sequence[int], where: str,
                outer: bool) -> tuple[list[Any], list[Tensor]]:
    """``args`` with the differentiated positions replaced by stand-ins, and the stand-ins."""
    args_l = list(args)
    for i in nums:
        args_l[i] = _track(args_l[i], where, outer)
    return args_l, [args_l[i] for i in nums]


def _track_tree_args(args: Sequence[Any], nums: Sequence[int], where: str,
                     outer: bool) -> tuple[list[Any], list[Tensor], Callable]:
    """Like :func:`_track_args`, but a differentiated argument may be a tuple/list/dict of
    tensors (``grad`` of a function of a parameter dict). Returns the arguments, the flat
    stand-ins, and a function regrouping flat gradients into one entry per argument."""
    from .vmap import _leaves, _rebuild

    args_l = list(args)
    tracked: list[Tensor] = []
    shapes = []
    for i in nums:
        a = args_l[i]
        if isinstance(a, (tuple, list, dict)):
            ts = [_track(leaf, where, outer) for leaf in _leaves(a)]
            args_l[i] = _rebuild(a, iter(ts))
            shapes.append((a, len(ts)))
        else:
            ts = [_track(a, where, outer)]
            args_l[i] = ts[0]
            shapes.append((None, 1))
        tracked.extend(ts)

    def regroup(flat: Sequence[Any]) -> list[Any]:
        out, k = [], 0
        for tree, n in shapes:
            out.append(flat[k] if tree is None else _rebuild(tree, iter(flat[k:k + n])))
            k += n
        return out

    return args_l, tracked, regroup


def _call(fun: Callable, args: Sequence[Any], kwargs: dict) -> Any:
    _level.depth += 1
    try:
        with grad_mode.enable_grad():
            return fun(*args, **kwargs)
    finally:
        _level.depth -= 1


def _nested(outer: bool, outs: Sequence[Tensor], tracked: Sequence[Tensor],
            extra: Sequence[Any] = ()) -> bool:
    """Whether results must stay differentiable for an enclosing differentiation."""
    from .._tensor import Tensor

    if not outer:
        return False
    if _level.depth > 0:
        return True
    if any(isinstance(t, Tensor) and t.requires_grad for t in extra):
        return True
    # at top level: does the graph reach a leaf requiring grad other than the stand-ins?
    mine = {id(t) for t in tracked}
    seen: set = set()
    stack = [o._grad_fn for o in outs if o._grad_fn is not None]
    while stack:
        node = stack.pop()
        for e in node.edges:
            if e is None:
                continue
            child = edge_node(e)
            if child is not None:
                if child not in seen:
                    seen.add(child)
                    stack.append(child)
            elif id(e) not in mine and _standins.get(id(e)) is not e:
                return True
    return False


def _grads(outs: Sequence[Tensor], xs: Sequence[Tensor], nested: bool,
           gos: Sequence[Any] | None = None, retain: bool = True) -> list[Tensor]:
    """Gradients of ``outs`` (seeded with ``gos``) with respect to ``xs``; zeros if unused."""
    from .._ops.creation import zeros_like
    from . import grad as autograd_grad

    gos = [None] * len(outs) if gos is None else list(gos)
    live = [(o, g) for o, g in zip(outs, gos, strict=True) if o.requires_grad]
    if not live:
        return [zeros_like(x) for x in xs]
    gs = autograd_grad([o for o, _ in live], list(xs), grad_outputs=[g for _, g in live],
                       create_graph=nested, retain_graph=retain or nested, allow_unused=True)
    return [zeros_like(x) if g is None else g for g, x in zip(gs, xs, strict=True)]


def _outputs(res: Any, where: str) -> tuple[list[Tensor], bool]:
    """The output tensors of ``fun`` (a Tensor or a tuple/list of Tensors)."""
    from .._tensor import Tensor

    if isinstance(res, Tensor):
        return [res], True
    if isinstance(res, (tuple, list)) and res and all(isinstance(r, Tensor) for r in res):
        return list(res), False
    raise TypeError(f"{where}: the function must return a vtl Tensor or a tuple of Tensors, "
                    f"got {type(res).__name__}")


def _split_aux(res: Any, has_aux: bool, where: str) -> tuple[Any, Any]:
    if not has_aux:
        return res, None
    if not (isinstance(res, (tuple, list)) and len(res) == 2):
        raise TypeError(f"{where}(has_aux=True): the function must return a pair "
                        f"(output, aux), got {type(res).__name__}")
    return res[0], res[1]


def _detach_tree(x: Any) -> Any:
    from .._tensor import Tensor

    if isinstance(x, Tensor):
        return x.detach()
    if isinstance(x, (tuple, list)):
        return type(x)(_detach_tree(v) for v in x)
    if isinstance(x, dict):
        return {k: _detach_tree(v) for k, v in x.items()}
    return x


def _scalar_output(out: Any, where: str) -> Tensor:
    from .._tensor import Tensor

    if not isinstance(out, Tensor):
        raise TypeError(f"{where}: the function must return a vtl Tensor, got "
                        f"{type(out).__name__}")
    if out.size != 1:
        raise ValueError(f"{where}: the function must return a single-element tensor, got "
                         f"shape {out.shape}; use vjp or jacobian for non-scalar outputs")
    if _dkind(out.dtype) != "f":
        raise TypeError(f"{where}: the function must return a real floating-point tensor, got "
                        f"dtype {out.dtype}")
    return out


def value_and_grad(fun: Callable, argnums: int | Sequence[int] = 0,
                   has_aux: bool = False) -> Callable:
    """``fun`` -> a function returning ``(fun(*args), gradient)``.

    ``fun`` must return a single-element real tensor. With ``has_aux=True``,
    ``fun`` returns ``(value, aux)`` and the result is ``((value, aux), gradient)``.
    An int ``argnums`` gives one gradient, a tuple gives a tuple of gradients. A
    differentiated argument may be a tuple/list/dict of tensors (say a parameter dict for
    :func:`vtl.func.functional_call`); its gradient has the same structure.
    """

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        nums, single = _argnums(argnums, len(args), "grad")
        outer = grad_mode.state.enabled
        args_l, tracked, regroup = _track_tree_args(args, nums, "grad", outer)
        res, aux = _split_aux(_call(fun, args_l, kwargs), has_aux, "grad")
        out = _scalar_output(res, "grad")
        nested = _nested(outer, [out], tracked)
        gs = regroup(_grads([out], tracked, nested, retain=False))
        value = out if nested else out.detach()
        g = gs[0] if single else tuple(gs)
        if has_aux:
            return (value, aux if nested else _detach_tree(aux)), g
        return value, g

    wrapped.__name__ = f"value_and_grad({getattr(fun, '__name__', 'f')})"
    wrapped.__doc__ = getattr(fun, "__doc__", None)
    return wrapped


def grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Callable:
    """``fun`` (returning a single-element real tensor) -> its gradient function.

    ``vtl.grad(f)(x)`` has ``x``'s shape and dtype; with ``has_aux=True`` it
    returns ``(gradient, aux)``.

    Example:
        >>> f = lambda x: vtl.sum(x ** 3)
        >>> vtl.grad(f)(vtl.asarray([1.0, 2.0])).tolist()
        [3.0, 12.0]
    """
    vg = value_and_grad(fun, argnums, has_aux)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        value_aux, g = vg(*args, **kwargs)
        if has_aux:
            return g, value_aux[1]
        return g

    wrapped.__name__ = f"grad({getattr(fun, '__name__', 'f')})"
    wrapped.__doc__ = getattr(fun, "__doc__", None)
    return wrapped


def vjp(fun: Callable, *primals: Tensor, has_aux: bool = False) -> tuple[Any, ...]:
    """``(fun(*primals), vjp_fn)`` (plus ``aux`` with ``has_aux=True``).

    ``fun`` returns a Tensor or a tuple of Tensors; ``vjp_fn(cotangent)`` takes
    cotangents of the same structure and returns a tuple with one gradient per
    primal. ``vjp_fn`` may be called several times.
    """
    if not primals:
        raise TypeError("vjp: at least one primal is needed")
    outer = grad_mode.state.enabled
    tracked = [_track(p, "vjp", outer) for p in primals]
    res, aux = _split_aux(_call(fun, tracked, {}), has_aux, "vjp")
    outs, single = _outputs(res, "vjp")
    nested = _nested(outer, outs, tracked)

    def vjp_fn(cotangent: Any) -> tuple[Tensor, ...]:
        from .._tensor import _root_gradient

        cts = [cotangent] if single else cotangent
        if single and isinstance(cotangent, (tuple, list)) and len(cotangent) == 1:
            cts = list(cotangent)
        if not isinstance(cts, (tuple, list)) or len(cts) != len(outs):
            raise ValueError(f"vjp_fn: expected {len(outs)} cotangent(s), one per output")
        gos = [_root_gradient(o, c) for o, c in zip(outs, cts, strict=True)]
        return tuple(_grads(outs, tracked, nested or _nested(outer, [], [], gos), gos))

    value = res if nested else _detach_tree(res)
    if has_aux:
        return value, vjp_fn, (aux if nested else _detach_tree(aux))
    return value, vjp_fn


def jvp(fun: Callable, primals: Sequence[Tensor],
        tangents: Sequence[Tensor]) -> tuple[Any, Any]:
    """Forward-mode product ``(fun(*primals), J @ tangents)``.

    Computed by the double-VJP trick (two reverse passes), so it costs about
    as much as two gradients. ``fun`` returns a Tensor or a tuple of Tensors;
    the tangent output has the same structure.
    """
    from .._ops.creation import zeros_like
    from .._tensor import Tensor
    from . import grad as autograd_grad

    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise ValueError(f"jvp: {len(primals)} primals but {len(tangents)} tangents")
    for p, t in zip(primals, tangents, strict=True):
        if not isinstance(t, Tensor):
            raise TypeError(f"jvp: tangents must be vtl Tensors, got {type(t).__name__}")
        if isinstance(p, Tensor):
            if p.shape != t.shape:
                raise ValueError(f"jvp: tangent shape {t.shape} does not match primal shape "
                                 f"{p.shape}")
            if p.dtype != t.dtype:
                raise TypeError(f"jvp: tangent dtype {t.dtype} does not match primal dtype "
                                f"{p.dtype}")
    outer = grad_mode.state.enabled
    tracked = [_track(p, "jvp", outer) for p in primals]
    outs, single = _outputs(_call(fun, tracked, {}), "jvp")
    nested = _nested(outer, outs, tracked, tangents)
    tans: list[Tensor] = []
    with grad_mode.enable_grad():
        live = [o for o in outs if o.requires_grad]
        us = [zeros_like(o).requires_grad_(True) for o in live]
        gs: Sequence[Tensor | None] = [None] * len(tracked)
        if live:
            gs = autograd_grad(live, tracked, grad_outputs=us, create_graph=True,
                               allow_unused=True)
        pairs = [(g, t) for g, t in zip(gs, tangents, strict=True)
                 if g is not None and g.requires_grad]
        res: Sequence[Tensor | None] = [None] * len(us)
        if pairs:
            res = autograd_grad([g for g, _ in pairs], us, grad_outputs=[t for _, t in pairs],
                                create_graph=nested, allow_unused=True)
        it = iter(res)
        for o in outs:
            r = next(it) if o.requires_grad else None
            tans.append(zeros_like(o) if r is None else r)
    if not nested:
        outs = [o.detach() for o in outs]
        tans = [t.detach() for t in tans]
    if single:
        return outs[0], tans[0]
    return tuple(outs), tuple(tans)


def _stack_rows(rows: list[Tensor], shape: tuple[int, ...], x: Tensor) -> Tensor:
    from .. import _ops

    if not rows:
        return _ops.creation.zeros(shape, dtype=x.dtype, device=x.device)
    return _ops.manipulation.reshape(_ops.manipulation.stack(rows), shape)


def jacobian(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Callable:
    """``fun`` -> a function returning its Jacobian (reverse mode, one pass per output
    element).

    For an output ``y`` and argument ``x`` the Jacobian has shape
    ``y.shape + x.shape``. A tuple ``argnums`` gives a tuple (one Jacobian per
    argument); a function returning a tuple of tensors gives a tuple over its
    outputs. With ``has_aux=True`` the result is ``(jacobian, aux)``.
    """

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        from .._ops.creation import zeros
        from .._ops.manipulation import reshape

        nums, single_arg = _argnums(argnums, len(args), "jacobian")
        outer = grad_mode.state.enabled
        args_l, tracked = _track_args(args, nums, "jacobian", outer)
        res, aux = _split_aux(_call(fun, args_l, kwargs), has_aux, "jacobian")
        outs, single_out = _outputs(res, "jacobian")
        nested = _nested(outer, outs, tracked)
        per_out = []
        for o in outs:
            rows: list[list[Tensor]] = [[] for _ in tracked]
            n = o.size
            differentiable = o.requires_grad and _dkind(o.dtype) in "fc"
            for k in range(n if differentiable else 0):
                e = zeros(n, dtype=o.dtype, device=o.device)
                e[k] = 1
                gs = _grads([o], tracked, nested, [reshape(e, o.shape)])
                for r, g in zip(rows, gs, strict=True):
                    r.append(g)
            jacs = []
            for r, x in zip(rows, tracked, strict=True):
                shape = o.shape + x.shape
                jacs.append(_stack_rows(r, shape, x) if r else
                            zeros(shape, dtype=x.dtype, device=x.device))
            per_out.append(jacs[0] if single_arg else tuple(jacs))
        jac = per_out[0] if single_out else tuple(per_out)
        if has_aux:
            return jac, (aux if nested else _detach_tree(aux))
        return jac

    wrapped.__name__ = f"jacobian({getattr(fun, '__name__', 'f')})"
    return wrapped


def hessian(fun: Callable, argnums: int | Sequence[int] = 0) -> Callable:
    """``fun`` (returning a single-element real tensor) -> its Hessian function.

    For an argument ``x`` the Hessian has shape ``x.shape + x.shape``; a tuple
    ``argnums`` gives nested tuples ``H[i][j]`` of shape ``x_i.shape + x_j.shape``.
    """
    h = jacobian(grad(fun, argnums), argnums)
    h.__name__ = f"hessian({getattr(fun, '__name__', 'f')})"
    return h
