"""Captured steps: :func:`compile` records the device work of a function once and replays it.

A training step in eager mode spends most of its time in Python issuing small kernels,
one op at a time. ``step = vtl.compile(train_step)`` runs ``train_step`` eagerly on its
first call(s), then *captures* the device work of one call and afterwards *replays* it:
a replayed call costs the device's work plus a small constant, the idea of CUDA graphs
(``torch.cuda.graphs``), tinygrad's ``TinyJit`` and JAX's ``jit``.

* **cupy**: a CUDA graph captured on a side stream, its memory in a pool of its own that
  nothing else allocates from; replays launch it on the current stream.
* **wgpu**: the list of recorded dispatches (pipeline, bind group, grid, parameters), its
  buffers kept out of the pool; replays encode the list into the open compute pass with
  no vtl Python above the recorder.
* **numpy**: nothing to capture on the CPU; the function runs eagerly on every call.

Semantics (each tested in ``tests/test_compile.py``):

* A call's *signature* is the structure of its arguments, the shape, dtype, device and
  ``requires_grad`` of each tensor argument, and the value of every other argument
  (Python numbers included, so a number that changes between calls is a new signature).
  The first ``warmup`` calls of a signature run eagerly, the next one captures and runs,
  and later ones replay, copying the tensor arguments into the captured inputs. At most
  ``max_signatures`` captures are kept (least recently used first out); a function that
  keeps capturing anew warns once.
* Outputs are tensors (or tuples, lists and dicts of them, or ``None``), returned as fresh
  tensors outside any graph; a Python number in the output is refused (it would be the
  captured call's forever).
* The function's effects on tensors it closes over happen on every replay exactly as in
  eager mode: parameters, their ``.grad`` and the optimizer's state are updated in place
  on the device. Gradients of tensor arguments that require grad are copied to the
  arguments' ``.grad`` after each replay.
* Python code inside the function runs only while capturing, except what vtl itself does
  on the host for a step, which it re-runs before each replay: optimizer steps (step
  counts, bias corrections and the learning rate reach the kernels as per-step scalars),
  learning-rate scheduler steps, and the counters of ``vtl.random`` generators (so dropout
  draws new numbers, the same as eager mode draws). Reading a value on the host inside
  the function (``.item()``, ``float()``, ``bool()`` of a tensor, printing) is a
  :class:`CaptureError` while capturing. Call ``optimizer.zero_grad()`` inside the
  function (or not at all), since the replayed backward writes the ``.grad`` arrays that
  the captured call made.
* A ``GradScaler``'s step inside the function skips the fused optimizer step on the
  device where a gradient is inf/nan; the optimizer reads that flag before the next replay
  (waiting for the previous one) and puts back a skipped step's counts.
"""

from __future__ import annotations

import functools
import threading
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from ._tensor import Tensor, _new

__all__ = ["CaptureError", "CompiledFunction", "active", "after_replay", "compile", "current",
           "hold", "on_replay", "settle_before_capture"]


class CaptureError(RuntimeError):
    """The function cannot be captured as it is (it reads a device value on the host, mixes
    devices, or returns what a replay could not reproduce)."""


class _Session:
    """The capture being recorded in this thread: its device, the backend's capture and the
    host work to re-run before each replay."""

    def __init__(self, device: Any, backend_capture: Any) -> None:
        self.device = device
        self.backend = backend_capture
        self.hooks: list[Callable[[], None]] = []
        self.after: list[Callable[[], None]] = []
        self.held: list[Any] = []


class _State(threading.local):
    session: _Session | None = None


_state = _State()


def current(device: Any) -> Any:
    """The backend capture recording ``device``'s work in this thread, or ``None`` when no
    capture is under way (then everything runs eagerly). ``CaptureError`` when a capture
    of another device is under way: a captured function runs on one device.

    Args:
        device: The device.

    Returns:
        The backend capture, or ``None``.

    Raises:
        CaptureError: If a capture of another device is under way.
    """
    s = _state.session
    if s is None:
        return None
    if device is not s.device:
        raise CaptureError(f"vtl.compile: the function captured on {s.device} also uses "
                           f"{device}; a captured function runs on one device")
    return s.backend


def active() -> bool:
    """Whether a capture is recording this thread's work.

    Returns:
        A bool.
    """
    return _state.session is not None


def on_replay(hook: Callable[[], None]) -> None:
    """Run ``hook()`` on the host before each replay of the capture under way (in the order
    of registration): how optimizers, schedulers and random generators redo their host
    bookkeeping and hand fresh per-step scalars to the captured kernels.

    Args:
        hook: A function of no arguments.

    Raises:
        CaptureError: If no capture is under way.
    """
    _session_for("on_replay").hooks.append(hook)


def after_replay(hook: Callable[[], None]) -> None:
    """Run ``hook()`` on the host once the work of the capture under way has been queued
    (after the captured call itself, then after each replay; in the order of
    registration): how an optimizer starts the copy of a flag that the queued work
    computes, to read it later without waiting for work queued after it.

    Args:
        hook: A function of no arguments, called with the queued work not yet finished.

    Raises:
        CaptureError: If no capture is under way.
    """
    _session_for("after_replay").after.append(hook)


def _session_for(what: str) -> _Session:
    """The session under way, for ``vtl.capture.{what}``, which needs one."""
    s = _state.session
    if s is None:
        raise CaptureError(f"vtl.capture.{what}: no capture is under way")
    return s


def hold(obj: Any) -> None:
    """Keep ``obj`` alive for as long as the capture under way, if any: a device array from
    a cache (pointer tables, index arrays) that the captured kernels read. A captured CUDA
    graph holds only the array's address, so a cache that dropped the array would free
    memory the replays still read.

    Args:
        obj: Anything (usually a raw device array).
    """
    s = _state.session
    if s is not None:
        s.held.append(obj)


#: objects whose ``_settle()`` reads what earlier captured runs left on the device for their
#: host bookkeeping; called before a capture starts, since a capture may not read the device
_settle_first: weakref.WeakSet[Any] = weakref.WeakSet()


def settle_before_capture(obj: Any) -> None:
    """Have ``obj._settle()`` called before each capture starts (an optimizer whose captured
    steps left step counts to settle, see ``Optimizer._step_skippable``).

    Args:
        obj: An object with a ``_settle()`` method (held weakly).
    """
    _settle_first.add(obj)


def _flatten(obj: Any, leaves: list[Any]) -> Any:
    """The structure of ``obj`` (tuples, lists, dicts) with its leaves appended to
    ``leaves``; leaves are replaced by ``None`` in the structure."""
    if isinstance(obj, (tuple, list)):
        return (type(obj), tuple(_flatten(o, leaves) for o in obj))
    if isinstance(obj, dict):
        keys = tuple(obj)
        return (dict, keys, tuple(_flatten(obj[k], leaves) for k in keys))
    leaves.append(obj)
    return None


def _unflatten(tree: Any, leaves: Any) -> Any:
    if tree is None:
        return next(leaves)
    if tree[0] is dict:
        return {k: _unflatten(t, leaves) for k, t in zip(tree[1], tree[2], strict=True)}
    items = [_unflatten(t, leaves) for t in tree[1]]
    return tree[0](items)


def _leaf_key(leaf: Any) -> Hashable:
    if isinstance(leaf, Tensor):
        return (Tensor, leaf.shape, leaf._data.dtype, leaf._device, leaf._requires_grad)
    try:
        hash(leaf)
    except TypeError:
        raise TypeError(f"vtl.compile: an argument of type {type(leaf).__name__} is neither a "
                        "tensor nor hashable, so it cannot be part of a call's signature") \
            from None
    return (type(leaf), leaf)


def _copy(t: Tensor) -> Tensor:
    return _new(t._device.xp.asarray(t._data, copy=True), t._device)


def _copy_out(cap: Any, t: Tensor) -> Tensor:
    return _new(cap.copy_out(t._data, t._device.xp), t._device)


class _Entry:
    """One signature's state: eager calls so far, then its capture."""

    __slots__ = ("after", "calls", "capture", "hooks", "held", "inputs", "args_tree",
                 "outputs", "out_tree")

    def __init__(self) -> None:
        self.calls = 0
        self.capture: Any = None


class CompiledFunction:
    """A function whose device work is captured once per signature and then replayed
    (see :mod:`vtl.capture`); made by :func:`compile`.

    Args:
        fn: The function to capture.
        warmup: Calls of each signature that run eagerly before the capture.
        max_signatures: Most signatures kept captured.

    Raises:
        TypeError: If ``fn`` is not callable.
        ValueError: If ``warmup`` or ``max_signatures`` is invalid.
    """

    def __init__(self, fn: Callable[..., Any], *, warmup: int = 1,
                 max_signatures: int = 8) -> None:
        if not callable(fn):
            raise TypeError(f"vtl.compile: expected a callable, got {type(fn).__name__}")
        if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
            raise ValueError(f"vtl.compile: warmup must be a non-negative int, got {warmup!r}")
        if isinstance(max_signatures, bool) or not isinstance(max_signatures, int) \
                or max_signatures < 1:
            raise ValueError("vtl.compile: max_signatures must be a positive int, got "
                             f"{max_signatures!r}")
        functools.update_wrapper(self, fn)
        self._fn = fn
        self._warmup = warmup
        self._max = max_signatures
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        #: how many captures this function has made (a new signature, or one evicted)
        self.captures = 0
        self._warned = False

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        leaves: list[Any] = []
        tree = _flatten((args, kwargs), leaves)
        device = None
        for leaf in leaves:
            if isinstance(leaf, Tensor):
                device = leaf._device
                break
        if device is None:
            from .backends import default_device

            device = default_device()
        key = (tree, tuple(_leaf_key(leaf) for leaf in leaves))
        if not device.backend.can_capture or _state.session is not None:
            return self._fn(*args, **kwargs)  # the CPU, or a compiled call inside a capture
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = _Entry()
                while len(self._entries) > self._max:
                    self._entries.popitem(last=False)
            else:
                self._entries.move_to_end(key)
        if entry.capture is not None:
            return self._replay(entry, leaves)
        if entry.calls < self._warmup:
            entry.calls += 1
            return self._fn(*args, **kwargs)
        return self._capture(entry, tree, leaves, device)

    # ------------------------------------------------------------------ capture
    def _capture(self, entry: _Entry, tree: Any, leaves: list[Any], device: Any) -> Any:
        self.captures += 1
        if self.captures > self._max and not self._warned:
            self._warned = True
            warnings.warn(f"vtl.compile: {getattr(self._fn, '__name__', 'the function')} has "
                          f"been captured {self.captures} times: its calls keep changing "
                          "signature (tensor shapes, dtypes, devices or requires_grad, or the "
                          "values of other arguments such as Python numbers), and every new "
                          "signature is a capture. Pass tensors of fixed shapes and numbers "
                          "as tensors, or raise max_signatures.", RuntimeWarning, stacklevel=3)
        inputs = []
        statics = []
        for leaf in leaves:
            if isinstance(leaf, Tensor):
                s = _copy(leaf)
                if leaf._requires_grad:
                    s._requires_grad = True
                inputs.append((len(statics), s))
                statics.append(s)
            else:
                statics.append(leaf)
        for obj in list(_settle_first):
            obj._settle()
        cap = device.backend.begin_capture(device.index)
        session = _Session(device, cap)
        _state.session = session
        try:
            args, kwargs = _unflatten(tree, iter(statics))
            out = self._fn(*args, **kwargs)
            out_leaves: list[Any] = []
            out_tree = _flatten(out, out_leaves)
            for o in out_leaves:
                if o is not None and not isinstance(o, Tensor):
                    raise CaptureError(
                        f"vtl.compile: the function returned a {type(o).__name__}; a captured "
                        "function returns tensors (or None), since a replay would return the "
                        "captured call's Python value every time")
                if isinstance(o, Tensor) and o._device is not device:
                    raise CaptureError(f"vtl.compile: the function captured on {device} "
                                       f"returned a tensor on {o._device}")
        except BaseException as exc:
            _state.session = None
            cap.abort()
            if isinstance(exc, CaptureError):
                raise
            reason = cap.explain(exc)
            if reason is not None:
                raise CaptureError(reason) from exc
            raise
        _state.session = None
        cap.end()  # the captured call's own work runs (now, or already while recording)
        for hook in session.after:
            hook()
        entry.capture = cap
        entry.hooks = session.hooks
        entry.after = session.after
        entry.held = session.held
        entry.inputs = inputs
        entry.outputs = out_leaves
        entry.out_tree = out_tree
        self._copy_input_grads(entry, leaves)
        return _unflatten(out_tree, iter([None if o is None else _copy_out(cap, o)
                                          for o in out_leaves]))

    # ------------------------------------------------------------------- replay
    def _replay(self, entry: _Entry, leaves: list[Any]) -> Any:
        cap = entry.capture
        for pos, static in entry.inputs:
            cap.copy_in(static._data, leaves[pos]._data)
        for hook in entry.hooks:
            hook()
        cap.replay()
        for hook in entry.after:
            hook()
        if any(s._requires_grad for _, s in entry.inputs):
            self._copy_input_grads(entry, leaves)
        return _unflatten(entry.out_tree, iter([None if o is None else _copy_out(cap, o)
                                                for o in entry.outputs]))

    @staticmethod
    def _copy_input_grads(entry: _Entry, leaves: list[Any]) -> None:
        for pos, static in entry.inputs:
            g = static.grad
            if g is None:
                continue
            arg = leaves[pos]
            arg.grad = _copy(g) if arg.grad is None else _new(arg.grad._data + g._data,
                                                              arg._device)

    def __repr__(self) -> str:
        return f"vtl.compile({getattr(self._fn, '__qualname__', self._fn)!r})"


def compile(fn: Callable[..., Any] | None = None, *, warmup: int = 1,  # noqa: A001
            max_signatures: int = 8) -> Any:
    """Capture the device work of ``fn`` once per call signature and replay it afterwards.

    ``step = vtl.compile(train_step)``, or ``@vtl.compile`` / ``@vtl.compile(warmup=2)`` as
    a decorator. The first ``warmup`` calls of each signature run eagerly, the next one
    captures, later ones replay (see :mod:`vtl.capture` for what a signature is and what a
    replay repeats); at most ``max_signatures`` captures are kept. On the numpy backend
    the function runs eagerly. Returns a :class:`CompiledFunction`.

    Args:
        fn: The function (omit it to get a decorator).
        warmup: Calls of each signature that run eagerly before the capture.
        max_signatures: Most signatures kept captured.

    Returns:
        A :class:`CompiledFunction`, or a decorator making one when ``fn`` is ``None``.

    Raises:
        TypeError: If ``fn`` is not callable.
        ValueError: If ``warmup`` or ``max_signatures`` is invalid.
    """
    if fn is None:
        return functools.partial(compile, warmup=warmup, max_signatures=max_signatures)
    return CompiledFunction(fn, warmup=warmup, max_signatures=max_signatures)
