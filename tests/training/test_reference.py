"""The reference's vectors of the training texts (sparse_adapt/training/reference.py), looked up by text."""

from __future__ import annotations

import numpy as np

from sparse_adapt.data import TrainExample
from tests.conftest import make_tiny_bert


def test_each_text_gets_its_own_vector_in_the_order_asked_for():
    # A batch asks for its texts in any order and a shared candidate more than once: row i of
    # the answer must be text i's vector (one query and one document alone cannot tell).
    from sparse_adapt.training.reference import ReferenceVectors

    enc = make_tiny_bert()
    examples = [TrainExample("q1", "install the agent", ("a", "b"),
                             ("the agent runs on hosts", "billing by seat"), (10.0, 0.0)),
                TrainExample("q2", "zorblatt spending", ("b", "c"),
                             ("billing by seat", "zorblatt tracks costs"), (0.0, 10.0))]
    ref = ReferenceVectors.encode(enc, examples)
    queries = ["zorblatt spending", "install the agent"]
    docs = ["zorblatt tracks costs", "billing by seat", "the agent runs on hosts", "billing by seat"]
    np.testing.assert_allclose(ref.queries(queries, "cpu").numpy(), enc.encode(queries, "query").toarray(),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ref.documents(docs, "cpu").numpy(), enc.encode(docs, "document").toarray(),
                               rtol=1e-5, atol=1e-6)
