"""Whether the row-wise kernels reduce on subgroups (``wgsl/math/subgroup_reduce.wgsl``)
instead of through workgroup memory (``workgroup_reduce.wgsl``).

The subgroup form compiles the subgroup size in and assumes that invocation ``i`` of a
workgroup is invocation ``i % size`` of its subgroup. It is taken where the adapter has the
``subgroup`` feature and a check kernel run once on the device finds one size and that
layout in every invocation of two workgroups (and its shuffles exchanging the values it
expects), by default only on NVIDIA adapters. A driver may pick a subgroup size per
pipeline (AMD's 32 or 64, Intel's 8 to 32; NVIDIA's is always 32), so the check's size
holds for the kernels only where it is fixed, and wgpu-py reports the bounds of every
adapter as 4 and 128, which cannot tell. ``VTL_WGPU_SUBGROUP_REDUCE=1`` takes subgroups on
any adapter that passes the check, ``=0`` on none. float32 reductions only; float64 ones
keep workgroup memory.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

__all__ = ["size", "status"]

_CHECK = """
@group(0) @binding(0) var<storage, read_write> O: array<u32>;
@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(subgroup_size) sgs: u32, @builtin(subgroup_invocation_id) sid: u32) {
  let at = (wid.x * 256u + lid) * 3u;
  O[at] = sgs;
  O[at + 1u] = sid;
  O[at + 2u] = subgroupShuffleXor(lid, 1u);
}
"""

_state: tuple[int | None, str] | None = None

#: PCI vendor ids of the adapters whose subgroups are taken by default (fixed size)
DEFAULT_VENDORS = {0x10DE: "NVIDIA"}


def _mode() -> str:
    return os.environ.get("VTL_WGPU_SUBGROUP_REDUCE", "").strip()


def _run_check(rt: Any) -> np.ndarray:
    """Each invocation's ``(subgroup size, subgroup invocation id, lid of its xor-1
    partner)`` over two workgroups of 256, ``(512, 3)``."""
    from . import _shaders

    wgpu, dev = rt.wgpu, rt.device
    module = _shaders.create_module(dev, _CHECK, "vtl subgroup check")
    pipe = dev.create_compute_pipeline(layout="auto",
                                       compute={"module": module, "entry_point": "main"})
    buf = dev.create_buffer(size=512 * 3 * 4,
                            usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC)
    group = dev.create_bind_group(layout=pipe.get_bind_group_layout(0),
                                  entries=[{"binding": 0, "resource": {"buffer": buf}}])
    enc = dev.create_command_encoder()
    cp = enc.begin_compute_pass()
    cp.set_pipeline(pipe)
    cp.set_bind_group(0, group)
    cp.dispatch_workgroups(2)
    cp.end()
    dev.queue.submit([enc.finish()])
    return np.frombuffer(dev.queue.read_buffer(buf), np.uint32).reshape(512, 3)


def _decide(rt: Any) -> tuple[int | None, str]:
    mode = _mode()
    if mode == "0":
        return None, "workgroup memory (VTL_WGPU_SUBGROUP_REDUCE=0)"
    if mode != "1" and rt.info.get("vendor_id") not in DEFAULT_VENDORS:
        return None, ("workgroup memory (subgroups by default only on NVIDIA adapters; "
                      "VTL_WGPU_SUBGROUP_REDUCE=1 asks for them)")
    if "subgroup" not in rt.features:
        return None, "workgroup memory (the adapter has no subgroups)"
    try:
        seen = _run_check(rt)
    except Exception as exc:  # noqa: BLE001 - a driver without the builtins keeps the tree
        return None, f"workgroup memory (subgroup check failed: {type(exc).__name__})"
    sizes = np.unique(seen[:, 0])
    lid = np.arange(512) % 256
    sg = int(sizes[0])
    ok = (len(sizes) == 1 and 2 <= sg <= 256
          and sg & (sg - 1) == 0 and np.array_equal(seen[:, 1], lid % sg)
          and np.array_equal(seen[:, 2], lid ^ 1))
    if not ok:
        return None, "workgroup memory (subgroups not laid out as the kernels assume)"
    return sg, f"subgroups of {sg}"


def size() -> int | None:
    """The subgroup size the float32 row reductions compile in, or ``None`` (workgroup
    memory); decided once per process."""
    global _state
    if _state is None:
        from . import _runtime

        _state = _decide(_runtime.get())
    return _state[0]


def status() -> str:
    """How the row reductions run (``vtl info``)."""
    size()
    assert _state is not None
    return _state[1]
