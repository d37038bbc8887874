"""Rocchio pseudo-relevance feedback on sparse vectors, at query time.

A first pass scores every document, ``S = Q D^T``; each query then moves towards the mean of
its ``docs`` best documents and is scored again:

    q' = q + weight * top_terms( (1/|top(q)|) * sum_{j in top(q)} d_j )

where ``top(q)`` are the (at most ``docs``) documents with the highest positive first-pass
scores (fewer when fewer match; ties by descending doc id, the order of every ranking,
``ranking.py``, so the documents fed back are the first ones ``search`` lists, in memory and
through Lucene alike), and ``top_terms`` keeps the centroid's ``terms`` largest weights (ties
by token id, as every listing; :func:`sparse_adapt.modeling.vectors.keep_top`). A query that
matches no document is left as it was.

Rocchio, "Relevance feedback in information retrieval", in G. Salton (ed.), *The SMART
Retrieval System*, 1971 (the original formula also subtracts non-relevant documents; pseudo
feedback has none). Pyserini offers the same for BM25 (``LuceneSearcher.set_rocchio``); here
the vectors are the model's own learned weights.

Why it is here: a paraphrase that never names a domain term often still ranks one domain
document first, and that document's vector carries the term (measured on the dev domains:
``bench/RESULTS.md``, fifteenth session). It is opt-in: it costs a second pass per query.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import scipy.sparse as sp

from sparse_adapt.errors import require_positive_int
from sparse_adapt.modeling.vectors import keep_top


@dataclass(frozen=True)
class Feedback:
    """Settings of :func:`rocchio`. The defaults are the setting of the fifteenth session's
    dev rule (AC), fixed before it was measured on the hand-written-input models."""

    # One document: on the dev domains 3 and 5 pulled in neighbouring documents' terms and
    # cost 0.02-0.06 nDCG@10 on queries that name the term; 1 cost nothing there.
    docs: int = 1
    # The centroid's share against the query's own weights (1.0 would let one document
    # weigh as much as the query).
    weight: float = 0.5
    # Centroid terms kept: a document vector has 100-300 terms, most of them its own
    # topic's tail; the query needs only the strongest.
    terms: int = 32

    def __post_init__(self) -> None:
        require_positive_int(self.docs, "feedback docs")
        require_positive_int(self.terms, "feedback terms")
        if not (isinstance(self.weight, (int, float)) and math.isfinite(self.weight) and self.weight > 0):
            raise ValueError(f"feedback weight must be a positive finite number, got {self.weight!r}")


def feedback_documents(scores: np.ndarray, docs: int, doc_ids: Sequence[str]) -> list[np.ndarray]:
    """Per query (row of ``scores``, shape (n_queries, n_docs)), the indices of its ``docs``
    best documents with a positive score, best first; ties by descending doc id (``doc_ids``,
    one per column), as :func:`sparse_adapt.retrieval.ranking.ranking` orders them."""
    if len(doc_ids) != scores.shape[1]:
        raise ValueError(f"{len(doc_ids)} doc ids for {scores.shape[1]} documents")
    by_id = np.empty(len(doc_ids), dtype=np.int64)  # (n_docs,) each document's place in descending id order
    by_id[sorted(range(len(doc_ids)), key=doc_ids.__getitem__, reverse=True)] = np.arange(len(doc_ids))
    out = []
    for row in scores:
        order = np.lexsort((by_id, -row))[:docs]  # by score, then by descending doc id
        out.append(order[row[order] > 0])
    return out


def rocchio(
    Q: sp.csr_matrix, D: sp.csr_matrix, scores: np.ndarray, feedback: Feedback, doc_ids: Sequence[str],
) -> sp.csr_matrix:
    """Expanded queries ``q + weight * centroid`` (see the module docstring).

    Q: (n_queries, V) query vectors; D: (n_docs, V) document vectors; scores: (n_queries,
    n_docs) the first pass ``Q D^T``; doc_ids: D's rows' ids. Returns (n_queries, V).
    """
    if scores.shape != (Q.shape[0], D.shape[0]):
        raise ValueError(f"scores have shape {scores.shape}, expected {(Q.shape[0], D.shape[0])}")
    picks = feedback_documents(scores, feedback.docs, doc_ids)
    counts = np.array([len(p) for p in picks], dtype=np.int64)  # (n_queries,), 0 where nothing matched
    rows = np.repeat(np.arange(len(picks)), counts)
    cols = np.concatenate(picks) if picks else np.zeros(0, dtype=np.int64)
    share = np.repeat(1.0 / np.maximum(counts, 1), counts)  # each picked document's 1/k
    mean = sp.csr_matrix((share, (rows, cols)), shape=(Q.shape[0], D.shape[0]))  # (n_queries, n_docs)
    centroid = keep_top(sp.csr_matrix(mean @ D, dtype=np.float64), feedback.terms)  # (n_queries, V)
    return sp.csr_matrix(Q, dtype=np.float64) + feedback.weight * centroid


def expand_in_memory(Q: sp.csr_matrix, D: sp.csr_matrix, feedback: Feedback, doc_ids: Sequence[str]) -> sp.csr_matrix:
    """:func:`rocchio` with its first pass ``Q D^T`` over every document of ``D`` (rows
    ``doc_ids``): the expanded queries (n_queries, V) that in-memory scoring and the
    diagnostics search with."""
    return rocchio(Q, D, (Q @ D.T).toarray(), feedback, doc_ids)
