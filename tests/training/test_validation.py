"""Validation and selection: the objective, the pure selection on constructed logs, the
seeded split, and the distill stage keeping the best epoch's weights and stopping early."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from sparse_adapt.data import Document, TrainExample
from sparse_adapt.modeling.encoder import SpladeEncoder
from sparse_adapt.training import validation as validation_mod
from sparse_adapt.training.config_files import config_from_dict
from sparse_adapt.training.pipeline import run_pipeline
from sparse_adapt.training.validation import (
    Selection, ValidationSet, objective, query_kind, select_epoch, split_valid, teacher_grade,
)
from tests.training.test_stages import SMALL, inputs, tiny_dir, valid_file  # noqa: F401 (fixtures)


def _ex(qid: str, query: str, positive: str, negative: str = "an unrelated text") -> TrainExample:
    return TrainExample(qid, query, (f"{qid}+", f"{qid}-"), (positive, negative), (10.0, -8.0))


def test_objective_rewards_domain_gain_and_penalises_only_control_loss():
    ref = {"domain": 0.5, "control": 0.9}
    assert objective({"domain": 0.7, "control": 0.95}, ref, 2.0) == pytest.approx(0.2)  # control gain not rewarded
    assert objective({"domain": 0.7, "control": 0.8}, ref, 2.0) == pytest.approx(0.2 - 2 * 0.1)
    assert objective({"domain": None, "control": 0.8}, ref, 3.0) == pytest.approx(-0.3)


def test_selection_picks_the_epoch_with_the_better_objective_not_the_last_or_lowest_loss():
    log = [  # a constructed train_log: epoch 3 has the lowest loss, epoch 2 the best objective
        {"epoch": 1, "objective": 0.05, "loss": 3.0},
        {"epoch": 3, "objective": 0.10, "loss": 1.0},
        {"epoch": 2, "objective": 0.20, "loss": 2.0},
        {"epoch": 4, "objective": float("nan"), "loss": 0.5},
    ]
    sel = select_epoch(log)
    assert sel.best_epoch == 2 and sel.best_objective == pytest.approx(0.2)
    assert not sel.stop  # patience 0: never stop early


def test_selection_ties_go_to_the_earliest_epoch_and_min_delta_counts():
    log = [{"epoch": 1, "objective": 0.3}, {"epoch": 2, "objective": 0.3}, {"epoch": 3, "objective": 0.31}]
    assert select_epoch(log).best_epoch == 3
    assert select_epoch(log, min_delta=0.05).best_epoch == 1
    assert select_epoch(log[:2]).best_epoch == 1  # an exact tie, min_delta 0: still the earlier


def test_early_stopping_after_patience_epochs_without_improvement():
    log = [{"epoch": 1, "objective": 0.1}, {"epoch": 2, "objective": 0.4}, {"epoch": 3, "objective": 0.3}]
    assert not select_epoch(log, patience=2).stop
    log.append({"epoch": 4, "objective": 0.39})
    assert select_epoch(log, patience=2).stop
    assert select_epoch([{"epoch": 1, "objective": math.nan}], patience=1).best_epoch is None
    # records in any order (a resumed run's history): the last epoch is the highest, not the last listed
    shuffled = [{"epoch": 3, "objective": 0.1}, {"epoch": 1, "objective": 0.4}, {"epoch": 2, "objective": 0.3}]
    assert select_epoch(shuffled, patience=2) == Selection(1, 0.4, True)


def test_query_kind_and_qrels_rule():
    terms = ["Zorblatt", "XR-7200"]
    assert query_kind(_ex("a", "spending reports", "Zorblatt metrics track spending"), terms) == "domain"
    assert query_kind(_ex("b", "what is xr-7200", "a plain text"), terms) == "domain"
    assert query_kind(_ex("c", "bus depot", "Buses park here; zorblattish is not a term"), terms) == "control"
    assert [teacher_grade(s) for s in (10, 8, 0.5, 0, -8)] == [2, 2, 1, 0, 0]


def test_split_is_seeded_per_kind_and_keeps_each_kind_in_training():
    terms = ["Zorblatt"]
    examples = [_ex(f"d{i}", f"query {i}", "Zorblatt text") for i in range(4)]
    examples += [_ex(f"c{i}", f"control {i}", "plain text") for i in range(8)]
    train, valid = split_valid(examples, 0.25, seed=1, terms=terms)
    assert len(valid) == 3 and len(train) == 9
    kinds = [query_kind(ex, terms) for ex in valid]
    assert kinds.count("domain") == 1 and kinds.count("control") == 2
    assert split_valid(examples, 0.25, seed=1, terms=terms) == (train, valid)
    assert split_valid(examples, 0.0, seed=1, terms=terms) == (examples, [])
    one = [_ex("d0", "q", "Zorblatt text"), _ex("c0", "c", "plain")]
    train, valid = split_valid(one, 0.5, seed=0, terms=terms)
    assert len(train) == 2 and valid == []  # a kind with one query keeps it for training


def test_validation_set_ranks_the_corpus_plus_missing_candidates(tiny_bert):
    docs = [Document("x1", "a bus depot"), Document("x2", "Zorblatt routing")]
    vset = ValidationSet.build([_ex("v1", "Zorblatt", "Zorblatt routing"), _ex("v2", "depot", "a bus depot")],
                               docs, ["Zorblatt"])
    assert {d.doc_id for d in vset.documents} == {"x1", "x2", "v1+", "v1-", "v2+", "v2-"}
    assert vset.kinds == {"domain": ["v1"], "control": ["v2"]}
    scores = vset.measure(tiny_bert)
    assert set(scores) == {"domain", "control"} and all(0.0 <= v <= 1.0 for v in scores.values())


class TableEncoder:
    """Vectors looked up by text: rankings worked out by hand."""

    def __init__(self, table: dict[str, list[float]]):
        self.table = table

    def encode(self, texts, kind, batch_size=32, **options):
        return sp.csr_matrix(np.array([self.table[t] for t in texts]))


def test_validation_measures_each_kind_s_ndcg_as_worked_by_hand():
    table = {
        "Zorblatt": [1, 0], "depot": [0, 1],  # the queries
        "Zorblatt routing": [1.0, 0], "Zorblatt fleet routing": [0.5, 0], "noise one": [2.0, 0],
        "a bus depot": [0, 1.0], "the depot yard": [0, 3.0], "noise two": [0, 0],
    }
    docs = [Document("x1", "a bus depot"), Document("x2", "Zorblatt routing")]
    v1 = _ex("v1", "Zorblatt", "Zorblatt fleet routing", "noise one")  # domain: names the term
    v2 = _ex("v2", "depot", "the depot yard", "noise two")  # control
    vset = ValidationSet.build([v1, v2], docs, ["Zorblatt"])
    # v1 ranks v1- (2.0), x2 (1.0), v1+ (0.5): its one relevant document (grade 2) third,
    # nDCG@10 = (2 / log2(4)) / (2 / log2(2)) = 0.5. v2 ranks v2+ (3.0) first: 1.0.
    assert vset.measure(TableEncoder(table)) == {"domain": pytest.approx(0.5), "control": pytest.approx(1.0)}
    # no domain query at all: None, not 0 (objective() then leaves the kind out)
    only_control = ValidationSet.build([v2], docs, ["Zorblatt"])
    assert only_control.measure(TableEncoder(table)) == {"domain": None, "control": pytest.approx(1.0)}
    # a query the teacher judged nothing relevant for has no nDCG: left out, not scored 0
    v3 = TrainExample("v3", "Zorblatt", ("v3a", "v3b"), ("noise two", "noise two"), (0.0, -8.0))
    with_unjudged = ValidationSet.build([v1, v2, v3], docs, ["Zorblatt"])
    assert with_unjudged.kinds["domain"] == ["v1", "v3"]
    assert with_unjudged.measure(TableEncoder(table)) == {"domain": pytest.approx(0.5), "control": pytest.approx(1.0)}


def test_distill_keeps_the_best_epoch_and_stops_early(tiny_dir, inputs, valid_file, tmp_path, monkeypatch):
    # Scripted validation: reference, epoch 0, then epochs 1..; epoch 2 is best; patience 2
    # stops after epoch 4 of 6. The weights at the end must be epoch 2's.
    script = iter([0.5, 0.5, 0.55, 0.9, 0.6, 0.7, 0.99, 0.99])
    seen: dict[int, torch.Tensor] = {}

    def measure(self, splade):
        value = next(script)
        seen[len(seen)] = splade.mlm.get_input_embeddings().weight.detach().clone()
        return {"domain": value, "control": 1.0}

    monkeypatch.setattr(validation_mod.ValidationSet, "measure", measure)
    valid = valid_file
    cfg = {**SMALL, "distill": {**SMALL["distill"], "epochs": 6, "patience": 2}}
    final = run_pipeline(base=str(tiny_dir), out=tmp_path / "run", stages=("extend", "distill"),
                         config=config_from_dict(cfg), seed=0, valid=valid, **inputs)
    log = [json.loads(x) for x in (tmp_path / "run" / "train_log.jsonl").read_text().splitlines()]
    val = [r for r in log if r.get("event") == "validation"]
    assert [r["epoch"] for r in val] == ["reference", 0, 1, 2, 3, 4]
    assert val[-1]["stop"] and val[-1]["best_epoch"] == 2
    assert val[3]["objective"] == pytest.approx(0.4)
    end = next(r for r in log if r.get("event") == "stage_end" and r["stage"] == "distill")
    assert end["best_epoch"] == 2 and end["epochs_run"] == 4
    assert max(r["epoch"] for r in log if r.get("stage") == "distill" and "step" in r) == 4
    kept = SpladeEncoder.from_pretrained(final).mlm.get_input_embeddings().weight
    torch.testing.assert_close(kept, seen[3])  # call 3 = after epoch 2
    assert not torch.equal(kept, seen[5])


def test_crash_mid_distill_resumes_the_selection_with_its_history(tiny_dir, inputs, valid_file, tmp_path, monkeypatch):
    # Validation after every epoch, a checkpoint after every step, a crash in epoch 3: the
    # rerun must log and keep what an uninterrupted run does (same records, same epoch kept,
    # same weights), not re-measure "epoch 0" on the resumed model or forget epochs 1-2.
    from sparse_adapt.training import loop as loop_mod

    valid = valid_file
    cfg = config_from_dict({**SMALL, "distill": {**SMALL["distill"], "epochs": 4, "checkpoint_every": 1}})
    run = dict(base=str(tiny_dir), stages=("extend", "distill"), config=cfg, seed=0, valid=valid, **inputs)

    def validation(out):
        log = [json.loads(x) for x in (out / "train_log.jsonl").read_text().splitlines()]
        end = next(r for r in log if r.get("event") == "stage_end" and r["stage"] == "distill")
        return [r for r in log if r.get("event") == "validation"], end["best_epoch"], end["epochs_run"]

    reference = run_pipeline(out=tmp_path / "ref", **run)
    ref_log = [json.loads(x) for x in (tmp_path / "ref" / "train_log.jsonl").read_text().splitlines()]
    steps_per_epoch = sum(1 for r in ref_log if r.get("stage") == "distill" and r.get("epoch") == 1 and "step" in r)
    real, calls = loop_mod.nn.utils.clip_grad_norm_, []

    class PowerCut(Exception):
        pass

    def clip_then_cut(parameters, max_norm):
        calls.append(1)
        if len(calls) == 2 * steps_per_epoch + 1:  # the first step of epoch 3
            raise PowerCut()
        return real(parameters, max_norm)

    out = tmp_path / "run"
    with monkeypatch.context() as m:
        m.setattr(loop_mod.nn.utils, "clip_grad_norm_", clip_then_cut)
        with pytest.raises(PowerCut):
            run_pipeline(out=out, **run)
    assert (out / "distill.partial").is_dir()
    final = run_pipeline(out=out, **run)
    records, best, epochs_run = validation(out)
    ref_records, ref_best, ref_epochs = validation(tmp_path / "ref")
    assert [r["epoch"] for r in records] == ["reference", 0, 1, 2, 3, 4]
    assert records == ref_records and (best, epochs_run) == (ref_best, ref_epochs)
    kept = SpladeEncoder.from_pretrained(final).mlm.state_dict()
    expected = SpladeEncoder.from_pretrained(reference).mlm.state_dict()
    assert all(torch.equal(kept[k], expected[k]) for k in expected)


def test_a_config_file_s_settings_this_run_cannot_use_are_warned_about(tiny_dir, inputs, tmp_path):
    from tests.training.test_stages import Messages
    from sparse_adapt.training.config_files import config_from_dict as from_dict
    from sparse_adapt.training.pipeline import unused_settings

    toml = tmp_path / "cfg.toml"
    toml.write_text("[distill]\npatience = 2\ninterpolate = 0.5\nepochs = 1\nbatch_size = 2\n", encoding="utf-8")
    buf = Messages()
    run_pipeline(base=str(tiny_dir), out=tmp_path / "run", stages=("extend",), config=toml, hooks=buf.hooks(), **inputs)
    warned = [m for m in buf if m.startswith("warning:")]
    assert len(warned) == 2 and all(str(toml) in m for m in warned)
    assert "distill.interpolate 0.5 has no effect: the run has no distill stage" in warned[0]
    assert "distill.patience 2 has no effect" in warned[1]
    # With the distill stage: only patience, and only while nothing validates.
    cfg = from_dict({"distill": {"patience": 2, "interpolate": 0.5}})
    assert unused_settings(cfg, ("distill",), validating=False) == [
        "distill.patience 2 has no effect without validation queries (--valid FILE or distill.valid_fraction)"]
    assert unused_settings(cfg, ("distill",), validating=True) == []
    cfg.distill.valid_fraction = 0.2
    assert unused_settings(cfg, ("distill",), validating=False) == []
    # Defaults are never reported.
    assert unused_settings(from_dict({}), ("extend",), validating=False) == []
    # A TrainConfig (report, benchmark and tune share one across stage subsets) is not warned about.
    buf = Messages()
    run_pipeline(base=str(tiny_dir), out=tmp_path / "shared", stages=("extend",), hooks=buf.hooks(),
                 config=from_dict({"distill": {"patience": 2, "interpolate": 0.5}}), **inputs)
    assert not [m for m in buf if m.startswith("warning:")]


def test_a_stage_bounded_below_one_epoch_is_still_validated(tiny_dir, inputs, valid_file, tmp_path, monkeypatch):
    """max_steps 1 of a longer epoch once ended distill with no validation at all: "kept epoch
    None of 0 (objective -inf)", and tune scored every trial -inf."""
    script = iter([0.5, 0.5, 0.8])  # reference, epoch 0, the cut epoch 1

    def measure(self, splade):
        return {"domain": next(script), "control": 1.0}

    monkeypatch.setattr(validation_mod.ValidationSet, "measure", measure)
    valid = valid_file
    cfg = {**SMALL, "distill": {**SMALL["distill"], "batch_size": 1, "max_steps": 1}}
    run_pipeline(base=str(tiny_dir), out=tmp_path / "run", stages=("distill",), config=config_from_dict(cfg),
                 seed=0, valid=valid, **inputs)
    log = [json.loads(x) for x in (tmp_path / "run" / "train_log.jsonl").read_text().splitlines()]
    assert sum("step" in r for r in log if r.get("stage") == "distill") == 1
    val = [r for r in log if r.get("event") == "validation"]
    assert [r["epoch"] for r in val] == ["reference", 0, 1]
    end = next(r for r in log if r.get("event") == "stage_end")
    assert end["best_epoch"] == 1 and end["best_objective"] == pytest.approx(0.3)


def test_a_stage_of_zero_epochs_says_it_trains_nothing(tiny_dir, inputs, tmp_path):
    from tests.training.test_stages import Messages

    buf = Messages()
    cfg = {**SMALL, "distill": {**SMALL["distill"], "epochs": 0}}
    run_pipeline(base=str(tiny_dir), out=tmp_path / "run", stages=("distill",), config=config_from_dict(cfg),
                 hooks=buf.hooks(), **inputs)
    assert "warning: distill: distill.epochs 0 and no max_steps: the stage trains nothing" in buf


def test_a_valid_fraction_that_holds_out_no_query_stops_before_training(tiny_dir, inputs, tmp_path):
    from sparse_adapt.errors import ConfigError

    cfg = {**SMALL, "distill": {**SMALL["distill"], "valid_fraction": 0.01}}
    with pytest.raises(ConfigError, match="distill.valid_fraction 0.01 of 2 training queries holds out none"):
        run_pipeline(base=str(tiny_dir), out=tmp_path / "run", stages=("extend", "warmup", "distill"),
                     config=config_from_dict(cfg), **inputs)
    assert not (tmp_path / "run").exists()


def test_a_validation_set_without_a_control_query_says_the_penalty_does_nothing(tiny_dir, inputs, tmp_path):
    from tests.training.test_stages import DOCS, VALID, Messages, _jsonl

    control = {"qid": "c1", "query": "rain expected tomorrow", "doc_ids": ["x1", "d1"],
               "doc_texts": ["Rain is expected tomorrow morning in the north.", DOCS[0]["text"]],
               "teacher_scores": [10.0, -8.0]}
    said = {}
    unpenalised = {**SMALL, "distill": {**SMALL["distill"], "control_penalty": 0.0}}  # nothing to lose: no warning
    for name, rows, cfg in (("domain-only", VALID, SMALL), ("both", [*VALID, control], SMALL),
                            ("no-penalty", VALID, unpenalised)):
        buf = Messages()
        run_pipeline(base=str(tiny_dir), out=tmp_path / name, stages=("extend", "distill"), config=config_from_dict(cfg),
                     seed=0, valid=_jsonl(tmp_path / f"{name}.jsonl", rows), hooks=buf.hooks(), **inputs)
        said[name] = [m for m in buf if "no validation query is a control" in m]
    assert len(said["domain-only"]) == 1 and "distill.control_penalty has no effect" in said["domain-only"][0]
    assert said["both"] == [] and said["no-penalty"] == []


def test_a_valid_file_holding_training_queries_is_refused(tiny_dir, inputs, tmp_path):
    """``--valid train.jsonl`` selected epochs (and tune's trials) by queries the model was distilled on."""
    from sparse_adapt.errors import ConfigError
    from tests.training.test_stages import TRAIN, VALID, _jsonl

    renamed = {**TRAIN[1], "qid": "v9", "query": "  Install the AGENT "}  # another id, the same query
    for rows, example in (([*VALID, TRAIN[0]], "'q1', the text of training query 'q1'"),
                          ([renamed], "'v9', the text of training query 'q2'")):
        with pytest.raises(ConfigError, match=rf"1 of its {len(rows)} queries are training queries too \(e.g. {example}\)"):
            run_pipeline(base=str(tiny_dir), out=tmp_path / "run", stages=("extend", "distill"),
                         config=config_from_dict(SMALL), seed=0, valid=_jsonl(tmp_path / "v.jsonl", rows), **inputs)
        assert not (tmp_path / "run").exists()  # refused before anything is trained


def test_a_split_by_query_says_how_many_held_out_queries_share_a_positive_with_training():
    from sparse_adapt.training.validation import shared_positives

    def ex(qid, positives, negatives=()):
        docs = (*positives, *negatives)
        return TrainExample(qid, qid, docs, docs, (*[10.0] * len(positives), *[-8.0] * len(negatives)))

    train = [ex("t1", ["a", "b"]), ex("t2", ["c"], ["d"])]
    # v1 shares a; v2's d is only a training negative; v3 shares nothing; v4 shares c
    valid = [ex("v1", ["a"]), ex("v2", ["d"]), ex("v3", ["e"]), ex("v4", ["f", "c"])]
    assert shared_positives(train, valid) == 2
    assert shared_positives([], valid) == 0


def test_a_valid_query_sharing_only_its_id_with_a_training_query_is_taken(tiny_dir, inputs, tmp_path):
    """make-train names queries by document and kind: two runs over one corpus share ids for other crops."""
    from tests.training.test_stages import TRAIN, _jsonl

    same_id = {**TRAIN[0], "query": "a different crop of the same document"}
    final = run_pipeline(base=str(tiny_dir), out=tmp_path / "run", stages=("extend", "distill"),
                         config=config_from_dict(SMALL), seed=0, valid=_jsonl(tmp_path / "v.jsonl", [same_id]), **inputs)
    assert final.is_dir()  # validated on it, not refused


def test_a_candidate_the_teacher_scored_zero_does_not_make_its_query_a_domain_one():
    # grade 0 is not relevant (teacher_grade): a domain text the teacher judged unrelated says nothing of the query
    ex = TrainExample("z", "bus depot", ("z+", "z0"), ("a bus depot", "Zorblatt routing"), (10.0, 0.0))
    assert query_kind(ex, ["Zorblatt"]) == "control"


def test_the_split_does_not_depend_on_which_kind_the_file_lists_first():
    # drawn per kind: interleaving the kinds otherwise holds out the same queries
    terms = ["Zorblatt"]
    domain = [_ex(f"d{i}", f"query {i}", "Zorblatt text") for i in range(4)]
    control = [_ex(f"c{i}", f"control {i}", "plain text") for i in range(8)]
    held = [{ex.qid for ex in split_valid(order, 0.25, seed=1, terms=terms)[1]}
            for order in (domain + control, control + domain)]
    assert held[0] == held[1]


@pytest.mark.parametrize("fraction", [-0.1, 1.0])
def test_a_valid_fraction_outside_zero_to_one_is_refused(fraction):
    # 1.0 would hold out all but one query per kind, not every query the user asked for
    with pytest.raises(ValueError, match=r"valid fraction must be in \[0, 1\)"):
        split_valid([_ex("d0", "q", "Zorblatt text"), _ex("c0", "c", "plain")], fraction, seed=0, terms=["Zorblatt"])


def test_a_candidate_sharing_a_corpus_id_is_ranked_with_the_corpus_text():
    # the corpus is what `evaluate` ranks: a training list's copy of a document does not replace it
    docs = [Document("x1", "a bus depot")]
    vset = ValidationSet.build([TrainExample("v1", "depot", ("x1", "v1-"), ("an edited depot", "noise"), (10.0, -8.0))],
                               docs, ["Zorblatt"])
    assert {d.doc_id: d.text for d in vset.documents} == {"x1": "a bus depot", "v1-": "noise"}


def test_split_valid_holds_out_per_kind_what_its_docstring_says_on_every_bundled_train_file():
    """The counts are evaluated as the docstring writes them: it had promised ``round(fraction * n)``
    in all, which the per-kind rounding, the one-query floor and the one kept per kind miss."""
    import re

    import corpora
    from sparse_adapt.data import flat_terms, load_domain_terms, load_train

    doc = " ".join(split_valid.__doc__.split())
    total = re.search(r"``want = ([^`]+)``", doc)
    per_kind = re.search(r"``([^`]+)`` of a kind's ``k``", doc)
    assert total and per_kind, "split_valid's docstring no longer gives the count held out per kind"
    none_at_zero = "none when it is 0" in doc
    bundled = [files for files in map(corpora.get, corpora.names())
               if files.train and corpora.ROOT in files.train.parents]  # not a set another test registered
    assert len(bundled) > 1
    for files in bundled:
        examples, terms = load_train(files.train), flat_terms(load_domain_terms(files.terms))
        kinds = [query_kind(ex, terms) for ex in examples]
        n = len(examples)
        for fraction in (0.5 / n, 0.1, 0.25, 0.5, 0.9):
            want = eval(total.group(1), {"round": round}, {"fraction": fraction, "n": n})
            held = [query_kind(ex, terms) for ex in split_valid(examples, fraction, seed=0, terms=terms)[1]]
            for kind in sorted(set(kinds)):
                k = kinds.count(kind)
                said = eval(per_kind.group(1), {"min": min, "max": max, "round": round}, {"k": k, "n": n, "want": want})
                if none_at_zero and want == 0:
                    said = 0
                assert held.count(kind) == said, (files.name, fraction, kind)
