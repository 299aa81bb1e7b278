"""Property tests of every function of the array API standard (2024.12, with the ``linalg``
and ``fft`` extensions) drawn with ``hypothesis.extra.array_api`` strategies.

Each namespace under test gets its own strategies namespace
(``make_strategies_namespace``): the wgpu library ``vtl.backends.wgpu`` when an adapter is
present, and ``vtl`` with each available backend as its default. Dtypes, shapes, arrays and
indices are drawn with those strategies; the same inputs go through NumPy, the oracle for
values, result dtypes and shapes (``array_api_strict`` for the promotion table of the data
type functions, where NumPy's rules are wider than the standard's). Float results are compared
to dtype-appropriate tolerances, NaN-aware, with exact values and signed zeros for the
functions the standard defines exactly.

The functions are grouped in tables of small case functions (elementwise, operators,
creation, data types, manipulation, indexing, searching, sets, sorting, statistical,
utility, linalg, fft, inspection, array object); ``test_tables_cover_the_standard`` keeps
the tables in step with ``tests/data/array_api_2024_12.txt``.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import array_api_strict as strict
import numpy as np
import pytest
from conftest import BACKENDS
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.array_api import make_strategies_namespace

import vtl
from vtl import backends

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
SPEC = Path(__file__).parent / "data" / "array_api_2024_12.txt"
FEW = settings(max_examples=5)  # the ci profile has 15; 5 per function keeps the file fast


class Api(NamedTuple):
    name: str
    ns: Any  # the array namespace under test
    xps: Any  # its hypothesis strategies namespace
    host: Callable[[Any], np.ndarray]  # an array of ns -> a NumPy copy


def _wgpu_library() -> Any:
    try:
        import vtl.backends.wgpu as w
    except ImportError:
        return None
    return w if w.is_available() else None


@pytest.fixture(params=["wgpu-library"] + [f"vtl-{b}" for b in BACKENDS])
def api(request: pytest.FixtureRequest):
    """The namespace under test with its strategies (``vtl`` with that default backend)."""
    if request.param == "wgpu-library":
        lib = _wgpu_library()
        if lib is None:
            pytest.skip("no WebGPU adapter")
        yield Api("wgpu", lib, make_strategies_namespace(lib), lib.to_numpy)
        return
    name = request.param[4:]
    b = backends.get(name)
    if not b.is_available:
        pytest.skip(f"backend {name} unavailable: {b.unavailable_reason}")
    with vtl.use_backend(name):
        yield Api(name, vtl, make_strategies_namespace(vtl), lambda t: t.numpy())


# -- comparisons --------------------------------------------------------------------------
def _tol(dtype: np.dtype, scale: float) -> float:
    single = dtype in (np.float32, np.complex64)
    return scale * (5e-5 if single else 1e-11)


def check(api: Api, got: Any, expected: Any, *, exact: bool = False, scale: float = 1.0,
          atol: float = 0.0) -> None:
    """``got`` (an array of the namespace) equals ``expected`` (NumPy): shape and dtype exactly;
    values exactly with signed zeros (``exact``; subnormals may flush) or within
    ``scale`` times the dtype's tolerance, relative to each value, plus ``atol``."""
    e = np.asarray(expected)
    assert tuple(got.shape) == e.shape, f"shape {tuple(got.shape)} != expected {e.shape}"
    assert np.dtype(got.dtype) == e.dtype, f"dtype {got.dtype} != expected {e.dtype}"
    g = np.asarray(api.host(got))
    assert g.dtype == e.dtype and g.shape == e.shape
    if e.dtype.kind not in "fc":
        np.testing.assert_array_equal(g, e)
        return
    nan_g, nan_e = np.isnan(g), np.isnan(e)
    np.testing.assert_array_equal(nan_g, nan_e, err_msg="NaN positions differ")
    g, e = g[~nan_e], e[~nan_e]
    inf = np.isinf(e)
    np.testing.assert_array_equal(g[inf], e[inf], err_msg="infinities differ")
    g, e = g[~inf].astype(np.complex128), e[~inf].astype(np.complex128)
    if exact:
        bound = np.finfo(expected.dtype).smallest_normal  # a flushed subnormal still passes
        for part in (np.real, np.imag):
            zero = (part(e) == 0) & (part(g) == 0)
            np.testing.assert_array_equal(np.signbit(part(g)[zero]), np.signbit(part(e)[zero]),
                                          err_msg="signs of zeros differ")
    else:
        r = _tol(np.asarray(expected).dtype, scale)
        bound = atol + r * (np.abs(e) + 0.05)
    err = np.abs(g - e)
    bad = err > bound
    assert not bad.any(), (f"{bad.sum()} of {bad.size} values differ; worst: got "
                           f"{g[bad][np.argmax(err[bad])]}, expected {e[bad][np.argmax(err[bad])]}")


def _np(name: str) -> Callable[..., Any]:
    return getattr(np, name)


def quiet(f: Callable[..., Any], *args: Any, **kw: Any) -> Any:
    """The NumPy oracle without its overflow/invalid warnings."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return f(*args, **kw)


# -- strategies ---------------------------------------------------------------------------
KINDS = {
    "bool": lambda x: x.boolean_dtypes(),
    "int": lambda x: x.integer_dtypes(),
    "intbool": lambda x: x.integer_dtypes() | x.boolean_dtypes(),
    "real": lambda x: x.real_dtypes(),
    "num": lambda x: x.numeric_dtypes(),
    "rfloat": lambda x: x.floating_dtypes(),
    "cfloat": lambda x: x.complex_dtypes(),
    "float": lambda x: x.floating_dtypes() | x.complex_dtypes(),
    "all": lambda x: x.scalar_dtypes(),
}


def dtypes(api: Api, kind: str) -> st.SearchStrategy:
    """Dtypes of ``kind`` that the namespace's default device supports."""
    have = set(api.ns.__array_namespace_info__().dtypes())
    return KINDS[kind](api.xps).filter(lambda d: np.dtype(d).name in have)


def shapes(api: Api, min_dims: int = 0, max_dims: int = 3, min_side: int = 0,
           max_side: int = 4) -> st.SearchStrategy:
    return api.xps.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side,
                                max_side=max_side)


SPECIALS = [math.nan, math.inf, -math.inf, 0.0, -0.0]


def elements(api: Api, dtype: Any, lo: float | None = None, hi: float | None = None,
             specials: bool = False) -> st.SearchStrategy:
    """Values of ``dtype`` in [lo, hi] (both parts for complex), optionally with
    nan/+-inf/+-0 (real floats)."""
    dt = np.dtype(dtype)
    if dt.kind == "c":
        part = np.dtype(f"float{dt.itemsize * 4}")
        p = api.xps.from_dtype(part, min_value=lo, max_value=hi, allow_nan=False,
                               allow_infinity=False)
        # complex division by zero is an infinity whose parts the standard leaves open
        return st.builds(complex, p, p).filter(lambda z: abs(z) > 1e-3)
    if dt.kind == "f":
        s = api.xps.from_dtype(dt, min_value=lo, max_value=hi, allow_nan=False,
                               allow_infinity=False)
        return s | st.sampled_from(SPECIALS) if specials else s
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return api.xps.from_dtype(dt, min_value=int(max(info.min, lo if lo is not None
                                                        else info.min)),
                                  max_value=int(min(info.max, hi if hi is not None
                                                    else info.max)))
    return api.xps.from_dtype(dt)


def draw_array(api: Api, data: st.DataObject, kind: str = "all", shape: Any = None,
               lo: float | None = None, hi: float | None = None, specials: bool = False,
               dtype: Any = None, label: str = "x", **shape_kw: Any) -> Any:
    dt = data.draw(dtypes(api, kind), label=f"{label}.dtype") if dtype is None else dtype
    if shape is None:
        shape = data.draw(shapes(api, **shape_kw), label=f"{label}.shape")
    return data.draw(api.xps.arrays(dt, shape, elements=elements(api, dt, lo, hi, specials)),
                     label=label)


def _strict(dt: Any) -> Any:
    return getattr(strict, np.dtype(dt).name)


def promotable(d1: Any, kind_names: list[str]) -> list[str]:
    """Dtype names in ``kind_names`` that the standard promotes with ``d1``."""
    out = []
    for n in kind_names:
        try:
            strict.result_type(_strict(d1), _strict(n))
        except TypeError:
            continue
        out.append(n)
    return out


def draw_pair(api: Api, data: st.DataObject, kind: str, lo1=None, hi1=None, lo2=None,
              hi2=None, specials: bool = False, el2: Any = None) -> tuple[Any, Any]:
    """Two arrays of mutually promotable dtypes of ``kind`` and broadcastable shapes."""
    d1 = data.draw(dtypes(api, kind), label="x1.dtype")
    names = sorted(api.ns.__array_namespace_info__().dtypes())
    pool = [n for n in names if _kind_has(kind, n)]
    d2 = getattr(api.ns, data.draw(st.sampled_from(promotable(d1, pool)), label="x2.dtype"))
    bs = data.draw(api.xps.mutually_broadcastable_shapes(2, min_dims=0, max_dims=3,
                                                         max_side=3), label="shapes")
    x1 = data.draw(api.xps.arrays(d1, bs.input_shapes[0],
                                  elements=elements(api, d1, lo1, hi1, specials)), label="x1")
    e2 = elements(api, d2, lo2, hi2, specials) if el2 is None else el2(d2)
    x2 = data.draw(api.xps.arrays(d2, bs.input_shapes[1], elements=e2), label="x2")
    return x1, x2


def _kind_has(kind: str, name: str) -> bool:
    d = np.dtype(name)
    return {"bool": d.kind == "b", "int": d.kind in "iu", "intbool": d.kind in "iub",
            "real": d.kind in "iuf", "num": d.kind in "iufc", "rfloat": d.kind == "f",
            "cfloat": d.kind == "c", "float": d.kind in "fc", "all": True}[kind]


# -- elementwise: unary -------------------------------------------------------------------
# name: (dtype kind, domain (lo, hi) of real values or None, NumPy name, exact for reals)
UNARY: dict[str, tuple[str, tuple[float, float] | None, str | None, bool]] = {
    "abs": ("num", None, None, True), "acos": ("float", (-1.5, 1.5), None, False),
    "acosh": ("float", (0.5, 50), None, False), "asin": ("float", (-1.5, 1.5), None, False),
    "asinh": ("float", (-50, 50), None, False), "atan": ("float", (-50, 50), None, False),
    "atanh": ("float", (-1.5, 1.5), None, False),
    "bitwise_invert": ("intbool", None, None, True), "ceil": ("real", None, None, True),
    "conj": ("num", None, None, True), "cos": ("float", (-50, 50), None, False),
    "cosh": ("float", (-20, 20), None, False), "exp": ("float", (-30, 30), None, False),
    "expm1": ("float", (-5, 5), None, False), "floor": ("real", None, None, True),
    "imag": ("cfloat", None, None, True), "isfinite": ("num", None, None, True),
    "isinf": ("num", None, None, True), "isnan": ("num", None, None, True),
    "log": ("float", (-1, 100), None, False), "log10": ("float", (-1, 100), None, False),
    "log1p": ("float", (-2, 10), None, False), "log2": ("float", (-1, 100), None, False),
    "logical_not": ("bool", None, None, True), "negative": ("num", None, None, True),
    "positive": ("num", None, None, True), "real": ("num", None, None, True),
    "reciprocal": ("float", (-100, 100), None, False), "round": ("num", None, None, True),
    "sign": ("num", None, None, True), "signbit": ("rfloat", None, None, True),
    "sin": ("float", (-50, 50), None, False), "sinh": ("float", (-20, 20), None, False),
    "sqrt": ("float", (-1, 100), None, False), "square": ("num", (-1e3, 1e3), None, True),
    "tan": ("float", (-1.375, 1.375), None, False), "tanh": ("float", (-20, 20), None, False),
    "trunc": ("real", None, None, True),
}
COMPLEX_DOMAIN = {"exp": (-20, 20), "expm1": (-20, 20), "cosh": (-20, 20), "sinh": (-20, 20),
                  "tanh": (-20, 20)}


@FEW
@pytest.mark.parametrize("name", sorted(UNARY))
@given(data=st.data())
def test_unary_elementwise(api, name, data):
    kind, dom, npname, exact = UNARY[name]
    lo, hi = dom if dom else (None, None)
    dt = np.dtype(data.draw(dtypes(api, kind), label="dtype"))
    if dt.kind == "c":
        lo, hi = COMPLEX_DOMAIN.get(name, (-5, 5))
    x = draw_array(api, data, dtype=dt, lo=lo, hi=hi, specials=dt.kind == "f")
    got = getattr(api.ns, name)(x)
    expected = quiet(_np(npname or name), api.host(x))
    if name in ("real", "imag", "conj") and dt.kind != "c":
        expected = np.asarray(expected, dtype=dt)
    check(api, got, expected, exact=exact and dt.kind != "c", scale=4 if dt.kind == "c" else 1)


# -- elementwise: binary ------------------------------------------------------------------
def _nonzero_int(api):
    def el(d):
        return elements(api, d).filter(lambda v: v not in (0, -1))
    return el


def _shift(api):
    return lambda d: elements(api, d, 0, 7)


def _small_exp(api):
    return lambda d: elements(api, d, 0, 4) if np.dtype(d).kind in "iu" else elements(
        api, d, -5, 5, specials=np.dtype(d).kind == "f")


# name: (dtype kind, domain of x1, NumPy name, exact for reals, x2 elements or None)
BINARY: dict[str, tuple] = {
    "add": ("num", (-1e4, 1e4), None, True, None),
    "atan2": ("rfloat", (-50, 50), None, False, None),
    "bitwise_and": ("intbool", None, None, True, None),
    "bitwise_left_shift": ("int", (0, 50), None, True, _shift),
    "bitwise_or": ("intbool", None, None, True, None),
    "bitwise_right_shift": ("int", None, None, True, _shift),
    "bitwise_xor": ("intbool", None, None, True, None),
    "copysign": ("rfloat", None, None, True, None),
    "divide": ("float", (-1e4, 1e4), None, True, None),
    "equal": ("all", None, None, True, None),
    "floor_divide": ("real", (-1e4, 1e4), None, True, _nonzero_int),
    "greater": ("real", None, None, True, None),
    "greater_equal": ("real", None, None, True, None),
    "hypot": ("rfloat", (-1e4, 1e4), None, False, None),
    "less": ("real", None, None, True, None), "less_equal": ("real", None, None, True, None),
    "logaddexp": ("rfloat", (-50, 50), None, False, None),
    "logical_and": ("bool", None, None, True, None),
    "logical_or": ("bool", None, None, True, None),
    "logical_xor": ("bool", None, None, True, None),
    "maximum": ("real", None, None, True, None), "minimum": ("real", None, None, True, None),
    "multiply": ("num", (-1e3, 1e3), None, True, None),
    "nextafter": ("rfloat", None, None, True, None),
    "not_equal": ("all", None, None, True, None),
    "pow": ("num", (-10, 10), None, False, _small_exp),
    "remainder": ("real", (-1e4, 1e4), None, True, _nonzero_int),
    "subtract": ("num", (-1e4, 1e4), None, True, None),
}


def _binary_inputs(api, name, data):
    kind, dom, _, _, el2 = BINARY[name]
    lo, hi = dom if dom else (None, None)
    specials = name not in ("floor_divide",)  # NumPy differs from the standard for inf // y
    x1, x2 = draw_pair(api, data, kind, lo, hi, lo, hi, specials=specials,
                       el2=el2(api) if el2 else None)
    return x1, x2


def _binary_expected(name, a, b):
    f = _np({"bitwise_left_shift": "left_shift", "bitwise_right_shift": "right_shift",
             "bitwise_invert": "invert"}.get(name, name))
    return quiet(f, a, b)


def _binary_check(api, name, got, expected, a, b):
    exact = BINARY[name][3] and np.asarray(expected).dtype.kind != "c"
    atol = 0.0
    if name == "remainder" and np.asarray(expected).dtype.kind == "f":
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        q = quiet(np.divide, a, b)
        assume(not (np.abs(q[np.isfinite(q)]) > 2.0**20).any())
        exact, big = False, [abs(v) for v in (a, b) if v.size and np.isfinite(v).all()]
        atol = 4 * np.finfo(expected.dtype).eps * max([1.0] + [float(v.max()) for v in big])
    check(api, got, expected, exact=exact, scale=20 if name == "pow" else 4, atol=atol)


@FEW
@pytest.mark.parametrize("name", sorted(BINARY))
@given(data=st.data())
def test_binary_elementwise(api, name, data):
    x1, x2 = _binary_inputs(api, name, data)
    if name == "pow" and np.dtype(x1.dtype).kind in "iu":
        assume(np.dtype(x2.dtype).kind in "iu")
    a, b = api.host(x1), api.host(x2)
    _binary_check(api, name, getattr(api.ns, name)(x1, x2), _binary_expected(name, a, b), a, b)


@FEW
@given(data=st.data())
def test_clip(api, data):
    x = draw_array(api, data, "real", lo=-100, hi=100)
    lo = data.draw(st.none() | elements(api, x.dtype, -100, 0), label="min")
    hi = data.draw(st.none() | elements(api, x.dtype, 0, 100), label="max")
    got = api.ns.clip(x, lo, hi)
    expected = api.host(x) if lo is None and hi is None else np.clip(api.host(x), lo, hi)
    check(api, got, expected.astype(x.dtype), exact=True)


# -- operators, reflected and in-place ----------------------------------------------------
OPERATORS = {
    "__add__": "add", "__sub__": "subtract", "__mul__": "multiply", "__truediv__": "divide",
    "__floordiv__": "floor_divide", "__mod__": "remainder", "__pow__": "pow",
    "__and__": "bitwise_and", "__or__": "bitwise_or", "__xor__": "bitwise_xor",
    "__lshift__": "bitwise_left_shift", "__rshift__": "bitwise_right_shift",
    "__eq__": "equal", "__ne__": "not_equal", "__lt__": "less", "__le__": "less_equal",
    "__gt__": "greater", "__ge__": "greater_equal",
}
UNARY_OPERATORS = {"__abs__": "abs", "__neg__": "negative", "__pos__": "positive",
                   "__invert__": "bitwise_invert"}


NO_REFLECTED_INT = ("floor_divide", "remainder", "pow", "bitwise_left_shift",
                    "bitwise_right_shift")


COMPARISONS = ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")


@FEW
@pytest.mark.parametrize("op", sorted(OPERATORS))
@given(data=st.data())
def test_binary_operators(api, op, data):
    """``x1 op x2``, ``x1 op scalar``, ``scalar op x1`` (reflected) and ``x1 op= x2``."""
    name = OPERATORS[op]
    x1, x2 = _binary_inputs(api, name, data)
    if name == "pow" and np.dtype(x1.dtype).kind in "iu":
        assume(np.dtype(x2.dtype).kind in "iu")
    a, b = api.host(x1), api.host(x2)
    _binary_check(api, name, getattr(x1, op)(x2), _binary_expected(name, a, b), a, b)
    el2 = BINARY[name][4]
    lo, hi = BINARY[name][1] or (None, None)
    s = data.draw(el2(api)(x1.dtype) if el2 else elements(api, x1.dtype, lo, hi),
                  label="scalar")
    _binary_check(api, name, getattr(x1, op)(s), _binary_expected(name, a, s), a, s)
    if name not in COMPARISONS and not (np.dtype(x1.dtype).kind in "iu"
                                        and name in NO_REFLECTED_INT):
        _binary_check(api, name, getattr(x1, "__r" + op[2:])(s), _binary_expected(name, s, a),
                      s, a)
    if name in COMPARISONS:
        return
    # in place: x2 of x1's dtype, broadcast to x1's shape
    s2 = data.draw(api.xps.broadcastable_shapes(a.shape, min_side=0, max_dims=a.ndim).filter(
        lambda t: np.broadcast_shapes(t, a.shape) == a.shape), label="inplace.shape")
    e2 = el2(api)(x1.dtype) if el2 else elements(api, x1.dtype, lo, hi)
    x3 = data.draw(api.xps.arrays(x1.dtype, s2, elements=e2), label="inplace.x2")
    c = api.host(x3)
    expected = _binary_expected(name, a, c).astype(a.dtype)
    y = x1
    y = getattr(y, "__i" + op[2:])(x3)
    assert y is x1
    _binary_check(api, name, x1, expected, a, c)


@FEW
@pytest.mark.parametrize("op", sorted(UNARY_OPERATORS))
@given(data=st.data())
def test_unary_operators(api, op, data):
    name = UNARY_OPERATORS[op]
    x = draw_array(api, data, UNARY[name][0])
    expected = quiet(_np(name), api.host(x))
    check(api, getattr(x, op)(), expected, exact=np.dtype(x.dtype).kind != "c")


@FEW
@given(data=st.data())
def test_matmul_operator(api, data):
    x1 = draw_array(api, data, "real", lo=-10, hi=10, min_dims=1, min_side=1, label="x1")
    k = x1.shape[-1]
    s2 = data.draw(st.sampled_from([(k,), (k, 2), (*x1.shape[:-2], k, 3)]), label="x2.shape")
    x2 = draw_array(api, data, dtype=x1.dtype, shape=s2, lo=-10, hi=10, label="x2")
    check(api, x1 @ x2, quiet(np.matmul, api.host(x1), api.host(x2)), scale=20, atol=1e-3)
