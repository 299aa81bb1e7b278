"""The wgpu backend's fused optimizer step (``multi_tensor_apply``): 20 fused steps agree
with the portable per-parameter rules, one dispatch per group of contiguous parameter tensors
(one per tensor with ``GROUP_MAX = 1``), pipelines compiled once per (program, dtype),
strided/offset views and mixed dtypes handled by copies, one dispatch each."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
wx = pytest.importorskip("vtl.backends.wgpu")
if not wx.is_available():
    pytest.skip("no WebGPU adapter", allow_module_level=True)

import vtl  # noqa: E402
from vtl import optim  # noqa: E402
from vtl.backends.wgpu import _kernels  # noqa: E402
from vtl.backends.wgpu._recorder import REC  # noqa: E402
from vtl.optim import _programs  # noqa: E402

SHAPES = [(3, 4), (5,), (), (0, 2)]
STEPS = 20


def _grad(p: np.ndarray, k: int) -> np.ndarray:
    return 2.0 * (p - 0.5) + 0.3 * np.cos(3.0 * p + k)


def _run(cls, kwargs, dtype=np.float32, steps=STEPS):
    rng = np.random.default_rng(0)
    init = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    ps = [vtl.asarray(a, backend="wgpu", requires_grad=True) for a in init]
    opt = cls(ps, **kwargs)
    for k in range(steps):
        opt.zero_grad()
        for p in ps:
            p.grad = vtl.asarray(_grad(p.numpy().astype(np.float64), k).astype(dtype),
                                 backend="wgpu")
        opt.step()
    return [p.numpy() for p in ps], init, opt


CASES = [
    (optim.SGD, {"lr": 0.05}),
    (optim.SGD, {"lr": 0.05, "momentum": 0.9, "dampening": 0.3}),
    (optim.SGD, {"lr": 0.05, "momentum": 0.8, "nesterov": True, "weight_decay": 0.1}),
    (optim.SGD, {"lr": 0.05, "momentum": 0.5, "weight_decay": 0.1, "maximize": True}),
    (optim.Adam, {"lr": 0.05, "betas": (0.8, 0.9), "eps": 1e-6}),
    (optim.Adam, {"lr": 0.02, "weight_decay": 0.1, "amsgrad": True, "maximize": True}),
    (optim.AdamW, {"lr": 0.05, "weight_decay": 0.3, "amsgrad": True}),
    (optim.RMSprop, {"lr": 0.01, "alpha": 0.9}),
    (optim.RMSprop, {"lr": 0.01, "momentum": 0.5, "centered": True, "weight_decay": 0.1,
                     "maximize": True}),
    (optim.Adagrad, {"lr": 0.1, "lr_decay": 0.05, "initial_accumulator_value": 0.5,
                     "weight_decay": 0.1, "eps": 1e-6}),
]
IDS = [f"{c.__name__}-{'-'.join(f'{k}={v}' for k, v in kw.items())}" for c, kw in CASES]


@pytest.mark.parametrize("grouped", [True, False])
@pytest.mark.parametrize(("cls", "kwargs"), CASES, ids=IDS)
def test_fused_matches_portable_and_dispatches_per_group(wgpu, monkeypatch, cls, kwargs,
                                                         grouped):
    from vtl.backends.wgpu import optim as woptim

    if not grouped:
        monkeypatch.setattr(woptim, "GROUP_MAX", 1)
    kern = wgpu.kernel("multi_tensor_apply")
    assert kern is not None and kern.supports(np.float32)
    launches, dispatches = kern.launches, REC.dispatches
    fused, init, _ = _run(cls, {**kwargs, "foreach": None})
    nonempty = sum(1 for s in SHAPES if np.prod(s, dtype=int) > 0)
    per_step = (kern.launches - launches) / STEPS
    if grouped:  # every program here fits at least two tensors in one dispatch
        assert per_step == 1
    else:
        assert per_step == nonempty
    assert REC.dispatches - dispatches >= STEPS * per_step
    launches = kern.launches
    portable, _, _ = _run(cls, {**kwargs, "foreach": False})
    assert kern.launches == launches  # foreach=False never reaches the kernel
    for f, p, a0 in zip(fused, portable, init, strict=True):
        assert f.dtype == np.float32 and f.shape == a0.shape
        np.testing.assert_allclose(f, p, rtol=1e-5, atol=1e-6)
    assert not np.allclose(fused[0], init[0])  # the parameters moved


def test_one_dispatch_per_group_and_pipeline_compiled_once(wgpu):
    kern = wgpu.kernel("multi_tensor_apply")
    rng = np.random.default_rng(1)
    shapes = [(64,), (7, 3), (2, 2, 2), (300,), (5,), (1,), (2, 70)]
    ps = [vtl.asarray(rng.standard_normal(s).astype(np.float32), backend="wgpu",
                      requires_grad=True) for s in shapes]
    for p in ps:
        p.grad = vtl.ones_like(p)
    opt = optim.Adam(ps, lr=0.01, amsgrad=True)
    opt.step()  # state initialisation and the first compile
    prog = _programs.adam(amsgrad=True, weight_decay=False, decoupled=False, maximize=False)
    slots = kern.slots(prog, np.dtype(np.float32), bare=True)
    assert slots >= 2
    compiled = {k: v[0] for k, v in _kernels.compile_stats.items() if k.startswith("fused")}
    before, launches = REC.dispatches, kern.launches
    opt.step()
    groups = -(-len(ps) // slots)
    assert REC.dispatches - before == groups  # the whole step: one dispatch per group
    assert kern.launches - launches == groups
    opt.step()
    assert {k: v[0] for k, v in _kernels.compile_stats.items()
            if k.startswith("fused")} == compiled


def test_group_with_tensors_that_need_copies(wgpu):
    """Contiguous tensors go in groups, a transposed one alone (through a copy): the
    values are the portable program's either way."""
    kern = wgpu.kernel("multi_tensor_apply")
    xp = wgpu.xp
    prog = _programs.adam(amsgrad=False, weight_decay=True, decoupled=True, maximize=False)
    scalars = (0.1, 0.1, 0.999, 0.001, 0.99, 1e-8, 0.01)[:len(prog.scalars)]
    rng = np.random.default_rng(3)
    shapes = [(6, 5), (300,), (3,), (1,), (2, 2), (257,)]
    host = [[rng.uniform(0.1, 1.0, s).astype(np.float32) for _ in prog.arrays]
            for s in shapes]
    dev = [[xp.asarray(h) for h in hs] for hs in host]
    dev[0][0] = xp.asarray(host[0][0].T.copy()).mT  # a transposed parameter
    before = kern.launches
    kern(prog, [tuple(d) for d in dev], scalars)
    slots = kern.slots(prog, np.dtype(np.float32), bare=True)
    assert kern.launches - before == 1 + -(-(len(shapes) - 1) // slots)
    for got, want in zip(dev, (_np_apply(prog, h, scalars) for h in host), strict=True):
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(xp.to_numpy(g), w, rtol=1e-6, atol=1e-7)


def test_groups_without_offset_words(wgpu):
    """Tensors whose arrays all start their buffers (parameters, gradients and states as
    made) go in groups without offset words, more to a dispatch than tensors with an
    offset array (a contiguous slice): each kind in its own groups, the portable
    program's values either way."""
    kern = wgpu.kernel("multi_tensor_apply")
    xp = wgpu.xp
    prog = _programs.adam(amsgrad=False, weight_decay=False, decoupled=False, maximize=False)
    scalars = (0.1, 0.9, 0.999, 0.1, 0.001, 1e-8)[:len(prog.scalars)]
    f32 = np.dtype(np.float32)
    bare_slots, offset_slots = kern.slots(prog, f32, bare=True), kern.slots(prog, f32)
    assert bare_slots > offset_slots >= 2
    rng = np.random.default_rng(4)
    n_bare, n_offset = bare_slots + 1, offset_slots + 1
    sizes = [int(rng.integers(1, 600)) for _ in range(n_bare + n_offset)]
    host = [[rng.uniform(0.1, 1.0, n).astype(np.float32) for _ in prog.arrays] for n in sizes]
    dev = []
    for k, hs in enumerate(host):
        if k < n_bare:
            dev.append([xp.asarray(h) for h in hs])
        else:  # the first array a slice at an offset of a larger buffer
            big = np.concatenate([np.zeros(7, np.float32), hs[0]])
            dev.append([xp.asarray(big)[7:], *(xp.asarray(h) for h in hs[1:])])
    assert dev[-1][0]._offset == 7 and dev[0][0]._offset == 0
    before = kern.launches
    kern(prog, [tuple(d) for d in dev], scalars)
    # n + 1 tensors of each kind: a full group and one alone
    assert kern.launches - before == 4
    for got, want in zip(dev, (_np_apply(prog, h, scalars) for h in host), strict=True):
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(xp.to_numpy(g), w, rtol=1e-6, atol=1e-7)


def _np_apply(prog, arrs, scalars):
    out = [a.copy() for a in arrs]
    for name, val in zip(prog.writes, prog.evaluate(np, out, scalars), strict=True):
        out[prog.arrays.index(name)][...] = val
    return out


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_kernel_on_strided_offset_and_mixed_dtype_views(wgpu, dtype):
    kern = wgpu.kernel("multi_tensor_apply")
    if not kern.supports(np.dtype(dtype)):
        pytest.skip(f"adapter lacks {dtype}")
    xp = wgpu.xp
    prog = _programs.adam(amsgrad=True, weight_decay=True, decoupled=False, maximize=True)
    scalars = (0.1, 0.1, 0.999, 0.001, 0.99, 1e-8, 0.01)
    rng = np.random.default_rng(2)
    host = [rng.uniform(0.1, 1.0, (6, 5)).astype(dtype) for _ in prog.arrays]
    host2 = [rng.uniform(0.1, 1.0, (4,)).astype(dtype) for _ in prog.arrays]
    dev = [xp.asarray(h) for h in host]
    big = xp.asarray(np.zeros((3, 4), dtype))
    dev2 = [xp.asarray(h) for h in host2]
    # a transposed parameter, an offset view of a state, a gradient of another dtype
    dev[0] = xp.asarray(host[0].T.copy()).mT
    big[1, :] = dev2[2]
    dev2[2] = big[1, :]
    other = "float64" if dtype == "float32" else "float32"
    dev2[1] = xp.asarray(host2[1].astype(other))
    host2[1] = host2[1].astype(other).astype(dtype)
    kern(prog, [tuple(dev), tuple(dev2), tuple(xp.zeros((0,), dtype=dtype)
                                               for _ in prog.arrays)], scalars)
    tol = {"rtol": 1e-5, "atol": 1e-6} if dtype == "float32" else {"rtol": 1e-12, "atol": 0}
    for got, want in ((dev, _np_apply(prog, host, scalars)),
                      (dev2, _np_apply(prog, host2, scalars))):
        for name in prog.arrays:
            i = prog.arrays.index(name)
            np.testing.assert_allclose(xp.to_numpy(got[i]), want[i], **tol)
    assert np.all(xp.to_numpy(big)[[0, 2]] == 0)  # the rest of the offset view's buffer


def test_float64_fused_matches_portable(wgpu):
    kern = wgpu.kernel("multi_tensor_apply")
    if not kern.supports(np.float64):
        pytest.skip("adapter lacks float64")
    launches = kern.launches
    kw = {"lr": 0.05, "momentum": 0.5, "centered": True, "weight_decay": 0.1}
    a, _, _ = _run(optim.RMSprop, kw, np.float64, steps=5)
    assert kern.launches > launches
    b, _, _ = _run(optim.RMSprop, {**kw, "foreach": False}, np.float64, steps=5)
    for x, y in zip(a, b, strict=True):
        assert x.dtype == np.float64
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-14)


def test_source_names_are_prefixed_and_bindings_follow_writes():
    from vtl.backends.wgpu.optim import wgsl_source

    prog = _programs.adagrad(weight_decay=True, maximize=False)
    sig, decls, body = wgsl_source(prog, np.float32)
    assert sig == "wrw"  # p and s written, g read-only
    assert "var<storage, read> b_g" in decls and "var<storage, read_write> b_s" in decls
    assert "v_std = sqrt(v_s) + v_eps;" in body
