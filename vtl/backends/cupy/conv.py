"""``kernel("conv2d")`` of the CuPy backend: the strided kernel of
``vtl.backends._common.conv`` with im2col and col2im as one ``ElementwiseKernel`` launch
each (instead of ``kh*kw`` slice copies/adds and a padded copy of the input).

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

from .._common.conv import StridedConv2d, out_size
from ._codegen import CTYPES, SpecKernels, fold, narrow
from ._codegen import needs_wide_index as _wide

__all__ = ["CupyConv2d", "bias_transpose_spec", "col2im_spec", "im2col_spec"]

_GEOM = ["int64 C", "int64 H", "int64 W", "int64 G", "int64 KH", "int64 KW", "int64 HO",
         "int64 WO", "int64 SH", "int64 SW", "int64 PT", "int64 PL", "int64 DH", "int64 DW",
         "int64 SN", "int64 SG", "int64 SR"]
_NSIZES = 14  # C ... DW: the sizes the index arithmetic divides by (then the patch strides)
_NARROWED = [p.split()[1] for p in _GEOM[:_NSIZES]]


def _geometry_head(it: str) -> str:
    """The narrowed :data:`_GEOM` sizes and the thread index ``ii`` (index type ``it``)."""
    return narrow("C H W G KH KW HO WO SH SW PT PL DH DW", it) + f"const {it} ii = ({it})i;\n"


def _group_of(it: str) -> str:
    """Group ``g`` of channel ``c`` and its index ``ci`` within the group."""
    return f"const {it} cg = C_ / G_; const {it} g = c / cg; const {it} ci = c - g * cg;\n"


def _patch(wo: str) -> str:
    """Element of patch row ``(ci, a, b)`` of image ``n``, group ``g``, at output pixel
    ``(ho, wo)`` in the patch buffer (strides ``SN``, ``SG``, ``SR``)."""
    return ("(ptrdiff_t)n * SN + (ptrdiff_t)g * SG + (ptrdiff_t)((ci * KH_ + a) * KW_ + b) * SR"
            f" + ho * WO_ + {wo}")


def im2col_spec(dtype: Any, wide: bool = False) -> tuple[list[str], list[str], str]:
    """``(inputs, outputs, body)``: ``i`` runs over ``N*C*KH*KW*HO*WO``; ``x`` is the
    C-contiguous ``(N, C, H, W)`` input; patch row ``k`` of image ``n`` and group ``g``
    starts at ``col[n*SN + g*SG + k*SR]`` (``(N, G, rows, HO*WO)`` or ``(rows, N*HO*WO)``).
    The index arithmetic is 32-bit (64-bit division is slow on GPUs) unless ``wide``."""
    dt = np.dtype(dtype)
    t = CTYPES[dt]
    it = "ptrdiff_t" if wide else "int"
    body = (
        _geometry_head(it)
        + f"const {it} wo = ii % WO_; {it} t = ii / WO_;\n"
        f"const {it} ho = t % HO_; t /= HO_;\n"
        f"const {it} b = t % KW_; t /= KW_;\n"
        f"const {it} a = t % KH_; t /= KH_;\n"
        f"const {it} c = t % C_; const {it} n = t / C_;\n"
        + _group_of(it)
        + f"const {it} r = ho * SH_ + a * DH_ - PT_; const {it} q = wo * SW_ + b * DW_ - PL_;\n"
        f"{t} v = 0;\n"
        "if (r >= 0 && r < H_ && q >= 0 && q < W_)"
        " v = x[(((ptrdiff_t)n * C + c) * H + r) * W + q];\n"
        f"col[{_patch('wo')}] = v;\n"
    )
    return [f"raw {dt.name} x", *_GEOM], [f"raw {dt.name} col"], body


def col2im_spec(dtype: Any, wide: bool = False) -> tuple[list[str], list[str], str]:
    """``(inputs, outputs, body)``: ``i`` runs over the ``N*C*H*W`` input gradient
    ``dx``; ``dcol`` is the patch gradient, laid out as ``col`` of :func:`im2col_spec`."""
    dt = np.dtype(dtype)
    t = CTYPES[dt]
    it = "ptrdiff_t" if wide else "int"
    body = (
        _geometry_head(it)
        + f"const {it} q = ii % W_; {it} t = ii / W_;\n"
        f"const {it} r = t % H_; t /= H_;\n"
        f"const {it} c = t % C_; const {it} n = t / C_;\n"
        + _group_of(it)
        + f"{t} acc = 0;\n"
        f"for ({it} a = 0; a < KH_; ++a) {{\n"
        f"  const {it} u = r + PT_ - a * DH_;\n"
        "  if (u < 0 || u % SH_ != 0 || u / SH_ >= HO_) continue;\n"
        f"  const {it} ho = u / SH_;\n"
        f"  for ({it} b = 0; b < KW_; ++b) {{\n"
        f"    const {it} v = q + PL_ - b * DW_;\n"
        "    if (v < 0 || v % SW_ != 0 || v / SW_ >= WO_) continue;\n"
        f"    acc += dcol[{_patch('v / SW_')}];\n"
        "  }\n"
        "}\n"
        "dx[i] = acc;\n"
    )
    return [f"raw {dt.name} dcol", *_GEOM], [f"raw {dt.name} dx"], body


def bias_transpose_spec(dtype: Any, wide: bool = False) -> tuple[list[str], list[str], str]:
    """``(inputs, outputs, body)``: ``i`` runs over the ``(N, O, HW)`` output; ``y`` is the
    ``(O, N*HW)`` product; ``bias[o]`` is added when ``HASB``."""
    dt = np.dtype(dtype)
    it = "ptrdiff_t" if wide else "int"
    body = (
        narrow("O NB HW", it)
        + f"const {it} ii = ({it})i;\n"
        f"const {it} p = ii % HW_; const {it} t = ii / HW_;\n"
        f"const {it} o = t % O_; const {it} n = t / O_;\n"
        f"{CTYPES[dt]} v = y[((ptrdiff_t)o * NB_ + n) * HW_ + p];\n"
        "if (HASB) v += bias[o];\n"
        "out[i] = v;\n"
    )
    return ([f"raw {dt.name} y", f"raw {dt.name} bias", "int64 O", "int64 NB", "int64 HW",
             "bool HASB"], [f"raw {dt.name} out"], body)


def geometry_args(x_shape: tuple[int, ...], geom: tuple, strides: tuple[int, int, int]
                  ) -> list[int]:
    """The ``int64`` arguments of both kernels, in :data:`_GEOM` order; ``strides`` are the
    patch buffer's element strides ``(SN, SG, SR)`` (image, group, patch row)."""
    stride, (pt, _, pl, _), dilation, groups, kh, kw, ho, wo = geom
    _, c, h, w = x_shape
    return [c, h, w, groups, kh, kw, ho, wo, stride[0], stride[1], pt, pl, dilation[0],
            dilation[1], *strides]


def _batched_strides(rows: int, groups: int, hw: int) -> tuple[int, int, int]:
    return (groups * rows * hw, rows * hw, hw)  # (N, G, rows, HO*WO)


def _gemm_strides(n: int, hw: int) -> tuple[int, int, int]:
    return (hw, 0, n * hw)  # (rows, N*HO*WO), one group


class CupyConv2d(StridedConv2d):
    """``kernels["conv2d"]`` of the CuPy backend (see ``StridedConv2d``).

    Without groups the patches of all images form one ``(C*kh*kw, N*HO*WO)`` matrix, so
    forward, weight gradient and patch gradient are one cuBLAS product each (the batched
    layout of the NumPy kernel costs a pointer-array kernel and copies per product), and one
    kernel turns the ``(O, N*HO*WO)`` product into NCHW while adding the bias: forward is 3
    launches, backward 5.
    """

    def __init__(self, cupy: Any, matmul: Any = None) -> None:
        super().__init__(cupy)
        self._specs = SpecKernels(cupy, "vtl_")
        self._mm = matmul or cupy.matmul  # products (the namespace's direct cuBLAS calls)

    def _product(self, a: Any, b: Any) -> Any:
        return self._mm(a, b)  # the namespace's matmul: direct cuBLAS, also when captured

    def _get(self, spec: Any, dtype: Any, wide: bool = False, consts: tuple | None = None
             ) -> Any:
        return self._specs.get(spec, dtype, wide, consts)

    def forward(self, x: Any, w: Any, b: Any, stride: tuple[int, int],
                padding: tuple[int, int, int, int], dilation: tuple[int, int],
                groups: int) -> tuple[Any, Any]:
        with x.device:
            return self.forward_on_device(x, w, b, stride, padding, dilation, groups)

    def backward(self, col: Any, x_shape: tuple[int, ...], w: Any, g: Any,
                 stride: tuple[int, int], padding: tuple[int, int, int, int],
                 dilation: tuple[int, int], groups: int, need_x: bool, need_w: bool,
                 need_b: bool) -> tuple[Any, Any, Any]:
        with g.device:
            return self.backward_on_device(col, x_shape, w, g, stride, padding, dilation,
                                           groups, need_x, need_w, need_b)

    def forward_on_device(self, x: Any, w: Any, b: Any, stride: tuple[int, int],
                          padding: tuple[int, int, int, int], dilation: tuple[int, int],
                          groups: int) -> tuple[Any, Any]:
        if groups != 1:
            return super().forward(x, w, b, stride, padding, dilation, groups)
        m = self.m
        n, c, h, wd = x.shape
        o, _, kh, kw = w.shape
        ho = out_size(h, kh, stride[0], padding[0], padding[1], dilation[0])
        wo = out_size(wd, kw, stride[1], padding[2], padding[3], dilation[1])
        k, hw = c * kh * kw, ho * wo
        col = m.empty((k, n * hw), dtype=x.dtype)
        geom = (stride, padding, dilation, 1, kh, kw, ho, wo)
        self._im2col_strided(x, col, geom, _gemm_strides(n, hw))
        y = self._mm(w.reshape(o, k), col)  # (O, N*HO*WO)
        out = m.empty((n, o, ho, wo), dtype=x.dtype)
        self._get(bias_transpose_spec, x.dtype, _wide(out.size),
                  fold(("O", "NB", "HW"), (o, n, hw), out.size))(
            y, y if b is None else b, o, n, hw, b is not None, out, size=out.size)
        return out, col

    def backward_on_device(self, col: Any, x_shape: tuple[int, ...], w: Any, g: Any,
                           stride: tuple[int, int], padding: tuple[int, int, int, int],
                           dilation: tuple[int, int], groups: int, need_x: bool,
                           need_w: bool, need_b: bool) -> tuple[Any, Any, Any]:
        if col is not None and col.ndim != 2 or groups != 1:
            return super().backward(col, x_shape, w, g, stride, padding, dilation, groups,
                                    need_x, need_w, need_b)
        m = self.m
        n = x_shape[0]
        o, c, kh, kw = w.shape
        ho, wo = g.shape[2:]
        k = c * kh * kw
        gm = m.ascontiguousarray(g.reshape(n, o, ho * wo).transpose(1, 0, 2)).reshape(o, -1)
        dx = dw = db = None
        if need_w:
            dw = self._mm(gm, col.T).reshape(o, c, kh, kw)  # (O, k)
        if need_b:
            db = gm.sum(axis=1)
        if need_x:
            dcol = self._mm(w.reshape(o, k).T, gm)  # (k, N*HO*WO)
            geom = (stride, padding, dilation, 1, kh, kw, ho, wo)
            dx = self._col2im_strided(dcol, x_shape, geom, _gemm_strides(n, ho * wo))
        return dx, dw, db

    def _im2col(self, x: Any, col: Any, geom: tuple) -> None:
        self._im2col_strided(x, col, geom, _batched_strides(col.shape[2], geom[3],
                                                            col.shape[3]))

    def _col2im(self, dcol: Any, x_shape: tuple[int, ...], geom: tuple) -> Any:
        dcol = self.m.ascontiguousarray(dcol)
        return self._col2im_strided(dcol, x_shape, geom, _batched_strides(
            dcol.shape[2], geom[3], dcol.shape[3]))

    def _im2col_strided(self, x: Any, col: Any, geom: tuple, strides: tuple) -> None:
        x = self.m.ascontiguousarray(x)
        n, c = x.shape[:2]
        _, _, _, _, kh, kw, ho, wo = geom
        size = n * c * kh * kw * ho * wo
        args = geometry_args(x.shape, geom, strides)
        self._get(im2col_spec, x.dtype, _wide(size, x.size),
                  fold(_NARROWED, args[:_NSIZES], size))(x, *args, col, size=size)

    def _col2im_strided(self, dcol: Any, x_shape: tuple[int, ...], geom: tuple,
                        strides: tuple) -> Any:
        dx = self.m.empty(x_shape, dtype=dcol.dtype)
        args = geometry_args(x_shape, geom, strides)
        self._get(col2im_spec, dcol.dtype, _wide(dx.size, dcol.size),
                  fold(_NARROWED, args[:_NSIZES], dx.size))(dcol, *args, dx, size=dx.size)
        return dx
