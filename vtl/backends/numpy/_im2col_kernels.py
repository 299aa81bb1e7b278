"""Compiled im2col and col2im of the NumPy backend's tiled convolution (numba, the
``vtl[cpu]`` extra): the patches of a tile of images written straight from the unpadded
input (zeros where a tap falls in the padding), and their gradient added back into the
input gradient, in one pass each instead of a padded copy and one strided copy or add per
tap. The same values as the NumPy passes (copies; each input element's taps added in the
same order, starting from zero).

The patch layout is the tiled kernel's: ``col`` is ``(C, kh, kw, M, Ho, Wo)`` flat (the
``(G, C/G*kh*kw, M*Ho*Wo)`` matrix of each group, the groups' channels in order).
"""

from __future__ import annotations

from ._compiled import kernel


@kernel(inline="always")
def _columns(kx, dw, pl, sw, w, wo):  # pragma: no cover - compiled
    """``(c0, lo, hi)``: tap column ``kx`` reads input column ``ox * sw + c0`` for output
    column ``ox``, inside the input for ``lo <= ox < hi``."""
    c0 = kx * dw - pl
    lo = 0 if c0 >= 0 else min(wo, (-c0 + sw - 1) // sw)
    hi = 0 if c0 >= w else max(lo, min(wo, (w - 1 - c0) // sw + 1))
    return c0, lo, hi


@kernel()
def im2col(x, col, sh, sw, pt, pl, dh, dw):  # pragma: no cover - compiled
    """``col`` (``(C, kh, kw, M, Ho, Wo)``) from ``x`` (``(M, C, H, W)``), zero where a tap
    reads the padding."""
    m, c, h, w = x.shape
    kh, kw, ho, wo = col.shape[1], col.shape[2], col.shape[4], col.shape[5]
    zero = x.dtype.type(0)
    for ci in range(c):
        for ky in range(kh):
            for kx in range(kw):
                c0, lo, hi = _columns(kx, dw, pl, sw, w, wo)
                for mi in range(m):
                    for oy in range(ho):
                        iy = oy * sh + ky * dh - pt
                        if iy < 0 or iy >= h:
                            for ox in range(wo):
                                col[ci, ky, kx, mi, oy, ox] = zero
                            continue
                        for ox in range(lo):
                            col[ci, ky, kx, mi, oy, ox] = zero
                        for ox in range(lo, hi):
                            col[ci, ky, kx, mi, oy, ox] = x[mi, ci, iy, ox * sw + c0]
                        for ox in range(hi, wo):
                            col[ci, ky, kx, mi, oy, ox] = zero


@kernel()
def col2im(dcol, dx, sh, sw, pt, pl, dh, dw):  # pragma: no cover - compiled
    """``dx`` (``(M, C, H, W)``) as the sum of the patch gradient ``dcol`` (``(C, kh, kw,
    M, Ho, Wo)``) over the taps that read each element, in tap order from zero (taps in
    the padding dropped)."""
    m, c, h, w = dx.shape
    kh, kw, ho, wo = dcol.shape[1], dcol.shape[2], dcol.shape[4], dcol.shape[5]
    zero = dx.dtype.type(0)
    for mi in range(m):
        for ci in range(c):
            for iy in range(h):
                for ix in range(w):
                    dx[mi, ci, iy, ix] = zero
    for ci in range(c):
        for ky in range(kh):
            for kx in range(kw):
                c0, lo, hi = _columns(kx, dw, pl, sw, w, wo)
                for mi in range(m):
                    for oy in range(ho):
                        iy = oy * sh + ky * dh - pt
                        if iy < 0 or iy >= h:
                            continue
                        for ox in range(lo, hi):
                            dx[mi, ci, iy, ox * sw + c0] += dcol[ci, ky, kx, mi, oy, ox]
