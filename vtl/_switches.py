"""Environment switches that turn a vtl feature off, read without importing NumPy (so
``vtl/_openblas.py`` can use them before NumPy loads)."""

from __future__ import annotations

import os

__all__ = ["turned_off"]


def turned_off(var: str) -> bool:
    """Whether the environment variable ``var`` turns a feature off (``0``, ``false``,
    ``False`` or empty; unset leaves it on)."""
    return os.environ.get(var, "1").strip() in ("0", "false", "False", "")
