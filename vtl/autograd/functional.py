"""JAX-style function transforms built on the tape: ``grad``, ``value_and_grad``,
``vjp``, ``jvp``, ``jacobian`` and ``hessian``.

Transforms nest (``grad(grad(f))``): when an argument already takes part in an
outer differentiation, the inner gradient is computed with ``create_graph``
so the outer one can see through it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from . import grad_mode

if TYPE_CHECKING:
    from .._tensor import Tensor


def _argnums(argnums: int | Sequence[int], nargs: int) -> tuple[tuple[int, ...], bool]:
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    for i in nums:
        if not -nargs <= i < nargs:
            raise ValueError(f"argnums {i} is out of range for {nargs} positional argument(s)")
    return tuple(i % nargs for i in nums), single


def _track(x: Any, where: str) -> tuple[Tensor, bool]:
    """A differentiable stand-in for ``x`` and whether ``x`` was already tracked."""
    from .._ops._core import record
    from .._tensor import Tensor

    if not isinstance(x, Tensor):
        raise TypeError(f"{where}: differentiated arguments must be vtl Tensors, got "
                        f"{type(x).__name__}")
    if x.dtype.kind not in "fc":
        raise TypeError(f"{where}: can only differentiate with respect to floating-point "
                        f"tensors, got dtype {x.dtype}")
    if x.requires_grad and grad_mode.state.enabled:
        return record(x._data, x._device, "AliasBackward", (x,), lambda g, _: g), True
    return x.detach().requires_grad_(True), False


def _grads(out: Tensor, xs: list[Tensor], nested: bool, go: Any = None) -> list[Tensor]:
    from .._ops.creation import zeros_like
    from . import grad as autograd_grad

    if not out.requires_grad:
        return [zeros_like(x) for x in xs]
    gs = autograd_grad(out, xs, grad_outputs=go, create_graph=nested, retain_graph=True,
                       allow_unused=True)
    return [zeros_like(x) if g is None else g for g, x in zip(gs, xs, strict=True)]


def _scalar_output(out: Any, where: str) -> Tensor:
    from .._tensor import Tensor

    if not isinstance(out, Tensor):
        raise TypeError(f"{where}: the function must return a vtl Tensor, got {type(out).__name__}")
    if out.size != 1:
        raise ValueError(f"{where}: the function must return a single-element tensor, got shape "
                         f"{out.shape}; use vjp or jacobian for non-scalar outputs")
    if out.dtype.kind not in "fc":
        raise TypeError(f"{where}: the function must return a floating-point tensor")
    return out


def value_and_grad(fun: Callable, argnums: int | Sequence[int] = 0,
                   has_aux: bool = False) -> Callable:
    """``fun`` -> a function returning ``(fun(*args), gradient)``.

    With ``has_aux=True``, ``fun`` returns ``(value, aux)`` and the result is
    ``((value, aux), gradient)``. A tuple ``argnums`` gives a tuple of gradients.
    """

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        nums, single = _argnums(argnums, len(args))
        args = list(args)
        tracked = []
        nested = False
        for i in nums:
            args[i], was = _track(args[i], "grad")
            tracked.append(args[i])
            nested = nested or was
        with grad_mode.enable_grad():
            res = fun(*args, **kwargs)
        aux = None
        if has_aux:
            if not (isinstance(res, tuple) and len(res) == 2):
                raise TypeError("grad(has_aux=True): the function must return (value, aux)")
            res, aux = res
        out = _scalar_output(res, "grad")
        gs = _grads(out, tracked, nested)
        value = out if nested else out.detach()
        g = gs[0] if single else tuple(gs)
        return ((value, aux), g) if has_aux else (value, g)

    wrapped.__name__ = f"value_and_grad({getattr(fun, '__name__', 'f')})"
    return wrapped


def grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Callable:
    """``fun`` (returning a single-element tensor) -> its gradient function."""
    vg = value_and_grad(fun, argnums, has_aux)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        (value_aux, g) = vg(*args, **kwargs)
        if has_aux:
            return g, value_aux[1]
        return g

    wrapped.__name__ = f"grad({getattr(fun, '__name__', 'f')})"
    return wrapped


def vjp(fun: Callable, *primals: Tensor) -> tuple[Tensor, Callable]:
    """``(fun(*primals), vjp_fn)``; ``vjp_fn(cotangent)`` returns one gradient per primal."""
    tracked = []
    nested = False
    for p in primals:
        t, was = _track(p, "vjp")
        tracked.append(t)
        nested = nested or was
    with grad_mode.enable_grad():
        out = fun(*tracked)

    def vjp_fn(cotangent: Tensor) -> tuple[Tensor, ...]:
        from .._tensor import _root_gradient

        return tuple(_grads(out, tracked, nested, _root_gradient(out, cotangent)
                            if out.requires_grad else None))

    return (out if nested else out.detach()), vjp_fn


def jvp(fun: Callable, primals: Sequence[Tensor],
        tangents: Sequence[Tensor]) -> tuple[Tensor, Tensor]:
    """Forward-mode product ``(fun(*primals), J @ tangents)``, by the double-VJP trick."""
    from .._ops.creation import zeros_like
    from . import grad as autograd_grad

    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise ValueError(f"jvp(): {len(primals)} primals but {len(tangents)} tangents")
    for p, t in zip(primals, tangents, strict=True):
        if tuple(p.shape) != tuple(t.shape):
            raise ValueError(f"jvp(): tangent shape {t.shape} does not match primal {p.shape}")
    tracked = [_track(p, "jvp")[0] for p in primals]
    with grad_mode.enable_grad():
        out = fun(*tracked)
        if not out.requires_grad:
            return out.detach(), zeros_like(out)
        u = zeros_like(out).requires_grad_(True)
        gs = autograd_grad(out, tracked, grad_outputs=u, create_graph=True, allow_unused=True)
        pairs = [(g, t) for g, t in zip(gs, tangents, strict=True)
                 if g is not None and g.requires_grad]
        if not pairs:
            return out.detach(), zeros_like(out)
        res = autograd_grad([g for g, _ in pairs], [u], grad_outputs=[t for _, t in pairs],
                            allow_unused=True)
    tan = res[0] if res[0] is not None else zeros_like(out)
    return out.detach(), tan.detach()


def jacobian(fun: Callable, argnums: int | Sequence[int] = 0) -> Callable:
    """``fun`` -> a function returning the Jacobian, shaped ``out.shape + x.shape``."""

    def wrapped(*args: Any) -> Any:
        from .. import _ops
        from .._ops.creation import zeros, zeros_like
        from .._ops.manipulation import reshape

        nums, single = _argnums(argnums, len(args))
        args = list(args)
        tracked = []
        nested = False
        for i in nums:
            args[i], was = _track(args[i], "jacobian")
            tracked.append(args[i])
            nested = nested or was
        with grad_mode.enable_grad():
            out = fun(*args)
        rows: list[list[Tensor]] = [[] for _ in tracked]
        n = out.size
        for k in range(n):
            e = zeros(n, dtype=out.dtype, device=out.device)
            e._data[k] = 1
            e = reshape(e, out.shape)
            gs = _grads(out, tracked, nested, e) if out.requires_grad else \
                [zeros_like(x) for x in tracked]
            for r, g in zip(rows, gs, strict=True):
                r.append(g)
        jacs = []
        for r, x in zip(rows, tracked, strict=True):
            if n == 0:
                jacs.append(zeros(out.shape + x.shape, dtype=x.dtype, device=x.device))
            else:
                jacs.append(reshape(_ops.manipulation.stack(r), out.shape + x.shape))
        return jacs[0] if single else tuple(jacs)

    return wrapped


def hessian(fun: Callable, argnums: int | Sequence[int] = 0) -> Callable:
    """``fun`` (returning a single-element tensor) -> its Hessian function."""
    return jacobian(grad(fun, argnums), argnums)
