"""Shared fixtures: every numeric test runs once per available backend.

``VTL_TEST_BACKENDS=numpy,cupy,wgpu`` picks the backends (default: all that
are available on this machine); a requested but unavailable backend is skipped
with its reason.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

import vtl
from vtl import backends
from vtl.autograd import graph
from vtl.backends._common import threads

# Tests that lower a kernel's split threshold to put small arrays on the thread pool split
# them over every thread, not one per PASS_GRAIN elements (tests/test_nn_conv_threads.py
# tests the grain itself).
threads.PASS_GRAIN = 0

# Hold every raw backward rule to its contract: the gradients it returns have their inputs'
# shapes and dtypes (plain backward skips this check outside the tests).
graph.check_raw_rules = True

# Property tests: few examples per test so the whole suite stays fast in CI, the same ones on
# every run (derandomized: a CI result does not depend on the draw);
# VTL_HYPOTHESIS_PROFILE=thorough for a deeper, random local run.
settings.register_profile(
    "ci", max_examples=15, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
settings.register_profile(
    "thorough", max_examples=200, deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("VTL_HYPOTHESIS_PROFILE", "ci"))


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
def wgpu():
    """The wgpu backend object (skips the test where it is unavailable)."""
    b = backends.get("wgpu")
    if not b.is_available:
        pytest.skip(f"wgpu backend: {b.unavailable_reason}")
    return b


@pytest.fixture
def cupy_backend():
    """The cupy backend object (skips the test where it is unavailable)."""
    b = backends.get("cupy")
    if not b.is_available:
        pytest.skip(f"cupy backend unavailable: {b.unavailable_reason}")
    return b


@pytest.fixture
def other_backends(backend):
    """Available backends other than the current one (for cross-device tests)."""
    return [n for n in backends.available_names() if n != backend]
