"""Shared pieces of the dataset loaders: the data folder, downloads, file checks."""

from __future__ import annotations

import glob
import hashlib
import lzma
import os
import shutil
import sys
import tarfile
import tempfile
import time
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

import vtl

from ..backends import resolve_device
from ..backends._dtypes import kind as _dkind
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


def check_count(value: Any, what: str, name: str, minimum: int = 0,
                optional: bool = True) -> int | None:
    """``value`` as an int ``>= minimum`` (``None`` passes when ``optional``); a
    ``ValueError`` naming ``name: what``, the expectation and the value otherwise."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        expected = f"an int >= {minimum}" + (" or None" if optional else "")
        raise ValueError(f"{name}: {what} must be {expected}, got {value!r} "
                         f"({type(value).__name__})")
    return int(value)


def file_md5(path: Path) -> str:
    """The hex MD5 of a file, read in 1 MiB chunks."""
    h = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def download(urls: Sequence[str], dest: Path, name: str, folder: Path,
             files_needed: str, md5: str | None = None) -> Path:
    """Fetch the first of ``urls`` that works into ``dest``; a ``RuntimeError`` that
    says where to put the files by hand when none does (e.g. offline).

    The data goes to ``dest`` + ``.part`` first and is renamed into place only when
    complete and, given ``md5``, when its checksum matches (else the next URL is tried).
    """
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
            if md5 is not None and (got := file_md5(tmp)) != md5:
                raise ValueError(f"checksum mismatch: MD5 {got}, expected {md5}")
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
    """Unpack ``archive`` into ``into``, refusing members that would land outside it,
    and read the archive to its end (so a compressed one's checksum is verified)."""
    with tarfile.open(archive) as tf:
        if hasattr(tarfile, "data_filter"):
            tf.extractall(into, filter="data")
        else:
            top = into.resolve()
            for m in tf.getmembers():
                dest = (into / m.name).resolve()
                if not (m.isfile() or m.isdir()) or top not in (dest, *dest.parents):
                    raise ValueError(f"{archive}: refusing to extract {m.name!r}")
            tf.extractall(into)
        while tf.fileobj.read(1 << 20):  # tarfile stops at the end-of-archive block
            pass


_FILTER_ERRORS = (tarfile.FilterError,) if hasattr(tarfile, "FilterError") else ()
_PARTIAL = ".partial-"  # <base>/.<archive name>.partial-<pid>-<random>: an unpacking in progress


def _partial_prefix(archive: Path) -> str:
    return f".{archive.name}{_PARTIAL}"


def _is_stale(folder: Path, prefix: str) -> bool:
    """Whether an unpacking folder was left by a run that is gone: its process has
    ended (POSIX), or, where that cannot be asked, it was untouched for a day."""
    pid = folder.name[len(prefix):].split("-", 1)[0]
    if os.name == "posix" and pid.isdigit():
        if int(pid) == os.getpid():
            return False
        try:
            os.kill(int(pid), 0)  # signal 0: only asks whether the process exists
        except ProcessLookupError:
            return True
        except OSError:
            pass
        return False
    try:
        return time.time() - folder.stat().st_mtime > 86400
    except OSError:
        return False


def clean_stale_extractions(base: Path, archive: Path) -> list[Path]:
    """Remove the unpacking folders of ``archive`` in ``base`` left by killed runs;
    returns the ones removed."""
    prefix = _partial_prefix(archive)
    removed = []
    if base.is_dir():
        for p in base.glob(glob.escape(prefix) + "*"):
            if p.is_dir() and _is_stale(p, prefix):
                shutil.rmtree(p, ignore_errors=True)
                removed.append(p)
    return removed


def _missing(root: Path, expected: Sequence[str]) -> list[str]:
    return [e for e in expected if not (root / e).exists()]


def _bad_archive(name: str, archive: Path, problem: str) -> ValueError:
    return ValueError(f"{name}: archive {str(archive)!r} {problem}. Delete it and run again "
                      "with download=True to fetch it again (or replace it by hand)")


def unpack_archive(archive: Path, base: Path, name: str, expected: Sequence[str],
                   md5: str | None = None) -> None:
    """Unpack the tar ``archive`` into ``base`` atomically and check the result.

    ``expected`` lists paths (relative to ``base``) the archive must provide; their
    first components are the archive's top-level entries. With ``md5`` the
    archive's checksum is checked first. The archive is unpacked into a hidden
    folder in ``base`` (``.<archive>.partial-<pid>-...``, never read by the
    loaders, removed on failure and, if a run was killed, by the next call) and
    its entries are renamed into place only when every expected path is there.
    A corrupt, truncated or incomplete archive raises ``ValueError`` naming it;
    an existing but incomplete destination folder raises ``ValueError`` naming
    that folder (it is never overwritten).
    """
    tops = list(dict.fromkeys(Path(e).parts[0] for e in expected))
    for top in tops:
        if (base / top).exists() and (gone := _missing(base, [e for e in expected
                                                             if Path(e).parts[0] == top])):
            raise ValueError(f"{name}: folder {str(base / top)!r} exists but is incomplete "
                             f"(no {gone[0]!r}). Delete it so that {str(archive)!r} can be "
                             "unpacked in its place")
    if not _missing(base, expected):
        return
    if md5 is not None and (got := file_md5(archive)) != md5:
        raise _bad_archive(name, archive, f"is corrupt or incomplete: its MD5 is {got}, the "
                           f"official archive's is {md5}")
    clean_stale_extractions(base, archive)
    tmp = Path(tempfile.mkdtemp(prefix=f"{_partial_prefix(archive)}{os.getpid()}-", dir=base))
    try:
        try:
            extract_tar(archive, tmp)
        except OSError as exc:
            if exc.errno is not None:  # the disk or the folder, not the archive
                raise
            raise _bad_archive(name, archive, f"is truncated or corrupt ({exc})") from None
        except (ValueError, *_FILTER_ERRORS) as exc:
            raise _bad_archive(name, archive, f"is unsafe to unpack ({exc})") from None
        except (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError) as exc:
            raise _bad_archive(name, archive, f"is truncated or corrupt "
                               f"({type(exc).__name__}: {exc})") from None
        if gone := _missing(tmp, expected):
            raise _bad_archive(name, archive, f"is truncated or not the official one: it "
                               f"lacks {gone[0]!r}")
        for top in tops:
            if not (base / top).exists():
                os.replace(tmp / top, base / top)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if gone := _missing(base, expected):  # another run put an incomplete folder there
        raise ValueError(f"{name}: folder {str(base / Path(gone[0]).parts[0])!r} is "
                         f"incomplete (no {gone[0]!r}). Delete it and run again")


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
        x = int_tensor(x, dev) if _dkind(x.dtype) in "iu" else vtl.asarray(x, device=dev)
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
