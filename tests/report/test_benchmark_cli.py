"""``sparse-adapt benchmark``'s command line and the checks made before any run: what the flags
become, what is printed at the end, and what is refused or said before training (the runs
themselves are in ``test_benchmark.py``)."""

from __future__ import annotations

import shutil

import pytest

import sparse_adapt.report.benchmark as benchmark_module
from sparse_adapt.cli import main
from sparse_adapt.cli.output import MAX_SEED
from sparse_adapt.report.benchmark import BenchmarkInputs, build_benchmark
from sparse_adapt.report.domains import resolve_domain


@pytest.fixture
def given(monkeypatch):
    """The BenchmarkInputs the command builds; the benchmark "ran" with one domain's two records,
    base 0.50 and seed 0 at 0.65 on the semantic group (+0.15: the corpus bar's, below 0.90)."""
    seen = []

    def build(inputs, hooks):
        seen.append(inputs)
        groups = lambda v: {"heldout-domain-semantic": {"queries": 2, "ndcg@10": v}}  # noqa: E731
        return {"results": [{"domain": "d", "split": "outside", "seed": None, "variant": "base", "groups": groups(0.5)},
                            {"domain": "d", "split": "outside", "seed": 0, "variant": "full", "groups": groups(0.65)}],
                "pooled": []}

    monkeypatch.setattr(benchmark_module, "build_benchmark", build)
    return seen


def test_every_generation_flag_reaches_adapt_under_its_own_keyword_zero_and_off_included(given, tmp_path, capsys):
    assert main(["benchmark", "--out", str(tmp_path / "b"), "--domains", "d", "--seeds", "0", "--pipeline",
                 "adapt-corpus", "--top", "5", "--min-count", "3", "--max-queries", "4", "--negatives", "2",
                 "--siblings", "0", "--teacher-labels"]) == 0, capsys.readouterr().err
    assert given[0].generation == {"top": 5, "min_count": 3, "max_queries": 4, "negatives": 2, "siblings": 0,
                                   "term_labels": False}


def test_the_end_of_the_run_prints_the_pipeline_s_bar_and_its_own_result_file(given, tmp_path, capsys):
    out = tmp_path / "b"
    assert main(["benchmark", "--out", str(out), "--domains", "d", "--seeds", "0", "--pipeline", "adapt-corpus"]) == 0
    printed = capsys.readouterr().out
    assert "- **d** (outside): semantic pass\n" in printed  # base + 0.10, not the 0.90 floor
    assert f"wrote {out / 'benchmark-adapt-corpus.md'} (numbers in benchmark-adapt-corpus.json)" in " ".join(printed.split())


def test_lists_are_read_with_spaces_and_the_largest_seed_is_a_seed(given, tmp_path, capsys):
    assert main(["benchmark", "--out", str(tmp_path / "b"), "--domains", "d, e", "--seeds", f"0, {MAX_SEED}"]) == 0, \
        capsys.readouterr().err
    assert (given[0].domains, given[0].seeds) == (("d", "e"), (0, MAX_SEED))


def test_adapt_corpus_needs_two_queries_per_document_at_least(given, tmp_path, capsys):
    assert main(["benchmark", "--out", str(tmp_path / "b"), "--domains", "d", "--pipeline", "adapt-corpus",
                 "--max-queries", "1"]) == 2
    assert "--max-queries" in capsys.readouterr().err and given == []


def test_an_out_that_is_a_file_is_refused_before_the_lock(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    assert main(["benchmark", "--out", str(tmp_path / "notes.txt"), "--domains", "legal", "--seeds", "0"]) == 2
    err = capsys.readouterr().err
    assert f"--out {tmp_path / 'notes.txt'} is a file, not a directory" in " ".join(err.split())
    assert (tmp_path / "notes.txt").read_text() == "mine"


class _Stop(Exception):
    pass


def test_a_domain_s_qrels_warnings_are_said_before_anything_runs(tmp_path, capsys):
    # the misspelt teacher stops the command before the base is scored: the warnings came first
    domain = tmp_path / "dom"
    shutil.copytree(resolve_domain("gatrocraptic").files.docs.parent, domain)
    with (domain / "heldout_qrels.tsv").open("a") as f:
        f.write("h1 0 d921 1\n")
    assert main(["benchmark", "--out", str(tmp_path / "b"), "--domains", str(domain), "--seeds", "0",
                 "--pipeline", "adapt-corpus", "--teacher", str(tmp_path / "no-such-teacher")]) == 2
    printed = " ".join(capsys.readouterr().out.split())
    assert "warning: dom: " in printed and "d921" in printed


def test_a_pooled_registered_domain_is_searched_among_its_own_documents_once(tmp_path, monkeypatch):
    """Pooled as if a directory, legal's documents would be searched twice: as d1 and as legal/d1."""
    searched = []

    def scores(evalset, model, feedback=None):
        searched.append([d.doc_id for d in evalset.documents])
        raise _Stop

    monkeypatch.setattr(benchmark_module.SpladeEncoder, "from_pretrained", staticmethod(lambda name: None))
    monkeypatch.setattr(benchmark_module.EvalSet, "scores", scores)
    with pytest.raises(_Stop):
        build_benchmark(BenchmarkInputs(out=tmp_path / "b", domains=("legal",), seeds=(0,), pool=True))
    [ids] = searched
    assert len(ids) == len(set(ids)) and not any(i.startswith("legal/") for i in ids)


def test_every_run_option_reaches_the_benchmark(given, tmp_path, capsys):
    # --pool, --config, --ablation and --feedback each change what is run and where it is written
    from sparse_adapt.retrieval.feedback import Feedback

    config = tmp_path / "c.json"
    config.write_text("{}")
    assert main(["benchmark", "--out", str(tmp_path / "b"), "--domains", "d", "--seeds", "0", "--pool",
                 "--config", str(config), "--ablation", "d, e", "--ablation-seeds", "1,2", "--feedback",
                 "--feedback-docs", "3"]) == 0, capsys.readouterr().err
    [inputs] = given
    assert inputs.pool and inputs.config == config and inputs.feedback == Feedback(docs=3)
    assert (inputs.ablation_domains, inputs.ablation_seeds) == (("d", "e"), (1, 2))


def test_the_adapt_corpus_teacher_reaches_the_benchmark(given, tmp_path, capsys):
    assert main(["benchmark", "--out", str(tmp_path / "b"), "--domains", "d", "--seeds", "0", "--pipeline",
                 "adapt-corpus", "--teacher", "my-teacher"]) == 0, capsys.readouterr().err
    assert given[0].teacher == "my-teacher"


def test_the_end_of_the_run_prints_each_pooled_group_after_the_bar(tmp_path, monkeypatch, capsys):
    pooled = {"split": "test", "group": "heldout-control", "queries": 40, "seeds": 2, "base": 0.5, "adapted": 0.75,
              "p_value": 0.0004}
    monkeypatch.setattr(benchmark_module, "build_benchmark", lambda inputs, hooks: {"results": [], "pooled": [pooled]})
    assert main(["benchmark", "--out", str(tmp_path / "b"), "--domains", "d", "--seeds", "0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "- pooled, test control: 0.500 -> 0.750 (+0.250, n=40 queries, mean of 2 seeds, p <0.001)" in lines


def test_the_bar_printed_at_the_end_reads_every_seed_run(tmp_path, monkeypatch, capsys):
    # seed 0 clears the corpus bar (+0.15), seed 1 does not (+0.05): the domain fails it
    groups = lambda v: {"heldout-domain-semantic": {"queries": 2, "ndcg@10": v}}  # noqa: E731
    results = [{"domain": "d", "split": "outside", "seed": None, "variant": "base", "groups": groups(0.5)},
               {"domain": "d", "split": "outside", "seed": 0, "variant": "full", "groups": groups(0.65)},
               {"domain": "d", "split": "outside", "seed": 1, "variant": "full", "groups": groups(0.55)}]
    monkeypatch.setattr(benchmark_module, "build_benchmark", lambda inputs, hooks: {"results": results, "pooled": []})
    assert main(["benchmark", "--out", str(tmp_path / "b"), "--domains", "d", "--seeds", "0,1", "--pipeline",
                 "adapt-corpus"]) == 0, capsys.readouterr().err
    assert "- **d** (outside): semantic fail\n" in capsys.readouterr().out


def test_the_base_and_every_feedback_setting_reach_the_benchmark(given, tmp_path, capsys):
    from sparse_adapt.retrieval.feedback import Feedback

    assert main(["benchmark", "--out", str(tmp_path / "b"), "--domains", "d", "--seeds", "0", "--base", "my-base",
                 "--feedback", "--feedback-docs", "2", "--feedback-weight", "0.25", "--feedback-terms", "7"]) == 0, \
        capsys.readouterr().err
    [inputs] = given
    assert inputs.base == "my-base" and inputs.feedback == Feedback(docs=2, weight=0.25, terms=7)
