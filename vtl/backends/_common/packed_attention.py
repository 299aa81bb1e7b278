"""The geometry of multi-head self-attention's packed projection, as the attention kernels'
``forward_packed``/``backward_packed`` take it (``vtl.backends.kernels.AttentionKernel``)."""

from __future__ import annotations

__all__ = ["packed_geometry"]


def packed_geometry(shape: tuple[int, ...], heads: int, batch_first: bool,
                    max_dim: int) -> tuple[int, int, int] | None:
    """``(N, L, E)`` of a packed projection of shape ``(N, L, 3E)`` (``batch_first``) or
    ``(L, N, 3E)`` split into ``heads`` heads of at most ``max_dim`` columns; ``None`` for
    any other shape, or an empty one."""
    if len(shape) != 3:
        return None
    a, b, e3 = shape
    n, length = (a, b) if batch_first else (b, a)
    e = e3 // 3
    if e3 % 3 or heads <= 0 or e % heads or min(n, length, e) == 0 or e // heads > max_dim:
        return None
    return n, length, e
