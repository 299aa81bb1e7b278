"""float16 products on cooperative matrices (``vtl/backends/wgpu/_coop.py``,
``wgsl/linalg/matmul_coop.wgsl``): the template renders, the path says why it is off, and
where the device runs it (``VTL_WGPU_COOP=1`` on an adapter with VK_KHR_cooperative_matrix)
the products against the float64 products of the same float16 values, in every operand
layout, with the epilogues, a batch, a split depth and the convolutions."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
xp = pytest.importorskip("vtl.backends.wgpu")
if not xp.is_available():
    pytest.skip("no WebGPU adapter", allow_module_level=True)

from vtl.backends.wgpu import _coop, _kernels, _linalg  # noqa: E402
from vtl.backends.wgpu import _dtypes as D  # noqa: E402
from vtl.backends.wgpu import nn as wnn  # noqa: E402

RNG = np.random.default_rng(7)
F16 = np.dtype(np.float16)
EPS = float(np.finfo(F16).eps)

needs_coop = pytest.mark.skipif(not _coop.available(),
                                reason=f"float16 products here: {_coop.describe()}")


def test_the_template_renders_with_the_extension_enabled():
    if "shader-f16" not in xp.runtime_info()["features"]:
        pytest.skip("the adapter has no shader-f16")
    src = _kernels.render("matmul_coop", (D.float16,),
                          {**_linalg.matmul_subs(D.float16, (False, True)), "LD": "coopLoadT",
                           "ST": "coopStoreT"})
    assert "{{" not in src
    head = src.split("\n", 2)
    assert head[:2] == ["enable f16;", "enable wgpu_cooperative_matrix;"]
    assert src.count("coopMultiplyAdd(") == 4 and src.count("coopStoreT(") == 4


def test_subgroup_width_is_read_from_either_spelling():
    assert _coop._subgroups_of_32({"subgroup_min_size": 32, "subgroup_max_size": 32})
    assert _coop._subgroups_of_32({"stackgroup_min_size": 32, "stackgroup_max_size": 32})
    assert not _coop._subgroups_of_32({"stackgroup_min_size": 4, "stackgroup_max_size": 128})
    assert not _coop._subgroups_of_32({"subgroup_min_size": 64, "subgroup_max_size": 64})
    assert not _coop._subgroups_of_32({})


def test_the_path_reports_its_state():
    text = xp.runtime_info()["float16_products"]
    if _coop.available():
        assert text.startswith("float16 products on cooperative matrices")
    else:
        assert text.startswith("not used: ") and len(text) > len("not used: ")
        assert not _linalg.big_tiles(xp.float16, 1, 1)  # the register-tiled kernels serve


def _f16(shape):
    return RNG.uniform(-3, 3, shape).astype(F16)


def _near(got, want):
    got = np.asarray(xp.to_numpy(got)).astype(np.float64)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=EPS, atol=EPS * (np.abs(want).max() + 1))


def _layouts(h):
    t = xp.asarray(np.ascontiguousarray(h.T)).mT
    s = xp.asarray(np.repeat(h, 2, axis=1))[:, ::2]
    return xp.asarray(h), t, s


@needs_coop
@pytest.mark.parametrize(("m", "k", "n"), [(1, 1, 1), (16, 16, 16), (17, 33, 65),
                                         (64, 300, 257), (130, 64, 1), (40, 2100, 24)])
def test_products_in_every_operand_layout(m, k, n):
    """Partial tiles, depths that are no multiple of 32, and a deep product with few tiles
    (split into float32 partials summed after)."""
    assert not _linalg.big_tiles(xp.float16, 4096, 4096)
    a, b = _f16((m, k)), _f16((k, n))
    want = a.astype(np.float64) @ b.astype(np.float64)
    for da in _layouts(a):
        for db in _layouts(b):
            out = da @ db
            assert out.dtype == xp.float16
            _near(out, want)


@needs_coop
def test_batched_products_and_the_epilogues():
    a, b = _f16((3, 70, 45)), _f16((45, 90))
    _near(xp.asarray(a) @ xp.asarray(b), a.astype(np.float64) @ b.astype(np.float64))
    x, w, bias = _f16((70, 45)), _f16((90, 45)), _f16((90,))
    ref = x.astype(np.float64) @ w.astype(np.float64).T + bias.astype(np.float64)
    _near(wnn.linear(xp.asarray(x), xp.asarray(w), xp.asarray(bias)), ref)
    _near(wnn.linear(xp.asarray(x), xp.asarray(w), xp.asarray(bias), relu=True),
          np.maximum(ref, 0))


@needs_coop
def test_convolutions_match_the_float32_path():
    """float16 conv2d forward and gradients (implicit-GEMM loaders on cooperative matrices)
    against the same convolution of the widened values, rounded."""
    import vtl

    x, w, bias = _f16((2, 5, 9, 11)), _f16((7, 5, 3, 3)), _f16((7,))
    outs = {}
    for dt in ("float16", "float32"):
        xt = vtl.asarray(x.astype(dt), backend="wgpu", requires_grad=True)
        wt = vtl.asarray(w.astype(dt), backend="wgpu", requires_grad=True)
        bt = vtl.asarray(bias.astype(dt), backend="wgpu", requires_grad=True)
        y = vtl.nn.functional.conv2d(xt, wt, bt, padding=1)
        y.sum().backward()
        outs[dt] = [t.numpy().astype(np.float64) for t in (y, xt.grad, wt.grad)]
    for got, want in zip(outs["float16"], outs["float32"], strict=True):
        np.testing.assert_allclose(got, want, rtol=4 * EPS, atol=4 * EPS * (abs(want).max() + 1))


def test_the_check_runs_a_kernel_of_the_matmul_contract_on_its_own_buffers():
    """The check's harness (its own buffers, immediates and submission) with the
    register-tiled float16 kernel in the cooperative one's place: the exact product."""
    if "shader-f16" not in xp.runtime_info()["features"]:
        pytest.skip("the adapter has no shader-f16")
    rt = _coop._runtime.get()
    rng = np.random.default_rng(3)
    a = rng.integers(-3, 4, (_coop._M, _coop._K)).astype(F16)
    b = rng.integers(-3, 4, (_coop._K, _coop._N)).astype(F16)
    got = _coop._run_check(rt, "unused", "unused", a, b, template="matmul")
    np.testing.assert_array_equal(got, a.astype(np.float32) @ b.astype(np.float32))


class _FakeRuntime:
    def __init__(self, features=("cooperative-matrix", "shader-f16"), width=32):
        self.features = frozenset(features)
        self.refused = {}
        self.info = {"stackgroup_min_size": width, "stackgroup_max_size": width}


def _fresh_check(monkeypatch, rt, run_check):
    """Run the one-time check again against ``rt`` with ``run_check`` as the device."""
    monkeypatch.setattr(_coop._runtime, "get", lambda: rt)
    monkeypatch.setattr(_coop, "_run_check", run_check)
    monkeypatch.setattr(_coop, "_checked", False)
    monkeypatch.setattr(_coop, "_spelling", None)
    monkeypatch.setattr(_coop, "_why", "not checked yet")
    return _coop.spelling()


def test_the_check_takes_the_spelling_that_multiplies_right(monkeypatch):
    calls = []

    def run(rt, load, store, a, b):
        calls.append(load)
        want = a.astype(np.float32) @ b.astype(np.float32)
        return want if load == "coopLoad" else want.T  # as if coopLoadT were column-major

    assert _fresh_check(monkeypatch, _FakeRuntime(), run) == ("coopLoad", "coopStore")
    assert calls == ["coopLoadT", "coopLoad"]
    assert _coop.describe() == "float16 products on cooperative matrices (coopLoad)"
    calls.clear()
    assert _coop.spelling() == ("coopLoad", "coopStore") and calls == []  # checked once


def test_a_failing_check_keeps_the_register_tiled_kernels_and_says_why(monkeypatch):
    def run(rt, load, store, a, b):
        if load == "coopLoadT":
            raise RuntimeError("unsupported cooperative matrix configuration")
        return np.zeros((16, 16), np.float32)

    assert _fresh_check(monkeypatch, _FakeRuntime(), run) is None
    text = _coop.describe()
    assert "unsupported cooperative matrix configuration" in text
    assert "came out wrong" in text
    assert not _coop.available()


@pytest.mark.parametrize(("rt", "why"), [
    (_FakeRuntime(features=("shader-f16",)), "no cooperative-matrix feature"),
    (_FakeRuntime(features=("cooperative-matrix",)), "shader-f16"),
    (_FakeRuntime(width=64), "32 invocations"),
])
def test_the_check_is_not_run_without_what_the_kernel_needs(monkeypatch, rt, why):
    def run(*args):
        raise AssertionError("the device check must not run")

    assert _fresh_check(monkeypatch, rt, run) is None
    assert why in _coop.describe()
