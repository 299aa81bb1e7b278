"""How many invocations share a row in the row-wise kernels (the attention softmax, softmax
and log_softmax, layer_norm): a row of up to ``SLOTS`` elements an invocation is held in
registers by 32 to 256 invocations, several rows a workgroup of 256, and reduced within
those invocations (``wreduce`` in ``wgsl/math/workgroup_reduce.wgsl``); a longer row takes
a whole workgroup and is read again for each pass."""

from __future__ import annotations

__all__ = ["SLOTS", "row_lanes", "row_groups", "lane_subs"]

#: elements each invocation holds in registers (``SLOTS`` in the kernels)
SLOTS = 16


def row_lanes(n: int, slots: int = SLOTS) -> int:
    """Invocations per row of ``n`` elements: the fewest of 32, 64, 128 and 256 that hold
    the row in registers (``slots`` elements each), else 256 (one row a workgroup)."""
    return next((t for t in (32, 64, 128) if t * slots >= n), 256)


def row_groups(rows: int, lanes: int) -> int:
    """Workgroups of 256 invocations for ``rows`` rows of ``lanes`` invocations each."""
    return -(-rows // (256 // lanes))


def lane_subs(lanes: int) -> dict[str, str]:
    """The row-wise kernels' ``{{TPR}}`` and ``{{SLOTS}}`` for rows of ``lanes`` invocations."""
    return {"TPR": f"{lanes}u", "SLOTS": str(SLOTS)}
