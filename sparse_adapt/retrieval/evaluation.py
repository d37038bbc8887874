"""Exact in-memory retrieval and ranx evaluation.

Scores are exact sparse dot products ``s(q, d) = sum_t w_q^t * w_d^t`` of every query
with every document; metrics come from ranx (never re-implemented here).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
from ranx import Qrels, Run, evaluate

from sparse_adapt.atomic import atomic_file
from sparse_adapt.data import Document, Query
from sparse_adapt.modeling.encoder import SpladeEncoder

# The metrics `sparse-adapt evaluate` reports, in ranx's names; keys of its --json output.
DEFAULT_METRICS = ("ndcg@10", "mrr@10", "recall@5")


def score_in_memory(
    splade: SpladeEncoder, documents: Sequence[Document], queries: Sequence[Query], batch_size: int = 32
) -> dict[str, dict[str, float]]:
    """Score every document for every query: ``{qid: {doc_id: score}}``.

    Documents sharing no active term with the query (score 0) are left out, exactly as an
    inverted index never returns them; keeping them would let the metric library order
    those ties by doc id and credit whichever relevant document sorts first.
    """
    D = splade.encode([d.text for d in documents], "document", batch_size)  # (n_docs, V)
    Q = splade.encode([q.text for q in queries], "query", batch_size)  # (n_queries, V)
    S = (Q @ D.T).toarray()  # (n_queries, n_docs)
    doc_ids = [d.doc_id for d in documents]
    return {
        q.qid: {d: float(v) for d, v in zip(doc_ids, S[i].tolist()) if v > 0.0} for i, q in enumerate(queries)
    }


def top_k(run: dict[str, dict[str, float]], k: int = 10) -> dict[str, list[str]]:
    """Doc ids per query by descending score; ties broken by doc id for determinism."""
    return {q: [d for d, _ in sorted(s.items(), key=lambda kv: (-kv[1], kv[0]))[:k]] for q, s in run.items()}


def evaluate_run(
    qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]], metrics: Sequence[str] = DEFAULT_METRICS,
    qids: Sequence[str] | None = None,
) -> dict[str, float]:
    """Mean metrics over the queries that have judgements (optionally only ``qids``)."""
    keep = [q for q in (qids if qids is not None else run) if q in qrels and q in run]
    if not keep:
        raise ValueError("no query of the run has relevance judgements")
    result = evaluate(
        Qrels({q: qrels[q] for q in keep}), Run({q: run[q] for q in keep}), list(metrics), make_comparable=True
    )
    if isinstance(result, float):  # ranx returns a bare float for a single metric
        result = {metrics[0]: result}
    return {m: float(np.round(v, 6)) for m, v in result.items()}


def evaluate_per_query(
    qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]], metric: str = "ndcg@10"
) -> dict[str, float]:
    keep = [q for q in run if q in qrels]
    r = Run({q: run[q] for q in keep})
    evaluate(Qrels({q: qrels[q] for q in keep}), r, metric, make_comparable=True)
    return {q: float(v) for q, v in r.scores[metric].items()}


def save_run_file(run: dict[str, dict[str, float]], path: str | Path, name: str) -> None:
    """Write ``run`` as a TREC run file (ranx ``Run.save``), atomically."""
    with atomic_file(path) as tmp:
        Run(run, name=name).save(str(tmp), kind="trec")
