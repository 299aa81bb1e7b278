"""``python -m vtl info``."""

from __future__ import annotations

import json
import subprocess
import sys

import vtl
from vtl import __main__ as cli


def test_info_json_lists_every_backend(capsys):
    assert cli.main(["info", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["vtl"] == vtl.__version__
    assert set(data["backends"]) == set(vtl.backends.available())
    numpy_rep = data["backends"]["numpy"]
    assert numpy_rep["available"] and numpy_rep["devices"] == ["numpy:0"]
    assert "float32" in numpy_rep["dtypes"]["numpy:0"]
    for name, rep in data["backends"].items():
        if not rep["available"]:
            assert rep["reason"], f"{name} unavailable without a reason"


def test_info_human_output_runs_as_module():
    out = subprocess.run([sys.executable, "-m", "vtl", "info"], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.startswith(f"vtl {vtl.__version__}")
    assert "[numpy] available" in out.stdout


def test_info_shows_the_wgpu_memory_statistics(wgpu, capsys):
    import vtl.backends.wgpu as xp

    x = vtl.ones((256, 256), backend="wgpu")  # 256 KiB held while info runs
    assert cli.main(["info", "--json"]) == 0
    memory = json.loads(capsys.readouterr().out)["backends"]["wgpu"]["memory"]
    assert set(memory) == {"in_use", "pooled", "peak", "buffers_created", "reused"}
    assert memory["in_use"] >= x.size * 4 and memory["peak"] >= memory["in_use"]
    assert memory["buffers_created"] >= 1
    assert cli.main(["info"]) == 0
    m = xp.memory_info()
    line = next(s for s in capsys.readouterr().out.splitlines() if s.startswith("  memory:"))
    assert line == (f"  memory: {cli._bytes(m['in_use'])} in use, {cli._bytes(m['pooled'])} "
                    f"pooled for reuse, peak {cli._bytes(m['peak'])}; {m['buffers_created']} "
                    f"buffers created, {m['reused']} reuses")
    assert "KiB in use" in line or "MiB in use" in line
    del x


def test_bytes_are_shown_in_binary_units():
    assert [cli._bytes(n) for n in (0, 1023, 1024, 1536, 4 << 20, 3 << 30)] == [
        "0 B", "1023 B", "1.0 KiB", "1.5 KiB", "4.0 MiB", "3.0 GiB"]
