"""The wgpu backend of vtl: the ``Backend`` object over this package's array library.

:func:`register` is the one place that equips it with its kernels (the contracts are in
``vtl.backends.kernels``): ``conv.py``, ``pool.py``, ``nn.py``, ``attention.py``, ``rnn.py``,
``optim.py`` and ``random.py`` of this package hold them (the rest of the package is the
standalone array-API library).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._base import Backend

__all__ = ["WgpuBackend", "register"]


class WgpuBackend(Backend):
    """The WebGPU backend: vtl on the array library of this package."""

    name = "wgpu"
    can_capture = True
    asynchronous = True
    native_module = "vtl.backends.wgpu"

    def _load(self) -> Any:
        import sys

        from . import _runtime

        _runtime.get()  # RuntimeError: no adapter (or no wgpu-py)
        xp = sys.modules[__package__]
        self.array_type = xp.WgpuArray
        register(self)
        return xp

    def native_device(self, index: int) -> Any:
        return self.xp.__array_namespace_info__().default_device()

    def is_native(self, obj: Any) -> bool:
        return self.is_available and isinstance(obj, self.array_type)

    def normalize(self, raw: Any) -> Any:
        return self.xp.asarray(raw)

    def same_storage(self, a: Any, b: Any) -> bool:
        return a._st is b._st

    def layout(self, raw: Any) -> tuple[tuple[int, ...], int, int]:
        # a WebGPU buffer has no address: the "address" names the storage and the byte
        # offset in it (equal for arrays that start at the same element of one storage)
        isz = raw.dtype.itemsize
        return tuple(raw._strides), raw._offset, (id(raw._st) << 32) + raw._offset * isz

    def to_host(self, raw: Any) -> Any:
        return self.xp.to_numpy(raw)

    def from_host(self, arr: Any, index: int = 0) -> Any:
        return self.xp.from_host(arr)

    def read_flag_later(self, raw: Any) -> Callable[[], Any]:
        """The copy is recorded now, after the work that computes the flag, and the call
        waits only for that work (``_array.to_numpy_later``)."""
        from ._array import to_numpy_later

        return to_numpy_later(raw)

    def from_dlpack(self, obj: Any, index: int = 0, copy: bool | None = None) -> Any:
        return self.xp.from_dlpack(obj, copy=copy)

    def dtypes(self, index: int = 0) -> dict[str, Any]:
        return self.xp.__array_namespace_info__().dtypes()

    def default_dtypes(self, index: int = 0) -> dict[str, Any]:
        return self.xp.__array_namespace_info__().default_dtypes()

    def check_dtype(self, dtype: Any, index: int = 0) -> None:
        self.xp.check_dtype(dtype)

    def synchronize(self, index: int = 0) -> None:
        self.xp.synchronize()

    def scatter_add(self, target: Any, indices: Any, values: Any) -> Any:
        return self.xp.scatter_add(target, indices, values)

    def check_indices(self, idx: Any, n: int, axis: int, what: str = "", *,
                      negative: bool = True) -> Any:
        from ._indexing import check_indices

        return check_indices(idx, n, axis, what, negative=negative)

    def begin_capture(self, index: int = 0) -> Any:
        from .capture import WgpuCapture

        return WgpuCapture()

    def memory_info(self, index: int = 0) -> dict[str, int]:
        return self.xp.memory_info()

    def info(self) -> dict[str, Any]:
        return self.xp.runtime_info()


def register(backend: Backend) -> None:
    """Equip the wgpu backend object with its kernels."""
    from . import nn
    from ._gemm_attention import WgpuGemmAttention
    from .attention import WgpuAttention
    from .conv import WgpuConv2d
    from .optim import MultiTensorApply, WgpuGradNorm, amp_update_scale
    from .pool import WgpuPool2d
    from .random import WgpuDropout, philox
    from .rnn import WgpuGruCell, WgpuLstmCell

    backend.register_kernel("conv2d", WgpuConv2d())  # one patch kernel and products
    backend.register_kernel("pool2d", WgpuPool2d())  # max/avg pooling, one kernel each way
    backend.register_kernel("linear", nn.linear)  # product with the bias as epilogue
    backend.register_kernel("linear_grad_weight", nn.linear_grad_weight)
    backend.register_kernel("relu_backward", nn.relu_backward)
    backend.register_kernel("cross_entropy", nn.CrossEntropy())
    backend.register_kernel("layer_norm", nn.LayerNorm())  # 32 to 256 invocations a row
    backend.register_kernel("batch_norm", nn.BatchNorm())  # three dispatches each way
    backend.register_kernel("gelu", nn.Gelu())  # one dispatch each way
    backend.register_kernel("silu", nn.Silu())  # one fused dispatch each way
    backend.register_kernel("special", nn.Special())  # erf/erfc: one dispatch each way
    backend.register_kernel("softmax", nn.Softmax())  # last axis: one dispatch each way
    # flash-style: 1 dispatch, 2 back; long float32 sequences by products
    backend.register_kernel("attention", WgpuAttention(WgpuGemmAttention()))
    backend.register_kernel("lstm_cell", WgpuLstmCell())  # the cells' pointwise parts
    backend.register_kernel("gru_cell", WgpuGruCell())
    backend.register_kernel("multi_tensor_apply", MultiTensorApply())  # fused optimizer step
    backend.register_kernel("philox", philox)
    backend.register_kernel("dropout", WgpuDropout())  # one dispatch each way, no mask
    grad_norm = WgpuGradNorm()
    backend.register_kernel("grad_norm", grad_norm)  # a dispatch per 12 arrays, +1
    backend.register_kernel("amp_unscale", grad_norm.unscale_)  # a dispatch per 11 arrays
    backend.register_kernel("amp_update_scale", amp_update_scale)  # one dispatch
