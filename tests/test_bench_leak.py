"""bench.leak: the split of a text's domain-token weight into its own terms' and the others'."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import corpora
from bench.leak import GROUPS, term_leak, weight_split
from sparse_adapt.modeling.vocabulary import extend_vocabulary
from tests.conftest import make_tiny_bert


def test_weight_split_is_the_hand_worked_mean():
    vectors = sp.csr_matrix(np.array([[0, 1.0, 2.0, 0, 0.5], [0, 0, 0, 3.0, 0]]))
    # row 0: right {1} = 1.0, other {2, 3} = 2.0; row 1: right {2} = 0, other = 3.0; id 4 is no domain token
    assert weight_split(vectors, [{1}, {2}], [1, 2, 3]) == {"rows": 2, "right": 0.5, "other": 2.5}
    with pytest.raises(ValueError):
        weight_split(vectors, [{1}], [1, 2, 3])


def test_every_query_weight_on_one_domain_token_is_counted_on_its_side():
    splade = make_tiny_bert()
    files = corpora.get("pharma")
    extend_vocabulary(splade, json.loads(files.terms.read_text(encoding="utf-8")))
    ids = sorted(splade.domain_token_ids)
    bias = splade.mlm.get_output_embeddings().bias
    with torch.no_grad():
        bias[ids] = -10000.0
    silent = term_leak(splade, files)
    assert all(silent[g]["right"] == 0 and silent[g]["other"] == 0 for g in silent)
    assert silent["heldout-domain-semantic"]["rows"] == 7

    chosen = ids[0]  # every text now fires this one domain token
    with torch.no_grad():
        bias[chosen] = 30.0
    loud = term_leak(splade, files)
    for group in GROUPS:
        both = loud[group]["right"] + loud[group]["other"]
        assert both > 1.0
    # semantic queries name no term and some are about other terms' documents: part is "other"
    assert loud["heldout-domain-semantic"]["other"] > 0
    assert loud["other documents"]["right"] == 0 and loud["other documents"]["other"] > 1.0
