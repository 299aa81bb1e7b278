"""DataLoader under faults: a __getitem__ that raises or never returns, Ctrl-C, abandoned
iterators. Prefetching runs on the numpy backend (batches bound for wgpu are made in the
consumer's thread, so there is no thread to test there)."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from vtl.data import DataLoader, Dataset

REPO = Path(__file__).resolve().parents[1]


class Rows(Dataset):
    """Sample i is (float row, int label); ``fail_at`` raises ``error`` there, indices at
    or after ``block_from`` wait on ``gate``."""

    def __init__(self, n: int, fail_at: int | None = None, error: type = KeyError,
                 block_from: int | None = None, gate: threading.Event | None = None) -> None:
        self.n, self.fail_at, self.error = n, fail_at, error
        self.block_from, self.gate = block_from, gate
        self.entered = threading.Event()

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        if i == self.fail_at:
            raise self.error(f"sample {i} is broken")
        if self.block_from is not None and i >= self.block_from:
            self.entered.set()
            self.gate.wait()
        return np.full((2,), i, dtype=np.float32), i


def _prefetch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "vtl-data-prefetch"]


def _wait_threads_gone(before: set[threading.Thread], timeout: float = 5.0) -> list:
    end = time.monotonic() + timeout
    while True:
        gc.collect()
        left = [t for t in _prefetch_threads() if t not in before]
        if not left or time.monotonic() > end:
            return left
        time.sleep(0.02)


# -- errors in __getitem__ / collate name the index -------------------------------------------
@pytest.mark.parametrize("prefetch", [0, 2])
@pytest.mark.parametrize("error", [KeyError, ValueError, IndexError])
def test_getitem_error_keeps_its_type_and_names_the_index(prefetch, error):
    loader = DataLoader(Rows(10, fail_at=5, error=error), batch_size=2, prefetch=prefetch,
                        backend="numpy")
    with pytest.raises(error, match="sample 5 is broken") as info:
        list(loader)
    notes = getattr(info.value, "__notes__", [])
    assert any("dataset[5]" in n and "Rows.__getitem__" in n for n in notes), notes
    assert any("prefetch thread" in n for n in notes) == (prefetch > 0), notes


@pytest.mark.parametrize("prefetch", [0, 2])
def test_collate_error_names_the_batch_indices(prefetch):
    def collate(samples):
        if samples[0][1] == 4:
            raise TypeError("cannot collate this batch")
        return samples

    loader = DataLoader(Rows(10), batch_size=2, prefetch=prefetch, collate_fn=collate,
                        backend="numpy")
    with pytest.raises(TypeError, match="cannot collate") as info:
        list(loader)
    notes = getattr(info.value, "__notes__", [])
    assert any("indices [4, 5]" in n for n in notes), notes


def test_error_is_raised_once_then_the_iterator_is_exhausted():
    before = set(_prefetch_threads())
    it = iter(DataLoader(Rows(6, fail_at=3), batch_size=2, prefetch=2, backend="numpy"))
    next(it)  # the first batch is fine
    with pytest.raises(KeyError):
        next(it)
    with pytest.raises(StopIteration):
        next(it)
    assert not _wait_threads_gone(before)


# -- a __getitem__ that never returns ---------------------------------------------------------
def test_close_returns_and_warns_while_getitem_is_stuck():
    gate = threading.Event()
    before = set(_prefetch_threads())
    ds = Rows(8, block_from=2, gate=gate)
    it = iter(DataLoader(ds, batch_size=2, prefetch=2, backend="numpy"))
    try:
        next(it)
        assert ds.entered.wait(5)
        threads = [t for t in _prefetch_threads() if t not in before]
        assert threads and all(t.daemon for t in threads)
        t0 = time.monotonic()
        with pytest.warns(RuntimeWarning, match="still inside the dataset"):
            it.close(timeout=0.2)
        assert time.monotonic() - t0 < 2.0
        with pytest.raises(StopIteration):
            next(it)
    finally:
        gate.set()
    assert not _wait_threads_gone(before)  # ends once __getitem__ returns


def test_dropping_an_iterator_never_waits_for_its_thread():
    gate = threading.Event()
    before = set(_prefetch_threads())
    ds = Rows(8, block_from=2, gate=gate)
    holder = {"it": iter(DataLoader(ds, batch_size=2, prefetch=2, backend="numpy"))}
    next(holder["it"])
    assert ds.entered.wait(5)

    def drop():
        del holder["it"]
        gc.collect()

    dropper = threading.Thread(target=drop, daemon=True)
    try:
        dropper.start()
        dropper.join(5)
        assert not dropper.is_alive(), "dropping the iterator waited for a stuck __getitem__"
    finally:
        gate.set()
    dropper.join(5)
    assert not _wait_threads_gone(before)


def test_abandoned_iterator_mid_epoch_frees_its_thread():
    before = set(_prefetch_threads())
    loader = DataLoader(Rows(40), batch_size=2, prefetch=2, backend="numpy")
    for _ in range(3):
        it = iter(loader)
        next(it)
        next(it)
        del it
    assert not _wait_threads_gone(before)


# -- Ctrl-C while the prefetch thread is stuck ------------------------------------------------
_SCRIPT = """
import signal, sys, threading
from vtl.data import DataLoader, Dataset

# Ctrl-C as in a terminal, also when the test run itself was started with SIGINT ignored
# (a background job of a non-interactive shell), which this process would inherit
signal.signal(signal.SIGINT, signal.default_int_handler)

class Stuck(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i >= 2:
            print("stuck", flush=True)
            threading.Event().wait()
        return float(i)

loader = DataLoader(Stuck(), batch_size=2, prefetch=2, backend="numpy")
MODE = sys.argv[1]
if MODE == "uncaught":
    for batch in loader:
        pass
elif MODE == "caught":
    def main():
        try:
            for batch in loader:
                pass
        except KeyboardInterrupt:
            print("interrupted", flush=True)
    main()
    print("after", flush=True)
else:  # an iterator left in a global, collected at exit
    try:
        it = iter(loader)
        while True:
            next(it)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
"""


def _wait_line(proc: subprocess.Popen, want: str, timeout: float) -> None:
    got = threading.Event()

    def read():
        for line in proc.stdout:
            if line.strip() == want:
                got.set()
                return

    threading.Thread(target=read, daemon=True).start()
    if not got.wait(timeout):
        raise AssertionError(f"the script did not print {want!r} within {timeout} s")


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child process is POSIX")
@pytest.mark.parametrize("mode", ["uncaught", "caught", "global"])
def test_ctrl_c_with_a_stuck_getitem_exits_promptly(tmp_path, mode):
    script = tmp_path / "stuck_loader.py"
    script.write_text(textwrap.dedent(_SCRIPT))
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, PYTHONPATH=path, VTL_BACKEND="numpy")
    proc = subprocess.Popen([sys.executable, str(script), mode], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    try:
        _wait_line(proc, "stuck", 120)
        time.sleep(0.2)  # the consumer is now waiting for the next batch
        proc.send_signal(signal.SIGINT)
        t0 = time.monotonic()
        try:
            _, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the process ({mode}) did not exit within 20 s of SIGINT")
        assert time.monotonic() - t0 < 20
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    if mode == "uncaught":
        assert proc.returncode != 0 and "KeyboardInterrupt" in err
    else:
        assert proc.returncode == 0, err
