"""CLI commands of the diagnostics package: ``diagnose``, ``explain``, ``inspect``.

Defaults make every command work on a fresh install: the offline base and the bundled
Gatrocraptic corpus, by the rule of ``sparse_adapt/defaults.py`` (companion files default
to the bundled ones only when the documents are the bundled ones).
"""

from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from sparse_adapt.cli.output import (
    BASE_HELP, FEEDBACK_DOCS_OPTION, FEEDBACK_TERMS_OPTION, FEEDBACK_WEIGHT_OPTION, console, err_console,
    feedback_option, feedback_settings, require_text,
)
from sparse_adapt.defaults import companion
from sparse_adapt.errors import ConfigError

MODEL_HELP = BASE_HELP
DOCS_HELP = ("docs.jsonl (default: the bundled Gatrocraptic corpus; a --model trained on another corpus needs "
             "--docs).")
QUERIES_HELP = "queries.jsonl (default: the bundled queries when --docs is the bundled corpus)."
JSON_HELP = "Print one JSON object (schema in the README) instead of tables."

DIAGNOSE_FEEDBACK_HELP = (
    "Also check the queries' expansion after Rocchio pseudo-relevance feedback from --docs (as "
    "`evaluate --feedback`): do queries without the term reach it through their best document?"
)
INSPECT_FEEDBACK_HELP = (
    "Also measure the queries after Rocchio pseudo-relevance feedback from --docs (as `evaluate "
    "--feedback`): their non-zero tokens and FLOPS, the search cost feedback adds."
)
EXPLAIN_FEEDBACK_HELP = (
    "Explain the query after Rocchio pseudo-relevance feedback (as `evaluate --feedback`): which "
    "documents were fed back and which tokens they added."
)


def _load_model(model: str, json_out: bool):
    from sparse_adapt.modeling.encoder import SpladeEncoder

    with err_console.status(f"loading {model}") if not json_out else nullcontext():
        return SpladeEncoder.from_pretrained(model)


def _docs_for(model: str, docs: Optional[Path]) -> Path:
    """``--docs``, else the bundled corpus, unless ``--model`` was trained on another corpus: its
    checks, scores and advice would then be about documents and queries of another domain (an
    adapt run on fish farming was told to add its term to the bundled Gatrocraptic terms file)."""
    if docs is not None:
        return docs
    from sparse_adapt.data.reading import file_sha256
    from sparse_adapt.defaults import BUNDLED
    from sparse_adapt.training.rundir import trained_on

    corpus = ((trained_on(model) or {}).get("inputs") or {}).get("corpus")
    if isinstance(corpus, str) and corpus != file_sha256(BUNDLED.docs):
        raise ConfigError(f"--model {model} was trained on another corpus than the bundled Gatrocraptic one, the "
                          "default of --docs: give --docs (the documents it was trained on)")
    return BUNDLED.docs


def _show(result, json_out: bool, render) -> None:
    """``--json``: the result's dict on stdout and nothing else; otherwise rich tables."""
    if json_out:
        typer.echo(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
    else:
        render(result, console)


def diagnose(
    term: str = typer.Argument(..., help="The domain term, as users write it (e.g. Gatrocraptic)."),
    model: str = typer.Option("offline-minilm", "--model", help=MODEL_HELP),
    docs: Optional[Path] = typer.Option(None, "--docs", help=DOCS_HELP),
    doc: Optional[str] = typer.Option(None, "--doc", help="Analyse this doc_id (default: first document containing the term)."),
    terms: Optional[Path] = typer.Option(
        None, "--terms", help="domain_terms.json the term is checked against (default: the mined terms when --model is "
        "an adapt run's final, else the bundled terms when --docs is the bundled corpus; else no terms-file check)."
    ),
    queries: Optional[Path] = typer.Option(None, "--queries", help=QUERIES_HELP + " Checked for expansion to the term."),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
    feedback: bool = feedback_option(DIAGNOSE_FEEDBACK_HELP),
    feedback_docs: Optional[int] = FEEDBACK_DOCS_OPTION,
    feedback_weight: Optional[float] = FEEDBACK_WEIGHT_OPTION,
    feedback_terms: Optional[int] = FEEDBACK_TERMS_OPTION,
) -> None:
    """Why does the model give TERM (no) weight? Vocabulary, logits, weight, rank, fixes."""
    require_text(term, "term")  # before the heavy imports: a typo should fail at once
    fb = feedback_settings(feedback, feedback_docs, feedback_weight, feedback_terms)
    from diagnostics import Sources, diagnose_term
    from diagnostics.render import render_term
    from sparse_adapt.corpus.adapt import adapt_run_of, generated_inputs
    from sparse_adapt.data import load_documents, load_domain_terms, load_queries
    from sparse_adapt.training.rundir import reference_of

    docs_path = _docs_for(model, docs)
    # Another corpus's terms are not the bundled ones: without --terms (or an adapt run's own
    # mined terms beside --model) that check is n/a.
    own = generated_inputs(model)
    # An adapt run's own files before the bundled ones: that run may have adapted to the bundled corpus.
    terms_path = terms or own.get("terms") or companion(docs_path, None, "terms")
    queries_path = companion(docs_path, queries, "queries")
    documents = load_documents(docs_path)
    term_lists = load_domain_terms(terms_path) if terms_path is not None else None
    query_list = load_queries(queries_path) if queries_path is not None else None
    if fb is not None and query_list is None:
        raise ConfigError("--feedback checks the queries' expansion after feedback; give --queries")
    if doc is not None and not any(d.doc_id == doc for d in documents):  # before the model loads
        raise ConfigError(f"--doc {doc!r}: no document with this id in {docs_path}")
    splade = _load_model(model, json_out)
    sources = Sources(
        model=model, docs=str(docs_path), terms=_str(terms_path), adapt_run=_str(adapt_run_of(model)),
        dictionary=_str(own.get("dictionary") or companion(docs_path, None, "dictionary")),
        train=_str(own.get("train") or companion(docs_path, None, "train")),
        reference=reference_of(model),
    )
    result = diagnose_term(splade, term, documents, doc_id=doc, terms=term_lists, queries=query_list, sources=sources,
                           feedback=fb)
    _show(result, json_out, render_term)


def explain(
    query: str = typer.Argument(..., help="The query text."),
    model: str = typer.Option("offline-minilm", "--model", help=MODEL_HELP),
    docs: Optional[Path] = typer.Option(None, "--docs", help=DOCS_HELP),
    k: int = typer.Option(3, "--k", "-k", help="How many top documents to explain."),
    doc: Optional[list[str]] = typer.Option(
        None, "--doc", help="Explain this document (its doc_id; repeatable) at the rank it takes, instead of the top --k."
    ),
    index: Optional[Path] = typer.Option(
        None, "--index", help="Lucene index of --docs (`sparse-adapt index`): its top --k hits are the documents "
        "explained, with exact weights, instead of encoding every document (for a large corpus)."
    ),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
    feedback: bool = feedback_option(EXPLAIN_FEEDBACK_HELP),
    feedback_docs: Optional[int] = FEEDBACK_DOCS_OPTION,
    feedback_weight: Optional[float] = FEEDBACK_WEIGHT_OPTION,
    feedback_terms: Optional[int] = FEEDBACK_TERMS_OPTION,
) -> None:
    """Explain a query: its vector, its expansions, and each top document's score as Σ q × d."""
    require_text(query, "query")
    if k < 1:
        raise ConfigError(f"--k must be >= 1, got {k}")
    fb = feedback_settings(feedback, feedback_docs, feedback_weight, feedback_terms)
    from diagnostics import explain_query
    from diagnostics.render import render_explanation
    from sparse_adapt.data import load_documents

    if index is not None and fb is not None:
        raise ConfigError("--feedback re-ranks every document of --docs; it cannot start from --index's hits")
    if index is not None and doc:
        raise ConfigError("--doc ranks the document among every document of --docs; it cannot start from --index's hits")
    docs_path = _docs_for(model, docs)
    documents = load_documents(docs_path) if index is None else None
    if doc:  # checked before the model loads (with --index, refused above)
        known = {d.doc_id for d in documents}
        if unknown := [d for d in doc if d not in known]:
            raise ConfigError(f"--doc {unknown[0]!r}: no document with this id in {docs_path}")
    splade = _load_model(model, json_out)
    if index is not None:
        documents = _index_candidates(index, splade, model, query, k, docs_path)
        if not json_out:
            err_console.print(f"documents: the top {len(documents)} hits of {escape(str(index))} (Lucene's quantised "
                              "scores); below, their exact scores and contributions", style="dim")
    result = explain_query(splade, query, documents, k, model=model, feedback=fb, doc_ids=doc or ())
    _show(result, json_out, render_explanation)


def _index_candidates(index: Path, splade, model: str, query: str, k: int, docs: Path) -> list:
    """The index's top ``k`` documents for ``query``, with their texts from ``docs``."""
    from sparse_adapt.cli.output import warn
    from sparse_adapt.data import Document, find_documents, require_file
    from sparse_adapt.retrieval.searcher import LuceneRetriever

    require_file(docs)
    retriever = LuceneRetriever(index, splade)
    mismatch = retriever.model_warning(model)
    if mismatch:
        warn(mismatch)
    hits = retriever.search(query, k)
    texts = find_documents(docs, [h.doc_id for h in hits])
    missing = [h.doc_id for h in hits if h.doc_id not in texts]
    if missing:
        raise ConfigError(f"{len(missing)} of the index's {len(hits)} hits are not in {docs} (e.g. {missing[0]}): "
                          "pass the --docs the index was built from")
    if not hits:
        raise ConfigError(f"the query matches no document of {index}")
    return [Document(h.doc_id, texts[h.doc_id]) for h in hits]


def inspect(
    model: str = typer.Option("offline-minilm", "--model", help=MODEL_HELP),
    docs: Optional[Path] = typer.Option(None, "--docs", help=DOCS_HELP),
    queries: Optional[Path] = typer.Option(None, "--queries", help=QUERIES_HELP),
    terms: Optional[Path] = typer.Option(
        None, "--terms", help="domain_terms.json whose single-token terms count as domain tokens too "
        "(default: the mined terms when --model is an adapt run's final, else the bundled terms when --docs is the "
        "bundled corpus)."
    ),
    json_out: bool = typer.Option(False, "--json", help=JSON_HELP),
    feedback: bool = feedback_option(INSPECT_FEEDBACK_HELP),
    feedback_docs: Optional[int] = FEEDBACK_DOCS_OPTION,
    feedback_weight: Optional[float] = FEEDBACK_WEIGHT_OPTION,
    feedback_terms: Optional[int] = FEEDBACK_TERMS_OPTION,
) -> None:
    """Corpus-level sparsity: non-zeros per text, estimated FLOPS, domain-token weights."""
    fb = feedback_settings(feedback, feedback_docs, feedback_weight, feedback_terms)
    from diagnostics import inspect_corpus
    from diagnostics.render import render_corpus
    from sparse_adapt.corpus.adapt import generated_inputs
    from sparse_adapt.data import load_documents, load_domain_terms, load_queries

    docs_path = _docs_for(model, docs)
    documents = load_documents(docs_path)
    queries_path = companion(docs_path, queries, "queries")
    terms_path = terms or generated_inputs(model).get("terms") or companion(docs_path, None, "terms")
    query_list = load_queries(queries_path) if queries_path is not None else None
    term_lists = load_domain_terms(terms_path) if terms_path is not None else None
    if fb is not None and query_list is None:
        raise ConfigError("--feedback measures the queries as feedback expands them; give --queries")
    splade = _load_model(model, json_out)
    result = inspect_corpus(splade, documents, query_list, term_lists, model=model, feedback=fb)
    _show(result, json_out, render_corpus)


def _str(p: Optional[Path]) -> Optional[str]:
    return None if p is None else str(p)


def register(app: typer.Typer) -> None:
    app.command("diagnose")(diagnose)
    app.command("explain")(explain)
    app.command("inspect")(inspect)
