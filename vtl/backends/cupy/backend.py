"""The CuPy backend: NVIDIA GPUs through CUDA (its namespace is ``namespace.py``, a thin
module over ``array_api_compat.cupy``).

:func:`register` is the one place that equips it with its kernels (the contracts are in
``vtl.backends.kernels``): ``conv.py``, ``pool.py``, ``nn.py``, ``rnn.py``, ``optim.py`` and
``random.py`` of this package hold them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._base import Backend, Device
from . import nn as _nn
from .checks import CupyIndexChecks


class CupyBackend(Backend):
    name = "cupy"
    can_capture = True
    asynchronous = True
    native_module = "cupy"

    def _load(self) -> Any:
        import cupy  # noqa: F401 - ImportError means "not installed"

        count = cupy.cuda.runtime.getDeviceCount()
        if count < 1:
            raise RuntimeError("CuPy is installed but no CUDA device is present")
        from . import namespace as xp

        self._cupy = cupy
        self.array_type = cupy.ndarray
        self._checks = CupyIndexChecks(cupy)
        register(self, cupy, xp)
        return xp

    def dtypes(self, index: int = 0) -> dict[str, np.dtype]:
        """vtl's dtypes; bfloat16 where this CuPy takes ``ml_dtypes.bfloat16`` arrays
        (CuPy 14 and later)."""
        out = super().dtypes(index)
        ok = self.__dict__.get("_bf16")
        if ok is None:
            try:
                import ml_dtypes

                a = self._cupy.asarray(np.ones(2, ml_dtypes.bfloat16))
                ok = bool(((a + a).astype(np.float32) == 2).all())
            except Exception:  # CuPy without bfloat16
                ok = False
            self._bf16 = ok
        if not ok:
            out.pop("bfloat16", None)
        return out

    def check_dtype(self, dtype: np.dtype, index: int = 0) -> None:
        if dtype.name == "bfloat16" and not self.__dict__.get("_bf16", False) \
                and "bfloat16" not in self.dtypes(index):
            raise TypeError("dtype bfloat16 is not supported on cupy: it needs CuPy 14 or "
                            "later (ml_dtypes.bfloat16 arrays)")
        super().check_dtype(dtype, index)

    def device_count(self) -> int:
        return self._cupy.cuda.runtime.getDeviceCount()

    def native_device(self, index: int) -> Any:
        return self._cupy.cuda.Device(index)

    def device_of(self, raw: Any) -> Device:
        return Device(self.name, raw.device.id)._bind(self)

    def is_native(self, obj: Any) -> bool:
        return self.is_available and isinstance(obj, self._cupy.ndarray)

    def normalize(self, raw: Any) -> Any:
        return self._cupy.asarray(raw)

    def same_storage(self, a: Any, b: Any) -> bool:
        return a.data.mem is b.data.mem

    def layout(self, raw: Any) -> tuple[tuple[int, ...], int, int]:
        isz = raw.dtype.itemsize
        ptr = raw.data.ptr
        return tuple(st // isz for st in raw.strides), (ptr - raw.data.mem.ptr) // isz, ptr

    def _report(self) -> None:
        """Raise the errors that kernels found on the device since the last host read."""
        ce = self._kernels.get("cross_entropy")
        if ce is not None and ce.pending:  # class indices checked on the device
            ce.check_pending()
        if self._checks.pending:  # index arrays checked on the device
            self._checks.check_pending()

    def to_host(self, raw: Any) -> np.ndarray:
        out = self._cupy.asnumpy(raw)
        self._report()
        return out

    def read_flag(self, raw: Any) -> np.ndarray:
        return self._cupy.asnumpy(raw)

    def read_flag_later(self, raw: Any) -> Callable[[], np.ndarray]:
        """The copy starts now on the flag device's current stream, into pinned memory
        (:mod:`._flags`); under a capture, or for a larger array, the read happens when
        called."""
        flags = self.__dict__.get("_flags")
        if flags is None:
            from ._flags import FlagReads

            flags = self._flags = FlagReads(self._cupy)
        read = flags.start(raw)
        return super().read_flag_later(raw) if read is None else read

    def check_indices(self, idx: Any, n: int, axis: int, what: str = "", *,
                      negative: bool = True) -> Any:
        return self._checks.check(idx, n, axis, what, negative=negative)

    def write_index(self, data: Any, key: tuple, value: Any) -> None:
        failed = self._checks.failed(data.device.id)
        if failed is not None:  # keep the old values where a check of this thread failed
            cp = self._cupy
            old = data[key]
            value = cp.asarray(value, dtype=data.dtype)
            while value.ndim > old.ndim and value.shape[0] == 1:  # NumPy's assignment rule
                value = value[0]
            value = cp.where(failed, old, value)
        data[key] = value

    def from_host(self, arr: np.ndarray, index: int = 0) -> Any:
        with self._cupy.cuda.Device(index):
            out = self.xp.asarray(arr)  # the namespace's: 0-d values keep the sign of zero
        if arr.ndim and arr.dtype.kind in "iu":  # value range of uploaded class indices
            _nn.note_upload(out, arr)
        return out

    def from_dlpack(self, obj: Any, index: int = 0, copy: bool | None = None) -> Any:
        with self._cupy.cuda.Device(index):
            return self._cupy.from_dlpack(obj)

    def synchronize(self, index: int = 0) -> None:
        self._cupy.cuda.Device(index).synchronize()
        self._report()

    def scatter_add(self, target: Any, indices: Any, values: Any) -> Any:
        cp = self._cupy
        if target.dtype.kind == "c":  # no complex atomics: scatter both parts
            values = cp.asarray(values, dtype=target.dtype)
            cp.add.at(target.real, indices, values.real)
            cp.add.at(target.imag, indices, values.imag)
            return target
        if target.dtype.name == "bfloat16":  # no bfloat16 atomics: accumulated in float32
            wide = target.astype(np.float32)
            cp.add.at(wide, indices, cp.asarray(values).astype(np.float32))
            return wide.astype(target.dtype)
        cp.add.at(target, indices, values)
        return target

    def begin_capture(self, index: int = 0) -> Any:
        from .capture import CupyCapture

        return CupyCapture(self._cupy, index)

    def memory_info(self, index: int = 0) -> dict[str, int]:
        pool = self._cupy.get_default_memory_pool()
        return {"in_use": pool.used_bytes(), "pooled": pool.total_bytes() - pool.used_bytes()}

    def info(self) -> dict[str, Any]:
        cp = self._cupy
        from .. import cudnn as settings
        from .cudnn import load_cudnn

        out: dict[str, Any] = {"cupy": cp.__version__, "devices": []}
        cudnn, why = load_cudnn()
        engines = ("convolution engines timed per geometry" if settings.benchmark else
                   "the heuristics' convolution engines: vtl.backends.cudnn.benchmark is off")
        out["cudnn"] = (
            f"cuDNN {cudnn.backend_version()} through nvidia-cudnn-frontend "
            f"{cudnn.__version__} (convolutions, 16-bit attention; {engines})") \
            if cudnn is not None else f"not used: {why}"
        for i in range(self.device_count()):
            props = cp.cuda.runtime.getDeviceProperties(i)
            out["devices"].append(
                {"index": i, "name": props["name"].decode(), "memory": props["totalGlobalMem"]}
            )
        return out


def register(backend: Backend, cupy: Any, xp: Any) -> None:
    """Equip the CuPy backend object with its kernels (products through the namespace's
    ``matmul``: one direct cuBLAS call)."""
    from ._batch_norm import CupyBatchNorm
    from .attention import CupyAttention
    from .conv import CupyConv2d
    from .optim import CupyAmpUpdateScale, CupyGradNorm, MultiTensorApply
    from .pool import CupyPool2d
    from .random import CupyDropout, Philox
    from .rnn import GruCell, LstmCell

    nn = _nn.CupyNN(cupy, xp.matmul)
    from .cudnn import CudnnConv2d, load_cudnn

    cudnn, _why = load_cudnn()
    conv = CupyConv2d(cupy, matmul=xp.matmul) if cudnn is None else \
        CudnnConv2d(cupy, cudnn, matmul=xp.matmul)
    backend.register_kernel("conv2d", conv)
    backend.register_kernel("pool2d", CupyPool2d(cupy))
    from ._gemm_attention import GemmAttention

    gemm_attention = GemmAttention(cupy, xp)
    if cudnn is None:
        backend.register_kernel("attention", CupyAttention(cupy, gemm=gemm_attention))
    else:
        from .cudnn_attention import CudnnAttention

        backend.register_kernel("attention", CudnnAttention(cupy, cudnn, gemm=gemm_attention))
    backend.register_kernel("linear", nn.linear)
    backend.register_kernel("linear_grad_weight", nn.linear_grad_weight)
    backend.register_kernel("relu", nn.relu)
    backend.register_kernel("relu_backward", nn.relu_backward)
    backend.register_kernel("cross_entropy", _nn.CupyCrossEntropy(cupy))
    backend.register_kernel("layer_norm", _nn.CupyLayerNorm(cupy))
    backend.register_kernel("batch_norm", CupyBatchNorm(cupy))
    backend.register_kernel("gelu", _nn.CupyGelu(cupy))
    backend.register_kernel("silu", _nn.CupySilu(cupy))
    backend.register_kernel("special", _nn.CupySpecial(cupy))
    backend.register_kernel("softmax", _nn.CupySoftmax(cupy))
    backend.register_kernel("lstm_cell", LstmCell(cupy))
    backend.register_kernel("gru_cell", GruCell(cupy))
    backend.register_kernel("multi_tensor_apply", MultiTensorApply(cupy))
    grad_norm = CupyGradNorm(cupy)
    backend.register_kernel("grad_norm", grad_norm)
    backend.register_kernel("amp_unscale", grad_norm.unscale_)
    backend.register_kernel("amp_update_scale", CupyAmpUpdateScale(cupy))
    backend.register_kernel("philox", Philox(cupy))
    backend.register_kernel("dropout", CupyDropout(cupy))
