"""CLI command ``report``: the spec's four experiments on your data, as one report.

``sparse-adapt report --out runs/case-study`` trains (or reuses) H1-H4 on the bundled
Gatrocraptic corpus with the offline base and writes ``runs/case-study/report.md``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from sparse_adapt.cli.output import BASE_HELP, seed_option

BUNDLED = "(default: the bundled Gatrocraptic file; required with your own --corpus)"
# Column headers of the console summary, by criterion id (the full names are in report.md).
SHORT = {
    "single_token": "token", "positive_logits": "logit>0", "nonzero_weight": "w>0", "high_weight": "w>2",
    "top_rank": "rank 1", "query_expansion": "q-exp", "explicit_queries": "explicit", "correct_retrieval": "top-k",
}


def report(
    out: Path = typer.Option(..., "--out",
                             help="Report directory: report.md, report.json, PNGs, runs/H1..H4, diagnostics/."),
    base: str = typer.Option("offline-minilm", "--base", help=BASE_HELP),
    corpus: Optional[Path] = typer.Option(
        None, "--corpus", help="docs.jsonl (default: the bundled Gatrocraptic file; your own needs --terms, "
        "--dictionary, --train, --queries and --qrels)."
    ),
    terms: Optional[Path] = typer.Option(None, "--terms", help=f"domain_terms.json {BUNDLED}."),
    dictionary: Optional[Path] = typer.Option(None, "--dictionary", help=f"dictionary.jsonl {BUNDLED}."),
    train: Optional[Path] = typer.Option(None, "--train", help=f"train.jsonl with teacher scores {BUNDLED}."),
    queries: Optional[Path] = typer.Option(
        None, "--queries", help="queries.jsonl (default: the bundled queries when --corpus is the bundled one)."
    ),
    qrels: Optional[Path] = typer.Option(None, "--qrels", help="TREC qrels (same default rule as --queries)."),
    heldout_queries: Optional[Path] = typer.Option(
        None, "--heldout-queries", help="Queries never trained on, reported as their own groups (default: the bundled "
        "ones when --corpus and --queries are the bundled ones)."
    ),
    heldout_qrels: Optional[Path] = typer.Option(None, "--heldout-qrels", help="qrels of --heldout-queries."),
    groups: Optional[Path] = typer.Option(
        None, "--groups", help="query_groups.json: group -> qids (default: the bundled groups for the bundled "
        "queries, else derived: queries naming a domain term = domain-explicit, others control)."
    ),
    config: Optional[Path] = typer.Option(None, "--config", help="Training config overrides (JSON or TOML), as for train."),
    seed: int = seed_option("Random seed of every experiment."),
    term: Optional[str] = typer.Option(
        None, "--term", help="Term of the criteria table (default: the domain term in most relevant documents "
        "of the domain-semantic queries)."
    ),
    experiments: str = typer.Option("H1,H2,H3,H4", "--experiments", help="Which experiments to run, e.g. H1,H4."),
    benchmark: Optional[Path] = typer.Option(
        None, "--benchmark", help="Include the per-domain and ablation tables of a `sparse-adapt benchmark` "
        "output: one of its result files (benchmark.json, benchmark-feedback.json, benchmark-adapt.json ...) "
        "or its directory when it holds only one."
    ),
    overwrite: bool = typer.Option(
        False, "--overwrite", help="Write into a non-empty --out holding no report (beside its files), and "
        "retrain runs under OUT/runs whose settings differ, instead of refusing."
    ),
) -> None:
    """Run H1-H4 (reusing finished runs), evaluate each against the base, write report.md + plots."""
    from sparse_adapt.cli.output import console, rich_hooks, wrote
    from sparse_adapt.report import FAIL, PASS, ReportInputs, build_report

    inputs = ReportInputs(
        out=out, base=base, corpus=corpus, terms=terms, dictionary=dictionary, train=train, queries=queries,
        qrels=qrels, heldout_queries=heldout_queries, heldout_qrels=heldout_qrels, groups=groups, config=config,
        seed=seed, term=term, experiments=tuple(e.strip() for e in experiments.split(",") if e.strip()),
        overwrite=overwrite, benchmark=benchmark,
    )
    with rich_hooks() as hooks:
        result = build_report(inputs, hooks)
    table = Table(title=f'criteria for "{result.primary_term}"')
    table.add_column("stage")
    for c in result.stages[0].criteria:
        table.add_column(SHORT.get(c.id, c.id))
    table.add_column(f"nDCG@10 ({result.stages[0].judged['queries']} queries)", justify="right")
    for s in result.stages:
        marks = ["[green]pass[/green]" if c.status == PASS else "[red]fail[/red]" if c.status == FAIL else "n/a"
                 for c in s.criteria]
        table.add_row(s.name, *marks, f"{s.metrics['ndcg@10']:.4f}")
    console.print(table)
    wrote(out / "report.md", " (plots and report.json beside it)")


def register(app: typer.Typer) -> None:
    app.command("report")(report)
