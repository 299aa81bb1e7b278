"""Checkpoints, state dicts and safetensors files: a load that fails changes nothing,
killed writers leave no temporaries that pile up, unsupported dtypes are named."""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import safetensors
import safetensors.numpy as stnp
from helpers import small_mlp as _model
from helpers import to_numpy, train_steps

import vtl
from vtl import io as vio
from vtl import optim
from vtl.optim import lr_scheduler as S
from vtl.train import History, Resume
from vtl.train.loop import FitState

ROOT = Path(__file__).resolve().parents[1]


def _train(model, opt, sched=None, steps: int = 2) -> None:
    train_steps(model, opt, sched, steps)


def _plain(v):
    """A comparable copy: tensors to NumPy, containers recursively."""
    if isinstance(v, vtl.Tensor):
        return to_numpy(v).copy()
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return type(v)(_plain(x) for x in v)
    return v


def _same(a, b) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    return a == b


def _snapshot(model, opt, sched):
    return (_plain(model.state_dict()), _plain(opt.state_dict()), _plain(sched.state_dict()),
            vtl.random.get_state())


def _tampered(src: Path, dst: Path, meta_fn: Callable[[dict], None] | None = None,
              arrays_fn: Callable[[dict], None] | None = None) -> Path:
    """Copy of checkpoint ``src`` with its JSON metadata and/or tensors changed."""
    arrays = stnp.load_file(str(src))
    with open(src, "rb") as f:
        (hlen,) = struct.unpack("<Q", f.read(8))
        meta = json.loads(f.read(hlen))["__metadata__"]
    ck = json.loads(meta["vtl.checkpoint"])
    if meta_fn is not None:
        meta_fn(ck)
    if arrays_fn is not None:
        arrays_fn(arrays)
    meta["vtl.checkpoint"] = json.dumps(ck)
    stnp.save_file(arrays, str(dst), metadata=meta)
    return dst


def _set(path: str, value):
    """A metadata edit: set the entry at the dotted ``path``."""
    def edit(ck):
        *parents, last = path.split(".")
        d = ck
        for p in parents:
            d = d[int(p)] if isinstance(d, list) else d[p]
        d[last] = value
    return edit


def _del(path: str):
    def edit(ck):
        *parents, last = path.split(".")
        d = ck
        for p in parents:
            d = d[p]
        del d[last]
    return edit


def _rename_tensor(old: str, new: str):
    def edit(arrays):
        arrays[new] = arrays.pop(old)
    return edit


# (metadata edit, tensor edit, what the error must name)
BAD_PARTS = {
    "scheduler step_size str": (_set("scheduler.state.step_size", "x"), None,
                                r"scheduler state.*step_size.*'x'"),
    "scheduler gamma str": (_set("scheduler.state.gamma", "half"), None,
                            r"scheduler state.*gamma"),
    "scheduler unknown field": (_set("scheduler.state.bogus", 1), None,
                                r"scheduler state.*unknown field.*bogus"),
    "scheduler missing field": (_del("scheduler.state.last_epoch"), None,
                                r"scheduler state.*lacks.*last_epoch"),
    "scheduler base_lrs length": (_set("scheduler.state.base_lrs", [0.1, 0.2]), None,
                                  r"scheduler state.*base_lrs"),
    "scheduler not a dict": (_set("scheduler.state", [1]), None, r"scheduler state"),
    "rng counter": (_set("rng.counter", -1), None, r"RNG state.*counter"),
    "rng seed": (_set("rng.seed", "x"), None, r"RNG state.*seed"),
    "rng algorithm": (_set("rng.algorithm", "mt19937"), None, r"RNG state.*algorithm"),
    "rng unknown key": (_set("rng.extra", 1), None, r"RNG state.*unknown key.*extra"),
    "rng not a dict": (_set("rng", [1, 2]), None, r"RNG state"),
    "optimizer step": (_set("optimizer.scalars.0.step", "x"), None,
                       r"optimizer state.*'step' of parameter 0.*'x'"),
    "optimizer negative step": (_set("optimizer.scalars.1.step", -3), None,
                                r"optimizer state.*'step' of parameter 1"),
    "optimizer scalar key": (_set("optimizer.scalars.zero", {"step": 1}), None,
                             r"optimizer state.*'zero'"),
    "optimizer unknown scalar": (_set("optimizer.scalars.0.bogus", 1), None,
                                 r"optimizer state.*unknown state 'bogus'"),
    "optimizer tensor index": (None, _rename_tensor("optimizer.0.exp_avg", "optimizer.x.exp_avg"),
                               r"optimizer state.*'optimizer\.x\.exp_avg'"),
    "optimizer tensor name": (None, _rename_tensor("optimizer.0.exp_avg", "optimizer.0"),
                              r"optimizer state.*'optimizer\.0'"),
    "optimizer unknown tensor": (None, _rename_tensor("optimizer.0.exp_avg", "optimizer.0.bogus"),
                                 r"optimizer state.*unknown state 'bogus'"),
    "optimizer lr": (_set("optimizer.param_groups.0.lr", "fast"), None,
                     r"optimizer state.*lr.*'fast'"),
    "optimizer amsgrad": (_set("optimizer.param_groups.0.amsgrad", "yes"), None,
                          r"optimizer state.*amsgrad.*'yes'"),
    "optimizer group": (_set("optimizer.param_groups", [5]), None, r"optimizer state"),
    "epoch": (_set("epoch", "three"), None, r"epoch.*'three'"),
    "metrics": (_set("metrics", [1, 2]), None, r"metrics"),
    "extra": (_set("extra", "x"), None, r"extra state"),
}


@pytest.fixture
def saved_checkpoint(tmp_path):
    model = _model()
    opt = optim.Adam(model.parameters(), lr=0.1)
    sched = S.StepLR(opt, step_size=2)
    _train(model, opt, sched)
    path = tmp_path / "good.safetensors"
    vtl.save_checkpoint(path, model, opt, sched, epoch=2, metrics={"loss": 1.0})
    return path


@pytest.mark.parametrize("case", list(BAD_PARTS))
def test_load_checkpoint_bad_part_changes_nothing(backend, tmp_path, saved_checkpoint, case):
    meta_fn, arrays_fn, message = BAD_PARTS[case]
    bad = _tampered(saved_checkpoint, tmp_path / "bad.safetensors", meta_fn, arrays_fn)
    model = _model(seed=5)
    opt = optim.Adam(model.parameters(), lr=0.01)
    sched = S.StepLR(opt, step_size=3)
    _train(model, opt, sched, steps=1)
    vtl.random.seed(11)
    before = _snapshot(model, opt, sched)
    with pytest.raises(ValueError, match=r"bad\.safetensors.*" + message):
        vtl.load_checkpoint(bad, model, opt, sched)
    assert _same(_snapshot(model, opt, sched), before)
    vtl.load_checkpoint(saved_checkpoint, model, opt, sched)  # the untouched file still loads
    assert sched.step_size == 2 and not _same(_snapshot(model, opt, sched), before)


def test_save_checkpoint_refuses_an_epoch_load_checkpoint_would_refuse(tmp_path):
    path = tmp_path / "e.safetensors"
    for bad in (2.5, "3", True):
        with pytest.raises(TypeError, match="epoch must be an int or None"):
            vtl.save_checkpoint(path, _model(), epoch=bad)
    assert not path.exists()
    vtl.save_checkpoint(path, _model(), epoch=np.int64(3))
    assert vtl.load_checkpoint(path, _model())["epoch"] == 3


def test_load_checkpoint_undoes_everything_when_the_model_fails(backend, tmp_path,
                                                                 saved_checkpoint, monkeypatch):
    model = _model(seed=5)
    opt = optim.Adam(model.parameters(), lr=0.01)
    sched = S.StepLR(opt, step_size=3)
    _train(model, opt, sched, steps=1)
    before = _snapshot(model, opt, sched)

    def broken(*args, **kwargs):
        raise RuntimeError("device lost")

    monkeypatch.setattr(model, "load_state_dict", broken)
    with pytest.raises(ValueError, match="good.safetensors.*model state.*device lost"):
        vtl.load_checkpoint(saved_checkpoint, model, opt, sched)
    assert _same(_snapshot(model, opt, sched), before)


# -- schedulers: every field of every scheduler is checked at load ----------------------------
def _opt2() -> optim.Optimizer:
    a = vtl.asarray(np.ones(2), requires_grad=True)
    b = vtl.asarray(np.ones(3), requires_grad=True)
    return optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.2}], lr=0.1, momentum=0.9)


class _Halve:
    def __init__(self) -> None:
        self.rate = 0.5

    def __call__(self, e: int) -> float:
        return self.rate ** e


SCHEDULERS = {
    "lambda": lambda o: S.LambdaLR(o, [_Halve(), lambda e: 1.0]),
    "step": lambda o: S.StepLR(o, step_size=3, gamma=0.5),
    "multistep": lambda o: S.MultiStepLR(o, [2, 4, 4], gamma=0.3),
    "exponential": lambda o: S.ExponentialLR(o, gamma=0.9),
    "cosine": lambda o: S.CosineAnnealingLR(o, T_max=7, eta_min=1e-3),
    "linear": lambda o: S.LinearLR(o, start_factor=0.25, total_iters=4),
    "onecycle": lambda o: S.OneCycleLR(o, max_lr=[1.0, 2.0], total_steps=40),
    "onecycle-3": lambda o: S.OneCycleLR(o, max_lr=1.0, total_steps=40, three_phase=True,
                                         anneal_strategy="linear"),
    "sequential": lambda o: S.SequentialLR(o, [S.LinearLR(o, total_iters=3),
                                               S.StepLR(o, step_size=2)], milestones=[3]),
    "plateau": lambda o: S.ReduceLROnPlateau(o, patience=1, cooldown=1),
}


def _advance(sched, n: int = 5) -> None:
    for i in range(n):
        sched.optimizer.step()
        if isinstance(sched, S.ReduceLROnPlateau):
            sched.step(1.0 + (i % 2))
        else:
            sched.step()


@pytest.mark.parametrize("name", list(SCHEDULERS))
def test_every_scheduler_field_is_checked(name):
    sched = SCHEDULERS[name](_opt2())
    _advance(sched)
    state = sched.state_dict()
    assert set(state) <= set(type(sched)._fields), "a state field without a check"
    for field in state:
        target = SCHEDULERS[name](_opt2())
        before = _plain(target.state_dict())
        bad = {**state, field: "x"}  # a str is the wrong type for every field
        with pytest.raises(ValueError, match=rf"{type(sched).__name__}.*{field}.*'x'"):
            target.load_state_dict(bad)
        assert _same(_plain(target.state_dict()), before), field


def test_step_lr_wrong_typed_state_is_refused_at_load():
    opt = _opt2()
    sched = S.StepLR(opt, step_size=2)
    state = {**sched.state_dict(), "step_size": "x"}
    with pytest.raises(ValueError, match="StepLR.load_state_dict: field 'step_size': expected "
                                         "an int, got 'x'"):
        sched.load_state_dict(state)
    sched.step()  # unchanged, so stepping still works
    for bad in (0, 2.0, True):
        with pytest.raises(ValueError, match="step_size"):
            sched.load_state_dict({**sched.state_dict(), "step_size": bad})


def test_sequential_lr_checks_all_schedulers_before_loading_any():
    opt = _opt2()
    sched = SCHEDULERS["sequential"](opt)
    state = sched.state_dict()
    state["_schedulers"][1] = {**state["_schedulers"][1], "gamma": "x"}
    state["_schedulers"][0] = {**state["_schedulers"][0], "last_epoch": 99}
    target = SCHEDULERS["sequential"](_opt2())
    before = _plain(target.state_dict())
    with pytest.raises(ValueError, match=r"SequentialLR.*_schedulers.*scheduler 1.*gamma"):
        target.load_state_dict(state)
    assert _same(_plain(target.state_dict()), before)


@pytest.mark.parametrize("name", list(SCHEDULERS))
def test_every_scheduler_resumes_from_a_checkpoint(backend, tmp_path, name):
    model = _model()
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    opt.add_param_group({"params": [vtl.asarray(np.ones(2, np.float32), requires_grad=True)],
                         "lr": 0.2})
    sched = SCHEDULERS[name](opt)
    _advance(sched)
    path = tmp_path / "s.safetensors"
    vtl.save_checkpoint(path, model, opt, sched)
    model2 = _model(1)
    opt2 = optim.SGD(model2.parameters(), lr=0.1, momentum=0.9)
    opt2.add_param_group({"params": [vtl.asarray(np.ones(2, np.float32), requires_grad=True)],
                          "lr": 0.2})
    sched2 = SCHEDULERS[name](opt2)
    vtl.load_checkpoint(path, model2, opt2, sched2)
    for _ in range(6):
        _advance(sched)
        _advance(sched2)
        assert [g["lr"] for g in opt2.param_groups] == [g["lr"] for g in opt.param_groups]


# -- optimizers ---------------------------------------------------------------------------------
def _adam():
    model = _model()
    opt = optim.Adam(model.parameters(), lr=0.1)
    _train(model, opt)
    return model, opt


@pytest.mark.parametrize("edit, message", [
    (lambda sd: sd["state"].__setitem__("0", sd["state"].pop(0)), r"state key '0' is not a "
     r"parameter index"),
    (lambda sd: sd["state"][1].__setitem__("bogus", sd["state"][1]["exp_avg"]),
     r"unknown state 'bogus' for parameter 1; a Adam keeps \['exp_avg', 'exp_avg_sq', "
     r"'max_exp_avg_sq', 'step'\]"),
    (lambda sd: sd["state"][2].__setitem__("step", "x"),
     r"state 'step' of parameter 2 must be a non-negative integer, got 'x'"),
    (lambda sd: sd["state"][3].pop("exp_avg_sq"), r"state of parameter 3 lacks \['exp_avg_sq'\]"),
    (lambda sd: sd["state"][3].__setitem__("exp_avg", 0.5),
     r"state 'exp_avg' of parameter 3 must be an array of shape \(2,\), got 0.5"),
    (lambda sd: sd["state"][0].__setitem__("exp_avg", "zeros"), r"state 'exp_avg' of parameter 0"),
    (lambda sd: sd["state"].__setitem__(0, [1, 2]), r"state of parameter 0 must be a dict"),
    (lambda sd: sd["param_groups"][0].__setitem__("params", [0, 0, 1, 2]),
     r"lists 0, expected parameter indices"),
    (lambda sd: sd["param_groups"][0].__setitem__("maximize", "no"), r"maximize must be True or "
     r"False, got 'no'"),
])
def test_optimizer_load_state_dict_is_all_or_nothing(backend, edit, message):
    _, opt = _adam()
    sd = opt.state_dict()
    edit(sd)
    model2 = _model(3)
    opt2 = optim.Adam(model2.parameters(), lr=0.5)
    _train(model2, opt2, steps=1)
    before = _plain(opt2.state_dict())
    with pytest.raises(ValueError, match="Adam.*" + message):
        opt2.load_state_dict(sd)
    assert _same(_plain(opt2.state_dict()), before)


def test_optimizer_step_accepts_integral_numbers(backend):
    _, opt = _adam()
    sd = opt.state_dict()
    sd["state"][0]["step"] = 2.0
    sd["state"][1]["step"] = np.int64(2)
    opt.load_state_dict(sd)
    assert opt.state_dict()["state"][0]["step"] == 2 and isinstance(
        opt.state_dict()["state"][1]["step"], int)
    with pytest.raises(ValueError, match="step"):
        opt.load_state_dict({**sd, "state": {0: {**sd["state"][0], "step": 2.5}}})


def test_sgd_keeps_only_its_state_names(backend):
    p = vtl.asarray(np.ones(3, np.float32), requires_grad=True)
    opt = optim.SGD([p], lr=0.1, momentum=0.9)
    sd = {"state": {0: {"momentum_buffer": None, "exp_avg": np.zeros(3, np.float32)}},
          "param_groups": opt.state_dict()["param_groups"]}
    with pytest.raises(ValueError, match="unknown state 'exp_avg'.*momentum_buffer"):
        opt.load_state_dict(sd)
    opt.load_state_dict({**sd, "state": {0: {"momentum_buffer": None}}})


# -- the RNG and the history -------------------------------------------------------------------
def test_generator_set_state_refuses_unknown_keys_and_changes_nothing():
    g = vtl.random.Generator(3)
    g.random(5)
    before = g.get_state()
    for bad in ({**before, "extra": 1}, {**before, "seed": "7"}, {**before, "seed": 2**64},
                {**before, "counter": 1.5}):
        with pytest.raises(ValueError, match="Generator.set_state"):
            g.set_state(bad)
        assert g.get_state() == before


def test_history_load_state_dict_is_all_or_nothing():
    h = History()
    h.append(1, {"loss": 1.0})
    before = h.state_dict()
    for bad in ({"history": {"loss": [1.0, 2.0]}, "epoch": ["x", 2]},
                {"history": {"loss": ["a", 2.0]}, "epoch": [1, 2]},
                {"history": {"loss": [1.0]}, "epoch": [1, 2]},
                {"history": [], "epoch": []}, {"epoch": [1]}):
        with pytest.raises(ValueError, match="History.load_state_dict"):
            h.load_state_dict(bad)
        assert h.state_dict() == before


def test_resume_refuses_a_bad_history_before_restoring_anything(backend, tmp_path):
    model = _model()
    opt = optim.Adam(model.parameters(), lr=0.1)
    _train(model, opt)
    path = tmp_path / "r.safetensors"
    vtl.save_checkpoint(path, model, opt, epoch=2,
                        history={"history": {"loss": [1.0, "nan?"]}, "epoch": [1, 2]})
    model2 = _model(4)
    opt2 = optim.Adam(model2.parameters(), lr=0.01)
    before = (_plain(model2.state_dict()), _plain(opt2.state_dict()))
    state = FitState(model=model2, optimizer=opt2, loss_fn=lambda a, b: a, epochs=3)
    with pytest.raises(ValueError, match=r"r\.safetensors.*extra state.*history\['loss'\]"):
        Resume(path).on_train_begin(state)
    assert _same((_plain(model2.state_dict()), _plain(opt2.state_dict())), before)
    assert state.initial_epoch == 0 and len(state.history) == 0


# -- killed writers, temporaries and file modes -----------------------------------------------
_WRITER = """
import os, sys, time
import numpy as np
import vtl

def pause(fd):  # the bytes are written: stop here until killed
    sys.stdout.write("ready\\n")
    sys.stdout.flush()
    time.sleep(600)

os.fsync = pause
if sys.argv[2] == "save":
    vtl.save({"w": np.zeros(100_000, np.float32)}, sys.argv[1])
else:
    vtl.save_checkpoint(sys.argv[1], vtl.nn.Linear(300, 300))
"""


def _paused_writer(target: Path, how: str) -> subprocess.Popen:
    """A process writing ``target``, stopped after writing its temporary, before the rename."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), os.environ.get("PYTHONPATH", "")]), "VTL_BACKEND": "numpy"}
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(target), how],
                            stdout=subprocess.PIPE, env=env, text=True)
    line = proc.stdout.readline()
    if line.strip() != "ready":
        proc.kill()
        proc.wait()
        pytest.fail(f"the writer process did not reach its write (said {line!r})")
    return proc


def _kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()


def _temporaries(folder: Path) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n.endswith(".tmp"))


needs_posix = pytest.mark.skipif(os.name != "posix" or not hasattr(signal, "SIGKILL"),
                                 reason="needs POSIX processes and SIGKILL")


@needs_posix
@pytest.mark.parametrize("how", ["save", "save_checkpoint"])
def test_temporaries_of_killed_writers_are_removed_by_the_next_save(tmp_path, how):
    target = tmp_path / "m.safetensors"
    for _ in range(3):  # each writer removes the temporary of the one killed before it
        _kill(_paused_writer(target, how))
        (left,) = _temporaries(tmp_path)
        assert left.startswith(".m.safetensors.") and not target.exists()
    if how == "save":
        vtl.save({"w": vtl.ones(4)}, target)
        np.testing.assert_array_equal(to_numpy(vtl.load(target)["w"]), np.ones(4, np.float32))
    else:
        vtl.save_checkpoint(target, _model())
        vtl.load_checkpoint(target, _model(1))
    assert _temporaries(tmp_path) == []


@needs_posix
def test_temporary_of_a_live_writer_is_kept(tmp_path):
    target = tmp_path / "m.safetensors"
    other = tmp_path / "other.safetensors"
    live = _paused_writer(target, "save")
    try:
        (dead_tmp,) = _temporaries(tmp_path)
        vtl.save({"w": vtl.ones(2)}, target)  # a save by another process does not touch it
        vtl.save({"w": vtl.ones(2)}, other)
        assert _temporaries(tmp_path) == [dead_tmp]
    finally:
        _kill(live)
    vtl.save({"w": vtl.zeros(2)}, other)  # another target's save leaves it alone
    assert _temporaries(tmp_path) == [dead_tmp]
    vtl.save({"w": vtl.zeros(2)}, target)
    assert _temporaries(tmp_path) == []


@needs_posix
def test_temporaries_of_other_hosts_are_kept(tmp_path):
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead = int(done.stdout)  # a process id that has exited
    here = vio._host_tag()
    foreign = "0" * 8 if here != "0" * 8 else "1" * 8
    mine = tmp_path / f".m.safetensors.{here}-{dead}-0123abcd.tmp"
    theirs = tmp_path / f".m.safetensors.{foreign}-{dead}-0123abcd.tmp"
    unrelated = tmp_path / ".m.safetensors.notes.tmp"
    for p in (mine, theirs, unrelated):
        p.write_bytes(b"x")
    vtl.save({"w": vtl.ones(2)}, tmp_path / "m.safetensors")
    assert not mine.exists() and theirs.exists() and unrelated.exists()


@needs_posix
@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664)])
def test_saved_files_get_the_umask_mode(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        vtl.save({"w": vtl.ones(2)}, tmp_path / "a.safetensors")
        vtl.save(vtl.ones(2), tmp_path / "a.safetensors")  # replacing an existing file
        vtl.save_checkpoint(tmp_path / "c.safetensors", _model())
    finally:
        os.umask(old)
    for name in ("a.safetensors", "c.safetensors"):
        assert (tmp_path / name).stat().st_mode & 0o777 == mode, name


# -- dtypes the format holds and vtl cannot read yet ------------------------------------------
def _raw_file(tensors: dict[str, tuple[str, list[int], bytes]],
              metadata: dict[str, str] | None = None) -> bytes:
    """A safetensors file written by hand: name -> (dtype code, shape, raw bytes)."""
    header, blobs, offset = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


# dtype code -> bytes for 4 elements
UNSUPPORTED = {"F8_E4M3": 4, "F8_E5M2": 4, "F8_E8M0": 4, "F8_E4M3FNUZ": 4,
               "F8_E5M2FNUZ": 4, "F4": 2, "F6_E2M3": 3, "F6_E3M2": 3}


def _file_with(tmp_path: Path, dtype: str) -> Path:
    data = _raw_file({"bias": ("F32", [2], np.ones(2, np.float32).tobytes()),
                      "weight": (dtype, [4], b"\x3f" * UNSUPPORTED[dtype])})
    try:
        safetensors.deserialize(data)
    except Exception as exc:
        pytest.skip(f"the installed safetensors does not know {dtype}: {exc}")
    path = tmp_path / f"{dtype}.safetensors"
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("dtype", list(UNSUPPORTED))
def test_unsupported_dtype_is_named_not_called_corrupt(backend, tmp_path, dtype):
    path = _file_with(tmp_path, dtype)
    with pytest.raises(TypeError, match=rf"{dtype}.safetensors.*tensor 'weight' has dtype "
                                        rf"{dtype} \(.*\), which vtl does not support yet"
                       ) as info:
        vtl.load(path)
    assert "not a valid" not in str(info.value) and "'bias'" not in str(info.value)


def test_bfloat16_checkpoint_entries_load_as_bfloat16(backend, tmp_path):
    """A BF16 entry (bfloat16 since vtl has the dtype) loads into the model, converted to
    the parameter's float32 as load_state_dict does."""
    model = _model()
    path = tmp_path / "bf.safetensors"
    vtl.save_checkpoint(path, model)
    raw = path.read_bytes()
    (hlen,) = struct.unpack("<Q", raw[:8])
    meta = json.loads(raw[8:8 + hlen])["__metadata__"]
    arrays = stnp.load_file(str(path))
    tensors = {k: ({"float32": "F32"}[str(v.dtype)], list(v.shape), v.tobytes())
               for k, v in arrays.items()}
    w = arrays["model.0.weight"]
    tensors["model.0.weight"] = ("BF16", list(w.shape),
                                 (w.view(np.uint32) >> 16).astype(np.uint16).tobytes())
    path.write_bytes(_raw_file(tensors, meta))
    loaded = vtl.load(path)
    assert loaded["model.0.weight"].dtype == vtl.bfloat16
    want = ((w.view(np.uint32) >> 16) << 16).view(np.float32)  # truncated to bfloat16
    np.testing.assert_array_equal(to_numpy(vtl.astype(loaded["model.0.weight"], vtl.float32)),
                                  want)


def test_corrupt_files_are_still_called_corrupt(tmp_path):
    cases = {
        "unknown dtype": _raw_file({"w": ("XYZ", [1], b"\0" * 4)}),
        "size mismatch": _raw_file({"w": ("F32", [3], b"\0" * 8)}),
        "bf16 size mismatch": _raw_file({"w": ("BF16", [3], b"\0" * 4)}),
    }
    for data in cases.values():
        path = tmp_path / "c.safetensors"
        path.write_bytes(data)
        with pytest.raises(ValueError, match=r"c\.safetensors.*not a valid safetensors file"):
            vtl.load(path)
