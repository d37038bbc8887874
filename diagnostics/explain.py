"""Query explanation: why documents score what they score for one query.

The SPLADE score is a sparse dot product, ``s(q, d) = sum_t w_q^t * w_d^t``, so it splits
exactly into per-token contributions ``w_q^t * w_d^t`` over the tokens both vectors share;
they are listed with both factors and sum to the score.

With ``feedback`` (Rocchio pseudo-relevance feedback, ``sparse_adapt/retrieval/feedback.py``)
the query is first scored as it is, then expanded with its best documents' centroid and
scored again; everything shown is the expanded query's, so the contributions still sum to
the score, and ``query.feedback`` says which documents were fed back and what they added.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Sequence

import numpy as np
import scipy.sparse as sp

from diagnostics.schema import EXPLAIN_SCHEMA
from diagnostics.tokens import domain_pieces, in_text_ids, pieces_in
from sparse_adapt.data import Document
from sparse_adapt.data.documents import checked_records
from sparse_adapt.errors import ConfigError
from sparse_adapt.modeling.base import eval_mode
from sparse_adapt.modeling.encoder import SpladeEncoder
from sparse_adapt.modeling.vectors import ranked_row
from sparse_adapt.modeling.truncation import truncated, truncation_note
from sparse_adapt.progress import Hooks
from sparse_adapt.retrieval.feedback import Feedback, feedback_documents, rocchio
from sparse_adapt.retrieval.ranking import ranking

# Expanded tokens listed per matching document, as in the spec.
DOC_TOP_TOKENS = 10


@dataclass
class WeightedToken:
    token: str
    token_id: int
    weight: float
    in_text: bool  # occurs in the text itself (else an expansion)
    # Not in the text, but a piece the base split a domain term of the text into ("##rella" of
    # krellamine): the model kept the old spelling's weight, which is no learnt expansion.
    piece_of: str | None = None


@dataclass
class AddedToken:
    token: str
    token_id: int
    added: float  # weight x the fed-back centroid's weight: what feedback put on this token
    new: bool  # the query did not activate the token before feedback


@dataclass
class FeedbackStats:
    docs: int
    weight: float
    terms: int
    fed_back: list[str]  # ids of the first-pass documents whose mean was added, best first
    added: list[AddedToken]  # by descending added weight


@dataclass
class QueryStats:
    text: str
    nonzero: int
    max_weight: float
    sparsity: float  # percent of the vocabulary with weight 0
    vocab_size: int
    expansion_count: int  # active tokens neither in the query text nor a piece of a domain term in it
    piece_count: int  # active pieces of the old split of a domain term in the query (see WeightedToken.piece_of)
    tokens: list[WeightedToken]  # every active token, by descending weight
    feedback: FeedbackStats | None = None  # with feedback: the fields above are the expanded query's


@dataclass
class SharedToken:
    token: str
    token_id: int
    query_weight: float
    doc_weight: float
    contribution: float  # query_weight * doc_weight


@dataclass
class DocumentMatch:
    rank: int
    doc_id: str
    text: str
    score: float  # the sparse dot product as retrieval computes it, bit for bit (float32; float64 with feedback)
    contributions_sum: float  # sum of shared[].contribution (float64); equals score up to rounding
    nonzero: int
    shared: list[SharedToken]  # every shared token, by descending contribution
    top_tokens: list[WeightedToken]  # the document's highest-weighted tokens


@dataclass
class QueryExplanation:
    schema: str
    model: str
    documents_scored: int
    k: int
    query: QueryStats
    results: list[DocumentMatch]
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def _weighted(ids: np.ndarray, weights: np.ndarray, vocab: list[str], text_ids: set[int],
              pieces: dict[int, dict[int, str]]) -> list[WeightedToken]:
    """``pieces``: domain token id -> {id of a piece of its base split: the term} (:func:`domain_pieces`)."""
    of = pieces_in(text_ids, pieces)
    return [WeightedToken(vocab[int(i)], int(i), float(w), int(i) in text_ids, of.get(int(i)))
            for i, w in zip(ids, weights)]


def explain_query(
    splade: SpladeEncoder, query: str, documents: Sequence[Document], k: int = 3, *, model: str | None = None,
    progress: Hooks | None = None, feedback: Feedback | None = None, doc_ids: Sequence[str] = (),
) -> QueryExplanation:
    """Score every document for ``query`` and explain the top ``k`` (of the query expanded by
    pseudo-relevance ``feedback``, if given), or the documents ``doc_ids`` at the ranks they take:
    why a relevant document ranks low, without reading every document above it."""
    if not isinstance(query, str):
        raise TypeError(f"query must be a string (a Query's .text), got {type(query).__name__}")
    if isinstance(doc_ids, str):  # each character read as an id
        raise TypeError(f"doc_ids must be a list of ids, got the string {doc_ids!r}")
    if not query.strip():
        raise ConfigError("the query is empty")
    if k < 1:
        raise ConfigError(f"--k must be >= 1, got {k}")
    # results are named by id: two documents of one id became one, the wrong one
    documents = checked_records(documents, "documents", "doc_id")
    if not documents:
        raise ConfigError("no documents to score")
    known = {d.doc_id for d in documents}
    if unknown := [d for d in doc_ids if d not in known]:
        raise ConfigError(f"--doc {unknown[0]!r}: no document with this id among the {len(documents)} scored")
    with eval_mode(splade):
        return _explain(splade, query, documents, k, model, progress, feedback, list(dict.fromkeys(doc_ids)))


def _feedback(
    q_vec: sp.csr_matrix, D: sp.csr_matrix, scores: np.ndarray, feedback: Feedback, documents: Sequence[Document],
    vocab: list[str],
) -> tuple[sp.csr_matrix, FeedbackStats]:
    """The expanded query (1, V) and what feedback did to it; ``q_vec`` (1, V), ``D`` (n, V),
    ``scores`` (n,) the first pass."""
    doc_ids = [d.doc_id for d in documents]
    expanded = rocchio(q_vec, D, scores[None, :], feedback, doc_ids)  # (1, V)
    fed = [doc_ids[int(i)] for i in feedback_documents(scores[None, :], feedback.docs, doc_ids)[0]]
    before = set(q_vec.indices.tolist())
    ids, added = ranked_row(expanded - q_vec, 0)
    tokens = [AddedToken(vocab[int(i)], int(i), float(w), int(i) not in before) for i, w in zip(ids, added) if w > 0]
    return expanded, FeedbackStats(feedback.docs, feedback.weight, feedback.terms, fed, tokens)


def _explain(
    splade: SpladeEncoder, query: str, documents: Sequence[Document], k: int, model: str | None, progress: Hooks | None,
    feedback: Feedback | None = None, doc_ids: Sequence[str] = (),
):
    vocab = splade.id_to_token()
    V = splade.vocab_size
    q_vec = splade.encode([query], "query")  # (1, V)
    D = splade.encode([d.text for d in documents], "document", progress=progress)  # (n, V)
    # q D^T, as retrieval scores (evaluation.score_vectors): D q^T summed feedback's float64
    # products in another order, a last-digit difference that could reorder an exact tie
    scores = (q_vec @ D.T).toarray().ravel()  # (n,) float32
    fed = None
    if feedback is not None:
        q_vec, fed = _feedback(q_vec, D, scores, feedback, documents, vocab)
        scores = (q_vec @ D.T).toarray().ravel()  # (n,) the second pass, float64

    q_ids, q_w = ranked_row(q_vec, 0)
    q_text = in_text_ids(splade, [query], "query")[0]
    pieces = domain_pieces(splade)
    q_tokens = _weighted(q_ids, q_w, vocab, q_text, pieces)
    stats = QueryStats(
        text=query,
        nonzero=len(q_ids),
        max_weight=float(q_w[0]) if len(q_w) else 0.0,
        sparsity=100.0 * (1.0 - len(q_ids) / V),
        vocab_size=V,
        expansion_count=sum(1 for t in q_tokens if not t.in_text and t.piece_of is None),
        piece_count=sum(1 for t in q_tokens if t.piece_of is not None),
        tokens=q_tokens,
        feedback=fed,
    )
    warnings = []
    if not len(q_ids):
        warnings.append("the query activates no token: every document scores 0")
    # A term the model cut off is missing from the vectors: said, not left to be found out.
    if truncated(splade, [query], "query"):
        warnings.append(f"the query is longer than {splade.max_length('query')} pieces: the model reads only those, "
                        "so a term past them is not in its vector")
    note = truncation_note(splade, [d.text for d in documents], "document")
    if note:
        warnings.append(note)
    if k > len(documents) and not doc_ids:
        warnings.append(f"--k {k} asks for more documents than the {len(documents)} there are: all are shown")

    q_weight = dict(zip(q_ids.tolist(), q_w.tolist()))
    position = {d.doc_id: i for i, d in enumerate(documents)}
    ranked = [d for d, _ in ranking({d.doc_id: float(s) for d, s in zip(documents, scores)})]
    rank_of = {d: r for r, d in enumerate(ranked, start=1)}
    order = [position[d] for d in (doc_ids or ranked[:k])]
    top_docs = [documents[i] for i in order]
    doc_text = in_text_ids(splade, [d.text for d in top_docs], "document")
    results = []
    for i, text_ids in zip(order, doc_text):
        rank = rank_of[documents[i].doc_id]
        d_ids, d_w = ranked_row(D, i)
        shared = [
            SharedToken(vocab[t], t, q_weight[t], w, q_weight[t] * w)
            for t, w in zip(d_ids.tolist(), d_w.tolist())
            if t in q_weight
        ]
        shared.sort(key=lambda s: (-s.contribution, s.token_id))
        results.append(
            DocumentMatch(
                rank=rank,
                doc_id=documents[i].doc_id,
                text=documents[i].text,
                score=float(scores[i]),
                contributions_sum=float(sum(s.contribution for s in shared)),
                nonzero=len(d_ids),
                shared=shared,
                top_tokens=_weighted(d_ids[:DOC_TOP_TOKENS], d_w[:DOC_TOP_TOKENS], vocab, text_ids, pieces),
            )
        )
    unmatched = sum(1 for r in results if r.score <= 0)
    if unmatched and len(q_ids):
        warnings.append(f"{unmatched} of the {len(results)} documents shown score 0: they share no token with the query")
    return QueryExplanation(
        EXPLAIN_SCHEMA, model or splade.settings.base, len(documents), len(doc_ids) or k, stats, results, warnings
    )
