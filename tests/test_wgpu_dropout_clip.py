"""The wgpu backend's fused dropout (``kernel("dropout")``, ``vtl/backends/wgpu/random.py``) and
gradient-clipping kernels (``kernel("grad_norm")``, ``vtl/backends/wgpu/optim.py``) against
the portable paths they replace and NumPy.

* Dropout: bit for bit the portable result, gradient and generator state (several shapes,
  probabilities and dtypes, non-contiguous and in-place inputs, second-order gradients,
  arrays processed in windows of one binding); the bits of a draw whose counter carries
  across words against ``vtl.random.philox_words``; under ``vtl.compile`` each replay draws
  fresh bits, the eager steps' bits.
* Gradient norms: the 1-, 2- and inf-norms of many arrays (empty ones, more than one
  dispatch's worth, several workgroups each) against NumPy, deterministic, nan and inf
  propagated; ``clip_grad_norm_``, ``get_total_norm`` and ``clip_grads_with_norm_`` through
  the kernel against the portable path, in ``ceil(arrays / per dispatch) + 1`` and
  ``ceil(arrays / per dispatch)`` dispatches; under ``vtl.compile``.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from helpers import to_numpy, use_kernel

import vtl
from vtl.backends._base import DynamicScalars
from vtl.nn import functional as F
from vtl.nn.utils import clip_grad_norm_, clip_grads_with_norm_, get_total_norm
from vtl.random import philox_words

RNG = np.random.default_rng(11)


@pytest.fixture
def be(wgpu):
    """The wgpu backend with its kernels registered (on first use)."""
    wgpu.kernel("conv2d")
    return wgpu


def _dtype(be, name):
    dt = np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)
    if name not in be.dtypes():
        pytest.skip(f"this adapter has no {name}")
    return dt


# -- dropout ---------------------------------------------------------------------------------
def _dropout(x, p, g, seed, **kw):
    vtl.random.seed(seed)
    t = vtl.asarray(x, device="wgpu", requires_grad=True)
    out = F.dropout(t, p, **kw)
    out.backward(vtl.asarray(g, device="wgpu"))
    return (out.grad_fn.name(), to_numpy(out), to_numpy(t.grad),
            vtl.random.default_generator().get_state())


def _same_bits(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    assert a.tobytes() == b.tobytes()


CASES = [((7, 9), 0.5), ((1031,), 0.1), ((), 0.3), ((2, 3, 5), 0.9), ((4, 4), 1e-9),
         ((33,), 0.99999), ((0, 3), 0.5), ((64, 257), 0.5)]


@pytest.mark.parametrize(("shape", "p"), CASES)
def test_dropout_is_the_portable_dropout(be, shape, p):
    x = RNG.standard_normal(shape).astype(np.float32)
    g = RNG.standard_normal(shape).astype(np.float32)
    kern = be.kernel("dropout")
    before = kern.launches
    name, *got = _dropout(x, p, g, 21)
    assert name == "DropoutBackward"
    assert kern.launches - before == (2 if x.size else 0)  # forward, backward
    with use_kernel("dropout", None, "wgpu"):
        ref_name, *ref = _dropout(x, p, g, 21)
    assert ref_name != "DropoutBackward"
    for a, r in zip(got[:2], ref[:2], strict=True):
        _same_bits(a, r)
    assert got[2] == ref[2]  # the generator where the portable draw leaves it
    if x.size > 1000:
        kept = got[0] != 0
        assert abs(np.mean(kept) - (1 - p)) < 0.05
        np.testing.assert_array_equal(got[0][kept], x[kept] * np.float32(1 / (1 - p)))


@pytest.mark.parametrize("offset", [0, 4, 3])
def test_vec4_dropout_is_the_scalar_kernel(be, monkeypatch, offset):
    """float32 arrays of whole vec4s at offsets that are multiples of 4 take
    dropout_vec4.wgsl: the scalar kernel's bits, forward and backward."""
    from vtl.backends.wgpu.random import WgpuDropout

    base = RNG.standard_normal(offset + 4 * 515).astype(np.float32)
    g = RNG.standard_normal(4 * 515).astype(np.float32)
    res = []
    for vec4 in (True, False):
        monkeypatch.setattr(WgpuDropout, "VEC4", vec4)
        vtl.random.seed(5)
        t = vtl.asarray(base, device="wgpu", requires_grad=True)
        x = t[offset:]
        assert x._data._offset == offset
        y = F.dropout(x, 0.4)
        y.backward(vtl.asarray(g, device="wgpu"))
        res.append((to_numpy(y), to_numpy(t.grad)))
    kern = be.kernel("dropout")
    assert (vtl.float32, True) in kern._pipelines
    for a, r in zip(res[0], res[1], strict=True):
        _same_bits(a, r)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
@pytest.mark.parametrize(("shape", "p"), [((7, 9), 0.5), ((1031,), 0.1), ((33,), 0.99999)])
def test_dropout_of_other_dtypes(be, dtype, shape, p):
    dt = _dtype(be, dtype)
    x = RNG.standard_normal(shape).astype(dt)
    g = RNG.standard_normal(shape).astype(dt)
    name, *got = _dropout(x, p, g, 5)
    assert name == "DropoutBackward"
    with use_kernel("dropout", None, "wgpu"):
        _, *ref = _dropout(x, p, g, 5)
    for a, r in zip(got[:2], ref[:2], strict=True):
        _same_bits(a, r)
    assert got[2] == ref[2]


def test_dropout_of_large_scales_and_specials_in_float16(be):
    dt = _dtype(be, "float16")
    x = np.array([6e4, -6e4, np.inf, np.nan, 1e-7, 0.0, -0.0, 3.0] * 8, dt)
    got = _dropout(x, 0.999, np.ones_like(x), 2)[1:]  # 1 / (1 - p) = 1000: inf where kept
    with use_kernel("dropout", None, "wgpu"):
        ref = _dropout(x, 0.999, np.ones_like(x), 2)[1:]
    _same_bits(got[0], ref[0])
    _same_bits(got[1], ref[1])


def test_dropout_declines(be):
    kern = be.kernel("dropout")
    xp = be.xp
    assert kern.forward(xp.ones(4, dtype=xp.complex64), 0.5, (0,) * 6) is None
    assert kern.forward(xp.ones(4, dtype=xp.int32), 0.5, (0,) * 6) is None
    assert kern.forward(xp.ones(4), 0.0, (0,) * 6) is None
    assert kern.forward(xp.ones(4), 1.0, (0,) * 6) is None
    assert not kern.supports(np.int32) and kern.supports(np.float32)


def test_dropout_of_views_in_place_and_feature_dropout(be):
    x = RNG.standard_normal((6, 11)).astype(np.float32)

    def run():
        vtl.random.seed(3)
        t = vtl.asarray(x, device="wgpu", requires_grad=True)
        a = F.dropout(t.T, 0.3)  # a transposed view: C order of the view
        y = t * 1.0
        b = F.dropout(y, 0.6, inplace=True)
        c = F.dropout2d(t[None, :, :, None], 0.5)  # channel masks: not the kernel
        vtl.sum(a * 2.0 + b.T * 3.0 + c[0, :, :, 0].T).backward()
        return ([to_numpy(v) for v in (a, b, c, t.grad)],
                vtl.random.default_generator().get_state())

    kern = be.kernel("dropout")
    before = kern.launches
    got = run()
    assert kern.launches - before == 4
    with use_kernel("dropout", None, "wgpu"):
        ref = run()
    for a, r in zip(got[0], ref[0], strict=True):
        _same_bits(a, r)
    assert got[1] == ref[1]


def test_second_order_gradients(be):
    x = RNG.standard_normal((5, 6)).astype(np.float32)

    def hvp():
        vtl.random.seed(8)
        t = vtl.asarray(x, device="wgpu", requires_grad=True)
        y = F.dropout(t * t, 0.4)
        (gx,) = vtl.autograd.grad(vtl.sum(y * y), [t], create_graph=True)
        (h,) = vtl.autograd.grad(vtl.sum(gx), [t])
        return to_numpy(gx), to_numpy(h)

    got = hvp()
    with use_kernel("dropout", None, "wgpu"):
        ref = hvp()
    for a, r in zip(got, ref, strict=True):
        _same_bits(a, r)


def test_the_bits_of_a_draw_whose_counter_carries(be):
    kern = be.kernel("dropout")
    n = 4097
    x = RNG.standard_normal(n).astype(np.float32)
    words = (0xFFFFFFFE, 0xFFFFFFFF, 7, 0, 0x1234ABCD, 0xFEDC0987)  # carries across words
    counter = sum(w << (32 * k) for k, w in enumerate(words[:4]))
    bits = philox_words(np, n, words[4:], counter)
    keep = (bits >> 8).astype(np.float32) * np.float32(2.0 ** -24) >= np.float32(0.3)
    want = x * np.where(keep, np.float32(1 / 0.7), np.float32(0))
    xw = be.xp.asarray(x)
    _same_bits(be.xp.to_numpy(kern.forward(xw, 0.3, words)), want)
    # the per-step scalars of a capture: the same words from their values
    _same_bits(be.xp.to_numpy(kern.forward(xw, 0.3, DynamicScalars(words, "uint32"))), want)
    _same_bits(be.xp.to_numpy(kern.backward(xw, 0.3, words)), want)


@pytest.mark.parametrize("cols", [1703, 1704])  # 1704: whole vec4s (dropout_vec4.wgsl)
def test_arrays_larger_than_one_binding_go_in_windows(be, monkeypatch, cols):
    from vtl.backends.wgpu import _runtime

    x = RNG.standard_normal((3, cols)).astype(np.float32)
    g = RNG.standard_normal((3, cols)).astype(np.float32)
    with use_kernel("dropout", None, "wgpu"):
        ref = _dropout(x, 0.35, g, 9)[1:]
    tx, tg = vtl.asarray(x, device="wgpu"), vtl.asarray(g, device="wgpu")
    kern = be.kernel("dropout")
    before = kern.launches
    vtl.random.seed(9)
    words = vtl.random.default_generator()._kernel_words(x.size, tx._device)
    monkeypatch.setattr(_runtime.get(), "max_binding", 8192)  # windows of 2016 float32
    y = kern.forward(tx._data, 0.35, words)
    dg = kern.backward(tg._data, 0.35, words)
    monkeypatch.undo()
    assert kern.launches - before == 2 * 3  # 5109 or 5112 elements: three windows each way
    _same_bits(be.xp.to_numpy(y), ref[0])
    _same_bits(be.xp.to_numpy(dg), ref[1])
    assert vtl.random.default_generator().get_state() == ref[2]


def test_dropout_under_compile(be, monkeypatch):
    kern = be.kernel("dropout")
    seen = []
    forward = kern.forward

    def logged(x, p, words):
        seen.append(type(words).__name__)
        return forward(x, p, words)

    monkeypatch.setattr(kern, "forward", logged)
    x = RNG.standard_normal((5, 13)).astype(np.float32)
    w = vtl.asarray(RNG.standard_normal((13, 3)).astype(np.float32), device="wgpu",
                    requires_grad=True)

    def step(t):
        w.grad = None
        loss = vtl.sum(F.dropout(t, 0.5) @ w)
        loss.backward()
        return F.dropout(t, 0.25) * 1.0, w.grad * 1.0

    t = vtl.asarray(x, device="wgpu")
    f = vtl.compile(step)
    vtl.random.seed(11)
    captured = [[to_numpy(v) for v in f(t)] for _ in range(4)]
    state = vtl.random.default_generator().get_state()
    assert f.captures == 1
    assert "DynamicScalars" in seen  # the captured draws: per-step words
    vtl.random.seed(11)
    eager = [[to_numpy(v) for v in step(t)] for _ in range(4)]
    assert vtl.random.default_generator().get_state() == state
    for c, e in zip(captured, eager, strict=True):
        for a, r in zip(c, e, strict=True):
            _same_bits(a, r)
    assert not np.array_equal(captured[2][0], captured[3][0])  # fresh bits at each replay


# -- grad_norm -------------------------------------------------------------------------------
SIZES = [(3, 7), (1000,), (0,), (257, 3), (5,), (9000,), (1,)] + [(k + 2,) for k in range(20)]


def _np_norm(arrays, p):
    flat = np.concatenate([a.ravel().astype(np.float64) for a in arrays])
    if math.isinf(p):
        return np.max(np.abs(flat)) if flat.size else 0.0
    return np.sum(np.abs(flat) ** p) ** (1.0 / p)


def _groups(kern, arrays, bare=True):
    """Dispatches of one pass over ``arrays`` (``bare``: all at the start of their buffers,
    so only their sizes are words and more fit a dispatch)."""
    return -(-sum(1 for a in arrays if a.size) // kern._per_dispatch(bare))


@pytest.mark.parametrize("p", [2.0, math.inf])
def test_norm_and_clip_of_arrays_at_offsets(be, p):
    """Arrays that do not start their buffers (contiguous slices) carry their offsets as
    words, fewer to a dispatch than arrays at offset 0: the same norm and scaling."""
    from vtl.backends.wgpu._recorder import REC

    arrays = [RNG.standard_normal(s).astype(np.float32) for s in SIZES]
    dev = [be.xp.asarray(np.concatenate([np.zeros(5, np.float32), a.ravel()]))[5:]
           for a in arrays]
    assert all(d._offset == 5 for d in dev if d.size)
    kern = be.kernel("grad_norm")
    d0 = REC.dispatches
    got = kern.norm(dev, p)
    groups = _groups(kern, arrays, bare=False)
    assert groups > _groups(kern, arrays) and REC.dispatches - d0 == groups + 1
    np.testing.assert_allclose(be.xp.to_numpy(got), _np_norm(arrays, p), rtol=1e-5)
    assert kern.clip_(dev, got, 0.5 * float(be.xp.to_numpy(got)))
    scale = 0.5 * float(be.xp.to_numpy(got)) / (float(be.xp.to_numpy(got)) + 1e-6)
    for d, a in zip(dev, arrays, strict=True):
        np.testing.assert_allclose(be.xp.to_numpy(d), a.ravel() * scale, rtol=1e-5,
                                   atol=1e-7)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("p", [1.0, 2.0, math.inf])
def test_norms_of_many_arrays(be, dtype, p):
    from vtl.backends.wgpu._recorder import REC

    dt = _dtype(be, dtype)
    arrays = [RNG.standard_normal(s).astype(dt) for s in SIZES]
    dev = [be.xp.asarray(a) for a in arrays]
    kern = be.kernel("grad_norm")
    assert kern.supports(dt, p)
    d0 = REC.dispatches
    got = kern.norm(dev, p)
    groups = _groups(kern, arrays)
    assert groups > 1 and REC.dispatches - d0 == groups + 1
    assert got.shape == () and got.dtype == dt
    np.testing.assert_allclose(be.xp.to_numpy(got), _np_norm(arrays, p),
                               rtol=1e-5 if dt == np.float32 else 1e-12)
    again = kern.norm(dev, p)  # a fixed order of the sums: the same bits
    _same_bits(be.xp.to_numpy(again), be.xp.to_numpy(got))
    max_norm = float(be.xp.to_numpy(got)) / 3
    d0 = REC.dispatches
    assert kern.clip_(dev, got, max_norm)
    assert REC.dispatches - d0 == groups
    coef = min(dt.type(max_norm) / (be.xp.to_numpy(got) + dt.type(1e-6)), dt.type(1))
    for d, a in zip(dev, arrays, strict=True):
        np.testing.assert_allclose(be.xp.to_numpy(d), a * coef,
                                   rtol=1e-6 if dt == np.float32 else 1e-14, atol=0)


@pytest.mark.parametrize("p", [1.0, 2.0, math.inf])
def test_norm_special_values(be, p):
    kern = be.kernel("grad_norm")
    xp = be.xp
    a = [RNG.standard_normal(s).astype(np.float32) for s in ((40,), (5000,))]
    a[1][4321] = np.inf
    assert float(xp.to_numpy(kern.norm([xp.asarray(v) for v in a], p))) == np.inf
    a[0][5] = np.nan
    assert np.isnan(xp.to_numpy(kern.norm([xp.asarray(v) for v in a], p)))
    a[1][4321] = 1.0
    assert np.isnan(xp.to_numpy(kern.norm([xp.asarray(v) for v in a], p)))
    # a nan norm turns every gradient nan (PyTorch's rule); an inf one zeros finite ones
    dev = [xp.asarray(v) for v in a]
    assert kern.clip_(dev, xp.asarray(np.float32(np.nan)), 1.0)
    assert all(np.isnan(xp.to_numpy(d)).all() for d in dev)
    dev = [xp.asarray(v) for v in a]
    assert kern.clip_(dev, xp.asarray(np.float32(np.inf)), 1.0)
    out = xp.to_numpy(dev[1])
    np.testing.assert_array_equal(out, np.zeros_like(out))


def test_grad_norm_declines(be):
    kern = be.kernel("grad_norm")
    xp = be.xp
    f32 = xp.ones(3, dtype=xp.float32)
    assert kern.norm([f32, xp.ones(3, dtype=xp.int32)], 2.0) is None  # mixed dtypes
    assert kern.norm([xp.ones((4, 4), dtype=xp.float32)[:, ::2]], 2.0) is None  # strided
    assert kern.norm([xp.broadcast_to(f32, (2, 3))], 2.0) is None
    assert kern.norm([f32], 3.0) is None  # a norm it does not compute
    assert kern.norm([xp.ones(0, dtype=xp.float32)], 2.0) is None
    assert kern.norm([], 2.0) is None
    assert not kern.supports(np.float16, 2.0) and not kern.supports(np.float32, 0.5)
    assert kern.supports(np.float32, math.inf)
    if "float64" in be.dtypes():
        assert not kern.clip_([f32], xp.asarray(1.0, dtype=xp.float64), 1.0)
    base = xp.ones(10, dtype=xp.float32)
    assert not kern.clip_([base[:6], base[4:]], xp.asarray(np.float32(1)), 1.0)  # overlap
    assert kern.clip_([base[:4], base[4:]], xp.asarray(np.float32(10)), 1.0)  # disjoint
    np.testing.assert_allclose(xp.to_numpy(base), np.full(10, 1 / (10 + 1e-6), np.float32))
    assert kern.clip_([xp.ones(0, dtype=xp.float32)], xp.asarray(np.float32(1)), 1.0)


def test_arrays_with_permuted_axes(be):
    kern = be.kernel("grad_norm")
    xp = be.xp
    a = RNG.standard_normal((5, 7, 3)).astype(np.float32)
    b = RNG.standard_normal((130, 40)).astype(np.float32)
    da, db = xp.permute_dims(xp.asarray(a), (2, 0, 1)), xp.asarray(b).T
    for p in (1.0, 2.0, math.inf):
        np.testing.assert_allclose(xp.to_numpy(kern.norm([da, db], p)), _np_norm([a, b], p),
                                   rtol=1e-5)
    assert kern.clip_([da, db], xp.asarray(np.float32(4.0)), 1.0)
    coef = np.float32(1) / (np.float32(4) + np.float32(1e-6))
    np.testing.assert_allclose(xp.to_numpy(da), a.transpose(2, 0, 1) * coef, rtol=1e-6)
    np.testing.assert_allclose(xp.to_numpy(db), b.T * coef, rtol=1e-6)


def _params(shapes, dt=np.float32):
    ps = []
    for s in shapes:
        t = vtl.asarray(np.zeros(s, dt), device="wgpu", requires_grad=True)
        t.grad = vtl.asarray(RNG.standard_normal(s).astype(dt), device="wgpu")
        ps.append(t)
    return ps


def _copy(ps):
    out = []
    for p in ps:
        t = vtl.asarray(to_numpy(p), device="wgpu", requires_grad=True)
        t.grad = vtl.asarray(to_numpy(p.grad), device="wgpu")
        out.append(t)
    return out


@pytest.mark.parametrize("p", [1.0, 2.0, math.inf])
def test_clip_grad_norm_through_the_kernel(be, p):
    fused = _params(SIZES[:15])
    ref = _copy(fused)
    kern = be.kernel("grad_norm")
    before = kern.launches
    got = clip_grad_norm_(fused, 0.5, norm_type=p)
    assert kern.launches - before == 2 * _groups(kern, fused) + 1
    with use_kernel("grad_norm", None, "wgpu"):
        want = clip_grad_norm_(ref, 0.5, norm_type=p)
    exact = math.isinf(p)  # a maximum has one value: the same factor, the same bits
    if exact:
        _same_bits(to_numpy(got), to_numpy(want))
    np.testing.assert_allclose(to_numpy(got), to_numpy(want), rtol=1e-6)
    for f, r in zip(fused, ref, strict=True):
        if exact:
            _same_bits(to_numpy(f.grad), to_numpy(r.grad))
        np.testing.assert_allclose(to_numpy(f.grad), to_numpy(r.grad), rtol=2e-6, atol=0)


def test_split_clipping_through_the_kernel(be):
    ps = _params(((4, 3), (3,), (17, 2)))
    grads = [to_numpy(p.grad) for p in ps]
    kern = be.kernel("grad_norm")
    before = kern.launches
    total = get_total_norm([p.grad for p in ps])
    clip_grads_with_norm_(ps, 1.0, total)
    assert kern.launches - before == 3
    n = _np_norm(grads, 2.0)
    np.testing.assert_allclose(to_numpy(total), n, rtol=1e-6)
    for p, g in zip(ps, grads, strict=True):
        np.testing.assert_allclose(to_numpy(p.grad), g * min(1.0 / (n + 1e-6), 1.0), rtol=1e-6)


def test_clipping_under_compile(be):
    shapes = [(k + 1, 3) for k in range(14)]
    w = _params(shapes)
    xs = [vtl.asarray(RNG.standard_normal((4, 3)).astype(np.float32), device="wgpu")
          for _ in range(3)]

    def step(x):
        for p in w:
            p.grad = None
        loss = sum(vtl.sum((x @ p.T) ** 2) for p in w)
        loss.backward()
        return clip_grad_norm_(w, 0.1) * 1.0, [p.grad * 1.0 for p in w]

    def run(f):
        for p, s in zip(w, shapes, strict=True):
            p._data = be.xp.asarray(np.linspace(-1, 1, math.prod(s), dtype=np.float32)
                                    .reshape(s))
        out = []
        for x in xs:
            total, grads = f(x)
            out.append([to_numpy(total)] + [to_numpy(g) for g in grads])
        return out

    kern = be.kernel("grad_norm")
    before = kern.launches
    eager = run(step)
    assert kern.launches - before == 3 * (2 * _groups(kern, w) + 1)
    f = vtl.compile(step)
    captured = run(f)
    assert f.captures == 1
    for c, e in zip(captured, eager, strict=True):
        for a, r in zip(c, e, strict=True):
            _same_bits(a, r)
