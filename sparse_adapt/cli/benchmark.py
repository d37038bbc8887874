"""CLI command ``benchmark``: one config on several domains and seeds, base vs adapted per
query group, plus an optional ablation of the seven loss terms (``report/benchmark.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

import corpora
from sparse_adapt.cli.output import (
    BASE_HELP, MAX_SEED,
    FEEDBACK_DOCS_OPTION, FEEDBACK_TERMS_OPTION, FEEDBACK_WEIGHT_OPTION, feedback_option,
)

FEEDBACK_HELP = (
    "Score base and adapted models with Rocchio pseudo-relevance feedback, into "
    "benchmark-feedback.json/.md (a rerun on a finished --out re-scores without retraining)."
)


def _names(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


def _required(names: tuple[str, ...], flag: str) -> tuple[str, ...]:
    from sparse_adapt.errors import ConfigError

    if not names:
        raise ConfigError(f"{flag} names no domain")
    return names


def _seeds(value: str, flag: str = "--seeds") -> tuple[int, ...]:
    from sparse_adapt.errors import ConfigError

    try:
        seeds = tuple(int(v) for v in _names(value))
    except ValueError:
        raise ConfigError(f"{flag} must be comma-separated integers, got {value!r}") from None
    if not seeds:
        raise ConfigError(f"{flag} names no seed")
    if outside := [s for s in seeds if not 0 <= s <= MAX_SEED]:
        raise ConfigError(f"{flag} must be between 0 and {MAX_SEED}, got {outside[0]}")
    return seeds


def benchmark(
    out: Path = typer.Option(
        ..., "--out", help="Benchmark directory: benchmark.md, benchmark.json, prefix/, runs/, ablation/ "
        "(--pipeline adapt: benchmark-adapt.md/.json, adapt/, pretrained/; adapt-corpus: "
        "benchmark-adapt-corpus.md/.json, adapt-corpus/, pretrained/).",
    ),
    domains: str = typer.Option(
        ",".join(corpora.MEASURED), "--domains",
        help=f"Comma-separated registered data sets (corpora: {', '.join(corpora.SPLITS['dev'])} = dev; "
        f"{', '.join(corpora.SPLITS['test'])} = test; gatrocraptic) or directories with the same files.",
    ),
    seeds: str = typer.Option("0,1", "--seeds", help="Comma-separated seeds of the runs."),
    pipeline: str = typer.Option(
        "train", "--pipeline",
        help="train: `train`'s H4 stages; adapt: `sparse-adapt adapt` given each domain's hand-written terms, "
        "dictionary and training lists (pretraining where the base needs it, made once into OUT/pretrained; "
        "the final model averaged with `extend`), into benchmark-adapt.json/.md; adapt-corpus: the same given only "
        "each domain's docs.jsonl (mined terms, built dictionary, pseudo-labelled lists), marked against "
        "bring-your-own-corpus's bar (semantic >= base + 0.10, controls >= base - 0.02). No --ablation with either.",
    ),
    base: str = typer.Option("offline-minilm", "--base", help=BASE_HELP),
    teacher: Optional[str] = typer.Option(
        None, "--teacher", help="adapt-corpus: the teacher of the pseudo-labelled lists, as adapt --teacher "
        "(default: adapt's, the offline dense all-MiniLM-L6-v2).",
    ),
    top: Optional[int] = typer.Option(None, "--top", min=1, help="adapt-corpus: as adapt --top (default: adapt's)."),
    min_count: Optional[int] = typer.Option(None, "--min-count", min=1, help="adapt-corpus: as adapt --min-count."),
    max_queries: Optional[int] = typer.Option(None, "--max-queries", min=2, help="adapt-corpus: as adapt --max-queries (2 or more)."),
    negatives: Optional[int] = typer.Option(None, "--negatives", min=1, help="adapt-corpus: as adapt --negatives."),
    siblings: Optional[int] = typer.Option(None, "--siblings", min=0, help="adapt-corpus: as adapt --siblings."),
    term_labels: Optional[bool] = typer.Option(
        None, "--term-labels/--teacher-labels", help="adapt-corpus: as adapt's (default: adapt's, --term-labels).",
    ),
    config: Optional[Path] = typer.Option(None, "--config", help="Training config overrides (JSON or TOML), as for train."),
    ablation: str = typer.Option(
        "", "--ablation", help="Comma-separated domains of the ablation (each loss term removed in turn), among "
        "--domains; empty: none."
    ),
    ablation_seeds: str = typer.Option("0", "--ablation-seeds", help="Seeds of the ablation runs."),
    pool: bool = typer.Option(
        False, "--pool", help="Search each domain's queries among every registered domain's documents (the others' "
        "never relevant), not its own alone, into <result>-pool.json/.md (a rerun on a finished --out only re-scores).",
    ),
    feedback: bool = feedback_option(FEEDBACK_HELP),
    feedback_docs: Optional[int] = FEEDBACK_DOCS_OPTION,
    feedback_weight: Optional[float] = FEEDBACK_WEIGHT_OPTION,
    feedback_terms: Optional[int] = FEEDBACK_TERMS_OPTION,
) -> None:
    """Train (or resume) every domain and seed, evaluate base vs adapted per query group."""
    from sparse_adapt.cli.output import console, feedback_settings, rich_hooks, wrote
    from sparse_adapt.report.benchmark import BenchmarkInputs, build_benchmark
    from sparse_adapt.report.benchmark_md import bar_summary
    from sparse_adapt.report.pooled import pooled_line

    inputs = BenchmarkInputs(
        out=out, domains=_required(_names(domains), "--domains"), seeds=_seeds(seeds), base=base, config=config,
        ablation_domains=_names(ablation), ablation_seeds=_seeds(ablation_seeds, "--ablation-seeds"),
        feedback=feedback_settings(feedback, feedback_docs, feedback_weight, feedback_terms), pipeline=pipeline,
        teacher=teacher, pool=pool, generation={k: v for k, v in (
            ("top", top), ("min_count", min_count), ("max_queries", max_queries), ("negatives", negatives),
            ("siblings", siblings), ("term_labels", term_labels)) if v is not None},
    )
    with rich_hooks() as hooks:
        report = build_benchmark(inputs, hooks)
    for line in bar_summary(report["results"], inputs.seeds, inputs.spec.bar):
        console.print(line, markup=False, highlight=False)
    for group in report["pooled"]:
        console.print(f"- pooled, {pooled_line(group)}", markup=False, highlight=False)
    wrote(out / f"{inputs.stem}.md", f" (numbers in {inputs.stem}.json)")


def register(app: typer.Typer) -> None:
    app.command("benchmark")(benchmark)
