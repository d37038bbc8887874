"""Pseudo-labelled training data from a corpus (``sparse-adapt make-train``).

1. **Pseudo-queries** are crops of the documents' own sentences (GPL's idea without a
   query generator, which would need network weights): a window of ``MIN_WORDS``-``MAX_WORDS``
   consecutive words, with the common function words at its edges trimmed (wordfreq Zipf >=
   ``EDGE_ZIPF``: "the", "of", "with"). Per document using a domain term:
   - an **explicit** query: a crop around a term occurrence, the term kept;
   - a **semantic** query: a crop of a sentence using a term, every domain term (and an article
     right before it) removed, so the query describes the domain without naming it (the
     spec's q11 kind).
   Per document using no term, one **control** query (a crop of a random sentence), so the
   training lists keep teaching ordinary retrieval. Queries are deduplicated (case and
   spacing ignored); ``max_queries`` caps the total (kinds kept in proportion by a seeded
   shuffle).
2. **Candidates**: the query's source document plus the ``negatives`` documents the *base*
   model ranks highest for it (hard negatives: what the unadapted model would return).
3. **Teacher scores** for every candidate (``teacher.py``), mapped per list onto [-8, 10].
   A query is dropped when the teacher cannot separate its list (raw spread below the
   teacher's ``min_spread``) or does not score its source document positive.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from sparse_adapt.corpus.mining import general_zipf
from sparse_adapt.corpus.teacher import Teacher, to_spec_range
from sparse_adapt.corpus.text import TermGroup, sentences
from sparse_adapt.data import Document
from sparse_adapt.progress import SILENT, Hooks

MIN_WORDS, MAX_WORDS = 5, 9
# Zipf >= 6 is ~1 in 1,000 words or more: function words ("the", "of", "and", "is", "with").
EDGE_ZIPF = 6.0
# The spec's lists have 8 candidates: the best document and 7 others.
DEFAULT_NEGATIVES = 7
DEFAULT_MAX_QUERIES = 60
KINDS = ("explicit", "semantic", "control")
_ARTICLES = {"a", "an", "the"}
_PUNCT = ".,;:!?()[]{}\"'"


@dataclass
class PseudoQuery:
    qid: str
    text: str
    kind: str  # one of KINDS
    doc_id: str  # the document it was cropped from


@dataclass
class MakeTrainStats:
    generated: dict[str, int] = field(default_factory=dict)  # kind -> queries after deduplication
    kept: dict[str, int] = field(default_factory=dict)  # kind -> queries with a usable list
    dropped_unseparated: int = 0  # the teacher's raw spread was below its min_spread
    dropped_source_negative: int = 0  # the teacher scored the source document <= 0


def _tokens(sentence: str) -> list[str]:
    return [t.strip(_PUNCT) for t in sentence.split() if t.strip(_PUNCT)]


def _trim_edges(tokens: list[str]) -> list[str]:
    lo, hi = 0, len(tokens)
    while lo < hi and general_zipf(tokens[lo]) >= EDGE_ZIPF:
        lo += 1
    while hi > lo and general_zipf(tokens[hi - 1]) >= EDGE_ZIPF:
        hi -= 1
    return tokens[lo:hi]


def _crop(tokens: list[str], center: int, rng: random.Random) -> list[str]:
    size = rng.randint(MIN_WORDS, MAX_WORDS)
    if len(tokens) <= size:
        return _trim_edges(tokens)
    start = max(0, min(center - rng.randint(0, size - 1), len(tokens) - size))
    return _trim_edges(tokens[start : start + size])


def _is_term(token: str, groups: Sequence[TermGroup]) -> bool:
    return any(g.pattern.search(token) for g in groups)


def generate_queries(
    documents: Sequence[Document], groups: Sequence[TermGroup], seed: int = 0, max_queries: int = DEFAULT_MAX_QUERIES
) -> list[PseudoQuery]:
    """Explicit, semantic and control pseudo-queries (see the module docstring), deduplicated."""
    rng = random.Random(seed)
    out: list[PseudoQuery] = []
    seen: set[str] = set()

    def add(tokens: list[str], kind: str, doc_id: str) -> None:
        text = " ".join(tokens)
        norm = " ".join(text.casefold().split())
        if len(tokens) < 4 or norm in seen:
            return
        seen.add(norm)
        out.append(PseudoQuery(f"{doc_id}-{kind}", text, kind, doc_id))

    for d in documents:
        split = [_tokens(s) for s in sentences(d.text)]
        split = [s for s in split if s]
        if not split:
            continue
        with_term = [s for s in split if any(_is_term(t, groups) for t in s)]
        if not with_term:
            s = rng.choice(split)
            add(_crop(s, rng.randrange(len(s)), rng), "control", d.doc_id)
            continue
        s = rng.choice(with_term)
        hits = [i for i, t in enumerate(s) if _is_term(t, groups)]
        add(_crop(s, rng.choice(hits), rng), "explicit", d.doc_id)
        s = rng.choice(with_term)
        kept: list[str] = []
        removed_at = 0
        for t in s:
            if _is_term(t, groups):
                if kept and kept[-1].casefold() in _ARTICLES:
                    kept.pop()
                removed_at = len(kept)
            else:
                kept.append(t)
        if len(kept) >= MIN_WORDS:
            add(_crop(kept, min(removed_at, len(kept) - 1), rng), "semantic", d.doc_id)
    if len(out) > max_queries:
        keep = {q.qid for q in rng.sample(out, max_queries)}
        out = [q for q in out if q.qid in keep]
    return out


def hard_negatives(
    splade, documents: Sequence[Document], queries: Sequence[PseudoQuery], k: int = DEFAULT_NEGATIVES,
    hooks: Hooks = SILENT,
) -> dict[str, list[str]]:
    """qid -> the ``k`` documents (source excluded) the base model scores highest for it."""
    D = splade.encode([d.text for d in documents], "document", progress=hooks)  # (n_docs, V)
    Q = splade.encode([q.text for q in queries], "query", progress=hooks)  # (n_q, V)
    S = (Q @ D.T).toarray()  # (n_q, n_docs)
    ids = [d.doc_id for d in documents]
    out = {}
    for i, q in enumerate(queries):
        order = np.lexsort((np.arange(len(ids)), -S[i]))  # score desc, ties in corpus order
        out[q.qid] = [ids[j] for j in order if ids[j] != q.doc_id][:k]
    return out


def label(
    queries: Sequence[PseudoQuery], negatives: dict[str, list[str]], documents: Sequence[Document], teacher: Teacher,
    hooks: Hooks = SILENT,
) -> tuple[list[dict], MakeTrainStats]:
    """train.jsonl records (candidates sorted by teacher score) and what was kept or dropped."""
    text = {d.doc_id: d.text for d in documents}
    stats = MakeTrainStats()
    for q in queries:
        stats.generated[q.kind] = stats.generated.get(q.kind, 0) + 1
    records: list[dict] = []
    task = hooks.task(f"teacher {teacher.name}", len(queries))
    for q in queries:
        task.advance()
        doc_ids = [q.doc_id, *negatives[q.qid]]
        raw = teacher.score(q.text, [text[d] for d in doc_ids])
        if max(raw) - min(raw) < teacher.min_spread:
            stats.dropped_unseparated += 1
            continue
        scores = to_spec_range(raw)
        if scores[0] <= 0:
            stats.dropped_source_negative += 1
            continue
        order = sorted(range(len(doc_ids)), key=lambda i: (-scores[i], i))
        records.append({
            "qid": q.qid, "query": q.text,
            "doc_ids": [doc_ids[i] for i in order], "doc_texts": [text[doc_ids[i]] for i in order],
            "teacher_scores": [scores[i] for i in order], "kind": q.kind, "source_doc": q.doc_id,
        })
        stats.kept[q.kind] = stats.kept.get(q.kind, 0) + 1
    return records, stats
