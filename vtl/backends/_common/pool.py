"""max/avg pooling by strided slices for array libraries with NumPy's indexing (NumPy, CuPy).

:class:`StridedPool2d` implements the raw-array ``pool2d`` kernel contract
(``Pool2dKernel`` in ``vtl.backends.kernels``) with the module it is
given; no index arrays are involved. Each of the ``kh*kw`` window taps is ONE
strided slice of the input (padded once with ``-inf`` or zeros when the windows
reach past an edge; not copied otherwise):

* max forward: a running maximum over the taps into a preallocated buffer, with
  the tap number of the chosen element (``arg``, ``(N, C, Ho, Wo)``). Taps run
  from the last to the first and a tap wins when it is ``>=`` the running
  maximum or nan, so the choice is the FIRST maximal element of the window in
  row-major tap order, or its first nan (NumPy's ``argmax``, PyTorch's rule for
  ties; nan propagates). The value is the chosen element itself (so the sign of
  a zero maximum is that element's);
* max backward: ``kh*kw`` masked strided adds ``dx[tap t] += g where arg == t``
  into a zero buffer (no index arrays, no bincount);
* avg forward: ``kh*kw`` strided adds, divided by PyTorch's divisors
  (:func:`avg_divisors`); avg backward: ``kh*kw`` strided adds of ``g / divisor``.

A subclass whose ``_threads`` returns more than one thread splits the work (blocks of
planes for max pooling, images for average pooling) over the thread pool of
:mod:`vtl.backends._common.threads` (the NumPy backend's ``NumpyPool2d``); every block is
computed exactly as on one thread.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .conv import FloatKernel, tap_slices
from .threads import parallel_for

__all__ = ["StridedPool2d", "avg_divisors"]

_UINT = {4: np.uint32, 8: np.uint64}


#: Input elements per block of planes (a few MiB: the taps of a block stay in cache).
BLOCK = 1 << 19

def _blocks(n: int, c: int, plane: int) -> Any:
    """``(images, channels)`` slices covering ``N x C`` planes of ``plane`` elements in
    blocks of about :data:`BLOCK` elements."""
    per = max(1, BLOCK // max(plane, 1))
    if per >= c:
        step = per // c
        for i in range(0, n, step):
            yield slice(i, i + step), slice(None)
    else:
        for i in range(n):
            for j in range(0, c, per):
                yield slice(i, i + 1), slice(j, j + per)


class _Scratch:
    """Named scratch buffers of at most ``size`` elements, reused across blocks."""

    def __init__(self, m: Any, size: int) -> None:
        self.m, self.size, self.bufs = m, size, {}

    def get(self, name: str, shape: tuple[int, ...], dtype: Any) -> Any:
        buf = self.bufs.get(name)
        if buf is None:
            buf = self.bufs[name] = self.m.empty(self.size, dtype=dtype)
        return buf[:math.prod(shape)].reshape(shape)


def _disjoint(k: tuple[int, int], s: tuple[int, int], d: tuple[int, int]) -> bool:
    """Whether no two windows share an element (a stride past the dilated kernel)."""
    return s[0] >= (k[0] - 1) * d[0] + 1 and s[1] >= (k[1] - 1) * d[1] + 1


def _extent(size: int, k: int, s: int, p: int, d: int, out: int) -> tuple[int, int]:
    """``(low, high)`` padding that holds every tap of ``out`` windows (``high`` may exceed
    ``p``: a ``ceil_mode`` window running past the padding)."""
    need = (out - 1) * s + (k - 1) * d + 1
    return p, max(need - size - p, 0)


def _pads(h: int, w: int, k: tuple[int, int], s: tuple[int, int], p: tuple[int, int],
          d: tuple[int, int], out: tuple[int, int]) -> tuple[int, int, int, int]:
    """``(top, bottom, left, right)`` padding of an ``h x w`` input (:func:`_extent`)."""
    return (*_extent(h, k[0], s[0], p[0], d[0], out[0]), *_extent(w, k[1], s[1], p[1], d[1],
                                                                    out[1]))


def _axis_divisors(size: int, k: int, s: int, p: int, out: int,
                   count_include_pad: bool) -> np.ndarray:
    o = np.arange(out)
    start = o * s - p
    end = np.minimum(start + k, size + p)
    pool = end - start
    clipped = np.minimum(end, size) - np.maximum(start, 0)
    return pool if count_include_pad else np.maximum(clipped, 1)


def avg_divisors(x_shape: tuple[int, ...], k: tuple[int, int], s: tuple[int, int],
                 p: tuple[int, int], out: tuple[int, int], count_include_pad: bool,
                 divisor_override: int | None) -> float | np.ndarray:
    """PyTorch's divisor of every ``avg_pool2d`` window: a float when all are equal, else
    an ``(Ho, Wo)`` float64 host array. A window's size is clipped to the padded input
    (``ceil_mode`` windows past it), and to the input without ``count_include_pad``."""
    if divisor_override is not None:
        return float(divisor_override)
    h, w = x_shape[-2:]
    dh = _axis_divisors(h, k[0], s[0], p[0], out[0], count_include_pad)
    dw = _axis_divisors(w, k[1], s[1], p[1], out[1], count_include_pad)
    if np.all(dh == dh[0]) and np.all(dw == dw[0]):
        return float(dh[0] * dw[0])
    return (dh[:, None] * dw[None, :]).astype(np.float64)


class StridedPool2d(FloatKernel):
    """The ``pool2d`` kernel on the arrays of ``mod`` (``numpy`` or ``cupy``); see
    ``vtl.backends.kernels.Pool2dKernel``. Geometry: ``k, s, p, d`` pairs (``p``
    symmetric), ``out`` the output size (``ceil_mode`` already applied)."""

    def _threads(self, size: int) -> int:
        """Pool threads for an input of ``size`` elements (1: the calling thread only; a
        subclass may return more)."""
        return 1

    @staticmethod
    def arg_dtype(kk: int) -> Any:
        """The dtype of the tap numbers of ``kk``-tap windows."""
        return np.uint8 if kk <= 255 else np.int32

    def _padded(self, x: Any, k: tuple[int, int], s: tuple[int, int], p: tuple[int, int],
                d: tuple[int, int], out: tuple[int, int], value: float) -> Any:
        n, c, h, w = x.shape
        pt, pb, pl, pr = _pads(h, w, k, s, p, d, out)
        if not (pt or pb or pl or pr):
            return x
        xp = self.m.full((n, c, h + pt + pb, w + pl + pr), value, dtype=x.dtype)
        xp[:, :, pt:pt + h, pl:pl + w] = x
        return xp

    def _grad_buffer(self, x_shape: tuple[int, ...], k: tuple[int, int], s: tuple[int, int],
                     p: tuple[int, int], d: tuple[int, int], out: tuple[int, int],
                     dtype: Any) -> tuple[Any, Any]:
        """A zero buffer of the padded input's shape and the input's part of it."""
        n, c, h, w = x_shape
        pt, pb, pl, pr = _pads(h, w, k, s, p, d, out)
        buf = self.m.zeros((n, c, h + pt + pb, w + pl + pr), dtype=dtype)
        return buf, (buf[:, :, pt:pt + h, pl:pl + w] if (pt or pb or pl or pr) else buf)

    def max_forward(self, x: Any, k: tuple[int, int], s: tuple[int, int],
                    p: tuple[int, int], d: tuple[int, int], out: tuple[int, int]
                    ) -> tuple[Any, Any]:
        """``(y, arg)``: the ``(N, C, Ho, Wo)`` maxima and the tap number (row-major,
        ``a*kw + b``) of the first maximal (or first nan) element of each window; a
        padding tap is never picked (a window of -inf gives its first element, as
        PyTorch)."""
        m = self.m
        src = self._padded(x, k, s, p, d, out, -np.inf)
        n, c = x.shape[:2]
        kk = k[0] * k[1]
        y = m.empty((n, c, *out), dtype=x.dtype)
        arg = m.empty((n, c, *out), dtype=self.arg_dtype(kk))
        blocks = list(_blocks(n, c, src.shape[2] * src.shape[3]))
        size = max(math.prod(y[bn, bc].shape) for bn, bc in blocks)
        inside = None
        if src is not x:  # which taps of each window read the input, not its padding
            h, w = x.shape[2:]
            pt, _, pl, _ = _pads(h, w, k, s, p, d, out)
            real = m.zeros(src.shape[2:], dtype=bool)
            real[pt:pt + h, pl:pl + w] = True
            inside = [real[tap_slices(a, b, *out, s, d)]
                      for a in range(k[0]) for b in range(k[1])]

        def run(i: int, j: int) -> None:
            scratch = _Scratch(m, size)  # one set of buffers per thread
            for bn, bc in blocks[i:j]:
                self._max_block(src[bn, bc], y[bn, bc], arg[bn, bc], k, s, d, scratch,
                                inside)

        parallel_for(run, len(blocks), self._threads(src.size))
        return y, arg

    def _max_block(self, src: Any, best: Any, arg: Any, k: tuple[int, int],
                   s: tuple[int, int], d: tuple[int, int], scratch: _Scratch,
                   inside: list | None = None) -> None:
        """:meth:`max_forward` of a block of planes into ``best`` and ``arg`` (``inside``:
        per tap, the ``(Ho, Wo)`` windows where it reads the input, not padding)."""
        m = self.m
        ho, wo = best.shape[2:]
        kk = k[0] * k[1]
        taps = [src[(..., *tap_slices(a, b, ho, wo, s, d))]
                for a in range(k[0]) for b in range(k[1])]
        if kk == 1:
            best[...] = taps[0]
            arg[...] = 0
            return
        m.maximum(taps[0], taps[1], out=best)
        for v in taps[2:]:  # the maximum (nan propagates)
            m.maximum(best, v, out=best)
        nan = bool(m.isnan(best).any())
        # the first tap equal to the maximum (or nan) and its bits (exact: the sign of a
        # zero, the payload of a nan), branch-free
        shape = best.shape
        ut = _UINT[best.dtype.itemsize]
        tap = scratch.get("tap", shape, best.dtype)
        hit = scratch.get("hit", shape, bool)
        new = scratch.get("new", shape, bool)
        found = scratch.get("found", shape, bool)
        small = scratch.get("small", shape, arg.dtype)
        wide = scratch.get("wide", shape, ut)
        bits = scratch.get("bits", shape, ut)
        for t, v in enumerate(taps):
            tap[...] = v
            m.equal(tap, best, out=hit)
            if nan:
                m.logical_or(hit, m.isnan(tap, out=new), out=hit)
            if inside is not None:
                m.logical_and(hit, inside[t], out=hit)
            if t == 0:
                found[...] = hit
                arg[...] = 0
                m.multiply(hit, tap.view(ut), out=bits)
                continue
            m.greater(hit, found, out=new)  # hit and not found before
            m.logical_or(found, hit, out=found)
            m.multiply(new, arg.dtype.type(t), out=small)
            m.add(arg, small, out=arg)
            m.multiply(new, tap.view(ut), out=wide)
            m.add(bits, wide, out=bits)
        best.view(ut)[...] = bits

    def max_backward(self, arg: Any, x_shape: tuple[int, ...], g: Any, k: tuple[int, int],
                     s: tuple[int, int], p: tuple[int, int], d: tuple[int, int]) -> Any:
        """The input gradient: each window's ``g`` added to its chosen element (masked by
        multiplying the bits of ``g``: exact, and no ``inf * 0``)."""
        m = self.m
        n, c = x_shape[:2]
        ho, wo = arg.shape[2:]
        buf, dx = self._grad_buffer(x_shape, k, s, p, d, (ho, wo), g.dtype)
        ut = _UINT[g.dtype.itemsize]
        gb = m.ascontiguousarray(g).view(ut)
        bufb = buf.view(ut)
        disjoint = _disjoint(k, s, d)
        blocks = list(_blocks(n, c, buf.shape[2] * buf.shape[3]))
        size = max(math.prod(arg[bn, bc].shape) for bn, bc in blocks)

        def run(i: int, j: int) -> None:
            scratch = _Scratch(m, size)  # one set of buffers per thread
            for bn, bc in blocks[i:j]:
                ab, gbb, dst, dstb = arg[bn, bc], gb[bn, bc], buf[bn, bc], bufb[bn, bc]
                hit = scratch.get("hit", ab.shape, bool)
                tmp = None if disjoint else scratch.get("tmp", ab.shape, ut)
                t = 0
                for a in range(k[0]):
                    for b in range(k[1]):
                        rs, cs = tap_slices(a, b, ho, wo, s, d)
                        m.equal(ab, t, out=hit)
                        if disjoint:  # every element in at most one window: write, no add
                            m.multiply(gbb, hit, out=dstb[..., rs, cs])
                        else:
                            m.multiply(gbb, hit, out=tmp)
                            view = dst[..., rs, cs]
                            m.add(view, tmp.view(g.dtype), out=view)
                        t += 1

        parallel_for(run, len(blocks), self._threads(buf.size))
        return dx

    def avg_forward(self, x: Any, k: tuple[int, int], s: tuple[int, int],
                    p: tuple[int, int], out: tuple[int, int], count_include_pad: bool,
                    divisor_override: int | None) -> Any:
        """Window sums (zero padding) divided by PyTorch's divisors (:func:`avg_divisors`)."""
        m = self.m
        ho, wo = out
        d = (1, 1)
        src = self._padded(x, k, s, p, d, out, 0.0)
        acc = m.empty((x.shape[0], x.shape[1], ho, wo), dtype=x.dtype)
        div = avg_divisors(x.shape, k, s, p, out, count_include_pad, divisor_override)
        div = self._divisor(div, x.dtype)

        def run(i: int, j: int) -> None:
            a_, s_ = acc[i:j], src[i:j]
            a_[...] = s_[(..., *tap_slices(0, 0, ho, wo, s, d))]
            for a in range(k[0]):
                for b in range(k[1]):
                    if a or b:
                        a_ += s_[(..., *tap_slices(a, b, ho, wo, s, d))]
            a_ /= div

        parallel_for(run, x.shape[0], self._threads(src.size))
        return acc

    def avg_backward(self, x_shape: tuple[int, ...], g: Any, k: tuple[int, int],
                     s: tuple[int, int], p: tuple[int, int], count_include_pad: bool,
                     divisor_override: int | None) -> Any:
        """The input gradient: ``g / divisor`` added to every element of each window."""
        ho, wo = g.shape[2:]
        d = (1, 1)
        div = avg_divisors(x_shape, k, s, p, (ho, wo), count_include_pad, divisor_override)
        div = self._divisor(div, g.dtype)
        buf, dx = self._grad_buffer(x_shape, k, s, p, d, (ho, wo), g.dtype)
        disjoint = _disjoint(k, s, d)

        def run(i: int, j: int) -> None:
            gd = g[i:j] / div
            for a in range(k[0]):
                for b in range(k[1]):
                    view = buf[i:j][(..., *tap_slices(a, b, ho, wo, s, d))]
                    if disjoint:
                        view[...] = gd
                    else:
                        view += gd

        parallel_for(run, x_shape[0], self._threads(buf.size))
        return dx

    def _divisor(self, divisor: Any, dtype: Any) -> Any:
        if isinstance(divisor, float):
            return divisor
        return self.m.asarray(divisor, dtype=dtype)
