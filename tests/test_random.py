"""vtl.random: Philox-4x32-10 against the published known answers and an
independent uint64 NumPy implementation, conversions, state, and identical
streams on every backend."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import to_numpy

import vtl
from vtl import backends
from vtl import random as vr

# Random123's known-answer vectors: (counter, key, output).
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


# -- an independent reference: plain uint64 NumPy, one block per row ---------------------------
def ref_philox(counters: np.ndarray, key: tuple[int, int]) -> np.ndarray:
    """Philox-4x32-10 of (n, 4) uint64 counter words (values < 2**32)."""
    c = [counters[:, i].astype(np.uint64) for i in range(4)]
    k0, k1 = key
    m = np.uint64(0xFFFFFFFF)
    for r in range(10):
        p0 = np.uint64(0xD2511F53) * c[0]
        p1 = np.uint64(0xCD9E8D57) * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ np.uint64(k0), p1 & m,
             (p0 >> np.uint64(32)) ^ c[3] ^ np.uint64(k1), p0 & m]
        k0 = (k0 + 0x9E3779B9) & 0xFFFFFFFF
        k1 = (k1 + 0xBB67AE85) & 0xFFFFFFFF
        del r
    return np.stack(c, axis=1).astype(np.uint32)


def ref_words(seed: int, counter: int, n: int) -> np.ndarray:
    nb = -(-n // 4)
    ctr = np.array([[((counter + i) % 2**128 >> (32 * j)) & 0xFFFFFFFF for j in range(4)]
                    for i in range(nb)], dtype=np.uint64).reshape(nb, 4)
    return ref_philox(ctr, (seed & 0xFFFFFFFF, seed >> 32)).reshape(-1)[:n]


def test_reference_matches_known_answers():
    for ctr, key, out in KAT:
        got = ref_philox(np.array([ctr], dtype=np.uint64), key)[0]
        assert [int(v) for v in got] == list(out)


@pytest.mark.parametrize("ctr,key,out", KAT)
def test_known_answers_on_backend(backend, ctr, key, out):
    xp = backends.get(backend).xp
    words = [xp.asarray([v], dtype=xp.uint32) for v in ctr]
    got = vr.philox4x32(words, key)
    assert [int(to_numpy(vtl.asarray(w))[0]) for w in got] == list(out)


def test_known_answer_through_generator(backend):
    g = vr.Generator(0)
    assert to_numpy(g.bits(4)).tolist() == list(KAT[0][2])
    assert g.counter == 1


@pytest.mark.parametrize("seed,counter,n", [
    (0, 0, 10), (12345, 7, 33), (2**64 - 1, 2**32 - 3, 25), (2**40 + 5, 2**96 - 2, 17),
    (99, 2**128 - 2, 16),  # wraps around 2**128
])
def test_stream_matches_reference(backend, seed, counter, n):
    g = vr.Generator(seed)
    g.set_state({"algorithm": "philox4x32-10", "seed": seed, "counter": counter})
    got = to_numpy(g.bits(n))
    assert got.dtype == np.uint32
    np.testing.assert_array_equal(got, ref_words(seed, counter, n))
    assert g.counter == (counter + -(-n // 4)) % 2**128


def test_portable_core_on_array_api_strict():
    xs = pytest.importorskip("array_api_strict")
    for dev in ("CPU_DEVICE", "no_x64"):
        out = vr.philox_words(xs, 10, (5, 6), 2**32 - 1, xs.Device(dev))
        assert out.dtype == xs.uint32
        host = np.asarray(out.to_device(xs.Device("CPU_DEVICE")))
        np.testing.assert_array_equal(host, ref_words(5 + (6 << 32), 2**32 - 1, 10))


# -- conversions ----------------------------------------------------------------------------
def test_uniform_float32_is_top_24_bits(backend):
    g = vr.Generator(3)
    u = to_numpy(g.random((5, 7)))
    w = ref_words(3, 0, 35).reshape(5, 7)
    assert u.dtype == np.float32 and u.shape == (5, 7)
    np.testing.assert_array_equal(u, (w >> 8).astype(np.float32) * np.float32(2.0**-24))


def test_uniform_float64_uses_53_bits(backend):
    if "float64" not in vtl.__array_namespace_info__().dtypes(device=vtl.Device(backend)):
        pytest.skip("no float64")
    g = vr.Generator(4)
    u = to_numpy(g.random(6, dtype=vtl.float64))
    w = ref_words(4, 0, 12).reshape(6, 2).astype(np.uint64)
    expect = ((w[:, 0] >> 5) * 2**26 + (w[:, 1] >> 6)).astype(np.float64) * 2.0**-53
    np.testing.assert_array_equal(u, expect)
    assert g.counter == 3


def test_uniform_range_and_statistics(backend):
    u = to_numpy(vr.Generator(5).uniform(-2.0, 3.0, (20000,)))
    assert u.min() >= -2.0 and u.max() < 3.0
    assert abs(u.mean() - 0.5) < 0.05
    assert abs(u.var() - 25 / 12) < 0.1


def test_normal_box_muller_reference(backend):
    g = vr.Generator(6)
    z = to_numpy(g.normal(1.0, 2.0, (3, 5)))
    w = ref_words(6, 0, 16)
    u = (w >> 8).astype(np.float64) * 2.0**-24
    u1, u2 = 1.0 - u[:8], u[8:]
    r = np.sqrt(-2 * np.log(u1))
    ref = np.concatenate([r * np.cos(2 * np.pi * u2), r * np.sin(2 * np.pi * u2)])[:15]
    np.testing.assert_allclose(z.reshape(-1), 1.0 + 2.0 * ref, rtol=1e-5, atol=1e-5)
    assert z.dtype == np.float32


def test_normal_statistics(backend):
    z = to_numpy(vr.Generator(7).standard_normal(40001))
    assert np.isfinite(z).all()
    assert abs(z.mean()) < 0.03 and abs(z.std() - 1) < 0.03
    # tails: P(|z| > 2) = 0.0455
    assert abs(np.mean(np.abs(z) > 2) - 0.0455) < 0.006


def _ref_randint(seed: int, low: int, high: int, n: int) -> list[int]:
    span = high - low
    nx = 2 if span <= 2**32 else 3
    w = ref_words(seed, 0, n * nx).reshape(n, nx)
    out = []
    for row in w:
        x = sum(int(v) << (32 * k) for k, v in enumerate(row))
        out.append(low + (x * span >> (32 * nx)))
    return out


@pytest.mark.parametrize("low,high,dtype", [
    (0, 10, "int64"), (-5, 3, "int32"), (-2**31, 2**31, "int32"), (0, 2**32, "int64"),
    (-128, 128, "int8"), (0, 256, "uint8"), (-2**63, 2**63, "int64"), (7, 2**40 + 3, "int64"),
    (0, 2**32, "uint32"), (-100, 2**63 - 1, "int64"),
])
def test_randint_matches_fixed_point_reference(backend, low, high, dtype):
    if dtype not in vtl.__array_namespace_info__().dtypes(device=vtl.Device(backend)):
        pytest.skip(f"no {dtype}")
    got = to_numpy(vr.Generator(11).randint(low, high, 50, dtype=getattr(vtl, dtype)))
    assert got.dtype == np.dtype(dtype)
    assert [int(v) for v in got] == _ref_randint(11, low, high, 50)
    assert got.min() >= low and got.max() < high


def test_randint_uniformity_and_defaults(backend):
    r = to_numpy(vr.Generator(12).randint(6, size=60000))
    assert r.dtype == np.int64
    counts = np.bincount(r, minlength=6)
    chi2 = ((counts - 10000) ** 2 / 10000).sum()
    assert chi2 < 25  # 5 degrees of freedom: p ~ 1e-4
    assert to_numpy(vr.Generator(1).randint(3, 4, (2, 2))).tolist() == [[3, 3], [3, 3]]


def test_bernoulli(backend):
    g = vr.Generator(13)
    b = to_numpy(g.bernoulli(0.3, 10))
    u = (ref_words(13, 0, 10) >> 8).astype(np.float64) * 2.0**-24
    np.testing.assert_array_equal(b, (u < 0.3).astype(np.float32))
    assert to_numpy(vr.Generator(1).bernoulli(0.25, 40000)).mean() == pytest.approx(0.25,
                                                                                      abs=0.01)
    p = vtl.asarray([0.0, 1.0, 0.0, 1.0])
    np.testing.assert_array_equal(to_numpy(g.bernoulli(p)), [0, 1, 0, 1])
    m = g.bernoulli(0.5, (3,), dtype=vtl.bool)
    assert m.dtype == vtl.bool


def test_permutation_is_stable_sort_of_64_bit_keys(backend):
    g = vr.Generator(14)
    perm = to_numpy(g.permutation(1000))
    w = ref_words(14, 0, 2000).reshape(1000, 2)
    np.testing.assert_array_equal(perm, np.lexsort((w[:, 1], w[:, 0])))
    assert sorted(perm.tolist()) == list(range(1000))
    assert to_numpy(g.permutation(0)).shape == (0,)


def test_permutation_of_tensor_is_differentiable(backend):
    x = vtl.asarray(np.arange(12.0).reshape(4, 3), requires_grad=True)
    y = vr.Generator(15).permutation(x)
    perm = to_numpy(vr.Generator(15).permutation(4))
    np.testing.assert_array_equal(to_numpy(y), np.arange(12.0).reshape(4, 3)[perm])
    vtl.sum(y * vtl.asarray(np.arange(12.0).reshape(4, 3))).backward()
    g = np.zeros((4, 3))
    g[perm] = np.arange(12.0).reshape(4, 3)
    np.testing.assert_array_equal(to_numpy(x.grad), g)


def test_shuffle_in_place(backend):
    x = vtl.arange(10)
    before = x._version
    vr.Generator(16).shuffle(x)
    perm = to_numpy(vr.Generator(16).permutation(10))
    np.testing.assert_array_equal(to_numpy(x), perm)
    assert x._version > before
    a = np.arange(10)
    vr.Generator(16).shuffle(a)
    np.testing.assert_array_equal(a, perm)


# -- state ----------------------------------------------------------------------------------
def test_state_round_trip_and_replay(backend):
    g = vr.Generator(21)
    g.random(5)
    s = g.get_state()
    a = to_numpy(g.normal(size=7))
    g.random(100)
    g.set_state(s)
    np.testing.assert_array_equal(to_numpy(g.normal(size=7)), a)
    import json

    assert json.loads(json.dumps(s)) == s


def test_seed_determinism_and_independence(backend):
    a = to_numpy(vr.Generator(1).random(100))
    b = to_numpy(vr.Generator(1).random(100))
    c = to_numpy(vr.Generator(2).random(100))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    g = vr.Generator(1)
    first, second = to_numpy(g.random(3)), to_numpy(g.random(3))
    assert not np.array_equal(first, second)  # draws advance the counter by whole blocks
    np.testing.assert_array_equal(second, a[4:7])


def test_default_generator_and_module_functions(backend):
    vr.seed(123)
    assert vr.initial_seed() == 123
    a = to_numpy(vr.uniform(size=4))
    s = vr.get_state()
    b = to_numpy(vr.normal(size=3))
    vr.set_state(s)
    np.testing.assert_array_equal(to_numpy(vr.normal(size=3)), b)
    vr.manual_seed(123)
    np.testing.assert_array_equal(to_numpy(vr.random(4)), a)
    for f in (vr.bits, vr.standard_normal):
        assert f(3).shape == (3,)
    assert vr.randint(5, size=2).shape == (2,)
    assert vr.bernoulli(0.5, 2).shape == (2,)
    assert vr.permutation(3).shape == (3,)
    assert repr(vr.default_generator()).startswith("vtl.random.Generator(seed=123")


def test_same_numbers_on_every_backend(backend):
    results = {}
    for name in backends.available_names():
        g = vr.Generator(77)
        results[name] = (to_numpy(g.bits(9, backend=name)), to_numpy(g.random(9, backend=name)),
                         to_numpy(g.randint(-50, 50, 9, backend=name)),
                         to_numpy(g.permutation(9, backend=name)),
                         to_numpy(g.normal(size=9, backend=name)))
        assert g.bits(1, backend=name).device == vtl.Device(name)
    ref = results["numpy"]
    for got in results.values():
        for a, b in zip(got[:4], ref[:4], strict=True):
            np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(got[4], ref[4], rtol=1e-6, atol=1e-6)


def test_fused_kernel_hook_is_used(monkeypatch):
    b = backends.get("numpy")
    calls = []

    def fused(n, key, counter, index):
        calls.append((n, key, counter, index))
        return np.asarray(ref_words(key[0] + (key[1] << 32), counter, n))

    monkeypatch.setitem(b._kernels, "philox", fused)
    g = vr.Generator(5)
    np.testing.assert_array_equal(to_numpy(g.bits(6, backend="numpy")), ref_words(5, 0, 6))
    assert calls == [(6, (5, 0), 0, 0)]


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize(("n", "counter"), [(1, 0), (7, 2**32 - 1), (4 * (1 << 15) + 5, 2**64 - 9),
                                            (3 * 4 * (1 << 15) + 2, 2**96 + 2**32 - 7)])
def test_numpy_philox_kernel_equals_portable_words(n, counter, threads):
    """The NumPy kernel (pieces of blocks on the thread pool, in-place rounds) gives the
    portable generator's bits for any size, counter carry and thread count."""
    from vtl.backends._common import threads as th
    from vtl.backends.numpy.random import philox

    key = (0x12345678, 0x9ABCDEF0)
    saved = th._limit
    th.set_limit(threads)
    try:
        got = philox(n, key, counter)
    finally:
        th._limit = saved
    want = vr.philox_words(np, n, key, counter)
    assert got.dtype == np.uint32 and got.shape == (n,)
    np.testing.assert_array_equal(got, np.asarray(want))


# -- errors ---------------------------------------------------------------------------------
def test_errors(backend):
    g = vr.Generator(0)
    with pytest.raises(ValueError, match="seed"):
        vr.Generator(-1)
    with pytest.raises(ValueError, match="seed"):
        vr.seed(2**64)
    with pytest.raises(TypeError, match="seed"):
        vr.Generator(1.5)
    with pytest.raises(ValueError, match="negative"):
        g.random((2, -1))
    with pytest.raises(TypeError, match="size"):
        g.random("abc")
    with pytest.raises(ValueError, match="low < high"):
        g.randint(3, 3)
    with pytest.raises(ValueError, match="does not fit"):
        g.randint(0, 300, dtype=vtl.uint8)
    with pytest.raises(TypeError, match="integer dtype"):
        g.randint(0, 3, dtype=vtl.float32)
    with pytest.raises(TypeError, match="real floating dtype"):
        g.random(3, dtype=vtl.int32)
    with pytest.raises(ValueError, match="p must be"):
        g.bernoulli(1.5)
    with pytest.raises(ValueError, match="scale"):
        g.normal(0.0, -1.0)
    with pytest.raises(ValueError, match="n must be"):
        g.permutation(-1)
    with pytest.raises(ValueError, match="algorithm"):
        g.set_state({"algorithm": "mt19937", "seed": 0, "counter": 0})
    with pytest.raises(ValueError, match="lacks"):
        g.set_state({"seed": 0})
    with pytest.raises(ValueError, match="counter"):
        g.set_state({"algorithm": "philox4x32-10", "seed": 0, "counter": -1})
    with pytest.raises(ValueError, match="dimension"):
        g.shuffle(vtl.asarray(1.0))
    assert g.counter == 0  # failed calls consumed nothing
    assert math.isfinite(float(g.random()))
