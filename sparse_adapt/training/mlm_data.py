"""Masked-LM training data that does not grow with the corpus.

A corpus is read from its JSONL file on demand: one pass records each record's byte
offset, a second (:class:`WindowedTexts`) each window's record, character span and token
length (small integer arrays), and a batch reads and tokenises only its own texts. Memory
is bounded by the arrays and one batch, not by the documents.

Each epoch's batches come from :func:`plan_epoch`: a seeded random order; with
``batch_tokens`` > 0, consecutive windows of ``window`` texts are sorted by length and cut
into batches of at most ``batch_size`` texts whose padded size (longest text x texts) stays
within the token budget (a longer text is a batch alone; length bucketing: little padding,
even work per step), the batches of a window shuffled.
With ``batch_tokens`` = 0 batches are ``batch_size`` consecutive texts of the order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, Sequence

import numpy as np
import torch

from sparse_adapt.data import check_documents
from sparse_adapt.data.documents import document_from_line
from sparse_adapt.data.reading import utf8_line


class TextSource(Protocol):
    def __len__(self) -> int: ...

    def text(self, index: int) -> str: ...

    def close(self) -> None:  # what it holds open (a corpus file); the stage calls it when done
        ...


class ListTexts:
    """Texts already in memory (dictionary entries)."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.texts = list(texts)

    def __len__(self) -> int:
        return len(self.texts)

    def text(self, index: int) -> str:
        return self.texts[index]

    def close(self) -> None:
        pass


class CorpusTexts:
    """The texts of a document file (JSONL in any of ``data.documents.DOCUMENT_FORMATS``, or TSV),
    read by byte offset (validated once, streamed)."""

    def __init__(self, path: str | Path, validate: bool = True) -> None:
        self.path = Path(path)
        if validate:
            validate_corpus(self.path)
        offsets = []
        with self.path.open("rb") as f:
            pos = 0
            for line_no, raw in enumerate(f, start=1):
                # The loader's own rule for a blank line (a BOM dropped, str.strip): by bytes,
                # a line of a no-break space or a BOM alone counted as a record and broke warmup.
                if utf8_line(self.path, line_no, raw).strip():
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
        return document_from_line(self.path, raw).text

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class WindowedTexts:
    """Every text of ``source`` cut into windows of at most ``max_length`` pieces (special
    tokens included), so masked-LM training sees the whole of a long document, not only the
    first ``max_length`` pieces that truncation would keep.

    Windows end at a word boundary (no word is split between two windows) and are stored as
    character spans of the text, so a window re-tokenises to the same pieces. Memory: four
    numbers per window. ``lengths`` are the windows' piece counts for :func:`plan_epoch`.
    A text within the limit is one window, the whole text: short corpora train exactly as
    before. A tokenizer without offsets (a slow one) cannot cut at pieces: its long texts
    stay truncated, and ``truncated`` counts them so the stage can say so.
    """

    def __init__(self, source: TextSource, tokenizer, max_length: int, chunk: int = 512) -> None:
        self.source = source
        inner = max_length - tokenizer.num_special_tokens_to_add(pair=False)
        if inner < 1:
            raise ValueError(f"max_length {max_length} leaves no room for text after the special tokens")
        records: list[int] = []
        spans: list[tuple[int, int]] = []
        lengths: list[int] = []
        self.truncated = 0
        for start in range(0, len(source), chunk):
            texts = [source.text(i) for i in range(start, min(len(source), start + chunk))]
            if not tokenizer.is_fast:
                ids = tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"]
                for j, (text, pieces) in enumerate(zip(texts, ids)):
                    self.truncated += len(pieces) > inner
                    records.append(start + j)
                    spans.append((0, len(text)))
                    lengths.append(min(len(pieces), inner) + max_length - inner)
                continue
            enc = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
            for j, text in enumerate(texts):
                offsets, words = enc["offset_mapping"][j], enc.word_ids(j)
                n = len(offsets)
                if n <= inner:
                    records.append(start + j)
                    spans.append((0, len(text)))
                    lengths.append(n + max_length - inner)
                    continue
                p = 0
                while p < n:
                    q = min(n, p + inner)
                    if q < n:  # back off to a word start; a word longer than a window is cut
                        b = q
                        while b > p and words[b] is not None and words[b] == words[b - 1]:
                            b -= 1
                        q = b if b > p else q
                    records.append(start + j)
                    # From the previous piece's end, not this piece's start: tokenizers misreport
                    # the start of a piece after a case rule's Replace (an added term at a text's
                    # start or after "(": "c" of "Gatrocraptic"), and a byte-level or SentencePiece
                    # first word re-tokenises as the word it was only with its space before it.
                    spans.append((offsets[p - 1][1] if p else 0, offsets[q - 1][1]))
                    lengths.append(q - p + max_length - inner)
                    p = q
        self.records = np.asarray(records, dtype=np.int64)
        self.spans = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
        self.lengths = np.asarray(lengths, dtype=np.int32)

    def __len__(self) -> int:
        return len(self.records)

    def text(self, index: int) -> str:
        c0, c1 = self.spans[index]
        return self.source.text(int(self.records[index]))[int(c0) : int(c1)]

    def close(self) -> None:
        self.source.close()

    @property
    def texts(self) -> int:
        """How many texts the windows come from."""
        return len(self.source)


def validate_corpus(path: str | Path) -> int:
    """Check every record (file:line:field errors, a repeated id too) one at a time; returns the record count."""
    return check_documents(path)


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
