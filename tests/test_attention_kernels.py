"""The fused attention kernel (``kernel("attention")``, ``vtl/backends/cupy/attention.py``).

* On the host (given a C++20 compiler): the CUDA source is compiled with the emulation of
  the CUDA built-ins of ``test_cupy_nn_kernels`` (a thread per CUDA thread, barriers for
  ``__syncthreads``) and driven through the real ``CupyAttention`` wrapper by a stand-in
  for CuPy; forward values and the three gradients are compared with NumPy's attention
  over masks (boolean as additive, ``(L, S)``, key padding, per batch), causal, ``L != S``,
  rows with every key masked, value sizes unlike key sizes and lengths off the tiles; in
  float64, float32, float16 and bfloat16 (16-bit storage, float32 arithmetic: each result
  within half a unit in the last place of the exact value, plus float32's error).
* The same emulated kernel, registered as the numpy backend's ``attention`` kernel, runs
  behind ``F.scaled_dot_product_attention``: one graph node, gradients and second-order
  gradients equal to the portable path (in 16-bit, and under ``vtl.autocast``, within the
  portable path's rounding errors), dropout included.
* ``nvcc``, when installed, compiles the float16/bfloat16 sources of both families.
* On a GPU (the cupy backend): the kernel against the portable path, in float32, float64,
  float16 and bfloat16.
"""

from __future__ import annotations

import ctypes
import itertools
import re
import shutil
import subprocess
import zlib

import ml_dtypes
import numpy as np
import pytest
from helpers import to_numpy, use_kernel
from nn_kernel_checks import np_attention
from test_cupy_nn_kernels import _SHIM, compile_host, host_args
from test_cupy_nn_kernels_16bit import assert_ulps

import vtl
from vtl.backends.cupy import attention as A
from vtl.nn import functional as F

RNG = np.random.default_rng(11)
BF16 = np.dtype(ml_dtypes.bfloat16)
LOW = [np.float16, ml_dtypes.bfloat16]
#: the spacing of the 16-bit dtypes' values at 1
_EPS = {np.dtype(np.float16): 2.0**-10, BF16: 2.0**-7}

_EXTRA = r"""
using std::exp; using std::log; using std::max; using std::min;
#define __launch_bounds__(x)
static inline unsigned int __umulhi(unsigned int a, unsigned int b) {
  return (unsigned int)(((unsigned long long)a * b) >> 32);
}
"""
_DROP = ("const unsigned* dmem, unsigned dw0, unsigned dw1, unsigned dw2, unsigned dw3, "
         "unsigned dw4, unsigned dw5, int has_drop, unsigned thr, T dscale")
_DROP_ARGS = "dmem, dw0, dw1, dw2, dw3, dw4, dw5, has_drop, thr, dscale"

_GEO = ("int B2, int L, int S, long long mb1, long long mb2, long long ml, long long ms, "
        "int has_mask, int causal, T scale")
_GEO_ARGS = "B2, L, S, mb1, mb2, ml, ms, has_mask, causal, scale"
_LAY = "int lay, int nb, long long cin, long long co, long long cgr"
_LAY_ARGS = "lay, nb, cin, co, cgr"
# arrays as stored (TS: unsigned short words for float16/bfloat16), lse and delta as computed
_KERNELS = {
    "vtl_attn_fwd": ("const TS* q, const TS* k, const TS* v, const TS* mask, TS* out, T* lse",
                     "q, k, v, mask, out, lse"),
    "vtl_attn_bwd_dq": ("const TS* q, const TS* k, const TS* v, const TS* mask, const TS* g, "
                        "const T* lse, const T* delta, TS* dq",
                        "q, k, v, mask, g, lse, delta, dq"),
    "vtl_attn_bwd_dkv": ("const TS* q, const TS* k, const TS* v, const TS* mask, const TS* g, "
                         "const T* lse, const T* delta, TS* dk, TS* dv",
                         "q, k, v, mask, g, lse, delta, dk, dv"),
}
_DELTA_LAUNCHER = (
    'extern "C" void launch_vtl_attn_delta(unsigned gx, unsigned gy, unsigned bx, '
    "const TS* g, const TS* o, T* delta, long long n, int B2, int L, int lay, int nb, "
    "long long co) { vtl_launch(gx, gy, bx, 1, [=] { "
    "vtl_attn_delta(g, o, delta, n, B2, L, lay, nb, co); }); }\n")


def _host_source(code: str) -> str:
    tiled = "vtl_attn_fwd_tiled" in code
    suffix = "_tiled" if tiled else ""
    geo, geo_args = (f"{_GEO}, {_DROP}, {_LAY}", f"{_GEO_ARGS}, {_DROP_ARGS}, {_LAY_ARGS}") \
        if tiled else (f"{_GEO}, {_LAY}", f"{_GEO_ARGS}, {_LAY_ARGS}")
    launchers = "".join(
        f'extern "C" void launch_{name}{suffix}(unsigned gx, unsigned gy, unsigned bx, '
        f"{ptrs}, {geo}) {{ vtl_launch(gx, gy, bx, 1, [=] {{ {name}{suffix}({args}, "
        f"{geo_args}); }}); }}\n"
        for name, (ptrs, args) in _KERNELS.items())
    if "vtl_attn_delta" in code:  # the backward's delta kernel
        launchers += _DELTA_LAUNCHER
    return _SHIM + _EXTRA + code.replace('extern "C" ', "") + launchers


class _HostFunction:
    def __init__(self, lib, name, dt):
        self.fn = getattr(lib, f"launch_{name}")
        self.dt = dt

    max_dynamic_shared_size_bytes = 48 * 1024

    def __call__(self, grid, block, args, shared_mem=0):
        gx, gy = grid
        (bx,) = block
        assert bx in (A.ROWS, 128) and 1 <= gx < 2**31 and 1 <= gy < 65536
        assert shared_mem <= max(48 * 1024, self.max_dynamic_shared_size_bytes)
        conv = host_args(args, self.dt, views=True)  # masks: strided views
        self.fn(ctypes.c_uint(gx), ctypes.c_uint(gy), ctypes.c_uint(bx), *conv)


class FakeCupy:
    """The CuPy functions ``CupyAttention`` calls, on NumPy arrays; ``RawModule`` compiles
    the CUDA source for the host."""

    class cuda:  # noqa: N801 - mirrors cupy.cuda
        class Device:  # noqa: D106
            attributes = {"MaxSharedMemoryPerBlockOptin": 227 * 1024}

    def __init__(self, tmp_path):
        self.tmp, self.built = tmp_path, {}

    def RawKernel(self, code, name):  # noqa: N802
        lib = self.built.get(code)
        if lib is None:
            k = len(self.built)
            lib = self.built[code] = compile_host(self.tmp / f"a{k}.cpp", _host_source(code))
        # the scalars' type: the compute type T (float32 for float16 and bfloat16)
        ctype = re.search(r"^typedef (\w+) T;", code, re.MULTILINE)[1]
        dt = {"float": np.float32, "double": np.float64}[ctype]
        return _HostFunction(lib, name, np.dtype(dt))

    def empty(self, shape, dtype):
        if np.dtype(dtype).kind in "iu":
            return np.zeros(shape, dtype)
        return np.full(shape, np.nan, dtype)

    def empty_like(self, a):
        return np.full_like(a, np.nan)

    ascontiguousarray = staticmethod(np.ascontiguousarray)
    broadcast_to = staticmethod(np.broadcast_to)


@pytest.fixture(scope="module")
def fake_cupy(tmp_path_factory):
    return FakeCupy(tmp_path_factory.mktemp("attn"))


@pytest.fixture(scope="module")
def host_kernel(fake_cupy):
    return A.CupyAttention(fake_cupy)


# (batch (b1, b2), L, S, E, Ev, mask kind, causal)
CASES = [
    ((2, 3), 5, 7, 8, 8, None, False),
    ((1, 2), 70, 40, 16, 8, None, True),       # lengths off the tiles, causal with L > S
    ((2, 1), 33, 65, 8, 16, "ls", False),       # an (L, S) mask broadcast over the batch
    ((1, 1), 70, 130, 4, 12, None, False),      # head sizes off the tiled kernels
    ((3, 2), 9, 37, 8, 8, "padding", False),     # key padding (b1, 1, 1, S)
    ((2, 2), 6, 6, 8, 4, "full", False),         # one mask per batch and head
    ((1, 1), 4, 3, 2, 2, "dead", False),         # a row with every key masked
    ((2, 1), 5, 9, 8, 8, "float", True),         # an additive float mask, with causal
]


def _mask(kind, b1, b2, n_q, n_k, dt, rng=None):
    rng = RNG if rng is None else rng
    if kind is None:
        return None
    if kind == "ls":
        m = rng.random((1, 1, n_q, n_k)) > 0.3
    elif kind == "padding":
        m = np.ones((b1, 1, 1, n_k), bool)
        m[:, :, :, -4:] = False
    elif kind == "full":
        m = rng.random((b1, b2, n_q, n_k)) > 0.4
        m[..., 0] = True
    elif kind == "dead":
        m = np.ones((1, 1, n_q, n_k), bool)
        m[:, :, 1, :] = False
    else:
        return rng.standard_normal((1, b2, n_q, n_k)).astype(dt)
    return np.where(m, 0.0, -np.inf).astype(dt)


def assert_near(got, want, dt, factor, msg=""):
    """``got`` within ``factor`` epsilons of the 16-bit ``dt`` times the largest magnitude
    of ``want``."""
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert np.isfinite(g).all(), msg
    np.testing.assert_allclose(g, w, rtol=0, atol=factor * _EPS[np.dtype(dt)]
                               * max(np.abs(w).max(), 1e-30), err_msg=msg)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dt", [np.float64, np.float32, *LOW])
@pytest.mark.parametrize("tiled", [False, True], ids=["rows", "tiled"])
def test_host_build_matches_numpy(fake_cupy, case, dt, tiled):
    """Both kernel families (thread per row; register-tiled) against NumPy; float16 and
    bfloat16 against NumPy on the rounded operands: every result rounded once (within half
    a unit in the last place, plus float32's error relative to the tensor's scale); the
    gradients take ``delta = rowsum(dO * O)`` from the rounded output (as PyTorch's flash
    attention), a few epsilons of the 16-bit dtype from the exact gradients."""
    (b1, b2), n_q, n_k, e, ev, kind, causal = case
    if tiled and (e % 8 or ev % 8):
        assert A.CupyAttention(fake_cupy, tiled=True).forward(
            np.zeros((1, 2, e), dt), np.zeros((1, 2, e), dt), np.zeros((1, 2, ev), dt), None,
            False, 1.0, (1, 1)) is None
        return
    host_kernel = A.CupyAttention(fake_cupy, tiled=tiled)
    b = b1 * b2
    # operands of this case alone (the same whatever ran before it, in any worker)
    rng = np.random.default_rng(zlib.crc32(repr((case, np.dtype(dt).name, tiled)).encode()))
    q = rng.standard_normal((b, n_q, e)).astype(dt)
    k = rng.standard_normal((b, n_k, e)).astype(dt)
    v = rng.standard_normal((b, n_k, ev)).astype(dt)
    g = rng.standard_normal((b, n_q, ev)).astype(dt)
    mask = _mask(kind, b1, b2, n_q, n_k, dt, rng)
    scale = 1.0 / np.sqrt(e)
    out, lse = host_kernel.forward(q, k, v, mask, causal, scale, (b1, b2))
    grads = host_kernel.backward(q, k, v, out, lse, g, mask, causal, scale, (b1, b2))
    m4 = None if mask is None else np.broadcast_to(mask, (b1, b2, n_q, n_k)).reshape(b, n_q,
                                                                                       n_k)
    ref = np_attention(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64),
                       m4, causal, scale, g.astype(np.float64))
    if np.dtype(dt) in _EPS:
        assert lse.dtype == np.float32
        ref_o = np_attention(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64),
                             m4, causal, scale, g.astype(np.float64), out.astype(np.float64))
        for name, a, r, ro in zip(("out", "dq", "dk", "dv"), (out, *grads), ref, ref_o,
                                  strict=True):
            assert_ulps(a, ro, np.dtype(dt), 0.5, 2.0**-18 * np.abs(ro).max(), msg=name)
            assert_near(a, r, dt, 4, name)
    else:
        tol = {"rtol": 1e-11, "atol": 1e-12} if dt == np.float64 else \
            {"rtol": 2e-5, "atol": 2e-5}
        for name, a, r in zip(("out", "dq", "dk", "dv"), (out, *grads), ref, strict=True):
            assert a.dtype == dt and a.shape == r.shape, name
            np.testing.assert_allclose(a, r, err_msg=name, **tol)
    if kind == "dead":
        assert np.isinf(lse[:, 1]).all() and not np.any(out[:, 1])


def test_16bit_sources_compile_with_nvcc(tmp_path):
    """The float16/bfloat16 sources of both families compile for the GPU (their float32 and
    float64 sources are those the GPU tests run)."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not installed")
    files = []
    for dt, tiled in itertools.product(LOW, (False, True)):
        files.append(f"{np.dtype(dt).name}_{int(tiled)}.cu")
        (tmp_path / files[-1]).write_text(A.attention_source(dt, 8, 16, tiled))
    r = subprocess.run([nvcc, "-arch=sm_90", "--ptx", *files], cwd=tmp_path,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-4000:]


def test_declines_what_it_does_not_take(host_kernel):
    q = np.zeros((1, 2, A.MAX_DIM + 1))
    assert host_kernel.forward(q, q, q, None, False, 1.0, (1, 1)) is None
    assert host_kernel.forward(q[..., :4], q[..., :4].astype(np.float32), q[..., :4], None,
                               False, 1.0, (1, 1)) is None
    assert not host_kernel.supports(np.int32)
    assert host_kernel.supports(np.float16) and host_kernel.supports(BF16)
    h = np.zeros((1, 2, 8), np.float16)
    assert host_kernel.forward(h, h.astype(BF16), h, None, False, 1.0, (1, 1)) is None
    assert host_kernel.forward(h, h, h, np.zeros((1, 1, 2, 2), np.float32), False, 1.0,
                               (1, 1)) is None
    # the tiled kernels' shared memory of the 16-bit dtypes is float32's (computed in it)
    kern = A.CupyAttention(host_kernel._cp)
    kern._smem_max = max(A.tiled_smem_bytes(4, 128, 128).values())
    assert kern._use_tiled(np.float16, 128, 128) and kern._use_tiled(BF16, 128, 128)
    kern._smem_max -= 1
    assert not kern._use_tiled(np.float16, 128, 128) and not kern._use_tiled(BF16, 128, 128)
    assert kern._use_tiled(np.float32, 64, 64)


def _sdpa_grads(q, k, v, g, **kw):
    ts = [vtl.asarray(a, requires_grad=True) for a in (q, k, v)]
    out = F.scaled_dot_product_attention(*ts, **kw)
    vtl.sum(out * vtl.asarray(g)).backward()
    return out, [to_numpy(out)] + [to_numpy(t.grad) for t in ts]


@pytest.mark.parametrize(("shape_q", "shape_kv", "mask_shape", "causal"), [
    ((2, 3, 5, 4), (2, 3, 6, 4), None, False),
    ((2, 3, 5, 4), (2, 3, 5, 4), None, True),
    ((2, 3, 5, 4), (2, 3, 6, 4), (5, 6), False),
    ((2, 3, 5, 4), (2, 3, 6, 4), (2, 1, 1, 6), False),
    ((4, 5, 4), (4, 7, 4), (4, 5, 7), False),
    ((5, 4), (7, 4), (5, 7), False),
])
@pytest.mark.parametrize("dt", [np.float64, *LOW])
def test_functional_uses_the_kernel_and_matches_portable(host_kernel, shape_q, shape_kv,
                                                         mask_shape, causal, dt):
    """float64: the portable path's numbers; float16/bfloat16 (where the portable path
    rounds after every op): both within a few epsilons of the exact attention."""
    q = RNG.standard_normal(shape_q).astype(dt)
    k = RNG.standard_normal(shape_kv).astype(dt)
    v = RNG.standard_normal(shape_kv[:-1] + (3,)).astype(dt)
    g = RNG.standard_normal(shape_q[:-1] + (3,)).astype(dt)
    mask = m = None
    if mask_shape is not None:
        m = RNG.random(mask_shape) > 0.3
        m[..., 0] = True
        mask = vtl.asarray(m)
    kw = {"attn_mask": mask, "is_causal": causal}
    _, ref = _sdpa_grads(q, k, v, g, **kw)
    with use_kernel("attention", host_kernel):
        out, fused = _sdpa_grads(q, k, v, g, **kw)
    assert out.grad_fn.name() == "ScaledDotProductAttentionBackward"
    if dt == np.float64:
        for a, r in zip(fused, ref, strict=True):
            np.testing.assert_allclose(a, r, rtol=1e-10, atol=1e-12)
        return
    exact = np_attention(*(a.astype(np.float64) for a in (q, k, v)),
                         None if m is None else np.where(m, 0.0, -np.inf), causal,
                         1.0 / np.sqrt(shape_q[-1]), g.astype(np.float64))
    for name, a, r, x in zip(("out", "dq", "dk", "dv"), fused, ref, exact, strict=True):
        assert a.dtype == r.dtype == dt, name
        assert_near(a, x, dt, 4, name)
        # the portable path rounds after every op (NumPy's float16 products too): looser
        assert_near(a, r, dt, 8, name)


@pytest.mark.parametrize(("shape_q", "shape_kv", "mask_shape", "causal", "p"), [
    ((2, 2, 37, 8), (2, 2, 70, 8), None, False, 0.3),
    ((2, 2, 33, 16), (2, 2, 33, 16), None, True, 0.5),
    ((3, 20, 8), (3, 9, 8), (3, 1, 9), False, 0.1),
])
@pytest.mark.parametrize("dt", [np.float64, *LOW])
def test_dropout_in_the_kernel_is_the_portable_dropout(host_kernel, shape_q, shape_kv,
                                                       mask_shape, causal, p, dt):
    """The same weights dropped as the portable path from the same generator state (which
    both leave at the same place): float64 to rounding, float16/bfloat16 within the
    portable path's rounding errors (a few epsilons)."""
    q = RNG.standard_normal(shape_q).astype(dt)
    k = RNG.standard_normal(shape_kv).astype(dt)
    v = RNG.standard_normal(shape_kv[:-1] + (8,)).astype(dt)
    g = RNG.standard_normal(shape_q[:-1] + (8,)).astype(dt)
    kw = {"is_causal": causal, "dropout_p": p}
    if mask_shape is not None:
        m = RNG.random(mask_shape) > 0.3
        m[..., 0] = True
        kw["attn_mask"] = vtl.asarray(m)
    vtl.random.seed(4)
    _, ref = _sdpa_grads(q, k, v, g, **kw)
    ref_state = vtl.random.default_generator().get_state()
    vtl.random.seed(4)
    with use_kernel("attention", host_kernel):
        out, fused = _sdpa_grads(q, k, v, g, **kw)
    assert out.grad_fn.name() == "ScaledDotProductAttentionBackward"
    assert vtl.random.default_generator().get_state() == ref_state
    for a, r in zip(fused, ref, strict=True):
        assert a.dtype == r.dtype == dt
        if dt == np.float64:
            np.testing.assert_allclose(a, r, rtol=1e-10, atol=1e-12)
        else:
            assert_near(a, r, dt, 4)
    # another draw gives other weights
    with use_kernel("attention", host_kernel):
        _, again = _sdpa_grads(q, k, v, g, **kw)
    assert not np.allclose(again[0].astype(np.float64), fused[0].astype(np.float64))


@pytest.mark.parametrize("low", ["float16", "bfloat16"])
def test_autocast_runs_the_kernel_in_16bit(host_kernel, low):
    """Under ``vtl.autocast`` attention runs in the low dtype: through the kernel (dropout
    included), float32 gradients for float32 leaves, within the portable path's rounding."""
    x = [RNG.standard_normal((2, 2, 19, 8)).astype(np.float32) for _ in range(3)]
    g = RNG.standard_normal((2, 2, 19, 8)).astype(np.float32)

    def run():
        vtl.random.seed(7)
        ts = [vtl.asarray(a, requires_grad=True) for a in x]
        with vtl.autocast(dtype=getattr(vtl, low)):
            out = F.scaled_dot_product_attention(*ts, is_causal=True, dropout_p=0.2)
        vtl.sum(vtl.astype(out, vtl.float32) * vtl.asarray(g)).backward()
        assert all(t.grad.dtype == vtl.float32 for t in ts)
        return out.grad_fn.name(), [to_numpy(out)] + [to_numpy(t.grad) for t in ts]

    name, ref = run()
    assert name != "ScaledDotProductAttentionBackward"
    with use_kernel("attention", host_kernel):
        name, fused = run()
    assert name == "ScaledDotProductAttentionBackward"
    dt = np.dtype(getattr(vtl, low))
    assert fused[0].dtype == ref[0].dtype == dt
    for a, r in zip(fused, ref, strict=True):
        assert_near(a, r, dt, 4)


@pytest.mark.parametrize(("dt", "p"), [
    (np.float64, 0.4), (np.float16, 0.4), (ml_dtypes.bfloat16, 0.4),
    (np.float16, 1.0 - 2.0**-17),  # 1 / (1 - p) beyond float16: applied in float32
], ids=["float64", "float16", "bfloat16", "float16-p-near-1"])
def test_dropout_second_order_and_the_untiled_kernels(fake_cupy, host_kernel, dt, p):
    """Gradients of gradients through the kernel's dropout (the portable path recomputed
    with the kernel's dropout factors, applied as dropout applies them) and the untiled
    kernels' fallback (the portable path itself). The data do not depend on the order the
    tests run in; the second derivative compounds the 16-bit rounding of the first."""
    rng = np.random.default_rng(17)
    q, k, v = (rng.standard_normal((2, 6, 8)).astype(dt) for _ in range(3))

    def hvp():
        vtl.random.seed(9)
        run_q = vtl.asarray(q, requires_grad=True)
        out = F.scaled_dot_product_attention(run_q, vtl.asarray(k), vtl.asarray(v),
                                             dropout_p=p)
        (gq,) = vtl.autograd.grad(vtl.sum(out ** 2), [run_q], create_graph=True)
        (hq,) = vtl.autograd.grad(vtl.sum(gq * gq), [run_q])
        return out.grad_fn.name(), to_numpy(gq), to_numpy(hq)

    ref = hvp()
    with use_kernel("attention", host_kernel):
        fused = hvp()
    assert fused[0] == "ScaledDotProductAttentionBackward"
    for a, r, factor in zip(fused[1:], ref[1:], (4, 8), strict=True):
        assert a.dtype == r.dtype == dt
        if dt == np.float64:
            np.testing.assert_allclose(a, r, rtol=1e-9, atol=1e-11)
        else:
            assert_near(a, r, dt, factor)
    # the thread-per-row kernels have no dropout: the portable path, the same numbers
    with use_kernel("attention", A.CupyAttention(fake_cupy, tiled=False)):
        untiled = hvp()
    assert untiled[0] != "ScaledDotProductAttentionBackward"
    for a, r in zip(untiled[1:], ref[1:], strict=True):
        np.testing.assert_array_equal(a, r)


def test_functional_second_order_and_fallbacks(host_kernel):
    q, k, v = (RNG.standard_normal((2, 3, 4)) for _ in range(3))
    ts = [vtl.asarray(a, requires_grad=True) for a in (q, k, v)]

    def hvp(run_q):
        out = F.scaled_dot_product_attention(run_q, ts[1], ts[2], is_causal=True)
        (gq,) = vtl.autograd.grad(vtl.sum(out ** 2), [run_q], create_graph=True)
        (hq,) = vtl.autograd.grad(vtl.sum(gq * gq), [run_q])
        return to_numpy(gq), to_numpy(hq)

    ref = hvp(ts[0])
    with use_kernel("attention", host_kernel):
        fused = hvp(ts[0])
        # broadcast batch axes and masks needing a gradient take the portable path
        fm = vtl.asarray(np.zeros((3, 3)), requires_grad=True)
        out = F.scaled_dot_product_attention(*ts, attn_mask=fm)
        assert out.grad_fn.name() != "ScaledDotProductAttentionBackward"
        out = F.scaled_dot_product_attention(ts[0], ts[1][:1], ts[2][:1])
        assert out.grad_fn.name() != "ScaledDotProductAttentionBackward"
    for a, r in zip(fused, ref, strict=True):
        np.testing.assert_allclose(a, r, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("p", [0.0, 0.2])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dt", [np.float32, np.float64, *LOW])
def test_gpu_kernel_matches_portable(causal, dt, p):
    if "cupy" not in vtl.backends.available_names():
        pytest.skip("needs the cupy backend")
    be = vtl.backends.get("cupy")
    assert be.kernel("attention") is not None
    if np.dtype(dt).name not in be.dtypes():
        pytest.skip(f"cupy has no {np.dtype(dt).name} here")
    shape_q, shape_kv = (4, 8, 100, 64), (4, 8, 130, 64)
    q, k, v = (RNG.standard_normal(s).astype(dt) for s in (shape_q, shape_kv, shape_kv))
    g = RNG.standard_normal(shape_q).astype(dt)
    m = RNG.random((4, 1, 1, 130)) > 0.2
    kw = {"is_causal": True} if causal else {"attn_mask": vtl.asarray(m, device="cupy")}

    def run():
        vtl.random.seed(3)
        ts = [vtl.asarray(a, device="cupy", requires_grad=True) for a in (q, k, v)]
        out = F.scaled_dot_product_attention(*ts, dropout_p=p, **kw)
        vtl.sum(out * vtl.asarray(g, device="cupy")).backward()
        return out.grad_fn.name(), [to_numpy(out)] + [to_numpy(t.grad) for t in ts]

    name, fused = run()
    assert name == "ScaledDotProductAttentionBackward"
    with use_kernel("attention", None, "cupy"):
        name, ref = run()
    assert name != "ScaledDotProductAttentionBackward"
    for a, r in zip(fused, ref, strict=True):
        assert a.dtype == r.dtype == dt
        if np.dtype(dt) in _EPS:  # the portable path rounds after every op
            assert_near(a, r, dt, 8)
        else:
            tol = {"rtol": 1e-4, "atol": 1e-4} if dt == np.float32 else \
                {"rtol": 1e-10, "atol": 1e-10}
            np.testing.assert_allclose(a, r, **tol)


def _mha_pair(backend_name, need_weights, seed, **kw):
    vtl.random.seed(0)
    mha = vtl.nn.MultiheadAttention(16, 2, dropout=0.25, bias=True).to(backend_name)
    x = vtl.asarray(np.random.default_rng(1).standard_normal((7, 3, 16)), dtype=vtl.float32,
                    device=backend_name, requires_grad=True)
    vtl.random.seed(seed)
    out, w = mha(x, x, x, need_weights=need_weights, **kw)
    vtl.sum(out * out).backward()
    return out, w, [to_numpy(out), to_numpy(x.grad), to_numpy(mha.in_proj_weight.grad)]


@pytest.mark.parametrize("masks", ["none", "causal", "causal+padding", "float", "bool"])
def test_multihead_attention_without_weights_is_the_weights_path(backend, masks):
    """``need_weights=False`` runs through scaled_dot_product_attention: the same outputs,
    gradients and dropout draws as the path that forms the weights."""
    kpm = np.zeros((3, 7), bool)
    kpm[1, 5:] = True
    am = np.random.default_rng(2).standard_normal((7, 7)).astype(np.float32)
    kw = {"none": {}, "causal": {"is_causal": True, "attn_mask": None},
          "causal+padding": {"is_causal": True, "key_padding_mask": vtl.asarray(
              kpm, device=backend)},
          "float": {"attn_mask": vtl.asarray(am, device=backend)},
          "bool": {"attn_mask": vtl.asarray(am > 0.5, device=backend),
                   "key_padding_mask": vtl.asarray(kpm, device=backend)}}[masks]
    if masks.startswith("causal"):
        kw["attn_mask"] = None
        kw_w = dict(kw, attn_mask=vtl.asarray(np.triu(np.ones((7, 7), bool), 1),
                                              device=backend))
    else:
        kw_w = kw
    _, none, fast = _mha_pair(backend, False, 5, **kw)
    _, w, ref = _mha_pair(backend, True, 5, **kw_w)
    assert none is None and w is not None
    for a, r in zip(fast, ref, strict=True):
        np.testing.assert_allclose(a, r, rtol=2e-4, atol=2e-5)


@pytest.mark.filterwarnings("ignore:invalid value encountered")
def test_multihead_attention_fully_masked_rows(backend):
    """A query whose keys are all masked: zeros before the output projection without the
    weights (PyTorch's scaled_dot_product_attention), nan with them (PyTorch's softmax)."""
    mha = vtl.nn.MultiheadAttention(8, 2).to(backend).eval()
    x = vtl.asarray(np.random.default_rng(3).standard_normal((3, 2, 8)), dtype=vtl.float32,
                    device=backend)
    kpm = vtl.asarray(np.array([[True] * 3, [False, True, False]]), device=backend)
    out, _ = mha(x, x, x, key_padding_mask=kpm, need_weights=False)
    bias = to_numpy(mha.out_proj.bias)
    np.testing.assert_allclose(to_numpy(out)[:, 0], np.broadcast_to(bias, (3, 8)), atol=1e-6)
    assert np.isfinite(to_numpy(out)).all()
    out_w, _ = mha(x, x, x, key_padding_mask=kpm, need_weights=True)
    assert np.isnan(to_numpy(out_w)[:, 0]).all()
    np.testing.assert_allclose(to_numpy(out_w)[:, 1], to_numpy(out)[:, 1], rtol=1e-5,
                               atol=1e-6)


def test_multihead_attention_takes_the_fused_kernel(host_kernel):
    """The Transformer layers' attention (need_weights=False) runs the fused kernel forward
    and backward, dropout included, with the portable path's numbers."""
    calls = []

    class Spy:
        def supports(self, dt):
            return host_kernel.supports(dt)

        def forward(self, *a):
            calls.append("forward")
            return host_kernel.forward(*a)

        def backward(self, *a):
            calls.append("backward")
            return host_kernel.backward(*a)

    vtl.random.seed(0)
    layer = vtl.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.1, batch_first=True).double()
    x = RNG.standard_normal((2, 9, 16))

    def run():
        vtl.random.seed(1)
        layer.zero_grad()
        xt = vtl.asarray(x, requires_grad=True)
        out = layer(xt)
        vtl.sum(out * out).backward()
        return [to_numpy(out), to_numpy(xt.grad), to_numpy(layer.self_attn.in_proj_weight.grad)]

    ref = run()
    with use_kernel("attention", Spy()):
        got = run()
    assert calls == ["forward", "backward"]
    for a, r in zip(got, ref, strict=True):
        np.testing.assert_allclose(a, r, rtol=1e-9, atol=1e-11)


def test_multihead_attention_without_weights_matches_torch():
    torch = pytest.importorskip("torch")
    tm = torch.nn.MultiheadAttention(8, 2)
    mha = vtl.nn.MultiheadAttention(8, 2)
    mha.load_state_dict({k: vtl.asarray(v.detach().numpy()) for k, v in
                         tm.state_dict().items()})
    x = np.random.default_rng(4).standard_normal((3, 2, 8)).astype(np.float32)
    kpm = np.array([[True] * 3, [False, True, False]])
    want, _ = tm(*(torch.from_numpy(x),) * 3, key_padding_mask=torch.from_numpy(kpm),
                 need_weights=False)
    got, _ = mha(*(vtl.asarray(x),) * 3, key_padding_mask=vtl.asarray(kpm), need_weights=False)
    np.testing.assert_allclose(to_numpy(got), want.detach().numpy(), rtol=1e-5, atol=1e-6)


def _node_names(t):
    names, todo, seen = [], [t.grad_fn], set()
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen or not hasattr(node, "name"):
            continue
        seen.add(id(node))
        names.append(node.name())
        todo += [nxt for nxt, _ in node.next_functions]
    return names


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("case", ["plain", "causal+padding", "unbatched", "float-mask"])
def test_self_attention_packed_projection(backend, batch_first, case):
    """Self-attention without weights (query is key is value) projects with one product and
    splits heads in one node: the same outputs and gradients as separate projections."""
    rng = np.random.default_rng(12)
    shape = (5, 7, 16) if batch_first else (7, 5, 16)
    if case == "unbatched":
        shape = (7, 16)
    x_np = rng.standard_normal(shape).astype(np.float32)
    kw = {}
    if case == "causal+padding":
        kpm = np.zeros((5, 7), bool)
        kpm[2, 4:] = True
        kw = {"is_causal": True, "key_padding_mask": vtl.asarray(kpm, device=backend)}
    elif case == "float-mask":
        kw = {"attn_mask": vtl.asarray(rng.standard_normal((7, 7)).astype(np.float32),
                                       device=backend)}

    def run(packed):
        vtl.random.seed(0)
        mha = vtl.nn.MultiheadAttention(16, 4, dropout=0.2, batch_first=batch_first)
        mha = mha.to(backend)
        x = vtl.asarray(x_np, device=backend, requires_grad=True)
        kv = x if packed else x * 1.0
        vtl.random.seed(3)
        out, w = mha(x, kv, kv, need_weights=False, **kw)
        assert w is None
        names = _node_names(out)
        # packed: the heads split in one node, or none where the kernel reads them in place
        # (wgpu's takes every case here; cupy's declines dropout with head size 4)
        in_place = packed and "SplitHeadsBackward" not in names
        assert in_place or not packed or not _packs(backend) or backend != "wgpu"
        if in_place:
            assert _packs(backend) and "PermuteBackward" not in names
            assert "ScaledDotProductAttentionBackward" in names
        if not packed:
            assert "SplitHeadsBackward" not in names
        vtl.sum(out * out).backward()
        return out, [to_numpy(out), to_numpy(x.grad), to_numpy(mha.in_proj_weight.grad),
                     to_numpy(mha.in_proj_bias.grad), to_numpy(mha.out_proj.weight.grad)]

    out, got = run(True)
    _, ref = run(False)
    assert out.shape == shape
    for a, r in zip(got, ref, strict=True):
        np.testing.assert_allclose(a, r, rtol=2e-4, atol=2e-5)


def _packs(backend_name):
    """Whether ``backend_name``'s attention kernel reads packed projections in place."""
    kern = vtl.backends.get(backend_name).kernel("attention")
    return kern is not None and hasattr(kern, "forward_packed")


# (N, L, heads, head size, mask kind, causal, dropout)
PACKED_CASES = [
    (3, 37, 4, 8, None, False, 0.0),
    (2, 70, 2, 16, None, True, 0.0),       # lengths off the tiles, causal
    (2, 9, 2, 8, "ls", False, 0.0),        # an (L, L) float mask with a masked key
    (3, 12, 2, 8, "padding", False, 0.0),  # key padding (N, 1, 1, L)
    (2, 6, 2, 4, "full", False, 0.0),      # one mask per batch and head
    (1, 5, 1, 8, "dead", False, 0.0),      # a row with every key masked
    (3, 33, 4, 8, None, False, 0.3),       # dropout
    (2, 20, 2, 8, "full", False, 0.2),     # a mask and dropout
]


def _packed_mask(kind, n, heads, length, backend_name):
    if kind is None:
        return None
    rng = np.random.default_rng(21)
    if kind == "ls":
        m = rng.standard_normal((length, length)).astype(np.float32)
        m[:, 3] = -np.inf
        return vtl.asarray(m, device=backend_name)
    if kind == "padding":
        m = np.ones((n, 1, 1, length), bool)
        m[0, ..., -3:] = False
    elif kind == "full":
        m = rng.random((n, heads, length, length)) > 0.4
        m[..., 0] = True
    else:
        m = np.ones((length, length), bool)
        m[2] = False
    return vtl.asarray(m, device=backend_name)


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("case", PACKED_CASES)
def test_packed_attention_matches_split_heads(backend, batch_first, case):
    """Attention read from the packed projection in place (one node: the merged output and
    the projection's gradient written directly, one dispatch forward and two backward on
    wgpu) against the heads split, attended and merged: the same numbers, dropout's
    included; in either layout."""
    n, length, heads, hd, kind, causal, p = case
    e = heads * hd
    rng = np.random.default_rng(22)
    shape = (n, length, 3 * e) if batch_first else (length, n, 3 * e)
    x = rng.standard_normal(shape).astype(np.float32)
    g = rng.standard_normal((*shape[:2], e)).astype(np.float32)
    mask = _packed_mask(kind, n, heads, length, backend)
    kern = vtl.backends.get(backend).kernel("attention")

    def run(fused):
        t = vtl.asarray(x, device=backend, requires_grad=True)
        vtl.random.seed(5)
        launches = getattr(kern, "launches", 0)
        if fused:
            out = F.attention._packed_attention(t, heads, batch_first, mask, p, causal)
        else:
            qh, kh, vh = F.attention._packed_heads(t, heads, batch_first)
            out = F.attention._merge_heads(F.scaled_dot_product_attention(
                qh, kh, vh, attn_mask=mask, dropout_p=p, is_causal=causal), batch_first)
        out.backward(vtl.asarray(g, device=backend))
        return ([to_numpy(out), to_numpy(t.grad)], _node_names(out),
                getattr(kern, "launches", 0) - launches)

    got, names, launches = run(True)
    ref, _, _ = run(False)
    if _packs(backend):
        assert names[0] == "ScaledDotProductAttentionBackward" and len(names) == 1
        if backend == "wgpu":
            assert launches == 3
    for a, r in zip(got, ref, strict=True):
        assert a.shape == r.shape
        np.testing.assert_allclose(a, r, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("tiled", [False, True], ids=["rows", "tiled"])
@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("case", PACKED_CASES)
def test_host_build_packed_attention_matches_split_heads(fake_cupy, tiled, batch_first,
                                                         case):
    """The CUDA kernels' packed layout (built for the host, behind the real glue): the
    packed projection read in place, the output merged and the projection's gradient
    written directly, against the same kernels on split heads; float64 and float32 (what a
    family declines, dropout for the thread-per-row one and head sizes off 8 for the tiled
    one, runs the split path both ways)."""
    n, length, heads, hd, kind, causal, p = case
    e = heads * hd
    kern = A.CupyAttention(fake_cupy, tiled=tiled)
    for dt, tol in ((np.float64, 1e-12), (np.float32, 2e-6)):
        rng = np.random.default_rng(24)
        shape = (n, length, 3 * e) if batch_first else (length, n, 3 * e)
        x = rng.standard_normal(shape).astype(dt)
        g = rng.standard_normal((*shape[:2], e)).astype(dt)
        mask = _packed_mask(kind, n, heads, length, "numpy")
        if mask is not None and mask.dtype != vtl.bool:
            mask = vtl.astype(mask, vtl.float64 if dt == np.float64 else vtl.float32)

        def run(fused, dt=dt, x=x, g=g, mask=mask):
            t = vtl.asarray(x, requires_grad=True)
            vtl.random.seed(5)
            with use_kernel("attention", kern):
                if fused:
                    out = F.attention._packed_attention(t, heads, batch_first, mask, p, causal)
                else:
                    qh, kh, vh = F.attention._packed_heads(t, heads, batch_first)
                    out = F.attention._merge_heads(F.scaled_dot_product_attention(
                        qh, kh, vh, attn_mask=mask, dropout_p=p, is_causal=causal),
                        batch_first)
                out.backward(vtl.asarray(g))
            return [to_numpy(out), to_numpy(t.grad)], _node_names(out)

        got, names = run(True)
        ref, _ = run(False)
        if (tiled and hd % 8 == 0) or (not tiled and p == 0.0):  # else the kernel declines
            assert names == ["ScaledDotProductAttentionBackward"]
        for a, r in zip(got, ref, strict=True):
            assert a.dtype == r.dtype == dt and a.shape == r.shape
            np.testing.assert_allclose(a, r, rtol=tol, atol=tol)


def test_host_build_packed_attention_in_16bit(fake_cupy):
    """bfloat16 and float16 packed operands: within the rounding of the split heads' path
    through the same kernels (every result rounded once)."""
    kern = A.CupyAttention(fake_cupy, tiled=True)
    rng = np.random.default_rng(25)
    for dt in LOW:
        x = rng.standard_normal((2, 19, 48)).astype(dt)
        g = rng.standard_normal((2, 19, 16)).astype(dt)

        def run(fused, x=x, g=g):
            t = vtl.asarray(x, requires_grad=True)
            with use_kernel("attention", kern):
                if fused:
                    out = F.attention._packed_attention(t, 2, True, None, 0.0, True)
                else:
                    qh, kh, vh = F.attention._packed_heads(t, 2, True)
                    out = F.attention._merge_heads(F.scaled_dot_product_attention(
                        qh, kh, vh, is_causal=True), True)
                out.backward(vtl.asarray(g))
            return [to_numpy(out), to_numpy(t.grad)]

        for a, r in zip(run(True), run(False), strict=True):
            assert a.dtype == r.dtype == np.dtype(dt)
            assert_near(a, r, dt, 2)


@pytest.mark.parametrize("p", [0.0, 0.25])
def test_packed_attention_second_order_on_every_backend(backend, p):
    """Gradients of gradients through the packed node (the portable path recomputed, with
    the kernel's dropout mask) equal those through split heads."""
    x_np = np.random.default_rng(23).standard_normal((6, 2, 24)).astype(np.float32)

    def run(fused):
        x = vtl.asarray(x_np, device=backend, requires_grad=True)
        vtl.random.seed(7)
        if fused:
            out = F.attention._packed_attention(x, 2, False, None, p, False)
        else:
            qh, kh, vh = F.attention._packed_heads(x, 2, False)
            out = F.attention._merge_heads(F.scaled_dot_product_attention(
                qh, kh, vh, dropout_p=p), False)
        (gx,) = vtl.autograd.grad(vtl.sum(out * out), [x], create_graph=True)
        (h,) = vtl.autograd.grad(vtl.sum(gx * gx), [x])
        return [to_numpy(out), to_numpy(gx), to_numpy(h)]

    for a, r in zip(run(True), run(False), strict=True):
        np.testing.assert_allclose(a, r, rtol=2e-4, atol=2e-5)


def test_packed_heads_second_order():
    x_np = np.random.default_rng(13).standard_normal((6, 2, 8))

    def run(packed):
        vtl.random.seed(0)
        mha = vtl.nn.MultiheadAttention(8, 2).double()
        x = vtl.asarray(x_np, requires_grad=True)
        kv = x if packed else x * 1.0
        out, _ = mha(x, kv, kv, need_weights=False)
        (gx,) = vtl.autograd.grad(vtl.sum(out * out), [x], create_graph=True)
        (h,) = vtl.autograd.grad(vtl.sum(gx * gx), [x])
        return [to_numpy(gx), to_numpy(h)]

    for a, r in zip(run(True), run(False), strict=True):
        np.testing.assert_allclose(a, r, rtol=1e-9, atol=1e-11)


def test_an_empty_batch_is_declined_before_any_launch(host_kernel):
    """CuPy runs at least one block even for an empty grid, and the kernels check rows and
    keys but not the batch: an empty batch (or a zero head size) is left to the portable
    path, which gives the empty result."""
    q = np.zeros((0, 5, 8), np.float32)
    assert host_kernel.forward(q, q, q, None, True, 0.5, (0, 2)) is None
    z = np.zeros((4, 5, 0), np.float32)
    assert host_kernel.forward(z, z, z, None, False, 0.5, (2, 2)) is None
