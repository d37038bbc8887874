"""Typed training configuration: one dataclass per stage plus the top-level ``TrainConfig``.

A config file (``--config FILE``, JSON or TOML, read by ``config_files.py``) holds only the
values to override, by stage section, e.g. ``{"distill": {"epochs": 20, "lr": 3e-5}, "warmup": {"domain_focused": false}}``.
Unknown sections or keys and values of the wrong type or range raise :class:`ConfigError`
naming the file and the dotted key. Defaults are tuned on the bundled Gatrocraptic corpus
(``distill.pres`` and ``pres_form`` on the dev domains: their comments)
with the offline MiniLM base so that the full H4 run takes minutes on 2 CPU cores.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from sparse_adapt.errors import ConfigError
from sparse_adapt.training.template import check_template


@dataclass
class MLMConfig:
    """Masked-LM training shared by the warmup and dictionary stages."""

    epochs: int = 10
    lr: float = 5e-5
    # Texts per batch (grad_accum batches make one optimiser step). Small corpora: small batches give
    # more updates per epoch.
    batch_size: int = 8
    # BERT's 15%: enough signal per text without destroying the context the prediction needs.
    mask_rate: float = 0.15
    # MOSAIC-style: additionally mask every occurrence of a domain token, so each step asks
    # the model to predict the new terms from context (see sparse_adapt.training.masking).
    domain_focused: bool = True
    weight_decay: float = 0.01
    # Clip the global gradient norm: new rows start far from equilibrium and spike early.
    max_grad_norm: float = 1.0
    # Pieces per training text; the bundled documents and dictionary entries are < 80 pieces.
    # Warmup cuts a longer document into windows of this size (mlm_data.WindowedTexts), so
    # all of it is trained on; a dictionary entry is truncated.
    max_length: int = 128
    # Padded tokens per batch (longest text x texts) with length bucketing; 0: batch_size texts
    # per batch. A budget evens out the work of steps on corpora of mixed lengths.
    batch_tokens: int = 0
    # Texts sorted by length together when batch_tokens > 0: large enough that batches of
    # similar lengths form, small enough that each epoch's order stays well mixed.
    bucket_window: int = 4096
    grad_accum: int = 1  # micro-batches per optimiser step (a larger batch in the same memory)
    max_steps: int = 0  # optimiser steps of the stage; 0: epochs decide
    step_cap: int = 0  # at most this many optimiser steps; below it the epochs decide (0: no cap)
    # Optimiser steps between mid-stage checkpoints (model, optimiser, RNG, data position).
    # 200 keeps small runs (the bundled corpus needs < 100 steps per stage) free of the
    # checkpoint's disk time, while an hours-long warmup loses at most 200 steps to a crash.
    checkpoint_every: int = 200
    # "all": the whole model learns. "domain": only the domain tokens' embedding, decoder and
    # bias rows learn (sparse_adapt/training/freezing.py): nothing the base knew can change.
    train_rows: str = "all"

    def validate(self, section: str) -> None:
        _positive(section, "epochs", self.epochs, allow_zero=True)
        _positive(section, "grad_accum", self.grad_accum)
        _positive(section, "bucket_window", self.bucket_window)
        _check_rows(section, self.train_rows)
        for key in ("batch_tokens", "max_steps", "step_cap", "checkpoint_every"):
            _positive(section, key, getattr(self, key), allow_zero=True)
        _positive(section, "lr", self.lr)
        _positive(section, "batch_size", self.batch_size)
        _positive(section, "max_grad_norm", self.max_grad_norm)
        _positive(section, "max_length", self.max_length)
        if self.max_length < 3:  # [CLS] and [SEP] take two: 1 or 2 left no piece to mask (a traceback after extend)
            raise ConfigError(f"{section}.max_length must be >= 3 (the special tokens take 2), got {self.max_length}")
        _positive(section, "weight_decay", self.weight_decay, allow_zero=True)
        if not 0.0 <= self.mask_rate < 1.0:
            raise ConfigError(f"{section}.mask_rate must be in [0, 1), got {self.mask_rate}")
        # Nothing would ever be masked, no step to train; the dictionary stage always masks the term.
        if self.mask_rate == 0 and not self.domain_focused and section != "dictionary":
            raise ConfigError(f"{section}.mask_rate is 0 and {section}.domain_focused is false: no token is masked")
        _check_lr_and_steps(section, self)


@dataclass
class WarmupConfig(MLMConfig):
    """MLM on the domain corpus (spec: 50 epochs; the CPU default is shorter)."""

    # 10 epochs x 4 steps at lr 2e-4 moves the new rows about as far as the spec's 50 epochs
    # at 5e-5 did (gatrocraptic's logit in d21 turns positive), in a fifth of the CPU time.
    epochs: int = 10
    lr: float = 2e-4


@dataclass
class DictionaryConfig(MLMConfig):
    """MLM on rendered dictionary entries; the term itself is always masked."""

    # With lr 2e-4, 15 epochs make q11 (no domain term) fire gatrocraptic (logit > 0), which
    # the distillation's query-expansion term needs: relu gives it no gradient below 0.
    epochs: int = 15
    lr: float = 2e-4
    # Entries are few (10 bundled) and short; batch of 4 -> several updates per epoch.
    batch_size: int = 4
    # "TERM is defined as DEFINITION. TERM is used in contexts such as EXAMPLES." (the spec's pattern)
    template: str = "{term} is defined as {definition}. {term} is used in contexts such as {examples}."

    def validate(self, section: str) -> None:
        super().validate(section)
        check_template(self.template, section)


@dataclass
class DistillConfig:
    """Distillation: the spec's six loss terms (section "training objective") and knowledge
    preservation (``pres``), a seventh this toolkit adds."""

    # 16 epochs x 3 steps at 2.5e-4: enough steps for the hinge to lift gatrocraptic past 2.0 in
    # d21 (12 epochs at 8e-5 stopped at ~1.5) while control nDCG@10 stays well above the base.
    epochs: int = 16
    lr: float = 2.5e-4
    # Queries per batch, each with its whole candidate list. Documents shared by the batch's
    # lists are encoded once, so 5 queries cost ~17 document encodings instead of 40: the
    # SPLADE head over the whole vocabulary at every position dominates a CPU step.
    batch_size: int = 5
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    # Loss weights (lambda_*). KD's MSE against teacher scores in [-8, 10] is ~10x the others
    # (a dot product of non-negative vectors can never reach -8), so it is damped.
    kd: float = 0.1
    ret: float = 1.0
    # FLOPS undoes the density the MLM stages add (~23 -> ~140 active terms per document).
    sp: float = 0.2
    # The hinge is averaged over |D| (10 ids on the bundled terms, most absent from any one text).
    # Large on purpose: d21-d23 are -8 negatives of every control query, so KD/Ctr/Ret push
    # their scores (and the term's weight) down; below tau_min the hinge's gradient is the
    # constant dom/|D| per present token and text (then averaged over the batch's texts, as KD
    # and Ret average theirs), and only ~100 per token wins that tug of war.
    dom: float = 1000.0
    ctr: float = 0.5
    # Query expansion is what makes a descriptive query fire the domain term harder; log 2 at
    # w=0, and no gradient while the term's logit is <= 0 everywhere (losses/query_expansion.py).
    qexp: float = 8.0
    # Softmax temperature of Ret; student scores span ~0-30, tau > 1 avoids early saturation.
    temperature: float = 2.0
    # Minimum weight of a present domain token (the quality bar asks > 2.0 in d21).
    tau_min: float = 3.5
    # Pairwise margin of Ctr; the spec suggests ~5 for teacher scores in [-8, 10].
    margin: float = 5.0
    # Steps of the quadratic ramp of lambda_sp (SPLADE's warm-up); 1/4 of the default run (48 steps).
    sp_warmup_steps: int = 12
    # Print a console line every N steps (every step always goes to the JSONL log).
    log_every: int = 3
    grad_accum: int = 1  # batches per optimiser step
    max_steps: int = 0  # optimiser steps of the stage; 0: epochs decide
    step_cap: int = 0  # as in MLMConfig
    checkpoint_every: int = 200  # optimiser steps between mid-stage checkpoints; 0: none (see MLMConfig)
    # Knowledge preservation (sparse_adapt/losses/preservation.py): self-distillation from the
    # frozen starting model on the texts the domain does not concern. Chosen on the dev domains
    # only (pharma, hardware; seeds 0 and 1; README "Knowledge preservation"): 0 lost up to 0.14 nDCG@10
    # on held-out controls, 1 still lost 0.03 on one run, 3 kept controls but gave back domain
    # gains, 2 kept every control within 0.01 of the base with the largest domain gains.
    pres: float = 2.0
    # "vectors" (squared distance of the vectors of texts the domain does not concern), "all-texts"
    # (also general-vocabulary weights of domain texts) or "scores" (of dot products). "all-texts"
    # costs offline-minilm explicit queries (-0.064 on five dev domains) but keeps a trained SPLADE
    # base's documents sparse: it is offline-splade-tiny's recommended setting, applied whenever
    # that base trains without a --config key saying otherwise (sparse_adapt/modeling/builtin.py).
    pres_form: str = "vectors"
    # Validation (sparse_adapt/training/validation.py): the fraction of train.jsonl held out
    # (seeded, per query kind) when no --valid file is given; 0 = no validation, all epochs kept.
    # Off by default: on 8-12 training queries a split takes signal the model needs (README
    # "Knowledge preservation").
    valid_fraction: float = 0.0
    # Selection objective: domain nDCG@10 gain minus this times the control nDCG@10 loss,
    # both against the reference model.
    control_penalty: float = 2.0
    # Stop after this many epochs without a better objective (0 = run every epoch).
    patience: int = 0
    # Each dictionary definition becomes one more training query (sparse_adapt/training/definitions.py)
    # with this many hard negatives: the documents not naming its term (other terms' documents
    # included) that the starting model ranks highest; 0 = off. Off by default: 5 lowered held-out
    # semantic and explicit queries on both dev domains (README "Knowledge preservation").
    definition_negatives: int = 0
    train_rows: str = "all"  # as in MLMConfig
    # WiSE-FT (sparse_adapt/training/interpolation.py): the saved final model is
    # (1 - interpolate) x the distilled model + interpolate x the run's starting point (the
    # `extend` checkpoint, else the base). OUT/distill keeps the distilled model itself. 0 here
    # (train, report, benchmark): with 0.5 the case study met 6 of its 8 criteria; 0.5 is adapt's
    # own default (ADAPT_SETTINGS, sparse_adapt/corpus/adapt.py; bench/RESULTS.md, thirteenth session).
    interpolate: float = 0.0

    def validate(self, section: str) -> None:
        from sparse_adapt.losses.preservation import FORMS

        _check_rows(section, self.train_rows)
        _positive(section, "epochs", self.epochs, allow_zero=True)
        _positive(section, "grad_accum", self.grad_accum)
        _positive(section, "max_steps", self.max_steps, allow_zero=True)
        _positive(section, "step_cap", self.step_cap, allow_zero=True)
        _positive(section, "checkpoint_every", self.checkpoint_every, allow_zero=True)
        for key in ("lr", "batch_size", "max_grad_norm", "temperature", "log_every"):
            _positive(section, key, getattr(self, key))
        for key in ("weight_decay", "kd", "ret", "sp", "dom", "ctr", "qexp", "tau_min", "margin", "sp_warmup_steps",
                    "pres", "control_penalty", "patience", "definition_negatives"):
            _positive(section, key, getattr(self, key), allow_zero=True)
        _check_lr_and_steps(section, self)
        if self.pres_form not in FORMS:
            raise ConfigError(f"{section}.pres_form must be one of {', '.join(FORMS)}, got {self.pres_form!r}")
        if not 0.0 <= self.interpolate <= 1.0:  # written so that NaN fails too
            raise ConfigError(f"{section}.interpolate must be in [0, 1], got {self.interpolate}")
        if not 0.0 <= self.valid_fraction < 1.0:
            raise ConfigError(f"{section}.valid_fraction must be in [0, 1), got {self.valid_fraction}")


@dataclass
class TrainConfig:
    """Everything ``sparse-adapt train`` needs besides the data paths."""

    warmup: WarmupConfig = field(default_factory=WarmupConfig)
    dictionary: DictionaryConfig = field(default_factory=DictionaryConfig)
    distill: DistillConfig = field(default_factory=DistillConfig)

    def validate(self) -> "TrainConfig":
        for f in dataclasses.fields(self):
            getattr(self, f.name).validate(f.name)
        return self

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# AdamW moves every weight by about lr a step: from 1 on, one step outweighs anything a
# pretrained weight holds (1e14 passed every finiteness check and saved a model that
# activates nothing; 1e39 overflowed float32 inside the optimiser).
MAX_LR = 1.0


def check_decay(section: str, lr: float, weight_decay: float) -> None:
    """AdamW's decoupled decay multiplies every weight by ``1 - lr x weight_decay`` each step.
    At 1 or above that flips or zeroes every weight in one step (``weight_decay = 1e34`` saved
    a model whose finite weights, ~1e30, gave NaN vectors while every command exited 0)."""
    if not lr * weight_decay < 1:
        raise ConfigError(f"{section}.weight_decay {weight_decay:g} x {section}.lr {lr:g} must be < 1 (AdamW multiplies "
                          f"every weight by 1 - lr x weight_decay each step: {1 - lr * weight_decay:g} here)")


def _check_lr_and_steps(section: str, cfg: "MLMConfig | DistillConfig") -> None:
    """What every training section shares: an lr below :data:`MAX_LR`, a decay that keeps the
    weights (:func:`check_decay`), and no ``max_steps`` above the ``step_cap`` that bounds it."""
    from sparse_adapt.training.freezing import stage_weight_decay

    if not cfg.lr < MAX_LR:
        raise ConfigError(f"{section}.lr must be < {MAX_LR:g}, got {cfg.lr}")
    check_decay(section, cfg.lr, stage_weight_decay(cfg.train_rows, cfg.weight_decay))  # none on domain rows alone
    if cfg.max_steps and cfg.step_cap and cfg.max_steps > cfg.step_cap:
        raise ConfigError(f"{section}.max_steps ({cfg.max_steps}) is above {section}.step_cap ({cfg.step_cap}), its bound")


def _positive(section: str, key: str, value: float, allow_zero: bool = False) -> None:
    # Written so that NaN (for which every comparison is False) fails too.
    if not (value > 0 or (value == 0 and allow_zero)) or value == math.inf:
        raise ConfigError(f"{section}.{key} must be {'>= 0' if allow_zero else '> 0'}, got {value}")


def _check_rows(section: str, value: str) -> None:
    from sparse_adapt.training.freezing import ROWS

    if value not in ROWS:
        raise ConfigError(f"{section}.train_rows must be one of {', '.join(ROWS)}, got {value!r}")
