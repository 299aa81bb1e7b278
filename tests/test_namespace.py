"""vtl implements every name of the array API standard 2024.12 with the standard's
signature (the list is data: tests/data/array_api_2024_12.txt)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import vtl

_DATA = Path(__file__).parent / "data" / "array_api_2024_12.txt"
_KIND = {
    inspect.Parameter.POSITIONAL_ONLY: "pos",
    inspect.Parameter.POSITIONAL_OR_KEYWORD: "pos_or_kw",
    inspect.Parameter.KEYWORD_ONLY: "kw",
    inspect.Parameter.VAR_POSITIONAL: "var",
    inspect.Parameter.VAR_KEYWORD: "varkw",
}


def _entries() -> list[tuple[str, list[tuple[str, str, bool]] | None]]:
    out = []
    for line in _DATA.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r"([\w.]+)(?:\((.*)\))?", line)
        assert m, line
        name, params = m.group(1), m.group(2)
        if params is None:
            out.append((name, None))
            continue
        ps = []
        for p in filter(None, (s.strip() for s in params.split(","))):
            pname, kind = p.split(":")
            ps.append((pname, kind.rstrip("="), kind.endswith("=")))
        out.append((name, ps))
    return out


ENTRIES = _entries()
FUNCTIONS = [e for e in ENTRIES if not e[0].startswith(("array.", "info."))]
INFO = [e for e in ENTRIES if e[0].startswith("info.")]
ARRAY = [e for e in ENTRIES if e[0].startswith("array.")]


def test_data_file_counts():
    main = [n for n, _ in FUNCTIONS if "." not in n and n not in (
        "__array_namespace_info__", "broadcast_shapes", "isin")]
    assert len(main) == 133
    assert len([n for n, _ in FUNCTIONS if n.startswith("linalg.")]) == 23
    assert len([n for n, _ in FUNCTIONS if n.startswith("fft.")]) == 14


def _resolve(root: object, dotted: str) -> object:
    obj = root
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def _check_signature(fn: object, expected: list[tuple[str, str, bool]], name: str) -> None:
    params = [p for p in inspect.signature(fn).parameters.values() if p.name != "self"]
    got = {p.name: p for p in params}
    for i, (pname, kind, has_default) in enumerate(expected):
        assert pname in got, f"{name}: missing parameter {pname!r}"
        p = got[pname]
        assert _KIND[p.kind] == kind, f"{name}: {pname} is {_KIND[p.kind]}, standard says {kind}"
        if kind in ("pos", "pos_or_kw"):
            assert params[i].name == pname, f"{name}: positional parameter {i} should be {pname}"
        assert (p.default is not inspect.Parameter.empty) == has_default, (
            f"{name}: {pname} {'needs' if has_default else 'must not have'} a default"
        )
    names = {e[0] for e in expected}
    for p in params:
        if p.name not in names:
            assert p.kind is inspect.Parameter.KEYWORD_ONLY and \
                p.default is not inspect.Parameter.empty, \
                f"{name}: extra parameter {p.name!r} must be keyword-only with a default"


@pytest.mark.parametrize("name,params", FUNCTIONS, ids=[n for n, _ in FUNCTIONS])
def test_function_exists_with_standard_signature(name, params):
    fn = _resolve(vtl, name)
    assert callable(fn), f"vtl.{name} is not callable"
    if params is not None:
        _check_signature(fn, params, f"vtl.{name}")


@pytest.mark.parametrize("name,params", INFO, ids=[n for n, _ in INFO])
def test_inspection_namespace(name, params):
    info = vtl.__array_namespace_info__()
    fn = getattr(info, name.split(".", 1)[1])
    _check_signature(fn, params or [], name)


@pytest.mark.parametrize("name,params", ARRAY, ids=[n for n, _ in ARRAY])
def test_array_object_attribute(name, params):
    attr = name.split(".", 1)[1]
    assert hasattr(vtl.Tensor, attr), f"vtl.Tensor lacks {attr}"
    if params is not None:
        _check_signature(getattr(vtl.Tensor, attr), params, f"Tensor.{attr}")


def test_constants_dtypes_and_version():
    import math

    assert vtl.__array_api_version__ == "2024.12"
    assert vtl.e == math.e and vtl.pi == math.pi and vtl.inf == math.inf
    assert math.isnan(vtl.nan) and vtl.newaxis is None
    names = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
             "float32", "float64", "complex64", "complex128"]
    for n in names:
        assert getattr(vtl, n).name == n
    assert len({getattr(vtl, n) for n in names}) == 13


def test_array_api_code_runs_on_vtl_tensors(backend):
    """Functions written only against array_namespace() run unchanged on vtl tensors."""
    import numpy as np
    from array_api_compat import array_namespace

    def softmax(x):
        xp = array_namespace(x)
        z = x - xp.max(x, axis=-1, keepdims=True)
        ez = xp.exp(z)
        return ez / xp.sum(ez, axis=-1, keepdims=True)

    def normalize(x):
        xp = array_namespace(x)
        return (x - xp.mean(x)) / xp.sqrt(xp.sum((x - xp.mean(x)) ** 2) / x.shape[0])

    def polyval(c, x):
        xp = array_namespace(c, x)
        out = xp.zeros_like(x)
        for i in range(c.shape[0]):
            out = out * x + c[i]
        return out

    data = np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 4.0]], dtype=np.float32)
    x = vtl.asarray(data)
    ref = np.exp(data - data.max(-1, keepdims=True))
    np.testing.assert_allclose(softmax(x).numpy(), ref / ref.sum(-1, keepdims=True), rtol=1e-6)
    v = data[0]
    np.testing.assert_allclose(normalize(vtl.asarray(v)).numpy(),
                               (v - v.mean()) / v.std(), rtol=1e-5)
    c = vtl.asarray([2.0, -1.0, 0.5])
    np.testing.assert_allclose(polyval(c, x).numpy(), 2 * data**2 - data + 0.5, rtol=1e-6)
    # ... and they are differentiable
    w = vtl.asarray(data, requires_grad=True)
    vtl.sum(softmax(w)[:, 0]).backward()
    assert w.grad.shape == w.shape
