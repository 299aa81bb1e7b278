"""The wgpu backend's fused attention kernel (``kernel("attention")``,
``vtl/backends/wgpu/attention.py``) against the portable path (``_sdpa``, what
``scaled_dot_product_attention`` runs without the kernel) and NumPy's attention.

Values and the gradients of q, k and v over: no mask, causal (``L == S`` and ``L != S``),
boolean and float masks of shapes ``(L, S)``, ``(B1, 1, L, S)``, ``(B1, B2, L, S)`` and key
padding ``(B1, 1, 1, S)``, rows with every key masked, 2-D, 3-D and 4-D inputs, head sizes
8, 16, 20, 33 and 64 (and the largest, 128), lengths off the tiles; float16 and bfloat16;
strided (broadcast) masks given to the kernel directly; what it declines; its dispatch count;
and ``vtl.compile`` replays. Dropout of the weights: the portable path's numbers and
generator state from the same seed (and NumPy's attention with the same dropout factors),
masks, causal, dead rows, lengths off the Philox blocks, 16-bit, and ``vtl.compile`` replays
with fresh bits per step.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from helpers import assert_close, assert_replays_draw_like_eager, to_numpy, use_kernel
from nn_kernel_checks import np_attention

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")

import vtl  # noqa: E402
from vtl.nn import functional as F  # noqa: E402

RNG = np.random.default_rng(5)
FUSED = "ScaledDotProductAttentionBackward"


def _kernel(wgpu):
    assert "attention" in wgpu.kernel_names  # (loads the backend and its kernels)
    kern = wgpu.kernel("attention")
    assert kern is not None
    return kern


def _mask(kind, batch, n_q, n_k):
    """A mask of ``kind`` for batch axes ``batch`` (a tuple of 0-2 sizes): boolean masks are
    ``True`` where a query may attend, float masks additive with some ``-inf``."""
    b1 = batch[0] if batch else 1
    if kind is None:
        return None
    if kind == "ls":
        m = RNG.random((n_q, n_k)) > 0.3
        m[:, 0] = True
    elif kind == "ls_float":
        m = RNG.standard_normal((n_q, n_k)).astype(np.float32)
        m[RNG.random((n_q, n_k)) > 0.7] = -np.inf
        m[:, 1] = 0.5
    elif kind == "padding":
        m = np.ones((b1, 1, 1, n_k), bool)
        m[:, :, :, -3:] = False
    elif kind == "b1_float":
        m = RNG.standard_normal((b1, 1, n_q, n_k)).astype(np.float32)
    elif kind == "full":
        m = RNG.random((*batch, n_q, n_k)) > 0.4
        m[..., 0] = True
    elif kind == "dead":  # rows 1 and n_q - 1 see no key; one more only the last key
        m = np.ones((n_q, n_k), bool)
        m[1, :] = False
        m[-1, :] = False
        m[0, :-1] = False
    else:
        raise AssertionError(kind)
    return m


def _sdpa(device, q, k, v, g, mask, causal):
    """Forward and the three gradients of ``scaled_dot_product_attention`` on ``device``,
    and the name of the output's graph node."""
    ts = [vtl.asarray(a, device=device, requires_grad=True) for a in (q, k, v)]
    m = None if mask is None else vtl.asarray(mask, device=device)
    out = F.scaled_dot_product_attention(*ts, attn_mask=m, is_causal=causal)
    vtl.sum(out * vtl.asarray(g, device=device)).backward()
    return out.grad_fn.name(), [to_numpy(out)] + [to_numpy(t.grad) for t in ts]


# (batch axes, L, S, E, Ev, mask kind, causal)
CASES = [
    ((2, 3), 5, 7, 8, 8, None, False),
    ((1, 2), 70, 40, 16, 16, None, True),     # causal, L > S, two query tiles
    ((2,), 37, 37, 16, 16, None, True),       # causal, L == S, 3-D
    ((1, 2), 20, 70, 8, 8, "ls", False),      # an (L, S) mask; two key tiles
    ((2, 3), 9, 37, 8, 8, "padding", False),  # key padding (B1, 1, 1, S)
    ((2, 1), 6, 11, 8, 8, "b1_float", False),  # a float (B1, 1, L, S) mask
    ((2, 2), 6, 6, 8, 8, "full", False),      # one mask per batch entry and head
    ((1, 1), 5, 4, 8, 8, "dead", False),      # rows with every key masked
    ((3,), 5, 9, 16, 8, "ls_float", False),   # 3-D, a float (L, S) mask with -inf
    ((), 7, 5, 8, 8, "ls", False),            # 2-D
    ((1, 2), 10, 12, 33, 20, None, False),    # head sizes off every tile
    ((1, 1), 66, 67, 64, 64, "padding", False),
    ((1, 1), 65, 65, 64, 64, None, True),
]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[5]}-{'causal' if c[6] else 'full'}-{c[3]}"
                                             f"x{c[4]}-{c[1]}x{c[2]}-{len(c[0]) + 2}d"
                                             for c in CASES])
def test_fused_matches_portable_and_numpy(wgpu, case):
    batch, n_q, n_k, e, ev, kind, causal = case
    q = RNG.standard_normal((*batch, n_q, e)).astype(np.float32)
    k = RNG.standard_normal((*batch, n_k, e)).astype(np.float32)
    v = RNG.standard_normal((*batch, n_k, ev)).astype(np.float32)
    g = RNG.standard_normal((*batch, n_q, ev)).astype(np.float32)
    mask = _mask(kind, batch, n_q, n_k)
    kern = _kernel(wgpu)
    n0 = kern.launches
    name, fused = _sdpa("wgpu", q, k, v, g, mask, causal)
    assert name == FUSED and kern.launches == n0 + 3  # forward 1, backward 2
    with use_kernel("attention", None, "wgpu"):
        name, ref = _sdpa("wgpu", q, k, v, g, mask, causal)
    assert name != FUSED
    add = None if mask is None else (np.where(mask, 0.0, -np.inf) if mask.dtype == bool
                                     else mask.astype(np.float64))
    oracle = np_attention(*(a.astype(np.float64) for a in (q, k, v)), add, causal,
                          1.0 / np.sqrt(e), g.astype(np.float64))
    for what, a, r, o in zip(("out", "dq", "dk", "dv"), fused, ref, oracle, strict=True):
        assert a.shape == r.shape and a.dtype == np.float32, what
        np.testing.assert_allclose(a, r, rtol=2e-5, atol=2e-5, err_msg=what)
        np.testing.assert_allclose(a, o, rtol=1e-4, atol=1e-4, err_msg=what)
    if kind == "dead":  # zeros and zero gradients for the rows that see no key
        for a in fused[:2]:
            assert not np.any(a[..., [1, n_q - 1], :])


def test_largest_head_size_and_more_than_one_tile_each_way(wgpu):
    q, k, v, g = (RNG.standard_normal(s).astype(np.float32)
                  for s in ((1, 3, 128), (1, 70, 128), (1, 70, 128), (1, 3, 128)))
    name, fused = _sdpa("wgpu", q, k, v, g, None, False)
    assert name == FUSED
    oracle = np_attention(*(a.astype(np.float64) for a in (q, k, v)), None, False,
                          1.0 / np.sqrt(128), g.astype(np.float64))
    for a, o in zip(fused, oracle, strict=True):
        np.testing.assert_allclose(a, o, rtol=1e-4, atol=1e-4)


def test_sdpa_on_every_backend_matches_numpy(backend):
    """The same call on each backend (fused on wgpu, portable elsewhere) against NumPy."""
    q, k, v, g = (RNG.standard_normal(s).astype(np.float32)
                  for s in ((2, 2, 6, 8), (2, 2, 9, 8), (2, 2, 9, 8), (2, 2, 6, 8)))
    m = RNG.random((2, 1, 1, 9)) > 0.3
    m[..., 0] = True
    _, got = _sdpa(backend, q, k, v, g, m, False)
    ref = np_attention(q, k, v, np.where(m, 0.0, -np.inf).astype(np.float32), False,
                       np.float32(1.0 / np.sqrt(8)), g)
    for a, r in zip(got, ref, strict=True):
        assert_close(a, r, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_low_precision(wgpu, dt):
    dtype = getattr(vtl, dt)
    if dt == "float16" and "shader-f16" not in wgpu.info()["features"]:
        pytest.skip("the adapter has no shader-f16")
    shapes = ((2, 2, 9, 16), (2, 2, 70, 16), (2, 2, 70, 16), (2, 2, 9, 16))
    arrays = [RNG.standard_normal(s).astype(np.float32) for s in shapes]
    m = RNG.random((9, 70)) > 0.3
    m[:, 0] = True

    def run(device, cast):
        ts = [vtl.asarray(a, device=device) for a in arrays]
        if cast:
            ts = [vtl.astype(t, dtype) for t in ts]
        q, k, v = (t.detach().requires_grad_() for t in ts[:3])
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=vtl.asarray(m, device=device))
        vtl.sum(out * ts[3]).backward()
        return out, [out, q.grad, k.grad, v.grad]

    out, low = run("wgpu", True)
    assert out.grad_fn.name() == FUSED and out.dtype == dtype
    # the reference: float32 attention of the rounded inputs
    rounded = [to_numpy(vtl.astype(vtl.astype(vtl.asarray(a), dtype), vtl.float32))
               for a in arrays]
    arrays[:] = rounded
    _, ref = run("numpy", False)
    for a, r in zip(low, ref, strict=True):
        assert a.dtype == dtype
        np.testing.assert_allclose(to_numpy(vtl.astype(a, vtl.float32)), to_numpy(r),
                                   rtol=3e-2, atol=3e-2)


def test_kernel_strided_masks_lse_and_declines(wgpu):
    """The kernel itself: a broadcast (zero-stride) mask view, the log-sum-exp (+inf for a
    dead row), and what it declines."""
    xp = wgpu.xp
    kern = _kernel(wgpu)
    b1, b2, n_q, n_k, e = 2, 3, 5, 6, 8
    q, k, v = (RNG.standard_normal((b1 * b2, n, e)).astype(np.float32)
               for n in (n_q, n_k, n_k))
    add = np.where(RNG.random((b1, 1, 1, n_k)) > 0.3, 0.0, -np.inf).astype(np.float32)
    add[..., 0] = 1.5
    add[1, ...] = -np.inf  # every row of batch[0] entry 1 sees no key
    mask = xp.broadcast_to(xp.asarray(add), (b1, b2, n_q, n_k))  # zero strides
    dq, dk, dv = (xp.asarray(a) for a in (q, k, v))
    out, lse = kern.forward(dq, dk, dv, mask, False, 0.3, (b1, b2))
    full = np.broadcast_to(add, (b1, b2, n_q, n_k)).reshape(b1 * b2, n_q, n_k)
    s = q @ np.swapaxes(k, -1, -2) * 0.3 + full
    ref_out, *_ = np_attention(q, k, v, full, False, 0.3, np.zeros((b1 * b2, n_q, e)))
    with np.errstate(divide="ignore"):
        mx = s.max(-1, keepdims=True)
        ref_lse = np.where(np.isinf(mx[..., 0]), np.inf,
                           (mx + np.log(np.exp(s - np.where(np.isinf(mx), 0, mx)).sum(
                               -1, keepdims=True)))[..., 0])
    np.testing.assert_allclose(xp.to_numpy(out), ref_out, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(xp.to_numpy(lse), ref_lse, rtol=1e-5, atol=1e-5)
    assert np.isposinf(xp.to_numpy(lse)[b2:]).all()
    grads = kern.backward(dq, dk, dv, out, lse, xp.ones_like(out), mask, False, 0.3, (b1, b2))
    for d in grads:
        assert not np.any(xp.to_numpy(d)[b2:])
    # declines: head sizes above 128, float64, mixed dtypes, a mask of another shape, dropout
    # of p outside (0, 1); the dropout words are drawn only when it takes the call
    calls = []

    def words():
        calls.append(1)
        return (1, 2, 3, 4, 5, 6)

    big = xp.asarray(np.zeros((1, 2, 129), np.float32))
    assert kern.forward(big, big, big, None, False, 1.0, (1, 1), dropout=(0.1, words)) is None
    for p in (0.0, 1.0):
        assert kern.forward(dq, dk, dv, None, False, 0.3, (b1, b2), dropout=(p, words)) is None
    assert not calls
    assert kern.forward(dq, dk, dv, None, False, 0.3, (b1, b2), dropout=(0.1, words))
    assert calls
    assert not kern.supports(np.dtype(np.float64)) and not kern.supports(np.dtype(np.int32))
    assert kern.forward(dq, dk, xp.astype(dv, xp.int32), None, False, 1.0, (b1, b2)) is None
    assert kern.forward(dq, dk, dv, xp.asarray(np.zeros((n_q, n_k + 1), np.float32)), False,
                        1.0, (b1, b2)) is None


def test_declined_arguments_take_the_portable_path(wgpu):
    """float64 (with or without dropout) runs the portable path, which gives the right
    numbers."""
    q = RNG.standard_normal((2, 4, 8))
    ts = [vtl.asarray(q, device="wgpu", requires_grad=True) for _ in range(3)]
    out = F.scaled_dot_product_attention(*ts)  # float64: the kernel does not take it
    assert out.grad_fn.name() != FUSED
    ref = np_attention(q, q, q, None, False, 1.0 / np.sqrt(8), q)[0]
    np.testing.assert_allclose(to_numpy(out), ref, rtol=1e-10)
    out = F.scaled_dot_product_attention(*ts, dropout_p=0.5)
    assert out.grad_fn.name() != FUSED


def test_compiled_step_equals_eager(wgpu):
    """``vtl.compile`` captures the kernel's dispatches and replays them with eager mode's
    numbers (forward and the gradients of the arguments)."""
    m = vtl.asarray(np.tril(np.ones((7, 9), bool)) | (RNG.random((7, 9)) > 0.5),
                    device="wgpu")

    def step(q, k, v, g):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
        vtl.sum(out * g).backward()
        return out

    f = vtl.compile(step)
    for i in range(4):
        arrays = [RNG.standard_normal(s).astype(np.float32)
                  for s in ((2, 7, 16), (2, 9, 16), (2, 9, 16), (2, 7, 16))]
        results = []
        for fn in (f, step):
            ts = [vtl.asarray(a, device="wgpu", requires_grad=j < 3)
                  for j, a in enumerate(arrays)]
            out = fn(*ts)
            results.append([to_numpy(out)] + [to_numpy(t.grad) for t in ts[:3]])
        for a, b in zip(*results, strict=True):
            np.testing.assert_array_equal(a, b)
        if i == 1:
            assert f.captures == 1
    assert f.captures == 1


def test_one_dispatch_forward_two_backward(wgpu):
    from vtl.backends.wgpu._recorder import REC

    q, k, v = (vtl.asarray(RNG.standard_normal((2, 3, 9, 8)).astype(np.float32),
                           device="wgpu", requires_grad=True) for _ in range(3))
    g = vtl.asarray(RNG.standard_normal((2, 3, 9, 8)).astype(np.float32), device="wgpu")
    F.scaled_dot_product_attention(q, k, v, is_causal=True)  # compiles the pipelines
    n0 = REC.dispatches
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert REC.dispatches - n0 == 1
    kern = _kernel(wgpu)
    n0 = kern.launches
    out.backward(g)
    assert kern.launches - n0 == 2


def test_second_order_gradients_through_the_portable_path(wgpu):
    q, k, v = (RNG.standard_normal((2, 5, 8)).astype(np.float32) for _ in range(3))

    def hvp(device):
        ts = [vtl.asarray(a, device=device, requires_grad=True) for a in (q, k, v)]
        out = F.scaled_dot_product_attention(*ts, is_causal=True)
        assert (out.grad_fn.name() == FUSED) == (device == "wgpu")
        (gq,) = vtl.autograd.grad(vtl.sum(out ** 2), [ts[0]], create_graph=True)
        (hq,) = vtl.autograd.grad(vtl.sum(gq * gq), [ts[0]])
        return to_numpy(gq), to_numpy(hq)

    for a, r in zip(hvp("wgpu"), hvp("numpy"), strict=True):
        np.testing.assert_allclose(a, r, rtol=1e-4, atol=1e-5)


# -- dropout --------------------------------------------------------------------------------

def _sdpa_drop(q, k, v, g, mask, causal, p, seed, dtype=None):
    """Forward and gradients of attention with dropout on wgpu from generator seed ``seed``
    (``dtype``: the operands cast to it), the output's graph node and the generator's state
    after."""
    vtl.random.seed(seed)
    ts = [vtl.asarray(a, device="wgpu") for a in (q, k, v)]
    if dtype is not None:
        ts = [vtl.astype(t, dtype) for t in ts]
    ts = [t.detach().requires_grad_() for t in ts]
    m = None if mask is None else vtl.asarray(mask, device="wgpu")
    out = F.scaled_dot_product_attention(*ts, attn_mask=m, is_causal=causal, dropout_p=p)
    gt = vtl.asarray(g, device="wgpu")
    vtl.sum(out * (gt if dtype is None else vtl.astype(gt, dtype))).backward()
    res = [to_numpy(vtl.astype(t, vtl.float32)) for t in (out, *(t.grad for t in ts))]
    return out.grad_fn.name(), res, vtl.random.default_generator().get_state()


def _drop_factors(shape, p, seed):
    """The dropout factors the portable path draws for weights of ``shape`` from ``seed``
    (dropout of ones on the numpy backend: the same Philox words)."""
    vtl.random.seed(seed)
    return to_numpy(F.dropout(vtl.ones(shape, dtype=vtl.float32), p, True))


# (batch axes, L, S, E, mask kind, causal, p): S off the Philox blocks of four (weights of a
# thread's four keys in two blocks), two key / query tiles, masks, dead rows
DROP_CASES = [
    ((2, 2), 37, 70, 8, None, False, 0.3),
    ((2,), 33, 33, 8, None, True, 0.5),
    ((3,), 20, 9, 8, "ls_float", False, 0.1),
    ((1, 2), 70, 20, 8, "padding", False, 0.8),
    ((1, 1), 5, 4, 8, "dead", False, 0.25),
]


@pytest.mark.parametrize("case", DROP_CASES, ids=[f"{c[4]}-{'causal' if c[5] else 'full'}-"
                                                  f"{c[1]}x{c[2]}-p{c[6]}" for c in DROP_CASES])
def test_dropout_matches_portable_and_numpy(wgpu, case):
    batch, n_q, n_k, e, kind, causal, p = case
    q, k, v = (RNG.standard_normal((*batch, n, e)).astype(np.float32)
               for n in (n_q, n_k, n_k))
    g = RNG.standard_normal((*batch, n_q, e)).astype(np.float32)
    mask = _mask(kind, batch, n_q, n_k)
    kern = _kernel(wgpu)
    n0 = kern.launches
    name, fused, state = _sdpa_drop(q, k, v, g, mask, causal, p, 11)
    assert name == FUSED and kern.launches == n0 + 3
    with use_kernel("attention", None, "wgpu"):
        name, ref, ref_state = _sdpa_drop(q, k, v, g, mask, causal, p, 11)
    assert name != FUSED
    assert state == ref_state  # the generator advanced as the portable draw advances it
    z = _drop_factors((*batch, n_q, n_k), p, 11)
    assert 0 < np.count_nonzero(z) < z.size
    add = None if mask is None else (np.where(mask, 0.0, -np.inf) if mask.dtype == bool
                                     else mask.astype(np.float64))
    oracle = np_attention(*(a.astype(np.float64) for a in (q, k, v)), add, causal,
                          1.0 / np.sqrt(e), g.astype(np.float64), z=z.astype(np.float64))
    for what, a, r, o in zip(("out", "dq", "dk", "dv"), fused, ref, oracle, strict=True):
        np.testing.assert_allclose(a, r, rtol=5e-5, atol=5e-5, err_msg=what)
        np.testing.assert_allclose(a, o, rtol=2e-4, atol=2e-4, err_msg=what)
    # another draw (the generator moved on) drops other weights
    _, again, _ = _sdpa_drop(q, k, v, g, mask, causal, p, 12)
    assert not np.allclose(again[0], fused[0])


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_dropout_low_precision(wgpu, dt):
    """16-bit operands: the kernel's dropout (float32 arithmetic) against the portable path
    at the same dtype, within its per-op rounding."""
    dtype = getattr(vtl, dt)
    if dt == "float16" and "shader-f16" not in wgpu.info()["features"]:
        pytest.skip("the adapter has no shader-f16")
    q, k, v = (RNG.standard_normal((2, 2, n, 8)).astype(np.float32) for n in (9, 70, 70))
    g = RNG.standard_normal((2, 2, 9, 8)).astype(np.float32)
    name, fused, state = _sdpa_drop(q, k, v, g, None, False, 0.2, 5, dtype)
    assert name == FUSED
    with use_kernel("attention", None, "wgpu"):
        name, ref, ref_state = _sdpa_drop(q, k, v, g, None, False, 0.2, 5, dtype)
    assert name != FUSED and state == ref_state
    for a, r in zip(fused, ref, strict=True):
        np.testing.assert_allclose(a, r, rtol=3e-2, atol=3e-2)


def test_dropout_compiled_replays_equal_eager(wgpu):
    """Under ``vtl.compile`` each replay draws fresh bits (the generator's next words, as
    eager mode draws them): outputs and gradients equal to eager steps from the same
    state, different from step to step."""
    m = vtl.asarray(RNG.random((7, 9)) > 0.2, device="wgpu")
    arrays = [RNG.standard_normal(s).astype(np.float32)
              for s in ((2, 7, 8), (2, 9, 8), (2, 9, 8), (2, 7, 8))]

    def step(q, k, v, g):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=m, dropout_p=0.3)
        vtl.sum(out * g).backward()
        return out

    kern = _kernel(wgpu)
    f = vtl.compile(step)
    runs = {}
    for fn in (f, step):
        vtl.random.seed(21)
        runs[fn] = []
        n0 = kern.launches
        for _ in range(4):
            ts = [vtl.asarray(a, device="wgpu", requires_grad=j < 3)
                  for j, a in enumerate(arrays)]
            out = fn(*ts)
            runs[fn].append([to_numpy(out)] + [to_numpy(t.grad) for t in ts[:3]])
        runs[fn].append(vtl.random.default_generator().get_state())
        launched = kern.launches - n0  # eager: 3 a step; compiled: replays launch none
        assert launched == 12 if fn is step else 0 < launched < 12
    assert f.captures == 1
    assert_replays_draw_like_eager(runs[f], runs[step])
