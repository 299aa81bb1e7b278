"""Winograd F(4x4, 3x3) convolution for the NumPy backend's ``conv2d`` kernel, with its
tile transforms compiled by numba (the ``vtl[cpu]`` extra).

A 3x3 stride-1 convolution computes each 4x4 block of output from a 6x6 block of input
with 36 products per (input channel, output channel) pair instead of 144: for the
``P`` tiles of a group of images, the input tiles are transformed (``B^T d B``), multiplied
per transform point by the transformed weight (``G w G^T``) in 36 BLAS products of shape
``(P, C) @ (C, K)``, and transformed back (``A^T m A``). The backward pass is the exact
adjoint of those steps: the output gradient's tiles are transformed (``A dY A^T``), two
more sets of 36 products give the weight gradient's (with the transformed input tiles the
forward kept, about 2.25 times its input, up to ``conv.WINOGRAD_KEEP`` elements) and the
input tiles' transforms, and the adjoint input transform adds the overlapping tiles'
gradients into the input gradient.
The transforms run in channels-last order, vectorized over the channels.

The transform points are 0, ±1, ±2 and infinity (the usual F(4x4, 3x3) matrices); in
float32 the result differs from the im2col product by about ten times float32's rounding
of a 3x3 convolution (relative errors around 1e-5 of the output's scale). Set
:data:`ENABLED` to ``False`` (or ``VTL_WINOGRAD=0`` in the environment) for the im2col path;
``VTL_NUMBA=0`` turns off all of the backend's compiled kernels.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _compiled

__all__ = ["ENABLED", "MIN_CHANNELS", "available", "fits", "input_transform",
           "output_transform", "grad_transform", "input_adjoint", "weight_transform",
           "weight_gradient"]

#: Whether 3x3 stride-1 float convolutions take the Winograd path where numba is installed.
ENABLED = not _compiled.turned_off("VTL_WINOGRAD")

#: Fewest input and output channels for which the 36 products beat the im2col product
#: (with 3 input channels the products' inner dimension is too short to pay for the
#: transforms).
MIN_CHANNELS = 8

#: The transform matrices of F(4x4, 3x3) with the points 0, 1, -1, 2, -2 and infinity.
BT = np.array([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
               [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]], np.float64)
G = np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
              [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]], np.float64)
AT = np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0],
               [0, 1, -1, 8, -8, 1]], np.float64)

_kernels: Any = None  # the compiled module, loaded on first use


def available() -> bool:
    """Whether the compiled kernels run (numba installed: ``pip install 'vtl[cpu]'``)."""
    return _compiled.available()


def fits(x_shape: tuple[int, ...], w_shape: tuple[int, ...], dtype: Any, stride: tuple,
         padding: tuple, dilation: tuple, groups: int) -> bool:
    """Whether the convolution takes the Winograd path: enabled and numba installed, a
    float32/float64 3x3 kernel with stride 1, no dilation, one group, padding of at most 2
    on each side, at least :data:`MIN_CHANNELS` input and output channels, an output of at
    least 4x4."""
    if not (ENABLED and available()):
        return False
    o, cg, kh, kw = w_shape
    if (kh, kw) != (3, 3) or tuple(stride) != (1, 1) or tuple(dilation) != (1, 1):
        return False
    if groups != 1 or max(padding) > 2 or min(o, cg) < MIN_CHANNELS:
        return False
    if np.dtype(dtype) not in (np.float32, np.float64):
        return False
    pt, pb, pl, pr = padding
    return x_shape[2] + pt + pb - 2 >= 4 and x_shape[3] + pl + pr - 2 >= 4


def tiles(ho: int, wo: int) -> tuple[int, int]:
    """Rows and columns of 4x4 output tiles covering an ``ho`` x ``wo`` output."""
    return -(-ho // 4), -(-wo // 4)


def _k() -> Any:
    global _kernels
    if _kernels is None:
        from . import _winograd_kernels

        _kernels = _winograd_kernels
    return _kernels


def input_transform(x: Any, pt: int, pl: int, th: int, tw: int, v: Any) -> None:
    """``v`` (``(36, M*th*tw, C)``) = the transformed 6x6 input tiles of the ``M`` images
    ``x`` (``(M, C, H, W)``, C-contiguous), padded by ``pt`` rows and ``pl`` columns."""
    _k().input_transform(x, pt, pl, th, tw, v)


def output_transform(m: Any, bias: Any, out: Any) -> None:
    """``out`` (``(M, K, Ho, Wo)``, C-contiguous) = the output tiles of the products ``m``
    (``(36, M*th*tw, K)``) plus ``bias`` (``(K,)``, or ``None``)."""
    if bias is None:
        _k().output_transform(m, np.zeros(0, m.dtype), False, out)
    else:
        _k().output_transform(m, bias, True, out)


def grad_transform(g: Any, th: int, tw: int, dm: Any) -> None:
    """``dm`` (``(36, M*th*tw, K)``) = the transformed 4x4 tiles of the output gradient
    ``g`` (``(M, K, Ho, Wo)``, C-contiguous): the gradient of the products."""
    _k().grad_transform(g, th, tw, dm)


def input_adjoint(dv: Any, pt: int, pl: int, th: int, tw: int, dx: Any) -> None:
    """``dx`` (``(M, C, H, W)``, C-contiguous) = the input gradient from the gradient
    ``dv`` (``(36, M*th*tw, C)``) of the transformed input tiles."""
    _k().input_adjoint(dv, pt, pl, th, tw, dx)


#: ``G (x) G``: row ``6a + b``, column ``3i + j`` is ``G[a, i] * G[b, j]``.
GG = np.kron(G, G)


def weight_transform(w: Any) -> Any:
    """The ``(36, K, C)`` transformed weight ``G w G^T`` of the ``(K, C, 3, 3)`` weight:
    one product with ``G (x) G``."""
    k, c = w.shape[:2]
    return (GG.astype(w.dtype) @ w.reshape(k * c, 9).T).reshape(36, k, c)


def weight_gradient(du: Any) -> Any:
    """The ``(K, C, 3, 3)`` weight gradient ``G^T dU G`` of the transformed weight's
    gradient ``du`` (``(36, K, C)``): one product with ``(G (x) G)^T``."""
    k, c = du.shape[1:]
    d = GG.T.astype(du.dtype) @ du.reshape(36, k * c)  # (9, K*C)
    return np.ascontiguousarray(d.T).reshape(k, c, 3, 3)
