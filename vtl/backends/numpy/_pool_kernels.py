"""Compiled 2x2 stride-2 max pooling of the NumPy backend (numba, the ``vtl[cpu]`` extra),
the common ``MaxPool2d(2)``: each window's first maximal (or first nan) element and its
tap in one pass, and the gradient written back in one pass, the same bits as the NumPy
passes. Planes ``[i, j)`` of ``(planes, rows, columns)`` arrays, for the kernels' thread
pool.
"""

from __future__ import annotations

from ._compiled import kernel


@kernel()
def max_forward_2x2(src, i, j, y, arg):  # pragma: no cover - compiled
    """``y`` and ``arg`` (``(planes, Ho, Wo)``) of the padded planes ``src``: after each tap
    the pick is that tap's element where the pick so far is not nan and the element is nan
    or larger."""
    ho, wo = y.shape[1], y.shape[2]
    for p in range(i, j):
        for oy in range(ho):
            r0 = src[p, 2 * oy]
            r1 = src[p, 2 * oy + 1]
            for ox in range(wo):
                best = r0[2 * ox]
                tap = 0
                v = r0[2 * ox + 1]
                if best == best and (v != v or v > best):
                    best = v
                    tap = 1
                v = r1[2 * ox]
                if best == best and (v != v or v > best):
                    best = v
                    tap = 2
                v = r1[2 * ox + 1]
                if best == best and (v != v or v > best):
                    best = v
                    tap = 3
                y[p, oy, ox] = best
                arg[p, oy, ox] = tap


@kernel()
def max_backward_2x2(arg, g, i, j, buf):  # pragma: no cover - compiled
    """``buf`` (the padded planes) gets each window's ``g`` at its tap and ``+0.0`` at its
    other three elements (the windows are disjoint: every element is written once)."""
    ho, wo = arg.shape[1], arg.shape[2]
    zero = g.dtype.type(0)
    for p in range(i, j):
        for oy in range(ho):
            r0 = buf[p, 2 * oy]
            r1 = buf[p, 2 * oy + 1]
            for ox in range(wo):
                t = arg[p, oy, ox]
                v = g[p, oy, ox]
                r0[2 * ox] = v if t == 0 else zero
                r0[2 * ox + 1] = v if t == 1 else zero
                r1[2 * ox] = v if t == 2 else zero
                r1[2 * ox + 1] = v if t == 3 else zero
