"""Synthetic datasets for examples and tests: xor, two spirals, sine regression.

Each draws from ``vtl.random.Generator(seed)``, so a seed gives the same data
on every backend, and returns a :class:`vtl.data.TensorDataset` of float32
inputs and targets on the default backend (or ``backend=``); class labels are
int64 (int32 on a device without int64).
"""

from __future__ import annotations

import math

import numpy as np

import vtl

from ..backends import resolve_device
from ..data.dataset import TensorDataset
from ._common import int_tensor

__all__ = ["sine", "two_spirals", "xor"]


def _gen(seed: int) -> vtl.random.Generator:
    return vtl.random.Generator(seed)


def _check_n(n: int, fname: str) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"{fname}(): n must be a positive int, got {n!r}")


def _noise(g: vtl.random.Generator, shape: tuple[int, ...], noise: float,
           fname: str) -> np.ndarray:
    if noise < 0:
        raise ValueError(f"{fname}(): noise must be >= 0, got {noise}")
    z = g.normal(0.0, 1.0, size=shape, backend="numpy").numpy()
    return (z * noise).astype(np.float32)


def xor(n: int = 200, noise: float = 0.1, seed: int = 0,
        backend: str | None = None) -> TensorDataset:
    """XOR: points around the four corners ``(+-1, +-1)`` plus Gaussian noise of std
    ``noise``; label ``1`` when the corner's coordinates have opposite signs.
    ``(x float32 (n, 2), y int64 (n,))``.

    Args:
        n: Number of samples.
        noise: Standard deviation of the Gaussian noise.
        seed: Seed of the draws.
        backend: Backend of the tensors (default: the default backend).

    Returns:
        A :class:`vtl.data.TensorDataset` ``(x, y)``.
    """
    _check_n(n, "xor")
    g = _gen(seed)
    corners = g.randint(0, 4, size=(n,), backend="numpy").numpy()
    a = (corners & 1).astype(np.float32) * 2 - 1
    b = ((corners >> 1) & 1).astype(np.float32) * 2 - 1
    x = np.stack([a, b], axis=1) + _noise(g, (n, 2), noise, "xor")
    y = (a != b).astype(np.int64)
    dev = resolve_device(None, backend)
    return TensorDataset(vtl.asarray(x, device=dev), int_tensor(y, dev))


def two_spirals(n: int = 200, noise: float = 0.1, seed: int = 0,
                backend: str | None = None) -> TensorDataset:
    """Two interleaved spirals (``n // 2`` points each, class 0 first), radius up
    to 1 over 1.5 turns, plus Gaussian noise. ``(x float32 (n, 2), y int64 (n,))``.

    Args:
        n: Number of samples.
        noise: Standard deviation of the Gaussian noise.
        seed: Seed of the draws.
        backend: Backend of the tensors (default: the default backend).

    Returns:
        A :class:`vtl.data.TensorDataset` ``(x, y)``.
    """
    _check_n(n, "two_spirals")
    g = _gen(seed)
    n0 = n // 2
    t = g.uniform(size=(n,), backend="numpy").numpy().astype(np.float64)
    theta = t * 3 * math.pi
    r = 0.1 + 0.9 * t
    cls = (np.arange(n) >= n0).astype(np.int64)
    sign = np.where(cls == 0, 1.0, -1.0)
    x = np.stack([sign * r * np.cos(theta), sign * r * np.sin(theta)], axis=1)
    x = x.astype(np.float32) + _noise(g, (n, 2), noise, "two_spirals")
    dev = resolve_device(None, backend)
    return TensorDataset(vtl.asarray(x, device=dev), int_tensor(cls, dev))


def sine(n: int = 200, noise: float = 0.1, seed: int = 0,
         backend: str | None = None) -> TensorDataset:
    """Regression: ``x`` uniform in ``[-pi, pi)``, ``y = sin(x) + noise * N(0, 1)``;
    ``(x float32 (n, 1), y float32 (n, 1))``.

    Args:
        n: Number of samples.
        noise: Standard deviation of the Gaussian noise.
        seed: Seed of the draws.
        backend: Backend of the tensors (default: the default backend).

    Returns:
        A :class:`vtl.data.TensorDataset` ``(x, y)``.
    """
    _check_n(n, "sine")
    g = _gen(seed)
    x = g.uniform(-math.pi, math.pi, size=(n, 1), backend="numpy").numpy().astype(np.float32)
    y = np.sin(x) + _noise(g, (n, 1), noise, "sine")
    dev = resolve_device(None, backend)
    return TensorDataset(vtl.asarray(x, device=dev), vtl.asarray(y, device=dev))
