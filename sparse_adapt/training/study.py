"""Where a ``tune`` study lives between runs: ``OUT/study.db``, Optuna's SQLite storage.

A study is named by its key: a hash of everything its trials' values depend on (the base
and the checkpoint every trial starts from, byte for byte; the seed, the config and the
search space; the corpus's bytes and the terms, dictionary, training and validation
records). A rerun with the same key resumes the study: its finished trials (complete,
pruned, or failed of their own, a non-finite loss) count towards ``--trials``, and a trial
the last run was stopped in (Ctrl-C, a kill, an error) has its values queued to run again first. A rerun with another
key is a new study beside the others in the same file; ``tuning.py`` deletes the others once
the new one has finished a trial, as it does their files.

A resumed study's sampler is seeded anew (seed + trials so far): reseeded as at the start it
would draw the first trials' values again. So the trials after a resume are not those an
unbroken run would have drawn, only as well chosen.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from sparse_adapt.data import file_sha256
from sparse_adapt.modeling.hub import model_reference
from sparse_adapt.training.config import TrainConfig
from sparse_adapt.training.rundir import files_sha256
from sparse_adapt.training.stages import TrainData

if TYPE_CHECKING:
    import optuna

STUDY_DB = "study.db"
INTERRUPTED = "stopped before it ended (a Ctrl-C, a kill or an error); its values run again when the study resumes"


def study_key(data: TrainData, base: str | Path, start: str | Path, seed: int, cfg: TrainConfig, space: dict) -> str:
    what = {
        "base": model_reference(base),  # a folder by its place, however spelt (`model/` made another study)
        "base_files": files_sha256(base), "start_files": files_sha256(start), "seed": int(seed),
        "config": cfg.to_dict(), "space": {k: dataclasses.asdict(r) for k, r in space.items()},
        "corpus": file_sha256(data.corpus), "terms": data.terms, "dictionary": data.dictionary, "train": data.train,
        "valid": data.valid,
    }
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=repr).encode("utf-8")).hexdigest()[:20]


# Tables every Optuna storage has (its RDB schema); a SQLite file without them is someone else's.
OPTUNA_TABLES = {"studies", "trials"}


def study_db_problem(out: Path) -> str | None:
    """Why ``OUT/study.db`` can hold no study (damaged, not SQLite, another program's database),
    or None: SQLAlchemy's error for it came as a 100-line traceback, after the prefix trained,
    and a user's own database would have had Optuna's tables written into it."""
    import sqlite3

    path = out / STUDY_DB
    if not path.exists() and not path.is_symlink():
        return None
    if not path.is_file():
        return f"{path} is not a regular file"
    # Read-write, as Optuna opens it: a run killed mid-write leaves a hot journal, which only a
    # writable connection rolls back (read-only, that study was refused as damaged). Reads write nothing else.
    db = None
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=rw", uri=True)
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if tables and OPTUNA_TABLES <= tables:
            db.execute("SELECT count(*) FROM trials").fetchone()  # the pages of a truncated file
    except sqlite3.Error as e:
        return f"{path} is no SQLite database Optuna can open ({e})"
    finally:
        if db is not None:
            db.close()
    if tables and not OPTUNA_TABLES <= tables:
        return f"{path} is another program's SQLite database (tables {', '.join(sorted(tables)[:5])}), not a study"
    return None


def _storage(out: Path) -> "optuna.storages.RDBStorage":
    import optuna
    from sqlalchemy.engine import URL

    # URL.create escapes what a path may hold and a URL may not ('#', '?', '%').
    url = URL.create("sqlite", database=str((out / STUDY_DB).resolve())).render_as_string(hide_password=False)
    return optuna.storages.RDBStorage(url)


def other_studies(out: Path, key: str) -> list[str]:
    """The names of the studies in ``out``'s storage other than ``key`` (none without one)."""
    import optuna

    if not (out / STUDY_DB).is_file():
        return []
    return [name for name in optuna.study.get_all_study_names(_storage(out)) if name != key]


def open_study(out: Path, key: str, seed: int, pruner: "optuna.pruners.BasePruner") -> tuple["optuna.Study", bool]:
    """The study named ``key`` in ``out``'s storage (created if new) and whether it existed."""
    import optuna

    storage = _storage(out)
    resumed = key in optuna.study.get_all_study_names(storage)
    so_far = len(optuna.load_study(study_name=key, storage=storage).trials) if resumed else 0
    study = optuna.create_study(
        storage=storage, study_name=key, load_if_exists=True, direction="maximize", pruner=pruner,
        sampler=optuna.samplers.TPESampler(seed=(int(seed) + so_far) % 2**32),
    )
    return study, resumed


def stopped(trial: "optuna.trial.FrozenTrial") -> bool:
    """A trial that ended without an outcome of its own: Optuna fails a trial that Ctrl-C or an
    error stopped (a failure of its values, a non-finite loss, carries a ``failure`` of ours),
    and a killed process leaves its trial running."""
    from optuna.trial import TrialState

    return trial.state == TrialState.RUNNING or (trial.state == TrialState.FAIL and "failure" not in trial.user_attrs)


def requeue_interrupted(study: "optuna.Study") -> list[int]:
    """Mark the trials a killed run left running as failed, and queue the values of every
    stopped trial not queued before; returns the numbers of those queued now. Only this
    process holds the study (``OUT``'s lock), so a running trial here is one whose process is gone."""
    from optuna.trial import TrialState

    storage = study._storage  # noqa: SLF001 - Optuna's own handle on the study's trials
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        storage.set_trial_state_values(trial._trial_id, TrialState.FAIL)  # noqa: SLF001
    queued = {t.user_attrs["retry_of"] for t in study.trials if "retry_of" in t.user_attrs}
    numbers = []
    for trial in study.trials:
        if stopped(trial) and trial.number not in queued:
            study.enqueue_trial(trial.params, user_attrs={"retry_of": trial.number, **{
                k: v for k, v in trial.user_attrs.items() if k == "baseline"}})
            numbers.append(trial.number)
    return numbers


def counted_trials(study: "optuna.Study") -> list["optuna.trial.FrozenTrial"]:
    """The trials that count towards ``--trials``: complete, pruned, or failed of their own."""
    from optuna.trial import TrialState

    return [t for t in study.trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)
            or (t.state == TrialState.FAIL and not stopped(t))]


def delete_others(study: "optuna.Study") -> None:
    """Delete every study in ``study``'s storage but ``study``."""
    import optuna

    storage = study._storage  # noqa: SLF001
    for name in optuna.study.get_all_study_names(storage):
        if name != study.study_name:
            optuna.delete_study(study_name=name, storage=storage)
