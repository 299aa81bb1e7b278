"""``kernel("conv2d")`` of the wgpu backend (the contract is ``Conv2dKernel`` in
``vtl.backends.kernels``).

The patches of all images form one ``(N*HO*WO, C*kh*kw)`` matrix written by one kernel
(``wgsl/nn/conv_im2col.wgsl``), so the convolution is one batched product over the images
that writes NCHW directly (``images_product``; its epilogue adds the bias). Backward: the output
gradient in ``(N*HO*WO, O)`` order (one copy), the weight gradient and the bias gradient in
one product (``linear_grad_weight``), the patch gradient in another, and one kernel
(``wgsl/nn/conv_col2im.wgsl``) that sums each input pixel's taps: a gather, no atomics.
Grouped convolutions take the portable path. float16/bfloat16 products and tap sums
accumulate in float32 and round once.
"""

from __future__ import annotations

from typing import Any

from .._common.conv import out_size
from . import _dtypes as D
from . import _kernels, _runtime
from ._array import WgpuArray, contiguous, empty
from ._linalg import matmul2d
from ._manipulation import permute_dims, reshape
from ._recorder import REC, groups_for
from .nn import PRODUCT_FLOATS, images_product, linear, linear_grad_weight

_FLOATS = PRODUCT_FLOATS


def _words(total: int, k: int, x_shape: tuple[int, ...], geom: tuple, offset: int) -> list:
    (sh, sw), (pt, _, pl, _), (dh, dw), kh, kw, ho, wo = geom
    _, c, h, w = x_shape
    return [total, k, c, h, w, kh, kw, ho, wo, sh, sw, pt, pl, dh, dw, offset]


class WgpuConv2d:
    """conv2d without groups as one patch kernel and products (float32, float64, float16,
    bfloat16)."""

    def supports(self, dtype: Any) -> bool:
        return dtype in _FLOATS

    def forward(self, x: Any, w: Any, b: Any, stride: tuple[int, int],
                padding: tuple[int, int, int, int], dilation: tuple[int, int],
                groups: int) -> tuple[Any, Any] | None:
        if groups != 1 or type(x) is not WgpuArray or type(w) is not WgpuArray \
                or x.ndim != 4 or w.ndim != 4:
            return None
        n, c, h, wd = x.shape
        o, _, kh, kw = w.shape
        ho = out_size(h, kh, stride[0], padding[0], padding[1], dilation[0])
        wo = out_size(wd, kw, stride[1], padding[2], padding[3], dilation[1])
        k, m = c * kh * kw, n * ho * wo
        big = max(m * max(k, o), x.size) * D.itemsize(x.dtype) > _runtime.get().max_binding
        if big or min(k, m, o) <= 0:
            return None  # the kernels bind whole buffers (one binding's limit)
        x = contiguous(x)
        col = empty((m, k), x.dtype)
        kern = _kernels.kernel("conv_im2col", "rw", (x.dtype,), T=D.wgsl(x.dtype))
        geom = (stride, padding, dilation, kh, kw, ho, wo)
        REC.dispatch(kern, (x._st.buf, col._st.buf),
                     _words(m * k, k, x.shape, geom, x._offset), groups_for(m * k))
        w2 = reshape(contiguous(w), (o, k))
        out = images_product(w2, col, b, n)  # (N, O, HO*WO): NCHW, bias added
        if out is None:
            y = linear(col, w2, b)  # (N*HO*WO, O) + bias
            if y is None:
                return None
            out = contiguous(permute_dims(reshape(y, (n, ho * wo, o)), (0, 2, 1)))
        return reshape(out, (n, o, ho, wo)), col

    def backward(self, col: Any, x_shape: tuple[int, ...], w: Any, g: Any,
                 stride: tuple[int, int], padding: tuple[int, int, int, int],
                 dilation: tuple[int, int], groups: int, need_x: bool, need_w: bool,
                 need_b: bool) -> tuple[Any, Any, Any]:
        n = x_shape[0]
        o, c, kh, kw = w.shape
        ho, wo = g.shape[2:]
        k, m = c * kh * kw, n * ho * wo
        gm = reshape(contiguous(permute_dims(g, (0, 2, 3, 1))), (m, o))
        dx = dw = db = None
        if need_w or need_b:
            gw, db = linear_grad_weight(gm, col, need_b)  # (O, K) and (O,)
            dw = reshape(gw, (o, c, kh, kw)) if need_w else None
        if need_x:
            dcol = matmul2d(gm, reshape(contiguous(w), (o, k)))  # (N*HO*WO, K)
            dx = empty(x_shape, g.dtype)
            t = D.wgsl(g.dtype)
            kern = _kernels.kernel("conv_col2im", "rw", (g.dtype,), T=t, D=g.dtype.name,
                                   C="f32" if t == "f16" else t)
            geom = (stride, padding, dilation, kh, kw, ho, wo)
            REC.dispatch(kern, (dcol._st.buf, dx._st.buf),
                         _words(dx.size, k, x_shape, geom, dcol._offset), groups_for(dx.size))
        return dx, dw, db
