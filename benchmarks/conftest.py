"""Benchmark fixtures: each case runs on every available backend, and the
reference library runs in the same session so ratios are meaningful.

Run with ``make bench`` or ``pytest benchmarks --benchmark-only
--benchmark-enable --benchmark-json=bench.json``; ``python benchmarks/report.py
bench.json`` prints the vtl/reference ratios.
"""

from __future__ import annotations

import os

import pytest

from vtl import backends


def _selected() -> list[str]:
    env = os.environ.get("VTL_TEST_BACKENDS", "").strip()
    if env:
        return [b.strip() for b in env.split(",") if b.strip()]
    return backends.available_names()


@pytest.fixture(params=_selected())
def backend(request: pytest.FixtureRequest) -> str:
    b = backends.get(request.param)
    if not b.is_available:
        pytest.skip(f"backend {request.param} unavailable: {b.unavailable_reason}")
    return request.param


def synchronize(backend: str) -> None:
    """Wait for queued device work so the timing covers the computation."""
    backends.get(backend).synchronize()
