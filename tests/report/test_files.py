"""Whose output a directory is (``output_kind``), read from the files it holds, and the
report's file names (``slug``)."""

from __future__ import annotations

import unicodedata

import pytest

from sparse_adapt.errors import ConfigError
from sparse_adapt.report.benchmark import check_out
from sparse_adapt.report.benchmark_md import benchmark_file
from sparse_adapt.report.files import output_kind, slug


def test_a_pooled_result_file_alone_marks_a_benchmark_and_is_the_one_it_reports(tmp_path):
    (tmp_path / "benchmark-pool.json").write_text('{"schema": "sparse-adapt.benchmark/2"}')
    assert output_kind(tmp_path) == "benchmark"
    assert benchmark_file(tmp_path) == tmp_path / "benchmark-pool.json"


def test_a_stopped_tune_is_tune_s_by_its_trial_logs_alone(tmp_path):
    (tmp_path / "trials" / "0").mkdir(parents=True)
    (tmp_path / "trials" / "0" / "train_log.jsonl").write_text("")
    assert output_kind(tmp_path) == "tune"


def test_a_saved_model_s_settings_mark_a_folder_of_ours(tmp_path):
    # pretrained/ as adapt's pretraining leaves it: a model's files, sparse_adapt.json among them
    (tmp_path / "pretrained").mkdir()
    for name in ("sparse_adapt.json", "model.safetensors"):
        (tmp_path / "pretrained" / name).write_text("{}")
    assert output_kind(tmp_path) == "benchmark"


@pytest.mark.parametrize("text", ["[1, 2]", '{"schema": 5}', '"sparse-adapt.report/1"'])
def test_a_report_json_that_is_not_ours_is_nobody_s(tmp_path, text):
    (tmp_path / "report.json").write_text(text)
    assert output_kind(tmp_path) is None


def test_hidden_entries_say_nothing_about_whose_runs_these_are(tmp_path):
    # a lock or a killed write's temporary, alone in runs/ or beside an empty run folder
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / ".lock").write_text("")
    assert output_kind(tmp_path) is None
    (tmp_path / "runs" / "legal" / "seed0").mkdir(parents=True)
    (tmp_path / "runs" / "legal" / "seed0" / ".run.json.tmp").write_text("")
    assert output_kind(tmp_path) == "benchmark"


def test_a_user_s_file_in_runs_makes_it_nobody_s_folder(tmp_path):
    (tmp_path / "runs" / "legal").mkdir(parents=True)
    (tmp_path / "runs" / "notes.txt").write_text("theirs")
    assert output_kind(tmp_path) is None
    with pytest.raises(ConfigError, match="holds no benchmark"):
        check_out(tmp_path)


def test_runs_named_by_domain_beside_an_experiment_s_are_a_benchmark_s(tmp_path):
    """Only runs all named H1-H4 are a report's: a benchmark may benchmark a domain directory named H1."""
    for name in ("H1", "legal"):
        (tmp_path / "runs" / name).mkdir(parents=True)
    assert output_kind(tmp_path) == "benchmark"


def test_a_term_s_file_name_differs_from_another_spelling_s_even_once_normalised():
    """macOS stores "Zürich" composed or decomposed as one file name: a non-ASCII term gets its hash."""
    composed = "Z\u00fcrich"
    decomposed = unicodedata.normalize("NFD", composed)
    names = [unicodedata.normalize("NFC", slug(t)) for t in (composed, decomposed)]
    assert names[0] != names[1] and names[0].startswith("Z\u00fcrich-")
