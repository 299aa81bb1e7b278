"""Shared command line of the examples: ``--backend`` and ``--quick``."""

from __future__ import annotations

import argparse
import os
from typing import Any

import numpy as np

import vtl


def setup(description: str, **defaults: object) -> argparse.Namespace:
    """Parse ``--backend NAME`` (default: env VTL_BACKEND or numpy) and ``--quick``
    (a few seconds: smaller data, fewer epochs), make the backend the default,
    and print it."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--backend", default=os.environ.get("VTL_BACKEND", "numpy"),
                   help="numpy, cupy or wgpu")
    p.add_argument("--quick", action="store_true", help="tiny run for CI")
    for name, value in defaults.items():
        p.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)
    args = p.parse_args()
    vtl.set_backend(args.backend)
    print(f"backend: {args.backend}")
    return args


def report(history: vtl.train.History) -> None:
    """The two lines tests/test_examples.py reads: first and last epoch's loss."""
    print(f"initial loss: {history['loss'][0]:.4f}")
    print(f"final loss: {history['loss'][-1]:.4f}")


def _fallback(name: str, exc: Exception) -> None:
    print(f"{name} files not found: {exc}")
    print(f"-> using small SYNTHETIC data shaped like {name} instead (results are not "
          f"{name} results)")


def _synthetic_images(n: int, shape: tuple[int, ...], seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Ten classes, each a fixed random template plus noise, values in [0, 1]."""
    rng = np.random.default_rng(seed)
    if len(shape) == 3:  # blocky 4x4 colour patterns, upsampled to the image size
        c, h, w = shape
        coarse = np.random.default_rng(1234).random((10, c, 4, 4))
        templates = coarse.repeat(h // 4, axis=2).repeat(w // 4, axis=3)
    else:
        templates = np.random.default_rng(1234).random((10, *shape))
    y = rng.integers(0, 10, n)
    x = np.clip(0.7 * templates[y] + 0.3 * rng.random((n, *shape)), 0, 1)
    return x.astype(np.float32), y.astype(np.int64)


def mnist(train: bool, count: int | None = None, flatten: bool = False) -> Any:
    """MNIST from VTL_DATA (or the cache folder), else synthetic 28x28 digits."""
    try:
        ds = vtl.datasets.MNIST(train=train, flatten=flatten)
        if count is not None and count < len(ds):
            ds = vtl.data.TensorDataset(ds.data[:count], ds.targets[:count])
        return ds
    except ValueError as exc:
        if train:
            _fallback("MNIST", exc)
        shape = (784,) if flatten else (1, 28, 28)
        x, y = _synthetic_images(count or 1000, shape, seed=0 if train else 1)
        return vtl.data.TensorDataset(vtl.asarray(x), vtl.asarray(y))


def cifar10(train: bool, count: int) -> Any:
    """CIFAR-10 (first ``count`` images) from VTL_DATA, else synthetic 3x32x32 images."""
    try:
        kw = {"train_count": count} if train else {"test_count": count}
        return vtl.datasets.CIFAR10(train=train, **kw)
    except ValueError as exc:
        if train:
            _fallback("CIFAR-10", exc)
        x, y = _synthetic_images(count, (3, 32, 32), seed=0 if train else 1)
        return vtl.data.TensorDataset(vtl.asarray(x), vtl.asarray(y))


_POS = "great excellent wonderful loved superb fun moving brilliant".split()
_NEG = "awful boring terrible hated dull worst waste bad".split()
_FILL = "the a movie film plot actor scene story it was and of this".split()


def synthetic_reviews(n: int, seed: int) -> tuple[list[str], np.ndarray]:
    """Short English-like reviews whose sentiment words decide the label."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    texts = []
    for label in y:
        words = list(rng.choice(_FILL, rng.integers(6, 14)))
        for _ in range(3):
            words.insert(int(rng.integers(0, len(words) + 1)),
                         str(rng.choice(_POS if label else _NEG)))
        texts.append(" ".join(words))
    return texts, y.astype(np.int64)


def imdb(max_len: int, count: int | None, quick: bool) -> tuple[Any, Any, Any]:
    """(train, test, vocab): IMDB from VTL_DATA, else synthetic reviews."""
    try:
        train = vtl.datasets.IMDB(train=True, max_len=max_len, count=count)
        test = vtl.datasets.IMDB(train=False, max_len=max_len, count=count, vocab=train.vocab)
        return train, test, train.vocab
    except ValueError as exc:
        _fallback("IMDB", exc)
    tok = vtl.datasets.text.Tokenizer()
    n = 256 if quick else 2000
    tr_texts, tr_y = synthetic_reviews(n, 0)
    te_texts, te_y = synthetic_reviews(n // 4, 1)
    vocab = vtl.datasets.text.Vocab.build([tok(t) for t in tr_texts])

    def encode(texts: list[str], y: np.ndarray) -> Any:
        ids = np.zeros((len(texts), max_len), dtype=np.int64)
        for i, t in enumerate(texts):
            seq = vocab.encode(tok(t))[:max_len]
            ids[i, :len(seq)] = seq
        ds = vtl.data.TensorDataset(vtl.asarray(ids), vtl.asarray(y))
        ds.texts = texts
        return ds

    return encode(tr_texts, tr_y), encode(te_texts, te_y), vocab
