"""CLI command ``evaluate``: nDCG@10, MRR@10 and Recall@5 of a model (ranx metrics).

Scoring is exact and in memory by default (every document for every query); ``--index``
ranks through Lucene instead. Data come from ``--docs/--queries/--qrels`` files or from
``--dataset`` (an ir_datasets id or a local BEIR folder, read by ir_datasets).
``--compare`` evaluates a second system (a run file or a model, scored in memory) and
prints ranx's comparison table with a paired significance test.
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Optional

import typer
from rich.table import Table
from rich.text import Text

from sparse_adapt.cli.output import (
    BASE_HELP, FEEDBACK_DOCS_OPTION, FEEDBACK_OPTION, FEEDBACK_TERMS_OPTION, FEEDBACK_WEIGHT_OPTION, FILE_PATH,
    console, feedback_settings, searched_as, warn,
)
from sparse_adapt.data import Document, Qrels, Query
from sparse_adapt.errors import ConfigError
from sparse_adapt.progress import counted

if TYPE_CHECKING:
    from sparse_adapt.modeling.encoder import SpladeEncoder
    from sparse_adapt.retrieval.feedback import Feedback


# ranx's paired tests; "student" (paired t-test) is ranx's default and needs no sampling.
STAT_TESTS = ("student", "fisher", "tukey")
# .json is read in ranx's JSON layout, .lz4 by ranx, any other run file as TREC (data/runs.py).
# A --compare ending so is a run file, never a model name (no hub lookup for a mistyped path).
_RUN_SUFFIXES = {".json", ".trec", ".txt", ".run", ".tsv", ".lz4"}


@dataclass
class EvalData:
    documents: Callable[[], Iterable[Document]]  # called only when something scores in memory
    queries: list[Query]
    qrels: Qrels
    name: str
    # How messages call the qrels, queries and documents (file names, or the data set).
    names: tuple[str, str, str] = ("the qrels", "the queries", "the documents")


def _load_data(ctx: typer.Context, docs: Optional[Path], queries: Optional[Path], qrels: Optional[Path],
               dataset: Optional[str]) -> EvalData:
    from sparse_adapt.data import load_documents, load_qrels, load_queries

    if dataset is not None:
        given = [f"--{n}" for n, v in (("docs", docs), ("queries", queries), ("qrels", qrels)) if v is not None]
        if given:
            raise ConfigError(f"--dataset reads documents, queries and qrels itself; drop {', '.join(given)}")
        from sparse_adapt.errors import first_line
        from sparse_adapt.retrieval.datasets import DatasetError, load_dataset

        ds = load_dataset(dataset)
        try:
            return EvalData(ds.documents, ds.queries(), ds.qrels(), dataset,
                            (f"{dataset} qrels", f"{dataset} queries", f"{dataset} documents"))
        except OSError as e:  # ir_datasets downloads lazily: no network surfaces here
            raise DatasetError(f"cannot read ir_datasets {dataset!r}: {first_line(e)[:200]}") from None
    missing = [f"--{n}" for n, v in (("queries", queries), ("qrels", qrels)) if v is None]
    if missing:
        ctx.fail(f"missing {' and '.join(missing)} (or pass --dataset)")  # a usage error: the CLI names the command
    documents = (lambda: load_documents(docs)) if docs is not None else None
    return EvalData(documents, load_queries(queries), load_qrels(qrels), str(docs or qrels),
                    (str(qrels), str(queries), str(docs) if docs is not None else "the documents"))


def _warn_truncated(splade, data: EvalData, documents: list[Document] | None) -> None:
    from sparse_adapt.modeling.truncation import truncation_note

    notes = [truncation_note(splade, [q.text for q in data.queries], "query")]
    if documents is not None:
        notes.append(truncation_note(splade, [d.text for d in documents], "document"))
    for note in notes:
        if note:
            warn(note)


def _in_memory(
    model: "str | SpladeEncoder", data: EvalData, documents: list[Document], notes: bool = True,
    max_active_dims: int | None = None, feedback: Feedback | None = None,
) -> dict[str, dict[str, float]]:
    from sparse_adapt.retrieval.evaluation import score_in_memory
    from sparse_adapt.modeling.encoder import SpladeEncoder

    splade = model if isinstance(model, SpladeEncoder) else SpladeEncoder.from_pretrained(model)
    if notes:
        _warn_truncated(splade, data, documents)
    return score_in_memory(splade, documents, data.queries, max_active_dims=max_active_dims, feedback=feedback)


def _retriever(model: str, index: Path, data: EvalData):
    from sparse_adapt.modeling.encoder import SpladeEncoder
    from sparse_adapt.retrieval.searcher import LuceneRetriever

    retriever = LuceneRetriever(index, SpladeEncoder.from_pretrained(model))
    mismatch = retriever.model_warning(model)
    if mismatch:
        warn(mismatch)
    _warn_truncated(retriever.encoder.splade, data, None)
    return retriever


def _is_run(compare: str) -> bool:
    """Whether ``--compare`` names a run file (else a model)."""
    return Path(compare).is_file() or Path(compare).suffix in _RUN_SUFFIXES


def _json_safe(value):
    """``value`` with NaN and infinities as null: ranx gives identical runs a NaN p-value,
    and a bare ``NaN`` is no JSON (Python's own reader refuses it with ``parse_constant``)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def _print_metrics(title: str, metrics: dict[str, float]) -> None:
    # The title on a line of its own: as the table's title it wrapped to the narrow table,
    # cutting a file name mid-word. Text: file and model names are no markup.
    console.print(Text(title, style="italic"))
    table = Table()
    table.add_column("metric")
    table.add_column("value", justify="right")
    for m, v in metrics.items():
        table.add_row(m, f"{v:.4f}")
    console.print(table)


def evaluate(
    ctx: typer.Context,
    model: str = typer.Option(..., "--model", help=BASE_HELP),
    docs: Optional[Path] = typer.Option(None, "--docs", help="docs.jsonl (not needed with --index)."),
    queries: Optional[Path] = typer.Option(None, "--queries", help="queries.jsonl (or .tsv: qid, text)."),
    qrels: Optional[Path] = typer.Option(
        None, "--qrels", help="TREC qrels (qid 0 doc_id grade) or BEIR's (qid doc_id grade)."
    ),
    dataset: Optional[str] = typer.Option(
        None, "--dataset", help="ir_datasets id (e.g. beir/scifact/test) or a local BEIR folder (corpus.jsonl, "
        "queries.jsonl, qrels/test.tsv); replaces --docs/--queries/--qrels."
    ),
    index: Optional[Path] = typer.Option(None, "--index", help="Rank through this Lucene index instead of in memory."),
    depth: Optional[int] = typer.Option(
        None, "--depth", min=10, help="With --index: hits retrieved per query (default 100; in memory every document "
        "with a score counts)."
    ),
    compare: Optional[str] = typer.Option(
        None, "--compare", help="Second system: a run file (TREC, ranx JSON or .lz4) or a model, scored in memory."
    ),
    stat_test: Optional[str] = typer.Option(
        None, "--stat-test", help=f"With --compare: ranx significance test, {', '.join(STAT_TESTS)} (default student)."
    ),
    max_p: Optional[float] = typer.Option(
        None, "--max-p", min=0.0, max=1.0, help="With --compare: p-value threshold of the test (default 0.05)."
    ),
    max_active_dims: Optional[int] = typer.Option(
        None, "--max-active-dims", min=1,
        help="In memory: cut --model's document vectors to their N largest weights, as `export --max-active-dims` "
        "does (not the --compare model's).",
    ),
    feedback: bool = FEEDBACK_OPTION,
    feedback_docs: Optional[int] = FEEDBACK_DOCS_OPTION,
    feedback_weight: Optional[float] = FEEDBACK_WEIGHT_OPTION,
    feedback_terms: Optional[int] = FEEDBACK_TERMS_OPTION,
    save_run: Optional[Path] = typer.Option(None, "--save-run", **FILE_PATH, help="Write this system's run (TREC format)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing --save-run file."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (see README)."),
) -> None:
    """Rank every document for every query (with --index: Lucene's top --depth) and report nDCG@10,
    MRR@10 and Recall@5 (ranx)."""
    from sparse_adapt.destination import check_output
    from sparse_adapt.retrieval.evaluation import (
        DEFAULT_METRICS, check_qrels, check_run_path, evaluate_run, quiet_ranx, save_run_file,
    )

    # Accepted and then ignored, each of these would pass for a setting of the run.
    unused = [flag for flag, given, needs in (
        ("--stat-test", stat_test is not None, compare), ("--max-p", max_p is not None, compare),
        ("--overwrite", overwrite, save_run),
    ) if given and needs is None]
    if unused:
        raise ConfigError(f"{unused[0]} applies to {'--save-run' if unused[0] == '--overwrite' else '--compare'}, "
                          "which was not given")
    stat_test, max_p = stat_test or "student", 0.05 if max_p is None else max_p
    if stat_test not in STAT_TESTS:
        raise ConfigError(f"--stat-test must be one of {', '.join(STAT_TESTS)}, got {stat_test!r}")
    if docs is not None and index is not None and (compare is None or _is_run(compare)):
        raise ConfigError("--docs is not read with --index (the index holds the documents); drop it, or --compare "
                          "a model, which is scored in memory over --docs")
    if max_active_dims is not None and index is not None:
        raise ConfigError("--max-active-dims applies to in-memory scoring; an --index holds what `export` wrote")
    if depth is not None and index is None:
        raise ConfigError("--depth applies to --index (Lucene's hits per query); in memory every document is ranked")
    fb = feedback_settings(feedback, feedback_docs, feedback_weight, feedback_terms, index=index)
    if save_run is not None:
        from sparse_adapt.retrieval.datasets import local_beir_files

        # A local BEIR folder's files are inputs too: a run written over corpus.jsonl replaced the data set.
        folder = list(local_beir_files(dataset).values()) if dataset is not None and Path(dataset).is_dir() else []
        check_output(save_run, overwrite, kind="file", flag="--save-run",
                     inputs=(docs, queries, qrels, compare, index, model, *folder))
        check_run_path(save_run, "--save-run")
    data = _load_data(ctx, docs, queries, qrels, dataset)
    other_run = None  # --compare's run file, read before any encoding
    compare_model = None  # loaded before --model scores anything: a typo in its name cost that whole first run
    if compare is not None and _is_run(compare):
        from sparse_adapt.data.runs import load_run  # TREC, ranx JSON or ranx's .lz4, checked alike
        from sparse_adapt.retrieval.evaluation import import_ranx

        import_ranx()  # first: an ir_datasets folder it cannot make is one line, before ranx reads a .lz4
        other_run = load_run(Path(compare))
    elif compare is not None:
        from sparse_adapt.modeling.encoder import SpladeEncoder

        compare_model = SpladeEncoder.from_pretrained(compare)
    documents = None
    if index is None or (compare is not None and other_run is None):
        if data.documents is None:
            raise ConfigError("in-memory scoring needs --docs (or --dataset); or pass --index to rank through Lucene")
        documents = list(data.documents())
    doc_ids = {d.doc_id for d in documents} if documents is not None else None
    names = data.names
    retriever = _retriever(model, index, data) if index is not None else None
    if doc_ids is None:  # through Lucene alone: the judged documents the index holds (they are few)
        judged = {d for q in data.queries if q.qid in data.qrels for d in data.qrels[q.qid]}
        doc_ids = {d for d in judged if retriever.holds(d)}
        names = (*names[:2], f"the index {index}")
    for line in check_qrels(data.qrels, [q.qid for q in data.queries], doc_ids, names):
        warn(line)
    run = (retriever.run(data.queries, k=depth or 100, feedback=fb) if retriever is not None
           else _in_memory(model, data, documents, max_active_dims=max_active_dims, feedback=fb))
    metrics = evaluate_run(data.qrels, run, qids=list(run))  # check_qrels said which judged queries are not asked
    if save_run is not None:
        empty = [q for q in save_run_file(run, save_run, searched_as(model, fb)) if q in data.qrels]
        if empty:  # the metrics count them as 0
            warn(f"{counted(len(empty), 'evaluated query', 'evaluated queries')} retrieved no document and "
                 f"{'has' if len(empty) == 1 else 'have'} no line in {save_run} (e.g. {', '.join(empty[:5])}): "
                 "trec_eval scores them only with -c, and a tool averaging over the run's own queries scores the "
                 "run higher than these figures")
    how = f"Lucene index {index}" if index is not None else "in memory"
    if max_active_dims is not None:
        how += f", documents cut to {max_active_dims} terms"
    if fb is not None:
        how += f", Rocchio feedback from {fb.docs} document(s) at weight {fb.weight:g}, {fb.terms} terms"
    if compare is None:
        if as_json:
            print(json.dumps(metrics))
        else:
            evaluated = sum(q.qid in data.qrels for q in data.queries)
            _print_metrics(f"{model} on {data.name}, {counted(evaluated, 'query', 'queries')} ({how})", metrics)
        return

    from ranx import Qrels as RanxQrels
    from ranx import compare as ranx_compare

    from sparse_adapt.retrieval.evaluation import ranx_run

    how_searched = [w for w, used in (("lucene", index is not None), ("feedback", fb is not None)) if used]
    name_a = f"{model} ({', '.join(how_searched)})" if how_searched else model
    if other_run is None:
        other_run = _in_memory(compare_model, data, documents, notes=False)
    judged = [q.qid for q in data.queries if q.qid in data.qrels]
    missing = [q for q in judged if q not in other_run]
    if len(missing) == len(judged):
        raise ConfigError(f"--compare {compare}: the run has none of the evaluated queries")
    if missing:  # ranx scores them 0 for that system: a comparison the user should know is lopsided
        one = len(missing) == 1
        warn(f"--compare {compare}: {len(missing)} of {len(judged)} evaluated queries {'is' if one else 'are'} not in "
             f"the run and {'counts' if one else 'count'} as 0 for it (e.g. {', '.join(missing[:5])})")
    ranx_qrels = RanxQrels({q: data.qrels[q] for q in judged})
    this = ranx_run({q: run[q] for q in judged if q in run}, name=name_a)
    evaluated = set(judged)
    for name, ranked in ((model, run), (compare, other_run)):
        if not any(ranked.get(q) for q in evaluated):  # ranx's comparison fails on max() of nothing
            raise ConfigError(f"--compare: {name} retrieved no document for any evaluated query; there is "
                              "nothing to compare")
    other = ranx_run({q: s for q, s in other_run.items() if q in evaluated},
                     name=f"{compare} (compare)" if compare == name_a else compare)
    one = len(judged) < 2
    if one:
        warn(f"--compare: 1 evaluated query: a paired {stat_test} test needs 2 or more, so no difference is marked")
    with quiet_ranx(), warnings.catch_warnings():
        if one:  # scipy's statistics of one pair: NaN, with two RuntimeWarnings whose source lines only puzzle
            warnings.simplefilter("ignore", RuntimeWarning)
        report = ranx_compare(
            ranx_qrels, [this, other], list(DEFAULT_METRICS), stat_test=stat_test, max_p=max_p, make_comparable=True,
        )
    if as_json:
        print(json.dumps(_json_safe({"metrics": metrics, "comparison": report.to_dict()})))
        return
    console.print(f"{counted(len(judged), 'query', 'queries')}, {stat_test} paired test, p < {max_p} marked by superscripts ({how})")
    console.print(str(report), highlight=False, markup=False)


def register(app: typer.Typer) -> None:
    app.command("evaluate")(evaluate)
