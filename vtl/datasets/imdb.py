"""The IMDB movie-review sentiment dataset from the official ``aclImdb`` folders."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from ._common import (
    ArrayDataset,
    check_count,
    clean_stale_extractions,
    download,
    int_tensor,
    resolve_root,
    unpack_archive,
)
from .text import Tokenizer, Vocab

__all__ = ["IMDB"]

_NAME = re.compile(r"^(\d+)_(\d+)\.txt$")


class IMDB(ArrayDataset):
    """Large Movie Review Dataset (Maas et al., 2011) from ``root/aclImdb``.

    Reads ``aclImdb/{train,test}/{neg,pos}/<id>_<stars>.txt``. ``.targets`` is
    int64 0 (neg) / 1 (pos), ``.ratings`` the star rating from the file name
    (1-10), ``.texts`` the raw reviews, ``.data`` int64 ``(N, max_len)`` token ids
    (``Tokenizer``, padded with 0, truncated after ``max_len`` tokens),
    ``.lengths`` each review's token count (capped at ``max_len``). Without
    ``vocab`` a :class:`Vocab` of at most ``max_vocab`` tokens seen at least
    ``min_freq`` times is built from this split; pass the training set's
    ``.vocab`` to the test set. Samples are ordered neg then pos, by file id.
    ``count`` keeps that many, balanced: the first ``(count + 1) // 2`` neg and
    ``count // 2`` pos reviews by file id (only those files are read).
    ``max_len``, ``min_freq`` (>= 1), ``max_vocab`` (>= 2 or None) and ``count``
    (>= 0 or None) must be ints (``ValueError`` otherwise). ``download=True``
    fetches the archive (unless ``root`` already holds it), checks its MD5
    against the official one and unpacks it atomically; a corrupt or truncated
    archive raises ``ValueError`` naming it.

    Args:
        root: The data folder (default: env ``VTL_DATA`` or the user cache folder).
        train: The training split (else the test split).
        download: Fetch the missing files (checked against their official MD5).
        max_len: Tokens kept per review.
        vocab: A :class:`Vocab` to use (default: built from this split).
        max_vocab: Largest vocabulary built (at least 2, or ``None``).
        min_freq: Least frequency of a token in a built vocabulary.
        tokenizer: A callable from text to a list of tokens (default: :class:`Tokenizer`).
        count: Keep that many reviews, balanced (default: all).
        backend: Backend of the tensors (default: the default backend).
        device: Device of the tensors (instead of ``backend``).

    Raises:
        ValueError: If a file or folder is missing or malformed, or an int argument is out of
            range.
        TypeError: If ``vocab`` is not a Vocab or ``tokenizer`` is not callable.
    """

    url = "https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz"
    archive = "aclImdb_v1.tar.gz"
    archive_md5: str | None = "7c2ac02c03563afcf9b574c7e56c153a"  # the official checksum
    archive_files = [f"aclImdb/{s}/{c}" for s in ("train", "test") for c in ("neg", "pos")]

    def __init__(self, root: Any = None, train: bool = True, download: bool = False,
                 max_len: int = 256, vocab: Vocab | None = None, max_vocab: int | None = 20000,
                 min_freq: int = 1, tokenizer: Any = None, count: int | None = None,
                 backend: str | None = None, *, device: Any = None) -> None:
        max_len = check_count(max_len, "max_len", "IMDB", 1, optional=False)
        max_vocab = check_count(max_vocab, "max_vocab", "IMDB", 2)
        min_freq = check_count(min_freq, "min_freq", "IMDB", 1, optional=False)
        count = check_count(count, "count", "IMDB")
        if vocab is not None and not isinstance(vocab, Vocab):
            raise TypeError(f"IMDB: vocab must be a vtl.datasets.Vocab or None, got "
                            f"{type(vocab).__name__}")
        if tokenizer is not None and not callable(tokenizer):
            raise TypeError(f"IMDB: tokenizer must be callable (text -> list of tokens) or "
                            f"None, got {type(tokenizer).__name__}")
        base = resolve_root(root)
        top = base / "aclImdb"
        split = "train" if train else "test"
        if download:
            archive = base / self.archive
            clean_stale_extractions(base, archive)
            if not (top / split).is_dir():
                if not archive.is_file():
                    _download(self.url, archive, base, self.archive_md5)
                unpack_archive(archive, base, "IMDB", self.archive_files, self.archive_md5)
        texts, labels, ratings = [], [], []
        for label, sub in ((0, "neg"), (1, "pos")):
            folder = top / split / sub
            if not folder.is_dir():
                raise ValueError(f"IMDB: folder {str(folder)!r} not found. Put the aclImdb "
                                 f"folder (unpacked from {self.url}) in {str(base)!r} (or pass "
                                 "root=..., set VTL_DATA, or use download=True)")
            files = []
            for p in folder.iterdir():
                if p.suffix != ".txt":
                    continue
                m = _NAME.match(p.name)
                if m is None:
                    raise ValueError(f"IMDB: {str(p)!r} is not named <id>_<rating>.txt")
                if not p.is_file():
                    kind = "a directory" if p.is_dir() else "not a regular file"
                    raise ValueError(f"IMDB: {str(p)!r} is {kind}, expected a review text file")
                stars = int(m.group(2))
                if not 1 <= stars <= 10:
                    raise ValueError(f"IMDB: {str(p)!r} has rating {stars}, expected 1..10")
                files.append((int(m.group(1)), stars, p))
            if not files:
                raise ValueError(f"IMDB: {str(folder)!r} holds no reviews (<id>_<rating>.txt)")
            take = len(files) if count is None else (count + 1 - label) // 2
            if take > len(files):
                raise ValueError(f"IMDB: count={count} takes {take} {sub} reviews, "
                                 f"{str(folder)!r} holds {len(files)}")
            for _, stars, p in sorted(files)[:take]:
                try:
                    texts.append(p.read_text(encoding="utf-8"))
                except UnicodeDecodeError as exc:
                    raise ValueError(f"IMDB: {str(p)!r} is not valid UTF-8: {exc}") from None
                labels.append(label)
                ratings.append(stars)
        self.tokenizer = tokenizer or Tokenizer()
        tokens = [self.tokenizer(t) for t in texts]
        self.vocab = vocab if vocab is not None else Vocab.build(tokens, max_vocab, min_freq)
        ids, lengths = self.vocab.encode_batch(tokens, max_len)
        self.texts = texts
        self.max_len = max_len
        super().__init__(ids, np.asarray(labels, np.int64), ["neg", "pos"], backend, device)
        dev = self.data.device
        self.ratings = int_tensor(ratings, dev)
        self.lengths = int_tensor(lengths, dev)


def _download(url: str, archive: Path, base: Path, md5: str | None = None) -> None:
    download([url], archive, "IMDB", base, f"{url}, unpack it and", md5)
