"""Grad mode: whether operations record a graph (per thread, like PyTorch)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class _GradState(threading.local):
    enabled: bool = True


state = _GradState()


def is_grad_enabled() -> bool:
    """Whether operations on tensors that require grad are being recorded.

    Returns:
        ``True`` if grad mode is on.
    """
    return state.enabled


class _GradModeContext:
    """Base for context managers that are also decorators."""

    _mode: bool

    def __new__(cls, *args: Any) -> Any:
        # ``@vtl.no_grad`` without parentheses, like PyTorch
        if cls is not set_grad_enabled and len(args) == 1 and callable(args[0]):
            return object.__new__(cls)(args[0])
        return object.__new__(cls)

    def __enter__(self) -> None:
        self._prev = state.enabled
        state.enabled = self._mode

    def __exit__(self, *exc: object) -> None:
        state.enabled = self._prev

    def __call__(self, fn: F) -> F:
        mode = self._mode

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            prev = state.enabled
            state.enabled = mode
            try:
                return fn(*args, **kwargs)
            finally:
                state.enabled = prev

        return wrapper  # type: ignore[return-value]


class no_grad(_GradModeContext):
    """Context manager / decorator that disables graph recording."""

    _mode = False


class enable_grad(_GradModeContext):
    """Context manager / decorator that enables graph recording."""

    _mode = True


class set_grad_enabled(_GradModeContext):
    """Set grad mode on or off; works as a call, a context manager or a decorator.

    Args:
        mode: ``True`` to turn it on, ``False`` to turn it off.
    """

    def __init__(self, mode: bool) -> None:
        self._mode = bool(mode)
        self._prev = state.enabled
        state.enabled = self._mode

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: object) -> None:
        state.enabled = self._prev

    def __call__(self, fn: F) -> F:
        # used as a decorator: the mode applies to calls of fn, not from now on
        state.enabled = self._prev
        return super().__call__(fn)


class inference_mode(_GradModeContext):
    """PyTorch's ``inference_mode(mode=True)``: no graph recording inside (vtl has no
    separate inference tensors, so it is :class:`no_grad` when ``mode`` is true)."""

    def __new__(cls, *args: Any) -> Any:
        if len(args) == 1 and callable(args[0]):  # @vtl.inference_mode
            obj = object.__new__(cls)
            obj._mode = False
            return obj(args[0])
        return object.__new__(cls)

    def __init__(self, mode: bool = True) -> None:
        self._mode = not bool(mode)
