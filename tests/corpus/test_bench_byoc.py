"""bench.byoc's scoring of a suite domain's held-out groups (the training it drives is run_adapt,
tested in test_adapt.py)."""

from __future__ import annotations

import corpora
from bench.byoc import GROUPS, heldout_ndcg


def test_heldout_groups_are_scored_with_their_query_counts(tiny_bert):
    scores = heldout_ndcg(tiny_bert, corpora.get("pharma"))
    assert set(scores) == set(GROUPS)
    assert [n for _, n in scores.values()] == [7, 7, 7]
    assert all(0.0 <= v <= 1.0 for v, _ in scores.values())
