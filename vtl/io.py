"""Saving tensors, state dicts and training checkpoints in the safetensors format.

Files are plain `safetensors <https://huggingface.co/docs/safetensors>`_: other
readers (``safetensors.numpy.load_file``, ``safetensors.torch.load_file``) open
them. Every write goes to a temporary file in the target folder, is flushed to
disk and then renamed over the target (``os.replace``), so a crash never leaves
a half-written file behind.

>>> vtl.save(model.state_dict(), "model.safetensors")
>>> model.load_state_dict(vtl.load("model.safetensors"))
>>> vtl.save_checkpoint("ckpt.safetensors", model, opt, sched, epoch=3, metrics={"acc": 0.9})
>>> info = vtl.load_checkpoint("ckpt.safetensors", model, opt, sched)   # {'epoch': 3, ...}

A checkpoint stores the model's state under ``model.<name>``, tensor entries of
the optimizer state under ``optimizer.<param index>.<key>``, and in the header
metadata (key ``vtl.checkpoint``, a JSON string) the optimizer's param groups
and scalar state, the scheduler state, epoch, metrics, extra values and the
state of the default ``vtl.random`` generator.
"""

from __future__ import annotations

import json
import math
import os
import struct
import tempfile
from collections import Counter, OrderedDict
from typing import Any

import numpy as np

import vtl

from ._tensor import Tensor
from .backends import resolve_device

__all__ = ["load", "load_checkpoint", "save", "save_checkpoint"]

_FORMAT_KEY = "vtl.format"
_CKPT_KEY = "vtl.checkpoint"
_TENSOR_NAME = "tensor"
_CKPT_VERSION = 1


# -- files ------------------------------------------------------------------------------------
def _atomic_write(path: Any, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".",
                               suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _host(t: Any, name: str) -> np.ndarray:
    if isinstance(t, Tensor):
        a = t.detach().numpy()
    elif isinstance(t, np.ndarray):
        a = t
    else:
        raise TypeError(f"vtl.save: value for {name!r} must be a Tensor or NumPy array, got "
                        f"{type(t).__name__}")
    if a.dtype.kind == "c":
        raise TypeError(f"vtl.save: {name!r} has dtype {a.dtype}; the safetensors format has "
                        "no complex dtypes (save the real and imaginary parts)")
    return a if a.flags.c_contiguous else np.array(a, order="C")  # keeps 0-d shapes


def _serialize(arrays: dict[str, np.ndarray], metadata: dict[str, str]) -> bytes:
    from safetensors.numpy import save as st_save

    return st_save(arrays, metadata=metadata)


def _read(path: Any, what: str) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Tensors and metadata of a safetensors file; ``ValueError`` naming the file if bad."""
    from safetensors.numpy import load as st_load

    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ValueError(f"{what}: file {path!r} does not exist")
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{what}: {path!r} is not a safetensors file (only {len(data)} bytes, "
                         "truncated or empty)")
    (hlen,) = struct.unpack("<Q", data[:8])
    if hlen > len(data) - 8:
        raise ValueError(f"{what}: {path!r} is truncated or not a safetensors file (header of "
                         f"{hlen} bytes, file has {len(data) - 8} after the length)")
    try:
        header = json.loads(data[8:8 + hlen].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{what}: {path!r} has a corrupt safetensors header: {exc}") from None
    if not isinstance(header, dict):
        raise ValueError(f"{what}: {path!r} has a corrupt safetensors header (not a JSON object)")
    metadata = header.get("__metadata__") or {}
    end = 0
    for k, v in header.items():
        if k != "__metadata__":
            try:
                end = max(end, int(v["data_offsets"][1]))
            except (TypeError, KeyError, IndexError, ValueError):
                raise ValueError(f"{what}: {path!r} has a corrupt entry for {k!r} in its "
                                 "header") from None
    if 8 + hlen + end > len(data):
        raise ValueError(f"{what}: {path!r} is truncated: its header describes "
                         f"{8 + hlen + end} bytes, the file has {len(data)}")
    try:
        arrays = st_load(data)
    except Exception as exc:  # safetensors raises its own error type
        raise ValueError(f"{what}: {path!r} is not a valid safetensors file: {exc}") from None
    return arrays, metadata


# -- tensors and state dicts -------------------------------------------------------------------
def save(obj: Any, path: Any, metadata: dict[str, str] | None = None) -> None:
    """Save a Tensor, or a dict of name -> Tensor (a ``state_dict``), to ``path``.

    Tensors are copied to the host; ``metadata`` (str -> str) goes into the
    header. Complex tensors are refused (the format has no complex dtypes).
    """
    meta = {str(k): str(v) for k, v in (metadata or {}).items()}
    if isinstance(obj, (Tensor, np.ndarray)):
        arrays = {_TENSOR_NAME: _host(obj, _TENSOR_NAME)}
        meta[_FORMAT_KEY] = "tensor"
    elif isinstance(obj, dict):
        arrays = {}
        for k, v in obj.items():
            if not isinstance(k, str):
                raise TypeError(f"vtl.save: dict keys must be strings, got {k!r}")
            arrays[k] = _host(v, k)
        meta[_FORMAT_KEY] = "dict"
    else:
        raise TypeError(f"vtl.save: expected a Tensor or a dict of name -> Tensor, got "
                        f"{type(obj).__name__}")
    _atomic_write(path, _serialize(arrays, meta))


def _to_tensors(arrays: dict[str, np.ndarray], device: Any) -> OrderedDict[str, Tensor]:
    dev = resolve_device(device)
    return OrderedDict((k, vtl.asarray(v, device=dev)) for k, v in arrays.items())


def load(path: Any, device: Any = None) -> Any:
    """Load what :func:`save` wrote: a Tensor, or a dict of name -> Tensor (in file
    order) for a state dict or any other safetensors file. Tensors go to ``device``
    (default: the default device). ``ValueError`` names a missing/corrupt file."""
    arrays, meta = _read(path, "vtl.load")
    tensors = _to_tensors(arrays, device)
    if meta.get(_FORMAT_KEY) == "tensor" and list(tensors) == [_TENSOR_NAME]:
        return tensors[_TENSOR_NAME]
    return tensors


# -- JSON for metadata (tuples, Counters and int-keyed dicts survive the round trip) -----------
def _enc(v: Any, where: str) -> Any:
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else {"__float__": repr(v)}
    if isinstance(v, (np.integer, np.floating, np.bool_)):
        return _enc(v.item(), where)
    if isinstance(v, Tensor) and v.ndim == 0:
        return _enc(v.item(), where)
    if isinstance(v, tuple):
        return {"__tuple__": [_enc(x, where) for x in v]}
    if isinstance(v, list):
        return [_enc(x, where) for x in v]
    if isinstance(v, dict):
        if type(v) is dict and all(isinstance(k, str) and not k.startswith("__") for k in v):
            return {k: _enc(x, f"{where}.{k}") for k, x in v.items()}
        return {"__items__": [[_enc(k, where), _enc(x, where)] for k, x in v.items()],
                "__type__": "Counter" if isinstance(v, Counter) else "dict"}
    raise TypeError(f"vtl.save_checkpoint: cannot store {where} (a {type(v).__name__}) in the "
                    "checkpoint metadata; only numbers, strings, lists, tuples and dicts")


def _dec(v: Any) -> Any:
    if isinstance(v, list):
        return [_dec(x) for x in v]
    if isinstance(v, dict):
        if "__float__" in v:
            return float(v["__float__"])
        if "__tuple__" in v:
            return tuple(_dec(x) for x in v["__tuple__"])
        if "__items__" in v:
            items = [(_dec(k), _dec(x)) for k, x in v["__items__"]]
            return Counter(dict(items)) if v.get("__type__") == "Counter" else dict(items)
        return {k: _dec(x) for k, x in v.items()}
    return v


# -- checkpoints -------------------------------------------------------------------------------
def save_checkpoint(path: Any, model: Any, optimizer: Any = None, scheduler: Any = None,
                    epoch: int | None = None, metrics: dict[str, Any] | None = None,
                    **extra: Any) -> None:
    """Write model + optimizer + scheduler + epoch + metrics + RNG state to one
    safetensors file, atomically. ``extra`` values must be JSON-like (numbers,
    strings, lists, tuples, dicts)."""
    arrays: dict[str, np.ndarray] = {}
    for k, v in model.state_dict().items():
        arrays[f"model.{k}"] = _host(v, k)
    meta: dict[str, Any] = {"version": _CKPT_VERSION, "epoch": epoch,
                            "metrics": dict(metrics or {}), "extra": extra,
                            "rng": vtl.random.get_state(), "model_type": type(model).__name__}
    if optimizer is not None:
        sd = optimizer.state_dict()
        scalars: dict[str, dict[str, Any]] = {}
        for idx, st in sd["state"].items():
            for key, val in st.items():
                if isinstance(val, (Tensor, np.ndarray)) and getattr(val, "ndim", 0) > 0:
                    arrays[f"optimizer.{idx}.{key}"] = _host(val, f"optimizer state {key}")
                else:
                    scalars.setdefault(str(idx), {})[key] = val
        meta["optimizer"] = {"type": type(optimizer).__name__, "param_groups": sd["param_groups"],
                             "scalars": scalars}
    if scheduler is not None:
        meta["scheduler"] = {"type": type(scheduler).__name__, "state": scheduler.state_dict()}
    blob = json.dumps(_enc(meta, "checkpoint"), allow_nan=False)
    _atomic_write(path, _serialize(arrays, {_FORMAT_KEY: "checkpoint", _CKPT_KEY: blob}))


def load_checkpoint(path: Any, model: Any, optimizer: Any = None, scheduler: Any = None,
                    strict: bool = True) -> dict[str, Any]:
    """Restore what :func:`save_checkpoint` wrote; returns ``{'epoch', 'metrics', 'extra'}``.

    Everything is validated first (the file, the model's keys, shapes and dtypes,
    the optimizer's groups and state shapes, the presence of scheduler state):
    on any problem a ``ValueError`` naming the file is raised and the model,
    optimizer and scheduler are left unchanged. ``strict=False`` tolerates
    missing/unexpected model keys and absent optimizer/scheduler state. The
    default ``vtl.random`` generator is restored to its saved state.
    """
    fname = os.fspath(path)
    what = "vtl.load_checkpoint"
    arrays, raw_meta = _read(fname, what)
    if _CKPT_KEY not in raw_meta:
        raise ValueError(f"{what}: {fname!r} is a safetensors file but not a vtl checkpoint "
                         f"(no {_CKPT_KEY!r} metadata)")
    try:
        meta = _dec(json.loads(raw_meta[_CKPT_KEY]))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{what}: {fname!r} has corrupt checkpoint metadata: {exc}") from None
    if not isinstance(meta, dict) or meta.get("version") != _CKPT_VERSION:
        raise ValueError(f"{what}: {fname!r} has checkpoint metadata of an unknown version "
                         f"({meta.get('version') if isinstance(meta, dict) else meta!r})")

    def fail(msg: str) -> ValueError:
        return ValueError(f"{what}: {fname!r}: {msg}")

    # model: keys, shapes, dtypes
    saved = {k[6:]: v for k, v in arrays.items() if k.startswith("model.")}
    own = model.state_dict()
    problems = []
    missing = [k for k in own if k not in saved]
    unexpected = [k for k in saved if k not in own]
    if strict and missing:
        problems.append(f"missing key(s) {missing}")
    if strict and unexpected:
        problems.append(f"unexpected key(s) {unexpected}")
    for k, t in own.items():
        if k in saved:
            a = saved[k]
            if tuple(a.shape) != tuple(t.shape):
                problems.append(f"{k}: shape {tuple(a.shape)} in the file, {tuple(t.shape)} "
                                "in the model")
            elif a.dtype != np.dtype(str(t.dtype)):
                problems.append(f"{k}: dtype {a.dtype} in the file, {t.dtype} in the model")
    if problems:
        raise fail("model state does not match: " + "; ".join(problems))
    # optimizer: groups and state shapes
    opt_sd = None
    if optimizer is not None:
        om = meta.get("optimizer")
        if om is None:
            if strict:
                raise fail("the checkpoint holds no optimizer state")
        else:
            groups = om["param_groups"]
            params = [p for g in optimizer.param_groups for p in g["params"]]
            if len(groups) != len(optimizer.param_groups) or any(
                    len(sg["params"]) != len(g["params"])
                    for sg, g in zip(groups, optimizer.param_groups, strict=False)):
                raise fail(f"optimizer has {[len(g['params']) for g in optimizer.param_groups]} "
                           f"parameters per group, the checkpoint "
                           f"{[len(g['params']) for g in groups]}")
            if om.get("type") != type(optimizer).__name__:
                raise fail(f"checkpoint holds {om.get('type')} state, the optimizer is a "
                           f"{type(optimizer).__name__}")
            state: dict[int, dict[str, Any]] = {}
            for idx, sc in om["scalars"].items():
                state.setdefault(int(idx), {}).update(sc)
            for k, a in arrays.items():
                if k.startswith("optimizer."):
                    _, idx, key = k.split(".", 2)
                    i = int(idx)
                    if not 0 <= i < len(params) or tuple(a.shape) != tuple(params[i].shape):
                        raise fail(f"optimizer state {k} of shape {tuple(a.shape)} does not "
                                   "match the parameter")
                    state.setdefault(i, {})[key] = a
            for cur, sg in zip(optimizer.param_groups, groups, strict=True):
                for key, val in list(sg.items()):
                    if isinstance(cur.get(key), tuple) and isinstance(val, list):
                        sg[key] = tuple(val)
            opt_sd = {"state": state, "param_groups": groups}
    sched_state = None
    if scheduler is not None:
        sm = meta.get("scheduler")
        if sm is None:
            if strict:
                raise fail("the checkpoint holds no scheduler state")
        elif sm.get("type") != type(scheduler).__name__:
            raise fail(f"checkpoint holds {sm.get('type')} state, the scheduler is a "
                       f"{type(scheduler).__name__}")
        else:
            sched_state = sm["state"]
    # apply: optimizer first (restorable), then model (validated above), then the rest
    old_opt = None
    if opt_sd is not None:
        old_opt = ([dict(g) for g in optimizer.param_groups], optimizer.state)
        try:
            optimizer.load_state_dict(opt_sd)
        except (ValueError, TypeError, KeyError) as exc:
            optimizer.param_groups[:] = old_opt[0]
            optimizer.state = old_opt[1]
            raise fail(f"cannot restore the optimizer: {exc}") from exc
    try:
        model.load_state_dict(saved, strict=strict)
    except (RuntimeError, ValueError, TypeError) as exc:
        if old_opt is not None:
            optimizer.param_groups[:] = old_opt[0]
            optimizer.state = old_opt[1]
        raise fail(f"cannot restore the model: {exc}") from exc
    if sched_state is not None:
        scheduler.load_state_dict(sched_state)
    if meta.get("rng") is not None:
        vtl.random.set_state(meta["rng"])
    return {"epoch": meta.get("epoch"), "metrics": meta.get("metrics", {}),
            "extra": meta.get("extra", {})}
