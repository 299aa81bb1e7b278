"""PyTorch's top-level names beside the array API's (extensions the standard allows), each a
thin call of a vtl function: ``vtl.tensor``, ``vtl.from_numpy``, ``vtl.rand``/``randn``/
``randint``, ``vtl.manual_seed``, ``vtl.cat``, ``vtl.clamp``, ``vtl.flatten``,
``vtl.cumsum``/``cumprod``, ``vtl.set_num_threads``/``get_num_threads``.
``vtl.inference_mode`` lives with the other grad modes (``vtl.autograd.grad_mode``)."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

from ._tensor import Tensor

__all__ = ["cat", "clamp", "cumprod", "cumsum", "flatten", "from_numpy", "get_num_threads",
           "manual_seed", "rand", "randint", "randn", "set_num_threads", "tensor"]


def _vtl() -> Any:
    import vtl

    return vtl


def _size(size: tuple[Any, ...], fname: str) -> tuple[int, ...]:
    """``rand(2, 3)`` and ``rand((2, 3))`` alike."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    try:
        return tuple(operator.index(s) for s in size)
    except TypeError:
        raise TypeError(f"{fname}(): sizes must be ints, got {size!r}") from None


def _finish(t: Tensor, requires_grad: bool) -> Tensor:
    return t.requires_grad_(True) if requires_grad else t


def tensor(data: Any, *, dtype: Any = None, device: Any = None,
           requires_grad: bool = False) -> Tensor:
    """PyTorch's ``torch.tensor``: always a copy of ``data`` (``vtl.asarray(data,
    copy=True)``; Python floats become float32, ints int64).

    Args:
        data: The data: a scalar, a nested sequence or an array.
        dtype: dtype of the tensor (default: as for ``asarray``).
        device: Device of the result (default: the default device).
        requires_grad: Whether the result requires a gradient.

    Returns:
        A new tensor.
    """
    return _vtl().asarray(data, dtype=dtype, device=device, copy=True,
                          requires_grad=requires_grad)


def from_numpy(array: Any) -> Tensor:
    """A numpy-backend tensor sharing ``array``'s memory (PyTorch's ``torch.from_numpy``).

    Args:
        array: A NumPy array.

    Returns:
        A tensor on the numpy backend, sharing the memory.

    Raises:
        TypeError: If ``array`` is not a ``numpy.ndarray``.
    """
    import numpy as np

    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy() expected a numpy.ndarray, got {type(array).__name__}")
    return _vtl().asarray(array, device="numpy", copy=False)


def manual_seed(seed: int) -> Any:
    """Seed ``vtl.random``'s default generator (PyTorch's ``torch.manual_seed``); returns it.

    Args:
        seed: The seed: an int in ``[0, 2**64)``.

    Returns:
        The default :class:`vtl.random.Generator`.
    """
    random = _vtl().random
    random.seed(seed)
    return random.default_generator()


def rand(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False,
         generator: Any = None) -> Tensor:
    """Uniform numbers in ``[0, 1)`` of shape ``size`` (``vtl.random.uniform``).

    Args:
        *size: The shape: ints, or one tuple.
        dtype: dtype of the result (default ``float32``).
        device: Device of the result (default: the default device).
        requires_grad: Whether the result requires a gradient.
        generator: A :class:`vtl.random.Generator` to draw from (default: ``vtl.random``'s default
            generator).

    Returns:
        A tensor of uniform numbers.
    """
    g = generator or _vtl().random.default_generator()
    return _finish(g.uniform(size=_size(size, "rand"), dtype=dtype, device=device),
                   requires_grad)


def randn(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False,
          generator: Any = None) -> Tensor:
    """Standard normal numbers of shape ``size`` (``vtl.random.normal``).

    Args:
        *size: The shape: ints, or one tuple.
        dtype: dtype of the result (default ``float32``).
        device: Device of the result (default: the default device).
        requires_grad: Whether the result requires a gradient.
        generator: A :class:`vtl.random.Generator` to draw from (default: ``vtl.random``'s default
            generator).

    Returns:
        A tensor of standard normal numbers.
    """
    g = generator or _vtl().random.default_generator()
    return _finish(g.normal(size=_size(size, "randn"), dtype=dtype, device=device),
                   requires_grad)


def randint(low: int, high: Any = None, size: Any = None, *, dtype: Any = None,
            device: Any = None, generator: Any = None) -> Tensor:
    """Integers in ``[low, high)``: ``randint(high, size)`` or ``randint(low, high, size)``
    as PyTorch (``size`` a tuple; int64 by default).

    Args:
        low: The lowest value (in the form ``randint(high, size)``, the exclusive upper bound).
        high: One above the highest value (in the form ``randint(high, size)``, the size).
        size: The shape, a tuple.
        dtype: dtype of the result (default ``int64``).
        device: Device of the result (default: the default device).
        generator: A :class:`vtl.random.Generator` to draw from (default: ``vtl.random``'s default
            generator).

    Returns:
        A tensor of random integers.

    Raises:
        TypeError: If no size is given.
    """
    if size is None:
        if not isinstance(high, (tuple, list)):
            raise TypeError("randint() needs a size: randint(high, size) or "
                            "randint(low, high, size)")
        low, high, size = 0, low, high
    g = generator or _vtl().random.default_generator()
    return g.randint(low, high, _size(tuple(size), "randint"), dtype=dtype, device=device)


def cat(tensors: Sequence[Tensor], dim: int = 0, *, axis: int | None = None) -> Tensor:
    """Join ``tensors`` along ``dim`` (``vtl.concat``).

    Args:
        tensors: The tensors (same shape but along ``dim``).
        dim: The dim to join along.
        axis: The array API's name for ``dim``.

    Returns:
        The joined tensor.
    """
    return _vtl().concat(tensors, axis=dim if axis is None else axis)


def cumsum(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:  # noqa: A002
    """Running sum along ``dim`` (``vtl.cumulative_sum``).

    Args:
        input: The input tensor.
        dim: The dim.
        dtype: dtype of the sums.

    Returns:
        The running sums.
    """
    return _vtl().cumulative_sum(input, axis=dim, dtype=dtype)


def cumprod(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:  # noqa: A002
    """Running product along ``dim`` (``vtl.cumulative_prod``).

    Args:
        input: The input tensor.
        dim: The dim.
        dtype: dtype of the products.

    Returns:
        The running products.
    """
    return _vtl().cumulative_prod(input, axis=dim, dtype=dtype)


def clamp(input: Tensor, min: Any = None, max: Any = None) -> Tensor:  # noqa: A001, A002
    """Limit the values to ``[min, max]`` (``vtl.clip``).

    Args:
        input: The input tensor.
        min: Lower bound: a scalar, a tensor, or ``None``.
        max: Upper bound: a scalar, a tensor, or ``None``.

    Returns:
        The clamped tensor.
    """
    return _vtl().clip(input, min=min, max=max)


def flatten(input: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:  # noqa: A002
    """Merge axes ``start_dim..end_dim`` into one (``Tensor.flatten``).

    Args:
        input: The input tensor.
        start_dim: First dim to merge.
        end_dim: Last dim to merge.

    Returns:
        The flattened tensor.
    """
    return input.flatten(start_dim, end_dim)


def set_num_threads(n: int) -> None:
    """Threads of the numpy backend's kernels (convolution, pooling, optimizer steps):
    at most ``n`` (PyTorch's ``torch.set_num_threads``; NumPy's BLAS keeps its own
    setting, e.g. ``OMP_NUM_THREADS``). Overrides ``VTL_NUM_THREADS``.

    Args:
        n: The number of threads.
    """
    from .backends._common import threads

    threads.set_limit(n)


def get_num_threads() -> int:
    """The threads the numpy backend's kernels use (see :func:`set_num_threads`).

    Returns:
        The number of threads.
    """
    from .backends._common import threads

    return threads.num_threads()
