"""The staged adaptation pipeline: extend -> warmup -> dictionary -> distill.

Each stage is a class in :data:`STAGES` taking the model from the previous stage and
changing it in place. :func:`run_pipeline` runs a selection of them, saving a loadable
checkpoint to ``OUT/<stage>/`` after each (atomically: the directory appears only when
complete), so rerunning the same command resumes after the last completed stage. The
result is copied to ``OUT/final``. ``OUT/run.json`` records what the run is (stages,
config, seed, base, input file hashes); a rerun that differs is refused instead of mixing
checkpoints of two different runs. Every optimiser step goes to ``OUT/train_log.jsonl``.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from sparse_adapt.config import DictionaryConfig, MLMConfig, TrainConfig, load_config
from sparse_adapt.data import (
    DictionaryEntry, Document, TrainExample, load_dictionary, load_documents, load_domain_terms, load_train,
)
from sparse_adapt.errors import ConfigError, SparseAdaptError
from sparse_adapt.losses import TERMS, DistillationLoss
from sparse_adapt.masking import mask_tokens, occurrences, span_occurrences
from sparse_adapt.model import SpladeEncoder
from sparse_adapt.training_utils import mlm_loss
from sparse_adapt.vocabulary import extend_vocabulary

RUN_FILE = "run.json"
LOG_FILE = "train_log.jsonl"
FINAL = "final"


class RunMismatchError(SparseAdaptError):
    """``--out`` already holds a different run (other stages, config, seed or inputs)."""


# ---------------------------------------------------------------------------- context
@dataclass
class TrainData:
    """The validated user inputs (loaded once, before any training starts)."""

    documents: list[Document]
    terms: dict[str, list[str]]
    dictionary: list[DictionaryEntry]
    train: list[TrainExample]


@dataclass
class StageContext:
    data: TrainData
    config: TrainConfig
    seed: int
    log: Callable[[dict], None]
    progress: Progress
    console: Console
    info: dict = field(default_factory=dict)  # what the stage wants recorded in its stage_end log line


def seed_everything(seed: int) -> torch.Generator:
    """Seed python, numpy and torch; return a torch generator for data order and masking."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def domain_ids_for(splade: SpladeEncoder, terms: dict[str, list[str]]) -> list[int]:
    """``D`` for the domain losses and domain-focused masking.

    The model's recorded domain ids when it has any (after ``extend``). Otherwise (e.g. H1,
    ``--stages distill`` on a plain base) the terms that already are single tokens of the
    base vocabulary (``api``, ``ssl``...): the same ids ``extend`` would record for them,
    without changing the model. Multi-piece terms (``gatrocraptic``) then have no token
    and no domain loss can target them; that is the point of the H1 baseline.
    """
    if splade.settings.domain_token_ids:
        return list(splade.settings.domain_token_ids)
    tok = splade.tokenizer
    ids = set()
    for items in terms.values():
        for term in items:
            pieces = tok(term, add_special_tokens=False)["input_ids"]
            if len(pieces) == 1 and pieces[0] != tok.unk_token_id:
                ids.add(pieces[0])
    return sorted(ids)


def _optimizer(splade: SpladeEncoder, lr: float, weight_decay: float) -> torch.optim.Optimizer:
    # No decay on biases and LayerNorm weights (standard BERT fine-tuning practice).
    decay, no_decay = [], []
    for name, p in splade.mlm.named_parameters():
        if p.requires_grad:
            (no_decay if p.ndim < 2 else decay).append(p)
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}], lr=lr
    )


def _linear_schedule(opt: torch.optim.Optimizer, total: int, warmup_frac: float = 0.1):
    """Linear warm-up over the first 10% of steps, then linear decay to 0 (BERT schedule)."""
    warm = max(1, int(total * warmup_frac))

    def factor(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        return max(0.0, (total - step) / max(1, total - warm))

    return torch.optim.lr_scheduler.LambdaLR(opt, factor)


# ---------------------------------------------------------------------------- stages
class Stage:
    """One pipeline stage; ``run`` changes ``splade`` in place."""

    name: str = ""

    def run(self, splade: SpladeEncoder, ctx: StageContext) -> None:  # pragma: no cover - interface
        raise NotImplementedError


class ExtendStage(Stage):
    """Add each domain term as a single token (``sparse_adapt.vocabulary.extend_vocabulary``)."""

    name = "extend"

    def run(self, splade: SpladeEncoder, ctx: StageContext) -> None:
        task = ctx.progress.add_task("extend", total=1)
        report = extend_vocabulary(splade, ctx.data.terms)
        ctx.progress.update(task, advance=1)
        ctx.info = {"added": [t.normalized for t in report.added], "vocab_size": report.new_vocab_size}
        ctx.console.print(
            f"extend: {len(report.added)} new tokens ({', '.join(t.normalized for t in report.added)}), "
            f"vocabulary {report.old_vocab_size} -> {report.new_vocab_size}"
        )


class _MLMStage(Stage):
    """Masked-LM training on a list of texts; subclasses choose texts and forced positions."""

    def section(self, ctx: StageContext) -> MLMConfig:
        return getattr(ctx.config, self.name)

    def texts(self, splade: SpladeEncoder, ctx: StageContext) -> list[str]:
        raise NotImplementedError

    def forced(self, splade: SpladeEncoder, ctx: StageContext, input_ids: torch.Tensor, index: Sequence[int]) -> torch.Tensor | None:
        """(B, L) bool positions always masked, or None."""
        return None

    def run(self, splade: SpladeEncoder, ctx: StageContext) -> None:
        cfg = self.section(ctx)
        gen = seed_everything(ctx.seed)
        texts = self.texts(splade, ctx)
        tok = splade.tokenizer
        if tok.mask_token_id is None:
            raise ConfigError(f"{self.name}: the tokenizer of this model has no [MASK] token; MLM stages need one")
        enc = tok(texts, padding=True, truncation=True, max_length=cfg.max_length, return_tensors="pt")
        all_ids, all_att = enc["input_ids"], enc["attention_mask"]  # (T, L)
        special = torch.tensor(tok.all_special_ids)
        maskable_all = (all_att == 1) & ~torch.isin(all_ids, special)  # (T, L)
        n_batches = (len(texts) + cfg.batch_size - 1) // cfg.batch_size
        total = cfg.epochs * n_batches
        opt = _optimizer(splade, cfg.lr, cfg.weight_decay)
        sched = _linear_schedule(opt, max(1, total))
        task = ctx.progress.add_task(self.name, total=total)
        splade.train()
        step, losses = 0, []
        for epoch in range(cfg.epochs):
            order = torch.randperm(len(texts), generator=gen).tolist()
            epoch_losses = []
            for b in range(n_batches):
                idx = order[b * cfg.batch_size : (b + 1) * cfg.batch_size]
                att = all_att[idx]
                width = int(att.sum(1).max())  # trim the batch to its longest text
                ids, att, maskable = all_ids[idx, :width], att[:, :width], maskable_all[idx, :width]
                inputs, labels = mask_tokens(
                    ids, maskable, rate=cfg.mask_rate, mask_token_id=tok.mask_token_id,
                    vocab_size=len(tok), generator=gen, always=self.forced(splade, ctx, ids, idx),
                )
                if not (labels != -100).any():  # nothing picked (tiny texts, low rate): skip, no NaN
                    ctx.progress.update(task, advance=1)
                    continue
                loss_t = mlm_loss(splade.mlm, inputs.to(splade.device), att.to(splade.device), labels.to(splade.device))
                opt.zero_grad(set_to_none=True)
                loss_t.backward()
                torch.nn.utils.clip_grad_norm_(splade.mlm.parameters(), cfg.max_grad_norm)
                opt.step()
                sched.step()
                step += 1
                loss = float(loss_t.detach())
                epoch_losses.append(loss)
                ctx.log({"stage": self.name, "epoch": epoch + 1, "step": step, "mlm": loss, "lr": sched.get_last_lr()[0]})
                ctx.progress.update(task, advance=1, description=f"{self.name} epoch {epoch + 1}/{cfg.epochs} mlm {loss:.3f}")
            if epoch_losses:
                losses.append(sum(epoch_losses) / len(epoch_losses))
                ctx.console.print(f"{self.name}: epoch {epoch + 1}/{cfg.epochs} done. Avg MLM loss: {losses[-1]:.4f}")
        splade.eval()
        ctx.info = {"epochs": cfg.epochs, "steps": step, "final_epoch_loss": losses[-1] if losses else None}


class WarmupStage(_MLMStage):
    """MLM on the domain corpus; with ``domain_focused`` every domain token is also masked."""

    name = "warmup"

    def texts(self, splade: SpladeEncoder, ctx: StageContext) -> list[str]:
        self._domain = domain_ids_for(splade, ctx.data.terms)
        return [d.text for d in ctx.data.documents]

    def forced(self, splade, ctx, input_ids, index):
        if not ctx.config.warmup.domain_focused:
            return None
        return occurrences(input_ids, self._domain)


def render_entry(entry: DictionaryEntry, template: str) -> str:
    """The spec's "TERM is defined as DEFINITION. TERM is used in contexts such as EXAMPLES." """
    return template.format(term=entry.term, definition=entry.definition, examples="; ".join(entry.examples))


class DictionaryStage(_MLMStage):
    """MLM on rendered dictionary entries with every occurrence of the entry's term masked."""

    name = "dictionary"

    def texts(self, splade: SpladeEncoder, ctx: StageContext) -> list[str]:
        cfg: DictionaryConfig = ctx.config.dictionary
        tok = splade.tokenizer
        self._spans = [tok(e.term, add_special_tokens=False)["input_ids"] for e in ctx.data.dictionary]
        self._domain = domain_ids_for(splade, ctx.data.terms)
        return [render_entry(e, cfg.template) for e in ctx.data.dictionary]

    def forced(self, splade, ctx, input_ids, index):
        out = torch.zeros_like(input_ids, dtype=torch.bool)
        for row, i in enumerate(index):
            out[row] = span_occurrences(input_ids[row : row + 1], self._spans[i])[0]
        if ctx.config.dictionary.domain_focused:
            out |= occurrences(input_ids, self._domain)
        return out


class DistillStage(Stage):
    """Six-term distillation from the teacher's scored candidate lists (``train.jsonl``)."""

    name = "distill"

    def run(self, splade: SpladeEncoder, ctx: StageContext) -> None:
        cfg = ctx.config.distill
        gen = seed_everything(ctx.seed)
        examples = ctx.data.train
        domain = domain_ids_for(splade, ctx.data.terms)
        ctx.console.print(f"distill: {len(domain)} domain token ids in D: {' '.join(splade.tokenizer.convert_ids_to_tokens(domain))}")
        loss_fn = DistillationLoss(
            kd=cfg.kd, ret=cfg.ret, sp=cfg.sp, dom=cfg.dom, ctr=cfg.ctr, qexp=cfg.qexp, temperature=cfg.temperature,
            tau_min=cfg.tau_min, margin=cfg.margin, sp_warmup_steps=cfg.sp_warmup_steps,
        )
        n_batches = (len(examples) + cfg.batch_size - 1) // cfg.batch_size
        total = cfg.epochs * n_batches
        opt = _optimizer(splade, cfg.lr, cfg.weight_decay)
        sched = _linear_schedule(opt, max(1, total))
        task = ctx.progress.add_task("distill", total=total)
        splade.train()
        step, last = 0, {}
        for epoch in range(cfg.epochs):
            order = torch.randperm(len(examples), generator=gen).tolist()
            sums = {k: 0.0 for k in ("total", *TERMS)}
            for b in range(n_batches):
                batch = [examples[i] for i in order[b * cfg.batch_size : (b + 1) * cfg.batch_size]]
                step += 1
                terms = self._step(splade, batch, loss_fn, domain, step)
                opt.zero_grad(set_to_none=True)
                terms["total"].backward()
                torch.nn.utils.clip_grad_norm_(splade.mlm.parameters(), cfg.max_grad_norm)
                opt.step()
                sched.step()
                last = {k: float(v.detach()) for k, v in terms.items()}
                for k in sums:
                    sums[k] += last[k]
                ctx.log({"stage": self.name, "epoch": epoch + 1, "step": step, "loss": last["total"],
                         **{k: last[k] for k in TERMS}, "lr": sched.get_last_lr()[0]})
                ctx.progress.update(task, advance=1, description=f"distill epoch {epoch + 1}/{cfg.epochs} loss {last['total']:.3f}")
                if step % cfg.log_every == 0:
                    ctx.console.print(format_step(step, last), soft_wrap=True)
            ctx.console.print(f"distill: epoch {epoch + 1}/{cfg.epochs} done. Avg loss: {sums['total'] / n_batches:.4f}")
        splade.eval()
        ctx.info = {"epochs": cfg.epochs, "steps": step, "last": last, "domain_ids": domain}

    @staticmethod
    def _step(splade: SpladeEncoder, batch: Sequence[TrainExample], loss_fn: DistillationLoss, domain, step: int):
        doc_texts, index, teacher = collate_candidates(batch)
        mask = index >= 0
        q = splade.tokenize([ex.query for ex in batch], "query")
        d = splade.tokenize(doc_texts, "document")
        q_w = splade(q["input_ids"], q["attention_mask"])  # (B, V)
        d_w = splade(d["input_ids"], d["attention_mask"])  # (U, V)
        dev = q_w.device
        return loss_fn(
            query_weights=q_w, query_input_ids=q["input_ids"], doc_weights=d_w, doc_input_ids=d["input_ids"],
            doc_index=index.to(dev), teacher=teacher.to(dev), mask=mask.to(dev), domain_ids=domain, step=step,
        )


def collate_candidates(batch: Sequence[TrainExample]) -> tuple[list[str], torch.Tensor, torch.Tensor]:
    """Unique candidate texts of a batch (each encoded once), the (B, N) index of every
    query's candidates into them (-1 pads shorter lists) and the (B, N) teacher scores."""
    doc_rows: dict[str, int] = {}
    doc_texts: list[str] = []
    for ex in batch:
        for did, text in zip(ex.doc_ids, ex.doc_texts):
            if did not in doc_rows:
                doc_rows[did] = len(doc_texts)
                doc_texts.append(text)
    width = max(len(ex.doc_ids) for ex in batch)
    index = torch.full((len(batch), width), -1, dtype=torch.long)  # (B, N)
    teacher = torch.zeros((len(batch), width))  # (B, N)
    for r, ex in enumerate(batch):
        index[r, : len(ex.doc_ids)] = torch.tensor([doc_rows[d] for d in ex.doc_ids])
        teacher[r, : len(ex.doc_ids)] = torch.tensor(ex.teacher_scores)
    return doc_texts, index, teacher


def format_step(step: int, terms: dict[str, float]) -> str:
    """The spec's console line: ``Step 50 | Loss ... | KD ... | Ret ... | Sp ... | Dom ... | Ctr ... | QExp ...``."""
    names = {"kd": "KD", "ret": "Ret", "sp": "Sp", "dom": "Dom", "ctr": "Ctr", "qexp": "QExp"}
    return f"Step {step} | Loss {terms['total']:.4f} | " + " | ".join(f"{names[k]} {terms[k]:.4f}" for k in TERMS)


STAGES: dict[str, type[Stage]] = {
    "extend": ExtendStage,
    "warmup": WarmupStage,
    "dictionary": DictionaryStage,
    "distill": DistillStage,
}
ORDER = tuple(STAGES)

# The spec's four experiments as stage selections (``--stages``).
EXPERIMENTS: dict[str, tuple[str, ...]] = {
    "H1": ("distill",),
    "H2": ("extend", "distill"),
    "H3": ("extend", "warmup", "distill"),
    "H4": ("extend", "warmup", "dictionary", "distill"),
}


def parse_stages(stages: str | Sequence[str]) -> list[str]:
    """``"extend,warmup"`` or a list -> validated names, in pipeline order, without repeats."""
    names = [s.strip() for s in stages.split(",")] if isinstance(stages, str) else [str(s).strip() for s in stages]
    names = [n for n in names if n]
    if not names:
        raise ConfigError(f"--stages is empty; valid stages: {', '.join(ORDER)}")
    for n in names:
        if n not in STAGES:
            raise ConfigError(f"unknown stage {n!r}; valid stages: {', '.join(ORDER)}")
    if len(set(names)) != len(names):
        raise ConfigError(f"--stages lists a stage twice: {','.join(names)}")
    if names != sorted(names, key=ORDER.index):
        raise ConfigError(f"--stages must follow the pipeline order {','.join(ORDER)}; got {','.join(names)}")
    return names


# ---------------------------------------------------------------------------- pipeline
def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _load_inputs(corpus: Path, terms: Path, dictionary: Path, train: Path) -> TrainData:
    return TrainData(
        documents=load_documents(corpus), terms=load_domain_terms(terms),
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


def _write_json_atomic(path: Path, obj: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(path)


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
    console: Console | None = None,
) -> Path:
    """Run ``stages`` on ``base``; returns ``OUT/final``. Inputs default to the bundled corpus.

    Rerunning with the same arguments resumes after the last completed stage.
    """
    from corpora import GATROCRAPTIC

    console = console or Console()
    names = parse_stages(stages)
    cfg = config if isinstance(config, TrainConfig) else load_config(config)
    cfg.validate()
    paths = {
        "corpus": Path(corpus or GATROCRAPTIC.docs), "terms": Path(terms or GATROCRAPTIC.terms),
        "dictionary": Path(dictionary or GATROCRAPTIC.dictionary), "train": Path(train or GATROCRAPTIC.train),
    }
    data = _load_inputs(**paths)  # validate every input before any training or writing
    out = Path(out)
    manifest = {
        "stages": names, "config": cfg.to_dict(), "seed": int(seed), "base": str(base),
        "inputs": {k: _sha256(p) for k, p in paths.items()},
    }
    _check_manifest(out, manifest)
    out.mkdir(parents=True, exist_ok=True)
    if not (out / RUN_FILE).is_file():
        _write_json_atomic(out / RUN_FILE, manifest)

    # Resume only from a prefix: a later stage's directory without its predecessors is not ours.
    start = 0
    while start < len(names) and _complete(out / names[start]):
        start += 1
    if start:
        console.print(f"resuming: {', '.join(names[:start])} already complete in {out}")
        splade = SpladeEncoder.from_pretrained(out / names[start - 1])
    else:
        splade = SpladeEncoder.from_pretrained(base)

    log_path = out / LOG_FILE

    def log(record: dict) -> None:
        with log_path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        for i in range(start, len(names)):
            name = names[i]
            stage = STAGES[name]()
            ctx = StageContext(data=data, config=cfg, seed=int(seed) + ORDER.index(name), log=log,
                               progress=progress, console=progress.console)
            log({"event": "stage_start", "stage": name, "time": time.time()})
            t0 = time.perf_counter()
            stage.run(splade, ctx)
            seconds = time.perf_counter() - t0
            splade.save_pretrained(out / name)
            log({"event": "stage_end", "stage": name, "seconds": round(seconds, 2), **ctx.info})
            progress.console.print(f"[green]stage {name} done[/green] in {seconds:.1f}s -> {out / name}")
    final = out / FINAL
    splade.save_pretrained(final)
    console.print(f"[green]wrote[/green] {final}")
    return final
