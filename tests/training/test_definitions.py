"""Definition queries: which documents are positives and hard negatives, and the stage using them."""

from __future__ import annotations

import json

import pytest

from sparse_adapt.data import DictionaryEntry, Document
from sparse_adapt.training.config_files import config_from_dict
from sparse_adapt.training.definitions import NEGATIVE, POSITIVE, definition_examples, entry_words
from sparse_adapt.training.pipeline import run_pipeline
from tests.training.test_stages import SMALL, inputs, tiny_dir  # noqa: F401 (fixtures)

DOCS = [
    Document("a", "The Fenwarra starter rises slowly in the cold."),
    Document("b", "A car starter motor failed in the cold."),
    Document("c", "Umbrase keeps the crumb soft for days."),
    Document("d", "Soft bread crumbs for the crust of a pie."),
    Document("e", "The stock market rose in the morning."),
]
TERMS = ["Fenwarra", "fenwarra", "umbrase"]


def test_entry_words_are_the_domain_terms_inside_its_name_else_the_name():
    assert entry_words(DictionaryEntry("Fenwarra starter", "x", ("y",)), TERMS) == ["Fenwarra", "fenwarra"]
    assert entry_words(DictionaryEntry("ZFV", "x", ("y",)), TERMS) == ["ZFV"]


def test_positives_name_the_term_negatives_are_the_top_ranked_others(tiny_bert):
    entries = [DictionaryEntry("Fenwarra starter", "a cold-tolerant rye sourdough starter", ("z",)),
               DictionaryEntry("Umbrase", "a flour enzyme that keeps the crumb soft", ("z",)),
               DictionaryEntry("Blorp", "never used anywhere", ("z",))]
    out = definition_examples(entries, DOCS, TERMS, tiny_bert, negatives=2)
    assert [ex.query for ex in out] == [entries[0].definition, entries[1].definition]  # Blorp: no document
    first = out[0]
    assert first.doc_ids[0] == "a" and first.teacher_scores[0] == POSITIVE
    assert "a" not in first.doc_ids[1:] and len(first.doc_ids) == 3  # negatives: 2 documents not naming it
    assert first.teacher_scores[1:] == (NEGATIVE, NEGATIVE)
    assert out[1].doc_ids[0] == "c" and "c" not in out[1].doc_ids[1:]
    # every other document is a candidate negative, those about other terms included
    wide = definition_examples(entries, DOCS, TERMS, tiny_bert, negatives=10)
    assert set(wide[0].doc_ids[1:]) == {"b", "c", "d", "e"}


def test_negatives_are_the_best_scored_others_ties_by_doc_id(tiny_bert, monkeypatch):
    # The starting model's scores for the definition, set by hand: b 3.0, d 1.0, e 1.0, c unscored
    # (0, it shares no term). The two hard negatives are the highest: b, then the d/e tie to the
    # smaller id d; the positive a is never one, whatever it scores.
    from sparse_adapt.retrieval import evaluation

    monkeypatch.setattr(evaluation, "score_in_memory",
                        lambda splade, docs, queries: {q.qid: {"a": 9.0, "b": 3.0, "d": 1.0, "e": 1.0} for q in queries})
    entry = DictionaryEntry("Fenwarra starter", "a cold-tolerant rye sourdough starter", ("z",))
    (ex,) = definition_examples([entry], DOCS, TERMS, tiny_bert, negatives=2)
    assert ex.doc_ids == ("a", "b", "d")
    assert ex.teacher_scores == (POSITIVE, NEGATIVE, NEGATIVE)


def test_a_document_naming_the_domain_term_inside_an_entrys_name_is_a_positive(tiny_bert):
    # "Fenwarra starter" is about the term Fenwarra: a text saying "Fenwarra" alone names it too.
    docs = [*DOCS, Document("f", "Fenwarra loaves proof overnight.")]
    entry = DictionaryEntry("Fenwarra starter", "a cold-tolerant rye sourdough starter", ("z",))
    (ex,) = definition_examples([entry], docs, TERMS, tiny_bert, negatives=0)
    assert ex.doc_ids == ("a", "f") and ex.teacher_scores == (POSITIVE, POSITIVE)


def test_definition_query_ids_count_the_dictionary_entries_from_one(tiny_bert):
    # Numbered by entry, so an id names the same entry whichever entries have no document.
    entries = [DictionaryEntry("Blorp", "never used anywhere", ("z",)),
               DictionaryEntry("Umbrase", "a flour enzyme that keeps the crumb soft", ("z",)),
               DictionaryEntry("Fenwarra starter", "a cold-tolerant rye sourdough starter", ("z",))]
    out = definition_examples(entries, DOCS, TERMS, tiny_bert, negatives=1)
    assert [ex.qid for ex in out] == ["definition-2", "definition-3"]


def test_tied_negatives_go_to_the_smaller_doc_id_whatever_the_corpus_order(tiny_bert, monkeypatch):
    from sparse_adapt.retrieval import evaluation

    monkeypatch.setattr(evaluation, "score_in_memory",
                        lambda splade, docs, queries: {q.qid: {"b": 1.0, "d": 1.0, "e": 1.0} for q in queries})
    entry = DictionaryEntry("Fenwarra starter", "a cold-tolerant rye sourdough starter", ("z",))
    (ex,) = definition_examples([entry], DOCS[::-1], TERMS, tiny_bert, negatives=2)
    assert ex.doc_ids == ("a", "b", "d")


def test_chosen_negatives_are_taken_as_saved_without_scoring_the_corpus_again(tiny_bert, monkeypatch):
    # A resumed stage: the lists its start chose, in their order, and no pass of the (half-trained)
    # model over the corpus; an id the corpus no longer holds is dropped, not a KeyError.
    from sparse_adapt.retrieval import evaluation
    from sparse_adapt.training.definitions import negative_ids

    monkeypatch.setattr(evaluation, "score_in_memory",
                        lambda splade, docs, queries: {q.qid: {"e": 2.0, "b": 1.0} for q in queries})
    entry = DictionaryEntry("Fenwarra starter", "a cold-tolerant rye sourdough starter", ("z",))
    (scored,) = definition_examples([entry], DOCS, TERMS, tiny_bert, negatives=2)
    assert negative_ids([scored]) == {"definition-1": ["e", "b"]}

    def refuse(*args):
        raise AssertionError("the corpus was scored again")

    monkeypatch.setattr(evaluation, "score_in_memory", refuse)
    (again,) = definition_examples([entry], DOCS, TERMS, tiny_bert, negatives=2,
                                   chosen_negatives=negative_ids([scored]))
    assert again == scored
    (gone,) = definition_examples([entry], DOCS, TERMS, tiny_bert, negatives=2,
                                  chosen_negatives={"definition-1": ["zz", "d"]})
    assert gone.doc_ids == ("a", "d") and gone.teacher_scores == (POSITIVE, NEGATIVE)


def test_each_entrys_negatives_are_ranked_for_its_own_definition(tiny_bert, monkeypatch):
    # Stand-in scores by query text: the definitions, not the terms, are what a user would type.
    from sparse_adapt.retrieval import evaluation

    entries = [DictionaryEntry("Fenwarra starter", "a cold-tolerant rye sourdough starter", ("z",)),
               DictionaryEntry("Umbrase", "a flour enzyme that keeps the crumb soft", ("z",))]
    scores = {entries[0].definition: {"e": 2.0}, entries[1].definition: {"d": 2.0}}
    monkeypatch.setattr(evaluation, "score_in_memory",
                        lambda splade, docs, queries: {q.qid: scores.get(q.text, {}) for q in queries})
    out = definition_examples(entries, DOCS, TERMS, tiny_bert, negatives=1)
    assert [ex.doc_ids for ex in out] == [("a", "e"), ("c", "d")]
    assert out[0].doc_texts == (DOCS[0].text, DOCS[4].text)  # what the student encodes


def test_no_definition_query_and_no_scoring_when_no_document_names_an_entry(tiny_bert, monkeypatch):
    from sparse_adapt.retrieval import evaluation

    def refuse(*args):
        raise AssertionError("the corpus was scored for no query")

    monkeypatch.setattr(evaluation, "score_in_memory", refuse)
    assert definition_examples([DictionaryEntry("Blorp", "never used anywhere", ("z",))], DOCS, TERMS, tiny_bert,
                               negatives=2) == []


def test_an_entry_without_saved_negatives_keeps_its_positives_alone(tiny_bert, monkeypatch):
    # Saved lists that lack an entry's id (none was chosen for it, or the dictionary's entries
    # changed) give it no negatives; they are still not re-chosen by the half-trained model.
    from sparse_adapt.retrieval import evaluation

    def refuse(*args):
        raise AssertionError("the corpus was scored again")

    monkeypatch.setattr(evaluation, "score_in_memory", refuse)
    entry = DictionaryEntry("Fenwarra starter", "a cold-tolerant rye sourdough starter", ("z",))
    (ex,) = definition_examples([entry], DOCS, TERMS, tiny_bert, negatives=2, chosen_negatives={})
    assert ex.doc_ids == ("a",) and ex.teacher_scores == (POSITIVE,)


def test_distill_adds_one_query_per_defined_term(tiny_dir, inputs, tmp_path):
    messages = []
    from sparse_adapt.progress import Hooks

    cfg = {**SMALL, "distill": {**SMALL["distill"], "epochs": 1, "definition_negatives": 1}}
    run_pipeline(base=str(tiny_dir), out=tmp_path / "run", stages=("extend", "distill"), config=config_from_dict(cfg),
                 seed=0, hooks=Hooks(message=messages.append), **inputs)
    assert any("2 definition queries added" in m for m in messages)  # Zorblatt and API are both in the docs
    log = [json.loads(x) for x in (tmp_path / "run" / "train_log.jsonl").read_text().splitlines()]
    steps = [r for r in log if r.get("stage") == "distill" and "step" in r]
    assert len(steps) == 2  # (2 train + 2 definition queries) / batch 2
    assert any("definition-1" in json.dumps(r) for r in log if r.get("event") == "stage_end")
    with pytest.raises(Exception, match="definition_negatives"):
        config_from_dict({"distill": {"definition_negatives": -1}})


def test_a_distill_resumed_mid_stage_keeps_the_definition_negatives_its_start_chose(tiny_dir, inputs, tmp_path,
                                                                                       monkeypatch):
    """The resumed stage asked its half-trained model for them: other lists than the unbroken run's."""
    import torch

    from sparse_adapt.training import definitions, loop as loop_mod, stages as stages_mod
    from sparse_adapt.modeling.encoder import SpladeEncoder

    cfg = {**SMALL, "distill": {**SMALL["distill"], "definition_negatives": 2, "checkpoint_every": 1}}
    made = []

    def recording(*args, **kwargs):
        made.append((args[5] if len(args) > 5 else kwargs.get("chosen_negatives"), real(*args, **kwargs)))
        return made[-1][1]

    real = definitions.definition_examples
    monkeypatch.setattr(stages_mod, "definition_examples", recording)
    run = dict(base=str(tiny_dir), stages=("extend", "distill"), seed=0, **inputs)
    unbroken = run_pipeline(out=tmp_path / "ref", config=config_from_dict(cfg), **run)
    clip, steps = loop_mod.nn.utils.clip_grad_norm_, []

    class PowerCut(Exception):
        pass

    def clip_then_cut(parameters, max_norm):
        steps.append(1)
        if len(steps) == 3:  # distill's third optimiser step (epoch 2), before it is taken
            raise PowerCut()
        return clip(parameters, max_norm)

    with monkeypatch.context() as m:
        m.setattr(loop_mod.nn.utils, "clip_grad_norm_", clip_then_cut)
        with pytest.raises(PowerCut):
            run_pipeline(out=tmp_path / "run", config=config_from_dict(cfg), **run)
    # the starting model's choice, held in the checkpoint, then not asked of the half-trained model
    resumed = run_pipeline(out=tmp_path / "run", config=config_from_dict(cfg), **run)
    assert [c for c, _ in made] == [None, None, definitions.negative_ids(made[0][1])]
    assert made[2][1] == made[0][1] and any(NEGATIVE in ex.teacher_scores for ex in made[0][1])
    a = SpladeEncoder.from_pretrained(unbroken).mlm.state_dict()
    b = SpladeEncoder.from_pretrained(resumed).mlm.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_definition_scores_are_on_the_scale_the_module_gives_and_the_bundled_training_lists_use():
    """The stand-in teacher scores, as the module docstring gives them, are the highest and the
    lowest score of the bundled ``train.jsonl``: a definition query must rank like a teacher's."""
    import re

    from sparse_adapt.data import load_train
    from sparse_adapt.defaults import BUNDLED
    from sparse_adapt.training import definitions

    given = re.search(r"positives up to ([-\d.]+),\s+hard negatives ([-\d.]+)\)", definitions.__doc__)
    assert (float(given[1]), float(given[2])) == (POSITIVE, NEGATIVE)
    scores = [s for ex in load_train(BUNDLED.train) for s in ex.teacher_scores]
    assert (max(scores), min(scores)) == (POSITIVE, NEGATIVE)
