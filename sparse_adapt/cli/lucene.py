"""CLI commands for the Lucene path: ``export``, ``index``, ``search``."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from sparse_adapt.cli.output import BASE_HELP, console


def export(
    model: str = typer.Option(..., "--model", help=BASE_HELP),
    docs: Path = typer.Option(..., "--docs", help="docs.jsonl: {doc_id, text} per line (read as a stream)."),
    out: Path = typer.Option(..., "--out", help="Output JsonVectorCollection directory (replaced atomically)."),
    scale: int = typer.Option(100, "--scale", min=1, help="Impact = round(weight * scale)."),
    batch_size: int = typer.Option(32, "--batch-size", min=1, help="Documents per forward pass."),
) -> None:
    """Encode documents into Pyserini's JsonVectorCollection ({id, contents, vector: {token: int}})."""
    from sparse_adapt.retrieval.export import ExportConfig, export_vectors
    from sparse_adapt.modeling.encoder import SpladeEncoder

    from sparse_adapt.cli.output import rich_hooks

    config = ExportConfig(scale=scale, batch_size=batch_size)
    splade = SpladeEncoder.from_pretrained(model)
    with rich_hooks() as hooks:
        stats = export_vectors(splade, docs, out, config, model_name=model, progress=hooks)
    console.print(
        f"[green]wrote[/green] {out} ({stats.documents} documents, {stats.postings} postings, "
        f"{stats.docs_per_second:.1f} docs/s, scale {stats.scale})"
    )


def index(
    vectors: Path = typer.Option(..., "--vectors", help="Directory written by `sparse-adapt export`."),
    index_dir: Path = typer.Option(..., "--index", help="Lucene index directory (replaced atomically)."),
    threads: int = typer.Option(1, "--threads-index", min=1, help="Anserini indexing threads."),
) -> None:
    """Build a Lucene impact index (Pyserini --impact --pretokenized) with a Java 21+ found by itself."""
    from sparse_adapt.retrieval.export import read_export_meta
    from sparse_adapt.retrieval.lucene import IndexMeta, build_index

    meta = read_export_meta(vectors)
    seconds = build_index(vectors, index_dir, threads)
    IndexMeta(scale=int(meta["scale"]), model=str(meta["model"]), documents=int(meta["documents"]), seconds=seconds).save(
        index_dir
    )
    console.print(f"[green]indexed[/green] {meta['documents']} documents into {index_dir} in {seconds:.1f} s")


def search(
    query: str = typer.Argument(..., help="Query text."),
    index_dir: Path = typer.Option(..., "--index", help="Index built by `sparse-adapt index`."),
    model: str = typer.Option(..., "--model", help="The model that exported the documents."),
    k: int = typer.Option(10, "--k", min=1, help="Number of hits."),
    as_json: bool = typer.Option(False, "--json", help='Print [{"doc_id", "score"}, ...].'),
) -> None:
    """Encode QUERY with the model (same quantisation) and search the index through Lucene."""
    from sparse_adapt.modeling.encoder import SpladeEncoder
    from sparse_adapt.retrieval.searcher import LuceneRetriever

    splade = SpladeEncoder.from_pretrained(model)
    retriever = LuceneRetriever(index_dir, splade)
    if retriever.meta is not None and retriever.meta.model != model:
        Console(stderr=True).print(
            f"[yellow]warning:[/yellow] the index was exported with {retriever.meta.model!r}, searching with {model!r}"
        )
    hits = retriever.search(query, k)
    if as_json:
        print(json.dumps([{"doc_id": h.doc_id, "score": h.score} for h in hits]))
        return
    table = Table(title=f"{len(hits)} hits", caption=f"score: sum of quantised impacts (scale {retriever.scale})")
    table.add_column("rank", justify="right")
    table.add_column("doc_id")
    table.add_column("score", justify="right")
    for rank, h in enumerate(hits, 1):
        table.add_row(str(rank), h.doc_id, f"{h.score:.0f}")
    console.print(table)


def register(app: typer.Typer) -> None:
    app.command("export")(export)
    app.command("index")(index)
    app.command("search")(search)
