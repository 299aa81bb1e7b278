"""Custom differentiable ops: :class:`Function` (PyTorch's ``torch.autograd.Function``).

::

    class Exp(vtl.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = vtl.exp(x)
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y

    y = Exp.apply(x)          # one graph node named "ExpBackward"

``forward`` runs without recording (grad mode off) on the arguments as given; its tensor
results become the outputs of one graph node. ``backward`` gets one gradient per output
(zeros for outputs that received none, unless ``ctx.set_materialize_grads(False)``) and
returns one gradient per ``forward`` argument: a tensor of that argument's shape, or
``None`` (always ``None`` for arguments that are not tensors). With
``backward(create_graph=True)`` the rule runs with grad mode on, so a ``backward`` written
with vtl functions is itself differentiable.
"""

from __future__ import annotations

from typing import Any

from ..backends._dtypes import kind as _dkind
from .grad_mode import no_grad
from .grad_mode import state as _grad_state

__all__ = ["Function", "FunctionCtx"]


class FunctionCtx:
    """What ``forward`` hands to ``backward`` (``ctx``)."""

    def __init__(self, needs_input_grad: tuple[bool, ...]) -> None:
        #: for each ``forward`` argument, whether it is a tensor that requires grad
        self.needs_input_grad = needs_input_grad
        self.saved_tensors: tuple[Any, ...] = ()
        self._non_differentiable: set[int] = set()
        self._materialize = True

    def save_for_backward(self, *tensors: Any) -> None:
        """Keep tensors (or ``None``) for ``backward`` as ``ctx.saved_tensors``; an input
        among them changed in place before backward raises there."""
        from .._tensor import Tensor

        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError("save_for_backward() takes tensors or None, got "
                                f"{type(t).__name__}; keep other values as ctx attributes")
        self.saved_tensors = tuple(tensors)

    def mark_non_differentiable(self, *outputs: Any) -> None:
        """Outputs that get no gradient (e.g. indices); integer outputs are so anyway."""
        self._non_differentiable.update(id(o) for o in outputs)

    def set_materialize_grads(self, value: bool) -> None:
        """Whether outputs that received no gradient give ``backward`` zeros (default) or
        ``None``."""
        self._materialize = bool(value)


class Function:
    """Base class of custom ops: subclass it with static ``forward(ctx, *args)`` and
    ``backward(ctx, *grad_outputs)``, and call ``YourOp.apply(*args)``.

    Example:
        >>> class Square(vtl.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         ctx.save_for_backward(x)
        ...         return x * x
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         (x,) = ctx.saved_tensors
        ...         return 2 * x * g
        >>> x = vtl.asarray([3.0, 4.0], requires_grad=True)
        >>> vtl.sum(Square.apply(x)).backward()
        >>> x.grad.tolist()
        [6.0, 8.0]
    """

    @staticmethod
    def forward(ctx: FunctionCtx, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("a Function subclass must define forward(ctx, ...)")

    @staticmethod
    def backward(ctx: FunctionCtx, *grad_outputs: Any) -> Any:
        raise NotImplementedError("a Function subclass must define backward(ctx, ...) to be "
                                  "differentiated")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(f"{type(self).__name__} is used through {type(self).__name__}.apply"
                        "(...), not instantiated")

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        """Run ``forward`` and record one graph node whose rule is ``backward``."""
        from .._ops._core import record_multi, same_device
        from .._tensor import Tensor

        needs = tuple(isinstance(a, Tensor) and a._requires_grad for a in args)
        ctx = FunctionCtx(needs)
        with no_grad():
            result = cls.forward(ctx, *args, **kwargs)
        single = isinstance(result, Tensor)
        outs = (result,) if single else tuple(result) if isinstance(result, (tuple, list)) \
            else None
        if outs is None or not outs or not all(isinstance(o, Tensor) for o in outs):
            raise TypeError(f"{cls.__name__}.forward must return a tensor or a tuple of "
                            f"tensors, got {type(result).__name__}")
        if not (_grad_state.enabled and any(needs)):
            return result
        tensors = [a for a in args if isinstance(a, Tensor)]
        dev = same_device(f"{cls.__name__}.apply", [*tensors, *outs])
        positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        differentiable = [_dkind(o._data.dtype) in "fc" and id(o) not in ctx._non_differentiable
                          for o in outs]
        # saved outputs reach backward as the node's outputs (rebuilt from its saved data at
        # backward time), so a backward written with vtl functions differentiates through them
        out_of = {id(o): i for i, o in enumerate(outs)}
        saved_outputs = {j: out_of[id(t)] for j, t in enumerate(ctx.saved_tensors)
                         if t is not None and id(t) in out_of}
        saved_inputs = [t for j, t in enumerate(ctx.saved_tensors)
                        if t is not None and j not in saved_outputs]
        if saved_outputs:
            ctx.saved_tensors = tuple(None if j in saved_outputs else t
                                      for j, t in enumerate(ctx.saved_tensors))

        metas = [(o.shape, o._data.dtype) for o in outs]  # (not the outputs: no cycle)

        def vjp(gs: Any, outputs: Any) -> list[Any]:
            if not isinstance(gs, (list, tuple)):
                gs, outputs = [gs], [outputs]
            if saved_outputs:
                ctx.saved_tensors = tuple(outputs[saved_outputs[j]] if j in saved_outputs
                                          else t for j, t in enumerate(ctx.saved_tensors))
            if ctx._materialize:
                from .._ops.creation import zeros

                gs = [zeros(metas[i][0], dtype=metas[i][1], device=dev) if g is None else g
                      for i, g in enumerate(gs)]
            got = cls.backward(ctx, *gs)
            got = (got,) if isinstance(got, Tensor) or got is None else tuple(got)
            if len(got) != len(args):
                raise RuntimeError(f"{cls.__name__}.backward returned {len(got)} gradient(s); "
                                   f"forward took {len(args)} argument(s)")
            for i, g in enumerate(got):
                if g is not None and i not in positions:
                    raise RuntimeError(f"{cls.__name__}.backward returned a gradient for "
                                       f"argument {i}, which is not a tensor")
            return [got[i] for i in positions]

        new = record_multi([o._data for o in outs], dev, f"{cls.__name__}Backward", tensors,
                           vjp, saved=saved_inputs, save_outputs=bool(saved_outputs),
                           differentiable=differentiable)
        return new[0] if single else type(result)(new) if isinstance(result, tuple) \
            else list(new)
