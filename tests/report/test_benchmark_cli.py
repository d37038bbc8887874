"""``sparse-adapt benchmark``'s command line and the checks made before any run: what the flags
become, what is printed at the end, and what is refused or said before training (the runs
themselves are in ``test_benchmark.py``)."""

from __future__ import annotations

import json
import shutil

import pytest

import sparse_adapt.report.benchmark as benchmark_module
from sparse_adapt.cli import main
from sparse_adapt.cli.output import MAX_SEED
from sparse_adapt.errors import ConfigError, SparseAdaptError
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


@pytest.fixture
def stubbed(monkeypatch):
    """build_benchmark with every run and score stood in for: each run's keywords recorded, each
    model scored 0.5 on the semantic group, so the records and the checks are seen in seconds."""
    import sparse_adapt.training.pipeline as pipeline

    runs = []

    def run_pipeline(out, **kw):
        runs.append({"out": out, **kw})
        return out / "final"

    monkeypatch.setattr(pipeline, "run_pipeline", run_pipeline)
    monkeypatch.setattr(benchmark_module.SpladeEncoder, "from_pretrained", staticmethod(lambda name: name))
    monkeypatch.setattr(benchmark_module.EvalSet, "scores",
                        lambda self, model, feedback=None: {"heldout-domain-semantic": {"queries": 1, "ndcg@10": 0.5}})
    return runs


def test_an_ablation_seed_outside_seeds_gets_its_own_full_row(stubbed, tmp_path):
    # legal runs seed 1; its ablation seed 0 needs seed 0's full run measured too, once
    report = build_benchmark(BenchmarkInputs(out=tmp_path / "b", domains=("legal",), seeds=(1,),
                                             ablation_domains=("legal",), ablation_seeds=(0,)))
    rows = [(r["seed"], r["variant"]) for r in report["results"]]
    assert rows[:3] == [(None, "base"), (1, "full"), (0, "full")]
    assert sorted(rows[3:]) == sorted((0, f"no-{t}") for t in benchmark_module.TERMS)


def test_an_ablation_domain_not_benchmarked_is_refused_before_any_run(stubbed, tmp_path):
    """Its full runs joined the per-domain table and the pooled test, while benchmark.json's
    inputs named the benchmarked domains alone."""
    domain = tmp_path / "dom"
    shutil.copytree(resolve_domain("gatrocraptic").files.docs.parent, domain)
    with pytest.raises(ConfigError, match=r"^--ablation dom is not one of --domains"):
        build_benchmark(BenchmarkInputs(out=tmp_path / "b", domains=("legal",), seeds=(0,),
                                        ablation_domains=(str(domain),), ablation_seeds=(0,)))
    assert stubbed == [] and not (tmp_path / "b").exists()
    report = build_benchmark(BenchmarkInputs(out=tmp_path / "b", domains=("legal", str(domain)), seeds=(0,),
                                             ablation_domains=(str(domain),), ablation_seeds=(0,)))
    assert [r["domain"] for r in report["results"] if r["variant"] == "base"] == ["legal", "dom"]


@pytest.mark.parametrize("names, message", [
    ({"ablation_domains": ("legal", "legal")}, "--ablation names legal more than once"),
    ({"ablation_domains": ("legal",), "ablation_seeds": (0, 0)}, "--ablation-seeds names 0 more than once"),
])
def test_an_ablation_domain_or_seed_named_twice_is_refused_before_any_run(stubbed, tmp_path, names, message):
    with pytest.raises(ConfigError, match=message):
        build_benchmark(BenchmarkInputs(out=tmp_path / "b", domains=("legal",), seeds=(0,), **names))
    assert stubbed == []


def test_the_distill_stage_s_selection_is_read_from_the_training_log(tmp_path):
    from sparse_adapt.report.benchmark import _distill_info

    lines = [{"event": "stage_end", "stage": "dictionary", "seconds": 1.0},
             {"event": "stage_end", "stage": "distill", "seconds": 2.0, "epochs_run": 3, "best_epoch": 2,
              "best_objective": -0.25},
             {"event": "run_end"}]
    (tmp_path / "train_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert _distill_info(tmp_path) == {"best_epoch": 2, "epochs_run": 3, "best_objective": -0.25}
    # without validation the stage ends with no selection: nothing to read, not an error
    plain = {"event": "stage_end", "stage": "distill", "seconds": 2.0}
    (tmp_path / "train_log.jsonl").write_text(json.dumps(plain) + "\n")
    assert _distill_info(tmp_path) == {}
    # a resumed run's last distill stage_end wins over the first and over a step record; a torn
    # last line (a kill after the final model was written) does not stop the report
    lines[2:] = [{"event": "step", "stage": "distill", "best_epoch": 7},
                 {"event": "stage_end", "stage": "distill", "epochs_run": 4, "best_epoch": 3, "best_objective": 0.75}]
    (tmp_path / "train_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines) + '{"event": "stage_e')
    assert _distill_info(tmp_path) == {"best_epoch": 3, "epochs_run": 4, "best_objective": 0.75}
    assert _distill_info(tmp_path / "no-run") == {}


def test_adapt_s_runs_record_the_settings_recommended_for_the_pretrained_start(stubbed, tmp_path, monkeypatch):
    # The runs train from the pretrained base, so the recorded config (which `report --benchmark`
    # compares with its own) is laid over that base's recommended settings, not --base's.
    from types import SimpleNamespace

    import sparse_adapt.corpus.adapt as adapt_module
    import sparse_adapt.modeling.builtin as builtin

    start = tmp_path / "pretrained-base"
    start.mkdir()
    (start / builtin.RECOMMENDED_FILE).write_text(json.dumps({"distill": {"lr": 1.25e-5}}))
    monkeypatch.setattr(builtin, "needs_pretraining", lambda name: True)
    monkeypatch.setattr(adapt_module, "pretrained_base", lambda base, where, hooks=None: str(start))
    monkeypatch.setattr(adapt_module, "run_adapt", lambda docs, run_dir, *a, **k: SimpleNamespace(
        final=run_dir / "final", training=run_dir / "training"))
    report = build_benchmark(BenchmarkInputs(out=tmp_path / "b", domains=("legal",), seeds=(0,), pipeline="adapt"))
    assert report["inputs"]["start"] == str(start)
    assert report["inputs"]["config"]["distill"]["lr"] == 1.25e-5


def test_a_rerun_with_fewer_domains_says_the_tables_it_replaces(stubbed, tmp_path):
    """benchmark.md and .json were rewritten for legal alone, gatrocraptic's rows gone, with only
    `wrote ...` in the log; the runs of the dropped domain stay."""
    from sparse_adapt.progress import Hooks

    build_benchmark(BenchmarkInputs(out=tmp_path / "b", domains=("gatrocraptic", "legal"), seeds=(0,)))
    said: list[str] = []
    build_benchmark(BenchmarkInputs(out=tmp_path / "b", domains=("gatrocraptic", "legal"), seeds=(0,)),
                    Hooks(message=said.append))
    assert not any(line.startswith("replacing") for line in said)  # the same benchmark: nothing to say
    build_benchmark(BenchmarkInputs(out=tmp_path / "b", domains=("legal",), seeds=(0,)), Hooks(message=said.append))
    assert f"replacing {tmp_path / 'b' / 'benchmark.json'} (domains gatrocraptic, legal) with domains legal" in said[-1]
