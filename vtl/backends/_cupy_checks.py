"""Index checks on the CuPy backend without a host sync (``CupyBackend.check_indices``).

CuPy wraps out-of-range integer indices instead of raising. vtl checks every index array
that lives on the GPU with one elementwise kernel, which also wraps negative indices (the
one launch the wrap took before): an index outside ``[-n, n)`` becomes 0, so no later
kernel reads or writes out of bounds, and the first bad index is recorded in a small
per-thread, per-device error buffer. The buffer is read where the thread waits for the
device anyway (``CupyBackend.to_host``: ``float(loss)``, ``.item()``, ``.numpy()``,
printing; and ``synchronize``), which raises the ``IndexError``. A write through indices
that failed (``x[idx] = v``) writes nothing.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

_SOURCE = """
long long v = (long long)idx;
if (idx < 0) v += n;
if (v >= 0 && v < n) {
  out = v;
} else {
  out = 0;
  if (atomicCAS((unsigned long long*)&err[0], 0ULL, 1ULL) == 0ULL) {
    err[1] = (long long)idx; err[2] = n; err[3] = axis; err[4] = code;
  }
}
"""

#: operation names that error messages give, by code (``""``: a plain index)
_NAMES: list[str] = [""]
_CODES: dict[str, int] = {"": 0}
_codes_lock = threading.Lock()


def _code(name: str) -> int:
    c = _CODES.get(name)
    if c is None:
        with _codes_lock:
            c = _CODES.setdefault(name, len(_NAMES))
            if c == len(_NAMES):
                _NAMES.append(name)
    return c


class _ThreadState(threading.local):
    def __init__(self) -> None:
        self.buffers: dict[int, Any] = {}  # device id -> int64 error buffer
        self.pending: set[int] = set()  # devices whose buffer a kernel may have written


class CupyIndexChecks:
    """The kernel, the error buffers and the deferred ``IndexError``."""

    def __init__(self, cupy: Any) -> None:
        self._cp = cupy
        self._kernel = None
        self._state = _ThreadState()
        self.launches = 0

    def _get_kernel(self) -> Any:
        if self._kernel is None:
            self._kernel = self._cp.ElementwiseKernel(
                "T idx, int64 n, int64 axis, int64 code", "int64 out, raw int64 err",
                _SOURCE, "vtl_check_indices")
        return self._kernel

    def _buffer(self, dev: int) -> Any:
        st = self._state
        err = st.buffers.get(dev)
        if err is None:
            err = st.buffers[dev] = self._cp.zeros((5,), dtype=np.int64)
        return err

    def check(self, idx: Any, n: int, axis: int, what: str) -> Any:
        """``idx`` wrapped from ``[-n, n)`` to ``[0, n)`` as int64 (one launch); errors are
        recorded for the next host read (module doc)."""
        cp = self._cp
        dev = idx.device.id
        with idx.device:
            if idx.size == 0:
                return idx.astype(np.int64)
            err = self._buffer(dev)
            out = cp.empty(idx.shape, dtype=np.int64)
            self._get_kernel()(idx, np.int64(n), np.int64(axis), np.int64(_code(what)), out,
                               err)
        self.launches += 1
        self._state.pending.add(dev)
        return out

    def failed(self, dev: int) -> Any:
        """A 0-d boolean device array: whether an index check of this thread on device
        ``dev`` failed since the buffer was last read; ``None`` when none is pending."""
        if dev not in self._state.pending:
            return None
        return self._state.buffers[dev][0] != 0

    @property
    def pending(self) -> bool:
        return bool(self._state.pending)

    def check_pending(self) -> None:
        """Read this thread's error buffers written since the last read; raise the
        ``IndexError`` for the first bad index found (and clear its buffer)."""
        cp = self._cp
        st = self._state
        devs = sorted(st.pending)
        st.pending = set()
        for k, dev in enumerate(devs):
            err = st.buffers[dev]
            with cp.cuda.Device(dev):
                flag, value, n, axis, code = (int(v) for v in cp.asnumpy(err))
                if flag:
                    err.fill(0)
            if flag:
                st.pending.update(devs[k + 1:])
                name = _NAMES[code] if code < len(_NAMES) else ""
                raise IndexError(
                    f"{name}index {value} is out of bounds for axis {axis} with size {n} "
                    "(found on the device by an earlier operation and raised at the first "
                    "read of a result after it)")
