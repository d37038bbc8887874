"""Ranked listings and the per-row cut (sparse_adapt.modeling.vectors), worked by hand."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from sparse_adapt.modeling.vectors import keep_top


def test_keep_top_keeps_the_largest_weights_ties_by_token_id():
    # row 0: ids 0..4 with weights 0.5, 2.0, 1.0, 1.0, 0.1 -> top 3: id 1 (2.0), then the tie
    # 1.0 at ids 2 and 3 (both), k = 2 keeps id 1 and id 2 (the tie goes to the smaller id).
    # row 1: two entries, shorter than k: unchanged. row 2: empty.
    m = sp.csr_matrix(np.array([[0.5, 2.0, 1.0, 1.0, 0.1], [0, 0, 0.3, 0, 0.2], [0, 0, 0, 0, 0]], dtype=np.float32))
    got = keep_top(m, 2).toarray()
    np.testing.assert_array_equal(got[0], np.array([0, 2.0, 1.0, 0, 0], dtype=np.float32))
    np.testing.assert_array_equal(got[1], m.toarray()[1])
    np.testing.assert_array_equal(got[2], np.zeros(5, dtype=np.float32))
    assert keep_top(m, 3).getrow(0).nnz == 3
    # one entry over k is cut too: row 0's 5 entries to 4, the smallest (0.1 at id 4) dropped
    np.testing.assert_array_equal(keep_top(m, 4).toarray()[0], np.array([0.5, 2.0, 1.0, 1.0, 0], dtype=np.float32))
    assert m.getrow(0).nnz == 5  # the input is not cut in place


def test_keep_top_keeps_the_largest_weights_ties_by_lower_id_on_random_rows():
    rng = np.random.default_rng(0)
    # weights rounded to 0.1 over 50 columns: many ties, so the tie rule is exercised
    dense = np.where(rng.random((20, 50)) < 0.4, rng.random((20, 50)).round(1), 0).astype(np.float32)
    m = sp.csr_matrix(dense)
    cut = keep_top(m, 7)
    ties = 0
    for r in range(m.shape[0]):
        # expected in plain Python, independent of rank(): sort (-weight, id), keep 7
        entries = sorted((-float(w), int(i)) for i, w in enumerate(dense[r]) if w > 0)
        want = sorted(i for _, i in entries[:7])
        ties += len(entries) > 7 and entries[6][0] == entries[7][0]
        assert sorted(cut.getrow(r).indices.tolist()) == want
        assert np.array_equal(cut.getrow(r).toarray()[0][want], dense[r][want])  # weights kept as they were
    assert ties > 0  # some row's 7th and 8th weights tie: the lower id must win


@pytest.mark.parametrize("k", [0, -1, 2.5, True])
def test_keep_top_refuses_a_bad_k(k):
    with pytest.raises(ValueError, match="max_active_dims"):
        keep_top(sp.csr_matrix(np.ones((1, 3), dtype=np.float32)), k)


def test_dicts_to_rows_inverts_rows_to_dicts():
    from sparse_adapt.modeling.vectors import dicts_to_rows, rows_to_dicts

    vocab = ["a", "b", "c", "d"]
    matrix = sp.csr_matrix(np.array([[0.0, 2.0, 0.5, 0.0], [0.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 3.0]]))
    back = dicts_to_rows(rows_to_dicts(matrix, vocab), {t: i for i, t in enumerate(vocab)})
    assert back.shape == (3, 4)
    np.testing.assert_array_equal(back.toarray(), matrix.toarray())
    with pytest.raises(KeyError, match="'e'"):
        dicts_to_rows([{"e": 1.0}], {t: i for i, t in enumerate(vocab)})


# Two queries and three documents over a 4-term vocabulary, scores worked by hand:
#   q0 = (1, 0, 2, 0)  d0 = (0.5, 0, 1, 0) -> 1*0.5 + 2*1 = 2.5   d1 = (0, 3, 0, 0) -> 0   d2 = (2, 0, 0, 4) -> 2
#   q1 = (0, 1, 0, 1)  d0 -> 0                                  d1 -> 3                 d2 -> 4
Q = np.array([[1.0, 0, 2, 0], [0, 1, 0, 1]], dtype=np.float32)
D = np.array([[0.5, 0, 1, 0], [0, 3, 0, 0], [2, 0, 0, 4]], dtype=np.float32)
SCORES = np.array([[2.5, 0.0, 2.0], [0.0, 3.0, 4.0]], dtype=np.float32)


def test_similarity_is_the_dot_product_of_every_pair():
    import torch

    from sparse_adapt.modeling.vectors import similarity

    for q, d in [(sp.csr_matrix(Q), sp.csr_matrix(D)), (torch.from_numpy(Q), torch.from_numpy(D).to_sparse()), (Q, D)]:
        got = similarity(q, d)
        assert got.shape == (2, 3) and got.dtype == np.float32
        np.testing.assert_allclose(got, SCORES)
    np.testing.assert_allclose(similarity(Q[0], D), SCORES[:1])  # one (V,) vector is one row
    with pytest.raises(ValueError, match="different vocabularies: 4 and 3"):
        similarity(Q, D[:, :3])


def test_intersection_holds_each_shared_terms_contribution_and_sums_to_the_score():
    from sparse_adapt.modeling.vectors import intersection

    got = intersection(sp.csr_matrix(Q[:1]), sp.csr_matrix(D))
    # q0 x d0 = (0.5, 0, 2, 0); q0 x d1 shares nothing; q0 x d2 = (2, 0, 0, 0)
    np.testing.assert_allclose(got.toarray(), [[0.5, 0, 2, 0], [0, 0, 0, 0], [2, 0, 0, 0]])
    assert got.nnz == 3  # only shared terms are stored
    np.testing.assert_allclose(np.asarray(got.sum(axis=1)).ravel(), SCORES[0])
    np.testing.assert_allclose(intersection(Q[0], D[0]).toarray(), [[0.5, 0, 2, 0]])
    with pytest.raises(ValueError, match="one vector, got 2 rows"):
        intersection(Q, D)
    # a one-term query would broadcast over every column (d x 2) instead of being refused
    for query in (Q[0, :3], np.array([2.0], dtype=np.float32)):
        with pytest.raises(ValueError, match=f"different vocabularies: {query.shape[0]} and 4"):
            intersection(query, D)


def test_sparsity_counts_active_terms_not_stored_zeros():
    from sparse_adapt.modeling.vectors import sparsity

    m = sp.csr_matrix(D)
    m.data[0] = 0.0  # a stored zero: d0 keeps one active term, not two
    # active terms 1, 1, 2 -> mean 4/3; sparsity 1 - (4/3)/4 = 2/3
    got = sparsity(m)
    assert got["active_dims"] == pytest.approx(4 / 3) and got["sparsity_ratio"] == pytest.approx(2 / 3)
    assert m.data[0] == 0.0 and m.nnz == 5  # the input is not changed
    assert sparsity(sp.csr_matrix((0, 4), dtype=np.float32)) == {"active_dims": 0.0, "sparsity_ratio": 1.0}


def test_a_stored_zero_or_negative_weight_is_no_listed_term():
    from sparse_adapt.modeling.vectors import decode, rows_to_dicts

    # Row 0 stores a zero at id 0 and a negative weight at id 3 beside 2.0 at id 1: only "b"
    # is a term; a listing of "a": 0.0 would show a word the vector does not hold.
    m = sp.csr_matrix((np.array([0.0, 2.0, -1.0]), (np.array([0, 0, 0]), np.array([0, 1, 3]))), shape=(1, 4))
    assert m.nnz == 3
    assert rows_to_dicts(m, ["a", "b", "c", "d"]) == [{"b": 2.0}]
    assert decode(m, ["a", "b", "c", "d"]) == [[("b", 2.0)]]


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_an_infinite_weight_is_refused_like_a_nan_naming_its_row(bad):
    from sparse_adapt.modeling.vectors import similarity, sparsity

    m = D.copy()
    m[2, 3] = bad  # d2's last weight: the row's last stored entry
    for call in (sparsity, lambda v: similarity(Q, v)):
        with pytest.raises(ValueError, match=r"row 2 holds a NaN or infinite weight"):
            call(sp.csr_matrix(m))


def test_intersection_refuses_a_query_of_no_rows_in_our_words():
    from sparse_adapt.modeling.vectors import intersection

    with pytest.raises(ValueError, match="query must be one vector, got 0 rows"):
        intersection(sp.csr_matrix((0, 4), dtype=np.float32), sp.csr_matrix(D))


def test_half_precision_tensors_score_as_float32():
    import torch

    from sparse_adapt.modeling.vectors import similarity, sparsity

    # A model run in bfloat16 returns bfloat16 vectors, which numpy cannot hold; these weights are exact in it.
    for dtype in (torch.bfloat16, torch.float16):
        q, d = torch.from_numpy(Q).to(dtype), torch.from_numpy(D).to(dtype)
        np.testing.assert_array_equal(similarity(q, d), SCORES)
        np.testing.assert_array_equal(similarity(q[0], d.to_sparse()), SCORES[:1])
        assert sparsity(d)["active_dims"] == pytest.approx(5 / 3)


def test_an_uncoalesced_sparse_tensor_sums_its_repeated_entries():
    import torch

    from sparse_adapt.modeling.vectors import decode, similarity

    # torch.sparse_coo_tensor leaves repeated indices uncoalesced: q0 = (1, 0, 1 + 1, 0)
    q = torch.sparse_coo_tensor([[0, 0, 0], [2, 0, 2]], [1.0, 1.0, 1.0], (1, 4), check_invariants=True)
    np.testing.assert_allclose(similarity(q, D), SCORES[:1])
    one = torch.sparse_coo_tensor([[2, 0, 2]], [1.0, 1.0, 1.0], (4,), check_invariants=True)
    assert decode(one, list("abcd")) == [("c", 2.0), ("a", 1.0)]


def test_intersection_is_float32_whatever_the_inputs_dtype():
    from sparse_adapt.modeling.vectors import intersection

    got = intersection(sp.csr_matrix(Q[:1].astype(np.float64)), sp.csr_matrix(D.astype(np.float64)))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got.toarray(), [[0.5, 0, 2, 0], [0, 0, 0, 0], [2, 0, 0, 0]])


def test_encode_to_dicts_encodes_queries_at_the_query_length(tiny_bert):
    from sparse_adapt.modeling.vectors import rows_to_dicts

    texts = ["Database timeout happens when the connection pool is exhausted.", "Reset your password"]
    tiny_bert.settings.query_max_length = 4  # [CLS] + 2 pieces + [SEP]: the long text is cut as a query only
    vocab = tiny_bert.id_to_token()
    as_query = [set(d) for d in rows_to_dicts(tiny_bert.encode(texts, "query"), vocab)]
    as_document = [set(d) for d in rows_to_dicts(tiny_bert.encode(texts, "document"), vocab)]
    assert as_query != as_document  # the cut shows
    assert [set(d) for d in tiny_bert.encode_to_dicts(texts, "query")] == as_query
    assert [set(d) for d in tiny_bert.encode_to_dicts(texts)] == as_document


def test_decode_names_vectors_narrower_than_the_vocabulary():
    from sparse_adapt.modeling.vectors import decode

    # vectors encoded before an extension: their ids are the first ones of the extended vocabulary
    assert decode(Q[0], ["a", "b", "c", "d", "gatrocraptic"]) == [("c", 2.0), ("a", 1.0)]


def test_as_rows_keeps_a_scipy_matrix_s_dtype_and_reads_tensors_and_arrays_as_float32():
    # What as_rows' docstring says of dtypes: scipy input as it is; a tensor or an array is read as
    # float32 (a float64 or integer one too), so "their own dtype" held for scipy input alone.
    import torch

    from sparse_adapt.modeling.vectors import as_rows

    dense = np.array([[0.5, 0.0, 2.0]], dtype=np.float64)
    for given in (sp.csr_matrix(dense), sp.csr_matrix(dense.astype(np.int64)), sp.csr_matrix(dense, dtype=np.float32)):
        assert as_rows(given)[0].dtype == given.dtype
    for given in (dense, torch.from_numpy(dense), torch.from_numpy(dense).to_sparse(), torch.tensor([1, 0, 2])):
        assert as_rows(given)[0].dtype == np.float32, type(given)
