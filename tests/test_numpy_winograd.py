"""The NumPy backend's Winograd F(4x4, 3x3) convolution (numba, the ``vtl[cpu]`` extra)
against the im2col kernel it replaces for 3x3 stride-1 convolutions (``StridedConv2d``, the
reference) in float64 and float32: forward, the three gradients, each gradient alone, the
frozen-weight case, padding from 0 to 2 and outputs that are not whole 4x4 tiles; results
independent of the thread count; finite differences through ``vtl.nn.functional.conv2d``;
and the cases it leaves to im2col."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import check_grad
from hypothesis import given, settings
from hypothesis import strategies as st

import vtl
import vtl.nn.functional as F
from vtl.backends._common import threads as nc
from vtl.backends._common.conv import StridedConv2d
from vtl.backends.numpy import _winograd as winograd
from vtl.backends.numpy import conv as npconv

pytestmark = pytest.mark.skipif(not winograd.available(),
                                reason="numba is not installed (pip install 'vtl[cpu]')")


@pytest.fixture(autouse=True)
def _enabled(monkeypatch):
    monkeypatch.setattr(winograd, "ENABLED", True)


def _case(rng, n, c, o, h, w, pad, dtype, bias=True):
    x = rng.standard_normal((n, c, h, w)).astype(dtype)
    wt = (rng.standard_normal((o, c, 3, 3)) / np.sqrt(9 * c)).astype(dtype)
    b = rng.standard_normal(o).astype(dtype) if bias else None
    return x, wt, b, ((1, 1), pad, (1, 1), 1)


def _both(kern, x, w, b, geom, gy=None, need=(True, True, True)):
    out, ctx = kern.forward(x, w, b, *geom)
    if gy is None:
        gy = np.cos(np.arange(out.size)).reshape(out.shape).astype(out.dtype)
    return out, kern.backward(ctx, x.shape, w, gy, *geom, need[0], need[1],
                              need[2] and b is not None), gy


def _check(x, w, b, geom, dtype, need=(True, True, True)):
    kern, ref = npconv.NumpyConv2d(), StridedConv2d(np)
    assert kern._winograd(x.shape, w, x.dtype, *geom)
    out, got, gy = _both(kern, x, w, b, geom, need=need)
    out_r, want, _ = _both(ref, x, w, b, geom, gy, need)
    assert out.dtype == dtype and out.shape == out_r.shape and out.flags.c_contiguous
    # float32: F(4x4, 3x3) rounds about ten times more than a direct 3x3 sum
    rtol = 1e-11 if dtype == np.float64 else 3e-5
    for name, a, r in zip(("out", "dx", "dw", "db"), (out, *got), (out_r, *want), strict=True):
        if r is None:
            assert a is None, name
            continue
        assert a.dtype == dtype and a.shape == r.shape, name
        scale = (float(np.abs(r).max()) if r.size else 0.0) or 1.0
        np.testing.assert_allclose(a, r, rtol=0, atol=rtol * scale, err_msg=name)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 5), c=st.integers(8, 20), o=st.integers(8, 20),
       h=st.integers(3, 14), w=st.integers(3, 14),
       pad=st.tuples(*[st.integers(0, 2)] * 4), dtype=st.sampled_from([np.float64, np.float32]),
       bias=st.booleans())
def test_winograd_equals_im2col(n, c, o, h, w, pad, dtype, bias):
    """Random shapes and paddings: output and gradients equal the im2col reference."""
    if h + pad[0] + pad[1] - 2 < 4 or w + pad[2] + pad[3] - 2 < 4:
        return
    rng = np.random.default_rng(n * 1000 + c * 31 + o)
    _check(*_case(rng, n, c, o, h, w, pad, dtype, bias), dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("tile", [1, 5000, 1 << 18])
def test_winograd_tiles_of_images(monkeypatch, dtype, tile):
    """One image per tile up to the whole batch in one: the same results."""
    monkeypatch.setattr(npconv, "WINOGRAD_TILE", tile)
    rng = np.random.default_rng(tile)
    _check(*_case(rng, 7, 16, 24, 13, 10, (1, 1, 1, 1), dtype), dtype)


@pytest.mark.parametrize("need", [(True, False, False), (False, True, False),
                                  (False, False, True), (True, True, False)])
def test_winograd_partial_gradients(need):
    rng = np.random.default_rng(3)
    x, w, b, geom = _case(rng, 3, 8, 12, 9, 9, (1, 1, 1, 1), np.float64)
    _check(x, w, b, geom, np.float64, need)


def test_winograd_frozen_weight_and_layouts():
    """No context (only the input's gradient wanted, the weight frozen), a channels-last
    input and a broadcast output gradient: the same as the reference."""
    rng = np.random.default_rng(4)
    kern, ref = npconv.NumpyConv2d(), StridedConv2d(np)
    x = np.ascontiguousarray(rng.standard_normal((3, 10, 11, 8))).transpose(0, 3, 1, 2)
    w = rng.standard_normal((9, 8, 3, 3))
    geom = ((1, 1), (2, 0, 1, 1), (1, 1), 1)
    out, ctx = kern.forward(x, w, None, *geom)
    assert isinstance(ctx, npconv.WinogradContext)
    np.testing.assert_allclose(out, ref.forward(x, w, None, *geom)[0], rtol=1e-11, atol=1e-11)
    gy = np.broadcast_to(0.5, out.shape)
    dx, dw, db = kern.backward(None, x.shape, w, gy, *geom, True, False, False)
    want = ref.backward(None, x.shape, w, gy, *geom, True, False, False)
    np.testing.assert_allclose(dx, want[0], rtol=1e-11, atol=1e-11)
    assert dw is None and db is None


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_winograd_independent_of_thread_count(monkeypatch, dtype):
    """1, 2 and 3 pool threads over many tiles: the same bits."""
    monkeypatch.delenv("VTL_NUM_THREADS", raising=False)
    monkeypatch.setattr(npconv, "WINOGRAD_TILE", 3000)
    monkeypatch.setattr(npconv, "THRESHOLD", 0)
    rng = np.random.default_rng(7)
    x, w, b, geom = _case(rng, 11, 8, 10, 9, 8, (1, 1, 1, 1), dtype)
    results = []
    for n in (1, 2, 3):
        monkeypatch.setattr(nc, "usable_cpus", lambda n=n: n)
        out, grads, _ = _both(npconv.NumpyConv2d(), x, w, b, geom)
        results.append((out, *grads))
    assert len(npconv._tiles(11, 36 * 6 * 10, 3000)) > 3
    for other in results[1:]:
        for a, r in zip(other, results[0], strict=True):
            np.testing.assert_array_equal(a, r)


def test_winograd_gradients_by_finite_differences():
    """float64 through ``vtl.nn.functional.conv2d`` on the numpy backend."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 8, 6, 7))
    w = rng.standard_normal((8, 8, 3, 3))
    b = rng.standard_normal(8)
    assert winograd.fits(x.shape, w.shape, np.float64, (1, 1), (1, 1, 1, 1), (1, 1), 1)
    check_grad(lambda x, w, b: F.conv2d(x, w, b, padding=1), x, w, b)


def test_winograd_training_step_matches_im2col(monkeypatch):
    """A float32 conv net's loss and gradients with and without the Winograd path."""
    from vtl import nn

    rng = np.random.default_rng(6)
    xs = rng.standard_normal((4, 3, 12, 12)).astype(np.float32)
    ys = rng.integers(0, 5, 4)
    grads = []
    for enabled in (True, False):
        monkeypatch.setattr(winograd, "ENABLED", enabled)
        vtl.random.seed(0)
        net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
                            nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
                            nn.Conv2d(16, 8, 3, padding=1), nn.Flatten(),
                            nn.Linear(8 * 144, 5))
        x, y = vtl.asarray(xs, backend="numpy"), vtl.asarray(ys, backend="numpy")
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        grads.append([float(loss)] + [p.grad.numpy() for p in net.parameters()])
    assert grads[0][0] == pytest.approx(grads[1][0], rel=1e-5)
    for a, r in zip(grads[0][1:], grads[1][1:], strict=True):
        np.testing.assert_allclose(a, r, rtol=0, atol=2e-5 * float(np.abs(r).max()))


@pytest.mark.parametrize("change", [
    {"stride": (2, 1)}, {"dilation": (1, 2)}, {"groups": 2}, {"k": (3, 1)}, {"k": (5, 5)},
    {"c": 4}, {"o": 7}, {"dtype": np.float16}, {"pad": (3, 1, 1, 1)}, {"h": 4},
    {"enabled": False},
])
def test_winograd_declines(monkeypatch, change):
    """Shapes, dtypes and settings the Winograd path leaves to im2col."""
    assert winograd.fits((2, 8, 8, 8), (8, 8, 3, 3), np.float32, (1, 1), (0, 0, 1, 1), (1, 1), 1)
    monkeypatch.setattr(winograd, "ENABLED", change.get("enabled", True))
    c, o = change.get("c", 8), change.get("o", 8)
    groups = change.get("groups", 1)
    kh, kw = change.get("k", (3, 3))
    h = change.get("h", 8)
    ok = winograd.fits((2, c, h, 8), (o, c // groups, kh, kw), change.get("dtype", np.float32),
                       change.get("stride", (1, 1)), change.get("pad", (0, 0, 1, 1)),
                       change.get("dilation", (1, 1)), groups)
    assert not ok


def test_winograd_off_keeps_im2col(monkeypatch):
    """``ENABLED = False``: the forward keeps the input as its context (the im2col path)."""
    rng = np.random.default_rng(8)
    x, w, b, geom = _case(rng, 2, 8, 8, 8, 8, (1, 1, 1, 1), np.float32)
    monkeypatch.setattr(winograd, "ENABLED", False)
    out, ctx = npconv.NumpyConv2d().forward(x, w, b, *geom)
    assert ctx is x


def test_winograd_non_finite_input_stays_non_finite():
    """A NaN or an infinity in the input makes the outputs that read it non-finite (its
    4x4 tiles' other outputs may be NaN too, as in any Winograd convolution)."""
    rng = np.random.default_rng(9)
    x, w, b, geom = _case(rng, 1, 8, 8, 12, 12, (1, 1, 1, 1), np.float32)
    for bad in (np.nan, np.inf):
        xb = x.copy()
        xb[0, 3, 5, 6] = bad
        out, _ = npconv.NumpyConv2d().forward(xb, w, b, *geom)
        assert not np.isfinite(out[0, :, 4:7, 5:8]).any()
        assert np.isfinite(out[0, :, :, 9:]).all() and np.isfinite(out[0, :, :3]).all()


def test_winograd_empty_batch():
    """No images: empty output and input gradient, a zero weight gradient."""
    rng = np.random.default_rng(10)
    x, w, b, geom = _case(rng, 0, 8, 8, 8, 8, (1, 1, 1, 1), np.float32)
    _check(x, w, b, geom, np.float32)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_winograd_backward_uses_the_forwards_transformed_input(monkeypatch, dtype):
    """The weight gradient takes the input tiles the forward transformed (no second input
    transform) and equals, bit for bit, the one from tiles transformed again."""
    monkeypatch.setattr(npconv, "WINOGRAD_TILE", 3000)  # several tiles
    rng = np.random.default_rng(8)
    x, w, b, geom = _case(rng, 9, 8, 10, 9, 8, (1, 1, 1, 1), dtype)
    kern = npconv.NumpyConv2d()
    out, ctx = kern.forward(x, w, b, *geom)
    assert len(ctx.blocks) > 3 and len(ctx.v) == len(ctx.blocks)
    gy = np.cos(np.arange(out.size)).reshape(out.shape).astype(dtype)
    calls = []
    transform = winograd.input_transform
    monkeypatch.setattr(winograd, "input_transform",
                        lambda *a, **k: calls.append(1) or transform(*a, **k))
    kept = kern.backward(ctx, x.shape, w, gy, *geom, True, True, True)
    assert calls == []
    again = kern.backward(npconv.WinogradContext(ctx.x, ctx.u), x.shape, w, gy, *geom,
                          True, True, True)
    assert len(calls) == len(ctx.blocks)
    for a, r in zip(kept, again, strict=True):
        np.testing.assert_array_equal(a, r)


def test_winograd_large_layers_transform_the_input_again(monkeypatch):
    """Past ``WINOGRAD_KEEP`` transformed elements the forward keeps nothing but the input
    and the weight's transform; the backward transforms the input again, the same bits."""
    rng = np.random.default_rng(9)
    x, w, b, geom = _case(rng, 4, 8, 10, 9, 8, (1, 1, 1, 1), np.float64)
    kern = npconv.NumpyConv2d()
    out, ctx = kern.forward(x, w, b, *geom)
    assert ctx.v is not None
    gy = np.cos(np.arange(out.size)).reshape(out.shape)
    want = kern.backward(ctx, x.shape, w, gy, *geom, True, True, True)
    th, tw = winograd.tiles(*out.shape[2:])
    monkeypatch.setattr(npconv, "WINOGRAD_KEEP", 36 * 4 * th * tw * 8 - 1)  # one short
    out2, ctx2 = kern.forward(x, w, b, *geom)
    assert ctx2.v is None and ctx2.blocks is None
    np.testing.assert_array_equal(out2, out)
    got = kern.backward(ctx2, x.shape, w, gy, *geom, True, True, True)
    for a, r in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, r)
