"""The benchmark suite end to end: a quick timed run on the numpy backend writes JSON that
benchmarks/report.py turns into grouped tables (what the GPU run does at full size)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from benchmarks import report

ROOT = Path(__file__).resolve().parents[1]


def _bench(name, group, impl, median, **extra):
    return {"name": name, "fullname": f"benchmarks/test_x.py::{name}", "group": group,
            "params": {"impl": impl}, "stats": {"median": median}, "extra_info": extra}


def _lib(lib, median):
    name = f"test_sgemm[{lib}-2048]"
    return {"name": name, "fullname": f"benchmarks/test_w.py::{name}", "group": None,
            "params": {"lib": lib, "n": 2048}, "stats": {"median": median}}


def test_grouped_report_rows_per_case_and_backend(tmp_path):
    data = {
        "machine_info": {"vtl_bench": {"gpu": "NVIDIA H200", "cupy": "14.2.0", "torch": "2.11",
                                       "numpy": "2.5.2", "cpu_count": 16}},
        "benchmarks": [
            _bench("test_mm[1024-cupy-vtl]", "matmul-float32-1024-cupy", "vtl", 1e-3,
                   **{"TFLOP/s": 2.1}),
            _bench("test_mm[1024-cupy-cupy]", "matmul-float32-1024-cupy", "cupy", 2e-3),
            _bench("test_mm[1024-cupy-torch-cuda]", "matmul-float32-1024-cupy", "torch-cuda",
                   4e-3),
            _bench("test_mm[1024-numpy-vtl]", "matmul-float32-1024-numpy", "vtl", 0.03),
            _bench("test_mm[1024-numpy-numpy]", "matmul-float32-1024-numpy", "numpy", 0.02),
            _bench("test_mm[128-numpy-vtl]", "matmul-float32-128-numpy", "vtl", 5e-5),
            _lib("wgpu", 0.003), _lib("cupy", 0.001),
        ]}
    path = tmp_path / "b.json"
    path.write_text(json.dumps(data))
    recs, info = report.records(str(path))
    text = report.report(recs, info)
    assert "GPU: NVIDIA H200" in text and "CuPy 14.2.0" in text
    lines = text.splitlines()
    head = lines[lines.index("### test_x.py::test_mm") + 2]
    assert head == "| case | backend | vtl | numpy | cupy | torch-cuda | vtl rate |"
    rows = [line for line in lines if line.startswith("| matmul")]
    # natural order of sizes (128 before 1024), numpy before cupy
    assert [r.split(" | ")[:2] for r in rows] == [
        ["| matmul-float32-128", "numpy"], ["| matmul-float32-1024", "numpy"],
        ["| matmul-float32-1024", "cupy"]]
    assert rows[2] == ("| matmul-float32-1024 | cupy | 1.00 ms |  | 2.00 ms (**0.50x**) "
                       "| 4.00 ms (**0.25x**) | 2.1 TFLOP/s |")
    assert "| 30.00 ms | 20.00 ms (**1.50x**) |" in rows[1]
    assert rows[0].startswith("| matmul-float32-128 | numpy | 50.0 µs |  |")
    # the wgpu library against CuPy, grouped without its lib parameter
    assert "| test_sgemm[n=2048] | wgpu (library) | 3.00 ms | 1.00 ms (**3.00x**) |" in text
    groups = report.load(str(path))
    assert ("test_sgemm[n=2048]", "cupy", 3.0) in report.ratios(groups)


def test_quick_benchmark_run_feeds_the_report(tmp_path):
    """Every new benchmark file runs (tiny sizes, numpy backend, one round, no PyTorch) and
    reports."""
    out = tmp_path / "bench.json"
    env = dict(os.environ, VTL_BENCH_QUICK="1", VTL_TEST_BACKENDS="numpy")
    files = [f"benchmarks/{f}" for f in ("test_core_bench.py", "test_train_bench.py",
                                         "test_nn_bench.py", "test_optim_bench.py")]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *files,
         "--benchmark-only", "--benchmark-min-rounds=1", "--benchmark-max-time=0.00001",
         "--benchmark-warmup=off", f"--benchmark-json={out}",
         "-k", "not torch and (not test_reduction or sum)"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    recs, info = report.records(str(out))
    assert "data" not in json.loads(out.read_text())["benchmarks"][0]["stats"]
    groups = {r.group for r in recs}
    for case in ("matmul-float64-32-numpy", "elementwise-chain5-float32-2^12-numpy",
                 "reduce-sum-float32-64x64-numpy", "train-step-cifar10-cnn-b4-adam-numpy",
                 "conv2d-4x3x32x32-64f3x3-fwd-bwd-numpy", "optim-adam-100000-numpy"):
        assert case in groups
    text = report.report(recs, info)
    assert "### test_train_bench.py::test_train_step" in text
