"""The study behind ``sparse-adapt tune`` (``study.py``) and its search space, without training:
the key a rerun resumes by, the trials that count, the values queued again, the storage kept."""

from __future__ import annotations

import dataclasses
import shutil
import sqlite3
from pathlib import Path

import pytest

from sparse_adapt.data import load_dictionary, load_domain_terms, load_train
from sparse_adapt.training.config import TrainConfig
from sparse_adapt.training.search_space import Range, load_space, sample
from sparse_adapt.training.stages import TrainData
from sparse_adapt.training.study import (
    counted_trials, delete_others, open_study, requeue_interrupted, stopped, study_db_problem, study_key,
)
from tests.training.test_stages import inputs, tiny_dir  # noqa: F401 (fixtures)

optuna = pytest.importorskip("optuna")
X = {"x": optuna.distributions.FloatDistribution(0, 1)}


def _draw(trial) -> float:
    return trial.suggest_float("x", 0, 1)


def test_the_study_key_changes_with_every_input_a_trial_depends_on(tiny_dir, inputs, tmp_path):
    """A rerun with another validation set, range or config resumed the old study: its
    trials, scored on other queries or drawn from another space, passed for the new one's."""
    train = load_train(inputs["train"])
    data = TrainData(Path(inputs["corpus"]), load_domain_terms(inputs["terms"]), load_dictionary(inputs["dictionary"]),
                     train, valid=train[:1])
    space, cfg = {"lr": Range(1e-4, 1e-2)}, TrainConfig()

    def key(**changed) -> str:
        given = {"data": data, "base": str(tiny_dir), "start": str(tiny_dir), "seed": 0, "cfg": cfg, "space": space,
                 **changed}
        return study_key(given["data"], given["base"], given["start"], given["seed"], given["cfg"], given["space"])

    assert key(base=str(tiny_dir) + "/") == key()  # the same folder, spelt otherwise
    retrained = tmp_path / "prefix"  # the checkpoint trials start from, retrained (prefix/ with --overwrite)
    shutil.copytree(tiny_dir, retrained)
    with (retrained / "config.json").open("a") as f:
        f.write(" ")
    others = [
        key(seed=1),
        key(start=str(retrained)),
        key(data=dataclasses.replace(data, valid=train[1:])),
        key(space={"lr": Range(1e-4, 1e-1)}),  # the same setting over another range
        key(cfg=dataclasses.replace(cfg, distill=dataclasses.replace(cfg.distill, kd=0.5))),
        key(data=dataclasses.replace(data, terms={"acronyms": data.terms["acronyms"]})),
        key(data=dataclasses.replace(data, dictionary=data.dictionary[:1])),
        key(data=dataclasses.replace(data, train=train[:1])),
    ]
    assert len({key(), *others}) == 9
    # An end written 1 or 1.0 is the same value: the same study (an int was hashed apart, a new study)
    (tmp_path / "ints.json").write_text('{"kd": [1, 2]}')
    (tmp_path / "floats.toml").write_text("kd = [1.0, 2.0]\n")
    assert key(space=load_space(tmp_path / "ints.json")) == key(space=load_space(tmp_path / "floats.toml"))
    # Files changed in place, under the same paths: a base retrained into its folder, a corpus rewritten.
    base = tmp_path / "base"
    shutil.copytree(tiny_dir, base)
    first = key(base=str(base))
    with (base / "config.json").open("a") as f:
        f.write(" ")
    assert key(base=str(base)) != first
    first = key()
    with Path(inputs["corpus"]).open("a") as f:
        f.write("\n")
    assert key() != first


def test_a_dangling_study_db_link_is_refused(tmp_path):
    """Optuna would have made the study at wherever the link points."""
    (tmp_path / "study.db").symlink_to(tmp_path / "gone" / "study.db")
    assert study_db_problem(tmp_path) == f"{tmp_path / 'study.db'} is not a regular file"


def test_a_study_db_whose_trial_pages_are_damaged_is_refused(tmp_path):
    """Its list of tables still reads: only counting the trials finds the damage, which Optuna
    met after the prefix had trained."""
    db = tmp_path / "study.db"
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    optuna.create_study(storage=f"sqlite:///{db}", study_name="other")
    c = sqlite3.connect(db)
    size = c.execute("PRAGMA page_size").fetchone()[0]
    pages = [p for (p,) in c.execute("SELECT rootpage FROM sqlite_master WHERE tbl_name = 'trials'")]
    c.close()
    data = bytearray(db.read_bytes())
    for page in pages:  # the table and its indexes: a count may read either
        data[(page - 1) * size:page * size] = b"\xff" * size
    db.write_bytes(bytes(data))
    assert study_db_problem(tmp_path).startswith(f"{db} is no SQLite database Optuna can open (")


def test_a_resumed_study_draws_from_a_sampler_seeded_past_its_trials(tmp_path):
    """Reseeded with the study's own seed, a resume drew the first trials' values again."""
    pruner = optuna.pruners.NopPruner()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study, resumed = open_study(tmp_path, "k", 7, pruner)
    assert resumed is False
    study.optimize(_draw, n_trials=2)
    again, resumed = open_study(tmp_path, "k", 7, pruner)
    assert resumed is True
    again.optimize(_draw, n_trials=1)
    fresh = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=7 + 2))  # seed + the 2 trials so far
    fresh.optimize(_draw, n_trials=1)
    assert again.trials[2].params == fresh.trials[0].params != again.trials[0].params


def test_a_study_seeded_at_the_sampler_s_top_seed_resumes(tmp_path):
    """seed + trials so far passes 2**32 - 1, which the sampler refuses: it wraps round to 0."""
    pruner = optuna.pruners.NopPruner()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study, _ = open_study(tmp_path, "k", 2**32 - 1, pruner)
    study.optimize(_draw, n_trials=1)
    again, resumed = open_study(tmp_path, "k", 2**32 - 1, pruner)
    assert resumed is True
    again.optimize(_draw, n_trials=1)
    fresh = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=0))
    fresh.optimize(_draw, n_trials=1)
    assert again.trials[1].params == fresh.trials[0].params


def test_a_study_in_a_folder_whose_name_a_url_would_cut_is_kept_there_and_resumes(tmp_path):
    """'#', '?' and '%' end or escape a URL: written into one, the path named another file, or none."""
    out = tmp_path / "run #1?x=%41"
    out.mkdir()
    pruner = optuna.pruners.NopPruner()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study, _ = open_study(out, "k", 0, pruner)
    study.optimize(_draw, n_trials=1)
    assert study_db_problem(out) is None
    again, resumed = open_study(out, "k", 0, pruner)
    assert resumed is True and [t.state.name for t in again.trials] == ["COMPLETE"]
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == [out.name, f"{out.name}/study.db"]
    (out / "study.db").write_text("hello")  # the check reads this file, not one the URL names
    assert "is no SQLite database Optuna can open" in study_db_problem(out)


def test_a_stopped_baseline_is_queued_again_as_the_baseline_and_nothing_else_carried():
    study = optuna.create_study(direction="maximize")
    study.enqueue_trial({"x": 0.25}, user_attrs={"baseline": True})
    halted = study.ask(X)  # Ctrl-C: Optuna fails the trial, with no failure of ours
    halted.set_user_attr("best_epoch", 1)
    study.tell(halted, state=optuna.trial.TrialState.FAIL)
    assert requeue_interrupted(study) == [0]
    assert study.trials[1].user_attrs == {"retry_of": 0, "baseline": True}


def test_a_trial_failed_of_its_own_is_not_queued_again_on_resume():
    """A loss gone nan is an outcome of the trial's values: run again, it fails again and costs a trial."""
    study = optuna.create_study(direction="maximize")
    own = study.ask(X)
    own.set_user_attr("failure", "distill: the loss is nan at step 1")
    study.tell(own, state=optuna.trial.TrialState.FAIL)
    study.tell(study.ask(X), state=optuna.trial.TrialState.FAIL)  # stopped by Ctrl-C
    assert requeue_interrupted(study) == [1]
    assert [t.state.name for t in study.trials] == ["FAIL", "FAIL", "WAITING"]


def test_the_trials_that_count_are_complete_pruned_or_failed_of_their_own_the_rest_stopped():
    study = optuna.create_study(direction="maximize")
    study.tell(study.ask(X), 0.5)
    study.tell(study.ask(X), state=optuna.trial.TrialState.PRUNED)
    own = study.ask(X)  # a loss gone nan: an outcome of its values
    own.set_user_attr("failure", "distill: the loss is nan at step 1")
    study.tell(own, state=optuna.trial.TrialState.FAIL)
    study.tell(study.ask(X), state=optuna.trial.TrialState.FAIL)  # stopped by Ctrl-C
    study.ask(X)  # left running by a killed process
    assert [t.number for t in counted_trials(study)] == [0, 1, 2]
    assert [stopped(t) for t in study.trials] == [False, False, False, True, True]  # the last two run again


def test_delete_others_keeps_only_the_study_given(tmp_path):
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 'study.db'}")
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    kept = [optuna.create_study(storage=storage, study_name=name) for name in ("a", "b", "c")][1]
    delete_others(kept)
    assert optuna.study.get_all_study_names(storage) == ["b"]


def test_sample_draws_each_setting_on_its_own_scale():
    calls = []

    class Trial:
        def suggest_float(self, name, low, high, log=False):
            calls.append((name, low, high, log))
            return low

    assert sample(Trial(), {"lr": Range(1e-4, 1e-2), "margin": Range(0.0, 2.0, False)}) == {"lr": 1e-4, "margin": 0.0}
    assert calls == [("lr", 1e-4, 1e-2, True), ("margin", 0.0, 2.0, False)]
