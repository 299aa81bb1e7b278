"""``vtl.Tensor``: one backend array plus its autograd record.

Every operator and method calls a function of the ``vtl`` namespace, so the
array-API object protocol and PyTorch's tensor conveniences share one
implementation per op (in ``vtl._ops``). ``Tensor`` declares its attributes,
conversions and autograd methods here; it inherits the operators from
:class:`~vtl._tensor_operators.TensorOperators` and the PyTorch-style methods
(``t.sum()``, ``t.reshape(...)``) from :class:`~vtl._tensor_methods.TensorMethods`.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from typing import Any

from ._tensor_methods import TensorMethods
from ._tensor_operators import TensorOperators
from .autograd import graph as _graph
from .autograd.graph import Node, RemovableHandle, run_backward
from .backends import Device
from .backends._dtypes import kind as _dkind

_SUPPORTED_API_VERSIONS = ("2021.12", "2022.12", "2023.12", "2024.12", "2025.12")
_SCALAR_TYPES = (bool, int, float, complex)


class Tensor(TensorOperators, TensorMethods):
    """An n-dimensional array on a vtl device, with reverse-mode autograd.

    Create tensors with :func:`vtl.asarray` and the other creation functions;
    ``vtl.Tensor(obj, ...)`` is a synonym of ``vtl.asarray(obj, ...)``.
    """

    __slots__ = (
        "_data", "_device", "_grad_fn", "_out_idx", "_requires_grad",
        "_grad", "_vc", "_hooks", "_view", "__weakref__",
    )
    __array_priority__ = 1000
    __array_ufunc__ = None  # make NumPy defer to Tensor's reflected operators

    def __new__(cls, obj: Any = None, /, *, dtype: Any = None, device: Any = None,
                backend: str | None = None, copy: bool | None = None,
                requires_grad: bool = False) -> Tensor:
        from ._ops.creation import asarray

        return asarray(obj, dtype=dtype, device=device, backend=backend, copy=copy,
                       requires_grad=requires_grad)

    # ------------------------------------------------------------------ attributes
    @property
    def dtype(self) -> Any:
        """The element dtype (one of the 13 ``vtl`` dtypes)."""
        return self._data.dtype

    @property
    def device(self) -> Device:
        """The :class:`vtl.Device` holding the data, e.g. ``Device('cupy:0')``."""
        return self._device

    @property
    def shape(self) -> tuple[int, ...]:
        """The size of each axis."""
        return self._data.shape  # every backend's shape is a tuple of ints

    @property
    def ndim(self) -> int:
        """The number of axes."""
        return self._data.ndim

    @property
    def size(self) -> int:
        """The number of elements (an attribute, not PyTorch's ``size()``: see ``shape``)."""
        n = 1
        for s in self._data.shape:
            n *= s
        return n

    @property
    def T(self) -> Tensor:
        """Transpose of a 2-D tensor (the standard allows only ``ndim == 2``)."""
        if self.ndim != 2:
            raise ValueError(
                f"Tensor.T needs a 2-D tensor, got {self.ndim}-D; use mT or permute_dims"
            )
        return _ns().permute_dims(self, (1, 0))

    @property
    def mT(self) -> Tensor:
        """Transpose of the last two axes."""
        return _ns().matrix_transpose(self)

    @property
    def data(self) -> Tensor:
        """A tensor sharing storage with this one, outside the graph (PyTorch's ``.data``)."""
        return self.detach()

    # ------------------------------------------------------------------- autograd
    @property
    def requires_grad(self) -> bool:
        """Whether gradients flow to (leaf) or through (non-leaf) this tensor."""
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        self.requires_grad_(flag)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Set ``requires_grad`` on a leaf tensor in place; returns ``self``."""
        flag = bool(requires_grad)
        if self._grad_fn is not None:
            if flag:
                return self  # a non-leaf already requires grad (as in PyTorch)
            raise RuntimeError(
                "requires_grad can only be changed on leaf tensors; this tensor was "
                f"computed by {self._grad_fn.name()}. Use .detach() for a tensor outside "
                "the graph."
            )
        if flag and _dkind(self._data.dtype) not in "fc":
            raise TypeError(
                "only tensors of floating-point or complex dtype can require gradients, "
                f"got dtype {self._data.dtype}"
            )
        self._requires_grad = flag
        return self

    @property
    def grad(self) -> Tensor | None:
        """The accumulated gradient (leaves, or non-leaves after ``retain_grad()``)."""
        return getattr(self, "_grad", None)

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        if value is None:
            self._grad = None
            return
        if not isinstance(value, Tensor):
            raise TypeError(f"grad must be a vtl.Tensor or None, got {type(value).__name__}")
        if value.shape != self.shape:
            raise ValueError(
                f"grad of shape {value.shape} assigned to a tensor of shape {self.shape}"
            )
        if value._device is not self._device:
            raise ValueError(
                f"grad on device {value._device} assigned to a tensor on {self._device}"
            )
        if value._data.dtype != self._data.dtype:
            raise TypeError(
                f"grad of dtype {value.dtype} assigned to a tensor of dtype {self.dtype}"
            )
        self._grad = value

    @property
    def is_leaf(self) -> bool:
        """True for tensors not produced by a recorded operation."""
        return self._grad_fn is None

    @property
    def grad_fn(self) -> Node | None:
        """The :class:`~vtl.autograd.graph.Node` that produced this tensor, if any."""
        return self._grad_fn

    def detach(self) -> Tensor:
        """A tensor sharing data (and version counter) with this one, without a graph."""
        t = _new(self._data, self._device)
        t._vc = self._version_counter()
        return t

    def detach_(self) -> Tensor:
        """Detach this tensor from the graph in place, making it a leaf."""
        self._grad_fn = None
        self._requires_grad = False
        return self

    def retain_grad(self) -> None:
        """Keep ``.grad`` for this non-leaf tensor after ``backward()``."""
        if not self._requires_grad:
            raise RuntimeError("retain_grad() on a tensor that does not require grad")
        node = self._grad_fn
        if node is None:
            return
        if node.retained is None:
            node.retained = {}
        node.retained[self._out_idx] = weakref.ref(self)

    @property
    def retains_grad(self) -> bool:
        node = self._grad_fn
        return bool(node is not None and node.retained and self._out_idx in node.retained)

    def register_hook(self, hook: Callable[[Tensor], Tensor | None]) -> RemovableHandle:
        """Call ``hook(grad)`` when this tensor's gradient is computed.

        The hook may return a new gradient to use instead. Returns a handle
        whose ``remove()`` unregisters it.
        """
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that does not require grad")
        node = self._grad_fn
        if node is None:
            hooks = getattr(self, "_hooks", None)
            if hooks is None:
                hooks = self._hooks = []
                _graph.note_leaf_hook()
        else:
            if node.hooks is None:
                node.hooks = {}
            hooks = node.hooks.setdefault(self._out_idx, [])
        hooks.append(hook)
        return RemovableHandle(hooks, hook)

    def backward(self, gradient: Tensor | None = None, retain_graph: bool | None = None,
                 create_graph: bool = False, inputs: Any = None) -> None:
        """Accumulate d(self)/d(leaf) into every leaf's ``.grad``.

        ``gradient`` is the vector of the vector-Jacobian product; it may be
        omitted only for single-element tensors. ``inputs`` (a tensor or a sequence of
        them, leaves or not): accumulate into those tensors' ``.grad`` only.
        """
        if inputs is not None:
            from .autograd import backward

            backward([self], None if gradient is None else [gradient], retain_graph,
                     create_graph, inputs)
            return
        if not self._requires_grad:
            raise RuntimeError(
                "backward() on a tensor that does not require grad and has no grad_fn; "
                "create the inputs with requires_grad=True"
            )
        node = self._grad_fn
        if gradient is None and not create_graph and node is not None and not node.multi \
                and not _graph.anomaly[0]:
            d = self._data
            if d.shape == () and _dkind(d.dtype) == "f":  # the usual scalar loss
                _graph.run_plain_scalar(self, bool(retain_graph))
                return
        gradient = _root_gradient(self, gradient)
        if retain_graph is None:
            retain_graph = create_graph
        run_backward([self], [gradient], retain_graph, create_graph)

    def _grad_key(self) -> Any:
        return id(self) if self._grad_fn is None else (self._grad_fn, self._out_idx)

    # ------------------------------------------------------ in-place bookkeeping
    def _version_counter(self) -> list[int]:
        vc = getattr(self, "_vc", None)
        if vc is None:
            vc = self._vc = [0, 0]  # [version, epoch of the last change]
        return vc

    def _bump_version(self) -> None:
        """Count an in-place change of this tensor's storage (see ``vtl.autograd.graph``)."""
        _graph.bump_version(self)

    @property
    def _version(self) -> int:
        """How many in-place modifications this tensor's storage has seen."""
        return self._version_counter()[0]

    @staticmethod
    def _from_node(data: Any, device: Device, node: Node, idx: int) -> Tensor:
        t = _new(data, device)
        t._grad_fn = node
        t._out_idx = idx
        t._requires_grad = True
        return t

    def _copy(self) -> Tensor:
        xp = self._device.xp
        return _new(xp.asarray(self._data, copy=True), self._device)

    # ------------------------------------------------------------- conversions
    def __array_namespace__(self, /, *, api_version: str | None = None) -> Any:
        """The ``vtl`` namespace (``api_version``: ``None`` or one that vtl implements)."""
        if api_version is not None and api_version not in _SUPPORTED_API_VERSIONS:
            raise ValueError(
                f"unsupported array API version {api_version!r}; vtl implements "
                f"{', '.join(_SUPPORTED_API_VERSIONS)}"
            )
        return _ns()

    def __dlpack__(self, /, *, stream: Any = None, max_version: Any = None,
                   dl_device: Any = None, copy: bool | None = None) -> Any:
        """The data as a DLPack capsule (the backend array's ``__dlpack__``)."""
        kwargs: dict[str, Any] = {}
        if stream is not None:
            kwargs["stream"] = stream
        if max_version is not None:
            kwargs["max_version"] = max_version
        if dl_device is not None:
            kwargs["dl_device"] = dl_device
        if copy is not None:
            kwargs["copy"] = copy
        try:
            return self._data.__dlpack__(**kwargs)
        except ValueError as err:
            # CuPy refuses a copy-free export of GPU memory to the CPU with a ValueError; the
            # standard's error for an export that needs a copy is BufferError
            if copy is False and dl_device is not None and \
                    tuple(dl_device) != tuple(self.__dlpack_device__()):
                raise BufferError(
                    f"__dlpack__(copy=False): a tensor on {self._device} cannot be exported to "
                    f"DLPack device {tuple(dl_device)} without a copy ({err})"
                ) from err
            raise

    def __dlpack_device__(self, /) -> tuple[Any, int]:
        """``(device_type, device_id)`` of the data, as DLPack numbers them."""
        return self._data.__dlpack_device__()

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> Any:
        if self._device.backend_name != "numpy":
            raise TypeError(
                f"cannot convert a tensor on {self._device} to a NumPy array implicitly; "
                "call .numpy() (or .to('numpy')) to copy it to the host"
            )
        import numpy as np

        if copy is None:
            return np.asarray(self._data, dtype=dtype)
        return np.array(self._data, dtype=dtype, copy=copy)

    def numpy(self) -> Any:
        """The data as a NumPy array (shared on the numpy backend, copied otherwise)."""
        return self._device.backend.to_host(self._data)

    def item(self) -> bool | int | float | complex:
        """The value of a one-element tensor as a Python scalar."""
        if self.size != 1:
            raise ValueError(
                f"item() needs a tensor with exactly one element, got shape {self.shape}"
            )
        return self.numpy().reshape(()).item()

    def tolist(self) -> Any:
        """The data as (nested) Python lists of scalars."""
        return self.numpy().tolist()

    def to_device(self, device: Any, /, *, stream: Any = None) -> Tensor:
        """Copy to ``device`` (a Device or a string like ``'cupy:0'``); differentiable."""
        if stream is not None:
            raise ValueError("vtl.Tensor.to_device does not support the stream argument")
        from ._ops.transfer import to_device

        return to_device(self, device)

    def to(self, target: Any = None, /, *, dtype: Any = None, device: Any = None,
           copy: bool = False) -> Tensor:
        """Move and/or cast: ``t.to("cupy")``, ``t.to(vtl.float64)``, ``t.to(other)``."""
        from .backends._dtypes import ALL_DTYPES, to_dtype

        if isinstance(target, Tensor):
            device, dtype = target._device, target.dtype
        elif isinstance(target, (str, Device)) and not (
            isinstance(target, str) and target in ALL_DTYPES
        ):
            device = target
        elif target is not None:
            dtype = target
        out = self
        if device is not None:
            out = out.to_device(device)
        if dtype is not None:
            dt = to_dtype(dtype)
            if dt != out.dtype:
                out = _ns().astype(out, dt)
        if copy and out is self:
            out = _ns().asarray(self, copy=True)
        return out

    def cpu(self) -> Tensor:
        """Move to the numpy backend (PyTorch's ``.cpu()``)."""
        return self.to_device("numpy")

    def clone(self) -> Tensor:
        """A differentiable copy with its own storage."""
        return _ns().asarray(self, copy=True)

    def __bool__(self) -> bool:
        """The truth value of a one-element tensor (copied to the host)."""
        return bool(self._scalar_host("bool"))

    def __int__(self) -> int:
        """The value of a one-element tensor as an int (copied to the host)."""
        return int(self._scalar_host("int"))

    def __float__(self) -> float:
        """The value of a one-element tensor as a float (copied to the host)."""
        return float(self._scalar_host("float"))

    def __complex__(self) -> complex:
        """The value of a one-element tensor as a complex (copied to the host)."""
        return complex(self._scalar_host("complex"))

    def __index__(self) -> int:
        """The value of a one-element integer tensor, used as an index."""
        if _dkind(self._data.dtype) not in "iu" or self.size != 1:
            raise TypeError(
                "only single-element integer tensors can be used as an index, "
                f"got dtype {self.dtype} and shape {self.shape}"
            )
        return int(self._scalar_host("int"))

    def _scalar_host(self, what: str) -> Any:
        if self.size != 1:
            if what == "bool":
                raise ValueError(
                    f"the truth value of a tensor with {self.size} elements is ambiguous; "
                    "use vtl.any() or vtl.all(), or index a single element"
                )
            raise ValueError(
                f"{what}() needs a tensor with exactly one element, got shape {self.shape}"
            )
        return self.numpy().reshape(()).item()

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self) -> Iterator[Tensor]:
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")  # at iter(), not at next()
        return (self[i] for i in range(self._data.shape[0]))

    def __deepcopy__(self, memo: dict) -> Tensor:
        if self._grad_fn is not None:
            raise RuntimeError(
                "only leaf tensors (not results of recorded operations) support deepcopy; "
                "deepcopy t.detach() instead"
            )
        data = self._device.xp.asarray(self._data, copy=True)
        if type(self) is Tensor:
            t = _new(data, self._device)
            t._requires_grad = self._requires_grad
        else:  # Parameter and other subclasses take (data, requires_grad)
            t = type(self)(_new(data, self._device), self._requires_grad)
        memo[id(self)] = t
        if self.grad is not None:
            import copy

            t._grad = copy.deepcopy(self.grad, memo)
        return t

    def __reduce_ex__(self, protocol: Any) -> Any:
        if self._grad_fn is not None:
            raise RuntimeError("only leaf tensors can be pickled; pickle t.detach() instead")
        return (_rebuild_tensor, (self.numpy(), str(self._device), self._requires_grad))

    def __repr__(self) -> str:
        import numpy as np

        host = self.numpy()
        body = np.array2string(host, separator=", ", prefix="vtl.Tensor(", threshold=1000)
        extra = f", dtype={self.dtype}, device='{self._device}'"
        if self.size == 0:
            extra = f", shape={self.shape}" + extra
        if self._grad_fn is not None:
            extra += f", grad_fn={self._grad_fn!r}"
        elif self._requires_grad:
            extra += ", requires_grad=True"
        return f"vtl.Tensor({body}{extra})"

    def __str__(self) -> str:
        return self.__repr__()

    def __getitem__(self, key: Any, /) -> Tensor:
        """``self[key]``: indexing, differentiable (see ``vtl._ops.indexing``)."""
        return _ns()._getitem(self, key)

    def __setitem__(self, key: Any, value: Any, /) -> None:
        """``self[key] = value``, written in place (recorded like an in-place operator)."""
        _ns()._setitem(self, key, value)


def _root_gradient(t: Tensor, gradient: Any) -> Tensor:
    if gradient is None:
        d = t._data
        if d.shape == () and _dkind(d.dtype) == "f":
            dev = t._device  # the usual scalar loss
            return _new(dev._backend.ones_like(d), dev)
        if t.size != 1:
            raise RuntimeError(
                f"backward() without a gradient needs a single-element output, got shape "
                f"{t.shape}; pass gradient= (a tensor of that shape)"
            )
        if _dkind(t._data.dtype) == "c":
            raise RuntimeError(
                "backward() without a gradient needs a real output, got dtype "
                f"{t.dtype}; pass gradient= or differentiate a real function of it"
            )
        dev = t._device
        return _new(dev.xp.ones(t._data.shape, dtype=t._data.dtype,
                                device=dev.backend.native_device(dev.index)), dev)
    ns = _ns()
    if not isinstance(gradient, Tensor):
        gradient = ns.asarray(gradient, dtype=t.dtype, device=t._device)
    if gradient.shape != t.shape:
        raise ValueError(
            f"gradient has shape {gradient.shape} but the output has shape {t.shape}"
        )
    if gradient._device is not t._device:
        raise ValueError(f"gradient is on {gradient._device} but the output is on {t._device}")
    if gradient._data.dtype != t._data.dtype:
        if _dkind(gradient._data.dtype) not in "fc":
            raise TypeError(
                f"gradient has dtype {gradient.dtype}; expected a floating-point tensor "
                f"(the output has dtype {t.dtype})"
            )
        gradient = ns.astype(gradient, t._data.dtype)
    return gradient


def _rebuild_tensor(host: Any, device: str, requires_grad: bool) -> Tensor:
    t = _ns().asarray(host, device=device, copy=True)
    if requires_grad:
        t.requires_grad_(True)
    return t


_object_new = object.__new__


def _new(data: Any, device: Device) -> Tensor:
    """Wrap a raw backend array (no copy, no graph)."""
    if data.__class__ is not device.array_type:
        data = device._backend.normalize(data)
    t = _object_new(Tensor)
    t._data = data
    t._device = device
    t._grad_fn = None
    t._requires_grad = False
    t._vc = None
    return t


# what the backward engine wraps gradients and saved outputs with
_graph.register_tensor_type(_new, Tensor._from_node, Tensor)

_namespace: Any = None


def _ns() -> Any:
    global _namespace
    if _namespace is None:
        import vtl

        _namespace = vtl
    return _namespace

