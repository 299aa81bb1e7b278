"""vtl.datasets under bad files: corrupt, truncated or unsafe archives, half-unpacked
folders from killed runs, checksums, malformed CIFAR labels, IDX type codes, review paths
that are folders, and invalid arguments. No network: archives are made in tmp_path and the
download functions are replaced."""

from __future__ import annotations

import errno
import gzip
import hashlib
import io
import pickle
import struct
import subprocess
import sys
import tarfile
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from helpers import to_numpy

import vtl
from vtl.datasets import CIFAR10, IMDB, MNIST, FashionMNIST, _common, cifar, imdb, read_idx


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("these tests must not download anything")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    monkeypatch.setattr(cifar, "download_fn", refuse)
    monkeypatch.setattr(imdb, "_download", refuse)


# -- fake archives --------------------------------------------------------------------------
def _cifar_tree(root: Path, per_batch: int = 2) -> dict[str, np.ndarray]:
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    labels = {}
    rng = np.random.default_rng(0)
    for name in [f"data_batch_{k}" for k in range(1, 6)] + ["test_batch"]:
        x = rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8)
        y = rng.integers(0, 10, per_batch)
        (folder / name).write_bytes(pickle.dumps({b"data": x, b"labels": [int(v) for v in y]},
                                                 protocol=2))
        labels[name] = y
    meta = {b"label_names": [n.encode() for n in cifar.CLASSES]}
    (folder / "batches.meta").write_bytes(pickle.dumps(meta, protocol=2))
    return labels


def _imdb_tree(root: Path) -> None:
    reviews = {"train/neg": ["0_1", "1_3"], "train/pos": ["0_9", "1_10"],
               "test/neg": ["0_2"], "test/pos": ["0_8"]}
    for sub, names in reviews.items():
        (root / "aclImdb" / sub).mkdir(parents=True)
        for n in names:
            (root / "aclImdb" / sub / f"{n}.txt").write_text(f"review {n} of {sub}")


def _tar(src: Path, top: str, archive: Path, mode: str = "w:gz",
         skip: tuple[str, ...] = ()) -> Path:
    with tarfile.open(archive, mode) as tf:
        for p in sorted((src / top).rglob("*")):
            rel = p.relative_to(src).as_posix()
            if p.is_file() and not any(rel.endswith(s) for s in skip):
                tf.add(p, arcname=rel)
    return archive


SETS = {
    "cifar": (CIFAR10, "cifar-10-python.tar.gz", "cifar-10-batches-py", _cifar_tree),
    "imdb": (IMDB, "aclImdb_v1.tar.gz", "aclImdb", _imdb_tree),
}


def _archive(tmp_path: Path, which: str, mode: str = "w:gz", skip=()) -> tuple:
    cls, name, top, tree = SETS[which]
    src = tmp_path / "src"
    tree(src)
    root = tmp_path / "root"
    root.mkdir()
    return cls, root, _tar(src, top, root / name, mode, skip), top


def _partials(root: Path) -> list[Path]:
    return [p for p in root.iterdir() if ".partial-" in p.name]


def _dead_pid() -> int:
    out = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                         capture_output=True, text=True, check=True)
    return int(out.stdout)


# -- archives -------------------------------------------------------------------------------
@pytest.mark.parametrize("which", ["cifar", "imdb"])
def test_good_archive_is_checked_and_unpacked(backend, tmp_path, monkeypatch, which):
    cls, root, archive, top = _archive(tmp_path, which)
    monkeypatch.setattr(cls, "archive_md5", _md5(archive))
    ds = cls(root=root, download=True)
    assert len(ds) == (10 if which == "cifar" else 4)
    assert (root / top).is_dir() and archive.is_file() and not _partials(root)
    assert len(cls(root=root, download=True)) == len(ds)  # already unpacked: reused


@pytest.mark.parametrize("which", ["cifar", "imdb"])
@pytest.mark.parametrize("cut", ["empty", "30%", "60%", "97%", "crc"])
def test_truncated_archive_names_it_and_leaves_nothing(tmp_path, monkeypatch, which, cut):
    cls, root, archive, top = _archive(tmp_path, which)
    monkeypatch.setattr(cls, "archive_md5", None)  # exercise the unpacking checks
    data = archive.read_bytes()
    ends = {"empty": 0, "crc": len(data) - 4}
    keep = ends[cut] if cut in ends else len(data) * int(cut[:-1]) // 100
    archive.write_bytes(data[:keep])  # "crc": only the gzip trailer is missing
    for _ in range(2):  # the second call does not find (and load) a partial folder
        with pytest.raises(ValueError, match="truncated or corrupt") as info:
            cls(root=root, download=True)
        assert str(archive) in str(info.value) and "Delete it" in str(info.value)
        assert not (root / top).exists() and not _partials(root)


@pytest.mark.parametrize("which", ["cifar", "imdb"])
def test_garbage_archive_names_it(tmp_path, monkeypatch, which):
    cls, root, archive, _ = _archive(tmp_path, which)
    monkeypatch.setattr(cls, "archive_md5", None)
    archive.write_bytes(gzip.compress(b"this is not a tar file" * 100))
    with pytest.raises(ValueError, match=f"{archive.name}.*truncated or corrupt"):
        cls(root=root, download=True)
    archive.write_bytes(b"\x1f\x8b\x08" + b"\x00" * 50)  # a broken gzip stream
    with pytest.raises(ValueError, match=f"{archive.name}.*truncated or corrupt"):
        cls(root=root, download=True)
    assert not _partials(root)


@pytest.mark.parametrize("which,lacking", [("cifar", "cifar-10-batches-py/test_batch"),
                                           ("imdb", "aclImdb/test/pos")])
def test_archive_without_the_expected_files_names_it(tmp_path, monkeypatch, which, lacking):
    # a plain tar that ends cleanly before its last members: tarfile reads it without error
    skip = ("test_batch",) if which == "cifar" else ("0_8.txt",)
    cls, root, archive, top = _archive(tmp_path, which, mode="w", skip=skip)
    monkeypatch.setattr(cls, "archive_md5", None)
    with pytest.raises(ValueError, match=f"{archive.name}.*lacks '{lacking}'"):
        cls(root=root, download=True)
    assert not (root / top).exists() and not _partials(root)


@pytest.mark.parametrize("which", ["cifar", "imdb"])
def test_archive_with_a_wrong_checksum_names_it(tmp_path, which):
    cls, root, archive, top = _archive(tmp_path, which)
    with pytest.raises(ValueError) as info:
        cls(root=root, download=True)  # the official MD5 cannot match the fake archive
    msg = str(info.value)
    assert str(archive) in msg and _md5(archive) in msg and cls.archive_md5 in msg
    assert "Delete it" in msg and not (root / top).exists()


def test_unsafe_archive_member_is_refused(tmp_path, monkeypatch):
    cls, root, archive, top = _archive(tmp_path, "cifar")
    monkeypatch.setattr(cls, "archive_md5", None)
    with tarfile.open(archive, "w:gz") as tf:
        info = tarfile.TarInfo("../outside.txt")
        info.size = 3
        tf.addfile(info, io.BytesIO(b"bad"))
    with pytest.raises(ValueError, match=f"{archive.name}.*unsafe"):
        cls(root=root, download=True)
    assert not (tmp_path / "outside.txt").exists() and not _partials(root)


def test_interrupted_unpacking_leaves_no_folder(tmp_path, monkeypatch):
    cls, root, archive, top = _archive(tmp_path, "cifar")
    monkeypatch.setattr(cls, "archive_md5", None)
    real = _common.extract_tar

    def interrupted(arch, into):
        real(arch, into)
        raise KeyboardInterrupt

    monkeypatch.setattr(_common, "extract_tar", interrupted)
    with pytest.raises(KeyboardInterrupt):
        cls(root=root, download=True)
    assert not (root / top).exists() and not _partials(root)
    monkeypatch.setattr(_common, "extract_tar", real)
    assert len(cls(root=root, download=True)) == 10


def test_disk_errors_are_not_reported_as_a_bad_archive(tmp_path, monkeypatch):
    cls, root, archive, top = _archive(tmp_path, "imdb")
    monkeypatch.setattr(cls, "archive_md5", None)

    def disk_full(arch, into):
        (into / "aclImdb").mkdir()
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(_common, "extract_tar", disk_full)
    with pytest.raises(OSError, match="No space left"):
        cls(root=root, download=True)
    assert not (root / top).exists() and not _partials(root)


@pytest.mark.parametrize("which", ["cifar", "imdb"])
def test_stale_partial_folder_is_never_loaded_and_is_cleaned(tmp_path, monkeypatch, which):
    cls, root, archive, top = _archive(tmp_path, which)
    monkeypatch.setattr(cls, "archive_md5", _md5(archive))
    stale = root / f".{archive.name}.partial-{_dead_pid()}-x1"
    SETS[which][3](stale)  # a complete copy, as a killed run may leave it
    alive = root / f".{archive.name}.partial-{_dead_pid()}-x2"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        alive = alive.with_name(f".{archive.name}.partial-{sleeper.pid}-x2")
        alive.mkdir()
        with pytest.raises(ValueError, match="not found"):
            cls(root=root)  # without download=True nothing is unpacked, nothing loaded
        assert stale.is_dir()
        ds = cls(root=root, download=True)
        assert not stale.exists() and alive.is_dir()  # another live run's folder stays
    finally:
        sleeper.kill()
        sleeper.wait()
    assert len(ds) == (10 if which == "cifar" else 4) and (root / top).is_dir()
    assert cls(root=root, download=True) is not None and not stale.exists()


def test_existing_incomplete_folder_is_named_not_overwritten(tmp_path, monkeypatch):
    cls, root, archive, top = _archive(tmp_path, "imdb")
    monkeypatch.setattr(cls, "archive_md5", _md5(archive))
    (root / "aclImdb" / "train" / "neg").mkdir(parents=True)
    (root / "aclImdb" / "train" / "neg" / "5_2.txt").write_text("mine")
    with pytest.raises(ValueError, match="aclImdb' exists but is incomplete.*Delete it"):
        cls(root=root, train=False, download=True)
    assert (root / "aclImdb" / "train" / "neg" / "5_2.txt").read_text() == "mine"
    assert not _partials(root)


# -- downloads are checked before they are kept ---------------------------------------------
def _idx(arr: np.ndarray, code: int | None = None) -> bytes:
    codes = {np.dtype(np.uint8): 0x08, np.dtype(np.int8): 0x09, np.dtype(np.int32): 0x0C,
             np.dtype(np.float32): 0x0D, np.dtype(np.float64): 0x0E}
    head = bytes([0, 0, codes[arr.dtype] if code is None else code, arr.ndim])
    head += b"".join(struct.pack(">I", d) for d in arr.shape)
    return head + arr.astype(arr.dtype.newbyteorder(">")).tobytes()


def _mnist_files(n: int = 3) -> dict[str, bytes]:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, n).astype(np.uint8)
    return {"train-images-idx3-ubyte.gz": gzip.compress(_idx(images)),
            "train-labels-idx1-ubyte.gz": gzip.compress(_idx(labels))}


@pytest.mark.parametrize("cls", [MNIST, FashionMNIST])
def test_download_with_a_wrong_checksum_keeps_nothing(tmp_path, monkeypatch, cls):
    files = _mnist_files()
    fetched = []

    def serve(url, timeout=None):
        fetched.append(url)
        return io.BytesIO(files[url.rsplit("/", 1)[1]])

    monkeypatch.setattr(urllib.request, "urlopen", serve)
    with pytest.raises(RuntimeError, match="checksum mismatch.*train-images-idx3-ubyte.gz"):
        cls(root=tmp_path, download=True)
    raw = tmp_path / cls.folder / "raw"
    assert len(fetched) == len(cls.urls) and not list(raw.iterdir())
    monkeypatch.setattr(cls, "md5", {k: hashlib.md5(v).hexdigest() for k, v in files.items()})
    assert len(cls(root=tmp_path, download=True)) == 3
    assert sorted(p.name for p in raw.iterdir()) == sorted(files)


# -- malformed files ------------------------------------------------------------------------
@pytest.mark.parametrize("labels,found", [
    (["1", "2"], "<U1"),
    ([b"cat", b"dog"], "|S3"),
    ([1.0, 2.0], "float64"),
    ([True, False], "bool"),
    ([[1], [2]], r"shape \(2, 1\)"),
    ([1, "two"], "<U"),
])
def test_cifar_labels_that_are_not_integers(tmp_path, labels, found):
    _cifar_tree(tmp_path)
    p = tmp_path / "cifar-10-batches-py" / "data_batch_1"
    p.write_bytes(pickle.dumps({b"data": np.zeros((2, 3072), np.uint8), b"labels": labels}))
    with pytest.raises(ValueError, match=f"data_batch_1.*{found}.*expected a list of "
                                         "integers in 0..9"):
        CIFAR10(root=tmp_path)


@pytest.mark.parametrize("labels", [[0, 10], [-1, 3]])
def test_cifar_labels_out_of_range(tmp_path, labels):
    _cifar_tree(tmp_path)
    p = tmp_path / "cifar-10-batches-py" / "test_batch"
    p.write_bytes(pickle.dumps({b"data": np.zeros((2, 3072), np.uint8), b"labels": labels}))
    with pytest.raises(ValueError, match=rf"test_batch.*outside 0..9 \(found "
                                         rf"{min(labels)}..{max(labels)}\)"):
        CIFAR10(root=tmp_path, train=False)


def test_cifar_binary_labels_out_of_range(tmp_path):
    folder = tmp_path / "cifar-10-batches-bin"
    folder.mkdir()
    rec = np.zeros((2, 3073), np.uint8)
    rec[1, 0] = 200
    (folder / "test_batch.bin").write_bytes(rec.tobytes())
    with pytest.raises(ValueError, match=r"test_batch.bin.*outside 0..9 \(found 0..200\)"):
        CIFAR10(root=tmp_path, train=False)


def test_imdb_review_path_that_is_a_folder(tmp_path):
    _imdb_tree(tmp_path)
    odd = tmp_path / "aclImdb" / "train" / "pos" / "7_8.txt"
    odd.mkdir()
    with pytest.raises(ValueError, match=r"7_8.txt' is a directory, expected a review"):
        IMDB(root=tmp_path)


def _write_idx_pair(raw: Path, images: bytes, labels: bytes) -> None:
    raw.mkdir(parents=True, exist_ok=True)
    (raw / "train-images-idx3-ubyte").write_bytes(images)
    (raw / "train-labels-idx1-ubyte").write_bytes(labels)


@pytest.mark.parametrize("part,arr,code,match", [
    ("images", np.zeros((2, 28, 28), np.float32), None, r"0x0d \(float32\), expected 0x08"),
    ("images", np.zeros((2, 28, 28), np.float64), None, r"0x0e \(float64\), expected 0x08"),
    ("images", np.zeros((2, 28, 28), np.int8), None, r"0x09 \(int8\), expected 0x08"),
    ("labels", np.zeros(2, np.int32), None, r"0x0c \(int32\), expected 0x08 \(uint8\)"),
    ("labels", np.zeros(2, np.uint8), 0x0A, "bad IDX magic number 0x00000a01"),
    ("images", np.zeros((2, 28, 27), np.uint8), None, r"\(28, 27\), expected \(28, 28\)"),
    ("images", np.zeros((2, 784), np.uint8), None, "2 dimension.*expected 3"),
    ("labels", np.zeros((2, 1), np.uint8), None, "2 dimension.*expected 1"),
    ("labels", np.zeros(3, np.uint8), None, "2 images but.*3 labels"),
])
def test_mnist_idx_with_the_wrong_type_or_shape(tmp_path, part, arr, code, match):
    good = {"images": _idx(np.zeros((2, 28, 28), np.uint8)),
            "labels": _idx(np.zeros(2, np.uint8))}
    good[part] = _idx(arr, code)
    _write_idx_pair(tmp_path / "MNIST" / "raw", good["images"], good["labels"])
    with pytest.raises(ValueError, match=match) as info:
        MNIST(root=tmp_path)
    named = "labels" if "labels" in match else part
    assert f"train-{named}-idx" in str(info.value)


def test_read_idx_checks_the_dtype_only_when_asked(tmp_path):
    p = tmp_path / "f.idx"
    p.write_bytes(_idx(np.arange(6, dtype=np.float32).reshape(2, 3)))
    np.testing.assert_array_equal(read_idx(p), np.arange(6, dtype=np.float32).reshape(2, 3))
    assert read_idx(p, 2, dtype=np.float32).dtype == np.float32
    with pytest.raises(ValueError, match=r"f.idx.*0x0d \(float32\), expected 0x08 \(uint8\)"):
        read_idx(p, dtype=np.uint8)


# -- arguments ------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs,match", [
    ({"count": -1}, "count must be an int >= 0 or None, got -1"),
    ({"count": 1.5}, r"count must be an int >= 0 or None, got 1.5 \(float\)"),
    ({"count": "2"}, r"count must be an int >= 0 or None, got '2' \(str\)"),
    ({"count": True}, "count must be an int >= 0 or None, got True"),
    ({"max_len": 0}, "max_len must be an int >= 1, got 0"),
    ({"max_len": 8.0}, r"max_len must be an int >= 1, got 8.0 \(float\)"),
    ({"max_len": None}, "max_len must be an int >= 1, got None"),
    ({"min_freq": 0}, "min_freq must be an int >= 1"),
    ({"max_vocab": 1}, "max_vocab must be an int >= 2 or None"),
])
def test_imdb_invalid_arguments(tmp_path, kwargs, match):
    _imdb_tree(tmp_path)
    with pytest.raises(ValueError, match=f"IMDB: {match}"):
        IMDB(root=tmp_path, **kwargs)


def test_imdb_count_bounds_and_argument_types(tmp_path):
    _imdb_tree(tmp_path)
    with pytest.raises(ValueError, match="count=5 takes 3 neg reviews, .*train/neg' holds 2"):
        IMDB(root=tmp_path, count=5)
    assert len(IMDB(root=tmp_path, count=np.int64(4))) == 4
    assert len(IMDB(root=tmp_path, count=0)) == 0
    with pytest.raises(TypeError, match="vocab must be a vtl.datasets.Vocab or None, got str"):
        IMDB(root=tmp_path, vocab="words")
    with pytest.raises(TypeError, match="tokenizer must be callable"):
        IMDB(root=tmp_path, tokenizer=3)


@pytest.mark.parametrize("value", [-1, 2.5, "3", True])
def test_cifar_invalid_counts(tmp_path, value):
    _cifar_tree(tmp_path)
    with pytest.raises(ValueError, match=f"CIFAR10: test_count must be an int >= 0 or None, "
                                         f"got {value!r}"):
        CIFAR10(root=tmp_path, train=False, test_count=value)


def test_cifar_counts_accept_numpy_ints(backend, tmp_path):
    labels = _cifar_tree(tmp_path)
    ds = CIFAR10(root=tmp_path, train_count=np.int32(3))
    np.testing.assert_array_equal(to_numpy(ds.targets), np.concatenate(
        [labels["data_batch_1"], labels["data_batch_2"]])[:3])
    assert ds.targets.dtype == vtl.__array_namespace_info__().default_dtypes(
        device=ds.targets.device)["indexing"]


def test_imdb_count_takes_both_classes(backend, tmp_path):
    _imdb_tree(tmp_path)
    for count, ratings in [(1, [1]), (2, [1, 9]), (3, [1, 3, 9]), (4, [1, 3, 9, 10])]:
        ds = IMDB(root=tmp_path, count=count)
        assert ds.targets.tolist() == [0] * ((count + 1) // 2) + [1] * (count // 2)
        assert ds.ratings.tolist() == ratings and len(ds.texts) == count
    te = IMDB(root=tmp_path, train=False, count=2)
    assert te.targets.tolist() == [0, 1]
    with pytest.raises(ValueError, match="count=3 takes 2 neg reviews, .*test/neg' holds 1"):
        IMDB(root=tmp_path, train=False, count=3)
