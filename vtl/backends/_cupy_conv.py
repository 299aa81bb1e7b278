"""conv2d on CuPy: the strided kernel of ``_numpy_conv`` with im2col and col2im as one
``ElementwiseKernel`` launch each (instead of ``kh*kw`` slice copies/adds and a padded
copy of the input).

* im2col: a thread per ``(n, c, tap, output pixel)`` writes its patch element, reading
  the input by index arithmetic (zero outside it, so no padded copy);
* col2im: a thread per input element sums the patch gradients of the taps that read it
  (gather form: no atomics, no zero fill), in the tap order of the NumPy kernel.

The kernels are described by parameter lists and a C++ body (:func:`im2col_spec`,
:func:`col2im_spec`), so the bodies can also be compiled and checked on the host.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._numpy_conv import StridedConv2d

__all__ = ["CupyConv2d", "col2im_spec", "im2col_spec"]

_CTYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}
_GEOM = ["int64 C", "int64 H", "int64 W", "int64 G", "int64 KH", "int64 KW", "int64 HO",
         "int64 WO", "int64 SH", "int64 SW", "int64 PT", "int64 PL", "int64 DH", "int64 DW",
         "int64 KR"]


def im2col_spec(dtype: Any) -> tuple[list[str], list[str], str]:
    """``(inputs, outputs, body)``: ``i`` runs over ``N*C*KH*KW*HO*WO``; ``x`` is the
    C-contiguous ``(N, C, H, W)`` input, ``col`` the ``(N, G, KR, HO*WO)`` patches."""
    dt = np.dtype(dtype)
    t = _CTYPES[dt]
    body = (
        "const ptrdiff_t wo = (ptrdiff_t)i % WO; ptrdiff_t t = (ptrdiff_t)i / WO;\n"
        "const ptrdiff_t ho = t % HO; t /= HO;\n"
        "const ptrdiff_t b = t % KW; t /= KW;\n"
        "const ptrdiff_t a = t % KH; t /= KH;\n"
        "const ptrdiff_t c = t % C; const ptrdiff_t n = t / C;\n"
        "const ptrdiff_t cg = C / G; const ptrdiff_t g = c / cg; const ptrdiff_t ci = c - g * cg;\n"
        "const ptrdiff_t r = ho * SH + a * DH - PT; const ptrdiff_t q = wo * SW + b * DW - PL;\n"
        f"{t} v = 0;\n"
        "if (r >= 0 && r < H && q >= 0 && q < W) v = x[((n * C + c) * H + r) * W + q];\n"
        "col[((n * G + g) * KR + (ci * KH + a) * KW + b) * (HO * WO) + ho * WO + wo] = v;\n"
    )
    return [f"raw {dt.name} x", *_GEOM], [f"raw {dt.name} col"], body


def col2im_spec(dtype: Any) -> tuple[list[str], list[str], str]:
    """``(inputs, outputs, body)``: ``i`` runs over the ``N*C*H*W`` input gradient
    ``dx``; ``dcol`` is the C-contiguous ``(N, G, KR, HO*WO)`` patch gradient."""
    dt = np.dtype(dtype)
    t = _CTYPES[dt]
    body = (
        "const ptrdiff_t q = (ptrdiff_t)i % W; ptrdiff_t t = (ptrdiff_t)i / W;\n"
        "const ptrdiff_t r = t % H; t /= H;\n"
        "const ptrdiff_t c = t % C; const ptrdiff_t n = t / C;\n"
        "const ptrdiff_t cg = C / G; const ptrdiff_t g = c / cg; const ptrdiff_t ci = c - g * cg;\n"
        f"{t} acc = 0;\n"
        "for (ptrdiff_t a = 0; a < KH; ++a) {\n"
        "  const ptrdiff_t u = r + PT - a * DH;\n"
        "  if (u < 0 || u % SH != 0 || u / SH >= HO) continue;\n"
        "  const ptrdiff_t ho = u / SH;\n"
        "  for (ptrdiff_t b = 0; b < KW; ++b) {\n"
        "    const ptrdiff_t v = q + PL - b * DW;\n"
        "    if (v < 0 || v % SW != 0 || v / SW >= WO) continue;\n"
        "    acc += dcol[((n * G + g) * KR + (ci * KH + a) * KW + b) * (HO * WO)"
        " + ho * WO + v / SW];\n"
        "  }\n"
        "}\n"
        "dx[i] = acc;\n"
    )
    return [f"raw {dt.name} dcol", *_GEOM], [f"raw {dt.name} dx"], body


def geometry_args(x_shape: tuple[int, ...], geom: tuple, rows: int) -> list[int]:
    """The ``int64`` arguments of both kernels, in :data:`_GEOM` order."""
    stride, (pt, _, pl, _), dilation, groups, kh, kw, ho, wo = geom
    _, c, h, w = x_shape
    return [c, h, w, groups, kh, kw, ho, wo, stride[0], stride[1], pt, pl, dilation[0],
            dilation[1], rows]


class CupyConv2d(StridedConv2d):
    """``kernels["conv2d"]`` of the CuPy backend (see ``StridedConv2d``)."""

    def __init__(self, cupy: Any) -> None:
        super().__init__(cupy)
        self._kernels: dict[tuple, Any] = {}

    def _get(self, spec: Any, dtype: Any) -> Any:
        key = (spec.__name__, np.dtype(dtype))
        kern = self._kernels.get(key)
        if kern is None:
            ins, outs, body = spec(dtype)
            kern = self._kernels[key] = self.m.ElementwiseKernel(
                ", ".join(ins), ", ".join(outs), body, f"vtl_{spec.__name__}_{key[1].name}")
        return kern

    def forward(self, x: Any, w: Any, b: Any, stride: tuple[int, int],
                padding: tuple[int, int, int, int], dilation: tuple[int, int],
                groups: int) -> tuple[Any, Any]:
        with x.device:
            return super().forward(x, w, b, stride, padding, dilation, groups)

    def backward(self, col: Any, x_shape: tuple[int, ...], w: Any, g: Any,
                 stride: tuple[int, int], padding: tuple[int, int, int, int],
                 dilation: tuple[int, int], groups: int, need_x: bool, need_w: bool,
                 need_b: bool) -> tuple[Any, Any, Any]:
        with g.device:
            return super().backward(col, x_shape, w, g, stride, padding, dilation, groups,
                                    need_x, need_w, need_b)

    def _im2col(self, x: Any, col: Any, geom: tuple) -> None:
        x = self.m.ascontiguousarray(x)
        n, c = x.shape[:2]
        _, _, _, _, kh, kw, ho, wo = geom
        self._get(im2col_spec, x.dtype)(x, *geometry_args(x.shape, geom, col.shape[2]), col,
                                        size=n * c * kh * kw * ho * wo)

    def _col2im(self, dcol: Any, x_shape: tuple[int, ...], geom: tuple) -> Any:
        dcol = self.m.ascontiguousarray(dcol)
        dx = self.m.empty(x_shape, dtype=dcol.dtype)
        self._get(col2im_spec, dcol.dtype)(dcol, *geometry_args(x_shape, geom, dcol.shape[2]),
                                           dx, size=dx.size)
        return dx
