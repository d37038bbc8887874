"""The spec's failures, reproduced by `diagnose` on the real offline base (slow: real model)."""

from __future__ import annotations

import copy

import pytest

from corpora import GATROCRAPTIC
from diagnostics import Sources, diagnose_term
from sparse_adapt.data import load_documents, load_domain_terms, load_queries
from sparse_adapt.modeling.vocabulary import extend_vocabulary

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def data():
    return (load_documents(GATROCRAPTIC.docs), load_domain_terms(GATROCRAPTIC.terms),
            load_queries(GATROCRAPTIC.queries))


def _status(report):
    out = {}
    for c in report.checks:
        out.setdefault(c.name, set()).add(c.status)
    return out


def test_offline_base_splits_the_term(offline_base, data):
    docs, terms, queries = data
    r = diagnose_term(offline_base, "Gatrocraptic", docs, terms=terms, queries=queries,
                      sources=Sources("offline-minilm", str(GATROCRAPTIC.docs), str(GATROCRAPTIC.terms)))
    # The spec: "before vocabulary extension ... split into 5 subwords: ['ga', '##tro', '##cr', '##ap', '##tic']"
    assert r.vocabulary.pieces == ["ga", "##tro", "##cr", "##ap", "##tic"] and not r.vocabulary.single_token
    assert r.document.doc_id == "d21" and r.document.docs_containing == ["d21", "d22", "d23", "d24", "d25"]
    assert _status(r)["single_token"] == {"fail"} and _status(r)["weight_matches_encoding"] == {"pass"}
    assert r.recommendations[0].id == "extend"
    assert "--stages extend,warmup,dictionary,distill" in r.recommendations[0].commands[0]
    # the pieces' weak weights and logits are no separate remedies: extend's command runs those stages
    assert [rec.id for rec in r.recommendations] == ["extend"]


def test_extended_untrained_base_has_negative_logits_and_zero_weight(offline_base, data):
    """The spec's H2: one token now, but the MLM head never predicts it."""
    docs, terms, queries = data
    splade = copy.deepcopy(offline_base)  # the session base is read-only
    extend_vocabulary(splade, terms)
    r = diagnose_term(splade, "Gatrocraptic", docs, terms=terms, queries=queries)
    t = r.targets[0]
    assert r.vocabulary.single_token and r.vocabulary.domain_token
    assert r.vocabulary.base_pieces == ["ga", "##tro", "##cr", "##ap", "##tic"]
    assert t.logits.verdict == "negative" and t.weight.expected == 0.0 == t.weight.actual
    assert t.ranking.rank is None
    assert [rec.id for rec in r.recommendations][0] == "warmup"
