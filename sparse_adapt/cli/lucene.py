"""CLI commands for the Lucene path: ``export``, ``index``, ``search``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from sparse_adapt.cli.output import (
    BASE_HELP, FEEDBACK_DOCS_OPTION, FEEDBACK_TERMS_OPTION, FEEDBACK_WEIGHT_OPTION, FILE_PATH, OVERWRITE_HELP,
    check_thread_count, console, feedback_option, feedback_settings, require_text, searched_as, warn, wrote,
)
from sparse_adapt.progress import counted


def export(
    model: str = typer.Option(..., "--model", help=BASE_HELP),
    docs: Path = typer.Option(..., "--docs", help="docs.jsonl: {doc_id, text} per line (read as a stream)."),
    out: Path = typer.Option(..., "--out", help="Output JsonVectorCollection directory (replaced atomically)."),
    scale: int = typer.Option(100, "--scale", min=1, help="Impact = round(weight * scale); at most 1000."),
    batch_size: int = typer.Option(32, "--batch-size", min=1, help="Documents per forward pass."),
    max_active_dims: Optional[int] = typer.Option(
        None, "--max-active-dims", min=1,
        help="Keep each document's N largest weights (fewer postings); default: every active term.",
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help=OVERWRITE_HELP),
) -> None:
    """Encode documents into Pyserini's JsonVectorCollection ({id, contents, vector: {token: int}})."""
    from sparse_adapt.destination import check_output
    from sparse_adapt.data import require_file
    from sparse_adapt.retrieval.export import ExportConfig, empty_sentence, export_vectors
    from sparse_adapt.modeling.encoder import SpladeEncoder
    from sparse_adapt.modeling.hub import model_reference
    from sparse_adapt.modeling.truncation import truncation_sentence

    from sparse_adapt.cli.output import rich_hooks

    require_file(docs)
    check_output(out, overwrite, inputs=(model, docs))
    config = ExportConfig(scale=scale, batch_size=batch_size, max_active_dims=max_active_dims)
    splade = SpladeEncoder.from_pretrained(model)
    with rich_hooks() as hooks:
        stats = export_vectors(splade, docs, out, config, model_name=model_reference(model), progress=hooks,
                               overwrite=overwrite)
    if stats.truncated:
        warn(truncation_sentence(stats.truncated, stats.documents, splade.max_length("document")))
    if stats.empty:
        warn(empty_sentence(stats.empty, stats.documents, stats.scale, stats.empty_ids))
    wrote(out, f" ({counted(stats.documents, 'document')}, {counted(stats.postings, 'posting')}, "
               f"{stats.docs_per_second:.1f} docs/s, scale {stats.scale}"
               + (f", at most {stats.max_active_dims} terms per document" if stats.max_active_dims else "") + ")")


def index(
    vectors: Path = typer.Option(..., "--vectors", help="Directory written by `sparse-adapt export`."),
    index_dir: Path = typer.Option(..., "--index", help="Lucene index directory (replaced atomically)."),
    threads: int = typer.Option(1, "--threads-index", min=1, help="Anserini indexing threads."),
    store_vectors: bool = typer.Option(
        False, "--store-vectors", help="Also store each document's impacts (a larger index), for search/evaluate --feedback."
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help=OVERWRITE_HELP),
) -> None:
    """Build a Lucene impact index (Pyserini --impact --pretokenized) with a Java 21+ found by itself."""
    from sparse_adapt.destination import check_output
    from sparse_adapt.retrieval.export import empty_sentence, inexact_sentence
    from sparse_adapt.retrieval.lucene import build_index, describe_index

    check_thread_count("--threads-index", threads)
    check_output(index_dir, overwrite, flag="--index", inputs=(vectors,))
    meta, check = describe_index(vectors, store_vectors)
    seconds = build_index(vectors, index_dir, threads, store_vectors, meta, overwrite=overwrite)
    if check.empty:
        warn(empty_sentence(check.empty, meta.documents + check.empty, meta.scale, check.empty_ids))
    if (inexact := inexact_sentence(check, meta.scale)) is not None:
        warn(inexact)
    console.print(f"[green]indexed[/green] {counted(meta.documents, 'document')} into {escape(str(index_dir))} "
                  f"in {seconds:.1f} s")


def search(
    query: Optional[str] = typer.Argument(None, help="Query text (or --queries FILE)."),
    index_dir: Path = typer.Option(..., "--index", help="Index built by `sparse-adapt index`."),
    model: Optional[str] = typer.Option(None, "--model", help="The model that exported the documents."),
    onnx: Optional[Path] = typer.Option(
        None, "--onnx", help="Encode the query in ONNX Runtime with this `sparse-adapt onnx` export instead of --model."
    ),
    k: int = typer.Option(10, "--k", "-k", min=1, help="Number of hits."),
    feedback: bool = feedback_option(
        "Search with Rocchio pseudo-relevance feedback: the query plus a share of its best hits' vectors, "
        "searched again (needs an index built with `index --store-vectors`)."
    ),
    feedback_docs: Optional[int] = FEEDBACK_DOCS_OPTION,
    feedback_weight: Optional[float] = FEEDBACK_WEIGHT_OPTION,
    feedback_terms: Optional[int] = FEEDBACK_TERMS_OPTION,
    docs: Optional[Path] = typer.Option(
        None, "--docs", help="docs.jsonl the index was built from: show each hit's text (read for the hits only)."
    ),
    as_json: bool = typer.Option(False, "--json", help='Print [{"doc_id", "score"}, ...] (and "text" with --docs).'),
    queries: Optional[Path] = typer.Option(
        None, "--queries", help="queries.jsonl (or .tsv) instead of QUERY: search every query (no qrels needed) and "
        "write the top --k of each to --save-run.",
    ),
    save_run: Optional[Path] = typer.Option(None, "--save-run", **FILE_PATH, help="With --queries: the TREC run file written."),
    threads: Optional[int] = typer.Option(None, "--threads-search", min=1, help="With --queries: Lucene search threads "
                                          "(default 1)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing --save-run file."),
) -> None:
    """Encode QUERY with the model (same quantisation) and search the index through Lucene;
    or search every query of --queries and write a TREC run."""
    from sparse_adapt.errors import ConfigError
    from sparse_adapt.modeling.encoder import SpladeEncoder
    from sparse_adapt.modeling.truncation import truncated
    from sparse_adapt.retrieval.searcher import LuceneRetriever

    if (query is None) == (queries is None):
        raise ConfigError("search needs a QUERY or --queries FILE (one of the two)")
    if queries is not None:
        if save_run is None:
            raise ConfigError("search --queries writes a TREC run: pass --save-run RUN")
        if docs is not None or as_json:
            raise ConfigError(f"{'--docs' if docs is not None else '--json'} shows one QUERY's hits; "
                              "with --queries the hits go to --save-run")
    else:
        given = [flag for flag, v in (("--save-run", save_run), ("--threads-search", threads), ("--overwrite", overwrite))
                 if v not in (None, False)]
        if given:
            raise ConfigError(f"{given[0]} applies to --queries (a run file); for one QUERY use --json")
    check_thread_count("--threads-search", threads)
    if query is not None:
        require_text(query, "query")
    fb = feedback_settings(feedback, feedback_docs, feedback_weight, feedback_terms, index=index_dir)
    if (model is None) == (onnx is None):
        raise ConfigError("search needs exactly one of --model (PyTorch) or --onnx (ONNX Runtime) for the query")
    batch = None
    if queries is not None:
        from sparse_adapt.destination import check_output
        from sparse_adapt.data import load_queries
        from sparse_adapt.retrieval.evaluation import check_run_path

        check_output(save_run, overwrite, kind="file", flag="--save-run", inputs=(queries, index_dir, model, onnx))
        check_run_path(save_run, "--save-run")
        batch = load_queries(queries)
    if onnx is not None:
        from sparse_adapt.modeling.onnx import OnnxSpladeEncoder

        encoder = OnnxSpladeEncoder(onnx)
        model = encoder.meta.source
    else:
        encoder = SpladeEncoder.from_pretrained(model)
    retriever = LuceneRetriever(index_dir, encoder)
    mismatch = retriever.model_warning(model)
    if mismatch:
        warn(mismatch)
    if batch is not None:
        _search_all(retriever, encoder, batch, k, threads or 1, fb, save_run, model)
        return
    if truncated(encoder, [query], "query"):  # a SpladeEncoder or an ONNX export: both have tokenizer and lengths
        warn(f"the query is longer than {encoder.max_length('query')} pieces: only its start was searched")
    if docs is not None:
        from sparse_adapt.data import require_file

        require_file(docs)  # checked before the search, which starts a JVM
    hits = retriever.search(query, k, feedback=fb)
    texts = _hit_texts(docs, [h.doc_id for h in hits]) if docs is not None else {}
    if as_json:
        print(json.dumps([{"doc_id": h.doc_id, "score": h.score, **({"text": texts.get(h.doc_id)} if docs else {})}
                          for h in hits]))
        return
    table = Table(title=f"{len(hits)} hits", caption=f"score: sum of quantised impacts (scale {retriever.scale})")
    table.add_column("rank", justify="right")
    table.add_column("doc_id")
    table.add_column("score", justify="right")
    if docs is not None:
        table.add_column("text", overflow="ellipsis", no_wrap=True, max_width=SNIPPET_WIDTH)
    for rank, h in enumerate(hits, 1):
        row = [str(rank), Text(h.doc_id), f"{h.score:.0f}"]  # Text: an id or text is no markup
        if docs is not None:
            row.append(Text(texts.get(h.doc_id, "(not in --docs)")))
        table.add_row(*row)
    console.print(table)


def _search_all(retriever, encoder, batch, k: int, threads: int, fb, save_run: Path, model: str) -> None:
    """Pyserini's batch search: every query's top ``k`` (ties settled as ``evaluate --index``
    settles them) written as a TREC run; queries matching no document are named."""
    from sparse_adapt.modeling.truncation import truncation_note
    from sparse_adapt.retrieval.evaluation import save_run_file

    note = truncation_note(encoder, [q.text for q in batch], "query")
    if note:
        warn(note)
    run = retriever.run(batch, k=k, threads=threads, feedback=fb)
    empty = save_run_file(run, save_run, searched_as(model, fb))
    if empty:
        warn(f"{counted(len(empty), 'query', 'queries')} of {len(batch)} matched no document and "
             f"{'has' if len(empty) == 1 else 'have'} no line in the run (e.g. {', '.join(empty[:5])})")
    wrote(save_run, f" ({counted(len(batch), 'query', 'queries')}, {counted(sum(map(len, run.values())), 'hit')}, "
                    f"at most {k} per query)")


# Characters of a hit's text in the table: one terminal line beside rank, id and score.
SNIPPET_WIDTH = 60


def _hit_texts(docs: Path, ids: list[str]) -> dict[str, str]:
    """The texts of ``ids`` in ``docs``; ids the file lacks are warned about: the index was
    built from other documents."""
    from sparse_adapt.data import find_documents

    found = find_documents(docs, ids)
    missing = [i for i in ids if i not in found]
    if missing:
        warn(f"{len(missing)} of {len(ids)} hits are not in {docs} (e.g. {missing[0]}): "
             "is it the corpus the index was built from?")
    return found


def register(app: typer.Typer) -> None:
    app.command("export")(export)
    app.command("index")(index)
    app.command("search")(search)
