"""``benchmark.md``: the per-domain table (base vs adapted per group and seed, with the
quality bar) and the ablation table (each loss term removed in turn), from ``benchmark.json``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from statistics import mean
from typing import Sequence

from sparse_adapt.errors import ConfigError
from sparse_adapt.losses import TERMS
from sparse_adapt.progress import signed
from sparse_adapt.report.pooled import HELDOUT, SHORT, measured, pooled, pooled_table, stored_pooled

METRIC = "ndcg@10"


def generation_flags(generation: dict) -> list[str]:
    """adapt-corpus's generation options (run_adapt keywords) spelled as the CLI takes them."""
    return [("--term-labels" if v else "--teacher-labels") if k == "term_labels" else f"--{k.replace('_', '-')} {v}"
            for k, v in generation.items()]


def config_overrides(config: dict, defaults: dict) -> dict[str, object]:
    """``section.key -> value`` of each setting of ``config`` (a TrainConfig's ``to_dict``) that
    differs from ``defaults`` (the one the same command makes without ``--config``)."""
    return {f"{section}.{key}": value for section, values in config.items() if isinstance(values, dict)
            for key, value in values.items() if defaults.get(section, {}).get(key) != value}


def config_line(overrides: dict | None) -> str:
    """What trained the models, as a markdown sentence: the JSON keeps the whole config, but the
    markdown is what gets shared, and a custom config once read like the defaults."""
    if overrides is None:  # a file written before overrides were recorded
        return "Training config: in the JSON (`inputs.config`)."
    if not overrides:
        return "Training config: the defaults (with the settings recommended for the base)."
    shown = ", ".join(f"`{k} = {v!r}`" for k, v in overrides.items())
    return f"Training config: the defaults (with the settings recommended for the base) except {shown}."


def _generation_line(inputs: dict) -> list[str]:
    """The generation options and teacher the benchmark was given (the others are adapt's defaults)."""
    given = generation_flags(inputs.get("generation", {}))
    if inputs.get("teacher"):
        given.append(f"--teacher {inputs['teacher']}")
    return ["", f"Options given to every `adapt`: `{' '.join(given)}` (the others adapt's defaults)."] if given else []


@dataclass(frozen=True)
class Bar:
    """A quality bar on the held-out groups, met when every seed meets it."""

    floor: dict[str, float]  # group -> least nDCG@10
    gain: dict[str, float]  # group -> least nDCG@10 above the base
    control_tolerance: float  # heldout-control >= base - this

    def text(self) -> str:
        parts = [f"held-out domain-{SHORT[g]} >= {v:.2f}" for g, v in self.floor.items()]
        parts += [f"held-out domain-{SHORT[g]} >= base + {v:.2f}" for g, v in self.gain.items()]
        return ", ".join(parts + [f"held-out controls >= base - {self.control_tolerance}"]) + ", for every seed"


# The generalisation issue's bar (semantic and explicit >= 0.90, controls >= base - 0.01).
BAR = Bar({"heldout-domain-semantic": 0.90, "heldout-domain-explicit": 0.90}, {}, 0.01)
# Bring-your-own-corpus's bar: given only docs.jsonl, semantic >= base + 0.10, controls >= base - 0.02.
CORPUS_BAR = Bar({}, {"heldout-domain-semantic": 0.10}, 0.02)


def groups_of(results: Sequence[dict]) -> list[str]:
    """The held-out groups first (the bar), then the training groups, as they occur."""
    seen = list(dict.fromkeys(g for r in results for g in r["groups"]))
    return [g for g in HELDOUT if g in seen] + [g for g in seen if g not in HELDOUT]


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def _value(r: dict, group: str) -> float | None:
    return r["groups"].get(group, {}).get(METRIC)


SLACK = 1e-9


def bar_status(group: str, base: float | None, adapted: Sequence[float | None], bar: Bar = BAR) -> str:
    """``pass``/``fail`` against ``bar`` for a held-out group, ``""`` for a group it does not read."""
    if group not in HELDOUT or not adapted or any(v is None for v in adapted):
        return ""
    # The slack keeps a figure exactly at the bar (0.90, base - 0.01, +0.100) from failing on float
    # noise (0.7 + 0.2 is 0.8999999999999999); it is far below any figure's last digit.
    if group in bar.floor:
        return "pass" if all(v >= bar.floor[group] - SLACK for v in adapted) else "fail"
    if group in bar.gain and base is not None:
        return "pass" if all(v - base >= bar.gain[group] - SLACK for v in adapted) else "fail"
    if group != "heldout-control" or base is None:
        return ""
    return "pass" if all(v >= base - bar.control_tolerance - SLACK for v in adapted) else "fail"


def domain_table(results: list[dict], seeds: Sequence[int], bar: Bar = BAR) -> list[str]:
    lines = [
        "| domain | split | group | queries | base | " + " | ".join(f"seed {s}" for s in seeds)
        + " | mean | mean - base | bar |",
        "|---|---|---|---|---|" + "---|" * len(seeds) + "---|---|---|",
    ]
    for name, rows, base, adapted in measured(results, seeds):
        if not adapted:
            continue
        full = {r["seed"]: r for r in adapted}
        for g in groups_of(rows):
            b = _value(base, g)
            vals = [_value(full[s], g) if s in full else None for s in seeds]
            got = [v for v in vals if v is not None]
            m = mean(got) if got else None
            delta = None if m is None or b is None else m - b
            lines.append(
                f"| {name} | {base['split']} | {g} | {base['groups'][g]['queries']} | {_fmt(b)} | "
                + " | ".join(_fmt(v) for v in vals)
                + f" | {_fmt(m)} | {'-' if delta is None else signed(delta)} | {bar_status(g, b, vals, bar)} |"
            )
    return lines


def bar_summary(results: list[dict], seeds: Sequence[int], bar: Bar = BAR) -> list[str]:
    lines = []
    for name, _, base, full in measured(results, seeds):
        if not full:
            continue
        by_seed = {r["seed"]: r for r in full}
        marks = []
        for g in HELDOUT:
            if g in base["groups"]:
                # A seed not measured is missing, as in domain_table: the bar is for every seed.
                vals = [_value(by_seed[s], g) if s in by_seed else None for s in seeds]
                status = bar_status(g, _value(base, g), vals, bar)
                marks.append(f"{SHORT[g]} {status or 'n/a'}")
        lines.append(f"- **{name}** ({base['split']}): " + ", ".join(marks))
    return lines


def ablation_table(results: list[dict], seeds: Sequence[int]) -> list[str]:
    domains = list(dict.fromkeys(r["domain"] for r in results if r["variant"].startswith("no-")))
    if not domains:
        return []
    cols = [(d, g) for d in domains for g in HELDOUT
            if any(g in r["groups"] for r in results if r["domain"] == d)]
    variants = ["base", "full", *(f"no-{t}" for t in TERMS)]
    lines = [
        "| variant | " + " | ".join(f"{d} {SHORT[g]}" for d, g in cols) + " | mean change vs full |",
        "|---|" + "---|" * len(cols) + "---|",
    ]

    def cell(variant: str, d: str, g: str) -> float | None:
        vals = [_value(r, g) for r in results if r["domain"] == d and r["variant"] == variant
                and (variant == "base" or r["seed"] in seeds)]
        vals = [v for v in vals if v is not None]
        return mean(vals) if vals else None

    full = {c: cell("full", *c) for c in cols}
    for v in variants:
        vals = {c: cell(v, *c) for c in cols}
        if all(x is None for x in vals.values()):
            lines.append(f"| {v} | " + " | ".join("(weight 0 in this config)" if v.startswith("no-") else "-"
                                                for _ in cols) + " | - |")
            continue
        diffs = [vals[c] - full[c] for c in cols if vals[c] is not None and full[c] is not None]
        change = signed(mean(diffs)) if diffs and v != "full" else "-"
        lines.append(f"| {v} | " + " | ".join(_fmt(vals[c]) for c in cols) + f" | {change} |")
    return lines


def _feedback_line(fb: dict | None) -> list[str]:
    if not fb:
        return []
    return ["", f"Every model, base included, scored with Rocchio pseudo-relevance feedback: {fb['docs']} document(s) "
                f"fed back at weight {fb['weight']:g}, {fb['terms']} terms (`evaluate --feedback`)."]


def _pool_line(pool: dict | None) -> list[str]:
    if not pool:
        return []
    return ["", f"Pooled corpus (`--pool`): each domain's queries searched among the {pool['documents']} documents "
                "of all registered domains (plus a domain directory's own, when one is benchmarked), the other "
                "domains' never relevant, instead of among its own documents alone."]


@dataclass(frozen=True)
class Pipeline:
    """One way `benchmark --pipeline` adapts each domain and seed, as its files and tables show it."""

    heading: str  # what ran, in the tables' heading
    stem: str  # the result files' name (.json, .md) with plain scoring in each domain's own documents
    bar: Bar  # the bar its tables mark
    hand_written: bool = True  # trains on the domain's hand-written terms, dictionary and lists
    # runs `adapt` (its config file, pretraining, the average with `extend`), not `train`'s H4 stages
    through_adapt: bool = True

    def result_stem(self, pool: bool = False, feedback: bool = False) -> str:
        """One name per way of scoring, so every result can sit in one OUT."""
        return self.stem + ("-pool" if pool else "") + ("-feedback" if feedback else "")


# `train`'s H4 stages (issue 11's measure), `adapt` given the domain's hand-written inputs, or
# `adapt` given only its docs.jsonl (bring-your-own-corpus's measure, with that bar).
PIPELINES = {
    "train": Pipeline("H4 (extend, warmup, dictionary, distill)", "benchmark", BAR, through_adapt=False),
    "adapt": Pipeline("`adapt` with the hand-written inputs (pretraining where the base needs it, H4, the average "
                      "with `extend`)", "benchmark-adapt", BAR),
    "adapt-corpus": Pipeline(
        "`adapt` given only docs.jsonl (mined terms, built dictionary, pseudo-labelled training lists; pretraining "
        "where the base needs it, H4, the average with `extend`)",
        "benchmark-adapt-corpus", CORPUS_BAR, hand_written=False),
}
# Every result file name a benchmark --out can hold.
STEMS = tuple(p.result_stem(pool, fb) for p in PIPELINES.values() for pool in (False, True) for fb in (False, True))


def render_benchmark(report: dict) -> str:
    i = report["inputs"]
    results = report["results"]
    pipeline = PIPELINES[i.get("pipeline", "train")]  # schema /1 files knew only `train`
    searched = "the pooled documents (below)" if i.get("pool") else "the domain's documents"
    out = [
        "# Benchmark: each domain adapted, base vs adapted per query group",
        "",
        f"Base `{i['base']}`, {pipeline.heading}, seeds {', '.join(map(str, i['seeds']))}; "
        f"nDCG@10 of every query group (exact in-memory ranking over {searched}, ranx). "
        f"Bar: {pipeline.bar.text()}. Created {report['created']}.",
        "", config_line(i.get("overrides")),
        *_feedback_line(i.get("feedback")),
        *_pool_line(i.get("pool")),
        *_generation_line(i),
        "",
        "## Per domain: base vs adapted",
        "",
        *domain_table(results, i["seeds"], pipeline.bar),
        "",
        "### The bar",
        "",
        *bar_summary(results, i["seeds"], pipeline.bar),
    ]
    # files written before the benchmark stored its per-query pooled test: tested here
    pooled_rows = pooled_table(stored_pooled(report) or pooled(results, i["seeds"]))
    if pooled_rows:
        out += ["", "## Pooled by split: every query, its seeds averaged", "",
                "Each held-out group's queries of a split's domains, each query's adapted nDCG@10 the mean of its "
                "seeds (the query is the unit: its seeds share its base value); p: two-sided paired permutation "
                "test of the mean change (sign flips; exact up to 16 queries that changed).",
                *_fewer_seeds(results, i["seeds"]), "", *pooled_rows]
    ablation = ablation_table(results, i["ablation_seeds"])
    if ablation:
        out += [
            "",
            "## Ablation: each loss term removed in turn",
            "",
            f"Distill rerun from each run's dictionary checkpoint with one weight set to 0 (seeds "
            f"{', '.join(map(str, i['ablation_seeds']))}; mean over seeds); held-out groups.",
            "",
            *ablation,
        ]
    selection = [r for r in results if r.get("selection")]
    if selection:
        out += ["", "## Selected distill epochs", "", "| domain | seed | variant | best epoch | epochs run |", "|---|---|---|---|---|"]
        out += [f"| {r['domain']} | {r['seed']} | {r['variant']} | {r['selection'].get('best_epoch')} | "
                f"{r['selection'].get('epochs_run')} |" for r in selection]
    return "\n".join(out) + "\n"


# /2 added inputs.pipeline and inputs.start; /1 files (pipeline `train`) still load.
BENCHMARK_SCHEMA = "sparse-adapt.benchmark/2"
READABLE_SCHEMAS = ("sparse-adapt.benchmark/1", BENCHMARK_SCHEMA)


def benchmark_file(path: str | Path) -> Path:
    """The result file ``--benchmark PATH`` names: PATH itself, or the one result file of a
    benchmark directory."""
    path = Path(path)
    if not path.is_dir():
        return path
    found = [path / f"{s}.json" for s in STEMS if (path / f"{s}.json").is_file()]
    if len(found) > 1:
        raise ConfigError(f"--benchmark {path} holds {', '.join(f.name for f in found)}: give the one to report")
    return found[0] if found else path / "benchmark.json"


def benchmark_differences(benchmark: dict, base: str, config: dict) -> list[str]:
    """How a loaded benchmark's settings differ from a report's ``base`` and training ``config``
    (``TrainConfig.to_dict()``): its tables then describe other models than the report's."""
    inputs = benchmark["inputs"]
    differences = []
    from sparse_adapt.training.rundir import same_place

    if not same_place(str(inputs.get("base")), str(base)):  # ./pt and pt are one base
        differences.append(f"base {inputs.get('base')} (this report: {base})")
    pipeline = inputs.get("pipeline", "train")
    if pipeline not in PIPELINES or PIPELINES[pipeline].through_adapt:  # `adapt`'s models start elsewhere and train on other inputs than H4
        start = inputs.get("start")
        other_start = f" (from {start})" if start and str(start) != str(inputs.get("base")) else ""
        differences.append(f"pipeline {pipeline}{other_start} (this report: train's H4)")
    theirs = inputs.get("config") or {}
    keys = [f"{section}.{key}" for section, values in config.items() for key, value in values.items()
            if (theirs.get(section) or {}).get(key, value) != value]
    if keys:
        differences.append(f"config ({', '.join(keys)})")
    return differences


def _fewer_seeds(results: list[dict], seeds: Sequence[int]) -> list[str]:
    """The sentence naming the domains the pooled table leaves out (measured on fewer seeds)."""
    fewer = [name for name, _, _, full in measured(results, seeds) if full and {r["seed"] for r in full} != set(seeds)]
    return [f"Left out (measured on fewer seeds): {', '.join(fewer)}."] if fewer else []


def load_benchmark(path: str | Path) -> dict:
    """A ``sparse-adapt benchmark`` result: one of its JSON files (``STEMS``), or the directory
    holding exactly one of them."""
    path = Path(path)
    file = benchmark_file(path)
    if not file.is_file():
        raise ConfigError(f"--benchmark {path}: no benchmark.json (write one with `sparse-adapt benchmark --out DIR`)")
    try:
        report = json.loads(file.read_text(encoding="utf-8-sig"), parse_constant=_no_constant)
    except (ValueError, RecursionError) as e:  # a 5000-digit number or 10^5-deep nesting too
        raise ConfigError(f"{file}: not a benchmark.json ({type(e).__name__}: {str(e)[:120]})") from None
    if not isinstance(report, dict) or report.get("schema") not in READABLE_SCHEMAS:
        raise ConfigError(f"{file}: field 'schema' is not one of {', '.join(map(repr, READABLE_SCHEMAS))}")
    if not isinstance(report.get("inputs"), dict) or not isinstance(report.get("results"), list):
        raise ConfigError(f"{file}: fields 'inputs' and 'results' are required")
    try:  # rendered now: a file missing a field would otherwise fail after every experiment trained
        benchmark_section(report)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, ArithmeticError) as e:  # a 400-digit metric
        raise ConfigError(f"{file}: not a complete benchmark result ({type(e).__name__}: {str(e)[:120]})") from None
    return report


def _no_constant(name: str) -> float:
    """``NaN``/``Infinity`` in a benchmark.json: no figure `benchmark` writes (it writes JSON's
    numbers), so an edited file, which would render as a 'nan' nDCG."""
    raise ValueError(f"{name} is no figure")


def benchmark_section(report: dict) -> str:
    """The benchmark's tables as a section of ``report.md`` (headings one level down)."""
    body = render_benchmark(report).splitlines()[1:]  # without its own title
    return "\n".join(["## Generalisation: the benchmark suite", *[("#" + l if l.startswith("#") else l) for l in body]])
