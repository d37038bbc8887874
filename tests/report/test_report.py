"""``sparse-adapt report``: the four experiments end to end on a tiny model, and the
report's numbers against what ``evaluate``, ``diagnose`` and ``inspect`` print for the
same checkpoints."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from corpora import GATROCRAPTIC as G
from sparse_adapt.cli import main
from sparse_adapt.data import Query, load_qrels, load_query_groups
from sparse_adapt.errors import ConfigError, OutputError
from sparse_adapt.report import (
    FAIL, NA, PASS, REFERENCE, ReportData, ReportInputs, TermSummary, choose_primary_term, criteria, derive_groups,
    load_report_data, train_experiment,
)

# One epoch per stage: the test checks plumbing and agreement, not learning.
TINY_CONFIG = {"warmup": {"epochs": 1}, "dictionary": {"epochs": 1}, "distill": {"epochs": 1}}
STAGES = [REFERENCE, "H1", "H2", "H3", "H4"]


def tiny_base(directory: Path) -> Path:
    """The tiny random BERT, calibrated to ~20 active terms per document like the real base
    (uncalibrated, every text activates ~30k tokens and diagnostics crawl)."""
    from conftest import make_tiny_bert
    from sparse_adapt.modeling.base import set_bias
    from sparse_adapt.modeling.calibration import calibrate_bias
    from sparse_adapt.data import load_documents

    splade = make_tiny_bert()
    set_bias(splade.mlm, calibrate_bias(splade, [d.text for d in load_documents(G.docs)], 20))
    return splade.save_pretrained(directory)


def two_terms(directory: Path) -> Path:
    """Two of the bundled terms (the domain term and an acronym): diagnostics of each term per
    stage are the slow part, two are enough to check 'every term'."""
    path = directory / "terms.json"
    path.write_text(json.dumps({"acronyms": ["API"], "jargon": ["gatrocraptic", "Gatrocraptic"]}))
    return path


def _suite_row(seed, variant, semantic):
    return {"domain": "legal", "split": "test", "seed": seed, "variant": variant,
            "groups": {"heldout-domain-semantic": {"queries": 5, "ndcg@10": semantic}}}


# A `sparse-adapt benchmark` result as it would be written (the command itself is tested in
# test_benchmark.py): the report must carry its tables, not recompute them.
SUITE = {
    "schema": "sparse-adapt.benchmark/1", "created": "2026-11-22T00:00:00+00:00",
    "inputs": {"base": "offline-minilm", "domains": ["legal"], "seeds": [0, 1], "ablation_domains": ["legal"],
               "ablation_seeds": [0], "config": {}},
    "results": [_suite_row(None, "base", 0.5), _suite_row(0, "full", 0.7), _suite_row(1, "full", 0.9),
                _suite_row(0, "no-pres", 0.6)],
}


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    base = tiny_base(root / "tiny")
    config = root / "tiny.json"
    config.write_text(json.dumps(TINY_CONFIG))
    terms = two_terms(root)
    out = root / "case"
    bench = root / "suite"
    bench.mkdir()
    (bench / "benchmark.json").write_text(json.dumps(SUITE))
    rc = main(["report", "--base", str(base), "--out", str(out), "--config", str(config), "--terms", str(terms),
               "--benchmark", str(bench)])
    assert rc == 0
    return {"out": out, "base": base, "terms": terms, "config": config,
            "json": json.loads((out / "report.json").read_text(encoding="utf-8"))}


def stage(report: dict, name: str) -> dict:
    return next(s for s in report["stages"] if s["name"] == name)


# ---------------------------------------------------------------------------- end to end
def test_report_files_sections_and_plots(report_dir):
    out, rep = report_dir["out"], report_dir["json"]
    md = (out / "report.md").read_text(encoding="utf-8")
    for heading in ("# Domain adaptation report: Gatrocraptic", "## Summary", "## Criteria per stage",
                    "## Retrieval quality", "## Domain terms", "## Sparsity", "## Per-query ndcg@10",
                    "## Reproduce these numbers", *[f"### {s}:" for s in STAGES]):
        assert heading in md, heading
    images = [line.split("](")[1].rstrip(")") for line in md.splitlines() if line.startswith("![")]
    assert sorted(images) == sorted(["criteria.png", "ndcg_by_group.png", "term_weight_rank.png", "sparsity.png"])
    for name in images:
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    assert [s["name"] for s in rep["stages"]] == STAGES
    assert rep["inputs"]["overrides"]["distill.epochs"] == TINY_CONFIG["distill"]["epochs"]  # named in report.md
    assert "Training config: the defaults (with the settings recommended for the base) except" in " ".join(md.split())
    assert [s["stages"] for s in rep["stages"]] == [
        [], ["distill"], ["extend", "distill"], ["extend", "warmup", "distill"],
        ["extend", "warmup", "dictionary", "distill"]]
    # The criteria table of every stage is in the markdown, one row per criterion.
    for s in rep["stages"]:
        for c in s["criteria"]:
            assert f"| {c['name']} | {c['expected']} | {c['actual']} |" in md
    # Bundled groups, held-out groups included; primary term from q11's relevant documents.
    assert rep["groups"] == load_query_groups(G.query_groups)
    assert rep["primary_term"] == "Gatrocraptic"
    assert set(stage(rep, "H4")["groups"]) == set(rep["groups"])


def test_report_includes_the_benchmark_tables(report_dir):
    md = (report_dir["out"] / "report.md").read_text(encoding="utf-8")
    assert "## Generalisation: the benchmark suite" in md and "### Per domain: base vs adapted" in md
    # base 0.5, seeds 0.7 and 0.9, mean 0.8, +0.3 over the base, below the 0.90 bar for seed 0
    assert "| legal | test | heldout-domain-semantic | 5 | 0.500 | 0.700 | 0.900 | 0.800 | +0.300 | fail |" in md
    assert "### Ablation: each loss term removed in turn" in md and "| no-pres | 0.600 | -0.100 |" in md
    assert report_dir["json"]["benchmark"] == SUITE
    # Which file, and that it describes another base's models, are recorded.
    rep = report_dir["json"]
    bench_file = Path(rep["inputs"]["benchmark"])
    assert bench_file.name == "benchmark.json" and bench_file.parent.name == "suite"
    note = next(n for n in rep["notes"] if n.startswith("the benchmark "))
    assert f"another base offline-minilm (this report: {report_dir['base']})" in note and "config" not in note
    assert note in md


def test_benchmark_differences_name_each_changed_key():
    from sparse_adapt.report.benchmark_md import benchmark_differences

    ours = {"warmup": {"lr": 1e-3, "epochs": 2}, "distill": {"pres": 2.0}}
    same = {"inputs": {"base": "b", "config": {"warmup": {"lr": 0.001, "epochs": 2.0}, "distill": {"pres": 2}}}}
    assert benchmark_differences(same, "b", ours) == []
    other = {"inputs": {"base": "c", "config": {"warmup": {"lr": 2e-3, "epochs": 2}, "distill": {"pres": 0}}}}
    assert benchmark_differences(other, "b", ours) == ["base c (this report: b)", "config (warmup.lr, distill.pres)"]
    # An `adapt` benchmark's models came from another pipeline (and a pretrained start), not H4's.
    adapt = {"inputs": {**same["inputs"], "pipeline": "adapt", "start": "suite/pretrained"}}
    assert benchmark_differences(adapt, "b", ours) == ["pipeline adapt (from suite/pretrained) (this report: train's H4)"]


def test_a_benchmark_base_spelled_another_way_is_the_same_base(tmp_path, monkeypatch):
    from sparse_adapt.report.benchmark_md import benchmark_differences

    (tmp_path / "pt").mkdir()
    monkeypatch.chdir(tmp_path)
    assert benchmark_differences({"inputs": {"base": "./pt", "config": {}}}, "pt", {}) == []


def test_numbers_match_evaluate_cli(report_dir, capsys):
    rep = report_dir["json"]
    for name in ("H1", "H4"):
        model = str(report_dir["out"] / "runs" / name / "final")
        assert stage(rep, name)["model"] == model
        capsys.readouterr()
        assert main(["evaluate", "--model", model, "--docs", str(G.docs), "--queries", str(G.queries),
                     "--qrels", str(G.qrels), "--json"]) == 0
        assert json.loads(capsys.readouterr().out) == stage(rep, name)["metrics"]
        assert main(["evaluate", "--model", model, "--docs", str(G.docs), "--queries", str(G.heldout_queries),
                     "--qrels", str(G.heldout_qrels), "--json"]) == 0
        assert json.loads(capsys.readouterr().out) == stage(rep, name)["heldout_metrics"]


def test_model_cards_carry_the_measured_metrics(report_dir):
    h4 = stage(report_dir["json"], "H4")
    card = (report_dir["out"] / "runs" / "H4" / "final" / "README.md").read_text(encoding="utf-8")
    # Each row says how many judged queries it averages (every bundled query is judged).
    n, held = len(load_qrels(G.qrels)), len(load_qrels(G.heldout_qrels))
    assert h4["judged"] == {"queries": n, "held-out queries": held}
    row = next(line for line in card.splitlines() if line.startswith(f"| queries ({n}) |"))
    assert f"{h4['metrics']['ndcg@10']:.4f}" in row
    assert f"| held-out queries ({held}) |" in card and "no retrieval metrics" not in card
    md = (report_dir["out"] / "report.md").read_text(encoding="utf-8")
    assert f"| nDCG@10 ({n} queries) |" in md and f"| ndcg@10 ({held} held-out) |" in md


def test_group_ndcg_is_the_mean_over_the_groups_queries(report_dir):
    rep = report_dir["json"]
    qrels = {**load_qrels(G.qrels), **load_qrels(G.heldout_qrels)}
    for s in rep["stages"]:
        for group, qids in rep["groups"].items():
            judged = [q for q in qids if q in qrels]
            expected = np.mean([s["per_query"][q] for q in judged])
            assert s["groups"][group]["queries"] == len(judged)
            assert s["groups"][group]["ndcg@10"] == pytest.approx(expected, abs=1e-6), (s["name"], group)


def test_term_numbers_match_diagnose_cli(report_dir, capsys):
    rep = report_dir["json"]
    for name in ("H1", "H4"):
        model = str(report_dir["out"] / "runs" / name / "final")
        capsys.readouterr()
        assert main(["diagnose", "Gatrocraptic", "--model", model, "--docs", str(G.docs),
                     "--terms", str(report_dir["terms"]), "--queries", str(G.queries), "--json"]) == 0
        cli = json.loads(capsys.readouterr().out)
        term = stage(rep, name)["terms"]["Gatrocraptic"]
        assert term["single_token"] == cli["vocabulary"]["single_token"]
        assert term["pieces"] == cli["vocabulary"]["pieces"]
        assert term["doc_id"] == cli["document"]["doc_id"] == "d21"
        if term["single_token"]:
            target = cli["targets"][0]
            assert term["weight"] == target["ranking"]["weight"]
            assert term["rank"] == target["ranking"]["rank"]
            assert term["occurrence_logits"] == [p["logit"] for p in target["logits"]["positions"] if p["occurrence"]]
            assert term["expanding"] == {e["qid"]: e["weight"] for e in target["query_expansion"]["expanding"]}
        # The full diagnosis is kept beside the report, equal to the CLI's but for the model label.
        kept = json.loads((report_dir["out"] / "diagnostics" / name / "diagnose-Gatrocraptic.json").read_text())
        assert {k: v for k, v in kept.items() if k not in ("model", "recommendations")} == \
            {k: v for k, v in cli.items() if k not in ("model", "recommendations")}
    # Every (distinct) domain term is diagnosed in every stage.
    for s in rep["stages"]:
        assert sorted(s["terms"]) == ["API", "Gatrocraptic"]


def test_sparsity_matches_inspect_cli(report_dir, capsys):
    rep = report_dir["json"]
    model = str(report_dir["out"] / "runs" / "H3" / "final")
    capsys.readouterr()
    assert main(["inspect", "--model", model, "--docs", str(G.docs), "--queries", str(G.queries),
                 "--terms", str(report_dir["terms"]), "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    got = stage(rep, "H3")["sparsity"]
    assert got["doc_nonzero_mean"] == cli["documents"]["nonzero"]["mean"]
    assert got["query_nonzero_median"] == cli["queries"]["nonzero"]["median"]
    assert got["flops"] == cli["flops"]["value"]


def test_criteria_follow_the_stage_pipeline(report_dir):
    rep = report_dir["json"]
    status = {s["name"]: {c["id"]: c["status"] for c in s["criteria"]} for s in rep["stages"]}
    # Only the extend stage makes the term one token: base and H1 fail, H2-H4 pass.
    assert [status[s]["single_token"] for s in STAGES] == [FAIL, FAIL, PASS, PASS, PASS]
    for s in rep["stages"]:
        t = s["terms"]["Gatrocraptic"]
        c = status[s["name"]]
        if t["single_token"]:
            assert c["high_weight"] == (PASS if t["weight"] > 2.0 else FAIL)
            assert c["top_rank"] == (PASS if t["rank"] == 1 else FAIL)
            assert c["query_expansion"] == (PASS if "q11" in t["expanding"] else FAIL)
        relevant = {"d21", "d22", "d23", "d24", "d25"}
        assert c["correct_retrieval"] == (PASS if set(s["top"]["q11"][:5]) == relevant else FAIL)


def test_rerun_reuses_finished_experiments(report_dir):
    inputs = ReportInputs(out=report_dir["out"], base=str(report_dir["base"]), config=report_dir["config"],
                          terms=report_dir["terms"])
    log = report_dir["out"] / "runs" / "H4" / "train_log.jsonl"
    before = log.read_text()
    final = train_experiment(inputs, "H4")
    assert final == report_dir["out"] / "runs" / "H4" / "final"
    assert log.read_text() == before  # no stage ran again


def test_diagnostics_are_this_reports_and_a_refused_rerun_writes_none(report_dir, tmp_path, capsys):
    import shutil

    out = tmp_path / "case"
    shutil.copytree(report_dir["out"], out)
    argv = ["report", "--base", str(report_dir["base"]), "--out", str(out), "--config", str(report_dir["config"])]
    base_diag = out / "diagnostics" / "base"
    before = {p.name: p.read_bytes() for p in base_diag.iterdir()}
    other = tmp_path / "terms.json"
    other.write_text(json.dumps({"acronyms": ["API", "CLI"], "jargon": ["Gatrocraptic"]}))
    # Changed inputs: refused before anything is evaluated (it had rewritten diagnostics/base).
    assert main([*argv, "--terms", str(other)]) == 2
    assert "holds a different run" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in base_diag.iterdir()} == before
    # A file of a term this report does not have goes when the folder is written again.
    (base_diag / "diagnose-Old.json").write_text("{}")
    assert main([*argv, "--terms", str(report_dir["terms"])]) == 0
    assert sorted(p.name for p in base_diag.iterdir()) == sorted(before)


# ---------------------------------------------------------------------------- units
def _data(groups, qrels=None, queries=(), docs=()):
    from sparse_adapt.data import Document

    return ReportData([Document(*d) for d in docs], [Query(*q) for q in queries], qrels or {}, [], {},
                      {"jargon": ["Gatrocraptic"], "acronyms": ["API"]}, groups, "file")


def _term(**kw) -> TermSummary:
    base = dict(term="Gatrocraptic", single_token=True, pieces=["gatrocraptic"], doc_id="d21",
                occurrence_logits=[6.98, 9.30], logit_verdict="positive", weight=2.33, rank=1, nonzero=14,
                expanding={"q11": 1.44}, with_term=4, with_term_active=4)
    return TermSummary(**{**base, **kw})


def test_criteria_h4_values_of_the_spec_all_pass():
    data = _data({"domain-semantic": ["q11"]}, {"q11": {"d21": 2, "d22": 2, "d6": 0}},
                 [("q11", "tools for monitoring corporate expenses")])
    got = {c.id: c for c in criteria(_term(), data, {"q11": ["d22", "d21", "d6"]})}
    assert {k: c.status for k, c in got.items()} == {k: PASS for k in got}
    assert got["positive_logits"].actual == "6.98, 9.30"
    assert got["correct_retrieval"].expected == "top-2 = d21 d22"


def test_criteria_h3_values_of_the_spec():
    # Spec H3: logits 0.36, weight 0.31, rank 26 of 29, no expansion, d26 ahead of a relevant document.
    data = _data({"domain-semantic": ["q11"]}, {"q11": {"d21": 2, "d23": 2}},
                 [("q11", "tools for monitoring corporate expenses")])
    term = _term(occurrence_logits=[0.36, 0.36], weight=0.3083, rank=26, nonzero=29, expanding={})
    got = {c.id: c.status for c in criteria(term, data, {"q11": ["d26", "d23", "d21"]})}
    assert got == {"single_token": PASS, "positive_logits": PASS, "nonzero_weight": PASS, "high_weight": FAIL,
                   "top_rank": FAIL, "query_expansion": FAIL, "explicit_queries": PASS, "correct_retrieval": FAIL}


def test_a_semantic_query_holding_the_terms_token_names_it_as_diagnose_says():
    """"APIs" is `api ##s`: diagnose counts the query among those with the term (its in-text
    weight is no expansion); criteria called it describing, hence "absent", and failed it."""
    data = _data({"domain-semantic": ["q11", "s1"]}, {"q11": {"d21": 2}, "s1": {"d21": 2}},
                 [("q11", "tools for monitoring corporate expenses"), ("s1", "how do the APIs of the agent work")])
    term = _term(term="API", pieces=["api"], expanding={"q11": 1.2}, with_term=1, with_term_active=1,
                 with_term_qids=["s1"])
    got = {c.id: c for c in criteria(term, data, {"q11": ["d21"], "s1": ["d21"]})}
    assert got["query_expansion"].actual == "q11: 1.20" and got["query_expansion"].status == PASS


def test_criteria_unextended_term_and_missing_groups():
    data = _data({"control": ["q1"]}, {"q1": {"d1": 1}}, [("q1", "install")])
    term = _term(single_token=False, pieces=["ga", "##tro"], occurrence_logits=[], logit_verdict=None, weight=None,
                 rank=None, expanding={}, with_term=0, with_term_active=0)
    got = {c.id: c for c in criteria(term, data, {"q1": ["d1"]})}
    assert got["single_token"].actual == "not one token (ga ##tro)"
    assert [got[k].status for k in ("single_token", "positive_logits", "high_weight", "top_rank")] == [FAIL] * 4
    assert got["query_expansion"].status == NA and got["correct_retrieval"].status == NA
    assert got["explicit_queries"].status == FAIL  # no token to keep: not "no query names it"


def test_criteria_fail_just_short_of_each_bar():
    from diagnostics.term import HIGH_WEIGHT

    data = _data({"domain-semantic": ["q11", "q12"]}, {"q11": {"d21": 2}, "q12": {"d21": 2}},
                 [("q11", "tools for monitoring corporate expenses"), ("q12", "where spending is tracked")])
    top = {"q11": ["d21"], "q12": ["d21"]}
    passing = {c.id: c.status for c in criteria(_term(expanding={"q11": 1.4, "q12": 0.2}), data, top)}
    assert passing == {k: PASS for k in passing}
    short = [  # (changed field, the criterion it must fail)
        ({"weight": HIGH_WEIGHT}, "high_weight"),  # "> HIGH_WEIGHT": equal is not above
        ({"weight": 0.0, "rank": None}, "nonzero_weight"),
        ({"logit_verdict": "mixed"}, "positive_logits"),  # negative at one occurrence
        ({"expanding": {"q11": 1.4}}, "query_expansion"),  # one describing query of two
        ({"with_term_active": 3}, "explicit_queries"),  # 3 of the 4 naming it
    ]
    for change, failing in short:
        got = {c.id: c.status for c in criteria(_term(**{"expanding": {"q11": 1.4, "q12": 0.2}, **change}), data, top)}
        assert got[failing] == FAIL, change


def test_a_term_missing_from_its_documents_text_leaves_logits_ungraded_and_rank_2_is_not_top():
    # No occurrence to read a logit at is no verdict either way (n/a), unlike a split term (fail).
    data = _data({"domain-semantic": ["q11"]}, {"q11": {"d21": 2}},
                 [("q11", "tools for monitoring corporate expenses")])
    got = {c.id: c for c in criteria(_term(occurrence_logits=[], logit_verdict="absent"), data, {"q11": ["d21"]})}
    assert (got["positive_logits"].status, got["positive_logits"].actual) == (NA, "term not in the text")
    second = {c.id: c for c in criteria(_term(rank=2), data, {"q11": ["d21"]})}["top_rank"]
    assert (second.status, second.actual) == (FAIL, "#2 of 14")


def test_a_diagnosis_is_summarised_with_the_queries_naming_the_term():
    """The criteria tell naming from describing queries by with_term_qids: summarise_term must carry them."""
    from types import SimpleNamespace as NS

    from sparse_adapt.report.criteria import summarise_term

    qe = NS(expanding=[NS(qid="q11", weight=1.25)], with_term=1, with_term_active=1, with_term_qids=["s1"])
    positions = [NS(logit=6.5, occurrence=True), NS(logit=-2.0, occurrence=False)]
    target = NS(logits=NS(verdict="positive", positions=positions),
                ranking=NS(weight=2.0, rank=1, nonzero=9), query_expansion=qe)
    d = NS(term="API", vocabulary=NS(single_token=True, pieces=["api"]), document=NS(doc_id="d21"), targets=[target])
    term = summarise_term(d)
    assert (term.with_term_qids, term.expanding, term.occurrence_logits) == (["s1"], {"q11": 1.25}, [6.5])


def test_correct_retrieval_fails_when_relevant_documents_score_zero():
    # In-memory runs leave out zero-score documents: a top list shorter than the relevant set must fail.
    data = _data({"domain-semantic": ["q11"]}, {"q11": {"d21": 2, "d22": 2}}, [("q11", "corporate expenses")])
    got = {c.id: c for c in criteria(_term(), data, {"q11": ["d21"]})}
    assert got["correct_retrieval"].status == FAIL
    assert got["correct_retrieval"].actual == "q11: d21 (missing: d22)"


def test_a_split_terms_semantic_query_naming_it_is_not_graded_for_expansion():
    data = _data({"domain-semantic": ["q11"]}, {"q11": {"d21": 2}}, [("q11", "Gatrocraptic spending tools")])
    term = _term(single_token=False, pieces=["ga", "##tro"], occurrence_logits=[], logit_verdict=None, weight=None,
                 rank=None, expanding={}, with_term=0, with_term_active=0)
    got = {c.id: c for c in criteria(term, data, {"q11": ["d21"]})}
    assert (got["query_expansion"].status, got["query_expansion"].actual) == (NA, "no domain-semantic query")


def test_correct_retrieval_fails_when_one_of_the_semantic_queries_misses():
    data = _data({"domain-semantic": ["q11", "q12"]}, {"q11": {"d21": 2}, "q12": {"d22": 2}},
                 [("q11", "tools for monitoring corporate expenses"), ("q12", "where spending is tracked")])
    got = {c.id: c for c in criteria(_term(), data, {"q11": ["d21"], "q12": ["d6", "d22"]})}
    assert got["correct_retrieval"].status == FAIL
    assert got["correct_retrieval"].actual == "q11: d21; q12: d6 (not relevant: d6)"


def test_semantic_queries_without_a_relevant_document_leave_retrieval_ungraded():
    data = _data({"domain-semantic": ["q11"]}, {"q11": {"d6": 0}}, [("q11", "tools for monitoring corporate expenses")])
    got = {c.id: c for c in criteria(_term(), data, {"q11": ["d6"]})}["correct_retrieval"]
    assert (got.status, got.actual, got.expected) == (NA, "no judged semantic query", "relevant documents first")


def test_criteria_say_what_a_zero_weight_a_probe_and_unkept_or_unnamed_queries_read():
    data = _data({"domain-semantic": ["q11"]}, {"q11": {"d21": 2}},
                 [("q11", "tools for monitoring corporate expenses")])
    top = {"q11": ["d21"]}
    # named by 4 queries, active in none: a failure, not "no query names it"
    got = {c.id: c for c in criteria(_term(with_term_active=0), data, top)}["explicit_queries"]
    assert (got.status, got.actual) == (FAIL, "0 of 4")
    got = {c.id: c for c in criteria(_term(with_term=0, with_term_active=0), data, top)}["explicit_queries"]
    assert (got.status, got.actual) == (NA, "no query names it")
    got = {c.id: c for c in criteria(_term(weight=0.0, rank=None), data, top)}["top_rank"]
    assert (got.status, got.actual) == (FAIL, "zero weight")
    # a term diagnosed on a probe text (in no document) names no document
    got = {c.id: c for c in criteria(_term(doc_id=None), data, top)}["positive_logits"]
    assert got.expected == "> 0 where it occurs"


def test_correct_retrieval_lists_relevant_documents_in_natural_order_and_says_when_nothing_scores():
    data = _data({"domain-semantic": ["q11"]}, {"q11": {"d10": 2, "d9": 2}}, [("q11", "corporate expenses")])
    got = {c.id: c for c in criteria(_term(), data, {"q11": ["d9", "d10"]})}["correct_retrieval"]
    assert (got.status, got.expected, got.actual) == (PASS, "top-2 = d9 d10", "q11: d9 d10")
    got = {c.id: c for c in criteria(_term(), data, {"q11": []})}["correct_retrieval"]
    assert (got.status, got.actual) == (FAIL, "q11: nothing scores > 0 (missing: d9 d10)")


def test_derive_groups_by_term_mention():
    queries = [Query("a", "Gatrocraptic analysis"), Query("b", "reset my password"), Query("c", "the api docs")]
    groups = derive_groups(queries, [Query("h", "gatrocraptic review")], {"x": ["Gatrocraptic", "API"]})
    assert groups == {"domain-explicit": ["a", "c"], "control": ["b"], "heldout-domain-explicit": ["h"]}


def test_primary_term_from_relevant_documents_and_override():
    docs = [("d1", "Use the API key"), ("d2", "Gatrocraptic review"), ("d3", "Gatrocraptic and API")]
    data = _data({"domain-semantic": ["q"]}, {"q": {"d2": 2, "d3": 1, "d1": 0}}, [("q", "budget review")], docs)
    assert choose_primary_term(["API", "Gatrocraptic"], data) == (
        "Gatrocraptic", "in 2 of the 2 relevant documents of the domain-semantic queries")
    assert choose_primary_term(["API", "Gatrocraptic"], data, "API") == ("API", "given with --term")


def test_an_empty_term_is_refused_before_anything_is_evaluated(tmp_path):
    with pytest.raises(ConfigError, match="--term is empty"):
        ReportInputs(out=tmp_path / "o", term=" ").resolved()


def test_own_corpus_needs_queries_and_derives_groups(tmp_path):
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"doc_id": "x1", "text": "Gatrocraptic budget"}\n{"doc_id": "x2", "text": "password"}\n')
    with pytest.raises(ConfigError, match="--terms, --dictionary, --train, --queries, --qrels required"):
        ReportInputs(out=tmp_path / "o", corpus=docs).resolved()
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"qid": "a", "text": "gatrocraptic"}\n{"qid": "b", "text": "password reset"}\n')
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("a 0 x1 1\nb 0 x2 1\n")
    # Trained on Gatrocraptic's terms and lists, every query of a corpus without them was a control.
    with pytest.raises(ConfigError, match=r"^--dictionary, --train required with your own --corpus"):
        ReportInputs(out=tmp_path / "o", corpus=docs, queries=queries, qrels=qrels, terms=G.terms).resolved()
    own = {"terms": G.terms, "dictionary": G.dictionary, "train": G.train}
    data = load_report_data(ReportInputs(out=tmp_path / "o", corpus=docs, queries=queries, qrels=qrels, **own))
    assert data.groups_source == "derived" and data.groups == {"domain-explicit": ["a"], "control": ["b"]}
    assert data.heldout_queries == [] and "derived" in data.notes[0]
    # a held-out qrels line for a main query: named as not evaluated, and it replaces nothing
    heldout, heldout_qrels = tmp_path / "h.jsonl", tmp_path / "h.tsv"
    heldout.write_text('{"qid": "h", "text": "gatrocraptic spending"}\n')
    heldout_qrels.write_text("h 0 x1 1\na 0 x2 2\n")
    data = load_report_data(ReportInputs(out=tmp_path / "o", corpus=docs, queries=queries, qrels=qrels,
                                         heldout_queries=heldout, heldout_qrels=heldout_qrels, **own))
    assert data.all_qrels == {"a": {"x1": 1}, "b": {"x2": 1}, "h": {"x1": 1}}
    assert any("not evaluated" in n and "a" in n for n in data.notes)


def test_cli_errors_are_one_line(tmp_path, capsys):
    groups = tmp_path / "groups.json"
    groups.write_text(json.dumps({"control": ["q1", "q99"]}))
    assert main(["report", "--out", str(tmp_path / "o"), "--groups", str(groups)]) == 2
    assert "q99" in capsys.readouterr().err
    assert main(["report", "--out", str(tmp_path / "o"), "--experiments", "H1,H5"]) == 2
    assert "H5" in capsys.readouterr().err
    assert main(["report", "--out", str(tmp_path / "o"), "--experiments", "H4,H1,H4"]) == 2
    assert "--experiments names H4 more than once" in capsys.readouterr().err
    other = tmp_path / "other_qrels.tsv"
    other.write_text("nope 0 d21 1\n")
    assert main(["report", "--out", str(tmp_path / "o"), "--qrels", str(other)]) == 2
    err = capsys.readouterr().err
    assert "none of its 1 judged queries is in" in err and "Traceback" not in err
    assert main(["report", "--out", str(tmp_path / "o"), "--benchmark", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--benchmark" in err and "no benchmark.json" in err and len(err.strip().splitlines()) == 1
    (tmp_path / "benchmark.json").write_text(json.dumps({"schema": "other"}))
    assert main(["report", "--out", str(tmp_path / "o"), "--benchmark", str(tmp_path)]) == 2
    assert "'schema'" in capsys.readouterr().err
    (tmp_path / "benchmark.json").write_text(json.dumps({"schema": "sparse-adapt.benchmark/2", "inputs": {},
                                                         "results": [{"domain": "legal", "seed": 0}]}))
    assert main(["report", "--out", str(tmp_path / "o"), "--benchmark", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "not a complete benchmark result (KeyError" in err and "Traceback" not in err
    (tmp_path / "benchmark-adapt.json").write_text(json.dumps({"schema": "other"}))
    assert main(["report", "--out", str(tmp_path / "o"), "--benchmark", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "holds benchmark.json, benchmark-adapt.json: give the one to report" in err
    assert len(err.strip().splitlines()) == 1
    (tmp_path / "benchmark.json").unlink()  # one left: the directory names it
    assert main(["report", "--out", str(tmp_path / "o"), "--benchmark", str(tmp_path)]) == 2
    assert "benchmark-adapt.json: field 'schema'" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    assert main(["report", "--out", str(tmp_path / "o"), "--heldout-queries", str(G.heldout_queries)]) == 2
    assert "go together" in capsys.readouterr().err
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    assert main(["report", "--out", str(foreign), "--config", str(tmp_path / "none.json")]) == 2
    capsys.readouterr()
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps(TINY_CONFIG))
    assert main(["report", "--out", str(foreign), "--config", str(cfg)]) == 2
    assert "not empty" in capsys.readouterr().err
    assert (foreign / "notes.txt").read_text() == "keep me"


def test_a_users_files_named_like_a_reports_are_not_taken_for_one(tmp_path):
    from sparse_adapt.report.experiments import _check_out

    user = tmp_path / "user"
    user.mkdir()
    for name in ("report.json", "report.md", "criteria.png"):
        (user / name).write_text("theirs")
    with pytest.raises(ConfigError, match="is not empty and holds no report"):
        _check_out(user)
    (user / "report.json").write_text('{"schema": "sparse-adapt.report/1"}')
    _check_out(user)  # a report of ours: rerun in place


def test_overwrite_never_deletes_an_input_given_as_out(tmp_path):
    """`report --out docs.jsonl --corpus docs.jsonl --overwrite` deleted the corpus, then failed."""
    from sparse_adapt.report.experiments import _check_out

    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"doc_id": "a", "text": "kept"}\n')
    with pytest.raises(OutputError, match="is also an input"):
        _check_out(docs, overwrite=True, inputs=(docs, None))
    assert docs.read_text() == '{"doc_id": "a", "text": "kept"}\n'
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not a regular file or directory"):
        _check_out(fifo, overwrite=True)
    assert fifo.exists()


def test_diagnostics_file_names_of_distinct_terms_differ():
    """"C++" and "C#" were both diagnose-C_.json: one overwrote the other."""
    from sparse_adapt.report.files import slug

    terms = ["Gatrocraptic", "XR-7200", "C++", "C#", "Zürich", "Zérich", "日本語", "a/b", ".."]
    names = [slug(t) for t in terms]
    assert len(set(names)) == len(terms)
    assert names[:2] == ["Gatrocraptic", "XR-7200"]  # plain names stay as they were
    assert all("/" not in n and n not in (".", "..") for n in names)


def test_a_query_with_more_relevant_documents_than_the_top_10_keeps_them_all(tmp_path):
    """"Correct retrieval" compares a query's top-n with its n relevant documents: cut to 10,
    a query with 12 could never pass."""
    from sparse_adapt.data import Document, Query
    from sparse_adapt.report.experiments import evaluate_stage
    from sparse_adapt.report.inputs import ReportData
    from tests.conftest import make_tiny_bert

    docs = [Document(f"d{i}", f"zorblatt valve number {i} of the plant") for i in range(14)]
    data = ReportData(documents=docs, queries=[Query("s", "zorblatt valve")], qrels={"s": {f"d{i}": 1 for i in range(12)}},
                      heldout_queries=[], heldout_qrels={}, terms={"jargon": ["zorblatt"]},
                      groups={"domain-semantic": ["s"]}, groups_source="file")
    result = evaluate_stage("base", "tiny", data, "zorblatt", splade=make_tiny_bert())
    assert len(result.top["s"]) == 12


def test_the_reproduce_commands_run_from_the_reports_folder(report_dir, capsys, monkeypatch):
    import shlex

    md = (report_dir["out"] / "report.md").read_text()
    block = md.split("## Reproduce these numbers", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    first = shlex.split(block.splitlines()[0])
    assert first[:2] == ["sparse-adapt", "evaluate"]
    monkeypatch.chdir(report_dir["out"])  # the report was made from another folder (the tests')
    capsys.readouterr()
    assert main([*first[1:], "--json"]) == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out) == report_dir["json"]["stages"][-1]["metrics"]


def _hand_report():
    """Two stages, hand-picked numbers: every table of report.md can be read off by eye."""
    from sparse_adapt.report.criteria import Criterion
    from sparse_adapt.report.results import Explained, Report, StageResult

    def stage(name, stages, ndcg, held, weight, rank, statuses):
        crit = [Criterion(f"c{i}", f"criterion {i}", "yes", "a|b" if i == 0 else "no", st)
                for i, st in enumerate(statuses)]
        return StageResult(
            name=name, stages=stages, model="offline-minilm" if name == REFERENCE else f"/work/runs/{name}/final",
            metrics={"ndcg@10": ndcg, "mrr@10": 0.5, "recall@5": 0.25}, heldout_metrics=held,
            groups={"domain-semantic": {"queries": 1, "ndcg@10": ndcg}, "held-out semantic": {"queries": 1, "ndcg@10": None},
                    "control": {"queries": 2, "ndcg@10": 0.75}},
            per_query={"q10": 0.1, "q2": 0.2, "q11": ndcg, "q30": 0.3, "q9": 0.9},
            top={}, terms={"Gatrocraptic": _term(weight=weight, rank=rank), "API": _term(term="API", single_token=False,
                                                                                           pieces=["a", "##pi"])},
            criteria=crit,
            sparsity={"doc_nonzero_mean": 12.26, "doc_nonzero_median": 11.0, "query_nonzero_mean": 5.5,
                      "query_nonzero_median": 4.0, "flops": 3.14159},
            explanations={"q11": [Explained(1, "d21", 4.5, [("gat", 2.25)]), Explained(2, "d6", 1.0, [])]},
            judged={"queries": 3, "held-out queries": 2},
        )

    return Report(
        schema="sparse-adapt.report/1", created="2026-01-01T00:00:00", primary_term="Gatrocraptic",
        inputs={"base": "offline-minilm", "seed": 0, "corpus": "/work/data/docs.jsonl", "queries": "/work/data/q.jsonl",
                "qrels": "/work/data/qrels.txt", "terms": "/work/data/terms.json",
                "heldout_queries": "/work/data/hq.jsonl", "heldout_qrels": "/work/data/hqrels.txt"},
        primary_term_reason="most frequent in the relevant documents",
        groups={"domain-semantic": ["q11"], "held-out semantic": ["q30"], "control": ["q2", "q10"]},
        groups_source="file", notes=[], relevant={"q11": ["d21"]},
        stages=[stage(REFERENCE, [], 0.25, None, 0.5, None, [PASS, FAIL, NA]),
                stage("H1", ["distill"], 0.6251, {"ndcg@10": 0.125, "mrr@10": 0.0, "recall@5": 1.0}, 2.3333, 1,
                      [PASS, PASS, NA])],
    )


def test_report_markdown_tables_read_off_a_hand_made_report():
    """Every table's rows, columns, rounding and order, on numbers picked to tell them apart."""
    from pathlib import Path

    from sparse_adapt.report.markdown import render_markdown

    md = render_markdown(_hand_report(), out=Path("/work/report")).splitlines()
    summary = md.index("| Stage | Pipeline | Hypothesis | Criteria passed | nDCG@10 (3 queries) | nDCG@10 domain-semantic (1) "
                       "| nDCG@10 held-out semantic (1) |")
    assert md[summary + 2].startswith("| base | — | Reference: the base model, untrained on the domain. | 1/2 | 0.2500 | 0.2500 | — |")
    assert md[summary + 3].startswith("| H1 | distill | Fine-tuning (distillation) alone teaches the domain. | 2/2 | 0.6251 "
                                      "| 0.6251 | — |")
    assert ("Domain-semantic queries (the spec's q11 role, read by the criteria): q11; held out, in the nDCG columns "
            "only: q30.") in "\n".join(md)
    assert "| criterion 0 | yes | a\\|b | ✅ PASSED |" in md and "| criterion 1 | yes | no | ❌ FAILED |" in md
    quality = md.index("| Stage | ndcg@10 (3 queries) | mrr@10 (3 queries) | recall@5 (3 queries) | ndcg@10 (2 held-out) "
                       "| mrr@10 (2 held-out) | recall@5 (2 held-out) |")
    assert md[quality + 2] == "| base | 0.2500 | 0.5000 | 0.2500 | — | — | — |"
    assert md[quality + 3] == "| H1 | 0.6251 | 0.5000 | 0.2500 | 0.1250 | 0.0000 | 1.0000 |"
    assert "| control | 2 | 0.7500 | 0.7500 |" in md
    assert "| H1 | **d21** (4.50: gat 2.25) | d6 (1.00: no shared token) |" in md  # relevant in bold
    assert "| Stage | #1 | #2 | #3 | #4 | #5 |" in md
    assert "| **Gatrocraptic** | d21 | 0.500 | 2.333 (#1) |" in md and "| API | d21 | pieces (2) | pieces (2) |" in md
    assert "| H1 | 12.3 | 11.0 | 5.5 | 4.0 | 3.14 |" in md
    per_query = md.index("| Query | Group | base | H1 |")
    # by group as the groups file lists them, then natural order (q2 before q10), then ungrouped
    assert [row.split(" | ")[0] for row in md[per_query + 2: per_query + 7]] == ["| q11", "| q30", "| q2", "| q10", "| q9"]
    assert "Checkpoint `../runs/H1/final`." in md
    commands = [line for line in md if line.startswith("sparse-adapt ")]
    assert commands[:2] == [
        "sparse-adapt evaluate --model ../runs/H1/final --docs ../data/docs.jsonl --queries ../data/q.jsonl "
        "--qrels ../data/qrels.txt",
        "sparse-adapt evaluate --model ../runs/H1/final --docs ../data/docs.jsonl --queries ../data/hq.jsonl "
        "--qrels ../data/hqrels.txt",
    ]
    # the reference's built-in name is given as it is, not as a path
    from sparse_adapt.report.markdown import reproduce_commands

    report = _hand_report()
    assert reproduce_commands(report, report.stages[0], Path("/work/report"))[0].startswith(
        "sparse-adapt evaluate --model offline-minilm --docs ../data/docs.jsonl")


def test_report_markdown_names_a_probe_term_and_gives_the_reference_no_checkpoint():
    """A term found in no document was diagnosed on a probe text; the reference has no checkpoint of its own."""
    import dataclasses
    from pathlib import Path

    from sparse_adapt.report.markdown import render_markdown

    report = _hand_report()
    for s in report.stages:
        s.terms["API"] = dataclasses.replace(s.terms["API"], doc_id=None)
    md = render_markdown(report, out=Path("/work/report"))
    assert "| API | probe | pieces (2) | pieces (2) |" in md.splitlines()
    base = md.split(f"### {REFERENCE}: ", 1)[1].split("### H1: ", 1)[0]
    assert "Checkpoint" not in base and "Checkpoint `../runs/H1/final`." in md


def test_without_held_out_queries_the_reproduce_commands_evaluate_once():
    from sparse_adapt.report.markdown import reproduce_commands

    report = _hand_report()
    report.inputs.update(heldout_queries=None, heldout_qrels=None)
    commands = reproduce_commands(report, report.stages[1], Path("/work/report"))
    assert [c.split(" --")[0] for c in commands] == ["sparse-adapt evaluate", "sparse-adapt diagnose Gatrocraptic",
                                                     "sparse-adapt inspect"]


def test_report_markdown_leaves_out_what_a_report_does_not_have():
    """No semantic query with a relevant document, no held-out one among them, no explanation,
    no note, no output folder: each is said or left out, never an empty list or heading."""
    from sparse_adapt.report.markdown import render_markdown

    report = _hand_report()
    report.relevant = {}
    report.groups["control"] = ["q2", "q10", "q12"]  # q12 unjudged: the table counts judged queries
    md = render_markdown(report)
    assert "(the spec's q11 role, read by the criteria): none; held out, in the nDCG columns only: q11, q30." in md
    assert "| control | 2 | 0.7500 | 0.7500 |" in md.splitlines()
    assert "Checkpoint `/work/runs/H1/final`." in md  # no folder to be relative to
    assert "## Notes" not in md and "### What the domain-semantic queries retrieve" in md
    report = _hand_report()
    del report.groups["held-out semantic"]
    report.notes = ["one note"]
    for s in report.stages:
        s.explanations = {}
    md = render_markdown(report, out=Path("/work/report"))
    assert "(the spec's q11 role, read by the criteria): q11.\n" in md
    assert "### What the domain-semantic queries retrieve" not in md and "## Notes\n\n- one note" in md


def test_the_reproduce_commands_quote_a_path_with_a_space():
    import shlex

    from sparse_adapt.report.markdown import reproduce_commands

    report = _hand_report()
    report.inputs["corpus"] = "/work/my data/docs.jsonl"
    first = reproduce_commands(report, report.stages[1], Path("/work/report"))[0]
    assert "--docs '../my data/docs.jsonl'" in first and shlex.split(first)[5] == "../my data/docs.jsonl"


def test_a_reference_model_that_is_a_local_folder_is_given_relative_to_the_report(tmp_path):
    """Only a built-in or Hub name is left as it is: a base model on disk is a path like the checkpoints."""
    import dataclasses

    from sparse_adapt.report.markdown import reproduce_commands

    report = _hand_report()
    (tmp_path / "models" / "base").mkdir(parents=True)
    base = dataclasses.replace(report.stages[0], model=str(tmp_path / "models" / "base"))
    assert reproduce_commands(report, base, tmp_path / "report")[0].startswith(
        "sparse-adapt evaluate --model ../models/base --docs ")


def test_the_console_summary_reads_off_the_report_it_wrote(tmp_path, capsys, monkeypatch):
    """`report` ends with one row per stage: each criterion's mark and the stage's nDCG@10,
    then the report.md it wrote (the report itself stood in by the hand-made one)."""
    import sparse_adapt.report as report_module
    from sparse_adapt.cli import output as cli

    monkeypatch.setattr(report_module, "build_report", lambda inputs, hooks: _hand_report())
    monkeypatch.setattr(cli.console, "width", 400)  # one table row per line
    capsys.readouterr()
    assert main(["report", "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    rows = [[cell.strip() for cell in line.strip("│┃ ").split("│" if "│" in line else "┃")]
            for line in out.splitlines() if "│" in line or "┃" in line]
    assert rows == [["stage", "c0", "c1", "c2", "nDCG@10 (3 queries)"],
                    ["base", "pass", "fail", "n/a", "0.2500"], ["H1", "pass", "pass", "n/a", "0.6251"]]
    assert 'criteria for "Gatrocraptic"' in out  # the term the marks are about, above the table
    assert out.strip().splitlines()[-1] == f"wrote {tmp_path / 'o' / 'report.md'} (plots and report.json beside it)"


def test_the_console_summary_heads_known_criteria_with_their_short_names(tmp_path, capsys, monkeypatch):
    """report.md names each criterion in full; the console's columns carry the short names."""
    import sparse_adapt.report as report_module
    from sparse_adapt.cli import output as cli

    hand = _hand_report()
    for s in hand.stages:
        for c, cid in zip(s.criteria, ("single_token", "top_rank", "unlisted")):
            c.id = cid
    monkeypatch.setattr(report_module, "build_report", lambda inputs, hooks: hand)
    monkeypatch.setattr(cli.console, "width", 400)
    capsys.readouterr()
    assert main(["report", "--out", str(tmp_path / "o")]) == 0
    header = next(line for line in capsys.readouterr().out.splitlines() if "┃" in line)
    assert [c.strip() for c in header.strip("┃ ").split("┃")] == ["stage", "token", "rank 1", "unlisted",
                                                                  "nDCG@10 (3 queries)"]


def test_the_card_sentence_the_adapt_summary_replaces_is_quoted_as_the_card_says_it():
    # it quoted "no retrieval metrics measured", words no card holds
    import re

    from sparse_adapt.modeling.card import _evaluation
    from sparse_adapt.report.adapt import _card_with_figures

    quoted = re.findall(r'"([^"]+)"', " ".join(_card_with_figures.__doc__.split()))
    cards = " ".join(" ".join(_evaluation(None, records)) for records in ([], [{"stage": "distill", "best_epoch": 2}]))
    assert quoted and [q for q in quoted if q not in cards] == []


def test_the_package_doc_says_held_out_queries_are_told_apart_when_the_criteria_and_the_term_do():
    # it said the criteria read every query of a *semantic* group; semantic_qids leaves the held-out ones out
    import sparse_adapt.report as package
    from sparse_adapt.data import Document

    docs = [Document("d1", "Zorblatt budgets."), Document("d2", "Quux ledgers."), Document("d3", "Quux audits.")]
    data = ReportData(docs, [Query("q1", "money")], {"q1": {"d1": 1}}, [Query("h1", "spend")],
                      {"h1": {"d2": 1, "d3": 1}}, {"jargon": ["Zorblatt", "Quux"]},
                      {"domain-semantic": ["q1"], "heldout-domain-semantic": ["h1"]}, "file")
    read = data.semantic_qids
    term, _ = choose_primary_term(["Zorblatt", "Quux"], data)
    assert read == ["q1"] and term == "Quux"  # the criteria skip h1, the primary term counts its documents
    assert "held-out" in " ".join(package.__doc__.split())


def test_report_md_names_the_settings_its_config_changed():
    """report.md read like a default-settings report when --config had cut every stage to one
    epoch: only report.json kept the config."""
    from sparse_adapt.report.markdown import render_markdown

    report = _hand_report()
    report.inputs["overrides"] = {"distill.epochs": 2, "warmup.epochs": 1}
    said = " ".join(render_markdown(report).split())
    assert ("Training config: the defaults (with the settings recommended for the base) except "
            "`distill.epochs = 2`, `warmup.epochs = 1`.") in said
    report.inputs["overrides"] = {}
    assert "Training config: the defaults (with the settings recommended for the base)." in render_markdown(report)
