"""Attention by products over chunks of the batch (``vtl/backends/cupy/_gemm_attention.py``),
the cupy ``attention`` kernel's path for long float32/float64 sequences.

* On the host (given a C++20 compiler): its two CUDA kernels compiled with the emulation of
  the CUDA built-ins of ``test_cupy_nn_kernels``, NumPy's ``matmul`` standing in for
  cuBLAS, driven through the real ``GemmAttention`` with a small chunk budget (several
  chunks per call); the output, the log-sum-exp and the three gradients against NumPy's
  attention over the fused kernels' cases (masks, causal with ``L != S``, rows with every
  key masked, value sizes unlike key sizes), in float64 and float32. The fused kernels'
  backward takes this forward's log-sum-exp, and this backward theirs.
* On the backends that have the path (cupy, wgpu): ``F.scaled_dot_product_attention``
  through it against the portable attention on the same backend.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import pytest
from helpers import assert_replays_draw_like_eager, to_numpy
from nn_kernel_checks import np_attention
from test_attention_kernels import CASES, _mask
from test_attention_kernels import FakeCupy as FusedFakeCupy
from test_cupy_nn_kernels import _SHIM, compile_host, host_args

import vtl
from vtl.backends._common import gemm_attention as C
from vtl.backends.cupy import _gemm_attention as G
from vtl.backends.cupy import attention as A
from vtl.nn import functional as F

RNG = np.random.default_rng(17)

_EXTRA = r"""
using std::exp; using std::log; using std::max; using std::min;
#define __launch_bounds__(x)
"""
_GEO = ("int b0, int B2, int L, int S, long long mb1, long long mb2, long long ml, "
        "long long ms, int has_mask, int causal, int R, int i0, T scale")
_GEO_ARGS = "b0, B2, L, S, mb1, mb2, ml, ms, has_mask, causal, R, i0, scale"
_LAUNCHERS = (
    f'extern "C" void launch_vtl_gattn_softmax(unsigned gx, T* s, T* lse, const T* mask, '
    f"{_GEO}) {{ vtl_launch(gx, 1, {G._THREADS}, 1, [=] {{ "
    f"vtl_gattn_softmax(s, lse, mask, {_GEO_ARGS}); }}); }}\n"
    f'extern "C" void launch_vtl_gattn_dsoftmax(unsigned gx, T* s, T* dp, const T* lse, '
    f"const T* delta, const T* mask, {_GEO}) {{ vtl_launch(gx, 1, {G._THREADS}, 1, "
    f"[=] {{ vtl_gattn_dsoftmax(s, dp, lse, delta, mask, {_GEO_ARGS}); }}); }}\n"
    'extern "C" void launch_vtl_gattn_row_dots(unsigned gx, const T* g, const T* o, T* d, '
    "long long rows, int n) { vtl_launch(gx, 1, 256, 1, [=] { "
    "vtl_gattn_row_dots(g, o, d, rows, n); }); }\n")


class _HostKernel:
    def __init__(self, fn, dt, block):
        self.fn, self.dt, self.block = fn, dt, block

    def __call__(self, grid, block, args):
        (gx,) = grid
        assert block == (self.block,) and 1 <= gx <= 2**31 - 1
        self.fn(ctypes.c_uint(gx), *host_args(args, self.dt, views=True))  # masks: views


class FakeCupy:
    """The CuPy functions ``GemmAttention`` calls, on NumPy arrays."""

    def __init__(self, tmp):
        self.tmp, self.built = tmp, {}

    def RawKernel(self, code, name):  # noqa: N802
        lib = self.built.get(code)
        if lib is None:
            src = _SHIM + _EXTRA + code.replace('extern "C" ', "") + _LAUNCHERS
            lib = self.built[code] = compile_host(self.tmp / f"g{len(self.built)}.cpp", src)
        dt = np.dtype(np.float64 if "typedef double T;" in code else np.float32)
        block = 256 if name == "vtl_gattn_row_dots" else G._THREADS
        return _HostKernel(getattr(lib, f"launch_{name}"), dt, block)

    def empty(self, shape, dtype):
        return np.full(shape, np.nan, dtype)

    broadcast_to = staticmethod(np.broadcast_to)
    ascontiguousarray = staticmethod(np.ascontiguousarray)


@pytest.fixture(scope="module")
def fake(tmp_path_factory):
    return FakeCupy(tmp_path_factory.mktemp("gattn"))


@pytest.fixture(scope="module")
def fused(tmp_path_factory):
    """The fused kernels' host build (one stand-in for the module: a library is loaded once
    per path)."""
    return A.CupyAttention(FusedFakeCupy(tmp_path_factory.mktemp("fused")))


#: every case by whole rows (0), the causal ones also by blocks of at least 2 and 3 query rows
_ROW_CASES = [(c, 0) for c in CASES] + [(c, r) for c in CASES if c[-1] for r in (2, 3)] + [
    (((1, 2), 9, 7, 4, 4, "dead", True), r) for r in (0, 2)]  # causal with a dead row


@pytest.mark.parametrize(("case", "rows"), _ROW_CASES)
@pytest.mark.parametrize("dt", [np.float64, np.float32])
def test_host_build_matches_numpy(fake, fused, monkeypatch, case, rows, dt):
    """Every case through the path, one batch entry to a chunk; causal ones also by blocks
    of ``rows`` query rows (at least; 0: whole rows)."""
    (b1, b2), n_q, n_k, e, ev, kind, causal = case
    b = b1 * b2
    monkeypatch.setattr(C, "MIN_SCORES", 1)
    monkeypatch.setattr(C, "BUDGET", n_q * n_k * np.dtype(dt).itemsize)
    gemm = G.GemmAttention(fake, np)
    gemm.causal_rows = rows
    gemm.budget_factor = 1
    if rows and n_q >= 2 * rows:
        assert len(gemm.row_blocks(n_q, n_k, True)) > 1
    q = RNG.standard_normal((b, n_q, e)).astype(dt)
    k = RNG.standard_normal((b, n_k, e)).astype(dt)
    v = RNG.standard_normal((b, n_k, ev)).astype(dt)
    g = RNG.standard_normal((b, n_q, ev)).astype(dt)
    mask = _mask(kind, b1, b2, n_q, n_k, dt, RNG)
    scale = 1.0 / np.sqrt(e)
    assert gemm.takes(q, k, v, mask, None) and not gemm.takes(q, k, v, mask, (0.1, None))
    assert len(gemm.chunks(b, n_q, n_k, np.dtype(dt).itemsize)) == b
    out, lse = gemm.forward(q, k, v, mask, causal, scale, (b1, b2))
    grads = gemm.backward(q, k, v, out, lse, g, mask, causal, scale, (b1, b2))
    m4 = None if mask is None else np.broadcast_to(mask, (b1, b2, n_q, n_k)).reshape(
        b, n_q, n_k)
    ref = np_attention(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64),
                       m4, causal, scale, g.astype(np.float64))
    tol = {"rtol": 1e-11, "atol": 1e-12} if dt == np.float64 else {"rtol": 2e-5, "atol": 2e-5}
    for name, a, r in zip(("out", "dq", "dk", "dv"), (out, *grads), ref, strict=True):
        assert a.dtype == dt and a.shape == r.shape, name
        np.testing.assert_allclose(a, r, err_msg=name, **tol)
    assert lse.dtype == dt and lse.shape == (b, n_q)
    if kind == "dead":
        assert np.isinf(lse[:, 1]).all() and not np.any(out[:, 1])
    if dt != np.float64:  # (the exchange below does not depend on the dtype)
        return
    # the fused kernels' backward from this forward's log-sum-exp, and this backward from
    # their forward's: the same gradients
    out_f, lse_f = fused.forward(q, k, v, mask, causal, scale, (b1, b2))
    np.testing.assert_allclose(lse, lse_f, rtol=1e-12)
    for a, r in zip(fused.backward(q, k, v, out, lse, g, mask, causal, scale, (b1, b2)),
                    ref[1:], strict=True):
        np.testing.assert_allclose(a, r, **tol)
    for a, r in zip(gemm.backward(q, k, v, out_f, lse_f, g, mask, causal, scale, (b1, b2)),
                    ref[1:], strict=True):
        np.testing.assert_allclose(a, r, **tol)


def test_what_the_path_takes(fake, monkeypatch):
    gemm = G.GemmAttention(fake, np)
    x = np.zeros((2, 128, 64), np.float32)
    assert gemm.takes(x, x, x, None, None)
    assert not gemm.takes(x[:, :64], x, x, None, None)  # below MIN_SCORES
    assert not gemm.takes(x.astype(np.float16), x.astype(np.float16), x.astype(np.float16),
                          None, None)
    assert not gemm.takes(x, x, x, np.zeros((128, 128), np.float64), None)
    assert not gemm.takes(x, x, x, None, (0.1, None))  # dropout: the fused kernels
    long = np.zeros((1, 8200, 8), np.float32)  # one entry's scores beyond the budget
    assert not gemm.takes(long, long, long, None, None)
    # causal: up to causal_max_scores (the fused kernels skip the masked key blocks)
    assert gemm.takes(x, x, x, None, None, causal=True)
    monkeypatch.setattr(gemm, "causal_max_scores", 128 * 128 - 1)
    assert not gemm.takes(x, x, x, None, None, causal=True)
    assert gemm.takes(x, x, x, None, None, causal=False)
    # causal attention and dropout from their own least size (where the backend sets one)
    monkeypatch.setattr(gemm, "causal_max_scores", 1 << 30)
    monkeypatch.setattr(gemm, "takes_dropout", True)
    monkeypatch.setattr(gemm, "min_scores_causal_or_dropout", 256 * 256)
    assert gemm.takes(x, x, x, None, None)
    assert not gemm.takes(x, x, x, None, None, causal=True)
    assert not gemm.takes(x, x, x, None, (0.1, None))
    x256 = np.zeros((2, 256, 64), np.float32)
    assert gemm.takes(x256, x256, x256, None, (0.1, None), causal=True)
    monkeypatch.setattr(gemm, "takes_dropout", False)
    assert not gemm.takes(x256, x256, x256, None, (0.1, None))
    monkeypatch.setattr(C, "ENABLED", False)
    assert not gemm.takes(x, x, x, None, None)
    # causal products by blocks of query rows, each over the keys up to its last row
    assert gemm.row_blocks(2048, 2048, True) == [(r, r + 256, r + 256) for r in range(0, 2048, 256)]
    assert gemm.row_blocks(512, 600, True) == [(0, 256, 256), (256, 512, 512)]
    assert gemm.row_blocks(600, 300, True) == [(0, 256, 256), (256, 512, 300),
                                               (512, 600, 300)]  # L > S
    assert gemm.row_blocks(500, 600, True) == [(0, 500, 600)]  # too few rows to split
    assert gemm.row_blocks(2048, 2048, False) == [(0, 2048, 2048)]
    assert gemm.chunks(10, 128, 128, 4) == [(0, 10)]
    monkeypatch.setattr(C, "BUDGET", 3 * 128 * 128 * 4)  # cupy's chunks: four budgets each
    assert gemm.chunks(10, 128, 128, 4) == [(0, 10)]
    assert gemm.chunks(30, 128, 128, 4) == [(0, 12), (12, 24), (24, 30)]
    gemm.budget_factor = 1
    assert gemm.chunks(10, 128, 128, 4) == [(0, 3), (3, 6), (6, 9), (9, 10)]


def _path_or_skip(backend: str, dropout: bool = False) -> Any:
    """The backend's attention by products; the test is skipped where it has none (or none
    that takes dropout, with ``dropout``)."""
    kern = vtl.asarray(0.0, backend=backend)._device.backend.kernel("attention")
    gemm = getattr(kern, "_gemm", None)
    if gemm is None or (dropout and not gemm.takes_dropout):
        pytest.skip(f"the {backend} backend's attention has no path by products"
                    + (" with dropout" if dropout else ""))
    return gemm


def _masking(rng: Any, masking: str, n_q: int, n_k: int) -> Any:
    """The additive mask of ``masking`` (see :func:`_against_portable`), or ``None``."""
    mask = None
    if masking == "ls":
        mask = np.where(rng.random((n_q, n_k)) > 0.2, 0.0, -np.inf).astype(np.float32)
        mask[3] = -np.inf
    elif masking == "padding":
        mask = np.zeros((2, 1, 1, n_k), np.float32)
        mask[1, ..., -30:] = -np.inf
    return mask


def _against_portable(backend: str, gemm: Any, n_q: int, n_k: int, heads: int, seed: int,
                      masking: str, dropout_p: float = 0.0) -> list[str]:
    """F.scaled_dot_product_attention of random (2, heads, n, 16) operands through the
    backend's kernel (``gemm``'s calls recorded and returned) and through the portable
    attention (drawing dropout from the same seed): the same outputs and gradients.
    ``masking``: ``"ls"`` (an (L, S) mask with masked entries and one query row with every
    key masked), ``"padding"`` (a (2, 1, 1, S) mask, the last keys of one entry masked),
    ``"causal"`` or ``"none"``."""
    from helpers import use_kernel

    rng = np.random.default_rng(seed)
    qs = rng.standard_normal((2, heads, n_q, 16)).astype(np.float32)
    ks, vs = (rng.standard_normal((2, heads, n_k, 16)).astype(np.float32) for _ in range(2))
    gs = rng.standard_normal((2, heads, n_q, 16)).astype(np.float32)
    mask = _masking(rng, masking, n_q, n_k)
    calls, results = [], []
    for portable in (False, True):
        ctx = use_kernel("attention", None, backend) if portable else _spy(gemm, calls)
        with ctx:
            vtl.random.seed(11)
            q, k, v = (vtl.asarray(a, backend=backend, requires_grad=True) for a in (qs, ks, vs))
            m = None if mask is None else vtl.asarray(mask, backend=backend)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=m, dropout_p=dropout_p,
                                                 is_causal=masking == "causal")
            out.backward(vtl.asarray(gs, backend=backend))
            results.append([to_numpy(t) for t in (out, q.grad, k.grad, v.grad)])
    assert not np.allclose(results[0][0], 0)
    for name, a, r in zip(("out", "dq", "dk", "dv"), *results, strict=True):
        np.testing.assert_allclose(a, r, rtol=2e-4, atol=2e-5, err_msg=name)
    return calls


def test_wgpu_row_lanes():
    """The wgpu row-wise kernels' invocations per row: the fewest that hold the row in
    registers; workgroups of 256 invocations for the rows."""
    from vtl.backends.wgpu._row_lanes import SLOTS, row_groups, row_lanes

    assert SLOTS == 16
    assert [row_lanes(n) for n in (1, 512, 513, 1024, 1025, 2048, 2049, 4096, 4097)] == \
        [32, 32, 64, 64, 128, 128, 256, 256, 256]
    assert [row_groups(r, t) for r, t in ((1, 32), (8, 32), (9, 32), (9, 256), (5, 128))] == \
        [1, 1, 2, 9, 3]


@pytest.mark.parametrize("n", [1, 16, 37, 64])
def test_row_dots_match_numpy(backend, n):
    """The backward's ``delta`` (``sum(g * out, axis=-1)``) by the backend's kernel, of
    contiguous and strided rows of any length: NumPy's sums."""
    gemm = _path_or_skip(backend)
    rng = np.random.default_rng(n)
    gs, os_ = (rng.standard_normal((3, 21, n)).astype(np.float32) for _ in range(2))
    want = np.sum(gs.astype(np.float64) * os_, axis=-1)
    xp = gemm.xp
    wide = xp.asarray(np.concatenate([os_, os_], axis=2))
    for g, o in ((xp.asarray(gs), xp.asarray(os_)), (xp.asarray(gs), wide[..., :n])):
        got = gemm.row_dots(g, o)
        assert got.shape == (3, 21) and got.dtype == g.dtype
        host = got.get() if backend == "cupy" else np.asarray(got)
        np.testing.assert_allclose(host, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("n_q", "n_k", "masking"),
                         [(160, 160, "ls"), (130, 150, "causal"), (300, 280, "causal"),
                          (128, 200, "padding"), (200, 128, "none"), (30, 700, "none"),
                          (40, 2100, "ls"), (8, 4200, "padding")])
def test_path_matches_portable(backend, n_q, n_k, masking):
    """F.scaled_dot_product_attention through the path (lengths above MIN_SCORES) against
    the portable attention on the same backend, forward and gradients; on wgpu rows of 32,
    64 and 256 invocations (several rows a workgroup, or one) and rows longer than the
    softmax holds in registers (4096 keys)."""
    gemm = _path_or_skip(backend)
    calls = _against_portable(backend, gemm, n_q, n_k, 3, 5, masking)
    taken = masking != "causal" or gemm.min_scores_causal_or_dropout <= n_q * n_k \
        <= gemm.causal_max_scores
    assert calls == (["forward", "backward"] if taken else [])


@pytest.mark.parametrize(("n_q", "n_k"), [(130, 150), (200, 136)])
def test_causal_row_blocks_match_portable(backend, monkeypatch, n_q, n_k):
    """Causal attention by blocks of 32 query rows (each block's products over the keys up
    to its last row; L > S and L < S) against the portable attention, forward and
    gradients: the backend's kernels take a block's row offset."""
    gemm = _path_or_skip(backend)
    monkeypatch.setattr(gemm, "causal_rows", 32)
    monkeypatch.setattr(gemm, "causal_max_scores", 1 << 30)
    monkeypatch.setattr(gemm, "min_scores_causal_or_dropout", 1)
    blocks = len(gemm.row_blocks(n_q, n_k, True))
    assert blocks > 2
    placed: list[str] = []
    if backend == "wgpu":  # the products store into the outputs' slices themselves
        from vtl.backends._common.gemm_attention import ChunkedAttention

        into, copy = gemm.matmul_into, ChunkedAttention.matmul_into
        monkeypatch.setattr(gemm, "matmul_into",
                            lambda *a, **kw: placed.append("into") or into(*a, **kw))
        monkeypatch.setattr(ChunkedAttention, "matmul_into",
                            lambda *a, **kw: placed.append("copy") or copy(*a, **kw))
    assert _against_portable(backend, gemm, n_q, n_k, 2, 6, "causal") == ["forward", "backward"]
    if backend == "wgpu":  # out by block; dq, dk and dv (added to after the first block)
        assert placed == ["into"] * (4 * blocks)


@pytest.mark.parametrize(("masking", "rows"), [("none", 0), ("padding", 0), ("causal", 0),
                                               ("causal", 32)])
def test_dropout_by_products_matches_portable(backend, monkeypatch, masking, rows):
    """Dropout through the path (the weights' factors from the fused kernels' bits) against
    the portable attention drawing from the same seed, forward and gradients; causal also
    by blocks of 32 query rows."""
    gemm = _path_or_skip(backend, dropout=True)
    monkeypatch.setattr(gemm, "causal_rows", rows)
    monkeypatch.setattr(gemm, "min_scores_causal_or_dropout", 1)
    n_q, n_k = (150, 150) if masking == "causal" else (130, 141)
    calls = _against_portable(backend, gemm, n_q, n_k, 3, 7, masking, dropout_p=0.3)
    assert calls == ["forward", "backward"]


def _epilogues_spied(monkeypatch) -> list[dict]:
    """The epilogues that the wgpu attention's products are given from now on (a list
    filled as ``_linalg.matmul_into`` is called with one)."""
    from vtl.backends.wgpu import _gemm_attention as GA

    epilogues: list[dict] = []
    into = GA._linalg.matmul_into

    def spy(*a, **kw):
        if kw.get("epi") is not None:
            epilogues.append(kw["epi"])
        return into(*a, **kw)

    monkeypatch.setattr(GA._linalg, "matmul_into", spy)
    return epilogues


@pytest.mark.parametrize(("n_q", "n_k", "masking", "rows"),
                         [(130, 141, "ls", 0), (128, 200, "padding", 0), (150, 150, "none", 0),
                          (200, 136, "causal", 32)])
def test_backward_by_product_epilogues_gives_the_separate_kernels_bits(backend, monkeypatch,
                                                                       n_q, n_k, masking,
                                                                       rows):
    """The wgpu backward's weights and scores' gradient stored by its products' epilogues
    (no dropout): the gradients of the products followed by ``gattn_dsoftmax``, bit for
    bit (masks, a row with every key masked, causal blocks of 32 rows)."""
    if backend != "wgpu":
        pytest.skip("the product epilogues are the wgpu backend's")
    gemm = _path_or_skip(backend)
    monkeypatch.setattr(gemm, "causal_rows", rows)
    monkeypatch.setattr(gemm, "min_scores_causal_or_dropout", 1)
    epilogues = _epilogues_spied(monkeypatch)
    grads = {}
    for fused in (True, False):
        monkeypatch.setattr(gemm, "fused_backward", fused)
        epilogues.clear()
        calls = _against_portable(backend, gemm, n_q, n_k, 3, 5, masking)
        assert calls == ["forward", "backward"]
        blocks = len(gemm.row_blocks(n_q, n_k, masking == "causal"))
        assert sum("attn_" in epi["EPI"] for epi in epilogues) == (2 * blocks if fused else 0)
        rng = np.random.default_rng(3)
        qs, ks, vs = (rng.standard_normal((2, 3, n, 16)).astype(np.float32)
                      for n in (n_q, n_k, n_k))
        mask = _masking(rng, masking, n_q, n_k)
        q, k, v = (vtl.asarray(a, backend=backend, requires_grad=True) for a in (qs, ks, vs))
        F.scaled_dot_product_attention(
            q, k, v, attn_mask=None if mask is None else vtl.asarray(mask, backend=backend),
            is_causal=masking == "causal").backward(
            vtl.asarray(rng.standard_normal((2, 3, n_q, 16)).astype(np.float32),
                        backend=backend))
        grads[fused] = [to_numpy(t.grad) for t in (q, k, v)]
    for name, a, b in zip(("dq", "dk", "dv"), grads[True], grads[False], strict=True):
        np.testing.assert_array_equal(a, b, err_msg=name)


@pytest.mark.parametrize(("n_q", "n_k", "rows", "big"),
                         [(300, 280, 0, False), (200, 136, 32, False), (136, 200, 64, False),
                          (300, 280, 0, True), (290, 300, 128, True)])
def test_causal_products_sum_below_the_diagonal_only(backend, monkeypatch, n_q, n_k, rows,
                                                     big):
    """On wgpu a causal block's products leave out what the mask zeroes: the scores'
    products (forward, and backward with their epilogues) skip the tiles after the
    diagonal, the products by the weights or their gradient (the output, dq) sum over the
    keys up to each tile's last query; against the portable attention, forward and
    gradients (one block from row 0, blocks of 32, 64 and 128 rows; the 64x64 and the
    128x128 tiles)."""
    if backend != "wgpu":
        pytest.skip("the causal tiles are the wgpu backend's")
    gemm = _path_or_skip(backend)
    if big:
        from vtl.backends.wgpu import _linalg

        monkeypatch.setattr(_linalg, "BIG_MIN_TILES", 1)
        monkeypatch.setattr(_linalg, "BIG_MIN_FILL", 0.0)
    monkeypatch.setattr(gemm, "causal_rows", rows)
    monkeypatch.setattr(gemm, "causal_max_scores", 1 << 30)
    monkeypatch.setattr(gemm, "min_scores_causal_or_dropout", 1)
    epilogues = _epilogues_spied(monkeypatch)
    assert _against_portable(backend, gemm, n_q, n_k, 2, 4, "causal") == ["forward", "backward"]
    blocks = len(gemm.row_blocks(n_q, n_k, True))
    assert blocks == (1 if rows == 0 else -(-n_q // rows))
    # per block: scores and output forward; weights, scores' gradient and dq backward
    assert sum("KEND" in epi for epi in epilogues) == 5 * blocks


def test_self_attention_with_dropout_takes_the_path(backend, monkeypatch):
    """Multi-head self-attention with dropout on sequences the path takes splits the heads
    and runs by products (the packed kernel declines): the portable layer's numbers."""
    from helpers import use_kernel

    gemm = _path_or_skip(backend, dropout=True)
    monkeypatch.setattr(gemm, "min_scores_causal_or_dropout", 1)
    xs = np.random.default_rng(8).standard_normal((2, 130, 32)).astype(np.float32)
    calls, results = [], []
    for portable in (False, True):
        ctx = use_kernel("attention", None, backend) if portable else _spy(gemm, calls)
        with ctx:
            vtl.random.seed(0)
            mha = vtl.nn.MultiheadAttention(32, 2, dropout=0.2, batch_first=True).to(backend)
            x = vtl.asarray(xs, backend=backend, requires_grad=True)
            out, _ = mha(x, x, x, need_weights=False)
            vtl.sum(out * out).backward()
            results.append([to_numpy(out), to_numpy(x.grad),
                            to_numpy(mha.in_proj_weight.grad)])
    assert calls == ["forward", "backward"]
    for a, r in zip(*results, strict=True):
        np.testing.assert_allclose(a, r, rtol=2e-4, atol=2e-5)


class _spy:  # noqa: N801
    """Records the path's forward and backward calls."""

    def __init__(self, gemm, calls):
        self.gemm, self.calls = gemm, calls

    def __enter__(self):
        for name in ("forward", "backward"):
            orig = getattr(self.gemm, name)

            def wrapped(*a, _orig=orig, _name=name, **kw):
                self.calls.append(_name)
                return _orig(*a, **kw)

            setattr(self.gemm, name, wrapped)

    def __exit__(self, *exc):
        for name in ("forward", "backward"):
            delattr(self.gemm, name)
        return False


def test_dropout_by_products_compiled_replays_equal_eager(backend, monkeypatch):
    """Under ``vtl.compile`` the path's kernels draw fresh dropout bits at every replay (the
    draw's words patched in, as the fused kernels'): outputs and gradients equal to eager
    steps from the same generator state, different from step to step."""
    gemm = _path_or_skip(backend, dropout=True)
    monkeypatch.setattr(gemm, "min_scores_causal_or_dropout", 1)
    rng = np.random.default_rng(9)
    arrays = [rng.standard_normal(s).astype(np.float32)
              for s in ((2, 130, 8), (2, 141, 8), (2, 141, 8), (2, 130, 8))]

    def step(q, k, v, g):
        out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.3)
        vtl.sum(out * g).backward()
        return out

    f = vtl.compile(step)
    calls: list[str] = []
    runs = {}
    with _spy(gemm, calls):
        for fn in (f, step):
            vtl.random.seed(21)
            runs[fn] = []
            for _ in range(3):
                ts = [vtl.asarray(a, backend=backend, requires_grad=j < 3)
                      for j, a in enumerate(arrays)]
                out = fn(*ts)
                runs[fn].append([to_numpy(out)] + [to_numpy(t.grad) for t in ts[:3]])
            runs[fn].append(vtl.random.default_generator().get_state())
    assert f.captures == 1 and "forward" in calls
    assert_replays_draw_like_eager(runs[f], runs[step])
