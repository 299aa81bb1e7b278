"""Saving tensors, state dicts and training checkpoints in the safetensors format.

Files are plain `safetensors <https://huggingface.co/docs/safetensors>`_: other
readers (``safetensors.numpy.load_file``, ``safetensors.torch.load_file``) open
them. Every write goes to a temporary file in the target folder, is flushed to
disk and then renamed over the target (``os.replace``), so a crash never leaves
a half-written file behind (see :func:`save` for how the temporaries of killed
writers are cleaned up). Loading changes nothing unless everything loads.

>>> vtl.save(model.state_dict(), "model.safetensors")
>>> model.load_state_dict(vtl.load("model.safetensors"))
>>> vtl.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 3},
...          "ckpt.safetensors")                 # any nesting, as with torch.save
>>> ck = vtl.load("ckpt.safetensors"); opt.load_state_dict(ck["optimizer"])
>>> vtl.save_checkpoint("ckpt.safetensors", model, opt, sched, epoch=3, metrics={"acc": 0.9})
>>> info = vtl.load_checkpoint("ckpt.safetensors", model, opt, sched)   # {'epoch': 3, ...}

A nested object (:func:`save`) keeps each tensor as an entry named by its key path and
the structure as JSON in the header metadata (key ``vtl.tree``); nothing is pickled.

A checkpoint stores the model's state under ``model.<name>``, tensor entries of
the optimizer state under ``optimizer.<param index>.<key>``, and in the header
metadata (key ``vtl.checkpoint``, a JSON string) the optimizer's param groups
and scalar state, the scheduler state, epoch, metrics, extra values and the
state of the default ``vtl.random`` generator.
"""

from __future__ import annotations

import hashlib
import json
import math
import operator
import os
import re
import secrets
import socket
import struct
from collections import Counter, OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

import vtl

from ._tensor import Tensor
from .backends import _dtypes, resolve_device
from .backends._dtypes import kind as _dkind

__all__ = ["load", "load_checkpoint", "save", "save_checkpoint"]

_FORMAT_KEY = "vtl.format"
_CKPT_KEY = "vtl.checkpoint"
_TENSOR_NAME = "tensor"
_CKPT_VERSION = 1


# -- files ------------------------------------------------------------------------------------
# A temporary is named ".<target name>.<host>-<pid>-<random>.tmp": the writer's host (a hash of
# its name) and process id say whether the writer can still be running.
_TMP_PATTERN = re.compile(r"(?P<host>[0-9a-f]{8})-(?P<pid>[0-9]+)-[0-9a-f]{8}")


def _host_tag() -> str:
    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


def _pid_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host may still be running (``True`` when unsure)."""
    if pid <= 0 or os.name != "posix":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: it exists, under another user
        return True
    try:  # a killed process its parent has not reaped yet is a zombie: it writes no more
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return True


def _remove_stale_temporaries(path: str) -> None:
    """Delete the temporaries of ``path`` left by dead writers of this host."""
    folder, base = os.path.split(os.path.abspath(path))
    prefix, host = f".{base}.", _host_tag()
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        if not (name.startswith(prefix) and name.endswith(".tmp")):
            continue
        m = _TMP_PATTERN.fullmatch(name[len(prefix):-4])
        if m is None or m["host"] != host or _pid_alive(int(m["pid"])):
            continue
        try:
            os.unlink(os.path.join(folder, name))
        except OSError:
            pass


def _atomic_write(path: Any, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename (see :func:`save`)."""
    path = os.fspath(path)
    _remove_stale_temporaries(path)
    folder, base = os.path.split(os.path.abspath(path))
    tmp = os.path.join(folder, f".{base}.{_host_tag()}-{os.getpid()}-{secrets.token_hex(4)}.tmp")
    # mode 0o666 minus the umask, as open(path, "w") gives
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
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
    if os.name == "posix":  # make the rename itself durable
        try:
            dfd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        except OSError:
            pass


def _host(t: Any, name: str) -> np.ndarray:
    if isinstance(t, Tensor):
        a = t.detach().numpy()
    elif isinstance(t, np.ndarray):
        a = t
    else:
        raise TypeError(f"vtl.save: value for {name!r} must be a Tensor or NumPy array, got "
                        f"{type(t).__name__}")
    if _dkind(a.dtype) == "c":
        raise TypeError(f"vtl.save: {name!r} has dtype {a.dtype}; the safetensors format has "
                        "no complex dtypes (save the real and imaginary parts)")
    return a if a.flags.c_contiguous else np.array(a, order="C")  # keeps 0-d shapes


def _serialize(arrays: dict[str, np.ndarray], metadata: dict[str, str]) -> bytes:
    from safetensors.numpy import save as st_save

    return st_save(arrays, metadata=metadata)


# safetensors dtype -> NumPy dtype, for those vtl reads; the others the format can hold
_NP_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64,
              "U64": np.uint64, "I32": np.int32, "U32": np.uint32, "I16": np.int16,
              "U16": np.uint16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_,
              "C64": np.complex64, "BF16": _dtypes.bfloat16}
_UNSUPPORTED_DTYPES = {"F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2",
                       "F8_E8M0": "float8_e8m0fnu", "F8_E4M3FNUZ": "float8_e4m3fnuz",
                       "F8_E5M2FNUZ": "float8_e5m2fnuz", "F4": "float4_e2m1fn",
                       "F6_E2M3": "float6_e2m3fn", "F6_E3M2": "float6_e3m2fn"}


def _read(path: Any, what: str) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Tensors and metadata of a safetensors file.

    ``ValueError`` naming the file if it is missing or corrupt; ``TypeError``
    naming the tensors if they have a dtype vtl does not support (the float8/6/4
    formats).
    """
    from safetensors import deserialize

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
        entries = deserialize(data)  # checks the whole file, whatever the dtypes
    except Exception as exc:  # safetensors raises its own error type
        raise ValueError(f"{what}: {path!r} is not a valid safetensors file: {exc}") from None
    unsupported = [(k, e["dtype"]) for k, e in entries if e["dtype"] not in _NP_DTYPES]
    if unsupported:
        names = "; ".join(f"tensor {k!r} has dtype {dt} ({_UNSUPPORTED_DTYPES.get(dt, dt)}), "
                          "which vtl does not support yet" for k, dt in unsupported)
        raise TypeError(f"{what}: {path!r}: {names} (convert to bfloat16, float16 or float32 "
                        "to load it with vtl)")
    arrays = {k: np.frombuffer(e["data"], dtype=_NP_DTYPES[e["dtype"]]).reshape(e["shape"])
              for k, e in entries}
    return arrays, metadata


# -- tensors and state dicts -------------------------------------------------------------------
def save(obj: Any, path: Any, metadata: dict[str, str] | None = None) -> None:
    """Save a Tensor, a dict of name -> Tensor (a ``state_dict``), or any nesting of
    dicts, lists and tuples holding tensors, NumPy arrays and plain values (what
    ``torch.save`` users keep in a training checkpoint: ``{'model': model.state_dict(),
    'optimizer': opt.state_dict(), 'epoch': 3}``) to ``path``, as one safetensors file.

    * A Tensor, or a dict whose keys are strings and whose values are all tensors or
      arrays, is written as plain safetensors entries (any safetensors reader opens it).
    * Anything else is a *tree*: each tensor or array is one safetensors entry, named by
      its key path (``optimizer.state.0.exp_avg``), and the structure (dict types and key
      types, lists, tuples, ``None``, bools, ints, floats including nan/inf, complex
      numbers, strings, bytes, NumPy scalars, and which entries are vtl tensors,
      Parameters or NumPy arrays) is JSON in the header metadata (key ``vtl.tree``). A
      tensor that appears several times is stored once and loads as one object. No
      pickle is involved: loading never runs code from the file.

    Any other object (a module, a function, a set, an instance of a user class ...) is a
    ``TypeError`` naming its key path (``obj['optimizer']['state'][0]['foo']``), raised
    before anything is written. Tensors are copied to the host; complex tensors are
    refused (the format has no complex dtypes). ``metadata`` (str -> str) goes into the
    header too.

    The bytes go to ``.<name>.<host>-<pid>-<random>.tmp`` next to ``path``, are
    flushed to disk and renamed over ``path``; the file gets the mode
    ``open(path, "w")`` would give a new file (0o666 less the umask). A writer
    killed before the rename leaves its temporary behind; the next save to the
    same ``path`` deletes the temporaries whose writer (same host, by process
    id) is no longer running, and keeps those of live writers. (On non-POSIX
    systems, where liveness is not checked, temporaries are kept.)

    Example:
        >>> model = nn.Linear(2, 1)
        >>> vtl.save(model.state_dict(), "linear.safetensors")
        >>> sorted(vtl.load("linear.safetensors"))
        ['bias', 'weight']
    """
    meta = {str(k): str(v) for k, v in (metadata or {}).items()}
    if isinstance(obj, (Tensor, np.ndarray)):
        arrays = {_TENSOR_NAME: _host(obj, _TENSOR_NAME)}
        meta[_FORMAT_KEY] = "tensor"
    elif isinstance(obj, dict) and all(isinstance(k, str) for k in obj) \
            and all(isinstance(v, (Tensor, np.ndarray)) for v in obj.values()):
        arrays = {k: _host(v, k) for k, v in obj.items()}
        meta[_FORMAT_KEY] = "dict"
    elif isinstance(obj, (dict, list, tuple)):
        writer = _TreeWriter()
        tree = writer.encode(obj, "obj", ())
        arrays = writer.arrays
        meta[_FORMAT_KEY] = "tree"
        meta[_TREE_KEY] = json.dumps({"version": _TREE_VERSION, "tree": tree}, allow_nan=False)
    else:
        raise TypeError(f"vtl.save: expected a Tensor, or a dict, list or tuple (of tensors, "
                        f"arrays and plain values), got {type(obj).__name__}")
    _atomic_write(path, _serialize(arrays, meta))


_TREE_KEY = "vtl.tree"
_TREE_VERSION = 1
_DICT_TYPES = {"dict": dict, "OrderedDict": OrderedDict}


class _TreeWriter:
    """Encodes a nested object as JSON, collecting its tensors and arrays as entries."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        self.names: dict[int, str] = {}  # id(tensor) -> entry name (stored once)
        self.keep: list[Any] = []  # the objects named in self.names stay alive meanwhile

    def _entry(self, value: Any, where: str, path: tuple[str, ...]) -> str:
        name = self.names.get(id(value))
        if name is not None:
            return name
        base = ".".join(path) or _TENSOR_NAME
        name, k = base, 1
        while name in self.arrays:
            name, k = f"{base}#{k}", k + 1
        self.arrays[name] = _host(value, where)  # its errors name ``where``
        self.names[id(value)] = name
        self.keep.append(value)
        return name

    def encode(self, v: Any, where: str, path: tuple[str, ...]) -> Any:
        if v is None or isinstance(v, (bool, str)):
            return v
        if type(v) is int:
            return v
        if type(v) is float:
            return v if math.isfinite(v) else {"__float__": repr(v)}
        if type(v) is complex:
            return {"__complex__": [self.encode(v.real, where, path),
                                    self.encode(v.imag, where, path)]}
        if isinstance(v, bytes):
            return {"__bytes__": v.hex()}
        if isinstance(v, Tensor):
            if v._grad_fn is not None:
                v = v.detach()  # the values; a saved graph means nothing after loading
            kind = "parameter" if _is_parameter(v) else "tensor"
            return {"__tensor__": self._entry(v, where, path), "kind": kind,
                    "requires_grad": bool(v.requires_grad)}
        if isinstance(v, np.ndarray):
            return {"__tensor__": self._entry(v, where, path), "kind": "ndarray"}
        if isinstance(v, np.generic) and _dkind(v.dtype) in "biuf":
            return {"__tensor__": self._entry(np.asarray(v), where, path), "kind": "numpy_scalar"}
        if type(v) is list:
            return [self.encode(x, f"{where}[{i}]", (*path, str(i))) for i, x in enumerate(v)]
        if type(v) is tuple:
            return {"__tuple__": [self.encode(x, f"{where}[{i}]", (*path, str(i)))
                                  for i, x in enumerate(v)]}
        if type(v) in (dict, OrderedDict):
            items = []
            for k, x in v.items():
                if not (k is None or isinstance(k, (bool, str)) or type(k) in (int, float)):
                    raise TypeError(f"vtl.save: cannot store {where}: a dict key of type "
                                    f"{type(k).__name__} ({k!r}); keys must be strings, "
                                    "ints, floats, bools or None")
                items.append((k, self.encode(x, f"{where}[{k!r}]", (*path, str(k)))))
            if type(v) is dict and all(isinstance(k, str) and not k.startswith("__")
                                       for k, _ in items):
                return dict(items)
            return {"__items__": [[self.encode(k, where, path), x] for k, x in items],
                    "__type__": type(v).__name__}
        raise TypeError(f"vtl.save: cannot store {where} (a {type(v).__module__}."
                        f"{type(v).__qualname__}): vtl.save stores tensors, NumPy arrays and "
                        "scalars, None, bools, ints, floats, complex numbers, strings, bytes "
                        "and dicts (dict, OrderedDict), lists and tuples of them; it uses no "
                        "pickle. Convert the value (e.g. to a dict of plain values) first.")


def _is_parameter(t: Tensor) -> bool:
    from .nn.modules.module import Parameter

    return isinstance(t, Parameter)


class _TreeReader:
    """Decodes the JSON of a tree (checking it all) into a plan, then builds the objects."""

    def __init__(self, arrays: dict[str, np.ndarray], what: str, fname: str) -> None:
        self.arrays = arrays
        self.what, self.fname = what, fname

    def fail(self, msg: str) -> ValueError:
        return ValueError(f"{self.what}: {self.fname!r} has a corrupt vtl.tree structure: {msg}")

    def check(self, v: Any, where: str) -> None:
        """Raise ``ValueError`` for anything :meth:`build` could not rebuild."""
        if v is None or isinstance(v, (bool, int, float, str)):
            return
        if isinstance(v, list):
            for i, x in enumerate(v):
                self.check(x, f"{where}[{i}]")
            return
        if not isinstance(v, dict):
            raise self.fail(f"{where} is a {type(v).__name__}")
        if "__tensor__" in v:
            name, kind = v["__tensor__"], v.get("kind")
            if not isinstance(name, str) or name not in self.arrays:
                raise self.fail(f"{where} names the tensor {name!r}, which the file lacks")
            if kind not in ("tensor", "parameter", "ndarray", "numpy_scalar"):
                raise self.fail(f"{where} has an unknown kind of tensor {kind!r}")
            if kind == "numpy_scalar" and self.arrays[name].ndim != 0:
                raise self.fail(f"{where}: a NumPy scalar stored with shape "
                                f"{self.arrays[name].shape}")
            return
        if "__float__" in v:
            if v["__float__"] not in ("nan", "inf", "-inf"):
                raise self.fail(f"{where}: {v['__float__']!r} is not nan, inf or -inf")
            return
        if "__complex__" in v:
            parts = v["__complex__"]
            if not (isinstance(parts, list) and len(parts) == 2):
                raise self.fail(f"{where}: a complex number needs [real, imag], got {parts!r}")
            for x in parts:
                self.check(x, where)
            return
        if "__bytes__" in v:
            try:
                bytes.fromhex(v["__bytes__"])
            except (TypeError, ValueError):
                raise self.fail(f"{where}: bytes that are not hex digits") from None
            return
        if "__tuple__" in v:
            if not isinstance(v["__tuple__"], list):
                raise self.fail(f"{where}: a tuple that is not a list")
            self.check(v["__tuple__"], where)
            return
        if "__items__" in v:
            if v.get("__type__") not in _DICT_TYPES or not isinstance(v["__items__"], list):
                raise self.fail(f"{where}: a dict of unknown type {v.get('__type__')!r}")
            for i, kv in enumerate(v["__items__"]):
                if not (isinstance(kv, list) and len(kv) == 2):
                    raise self.fail(f"{where}: item {i} is not a [key, value] pair")
                key = kv[0]
                if isinstance(key, dict) and set(key) == {"__float__"}:
                    self.check(key, where)
                elif not (key is None or isinstance(key, (bool, int, float, str))):
                    raise self.fail(f"{where}: item {i} has a key that is not a string, "
                                    f"number, bool or None: {key!r}")
                self.check(kv[1], f"{where}[{i}]")
            return
        for k, x in v.items():
            if k.startswith("__"):
                raise self.fail(f"{where}: unknown marker {k!r}")
            self.check(x, f"{where}[{k!r}]")

    def build(self, v: Any, tensors: dict[str, Any] | None) -> Any:
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, list):
            return [self.build(x, tensors) for x in v]
        if "__tensor__" in v:
            assert tensors is not None
            return tensors[v["__tensor__"], v["kind"], bool(v.get("requires_grad", False))]
        if "__float__" in v:
            return float(v["__float__"])
        if "__complex__" in v:
            re_, im = (self.build(x, tensors) for x in v["__complex__"])
            return complex(re_, im)
        if "__bytes__" in v:
            return bytes.fromhex(v["__bytes__"])
        if "__tuple__" in v:
            return tuple(self.build(x, tensors) for x in v["__tuple__"])
        if "__items__" in v:
            return _DICT_TYPES[v["__type__"]](
                (self.build(k, tensors), self.build(x, tensors)) for k, x in v["__items__"])
        return {k: self.build(x, tensors) for k, x in v.items()}

    def leaves(self, v: Any, out: set[tuple[str, str, bool]]) -> None:
        if isinstance(v, list):
            for x in v:
                self.leaves(x, out)
        elif isinstance(v, dict):
            if "__tensor__" in v:
                out.add((v["__tensor__"], v["kind"], bool(v.get("requires_grad", False))))
                return
            for k, x in v.items():
                if k in ("__items__", "__tuple__", "__complex__"):
                    self.leaves(x, out)
                elif not k.startswith("__"):
                    self.leaves(x, out)


def _to_tensors(arrays: dict[str, np.ndarray], device: Any) -> OrderedDict[str, Tensor]:
    dev = resolve_device(device)
    return OrderedDict((k, vtl.asarray(v, device=dev)) for k, v in arrays.items())


def _load_device(device: Any, map_location: Any) -> Any:
    """The device of :func:`load` from ``device`` and PyTorch's ``map_location``."""
    if map_location is None:
        return device
    if callable(map_location) or isinstance(map_location, dict):
        raise TypeError("vtl.load: map_location must be a device or a device string such as "
                        "'numpy', 'cpu', 'cuda:0' or 'wgpu' (a dict or a function, which "
                        "torch.load also takes, is not supported)")
    if device is not None and resolve_device(device) != resolve_device(map_location):
        raise ValueError(f"vtl.load: device={device!r} and map_location={map_location!r} "
                         "disagree; pass one of them")
    return map_location


def load(path: Any, device: Any = None, *, map_location: Any = None) -> Any:
    """Load what :func:`save` wrote: a Tensor, a dict of name -> Tensor (in file order; also
    for any other safetensors file), or the nested object of a tree (its dicts of the
    types saved, lists, tuples, plain values, NumPy arrays and scalars as NumPy, tensors
    as vtl tensors -- Parameters where a Parameter was saved, with ``requires_grad`` as
    saved; a tensor saved several times is one object).

    Tensors go to ``device`` (default: the default device); ``map_location`` (PyTorch's
    name) is the same argument, as a device or a string (``'cpu'`` is numpy, ``'cuda'``
    cupy). Everything is read and checked before any tensor is made, and nothing
    outside the returned object changes, so a failed load leaves no trace.
    ``ValueError`` names a missing/corrupt file; ``TypeError`` names the tensors of a
    dtype vtl does not support yet (the float8/float6/float4 formats; float16 and
    bfloat16 load as themselves).
    """
    device = _load_device(device, map_location)
    arrays, meta = _read(path, "vtl.load")
    fmt = meta.get(_FORMAT_KEY)
    if fmt == "tree":
        return _load_tree(arrays, meta, device, os.fspath(path))
    tensors = _to_tensors(arrays, device)
    if fmt == "tensor" and list(tensors) == [_TENSOR_NAME]:
        return tensors[_TENSOR_NAME]
    return tensors


def _load_tree(arrays: dict[str, np.ndarray], meta: dict[str, str], device: Any,
               fname: str) -> Any:
    what = "vtl.load"
    reader = _TreeReader(arrays, what, fname)
    try:
        doc = json.loads(meta.get(_TREE_KEY, ""))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what}: {fname!r} is marked as a vtl tree but its {_TREE_KEY!r} "
                         f"metadata is not valid JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("version") != _TREE_VERSION or "tree" not in doc:
        raise ValueError(f"{what}: {fname!r} has {_TREE_KEY!r} metadata of an unknown version "
                         f"({doc.get('version') if isinstance(doc, dict) else doc!r})")
    tree = doc["tree"]
    reader.check(tree, "obj")
    leaves: set[tuple[str, str, bool]] = set()
    reader.leaves(tree, leaves)
    dev = resolve_device(device)
    made: dict[tuple[str, str, bool], Any] = {}
    by_name: dict[tuple[str, bool], Any] = {}
    for name, kind, rg in sorted(leaves):
        a = arrays[name]
        if kind == "ndarray":
            made[name, kind, rg] = np.array(a)  # writable, owns its memory
        elif kind == "numpy_scalar":
            made[name, kind, rg] = a[()]
        else:
            key = (name, kind == "parameter")
            t = by_name.get(key)
            if t is None:
                t = vtl.asarray(a, device=dev, copy=True)
                if kind == "parameter":
                    from .nn.modules.module import Parameter

                    t = Parameter(t, requires_grad=rg)
                elif rg:
                    t.requires_grad_(True)
                by_name[key] = t
            made[name, kind, rg] = t
    return reader.build(tree, made)


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
    safetensors file, atomically. ``epoch`` is an int or None; ``extra`` values
    must be JSON-like (numbers, strings, lists, tuples, dicts)."""
    if epoch is not None:
        if isinstance(epoch, bool):
            raise TypeError("vtl.save_checkpoint: epoch must be an int or None, got bool")
        try:
            epoch = operator.index(epoch)
        except TypeError:
            raise TypeError(f"vtl.save_checkpoint: epoch must be an int or None, got "
                            f"{type(epoch).__name__}") from None
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

    All or nothing: every part (the file; the model's keys, shapes and dtypes; the
    optimizer's groups, hyper-parameters and state; the scheduler's state; the RNG
    state; epoch, metrics and extra values) is checked before any object changes,
    and a ``ValueError`` naming the file and the part leaves the model, optimizer,
    scheduler and the default ``vtl.random`` generator as they were (a tensor of a
    dtype vtl does not support raises ``TypeError``, see :func:`load`).
    ``strict=False`` tolerates missing/unexpected model keys and absent
    optimizer/scheduler state. The default generator is restored to its saved state.
    """
    return _load_checkpoint(path, model, optimizer, scheduler, strict)


_INDEX = re.compile(r"[0-9]+")


def _load_checkpoint(path: Any, model: Any, optimizer: Any, scheduler: Any, strict: bool,
                     check_extra: Callable[[dict[str, Any]], None] | None = None
                     ) -> dict[str, Any]:
    """:func:`load_checkpoint`; ``check_extra(extra)`` may refuse the extra values
    (``ValueError``) before anything is restored."""
    fname = os.fspath(path)
    what = "vtl.load_checkpoint"
    arrays, raw_meta = _read(fname, what)
    if _CKPT_KEY not in raw_meta:
        raise ValueError(f"{what}: {fname!r} is a safetensors file but not a vtl checkpoint "
                         f"(no {_CKPT_KEY!r} metadata)")
    try:
        meta = _dec(json.loads(raw_meta[_CKPT_KEY]))
    except (TypeError, ValueError) as exc:  # json.JSONDecodeError is a ValueError
        raise ValueError(f"{what}: {fname!r} has corrupt checkpoint metadata: {exc}") from None
    if not isinstance(meta, dict) or meta.get("version") != _CKPT_VERSION:
        raise ValueError(f"{what}: {fname!r} has checkpoint metadata of an unknown version "
                         f"({meta.get('version') if isinstance(meta, dict) else meta!r})")

    def fail(part: str, msg: Any) -> ValueError:
        return ValueError(f"{what}: {fname!r}: {part}: {msg}")

    # epoch, metrics, extra values
    epoch, metrics, extra = meta.get("epoch"), meta.get("metrics", {}), meta.get("extra", {})
    if epoch is not None and (isinstance(epoch, bool) or not isinstance(epoch, int)):
        raise fail("epoch", f"expected an int or None, got {epoch!r}")
    if not isinstance(metrics, dict):
        raise fail("metrics", f"expected a dict, got {metrics!r}")
    if not isinstance(extra, dict):
        raise fail("extra state", f"expected a dict, got {extra!r}")
    if check_extra is not None:
        try:
            check_extra(extra)
        except ValueError as exc:
            raise fail("extra state", exc) from None
    # model: keys, shapes, dtypes
    saved = {k[6:]: v for k, v in arrays.items() if k.startswith("model.")}
    problems = _model_problems(saved, model.state_dict(), strict)
    if problems:
        raise fail("model state", "does not match: " + "; ".join(problems))
    # optimizer: groups, hyper-parameters, state names, shapes
    opt_plan = None
    if optimizer is not None:
        om = meta.get("optimizer")
        if om is None:
            if strict:
                raise fail("optimizer state", "the checkpoint holds no optimizer state")
        else:
            try:
                opt_plan = optimizer._check_state_dict(_optimizer_state(om, arrays, optimizer))
            except (TypeError, ValueError) as exc:
                raise fail("optimizer state", exc) from None
    # scheduler
    sched_plan = None
    if scheduler is not None:
        sm = meta.get("scheduler")
        if sm is None:
            if strict:
                raise fail("scheduler state", "the checkpoint holds no scheduler state")
        elif not isinstance(sm, dict) or not isinstance(sm.get("state"), dict):
            raise fail("scheduler state", f"expected {{'type': ..., 'state': {{...}}}}, got {sm!r}")
        elif sm.get("type") != type(scheduler).__name__:
            raise fail("scheduler state", f"checkpoint holds {sm.get('type')} state, the "
                       f"scheduler is a {type(scheduler).__name__}")
        else:
            check = getattr(scheduler, "_check_state", None)
            try:
                sched_plan = sm["state"] if check is None else check(sm["state"])
            except (TypeError, ValueError) as exc:
                raise fail("scheduler state", exc) from None
    # RNG
    gen = vtl.random.default_generator()
    rng_plan = None
    if meta.get("rng") is not None:
        try:
            rng_plan = gen._check_state(meta["rng"])
        except (TypeError, ValueError) as exc:
            raise fail("RNG state", exc) from None
    # apply: the cheap parts first, each with its undo; the model last (it checks and
    # converts every tensor before writing any)
    undo: list[Callable[[], None]] = []
    try:
        if opt_plan is not None:
            old_opt = (list(optimizer.param_groups), optimizer.state)
            undo.append(lambda: optimizer._apply_state(old_opt))
            optimizer._apply_state(opt_plan)
        if sched_plan is not None:
            apply = getattr(scheduler, "_apply_state", scheduler.load_state_dict)
            old_sched = scheduler.state_dict()
            undo.append(lambda: apply(old_sched))
            apply(sched_plan)
        if rng_plan is not None:
            old_rng = gen._check_state(gen.get_state())
            undo.append(lambda: gen._apply_state(old_rng))
            gen._apply_state(rng_plan)
        try:
            model.load_state_dict(saved, strict=strict)
        except (RuntimeError, ValueError, TypeError) as exc:
            raise fail("model state", f"cannot restore the model: {exc}") from exc
    except BaseException:
        for fn in reversed(undo):
            fn()
        raise
    return {"epoch": epoch, "metrics": metrics, "extra": extra}


def _model_problems(saved: dict[str, np.ndarray], own: dict[str, Any],
                    strict: bool) -> list[str]:
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
    return problems


def _optimizer_state(om: Any, arrays: dict[str, np.ndarray], optimizer: Any) -> dict[str, Any]:
    """The optimizer's ``state_dict`` as stored in a checkpoint; ``ValueError`` if malformed."""
    if not isinstance(om, dict) or not isinstance(om.get("param_groups"), list) \
            or not isinstance(om.get("scalars", {}), dict):
        raise ValueError(f"expected {{'type', 'param_groups': [...], 'scalars': {{...}}}}, "
                         f"got {om!r}")
    if om.get("type") != type(optimizer).__name__:
        raise ValueError(f"checkpoint holds {om.get('type')} state, the optimizer is a "
                         f"{type(optimizer).__name__}")
    state: dict[int, dict[str, Any]] = {}
    for idx, sc in om.get("scalars", {}).items():
        if not _INDEX.fullmatch(str(idx)) or not isinstance(sc, dict):
            raise ValueError(f"scalar state entry {idx!r}: {sc!r} is not "
                             "'<parameter index>': {<state name>: <value>}")
        state.setdefault(int(idx), {}).update(sc)
    for k, a in arrays.items():
        if k.startswith("optimizer."):
            _, idx, key = (k.split(".", 2) + ["", ""])[:3]
            if not _INDEX.fullmatch(idx) or not key:
                raise ValueError(f"tensor {k!r} is not named "
                                 "'optimizer.<parameter index>.<state name>'")
            state.setdefault(int(idx), {})[key] = a
    groups = []
    for cur, sg in zip(optimizer.param_groups, om["param_groups"], strict=False):
        if isinstance(sg, dict):  # JSON has no tuples: give back the ones the optimizer has
            sg = {key: tuple(v) if isinstance(cur.get(key), tuple) and isinstance(v, list)
                  else v for key, v in sg.items()}
        groups.append(sg)
    groups += om["param_groups"][len(groups):]
    return {"state": state, "param_groups": groups}
