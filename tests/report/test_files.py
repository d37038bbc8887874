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


def test_terms_that_differ_only_in_punctuation_get_their_own_file_names():
    # "C++" and "C#" both keep only "C": the hash of the whole term tells them apart
    assert slug("C++").startswith("C_-") and slug("C#").startswith("C_-")
    assert slug("C++") != slug("C#")
    assert slug("C++") == slug("C++") and slug("SAP-HANA_2") == "SAP-HANA_2"
    # a long non-ASCII term keeps its first 60 word characters, readable in the file name
    long_term = "Z\u00fcrich " + "x" * 80
    assert slug(long_term).rsplit("-", 1)[0] == ("Z\u00fcrich_" + "x" * 80)[:60]


def test_a_lock_and_empty_folders_alone_are_no_one_s_files(tmp_path):
    """What a run killed before it wrote anything leaves: a lock file and its empty directories."""
    from sparse_adapt.lock import LOCK_FILE
    from sparse_adapt.report.files import holds_files

    (tmp_path / LOCK_FILE).write_text("")
    (tmp_path / "notes").mkdir()
    assert not holds_files(tmp_path)
    check_out(tmp_path)
    (tmp_path / "notes" / "mine.txt").write_text("theirs")
    assert holds_files(tmp_path)


def test_a_marker_counts_down_to_the_depth_of_an_ablation_run_s_saved_model(tmp_path):
    # ablation/<domain>/seed<k>/no-<term>/final/sparse_adapt.json: five levels below OUT, the
    # deepest that _ours(out / "ablation") (depth 4) reads; the log beside it marks nothing
    run = tmp_path / "ablation" / "legal" / "seed0" / "no-ret"
    (run / "final").mkdir(parents=True)
    (run / "train_log.jsonl").write_text("")
    (run / "final" / "sparse_adapt.json").write_text("{}")
    assert output_kind(tmp_path) == "benchmark"
    # one level further down is past the depth: the log alone says nothing about whose it is
    (run / "final" / "sparse_adapt.json").unlink()
    (run / "final" / "deeper").mkdir()
    (run / "final" / "deeper" / "sparse_adapt.json").write_text("{}")
    assert output_kind(tmp_path) is None
