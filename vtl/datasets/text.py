"""Text helpers for sequence models: a regex tokenizer and a vocabulary."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

__all__ = ["Tokenizer", "Vocab"]


class Tokenizer:
    """Lower-cases, removes HTML line breaks (``<br />``), and splits into words
    (letters, digits and inner apostrophes) and single punctuation marks
    (``keep_punct=True``).

    Args:
        lower: Lower-case the text.
        keep_punct: Keep punctuation marks as tokens.
    """

    _BR = re.compile(r"<br\s*/?>", re.IGNORECASE)

    def __init__(self, lower: bool = True, keep_punct: bool = False) -> None:
        self.lower = lower
        self.keep_punct = keep_punct
        self._re = re.compile(r"[^\W_]+(?:'[^\W_]+)*|[^\w\s]" if keep_punct
                              else r"[^\W_]+(?:'[^\W_]+)*")

    def __call__(self, text: str) -> list[str]:
        text = self._BR.sub(" ", text)
        if self.lower:
            text = text.lower()
        return self._re.findall(text)


class Vocab:
    """Token <-> index mapping. Index 0 is ``<pad>``, 1 is ``<unk>`` (unknown tokens).

    ``Vocab.build(token_lists, max_size=, min_freq=)`` keeps the most frequent
    tokens (ties broken alphabetically, so the result is deterministic).

    Args:
        tokens: The tokens after ``<pad>`` and ``<unk>``, unique.

    Raises:
        ValueError: If the tokens are not unique.
    """

    PAD, UNK = "<pad>", "<unk>"

    def __init__(self, tokens: Sequence[str]) -> None:
        self.itos: list[str] = [self.PAD, self.UNK] + [t for t in tokens
                                                       if t not in (self.PAD, self.UNK)]
        self.stoi: dict[str, int] = {t: i for i, t in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            raise ValueError("Vocab: tokens must be unique")

    @classmethod
    def build(cls, token_lists: Iterable[Sequence[str]], max_size: int | None = None,
              min_freq: int = 1) -> Vocab:
        """Most frequent tokens first; ``max_size`` counts the two special tokens."""
        counts: Counter[str] = Counter()
        for toks in token_lists:
            counts.update(toks)
        items = sorted((kv for kv in counts.items() if kv[1] >= min_freq),
                       key=lambda kv: (-kv[1], kv[0]))
        if max_size is not None:
            items = items[:max(0, max_size - 2)]
        return cls([t for t, _ in items])

    pad_index = 0
    unk_index = 1

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: str) -> bool:
        return token in self.stoi

    def __getitem__(self, token: str) -> int:
        return self.stoi.get(token, self.unk_index)

    def encode(self, tokens: Sequence[str]) -> list[int]:
        return [self.stoi.get(t, 1) for t in tokens]

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self.itos[int(i)] for i in ids]

    def encode_batch(self, token_lists: Sequence[Sequence[str]], max_len: int,
                     truncate: str = "end") -> tuple[np.ndarray, np.ndarray]:
        """int64 ``(N, max_len)`` ids padded with 0, and each sequence's length.
        ``truncate='end'`` keeps the first ``max_len`` tokens, ``'start'`` the last."""
        if truncate not in ("end", "start"):
            raise ValueError(f"Vocab.encode_batch: truncate must be 'end' or 'start', got "
                             f"{truncate!r}")
        out = np.zeros((len(token_lists), max_len), np.int64)
        lengths = np.zeros(len(token_lists), np.int64)
        for i, toks in enumerate(token_lists):
            ids = self.encode(toks)
            ids = ids[:max_len] if truncate == "end" else ids[max(0, len(ids) - max_len):]
            out[i, :len(ids)] = ids
            lengths[i] = len(ids)
        return out, lengths

    def __repr__(self) -> str:
        return f"Vocab(size={len(self)})"
