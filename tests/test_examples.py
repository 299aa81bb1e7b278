"""Every example runs with ``--quick`` (on numpy, and on wgpu where the tests use it) and
learns: the loss of those that train falls by at least a quarter, and those that
classify print a test accuracy well above chance. The synthetic data the examples
fall back on is learnable but not separable without error."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from conftest import BACKENDS

from vtl import backends

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
SCRIPTS = sorted(p.name for p in EXAMPLES.glob("*.py") if not p.name.startswith("_"))
TRAINING = {"demo.py", "autograd_backprop.py", "xor.py", "simple_two_layer.py",
            "sine_regression.py", "iris.py", "autoencoder.py", "mnist_mlp.py",
            "cifar10_cnn.py", "imdb_lstm.py", "ddp_train.py"}
# The quick runs' test accuracy must reach these: far above chance (in brackets), a
# little below what the runs reach on numpy.
MIN_ACCURACY = {"demo.py": 0.8,          # 10 classes (0.1)
                "ddp_train.py": 0.8,     # 10 classes (0.1)
                "iris.py": 0.85,         # 3 classes (0.33)
                "xor.py": 0.85,          # 2 classes (0.5)
                "mnist_mlp.py": 0.7,     # 10 classes (0.1)
                "cifar10_cnn.py": 0.4,   # 10 classes (0.1)
                "imdb_lstm.py": 0.7}     # 2 classes (0.5)
_LOSS = re.compile(r"^(initial|final) loss: ([-+0-9.eE]+|nan|inf)$", re.MULTILINE)
_ACCURACY = re.compile(r"^test accuracy: ([0-9.]+)", re.MULTILINE)


def _common():
    """examples/_common.py as a module (the examples import it as ``_common``)."""
    spec = importlib.util.spec_from_file_location("examples_common", EXAMPLES / "_common.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _wgpu_runs() -> list[tuple[str, str]]:
    if "wgpu" not in BACKENDS or not backends.get("wgpu").is_available:
        return []
    return [(name, "wgpu") for name in SCRIPTS]


RUNS = [(name, "numpy") for name in SCRIPTS] + _wgpu_runs()
# On a software Vulkan adapter (lavapipe) the CIFAR-10 CNN's quick run takes over two minutes
# and the IMDB LSTM's over half a minute; the layers they use have their own wgpu tests.
_SLOW_ON_CPU_ADAPTER = {"cifar10_cnn.py", "imdb_lstm.py"}


def _cpu_adapter() -> bool:
    return backends.get("wgpu").info().get("adapter_type") == "CPU"


def _run(name: str, backend: str, cwd: Path, *extra: str,
         pythonpath: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join([*pythonpath, str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, PYTHONPATH=path, VTL_DATA=str(cwd / "data"), MPLBACKEND="Agg")
    env.pop("VTL_BACKEND", None)
    args = [sys.executable, str(EXAMPLES / name), "--backend", backend, *extra]
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory):
    """Run every example once per backend with ``--quick``, two at a time (independent
    processes), each in a folder of its own: what they write goes to its demo_out/."""
    runs = [r for r in RUNS if not (r[1] == "wgpu" and r[0] in _SLOW_ON_CPU_ADAPTER
                                    and _cpu_adapter())]
    # the folders are made here, not in the threads: mktemp is not thread-safe
    tmps = {r: tmp_path_factory.mktemp(f"{r[0].removesuffix('.py')}-{r[1]}") for r in runs}

    def one(run: tuple[str, str]):
        return run, (tmps[run], _run(*run, tmps[run], "--quick"))

    with ThreadPoolExecutor(max_workers=max(2, min(4, os.cpu_count() or 2))) as pool:
        return dict(pool.map(one, runs))


def _result(results, name: str, backend: str = "numpy"):
    if (name, backend) not in results:
        pytest.skip(f"{name} on {backend}: not run, its quick run is slow on a software "
                    "(CPU) adapter")
    return results[name, backend]


def test_every_upstream_example_is_present():
    expected = {"basic_usage.py", "vandermonde.py", "autograd_backprop.py", "datasets_mnist.py",
                "datasets_imdb.py", "scatter_plot.py", "xor.py", "simple_two_layer.py",
                "sine_regression.py", "iris.py", "autoencoder.py", "mnist_mlp.py",
                "cifar10_cnn.py", "imdb_lstm.py", "demo.py"}
    assert expected <= set(SCRIPTS)
    assert set(MIN_ACCURACY) <= TRAINING <= set(SCRIPTS)
    readme = (EXAMPLES / "README.md").read_text()
    for name in SCRIPTS:
        assert f"examples/{name}" in readme, f"examples/README.md does not list {name}"


@pytest.mark.parametrize(("name", "backend"), RUNS, ids=[f"{n}-{b}" for n, b in RUNS])
def test_example_runs_and_learns(results, name, backend):
    _, proc = _result(results, name, backend)
    out = proc.stdout
    assert proc.returncode == 0, f"{name} failed:\n{out}\n{proc.stderr[-3000:]}"
    assert f"backend: {backend}" in out
    if name in TRAINING:
        losses = dict((k, float(v)) for k, v in _LOSS.findall(out))
        assert set(losses) == {"initial", "final"}, out
        assert losses["final"] < 0.75 * losses["initial"], out
    if name in MIN_ACCURACY:
        accuracies = _ACCURACY.findall(out)
        assert len(accuracies) == 1, out
        assert float(accuracies[0]) >= MIN_ACCURACY[name], out


@pytest.mark.parametrize("backend", sorted({b for _, b in RUNS}))
def test_vandermonde_is_exact(results, backend):
    """The matrix of integer powers is exact and the fitted coefficients are the true ones
    to 4 decimals on every backend (float32 pow and least squares through QR)."""
    _, proc = _result(results, "vandermonde.py", backend)
    out = proc.stdout
    assert proc.returncode == 0, proc.stderr[-3000:]
    for k in (1, 2, 3, 4, 5):
        assert f"    {[k ** j for j in range(4)]}" in out, out
    assert "last row: [1.0, 5.0, 25.0, 125.0]" in out, out
    assert "fitted coefficients (expect 1, -2, 0, 0.5): [1.0, -2.0, 0.0, 0.5]" in out, out


def test_synthetic_fallback_is_announced(results):
    for name in ("datasets_mnist.py", "mnist_mlp.py", "cifar10_cnn.py", "imdb_lstm.py",
                 "datasets_imdb.py"):
        out = _result(results, name)[1].stdout
        assert "SYNTHETIC" in out and "not found" in out, f"{name}:\n{out}"


def test_quick_mnist_fallback_is_smaller(results, tmp_path):
    quick = _result(results, "datasets_mnist.py")[1].stdout
    full = _run("datasets_mnist.py", "numpy", tmp_path).stdout
    sizes = re.compile(r"^train: (\d+) images.*\ntest: (\d+) images", re.MULTILINE)
    (q_train, q_test), (f_train, f_test) = (map(int, sizes.search(s).groups())
                                            for s in (quick, full))
    assert (q_train, q_test) == (1000, 200), quick
    assert (f_train, f_test) == (6000, 1000), full


def test_demo_outputs(results):
    tmp, proc = _result(results, "demo.py")
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


def test_examples_write_into_the_ignored_output_folder(results):
    """Without ``--out`` the examples write under demo_out/ of the working folder, which
    .gitignore covers."""
    ignored = (ROOT / ".gitignore").read_text().split()
    assert f"{_common().OUT}/" in ignored
    for name, file in (("ddp_train.py", "digits_ddp.safetensors"),
                       ("mnist_mlp.py", "mnist_mlp_best.safetensors"),
                       ("demo.py", "digits.safetensors")):
        tmp, proc = _result(results, name)
        written = sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*") if p.is_file())
        assert written and all(p.startswith("demo_out/") for p in written), (name, written)
        assert (tmp / "demo_out" / file).is_file(), (name, written)


def test_scatter_png(results):
    tmp, proc = _result(results, "scatter_plot.py")
    if "matplotlib is missing" in proc.stdout:
        pytest.skip("matplotlib not installed")
    assert (tmp / "demo_out" / "scatter.png").read_bytes()[:4] == b"\x89PNG"


# -- a backend that cannot run ------------------------------------------------------------

def test_missing_cupy_says_what_to_install(tmp_path):
    if backends.get("cupy").is_available:
        pytest.skip("CuPy is installed here")
    if "No module named 'cupy'" not in backends.get("cupy").unavailable_reason:
        pytest.skip("CuPy is installed here but cannot run")
    proc = _run("xor.py", "cupy", tmp_path, "--quick")
    assert proc.returncode != 0 and "backend: cupy" not in proc.stdout
    assert "backend 'cupy' is not available (" in proc.stderr, proc.stderr
    assert "install it (CuPy for CUDA 12) with `pip install -e '.[cuda]'`" in proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr


def test_missing_wgpu_says_what_to_install(tmp_path):
    stub = tmp_path / "stub" / "wgpu"  # an environment without wgpu-py: its import fails
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'wgpu'\", name='wgpu')\n")
    proc = _run("xor.py", "wgpu", tmp_path, "--quick", pythonpath=(str(stub.parent),))
    assert proc.returncode != 0 and "backend: wgpu" not in proc.stdout
    assert "ModuleNotFoundError: No module named 'wgpu'" in proc.stderr, proc.stderr
    assert "install it (wgpu-py) with `pip install -e '.[wgpu]'`" in proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr


def test_backend_error_suggests_an_install_only_for_a_missing_runtime():
    err = _common().backend_error
    assert err("wgpu", "RuntimeError: no WebGPU adapter found") == (
        "backend 'wgpu' is not available (RuntimeError: no WebGPU adapter found)")
    assert "pip install" not in err("cupy", "CUDARuntimeError: no CUDA-capable device")
    assert "'.[cuda]'" in err("cupy", "ModuleNotFoundError: No module named 'cupy'")


# -- the synthetic fallback data ----------------------------------------------------------

def test_synthetic_images_are_learnable_but_not_separable():
    """The best rule there is (the nearest class pattern, knowing the patterns) gets most
    synthetic images right, but not all: some lean more to the other class they blend."""
    c = _common()
    for shape in ((784,), (3, 32, 32)):
        x, y = c.synthetic_images(2000, shape, seed=0)
        assert x.shape == (2000, *shape) and x.dtype == np.float32 and 0 <= x.min() <= x.max() <= 1
        t = c.templates(shape).reshape(10, -1)
        d = (t**2).sum(axis=1) - 2 * x.reshape(2000, -1) @ t.T  # |x - t|^2 less |x|^2
        accuracy = float((d.argmin(axis=1) == y).mean())
        assert 0.8 < accuracy < 0.97, (shape, accuracy)


def test_synthetic_reviews_are_learnable_but_not_separable():
    """A review's majority of sentiment words gives its label in most cases, not all."""
    c = _common()
    texts, y = c.synthetic_reviews(2000, seed=0)
    pos = np.array([sum(w in c._POS for w in t.split()) for t in texts])
    neg = np.array([sum(w in c._NEG for w in t.split()) for t in texts])
    assert ((pos + neg) == 3).all()
    accuracy = float(((pos > neg) == (y == 1)).mean())
    assert 0.85 < accuracy < 0.98, accuracy
