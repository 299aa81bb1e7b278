"""Update rules as tiny straight-line programs, for fused multi-tensor kernels.

A :class:`Program` is a list of assignments ``name = expression`` over per-element values
(parameter, gradient, state) and per-launch scalars (learning rate, betas, bias
corrections...). Expressions use only names, ``+ - * /``, parentheses, ``sqrt(x)`` and
``max(x, y)``, so the same text is valid C/CUDA, WGSL and Python. A backend that registers
the optional kernel ``"multi_tensor_apply"`` compiles a program once and runs it over all
the tensors of a parameter group in one launch (``vtl/backends/*/optim.py``; the contract is
``MultiTensorApplyKernel`` in ``vtl.backends.kernels``). :meth:`Program.evaluate` runs the
same text with an array namespace: the tests use it to check the fused arithmetic against
the portable rules in ``_functional.py`` without a GPU.

The programs compute exactly what the portable rules compute, in the same
order of operations, except RAdam's: its program is one rule for both of the
algorithm's phases (so that a captured step stays valid across the switch),
equal to the portable rule up to rounding.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

_TOKEN = re.compile(r"\s*(?:([A-Za-z_][A-Za-z_0-9]*)|([-+*/(),]))")
_FUNCS = frozenset({"sqrt", "max"})


def _check_expr(expr: str, known: set[str]) -> None:
    pos = 0
    expr = expr.rstrip()
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if m is None:
            raise ValueError(f"bad token in program expression {expr!r} at {pos}")
        name = m.group(1)
        if name is not None and name not in _FUNCS and name not in known:
            raise ValueError(f"program expression {expr!r} reads undefined {name!r}")
        pos = m.end()


@dataclass(frozen=True)
class Program:
    """A fused elementwise update over several arrays of equal shape.

    ``arrays`` are loaded per element (in this order), ``scalars`` are the
    same for every element, ``body`` is a sequence of ``(target, expression)``
    and ``writes`` the arrays stored back (updated in place).
    """

    name: str
    arrays: tuple[str, ...]
    writes: tuple[str, ...]
    scalars: tuple[str, ...]
    body: tuple[tuple[str, str], ...]
    temps: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        known = set(self.arrays) | set(self.scalars)
        temps: list[str] = []
        for target, expr in self.body:
            _check_expr(expr, known)
            if target in self.scalars or target in _FUNCS:
                raise ValueError(f"program {self.name}: cannot assign to {target!r}")
            if target not in known:
                temps.append(target)
                known.add(target)
        if not set(self.writes) <= set(self.arrays):
            raise ValueError(f"program {self.name}: writes must be a subset of arrays")
        object.__setattr__(self, "temps", tuple(temps))

    @property
    def key(self) -> tuple:
        """A hashable identity for kernel caches."""
        return (self.arrays, self.writes, self.scalars, self.body)

    def evaluate(self, xp: Any, arrays: Sequence[Any], scalars: Sequence[float]) -> list[Any]:
        """Run the program with the array namespace ``xp``; return the new ``writes``."""
        env: dict[str, Any] = dict(zip(self.arrays, arrays, strict=True))
        env.update(zip(self.scalars, scalars, strict=True))
        env["sqrt"] = xp.sqrt
        env["max"] = xp.maximum
        for target, expr in self.body:
            env[target] = eval(_compiled(expr), _EVAL_GLOBALS, env)  # noqa: S307
        return [env[name] for name in self.writes]


_CODE: dict[str, Any] = {}
# Expressions are checked to use only known names (``_check_expr``), so the real
# builtins stay available: CuPy imports lazily while launching a kernel.
_EVAL_GLOBALS: dict[str, Any] = {}


def _compiled(expr: str) -> Any:
    code = _CODE.get(expr)
    if code is None:
        code = _CODE[expr] = compile(expr, "<program>", "eval")
    return code


def _program(name: str, arrays: tuple[str, ...], writes: tuple[str, ...],
             body: list[tuple[str, str]], scalars: tuple[str, ...]) -> Program:
    return Program(name, arrays, writes, scalars, tuple(body))


_CACHE: dict[tuple, Program] = {}


def _cached(key: tuple, build: Any) -> Program:
    prog = _CACHE.get(key)
    if prog is None:
        prog = _CACHE[key] = build()
    return prog


def _coupled_gradient(body: list[tuple[str, str]], scalars: list[str], maximize: bool,
                      weight_decay: bool) -> None:
    """The common first lines: negate for ``maximize``, add L2 weight decay (scalar wd)."""
    if maximize:
        body.append(("g", "-g"))
    if weight_decay:
        body.append(("g", "g + wd * p"))
        scalars.append("wd")


def sgd(*, momentum: bool, first: bool, nesterov: bool, weight_decay: bool,
        maximize: bool) -> Program:
    """SGD; scalars: lr, wd, mu (momentum), omd (1 - dampening)."""

    def build() -> Program:
        body: list[tuple[str, str]] = []
        scalars = ["lr"]
        _coupled_gradient(body, scalars, maximize, weight_decay)
        arrays: tuple[str, ...] = ("p", "g")
        writes: tuple[str, ...] = ("p",)
        if momentum:
            arrays, writes = ("p", "g", "buf"), ("p", "buf")
            scalars.append("mu")
            if first:
                body.append(("buf", "g"))
            else:
                body.append(("buf", "mu * buf + omd * g"))
                scalars.append("omd")
            body.append(("g", "g + mu * buf") if nesterov else ("g", "buf"))
        body.append(("p", "p - lr * g"))
        return _program("sgd", arrays, writes, body, tuple(scalars))

    return _cached(("sgd", momentum, first, nesterov, weight_decay, maximize), build)


def adam(*, amsgrad: bool, weight_decay: bool, decoupled: bool, maximize: bool) -> Program:
    """Adam/AdamW; scalars: wd, decay (1 - lr*wd), omb1, b2, omb2, bc2_sqrt, eps, step_size."""

    def build() -> Program:
        body: list[tuple[str, str]] = []
        scalars: list[str] = []
        if maximize:
            body.append(("g", "-g"))
        if weight_decay and decoupled:
            body.append(("p", "p * decay"))
            scalars.append("decay")
        elif weight_decay:
            body.append(("g", "g + wd * p"))
            scalars.append("wd")
        body.append(("m", "m + omb1 * (g - m)"))
        body.append(("v", "v * b2 + omb2 * (g * g)"))
        scalars += ["omb1", "b2", "omb2", "bc2_sqrt", "eps", "step_size"]
        src = "v"
        arrays: tuple[str, ...] = ("p", "g", "m", "v")
        writes: tuple[str, ...] = ("p", "m", "v")
        if amsgrad:
            body.append(("vmax", "max(vmax, v)"))
            src = "vmax"
            arrays += ("vmax",)
            writes += ("vmax",)
        body.append(("denom", f"sqrt({src}) / bc2_sqrt + eps"))
        body.append(("p", "p - step_size * (m / denom)"))
        return _program("adam", arrays, writes, body, tuple(scalars))

    return _cached(("adam", amsgrad, weight_decay, decoupled, maximize), build)


def rmsprop(*, centered: bool, momentum: bool, weight_decay: bool, maximize: bool) -> Program:
    """RMSprop; scalars: wd, alpha, oma (1 - alpha), eps, mu, lr."""

    def build() -> Program:
        body: list[tuple[str, str]] = []
        scalars: list[str] = []
        _coupled_gradient(body, scalars, maximize, weight_decay)
        body.append(("sq", "sq * alpha + oma * (g * g)"))
        scalars += ["alpha", "oma", "eps", "lr"]
        arrays: tuple[str, ...] = ("p", "g", "sq")
        if centered:
            body.append(("ga", "ga + oma * (g - ga)"))
            body.append(("avg", "sqrt(sq - ga * ga) + eps"))
            arrays += ("ga",)
        else:
            body.append(("avg", "sqrt(sq) + eps"))
        if momentum:
            body.append(("buf", "buf * mu + g / avg"))
            body.append(("p", "p - lr * buf"))
            scalars.append("mu")
            arrays += ("buf",)
        else:
            body.append(("p", "p - lr * (g / avg)"))
        writes = tuple(a for a in arrays if a != "g")
        return _program("rmsprop", arrays, writes, body, tuple(scalars))

    return _cached(("rmsprop", centered, momentum, weight_decay, maximize), build)


def adagrad(*, weight_decay: bool, maximize: bool) -> Program:
    """Adagrad; scalars: wd, clr (decayed lr), eps."""

    def build() -> Program:
        body: list[tuple[str, str]] = []
        scalars: list[str] = []
        _coupled_gradient(body, scalars, maximize, weight_decay)
        body.append(("s", "s + g * g"))
        body.append(("std", "sqrt(s) + eps"))
        body.append(("p", "p - clr * (g / std)"))
        scalars += ["eps", "clr"]
        return _program("adagrad", ("p", "g", "s"), ("p", "s"), body, tuple(scalars))

    return _cached(("adagrad", weight_decay, maximize), build)


def _decay_or_l2(body: list[tuple[str, str]], scalars: list[str], maximize: bool,
                 weight_decay: bool, decoupled: bool) -> None:
    """Negate for ``maximize``; decoupled decay (``p * decay``) or the L2 term."""
    if maximize:
        body.append(("g", "-g"))
    if weight_decay and decoupled:
        body.append(("p", "p * decay"))
        scalars.append("decay")
    elif weight_decay:
        body.append(("g", "g + wd * p"))
        scalars.append("wd")


def nadam(*, weight_decay: bool, decoupled: bool, maximize: bool) -> Program:
    """NAdam; scalars: wd or decay, omb1, b2, omb2, bc2, eps, cg (gradient coefficient),
    cm (momentum coefficient)."""

    def build() -> Program:
        body: list[tuple[str, str]] = []
        scalars: list[str] = []
        _decay_or_l2(body, scalars, maximize, weight_decay, decoupled)
        body.append(("m", "m + omb1 * (g - m)"))
        body.append(("v", "v * b2 + omb2 * (g * g)"))
        body.append(("denom", "sqrt(v / bc2) + eps"))
        body.append(("p", "p + cg * g / denom"))
        body.append(("p", "p + cm * m / denom"))
        scalars += ["omb1", "b2", "omb2", "bc2", "eps", "cg", "cm"]
        return _program("nadam", ("p", "g", "m", "v"), ("p", "m", "v"), body, tuple(scalars))

    return _cached(("nadam", weight_decay, decoupled, maximize), build)


def radam(*, weight_decay: bool, decoupled: bool, maximize: bool) -> Program:
    """RAdam as one rule for both phases (so a captured step stays valid when the
    rectification starts): ``p - (m / bc1) * lr * (rc / (sqrt(v) + eps) + un)`` with
    ``rc = rect * sqrt(bc2), un = 0`` once ``rho_t > 5`` and ``rc = 0, un = 1`` before.
    Scalars: wd or decay, omb1, b2, omb2, bc1, lr, rc, eps, un."""

    def build() -> Program:
        body: list[tuple[str, str]] = []
        scalars: list[str] = []
        _decay_or_l2(body, scalars, maximize, weight_decay, decoupled)
        body.append(("m", "m + omb1 * (g - m)"))
        body.append(("v", "v * b2 + omb2 * (g * g)"))
        body.append(("p", "p - m / bc1 * lr * (rc / (sqrt(v) + eps) + un)"))
        scalars += ["omb1", "b2", "omb2", "bc1", "lr", "rc", "eps", "un"]
        return _program("radam", ("p", "g", "m", "v"), ("p", "m", "v"), body, tuple(scalars))

    return _cached(("radam", weight_decay, decoupled, maximize), build)


def adamax(*, weight_decay: bool, maximize: bool) -> Program:
    """Adamax; scalars: wd, omb1, b2, eps, nclr (minus the bias-corrected lr)."""

    def build() -> Program:
        body: list[tuple[str, str]] = []
        scalars: list[str] = []
        _coupled_gradient(body, scalars, maximize, weight_decay)
        body.append(("m", "m + omb1 * (g - m)"))
        body.append(("u", "max(u * b2, max(g, -g) + eps)"))
        body.append(("p", "p + nclr * m / u"))
        scalars += ["omb1", "b2", "eps", "nclr"]
        return _program("adamax", ("p", "g", "m", "u"), ("p", "m", "u"), body, tuple(scalars))

    return _cached(("adamax", weight_decay, maximize), build)
