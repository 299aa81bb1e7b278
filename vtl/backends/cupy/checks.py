"""Index checks on the CuPy backend without a host sync (``CupyBackend.check_indices``).

CuPy wraps out-of-range integer indices instead of raising. vtl checks every index array
that lives on the GPU with one elementwise kernel, which also wraps negative indices (the
one launch the wrap took before): an index outside ``[-n, n)`` (``[0, n)`` where negative
indices are not allowed: ``check(negative=False)``) becomes 0, so no later kernel reads
or writes out of bounds, and the first bad index is recorded in a small
per-thread, per-device error buffer. The buffer is read where the thread waits for the
device anyway (``CupyBackend.to_host``: ``float(loss)``, ``.item()``, ``.numpy()``,
printing; and ``synchronize``), which raises the ``IndexError``. A write through indices
that failed (``x[idx] = v``) writes nothing.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ...capture import active, on_replay
from .._base import index_error

_SOURCE = """
long long v = (long long)idx;
if (idx < 0 && wrap) v += n;
if (v >= 0 && v < n) {
  out = v;
} else {
  out = 0;
  if (atomicCAS((unsigned long long*)&err[0], 0ULL, 1ULL) == 0ULL) {
    err[1] = (long long)idx; err[2] = n; err[3] = axis; err[4] = code;
  }
}
"""

#: by code: the operation name that error messages give (``""``: a plain index) and
#: whether negative indices were allowed (which message the error has)
_NAMES: list[tuple[str, bool]] = [("", True)]
_CODES: dict[tuple[str, bool], int] = {("", True): 0}
_codes_lock = threading.Lock()


def _code(name: str, negative: bool = True) -> int:
    key = (name, negative)
    c = _CODES.get(key)
    if c is None:
        with _codes_lock:
            c = _CODES.setdefault(key, len(_NAMES))
            if c == len(_NAMES):
                _NAMES.append(key)
    return c


class _ThreadState(threading.local):
    def __init__(self) -> None:
        self.buffers: dict[int, Any] = {}  # device id -> int64 error buffer
        self.pending: set[int] = set()  # devices whose buffer a kernel may have written


class ErrorBuffers:
    """Small int64 device buffers, one per thread and device, that kernels record their
    first error in (``[flag, ...]``); read lazily, so an error reaches the thread whose
    call found it at that thread's next host read."""

    def __init__(self, cupy: Any, size: int) -> None:
        self._cp = cupy
        self._size = size
        self._state = _ThreadState()

    def get(self, dev: int) -> Any:
        """This thread's buffer on device ``dev``, marked as possibly written; while a
        capture (``vtl.compile``) records, each replay marks it again (the replaying
        thread's mark: replay on the thread that captured)."""
        st = self._state
        err = st.buffers.get(dev)
        if err is None:
            err = st.buffers[dev] = self._cp.zeros((self._size,), dtype=np.int64)
        st.pending.add(dev)
        if active():
            on_replay(lambda: self._state.pending.add(dev))
        return err

    @property
    def pending(self) -> set[int]:
        """The devices whose buffer (of this thread) may have been written since read."""
        return self._state.pending

    def first_error(self) -> list[int] | None:
        """Read this thread's buffers written since they were last read; the values of the
        first one that records an error (then cleared), else ``None``. Buffers after it
        stay pending."""
        cp = self._cp
        st = self._state
        devs = sorted(st.pending)
        st.pending = set()
        for k, dev in enumerate(devs):
            err = st.buffers[dev]
            with cp.cuda.Device(dev):
                values = [int(v) for v in cp.asnumpy(err)]
                if values[0]:
                    err.fill(0)
            if values[0]:
                st.pending.update(devs[k + 1:])
                return values
        return None


class CupyIndexChecks:
    """The kernel, the error buffers and the deferred ``IndexError``."""

    def __init__(self, cupy: Any) -> None:
        self._cp = cupy
        self._kernel = None
        self._errors = ErrorBuffers(cupy, 5)
        self.launches = 0

    def _get_kernel(self) -> Any:
        if self._kernel is None:
            self._kernel = self._cp.ElementwiseKernel(
                "T idx, int64 n, int64 axis, int64 code, int64 wrap",
                "int64 out, raw int64 err",
                _SOURCE, "vtl_check_indices")
        return self._kernel

    def check(self, idx: Any, n: int, axis: int, what: str, *, negative: bool = True) -> Any:
        """``idx`` wrapped from ``[-n, n)`` to ``[0, n)`` as int64 (one launch); errors are
        recorded for the next host read (module doc). ``negative=False``: the valid range is
        ``[0, n)``, a negative index is an error too."""
        cp = self._cp
        with idx.device:
            if idx.size == 0:
                return idx.astype(np.int64)
            err = self._errors.get(idx.device.id)
            out = cp.empty(idx.shape, dtype=np.int64)
            self._get_kernel()(idx, np.int64(n), np.int64(axis),
                               np.int64(_code(what, negative)), np.int64(negative), out, err)
        self.launches += 1
        return out

    def failed(self, dev: int) -> Any:
        """A 0-d boolean device array: whether an index check of this thread on device
        ``dev`` failed since the buffer was last read; ``None`` when none is pending."""
        if dev not in self._errors.pending:
            return None
        return self._errors.get(dev)[0] != 0

    @property
    def pending(self) -> bool:
        return bool(self._errors.pending)

    def check_pending(self) -> None:
        """Read this thread's error buffers written since the last read; raise the
        ``IndexError`` for the first bad index found (and clear its buffer)."""
        found = self._errors.first_error()
        if found is not None:
            _, value, n, axis, code = found
            name, negative = _NAMES[code] if code < len(_NAMES) else _NAMES[0]
            msg = index_error(name, value, axis, n, negative).args[0]
            raise IndexError(
                f"{msg} (found on the device by an earlier operation and raised at the first "
                "read of a result after it)")
