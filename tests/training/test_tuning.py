"""``sparse-adapt tune`` on a tiny model: trials, pruning, best.toml that train accepts."""

from __future__ import annotations

import json
import shlex
import re
import sqlite3
from pathlib import Path

import pytest

from sparse_adapt.cli import main
from sparse_adapt.data import TrainExample, load_dictionary, load_domain_terms, load_train
from sparse_adapt.errors import ConfigError, OutputError
from sparse_adapt.modeling.encoder import SpladeEncoder
from sparse_adapt.training import validation as validation_mod
from sparse_adapt.training.config import TrainConfig
from sparse_adapt.training.config_files import config_from_dict, load_config
from sparse_adapt.training.stages import TrainData
from sparse_adapt.progress import Hooks
from sparse_adapt.training.study import study_db_problem
from sparse_adapt.training.tuning import Range, run_tuning, trials_table
from tests.training.test_stages import SMALL, VALID, Messages, inputs, tiny_dir, valid_file  # noqa: F401 (fixtures)

SPACE = {"lr": Range(1e-4, 1e-2), "pres": Range(0.1, 10.0)}


def _data(inputs, valid=True) -> TrainData:
    return TrainData(Path(inputs["corpus"]), load_domain_terms(inputs["terms"]), load_dictionary(inputs["dictionary"]),
                     load_train(inputs["train"]), valid=[_example(row) for row in VALID] if valid else None)


def _example(row: dict) -> TrainExample:
    return TrainExample(row["qid"], row["query"], tuple(row["doc_ids"]), tuple(row["doc_texts"]), tuple(row["teacher_scores"]))


def _config(tmp_path, epochs=4):
    path = tmp_path / "start.json"
    path.write_text(json.dumps({**SMALL, "distill": {**SMALL["distill"], "epochs": epochs}}), encoding="utf-8")
    return load_config(path)


def test_tune_prunes_a_trailing_trial_and_writes_the_best_config(tiny_dir, inputs, tmp_path, monkeypatch):
    # Scripted validation per trial: reference, epoch 0, epochs 1-4. Trials 0 and 1 improve,
    # trial 2 stays at the reference: the median pruner must stop it after its warm-up epochs.
    good = [0.5, 0.5, 0.6, 0.7, 0.8, 0.9]
    better = [0.5, 0.5, 0.7, 0.8, 0.9, 0.95]
    flat = [0.5, 0.5, 0.5, 0.5, 0.5, 0.5]
    script = iter(good + better + flat)
    monkeypatch.setattr(validation_mod.ValidationSet, "measure", lambda self, s: {"domain": next(script), "control": 1.0})
    out = tmp_path / "study"
    said = Messages()
    summary = run_tuning(_data(inputs), out, str(tiny_dir), trials=3, seed=0, config=_config(tmp_path), space=SPACE,
                         hooks=said.hooks())
    states = [r["state"] for r in summary["trials"]]
    assert states == ["complete", "complete", "pruned"]
    assert summary["best_trial"] == 1 and summary["best_value"] == pytest.approx(0.45)
    best = load_config(out / "best.toml")
    assert best.distill.lr == pytest.approx(summary["best_params"]["lr"])
    assert best.distill.pres == pytest.approx(summary["best_params"]["pres"])
    assert best.warmup.epochs == SMALL["warmup"]["epochs"]  # untuned settings carried over
    table = (out / "trials.md").read_text(encoding="utf-8")
    assert table.count("\n| ") == 3 and "pruned" in table
    assert (out / "trials" / "2.jsonl").is_file()
    # The console names trials as the files do: the best one, 1, is the one that scored 0.45.
    assert "tune: trial 1 (2 of 3): " in said.text() and "tune: trial 1 complete, objective +0.4500" in said.text()
    assert "tune: trial 2 pruned" in said.text()
    # pruned at the warm-up's end: epochs 1 and 2 reported (a pruner judging epoch 1 stops it there)
    assert summary["trials"][2]["epochs_run"] == 2 and summary["trials"][2]["best_epoch"] is None
    # a complete trial keeps the epoch its value came from (both scripts peak at their last epoch, 4)
    assert [(r["best_epoch"], r["epochs_run"]) for r in summary["trials"][:2]] == [(4, 4), (4, 4)]
    assert "\n| 1 | complete | +0.4500 | 4 | 4 | " in table
    assert ("best of 2 completed trials (trial 1, objective +0.4500, the config's own values +0.4000, seed 0)"
            in (out / "best.toml").read_text())  # the pruned trial is none of them
    assert "warning: distill.interpolate" not in said.text()  # it is 0: the trials score what train delivers


def test_a_trial_is_judged_only_after_two_complete_ones(tiny_dir, inputs, tmp_path, monkeypatch):
    """One complete trial is no median to judge by: trailing it, the second trial still runs all its epochs."""
    script = iter([0.5, 0.5, 0.6, 0.7] + [0.5] * 4)  # per trial: reference, epochs 0-2
    monkeypatch.setattr(validation_mod.ValidationSet, "measure",
                        lambda self, s: {"domain": next(script), "control": 1.0})
    summary = run_tuning(_data(inputs), tmp_path / "s", str(tiny_dir), trials=2, seed=0,
                         config=_config(tmp_path, epochs=2), space=SPACE)
    assert [(r["state"], r["epochs_run"]) for r in summary["trials"]] == [("complete", 2), ("complete", 2)]
    assert [r["value"] for r in summary["trials"]] == pytest.approx([0.2, 0.0])


def test_a_trial_that_only_ties_the_baseline_does_not_beat_it(tiny_dir, inputs, tmp_path, monkeypatch):
    monkeypatch.setattr(validation_mod.ValidationSet, "measure", lambda self, s: {"domain": 0.5, "control": 1.0})
    summary = run_tuning(_data(inputs), tmp_path / "s", str(tiny_dir), trials=2, seed=0,
                         config=_config(tmp_path, epochs=1), space=SPACE)
    assert [r["value"] for r in summary["trials"]] == [0.0, 0.0]
    assert summary["best_trial"] == 0 == summary["baseline_trial"]
    assert "= the config's own values: no trial beat them" in (tmp_path / "s" / "best.toml").read_text()


def test_tune_with_the_same_seed_samples_the_same_trials(tiny_dir, inputs, tmp_path):
    runs = [run_tuning(_data(inputs), tmp_path / f"s{i}", str(tiny_dir), trials=2, seed=7,
                       config=_config(tmp_path, epochs=1), space=SPACE) for i in range(2)]
    assert [r["params"] for r in runs[0]["trials"]] == [r["params"] for r in runs[1]["trials"]]
    assert [r["value"] for r in runs[0]["trials"]] == pytest.approx([r["value"] for r in runs[1]["trials"]])
    other = run_tuning(_data(inputs), tmp_path / "s8", str(tiny_dir), trials=2, seed=8,
                       config=_config(tmp_path, epochs=1), space=SPACE)
    assert other["trials"][0]["params"] == runs[0]["trials"][0]["params"]  # trial 0: the config's own values
    assert other["trials"][1]["params"] != runs[0]["trials"][1]["params"]  # the seed is the sampler's


def test_a_trial_trains_as_train_does_with_the_studys_seed(tiny_dir, inputs, valid_file, tmp_path):
    """best.toml's usage line passes the study's seed to train: the baseline trial's objective
    is the one train's distill stage reaches with the same values and seed."""
    from sparse_adapt.progress import signed
    from sparse_adapt.training.pipeline import run_pipeline

    # one query a step: the seed orders the 2 training queries, so another seed trains another model
    cfg = config_from_dict({**SMALL, "distill": {**SMALL["distill"], "epochs": 2, "batch_size": 1}})
    summary = run_tuning(_data(inputs), tmp_path / "s", str(tiny_dir), trials=1, seed=3, config=cfg, space=SPACE)
    said = Messages()
    run_pipeline(base=str(tiny_dir), out=tmp_path / "run", stages=("distill",), config=cfg, seed=3, valid=valid_file,
                 hooks=said.hooks(), **inputs)
    kept = next(m for m in said if m.startswith("distill: kept epoch"))
    assert kept.endswith(f"(objective {signed(summary['best_value'], 4)})"), kept

    def losses(log: Path) -> list[float]:
        return [r["loss"] for r in map(json.loads, log.read_text().splitlines()) if "loss" in r]

    assert losses(tmp_path / "s" / "trials" / "0.jsonl") == pytest.approx(losses(tmp_path / "run" / "train_log.jsonl"))
    assert len(losses(tmp_path / "run" / "train_log.jsonl")) >= 4  # 2 epochs x 2 steps


def test_tune_without_validation_queries_is_refused(tiny_dir, inputs, tmp_path):
    with pytest.raises(ConfigError, match="needs validation queries"):
        run_tuning(_data(inputs, valid=False), tmp_path / "s", str(tiny_dir), trials=1, config=_config(tmp_path))


def test_trials_table_lists_best_first():
    # A pruned trial keeps its last reported objective (Optuna's): it ranks nothing all the same.
    rows = [{"number": 0, "state": "complete", "value": 0.1, "params": {"lr": 1.234e-3}, "best_epoch": 2,
             "epochs_run": 4},
            {"number": 1, "state": "pruned", "value": 0.5, "params": {"lr": 2e-3}, "best_epoch": None, "epochs_run": 2},
            {"number": 2, "state": "complete", "value": 0.3, "params": {"lr": 3e-3}, "best_epoch": 1, "epochs_run": 4},
            {"number": 3, "state": "fail", "value": None, "params": {"lr": 4e-3}},
            # killed before it drew its values: none to show
            {"number": 4, "state": "fail", "value": None, "params": {}, "failure": "stopped"}]
    lines = trials_table(rows, {"lr": Range(1e-4, 1e-2)}).splitlines()
    assert [line.split("|")[1].strip() for line in lines[2:7]] == ["2", "0", "1", "3", "4"]
    assert lines[4] == "| 1 | pruned | +0.5000 | - | 2 | 0.002 |" and lines[5] == "| 3 | fail | - | - | - | 0.004 |"
    assert lines[3] == "| 0 | complete | +0.1000 | 2 | 4 | 0.00123 |" and lines[6] == "| 4 | fail | - | - | - | - |"
    assert lines[7:] == ["", "- trial 4: stopped"]


def test_tune_cli_best_toml_is_accepted_by_train(tiny_dir, inputs, tmp_path, capsys):
    start = tmp_path / "start.json"
    start.write_text(json.dumps({**SMALL, "distill": {**SMALL["distill"], "epochs": 1}}))
    files = ["--corpus", str(inputs["corpus"]), "--terms", str(inputs["terms"]), "--dictionary",
             str(inputs["dictionary"]), "--train", str(inputs["train"])]
    code = main(["tune", "--base", str(tiny_dir), *files, "--out", str(tmp_path / "study"), "--config", str(start),
                 "--trials", "1", "--seed", "0", "--valid-fraction", "0.5"])
    assert code == 0, capsys.readouterr()
    assert (tmp_path / "study" / "prefix" / "dictionary" / "config.json").is_file()
    assert load_config(tmp_path / "study" / "best.toml").distill.valid_fraction == 0.5
    assert json.loads((tmp_path / "study" / "trials.json").read_text())["valid_fraction"] == 0.5
    # the printed line runs as it is (it lacked every input: "Missing option '--corpus'")
    usage = json.loads((tmp_path / "study" / "trials.json").read_text())["usage"]
    argv = shlex.split(usage.replace("best.toml", str(tmp_path / "study" / "best.toml")).replace("OUT_DIR", str(tmp_path / "run")))
    assert argv[:2] == ["sparse-adapt", "train"] and main(argv[1:]) == 0, capsys.readouterr()
    assert (tmp_path / "run" / "final" / "config.json").is_file()


def test_a_run_of_the_mlm_stages_survives_a_change_of_distill_settings(tiny_dir, inputs, tmp_path):
    # tune and benchmark share one MLM prefix across distill configs: its manifest holds
    # only the sections of its own stages.
    from sparse_adapt.training.config_files import config_from_dict
    from sparse_adapt.training.pipeline import RunMismatchError, run_pipeline
    from sparse_adapt.progress import Hooks

    out = tmp_path / "prefix"
    stages = ("extend", "warmup")
    run_pipeline(base=str(tiny_dir), out=out, stages=stages, config=config_from_dict(SMALL), seed=0, **inputs)
    assert set(json.loads((out / "run.json").read_text())["config"]) == {"warmup"}
    messages = []
    other = {**SMALL, "distill": {**SMALL["distill"], "lr": 0.5}}
    run_pipeline(base=str(tiny_dir), out=out, stages=stages, config=config_from_dict(other), seed=0,
                 hooks=Hooks(message=messages.append), **inputs)
    assert any("resuming: extend, warmup already complete" in m for m in messages)
    changed = {**SMALL, "warmup": {**SMALL["warmup"], "lr": 0.5}}
    with pytest.raises(RunMismatchError, match=r"changes its config \[warmup\]"):
        run_pipeline(base=str(tiny_dir), out=out, stages=stages, config=config_from_dict(changed), seed=0, **inputs)


@pytest.mark.parametrize("extra, message", [
    ([], "tune needs validation queries: pass --valid FILE or --valid-fraction F"),
    (["--valid-fraction", "1.0"], "--valid-fraction must be between 0 and 1 (exclusive), got 1.0"),
    (["--valid-fraction", "nan"], "--valid-fraction must be between 0 and 1 (exclusive), got nan"),
    # 0 holds out nothing: the flag given is the one at fault, not "pass --valid-fraction"
    (["--valid-fraction", "0"], "--valid-fraction must be between 0 and 1 (exclusive), got 0.0"),
    (["--valid-fraction", "0.5", "--valid", "TRAIN"], "--valid and --valid-fraction both choose the validation queries"),
    (["--valid", "TRAIN", "--config", "HALF"], "--valid and distill.valid_fraction 0.5 both choose the validation queries"),
    (["--valid-fraction", "0.01"], "distill.valid_fraction 0.01 of 2 training queries holds out none"),
    (["--valid-fraction", "0.5", "--seed", "-1"], "sparse-adapt tune: Invalid value for '--seed'"),
])
def test_tune_cli_validation_choices_are_one_line_errors(tiny_dir, inputs, tmp_path, capsys, extra, message):
    half = tmp_path / "half.json"
    half.write_text(json.dumps({"distill": {"valid_fraction": 0.5}}))
    extra = [str(inputs["train"]) if a == "TRAIN" else str(half) if a == "HALF" else a for a in extra]
    files = ["--corpus", str(inputs["corpus"]), "--terms", str(inputs["terms"]), "--dictionary",
             str(inputs["dictionary"]), "--train", str(inputs["train"])]
    code = main(["tune", "--base", str(tiny_dir), *files, "--out", str(tmp_path / "study"), "--trials", "1", *extra])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err
    assert not (tmp_path / "study").exists()


@pytest.mark.parametrize("kept", ["best.toml", "trials.json"])
def test_tune_cli_refuses_an_out_holding_its_config_or_space_even_with_overwrite(tiny_dir, inputs, tmp_path, capsys,
                                                                                  monkeypatch, kept):
    """The user's config kept as OUT/best.toml (or a space as OUT/trials.json) was replaced by
    the study's own file under --overwrite."""
    out = tmp_path / "study"
    out.mkdir()
    given = out / kept
    option = "--space" if kept == "trials.json" else "--config"
    given.write_text(json.dumps({"kd": [0.05, 0.5]}) if option == "--space" else "[distill]\nkd = 0.1\n")
    monkeypatch.setattr(SpladeEncoder, "from_pretrained", classmethod(lambda *a, **k: pytest.fail("work started")))
    before = given.read_bytes()
    files = ["--corpus", str(inputs["corpus"]), "--terms", str(inputs["terms"]), "--dictionary",
             str(inputs["dictionary"]), "--train", str(inputs["train"])]
    code = main(["tune", "--base", str(tiny_dir), *files, "--out", str(out), "--trials", "1", "--valid-fraction", "0.5",
                 option, str(given), "--overwrite"])
    err = capsys.readouterr().err
    assert code == 2 and f"--out {out}: the study writes {kept} there, which is or holds an input ({given})" in err
    assert "Traceback" not in err
    assert given.read_bytes() == before and sorted(p.name for p in out.iterdir()) == [kept]


@pytest.mark.parametrize("kind, marker", [("benchmark", "benchmark.json"), ("report", "report.json"),
                                          ("adapt", "adapt.json")])
def test_tune_cli_refuses_another_command_s_output_even_with_overwrite(tiny_dir, inputs, tmp_path, capsys,
                                                                       monkeypatch, kind, marker):
    """--overwrite wrote the study's prefix/ into a benchmark's own prefix/, after which
    `benchmark` refused its finished folder (it has no --overwrite); report and benchmark
    already refused each other's."""
    out = tmp_path / "other"
    out.mkdir()
    schema = {"benchmark": "sparse-adapt.benchmark/2", "report": "sparse-adapt.report/1"}.get(kind, "x")
    (out / marker).write_text(json.dumps({"schema": schema}))
    monkeypatch.setattr(SpladeEncoder, "from_pretrained", classmethod(lambda *a, **k: pytest.fail("work started")))
    files = ["--corpus", str(inputs["corpus"]), "--terms", str(inputs["terms"]), "--dictionary",
             str(inputs["dictionary"]), "--train", str(inputs["train"])]
    code = main(["tune", "--base", str(tiny_dir), *files, "--out", str(out), "--trials", "1", "--valid-fraction", "0.5",
                 "--overwrite"])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and f"--out {out} holds a `sparse-adapt {kind}` output, not a tune study" in err
    assert sorted(p.name for p in out.iterdir()) == [marker]


def test_tune_cli_refuses_an_out_inside_its_base_model_s_folder(tiny_dir, inputs, tmp_path, capsys, monkeypatch):
    # the study's prefix/ and trials/ would be written among the model's own files
    import shutil

    base = tmp_path / "base"
    shutil.copytree(tiny_dir, base)
    before = sorted(p.name for p in base.iterdir())
    monkeypatch.setattr(SpladeEncoder, "from_pretrained", classmethod(lambda *a, **k: pytest.fail("work started")))
    files = ["--corpus", str(inputs["corpus"]), "--terms", str(inputs["terms"]), "--dictionary",
             str(inputs["dictionary"]), "--train", str(inputs["train"])]
    code = main(["tune", "--base", str(base), *files, "--out", str(base / "study"), "--trials", "1",
                 "--valid-fraction", "0.5"])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and f"--out {base / 'study'} is inside an input's folder ({base})" in err
    assert sorted(p.name for p in base.iterdir()) == before


def test_tune_cli_takes_an_input_kept_elsewhere_in_its_out(tiny_dir, inputs, tmp_path, monkeypatch):
    """Only the study's own paths are refused: a space kept as OUT/space.toml (and a resume with
    it) worked before, and no file of the study replaces it."""
    from sparse_adapt.training.tuning import check_inputs_outside_study

    out = tmp_path / "study"
    out.mkdir()
    (out / "space.toml").write_text("kd = [0.05, 0.5]\n")
    check_inputs_outside_study(out, [out / "space.toml", inputs["train"], "offline-minilm", None])
    (out / "trials").mkdir()
    (out / "trials" / "mine.jsonl").write_text("")
    with pytest.raises(OutputError, match=r"the study writes trials/ there, which is or holds an input"):
        check_inputs_outside_study(out, [out / "trials" / "mine.jsonl"])
    (out / "prefix").mkdir()  # the prefix run's folder, which --overwrite retrains
    (out / "prefix" / "start.toml").write_text("[distill]\nkd = 0.1\n")
    with pytest.raises(OutputError, match=r"the study writes prefix/ there, which is or holds an input"):
        check_inputs_outside_study(out, [out / "prefix" / "start.toml"])


def test_results_a_study_left_mark_a_directory_it_reruns_in(tmp_path):
    """trials.json is the last file a study writes: beside its best.toml it is a study's, not a user's."""
    from sparse_adapt.training.tuning import check_study_dir

    out = tmp_path / "study"
    out.mkdir()
    (out / "best.toml").write_text("# sparse-adapt tune: best of 2 completed trials\n")
    (out / "trials.json").write_text("{}\n")
    check_study_dir(out, overwrite=False)


def test_a_study_stopped_while_its_prefix_trained_is_rerun_in_place(tmp_path):
    """prefix/run.json is the first file a study writes: an --out holding it is a study's, rerun without --overwrite."""
    from sparse_adapt.training.tuning import check_study_dir

    out = tmp_path / "study"
    (out / "prefix").mkdir(parents=True)
    (out / "prefix" / "notes.txt").write_text("a user's")
    with pytest.raises(OutputError, match="holds no tune study"):
        check_study_dir(out, overwrite=False)
    (out / "prefix" / "run.json").write_text("{}\n")
    check_study_dir(out, overwrite=False)


def test_an_out_that_is_a_file_is_refused_before_any_work(tiny_dir, inputs, tmp_path, monkeypatch):
    out, cfg = tmp_path / "study", _config(tmp_path, epochs=1)
    out.write_text("mine")
    before = sorted(p.name for p in tmp_path.iterdir())
    monkeypatch.setattr(SpladeEncoder, "from_pretrained", classmethod(lambda *a, **k: pytest.fail("work started")))
    for overwrite in (False, True):
        with pytest.raises(OutputError, match=re.escape(f"--out {out} is an existing file; a study needs a directory")):
            run_tuning(_data(inputs), out, str(tiny_dir), trials=1, config=cfg, space=SPACE, overwrite=overwrite)
    assert out.read_text() == "mine" and sorted(p.name for p in tmp_path.iterdir()) == before


def test_tune_through_the_library_refuses_a_seed_the_sampler_cannot_take_before_any_work(tiny_dir, inputs, tmp_path,
                                                                                         monkeypatch):
    monkeypatch.setattr(SpladeEncoder, "from_pretrained", classmethod(lambda *a, **k: pytest.fail("work started")))
    with pytest.raises(ConfigError, match=re.escape("--seed must be between 0 and 2**32 - 1, got 4294967296")):
        run_tuning(_data(inputs), tmp_path / "s", str(tiny_dir), trials=1, seed=2**32, space=SPACE,
                   config=_config(tmp_path, epochs=1))


def test_tune_through_the_library_refuses_no_trials_before_any_work(tiny_dir, inputs, tmp_path, monkeypatch):
    """The CLI's --trials has its own minimum; the library trained the prefix, then said no trial completed."""
    monkeypatch.setattr(SpladeEncoder, "from_pretrained", classmethod(lambda *a, **k: pytest.fail("work started")))
    with pytest.raises(ConfigError, match=re.escape("--trials must be >= 1, got 0")):
        run_tuning(_data(inputs), tmp_path / "s", str(tiny_dir), trials=0, space=SPACE, config=_config(tmp_path, epochs=1))
    assert not (tmp_path / "s").exists()


def test_tune_refuses_a_directory_of_other_files_before_any_work(tiny_dir, inputs, tmp_path, monkeypatch):
    """A user's own best.toml is never replaced by a study unless --overwrite; an earlier
    study's directory is rerun in place."""
    out = tmp_path / "mine"
    out.mkdir()
    (out / "best.toml").write_text("# my settings\n")
    monkeypatch.setattr(SpladeEncoder, "from_pretrained", classmethod(lambda *a, **k: pytest.fail("work started")))
    with pytest.raises(OutputError, match="holds no tune study .*--overwrite"):
        run_tuning(_data(inputs), out, str(tiny_dir), trials=1, config=_config(tmp_path, epochs=1), space=SPACE)
    assert (out / "best.toml").read_text() == "# my settings\n"
    monkeypatch.undo()
    first = run_tuning(_data(inputs), out, str(tiny_dir), trials=1, config=_config(tmp_path, epochs=1), space=SPACE,
                       overwrite=True)
    assert "my settings" not in (out / "best.toml").read_text()
    again = run_tuning(_data(inputs), out, str(tiny_dir), trials=1, config=_config(tmp_path, epochs=1), space=SPACE)
    assert again["trials"][0]["params"] == first["trials"][0]["params"]


def test_a_trial_that_goes_non_finite_fails_alone_and_the_study_goes_on(tiny_dir, inputs, tmp_path, monkeypatch):
    from sparse_adapt.progress import Hooks
    from sparse_adapt.training import tuning as tuning_mod
    from sparse_adapt.training.loop import NonFiniteError

    real, calls = tuning_mod.DistillStage.run, []

    def run(self, splade, ctx):
        calls.append(1)
        if len(calls) == 2:
            raise NonFiniteError("distill: the loss is nan at step 1")
        return real(self, splade, ctx)

    monkeypatch.setattr(tuning_mod.DistillStage, "run", run)
    out = tmp_path / "study"
    said: list[str] = []
    summary = run_tuning(_data(inputs), out, str(tiny_dir), trials=3, seed=0, config=_config(tmp_path, epochs=1),
                         space=SPACE, hooks=Hooks(message=said.append))
    assert [r["state"] for r in summary["trials"]] == ["complete", "fail", "complete"]
    assert summary["best_trial"] in (0, 2) and (out / "best.toml").is_file()
    # the reason, in one line and in trials.md (Optuna's own warning printed a traceback per failed trial)
    assert "tune: trial 1 fail, objective - (distill: the loss is nan at step 1)" in said
    assert "- trial 1: distill: the loss is nan at step 1" in (out / "trials.md").read_text()
    assert summary["trials"][1]["failure"] == "distill: the loss is nan at step 1"


def test_trials_start_from_the_prefix_and_are_judged_against_the_base(tiny_dir, inputs, tmp_path, monkeypatch):
    """Each trial distils the prefix's checkpoint, but its control penalty and preservation
    compare with the base, as `train`'s distill stage does: measured against the prefix's own
    (already domain-trained) model, a trial that forgot general retrieval there looked harmless."""
    import shutil

    from sparse_adapt.training import tuning as tuning_mod
    from sparse_adapt.training.loop import NonFiniteError

    loaded_from, seen = {}, []
    real_load = SpladeEncoder.from_pretrained

    def load(name, *args, **kwargs):
        model = real_load(name, *args, **kwargs)
        loaded_from[id(model)] = Path(name)
        return model

    def run(self, splade, ctx):
        seen.append((loaded_from.get(id(splade)), loaded_from.get(id(ctx.reference))))
        raise NonFiniteError("distill: stood in")  # the trial ends here: its inputs are what is checked

    def prefix(out):
        shutil.copytree(tiny_dir, out)
        return out

    monkeypatch.setattr(SpladeEncoder, "from_pretrained", staticmethod(load))
    monkeypatch.setattr(tuning_mod.DistillStage, "run", run)
    with pytest.raises(ConfigError, match="no trial completed"):
        run_tuning(_data(inputs), tmp_path / "s", str(tiny_dir), trials=1, seed=0, config=_config(tmp_path, epochs=1),
                   prefix=prefix, space=SPACE)
    assert seen == [(tmp_path / "s" / "prefix", Path(tiny_dir))]


def test_a_rerun_whose_every_trial_goes_non_finite_is_an_error_and_leaves_no_earlier_best(tiny_dir, inputs, tmp_path,
                                                                                         monkeypatch):
    """No trial completed: no best.toml to hand to train, so no summary either (the CLI read a
    None); and the earlier study's best.toml and trials.json, gone from study.db, go too."""
    from sparse_adapt.training import tuning as tuning_mod
    from sparse_adapt.training.loop import NonFiniteError

    out = tmp_path / "study"
    run_tuning(_data(inputs), out, str(tiny_dir), trials=1, seed=0, config=_config(tmp_path, epochs=1), space=SPACE)
    assert (out / "best.toml").is_file()

    def run(self, splade, ctx):
        raise NonFiniteError("distill: the loss is nan at step 1")

    monkeypatch.setattr(tuning_mod.DistillStage, "run", run)
    with pytest.raises(ConfigError, match=re.escape(f"tune: no trial completed of 2; see {out / 'trials.md'}")):
        run_tuning(_data(inputs), out, str(tiny_dir), trials=2, seed=1, config=_config(tmp_path, epochs=1), space=SPACE)
    assert "- trial 1: distill: the loss is nan at step 1" in (out / "trials.md").read_text()
    assert not (out / "best.toml").exists() and not (out / "trials.json").exists()


def test_a_rerun_is_a_new_study_and_best_toml_names_the_valid_file(tiny_dir, inputs, valid_file, tmp_path, monkeypatch):
    """A rerun with fewer trials once left the last study's trials/N.jsonl, and its best.toml
    beside the new trials.md; best.toml's usage line dropped the --valid train needs."""
    out = tmp_path / "study"
    run_tuning(_data(inputs), out, str(tiny_dir), trials=3, seed=0, config=_config(tmp_path, epochs=1), space=SPACE,
               valid_path=valid_file)
    assert sorted(p.name for p in (out / "trials").iterdir()) == ["0.jsonl", "1.jsonl", "2.jsonl"]
    # the base and seed too: train's defaults (offline-minilm, seed 0) would make another prefix
    usage = (f"use with: sparse-adapt train --base {tiny_dir} --corpus CORPUS --terms TERMS --dictionary DICTIONARY "
             f"--train TRAIN --out OUT_DIR --seed 0 --config best.toml --valid {valid_file}")
    assert usage in (out / "best.toml").read_text(encoding="utf-8")
    summary = json.loads((out / "trials.json").read_text())
    assert summary["valid"] == str(valid_file) and summary["finished"] is True
    own = _config(tmp_path, epochs=1).distill  # trial 0 is the config's own values: the baseline
    assert summary["baseline_trial"] == 0 and summary["trials"][0]["params"] == {"lr": own.lr, "pres": own.pres}
    assert summary["space"] == {"lr": {"low": 1e-4, "high": 1e-2, "log": True}, "pres": {"low": 0.1, "high": 10.0, "log": True}}

    # Stopped during its second trial: the first one's results stand, marked unfinished.
    calls = iter(range(100))

    def measure(self, splade):
        if next(calls) >= 4:  # reference, epoch 0 and epoch 1 of trial 0, then trial 1's reference
            raise KeyboardInterrupt
        return {"domain": 0.5, "control": 1.0}

    monkeypatch.setattr(validation_mod.ValidationSet, "measure", measure)
    said = Messages()  # Optuna keeps studies side by side: a replaced one was gone without a word
    with pytest.raises(KeyboardInterrupt):
        run_tuning(_data(inputs), out, str(tiny_dir), trials=3, seed=1, config=_config(tmp_path, epochs=1), space=SPACE,
                   hooks=said.hooks())
    assert f"tune: {out} holds a study made with other inputs or settings; this new study replaces it" in said.text()
    assert sorted(p.name for p in (out / "trials").iterdir()) == ["0.jsonl", "1.jsonl"]
    summary = json.loads((out / "trials.json").read_text())
    assert summary["finished"] is False and summary["seed"] == 1 and len(summary["trials"]) == 1
    assert (out / "trials.md").read_text().count("\n| ") == 1  # the new study's one trial, not the first's three
    assert "best of 1 completed trials so far (the study did not finish)" in (out / "best.toml").read_text()
    assert "--valid" not in (out / "best.toml").read_text()
    # the first study went with its files, once the new one had a trial: none of its trials can resume
    assert sqlite3.connect(out / "study.db").execute("SELECT count(*) FROM studies").fetchone() == (1,)


def test_best_toml_s_usage_line_quotes_a_base_path_with_a_space(tiny_dir, inputs, tmp_path):
    import shutil

    base = tmp_path / "my base"  # pasted unquoted, the shell split it in two
    shutil.copytree(tiny_dir, base)
    summary = run_tuning(_data(inputs), tmp_path / "s", str(base), trials=1, seed=0, config=_config(tmp_path, epochs=1),
                         space=SPACE)
    assert shlex.split(summary["usage"])[2:4] == ["--base", str(base)]


def test_a_study_written_beside_other_files_removes_only_its_own(tiny_dir, inputs, tmp_path):
    out = tmp_path / "mine"
    (out / "trials").mkdir(parents=True)
    (out / "trials" / "notes.jsonl").write_text("a user's file")
    (out / "trials" / "7.txt").write_text("another")
    run_tuning(_data(inputs), out, str(tiny_dir), trials=1, seed=0, config=_config(tmp_path, epochs=1), space=SPACE,
               overwrite=True)
    run_tuning(_data(inputs), out, str(tiny_dir), trials=1, seed=0, config=_config(tmp_path, epochs=1), space=SPACE)
    assert sorted(p.name for p in (out / "trials").iterdir()) == ["0.jsonl", "7.txt", "notes.jsonl"]


def test_a_study_directory_in_use_is_refused(tiny_dir, inputs, tmp_path):
    """Two studies in one --out interleaved their trial logs and both exited 0."""
    from sparse_adapt.lock import LockError, locked

    out = tmp_path / "study"
    with locked(out):  # another process's study, as the lock sees it
        with pytest.raises(LockError, match="in use by another sparse-adapt process"):
            run_tuning(_data(inputs), out, str(tiny_dir), trials=1, config=_config(tmp_path, epochs=1), space=SPACE)
    assert not (out / "trials").exists()


def test_tune_says_the_stages_lines_once_and_warns_of_interpolation(tiny_dir, inputs, tmp_path):
    """The distill stage's lines (the split) were silent in tune; said once, not per trial."""
    path = tmp_path / "start.json"
    path.write_text(json.dumps({**SMALL, "distill": {**SMALL["distill"], "epochs": 1, "valid_fraction": 0.5,
                                                     "interpolate": 0.3}}))
    said, tasks = Messages(), []

    class Task:
        def advance(self, steps=1, description=None):
            pass

    def task(description, total):  # the trials' progress reaches the caller's hooks (the CLI's bars)
        tasks.append(description)
        return Task()

    run_tuning(_data(inputs, valid=False), tmp_path / "s", str(tiny_dir), trials=2, seed=0, config=load_config(path),
               space=SPACE, hooks=Hooks(message=said.append, task=task))
    assert [m for m in said if "held out for validation" in m] == ["distill: 1 of 2 training queries held out for validation"]
    assert tasks.count("distill") == 2  # one per trial
    assert any(m.startswith("warning: distill.interpolate 0.3: trials are scored before the interpolation") for m in said)


def test_a_rerun_stopped_in_its_first_trial_keeps_the_finished_study(tiny_dir, inputs, tmp_path, monkeypatch):
    """The rerun deleted best.toml, trials.json and the logs before its first trial, so a Ctrl-C
    then left nothing of either study."""
    out = tmp_path / "study"
    run_tuning(_data(inputs), out, str(tiny_dir), trials=2, seed=0, config=_config(tmp_path, epochs=1), space=SPACE)

    def files() -> dict:  # study.db holds the new study's stopped trial beside the finished one's
        return {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file() and "prefix" not in p.parts
                and not p.name.endswith(".running.jsonl") and p.name not in (".sparse-adapt.lock", "study.db")}

    before = files()
    assert {Path("best.toml"), Path("trials.json"), Path("trials/0.jsonl"), Path("trials/1.jsonl")} <= set(before)

    def measure(self, splade):
        raise KeyboardInterrupt

    monkeypatch.setattr(validation_mod.ValidationSet, "measure", measure)
    with pytest.raises(KeyboardInterrupt):  # another seed: a new study, stopped before it has a trial
        run_tuning(_data(inputs), out, str(tiny_dir), trials=2, seed=5, config=_config(tmp_path, epochs=1), space=SPACE)
    assert files() == before


def test_a_stopped_study_resumes_its_trials_and_runs_the_interrupted_values_again(tiny_dir, inputs, tmp_path,
                                                                                 monkeypatch):
    out, calls = tmp_path / "study", iter(range(100))

    def stop_in_trial_1(self, splade):
        if next(calls) >= 4:  # reference, epoch 0 and epoch 1 of trial 0, trial 1's reference, then stopped
            raise KeyboardInterrupt
        return {"domain": 0.6, "control": 1.0}

    def run(measure, said=None):
        monkeypatch.setattr(validation_mod.ValidationSet, "measure", measure)
        return run_tuning(_data(inputs), out, str(tiny_dir), trials=3, seed=0, config=_config(tmp_path, epochs=1),
                          space=SPACE, hooks=(said if said is not None else Messages()).hooks())

    with pytest.raises(KeyboardInterrupt):
        run(stop_in_trial_1)
    stopped = json.loads((out / "trials.json").read_text())
    assert [r["number"] for r in stopped["trials"]] == [0]
    (out / "trials" / "9.running.jsonl").write_text("{}\n")  # what a kill -9 in a trial leaves: no result
    said = Messages()
    summary = run(lambda self, splade: {"domain": 0.5, "control": 1.0}, said)
    assert "tune: resuming the study in" in said.text() and "1 of 3 trials done; trial 1 was stopped and runs again" in said.text()
    rows = summary["trials"]
    assert [(r["number"], r["state"]) for r in rows] == [(0, "complete"), (1, "fail"), (2, "complete"), (3, "complete")]
    assert rows[1]["failure"].startswith("stopped before it ended") and rows[2]["params"] == rows[1]["params"]
    assert rows[0] == stopped["trials"][0]  # trial 0 kept as it ran, not run again
    assert rows[3]["params"] != rows[0]["params"]  # the baseline, done, is not queued again on resume
    assert summary["baseline_trial"] == 0 and summary["finished"] is True
    assert "tune: trial 3 (3 of 3)" in said.text()
    assert sorted(p.name for p in (out / "trials").iterdir()) == ["0.jsonl", "1.jsonl", "2.jsonl", "3.jsonl"]

    def never(self, splade):
        raise AssertionError("a finished study ran a trial again")

    said = Messages()
    assert run(never, said)["trials"] == rows and "3 of 3 trials done" in said.text()
    said = Messages()  # a lower --trials than the study has run read "3 of 2 trials done"
    run_tuning(_data(inputs), out, str(tiny_dir), trials=2, seed=0, config=_config(tmp_path, epochs=1), space=SPACE,
               hooks=said.hooks())
    assert "3 (more than --trials 2) trials done" in said.text()


def test_a_stopped_trial_past_a_lowered_budget_is_said_not_to_run_again(tiny_dir, inputs, tmp_path, monkeypatch):
    """A rerun whose --trials the finished trials already meet runs nothing: the stopped trial's
    values wait for a higher --trials, and the message says so rather than "runs again"."""
    out, calls = tmp_path / "study", iter(range(100))

    def stop_in_trial_1(self, splade):
        if next(calls) >= 4:  # reference, epochs 0 and 1 of trial 0, trial 1's reference, then stopped
            raise KeyboardInterrupt
        return {"domain": 0.6, "control": 1.0}

    monkeypatch.setattr(validation_mod.ValidationSet, "measure", stop_in_trial_1)
    with pytest.raises(KeyboardInterrupt):
        run_tuning(_data(inputs), out, str(tiny_dir), trials=2, seed=0, config=_config(tmp_path, epochs=1), space=SPACE)
    monkeypatch.setattr(validation_mod.ValidationSet, "measure",
                        lambda self, splade: pytest.fail("a study whose budget is met ran a trial"))
    said = Messages()
    summary = run_tuning(_data(inputs), out, str(tiny_dir), trials=1, seed=0, config=_config(tmp_path, epochs=1),
                         space=SPACE, hooks=said.hooks())
    assert "1 of 1 trials done; trial 1 was stopped and would run again with a --trials above 1" in said.text()
    assert [(r["number"], r["state"]) for r in summary["trials"]] == [(0, "complete"), (1, "fail")]
    table = (out / "trials.md").read_text()  # the stopped trial is listed there too, though no trial ran
    assert "\n| 1 | fail | - |" in table and "- trial 1: stopped before it ended" in table


def test_a_search_space_file_replaces_the_default_and_bad_ones_name_file_and_key(tmp_path):
    from sparse_adapt.training.tuning import load_space

    path = tmp_path / "space.toml"
    path.write_text('lr = [1e-5, 1e-3]\nmargin = {low = 0.0, high = 2.0, log = false}\n')
    assert load_space(path) == {"lr": Range(1e-5, 1e-3, True), "margin": Range(0.0, 2.0, False)}
    js = tmp_path / "space.json"
    js.write_text('{"kd": [0.1, 1]}')
    assert load_space(js) == {"kd": Range(0.1, 1.0, True)}
    js.write_text('{"lr": [1e-5, 1e-3], "lr": [0.5, 0.9]}')
    with pytest.raises(ConfigError, match="key 'lr' is given twice"):
        load_space(js)
    js.write_text('[[1e-5, 1e-3]]')  # a list, not a table: an AttributeError traceback
    with pytest.raises(ConfigError, match=re.escape(f"{js}: expected a table of distill settings")):
        load_space(js)
    for text, message in [
        ('epochs = [1, 4]', "'epochs' is no distill setting with a float value"),
        ('valid_fraction = [0.1, 0.5]', "'valid_fraction' is no distill setting"),  # it defines the objective
        ('lr = [1e-3, 1e-5]', "lr: finite numbers low < high expected"),
        ('kd = [0.0, 1.0]', "low > 0 on a log scale"),
        ('kd = [0.1, 1.0, 2.0]', "kd: expected [low, high] or {low, high, log}"),
        ('kd = {low = 0.1, high = 1.0, step = 2}', "kd: expected [low, high]"),
        ('kd = {low = 0.1}', "kd: expected [low, high]"),  # a missing end was a KeyError traceback
        ('kd = {high = 1.0, log = false}', "kd: expected [low, high]"),
        ('kd = [0.1, inf]', "kd: finite numbers"),
        ('kd = [0.1, 1' + "0" * 400 + ']', "kd: finite numbers"),  # overflowed math.isfinite with a traceback
        ('', "expected a table of distill settings"),
        ('lr = [', "cannot parse"),
        ('kd = {low = -1.0, high = 1.0, log = false}', "kd: -1 is no value the config takes"),  # the config's own bound
        ('temperature = {low = 0.0, high = 1.0, log = false}', "temperature: 0 is no value the config takes"),
        ('weight_decay = [1e30, 1e34]', "weight_decay: 1e+30 is no value the config takes"),  # x any lr
        ('lr = [1e-5, 2.0]', "lr: 2 is no value the config takes"),  # the high end is a trial's value too
        ('interpolate = [0.1, 0.5]', "'interpolate' is no distill setting"),  # applied after the objective
        ('control_penalty = [0.5, 4.0]', "'control_penalty' is no distill setting"),  # part of the objective
        ('kd = [0.5, 0.5]', "kd: finite numbers low < high expected"),
        ('margin = {low = false, high = 2.0, log = false}', "margin: finite numbers"),  # a bool is no number
        ('kd = {low = 0.1, high = 1.0, log = "yes"}', "kd: finite numbers"),
    ]:
        path.write_text(text)
        with pytest.raises(ConfigError, match=re.escape(str(path)) + r": .*" + re.escape(message)):
            load_space(path)


def test_the_decay_pair_is_judged_together_and_with_the_config(tmp_path, tiny_dir, inputs, monkeypatch):
    """lr x weight_decay bounds AdamW's decay: each end was checked with the other's default, which
    refused a space that is fine throughout (lr <= 1e-5, weight_decay <= 5000) and let through
    a weight_decay high that the config's own lr makes a value no trial can take."""
    from sparse_adapt.training.tuning import check_decay_highs, load_space

    path = tmp_path / "space.toml"
    path.write_text("lr = [1e-6, 1e-5]\nweight_decay = [0.01, 5000.0]\n")
    check_decay_highs(load_space(path), TrainConfig())  # 1e-5 x 5000 = 0.05
    path.write_text("weight_decay = [0.01, 5000.0]\n")
    space = load_space(path)
    check_decay_highs(space, config_from_dict({"distill": {"lr": 1e-5}}))
    with pytest.raises(ConfigError, match=r"weight_decay = 5000 \(its high, with the config's lr\)"):
        check_decay_highs(space, TrainConfig())  # x 2.5e-4
    path.write_text("lr = [1e-5, 0.5]\nweight_decay = [0.01, 3.0]\n")  # each high fine alone, 1.5 together
    monkeypatch.setattr(SpladeEncoder, "from_pretrained", classmethod(lambda *a, **k: pytest.fail("work started")))
    with pytest.raises(ConfigError, match=r"lr = 0.5 and weight_decay = 3 \(its highs together\)"):
        run_tuning(_data(inputs), tmp_path / "s", str(tiny_dir), trials=1, space=load_space(path),
                   config=_config(tmp_path, epochs=1))
    assert not (tmp_path / "s").exists()  # before any work
    # each end with the other's lowest value: 2000 x the space's lowest lr (1e-3) is no value a trial can take
    path.write_text("lr = [1e-3, 1e-2]\nweight_decay = [0.01, 2000.0]\n")
    with pytest.raises(ConfigError, match=re.escape(str(path)) + r": weight_decay: 2000 is no value the config takes"):
        load_space(path)


def test_tune_cli_reads_its_search_space_from_a_file(tiny_dir, inputs, valid_file, tmp_path):
    space = tmp_path / "space.json"
    space.write_text('{"lr": [1e-4, 1e-2]}')
    start = tmp_path / "start.json"
    start.write_text(json.dumps({**SMALL, "distill": {**SMALL["distill"], "epochs": 1}}))
    out = tmp_path / "study"
    argv = ["--threads", "1", "tune", "--base", str(tiny_dir), "--corpus", str(inputs["corpus"]), "--terms",
            str(inputs["terms"]), "--dictionary", str(inputs["dictionary"]), "--train", str(inputs["train"]),
            "--valid", str(valid_file), "--config", str(start), "--trials", "1", "--space", str(space), "--out", str(out)]
    assert main(argv) == 0
    summary = json.loads((out / "trials.json").read_text())
    assert summary["space"] == {"lr": {"low": 1e-4, "high": 1e-2, "log": True}}
    assert set(summary["trials"][0]["params"]) == {"lr"}


def _stand_in_prefix_and_study(monkeypatch, summary: dict) -> dict:
    """The tune CLI with its prefix run and its study stood in: what each was given lands in the
    returned dict ("prefix": the run's keywords; "study": its options, base, config and the
    number of --valid queries), and the study returns ``summary``."""
    from sparse_adapt.training import pipeline, tuning

    seen = {}

    def prefix_run(**kwargs):
        seen["prefix"] = kwargs
        return kwargs["out"]

    def study(data, out, base, trials, seed, config, prefix, **kwargs):
        prefix(out / "prefix")
        seen["study"] = {**kwargs, "base": base, "config": config, "trials": trials, "seed": seed,
                         "valid": None if data.valid is None else len(data.valid)}
        return summary

    monkeypatch.setattr(pipeline, "run_pipeline", prefix_run)
    monkeypatch.setattr(tuning, "run_tuning", study)
    return seen


def test_tune_cli_hands_its_options_to_the_study_and_to_the_prefix_run(tiny_dir, inputs, valid_file, tmp_path,
                                                                       monkeypatch, capsys):
    """The CLI's plumbing, no trial run: the prefix trained with the default seed 0, without
    --overwrite or the config's file, named no one could see; nor a --valid left out of best.toml's
    usage line, or an --out with a space printed unquoted (the pasted line split there)."""
    seen = _stand_in_prefix_and_study(
        monkeypatch, {"best_trial": 3, "best_value": 0.25, "usage": "sparse-adapt train --config best.toml --out OUT_DIR"})
    start = tmp_path / "start.json"
    start.write_text(json.dumps(SMALL))
    out = tmp_path / "my study"
    files = {"corpus": inputs["corpus"], "terms": inputs["terms"], "dictionary": inputs["dictionary"],
             "train": inputs["train"]}
    argv = ["tune", "--base", str(tiny_dir), *[a for k, v in files.items() for a in (f"--{k}", str(v))],
            "--valid", str(valid_file), "--config", str(start), "--trials", "2", "--seed", "5", "--out", str(out),
            "--overwrite"]
    assert main(argv) == 0, capsys.readouterr().err
    assert {k: seen["prefix"][k] for k in ("seed", "overwrite", "config_source", "out")} == {
        "seed": 5, "overwrite": True, "config_source": start, "out": out / "prefix"}
    assert seen["study"]["valid_path"] == valid_file and seen["study"]["input_paths"] == files
    assert {k: seen["study"][k] for k in ("trials", "seed", "overwrite", "valid")} == {
        "trials": 2, "seed": 5, "overwrite": True, "valid": len(VALID)}
    said = " ".join(capsys.readouterr().out.split())
    assert "best trial 3: objective +0.2500" in said
    best = shlex.quote(str(out / 'best.toml'))
    assert f"(use: sparse-adapt train --config {best} --out OUT_DIR) and {out / 'trials.md'}" in said


def test_tune_cli_trains_its_prefix_on_its_own_base_with_the_study_s_config(inputs, tmp_path, monkeypatch, capsys):
    """The prefix (extend, warmup, dictionary) is what every trial starts from: trained on another
    base or with the defaults, the study tuned a model the user never named. The base's recommended
    settings are under the config file's, in the prefix's config as in the study's."""
    from sparse_adapt.modeling.builtin import RECOMMENDED_FILE
    from sparse_adapt.training.tuning import PREFIX_STAGES

    seen = _stand_in_prefix_and_study(
        monkeypatch, {"best_trial": 0, "best_value": 0.0, "usage": "sparse-adapt train --config best.toml"})
    base = tmp_path / "my base"  # only its recommended settings are read: the training is stood in
    base.mkdir()
    (base / RECOMMENDED_FILE).write_text(json.dumps({"distill": {"pres_form": "all-texts", "lr": 0.5}}))
    start = tmp_path / "start.json"
    start.write_text(json.dumps(SMALL))  # its distill.lr 1e-3 wins over the base's 0.5
    argv = ["tune", "--base", str(base), "--corpus", str(inputs["corpus"]), "--terms", str(inputs["terms"]),
            "--dictionary", str(inputs["dictionary"]), "--train", str(inputs["train"]), "--config", str(start),
            "--valid-fraction", "0.5", "--out", str(tmp_path / "study")]
    assert main(argv) == 0, capsys.readouterr().err
    given = seen["prefix"]
    assert (given["base"], tuple(given["stages"])) == (str(base), PREFIX_STAGES)
    assert given["out"] == tmp_path / "study" / "prefix"
    assert seen["study"]["base"] == str(base)
    for cfg in (given["config"], seen["study"]["config"]):
        assert (cfg.warmup.epochs, cfg.warmup.lr) == (2, 1e-3)
        assert (cfg.distill.pres_form, cfg.distill.lr, cfg.distill.valid_fraction) == ("all-texts", 1e-3, 0.5)


def test_a_config_value_outside_the_space_means_no_baseline_trial_and_says_so(tiny_dir, inputs, tmp_path):
    said = Messages()
    summary = run_tuning(_data(inputs), tmp_path / "s", str(tiny_dir), trials=1, seed=0,
                         config=_config(tmp_path, epochs=1), space={"lr": Range(1e-2, 1e-1), "pres": Range(0.1, 10.0)},
                         hooks=said.hooks())
    assert summary["baseline_trial"] is None and summary["trials"][0]["params"]["lr"] >= 1e-2
    assert "tune: no baseline trial: the config's lr lies outside the search space" in said
    assert "the config's own values" not in (tmp_path / "s" / "best.toml").read_text()
    said = Messages()  # resumed: its trials are there already, none of them a baseline to speak of
    run_tuning(_data(inputs), tmp_path / "s", str(tiny_dir), trials=1, seed=0, config=_config(tmp_path, epochs=1),
               space={"lr": Range(1e-2, 1e-1), "pres": Range(0.1, 10.0)}, hooks=said.hooks())
    assert "1 of 1 trials done" in said.text() and "no baseline trial" not in said.text()


def test_a_config_value_on_the_end_of_its_range_is_a_baseline(tiny_dir, inputs, tmp_path):
    own = _config(tmp_path, epochs=1).distill
    summary = run_tuning(_data(inputs), tmp_path / "s", str(tiny_dir), trials=1, seed=0, config=_config(tmp_path, epochs=1),
                         space={"lr": Range(own.lr, 1e-2), "pres": Range(0.1, own.pres)})
    assert summary["baseline_trial"] == 0 and summary["trials"][0]["params"] == {"lr": own.lr, "pres": own.pres}


def test_a_baseline_stopped_in_its_trial_runs_again_as_the_baseline(tiny_dir, inputs, tmp_path, monkeypatch):
    out = tmp_path / "study"

    def measure(self, splade):  # Ctrl-C at the baseline's first validation
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(validation_mod.ValidationSet, "measure", measure)
        with pytest.raises(KeyboardInterrupt):
            run_tuning(_data(inputs), out, str(tiny_dir), trials=1, seed=0, config=_config(tmp_path, epochs=1),
                       space=SPACE)
    summary = run_tuning(_data(inputs), out, str(tiny_dir), trials=1, seed=0, config=_config(tmp_path, epochs=1),
                         space=SPACE)
    assert [(r["number"], r["state"]) for r in summary["trials"]] == [(0, "fail"), (1, "complete")]
    # trial 1 is trial 0's values run again: the baseline, which best.toml measures the best against
    assert summary["baseline_trial"] == 1 and summary["trials"][1]["params"] == summary["trials"][0]["params"]
    assert "= the config's own values: no trial beat them" in (out / "best.toml").read_text()


def test_a_trial_a_killed_run_left_running_is_failed_and_its_values_queued_once():
    import optuna

    from sparse_adapt.training.study import counted_trials, requeue_interrupted

    study = optuna.create_study(direction="maximize")
    study.tell(study.ask({"x": optuna.distributions.FloatDistribution(0, 1)}), 0.5)
    killed = study.ask({"x": optuna.distributions.FloatDistribution(0, 1)})  # its process died: still running
    assert requeue_interrupted(study) == [killed.number]
    states = [t.state.name for t in study.trials]
    assert states == ["COMPLETE", "FAIL", "WAITING"] and len(counted_trials(study)) == 1
    waiting = study.trials[2]  # Optuna keeps a queued trial's values as fixed_params until it runs
    assert waiting.system_attrs["fixed_params"] == killed.params and waiting.user_attrs == {"retry_of": killed.number}
    assert requeue_interrupted(study) == []  # queued already: a second resume does not queue it twice


def test_a_study_stopped_before_its_baseline_was_queued_still_runs_it_and_a_base_spelt_otherwise_resumes(
        tiny_dir, inputs, tmp_path, monkeypatch):
    import sparse_adapt.training.tuning as tuning

    out, load = tmp_path / "study", tuning.SpladeEncoder.from_pretrained

    def stopped(*args, **kwargs):  # the reference model loads after the study exists, before its baseline is queued
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(tuning.SpladeEncoder, "from_pretrained", stopped)
        with pytest.raises(KeyboardInterrupt):
            run_tuning(_data(inputs), out, str(tiny_dir), trials=1, seed=0, config=_config(tmp_path, epochs=1),
                       space=SPACE)
    assert tuning.SpladeEncoder.from_pretrained == load
    said = Messages()
    summary = run_tuning(_data(inputs), out, str(tiny_dir) + "/", trials=1, seed=0,  # the same folder, spelt otherwise
                         config=_config(tmp_path, epochs=1), space=SPACE, hooks=said.hooks())
    assert "tune: resuming the study in" in said.text()
    own = _config(tmp_path, epochs=1).distill
    assert summary["baseline_trial"] == 0 and summary["trials"][0]["params"] == {"lr": own.lr, "pres": own.pres}
    said = Messages()
    run_tuning(_data(inputs), out, str(tiny_dir), trials=1, seed=0, config=_config(tmp_path, epochs=1), space=SPACE,
               hooks=said.hooks())
    assert "1 of 1 trials done" in said.text() and "--overwrite" not in said.text()
    said = Messages()  # --overwrite replaces other files, not the study: a user reading it as "start over" is told
    run_tuning(_data(inputs), out, str(tiny_dir), trials=1, seed=0, config=_config(tmp_path, epochs=1), space=SPACE,
               hooks=said.hooks(), overwrite=True)
    assert "1 of 1 trials done (--overwrite does not restart a study; remove" in said.text()


def _optuna_db(path: Path) -> None:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    optuna.create_study(storage=f"sqlite:///{path}", study_name="other")


@pytest.mark.parametrize("make, says", [
    (lambda p: p.write_text("hello"), "is no SQLite database Optuna can open"),
    (lambda p: p.mkdir(), "is not a regular file"),
    (lambda p: sqlite3.connect(p).execute("CREATE TABLE notes (x)").connection.commit(),
     "is another program's SQLite database (tables notes)"),
    (lambda p: (_optuna_db(p), p.write_bytes(p.read_bytes()[:3000])), "is no SQLite database Optuna can open"),
], ids=["text", "directory", "foreign database", "truncated study"])
def test_a_study_db_that_holds_no_study_is_refused_before_any_work_and_replaced_with_overwrite(
        tiny_dir, inputs, tmp_path, monkeypatch, make, says):
    """SQLAlchemy's error came as a 100-line traceback after the prefix trained, --overwrite did
    not get past it, and a user's own database got Optuna's tables written into it."""
    out = tmp_path / "study"
    out.mkdir()
    make(out / "study.db")
    before = sorted(p.name for p in out.iterdir())
    with monkeypatch.context() as m:
        m.setattr(SpladeEncoder, "from_pretrained", classmethod(lambda *a, **k: pytest.fail("work started")))
        with pytest.raises(OutputError, match=re.escape(f"{out / 'study.db'} ") + ".*" + re.escape(says)):
            run_tuning(_data(inputs), out, str(tiny_dir), trials=1, config=_config(tmp_path, epochs=1), space=SPACE)
    assert sorted(p.name for p in out.iterdir()) == before
    said: list[str] = []
    run_tuning(_data(inputs), out, str(tiny_dir), trials=1, config=_config(tmp_path, epochs=1), space=SPACE,
               overwrite=True, hooks=Hooks(message=said.append))
    assert any(says in m and "replaced by a new study" in m for m in said)
    assert study_db_problem(out) is None


def test_an_empty_study_db_is_a_new_study(tmp_path):
    (tmp_path / "study.db").write_bytes(b"")
    assert study_db_problem(tmp_path) is None
    _optuna_db(tmp_path / "study.db")
    assert study_db_problem(tmp_path) is None


def test_a_study_killed_mid_write_is_a_study_to_resume(tmp_path):
    """A kill -9 mid-write leaves a hot journal; read-only, the check called the study damaged,
    and --overwrite would have deleted every finished trial."""
    import subprocess
    import sys

    db = tmp_path / "study.db"
    _optuna_db(db)
    # a writer killed inside a transaction: its journal stays beside the file
    code = ("import os, sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
            "c.execute('PRAGMA cache_size=5'); c.execute('BEGIN'); "
            "c.execute(\"UPDATE studies SET study_name = 'x'\"); c.execute('CREATE TABLE junk (x)'); "
            "c.executemany('INSERT INTO junk VALUES (?)', [('x' * 5000,) for i in range(500)]); "
            "os._exit(9)")
    subprocess.run([sys.executable, "-c", code, str(db)])
    assert (tmp_path / "study.db-journal").is_file()  # the hot journal a read-only check could not roll back
    assert study_db_problem(tmp_path) is None
    assert sqlite3.connect(db).execute("SELECT study_name FROM studies").fetchone() == ("other",)  # rolled back


def test_the_modules_the_tuning_docstring_says_import_optuna_are_the_ones_that_do():
    """"Optuna is imported only here ...": study.py, split out of tuning.py, imports it too, which
    the sentence did not say; an import at module level would make the whole package need it."""
    import ast

    import sparse_adapt
    from sparse_adapt.training import tuning as tuning_mod

    said = re.search(r"Optuna is imported only here([^:]*):", " ".join(tuning_mod.__doc__.split()))
    assert said, "the tuning docstring no longer says where Optuna is imported"
    named = {"tuning.py", *re.findall(r"``(\w+\.py)``", said.group(1))}
    importers, at_module_level = set(), set()
    for path in Path(sparse_adapt.__file__).parent.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            modules = ([a.name for a in node.names] if isinstance(node, ast.Import)
                       else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if not any(m == "optuna" or m.startswith("optuna.") for m in modules):
                continue
            importers.add(path.name)
            outer = node
            while outer in parents and not isinstance(outer, (ast.FunctionDef, ast.AsyncFunctionDef)):
                outer = parents[outer]
                if isinstance(outer, ast.If) and "TYPE_CHECKING" in ast.unparse(outer.test):
                    break  # for annotations only: never runs
            else:
                if not isinstance(outer, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    at_module_level.add(path.name)
    assert importers == named
    if "inside the functions" in said.group(1):
        assert at_module_level == set()
