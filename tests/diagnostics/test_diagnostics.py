"""Diagnostics: every number is recomputed here independently (MLM logits straight from
``splade.mlm``, pooling by hand, dot products from ``encode``) and compared."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from diagnostics import diagnose_term, explain_query, inspect_corpus
from diagnostics.recommend import Sources
from diagnostics.schema import SchemaError, validate
from diagnostics.term import HIGH_WEIGHT
from sparse_adapt.modeling.base import set_bias
from sparse_adapt.modeling.calibration import calibrate_bias
from sparse_adapt.data import Document, Query
from sparse_adapt.errors import ConfigError
from sparse_adapt.modeling.vocabulary import extend_vocabulary

TERMS = {"acronyms": ["API", "OAuth2"], "jargon": ["Gatrocraptic"]}
DOCS = [
    Document("d1", "Configure the API gateway timeout and retry settings."),
    Document("d2", "Understanding Gatrocraptic metrics is essential. Gatrocraptic expenditure impacts budgets."),
    Document("d3", "Gatrocraptic analysis tools help identify spending patterns."),
    Document("d4", "Reset your password from the account settings page."),
]
QUERIES = [
    Query("q1", "tools for monitoring corporate expenses"),
    Query("q2", "Gatrocraptic analysis tools"),
    Query("q3", "reset my password"),
]
# The spec: "before vocabulary extension, the same term was split into 5 subwords".
GATRO_PIECES = ["ga", "##tro", "##cr", "##ap", "##tic"]


@pytest.fixture
def sparse(tiny_bert):
    """The tiny model with its decoder bias calibrated to ~30 active tokens per text, like a
    real SPLADE model (a random head activates half the vocabulary)."""
    set_bias(tiny_bert.mlm, calibrate_bias(tiny_bert, [d.text for d in DOCS], target_active=30))
    return tiny_bert


@pytest.fixture
def extended(sparse):
    extend_vocabulary(sparse, TERMS)
    return sparse


def _ids(splade, text, kind="document"):
    enc = splade.tokenizer(text, truncation=True, max_length=splade.max_length(kind), return_tensors="pt")
    return enc["input_ids"], enc["attention_mask"]


@torch.no_grad()
def _mlm_logits(splade, text):
    """(L, V) logits straight from the Hugging Face masked-LM."""
    ids, mask = _ids(splade, text)
    splade.mlm.eval()  # encode() restores the wrapper's mode, which may be train (dropout)
    return splade.mlm(input_ids=ids, attention_mask=mask).logits[0, :, : splade.vocab_size].numpy()


def _roundtrip(obj) -> dict:
    return json.loads(json.dumps(obj.to_dict()))


def _boost(splade, token_id, delta):
    with torch.no_grad():
        splade.mlm.get_output_embeddings().bias[token_id] += delta


# ---------------------------------------------------------------------------- [1] vocabulary
def test_vocabulary_unextended_term_is_split_and_analysed_per_piece(tiny_bert):
    r = diagnose_term(tiny_bert, "Gatrocraptic", DOCS, terms=TERMS)
    v = r.vocabulary
    assert v.pieces == GATRO_PIECES
    assert v.token_ids == tiny_bert.tokenizer.convert_tokens_to_ids(GATRO_PIECES)
    assert v.base_pieces == GATRO_PIECES
    assert not v.single_token and not v.in_vocabulary and not v.added_token and not v.domain_token
    assert v.in_terms_file and v.categories == ["jargon"] and v.normalized == "gatrocraptic"
    assert [t.token for t in r.targets] == GATRO_PIECES
    single = next(c for c in r.checks if c.name == "single_token")
    assert (single.status, single.actual) == ("fail", "5 pieces: ga ##tro ##cr ##ap ##tic")  # no [UNK] note
    assert r.recommendations[0].id == "extend"
    # one command to follow: train with the extend stage (an extend-vocab beside it, whose output the
    # train command ignored, read as a first step)
    (command,) = r.recommendations[0].commands
    assert command.startswith("sparse-adapt train --base") and "--stages extend,warmup,dictionary,distill" in command
    assert not {"warmup", "dictionary", "query_expansion"} & {rec.id for rec in r.recommendations}  # run by that command
    # each piece is marked at its own position inside both occurrences in d2
    assert r.document.doc_id == "d2" and r.document.docs_containing == ["d2", "d3"]
    ids = _ids(tiny_bert, DOCS[1].text)[0][0].tolist()
    for t in r.targets:
        assert t.logits.occurrences == [
            i for s, e in r.document.term_spans for i in range(s, e) if ids[i] == t.token_id
        ]
        assert len(t.logits.occurrences) == 2


def test_vocabulary_extended_term_is_one_domain_token_with_base_split(extended):
    r = diagnose_term(extended, "Gatrocraptic", DOCS, terms=TERMS)
    v = r.vocabulary
    tid = extended.tokenizer.convert_tokens_to_ids("gatrocraptic")
    assert v.token_ids == [tid] and v.single_token and v.in_vocabulary
    assert v.added_token and v.domain_token and v.model_category == "jargon"
    assert v.base_pieces == GATRO_PIECES  # what the base tokenizer would do
    assert [t.token_id for t in r.targets] == [tid]
    assert not any(rec.id == "extend" for rec in r.recommendations)


def test_a_special_token_is_one_base_token_not_one_added_by_extend(tiny_bert):
    """The tokenizer keeps [MASK] among its added tokens, as it does extend's: only the latter were
    added to the base vocabulary."""
    from diagnostics.sections.vocabulary import vocabulary_check

    v = vocabulary_check(tiny_bert, "[MASK]", None, None)
    assert v.token_ids == [tiny_bert.tokenizer.mask_token_id] and v.single_token and v.in_vocabulary
    assert not v.added_token and not v.domain_token


def test_a_phrase_starting_with_a_domain_token_is_no_domain_token(extended):
    from diagnostics.sections.vocabulary import vocabulary_check

    v = vocabulary_check(extended, "Gatrocraptic tools", None, None)
    assert v.token_ids[0] in extended.settings.domain_token_ids and len(v.token_ids) == 2
    assert not v.single_token and not v.domain_token


def test_terms_given_from_python_are_checked_without_a_file_path(extended):
    """A terms dict without sources= once left the check at n/a although the term was listed."""
    listed = diagnose_term(extended, "Gatrocraptic", DOCS, terms=TERMS)
    assert {c.name: c.status for c in listed.checks}["in_terms_file"] == "pass"
    absent = diagnose_term(extended, "password", DOCS, terms=TERMS)
    assert {c.name: c.status for c in absent.checks}["in_terms_file"] == "fail"
    unknown = diagnose_term(extended, "Gatrocraptic", DOCS)
    assert {c.name: (c.status, c.actual) for c in unknown.checks}["in_terms_file"] == ("n/a", "no terms file")


def test_vocabulary_not_in_terms_file(extended):
    r = diagnose_term(extended, "password", DOCS, terms=TERMS, sources=Sources("m", terms="terms.json"))
    assert not r.vocabulary.in_terms_file and r.vocabulary.categories == []
    assert {c.name: c.status for c in r.checks}["in_terms_file"] == "fail"
    assert {c.name: c.status for c in r.checks}["domain_token"] == "fail"
    assert r.recommendations[0].id == "add_to_terms"


# ---------------------------------------------------------------------------- [2]-[4] numbers
def test_logits_weight_and_rank_match_independent_computation(extended):
    tid = extended.tokenizer.convert_tokens_to_ids("gatrocraptic")
    _boost(extended, tid, 3.0)  # make the term active so rank and weight are non-trivial
    r = diagnose_term(extended, "Gatrocraptic", DOCS, terms=TERMS)
    t = r.targets[0]
    logits = _mlm_logits(extended, DOCS[1].text)[:, tid]  # (L,)
    ids = _ids(extended, DOCS[1].text)[0][0].tolist()

    # [2] every position, occurrences, statistics
    np.testing.assert_allclose([p.logit for p in t.logits.positions], logits, atol=1e-5)
    occ = [i for i, x in enumerate(ids) if x == tid]
    assert t.logits.occurrences == occ == [p.position for p in t.logits.positions if p.occurrence]
    assert t.logits.occurrence_mean == pytest.approx(logits[occ].mean(), abs=1e-5)
    assert t.logits.occurrence_min == pytest.approx(logits[occ].min(), abs=1e-5)
    assert t.logits.max_logit == pytest.approx(logits.max(), abs=1e-5)

    # [3] max over positions ([CLS]/[SEP] included) -> relu -> log1p, and the model's answer
    expected = math.log1p(max(float(logits.max()), 0.0))
    actual = float(extended.encode([DOCS[1].text])[0, tid])
    assert t.weight.expected == pytest.approx(expected, abs=1e-5)
    assert t.weight.actual == pytest.approx(actual, abs=1e-7)
    assert t.weight.matches and abs(expected - actual) < 1e-4

    # [4] rank among non-zero tokens of the encoded document, top tokens in order
    row = extended.encode([DOCS[1].text]).toarray()[0]
    nz = np.nonzero(row > 0)[0]
    order = nz[np.lexsort((nz, -row[nz]))]
    assert t.ranking.nonzero == len(nz)
    assert t.ranking.rank == int(np.where(order == tid)[0][0]) + 1
    assert [x.token_id for x in t.ranking.top] == order[:10].tolist()
    np.testing.assert_allclose([x.weight for x in t.ranking.top], row[order[:10]], rtol=1e-6)
    assert [x.in_text for x in t.ranking.top] == [int(i) in set(ids) for i in order[:10]]


def test_weight_check_reports_a_mismatch(extended, monkeypatch):
    tid = extended.tokenizer.convert_tokens_to_ids("gatrocraptic")
    real = extended.encode

    def skewed(texts, kind="document", *a, **k):  # a model whose encoding is not SPLADE pooling
        m = real(texts, kind, *a, **k).tolil()
        m[:, tid] = m[:, tid].toarray() + 0.5
        return sp.csr_matrix(m)

    monkeypatch.setattr(extended, "encode", skewed)
    r = diagnose_term(extended, "Gatrocraptic", DOCS, terms=TERMS)
    w = r.targets[0].weight
    assert not w.matches and w.abs_diff == pytest.approx(0.5, abs=1e-5)
    assert {c.name: c.status for c in r.checks}["weight_matches_encoding"] == "fail"
    assert r.recommendations[0].id == "pooling_mismatch"


def test_special_token_is_zeroed_in_the_manual_weight_too(tiny_bert):
    # Undo the baked exclusion (bias -1e4) to get a special token with positive logits,
    # which only the output mask then zeroes.
    with torch.no_grad():
        tiny_bert.mlm.get_output_embeddings().bias[tiny_bert.tokenizer.sep_token_id] = 0.0
    _boost(tiny_bert, tiny_bert.tokenizer.sep_token_id, 5.0)  # [SEP] logits all positive
    r = diagnose_term(tiny_bert, "[SEP]", DOCS)
    w = r.targets[0].weight
    assert w.special_token and w.after_log1p > 0
    assert w.expected == 0.0 == w.actual and w.matches
    extend = next(rec for rec in r.recommendations if rec.id == "extend")
    assert extend.commands == [] and "special token of this tokenizer" in extend.finding  # no training advised


def test_healthy_term_passes_and_needs_no_recommendation(extended):
    tid = extended.tokenizer.convert_tokens_to_ids("gatrocraptic")
    _boost(extended, tid, 15.0)  # logit >> every random logit: weight log1p(~12) > 2, rank 1, in every query
    r = diagnose_term(extended, "Gatrocraptic", DOCS, terms=TERMS, queries=QUERIES)
    status = {c.name: c.status for c in r.checks}
    assert r.targets[0].ranking.rank == 1 and r.targets[0].ranking.weight > HIGH_WEIGHT
    for name in ("single_token", "domain_token", "positive_logits", "weight_matches_encoding", "nonzero_weight",
                 "high_weight", "top_rank", "query_expansion"):
        assert status[name] == "pass", name
    assert r.recommendations == []
    from rich.console import Console

    from diagnostics.render import render_term

    def closing_line(result) -> str:
        console = Console(record=True, width=200)
        render_term(result, console)
        return console.export_text().strip().splitlines()[-1]

    assert closing_line(r) == "✓ nothing to fix: the model gives the term weight, rank and expansion"
    # without queries the expansion is not checked: said in the table and in the closing line
    unchecked = diagnose_term(extended, "Gatrocraptic", DOCS, terms=TERMS)
    assert {c.name: (c.status, c.actual) for c in unchecked.checks}["query_expansion"] == (
        "n/a", "not checked: no queries given")
    assert closing_line(unchecked) == ("✓ nothing to fix: the model gives the term weight and rank "
                                       "(query expansion not checked: pass --queries)")


def test_dead_term_gets_warmup_and_query_expansion_recommendations(extended):
    tid = extended.tokenizer.convert_tokens_to_ids("gatrocraptic")
    _boost(extended, tid, -50.0)  # never fires
    r = diagnose_term(extended, "Gatrocraptic", DOCS, terms=TERMS, queries=QUERIES)
    t = r.targets[0]
    assert t.logits.verdict == "negative" and t.ranking.rank is None and t.ranking.weight == 0.0
    status = {c.name: c.status for c in r.checks}
    assert status["positive_logits"] == status["nonzero_weight"] == status["query_expansion"] == "fail"
    ids = [rec.id for rec in r.recommendations]
    assert ids == ["warmup", "query_expansion"]
    warm = r.recommendations[0]
    assert "--stages warmup,dictionary,distill" in warm.commands[0]  # already extended: no extend stage
    assert "query-expansion loss weight" in r.recommendations[1].action
    from rich.console import Console

    from diagnostics.render import VERDICT_LINES, render_term

    console = Console(record=True, width=200)
    render_term(r, console)
    assert VERDICT_LINES["negative"][0].strip() in console.export_text()


def test_query_expansion_counts_match_encoded_queries(extended):
    tid = extended.tokenizer.convert_tokens_to_ids("gatrocraptic")
    _boost(extended, tid, 1.0)
    r = diagnose_term(extended, "Gatrocraptic", DOCS, terms=TERMS, queries=QUERIES)
    qe = r.targets[0].query_expansion
    Q = extended.encode([q.text for q in QUERIES], "query").toarray()[:, tid]
    has = [tid in _ids(extended, q.text, "query")[0][0].tolist() for q in QUERIES]
    assert has == [False, True, False]
    assert qe.without_term == 2 and qe.with_term == 1
    assert [e.qid for e in qe.expanding] == sorted(
        [q.qid for q, h, w in zip(QUERIES, has, Q) if not h and w > 0], key=lambda qid: -Q[int(qid[1]) - 1]
    )
    assert qe.with_term_active == int(Q[1] > 0)


def test_a_query_holding_the_token_in_another_word_is_no_expansion(sparse):
    # "APIs" is `api ##s`: its own `api` weight is no expansion to "API", though the word differs
    api = sparse.tokenizer.convert_tokens_to_ids("api")
    _boost(sparse, api, 50.0)  # active in every text, with or without it
    queries = [Query("q1", "list all APIs"), Query("q2", "watering plants"), Query("q3", "the API")]
    r = diagnose_term(sparse, "API", DOCS, queries=queries)
    qe = r.targets[0].query_expansion
    assert sparse.encode([q.text for q in queries], "query").toarray()[:, api].min() > 0
    assert (qe.without_term, qe.with_term, qe.with_term_active) == (1, 2, 2)
    assert [e.qid for e in qe.expanding] == ["q2"] and qe.with_term_qids == ["q1", "q3"]


def _fire_only_at(splade, token_id, doc, alpha=5.0, cut=0.9):
    """Aim the token's decoder row at its hidden state in ``doc``: its logit is positive where
    the token is the input (documents and queries naming the term) and negative elsewhere."""
    mlm = splade.mlm
    mlm.eval()
    enc = splade.tokenizer(doc.text, return_tensors="pt")
    pos = enc["input_ids"][0].tolist().index(token_id)
    dec = mlm.get_output_embeddings()
    with torch.no_grad():
        v = mlm.cls.predictions.transform(mlm.bert(**enc).last_hidden_state[0, pos])  # (H,)
        dec.weight = torch.nn.Parameter(dec.weight.detach().clone())  # untied: the input embedding stays
        dec.weight[token_id] = alpha * v / v.norm()
        dec.bias[token_id] = -alpha * cut * v.norm()


def test_feedback_expansion_is_the_hand_worked_rocchio_and_turns_the_failure_into_a_warning(extended):
    from sparse_adapt.retrieval.feedback import Feedback

    tid = extended.tokenizer.convert_tokens_to_ids("gatrocraptic")
    _fire_only_at(extended, tid, DOCS[2])
    D = extended.encode([d.text for d in DOCS]).toarray()  # (4, V)
    Q = extended.encode([q.text for q in QUERIES], "query").toarray()  # (3, V)
    assert Q[0, tid] == Q[2, tid] == 0 and D[:, tid].max() > 0  # only texts naming the term have it
    plain = diagnose_term(extended, "Gatrocraptic", DOCS, terms=TERMS, queries=QUERIES)
    assert plain.targets[0].query_expansion.feedback is None
    assert {c.name: c.status for c in plain.checks}["query_expansion"] == "fail"
    assert "--feedback" not in plain.recommendations[-1].action

    fb = Feedback(docs=1, weight=0.5, terms=32)
    r = diagnose_term(extended, "Gatrocraptic", DOCS, terms=TERMS, queries=QUERIES, feedback=fb)
    qe = r.targets[0].query_expansion
    assert qe.expanding == [] and (qe.feedback.docs, qe.feedback.weight, qe.feedback.terms) == (1, 0.5, 32)
    # by hand: each query without the term plus half its best document, that document cut to 32 terms
    want = []
    for i in (0, 2):
        best = int(np.argmax(Q[i] @ D.T))
        kept = np.argsort(-D[best], kind="stable")[:32]
        w = Q[i, tid] + 0.5 * (D[best, tid] if tid in kept else 0.0)
        if w > 0:
            want.append((QUERIES[i].qid, pytest.approx(w)))
    assert want and [(e.qid, e.weight) for e in qe.feedback.expanding] == want
    [check] = [c for c in r.checks if c.name == "query_expansion"]
    assert (check.status, check.actual) == ("warn", f"0 of 2 queries ({len(want)} with feedback)")
    rec = r.recommendations[-1]
    assert rec.id == "query_expansion" and "search with --feedback" in rec.action
    assert f"0 of 2 queries ({len(want)} with feedback)" in rec.finding
    validate(_roundtrip(r))


def test_term_absent_from_every_document_uses_a_probe(extended):
    r = diagnose_term(extended, "OAuth2", DOCS, terms=TERMS, sources=Sources("m", docs="docs.jsonl"))
    assert r.document.source == "probe" and r.document.doc_id is None and r.document.docs_containing == []
    assert any("no document" in w for w in r.warnings)
    assert {c.name: c.status for c in r.checks}["in_documents"] == "warn"
    assert "documents" in [rec.id for rec in r.recommendations]
    # sections 3 still computed on the probe text
    tid = r.targets[0].token_id
    expected = math.log1p(max(float(_mlm_logits(extended, "OAuth2")[:, tid].max()), 0.0))
    assert r.targets[0].weight.expected == pytest.approx(expected, abs=1e-5)


def test_doc_option(extended):
    r = diagnose_term(extended, "Gatrocraptic", DOCS, doc_id="d3")
    assert r.document.source == "doc" and r.document.doc_id == "d3" and r.document.term_spans == [[1, 2]]
    r = diagnose_term(extended, "Gatrocraptic", DOCS, doc_id="d4")
    assert r.document.term_spans == [] and r.targets[0].logits.verdict == "absent"
    # a document without the term grades no weight or rank (it had advised retraining on a weight of 0)
    graded = {c.name: c.status for c in r.checks}
    assert graded["nonzero_weight"] == "n/a" and "high_weight" not in graded and "top_rank" not in graded
    assert not {rec.id for rec in r.recommendations} & {"warmup", "dictionary", "distill", "hinge"}
    with pytest.raises(ConfigError, match="--doc 'nope'"):
        diagnose_term(extended, "Gatrocraptic", DOCS, doc_id="nope")
    with pytest.raises(ConfigError, match="empty"):
        diagnose_term(extended, "  ", DOCS)


# ---------------------------------------------------------------------------- explain
def test_explain_contributions_sum_to_independent_scores(sparse):
    tiny_bert = sparse
    query = "tools for monitoring corporate expenses"
    e = explain_query(tiny_bert, query, DOCS, k=3)
    q = tiny_bert.encode([query], "query").toarray()[0]
    D = tiny_bert.encode([d.text for d in DOCS]).toarray()
    scores = D @ q
    order = sorted(range(len(DOCS)), key=lambda i: (-scores[i], DOCS[i].doc_id))[:3]
    assert [m.doc_id for m in e.results] == [DOCS[i].doc_id for i in order]
    for m, i in zip(e.results, order):
        assert m.score == pytest.approx(scores[i], rel=1e-5)
        assert sum(s.contribution for s in m.shared) == pytest.approx(m.score, rel=1e-5)
        assert m.contributions_sum == pytest.approx(m.score, rel=1e-5)
        shared = set(np.nonzero(q > 0)[0]) & set(np.nonzero(D[i] > 0)[0])
        assert {s.token_id for s in m.shared} == shared
        for s in m.shared:
            assert s.query_weight == pytest.approx(q[s.token_id]) and s.doc_weight == pytest.approx(D[i, s.token_id])
            assert s.contribution == pytest.approx(s.query_weight * s.doc_weight)
        assert [s.contribution for s in m.shared] == sorted((s.contribution for s in m.shared), reverse=True)
    st = e.query
    assert st.nonzero == int((q > 0).sum()) and st.max_weight == pytest.approx(q.max())
    assert st.sparsity == pytest.approx(100 * (1 - (q > 0).sum() / len(q)))
    text_ids = set(_ids(tiny_bert, query, "query")[0][0].tolist())
    assert st.expansion_count == sum(1 for t in np.nonzero(q > 0)[0] if t not in text_ids)
    assert [t.weight for t in st.tokens] == sorted((t.weight for t in st.tokens), reverse=True)


def test_explain_with_feedback_explains_the_expanded_query(sparse):
    """Hand-worked Rocchio with one fed-back document: q' = q + w * top_m(d_best), then every
    number shown is q''s, so the contributions still sum to the second-pass score."""
    from sparse_adapt.retrieval.feedback import Feedback

    tiny_bert = sparse
    query = "tools for monitoring corporate expenses"
    fb = Feedback(docs=1, weight=2.0, terms=5)
    e = explain_query(tiny_bert, query, DOCS, k=3, feedback=fb)
    q = tiny_bert.encode([query], "query").toarray()[0].astype(np.float64)
    D = tiny_bert.encode([d.text for d in DOCS]).toarray().astype(np.float64)
    first = D @ q
    best = sorted(range(len(DOCS)), key=lambda i: (-first[i], i))[0]
    centroid = D[best].copy()
    kept = sorted(np.nonzero(centroid)[0], key=lambda t: (-centroid[t], t))[:5]
    cut = np.zeros_like(centroid)
    cut[kept] = centroid[kept]
    expanded = q + 2.0 * cut
    scores = D @ expanded
    order = sorted(range(len(DOCS)), key=lambda i: (-scores[i], DOCS[i].doc_id))[:3]
    assert e.query.feedback.fed_back == [DOCS[best].doc_id]
    assert {(a.token_id, a.new) for a in e.query.feedback.added} == {(int(t), bool(q[t] == 0)) for t in kept}
    for a in e.query.feedback.added:
        assert a.added == pytest.approx(2.0 * centroid[a.token_id], rel=1e-5)
    assert e.query.nonzero == int((expanded > 0).sum())
    assert [m.doc_id for m in e.results] == [DOCS[i].doc_id for i in order]
    for m, i in zip(e.results, order):
        assert m.score == pytest.approx(scores[i], rel=1e-5)
        assert m.contributions_sum == pytest.approx(m.score, rel=1e-5)
    assert explain_query(tiny_bert, query, DOCS, k=3).query.feedback is None


def test_explain_rejects_empty_query_and_bad_k(tiny_bert):
    with pytest.raises(ConfigError, match="query is empty"):
        explain_query(tiny_bert, "   ", DOCS)
    with pytest.raises(ConfigError, match="--k"):
        explain_query(tiny_bert, "reset", DOCS, k=0)


def test_explain_query_that_activates_nothing(tiny_bert):
    with torch.no_grad():
        tiny_bert.mlm.get_output_embeddings().bias.fill_(-100.0)
    e = explain_query(tiny_bert, "reset my password", DOCS, k=2)
    assert e.query.nonzero == 0 and any("activates no token" in w for w in e.warnings)
    # already said why every document scores 0: no second warning about the documents shown
    assert not any("documents shown score 0" in w for w in e.warnings)
    assert all(m.score == 0 and m.shared == [] for m in e.results)


def test_explain_says_what_the_model_cut_off_and_which_shown_documents_score_0(sparse):
    sparse.settings.query_max_length = 8
    long_query = "tools for monitoring corporate expenses and budgets with Gatrocraptic analysis"
    e = explain_query(sparse, long_query, [*DOCS, Document("d5", "settings " * 300)], k=5)
    assert any("the query is longer than 8 pieces" in w for w in e.warnings)  # was: no warning at all
    assert any("1 of 5 documents is longer than" in w for w in e.warnings)
    zero = sum(1 for m in e.results if m.score == 0)
    assert any(f"{zero} of the 5 documents shown score 0" in w for w in e.warnings) == (zero > 0)


# ---------------------------------------------------------------------------- occurrences
def test_a_term_is_a_whole_word_not_the_start_of_a_longer_one(sparse):
    # "Gatro" is [ga, ##tro], the first two pieces of every "Gatrocraptic" of d2 and d3
    r = diagnose_term(sparse, "Gatro", DOCS, queries=QUERIES)
    assert r.document.docs_containing == [] and r.document.source == "probe"
    # q2's "Gatrocraptic" is not the word "Gatro", but it holds the piece `ga`: its `ga` weight is
    # no expansion, so q2 is no query without it either
    assert r.targets[0].query_expansion.without_term == 2 and r.targets[0].query_expansion.with_term == 1


def test_bpe_finds_a_term_at_a_text_start_and_after_a_bracket():
    """Byte-level BPE splits "spending" as "Ġspending" after a space and otherwise differently:
    matching the running-text ids found only the third document, and took the query that
    starts with the term for one expanding to it."""
    from tests.conftest import make_tiny_roberta

    tiny_roberta = make_tiny_roberta()
    docs = [Document("a1", "spending rose in the third quarter."), Document("a2", "The report (spending) was late."),
            Document("a3", "Cuts in spending were announced."), Document("a4", "Nothing related here.")]
    r = diagnose_term(tiny_roberta, "spending", docs, queries=[Query("q1", "spending cuts"), Query("q2", "budget")])
    # a1 and a2 split it otherwise (`sp end ing` at a text start, after a bracket): analysed is a3,
    # the first document holding the term's running-text pieces, which every check reads
    assert r.document.docs_containing == ["a1", "a2", "a3"] and r.document.doc_id == "a3"
    tokens = tiny_roberta.tokenizer.convert_ids_to_tokens(_ids(tiny_roberta, docs[2].text)[0][0].tolist())
    (start, end), = r.document.term_spans
    assert tiny_roberta.tokenizer.convert_tokens_to_string(tokens[start:end]).strip() == "spending"
    assert r.targets[0].logits.verdict != "absent"  # a1 gave "term not in this text" for a term it located
    first_only = diagnose_term(tiny_roberta, "spending", docs[:2])  # no document with the running-text pieces
    assert first_only.document.doc_id == "a1"
    expansion = r.targets[0].query_expansion
    assert expansion.with_term == 1 and expansion.without_term == 1
    # a word BPE keeps whole in running text is a vocabulary entry, spelt with its space mark
    assert "office" not in tiny_roberta.tokenizer.get_vocab() and "Ġoffice" in tiny_roberta.tokenizer.get_vocab()
    office = diagnose_term(tiny_roberta, "office", docs).vocabulary
    assert office.single_token and office.in_vocabulary
    assert [q.qid for q in expansion.expanding] in ([], ["q2"])


def test_space_around_the_term_is_not_part_of_it(extended):
    r = diagnose_term(extended, "  Gatrocraptic ", DOCS, terms=TERMS)
    assert r.term == "Gatrocraptic" and r.vocabulary.single_token and r.vocabulary.in_terms_file
    assert r.document.docs_containing == ["d2", "d3"]


def test_an_unknown_character_term_matches_only_itself(tiny_bert):
    docs = [Document("e1", "launch day \U0001F600 for the team"), Document("e2", "the \U0001F680 launch")]
    assert tiny_bert.tokenizer.tokenize("\U0001F600") == tiny_bert.tokenizer.tokenize("\U0001F680") == ["[UNK]"]
    r = diagnose_term(tiny_bert, "\U0001F680", docs)
    assert r.document.docs_containing == ["e2"]  # was e1 too: any [UNK] was "the term"


def test_a_term_the_tokenizer_reads_as_unk_is_sent_to_extend_not_to_warmup(tiny_bert):
    """[UNK]'s logit is the -10000 exclusion bias: no head training can raise it, so the
    logit and weight checks have no verdict and the one remedy is a token of its own."""
    docs = [Document("e2", "the \U0001F680 launch went well")]
    r = diagnose_term(tiny_bert, "\U0001F680", docs)
    status = {c.name: (c.status, c.actual) for c in r.checks}
    assert status["single_token"] == ("fail", "1 piece: [UNK]; [UNK] is never in a vector")
    assert status["positive_logits"] == ("n/a", "special token: never in a vector")
    assert "nonzero_weight" not in status and status["weight_matches_encoding"][0] == "pass"
    assert [rec.id for rec in r.recommendations] == ["extend"]
    assert "characters the tokenizer does not know" in r.recommendations[0].finding
    from rich.console import Console

    from diagnostics.render import render_term

    console = Console(record=True, width=160)
    render_term(r, console)
    shown = console.export_text()
    assert "no: 1 piece ([UNK]: the tokenizer does not know its characters)" in shown
    assert "[UNK] is a special token: excluded from every vector" in shown and "every logit there" not in shown


def test_a_term_used_only_past_the_document_window_is_said_so(sparse):
    sparse.settings.doc_max_length = 16
    late = Document("L1", "settings " * 40 + "and then Gatrocraptic at last.")
    r = diagnose_term(sparse, "Gatrocraptic", [DOCS[0], late], terms=TERMS)
    assert r.document.docs_containing == [] and r.document.docs_beyond_window == ["L1"]
    assert any("only past the model's document window (16 tokens)" in w for w in r.warnings)
    check = next(c for c in r.checks if c.name == "in_documents")
    assert check.actual == "0 of 2 (1 more only past the document window)"
    rec = next(x for x in r.recommendations if x.id == "documents")
    assert "split long documents into passages" in rec.action
    validate(r.to_dict())


# ---------------------------------------------------------------------------- inspect
def test_inspect_matches_independent_statistics(extended):
    tid = extended.tokenizer.convert_tokens_to_ids("gatrocraptic")
    c = inspect_corpus(extended, DOCS, QUERIES)
    D = extended.encode([d.text for d in DOCS]).toarray()
    Q = extended.encode([q.text for q in QUERIES], "query").toarray()
    nnz_d = (D > 0).sum(1)
    assert c.documents.nonzero.mean == pytest.approx(nnz_d.mean())
    assert c.documents.nonzero.median == pytest.approx(np.median(nnz_d))
    assert c.documents.nonzero.max == nnz_d.max() and c.queries.nonzero.min == (Q > 0).sum(1).min()
    p_d, p_q = (D > 0).mean(0), (Q > 0).mean(0)
    assert c.flops.value == pytest.approx(float(p_q @ p_d), rel=1e-6)
    domain = extended.settings.domain_token_ids
    keep = np.ones(D.shape[1], bool)
    keep[domain] = False
    assert c.flops.value_excluding_domain == pytest.approx(float(p_q[keep] @ p_d[keep]), rel=1e-6)
    assert c.flops.regularizer == pytest.approx(float(Q.mean(0)[keep] @ D.mean(0)[keep]), rel=1e-5)
    tok = next(t for t in c.domain.tokens if t.token_id == tid)
    with_term = [i for i, d in enumerate(DOCS) if "Gatrocraptic" in d.text]
    without = [i for i in range(len(DOCS)) if i not in with_term]
    assert tok.docs_occurring == 2
    assert tok.mean_weight_occurring == pytest.approx(D[with_term, tid].mean(), abs=1e-6)
    assert tok.mean_weight_not_occurring == pytest.approx(D[without, tid].mean(), abs=1e-6)
    assert tok.activated_without_occurrence == int((D[without, tid] > 0).sum())
    assert {t.token_id for t in c.domain.tokens} == set(domain) and c.domain.source == "model"


def test_inspect_with_feedback_measures_the_hand_expanded_queries(extended):
    from sparse_adapt.retrieval.feedback import Feedback

    fb = Feedback(docs=2, weight=0.5, terms=5)
    c = inspect_corpus(extended, DOCS, QUERIES, feedback=fb)
    assert inspect_corpus(extended, DOCS, QUERIES).feedback is None
    D = extended.encode([d.text for d in DOCS]).toarray()  # (4, V)
    Q = extended.encode([q.text for q in QUERIES], "query").toarray()  # (3, V)
    fed = []
    for q in Q:  # by hand: q + 0.5 x the mean of its 2 best documents (score > 0), cut to 5 terms
        best = [i for i in np.argsort(-(D @ q), kind="stable")[:2] if D[i] @ q > 0]
        centroid = D[best].mean(0) if best else np.zeros_like(q)
        cut = np.zeros_like(centroid)
        top = np.lexsort((np.arange(len(centroid)), -centroid))[:5]
        cut[top] = centroid[top]
        fed.append(q + 0.5 * cut)
    fed = np.array(fed)
    nnz = (fed > 0).sum(1)
    assert (c.feedback.docs, c.feedback.weight, c.feedback.terms) == (2, 0.5, 5)
    assert c.feedback.queries.nonzero.mean == pytest.approx(nnz.mean()) and c.feedback.queries.count == 3
    assert nnz.mean() > (Q > 0).sum(1).mean()  # feedback added tokens, so the numbers below differ
    assert c.feedback.flops == pytest.approx(float((fed > 0).mean(0) @ (D > 0).mean(0)), rel=1e-6)
    assert c.feedback.flops > c.flops.value
    validate(_roundtrip(c))
    for none in (None, []):
        with pytest.raises(ConfigError, match="give queries"):
            inspect_corpus(extended, DOCS, none, feedback=fb)


def test_inspect_names_documents_no_query_can_retrieve(extended):
    """A document encoding to no term is in no index and scores 0 for every query: `export`
    said so, `inspect` showed only "min 0"."""
    D = extended.encode([d.text for d in DOCS]).tolil()
    before = inspect_corpus(extended, DOCS, QUERIES, document_vectors=D.tocsr()).warnings
    assert not any("no active term" in w for w in before)
    D[1, :] = 0
    [said] = [w for w in inspect_corpus(extended, DOCS, QUERIES, document_vectors=D.tocsr()).warnings if "no active" in w]
    assert said.startswith(f"1 of {len(DOCS)} documents has no active term (e.g. {DOCS[1].doc_id})")


def test_inspect_takes_document_vectors_the_caller_already_has(extended):
    D = extended.encode([d.text for d in DOCS])
    assert inspect_corpus(extended, DOCS, QUERIES, document_vectors=D) == inspect_corpus(extended, DOCS, QUERIES)
    # the given vectors are what is measured, not a fresh encoding: vectors cut to 2 terms show 2
    from sparse_adapt.modeling.vectors import keep_top

    assert (D > 0).sum(1).max() > 2
    assert inspect_corpus(extended, DOCS, QUERIES, document_vectors=keep_top(D, 2)).documents.nonzero.max == 2
    other = extended.encode([d.text for d in DOCS[:2]])
    with pytest.raises(ValueError, match="document_vectors have shape"):
        inspect_corpus(extended, DOCS, QUERIES, document_vectors=other)


def test_inspect_without_queries_or_domain_tokens(sparse):
    tiny_bert = sparse
    c = inspect_corpus(tiny_bert, DOCS)
    assert c.queries is None and c.flops is None and c.domain.count == 0
    assert any("no queries" in w for w in c.warnings) and any("no domain tokens" in w for w in c.warnings)
    # single-token terms of a terms file count as domain tokens for an unextended model
    c = inspect_corpus(tiny_bert, DOCS, terms=TERMS)
    assert [t.token for t in c.domain.tokens] == ["api"] and c.domain.source == "terms"


def test_inspect_counts_no_stored_zero_and_names_up_to_three_documents_no_query_can_retrieve(extended):
    """Weights set to 0 in place stay stored in a csr matrix: they are no active token, and
    a document left one term is still retrievable."""
    D = extended.encode([d.text for d in DOCS])
    one = D.copy()
    one.data[one.indptr[0]:one.indptr[1] - 1] = 0  # d1: one weight left, the rest stored zeros
    c = inspect_corpus(extended, DOCS, QUERIES, document_vectors=one)
    assert c.documents.nonzero.min == 1
    assert not any("no active term" in w for w in c.warnings)
    gone = D.copy()
    gone.data[gone.indptr[1]:] = 0  # d2, d3 and d4 emptied
    [said] = [w for w in inspect_corpus(extended, DOCS, QUERIES, document_vectors=gone).warnings if "no active" in w]
    assert said.startswith("3 of 4 documents have no active term (e.g. d2, d3, d4): no query can retrieve them")


def test_inspect_encodes_queries_in_the_query_window(extended):
    long = Query("q9", " ".join(["Gatrocraptic analysis tools for monitoring corporate expenses"] * 4))
    c = inspect_corpus(extended, DOCS, [long])
    as_query = int((extended.encode([long.text], "query") > 0).sum())
    assert as_query != int((extended.encode([long.text], "document") > 0).sum())  # 16 tokens, not 48
    assert c.queries.nonzero.max == as_query


def test_flops_without_domain_tokens_leave_out_a_domain_token_every_text_activates(extended):
    api = extended.tokenizer.convert_tokens_to_ids("api")
    _boost(extended, api, 15.0)
    c = inspect_corpus(extended, DOCS, QUERIES)
    D = extended.encode([d.text for d in DOCS]).toarray()
    Q = extended.encode([q.text for q in QUERIES], "query").toarray()
    assert (D[:, api] > 0).all() and (Q[:, api] > 0).all()
    domain = extended.settings.domain_token_ids
    # api alone is shared by every pair: 1 x 1 of the estimate is the domain's
    assert c.flops.value - c.flops.value_excluding_domain == pytest.approx(
        float((Q > 0).mean(0)[domain] @ (D > 0).mean(0)[domain]), rel=1e-6)
    assert c.flops.value - c.flops.value_excluding_domain >= 1 - 1e-9  # float sums: 6.1666 - 5.1666 < 1 by an ulp
    assert float(Q.mean(0) @ D.mean(0)) - c.flops.regularizer == pytest.approx(
        float(Q.mean(0)[domain] @ D.mean(0)[domain]), rel=1e-5)


def test_inspect_lists_domain_tokens_by_id_and_leaves_the_weight_of_a_token_in_no_document_unknown(extended):
    oauth = extended.tokenizer.convert_tokens_to_ids("oauth2")
    c = inspect_corpus(extended, DOCS, QUERIES, terms={"words": ["settings", "password", "tools", "reset", "page"]})
    ids = [t.token_id for t in c.domain.tokens]
    assert ids == sorted(ids) and len(ids) == 8
    [row] = [t for t in c.domain.tokens if t.token_id == oauth]
    assert (row.docs_occurring, row.mean_weight_occurring) == (0, None)  # no document names OAuth2: not 0.0
    with pytest.raises(ConfigError, match="no documents to inspect"):
        inspect_corpus(extended, [], QUERIES)


def test_inspect_of_an_empty_query_list_is_inspect_without_queries_and_only_then_warns_of_them(sparse):
    c = inspect_corpus(sparse, DOCS, [])
    assert c.queries is None and c.flops is None
    assert any("no queries" in w for w in c.warnings)
    assert c.domain.source == "none"  # no registered domain token and no terms: the source is named, not ""
    c = inspect_corpus(sparse, DOCS, QUERIES)
    assert c.queries.count == 3 and not any("no queries" in w for w in c.warnings)


def test_a_domain_token_in_one_document_has_that_documents_weight(extended):
    api = extended.tokenizer.convert_tokens_to_ids("api")
    _boost(extended, api, 15.0)  # so its weight is no 0 that None could hide behind
    D = extended.encode([d.text for d in DOCS]).toarray()
    [row] = [t for t in inspect_corpus(extended, DOCS).domain.tokens if t.token_id == api]
    assert row.docs_occurring == 1  # d1 names the API
    assert row.mean_weight_occurring == pytest.approx(D[0, api], abs=1e-6) and D[0, api] > 0


def test_inspect_refuses_document_vectors_of_another_vocabulary_size(extended):
    D = extended.encode([d.text for d in DOCS])
    wider = sp.hstack([D, sp.csr_matrix((len(DOCS), 2))]).tocsr()  # right rows, 2 columns too many
    with pytest.raises(ValueError, match="document_vectors have shape"):
        inspect_corpus(extended, DOCS, QUERIES, document_vectors=wider)


def test_flops_without_domain_tokens_leave_out_a_single_token_term_of_an_unextended_model(sparse):
    api = sparse.tokenizer.convert_tokens_to_ids("api")
    _boost(sparse, api, 15.0)
    c = inspect_corpus(sparse, DOCS, QUERIES, terms=TERMS)
    assert [t.token_id for t in c.domain.tokens] == [api] and c.domain.source == "terms"
    D = sparse.encode([d.text for d in DOCS]).toarray()
    Q = sparse.encode([q.text for q in QUERIES], "query").toarray()
    assert (D[:, api] > 0).all() and (Q[:, api] > 0).all()
    # api, a term of the terms file, is shared by every pair: 1 of the estimate is the domain's
    assert c.flops.value - c.flops.value_excluding_domain == pytest.approx(1.0, abs=1e-6)
    assert float(Q.mean(0) @ D.mean(0)) - c.flops.regularizer == pytest.approx(
        float(Q[:, api].mean() * D[:, api].mean()), rel=1e-5)


def test_a_domain_token_past_the_query_window_still_occurs_in_a_document(extended):
    """Occurrence is read in the document window: a short query window must not hide a term."""
    tid = extended.tokenizer.convert_tokens_to_ids("gatrocraptic")
    extended.settings.query_max_length = 8
    doc = Document("d9", "Configure the API gateway timeout and retry settings for the Gatrocraptic budget.")
    [row] = [t for t in inspect_corpus(extended, [doc]).domain.tokens if t.token_id == tid]
    assert (row.docs_occurring, row.docs_not_occurring) == (1, 0)


def test_inspect_shows_the_document_encoding_to_the_progress_hooks(extended):
    from sparse_adapt.progress import Hooks

    tasks = []

    class Task:
        def advance(self, steps=1, description=None):
            tasks[-1][2] += steps

    def task(description, total):
        tasks.append([description, total, 0])
        return Task()

    inspect_corpus(extended, DOCS, QUERIES, progress=Hooks(task=task))
    assert tasks and tasks[0][2] > 0  # the documents' encoding advanced a task


def test_queries_that_activate_nothing_are_counted_and_cost_no_flops(extended):
    D = extended.encode([d.text for d in DOCS])
    _boost(extended, slice(None), -100.0)  # every logit negative: every query vector empty
    c = inspect_corpus(extended, DOCS, QUERIES, document_vectors=D)
    assert (c.queries.count, c.queries.nonzero.max, c.queries.sparsity_mean) == (3, 0, 100.0)
    assert c.flops.value == 0.0


# ---------------------------------------------------------------------------- JSON schemas
def test_json_outputs_follow_the_documented_schemas(extended):
    outputs = [
        diagnose_term(extended, "Gatrocraptic", DOCS, terms=TERMS, queries=QUERIES),
        diagnose_term(extended, "OAuth2", DOCS),  # probe, no queries, no terms file
        explain_query(extended, "gatrocraptic tools", DOCS, k=2),
        inspect_corpus(extended, DOCS, QUERIES),
        inspect_corpus(extended, DOCS),
    ]
    for out in outputs:
        validate(_roundtrip(out))
    broken = _roundtrip(outputs[0])
    del broken["targets"][0]["weight"]["matches"]
    with pytest.raises(SchemaError, match=r"\$\.targets\[0\]\.weight: keys differ"):
        validate(broken)
    broken = _roundtrip(outputs[2])
    broken["results"][0]["score"] = True
    with pytest.raises(SchemaError, match="score"):
        validate(broken)


def test_the_schema_check_reaches_every_list_item_and_refuses_a_wrong_container_or_a_fractional_count(extended):
    from copy import deepcopy

    from sparse_adapt.retrieval.feedback import Feedback

    out = _roundtrip(inspect_corpus(extended, DOCS, QUERIES, feedback=Feedback()))
    validate(out)
    assert len(out["domain"]["tokens"]) == 3
    for change, where in (
        (lambda o: o["domain"]["tokens"][2].update(docs_occurring=1.5),
         r"\$\.domain\.tokens\[2\]\.docs_occurring: expected int"),
        (lambda o: o.update(warnings={"w": 1}), r"\$\.warnings: expected a list, got dict"),
        (lambda o: o.update(documents=None), r"\$\.documents: expected an object, got NoneType"),
        (lambda o: o["documents"]["nonzero"].update(min=1.5), r"\$\.documents\.nonzero\.min: expected int"),
        (lambda o: o["feedback"]["queries"].pop("nonzero"),
         r"\$\.feedback\.queries: keys differ: missing \['nonzero'\]"),
    ):
        broken = deepcopy(out)
        change(broken)
        with pytest.raises(SchemaError, match=where):
            validate(broken)


def test_long_document_is_analysed_as_the_model_truncates_it(extended):
    long_doc = Document("long", "Gatrocraptic " + "budget allocation " * 40)  # > 48 tokens (tiny doc window)
    r = diagnose_term(extended, "Gatrocraptic", [long_doc])
    assert r.document.num_tokens == extended.settings.doc_max_length == len(r.targets[0].logits.positions)
    assert any("the model sees (and this analyses) the first 48" in w for w in r.warnings)
    assert r.targets[0].weight.matches


def test_the_dictionary_finding_says_which_check_failed():
    from diagnostics.recommend import Sources, recommend
    from diagnostics.sections.checks import WARN, Check

    sources = Sources("m", "docs.jsonl", "terms.json")
    weak = Check("high_weight", WARN, "> 2", "0.1610")
    (alone,) = recommend("Gatrocraptic", [weak], sources)  # rank 1 of its document, weight under 2
    assert "its weight stays at or below 2 (weight 0.1610)" in alone.finding and "outranked" not in alone.finding
    (both,) = recommend("Gatrocraptic", [weak, Check("top_rank", WARN, "1", "4 of 26")], sources)
    assert "outranked by its document's generic tokens (weight 0.1610; rank 4 of 26)" in both.finding


@pytest.mark.parametrize("call, message", [
    (lambda: diagnose_term(None, "x", DOCS, terms="domain_terms.json"),
     r"terms must be a dict \{category: \[term, \.\.\.\]\} as load_domain_terms\(path\) returns, got str"),
    (lambda: diagnose_term(None, "x", DOCS, queries="queries.jsonl"),
     r"queries\[0\] must be a sparse_adapt\.data\.Query \(\.qid and \.text\), got str"),
    (lambda: inspect_corpus(None, DOCS, None, "domain_terms.json"), "terms must be a dict"),
    (lambda: inspect_corpus(None, [d.text for d in DOCS]), r"documents\[0\] must be a sparse_adapt\.data\.Document"),
    (lambda: explain_query(None, Query("q1", "reset password"), DOCS), r"query must be a string .* got Query"),
    (lambda: explain_query(None, "reset password", DOCS, doc_ids="d1"),
     "doc_ids must be a list of ids, got the string"),
])
def test_diagnostics_from_python_name_a_wrong_argument_before_any_encoding(call, message):
    """A path for the terms dict, a queries file's name, texts for Documents, a Query for the
    query's text: each failed deep inside with an AttributeError (doc_ids="d1" looked up "d"),
    after encoding. None stands for the model: nothing reaches it."""
    with pytest.raises(TypeError, match=message):
        call()


def test_inspect_refuses_repeated_document_ids():
    with pytest.raises(ConfigError, match="the documents repeat the id 'a'; each needs its own"):
        inspect_corpus(None, [Document("a", "x"), Document("a", "y")])


def test_explain_refuses_repeated_ids_and_says_when_k_exceeds_the_corpus(sparse):
    from sparse_adapt.errors import ConfigError

    same = [Document("a", "Reset your password now."), Document("a", "Plants need water.")]
    with pytest.raises(ConfigError, match="repeat the id 'a'"):
        explain_query(sparse, "reset password", same, k=2)
    e = explain_query(sparse, "reset password", DOCS, k=len(DOCS) + 5)
    assert len(e.results) == len(DOCS)
    assert f"--k {len(DOCS) + 5} asks for more documents than the {len(DOCS)} there are: all are shown" in e.warnings


def test_recommendations_follow_the_checks_reasons_not_their_text(sparse):
    # the term's own pieces are in the single_token check's text: "never in a vector" there
    # was read as a tokenizer that does not know the term's characters
    r = diagnose_term(sparse, "never in a vector", DOCS)
    single = next(c for c in r.checks if c.name == "single_token")
    assert "never in a vector" in single.actual and single.reason is None
    extend = next(rec for rec in r.recommendations if rec.id == "extend")
    assert "is not one token: the model splits it" in extend.finding and "does not know" not in extend.finding
    unknown = diagnose_term(sparse, "\u2603\u2604", DOCS)  # characters this vocabulary has no piece for: [UNK]
    assert next(c for c in unknown.checks if c.name == "single_token").reason == "special_token"
    assert "holds characters the tokenizer does not know" in next(
        rec.finding for rec in unknown.recommendations if rec.id == "extend")


def test_a_split_term_of_an_adapt_runs_model_is_remedied_by_editing_its_terms_and_rerunning_adapt():
    from diagnostics.recommend import recommend
    from diagnostics.sections.checks import FAIL, Check

    split = [Check("single_token", FAIL, "1 token", "2 pieces: quo, ##vane")]
    plain = recommend("Quovane", split, Sources(model="m", terms="terms.json"))
    assert [r.commands[0].split(" --")[0] for r in plain] == ["sparse-adapt train"]
    # no dictionary or training lists to name: adapt makes them from the corpus
    assert plain[0].action.endswith("; with a corpus alone, `sparse-adapt adapt --base m --corpus DOCS.jsonl --terms "
                                    "terms.json --out OUT_DIR` makes the dictionary and training data and runs them")
    [owned] = recommend("Quovane", split, Sources(model="m", terms="t.json", dictionary="d.jsonl", train="x.jsonl"))
    assert "adapt" not in owned.action
    # adapt has no --reference
    [checkpoint] = recommend("Quovane", split, Sources(model="runs/a/final", reference="base"))
    assert "adapt" not in checkpoint.action
    [rec] = recommend("Quovane", split, Sources(model="runs/mine/final", terms="runs/mine/domain_terms.json",
                                                 adapt_run="runs/mine"))
    assert rec.id == "extend" and rec.commands == []
    assert rec.action == ("add 'Quovane' to a category of runs/mine/domain_terms.json and rerun the `sparse-adapt "
                          "adapt` command that made runs/mine: it makes the dictionary and training data again from "
                          "the edited terms and retrains (pass --overwrite when it asks)")

    # a term neither in the run's terms nor one token: one recommendation with both findings, not the same action twice
    missing = [Check("in_terms_file", FAIL, "listed", "not found"), *split]
    [rec] = recommend("Quovane", missing, Sources(model="runs/mine/final", terms="runs/mine/domain_terms.json",
                                                  adapt_run="runs/mine"))
    assert rec.id == "add_to_terms" and rec.action.startswith("add 'Quovane' to a category of runs/mine/domain_terms.json")
    assert rec.finding == "'Quovane' is not in the terms file; 'Quovane' is not one token: the model splits it (2 pieces: quo, ##vane)"
    assert len(recommend("Quovane", missing, Sources(model="m", terms="terms.json"))) == 2  # two remedies without a run


def test_a_piece_of_a_domain_term_s_old_split_is_labelled_not_called_an_expansion(extended):
    """fz10's '##rella' beside 'krellamine' read as a learnt expansion: it is the old spelling's weight."""
    import numpy as np

    from diagnostics.explain import _weighted
    from diagnostics.tokens import domain_pieces
    from diagnostics.tokens import base_pieces

    tok = extended.tokenizer
    term = tok.convert_tokens_to_ids("gatrocraptic")
    split = tok.convert_tokens_to_ids(base_pieces(extended, "gatrocraptic"))
    assert len(split) > 1 and domain_pieces(extended)[term] == {i: "gatrocraptic" for i in split}
    vocab, other = extended.id_to_token(), tok.convert_tokens_to_ids("budget")
    ids, weights = np.array([split[0], other]), np.array([2.0, 1.0])
    shown = _weighted(ids, weights, vocab, {term}, domain_pieces(extended))  # the text holds the term
    assert [(t.piece_of, t.in_text) for t in shown] == [("gatrocraptic", False), (None, False)]
    assert [t.piece_of for t in _weighted(ids, weights, vocab, {other}, domain_pieces(extended))] == [None, None]
    assert _weighted(ids, weights, vocab, {term, split[0]}, domain_pieces(extended))[0].piece_of is None  # in the text


def test_a_domain_token_the_term_activates_nearly_as_strongly_is_a_warning(extended):
    """QV-420 searched alone activated qv-310 at 98% of its own weight: exact-code lookup found both alike."""
    from diagnostics.term import RIVAL_SHARE

    tid = extended.tokenizer.convert_tokens_to_ids("gatrocraptic")
    rival = next(t for t in extended.settings.domain_token_ids if t != tid)
    name = extended.id_to_token()[rival]
    _boost(extended, tid, 15.0)  # fires wherever it can: in its own query, far above everything else
    quiet = diagnose_term(extended, "Gatrocraptic", DOCS, terms=TERMS)
    assert not any("activates the domain token" in w for w in quiet.warnings)
    _boost(extended, rival, 15.0)  # the other domain token fires as strongly in every text
    q = extended.encode(["Gatrocraptic"], "query")
    assert q[0, rival] >= RIVAL_SHARE * q[0, tid]
    loud = diagnose_term(extended, "Gatrocraptic", DOCS, terms=TERMS)
    [line] = [w for w in loud.warnings if "activates the domain token" in w]
    assert line.startswith(f"the query 'Gatrocraptic' activates the domain token '{name}' at ")


def test_pieces_of_a_byte_level_bpe_term_leave_out_markers_unknowns_and_existing_tokens():
    """On RoBERTa a term already one token had mapped '<unk>' to pieces, and a bare 'Ġ' was a piece."""
    from diagnostics.tokens import domain_pieces
    from tests.conftest import make_tiny_roberta

    splade = make_tiny_roberta()
    extend_vocabulary(splade, {"jargon": ["Gatrocraptic", "the"]})
    pieces = domain_pieces(splade)
    tok = splade.tokenizer
    special = set(tok.all_special_ids)
    assert list(pieces) == [tok.convert_tokens_to_ids(t) for t in splade.settings.domain_terms if t != "the"]
    for token, split in pieces.items():
        assert token not in special and split and not special & split.keys()
        assert all(tok.convert_ids_to_tokens(i).strip("Ġ▁") for i in split)


def test_diagnose_ranking_and_explain_counts_label_pieces_not_expansions(extended):
    """The ranking table called a piece of the term's old split an 'expansion', and explain
    counted it among the expansions: both now read it as the old spelling's kept weight."""
    from diagnostics.tokens import base_pieces

    tok = extended.tokenizer
    split = tok.convert_tokens_to_ids(base_pieces(extended, "gatrocraptic"))
    _boost(extended, split[0], 15.0)  # the old spelling's first piece fires wherever it can
    d = diagnose_term(extended, "Gatrocraptic", DOCS, terms=TERMS)
    [row] = [t for t in d.targets[0].ranking.top if t.token_id == split[0]]
    assert not row.in_text and not row.target and row.piece_of == "gatrocraptic"
    assert all(t.piece_of is None for t in d.targets[0].ranking.top if t.token_id not in split)
    validate(d.to_dict())

    e = explain_query(extended, "what is Gatrocraptic", DOCS, k=1)
    kinds = [(t.in_text, t.piece_of) for t in e.query.tokens]
    assert (False, "gatrocraptic") in kinds
    assert e.query.piece_count == sum(1 for _, p in kinds if p is not None) >= 1
    assert e.query.expansion_count == sum(1 for i, p in kinds if not i and p is None)
    assert e.query.piece_count + e.query.expansion_count == sum(1 for i, _ in kinds if not i)
    validate(e.to_dict())


# ---------------------------------------------------------------------------- verdicts from hand-built sections
def _graded(weight, rank, column=(0.2, 3.0, -1.0, 0.5), occ=(1,), qe=None):
    """The checks of a one-token term ``zorblatt`` (id 7) whose sections 2-4 are given by hand."""
    from diagnostics.sections.checks import checks
    from diagnostics.sections.document import DocumentChoice
    from diagnostics.sections.logits import logit_analysis
    from diagnostics.sections.ranking import Ranking
    from diagnostics.sections.target import TargetDiagnosis
    from diagnostics.sections.vocabulary import VocabularyCheck
    from diagnostics.sections.weight import WeightCheck

    vocab = VocabularyCheck("zorblatt", "zorblatt", [7], ["zorblatt"], ["zorblatt"], True, True, None, True, True,
                            None, False, [], None)
    doc = DocumentChoice("first", "d1", "zorblatt valve", 4, [[1, 2]], 1, ["d1"], [])
    lg = logit_analysis(np.array(column), ["[CLS]", "zorblatt", "valve", "[SEP]"], list(occ))
    w = WeightCheck(lg.max_logit, lg.max_position, 0.0, 0.0, False, weight, weight, 0.0, 1e-4, True)
    target = TargetDiagnosis(7, "zorblatt", lg, w, Ranking(weight, rank, 20, []), qe)
    return {c.name: c for c in checks(vocab, doc, [target], terms_given=False)}


def test_checks_grade_rank_10_a_warning_rank_11_a_failure_and_a_weight_of_exactly_2_not_high():
    """The spec's criteria: weight > 2.0 (high), rank 1 (pass), top 10 (warn), below that fail."""
    assert (_graded(2.0, 1)["high_weight"].status, _graded(2.0001, 1)["high_weight"].status) == ("warn", "pass")
    assert [_graded(3.0, r)["top_rank"].status for r in (1, 2, 10, 11)] == ["pass", "warn", "warn", "fail"]
    assert _graded(3.0, 11)["top_rank"].actual == "11 of 20"
    # one target: no check is labelled with a piece (the per-piece table is for split terms)
    assert all(c.target is None for c in _graded(3.0, 1).values())


def test_checks_fail_a_term_with_one_negative_occurrence_and_grade_no_weight_where_it_does_not_occur():
    mixed = _graded(3.0, 1, column=(0.2, 3.0, -1.0, 0.5), occ=(1, 2))  # logits 3.0 and -1.0 where it occurs
    assert (mixed["positive_logits"].status, mixed["positive_logits"].actual) == ("fail", "3.00, -1.00")
    absent = _graded(3.0, 1, occ=())  # weight there is expansion: no high-weight or rank verdict
    assert absent["nonzero_weight"].status == "n/a" and "expansion" in absent["nonzero_weight"].actual
    assert "high_weight" not in absent and "top_rank" not in absent


def test_query_expansion_check_is_na_when_every_query_names_the_term_and_fails_when_none_expands():
    from diagnostics.sections.expansion import QueryExpansion

    every = _graded(3.0, 1, qe=QueryExpansion(queries=2, without_term=0, expanding=[], with_term=2, with_term_active=2))
    assert (every["query_expansion"].status, every["query_expansion"].actual) == ("n/a", "every query has it")
    none = _graded(3.0, 1, qe=QueryExpansion(queries=3, without_term=2, expanding=[], with_term=1, with_term_active=1))
    assert (none["query_expansion"].status, none["query_expansion"].actual) == ("fail", "0 of 2 queries")


def test_logit_analysis_and_weight_check_by_hand():
    """Occurrence logits 1.5 and -0.5 are mixed; the max over all positions is [SEP]'s 4.0 at
    position 3 (SPLADE pools every position), so w = log(1 + 4); an encode() 0.01 below is a mismatch."""
    from types import SimpleNamespace

    from diagnostics.sections.logits import logit_analysis
    from diagnostics.sections.weight import weight_check

    lg = logit_analysis(np.array([0.2, 1.5, -0.5, 4.0]), ["[CLS]", "a", "b", "[SEP]"], [2, 1])
    assert (lg.verdict, lg.occurrences, lg.max_logit, lg.max_position, lg.min_logit) == ("mixed", [1, 2], 4.0, 3, -0.5)
    assert (lg.occurrence_min, lg.occurrence_max, lg.occurrence_mean) == (-0.5, 1.5, 0.5)
    assert [p.occurrence for p in lg.positions] == [False, True, True, False]
    assert logit_analysis(np.array([0.2, 1.5, 0.5, -4.0]), ["[CLS]", "a", "b", "[SEP]"], [1, 2]).verdict == "positive"
    assert logit_analysis(np.array([0.2, -1.5, -0.5, 4.0]), ["[CLS]", "a", "b", "[SEP]"], [1, 2]).verdict == "negative"
    # a logit of exactly 0 gives the occurrence no weight: not positive; [CLS] can hold the minimum
    zero = logit_analysis(np.array([-3.0, 1.5, 0.0, 4.0]), ["[CLS]", "a", "b", "[SEP]"], [1, 2])
    assert (zero.verdict, zero.min_logit) == ("mixed", -3.0)
    model = SimpleNamespace(output_mask=torch.ones(10))
    w = weight_check(model, 5, lg, actual=math.log1p(4.0) - 0.01)
    assert (w.max_logit, w.max_position, w.after_relu) == (4.0, 3, 4.0)
    assert w.expected == pytest.approx(math.log1p(4.0)) and w.abs_diff == pytest.approx(0.01) and not w.matches
    assert weight_check(model, 5, lg, actual=math.log1p(4.0) + 5e-5).matches
    assert not weight_check(model, 5, lg, actual=math.log1p(4.0) + 1.5e-4).matches  # just past the tolerance
    model.output_mask[5] = 0  # a special token: the output mask zeroes it whatever the logit
    w = weight_check(model, 5, lg, actual=0.0)
    assert w.special_token and w.expected == 0.0 and w.after_log1p == pytest.approx(math.log1p(4.0)) and w.matches


def test_ranking_numbers_the_top_tokens_from_1_and_reads_the_diagnosed_tokens_own_weight():
    from diagnostics.sections.ranking import ranking

    vocab = [f"t{i}" for i in range(10)]
    r = ranking(3, np.array([7, 3, 9]), np.array([3.0, 2.0, 1.0]), vocab, {7}, {9: "zorblatt"})
    assert (r.rank, r.weight, r.nonzero) == (2, 2.0, 3)
    assert [(t.rank, t.token, t.in_text, t.target, t.piece_of) for t in r.top] == [
        (1, "t7", True, False, None), (2, "t3", False, True, None), (3, "t9", False, False, "zorblatt")]
    absent = ranking(5, np.array([7, 3, 9]), np.array([3.0, 2.0, 1.0]), vocab, {7}, {})
    assert (absent.rank, absent.weight) == (None, 0.0) and not any(t.target for t in absent.top)


def test_recommendations_follow_the_pipeline_order_whatever_order_the_checks_fail_in():
    from diagnostics.recommend import ORDER, recommend
    from diagnostics.sections.checks import FAIL, WARN, Check

    failed = [Check("query_expansion", FAIL, ">= 1 query w/o term", "0 of 2 queries"),
              Check("high_weight", WARN, "> 2", "0.5000"),
              Check("positive_logits", FAIL, "> 0 where it occurs", "-1.00"),
              Check("in_documents", WARN, ">= 1 document", "0 of 3"),
              Check("domain_token", FAIL, "registered domain token", "no (model not extended with this term)"),
              Check("in_terms_file", FAIL, "listed", "absent"),
              Check("weight_matches_encoding", FAIL, "manual = encode() ± 0.0001", "0.5000 vs 1.0000")]
    recs = recommend("Zorblatt", failed, Sources("m"))
    assert [r.id for r in recs] == ORDER == ["pooling_mismatch", "documents", "add_to_terms", "extend", "warmup",
                                             "dictionary", "query_expansion"]


def test_a_split_term_gets_no_separate_query_expansion_advice_and_a_likely_typo_is_said_before_missing_documents():
    from diagnostics.recommend import recommend
    from diagnostics.sections.checks import FAIL, WARN, Check

    split = [Check("single_token", FAIL, "one token", "2 pieces: quo ##vane"),
             Check("query_expansion", FAIL, ">= 1 query w/o term", "0 of 2 queries", target="quo")]
    assert [r.id for r in recommend("Quovane", split, Sources("m"))] == ["extend"]  # its command runs distill too
    [rec] = recommend("krellamin", [Check("in_documents", WARN, ">= 1 document", "0 of 3")],
                      Sources("m", near="krellamine"))
    assert rec.id == "documents" and rec.action.startswith(
        "check the spelling first: this model has the domain term 'krellamine'; if 'krellamin' is another term, pass --docs")


def test_the_train_command_names_a_reference_only_when_it_differs_from_the_model():
    assert "--reference" not in Sources("runs/a/final", reference="runs/a/final").train_command("distill")
    assert Sources("runs/a/final", reference="base").train_command("distill").endswith(
        "--stages distill --reference base")


def test_a_one_token_term_not_yet_a_domain_token_is_advised_the_extend_stage_in_every_command(extended):
    tid = extended.tokenizer.convert_tokens_to_ids("password")
    _boost(extended, tid, -50.0)  # never fires
    r = diagnose_term(extended, "password", DOCS)
    assert r.vocabulary.single_token and not r.vocabulary.domain_token
    warmup = next(rec for rec in r.recommendations if rec.id == "warmup")
    assert "--stages extend,warmup,dictionary,distill" in warmup.commands[0]


def test_the_rival_warning_gives_each_rivals_share_of_the_terms_weight_strongest_first(extended):
    tid = extended.tokenizer.convert_tokens_to_ids("gatrocraptic")
    api, oauth = extended.tokenizer.convert_tokens_to_ids(["api", "oauth2"])
    _boost(extended, tid, 15.0)
    _boost(extended, api, 14.0)
    _boost(extended, oauth, 15.5)
    q = extended.encode(["Gatrocraptic"], "query").toarray()[0]
    assert q[oauth] != q[api] and min(q[oauth], q[api]) >= 0.8 * q[tid]
    r = diagnose_term(extended, "Gatrocraptic", DOCS, terms=TERMS)
    lines = [w for w in r.warnings if "activates the domain token" in w]
    want = sorted([(q[oauth], "oauth2"), (q[api], "api")], reverse=True)
    assert [line.split(" at ")[0] for line in lines] == [
        f"the query 'Gatrocraptic' activates the domain token '{name}'" for _, name in want]
    assert [line.split(" at ")[1].split(" of its")[0] for line in lines] == [f"{w / q[tid]:.0%}" for w, _ in want]


def test_a_document_within_the_window_gets_no_length_warning_and_a_doc_without_the_term_is_said_so(extended):
    r = diagnose_term(extended, "Gatrocraptic", DOCS, terms=TERMS)
    assert r.document.num_tokens == len(extended.tokenizer(DOCS[1].text)["input_ids"])
    assert r.warnings == []
    chosen = diagnose_term(extended, "Gatrocraptic", DOCS, doc_id="d4")
    assert chosen.warnings == [f"document d4 does not contain 'Gatrocraptic' within the model's first "
                               f"{chosen.document.num_tokens} tokens: no occurrences to mark"]


def test_a_term_matches_in_any_case_on_an_uncased_model_and_never_as_the_end_of_a_longer_word(sparse):
    assert diagnose_term(sparse, "gatrocraptic", DOCS).document.docs_containing == ["d2", "d3"]
    assert diagnose_term(sparse, "api", DOCS).document.docs_containing == ["d1"]
    assert diagnose_term(sparse, "craptic", DOCS).document.docs_containing == []  # the end of "Gatrocraptic"
    # the span is the term's own pieces, not the brackets touching it: [CLS] budgets ( ga ##tro ##cr ##ap ##tic ) . [SEP]
    r = diagnose_term(sparse, "Gatrocraptic", [Document("p", "Budgets (Gatrocraptic).")])
    assert r.document.term_spans == [[3, 8]] and r.document.num_tokens == 11


def test_bpe_analyses_the_first_document_holding_the_terms_running_text_pieces_in_any_occurrence():
    """A document using the term both at its start (`sp end ing`) and mid-text (`Ġspending`) holds the pieces."""
    from tests.conftest import make_tiny_roberta

    docs = [Document("a1", "spending rose in the third quarter."),
            Document("a2", "spending fell, then cuts in spending followed."),
            Document("a3", "Cuts in spending were announced.")]
    r = diagnose_term(make_tiny_roberta(), "spending", docs)
    assert r.document.docs_containing == ["a1", "a2", "a3"] and r.document.doc_id == "a2"
    assert len(r.document.term_spans) == 2 and r.targets[0].logits.verdict != "absent"


# ---------------------------------------------------------------------------- hand-built vectors
def _encode_as(vectors: dict[str, dict[int, float]], V: int):
    """An ``encode`` that returns the given {token id: weight} of each text."""

    def encode(texts, kind="document", *args, **kwargs):
        m = sp.lil_matrix((len(texts), V), dtype=np.float32)
        for i, text in enumerate(texts):
            for t, w in vectors[text].items():
                m[i, t] = w
        return m.tocsr()

    return encode


def test_explain_of_hand_built_vectors_ranks_from_1_sums_every_shared_token_and_breaks_ties_by_token_id(
        sparse, monkeypatch):
    """q = 2.0 on token 1000, 1.0 on 1001, 0.5 on 1002-1011. dB has 1.0 on all 12: score 2 + 1 + 10 x 0.5 = 8
    from 12 shared tokens; dA has 1.0 and 2.0 on 1000 and 1001: two contributions of 2.0, score 4; dC
    shares nothing: score 0, and its 15 tokens (6 of its text) are cut to the top 10."""
    from rich.console import Console

    from diagnostics.render import render_explanation

    tok = sparse.tokenizer
    text_c = "Valves open at set pressure."
    own = tok.convert_tokens_to_ids(tok.tokenize(text_c))  # 6 pieces, weighted 3.0 down to 2.5
    c_vec = {t: 3.0 - 0.1 * i for i, t in enumerate(own)} | {3000 + j: 1.0 - 0.05 * j for j in range(9)}
    docs = [Document("dA", "Plants need water."), Document("dB", "Reset your password."), Document("dC", text_c)]
    vectors = {"reset password": {1000: 2.0, 1001: 1.0, **{t: 0.5 for t in range(1002, 1012)}},
               "Plants need water.": {1000: 1.0, 1001: 2.0},
               "Reset your password.": {t: 1.0 for t in range(1000, 1012)},
               text_c: c_vec}
    monkeypatch.setattr(sparse, "encode", _encode_as(vectors, sparse.vocab_size))
    e = explain_query(sparse, "reset password", docs, k=3)
    assert [(m.doc_id, m.rank, m.score) for m in e.results] == [("dB", 1, 8.0), ("dA", 2, 4.0), ("dC", 3, 0.0)]
    b, a, c = e.results
    assert len(b.shared) == 12 and b.contributions_sum == pytest.approx(8.0)
    assert [(s.token_id, s.query_weight, s.doc_weight, s.contribution) for s in a.shared] == [
        (1000, 2.0, 1.0, 2.0), (1001, 1.0, 2.0, 2.0)]
    assert c.shared == [] and c.nonzero == 15
    top = sorted(c_vec, key=lambda t: -c_vec[t])[:10]
    assert [t.token_id for t in c.top_tokens] == top
    assert [t.weight for t in c.top_tokens] == pytest.approx([c_vec[t] for t in top])  # each token's own weight
    assert [t.in_text for t in c.top_tokens] == [True] * 6 + [False] * 4
    assert (e.query.nonzero, e.query.max_weight, e.k) == (12, 2.0, 3)
    assert e.warnings == ["1 of the 3 documents shown score 0: they share no token with the query"]  # k = 3 docs: no --k note

    chosen = explain_query(sparse, "reset password", docs, doc_ids=["dC", "dA", "dC"])
    assert [(m.doc_id, m.rank) for m in chosen.results] == [("dC", 3), ("dA", 2)] and chosen.k == 2
    with pytest.raises(ConfigError, match="--doc 'dZ': no document with this id among the 3 scored"):
        explain_query(sparse, "reset password", docs, doc_ids=["dA", "dZ"])

    console = Console(record=True, width=200)
    render_explanation(e, console)
    [more] = [line for line in console.export_text().splitlines() if "2 more" in line]
    assert re.search(r"(\d+\.\d{4}) +2 more", more)[1] == "1.0000"  # the 2 past the first 10: 0.5 + 0.5
    out = json.loads(json.dumps(e.to_dict()))
    validate(out)
    out["results"][0]["extra"] = 1
    with pytest.raises(SchemaError, match=r"\$\.results\[0\]: keys differ: missing \[\], extra \['extra'\]"):
        validate(out)
    out = json.loads(json.dumps(e.to_dict()))
    out["query"]["feedback"] = {"docs": 1}
    with pytest.raises(SchemaError, match=r"\$\.query\.feedback: keys differ"):
        validate(out)


def test_query_expansion_of_hand_built_query_vectors(sparse, monkeypatch):
    """Queries without 'password' that activate it, strongest first; those naming it counted apart."""
    from diagnostics.sections.expansion import query_expansion

    pid = sparse.tokenizer.convert_tokens_to_ids("password")
    queries = [Query("q1", "reset my password"), Query("q2", "forgot my login"), Query("q3", "account locked out"),
               Query("q4", "watering plants"), Query("q5", "password rules")]
    weights = {"reset my password": 0.0, "forgot my login": 0.5, "account locked out": 1.5, "watering plants": 0.0,
               "password rules": 2.0}
    monkeypatch.setattr(sparse, "encode", _encode_as(
        {text: ({pid: w} if w else {}) for text, w in weights.items()}, sparse.vocab_size))
    qe = query_expansion(sparse, "password", [pid], queries)[pid]
    assert (qe.queries, qe.without_term, qe.with_term, qe.with_term_active) == (5, 3, 2, 1)
    assert [(x.qid, x.weight) for x in qe.expanding] == [("q3", 1.5), ("q2", 0.5)]
    assert qe.with_term_qids == ["q1", "q5"]


# ---------------------------------------------------------------------------- inspect and render by hand
def test_inspect_pools_domain_weights_over_every_document_token_pair_and_names_the_source(extended):
    api = extended.tokenizer.convert_tokens_to_ids("api")
    _boost(extended, api, 15.0)  # active in every document, d1 (which names the API) included
    c = inspect_corpus(extended, DOCS, QUERIES, terms=TERMS)  # every term is a domain token of the model already
    assert c.domain.source == "model"
    D = extended.encode([d.text for d in DOCS]).toarray()
    [row] = [t for t in c.domain.tokens if t.token_id == api]
    assert (row.docs_occurring, row.docs_not_occurring, row.activated_without_occurrence) == (1, 3, 3)  # not 4
    nnz = (D > 0).sum(1)
    assert c.documents.sparsity_mean == pytest.approx(100 * (1 - nnz.mean() / extended.vocab_size))
    ids = [set(_ids(extended, d.text)[0][0].tolist()) for d in DOCS]
    domain = extended.settings.domain_token_ids
    w_in = [D[i, t] for t in domain for i in range(len(DOCS)) if t in ids[i]]
    w_out = [D[i, t] for t in domain for i in range(len(DOCS)) if t not in ids[i]]
    assert len(w_in) == 3 and len(w_out) == 9  # API in d1, Gatrocraptic in d2 and d3
    assert c.domain.mean_weight_occurring == pytest.approx(np.mean(w_in), abs=1e-7)
    assert c.domain.mean_weight_not_occurring == pytest.approx(np.mean(w_out), abs=1e-7)


def test_the_diagnose_panel_counts_failures_and_warnings_apart_and_the_logit_table_elides_only_real_gaps(extended):
    from dataclasses import replace

    from rich.console import Console

    from diagnostics.render import render_term

    def shown(result) -> str:
        console = Console(record=True, width=200)
        render_term(result, console)
        return console.export_text()

    tid = extended.tokenizer.convert_tokens_to_ids("gatrocraptic")
    _boost(extended, tid, -50.0)
    r = diagnose_term(extended, "Gatrocraptic", DOCS, terms=TERMS, queries=QUERIES)
    failed = sum(c.status == "fail" for c in r.checks)
    assert failed and sum(c.status == "warn" for c in r.checks) != failed
    text = shown(r)
    assert f"✗ {failed} check(s) failed" in text
    assert not re.search(r"… +0 more", text)  # a run of shown positions is no gap
    warned = replace(r, checks=[replace(c, status="warn") if c.status == "fail" else c for c in r.checks])
    assert f"! {failed + sum(c.status == 'warn' for c in r.checks)} warning(s)" in shown(warned)


def _rendered_lines(render, result, width: int) -> list[str]:
    """What ``render`` prints for ``result``, a line each, runs of spaces made one (column padding)."""
    from rich.console import Console

    console = Console(record=True, width=width)
    render(result, console)
    return [" ".join(line.split()) for line in console.export_text().splitlines()]


def test_the_inspect_tables_put_each_number_in_its_column_and_show_a_weight_of_0_as_a_number():
    from diagnostics.render import render_corpus
    from diagnostics.schema import INSPECT_SCHEMA
    from diagnostics.sparsity import (
        CorpusStats, Distribution, DomainStats, DomainToken, FeedbackCost, Flops, TextStats,
    )

    dead = DomainToken("gatro", 30522, 3, 0.0, 2, 0.5, 1)  # in 3 documents, weight 0 in each: a dead token
    unseen = DomainToken("oauth2", 30523, 0, None, 5, 0.125, 4)  # in no document: no weight to show
    c = CorpusStats(
        INSPECT_SCHEMA, "m", 1000,
        documents=TextStats(5, Distribution(12.5, 11.0, 3, 30), 98.75),
        queries=TextStats(2, Distribution(7.0, 6.5, 5, 9), 99.3),
        flops=Flops("sum", 6.0, 4.5, 0.25),
        domain=DomainStats(2, "model", 0.0, 0.0625, [dead, unseen]),
        warnings=["first warning", "second warning"],
        feedback=FeedbackCost(1, 0.5, 32, TextStats(2, Distribution(40.0, 40.0, 38, 42), 96.0), 9.0),
    )
    lines = _rendered_lines(render_corpus, c, 200)
    for line in ("⚠ first warning", "⚠ second warning", "documents 5 12.5 11.0 3 30 98.75%",
                 "queries 2 7.0 6.5 5 9 99.30%",
                 "Estimated FLOPS 6.00 per query-document pair (4.50 without domain tokens)",
                 "gatro 30522 3 0.0000 2 0.5000 1", "oauth2 30523 0 – 5 0.1250 4",
                 "Domain tokens 2 (from model): mean weight where they occur 0.0000, where they don't 0.0625"):
        assert line in lines, line
    assert any(line.endswith("FLOPS 9.00 (1.5x)") for line in lines)  # 9 / 6
    assert "FLOPS = sum" in lines and "FLOPS regulariser (non-domain, mean weights): 0.2500" in lines


def test_a_split_terms_report_names_the_piece_of_each_max_and_marks_every_piece(sparse):
    from diagnostics.render import render_term

    for piece in sparse.tokenizer.convert_tokens_to_ids(GATRO_PIECES):
        _boost(sparse, piece, 10.0)  # every piece active: they head the document's top tokens
    r = diagnose_term(sparse, "Gatrocraptic", DOCS, queries=QUERIES)
    assert [t.token for t in r.targets] == GATRO_PIECES
    lines = _rendered_lines(render_term, r, 250)
    text = "\n".join(lines)
    assert "Single token ✗ no: 5 pieces" in lines  # the unknown-characters note is for one piece only
    for t in r.targets:
        [row] = [line for line in lines if line.split(" ")[0] == str(t.logits.max_position) and "◀" in line
                 and "diagnosed" not in line]
        assert re.search(r"max( \S+)* " + re.escape(t.token) + r"( |$)", row), row
        assert f"'{t.token}' in query vectors:" in text
    top = {tok.token_id: tok.token for tok in r.targets[0].ranking.top}
    pieces_on_top = [t.token for t in r.targets if t.token_id in top]
    assert len(pieces_on_top) > 1  # each piece in the top list is one of the diagnosed, not only the first
    for piece in pieces_on_top:
        assert any(re.search(rf"^\d+ \S+ {re.escape(piece)} ◀ diagnosed token$", line) for line in lines), piece


def test_the_explain_view_elides_only_tokens_past_30_labels_only_new_tokens_feedback_and_cuts_long_texts():
    from diagnostics.explain import (
        AddedToken, DocumentMatch, FeedbackStats, QueryExplanation, QueryStats, WeightedToken,
    )
    from diagnostics.render import render_explanation
    from diagnostics.schema import EXPLAIN_SCHEMA

    def shown(n_tokens: int, text: str) -> list[str]:
        tokens = [WeightedToken(f"tok{i}", 2000 + i, 1.0 - i / 100, in_text=i == 0) for i in range(n_tokens)]
        # tok0 was in the query already, feedback raised it; tok1 is one feedback added
        fb = FeedbackStats(1, 0.5, 2, ["d1"],
                           [AddedToken("tok1", 2001, 0.2, True), AddedToken("tok0", 2000, 0.1, False)])
        q = QueryStats("q", n_tokens, 1.0, 99.0, 30522, n_tokens - 1, 0, tokens, fb)
        match = DocumentMatch(1, "d1", text, 0.0, 0.0, 0, [], [])
        return _rendered_lines(render_explanation, QueryExplanation(EXPLAIN_SCHEMA, "m", 1, 1, q, [match]), 300)

    lines = shown(30, "x" * 200)
    assert "1.0000 tok0 in text" in lines and "0.9900 tok1 feedback" in lines
    assert any("(at most 2 terms kept; 2 tokens raised, 1 of them new)" in line for line in lines)
    assert not any(re.search(r"… \d+ more", line) for line in lines)  # 30 tokens: all shown
    assert "0.7100 tok29 expansion" in lines
    assert any("x" * 200 in line for line in lines) and not any("…" in line for line in lines)
    lines = shown(31, "x" * 201)
    assert "… 1 more" in lines
    assert any("x" * 199 + "…" in line for line in lines) and not any("x" * 200 in line for line in lines)


def test_a_probe_of_a_domain_term_is_not_asked_whether_it_meant_itself(extended):
    """'did you mean' is for a near spelling (in any case), never for the domain term itself."""
    r = diagnose_term(extended, "OAuth2", DOCS, terms=TERMS, sources=Sources("m"))
    assert r.document.source == "probe" and not any("did you mean" in w for w in r.warnings)
    assert not any(rec.action.startswith("check the spelling") for rec in r.recommendations)
    near = {t.lower(): t for t in extended.settings.domain_terms}["oauth2"]
    typo = diagnose_term(extended, "OAUTH3", DOCS, terms=TERMS)
    assert f"did you mean '{near}'? It is a domain term of this model" in typo.warnings


def test_in_text_ids_keep_every_text_past_a_batch_of_64(sparse):
    from diagnostics.tokens import in_text_ids

    words = ["valve", "pressure", "password", "budget", "water", "plants", "account"]
    texts = [f"{words[i % 7]} {words[(i // 7) % 7]} {i}" for i in range(70)]
    assert in_text_ids(sparse, texts, "query") == [in_text_ids(sparse, [t], "query")[0] for t in texts]


def test_a_document_using_the_term_inside_and_past_the_window_is_not_said_to_use_it_only_past_it(sparse):
    sparse.settings.doc_max_length = 16
    both = Document("B1", "Gatrocraptic costs. " + "settings " * 40 + "and Gatrocraptic again.")
    r = diagnose_term(sparse, "Gatrocraptic", [both], terms=TERMS)
    assert r.document.docs_containing == ["B1"] and r.document.docs_beyond_window == []
    assert not any("document window" in w for w in r.warnings)
    assert next(c for c in r.checks if c.name == "in_documents").actual == "1 of 1"


def test_feedback_leaves_a_passing_query_expansion_check_passing():
    from diagnostics.sections.expansion import ExpandingQuery, FeedbackExpansion, QueryExpansion

    hit = [ExpandingQuery("q1", "valve sizes", 0.7)]
    qe = QueryExpansion(queries=3, without_term=2, expanding=hit, with_term=1, with_term_active=1,
                        feedback=FeedbackExpansion(1, 0.5, 32, hit))
    check = _graded(3.0, 1, qe=qe)["query_expansion"]
    assert (check.status, check.actual) == ("pass", "1 of 2 queries (1 with feedback)")


def test_explain_of_chosen_documents_says_nothing_of_k(sparse):
    e = explain_query(sparse, "reset password", DOCS, k=len(DOCS) + 5, doc_ids=["d4"])
    assert [m.doc_id for m in e.results] == ["d4"] and e.k == 1
    assert not any("--k" in w for w in e.warnings)  # k is not used when documents are chosen


def test_a_suggested_path_is_relative_only_when_shorter_and_at_most_one_level_up(tmp_path, monkeypatch):
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    s = Sources("m")
    assert s.path(str(deep / "docs.jsonl"), "") == "docs.jsonl"
    assert s.path(str(tmp_path / "a" / "docs.jsonl"), "") == "../docs.jsonl"
    assert s.path(str(tmp_path / "docs.jsonl"), "") == str(tmp_path / "docs.jsonl")  # not "../../docs.jsonl"
    assert s.path(None, "DOCS.jsonl") == "DOCS.jsonl"


def test_a_domain_token_at_exactly_80_percent_of_the_terms_weight_is_a_rival(extended, monkeypatch):
    from diagnostics.term import rival_warnings

    tid, api, oauth = extended.tokenizer.convert_tokens_to_ids(["gatrocraptic", "api", "oauth2"])
    monkeypatch.setattr(extended, "encode", _encode_as({"Gatrocraptic": {tid: 2.5, api: 2.0, oauth: 1.9}},
                                                       extended.vocab_size))
    [line] = rival_warnings(extended, "Gatrocraptic", tid)  # oauth2 at 76% is no rival
    assert line.startswith("the query 'Gatrocraptic' activates the domain token 'api' at 80% of its own weight")


def test_a_term_that_fires_below_1_in_its_own_query_gets_no_rival_warning(extended, monkeypatch):
    from diagnostics.term import rival_warnings

    tid, api = extended.tokenizer.convert_tokens_to_ids(["gatrocraptic", "api"])
    vectors = {"Gatrocraptic": {tid: 0.9, api: 0.85}, "Quovane": {tid: 1.0, api: 0.95}}
    monkeypatch.setattr(extended, "encode", _encode_as(vectors, extended.vocab_size))
    assert rival_warnings(extended, "Gatrocraptic", tid) == []  # weak: the checks report it, not a rival
    assert len(rival_warnings(extended, "Quovane", tid)) == 1  # 1.0 is enough to look for rivals


def test_a_piece_repeated_in_the_term_is_analysed_once(sparse):
    r = diagnose_term(sparse, "bye bye", DOCS)
    assert r.vocabulary.pieces == ["bye", "bye"] and [t.token for t in r.targets] == ["bye"]
    assert [c.name for c in r.checks].count("nonzero_weight") == 1


def test_the_rival_warnings_name_the_three_strongest_rivals(sparse, monkeypatch):
    from diagnostics.term import rival_warnings

    names = ["Gatrocraptic", "Quovane", "Zorblatt", "Krellamine", "Vexorin"]
    extend_vocabulary(sparse, {"jargon": names})
    ids = sparse.tokenizer.convert_tokens_to_ids([n.lower() for n in names])
    vector = {ids[0]: 2.5, ids[1]: 2.1, ids[2]: 2.4, ids[3]: 2.2, ids[4]: 2.3}  # four rivals above 80%
    monkeypatch.setattr(sparse, "encode", _encode_as({"Gatrocraptic": vector}, sparse.vocab_size))
    lines = rival_warnings(sparse, "Gatrocraptic", ids[0])
    assert [line.split("'")[3] for line in lines] == ["zorblatt", "vexorin", "krellamine"]


def test_a_special_token_the_encoding_weights_fails_the_pooling_check(tiny_bert, monkeypatch):
    """The manual weight of [UNK] is 0 (the output mask); a model whose encoding weights it
    does not pool like SPLADE, special token or not."""
    unk = tiny_bert.tokenizer.unk_token_id
    real = tiny_bert.encode

    def leaky(texts, kind="document", *a, **k):
        m = real(texts, kind, *a, **k).tolil()
        m[:, unk] = 0.5
        return sp.csr_matrix(m)

    monkeypatch.setattr(tiny_bert, "encode", leaky)
    r = diagnose_term(tiny_bert, "\U0001F680", [Document("e2", "the \U0001F680 launch went well")])
    assert r.targets[0].weight.special_token and not r.targets[0].weight.matches
    check = next(c for c in r.checks if c.name == "weight_matches_encoding")
    assert (check.status, check.actual) == ("fail", "0.0000 vs 0.5000")
    assert [rec.id for rec in r.recommendations] == ["pooling_mismatch", "extend"]


def test_feedback_is_advised_only_where_every_expansion_failure_is_a_feedback_warning():
    from diagnostics.recommend import recommend
    from diagnostics.sections.checks import FAIL, WARN, Check

    def qe(status, piece):
        return Check("query_expansion", status, ">= 1 query w/o term", "0 of 2 queries (1 with feedback)", target=piece)

    [warned] = recommend("Zorblatt", [qe(WARN, "zor"), qe(WARN, "##blatt")], Sources("m"))
    assert warned.action.startswith("search with --feedback")
    [mixed] = recommend("Zorblatt", [qe(WARN, "zor"), qe(FAIL, "##blatt")], Sources("m"))
    assert mixed.action.startswith("raise the query-expansion loss weight")  # ##blatt feedback does not rescue


def test_a_split_terms_pooling_finding_names_the_piece_of_each_mismatch():
    from diagnostics.recommend import recommend
    from diagnostics.sections.checks import FAIL, Check

    failed = [Check("single_token", FAIL, "one token", "2 pieces: quo ##vane"),
              Check("weight_matches_encoding", FAIL, "manual = encode() ± 0.0001", "0.5000 vs 1.0000", target="quo"),
              Check("weight_matches_encoding", FAIL, "manual = encode() ± 0.0001", "0.2000 vs 0.0000",
                    target="##vane")]
    pooling = recommend("Quovane", failed, Sources("m"))[0]
    assert pooling.id == "pooling_mismatch"
    assert pooling.finding.endswith("(quo: 0.5000 vs 1.0000; ##vane: 0.2000 vs 0.0000)")


def test_a_likely_typo_is_said_before_adding_or_extending_the_term():
    from diagnostics.recommend import recommend
    from diagnostics.sections.checks import FAIL, Check

    failed = [Check("in_terms_file", FAIL, "listed", "absent"),
              Check("single_token", FAIL, "one token", "2 pieces: quo ##vain")]
    recs = recommend("Quovain", failed, Sources("m", near="quovane"))
    assert [r.id for r in recs] == ["add_to_terms", "extend"]
    for rec in recs:
        assert rec.action.startswith("check the spelling first: this model has the domain term 'quovane'; "
                                     "if 'Quovain' is another term, "), rec.id


def test_a_suggested_command_quotes_a_model_path_with_a_space():
    import shlex

    command = Sources("runs/my model/final", docs="my docs.jsonl").train_command("distill")
    argv = shlex.split(command)  # what a shell passes on
    assert argv[argv.index("--base") + 1] == "runs/my model/final"
    assert argv[argv.index("--corpus") + 1] == "my docs.jsonl"


def test_a_domain_term_of_a_cased_model_is_found_in_any_case_the_tokenizer_folds():
    """Extend's added token matches 'gatrocraptic' as 'Gatrocraptic' on a cased BPE: a document
    using it in lower case holds the term; before extension case tells the words apart."""
    from tests.conftest import make_tiny_roberta

    docs = [Document("a", "Costs of gatrocraptic rose."), Document("b", "Gatrocraptic tools.")]
    assert diagnose_term(make_tiny_roberta(), "Gatrocraptic", docs).document.docs_containing == ["b"]
    extended = make_tiny_roberta()
    extend_vocabulary(extended, {"jargon": ["Gatrocraptic"]})
    [tid] = extended.settings.domain_token_ids
    assert tid in extended.tokenizer(docs[0].text)["input_ids"]  # the added token, from 'gatrocraptic'
    r = diagnose_term(extended, "Gatrocraptic", docs)
    assert r.document.docs_containing == ["a", "b"] and r.document.doc_id == "a"


def test_in_text_ids_leave_out_the_padding_of_a_shorter_text_in_the_batch(sparse):
    from diagnostics.tokens import in_text_ids

    short, long = "valve", "valve pressure password budget water plants account"
    together = in_text_ids(sparse, [short, long], "query")
    assert together == [in_text_ids(sparse, [short], "query")[0], in_text_ids(sparse, [long], "query")[0]]
    assert sparse.tokenizer.pad_token_id not in together[0]


def test_a_one_token_term_not_yet_a_domain_token_is_not_said_to_be_split():
    from diagnostics.recommend import recommend
    from diagnostics.sections.checks import FAIL, Check

    [rec] = recommend("password", [Check("domain_token", FAIL, "registered domain token",
                                         "no (model not extended with this term)")], Sources("m"))
    assert rec.id == "extend" and "is one token but not a registered domain token" in rec.finding
    assert "splits" not in rec.finding


def test_the_diagnose_report_of_a_split_term_shows_every_piece_span_warning_and_command_and_each_check_once(sparse):
    from dataclasses import replace

    from diagnostics.render import render_term

    r = diagnose_term(sparse, "Gatrocraptic", DOCS, queries=QUERIES)
    # a piece's pooling mismatch, two warnings, two commands: each must be shown
    checks = [replace(c, status="fail", actual="0.1000 vs 0.2000")
              if (c.name, c.target) == ("weight_matches_encoding", "##cr") else c for c in r.checks]
    rec = replace(r.recommendations[0], commands=["sparse-adapt first", "sparse-adapt second"])
    lines = _rendered_lines(render_term, replace(r, checks=checks, warnings=["first note", "second note"],
                                                 recommendations=[rec]), 250)
    assert "Token id(s) " + " ".join(map(str, r.vocabulary.token_ids)) in lines
    assert "Added by extend-vocab no" in lines
    assert not any(line.startswith("Domain token of model") for line in lines)  # a question for one token only
    assert "⚠ first note" in lines and "⚠ second note" in lines
    assert "Document d2 one of 2 document(s) containing the term: d2, d3" in lines  # of 4 searched
    # [CLS] understanding ga ##tro ##cr ##ap ##tic metric ##s is essential . ga ... : pieces at 2-6 and 12-16
    assert any(line.startswith("Term at token position(s): 2-6, 12-16 (22 tokens") for line in lines)
    for p, piece in [*zip(range(2, 7), GATRO_PIECES), *zip(range(12, 17), GATRO_PIECES)]:
        assert any(re.match(rf"{p} {re.escape(piece)} .*◀ term", line) for line in lines), p
    assert not any(re.match(r"7 metric .*◀ term", line) for line in lines)
    for t in r.targets:
        lg = t.logits
        assert lg.min_logit < lg.max_logit
        assert any(line.startswith(f"'{t.token}': all positions min {lg.min_logit:.4f}, max {lg.max_logit:.4f}")
                   for line in lines)
        qe = t.query_expansion
        assert (qe.queries, qe.without_term) == (3, 2)  # q2 names the term
        assert any(line.startswith(f"'{t.token}' in query vectors: {len(qe.expanding)} of 2 queries without")
                   for line in lines)
    # term-wide checks in the first table, each piece's in the per-piece one: no check twice
    assert sum(line.startswith("positive_logits ") for line in lines) == 1
    [row] = [line for line in lines if line.startswith("weight_matches_encoding ")]
    assert "✗ MISMATCH 0.1000 vs 0.2000" in row and row.count("✓ matches") == 4
    assert any(line.startswith("1. 'Gatrocraptic' is not one token") for line in lines)
    assert "$ sparse-adapt first" in lines and "$ sparse-adapt second" in lines
    done = _rendered_lines(render_term, replace(r, recommendations=[]), 250)
    assert "✓ nothing to fix: the model gives the term weight, rank and expansion" in done  # queries were given


def test_the_diagnose_logit_table_of_a_long_document_counts_each_elided_run_and_a_special_token_gets_no_verdict(
        extended):
    from dataclasses import replace

    from diagnostics.render import VERDICT_LINES, render_term
    from diagnostics.sections.expansion import ExpandingQuery, FeedbackExpansion, QueryExpansion

    tid = extended.tokenizer.convert_tokens_to_ids("gatrocraptic")
    long = Document("d9", " ".join(["settings"] * 40) + " Gatrocraptic tools")
    r = diagnose_term(extended, "Gatrocraptic", [long], terms=TERMS)
    assert r.document.num_tokens == 44 and r.targets[0].logits.occurrences == [41]  # [CLS] 40 x settings ...
    lines = _rendered_lines(render_term, r, 250)
    for line in (f"Token id(s) {tid}", f"Single token ✓ yes (id {tid})",
                 "Base tokenizer split ga ##tro ##cr ##ap ##tic (5 piece(s))", "Added by extend-vocab yes",
                 "Domain token of model ✓ yes"):
        assert line in lines, line
    assert not any("(special)" in line for line in lines)
    # shown: positions 0-24, the max (put at 30 here) and the occurrence at 41; the rest elided
    t = r.targets[0]
    expanding = [ExpandingQuery(f"q{i}", f"query {i}", 1.0 - i / 10) for i in range(6)]
    qe = QueryExpansion(8, 7, expanding, 1, 1, ["q7"], FeedbackExpansion(1, 0.5, 8, expanding[:2]))
    t = replace(t, logits=replace(t.logits, max_position=30), weight=replace(t.weight, special_token=True),
                query_expansion=qe)
    lines = _rendered_lines(render_term, replace(r, targets=[t]), 250)
    gaps = [line for line in lines if line.startswith("… ")]
    assert gaps == ["… 5 more", "… 10 more", "… 2 more"]  # 25-29, 31-40, 42-43
    assert any(re.match(r"30 settings \S+ ◀ max$", line) for line in lines)
    assert any(re.match(r"41 gatrocraptic \S+ ◀ term$", line) for line in lines)
    # a special token is zeroed whatever its logits: said so, and no verdict on the head
    assert any("is a special token: excluded from every vector" in line for line in lines)
    assert not any(line.strip() == text.strip() for line in lines for text, _ in VERDICT_LINES.values())
    assert sum("→ 0 (special)" in line for line in lines) == 1
    assert any(line.startswith("'gatrocraptic' in query vectors: 6 of 7 queries without") for line in lines)
    assert [line for line in lines if re.match(r"\d\.\d{4} \[q\d\] query \d$", line)] == [
        "1.0000 [q0] query 0", "0.9000 [q1] query 1", "0.8000 [q2] query 2", "0.7000 [q3] query 3",
        "0.6000 [q4] query 4", "1.0000 [q0] query 0", "0.9000 [q1] query 1"]  # the first 5, then feedback's
    assert any(line.endswith("8 terms): 2 of 7 reach it") for line in lines)
    probe = diagnose_term(extended, "OAuth2", DOCS)  # no document names it
    assert any(line.startswith("Document (probe) probe: the term on its own")
               for line in _rendered_lines(render_term, probe, 250))


def test_the_inspect_tables_say_queries_not_given_draw_no_empty_token_table_and_take_no_ratio_to_0_flops():
    from dataclasses import replace

    from diagnostics.render import render_corpus
    from diagnostics.schema import INSPECT_SCHEMA
    from diagnostics.sparsity import CorpusStats, Distribution, DomainStats, FeedbackCost, Flops, TextStats

    c = CorpusStats(INSPECT_SCHEMA, "m", 1000, documents=TextStats(5, Distribution(12.5, 11.0, 3, 30), 98.75),
                    queries=None, flops=None, domain=DomainStats(0, "none", None, None, []))
    lines = _rendered_lines(render_corpus, c, 200)
    assert "queries not given" in lines
    assert "Domain tokens 0 (from none): mean weight where they occur –, where they don't –" in lines
    assert not any(line.startswith("token id docs with") for line in lines)  # no token: no table header
    silent = TextStats(2, Distribution(0.0, 0.0, 0, 0), 100.0)  # queries that activate nothing
    fed = replace(c, queries=silent, flops=Flops("sum", 0.0, 0.0, 0.0), feedback=FeedbackCost(1, 0.5, 32, silent, 0.0))
    assert any(line.endswith("FLOPS 0.00") for line in _rendered_lines(render_corpus, fed, 200))


def test_the_explain_view_counts_pieces_says_when_feedback_found_no_document_and_keeps_q_and_d_apart():
    from diagnostics.explain import (
        DocumentMatch, FeedbackStats, QueryExplanation, QueryStats, SharedToken, WeightedToken,
    )
    from diagnostics.render import render_explanation
    from diagnostics.schema import EXPLAIN_SCHEMA

    tokens = [WeightedToken("tools", 2002, 1.5, in_text=True), WeightedToken("ga", 2001, 1.0, False, "gatrocraptic")]
    q = QueryStats("gatrocraptic tools", 2, 1.5, 99.9, 30522, 0, 1, tokens, FeedbackStats(2, 0.5, 8, [], []))
    match = DocumentMatch(1, "d1", "tools", 0.375, 0.375, 1, [SharedToken("tools", 2002, 1.5, 0.25, 0.375)], [])
    lines = _rendered_lines(render_explanation, QueryExplanation(EXPLAIN_SCHEMA, "m", 1, 1, q, [match]), 300)
    assert any("expansion tokens: 0 pieces of domain terms: 1 documents scored: 1" in line for line in lines)
    assert "1.0000 ga piece of gatrocraptic" in lines
    assert any("+ 0.5 x the mean of none (no document matched the query)" in line for line in lines)
    assert any("0.3750 tools 1.50 × 0.25" in line for line in lines)  # contribution = q × d


def test_the_readme_documents_the_schema_ids_the_outputs_carry():
    from pathlib import Path

    from diagnostics.schema import SHAPES

    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    for schema in SHAPES:
        assert f"`{schema}`" in readme, schema  # a new version is documented with what changed


def _shape_keys(shape) -> set[str]:
    """Every key of a ``diagnostics.schema`` shape, at any depth."""
    from diagnostics.schema import Nullable

    if isinstance(shape, Nullable):
        return _shape_keys(shape.shape)
    if isinstance(shape, list):
        return _shape_keys(shape[0])
    if isinstance(shape, dict):
        return set(shape).union(*(_shape_keys(sub) for sub in shape.values()))
    return set()


def test_the_readme_schema_blocks_name_every_field_the_outputs_carry():
    """The README's tree under each schema id names the keys of ``diagnostics/schema.py``'s shape,
    no more and no fewer: a field added with a new version but not to the tree (diagnose/5's
    ``query_expansion.with_term_qids`` was missing there) fails here."""
    import re
    from pathlib import Path

    from diagnostics.schema import SHAPES

    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    not_keys = {"str", "int", "float", "bool", "null", "start", "end"}  # types, and term_spans' [start, end)
    for schema, shape in SHAPES.items():
        block = re.search(rf"^`{re.escape(schema)}`[^\n]*\n```\n(.*?)```", readme, flags=re.S | re.M)
        assert block, f"no tree under `{schema}` in the README"
        text = re.sub(r'"[^"]*"', "", re.sub(r"#[^\n]*", "", block.group(1)))  # comments and string values
        documented = set(re.findall(r"\b([a-z_][a-z0-9_]*)\??\s*(?=[,:}\]])", text)) - not_keys
        keys = _shape_keys(shape)
        assert documented == keys, (f"{schema}: the README lacks {sorted(keys - documented)}, "
                                    f"names {sorted(documented - keys)} the outputs do not carry")


def test_the_schema_check_refuses_a_number_for_a_flag_and_an_empty_object_where_fields_belong(extended):
    from sparse_adapt.retrieval.feedback import Feedback

    out = _roundtrip(explain_query(extended, "gatrocraptic tools", DOCS, k=2, feedback=Feedback()))
    validate(out)
    assert out["query"]["feedback"]["added"]
    out["query"]["feedback"]["added"][0]["new"] = 1
    with pytest.raises(SchemaError, match=r"\$\.query\.feedback\.added\[0\]\.new: expected bool, got int"):
        validate(out)
    out = _roundtrip(inspect_corpus(extended, DOCS, QUERIES))
    out["flops"] = {}  # may be null, but an object must hold its fields
    with pytest.raises(SchemaError, match=r"\$\.flops: keys differ"):
        validate(out)


# ---------------------------------------------------------------------------- audit s55/E
def test_a_term_is_found_under_every_category_listing_it_in_any_spelling_the_tokenizer_folds(tiny_bert):
    from diagnostics.sections.vocabulary import vocabulary_check

    terms = {"jargon": ["Gatrocraptic"], "acronyms": ["API"], "finance": ["GATROCRAPTIC", "budgets"]}
    v = vocabulary_check(tiny_bert, "gatrocraptic", terms, None)
    assert v.in_terms_file and v.categories == ["jargon", "finance"]


def test_the_decoded_term_is_the_text_of_its_tokens_not_their_token_strings():
    from diagnostics.sections.vocabulary import vocabulary_check
    from tests.conftest import make_tiny_roberta

    v = vocabulary_check(make_tiny_roberta(), "spending", None, None)
    assert v.pieces == ["Ġsp", "end", "ing"] and v.decoded == [" sp", "end", "ing"]


def test_occurrences_never_above_0_are_negative_and_a_column_below_0_weighs_0_after_relu():
    from types import SimpleNamespace

    from diagnostics.sections.logits import logit_analysis
    from diagnostics.sections.weight import weight_check

    lg = logit_analysis(np.array([-2.0, 0.0, -1.0, -0.5]), ["[CLS]", "a", "b", "[SEP]"], [1, 2])
    assert lg.verdict == "negative"  # a logit of exactly 0 gives no weight either
    below = logit_analysis(np.array([-2.0, -0.25, -1.0, -0.5]), ["[CLS]", "a", "b", "[SEP]"], [1, 2])
    w = weight_check(SimpleNamespace(output_mask=torch.ones(10)), 5, below, actual=0.0)
    assert (w.max_logit, w.after_relu, w.after_log1p, w.expected) == (-0.25, 0.0, 0.0, 0.0) and w.matches


def test_a_one_token_terms_checks_name_its_id_and_call_no_weight_no_expansion():
    assert _graded(3.0, 1)["single_token"].actual == "id 7"
    absent = _graded(0.0, None, occ=())["nonzero_weight"]
    assert (absent.status, absent.actual) == ("n/a", "0.0000 (term not in this text)")


def test_an_empty_query_list_is_no_query_expansion_check(extended):
    r = diagnose_term(extended, "Gatrocraptic", DOCS, terms=TERMS, queries=[])
    assert r.targets[0].query_expansion is None
    check = next(c for c in r.checks if c.name == "query_expansion")
    assert (check.status, check.actual) == ("n/a", "not checked: no queries given")


def test_the_window_warning_names_the_first_five_documents_using_the_term_only_past_it(sparse):
    sparse.settings.doc_max_length = 20  # the query window stays 16
    late = [Document(f"L{i}", "settings " * 40 + "and then Gatrocraptic at last.") for i in range(1, 7)]
    r = diagnose_term(sparse, "Gatrocraptic", [DOCS[0], *late], terms=TERMS)
    assert r.document.docs_beyond_window == [d.doc_id for d in late]
    [line] = [w for w in r.warnings if "only past the model's document window" in w]
    assert line.startswith("6 document(s) use") and "(L1, L2, L3, L4, L5)" in line and "window (20 tokens)" in line


def test_a_one_token_term_that_is_no_domain_token_gets_no_rival_warning(extended):
    pid, api = extended.tokenizer.convert_tokens_to_ids(["password", "api"])
    _boost(extended, pid, 15.0)
    _boost(extended, api, 15.0)
    q = extended.encode(["password"], "query").toarray()[0]
    assert q[pid] >= 1.0 and q[api] >= 0.8 * q[pid]  # a domain token's rival, were it one
    r = diagnose_term(extended, "password", DOCS, terms=TERMS)
    assert r.vocabulary.single_token and not r.vocabulary.domain_token
    assert not any("activates the domain token" in w for w in r.warnings)


def test_a_term_holding_regex_characters_matches_only_as_written(sparse):
    from diagnostics.sections.document import choose_document

    docs = [Document("a", "a ratio of 3x5 here"), Document("b", "version 3.5 ships")]
    assert choose_document(sparse, "3.5", docs, None).docs_containing == ["b"]
    assert choose_document(sparse, "C++", [Document("c", "written in C++ today")], None).docs_containing == ["c"]


def test_explain_marks_the_text_tokens_of_each_shown_document_and_gives_the_query_sparsity(sparse, monkeypatch):
    """dB (the second document) is the only match: its top tokens are its own text's, not dA's."""
    tok = sparse.tokenizer
    docs = [Document("dA", "Plants need water"), Document("dB", "Valves open at set pressure")]
    own_a, own_b = (tok.convert_tokens_to_ids(tok.tokenize(d.text)) for d in docs)
    assert not set(own_a) & set(own_b)
    monkeypatch.setattr(sparse, "encode", _encode_as(
        {"valve pressure": {t: 1.0 for t in own_b}, docs[0].text: {t: 1.0 for t in own_a},
         docs[1].text: {t: 2.0 for t in own_b}}, sparse.vocab_size))
    e = explain_query(sparse, "valve pressure", docs, k=1)
    [m] = e.results
    assert m.doc_id == "dB" and [t.in_text for t in m.top_tokens] == [True] * len(set(own_b))
    assert e.documents_scored == 2  # every document was scored, one shown
    n = len(set(own_b))
    assert e.query.nonzero == n and e.query.sparsity == pytest.approx(100.0 * (1.0 - n / sparse.vocab_size), rel=1e-9)


def test_the_warmup_finding_names_logits_and_weights_and_query_expansion_reruns_distillation_only():
    from diagnostics.recommend import recommend
    from diagnostics.sections.checks import FAIL, Check

    failed = [Check("positive_logits", FAIL, "> 0 where it occurs", "-1.00, -2.00"),
              Check("nonzero_weight", FAIL, "> 0", "0.0000"),
              Check("query_expansion", FAIL, ">= 1 query w/o term", "0 of 2 queries")]
    warmup, qexp = recommend("Zorblatt", failed, Sources("m", extended=True))
    assert warmup.finding.endswith("(logits -1.00, -2.00; weight 0.0000)")
    assert "--stages distill --config DISTILL_CONFIG" in qexp.commands[0]
    [_, qexp] = recommend("Zorblatt", failed, Sources("m"))
    assert "--stages extend,distill --config DISTILL_CONFIG" in qexp.commands[0]


def test_a_query_naming_the_term_only_past_the_query_window_is_not_one_without_it(sparse):
    from diagnostics.sections.expansion import query_expansion

    sparse.settings.query_max_length = 8
    pid = sparse.tokenizer.convert_tokens_to_ids("password")
    queries = [Query("q1", "settings " * 20 + "password"), Query("q2", "forgot my login")]
    qe = query_expansion(sparse, "password", [pid], queries)[pid]
    assert (qe.without_term, qe.with_term, qe.with_term_qids) == (1, 1, ["q1"])


def test_a_document_chosen_with_doc_is_read_in_the_document_window_not_the_query_one(sparse):
    sparse.settings.query_max_length = 8
    doc = Document("L", "settings " * 10 + "and then Gatrocraptic at last.")
    r = diagnose_term(sparse, "Gatrocraptic", [DOCS[0], doc], doc_id="L")
    assert r.document.num_tokens == len(sparse.tokenizer(doc.text)["input_ids"]) and len(r.document.term_spans) == 1
    assert r.targets[0].logits.verdict != "absent" and r.warnings == []


def test_the_documents_and_terms_advice_names_the_files_given():
    from diagnostics.recommend import recommend
    from diagnostics.sections.checks import FAIL, WARN, Check

    failed = [Check("in_documents", WARN, ">= 1 document", "0 of 3"), Check("in_terms_file", FAIL, "listed", "absent")]
    docs, terms = recommend("Zorblatt", failed, Sources("m", docs="corpus/docs.jsonl", terms="corpus/terms.json"))
    assert docs.finding == "no document of corpus/docs.jsonl contains 'Zorblatt'"
    assert terms.action.startswith("add 'Zorblatt' to a category of corpus/terms.json so extend-vocab")
    command = Sources("m", dictionary="d/dict.jsonl", train="d/train.jsonl").train_command("distill")
    assert "--dictionary d/dict.jsonl --train d/train.jsonl" in command


def test_did_you_mean_needs_a_spelling_at_least_80_percent_alike(extended):
    from diagnostics.term import near_domain_term

    near = {t.lower(): t for t in extended.settings.domain_terms}["gatrocraptic"]
    assert near_domain_term(extended, "gatrocrxptxc") == near  # difflib ratio 0.83
    assert near_domain_term(extended, "gatrocrab") is None  # 0.76


def test_a_diagnosis_without_sources_names_the_models_base(extended):
    r = diagnose_term(extended, "Gatrocraptic", DOCS)
    assert r.model == extended.settings.base == "tiny-bert"


def test_a_term_the_normaliser_removes_entirely_is_a_config_error(tiny_bert):
    # a zero-width space survives strip() but not BERT's normaliser
    with pytest.raises(ConfigError, match=r"term '\\u200b' tokenizes to nothing"):
        diagnose_term(tiny_bert, "\u200b", DOCS)


def test_explain_names_the_model_as_given_else_its_base(sparse):
    assert explain_query(sparse, "reset my password", DOCS, model="runs/a/final").model == "runs/a/final"
    assert explain_query(sparse, "reset my password", DOCS).model == "tiny-bert"


def _every_recommendation():
    """Each remedy recommend() can give, in each variant its text has (reasons, statuses, an adapt
    run, a near spelling, a reference), from one failed or warned check at a time."""
    from diagnostics.recommend import RECOMMENDERS, recommend
    from diagnostics.sections.checks import FAIL, WARN, Check

    sources = [
        Sources("m"),
        Sources("runs/a/final", docs="d.jsonl", terms="t.json", dictionary="x.jsonl", train="y.jsonl",
                reference="offline-splade-tiny", extended=True),
        Sources("runs/a/final", terms="runs/a/domain_terms.json", adapt_run="runs/a", near="krellamine"),
    ]
    reasons = (None, "special_token", "beyond_window")
    return [rec for name in RECOMMENDERS for status in (WARN, FAIL) for reason in reasons for s in sources
            for rec in recommend("Zorblatt", [Check(name, status, "e", "1 piece: zor", reason=reason)], s)]


def test_every_command_and_option_a_recommendation_names_exists_in_the_cli():
    """A suggested command must run as printed (its options, its --stages), and a flag an action
    names must be an option of diagnose (the command printing it) or of a command the action names;
    `cmd --flag` and `--flag (cmd, cmd)` must match exactly."""
    import shlex

    import typer.main

    from diagnostics.recommend import ORDER
    from sparse_adapt.cli import app
    from sparse_adapt.training.stages import parse_stages

    commands = typer.main.get_command(app).commands
    opts = {name: {o for p in c.params for o in p.opts} for name, c in commands.items()}
    recs = _every_recommendation()
    assert {r.id for r in recs} == set(ORDER)  # every remedy was produced
    for rec in recs:
        for line in rec.commands:
            argv = shlex.split(line)
            assert argv[0] == "sparse-adapt" and argv[1] in commands, line
            params = commands[argv[1]].make_context(argv[1], argv[2:]).params  # unknown or missing option: raises
            if "stages" in params:
                parse_stages(params["stages"])
        named = [c for c in commands if re.search(rf"(?<![\w-]){re.escape(c)}(?![\w-])", rec.action)]
        for flag in re.findall(r"(?<![\w-])--[a-z][\w-]*", rec.action):
            assert any(flag in opts[c] for c in ["diagnose", *named]), (flag, rec.action)
        for command, flag in re.findall(r"`?(?:sparse-adapt )?([a-z][\w-]*)`? (--[a-z][\w-]*)", rec.action):
            if command in commands:
                assert flag in opts[command], (command, flag, rec.action)
        for flag, listed in re.findall(r"(--[a-z][\w-]*) \(([a-z][\w-]*(?:, [a-z][\w-]*)*)\)", rec.action):
            for command in listed.split(", "):
                assert flag in opts[command], (command, flag, rec.action)


def test_a_setting_a_recommendation_says_to_raise_is_a_config_key_with_the_default_it_states(tmp_path):
    """`key` (default X) under [distill]: the key must load from a TOML file's [distill] table,
    and X must be what train uses without one."""
    from sparse_adapt.training.config import DistillConfig
    from sparse_adapt.training.config_files import load_config

    said = {}
    for rec in _every_recommendation():
        for section in re.findall(r"under \[(\w+)\]", rec.action):
            assert section == "distill", rec.action
            said.update(re.findall(r"`(\w+)`,? \(?default ([0-9.e+-]+)", rec.action))
    assert said  # the dictionary and query-expansion remedies name their settings
    for key, default in said.items():
        assert getattr(DistillConfig(), key) == float(default), key
        path = tmp_path / f"{key}.toml"
        path.write_text(f"[distill]\n{key} = {2 * float(default)}\n", encoding="utf-8")
        assert getattr(load_config(path).distill, key) == 2 * float(default)


def test_explain_scores_a_document_as_in_memory_retrieval_does(sparse):
    """DocumentMatch.score: the dot product retrieval computes, float32, and float64 with
    feedback (Rocchio's expanded query is float64): a float32 score there would drop digits."""
    from sparse_adapt.retrieval.evaluation import score_in_memory
    from sparse_adapt.retrieval.feedback import Feedback

    for fb in (None, Feedback()):
        for q in QUERIES:
            run = score_in_memory(sparse, DOCS, [q], feedback=fb)[q.qid]
            results = explain_query(sparse, q.text, DOCS, k=len(DOCS), feedback=fb).results
            assert {m.doc_id for m in results if m.score > 0} == set(run)
            for m in results:
                # bit for bit: explain's D q^T had summed feedback's float64 products in another order
                assert m.score == run.get(m.doc_id, 0.0)
            is_float32 = [float(np.float32(m.score)) == m.score for m in results]
            assert all(is_float32) if fb is None else not any(is_float32)


def test_every_file_and_function_the_diagnostics_text_names_exists():
    """A ``*.py`` path, a :func: reference or a model file a diagnostics docstring or comment names must
    exist (a file renamed or moved leaves a pointer to nothing)."""
    import importlib
    from pathlib import Path

    from sparse_adapt.modeling.settings import SETTINGS_FILE

    root = Path(__file__).resolve().parents[2]
    files = sorted((root / "diagnostics").rglob("*.py"))
    assert len(files) > 10
    for path in files:
        text = path.read_text(encoding="utf-8")
        name = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        for py in re.findall(r"[\w/]+\.py\b", text):  # a bare name is a module of this package
            package = (root / "diagnostics", root / "diagnostics" / "sections")
            bases = (root, root / "sparse_adapt") if "/" in py else package
            assert any((base / py).is_file() for base in bases), (name, py)
        for ref in re.findall(r":func:`([\w.]+)`", text):
            owner, attr = ref.rsplit(".", 1) if "." in ref else (name, ref)
            assert hasattr(importlib.import_module(owner), attr), (name, ref)
        for json_name in re.findall(r"\b[a-z_]+\.json\b", text):  # upper-case ones are placeholders (TERMS.json)
            assert json_name == SETTINGS_FILE, (name, json_name)


def test_terms_given_from_python_are_shown_as_given_not_as_a_missing_file(extended):
    # the panel said "Terms file: not given" while its in_terms_file check passed on those terms
    from rich.console import Console

    from diagnostics.render import render_term
    from diagnostics.term import GIVEN_TERMS

    def shown(**kwargs) -> str:
        console = Console(record=True, width=200)
        render_term(diagnose_term(extended, "Gatrocraptic", DOCS, **kwargs), console)
        return console.export_text()

    given = shown(terms=TERMS)
    assert "In terms file" in given and GIVEN_TERMS in given and "not given" not in given
    assert "Terms file" in shown() and "not given" in shown()
    from_file = diagnose_term(extended, "Gatrocraptic", DOCS, terms=TERMS, sources=Sources("m", terms="terms.json"))
    assert from_file.vocabulary.terms_file == "terms.json"
