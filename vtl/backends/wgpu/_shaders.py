"""Shader modules of the backend's own WGSL, compiled without the runtime checks that
wgpu adds to shaders it cannot trust.

By default naga rewrites every array index of a WGSL shader into a clamped one and gives
every loop a hidden iteration counter that breaks out after 2^64 iterations; the counters
also keep the Vulkan driver from unrolling the loops. vtl's kernels index their buffers
from sizes the host checked and are tested against NumPy, so they are compiled through
wgpu-native's ``wgpuDeviceCreateShaderModuleTrusted`` without these checks, as WebGPU
allows for trusted code. Buffer accesses stay within their bindings where the driver
bounds them itself (Vulkan's robust buffer access, which wgpu requests).

``VTL_WGPU_SHADER_CHECKS=1`` compiles them with the checks, as any WebGPU shader (to tell
a kernel's out-of-range index from a wrong result); where the wgpu-native library has no
trusted entry point, the checks stay.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["CHECKED", "create_module", "runtime_checks", "trusted_available"]

#: Whether the backend's shaders keep wgpu's runtime checks (``VTL_WGPU_SHADER_CHECKS=1``).
CHECKED = os.environ.get("VTL_WGPU_SHADER_CHECKS", "").strip() == "1"

#: ``WGPUShaderRuntimeChecks`` with no check on (wgpu.h)
_NO_CHECKS = 0


def _native_api() -> Any:
    try:
        from wgpu.backends.wgpu_native import _api
    except ImportError:
        return None
    return _api if hasattr(_api.lib, "wgpuDeviceCreateShaderModuleTrusted") else None


def _trusted_api(device: Any) -> Any:
    """wgpu-native's API where ``device`` (a wgpu-native device) can compile shaders
    without runtime checks, else ``None``."""
    api = _native_api()
    return api if api is not None and hasattr(device, "_internal") else None


def trusted_available(device: Any) -> bool:
    """Whether ``device`` (a wgpu-native device) compiles shaders without runtime checks."""
    return _trusted_api(device) is not None


def runtime_checks(device: Any) -> bool:
    """Whether the backend's kernels on ``device`` are compiled with wgpu's runtime checks
    (``vtl info``'s ``shader_runtime_checks``)."""
    return CHECKED or not trusted_available(device)


def _trusted(device: Any, code: str, label: str) -> Any:
    """The module compiled by ``wgpuDeviceCreateShaderModuleTrusted`` without checks, or
    ``None`` where this wgpu has no such entry point."""
    _api = _trusted_api(device)
    if _api is None:
        return None
    ffi, lib = _api.ffi, _api.lib
    source = _api.new_struct_p("WGPUShaderSourceWGSL *", code=_api.to_c_string_view(code))
    source[0].chain.next = ffi.NULL
    source[0].chain.sType = lib.WGPUSType_ShaderSourceWGSL
    desc = _api.new_struct_p("WGPUShaderModuleDescriptor *",
                             nextInChain=ffi.cast("WGPUChainedStruct *", source),
                             label=_api.to_c_string_view(label))
    handle = _api.libf.wgpuDeviceCreateShaderModuleTrusted(device._internal, desc,
                                                           _NO_CHECKS)
    if handle == ffi.NULL:
        raise RuntimeError("shader module creation failed")
    return _api.GPUShaderModule(label, handle, device)


def create_module(device: Any, code: str, label: str) -> Any:
    """The shader module of the backend's WGSL ``code``: without wgpu's runtime checks
    unless :data:`CHECKED` (or wgpu-native lacks the trusted entry point)."""
    if not CHECKED:
        module = _trusted(device, code, label)
        if module is not None:
            return module
    return device.create_shader_module(code=code, label=label)
