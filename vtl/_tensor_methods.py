"""PyTorch-style convenience methods on Tensor (``t.sum()``, ``t.reshape(...)``...),
each a thin call of the namespace function."""

from __future__ import annotations


def install() -> None:
    """Attach the methods to :class:`vtl.Tensor` (called once by ``vtl/__init__``)."""
