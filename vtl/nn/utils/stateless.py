"""``functional_call``: run a module with other tensors in place of its parameters and
buffers (PyTorch's ``torch.func.functional_call``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..._tensor import Tensor
from ..modules.module import Module

__all__ = ["functional_call"]


def _merge(parameter_and_buffer_dicts: Any) -> dict[str, Any]:
    if isinstance(parameter_and_buffer_dicts, Mapping):
        return dict(parameter_and_buffer_dicts)
    if isinstance(parameter_and_buffer_dicts, Sequence):
        merged: dict[str, Any] = {}
        for d in parameter_and_buffer_dicts:
            if not isinstance(d, Mapping):
                raise TypeError("functional_call: expected a dict or a sequence of dicts, got "
                                f"a sequence holding {type(d).__name__}")
            clash = merged.keys() & d.keys()
            if clash:
                raise ValueError(f"functional_call: {sorted(clash)} given in more than one dict")
            merged.update(d)
        return merged
    raise TypeError("functional_call: expected a dict or a sequence of dicts, got "
                    f"{type(parameter_and_buffer_dicts).__name__}")


def _slots(module: Module) -> dict[str, tuple[dict, str]]:
    """Every parameter and buffer name (tied ones under each name) -> (its store, key)."""
    slots: dict[str, tuple[dict, str]] = {}
    for prefix, mod in module.named_modules(remove_duplicate=False):
        for store in (mod._parameters, mod._buffers):
            for key in store:
                slots[f"{prefix}.{key}" if prefix else key] = (store, key)
    return slots


def functional_call(module: Module, parameter_and_buffer_dicts: Any, args: Any = None,
                    kwargs: dict | None = None, *, tie_weights: bool = True,
                    strict: bool = False) -> Any:
    """Call ``module(*args, **kwargs)`` with the given tensors in place of its parameters
    and buffers, then put the module's own back.

    Args:
        module: the module to call.
        parameter_and_buffer_dicts: a dict (or a sequence of dicts) from the names of
            ``named_parameters()``/``named_buffers()`` to tensors. Names not given keep the
            module's own tensors (unless ``strict``).
        args: one positional argument, or a tuple of them.
        kwargs: keyword arguments of the call.
        tie_weights: a parameter the module uses under several names (tied weights) is
            replaced under all of them when one name is given (PyTorch's default).
        strict: every parameter and buffer must be given.

    Returns:
        What the module returns. Gradients flow to the given tensors, not to the module's
        parameters, so ``vtl.grad(lambda p: loss(functional_call(model, p, x)))(params)``
        differentiates with respect to a dict of tensors (and ``vtl.vmap`` over it gives
        per-sample gradients or model ensembles).

    Raises:
        KeyError: a name that is neither a parameter nor a buffer of the module, or (with
            ``strict``) a missing one.
        TypeError: a value that is not a Tensor.
    """
    if not isinstance(module, Module):
        raise TypeError(f"functional_call: module must be a vtl.nn.Module, got "
                        f"{type(module).__name__}")
    given = _merge(parameter_and_buffer_dicts)
    slots = _slots(module)
    unknown = sorted(set(given) - set(slots))
    if unknown:
        raise KeyError(f"functional_call: {unknown} are not parameters or buffers of "
                       f"{type(module).__name__}")
    if strict:
        missing = sorted(set(slots) - set(given))
        if missing:
            raise KeyError(f"functional_call(strict=True): missing {missing}")
    for name, v in given.items():
        if not isinstance(v, Tensor):
            raise TypeError(f"functional_call: {name!r} must be a vtl.Tensor, got "
                            f"{type(v).__name__}")
    by_object: dict[int, Any] = {}
    if tie_weights:
        for name, v in given.items():
            store, key = slots[name]
            if store[key] is not None:
                by_object[id(store[key])] = v
    saved = []
    try:
        for name, (store, key) in slots.items():
            old = store[key]
            new = given.get(name)
            if new is None and tie_weights and old is not None:
                new = by_object.get(id(old))
            if new is not None:
                saved.append((store, key, old))
                store[key] = new
        if args is None:
            args = ()
        elif not isinstance(args, tuple):
            args = (args,)
        return module(*args, **(kwargs or {}))
    finally:
        for store, key, old in reversed(saved):
            store[key] = old
