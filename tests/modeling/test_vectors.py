"""Ranked listings and the per-row cut (sparse_adapt.modeling.vectors), worked by hand."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from sparse_adapt.modeling.vectors import keep_top, rank


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
