"""``sparse-adapt tune``: search distill loss weights and learning rate on the validation split.

The stages before distillation (extend, warmup, dictionary) run once, with the given
config, into ``OUT/prefix`` (resumable, like ``train``). Each Optuna trial then samples
the distill settings of the search space (``search_space.py``; TPE sampler, seeded), runs the distill stage
from that checkpoint in memory with validation after every epoch, and reports the
selection objective (``validation.py``) per epoch, so the median pruner stops a trial whose
objective trails the other trials' at the same epoch. A trial's value is its best epoch's
objective. Trial 0 runs the config's own values (no trial does when one lies outside the space): the baseline, so
``best.toml`` is never a study's worse-than-default pick without saying so. Writes ``OUT/best.toml`` (the whole config with the best trial's values, which
``train --config`` accepts), ``OUT/trials.md`` and ``OUT/trials.json`` (every trial) and
``OUT/trials/<n>.jsonl`` (each trial's training log). The study itself is kept in
``OUT/study.db`` (``study.py``): a rerun with the same inputs and settings resumes it.

Optuna is imported only here and in ``study.py``, inside the functions that use it: the rest of the
package does not need it.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import shutil
from pathlib import Path
from typing import Callable, Mapping, Sequence

from sparse_adapt.atomic import write_atomic
from sparse_adapt.destination import check_writable
from sparse_adapt.data import flat_terms
from sparse_adapt.errors import ConfigError, NonFiniteError, OutputError
from sparse_adapt.lock import LOCK_FILE, locked
from sparse_adapt.modeling.encoder import SpladeEncoder
from sparse_adapt.progress import SILENT, Hooks, signed
from sparse_adapt.training.config import TrainConfig
from sparse_adapt.training.config_files import config_to_toml, load_config, recommended_in_effect
from sparse_adapt.training.search_space import (  # noqa: F401  (Range, SEARCH_SPACE, load_space: public here too)
    SEARCH_SPACE, Range, check_decay_highs, load_space, sample, with_distill,
)
from sparse_adapt.training.stages import ORDER, DistillStage, StageContext, TrainData
from sparse_adapt.training.study import (
    INTERRUPTED, STUDY_DB, counted_trials, delete_others, open_study, other_studies, requeue_interrupted, stopped,
    study_db_problem, study_key,
)
from sparse_adapt.training.validation import check_validation_choice


PREFIX_STAGES = ("extend", "warmup", "dictionary")
STUDY_FILES = ("best.toml", "trials.md", "trials.json")
RUNNING = ".running.jsonl"  # a trial's log until the trial ends: trials/N.running.jsonl


def trials_table(rows: list[dict], space: dict[str, Range]) -> str:
    """Markdown table of every trial, best first, then pruned and failed ones in order."""
    keys = list(space)
    head = "| trial | state | objective | best epoch | epochs run | " + " | ".join(keys) + " |"
    lines = [head, "|---|---|---|---|---|" + "---|" * len(keys)]
    # A pruned trial carries its last reported objective (Optuna's), which ranks nothing.
    done = sorted((r for r in rows if r["state"] == "complete" and r["value"] is not None), key=lambda r: -r["value"])
    rest = [r for r in rows if r not in done]

    def cell(value) -> str:
        return "-" if value is None else str(value)

    for r in done + rest:
        value = "-" if r["value"] is None else signed(r['value'], 4)
        params = " | ".join(f"{r['params'][k]:.3g}" if k in r["params"] else "-" for k in keys)
        lines.append(f"| {r['number']} | {r['state']} | {value} | {cell(r.get('best_epoch'))} | "
                     f"{cell(r.get('epochs_run'))} | {params} |")
    failed = [f"- trial {r['number']}: {r['failure']}" for r in rows if r.get("failure")]
    return "\n".join(lines + (["", *failed] if failed else [])) + "\n"


def row(trial) -> dict:
    """A finished trial as trials.md and trials.json show it."""
    return {
        "number": trial.number, "state": trial.state.name.lower(), "value": trial.value, "params": trial.params,
        "best_epoch": trial.user_attrs.get("best_epoch"),
        "epochs_run": trial.user_attrs.get("epochs_run", len(trial.intermediate_values)),
        "failure": trial.user_attrs.get("failure") or (INTERRUPTED if stopped(trial) else None),
    }


def check_inputs_outside_study(out: Path, inputs: Sequence[str | Path | None]) -> None:
    """No input is (or is inside) a path the study writes, with ``--overwrite`` or without:
    its best.toml and trials.json replaced a config and a space kept under those names. An
    input kept elsewhere in ``out`` (``out/space.toml``) is left alone, as are a rerun's."""
    written = [(out / name).resolve() for name in (*STUDY_FILES, STUDY_DB, "trials", "prefix")]
    for given in inputs:
        if given is None or not Path(given).exists():  # a built-in base, a Hub id
            continue
        path = Path(given).resolve()
        hit = next((w for w in written if w == path or w in path.parents), None)
        if hit is not None:
            raise OutputError(f"--out {out}: the study writes {hit.name}{'/' if hit.name in ('trials', 'prefix') else ''}"
                              f" there, which is or holds an input ({given}); move the input, or choose another --out")


def check_study_dir(out: Path, overwrite: bool) -> None:
    """Before any work: ``out`` can hold a study (the docstring of :func:`run_tuning`)."""
    check_writable(out, into=True)
    if out.exists() and not out.is_dir():
        raise OutputError(f"--out {out} is an existing file; a study needs a directory")
    # What a study writes first: prefix/run.json (the CLI), study.db and trials/ (then every trial), trials.json (last).
    earlier = any((out / name).exists() for name in ("prefix/run.json", STUDY_DB, "trials", "trials.json"))
    entries = [p.name for p in out.iterdir() if p.name != LOCK_FILE] if out.is_dir() else []
    if entries and not earlier and not overwrite:
        raise OutputError(f"--out {out} is not empty and holds no tune study ({len(entries)} entries); "
                          "pass --overwrite to write the study beside them, or choose another path")
    problem = study_db_problem(out) if out.is_dir() else None
    if problem and not overwrite:
        raise OutputError(f"{problem}: move it away, or pass --overwrite to replace it with a new study")


def run_tuning(
    data: TrainData, out: Path, base: str | Path, trials: int, seed: int = 0, config: TrainConfig | str | Path | None = None,
    prefix: Callable[[Path], Path] | None = None, space: dict[str, Range] | None = None, hooks: Hooks = SILENT,
    overwrite: bool = False, valid_path: str | Path | None = None, input_paths: Mapping[str, str | Path] | None = None,
) -> dict:
    """Run the study; ``prefix(out_dir)`` trains the stages before distill and returns the
    checkpoint to start every trial from (the CLI passes ``run_pipeline``). Returns the summary.

    ``out`` may be new, empty or an earlier study (resumed when its inputs and settings are
    these, else replaced by a new one); a directory holding anything else is refused unless
    ``overwrite``, which writes the study's files beside (and over same-named ones of) what is there.
    ``valid_path``: the file ``data.valid`` came from, named in ``best.toml``'s usage line,
    since ``train`` validates (and keeps the best epoch) only when given it too. ``input_paths``:
    ``{"corpus" | "terms" | "dictionary" | "train": file}``, named there too (else placeholders),
    so that the line runs as it is printed."""
    cfg = config if isinstance(config, TrainConfig) else load_config(config, base)
    cfg.validate()
    if data.valid is None and cfg.distill.valid_fraction <= 0:
        raise ConfigError("tune needs validation queries: pass --valid FILE or --valid-fraction F "
                          "(or set distill.valid_fraction > 0 in --config)")
    check_validation_choice(data.train, flat_terms(data.terms), cfg.distill.valid_fraction,
                            None if data.valid is None else str(valid_path or "FILE"), data.valid)
    if trials < 1:
        raise ConfigError(f"--trials must be >= 1, got {trials}")
    if not 0 <= seed < 2**32:  # the TPE sampler's range; found only after the prefix trained
        raise ConfigError(f"--seed must be between 0 and 2**32 - 1, got {seed}")
    space = SEARCH_SPACE if space is None else space
    check_decay_highs(space, cfg)
    out = Path(out)
    check_study_dir(out, overwrite)
    with locked(out):  # one study at a time: two into one --out interleaved their trial logs
        in_effect = recommended_in_effect(cfg, base, sections=("distill",))  # the prefix run says its own stages'
        if in_effect:
            hooks.message(f"settings recommended for {base}: {in_effect} (a key in --config overrides it)")
        if cfg.distill.interpolate > 0:
            hooks.message(f"warning: distill.interpolate {cfg.distill.interpolate:g}: trials are scored before the "
                          "interpolation that train applies to its final model, so their objectives describe the "
                          "distilled model, not the one train delivers")
        start = prefix(out / "prefix") if prefix is not None else Path(base)
        import optuna

        # ERROR: a failed trial is said by record() in one line, with its reason; Optuna's warning
        # for it printed the whole traceback.
        optuna.logging.set_verbosity(optuna.logging.ERROR)
        # Judge a trial only after 2 complete ones and 2 of its own epochs: early epochs are noisy.
        pruner = optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=2)
        if overwrite and (problem := study_db_problem(out)):
            db = out / STUDY_DB
            shutil.rmtree(db) if db.is_dir() and not db.is_symlink() else db.unlink()
            hooks.message(f"--overwrite: {problem}; replaced by a new study")
        key = study_key(data, base, start, seed, cfg, space)
        earlier = other_studies(out, key)
        study, resumed = open_study(out, key, seed, pruner)
        if earlier and not resumed:  # Optuna keeps studies side by side; this replaces one: said first
            hooks.message(f"tune: {out} holds a study made with other inputs or settings; this new study replaces "
                          "it (its trials, trials.md and best.toml) once its first trial finishes")
        interrupted = requeue_interrupted(study) if resumed else []
        counted = len(counted_trials(study))
        # Another study's trials and results go, so that none of them can pass for this study's, but
        # only once this study has a trial of its own to show: a rerun stopped in its first trial
        # deleted a finished study and left nothing instead. Until then a trial logs to
        # N.running.jsonl (one a stopped run left is no result). A resumed study with finished
        # trials has only its own files here (the first of them removed the others').
        for log in (out / "trials").glob(f"*{RUNNING}"):
            log.unlink()
        stale = [] if counted else [log for log in (out / "trials").glob("*.jsonl") if log.stem.isdigit()]
        stale += [] if counted else [out / name for name in STUDY_FILES]  # --overwrite: beside others' files
        others_left = True  # other studies in study.db, deleted with the stale files
        reference = SpladeEncoder.from_pretrained(base)
        (out / "trials").mkdir(parents=True, exist_ok=True)
        rows: list[dict] = [row(t) for t in study.trials if t.state.is_finished()]
        if resumed:
            again = "runs again" if counted < trials else f"would run again with a --trials above {counted}"
            done = f"{counted} of {trials}" if counted <= trials else f"{counted} (more than --trials {trials})"
            hooks.message(f"tune: resuming the study in {out}: {done} trials done"
                          + (f"; trial {', '.join(map(str, interrupted))} was stopped and {again}" if interrupted else "")
                          # --overwrite replaces other files, not this study: said, since a user may read it as "start over"
                          + (f" (--overwrite does not restart a study; remove {out / STUDY_DB} to start over)"
                             if overwrite else ""))
        said: set[str] = set()

        def say_once(message: str) -> None:
            if message not in said:
                said.add(message)
                hooks.message(message)

        once = Hooks(message=say_once, task=hooks.task)

        def running(number: int) -> Path:
            return out / "trials" / f"{number}{RUNNING}"

        def keep_log(number: int) -> None:
            """The earlier study's files go (on the first trial), then trial ``number``'s log takes its name."""
            nonlocal others_left
            if others_left:  # first: a kill in between leaves old files but no old study to resume beside them
                delete_others(study)
                others_left = False
            while stale:
                stale.pop().unlink(missing_ok=True)
            if running(number).exists():
                running(number).replace(out / "trials" / f"{number}.jsonl")

        def objective(trial: "optuna.Trial") -> float:
            values = sample(trial, space)
            trial_cfg = with_distill(cfg, values)
            log_path = running(trial.number)
            log_path.unlink(missing_ok=True)

            def log(record: dict) -> None:
                with log_path.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(record) + "\n")

            def report(record: dict) -> None:
                trial.report(record["objective"], record["epoch"])
                if trial.should_prune():
                    raise optuna.TrialPruned()

            splade = SpladeEncoder.from_pretrained(start)
            ctx = StageContext(
                data=data, config=trial_cfg, seed=int(seed) + ORDER.index("distill"), log=log, reference=reference,
                on_validation=report,
                # A line every trial would repeat (the split, a validation set without control
                # queries: the data is the same) is said once; progress and the rest as they come.
                hooks=once,
            )
            # Trials are named by Optuna's number (from 0), as in trials.md, trials.json and best.toml.
            hooks.message(f"tune: trial {trial.number} ({counted + 1} of {trials}): "
                          + " ".join(f"{k}={v:.3g}" for k, v in values.items()))
            try:
                DistillStage().run(splade, ctx)
            except NonFiniteError as e:  # said in one line by record(); Optuna's own warning carried a traceback
                trial.set_user_attr("failure", str(e))
                raise
            if "best_epoch" not in ctx.info:
                raise ConfigError("tune: the validation split is empty; raise --valid-fraction (distill.valid_fraction) "
                                  "or pass --valid")
            trial.set_user_attr("best_epoch", ctx.info["best_epoch"])
            trial.set_user_attr("epochs_run", ctx.info["epochs_run"])
            return float(ctx.info["best_objective"])

        def record(study: "optuna.Study", trial: "optuna.trial.FrozenTrial") -> None:
            nonlocal counted
            counted += 1
            keep_log(trial.number)
            rows.append(row(trial))
            write_atomic(out / "trials.md", trials_table(rows, space))
            write_results(study, finished=False)  # a study stopped early still leaves its best so far
            failure = f" ({rows[-1]['failure']})" if rows[-1]["failure"] else ""
            hooks.message(f"tune: trial {trial.number} {rows[-1]['state']}, objective "
                          f"{'-' if trial.value is None else signed(trial.value, 4)}{failure}")

        # The base and the seed as the study had them: train's defaults (offline-minilm, 0) make
        # another prefix and, with a valid_fraction, another validation split.
        given = input_paths or {}
        files = " ".join(f"--{k} {shlex.quote(str(given[k])) if k in given else k.upper()}"
                         for k in ("corpus", "terms", "dictionary", "train"))
        usage = (f"sparse-adapt train --base {shlex.quote(str(base))} {files} --out OUT_DIR --seed {seed} "
                 "--config best.toml" + (f" --valid {shlex.quote(str(valid_path))}" if valid_path is not None else ""))

        def write_results(study: "optuna.Study", finished: bool) -> dict | None:
            """best.toml and trials.json for the trials so far (None: none completed)."""
            complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
            if not complete:
                return None
            best = max(complete, key=lambda t: t.value)  # the first of equals, as study.best_trial
            best_cfg = with_distill(cfg, {k: best.params[k] for k in space})
            so_far = "" if finished else " so far (the study did not finish)"
            baseline = next((t for t in complete if t.user_attrs.get("baseline")), None)
            versus = ("" if baseline is None else " = the config's own values: no trial beat them" if best is baseline
                      else f", the config's own values {signed(baseline.value, 4)}")
            header = (f"sparse-adapt tune: best of {len(complete)} completed trials{so_far} (trial {best.number}, objective "
                      f"{signed(best.value, 4)}{versus}, seed {seed}); use with: {usage}")
            write_atomic(out / "best.toml", config_to_toml(best_cfg, header))
            summary = {"best_trial": best.number, "best_value": best.value, "best_params": best.params, "seed": seed,
                       "start": str(start), "base": str(base), "finished": finished,
                       "valid": None if valid_path is None else str(valid_path),
                       "valid_fraction": cfg.distill.valid_fraction, "usage": usage,
                       "baseline_trial": next((t.number for t in study.trials if t.user_attrs.get("baseline")
                                               and not stopped(t)), None),
                       "space": {k: dataclasses.asdict(r) for k, r in space.items()}, "trials": rows}
            write_atomic(out / "trials.json", json.dumps(summary, indent=2) + "\n")
            return summary

        # Trial 0 runs the config's own values: the baseline a tuned best.toml must beat, or the
        # study says that none did. With a value outside its range (a weight of 0 on a log
        # scale) there is no baseline, and the study says so.
        own = {k: float(getattr(cfg.distill, k)) for k in space}
        outside = [k for k, r in space.items() if not r.low <= own[k] <= r.high]
        # Queued unless the study has one: a run stopped between creating the study and this line
        # had queued none, and its rerun (a resumed study) would have gone without.
        has_baseline = any(t.user_attrs.get("baseline") for t in study.trials)
        if not outside and not has_baseline:
            study.enqueue_trial(own, user_attrs={"baseline": True})
        elif outside and not resumed:  # a mix of its values and sampled ones would be no baseline
            hooks.message(f"tune: no baseline trial: the config's {', '.join(outside)} "
                          f"{'lies' if len(outside) == 1 else 'lie'} outside the search space")
        # A trial whose loss or gradient goes non-finite is an outcome of its values (an lr too
        # high), recorded as failed; the study goes on with the others.
        try:
            if counted < trials:
                study.optimize(objective, n_trials=trials - counted, callbacks=[record], catch=(NonFiniteError,))
        except BaseException:
            if counted:  # the study has trials of its own: the stopped one's log joins them
                keep_log(len(study.trials) - 1)
            raise
        write_atomic(out / "trials.md", trials_table(rows, space))
        summary = write_results(study, finished=True)
        if summary is None:
            raise ConfigError(f"tune: no trial completed of {trials}; see {out / 'trials.md'}")
        return summary
