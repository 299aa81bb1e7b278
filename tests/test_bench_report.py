"""benchmarks/report.py: ratio tables, chart and the user page from pytest-benchmark JSON."""

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


def test_two_cases_timing_one_implementation_of_a_group_are_refused(tmp_path):
    """Two benchmarks of one file in one group with the same implementation would hide one
    of them (the table keeps one time per implementation): an error names both."""
    data = {"benchmarks": [
        {"name": f"conv[{path}]", "group": "conv-wgpu", "params": {"impl": "vtl"},
         "stats": {"median": m}} for path, m in (("implicit", 1.0), ("im2col", 2.0))]}
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"conv\[implicit\].*conv\[im2col\].*conv-wgpu"):
        report.load(str(path))


def test_chart_png(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "chart.png"
    assert report.main([_bench_json(tmp_path), "--png", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# -- the user page (--page) ---------------------------------------------------------------

def _run_json(path, benchmarks, *, gpu=None, cpu="Test CPU", cores=2,
              when="2026-01-02T03:04:05+00:00", commit="0123456789abcdef", **versions):
    """A pytest-benchmark JSON with the machine information the benchmark conftest records."""
    v = {"python": "3.11.7", "numpy": "2.4.6", "cpu_count": cores, "vtl": "0.1.0",
         "quick": False, "full": False, **versions}
    if gpu:
        v["gpu"] = gpu
    data = {"machine_info": {"cpu": {"brand_raw": cpu, "count": cores}, "vtl_bench": v},
            "commit_info": {"id": commit, "dirty": False}, "datetime": when,
            "benchmarks": [_bench(*b) for b in benchmarks]}
    path.write_text(json.dumps(data))
    return str(path)


def _bench(file, func, group, impl, median, backend=None, **extra):
    params = {"impl": impl}
    if backend:
        params["backend"] = backend
    return {"name": f"{func}[{impl}]", "fullname": f"benchmarks/{file}::{func}[{impl}]",
            "group": group, "params": params, "stats": {"median": median}, "extra_info": extra}


CPU_RUN = [
    ("test_core_bench.py", "test_matmul", "matmul-float32-128-numpy", "vtl", 4e-5, "numpy"),
    ("test_core_bench.py", "test_matmul", "matmul-float32-128-numpy", "numpy", 2e-5, "numpy"),
    ("test_core_bench.py", "test_matmul", "matmul-float32-128-numpy", "torch-cpu", 8e-5,
     "numpy"),
    ("test_train_bench.py", "test_train_step", "train-step-mlp-b128-adam-numpy", "vtl", 2e-3,
     "numpy"),
    ("test_train_bench.py", "test_train_step", "train-step-mlp-b128-adam-numpy", "torch-cpu",
     1e-3, "numpy"),
    ("test_optim_bench.py", "test_optimizer_step", "optim-adam-10M-numpy", "vtl", 0.03, "numpy"),
    ("test_optim_bench.py", "test_optimizer_step", "optim-adam-10M-numpy", "portable", 0.06,
     "numpy"),
]
GPU_RUN = [
    ("test_core_bench.py", "test_matmul", "matmul-float32-128-cupy", "vtl", 3e-5, "cupy"),
    ("test_core_bench.py", "test_matmul", "matmul-float32-128-cupy", "cupy", 3e-5, "cupy"),
    ("test_core_bench.py", "test_matmul", "matmul-float32-128-cupy", "torch-cuda", 1.5e-5, "cupy"),
    ("test_train_bench.py", "test_train_step", "train-step-mlp-b128-adam-numpy", "vtl", 5e-3,
     "numpy"),
    ("test_train_bench.py", "test_train_step", "train-step-mlp-b128-adam-numpy", "torch-cpu",
     2.5e-3, "numpy"),
    ("test_frontend_overhead.py", "test_add", "add-small-wgpu", "vtl", 6e-5, "wgpu"),
    ("test_frontend_overhead.py", "test_add", "add-small-wgpu", "raw", 5e-5, "wgpu"),
]


def _section(text, backend):
    """The lines of one backend's part of the page."""
    part = text.split(f"## {backend} backend\n", 1)[1]
    return part.split("\n## ", 1)[0]


def _tables(text):
    """How many Markdown tables (header + separator) a text holds."""
    return text.count("|\n|---|")


def test_page_one_table_per_backend_with_machines_and_ratios(tmp_path):
    cpu = _run_json(tmp_path / "laptop.json", CPU_RUN, torch="2.13.0+cpu", torch_threads=2)
    out = tmp_path / "benchmarks.md"
    assert report.main(["--page", str(out), cpu]) == 0
    text = out.read_text()
    # how to read, regenerate and run
    assert "ratio = vtl time / reference time" in text
    assert f"python benchmarks/report.py --page {out.name} laptop.json" in text
    assert "make bench" in text and "benchmarks/gpu_run.sh" in text
    # the machine line of the run: date, hardware, versions, commit
    row = next(line for line in text.splitlines() if line.startswith("| **laptop** |"))
    for fact in ("2026-01-02 03:04 UTC", "Test CPU, 2 cores", "| none |", "| 3.11.7 |",
                 "| 2.4.6 |", "2.13.0+cpu, 2 CPU threads", "0.1.0 (0123456)", "| numpy |"):
        assert fact in row, fact
    # one table per backend; the numpy one with both references and the ratios
    numpy = _section(text, "numpy")
    assert _tables(numpy) == 1
    assert ("| case | vtl | NumPy | vtl / NumPy | PyTorch CPU | vtl / PyTorch CPU | "
            "other reference | vtl / other |") in numpy
    assert "| matmul-float32-128 | 40.0 µs | 20.0 µs | 2.00 | 80.0 µs | 0.50 |  |  |" in numpy
    assert "| optim-adam-10M | 30.00 ms |  |  |  |  | portable 60.00 ms | 0.50 |" in numpy
    # grouped: core ops before training steps before the optimizer
    assert numpy.index("**Core ops**") < numpy.index("**Training steps**") \
        < numpy.index("**Optimizer step**")
    assert "From run **laptop**." in numpy
    assert ("Not timed in these runs: Call overhead, nn layers, CPU model steps, "
            "Distributed.") in numpy
    for b in ("cupy", "wgpu"):
        assert "No run of this page measured this backend." in _section(text, b)


def test_page_merges_runs_and_the_later_file_wins(tmp_path):
    cpu = _run_json(tmp_path / "laptop.json", CPU_RUN, torch="2.13.0+cpu", torch_threads=2)
    gpu = _run_json(tmp_path / "bench.json", GPU_RUN, gpu="NVIDIA H200", cpu="Server CPU",
                    cores=16, when="2026-01-05T10:00:00+00:00", cupy="14.2.0",
                    cuda_runtime=13020, torch="2.11.0+cu130", torch_threads=16, wgpu="0.32.0",
                    wgpu_adapter="NVIDIA H200 (Vulkan)")
    # the GPU machine's run is the later file: its numpy training step replaces the laptop's
    text = report.page([report.load_run(cpu), report.load_run("h200=" + gpu)],
                       str(tmp_path / "benchmarks.md"))
    assert "benchmarks.md laptop.json h200=bench.json" in text
    gpu_row = next(line for line in text.splitlines() if line.startswith("| **h200** |"))
    for fact in ("NVIDIA H200", "Server CPU, 16 cores", "14.2.0, CUDA 13.2",
                 "0.32.0 on NVIDIA H200 (Vulkan)", "numpy, cupy, wgpu"):
        assert fact in gpu_row, fact
    numpy = _section(text, "numpy")
    assert _tables(numpy) == 1
    assert "| train-step-mlp-b128-adam | 5.00 ms |  |  | 2.50 ms | 2.00 |" in numpy
    assert "2.00 ms" not in numpy  # the laptop's figure of that case is gone
    # the numpy table mixes the two runs, so its rows say which run each comes from
    assert "From runs **laptop**, **h200** (column *run*)." in numpy
    assert "| matmul-float32-128 | 40.0 µs | 20.0 µs | 2.00 | 80.0 µs | 0.50 |" in numpy
    assert [line.rsplit("|", 2)[1].strip() for line in numpy.splitlines()
            if line.startswith("| matmul") or line.startswith("| train")] == ["laptop", "h200"]
    cupy = _section(text, "cupy")
    assert _tables(cupy) == 1 and "From run **h200**." in cupy
    assert "| matmul-float32-128 | 30.0 µs | 30.0 µs | 1.00 | 15.0 µs | 2.00 |" in cupy
    wgpu = _section(text, "wgpu")
    assert "| add-small | 60.0 µs | wgpu library 50.0 µs | 1.20 |" in wgpu

    # in the other order the laptop's numpy figures win, and the GPU run gives cupy and wgpu
    text = report.page([report.load_run(gpu), report.load_run(cpu)], "benchmarks.md")
    numpy = _section(text, "numpy")
    assert "From run **laptop**." in numpy and "| run |" not in numpy
    assert "| train-step-mlp-b128-adam | 2.00 ms |  |  | 1.00 ms | 2.00 |" in numpy
    row = next(line for line in text.splitlines() if line.startswith("| **bench** |"))
    assert row.endswith("| cupy, wgpu |")


def test_page_of_a_run_whose_cases_are_all_in_a_later_run(tmp_path):
    a = _run_json(tmp_path / "a.json", CPU_RUN[:3])
    b = _run_json(tmp_path / "b.json", CPU_RUN[:3], when="2026-02-01T00:00:00+00:00")
    text = report.page([report.load_run(a), report.load_run(b)], "benchmarks.md")
    assert "| **a** |" in text and "none (every case is in a later run)" in text
    assert "From run **b**." in _section(text, "numpy")


def test_page_lists_device_launches_per_step_where_counted(tmp_path):
    steps = [
        ("test_step_bench.py", "test_step", "step-cnn-cupy", "vtl", 2e-3, "cupy", 39.0),
        ("test_step_bench.py", "test_step", "step-cnn-cupy", "torch-cuda", 2e-3, "cupy", 30.0),
        ("test_step_bench.py", "test_step", "step-mlp-cupy", "vtl", 1e-3, "cupy", None),
        ("test_step_bench.py", "test_step", "step-mlp-cupy", "torch-cuda", 1e-3, "cupy", 20.0),
        ("test_step_bench.py", "test_step", "step-cnn-wgpu", "vtl", 4e-3, "wgpu", 41.0),
        ("test_step_bench.py", "test_step", "step-cnn-wgpu", "torch-cuda", 2e-3, "wgpu", 30.0),
    ]
    path = tmp_path / "gpu.json"
    _run_json(path, [], gpu="NVIDIA H200")
    data = json.loads(path.read_text())
    data["benchmarks"] = [_bench(*s[:6], **({} if s[6] is None else {"kernels": s[6]}))
                          for s in steps]
    path.write_text(json.dumps(data))
    text = report.page([report.load_run(str(path))], "benchmarks.md")
    cupy, wgpu = _section(text, "cupy"), _section(text, "wgpu")
    assert "Device launches per training step (CUDA kernels" in cupy
    assert "| step-cnn | 39 | 30 | 1.30 |" in cupy
    assert "| step-mlp |" not in cupy.split("Device launches")[1]  # vtl's not counted
    assert "dispatches recorded by vtl" in wgpu and "| step-cnn | 41 | 30 | 1.37 |" in wgpu
    assert "Device launches" not in _section(report.page(
        [report.load_run(_run_json(tmp_path / "cpu.json", CPU_RUN))], "b.md"), "numpy")


def test_page_lists_peak_memory_where_measured(tmp_path):
    cases = [
        ("test_amp_bench.py", "test_amp_transformer_step", "amp-step-transformer-bf16-cupy",
         "vtl", 3e-3, "cupy", 348.8),
        ("test_amp_bench.py", "test_amp_transformer_step", "amp-step-transformer-bf16-cupy",
         "torch-cuda", 5e-3, "cupy", 410.6),
        ("test_amp_bench.py", "test_amp_transformer_step",
         "amp-step-transformer-bf16-compiled-cupy", "vtl", 3e-3, "cupy", 0.0),
        ("test_amp_bench.py", "test_amp_transformer_step",
         "amp-step-transformer-bf16-compiled-cupy", "torch-cuda", 5e-3, "cupy", 414.1),
    ]
    path = tmp_path / "gpu.json"
    _run_json(path, [], gpu="NVIDIA H200")
    data = json.loads(path.read_text())
    data["benchmarks"] = [_bench(*c[:6], peak_mib=c[6]) for c in cases]
    path.write_text(json.dumps(data))
    cupy = _section(report.page([report.load_run(str(path))], "benchmarks.md"), "cupy")
    assert "Peak device memory of one call" in cupy
    assert "| amp-step-transformer-bf16 | 348.8 | 410.6 | 0.85 |" in cupy
    assert "| amp-step-transformer-bf16-compiled |" not in cupy.split("Peak device")[1]


def test_page_keeps_a_case_whose_later_run_timed_only_the_references(tmp_path):
    first = _run_json(tmp_path / "a.json", CPU_RUN[:3])
    refs_only = [b for b in CPU_RUN[:3] if b[3] != "vtl"]  # vtl's case failed in run b
    later = _run_json(tmp_path / "b.json", refs_only, when="2026-02-01T00:00:00+00:00")
    text = report.page([report.load_run(first), report.load_run(later)], "benchmarks.md")
    numpy = _section(text, "numpy")
    assert "| matmul-float32-128 | 40.0 µs | 20.0 µs | 2.00 | 80.0 µs | 0.50 |" in numpy
    assert "From run **a**." in numpy


def test_page_command_names_project_files_from_the_root(tmp_path):
    import glob
    import os

    root = os.path.dirname(os.path.dirname(os.path.abspath(report.__file__)))
    kept = sorted(glob.glob(os.path.join(root, "benchmarks", "runs", "*.json")))
    if not kept:
        pytest.skip("no run kept in benchmarks/runs/")
    inside = report.load_run(kept[0])
    text = report.page([inside], str(tmp_path / "benchmarks.md"))
    rel = os.path.relpath(kept[0], root)
    assert f"python benchmarks/report.py --page benchmarks.md {rel}" in text
    assert "are kept in `benchmarks/runs/`." in text
    outside = report.load_run(_run_json(tmp_path / "laptop.json", CPU_RUN[:3]))
    text = report.page([inside, outside], str(tmp_path / "benchmarks.md"))
    assert f"{rel} laptop.json" in text and str(tmp_path) not in text
    assert "are kept in" not in text
