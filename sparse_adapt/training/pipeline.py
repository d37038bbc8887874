"""The staged pipeline: run a selection of stages with resumable checkpoints.

:func:`run_pipeline` runs the chosen stages (``stages.py``), saving a loadable
checkpoint to ``OUT/<stage>/`` after each (atomically: the directory appears only when
complete), so rerunning the same command resumes after the last completed stage. The
result is copied to ``OUT/final``. ``OUT/run.json`` records what the run is (stages,
config, seed, base, input file hashes); a rerun that differs is refused instead of mixing
checkpoints of two different runs. Every optimiser step goes to ``OUT/train_log.jsonl``.

Inside a stage the loop saves ``OUT/<stage>.partial/`` every ``checkpoint_every`` steps
(the model in ``model/``, optimiser, scheduler, RNG states and data position in
``trainer_state.pt``); a rerun continues from there, and the partial checkpoint is removed
once the stage's own directory is written.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from pathlib import Path
from typing import Sequence

import torch

from sparse_adapt.atomic import atomic_directory, write_json_atomic
from sparse_adapt.data import load_dictionary, load_domain_terms, load_train
from sparse_adapt.device import resolve_device
from sparse_adapt.defaults import bundled
from sparse_adapt.errors import SparseAdaptError
from sparse_adapt.modeling.encoder import SpladeEncoder
from sparse_adapt.progress import SILENT, Hooks
from sparse_adapt.training.config import TrainConfig, load_config
from sparse_adapt.training.distributed import Processes
from sparse_adapt.training.mlm_data import validate_corpus
from sparse_adapt.training.stages import EXPERIMENTS, ORDER, STAGES, StageContext, TrainData, parse_stages

RUN_FILE = "run.json"
LOG_FILE = "train_log.jsonl"
FINAL = "final"
PARTIAL = ".partial"  # suffix of a stage's mid-stage checkpoint directory
TRAINER_STATE = "trainer_state.pt"


class RunMismatchError(SparseAdaptError):
    """``--out`` already holds a different run (other stages, config, seed or inputs)."""


def _sha256(path: Path) -> str:
    with path.open("rb") as f:  # streamed: a corpus need not fit in memory
        return hashlib.file_digest(f, "sha256").hexdigest()


def _load_inputs(corpus: Path, terms: Path, dictionary: Path, train: Path) -> TrainData:
    validate_corpus(corpus)  # streamed, record by record
    return TrainData(
        corpus=Path(corpus), terms=load_domain_terms(terms),
        dictionary=load_dictionary(dictionary), train=load_train(train),
    )


def _check_manifest(out: Path, manifest: dict) -> None:
    path = out / RUN_FILE
    if path.is_file():
        old = json.loads(path.read_text(encoding="utf-8"))
        diff = sorted(k for k in set(old) | set(manifest) if old.get(k) != manifest.get(k))
        if diff:
            raise RunMismatchError(
                f"{out} holds a different run ({', '.join(diff)} differ from this command); "
                f"use another --out or delete {out}"
            )
    elif out.exists() and any(out.iterdir()):
        raise RunMismatchError(f"{out} is not empty and holds no {RUN_FILE}: refusing to write a run into it")


def _complete(directory: Path) -> bool:
    # save_pretrained writes into a temp dir renamed into place: the directory exists only complete.
    return (directory / "config.json").is_file() and (directory / "sparse_adapt.json").is_file()


def _partial(out: Path, name: str) -> Path:
    return out / f"{name}{PARTIAL}"


def _checkpointer(out: Path, name: str, splade: SpladeEncoder, processes: Processes):
    def save(state: dict) -> None:
        if processes.is_main:
            with atomic_directory(_partial(out, name)) as tmp:
                splade.save_pretrained(tmp / "model")
                torch.save(state, tmp / TRAINER_STATE)
        processes.barrier()

    return save


def _load_partial(out: Path, name: str, device: torch.device) -> tuple[SpladeEncoder, dict] | None:
    partial = _partial(out, name)
    if not (partial / TRAINER_STATE).is_file() or not _complete(partial / "model"):
        return None
    state = torch.load(partial / TRAINER_STATE, weights_only=True, map_location="cpu")
    return SpladeEncoder.from_pretrained(partial / "model", device=device), state


def run_pipeline(
    base: str | Path = "offline-minilm",
    corpus: str | Path | None = None,
    terms: str | Path | None = None,
    dictionary: str | Path | None = None,
    train: str | Path | None = None,
    out: str | Path = "runs/adapted",
    stages: str | Sequence[str] = EXPERIMENTS["H4"],
    config: TrainConfig | str | Path | None = None,
    seed: int = 0,
    hooks: Hooks = SILENT,
    device: str | torch.device | None = None,
) -> Path:
    """Run ``stages`` on ``base``; returns ``OUT/final``. Inputs default to the bundled corpus.

    Rerunning with the same arguments resumes after the last completed stage.
    """
    names = parse_stages(stages)
    device = resolve_device(device)
    processes = Processes(device)
    device = processes.device(device)
    if not processes.is_main:
        hooks = SILENT
    cfg = config if isinstance(config, TrainConfig) else load_config(config)
    cfg.validate()
    paths = {
        "corpus": bundled(corpus, "docs"), "terms": bundled(terms, "terms"),
        "dictionary": bundled(dictionary, "dictionary"), "train": bundled(train, "train"),
    }
    data = _load_inputs(**paths)  # validate every input before any training or writing
    out = Path(out)
    manifest = {
        "stages": names, "config": cfg.to_dict(), "seed": int(seed), "base": str(base),
        "inputs": {k: _sha256(p) for k, p in paths.items()},
    }
    _check_manifest(out, manifest)
    processes.barrier()  # every process checked the directory as it was before anything is written
    if processes.is_main:
        out.mkdir(parents=True, exist_ok=True)
        if not (out / RUN_FILE).is_file():
            write_json_atomic(out / RUN_FILE, manifest)
    processes.barrier()

    # Resume only from a prefix: a later stage's directory without its predecessors is not ours.
    start = 0
    while start < len(names) and _complete(out / names[start]):
        start += 1
    if start:
        hooks.message(f"resuming: {', '.join(names[:start])} already complete in {out}")
        splade = SpladeEncoder.from_pretrained(out / names[start - 1], device=device)
    else:
        splade = SpladeEncoder.from_pretrained(base, device=device)

    log_path = out / LOG_FILE

    def log(record: dict) -> None:
        if not processes.is_main:
            return
        with log_path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")

    for i in range(start, len(names)):
        name = names[i]
        stage = STAGES[name]()
        ctx = StageContext(data=data, config=cfg, seed=int(seed) + ORDER.index(name), log=log, hooks=hooks,
                           processes=processes)
        partial = _load_partial(out, name, device) if i == start else None
        if partial is not None:
            splade, ctx.resume = partial
            hooks.message(f"resuming {name} at step {ctx.resume['steps']} from {_partial(out, name)}")
        ctx.checkpoint = _checkpointer(out, name, splade, processes)
        log({"event": "stage_start", "stage": name, "time": time.time()})
        t0 = time.perf_counter()
        stage.run(splade, ctx)
        seconds = time.perf_counter() - t0
        if processes.is_main:
            splade.save_pretrained(out / name)
            shutil.rmtree(_partial(out, name), ignore_errors=True)
        processes.barrier()
        log({"event": "stage_end", "stage": name, "seconds": round(seconds, 2), **ctx.info})
        hooks.message(f"stage {name} done in {seconds:.1f}s -> {out / name}")
    final = out / FINAL
    if processes.is_main:
        splade.save_pretrained(final)
    processes.barrier()
    hooks.message(f"wrote {final}")
    return final
