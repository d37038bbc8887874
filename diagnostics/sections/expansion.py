"""Query expansion: do queries that do not contain the term activate its token?

With pseudo-relevance feedback (``retrieval/feedback.py``, what ``evaluate/search --feedback``
do) the same question is asked of each query after Rocchio: a paraphrase whose best
document carries the term reaches it without the model expanding it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import scipy.sparse as sp

from diagnostics.tokens import in_text_ids, term_pattern
from sparse_adapt.data import Document, Query
from sparse_adapt.modeling.encoder import SpladeEncoder
from sparse_adapt.retrieval.feedback import Feedback, expand_in_memory


@dataclass
class ExpandingQuery:
    qid: str
    text: str
    weight: float


@dataclass
class FeedbackExpansion:
    docs: int  # the Feedback settings used
    weight: float
    terms: int
    expanding: list[ExpandingQuery]  # queries without the term that reach its token after feedback


@dataclass
class QueryExpansion:
    queries: int  # queries checked
    without_term: int  # of which contain neither the term (a whole word) nor this token in their text
    expanding: list[ExpandingQuery]  # queries without the term that activate the token
    with_term: int  # queries containing the term or this token
    with_term_active: int  # of which have the token in their vector
    # Their ids: what a query "naming the term" is (a whole word, or the token in its pieces, as
    # "APIs" is `api ##s`), for report's criteria to split queries alike.
    with_term_qids: list[str] = field(default_factory=list)
    feedback: FeedbackExpansion | None = None  # the same after feedback (None: not asked)


def _expanding(col, queries: Sequence[Query], contains: list[bool]) -> list[ExpandingQuery]:
    return sorted(
        (ExpandingQuery(q.qid, q.text, float(col[i])) for i, q in enumerate(queries) if not contains[i] and col[i] > 0),
        key=lambda e: -e.weight,
    )


def query_expansion(
    splade: SpladeEncoder, term: str, targets: list[int], queries: Sequence[Query],
    documents: Sequence[Document] = (), feedback: Feedback | None = None,
) -> dict[int, QueryExpansion]:
    """Per target token id; ``feedback`` also searches ``documents`` and checks each query
    after Rocchio feedback (no documents: nothing is fed back, so the query is unchanged)."""
    Q = splade.encode([q.text for q in queries], "query")  # (n_queries, V)
    pattern = term_pattern(splade, term)
    # A query using the term only past the query window is no query "without the term".
    words = [bool(pattern.search(q.text)) for q in queries]
    fed = None
    if feedback is not None:
        D = splade.encode([d.text for d in documents], "document") if documents else sp.csr_matrix((0, Q.shape[1]))
        fed = expand_in_memory(Q, D, feedback, [d.doc_id for d in documents])  # (n_queries, V)
    # A query holding the target token itself ("APIs" is `api ##s`) did not expand to it: the
    # whole-word match alone counted its in-text weight as expansion.
    own = in_text_ids(splade, [q.text for q in queries], "query")
    out = {}
    for t in targets:
        col = Q[:, t].toarray().ravel()  # (n_queries,)
        contains = [word or t in ids for word, ids in zip(words, own)]
        out[t] = QueryExpansion(
            queries=len(queries),
            without_term=contains.count(False),
            expanding=_expanding(col, queries, contains),
            with_term=contains.count(True),
            with_term_active=sum(1 for i in range(len(queries)) if contains[i] and col[i] > 0),
            with_term_qids=[q.qid for q, c in zip(queries, contains) if c],
            feedback=None if fed is None else FeedbackExpansion(
                feedback.docs, feedback.weight, feedback.terms,
                _expanding(fed[:, t].toarray().ravel(), queries, contains),
            ),
        )
    return out
