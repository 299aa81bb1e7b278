"""CIFAR-10 from the official binary (``cifar-10-batches-bin``) or Python
(``cifar-10-batches-py``) batches."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np

from ..backends._dtypes import kind as _dkind
from ._common import (
    ArrayDataset,
    check_count,
    clean_stale_extractions,
    download,
    missing_file,
    resolve_root,
    unpack_archive,
)

__all__ = ["CIFAR10"]

CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
           "truck"]
_RECORD = 1 + 3072


class _NumpyOnlyUnpickler(pickle.Unpickler):
    """Unpickles only the NumPy array machinery the official batches use."""

    _ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray",
                                                            "_reconstruct"),
                ("numpy", "ndarray"), ("numpy", "dtype"),
                ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
                ("_codecs", "encode")}

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self._ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def _load_pickle(path: Path) -> Any:
    try:
        with open(path, "rb") as f:
            return _NumpyOnlyUnpickler(f, encoding="bytes").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError,
            IndexError) as exc:
        raise ValueError(f"CIFAR10: {str(path)!r} is not a valid CIFAR-10 python batch "
                         f"(truncated or corrupt: {exc})") from None


def _get(d: Any, key: str) -> Any:
    if isinstance(d, dict):
        for k in (key.encode(), key):
            if k in d:
                return d[k]
    return None


def _read_py_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    d = _load_pickle(path)
    data, labels = _get(d, "data"), _get(d, "labels")
    if data is None or labels is None:
        raise ValueError(f"CIFAR10: {str(path)!r} lacks the 'data' or 'labels' entry")
    data = np.asarray(data)
    labels = _check_labels(labels, path)
    if data.ndim != 2 or data.shape[1] != 3072 or data.dtype != np.uint8:
        raise ValueError(f"CIFAR10: {str(path)!r} has data of shape {data.shape} and dtype "
                         f"{data.dtype}, expected (N, 3072) uint8")
    if labels.shape != (data.shape[0],):
        raise ValueError(f"CIFAR10: {str(path)!r} has {labels.size} labels for "
                         f"{data.shape[0]} images")
    return data, labels


def _check_labels(labels: Any, path: Path) -> np.ndarray:
    """The batch's labels as int64, each an integer in 0..9."""
    try:
        arr = np.asarray(labels)
    except ValueError:  # ragged
        arr = np.asarray(labels, dtype=object)
    if arr.size == 0 and arr.ndim == 1:
        arr = arr.astype(np.int64)
    if arr.ndim != 1 or _dkind(arr.dtype) not in "iu":
        found = type(arr.flat[0]).__name__ if arr.size else "none"
        raise ValueError(f"CIFAR10: {str(path)!r} has labels of dtype {arr.dtype} and shape "
                         f"{arr.shape} (first: {found}), expected a list of integers in 0..9")
    if arr.size and (arr.min() < 0 or arr.max() > 9):
        raise ValueError(f"CIFAR10: {str(path)!r} holds labels outside 0..9 (found "
                         f"{arr.min()}..{arr.max()})")
    return arr.astype(np.int64)


def _read_bin_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    raw = np.frombuffer(path.read_bytes(), np.uint8)
    if raw.size == 0 or raw.size % _RECORD:
        raise ValueError(f"CIFAR10: {str(path)!r} is truncated or corrupt: {raw.size} bytes is "
                         f"not a whole number of {_RECORD}-byte records")
    rec = raw.reshape(-1, _RECORD)
    return rec[:, 1:], _check_labels(rec[:, 0], path)


class CIFAR10(ArrayDataset):
    """CIFAR-10 (60000 32x32 colour images in 10 classes).

    Reads ``cifar-10-batches-py`` (the pickled Python batches; only NumPy arrays
    are unpickled) or ``cifar-10-batches-bin`` from ``root`` (default: env
    ``VTL_DATA`` or the user cache folder). ``train_count``/``test_count`` keep
    the first that many samples of the split (reading only the batches needed).
    ``.data`` is float32 ``(N, 3, 32, 32)`` in [0, 1], ``.targets`` int64,
    ``.classes`` the class names. ``download=True`` fetches the Python version's
    archive (unless ``root`` already holds it), checks its MD5 against the
    official one and unpacks it atomically (see :func:`unpack_archive`); a
    corrupt or truncated archive raises ``ValueError`` naming it. Labels must be
    integers in 0..9 (``ValueError`` naming the batch file otherwise).
    """

    url = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
    archive = "cifar-10-python.tar.gz"
    archive_md5: str | None = "c58f30108f718f92721af3b95e74349a"  # the official checksum
    archive_files = [f"cifar-10-batches-py/{n}" for n in
                     ["batches.meta", "test_batch", *(f"data_batch_{i}" for i in range(1, 6))]]

    def __init__(self, root: Any = None, train: bool = True, download: bool = False,
                 train_count: int | None = None, test_count: int | None = None,
                 backend: str | None = None, *, device: Any = None) -> None:
        base = resolve_root(root)
        count = check_count(train_count if train else test_count,
                            f"{'train' if train else 'test'}_count", "CIFAR10")
        folder = self._locate(base)
        if download:
            archive = base / self.archive
            clean_stale_extractions(base, archive)
            if folder is None:
                if not archive.is_file():
                    download_fn(self.url, archive, base, self.archive_md5)
                unpack_archive(archive, base, "CIFAR10", self.archive_files, self.archive_md5)
                folder = self._locate(base)
        if folder is None:
            raise missing_file("CIFAR10", base / "cifar-10-batches-py",
                               "the folder cifar-10-batches-py or cifar-10-batches-bin "
                               f"(unpacked from {self.url})")
        binary = folder.name.endswith("bin")
        names = [f"data_batch_{i}" for i in range(1, 6)] if train else ["test_batch"]
        xs, ys, have = [], [], 0
        for n in names:
            if count is not None and have >= count:
                break
            p = folder / (n + ".bin" if binary else n)
            if not p.is_file():
                raise missing_file("CIFAR10", p, f"the official {folder.name} files")
            x, y = _read_bin_batch(p) if binary else _read_py_batch(p)
            xs.append(x)
            ys.append(y)
            have += len(y)
        x = np.concatenate(xs)
        y = np.concatenate(ys)
        if count is not None:
            if count > len(y):
                raise ValueError(f"CIFAR10: asked for {count} samples, the "
                                 f"{'training' if train else 'test'} split has {len(y)}")
            x, y = x[:count], y[:count]
        classes = self._class_names(folder, binary)
        x = x.reshape(-1, 3, 32, 32).astype(np.float32) / np.float32(255.0)
        super().__init__(x, y, classes, backend, device)

    @staticmethod
    def _locate(base: Path) -> Path | None:
        for parent in (base, base / "CIFAR10", base / "cifar10"):
            for sub in ("cifar-10-batches-py", "cifar-10-batches-bin"):
                if (parent / sub).is_dir():
                    return parent / sub
        return None

    @staticmethod
    def _class_names(folder: Path, binary: bool) -> list[str]:
        p = folder / ("batches.meta.txt" if binary else "batches.meta")
        if not p.is_file():
            return list(CLASSES)
        if binary:
            names = [ln.strip() for ln in p.read_text().splitlines() if ln.strip()]
        else:
            raw = _get(_load_pickle(p), "label_names") or []
            names = [n.decode() if isinstance(n, bytes) else str(n) for n in raw]
        if len(names) != 10:
            raise ValueError(f"CIFAR10: {str(p)!r} lists {len(names)} class names, expected 10")
        return names


def download_fn(url: str, archive: Path, base: Path, md5: str | None = None) -> None:
    download([url], archive, "CIFAR10", base, f"{url}, unpack it and", md5)
