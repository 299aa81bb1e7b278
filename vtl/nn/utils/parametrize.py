"""Parametrizations of module tensors (PyTorch's ``torch.nn.utils.parametrize``).

``register_parametrization(module, "weight", P())`` makes ``module.weight`` the result of
``P()(original)`` each time it is read: the original tensor moves to
``module.parametrizations.weight.original`` (so ``state_dict`` has the key
``parametrizations.weight.original``, or ``original0``, ``original1``, ... when
``P.right_inverse`` returns several tensors), and the module's class becomes a subclass
``Parametrized<Class>`` holding a property for ``weight``. Assigning ``module.weight = X``
stores ``right_inverse(X)`` in the originals. As in PyTorch, the value is recomputed on every
access unless inside :func:`cached`.
"""

from __future__ import annotations

import copy
import copyreg
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import vtl

from ..._tensor import Tensor
from ..modules.container import ModuleDict, ModuleList
from ..modules.module import Module, Parameter

__all__ = [
    "ParametrizationList", "cached", "is_parametrized", "register_parametrization",
    "remove_parametrizations", "transfer_parametrizations_and_params",
    "type_before_parametrizations",
]

_cache_enabled = 0
_cache: dict[tuple[int, str], Tensor] = {}


@contextmanager
def cached() -> Iterator[None]:
    """Inside this context each parametrized tensor is computed once, on its first read,
    and the same tensor is returned until the (outermost) context exits; useful when a
    parametrized weight is read several times in one forward (e.g. in a recurrent loop).

    Yields:
        Nothing; the cache is active inside the ``with`` block.
    """
    global _cache, _cache_enabled
    _cache_enabled += 1
    try:
        yield
    finally:
        _cache_enabled -= 1
        if not _cache_enabled:
            _cache = {}


def _register_parameter_or_buffer(module: Module, name: str, x: Tensor) -> None:
    if isinstance(x, Parameter):
        module.register_parameter(name, x)
    else:
        module.register_buffer(name, x)


def _set_data(dest: Tensor, src: Tensor) -> None:
    """PyTorch's ``dest.set_(src)``: ``dest`` (the same object) takes ``src``'s data."""
    src = src.detach()
    dest._data = src._data
    dest._device = src._device
    dest._bump_version()


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor and its original(s) (``module.parametrizations
    .<name>``): calling it gives the parametrized tensor, ``right_inverse(value)`` stores
    ``value`` into the originals.

    Args:
        modules: The parametrizations, applied in order.
        original: The tensor being parametrized.
        unsafe: Skip the checks of shapes and dtypes.

    Raises:
        ValueError: If ``modules`` is empty, or (unless ``unsafe``) a parametrization changes the
            shape or dtype or ``right_inverse`` returns something invalid.
    """

    original: Tensor
    unsafe: bool

    def __init__(self, modules: Sequence[Module], original: Tensor, unsafe: bool = False) -> None:
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        original_shape, original_dtype = tuple(original.shape), original.dtype
        with vtl.no_grad():
            new: Any = original
            for module in reversed(self):
                if hasattr(module, "right_inverse"):
                    try:
                        new = module.right_inverse(new)
                    except NotImplementedError:
                        pass
        if not isinstance(new, Tensor) and not isinstance(new, Sequence):
            raise ValueError("'right_inverse' must return a Tensor or a Sequence of tensors "
                             f"(list, tuple...). Got {type(new).__name__}")
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if original.dtype != new.dtype:
                raise ValueError("When `right_inverse` outputs one tensor, it may not change the "
                                 f"dtype.\noriginal.dtype: {original.dtype}\n"
                                 f"right_inverse(original).dtype: {new.dtype}")
            if original.device != new.device:
                raise ValueError("When `right_inverse` outputs one tensor, it may not change the "
                                 f"device.\noriginal.device: {original.device}\n"
                                 f"right_inverse(original).device: {new.device}")
            if new is not original:
                with vtl.no_grad():
                    _set_data(original, new)
            _register_parameter_or_buffer(self, "original", original)
        else:
            for i, originali in enumerate(new):
                if not isinstance(originali, Tensor):
                    raise ValueError("'right_inverse' must return a Tensor or a Sequence of "
                                     f"tensors (list, tuple...). Got element {i} of the "
                                     f"sequence with type {type(originali).__name__}.")
                if isinstance(original, Parameter):
                    originali = Parameter(originali.detach(), original.requires_grad)
                else:
                    originali = originali.detach()
                    originali.requires_grad_(original.requires_grad)
                _register_parameter_or_buffer(self, f"original{i}", originali)
        if not self.unsafe:
            z = self()
            if not isinstance(z, Tensor):
                raise ValueError(f"A parametrization must return a tensor. Got "
                                 f"{type(z).__name__}.")
            if z.dtype != original_dtype:
                raise ValueError("Registering a parametrization may not change the dtype of the "
                                 "tensor, unless `unsafe` flag is enabled.\nunparametrized "
                                 f"dtype: {original_dtype}\nparametrized dtype: {z.dtype}")
            if tuple(z.shape) != original_shape:
                raise ValueError("Registering a parametrization may not change the shape of the "
                                 "tensor, unless `unsafe` flag is enabled.\nunparametrized "
                                 f"shape: {original_shape}\nparametrized shape: "
                                 f"{tuple(z.shape)}")

    def right_inverse(self, value: Tensor) -> None:
        """Store ``value`` in the originals, through the ``right_inverse`` of each
        parametrization, last first (outside the graph)."""
        with vtl.no_grad():
            for module in reversed(self):
                if hasattr(module, "right_inverse"):
                    value = module.right_inverse(value)
                else:
                    raise RuntimeError(f"parametrization {type(module).__name__} does not "
                                       "implement right_inverse.")
            if self.is_tensor:
                if not isinstance(value, Tensor):
                    raise ValueError(f"`right_inverse` should return a tensor. Got "
                                     f"{type(value).__name__}")
                if value.dtype != self.original.dtype:
                    raise ValueError(f"The tensor returned by `right_inverse` has dtype "
                                     f"{value.dtype} while `original` has dtype "
                                     f"{self.original.dtype}")
                _set_data(self.original, value)
            else:
                if not isinstance(value, Sequence):
                    raise ValueError("'right_inverse' must return a sequence of tensors. Got "
                                     f"{type(value).__name__}.")
                if len(value) != self.ntensors:
                    raise ValueError("'right_inverse' must return a sequence of tensors of "
                                     f"length {self.ntensors}. Got a sequence of length "
                                     f"{len(value)}.")
                for i, tensor in enumerate(value):
                    original_i = getattr(self, f"original{i}")
                    if not isinstance(tensor, Tensor):
                        raise ValueError(f"'right_inverse' must return a sequence of tensors. "
                                         f"Got element {i} of type {type(tensor).__name__}.")
                    if original_i.dtype != tensor.dtype:
                        raise ValueError(f"Tensor {i} returned by `right_inverse` has dtype "
                                         f"{tensor.dtype} while `original{i}` has dtype "
                                         f"{original_i.dtype}")
                    _set_data(original_i, tensor)

    def forward(self) -> Tensor:  # type: ignore[override]
        if self.is_tensor:
            x = self[0](self.original)
        else:
            x = self[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for i in range(1, len(self)):
            x = self[i](x)
        return x


def _inject_new_class(module: Module) -> None:
    """Make ``module`` an instance of a new subclass ``Parametrized<Class>`` of its class
    (the properties of its parametrized tensors live there, not on the original class)."""
    cls = module.__class__

    def default_deepcopy(self: Any, memo: dict) -> Any:
        obj = memo.get(id(self))
        if obj is not None:
            return obj
        replica = self.__new__(self.__class__)
        memo[id(self)] = replica
        replica.__dict__ = copy.deepcopy(self.__dict__, memo)
        for slot in copyreg._slotnames(self.__class__):  # type: ignore[attr-defined]
            if hasattr(self, slot):
                setattr(replica, slot, copy.deepcopy(getattr(self, slot), memo))
        return replica

    def getstate(self: Any) -> Any:
        raise RuntimeError("Serialization of parametrized modules is only supported through "
                           "state_dict() (vtl.save(module.state_dict(), path)).")

    dct: dict[str, Any] = {"__getstate__": getstate}
    if not hasattr(cls, "__deepcopy__"):
        dct["__deepcopy__"] = default_deepcopy
    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), dct)


def _inject_property(module: Module, tensor_name: str) -> None:
    """The property ``tensor_name`` of ``module``'s (parametrized) class."""
    if hasattr(module, tensor_name):
        raise RuntimeError(f"Module already has an attribute named '{tensor_name}'")

    def get_parametrized(self: Any) -> Tensor:
        parametrization = self.parametrizations[tensor_name]
        if _cache_enabled:
            key = (id(self), tensor_name)
            tensor = _cache.get(key)
            if tensor is None:
                tensor = _cache[key] = parametrization()
            return tensor
        return parametrization()

    def set_original(self: Any, value: Tensor) -> None:
        self.parametrizations[tensor_name].right_inverse(value)

    setattr(module.__class__, tensor_name, property(get_parametrized, set_original))


def _check_same(y: Tensor, x: Any, what: str, tensor_name: str) -> None:
    if not isinstance(x, Tensor):
        raise ValueError(f"{what} must return a tensor. Got {type(x).__name__}.")
    if x.dtype != y.dtype:
        raise ValueError(f"Registering a parametrization may not change the dtype of the "
                         f"tensor, unless the `unsafe` flag is enabled.\nmodule.{tensor_name}"
                         f".dtype: {y.dtype}\n{what} dtype: {x.dtype}")
    if tuple(x.shape) != tuple(y.shape):
        raise ValueError(f"Registering a parametrization may not change the shape of the "
                         f"tensor, unless the `unsafe` flag is enabled.\nmodule.{tensor_name}"
                         f".shape: {tuple(y.shape)}\n{what} shape: {tuple(x.shape)}")


def register_parametrization(module: Module, tensor_name: str, parametrization: Module, *,
                             unsafe: bool = False) -> Module:
    """Parametrize the parameter or buffer ``tensor_name`` of ``module`` by the module
    ``parametrization``: reading ``module.<tensor_name>`` then returns
    ``parametrization(original)``.

    The original tensor (the same Parameter object, so optimizers holding it stay valid)
    moves to ``module.parametrizations[tensor_name].original``; if ``parametrization``
    has a ``right_inverse``, the original is first set to ``right_inverse(tensor)`` (which
    may return several tensors: ``original0``, ``original1``, ...). Registering on an
    already parametrized name appends to its list (applied in order). Unless ``unsafe``,
    the parametrization must keep the tensor's shape and dtype (checked here,
    ``ValueError``). Returns ``module``.

    Args:
        module: The module holding the tensor.
        tensor_name: Name of the parameter or buffer.
        parametrization: A module computing the tensor from the original.
        unsafe: Skip the checks of shapes and dtypes.

    Returns:
        ``module``, modified in place.

    Raises:
        TypeError: If ``module`` or ``parametrization`` is not a Module.
        ValueError: If ``module`` has no such tensor, it is ``None``, or a check fails.
    """
    if not isinstance(module, Module):
        raise TypeError(f"register_parametrization() expects a vtl.nn.Module, got "
                        f"{type(module).__name__}")
    if not isinstance(parametrization, Module):
        raise TypeError(f"register_parametrization(): the parametrization must be a "
                        f"vtl.nn.Module, got {type(parametrization).__name__}")
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            y = getattr(module, tensor_name)
            x = parametrization(y)
            _check_same(y, x, "parametrization(module." + tensor_name + ")", tensor_name)
            if hasattr(parametrization, "right_inverse"):
                try:
                    z = parametrization.right_inverse(x)
                except NotImplementedError:
                    pass
                else:
                    _check_same(y, z, "parametrization.right_inverse", tensor_name)
        plist = module.parametrizations[tensor_name]
        plist.append(parametrization)
        plist.unsafe |= unsafe
    elif tensor_name in module._buffers or tensor_name in module._parameters:
        original = getattr(module, tensor_name)
        if original is None:
            raise ValueError(f"register_parametrization(): module.{tensor_name} is None")
        parametrizations = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_new_class(module)
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = parametrizations
    else:
        raise ValueError(f"Module '{module}' does not have a parameter, a buffer, or a "
                         f"parametrized element with name '{tensor_name}'")
    return module


def is_parametrized(module: Module, tensor_name: str | None = None) -> bool:
    """Whether ``module`` has a parametrization (on ``tensor_name``, if given).

    Args:
        module: The module.
        tensor_name: A parameter or buffer name (default: any).

    Returns:
        A bool.
    """
    parametrizations = module.__dict__.get("_modules", {}).get("parametrizations")
    if not isinstance(parametrizations, ModuleDict):
        return False
    if tensor_name is None:
        return len(parametrizations) > 0
    return tensor_name in parametrizations


def remove_parametrizations(module: Module, tensor_name: str,
                            leave_parametrized: bool = True) -> Module:
    """Remove the parametrizations of ``tensor_name``: it becomes a plain parameter (or
    buffer) again, holding the current parametrized value (``leave_parametrized=True``) or
    the original. With several originals only ``leave_parametrized=True`` is possible.
    When no parametrized tensor is left, the module gets its original class back.

    Args:
        module: The module holding the tensor.
        tensor_name: Name of the parameter or buffer.
        leave_parametrized: Keep the current parametrized value (else the original).

    Returns:
        ``module``, modified in place.

    Raises:
        ValueError: If ``tensor_name`` is not parametrized, or ``leave_parametrized=False`` with
            several originals.
    """
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    parametrizations = module.parametrizations[tensor_name]
    if parametrizations.is_tensor:
        original = parametrizations.original
        if leave_parametrized:
            with vtl.no_grad():
                t = getattr(module, tensor_name)
                _set_data(original, t)
    else:
        if not leave_parametrized:
            raise ValueError("Cannot leave unparametrized (`leave_parametrized=False`) a tensor "
                             "that is parametrized in terms of a sequence of tensors.")
        t = getattr(module, tensor_name)
        original = Parameter(t.detach()) if t.requires_grad else t.detach()
    delattr(module.__class__, tensor_name)
    del module.parametrizations[tensor_name]
    _register_parameter_or_buffer(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = module.__class__.__bases__[0]
    return module


def type_before_parametrizations(module: Module) -> type:
    """The class of ``module`` before any parametrization was registered on it.

    Args:
        module: The module.

    Returns:
        A class.
    """
    if is_parametrized(module):
        return module.__class__.__bases__[0]
    return type(module)


def transfer_parametrizations_and_params(from_module: Module, to_module: Module,
                                         tensor_name: str | None = None) -> Module:
    """Register on ``to_module`` the parametrizations of ``from_module`` (of
    ``tensor_name``, or all) and make it share their originals; returns ``to_module``.

    Args:
        from_module: The module whose parametrizations are copied.
        to_module: The module that receives them.
        tensor_name: One parametrized tensor (default: all).

    Returns:
        ``to_module``.
    """
    if is_parametrized(from_module):
        names = list(from_module.parametrizations) if tensor_name is None else [tensor_name]
        for name in names:
            if not hasattr(to_module, name):
                setattr(to_module, name, Parameter(getattr(from_module, name).detach()))
            for param_func in from_module.parametrizations[name]:
                register_parametrization(to_module, name, param_func)
            src = from_module.parametrizations[name]
            dst = to_module.parametrizations[name]
            if src.is_tensor:
                dst.original = src.original
            else:
                for i in range(src.ntensors):
                    setattr(dst, f"original{i}", getattr(src, f"original{i}"))
    return to_module
