"""``vtl.fft``: the Fourier transform extension of the array API standard."""

from __future__ import annotations

__all__: list[str] = []
