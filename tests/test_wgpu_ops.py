"""Ops of the wgpu library against NumPy as the oracle."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
xp = pytest.importorskip("vtl.backends.wgpu")
if not xp.is_available():
    pytest.skip("no WebGPU adapter", allow_module_level=True)

RNG = np.random.default_rng(1234)
HAS_F64 = "float64" in xp.__array_namespace_info__().dtypes()


def host(a):
    return xp.to_numpy(a)


def check(got, expect, rtol=2e-6, atol=1e-6):
    g = host(got)
    expect = np.asarray(expect)
    assert g.shape == expect.shape, (g.shape, expect.shape)
    assert g.dtype == expect.dtype, (g.dtype, expect.dtype)
    if expect.dtype.kind == "f":
        np.testing.assert_allclose(g, expect, rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(g, expect)


def data(shape, dtype, lo=-3.0, hi=3.0):
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return RNG.random(shape) > 0.5
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return RNG.integers(max(info.min, -20), min(info.max, 20), shape).astype(dt)
    return RNG.uniform(lo, hi, shape).astype(dt)


FLOAT_UNARY = {
    "abs": (-3, 3), "negative": (-3, 3), "square": (-3, 3), "sqrt": (0.1, 9),
    "exp": (-5, 5), "expm1": (-1e-3, 1e-3), "log": (0.1, 9), "log2": (0.1, 9),
    "log10": (0.1, 9), "log1p": (-0.5, 3), "sin": (-3, 3), "cos": (-3, 3), "tan": (-1, 1),
    "asin": (-0.9, 0.9), "acos": (-0.9, 0.9), "atan": (-3, 3), "sinh": (-2, 2),
    "cosh": (-2, 2), "tanh": (-30, 30), "asinh": (-3, 3), "acosh": (1.1, 5),
    "atanh": (-0.9, 0.9), "reciprocal": (0.5, 3), "floor": (-3, 3), "ceil": (-3, 3),
    "trunc": (-3, 3), "round": (-3, 3), "sign": (-3, 3), "positive": (-3, 3),
}


@pytest.mark.parametrize("name", sorted(FLOAT_UNARY))
def test_float_unary_matches_numpy(name):
    lo, hi = FLOAT_UNARY[name]
    h = data((5, 7), np.float32, lo, hi)
    fn = getattr(np, {"asin": "arcsin", "acos": "arccos", "atan": "arctan",
                      "asinh": "arcsinh", "acosh": "arccosh", "atanh": "arctanh"}.get(name, name))
    # GPU math builtins are accurate to a few ulp, not correctly rounded (WGSL spec)
    check(getattr(xp, name)(xp.asarray(h)), fn(h), rtol=5e-4, atol=2e-6)


@pytest.mark.parametrize("name", ["abs", "negative", "square", "sign", "bitwise_invert"])
@pytest.mark.parametrize("dtype", ["int8", "int32", "uint8", "uint32"])
def test_integer_unary_matches_numpy(name, dtype):
    h = data((9,), dtype)
    if dtype == "int8":
        h[0] = -128
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expect = getattr(np, name.replace("bitwise_invert", "invert"))(h)
    check(getattr(xp, name)(xp.asarray(h)), expect)


def test_special_values_of_unary_predicates():
    h = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5], np.float32)
    a = xp.asarray(h)
    check(xp.isnan(a), np.isnan(h))
    check(xp.isinf(a), np.isinf(h))
    check(xp.isfinite(a), np.isfinite(h))
    check(xp.signbit(a), np.signbit(h))
    check(xp.sign(a), np.sign(h))
    check(xp.tanh(xp.asarray(np.array([np.nan, 100.0], np.float32))),
          np.tanh(np.array([np.nan, 100.0], np.float32)))
    check(xp.logical_not(xp.asarray(h > 0)), ~(h > 0))


BINARY = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "pow", "atan2",
          "hypot", "logaddexp", "copysign", "floor_divide", "remainder", "equal", "not_equal",
          "less", "less_equal", "greater", "greater_equal", "nextafter"]


@pytest.mark.parametrize("name", BINARY)
def test_float_binary_with_broadcasting(name):
    a = data((4, 1, 3), np.float32, 0.5, 3)
    b = data((5, 3), np.float32, -2, 2)
    if name == "pow":
        b = np.round(b)
    fn = getattr(np, {"atan2": "arctan2", "pow": "power"}.get(name, name))
    check(getattr(xp, name)(xp.asarray(a), xp.asarray(b)), fn(a, b), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "floor_divide", "remainder",
                                  "maximum", "minimum", "pow", "bitwise_and", "bitwise_or",
                                  "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift",
                                  "less", "equal"])
@pytest.mark.parametrize("dtype", ["int32", "int8", "uint32"])
def test_integer_binary_matches_numpy(name, dtype):
    a = data((6, 4), dtype)
    b = data((4,), dtype)
    if name in ("floor_divide", "remainder"):
        b[b == 0] = 3
    if name in ("pow", "bitwise_left_shift", "bitwise_right_shift"):
        b = np.abs(b) % 5
        a = a % 7 if name == "pow" else a
    fn = getattr(np, {"pow": "power", "bitwise_and": "bitwise_and",
                      "bitwise_left_shift": "left_shift",
                      "bitwise_right_shift": "right_shift"}.get(name, name))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expect = fn(a, b)
    check(getattr(xp, name)(xp.asarray(a), xp.asarray(b)), expect)


def test_float_special_values_of_binary_functions():
    x = np.array([np.nan, 1.0, -0.0, np.inf, -2.0, 0.0, 5.0], np.float32)
    y = np.array([1.0, np.nan, 0.0, -np.inf, 3.0, -1.0, np.inf], np.float32)
    a, b = xp.asarray(x), xp.asarray(y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(xp.maximum(a, b), np.maximum(x, y))
        check(xp.minimum(a, b), np.minimum(x, y))
        check(xp.pow(a, b), np.power(x, y))
        check(xp.remainder(a, b), np.remainder(x, y))
        check(xp.copysign(a, b), np.copysign(x, y))
        check(xp.divide(a, b), x / y)


def test_weak_python_scalars_and_reflected_operators():
    h = data((3, 4), np.float32)
    a = xp.asarray(h)
    check(2.0 - a, 2.0 - h)
    check(a / 4, h / 4)
    check(3 ** xp.abs(a), (3 ** np.abs(h)).astype(np.float32), rtol=1e-5)
    i = np.arange(6, dtype=np.int8)
    check(xp.asarray(i) + 3, i + np.int8(3))
    check(xp.asarray(i) * 1.5, (i * 1.5).astype(np.float32))  # float scalar -> float32
    check(xp.asarray(h > 0) + 1, (h > 0).astype(_dti()) + 1)
    with pytest.raises(OverflowError):
        xp.asarray(i) + 1000
    check(-a, -h)
    check(abs(a), np.abs(h))
    check(~xp.asarray(i), ~i)
    b = xp.asarray(h)
    b += 1.0
    check(b, h + 1)
    check(a, h)


def test_mixed_dtype_promotion():
    a = np.arange(4, dtype=np.int8)
    b = np.arange(4, dtype=np.int32)
    c = np.ones(4, dtype=np.float32)
    check(xp.asarray(a) + xp.asarray(b), a + b)
    check(xp.asarray(a) * xp.asarray(c), a * c)
    check(xp.asarray(np.array([True, False])) & xp.asarray(np.array([True, True])),
          np.array([True, False]))


@pytest.mark.skipif(not HAS_F64, reason="adapter without shader-f64")
def test_float64_arithmetic_and_scalars_are_exact():
    h = RNG.standard_normal(9)
    a = xp.asarray(h)
    assert a.dtype == np.float64
    for s in (0.1, -1e-300, 1e300, 2.0 ** -60, -0.0):
        check(a * s, h * s, rtol=0, atol=0)
    check(xp.sqrt(xp.abs(a)), np.sqrt(np.abs(h)), rtol=1e-15, atol=0)
    check(xp.exp(a), np.exp(h), rtol=1e-6)  # transcendental: float32 precision
    check(a + float("inf"), h + np.inf)


def test_astype_between_dtypes():
    h = np.array([-2.7, -0.5, 0.0, 1.5, 300.0], np.float32)
    a = xp.asarray(h)
    check(xp.astype(a, xp.int32), h.astype(np.int32))
    check(xp.astype(a, xp.bool), h.astype(bool))
    check(xp.astype(xp.astype(a, xp.int32), xp.uint8), h.astype(np.int32).astype(np.uint8))
    check(xp.astype(xp.asarray(h > 0), xp.float32), (h > 0).astype(np.float32))


def test_where_and_clip():
    h = data((3, 4), np.float32)
    a = xp.asarray(h)
    check(xp.where(a > 0, a, 0.0), np.where(h > 0, h, 0).astype(np.float32))
    check(xp.where(xp.asarray(h[:, :1] > 0), a, -a), np.where(h[:, :1] > 0, h, -h))
    check(xp.clip(a, -1.0, 1.0), np.clip(h, -1, 1))
    check(xp.clip(a, min=xp.asarray(h[0])), np.maximum(h, h[0]))


# -- creation ---------------------------------------------------------------------------------
def test_creation_functions():
    check(xp.zeros((2, 3)), np.zeros((2, 3), np.float32))
    check(xp.ones(4, dtype=xp.int8), np.ones(4, np.int8))
    check(xp.full((2, 2), 7, dtype=xp.uint32), np.full((2, 2), 7, np.uint32))
    check(xp.full((2,), True), np.full(2, True))
    check(xp.arange(2, 11, 3, dtype=xp.int32), np.arange(2, 11, 3, dtype=np.int32))
    check(xp.arange(0.0, 1.0, 0.25), np.arange(0.0, 1.0, 0.25, dtype=np.float32))
    check(xp.arange(5, 0, -2, dtype=xp.int32), np.arange(5, 0, -2, dtype=np.int32))
    check(xp.linspace(-1.0, 2.0, 7), np.linspace(-1, 2, 7, dtype=np.float32))
    check(xp.linspace(0.0, 1.0, 4, endpoint=False), np.linspace(0, 1, 4, endpoint=False,
                                                              dtype=np.float32))
    for n, m, k in ((3, None, 0), (3, 5, 1), (4, 3, -2), (2, 2, 5)):
        check(xp.eye(n, m, k=k), np.eye(n, m, k=k, dtype=np.float32))
    h = data((2, 3, 4), np.float32)
    for k in (-1, 0, 2):
        check(xp.tril(xp.asarray(h), k=k), np.tril(h, k))
        check(xp.triu(xp.asarray(h), k=k), np.triu(h, k))
    a = xp.asarray(h)
    check(xp.zeros_like(a), np.zeros_like(h))
    check(xp.ones_like(a, dtype=xp.int32), np.ones_like(h, dtype=np.int32))
    check(xp.full_like(a, 2.5), np.full_like(h, 2.5))
    assert xp.empty_like(a).shape == h.shape
    x, y = xp.meshgrid(xp.arange(3, dtype=xp.int32), xp.arange(2, dtype=xp.int32))
    ex, ey = np.meshgrid(np.arange(3, dtype=np.int32), np.arange(2, dtype=np.int32))
    check(x, ex)
    check(y, ey)
    x, y = xp.meshgrid(xp.arange(3, dtype=xp.int32), xp.arange(2, dtype=xp.int32),
                       indexing="ij")
    check(x, np.meshgrid(np.arange(3), np.arange(2), indexing="ij")[0].astype(np.int32))
    check(xp.from_dlpack(h), h)
    check(xp.asarray([[1, 2], [3, 4]], dtype=xp.int16), np.array([[1, 2], [3, 4]], np.int16))


# -- reductions ---------------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [None, 0, 1, (0, 2), -1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions_match_numpy(axis, keepdims):
    h = data((3, 4, 5), np.float32)
    a = xp.asarray(h)
    kw = {"axis": axis, "keepdims": keepdims}
    check(xp.sum(a, **kw), np.sum(h, **kw), rtol=1e-5, atol=1e-5)
    check(xp.prod(a, **kw), np.prod(h, **kw), rtol=1e-5, atol=1e-5)
    check(xp.mean(a, **kw), np.mean(h, **kw), rtol=1e-5, atol=1e-6)
    check(xp.max(a, **kw), np.max(h, **kw))
    check(xp.min(a, **kw), np.min(h, **kw))
    check(xp.var(a, correction=1, **kw), np.var(h, ddof=1, **kw), rtol=1e-5, atol=1e-6)
    check(xp.std(a, **kw), np.std(h, **kw), rtol=1e-5, atol=1e-6)
    b = h > 0
    check(xp.all(xp.asarray(b), **kw), np.all(b, **kw))
    check(xp.any(xp.asarray(b), **kw), np.any(b, **kw))
    dti = xp.__array_namespace_info__().default_dtypes()["integral"]
    check(xp.count_nonzero(xp.asarray(b), **kw),
          np.asarray(np.count_nonzero(b, **kw)).astype(dti))


def test_reductions_on_views_large_rows_and_integers():
    h = data((300, 700), np.float32)
    a = xp.asarray(h)
    check(xp.sum(a.mT[::2], axis=1), h.T[::2].sum(1), rtol=1e-5, atol=1e-4)
    check(xp.sum(a), np.asarray(h.sum(dtype=np.float64), np.float32), rtol=1e-5, atol=1e-3)
    i = data((5, 6), np.int8)
    dti = xp.__array_namespace_info__().default_dtypes()["integral"]
    check(xp.sum(xp.asarray(i), axis=0), i.sum(0).astype(dti))
    check(xp.max(xp.asarray(i), axis=1), i.max(1))
    check(xp.sum(xp.asarray(i), axis=0, dtype=xp.int32), i.sum(0, dtype=np.int32))
    with pytest.raises(ValueError):
        xp.max(xp.zeros((0, 3)), axis=0)
    check(xp.sum(xp.zeros((0, 3)), axis=0), np.zeros(3, np.float32))


def test_nan_propagates_through_max_min():
    h = np.array([[1.0, np.nan, 3.0], [1.0, 2.0, 0.5]], np.float32)
    check(xp.max(xp.asarray(h), axis=1), np.max(h, axis=1))
    check(xp.min(xp.asarray(h), axis=1), np.min(h, axis=1))
    check(xp.argmax(xp.asarray(h), axis=1), np.argmax(h, axis=1).astype(_dti()))


def _dti():
    return xp.__array_namespace_info__().default_dtypes()["integral"]


def test_argmax_argmin():
    h = data((4, 300), np.float32)
    h[1, 5] = h[1, 9] = 10.0  # ties: first index
    a = xp.asarray(h)
    for axis in (None, 0, 1):
        check(xp.argmax(a, axis=axis), np.asarray(np.argmax(h, axis=axis)).astype(_dti()))
        check(xp.argmin(a, axis=axis), np.asarray(np.argmin(h, axis=axis)).astype(_dti()))
    check(xp.argmax(a, axis=1, keepdims=True),
          np.argmax(h, axis=1, keepdims=True).astype(_dti()))
    i = data((7,), np.int32)
    check(xp.argmin(xp.asarray(i)), np.asarray(np.argmin(i)).astype(_dti()))


def test_cumulative_sum_and_prod():
    h = data((3, 5), np.float32, 0.5, 1.5)
    a = xp.asarray(h)
    check(xp.cumulative_sum(a, axis=1), np.cumsum(h, axis=1), rtol=1e-5)
    check(xp.cumulative_sum(a, axis=0), np.cumsum(h, axis=0), rtol=1e-5)
    check(xp.cumulative_prod(a, axis=1), np.cumprod(h, axis=1), rtol=1e-5)
    check(xp.cumulative_sum(a, axis=1, include_initial=True),
          np.concatenate([np.zeros((3, 1), np.float32), np.cumsum(h, axis=1)], axis=1),
          rtol=1e-5)
    i = np.arange(5, dtype=np.int32)
    check(xp.cumulative_sum(xp.asarray(i), dtype=xp.int32), np.cumsum(i).astype(np.int32))


# -- linear algebra ---------------------------------------------------------------------------
@pytest.mark.parametrize("shapes", [((3, 4), (4, 5)), ((70, 33), (33, 65)), ((4,), (4, 3)),
                                    ((2, 3), (3,)), ((5,), (5,)), ((2, 3, 4), (4, 2)),
                                    ((2, 1, 3, 4), (5, 4, 2)), ((3, 0), (0, 2))])
def test_matmul_matches_numpy(shapes):
    sa, sb = shapes
    a, b = data(sa, np.float32), data(sb, np.float32)
    check(xp.matmul(xp.asarray(a), xp.asarray(b)), np.matmul(a, b), rtol=1e-5, atol=1e-5)


def _layouts(h):
    """``h`` on the device row-major, column-major (a transposed view) and strided."""
    t = xp.asarray(np.ascontiguousarray(h.T)).mT
    s = xp.asarray(np.repeat(h, 2, axis=1))[:, ::2]
    return xp.asarray(h), t, s


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize(("m", "k", "n"), [(1, 1, 1), (67, 33, 65), (5, 2100, 3), (130, 17, 1)])
def test_matmul_of_every_operand_layout(dtype, m, k, n):
    """Each operand row-major, column-major (a transposed view) or strided: the kernel loads
    along whichever axis is contiguous (and a deep product with few tiles splits its depth)."""
    a, b = data((m, k), dtype), data((k, n), dtype)
    tol = {np.float32: 1e-4, np.float64: 1e-12, np.int32: 0}[dtype]

    for da in _layouts(a):
        for db in _layouts(b):
            check(da @ db, a @ b, rtol=tol, atol=tol)
    check(xp.matmul(xp.asarray(np.stack([a, a + 1])).mT.mT, xp.asarray(b)),
          np.stack([a, a + 1]) @ b, rtol=tol, atol=tol)


@pytest.mark.parametrize(("m", "k", "n"), [(1, 1, 1), (128, 8, 128), (129, 9, 130),
                                         (200, 33, 77), (64, 300, 257)])
def test_large_tile_matmul_of_every_operand_layout(monkeypatch, m, k, n):
    """The 128x128-tile float32 kernel (``matmul_big.wgsl``, forced here for small shapes)
    against NumPy: every operand layout, partial tiles, a batch and the bias epilogue."""
    from vtl.backends.wgpu import _linalg
    from vtl.backends.wgpu import nn as wnn

    monkeypatch.setattr(_linalg, "BIG_MIN_TILES", 1)
    monkeypatch.setattr(_linalg, "BIG_MIN_FILL", 0.0)
    assert _linalg.big_tiles(xp.float32, m, n) and not _linalg.big_tiles(xp.float64, m, n)
    a, b = data((m, k), np.float32), data((k, n), np.float32)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)

    for da in _layouts(a):
        for db in _layouts(b):
            check(da @ db, (a64 @ b64).astype(np.float32), rtol=1e-5, atol=1e-4)
    batch = np.stack([a, a + 1, a - 2])
    check(xp.asarray(batch) @ xp.asarray(b), (batch.astype(np.float64) @ b64).astype(np.float32),
          rtol=1e-5, atol=1e-4)
    w, bias = data((n, k), np.float32), data((n,), np.float32)
    check(wnn.linear(xp.asarray(a), xp.asarray(w), xp.asarray(bias)),
          (a64 @ w.astype(np.float64).T + bias).astype(np.float32), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize(("m", "k", "n"), [(128, 8, 128), (132, 12, 136), (260, 44, 4)])
def test_large_tile_matmul_reads_four_at_a_time(monkeypatch, m, k, n):
    """The 128x128-tile kernel reading float32 operands a vec4 at a time (big_reads: the
    contiguous axis of unit stride and a multiple of 4 long, the other stride and the
    offsets multiples of 4) and one element at a time otherwise, against NumPy: row-major
    and transposed operands, slices starting 4 and 1 elements in, partial tiles, a batch,
    the bias epilogue."""
    from vtl.backends.wgpu import _linalg
    from vtl.backends.wgpu import nn as wnn

    monkeypatch.setattr(_linalg, "BIG_MIN_TILES", 1)
    monkeypatch.setattr(_linalg, "BIG_MIN_FILL", 0.0)
    a, b = data((m, k), np.float32), data((k, n), np.float32)
    want = (a.astype(np.float64) @ b).astype(np.float32)

    def views(h):
        flat = np.concatenate([np.zeros(5, np.float32), h.ravel()])
        buf = xp.asarray(flat)
        shifted4 = xp.reshape(buf[1:], (-1,))[4:4 + h.size]  # offset 5: not a multiple of 4
        aligned = xp.asarray(np.concatenate([np.zeros(4, np.float32), h.ravel()]))[4:]
        return {"row-major": xp.asarray(h), "transposed": xp.asarray(np.ascontiguousarray(
            h.T)).mT, "offset 4": xp.reshape(aligned, h.shape),
            "offset 5": xp.reshape(shifted4, h.shape)}

    seen = set()
    for na, da in views(a).items():
        for nb, db in views(b).items():
            layout = _linalg.cols_contiguous(da._strides, db._strides)
            vec = _linalg.big_reads(xp.float32, layout, m, n, k, da._strides, db._strides,
                                    (da._offset,), (db._offset,))
            seen.add(vec)
            assert vec[0] == (na != "offset 5") and vec[1] == (nb != "offset 5" and
                                                                (n % 4 == 0)), (na, nb)
            check(da @ db, want, rtol=1e-5, atol=1e-4)
    assert (True, True) in seen and (False, False) in seen
    batch = np.stack([a, a + 1, a - 2])
    check(xp.asarray(batch) @ xp.asarray(b), (batch.astype(np.float64) @ b).astype(np.float32),
          rtol=1e-5, atol=1e-4)
    w, bias = data((n, k), np.float32), data((n,), np.float32)
    check(wnn.linear(xp.asarray(a), xp.asarray(w), xp.asarray(bias)),
          (a.astype(np.float64) @ w.astype(np.float64).T + bias).astype(np.float32),
          rtol=1e-5, atol=1e-4)
    assert _linalg.big_reads(xp.float16, (False, False), 128, 128, 128, (128, 1), (128, 1),
                             (0,), (0,)) == (False, False)  # float32 only
    assert _linalg.big_reads(xp.float32, (False, False), 128, 128, 128, (128, 1), (128, 1),
                             (0, 130), (0, 0)) == (False, True)  # a batch stride of 130


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
@pytest.mark.parametrize(("m", "k", "n"), [(129, 9, 130), (64, 300, 257)])
def test_large_tile_matmul_of_16bit_operands(monkeypatch, name, m, k, n):
    """float16/bfloat16 products on the 128x128-tile kernel (forced for small shapes):
    computed in float32 and rounded once, so within half a 16-bit ulp of the float64
    product of the same 16-bit values, in every operand layout and with the bias epilogue."""
    import ml_dtypes

    from vtl.backends.wgpu import _coop, _linalg
    from vtl.backends.wgpu import nn as wnn

    if name == "float16" and _coop.available():
        pytest.skip("float16 products run on cooperative matrices here (test_wgpu_coop.py)")
    monkeypatch.setattr(_linalg, "BIG_MIN_TILES", 1)
    monkeypatch.setattr(_linalg, "BIG_MIN_FILL", 0.0)
    dt = np.dtype(np.float16) if name == "float16" else np.dtype(ml_dtypes.bfloat16)
    xdt = getattr(xp, name)
    assert _linalg.big_tiles(xdt, m, n)
    a, b = data((m, k), np.float32).astype(dt), data((k, n), np.float32).astype(dt)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    eps = float(np.finfo(dt).eps)

    def near(got, want):
        got = np.asarray(host(got)).astype(np.float64)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=eps, atol=eps * (np.abs(want).max() + 1))

    for da in _layouts(a):
        for db in _layouts(b):
            out = da @ db
            assert out.dtype == xdt
            near(out, ref)
    w, bias = data((n, k), np.float32).astype(dt), data((n,), np.float32).astype(dt)
    near(wnn.linear(xp.asarray(a), xp.asarray(w), xp.asarray(bias)),
         a.astype(np.float64) @ w.astype(np.float64).T + bias.astype(np.float64))


def test_large_tile_matmul_is_picked_by_output_tiles(monkeypatch):
    from vtl.backends.wgpu import _linalg

    monkeypatch.setattr(_linalg, "BIG_MIN_TILES", 256)
    monkeypatch.setattr(_linalg, "BIG_MIN_FILL", 0.75)
    assert _linalg.big_tiles(xp.float32, 2048, 2048)  # 16 x 16 tiles
    assert not _linalg.big_tiles(xp.float32, 2048, 1024)
    assert _linalg.big_tiles(xp.float32, 1024, 1024, batch=4)
    assert _linalg.big_tiles(xp.float16, 4096, 4096)
    assert not _linalg.big_tiles(xp.float64, 4096, 4096)
    assert not _linalg.big_tiles(xp.float32, 1 << 17, 64)  # half of each tile unused
    assert not _linalg.big_tiles(xp.float32, 1 << 15, 180)  # 180 of 256 columns: 0.70
    assert _linalg.big_tiles(xp.float32, 1 << 15, 240)


def test_matmul_transposed_views_and_integers():
    a, b = data((40, 30), np.float32), data((50, 40), np.float32)
    check(xp.asarray(a).mT @ xp.asarray(b).mT, a.T @ b.T, rtol=1e-5, atol=1e-4)
    i, j = data((3, 4), np.int32), data((4, 2), np.int32)
    check(xp.asarray(i) @ xp.asarray(j), i @ j)
    with pytest.raises(ValueError, match="align"):
        xp.matmul(xp.ones((2, 3)), xp.ones((2, 3)))


def test_tensordot_vecdot_and_linalg():
    a, b = data((3, 4, 5), np.float32), data((4, 5, 2), np.float32)
    check(xp.tensordot(xp.asarray(a), xp.asarray(b), axes=2), np.tensordot(a, b, 2),
          rtol=1e-5, atol=1e-5)
    check(xp.tensordot(xp.asarray(a), xp.asarray(b), axes=([1], [0])),
          np.tensordot(a, b, ([1], [0])), rtol=1e-5, atol=1e-5)
    u, v = data((3, 4), np.float32), data((4,), np.float32)
    check(xp.vecdot(xp.asarray(u), xp.asarray(v)), (u * v).sum(-1), rtol=1e-5, atol=1e-6)
    check(xp.matrix_transpose(xp.asarray(u)), u.T)
    check(xp.linalg.vector_norm(xp.asarray(u), axis=1), np.linalg.norm(u, axis=1), rtol=1e-5)


# -- manipulation -----------------------------------------------------------------------------
def test_manipulation_functions():
    h = data((2, 3, 4), np.float32)
    a = xp.asarray(h)
    check(xp.reshape(a, (4, -1)), h.reshape(4, -1))
    check(xp.permute_dims(a, (2, 0, 1)), h.transpose(2, 0, 1))
    check(xp.expand_dims(a, axis=-1), h[..., None])
    check(xp.squeeze(xp.asarray(h[:, :1]), axis=1), h[:, 0])
    check(xp.broadcast_to(xp.asarray(h[:, :1]), (2, 3, 4)), np.broadcast_to(h[:, :1], (2, 3, 4)))
    check(xp.concat([a, a[:, :1]], axis=1), np.concatenate([h, h[:, :1]], axis=1))
    check(xp.concat([a, a], axis=None), np.concatenate([h.ravel(), h.ravel()]))
    check(xp.stack([a, a * 2.0], axis=1), np.stack([h, h * 2], axis=1))
    for axis in (None, 0, (1, 2)):
        check(xp.flip(a, axis=axis), np.flip(h, axis=axis))
    check(xp.roll(a, 2, axis=2), np.roll(h, 2, axis=2))
    check(xp.roll(a, (1, -1), axis=(0, 1)), np.roll(h, (1, -1), axis=(0, 1)))
    check(xp.roll(a, 5), np.roll(h, 5))
    check(xp.moveaxis(a, 0, -1), np.moveaxis(h, 0, -1))
    check(xp.tile(a, (2, 1, 1)), np.tile(h, (2, 1, 1)))
    check(xp.repeat(a, 2, axis=1), np.repeat(h, 2, axis=1))
    check(xp.repeat(a, xp.asarray(np.array([1, 0, 2], np.int32)), axis=1),
          np.repeat(h, [1, 0, 2], axis=1))
    parts = xp.unstack(a, axis=1)
    assert len(parts) == 3
    check(parts[2], h[:, 2])
    x1, x2 = xp.broadcast_arrays(xp.asarray(h[:1]), a)
    check(x1, np.broadcast_to(h[:1], h.shape))
    with pytest.raises(ValueError):
        xp.reshape(a, (5, 5))
    with pytest.raises(IndexError):
        xp.expand_dims(a, axis=5)


# -- indexing ---------------------------------------------------------------------------------
def test_getitem_basic_advanced_boolean():
    h = data((4, 5, 6), np.float32)
    a = xp.asarray(h)
    keys = [1, (1, 2), (slice(None), 3), (Ellipsis, 2),
            (slice(1, None, 2), None, slice(None, None, -1)), (-1, slice(None, 2)), ()]
    for k in keys:
        check(a[k], h[k])
    idx = np.array([3, 0, -1], np.int32)
    check(a[xp.asarray(idx)], h[idx])
    check(a[:, xp.asarray(idx)], h[:, idx])
    check(a[xp.asarray(idx), :, xp.asarray(idx % 6)], h[idx, :, idx % 6])
    check(a[1, xp.asarray(idx)], h[1, idx])
    m = h > 0.5
    check(a[xp.asarray(m)], h[m])
    check(a[xp.asarray(m[:, :, 0]), 1:3], h[m[:, :, 0], 1:3])
    with pytest.raises(IndexError):
        a[4]
    with pytest.raises(IndexError):
        a[0, 0, 0, 0]


def test_setitem_basic_advanced_boolean():
    h = data((4, 5), np.float32)
    a = xp.asarray(h)
    e = h.copy()
    a[1] = 3.0
    e[1] = 3.0
    a[:, ::2] = xp.asarray(np.arange(3, dtype=np.float32))
    e[:, ::2] = np.arange(3)
    a[xp.asarray(np.array([0, 2], np.int32)), 1] = -1.0
    e[[0, 2], 1] = -1.0
    mask = e > 1.0
    a[xp.asarray(mask)] = 0.0
    e[mask] = 0.0
    a[1:] = a[:-1]  # overlapping source and target
    e[1:] = e[:-1].copy()
    check(a, e)


def test_take_and_take_along_axis():
    h = data((3, 5), np.float32)
    a = xp.asarray(h)
    idx = np.array([4, 0, 0, -1], np.int32)
    check(xp.take(a, xp.asarray(idx), axis=1), np.take(h, idx, axis=1))
    idx0 = np.array([2, -3, 1], np.int32)
    check(xp.take(a, xp.asarray(idx0), axis=0), np.take(h, idx0, axis=0))
    order = np.argsort(h, axis=1).astype(np.int32)
    check(xp.take_along_axis(a, xp.asarray(order), axis=1), np.take_along_axis(h, order, 1))
    order0 = np.argsort(h, axis=0).astype(np.int32)
    check(xp.take_along_axis(a, xp.asarray(order0), axis=0), np.take_along_axis(h, order0, 0))


def test_scatter_add_accumulates_repeated_indices():
    t = np.zeros((4, 3), np.float32)
    idx = np.array([0, 2, 0, 0, 3], np.int32)
    vals = data((5, 3), np.float32)
    out = xp.scatter_add(xp.asarray(t), xp.asarray(idx), xp.asarray(vals))
    np.add.at(t, idx, vals)
    check(out, t, rtol=1e-6)
    ti = np.zeros(3, np.int32)
    outi = xp.scatter_add(xp.asarray(ti), xp.asarray(np.array([1, 1, 2], np.int32)),
                          xp.asarray(np.array([5, 6, 7], np.int32)))
    check(outi, np.array([0, 11, 7], np.int32))


def test_host_fallbacks_sort_unique_nonzero():
    h = data((3, 6), np.float32)
    a = xp.asarray(h)
    check(xp.sort(a, axis=1), np.sort(h, axis=1))
    check(xp.sort(a, axis=1, descending=True), np.flip(np.sort(h, axis=1), axis=1))
    check(xp.argsort(a, axis=0), np.argsort(h, axis=0, kind="stable").astype(_dti()))
    nz = xp.nonzero(xp.asarray(h > 0))
    for g, e in zip(nz, np.nonzero(h > 0), strict=True):
        check(g, e.astype(_dti()))
    check(xp.unique_values(xp.asarray(np.array([3, 1, 3, 2], np.int32))),
          np.array([1, 2, 3], np.int32))


@pytest.mark.parametrize("big", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_into_a_slice_in_place(monkeypatch, big, dtype):
    """``matmul_into`` stores a batched product into a slice of a larger array (and adds to
    what it holds) from the product's epilogue: operands at any strides (a transposed
    view), partial tiles in both kernels, the rest of the array untouched; it declines,
    changing nothing, where the view's columns are not adjacent or it shares an operand's
    buffer."""
    from vtl.backends.wgpu import _linalg

    if big:
        if dtype == np.float64:
            pytest.skip("the large-tile kernel is float32/16-bit")
        monkeypatch.setattr(_linalg, "BIG_MIN_TILES", 1)
        monkeypatch.setattr(_linalg, "BIG_MIN_FILL", 0.0)
    a, b = data((3, 37, 70), dtype), data((3, 29, 70), dtype)  # b transposed below
    base = data((4, 50, 40), dtype)
    want = base.astype(np.float64).copy()
    prod = a.astype(np.float64) @ b.astype(np.float64).transpose(0, 2, 1)
    tol = 1e-4 if dtype == np.float32 else 1e-12  # sums of 70 products of up to 9
    for accumulate in (False, True):
        out = xp.asarray(base)
        bt = xp.permute_dims(xp.asarray(b), (0, 2, 1))
        assert _linalg.matmul_into(xp.asarray(a), bt, out[1:4, 5:42, 3:32], accumulate)
        exp = want.copy()
        exp[1:4, 5:42, 3:32] = prod + (exp[1:4, 5:42, 3:32] if accumulate else 0)
        np.testing.assert_allclose(xp.to_numpy(out), exp, rtol=tol, atol=tol)
    out = xp.asarray(base)
    assert not _linalg.matmul_into(xp.asarray(a), bt, out[1:4, 5:42, 3:61:2][..., :29])
    assert not _linalg.matmul_into(out[1:4, :37, :70], xp.asarray(b)[..., :40], out[:3])
    np.testing.assert_array_equal(xp.to_numpy(out), base)
