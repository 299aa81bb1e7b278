"""Sets functions of the array API standard."""

from __future__ import annotations

__all__: list[str] = []
