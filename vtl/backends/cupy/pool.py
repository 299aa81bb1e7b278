"""``kernel("pool2d")`` of the CuPy backend, max/avg pooling: one ``ElementwiseKernel``
launch per forward and per backward.

* max forward: a thread per output element walks its window's taps in row-major order
  and keeps the first maximal element, or the first nan (padding taps passed over), as
  the strided kernel of ``vtl.backends._common.pool`` does; it writes the value and the tap
  number (``int32``);
* max backward: a thread per input element sums the output gradients of the windows
  whose chosen tap is that element (gather form: no atomics, no zero fill), in the tap
  order of the NumPy kernel;
* avg forward/backward: the same walks with window sums (zero padding) and PyTorch's
  divisors, computed in the kernel (``count_include_pad``, ``divisor_override``, windows
  that ``ceil_mode`` lets run past the padding).

float16 and bfloat16 arrays are read and written as 16-bit words and computed in float32
(``vtl_ld``/``vtl_st`` of ``cupy/nn.py``: maxima exact, sums rounded once); float32 and
float64 are computed in their own type.

Inputs and output gradients are read C-contiguous (a copy only when they are not).
Index arithmetic is 32-bit below 2**31 elements (64-bit division is slow on GPUs). The
kernels are described by parameter lists and a C++ body (``*_spec``), so the bodies
can also be compiled and checked on the host.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np

from .._common.pool import StridedPool2d
from ._codegen import CTYPES, SpecKernels, fold, narrow
from ._codegen import needs_wide_index as _wide
from .nn import FLOAT_NAMES, PRELUDE

__all__ = ["CupyPool2d", "avg_backward_spec", "avg_forward_spec", "max_backward_spec",
           "max_forward_spec"]

#: Geometry arguments of every kernel (``int64``), in this order.
_GEOM = ["int64 C", "int64 H", "int64 W", "int64 KH", "int64 KW", "int64 HO", "int64 WO",
         "int64 SH", "int64 SW", "int64 PH", "int64 PW", "int64 DH", "int64 DW"]
_NAMES = [p.split()[1] for p in _GEOM]
#: The avg kernels' options: count_include_pad (0/1) and divisor_override (0.0: none).
_AVG = ["int64 CIP", "float64 DIVO"]

_SIZES = re.compile(r"\b(C|H|W|KH|KW|HO|WO|SH|SW|PH|PW|DH|DW|CIP)\b")


def _indexed(body: str, wide: bool) -> str:
    """``body`` with its index arithmetic in ``idx_t``: 32-bit (64-bit division is slow on
    GPUs) unless ``wide``; the ``int64`` size parameters are narrowed once."""
    used = sorted(set(_SIZES.findall(body)))
    head = f"typedef {'ptrdiff_t' if wide else 'int'} idx_t;\n" + narrow(" ".join(used), "idx_t")
    return head + _SIZES.sub(r"\1_", body.replace("ptrdiff_t", "idx_t"))


# a thread per output element (n, c, ho, wo)
_OUT_INDEX = (
    "const ptrdiff_t wo = (ptrdiff_t)i % WO; ptrdiff_t t = (ptrdiff_t)i / WO;\n"
    "const ptrdiff_t ho = t % HO; const ptrdiff_t base = (t / HO) * H * W;\n"
)
# a thread per input element (n, c, r, q); the windows that hold it
_IN_INDEX = (
    "const ptrdiff_t q = (ptrdiff_t)i % W; ptrdiff_t t = (ptrdiff_t)i / W;\n"
    "const ptrdiff_t r = t % H; const ptrdiff_t obase = (t / H) * HO * WO;\n"
)
_IN_LOOP = (
    "for (ptrdiff_t a = 0; a < KH; ++a) {\n"
    "  const ptrdiff_t u = r + PH - a * DH;\n"
    "  if (u < 0 || u % SH != 0 || u / SH >= HO) continue;\n"
    "  const ptrdiff_t ho = u / SH;\n"
    "  for (ptrdiff_t b = 0; b < KW; ++b) {\n"
    "    const ptrdiff_t v = q + PW - b * DW;\n"
    "    if (v < 0 || v % SW != 0 || v / SW >= WO) continue;\n"
    "    const ptrdiff_t o = obase + ho * WO + v / SW;\n"
)
# PyTorch's divisor of the window of output (ho, wo)
_DIVISOR = (
    "ptrdiff_t h0 = ho * SH - PH; ptrdiff_t h1 = h0 + KH < H + PH ? h0 + KH : H + PH;\n"
    "ptrdiff_t w0 = wo * SW - PW; ptrdiff_t w1 = w0 + KW < W + PW ? w0 + KW : W + PW;\n"
    "double div = (double)((h1 - h0) * (w1 - w0));\n"
    "if (!CIP) {\n"
    "  h0 = h0 > 0 ? h0 : 0; h1 = h1 < H ? h1 : H; w0 = w0 > 0 ? w0 : 0; w1 = w1 < W ? w1 : W;\n"
    "  const ptrdiff_t hh = h1 - h0 > 1 ? h1 - h0 : 1;\n"
    "  const ptrdiff_t ww = w1 - w0 > 1 ? w1 - w0 : 1;\n"
    "  div = (double)(hh * ww);\n"
    "}\n"
    "if (DIVO != 0) div = DIVO;\n"
)


def _float(dtype: Any) -> tuple[str, str, Callable[[str], str], Callable[[str], str]]:
    """``(parameter type, compute type, load, store)`` of the arrays of ``dtype``: float32
    and float64 as themselves; float16 and bfloat16 as ``uint16`` words, loaded into
    float32 and stored rounded (``PRELUDE``'s conversions)."""
    dt = np.dtype(dtype)
    if dt in CTYPES:
        return dt.name, CTYPES[dt], (lambda e: e), (lambda e: e)
    name = FLOAT_NAMES[dt]
    return ("uint16", "float", (lambda e: f"vtl_{name}_to_float({e})"),
            (lambda e: f"vtl_float_to_{name}({e})"))


def max_forward_spec(dtype: Any, wide: bool = False) -> tuple[list[str], list[str], str]:
    """``(inputs, outputs, body)``: ``i`` runs over the ``N*C*HO*WO`` outputs ``y`` and
    ``arg`` (``int32`` tap numbers); ``x`` is the C-contiguous ``(N, C, H, W)`` input.
    Padding taps are passed over (a window of ``-inf`` gives its first input tap)."""
    pt, t, ld, st = _float(dtype)
    body = _OUT_INDEX + (
        f"{t} best = 0; int bi = 0; bool isnan_best = false; bool seen = false;\n"
        "for (ptrdiff_t a = 0; a < KH; ++a) {\n"
        "  const ptrdiff_t r = ho * SH - PH + a * DH;\n"
        "  for (ptrdiff_t b = 0; b < KW; ++b) {\n"
        "    const ptrdiff_t q = wo * SW - PW + b * DW;\n"
        "    if (r < 0 || r >= H || q < 0 || q >= W) continue;\n"
        f"    const {t} v = {ld('x[base + r * W + q]')};\n"
        "    if (!seen || (!isnan_best && (v > best || v != v))) {\n"
        "      best = v; bi = (int)(a * KW + b); isnan_best = v != v; seen = true;\n"
        "    }\n"
        "  }\n"
        "}\n"
        f"y[i] = {st('best')}; arg[i] = bi;\n"
    )
    return [f"raw {pt} x", *_GEOM], [f"raw {pt} y", "raw int32 arg"], _indexed(body, wide)


def max_backward_spec(dtype: Any, wide: bool = False) -> tuple[list[str], list[str], str]:
    """``(inputs, outputs, body)``: ``i`` runs over the ``N*C*H*W`` input gradient ``dx``;
    ``g`` (C-contiguous) and ``arg`` are ``(N, C, HO, WO)``."""
    pt, t, ld, st = _float(dtype)
    body = _IN_INDEX + f"{t} acc = 0;\n" + _IN_LOOP + (
        f"    if (arg[o] == a * KW + b) acc += {ld('g[o]')};\n"
        "  }\n"
        "}\n"
        f"dx[i] = {st('acc')};\n"
    )
    return [f"raw {pt} g", "raw int32 arg", *_GEOM], [f"raw {pt} dx"], _indexed(body, wide)


def avg_forward_spec(dtype: Any, wide: bool = False) -> tuple[list[str], list[str], str]:
    """``(inputs, outputs, body)``: ``i`` runs over the ``N*C*HO*WO`` outputs ``y``."""
    pt, t, ld, st = _float(dtype)
    body = _OUT_INDEX + (
        f"{t} acc = 0;\n"
        "for (ptrdiff_t a = 0; a < KH; ++a) {\n"
        "  const ptrdiff_t r = ho * SH - PH + a;\n"
        "  for (ptrdiff_t b = 0; b < KW; ++b) {\n"
        "    const ptrdiff_t q = wo * SW - PW + b;\n"
        f"    const {t} v = (r >= 0 && r < H && q >= 0 && q < W) ? {ld('x[base + r * W + q]')}"
        f" : ({t})0;\n"
        "    acc = (a == 0 && b == 0) ? v : acc + v;\n"
        "  }\n"
        "}\n"
    ) + _DIVISOR + f"y[i] = {st(f'acc / ({t})div')};\n"
    return [f"raw {pt} x", *_GEOM, *_AVG], [f"raw {pt} y"], _indexed(body, wide)


def avg_backward_spec(dtype: Any, wide: bool = False) -> tuple[list[str], list[str], str]:
    """``(inputs, outputs, body)``: ``i`` runs over the ``N*C*H*W`` input gradient ``dx``;
    ``g`` is the C-contiguous ``(N, C, HO, WO)`` output gradient."""
    pt, t, ld, st = _float(dtype)
    body = _IN_INDEX + f"{t} acc = 0;\n" + _IN_LOOP + (
        "    const ptrdiff_t wo = v / SW;\n"
        + "".join("    " + line + "\n" for line in _DIVISOR.splitlines())
        + f"    acc += {ld('g[o]')} / ({t})div;\n"
        "  }\n"
        "}\n"
        f"dx[i] = {st('acc')};\n"
    )
    return [f"raw {pt} g", *_GEOM, *_AVG], [f"raw {pt} dx"], _indexed(body, wide)


def _words(a: Any) -> Any:
    """``a`` as the kernels read it: its 16-bit words (``uint16``) for float16/bfloat16."""
    return a if a.dtype in CTYPES else a.view(np.uint16)


def geometry_args(x_shape: tuple[int, ...], k: tuple[int, int], s: tuple[int, int],
                  p: tuple[int, int], d: tuple[int, int], out: tuple[int, int]) -> list[int]:
    """The ``int64`` geometry arguments, in :data:`_GEOM` order."""
    _, c, h, w = x_shape
    return [c, h, w, k[0], k[1], out[0], out[1], s[0], s[1], p[0], p[1], d[0], d[1]]


class CupyPool2d(StridedPool2d):
    """``kernels["pool2d"]`` of the CuPy backend (see ``StridedPool2d``): float32, float64,
    float16 and bfloat16."""

    def __init__(self, cupy: Any) -> None:
        super().__init__(cupy)
        self._specs = SpecKernels(cupy, "vtl_pool_", low_preamble=PRELUDE)
        self._dtypes = (*self._dtypes, *(dt for dt in FLOAT_NAMES if dt not in CTYPES))

    def _on(self, a: Any) -> Any:
        """The context that makes ``a``'s device current (kernels launch there)."""
        return a.device

    def _get(self, spec: Any, dtype: Any, wide: bool, args: list[int], size: int) -> Any:
        """The kernel of ``spec``; compiled for the geometry ``args`` (:data:`_GEOM` order)
        from ``FOLD_MIN`` threads (``size``)."""
        return self._specs.get(spec, dtype, wide, fold(_NAMES, args, size))

    def max_forward(self, x: Any, k: tuple[int, int], s: tuple[int, int],
                    p: tuple[int, int], d: tuple[int, int], out: tuple[int, int]
                    ) -> tuple[Any, Any]:
        m = self.m
        with self._on(x):
            x = m.ascontiguousarray(x)
            y = m.empty((*x.shape[:2], *out), dtype=x.dtype)
            arg = m.empty(y.shape, dtype=np.int32)
            args = geometry_args(x.shape, k, s, p, d, out)
            self._get(max_forward_spec, x.dtype, _wide(x.size, y.size), args, y.size)(
                _words(x), *args, _words(y), arg, size=y.size)
        return y, arg

    def max_backward(self, arg: Any, x_shape: tuple[int, ...], g: Any, k: tuple[int, int],
                     s: tuple[int, int], p: tuple[int, int], d: tuple[int, int]) -> Any:
        m = self.m
        with self._on(g):
            g = m.ascontiguousarray(g)
            dx = m.empty(x_shape, dtype=g.dtype)
            args = geometry_args(x_shape, k, s, p, d, arg.shape[2:])
            self._get(max_backward_spec, g.dtype, _wide(dx.size, g.size), args, dx.size)(
                _words(g), arg, *args, _words(dx), size=dx.size)
        return dx

    def avg_forward(self, x: Any, k: tuple[int, int], s: tuple[int, int],
                    p: tuple[int, int], out: tuple[int, int], count_include_pad: bool,
                    divisor_override: int | None) -> Any:
        m = self.m
        with self._on(x):
            x = m.ascontiguousarray(x)
            y = m.empty((*x.shape[:2], *out), dtype=x.dtype)
            args = geometry_args(x.shape, k, s, p, (1, 1), out)
            self._get(avg_forward_spec, x.dtype, _wide(x.size, y.size), args, y.size)(
                _words(x), *args, int(bool(count_include_pad)), float(divisor_override or 0),
                _words(y), size=y.size)
        return y

    def avg_backward(self, x_shape: tuple[int, ...], g: Any, k: tuple[int, int],
                     s: tuple[int, int], p: tuple[int, int], count_include_pad: bool,
                     divisor_override: int | None) -> Any:
        m = self.m
        with self._on(g):
            g = m.ascontiguousarray(g)
            dx = m.empty(x_shape, dtype=g.dtype)
            args = geometry_args(x_shape, k, s, p, (1, 1), g.shape[2:])
            self._get(avg_backward_spec, g.dtype, _wide(dx.size, g.size), args, dx.size)(
                _words(g), *args, int(bool(count_include_pad)), float(divisor_override or 0),
                _words(dx), size=dx.size)
        return dx
