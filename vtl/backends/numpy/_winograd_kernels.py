"""The compiled tile transforms of :mod:`vtl.backends.numpy._winograd` (numba, cached on
disk, released GIL so that the kernel pool's threads run them side by side).

Each kernel takes one group of images and works image by image in channels-last order:
the image is copied into a zero-bordered ``(rows, columns, channels)`` buffer, and every
transform is a loop over the channels (contiguous, vectorized) of sums of rows with the
small integer coefficients of the F(4x4, 3x3) matrices. The input and output-gradient
transforms write one output row a loop: with six stores and six loads in one loop LLVM
needs more run-time overlap checks between numba's arrays than it makes and leaves the loop
scalar (the input transform of 8 images of 64 channels at 16x16: 0.30 ms with six stores a
loop, 0.18 ms with one). Constants are of the arrays' own float type so that float32 stays
float32.
"""

from __future__ import annotations

import numpy as np

from ._compiled import kernel

_OPTS = {"fastmath": {"contract"}}


@kernel(**_OPTS)
def input_transform(x, pt, pl, th, tw, v):  # pragma: no cover - compiled
    m, c_n, h, w = x.shape
    dt = x.dtype.type
    f2, f4, f5 = dt(2), dt(4), dt(5)
    xp = np.zeros((4 * th + 2, 4 * tw + 2, c_n), x.dtype)
    r = np.empty((6, 6, c_n), x.dtype)
    for im in range(m):
        for yy in range(h):  # a row of every channel at a time: reads and writes in cache
            for c in range(c_n):
                for xx in range(w):
                    xp[yy + pt, xx + pl, c] = x[im, c, yy, xx]
        for ty in range(th):
            for tx in range(tw):
                p = (im * th + ty) * tw + tx
                for i in range(6):
                    a0 = xp[4 * ty + i, 4 * tx]
                    a1 = xp[4 * ty + i, 4 * tx + 1]
                    a2 = xp[4 * ty + i, 4 * tx + 2]
                    a3 = xp[4 * ty + i, 4 * tx + 3]
                    a4 = xp[4 * ty + i, 4 * tx + 4]
                    a5 = xp[4 * ty + i, 4 * tx + 5]
                    # one output row a loop (see the module doc)
                    o = r[i, 0]
                    for c in range(c_n):
                        o[c] = f4 * a0[c] - f5 * a2[c] + a4[c]
                    o = r[i, 1]
                    for c in range(c_n):
                        o[c] = -f4 * (a1[c] + a2[c]) + a3[c] + a4[c]
                    o = r[i, 2]
                    for c in range(c_n):
                        o[c] = f4 * (a1[c] - a2[c]) - a3[c] + a4[c]
                    o = r[i, 3]
                    for c in range(c_n):
                        o[c] = f2 * (a3[c] - a1[c]) - a2[c] + a4[c]
                    o = r[i, 4]
                    for c in range(c_n):
                        o[c] = f2 * (a1[c] - a3[c]) - a2[c] + a4[c]
                    o = r[i, 5]
                    for c in range(c_n):
                        o[c] = f4 * a1[c] - f5 * a3[c] + a5[c]
                for j in range(6):
                    d0, d1, d2 = r[0, j], r[1, j], r[2, j]
                    d3, d4, d5 = r[3, j], r[4, j], r[5, j]
                    o = v[j, p]
                    for c in range(c_n):
                        o[c] = f4 * d0[c] - f5 * d2[c] + d4[c]
                    o = v[6 + j, p]
                    for c in range(c_n):
                        o[c] = -f4 * (d1[c] + d2[c]) + d3[c] + d4[c]
                    o = v[12 + j, p]
                    for c in range(c_n):
                        o[c] = f4 * (d1[c] - d2[c]) - d3[c] + d4[c]
                    o = v[18 + j, p]
                    for c in range(c_n):
                        o[c] = f2 * (d3[c] - d1[c]) - d2[c] + d4[c]
                    o = v[24 + j, p]
                    for c in range(c_n):
                        o[c] = f2 * (d1[c] - d3[c]) - d2[c] + d4[c]
                    o = v[30 + j, p]
                    for c in range(c_n):
                        o[c] = f4 * d1[c] - f5 * d3[c] + d5[c]


@kernel(**_OPTS)
def output_transform(mm, bias, with_bias, out):  # pragma: no cover - compiled
    m, k_n, ho, wo = out.shape
    th, tw = (ho + 3) // 4, (wo + 3) // 4
    dt = out.dtype.type
    f2, f4, f8 = dt(2), dt(4), dt(8)
    t = np.empty((4, 6, k_n), out.dtype)
    q = np.empty((4 * th, 4 * tw, k_n), out.dtype)
    b = np.zeros(k_n, out.dtype)
    if with_bias:
        b[:] = bias
    for im in range(m):
        for ty in range(th):
            for tx in range(tw):
                p = (im * th + ty) * tw + tx
                for j in range(6):
                    b0, b1, b2 = mm[j, p], mm[6 + j, p], mm[12 + j, p]
                    b3, b4, b5 = mm[18 + j, p], mm[24 + j, p], mm[30 + j, p]
                    for k in range(k_n):
                        m0, m1, m2, m3, m4, m5 = b0[k], b1[k], b2[k], b3[k], b4[k], b5[k]
                        t[0, j, k] = m0 + m1 + m2 + m3 + m4
                        t[1, j, k] = m1 - m2 + f2 * (m3 - m4)
                        t[2, j, k] = m1 + m2 + f4 * (m3 + m4)
                        t[3, j, k] = m1 - m2 + f8 * (m3 - m4) + m5
                for i in range(4):
                    q0 = q[4 * ty + i, 4 * tx]
                    q1 = q[4 * ty + i, 4 * tx + 1]
                    q2 = q[4 * ty + i, 4 * tx + 2]
                    q3 = q[4 * ty + i, 4 * tx + 3]
                    for k in range(k_n):
                        m0, m1, m2 = t[i, 0, k], t[i, 1, k], t[i, 2, k]
                        m3, m4, m5 = t[i, 3, k], t[i, 4, k], t[i, 5, k]
                        q0[k] = m0 + m1 + m2 + m3 + m4 + b[k]
                        q1[k] = m1 - m2 + f2 * (m3 - m4) + b[k]
                        q2[k] = m1 + m2 + f4 * (m3 + m4) + b[k]
                        q3[k] = m1 - m2 + f8 * (m3 - m4) + m5 + b[k]
        for yy in range(ho):
            for k in range(k_n):
                for xx in range(wo):
                    out[im, k, yy, xx] = q[yy, xx, k]


@kernel(**_OPTS)
def grad_transform(g, th, tw, dm):  # pragma: no cover - compiled
    m, k_n, ho, wo = g.shape
    dt = g.dtype.type
    f2, f4, f8 = dt(2), dt(4), dt(8)
    gp = np.zeros((4 * th, 4 * tw, k_n), g.dtype)
    r = np.empty((4, 6, k_n), g.dtype)
    for im in range(m):
        for yy in range(ho):
            for k in range(k_n):
                for xx in range(wo):
                    gp[yy, xx, k] = g[im, k, yy, xx]
        for ty in range(th):
            for tx in range(tw):
                p = (im * th + ty) * tw + tx
                for i in range(4):
                    a0 = gp[4 * ty + i, 4 * tx]
                    a1 = gp[4 * ty + i, 4 * tx + 1]
                    a2 = gp[4 * ty + i, 4 * tx + 2]
                    a3 = gp[4 * ty + i, 4 * tx + 3]
                    o = r[i, 0]
                    for k in range(k_n):
                        o[k] = a0[k]
                    o = r[i, 1]
                    for k in range(k_n):
                        o[k] = a0[k] + a1[k] + a2[k] + a3[k]
                    o = r[i, 2]
                    for k in range(k_n):
                        o[k] = a0[k] - a1[k] + a2[k] - a3[k]
                    o = r[i, 3]
                    for k in range(k_n):
                        o[k] = a0[k] + f2 * a1[k] + f4 * a2[k] + f8 * a3[k]
                    o = r[i, 4]
                    for k in range(k_n):
                        o[k] = a0[k] - f2 * a1[k] + f4 * a2[k] - f8 * a3[k]
                    o = r[i, 5]
                    for k in range(k_n):
                        o[k] = a3[k]
                for j in range(6):
                    y0, y1, y2, y3 = r[0, j], r[1, j], r[2, j], r[3, j]
                    o = dm[j, p]
                    for k in range(k_n):
                        o[k] = y0[k]
                    o = dm[6 + j, p]
                    for k in range(k_n):
                        o[k] = y0[k] + y1[k] + y2[k] + y3[k]
                    o = dm[12 + j, p]
                    for k in range(k_n):
                        o[k] = y0[k] - y1[k] + y2[k] - y3[k]
                    o = dm[18 + j, p]
                    for k in range(k_n):
                        o[k] = y0[k] + f2 * y1[k] + f4 * y2[k] + f8 * y3[k]
                    o = dm[24 + j, p]
                    for k in range(k_n):
                        o[k] = y0[k] - f2 * y1[k] + f4 * y2[k] - f8 * y3[k]
                    o = dm[30 + j, p]
                    for k in range(k_n):
                        o[k] = y3[k]


@kernel(**_OPTS)
def input_adjoint(dv, pt, pl, th, tw, dx):  # pragma: no cover - compiled
    m, c_n, h, w = dx.shape
    dt = dx.dtype.type
    f2, f4, f5 = dt(2), dt(4), dt(5)
    dxp = np.empty((4 * th + 2, 4 * tw + 2, c_n), dx.dtype)
    r = np.empty((6, 6, c_n), dx.dtype)
    for im in range(m):
        dxp[...] = 0
        for ty in range(th):
            for tx in range(tw):
                p = (im * th + ty) * tw + tx
                for j in range(6):  # columns of the tile: B applied over the rows' index
                    a0, a1, a2 = dv[j, p], dv[6 + j, p], dv[12 + j, p]
                    a3, a4, a5 = dv[18 + j, p], dv[24 + j, p], dv[30 + j, p]
                    for c in range(c_n):
                        v0, v1, v2, v3, v4, v5 = a0[c], a1[c], a2[c], a3[c], a4[c], a5[c]
                        r[0, j, c] = f4 * v0
                        r[1, j, c] = f4 * (v2 - v1 + v5) + f2 * (v4 - v3)
                        r[2, j, c] = -f5 * v0 - f4 * (v1 + v2) - v3 - v4
                        r[3, j, c] = v1 - v2 + f2 * (v3 - v4) - f5 * v5
                        r[4, j, c] = v0 + v1 + v2 + v3 + v4
                        r[5, j, c] = v5
                for i in range(6):
                    y = 4 * ty + i
                    o0 = dxp[y, 4 * tx]
                    o1 = dxp[y, 4 * tx + 1]
                    o2 = dxp[y, 4 * tx + 2]
                    o3 = dxp[y, 4 * tx + 3]
                    o4 = dxp[y, 4 * tx + 4]
                    o5 = dxp[y, 4 * tx + 5]
                    for c in range(c_n):
                        v0, v1, v2 = r[i, 0, c], r[i, 1, c], r[i, 2, c]
                        v3, v4, v5 = r[i, 3, c], r[i, 4, c], r[i, 5, c]
                        o0[c] += f4 * v0
                        o1[c] += f4 * (v2 - v1 + v5) + f2 * (v4 - v3)
                        o2[c] += -f5 * v0 - f4 * (v1 + v2) - v3 - v4
                        o3[c] += v1 - v2 + f2 * (v3 - v4) - f5 * v5
                        o4[c] += v0 + v1 + v2 + v3 + v4
                        o5[c] += v5
        for yy in range(h):
            for c in range(c_n):
                for xx in range(w):
                    dx[im, c, yy, xx] = dxp[yy + pt, xx + pl, c]
