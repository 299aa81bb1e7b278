"""PyTorch's argument names beside the array API standard's, added to a function by one
decorator where it is defined.

``@torch_names(dim="axis", keepdim="keepdims")`` on ``sum`` makes
``vtl.sum(x, dim=1, keepdim=True)`` the call ``vtl.sum(x, axis=1, keepdims=True)``. The
standard's parameters keep their names, kinds and positions; each alias is an extra
keyword-only parameter. Giving a parameter under both names is a ``TypeError``, as is
leaving out a required one under both.

The wrapper is generated Python source with the function's own parameter list (compiled
once, at import): the call costs one extra function call and one identity test per alias,
with no ``**kwargs`` packing. ``inspect.signature`` shows the standard's signature followed
by the aliases.

``torch_form=fn`` (with a ``dim`` alias): when the call gives ``dim=``, ``fn`` is called
with the resolved standard arguments instead of the function. ``vtl.max(x, dim=1)`` then
returns PyTorch's named tuple ``(values, indices)`` while ``vtl.max(x, axis=1)`` keeps the
standard's result.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

__all__ = ["torch_names"]


class _Unset:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<unset>"


_UNSET: Any = _Unset()

_P = inspect.Parameter


def _both(fname: str, name: str, alias: str) -> TypeError:
    return TypeError(f"{fname}() got both {name}= and {alias}= (two names of one "
                     "parameter); pass one of them")


def _missing(fname: str, name: str, aliases: tuple[str, ...]) -> TypeError:
    alt = " or ".join(f"{a}=" for a in aliases)
    return TypeError(f"{fname}() missing required argument {name!r} (or {alt})")


def unbiased_to_correction(unbiased: Any) -> int:
    """PyTorch's ``unbiased`` flag of ``std``/``var`` as the standard's ``correction``."""
    if not isinstance(unbiased, bool):
        raise TypeError(f"unbiased must be a bool, got {unbiased!r}")
    return 1 if unbiased else 0


def _note(aliases: dict[str, tuple[str, Any]], origin: str) -> str:
    pairs = ", ".join(f"``{a}=`` for ``{t}=``" for a, (t, _) in aliases.items())
    return (f"{origin}'s names are accepted too: {pairs} (a parameter given under both "
            "names is a ``TypeError``).")


def torch_names(*, torch_form: Callable | None = None, origin: str = "PyTorch",
                **aliases: str | tuple[str, Callable[[Any], Any]]) -> Callable:
    """Decorator: accept each ``alias=`` (a PyTorch name) for the parameter it names, or
    for ``(name, convert)`` the value ``convert(alias_value)`` (``unbiased`` ->
    ``correction``). See the module docstring. ``origin`` names where the aliases come
    from in the docstring note (``vtl.nn.functional``'s PyTorch-named functions take the
    array API's ``axis=`` with ``origin="The array API"``)."""
    spec = {a: (t, None) if isinstance(t, str) else (t[0], t[1]) for a, t in aliases.items()}
    if torch_form is not None and "dim" not in spec:
        raise ValueError("torch_names(): torch_form needs a dim alias")

    def deco(fn: Callable) -> Callable:
        return _wrap(fn, spec, torch_form, origin)

    return deco


def _wrap(fn: Callable, spec: dict[str, tuple[str, Any]], torch_form: Callable | None,
          origin: str) -> Callable:
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    names = {p.name for p in params}
    targets: dict[str, list[str]] = {}
    for alias, (target, _) in spec.items():
        if target not in names or alias in names:
            raise ValueError(f"torch_names(): {fn.__name__} has no parameter {target!r} "
                             f"or already has {alias!r}")
        targets.setdefault(target, []).append(alias)
    fname = fn.__name__
    env: dict[str, Any] = {"_f": fn, "_U": _UNSET, "_both": _both, "_missing": _missing,
                           "_tf": torch_form}
    head: list[str] = []
    call: list[str] = []
    body: list[str] = []
    kw_started = False
    last_pos_only = max((i for i, p in enumerate(params) if p.kind is _P.POSITIONAL_ONLY),
                        default=-1)
    for i, p in enumerate(params):
        if p.kind in (_P.VAR_POSITIONAL, _P.VAR_KEYWORD):
            raise ValueError(f"torch_names(): {fname} takes *args or **kwargs")
        if p.kind is _P.KEYWORD_ONLY and not kw_started:
            head.append("*")
            kw_started = True
        if p.name in targets:
            head.append(f"{p.name}=_U")
        elif p.default is not _P.empty:
            env[f"_d{i}"] = p.default
            head.append(f"{p.name}=_d{i}")
        else:
            head.append(p.name)
        if i == last_pos_only:
            head.append("/")
        call.append(p.name if p.kind is _P.POSITIONAL_ONLY else f"{p.name}={p.name}")
    if not kw_started:
        head.append("*")
    head.extend(f"{a}=_U" for a in spec)
    if torch_form is not None:
        body.append("    _torch = dim is not _U")
    for target, alist in targets.items():
        for alias in alist:
            conv = spec[alias][1]
            value = alias
            if conv is not None:
                env[f"_c_{alias}"] = conv
                value = f"_c_{alias}({alias})"
            body += [f"    if {alias} is not _U:",
                     f"        if {target} is not _U:",
                     f"            raise _both({fname!r}, {target!r}, {alias!r})",
                     f"        {target} = {value}"]
        default = sig.parameters[target].default
        body.append(f"    if {target} is _U:")
        if default is _P.empty:
            body.append(f"        raise _missing({fname!r}, {target!r}, {tuple(alist)!r})")
        else:
            env[f"_dflt_{target}"] = default
            body.append(f"        {target} = _dflt_{target}")
    args = ", ".join(call)
    if torch_form is not None:
        body += ["    if _torch:", f"        return _tf({args})"]
    body.append(f"    return _f({args})")
    src = f"def {fname}({', '.join(head)}):\n" + "\n".join(body) + "\n"
    exec(compile(src, f"<torch_names of {fn.__module__}.{fname}>", "exec"), env)  # noqa: S102
    wrapper = env[fname]
    wrapper.__module__ = fn.__module__
    wrapper.__qualname__ = fn.__qualname__
    wrapper.__annotations__ = dict(fn.__annotations__)
    wrapper.__wrapped__ = fn
    extra = [_P(a, _P.KEYWORD_ONLY, default=None) for a in spec]
    wrapper.__signature__ = sig.replace(parameters=params + extra)
    doc = inspect.cleandoc(fn.__doc__ or "")
    wrapper.__doc__ = (doc + "\n\n" if doc else "") + _note(spec, origin)
    return wrapper
