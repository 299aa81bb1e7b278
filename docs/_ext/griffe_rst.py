"""Griffe extension: render vtl's reST-flavoured docstrings as Markdown.

vtl's docstrings use reST inline markup (``code``, :func:`name`, :math:`x`), ``>>>``
examples and ``::`` literal blocks. This extension rewrites them for mkdocstrings'
Markdown renderer before they are parsed: roles and double backticks become code spans,
examples become ``pycon`` code blocks and literal blocks ``text`` code blocks.
"""

from __future__ import annotations

import importlib
import inspect
import re
from typing import Any

import griffe

_ROLE = re.compile(
    r":(?:py:)?(?:func|class|meth|attr|mod|data|obj|exc|const|ref|math|term):`~?([^`]+)`")
_DOUBLE = re.compile(r"``(.+?)``")


def _role(match: re.Match[str]) -> str:
    text = match.group(1)
    if match.group(0).startswith(":math:"):
        return f"`{text}`"
    if "<" in text and text.endswith(">"):  # :ref:`title <target>`
        text = text[: text.index("<")].strip()
    elif match.group(0).split("`")[1].startswith("~"):
        text = text.rsplit(".", 1)[-1]
    return f"`{text}`"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def to_markdown(text: str) -> str:
    """Return ``text`` (a cleaned docstring) with reST markup rewritten as Markdown."""
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith(">>>"):  # a doctest block runs to the next blank line
            pad = " " * _indent(line)
            out.append(pad + "```pycon")
            while i < len(lines) and lines[i].strip():
                out.append(lines[i])
                i += 1
            out.append(pad + "```")
            continue
        if stripped.endswith("::") and not stripped.startswith("```"):
            # a literal block: the following lines indented deeper than this one
            base = _indent(line)
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            if j < len(lines) and _indent(lines[j]) > base:
                head = line.rstrip()[:-2].rstrip()
                out.append(_inline(head + ":") if head else "")
                out.append("")
                out.append(" " * base + "```text")
                k = j
                block: list[str] = []
                while k < len(lines) and (not lines[k].strip() or _indent(lines[k]) > base):
                    block.append(lines[k])
                    k += 1
                while block and not block[-1].strip():
                    block.pop()
                inner = min(_indent(b) for b in block if b.strip())
                out.extend(" " * base + b[inner:] if b.strip() else "" for b in block)
                out.append(" " * base + "```")
                out.append("")
                i = k
                continue
        out.append(_inline(line))
        i += 1
    return "\n".join(out)


def _inline(line: str) -> str:
    line = line.replace("`\\ ", "`")  # reST's escaped space after markup: ``Parameter``\ s
    line = _ROLE.sub(_role, line)
    return _DOUBLE.sub(lambda m: f"`{m.group(1)}`", line)


class ReSTToMarkdown(griffe.Extension):
    """Rewrite each docstring once, when griffe has loaded its object."""

    def on_instance(self, *, obj: Any, **kwargs: Any) -> None:
        doc = getattr(obj, "docstring", None)
        if doc is not None and not getattr(doc, "_vtl_markdown", False):
            doc.value = to_markdown(doc.value)
            doc._vtl_markdown = True


class ExpandNestedExports(griffe.Extension):
    """Resolve names re-exported through ``__all__`` lists built from submodules' lists.

    Griffe expands exports from the top package down and stops at a package without an
    ``__all__`` (``vtl`` itself), so ``from .modules import *`` in ``vtl.nn`` (whose
    ``vtl.nn.modules.__all__`` is assembled from its submodules' lists) brings in nothing.
    This expands every module's exports and adds, for each exported name a module lacks,
    an alias to the submodule that exports it: ``vtl.nn.Linear`` then resolves.
    """

    def on_package(self, *, pkg: Any, loader: Any, **kwargs: Any) -> None:
        def walk(mod: Any) -> None:
            subs = [s for s in mod.modules.values() if not s.is_alias]
            for sub in subs:
                walk(sub)
            if mod.exports is None:
                return
            loader.expand_exports(mod)
            for name in mod.exports:
                if not isinstance(name, str) or name in mod.members:
                    continue
                for sub in subs:
                    if sub.exports and name in sub.exports and name in sub.members:
                        mod.set_member(name, griffe.Alias(name, f"{sub.path}.{name}", parent=mod))
                        break

        walk(pkg)


_KINDS = {
    inspect.Parameter.POSITIONAL_ONLY: griffe.ParameterKind.positional_only,
    inspect.Parameter.POSITIONAL_OR_KEYWORD: griffe.ParameterKind.positional_or_keyword,
    inspect.Parameter.VAR_POSITIONAL: griffe.ParameterKind.var_positional,
    inspect.Parameter.KEYWORD_ONLY: griffe.ParameterKind.keyword_only,
    inspect.Parameter.VAR_KEYWORD: griffe.ParameterKind.var_keyword,
}


class FactoryFunctions(griffe.Extension):
    """Document module-level functions and classes that factories build.

    (``sin = _unary("sin", ...)``, ``LazyConv2d = _lazy_conv(Conv2d, False)``.)

    Static analysis sees such a name as an attribute with a call for its value and no
    docstring. For those attributes this reads the built object from the imported module
    (vtl imports nothing heavier than NumPy, and needs no GPU) and documents it as a
    function or class with its runtime signature and docstring. An attribute that merely renames a
    function or class of its module (``mse = mean_squared_error``) becomes an alias of it.
    """

    def on_package(self, *, pkg: Any, loader: Any, **kwargs: Any) -> None:
        def walk(mod: Any) -> None:
            for sub in [s for s in mod.modules.values() if not s.is_alias]:
                walk(sub)
            for name, member in list(mod.members.items()):
                if member.is_alias or not member.is_attribute or member.docstring is not None:
                    continue
                value = member.value
                if isinstance(value, griffe.ExprName) and value.name in mod.members:
                    target = mod.members[value.name]
                    if not target.is_alias and (target.is_function or target.is_class):
                        mod.set_member(name, griffe.Alias(name, target, parent=mod))
                elif isinstance(value, griffe.ExprCall):
                    func = self._runtime_function(mod, name, member)
                    if func is not None:
                        mod.set_member(name, func)

        walk(pkg)

    @staticmethod
    def _runtime_function(mod: Any, name: str, member: Any) -> Any:
        try:
            obj = getattr(importlib.import_module(mod.path), name)
        except (ImportError, AttributeError):
            return None
        if not (inspect.isfunction(obj) or inspect.isclass(obj)) or not obj.__doc__:
            return None
        lines = {"lineno": member.lineno, "endlineno": member.endlineno}
        if inspect.isclass(obj):  # a class built by a factory: its docstring and __init__
            out = griffe.Class(name, **lines)
            init = griffe.Function("__init__", parameters=_parameters(obj.__init__), **lines)
            out.set_member("__init__", init)
        else:
            out = griffe.Function(name, parameters=_parameters(obj), **lines)
        out.docstring = griffe.Docstring(to_markdown(inspect.cleandoc(obj.__doc__)), parent=out)
        out.docstring._vtl_markdown = True
        return out


def _parameters(fn: Any) -> Any:
    """``fn``'s runtime signature as griffe parameters."""
    return griffe.Parameters(*(
        griffe.Parameter(p.name, kind=_KINDS[p.kind],
                         default=None if p.default is p.empty else repr(p.default))
        for p in inspect.signature(fn).parameters.values()))
