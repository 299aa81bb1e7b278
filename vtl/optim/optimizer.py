"""The :class:`Optimizer` base: parameter groups, state, and the step machinery.

An optimizer updates parameters in place, working on the raw backend arrays
(``p._data``) outside the autograd graph. Each parameter's update is either
the portable rule of ``_functional.py`` (standard array-API functions only) or,
when the parameter's backend provides the optional kernel
``"multi_tensor_apply"`` and ``foreach`` is not ``False``, one fused launch for
all the parameters of a group that share device, dtype and hyper-parameters
(the rule then is the equivalent :class:`~vtl.optim._programs.Program`).

float16 and bfloat16 parameters keep their optimizer state (moments, momentum
buffers, sums) in float32 and are updated in float32 (by a backend's kernel that says
``low_params``, else by the portable rule): the parameter and its gradient are read as
float32, the rule runs, and the new value is rounded once into the parameter (so
``eps=1e-8`` and squared gradients do not underflow). No float32 master copy of the
parameter is kept: updates smaller than half a unit in the last place of the low dtype
are lost, as in PyTorch's optimizers on low-precision parameters (which keep their state
in the parameter's dtype).

Inside :func:`vtl.compile`, ``GradScaler.step`` cannot read its inf/nan flag on the host:
it calls :meth:`Optimizer._step_skippable`, whose fused launches read the flag on the
device and change nothing where it is set. The host part of that step (step counts) is
settled afterwards: before the next replay, or when ``state`` is next looked at, the flag
of the captured call (or of the last replay) is read, and a skipped step's counts are put
back, so they are what they would have been eagerly. Eager ``GradScaler`` steps on the
GPU backends take the same path once the optimizer has its state: the flag is read at
the next step (by then the device has finished the step that set it) instead of before
this one, so the host never waits for the step it has just queued.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

from .. import capture as _capture
from .._tensor import Tensor, _new
from ..autograd.grad_mode import enable_grad
from ..autograd.graph import bump_versions
from ..backends._dtypes import LOW_FLOATING, float32
from ..backends._dtypes import kind as _dkind
from ._programs import Program

__all__ = ["Optimizer"]

class _RequiredParameter:
    """Marker for a hyper-parameter without a default (like PyTorch's ``required``)."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _RequiredParameter()


def _check_number(name: str, value: Any, *, cls: str, low: float = 0.0,
                  high: float | None = None, high_open: bool = False) -> None:
    """Raise ``ValueError`` unless ``low <= value`` (``< high`` or ``<= high``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{cls}: {name} must be a real number, got {value!r}")
    bad = not (value >= low) or math.isnan(value)  # also catches nan
    if high is not None:
        bad = bad or (value >= high if high_open else value > high)
    if bad:
        rng = f"[{low}, {high})" if high_open else (f"[{low}, {high}]" if high is not None
                                                    else f">= {low}")
        raise ValueError(f"{cls}: invalid {name} {value!r}, expected {rng}")


def _flag_reads(found: dict[Any, Any], later: bool) -> dict[Any, Any]:
    """Device -> a function reading that device's skip flag: started now
    (``Backend.read_flag_later``) when ``later``, else read when called."""
    if later:
        return {dev: dev.backend.read_flag_later(f) for dev, f in found.items()}
    return {dev: partial(dev.backend.read_flag, f) for dev, f in found.items()}


class Optimizer:
    """Base class of all optimizers.

    ``params`` is an iterable of tensors, or of dicts each with a ``"params"``
    entry and per-group hyper-parameters overriding ``defaults``.

    Args:
        params: The parameters to optimize: an iterable of tensors, or of dicts that each hold a
            ``'params'`` entry and per-group options overriding the defaults.
        defaults: Default hyper-parameters of the groups.

    Raises:
        ValueError: If a hyper-parameter is out of range or of the wrong type, or ``params`` is
            empty.
        TypeError: If ``params`` is a single tensor or holds something other than tensors.
    """

    #: Program array name -> state key (for fused kernels), set by subclasses.
    _state_names: dict[str, str] = {}
    #: The per-parameter state entries :meth:`_plan` reads (the rest is the group's): one
    #: plan then serves every parameter of a step whose entries are equal (``None``: a plan
    #: per parameter, for a ``_plan`` that changes the state).
    _plan_depends_on: tuple[str, ...] | None = None
    #: The state names ``load_state_dict`` accepts (``None``: any) and those it requires.
    _state_keys: frozenset[str] | None = None
    _required_state: tuple[str, ...] = ()

    def __init__(self, params: Iterable[Any], defaults: dict[str, Any]) -> None:
        #: [device -> reader of its skip flag, [(state, its host values before the step)]]
        #: of the steps whose flags are not read yet (see :meth:`_step_skippable`)
        self._pending: list[list[Any]] = []
        self.defaults = dict(defaults)
        self._check_group(self.defaults)
        self.state = {}
        self.param_groups: list[dict[str, Any]] = []
        if isinstance(params, Tensor):
            raise TypeError(
                f"{type(self).__name__}: params must be an iterable of Tensors or dicts, "
                "got a single Tensor"
            )
        groups = list(params)
        if not groups:
            raise ValueError(f"{type(self).__name__} got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    @property
    def state(self) -> dict[Tensor, dict[str, Any]]:
        """Per-parameter state (``{parameter: {name: value}}``)."""
        if self._pending:
            self._settle()
        return self._state

    @state.setter
    def state(self, value: dict[Tensor, dict[str, Any]]) -> None:
        self._pending = []
        self._state = value

    # ----------------------------------------------------------------- groups
    def _check_group(self, group: dict[str, Any]) -> None:
        """Validate a group's hyper-parameters; subclasses raise ``ValueError``."""

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group of parameters with its own hyper-parameters."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, got {type(param_group).__name__}")
        name = type(self).__name__
        params = param_group.get("params")
        if params is None:
            raise ValueError(f"{name}: param_group needs a 'params' entry")
        params = [params] if isinstance(params, Tensor) else list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"{name} can only optimize vtl Tensors, got {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError(f"{name}: can't optimize a non-leaf Tensor")
        if len({id(p) for p in params}) != len(params):
            raise ValueError(f"{name}: a parameter group contains the same parameter twice")
        group = dict(param_group)
        group["params"] = params
        for key, default in self.defaults.items():
            if default is required and key not in group:
                raise ValueError(f"{name}: parameter group didn't specify a value of {key!r}")
            group.setdefault(key, default)
        self._check_group(group)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError(f"{name}: some parameters appear in more than one parameter group")
        self.param_groups.append(group)
        self._init_group(group)

    def _init_group(self, group: dict[str, Any]) -> None:
        """Hook for eager state initialisation (Adagrad)."""

    # ------------------------------------------------------------------ grads
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients: to ``None`` (default) or to zeros in place."""
        for group in self.param_groups:
            for p in group["params"]:
                g = getattr(p, "_grad", None)
                if g is None:
                    continue
                if set_to_none:
                    p._grad = None  # what the grad setter stores for None
                else:
                    g._grad_fn = None
                    g._requires_grad = False
                    g._data = g._device.xp.zeros_like(g._data)
                    g._bump_version()

    # ------------------------------------------------------------------- step
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Update every parameter that has a gradient; returns ``closure()`` if given."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        if self._pending:  # a captured step's skip decides this step's counts
            self._settle()
        for group in self.param_groups:
            self._step_group(group)
        return loss

    def _step_skippable(self, found: dict[Any, Any]) -> None:
        """:meth:`step` that changes nothing on a device whose 0-d float32 flag in ``found``
        (device -> flag) is nonzero when the step runs, without reading the flag:
        ``GradScaler.step``'s way to skip a step with inf/nan gradients in a captured
        function, and eagerly on an asynchronous backend (:meth:`_skips_on_device`). Only
        fused steps take the flag; their host part (step counts) is put back by
        :meth:`_settle` where the flag turns out set."""
        if self._pending:
            self._settle()
        skip = _SkipStep(found)
        for group in self.param_groups:
            self._step_group(group, skip)
        counts = self._counts_steps()
        if counts:
            # an eager step's copies start now, so the next step's read waits for them
            # only; a captured step's start once its work is queued (after_replay)
            entry = [_flag_reads(found, later=not _capture.active()), skip.record]
            self._pending.append(entry)
            _capture.settle_before_capture(self)
        if _capture.active():
            last = [entry if counts else None]  # the pending entry of the latest run
            _capture.on_replay(partial(self._replay_skippable, found, skip.buckets, last))
            if counts:
                _capture.after_replay(partial(self._flags_queued, found, last))

    def _skips_on_device(self) -> bool:
        """Whether :meth:`_step_skippable` can take an eager step: every parameter with a
        gradient has its state already (a skipped first step creates none) and takes the
        fused step with a skip flag."""
        states = self._state
        kernels: dict[Any, Any] = {}
        for group in self.param_groups:
            if group.get("foreach") is False:
                return False
            for p in group["params"]:
                if getattr(p, "_grad", None) is None:
                    continue
                if p not in states:
                    return False
                dev = p._device
                kern = kernels.get(dev, False)
                if kern is False:
                    kern = kernels[dev] = dev.backend.kernel("multi_tensor_apply")
                if not _runs_fused(kern, p._data.dtype, True):
                    return False
        return True

    def _counts_steps(self) -> bool:
        """Whether a step changes host state (step counts) that a skip must put back (SGD's
        does not: its captured steps with a skip flag never read the flag)."""
        return type(self)._advance is not Optimizer._advance

    def _settle(self) -> None:
        """Read the skip flags of the steps not settled yet (an eager step's was copied to
        the host when it was queued; a replay's is read now, after the device finishes it)
        and put back the host values of the steps that were skipped."""
        pending, self._pending = self._pending, []
        for reads, record in pending:  # (lists: after_replay may replace the reads)
            if any(float(read()) for read in reads.values()):
                for state, before in reversed(record):
                    state.clear()
                    state.update(before)

    def _replay_skippable(self, found: dict[Any, Any], buckets: list[tuple],
                          last: list[Any]) -> None:
        """Before a replay of a step captured by :meth:`_step_skippable`: settle the last
        run's flags, then the host part of this run's step (as :meth:`_replay_bucket`);
        ``last[0]`` becomes this run's pending entry."""
        counts = self._counts_steps()
        if self._pending:
            self._settle()
        record: list[tuple[dict, dict]] = []
        for group, items, prog, dyn in buckets:
            if counts:
                record += [(state, dict(state)) for _, state in items]
            self._replay_bucket(group, items, prog, dyn)
        if counts:  # this run's flag, read at the next step or capture
            last[0] = [_flag_reads(found, later=False), record]
            self._pending.append(last[0])

    @staticmethod
    def _flags_queued(found: dict[Any, Any], last: list[Any]) -> None:
        """After a captured step's work is queued: start the copies of its skip flags
        (``Backend.read_flag_later``), so their read at the next step waits only for them."""
        entry = last[0]
        if entry is not None:
            entry[0] = _flag_reads(found, later=True)

    def _step_group(self, group: dict[str, Any], skip: _SkipStep | None = None) -> None:
        foreach = group.get("foreach")
        buckets: dict[tuple, list[tuple[Tensor, dict[str, Any]]]] = {}
        plans: dict[tuple, tuple[Program, tuple[float, ...], Any]] = {}
        portable: list[tuple[Tensor, dict[str, Any]]] = []
        deps = self._plan_depends_on
        memo: dict[tuple, tuple[Program, tuple[float, ...]]] | None = \
            None if deps is None else {}  # one plan per step for equal state entries
        states = self._state
        last_dev = kern = None
        for p in group["params"]:
            grad = getattr(p, "_grad", None)
            if grad is None:
                continue
            state = states.get(p)
            if state is None:
                if _capture.current(p._device) is not None:
                    raise _capture.CaptureError(
                        f"vtl.compile: the first step of {type(self).__name__} for a parameter "
                        "creates its state, which a replay would create again: run the step "
                        "eagerly once before it is captured (warmup >= 1; with a GradScaler, "
                        "until a step is not skipped)")
                state = states[p] = self._init_state(p, group)
            if skip is not None:
                skip.record.append((state, dict(state)))
            self._advance(state, group)
            dev = p._device
            if dev is not last_dev:  # one kernel lookup per device
                last_dev = dev
                kern = None if foreach is False else dev.backend.kernel("multi_tensor_apply")
            dtype = p._data.dtype
            if _runs_fused(kern, dtype, skip is not None):
                mk = None if memo is None else self._plan_key(state, group, deps)
                if mk is None:
                    prog, scalars = self._plan(p, state, group)
                else:
                    hit = memo.get(mk)
                    if hit is None:
                        hit = memo[mk] = self._plan(p, state, group)
                    prog, scalars = hit
                # Devices are interned and programs cached: ids are stable keys here
                # (``plans`` holds both objects for the duration of the step)
                key = (id(dev), dtype, id(prog), scalars)
                items = buckets.get(key)
                if items is None:
                    items = buckets[key] = []
                    plans[key] = (prog, scalars, kern)
                items.append((p, state))
            else:
                portable.append((p, state))
        for key, items in buckets.items():
            prog, scalars, kern = plans[key]
            dev = items[0][0]._device
            cap = _capture.current(dev)
            if cap is not None:  # the scalars of every replay's step come from the host
                dyn = cap.scalars(scalars, state_dtype(items[0][0]._data.dtype))
                if skip is None:
                    _capture.on_replay(partial(self._replay_bucket, group, items, prog, dyn))
                else:  # one hook for the whole step (_step_skippable)
                    skip.buckets.append((group, items, prog, dyn))
                scalars = dyn
            self._run_fused(kern, prog, scalars, items,
                            None if skip is None else skip.found.get(dev))
            bump_versions([p for p, _ in items])
        for p, state in portable:
            if _capture.current(p._device) is not None:
                raise _capture.CaptureError(
                    f"vtl.compile: {type(self).__name__} cannot capture the step of a "
                    f"{p.dtype} parameter on {p._device}: only the fused multi-tensor step "
                    "(foreach not False, a dtype the backend's kernel takes) reads its "
                    "per-step scalars anew at each replay")
            if p._data.dtype in LOW_FLOATING:
                new = p._device.xp.astype(self._portable(_wide_view(p), state, group),
                                          p._data.dtype)
            else:
                new = self._portable(p, state, group)
            p._data[...] = new
            p._bump_version()

    def _run_fused(self, kern: Any, prog: Program, scalars: tuple[float, ...],
                   items: list[tuple[Tensor, dict[str, Any]]], skip: Any = None) -> None:
        names = self._state_names
        arrays = prog.arrays
        if arrays[:2] == ("p", "g"):
            keys = [names[a] for a in arrays[2:]]
            tensors = [(p._data, p._grad._data, *[state[k]._data for k in keys])
                       for p, state in items]
        else:
            tensors = []
            for p, state in items:
                arrs = []
                for a in arrays:
                    if a == "p":
                        arrs.append(p._data)
                    elif a == "g":
                        arrs.append(p._grad._data)
                    else:
                        arrs.append(state[names[a]]._data)
                tensors.append(tuple(arrs))
        if skip is None:
            kern(prog, tensors, scalars)
        else:
            kern(prog, tensors, scalars, skip=skip)

    def _replay_bucket(self, group: dict[str, Any], items: list[tuple[Tensor, dict[str, Any]]],
                       prog: Program, dyn: Any) -> None:
        """Before a replay of a captured step: the host part of the step of ``items``
        (step counts) and the fused kernel's scalars for it, as :meth:`_step_group` does."""
        advance = self._advance
        for _, state in items:
            advance(state, group)
        p, state = items[0]
        now, scalars = self._plan(p, state, group)
        if now is not prog:
            raise _capture.CaptureError(
                f"vtl.compile: the update rule of {type(self).__name__} changed after its step "
                f"was captured ({prog.name} -> {now.name}: a hyper-parameter such as "
                "weight_decay or amsgrad changed); capture the function again")
        dyn.set(scalars)
        bump_versions([p for p, _ in items])

    # Subclass hooks ---------------------------------------------------------
    def _plan_key(self, state: dict[str, Any], group: dict[str, Any],
                  deps: tuple[str, ...]) -> tuple | None:
        """The key under which :meth:`_plan`'s result serves other parameters of this step
        (``None``: plan this one alone): the state entries in ``deps``."""
        return tuple([state.get(k) for k in deps])

    def _init_state(self, p: Tensor, group: dict[str, Any]) -> dict[str, Any]:
        return {}

    def _advance(self, state: dict[str, Any], group: dict[str, Any]) -> None:
        """Per-step state bookkeeping shared by both paths (step counters)."""

    def _plan(self, p: Tensor, state: dict[str, Any],
              group: dict[str, Any]) -> tuple[Program, tuple[float, ...]]:
        raise NotImplementedError

    def _portable(self, p: Tensor, state: dict[str, Any], group: dict[str, Any]) -> Any:
        """Run the portable rule for ``p``; update the state; return ``p``'s new data."""
        raise NotImplementedError

    # ------------------------------------------------------------ state dict
    def state_dict(self) -> dict[str, Any]:
        """``{'state': {index: {...}}, 'param_groups': [...]}`` with copies of the state.

        Parameters are numbered in group order; tensors in the state are copies,
        so later steps do not change a saved state dict.
        """
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            ids = []
            for p in group["params"]:
                index.setdefault(id(p), len(index))
                ids.append(index[id(p)])
            packed["params"] = ids
            groups.append(packed)
        state = {}
        for group in self.param_groups:
            for p in group["params"]:
                st = self.state.get(p)
                if st is not None:
                    state[index[id(p)]] = {k: _clone(v) for k, v in st.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore state and hyper-parameters saved by :meth:`state_dict`.

        Everything is checked before anything changes: ``ValueError``, leaving
        the optimizer unchanged, when the saved groups or state do not match
        this optimizer's parameters, a hyper-parameter or state value has the
        wrong type, or a state name is not one this optimizer keeps.
        """
        self._apply_state(self._check_state_dict(state_dict))

    def _check_state_dict(self, state_dict: Any) -> tuple[list[dict[str, Any]],
                                                          dict[Tensor, dict[str, Any]]]:
        """The groups and state :meth:`load_state_dict` would install (changes nothing)."""
        name = type(self).__name__
        where = f"{name}.load_state_dict"
        if not isinstance(state_dict, dict) or not {"state", "param_groups"} <= set(state_dict):
            raise ValueError(f"{where}: expected a dict with 'state' and 'param_groups' entries")
        saved_groups, saved_state = state_dict["param_groups"], state_dict["state"]
        if not isinstance(saved_groups, (list, tuple)):
            raise ValueError(f"{where}: 'param_groups' must be a list of dicts, got "
                             f"{type(saved_groups).__name__}")
        if not isinstance(saved_state, dict):
            raise ValueError(f"{where}: 'state' must be a dict of parameter index -> state, "
                             f"got {type(saved_state).__name__}")
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(
                f"{where}: loaded state dict has {len(saved_groups)} parameter "
                f"group(s), the optimizer has {len(self.param_groups)}"
            )
        by_index: dict[int, Tensor] = {}
        new_groups = []
        for i, (cur, saved) in enumerate(zip(self.param_groups, saved_groups, strict=True)):
            if not isinstance(saved, dict) or not isinstance(saved.get("params", ()),
                                                             (list, tuple)):
                raise ValueError(f"{where}: parameter group {i} must be a dict with a list of "
                                 f"parameter indices under 'params', got {saved!r}")
            ids = list(saved.get("params", ()))
            if len(ids) != len(cur["params"]):
                raise ValueError(
                    f"{where}: loaded parameter group {i} has {len(ids)} "
                    f"parameter(s), the optimizer's group has {len(cur['params'])}"
                )
            for idx, p in zip(ids, cur["params"], strict=True):
                if not _is_index(idx) or idx in by_index:
                    raise ValueError(f"{where}: parameter group {i} lists {idx!r}, expected "
                                     "parameter indices (ints) that appear once")
                by_index[idx] = p
            group = {**cur, **{k: v for k, v in saved.items() if k != "params"}}
            group["params"] = cur["params"]
            self._check_group(group)
            new_groups.append(group)
        new_state: dict[Tensor, dict[str, Any]] = {}
        for idx, st in saved_state.items():
            if not _is_index(idx):
                raise ValueError(f"{where}: state key {idx!r} is not a parameter index (an int)")
            p = by_index.get(idx)
            if p is None:
                raise ValueError(f"{where}: state for parameter {idx!r}, which is in no group")
            if not isinstance(st, dict):
                raise ValueError(f"{where}: state of parameter {idx} must be a dict, got "
                                 f"{type(st).__name__}")
            new_state[p] = {k: self._load_value(p, idx, k, v) for k, v in st.items()}
            lacking = [k for k in self._required_state if k not in st]
            if lacking:
                raise ValueError(f"{where}: state of parameter {idx} lacks {lacking}")
        return new_groups, new_state

    def _apply_state(self, plan: tuple[list[dict[str, Any]],
                                       dict[Tensor, dict[str, Any]]]) -> None:
        self.param_groups[:], self.state = plan

    def _load_value(self, p: Tensor, idx: Any, key: str, value: Any) -> Any:
        where = f"{type(self).__name__}.load_state_dict"
        keys = self._state_keys
        if keys is not None and key not in keys:
            raise ValueError(f"{where}: unknown state {key!r} for parameter {idx}; a "
                             f"{type(self).__name__} keeps {sorted(keys)}")
        if key == "step":
            return _step(value, f"{where}: state 'step' of parameter {idx}")
        tensor_key = key in self._state_names.values()
        if value is None and key not in self._required_state:
            return None
        if not tensor_key and (value is None or isinstance(value, (bool, int, float))):
            return value
        import vtl

        # a number stands for the state of a 0-d parameter (a checkpoint stores 0-d
        # state among its scalars)
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if (isinstance(value, (str, bytes, bool, int, float, dict)) or value is None) \
                and not (number and tuple(p.shape) == ()):
            raise ValueError(f"{where}: state {key!r} of parameter {idx} must be an array of "
                             f"shape {tuple(p.shape)}, got {value!r}")
        try:
            if not isinstance(value, Tensor):
                value = vtl.asarray(value)
            if tuple(value.shape) != tuple(p.shape):
                raise ValueError(
                    f"{where}: state {key!r} of parameter {idx} has shape "
                    f"{tuple(value.shape)}, the parameter has shape {tuple(p.shape)}"
                )
            if value.device != p.device:
                value = value.to(p.device)
            out = vtl.astype(value, state_dtype(p.dtype), copy=True)
        except (TypeError, ValueError) as exc:
            if str(exc).startswith(where):
                raise
            raise ValueError(f"{where}: state {key!r} of parameter {idx}: {exc}") from exc
        return _new(out._data, p._device)

    # ------------------------------------------------------------------ misc
    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for k in sorted(group):
                if k != "params":
                    lines.append(f"    {k}: {group[k]}")
        lines.append(")")
        return "\n".join(lines)


def _runs_fused(kern: Any, dtype: Any, skip: bool) -> bool:
    """Whether a parameter of ``dtype`` takes the ``multi_tensor_apply`` kernel ``kern``
    (with a skip flag, where ``skip``); else the portable rule (a 16-bit parameter's in
    float32 where the kernel does not take ``low_params``)."""
    return (kern is not None and kern.supports(dtype)
            and (dtype not in LOW_FLOATING or getattr(kern, "low_params", False))
            and (not skip or getattr(kern, "takes_skip", False)))


class _SkipStep:
    """A step of :meth:`Optimizer._step_skippable`: the flags (device -> 0-d array), and what
    its groups leave for the replays: each state dict with its host values before the step,
    and the fused buckets' ``(group, items, program, dynamic scalars)``."""

    __slots__ = ("buckets", "found", "record")

    def __init__(self, found: dict[Any, Any]) -> None:
        self.found = found
        self.record: list[tuple[dict, dict]] = []
        self.buckets: list[tuple] = []


def _is_index(idx: Any) -> bool:
    return isinstance(idx, int) and not isinstance(idx, bool) and idx >= 0


def _step(value: Any, what: str) -> int:
    """A saved step count as an int: an int, or an integral float / 0-d array."""
    v = value
    if hasattr(v, "shape") and tuple(v.shape) == () and not isinstance(v, (str, bytes)):
        v = v.item()
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ValueError(f"{what} must be a non-negative integer, got {value!r}")
    return v


def _check_flags(group: dict[str, Any], names: tuple[str, ...], cls: str) -> None:
    """``ValueError`` unless each of ``names`` is a bool (``foreach`` may also be None)."""
    for key in names:
        v = group[key]
        if not (isinstance(v, bool) or (key == "foreach" and v is None)):
            allowed = "True, False or None" if key == "foreach" else "True or False"
            raise ValueError(f"{cls}: {key} must be {allowed}, got {v!r}")


def _clone(value: Any) -> Any:
    if isinstance(value, Tensor):
        xp = value._device.xp
        return _new(xp.asarray(value._data, copy=True), value._device)
    return value


def state_dtype(dtype: Any) -> Any:
    """The dtype of the optimizer state of a parameter of ``dtype``: float32 for float16
    and bfloat16, else ``dtype``."""
    return float32 if dtype in LOW_FLOATING else dtype


def _wide_view(p: Tensor) -> Tensor:
    """A float32 stand-in for a low-precision parameter: its value and gradient as
    float32 (the portable rules read ``p._device``, ``p._data`` and ``p.grad._data``)."""
    xp = p._device.xp
    q = _new(xp.astype(p._data, float32), p._device)
    q._grad = _new(xp.astype(p._grad._data, float32), p._device)
    return q


def _zeros_like(p: Tensor) -> Tensor:
    d = p._data
    if d.dtype in LOW_FLOATING:
        return _new(p._device.xp.zeros_like(d, dtype=float32), p._device)
    return _new(p._device.xp.zeros_like(d), p._device)


def _set(state: dict[str, Any], key: str, p: Tensor, raw: Any) -> None:
    """Store a new raw array under ``state[key]`` (a Tensor on ``p``'s device)."""
    t = state.get(key)
    if t is None:
        state[key] = _new(raw, p._device)
    else:
        t._data = raw


def _check_real(p: Tensor, cls: str) -> None:
    if _dkind(p._data.dtype) == "c":
        raise TypeError(f"{cls} does not support complex parameters yet (got {p.dtype})")


def _check_betas(group: dict[str, Any], cls: str) -> None:
    """``ValueError`` unless ``group['betas']`` is a pair of numbers in [0, 1)."""
    betas = group["betas"]
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise ValueError(f"{cls}: betas must be a pair of floats, got {betas!r}")
    _check_number("beta1 (betas[0])", betas[0], cls=cls, high=1.0, high_open=True)
    _check_number("beta2 (betas[1])", betas[1], cls=cls, high=1.0, high_open=True)


def _scalar_state(value: Any, what: str) -> float:
    """A saved real scalar (a number or a 0-d array) as a Python float."""
    v = value
    if hasattr(v, "shape") and tuple(v.shape) == () and not isinstance(v, (str, bytes)):
        v = v.item()
    if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v):
        raise ValueError(f"{what} must be a real number, got {value!r}")
    return float(v)
