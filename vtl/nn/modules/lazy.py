"""Lazy layers: their input size (``in_features``, ``in_channels``, ``num_features``) is
inferred from the first input, when their parameters are created.

Until the first call their parameters are :class:`UninitializedParameter` (and running
statistics :class:`UninitializedBuffer`): placeholders without a shape. The first call
(``module(x)``) materialises them with the shape ``x`` implies, initialises them as the
eager layer would (``reset_parameters``) and turns the module into that eager layer
(``LazyLinear`` becomes :class:`Linear`, and so on). ``load_state_dict`` into a lazy
module materialises its placeholders with the checkpoint's shapes.

Build the optimizer after the first forward (or after ``load_state_dict``), as with
PyTorch: an optimizer built earlier sees the placeholders, and those of its optimizers
that size their state at construction would not follow the materialisation.
"""

from __future__ import annotations

import operator
from typing import Any

import vtl

from ..._tensor import Tensor
from .conv import (
    Conv1d,
    Conv2d,
    Conv3d,
    ConvTranspose1d,
    ConvTranspose2d,
    ConvTranspose3d,
)
from .linear import Linear
from .module import Module, Parameter
from .normalization import (
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
)

__all__ = ["LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyConv1d",
           "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d",
           "LazyConvTranspose3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d",
           "LazyInstanceNorm3d", "LazyLinear", "UninitializedBuffer",
           "UninitializedParameter"]


def _placeholder(device: Any, dtype: Any) -> Tensor:
    return vtl.empty((0,), dtype=vtl.float32 if dtype is None else dtype, device=device)


def _materialize(t: Tensor, shape: Any, device: Any, dtype: Any, becomes: type) -> None:
    try:
        shape = (operator.index(shape),) if not isinstance(shape, (tuple, list)) else \
            tuple(operator.index(s) for s in shape)
    except TypeError:
        raise TypeError(f"materialize(): shape must be an int or a tuple of ints, got "
                        f"{shape!r}") from None
    new = vtl.empty(shape, dtype=t.dtype if dtype is None else dtype,
                    device=t.device if device is None else device)
    t._data = new._data
    t._device = new._device
    t._bump_version()
    t.__class__ = becomes


class UninitializedParameter(Parameter):
    """A parameter whose shape is not known yet (of a lazy layer). It holds no data;
    :meth:`materialize` gives it a shape (uninitialised values) and makes it a
    :class:`Parameter`, the same object."""

    __slots__ = ()
    _uninitialized = True
    cls_to_become = Parameter

    def __new__(cls, requires_grad: bool = True, device: Any = None,
                dtype: Any = None) -> UninitializedParameter:
        p = Parameter(_placeholder(device, dtype), requires_grad)
        p.__class__ = cls
        return p

    def materialize(self, shape: Any, device: Any = None, dtype: Any = None) -> None:
        """Give the parameter ``shape`` (on ``device``/``dtype``, default its own) and make
        it a plain :class:`Parameter`; the values are uninitialised."""
        _materialize(self, shape, device, dtype, self.cls_to_become)

    def __repr__(self) -> str:
        return "<UninitializedParameter>"

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (UninitializedParameter, (self.requires_grad, str(self.device), self.dtype))


class UninitializedBuffer(Tensor):
    """A buffer whose shape is not known yet (running statistics of a lazy norm layer);
    :meth:`materialize` gives it a shape and makes it a plain tensor."""

    __slots__ = ()
    _uninitialized = True
    cls_to_become = Tensor

    def __new__(cls, requires_grad: bool = False, device: Any = None,
                dtype: Any = None) -> UninitializedBuffer:
        t = _placeholder(device, dtype)
        t.__class__ = cls
        if requires_grad:
            t.requires_grad_(True)
        return t

    def materialize(self, shape: Any, device: Any = None, dtype: Any = None) -> None:
        """Give the buffer ``shape`` (on ``device``/``dtype``, default its own) and make it
        a plain tensor; the values are uninitialised."""
        _materialize(self, shape, device, dtype, self.cls_to_become)

    def __repr__(self) -> str:
        return "<UninitializedBuffer>"

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (UninitializedBuffer, (self.requires_grad, str(self.device), self.dtype))


def _is_lazy(t: Any) -> bool:
    return getattr(type(t), "_uninitialized", False)


class _LazyModuleMixin:
    """Shared machinery: the first call infers the shapes, materialises and initialises
    the parameters, then turns the module into ``cls_to_become``."""

    cls_to_become: type | None = None

    def has_uninitialized_params(self) -> bool:
        """Whether a parameter or buffer of this module is still a placeholder."""
        return any(_is_lazy(t) for t in (*self._parameters.values(),  # type: ignore[attr-defined]
                                         *self._buffers.values()))  # type: ignore[attr-defined]

    def initialize_parameters(self, input: Any, *args: Any) -> None:  # noqa: A002
        raise NotImplementedError

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self._inferred():
            super().reset_parameters()  # type: ignore[misc]

    def _inferred(self) -> bool:
        return True

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if args:
            x = args[0]
        elif "input" in kwargs:
            x = kwargs["input"]
        else:
            raise TypeError(f"{type(self).__name__}: the first call needs the input (to infer "
                            "the parameter shapes)")
        if not isinstance(x, Tensor):
            raise TypeError(f"{type(self).__name__}: expected input to be a vtl.Tensor, got "
                            f"{type(x).__name__}; convert it with vtl.asarray(...)")
        with vtl.no_grad():
            self.initialize_parameters(x)
        if self.has_uninitialized_params():
            raise RuntimeError(f"module {type(self).__name__} has not been fully initialized")
        self.__class__ = self.cls_to_become  # type: ignore[assignment]
        return Module.__call__(self, *args, **kwargs)  # type: ignore[arg-type]


class LazyLinear(_LazyModuleMixin, Linear):
    """:class:`Linear` whose ``in_features`` is the last dimension of the first input."""

    cls_to_become = Linear

    def __init__(self, out_features: int, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        Linear.__init__(self, 0, 0, False, device=device, dtype=dtype)
        self.out_features = out_features
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def _inferred(self) -> bool:
        return self.in_features != 0

    def initialize_parameters(self, input: Any) -> None:  # noqa: A002
        if input.ndim == 0:
            raise ValueError(f"{type(self).__name__}: expected an input with at least 1 "
                             f"dimension, got a 0-D input")
        if self.has_uninitialized_params():
            self.in_features = int(input.shape[-1])
            self.weight.materialize((self.out_features, self.in_features))
            if self.bias is not None:
                self.bias.materialize((self.out_features,))
            self.reset_parameters()
        else:  # loaded from a state_dict
            self.in_features = int(self.weight.shape[1])


class _LazyConvMixin(_LazyModuleMixin):
    def _inferred(self) -> bool:
        return self.in_channels != 0  # type: ignore[attr-defined]

    def initialize_parameters(self, input: Any, *args: Any) -> None:  # noqa: A002
        n = self._nsp  # type: ignore[attr-defined]
        name = type(self).__name__
        if input.ndim not in (n + 1, n + 2):
            raise ValueError(f"{name}: expected a {n + 1}-D (unbatched) or {n + 2}-D "
                             f"(batched) input, got input of shape {tuple(input.shape)}")
        if not self.has_uninitialized_params():  # loaded from a state_dict
            w = self.weight  # type: ignore[attr-defined]
            self.in_channels = int(w.shape[0] if self._transposed  # type: ignore[attr-defined]
                                   else w.shape[1] * self.groups)  # type: ignore[attr-defined]
            return
        c = int(input.shape[-n - 1])
        g = self.groups  # type: ignore[attr-defined]
        if c % g:
            raise ValueError(f"{name}: in_channels ({c}, from the input of shape "
                             f"{tuple(input.shape)}) must be divisible by groups ({g})")
        self.in_channels = c
        out, k = self.out_channels, self.kernel_size  # type: ignore[attr-defined]
        if self._transposed:  # type: ignore[attr-defined]
            shape = (c, out // g, *k)
        else:
            shape = (out, c // g, *k)
        self.weight.materialize(shape)  # type: ignore[attr-defined]
        if self.bias is not None:  # type: ignore[attr-defined]
            self.bias.materialize((out,))  # type: ignore[attr-defined]
        self.reset_parameters()


def _lazy_conv(cls: type, transposed: bool) -> type:
    """A lazy class of the convolution ``cls``: the same arguments without
    ``in_channels``."""
    if transposed:
        def __init__(self: Any, out_channels: int, kernel_size: Any, stride: Any = 1,
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                     bias: bool = True, dilation: Any = 1, padding_mode: str = "zeros",
                     device: Any = None, dtype: Any = None) -> None:
            cls.__init__(self, 0, 0, kernel_size, stride, padding, output_padding, 1, False,
                         dilation, padding_mode, device=device, dtype=dtype)
            _lazy_conv_params(self, out_channels, groups, bias, device, dtype)
    else:
        def __init__(self: Any, out_channels: int, kernel_size: Any, stride: Any = 1,
                     padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True,
                     padding_mode: str = "zeros", device: Any = None,
                     dtype: Any = None) -> None:
            cls.__init__(self, 0, 0, kernel_size, stride, padding, dilation, 1, False,
                         padding_mode, device=device, dtype=dtype)
            _lazy_conv_params(self, out_channels, groups, bias, device, dtype)
    name = "Lazy" + cls.__name__
    doc = (f":class:`{cls.__name__}` whose ``in_channels`` is the channel dimension of the "
           "first input (the same arguments, less ``in_channels``).")
    return type(name, (_LazyConvMixin, cls), {"__init__": __init__, "cls_to_become": cls,
                                               "__doc__": doc, "__module__": __name__,
                                               "__qualname__": name})


def _lazy_conv_params(m: Any, out_channels: int, groups: int, bias: bool, device: Any,
                      dtype: Any) -> None:
    if groups < 1 or out_channels % groups:
        raise ValueError(f"{type(m).__name__}: out_channels ({out_channels}) must be "
                         f"divisible by groups ({groups})")
    m.out_channels = out_channels
    m.groups = groups
    m.weight = UninitializedParameter(device=device, dtype=dtype)
    if bias:
        m.bias = UninitializedParameter(device=device, dtype=dtype)


LazyConv1d = _lazy_conv(Conv1d, False)
LazyConv2d = _lazy_conv(Conv2d, False)
LazyConv3d = _lazy_conv(Conv3d, False)
LazyConvTranspose1d = _lazy_conv(ConvTranspose1d, True)
LazyConvTranspose2d = _lazy_conv(ConvTranspose2d, True)
LazyConvTranspose3d = _lazy_conv(ConvTranspose3d, True)


class _LazyNormMixin(_LazyModuleMixin):
    _channel_axis = 1

    def _inferred(self) -> bool:
        return self.num_features != 0  # type: ignore[attr-defined]

    def _lazy_init(self, affine: bool, track_running_stats: bool, bias: bool, device: Any,
                   dtype: Any) -> None:
        if affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            if bias:
                self.bias = UninitializedParameter(device=device, dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(device=device, dtype=dtype)
            self.running_var = UninitializedBuffer(device=device, dtype=dtype)

    def _channels(self, input: Any) -> int:  # noqa: A002
        return int(input.shape[1])

    def initialize_parameters(self, input: Any) -> None:  # noqa: A002
        if input.ndim < 2:
            raise ValueError(f"{type(self).__name__}: expected an input with a channel "
                             f"dimension, got input of shape {tuple(input.shape)}")
        c = self._channels(input)
        self.num_features = c
        if self.has_uninitialized_params():
            for t in (*self._parameters.values(), *self._buffers.values()):  # type: ignore[attr-defined]
                if _is_lazy(t):
                    t.materialize((c,))
            self.reset_parameters()


def _lazy_norm(cls: type, affine: bool, track: bool) -> type:
    def __init__(self: Any, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = affine, track_running_stats: bool = track, device: Any = None,
                 dtype: Any = None, *, bias: bool = True) -> None:
        cls.__init__(self, 0, eps, momentum, affine, track_running_stats, device, dtype,
                     bias=bias)
        self._lazy_init(affine, track_running_stats, bias, device, dtype)

    name = "Lazy" + cls.__name__
    doc = (f":class:`{cls.__name__}` whose ``num_features`` is the channel dimension of the "
           "first input (the same arguments, less ``num_features``).")
    body: dict[str, Any] = {"__init__": __init__, "cls_to_become": cls, "__doc__": doc,
                            "__module__": __name__, "__qualname__": name}
    if getattr(cls, "_spatial", 0):
        sp = cls._spatial

        def _channels(self: Any, input: Any) -> int:  # noqa: A002
            return int(input.shape[input.ndim - sp - 1])

        body["_channels"] = _channels
    return type(name, (_LazyNormMixin, cls), body)


LazyBatchNorm1d = _lazy_norm(BatchNorm1d, True, True)
LazyBatchNorm2d = _lazy_norm(BatchNorm2d, True, True)
LazyBatchNorm3d = _lazy_norm(BatchNorm3d, True, True)
LazyInstanceNorm1d = _lazy_norm(InstanceNorm1d, False, False)
LazyInstanceNorm2d = _lazy_norm(InstanceNorm2d, False, False)
LazyInstanceNorm3d = _lazy_norm(InstanceNorm3d, False, False)
