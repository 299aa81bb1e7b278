"""``vtl.autocast``: automatic mixed precision for a region of code, as ``torch.autocast``.

Inside ``with vtl.autocast(device_type, dtype):`` the ops on tensors of that backend
run in the dtypes of PyTorch's autocast lists:

* **low precision** (``dtype``, float16 by default; float64 inputs are left alone):
  ``matmul`` and the ``@`` operator, ``nn.functional.linear``, ``linear_relu``, ``bilinear``,
  ``conv1d/2d/3d``, ``conv_transpose1d/2d/3d``, ``scaled_dot_product_attention``, the RNN
  cells (``lstm_cell``, ``gru_cell``, ``rnn_tanh_cell``, ``rnn_relu_cell``) and the RNN/LSTM/GRU
  layers, ``prelu``. The modules that call them (``Linear``, ``Conv2d``,
  ``MultiheadAttention``, ``TransformerEncoderLayer`` ...) follow.
* **float32** (float16/bfloat16 inputs are cast up; the result is float32): ``exp``,
  ``expm1``, ``log``, ``log1p``, ``log2``, ``log10``, ``pow`` (and ``**``), ``reciprocal``,
  ``sinh``, ``cosh``, ``tan``, ``acos``, ``asin``, ``sum``, ``prod``, ``mean``,
  ``cumulative_sum``/``cumsum``, ``cumulative_prod``/``cumprod``, ``linalg.vector_norm``,
  ``linalg.matrix_norm``, ``softmax``, ``log_softmax``, ``softmin``, ``logsumexp``,
  ``softplus``, ``layer_norm``, ``group_norm``, ``rms_norm``, ``local_response_norm``,
  ``normalize``, ``cosine_similarity``, ``pairwise_distance``, ``cdist``, ``pdist``,
  ``interpolate`` and the ``upsample*`` functions, and every loss of ``nn.functional``
  (``cross_entropy``, ``nll_loss``, ``mse_loss``, ``l1_loss``, ``smooth_l1_loss``,
  ``huber_loss``, ``binary_cross_entropy(_with_logits)``, ``kl_div``, ``ctc_loss``, the
  margin losses ...).
* **float32 statistics, the input's dtype out**: ``batch_norm``, ``instance_norm`` (and
  the BatchNorm/InstanceNorm layers), as PyTorch runs them on a low-precision input.
* **widest input type**: every other op with several floating inputs promotes them as
  usual (``float16 + float32 -> float32``); single-input ops run in their input's dtype.

Casts are differentiable (``vtl.astype``), so backward runs in the dtypes the forward
chose and each parameter's gradient has the parameter's dtype. Casts of parameters are
cached until the outermost autocast region of the thread ends. Regions nest
(``autocast(enabled=False)`` turns it off inside) and are per thread.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from .. import _autocast
from .. import backends as _backends
from ..backends import _dtypes

__all__ = ["autocast", "get_autocast_dtype", "is_autocast_enabled"]

#: PyTorch's device names for vtl's backends
_ALIASES = {"cuda": "cupy", "cpu": "numpy"}


def _device_type(device_type: Any) -> str:
    if device_type is None:
        return _backends.get_backend()
    if not isinstance(device_type, str):
        raise TypeError(f"autocast(): device_type must be a backend name ('numpy', 'cupy', "
                        f"'wgpu') or None, got {type(device_type).__name__}")
    name = _ALIASES.get(device_type, device_type).split(":")[0]
    if name not in _backends.KNOWN_BACKENDS:
        raise ValueError(f"autocast(): unknown device_type {device_type!r}: expected one of "
                         f"{', '.join(sorted(_backends.KNOWN_BACKENDS))} (or 'cuda'/'cpu')")
    return name


class autocast:  # noqa: N801 - PyTorch's name
    """Run the ops of a region in mixed precision (see the module docstring for the lists).

    ``device_type``: the backend whose tensors autocast (``"numpy"``, ``"cupy"``,
    ``"wgpu"``; PyTorch's ``"cuda"``/``"cpu"`` name cupy/numpy; ``None``: the default
    backend). ``dtype``: ``vtl.float16`` (default) or ``vtl.bfloat16``; a device without
    it (a wgpu adapter lacking ``shader-f16``) raises ``TypeError`` when the region is
    entered. ``enabled=False`` turns autocast off in the region. ``cache_enabled`` is
    accepted for PyTorch compatibility (casts of parameters are always cached within
    the outermost region). Usable as a context manager or a decorator; per thread.

    Args:
        device_type: The backend whose tensors autocast (see above; ``None``: the default backend).
        dtype: ``vtl.float16`` (default) or ``vtl.bfloat16``.
        enabled: ``False`` turns autocast off in the region.
        cache_enabled: Accepted for PyTorch compatibility.

    Raises:
        TypeError: If ``device_type`` is not a string or ``None``, ``dtype`` is not float16 or
            bfloat16, or ``enabled`` is not a bool.
        ValueError: If ``device_type`` is unknown.
    """

    def __init__(self, device_type: str | None = None, dtype: Any = None,
                 enabled: bool = True, cache_enabled: bool | None = None) -> None:
        self.device = _device_type(device_type)
        dt = _dtypes.float16 if dtype is None else _dtypes.to_dtype(dtype)
        if dt not in _dtypes.LOW_FLOATING:
            raise TypeError(f"autocast(): dtype must be vtl.float16 or vtl.bfloat16, got {dt}")
        if not isinstance(enabled, bool):
            raise TypeError(f"autocast(): enabled must be a bool, got {enabled!r}")
        self.fast_dtype = dt
        self._enabled = enabled
        self._prev: list[Any] = []

    def __enter__(self) -> autocast:
        if self._enabled:
            b = _backends.get(self.device)
            if b.is_available:
                b.check_dtype(self.fast_dtype, 0)
        self._prev.append(_autocast.enter(self.device, self._enabled, self.fast_dtype))
        return self

    def __exit__(self, *exc: Any) -> None:
        _autocast.leave(self.device, self._enabled, self._prev.pop())

    def __call__(self, fn: Callable) -> Callable:
        """Use as a decorator: ``fn`` runs inside this autocast region."""
        @functools.wraps(fn)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            with autocast(self.device, self.fast_dtype, self._enabled):
                return fn(*args, **kwargs)

        return wrapped

    def __repr__(self) -> str:
        return (f"autocast(device_type={self.device!r}, dtype={self.fast_dtype}, "
                f"enabled={self._enabled})")


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether autocast is on for ``device_type`` (default backend if ``None``) in this
    thread.

    Args:
        device_type: A backend name (PyTorch's ``'cuda'``/``'cpu'`` name cupy/numpy), or ``None``
            for the default backend.

    Returns:
        A bool.
    """
    return _autocast.state(_device_type(device_type))[0]


def get_autocast_dtype(device_type: str | None = None) -> Any:
    """The low dtype autocast uses for ``device_type`` in this thread (``vtl.float16``
    when no region set one).

    Args:
        device_type: A backend name (PyTorch's ``'cuda'``/``'cpu'`` name cupy/numpy), or ``None``
            for the default backend.

    Returns:
        The dtype.
    """
    dt = _autocast.state(_device_type(device_type))[1]
    return _dtypes.float16 if dt is None else dt
