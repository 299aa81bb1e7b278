"""``kernel("pool2d")`` of the wgpu backend (the contract is ``Pool2dKernel`` in
``vtl.backends.kernels``): one dispatch per forward and per backward.

The kernels follow the CuPy backend's (``vtl/backends/cupy/pool.py``) step for step: max
forward walks
each window in row-major tap order and keeps the first maximal element or the first nan
(padding reads ``-inf``), writing the value and the tap number; the backward passes are
gathers, a thread per input element summing the gradients of the windows that hold it
(max: those that chose it), in tap order, so no atomics; average pooling divides by
PyTorch's divisors, computed in the kernel (``wgsl/nn/pool_max.wgsl``, ``pool_max_grad.wgsl``,
``pool_avg.wgsl``). The max-pooling kernels have the geometry compiled in (a pipeline per
image size, window, stride, padding and dilation), so that their index arithmetic has no
divisions by sizes only known at run time.
"""

from __future__ import annotations

from typing import Any

from . import _dtypes as D
from ._array import contiguous, empty
from ._kernels import compute_kernel
from ._recorder import REC, groups_for

_FLOATS = (D.float32, D.float64, D.float16, D.bfloat16)


def _words(total: int, x_shape: tuple[int, ...], k: tuple[int, int], s: tuple[int, int],
           p: tuple[int, int], d: tuple[int, int], out: tuple[int, int]) -> list[int]:
    _, c, h, w = x_shape
    return [total, c, h, w, k[0], k[1], out[0], out[1], s[0], s[1], p[0], p[1], d[0], d[1]]


def _geometry(words: list[int]) -> dict[str, str]:
    """The max-pooling kernels' compile-time geometry (their ``{{GEOMETRY}}``: constants
    ``H``, ``W``, ``KH`` ... ``DW``) from their words 2..13."""
    names = ("H", "W", "KH", "KW", "HO", "WO", "SH", "SW", "PH", "PW", "DH", "DW")
    return {"GEOMETRY": "\n".join(f"const {n} = {v}u;"
                                   for n, v in zip(names, words[2:14], strict=True))}


class WgpuPool2d:
    """max/avg pooling of float32/float64/float16/bfloat16 arrays, one kernel each way (the
    16-bit sums in float32, rounded once)."""

    def supports(self, dtype: Any) -> bool:
        return dtype in _FLOATS

    def max_forward(self, x: Any, k: tuple[int, int], s: tuple[int, int],
                    p: tuple[int, int], d: tuple[int, int], out: tuple[int, int]
                    ) -> tuple[Any, Any]:
        x = contiguous(x)
        y = empty((*x.shape[:2], *out), x.dtype)
        arg = empty(y.shape, D.int32)
        if y.size:
            words = _words(y.size, x.shape, k, s, p, d, out)
            REC.dispatch(compute_kernel("pool_max", "rww", x.dtype, **_geometry(words)),
                         (x._st.buf, y._st.buf, arg._st.buf), [*words, x._offset],
                         groups_for(y.size))
        return y, arg

    def max_backward(self, arg: Any, x_shape: tuple[int, ...], g: Any, k: tuple[int, int],
                     s: tuple[int, int], p: tuple[int, int], d: tuple[int, int]) -> Any:
        g, arg = contiguous(g), contiguous(arg)
        dx = empty(x_shape, g.dtype)
        if dx.size:
            words = _words(dx.size, x_shape, k, s, p, d, arg.shape[2:])
            REC.dispatch(compute_kernel("pool_max_grad", "rrw", g.dtype, **_geometry(words)),
                         (g._st.buf, arg._st.buf, dx._st.buf),
                         [*words, g._offset, arg._offset], groups_for(dx.size))
        return dx

    def _avg(self, src: Any, dst: Any, x_shape: tuple[int, ...], k: tuple[int, int],
             s: tuple[int, int], p: tuple[int, int], out: tuple[int, int], grad: int,
             count_include_pad: bool, divisor_override: int | None) -> Any:
        if dst.size:
            words = _words(dst.size, x_shape, k, s, p, (1, 1), out)
            words[12:14] = [int(bool(count_include_pad)), int(divisor_override or 0)]
            REC.dispatch(compute_kernel("pool_avg", "rw", src.dtype, GRAD=grad),
                         (src._st.buf, dst._st.buf), [*words, src._offset],
                         groups_for(dst.size))
        return dst

    def avg_forward(self, x: Any, k: tuple[int, int], s: tuple[int, int],
                    p: tuple[int, int], out: tuple[int, int], count_include_pad: bool,
                    divisor_override: int | None) -> Any:
        x = contiguous(x)
        y = empty((*x.shape[:2], *out), x.dtype)
        return self._avg(x, y, x.shape, k, s, p, out, 0, count_include_pad, divisor_override)

    def avg_backward(self, x_shape: tuple[int, ...], g: Any, k: tuple[int, int],
                     s: tuple[int, int], p: tuple[int, int], count_include_pad: bool,
                     divisor_override: int | None) -> Any:
        g = contiguous(g)
        dx = empty(x_shape, g.dtype)
        return self._avg(g, dx, x_shape, k, s, p, g.shape[2:], 1, count_include_pad,
                         divisor_override)
