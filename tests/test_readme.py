"""The ```python blocks of README.md and examples/README.md run as written.

Each block runs as a script in a fresh interpreter, in a folder of its own that is also
its home folder (so the files it writes, and ``~``, land there). Two things may happen
before it runs, both listed here:

* a block that reads data files gets small stand-in files first (``PREAMBLES``);
* a block that names a backend that cannot run here (``"cupy"``, ``"wgpu"``) runs with
  ``"numpy"`` in its place; the failure message says when that happened.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from vtl import backends

ROOT = Path(__file__).resolve().parent.parent
DOCS = (ROOT / "README.md", ROOT / "examples" / "README.md")
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
_BACKEND = re.compile(r"""(["'])(cupy|wgpu)(:\d+)?\1""")


def _idx(a: np.ndarray) -> bytes:
    """``a`` as an IDX file of unsigned bytes (the format of the MNIST files)."""
    return bytes([0, 0, 0x08, a.ndim]) + np.asarray(a.shape, ">u4").tobytes() + \
        a.astype(np.uint8).tobytes()


def _mnist_stand_in(home: Path) -> None:
    """16 random 28x28 training images and labels in ~/data/MNIST/raw."""
    raw = home / "data" / "MNIST" / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    (raw / "train-images-idx3-ubyte").write_bytes(_idx(rng.integers(0, 256, (16, 28, 28))))
    (raw / "train-labels-idx1-ubyte").write_bytes(_idx(rng.integers(0, 10, 16)))


#: Stand-in data for the blocks that read files: run before any block containing the key.
PREAMBLES: dict[str, Callable[[Path], None]] = {
    'vtl.datasets.MNIST(root="~/data")': _mnist_stand_in,
}


def _blocks() -> list:
    params = []
    for doc in DOCS:
        text = doc.read_text()
        for m in _BLOCK.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            params.append(pytest.param(m.group(1), id=f"{doc.relative_to(ROOT)}:{line}"))
    return params


BLOCKS = _blocks()


def _on_available_backends(code: str) -> tuple[str, list[str]]:
    """``code`` with each backend that cannot run here replaced by numpy, and their names."""
    replaced: set[str] = set()

    def sub(m: re.Match[str]) -> str:
        if backends.get(m.group(2)).is_available:
            return m.group(0)
        replaced.add(m.group(2))
        return f"{m.group(1)}numpy{m.group(1)}"

    return _BACKEND.sub(sub, code), sorted(replaced)


def test_the_readme_has_python_blocks():
    assert sum(p.id.startswith("README.md:") for p in BLOCKS) >= 6


def test_gradients_are_clipped_between_backward_and_step():
    """Clipping after ``opt.step()`` would clip gradients already used."""
    blocks = [p.values[0] for p in BLOCKS if "clip_grad_norm_(" in p.values[0]]
    assert blocks
    for code in blocks:
        clip = code.index("clip_grad_norm_(")
        assert "backward()" in code[:clip] and ".step()" in code[clip:], code


def test_backend_replacement():
    code, replaced = _on_available_backends('a.to("cupy"); b = f(device="cupy:1", x="cupyx")')
    if backends.get("cupy").is_available:
        assert replaced == [] and '"cupy:1"' in code
    else:
        assert replaced == ["cupy"]
        assert code == 'a.to("numpy"); b = f(device="numpy", x="cupyx")'


@pytest.mark.parametrize("code", BLOCKS)
def test_block_runs(code: str, tmp_path: Path):
    for key, write in PREAMBLES.items():
        if key in code:
            write(tmp_path)
    code, replaced = _on_available_backends(code)
    script = tmp_path / "block.py"
    script.write_text(code)
    env = dict(os.environ, HOME=str(tmp_path), MPLBACKEND="Agg",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    for name in ("VTL_BACKEND", "VTL_DATA"):
        env.pop(name, None)
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    note = f" (with {', '.join(replaced)} replaced by numpy)" if replaced else ""
    assert proc.returncode == 0, f"the block failed{note}:\n{code}\n{proc.stderr[-4000:]}"
