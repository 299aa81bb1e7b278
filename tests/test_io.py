"""vtl.io: safetensors save/load, atomic writes, checkpoints with validation."""

from __future__ import annotations

import json
import os
import struct

import numpy as np
import pytest
import safetensors.numpy as stnp
from helpers import assert_close, supported_dtypes, to_numpy
from helpers import small_mlp as _model
from helpers import train_steps as _train

import vtl
from vtl import nn, optim


def _snapshot(model, opt=None):
    ms = {k: to_numpy(v).copy() for k, v in model.state_dict().items()}
    if opt is None:
        return ms
    sd = opt.state_dict()
    os_ = {i: {k: (to_numpy(v).copy() if isinstance(v, vtl.Tensor) else v)
               for k, v in st.items()} for i, st in sd["state"].items()}
    groups = [{k: v for k, v in g.items()} for g in sd["param_groups"]]
    return ms, os_, groups


def _same(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    return a == b


# -- tensors and state dicts ----------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int8", "int32", "int64",
                                   "uint8", "bool"])
@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 3, 4)])
def test_save_load_tensor_roundtrip(backend, tmp_path, dtype, shape):
    if dtype not in supported_dtypes(backend):
        pytest.skip(f"{backend} lacks {dtype}")
    rng = np.random.default_rng(0)
    a = (rng.standard_normal(shape) * 10).astype(dtype)
    p = tmp_path / "t.safetensors"
    vtl.save(vtl.asarray(a), p)
    out = vtl.load(p)
    assert isinstance(out, vtl.Tensor)
    assert out.device == vtl.asarray(0).device
    assert_close(out, a, rtol=0, atol=0)
    # a plain safetensors file
    raw = stnp.load_file(str(p))
    assert list(raw) == ["tensor"]
    np.testing.assert_array_equal(raw["tensor"], a)
    assert raw["tensor"].dtype == a.dtype and raw["tensor"].shape == a.shape


def test_save_load_state_dict(backend, tmp_path):
    model = _model()
    p = tmp_path / "m.safetensors"
    vtl.save(model.state_dict(), p, metadata={"note": "x"})
    loaded = vtl.load(p)
    assert set(loaded) == set(model.state_dict())
    for k, v in model.state_dict().items():
        assert_close(loaded[k], to_numpy(v), rtol=0, atol=0)
    other = _model(seed=1)
    other.load_state_dict(loaded)
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(to_numpy(other.state_dict()[k]), to_numpy(v))
    raw = stnp.load_file(str(p))
    assert set(raw) == set(model.state_dict())
    with vtl.use_backend("numpy"):
        on_np = vtl.load(p, device="numpy")
    assert all(t.device.backend_name == "numpy" for t in on_np.values())


def test_opens_in_torch(tmp_path):
    torch_st = pytest.importorskip("safetensors.torch")
    pytest.importorskip("torch")
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    p = tmp_path / "t.safetensors"
    vtl.save({"w": vtl.asarray(a), "b": vtl.asarray(np.arange(3))}, p)
    got = torch_st.load_file(str(p))
    np.testing.assert_array_equal(got["w"].numpy(), a)
    np.testing.assert_array_equal(got["b"].numpy(), np.arange(3))


def test_load_foreign_safetensors_file(tmp_path):
    p = tmp_path / "f.safetensors"
    stnp.save_file({"a": np.ones((2, 2), np.float32), "b": np.zeros(3, np.int64)}, str(p))
    out = vtl.load(p)
    assert set(out) == {"a", "b"}
    assert out["b"].dtype == vtl.int64


def test_save_errors(tmp_path):
    p = tmp_path / "x.safetensors"
    # nested containers are saved as a tree (tests/test_io_nested.py); other objects are not
    with pytest.raises(TypeError, match="a Tensor, or a dict, list or tuple"):
        vtl.save({1, 2}, p)
    with pytest.raises(TypeError, match=r"obj\['a'\]: a dict key of type tuple"):
        vtl.save({"a": {(1, 2): vtl.ones(2)}}, p)
    with pytest.raises(TypeError, match=r"obj\['a'\]\[0\] \(a builtins.set\)"):
        vtl.save({"a": [{1.0}]}, p)
    with pytest.raises(TypeError, match="complex"):
        vtl.save(np.ones(2, np.complex64), p)
    assert not p.exists()
    assert os.listdir(tmp_path) == []


def _write_valid(p) -> bytes:
    vtl.save({"w": vtl.asarray(np.arange(12, dtype=np.float32))}, p)
    return p.read_bytes()


def test_load_missing_truncated_corrupt(tmp_path):
    p = tmp_path / "m.safetensors"
    with pytest.raises(ValueError, match="m.safetensors.*does not exist"):
        vtl.load(p)
    data = _write_valid(p)
    p.write_bytes(data[:-5])
    with pytest.raises(ValueError, match="m.safetensors.*truncated"):
        vtl.load(p)
    p.write_bytes(data[:4])
    with pytest.raises(ValueError, match="m.safetensors.*truncated"):
        vtl.load(p)
    p.write_bytes(b"")
    with pytest.raises(ValueError, match="m.safetensors"):
        vtl.load(p)
    (hlen,) = struct.unpack("<Q", data[:8])
    p.write_bytes(data[:8] + b"{" * hlen + data[8 + hlen:])
    with pytest.raises(ValueError, match="m.safetensors.*corrupt"):
        vtl.load(p)
    p.write_bytes(struct.pack("<Q", 10**9) + data[8:])
    with pytest.raises(ValueError, match="m.safetensors"):
        vtl.load(p)


def test_atomic_write_keeps_old_file(tmp_path, monkeypatch):
    p = tmp_path / "m.safetensors"
    old = _write_valid(p)

    def crash(fd):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", crash)  # fails after the bytes were written
    with pytest.raises(OSError, match="disk full"):
        vtl.save({"w": vtl.zeros(1000)}, p)
    with pytest.raises(OSError, match="disk full"):
        vtl.save_checkpoint(p, _model())
    assert p.read_bytes() == old
    assert os.listdir(tmp_path) == ["m.safetensors"]  # no temporary file left
    monkeypatch.undo()
    vtl.save({"w": vtl.zeros(2)}, p)
    assert_close(vtl.load(p)["w"], np.zeros(2, np.float32))


# -- checkpoints ------------------------------------------------------------------------------
def test_checkpoint_roundtrip(backend, tmp_path):
    model = _model()
    opt = optim.Adam(model.parameters(), lr=0.05, betas=(0.8, 0.9))
    sched = optim.lr_scheduler.MultiStepLR(opt, milestones=[1, 2, 5], gamma=0.5)
    _train(model, opt, sched)
    p = tmp_path / "ckpt.safetensors"
    vtl.random.seed(123)
    vtl.random.uniform(size=(3,))
    rng_state = vtl.random.get_state()
    vtl.save_checkpoint(p, model, opt, sched, epoch=3, metrics={"loss": 0.25, "acc": [1, 2]},
                        best=float("inf"), tag=("a", 1))
    expect = _snapshot(model, opt)
    sched_state = sched.state_dict()
    after_rng = vtl.random.uniform(size=(4,)).numpy()

    m2 = _model(seed=9)
    o2 = optim.Adam(m2.parameters(), lr=0.3)
    s2 = optim.lr_scheduler.MultiStepLR(o2, milestones=[1, 2, 5], gamma=0.5)
    info = vtl.load_checkpoint(p, m2, o2, s2)
    assert info == {"epoch": 3, "metrics": {"loss": 0.25, "acc": [1, 2]},
                    "extra": {"best": float("inf"), "tag": ("a", 1)}}
    assert _same(_snapshot(m2, o2), expect)
    assert o2.param_groups[0]["betas"] == (0.8, 0.9)
    assert s2.state_dict() == sched_state
    assert vtl.random.get_state() == rng_state
    np.testing.assert_array_equal(vtl.random.uniform(size=(4,)).numpy(), after_rng)
    # training continues identically
    _train(model, opt, sched, 2)
    _train(m2, o2, s2, 2)
    for k, v in model.state_dict().items():
        np.testing.assert_allclose(to_numpy(m2.state_dict()[k]), to_numpy(v), rtol=1e-6)
    # the file is plain safetensors
    raw = stnp.load_file(str(p))
    assert any(k.startswith("model.") for k in raw) and any(k.startswith("optimizer.")
                                                            for k in raw)


def test_checkpoint_model_only(tmp_path):
    model = _model()
    p = tmp_path / "c.safetensors"
    vtl.save_checkpoint(p, model)
    m2 = _model(seed=4)
    assert vtl.load_checkpoint(p, m2) == {"epoch": None, "metrics": {}, "extra": {}}
    assert _same(_snapshot(m2), _snapshot(model))
    opt = optim.SGD(m2.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="no optimizer state"):
        vtl.load_checkpoint(p, m2, opt)
    vtl.load_checkpoint(p, m2, opt, strict=False)


def test_checkpoint_rejects_non_json_extra(tmp_path):
    with pytest.raises(TypeError, match="cannot store"):
        vtl.save_checkpoint(tmp_path / "c.safetensors", _model(), fn=lambda: 0)
    assert os.listdir(tmp_path) == []


def _bad_loads(tmp_path):
    """(description, path, model factory) of checkpoints that must be refused."""
    good = tmp_path / "good.safetensors"
    model = _model()
    opt = optim.Adam(model.parameters(), lr=0.1)
    _train(model, opt)
    vtl.save_checkpoint(good, model, opt, epoch=1)
    data = good.read_bytes()
    cases = {}
    trunc = tmp_path / "trunc.safetensors"
    trunc.write_bytes(data[: len(data) // 2])
    cases["truncated"] = trunc
    plain = tmp_path / "plain.safetensors"
    vtl.save(model.state_dict(), plain)
    cases["not a vtl checkpoint"] = plain
    wide = tmp_path / "wide.safetensors"
    m_wide = nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 2))
    vtl.save_checkpoint(wide, m_wide, optim.Adam(m_wide.parameters()))
    cases["shape"] = wide
    f64 = tmp_path / "f64.safetensors"
    arrays = stnp.load_file(str(good))
    with open(good, "rb") as f:
        (hlen,) = struct.unpack("<Q", f.read(8))
        meta = json.loads(f.read(hlen))["__metadata__"]
    arrays64 = {k: (v.astype(np.float64) if k == "model.0.weight" else v)
                for k, v in arrays.items()}
    stnp.save_file(arrays64, str(f64), metadata=meta)
    cases["dtype"] = f64
    extra = tmp_path / "extra.safetensors"
    stnp.save_file({**arrays, "model.9.weight": np.ones(2, np.float32)}, str(extra),
                   metadata=meta)
    cases["unexpected"] = extra
    optbad = tmp_path / "optbad.safetensors"
    stnp.save_file({**arrays, "optimizer.0.exp_avg": np.ones((7,), np.float32)}, str(optbad),
                   metadata=meta)
    cases["optimizer state shape"] = optbad
    sgd = tmp_path / "sgd.safetensors"
    vtl.save_checkpoint(sgd, model, optim.SGD(model.parameters(), lr=0.1))
    cases["optimizer type"] = sgd
    return cases


def test_load_checkpoint_bad_files_leave_everything_unchanged(backend, tmp_path):
    cases = _bad_loads(tmp_path)
    model = _model(seed=3)
    opt = optim.Adam(model.parameters(), lr=0.01)
    _train(model, opt, steps=1)
    before = _snapshot(model, opt)
    rng = vtl.random.get_state()
    for what, path in cases.items():
        with pytest.raises(ValueError, match=path.name):
            vtl.load_checkpoint(path, model, opt)
        assert _same(_snapshot(model, opt), before), what
        assert vtl.random.get_state() == rng, what
    with pytest.raises(ValueError, match="does not exist"):
        vtl.load_checkpoint(tmp_path / "nope.safetensors", model, opt)


def test_load_checkpoint_restores_optimizer_when_the_model_fails(tmp_path, monkeypatch):
    model = _model()
    opt = optim.Adam(model.parameters(), lr=0.1)
    _train(model, opt)
    p = tmp_path / "c.safetensors"
    vtl.save_checkpoint(p, model, opt)
    m2 = _model(seed=2)
    o2 = optim.Adam(m2.parameters(), lr=0.5)
    _train(m2, o2, steps=1)
    before = _snapshot(m2, o2)

    def broken(*args, **kwargs):
        raise RuntimeError("device lost")

    monkeypatch.setattr(m2, "load_state_dict", broken)
    with pytest.raises(ValueError, match="c.safetensors.*device lost"):
        vtl.load_checkpoint(p, m2, o2)
    assert _same(_snapshot(m2, o2), before)


def test_load_checkpoint_non_strict_ignores_extra_keys(tmp_path):
    cases = _bad_loads(tmp_path)
    model = _model(seed=3)
    vtl.load_checkpoint(cases["unexpected"], model, strict=False)
    ref = stnp.load_file(str(cases["unexpected"]))
    np.testing.assert_array_equal(to_numpy(model.state_dict()["0.weight"]),
                                  ref["model.0.weight"])
