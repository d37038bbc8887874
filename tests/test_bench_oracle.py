"""bench.oracle: interleaved folds and relevance-graded lists made from held-out queries."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from bench.oracle import folds, oracle_lists
from sparse_adapt.data import Document


def test_folds_interleave_by_number_and_partition():
    a, b = folds(["x-h10", "x-h2", "x-h1", "x-h3", "x-h11"])
    assert a == ["x-h1", "x-h3", "x-h11"] and b == ["x-h2", "x-h10"]
    assert sorted(a + b) == sorted(["x-h10", "x-h2", "x-h1", "x-h3", "x-h11"])


class _Splade:
    """Scores by a fixed (query, document) table: vectors are one-hot rows and columns."""

    def __init__(self, table: np.ndarray):
        self.table = table  # (n_q, n_docs)

    def encode(self, texts, kind, progress=None):
        if kind == "document":  # document j -> e_j
            return sp.csr_matrix(np.eye(len(texts)))
        return sp.csr_matrix(self.table[: len(texts)])  # query i -> its row of scores


class _Teacher:
    def __init__(self, by_text: dict[str, float]):
        self.by_text = by_text

    def score(self, query, documents):
        return [self.by_text[d] for d in documents]


def test_lists_put_graded_relevant_first_and_map_the_base_top_negatives_onto_minus8_0():
    docs = [Document(f"d{i}", f"text {i}") for i in range(5)]
    # the base ranks d4 > d3 > d0 > d2 > d1 for the query; d0 (grade 2) and d2 (grade 1) are relevant
    splade = _Splade(np.array([[0.3, 0.1, 0.2, 0.8, 0.9]]))
    teacher = _Teacher({"text 1": 5.0, "text 3": 1.0, "text 4": 3.0})
    [rec] = oracle_lists(splade, teacher, docs, {"q1": "query one"}, {"q1": {"d0": 2, "d2": 1, "d3": 0}}, ["q1"],
                         negatives=2)
    assert rec["qid"] == "oracle-q1" and rec["query"] == "query one"
    # negatives: the base's top 2 not relevant (d4, d3; d3 is judged 0 so it may be one);
    # teacher 3.0 and 1.0 -> min-max onto [-8, 0]: d4 0.0, d3 -8.0
    assert rec["doc_ids"] == ["d0", "d2", "d4", "d3"]
    assert rec["teacher_scores"] == [10.0, 6.0, 0.0, -8.0]
    assert rec["doc_texts"] == ["text 0", "text 2", "text 4", "text 3"]


def test_a_query_without_relevant_documents_is_refused():
    docs = [Document("d0", "a"), Document("d1", "b")]
    with pytest.raises(ValueError, match="q9"):
        oracle_lists(_Splade(np.array([[1.0, 0.0]])), _Teacher({"a": 1.0, "b": 0.0}), docs, {"q9": "x"},
                     {"q9": {"d0": 0}}, ["q9"])
