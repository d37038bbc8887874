"""The report's steps without training: what train_experiment hands the pipeline, one stage's
evaluation on a tiny model, the assembled inputs, --out's checks, and build_report up to its
first training step (stood in by one that stops the report there)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from sparse_adapt.data import Document, Query
from sparse_adapt.report import ReportData, ReportInputs
from sparse_adapt.report import experiments
from sparse_adapt.report.files import slug
from sparse_adapt.report.results import SHARED_SHOWN, TOP_K
from sparse_adapt.training.stages import EXPERIMENTS
from test_report import SUITE  # a sibling test module, as pytest imports it
from tests.conftest import make_tiny_bert


def test_train_experiment_hands_the_reports_settings_to_the_pipeline(tmp_path, monkeypatch):
    from sparse_adapt.training import pipeline

    seen = {}
    monkeypatch.setattr(pipeline, "run_pipeline", lambda **kw: seen.update(kw) or Path("final"))
    config = tmp_path / "tiny.json"
    config.write_text(json.dumps({"distill": {"epochs": 1}}))
    inputs = ReportInputs(out=tmp_path / "o", config=config, seed=7, overwrite=True)
    assert experiments.train_experiment(inputs, "H2") == Path("final")
    assert (seen["out"], seen["stages"], seen["seed"]) == (tmp_path / "o" / "runs" / "H2", EXPERIMENTS["H2"], 7)
    # --overwrite retrains a run of other settings; errors about a setting name the file it came from
    assert (seen["overwrite"], seen["config_source"], seen["config"].distill.epochs) == (True, str(config), 1)


def test_one_stage_counts_judged_queries_keeps_every_relevant_document_and_diagnoses_every_term(tmp_path):
    docs = [Document(f"d{i}", f"zorblatt valve number {i} of the plant") for i in range(14)]
    # one relevant document and twelve judged not relevant: the top stays TOP_K long
    qrels = {"s": {"d0": 1, **{f"d{i}": 0 for i in range(1, 13)}}}
    data = ReportData(documents=docs, queries=[Query("s", "zorblatt valve"), Query("u", "plant number")], qrels=qrels,
                      heldout_queries=[], heldout_qrels={}, terms={"jargon": ["zorblatt", "C++"]},
                      groups={"domain-semantic": ["s"], "control": ["s", "u"]}, groups_source="file")
    keep = tmp_path / "diagnostics"
    keep.mkdir()
    splade = make_tiny_bert()
    with torch.no_grad():  # a few hundred active terms, not ~30k: diagnostics stay fast
        splade.mlm.get_output_embeddings().bias -= 0.2
    # --term may name a word of the documents that the terms file does not list: it is diagnosed too
    result = experiments.evaluate_stage("base", "tiny", data, "valve", splade=splade, keep_diagnostics=keep)
    assert list(result.terms) == ["valve", "zorblatt", "C++"]
    assert len(result.top["s"]) == TOP_K
    assert result.groups["control"]["queries"] == 1  # "u" has no judgement to score
    assert result.judged == {"queries": 1}
    assert sorted(p.name for p in keep.iterdir()) == sorted(
        ["inspect.json", "diagnose-valve.json", f"diagnose-{slug('zorblatt')}.json", f"diagnose-{slug('C++')}.json"])
    shared = [len(e.shared) for e in result.explanations["s"]]
    assert max(shared) == SHARED_SHOWN  # a random model's texts share far more tokens than are shown


def test_the_assembled_inputs_carry_the_seed_and_the_benchmark_file(tmp_path):
    bench = tmp_path / "suite"
    bench.mkdir()
    (bench / "benchmark.json").write_text("{}")  # which file: its contents are read elsewhere
    inputs = ReportInputs(out=tmp_path / "o", seed=5, benchmark=bench)
    data = ReportData([], [], {}, [], {}, {}, {}, "file")
    report = experiments.assemble(inputs, data, [], "Gatrocraptic", "given with --term")
    assert (report.inputs["seed"], report.inputs["benchmark"]) == (5, str(bench / "benchmark.json"))


class Stop(Exception):
    """Raised where the report would train its first experiment."""


@pytest.fixture()
def until_training(tmp_path, monkeypatch):
    """build_report on a tiny base, stopped at its first training step; what it said and the
    loaded data come back."""
    base = make_tiny_bert().save_pretrained(tmp_path / "tiny")
    said, loaded = [], []

    def stop(inputs, name, hooks):
        from sparse_adapt.lock import LockError, locked

        with pytest.raises(LockError):  # the report holds --out's lock from before its first run
            with locked(inputs.out):
                pass
        raise Stop

    def load(inputs):
        loaded.append(real_load(inputs))
        return loaded[-1]

    real_load = experiments.load_report_data
    monkeypatch.setattr(experiments, "train_experiment", stop)
    monkeypatch.setattr(experiments, "load_report_data", load)
    hooks = type("Hooks", (), {"message": staticmethod(said.append)})()

    def run(**given):
        with pytest.raises(Stop):
            experiments.build_report(ReportInputs(**{"out": tmp_path / "o", "base": str(base), "experiments": ("H1",),
                                                     **given}), hooks)
        return said, loaded[-1]

    return run


def test_a_given_term_is_the_criteria_tables_and_the_lock_is_held_before_training(until_training):
    said, _ = until_training(term="API")
    assert "primary term: API (given with --term)" in said


def test_a_benchmark_run_on_another_base_is_noted_in_the_report(until_training, tmp_path):
    bench = tmp_path / "suite"
    bench.mkdir()
    (bench / "benchmark.json").write_text(json.dumps(SUITE))  # run on offline-minilm, the report on a tiny base
    said, data = until_training(benchmark=bench)
    note = next(n for n in data.notes if n.startswith(f"the benchmark {bench / 'benchmark.json'} was run with another"))
    assert f"warning: {note}" in said


def test_out_given_as_the_config_file_is_refused_even_with_overwrite(tmp_path, capsys):
    from sparse_adapt.cli import main

    config = tmp_path / "tiny.json"
    config.write_text(json.dumps({"distill": {"epochs": 1}}))
    # a base that cannot load: had the check let the config go, the report would stop there
    argv = ["report", "--out", str(config), "--config", str(config), "--overwrite", "--base", str(tmp_path / "none")]
    assert main(argv) == 2
    assert "is also an input" in capsys.readouterr().err
    assert json.loads(config.read_text()) == {"distill": {"epochs": 1}}


def test_overwrite_replaces_an_existing_file_given_as_out_only_once_the_base_has_loaded(until_training, tmp_path):
    from sparse_adapt.errors import SparseAdaptError

    out = tmp_path / "some.yaml"
    out.write_text("key: value\n")
    with pytest.raises(SparseAdaptError, match="none"):
        experiments.build_report(ReportInputs(out=out, base=str(tmp_path / "none"), overwrite=True, experiments=("H1",)))
    assert out.read_text() == "key: value\n"  # the report could not start: the user's file stays
    until_training(out=out, overwrite=True)
    assert not out.exists()  # the base loaded: gone before the first training step, for the report's folder


def test_overwrite_lets_a_report_write_beside_another_commands_output(tmp_path):
    from sparse_adapt.errors import ConfigError

    bench = tmp_path / "bench"
    (bench / "runs" / "legal" / "seed0").mkdir(parents=True)
    with pytest.raises(ConfigError, match=r"give another --out \(--overwrite writes the report beside it\)"):
        experiments._check_out(bench)
    experiments._check_out(bench, overwrite=True)  # asked for: refused no more
