"""``set_float32_matmul_precision``: PyTorch's switch for reduced-precision float32 products.

The setting is process-wide (as in PyTorch). Backends read it with
:func:`float32_matmul_precision` when they run a float32 product:

* cupy: ``"high"`` and ``"medium"`` let cuBLAS use TF32 tensor cores for float32 matrix
  products (``matmul``, ``linear``, the products of convolutions and recurrent layers that
  go through vtl's cuBLAS calls): 10 explicit mantissa bits per operand, float32
  accumulation, as PyTorch's ``allow_tf32`` on CUDA. CuPy's own kernels (e.g. a
  ``tensordot`` that does not reach ``matmul``) are not affected.
* numpy and wgpu: the setting is recorded and has no effect (their float32 products are
  always computed in float32).
"""

from __future__ import annotations

__all__ = ["get_float32_matmul_precision", "set_float32_matmul_precision"]

_PRECISIONS = ("highest", "high", "medium")
_current = "highest"


def set_float32_matmul_precision(precision: str) -> None:
    """Set the internal precision of float32 matrix products: ``"highest"`` (default: full
    float32), ``"high"`` or ``"medium"`` (TF32 tensor cores on the cupy backend; recorded
    without effect on numpy and wgpu). PyTorch's ``torch.set_float32_matmul_precision``."""
    global _current
    if not isinstance(precision, str) or precision not in _PRECISIONS:
        raise ValueError(f"set_float32_matmul_precision(): precision must be one of "
                         f"{', '.join(map(repr, _PRECISIONS))}, got {precision!r}")
    _current = precision


def get_float32_matmul_precision() -> str:
    """The current float32 matrix-product precision (``"highest"``, ``"high"`` or
    ``"medium"``)."""
    return _current


def float32_matmul_precision() -> str:
    """What backends read (the same as :func:`get_float32_matmul_precision`)."""
    return _current
