"""vtl.datasets: bundled Iris/Digits, file loaders on small files in the official formats,
synthetic sets, text tokenizer/vocabulary."""

from __future__ import annotations

import gzip
import pickle
import struct
import urllib.error
import urllib.request

import numpy as np
import pytest
from helpers import to_numpy

import vtl
from vtl.data import DataLoader, TensorDataset
from vtl.datasets import CIFAR10, IMDB, MNIST, Digits, FashionMNIST, Iris, synthetic
from vtl.datasets.text import Tokenizer, Vocab


def _index_dtype():
    """int64, or the default device's index dtype where it lacks int64."""
    return vtl.__array_namespace_info__().default_dtypes(device=vtl.asarray(0).device)[
        "indexing"]


# -- bundled ------------------------------------------------------------------------------
def test_digits(backend):
    tr, te = Digits(), Digits(train=False)
    assert isinstance(tr, TensorDataset)
    assert len(tr) + len(te) == 1797
    assert tuple(tr.data.shape) == (len(tr), 64) and tr.data.dtype == vtl.float32
    assert tr.targets.dtype == _index_dtype()
    assert tr.data.device == vtl.asarray(0).device
    x = to_numpy(tr.data)
    assert x.min() == 0.0 and x.max() == 1.0
    assert np.allclose(x * 16, np.round(x * 16))  # pixel counts 0..16
    assert tr.num_classes == 10 and tr.classes == [str(i) for i in range(10)]
    ytr, yte = to_numpy(tr.targets), to_numpy(te.targets)
    counts = np.bincount(np.concatenate([ytr, yte]))
    assert counts.tolist() == [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]
    # stratified: each class's test share is round(count * 0.2)
    assert np.bincount(yte).tolist() == [int(round(c * 0.2)) for c in counts]
    # disjoint and complete: every row appears in exactly one split
    both = np.concatenate([x, to_numpy(te.data)])
    assert len(both) == 1797
    # deterministic; another seed gives another split
    np.testing.assert_array_equal(to_numpy(Digits(train=False).data), to_numpy(te.data))
    assert not np.array_equal(to_numpy(Digits(train=False, seed=1).targets), yte)
    assert tuple(tr.images.shape) == (len(tr), 1, 8, 8)
    assert len(Digits(test_fraction=0.0)) == 1797


def test_digits_first_sample_matches_the_source():
    # first row of the UCI optdigits 8x8 set as distributed (a zero)
    full = Digits(test_fraction=0.0)
    first = [0, 0, 5, 13, 9, 1, 0, 0, 0, 0, 13, 15, 10, 15, 5, 0]
    np.testing.assert_array_equal(to_numpy(full.data[0])[:16] * 16, first)
    assert int(full.targets[0]) == 0


def test_iris(backend):
    tr, te = Iris(), Iris(train=False)
    assert (len(tr), len(te)) == (120, 30)
    assert tr.classes == ["setosa", "versicolor", "virginica"] and tr.num_classes == 3
    assert tuple(tr.data.shape) == (120, 4) and tr.data.dtype == vtl.float32
    assert np.bincount(to_numpy(te.targets)).tolist() == [10, 10, 10]
    full = Iris(test_fraction=0.0)
    x = to_numpy(full.data)
    np.testing.assert_allclose(x[0], [5.1, 3.5, 1.4, 0.2], rtol=1e-6)
    np.testing.assert_allclose(x.mean(0), [5.843333, 3.057333, 3.758, 1.199333], rtol=1e-5)
    st = Iris(standardize=True)
    xs = to_numpy(st.data)
    np.testing.assert_allclose(xs.mean(0), 0, atol=1e-5)
    np.testing.assert_allclose(xs.std(0), 1, rtol=1e-4)
    with pytest.raises(ValueError, match="test_fraction"):
        Iris(test_fraction=1.0)


def test_bundled_sets_feed_a_loader(backend):
    ds = Iris()
    n = sum(int(xb.shape[0]) for xb, _ in DataLoader(ds, batch_size=32, shuffle=True, seed=0))
    assert n == 120


# -- synthetic ----------------------------------------------------------------------------
def test_xor(backend):
    ds = synthetic.xor(64, 0.05, seed=1)
    x, y = to_numpy(ds.tensors[0]), to_numpy(ds.tensors[1])
    assert x.shape == (64, 2) and x.dtype == np.float32 and y.dtype == _index_dtype()
    np.testing.assert_array_equal(y, (np.sign(x[:, 0]) != np.sign(x[:, 1])).astype(y.dtype))
    assert ds.tensors[0].device == vtl.asarray(0).device
    with vtl.use_backend("numpy"):
        ref = synthetic.xor(64, 0.05, seed=1)
    np.testing.assert_array_equal(x, to_numpy(ref.tensors[0]))
    assert not np.array_equal(x, to_numpy(synthetic.xor(64, 0.05, seed=2).tensors[0]))


def test_two_spirals(backend):
    ds = synthetic.two_spirals(100, 0.0, seed=0)
    x, y = to_numpy(ds.tensors[0]), to_numpy(ds.tensors[1])
    assert x.shape == (100, 2) and np.bincount(y).tolist() == [50, 50]
    r = np.hypot(x[:, 0], x[:, 1])
    assert r.min() >= 0.1 - 1e-6 and r.max() <= 1.0 + 1e-6
    # the second spiral is the first rotated by pi: mirrored points
    assert np.all(np.isfinite(x))


def test_sine(backend):
    ds = synthetic.sine(50, 0.0, seed=0)
    x, y = to_numpy(ds.tensors[0]), to_numpy(ds.tensors[1])
    assert x.shape == y.shape == (50, 1)
    assert np.all(x >= -np.pi) and np.all(x < np.pi)
    np.testing.assert_allclose(y, np.sin(x), atol=1e-6)
    noisy = to_numpy(synthetic.sine(2000, 0.3, seed=0).tensors[1])
    xs = to_numpy(synthetic.sine(2000, 0.3, seed=0).tensors[0])
    assert abs(np.std(noisy - np.sin(xs)) - 0.3) < 0.03
    with pytest.raises(ValueError, match="noise"):
        synthetic.sine(5, -1.0, 0)
    with pytest.raises(ValueError, match="positive"):
        synthetic.xor(0, 0.1, 0)


# -- IDX / MNIST ----------------------------------------------------------------------------
def _idx(arr: np.ndarray) -> bytes:
    code = {np.dtype(np.uint8): 0x08, np.dtype(np.int32): 0x0C}[arr.dtype]
    head = bytes([0, 0, code, arr.ndim]) + b"".join(struct.pack(">I", d) for d in arr.shape)
    return head + arr.astype(arr.dtype.newbyteorder(">")).tobytes()


def _write_mnist(folder, prefix: str, n: int, gz: bool, seed: int = 0):
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, n).astype(np.uint8)
    folder.mkdir(parents=True, exist_ok=True)
    for stem, arr in ((f"{prefix}-images-idx3-ubyte", images),
                      (f"{prefix}-labels-idx1-ubyte", labels)):
        data = _idx(arr)
        if gz:
            (folder / (stem + ".gz")).write_bytes(gzip.compress(data))
        else:
            (folder / stem).write_bytes(data)
    return images, labels


@pytest.mark.parametrize("gz", [True, False])
def test_mnist_reads_idx(backend, tmp_path, gz):
    images, labels = _write_mnist(tmp_path / "MNIST" / "raw", "train", 7, gz)
    timg, tlab = _write_mnist(tmp_path / "MNIST" / "raw", "t10k", 3, gz, seed=1)
    ds = MNIST(root=tmp_path)
    assert tuple(ds.data.shape) == (7, 1, 28, 28) and ds.data.dtype == vtl.float32
    np.testing.assert_allclose(to_numpy(ds.data)[:, 0], images / np.float32(255), rtol=1e-6)
    np.testing.assert_array_equal(to_numpy(ds.targets), labels)
    assert ds.targets.dtype == _index_dtype() and ds.num_classes == 10
    test = MNIST(root=tmp_path, train=False, flatten=True)
    assert tuple(test.data.shape) == (3, 784)
    np.testing.assert_array_equal(to_numpy(test.targets), tlab)


def test_mnist_root_from_env_and_fashion_folder(tmp_path, monkeypatch):
    _, labels = _write_mnist(tmp_path / "FashionMNIST", "train", 4, True)
    monkeypatch.setenv("VTL_DATA", str(tmp_path))
    assert vtl.datasets.default_root() == tmp_path
    ds = FashionMNIST()
    np.testing.assert_array_equal(to_numpy(ds.targets), labels)
    assert ds.classes[0] == "T-shirt/top"
    with pytest.raises(ValueError, match="train-images-idx3-ubyte"):
        MNIST()  # the MNIST files are not there


def _corrupt_cases(raw_dir):
    img = raw_dir / "train-images-idx3-ubyte"
    lab = raw_dir / "train-labels-idx1-ubyte"
    good_img, good_lab = img.read_bytes(), lab.read_bytes()
    return img, lab, good_img, good_lab


@pytest.mark.parametrize("damage,match", [
    ("magic", "magic number"),
    ("ndim", "dimension"),
    ("truncated", "truncated"),
    ("extra", "corrupt"),
    ("header", "truncated"),
    ("count", "labels"),
    ("label_value", "outside 0..9"),
    ("bad_gzip", "gzip"),
    ("missing", "not found"),
])
def test_mnist_bad_files(tmp_path, damage, match):
    raw = tmp_path / "MNIST" / "raw"
    _write_mnist(raw, "train", 5, False)
    img, lab, good_img, good_lab = _corrupt_cases(raw)
    target = img
    if damage == "magic":
        img.write_bytes(b"\x01\x00" + good_img[2:])
    elif damage == "ndim":
        lab.write_bytes(good_lab[:3] + b"\x02" + good_lab[4:])
        target = lab
    elif damage == "truncated":
        img.write_bytes(good_img[:-100])
    elif damage == "extra":
        img.write_bytes(good_img + b"\x00\x00")
    elif damage == "header":
        img.write_bytes(good_img[:9])
    elif damage == "count":
        lab.write_bytes(_idx(np.zeros(4, np.uint8)))
        target = lab
    elif damage == "label_value":
        lab.write_bytes(_idx(np.array([0, 1, 2, 3, 12], np.uint8)))
        target = lab
    elif damage == "bad_gzip":
        img.unlink()
        target = raw / "train-images-idx3-ubyte.gz"
        target.write_bytes(gzip.compress(good_img)[:-30])
    elif damage == "missing":
        lab.unlink()
        target = lab
    with pytest.raises(ValueError, match=match) as info:
        MNIST(root=tmp_path)
    assert target.name.removesuffix(".gz") in str(info.value)


def test_download_offline_says_where_to_put_files(tmp_path, monkeypatch):
    def offline(*args, **kwargs):
        raise urllib.error.URLError("network is unreachable")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    with pytest.raises(RuntimeError) as info:
        MNIST(root=tmp_path, download=True)
    msg = str(info.value)
    assert "download failed" in msg and str(tmp_path / "MNIST" / "raw") in msg
    assert "train-images-idx3-ubyte.gz" in msg
    with pytest.raises(RuntimeError, match="cifar-10-python.tar.gz"):
        CIFAR10(root=tmp_path, download=True)
    with pytest.raises(RuntimeError, match="aclImdb"):
        IMDB(root=tmp_path, download=True)
    assert not list((tmp_path / "MNIST" / "raw").glob("*.part"))


# -- CIFAR-10 -------------------------------------------------------------------------------
def _cifar_arrays(n: int, seed: int):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (n, 3072), dtype=np.uint8), rng.integers(0, 10, n)


def _write_cifar_bin(root, per_batch: int = 4):
    folder = root / "cifar-10-batches-bin"
    folder.mkdir(parents=True)
    out = {}
    for i, name in enumerate([f"data_batch_{k}" for k in range(1, 6)] + ["test_batch"]):
        x, y = _cifar_arrays(per_batch, i)
        rec = np.concatenate([y.astype(np.uint8)[:, None], x], axis=1)
        (folder / (name + ".bin")).write_bytes(rec.tobytes())
        out[name] = (x, y)
    names = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
             "truck"]
    (folder / "batches.meta.txt").write_text("\n".join(names) + "\n\n")
    return folder, out


def _write_cifar_py(root, per_batch: int = 4):
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    out = {}
    for i, name in enumerate([f"data_batch_{k}" for k in range(1, 6)] + ["test_batch"]):
        x, y = _cifar_arrays(per_batch, 10 + i)
        d = {b"batch_label": b"batch", b"labels": [int(v) for v in y], b"data": x,
             b"filenames": [b"f.png"] * per_batch}
        (folder / name).write_bytes(pickle.dumps(d, protocol=2))
        out[name] = (x, y)
    meta = {b"label_names": [b"a", b"b", b"c", b"d", b"e", b"f", b"g", b"h", b"i", b"j"],
            b"num_vis": 3072}
    (folder / "batches.meta").write_bytes(pickle.dumps(meta, protocol=2))
    return folder, out


@pytest.mark.parametrize("fmt", ["bin", "py"])
def test_cifar10(backend, tmp_path, fmt):
    folder, out = (_write_cifar_bin if fmt == "bin" else _write_cifar_py)(tmp_path)
    ds = CIFAR10(root=tmp_path)
    assert tuple(ds.data.shape) == (20, 3, 32, 32) and ds.data.dtype == vtl.float32
    x = np.concatenate([out[f"data_batch_{k}"][0] for k in range(1, 6)])
    y = np.concatenate([out[f"data_batch_{k}"][1] for k in range(1, 6)])
    np.testing.assert_allclose(to_numpy(ds.data), x.reshape(-1, 3, 32, 32) / np.float32(255),
                               rtol=1e-6)
    np.testing.assert_array_equal(to_numpy(ds.targets), y)
    assert ds.classes[0] == ("airplane" if fmt == "bin" else "a") and ds.num_classes == 10
    sub = CIFAR10(root=tmp_path, train_count=6)
    np.testing.assert_array_equal(to_numpy(sub.targets), y[:6])
    te = CIFAR10(root=tmp_path, train=False, test_count=3)
    np.testing.assert_array_equal(to_numpy(te.targets), out["test_batch"][1][:3])
    with pytest.raises(ValueError, match="asked for 30"):
        CIFAR10(root=tmp_path, train=False, test_count=30)
    with pytest.raises(ValueError, match="train_count"):
        CIFAR10(root=tmp_path, train_count=-1)


def test_cifar10_bad_files(tmp_path):
    folder, _ = _write_cifar_bin(tmp_path / "b")
    p = folder / "data_batch_2.bin"
    p.write_bytes(p.read_bytes()[:-7])
    with pytest.raises(ValueError, match="data_batch_2.bin.*truncated"):
        CIFAR10(root=tmp_path / "b")
    CIFAR10(root=tmp_path / "b", train_count=4)  # only the first batch is read
    (folder / "data_batch_3.bin").unlink()
    p.write_bytes(b"")
    with pytest.raises(ValueError, match="data_batch_2"):
        CIFAR10(root=tmp_path / "b")
    folder, _ = _write_cifar_py(tmp_path / "p")
    p = folder / "data_batch_1"
    p.write_bytes(p.read_bytes()[:100])
    with pytest.raises(ValueError, match="data_batch_1.*truncated or corrupt"):
        CIFAR10(root=tmp_path / "p")
    p.write_bytes(pickle.dumps({b"data": np.zeros((2, 10), np.uint8), b"labels": [0, 1]}))
    with pytest.raises(ValueError, match=r"data_batch_1.*\(N, 3072\)"):
        CIFAR10(root=tmp_path / "p")
    p.write_bytes(pickle.dumps(TensorDataset))  # arbitrary objects are never unpickled
    with pytest.raises(ValueError, match="data_batch_1.*refusing"):
        CIFAR10(root=tmp_path / "p")
    (folder / "test_batch").unlink()
    with pytest.raises(ValueError, match="test_batch.*not found"):
        CIFAR10(root=tmp_path / "p", train=False)
    with pytest.raises(ValueError, match="cifar-10-batches-py.*not found"):
        CIFAR10(root=tmp_path / "empty")


# -- IMDB and text --------------------------------------------------------------------------
REVIEWS = {
    "train/pos": [("0_9", "A great movie!<br /><br />Great acting."), ("1_10", "Loved it.")],
    "train/neg": [("2_1", "Terrible film, awful acting."), ("5_3", "Bad. Not great.")],
    "test/pos": [("0_8", "Great fun")],
    "test/neg": [("0_2", "Boring unknownword")],
}


def _write_imdb(root):
    for sub, items in REVIEWS.items():
        folder = root / "aclImdb" / sub
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in items:
            (folder / f"{name}.txt").write_text(text, encoding="utf-8")
    (root / "aclImdb" / "train" / "urls_pos.txt").parent.mkdir(parents=True, exist_ok=True)
    (root / "aclImdb" / "imdb.vocab").write_text("great\n")


def test_tokenizer_and_vocab():
    tok = Tokenizer()
    assert tok("A great movie!<br /><br />Don't miss it") == ["a", "great", "movie", "don't",
                                                              "miss", "it"]
    assert Tokenizer(keep_punct=True)("Hi, you!") == ["hi", ",", "you", "!"]
    v = Vocab.build([["b", "a", "b", "c"], ["a", "b"]], max_size=4)
    assert v.itos == ["<pad>", "<unk>", "b", "a"]
    assert v["b"] == 2 and v["zzz"] == 1 and len(v) == 4 and "c" not in v
    assert Vocab.build([["x", "y", "y"]], min_freq=2).itos == ["<pad>", "<unk>", "y"]
    ids, lengths = v.encode_batch([["a", "b", "a"], ["c"], []], max_len=2)
    assert ids.tolist() == [[3, 2], [1, 0], [0, 0]] and lengths.tolist() == [2, 1, 0]
    ids, _ = v.encode_batch([["a", "b", "a"]], max_len=2, truncate="start")
    assert ids.tolist() == [[2, 3]]
    assert v.decode([2, 3, 0]) == ["b", "a", "<pad>"]


def test_imdb(backend, tmp_path):
    _write_imdb(tmp_path)
    tr = IMDB(root=tmp_path, max_len=5)
    assert len(tr) == 4
    assert tr.targets.tolist() == [0, 0, 1, 1]  # neg then pos, by file id
    assert tr.ratings.tolist() == [1, 3, 9, 10]
    assert tr.texts[0] == "Terrible film, awful acting."
    assert tuple(tr.data.shape) == (4, 5) and tr.data.dtype == _index_dtype()
    assert tr.lengths.tolist() == [4, 3, 5, 2]
    first = tr.vocab.decode(to_numpy(tr.data[0]))
    assert first == ["terrible", "film", "awful", "acting", "<pad>"]
    assert tr.vocab.itos[2] == "great"  # the most frequent word
    te = IMDB(root=tmp_path, train=False, max_len=3, vocab=tr.vocab)
    assert te.targets.tolist() == [0, 1] and te.ratings.tolist() == [2, 8]
    assert to_numpy(te.data).tolist()[0] == [tr.vocab["boring"], 1, 0]  # unknown -> <unk>
    assert tr.classes == ["neg", "pos"]


def test_imdb_bad_folders(tmp_path):
    with pytest.raises(ValueError, match="aclImdb.*not found"):
        IMDB(root=tmp_path)
    _write_imdb(tmp_path)
    bad = tmp_path / "aclImdb" / "train" / "pos" / "oops.txt"
    bad.write_text("x")
    with pytest.raises(ValueError, match="oops.txt"):
        IMDB(root=tmp_path)
    bad.unlink()
    bad = tmp_path / "aclImdb" / "train" / "pos" / "7_11.txt"
    bad.write_text("x")
    with pytest.raises(ValueError, match="7_11.txt.*rating 11"):
        IMDB(root=tmp_path)
    bad.write_bytes(b"\xff\xfe\xfa")
    bad.rename(tmp_path / "aclImdb" / "train" / "pos" / "7_7.txt")
    with pytest.raises(ValueError, match="7_7.txt.*UTF-8"):
        IMDB(root=tmp_path)
