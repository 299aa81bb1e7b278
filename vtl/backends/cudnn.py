"""cuDNN settings of the cupy backend, under PyTorch's names (``torch.backends.cudnn``).

The cupy backend runs convolutions through cuDNN where ``nvidia-cudnn-frontend`` and the
cuDNN libraries are installed (``pip install 'vtl[cudnn]'``).

* :data:`benchmark` (default ``True``; the environment variable ``VTL_CUDNN_BENCHMARK=0``
  starts vtl with ``False``): on the first call of each convolution geometry (operation,
  shapes, dtype, padding, stride, dilation), time every cuDNN engine that qualifies and keep
  the fastest, as ``torch.backends.cudnn.benchmark = True`` does. With ``False``, the first
  engine of cuDNN's heuristics that builds serves. Either way only deterministic engines
  qualify (no atomics; float32 is never rounded to TF32 unless
  ``vtl.set_float32_matmul_precision`` allows it), so a process gets the same results on
  every call and compiled steps equal eager ones bit for bit. Between processes, timing
  may pick another engine for a geometry, whose results can differ in the last bits;
  set ``benchmark = False`` where runs must agree bit for bit. The setting applies to
  geometries first met after it is set (a geometry's engine, once chosen, stays for the
  process): set it before the first convolution. A geometry first met while
  ``vtl.compile`` captures a step is not timed (a capture may not wait for the device): it
  keeps the heuristics' engine, as does one whose timing fails.
"""

from __future__ import annotations

from .._switches import turned_off

__all__ = ["benchmark", "is_available", "version"]

#: time the qualifying engines of each convolution geometry once and keep the fastest
benchmark: bool = not turned_off("VTL_CUDNN_BENCHMARK")


def is_available() -> bool:
    """Whether the cupy backend can run convolutions through cuDNN.

    Returns:
        A bool.
    """
    return version() is not None


def version() -> int | None:
    """cuDNN's version number (for example ``91900``), or ``None`` where the cupy backend
    or cuDNN is unavailable.

    Returns:
        An int, or ``None``.
    """
    from . import get

    if not get("cupy").is_available:
        return None
    from .cupy.cudnn import load_cudnn

    cudnn, _ = load_cudnn()
    return None if cudnn is None else int(cudnn.backend_version())
