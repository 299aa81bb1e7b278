"""float16 and bfloat16: the dtypes, promotion, casts, elementwise/reduction/product ops,
autograd, nn.functional, optimizers, checkpoints and random draws, on every backend.

Oracles are NumPy (float16) and ml_dtypes (bfloat16): the op computed in float32 or
float64 on the rounded inputs, then rounded to the low dtype; tolerances are multiples of
the dtype's epsilon (float16: 2**-10, bfloat16: 2**-7).
"""

from __future__ import annotations

import json
import struct
import threading
import zlib

import ml_dtypes
import numpy as np
import pytest
from helpers import supported_dtypes, to_numpy

import vtl
import vtl.nn.functional as F
from vtl import nn, optim

LOW = ["float16", "bfloat16"]
EPS = {"float16": 2.0**-10, "bfloat16": 2.0**-7}
NP = {"float16": np.dtype(np.float16), "bfloat16": np.dtype(ml_dtypes.bfloat16)}
RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def _own_data(request):
    """Each test draws from a generator seeded by its own id: the same data whichever tests
    ran before it in the process (several workers share the tests out differently)."""
    global RNG
    RNG = np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def _need(backend: str, name: str) -> None:
    if name not in supported_dtypes(backend):
        pytest.skip(f"{backend} has no {name}")


def _t(a: np.ndarray, name: str, requires_grad: bool = False) -> vtl.Tensor:
    return vtl.asarray(np.asarray(a, np.float32).astype(NP[name]), requires_grad=requires_grad)


def _f32(t: vtl.Tensor) -> np.ndarray:
    return to_numpy(t).astype(np.float32)


def _round(a: np.ndarray, name: str) -> np.ndarray:
    """``a`` rounded to the low dtype, back as float32 (the oracle of a low result)."""
    return np.asarray(a, np.float32).astype(NP[name]).astype(np.float32)


def _close(t: vtl.Tensor, want: np.ndarray, name: str, ulps: float = 2.0,
           atol: float = 0.0) -> None:
    assert t.dtype == getattr(vtl, name), f"dtype {t.dtype} != {name}"
    np.testing.assert_allclose(_f32(t), want, rtol=ulps * EPS[name], atol=atol)


# -- the dtypes --------------------------------------------------------------------------
@pytest.mark.parametrize("name", LOW)
def test_dtype_objects_and_kinds(name):
    dt = getattr(vtl, name)
    assert dt == NP[name] and vtl.isdtype(dt, "real floating") and vtl.isdtype(dt, "numeric")
    assert not vtl.isdtype(dt, "integral") and vtl.isdtype(dt, ("bool", "real floating"))
    fi = vtl.finfo(dt)
    assert fi.bits == 16 and fi.eps == EPS[name] and fi.dtype == dt
    assert vtl.result_type(dt, 1.0) == dt and vtl.result_type(dt, 1) == dt
    assert vtl.result_type(dt, vtl.float32) == vtl.float32
    assert vtl.result_type(dt, vtl.float64) == vtl.float64
    assert vtl.can_cast(dt, vtl.float32) and not vtl.can_cast(vtl.float32, dt)
    assert vtl.astype(vtl.ones(2), name).dtype == dt  # by name too


def test_float16_with_bfloat16_promotes_to_float32():
    assert vtl.result_type(vtl.float16, vtl.bfloat16) == vtl.float32
    a, b = vtl.ones(3, dtype=vtl.float16), vtl.ones(3, dtype=vtl.bfloat16)
    assert (a + b).dtype == vtl.float32 and (a * b).dtype == vtl.float32


def test_info_lists_the_low_dtypes(backend):
    dts = vtl.__array_namespace_info__().dtypes(kind="real floating")
    assert "bfloat16" in dts and "float32" in dts
    if backend == "wgpu":
        from vtl.backends.wgpu import _runtime

        assert ("float16" in dts) == ("shader-f16" in _runtime.get().features)
    else:
        assert "float16" in dts


@pytest.mark.parametrize("name", LOW)
def test_promotion_on_tensors(backend, name):
    _need(backend, name)
    x = _t([1.5, -2.25, 3.0], name)
    assert (x * 2.0).dtype == x.dtype and (x + 1).dtype == x.dtype and (2.0 - x).dtype == x.dtype
    assert (x + vtl.ones(3)).dtype == vtl.float32
    assert vtl.where(x > 0, x, 0.0).dtype == x.dtype
    assert vtl.where(x > 0, 1.0, x).dtype == x.dtype
    _close(x * 2.0, [3.0, -4.5, 6.0], name, ulps=0)


@pytest.mark.filterwarnings("ignore:overflow encountered in cast")
@pytest.mark.parametrize("name", LOW)
def test_casts_round_to_nearest_even(backend, name):
    _need(backend, name)
    a = np.concatenate([RNG.standard_normal(200).astype(np.float32) * 100,
                        np.float32([0.0, -0.0, np.inf, -np.inf, 65519.0, 1e-8, 3.0e38])])
    t = vtl.asarray(a)
    low = vtl.astype(t, name)
    want = a.astype(NP[name])
    got = to_numpy(low)
    assert got.dtype == NP[name]
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))
    back = vtl.astype(low, vtl.float32)
    np.testing.assert_array_equal(to_numpy(back), want.astype(np.float32))
    n = vtl.astype(vtl.asarray(np.float32([np.nan])), name)
    assert np.isnan(_f32(n)).all()


@pytest.mark.parametrize("name", LOW)
def test_tensor_and_module_casts(backend, name):
    _need(backend, name)
    t = vtl.ones((2,))
    method = "half" if name == "float16" else "bfloat16"
    low = getattr(t, method)()
    assert low.dtype == getattr(vtl, name) and low.float().dtype == vtl.float32
    assert getattr(low, method)() is low
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    getattr(m, method)()
    assert {p.dtype for p in m.parameters()} == {getattr(vtl, name)}
    assert m[1].running_mean.dtype == getattr(vtl, name)
    assert m[1].num_batches_tracked.dtype == vtl.int64  # integers stay
    m.to(dtype=vtl.float32)
    assert {p.dtype for p in m.parameters()} == {vtl.float32}
    m.to(name)
    assert {p.dtype for p in m.parameters()} == {getattr(vtl, name)}


# -- ops ----------------------------------------------------------------------------------
UNARY = {
    "exp": (np.exp, lambda a: a), "log": (np.log, np.abs), "tanh": (np.tanh, lambda a: a),
    "sqrt": (np.sqrt, np.abs), "sin": (np.sin, lambda a: a), "abs": (np.abs, lambda a: a),
    "negative": (np.negative, lambda a: a), "floor": (np.floor, lambda a: a * 4),
}


@pytest.mark.parametrize("name", LOW)
@pytest.mark.parametrize("op", list(UNARY))
def test_unary_ops(backend, name, op):
    _need(backend, name)
    fn, dom = UNARY[op]
    a = _round(dom(RNG.standard_normal(64).astype(np.float32)) + (1e-2 if op == "log" else 0),
               name)
    want = _round(fn(a.astype(np.float64)), name)
    _close(getattr(vtl, op)(_t(a, name)), want, name, ulps=2.0)


@pytest.mark.parametrize("op", ["tanh", "exp", "sinh", "log1p", "expm1"])
def test_float16_functions_of_large_and_small_arguments(backend, op):
    """Arguments where a float16 intermediate would overflow (tanh's exponential past
    |x| = 5.5) or lose its digits (near 0): each result is the float32 one rounded once,
    contiguous (one fused kernel on wgpu) and strided alike."""
    _need(backend, "float16")
    a = np.array([-12.0, -6.0, -5.5, -1e-3, -3e-5, 0.0, 3e-5, 1e-3, 0.7, 5.5, 6.0, 9.5,
                  11.0, 12.0], np.float16)
    if op == "log1p":
        a = np.abs(a)
    with np.errstate(over="ignore"):
        want = _round(getattr(np, op)(a.astype(np.float64)), "float16")
    x = vtl.asarray(np.repeat(a, 2))
    for t in (vtl.asarray(a), x[::2]):
        got = _f32(getattr(vtl, op)(t))
        np.testing.assert_allclose(got, want, rtol=EPS["float16"], atol=0)


@pytest.mark.parametrize("name", LOW)
@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "divide", "maximum"])
def test_binary_ops_are_rounded_float32_results(backend, name, op):
    _need(backend, name)
    a = _round(RNG.standard_normal((4, 8)), name)
    b = _round(RNG.standard_normal((8,)) + 3.0, name)
    want = _round(getattr(np, op)(a, b), name)  # one rounding of the exact float32 result
    got = getattr(vtl, op)(_t(a, name), _t(b, name))
    assert got.dtype == getattr(vtl, name)
    if op == "divide" and backend == "wgpu" and name == "float16":
        # WGSL's f16 division may be 2.5 ULP off (GPUs divide through a reciprocal)
        np.testing.assert_allclose(_f32(got), want, rtol=3 * EPS[name], atol=0)
    else:
        np.testing.assert_array_equal(_f32(got), want)


@pytest.mark.parametrize("name", LOW)
def test_reductions_accumulate_in_float32(backend, name):
    _need(backend, name)
    a = _round(RNG.uniform(0.5, 1.5, (40, 50)), name)
    x = _t(a, name)
    exact = a.astype(np.float64)
    # a sum in the low dtype would be off by far more than one rounding of the result
    _close(vtl.sum(x), _round(exact.sum(), name), name, ulps=1.0)
    _close(vtl.sum(x, axis=1), _round(exact.sum(axis=1), name), name, ulps=1.0)
    _close(vtl.mean(x, axis=0), _round(exact.mean(axis=0), name), name, ulps=2.0)
    _close(vtl.max(x), _round(exact.max(), name), name, ulps=0)
    _close(vtl.var(x), _round(exact.var(), name), name, ulps=2.0)


@pytest.mark.parametrize("name", LOW)
def test_matmul_accumulates_in_float32(backend, name):
    _need(backend, name)
    a = _round(RNG.uniform(0, 1, (9, 300)), name)
    b = _round(RNG.uniform(0, 1, (300, 5)), name)
    want = _round(a.astype(np.float64) @ b.astype(np.float64), name)
    _close(_t(a, name) @ _t(b, name), want, name, ulps=1.0)
    _close(vtl.matmul(_t(a[None], name), _t(b, name)), want[None], name, ulps=1.0)
    _close(vtl.tensordot(_t(a, name), _t(b, name), axes=1), want, name, ulps=1.0)


@pytest.mark.parametrize("name", LOW)
def test_gradients_have_the_parameters_dtype(backend, name):
    _need(backend, name)
    a = _round(RNG.standard_normal((5, 4)), name)
    w = _round(RNG.standard_normal((4, 3)), name)
    x, wl = _t(a, name), _t(w, name, requires_grad=True)
    vtl.sum(vtl.tanh(x @ wl) * 0.5).backward()
    assert wl.grad.dtype == getattr(vtl, name)
    w32 = vtl.asarray(w, requires_grad=True)
    vtl.sum(vtl.tanh(vtl.asarray(a) @ w32) * 0.5).backward()
    np.testing.assert_allclose(_f32(wl.grad), to_numpy(w32.grad), rtol=8 * EPS[name],
                               atol=8 * EPS[name])


@pytest.mark.parametrize("name", LOW)
def test_nn_functional_ops(backend, name):
    _need(backend, name)
    a = _round(RNG.standard_normal((6, 10)), name)
    x, x32 = _t(a, name), vtl.asarray(a)
    y = vtl.asarray(np.arange(6) % 10)
    tol = 8 * EPS[name]
    for fn in (lambda t: F.softmax(t, dim=1), lambda t: F.log_softmax(t, dim=1), F.gelu,
               F.silu, F.sigmoid, F.relu, lambda t: F.layer_norm(t, (10,)),
               lambda t: F.cross_entropy(t, y), lambda t: F.mse_loss(t, t * 0.5),
               lambda t: F.dropout(t, 0.0)):
        got, want = fn(x), fn(x32)
        assert got.dtype == x.dtype
        np.testing.assert_allclose(_f32(got), to_numpy(want), rtol=tol, atol=tol)
    img = _round(RNG.standard_normal((2, 3, 6, 6)), name)
    w = _round(RNG.standard_normal((4, 3, 3, 3)) * 0.2, name)
    got = F.conv2d(_t(img, name), _t(w, name), padding=1)
    want = F.conv2d(vtl.asarray(img), vtl.asarray(w), padding=1)
    assert got.dtype == x.dtype
    np.testing.assert_allclose(_f32(got), to_numpy(want), rtol=tol, atol=4 * tol)


@pytest.mark.parametrize("name", LOW)
def test_a_small_model_trains(backend, name):
    _need(backend, name)
    vtl.random.seed(0)
    m = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
    m.to(name)
    opt = optim.Adam(m.parameters(), lr=0.05)
    xs = RNG.standard_normal((48, 4)).astype(np.float32)
    ys = (xs[:, 0] > 0).astype(np.int64) + (xs[:, 1] > 0)
    x, y = _t(xs, name), vtl.asarray(ys)
    losses = []
    for _ in range(30):
        loss = F.cross_entropy(m(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert losses[-1] < 0.5 * losses[0]
    st = opt.state[m[0].weight]
    assert st["exp_avg"].dtype == vtl.float32 and st["exp_avg_sq"].dtype == vtl.float32
    assert m[0].weight.dtype == getattr(vtl, name)


@pytest.mark.parametrize("name", LOW)
@pytest.mark.parametrize("opt_cls", [optim.SGD, optim.Adam, optim.AdamW, optim.RMSprop,
                                     optim.Adagrad])
def test_optimizers_step_in_float32_and_round(backend, name, opt_cls):
    _need(backend, name)
    w0 = _round([0.5, -1.25, 2.0, 3.5], name)
    kw = {"lr": 0.1, "momentum": 0.9} if opt_cls is optim.SGD else {"lr": 0.01}
    p = nn.Parameter(_t(w0, name))
    q = nn.Parameter(vtl.asarray(w0))  # the float32 oracle, rounded after each step
    o1, o2 = opt_cls([p], **kw), opt_cls([q], **kw)
    for _ in range(3):
        for par, o in ((p, o1), (q, o2)):
            o.zero_grad()
            vtl.sum(par * par * 1e-3).backward()  # small gradients: eps must not underflow
            o.step()
        with vtl.no_grad():
            q[...] = vtl.astype(vtl.astype(q, name), vtl.float32)
    np.testing.assert_array_equal(_f32(p), to_numpy(q))
    sd = o1.state_dict()
    o3 = opt_cls([p], **kw)
    o3.load_state_dict(sd)
    assert all(v.dtype == vtl.float32 for v in o3.state[p].values()
               if isinstance(v, vtl.Tensor))


# -- checkpoints ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", LOW)
def test_safetensors_keep_f16_and_bf16(backend, name, tmp_path):
    _need(backend, name)
    a = _round(RNG.standard_normal((3, 5)), name)
    path = tmp_path / "t.safetensors"
    vtl.save({"w": _t(a, name), "b": vtl.ones(2)}, path)
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    assert header["w"]["dtype"] == {"float16": "F16", "bfloat16": "BF16"}[name]
    for dev in ("numpy", backend):
        out = vtl.load(path, device=vtl.Device(dev, 0))
        assert out["w"].dtype == getattr(vtl, name) and out["w"].device.type == dev
        np.testing.assert_array_equal(_f32(out["w"]), a)
    m = nn.Linear(5, 3)
    getattr(m, "half" if name == "float16" else "bfloat16")()
    vtl.save(m.state_dict(), path)
    m2 = nn.Linear(5, 3).to(name)
    m2.load_state_dict(vtl.load(path))
    np.testing.assert_array_equal(_f32(m2.weight), _f32(m.weight))


# -- random --------------------------------------------------------------------------------
@pytest.mark.parametrize("name", LOW)
def test_random_draws(backend, name):
    _need(backend, name)
    dt = getattr(vtl, name)
    u = vtl.random.Generator(3).random(4000, dtype=dt)
    assert u.dtype == dt
    uf = _f32(u)
    assert uf.min() >= 0.0 and uf.max() < 1.0 and abs(uf.mean() - 0.5) < 0.03
    z = vtl.random.Generator(3).normal(1.0, 2.0, size=4000, dtype=dt)
    z32 = vtl.random.Generator(3).normal(1.0, 2.0, size=4000)
    # drawn in float32, rounded once
    np.testing.assert_array_equal(_f32(z), _round(to_numpy(z32), name))
    assert vtl.random.Generator(3).uniform(-1, 1, size=5, dtype=dt).dtype == dt
    w = nn.Linear(8, 4).to(name).weight
    nn.init.kaiming_uniform_(w)
    assert w.dtype == dt and np.abs(_f32(w)).max() <= 1.0


# -- wgpu without shader-f16 ---------------------------------------------------------------
def test_wgpu_without_shader_f16_refuses_float16(monkeypatch):
    b = vtl.backends.get("wgpu")
    if not b.is_available:
        pytest.skip("wgpu unavailable")
    from vtl.backends.wgpu import _runtime

    rt = _runtime.get()
    monkeypatch.setattr(rt, "features", frozenset(rt.features - {"shader-f16"}))
    dev = vtl.Device("wgpu", 0)
    assert "float16" not in vtl.__array_namespace_info__().dtypes(device=dev)
    assert "bfloat16" in vtl.__array_namespace_info__().dtypes(device=dev)
    t = vtl.ones(3, device=dev)
    with pytest.raises(TypeError, match="shader-f16"):
        vtl.astype(t, vtl.float16)
    with pytest.raises(TypeError, match="shader-f16"):
        t.half()
    with pytest.raises(TypeError, match="shader-f16"):
        vtl.zeros(2, dtype=vtl.float16, device=dev)
    with pytest.raises(TypeError, match="shader-f16"):
        vtl.asarray(np.ones(2, np.float16), device=dev)
    with pytest.raises(TypeError, match="shader-f16"):
        with vtl.autocast("wgpu", dtype=vtl.float16):
            pass
    assert vtl.astype(t, vtl.bfloat16).dtype == vtl.bfloat16  # needs no feature


# -- set_float32_matmul_precision ----------------------------------------------------------
def test_float32_matmul_precision_setting():
    assert vtl.get_float32_matmul_precision() == "highest"
    try:
        for p in ("high", "medium", "highest"):
            vtl.set_float32_matmul_precision(p)
            assert vtl.get_float32_matmul_precision() == p
            a = vtl.asarray(RNG.standard_normal((4, 4)).astype(np.float32))
            np.testing.assert_allclose(to_numpy(a @ a), to_numpy(a) @ to_numpy(a), rtol=1e-5,
                                       atol=1e-6)  # no effect on numpy/wgpu
        with pytest.raises(ValueError, match="'highest', 'high', 'medium'"):
            vtl.set_float32_matmul_precision("low")
    finally:
        vtl.set_float32_matmul_precision("highest")


def test_low_dtypes_in_threads(backend):
    _need(backend, "bfloat16")
    out = []

    def work():
        x = vtl.ones((3, 3), dtype=vtl.bfloat16)
        out.append((x @ x).dtype)

    th = threading.Thread(target=work)
    th.start()
    th.join()
    assert out == [vtl.bfloat16]
