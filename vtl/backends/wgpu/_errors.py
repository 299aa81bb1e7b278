"""Errors found on the device, reported at the next readback of the thread that caused them.

A kernel that meets an out-of-range index (or class target) never reads or writes out of
bounds; it records the first bad value in the calling thread's *error buffer* (8 words:
flag, the value as two words, the axis size, the axis, the operation's code, 0, 0) and
carries on. The code names the operation and its message (:func:`code`). Reading the
buffer would stall the device, so it is read only where the thread waits anyway: its next
readback (``to_numpy``, ``bool(x)``, ``float(x)``...) or :func:`synchronize` copies the
buffer along with the data in the same submit, and raises the ``IndexError`` there (the
buffer is then cleared).
"""

from __future__ import annotations

import threading

from .._base import INDEX_ERROR, NONNEG_INDEX_ERROR
from . import _runtime

#: bytes of one error buffer
NBYTES = 32
_ZEROS = bytes(NBYTES)

#: the message of an index outside its axis (``name`` is the operation's prefix)
INDEX = INDEX_ERROR
#: the message of an index outside ``[0, size)`` where negative indices are not allowed
NONNEG_INDEX = NONNEG_INDEX_ERROR

#: operation codes -> (the name that error messages give (``""``: a plain index), message)
_NAMES: list[tuple[str, str]] = [("", INDEX)]
_CODES: dict[tuple[str, str], int] = {("", INDEX): 0}


class _ThreadState(threading.local):
    storage = None  # the thread's error buffer (a pooled Storage), made on first use
    pending = False  # whether a kernel may have written it since it was last read


_state = _ThreadState()


def code(name: str, message: str = INDEX) -> int:
    """The code that kernels store for an operation called ``name`` (e.g. ``"take(): "``)
    whose error reads ``message`` (formatted with ``name``, ``value``, ``axis``, ``size``)."""
    key = (name, message)
    c = _CODES.get(key)
    if c is None:
        with _runtime.LOCK:
            c = _CODES.get(key)
            if c is None:
                c = _CODES[key] = len(_NAMES)
                _NAMES.append(key)
    return c


def buffer(write: bool = True):
    """The calling thread's error buffer (a ``Buf``); ``write=True`` (to bind it for writing)
    marks it as possibly written, so the thread's next readback checks it."""
    st = _state.storage
    if st is None:
        from ._memory import POOL

        st = POOL.alloc(NBYTES, upload=True)
        _runtime.get().queue.write_buffer(st.buf.gpu, 0, _ZEROS)
        _state.storage = st
    if write:
        _state.pending = True
    return st.buf


def pending():
    """The calling thread's error buffer if a kernel may have written it since it was last
    read, else ``None``."""
    return _state.storage.buf if _state.pending else None


def check(words: bytes) -> None:
    """Raise the ``IndexError`` that the error buffer's contents ``words`` record (and clear
    the buffer); nothing when no error was recorded. Call after the buffer was read."""
    _state.pending = False
    if not any(words[:4]):
        return
    w = [int.from_bytes(words[4 * i:4 * i + 4], "little") for i in range(NBYTES // 4)]
    value = w[1] | (w[2] << 32)
    if value >= 1 << 63:
        value -= 1 << 64
    size, axis, op = w[3], w[4], w[5]
    _runtime.get().queue.write_buffer(_state.storage.buf.gpu, 0, _ZEROS)
    name, message = _NAMES[op] if op < len(_NAMES) else _NAMES[0]
    raise IndexError(
        message.format(name=name, value=value, axis=axis, size=size) + " (found on the "
        "device by an earlier operation and raised at the first read of a result after it)"
    )
