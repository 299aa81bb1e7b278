"""Compiled passes of the NumPy backend's ``lstm_cell`` kernel (numba, the ``vtl[cpu]``
extra). The hyperbolic tangents stay NumPy's (its vectorized ``tanh``); these kernels do
the rest of the cell in one pass each, operation for operation as the portable path, in
the arrays' dtype and without fused multiply-adds, so the results are its bits.
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
            lo = j * hs
            if with_hg and j == 2:
                for k in range(lo, lo + hs):
                    z[r, k] = gates[r, k] + hg[r, k]
            elif with_hg:
                for k in range(lo, lo + hs):
                    z[r, k] = (gates[r, k] + hg[r, k]) * half
            elif j == 2:
                for k in range(lo, lo + hs):
                    z[r, k] = gates[r, k]
            else:
                for k in range(lo, lo + hs):
                    z[r, k] = gates[r, k] * half
    return z


@kernel()
def lstm_post(z, c_prev, hs, c):  # pragma: no cover - compiled
    """From the tangents ``z`` (``(N, 4H)``, in place): ``i, f, o = 0.5 * t + 0.5``, and
    ``c = f * c_prev + i * g``."""
    half = z.dtype.type(0.5)
    for r in range(z.shape[0]):
        for k in range(hs):
            i = z[r, k] * half + half
            f = z[r, hs + k] * half + half
            g = z[r, 2 * hs + k]
            z[r, k] = i
            z[r, hs + k] = f
            z[r, 3 * hs + k] = z[r, 3 * hs + k] * half + half
            fc = f * c_prev[r, k]
            c[r, k] = fc + i * g


@kernel()
def lstm_backward(act, c_prev, tc, dh, dh2, dc, flags, hs, dz, dcp):  # pragma: no cover
    """``dz`` (``(N, 4H)``: ``di, df, dg, do``) and, with ``flags[3]``, ``dcp = dct * f``;
    ``flags = (dh given, dh2 given, dc given, d_c_prev wanted)``."""
    one = dz.dtype.type(1)
    zero = dz.dtype.type(0)
    with_dh, with_dh2, with_dc, want_dcp = flags[0], flags[1], flags[2], flags[3]
    for r in range(dz.shape[0]):
        for k in range(hs):
            i = act[r, k]
            f = act[r, hs + k]
            g = act[r, 2 * hs + k]
            o = act[r, 3 * hs + k]
            t = tc[r, k]
            if with_dh or with_dh2:
                if with_dh and with_dh2:
                    d = dh[r, k] + dh2[r, k]
                elif with_dh:
                    d = dh[r, k]
                else:
                    d = dh2[r, k]
                do = d * t * (o - o * o)
                dct = d * o * (one - t * t)
                if with_dc:
                    dct = dct + dc[r, k]
            else:
                do = zero
                dct = dc[r, k]
            dz[r, k] = dct * g * (i - i * i)
            dz[r, hs + k] = dct * c_prev[r, k] * (f - f * f)
            dz[r, 2 * hs + k] = dct * i * (one - g * g)
            dz[r, 3 * hs + k] = do
            if want_dcp:
                dcp[r, k] = dct * f


@kernel()
def gru_pre(x, hg, hs, act):  # pragma: no cover - compiled
    """``act`` (``(N, 4H)``: slots ``r, z, n, h_n``) = ``0.5 * (x + hg)`` for ``r, z`` (the
    tangents' arguments) and ``hg``'s ``n`` part for ``h_n``."""
    half = act.dtype.type(0.5)
    for row in range(act.shape[0]):
        for k in range(2 * hs):
            act[row, k] = half * (x[row, k] + hg[row, k])
        for k in range(hs):
            act[row, 3 * hs + k] = hg[row, 2 * hs + k]


@kernel()
def gru_mid(x, hs, act):  # pragma: no cover - compiled
    """From the tangents in ``act``'s ``r, z`` slots: ``r, z = 0.5 * t + 0.5``, and the
    ``n`` slot ``= x_n + r * h_n`` (the next tangent's argument)."""
    half = act.dtype.type(0.5)
    for row in range(act.shape[0]):
        for k in range(2 * hs):
            act[row, k] = half * act[row, k] + half
        for k in range(hs):
            act[row, 2 * hs + k] = x[row, 2 * hs + k] + act[row, k] * act[row, 3 * hs + k]


@kernel()
def gru_post(act, h_prev, hs, h):  # pragma: no cover - compiled
    """``h = n + z * (h_prev - n)``."""
    for row in range(act.shape[0]):
        for k in range(hs):
            n = act[row, 2 * hs + k]
            h[row, k] = n + act[row, hs + k] * (h_prev[row, k] - n)


@kernel()
def gru_backward(act, h_prev, dh, hs, want_dhp, dx, dhg, dhp):  # pragma: no cover - compiled
    """``dx`` and ``dhg`` (``(N, 3H)``) and, with ``want_dhp``, ``dhp = dh * z``."""
    one = dx.dtype.type(1)
    for row in range(act.shape[0]):
        for k in range(hs):
            r = act[row, k]
            z = act[row, hs + k]
            n = act[row, 2 * hs + k]
            hn = act[row, 3 * hs + k]
            d = dh[row, k]
            dzp = d * (h_prev[row, k] - n) * (z * (one - z))
            dnp = (d - d * z) * (one - n * n)
            drp = dnp * hn * (r * (one - r))
            dx[row, k] = drp
            dx[row, hs + k] = dzp
            dx[row, 2 * hs + k] = dnp
            dhg[row, k] = drp
            dhg[row, hs + k] = dzp
            dhg[row, 2 * hs + k] = dnp * r
            if want_dhp:
                dhp[row, k] = d * z
