"""Masked-LM training data that does not grow with the corpus.

A corpus is read from its JSONL file on demand: one pass records each record's byte
offset and token length (two small integer arrays), and a batch reads and tokenises only
its own texts. Memory is bounded by the arrays and one batch, not by the documents.

Each epoch's batches come from :func:`plan_epoch`: a seeded random order; with
``batch_tokens`` > 0, consecutive windows of ``window`` texts are sorted by length and cut
into batches whose padded size (longest text x texts) stays within the token budget
(length bucketing: little padding, even work per step), the batches of a window shuffled.
With ``batch_tokens`` = 0 batches are ``batch_size`` consecutive texts of the order.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Protocol, Sequence

import numpy as np
import torch

from sparse_adapt.data import iter_documents


class TextSource(Protocol):
    def __len__(self) -> int: ...

    def text(self, index: int) -> str: ...


class ListTexts:
    """Texts already in memory (dictionary entries)."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.texts = list(texts)

    def __len__(self) -> int:
        return len(self.texts)

    def text(self, index: int) -> str:
        return self.texts[index]


class JsonlTexts:
    """The ``text`` field of a docs.jsonl, read by byte offset (validated once, streamed)."""

    def __init__(self, path: str | Path, validate: bool = True) -> None:
        self.path = Path(path)
        if validate:
            validate_corpus(self.path)
        offsets = []
        with self.path.open("rb") as f:
            pos = 0
            for raw in f:
                if raw.strip():
                    offsets.append(pos)
                pos += len(raw)
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self._file = None

    def __len__(self) -> int:
        return len(self.offsets)

    def text(self, index: int) -> str:
        if self._file is None:
            self._file = self.path.open("rb")
        self._file.seek(int(self.offsets[index]))
        raw = self._file.readline().decode("utf-8")
        return json.loads(raw.lstrip("\ufeff"))["text"]

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def validate_corpus(path: str | Path) -> int:
    """Check every record (file:line:field errors) one at a time; returns the record count."""
    return sum(1 for _ in iter_documents(path))


def token_lengths(tokenizer, source: TextSource, max_length: int, chunk: int = 512) -> np.ndarray:
    """(n,) pieces per text after truncation, special tokens included; read in chunks."""
    out = np.empty(len(source), dtype=np.int32)
    for start in range(0, len(source), chunk):
        texts = [source.text(i) for i in range(start, min(len(source), start + chunk))]
        ids = tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]
        out[start : start + len(texts)] = [len(x) for x in ids]
    return out


def plan_epoch(
    lengths: np.ndarray, batch_size: int, batch_tokens: int, window: int, generator: torch.Generator
) -> list[list[int]]:
    """One epoch's batches of text indices (see the module docstring)."""
    n = len(lengths)
    order = torch.randperm(n, generator=generator).tolist()
    if batch_tokens <= 0:
        return [order[b : b + batch_size] for b in range(0, n, batch_size)]
    batches: list[list[int]] = []
    for w0 in range(0, n, window):
        chunk = sorted(order[w0 : w0 + window], key=lambda i: -int(lengths[i]))  # stable: ties keep the random order
        window_batches: list[list[int]] = []
        current: list[int] = []
        for i in chunk:
            longest = int(lengths[current[0]]) if current else int(lengths[i])  # sorted: the first is the longest
            if current and (len(current) >= batch_size or longest * (len(current) + 1) > batch_tokens):
                window_batches.append(current)
                current = []
            current.append(i)
        if current:
            window_batches.append(current)
        batches += [window_batches[j] for j in torch.randperm(len(window_batches), generator=generator).tolist()]
    return batches
