"""Shared fixtures: every numeric test runs once per available backend.

``VTL_TEST_BACKENDS=numpy,cupy,wgpu`` picks the backends (default: all that
are available on this machine); a requested but unavailable backend is skipped
with its reason.
"""

from __future__ import annotations

import os

import pytest

import vtl
from vtl import backends


def _selected() -> list[str]:
    env = os.environ.get("VTL_TEST_BACKENDS", "").strip()
    if env:
        return [b.strip() for b in env.split(",") if b.strip()]
    return backends.available_names()


BACKENDS = _selected()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest):
    """The name of a backend, made the default for the duration of the test."""
    name = request.param
    b = backends.get(name)
    if not b.is_available:
        pytest.skip(f"backend {name} unavailable: {b.unavailable_reason}")
    with vtl.use_backend(name):
        yield name


@pytest.fixture
def other_backends(backend):
    """Available backends other than the current one (for cross-device tests)."""
    return [n for n in backends.available_names() if n != backend]
