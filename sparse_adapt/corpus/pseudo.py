"""Pseudo-labelled training data from a corpus (``sparse-adapt make-train``).

1. **Pseudo-queries** are crops of the documents' own sentences (GPL's idea without a
   query generator, which would need network weights): a window of ``MIN_WORDS``-``MAX_WORDS``
   consecutive words, with the common function words at its edges trimmed (wordfreq Zipf >=
   ``EDGE_ZIPF``: "the", "of", "with"). Per document using a domain term:
   - an **explicit** query: a crop around a term occurrence, the term kept;
   - a **semantic** query: a crop of a sentence using a term, every domain term, its plural and
     compounds ("quorvexes", "quorvex-based"), and an article right before it removed, so
     the query describes the domain without naming it (the spec's q11 kind).
   Per document using no term, one **control** query (a crop of a random sentence), so the
   training lists keep teaching ordinary retrieval. With ``--glosses``, up to ``LAY_PER_DOC``
   more semantic queries per document using a term are lay-word glosses of its technical
   words (:func:`lay_queries`, ``glosses.py``). Queries are deduplicated (case and
   spacing ignored); ``max_queries`` caps the total (a seeded random sample, which keeps the
   kinds in proportion on average).
2. **Candidates**: the query's source document, the ``negatives`` documents the *base*
   model ranks highest for it (hard negatives: what the unadapted model would return), and
   up to ``siblings`` more documents sharing a domain term with the source (the base's
   highest ranked not already in the list).
3. **Teacher scores** for every candidate (``teacher.py``), mapped per list onto [-8, 10].
   A query is dropped when the teacher cannot separate its list (raw spread below the
   teacher's ``min_spread``) or does not score its source document positive.
4. **Term-consistent labels** (``term_labels``, on by default): a domain term names one
   thing, so a candidate sharing a term with the source is floored at ``SIBLING_FLOOR``
   (a positive, as in hand-graded lists, where the other documents about the same product
   score 2 or more, mostly 2-6), and a candidate on the other side of the domain line (naming no term for a
   query from a term's document, or naming one for a control query) is capped at 0 (a
   negative). The teacher still orders the candidates within each side. Chosen on the dev
   domains against teacher-only labels (README, "`sparse-adapt make-train`", term-consistent labels).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from sparse_adapt.corpus.mining import general_zipf
from sparse_adapt.corpus.teacher import Teacher, to_spec_range
from sparse_adapt.corpus.text import TermGroup, doc_terms, dotted_terms, regroup, sentences
from sparse_adapt.data import Document
from sparse_adapt.errors import SparseAdaptError
from sparse_adapt.modeling.truncation import visible_texts
from sparse_adapt.progress import SILENT, Hooks, counted

MIN_WORDS, MAX_WORDS = 5, 9
# A shorter crop is no query (two or three words match too much of any corpus).
MIN_QUERY_WORDS = 4
# Zipf >= 6 is ~1 in 1,000 words or more: function words ("the", "of", "and", "is", "with").
EDGE_ZIPF = 6.0
# The spec's lists have 8 candidates: the best document and 7 others.
DEFAULT_NEGATIVES = 7
# Documents sharing the source's term added beyond the hard negatives: a term's documents are
# each other's positives, and the base's top 7 often holds none of them for a semantic crop.
DEFAULT_SIBLINGS = 3
# What a sibling scores at least after the map to [-8, 10]: positive (> 0), below a
# typical source (10); the bundled hand-graded lists give a term's other documents 2-10, mostly 2-6.
SIBLING_FLOOR = 2.0
DEFAULT_MAX_QUERIES = 60
# Lay-word queries per document using a term (--glosses): its two best-matching glosses.
LAY_PER_DOC = 2
KINDS = ("explicit", "semantic", "control")
_ARTICLES = {"a", "an", "the"}
_PUNCT = ".,;:!?()[]{}\"'"
_NOT_DOT = _PUNCT.replace(".", "")


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
    term_adjusted: int = 0  # candidate scores the term-consistent labels moved


def _tokens(sentence: str, is_term: Callable[[str], bool]) -> list[str]:
    return [t for t in (_strip(raw, is_term) for raw in sentence.split()) if t]


def _strip(token: str, is_term: Callable[[str], bool]) -> str:
    """``token`` without the punctuation around it, but for a leading dot right before a letter
    or digit (".NET" is a name: stripped to "NET", no term test found the term ".NET" in it),
    and for a trailing dot that ends a term ("Inc.": without it the documents naming the term
    got control queries)."""
    if len(token) > 1 and token[0] == "." and token[1].isalnum():
        bare = "." + token[1:].rstrip(_PUNCT)
    else:
        bare = token.strip(_PUNCT)
    if bare and token.rstrip(_NOT_DOT).endswith(".") and not is_term(bare) and is_term(bare + "."):
        return bare + "."
    return bare


def _trim_edges(tokens: list[str], lang: str = "en") -> list[str]:
    lo, hi = 0, len(tokens)
    while lo < hi and general_zipf(tokens[lo], lang) >= EDGE_ZIPF:
        lo += 1
    while hi > lo and general_zipf(tokens[hi - 1], lang) >= EDGE_ZIPF:
        hi -= 1
    return tokens[lo:hi]


def _crop(tokens: list[str], center: int, rng: random.Random, lang: str = "en") -> list[str]:
    size = rng.randint(MIN_WORDS, MAX_WORDS)
    if len(tokens) <= size:
        return _trim_edges(tokens, lang)
    start = max(0, min(center - rng.randint(0, size - 1), len(tokens) - size))
    return _trim_edges(tokens[start : start + size], lang)


def _term_test(groups: Sequence[TermGroup], loose: bool = False) -> Callable[[str], bool]:
    """``token -> does a term of groups occur in it``, each pattern compiled once and each
    distinct token tested once: a corpus repeats its words, and testing every token against
    every term took 34 s of 20,000 documents' query generation (now 0.8 s, the same queries).
    ``loose``: :func:`~sparse_adapt.corpus.text.loose_term_pattern` (plurals and compounds too)."""
    patterns = [g.loose_pattern if loose else g.pattern for g in groups]
    memo: dict[str, bool] = {}

    def is_term(token: str) -> bool:
        hit = memo.get(token)
        if hit is None:
            hit = memo[token] = any(p.search(token) for p in patterns)
        return hit

    return is_term


def lay_queries(documents: Sequence[Document], selected: dict, per_doc: int = LAY_PER_DOC) -> list[PseudoQuery]:
    """Per document using a domain term, up to ``per_doc`` *semantic* queries in lay words: its
    glosses (``glosses.select_glosses``: ``doc_id -> [Gloss]``, best first), each gloss once
    across the corpus. ``qid`` is ``<doc_id>-lay<k>``."""
    out: list[PseudoQuery] = []
    seen: set[str] = set()
    for d in documents:
        mine = 0
        for gloss in selected.get(d.doc_id, []):
            norm = " ".join(gloss.text.casefold().split())
            if norm in seen:
                continue
            seen.add(norm)
            out.append(PseudoQuery(f"{d.doc_id}-lay{mine}", gloss.text, "semantic", d.doc_id))
            mine += 1
            if mine == per_doc:
                break
    return out


def generate_queries(
    documents: Sequence[Document], groups: Sequence[TermGroup], seed: int = 0, max_queries: int = DEFAULT_MAX_QUERIES,
    extra: Sequence[PseudoQuery] = (), lang: str = "en",
) -> list[PseudoQuery]:
    """Explicit, semantic and control pseudo-queries (see the module docstring), deduplicated;
    ``extra`` queries (:func:`lay_queries`) join them before the ``max_queries`` cap."""
    rng = random.Random(seed)
    out: list[PseudoQuery] = []
    seen: set[str] = set()
    is_term = _term_test(groups)
    names_term = _term_test(groups, loose=True)
    dotted = dotted_terms(groups)

    def add(tokens: list[str], kind: str, doc_id: str, qid: str | None = None) -> None:
        text = " ".join(tokens)
        norm = " ".join(text.casefold().split())
        if len(tokens) < MIN_QUERY_WORDS or norm in seen:
            return
        seen.add(norm)
        out.append(PseudoQuery(qid or f"{doc_id}-{kind}", text, kind, doc_id))

    for d in documents:
        split = [_tokens(s, names_term) for s in sentences(d.text, dotted)]
        split = [s for s in split if s]
        if not split:
            continue
        with_term = [s for s in split if any(is_term(t) for t in s)]
        if not with_term and any(names_term(t) for s in split for t in s):
            continue  # "quorvex-based", "quorvexes": no control query (it would teach that quorvex's documents are not relevant to it)
        # A sentence too short to crop a query from ("Zorblatt XR-7200.") is drawn only when no
        # other will do: drawing it lost the document's query.
        split = [s for s in split if len(s) >= MIN_QUERY_WORDS] or split
        with_term = [s for s in with_term if len(s) >= MIN_QUERY_WORDS] or with_term
        if not with_term:
            s = rng.choice(split)
            add(_crop(s, rng.randrange(len(s)), rng, lang), "control", d.doc_id)
            continue
        s = rng.choice(with_term)
        hits = [i for i, t in enumerate(s) if is_term(t)]
        add(_crop(s, rng.choice(hits), rng, lang), "explicit", d.doc_id)
        s = rng.choice(with_term)
        kept: list[str] = []
        removed_at = 0
        for t in s:
            if names_term(t):  # "flumatics", "flumatic-based" name the term as plainly as "flumatic"
                if kept and kept[-1].casefold() in _ARTICLES:
                    kept.pop()
                removed_at = len(kept)
            else:
                kept.append(t)
        if len(kept) >= MIN_WORDS:
            add(_crop(kept, min(removed_at, len(kept) - 1), rng, lang), "semantic", d.doc_id)
    for q in extra:
        add(q.text.split(), q.kind, q.doc_id, q.qid)
    if len(out) > max_queries:
        keep = {q.qid for q in rng.sample(out, max_queries)}
        out = [q for q in out if q.qid in keep]
    return out


def hard_negatives(
    splade, documents: Sequence[Document], queries: Sequence[PseudoQuery], k: int = DEFAULT_NEGATIVES,
    hooks: Hooks = SILENT, groups: Sequence[TermGroup] = (), siblings: int = 0,
) -> dict[str, list[str]]:
    """qid -> the ``k`` documents (source excluded) the base model scores highest for it, then
    up to ``siblings`` more sharing a term of ``groups`` with the source, in the same order."""
    D = splade.encode([d.text for d in documents], "document", progress=hooks)  # (n_docs, V)
    Q = splade.encode([q.text for q in queries], "query", progress=hooks)  # (n_q, V)
    S = (Q @ D.T).toarray()  # (n_q, n_docs)
    ids = [d.doc_id for d in documents]
    terms_of = doc_terms(groups)
    out = {}
    for i, q in enumerate(queries):
        order = np.lexsort((np.arange(len(ids)), -S[i]))  # score desc, ties in corpus order
        ranked = [ids[j] for j in order if ids[j] != q.doc_id]
        chosen = ranked[:k]
        source = terms_of.get(q.doc_id, set())
        extra = [d for d in ranked[k:] if terms_of.get(d, set()) & source][:siblings]
        out[q.qid] = chosen + extra
    return out


def term_consistent(scores: list[float], doc_ids: Sequence[str], terms_of: dict[str, set[str]]) -> list[float]:
    """Step 4 of the module docstring on one list (``doc_ids[0]`` the source, scores on [-8, 10])."""
    source = terms_of.get(doc_ids[0], set())
    out = list(scores)
    for i, d in enumerate(doc_ids[1:], 1):
        own = terms_of.get(d, set())
        if source & own:
            out[i] = max(out[i], SIBLING_FLOOR)
        elif bool(source) != bool(own):
            out[i] = min(out[i], 0.0)
    return out


def label(
    queries: Sequence[PseudoQuery], negatives: dict[str, list[str]], documents: Sequence[Document], teacher: Teacher,
    hooks: Hooks = SILENT, groups: Sequence[TermGroup] | None = None,
) -> tuple[list[dict], MakeTrainStats]:
    """train.jsonl records (candidates sorted by score) and what was kept or dropped; with
    ``groups``, the scores are made term-consistent (step 4), else they are the teacher's."""
    text = {d.doc_id: d.text for d in documents}
    terms_of = doc_terms(groups) if groups is not None else None
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
        if terms_of is not None:
            adjusted = term_consistent(scores, doc_ids, terms_of)
            stats.term_adjusted += sum(a != b for a, b in zip(adjusted, scores))
            scores = adjusted
        # ties keep list order (the source document, then the base's ranking), so a seed gives one file
        order = sorted(range(len(doc_ids)), key=lambda i: (-scores[i], i))
        records.append({
            "qid": q.qid, "query": q.text,
            "doc_ids": [doc_ids[i] for i in order], "doc_texts": [text[doc_ids[i]] for i in order],
            "teacher_scores": [scores[i] for i in order], "kind": q.kind, "source_doc": q.doc_id,
        })
        stats.kept[q.kind] = stats.kept.get(q.kind, 0) + 1
    return records, stats


def make_train(
    documents, groups, splade, teacher, *, seed: int = 0, max_queries: int = DEFAULT_MAX_QUERIES,
    negatives: int = DEFAULT_NEGATIVES, siblings: int = DEFAULT_SIBLINGS, term_labels: bool = True,
    glosses: dict | None = None, hooks: Hooks = SILENT, lang: str = "en",
):
    """Pseudo-queries (crops, and with ``glosses`` from ``select_glosses`` lay-word queries) ->
    hard negatives (and term siblings) from ``splade`` -> scored train records (teacher scores,
    term-consistent unless ``term_labels`` is False), and stats."""
    # Pseudo-queries, negatives and labels come from the part of each document the model reads:
    # a query cropped from past its first doc_max_length pieces would ask it to match words its
    # vector cannot hold (the summary tells the user to split such documents into passages).
    # The term groups too: a document naming a term only past that point does not use it
    # for the siblings and the term-consistent labels either.
    visible = visible_texts(splade, [d.text for d in documents], "document")
    documents = [Document(d.doc_id, text) for d, text in zip(documents, visible)]
    read = regroup(groups, documents)
    unread = [g.display for g, seen in zip(groups, read) if g.doc_ids and not seen.doc_ids]
    if unread:
        hooks.message(f"warning: {counted(len(unread), 'term')} ({', '.join(unread[:5])}) "
                      f"{'occurs' if len(unread) == 1 else 'occur'} only past the first {splade.max_length('document')} "
                      "pieces of their documents, which the model reads: no query names "
                      f"{'it' if len(unread) == 1 else 'them'}; split the documents into passages")
    groups = read
    extra = lay_queries(documents, glosses) if glosses else ()
    queries = generate_queries(documents, groups, seed=seed, max_queries=max_queries, extra=extra, lang=lang)
    if len(queries) < 2:  # said as what it is, before the teacher is blamed for lists it never saw
        raise SparseAdaptError(
            f"{counted(len(queries), 'pseudo-query', 'pseudo-queries')} could be made from {counted(len(documents), 'document')} (2 needed: one to train on, "
            "one to hold out; a query is cropped from a sentence of 4 or more words): give more or longer "
            "documents, or give --train"
        )
    negs = hard_negatives(splade, documents, queries, k=negatives, hooks=hooks, groups=groups, siblings=siblings)
    records, stats = label(queries, negs, documents, teacher, hooks=hooks, groups=groups if term_labels else None)
    if len(records) < 2:
        raise SparseAdaptError(
            f"the teacher {teacher.name!r} could separate {len(records)} of the {len(queries)} pseudo-queries' "
            "candidate lists (2 needed: one to train on, one to hold out); try another --teacher, or give --train"
        )
    return records, stats
