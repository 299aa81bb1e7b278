"""``vtl.amp.GradScaler``: dynamic loss scaling for float16 training, as PyTorch's.

The scale and the growth tracker live on the device (a float32 and an int32 0-d array),
and so do the inf/nan checks: :meth:`GradScaler.unscale_` multiplies each gradient by
``1 / scale`` and ORs a "non-finite" flag per device on the device, without reading
anything back; :meth:`GradScaler.step` reads that flag once per device (the only host
read of a step, as in PyTorch) and skips ``optimizer.step()`` when it is set;
:meth:`GradScaler.update` computes the next scale on the device with PyTorch's rule
(``_amp_update_scale_``): backoff on an overflow, growth after ``growth_interval``
steps without one.

Inside :func:`vtl.compile` nothing may be read on the host: there :meth:`GradScaler.step`
hands the flags to the optimizer (``Optimizer._step_skippable``), whose fused launches read
them on the device and change nothing where one is set; the optimizer settles its step
counts before the next replay. The scale and growth tracker are updated in place, so a
replay reads the scale its previous run left.
"""

from __future__ import annotations

from collections import defaultdict
from enum import Enum
from typing import Any

from .. import backends as _backends
from .. import capture as _capture
from .._tensor import Tensor, _new
from ..autograd.grad_mode import no_grad
from ..backends import _dtypes
from ..backends._common.amp import update_threshold

__all__ = ["GradScaler"]


class _Stage(Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _refresh_state() -> dict[str, Any]:
    return {"stage": _Stage.READY, "found_inf_per_device": {}}


class GradScaler:
    """Scale the loss so that float16 gradients do not underflow, and undo it before the
    optimizer step (PyTorch's ``torch.amp.GradScaler``)::

        scaler = vtl.amp.GradScaler()
        with vtl.autocast(dtype=vtl.float16):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)      # skipped when a gradient is inf or nan
        scaler.update()

    ``device``: the backend name (or device) the scale lives on; ``None`` takes the device
    of the first tensor given to :meth:`scale`. As in PyTorch, gradients of float16
    parameters are refused by :meth:`unscale_` (keep float32 parameters under autocast);
    bfloat16 gradients are unscaled (bfloat16 rarely needs scaling: its range is float32's).

    Args:
        device: The backend name (or device) of the scale (see above).
        init_scale: The initial scale.
        growth_factor: Factor by which the scale grows (greater than 1).
        backoff_factor: Factor by which the scale shrinks after an inf/nan step, in ``(0, 1)``.
        growth_interval: Steps without inf/nan gradients before the scale grows (a positive int).
        enabled: ``False`` makes every method a pass-through.

    Raises:
        ValueError: If ``growth_factor``, ``backoff_factor`` or ``growth_interval`` is out of
            range.
    """

    def __init__(self, device: Any = None, init_scale: float = 2.0**16,
                 growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True) -> None:
        if not growth_factor > 1.0:
            raise ValueError(f"GradScaler: growth_factor must be > 1, got {growth_factor}")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError(f"GradScaler: backoff_factor must be in (0, 1), got "
                             f"{backoff_factor}")
        if not isinstance(growth_interval, int) or isinstance(growth_interval, bool) \
                or growth_interval <= 0:
            raise ValueError(f"GradScaler: growth_interval must be a positive int, got "
                             f"{growth_interval!r}")
        self._device_arg = device
        self._enabled = bool(enabled)
        self._init_scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = growth_interval
        self._init_growth_tracker = 0
        self._scale: Any = None  # raw float32 0-d array on self._device
        self._growth_tracker: Any = None  # raw int32 0-d array
        self._device: Any = None
        self._per_optimizer_states: dict[int, dict[str, Any]] = defaultdict(_refresh_state)

    # -- scale ---------------------------------------------------------------------------
    def _lazy_init(self, dev: Any) -> None:
        if self._device_arg is not None:
            dev = _backends.resolve_device(self._device_arg)
        xp = dev.xp
        native = dev.backend.native_device(dev.index)
        self._device = dev
        # filled on the device (no host copy, so a captured first step can make them)
        self._scale = xp.full((), self._init_scale, dtype=_dtypes.float32, device=native)
        self._growth_tracker = xp.full((), self._init_growth_tracker, dtype=_dtypes.int32,
                                       device=native)

    def _scale_on(self, dev: Any) -> Any:
        """The raw scale array on ``dev``."""
        if dev is self._device:
            return self._scale
        return dev.backend.from_host(self._device.backend.to_host(self._scale), dev.index)

    def scale(self, outputs: Any) -> Any:
        """``outputs`` (a tensor, or nested lists/tuples of them) times the scale, in the
        outputs' dtypes; ``outputs`` unchanged when disabled."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            if self._scale is None:
                self._lazy_init(outputs._device)
            s = _new(self._scale_on(outputs._device), outputs._device)
            out = outputs * s
            if out.dtype != outputs.dtype:  # a 0-d scale keeps the outputs' dtype (PyTorch)
                from .._ops.dtype_functions import astype

                out = astype(out, outputs.dtype)
            return out
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise ValueError(f"GradScaler.scale(): outputs must be a Tensor or a list/tuple of "
                         f"them, got {type(outputs).__name__}")

    # -- unscale / step ------------------------------------------------------------------
    def _unscale_grads_(self, optimizer: Any, inv_scale: Any, allow_fp16: bool) -> dict:
        """Multiply the gradients by ``inv_scale`` in place; one device-side "found a
        non-finite value" flag (float32 0-d) per device, without host reads. The
        gradients of one device and dtype go to the backend's ``amp_unscale`` kernel where
        it has one (a launch or two for all of them), else through array ops each."""
        groups: dict[tuple[Any, Any], list[Tensor]] = {}
        for group in optimizer.param_groups:
            for p in group["params"]:
                g = getattr(p, "_grad", None)
                if g is None:
                    continue
                if not allow_fp16 and g._data.dtype == _dtypes.float16:
                    raise ValueError("Attempting to unscale FP16 gradients.")
                groups.setdefault((g._device, g._data.dtype), []).append(g)
        found: dict[Any, Any] = {}
        inv_on: dict[Any, Any] = {}
        with no_grad():
            for (dev, _), grads in groups.items():
                xp = dev.xp
                inv = inv_on.get(dev)
                if inv is None:
                    inv = inv_on[dev] = (inv_scale if dev is self._device else
                                         dev.backend.from_host(
                                             self._device.backend.to_host(inv_scale),
                                             dev.index))
                flag = found.get(dev)
                if flag is None:
                    flag = found[dev] = xp.zeros((), dtype=_dtypes.float32,
                                                 device=dev.backend.native_device(dev.index))
                kern = dev.backend.kernel("amp_unscale")
                if kern is not None and kern([g._data for g in grads], inv, flag):
                    for g in grads:
                        g._bump_version()
                    continue
                for g in grads:
                    d = g._data
                    out = xp.multiply(d, inv)
                    if out.dtype != d.dtype:
                        out = xp.astype(out, d.dtype)
                    bad = xp.any(xp.logical_not(xp.isfinite(out)))
                    flag = found[dev] = xp.maximum(flag, xp.astype(bad, _dtypes.float32))
                    g._data = out
                    g._bump_version()
        return found

    def unscale_(self, optimizer: Any) -> None:
        """Divide ``optimizer``'s gradients by the scale, in place (e.g. before clipping
        them); at most once per optimizer between :meth:`update` calls."""
        if not self._enabled:
            return
        self._check_scale_growth_tracker("unscale_")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is _Stage.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since "
                               "the last update().")
        if state["stage"] is _Stage.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        xp = self._device.xp
        # 1 / scale computed in float64 and rounded, as PyTorch's
        inv = xp.astype(1.0 / xp.astype(self._scale, _dtypes.float64)
                        if "float64" in self._device.backend.dtypes(self._device.index)
                        else 1.0 / self._scale, _dtypes.float32)
        state["found_inf_per_device"] = self._unscale_grads_(optimizer, inv, False)
        state["stage"] = _Stage.UNSCALED

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        """``optimizer.step(*args, **kwargs)`` unless a gradient was inf/nan (unscaling
        first if :meth:`unscale_` was not called); returns what ``step`` returned, or
        ``None`` when skipped.

        On the GPU backends, a vtl optimizer's fused step that has its state decides on
        the device (no host read: the step runs and changes nothing where the flag is
        set; the optimizer reads the flag at its next step or when ``state`` is looked
        at, to put back a skipped step's counts), and this returns ``None``. Otherwise the
        flag is read here, as PyTorch does."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is "
                               "enabled.")
        self._check_scale_growth_tracker("step")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is _Stage.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] is _Stage.READY:
            self.unscale_(optimizer)
        if not state["found_inf_per_device"]:
            raise AssertionError("No inf checks were recorded for this optimizer.")
        if _capture.active():
            return self._step_captured(optimizer, state, args, kwargs)
        found = state["found_inf_per_device"]
        if not args and not kwargs and _skips_on_device(optimizer, found):
            optimizer._step_skippable(dict(found))  # the flag is read at the next step
            state["stage"] = _Stage.STEPPED
            return None
        retval = None
        # one host read per device: the flag the unscale computed there
        if not sum(float(dev.backend.read_flag(v)) for dev, v in
                   state["found_inf_per_device"].items()):
            retval = optimizer.step(*args, **kwargs)
        state["stage"] = _Stage.STEPPED
        return retval

    @staticmethod
    def _step_captured(optimizer: Any, state: dict[str, Any], args: tuple,
                       kwargs: dict) -> None:
        """:meth:`step` inside a capture: the optimizer skips on the device."""
        from ..optim.optimizer import Optimizer

        name = type(optimizer).__name__
        if not isinstance(optimizer, Optimizer) or type(optimizer).step is not Optimizer.step:
            raise _capture.CaptureError(
                f"vtl.compile: GradScaler.step cannot skip a {name} step on the device; "
                "inside a captured function it takes a vtl.optim optimizer with a fused "
                "step (Adam, AdamW, SGD, ...; not LBFGS)")
        if args or kwargs:
            raise _capture.CaptureError(f"vtl.compile: GradScaler.step({name}, ...) takes no "
                                        "extra arguments inside a captured function")
        optimizer._step_skippable(dict(state["found_inf_per_device"]))
        state["stage"] = _Stage.STEPPED
        return None

    # -- update --------------------------------------------------------------------------
    def update(self, new_scale: float | Tensor | None = None) -> None:
        """The next scale: ``new_scale`` if given, else the current one times
        ``backoff_factor`` after a step with inf/nan gradients, or times ``growth_factor``
        after ``growth_interval`` steps in a row without (PyTorch's rule), on the device."""
        if not self._enabled:
            return
        self._check_scale_growth_tracker("update")
        dev = self._device
        xp = dev.xp
        if new_scale is not None:
            if isinstance(new_scale, Tensor):
                if new_scale.size != 1 or new_scale.dtype != _dtypes.float32:
                    raise ValueError("GradScaler.update(): new_scale should be a float or a "
                                     "1-element float32 tensor with requires_grad=False.")
                self._scale[...] = xp.reshape(new_scale.to_device(dev)._data, ())
            else:
                self._scale[...] = xp.asarray(float(new_scale), dtype=_dtypes.float32,
                                              device=dev.backend.native_device(dev.index))
        else:
            found = [v if d is dev else d.backend.to_host(v) for state in
                     self._per_optimizer_states.values()
                     for d, v in state["found_inf_per_device"].items()]
            if not found:
                raise AssertionError("No inf checks were recorded prior to update.")
            total = self._as_device(found[0])
            for f in found[1:]:
                total = total + self._as_device(f)
            # in place: a captured step's replays read the scale their last run left
            kern = dev.backend.kernel("amp_update_scale")
            if kern is None or not kern(self._scale, self._growth_tracker, total,
                                        self._growth_factor, self._backoff_factor,
                                        self._growth_interval):
                scale, tracker = _update_scale(
                    xp, self._scale, self._growth_tracker, total, self._growth_factor,
                    self._backoff_factor, self._growth_interval)
                self._scale[...] = scale
                self._growth_tracker[...] = tracker
        self._per_optimizer_states = defaultdict(_refresh_state)

    def _as_device(self, v: Any) -> Any:
        dev = self._device
        if dev.backend.is_native(v):
            return v
        return dev.backend.from_host(v, dev.index)

    def _check_scale_growth_tracker(self, fname: str) -> None:
        if self._scale is None:
            raise AssertionError(f"Attempted {fname} but the scale is not initialized: "
                                 "call scale() first.")

    # -- accessors -----------------------------------------------------------------------
    def get_scale(self) -> float:
        """The current scale as a Python float (a host read); 1.0 when disabled."""
        if not self._enabled:
            return 1.0
        if self._scale is None:
            return self._init_scale
        return float(self._device.backend.to_host(self._scale))

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = int(new_interval)

    def _get_growth_tracker(self) -> int:
        if not self._enabled:
            return 0
        if self._growth_tracker is None:
            return self._init_growth_tracker
        return int(self._device.backend.to_host(self._growth_tracker))

    def is_enabled(self) -> bool:
        return self._enabled

    def state_dict(self) -> dict[str, Any]:
        """``scale``, ``growth_factor``, ``backoff_factor``, ``growth_interval`` and
        ``_growth_tracker`` (empty when disabled), as PyTorch's."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval,
                "_growth_tracker": self._get_growth_tracker()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._init_scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._init_growth_tracker = int(state_dict["_growth_tracker"])
        if self._scale is not None:
            dev = self._device
            native = dev.backend.native_device(dev.index)
            self._scale[...] = dev.xp.asarray(self._init_scale, dtype=_dtypes.float32,
                                              device=native)
            self._growth_tracker[...] = dev.xp.asarray(self._init_growth_tracker,
                                                       dtype=_dtypes.int32, device=native)

    def __repr__(self) -> str:
        return (f"GradScaler(init_scale={self._init_scale}, growth_factor="
                f"{self._growth_factor}, backoff_factor={self._backoff_factor}, "
                f"growth_interval={self._growth_interval}, enabled={self._enabled})")


def _update_scale(xp: Any, scale: Any, tracker: Any, found_inf: Any, growth_factor: float,
                  backoff_factor: float, growth_interval: int) -> tuple[Any, Any]:
    """PyTorch's ``_amp_update_scale_`` on raw arrays (no host read): float32 scale. The
    ``amp_update_scale`` kernels compute the same values in one launch."""
    f32 = _dtypes.float32
    found = found_inf > 0
    backed = xp.astype(scale * backoff_factor, f32)  # Python floats: weak, float32 math
    succ = tracker + 1
    grow = succ == growth_interval
    grown_ok = scale < float(update_threshold(growth_factor))
    grown = xp.astype(xp.where(grown_ok, scale, xp.zeros_like(scale)) * growth_factor, f32)
    new_scale = xp.where(found, backed, xp.where(grow & grown_ok, grown, scale))
    new_tracker = xp.where(found | grow, xp.zeros_like(tracker), succ)
    return xp.astype(new_scale, f32), xp.astype(new_tracker, tracker.dtype)


def _skips_on_device(optimizer: Any, found: dict[Any, Any]) -> bool:
    """Whether an eager :meth:`GradScaler.step` leaves the skip to the device: a vtl
    optimizer with the fused step (:meth:`Optimizer._skips_on_device`) on backends where
    reading the flag would wait for the device."""
    from ..optim.optimizer import Optimizer

    return (isinstance(optimizer, Optimizer) and type(optimizer).step is Optimizer.step
            and all(dev.backend.asynchronous for dev in found)
            and optimizer._skips_on_device())
