"""The seventh loss term: knowledge preservation (formula, which texts, and that it keeps a
trained model closer to its reference than training without it)."""

from __future__ import annotations

import json

import pytest
import torch

from sparse_adapt.losses import TERMS, DistillationLoss
from sparse_adapt.losses.preservation import FORMS, PreservationLoss
from sparse_adapt.modeling.encoder import SpladeEncoder
from sparse_adapt.training.config import ConfigError
from sparse_adapt.training.config_files import config_from_dict
from sparse_adapt.training.pipeline import run_pipeline
from tests.report.test_report import tiny_base
from tests.training.test_stages import SMALL, _jsonl


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory):
    return tiny_base(tmp_path_factory.mktemp("pres") / "base")


def test_vector_form_is_mean_squared_distance_of_selected_texts_added_ids_against_zero():
    # V = 4, V_ref = 3: column 3 is a token the vocabulary extension added (reference weight 0)
    q = torch.tensor([[1.0, 5.0, 2.0, 9.0], [7.0, 7.0, 7.0, 7.0]])
    ref_q = torch.tensor([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    d = torch.tensor([[2.0, 0.0, 0.0, 4.0]])
    ref_d = torch.tensor([[1.0, 3.0, 1.0]])
    loss = PreservationLoss("vectors")(
        query_weights=q, doc_weights=d, ref_query_weights=ref_q, ref_doc_weights=ref_d,
        general_queries=torch.tensor([True, False]), general_docs=torch.tensor([True]),
    )
    # query 0: 1 + 25 + 4 + 81 (the added id) = 111; query 1 not selected; doc: 1 + 9 + 1 + 16 = 27
    assert loss.item() == pytest.approx((111 + 27) / 2)
    # the mean over all selected texts, not the mean of the two sides' means:
    # query 1 adds 4 * 49 = 196, so 2 queries and 1 document
    both = PreservationLoss("vectors")(
        query_weights=q, doc_weights=d, ref_query_weights=ref_q, ref_doc_weights=ref_d,
        general_queries=torch.tensor([True, True]), general_docs=torch.tensor([True]),
    )
    assert both.item() == pytest.approx((111 + 196 + 27) / 3)
    nothing = PreservationLoss("vectors")(
        query_weights=q, doc_weights=d, ref_query_weights=ref_q, ref_doc_weights=ref_d,
        general_queries=torch.tensor([False, False]), general_docs=torch.tensor([False]),
    )
    assert nothing.item() == 0.0


def test_all_texts_form_anchors_domain_texts_on_general_columns_only():
    # V = 4, V_ref = 3; free ids: 3 (the added domain token) and 1 (a piece of the term)
    q = torch.tensor([[1.0, 5.0, 2.0, 9.0], [7.0, 7.0, 7.0, 7.0]])
    ref_q = torch.zeros(2, 3)
    d = torch.tensor([[2.0, 0.0, 0.0, 4.0]])
    ref_d = torch.tensor([[1.0, 3.0, 1.0]])
    loss = PreservationLoss("all-texts")(
        query_weights=q, doc_weights=d, ref_query_weights=ref_q, ref_doc_weights=ref_d, free_ids=[3, 1],
        general_queries=torch.tensor([True, False]), general_docs=torch.tensor([False]),
    )
    # query 0 (general): every id, 1 + 25 + 4 + 81 = 111; query 1 (domain): ids 0 and 2 only,
    # 49 + 49 = 98; the document (domain): (2-1)^2 + (0-1)^2 = 2; mean over the 3 texts
    assert loss.item() == pytest.approx((111 + 98 + 2) / 3)
    # a domain text is held on V_ref only: an id the reference lacks stays out even when it
    # is not listed free (query 1: ids 0 and 2, not 3; the document: ids 0 and 2)
    only_piece = PreservationLoss("all-texts")(
        query_weights=q, doc_weights=d, ref_query_weights=ref_q, ref_doc_weights=ref_d, free_ids=[1],
        general_queries=torch.tensor([True, False]), general_docs=torch.tensor([False]),
    )
    assert only_piece.item() == pytest.approx((111 + 98 + 2) / 3)


def test_score_form_is_mse_over_candidates_of_selected_queries():
    student = torch.tensor([[3.0, 1.0], [10.0, 10.0]])
    ref = torch.tensor([[1.0, 1.0], [0.0, 0.0]])
    loss = PreservationLoss("scores")(
        student=student, ref_scores=ref, general_queries=torch.tensor([True, False]),
        mask=torch.tensor([[True, True], [True, True]]),
    )
    assert loss.item() == pytest.approx((4 + 0) / 2)
    # a padded candidate (mask False) is no pair, however far its score moved
    padded = PreservationLoss("scores")(
        student=torch.tensor([[3.0, 50.0], [10.0, 10.0]]), ref_scores=ref, general_queries=torch.tensor([True, False]),
        mask=torch.tensor([[True, False], [True, True]]),
    )
    assert padded.item() == pytest.approx(4.0)


def test_score_form_is_0_when_no_candidate_pair_is_selected():
    # no general query, or a general query whose candidates are all padding: 0, not NaN
    student, ref = torch.tensor([[3.0, 1.0]]), torch.tensor([[1.0, 1.0]])
    for general, mask in ((False, [[True, True]]), (True, [[False, False]])):
        loss = PreservationLoss("scores")(
            student=student, ref_scores=ref, general_queries=torch.tensor([general]), mask=torch.tensor(mask),
        )
        assert loss.item() == 0.0


def test_unknown_form_is_refused_in_the_loss_and_in_the_config():
    with pytest.raises(ValueError, match="unknown preservation form"):
        PreservationLoss("logits")
    with pytest.raises(ConfigError, match="pres_form"):
        config_from_dict({"distill": {"pres_form": "logits"}})
    assert set(FORMS) == {"vectors", "all-texts", "scores"}


def test_distillation_applies_preservation_only_to_texts_the_domain_does_not_concern():
    # V = 4, D = {3}. Query 0 is a control (its positive doc1 has no domain token); query 1
    # has doc0 (containing token 3) as positive. Only doc1 and query 0 are "general".
    q = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]], requires_grad=True)
    d = torch.tensor([[0.0, 0.0, 2.0, 3.0], [1.0, 1.0, 0.0, 0.0]], requires_grad=True)
    ref_q = torch.tensor([[0.0, 0.0, 0.0], [9.0, 9.0, 9.0]])
    ref_d = torch.tensor([[9.0, 9.0, 9.0], [1.0, 0.0, 0.0]])
    kw = dict(
        query_weights=q, query_input_ids=torch.tensor([[1, 2], [2, 2]]), doc_weights=d,
        doc_input_ids=torch.tensor([[3, 0], [1, 2]]), doc_index=torch.tensor([[1, 0], [0, 1]]),
        teacher=torch.tensor([[10.0, -8.0], [10.0, -8.0]]), mask=torch.ones(2, 2, dtype=torch.bool), domain_ids=[3],
        step=1,
    )
    fn = DistillationLoss(pres=2.0)
    without_ref = fn(**kw)
    assert without_ref["pres"].item() == 0.0
    out = fn(**kw, ref_query_weights=ref_q, ref_doc_weights=ref_d)
    # (column 3 is the added domain token: reference weight 0 there)
    # query 0: (1-0)^2 = 1; doc1: (1-1)^2 + (1-0)^2 = 1; query 1 and doc0 (domain) ignored
    assert out["pres"].item() == pytest.approx((1 + 1) / 2)
    assert out["total"].item() == pytest.approx(without_ref["total"].item() + 2.0 * 1.0)
    assert "pres" in TERMS
    # A query that names the domain term is the domain's, even when its positives lack it.
    # Its reference now differs: were it selected, the mean would be ((1 - 3)^2 + 1) / 2.
    ref_q = torch.tensor([[3.0, 0.0, 0.0], [9.0, 9.0, 9.0]])
    naming = fn(**{**kw, "query_input_ids": torch.tensor([[1, 3], [2, 2]])}, ref_query_weights=ref_q,
                ref_doc_weights=ref_d)
    assert naming["pres"].item() == pytest.approx(1.0)  # doc1 alone


def test_distillation_treats_a_text_holding_any_one_of_several_domain_tokens_as_the_domains():
    # V = 5, D = [3, 4]: each domain text below holds only token 4, the second id of D. Vectors
    # against a zero reference: q0 = 1, q1 = 4, q2 = 9, doc0 = 1, doc1 = 25.
    out = DistillationLoss(pres=1.0)(
        query_weights=torch.tensor([[1.0, 0, 0, 0, 0], [0, 2.0, 0, 0, 0], [0, 0, 3.0, 0, 0]]),
        query_input_ids=torch.tensor([[1, 2], [4, 1], [1, 1]]),  # q1 names token 4
        doc_weights=torch.tensor([[1.0, 0, 0, 0, 0], [0, 5.0, 0, 0, 0]]),
        doc_input_ids=torch.tensor([[1, 2], [4, 2]]),  # doc1 holds token 4
        doc_index=torch.tensor([[0], [0], [1]]),  # q2's positive is doc1
        teacher=torch.tensor([[10.0], [10.0], [10.0]]), mask=torch.ones(3, 1, dtype=torch.bool),
        domain_ids=[3, 4], step=1, ref_query_weights=torch.zeros(3, 3), ref_doc_weights=torch.zeros(2, 3),
    )
    # only q0 and doc0 are general; reading D's first id alone would add q1 (4), q2 (9) or doc1 (25)
    assert out["pres"].item() == pytest.approx((1 + 1) / 2)


def _one_general_query(**extra):
    """DistillationLoss inputs of one general query, [1, 0, 0, 0], and its one general document,
    [1, 1, 0, 0] (V = 4, D = {3})."""
    return dict(
        query_weights=torch.tensor([[1.0, 0.0, 0.0, 0.0]]), query_input_ids=torch.tensor([[1, 2]]),
        doc_weights=torch.tensor([[1.0, 1.0, 0.0, 0.0]]), doc_input_ids=torch.tensor([[1, 2]]),
        doc_index=torch.tensor([[0]]), teacher=torch.tensor([[10.0]]), mask=torch.ones(1, 1, dtype=torch.bool),
        domain_ids=[3], step=1, **extra,
    )


def test_distillation_with_one_side_of_the_reference_missing_has_no_preservation_term():
    # "ref_query_weights, ref_doc_weights ... or None (then pres is 0)": either None suffices
    kw = _one_general_query()
    fn = DistillationLoss(pres=1.0)
    assert fn(**kw, ref_query_weights=torch.zeros(1, 3), ref_doc_weights=torch.zeros(1, 3))["pres"].item() > 0
    assert fn(**kw, ref_query_weights=torch.zeros(1, 3))["pres"].item() == 0.0
    assert fn(**kw, ref_doc_weights=torch.zeros(1, 3))["pres"].item() == 0.0


def test_preservation_is_off_and_of_the_vector_form_unless_asked():
    # DistillationLoss() logs the term but leaves it out of the total: its weight is 0
    kw = _one_general_query(ref_query_weights=torch.zeros(1, 3), ref_doc_weights=torch.zeros(1, 3))
    out = DistillationLoss()(**kw)
    assert out["pres"].item() == pytest.approx((1 + 2) / 2)
    assert out["total"].item() == pytest.approx(sum(out[k].item() for k in TERMS if k != "pres"))
    # PreservationLoss() is the "vectors" form: the domain query 1 is left out, where
    # "all-texts" would add its 3 general ids, (111 + 147 + 27) / 3
    q = torch.tensor([[1.0, 5.0, 2.0, 9.0], [7.0, 7.0, 7.0, 7.0]])
    inputs = dict(
        query_weights=q, doc_weights=torch.tensor([[2.0, 0.0, 0.0, 4.0]]), ref_query_weights=torch.zeros(2, 3),
        ref_doc_weights=torch.tensor([[1.0, 3.0, 1.0]]), general_queries=torch.tensor([True, False]),
        general_docs=torch.tensor([True]), free_ids=[],
    )
    assert PreservationLoss()(**inputs).item() == pytest.approx((111 + 27) / 2)


def test_score_form_in_distillation_compares_each_candidate_with_its_own_reference_score():
    # As above: query 0 is the only general query; its candidates are [doc1, doc0].
    q = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]])
    d = torch.tensor([[0.0, 0.0, 2.0, 3.0], [1.0, 1.0, 0.0, 0.0]])
    out = DistillationLoss(pres=1.0, pres_form="scores")(
        query_weights=q, query_input_ids=torch.tensor([[1, 2], [2, 2]]), doc_weights=d,
        doc_input_ids=torch.tensor([[3, 0], [1, 2]]), doc_index=torch.tensor([[1, 0], [0, 1]]),
        teacher=torch.tensor([[10.0, -8.0], [10.0, -8.0]]), mask=torch.ones(2, 2, dtype=torch.bool), domain_ids=[3],
        step=1, ref_query_weights=torch.tensor([[3.0, 0.0, 0.0], [9.0, 9.0, 9.0]]),
        ref_doc_weights=torch.tensor([[9.0, 9.0, 9.0], [1.0, 0.0, 0.0]]),
    )
    # student: q0 . doc1 = 1, q0 . doc0 = 0; reference: 3 . 1 = 3 and 3 . 9 = 27
    assert out["pres"].item() == pytest.approx(((1 - 3) ** 2 + (0 - 27) ** 2) / 2)


def test_score_form_in_distillation_leaves_out_padding_and_moves_the_student_scores():
    # One general query [1, 0, 0, 0] with its candidate doc1 and a padded slot (-1, read as
    # row 0, doc0): student 2 against reference 3 on doc1; the padding would add (1 - 5)^2.
    q = torch.tensor([[1.0, 0.0, 0.0, 0.0]], requires_grad=True)
    out = DistillationLoss(kd=0.0, ret=0.0, sp=0.0, dom=0.0, ctr=0.0, qexp=0.0, pres=1.0, pres_form="scores")(
        query_weights=q, query_input_ids=torch.tensor([[1, 2]]),
        doc_weights=torch.tensor([[1.0, 1.0, 0.0, 0.0], [2.0, 0.0, 0.0, 0.0]]),
        doc_input_ids=torch.tensor([[1, 2], [2, 1]]), doc_index=torch.tensor([[1, -1]]),
        teacher=torch.tensor([[10.0, 0.0]]), mask=torch.tensor([[True, False]]), domain_ids=[3], step=1,
        ref_query_weights=torch.tensor([[1.0, 0.0, 0.0]]),
        ref_doc_weights=torch.tensor([[5.0, 0.0, 0.0], [3.0, 0.0, 0.0]]),
    )
    assert out["pres"].item() == pytest.approx((2 - 3) ** 2)
    out["total"].backward()
    assert q.grad[0].tolist() == pytest.approx([2 * (2 - 3) * 2.0, 0.0, 0.0, 0.0])  # 2 (s - s_ref) x doc1


def test_all_texts_form_in_distillation_frees_the_given_ids_of_a_domain_text():
    # V = 4, D = {3}: the query names token 3 (a domain text) and fired piece 1, which the
    # reference did not; the document is general and matches its reference
    fn = DistillationLoss(pres=1.0, pres_form="all-texts")
    kw = dict(
        query_weights=torch.tensor([[0.0, 5.0, 0.0, 0.0]]), query_input_ids=torch.tensor([[3, 1]]),
        doc_weights=torch.zeros(1, 4), doc_input_ids=torch.tensor([[1, 2]]), doc_index=torch.tensor([[0]]),
        teacher=torch.tensor([[1.0]]), mask=torch.ones(1, 1, dtype=torch.bool), domain_ids=[3], step=1,
        ref_query_weights=torch.zeros(1, 3), ref_doc_weights=torch.zeros(1, 3),
    )
    assert fn(**kw)["pres"].item() == pytest.approx(25 / 2)  # piece 1 held: (5 - 0)^2 over 2 texts
    assert fn(**kw, free_ids=[1])["pres"].item() == 0.0


def _distance_from_reference(model_dir, reference_dir, texts) -> float:
    model, ref = SpladeEncoder.from_pretrained(model_dir), SpladeEncoder.from_pretrained(reference_dir)
    a = model.encode(texts, "document").toarray()[:, : ref.vocab_size]
    b = ref.encode(texts, "document").toarray()
    return float(((a - b) ** 2).sum())


def test_preservation_keeps_general_vectors_closer_to_the_reference(base_dir, tmp_path):
    docs = [
        {"doc_id": "g1", "text": "The relay race team passed the baton at the depot."},
        {"doc_id": "g2", "text": "A bus depot stores buses overnight."},
        {"doc_id": "z1", "text": "Zorblatt relay depot routing for freight."},
    ]
    train = [
        {"qid": "c1", "query": "relay race baton", "doc_ids": ["g1", "z1", "g2"],
         "doc_texts": [docs[0]["text"], docs[2]["text"], docs[1]["text"]], "teacher_scores": [10.0, -8.0, -8.0]},
        {"qid": "c2", "query": "where buses are stored", "doc_ids": ["g2", "z1"],
         "doc_texts": [docs[1]["text"], docs[2]["text"]], "teacher_scores": [10.0, -8.0]},
    ]
    (tmp_path / "terms.json").write_text(json.dumps({"jargon": ["Zorblatt"]}), encoding="utf-8")
    files = dict(
        corpus=_jsonl(tmp_path / "docs.jsonl", docs), terms=tmp_path / "terms.json", train=_jsonl(tmp_path / "t.jsonl", train),
        dictionary=_jsonl(tmp_path / "d.jsonl", [{"term": "Zorblatt", "definition": "freight routing", "examples": ["x"]}]),
    )
    general = [docs[0]["text"], docs[1]["text"], "relay race baton", "where buses are stored"]
    distance = {}
    for pres in (0.0, 50.0):
        cfg = {**SMALL, "distill": {**SMALL["distill"], "epochs": 4, "lr": 3e-3, "pres": pres}}
        final = run_pipeline(base=str(base_dir), out=tmp_path / f"p{pres}", stages=("extend", "distill"),
                             config=config_from_dict(cfg), seed=0, **files)
        distance[pres] = _distance_from_reference(final, base_dir, general)
        log = [json.loads(x) for x in (tmp_path / f"p{pres}" / "train_log.jsonl").read_text().splitlines()]
        steps = [r for r in log if r.get("stage") == "distill" and "step" in r]
        assert all("pres" in r for r in steps)
        assert (max(r["pres"] for r in steps) > 0) == (pres > 0)
    assert distance[50.0] < 0.5 * distance[0.0], distance


def test_a_terms_pieces_inside_a_text_are_free_as_at_its_start_on_byte_level_bpe():
    """RoBERTa splits "gatrocraptic" after a space into other pieces ("Ġg", ...) than at a
    text's start: only the latter were free, so the student was held to the reference's
    weights on the pieces of a term written inside a query."""
    from sparse_adapt.data import TrainExample
    from sparse_adapt.modeling.tokenization import running_text_ids
    from sparse_adapt.training.reference import ReferenceVectors
    from tests.conftest import make_tiny_roberta

    enc = make_tiny_roberta()
    tok = enc.tokenizer
    start, inside = tok("gatrocraptic", add_special_tokens=False)["input_ids"], running_text_ids(tok, "gatrocraptic")
    assert set(inside) - set(start)  # the case: other pieces inside a text
    ex = TrainExample("q1", "what is gatrocraptic", ("d1",), ("gatrocraptic is a thing",), (10.0,))
    free = set(ReferenceVectors.encode(enc, [ex], ["gatrocraptic"], [7]).free_ids)
    assert free == {7, *start, *inside}


def test_reference_vectors_are_the_reference_s_own_query_and_document_vectors():
    """The student encodes a query at query length (16 pieces for the tiny model): its target must
    be the reference's vector at that length too, not the longer document form."""
    import numpy as np

    from sparse_adapt.data import TrainExample
    from sparse_adapt.training.reference import ReferenceVectors, load_reference
    from tests.conftest import make_tiny_bert

    enc = make_tiny_bert()
    assert load_reference(enc, torch.device("cpu")) is enc  # the model in memory, not a reload of its source
    query = " ".join(["where buses are stored overnight at the depot"] * 4)  # well past 16 pieces
    doc = "A bus depot stores buses overnight."
    ref = ReferenceVectors.encode(enc, [TrainExample("q1", query, ("d1",), (doc,), (10.0,))])
    as_query, as_doc = enc.encode([query], "query").toarray(), enc.encode([query], "document").toarray()
    assert not np.allclose(as_query, as_doc)  # the case: the two lengths give two vectors
    np.testing.assert_allclose(ref.queries([query], "cpu").numpy(), as_query)
    np.testing.assert_allclose(ref.documents([doc], "cpu").numpy(), enc.encode([doc], "document").toarray())
    assert ref.vocab_size == enc.vocab_size


def test_the_forms_the_docstring_calls_0_without_a_general_text_are_the_ones_that_are():
    # PreservationLoss's docstring says which forms vanish on a batch whose every text the domain
    # concerns; a form added or changed without that sentence fails here ("all-texts" still anchors
    # the domain texts' general words there).
    import re

    from sparse_adapt.losses.preservation import FORMS, PreservationLoss

    doc = " ".join(PreservationLoss.__doc__.split())
    forms = r'((?:``"[\w-]+"``(?:, | and | or )?)+)'
    said = re.search(rf"Forms? {forms} (?:is|are) zero when the batch holds no such text", doc)
    assert said, "the docstring no longer says which forms are 0 without a text the domain does not concern"
    none = torch.zeros(1, dtype=torch.bool)
    inputs = dict(
        query_weights=torch.tensor([[1.0, 2.0, 0.5]]), doc_weights=torch.tensor([[0.0, 1.0, 3.0]]),
        ref_query_weights=torch.zeros(1, 2), ref_doc_weights=torch.zeros(1, 2), general_queries=none,
        general_docs=none, student=torch.ones(1, 1), ref_scores=torch.zeros(1, 1),
        mask=torch.ones(1, 1, dtype=torch.bool), free_ids=[],
    )
    zero = {form for form in FORMS if PreservationLoss(form)(**inputs).item() == 0.0}
    assert set(re.findall(r'``"([\w-]+)"``', said.group(1))) == zero
