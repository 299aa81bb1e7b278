"""Containers: Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict."""

from __future__ import annotations

import sys
import warnings
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, TextIO

import vtl

from .activation import ReLU
from .linear import Linear
from .module import Module, Parameter

__all__ = ["Container", "ModuleDict", "ModuleList", "ParameterDict", "ParameterList",
           "Sequential"]


def _index(idx: int, n: int, what: str) -> int:
    if not -n <= idx < n:
        raise IndexError(f"index {idx} is out of range for a {what} of length {n}")
    return idx % n


def _plain(m: Any, cls: type) -> bool:
    """Whether ``m`` is a ``cls`` itself (not a subclass) without forward hooks: a module
    whose call can be fused with its neighbour's."""
    if type(m) is not cls:
        return False
    d = m.__dict__
    return not d["_forward_pre_hooks"] and not d["_forward_hooks"]


class Sequential(Module):
    """Modules applied in order: ``Sequential(a, b, c)(x) == c(b(a(x)))``.

    Also ``Sequential(OrderedDict(name=module, ...))`` for named layers.

    Example:
        >>> model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        >>> model(vtl.zeros((5, 4))).shape
        (5, 2)
        >>> len(model), type(model[1]).__name__
        (3, 'ReLU')
    """

    def __init__(self, *args: Any) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], (OrderedDict, dict)):
            for name, m in args[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(args):
                self.add_module(str(i), m)

    def forward(self, input: Any) -> Any:  # noqa: A002
        """The modules in order; a ``Linear`` followed by a ``ReLU`` (neither with hooks)
        runs as one op, ``F.linear_relu`` (the same values and gradients, one launch fewer
        on the GPU backends)."""
        linear = None  # a Linear held back in case a ReLU follows
        for m in self._modules.values():
            if linear is not None:
                if _plain(m, ReLU):
                    input = linear._forward_relu(input)
                    linear = None
                    continue
                input = linear(input)
                linear = None
            if _plain(m, Linear):
                linear = m
                continue
            input = m(input)
        return input if linear is None else linear(input)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __getitem__(self, idx: int | slice) -> Any:
        if isinstance(idx, slice):
            return Sequential(OrderedDict(list(self._modules.items())[idx]))
        return list(self._modules.values())[_index(idx, len(self), "Sequential")]

    def __setitem__(self, idx: int, module: Module) -> None:
        key = list(self._modules)[_index(idx, len(self), "Sequential")]
        self.add_module(key, module)

    def __delitem__(self, idx: int | slice) -> None:
        keys = list(self._modules)
        for k in (keys[idx] if isinstance(idx, slice) else
                  [keys[_index(idx, len(self), "Sequential")]]):
            del self._modules[k]
        items = list(self._modules.values())  # renumber positional names like PyTorch
        if all(k.isdigit() for k in keys):
            self._modules.clear()
            for i, m in enumerate(items):
                self._modules[str(i)] = m

    def append(self, module: Module) -> Sequential:
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> Sequential:
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> Sequential:
        items = list(self._modules.values())
        n = len(items)
        if not -n <= index <= n:
            raise IndexError(f"index {index} is out of range for a Sequential of length {n}")
        items.insert(index % (n + 1) if index < 0 else index, module)
        self._modules.clear()
        for i, m in enumerate(items):
            self.add_module(str(i), m)
        return self

    def summary(self, input_shape: tuple[int, ...], *, dtype: Any = None, device: Any = None,
                file: TextIO | None = None) -> None:
        """Print each layer's output shape and parameter count for an input of
        ``input_shape`` (batch axis included: ``(1, 3, 32, 32)`` for one 3x32x32
        image), then the totals.

        Runs one forward pass on zeros (on ``device``, by default the device of the
        model's first parameter or buffer) without recording gradients. A layer that
        rejects the shape raises ``ValueError`` naming the layer and recalling that
        the shape includes the batch axis (chained to the layer's own error).
        """
        out = file or sys.stdout
        given = tuple(input_shape)
        if device is None:  # where the model is
            first = next(self.parameters(), None)
            if first is None:
                first = next(self.buffers(), None)
            device = None if first is None else first.device
        x = vtl.zeros(given, dtype=dtype or vtl.float32, device=device)
        rows = [("Layer (type)", "Output shape", "Param #")]
        total = trainable = 0
        with vtl.no_grad():
            for name, m in self._modules.items():
                try:
                    x = m(x)
                except (ValueError, TypeError, IndexError) as exc:
                    raise ValueError(self._summary_error(given, x, dtype, device, name, m, exc)
                                     ) from exc
                n = sum(p.size for p in m.parameters())
                total += n
                trainable += sum(p.size for p in m.parameters() if p.requires_grad)
                shape = tuple(x.shape) if hasattr(x, "shape") else type(x).__name__
                rows.append((f"{name} ({type(m).__name__})", str(shape), f"{n:,}"))
        w = [max(len(r[i]) for r in rows) + 2 for i in range(3)]
        line = "=" * sum(w)
        text = [line, "".join(c.ljust(w[i]) for i, c in enumerate(rows[0])).rstrip(), line]
        for r in rows[1:]:
            text.append("".join(c.ljust(w[i]) for i, c in enumerate(r)).rstrip())
        text += [line, f"Input shape: {tuple(input_shape)}", f"Total params: {total:,}",
                 f"Trainable params: {trainable:,}",
                 f"Non-trainable params: {total - trainable:,}", line]
        print("\n".join(text), file=out)

    def _summary_error(self, given: tuple[int, ...], x: Any, dtype: Any, device: Any,
                       name: str, layer: Module, exc: Exception) -> str:
        """What summary() says when layer ``name`` rejects its input ``x``."""
        shape = tuple(x.shape) if hasattr(x, "shape") else type(x).__name__
        msg = (f"Sequential.summary(): input_shape {given} does not fit the model: layer "
               f"{name!r} ({type(layer).__name__}) rejected its input of shape {shape} "
               f"({type(exc).__name__}: {exc}); input_shape must include the batch axis")
        batched = (1, *given)
        try:
            with vtl.no_grad():
                self(vtl.zeros(batched, dtype=dtype or vtl.float32, device=device))
        except Exception:
            return f"{msg}, e.g. (1, 3, 32, 32) for one 3x32x32 image"
        return f"{msg}: the model runs on {batched}, one sample of shape {given}"


class ModuleList(Module):
    """A list of modules, registered so their parameters are found.

    Args:
        modules: An iterable of modules to append.
    """

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __getitem__(self, idx: int | slice) -> Any:
        if isinstance(idx, slice):
            return ModuleList(list(self._modules.values())[idx])
        return self._modules[str(_index(idx, len(self), "ModuleList"))]

    def __setitem__(self, idx: int, module: Module) -> None:
        self.add_module(str(_index(idx, len(self), "ModuleList")), module)

    def __delitem__(self, idx: int | slice) -> None:
        items = list(self._modules.values())
        if isinstance(idx, slice):
            del items[idx]
        else:
            del items[_index(idx, len(self), "ModuleList")]
        self._modules.clear()
        for i, m in enumerate(items):
            self._modules[str(i)] = m

    def append(self, module: Module) -> ModuleList:
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        if isinstance(modules, Module) and not isinstance(modules, (ModuleList, Sequential)):
            raise TypeError("ModuleList.extend() expects an iterable of modules, got a "
                            f"{type(modules).__name__}")
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> None:
        items = list(self._modules.values())
        items.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(items):
            self.add_module(str(i), m)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("ModuleList has no forward(); iterate over it instead")


class ModuleDict(Module):
    """An ordered dict of modules, registered so their parameters are found.

    Args:
        modules: A mapping of names to modules, or an iterable of ``(name, module)`` pairs, added
            in order.
    """

    def __init__(self, modules: Mapping[str, Module] | Iterable | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: str) -> bool:
        return key in self._modules

    def keys(self) -> Iterable[str]:
        return self._modules.keys()

    def values(self) -> Iterable[Module]:
        return self._modules.values()

    def items(self) -> Iterable[tuple[str, Module]]:
        return self._modules.items()

    def pop(self, key: str) -> Module:
        return self._modules.pop(key)

    def clear(self) -> None:
        self._modules.clear()

    def update(self, modules: Mapping[str, Module] | Iterable) -> None:
        pairs = modules.items() if hasattr(modules, "items") else modules
        for k, m in pairs:
            self[k] = m

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("ModuleDict has no forward(); index it instead")


class ParameterList(Module):
    """A list of parameters, registered as ``'0'``, ``'1'``, ...

    Args:
        values: An iterable of parameters (a tensor that is not a :class:`Parameter` is wrapped in
            one).
    """

    def __init__(self, values: Iterable[Any] | None = None) -> None:
        super().__init__()
        for v in values or ():
            self.append(v)

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self) -> Iterator[Parameter]:
        return iter(self._parameters.values())

    def __getitem__(self, idx: int) -> Parameter:
        return self._parameters[str(_index(idx, len(self), "ParameterList"))]

    def __setitem__(self, idx: int, value: Any) -> None:
        self.register_parameter(str(_index(idx, len(self), "ParameterList")),
                                value if isinstance(value, Parameter) else Parameter(value))

    def append(self, value: Any) -> ParameterList:
        self.register_parameter(str(len(self)),
                                value if isinstance(value, Parameter) else Parameter(value))
        return self

    def extra_repr(self) -> str:
        return "\n".join(f"({i}): Parameter containing: [{p.dtype} of size {tuple(p.shape)}]"
                         for i, p in enumerate(self))


class ParameterDict(Module):
    """An ordered dict of parameters.

    Args:
        parameters: A mapping of names to parameters (a tensor that is not a :class:`Parameter` is
            wrapped in one).
    """

    def __init__(self, parameters: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        for k, v in (parameters or {}).items():
            self[k] = v

    def __getitem__(self, key: str) -> Parameter:
        return self._parameters[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.register_parameter(key, value if isinstance(value, Parameter) else Parameter(value))

    def __delitem__(self, key: str) -> None:
        del self._parameters[key]

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self) -> Iterator[str]:
        return iter(self._parameters)

    def __contains__(self, key: str) -> bool:
        return key in self._parameters

    def keys(self) -> Iterable[str]:
        return self._parameters.keys()

    def values(self) -> Iterable[Parameter]:
        return self._parameters.values()

    def items(self) -> Iterable[tuple[str, Parameter]]:
        return self._parameters.items()

    def extra_repr(self) -> str:
        return "\n".join(f"({k}): Parameter containing: [{p.dtype} of size {tuple(p.shape)}]"
                         for k, p in self.items())


class Container(Module):
    """Deprecated (as in PyTorch): a Module whose keyword arguments become sub-modules;
    subclass :class:`Module` instead. Warns with a ``FutureWarning``."""

    def __init__(self, **kwargs: Any) -> None:
        warnings.warn("nn.Container is deprecated. All of it's functionality is now "
                      "implemented in nn.Module. Subclass that instead.", FutureWarning,
                      stacklevel=2)
        super().__init__()
        for key, value in kwargs.items():
            self.add_module(key, value)
