"""Rocchio pseudo-relevance feedback on sparse vectors (``retrieval/feedback.py``): expected
values are the formula worked by hand on matrices small enough to read."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from sparse_adapt.data import Document, Query
from sparse_adapt.retrieval.evaluation import score_in_memory
from sparse_adapt.retrieval.feedback import Feedback, feedback_documents, rocchio

# Vocabulary of 5 terms; three documents.
D = sp.csr_matrix(np.array([
    [2.0, 0.0, 1.0, 0.0, 0.0],  # d0: terms 0 and 2
    [0.0, 3.0, 0.0, 0.0, 4.0],  # d1: terms 1 and 4
    [1.0, 0.0, 0.0, 5.0, 0.0],  # d2: terms 0 and 3
]))
IDS = ["d0", "d1", "d2"]


def first_pass(Q: sp.csr_matrix) -> np.ndarray:
    return (Q @ D.T).toarray()


def test_one_document_by_hand():
    # q = term 2 only: scores (1, 0, 0), so d0 is fed back: q' = q + 0.5 * d0.
    Q = sp.csr_matrix(np.array([[0.0, 0.0, 2.0, 0.0, 0.0]]))
    got = rocchio(Q, D, first_pass(Q), Feedback(docs=1, weight=0.5, terms=32), IDS).toarray()
    np.testing.assert_allclose(got, [[1.0, 0.0, 2.5, 0.0, 0.0]])
    # The second pass now reaches d2 through term 0, which the query never had.
    assert first_pass(Q)[0, 2] == 0.0
    assert (got @ D.T.toarray())[0, 2] == pytest.approx(1.0)  # 1.0 (term 0) * 1.0


def test_two_documents_average_and_the_centroid_is_cut_to_its_terms():
    # q = terms 0 and 1: scores d0 2, d1 3, d2 1 -> d1 then d0; centroid (d0 + d1) / 2 =
    # (1, 1.5, 0.5, 0, 2); its top 2 terms are 4 (2.0) and 1 (1.5).
    Q = sp.csr_matrix(np.array([[1.0, 1.0, 0.0, 0.0, 0.0]]))
    got = rocchio(Q, D, first_pass(Q), Feedback(docs=2, weight=1.0, terms=2), IDS).toarray()
    np.testing.assert_allclose(got, [[1.0, 2.5, 0.0, 0.0, 2.0]])


def test_centroid_ties_keep_the_lower_token_id():
    # q = term 0: d0 scores 2, d2 1 -> d0, whose terms are 0 (2.0) and 2 (1.0); one term kept: 0.
    # Of two equal weights the lower token id is kept, as in every listing.
    Q = sp.csr_matrix(np.array([[1.0, 0.0, 0.0, 0.0, 0.0]]))
    got = rocchio(Q, D, first_pass(Q), Feedback(docs=1, weight=1.0, terms=1), IDS).toarray()
    np.testing.assert_allclose(got, [[3.0, 0.0, 0.0, 0.0, 0.0]])
    tie = sp.csr_matrix(np.array([[1.0, 1.0]]))
    one = rocchio(sp.csr_matrix((1, 2)), tie, np.array([[1.0]]), Feedback(docs=1, weight=1.0, terms=1), ["t"]).toarray()
    np.testing.assert_allclose(one, [[1.0, 0.0]])


def test_equal_scores_feed_back_the_document_search_lists_first():
    # ties by descending doc id, as every ranking: d9 before d3, whatever the corpus order
    ids = ["a", "d3", "d9", "b"]
    assert [p.tolist() for p in feedback_documents(np.array([[1.0, 3.0, 3.0, 0.5]]), 2, ids)] == [[2, 1]]
    assert [p.tolist() for p in feedback_documents(np.array([[1.0, 3.0, 3.0, 0.5]]), 1, ids)] == [[2]]
    assert feedback_documents(np.array([[3.0, 3.0]]), 1, ["d9", "d3"])[0].tolist() == [0]  # the same, reordered
    # Long enough for numpy's default (unstable) sort to reorder the ties.
    flat = np.ones((1, 200))
    flat[0, ::7] = 0.5
    many = [f"d{i:03d}" for i in range(200)]
    assert feedback_documents(flat, 5, many)[0].tolist() == [199, 198, 197, 195, 194]  # 196 = 7 * 28 scores 0.5
    with pytest.raises(ValueError, match="2 doc ids for 4 documents"):
        feedback_documents(np.ones((1, 4)), 1, ["a", "b"])


def test_feedback_does_not_depend_on_the_corpus_order():
    # Two documents tie on the query's term; which one is fed back decides the second pass.
    first = [Document("d1", "one"), Document("d2", "two")]
    Dt = sp.csr_matrix(np.array([[1.0, 1.0, 0.0], [1.0, 0.0, 1.0]]))  # d1: t0 t1; d2: t0 t2
    Q = sp.csr_matrix(np.array([[1.0, 0.0, 0.0]]))

    class Fixed:
        def __init__(self, rows):
            self.rows = rows

        def encode(self, texts, kind, batch_size=32, **options):
            return self.rows if kind == "document" else Q

    fb = Feedback(docs=1, weight=0.5)
    forward = score_in_memory(Fixed(Dt), first, [Query("q", "x")], feedback=fb)
    backward = score_in_memory(Fixed(Dt[::-1]), first[::-1], [Query("q", "x")], feedback=fb)
    # d2, the first of the tie in every ranking, is fed back: q' = (1.5, 0, 0.5)
    assert forward == backward == {"q": {"d2": pytest.approx(2.0), "d1": pytest.approx(1.5)}}


def test_documents_with_no_shared_term_are_never_fed_back():
    # q = term 3 matches only d2; with docs=3 the two zero-score documents must not dilute it.
    Q = sp.csr_matrix(np.array([[0.0, 0.0, 0.0, 1.0, 0.0], [0.0] * 5]))
    S = first_pass(Q)
    assert [p.tolist() for p in feedback_documents(S, 3, IDS)] == [[2], []]
    got = rocchio(Q, D, S, Feedback(docs=3, weight=1.0, terms=32), IDS).toarray()
    np.testing.assert_allclose(got[0], [1.0, 0.0, 0.0, 6.0, 0.0])  # q + d2, not q + (d2) / 3
    np.testing.assert_allclose(got[1], 0.0)  # a query matching nothing is left as it was


def test_every_query_gets_its_own_feedback():
    Q = sp.csr_matrix(np.array([[0.0, 0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 1.0]]))
    got = rocchio(Q, D, first_pass(Q), Feedback(docs=1, weight=0.5, terms=32), IDS).toarray()
    np.testing.assert_allclose(got, [[1.0, 0.0, 1.5, 0.0, 0.0], [0.0, 1.5, 0.0, 0.0, 3.0]])


def test_no_queries_expand_to_no_queries():
    got = rocchio(sp.csr_matrix((0, 5)), D, np.zeros((0, 3)), Feedback(), IDS)
    assert got.shape == (0, 5) and got.nnz == 0


def test_scores_of_the_wrong_shape_are_refused():
    Q = sp.csr_matrix(np.ones((2, 5)))
    with pytest.raises(ValueError, match="shape"):
        rocchio(Q, D, np.ones((2, 2)), Feedback(), IDS)
    # scores for one query of two: the second would silently go without feedback
    with pytest.raises(ValueError, match="shape"):
        rocchio(Q, D, np.ones((1, 3)), Feedback(), IDS)


@pytest.mark.parametrize("field,value", [
    ("docs", 0), ("docs", 1.5), ("docs", True), ("terms", 0), ("weight", 0.0), ("weight", -1.0), ("weight", math.nan),
    ("weight", math.inf), ("weight", "0.5"),
])
def test_bad_settings_are_refused(field, value):
    with pytest.raises(ValueError, match=f"feedback {field}"):
        Feedback(**{field: value})


class FixedVectors:
    """An encoder whose vectors are given rows of D (documents) and Q (queries)."""

    def __init__(self, Q):
        self.Q = Q

    def encode(self, texts, kind, batch_size=32, **options):
        return D if kind == "document" else self.Q


def test_score_in_memory_scores_the_expanded_queries():
    docs = [Document(f"d{i}", f"text {i}") for i in range(3)]
    Q = sp.csr_matrix(np.array([[0.0, 0.0, 2.0, 0.0, 0.0]]))
    plain = score_in_memory(FixedVectors(Q), docs, [Query("q", "x")])
    fed = score_in_memory(FixedVectors(Q), docs, [Query("q", "x")], feedback=Feedback(docs=1, weight=0.5))
    assert plain == {"q": {"d0": 2.0}}
    # q' = (1, 0, 2.5, 0, 0): d0 1*2 + 2.5*1 = 4.5; d2 1*1 = 1; d1 shares nothing and is left out.
    assert fed == {"q": {"d0": pytest.approx(4.5), "d2": pytest.approx(1.0)}}


def test_the_documented_defaults_are_the_settings_feedback_runs_with():
    """The README's `--feedback-docs/-weight/-terms` row and the options' help texts give the
    defaults a user gets (the fifteenth session's rule fixed them): a changed default fails here
    instead of leaving both describing the old one."""
    import re
    from pathlib import Path

    from sparse_adapt.cli.output import FEEDBACK_DOCS_OPTION, FEEDBACK_TERMS_OPTION, FEEDBACK_WEIGHT_OPTION

    fb = Feedback()
    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    row = re.search(r"documents fed back \((\d+)\), their share \(([\d.]+)\), centroid terms kept \((\d+)\)", readme)
    assert row, "the README's --feedback-docs/-weight/-terms row is gone or reworded: update this test"
    assert (int(row[1]), float(row[2]), int(row[3])) == (fb.docs, fb.weight, fb.terms)
    for option, value in ((FEEDBACK_DOCS_OPTION, fb.docs), (FEEDBACK_WEIGHT_OPTION, fb.weight),
                          (FEEDBACK_TERMS_OPTION, fb.terms)):
        assert f"(default {value:g})" in option.help, option.help


def test_what_three_or_five_feedback_documents_cost_is_the_stored_grids_range():
    """Feedback.docs' comment and the README's feedback paragraph say what 3 or 5 documents cost
    named-term queries (nDCG@10) on the dev domains; the range is recomputed from the fifteenth
    session's stored grid (rule AA), every weight tried, against the same finals without feedback."""
    import inspect
    import json
    import re
    from pathlib import Path

    root = Path(__file__).parents[2]
    grid = json.loads((root / "bench" / "results" / "feedback-rules.json").read_text(encoding="utf-8"))["AA"]

    def explicit(key: str) -> float:
        values = [v[1] for row in grid[key] for v in row["groups"]["heldout-domain-explicit"]["per_query"].values()]
        return sum(values) / len(values)

    costs = [explicit("k0-b0.0") - explicit(k) for k in grid if k.startswith(("k3-", "k5-"))]
    assert len(costs) == 6
    stored = f"{min(costs):.2f}-{max(costs):.2f}"
    comment = re.search(r"3 and 5 pulled in[^\n]*\n\s*# cost (\S+) nDCG@10", inspect.getsource(Feedback))
    readme = re.search(r"three or five feedback documents cost (\S+) on named-term queries",
                       (root / "README.md").read_text(encoding="utf-8"))
    assert comment and readme, "the sentences moved or were reworded: update this test"
    assert (comment[1], readme[1]) == (stored, stored)
