"""``History``: per-epoch losses and metrics recorded by :func:`vtl.train.fit`."""

from __future__ import annotations

import math
import os
from typing import Any

__all__ = ["History"]


class History:
    """Per-epoch logs: ``history["loss"]``, ``history["val_accuracy"]``, ...

    ``history.history`` maps each key to a list with one float per epoch
    (``nan`` where an epoch did not log that key); ``history.epoch`` lists the
    1-based epoch numbers.

    Args:
        history: Initial logs: a dict of lists of floats.
        epoch: The epoch numbers of those logs.
    """

    def __init__(self, history: dict[str, list[float]] | None = None,
                 epoch: list[int] | None = None) -> None:
        self.history: dict[str, list[float]] = {k: [float(v) for v in vs]
                                                for k, vs in (history or {}).items()}
        self.epoch: list[int] = list(epoch or [])

    def append(self, epoch: int, logs: dict[str, float]) -> None:
        """Record the logs of ``epoch`` (1-based)."""
        n = len(self.epoch)
        for key in logs:
            if key not in self.history:
                self.history[key] = [math.nan] * n
        for key, values in self.history.items():
            values.append(float(logs.get(key, math.nan)))
        self.epoch.append(int(epoch))

    def __getitem__(self, key: str) -> list[float]:
        return self.history[key]

    def __contains__(self, key: object) -> bool:
        return key in self.history

    def __len__(self) -> int:
        return len(self.epoch)

    def keys(self) -> list[str]:
        return list(self.history)

    def last(self) -> dict[str, float]:
        """The logs of the last epoch (empty before the first one)."""
        return {k: v[-1] for k, v in self.history.items()} if self.epoch else {}

    def best(self, key: str, mode: str = "min") -> tuple[int, float]:
        """``(epoch, value)`` of the best ``key`` (``mode`` "min" or "max"; nan skipped)."""
        if key not in self.history:
            raise KeyError(f"History has no {key!r}; recorded keys: {self.keys()}")
        if mode not in ("min", "max"):
            raise ValueError(f"mode must be 'min' or 'max', got {mode!r}")
        pairs = [(e, v) for e, v in zip(self.epoch, self.history[key], strict=True)
                 if not math.isnan(v)]
        if not pairs:
            raise ValueError(f"History: no recorded value for {key!r}")
        pick = min if mode == "min" else max
        return pick(pairs, key=lambda p: p[1])

    def state_dict(self) -> dict[str, Any]:
        return {"history": {k: list(v) for k, v in self.history.items()},
                "epoch": list(self.epoch)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned; ``ValueError`` (changing nothing) if
        it is malformed."""
        self.history, self.epoch = self._check_state(state)

    @staticmethod
    def _check_state(state: Any) -> tuple[dict[str, list[float]], list[int]]:
        """The ``(history, epoch)`` of a :meth:`state_dict`; ``ValueError`` if malformed."""
        if not isinstance(state, dict) or set(state) != {"history", "epoch"}:
            raise ValueError("History.load_state_dict: expected a dict with 'history' and "
                             f"'epoch' entries, got {state!r}")
        hist, epochs = state["history"], state["epoch"]
        if not isinstance(epochs, (list, tuple)) or not all(
                isinstance(e, int) and not isinstance(e, bool) for e in epochs):
            raise ValueError(f"History.load_state_dict: 'epoch' must be a list of ints, got "
                             f"{epochs!r}")
        if not isinstance(hist, dict):
            raise ValueError(f"History.load_state_dict: 'history' must be a dict of name -> "
                             f"list of numbers, got {hist!r}")
        out = {}
        for k, v in hist.items():
            if not isinstance(k, str) or not isinstance(v, (list, tuple)) or len(v) != len(
                    epochs) or not all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                       for x in v):
                raise ValueError(f"History.load_state_dict: history[{k!r}] must be a list of "
                                 f"{len(epochs)} numbers (one per epoch), got {v!r}")
            out[k] = [float(x) for x in v]
        return out, [int(e) for e in epochs]

    def __repr__(self) -> str:
        last = ", ".join(f"{k}={v:.4g}" for k, v in self.last().items())
        return f"History(epochs={len(self)}{', ' + last if last else ''})"

    def plot(self, path: str | os.PathLike, keys: list[str] | None = None,
             title: str | None = None) -> str:
        """Write the learning curves to a PNG at ``path``; returns the path.

        One panel per quantity: ``loss`` with ``val_loss``, then each metric
        with its ``val_`` twin (``keys`` picks the quantities; ``lr`` is left
        out unless named). Needs matplotlib (``pip install 'vtl[plot]'``);
        draws on a private ``Figure`` so no pyplot state or GUI backend is touched.
        """
        try:
            from matplotlib.figure import Figure
        except ImportError as exc:
            raise ImportError("History.plot needs matplotlib: install the 'plot' extra "
                              "(pip install 'vtl[plot]') or pip install matplotlib") from exc
        if not self.epoch:
            raise ValueError("History.plot: nothing recorded yet (no epoch has finished)")
        if keys is None:
            keys = [k for k in self.history if not k.startswith("val_") and k != "lr"]
            keys += [k[4:] for k in self.history
                     if k.startswith("val_") and k[4:] not in self.history and k[4:] not in keys]
        else:
            unknown = [k for k in keys if k not in self.history and f"val_{k}" not in self.history]
            if unknown:
                raise KeyError(f"History.plot: unknown keys {unknown}; recorded: {self.keys()}")
        keys = sorted(keys, key=lambda k: k != "loss")
        fig = Figure(figsize=(5 * len(keys), 4), layout="constrained")
        axes = fig.subplots(1, len(keys), squeeze=False)[0]
        for ax, key in zip(axes, keys, strict=True):
            for name, style in ((key, "-o"), (f"val_{key}", "--s")):
                if name in self.history:
                    ax.plot(self.epoch, self.history[name], style, markersize=3,
                            label="validation" if name.startswith("val_") else "train")
            ax.set_xlabel("epoch")
            ax.set_ylabel(key)
            ax.set_title(key)
            ax.grid(True, alpha=0.3)
            ax.legend()
        if title:
            fig.suptitle(title)
        path = os.fspath(path)
        parent = os.path.dirname(path)
        if parent:
            os.makedirs(parent, exist_ok=True)
        fig.savefig(path, format="png", dpi=100)
        return path
