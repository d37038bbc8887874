"""``sparse-adapt tune``: Optuna search of the distill loss weights and learning rate on the
validation split; writes the best config as TOML for ``train --config`` (``training/tuning.py``)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Optional

import typer

from sparse_adapt.cli.output import BASE_HELP


def register(app: typer.Typer) -> None:
    @app.command()
    def tune(
        base: str = typer.Option("offline-minilm", "--base", help=BASE_HELP),
        corpus: Path = typer.Option(..., "--corpus", help="docs.jsonl of the domain corpus."),
        terms: Path = typer.Option(..., "--terms", help="domain_terms.json: category -> list of terms."),
        dictionary: Path = typer.Option(..., "--dictionary", help="dictionary.jsonl: term, definition, examples."),
        train_file: Path = typer.Option(..., "--train", help="train.jsonl: queries with teacher-scored candidates."),
        valid: Optional[Path] = typer.Option(
            None, "--valid", help="Validation queries (train.jsonl format). tune needs validation: this, "
            "--valid-fraction, or distill.valid_fraction > 0 in --config."
        ),
        valid_fraction: Optional[float] = typer.Option(
            None, "--valid-fraction", help="Hold out this fraction of --train's queries (seeded, per query kind) as "
            "the validation split; sets distill.valid_fraction, so best.toml holds it too.",
        ),
        out: Path = typer.Option(..., "--out", help="Study directory: prefix/, study.db (a rerun with the same inputs resumes it), best.toml, trials.md, trials.json, trials/."),
        config: Optional[Path] = typer.Option(None, "--config", help="Starting config (JSON or TOML), as for train."),
        trials: int = typer.Option(20, "--trials", min=1, help="Trial budget (each trial is one distill run; trial "
                                   "0 runs the config's own values, and TPE samples at random until 10 have run)."),
        space_file: Optional[Path] = typer.Option(
            None, "--space", help="Search space (TOML or JSON): name = \\[low, high] (log scale) or "
            "{low, high, log} per float distill setting; replaces the default (lr, kd, ret, sp, dom, ctr, qexp, pres)."
        ),
        seed: int = typer.Option(0, "--seed", min=0, max=2**32 - 1,
                                help="Seeds the TPE sampler, the validation split and every run."),
        overwrite: bool = typer.Option(False, "--overwrite", help="Write the study into a non-empty --out that holds "
                                       "no earlier study (beside its files, replacing same-named ones); retrain a "
                                       "prefix/ made with other settings."),
    ) -> None:
        """Search distill weights and learning rate (TPE, median pruning); write OUT/best.toml."""
        from sparse_adapt.destination import check_not_an_input
        from sparse_adapt.cli.output import console, rich_hooks, wrote
        from sparse_adapt.data import load_dictionary, load_domain_terms, load_train
        from sparse_adapt.errors import ConfigError
        from sparse_adapt.progress import signed
        from sparse_adapt.report.files import output_kind
        from sparse_adapt.training.config_files import load_config
        from sparse_adapt.training.pipeline import run_pipeline
        from sparse_adapt.training.stages import TrainData
        from sparse_adapt.training.tuning import PREFIX_STAGES, check_inputs_outside_study, load_space, run_tuning

        given = (corpus, terms, dictionary, train_file, valid, config, space_file, base)
        check_not_an_input(out, given, holding=False)  # --out is no input, nor inside an input's folder
        check_inputs_outside_study(out, given)  # nor at a path the study writes
        # --overwrite wrote the study's prefix/ into a benchmark's, which then refused its own folder.
        if out.is_dir() and (kind := output_kind(out)) not in (None, "tune"):
            raise ConfigError(f"--out {out} holds a `sparse-adapt {kind}` output, not a tune study: give another --out")
        space = load_space(space_file) if space_file is not None else None  # before any training
        cfg = load_config(config, base)
        if valid_fraction is not None:
            if valid is not None:
                raise ConfigError("--valid and --valid-fraction both choose the validation queries; pass one of them")
            if not 0.0 < valid_fraction < 1.0:  # written so that NaN fails too
                raise ConfigError(f"--valid-fraction must be between 0 and 1 (exclusive), got {valid_fraction}")
            cfg.distill.valid_fraction = valid_fraction
        data = TrainData(
            corpus=Path(corpus), terms=load_domain_terms(terms), dictionary=load_dictionary(dictionary),
            train=load_train(train_file), valid=load_train(valid) if valid is not None else None,
        )
        with rich_hooks() as hooks:

            def prefix(directory: Path) -> Path:
                return run_pipeline(
                    base=base, corpus=corpus, terms=terms, dictionary=dictionary, train=train_file, out=directory,
                    stages=PREFIX_STAGES, config=cfg, seed=seed, hooks=hooks, overwrite=overwrite,
                    config_source=config,
                )

            summary = run_tuning(data, out, base, trials, seed, cfg, prefix=prefix, space=space, hooks=hooks,
                                 overwrite=overwrite, valid_path=valid,
                                 input_paths={"corpus": corpus, "terms": terms, "dictionary": dictionary, "train": train_file})
        console.print(f"best trial {summary['best_trial']}: objective {signed(summary['best_value'], 4)}")
        usage = summary["usage"].replace("best.toml", shlex.quote(str(out / "best.toml")), 1)  # pasted as it reads
        wrote(out / "best.toml", f" (use: {usage}) and {out / 'trials.md'}")
