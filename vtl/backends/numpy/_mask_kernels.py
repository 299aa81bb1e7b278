"""Compiled gradient masks of the NumPy backend (numba, the ``vtl[cpu]`` extra): ReLU's
gradient, ``g`` where ``x > 0`` (and where ``x`` is nan) else ``+0.0``, and ``g`` zeroed
under a boolean mask, each in one pass over flat pieces ``[i, j)`` for the kernels' thread
pool, where the NumPy passes go through the bits of ``g`` in four. The same values.
"""

from __future__ import annotations

from ._compiled import kernel


@kernel()
def relu_grad(x, g, i, j, out):  # pragma: no cover - compiled
    """``out = 0 if x <= 0 else g`` over ``[i, j)`` of the flat arrays."""
    zero = out.dtype.type(0)
    xs, gs, os = x[i:j], g[i:j], out[i:j]
    for k in range(os.size):
        os[k] = zero if xs[k] <= 0 else gs[k]


@kernel()
def zero_where(mask, g, i, j, out):  # pragma: no cover - compiled
    """``out = 0 if mask else g`` over ``[i, j)`` of the flat arrays."""
    zero = out.dtype.type(0)
    ms, gs, os = mask[i:j], g[i:j], out[i:j]
    for k in range(os.size):
        os[k] = zero if ms[k] else gs[k]
