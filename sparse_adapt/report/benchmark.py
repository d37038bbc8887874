"""The benchmark: one config on several domains and seeds, base vs adapted per query group,
and an ablation that removes each loss term in turn.

``build_benchmark(BenchmarkInputs(...))`` trains (or resumes) H4 per domain and seed with
:func:`sparse_adapt.training.pipeline.run_pipeline`: the MLM stages (extend, warmup,
dictionary) into ``OUT/prefix/<domain>/seed<k>``, then distill from that ``dictionary``
checkpoint into ``OUT/runs/<domain>/seed<k>`` (the same seeds and weights as one H4 run;
the reference of preservation and validation stays ``--base``). The ablation reruns only
distill from the same checkpoint with one loss weight set to 0
(``OUT/ablation/<domain>/seed<k>/no-<term>``); the prefix is shared, so a config that only
changes distill settings reuses it. Every model is scored
like ``sparse-adapt evaluate`` (exact dot products over the domain's documents, ranx
nDCG@10), per group of ``query_groups.json``. Writes ``OUT/benchmark.json`` and
``OUT/benchmark.md`` (tables in ``benchmark_md.py``). With ``feedback``, base and adapted
models alike are scored with Rocchio pseudo-relevance feedback (``retrieval/feedback.py``)
into ``OUT/benchmark-feedback.json`` and ``.md`` instead, so a rerun of a finished benchmark
with ``--feedback`` re-scores its models without retraining and keeps the plain tables.

With ``pipeline="adapt"`` every domain and seed is adapted by ``sparse-adapt adapt`` instead
(``corpus/adapt.py``: general-English pretraining where the base needs it, made once into
``OUT/pretrained``; H4; the final model averaged with the ``extend`` checkpoint) from the
domain's hand-written terms, dictionary and training lists, into
``OUT/adapt/<domain>/seed<k>``, and written to ``OUT/benchmark-adapt.json`` / ``.md`` (with
feedback ``benchmark-adapt-feedback``): the product path, measured by the same held-out
groups and bar. It has no ablation (each term removed would be a whole ``adapt`` run).
``pipeline="adapt-corpus"`` is the same given only each domain's ``docs.jsonl`` (``adapt``
mines the terms, builds the dictionary and pseudo-labels the training lists), into
``OUT/adapt-corpus/<domain>/seed<k>`` and ``OUT/benchmark-adapt-corpus.json`` / ``.md``, with
bring-your-own-corpus's bar (semantic >= base + 0.10, controls >= base - 0.02).

With ``pool``, every domain's queries are searched among every registered domain's documents
(the others' never relevant; ids prefixed ``<domain>/``) instead of its own alone: a
paraphrase's few relevant documents are harder to find in 400 documents than in 40. The
files get ``-pool`` before ``-feedback`` (``benchmark-adapt-corpus-pool.json``); a rerun on
a finished ``--out`` only re-scores.

A domain is a name registered in ``corpora`` (its split comes from ``corpora.SPLITS``;
gatrocraptic's is ``bundled``, that of a name in no split ``registered``) or a directory
holding the same files as a bundled domain (split ``outside``; without the hand-written
terms, dictionary and training lists for ``adapt-corpus``).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
from dataclasses import dataclass, field
from pathlib import Path

import corpora
from sparse_adapt.atomic import write_atomic
from sparse_adapt.errors import ConfigError
from sparse_adapt.lock import locked
from sparse_adapt.losses import TERMS
from sparse_adapt.modeling.encoder import OFFLINE_MINILM, SpladeEncoder
from sparse_adapt.progress import SILENT, Hooks
from sparse_adapt.report.benchmark_md import (
    BENCHMARK_SCHEMA, PIPELINES, Pipeline, config_overrides, generation_flags, render_benchmark,
)
from sparse_adapt.report.domains import BenchDomain, EvalSet, pool_documents, resolve_domain
from sparse_adapt.report.files import holds_files, output_kind
from sparse_adapt.report.pooled import pooled
from sparse_adapt.retrieval.feedback import Feedback
from sparse_adapt.training.config import TrainConfig
from sparse_adapt.training.config_files import load_config
from sparse_adapt.training.rundir import stage_ends
from sparse_adapt.training.stages import EXPERIMENTS

# H4 runs as its MLM prefix (OUT/prefix/<domain>/seed<k>) then distill (OUT/runs/...).
PREFIX = tuple(s for s in EXPERIMENTS["H4"] if s != "distill")

@dataclass
class BenchmarkInputs:
    out: Path
    domains: tuple[str, ...] = corpora.MEASURED
    seeds: tuple[int, ...] = (0, 1)
    base: str = OFFLINE_MINILM
    config: TrainConfig | Path | str | None = None
    # Domains and seeds of the ablation (each loss term removed in turn); empty: no ablation.
    ablation_domains: tuple[str, ...] = ()
    ablation_seeds: tuple[int, ...] = (0,)
    # Score base and adapted models with pseudo-relevance feedback; None: plain scoring.
    feedback: Feedback | None = None
    # Search each domain's queries among every registered domain's documents, not its own alone.
    pool: bool = False
    # One of PIPELINES: `train`'s H4 (issue 11's measure), `adapt` with the hand-written inputs
    # or `adapt-corpus` from docs.jsonl alone (bring-your-own-corpus's measure).
    pipeline: str = "train"
    # adapt-corpus's teacher of the pseudo-labelled lists (adapt --teacher); None: adapt's default.
    teacher: str | None = None
    # adapt-corpus's generation options (corpus.adapt.GENERATION: top, max_queries ...) as
    # run_adapt keywords; a missing one is adapt's default.
    generation: dict[str, int | bool] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.pipeline not in PIPELINES:
            raise ConfigError(f"--pipeline must be one of {', '.join(PIPELINES)}, got {self.pipeline!r}")
        if self.spec.through_adapt and self.ablation_domains:
            raise ConfigError(f"--ablation reruns `train`'s distill stage: give it without --pipeline {self.pipeline}")
        if self.teacher is not None and self.spec.hand_written:
            raise ConfigError(f"--teacher scores generated training lists: pipeline {self.pipeline} trains on the "
                              "hand-written ones (give --pipeline adapt-corpus)")
        if self.generation and self.spec.hand_written:
            flag = generation_flags(self.generation)[0].split()[0]
            raise ConfigError(f"{flag} shapes generated inputs: pipeline {self.pipeline} trains on the "
                              "hand-written ones (give --pipeline adapt-corpus)")
        from sparse_adapt.corpus.adapt import GENERATION

        unknown = sorted(set(self.generation) - set(GENERATION))
        if unknown:
            raise ConfigError(f"generation options are {', '.join(GENERATION)}; got {', '.join(unknown)}")
        if self.spec.through_adapt and isinstance(self.config, TrainConfig):
            raise ConfigError(f"pipeline {self.pipeline} takes its config as a file (adapt --config), not a TrainConfig")

    @property
    def spec(self) -> Pipeline:
        """The pipeline's entry in PIPELINES (checked in __post_init__)."""
        return PIPELINES[self.pipeline]

    @property
    def stem(self) -> str:
        """The result files' name, so every pipeline and scoring can sit in one OUT."""
        return self.spec.result_stem(self.pool, self.feedback is not None)

    @property
    def config_file(self) -> str | None:
        """The config file, as errors about its settings name it (None: none, or a TrainConfig)."""
        return None if self.config is None or isinstance(self.config, TrainConfig) else str(self.config)

    def train_config(self, base: str | None = None) -> TrainConfig:
        """The training config the runs use; ``base``: where training starts, if not ``self.base``
        (``adapt``'s pretrained base carries its own recommended settings)."""
        if isinstance(self.config, TrainConfig):
            return self.config.validate()
        if self.spec.through_adapt:
            from sparse_adapt.corpus.adapt import ADAPT_SETTINGS

            return load_config(self.config, base or self.base, ADAPT_SETTINGS)
        return load_config(self.config, base or self.base)


@dataclass
class Measured:
    domain: str
    split: str
    seed: int | None  # None: the base model
    variant: str  # "base", "full" or "no-<term>"
    groups: dict[str, dict]
    model: str
    selection: dict = field(default_factory=dict)  # best_epoch etc. of the distill stage, if validated


def _distill_info(run_dir: Path) -> dict:
    """The distill stage's selection record from ``train_log.jsonl`` (empty without validation)."""
    info: dict = {}
    for r in stage_ends(run_dir / "train_log.jsonl"):
        if r.get("stage") == "distill":
            info = {k: r[k] for k in ("best_epoch", "epochs_run", "best_objective") if k in r}
    return info


def without(cfg: TrainConfig, term: str) -> TrainConfig:
    """``cfg`` with the distill weight of ``term`` set to 0."""
    return dataclasses.replace(cfg, distill=dataclasses.replace(cfg.distill, **{term: 0.0}))


def build_benchmark(inputs: BenchmarkInputs, hooks: Hooks = SILENT) -> dict:
    """Train or resume every run, evaluate base and adapted models, write the files; one
    benchmark at a time writes an ``--out`` (its lock)."""
    out = Path(inputs.out)
    if out.exists() and not out.is_dir():
        check_out(out)  # refused before the lock makes a directory
    with locked(out):
        return _build_benchmark(inputs, hooks)


def _build_benchmark(inputs: BenchmarkInputs, hooks: Hooks = SILENT) -> dict:
    from sparse_adapt.training.pipeline import RunMismatchError, run_pipeline

    cfg = inputs.train_config()  # refuses a bad --config before anything is written
    out = Path(inputs.out)
    check_out(out)
    hand_written = inputs.spec.hand_written
    domains = [resolve_domain(d, hand_written) for d in inputs.domains]
    ablation = [resolve_domain(d, flag="--ablation") for d in inputs.ablation_domains]
    for flag, named in (("--domains", [d.name for d in domains]), ("--ablation", [d.name for d in ablation]),
                        ("--seeds", list(inputs.seeds)), ("--ablation-seeds", list(inputs.ablation_seeds))):
        twice = sorted({str(v) for v in named if named.count(v) > 1})
        if twice:  # each would count twice in the pooled test: a significance it does not have
            raise ConfigError(f"{flag} names {', '.join(twice)} more than once")
    # Its full runs would join the per-domain tables and the pooled test of domains it is not one of.
    if outside := [d.name for d in ablation if d.name not in {b.name for b in domains}]:
        raise ConfigError(f"--ablation {outside[0]} is not one of --domains: an ablation is read against its domain's "
                          "full runs, which the tables and the pooled test count; add it to --domains")
    evalsets = {}
    for d in domains:  # validated before training (the ablation's are among them)
        said: list[str] = []
        evalsets[d.name] = EvalSet.load(d.files, said)
        for line in said:
            hooks.message(f"warning: {d.name}: {line}")
    if inputs.teacher is not None:  # a misspelt teacher fails now, not after the base is scored (and pretrained)
        from sparse_adapt.corpus.teacher import load_teacher

        load_teacher(inputs.teacher)
    if inputs.pool:
        evalsets = {d.name: evalsets[d.name].pooled(None if d.split == "outside" else d.name)
                    for d in domains}
    base = SpladeEncoder.from_pretrained(inputs.base)
    base_scores = {name: ev.scores(base, inputs.feedback) for name, ev in evalsets.items()}
    results: list[Measured] = []

    def mismatch(run_dir: Path) -> ConfigError:
        # The runs' own message offers --overwrite, which benchmark does not take: its runs are what it resumes.
        return ConfigError(f"{run_dir} holds a run made with other settings than this benchmark's (another "
                           "--config, base or inputs): give another --out")

    def train(d: BenchDomain, seed: int, run_dir: Path, **kw) -> Path:
        f = d.files
        try:
            return run_pipeline(
                corpus=f.docs, terms=f.terms, dictionary=f.dictionary, train=f.train, out=run_dir, seed=seed,
                hooks=hooks, config_source=inputs.config_file, **kw,
            )
        except RunMismatchError:
            raise mismatch(run_dir) from None

    def measure(d: BenchDomain, seed: int, variant: str, final: Path, run_dir: Path | None = None) -> Measured:
        """``run_dir``: where the training log is, if not beside ``final``."""
        scores = evalsets[d.name].scores(SpladeEncoder.from_pretrained(final), inputs.feedback)
        return Measured(d.name, d.split, seed, variant, scores, str(final), _distill_info(run_dir or final.parent))

    def prefix(d: BenchDomain, seed: int) -> Path:
        """The MLM stages, shared by the full run and every ablation of this domain and seed."""
        out_dir = out / "prefix" / d.name / f"seed{seed}"
        return train(d, seed, out_dir, base=inputs.base, stages=PREFIX, config=cfg).parent / "dictionary"

    def distill(d: BenchDomain, seed: int, run_dir: Path, config: TrainConfig) -> Path:
        # seed + 3 for distill either way (stages.ORDER), so this equals the distill of one H4 run.
        return train(d, seed, run_dir, base=prefix(d, seed), reference=inputs.base, stages=("distill",), config=config)

    def h4_run(d: BenchDomain, seed: int) -> tuple[Path, Path]:
        """The final model and the run directory holding its training log."""
        hooks.message(f"--- {d.name} ({d.split}) seed {seed}: H4")
        final = distill(d, seed, out / "runs" / d.name / f"seed{seed}", cfg)
        return final, final.parent

    start = inputs.base  # where adapt's runs train from
    if inputs.spec.through_adapt:
        from sparse_adapt.corpus.adapt import pretrained_base
        from sparse_adapt.modeling.builtin import needs_pretraining

        if needs_pretraining(inputs.base):
            # adapt pretrains per run directory with seed 0 whatever the run's seed: the same
            # model for every domain and seed, so it is made once here.
            start = pretrained_base(inputs.base, out / "pretrained", hooks)
            cfg = inputs.train_config(start)

    def adapt_run(d: BenchDomain, seed: int) -> tuple[Path, Path]:
        from sparse_adapt.corpus.adapt import AdaptMismatchError, run_adapt

        f = d.files
        if hand_written:
            hooks.message(f"--- {d.name} ({d.split}) seed {seed}: adapt with the hand-written inputs")
            given = {"terms": f.terms, "dictionary": f.dictionary, "train": f.train}
        else:
            hooks.message(f"--- {d.name} ({d.split}) seed {seed}: adapt from docs.jsonl alone")
            given = {**inputs.generation, **({} if inputs.teacher is None else {"teacher": inputs.teacher})}
        run_dir = out / inputs.pipeline / d.name / f"seed{seed}"
        try:
            result = run_adapt(f.docs, run_dir, start, config=inputs.config, seed=seed, pretrain=False, hooks=hooks,
                               **given)
        except AdaptMismatchError:
            raise mismatch(run_dir) from None
        return result.final, result.training

    main_run = adapt_run if inputs.spec.through_adapt else h4_run

    for d in domains:
        results.append(Measured(d.name, d.split, None, "base", base_scores[d.name], inputs.base))
        for seed in inputs.seeds:
            results.append(measure(d, seed, "full", *main_run(d, seed)))
    for d in ablation:  # its base row is in results already: it is one of the domains
        for seed in inputs.ablation_seeds:
            full = main_run(d, seed)
            if not any(r.domain == d.name and r.seed == seed and r.variant == "full" for r in results):
                results.append(measure(d, seed, "full", *full))
            for term in TERMS:
                if getattr(cfg.distill, term) == 0:
                    continue  # already off in this config: the full run is this variant
                hooks.message(f"--- ablation {d.name} seed {seed}: without {term}")
                final = distill(d, seed, out / "ablation" / d.name / f"seed{seed}" / f"no-{term}", without(cfg, term))
                results.append(measure(d, seed, f"no-{term}", final))
    report = {
        "schema": BENCHMARK_SCHEMA,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "inputs": {
            "base": inputs.base, "pipeline": inputs.pipeline, "start": str(start), "teacher": inputs.teacher,
            "generation": dict(inputs.generation),
            "domains": list(inputs.domains), "seeds": list(inputs.seeds),
            "ablation_domains": list(inputs.ablation_domains), "ablation_seeds": list(inputs.ablation_seeds),
            "config": cfg.to_dict(),
            # what the markdown names: the settings a --config changed (the same command's without one)
            "overrides": config_overrides(cfg.to_dict(), dataclasses.replace(inputs, config=None).train_config(
                str(start)).to_dict()),
            "feedback": None if inputs.feedback is None else dataclasses.asdict(inputs.feedback),
            "pool": {"documents": len(pool_documents())} if inputs.pool else None,
        },
        "results": [dataclasses.asdict(r) for r in results],
    }
    report["pooled"] = pooled(report["results"], inputs.seeds)
    _say_replaced(out / f"{inputs.stem}.json", report["inputs"], hooks)
    write_atomic(out / f"{inputs.stem}.json", json.dumps(report, indent=2) + "\n")
    write_atomic(out / f"{inputs.stem}.md", render_benchmark(report))
    return report


def _say_replaced(path: Path, now: dict, hooks: Hooks) -> None:
    """A rerun with fewer domains or seeds rewrote the tables without a word; their runs stay."""
    try:
        before = json.loads(path.read_text(encoding="utf-8"))["inputs"]
    except (OSError, ValueError, KeyError, TypeError):
        return
    for key in ("domains", "seeds"):
        if isinstance(before, dict) and before.get(key) != now[key]:
            hooks.message(f"replacing {path} ({key} {', '.join(map(str, before.get(key) or []))}) with {key} "
                          f"{', '.join(map(str, now[key]))}; the runs of the others stay under {path.parent}")


def check_out(out: Path) -> None:
    """Refuse to write into a non-empty directory that is not a benchmark of ours."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file, not a directory")
    # pretrained/ alone: a --pipeline adapt benchmark stopped while pretraining, which a rerun resumes
    kind = output_kind(out) if out.is_dir() else None
    if kind not in (None, "benchmark"):
        raise ConfigError(f"--out {out} holds a `sparse-adapt {kind}` output, not a benchmark: give another --out")
    if out.is_dir() and holds_files(out) and kind is None:
        raise ConfigError(f"--out {out} is not empty and holds no benchmark: refusing to write into it")
