"""The run directory of :func:`~sparse_adapt.training.pipeline.run_pipeline`: what it holds,
when a rerun may resume in it, and its log across attempts.

``OUT/run.json`` says what the run is. A rerun may resume when everything that produced
the completed checkpoints is unchanged: stages, seed, base (a directory's files too), input files and the config
sections of the completed stages (each stage seeds itself, so a later stage's settings
do not touch earlier checkpoints: lowering ``distill.lr`` after a NaN loss resumes from
the last good checkpoint). Anything else would mix two runs and is refused, unless
``overwrite``, which discards the old run's own files (never other files in ``OUT``).
A run directory with no checkpoint holds nothing to mix and is simply reused; a non-empty
directory without ``run.json`` is refused unless ``overwrite``.

``OUT/train_log.jsonl`` keeps the records of completed stages, and the steps a resumed
stage's mid-stage checkpoint holds: when a run resumes, the other records of the interrupted
attempt's unfinished stages are dropped (a stage's ``stage_end`` is logged just before its
save, so a stage whose save failed is among them) and a ``resume`` event marks the new attempt.

``OUT/final/made_from.json`` records what ``OUT/final`` was made from (the run's manifest,
the interpolation weight and anchor) and when. A rerun that trains nothing and would make
the same ``final`` keeps it as it is, with any edit to its model card; any stage that
trains removes the record first, so a ``final`` older than its checkpoints is never kept.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from pathlib import Path
from typing import Sequence

from sparse_adapt.atomic import write_atomic, write_json_atomic
from sparse_adapt.errors import ModelLoadError, SparseAdaptError
from sparse_adapt.lock import LOCK_FILE
from sparse_adapt.modeling.hub import user_path
from sparse_adapt.modeling.settings import SpladeSettings
from sparse_adapt.progress import Hooks
from sparse_adapt.training.config import TrainConfig
from sparse_adapt.training.stages import ORDER

RUN_FILE = "run.json"
LOG_FILE = "train_log.jsonl"
FINAL = "final"
PARTIAL = ".partial"  # suffix of a stage's mid-stage checkpoint directory (``OUT/warmup.partial/``)
# Settings that shape only OUT/final, which a rerun rewrites from the last stage's
# checkpoint when they changed: a rerun that changes them (or a run recorded before they existed) is not
# refused, and another value needs no retraining.
FINAL_ONLY = {"distill": ("interpolate",)}
FINAL_RECORD = "made_from.json"  # in OUT/final


# The files of a base directory that decide what it computes: weights, configs, tokenizer.
# Not its README or anything else a user may edit beside a model.
BASE_FILES = ("*.safetensors", "*.bin", "config.json", "sparse_adapt.json", "tokenizer.json", "tokenizer_config.json",
              "vocab.txt", "vocab.json", "merges.txt", "*.model", "added_tokens.json", "special_tokens_map.json")


def files_sha256(model: str | Path) -> str | None:
    """A hash of a model directory's :data:`BASE_FILES` (names and bytes), so a base retrained
    in place is not resumed as the same run; None for a built-in or Hub name, which is
    compared by name only."""
    import hashlib

    directory = user_path(model)  # "~/base" loads (modeling/hub.py), so it is hashed too
    if not directory.is_dir():
        return None
    h = hashlib.sha256()
    for path in sorted({p for pattern in BASE_FILES for p in directory.glob(pattern) if p.is_file()}):
        h.update(f"{path.name}|{path.stat().st_size}|".encode())
        with path.open("rb") as f:  # streamed: a base's weights may be GBs
            h.update(hashlib.file_digest(f, "sha256").digest())
    return h.hexdigest()


class RunMismatchError(SparseAdaptError):
    """``--out`` already holds a different run (other stages, config, seed, base or inputs), or
    other files and no run."""

    def __init__(self, message: str, differences: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.differences = list(differences)  # what differs, as said in the message


def complete(directory: Path) -> bool:
    # save_pretrained writes into a temp dir renamed into place: the directory exists only complete.
    return (directory / "config.json").is_file() and (directory / "sparse_adapt.json").is_file()


def completed_stages(out: Path, names: Sequence[str]) -> list[str]:
    """The completed prefix of ``names``: a later stage's directory without its predecessors is not ours."""
    done = []
    for name in names:
        if not complete(out / name):
            break
        done.append(name)
    return done


def saved_checkpoints(out: Path) -> list[str]:
    """The stages (and ``final``) of the run in ``out`` whose model is saved: what a rerun on
    other inputs is refused for (a run with none starts afresh)."""
    return [n for n in (*ORDER, FINAL) if complete(out / n)]


def final_recipe(manifest: dict, interpolate: float, anchor: str | Path | None) -> dict:
    """What makes ``OUT/final``: the run, and the average with ``anchor`` (None: the last checkpoint as it is)."""
    return {"schema": "sparse-adapt.final/1", "run": manifest,
            "interpolate": float(interpolate) if anchor is not None else 0.0,
            "anchor": None if anchor is None else str(anchor)}


def final_record(final: Path) -> dict | None:
    """The record ``OUT/final`` was written with (``written`` included); None when it has none."""
    try:
        record = json.loads((final / FINAL_RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return record if isinstance(record, dict) else None


def trained_on(model: str | Path) -> dict | None:
    """The run record (``run.json``'s content: base, inputs' sha256s ...) the model directory
    ``model`` was written by as a run's ``final`` (an ``adapt`` run's ``DIR/final`` too); None
    for any other model."""
    record = final_record(Path(model)) if Path(model).is_dir() else None
    run = (record or {}).get("run")
    return run if isinstance(run, dict) else None


def reference_of(model: str | Path, _depth: int = 0) -> str | None:
    """The reference to train on from ``model`` with: the ``--reference`` of the run that wrote
    it, else what that run's base traces back to (a chain of runs without ``--reference``, each
    on the last one's final, compared with the first one's base), else that base; for a model no
    run wrote, the model it was before its domain tokens were added
    (:attr:`SpladeSettings.extended_from <sparse_adapt.modeling.settings.SpladeSettings>`).
    None for a model neither made."""
    run = trained_on(model)
    if run is None:
        return extended_from(model)
    if isinstance(run.get("reference"), str):
        return run["reference"]
    base = run.get("base")
    if not isinstance(base, str):
        return None
    if same_place(base, model):  # a final moved to where its base was
        return base
    # A run's base inside itself is refused, so a chain ends; the depth only bounds edited records.
    return (reference_of(base, _depth + 1) if _depth < 64 else None) or base


def extended_from(model: str | Path) -> str | None:
    """The recorded model ``model`` was before its first domain token was added; None when the
    folder records none (or is no folder: a built-in or Hub name)."""
    if not Path(model).is_dir():
        return None
    try:
        return SpladeSettings.load(Path(model)).extended_from or None
    except ModelLoadError:  # loading the model says what is wrong with the file, in its own line
        return None


def _with_defaults(cfg: dict) -> dict:
    """``cfg`` (a run's recorded config) with every key a later version added at its default.

    A key joins a section with the default that keeps the older behaviour (``step_cap = 0``:
    no cap), so a run recorded before it existed trained as today's default does, and a
    rerun after an upgrade must resume rather than be refused as a different run.
    """
    full = dataclasses.asdict(TrainConfig())
    return {s: {**full[s], **v} if s in full and isinstance(v, dict) else v for s, v in cfg.items()}


def final_is_current(out: Path, recipe: dict) -> bool:
    record = final_record(out / FINAL)
    if record is None or not complete(out / FINAL):
        return False
    record = {k: v for k, v in record.items() if k != "written"}

    recorded_run = record.get("run") if isinstance(record.get("run"), dict) else {}

    def same_config(r: dict) -> dict:
        run = r.get("run")
        if isinstance(run, dict) and isinstance(run.get("config"), dict):
            run = _as_recorded_before(recorded_run, run)  # a final made before files were hashed is current
            return {**r, "run": {**run, "config": _with_defaults(run["config"])}}
        return r

    return same_config(record) == same_config(recipe)


def record_final(out: Path, recipe: dict) -> None:
    # ``written`` makes every rewrite of final a new record: adapt copies final only when it changed.
    write_json_atomic(out / FINAL / FINAL_RECORD, {**recipe, "written": time.time()})


def forget_final(out: Path) -> None:
    """Before a stage trains: the ``final`` on disk no longer matches the checkpoints."""
    (out / FINAL / FINAL_RECORD).unlink(missing_ok=True)


def _stage_part(cfg: dict, section: str) -> dict:
    """A section's settings without those that shape only OUT/final."""
    values = dict(_with_defaults(cfg).get(section) or {})
    for key in FINAL_ONLY.get(section, ()):
        values.pop(key, None)
    return values


def _differences(old: dict, new: dict, completed: Sequence[str]) -> list[str]:
    sections = {f.name for f in dataclasses.fields(TrainConfig)}
    diff = []
    for key in sorted(set(old) | set(new)):
        if key == "config":
            old_cfg, new_cfg = old.get(key) or {}, new.get(key) or {}
            changed = [s for s in completed if s in sections and _stage_part(old_cfg, s) != _stage_part(new_cfg, s)]
            if changed:
                diff.append(f"config [{', '.join(changed)}]")
        elif key == "inputs" and isinstance(old.get(key), dict) and isinstance(new.get(key), dict):
            files = [k for k in sorted(set(old[key]) | set(new[key])) if old[key].get(k) != new[key].get(k)]
            if files:
                diff.append(f"inputs [{', '.join(files)}]")
        elif key in ("base", "reference") and same_place(old.get(key), new.get(key)):
            continue
        elif key.endswith("_sha256"):
            # Recorded only for directories, and only since this check exists: compared when both have it.
            if key in old and key in new and old[key] != new[key]:
                diff.append(f"{key.removesuffix('_sha256')}'s files")
        elif old.get(key) != new.get(key):
            diff.append(key)
    return diff


def _changed_settings(old_cfg: dict, new_cfg: dict) -> str:
    """What a rerun accepted with changed settings will do about them, naming them."""
    old_all, new_all = _with_defaults(old_cfg), _with_defaults(new_cfg)
    keys = [f"{section}.{key}" for section in sorted(set(old_all) | set(new_all))
            for key in sorted(set(old_all.get(section) or {}) | set(new_all.get(section) or {}))
            if (old_all.get(section) or {}).get(key) != (new_all.get(section) or {}).get(key)]
    final_only = {f"{section}.{key}" for section, names in FINAL_ONLY.items() for key in names}
    if keys and set(keys) <= final_only:
        return f"{', '.join(keys)} changed; {FINAL} is made again from the completed stages"
    if not keys:  # the same run recorded otherwise (its base spelled as another path to it)
        return "completed stages are reused"
    return f"settings of stages still to run changed ({', '.join(keys)}); completed stages are reused"


def _as_recorded_before(old: dict, manifest: dict) -> dict:
    """``manifest`` without the files hashes ``old`` lacks: a run recorded before they existed
    is the same run, and its first rerun after an upgrade has nothing to say."""
    if not isinstance(old, dict):
        return manifest
    return {k: v for k, v in manifest.items() if k in old or not k.endswith("_sha256")}


def part_holding(out: Path, model: str | Path | None, parts: Sequence[str]) -> str | None:
    """Which of ``out``'s ``parts`` (a run's own directories) holds the local model ``model``,
    or None: a rerun or ``--overwrite`` there would replace the model it starts from."""
    local = None if model is None else user_path(model)
    if local is None or not local.exists() or not Path(out).exists():
        return None
    try:
        inside = local.resolve().relative_to(Path(out).resolve())
    except ValueError:
        return None
    return inside.parts[0] if inside.parts and inside.parts[0] in parts else None


def run_parts() -> tuple[str, ...]:
    """The directories a training run writes into its ``OUT``."""
    return (*ORDER, *(f"{n}{PARTIAL}" for n in ORDER), FINAL)


def same_place(a, b) -> bool:
    """Whether two spellings of a base name one thing (``./base`` and ``base``); a built-in or
    Hub name only as the same string."""
    if a == b:
        return True
    if not (isinstance(a, str) and isinstance(b, str)) or not (Path(a).exists() and Path(b).exists()):
        return False
    return Path(a).resolve() == Path(b).resolve()


def _discard(out: Path) -> None:
    """Remove the files a run writes, and nothing else."""
    for name in (*ORDER, *(f"{n}{PARTIAL}" for n in ORDER), FINAL):
        if (out / name).is_dir():
            shutil.rmtree(out / name)
    for name in (RUN_FILE, LOG_FILE):
        (out / name).unlink(missing_ok=True)


def prepare(out: Path, manifest: dict, names: Sequence[str], overwrite: bool, hooks: Hooks) -> list[str]:
    """Make ``out`` (locked by the caller) ready for ``manifest``; returns the completed stages."""
    path = out / RUN_FILE
    if path.is_file():
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            old = {}
        done = completed_stages(out, names)
        diff = _differences(old if isinstance(old, dict) else {}, manifest, done)
        checkpoints = saved_checkpoints(out)
        if diff and checkpoints:
            if not overwrite:
                raise RunMismatchError(
                    f"{out} holds a different run (this command changes its {', '.join(diff)}); "
                    f"use another --out, or pass --overwrite to discard that run", diff,
                )
            hooks.message(f"--overwrite: discarding the run in {out} ({', '.join(diff)} differed)")
            _discard(out)
        elif old != _as_recorded_before(old, manifest):  # run.json is rewritten by write_manifest, once the base has loaded
            # An interrupted stage's checkpoint holds its optimiser (lr, schedule) and batch plan:
            # resumed under other settings it would train on the old ones while run.json said the new.
            readable = isinstance(old, dict) and old
            old_cfg = (old.get("config") if readable else None) or {}
            run_changed = _differences(old, manifest, ()) if readable else ["run.json unreadable"]
            for n in [n for n in names if n not in done][:1]:
                if not (out / f"{n}{PARTIAL}").is_dir():
                    continue
                why = (f"the run's {', '.join(run_changed)}" if run_changed else
                       f"the [{n}] config" if _stage_part(old_cfg, n) != _stage_part(manifest["config"], n) else None)
                if why is not None:
                    shutil.rmtree(out / f"{n}{PARTIAL}")
                    hooks.message(f"{out}: {why} changed since {n} was interrupted; its partial checkpoint "
                                  f"is discarded and {n} starts afresh")
            if not checkpoints:
                hooks.message(f"{out}: no stage of the earlier attempt completed; starting afresh")
            else:
                hooks.message(f"{out}: {_changed_settings(old_cfg, manifest['config'])}")
    elif any(p.name != LOCK_FILE for p in out.iterdir()) and not overwrite:
        raise RunMismatchError(
            f"{out} is not empty and holds no {RUN_FILE}: refusing to write a run into it "
            f"(pass --overwrite to write the run beside its files)"
        )
    return completed_stages(out, names)


def write_manifest(out: Path, manifest: dict) -> None:
    """``run.json`` for this run (after :func:`prepare` accepted ``out`` for it)."""
    path = out / RUN_FILE
    try:
        current = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    except (ValueError, UnicodeDecodeError):
        current = None
    if current != manifest:
        write_json_atomic(path, manifest)


def read_log(path: Path) -> tuple[list[dict], int]:
    """The records of a ``train_log.jsonl`` and how many lines were none: a line torn by a killed
    write, a blank one, or one that is no JSON object is skipped, so that the model card, the
    benchmark and a resume read what the run recorded and never fail on it. ([], 0) without a log."""
    records, dropped = [], 0
    if path.is_file():
        for raw in path.read_bytes().splitlines():
            try:
                record = json.loads(raw)
            except ValueError:  # torn, blank, or not UTF-8
                record = None
            if isinstance(record, dict):
                records.append(record)
            else:
                dropped += 1
    return records, dropped


def stage_ends(path: Path) -> list[dict]:
    """The ``stage_end`` records of a run's ``train_log.jsonl`` (empty when there is none)."""
    return [r for r in read_log(path)[0] if r.get("event") == "stage_end"]


def restart_log(path: Path, completed: Sequence[str], partial: tuple[str, int] | None = None) -> None:
    """Keep the records of ``completed`` stages (and earlier resume events); mark a new attempt.

    ``partial``: (stage, steps) of a mid-stage checkpoint the new attempt resumes from; that
    stage's step records up to ``steps`` are kept, since the checkpoint holds their work.
    """
    if not path.is_file():
        return
    records, dropped = read_log(path)
    kept = []
    for record in records:
        # The resumed stage's steps that its mid-stage checkpoint holds (its stage_start is logged anew).
        in_partial = (partial is not None and record.get("stage") == partial[0]
                      and "step" in record and record["step"] <= partial[1])
        if "stage" in record and record["stage"] not in completed and not in_partial:
            dropped += 1
            continue
        kept.append(record)
    attempt = 2 + sum(1 for r in kept if r.get("event") == "resume")
    kept.append({"event": "resume", "attempt": attempt, "completed": list(completed), "dropped_records": dropped,
                 "time": time.time()})
    write_atomic(path, "".join(json.dumps(r) + "\n" for r in kept))
