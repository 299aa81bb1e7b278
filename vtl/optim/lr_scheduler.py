"""Learning-rate schedulers (PyTorch's ``torch.optim.lr_scheduler``).

A scheduler changes ``group["lr"]`` of its optimizer's parameter groups each
time :meth:`LRScheduler.step` is called (once per epoch or per batch, after
``optimizer.step()``). Formulas, defaults and the chainable update forms follow
PyTorch, so schedulers compose and resume from ``state_dict`` the same way.
"""

from __future__ import annotations

import functools
import math
import numbers
import threading
import types
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from .. import capture as _capture
from .optimizer import Optimizer

__all__ = [
    "LRScheduler", "LambdaLR", "StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR",
    "LinearLR", "OneCycleLR", "SequentialLR", "ReduceLROnPlateau",
    "MultiplicativeLR", "ConstantLR", "PolynomialLR", "CosineAnnealingWarmRestarts", "CyclicLR",
    "ChainedScheduler",
]

_nesting = threading.local()


def _replayed(step: Callable[..., None]) -> Callable[..., None]:
    """A scheduler's ``step`` that a capture (``vtl.compile``) re-runs before each replay:
    a step taken inside a captured function happens at every replayed call, as in eager
    mode (only the outermost step registers, not those a SequentialLR takes inside)."""
    @functools.wraps(step)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> None:
        depth = getattr(_nesting, "depth", 0)
        if depth == 0 and _capture.active():
            _capture.on_replay(functools.partial(wrapper, self, *args, **kwargs))
        _nesting.depth = depth + 1
        try:
            step(self, *args, **kwargs)
        finally:
            _nesting.depth = depth

    return wrapper


# -- state checks: every scheduler refuses a state whose fields have the wrong type or range --
_Check = Callable[[Any, Any], Any]  # (scheduler, saved value) -> the value to restore


def _integer(low: int | None = None) -> _Check:
    def check(_sched: Any, v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise ValueError(f"expected an int, got {v!r}")
        if low is not None and v < low:
            raise ValueError(f"expected an int >= {low}, got {v!r}")
        return int(v)
    return check


def _number(low: float | None = None, high: float | None = None, *, low_open: bool = False,
            high_open: bool = False) -> _Check:
    lo = "(" if low_open else "["
    hi = ")" if high_open else "]"
    span = f"{lo}{'-inf' if low is None else low}, {'inf' if high is None else high}{hi}"

    def check(_sched: Any, v: Any) -> Any:
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or math.isnan(v):
            raise ValueError(f"expected a real number, got {v!r}")
        if (low is not None and (v <= low if low_open else v < low)) or \
                (high is not None and (v >= high if high_open else v > high)):
            raise ValueError(f"expected a number in {span}, got {v!r}")
        return v
    return check


def _flag(_sched: Any, v: Any) -> bool:
    if not isinstance(v, bool):
        raise ValueError(f"expected True or False, got {v!r}")
    return v


def _choice(*options: str) -> _Check:
    def check(_sched: Any, v: Any) -> str:
        if not isinstance(v, str) or v not in options:
            raise ValueError(f"expected one of {list(options)}, got {v!r}")
        return v
    return check


def _numbers(check: _Check, v: Any, n: int | None) -> list[Any]:
    if not isinstance(v, (list, tuple)):
        raise ValueError(f"expected a list of numbers, got {v!r}")
    if n is not None and len(v) != n:
        raise ValueError(f"expected {n} values, got {len(v)}")
    return [check(None, x) for x in v]


def _lrs(sched: Any, v: Any) -> list[Any]:
    """One real number per parameter group."""
    return _numbers(_number(), v, len(sched.optimizer.param_groups))


def _check_fields(sched: Any, state: Any) -> dict[str, Any]:
    """The checked copy of ``state``: the fields of ``sched.state_dict()``, no more, no less,
    each passing ``sched._fields[name]`` (fields a subclass adds are taken as they are)."""
    if not isinstance(state, dict):
        raise ValueError(f"expected a dict from state_dict(), got {type(state).__name__}")
    own = sched.state_dict()
    missing = [k for k in own if k not in state]
    unknown = [k for k in state if k not in own]
    if missing or unknown:
        parts = ([f"lacks field(s) {missing}"] if missing else []) + \
            ([f"has unknown field(s) {unknown}"] if unknown else [])
        raise ValueError(f"the state {' and '.join(parts)}")
    out = {}
    for key, value in state.items():
        check = sched._fields.get(key)
        try:
            out[key] = value if check is None else check(sched, value)
        except ValueError as exc:
            raise ValueError(f"field {key!r}: {exc}") from None
    return out


def _check_optimizer(optimizer: Any, cls: str) -> None:
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{cls}: expected a vtl.optim.Optimizer, got {type(optimizer).__name__}")


class _CheckedState:
    """``load_state_dict`` that checks the whole state (``_fields``) before applying any."""

    _fields: dict[str, _Check] = {}

    def state_dict(self) -> dict[str, Any]:
        """Everything but the optimizer (and, for LambdaLR, the functions)."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore a state from :meth:`state_dict`.

        ``ValueError``, leaving the scheduler unchanged, when a field is missing,
        unknown, or of the wrong type or range.
        """
        self._apply_state(self._check_state(state_dict))

    def _check_state(self, state_dict: Any) -> dict[str, Any]:
        """The validated state :meth:`_apply_state` takes (changes nothing)."""
        try:
            return _check_fields(self, state_dict)
        except ValueError as exc:
            raise ValueError(f"{type(self).__name__}.load_state_dict: {exc}") from None

    def _apply_state(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)


class LRScheduler(_CheckedState):
    """Base class: keeps ``base_lrs``, ``last_epoch`` and writes ``group['lr']``."""

    _get_closed_form_lr: Callable[[], list[float]] | None = None
    #: state field -> check (see ``_check_fields``); subclasses extend it
    _fields: dict[str, _Check] = {"base_lrs": _lrs, "last_epoch": _integer(),
                                  "_step_count": _integer(0), "_last_lr": _lrs}

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        _check_optimizer(optimizer, type(self).__name__)
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when "
                        "resuming a scheduler (last_epoch != -1)"
                    )
        self.base_lrs: list[float] = [g["initial_lr"] for g in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._initial_step()

    #: True during the step a scheduler takes at construction (PyTorch's ``_is_initial``)
    _is_initial = False

    def _initial_step(self) -> None:
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            del self._is_initial  # back to the class's False, and out of state_dict()

    def get_lr(self) -> list[float]:
        """The learning rates of the current ``last_epoch`` (chainable form)."""
        raise NotImplementedError

    def get_last_lr(self) -> list[float]:
        """The learning rates set by the last :meth:`step`."""
        return self._last_lr

    @_replayed
    def step(self, epoch: int | None = None) -> None:
        """Advance one step (or jump to ``epoch``, using the closed form when there is one)."""
        self._step_count += 1
        self._update_lr(epoch)

    def _update_lr(self, epoch: int | None = None) -> None:
        """The lr update of :meth:`step` without counting a step (SequentialLR uses it
        to restart a scheduler at a milestone, as PyTorch does)."""
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = int(epoch)
            closed = getattr(self, "_get_closed_form_lr", None)
            values = closed() if closed is not None else self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values, strict=True):
            group["lr"] = lr
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def _lrs(self) -> list[float]:
        return [g["lr"] for g in self.optimizer.param_groups]



def _lambda_states(sched: Any, v: Any) -> list[dict[str, Any] | None]:
    """Per function: ``None`` (a plain function) or the attributes of a callable object."""
    n = len(sched.lr_lambdas)
    if not isinstance(v, (list, tuple)) or len(v) != n:
        raise ValueError(f"expected a list of {n} dicts or None, got {v!r}")
    for x in v:
        if x is not None and not (isinstance(x, dict) and all(isinstance(k, str) for k in x)):
            raise ValueError(f"expected a dict of attributes or None, got {x!r}")
    for fn, x in zip(sched.lr_lambdas, v, strict=True):
        if x is not None and not hasattr(fn, "__dict__"):
            raise ValueError(f"saved attributes {sorted(x)} for {fn!r}, which has none")
    return [None if x is None else dict(x) for x in v]


class _LambdaState:
    """State of the schedulers driven by functions (LambdaLR, MultiplicativeLR):
    plain functions and lambdas are not saved, callable objects save their ``__dict__``."""

    lr_lambdas: list[Callable[[int], float]]
    optimizer: Optimizer

    def _set_lambdas(self, lr_lambda: Any, optimizer: Optimizer) -> None:
        cls = type(self).__name__
        _check_optimizer(optimizer, cls)
        n = len(optimizer.param_groups)
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != n:
                raise ValueError(f"{cls}: expected {n} lr_lambdas, got {len(lr_lambda)}")
            fns = list(lr_lambda)
        else:
            fns = [lr_lambda] * n
        for fn in fns:
            if not callable(fn):
                raise TypeError(f"{cls}: lr_lambda should be a function, got "
                                f"{type(fn).__name__}")
        self.lr_lambdas = fns

    def state_dict(self) -> dict[str, Any]:
        """Functions and lambdas are not saved; callable objects save their ``__dict__``."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [
            None if isinstance(fn, types.FunctionType) else dict(fn.__dict__)
            for fn in self.lr_lambdas
        ]
        return state

    def _apply_state(self, state: dict[str, Any]) -> None:
        state = dict(state)
        lambdas = state.pop("lr_lambdas")
        self.__dict__.update(state)
        for fn, saved in zip(self.lr_lambdas, lambdas, strict=True):
            if saved is not None:
                fn.__dict__.update(saved)


class LambdaLR(_LambdaState, LRScheduler):
    """``lr = initial_lr * lr_lambda(epoch)``; one function or one per group."""

    _fields = {**LRScheduler._fields, "lr_lambdas": _lambda_states}

    def __init__(self, optimizer: Optimizer,
                 lr_lambda: Callable[[int], float] | Sequence[Callable[[int], float]],
                 last_epoch: int = -1) -> None:
        self._set_lambdas(lr_lambda, optimizer)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [base * fn(self.last_epoch)
                for base, fn in zip(self.base_lrs, self.lr_lambdas, strict=True)]


class MultiplicativeLR(_LambdaState, LRScheduler):
    """Multiply each group's lr by ``lr_lambda(epoch)`` at every step (one function or
    one per group): ``lr_e = lr_{e-1} * lr_lambda(e)`` for ``e >= 1``."""

    _fields = {**LRScheduler._fields, "lr_lambdas": _lambda_states}

    def __init__(self, optimizer: Optimizer,
                 lr_lambda: Callable[[int], float] | Sequence[Callable[[int], float]],
                 last_epoch: int = -1) -> None:
        self._set_lambdas(lr_lambda, optimizer)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self._is_initial:
            return self._lrs()
        return [lr * fn(self.last_epoch)
                for lr, fn in zip(self._lrs(), self.lr_lambdas, strict=True)]


class StepLR(LRScheduler):
    """Multiply the lr by ``gamma`` every ``step_size`` epochs.

    Example:
        >>> opt = optim.SGD([vtl.zeros(1, requires_grad=True)], lr=1.0)
        >>> sched = optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.1)
        >>> lrs = []
        >>> for epoch in range(5):
        ...     lrs.append(round(opt.param_groups[0]["lr"], 6))
        ...     opt.step()
        ...     sched.step()
        >>> lrs
        [1.0, 1.0, 0.1, 0.1, 0.01]
    """

    _fields = {**LRScheduler._fields, "step_size": _integer(1), "gamma": _number()}

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        if not isinstance(step_size, int) or step_size <= 0:
            raise ValueError(f"StepLR: step_size must be a positive int, got {step_size!r}")
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._lrs()
        return [lr * self.gamma for lr in self._lrs()]

    def _get_closed_form_lr(self) -> list[float]:
        return [b * self.gamma ** (self.last_epoch // self.step_size) for b in self.base_lrs]


def _milestone_counts(_sched: Any, v: Any) -> Counter:
    """Epoch -> how many times it was given as a milestone."""
    items = v.items() if isinstance(v, dict) else None
    if items is None or not all(
            isinstance(k, int) and not isinstance(k, bool) and isinstance(c, int)
            and not isinstance(c, bool) and c >= 1 for k, c in items):
        raise ValueError(f"expected a Counter of epoch -> count (ints), got {v!r}")
    return Counter(dict(items))


class MultiStepLR(LRScheduler):
    """Multiply the lr by ``gamma`` at each epoch in ``milestones``."""

    _fields = {**LRScheduler._fields, "milestones": _milestone_counts, "gamma": _number()}

    def __init__(self, optimizer: Optimizer, milestones: Sequence[int], gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        ms = list(milestones)
        if any(b < a for a, b in zip(ms, ms[1:], strict=False)):
            raise ValueError(f"MultiStepLR: milestones must be increasing, got {ms}")
        self.milestones = Counter(ms)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch not in self.milestones:
            return self._lrs()
        return [lr * self.gamma ** self.milestones[self.last_epoch] for lr in self._lrs()]

    def _get_closed_form_lr(self) -> list[float]:
        ms = sorted(self.milestones.elements())
        return [b * self.gamma ** bisect_right(ms, self.last_epoch) for b in self.base_lrs]


class ExponentialLR(LRScheduler):
    """Multiply the lr by ``gamma`` every epoch."""

    _fields = {**LRScheduler._fields, "gamma": _number()}

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self._is_initial:
            return self._lrs()
        return [lr * self.gamma for lr in self._lrs()]

    def _get_closed_form_lr(self) -> list[float]:
        return [b * self.gamma**self.last_epoch for b in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    r"""Cosine annealing from the initial lr to ``eta_min`` over ``T_max`` epochs:
    ``eta_min + (initial_lr - eta_min) (1 + cos(π epoch / T_max)) / 2`` (SGDR without restarts)."""

    _fields = {**LRScheduler._fields, "T_max": _number(0, low_open=True), "eta_min": _number()}

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0,  # noqa: N803
                 last_epoch: int = -1) -> None:
        if T_max <= 0:
            raise ValueError(f"CosineAnnealingLR: T_max must be positive, got {T_max!r}")
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        e, t, lo = self.last_epoch, self.T_max, self.eta_min
        if self._is_initial:
            return self._lrs()
        if self._step_count == 1 and e > 0:
            return [lo + (b - lo) * (1 + math.cos(e * math.pi / t)) / 2 for b in self.base_lrs]
        if (e - 1 - t) % (2 * t) == 0:
            return [lr + (b - lo) * (1 - math.cos(math.pi / t)) / 2
                    for lr, b in zip(self._lrs(), self.base_lrs, strict=True)]
        return [(1 + math.cos(math.pi * e / t)) / (1 + math.cos(math.pi * (e - 1) / t))
                * (lr - lo) + lo for lr in self._lrs()]

    def _get_closed_form_lr(self) -> list[float]:
        e, t, lo = self.last_epoch, self.T_max, self.eta_min
        return [lo + (b - lo) * (1 + math.cos(math.pi * e / t)) / 2 for b in self.base_lrs]


class LinearLR(LRScheduler):
    """Scale the lr linearly from ``start_factor`` to ``end_factor`` over ``total_iters``."""

    _fields = {**LRScheduler._fields, "start_factor": _number(0, 1, low_open=True),
               "end_factor": _number(0, 1), "total_iters": _number(0, low_open=True)}

    def __init__(self, optimizer: Optimizer, start_factor: float = 1.0 / 3,
                 end_factor: float = 1.0, total_iters: int = 5, last_epoch: int = -1) -> None:
        if not 0 < start_factor <= 1:
            raise ValueError(f"LinearLR: start_factor must be in (0, 1], got {start_factor!r}")
        if not 0 <= end_factor <= 1:
            raise ValueError(f"LinearLR: end_factor must be in [0, 1], got {end_factor!r}")
        if total_iters <= 0:
            raise ValueError(f"LinearLR: total_iters must be positive, got {total_iters!r}")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        e, s, f, n = self.last_epoch, self.start_factor, self.end_factor, self.total_iters
        if e == 0:
            return [lr * s for lr in self._lrs()]
        if self._is_initial or e > n:
            return self._lrs()
        return [lr * (1.0 + (f - s) / (n * s + (e - 1) * (f - s))) for lr in self._lrs()]

    def _get_closed_form_lr(self) -> list[float]:
        e, s, f, n = self.last_epoch, self.start_factor, self.end_factor, self.total_iters
        return [b * (s + (f - s) * min(n, e) / n) for b in self.base_lrs]


_PHASE_LRS = ("initial_lr", "max_lr", "min_lr")
_PHASE_MOMENTA = ("max_momentum", "base_momentum")


def _phases(_sched: Any, v: Any) -> list[dict[str, Any]]:
    """OneCycleLR's two or three phases (end step and the group keys they run between)."""
    keys = {"end_step", "start_lr", "end_lr", "start_momentum", "end_momentum"}
    if not isinstance(v, (list, tuple)) or len(v) not in (2, 3):
        raise ValueError(f"expected a list of 2 or 3 phases, got {v!r}")
    out = []
    for i, ph in enumerate(v):
        if not isinstance(ph, dict) or set(ph) != keys:
            raise ValueError(f"phase {i}: expected a dict with keys {sorted(keys)}, got {ph!r}")
        try:
            _number()(None, ph["end_step"])
            for k in ("start_lr", "end_lr"):
                _choice(*_PHASE_LRS)(None, ph[k])
            for k in ("start_momentum", "end_momentum"):
                _choice(*_PHASE_MOMENTA)(None, ph[k])
        except ValueError as exc:
            raise ValueError(f"phase {i}: {exc}") from None
        out.append(dict(ph))
    return out


class OneCycleLR(LRScheduler):
    """The 1cycle policy: warm up to ``max_lr`` then anneal far below the start,
    cycling momentum (or ``betas[0]``) the opposite way. Step it once per batch."""

    _fields = {**LRScheduler._fields, "total_steps": _integer(1),
               "anneal_strategy": _choice("cos", "linear"), "_schedule_phases": _phases,
               "cycle_momentum": _flag, "use_beta1": _flag}

    def __init__(self, optimizer: Optimizer, max_lr: float | Sequence[float],
                 total_steps: int | None = None, epochs: int | None = None,
                 steps_per_epoch: int | None = None, pct_start: float = 0.3,
                 anneal_strategy: str = "cos", cycle_momentum: bool = True,
                 base_momentum: float | Sequence[float] = 0.85,
                 max_momentum: float | Sequence[float] = 0.95, div_factor: float = 25.0,
                 final_div_factor: float = 1e4, three_phase: bool = False,
                 last_epoch: int = -1) -> None:
        _check_optimizer(optimizer, "OneCycleLR")
        if total_steps is not None:
            if not isinstance(total_steps, int) or total_steps <= 0:
                raise ValueError(f"OneCycleLR: total_steps must be a positive int, "
                                 f"got {total_steps!r}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if epochs <= 0 or steps_per_epoch <= 0:
                raise ValueError("OneCycleLR: epochs and steps_per_epoch must be positive, got "
                                 f"{epochs!r} and {steps_per_epoch!r}")
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("OneCycleLR: you must define either total_steps OR "
                             "(epochs AND steps_per_epoch)")
        if not 0 <= pct_start <= 1 or not isinstance(pct_start, (int, float)):
            raise ValueError(f"OneCycleLR: pct_start must be in [0, 1], got {pct_start!r}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError("OneCycleLR: anneal_strategy must be 'cos' or 'linear', "
                             f"got {anneal_strategy!r}")
        self.anneal_strategy = anneal_strategy
        n = self.total_steps
        if three_phase:
            self._schedule_phases = [
                {"end_step": float(pct_start * n) - 1, "start_lr": "initial_lr",
                 "end_lr": "max_lr", "start_momentum": "max_momentum",
                 "end_momentum": "base_momentum"},
                {"end_step": float(2 * pct_start * n) - 2, "start_lr": "max_lr",
                 "end_lr": "initial_lr", "start_momentum": "base_momentum",
                 "end_momentum": "max_momentum"},
                {"end_step": n - 1, "start_lr": "initial_lr", "end_lr": "min_lr",
                 "start_momentum": "max_momentum", "end_momentum": "max_momentum"},
            ]
        else:
            self._schedule_phases = [
                {"end_step": float(pct_start * n) - 1, "start_lr": "initial_lr",
                 "end_lr": "max_lr", "start_momentum": "max_momentum",
                 "end_momentum": "base_momentum"},
                {"end_step": n - 1, "start_lr": "max_lr", "end_lr": "min_lr",
                 "start_momentum": "base_momentum", "end_momentum": "max_momentum"},
            ]
        groups = optimizer.param_groups
        max_lrs = _per_group(max_lr, len(groups), "max_lr")
        if last_epoch == -1:
            for lr, group in zip(max_lrs, groups, strict=True):
                group["initial_lr"] = lr / div_factor
                group["max_lr"] = lr
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError("OneCycleLR: optimizer must support momentum or betas "
                                 "with cycle_momentum enabled")
            self.use_beta1 = "betas" in optimizer.defaults
            base_ms = _per_group(base_momentum, len(groups), "base_momentum")
            max_ms = _per_group(max_momentum, len(groups), "max_momentum")
            if last_epoch == -1:
                for mmax, mbase, group in zip(max_ms, base_ms, groups, strict=True):
                    if self.use_beta1:
                        group["betas"] = (mmax, *group["betas"][1:])
                    else:
                        group["momentum"] = mmax
                    group["max_momentum"] = mmax
                    group["base_momentum"] = mbase
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self) -> list[float]:
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"OneCycleLR: tried to step {step} times; the specified number "
                             f"of total steps is {self.total_steps}")
        lrs = []
        for group in self.optimizer.param_groups:
            start = 0.0
            lr = mom = 0.0
            for i, phase in enumerate(self._schedule_phases):
                end = phase["end_step"]
                if step <= end or i == len(self._schedule_phases) - 1:
                    pct = (step - start) / (end - start)
                    lr = self._anneal(group[phase["start_lr"]], group[phase["end_lr"]], pct)
                    if self.cycle_momentum:
                        mom = self._anneal(group[phase["start_momentum"]],
                                           group[phase["end_momentum"]], pct)
                    break
                start = phase["end_step"]
            lrs.append(lr)
            if self.cycle_momentum:
                if self.use_beta1:
                    group["betas"] = (mom, *group["betas"][1:])
                else:
                    group["momentum"] = mom
        return lrs


def _per_group(value: Any, n: int, name: str) -> list[float]:
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"expected {n} values for {name}, got {len(value)}")
        return list(value)
    return [value] * n


def _sub_states(sched: Any, v: Any) -> list[dict[str, Any]]:
    subs = sched._schedulers
    if not isinstance(v, (list, tuple)) or len(v) != len(subs):
        raise ValueError(f"expected a list of {len(subs)} scheduler states, got {v!r}")
    out = []
    for i, (s, sd) in enumerate(zip(subs, v, strict=True)):
        try:
            out.append(s._check_state(sd))
        except ValueError as exc:
            raise ValueError(f"scheduler {i}: {exc}") from None
    return out


def _switch_epochs(sched: Any, v: Any) -> list[int]:
    return _numbers(_integer(), v, len(sched._schedulers) - 1)


def _undo_steps(sched: Any) -> None:
    """Take back the construction step of the schedulers inside ``sched`` (recursively
    through SequentialLR and ChainedScheduler), as PyTorch's ``recursive_undo``."""
    subs = getattr(sched, "_schedulers", None)
    if subs is not None:
        for s in subs:
            if hasattr(s, "_schedulers"):
                _undo_steps(s)
            elif hasattr(s, "last_epoch"):
                s.last_epoch -= 1


class _NestedState:
    """state_dict of a scheduler made of schedulers: theirs under ``_schedulers``."""

    _schedulers: list[Any]

    def state_dict(self) -> dict[str, Any]:
        """Everything but the optimizer, and the state of each scheduler in
        ``_schedulers``."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def _apply_state(self, state: dict[str, Any]) -> None:
        state = dict(state)
        subs = state.pop("_schedulers")
        self.__dict__.update(state)
        for s, sd in zip(self._schedulers, subs, strict=True):
            s._apply_state(sd)


class SequentialLR(LRScheduler):
    """Run ``schedulers`` one after another, switching at each of ``milestones``.

    At a milestone the next scheduler restarts at epoch 0 from the current lr (its
    closed form where it has one) without counting a step, as in PyTorch; the
    construction steps of the schedulers (also inside a ChainedScheduler) are
    taken back and only the scheduler that runs at epoch 0 takes one."""

    _fields = {"_schedulers": _sub_states, "_milestones": _switch_epochs,
               "last_epoch": _integer(), "_last_lr": _lrs}

    def __init__(self, optimizer: Optimizer, schedulers: Sequence[LRScheduler],
                 milestones: Sequence[int], last_epoch: int = -1) -> None:
        _check_optimizer(optimizer, "SequentialLR")
        schedulers = list(schedulers)
        if not schedulers:
            raise ValueError("SequentialLR expects at least one scheduler")
        for i, s in enumerate(schedulers):
            if not hasattr(s, "optimizer"):
                raise TypeError(f"SequentialLR: schedulers[{i}] is not a scheduler")
            if isinstance(s, ReduceLROnPlateau):
                raise ValueError("SequentialLR does not support ReduceLROnPlateau "
                                 f"(schedulers[{i}])")
            if s.optimizer is not optimizer:
                raise ValueError(f"SequentialLR: schedulers[{i}] has a different optimizer")
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(
                "SequentialLR: expected len(milestones) == len(schedulers) - 1 = "
                f"{len(schedulers) - 1}, got {len(milestones)}"
            )
        self._schedulers = schedulers
        self._milestones = list(milestones)
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"]
        _undo_steps(self)  # the steps the schedulers took when they were made
        idx = bisect_right(self._milestones, 0)  # only the scheduler running at step 0
        schedulers[idx]._initial_step()
        self._last_lr = schedulers[idx].get_last_lr()

    @_replayed
    def step(self, epoch: int | None = None) -> None:  # noqa: ARG002 - PyTorch signature
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        s = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            s._update_lr(0)  # restart it at epoch 0 (its closed form where it has one)
        else:
            s.step()
        self._last_lr = s.get_last_lr()

    state_dict = _NestedState.state_dict
    _apply_state = _NestedState._apply_state


class ReduceLROnPlateau(_CheckedState):
    """Reduce the lr by ``factor`` when a metric stops improving for ``patience`` epochs.

    ``mode`` ``'min'``/``'max'``; ``threshold_mode`` ``'rel'`` (improvement means
    beating ``best * (1 ∓ threshold)``) or ``'abs'`` (``best ∓ threshold``).
    After a reduction, ``cooldown`` epochs pass before bad epochs count again;
    lrs never go below ``min_lr`` and changes smaller than ``eps`` are skipped.
    """

    _fields: dict[str, _Check] = {
        "factor": _number(high=1.0, high_open=True), "min_lrs": _lrs, "patience": _number(),
        "cooldown": _number(), "cooldown_counter": _number(), "mode": _choice("min", "max"),
        "threshold": _number(), "threshold_mode": _choice("rel", "abs"), "eps": _number(),
        "last_epoch": _integer(), "best": _number(), "num_bad_epochs": _integer(0),
        "_last_lr": _lrs,
    }

    def __init__(self, optimizer: Optimizer, mode: str = "min", factor: float = 0.1,
                 patience: int = 10, threshold: float = 1e-4, threshold_mode: str = "rel",
                 cooldown: int = 0, min_lr: float | Sequence[float] = 0.0,
                 eps: float = 1e-8) -> None:
        _check_optimizer(optimizer, "ReduceLROnPlateau")
        if factor >= 1.0:
            raise ValueError(f"ReduceLROnPlateau: factor must be < 1.0, got {factor!r}")
        if mode not in ("min", "max"):
            raise ValueError(f"ReduceLROnPlateau: mode must be 'min' or 'max', got {mode!r}")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError("ReduceLROnPlateau: threshold_mode must be 'rel' or 'abs', "
                             f"got {threshold_mode!r}")
        self.optimizer = optimizer
        self.factor = factor
        self.min_lrs = _per_group(min_lr, len(optimizer.param_groups), "min_lr")
        self.patience = patience
        self.cooldown = cooldown
        self.cooldown_counter = 0
        self.mode = mode
        self.threshold = threshold
        self.threshold_mode = threshold_mode
        self.eps = eps
        self.last_epoch = 0
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs = 0
        self._last_lr = [g["lr"] for g in optimizer.param_groups]

    def is_better(self, a: float, best: float) -> bool:
        t = self.threshold
        if self.mode == "min":
            return a < (best * (1.0 - t) if self.threshold_mode == "rel" else best - t)
        return a > (best * (1.0 + t) if self.threshold_mode == "rel" else best + t)

    @property
    def in_cooldown(self) -> bool:
        return self.cooldown_counter > 0

    @_replayed
    def step(self, metrics: Any, epoch: int | None = None) -> None:
        """Record this epoch's metric (a float or 0-d tensor; read back to the host)."""
        current = float(metrics)
        self.last_epoch = self.last_epoch + 1 if epoch is None else int(epoch)
        if self.is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            for i, group in enumerate(self.optimizer.param_groups):
                old = float(group["lr"])
                new = max(old * self.factor, self.min_lrs[i])
                if old - new > self.eps:
                    group["lr"] = new
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def get_last_lr(self) -> list[float]:
        return self._last_lr



class ConstantLR(LRScheduler):
    """Multiply the lr by ``factor`` until epoch ``total_iters``, then restore it:
    ``lr_e = initial_lr * (factor if e < total_iters else 1)``."""

    _fields = {**LRScheduler._fields, "factor": _number(0, 1), "total_iters": _integer(0)}

    def __init__(self, optimizer: Optimizer, factor: float = 1.0 / 3, total_iters: int = 5,
                 last_epoch: int = -1) -> None:
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) \
                or not 0 <= factor <= 1:
            raise ValueError("ConstantLR: constant multiplicative factor expected to be "
                             f"between 0 and 1, got {factor!r}")
        if isinstance(total_iters, bool) or not isinstance(total_iters, int) or total_iters < 0:
            raise ValueError(f"ConstantLR: total_iters must be a non-negative int, "
                             f"got {total_iters!r}")
        self.factor = factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0:
            return [lr * self.factor for lr in self._lrs()]
        if self.last_epoch != self.total_iters:
            return self._lrs()
        return [lr * (1.0 / self.factor) for lr in self._lrs()]

    def _get_closed_form_lr(self) -> list[float]:
        return [b * (self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor))
                for b in self.base_lrs]


class PolynomialLR(LRScheduler):
    """Decay the lr polynomially to 0 over ``total_iters`` epochs:
    ``lr_e = initial_lr * (1 - min(e, total_iters) / total_iters) ** power``."""

    _fields = {**LRScheduler._fields, "total_iters": _integer(1), "power": _number()}

    def __init__(self, optimizer: Optimizer, total_iters: int = 5, power: float = 1.0,
                 last_epoch: int = -1) -> None:
        if isinstance(total_iters, bool) or not isinstance(total_iters, int) or total_iters < 1:
            raise ValueError(f"PolynomialLR: total_iters must be a positive int, "
                             f"got {total_iters!r}")
        if isinstance(power, bool) or not isinstance(power, (int, float)) or math.isnan(power):
            raise ValueError(f"PolynomialLR: power must be a real number, got {power!r}")
        self.total_iters = total_iters
        self.power = power
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self._is_initial or self.last_epoch > self.total_iters:
            return self._lrs()
        decay_factor = ((1.0 - self.last_epoch / self.total_iters)
                        / (1.0 - (self.last_epoch - 1) / self.total_iters)) ** self.power
        return [lr * decay_factor for lr in self._lrs()]

    def _get_closed_form_lr(self) -> list[float]:
        return [b * (1.0 - min(self.total_iters, self.last_epoch) / self.total_iters)
                ** self.power for b in self.base_lrs]


class CosineAnnealingWarmRestarts(LRScheduler):
    r"""Cosine annealing with warm restarts (SGDR):
    ``lr = eta_min + (initial_lr - eta_min) (1 + cos(π T_cur / T_i)) / 2``, where
    ``T_cur`` counts the epochs since the last restart and ``T_i``, first ``T_0``,
    is multiplied by ``T_mult`` at each restart.

    ``step()`` advances one epoch; ``step(epoch)`` jumps to ``epoch``, which may
    be fractional (``step(epoch + i / iters)`` once per batch), as in PyTorch.
    """

    _fields = {**LRScheduler._fields, "T_0": _integer(1), "T_i": _number(0, low_open=True),
               "T_mult": _integer(1), "eta_min": _number(), "T_cur": _number()}

    def __init__(self, optimizer: Optimizer, T_0: int, T_mult: int = 1,  # noqa: N803
                 eta_min: float = 0.0, last_epoch: int = -1) -> None:
        if isinstance(T_0, bool) or not isinstance(T_0, int) or T_0 <= 0:
            raise ValueError(f"Expected positive integer T_0, but got {T_0!r}")
        if isinstance(T_mult, bool) or not isinstance(T_mult, int) or T_mult < 1:
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult!r}")
        if isinstance(eta_min, bool) or not isinstance(eta_min, (float, int)):
            raise ValueError(f"Expected float or int eta_min, but got {eta_min!r} of type "
                             f"{type(eta_min).__name__}")
        self.T_0 = T_0
        self.T_i = T_0
        self.T_mult = T_mult
        self.eta_min = eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [self.eta_min + (b - self.eta_min) * (1 + math.cos(math.pi * self.T_cur / self.T_i))
                / 2 for b in self.base_lrs]

    @_replayed
    def step(self, epoch: float | None = None) -> None:
        """Advance one epoch, or go to ``epoch`` (a non-negative number, fractional
        allowed)."""
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        else:
            if isinstance(epoch, bool) or not isinstance(epoch, numbers.Real) \
                    or math.isnan(epoch):
                raise ValueError(f"Expected a non-negative epoch, but got {epoch!r}")
            if epoch < 0:
                raise ValueError(f"Expected non-negative epoch, but got {epoch}")
            if epoch >= self.T_0:
                if self.T_mult == 1:
                    self.T_cur = epoch % self.T_0
                else:
                    n = int(math.log((epoch / self.T_0 * (self.T_mult - 1) + 1), self.T_mult))
                    self.T_cur = epoch - self.T_0 * (self.T_mult**n - 1) / (self.T_mult - 1)
                    self.T_i = self.T_0 * self.T_mult ** (n)
            else:
                self.T_i = self.T_0
                self.T_cur = epoch
        self.last_epoch = math.floor(epoch)
        for group, lr in zip(self.optimizer.param_groups, self.get_lr(), strict=True):
            group["lr"] = lr
        self._last_lr = self._lrs()


def _scale_fn_state(sched: Any, v: Any) -> dict[str, Any] | None:
    """CyclicLR's custom scale function: ``None`` (none, or a plain function) or the
    attributes of a callable object."""
    if v is None:
        return None
    if not isinstance(v, dict) or not all(isinstance(k, str) for k in v):
        raise ValueError(f"expected None or a dict of attributes, got {v!r}")
    fn = sched._scale_fn_custom
    if fn is None or not hasattr(fn, "__dict__"):
        raise ValueError(f"saved attributes {sorted(v)} of a scale function, but this "
                         "scheduler has no scale_fn object to restore them into")
    return dict(v)


def _mode(_sched: Any, v: Any) -> str:
    if not isinstance(v, str):
        raise ValueError(f"expected a mode name, got {v!r}")
    return v


class CyclicLR(LRScheduler):
    """Cyclical learning rates (Smith, 2017): the lr cycles between ``base_lr`` and
    ``max_lr`` (per group), rising over ``step_size_up`` steps and falling over
    ``step_size_down`` (default: ``step_size_up``); step it once per batch.

    ``mode``: ``"triangular"`` (constant amplitude), ``"triangular2"`` (halved
    each cycle), ``"exp_range"`` (scaled by ``gamma ** iteration``); or a custom
    ``scale_fn(x)`` in [0, 1] evaluated on the cycle number or the iteration
    (``scale_mode``). With ``cycle_momentum`` the momentum (SGD's ``momentum``,
    or ``betas[0]`` of Adam-like optimizers) cycles inversely between
    ``max_momentum`` and ``base_momentum``.
    """

    _fields = {**LRScheduler._fields, "max_lrs": _lrs, "total_size": _number(0, low_open=True),
               "step_ratio": _number(0, 1, low_open=True), "mode": _mode, "gamma": _number(),
               "scale_mode": _choice("cycle", "iterations"), "cycle_momentum": _flag,
               "use_beta1": _flag, "base_momentums": _lrs, "max_momentums": _lrs,
               "_scale_fn_custom": _scale_fn_state}

    def __init__(self, optimizer: Optimizer, base_lr: float | Sequence[float],
                 max_lr: float | Sequence[float], step_size_up: int = 2000,
                 step_size_down: int | None = None, mode: str = "triangular",
                 gamma: float = 1.0, scale_fn: Callable[[float], float] | None = None,
                 scale_mode: str = "cycle", cycle_momentum: bool = True,
                 base_momentum: float | Sequence[float] = 0.8,
                 max_momentum: float | Sequence[float] = 0.9, last_epoch: int = -1) -> None:
        _check_optimizer(optimizer, "CyclicLR")
        n = len(optimizer.param_groups)
        base_lrs = _per_group(base_lr, n, "base_lr")
        if isinstance(step_size_up, bool) or not isinstance(step_size_up, (int, float)) \
                or not step_size_up > 0:
            raise ValueError(f"CyclicLR: step_size_up must be positive, got {step_size_up!r}")
        if step_size_down is not None and (
                isinstance(step_size_down, bool) or not isinstance(step_size_down, (int, float))
                or not step_size_down >= 0):
            raise ValueError(f"CyclicLR: step_size_down must be non-negative, "
                             f"got {step_size_down!r}")
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError(f"CyclicLR: mode is invalid and scale_fn is None (mode {mode!r}; "
                             "expected 'triangular', 'triangular2' or 'exp_range')")
        if scale_fn is not None and not callable(scale_fn):
            raise TypeError(f"CyclicLR: scale_fn must be callable, got {type(scale_fn).__name__}")
        if scale_mode not in ("cycle", "iterations"):
            raise ValueError(f"CyclicLR: scale_mode must be 'cycle' or 'iterations', "
                             f"got {scale_mode!r}")
        if not isinstance(cycle_momentum, bool):
            raise ValueError(f"CyclicLR: cycle_momentum must be True or False, "
                             f"got {cycle_momentum!r}")
        self.optimizer = optimizer
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups, strict=True):
                group["lr"] = lr
        self.max_lrs = _per_group(max_lr, n, "max_lr")
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size = up + down
        self.step_ratio = up / self.total_size
        self.mode = mode
        self.gamma = gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode
        self._init_scale_fn()
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError("CyclicLR: optimizer must support momentum or beta1 with "
                                 "`cycle_momentum` option enabled")
            self.use_beta1 = "betas" in optimizer.defaults
            self.base_momentums = _per_group(base_momentum, n, "base_momentum")
            self.max_momentums = _per_group(max_momentum, n, "max_momentum")
            if last_epoch == -1:
                for m_max, m_base, group in zip(self.max_momentums, self.base_momentums,
                                                optimizer.param_groups, strict=True):
                    if self.use_beta1:
                        group["betas"] = (m_max, *group["betas"][1:])
                    else:
                        group["momentum"] = m_max
                    group["max_momentum"] = m_max
                    group["base_momentum"] = m_base
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _init_scale_fn(self) -> None:
        if self._scale_fn_custom is not None:
            return
        self.scale_mode = "iterations" if self.mode == "exp_range" else "cycle"

    def scale_fn(self, x: float) -> float:
        """The amplitude scale at ``x`` (a cycle number or an iteration)."""
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma**x

    def get_lr(self) -> list[float]:
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        if x <= self.step_ratio:
            scale_factor = x / self.step_ratio
        else:
            scale_factor = (x - 1) / (self.step_ratio - 1)
        at = cycle if self.scale_mode == "cycle" else self.last_epoch
        lrs = []
        for base_lr, max_lr in zip(self.base_lrs, self.max_lrs, strict=True):
            base_height = (max_lr - base_lr) * scale_factor
            lrs.append(base_lr + base_height * self.scale_fn(at))
        if self.cycle_momentum:
            for group, m_base, m_max in zip(self.optimizer.param_groups, self.base_momentums,
                                            self.max_momentums, strict=True):
                base_height = (m_max - m_base) * scale_factor
                momentum = m_max - base_height * self.scale_fn(at)
                if self.use_beta1:
                    group["betas"] = (momentum, *group["betas"][1:])
                else:
                    group["momentum"] = momentum
        return lrs

    def state_dict(self) -> dict[str, Any]:
        """Everything but the optimizer; a custom ``scale_fn`` is saved only as the
        attributes of a callable object (functions and lambdas are not saved)."""
        state = {k: v for k, v in self.__dict__.items() if k != "optimizer"}
        fn = state.pop("_scale_fn_custom")
        state["_scale_fn_custom"] = (None if fn is None or isinstance(fn, types.FunctionType)
                                     else dict(fn.__dict__))
        return state

    def _apply_state(self, state: dict[str, Any]) -> None:
        state = dict(state)
        saved = state.pop("_scale_fn_custom")
        self.__dict__.update(state)
        if saved is not None:
            self._scale_fn_custom.__dict__.update(saved)
        self._init_scale_fn()


class ChainedScheduler(_NestedState, LRScheduler):
    """Step several schedulers of one optimizer together: each ``step()`` steps every
    scheduler in ``schedulers`` in order, so their (chainable) factors combine.
    ``optimizer`` defaults to the schedulers' optimizer."""

    _fields = {"_schedulers": _sub_states, "_last_lr": _lrs, "_step_count": _integer(0)}

    def __init__(self, schedulers: Sequence[LRScheduler],
                 optimizer: Optimizer | None = None) -> None:
        schedulers = list(schedulers)
        if not schedulers:
            raise ValueError("ChainedScheduler expects at least one scheduler to be chained, "
                             "but got no scheduler")
        if optimizer is None:
            if not hasattr(schedulers[0], "optimizer"):
                raise TypeError("ChainedScheduler: schedulers[0] is not a scheduler")
            optimizer = schedulers[0].optimizer
        _check_optimizer(optimizer, "ChainedScheduler")
        for i, s in enumerate(schedulers):
            if not hasattr(s, "optimizer"):
                raise TypeError(f"ChainedScheduler: schedulers[{i}] is not a scheduler")
            if isinstance(s, ReduceLROnPlateau):
                raise ValueError("ChainedScheduler does not support ReduceLROnPlateau "
                                 f"(schedulers[{i}]): its step needs a metric")
            if s.optimizer is not optimizer:
                raise ValueError(f"ChainedScheduler: schedulers[{i}] has a different optimizer")
        self._schedulers = schedulers
        self.optimizer = optimizer
        self._last_lr = self._lrs()

    @_replayed
    def step(self, epoch: int | None = None) -> None:  # noqa: ARG002 - PyTorch signature
        """Step every scheduler, in order."""
        for s in self._schedulers:
            s.step()
        self._last_lr = self._lrs()

    def _update_lr(self, epoch: int | None = None) -> None:
        """Restart every scheduler at ``epoch`` (inside a SequentialLR, at a milestone)."""
        for s in self._schedulers:
            s._update_lr(epoch)
        self._last_lr = self._lrs()
