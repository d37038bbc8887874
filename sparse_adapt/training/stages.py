"""The pipeline stages, in order: extend -> warmup -> dictionary -> distill.

Each stage is a class in :data:`STAGES` taking the model from the previous stage and
changing it in place; the MLM stages and distillation differ only in how one batch
becomes losses, the loop itself is ``loop.py``. ``pipeline.py`` runs a selection of them.
"""

from __future__ import annotations

from contextlib import closing
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

from sparse_adapt.data import DictionaryEntry, Document, TrainExample, flat_terms, load_documents
from sparse_adapt.errors import ConfigError
from sparse_adapt.losses import TERMS, DistillationLoss
from sparse_adapt.losses.mlm import mlm_loss
from sparse_adapt.modeling.encoder import SpladeEncoder
from sparse_adapt.modeling.heads import max_pieces
from sparse_adapt.modeling.tokenization import running_text_ids
from sparse_adapt.modeling.vocabulary import domain_token_ids, extend_vocabulary
from sparse_adapt.progress import Hooks, SILENT, counted, signed
from sparse_adapt.training.config import DictionaryConfig, MLMConfig, TrainConfig
from sparse_adapt.training.density import density_sample, density_warning, document_density
from sparse_adapt.training.definitions import definition_examples, negative_ids
from sparse_adapt.training.freezing import stage_weight_decay, trainable_rows
from sparse_adapt.training.distributed import Processes, SingleProcess
from sparse_adapt.training.loop import LoopConfig, StepResult, run_loop, seed_everything, shuffled_batches
from sparse_adapt.training.masking import mask_tokens, occurrences, span_occurrences
from sparse_adapt.training.mlm_data import CorpusTexts, ListTexts, TextSource, WindowedTexts, plan_epoch, token_lengths
from sparse_adapt.training.reference import ReferenceVectors, load_reference
from sparse_adapt.training.template import render_entry
from sparse_adapt.training.validation import EpochSelector, ValidationSet, shared_positives, split_valid


@dataclass
class TrainData:
    """The validated user inputs (loaded once, before any training starts)."""

    corpus: Path  # docs.jsonl, validated; streamed by the warmup stage (held in memory only by ``documents``)
    terms: dict[str, list[str]]
    dictionary: list[DictionaryEntry]
    train: list[TrainExample]
    # --valid FILE: validation queries of the distill stage (else distill.valid_fraction of train).
    valid: list[TrainExample] | None = None

    @cached_property
    def documents(self) -> list[Document]:
        """The corpus in memory, for the distill stage's validation and definition queries only
        (the warmup stage streams it); loaded on first use."""
        return load_documents(self.corpus)


@dataclass
class StageContext:
    data: TrainData
    config: TrainConfig
    seed: int
    log: Callable[[dict], None]
    hooks: Hooks = SILENT
    info: dict = field(default_factory=dict)  # what the stage wants recorded in its stage_end log line
    resume: dict | None = None  # the loop state of an interrupted attempt of this stage
    checkpoint: Callable[[dict], None] | None = None  # saves a mid-stage checkpoint (model + loop state)
    processes: Processes = field(default_factory=SingleProcess)  # the processes of the run (Accelerate)

    # The frozen starting model (name, directory or encoder): preservation targets, selection baseline.
    reference: "str | Path | SpladeEncoder | None" = None
    # Called with every validation record of the distill stage (e.g. a tuner's pruning check).
    on_validation: Callable[[dict], None] | None = None

    def loop_config(self, name: str, section, log_every: int = 0) -> LoopConfig:
        return LoopConfig(
            name, section.epochs, section.batch_size, section.lr,
            stage_weight_decay(section.train_rows, section.weight_decay), section.max_grad_norm,
            log_every, section.grad_accum, section.max_steps, section.checkpoint_every, section.step_cap,
        )


class Stage:
    """One pipeline stage; ``run`` changes ``splade`` in place."""

    name: str = ""

    def run(self, splade: SpladeEncoder, ctx: StageContext) -> None:  # pragma: no cover - interface
        raise NotImplementedError


class ExtendStage(Stage):
    """Add each domain term as a single token (``sparse_adapt.modeling.vocabulary.extend_vocabulary``)."""

    name = "extend"

    def run(self, splade: SpladeEncoder, ctx: StageContext) -> None:
        task = ctx.hooks.task("extend", 1)
        report = extend_vocabulary(splade, ctx.data.terms)
        task.advance()
        ctx.info = {"added": [t.normalized for t in report.added], "vocab_size": report.new_vocab_size}
        ctx.hooks.message(
            f"extend: {len(report.added)} new tokens ({', '.join(t.normalized for t in report.added)}), "
            f"vocabulary {report.old_vocab_size} -> {report.new_vocab_size}"
        )
        for line in report.warnings("--terms"):
            ctx.hooks.message(f"warning: {line}")


def check_lengths(splade: SpladeEncoder, config: TrainConfig, names: Sequence[str], source: str | None = None) -> None:
    """Each MLM stage's ``max_length`` fits the model's position embeddings: else a long text
    fails deep in the model, after the stages before it have trained. ``source``: the config
    file, named first as every other config error names it."""
    limit = max_pieces(splade.mlm)
    for name in names:
        section = getattr(config, name, None)
        if limit is not None and isinstance(section, MLMConfig) and section.max_length > limit:
            raise ConfigError(f"{f'{source}: ' if source else ''}{name}.max_length {section.max_length} is above the "
                              f"{limit} pieces this model has position embeddings for")


class _MLMStage(Stage):
    """Masked-LM training on a list of texts; subclasses choose texts and forced positions."""

    def section(self, ctx: StageContext) -> MLMConfig:
        return getattr(ctx.config, self.name)

    def texts(self, splade: SpladeEncoder, ctx: StageContext) -> TextSource:
        raise NotImplementedError

    def forced(self, splade: SpladeEncoder, ctx: StageContext, input_ids: torch.Tensor, index: Sequence[int]) -> torch.Tensor | None:
        """(B, L) bool positions always masked, or None."""
        return None

    def lengths(self, source: TextSource, tokenizer, cfg: MLMConfig, ctx: StageContext) -> np.ndarray:
        """(T,) pieces of each training text as the batches will hold it."""
        return token_lengths(tokenizer, source, cfg.max_length)

    def run(self, splade: SpladeEncoder, ctx: StageContext) -> None:
        cfg = self.section(ctx)
        check_lengths(splade, ctx.config, [self.name])
        gen = seed_everything(ctx.seed)
        # closes the corpus file warmup reads: benchmark, tune and report run many stages in one process
        with closing(self.texts(splade, ctx)) as source:
            self._train(splade, ctx, cfg, gen, source)

    def _train(self, splade: SpladeEncoder, ctx: StageContext, cfg: MLMConfig, gen: torch.Generator,
               source: TextSource) -> None:
        tok = splade.tokenizer
        if tok.mask_token_id is None:
            raise ConfigError(f"{self.name}: the tokenizer of this model has no [MASK] token; MLM stages need one")
        lengths = self.lengths(source, tok, cfg, ctx)  # (T,): the only per-text memory
        special = torch.tensor(tok.all_special_ids)

        def step(idx: Sequence[int], step_number: int) -> StepResult | None:
            enc = tok([source.text(i) for i in idx], padding=True, padding_side="right", truncation=True,
                      max_length=cfg.max_length, return_tensors="pt")
            ids, att = enc["input_ids"], enc["attention_mask"]  # (B, L), L = the batch's longest text
            maskable = (att == 1) & ~torch.isin(ids, special)  # (B, L)
            inputs, labels = mask_tokens(
                ids, maskable, rate=cfg.mask_rate, mask_token_id=tok.mask_token_id,
                vocab_size=len(tok), generator=gen, always=self.forced(splade, ctx, ids, idx),
            )
            if not (labels != -100).any():  # nothing picked (tiny texts, low rate): skip, no NaN
                return None
            dev = splade.device
            return StepResult({"loss": mlm_loss(splade.mlm, inputs.to(dev), att.to(dev), labels.to(dev))}, int(att.sum()))

        def plan(generator: torch.Generator) -> list[list[int]]:
            return plan_epoch(lengths, cfg.batch_size, cfg.batch_tokens, cfg.bucket_window, generator)

        with trainable_rows(splade.mlm, cfg.train_rows, domain_token_ids(splade, ctx.data.terms)):
            result = run_loop(splade, plan, ctx.loop_config(self.name, cfg), step, gen, ctx.log, ctx.hooks,
                              resume=ctx.resume, checkpoint=ctx.checkpoint, processes=ctx.processes)
        final = result.epoch_means[-1]["loss"] if result.epoch_means else None
        ctx.info = {"epochs": cfg.epochs, "steps": result.steps, "final_epoch_loss": final, "tokens": result.tokens}


class WarmupStage(_MLMStage):
    """MLM on the domain corpus; with ``domain_focused`` every domain token is also masked."""

    name = "warmup"

    def texts(self, splade: SpladeEncoder, ctx: StageContext) -> TextSource:
        self._domain = domain_token_ids(splade, ctx.data.terms)
        documents = CorpusTexts(ctx.data.corpus, validate=False)  # validated when the inputs were loaded
        # A document longer than max_length trains as several windows, not as its first window alone.
        windows = WindowedTexts(documents, splade.tokenizer, ctx.config.warmup.max_length)
        if len(windows) > len(documents):
            ctx.hooks.message(f"warmup: {counted(len(documents), 'document')} -> {len(windows)} windows of <= "
                              f"{ctx.config.warmup.max_length} pieces (longer documents are cut between words)")
        if windows.truncated:
            ctx.hooks.message(f"warmup: the tokenizer gives no offsets, so {counted(windows.truncated, 'document')} longer than "
                              f"{ctx.config.warmup.max_length} pieces {'trains' if windows.truncated == 1 else 'train'} on their first "
                              f"{ctx.config.warmup.max_length} only")
        return windows

    def lengths(self, source, tokenizer, cfg, ctx):
        return source.lengths

    def forced(self, splade, ctx, input_ids, index):
        if not ctx.config.warmup.domain_focused:
            return None
        return occurrences(input_ids, self._domain)


class DictionaryStage(_MLMStage):
    """MLM on rendered dictionary entries with every occurrence of the entry's term masked."""

    name = "dictionary"

    def texts(self, splade: SpladeEncoder, ctx: StageContext) -> TextSource:
        cfg: DictionaryConfig = ctx.config.dictionary
        tok = splade.tokenizer
        # Where it opens the entry and where it recurs inside it: other pieces for byte-level BPE.
        self._spans = [{tuple(tok(e.term, add_special_tokens=False)["input_ids"]), tuple(running_text_ids(tok, e.term))}
                       for e in ctx.data.dictionary]
        self._domain = domain_token_ids(splade, ctx.data.terms)
        return ListTexts([render_entry(e, cfg.template) for e in ctx.data.dictionary])

    def forced(self, splade, ctx, input_ids, index):
        out = torch.zeros_like(input_ids, dtype=torch.bool)
        for row, i in enumerate(index):
            for span in self._spans[i]:
                out[row] |= span_occurrences(input_ids[row : row + 1], list(span))[0]
        if ctx.config.dictionary.domain_focused:
            out |= occurrences(input_ids, self._domain)
        return out


class DistillStage(Stage):
    """Seven-term distillation from the teacher's scored candidate lists (``train.jsonl``),
    with per-epoch validation and best-epoch selection when a validation set is given."""

    name = "distill"

    def run(self, splade: SpladeEncoder, ctx: StageContext) -> None:
        cfg = ctx.config.distill
        gen = seed_everything(ctx.seed)
        terms = flat_terms(ctx.data.terms)
        examples, valid = ctx.data.train, ctx.data.valid
        if valid is None and cfg.valid_fraction > 0:
            examples, valid = split_valid(examples, cfg.valid_fraction, ctx.seed, terms)
            shared = shared_positives(examples, valid)
            ctx.hooks.message(f"distill: {len(valid)} of {len(ctx.data.train)} training queries held out for validation"
                              + (f" ({shared} of them share a positive document with a training query: the split is "
                                 "by query, so the objective partly rewards remembering those documents)" if shared else ""))
        if not examples:
            raise ConfigError("distill: no training query left after holding out the validation queries")
        extra = []
        resumed = (ctx.resume or {}).get("extra", {})  # the stage's own state in a mid-stage checkpoint
        if cfg.definition_negatives > 0:
            extra = definition_examples(ctx.data.dictionary, ctx.data.documents, terms, splade, cfg.definition_negatives,
                                        resumed.get("definition_negatives"))
            examples = [*examples, *extra]
            ctx.hooks.message(f"distill: {len(extra)} definition queries added ({cfg.definition_negatives} hard negatives each)")
        domain = domain_token_ids(splade, ctx.data.terms)
        ctx.hooks.message(f"distill: {len(domain)} domain token ids in D: {' '.join(splade.tokenizer.convert_ids_to_tokens(domain))}")
        ref_vectors, selector = None, None
        if cfg.pres > 0 or valid:
            if ctx.reference is None:
                raise ConfigError("distill: knowledge preservation and validation need the reference (starting) model")
            reference = load_reference(ctx.reference, splade.device)
            if cfg.pres > 0:
                ref_vectors = ReferenceVectors.encode(reference, examples, terms, domain)
            if valid:
                vset = ValidationSet.build(valid, ctx.data.documents, terms)
                if not vset.kinds["control"] and cfg.control_penalty > 0:  # a training file with one control query
                    ctx.hooks.message("warning: distill: no validation query is a control (one naming no domain "
                                      "term), so distill.control_penalty has no effect on the epoch chosen; give "
                                      "--valid FILE with control queries to guard general retrieval")
                selector = EpochSelector(
                    splade, vset, vset.measure(reference), control_penalty=cfg.control_penalty, patience=cfg.patience,
                    log=ctx.log, message=ctx.hooks.message, on_record=ctx.on_validation,
                    resume=resumed.get("selector"),
                )
            del reference  # only its outputs are needed from here on
        loss_fn = DistillationLoss(
            kd=cfg.kd, ret=cfg.ret, sp=cfg.sp, dom=cfg.dom, ctr=cfg.ctr, qexp=cfg.qexp, temperature=cfg.temperature,
            tau_min=cfg.tau_min, margin=cfg.margin, sp_warmup_steps=cfg.sp_warmup_steps, pres=cfg.pres,
            pres_form=cfg.pres_form,
        )

        def step(idx: Sequence[int], step_number: int) -> StepResult:
            terms, tokens = self._step(splade, [examples[i] for i in idx], loss_fn, domain, step_number, ref_vectors)
            return StepResult({"loss": terms["total"], **{k: terms[k] for k in TERMS}}, tokens)

        sample = density_sample(examples)
        # A resumed stage counts from its first attempt's model, not the half-trained one.
        before = resumed.get("density_before")
        density = {"before": before if before is not None else document_density(splade, sample)}
        with trainable_rows(splade.mlm, cfg.train_rows, domain):
            result = run_loop(
                splade, shuffled_batches(len(examples), cfg.batch_size), ctx.loop_config(self.name, cfg, cfg.log_every),
                step, gen, ctx.log, ctx.hooks, step_line=format_step, resume=ctx.resume, checkpoint=ctx.checkpoint,
                processes=ctx.processes, on_epoch_end=selector.epoch_end if selector is not None else None,
                extra_state=lambda: {"density_before": density["before"], "definition_negatives": negative_ids(extra),
                                     **({"selector": selector.state_dict()} if selector is not None else {})},
            )
        last = {("total" if k == "loss" else k): v for k, v in result.last.items()}
        ctx.info = {"epochs": cfg.epochs, "steps": result.steps, "last": last, "domain_ids": domain,
                    "definition_queries": [ex.qid for ex in extra]}
        if selector is not None:
            sel = selector.restore()
            ctx.info.update(
                epochs_run=len(selector.records), best_epoch=sel.best_epoch, best_objective=sel.best_objective,
                valid_queries=[ex.qid for ex in valid],
            )
            ctx.hooks.message(f"distill: kept epoch {sel.best_epoch} of {len(selector.records)} (objective {signed(sel.best_objective, 4)})")
        density["after"] = document_density(splade, sample)
        ctx.info["doc_terms"] = {k: round(v, 1) for k, v in density.items()}
        ctx.hooks.message(f"distill: documents activate {density['after']:.0f} terms on average ({density['before']:.0f} before)")
        warning = density_warning(density["before"], density["after"], cfg.tau_min, cfg.pres_form)
        if warning:
            ctx.hooks.message(warning)

    @staticmethod
    def _step(
        splade: SpladeEncoder, batch: Sequence[TrainExample], loss_fn: DistillationLoss, domain, step: int,
        ref_vectors: ReferenceVectors | None = None,
    ):
        doc_texts, index, teacher = collate_candidates(batch)
        mask = index >= 0
        q = splade.tokenize([ex.query for ex in batch], "query")
        d = splade.tokenize(doc_texts, "document")
        q_w = splade(q["input_ids"], q["attention_mask"])  # (B, V)
        d_w = splade(d["input_ids"], d["attention_mask"])  # (U, V)
        dev = q_w.device
        tokens = int(q["attention_mask"].sum() + d["attention_mask"].sum())
        ref = {}
        if ref_vectors is not None:
            ref = {"ref_query_weights": ref_vectors.queries([ex.query for ex in batch], dev),
                   "ref_doc_weights": ref_vectors.documents(doc_texts, dev), "free_ids": ref_vectors.free_ids}
        return loss_fn(
            query_weights=q_w, query_input_ids=q["input_ids"], doc_weights=d_w, doc_input_ids=d["input_ids"],
            doc_index=index.to(dev), teacher=teacher.to(dev), mask=mask.to(dev), domain_ids=domain, step=step, **ref,
        ), tokens


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
    """The spec's console line: ``Step 50 | Loss ... | KD ... | Ret ... | Sp ... | Dom ... | Ctr ... | QExp ... | Pres ...``."""
    names = {"kd": "KD", "ret": "Ret", "sp": "Sp", "dom": "Dom", "ctr": "Ctr", "qexp": "QExp", "pres": "Pres"}
    return f"Step {step} | Loss {terms['loss']:.4f} | " + " | ".join(f"{names[k]} {terms[k]:.4f}" for k in TERMS)


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


