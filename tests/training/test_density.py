"""The distill stage counts the documents' active terms before and after, and warns when
distillation made them much denser (a sparse index that many times larger)."""

from __future__ import annotations

import json

from sparse_adapt.data import load_train
from sparse_adapt.modeling.encoder import SpladeEncoder
from sparse_adapt.training.density import DENSITY_WARNING, density_sample, density_warning, document_density
from tests.training.test_stages import Messages, _run, inputs, tiny_dir  # noqa: F401 (fixtures)


def test_density_is_the_mean_count_of_non_zero_weights(tiny_bert):
    texts = ["zorblatt metrics track spending", "install the agent", "a"]
    X = tiny_bert.encode(texts, "document")
    by_hand = sum((X[i].toarray() != 0).sum() for i in range(len(texts))) / len(texts)
    assert document_density(tiny_bert, texts) == by_hand
    assert document_density(tiny_bert, []) == 0.0


def test_the_sample_is_the_first_distinct_candidate_documents_up_to_its_size():
    # 70 lists of two candidates: "shared" in every one, then its own "doc i". Distinct texts in
    # order: shared, doc 0, doc 1, ... -> the first DENSITY_SAMPLE = 64 are shared and doc 0..62;
    # without deduplication "shared" would take every other place (32 of the 64).
    from sparse_adapt.data import TrainExample

    examples = [TrainExample(f"q{i}", "q", ("s", f"d{i}"), ("shared", f"doc {i}"), (1.0, 0.0)) for i in range(70)]
    assert density_sample(examples) == ["shared", *(f"doc {i}" for i in range(63))]


def test_the_warning_fires_only_above_the_ratio_and_names_the_setting():
    assert density_warning(100.0, DENSITY_WARNING * 100.0, 3.5) is None
    line = density_warning(100.0, 9000.0, 3.5)
    assert line is not None and "9000 terms" in line and "(100 before" in line and "~90x" in line
    assert "distill.tau_min = 3.5" in line
    assert 'distill.pres_form = "all-texts"' in line  # the measured fix, while it is not in use
    already = density_warning(100.0, 9000.0, 3.5, pres_form="all-texts")
    assert already is not None and "pres_form" not in already and "tau_min" in already
    assert density_warning(0.0, 50.0, 3.5) is None  # nothing to compare with
    assert density_warning(0.0, 0.0, 3.5) is None  # no term before either: distillation lost nothing
    # lr 0.99 (or a huge weight decay) pushed every logit below 0: a model retrieving nothing, saved unsaid
    dead = density_warning(40.0, 0.0, 3.5)
    assert dead is not None and "activate no term at all" in dead and "distill.lr" in dead
    assert "(mean 0, 40 before this stage)" in dead  # the count distillation started from, not the 0 after
    # with the measured fix already in use, the line still says what tau_min is now
    assert "a lower distill.tau_min (now 3.5) keeps the vectors sparser" in already


def test_a_run_logs_the_density_and_says_it(tiny_dir, inputs, tmp_path, monkeypatch):  # noqa: F811
    buf = Messages()
    out = tmp_path / "run"
    # a threshold every run crosses: the warning's path through a real run is what is checked
    monkeypatch.setattr("sparse_adapt.training.density.DENSITY_WARNING", 0.0)
    _run(tiny_dir, inputs, out, messages=buf)
    end = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    distill = next(r for r in end if r.get("event") == "stage_end" and r["stage"] == "distill")
    assert set(distill["doc_terms"]) == {"before", "after"}
    # "before" is the model distill started from (the dictionary checkpoint), "after" the distilled one
    sample = density_sample(load_train(inputs["train"]))
    assert distill["doc_terms"]["before"] == round(document_density(SpladeEncoder.from_pretrained(out / "dictionary"), sample), 1)
    assert distill["doc_terms"]["after"] == round(document_density(SpladeEncoder.from_pretrained(out / "distill"), sample), 1)
    assert f"documents activate {distill['doc_terms']['after']:.0f} terms on average" in buf.text()
    assert "warning: distill: documents now activate" in buf.text()
