"""How the GPU backends split rows into blocks for per-block partial sums (layer_norm's
weight and bias gradients): shared so that cupy and wgpu cut the rows alike."""

from __future__ import annotations

__all__ = ["row_blocks"]


def row_blocks(m: int, min_rows: int, max_blocks: int) -> tuple[int, int]:
    """``(blocks, rows per block)`` covering ``m`` rows: as many blocks as fill the device
    (at most ``max_blocks``), each of at least ``min_rows`` rows where ``m`` allows, and no
    empty block."""
    blocks = max(1, min(-(-m // min_rows), max_blocks))
    rows = -(-m // blocks)
    return -(-m // rows), rows
