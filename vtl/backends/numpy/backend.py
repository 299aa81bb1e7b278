"""The NumPy backend: the CPU, always available (its namespace is ``namespace.py``, a thin
module over ``array_api_compat.numpy``).

:func:`register` is the one place that equips it with its kernels (the contracts are in
``vtl.backends.kernels``): ``conv.py``, ``pool.py``, ``nn.py`` and ``optim.py`` of this
package hold them."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._base import Backend
from .._dtypes import LOW_FLOATING

#: Elements from which the gradient of a reduction is a broadcast view (``Backend.spread``).
SPREAD_MIN = 1 << 16


#: dtype -> a 0-d array of one (copied, never handed out)
_ONES: dict[Any, Any] = {}
#: (rows, dtype) -> a read-only vector of ones, for column sums
_ROW_ONES: dict[Any, Any] = {}
_count_nonzero = np.count_nonzero
try:  # np.count_nonzero without its Python wrapper (a quarter of its cost on small masks)
    from numpy._core.multiarray import count_nonzero as _count_nonzero
except ImportError:  # pragma: no cover - other NumPy layouts
    pass


class NumpyBackend(Backend):
    name = "numpy"
    array_type = np.ndarray

    def _load(self) -> Any:
        from . import namespace as xp
        from ._memory import keep_freed_memory

        keep_freed_memory()
        register(self)
        return xp

    def native_device(self, index: int) -> Any:
        return "cpu"

    def is_native(self, obj: Any) -> bool:
        return isinstance(obj, (np.ndarray, np.generic))

    def normalize(self, raw: Any) -> Any:
        return np.asarray(raw)

    def to_host(self, raw: Any) -> np.ndarray:
        return np.asarray(raw)

    def from_host(self, arr: np.ndarray, index: int = 0) -> Any:
        return np.asarray(arr)

    def from_dlpack(self, obj: Any, index: int = 0, copy: bool | None = None) -> Any:
        return np.from_dlpack(obj, copy=copy)

    def scatter_add(self, target: Any, indices: Any, values: Any) -> Any:
        from .scatter import scatter_add

        return scatter_add(target, indices, values)

    def sum_axes(self, a: Any, axes: Any, keepdims: bool = False) -> Any:
        if axes == 0 and not keepdims and a.ndim == 2 and a.dtype.char in "fd" and a.size:
            # the column sums (a bias's gradient) as one BLAS gemv with a vector of ones:
            # np.add.reduce costs several times more; a column of zeros of either sign
            # sums to +0.0
            key = (a.shape[0], a.dtype)
            ones = _ROW_ONES.get(key)
            if ones is None:
                if len(_ROW_ONES) > 64:
                    _ROW_ONES.clear()
                ones = _ROW_ONES[key] = np.ones(key[0], a.dtype)
                ones.flags.writeable = False
            return np.dot(ones, a)
        if a.dtype in LOW_FLOATING:  # float32 accumulators, as PyTorch
            return np.add.reduce(a.astype(np.float32), axes, None, None, keepdims).astype(a.dtype)
        return np.add.reduce(a, axes, None, None, keepdims)  # np.sum without its wrapper

    def spread(self, value: Any, like: Any, view: bool) -> Any:
        # a view for large gradients only: below SPREAD_MIN elements a filled copy costs
        # less than np.broadcast_to's few microseconds and is faster to read
        if view and like.size >= SPREAD_MIN:
            return np.broadcast_to(value, like.shape)
        r = np.empty(like.shape, value.dtype)
        r[...] = value
        return r

    def ones_like(self, a: Any) -> Any:
        if a.shape == ():  # a scalar loss: a copy of a cached 0-d one (np.ones_like: 1.5 µs)
            one = _ONES.get(a.dtype)
            if one is None:
                one = _ONES[a.dtype] = np.ones((), a.dtype)
            return one.copy()
        return np.ones(a.shape, a.dtype)

    def known_all_false(self, mask: Any) -> bool:
        return not _count_nonzero(mask)  # host memory: no sync to wait for

    def info(self) -> dict[str, Any]:
        import array_api_compat

        from ... import _openblas
        from . import _compiled, _memory

        out = {"numpy": np.__version__, "array_api_compat": array_api_compat.__version__}
        out["compiled"] = _compiled.describe()
        out["memory"] = _memory.state()
        out["blas spin"] = _openblas.state()
        return out


def register(backend: Backend) -> None:
    """Equip the NumPy backend object with its kernels."""
    from . import nn, random, rnn
    from .conv import NumpyConv2d
    from .optim import MultiTensorApply, NumpyGradNorm
    from .pool import NumpyPool2d

    backend.register_kernel("conv2d", NumpyConv2d())
    backend.register_kernel("pool2d", NumpyPool2d())
    backend.register_kernel("batch_norm", nn.NumpyBatchNorm())
    backend.register_kernel("layer_norm", nn.NumpyLayerNorm())
    backend.register_kernel("gelu", nn.NumpyGelu())
    backend.register_kernel("silu", nn.NumpySilu())
    backend.register_kernel("special", nn.NumpySpecial())
    backend.register_kernel("softmax", nn.NumpySoftmax())
    backend.register_kernel("cross_entropy", nn.NumpyCrossEntropy())
    backend.register_kernel("relu", nn.relu)
    backend.register_kernel("relu_backward", nn.relu_backward)
    backend.register_kernel("zero_where", nn.zero_where)
    backend.register_kernel("minmax_backward", nn.minmax_backward)
    backend.register_kernel("multi_tensor_apply", MultiTensorApply())
    backend.register_kernel("grad_norm", NumpyGradNorm())
    backend.register_kernel("philox", random.philox)
    backend.register_kernel("dropout", random.NumpyDropout())
    backend.register_kernel("lstm_cell", rnn.NumpyLstmCell())
    backend.register_kernel("gru_cell", rnn.NumpyGruCell())
