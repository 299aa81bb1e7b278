"""The wgpu backend's fused nn kernels (``vtl/backends/wgpu/nn.py``) against the portable
paths, and the dispatch/sync budget of an MLP training step (regressions fail here)."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
wx = pytest.importorskip("vtl.backends.wgpu")
if not wx.is_available():
    pytest.skip("no WebGPU adapter", allow_module_level=True)

from nn_kernel_checks import (  # noqa: E402
    assert_rnn_kernel_under_autocast,
    assert_same_training,
    backward_scaled,
    ce_case,
    check_ce_special_values,
    np_cross_entropy,
    scaled_grad,
    train,
)

import vtl  # noqa: E402
from benchmarks.test_train_bench import _batch, _vtl_setup  # noqa: E402
from vtl import nn  # noqa: E402
from vtl.backends.wgpu import nn as _nn  # noqa: E402
from vtl.backends.wgpu._recorder import REC  # noqa: E402
from vtl.nn import functional as F  # noqa: E402


@pytest.fixture(autouse=True)
def _input_gradients_as_products(monkeypatch):
    """The convolution cases here have few channels, and their input gradients are to run
    the implicit-GEMM products (stride phases, depth slices, folded images): the direct
    kernel of few channels is off but in its own test."""
    from vtl.backends.wgpu import conv

    monkeypatch.setattr(conv, "DIRECT_DGRAD_CHANNELS", 0)


#: dispatches of one MLP 784-256-128-10 training step (forward, cross-entropy, backward,
#: Adam): 3 linear (two with the ReLU in their epilogue) + 1 loss | 1 root gradient + 1 loss
#: + 5 matmuls + 2 relu | Adam: its six tensors in one grouped dispatch
MLP_STEP_DISPATCHES = 14


def _counts(fn):
    """``fn()``, the dispatches it recorded and the times it waited for the device."""
    d0, w0 = REC.dispatches, REC.waits
    out = fn()
    return out, REC.dispatches - d0, REC.waits - w0


def _mlp_step(batch: int):
    """The benchmarked training step (Adam, cross-entropy) of the MLP on the wgpu backend."""
    model = "mlp-784-256-128-10"
    return _vtl_setup(model, "wgpu", *_batch(model, batch))[1]


@pytest.mark.parametrize("batch", [64, 128])
def test_mlp_training_step_dispatch_budget_and_no_sync(wgpu, batch):
    step = _mlp_step(batch)
    step()
    step()  # optimizer state and caches
    loss, n, waits = _counts(step)
    assert n <= MLP_STEP_DISPATCHES, f"{n} dispatches per step (budget {MLP_STEP_DISPATCHES})"
    assert waits == 0  # no readback (no host sync) inside a step
    assert math.isfinite(float(loss))


def test_mlp_training_matches_numpy_backend(wgpu):
    rng = np.random.default_rng(3)
    xs = rng.standard_normal((16, 20), dtype=np.float32)
    ys = rng.integers(0, 5, 16)
    results = []
    for b in ("numpy", "wgpu"):
        vtl.random.seed(1)
        net = nn.Sequential(nn.Linear(20, 12), nn.ReLU(), nn.Linear(12, 5)).to(b)
        results.append(train(net, vtl.asarray(xs, backend=b), vtl.asarray(ys, backend=b), 4))
    assert_same_training(*results, {"rtol": 1e-5}, {"rtol": 1e-4, "atol": 1e-5})


@pytest.mark.parametrize(("n", "o", "p", "k"), [(1, 3, 5, 7), (3, 70, 33, 20), (2, 130, 129, 9)])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("big", [False, True])
def test_images_product_writes_nchw(wgpu, monkeypatch, n, o, p, k, bias, big):
    """A convolution's product per image, ``w @ col[i]^T + b`` into ``(n, O, P)``, in one
    dispatch (the 64x64 kernel, or the 128x128 one forced for small shapes)."""
    from vtl.backends.wgpu import _linalg

    if big:
        monkeypatch.setattr(_linalg, "BIG_MIN_TILES", 1)
        monkeypatch.setattr(_linalg, "BIG_MIN_FILL", 0.0)
    rng = np.random.default_rng(n * o + p)
    w, col, b = (rng.standard_normal(s).astype(np.float32) for s in ((o, k), (n * p, k), (o,)))
    xp = wgpu.xp
    got, count, _ = _counts(lambda: _nn.images_product(xp.asarray(w), xp.asarray(col),
                                                        xp.asarray(b) if bias else None, n))
    assert count == 1
    ref = np.einsum("ok,npk->nop", w.astype(np.float64), col.reshape(n, p, k).astype(np.float64))
    ref = ref + (b[:, None] if bias else 0)
    np.testing.assert_allclose(xp.to_numpy(got), ref, rtol=1e-5, atol=1e-5)
    # the plain linear kernel of the same dtype and bindings keeps its own (column) bias
    x, w2 = rng.standard_normal((4, k)).astype(np.float32), w
    lin = _nn.linear(xp.asarray(x), xp.asarray(w2), xp.asarray(b))
    np.testing.assert_allclose(xp.to_numpy(lin), x @ w2.T + b, rtol=1e-5, atol=1e-5)


# -- linear ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("m", "k", "n"), [(1, 1, 1), (5, 7, 3), (70, 33, 130), (130, 65, 10)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_kernel_equals_matmul_plus_bias(wgpu, m, k, n, bias):
    rng = np.random.default_rng(m * k + n)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((m, k), (n, k), (n,)))
    xp = wgpu.xp
    got = _nn.linear(xp.asarray(x), xp.asarray(w), xp.asarray(b) if bias else None)
    ref = x @ w.T + (b if bias else 0)
    np.testing.assert_allclose(xp.to_numpy(got), ref, rtol=1e-5, atol=1e-5)
    # strided operands: a transposed input and a bias that is a strided view
    xt = xp.asarray(np.ascontiguousarray(x.T)).mT
    bb = xp.asarray(np.repeat(b, 2))[::2]
    got = _nn.linear(xt, xp.asarray(w), bb if bias else None)
    np.testing.assert_allclose(xp.to_numpy(got), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("m", "k", "n", "big"), [(128, 4100, 70, False), (64, 2048, 10, False),
                                                (256, 2100, 256, True)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_of_a_deep_product_splits_its_depth(wgpu, monkeypatch, m, k, n, big, bias):
    """A linear layer whose output fills few tiles over a deep input (a classifier head over
    flattened features) runs in depth slices, summed after, with the bias added once (by the
    first slice, not by the rest's product where the depth does not divide); with a ReLU it
    declines (the caller applies the ReLU to the sum). Against float64."""
    from vtl.backends.wgpu import _linalg

    if big:
        monkeypatch.setattr(_linalg, "BIG_MIN_TILES", 8)  # four 128x128 tiles: two slices
    depth, uses_big = _linalg.split_plan(wx.float32, m, n, k)
    assert depth and uses_big == big
    rng = np.random.default_rng(k)
    x, w, b = ((rng.standard_normal(s) * 0.1).astype(np.float32)
               for s in ((m, k), (n, k), (n,)))
    xp = wgpu.xp
    bb = xp.asarray(np.repeat(b, 2))[::2] if bias else None  # a strided view
    got, count, _ = _counts(lambda: _nn.linear(xp.asarray(x), xp.asarray(w), bb))
    assert count == 1 + (k % depth != 0) + 1  # the products, then the sum
    ref = x.astype(np.float64) @ w.T.astype(np.float64) + (b if bias else 0)
    np.testing.assert_allclose(xp.to_numpy(got), ref, rtol=1e-4, atol=1e-5)
    assert _nn.linear(xp.asarray(x), xp.asarray(w), bb, relu=True) is None
    # linear_relu's fallback: the ReLU of the sum, and its input gradient
    xt, wt = (vtl.asarray(v, backend="wgpu", requires_grad=True) for v in (x, w))
    y = F.linear_relu(xt, wt, vtl.asarray(b, backend="wgpu") if bias else None)
    np.testing.assert_allclose(y.numpy(), np.maximum(ref, 0), rtol=1e-4, atol=1e-5)
    vtl.sum(y).backward()
    np.testing.assert_allclose(xt.grad.numpy(), (ref > 0) @ w.astype(np.float64),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_linear_of_a_deep_16bit_product_sums_its_slices_in_float32(wgpu, name):
    """The depth slices of a 16-bit linear layer keep float32 partials (the bias added in
    float32 by the first slice), summed and rounded once: within a few roundings of the
    float64 result of the same 16-bit values."""
    import ml_dtypes

    dt = np.dtype(np.float16) if name == "float16" else np.dtype(ml_dtypes.bfloat16)
    _skip_without(dt)
    m, k, n = 128, 4100, 70
    assert _nn.split_plan(wx.float32, m, n, k)[0]  # depth slices
    rng = np.random.default_rng(7)
    x, w, b = ((rng.standard_normal(s) * 0.1).astype(dt) for s in ((m, k), (n, k), (n,)))
    xp = wgpu.xp
    got = xp.to_numpy(_nn.linear(xp.asarray(x), xp.asarray(w), xp.asarray(b)))
    assert got.dtype == dt
    ref = x.astype(np.float64) @ w.T.astype(np.float64) + b.astype(np.float64)
    eps = float(np.finfo(dt).eps)
    np.testing.assert_allclose(got.astype(np.float64), ref, rtol=2 * eps,
                               atol=2 * eps * np.abs(ref).max())


@pytest.mark.parametrize(("m", "n_out", "n_in"), [(1, 1, 1), (64, 10, 128), (3, 70, 5),
                                                  (200, 130, 9)])
def test_linear_grad_weight_kernel_equals_matmul_and_column_sum(wgpu, m, n_out, n_in):
    rng = np.random.default_rng(m + n_out)
    g = rng.standard_normal((m, n_out)).astype(np.float32)
    x = rng.standard_normal((m, n_in)).astype(np.float32)
    xp = wgpu.xp
    (gw, gb), n, _ = _counts(lambda: _nn.linear_grad_weight(xp.asarray(g), xp.asarray(x),
                                                            True))
    assert n == 1
    np.testing.assert_allclose(xp.to_numpy(gw), g.T @ x, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(xp.to_numpy(gb), g.sum(0), rtol=1e-4, atol=1e-4)
    gw2, gb2 = _nn.linear_grad_weight(xp.asarray(g), xp.asarray(x), False)
    assert gb2 is None
    np.testing.assert_allclose(xp.to_numpy(gw2), g.T @ x, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("m", "n_out", "n_in"), [(1024, 10, 27), (3000, 70, 5),
                                                  (4099, 3, 130)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_linear_grad_weight_of_a_deep_product_splits_its_depth(wgpu, m, n_out, n_in, dtype):
    """A deep product with few output tiles is summed over slices of its depth (split-K):
    one batched product, one for the rest when the depth does not divide, then the sums."""
    from vtl.backends.wgpu import _linalg

    depth = _linalg.split_depth(-(-n_out // 64) * -(-n_in // 64), m)
    assert depth and depth % 16 == 0
    rng = np.random.default_rng(m)
    g = rng.standard_normal((m, n_out)).astype(dtype)
    x = rng.standard_normal((m, n_in)).astype(dtype)
    xp = wgpu.xp
    xs = xp.asarray(np.ascontiguousarray(x.T)).mT  # a transposed view
    (gw, gb), n, _ = _counts(lambda: _nn.linear_grad_weight(xp.asarray(g), xs, True))
    assert n == 1 + (m % depth != 0) + 2  # the products, then the two sums
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(xp.to_numpy(gw), g.T @ x, rtol=tol, atol=tol)
    np.testing.assert_allclose(xp.to_numpy(gb), g.sum(0), rtol=tol, atol=tol)
    gw2, gb2 = _nn.linear_grad_weight(xp.asarray(g), xs, False)
    assert gb2 is None
    np.testing.assert_allclose(xp.to_numpy(gw2), g.T @ x, rtol=tol, atol=tol)
    # matmul takes the same path for an unbatched deep product (with 1-D operands too)
    a = rng.standard_normal((n_out, m)).astype(dtype)
    np.testing.assert_allclose(xp.to_numpy(xp.asarray(a) @ xs), a @ x, rtol=tol, atol=tol)
    np.testing.assert_allclose(xp.to_numpy(xp.asarray(a[0]) @ xs), a[0] @ x, rtol=tol,
                               atol=tol)


@pytest.mark.parametrize(("m", "transposed"), [(2100, False), (2048, True)])
@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16"])
def test_deep_product_with_few_large_tiles_splits_its_depth(wgpu, monkeypatch, m, transposed,
                                                            name):
    """A deep product whose large tiles are filled but too few runs the large-tile kernel over
    depth slices (with a rest where the depth does not divide), summed after; a linear
    layer's bias gradient is then the column sums of its output gradient (float32 sums of
    16-bit data, rounded once). Against the float64 products."""
    import ml_dtypes

    from vtl.backends.wgpu import _linalg

    dt = {"float16": np.dtype(np.float16), "bfloat16": np.dtype(ml_dtypes.bfloat16)}.get(
        name, np.dtype(np.float32))
    _skip_without(dt)
    monkeypatch.setattr(_linalg, "BIG_MIN_TILES", 4)  # two 128x128 tiles: two slices
    n_out, n_in = 256, 128
    depth = _linalg.big_split_depth(wx.asarray(np.zeros(1, dt)).dtype, n_out, n_in, m)
    assert depth == -(-m // 32) * 16
    calls = []
    real = _linalg.split_product

    def spy(*a, **k):
        calls.append(k.get("big"))
        return real(*a, **k)

    for module in (_linalg, _nn):  # linear_grad_weight calls it by its own import
        monkeypatch.setattr(module, "split_product", spy)
    rng = np.random.default_rng(m)
    g = (rng.standard_normal((m, n_out)) * 0.1).astype(dt)
    x = (rng.standard_normal((m, n_in)) * 0.1).astype(dt)
    xs = wx.asarray(np.ascontiguousarray(x.T)).mT if transposed else wx.asarray(x)
    gw, gb = _nn.linear_grad_weight(wx.asarray(g), xs, True)
    assert calls == [True]
    g64, x64 = g.astype(np.float64), x.astype(np.float64)
    tol = 2e-5 if name == "float32" else float(np.finfo(dt).eps)
    for got, want in ((gw, g64.T @ x64), (gb, g64.sum(0))):
        got = wx.to_numpy(got)
        assert got.dtype == dt
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol * 4)
    ga = wx.asarray(np.ascontiguousarray(g.T))  # matmul of an unbatched product: the same
    np.testing.assert_allclose(wx.to_numpy(ga @ xs).astype(np.float64), g64.T @ x64,
                               rtol=tol, atol=tol * 4)
    assert calls == [True, True]


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_16bit_deep_product_sums_float32_partials(wgpu, name):
    """A split-K 16-bit product (and its row sums) keeps float32 partials and rounds the
    sum once: within half a unit in the last place of the float64 result."""
    import ml_dtypes

    dt = np.dtype(np.float16) if name == "float16" else np.dtype(ml_dtypes.bfloat16)
    _skip_without(dt)
    m, n_out, n_in = 3000, 10, 27
    rng = np.random.default_rng(5)
    g = (rng.standard_normal((m, n_out)) * 0.1).astype(dt)
    x = (rng.standard_normal((m, n_in)) * 0.1).astype(dt)
    xp = wgpu.xp
    gw, gb = _nn.linear_grad_weight(xp.asarray(g), xp.asarray(x), True)
    g64, x64 = g.astype(np.float64), x.astype(np.float64)
    for got, want, mag in ((gw, g64.T @ x64, np.abs(g64).T @ np.abs(x64)),
                           (gb, g64.sum(0), np.abs(g64).sum(0))):
        got = xp.to_numpy(got)
        assert got.dtype == dt
        ulp = float(np.finfo(dt).eps) * 2.0 ** np.floor(np.log2(np.abs(want)))
        err = np.abs(got.astype(np.float64) - want)
        # half an ulp of the 16-bit result, plus float32 accumulation error
        assert np.all(err <= 0.5 * ulp + 1e-6 * mag), float(np.max(err / ulp))


def test_split_depth_only_for_deep_products_with_few_tiles(monkeypatch):
    from vtl.backends.wgpu import _linalg

    for name, value in (("SPLIT_GROUPS", 128), ("SPLIT_TARGET", 512),
                        ("SPLIT_MIN_DEPTH", 512)):
        monkeypatch.setattr(_linalg, name, value)
    assert _linalg.split_depth(128, 1 << 20) == 0  # enough tiles
    assert _linalg.split_depth(1, 1023) == 0  # shallow
    assert _linalg.split_depth(1, 1 << 20) == 2048  # 512 slices
    assert _linalg.split_depth(4, 1 << 20) == 8192  # 128 slices of 4 tiles
    assert _linalg.split_depth(4, 4000) == 512  # slices of the least depth, and a rest
    assert _linalg.split_depth(3, 1000 * 512 + 1) == 3008  # depths are multiples of 16


def test_linear_kernels_decline_what_they_do_not_handle(wgpu):
    xp = wgpu.xp
    x = xp.asarray(np.ones((2, 3), np.float32))
    w = xp.asarray(np.ones((4, 3), np.float32))
    assert _nn.linear(xp.asarray(np.ones((2, 3), np.int32)), w, None) is None
    assert _nn.linear(x, w, xp.asarray(np.float32(1.0))) is None  # a 0-d bias
    assert _nn.linear(xp.asarray(np.ones((0, 3), np.float32)), w, None) is None
    assert _nn.linear_grad_weight(x, xp.asarray(np.ones((2, 3), np.float64)), True) is None


def test_linear_layer_with_fused_kernels_matches_numpy(wgpu):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 6)).astype(np.float32)  # a 3-D input: rows flattened
    w = rng.standard_normal((4, 6)).astype(np.float32)
    b = rng.standard_normal((4,)).astype(np.float32)
    grads = []
    for be in ("numpy", "wgpu"):
        ts = [vtl.asarray(a, backend=be, requires_grad=True) for a in (x, w, b)]
        y = F.linear(*ts)
        vtl.sum(y * y).backward()
        grads.append([y.to("numpy").numpy()] + [t.grad.to("numpy").numpy() for t in ts])
    for a, c in zip(*grads, strict=True):
        np.testing.assert_allclose(c, a, rtol=1e-4, atol=1e-4)


# -- relu ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 5, 1024, 1027])
def test_relu_backward_kernel_equals_where(wgpu, n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(np.float32)
    x[: min(n, 3)] = [0.0, -0.0, np.nan][: min(n, 3)]
    g = rng.standard_normal(n).astype(np.float32)
    xp = wgpu.xp
    got, k, _ = _counts(lambda: _nn.relu_backward(xp.asarray(x), xp.asarray(g)))
    assert k == 1
    np.testing.assert_array_equal(xp.to_numpy(got), np.where(x <= 0, 0, g).astype(np.float32))
    if n > 2:
        assert _nn.relu_backward(xp.asarray(x)[::2], xp.asarray(g)[::2]) is None  # strided


# -- cross-entropy ---------------------------------------------------------------------------

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize(("m", "c"), [(1, 1), (7, 3), (64, 10), (300, 300)])
@pytest.mark.parametrize("tdtype", ["int64", "int32", "uint8"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cross_entropy_fused_equals_portable(wgpu, reduction, m, c, tdtype, dtype):
    """The fused loss and gradient against NumPy float64 and the numpy backend's portable
    path; float64 logits through the float64 exp and log (WGSL's builtins take none)."""
    for dt in (tdtype, dtype):
        if dt in ("int64", "float64") and dt not in wgpu.xp.__array_namespace_info__().dtypes():
            pytest.skip(f"adapter lacks {dt}")
    rng = np.random.default_rng(m + c)
    x, t = ce_case(rng, m, c, np.dtype(dtype), tdtype)
    tol = 1e-12 if dtype == "float64" else 1e-5
    kern = wgpu.kernel("cross_entropy")
    xt = vtl.asarray(x, backend="wgpu", requires_grad=True)
    tt = vtl.asarray(t, backend="wgpu")
    launches = kern.launches
    loss, n, waits = _counts(lambda: F.cross_entropy(xt, tt, reduction=reduction))
    assert kern.launches > launches and waits == 0
    assert n == (2 if reduction != "none" and m * c > _nn.CE_ONE_GROUP else 1)
    want, gwant = np_cross_entropy(x, t.astype(np.int64), reduction)
    v = rng.standard_normal(m).astype(dtype) if reduction == "none" else np.dtype(dtype).type(1.5)
    backward_scaled(loss, v, reduction, "wgpu")
    assert loss.numpy().dtype == xt.grad.numpy().dtype == np.dtype(dtype)
    np.testing.assert_allclose(loss.numpy(), want, rtol=tol, atol=tol / 10)
    np.testing.assert_allclose(xt.grad.numpy(), scaled_grad(gwant, v, reduction),
                               rtol=10 * tol, atol=tol / 10)
    # the portable path on the numpy backend agrees
    ref = F.cross_entropy(vtl.asarray(x), vtl.asarray(t.astype(np.int64)), reduction=reduction)
    np.testing.assert_allclose(loss.numpy(), ref.numpy(), rtol=tol, atol=tol / 10)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # inf/nan logits on purpose (numpy)
def test_cross_entropy_fused_special_values_and_all_ignored(wgpu):
    check_ce_special_values("wgpu")


def test_cross_entropy_fused_two_pass_reduction(wgpu, monkeypatch):
    monkeypatch.setattr(_nn, "CE_ONE_GROUP", 16)
    rng = np.random.default_rng(8)
    x = rng.standard_normal((700, 4)).astype(np.float32)
    t = rng.integers(0, 4, 700)
    t[::7] = 3
    t[::5] = -100
    for reduction in ("mean", "sum"):
        xt = vtl.asarray(x, backend="wgpu", requires_grad=True)
        loss, n, _ = _counts(lambda r=reduction, xt=xt: F.cross_entropy(
            xt, vtl.asarray(t, backend="wgpu"), reduction=r))
        assert n == 2
        loss.backward()
        want, g = np_cross_entropy(x, t, reduction)
        np.testing.assert_allclose(float(loss), want, rtol=1e-5)
        np.testing.assert_allclose(xt.grad.numpy(), g, rtol=1e-4, atol=1e-7)


def test_cross_entropy_fused_double_backward_matches_numpy(wgpu):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((6, 4)).astype(np.float32)
    t = np.array([0, 3, -100, 1, 2, 2])
    res = []
    for be in ("numpy", "wgpu"):
        xt = vtl.asarray(x, backend=be, requires_grad=True)
        loss = F.cross_entropy(xt, vtl.asarray(t, backend=be))
        (g,) = vtl.autograd.grad(loss, [xt], create_graph=True)
        (gg,) = vtl.autograd.grad(vtl.sum(g * g), [xt])
        res.append((g.to("numpy").numpy(), gg.to("numpy").numpy()))
    for a, b in zip(*res, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-6)


def test_cross_entropy_target_checks_keep_their_errors(wgpu):
    x = vtl.asarray(np.zeros((4, 3), np.float32), backend="wgpu")
    # uploaded targets: the known range decides on the host; a bad one falls back to the
    # device check, which names the first offending target
    with pytest.raises(IndexError, match="target 3 is out of bounds for 3 classes"):
        F.cross_entropy(x, vtl.asarray([0, 1, 3, 0], backend="wgpu"))
    with pytest.raises(IndexError, match="target -2 is out of bounds"):
        F.cross_entropy(x, vtl.asarray([0, -2, 1, 5], backend="wgpu"))
    # targets computed on the device have no known range: the kernel checks them and the
    # thread's next read raises the first bad one (no readback of its own)
    t = vtl.asarray([0, 1, 2, 1], backend="wgpu") + 2
    assert _nn.targets_valid(t._data, 3, -100) is True
    _, _, waits = _counts(lambda: F.cross_entropy(x, t))
    assert waits == 0
    loss = F.cross_entropy(x, t)
    with pytest.raises(IndexError, match="target 3 is out of bounds for 3 classes"):
        float(loss)
    ok = vtl.asarray([0, 1, 2, 1], backend="wgpu") * 1
    assert float(F.cross_entropy(x, ok)) == pytest.approx(np.log(3.0))  # the error was read
    _, _, waits = _counts(lambda: F.cross_entropy(x, ok))
    assert waits == 0
    # the known range of uploaded targets, kept by gathers, dropped by a write
    up = vtl.asarray([0, 1, 2, 1], backend="wgpu")
    assert _nn.targets_valid(up._data, 3, -100) is True
    assert _nn.targets_valid(up._data, 2, -100) is None
    taken = vtl.take(up, vtl.asarray([3, 0], backend="wgpu"))
    assert _nn.targets_valid(taken._data, 3, -100) is True
    _, _, waits = _counts(lambda: F.cross_entropy(x[:2], taken))
    assert waits == 0
    with vtl.no_grad():
        up[2] = 7
    assert _nn.known_range(up._data) is None  # the device checks it now
    loss = F.cross_entropy(x, up)
    with pytest.raises(IndexError, match="target 7 is out of bounds"):
        loss.numpy()


# -- conv2d --------------------------------------------------------------------------------------

def _dispatched(monkeypatch, grids: dict | None = None) -> list[str]:
    """The names of the kernels dispatched from now on (and into ``grids``, where given,
    each kernel's last workgroup grid ``(x, y, z)``)."""
    names: list[str] = []
    record = type(REC)._record  # every dispatch goes through it

    def logged(self, kernel, bg, bufs, words, gx, gy, gz, *args, **kwargs):
        names.append(kernel.name)
        if grids is not None:
            grids[kernel.name] = (gx, gy, gz)
        return record(self, kernel, bg, bufs, words, gx, gy, gz, *args, **kwargs)

    # on the class: undoing a patch of the instance would leave the bound method in its
    # __dict__, where profile.kernel_times looks for a timing block under way
    monkeypatch.setattr(type(REC), "_record", logged)
    return names


def _assert_conv_close(got: list, want: list, tol: float) -> None:
    """Each result within ``tol`` of the reference, relative to it and to its largest
    magnitude."""
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g.astype(np.float32), w, rtol=tol,
                                   atol=tol * (1 + np.abs(w).max()))


def _conv_case(be, xs, ws, bs, **kw):
    x = vtl.asarray(xs, backend=be, requires_grad=True)
    w = vtl.asarray(ws, backend=be, requires_grad=True)
    b = None if bs is None else vtl.asarray(bs, backend=be, requires_grad=True)
    y = F.conv2d(x, w, b, **kw)
    gy = np.cos(np.arange(y.size)).reshape(y.shape).astype(xs.dtype)
    vtl.sum(y * vtl.asarray(gy, backend=be)).backward()
    return [t.to("numpy").numpy() for t in (y, x.grad, w.grad) + (() if b is None else (b.grad,))]


@pytest.mark.parametrize(("shape", "wshape", "kw"), [
    ((2, 3, 7, 6), (4, 3, 3, 3), {"padding": 1}),
    ((3, 2, 9, 8), (5, 2, 3, 3), {"stride": 2}),
    ((1, 4, 10, 11), (3, 4, 3, 2), {"stride": (2, 3), "padding": (2, 1), "dilation": (2, 1)}),
    ((2, 1, 5, 5), (2, 1, 5, 5), {"padding": 2}),
    ((2, 3, 4, 4), (2, 3, 1, 1), {}),
    ((2, 2, 6, 7), (3, 2, 2, 4), {"padding": "same"}),  # uneven padding
    ((1, 1, 3, 3), (1, 1, 3, 3), {"stride": 5, "padding": 1}),  # taps that read no pixel
])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("implicit", [True, False])
def test_conv2d_kernel_matches_numpy_backend(wgpu, monkeypatch, shape, wshape, kw, dtype, bias,
                                             implicit):
    """The implicit-GEMM kernels and the im2col path: values and every gradient equal the
    numpy backend's."""
    rng = np.random.default_rng(sum(shape))
    xs = rng.standard_normal(shape).astype(dtype)
    ws = rng.standard_normal(wshape).astype(dtype)
    bs = rng.standard_normal(wshape[0]).astype(dtype) if bias else None
    want = _conv_case("numpy", xs, ws, bs, **kw)
    _conv_mode(monkeypatch, implicit)
    names = _dispatched(monkeypatch)
    got = _conv_case("wgpu", xs, ws, bs, **kw)
    _assert_conv_kernels(names, implicit)
    tol = 1e-5 if dtype == "float32" else 1e-12
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


@pytest.mark.parametrize(("shape", "wshape", "kw"), [
    ((5, 3, 4, 4), (70, 3, 3, 3), {"padding": 1}),  # 16 pixels an image: 5 in a tile
    ((3, 2, 9, 8), (5, 2, 3, 3), {"stride": 2, "padding": (1, 0)}),  # images across tiles
    ((2, 4, 11, 13), (130, 4, 1, 1), {}),  # 143 pixels: more than a tile an image
    ((3, 8, 5, 6), (16, 8, 3, 3), {"padding": 1}),  # large tiles: tap-major depths
])
@pytest.mark.parametrize("grid", ["folded", "per-image", "big-folded", "big-per-image"])
def test_conv2d_images_folded_into_columns_or_one_per_batch_entry(wgpu, monkeypatch, shape,
                                                                  wshape, kw, grid):
    """The implicit-GEMM forward and input gradient fold the images into the product's
    columns (one grid of whole tiles, a tile may hold pixels of several images), or take one
    image per batch entry where that grid would be too wide; both, in both tile sizes,
    equal the numpy backend's convolution and gradients."""
    from vtl.backends.wgpu import _linalg, conv

    if grid.startswith("big"):
        monkeypatch.setattr(_linalg, "BIG_MIN_TILES", 1)
        monkeypatch.setattr(_linalg, "BIG_MIN_FILL", 0.0)
    if grid.endswith("per-image"):  # as where the folded columns' grid is too wide
        def per_image(dt, rows, pixels, n):
            big = _linalg.big_tiles(dt, rows, pixels, n)
            return pixels, big, (*_linalg.tiles(rows, pixels, big), n)

        monkeypatch.setattr(conv, "_image_grid", per_image)
    rng = np.random.default_rng(sum(shape))
    xs, ws, bs = (rng.standard_normal(s).astype(np.float32) for s in (shape, wshape,
                                                                      wshape[:1]))
    want = _conv_case("numpy", xs, ws, bs, **kw)
    groups: dict[str, tuple] = {}
    _dispatched(monkeypatch, groups)
    got = _conv_case("wgpu", xs, ws, bs, **kw)
    per_image = grid.endswith("per-image")
    assert (groups["conv_fwd"][2] == shape[0]) is per_image
    dgrad = groups.get("conv_dgrad", groups.get("conv_dgrad_phase"))
    assert (dgrad[2] == shape[0]) is per_image
    _assert_conv_close(got, want, 1e-5)  # float32 sums of up to 630 terms


@pytest.mark.parametrize(("shape", "wshape", "kw"), [
    ((2, 3, 9, 8), (4, 3, 3, 3), {"stride": 2, "padding": 1}),  # ResNet's downsampling
    ((2, 3, 8, 8), (5, 3, 1, 1), {"stride": 2}),  # phases no tap reads: zero
    ((1, 2, 11, 10), (3, 2, 2, 5), {"stride": (3, 2), "padding": (1, 2)}),
    ((3, 2, 7, 12), (2, 2, 5, 2), {"stride": (2, 3), "padding": (2, 0)}),
    ((1, 1, 4, 4), (1, 1, 3, 3), {"stride": 5, "padding": 1}),  # taps that read no pixel
])
def test_conv2d_strided_input_gradient_by_stride_phases(wgpu, monkeypatch, shape, wshape, kw):
    """A strided convolution's input gradient (dilation 1) as one product per stride phase,
    each over the taps that read its pixels: equal to the numpy backend's, every pixel
    written (the phases no tap reads hold zero)."""
    rng = np.random.default_rng(sum(shape))
    xs, ws = (rng.standard_normal(s).astype(np.float32) for s in (shape, wshape))
    want = _conv_case("numpy", xs, ws, None, **kw)
    names = _dispatched(monkeypatch)
    got = _conv_case("wgpu", xs, ws, None, **kw)
    stride = kw["stride"] if isinstance(kw["stride"], tuple) else (kw["stride"],) * 2
    phases = min(stride[0], shape[2]) * min(stride[1], shape[3])
    assert names.count("conv_dgrad_phase") == phases and "conv_dgrad" not in names
    _assert_conv_close(got, want, 1e-5)


@pytest.mark.parametrize("big", [False, True])
@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("name", ["float32", "bfloat16"])
def test_conv2d_weight_gradient_tiles_and_depth_slices(wgpu, monkeypatch, big, split, bias,
                                                      name):
    """The weight gradient's product in either tile size (with a bias: its gradient as the
    small kernel's row sums, or two reductions of the output gradient beside the large
    one), in one pass or in depth slices summed after (16-bit ones in float32, rounded
    once): equal to the numpy backend's float32 convolution of the same values."""
    import ml_dtypes

    from vtl.backends.wgpu import _linalg, conv
    from vtl.backends.wgpu._dtypes import float32

    monkeypatch.setattr(conv, "WGRAD_BIG_TILES", big)
    if big:
        monkeypatch.setattr(_linalg, "BIG_MIN_TILES", 1)
        monkeypatch.setattr(_linalg, "BIG_MIN_FILL", 0.0)
    if split:
        monkeypatch.setattr(_linalg, "SPLIT_GROUPS", 1 << 20)
        monkeypatch.setattr(_linalg, "SPLIT_MIN_DEPTH", 16)
    else:
        monkeypatch.setattr(_linalg, "SPLIT_GROUPS", 0)
    shape, wshape = (3, 5, 9, 10), (7, 5, 3, 3)
    plan = conv._wgrad_plan(float32, 7, 45, 3 * 9 * 10)
    assert plan[0] == big and (plan[4] > 1) == split
    dt = np.dtype(np.float32) if name == "float32" else np.dtype(ml_dtypes.bfloat16)
    _skip_without(dt)
    rng = np.random.default_rng(4)
    xs, ws, bs = (rng.standard_normal(s).astype(dt).astype(np.float32)
                  for s in (shape, wshape, (7,)))
    want = _conv_case("numpy", xs, ws, bs if bias else None, padding=1)
    got = _conv_case("wgpu", xs.astype(dt), ws.astype(dt), bs.astype(dt) if bias else None,
                     padding=1)
    _assert_conv_close(got, want, 1e-5 if name == "float32" else 4 * float(np.finfo(dt).eps))


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("name", ["float32", "bfloat16"])
@pytest.mark.parametrize(("layout", "dilation"), [("nchw", 1), ("channels_last", 1),
                                                  ("nchw", 2)])
def test_conv2d_forward_and_input_gradient_in_depth_slices(wgpu, monkeypatch, bias, name,
                                                           layout, dilation):
    """Forward and input gradient over depth slices of whole channels in the large tiles
    (the bias added by the first slice; 16-bit partials in float32, rounded once): equal
    to the numpy backend's float32 convolution of the same values, for NCHW and
    channels-last inputs and a dilated kernel."""
    import ml_dtypes

    from vtl.backends.wgpu import _linalg, conv
    from vtl.backends.wgpu._dtypes import float32

    monkeypatch.setattr(_linalg, "BIG_MIN_TILES", 8)
    monkeypatch.setattr(_linalg, "BIG_MIN_FILL", 0.0)
    monkeypatch.setattr(_linalg, "BIG_SPLIT_MIN_DEPTH", 16)
    shape, wshape = (3, 12, 9, 10), (20, 12, 3, 3)
    pad = dilation
    cols = 3 * 9 * 10
    assert conv._depth_slices(float32, 20, cols, 12, 9) == 3  # forward: 4 channels a slice
    assert conv._depth_slices(float32, 12, cols, 20, 9) == 4  # input gradient: 5 a slice
    dt = np.dtype(np.float32) if name == "float32" else np.dtype(ml_dtypes.bfloat16)
    _skip_without(dt)
    rng = np.random.default_rng(5)
    xs, ws, bs = (rng.standard_normal(s).astype(dt).astype(np.float32)
                  for s in (shape, wshape, (20,)))
    kw = {"padding": pad, "dilation": dilation}
    want = _conv_case("numpy", xs, ws, bs if bias else None, **kw)
    xw = xs.astype(dt)
    if layout == "channels_last":
        xw = np.ascontiguousarray(xw.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    sums = []
    sum_slices = conv.sum_slices
    monkeypatch.setattr(conv, "sum_slices",
                        lambda acc, d: sums.append(acc.shape) or sum_slices(acc, d))
    got = _conv_case("wgpu", xw, ws.astype(dt), bs.astype(dt) if bias else None, **kw)
    # the forward's and the input gradient's slices (NCHW partials; the weight gradient's
    # are (slices, O, C*kh*kw))
    assert [s for s in sums if len(s) == 5] == [(3, *shape[:1], 20, 9, 10), (4, *shape)]
    _assert_conv_close(got, want, 1e-5 if name == "float32" else 4 * float(np.finfo(dt).eps))


@pytest.mark.parametrize("slices", [1, 2])
@pytest.mark.parametrize(("layout", "stride", "dilation"), [("nchw", 1, 1),
                                                            ("channels_last", 2, 1),
                                                            ("nchw", 1, 2)])
@pytest.mark.parametrize("name", ["float32", "bfloat16"])
def test_conv2d_products_walk_the_depth_tap_by_tap(wgpu, monkeypatch, slices, layout, stride,
                                                   dilation, name):
    """Large-tile forwards and input gradients (stride 1 or dilated) whose depth (slice)
    holds a multiple of 8 channels walk it tap by tap (conv_load_<op>_taps.wgsl): in one
    pass and in two slices of 8 channels, for NCHW and channels-last inputs, strided and
    dilated kernels, with the bias; equal to the numpy backend's float32 convolution of the
    same values, and to the channel-major form."""
    import ml_dtypes

    from vtl.backends.wgpu import _linalg, conv
    from vtl.backends.wgpu._dtypes import float32

    shape, wshape = (2, 16, 9, 10), (32, 16, 3, 3)
    ho, wo = (-(-(s + 2 * dilation - 2 * dilation) // stride) for s in shape[2:])
    tiles = -(-2 * ho * wo // 128)  # one row of 128x128 tiles (32 output channels)
    monkeypatch.setattr(_linalg, "BIG_MIN_TILES", 1 if slices == 1 else 2 * tiles)
    monkeypatch.setattr(_linalg, "BIG_MIN_FILL", 0.0)
    monkeypatch.setattr(_linalg, "BIG_SPLIT_MIN_DEPTH", 16)
    assert conv._depth_slices(float32, 32, 2 * ho * wo, 16, 9) == (0 if slices == 1 else 2)
    dt = np.dtype(np.float32) if name == "float32" else np.dtype(ml_dtypes.bfloat16)
    _skip_without(dt)
    rng = np.random.default_rng(slices + stride)
    xs, ws, bs = (rng.standard_normal(s).astype(dt).astype(np.float32)
                  for s in (shape, wshape, (32,)))
    kw = {"padding": dilation, "dilation": dilation, "stride": stride}
    want = _conv_case("numpy", xs, ws, bs, **kw)
    xw = xs.astype(dt)
    if layout == "channels_last":
        xw = np.ascontiguousarray(xw.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    fetches = []
    real = conv.matmul_kernel
    monkeypatch.setattr(conv, "matmul_kernel", lambda *a, **k: (fetches.append(
        (k["label"], k.get("b_fetch"), dict(k["consts"]).get("DEPTH_CH"))), real(*a, **k))[1])
    got = _conv_case("wgpu", xw, ws.astype(dt), bs.astype(dt), **kw)
    assert ("conv_fwd", conv._TAPS_FETCH, 16 // slices) in fetches
    if stride == 1:  # a strided input gradient goes by stride phases
        assert ("conv_dgrad", conv._TAPS_FETCH, 32 // slices) in fetches
    tol = 1e-5 if name == "float32" else 4 * float(np.finfo(dt).eps)
    _assert_conv_close(got, want, tol)
    monkeypatch.setattr(conv, "TAPS_FIRST", False)
    fetches.clear()
    channel_major = _conv_case("wgpu", xw, ws.astype(dt), bs.astype(dt), **kw)
    assert all(f is None for _, f, _ in fetches)
    _assert_conv_close(got, [v.astype(np.float32) for v in channel_major], tol)


@pytest.mark.parametrize(("shape", "wshape", "kw"), [
    ((3, 3, 11, 10), (20, 3, 3, 3), {"padding": 1}),
    ((2, 1, 9, 12), (70, 1, 5, 3), {"stride": (2, 1), "padding": (2, 0)}),
    ((2, 8, 9, 8), (5, 8, 3, 3), {"stride": 2, "dilation": 2, "padding": 1}),
    ((2, 6, 13, 7), (9, 6, 7, 7), {"stride": 3, "padding": 3}),
])
@pytest.mark.parametrize("name", ["float32", "float64", "float16", "bfloat16"])
def test_conv2d_input_gradient_of_few_channels_directly(wgpu, monkeypatch, shape, wshape, kw,
                                                        name):
    """The input gradient of a convolution with at most DIRECT_DGRAD_CHANNELS input
    channels (an image's colour planes) by the direct kernel (a thread per input pixel and
    four channels; weights staged in chunks of output channels, several for the 70 output
    channels), any stride, dilation and padding: against the numpy backend, with the output
    gradient channels-last too."""
    import ml_dtypes

    from vtl.backends.wgpu import conv

    dt = {"bfloat16": np.dtype(ml_dtypes.bfloat16)}.get(name, np.dtype(name))
    _skip_without(dt)
    monkeypatch.setattr(conv, "DIRECT_DGRAD_CHANNELS", 8)  # the default (the module's is 0)
    rng = np.random.default_rng(shape[1])
    xs, ws = (rng.standard_normal(s).astype(dt).astype(np.float64) for s in (shape, wshape))
    want = _conv_case("numpy", xs, ws, None, **kw)
    names = _dispatched(monkeypatch)
    got = _conv_case("wgpu", xs.astype(dt), ws.astype(dt), None, **kw)
    assert "conv_dgrad_direct" in names and "conv_dgrad" not in names
    assert "conv_dgrad_phase" not in names
    tol = {"float32": 1e-5, "float64": 1e-11}.get(name, 4 * float(np.finfo(dt).eps))

    def close(got, want):
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g.astype(np.float64), w, rtol=tol,
                                       atol=tol * (1 + np.abs(w).max()))

    close(got, want)
    # the output gradient channels-last: the kernel reads it at its strides
    x = vtl.asarray(xs.astype(dt), backend="wgpu", requires_grad=True)
    y = F.conv2d(x, vtl.asarray(ws.astype(dt), backend="wgpu"), **kw)
    gy = np.cos(np.arange(y.size)).reshape(y.shape).astype(dt)
    gcl = vtl.permute_dims(vtl.asarray(np.ascontiguousarray(gy.transpose(0, 2, 3, 1)),
                                       backend="wgpu"), (0, 3, 1, 2))
    y.backward(gcl)
    close([x.grad.numpy()], [want[1]])
    # one channel more: the product again
    monkeypatch.setattr(conv, "DIRECT_DGRAD_CHANNELS", shape[1] - 1)
    names.clear()
    _conv_case("wgpu", xs.astype(dt), ws.astype(dt), None, **kw)
    assert "conv_dgrad_direct" not in names


def test_conv2d_weight_gradient_plans_of_resnet_layers():
    """The weight gradient's plan (tiles, depth slices) of CIFAR ResNet layers at batch 128:
    the large tiles where they fill the device over depth slices, also where their tiles
    are enough to skip the small tiles' split but too few for the device alone (a 4x4 layer
    of 512 channels: 144 tiles in two slices), else the small tiles over slices."""
    from vtl.backends.wgpu import conv
    from vtl.backends.wgpu._dtypes import float32

    assert conv._wgrad_plan(float32, 512, 512 * 9, 128 * 16) == (True, 36, 4, 1024, 2)
    assert conv._wgrad_plan(float32, 256, 256 * 9, 128 * 64) == (True, 18, 2, 560, 15)
    assert conv._wgrad_plan(float32, 64, 64 * 9, 128 * 1024) == (False, 9, 1, 2304, 57)


def test_conv2d_depth_slices_where_the_large_tiles_are_too_few():
    """The depth slices serve the ResNet shapes whose outputs fill the large tiles but too
    few of them (an 8x8 layer of 256 channels at batch 64, a 4x4 one of 512 at batch 128),
    with whole channels a slice, and not the outputs with enough tiles, too narrow ones, or
    channels that do not split into slices deep enough."""
    from vtl.backends.wgpu import conv
    from vtl.backends.wgpu._dtypes import float32, float64

    assert conv._depth_slices(float32, 256, 64 * 64, 256, 9) == 4
    assert conv._depth_slices(float32, 256, 128 * 64, 256, 9) == 2
    assert conv._depth_slices(float32, 512, 128 * 16, 512, 9) == 4
    assert conv._depth_slices(float32, 128, 128 * 256, 128, 9) == 0  # 256 tiles already
    assert conv._depth_slices(float32, 64, 64 * 1024, 64, 9) == 0  # half-filled tiles
    assert conv._depth_slices(float32, 256, 64 * 64, 97, 9) == 0  # a prime channel count
    assert conv._depth_slices(float32, 256, 64 * 64, 64, 1) == 0  # slices too shallow
    assert conv._depth_slices(float64, 256, 64 * 64, 256, 9) == 0  # no large f64 tiles


def test_conv2d_stride_phases_cover_each_pixel_once():
    """Each input pixel of an axis is in one phase, read by exactly the taps (and from the
    output pixels) that the convolution's definition gives."""
    from vtl.backends.wgpu.conv import _phases

    for size, stride, pad, taps in [(9, 2, 1, 3), (8, 2, 0, 1), (11, 3, 1, 2), (4, 5, 1, 3),
                                    (12, 3, 0, 2), (7, 2, 2, 5)]:
        out = (size + 2 * pad - taps) // stride + 1
        seen = {}
        for a, count, first, t, base in _phases(size, stride, pad, taps):
            for u in range(count):
                pix = a + stride * u
                assert pix not in seen
                seen[pix] = {(first + stride * r, base + u - r) for r in range(t)
                             if 0 <= base + u - r < out}
        assert sorted(seen) == list(range(size))
        for pix, reads in seen.items():  # (tap, output pixel) with o*stride + tap - pad = pix
            assert reads == {(i, o) for i in range(taps) for o in range(out)
                             if o * stride + i - pad == pix}


def test_conv2d_image_grid_folds_where_it_fits(wgpu, monkeypatch):
    """The images go into the product's columns while that grid fits a dispatch, else one
    per batch entry, else nowhere (the convolution then declines the implicit kernels)."""
    from vtl.backends.wgpu import conv
    from vtl.backends.wgpu._dtypes import float32

    assert conv._image_grid(float32, 70, 16, 5) == (80, False, (2, 2, 1))
    monkeypatch.setattr(conv, "_MAX_GROUPS", 2)
    assert conv._image_grid(float32, 70, 100, 1) == (100, False, (2, 2, 1))
    assert conv._image_grid(float32, 70, 100, 2) == (100, False, (2, 2, 2))
    assert conv._image_grid(float32, 70, 100, 3) is None
    assert conv._image_grid(float32, 200, 10, 1) is None


def _conv_mode(monkeypatch, implicit: bool) -> None:
    from vtl.backends.wgpu.conv import WgpuConv2d

    monkeypatch.setattr(WgpuConv2d, "implicit", implicit)


def _assert_conv_kernels(names: list[str], implicit: bool) -> None:
    """The forward and both gradients ran the implicit-GEMM kernels (no patch matrix), or
    the im2col path's."""
    if implicit:  # the input gradient of a strided convolution by stride phases
        assert {"conv_fwd", "conv_wgrad"} <= set(names)
        assert "conv_dgrad" in names or "conv_dgrad_phase" in names
        assert "conv_im2col" not in names and "conv_col2im" not in names
    else:
        assert "conv_im2col" in names and "conv_col2im" in names and "conv_fwd" not in names


def _skip_without(dt) -> None:
    try:
        wx.asarray(np.zeros(1, dt))
    except TypeError as e:  # the adapter lacks the feature
        pytest.skip(str(e))


@pytest.mark.parametrize(("shape", "wshape", "kw"), [
    ((2, 3, 7, 6), (4, 3, 3, 3), {"padding": 1}),
    ((3, 2, 9, 8), (5, 2, 3, 3), {"stride": 2}),
])
@pytest.mark.parametrize("name", ["float16", "bfloat16"])
@pytest.mark.parametrize("implicit", [True, False])
def test_conv2d_kernel_16bit(wgpu, monkeypatch, shape, wshape, kw, name, implicit):
    """float16/bfloat16 convolutions take the kernel (products and tap sums accumulated in
    float32, rounded once): close to the float32 convolution of the same rounded values."""
    import ml_dtypes

    dt = np.dtype(np.float16) if name == "float16" else np.dtype(ml_dtypes.bfloat16)
    _skip_without(dt)
    rng = np.random.default_rng(sum(shape))
    rnd = (lambda a: a.astype(dt).astype(np.float32))
    xs, ws, bs = (rnd(rng.standard_normal(sh)) for sh in (shape, wshape, wshape[:1]))
    want = _conv_case("numpy", xs, ws, bs, **kw)
    _conv_mode(monkeypatch, implicit)
    names = _dispatched(monkeypatch)
    got = _conv_case("wgpu", xs.astype(dt), ws.astype(dt), bs.astype(dt), **kw)
    _assert_conv_kernels(names, implicit)
    eps = float(np.finfo(dt).eps)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == dt
        scale = float(np.abs(w).max()) + 1.0
        np.testing.assert_allclose(g.astype(np.float32), w, rtol=4 * eps, atol=4 * eps * scale)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize(("one_block", "block_rows", "max_blocks", "sum_cols"),
                         [(64, 8, 256, 8), (0, 1, 256, 8), (0, 1, 5, 8), (0, 4, 2, 8),
                          (0, 1, 64, 1), (0, 2, 256, 64)])
@pytest.mark.parametrize("width", [45, 48])
def test_layer_norm_parameter_gradients_in_blocks(wgpu, monkeypatch, dtype, one_block,
                                                  block_rows, max_blocks, sum_cols, width):
    """layer_norm's weight and bias gradients from the rows in one block (one launch) or in
    many (partial sums, then their sum in a fixed order; more blocks than the summing
    kernel's slices, workgroups of 1 to 64 loads of columns), in loads of one element or
    (float32 rows of 48) of four, with and without the input's gradient: as the portable
    path."""
    from vtl.backends.wgpu import nn as wnn

    dt = np.dtype(dtype)
    _skip_without(dt)
    monkeypatch.setattr(wnn, "LN_ONE_BLOCK_ROWS", one_block)
    monkeypatch.setattr(wnn, "LN_BLOCK_ROWS", block_rows)
    monkeypatch.setattr(wnn, "LN_MAX_BLOCKS", max_blocks)
    monkeypatch.setattr(wnn, "LN_SUM_COLS", sum_cols)
    n = width
    rng = np.random.default_rng(3)
    xs, gs = rng.standard_normal((37, n)), rng.standard_normal((37, n))
    ws, bs = rng.standard_normal(n), rng.standard_normal(n)
    kern = wgpu.kernel("layer_norm")
    res = []
    for be, d in (("numpy", np.float64), ("wgpu", dt)):
        x = vtl.asarray(xs.astype(d), backend=be, requires_grad=True)
        w, b = (vtl.asarray(a.astype(d), backend=be, requires_grad=True) for a in (ws, bs))
        before = kern.launches
        F.layer_norm(x, (n,), w, b).backward(vtl.asarray(gs.astype(d), backend=be))
        if be == "wgpu":
            assert kern.launches == before + (3 if one_block else 4)
            assert wnn._ln_width(dt, n, x._data) == (4 if dtype == "float32" and n == 48
                                                     else 1)
        res.append([t.to("numpy").numpy().astype(np.float64) for t in (x.grad, w.grad,
                                                                        b.grad)])
        if be == "wgpu":  # the parameters alone (a frozen input)
            x2 = vtl.asarray(xs.astype(d), backend=be)
            w2, b2 = (vtl.asarray(a.astype(d), backend=be, requires_grad=True)
                      for a in (ws, bs))
            F.layer_norm(x2, (n,), w2, b2).backward(vtl.asarray(gs.astype(d), backend=be))
            np.testing.assert_array_equal(w2.grad.numpy(), w.grad.numpy())
            np.testing.assert_array_equal(b2.grad.numpy(), b.grad.numpy())
    tol = 2e-5 if dtype == "float32" else 2e-2
    for got, want in zip(res[1], res[0], strict=True):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * (1 + np.abs(want).max()))


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
@pytest.mark.parametrize("which", ["layer_norm", "rms_norm", "group_norm"])
def test_layer_norm_kernel_16bit(wgpu, name, which):
    """float16/bfloat16 rows through the layer_norm kernel (float32 arithmetic and
    statistics, each output rounded once) for layer_norm, rms_norm (its rms mode) and
    group_norm (its rows): values and gradients close to the float32 computation of the same
    rounded values."""
    import ml_dtypes

    dt = np.dtype(np.float16) if name == "float16" else np.dtype(ml_dtypes.bfloat16)
    _skip_without(dt)
    rng = np.random.default_rng(11)
    rnd = (lambda a: a.astype(dt).astype(np.float32))
    xs, gs = rnd(2 * rng.standard_normal((4, 6, 5)) + 1), rnd(rng.standard_normal((4, 6, 5)))
    ws, bs = rnd(rng.standard_normal(5) + 1), rnd(rng.standard_normal(5))
    wc, bc = rnd(rng.standard_normal(6) + 1), rnd(rng.standard_normal(6))
    fns = {"layer_norm": lambda x, w, b: F.layer_norm(x, (5,), w, b),
           "rms_norm": lambda x, w, b: F.rms_norm(x, (5,), w, 1e-3),
           "group_norm": lambda x, w, b: F.group_norm(x, 3, w, b)}
    kern = wgpu.kernel("layer_norm")
    res = []
    for be, d in (("numpy", np.float32), ("wgpu", dt)):
        x = vtl.asarray(xs.astype(d), backend=be, requires_grad=True)
        pw, pb = (wc, bc) if which == "group_norm" else (ws, bs)
        w = vtl.asarray(pw.astype(d), backend=be, requires_grad=True)
        b = vtl.asarray(pb.astype(d), backend=be, requires_grad=True)
        before = kern.launches
        y = fns[which](x, w, b)
        y.backward(vtl.asarray(gs.astype(d), backend=be))
        if be == "wgpu":  # forward; backward: rows, then (for the kernel's own weight and
            # bias; group_norm applies its per-channel ones outside) their sums, one block
            assert kern.launches == before + (2 if which == "group_norm" else 3)
        grads = [x.grad, w.grad] + ([] if which == "rms_norm" else [b.grad])
        res.append([t.to("numpy").numpy() for t in (y, *grads)])
    eps = float(np.finfo(dt).eps)
    for got, want in zip(res[1], res[0], strict=True):
        assert got.dtype == dt
        scale = float(np.abs(want).max()) + 1.0
        np.testing.assert_allclose(got.astype(np.float32), want, rtol=4 * eps,
                                   atol=4 * eps * scale)


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_kernel_16bit(wgpu, monkeypatch, name, approximate):
    """float16/bfloat16 GELU in the kernel, one dispatch each way (float32 arithmetic, each
    result rounded once): within about one unit in the last place of the float64 values,
    over the body and both tails."""
    import ml_dtypes

    from vtl.nn.functional import activation as act

    dt = np.dtype(np.float16) if name == "float16" else np.dtype(ml_dtypes.bfloat16)
    _skip_without(dt)
    xs = np.concatenate([np.linspace(-8, 8, 161), [-300.0, 300.0]]).astype(dt)
    gs = np.linspace(-2, 2, xs.size).astype(dt)
    names = _dispatched(monkeypatch)
    x = vtl.asarray(xs, backend="wgpu", requires_grad=True)
    y = F.gelu(x, approximate=approximate)
    y.backward(vtl.asarray(gs, backend="wgpu"))
    assert names.count("gelu") == 2 and y.dtype == vtl.asarray(xs).dtype
    x64, g64 = xs.astype(np.float64), gs.astype(np.float64)
    want = [act._gelu(np, x64, approximate), act._gelu_grad(np, x64, g64, approximate)]
    eps = float(np.finfo(dt).eps)
    # the tanh form's 1 + tanh(u) cancels in float32 in the left tail (as on any backend)
    atol = 1e-6 if approximate == "none" else 5e-6
    for got, w in zip((y, x.grad), want, strict=True):
        got = got.to("numpy").numpy()
        assert got.dtype == dt
        np.testing.assert_allclose(got.astype(np.float64), w, rtol=2 * eps, atol=atol)


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_scatter_add_16bit_on_the_device(wgpu, monkeypatch, name):
    """float16 and bfloat16 scatter-adds run on the device (repeated rows accumulate, each
    sum rounded to the dtype), never through the host."""
    import ml_dtypes

    dt = np.dtype(np.float16) if name == "float16" else np.dtype(ml_dtypes.bfloat16)
    _skip_without(dt)
    monkeypatch.setattr(np.add, "at", None)  # the host path would fail
    rng = np.random.default_rng(5)
    for rows, cols in ((5, 3), (7, 1), (4, 2)):  # odd sizes: halves of 32-bit words
        idx = rng.integers(0, rows, 11)
        src = rng.standard_normal((11, cols)).astype(dt)
        base = rng.standard_normal((rows, cols)).astype(dt)
        t = wx.asarray(base)
        wx.scatter_add(t, wx.asarray(idx), wx.asarray(src))
        ref = base.astype(np.float64)
        for i, r in enumerate(idx):  # one rounding per added value, in some order
            ref[r] += src[i].astype(np.float64)
        got = np.asarray(t)
        assert got.dtype == dt
        np.testing.assert_allclose(got.astype(np.float64), ref,
                                   atol=8 * float(np.finfo(dt).eps) * (np.abs(ref).max() + 1))
    # an overflowing sum gives inf; its neighbours in the same 32-bit word keep their bits
    big = float(np.finfo(dt).max)
    t = wx.asarray(np.array([[big, np.inf], [np.nan, -0.0]], dt))
    wx.scatter_add(t, wx.asarray(np.array([0, 0])), wx.asarray(np.array([[big, 1], [big, 1]],
                                                                         dt)))
    got = np.asarray(t)
    assert np.isposinf(got[0, 0]) and np.isposinf(got[0, 1])
    assert np.isnan(got[1, 0]) and got[1, 1] == 0 and np.signbit(got[1, 1])


@given(st.data())
def test_conv2d_kernel_random_geometry_and_layouts(wgpu, data):
    """Random sizes, strides, paddings and dilations, channels-last input views and a
    non-contiguous output gradient, by the implicit-GEMM kernels or the im2col path:
    values and gradients equal the numpy backend's."""
    from vtl.backends.wgpu.conv import WgpuConv2d

    d = data.draw
    implicit = d(st.booleans())
    kh, kw = d(st.integers(1, 4)), d(st.integers(1, 4))
    dil = (d(st.integers(1, 2)), d(st.integers(1, 2)))
    h = d(st.integers((kh - 1) * dil[0] + 1, 9))
    w = d(st.integers((kw - 1) * dil[1] + 1, 9))
    n, c, o = d(st.integers(1, 3)), d(st.integers(1, 4)), d(st.integers(1, 5))
    kw_args = {"stride": (d(st.integers(1, 3)), d(st.integers(1, 3))),
               "padding": (d(st.integers(0, 2)), d(st.integers(0, 2))), "dilation": dil}
    rng = np.random.default_rng(h * 100 + w)
    xs = rng.standard_normal((n, h, w, c))  # channels-last storage
    ws = rng.standard_normal((o, c, kh, kw))
    bs = rng.standard_normal(o) if d(st.booleans()) else None
    res = []
    for be in ("numpy", "wgpu"):
        x = vtl.permute_dims(vtl.asarray(xs, backend=be), (0, 3, 1, 2))
        x.requires_grad_()
        wt = vtl.asarray(ws, backend=be, requires_grad=True)
        b = None if bs is None else vtl.asarray(bs, backend=be, requires_grad=True)
        saved, WgpuConv2d.implicit = WgpuConv2d.implicit, implicit
        try:
            y = F.conv2d(x, wt, b, **kw_args)
            gy = vtl.permute_dims(vtl.asarray(np.cos(np.arange(y.size)).reshape(
                y.shape[0], y.shape[2], y.shape[3], y.shape[1]), backend=be), (0, 3, 1, 2))
            y.backward(gy)
        finally:
            WgpuConv2d.implicit = saved
        res.append([t.to("numpy").numpy() for t in (y, x.grad, wt.grad)
                    + (() if b is None else (b.grad,))])
    for g, want in zip(*res[::-1], strict=True):
        np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-12)


def test_conv2d_kernel_leaves_grouped_convolutions_to_the_portable_path(wgpu, monkeypatch):
    rng = np.random.default_rng(9)
    xs = rng.standard_normal((2, 4, 6, 6)).astype(np.float32)
    ws = rng.standard_normal((6, 2, 3, 3)).astype(np.float32)
    bs = rng.standard_normal(6).astype(np.float32)
    want = _conv_case("numpy", xs, ws, bs, groups=2, padding=1)
    names = _dispatched(monkeypatch)
    got = _conv_case("wgpu", xs, ws, bs, groups=2, padding=1)
    assert "conv_im2col" not in names and "conv_fwd" not in names
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_conv2d_kernel_declines_arrays_past_one_binding(wgpu, monkeypatch):
    from vtl.backends.wgpu import _runtime
    from vtl.backends.wgpu import conv as _conv

    xp = wgpu.xp
    x = xp.asarray(np.ones((2, 3, 8, 8), np.float32))
    w = xp.asarray(np.ones((4, 3, 3, 3), np.float32))
    kern = _conv.WgpuConv2d()
    geo = ((1, 1), (1, 1, 1, 1), (1, 1), 1)
    assert kern.forward(x, w, None, *geo) is not None
    rt = _runtime.get()
    # im2col: the patches take 13.8 KB; implicit GEMM binds the input, weight and output
    # (2 KB) alone, so it declines only below that
    monkeypatch.setattr(rt, "max_binding", 4096)
    out, ctx = kern.forward(x, w, None, *geo)
    assert isinstance(ctx, _conv._Saved) and ctx.x is x
    monkeypatch.setattr(kern, "implicit", False)
    assert kern.forward(x, w, None, *geo) is None
    monkeypatch.setattr(kern, "implicit", True)
    monkeypatch.setattr(rt, "max_binding", 1024)
    assert kern.forward(x, w, None, *geo) is None
    assert kern.forward(x, w, None, *geo[:3], 3) is None  # groups


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("layout", ["nchw", "channels-last"])
def test_conv2d_implicit_large_tiles_and_depth_slices(wgpu, monkeypatch, layout, dtype):
    """The implicit-GEMM forward and input gradient on the 128x128-tile kernel (forced for
    small shapes) and the weight gradient cut into many depth slices, with a channels-last
    input: float32 and float16 values and gradients against the numpy backend."""
    from vtl.backends.wgpu import _linalg
    from vtl.backends.wgpu import conv as _conv

    monkeypatch.setattr(_linalg, "BIG_MIN_TILES", 1)
    monkeypatch.setattr(_linalg, "BIG_MIN_FILL", 0.0)
    monkeypatch.setattr(_conv, "split_depth", lambda groups, k: 37)  # uneven slices
    rng = np.random.default_rng(12)
    xs = rng.standard_normal((3, 5, 11, 9)).astype(dtype)
    ws = rng.standard_normal((7, 5, 3, 3)).astype(dtype)
    bs = rng.standard_normal(7).astype(dtype)
    res = []
    for be in ("numpy", "wgpu"):
        if layout == "nchw":
            x = vtl.asarray(xs, backend=be)
        else:
            x = vtl.permute_dims(vtl.asarray(np.ascontiguousarray(xs.transpose(0, 2, 3, 1)),
                                             backend=be), (0, 3, 1, 2))
        x.requires_grad_()
        w = vtl.asarray(ws, backend=be, requires_grad=True)
        b = vtl.asarray(bs, backend=be, requires_grad=True)
        names = _dispatched(monkeypatch) if be == "wgpu" else []
        y = F.conv2d(x, w, b, stride=(1, 2), padding=1)
        gy = np.sin(np.arange(y.size)).reshape(y.shape).astype(dtype)
        vtl.sum(y * vtl.asarray(gy, backend=be)).backward()
        res.append([t.to("numpy").numpy() for t in (y, x.grad, w.grad, b.grad)])
        if be == "wgpu":
            _assert_conv_kernels(names, True)
    tol = 2e-5 if dtype == np.float32 else 2e-3
    for got, want in zip(res[1], res[0], strict=True):
        assert got.dtype == want.dtype == dtype
        scale = float(np.abs(want.astype(np.float64)).max())
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol,
                                   atol=tol * scale)


def test_conv2d_implicit_backward_declined_after_an_implicit_forward(wgpu, monkeypatch):
    """When the implicit-GEMM backward declines (e.g. a buffer past one binding) after an
    implicit forward, the patches are formed from the kept input and the im2col backward
    gives the same gradients; with only the input gradient asked for (no context kept)
    the implicit kernel runs alone."""
    from vtl.backends.wgpu import conv as _conv

    xp = wgpu.xp
    rng = np.random.default_rng(3)
    xs = rng.standard_normal((3, 4, 9, 7))
    ws = rng.standard_normal((5, 4, 3, 2))
    x, w = xp.asarray(xs), xp.asarray(ws)
    geo = ((2, 1), (1, 2, 1, 0), (1, 2), 1)
    kern = _conv.WgpuConv2d()
    out, ctx = kern.forward(x, w, None, *geo)
    assert out.shape == (3, 5, 5, 6) and isinstance(ctx, _conv._Saved)
    gy = xp.asarray(rng.standard_normal(out.shape))
    want = kern.backward(ctx, xs.shape, w, gy, *geo, True, True, True)
    monkeypatch.setattr(_conv, "_implicit_backward", lambda *a: None)
    names = _dispatched(monkeypatch)
    got = kern.backward(ctx, xs.shape, w, gy, *geo, True, True, True)
    assert "conv_im2col" in names and "conv_col2im" in names
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=1e-12)
    monkeypatch.undo()
    monkeypatch.setattr(_conv, "DIRECT_DGRAD_CHANNELS", 0)  # undone with the rest
    names = _dispatched(monkeypatch)
    dx, dw, db = kern.backward(None, xs.shape, w, gy, *geo, True, False, False)
    assert names == ["conv_dgrad"] and dw is None and db is None
    np.testing.assert_allclose(np.asarray(dx), np.asarray(want[0]), rtol=1e-12, atol=1e-12)


#: dispatches of one CIFAR CNN training step (implicit-GEMM convolutions; 46 with im2col):
#: 3 x (convolution with its bias, relu, pool), 2 linear + relu, loss | the loss
#: gradient (2), 2 linear gradients (2 each) and a relu gradient, then 3 x (pool grad, relu
#: grad, weight+bias product, input-gradient product), the first layer without the last |
#: Adam (2 grouped dispatches: 8 tensors and 2); and at batch 4 the weight gradients of the
#: first two linear layers are deep enough to be split (two sums each, ``_nn``), and so is
#: the first linear layer's product (its sum, then the ReLU on its own)
CNN_STEP_DISPATCHES = 38


def test_cnn_training_step_dispatch_budget_without_atomics(wgpu, monkeypatch):
    model = "cifar10-cnn"
    step = _vtl_setup(model, "wgpu", *_batch(model, 4))[1]
    step()
    step()
    names = _dispatched(monkeypatch)
    loss, n, waits = _counts(step)
    assert n <= CNN_STEP_DISPATCHES, f"{n} dispatches per step (budget {CNN_STEP_DISPATCHES})"
    assert waits == 0
    assert "scatter_add" not in names and names.count("conv_dgrad") == 2
    assert "conv_im2col" not in names
    assert math.isfinite(float(loss))


# -- LSTM ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("fused_steps", [True, False])
def test_lstm_cell_kernel_matches_numpy_backend(wgpu, monkeypatch, dtype, fused_steps):
    """A 2-layer bidirectional LSTM over 5 steps and an LSTMCell, forward and backward, with
    the kernels (one dispatch per step each way: the fused steps with the recurrent product,
    or a product and the cell's kernel) against the numpy backend."""
    from vtl.backends.wgpu.rnn import WgpuLstmSteps

    if not fused_steps:
        monkeypatch.setattr(WgpuLstmSteps, "_fits", staticmethod(lambda *a: False))
    rng = np.random.default_rng(4)
    xs = rng.standard_normal((5, 3, 6)).astype(dtype)
    x1 = rng.standard_normal((3, 6)).astype(dtype)
    state = None
    res = []
    for be in ("numpy", "wgpu"):
        vtl.random.manual_seed(0)
        lstm, cell = nn.LSTM(6, 4, 2, bidirectional=True), nn.LSTMCell(6, 4)
        if state is None:
            state = (lstm.state_dict(), cell.state_dict())
        lstm.load_state_dict(state[0])
        cell.load_state_dict(state[1])
        lstm, cell = lstm.to(be).to(getattr(vtl, dtype)), cell.to(be).to(getattr(vtl, dtype))
        names = _dispatched(monkeypatch) if be == "wgpu" else []
        x = vtl.asarray(xs, backend=be, requires_grad=True)
        y, (hn, cn) = lstm(x)
        h1, c1 = cell(vtl.asarray(x1, backend=be))
        loss = vtl.sum(y * y) + vtl.sum(cn) + vtl.sum(h1 * c1)
        loss.backward()
        res.append([t.to("numpy").numpy() for t in (y, hn, cn, h1, c1, x.grad)]
                   + [p.grad.to("numpy").numpy() for m in (lstm, cell) for p in m.parameters()])
        if be == "wgpu" and fused_steps:  # 4 layer-directions x 5 steps, and the cell
            assert names.count("lstm_step_fwd") == 20 and names.count("lstm_step_bwd") == 20
            assert names.count("lstm_fwd") == 1 and names.count("lstm_bwd") == 1
        elif be == "wgpu":
            assert names.count("lstm_fwd") == 21 and names.count("lstm_bwd") == 21
    tol = 1e-5 if dtype == "float32" else 1e-12
    for got, want in zip(res[1], res[0], strict=True):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_lstm_fused_steps_tile_edges(wgpu, monkeypatch):
    """Batch and hidden sizes across several workgroups of 16 units x 2 rows (an odd batch,
    a hidden size off 16, an inner dimension off the 8 slices), with initial states that
    need gradients."""
    rng = np.random.default_rng(9)
    xs = rng.standard_normal((3, 17, 5)).astype(np.float32)
    h0s, c0s = (rng.standard_normal((1, 17, 40)).astype(np.float32) for _ in range(2))
    res = []
    for be in ("numpy", "wgpu"):
        vtl.random.manual_seed(1)
        lstm = nn.LSTM(5, 40).to(be)
        names = _dispatched(monkeypatch) if be == "wgpu" else []
        x, h0, c0 = (vtl.asarray(a, backend=be, requires_grad=True) for a in (xs, h0s, c0s))
        y, (hn, cn) = lstm(x, (h0, c0))
        (vtl.sum(y * y) + vtl.sum(hn * cn)).backward()
        res.append([t.to("numpy").numpy() for t in (y, hn, cn, x.grad, h0.grad, c0.grad)]
                   + [p.grad.to("numpy").numpy() for p in lstm.parameters()])
        if be == "wgpu":
            assert names.count("lstm_step_fwd") == 3 and names.count("lstm_step_bwd") == 3
    for got, want in zip(res[1], res[0], strict=True):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


def test_lstm_steps_decline_a_batch_past_the_dispatch_limit(wgpu, monkeypatch):
    """A batch whose workgroups (2 rows each) exceed the device's per-dimension limit runs
    the product and the cell's kernel instead of the fused steps, with the same numbers."""
    from vtl.backends.wgpu import _runtime

    rng = np.random.default_rng(10)
    xs = rng.standard_normal((2, 7, 3)).astype(np.float32)
    res = []
    for limited in (False, True):
        if limited:
            monkeypatch.setattr(_runtime.get(), "max_groups", 3)  # 7 rows take 4 groups
        vtl.random.manual_seed(1)
        lstm = nn.LSTM(3, 8).to("wgpu")
        names = _dispatched(monkeypatch)
        x = vtl.asarray(xs, backend="wgpu", requires_grad=True)
        y, _ = lstm(x)
        vtl.sum(y * y).backward()
        steps = names.count("lstm_step_fwd") + names.count("lstm_step_bwd")
        assert (steps == 0) == limited, names
        res.append([t.to("numpy").numpy() for t in (y, x.grad)])
    for got, want in zip(res[1], res[0], strict=True):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("name", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(4, 3, 5, 5), (7, 2), (2, 5, 1, 9), (6, 3, 37, 29),
                                   (5, 3, 4, 8)])
def test_batch_norm_kernel(wgpu, monkeypatch, name, shape):
    """The batch_norm kernel (three dispatches each way, float32 statistics for 16-bit
    inputs with float32 parameters) against float64 NumPy, rows in several slabs (the
    largest shape: slabs of thousands of elements, each invocation loading four at a time,
    images' planes straddling the loads; (5, 3, 4, 8): planes of whole vec4s, which float32
    applies a vec4 an invocation)."""
    import ml_dtypes
    from test_cupy_batchnorm import reference

    dt = {"float16": np.dtype(np.float16), "bfloat16": np.dtype(ml_dtypes.bfloat16)}.get(
        name, np.dtype(name))
    _skip_without(dt)
    if np.prod(shape) < 1000:
        monkeypatch.setattr(_nn.BatchNorm, "SLAB_MIN", 7)
    rng = np.random.default_rng(sum(shape))
    x = (rng.standard_normal(shape) * 2 + 30).astype(dt)
    g = rng.standard_normal(shape).astype(dt)
    pdt = np.float32 if name in ("float16", "bfloat16") else dt
    w, b = (rng.standard_normal(shape[1]).astype(pdt) for _ in range(2))
    bn = vtl.backends.get("wgpu").kernel("batch_norm")
    names = _dispatched(monkeypatch)
    widths, kernel = [], _nn._kernels.compute_kernel
    monkeypatch.setattr(_nn._kernels, "compute_kernel",
                        lambda name, *a, **k: widths.append(k.get("W")) or kernel(name, *a, **k))
    y, mean, var, saved = bn.forward(*(wx.asarray(a) for a in (x, w, b)), 1e-5)
    dx, dw, db = bn.backward(saved, wx.asarray(w), wx.asarray(g), True, True, True)
    assert names == ["batch_norm_partial", "batch_norm_stats", "batch_norm_apply",
                     "batch_norm_partial", "batch_norm_coeffs", "batch_norm_apply"]
    assert ("4" in widths) == (name == "float32" and shape[-1] == 8)  # vec4s
    ref = reference(x, w, b, g, 1e-5)
    eps = {"float64": 1e-11, "float32": 2e-5}.get(name, 4 * float(np.finfo(dt).eps))
    for got, want, what in zip((y, mean, var, dx, dw, db), ref, "y mean var dx dw db".split(),
                               strict=True):
        got = np.asarray(got).astype(np.float64)
        scale = float(np.abs(want).max()) + 1
        tol = eps if what in ("y", "dx") or name == "float64" else 2e-5
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale, err_msg=what)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # nan and inf on purpose (numpy)
def test_batch_norm_training_keeps_nan_and_inf_as_numpy(wgpu):
    """A channel holding a nan, or an inf, gives nan statistics (and outputs, and running
    variance) as on the numpy backend: a diverging batch is not hidden by a variance
    clamped at 0."""
    x = np.array([[0.0, 1.0, 5.0], [1.0, np.nan, 6.0], [2.0, 3.0, np.inf], [3.0, 4.0, 8.0]],
                 np.float32)
    res = {}
    for be in ("numpy", "wgpu"):
        rm = vtl.asarray(np.zeros(3, np.float32), backend=be)
        rv = vtl.asarray(np.ones(3, np.float32), backend=be)
        y = F.batch_norm(vtl.asarray(x, backend=be), rm, rv, training=True)
        res[be] = [t.numpy() for t in (y, rm, rv)]
    for got, want in zip(res["wgpu"], res["numpy"], strict=True):
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True)
    assert np.isnan(res["wgpu"][2][1:]).all() and np.isfinite(res["wgpu"][2][0])


def test_batch_norm_layer_on_wgpu_matches_numpy(wgpu, monkeypatch):
    """``nn.BatchNorm2d`` training steps with the kernel (and the running statistics'
    one-dispatch update) against the numpy backend."""
    rng = np.random.default_rng(2)
    xs = [rng.standard_normal((6, 3, 4, 4)).astype(np.float32) * (k + 1) for k in range(3)]
    res = []
    for be in ("numpy", "wgpu"):
        vtl.random.manual_seed(0)
        m = nn.BatchNorm2d(3, momentum=0.3).to(be)
        names = _dispatched(monkeypatch) if be == "wgpu" else []
        grads = []
        for x in xs:
            t = vtl.asarray(x, backend=be, requires_grad=True)
            (m(t) ** 2).sum().backward()
            grads.append(t.grad.to("numpy").numpy())
        res.append([*grads, m.running_mean.to("numpy").numpy(),
                    m.running_var.to("numpy").numpy(), m.weight.grad.to("numpy").numpy()])
        if be == "wgpu":
            assert names.count("batch_norm_running") == 3
    for got, want in zip(res[1], res[0], strict=True):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_rnn_16bit_under_autocast(wgpu, monkeypatch, kind, name):
    """Under autocast the LSTM layer and cell run in the low dtype through the kernels (the
    steps compute in float32; the cells widen, compute and round once), and so do the
    GRU's cells: close to the portable path."""
    import ml_dtypes

    _skip_without(np.dtype(np.float16) if name == "float16" else np.dtype(ml_dtypes.bfloat16))
    names = _dispatched(monkeypatch)

    def dispatched() -> None:
        if kind == "lstm":
            assert names.count("lstm_step_fwd") == 5 and names.count("lstm_fwd") == 1
        else:
            assert names.count("gru_fwd") == 5 and names.count("gru_bwd") == 5

    assert_rnn_kernel_under_autocast("wgpu", name, kind, dispatched)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gru_cell_kernel_matches_numpy_backend(wgpu, monkeypatch, dtype):
    """A 2-layer bidirectional GRU over 6 steps and a GRUCell, forward and backward, with the
    kernel (one dispatch per step each way) against the numpy backend."""
    rng = np.random.default_rng(6)
    xs = rng.standard_normal((6, 3, 5)).astype(dtype)
    res = []
    for be in ("numpy", "wgpu"):
        vtl.random.manual_seed(0)
        gru = nn.GRU(5, 4, 2, bidirectional=True).to(be).to(getattr(vtl, dtype))
        cell = nn.GRUCell(5, 4).to(be).to(getattr(vtl, dtype))
        names = _dispatched(monkeypatch) if be == "wgpu" else []
        x = vtl.asarray(xs, backend=be, requires_grad=True)
        y, hn = gru(x)
        h1 = cell(x[0])
        (vtl.sum(y * y) + vtl.sum(hn) + vtl.sum(h1 * h1)).backward()
        res.append([t.to("numpy").numpy() for t in (y, hn, h1, x.grad)]
                   + [p.grad.to("numpy").numpy() for m in (gru, cell) for p in m.parameters()])
        if be == "wgpu":  # 4 layer-directions x 6 steps + the cell, each way
            assert names.count("gru_fwd") == 25 and names.count("gru_bwd") == 25
    tol = 1e-5 if dtype == "float32" else 1e-12
    for got, want in zip(res[1], res[0], strict=True):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


# -- a GPT-style decoder step ------------------------------------------------------------------

#: dispatches of one training step (Adam, clipping) of a 4-layer GPT-style decoder
#: (benchmarks/test_step_bench.py's model at small sizes): per layer 2 layer norms, the
#: fused attention (1 + 2, reading the heads from the packed projection and writing the merged
#: output and the projection's gradient in place), 3 dropouts and exact GELU each way, the
#: products with their bias epilogues and gradients; embeddings (gather, scatter_add), the
#: loss, clipping and the grouped Adam; at these sizes (48 rows) each layer's second
#: feed-forward product is deep enough to run in depth slices (one more dispatch, the sum).
#: A PyTorch CUDA step of such a model launched about 300 kernels.
GPT_STEP_DISPATCHES = 186


def test_gpt_training_step_dispatch_budget(wgpu, monkeypatch):
    from benchmarks import test_step_bench as S

    monkeypatch.setattr(S, "VOCAB", 64)
    monkeypatch.setattr(S, "SHAPES", {**S.SHAPES, "gpt": (12,)})
    monkeypatch.setattr(S, "QUICK", True)  # batch 4
    run, _ = S._vtl_step("gpt", "wgpu", False)
    run()
    run()
    names = _dispatched(monkeypatch)
    loss, n, waits = _counts(run)
    assert n <= GPT_STEP_DISPATCHES, f"{n} dispatches per step (budget {GPT_STEP_DISPATCHES})"
    assert waits == 0
    assert names.count("attention_fwd") == 4 and names.count("gelu") == 8
    assert math.isfinite(float(loss))


@pytest.mark.parametrize("rms", [False, True])
def test_layer_norm_vector_loads_and_unaligned_rows(wgpu, monkeypatch, rms):
    """float32 rows whose length and offsets are multiples of 4 are read and written in
    vec4 loads; a row length or an offset that is not (here: views one element into a
    buffer) takes scalar loads. Both give NumPy's outputs and gradients, and each other's
    to float32 rounding (the sums' order differs)."""
    import vtl.backends.wgpu as xp
    from vtl.backends.wgpu import nn as wnn

    rows, n = 6, 1000
    rng = np.random.default_rng(11)
    xs, gs = rng.standard_normal((rows, n)) * 2 + 1, rng.standard_normal((rows, n))
    ws, bs = rng.standard_normal(n), rng.standard_normal(n)
    kern = wgpu.kernel("layer_norm")
    widths = []
    real = wnn._ln_width
    monkeypatch.setattr(wnn, "_ln_width", lambda *a: widths.append(real(*a)) or widths[-1])

    def placed(a, shift):  # a in a buffer, ``shift`` elements from its start
        flat = xp.asarray(np.concatenate([np.zeros(shift), a.ravel()]).astype(np.float32))
        return xp.reshape(flat[shift:], a.shape)

    mu = np.zeros((rows, 1)) if rms else xs.mean(-1, keepdims=True)
    r = 1 / np.sqrt(((xs - mu) ** 2).mean(-1, keepdims=True) + 1e-5)
    xh, gw = (xs - mu) * r, gs * ws
    m1 = 0 if rms else gw.mean(-1, keepdims=True)
    want = (xh * ws + bs, r * (gw - m1 - xh * (gw * xh).mean(-1, keepdims=True)),
            (gs * xh).sum(0), gs.sum(0))
    got = {}
    for shift in (0, 1, 4):
        x, g, w, b = (placed(a, shift) for a in (xs, gs, ws, bs))
        assert x._offset == shift
        widths.clear()
        y, mean, rstd = kern.forward(x, w, b, 1e-5, rms=rms)
        dx, dw, db = kern.backward(x, w, mean, rstd, g, True, True, True, rms=rms)
        assert set(widths) == {1 if shift == 1 else 4}
        got[shift] = [np.asarray(a).astype(np.float64) for a in (y, dx, dw, db)]
        for a, ref in zip(got[shift], want, strict=True):
            np.testing.assert_allclose(a, ref, rtol=2e-4, atol=2e-4 * (1 + np.abs(ref).max()))
    for a, b4 in zip(got[1], got[0], strict=True):
        np.testing.assert_allclose(a, b4, rtol=1e-5, atol=1e-5 * (1 + np.abs(b4).max()))
    for a, b4 in zip(got[4], got[0], strict=True):
        np.testing.assert_array_equal(a, b4)


@pytest.mark.parametrize(("rows", "width"), [(5, 7), (9, 600), (5, 1000), (3, 2049),
                                             (2, 4096), (2, 4097), (2, 5000)])
@pytest.mark.parametrize("rms", [False, True])
def test_layer_norm_rows_in_registers_and_wider(wgpu, rows, width, rms):
    """layer_norm and rms_norm forward and input gradient over rows held in registers by 32
    to 256 invocations (up to 4096 elements, several rows a workgroup, the last workgroup
    part full) and wider ones read again: NumPy's statistics, outputs and gradients."""
    rng = np.random.default_rng(width)
    xs = rng.standard_normal((rows, width)) * 3 + 1
    ws, bs = rng.standard_normal(width), rng.standard_normal(width)
    gs = rng.standard_normal((rows, width))
    kern = wgpu.kernel("layer_norm")
    x, w, b, g = (vtl.asarray(a.astype(np.float32), backend="wgpu")._data
                  for a in (xs, ws, bs, gs))
    y, mean, rstd = kern.forward(x, w, b, 1e-5, rms=rms)
    mu = np.zeros((rows, 1)) if rms else xs.mean(-1, keepdims=True)
    r = 1 / np.sqrt(((xs - mu) ** 2).mean(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(np.asarray(y), (xs - mu) * r * ws + bs, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(np.asarray(mean), mu, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(rstd), r, rtol=1e-5)
    dx, _, _ = kern.backward(x, w, mean, rstd, g, True, False, False, rms=rms)
    xh, gw = (xs - mu) * r, gs * ws
    m1 = 0 if rms else gw.mean(-1, keepdims=True)
    ref = r * (gw - m1 - xh * (gw * xh).mean(-1, keepdims=True))
    np.testing.assert_allclose(np.asarray(dx), ref, rtol=2e-4, atol=2e-4)
