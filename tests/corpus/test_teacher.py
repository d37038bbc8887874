"""Teachers: a tiny random cross-encoder and bi-encoder saved to disk and loaded by the real
loading code; the spec-range map; loading failures are ModelLoadError (one line, exit 2)."""

from __future__ import annotations

import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification, BertModel

from sparse_adapt.corpus.teacher import (
    SPEC_MAX, SPEC_MIN, CrossEncoderTeacher, DenseTeacher, load_teacher, to_spec_range,
)
from sparse_adapt.errors import ModelLoadError
from tests.conftest import _tokenizer

DOCS = ["the pump moves coolant", "court trial delayed", "coolant pump seals leak"]


def _config(**kw) -> BertConfig:
    tok = _tokenizer()
    kw = {"max_position_embeddings": 128, **kw}
    return BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                      intermediate_size=64, **kw)


@pytest.fixture(scope="module")
def cross_encoder_dir(tmp_path_factory):
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("ce")
    BertForSequenceClassification(_config(num_labels=1)).save_pretrained(path)
    _tokenizer().save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def encoder_dir(tmp_path_factory):
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("bi")
    BertModel(_config()).save_pretrained(path)
    _tokenizer().save_pretrained(path)
    return path


def test_cross_encoder_loads_from_a_directory_and_scores_pairs(cross_encoder_dir):
    teacher = load_teacher(str(cross_encoder_dir))
    assert isinstance(teacher, CrossEncoderTeacher) and teacher.name == str(cross_encoder_dir)
    scores = teacher.score("coolant pump", DOCS)
    assert len(scores) == 3 and len(set(scores)) == 3
    # the same pairs scored one at a time give the same logits (padding does not leak)
    assert teacher.score("coolant pump", DOCS[1:2])[0] == pytest.approx(scores[1], abs=1e-5)
    model = teacher.model
    enc = teacher.tokenizer("coolant pump", DOCS[0], return_tensors="pt")
    with torch.no_grad():
        assert model(**enc).logits[0, 0].item() == pytest.approx(scores[0], abs=1e-5)


def test_a_two_label_cross_encoder_scores_the_log_odds_of_relevance(tmp_path):
    torch.manual_seed(1)
    model = BertForSequenceClassification(_config(num_labels=2)).eval()
    model.save_pretrained(tmp_path)
    _tokenizer().save_pretrained(tmp_path)
    teacher = CrossEncoderTeacher.load(tmp_path)
    enc = teacher.tokenizer("coolant pump", DOCS[0], return_tensors="pt")
    with torch.no_grad():
        logits = model(**enc).logits[0]
    assert teacher.score("coolant pump", DOCS[:1])[0] == pytest.approx((logits[1] - logits[0]).item(), abs=1e-5)


def test_an_encoder_without_a_classification_head_is_refused(encoder_dir):
    with pytest.raises(ModelLoadError, match="not a cross-encoder: its classification head is missing"):
        load_teacher(str(encoder_dir))


def test_a_missing_teacher_is_a_model_load_error(tmp_path):
    with pytest.raises(ModelLoadError, match="teacher directory not found"):
        load_teacher(str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelLoadError, match="cannot load the teacher"):
        load_teacher(str(tmp_path / "empty"))


def test_dense_teacher_is_mean_pooled_cosine(encoder_dir):
    teacher = DenseTeacher.load(encoder_dir)
    scores = teacher.score(DOCS[0], DOCS)
    assert scores[0] == pytest.approx(1.0, abs=1e-5)
    assert all(-1.0 - 1e-6 <= s <= 1.0 + 1e-6 for s in scores)
    enc = teacher.tokenizer(DOCS[1], return_tensors="pt")
    with torch.no_grad():
        h = teacher.model(**enc).last_hidden_state[0].mean(0)
        q = teacher.model(**teacher.tokenizer(DOCS[0], return_tensors="pt")).last_hidden_state[0].mean(0)
    assert scores[1] == pytest.approx(torch.nn.functional.cosine_similarity(h, q, dim=0).item(), abs=1e-5)


def test_spec_range_map_is_per_list_min_max():
    assert to_spec_range([0.2, 0.8, 0.5]) == [SPEC_MIN, SPEC_MAX, 1.0]
    assert to_spec_range([3.0, -1.0]) == [10.0, -8.0]
    assert to_spec_range([0.4, 0.4]) == [SPEC_MIN, SPEC_MIN]


def test_a_classifier_of_three_labels_is_refused(tmp_path):
    # a 3-way classifier (e.g. NLI) has no single relevance score to take
    BertForSequenceClassification(_config(num_labels=3)).save_pretrained(tmp_path)
    _tokenizer().save_pretrained(tmp_path)
    with pytest.raises(ModelLoadError, match="has 3 labels; a relevance cross-encoder has 1 or 2"):
        load_teacher(str(tmp_path))


def test_a_list_longer_than_one_batch_is_scored_whole(cross_encoder_dir):
    # 42 candidates: one full batch of 32 and a second of 10, none dropped at the seam
    teacher = load_teacher(str(cross_encoder_dir))
    docs = [f"{d} {i}" for i in range(14) for d in DOCS]
    scores = teacher.score("coolant pump", docs)
    assert len(scores) == len(docs)
    for i in (31, 32, 41):
        assert scores[i] == pytest.approx(teacher.score("coolant pump", [docs[i]])[0], abs=1e-5)


def test_the_spec_range_map_is_linear_between_the_ends():
    # 1 of 7 between the worst and the best: -8 + 18 / 7, kept to 4 decimals
    assert to_spec_range([0.0, 1.0, 7.0]) == [SPEC_MIN, pytest.approx(-8.0 + 18.0 / 7.0, abs=1e-4), SPEC_MAX]


def test_a_dense_teacher_keeps_the_name_it_is_given(encoder_dir):
    assert DenseTeacher.load(encoder_dir, name="mine").name == "mine"
    assert DenseTeacher.load(encoder_dir).name == str(encoder_dir)


@pytest.mark.slow
def test_the_default_teacher_is_the_offline_minilm_bi_encoder():
    teacher = load_teacher()
    assert isinstance(teacher, DenseTeacher) and teacher.name == "offline-minilm"
    scores = teacher.score("coolant pump leaking", DOCS)
    assert scores[2] > scores[1] and scores[0] > scores[1]  # the pump documents over the trial


def test_trust_remote_code_reaches_the_cross_encoder(monkeypatch):
    seen = {}
    monkeypatch.setattr(CrossEncoderTeacher, "load",
                        classmethod(lambda cls, name, trust_remote_code=False: seen.update(
                            name=name, trust=trust_remote_code) or "loaded"))
    assert load_teacher("org/ce", trust_remote_code=True) == "loaded"
    assert seen == {"name": "org/ce", "trust": True}


def test_words_past_what_a_teacher_reads_do_not_change_its_scores(tmp_path):
    # The models hold more positions than the teachers read (256 bi-encoder, 512 cross-encoder
    # pieces): a longer document is cut there, not passed whole to fail past the last position.
    torch.manual_seed(0)
    BertModel(_config(max_position_embeddings=300)).save_pretrained(tmp_path / "bi")
    BertForSequenceClassification(_config(num_labels=1, max_position_embeddings=520)).save_pretrained(tmp_path / "ce")
    for name in ("bi", "ce"):
        _tokenizer().save_pretrained(tmp_path / name)
    long = "coolant pump seals leak " * 150  # 600 words
    for teacher in (DenseTeacher.load(tmp_path / "bi"), CrossEncoderTeacher.load(tmp_path / "ce")):
        [a, b] = teacher.score("coolant pump", [long, long + "court trial delayed " * 50])
        assert b == pytest.approx(a, abs=1e-5)
