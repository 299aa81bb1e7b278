"""Callbacks for :func:`vtl.train.fit`: checkpointing, early stopping, resuming.

A callback overrides any of ``on_train_begin(state)``, ``on_epoch_begin(state,
epoch)``, ``on_batch_end(state, batch, logs)``, ``on_epoch_end(state, epoch,
logs)`` and ``on_train_end(state)``; ``state`` is the loop's
:class:`~vtl.train.FitState` and ``epoch`` is 1-based.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import vtl

from ..io import _load_checkpoint
from .history import History
from .loop import FitState, _is_rank0

__all__ = ["Callback", "LambdaCallback", "ModelCheckpoint", "EarlyStopping", "Resume"]

_MAX_WORDS = ("acc", "f1", "precision", "recall", "auc")


def _resolve_mode(mode: str, monitor: str, cls: str) -> str:
    if mode == "auto":
        return "max" if any(w in monitor for w in _MAX_WORDS) else "min"
    if mode not in ("min", "max"):
        raise ValueError(f"{cls}: mode must be 'min', 'max' or 'auto', got {mode!r}")
    return mode


def _monitored(logs: dict[str, float], monitor: str, cls: str) -> float:
    if monitor not in logs:
        raise KeyError(f"{cls}: monitor {monitor!r} is not among the logged values "
                       f"{sorted(logs)} (val_* keys need a val_loader)")
    return float(logs[monitor])


class Callback:
    """Base class: every hook does nothing."""

    def on_train_begin(self, state: FitState) -> None:
        pass

    def on_epoch_begin(self, state: FitState, epoch: int) -> None:
        pass

    def on_batch_end(self, state: FitState, batch: int, logs: Mapping[str, float]) -> None:
        pass

    def on_epoch_end(self, state: FitState, epoch: int, logs: dict[str, float]) -> None:
        pass

    def on_train_end(self, state: FitState) -> None:
        pass


class LambdaCallback(Callback):
    """A callback from plain functions, e.g. ``LambdaCallback(on_epoch_end=f)``.

    Args:
        on_train_begin: Called as the callback's ``on_train_begin``.
        on_epoch_begin: Called as the callback's ``on_epoch_begin``.
        on_batch_end: Called as the callback's ``on_batch_end``.
        on_epoch_end: Called as the callback's ``on_epoch_end``.
        on_train_end: Called as the callback's ``on_train_end``.
    """

    def __init__(self, on_train_begin: Callable | None = None,
                 on_epoch_begin: Callable | None = None, on_batch_end: Callable | None = None,
                 on_epoch_end: Callable | None = None,
                 on_train_end: Callable | None = None) -> None:
        for name, fn in (("on_train_begin", on_train_begin), ("on_epoch_begin", on_epoch_begin),
                         ("on_batch_end", on_batch_end), ("on_epoch_end", on_epoch_end),
                         ("on_train_end", on_train_end)):
            if fn is not None:
                setattr(self, name, fn)


def save_fit_checkpoint(path: str, state: FitState, epoch: int,
                        logs: dict[str, float]) -> None:
    """Model, optimizer, scheduler, epoch, the epoch's logs and the history so far.

    In a data-parallel run (``vtl.distributed``) only rank 0 writes."""
    if not _is_rank0():
        return
    parent = os.path.dirname(os.fspath(path))
    if parent:
        os.makedirs(parent, exist_ok=True)
    vtl.save_checkpoint(path, state.model, optimizer=state.optimizer,
                        scheduler=state.scheduler, epoch=epoch, metrics=dict(logs),
                        history=state.history.state_dict())


class ModelCheckpoint(Callback):
    """Save a checkpoint (``vtl.save_checkpoint``) after epochs.

    ``path`` may hold ``{epoch}`` and logged names (``"ckpt/{epoch:03d}.safetensors"``,
    ``"{val_loss:.3f}.safetensors"``). With ``save_best_only`` a checkpoint is
    written only when ``monitor`` improves by more than ``min_delta``
    (``mode`` "min", "max" or "auto": "max" for accuracy-like names);
    ``every`` saves every n-th epoch otherwise. The checkpoint holds the model,
    optimizer and scheduler state, the epoch, its logs and the history, so
    ``fit(..., resume_from=path)`` continues from it.

    Args:
        path: The file (may hold ``{epoch}`` and logged names).
        monitor: The logged value to watch (e.g. ``'val_loss'``).
        mode: ``'min'``, ``'max'`` or ``'auto'`` (``'max'`` for accuracy-like names).
        save_best_only: Save only when ``monitor`` improves.
        every: Save every n-th epoch.
        min_delta: Smallest change that counts as an improvement.
        verbose: Print a line on each save (on rank 0).

    Raises:
        ValueError: If ``every`` is not a positive int.
    """

    def __init__(self, path: str | os.PathLike, monitor: str = "val_loss", mode: str = "auto",
                 save_best_only: bool = False, every: int = 1, min_delta: float = 0.0,
                 verbose: bool = False) -> None:
        if not isinstance(every, int) or every < 1:
            raise ValueError(f"ModelCheckpoint: every must be a positive int, got {every!r}")
        self.path = os.fspath(path)
        self.monitor = monitor
        self.mode = _resolve_mode(mode, monitor, "ModelCheckpoint")
        self.save_best_only = save_best_only
        self.every = every
        self.min_delta = abs(float(min_delta))
        self.verbose = verbose
        self.best: float | None = None
        self.best_path: str | None = None
        self.last_path: str | None = None

    def _improved(self, value: float) -> bool:
        if math.isnan(value):
            return False
        if self.best is None:
            return True
        if self.mode == "min":
            return value < self.best - self.min_delta
        return value > self.best + self.min_delta

    def on_epoch_end(self, state: FitState, epoch: int, logs: dict[str, float]) -> None:
        if self.save_best_only:
            value = _monitored(logs, self.monitor, "ModelCheckpoint")
            if not self._improved(value):
                return
            self.best = value
        elif epoch % self.every:
            return
        path = self.path.format(epoch=epoch, **logs)
        save_fit_checkpoint(path, state, epoch, logs)
        self.last_path = path
        if self.save_best_only:
            self.best_path = path
        if self.verbose and _is_rank0():
            print(f"epoch {epoch}: saved checkpoint {path}")


class EarlyStopping(Callback):
    """Stop when ``monitor`` has not improved by more than ``min_delta`` for
    ``patience`` epochs.

    ``mode`` "min", "max" or "auto" ("max" for accuracy-like names).
    ``restore_best`` loads the best epoch's weights back into the model when
    training ends. After training, ``stopped_epoch`` is the epoch that
    triggered the stop (0 if none) and ``best_epoch``/``best`` the best one.

    Args:
        monitor: The logged value to watch (e.g. ``'val_loss'``).
        patience: Epochs without improvement tolerated.
        min_delta: Smallest change that counts as an improvement.
        mode: ``'min'``, ``'max'`` or ``'auto'`` (``'max'`` for accuracy-like names).
        restore_best: Load the best epoch's weights when training ends.

    Raises:
        ValueError: If ``patience`` is not a non-negative int.
    """

    def __init__(self, monitor: str = "val_loss", patience: int = 5, min_delta: float = 0.0,
                 mode: str = "auto", restore_best: bool = False) -> None:
        if not isinstance(patience, int) or patience < 0:
            raise ValueError(f"EarlyStopping: patience must be a non-negative int, got "
                             f"{patience!r}")
        self.monitor = monitor
        self.patience = patience
        self.min_delta = abs(float(min_delta))
        self.mode = _resolve_mode(mode, monitor, "EarlyStopping")
        self.restore_best = restore_best
        self.best: float | None = None
        self.best_epoch = 0
        self.stopped_epoch = 0
        self.wait = 0
        self._best_state: dict[str, Any] | None = None

    def on_train_begin(self, state: FitState) -> None:
        self.best, self.best_epoch, self.stopped_epoch, self.wait = None, 0, 0, 0
        self._best_state = None

    def _improved(self, value: float) -> bool:
        if math.isnan(value):
            return False
        if self.best is None:
            return True
        if self.mode == "min":
            return value < self.best - self.min_delta
        return value > self.best + self.min_delta

    def on_epoch_end(self, state: FitState, epoch: int, logs: dict[str, float]) -> None:
        value = _monitored(logs, self.monitor, "EarlyStopping")
        if self._improved(value):
            self.best, self.best_epoch, self.wait = value, epoch, 0
            if self.restore_best:
                self._best_state = {k: v.detach().clone()
                                    for k, v in state.model.state_dict().items()}
            return
        self.wait += 1
        if self.wait > self.patience:
            self.stopped_epoch = epoch
            state.stop_training = True

    def on_train_end(self, state: FitState) -> None:
        if self.restore_best and self._best_state is not None:
            state.model.load_state_dict(self._best_state)


def _check_history(extra: dict[str, Any]) -> None:
    """Refuse a malformed saved history before :class:`Resume` restores anything."""
    hist = extra.get("history")
    if isinstance(hist, dict) and "history" in hist:
        History._check_state(hist)


class Resume(Callback):
    """Continue training from a checkpoint written by :class:`ModelCheckpoint`.

    Loads model, optimizer and scheduler state (``vtl.load_checkpoint``), the
    history, and makes :func:`fit` start after the saved epoch. A missing file
    raises ``FileNotFoundError`` unless ``missing_ok=True`` (then training
    starts from scratch, handy for "resume if a checkpoint exists").

    Args:
        path: The checkpoint.
        strict: Require the model's keys to match exactly (and the optimizer and scheduler state to
            be present).
        missing_ok: Start from scratch if the file does not exist.

    Raises:
        FileNotFoundError: When training begins, if the file is missing and not ``missing_ok``.
    """

    def __init__(self, path: str | os.PathLike, strict: bool = True,
                 missing_ok: bool = False) -> None:
        self.path = os.fspath(path)
        self.strict = strict
        self.missing_ok = missing_ok
        self.checkpoint: dict[str, Any] | None = None

    def on_train_begin(self, state: FitState) -> None:
        if not os.path.exists(self.path):
            if self.missing_ok:
                return
            raise FileNotFoundError(f"Resume: no checkpoint at {self.path!r}")
        ckpt = _load_checkpoint(self.path, state.model, state.optimizer, state.scheduler,
                                self.strict, check_extra=_check_history)
        self.checkpoint = ckpt
        epoch = ckpt.get("epoch")
        if epoch is None:
            warnings.warn(f"Resume: checkpoint {self.path!r} records no epoch; training "
                          "starts at epoch 1 with the loaded weights", stacklevel=2)
            epoch = 0
        state.initial_epoch = int(epoch)
        extra = ckpt.get("extra") or {}
        hist = extra.get("history", ckpt.get("history"))
        if isinstance(hist, dict) and "history" in hist:
            state.history.load_state_dict(hist)
