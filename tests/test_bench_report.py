"""benchmarks/report.py: ratio table and chart from pytest-benchmark JSON."""

from __future__ import annotations

import json

import pytest

from benchmarks import report


def _bench_json(tmp_path):
    data = {"benchmarks": [
        {"name": "a", "group": "add-small-numpy", "params": {"impl": "vtl"},
         "stats": {"median": 3e-6}},
        {"name": "b", "group": "add-small-numpy", "params": {"impl": "raw"},
         "stats": {"median": 2e-6}},
        {"name": "c", "group": "mlp-numpy", "params": {"impl": "vtl"}, "stats": {"median": 0.002}},
        {"name": "d", "group": "mlp-numpy", "params": {"impl": "torch"},
         "stats": {"median": 0.004}},
        {"name": "e", "group": "only-ref", "params": {"impl": "raw"}, "stats": {"median": 1.0}},
    ]}
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_ratios_and_table(tmp_path):
    groups = report.load(_bench_json(tmp_path))
    assert report.ratios(groups) == [("add-small-numpy", "raw", pytest.approx(1.5)),
                                     ("mlp-numpy", "torch", pytest.approx(0.5))]
    text = report.table(groups)
    assert "| add-small-numpy | 3.0 µs | raw 2.0 µs | 1.50 |" in text
    assert "| mlp-numpy | 2.00 ms | torch 4.00 ms | 0.50 |" in text
    assert "only-ref" not in text


def test_chart_png(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "chart.png"
    assert report.main([_bench_json(tmp_path), "--png", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
