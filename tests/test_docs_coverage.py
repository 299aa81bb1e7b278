"""Every public name is in the API reference (docs/reference/) and has a docstring.

The public names are each module's ``__all__`` (for ``vtl`` itself, its namespace less
submodules). A name is in the reference when a page has a ``::: path`` entry for it, or for
an object it is bound to (``vtl.nn.utils.clip_grad_norm_`` is ``vtl.optim.clip_grad_norm_``),
or, for values that are not functions or classes (dtypes, constants), names it as
```vtl.name```. ``docs/_ext/gen_reference.py`` writes the reference pages.
"""

from __future__ import annotations

import importlib
import inspect
import re
import types
from pathlib import Path

import pytest

import vtl

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "docs" / "reference"

MODULES = [
    "vtl", "vtl.linalg", "vtl.fft", "vtl.random", "vtl.autograd", "vtl.nn", "vtl.nn.functional",
    "vtl.nn.init", "vtl.nn.utils", "vtl.nn.utils.rnn", "vtl.nn.utils.parametrize",
    "vtl.nn.utils.parametrizations", "vtl.optim", "vtl.optim.lr_scheduler",
    "vtl.optim.swa_utils", "vtl.data", "vtl.data.transforms", "vtl.datasets",
    "vtl.datasets.synthetic", "vtl.datasets.text", "vtl.io", "vtl.train", "vtl.metrics",
    "vtl.distributed", "vtl.backends", "vtl.backends.wgpu", "vtl.utils",
    "vtl.utils.checkpoint", "vtl.cuda", "vtl.capture", "vtl.return_types", "vtl.func",
    "vtl.nn.grad", "vtl.nn.parameter", "vtl.nn.utils.stateless", "vtl.amp",
]

_ENTRY = re.compile(r"^::: ([\w.]+)", re.MULTILINE)


def _standard_names() -> set[str]:
    """The functions of the array API standard (tests/data), documented by the standard."""
    names = set()
    for line in (ROOT / "tests" / "data" / "array_api_2024_12.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            names.add(line.split("(", 1)[0].strip().rsplit(".", 1)[-1])
    return names


def public_names(modname: str) -> list[str]:
    mod = importlib.import_module(modname)
    if modname == "vtl":
        names = [n for n in dir(vtl) if not n.startswith("_") and n != "annotations"]
        names.append("__array_namespace_info__")
    else:
        names = list(mod.__all__)
    return [n for n in names if not isinstance(getattr(mod, n), types.ModuleType)]


def _resolve(path: str):
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for p in parts[i:]:
            obj = getattr(obj, p)
        return obj
    raise ImportError(path)


def _reference() -> tuple[set[str], set[int], str]:
    paths: set[str] = set()
    text = ""
    for page in sorted(REFERENCE.rglob("*.md")):
        t = page.read_text()
        text += t
        paths.update(_ENTRY.findall(t))
    objects = set()
    for p in paths:
        objects.add(id(_resolve(p)))
    return paths, objects, text


def _documentable(obj) -> bool:
    return inspect.isclass(obj) or inspect.isroutine(obj) or callable(obj)


def _has_docstring(obj) -> bool:
    if inspect.isclass(obj):
        return bool((obj.__dict__.get("__doc__") or "").strip())
    return bool((getattr(obj, "__doc__", None) or "").strip())


REF_PATHS, REF_OBJECTS, REF_TEXT = _reference()


def test_reference_entries_resolve():
    """Every ``::: path`` on a reference page names an existing object."""
    for p in REF_PATHS:
        _resolve(p)


@pytest.mark.parametrize("modname", MODULES)
def test_public_names_are_in_the_reference(modname):
    mod = importlib.import_module(modname)
    missing = []
    for n in public_names(modname):
        obj = getattr(mod, n)
        full = f"{modname}.{n}"
        if full in REF_PATHS or (_documentable(obj) and id(obj) in REF_OBJECTS):
            continue
        if f"`{full}`" in REF_TEXT:
            continue
        missing.append(full)
    assert not missing, f"not in docs/reference (run docs/_ext/gen_reference.py): {missing}"


@pytest.mark.parametrize("modname", MODULES)
def test_public_names_have_docstrings(modname):
    mod = importlib.import_module(modname)
    exempt = _standard_names() if modname == "vtl.backends.wgpu" else set()
    missing = [f"{modname}.{n}" for n in public_names(modname)
               if n not in exempt and _documentable(getattr(mod, n))
               and not _has_docstring(getattr(mod, n))]
    assert not missing, f"public names without a docstring: {missing}"


def test_count():
    """The reference documents several hundred public names (a guard against a bad parse)."""
    total = sum(len(public_names(m)) for m in MODULES)
    assert total > 600
