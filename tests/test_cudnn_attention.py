"""cuDNN's fused attention behind the CuPy backend's ``attention`` kernel (float16 and
bfloat16 without a mask, where ``nvidia-cudnn-frontend`` and cuDNN are installed): forward
and gradients against vtl's own kernels on the same inputs and dropout draws, on split heads
and on the packed projection in both layouts; what cuDNN is not asked for (masks, float32,
head sizes off 8, dropout masks over MASK_BYTES) still runs vtl's kernels."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from helpers import to_numpy

import vtl
from vtl.nn import functional as F

_LOW = {"float16": np.dtype(np.float16), "bfloat16": np.dtype(ml_dtypes.bfloat16)}


@pytest.fixture
def kernels():
    """``(backend, the cuDNN kernel, vtl's own kernel)``."""
    if "cupy" not in vtl.backends.available_names():
        pytest.skip("needs the cupy backend")
    from vtl.backends.cupy.attention import CupyAttention
    from vtl.backends.cupy.cudnn_attention import CudnnAttention

    be = vtl.backends.get("cupy")
    kern = be.kernel("attention")
    if not isinstance(kern, CudnnAttention):
        pytest.skip("cuDNN is not available")
    import cupy

    return be, kern, CupyAttention(cupy)


def _with(be, kern, fn):
    saved = be._kernels["attention"]
    be._kernels["attention"] = kern
    try:
        return fn()
    finally:
        be._kernels["attention"] = saved


def _close(got, want, dt):
    eps = float(np.finfo(dt).eps)
    for a, b in zip(got, want, strict=True):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=8 * eps, atol=8 * eps * (np.abs(b).max() + 1))


@pytest.mark.parametrize("name", ["bfloat16", "float16"])
@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize(("causal", "p"), [(False, 0.0), (True, 0.0), (False, 0.2),
                                           (True, 0.3)])
def test_packed_attention_through_cudnn_equals_vtl_kernels(kernels, name, batch_first,
                                                           causal, p):
    be, cudnn_kern, own = kernels
    dt = _LOW[name]
    n, length, heads, hd = 3, 70, 4, 64
    e = heads * hd
    rng = np.random.default_rng(31)
    shape = (n, length, 3 * e) if batch_first else (length, n, 3 * e)
    x = rng.standard_normal(shape).astype(dt)
    g = rng.standard_normal((*shape[:2], e)).astype(dt)

    def run():
        t = vtl.asarray(x, device="cupy", requires_grad=True)
        vtl.random.seed(5)
        out = F.attention._packed_attention(t, heads, batch_first, None, p, causal)
        out.backward(vtl.asarray(g, device="cupy"))
        return [to_numpy(out).astype(np.float64), to_numpy(t.grad).astype(np.float64)]

    served = cudnn_kern.served
    got = _with(be, cudnn_kern, run)
    assert cudnn_kern.served - served == 2, cudnn_kern.declined  # forward and backward
    _close(got, _with(be, own, run), dt)


@pytest.mark.parametrize("name", ["bfloat16", "float16"])
@pytest.mark.parametrize(("causal", "p"), [(False, 0.0), (True, 0.0), (True, 0.25)])
def test_split_heads_attention_through_cudnn_equals_vtl_kernels(kernels, name, causal, p):
    be, cudnn_kern, own = kernels
    dt = _LOW[name]
    rng = np.random.default_rng(32)
    q, k, v = (rng.standard_normal(s).astype(dt) for s in ((2, 3, 40, 32), (2, 3, 56, 32),
                                                          (2, 3, 56, 32)))
    g = rng.standard_normal((2, 3, 40, 32)).astype(dt)

    def run():
        ts = [vtl.asarray(a, device="cupy", requires_grad=True) for a in (q, k, v)]
        vtl.random.seed(9)
        out = F.scaled_dot_product_attention(*ts, is_causal=causal, dropout_p=p)
        out.backward(vtl.asarray(g, device="cupy"))
        return [to_numpy(out)] + [to_numpy(t.grad) for t in ts]

    served = cudnn_kern.served
    got = _with(be, cudnn_kern, run)
    assert cudnn_kern.served - served == 2, cudnn_kern.declined
    _close(got, _with(be, own, run), dt)


def test_what_cudnn_is_not_asked_for_runs_vtl_kernels(kernels, monkeypatch):
    """float32, a mask, a head size off 8, dropout whose keep mask would pass MASK_BYTES:
    vtl's kernels, cuDNN not asked."""
    be, cudnn_kern, _ = kernels
    rng = np.random.default_rng(33)
    bf = _LOW["bfloat16"]
    cases = [
        (rng.standard_normal((2, 2, 16, 32)).astype(np.float32), None),
        (rng.standard_normal((2, 2, 16, 32)).astype(bf), np.tril(np.ones((16, 16), bool))),
        (rng.standard_normal((2, 2, 16, 12)).astype(bf), None),
    ]
    for x, mask in cases:
        served = cudnn_kern.served
        t = vtl.asarray(x, device="cupy", requires_grad=True)
        m = None if mask is None else vtl.asarray(mask, device="cupy")
        F.scaled_dot_product_attention(t, t, t, attn_mask=m).sum().backward()
        assert cudnn_kern.served == served
        assert np.isfinite(to_numpy(t.grad).astype(np.float64)).all()
    monkeypatch.setattr(type(cudnn_kern), "MASK_BYTES", 2 * 2 * 2 * 16 * 16 - 1)
    t = vtl.asarray(rng.standard_normal((2, 2, 16, 32)).astype(bf), device="cupy",
                    requires_grad=True)
    served = cudnn_kern.served
    F.scaled_dot_product_attention(t, t, t, dropout_p=0.1).sum().backward()
    assert cudnn_kern.served == served
