"""The wgpu timing scripts: ``benchmarks/wgpu_conv_layers.py`` times every op of the layers
it is given, in each form it compares, and leaves the convolution module as it was;
``benchmarks/wgpu_layer_norm.py`` times every layout it is given, checks each one's
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

from benchmarks import wgpu_conv_layers as script  # noqa: E402
from benchmarks import wgpu_layer_norm as ln_script  # noqa: E402
from vtl.backends.wgpu import conv  # noqa: E402
from vtl.backends.wgpu import nn as wnn  # noqa: E402


def test_report_covers_each_layer_op_and_form_and_restores_the_module():
    shipped = (conv.TAPS_FIRST, conv._wgrad_plan)
    lines = script.run(((8, 4), (16, 2)), batch=2, reps=1, ab=True, slices=True, warm_s=0.0)
    assert (conv.TAPS_FIRST, conv._wgrad_plan) == shipped
    assert len(lines) == 2 * (1 + 3 + 1)  # per layer: header, three forms, the sweep
    for line in lines:
        if line.startswith("  ") and "planned" not in line:
            assert all(f"{op} " in line for op in ("fwd", "dgrad", "wgrad"))
    assert sum("planned" in line and "wgrad/16" in line for line in lines) == 2


def test_flop_of_a_layer_op():
    assert script.flop(64, 32, 128) == 2.0 * 128 * 32 * 32 * 64 * 64 * 9


def test_layer_norm_layouts_are_timed_and_agree_and_the_settings_are_restored():
    names = ("LN_SLOTS", "LN_SUM_COLS", "LN_BLOCK_ROWS", "LN_MAX_BLOCKS", "_ln_width")
    shipped = {n: getattr(wnn, n) for n in names}
    lines = ln_script.time_shape((80, 64), list(ln_script.LAYOUTS), reps=1)
    assert {n: getattr(wnn, n) for n in names} == shipped
    timed = [line for line in lines if " wall " in line and "PyTorch" not in line]
    assert [line.split()[0] for line in timed] == list(ln_script.LAYOUTS)
    for line in timed:
        assert "layer_norm=" in line and "layer_norm_grad=" in line
        diff = float(re.search(r"max diff (\S+)", line).group(1))
        assert diff < 1e-4
