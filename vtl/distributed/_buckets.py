"""Flat gradient buckets: which parameters share one collective, and packing/unpacking them."""

from __future__ import annotations

from typing import Any

from .._tensor import Tensor, _new


class Bucket:
    """Parameters of one device and dtype whose gradients travel in one flat buffer."""

    __slots__ = ("index", "params", "sizes", "arrived", "complete")

    def __init__(self, index: int, params: list[Tensor]) -> None:
        self.index = index
        self.params = params
        self.sizes = [p.size for p in params]
        self.arrived: set[int] = set()
        self.complete = False

    def reset(self) -> None:
        self.arrived = set()
        self.complete = False

    def pack(self, grads: list[Tensor | None]) -> Any:
        """One contiguous raw array: each gradient flattened (None: zeros), concatenated."""
        xp = self.params[0]._device.xp
        parts = []
        for p, g in zip(self.params, grads, strict=True):
            raw = xp.zeros_like(p._data) if g is None else g._data
            parts.append(xp.reshape(raw, (-1,)))
        return xp.concat(parts) if len(parts) > 1 else xp.asarray(parts[0], copy=True)

    def unpack(self, flat: Any) -> list[Tensor]:
        """Tensors of the parameters' shapes viewing consecutive pieces of ``flat``."""
        xp = self.params[0]._device.xp
        out, off = [], 0
        for p, n in zip(self.params, self.sizes, strict=True):
            out.append(_new(xp.reshape(flat[off:off + n], p.shape), p._device))
            off += n
        return out


def make_buckets(params: list[Tensor], cap_bytes: int) -> list[Bucket]:
    """Group ``params`` (in the given order) by device and dtype into buckets of at most
    ``cap_bytes`` (a larger parameter gets a bucket of its own)."""
    open_: dict[tuple, list[Tensor]] = {}
    sizes: dict[tuple, int] = {}
    groups: list[list[Tensor]] = []
    for p in params:
        key = (p._device, p._data.dtype)
        nbytes = p.size * p._data.dtype.itemsize
        cur = open_.get(key)
        if cur is not None and sizes[key] + nbytes > cap_bytes:
            cur = None
        if cur is None:
            cur = open_[key] = []
            sizes[key] = 0
            groups.append(cur)
        cur.append(p)
        sizes[key] += nbytes
    return [Bucket(i, g) for i, g in enumerate(groups)]
