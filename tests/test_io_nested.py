"""vtl.save / vtl.load of nested objects (a training checkpoint as torch.save users write
it): one safetensors file, tensors as entries, the structure as JSON metadata, no pickle.
Round trips keep types and values; an optimizer restored from the file resumes training
exactly; errors name the key path; flat dicts keep their format."""

from __future__ import annotations

import json
import math
import os
import struct
from collections import OrderedDict

import numpy as np
import pytest
from helpers import to_numpy

import vtl
from vtl import nn, optim


def _model(seed: int = 0) -> nn.Module:
    vtl.random.seed(seed)
    return nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 2))


def _train(model, opt, sched, steps: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        x = vtl.asarray(rng.normal(size=(4, 3)).astype(np.float32))
        opt.zero_grad()
        vtl.sum(model(x) ** 2).backward()
        opt.step()
        sched.step()


def test_checkpoint_round_trip_and_resume(backend, tmp_path):
    path = tmp_path / "ckpt.safetensors"
    model = _model()
    opt = optim.Adam(model.parameters(), lr=1e-2, betas=(0.8, 0.9))
    sched = optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    _train(model, opt, sched, 3, seed=1)
    vtl.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
              "scheduler": sched.state_dict(), "epoch": 3, "best": 0.25}, path)
    _train(model, opt, sched, 3, seed=2)  # the run that continues
    expect = [to_numpy(p) for p in model.parameters()]

    ck = vtl.load(path)
    assert ck["epoch"] == 3 and ck["best"] == 0.25
    assert isinstance(ck["model"], OrderedDict) and list(ck["model"]) == list(model.state_dict())
    state = ck["optimizer"]["state"]
    assert sorted(state) == [0, 1, 2, 3] and state[0]["step"] == 3
    assert ck["optimizer"]["param_groups"][0]["betas"] == (0.8, 0.9)
    assert ck["optimizer"]["param_groups"][0]["params"] == [0, 1, 2, 3]
    assert state[0]["exp_avg"].device == vtl.backends.default_device()
    model2 = _model(seed=9)
    opt2 = optim.Adam(model2.parameters(), lr=1.0)
    sched2 = optim.lr_scheduler.StepLR(opt2, step_size=2, gamma=0.5)
    model2.load_state_dict(ck["model"])
    opt2.load_state_dict(ck["optimizer"])
    sched2.load_state_dict(ck["scheduler"])
    _train(model2, opt2, sched2, 3, seed=2)
    for a, b in zip(expect, model2.parameters(), strict=True):
        np.testing.assert_array_equal(a, to_numpy(b))  # resumed exactly


def test_types_and_values_survive(tmp_path):
    path = tmp_path / "tree.safetensors"
    t = vtl.asarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    p = nn.Parameter(vtl.ones((2,)))
    obj = {
        "t": t, "again": [t], "p": p, "frozen": nn.Parameter(vtl.zeros((1,)), False),
        "grad": vtl.ones((2,), requires_grad=True),
        "arr": np.arange(4, dtype=np.int16), "scalar": np.float32(1.5), "i64": np.int64(-3),
        "zero_d": vtl.asarray(2.0),
        "nums": [1, -2**70, 0.5, float("nan"), float("inf"), -float("inf"), 1 + 2j, True, None],
        "tup": (1, ("a", b"\x00\xff")), "odict": OrderedDict([("z", 1), ("a", 2)]),
        7: "int key", 2.5: "float key", None: "none key", "__dunder": {"__x": 1},
        "empty": {"d": {}, "l": [], "t": ()},
    }
    vtl.save(obj, path)
    got = vtl.load(path, device="numpy")
    assert type(got) is dict and list(got) == list(obj)
    assert isinstance(got["t"], vtl.Tensor) and not isinstance(got["t"], nn.Parameter)
    np.testing.assert_array_equal(to_numpy(got["t"]), to_numpy(t))
    assert got["again"][0] is got["t"]  # stored once, loaded as one object
    assert isinstance(got["p"], nn.Parameter) and got["p"].requires_grad
    assert isinstance(got["frozen"], nn.Parameter) and not got["frozen"].requires_grad
    assert got["grad"].requires_grad and got["grad"].grad_fn is None
    assert isinstance(got["arr"], np.ndarray) and got["arr"].dtype == np.int16
    got["arr"][0] = 5  # a writable array of its own
    assert type(got["scalar"]) is np.float32 and got["scalar"] == 1.5
    assert type(got["i64"]) is np.int64 and got["i64"] == -3
    assert got["zero_d"].shape == () and float(got["zero_d"]) == 2.0
    n = got["nums"]
    assert n[:3] == [1, -2**70, 0.5] and math.isnan(n[3]) and n[4:] == [math.inf, -math.inf,
                                                                        1 + 2j, True, None]
    assert got["tup"] == (1, ("a", b"\x00\xff"))
    assert type(got["odict"]) is OrderedDict and list(got["odict"]) == ["z", "a"]
    assert got[7] == "int key" and got[2.5] == "float key" and got[None] == "none key"
    assert got["__dunder"] == {"__x": 1}
    assert got["empty"] == {"d": {}, "l": [], "t": ()}
    assert vtl.load(path, device="numpy")["t"] is not got["t"]
    # top-level lists and tuples too
    vtl.save([t, (1, 2)], path)
    lst = vtl.load(path)
    assert isinstance(lst, list) and lst[1] == (1, 2)


def test_file_is_plain_safetensors_with_json_structure(tmp_path):
    path = tmp_path / "tree.safetensors"
    sd = _model().state_dict()
    vtl.save({"model": sd, "step": 4}, path, metadata={"note": "hi"})
    from safetensors.numpy import load_file

    tensors = load_file(str(path))
    assert sorted(tensors) == sorted(f"model.{k}" for k in sd)
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    meta = json.loads(raw[8:8 + n])["__metadata__"]
    assert meta["vtl.format"] == "tree" and meta["note"] == "hi"
    tree = json.loads(meta["vtl.tree"])
    assert tree["version"] == 1 and tree["tree"]["step"] == 4
    assert b"pickle" not in raw and b"\x80\x04" not in raw[:8 + n]


def test_flat_dicts_keep_their_format(backend, tmp_path):
    path = tmp_path / "flat.safetensors"
    sd = _model().state_dict()
    vtl.save(sd, path)
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    meta = json.loads(raw[8:8 + n])["__metadata__"]
    assert meta == {"vtl.format": "dict"}  # as before: no structure entry
    got = vtl.load(path)
    assert isinstance(got, OrderedDict) and sorted(got) == sorted(sd)
    t = vtl.asarray(np.arange(3.0, dtype=np.float32))
    vtl.save(t, path)
    assert isinstance(vtl.load(path), vtl.Tensor)


def test_map_location_and_device(tmp_path, backend, other_backends):
    path = tmp_path / "m.safetensors"
    vtl.save({"w": [vtl.ones((2,), backend="numpy")]}, path)
    numpy0 = vtl.backends.get("numpy").device(0)
    assert vtl.load(path, map_location="cpu")["w"][0].device == numpy0
    for name in other_backends:
        assert vtl.load(path, map_location=name)["w"][0].device.backend_name == name
        assert vtl.load(path, device=name)["w"][0].device.backend_name == name
        with pytest.raises(ValueError, match="disagree"):
            vtl.load(path, device=backend, map_location=name)
    with pytest.raises(TypeError, match="map_location must be a device"):
        vtl.load(path, map_location={"cuda:0": "cpu"})


def test_unsupported_objects_name_their_path(tmp_path):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(b"old")

    class Thing:
        pass

    cases = [
        ({"opt": {"state": {0: {"foo": Thing()}}}}, r"obj\['opt'\]\['state'\]\[0\]\['foo'\] "
                                                     r"\(a test_io_nested\..*Thing\)"),
        ({"a": [1, {2, 3}]}, r"obj\['a'\]\[1\] \(a builtins.set\)"),
        ({"m": nn.Linear(2, 2)}, r"obj\['m'\] \(a vtl.nn.modules.linear.Linear\)"),
        ({"f": len}, r"obj\['f'\]"),
        ({"k": {(1, 2): 3}}, r"obj\['k'\]: a dict key of type tuple"),
        ({"c": [vtl.asarray(np.ones(2, np.complex64))]}, r"obj\['c'\]\[0\]\" has dtype complex"),
    ]
    for obj, pattern in cases:
        with pytest.raises(TypeError, match=pattern):
            vtl.save(obj, path)
    assert path.read_bytes() == b"old"  # nothing written
    assert os.listdir(tmp_path) == ["bad.safetensors"]  # no temporary left
    with pytest.raises(TypeError, match="got set"):
        vtl.save({1, 2}, path)


def _rewrite_tree(path, fn) -> None:
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    header["__metadata__"]["vtl.tree"] = fn(header["__metadata__"]["vtl.tree"])
    new = json.dumps(header).encode()
    new += b" " * (-len(new) % 8)
    path.write_bytes(struct.pack("<Q", len(new)) + new + raw[8 + n:])


@pytest.mark.parametrize("edit,message", [
    (lambda s: "{not json", "not valid JSON"),
    (lambda s: json.dumps({"version": 99, "tree": {}}), "unknown version"),
    (lambda s: s.replace('"__tensor__": "w"', '"__tensor__": "nope"'),
     "names the tensor 'nope'"),
    (lambda s: s.replace('"tensor"', '"pickle"', 1), "unknown kind of tensor"),
    (lambda s: s.replace('"__tuple__"', '"__set__"', 1), "unknown marker"),
])
def test_corrupt_structure_is_a_clear_error(tmp_path, edit, message):
    path = tmp_path / "c.safetensors"
    vtl.save({"w": vtl.ones((2,)), "t": (1, 2)}, path)
    _rewrite_tree(path, edit)
    with pytest.raises(ValueError, match=message):
        vtl.load(path)


def test_parametrized_and_normed_state_dicts_round_trip(tmp_path):
    path = tmp_path / "wn.safetensors"
    m = nn.utils.weight_norm(nn.Linear(3, 2))
    o = optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    vtl.sum(m(vtl.ones((1, 3)))).backward()
    o.step()
    vtl.save({"model": m.state_dict(), "opt": o.state_dict()}, path)
    ck = vtl.load(path)
    m2 = nn.utils.weight_norm(nn.Linear(3, 2))
    m2.load_state_dict(ck["model"])
    o2 = optim.SGD(m2.parameters(), lr=0.1, momentum=0.9)
    o2.load_state_dict(ck["opt"])
    np.testing.assert_array_equal(to_numpy(m2(vtl.ones((1, 3)))), to_numpy(m(vtl.ones((1, 3)))))
