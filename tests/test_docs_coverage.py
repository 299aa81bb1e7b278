"""Every public name is in the API reference (docs/reference/) and has a docstring.

The public names are each module's ``__all__`` (for ``vtl`` itself, its namespace less
submodules). A name is in the reference when a page has a ``::: path`` entry for it, or for
an object it is bound to (``vtl.nn.utils.clip_grad_norm_`` is ``vtl.optim.clip_grad_norm_``),
or, for values that are not functions or classes (dtypes, constants), names it as
```vtl.name```. ``docs/_ext/gen_reference.py`` writes the reference pages.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import textwrap
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
    "vtl.nn.grad", "vtl.nn.parameter", "vtl.nn.utils.stateless", "vtl.amp", "vtl.special",
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


# -- Args, Returns and Raises sections ------------------------------------------------------
#
# In the modules of SECTION_MODULES every public function and class documents, in Google
# style, each of its parameters in an ``Args:`` section (a class in its docstring or its
# ``__init__``'s; ``*args``/``**kwargs`` excepted), what it returns in ``Returns:`` (or
# ``Yields:``) when it returns something, and a ``Raises:`` section when its body raises.

SECTION_MODULES = ["vtl.nn", "vtl.nn.functional", "vtl.optim", "vtl.optim.lr_scheduler",
                   "vtl.optim.swa_utils", "vtl.data", "vtl.data.transforms", "vtl.io", "vtl.train",
                   "vtl.train.callbacks", "vtl.metrics", "vtl.autograd",
                   "vtl.autograd.functional", "vtl.func", "vtl.random", "vtl.nn.init",
                   "vtl.nn.utils", "vtl.nn.utils.rnn", "vtl.nn.utils.parametrize",
                   "vtl.nn.utils.parametrizations", "vtl.nn.utils.stateless", "vtl.utils",
                   "vtl.utils.checkpoint", "vtl.nn.grad", "vtl.nn.parameter", "vtl.distributed",
                   "vtl.datasets", "vtl.datasets.synthetic", "vtl.datasets.text", "vtl.linalg",
                   "vtl.return_types", "vtl.cuda", "vtl.capture", "vtl.fft", "vtl.backends",
                   "vtl", "vtl.amp"]

_HEADER = re.compile(r"^(\w[\w ]*):\s*$")
_ENTRY_NAME = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:")
_ARGS = {"args", "arguments", "parameters", "params", "keyword args", "keyword arguments",
         "other args", "other arguments", "other parameters"}


def _sections(doc: str | None) -> dict[str, list[str]]:
    """The Google-style sections of a docstring: lower-cased title to body lines."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in inspect.cleandoc(doc or "").splitlines():
        m = _HEADER.match(line)
        if m:
            current = out.setdefault(m.group(1).lower(), [])
        elif line.strip() and not line[0].isspace():
            current = None
        elif current is not None:
            current.append(line)
    return out


def _entries(body: list[str]) -> list[str]:
    """The names of a section's entries: its lines at the section's least indentation."""
    lines = [b for b in body if b.strip()]
    if not lines:
        return []
    base = min(len(b) - len(b.lstrip()) for b in lines)
    names = []
    for b in lines:
        if len(b) - len(b.lstrip()) == base:
            m = _ENTRY_NAME.match(b.strip())
            if m:
                names.append(m.group(1))
    return names


def _own_nodes(fn: ast.AST):
    """The nodes of a function's body, less those of nested functions and classes."""
    stack = list(ast.iter_child_nodes(fn))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def _function_ast(fn) -> ast.AST | None:
    try:
        src = textwrap.dedent(inspect.getsource(inspect.unwrap(fn)))
    except (OSError, TypeError):
        return None
    tree = ast.parse(src)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return node
    return None


def _returns_value(fn, node) -> bool:
    ann = inspect.signature(fn).return_annotation
    if ann is not inspect.Signature.empty:
        return ann not in (None, "None", "NoReturn", "Never", type(None))
    if node is None:
        return False
    return any(isinstance(n, (ast.Yield, ast.YieldFrom)) or (
        isinstance(n, ast.Return) and n.value is not None
        and not (isinstance(n.value, ast.Constant) and n.value.value is None))
        for n in _own_nodes(node))


def _raises(node) -> bool:
    return node is not None and any(isinstance(n, ast.Raise) and n.exc is not None
                                    for n in _own_nodes(node))


def _parameters(obj) -> list[str] | None:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    return [p.name for p in sig.parameters.values()
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name not in ("self", "cls")
            and not p.name.startswith("_")]


def _section_names(modname: str) -> list[str]:
    """The public names of ``modname``: its ``__all__``, or, for a module without one (such
    as ``vtl.autograd.functional``, whose functions ``vtl`` exports), the functions and
    classes it defines whose names do not start with ``_``."""
    mod = importlib.import_module(modname)
    if modname == "vtl" or hasattr(mod, "__all__"):
        return public_names(modname)
    return [n for n, v in vars(mod).items() if not n.startswith("_")
            and (inspect.isfunction(v) or inspect.isclass(v))
            and getattr(v, "__module__", None) == modname]


def section_problems(modname: str) -> list[str]:
    """``name: problem`` for each public function or class of ``modname`` that lacks a section."""
    mod = importlib.import_module(modname)
    problems = []
    for n in _section_names(modname):
        obj = getattr(mod, n)
        if not (inspect.isclass(obj) or inspect.isfunction(obj) or inspect.ismethod(obj)):
            continue
        if inspect.isclass(obj):
            init = obj.__init__ if "__init__" in vars(obj) or not inspect.isfunction(
                obj.__init__) else obj.__init__
            secs = _sections(obj.__dict__.get("__doc__"))
            own = _sections(getattr(init, "__doc__", None)) if inspect.isfunction(init) else {}
            node = _function_ast(init) if inspect.isfunction(init) else None
            params = _parameters(obj) or []
            is_function = False
        else:
            secs, own = _sections(obj.__doc__), {}
            node = _function_ast(obj)
            params = _parameters(obj) or []
            is_function = True
        documented = [e for k in _ARGS for s in (secs, own) for e in _entries(s.get(k, []))]
        missing = [p for p in params if p not in documented]
        unknown = [d for d in documented if d.lstrip("*") not in params and not d.startswith("*")]
        titles = set(secs) | set(own)
        why = []
        if missing:
            why.append(f"Args lacks {missing}")
        if unknown:
            why.append(f"Args names unknown parameters {unknown}")
        if is_function and _returns_value(obj, node) and not titles & {"returns", "yields"}:
            why.append("no Returns")
        if _raises(node) and "raises" not in titles:
            why.append("no Raises")
        if why:
            problems.append(f"{modname}.{n}: " + "; ".join(why))
    return problems


@pytest.mark.parametrize("modname", SECTION_MODULES)
def test_docstring_sections(modname):
    problems = section_problems(modname)
    assert not problems, "docstrings without their Google-style sections:\n" + "\n".join(problems)
