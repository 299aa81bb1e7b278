"""float16 and bfloat16 in the CuPy backend's fused nn kernels (``vtl/backends/cupy/nn.py``):
``linear``/``linear_grad_weight`` (bias add, bias gradient), ``relu_backward``,
``cross_entropy``, ``layer_norm`` and ``gelu``.

* On the host (given a C++20 compiler), through the CUDA emulation of
  ``test_cupy_nn_kernels``: the 16-bit conversions bit for bit against NumPy/ml_dtypes
  (every 16-bit value, every rounding tie between neighbours), each kernel through its real
  wrapper against NumPy math on the rounded inputs (float32 or float64) rounded once to the
  16-bit dtype, with special values (inf, nan, signed zeros, subnormals, values whose
  squares or sums overflow float16) and odd sizes; layer_norm also in float32/float64 (its
  kernels had no host check before). Tolerances are in units in the last place (ulps).
* The same emulated kernels as the numpy backend's kernels behind ``nn.functional``: a small
  16-bit model trains like the portable path, and every gradient keeps the parameters' dtype.
* On a GPU (the cupy backend): each kernel against the portable path.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import ml_dtypes
import numpy as np
import pytest
from nn_kernel_checks import (
    CE_SPECIAL_LOGITS,
    CE_SPECIAL_TARGETS,
    backward_scaled,
    ce_case,
    np_cross_entropy,
    scaled_grad,
)
from test_cupy_nn_kernels import _DEV, _HOST_MATH, FakeCupy, build_host_lib

import vtl
from vtl import nn
from vtl.backends.cupy import nn as K
from vtl.nn import functional as F
from vtl.nn.functional.activation import _gelu, _gelu_grad

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
LOW = {"float16": F16, "bfloat16": BF16}
_CNAME = {F16: "half", BF16: "bfloat16", F32: "float", np.dtype(np.float64): "double"}

#: a kernel that rounds float32 values to ``T`` and widens them back
ROUND_TRIP = K.Spec("vtl_round_trip", (
    ("const A* __restrict__", "f"), ("T* __restrict__", "h"), ("A* __restrict__", "back"),
    ("const long long", "n")), r"""
  for (long long i = threadIdx.x; i < n; i += blockDim.x) {
    h[i] = vtl_st(f[i]);
    back[i] = vtl_ld(h[i]);
  }
""")

_VARIANTS = [
    *((s, c, "int") for s in (ROUND_TRIP, K.BIAS_ADD, K.COL_SUM, K.COL_SUM_WIDE,
                              K.COL_SUM_FINISH, K.RELU_BACKWARD, K.RELU_BACKWARD8H,
                              *K.GELU_SPECS.values(), *K.SILU_SPECS.values())
      for c in ("half", "bfloat16")),
    *((s, c, tc) for s in (K.CROSS_ENTROPY, K.CROSS_ENTROPY_GRAD) for c in ("half", "bfloat16")
      for tc in ("long long", "int")),
    *((s, c, "int") for s in (K.LAYER_NORM_FWD, K.LAYER_NORM_BWD, K.LAYER_NORM_PARAMS)
      for c in ("float", "double", "half", "bfloat16")),
    *((K.COL_SUM, c, "int") for c in ("float", "double")),  # layer_norm's weight gradient
]


# -- tolerances in units in the last place ------------------------------------------------------

_BITS = {F16: (10, -14), BF16: (7, -126), F32: (23, -126), np.dtype(np.float64): (52, -1022)}


def ulp(v: np.ndarray, dt: np.dtype) -> np.ndarray:
    """The spacing of ``dt``'s values at ``v`` (the subnormal spacing below the normals)."""
    mant, emin = _BITS[np.dtype(dt)]
    a = np.abs(np.asarray(v, np.float64))
    a = np.where(np.isfinite(a) & (a > 2.0**emin), a, 2.0**emin)
    return np.exp2(np.floor(np.log2(a)) - mant)


def assert_ulps(got: np.ndarray, want: np.ndarray, dt: np.dtype, ulps: float = 1.0,
                atol: float = 0.0, msg: str = "") -> None:
    """``got`` (of dtype ``dt``) is within ``ulps`` units in the last place of ``want`` (any
    float array; nans, infinities and values beyond ``dt``'s range, which round to
    infinities, must match exactly), plus ``atol``."""
    assert np.asarray(got).dtype == dt, (np.asarray(got).dtype, dt)
    g = np.asarray(got).astype(np.float64)
    w = np.asarray(want, np.float64)
    assert g.shape == w.shape, (g.shape, w.shape)
    big = float(np.finfo(dt).max) + float(ulp(np.array([np.finfo(dt).max]), dt)[0]) / 2
    w = np.where(np.abs(w) >= big, np.copysign(np.inf, w), w)  # (overflow rounds to inf)
    fin = np.isfinite(w)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=f"nan {msg}")
    np.testing.assert_array_equal(g[np.isinf(w)], w[np.isinf(w)], err_msg=f"inf {msg}")
    err = np.abs(g - w)[fin]
    lim = ulps * ulp(w[fin], dt) + atol
    bad = ~(err <= lim)
    assert not bad.any(), (f"{msg}: {bad.sum()} of {bad.size} beyond {ulps} ulp: got "
                           f"{g[fin][bad][:5]}, want {w[fin][bad][:5]}")


def sample(rng: np.random.Generator, shape, dt: np.dtype, scale: float = 1.0) -> np.ndarray:
    return (scale * rng.standard_normal(shape)).astype(np.float32).astype(dt)


_EPS = {F16: 2.0**-10, BF16: 2.0**-7}


def assert_near_portable(got: np.ndarray, port: np.ndarray, dt: np.dtype, scale,
                         factor: float, msg: str = "") -> None:
    """A kernel's result ``got`` against the portable path's ``port``, which rounds to the
    16-bit dtype after every op: within ``factor`` epsilons of ``dt`` times ``scale`` (a
    number or an array of ``port``'s shape) wherever ``port`` is finite, and finite there."""
    g = np.asarray(got).astype(np.float64)
    p = np.asarray(port).astype(np.float64)
    assert g.shape == p.shape, (g.shape, p.shape)
    fin = np.isfinite(p)
    assert np.isfinite(g[fin]).all(), msg
    lim = factor * _EPS[dt] * np.broadcast_to(np.asarray(scale, np.float64), p.shape)[fin]
    err = np.abs(g - p)[fin]
    bad = ~(err <= lim)
    assert not bad.any(), (f"{msg}: {bad.sum()} of {bad.size} beyond the tolerance: got "
                           f"{g[fin][bad][:5]}, portable {p[fin][bad][:5]}")


def _leaf(a: np.ndarray, backend: str) -> vtl.Tensor:
    return vtl.asarray(a, backend=backend, requires_grad=True)


# the ops through nn.functional on ``backend`` (the kernels where the backend has them):
# results and gradients as NumPy arrays

def run_gelu(backend: str, x: np.ndarray, g: np.ndarray, form: str) -> tuple:
    xt = _leaf(x, backend)
    with np.errstate(all="ignore"):
        y = F.gelu(xt, approximate=form)
        y.backward(vtl.asarray(g, backend=backend))
    return y.numpy(), xt.grad.numpy()


def run_layer_norm(backend: str, x, w, b, g) -> list[np.ndarray]:
    ts = [_leaf(a, backend) for a in (x, w, b)]
    y = F.layer_norm(ts[0], (x.shape[1],), ts[1], ts[2], eps=1e-5)
    y.backward(vtl.asarray(g, backend=backend))
    assert all(t.grad.dtype == x.dtype for t in ts)
    return [y.numpy()] + [t.grad.numpy() for t in ts]


def run_cross_entropy(backend: str, x, t, v, reduction: str) -> tuple:
    xt = _leaf(x, backend)
    loss = F.cross_entropy(xt, vtl.asarray(t, backend=backend), reduction=reduction)
    assert loss.dtype == x.dtype
    backward_scaled(loss, v, reduction, backend)
    return loss.numpy(), xt.grad.numpy()


# -- the host build --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def lib16(tmp_path_factory):
    return build_host_lib(tmp_path_factory.mktemp("cupy_nn_16bit"), _VARIANTS, _HOST_MATH)


class FakeCupy16(FakeCupy):
    """The stand-in for CuPy; its 16-bit products are rounded once from float64 ones (exact
    for the small sums of the tests, so the operands' layouts do not matter)."""

    def dot(self, a, b):
        self.log.append("dot")
        if a.dtype in (F16, BF16):
            return np.dot(a.astype(np.float64), b.astype(np.float64)).astype(a.dtype)
        return np.ascontiguousarray(np.dot(a, b))


def _fake16(lib, monkeypatch):
    cp = FakeCupy16(lib, _VARIANTS)
    for cls in (K.CupyNN, K.CupyCrossEntropy, K.CupyLayerNorm, K.CupyGelu, K.CupySilu):
        monkeypatch.setattr(cls, "_device_of", staticmethod(lambda a: _DEV))
    monkeypatch.setattr(K.CupyLayerNorm, "_address", staticmethod(lambda a: a.ctypes.data))
    return SimpleNamespace(cp=cp, nn=K.CupyNN(cp), ce=K.CupyCrossEntropy(cp),
                           ln=K.CupyLayerNorm(cp), gelu=K.CupyGelu(cp), silu=K.CupySilu(cp))


@pytest.fixture
def h16(lib16, monkeypatch):
    return _fake16(lib16, monkeypatch)


# -- conversions ---------------------------------------------------------------------------------

def _neighbour_ties(dt: np.dtype) -> np.ndarray:
    """float32 values at, next to and between consecutive finite values of ``dt`` (the
    midpoints are rounding ties), the boundaries of overflow and underflow, and specials."""
    bits = np.arange(1 << 16, dtype=np.uint16)
    v = bits.view(dt).astype(np.float64)
    v = np.sort(v[np.isfinite(v)])
    mid = (v[:-1] + v[1:]) / 2  # exact in float32 (<= 12 significant bits)
    big = float(np.finfo(dt).max)
    top = big + float(ulp(np.array([big]), dt)[0]) / 2  # the tie at the top: rounds to inf
    tiny = float(ulp(np.array([0.0]), dt)[0])
    edges = np.array([top, np.nextafter(np.float32(top), np.float32(0)), tiny / 2,
                      np.nextafter(np.float32(tiny / 2), np.float32(1)), 1.5 * tiny, 1e-45,
                      np.finfo(np.float32).max, np.inf, np.nan, 0.0], np.float64)
    edges = np.concatenate([edges, -edges])
    f = np.concatenate([v, mid, edges]).astype(np.float32)
    up = np.nextafter(f, np.float32(np.inf))
    down = np.nextafter(f, np.float32(-np.inf))
    return np.concatenate([f, up, down])


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # overflow and nan in NumPy's casts
def test_conversions_are_numpys_rounding_bit_for_bit(h16, name):
    dt = LOW[name]
    kern = h16.cp.RawKernel(K.cuda_source(ROUND_TRIP, _CNAME[dt]), "vtl_round_trip")
    # every 16-bit value widens exactly (nan stays nan)
    words = np.arange(1 << 16, dtype=np.uint16).view(dt)
    wide = words.astype(np.float32)
    h = np.empty(1 << 16, dt)
    back = np.empty(1 << 16, np.float32)
    kern((1,), (256,), (wide, h, back, np.int64(1 << 16)))
    nan = np.isnan(wide)
    np.testing.assert_array_equal(back.view(np.uint32)[~nan], wide.view(np.uint32)[~nan])
    assert np.isnan(back[nan]).all() and np.isnan(h[nan]).all()
    np.testing.assert_array_equal(h.view(np.uint16)[~nan], words.view(np.uint16)[~nan])
    # rounding: ties to even, overflow to inf, underflow through the subnormals to +-0
    f = _neighbour_ties(dt)
    rng = np.random.default_rng(0)
    f = np.concatenate([f, rng.integers(0, 1 << 32, 1 << 15, dtype=np.uint64)
                        .astype(np.uint32).view(np.float32)])
    h = np.empty(f.size, dt)
    back = np.empty(f.size, np.float32)
    kern((1,), (256,), (f, h, back, np.int64(f.size)))
    with np.errstate(over="ignore"):
        want = f.astype(dt)
    nan = np.isnan(f)
    np.testing.assert_array_equal(h.view(np.uint16)[~nan], want.view(np.uint16)[~nan])
    assert np.isnan(h[nan]).all() and np.isnan(back[nan]).all()
    np.testing.assert_array_equal(back[~nan], want[~nan].astype(np.float32))


# -- relu backward, linear ----------------------------------------------------------------------

_SPECIAL = [0.0, -0.0, np.nan, np.inf, -np.inf, 1e-7, -1e-7, 65504.0, -3e38]


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
@pytest.mark.parametrize(("n", "offset"), [(1, 0), (9, 0), (300, 0), (304, 0), (304, 1)])
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_relu_backward_16bit(h16, name, n, offset):
    """Eight elements a thread where the arrays are whole, aligned 16-byte words (the signs,
    zeros, infinities and nans of x read from its bits), else one."""
    dt = LOW[name]
    rng = np.random.default_rng(n)
    x = np.empty(n + offset, dt)[offset:]  # offset: not 16-byte aligned
    x[:] = sample(rng, n, dt)
    x[: min(n, len(_SPECIAL))] = np.array(_SPECIAL[:n], np.float32).astype(dt)
    x[-min(n, 3):] = np.array([-np.nan, np.nan, -0.0][: min(n, 3)], np.float32).astype(dt)
    g = sample(rng, n, dt)
    g[-1] = np.nan
    want = np.where(x <= 0, np.zeros((), dt), g)
    h16.cp.log.clear()
    got = h16.nn.relu_backward(x.reshape(1, n), g.reshape(1, n))
    vec = n % 8 == 0 and offset == 0
    assert h16.cp.log == ["vtl_relu_backward8h" if vec else "vtl_relu_backward"]
    assert got.dtype == dt
    np.testing.assert_array_equal(got.reshape(n).view(np.uint16), want.view(np.uint16))
    # strided operands: contiguous copies, then the same kernel
    xs, gs = np.repeat(x, 2)[::2], np.repeat(g, 3)[::3]
    np.testing.assert_array_equal(h16.nn.relu_backward(xs, gs).view(np.uint16),
                                  want.view(np.uint16))
    assert h16.nn.relu_backward(x, g.astype(np.float32)) is None


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
@pytest.mark.parametrize(("m", "k", "n"), [(1, 1, 1), (5, 7, 3), (33, 9, 70)])
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # float16 overflows
def test_linear_16bit(h16, name, m, k, n):
    dt = LOW[name]
    rng = np.random.default_rng(m + n)
    x, w, b = sample(rng, (m, k), dt, 4), sample(rng, (n, k), dt, 4), sample(rng, n, dt, 4)
    if name == "float16":
        b[0] = 65504.0  # the sum overflows to inf where the product is positive
        w[-1] = 3e4
    mm = (x.astype(np.float64) @ w.astype(np.float64).T).astype(dt)  # the product
    want = (mm.astype(F32) + b.astype(F32)).astype(dt)  # the bias add, rounded once
    h16.cp.log.clear()
    got = h16.nn.linear(x, w, b)
    assert h16.cp.log == ["dot", "vtl_bias_add"]
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
    np.testing.assert_array_equal(h16.nn.linear(x, np.ascontiguousarray(w.T).T,
                                                np.repeat(b, 2)[::2]).view(np.uint16),
                                  want.view(np.uint16))
    assert h16.nn.linear(x, w, b.astype(np.float32)) is None


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
@pytest.mark.parametrize(("m", "n_out", "n_in"), [(1, 1, 1), (37, 70, 5)])
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # float16 overflows
def test_linear_grad_weight_16bit(h16, name, m, n_out, n_in, monkeypatch):
    dt = LOW[name]
    rng = np.random.default_rng(m)
    g, x = sample(rng, (m, n_out), dt), sample(rng, (m, n_in), dt)
    if name == "float16":
        g[:, 0] = 30000.0  # the column sum overflows float16: inf, as a float32 sum rounds
    h16.cp.log.clear()
    gw, gb = h16.nn.linear_grad_weight(g, x, True)
    assert h16.cp.log == ["dot", "vtl_col_sum"]
    want_b = g.astype(np.float64).sum(0)
    assert_ulps(gb, want_b, dt, 0.5 + 1e-3)  # the sum in double, rounded once
    assert_ulps(gw, g.astype(np.float64).T @ x.astype(np.float64), dt, 0.5 + 1e-3)
    _, gb2 = h16.nn.linear_grad_weight(np.ascontiguousarray(g.T).T, x, True)  # strided
    np.testing.assert_array_equal(gb2.view(np.uint16), gb.view(np.uint16))
    monkeypatch.setattr(K, "COL_SUM_SLAB_ROWS", 2)  # rows in slabs: double sums, rounded once
    h16.cp.log.clear()
    _, gb3 = h16.nn.linear_grad_weight(g, x, True)
    assert h16.cp.log == (["dot", "vtl_col_sum", "vtl_col_sum_finish"] if m > 4
                          else ["dot", "vtl_col_sum"])
    assert_ulps(gb3, want_b, dt, 0.5 + 1e-3)


# -- cross-entropy -------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["float16", "bfloat16"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize(("m", "c", "tdt"), [(1, 1, np.int64), (7, 3, np.int32),
                                             (40, 10, np.int64), (5, 70, np.int32),
                                             (300, 3, np.int64)])
def test_cross_entropy_16bit(h16, name, reduction, m, c, tdt):
    dt = LOW[name]
    rng = np.random.default_rng(m * c)
    x, t = ce_case(rng, m, c, np.float32, tdt)
    if c > 40:  # a large logit away from lane 0: exp overflows unless the row max is right
        x[::2, 45] += 60
    x = x.astype(dt)
    assert h16.ce.supports(x, t)
    h16.cp.log.clear()
    loss, saved = h16.ce.fwd(x, t, reduction, -100)
    assert h16.cp.log == ["vtl_cross_entropy"]
    assert loss.dtype == dt and loss.shape == ((m,) if reduction == "none" else ())
    assert saved.dtype == F32  # the row maxima and sums stay float32
    v = sample(rng, m, dt)
    gx = h16.ce.grad(x, t, saved, v if reduction == "none" else np.asarray(1.5, dt),
                     reduction, -100)
    assert gx.dtype == dt and gx.shape == (m, c)
    check_cross_entropy(x, t, v, reduction, loss, gx, 1.0)
    h16.ce.check_pending()
    assert_near_cross_entropy(loss, gx, *run_cross_entropy("numpy", x, t, v, reduction), dt)


def check_cross_entropy(x, t, v, reduction, loss, gx, ulps) -> None:
    """Loss and logit gradient (the loss weighted by ``v`` per row, or by 1.5) against
    float64 NumPy math on the 16-bit logits. The kernels compute in float32: absolute
    errors of float32's epsilon remain where ``log(s)`` or ``p - 1`` cancel."""
    dt = x.dtype
    want, gwant = np_cross_entropy(x.astype(np.float64), t.astype(np.int64), reduction)
    assert_ulps(loss, want, dt, ulps, atol=2.0**-22 * max(1.0, np.abs(want).max()), msg="loss")
    gref = scaled_grad(gwant, v.astype(np.float64) if reduction == "none" else v, reduction)
    assert_ulps(gx, gref, dt, ulps, atol=2.0**-22 * max(2.0**-24, np.abs(gref).max()),
                msg="grad")


def assert_near_cross_entropy(loss, gx, ploss, pgx, dt) -> None:
    assert_near_portable(loss, ploss, dt, np.abs(ploss.astype(np.float64)).max(), 4, "loss")
    assert_near_portable(gx, pgx, dt, np.abs(pgx.astype(np.float64)).max(), 4, "grad")


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_cross_entropy_16bit_many_classes_and_two_launches(h16, name, monkeypatch):
    """70000 equal logits: the sum of their exponentials (70000) is beyond float16, not
    beyond the kernel's float32; more than one block's worth: two launches."""
    dt = LOW[name]
    # at most eight blocks per launch (the grid-stride loops do the rest; the emulation
    # starts a thread per CUDA thread)
    monkeypatch.setattr(K, "_blocks", lambda n, per=256, cap=8: max(1, min(-(-n // per), 8)))
    x = np.zeros((2, 70000), dt)
    x[1, 123] = 8.0
    t = np.array([5, 123])
    h16.cp.log.clear()
    loss, saved = h16.ce.fwd(x, t, "none", -100)
    assert h16.cp.log == ["vtl_cross_entropy"] * 2
    want, gwant = np_cross_entropy(x.astype(np.float64), t, "none")
    assert_ulps(loss, want, dt, 1.0)
    assert np.isfinite(loss.astype(np.float32)).all()
    gx = h16.ce.grad(x, t, saved, np.ones(2, dt), "none", -100)
    assert_ulps(gx, gwant, dt, 1.0, atol=float(ulp(np.array([0.0]), dt)[0]))
    lm, _ = h16.ce.fwd(x, t, "mean", -100)
    assert_ulps(lm, want.mean(), dt, 1.0)


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_cross_entropy_16bit_special_values_strides_and_bad_targets(h16, name):
    dt = LOW[name]
    x = CE_SPECIAL_LOGITS.astype(dt)  # 1e30 is inf in float16
    got, _ = h16.ce.fwd(x, CE_SPECIAL_TARGETS, "none", -100)
    ref = F.cross_entropy(vtl.asarray(x.astype(np.float32), backend="numpy"),
                          vtl.asarray(CE_SPECIAL_TARGETS, backend="numpy"),
                          reduction="none").numpy()
    assert_ulps(got, ref, dt, 1.0)
    loss, _ = h16.ce.fwd(x[:2], np.array([-100, -100]), "mean", -100)
    assert math.isnan(float(loss))
    # strided logits and targets
    rng = np.random.default_rng(3)
    xb = sample(rng, (9, 70), dt, 3)
    tb = rng.integers(0, 9, 70)
    tb[::5] = 8
    xs, ts = xb.T[::2], tb[::2]
    loss, saved = h16.ce.fwd(xs, ts, "sum", 8)
    w, gw = np_cross_entropy(xs.astype(np.float64), ts, "sum", ignore_index=8)
    assert_ulps(loss, w, dt, 1.0)
    assert_ulps(h16.ce.grad(xs, ts, saved, np.asarray(1.0, dt), "sum", 8), gw, dt, 1.0,
                atol=float(ulp(np.array([0.0]), dt)[0]))
    # a bad target: nan, reported at the next check
    loss, _ = h16.ce.fwd(np.zeros((3, 3), dt), np.array([0, 7, 1]), "mean", -100)
    assert math.isnan(float(loss))
    with pytest.raises(IndexError, match="target 7 is out of bounds for 3 classes"):
        h16.ce.check_pending()


# -- layer_norm ---------------------------------------------------------------------------------

def np_layer_norm(x, w, b, eps, g):
    """The forward and the three gradients in float64 (from the rounded inputs)."""
    x = x.astype(np.float64)
    g = g.astype(np.float64)
    mu = x.mean(1, keepdims=True)
    d = x - mu
    r = 1.0 / np.sqrt((d * d).mean(1, keepdims=True) + eps)
    xh = d * r
    y = xh * (1.0 if w is None else w.astype(np.float64))
    y = y + (0.0 if b is None else b.astype(np.float64))
    gw = g * (1.0 if w is None else w.astype(np.float64))
    dx = r * (gw - gw.mean(1, keepdims=True) - xh * (gw * xh).mean(1, keepdims=True))
    return y, mu, r, dx, (g * xh).sum(0), g.sum(0)


def assert_near_layer_norm(fused: list, portable: list, dt: np.dtype) -> None:
    for f, p, what in zip(fused, portable, ("y", "dx", "dw", "db"), strict=True):
        assert_near_portable(f, p, dt, np.abs(p.astype(np.float64)).max(), 8, what)


_LN_TOL = {"float32": {"rtol": 2e-5, "atol": 2e-5}, "float64": {"rtol": 1e-11, "atol": 1e-11}}


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize(("m", "n", "affine"), [(1, 1, True), (3, 5, False), (9, 33, True),
                                                (17, 100, True)])
def test_layer_norm_kernels(h16, name, m, n, affine):
    dt = LOW.get(name, np.dtype(name))
    rng = np.random.default_rng(m * n)
    x = sample(rng, (m, n), dt, 2) + np.asarray(3, dt)
    w = sample(rng, n, dt) if affine else None
    b = sample(rng, n, dt) if affine else None
    g = sample(rng, (m, n), dt)
    eps = 1e-5
    h16.cp.log.clear()
    y, mean, rstd = h16.ln.forward(x, w, b, eps)
    assert h16.cp.log == ["vtl_layer_norm_fwd"]
    ry, rmu, rr, rdx, rdw, rdb = np_layer_norm(x, w, b, eps, g)
    assert mean.shape == rstd.shape == (m, 1)
    assert mean.dtype == rstd.dtype == K.compute_dtype(dt)  # float32 statistics for 16-bit
    low = name in LOW
    np.testing.assert_allclose(mean, rmu, **_LN_TOL.get(name, {"rtol": 1e-5, "atol": 1e-5}))
    np.testing.assert_allclose(rstd, rr, **_LN_TOL.get(name, {"rtol": 1e-5, "atol": 1e-5}))
    if low:
        assert_ulps(y, ry, dt, 1.0, atol=1e-5, msg="y")
    else:
        assert y.dtype == dt
        np.testing.assert_allclose(y, ry, **_LN_TOL[name])
    h16.cp.log.clear()
    dx, dw, db = h16.ln.backward(x, w, mean, rstd, g, True, affine, affine)
    assert h16.cp.log == ["vtl_layer_norm_bwd"] + (["vtl_layer_norm_params"] if affine else [])
    if low:
        scale = float(np.abs(rdx).max())  # dx cancels: float32 rounding of the terms
        assert_ulps(dx, rdx, dt, 1.0, atol=1e-5 * scale, msg="dx")
        if affine:
            assert_ulps(dw, rdw, dt, 1.0, atol=1e-5, msg="dw")
            assert_ulps(db, rdb, dt, 1.0, msg="db")
    else:
        np.testing.assert_allclose(dx, rdx, **_LN_TOL[name])
        if affine:
            np.testing.assert_allclose(dw, rdw, **_LN_TOL[name])
            np.testing.assert_allclose(db, rdb, **_LN_TOL[name])
    if not affine:
        assert dw is None and db is None
    elif low:
        assert_near_layer_norm([y, dx, dw, db], run_layer_norm("numpy", x, w, b, g), dt)
    # the statistics of another computation are declined (the caller's portable path)
    other = np.zeros((m, 2), K.compute_dtype(dt))
    assert h16.ln.backward(x, w, other[:, 0:1], other[:, 1:2] + 0, g, True, False, False) \
        is None
    assert h16.ln.backward(x, w, mean.copy(), rstd, g, True, False, False) is None


@pytest.mark.parametrize("name", ["bfloat16", "float32", "float64"])
@pytest.mark.parametrize(("block_rows", "max_blocks"), [(1, 256), (1, 5), (4, 2), (64, 256)])
def test_layer_norm_backward_blocks(h16, monkeypatch, name, block_rows, max_blocks):
    """The backward's row blocks (one row each up to all rows in one) and their partial
    sums of the parameter gradients (more blocks than the finishing kernel's 8 slices),
    with and without ``dx``: the same gradients each way."""
    monkeypatch.setattr(K, "LN_BLOCK_ROWS", block_rows)
    monkeypatch.setattr(K, "LN_MAX_BLOCKS", max_blocks)
    dt = LOW.get(name, np.dtype(name))
    rng = np.random.default_rng(7)
    m, n = 37, 45
    x, w, b, g = (sample(rng, s, dt) for s in ((m, n), n, n, (m, n)))
    y, mean, rstd = h16.ln.forward(x, w, b, 1e-5)
    _, _, _, rdx, rdw, rdb = np_layer_norm(x, w, b, 1e-5, g)
    h16.cp.log.clear()
    dx, dw, db = h16.ln.backward(x, w, mean, rstd, g, True, True, True)
    assert h16.cp.log == ["vtl_layer_norm_bwd", "vtl_layer_norm_params"]
    tol = {"rtol": 1e-10, "atol": 1e-10} if name == "float64" else \
        {"rtol": 0, "atol": 4e-5 if name == "float32" else 0.05}
    for got, want in ((dx, rdx), (dw, rdw), (db, rdb)):
        assert got.dtype == dt
        np.testing.assert_allclose(got.astype(np.float64), want, **tol)
    # the parameters' gradients alone, and the bias's alone: the same values
    none, dw2, db2 = h16.ln.backward(x, w, mean, rstd, g, False, True, True)
    assert none is None
    np.testing.assert_array_equal(dw2, dw)
    np.testing.assert_array_equal(db2, db)
    _, nw, db3 = h16.ln.backward(x, w, mean, rstd, g, False, False, True)
    assert nw is None
    np.testing.assert_array_equal(db3, db)
    h16.cp.log.clear()
    dx4, nw, nb = h16.ln.backward(x, w, mean, rstd, g, True, False, False)
    assert nw is None and nb is None and h16.cp.log == ["vtl_layer_norm_bwd"]
    np.testing.assert_array_equal(dx4, dx)


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize(("m", "n", "weighted"), [(1, 1, True), (3, 5, False), (17, 100, True)])
def test_layer_norm_kernels_rms_mode(h16, name, m, n, weighted):
    """``rms=True`` (rms_norm's rows): no centring each way, the mean returned as zeros,
    against float64 formulas; the mode is the flag, the launches the same."""
    dt = LOW.get(name, np.dtype(name))
    rng = np.random.default_rng(m + n)
    x = sample(rng, (m, n), dt, 2) + np.asarray(1, dt)
    w = sample(rng, n, dt) if weighted else None
    g = sample(rng, (m, n), dt)
    eps = 1e-3
    h16.cp.log.clear()
    y, mean, rstd = h16.ln.forward(x, w, None, eps, rms=True)
    assert h16.cp.log == ["vtl_layer_norm_fwd"]
    xd, gd = x.astype(np.float64), g.astype(np.float64)
    wd = 1.0 if w is None else w.astype(np.float64)
    r = 1.0 / np.sqrt((xd * xd).mean(1, keepdims=True) + eps)
    xh = xd * r
    gw = gd * wd
    want = [xh * wd, r * (gw - xh * (gw * xh).mean(1, keepdims=True)), (gd * xh).sum(0)]
    assert not mean.any()
    tol = _LN_TOL.get(name, {"rtol": 1e-5, "atol": 1e-5})
    np.testing.assert_allclose(rstd, r, **tol)
    dx, dw, db = h16.ln.backward(x, w, mean, rstd, g, True, weighted, False, rms=True)
    assert db is None and (dw is None) == (not weighted)
    got = [y, dx] + ([dw] if weighted else [])
    for a, e, what in zip(got, want, ("y", "dx", "dw"), strict=False):
        if name in LOW:
            assert_ulps(a, e, dt, 1.0, atol=1e-5 * float(np.abs(e).max()), msg=what)
        else:
            assert a.dtype == dt
            np.testing.assert_allclose(a, e, **tol)


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_layer_norm_16bit_special_values(h16, name):
    dt = LOW[name]
    big = 60000.0 if name == "float16" else 1e18
    x = np.array([[big, -big, big, -big, big],  # the variance overflows the 16-bit dtype
                  [1.0, np.inf, 0.0, 1.0, 2.0],
                  [np.nan, 1.0, 2.0, 3.0, 4.0],
                  [7.0, 7.0, 7.0, 7.0, 7.0],  # no variance: 0 * 1/sqrt(eps)
                  [-0.0, 0.0, 1e-7, -1e-7, 0.0]], np.float32).astype(dt)
    g = np.ones_like(x)
    g[0, 1] = 3
    y, mean, rstd = h16.ln.forward(x, None, None, 1e-5)
    ry, _, _, rdx, _, _ = np_layer_norm(x, None, None, 1e-5, g)
    assert_ulps(y, ry, dt, 1.0, atol=1e-5)
    assert np.isfinite(y[0].astype(np.float32)).all()
    dx, _, _ = h16.ln.backward(x, None, mean, rstd, g, True, False, False)
    assert_ulps(dx, rdx, dt, 1.0, atol=1e-5 * float(np.abs(rdx[np.isfinite(rdx)]).max()))
    # a gradient of another dtype is rounded to the rows' dtype (the float32 statistics
    # need this kernel)
    dx2, _, _ = h16.ln.backward(x, None, mean, rstd, g.astype(np.float32), True, False, False)
    np.testing.assert_array_equal(dx2.view(np.uint16), dx.view(np.uint16))


# -- gelu --------------------------------------------------------------------------------------

def _gelu_inputs(dt: np.dtype) -> np.ndarray:
    big = [60000.0, -60000.0, 65504.0] if dt == F16 else [1e30, -1e30, 3e38]
    x = np.concatenate([np.linspace(-12, 12, 241), [-30.0, 0.0, -0.0, 30.0, 1e-7, -1e-7,
                                                    np.inf, -np.inf, np.nan], big])
    return x.astype(np.float32).astype(dt)


def check_gelu(x, g, form, y, gx) -> np.ndarray:
    """The kernels' forward ``y`` and gradient ``gx`` against the portable formulas in
    float32 (on the 16-bit inputs) rounded to the 16-bit dtype; returns the forward's
    reference. float32 libm differences (erfc, tanh, exp) reach 16-bit results near rounding
    ties; the tanh form's ``1 + t`` and ``1 - t^2`` cancel near ``x = -5``: absolute errors
    of float32's epsilon times ``|x|`` (forward) and ``|x g du|`` (backward), as in
    float32."""
    dt = x.dtype
    x32, g32 = x.astype(F32), g.astype(F32)
    with np.errstate(all="ignore"):
        want = _gelu(np, x32, form)
        gwant = _gelu_grad(np, x32, g32, form)
    atol = 4e-7 if form == "tanh" else 0.0
    assert_ulps(y, want, dt, 1.0, atol=atol, msg="forward")
    assert_ulps(gx, gwant, dt, 1.0, atol=10 * atol, msg="backward")
    return want


def assert_near_gelu(x, g, y, gx, py, pgx) -> None:
    """Against the portable path, whose ops each round (errors of the 16-bit epsilon times
    ``1 + |x|``, and ``|g|``; it overflows to nan where ``x * x`` passes 65504 in float16)."""
    dt = x.dtype
    ax, ag = np.abs(x.astype(np.float64)), np.abs(g.astype(np.float64))
    with np.errstate(invalid="ignore"):
        assert_near_portable(y, py, dt, 1 + ax, 2, "forward")
        assert_near_portable(gx, pgx, dt, (1 + ax) * (ag + _EPS[dt]), 2, "backward")


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
@pytest.mark.parametrize("form", ["none", "tanh"])
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_gelu_16bit(h16, name, form):
    dt = LOW[name]
    x = _gelu_inputs(dt)
    g = np.linspace(-2, 2, x.size).astype(np.float32).astype(dt)
    h16.cp.log.clear()
    y = h16.gelu.forward(x, form)
    assert h16.cp.log == [f"vtl_gelu_fwd_{form}"] and h16.gelu.launches == 1
    gx = h16.gelu.backward(x, g, form)
    assert h16.cp.log[-1] == f"vtl_gelu_bwd_{form}" and h16.gelu.launches == 2
    want = check_gelu(x, g, form, y, gx)
    assert_near_gelu(x, g, y, gx, *run_gelu("numpy", x, g, form))
    # odd shapes: 0-d, empty, strided (a contiguous copy first)
    assert_ulps(h16.gelu.forward(x[5:6].reshape(()), form), want[5], dt, 1.0)
    assert h16.gelu.forward(x[:0], form).shape == (0,)
    xs = np.repeat(x, 2).reshape(-1, 2)[:, 1]
    np.testing.assert_array_equal(h16.gelu.forward(xs, form).view(np.uint16),
                                  y.view(np.uint16))
    assert h16.gelu.backward(x, g.astype(np.float32), form) is None  # dtypes differ


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_silu_16bit(h16, name):
    """The 16-bit SiLU kernels (float32 inside, rounded once) against float64 formulas on
    the rounded inputs: within one unit in the last place, both tails, infinities."""
    dt = LOW[name]
    x = np.concatenate([np.linspace(-20, 20, 401), [-1e4, -100.0, 100.0, np.inf]]).astype(
        np.float32).astype(dt)
    g = np.linspace(-2, 2, x.size).astype(np.float32).astype(dt)
    h16.cp.log.clear()
    y = h16.silu.forward(x)
    gx = h16.silu.backward(x, g)
    assert h16.cp.log == ["vtl_silu_fwd", "vtl_silu_bwd"] and h16.silu.launches == 2
    assert y.dtype == gx.dtype == dt
    xd, gd = x.astype(np.float64), g.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        s = 1.0 / (1.0 + np.exp(-xd))
        want_y = xd * s
        want_g = gd * s * (1.0 + xd * (1.0 - s))
    fin = np.isfinite(xd)
    assert_ulps(y[fin], want_y[fin], dt, 1.0, atol=1e-30)
    assert_ulps(gx[fin], want_g[fin], dt, 1.0, atol=1e-6)
    assert y[-1] == np.inf and np.isnan(gx[-1])
    assert h16.silu.backward(x, g.astype(np.float32)) is None  # dtypes differ


def test_supports_16bit(h16):
    for kern in (h16.ln, h16.gelu):
        assert kern.supports(F16) and kern.supports(BF16) and kern.supports(np.float32)
        assert not kern.supports(np.int32) and not kern.supports(np.complex64)
    assert h16.ce.supports(np.zeros((2, 3), BF16), np.zeros(2, np.int64))


# -- through nn.functional, with the kernels inside the numpy backend -----------------------------

_NAMES = ("linear", "linear_grad_weight", "relu_backward", "cross_entropy", "layer_norm",
          "gelu")


def _run_model(name: str, steps: int = 2):
    """A few SGD steps of Linear-GELU-LayerNorm-Linear-ReLU-Linear with cross-entropy in
    ``name``: the losses, the gradients of the first step and the final parameters."""
    dt = LOW[name]
    rng = np.random.default_rng(5)
    xs = rng.standard_normal((12, 10)).astype(np.float32).astype(dt)
    ys = rng.integers(0, 4, 12)
    ys[2] = -100
    vtl.random.seed(3)
    net = nn.Sequential(nn.Linear(10, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 8),
                        nn.ReLU(), nn.Linear(8, 4), nn.GELU(approximate="tanh"))
    net = net.to(getattr(vtl, name))
    opt = vtl.optim.SGD(net.parameters(), lr=0.1)
    x, y = vtl.asarray(xs, backend="numpy"), vtl.asarray(ys, backend="numpy")
    losses, grads = [], None
    for _ in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        assert loss.dtype == dt
        for p in net.parameters():
            assert p.grad.dtype == dt, (p.grad.dtype, dt)  # no float32 leaks from the stats
        if grads is None:
            grads = [p.grad.numpy().astype(np.float32) for p in net.parameters()]
        opt.step()
        losses.append(float(loss))
    return losses, grads, [p.numpy().astype(np.float32) for p in net.parameters()]


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_16bit_model_with_the_kernels_matches_the_portable_path(lib16, monkeypatch, name):
    ref = _run_model(name)
    k = _fake16(lib16, monkeypatch)
    b = vtl.backends.get("numpy")
    monkeypatch.setattr(b, "_kernels", dict(
        b._kernels, linear=k.nn.linear, linear_grad_weight=k.nn.linear_grad_weight,
        relu_backward=k.nn.relu_backward, cross_entropy=k.ce, layer_norm=k.ln, gelu=k.gelu))
    got = _run_model(name)
    for kname in ("vtl_bias_add", "vtl_col_sum", "vtl_cross_entropy",
                  "vtl_cross_entropy_grad", "vtl_layer_norm_fwd", "vtl_layer_norm_bwd",
                  "vtl_gelu_fwd_none", "vtl_gelu_bwd_none", "vtl_gelu_fwd_tanh",
                  "vtl_gelu_bwd_tanh"):
        assert kname in k.cp.log, kname
    # relu's gradient: eight elements a thread where whole aligned words, else one
    assert {"vtl_relu_backward", "vtl_relu_backward8h"} & set(k.cp.log)
    eps = 2.0**-10 if name == "float16" else 2.0**-7
    # the portable path rounds after each op, the kernels once: a few ulps apart
    np.testing.assert_allclose(got[0], ref[0], rtol=4 * eps)
    for a, r in zip(got[1], ref[1], strict=True):
        np.testing.assert_allclose(a, r, rtol=0, atol=8 * eps * max(1.0, np.abs(r).max()))
    for a, r in zip(got[2], ref[2], strict=True):
        np.testing.assert_allclose(a, r, rtol=0, atol=8 * eps * np.abs(r).max())


# -- on the GPU --------------------------------------------------------------------------------

def _dtype_on(backend, name: str) -> np.dtype:
    if name not in backend.dtypes():
        pytest.skip(f"cupy has no {name} here")
    return LOW[name]


def _without_kernels(b, mp) -> None:
    mp.setattr(b, "_kernels", {k: v for k, v in b._kernels.items() if k not in _NAMES})


def _both(cupy_backend, monkeypatch, fn):
    """``fn()`` with the fused kernels, then on the portable path."""
    out = [fn()]
    with monkeypatch.context() as mp:
        _without_kernels(cupy_backend, mp)
        out.append(fn())
    return out


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
@pytest.mark.parametrize("form", ["none", "tanh"])
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_gpu_gelu_16bit(cupy_backend, monkeypatch, name, form):
    dt = _dtype_on(cupy_backend, name)
    x = _gelu_inputs(dt)
    g = np.linspace(-2, 2, x.size).astype(np.float32).astype(dt)
    kern = cupy_backend._kernels["gelu"]
    launches = kern.launches
    (y, gx), (py, pgx) = _both(cupy_backend, monkeypatch, lambda: run_gelu("cupy", x, g, form))
    assert kern.launches - launches == 2
    check_gelu(x, g, form, y, gx)
    assert_near_gelu(x, g, y, gx, py, pgx)


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
@pytest.mark.parametrize(("m", "n"), [(1, 1), (37, 33), (256, 1024)])
def test_gpu_layer_norm_16bit(cupy_backend, monkeypatch, name, m, n):
    dt = _dtype_on(cupy_backend, name)
    rng = np.random.default_rng(m + n)
    x = sample(rng, (m, n), dt, 2) + np.asarray(1, dt)
    w, b, g = sample(rng, n, dt), sample(rng, n, dt), sample(rng, (m, n), dt)
    kern = cupy_backend._kernels["layer_norm"]
    launches = kern.launches
    fused, portable = _both(cupy_backend, monkeypatch,
                            lambda: run_layer_norm("cupy", x, w, b, g))
    assert kern.launches - launches == 3  # forward, backward, the parameters' sums
    ry, _, _, rdx, rdw, rdb = np_layer_norm(x, w, b, 1e-5, g)
    assert_ulps(fused[0], ry, dt, 1.0, atol=1e-5)
    assert_ulps(fused[1], rdx, dt, 1.0, atol=1e-5 * float(np.abs(rdx).max()))
    assert_ulps(fused[2], rdw, dt, 1.0, atol=1e-5 * m)
    assert_ulps(fused[3], rdb, dt, 1.0, atol=1e-5 * m)
    if m > 1:
        assert_near_layer_norm(fused, portable, dt)


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize(("m", "c"), [(1, 1), (7, 3), (300, 300), (5000, 20)])
def test_gpu_cross_entropy_16bit(cupy_backend, monkeypatch, name, reduction, m, c):
    dt = _dtype_on(cupy_backend, name)
    rng = np.random.default_rng(m + c)
    x, t = ce_case(rng, m, c, np.float32, np.int64, high=min(c, 100))
    x = x.astype(dt)
    v = sample(rng, m, dt)
    ce = cupy_backend._kernels["cross_entropy"]
    launches = ce.launches
    (loss, gx), (ploss, pgx) = _both(cupy_backend, monkeypatch,
                                     lambda: run_cross_entropy("cupy", x, t, v, reduction))
    one = m * c <= K.CE_ONE_BLOCK and m <= K.CE_ONE_BLOCK_ROWS
    assert ce.launches - launches == (1 if one else 2) + 1
    # (the gradient's scale is the 16-bit loss gradient: 1.5, or v times the 16-bit loss)
    check_cross_entropy(x, t, v, reduction, loss, gx, 1.0 if reduction != "none" else 2.0)
    assert_near_cross_entropy(loss, gx, ploss, pgx, dt)


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_gpu_relu_linear_16bit(cupy_backend, name):
    dt = _dtype_on(cupy_backend, name)
    cp = cupy_backend._cupy
    rng = np.random.default_rng(2)
    x = sample(rng, (40, 33), dt)
    x[0, :5] = np.array([0.0, -0.0, np.nan, np.inf, -np.inf], np.float32).astype(dt)
    g = sample(rng, (40, 33), dt)
    relu_bwd = cupy_backend._kernels["relu_backward"]
    got = cp.asnumpy(relu_bwd(cp.asarray(x), cp.asarray(g)))
    np.testing.assert_array_equal(got.view(np.uint16),
                                  np.where(x <= 0, np.zeros((), dt), g).view(np.uint16))
    nnk = cupy_backend._kernels["linear"].__self__
    w, b = sample(rng, (20, 33), dt), sample(rng, 20, dt)
    xs = sample(rng, (40, 33), dt)
    out = cp.asnumpy(nnk.linear(cp.asarray(xs), cp.asarray(w), cp.asarray(b)))
    ref = xs.astype(np.float64) @ w.astype(np.float64).T
    want = ref + b.astype(np.float64)
    assert out.dtype == dt
    # cuBLAS's product rounded (half an ulp of the product), then the bias added and rounded
    # (half an ulp of the result)
    np.testing.assert_array_less(np.abs(out.astype(np.float64) - want),
                                 ulp(ref, dt) + ulp(want, dt))
    gg = sample(rng, (40, 20), dt)
    gw, gb = nnk.linear_grad_weight(cp.asarray(gg), cp.asarray(xs), True)
    assert_ulps(cp.asnumpy(gb), gg.astype(np.float64).sum(0), dt, 0.5 + 1e-3)
    assert_ulps(cp.asnumpy(gw), gg.astype(np.float64).T @ xs.astype(np.float64), dt, 1.0,
                atol=4 * _EPS[dt])
