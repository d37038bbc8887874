"""The staged pipeline: run a selection of stages with resumable checkpoints.

:func:`run_pipeline` runs the chosen stages (``stages.py``), saving a loadable
checkpoint to ``OUT/<stage>/`` after each (atomically: the directory appears only when
complete), so rerunning the same command resumes after the last completed stage. The
result is copied to ``OUT/final``. ``OUT/run.json`` records what the run is (stages,
the config sections of those stages, seed, base, input file hashes); a rerun that differs is refused instead of mixing
checkpoints of two different runs. Every optimiser step goes to ``OUT/train_log.jsonl``.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Sequence

from sparse_adapt.atomic import write_json_atomic
from sparse_adapt.data import load_dictionary, load_documents, load_domain_terms, load_train
from sparse_adapt.defaults import bundled
from sparse_adapt.errors import SparseAdaptError
from sparse_adapt.modeling.encoder import SpladeEncoder
from sparse_adapt.progress import SILENT, Hooks
from sparse_adapt.training.config import TrainConfig, load_config
from sparse_adapt.training.stages import EXPERIMENTS, ORDER, STAGES, StageContext, TrainData, parse_stages

RUN_FILE = "run.json"
LOG_FILE = "train_log.jsonl"
FINAL = "final"


class RunMismatchError(SparseAdaptError):
    """``--out`` already holds a different run (other stages, config, seed or inputs)."""


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _load_inputs(corpus: Path, terms: Path, dictionary: Path, train: Path, valid: Path | None = None) -> TrainData:
    return TrainData(
        documents=load_documents(corpus), terms=load_domain_terms(terms),
        dictionary=load_dictionary(dictionary), train=load_train(train),
        valid=load_train(valid) if valid is not None else None,
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
    valid: str | Path | None = None,
    reference: str | Path | None = None,
) -> Path:
    """Run ``stages`` on ``base``; returns ``OUT/final``. Inputs default to the bundled corpus.

    ``valid``: validation queries of the distill stage (train.jsonl format; else
    ``distill.valid_fraction`` of ``train``). ``reference``: the frozen model that knowledge
    preservation and validation compare with (default ``base``; give the original base when
    ``base`` is a checkpoint of an earlier run, e.g. to rerun only distill).
    Rerunning with the same arguments resumes after the last completed stage.
    """
    names = parse_stages(stages)
    cfg = config if isinstance(config, TrainConfig) else load_config(config)
    cfg.validate()
    paths = {
        "corpus": bundled(corpus, "docs"), "terms": bundled(terms, "terms"),
        "dictionary": bundled(dictionary, "dictionary"), "train": bundled(train, "train"),
    }
    if valid is not None:
        paths["valid"] = Path(valid)
    data = _load_inputs(**paths)  # validate every input before any training or writing
    out = Path(out)
    reference = base if reference is None else reference
    # Only the settings of the stages this run has: changing distill settings does not
    # invalidate a run of the MLM stages (the benchmark and tune share such a prefix).
    settings = {k: v for k, v in cfg.to_dict().items() if k in names}
    manifest = {
        "stages": names, "config": settings, "seed": int(seed), "base": str(base),
        "inputs": {k: _sha256(p) for k, p in paths.items()},
    }
    if str(reference) != str(base):  # only then: manifests of earlier runs stay valid
        manifest["reference"] = str(reference)
    _check_manifest(out, manifest)
    out.mkdir(parents=True, exist_ok=True)
    if not (out / RUN_FILE).is_file():
        write_json_atomic(out / RUN_FILE, manifest)

    # Resume only from a prefix: a later stage's directory without its predecessors is not ours.
    start = 0
    while start < len(names) and _complete(out / names[start]):
        start += 1
    if start:
        hooks.message(f"resuming: {', '.join(names[:start])} already complete in {out}")
        splade = SpladeEncoder.from_pretrained(out / names[start - 1])
    else:
        splade = SpladeEncoder.from_pretrained(base)

    log_path = out / LOG_FILE

    def log(record: dict) -> None:
        with log_path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")

    for i in range(start, len(names)):
        name = names[i]
        stage = STAGES[name]()
        ctx = StageContext(
            data=data, config=cfg, seed=int(seed) + ORDER.index(name), log=log, hooks=hooks, reference=reference,
        )
        log({"event": "stage_start", "stage": name, "time": time.time()})
        t0 = time.perf_counter()
        stage.run(splade, ctx)
        seconds = time.perf_counter() - t0
        splade.save_pretrained(out / name)
        log({"event": "stage_end", "stage": name, "seconds": round(seconds, 2), **ctx.info})
        hooks.message(f"stage {name} done in {seconds:.1f}s -> {out / name}")
    final = out / FINAL
    splade.save_pretrained(final)
    hooks.message(f"wrote {final}")
    return final
