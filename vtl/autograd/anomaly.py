"""Anomaly detection (PyTorch's ``torch.autograd.detect_anomaly``): while it is on,
``backward`` checks every rule's gradients and raises at the first nan or inf, naming the
op and where it was recorded.

::

    with vtl.autograd.detect_anomaly():
        loss = model(x).sum()
        loss.backward()   # RuntimeError: ... backward of DivBackward returned nan ...

It is a debugging mode: every op records the stack that made it, and backward reads each
gradient back to check it (a wait for the device per op on a GPU). With it off (the
default) nothing of this runs.
"""

from __future__ import annotations

import functools
import threading
import traceback
from collections.abc import Callable
from typing import Any

from . import graph

__all__ = ["detect_anomaly", "is_anomaly_enabled", "set_detect_anomaly"]

_real_next_key = graph._next_key
_lock = threading.Lock()


def _traced_next_key() -> int:
    """A node's key, with the stack that records the node kept for the error message."""
    key = _real_next_key()
    graph.anomaly_traces[key] = "".join(traceback.format_stack(limit=14)[:-2])
    return key


def set_detect_anomaly(mode: bool) -> None:
    """Turn anomaly detection on or off for the whole process.

    Args:
        mode: ``True`` to turn it on, ``False`` to turn it off.
    """
    from .._ops import _core

    with _lock:
        on = bool(mode)
        graph.anomaly[0] = on
        key = _traced_next_key if on else _real_next_key
        graph._next_key = _core._next_key = key
        if not on:
            graph.anomaly_traces.clear()


def is_anomaly_enabled() -> bool:
    """Whether anomaly detection is on.

    Returns:
        ``True`` if anomaly detection is on.
    """
    return graph.anomaly[0]


class detect_anomaly:
    """Context manager (or decorator) that turns anomaly detection on inside it.

    Args:
        check_nan: Turn anomaly detection on (``False`` leaves it off inside).
    """

    def __init__(self, check_nan: bool = True) -> None:
        self.check_nan = bool(check_nan)

    def __enter__(self) -> None:
        self._prev = is_anomaly_enabled()
        set_detect_anomaly(self.check_nan)

    def __exit__(self, *exc: object) -> None:
        set_detect_anomaly(self._prev)

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with detect_anomaly(self.check_nan):
                return fn(*args, **kwargs)

        return wrapper
