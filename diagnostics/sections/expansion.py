"""Query expansion: do queries that do not contain the term activate its token?"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from diagnostics.tokens import find_spans, input_ids
from sparse_adapt.data import Query
from sparse_adapt.modeling.encoder import SpladeEncoder

@dataclass
class ExpandingQuery:
    qid: str
    text: str
    weight: float


@dataclass
class QueryExpansion:
    queries: int  # queries checked
    without_term: int  # of which do not contain the term in their text
    expanding: list[ExpandingQuery]  # queries without the term that activate the token
    with_term: int
    with_term_active: int  # queries containing the term whose vector has it


def query_expansion(
    splade: SpladeEncoder, ids: list[int], targets: list[int], queries: Sequence[Query]
) -> dict[int, QueryExpansion]:
    Q = splade.encode([q.text for q in queries], "query")  # (n_queries, V)
    contains = [bool(find_spans(input_ids(splade, q.text, "query"), ids)) for q in queries]
    out = {}
    for t in targets:
        col = Q[:, t].toarray().ravel()  # (n_queries,)
        expanding = sorted(
            (ExpandingQuery(q.qid, q.text, float(col[i])) for i, q in enumerate(queries) if not contains[i] and col[i] > 0),
            key=lambda e: -e.weight,
        )
        out[t] = QueryExpansion(
            queries=len(queries),
            without_term=contains.count(False),
            expanding=expanding,
            with_term=contains.count(True),
            with_term_active=sum(1 for i in range(len(queries)) if contains[i] and col[i] > 0),
        )
    return out
