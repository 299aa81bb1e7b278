"""Fused kernels of the NumPy backend.

``multi_tensor_apply`` runs an elementwise update program (see
``vtl/optim/_programs.py``) over the tensors of a parameter group with NumPy
ufuncs writing into their ``out`` argument: the arrays the program updates
(parameter, state) are written in place and intermediate values go to a few
reused scratch arrays, instead of a new array per operation and a final
copy into the parameter as in the portable rules. Large contiguous tensors are
updated in pieces of up to :data:`CHUNK` elements (each through every operation
while it is in cache), spread over the kernels' thread pool (``vtl.backends._common.threads``;
ufuncs release the GIL); elementwise updates give the same values either way.
Each program is translated once into a Python function (one ufunc call per
operation, in the program's order of operations, so the values equal the
portable rules'); a multiplication by a scalar that is exactly 1.0 (e.g.
``1 - dampening`` without dampening) is skipped, which does not change any value.
Scalars are passed as 0-d arrays of the tensors' dtype (the values NumPy's
promotion of a Python scalar gives, through a faster ufunc path).
"""

from __future__ import annotations

import ast
from typing import Any

import numpy as np

from .._common import threads as _pool
from .._common.norms import pairwise
from .._dtypes import kind as _dkind
from . import _compiled
from .nn import _FLOATS

#: Largest piece (elements) a large tensor is updated in: the few arrays of a step
#: (parameter, gradient, state, temporaries) stay in the core's cache through all its
#: operations. On several threads the pieces are smaller (down to :data:`MIN_PIECE`), about
#: four per thread, so that the pool's threads get equal shares.
CHUNK = 1 << 17
MIN_PIECE = 1 << 14

#: Elements of a step from which its pieces are spread over the pool (below it the pool's
#: cost of waking its threads exceeds what a second core gains).
PARALLEL_MIN = 1 << 20

_UFUNCS = {ast.Add: "_add", ast.Sub: "_subtract", ast.Mult: "_multiply", ast.Div: "_divide"}
_PYOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}
_GLOBALS = {
    "_add": np.add, "_subtract": np.subtract, "_multiply": np.multiply, "_divide": np.divide,
    "_negative": np.negative, "_sqrt": np.sqrt, "_maximum": np.maximum,
    "_copyto": np.copyto,
}
_CALLS = {"sqrt": ("_sqrt", 1), "max": ("_maximum", 2)}
_asarray = np.asarray


class _Compiler:
    """Translate a program into straight-line ufunc calls with ``out=`` buffers."""

    def __init__(self, prog: Any, ones: frozenset[str]) -> None:
        self.prog = prog
        self.ones = ones
        self.lines: list[str] = []
        self.nregs = 0
        self.free: list[str] = []
        # name -> ("array" | "scalar" | "reg", python expression)
        self.env: dict[str, tuple[str, str]] = {}
        for a in prog.arrays:
            self.env[a] = ("array", f"a_{a}")
        for s in prog.scalars:
            self.env[s] = ("scalar", f"s_{s}")

    def _reg(self) -> str:
        if self.free:
            return self.free.pop()
        self.nregs += 1
        return f"r{self.nregs - 1}"

    def _release(self, operand: tuple[str, str, bool]) -> None:
        kind, code, anon = operand
        if kind == "reg" and anon:
            self.free.append(code)

    def expr(self, node: ast.AST, out: str | None) -> tuple[str, str, bool]:
        """Emit code for ``node``; returns ``(kind, code, anonymous)``. ``out`` (an array
        or register name) receives the value of the outermost array operation."""
        if isinstance(node, ast.Name):
            kind, code = self.env[node.id]
            return kind, code, False
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            a = self.expr(node.operand, None)
            if a[0] == "scalar":
                return "scalar", f"(-{a[1]})", False
            return self._emit("_negative", [a], out)
        if isinstance(node, ast.BinOp) and type(node.op) in _UFUNCS:
            a = self.expr(node.left, None)
            b = self.expr(node.right, None)
            if a[0] == "scalar" and b[0] == "scalar":
                return "scalar", f"({a[1]} {_PYOPS[type(node.op)]} {b[1]})", False
            if isinstance(node.op, ast.Mult):
                if a[0] == "scalar" and a[1][2:] in self.ones and out is None:
                    return b
                if b[0] == "scalar" and b[1][2:] in self.ones and out is None:
                    return a
            return self._emit(_UFUNCS[type(node.op)], [a, b], out)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in _CALLS:
            fn, nargs = _CALLS[node.func.id]
            args = [self.expr(x, None) for x in node.args]
            if len(args) != nargs:
                raise ValueError(f"{node.func.id}() takes {nargs} argument(s)")
            return self._emit(fn, args, out)
        raise ValueError(f"unsupported program expression {ast.dump(node)}")

    def _emit(self, fn: str, args: list[tuple[str, str, bool]], out: str | None
              ) -> tuple[str, str, bool]:
        for a in args:
            self._release(a)
        target = out if out is not None else self._reg()
        sep = ", out=" if fn == "_maximum" else ", "
        self.lines.append(f"{fn}({', '.join(a[1] for a in args)}{sep}{target})")
        if out is not None:
            return "array", out, False
        return "reg", target, True

    def compile(self) -> Any:
        prog = self.prog
        body = prog.body
        for i, (target, text) in enumerate(body):
            node = ast.parse(text, mode="eval").body
            later = {t for t, _ in body[i + 1:]}
            if target in prog.writes:
                dest = f"a_{target}"
                res = self.expr(node, dest)
                if res[1] != dest:  # a plain name (or a skipped product): copy it in
                    if res[0] == "scalar":
                        self.lines.append(f"{dest}[...] = {res[1]}")
                    else:
                        self.lines.append(f"_copyto({dest}, {res[1]})")
                    self._release(res)
                continue
            res = self.expr(node, None)
            if res[0] == "reg" and res[2]:
                self.env[target] = ("reg", res[1])  # the register now holds a name
            elif res[0] == "scalar":
                self.env[target] = res[:2]
            else:  # an alias of an array or register: copy if the array is written later
                if res[1] in {f"a_{t}" for t in later if t in prog.writes}:
                    r = self._reg()
                    self.lines.append(f"_copyto({r}, {res[1]})")
                    self.env[target] = ("reg", r)
                else:
                    self.env[target] = res[:2]
        regs = [f"r{i}" for i in range(self.nregs)]
        names = ", ".join(f"a_{a}" for a in prog.arrays)
        scal = "".join(f", s_{s}" for s in prog.scalars)
        src = [f"def _run(tensors, scratch{scal}):",
               f"    for {names}{',' if len(prog.arrays) == 1 else ''} in tensors:"]
        src += [f"        {r} = scratch({i}, a_p)" for i, r in enumerate(regs)]
        src += [f"        {line}" for line in self.lines] or ["        pass"]
        code = "\n".join(src) + "\n"
        ns: dict[str, Any] = dict(_GLOBALS)
        exec(compile(code, f"<numpy {prog.name} step>", "exec"), ns)  # noqa: S102
        fn = ns["_run"]
        fn.source = code
        return fn


def compile_program(prog: Any, ones: frozenset[str] = frozenset()) -> Any:
    """A function ``run(tensors, scratch, *scalars)`` applying ``prog`` in place to each
    tuple of arrays in ``tensors`` (``ones``: scalars known to be exactly 1.0);
    ``scratch(i, like)`` gives the ``i``-th temporary, an array of ``like``'s shape."""
    return _Compiler(prog, ones).compile()


def _scratch(i: int, like: Any) -> Any:
    """Temporary ``i`` of the calling thread, shaped as ``like`` (reused across calls)."""
    return _pool.scratch(f"step{i}", like.shape, like.dtype)


def _pieces(tensors: list[tuple[Any, ...]], piece: int) -> list[tuple[Any, ...]]:
    """The work items of a step: C-contiguous tensors of more than ``piece`` elements as flat
    pieces of ``piece`` elements (views: the updates land in the tensors), others whole."""
    items: list[tuple[Any, ...]] = []
    for arrs in tensors:
        n = arrs[0].size
        if n > piece and all(a.flags.c_contiguous for a in arrs):
            flats = [a.reshape(-1) for a in arrs]
            items.extend(tuple(f[i:i + piece] for f in flats) for i in range(0, n, piece))
        else:
            items.append(arrs)
    return items


def _compiled_runner(step: Any, fallback: Any, cvals: list[Any]) -> Any:
    """``run(items, scratch, *svals)``: the compiled ``step`` (scalars ``cvals``) over the
    C-contiguous items, the ufunc program ``fallback`` over the others."""

    def run(items: list[tuple[Any, ...]], scratch: Any, *svals: Any) -> None:
        rest = []
        for arrs in items:
            if all(a.flags.c_contiguous for a in arrs):
                step(*[a.reshape(-1) for a in arrs], *cvals)
            else:
                rest.append(arrs)
        if rest:
            fallback(rest, scratch, *svals)

    return run


class MultiTensorApply:
    """The ``multi_tensor_apply`` kernel: ``kern(program, tensors, scalars)``.

    ``tensors`` is a list of tuples of NumPy arrays (one tuple per parameter, in
    ``program.arrays`` order, all of one floating dtype); the arrays named in
    ``program.writes`` are updated in place. With the compiled kernels
    (``vtl.backends.numpy._compiled``), float32 and float64 steps run each program as one
    compiled pass over memory (``_optim_kernels``), with the same values.
    """

    def __init__(self) -> None:
        self._compiled: dict[tuple, Any] = {}
        self._steps: dict[tuple, Any] = {}

    #: the ``skip`` flag is taken (read on the device)
    takes_skip = True

    def supports(self, dtype: Any) -> bool:
        return _dkind(dtype) == "f"

    def _step(self, prog: Any, dtype: Any) -> Any | None:
        """The compiled step of ``prog``, or None where it does not run."""
        if dtype not in _FLOATS or not _compiled.available():  # (numba: no float16)
            return None
        step = self._steps.get(prog.key)
        if step is None:
            from ._optim_kernels import compile_step

            step = self._steps[prog.key] = compile_step(prog)
        return step

    def __call__(self, prog: Any, tensors: list[tuple[Any, ...]],
                 scalars: tuple[float, ...], skip: Any = None) -> None:
        if not tensors or (skip is not None and skip != 0):  # host memory: free to read
            return
        ones = frozenset(s for s, v in zip(prog.scalars, scalars, strict=True) if v == 1.0)
        key = (prog.key, ones)
        fn = self._compiled.get(key)
        if fn is None:
            fn = self._compiled[key] = compile_program(prog, ones)
        # 0-d arrays of the tensors' dtype hold the same values as the Python scalars
        # would after NumPy's promotion, and ufuncs take them faster
        dt = tensors[0][0].dtype
        svals = [_asarray(v, dtype=dt) for v in scalars]
        step = self._step(prog, dt)
        if step is not None:
            fn = _compiled_runner(step, fn, [dt.type(v) for v in scalars])
        total = 0
        for arrs in tensors:
            total += arrs[0].size
        threads = _pool.num_threads() if total >= PARALLEL_MIN else 1
        piece = CHUNK if threads <= 1 else \
            max(MIN_PIECE, min(CHUNK, -(-total // (4 * threads))))
        items = _pieces(tensors, piece)
        if threads > 1 and len(items) > 1:
            _pool.parallel_for(lambda i, j: fn(items[i:j], _scratch, *svals), len(items),
                               threads)
        else:
            fn(items, _scratch, *svals)


class NumpyGradNorm:
    """``kernel("grad_norm")`` in NumPy for the 2-norm of float32/float64 arrays of one
    dtype: the general path's operations on raw arrays (each array's sum of squares by
    ``vecdot``, their pairwise sums, the square root: the same bits) without its graph of
    small ops. The scaling declines: the general path's rebinds each gradient's array
    instead of writing into it, so arrays a program shares with the gradients (``p.grad =
    vtl.asarray(numpy_array)`` shares its memory) keep their values, as before."""

    def supports(self, dtype: Any, norm_type: float) -> bool:
        return np.dtype(dtype) in _FLOATS and norm_type == 2.0

    def norm(self, arrays: list[Any], norm_type: float) -> Any | None:
        from .namespace import vecdot

        if norm_type != 2.0 or not arrays:
            return None
        dt = arrays[0].dtype
        if dt not in _FLOATS or any(type(a) is not np.ndarray or a.dtype != dt
                                    for a in arrays):
            return None
        parts = [vecdot(a.reshape(-1), a.reshape(-1)) for a in arrays if a.size]
        if not parts:
            return np.asarray(0.0, dtype=dt)
        return np.asarray(np.sqrt(pairwise(np.add, parts)))

    def clip_(self, arrays: list[Any], norm: Any, max_norm: float) -> bool:
        return False
