"""Compiled optimizer steps of the NumPy backend (numba, the ``vtl[cpu]`` extra).

An update program (``vtl/optim/_programs.py``) becomes one loop over the elements of its
flat arrays: each element's parameter, gradient and state are loaded once, the program's
assignments run on them in order with the arrays' dtype, and the written values are
stored back: one pass over memory instead of one per operation. The arithmetic is the
ufunc path's (the same operations in the same order, no contraction into fused
multiply-adds, division by zero and ``sqrt`` of a negative number giving IEEE results),
so the values are the same bits. ``max`` is NumPy's ``maximum``: nan if either operand is
nan, else the second operand where they compare equal (0.0 and -0.0).
"""

from __future__ import annotations

import ast
from typing import Any

import numpy as np

from ._compiled import kernel


@kernel()
def _maximum(x, y):  # pragma: no cover - compiled
    return x if (x > y or x != x) else y


class _Rename(ast.NodeTransformer):
    """Program names to the kernel's local names; ``sqrt``/``max`` to the kernel's
    functions."""

    def __init__(self, names: dict[str, str]) -> None:
        self.names = names

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.copy_location(ast.Name(self.names[node.id], ast.Load()), node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        assert isinstance(node.func, ast.Name)
        fn = {"sqrt": "_sqrt", "max": "_maximum"}[node.func.id]
        args = [self.visit(a) for a in node.args]
        return ast.copy_location(ast.Call(ast.Name(fn, ast.Load()), args, []), node)


def kernel_source(prog: Any) -> str:
    """Python source of ``_step(arrays..., scalars...)``: ``prog`` applied to each element
    of its 1-d arrays (all of one length), in place."""
    names = {a: f"v_{a}" for a in prog.arrays}
    names.update({s: f"s_{s}" for s in prog.scalars})
    names.update({t: f"v_{t}" for t in prog.temps})
    args = [f"a_{a}" for a in prog.arrays] + [f"s_{s}" for s in prog.scalars]
    lines = [f"def _step({', '.join(args)}):", f"    for i in range(a_{prog.arrays[0]}.size):"]
    lines += [f"        v_{a} = a_{a}[i]" for a in prog.arrays]
    for target, text in prog.body:
        expr = _Rename(names).visit(ast.parse(text, mode="eval").body)
        lines.append(f"        v_{target} = {ast.unparse(expr)}")
    lines += [f"        a_{a}[i] = v_{a}" for a in prog.writes]
    return "\n".join(lines) + "\n"


def compile_step(prog: Any) -> Any:
    """``step(arrays..., scalars...)``: ``prog`` in one compiled pass over its 1-d arrays
    (C-contiguous, all of one length and one dtype, float32 or float64), in place;
    ``scalars`` are NumPy scalars of that dtype."""
    ns: dict[str, Any] = {"_sqrt": np.sqrt, "_maximum": _maximum}
    exec(compile(kernel_source(prog), f"<numba {prog.name} step>", "exec"), ns)  # noqa: S102
    return kernel(error_model="numpy")(ns["_step"])
