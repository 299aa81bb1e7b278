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
