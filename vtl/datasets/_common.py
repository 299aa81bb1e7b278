"""Shared pieces of the dataset loaders: the data folder, downloads, file checks."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

import vtl

from ..backends import resolve_device
from ..data.dataset import TensorDataset


def default_root() -> Path:
    """The data folder: env ``VTL_DATA``, else the user cache dir + ``vtl/data``
    (``$XDG_CACHE_HOME`` or ``~/.cache`` on Linux, ``~/Library/Caches`` on macOS,
    ``%LOCALAPPDATA%`` on Windows)."""
    env = os.environ.get("VTL_DATA")
    if env:
        return Path(env).expanduser()
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local"))
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return base / "vtl" / "data"


def resolve_root(root: Any) -> Path:
    return default_root() if root is None else Path(root).expanduser()


def download(urls: Sequence[str], dest: Path, name: str, folder: Path,
             files_needed: str) -> Path:
    """Fetch the first of ``urls`` that works into ``dest``; a ``RuntimeError`` that
    says where to put the files by hand when none does (e.g. offline)."""
    import urllib.error
    import urllib.request

    dest.parent.mkdir(parents=True, exist_ok=True)
    errors = []
    for url in urls:
        tmp = dest.with_name(dest.name + ".part")
        try:
            with urllib.request.urlopen(url, timeout=30) as r, open(tmp, "wb") as f:
                while chunk := r.read(1 << 20):
                    f.write(chunk)
            os.replace(tmp, dest)
            return dest
        except (urllib.error.URLError, OSError, ValueError) as exc:
            errors.append(f"{url}: {exc}")
            tmp.unlink(missing_ok=True)
    raise RuntimeError(
        f"{name}: download failed ({'; '.join(errors)}). Without network access, download "
        f"{files_needed} elsewhere and put the files in {folder}"
    )


def extract_tar(archive: Path, into: Path) -> None:
    """Unpack ``archive`` into ``into``, refusing members that would land outside it."""
    import tarfile

    with tarfile.open(archive) as tf:
        if hasattr(tarfile, "data_filter"):
            tf.extractall(into, filter="data")
            return
        top = into.resolve()
        for m in tf.getmembers():
            dest = (into / m.name).resolve()
            if not (m.isfile() or m.isdir()) or top not in (dest, *dest.parents):
                raise ValueError(f"{archive}: refusing to extract {m.name!r}")
        tf.extractall(into)


def missing_file(name: str, path: Path, expected: str) -> ValueError:
    return ValueError(
        f"{name}: file {str(path)!r} not found. Put {expected} in {str(path.parent)!r} "
        "(or pass root=..., set VTL_DATA, or use download=True)"
    )


def split_stratified(targets: np.ndarray, test_fraction: float, seed: int,
                     train: bool) -> np.ndarray:
    """Indices of a deterministic stratified train/test split.

    Each class's indices are permuted with ``vtl.random.Generator(seed)`` (the
    same on every machine) and its first ``round(count * test_fraction)`` go to
    the test split. The returned indices are sorted.
    """
    if not 0.0 <= test_fraction < 1.0:
        raise ValueError(f"test_fraction must lie in [0, 1), got {test_fraction}")
    g = vtl.random.Generator(seed)
    chosen = []
    for c in np.unique(targets):
        idx = np.flatnonzero(targets == c)
        perm = idx[g.permutation(len(idx), backend="numpy").numpy()]
        k = int(round(len(idx) * test_fraction))
        chosen.append(perm[k:] if train else perm[:k])
    return np.sort(np.concatenate(chosen))


def index_dtype(dev: Any) -> Any:
    """int64, or the device's index dtype where it lacks int64 (a wgpu adapter
    without ``shader-int64``)."""
    return vtl.__array_namespace_info__().default_dtypes(device=dev)["indexing"]


def int_tensor(a: Any, dev: Any) -> Any:
    """Integer labels/ids as a Tensor on ``dev`` in :func:`index_dtype`."""
    return vtl.asarray(np.asarray(a, dtype=np.int64).astype(index_dtype(dev)), device=dev)


class ArrayDataset(TensorDataset):
    """A TensorDataset with ``.data``, ``.targets``, ``.classes`` and ``.num_classes``.

    ``.targets`` are int64 (on a device without int64: its index dtype, int32).
    """

    def __init__(self, data: np.ndarray, targets: np.ndarray, classes: list[str],
                 backend: str | None = None, device: Any = None) -> None:
        dev = resolve_device(device, backend)
        x = np.ascontiguousarray(data)
        x = int_tensor(x, dev) if x.dtype.kind in "iu" else vtl.asarray(x, device=dev)
        super().__init__(x, int_tensor(targets, dev))
        self.classes = list(classes)

    @property
    def data(self) -> Any:
        return self.tensors[0]

    @property
    def targets(self) -> Any:
        return self.tensors[1]

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(n={len(self)}, data={tuple(self.data.shape)}, "
                f"classes={self.num_classes}, device={self.data.device})")
