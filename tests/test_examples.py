"""Every example runs with ``--quick`` on the numpy backend; those that train
print a final loss below their initial loss."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
SCRIPTS = sorted(p.name for p in EXAMPLES.glob("*.py") if not p.name.startswith("_"))
TRAINING = {"demo.py", "autograd_backprop.py", "xor.py", "simple_two_layer.py",
            "sine_regression.py", "iris.py", "autoencoder.py", "mnist_mlp.py",
            "cifar10_cnn.py", "imdb_lstm.py", "ddp_train.py"}
_LOSS = re.compile(r"^(initial|final) loss: ([-+0-9.eE]+|nan|inf)$", re.MULTILINE)


def _run(name: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, PYTHONPATH=path, VTL_DATA=str(tmp / "data"), MPLBACKEND="Agg")
    env.pop("VTL_BACKEND", None)
    args = [sys.executable, str(EXAMPLES / name), "--backend", "numpy", "--quick"]
    if name in ("demo.py",):
        args += ["--out", str(tmp / "demo_out")]
    if name == "scatter_plot.py":
        args += ["--out", str(tmp / "scatter.png")]
    return subprocess.run(args, cwd=tmp, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, object]]:
    """Run all examples once, two at a time (they are independent processes)."""
    # the folders are made here, not in the threads: mktemp is not thread-safe
    tmps = {name: tmp_path_factory.mktemp(name.removesuffix(".py")) for name in SCRIPTS}

    def one(name: str) -> tuple[str, tuple[Path, object]]:
        return name, (tmps[name], _run(name, tmps[name]))

    with ThreadPoolExecutor(max_workers=max(2, min(4, os.cpu_count() or 2))) as pool:
        return dict(pool.map(one, SCRIPTS))


def test_every_upstream_example_is_present():
    expected = {"basic_usage.py", "vandermonde.py", "autograd_backprop.py", "datasets_mnist.py",
                "datasets_imdb.py", "scatter_plot.py", "xor.py", "simple_two_layer.py",
                "sine_regression.py", "iris.py", "autoencoder.py", "mnist_mlp.py",
                "cifar10_cnn.py", "imdb_lstm.py", "demo.py"}
    assert expected <= set(SCRIPTS)
    readme = (EXAMPLES / "README.md").read_text()
    for name in SCRIPTS:
        assert f"examples/{name}" in readme, f"examples/README.md does not list {name}"


@pytest.mark.parametrize("name", SCRIPTS)
def test_example_runs(results, name):
    tmp, proc = results[name]
    assert proc.returncode == 0, f"{name} failed:\n{proc.stdout}\n{proc.stderr[-3000:]}"
    assert "backend: numpy" in proc.stdout
    if name in TRAINING:
        losses = dict((k, float(v)) for k, v in _LOSS.findall(proc.stdout))
        assert set(losses) == {"initial", "final"}, proc.stdout
        assert losses["final"] < losses["initial"], proc.stdout


def test_synthetic_fallback_is_announced(results):
    for name in ("datasets_mnist.py", "mnist_mlp.py", "cifar10_cnn.py", "imdb_lstm.py",
                 "datasets_imdb.py"):
        out = results[name][1].stdout
        assert "SYNTHETIC" in out and "not found" in out, f"{name}:\n{out}"


def test_demo_outputs(results):
    tmp, proc = results["demo.py"]
    assert re.search(r"^test accuracy: 0\.\d+", proc.stdout, re.MULTILINE), proc.stdout
    assert (tmp / "demo_out" / "digits.safetensors").is_file()
    import vtl
    from vtl import nn

    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    info = vtl.load_checkpoint(tmp / "demo_out" / "digits.safetensors", model)
    assert info["epoch"] == 3 and 0.0 <= info["metrics"]["accuracy"] <= 1.0
    if "learning curve skipped" not in proc.stdout:
        assert (tmp / "demo_out" / "learning_curve.png").read_bytes()[:4] == b"\x89PNG"
    assert "epoch 1/3" in proc.stderr  # the progress bars


def test_scatter_png(results):
    tmp, proc = results["scatter_plot.py"]
    if "matplotlib is missing" in proc.stdout:
        pytest.skip("matplotlib not installed")
    assert (tmp / "scatter.png").read_bytes()[:4] == b"\x89PNG"
