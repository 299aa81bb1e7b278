"""float16 products on the device's matrix units through cooperative matrices.

wgpu-native exposes VK_KHR_cooperative_matrix as the experimental native feature
``cooperative-matrix`` and WGSL's ``wgpu_cooperative_matrix`` extension (``coop_mat16x16``
types, ``coopLoad``/``coopMultiplyAdd``/``coopStore``). Where the device was granted the
feature (``_runtime``) and its subgroups are 32 invocations wide, float16 products run
``wgsl/linalg/matmul_coop.wgsl`` (float32 accumulation, as the register-tiled kernel)
instead of the register-tiled kernels.

The extension is experimental, so the path is opt-in: ``VTL_WGPU_COOP=1`` (read when the
device is created) requests the feature. Before the first such product the kernel itself
computes a product of known integers (four output tiles, partial ones, a depth that is not
a multiple of its own) once through each spelling of the row-major load and store (wgpu's
``coopLoadT`` is row-major, ``coopLoad`` column-major; the check does not rely on that), on
buffers and a submission of its own. The first spelling that gives the exact product is
used; if none does, or the kernel does not compile, float16 products keep the
register-tiled kernels and :func:`describe` says why (``vtl info``).
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

_SPELLINGS = (("coopLoadT", "coopStoreT"), ("coopLoad", "coopStore"))
#: the check's product: (M, K) @ (K, N), four output tiles, partial ones and a depth that is
#: not a multiple of the kernel's 32
_M, _K, _N = 70, 70, 80


def _subgroups_of_32(info: dict) -> bool:
    """Whether the adapter's subgroups are always 32 invocations wide (wgpu-py 0.32 spells
    the sizes ``stackgroup_*``)."""
    for lo, hi in (("subgroup_min_size", "subgroup_max_size"),
                   ("stackgroup_min_size", "stackgroup_max_size")):
        if lo in info and hi in info:
            return info[lo] == info[hi] == 32
    return False


def _run_check(rt, load: str, store: str, a: np.ndarray, b: np.ndarray,
               template: str = "matmul_coop") -> np.ndarray:
    """``a @ b`` (float16, row-major) by ``matmul_coop.wgsl`` spelled with ``load``/``store``
    (``template``: another matmul kernel with its grid of 64x64 tiles, for tests), on
    buffers and a submission of its own (so it may run while a capture records)."""
    from . import _dtypes as D
    from . import _kernels, _shaders
    from ._linalg import matmul_subs
    from ._recorder import pack

    wgpu = rt.wgpu
    dev = rt.device
    (m, k), n = a.shape, b.shape[1]
    code = _kernels.render(template, (D.float16,),
                           {**matmul_subs(D.float16, (False, False)), "LD": load, "ST": store})
    bgl, layout, _ = _kernels._layout(("r", "r", "w"))
    module = _shaders.create_module(dev, code, "vtl coop check")
    pipe = dev.create_compute_pipeline(layout=layout,
                                       compute={"module": module, "entry_point": "main"})
    usage = wgpu.BufferUsage.STORAGE
    out_bytes = -(-m * n * 2 // 16) * 16
    bufs = [dev.create_buffer_with_data(data=a.tobytes(), usage=usage),
            dev.create_buffer_with_data(data=b.tobytes(), usage=usage),
            dev.create_buffer(size=out_bytes, usage=usage | wgpu.BufferUsage.COPY_SRC)]
    group = dev.create_bind_group(layout=bgl, entries=[
        {"binding": i, "resource": {"buffer": x, "offset": 0, "size": x.size}}
        for i, x in enumerate(bufs)])
    enc = dev.create_command_encoder()
    cp = enc.begin_compute_pass()
    cp.set_pipeline(pipe)
    cp.set_bind_group(0, group)
    cp.set_immediates(0, pack([m, n, k, 0, 0, 0, 0, k, 1, 0, n, 1]), 0, 128)
    cp.dispatch_workgroups(-(-n // 64), -(-m // 64), 1)
    cp.end()
    rt.queue.submit([enc.finish()])
    data = rt.queue.read_buffer(bufs[2])
    return np.frombuffer(data, np.float16)[:m * n].reshape(m, n).astype(np.float32)


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
    a = rng.integers(-3, 4, (_M, _K)).astype(np.float16)  # every sum exact in float16
    b = rng.integers(-3, 4, (_K, _N)).astype(np.float16)
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
            errors.append(f"{load}/{store}: a {_M}x{_K} @ {_K}x{_N} product came out wrong")
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
