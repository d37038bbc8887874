"""The one order of retrieved documents: descending score, **ties by descending doc id**.

trec_eval's order (it re-sorts every run so), so a saved run gives the same figures in
trec_eval as in ``sparse-adapt evaluate``; every evaluation, listing, search and saved run of
sparse-adapt uses it. ranx alone would not do: it sorts with an unstable sort, so 16 or more
tied documents came out in another order in each call (a relevant duplicate at rank 2 in
one, 19 in the next). Kept apart from ``evaluation.py`` so that Lucene search does not
import ranx.
"""

from __future__ import annotations


def ranking(scores: dict[str, float]) -> list[tuple[str, float]]:
    """One query's ``(doc_id, score)`` in the module's order."""
    by_id = sorted(scores.items(), key=lambda kv: kv[0], reverse=True)
    return sorted(by_id, key=lambda kv: -kv[1])  # stable: tied scores keep the doc id order


def top_k(run: dict[str, dict[str, float]], k: int = 10) -> dict[str, list[str]]:
    """Doc ids per query in :func:`ranking` order, the first ``k``."""
    return {q: [d for d, _ in ranking(s)[:k]] for q, s in run.items()}
