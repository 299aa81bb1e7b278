"""``Module`` and ``Parameter``: the base of every layer.

A Module owns parameters (:class:`Parameter`), buffers (tensors that are
state but not trained, e.g. running statistics) and sub-modules, found by
attribute assignment as in PyTorch. Layers only own state and call
``vtl.nn.functional``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import vtl

from ..._tensor import Tensor
from ...backends import Device
from ...backends._dtypes import kind as _dkind

__all__ = ["Buffer", "Module", "Parameter"]


class Parameter(Tensor):
    """A Tensor that is a module parameter: it requires grad by default and is
    registered by :class:`Module` when assigned as an attribute.

    ``Parameter(data)`` shares ``data``'s storage (like PyTorch); ``data`` must be
    floating-point or complex when ``requires_grad``.
    """

    __slots__ = ()

    def __new__(cls, data: Any = None, requires_grad: bool = True) -> Parameter:
        if data is None:
            data = vtl.empty((0,))
        elif not isinstance(data, Tensor):
            data = vtl.asarray(data)
        p = object.__new__(cls)
        p._data = data._data
        p._device = data._device
        p._grad_fn = None
        p._requires_grad = False
        p._vc = data._version_counter()
        if requires_grad:
            p.requires_grad_(True)
        return p

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (_rebuild_parameter, (self.numpy(), str(self._device), self._requires_grad))


class Buffer(Tensor):
    """A tensor that a :class:`Module` registers as a buffer when assigned as an attribute
    (``self.stats = nn.Buffer(vtl.zeros(3))`` is ``register_buffer("stats", ...)``), as
    PyTorch's ``nn.Buffer``. ``persistent=False`` keeps it out of ``state_dict``. It shares
    ``data``'s storage and keeps its ``requires_grad``."""

    __slots__ = ("persistent",)

    def __new__(cls, data: Any = None, *, persistent: bool = True) -> Buffer:
        if data is None:
            data = vtl.empty((0,))
        elif not isinstance(data, Tensor):
            data = vtl.asarray(data)
        b = object.__new__(cls)
        b._data = data._data
        b._device = data._device
        b._grad_fn = None
        b._requires_grad = False
        b._vc = data._version_counter()
        b.persistent = bool(persistent)
        if data.requires_grad:
            b.requires_grad_(True)
        return b

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (_rebuild_buffer, (self.numpy(), str(self._device), self.persistent))


def _rebuild_buffer(host: Any, device: str, persistent: bool) -> Buffer:
    return Buffer(vtl.asarray(host, device=device), persistent=persistent)


def _rebuild_parameter(host: Any, device: str, requires_grad: bool) -> Parameter:
    return Parameter(vtl.asarray(host, device=device), requires_grad)


class _IncompatibleKeys(NamedTuple):
    missing_keys: list[str]
    unexpected_keys: list[str]


def _addindent(s: str, n: int) -> str:
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    return lines[0] + "\n" + "\n".join(" " * n + line for line in lines[1:])


class Module:
    """Base class of all layers and models (PyTorch's ``torch.nn.Module``).

    Subclasses call ``super().__init__()`` first, assign :class:`Parameter`\\ s,
    sub-modules and buffers (:meth:`register_buffer`) as attributes and
    implement :meth:`forward`; call the module (``m(x)``) to run it.
    """

    training: bool
    _version: int = 1

    def __init__(self) -> None:
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = OrderedDict()
        d["_buffers"] = OrderedDict()
        d["_non_persistent"] = set()
        d["_modules"] = OrderedDict()
        d["_forward_hooks"] = OrderedDict()
        d["_forward_pre_hooks"] = OrderedDict()

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function'
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        d = self.__dict__
        pre = d.get("_forward_pre_hooks")
        if pre is None:
            raise RuntimeError(f"{type(self).__name__}.__init__() did not call "
                               "super().__init__()")
        if not pre and not d["_forward_hooks"]:  # the common case: no hooks
            return self.forward(*args, **kwargs)
        for hook in list(pre.values()):
            res = hook(self, args)
            if res is not None:
                args = res if isinstance(res, tuple) else (res,)
        out = self.forward(*args, **kwargs)
        for hook in list(d["_forward_hooks"].values()):
            res = hook(self, args, out)
            if res is not None:
                out = res
        return out

    # -- hooks --------------------------------------------------------------------------------
    def register_forward_hook(self, hook: Callable) -> _Handle:
        """``hook(module, args, output)`` after every forward; may return a new output."""
        return _Handle(self.__dict__["_forward_hooks"], hook)

    def register_forward_pre_hook(self, hook: Callable) -> _Handle:
        """``hook(module, args)`` before every forward; may return new args."""
        return _Handle(self.__dict__["_forward_pre_hooks"], hook)

    # -- registration -------------------------------------------------------------------------
    def _check_init(self, what: str) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {what} before {type(self).__name__}."
                                 "__init__() calls super().__init__()")

    @staticmethod
    def _check_name(name: Any, kind: str) -> None:
        if not isinstance(name, str):
            raise TypeError(f"{kind} name must be a string, got {type(name).__name__}")
        if not name or "." in name:
            raise KeyError(f'{kind} name can\'t be empty or contain ".", got {name!r}')

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add a parameter (or a ``None`` placeholder, e.g. ``bias=False``)."""
        self._check_init("parameters")
        self._check_name(name, "parameter")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign {type(param).__name__} as parameter {name!r} "
                            "(vtl.nn.Parameter or None expected)")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute {name!r} already exists")
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Add a buffer: state saved in ``state_dict`` (unless not ``persistent``)
        and moved by :meth:`to`, but not a parameter."""
        self._check_init("buffers")
        self._check_name(name, "buffer")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign {type(tensor).__name__} as buffer {name!r} "
                            "(vtl.Tensor or None expected)")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute {name!r} already exists")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent.discard(name)
        else:
            self._non_persistent.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        """Add a sub-module (``None`` is a placeholder)."""
        self._check_init("sub-modules")
        self._check_name(name, "module")
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a vtl.nn.Module")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute {name!r} already exists")
        self._modules[name] = module

    register_module = add_module

    def __setattr__(self, name: str, value: Any) -> None:
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            self._check_init("parameters")
            self._remove_from(name, d, keep="_parameters")
            self.register_parameter(name, value)
            return
        if params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign {type(value).__name__} as parameter {name!r} "
                                "(vtl.nn.Parameter or None expected)")
            params[name] = None
            return
        if isinstance(value, Module):
            self._check_init("sub-modules")
            self._remove_from(name, d, keep="_modules")
            d["_modules"][name] = value
            return
        modules = d.get("_modules")
        if modules is not None and name in modules:
            if value is not None:
                raise TypeError(f"cannot assign {type(value).__name__} as sub-module {name!r} "
                                "(vtl.nn.Module or None expected)")
            modules[name] = None
            return
        if isinstance(value, Buffer):
            self._check_init("buffers")
            self._remove_from(name, d, keep="_buffers")
            self.register_buffer(name, value, value.persistent)
            return
        buffers = d.get("_buffers")
        if buffers is not None and name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign {type(value).__name__} as buffer {name!r} "
                                "(vtl.Tensor or None expected)")
            buffers[name] = value
            return
        object.__setattr__(self, name, value)

    @staticmethod
    def _remove_from(name: str, d: dict, keep: str) -> None:
        for store in ("_parameters", "_buffers", "_modules"):
            if store != keep and name in d.get(store, {}):
                del d[store][name]
        d.pop(name, None)
        if keep != "_buffers":
            d.get("_non_persistent", set()).discard(name)

    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            s = d.get(store)
            if s is not None and name in s:
                return s[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            if name in d.get(store, {}):
                del d[store][name]
                d["_non_persistent"].discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self) -> list[str]:
        extra = [*self._parameters, *self._buffers, *self._modules]
        return sorted(set(super().__dir__()) | set(extra))

    # -- traversal ----------------------------------------------------------------------------
    def named_modules(self, memo: set | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Module]]:
        """``(name, module)`` for this module and every descendant, depth first."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            yield from m.named_modules(memo, f"{prefix}.{name}" if prefix else name,
                                       remove_duplicate)

    def modules(self) -> Iterator[Module]:
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[tuple[str, Module]]:
        seen: set[int] = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self) -> Iterator[Module]:
        for _, m in self.named_children():
            yield m

    def _named_members(self, store: str, prefix: str, recurse: bool,
                       remove_duplicate: bool = True) -> Iterator[tuple[str, Any]]:
        seen: set[int] = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) \
            if recurse else [(prefix, self)]
        for mprefix, m in mods:
            for name, v in getattr(m, store).items():
                if v is None or (remove_duplicate and id(v) in seen):
                    continue
                if remove_duplicate:
                    seen.add(id(v))
                yield (f"{mprefix}.{name}" if mprefix else name), v

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        """``(name, parameter)`` pairs; shared parameters appear once."""
        return self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def get_submodule(self, target: str) -> Module:
        """The sub-module at dotted path ``target`` (``''`` is ``self``)."""
        if target == "":
            return self
        mod: Module = self
        for item in target.split("."):
            sub = mod._modules.get(item) if isinstance(mod, Module) else None
            if sub is None:
                raise AttributeError(f"{type(mod).__name__} has no sub-module {item!r} "
                                     f"(looking up {target!r})")
            mod = sub
        return mod

    def get_parameter(self, target: str) -> Parameter:
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        p = mod._parameters.get(name)
        if p is None:
            raise AttributeError(f"{type(mod).__name__} has no parameter {name!r}")
        return p

    def get_buffer(self, target: str) -> Tensor:
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        b = mod._buffers.get(name)
        if b is None:
            raise AttributeError(f"{type(mod).__name__} has no buffer {name!r}")
        return b

    # -- modes and bulk operations ----------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        """Set training mode (dropout active, batch statistics) on every module."""
        if not isinstance(mode, bool):
            raise ValueError(f"train(): mode must be a bool, got {type(mode).__name__}")
        for m in self.modules():
            m.__dict__["training"] = mode
        return self

    def eval(self) -> Module:
        """``train(False)``."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all parameters (to ``None`` by default, else zeros)."""
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                p.grad = vtl.zeros_like(p.grad)

    def apply(self, fn: Callable[[Module], Any]) -> Module:
        """Call ``fn`` on every sub-module (children first) and then on ``self``."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def _apply_tensors(self, fn: Callable[[Tensor], Tensor]) -> Module:
        """Replace the data of every parameter/buffer/grad by ``fn(tensor)``, keeping the
        Parameter objects (so optimizers holding them stay valid)."""
        seen: set[int] = set()
        for m in self.modules():
            for store in (m._parameters, m._buffers):
                for t in store.values():
                    if t is None or id(t) in seen:
                        continue
                    seen.add(id(t))
                    _swap(t, fn(t))
                    g = t.grad
                    if g is not None:
                        t._grad = fn(g).detach()
        return self

    def to(self, *args: Any, dtype: Any = None, device: Any = None) -> Module:
        """Move (``m.to("cupy")``, ``m.to(device=...)``) and/or cast floating-point
        parameters and buffers (``m.to(vtl.float64)``) in place; returns ``self``."""
        from ...backends._dtypes import ALL_DTYPES, to_dtype

        for a in args:
            if isinstance(a, Tensor):
                device, dtype = a.device, a.dtype
            elif isinstance(a, Device) or (isinstance(a, str) and a not in ALL_DTYPES):
                device = a
            else:
                dtype = a
        dt = None if dtype is None else to_dtype(dtype)
        if dt is not None and _dkind(dt) not in "fc":
            raise TypeError(f"Module.to() only accepts floating-point or complex dtypes, "
                            f"got {dt}")

        def fn(t: Tensor) -> Tensor:
            with vtl.no_grad():
                out = t.detach()
                if device is not None:
                    out = out.to_device(device)
                if dt is not None and _dkind(out.dtype) in "fc" and out.dtype != dt:
                    if _dkind(out.dtype) == "c" and _dkind(dt) != "c":
                        return out
                    out = vtl.astype(out, dt)
            return out

        return self._apply_tensors(fn)

    def double(self) -> Module:
        """Cast floating-point parameters and buffers to float64 in place."""
        return self.to(vtl.float64)

    def float(self) -> Module:  # noqa: A003
        """Cast floating-point parameters and buffers to float32 in place."""
        return self.to(vtl.float32)

    def half(self) -> Module:
        """Cast floating-point parameters and buffers to float16 in place."""
        return self.to(vtl.float16)

    def bfloat16(self) -> Module:
        """Cast floating-point parameters and buffers to bfloat16 in place."""
        return self.to(vtl.bfloat16)

    def cpu(self) -> Module:
        return self.to("numpy")

    def cuda(self, device: int | None = None) -> Module:
        """Move to the cupy backend (PyTorch's ``.cuda()``; ``"cuda"`` names cupy)."""
        return self.to(f"cupy:{0 if device is None else int(device)}")

    # -- state_dict ---------------------------------------------------------------------------
    def state_dict(self, *, destination: dict | None = None, prefix: str = "",
                   keep_vars: bool = False) -> OrderedDict[str, Tensor]:
        """Parameters and persistent buffers by dotted name (detached unless
        ``keep_vars``); shared tensors appear under every name."""
        out: OrderedDict[str, Tensor] = OrderedDict() if destination is None else destination
        for mprefix, m in self.named_modules(prefix=prefix.rstrip("."),
                                             remove_duplicate=False):
            base = f"{mprefix}." if mprefix else ""
            for name, p in m._parameters.items():
                if p is not None:
                    out[base + name] = p if keep_vars else p.detach()
            for name, b in m._buffers.items():
                if b is not None and name not in m._non_persistent:
                    out[base + name] = b if keep_vars else b.detach()
        return out

    def load_state_dict(self, state_dict: Any, strict: bool = True,
                        assign: bool = False) -> _IncompatibleKeys:
        """Copy tensors from ``state_dict`` into the parameters and buffers.

        Values may be vtl tensors or arrays (e.g. NumPy from a checkpoint); they are
        cast to each target's dtype and moved to its device. Everything is checked
        before anything is written: a shape mismatch, or with ``strict`` a missing
        or unexpected key, raises ``RuntimeError`` listing every problem and leaves
        the module unchanged. Returns ``(missing_keys, unexpected_keys)``. With
        ``assign=True`` the module takes the given tensors (as Parameters) instead
        of copying into its own.
        """
        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "__getitem__"):
            raise TypeError(f"load_state_dict() expects a dict-like state_dict, got "
                            f"{type(state_dict).__name__}")
        own = self.state_dict(keep_vars=True)
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        errors: list[str] = []
        plan: list[tuple[str, Tensor, Any]] = []
        for key, target in own.items():
            if key not in state_dict:
                continue
            value = state_dict[key]
            shape = tuple(getattr(value, "shape", ()))
            if not hasattr(value, "shape") and not isinstance(value, (int, float, bool)):
                errors.append(f"value for {key!r} is a {type(value).__name__}, expected a "
                              "tensor or array")
                continue
            if shape != tuple(target.shape) and not getattr(target, "_uninitialized", False):
                errors.append(f"size mismatch for {key}: copying a param with shape {shape} "
                              f"from checkpoint, the shape in current model is "
                              f"{tuple(target.shape)}.")
                continue
            plan.append((key, target, value))
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: "
                              + ", ".join(f'"{k}"' for k in unexpected) + ".")
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: "
                              + ", ".join(f'"{k}"' for k in missing) + ".")
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                               + "\n\t".join(errors))
        converted = []
        for key, target, value in plan:  # convert all first: a failure leaves no trace
            try:
                if isinstance(value, Tensor):
                    v = value.detach()
                    if v.device is not target.device:
                        v = v.to_device(target.device)
                    if v.dtype != target.dtype:
                        v = vtl.astype(v, target.dtype)
                else:
                    v = vtl.asarray(value, dtype=target.dtype, device=target.device)
            except (TypeError, ValueError, RuntimeError) as exc:
                raise RuntimeError(f"Error(s) in loading state_dict for "
                                   f"{type(self).__name__}:\n\tcannot convert {key!r}: "
                                   f"{exc}") from exc
            converted.append((key, target, v))
        with vtl.no_grad():
            for key, target, v in converted:
                if getattr(target, "_uninitialized", False):  # a lazy layer's placeholder
                    target.materialize(tuple(v.shape))
                if assign:
                    self._assign(key, target, v)
                else:
                    target[...] = v
        return _IncompatibleKeys(missing, unexpected)

    def _assign(self, key: str, target: Tensor, v: Tensor) -> None:
        mod_path, _, name = key.rpartition(".")
        mod = self.get_submodule(mod_path)
        if isinstance(target, Parameter):
            mod._parameters[name] = Parameter(vtl.asarray(v, copy=True),
                                              target.requires_grad)
        else:
            mod._buffers[name] = vtl.asarray(v, copy=True)

    # -- repr -----------------------------------------------------------------------------------
    def extra_repr(self) -> str:
        """The text inside the parentheses of this module's repr (override in layers)."""
        return ""

    def _get_name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        lines = []
        extra = self.extra_repr()
        if extra:
            lines = extra.split("\n")
        for name, m in self._modules.items():
            lines.append(f"({name}): " + _addindent(repr(m), 2))
        main = self._get_name() + "("
        if lines:
            if len(lines) == 1 and not self._modules:
                main += lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"

    def num_parameters(self, trainable_only: bool = False) -> int:
        """Total number of parameter elements (optionally only those requiring grad)."""
        return sum(p.size for p in self.parameters()
                   if p.requires_grad or not trainable_only)


def _swap(t: Tensor, new: Tensor) -> None:
    """Make ``t`` hold ``new``'s data (device and dtype too), keeping the object."""
    t._data = new._data
    t._device = new._device
    t._bump_version()


class _Handle:
    """Removes a hook with ``handle.remove()`` (or as a context manager)."""

    _next = 0

    def __init__(self, store: OrderedDict, hook: Callable) -> None:
        _Handle._next += 1
        self.id = _Handle._next
        self._store = store
        store[self.id] = hook

    def remove(self) -> None:
        self._store.pop(self.id, None)

    def __enter__(self) -> _Handle:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()
