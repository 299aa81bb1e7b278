"""The fit loop: :func:`fit` and :func:`evaluate`."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import vtl

from .. import metrics as _metrics
from .._tensor import Tensor
from ..optim.clip import clip_grad_norm_
from ..optim.lr_scheduler import ReduceLROnPlateau
from .history import History

__all__ = ["BatchLogs", "FitState", "evaluate", "fit"]


@dataclass
class FitState:
    """What callbacks see: the objects being trained and the loop's position.

    A callback may set ``stop_training = True`` (the loop ends after the
    current epoch) or, in ``on_train_begin``, ``initial_epoch`` (epochs
    already done, e.g. when resuming).

    Args:
        model: The model (a :class:`vtl.nn.Module`).
        optimizer: Its optimizer, or ``None``.
        loss_fn: The loss function.
        epochs: The number of epochs.
        scheduler: Its learning-rate scheduler, or ``None``.
        history: The :class:`History` so far.
        initial_epoch: Epochs already done.
        epoch: The current epoch (1-based).
        stop_training: Set to ``True`` to stop after this epoch.
        logs: The logs of the current epoch.
    """

    model: Any
    optimizer: Any
    loss_fn: Callable
    epochs: int
    scheduler: Any = None
    history: History = field(default_factory=History)
    initial_epoch: int = 0
    epoch: int = 0
    stop_training: bool = False
    logs: dict[str, float] = field(default_factory=dict)


def _metric_fns(metrics: Any) -> list[tuple[str, Callable]]:
    if metrics is None:
        return []
    if isinstance(metrics, str) or callable(metrics):
        metrics = (metrics,)
    if isinstance(metrics, dict):
        return [(str(k), _metrics.get(v)) for k, v in metrics.items()]
    out = []
    for m in metrics:
        name = m if isinstance(m, str) else getattr(m, "__name__", type(m).__name__)
        if name == "loss":
            raise ValueError("'loss' is always logged; it cannot be a metric name")
        out.append((name, _metrics.get(m)))
    return out


def _split(batch: Any) -> tuple[tuple[Any, ...], Any]:
    """``(xb, yb)`` -> ``((xb,), yb)``; ``(x1, x2, yb)`` -> ``((x1, x2), yb)``."""
    if isinstance(batch, (tuple, list)) and len(batch) >= 2:
        return tuple(batch[:-1]), batch[-1]
    raise TypeError("fit/evaluate: each batch must be a tuple (inputs..., target) such as a "
                    f"DataLoader over a TensorDataset yields, got {type(batch).__name__}")


def _batch_size(target: Any) -> int:
    shape = getattr(target, "shape", None)
    if shape:
        return int(shape[0])
    try:
        return len(target)
    except TypeError:
        return 1


def _num_batches(loader: Any) -> int | None:
    try:
        return len(loader)
    except TypeError:
        return None


def _is_rank0() -> bool:
    """True unless this process is a data-parallel rank other than 0 (``vtl.distributed``)."""
    dist = vtl.distributed
    return not dist.is_initialized() or dist.get_rank() == 0


def _bar(loader: Any, desc: str, progress: bool, leave: bool) -> Any:
    if not progress or not _is_rank0():  # data-parallel runs: bars on rank 0 only
        return None
    from tqdm.auto import tqdm

    return tqdm(total=_num_batches(loader), desc=desc, unit="batch", leave=leave,
                dynamic_ncols=True)


#: seconds between updates of the progress bar's running loss and metrics (each update
#: reads them back from the device)
POSTFIX_INTERVAL = 0.5


def _fmt(logs: dict[str, float]) -> dict[str, str]:
    return {k: f"{v:.4g}" for k, v in logs.items() if k != "lr"}


class _Mean:
    """Sample-weighted running means of the loss and metrics.

    A batch value is either a float (the batch's mean, weighted by the batch size here) or
    a Tensor holding the batch's weighted sum on the device (``_batch_values``): those are
    summed on the device and read back only when the means are asked for, so a training
    step never waits for the device to report its loss.
    """

    def __init__(self) -> None:
        self.sums: dict[str, float] = {}
        self.pending: dict[str, Any] = {}
        self.n = 0

    def add(self, values: dict[str, Any], n: int) -> None:
        for k, v in values.items():
            if isinstance(v, Tensor):
                prev = self.pending.get(k)
                self.pending[k] = v if prev is None else prev + v
                self.sums.setdefault(k, 0.0)  # keeps the keys in the order they came
            else:
                self.sums[k] = self.sums.get(k, 0.0) + v * n
        self.n += n

    def means(self) -> dict[str, float]:
        """The means so far (reads the device sums back: one wait for the device)."""
        for k, t in self.pending.items():
            self.sums[k] += float(t)
        self.pending.clear()
        return {k: s / self.n for k, s in self.sums.items()} if self.n else {}

    def synced(self) -> _Mean:
        """Sums and counts added over the data-parallel ranks (``vtl.distributed``), so
        every rank logs, schedules and stops early on the same global means."""
        self.means()  # folds the device sums into ``sums``
        dist = vtl.distributed
        if not dist.is_initialized() or dist.get_world_size() == 1:
            return self
        keys = sorted(self.sums)
        t = vtl.asarray([self.sums[k] for k in keys] + [float(self.n)], dtype=vtl.float64,
                        backend="numpy")
        vals = dist.all_reduce(t).numpy().tolist()
        out = _Mean()
        out.sums, out.n = dict(zip(keys, vals[:-1], strict=True)), int(round(vals[-1]))
        return out


class BatchLogs(Mapping):
    """The loss and metrics of one batch, as ``on_batch_end`` callbacks see them: a mapping
    of names to floats whose values are read from the device only when looked up (reading
    one waits for the device).

    Args:
        values: The batch's values: numbers, or device tensors holding sums.
        n: The number of samples the tensor sums are divided by.
    """

    def __init__(self, values: dict[str, Any], n: int) -> None:
        self._values = values
        self._n = n

    def __getitem__(self, key: str) -> float:
        v = self._values[key]
        return float(v) / self._n if isinstance(v, Tensor) else v

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"BatchLogs({dict(self)!r})"


def _batch_values(output: Any, target: Any, loss: Any, metric_fns: list[tuple[str, Callable]],
                  n: int) -> dict[str, Any]:
    """The batch's loss and metrics for :class:`_Mean`: weighted sums on the device
    (Tensors) where the value is a Tensor or the metric has a device form
    (``vtl.metrics._BATCH_SUMS``), else floats (a user metric returning a Python number)."""
    values: dict[str, Any] = {}
    if loss is not None:
        with vtl.no_grad():
            values["loss"] = loss.detach() * n if isinstance(loss, Tensor) else float(loss)
    if metric_fns:
        out = output.detach() if hasattr(output, "detach") else output
        for name, fn in metric_fns:
            batch_sum = _metrics._BATCH_SUMS.get(fn)
            if batch_sum is not None and isinstance(out, Tensor):
                values[name] = batch_sum(out, target, n)
            else:
                v = fn(out, target)
                values[name] = v * n if isinstance(v, Tensor) else float(v)
    return values


def evaluate(model: Any, loader: Iterable, loss_fn: Callable | None = None,
             metrics: Any = ("accuracy",), *, progress: bool = False,
             desc: str = "eval") -> dict[str, float]:
    """One pass over ``loader`` with ``model.eval()`` under ``vtl.no_grad()``.

    Returns ``{"loss": mean loss (when ``loss_fn`` is given), name: mean metric}``,
    each a sample-weighted mean of per-batch values (exact for accuracy, MSE and
    MAE). The model's previous train/eval mode is restored afterwards.

    Args:
        model: The model (a :class:`vtl.nn.Module`).
        loader: Batches ``(inputs..., target)``.
        loss_fn: ``loss_fn(output, target)``, or ``None`` for no loss.
        metrics: Metric names or callables.
        progress: Show a progress bar.
        desc: The bar's label.

    Returns:
        A dict of the mean loss and metrics.

    Example:
        >>> model = nn.Linear(2, 2)
        >>> data = vtl.data.TensorDataset(vtl.zeros((8, 2)), vtl.zeros(8, dtype=vtl.int64))
        >>> sorted(vtl.train.evaluate(model, vtl.data.DataLoader(data, batch_size=4),
        ...                           nn.CrossEntropyLoss(), ("accuracy",)))
        ['accuracy', 'loss']
    """
    return _evaluate_mean(model, loader, loss_fn, metrics, progress, desc).means()


def _evaluate_mean(model: Any, loader: Iterable, loss_fn: Callable | None, metrics: Any,
                   progress: bool = False, desc: str = "eval") -> _Mean:
    metric_fns = _metric_fns(metrics)
    was_training = getattr(model, "training", False)
    model.eval()
    mean = _Mean()
    bar = _bar(loader, desc, progress, leave=False)
    try:
        with vtl.no_grad():
            for batch in loader:
                inputs, target = _split(batch)
                output = model(*inputs)
                loss = loss_fn(output, target) if loss_fn is not None else None
                n = _batch_size(target)
                mean.add(_batch_values(output, target, loss, metric_fns, n), n)
                if bar is not None:
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()
        model.train(was_training)
    if mean.n == 0:
        raise ValueError("evaluate: the loader yielded no samples")
    return mean


def fit(model: Any, train_loader: Iterable, loss_fn: Callable, optimizer: Any, epochs: int,
        val_loader: Iterable | None = None, metrics: Any = ("accuracy",), scheduler: Any = None,
        callbacks: Sequence[Any] = (), *, progress: bool = True,
        resume_from: str | None = None, scheduler_step: str = "epoch",
        clip_grad_norm: float | None = None, compile: bool = False,  # noqa: A002
        precision: str = "32") -> History:
    """Train ``model`` for ``epochs`` epochs and return its :class:`History`.

    Each batch of ``train_loader`` is a tuple ``(inputs..., target)``; the
    step is ``loss_fn(model(*inputs), target)``, ``optimizer.zero_grad()``,
    ``loss.backward()``, optional ``clip_grad_norm`` (max global L2 norm),
    ``optimizer.step()``. After each epoch, ``val_loader`` is evaluated with
    ``model.eval()`` under ``vtl.no_grad()`` (keys prefixed ``val_``) and the
    scheduler steps (``scheduler_step="batch"`` steps it after every batch
    instead, e.g. for OneCycleLR; ``ReduceLROnPlateau`` gets ``val_loss``, or
    ``loss`` without validation). Logged per epoch: ``loss``, each metric
    (names from :mod:`vtl.metrics` or callables ``f(output, target)``), their
    ``val_`` twins and the ``lr`` used during the epoch.

    ``progress`` shows one tqdm bar per epoch with the running loss and
    metrics (refreshed every :data:`POSTFIX_INTERVAL` seconds). A step never waits for
    the device: the loss and the built-in metrics are summed on the device and read back
    only for the bar, at the end of the epoch, and when a callback looks a value up in
    the :class:`BatchLogs` it gets in ``on_batch_end``.

    ``compile=True`` runs the training step (forward, loss, backward, clipping, optimizer
    step and a per-batch scheduler step) through :func:`vtl.compile`: captured once per
    batch shape on a GPU backend and replayed, with the same numbers as without it.

    ``precision``: ``"32"`` (default) trains in the parameters' dtypes; ``"bf16"`` runs
    the forward pass and the loss (also of validation) under
    ``vtl.autocast(dtype=vtl.bfloat16)``; ``"fp16"`` under ``vtl.autocast(dtype=vtl.float16)``
    with a :class:`vtl.amp.GradScaler` (the loss is scaled for backward, gradients are
    unscaled before clipping, steps with inf/nan gradients are skipped; with
    ``compile=True`` the skip happens on the device, and each replay first reads the last
    step's flag to settle the optimizer's step counts). The autocast device is the model's
    first parameter's backend.

    ``resume_from`` loads a checkpoint written by :class:`~vtl.train.ModelCheckpoint`
    (model, optimizer, scheduler, history) and continues after its epoch; a loader with
    ``set_epoch`` (``vtl.data.DataLoader``) is moved to that epoch, so a resumed run
    shuffles as the uninterrupted one would have. ``callbacks`` receive a
    :class:`FitState`.

    Args:
        model: The model (a :class:`vtl.nn.Module`).
        train_loader: Batches ``(inputs..., target)``.
        loss_fn: ``loss_fn(output, target)`` returning a 0-d loss.
        optimizer: Its optimizer, or ``None``.
        epochs: Number of epochs (in total, when resuming).
        val_loader: Validation batches, evaluated after each epoch.
        metrics: Metric names or callables (see :func:`vtl.metrics.get`).
        scheduler: Its learning-rate scheduler, or ``None``.
        callbacks: Callbacks (see :mod:`vtl.train.callbacks`).
        progress: Show a progress bar.
        resume_from: A checkpoint to continue from.
        scheduler_step: ``'epoch'`` or ``'batch'``.
        clip_grad_norm: Clip the gradients to this global L2 norm.
        compile: Run the training step through :func:`vtl.compile`.
        precision: ``'32'``, ``'bf16'`` or ``'fp16'`` (see above).

    Returns:
        The :class:`History` of the run.

    Raises:
        ValueError: If ``epochs``, ``scheduler_step`` or ``precision`` is invalid, a
            ReduceLROnPlateau is stepped per batch, or ``train_loader`` yields no batches.

    Example:
        >>> x = vtl.random.normal(size=(32, 3))
        >>> ds = vtl.data.TensorDataset(x, vtl.astype(x[:, 0] > 0, vtl.int64))
        >>> model = nn.Linear(3, 2)
        >>> history = vtl.train.fit(model, vtl.data.DataLoader(ds, batch_size=8),
        ...                         nn.CrossEntropyLoss(), optim.SGD(model.parameters(), lr=0.5),
        ...                         epochs=3, progress=False)
        >>> sorted(history.history), len(history.epoch)
        (['accuracy', 'loss', 'lr'], 3)
    """
    from .callbacks import Resume

    if not isinstance(epochs, int) or isinstance(epochs, bool) or epochs < 0:
        raise ValueError(f"fit: epochs must be a non-negative int, got {epochs!r}")
    if scheduler_step not in ("epoch", "batch"):
        raise ValueError(f"fit: scheduler_step must be 'epoch' or 'batch', got "
                         f"{scheduler_step!r}")
    if scheduler_step == "batch" and isinstance(scheduler, ReduceLROnPlateau):
        raise ValueError("fit: ReduceLROnPlateau steps on a metric once per epoch; use "
                         "scheduler_step='epoch'")
    if precision not in ("32", "bf16", "fp16"):
        raise ValueError(f"fit: precision must be '32', 'bf16' or 'fp16', got {precision!r}")
    amp_region, scaler = _mixed_precision(model, precision)
    metric_fns = _metric_fns(metrics)
    cbs = list(callbacks)
    if resume_from is not None:
        cbs.insert(0, Resume(resume_from))
    state = FitState(model=model, optimizer=optimizer, loss_fn=loss_fn, epochs=epochs,
                     scheduler=scheduler)
    for cb in cbs:
        cb.on_train_begin(state)
    params = list(model.parameters()) if clip_grad_norm is not None else None

    def train_step(inputs: tuple[Any, ...], target: Any) -> tuple[Any, Any]:
        with amp_region():
            output = model(*inputs)
            loss = loss_fn(output, target)
        optimizer.zero_grad()
        if scaler is not None:
            scaler.scale(loss).backward()
            if params is not None:
                scaler.unscale_(optimizer)
                clip_grad_norm_(params, clip_grad_norm)
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            if params is not None:
                clip_grad_norm_(params, clip_grad_norm)
            optimizer.step()
        if scheduler is not None and scheduler_step == "batch":
            scheduler.step()
        return output, loss

    step = vtl.compile(train_step) if compile else train_step
    if compile and scaler is not None:
        compiled = step

        def step(inputs: tuple[Any, ...], target: Any) -> tuple[Any, Any]:
            # a captured step needs the optimizer's state, which its first step taken
            # makes: eagerly until then (a GradScaler may skip the first steps)
            return (compiled if optimizer.state else train_step)(inputs, target)

    if state.initial_epoch and hasattr(train_loader, "set_epoch"):
        train_loader.set_epoch(state.initial_epoch)  # shuffle as the interrupted run would have

    for epoch in range(state.initial_epoch + 1, epochs + 1):
        if state.stop_training:
            break
        state.epoch = epoch
        for cb in cbs:
            cb.on_epoch_begin(state, epoch)
        lr = float(optimizer.param_groups[0]["lr"])
        model.train()
        mean = _Mean()
        bar = _bar(train_loader, f"epoch {epoch}/{epochs}", progress, leave=True)
        shown = time.monotonic()
        try:
            for i, batch in enumerate(train_loader):
                inputs, target = _split(batch)
                output, loss = step(inputs, target)
                n = _batch_size(target)
                values = _batch_values(output, target, loss, metric_fns, n)
                mean.add(values, n)
                if bar is not None:
                    bar.update(1)
                    now = time.monotonic()
                    if now - shown >= POSTFIX_INTERVAL:  # the running means: one read-back
                        shown = now
                        bar.set_postfix(_fmt(mean.means()), refresh=False)
                if cbs:
                    blogs = BatchLogs(values, n)
                    for cb in cbs:
                        cb.on_batch_end(state, i, blogs)
            if mean.n == 0:
                raise ValueError("fit: train_loader yielded no batches")
            logs = mean.synced().means()
            if val_loader is not None:
                with amp_region():
                    vlogs = _evaluate_mean(model, val_loader, loss_fn, metrics).synced().means()
                logs.update({f"val_{k}": v for k, v in vlogs.items()})
            logs["lr"] = lr
            if bar is not None:
                bar.set_postfix(_fmt(logs), refresh=True)
        finally:
            if bar is not None:
                bar.close()
        if scheduler is not None and scheduler_step == "epoch":
            if isinstance(scheduler, ReduceLROnPlateau):
                scheduler.step(logs.get("val_loss", logs["loss"]))
            else:
                scheduler.step()
        state.logs = logs
        state.history.append(epoch, logs)
        for cb in cbs:
            cb.on_epoch_end(state, epoch, logs)
    for cb in cbs:
        cb.on_train_end(state)
    return state.history


def _mixed_precision(model: Any, precision: str) -> tuple[Callable[[], Any], Any]:
    """The autocast region (a factory of context managers) and GradScaler of ``precision``."""
    import contextlib

    if precision == "32":
        return contextlib.nullcontext, None
    device_type = None
    for p in model.parameters():
        device_type = p.device.type
        break
    dtype = vtl.bfloat16 if precision == "bf16" else vtl.float16
    with vtl.autocast(device_type, dtype):  # a device without the dtype fails here
        pass

    def region() -> Any:
        return vtl.autocast(device_type, dtype)

    return region, (vtl.amp.GradScaler() if precision == "fp16" else None)
