"""Batched encoding shared by both encoders (sparse_adapt/modeling/batching.py), with a stand-in
tokenizer and weigh function: what the loop itself promises of the matrix it returns."""

from __future__ import annotations

import numpy as np

from sparse_adapt.modeling.batching import encode_texts
from tests.modeling.test_encoder import _LengthTokenizer, _weigh_by_length


def test_the_matrix_is_float32_whatever_dtype_a_batch_is_weighed_in():
    # A weigh function answers in its model's dtype; the matrix is float32 for every reader of it
    # (scipy's sparse matrices do not even hold float16).
    for dtype in (np.float64, np.float16):
        def weigh(input_ids, attention_mask, dtype=dtype):
            return _weigh_by_length(input_ids, attention_mask).astype(dtype) * 0.3

        got = encode_texts(["aa", "a", "aaa"], kind="query", tokenizer=_LengthTokenizer(), max_length=5, vocab_size=8,
                           weigh=weigh, batch_size=2, progress=None, max_active_dims=None)
        assert got.dtype == np.float32, dtype
        assert [int(got[i].indices[0]) for i in range(3)] == [2, 1, 3]
