"""``linalg.solve``, ``inv``, ``det`` and ``slogdet`` on the device for small matrices.

A batched LU factorisation with partial pivoting (``wgsl/linalg/lu.wgsl``): one workgroup per
matrix, held in workgroup memory, so n is limited to what fits (64 for float32; float64
as the device's workgroup memory allows). Larger matrices, integer inputs and invalid
shapes go through host NumPy (the ``HOST_LINALG`` wrappers), which also raise the
errors. An exactly singular matrix gives non-finite values on the device (NumPy would
raise ``LinAlgError``); ``det`` of it is 0, ``slogdet`` gives (0, -inf).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import _dtypes as D
from . import _kernels, _runtime
from ._array import WgpuArray, broadcast_shapes, contiguous, empty, prod
from ._manipulation import broadcast_to, reshape
from ._recorder import REC

_NMAX_CAP = 64


def nmax(dt: np.dtype) -> int:
    """Largest n the device kernel handles for ``dt`` (0 when it handles none)."""
    if D.kind(dt) != "f" or D.wgsl(dt) == "f16":
        return 0
    lim = int(_runtime.get().limits.get("max-compute-workgroup-storage-size", 16384))
    isz = D.itemsize(dt)
    n = _NMAX_CAP
    while n > 0 and n * n * isz + n * (isz + 4) + 16 > lim:
        n //= 2
    return n


def _host(name: str):
    from ._linalg import _host as h

    return h(name)


def _lu(a: WgpuArray, b: WgpuArray | None, k: int, mode: int, out_shape) -> WgpuArray:
    """Run the kernel over the contiguous batch ``a`` (B, n, n) (and ``b`` (B, n, k))."""
    dt = a.dtype
    nb, n = a.shape[0], a.shape[-1]
    out = empty(out_shape, dt)
    if nb == 0 or n == 0:
        return out
    kern = _kernels.kernel("lu", "rrw", (dt,), T=D.wgsl(dt), NMAX=nmax(dt),
                           LOG="m64_log" if D.wgsl(dt) == "f64" else "log")
    bb = b if b is not None else a
    REC.dispatch(kern, (a._st.buf, bb._st.buf, out._st.buf),
                 [nb, n, k, a._offset, bb._offset, mode], nb)
    return out


def _square(x, fname: str) -> bool:
    """Whether ``x`` is a float stack of square matrices the kernel can take."""
    return (isinstance(x, WgpuArray) and x.ndim >= 2 and x.shape[-1] == x.shape[-2]
            and 0 < x.shape[-1] <= nmax(x.dtype))


def solve(x1, x2, /) -> WgpuArray:
    """Solution of ``x1 @ x = x2`` (``x2`` a vector when 1-D, else a stack of matrices;
    batch dimensions broadcast)."""
    if not (_square(x1, "solve") and isinstance(x2, WgpuArray) and x2.dtype == x1.dtype
            and x2.ndim >= 1):
        return _host("solve")(x1, x2)
    n = x1.shape[-1]
    vec = x2.ndim == 1
    if vec:
        if x2.shape[0] != n:
            return _host("solve")(x1, x2)
        batch = x1.shape[:-2]
        b = broadcast_to(reshape(x2, (n, 1)), batch + (n, 1))
        k = 1
    else:
        if x2.shape[-2] != n:
            return _host("solve")(x1, x2)
        try:
            batch = broadcast_shapes(x1.shape[:-2], x2.shape[:-2])
        except ValueError:
            return _host("solve")(x1, x2)
        k = x2.shape[-1]
        b = broadcast_to(x2, batch + (n, k))
    a = broadcast_to(x1, batch + (n, n))
    nb = prod(batch)
    a = contiguous(reshape(contiguous(a), (nb, n, n)))
    b = reshape(contiguous(b), (nb, n, k))
    out = _lu(a, b, k, 0, (nb, n, k))
    return reshape(out, batch + ((n,) if vec else (n, k)))


def _stacked(x) -> tuple:
    """``x`` as one contiguous ``(nb, n, n)`` stack, with ``n``, the batch shape and ``nb``."""
    n = x.shape[-1]
    batch = x.shape[:-2]
    nb = prod(batch)
    return reshape(contiguous(x), (nb, n, n)), n, batch, nb


def inv(x, /) -> WgpuArray:
    """Inverse of each square matrix of ``x``."""
    if not _square(x, "inv"):
        return _host("inv")(x)
    a, n, batch, nb = _stacked(x)
    return reshape(_lu(a, None, n, 1, (nb, n, n)), x.shape)


def det(x, /) -> WgpuArray:
    """Determinant of each square matrix of ``x`` (shape ``x.shape[:-2]``)."""
    if not _square(x, "det"):
        return _host("det")(x)
    a, n, batch, nb = _stacked(x)
    return reshape(_lu(a, None, 0, 2, (nb,)), batch)


class SlogdetResult(NamedTuple):
    sign: WgpuArray
    logabsdet: WgpuArray


def slogdet(x, /) -> SlogdetResult:
    """Sign and natural log of the absolute determinant of each square matrix of ``x``
    (a singular matrix gives sign 0 and logabsdet -inf)."""
    if not _square(x, "slogdet"):
        return _host("slogdet")(x)
    a, n, batch, nb = _stacked(x)
    out = _lu(a, None, 0, 3, (nb, 2))
    return SlogdetResult(reshape(out[:, 0], batch), reshape(out[:, 1], batch))


#: the linalg functions of this module (each falls back to the host beyond ``nmax``)
NATIVE = ("det", "inv", "slogdet", "solve")
