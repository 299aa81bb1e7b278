"""``benchmarks/wgpu_layer_norm.py``: it times every layout it is given, checks each one's
gradients against the first's, and leaves the layer_norm kernel's settings as they were."""

from __future__ import annotations

import os
import re

import pytest

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
wx = pytest.importorskip("vtl.backends.wgpu")
if not wx.is_available():
    pytest.skip("no WebGPU adapter", allow_module_level=True)
from vtl.backends.wgpu import profile  # noqa: E402

if not profile.available():
    pytest.skip("no timestamp queries inside passes", allow_module_level=True)

from benchmarks import wgpu_layer_norm as script  # noqa: E402
from vtl.backends.wgpu import nn as wnn  # noqa: E402


def test_every_layout_is_timed_and_agrees_and_the_settings_are_restored():
    names = ("LN_SLOTS", "LN_SUM_COLS", "LN_BLOCK_ROWS", "LN_MAX_BLOCKS", "_ln_width")
    shipped = {n: getattr(wnn, n) for n in names}
    lines = script.time_shape((80, 64), list(script.LAYOUTS), reps=1)
    assert {n: getattr(wnn, n) for n in names} == shipped
    timed = [line for line in lines if " wall " in line and "PyTorch" not in line]
    assert [line.split()[0] for line in timed] == list(script.LAYOUTS)
    for line in timed:
        assert "layer_norm=" in line and "layer_norm_grad=" in line
        diff = float(re.search(r"max diff (\S+)", line).group(1))
        assert diff < 1e-4
