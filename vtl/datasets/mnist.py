"""MNIST and Fashion-MNIST from the official IDX files (gzip-compressed or raw)."""

from __future__ import annotations

import gzip
import math
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from ._common import ArrayDataset, download, missing_file, resolve_root

__all__ = ["MNIST", "FashionMNIST", "read_idx"]

_IDX_TYPES = {0x08: "uint8", 0x09: "int8", 0x0B: "int16", 0x0C: "int32", 0x0D: "float32",
              0x0E: "float64"}


def _read_maybe_gz(path: Path, name: str) -> bytes:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            return gzip.decompress(raw)
        except (EOFError, OSError, zlib.error) as exc:
            raise ValueError(f"{name}: {str(path)!r} is a corrupt or truncated gzip file "
                             f"({exc})") from None
    return raw


def read_idx(path: Any, ndim: int | None = None, name: str = "read_idx",
             dtype: Any = None) -> np.ndarray:
    """Parse an IDX file (LeCun's format; gzip or raw), checking the magic number
    (``0x00 0x00 <type> <ndim>``; ``ndim`` and the element ``dtype``, e.g.
    ``np.uint8``, if given) and that the file holds exactly the data its header
    describes. ``ValueError`` naming the file and what was found otherwise.

    Args:
        path: The file.
        ndim: The expected number of dimensions.
        name: Name used in error messages.
        dtype: The expected element dtype.

    Returns:
        The data, a NumPy array.

    Raises:
        ValueError: If the file is truncated, corrupt, or not what is expected.
    """
    path = Path(path)
    data = _read_maybe_gz(path, name)
    if len(data) < 4:
        raise ValueError(f"{name}: {str(path)!r} is truncated ({len(data)} bytes, no IDX header)")
    if data[0] != 0 or data[1] != 0 or data[2] not in _IDX_TYPES:
        raise ValueError(f"{name}: {str(path)!r} has a bad IDX magic number "
                         f"0x{data[:4].hex()} (expected 0x0000<type><ndim>)")
    found = np.dtype(_IDX_TYPES[data[2]])
    if dtype is not None and found != np.dtype(dtype):
        want = np.dtype(dtype)
        code = {np.dtype(v): k for k, v in _IDX_TYPES.items()}.get(want)
        raise ValueError(f"{name}: {str(path)!r} has magic number 0x{data[:4].hex()}: IDX type "
                         f"0x{data[2]:02x} ({found}), expected "
                         + (f"0x{code:02x} ({want})" if code is not None else str(want)))
    nd = data[3]
    if ndim is not None and nd != ndim:
        raise ValueError(f"{name}: {str(path)!r} has magic number 0x{data[:4].hex()}: "
                         f"{nd} dimension(s), expected {ndim}")
    if len(data) < 4 + 4 * nd:
        raise ValueError(f"{name}: {str(path)!r} is truncated inside its IDX header")
    shape = tuple(int(d) for d in np.frombuffer(data, ">u4", nd, 4))
    dt = found.newbyteorder(">")
    need = math.prod(shape) * dt.itemsize
    have = len(data) - 4 - 4 * nd
    if have < need:
        raise ValueError(f"{name}: {str(path)!r} is truncated: the header announces shape "
                         f"{shape} ({need} bytes of data), the file holds {have}")
    if have > need:
        raise ValueError(f"{name}: {str(path)!r} is corrupt: {have - need} bytes after the "
                         f"data of shape {shape}")
    return np.frombuffer(data, dt, math.prod(shape), 4 + 4 * nd).reshape(shape).astype(found)


class MNIST(ArrayDataset):
    """MNIST handwritten digits from the official IDX files.

    Looks for ``train-images-idx3-ubyte`` / ``train-labels-idx1-ubyte`` (or the
    ``t10k-`` pair for ``train=False``), each raw or with ``.gz``, in
    ``root/MNIST/raw``, ``root/MNIST`` or ``root`` (``root`` defaults to env
    ``VTL_DATA`` or the user cache folder). ``.data`` is float32
    ``(N, 1, 28, 28)`` in [0, 1] (``(N, 784)`` with ``flatten=True``), ``.targets``
    int64. ``download=True`` fetches the missing files into ``root/MNIST/raw``,
    each checked against its official MD5 before it is kept. The IDX headers must
    announce unsigned bytes (type ``0x08``), 3-d images of 28x28 and 1-d labels
    in 0..9, as many as images (``ValueError`` naming the file otherwise).

    Args:
        root: The data folder (default: env ``VTL_DATA`` or the user cache folder).
        train: The training split (else the test split).
        download: Fetch the missing files (checked against their official MD5).
        backend: Backend of the tensors (default: the default backend).
        flatten: Give ``(N, 784)`` images instead of ``(N, 1, 28, 28)``.
        device: Device of the tensors (instead of ``backend``).

    Raises:
        ValueError: If a file is missing (without ``download``), corrupt, or holds unexpected data.
    """

    folder = "MNIST"
    urls = ["https://ossci-datasets.s3.amazonaws.com/mnist/",
            "https://storage.googleapis.com/cvdf-datasets/mnist/",
            "http://yann.lecun.com/exdb/mnist/"]
    md5 = {"train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",  # official
           "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
           "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
           "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c"}
    classes_ = ["0 - zero", "1 - one", "2 - two", "3 - three", "4 - four", "5 - five",
                "6 - six", "7 - seven", "8 - eight", "9 - nine"]

    def __init__(self, root: Any = None, train: bool = True, download: bool = False,
                 backend: str | None = None, *, flatten: bool = False,
                 device: Any = None) -> None:
        base = resolve_root(root)
        prefix = "train" if train else "t10k"
        name = type(self).__name__
        files = [f"{prefix}-images-idx3-ubyte", f"{prefix}-labels-idx1-ubyte"]
        dirs = [base / self.folder / "raw", base / self.folder, base]
        paths = [self._find(dirs, f) for f in files]
        if any(p is None for p in paths) and download:
            for f, p in zip(files, paths, strict=True):
                if p is None:
                    _download_one(self, dirs[0], f + ".gz", self.md5.get(f + ".gz"))
            paths = [self._find(dirs, f) for f in files]
        for f, p in zip(files, paths, strict=True):
            if p is None:
                raise missing_file(name, dirs[0] / (f + ".gz"),
                                   f"{files[0]}(.gz) and {files[1]}(.gz) from the official "
                                   f"site ({self.urls[0]})")
        images = read_idx(paths[0], 3, name, np.uint8)
        labels = read_idx(paths[1], 1, name, np.uint8)
        if images.shape[1:] != (28, 28):
            raise ValueError(f"{name}: {str(paths[0])!r} holds images of shape "
                             f"{images.shape[1:]}, expected (28, 28)")
        if images.shape[0] != labels.shape[0]:
            raise ValueError(f"{name}: {str(paths[0])!r} holds {images.shape[0]} images but "
                             f"{str(paths[1])!r} {labels.shape[0]} labels")
        if labels.size and labels.max() > 9:
            raise ValueError(f"{name}: {str(paths[1])!r} holds labels outside 0..9 (found "
                             f"{labels.min()}..{labels.max()})")
        x = images.astype(np.float32) / np.float32(255.0)
        x = x.reshape(len(x), 784) if flatten else x.reshape(len(x), 1, 28, 28)
        super().__init__(x, labels.astype(np.int64), self.classes_, backend, device)

    @staticmethod
    def _find(dirs: list[Path], stem: str) -> Path | None:
        for d in dirs:
            for cand in (d / stem, d / (stem + ".gz")):
                if cand.is_file():
                    return cand
        return None


def _download_one(ds: Any, folder: Path, fname: str, md5: str | None) -> None:
    download([u + fname for u in ds.urls], folder / fname, type(ds).__name__, folder,
             f"{fname} (from {ds.urls[0]})", md5)


class FashionMNIST(MNIST):
    """Zalando's Fashion-MNIST: the same IDX files and layout as :class:`MNIST`,
    in ``root/FashionMNIST/raw`` (or ``root/FashionMNIST``, or ``root``).

    Args:
        root: The data folder (default: env ``VTL_DATA`` or the user cache folder).
        train: The training split (else the test split).
        download: Fetch the missing files (checked against their official MD5).
        backend: Backend of the tensors (default: the default backend).
        flatten: Give ``(N, 784)`` images instead of ``(N, 1, 28, 28)``.
        device: Device of the tensors (instead of ``backend``).

    Raises:
        ValueError: If a file is missing (without ``download``), corrupt, or holds unexpected data.
    """

    folder = "FashionMNIST"
    urls = ["http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"]
    md5 = {"train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
           "train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
           "t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
           "t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310"}
    classes_ = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
                "Sneaker", "Bag", "Ankle boot"]
