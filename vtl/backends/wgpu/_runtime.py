"""The wgpu runtime: one adapter and one device per process.

The adapter is chosen high-performance first; ``VTL_WGPU_ADAPTER`` picks one by
a substring of its name or its backend type (``vulkan``, ``metal``, ``d3d12``).
The device is requested with the adapter's full limits and the native
features that kernels use when present.

Threads: one lock (:data:`LOCK`) serialises what the threads of a process share on the
device: the open command encoder and compute pass of the recorder, submissions and
readbacks, the buffer pool and the pipeline cache. Each operation takes it for the few
microseconds it records; arrays made by one thread may be used by another.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from . import _shaders

#: Native features requested when the adapter has them.
WANTED_FEATURES = (
    "shader-f16", "shader-f64", "shader-int64", "subgroup", "timestamp-query",
    "timestamp-query-inside-passes", "immediates",
)
#: Experimental native features requested when the adapter has them and the environment
#: variable beside each is ``1``; a device refused with them is requested again without.
EXPERIMENTAL_FEATURES = {"cooperative-matrix": "VTL_WGPU_COOP"}
#: Features without which the backend does not start.
REQUIRED_FEATURES = ("immediates",)
#: Bytes of per-dispatch parameters (shapes, strides, offsets, scalars).
PARAM_BYTES = 128

_lock = threading.Lock()
#: held while recording, submitting, reading back and allocating (see the module doc)
LOCK = threading.RLock()
_runtime: Runtime | None = None
_error: str | None = None


class Runtime:
    """The adapter, the device, its queue, features and limits."""

    def __init__(self) -> None:
        os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
        import wgpu

        self.wgpu = wgpu
        self.adapter = _pick_adapter(wgpu)
        have = set(self.adapter.features)
        missing = [f for f in REQUIRED_FEATURES if f not in have]
        if missing:
            raise RuntimeError(
                f"adapter {self.adapter.info.get('device', '?')!r} lacks the feature(s) "
                f"{', '.join(missing)} that the wgpu backend needs"
            )
        features = frozenset(f for f in WANTED_FEATURES if f in have)
        #: why an experimental feature the adapter has was not requested or granted
        self.refused: dict[str, str] = {}
        experimental = frozenset()
        for f, var in EXPERIMENTAL_FEATURES.items():
            if f not in have:
                self.refused[f] = "the adapter does not have it"
            elif os.environ.get(var, "").strip() == "1":
                experimental |= {f}
            else:
                self.refused[f] = f"not requested (experimental: {var}=1 requests it)"
        limits = dict(self.adapter.limits)
        limits["max-immediate-size"] = max(limits.get("max-immediate-size", 0), PARAM_BYTES)
        self.device = None
        if experimental:
            try:
                self.device = self.adapter.request_device_sync(
                    required_features=sorted(features | experimental), required_limits=limits)
                features |= experimental
            except Exception as exc:  # noqa: BLE001 - the device without them is still useful
                why = f"device request failed: {type(exc).__name__}: {' '.join(str(exc).split())}"
                self.refused.update(dict.fromkeys(experimental, why))
        if self.device is None:
            self.device = self.adapter.request_device_sync(
                required_features=sorted(features), required_limits=limits,
            )
        self.features = features
        self.queue = self.device.queue
        self.limits = dict(self.device.limits)
        self.max_binding = int(self.limits["max-storage-buffer-binding-size"])
        self.max_buffer = int(self.limits["max-buffer-size"])
        self.max_groups = int(self.limits["max-compute-workgroups-per-dimension"])
        self.info = dict(self.adapter.info)

    def describe(self) -> dict[str, Any]:
        return {
            "wgpu": self.wgpu.__version__,
            "adapter": self.info.get("device", ""),
            "vendor": self.info.get("vendor", ""),
            "backend_type": self.info.get("backend_type", ""),
            "adapter_type": self.info.get("adapter_type", ""),
            "features": sorted(self.features),
            "features_not_requested": dict(self.refused),
            "max_storage_binding": self.max_binding,
            "max_buffer_size": self.max_buffer,
            "max_workgroups_per_dimension": self.max_groups,
            "max_workgroup_storage": int(self.limits["max-compute-workgroup-storage-size"]),
            "shader_runtime_checks": _shaders.runtime_checks(self.device),
        }


def _pick_adapter(wgpu: Any) -> Any:
    want = os.environ.get("VTL_WGPU_ADAPTER", "").strip().lower()
    if not want:
        adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
        if adapter is None:
            raise RuntimeError("no WebGPU adapter found (no Vulkan/Metal/D3D12 driver?)")
        return adapter
    adapters = wgpu.gpu.enumerate_adapters_sync()
    names = []
    for a in adapters:
        info = a.info
        text = " ".join(str(info.get(k, "")) for k in ("device", "vendor", "description"))
        names.append(f"{info.get('device', '?')} ({info.get('backend_type', '?')})")
        if want in text.lower() or want == str(info.get("backend_type", "")).lower():
            return a
    raise RuntimeError(
        f"VTL_WGPU_ADAPTER={want!r} matches no adapter; found: {', '.join(names) or 'none'}"
    )


def get() -> Runtime:
    """The process-wide runtime; ``RuntimeError`` with the reason when there is none."""
    global _runtime, _error
    rt = _runtime
    if rt is not None:
        return rt
    with _lock:
        if _runtime is None:
            if _error is not None:
                raise RuntimeError(_error)
            try:
                _runtime = Runtime()
            except Exception as exc:
                _error = f"wgpu backend unavailable: {type(exc).__name__}: {exc}"
                raise RuntimeError(_error) from exc
    return _runtime
