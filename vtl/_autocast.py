"""Autocast's state and casts (the public API is :class:`vtl.amp.autocast`).

Each thread keeps, per backend name, whether autocast is on and its low dtype. The ops
of PyTorch's autocast lists call :func:`low` or :func:`wide` on their tensor arguments
(or carry the :func:`low_precision` / :func:`float32` decorators): a no-op costing one
list lookup while no thread has autocast on.

* :func:`low`: floating tensors of float16, bfloat16 or float32 are cast to the low
  dtype (float64 ones are left alone, as in PyTorch). Casts of leaf tensors that
  require grad (parameters) are cached until the outermost autocast region of the
  thread ends, so a weight used by several ops is cast once per forward.
* :func:`wide`: float16/bfloat16 tensors are cast to float32.

As in PyTorch, the ops that an autocast op calls internally are not autocast again.
The casts are ``vtl.astype``, which is differentiable: gradients flow back to the
original tensors in their own dtypes (a float32 parameter gets a float32 gradient).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from ._tensor import Tensor
from .backends._dtypes import LOW_FLOATING, float32, float64
from .backends._dtypes import kind as _dkind

#: number of autocast regions that are on, over all threads (the fast "off" test)
ACTIVE = [0]

_tls = threading.local()


def _states() -> dict[str, tuple[bool, Any]]:
    s = getattr(_tls, "states", None)
    if s is None:
        s = _tls.states = {}
        _tls.cache = {}
        _tls.depth = 0
        _tls.inside = False
    return s


def enter(device_type: str, enabled: bool, dtype: Any) -> tuple[bool, Any] | None:
    """Set the thread's state for ``device_type``; returns the previous one."""
    states = _states()
    prev = states.get(device_type)
    states[device_type] = (enabled, dtype)
    _tls.depth += 1
    if enabled:
        ACTIVE[0] += 1
    return prev


def leave(device_type: str, enabled: bool, prev: tuple[bool, Any] | None) -> None:
    """Restore the state :func:`enter` returned; the outermost exit empties the cache."""
    states = _states()
    if prev is None:
        states.pop(device_type, None)
    else:
        states[device_type] = prev
    _tls.depth -= 1
    if enabled:
        ACTIVE[0] -= 1
    if _tls.depth == 0:
        _tls.cache.clear()


def state(device_type: str) -> tuple[bool, Any]:
    """``(enabled, dtype)`` of the thread's autocast for ``device_type``."""
    return _states().get(device_type, (False, None))


def _policy(dev: Any) -> Any:
    """The low dtype when autocast is on for ``dev``'s backend in this thread, else None."""
    states = getattr(_tls, "states", None)
    if not states or _tls.inside:
        return None
    st = states.get(dev.type)
    if st is None or not st[0]:
        return None
    return st[1]


def _astype(t: Tensor, dt: Any) -> Tensor:
    from ._ops.dtype_functions import astype

    return astype(t, dt)


def _cast_low(t: Tensor, dt: Any) -> Tensor:
    src = t._data.dtype
    if src == dt or src == float64 or _dkind(src) != "f":
        return t
    if t._requires_grad and t._grad_fn is None:  # a leaf parameter: cached
        from .autograd import grad_mode

        key = (id(t), dt, grad_mode.is_grad_enabled())
        hit = _tls.cache.get(key)
        if hit is not None and hit[0] is t and hit[1] == t._version:
            return hit[2]
        out = _astype(t, dt)
        _tls.cache[key] = (t, t._version, out)
        return out
    return _astype(t, dt)


def _map(obj: Any, fn: Callable[[Tensor], Tensor]) -> Any:
    if isinstance(obj, Tensor):
        return fn(obj)
    if isinstance(obj, (tuple, list)) and any(isinstance(o, Tensor) for o in obj):
        return type(obj)(_map(o, fn) for o in obj)
    return obj


def _first_device(args: Any) -> Any:
    for a in args:
        if isinstance(a, Tensor):
            return a._device
        if isinstance(a, (tuple, list)):
            for o in a:
                if isinstance(o, Tensor):
                    return o._device
    return None


def low(*tensors: Any) -> Any:
    """The arguments cast for an op of the low-precision list (a tuple, ``None`` and
    non-tensors passed through); unchanged when autocast is off for their device."""
    dev = _first_device(tensors)
    dt = None if dev is None else _policy(dev)
    if dt is None:
        return tensors
    return tuple(_map(a, lambda t: _cast_low(t, dt)) for a in tensors)


def _cast_wide(t: Tensor) -> Tensor:
    return _astype(t, float32) if t._data.dtype in LOW_FLOATING else t


def wide(*tensors: Any) -> Any:
    """The arguments cast for an op of the float32 list: float16/bfloat16 tensors become
    float32 when autocast is on for their device."""
    dev = _first_device(tensors)
    if dev is None or _policy(dev) is None:
        return tensors
    return tuple(_map(a, _cast_wide) for a in tensors)


def _decorator(cast: Callable[..., Any]) -> Callable[[Callable], Callable]:
    def deco(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def op(*args: Any, **kwargs: Any) -> Any:
            if not ACTIVE[0] or getattr(_tls, "inside", True):
                return fn(*args, **kwargs)
            if kwargs:
                n = len(args)
                out = cast(*args, *kwargs.values())
                kwargs = dict(zip(kwargs, out[n:], strict=True))
                args = out[:n]
            else:
                args = cast(*args)
            # as in PyTorch, the ops an autocast op calls are not autocast themselves
            _tls.inside = True
            try:
                return fn(*args, **kwargs)
            finally:
                _tls.inside = False

        return op

    return deco


def _wide_one(x: Any) -> Any:
    """``x`` cast for the float32 list (a no-op unless autocast is on for its device)."""
    if x.__class__ is Tensor and x._data.dtype in LOW_FLOATING and _policy(x._device) \
            is not None:
        return _astype(x, float32)
    return x


def float32_unary(fn: Callable) -> Callable:
    """:func:`float32_op` for ``fn(x, /, **kw)`` (unary elementwise functions and reductions),
    with less overhead while autocast is off."""
    @functools.wraps(fn)
    def op(x: Any, /, **kw: Any) -> Any:
        if not ACTIVE[0] or getattr(_tls, "inside", True):
            return fn(x, **kw)
        x = _wide_one(x)
        _tls.inside = True
        try:
            return fn(x, **kw)
        finally:
            _tls.inside = False

    return op


def float32_binary(fn: Callable) -> Callable:
    """:func:`float32_op` for ``fn(x1, x2, /)`` (``pow``)."""
    @functools.wraps(fn)
    def op(x1: Any, x2: Any, /) -> Any:
        if not ACTIVE[0] or getattr(_tls, "inside", True):
            return fn(x1, x2)
        x1, x2 = _wide_one(x1), _wide_one(x2)
        _tls.inside = True
        try:
            return fn(x1, x2)
        finally:
            _tls.inside = False

    return op


def float32_stats(fn: Callable, native: Callable[..., bool] | None = None) -> Callable:
    """Decorator of batch_norm/instance_norm: statistics in float32, the result in the
    input's dtype (PyTorch runs these on a low-precision input with float32 parameters
    and returns the input's dtype). ``native(x, args, kwargs)`` says when ``fn`` itself
    takes the low-precision input with float32 parameters (a backend kernel that computes
    in float32): the input is then not widened, which saves a cast each way."""
    inner = _decorator(wide)(fn)

    @functools.wraps(fn)
    def op(*args: Any, **kwargs: Any) -> Any:
        if not ACTIVE[0] or getattr(_tls, "inside", True):
            return fn(*args, **kwargs)
        x = args[0] if args else kwargs.get("input")
        low_input = isinstance(x, Tensor) and x._data.dtype in LOW_FLOATING \
            and _policy(x._device) is not None
        if low_input and native is not None and native(x, args, kwargs):
            _tls.inside = True
            try:
                return fn(*args, **kwargs)
            finally:
                _tls.inside = False
        out = inner(*args, **kwargs)
        if low_input and isinstance(out, Tensor) and out.dtype != x.dtype:
            out = _astype(out, x._data.dtype)
        return out

    return op


def apply(module_globals: dict[str, Any], low_ops: tuple[str, ...] = (),
          float32_ops: tuple[str, ...] = (), stats_ops: tuple[str, ...] = (),
          native_low: dict[str, Callable[..., bool]] | None = None) -> None:
    """Wrap a module's ops in place (called at the end of the functional modules);
    ``native_low`` gives :func:`float32_stats`'s ``native`` of a stats op."""
    for name in low_ops:
        module_globals[name] = low_precision(module_globals[name])
    for name in float32_ops:
        module_globals[name] = float32_op(module_globals[name])
    for name in stats_ops:
        module_globals[name] = float32_stats(module_globals[name],
                                             (native_low or {}).get(name))


#: decorator of the ops that autocast runs in the low dtype
low_precision = _decorator(low)
#: decorator of the ops that autocast runs in float32
float32_op = _decorator(wide)
