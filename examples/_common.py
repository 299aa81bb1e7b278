"""Shared pieces of the examples: the command line (``--backend``, ``--quick``), the output
folder, and the datasets with their synthetic fallbacks."""

from __future__ import annotations

import argparse
import os
from typing import Any

import numpy as np

import vtl

#: Where the examples write files (checkpoints, plots) unless given ``--out``; git-ignored.
OUT = "demo_out"

#: What to install when a backend's runtime is missing (the extras of pyproject.toml).
_EXTRAS = {"cupy": ("cuda", "CuPy for CUDA 12"), "wgpu": ("wgpu", "wgpu-py")}


def backend_error(name: str, reason: str) -> str:
    """Why ``--backend name`` cannot run, and, when its runtime is not installed, the
    ``pip install`` that adds it."""
    text = f"backend {name!r} is not available ({reason})"
    if name in _EXTRAS and "ModuleNotFoundError" in reason:
        extra, what = _EXTRAS[name]
        text += f"; install it ({what}) with `pip install -e '.[{extra}]'`, then run again"
    return text


def setup(description: str, **defaults: object) -> argparse.Namespace:
    """Parse ``--backend NAME`` (default: env VTL_BACKEND or numpy) and ``--quick``
    (a few seconds: smaller data, fewer epochs), make the backend the default,
    and print it. An unusable backend ends the script with the reason (and what
    to install)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--backend", default=os.environ.get("VTL_BACKEND", "numpy"),
                   choices=sorted(vtl.backends.KNOWN_BACKENDS), help="numpy, cupy or wgpu")
    p.add_argument("--quick", action="store_true", help="tiny run for CI")
    for name, value in defaults.items():
        p.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)
    args = p.parse_args()
    backend = vtl.backends.get(args.backend)
    if not backend.is_available:
        raise SystemExit(f"{p.prog}: {backend_error(args.backend, backend.unavailable_reason)}")
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


#: The largest weight of the other class's pattern in a synthetic image: images whose
#: weight is above 0.5 look more like the other class (about 1 in 11 of them).
BLEND = 0.55


def templates(shape: tuple[int, ...]) -> np.ndarray:
    """The ten fixed class patterns of the synthetic images, values in [0, 1]."""
    rng = np.random.default_rng(1234)
    if len(shape) == 3:  # blocky 4x4 colour patterns, upsampled to the image size
        c, h, w = shape
        return rng.random((10, c, 4, 4)).repeat(h // 4, axis=2).repeat(w // 4, axis=3)
    return rng.random((10, *shape))


def synthetic_images(n: int, shape: tuple[int, ...], seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Ten classes. Each image blends its class's pattern with a random other class's
    (weight uniform in [0, BLEND]) and adds Gaussian noise, values clipped to [0, 1]:
    learnable, but no classifier gets every image right."""
    rng = np.random.default_rng(seed)
    t = templates(shape)
    y = rng.integers(0, 10, n)
    other = (y + rng.integers(1, 10, n)) % 10
    w = rng.uniform(0, BLEND, n).reshape(n, *(1,) * len(shape))
    x = (1 - w) * t[y] + w * t[other] + 0.1 * rng.standard_normal((n, *shape))
    return np.clip(x, 0, 1).astype(np.float32), y.astype(np.int64)


def mnist(train: bool, count: int | None = None, flatten: bool = False) -> Any:
    """MNIST (the first ``count`` images) from VTL_DATA (or the cache folder), else
    synthetic 28x28 images: ``count`` of them, or 6000 train / 1000 test."""
    try:
        ds = vtl.datasets.MNIST(train=train, flatten=flatten)
        if count is not None and count < len(ds):
            ds = vtl.data.TensorDataset(ds.data[:count], ds.targets[:count])
        return ds
    except ValueError as exc:
        if train:
            _fallback("MNIST", exc)
        shape = (784,) if flatten else (1, 28, 28)
        n = count or (6000 if train else 1000)
        x, y = synthetic_images(n, shape, seed=0 if train else 1)
        return vtl.data.TensorDataset(vtl.asarray(x), vtl.asarray(y))


def cifar10(train: bool, count: int) -> Any:
    """CIFAR-10 (first ``count`` images) from VTL_DATA, else synthetic 3x32x32 images."""
    try:
        kw = {"train_count": count} if train else {"test_count": count}
        return vtl.datasets.CIFAR10(train=train, **kw)
    except ValueError as exc:
        if train:
            _fallback("CIFAR-10", exc)
        x, y = synthetic_images(count, (3, 32, 32), seed=0 if train else 1)
        return vtl.data.TensorDataset(vtl.asarray(x), vtl.asarray(y))


_POS = "great excellent wonderful loved superb fun moving brilliant".split()
_NEG = "awful boring terrible hated dull worst waste bad".split()
_FILL = "the a movie film plot actor scene story it was and of this".split()


#: The chance that a sentiment word of a synthetic review has the review's sentiment.
AGREE = 0.85


def synthetic_reviews(n: int, seed: int) -> tuple[list[str], np.ndarray]:
    """Short English-like reviews with three sentiment words, each of the review's
    sentiment with probability AGREE, else of the other: mixed reviews, whose words
    mislead in about 1 case in 16."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    texts = []
    for label in y:
        words = list(rng.choice(_FILL, rng.integers(6, 14)))
        for _ in range(3):
            agrees = rng.random() < AGREE
            pool = _POS if bool(label) == agrees else _NEG
            words.insert(int(rng.integers(0, len(words) + 1)), str(rng.choice(pool)))
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
        ids, _ = vocab.encode_batch([tok(t) for t in texts], max_len)  # padded at the end
        ds = vtl.data.TensorDataset(vtl.asarray(ids), vtl.asarray(y))
        ds.texts = texts
        return ds

    return encode(tr_texts, tr_y), encode(te_texts, te_y), vocab
