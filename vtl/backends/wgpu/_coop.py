"""float16 products on the device's matrix units through cooperative matrices.

wgpu-native exposes VK_KHR_cooperative_matrix as the experimental native feature
``cooperative-matrix`` and WGSL's ``wgpu_cooperative_matrix`` extension (``coop_mat16x16``
types, ``coopLoad``/``coopMultiplyAdd``/``coopStore``). Where the device was granted the
feature (``_runtime``) and its subgroups are 32 invocations wide, float16 products run
``wgsl/linalg/matmul_coop.wgsl`` (float32 accumulation, as the register-tiled kernel)
instead of the register-tiled kernels.

The extension is experimental, so the path is opt-in: ``VTL_WGPU_COOP=1`` (read when the
device is created) requests the feature. Before the first such product a 16x16 product of
known operands runs once through each spelling of the row-major load and store (wgpu's
``coopLoadT`` is row-major, ``coopLoad`` column-major; the check does not rely on that).
The first spelling that gives the right product is used; if none does, or the kernel does
not compile, float16 products keep the register-tiled kernels and :func:`describe` says
why (``vtl info``).
"""

from __future__ import annotations

import threading

import numpy as np

from . import _runtime

__all__ = ["available", "describe", "spelling"]

_lock = threading.Lock()
#: ``(load, store)`` of the row-major spelling once checked, or ``None`` with ``_why``
_spelling: tuple[str, str] | None = None
_checked = False
_why = "not checked yet"

_CHECK = """enable f16;
enable wgpu_cooperative_matrix;
@group(0) @binding(0) var<storage, read> A: array<f16>;
@group(0) @binding(1) var<storage, read> B: array<f16>;
@group(0) @binding(2) var<storage, read_write> C: array<f32>;
var<workgroup> As: array<f16, 384>;
var<workgroup> Cs: array<f32, 384>;
@compute @workgroup_size(32)
fn main(@builtin(local_invocation_index) lid: u32) {
  for (var i = lid; i < 256u; i += 32u) { As[(i / 16u) * 24u + i % 16u] = A[i]; }
  workgroupBarrier();
  var acc = coop_mat16x16<f32, C>();
  let x = LD<coop_mat16x16<f16, A>>(&As[0], 24u);
  let y = LD<coop_mat16x16<f16, B>>(&B[0], 16u);
  acc = coopMultiplyAdd(x, y, acc);
  ST(acc, &Cs[0], 24u);
  workgroupBarrier();
  for (var i = lid; i < 256u; i += 32u) { C[i] = Cs[(i / 16u) * 24u + i % 16u]; }
}
"""
_SPELLINGS = (("coopLoadT", "coopStoreT"), ("coopLoad", "coopStore"))


def _subgroups_of_32(info: dict) -> bool:
    """Whether the adapter's subgroups are always 32 invocations wide (wgpu-py 0.32 spells
    the sizes ``stackgroup_*``)."""
    for lo, hi in (("subgroup_min_size", "subgroup_max_size"),
                   ("stackgroup_min_size", "stackgroup_max_size")):
        if lo in info and hi in info:
            return info[lo] == info[hi] == 32
    return False


def _run_check(rt, load: str, store: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` (16x16 float16) by the check kernel spelled with ``load``/``store``."""
    wgpu = rt.wgpu
    dev = rt.device
    code = _CHECK.replace("LD<", load + "<").replace("ST(", store + "(")
    module = dev.create_shader_module(code=code, label="vtl coop check")
    pipe = dev.create_compute_pipeline(layout="auto",
                                       compute={"module": module, "entry_point": "main"})
    usage = wgpu.BufferUsage.STORAGE
    bufs = [dev.create_buffer_with_data(data=a.tobytes(), usage=usage),
            dev.create_buffer_with_data(data=b.tobytes(), usage=usage),
            dev.create_buffer(size=1024, usage=usage | wgpu.BufferUsage.COPY_SRC)]
    group = dev.create_bind_group(layout=pipe.get_bind_group_layout(0), entries=[
        {"binding": i, "resource": {"buffer": x, "offset": 0, "size": x.size}}
        for i, x in enumerate(bufs)])
    enc = dev.create_command_encoder()
    cp = enc.begin_compute_pass()
    cp.set_pipeline(pipe)
    cp.set_bind_group(0, group)
    cp.dispatch_workgroups(1, 1, 1)
    cp.end()
    rt.queue.submit([enc.finish()])
    return np.frombuffer(rt.queue.read_buffer(bufs[2]), np.float32).reshape(16, 16)


def _check() -> None:
    global _spelling, _checked, _why
    rt = _runtime.get()
    if "cooperative-matrix" not in rt.features:
        _why = ("no cooperative-matrix feature: "
                + rt.refused.get("cooperative-matrix", "not granted"))
        return
    if "shader-f16" not in rt.features:
        _why = "the device has no shader-f16"
        return
    if not _subgroups_of_32(rt.info):
        _why = "the adapter's subgroups are not all 32 invocations wide"
        return
    rng = np.random.default_rng(0)
    a = rng.integers(-4, 5, (16, 16)).astype(np.float16)  # exact in float16 and float32
    b = rng.integers(-4, 5, (16, 16)).astype(np.float16)
    want = a.astype(np.float32) @ b.astype(np.float32)
    errors = []
    with _runtime.LOCK:  # its own buffers and submission, beside what is being recorded
        for load, store in _SPELLINGS:
            try:
                got = _run_check(rt, load, store, a, b)
            except Exception as exc:  # noqa: BLE001 - an experimental extension: keep the reason
                errors.append(f"{load}: {type(exc).__name__}: {str(exc).strip()[:300]}")
                continue
            if np.array_equal(got, want):
                _spelling = (load, store)
                _why = ""
                return
            errors.append(f"{load}/{store}: a 16x16 product came out wrong")
    _why = "; ".join(errors)


def spelling() -> tuple[str, str] | None:
    """The row-major cooperative ``(load, store)`` builtins, or ``None`` where float16
    products do not use cooperative matrices (checked once per process)."""
    global _checked
    if not _checked:
        with _lock:
            if not _checked:
                try:
                    _check()
                finally:
                    _checked = True
    return _spelling


def available() -> bool:
    """Whether float16 products run on cooperative matrices."""
    return spelling() is not None


def describe() -> str:
    """What ``vtl info`` says of the path."""
    if spelling() is not None:
        return f"float16 products on cooperative matrices ({spelling()[0]})"
    return f"not used: {_why}"
