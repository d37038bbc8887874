"""The staged pipeline: run a selection of stages with resumable checkpoints.

:func:`run_pipeline` runs the chosen stages (``stages.py``), saving a loadable
checkpoint to ``OUT/<stage>/`` after each (atomically: the directory appears only when
complete), so rerunning the same command resumes after the last completed stage. The
result is copied to ``OUT/final``, averaged with the run's starting point when
``distill.interpolate`` > 0 (``interpolation.py``). ``OUT/run.json`` records what the run is (stages,
config sections of its stages, seed, base, input file hashes); a rerun that differs is refused instead of mixing
checkpoints of two different runs (``rundir.py``). Every optimiser step goes to
``OUT/train_log.jsonl``. One process at a time writes a run directory (``lock.py``);
``run.json`` is written only once the inputs and the base have loaded, and a stage whose
loss or weights stop being finite ends the run without saving them.

Inside a stage the loop saves ``OUT/<stage>.partial/`` every ``checkpoint_every`` steps
(the model in ``model/``, optimiser, scheduler, RNG states and data position in
``trainer_state.pt``); a rerun continues from there, and the partial checkpoint is removed
once the stage's own directory is written. Under ``accelerate launch`` only the main
process writes (``distributed.py``).
"""

from __future__ import annotations

import json
import shutil
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch

from sparse_adapt.atomic import clean_leftovers
from sparse_adapt.destination import check_not_an_input, check_writable, empty_or_model_directory
from sparse_adapt.data import file_sha256, flat_terms, load_dictionary, load_domain_terms, load_train, mentions_term
from sparse_adapt.defaults import bundled
from sparse_adapt.device import resolve_device
from sparse_adapt.errors import ConfigError, NonFiniteError, OutputError
from sparse_adapt.lock import locked
from sparse_adapt.modeling.card import write_model_card
from sparse_adapt.modeling.encoder import SpladeEncoder
from sparse_adapt.modeling.vocabulary import check_not_special, plan_extension
from sparse_adapt.progress import SILENT, Hooks, counted
from sparse_adapt.training import rundir
from sparse_adapt.training.checkpoint import TRAINER_STATE, load_partial, partial_value, save_partial
from sparse_adapt.training.config import TrainConfig
from sparse_adapt.training.config_files import config_from_dict, load_config, recommended_in_effect, with_recommended
from sparse_adapt.training.distributed import Processes
from sparse_adapt.training.interpolation import interpolate
from sparse_adapt.training.loop import require_finite
from sparse_adapt.training.mlm_data import validate_corpus
from sparse_adapt.training.rundir import FINAL, LOG_FILE, PARTIAL, RUN_FILE, RunMismatchError  # noqa: F401  (public names)
from sparse_adapt.training.density import density_sample, document_density
from sparse_adapt.training.validation import check_validation_choice
from sparse_adapt.training.stages import EXPERIMENTS, ORDER, STAGES, StageContext, TrainData, check_lengths, parse_stages

def _load_inputs(corpus: Path, terms: Path, dictionary: Path, train: Path, valid: Path | None = None) -> TrainData:
    validate_corpus(corpus)  # streamed, record by record
    return TrainData(
        corpus=Path(corpus), terms=load_domain_terms(terms),
        dictionary=load_dictionary(dictionary), train=load_train(train),
        valid=load_train(valid) if valid is not None else None,
    )


def stray_entries(data: TrainData) -> list[str]:
    """Dictionary terms naming no domain term (case aside; "Brindlewick clause" names
    ``Brindlewick``): most often a typo of one."""
    terms = flat_terms(data.terms)
    return [e.term for e in data.dictionary if not mentions_term(e.term, terms)]


def _check_terms(splade: SpladeEncoder, data: TrainData, terms_path: Path, extending: bool) -> None:
    """Refuse terms the model cannot use before anything is written (special tokens; with
    ``extend`` still to run, terms the tokenizer cannot keep whole)."""
    if extending:
        plan_extension(splade.tokenizer, data.terms, str(terms_path))
    else:
        check_not_special(splade.tokenizer, data.terms, str(terms_path))


def unused_settings(cfg: TrainConfig, names: Sequence[str], validating: bool) -> list[str]:
    """Keys set away from their defaults that this run cannot use: a config file's setting that
    does nothing should be said, not dropped. ``validating``: a ``--valid`` file was given."""
    unused = []
    d = cfg.distill
    if "distill" not in names:
        unused += [f"distill.{key} {getattr(d, key):g} has no effect: the run has no distill stage"
                   for key in ("interpolate", "valid_fraction", "patience") if getattr(d, key) > 0]
    elif d.patience > 0 and not validating and d.valid_fraction == 0:
        unused.append(f"distill.patience {d.patience} has no effect without validation queries "
                      "(--valid FILE or distill.valid_fraction)")
    return unused


def _partial(out: Path, name: str) -> Path:
    return out / f"{name}{PARTIAL}"


def _checkpointer(out: Path, name: str, splade: SpladeEncoder, processes: Processes):
    def save(state: dict) -> None:
        if processes.is_main:
            save_partial(_partial(out, name), splade, state)
        processes.barrier()

    return save


def _discard_partial_of_other_world(out: Path, name: str, world: int, hooks: Hooks) -> None:
    """A partial checkpoint saved by another number of processes is discarded: its schedule,
    data position and effective batch were sized for that number (resumed, 2 -> 1 ran 31 of
    20 steps, the last at lr 0)."""
    if not (_partial(out, name) / TRAINER_STATE).is_file():
        return
    saved = int(partial_value(_partial(out, name), "world", 1))
    if saved != world:
        shutil.rmtree(_partial(out, name))
        hooks.message(f"{out}: {name} was interrupted on {counted(saved, 'process', 'processes')} and this run has "
                      f"{world}; its partial checkpoint is discarded and {name} starts afresh")


def _partial_steps(out: Path, name: str) -> int:
    """Optimiser steps saved in ``name``'s partial checkpoint (0: none)."""
    return int(partial_value(_partial(out, name), "steps", 0))


def run_pipeline(
    base: str | Path = "offline-minilm",
    corpus: str | Path | None = None,
    terms: str | Path | None = None,
    dictionary: str | Path | None = None,
    train: str | Path | None = None,
    out: str | Path = "runs/adapted",
    stages: str | Sequence[str] = EXPERIMENTS["H4"],
    config: TrainConfig | Mapping[str, Any] | str | Path | None = None,
    seed: int = 0,
    hooks: Hooks = SILENT,
    overwrite: bool = False,
    device: str | torch.device | None = None,
    valid: str | Path | None = None,
    reference: str | Path | None = None,
    config_source: str | Path | None = None,
) -> Path:
    """Run ``stages`` on ``base``; returns ``OUT/final``. Inputs default to the bundled corpus.

    Rerunning with the same arguments resumes after the last completed stage (or inside it,
    from its last mid-stage checkpoint); ``overwrite`` discards a different run found in
    ``out`` instead of refusing. ``valid``: validation queries of the distill stage
    (train.jsonl format; else ``distill.valid_fraction`` of ``train``). ``reference``: the
    frozen model that knowledge preservation and validation compare with (default ``base``;
    give the original base when ``base`` is a checkpoint of an earlier run). ``config``: a
    TrainConfig, a JSON or TOML file, or a file's overrides as a dict (``{"distill": {"epochs":
    3}}``, checked as a file's). ``config_source``: the file a ``config`` given as a TrainConfig
    was read from, named by an error about it.
    """
    names = parse_stages(stages)
    device = resolve_device(device)
    processes = Processes(device)
    device = processes.device(device)
    main = processes.is_main
    if not main:
        hooks = SILENT
    reference = base if reference is None else reference
    if isinstance(config, Mapping):  # the overrides a file holds, over the settings recommended for the base
        config = config_from_dict(with_recommended(dict(config), reference), "config")
    # A config given as a TrainConfig is taken as it is; a file (or none) gets the settings
    # recommended for the base first (the reference: a checkpoint resumed as base keeps them).
    cfg = config if isinstance(config, TrainConfig) else load_config(config, reference)
    cfg.validate()
    in_effect = recommended_in_effect(cfg, reference, sections=names)
    if in_effect:  # said whichever way the config came (report and benchmark pass a TrainConfig)
        hooks.message(f"settings recommended for {reference}: {in_effect} (a key in --config overrides it)")
    # A --config file's settings only: report, benchmark and tune pass a TrainConfig shared across stage subsets.
    if config is not None and not isinstance(config, TrainConfig):
        for line in unused_settings(cfg, names, validating=valid is not None):
            hooks.message(f"warning: {config}: {line}")
    paths = {
        "corpus": bundled(corpus, "docs"), "terms": bundled(terms, "terms"),
        "dictionary": bundled(dictionary, "dictionary"), "train": bundled(train, "train"),
    }
    if valid is not None:
        paths["valid"] = Path(valid)
    data = _load_inputs(**paths)  # validate every input before any training or writing
    if "distill" in names:
        check_validation_choice(data.train, flat_terms(data.terms), cfg.distill.valid_fraction,
                                None if valid is None else str(valid), data.valid)
    if "dictionary" in names:
        stray = stray_entries(data)
        if stray:
            hooks.message(f"warning: {paths['dictionary']}: {len(stray)} of {len(data.dictionary)} entries define a "
                          f"term that is not in {paths['terms']} (e.g. {stray[0]!r}); no domain token learns from them")
    out = Path(out)
    for flag, model in (("--base", base), ("--reference", reference)):
        part = rundir.part_holding(out, model, rundir.run_parts())
        if part is not None:  # --overwrite would delete it before it loads; a rerun would train over it
            raise ConfigError(f"{flag} {model} is {out / part}, part of the run in {out}: copy it elsewhere first, "
                              "or give another --out")
    # Refused even with overwrite: replacing an input (or a folder holding one) deleted it.
    given = (*paths.values(), *([config] if config is not None and not isinstance(config, TrainConfig) else []))
    check_not_an_input(out, given)
    check_writable(out, into=True)
    if out.exists() and not out.is_dir():
        if not overwrite:
            raise OutputError(f"--out {out} is an existing file; a run needs a directory (--overwrite replaces the file)")
        if main:
            out.unlink()
    processes.barrier()
    # Only the settings of the stages this run has: changing distill settings does not
    # invalidate a run of the MLM stages (the benchmark and tune share such a prefix).
    settings = {k: v for k, v in cfg.to_dict().items() if k in names}
    manifest = {
        "stages": names, "config": settings, "seed": int(seed), "base": str(base),
        "inputs": {k: file_sha256(p) for k, p in paths.items()},
    }
    if str(reference) != str(base):  # only then: manifests of earlier runs stay valid
        manifest["reference"] = str(reference)
    for key, model in (("base", base), ("reference", reference if "reference" in manifest else None)):
        digest = rundir.files_sha256(model) if model is not None else None
        if digest is not None:  # a directory: the same path may hold other weights tomorrow
            manifest[f"{key}_sha256"] = digest
    # One writer per directory; under `accelerate launch` the main process holds the lock for all.
    with locked(out) if main else nullcontext():
        if main:
            clean_leftovers(out)  # temporaries of checkpoints whose save was killed
            rundir.prepare(out, manifest, names, overwrite, hooks)
            for name in (*names, FINAL):  # before training: saving there failed only after the stage had trained
                if (out / name).is_dir() and not empty_or_model_directory(out / name):
                    raise OutputError(f"{out / name} holds files that are no saved model, where the run saves its "
                                      f"{name}: move them, or choose another --out")
        processes.barrier()
        done = rundir.completed_stages(out, names)
        start = len(done)
        if main:
            for name in done:  # killed between saving a stage and removing its partial: model + optimiser, kept forever
                shutil.rmtree(_partial(out, name), ignore_errors=True)
        if main and start < len(names):
            _discard_partial_of_other_world(out, names[start], processes.world, hooks)
        processes.barrier()
        if start:
            hooks.message(f"resuming: {', '.join(names[:start])} already complete in {out}")
            splade = SpladeEncoder.from_pretrained(out / names[start - 1], device=device)
        else:
            splade = SpladeEncoder.from_pretrained(base, device=device)
        _check_terms(splade, data, paths["terms"], "extend" in names[start:])
        source = config_source if config is None or isinstance(config, TrainConfig) else config
        check_lengths(splade, cfg, names[start:], None if source is None else str(source))
        log_path = out / LOG_FILE
        if main:
            rundir.write_manifest(out, manifest)  # only now: the inputs and the base have loaded
            if start < len(names):  # a finished run reused as is leaves its log alone
                rundir.forget_final(out)
                resumed = names[start]
                rundir.restart_log(log_path, done, (resumed, _partial_steps(out, resumed)))
        processes.barrier()

        def log(record: dict) -> None:
            if not main:
                return
            with log_path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")

        for i in range(start, len(names)):
            name = names[i]
            stage = STAGES[name]()
            ctx = StageContext(data=data, config=cfg, seed=int(seed) + ORDER.index(name), log=log, hooks=hooks,
                               processes=processes, reference=reference)
            partial = load_partial(_partial(out, name), device) if i == start else None
            if partial is not None:
                splade, ctx.resume = partial
                hooks.message(f"resuming {name} at step {ctx.resume['steps']} from {_partial(out, name)}")
            ctx.checkpoint = _checkpointer(out, name, splade, processes)
            log({"event": "stage_start", "stage": name, "time": time.time()})
            t0 = time.perf_counter()
            try:
                stage.run(splade, ctx)
                require_finite(splade.mlm, name)
            except NonFiniteError as e:
                log({"event": "stopped", "stage": name, "reason": str(e), "time": time.time()})
                if main:  # its weights led here: a rerun (say with a lower lr) starts the stage afresh
                    shutil.rmtree(_partial(out, name), ignore_errors=True)
                if i:
                    raise NonFiniteError(f"{e}. Last good checkpoint: {out / names[i - 1]}; rerun to resume from it") from None
                raise NonFiniteError(f"{e}. No stage of this run completed; the base {base} is unchanged") from None
            seconds = time.perf_counter() - t0
            # Logged before the save: a kill between the two then drops the line with the unsaved
            # stage (restart_log), where a saved stage killed before its line lost its card row.
            log({"event": "stage_end", "stage": name, "seconds": round(seconds, 2), **ctx.info})
            if main:
                splade.save_pretrained(out / name, keep_others=False)
                shutil.rmtree(_partial(out, name), ignore_errors=True)
            processes.barrier()
            hooks.message(f"stage {name} done in {seconds:.1f}s -> {out / name}")
        alpha = cfg.distill.interpolate
        # The run's starting point: the base with the domain terms added, nothing trained.
        anchor = (out / "extend" if "extend" in names else base) if alpha > 0 and "distill" in names else None
        recipe = rundir.final_recipe(manifest, alpha, anchor)
        final = out / FINAL
        if start == len(names) and rundir.final_is_current(out, recipe):
            hooks.message(f"{final} is up to date with its checkpoints; kept as it is")
            return final
        # One record per write of OUT/final, also from a rerun that trained nothing (another
        # distill.interpolate): the log's last "final" event always says what OUT/final is.
        event = {"event": "final", "interpolate": recipe["interpolate"], "anchor": recipe["anchor"]}
        if anchor is not None:
            # The average activates more terms than the distilled model (measured on the dev
            # domains: offline-minilm documents 1.4-1.7x), so the index-size cost is said, not hidden.
            sample = density_sample(data.train)
            density = {"distilled": document_density(splade, sample)}
            splade = interpolate(splade, SpladeEncoder.from_pretrained(anchor, device=device), alpha)
            require_finite(splade.mlm, "interpolate")
            density["final"] = document_density(splade, sample)
            event["doc_terms"] = {k: round(v, 1) for k, v in density.items()}
            hooks.message(f"final = {1 - alpha:g} x {out / 'distill'} + {alpha:g} x {anchor} (distill.interpolate); "
                          f"documents activate {density['final']:.0f} terms on average ({density['distilled']:.0f} distilled; "
                          f"`export --max-active-dims N` caps a document's postings)")
        if main:
            # Not keeping the replaced final's made_from.json: killed before the new one is
            # written, a rerun would take these weights for the recipe it names.
            splade.save_pretrained(final, keep_others=False)
            log({**event, "time": time.time()})
            write_model_card(final, splade, manifest, rundir.stage_ends(log_path))
            rundir.record_final(out, recipe)
        processes.barrier()
        hooks.message(f"wrote {final}")
    return final
