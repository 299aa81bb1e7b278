"""Compiled passes of the NumPy backend's ``lstm_cell`` kernel (numba, the ``vtl[cpu]``
extra). The hyperbolic tangents stay NumPy's (its vectorized ``tanh``); these kernels do
the rest of the cell in one pass each, operation for operation as the portable path, in
the arrays' dtype and without fused multiply-adds, so the results are its bits.

Each row's gates are taken as views of their own and looped over from index 0, with any
choice made outside the loops: indices the compiler can prove non-negative and loops with
no branch are what it vectorizes (an index such as ``hs + k`` makes it check for a
negative index on every element, which keeps the loop scalar), and so are loops over few
arrays (it must check at run time that the arrays written do not overlap those read,
and gives up where there are too many pairs).
"""

from __future__ import annotations

from ._compiled import kernel


@kernel()
def lstm_pre(gates, hg, with_hg, hs, z):  # pragma: no cover - compiled
    """``z = (gates + hg) * (0.5, 0.5, 1, 0.5)`` per gate chunk (the arguments of the
    tangents that give ``i, f, g, o``); ``(N, 4H)`` arrays."""
    half = z.dtype.type(0.5)
    for r in range(z.shape[0]):
        for j in range(4):
            zr = z[r, j * hs:(j + 1) * hs]
            gr = gates[r, j * hs:(j + 1) * hs]
            if with_hg:
                hr = hg[r, j * hs:(j + 1) * hs]
                if j == 2:
                    for k in range(zr.size):
                        zr[k] = gr[k] + hr[k]
                else:
                    for k in range(zr.size):
                        zr[k] = (gr[k] + hr[k]) * half
            elif j == 2:
                for k in range(zr.size):
                    zr[k] = gr[k]
            else:
                for k in range(zr.size):
                    zr[k] = gr[k] * half
    return z


@kernel()
def lstm_post(z, c_prev, hs, c):  # pragma: no cover - compiled
    """From the tangents ``z`` (``(N, 4H)``, in place): ``i, f, o = 0.5 * t + 0.5``, and
    ``c = f * c_prev + i * g``."""
    half = z.dtype.type(0.5)
    for r in range(z.shape[0]):
        for j in (0, 1, 3):
            zj = z[r, j * hs:(j + 1) * hs]
            for k in range(zj.size):
                zj[k] = zj[k] * half + half
        zi, zf, zg = z[r, 0:hs], z[r, hs:2 * hs], z[r, 2 * hs:3 * hs]
        cp, cr = c_prev[r], c[r]
        for k in range(cr.size):
            fc = zf[k] * cp[k]
            cr[k] = fc + zi[k] * zg[k]


@kernel()
def lstm_backward(act, c_prev, tc, dh, dh2, dc, flags, hs, dz, dcp):  # pragma: no cover
    """``dz`` (``(N, 4H)``: ``di, df, dg, do``) and, with ``flags[3]``, ``dcp = dct * f``;
    ``flags = (dh given, dh2 given, dc given, d_c_prev wanted)``. The gradient reaching
    ``h`` (``dh + dh2``, or the one given) is formed in ``do``'s slot first."""
    one = dz.dtype.type(1)
    zero = dz.dtype.type(0)
    with_dh, with_dh2, with_dc, want_dcp = flags[0], flags[1], flags[2], flags[3]
    with_d = with_dh or with_dh2
    for r in range(dz.shape[0]):
        ai, af = act[r, 0:hs], act[r, hs:2 * hs]
        ag, ao = act[r, 2 * hs:3 * hs], act[r, 3 * hs:4 * hs]
        di, df = dz[r, 0:hs], dz[r, hs:2 * hs]
        dg, do = dz[r, 2 * hs:3 * hs], dz[r, 3 * hs:4 * hs]
        t, cp, dcr = tc[r], c_prev[r], dc[r]
        if with_dh and with_dh2:
            a, b = dh[r], dh2[r]
            for k in range(do.size):
                do[k] = a[k] + b[k]
        elif with_dh or with_dh2:
            a = dh[r] if with_dh else dh2[r]
            for k in range(do.size):
                do[k] = a[k]
        # dct into dg's slot
        if with_d and with_dc:
            for k in range(do.size):
                tk = t[k]
                dg[k] = do[k] * ao[k] * (one - tk * tk) + dcr[k]
        elif with_d:
            for k in range(do.size):
                tk = t[k]
                dg[k] = do[k] * ao[k] * (one - tk * tk)
        else:
            for k in range(do.size):
                dg[k] = dcr[k]
        if with_d:
            for k in range(do.size):
                o = ao[k]
                do[k] = do[k] * t[k] * (o - o * o)
        else:
            for k in range(do.size):
                do[k] = zero
        if want_dcp:
            dcpr = dcp[r]
            for k in range(do.size):
                dcpr[k] = dg[k] * af[k]
        for k in range(do.size):
            i = ai[k]
            di[k] = dg[k] * ag[k] * (i - i * i)
        for k in range(do.size):
            f = af[k]
            df[k] = dg[k] * cp[k] * (f - f * f)
        for k in range(do.size):
            g = ag[k]
            dg[k] = dg[k] * ai[k] * (one - g * g)


@kernel()
def gru_pre(x, hg, hs, act):  # pragma: no cover - compiled
    """``act`` (``(N, 4H)``: slots ``r, z, n, h_n``) = ``0.5 * (x + hg)`` for ``r, z`` (the
    tangents' arguments) and ``hg``'s ``n`` part for ``h_n``."""
    half = act.dtype.type(0.5)
    for row in range(act.shape[0]):
        a, xr, hr = act[row, 0:2 * hs], x[row, 0:2 * hs], hg[row, 0:2 * hs]
        for k in range(a.size):
            a[k] = half * (xr[k] + hr[k])
        hn, hgn = act[row, 3 * hs:4 * hs], hg[row, 2 * hs:3 * hs]
        for k in range(hn.size):
            hn[k] = hgn[k]


@kernel()
def gru_mid(x, hs, act):  # pragma: no cover - compiled
    """From the tangents in ``act``'s ``r, z`` slots: ``r, z = 0.5 * t + 0.5``, and the
    ``n`` slot ``= x_n + r * h_n`` (the next tangent's argument)."""
    half = act.dtype.type(0.5)
    for row in range(act.shape[0]):
        a = act[row, 0:2 * hs]
        for k in range(a.size):
            a[k] = half * a[k] + half
        r, n, hn, xn = act[row, 0:hs], act[row, 2 * hs:3 * hs], act[row, 3 * hs:4 * hs], \
            x[row, 2 * hs:3 * hs]
        for k in range(n.size):
            n[k] = xn[k] + r[k] * hn[k]


@kernel()
def gru_post(act, h_prev, hs, h):  # pragma: no cover - compiled
    """``h = n + z * (h_prev - n)``."""
    for row in range(act.shape[0]):
        z, n, hp, hr = act[row, hs:2 * hs], act[row, 2 * hs:3 * hs], h_prev[row], h[row]
        for k in range(hr.size):
            nk = n[k]
            hr[k] = nk + z[k] * (hp[k] - nk)


@kernel()
def gru_backward(act, h_prev, dh, hs, want_dhp, dx, dhg, dhp):  # pragma: no cover - compiled
    """``dx`` and ``dhg`` (``(N, 3H)``) and, with ``want_dhp``, ``dhp = dh * z``."""
    one = dx.dtype.type(1)
    for row in range(act.shape[0]):
        ar, az = act[row, 0:hs], act[row, hs:2 * hs]
        an, ahn = act[row, 2 * hs:3 * hs], act[row, 3 * hs:4 * hs]
        xr, xz, xn = dx[row, 0:hs], dx[row, hs:2 * hs], dx[row, 2 * hs:3 * hs]
        hr, hz, hn = dhg[row, 0:hs], dhg[row, hs:2 * hs], dhg[row, 2 * hs:3 * hs]
        hp, d_ = h_prev[row], dh[row]
        for k in range(hp.size):
            z = az[k]
            xz[k] = d_[k] * (hp[k] - an[k]) * (z * (one - z))
        for k in range(hp.size):
            d = d_[k]
            n = an[k]
            xn[k] = (d - d * az[k]) * (one - n * n)
        for k in range(hp.size):
            r = ar[k]
            xr[k] = xn[k] * ahn[k] * (r * (one - r))
        for k in range(hp.size):
            hr[k] = xr[k]
        for k in range(hp.size):
            hz[k] = xz[k]
        for k in range(hp.size):
            hn[k] = xn[k] * ar[k]
        if want_dhp:
            dp = dhp[row]
            for k in range(hp.size):
                dp[k] = d_[k] * az[k]
