"""Data type functions: astype (values, copies, gradients), can_cast, result_type,
finfo, iinfo and isdtype against NumPy and the standard's promotion table."""

from __future__ import annotations

import itertools

import array_api_strict as aas
import numpy as np
import pytest

import vtl
from tests.helpers import assert_close, check_grad, check_grad_matches_numpy, supported_dtypes

NAMES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
         "float32", "float64", "complex64", "complex128"]
KIND = {"bool": "b", "int8": "i", "int16": "i", "int32": "i", "int64": "i", "uint8": "i",
        "uint16": "i", "uint32": "i", "uint64": "i", "float32": "f", "float64": "f",
        "complex64": "f", "complex128": "f"}  # the standard's promotion families
PAIRS = list(itertools.product(NAMES, NAMES))
SAME_KIND = [(a, b) for a, b in PAIRS if KIND[a] == KIND[b]]
CROSS_KIND = [(a, b) for a, b in PAIRS if KIND[a] != KIND[b]]


def _strict_result(a: str, b: str) -> str | None:
    try:
        return str(aas.result_type(getattr(aas, a), getattr(aas, b))).rsplit(".", 1)[-1]
    except TypeError:
        return None


# -- astype -----------------------------------------------------------------------------------
def test_astype_values_every_pair(backend):
    names = [n for n in NAMES if n in supported_dtypes(backend)]
    src = np.array([0, 1, 2, 7, 100], dtype=np.int64)
    for a, b in itertools.product(names, names):
        x = src.astype(a)
        t = vtl.asarray(x)
        if np.dtype(a).kind == "c" and np.dtype(b).kind not in "cb":
            with pytest.raises(TypeError, match="real"):
                vtl.astype(t, b)
            continue
        assert_close(vtl.astype(t, getattr(vtl, b)), x.astype(b))


def test_astype_special_values(backend):
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 0.5], np.float32)
    t = vtl.asarray(x)
    assert_close(vtl.astype(t, vtl.bool), x.astype(bool))
    if "complex64" in supported_dtypes(backend):
        assert_close(vtl.astype(vtl.asarray([True, False]), vtl.complex64),
                     np.array([1 + 0j, 0j], np.complex64))
        assert_close(vtl.astype(vtl.asarray([0j, 1j, 0.5]), vtl.bool),
                     np.array([False, True, True]))


def test_astype_copy_and_device(backend, other_backends):
    t = vtl.asarray([1.0, 2.0])
    assert vtl.astype(t, vtl.float32, copy=False) is t
    c = vtl.astype(t, vtl.float32)
    assert c is not t
    c[0] = 5.0
    assert t.numpy()[0] == 1.0
    for o in other_backends:
        u = vtl.astype(t, vtl.int32, device=vtl.Device(o, 0))
        assert u.device.type == o
        assert_close(u, np.array([1, 2], np.int32))
    with pytest.raises(TypeError, match="dtype"):
        vtl.astype(t, "float128")
    with pytest.raises(TypeError, match="vtl.Tensor"):
        vtl.astype(np.ones(2), vtl.float32)


X = np.random.default_rng(2).standard_normal((3, 4))


def test_astype_gradients():
    # float64 -> float32 -> float64: linear, so large steps keep float32 rounding harmless
    check_grad(lambda x: vtl.astype(vtl.astype(x, vtl.float32) * 3.0, vtl.float64), X,
               eps=1e-2, rtol=1e-4, atol=1e-4)
    check_grad(lambda x: vtl.real(vtl.astype(x, vtl.complex128) * (1 - 2j)) * x, X)
    x = vtl.asarray(X.astype(np.float32), requires_grad=True)
    (g,) = vtl.autograd.grad(vtl.sum(vtl.astype(x, vtl.float64) * 2.0), [x])
    assert g.dtype == vtl.float32
    assert_close(g, np.full(X.shape, 2.0, np.float32))


def test_astype_to_integer_is_not_differentiable(backend):
    x = vtl.asarray(X.astype(np.float32), requires_grad=True)
    y = vtl.astype(x, vtl.int32)
    assert not y.requires_grad and y.grad_fn is None


def test_astype_grad_matches_numpy(backend):
    if "complex64" in supported_dtypes(backend):
        check_grad_matches_numpy(lambda x: vtl.real(vtl.astype(x, vtl.complex64) * (2 + 1j)),
                                 backend, X)
    check_grad_matches_numpy(lambda x: vtl.astype(x, vtl.float32) * x, backend, X)


# -- can_cast ---------------------------------------------------------------------------------
@pytest.mark.parametrize("a,b", SAME_KIND)
def test_can_cast_same_kind_follows_the_standard(a, b):
    assert vtl.can_cast(getattr(vtl, a), getattr(vtl, b)) == aas.can_cast(
        getattr(aas, a), getattr(aas, b))


@pytest.mark.parametrize("a,b", CROSS_KIND)
def test_can_cast_cross_kind_follows_numpy(a, b):
    assert vtl.can_cast(a, b) == np.can_cast(a, b, casting="safe")


def test_can_cast_tensors(backend):
    t = vtl.asarray(np.ones(2, np.int16))
    assert vtl.can_cast(t, vtl.int32) and not vtl.can_cast(t, vtl.int8)
    for name in NAMES:
        if name not in supported_dtypes(backend):
            assert not vtl.can_cast(t, getattr(vtl, name))
    with pytest.raises(TypeError, match="dtype"):
        vtl.can_cast(vtl.int8, "float128")


# -- result_type ---------------------------------------------------------------------------------
@pytest.mark.parametrize("a,b", SAME_KIND)
def test_result_type_same_kind_follows_the_standard(a, b):
    expected = _strict_result(a, b)
    if expected is None:  # e.g. int64 with uint64: not in the standard's table
        assert vtl.result_type(a, b) == np.result_type(a, b)
    else:
        assert vtl.result_type(getattr(vtl, a), getattr(vtl, b)).name == expected


@pytest.mark.parametrize("a,b", CROSS_KIND)
def test_result_type_cross_kind_follows_numpy(a, b):
    assert vtl.result_type(a, b) == np.result_type(a, b)


def test_result_type_tensors_dtypes_and_scalars(backend):
    f32 = vtl.asarray(np.ones(2, np.float32))
    i8 = vtl.asarray(np.ones(2, np.int8))
    b = vtl.asarray([True])
    assert vtl.result_type(f32, 1.0) == vtl.float32
    assert vtl.result_type(f32, 1) == vtl.float32
    assert vtl.result_type(f32, 1j) == vtl.complex64
    assert vtl.result_type(vtl.float64, 1j) == vtl.complex128
    assert vtl.result_type(i8, 3) == vtl.int8
    assert vtl.result_type(i8, True) == vtl.int8
    assert vtl.result_type(b, False) == vtl.bool
    assert vtl.result_type(i8, vtl.uint8, 1) == vtl.int16
    assert vtl.result_type(i8, f32) == np.result_type(np.int8, np.float32)
    assert vtl.result_type(1.5, vtl.int16, vtl.float32) == vtl.float32
    assert vtl.result_type(vtl.complex64, vtl.float64) == vtl.complex128
    assert vtl.result_type(f32) == vtl.float32
    with pytest.raises(ValueError, match="at least one"):
        vtl.result_type()
    with pytest.raises(ValueError, match="besides scalars"):
        vtl.result_type(1, 2.0)
    with pytest.raises(TypeError, match="dtype"):
        vtl.result_type(vtl.int8, "float128")


# -- finfo / iinfo -------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["float32", "float64", "complex64", "complex128"])
def test_finfo(backend, name):
    fi = vtl.finfo(getattr(vtl, name))
    ref = np.finfo(name)
    assert (fi.bits, fi.eps, fi.max, fi.min, fi.smallest_normal) == (
        ref.bits, float(ref.eps), float(ref.max), float(ref.min), float(ref.smallest_normal))
    assert all(isinstance(v, float) for v in (fi.eps, fi.max, fi.min, fi.smallest_normal))
    assert fi.dtype == ref.dtype and fi.dtype.kind == "f"
    if name in supported_dtypes(backend):
        assert vtl.finfo(vtl.zeros(2, dtype=getattr(vtl, name))).bits == ref.bits


@pytest.mark.parametrize("name", [n for n in NAMES if KIND[n] == "i"])
def test_iinfo(backend, name):
    ii = vtl.iinfo(getattr(vtl, name))
    ref = np.iinfo(name)
    assert (ii.bits, ii.max, ii.min, ii.dtype) == (ref.bits, ref.max, ref.min, ref.dtype)
    assert isinstance(ii.max, int) and isinstance(ii.min, int)
    if name in supported_dtypes(backend):
        assert vtl.iinfo(vtl.zeros(2, dtype=getattr(vtl, name))).max == ref.max


def test_finfo_iinfo_errors():
    for bad in ("int32", "bool"):
        with pytest.raises(TypeError, match="floating-point"):
            vtl.finfo(bad)
    for bad in ("float32", "bool", "complex64"):
        with pytest.raises(TypeError, match="integer"):
            vtl.iinfo(bad)
    with pytest.raises(TypeError, match="float128"):
        vtl.finfo("float128")


# -- isdtype ---------------------------------------------------------------------------------------
KINDS = ["bool", "signed integer", "unsigned integer", "integral", "real floating",
         "complex floating", "numeric"]


@pytest.mark.parametrize("name", NAMES)
def test_isdtype_matches_the_standard(name):
    vd, sd = getattr(vtl, name), getattr(aas, name)
    for kind in KINDS:
        assert vtl.isdtype(vd, kind) == aas.isdtype(sd, kind), kind
    for other in NAMES:
        assert vtl.isdtype(vd, getattr(vtl, other)) == (name == other)
    for combo in itertools.combinations(KINDS + ["float32", "int8"], 2):
        skind = tuple(getattr(aas, k) if k in NAMES else k for k in combo)
        vkind = tuple(getattr(vtl, k) if k in NAMES else k for k in combo)
        assert vtl.isdtype(vd, vkind) == aas.isdtype(sd, skind), combo
    assert vtl.isdtype(dtype=vd, kind="numeric") == (name != "bool")


def test_isdtype_errors():
    with pytest.raises(ValueError, match="unknown dtype kind"):
        vtl.isdtype(vtl.float32, "floating")
    with pytest.raises(ValueError, match="unknown dtype kind"):
        vtl.isdtype(vtl.float32, ("numeric", "real"))
    with pytest.raises(TypeError, match="float128"):
        vtl.isdtype(np.longdouble, "numeric")
