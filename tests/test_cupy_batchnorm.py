"""``kernel("batch_norm")`` of the CuPy backend (``vtl/backends/cupy/_batch_norm.py``).

* On the host (given a C++20 compiler), through the CUDA emulation of
  ``test_cupy_nn_kernels``: forward and backward against float64 NumPy math, in float32,
  float64, float16 and bfloat16, affine or not, with float32 parameters for 16-bit inputs,
  rows split into slabs, and a mean far larger than the deviation.
* Behind ``nn.functional.batch_norm`` on the numpy backend: under autocast a float16 input
  with float32 parameters is normalised by the kernel without widening (float16 out, float32
  statistics and parameter gradients), close to the widened portable path.
* On a GPU (the cupy backend): against the portable path.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from helpers import use_kernel
from test_cupy_nn_kernels import _DEV, _HOST_MATH, FakeCupy, build_host_lib

import vtl
from vtl import nn
from vtl.backends.cupy import _batch_norm as B
from vtl.nn import functional as F

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
_CNAME = {"float32": "float", "float64": "double", "float16": "half", "bfloat16": "bfloat16"}
_DT = {"float32": np.dtype(np.float32), "float64": np.dtype(np.float64), "float16": F16,
       "bfloat16": BF16}
_VARIANTS = [(s, c, "int") for s in B.SPECS for c in _CNAME.values()]


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return build_host_lib(tmp_path_factory.mktemp("cupy_bn_host"), _VARIANTS, _HOST_MATH)


@pytest.fixture
def host_bn(lib, monkeypatch):
    monkeypatch.setattr(B.CupyBatchNorm, "_device_of", staticmethod(lambda a: _DEV))
    cp = FakeCupy(lib, _VARIANTS)
    return cp, B.CupyBatchNorm(cp)


def reference(x, w, b, g, eps):
    """float64 batch norm forward and backward of ``(N, C, ...)`` arrays."""
    x, g = x.astype(np.float64), g.astype(np.float64)
    axes = (0, *range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    rstd = 1 / np.sqrt(var + eps)
    xhat = (x - mean) * rstd
    wv = np.ones(x.shape[1]) if w is None else w.astype(np.float64)
    bv = np.zeros(x.shape[1]) if b is None else b.astype(np.float64)
    y = xhat * wv.reshape(shape) + bv.reshape(shape)
    n = x.size // x.shape[1]
    gw = g * wv.reshape(shape)
    dx = rstd * (gw - gw.sum(axis=axes, keepdims=True) / n
                 - xhat * (gw * xhat).sum(axis=axes, keepdims=True) / n)
    return y, mean.ravel(), var.ravel(), dx, (g * xhat).sum(axis=axes), g.sum(axis=axes)


def _tol(name: str) -> dict:
    return {"float64": {"rtol": 1e-11, "atol": 1e-11}, "float32": {"rtol": 2e-5, "atol": 2e-5},
            "float16": {"rtol": 4e-3, "atol": 4e-3},
            "bfloat16": {"rtol": 3e-2, "atol": 3e-2}}[name]


def _run(bn, x, w, b, g, eps=1e-5):
    y, mean, var, saved = bn.forward(x, w, b, eps)
    dx, dw, db = bn.backward(saved, w, g, True, w is not None, b is not None)
    return y, mean, var, dx, dw, db


@pytest.mark.parametrize("name", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize(("shape", "affine"), [((4, 3, 5, 5), True), ((7, 2), False),
                                                ((3, 5, 1, 9), True), ((2, 1, 3), True)])
def test_batch_norm_on_the_host(host_bn, name, shape, affine):
    cp, bn = host_bn
    dt = _DT[name]
    rng = np.random.default_rng(sum(shape))
    x = (rng.standard_normal(shape) * 2 + 0.5).astype(dt)
    g = rng.standard_normal(shape).astype(dt)
    pdt = np.float32 if name in ("float16", "bfloat16") else dt  # autocast's parameters
    w = rng.standard_normal(shape[1]).astype(pdt) if affine else None
    b = rng.standard_normal(shape[1]).astype(pdt) if affine else None
    cp.log.clear()
    y, mean, var, dx, dw, db = _run(bn, x, w, b, g)
    assert cp.log == ["vtl_bn_partial", "vtl_bn_forward_stats", "vtl_bn_apply",
                      "vtl_bn_partial", "vtl_bn_backward_coeffs", "vtl_bn_apply"]
    ry, rm, rv, rdx, rdw, rdb = reference(x, w, b, g, 1e-5)
    assert y.dtype == dx.dtype == dt and y.shape == dx.shape == shape
    assert mean.dtype == var.dtype == B.compute_dtype(dt)
    tol = _tol(name)
    np.testing.assert_allclose(y.astype(np.float64), ry, **tol)
    np.testing.assert_allclose(dx.astype(np.float64), rdx, **tol)
    np.testing.assert_allclose(mean, rm, **_tol("float32" if name != "float64" else name))
    np.testing.assert_allclose(var, rv, **_tol("float32" if name != "float64" else name))
    if affine:
        assert dw.dtype == db.dtype == pdt
        np.testing.assert_allclose(dw, rdw, **_tol("float32" if name != "float64" else name))
        np.testing.assert_allclose(db, rdb, **_tol("float32" if name != "float64" else name))
    else:
        assert dw is None and db is None


@pytest.mark.parametrize("name", ["float32", "float64"])
def test_batch_norm_slabs_and_a_large_mean(host_bn, monkeypatch, name):
    """Rows split into slabs add up in order; a mean 10^4 times the deviation keeps the
    variance (the sums are taken from the channel's first element)."""
    cp, bn = host_bn
    monkeypatch.setattr(B, "BN_SLAB_MIN", 7)
    monkeypatch.setattr(B, "BN_BLOCKS", 12)
    dt = _DT[name]
    rng = np.random.default_rng(3)
    x = (1e4 + rng.standard_normal((5, 3, 4, 3))).astype(dt)
    g = rng.standard_normal(x.shape).astype(dt)
    w, b = np.full(3, 2.0, dt), np.full(3, -1.0, dt)
    y, mean, var, dx, dw, db = _run(bn, x, w, b, g)
    assert bn.forward(x, w, b, 1e-5)[3][2] == 4  # slabs per channel
    ry, rm, rv, rdx, rdw, rdb = reference(x, w, b, g, 1e-5)
    tol = {"rtol": 2e-3, "atol": 2e-3} if name == "float32" else _tol(name)
    np.testing.assert_allclose(var, rv, **tol)
    np.testing.assert_allclose(y, ry, **tol)
    np.testing.assert_allclose(dx, rdx, **tol)
    np.testing.assert_allclose(dw, rdw, **tol)
    np.testing.assert_allclose(db, rdb, **tol)


def test_batch_norm_declines(host_bn):
    _, bn = host_bn
    x = np.ones((2, 3, 4), np.float32)
    assert bn.forward(x.astype(np.int32), None, None, 1e-5) is None
    assert bn.forward(x, np.ones(4, np.float32), None, 1e-5) is None  # wrong weight shape
    assert bn.forward(x, np.ones(3, np.float64), None, 1e-5) is None  # another dtype
    assert bn.forward(np.ones((0, 3), np.float32), None, None, 1e-5) is None
    assert bn.supports(np.float16) and bn.supports(BF16) and not bn.supports(np.int32)


def _bn_step(x, module, backend):
    t = vtl.asarray(x, backend=backend, requires_grad=True)
    with vtl.autocast(backend, dtype=vtl.float16):
        y = module(t)
    (y.astype(vtl.float32) * vtl.asarray(np.linspace(-1, 1, x.size, dtype=np.float32)
                                         .reshape(x.shape), backend=backend)).sum().backward()
    return y, t.grad, module.weight.grad, module.running_mean


def test_autocast_batch_norm_runs_the_kernel_in_float16(host_bn):
    """Under autocast the kernel takes the float16 input and float32 parameters as given:
    a float16 result, float32 running statistics and weight gradients, close to the
    widened portable path; without the kernel the input is widened and the result rounded
    back."""
    cp, bn = host_bn
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 4, 3, 3)).astype(np.float16)
    got, want = [], []
    for kern, out in ((bn, got), (None, want)):
        vtl.random.seed(0)
        module = nn.BatchNorm2d(4)
        with use_kernel("batch_norm", kern):
            cp.log.clear()
            out.extend(_bn_step(x, module, "numpy"))
            if kern is not None:
                assert "vtl_bn_apply" in cp.log
    y, gx, gw, rm = got
    assert y.dtype == vtl.float16 and gx.dtype == vtl.float16
    assert gw.dtype == vtl.float32 and rm.dtype == vtl.float32
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_allclose(a.numpy().astype(np.float64), b.numpy().astype(np.float64),
                                   rtol=5e-3, atol=5e-3)


# -- on a GPU -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["float32", "float64", "float16", "bfloat16"])
def test_cupy_batch_norm_matches_the_portable_path(cupy_backend, name):
    dt = _DT[name]
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((16, 24, 7, 7)) * 3 + 1).astype(dt)
    g = rng.standard_normal(x.shape).astype(dt)
    pdt = np.float32 if name in ("float16", "bfloat16") else dt
    w, b = rng.standard_normal(24).astype(pdt), rng.standard_normal(24).astype(pdt)
    import cupy as cp

    bn = cupy_backend.kernel("batch_norm")
    got = [cp.asnumpy(a) for a in _run(bn, *(cp.asarray(a) for a in (x, w, b, g)))]
    ref = reference(x, w, b, g, 1e-5)
    for a, r, what in zip(got, ref, ("y", "mean", "var", "dx", "dw", "db"), strict=True):
        tol = _tol(name) if what in ("y", "dx") else _tol(
            "float32" if name != "float64" else name)
        np.testing.assert_allclose(a.astype(np.float64), r, err_msg=what, **tol)
    # behind the glue (16-bit inputs with float32 weights, as autocast gives them): close to
    # the portable path, which widens the mixed operands
    outs = []
    for kern in (bn, None):
        with use_kernel("batch_norm", kern, backend="cupy"):
            xt = vtl.asarray(x, backend="cupy", requires_grad=True)
            wt = vtl.asarray(w, backend="cupy", requires_grad=True)
            y = F.batch_norm(xt, None, None, wt, None, training=True)
            (y.astype(vtl.float64) * vtl.asarray(g.astype(np.float64), backend="cupy")
             ).sum().backward()
            outs.append([y.numpy(), xt.grad.numpy(), wt.grad.numpy()])
    for a, r in zip(*outs, strict=True):
        assert a.dtype == r.dtype
        np.testing.assert_allclose(a.astype(np.float64), r.astype(np.float64), **_tol(name))


@pytest.mark.parametrize("training", [True, False])
def test_16bit_input_with_float32_parameters_keeps_its_dtype(host_bn, training):
    """A float16 input with float32 weight, bias and running statistics gives float16 with
    and without the kernel (PyTorch's CUDA batch norm), the same values up to rounding."""
    _, bn = host_bn
    rng = np.random.default_rng(2)
    x = rng.standard_normal((5, 3, 4)).astype(np.float16)
    w, b = rng.standard_normal(3).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    outs = []
    for kern in (bn, None):
        with use_kernel("batch_norm", kern):
            rm = vtl.zeros(3, backend="numpy")
            rv = vtl.ones(3, backend="numpy")
            y = F.batch_norm(vtl.asarray(x), rm, rv, vtl.asarray(w), vtl.asarray(b),
                             training=training)
            assert y.dtype == vtl.float16 and rm.dtype == vtl.float32
            outs.append((y.numpy().astype(np.float64), rm.numpy(), rv.numpy()))
    for a, r in zip(*outs, strict=True):
        np.testing.assert_allclose(a, r, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("name", ["float32", "float64"])
def test_running_statistics_in_one_launch(host_bn, name):
    """``nn.BatchNorm2d`` in training: the running statistics are updated by the kernel's
    one launch and equal the portable update's over a few steps."""
    cp, bn = host_bn
    dt = _DT[name]
    rng = np.random.default_rng(4)
    xs = [rng.standard_normal((6, 3, 2, 2)).astype(dt) * (k + 1) for k in range(3)]
    outs = []
    for kern in (bn, None):
        with use_kernel("batch_norm", kern):
            m = nn.BatchNorm2d(3, momentum=0.3).to(dtype=getattr(vtl, name))
            cp.log.clear()
            for x in xs:
                m(vtl.asarray(x))
            if kern is not None:
                assert cp.log.count("vtl_bn_running") == 3
            outs.append((m.running_mean.numpy(), m.running_var.numpy()))
    for a, r in zip(*outs, strict=True):
        np.testing.assert_allclose(a, r, **_tol(name))


@pytest.mark.parametrize("name", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize(("shape", "slab_min"), [((4, 3, 5, 5), 4096), ((6, 5, 7), 4),
                                                 ((7, 2), 3), ((2, 1, 3, 1), 1)])
def test_channel_sums_on_the_host(lib, monkeypatch, name, shape, slab_min):
    """A convolution's bias gradient, ``sum(g, axis=(0, 2, ...))``: summed in double in a
    fixed slab order and rounded once into ``g``'s dtype, from strided input too."""
    monkeypatch.setattr(B, "BN_SLAB_MIN", slab_min)
    cp = FakeCupy(lib, _VARIANTS)
    dt = _DT[name]
    rng = np.random.default_rng(len(shape) + slab_min)
    g = (rng.standard_normal(shape) * 3).astype(dt)
    cp.log.clear()
    out = B.channel_sums(B.CupyBatchNorm(cp)._k, cp, g)
    assert cp.log == ["vtl_channel_sum_partial", "vtl_channel_sum_finish"]
    ref = g.astype(np.float64).sum(axis=(0, *range(2, g.ndim)))
    assert out.dtype == dt and out.shape == (shape[1],)
    if name == "float64":
        np.testing.assert_allclose(out, ref, rtol=1e-13, atol=1e-13)
    else:  # narrower values add up exactly in double: one rounding of the exact sum
        np.testing.assert_array_equal(out, ref.astype(dt))
    strided = np.swapaxes(np.swapaxes(g, 0, 1).copy(), 0, 1)  # not C-contiguous
    np.testing.assert_array_equal(B.channel_sums(B.CupyBatchNorm(cp)._k, cp, strided), out)


def test_channel_sums_of_empty_batches(lib):
    cp = FakeCupy(lib, _VARIANTS)
    k = B.CupyBatchNorm(cp)._k
    assert B.channel_sums(k, cp, np.ones((3, 0, 4), np.float32)).shape == (0,)
    np.testing.assert_array_equal(B.channel_sums(k, cp, np.ones((0, 3, 4), np.float32)),
                                  np.zeros(3, np.float32))


def test_cudnn_convolution_bias_gradient_is_the_channel_sums(lib):
    """The cuDNN convolution's bias gradient comes from :func:`channel_sums` (here on the host
    build of its kernels; the products need a GPU and are not asked for)."""
    from vtl.backends.cupy.cudnn import CudnnConv2d

    cp = FakeCupy(lib, _VARIANTS)
    conv = CudnnConv2d(cp, cudnn=None, matmul=np.matmul)
    g = np.random.default_rng(2).standard_normal((3, 4, 5, 6)).astype(np.float32)
    x = np.zeros((3, 2, 5, 6), np.float32)
    w = np.zeros((4, 2, 3, 3), np.float32)
    cp.log.clear()
    dx, dw, db = conv.backward_on_device(("cudnn", x), x.shape, w, g, (1, 1), (1, 1, 1, 1),
                                         (1, 1), 1, False, False, True)
    assert dx is None and dw is None
    assert cp.log == ["vtl_channel_sum_partial", "vtl_channel_sum_finish"]
    np.testing.assert_array_equal(db, g.astype(np.float64).sum(axis=(0, 2, 3)).astype(np.float32))
