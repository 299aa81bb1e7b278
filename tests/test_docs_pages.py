"""The code of the documentation runs: guide and tutorial pages, and docstring examples.

* Every ```python block of ``docs/guide/*.md`` and ``docs/tutorials/*.md`` runs on the numpy
  backend, page by page: the blocks of one page run in order in one namespace, in a
  temporary working folder. An HTML comment on the line before a block changes that:
  ``<!-- test: skip -->`` (not run, e.g. it needs MPI or a GPU) or ``<!-- test: wgpu -->``
  (runs only where the wgpu backend is available).
* The ``>>>`` examples in the docstrings of vtl's public functions and classes run as
  doctests (module docstrings hold sketches and are not run), with ``vtl``, ``nn``,
  ``optim`` and ``numpy as np`` defined.
* The site builds with ``mkdocs build --strict`` (warnings, such as a broken link or a
  reference entry that does not resolve, are errors); skipped where mkdocs is not installed.
"""

from __future__ import annotations

import doctest
import importlib
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import vtl
from vtl import backends

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs" / "guide").glob("*.md")) + sorted(
    (ROOT / "docs" / "tutorials").glob("*.md"))
_BLOCK = re.compile(r"^(?:<!-- test: (\w+) -->\n)?```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def blocks(page: Path) -> list[tuple[int, str | None, str]]:
    """``(line, mark, code)`` of each ```python block of ``page``."""
    text = page.read_text()
    return [(text.count("\n", 0, m.start()) + 1, m.group(1), m.group(2))
            for m in _BLOCK.finditer(text)]


def _page_id(page: Path) -> str:
    return str(page.relative_to(ROOT / "docs"))


@pytest.mark.parametrize("page", [p for p in PAGES if blocks(p)], ids=_page_id)
def test_page_code_runs(page, tmp_path, monkeypatch):
    """Each page's blocks run in one namespace; the process-wide settings a page may change
    (vtl's thread cap, the random state, the float32 product precision) are restored."""
    from vtl.backends._common import threads

    monkeypatch.setattr(threads, "_limit", threads._limit)
    state = vtl.random.get_state()
    precision = vtl.get_float32_matmul_precision()
    restore = [lambda: vtl.random.set_state(state),
                       lambda: vtl.set_float32_matmul_precision(precision)]
    try:
        _run_page(page, tmp_path, monkeypatch)
    finally:
        for undo in restore:
            undo()


def _run_page(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("VTL_DATA", str(tmp_path / "data"))
    namespace: dict = {"__name__": "__docs__"}
    wgpu_ok = backends.get("wgpu").is_available
    with vtl.use_backend("numpy"):
        for line, mark, code in blocks(page):
            if mark == "skip" or (mark == "wgpu" and not wgpu_ok):
                continue
            if mark not in (None, "skip", "wgpu"):
                raise ValueError(f"{_page_id(page)}:{line}: unknown mark {mark!r}")
            try:
                exec(compile(code, f"{page}:{line}", "exec"), namespace)
            except Exception as e:
                e.add_note(f"in the ```python block at {_page_id(page)}:{line}")
                raise


def test_marks_are_known():
    for page in PAGES:
        for line, mark, _ in blocks(page):
            assert mark in (None, "skip", "wgpu"), f"{_page_id(page)}:{line}: {mark}"


def test_every_tutorial_has_code():
    for page in (ROOT / "docs" / "tutorials").glob("*.md"):
        if page.name != "index.md":
            assert blocks(page), page


# -- docstring examples -------------------------------------------------------------------

DOCTEST_MODULES = [
    "vtl", "vtl.linalg", "vtl.fft", "vtl.random", "vtl.autograd", "vtl.nn", "vtl.nn.functional",
    "vtl.nn.init", "vtl.nn.utils", "vtl.optim", "vtl.optim.lr_scheduler", "vtl.data",
    "vtl.datasets", "vtl.io", "vtl.train", "vtl.metrics", "vtl.backends", "vtl.special",
]


def _doctests() -> list:
    finder = doctest.DocTestFinder(recurse=True, exclude_empty=True)
    seen: set[int] = set()
    out = []
    for modname in DOCTEST_MODULES:
        mod = importlib.import_module(modname)
        for name in getattr(mod, "__all__", None) or [n for n in dir(mod) if not n.startswith("_")]:
            obj = getattr(mod, name)
            if inspect.ismodule(obj) or id(obj) in seen:
                continue
            if not (inspect.isclass(obj) or inspect.isroutine(obj)):
                continue
            seen.add(id(obj))
            for t in finder.find(obj, f"{modname}.{name}", module=inspect.getmodule(obj)):
                if t.examples:
                    out.append(pytest.param(t, id=t.name))
    return out


@pytest.mark.parametrize("test", _doctests())
def test_docstring_examples(test, tmp_path, monkeypatch):
    from vtl import nn, optim

    monkeypatch.chdir(tmp_path)
    test.globs.update({"vtl": vtl, "nn": nn, "optim": optim, "np": np})
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    with vtl.use_backend("numpy"):
        vtl.random.seed(0)
        runner.run(test, out=lambda s: None)
    result = runner.summarize(verbose=False)
    if result.failed:
        report = []
        runner2 = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS |
                                        doctest.NORMALIZE_WHITESPACE)
        with vtl.use_backend("numpy"):
            vtl.random.seed(0)
            runner2.run(test, out=report.append)
        pytest.fail("".join(report))


# -- the site -----------------------------------------------------------------------------

def test_site_builds_strict(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings_handlers.python")
    pytest.importorskip("material")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                        str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-8000:]
    assert (tmp_path / "site" / "reference" / "nn" / "modules" / "index.html").exists()
