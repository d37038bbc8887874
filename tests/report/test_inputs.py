"""The report's inputs before any training: which files a ReportInputs resolves to, the paths
--out may not be, the groups and notes of load_report_data, and the criteria table's term."""

from __future__ import annotations

import json
import shutil

import pytest

from corpora import GATROCRAPTIC as G
from sparse_adapt.cli import main
from sparse_adapt.data import Document, Query
from sparse_adapt.errors import ConfigError
from sparse_adapt.report import ReportData, ReportInputs, choose_primary_term, load_report_data
from sparse_adapt.report.inputs import domain_terms
from sparse_adapt.training.config import TrainConfig


def test_the_bundled_corpus_named_by_its_path_is_the_bundled_one(tmp_path):
    # `--corpus corpora/gatrocraptic/docs.jsonl` spelled out: still Gatrocraptic, with its companions
    i = ReportInputs(out=tmp_path / "o", corpus=G.docs.parent / ".." / G.docs.parent.name / "docs.jsonl").resolved()
    assert (i.terms, i.qrels, i.heldout_queries, i.heldout_qrels, i.groups) == (
        G.terms, G.qrels, G.heldout_queries, G.heldout_qrels, G.query_groups)
    i = ReportInputs(out=tmp_path / "o", queries=str(G.queries)).resolved()  # the bundled queries, named
    assert (i.heldout_queries, i.groups) == (G.heldout_queries, G.query_groups)


def test_bundled_held_out_files_and_groups_describe_only_the_bundled_queries(tmp_path):
    own = tmp_path / "queries.jsonl"
    shutil.copy(G.queries, own)
    # own queries: the bundled groups and held-out queries name queries that are not theirs
    i = ReportInputs(out=tmp_path / "o", queries=own).resolved()
    assert (i.heldout_queries, i.heldout_qrels, i.groups) == (None, None, None)
    # own held-out queries: the bundled groups name h1..h11, which they may not hold
    held = tmp_path / "held.jsonl"
    shutil.copy(G.heldout_queries, held)
    i = ReportInputs(out=tmp_path / "o", heldout_queries=held, heldout_qrels=G.heldout_qrels).resolved()
    assert (i.heldout_queries, i.groups) == (held, None)
    # own corpus with the bundled queries: no Gatrocraptic held-out set joins it unasked
    docs = tmp_path / "docs.jsonl"
    shutil.copy(G.docs, docs)
    i = ReportInputs(out=tmp_path / "o", corpus=docs, terms=G.terms, dictionary=G.dictionary, train=G.train,
                     queries=G.queries, qrels=G.qrels).resolved()
    assert (i.heldout_queries, i.heldout_qrels) == (None, None)


def test_held_out_qrels_alone_are_refused_as_held_out_queries_alone_are(tmp_path):
    for given in ({"heldout_qrels": G.heldout_qrels}, {"heldout_queries": G.heldout_queries}):
        with pytest.raises(ConfigError, match="--heldout-queries and --heldout-qrels go together"):
            ReportInputs(out=tmp_path / "o", **given).resolved()


def test_no_experiment_at_all_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"--experiments: unknown empty; valid: H1, H2, H3, H4"):
        ReportInputs(out=tmp_path / "o", experiments=()).resolved()


@pytest.mark.parametrize("experiments, says", [
    (" , ", "--experiments: unknown empty"),
    ("H1,,H1", "--experiments names H1 more than once"),  # the empty item is no experiment
    ("H4, H4", "--experiments names H4 more than once"),  # " H4" is H4
])
def test_the_experiments_option_is_split_on_commas_and_trimmed(experiments, says, tmp_path, capsys):
    assert main(["report", "--out", str(tmp_path / "o"), "--experiments", experiments]) == 2
    assert says in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_every_file_option_reaches_the_report(tmp_path, capsys):
    """A user's corpus with all its files: each option dropped on its way in is refused as
    missing ("--dictionary required", "go together"); all there, it stops at the non-empty --out."""
    docs = tmp_path / "docs.jsonl"
    shutil.copy(G.docs, docs)
    out = tmp_path / "o"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    argv = ["report", "--out", str(out), "--corpus", str(docs), "--terms", str(G.terms), "--dictionary",
            str(G.dictionary), "--train", str(G.train), "--queries", str(G.queries), "--qrels", str(G.qrels),
            "--heldout-queries", str(G.heldout_queries), "--heldout-qrels", str(G.heldout_qrels)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "is not empty and holds no report" in err, err


def test_the_files_out_may_not_be_include_config_benchmark_and_base(tmp_path):
    config, bench = tmp_path / "c.json", tmp_path / "bench.json"
    i = ReportInputs(out=tmp_path / "o", config=config, benchmark=bench, base=str(tmp_path / "base"),
                     terms=tmp_path / "t.json").resolved()
    assert i.terms == tmp_path / "t.json"
    assert {config, bench, str(tmp_path / "base"), tmp_path / "t.json", G.docs} <= set(i.paths())
    assert i.config_file == str(config)
    assert ReportInputs(out=tmp_path / "o", config={"distill": {"epochs": 1}}).config_file is None


def test_a_train_config_given_as_one_is_validated(tmp_path):
    cfg = TrainConfig()
    cfg.distill.epochs = -1
    with pytest.raises(ConfigError, match="epochs"):
        ReportInputs(out=tmp_path / "o", config=cfg).train_config()


def _data(groups, qrels, queries, docs, terms=None) -> ReportData:
    return ReportData([Document(*d) for d in docs], [Query(*q) for q in queries], qrels, [Query("h1", "held")],
                      {"h1": {"d1": 1}}, terms or {"jargon": ["Gatrocraptic"]}, groups, "file")


def test_semantic_queries_are_the_main_ones_of_the_semantic_groups():
    data = _data({"domain-semantic": ["q1"], "heldout-domain-semantic": ["h1"], "control": ["q2"]}, {},
                 [("q1", "a"), ("q2", "b")], [])
    assert data.semantic_qids == ["q1"]


def test_a_query_in_no_group_of_the_groups_file_is_noted(tmp_path):
    groups = tmp_path / "groups.json"
    listed = json.loads(G.query_groups.read_text())
    listed["control"].remove("q3")
    groups.write_text(json.dumps(listed))
    data = load_report_data(ReportInputs(out=tmp_path / "o", groups=groups))
    assert data.groups_source == "file"
    assert data.notes == ["queries in no group of groups.json: q3 (counted in the overall metrics only)"]


def test_domain_terms_keep_one_spelling_per_term_the_documents_use_most(tiny_bert):
    terms = {"jargon": ["gatrocraptic", "Gatrocraptic"], "acronyms": ["API", "Api", "XR-7200"]}
    docs = [("d1", "Gatrocraptic and gatrocraptic"), ("d2", "Gatrocraptic again"), ("d3", "no acronym here")]
    data = _data({}, {}, [], docs, terms)
    # "API" and "Api" are one term, in no document: the first listed spelling stands
    assert domain_terms(tiny_bert, data) == ["Gatrocraptic", "API", "XR-7200"]


def test_the_primary_term_comes_from_semantic_then_explicit_queries_first_term_on_ties():
    docs = [("d1", "Gatrocraptic budget"), ("d2", "the API and Gatrocraptic"), ("d3", "an API page"),
            ("d4", "plain text")]
    qrels = {"s": {"d4": 2}, "e": {"d3": 1, "d2": 1}}
    groups = {"domain-explicit": ["e"], "domain-semantic": ["s"]}
    data = _data(groups, qrels, [("s", "spending"), ("e", "API docs")], docs)
    # the semantic query's relevant document names no term: the explicit one's decide
    assert choose_primary_term(["Gatrocraptic", "API"], data) == (
        "API", "in 2 of the 2 relevant documents of the domain-explicit queries")
    # semantic first: d1 (and d2) name Gatrocraptic, though the explicit query's name API more
    qrels["s"] = {"d1": 1, "d2": 1}
    assert choose_primary_term(["API", "Gatrocraptic"], data)[0] == "Gatrocraptic"
    # a tie in the semantic queries' documents: the first term listed
    qrels["s"] = {"d2": 1}
    assert choose_primary_term(["API", "Gatrocraptic"], data)[0] == "API"
    assert choose_primary_term(["Gatrocraptic", "API"], data)[0] == "Gatrocraptic"
    with pytest.raises(ConfigError, match="the terms file lists no domain term"):
        choose_primary_term([], data)


def test_every_setting_option_reaches_the_report(tmp_path, capsys, monkeypatch):
    """--seed, --term, --overwrite, --experiments, --config and --base as the first training step receives them
    (stood in by one that records them and stops the report)."""
    from sparse_adapt.report import experiments
    from tests.conftest import make_tiny_bert

    seen = []

    def first_training(inputs, name, hooks):
        seen.append((inputs.seed, inputs.term, inputs.overwrite, inputs.experiments, inputs.config, inputs.base, name))
        raise ConfigError("stopped before training")

    monkeypatch.setattr(experiments, "train_experiment", first_training)
    base = make_tiny_bert().save_pretrained(tmp_path / "tiny")
    config = tmp_path / "c.json"
    config.write_text("{}")
    argv = ["report", "--out", str(tmp_path / "o"), "--base", str(base), "--seed", "3", "--term", "API",
            "--experiments", "H2", "--overwrite", "--config", str(config)]
    assert main(argv) == 2
    assert "primary term: API (given with --term)" in capsys.readouterr().out
    assert seen == [(3, "API", True, ("H2",), config, str(base), "H2")]
