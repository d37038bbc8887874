"""``sparse-adapt train``: the staged adaptation pipeline in one command."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from sparse_adapt.cli.output import BASE_HELP, seed_option


def register(app: typer.Typer) -> None:
    @app.command()
    def train(
        base: str = typer.Option("offline-minilm", "--base", help=BASE_HELP),
        corpus: Path = typer.Option(..., "--corpus", help="docs.jsonl of the domain corpus (warmup MLM)."),
        terms: Path = typer.Option(..., "--terms", help="domain_terms.json: category -> list of terms."),
        dictionary: Path = typer.Option(..., "--dictionary", help="dictionary.jsonl: term, definition, examples."),
        train_file: Path = typer.Option(..., "--train", help="train.jsonl: queries with teacher-scored candidates."),
        out: Path = typer.Option(..., "--out", help="Run directory: OUT/<stage>/ checkpoints, OUT/final, train_log.jsonl."),
        stages: str = typer.Option(
            "extend,warmup,dictionary,distill", "--stages",
            help="Comma-separated subsequence of extend,warmup,dictionary,distill (H1: distill; H4: all four).",
        ),
        config: Optional[Path] = typer.Option(None, "--config", help="JSON or TOML overrides, by stage section."),
        seed: int = seed_option("Seeds python, numpy and torch; a rerun reproduces the run."),
        device: Optional[str] = typer.Option(
            None, "--device", help="auto, cpu, cuda or mps (default: the global --device, auto)."
        ),
        overwrite: bool = typer.Option(
            False, "--overwrite", help="Discard a different run found in --out (or write beside other files) instead of refusing."
        ),
        valid: Optional[Path] = typer.Option(
            None, "--valid", help="Validation queries of distill (train.jsonl format): evaluated every epoch, best "
            "epoch kept. Default: distill.valid_fraction of --train (0: no validation).",
        ),
        reference: Optional[str] = typer.Option(
            None, "--reference", help="Frozen model for knowledge preservation and the validation baseline "
            "(default: --base; give the original base when --base is a checkpoint of an earlier run).",
        ),
    ) -> None:
        """Run the stages on BASE; rerunning the same command resumes after the last completed stage, or
        inside an unfinished one from its last mid-stage checkpoint."""
        from sparse_adapt.cli.output import console, rich_hooks, warn
        from sparse_adapt.training.pipeline import run_pipeline
        from sparse_adapt.training.rundir import reference_of, same_place, trained_on

        started = reference_of(base) if reference is None else None
        if started is not None and not same_place(started, base):
            # The advice diagnose gives had lost offline-splade-tiny's recommended settings so (documents 64x denser);
            # an extend-vocab output as its own reference already fires its domain tokens.
            made = "trained" if trained_on(base) is not None else "extended"  # through any chain of runs
            warn(f"{base} was {made} from {started}: give --reference {started} to compare with it (knowledge "
                 "preservation, validation) and to train with the settings recommended for it; without it they are "
                 "those of the model itself, which may fire its domain tokens already")
        with rich_hooks() as hooks:
            final = run_pipeline(
                base=base, corpus=corpus, terms=terms, dictionary=dictionary, train=train_file, out=out,
                stages=stages, config=config, seed=seed, hooks=hooks, device=device, overwrite=overwrite,
                valid=valid, reference=reference,
            )
        from accelerate import PartialState

        if PartialState().is_main_process:  # under `accelerate launch`, one line, not one per process
            console.print(f"model: {escape(str(final))}")
