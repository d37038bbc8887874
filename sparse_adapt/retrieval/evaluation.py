"""Exact in-memory retrieval and ranx evaluation.

Scores are exact sparse dot products ``s(q, d) = sum_t w_q^t * w_d^t`` of every query
with every document; metrics come from ranx (never re-implemented here).
"""

from __future__ import annotations

import json
import re
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Collection, Iterator, Sequence

import numpy as np
import scipy.sparse as sp

from sparse_adapt.atomic import atomic_file
from sparse_adapt.data import Document, Query
from sparse_adapt.data.documents import checked_records
from sparse_adapt.errors import ConfigError, SparseAdaptError
from sparse_adapt.modeling.encoder import SpladeEncoder
from sparse_adapt.progress import Hooks
from sparse_adapt.retrieval.feedback import Feedback, expand_in_memory
from sparse_adapt.retrieval.ranking import ranking, top_k  # noqa: F401 - top_k: callers import it from here

if TYPE_CHECKING:
    from ranx import Run  # imported where a run is evaluated: ~1.3 s of imports (numba) that train never needs

# The metrics `sparse-adapt evaluate` reports, in ranx's names; keys of its --json output.
DEFAULT_METRICS = ("ndcg@10", "mrr@10", "recall@5")


def import_ranx():
    """ranx, imported after ir_datasets (which it imports) so that a home folder ir_datasets cannot
    make is one line saying what to do."""
    from sparse_adapt.retrieval.datasets import import_ir_datasets

    import_ir_datasets()
    import ranx

    return ranx


class QrelsMismatchError(SparseAdaptError):
    """The qrels judge nothing that is being evaluated: every metric would be a meaningless 0."""


@contextmanager
def quiet_ranx() -> Iterator[None]:
    """Run ranx without numba's ``NumbaTypeSafetyWarning`` ("unsafe cast from uint64 to int64").

    ranx compiles its metric kernels on first use; a query whose ranking is empty (it shares
    no term with any document) compiles a variant whose loop index numba flags. The value is
    right (0 for that query), and the warning's file and line inside ranx would only puzzle
    a user, once per installation.
    """
    from numba.core.errors import NumbaTypeSafetyWarning

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=NumbaTypeSafetyWarning)
        yield


def _examples(ids: Sequence[str]) -> str:
    return ", ".join(ids[:5]) + (", ..." if len(ids) > 5 else "")


def load_judged(
    pairs: Sequence[tuple[str | Path, str | Path]], docs: str | Path, doc_ids: Collection[str],
) -> tuple[list[list[Query]], list[dict[str, dict[str, int]]], list[str]]:
    """Query files and their qrels (``(queries, qrels)`` per pair: a domain's own and held-out
    ones), each pair checked as `evaluate` checks one (:func:`check_qrels`, its warnings
    returned). A query id in two files is refused: one id with two texts, one silently lost.
    Each qrels file judges its own file's queries only: a held-out qrels line for a main query
    replaced that query's judgements where the files were merged."""
    from sparse_adapt.data import load_qrels, load_queries
    from sparse_adapt.errors import ConfigError

    queries: list[list[Query]] = []
    qrels: list[dict[str, dict[str, int]]] = []
    notes: list[str] = []
    seen: dict[str, str | Path] = {}  # query id -> the file it came from
    for q_file, r_file in pairs:
        part, judged = load_queries(q_file), load_qrels(r_file)
        clash = sorted(q.qid for q in part if q.qid in seen)
        if clash:
            raise ConfigError(f"{q_file}: query ids also in {seen[clash[0]]}: {', '.join(clash[:5])}")
        seen.update({q.qid: q_file for q in part})
        notes += check_qrels(judged, [q.qid for q in part], doc_ids, (str(r_file), str(q_file), str(docs)))
        own = {q.qid for q in part}
        queries.append(part)
        qrels.append({q: r for q, r in judged.items() if q in own})
    return queries, qrels, notes


def check_qrels(
    qrels: dict[str, dict[str, int]], qids: Collection[str], doc_ids: Collection[str] | None = None,
    names: tuple[str, str, str] = ("the qrels", "the queries", "the documents"),
) -> list[str]:
    """Warnings for qrels that name queries or documents the evaluation does not have.

    Unknown queries are not evaluated; unknown documents can never be retrieved and count as
    misses. When no judged query is known, or no relevant document of the judged queries is,
    every metric would be 0: that raises :class:`QrelsMismatchError` instead. ``names``: how
    to call the qrels, queries and documents in messages (file names).
    """
    qrels_name, queries_name, docs_name = names
    known_q = set(qids)
    unknown_q = sorted(q for q in qrels if q not in known_q)
    evaluated = [q for q in qrels if q in known_q]
    if not evaluated:
        raise QrelsMismatchError(
            f"{qrels_name}: none of its {len(qrels)} judged queries is in {queries_name} (e.g. {_examples(unknown_q)})"
        )
    if not any(g > 0 for q in evaluated for g in qrels[q].values()):
        raise QrelsMismatchError(
            f"{qrels_name}: no judgement of its {len(evaluated)} evaluated queries has a grade above 0; "
            "every metric would be 0"
        )
    warnings = []
    unjudged = [q for q in evaluated if not any(g > 0 for g in qrels[q].values())]
    if unjudged:  # ranx (and trec_eval) average them in as 0: the mean is lower than the rest earn
        warnings.append(
            f"{qrels_name}: {len(unjudged)} of {len(evaluated)} evaluated queries "
            f"{'has' if len(unjudged) == 1 else 'have'} no relevant document (no grade above 0) and "
            f"{'counts' if len(unjudged) == 1 else 'count'} as 0 in every metric (e.g. {_examples(unjudged)})"
        )
    if unknown_q:
        warnings.append(
            f"{qrels_name}: {len(unknown_q)} of {len(qrels)} judged queries are not in {queries_name} and are not "
            f"evaluated (e.g. {_examples(unknown_q)})"
        )
    unasked = sorted(q for q in known_q if q not in qrels)
    if unasked:  # ranx evaluates judged queries only: the count in the title would drop them unsaid
        warnings.append(
            f"{queries_name}: {len(unasked)} of {len(known_q)} queries {'has' if len(unasked) == 1 else 'have'} no "
            f"judgement in {qrels_name} and {'is' if len(unasked) == 1 else 'are'} not evaluated "
            f"(e.g. {_examples(unasked)})"
        )
    if doc_ids is not None:
        known_d = doc_ids if isinstance(doc_ids, (set, frozenset, dict)) else set(doc_ids)
        judged = sorted({d for q in evaluated for d in qrels[q]})
        unknown_d = [d for d in judged if d not in known_d]
        relevant = {d for q in evaluated for d, g in qrels[q].items() if g > 0}
        if relevant and not relevant & known_d:
            raise QrelsMismatchError(
                f"{qrels_name}: none of the {len(relevant)} relevant documents is in {docs_name} "
                f"(e.g. {_examples(sorted(relevant))}); every metric would be 0"
            )
        if unknown_d:
            warnings.append(
                f"{qrels_name}: {len(unknown_d)} of {len(judged)} judged documents are not in {docs_name}; "
                f"they can never be retrieved (e.g. {_examples(unknown_d)})"
            )
    return warnings


def score_in_memory(
    splade: SpladeEncoder,
    documents: Sequence[Document],
    queries: Sequence[Query],
    batch_size: int = 32,
    max_active_dims: int | None = None,
    feedback: Feedback | None = None,
) -> dict[str, dict[str, float]]:
    """Score every document for every query: ``{qid: {doc_id: score}}``; ``max_active_dims``
    cuts the document vectors as ``export --max-active-dims`` does (queries are never cut);
    ``feedback`` scores a second time with Rocchio-expanded queries (``feedback.py``).

    Documents sharing no active term with the query (score 0) are left out, exactly as an
    inverted index never returns them; keeping them would let the metric library order
    those ties by doc id and credit whichever relevant document sorts first.
    """
    documents, queries = checked_records(documents, "documents", "doc_id"), checked_records(queries, "queries", "qid")
    D = encode_documents(splade, documents, batch_size, max_active_dims)
    return score_vectors(encode_queries(splade, queries, batch_size), D, queries, documents, feedback)


def encode_documents(
    splade: SpladeEncoder, documents: Sequence[Document], batch_size: int = 32, max_active_dims: int | None = None,
    progress: Hooks | None = None,
) -> sp.csr_matrix:
    """The (n_docs, V) document vectors :func:`score_in_memory` scores, for callers that score
    the same corpus for several query sets or more than one way (:func:`score_vectors`)."""
    return splade.encode([d.text for d in documents], "document", batch_size, progress=progress,
                         max_active_dims=max_active_dims)


def encode_queries(splade: SpladeEncoder, queries: Sequence[Query], batch_size: int = 32) -> sp.csr_matrix:
    """The (n_queries, V) query vectors :func:`score_in_memory` scores (queries are never cut)."""
    return splade.encode([q.text for q in queries], "query", batch_size)


def score_vectors(
    Q: sp.csr_matrix, D: sp.csr_matrix, queries: Sequence[Query], documents: Sequence[Document],
    feedback: Feedback | None = None,
) -> dict[str, dict[str, float]]:
    """:func:`score_in_memory` on already encoded vectors (rows in ``queries``/``documents`` order)."""
    if feedback is not None:
        Q = expand_in_memory(Q, D, feedback, [d.doc_id for d in documents])  # (n_queries, V)
    S = (Q @ D.T).toarray()  # (n_queries, n_docs)
    doc_ids = [d.doc_id for d in documents]
    return {
        q.qid: {d: float(v) for d, v in zip(doc_ids, S[i].tolist()) if v > 0.0} for i, q in enumerate(queries)
    }


def ranx_run(run: dict[str, dict[str, float]], name: str | None = None) -> Run:
    """``run`` as a ranx Run whose scores are the :func:`ranking` positions (n, n-1, ..., 1):
    the order ranx evaluates is then this module's, ties included. Rank metrics (nDCG, MRR,
    recall) read only the order."""
    ordered = {q: {d: float(len(s) - i) for i, (d, _) in enumerate(ranking(s))} for q, s in run.items()}
    return import_ranx().Run(ordered, name=name)


def _judgements(value, name: str, what: str) -> dict:
    """``value`` (a qrels or run: ``{query id: {doc id: number}}``, or ranx's ``Qrels``/``Run``)
    as a dict of dicts; TypeError naming the argument otherwise."""
    if type(value).__module__.split(".")[0] == "ranx" and hasattr(value, "to_dict"):
        value = value.to_dict()
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        hint = f": read a file with load_{name}" if isinstance(value, (str, Path)) else ""
        raise TypeError(f"{name} must be a dict {{query id: {{doc id: {what}}}}} or a ranx "
                        f"{name.capitalize()}, got {type(value).__name__}{hint}")
    return value


def evaluate_run(
    qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]], metrics: Sequence[str] | str = DEFAULT_METRICS,
    qids: Sequence[str] | None = None,
) -> dict[str, float]:
    """Mean metrics, ``{metric: value}`` (one metric may be given as a string, as ranx takes it).

    Over ``qids`` that have judgements, one the run lacks counting 0 (as in ranx's
    ``make_comparable`` and ``trec_eval -c``). Without ``qids``, over every judged query, and
    each must be in the run: a run file has no line for a query that retrieved nothing, so a
    reloaded run would silently score higher (ValueError, as ranx refuses such a pair). ``qrels``
    and ``run`` are dicts or ranx's ``Qrels`` and ``Run``; grades must be integers, which also
    catches the two swapped.
    """
    qrels = _judgements(qrels, "qrels", "integer grade")
    run = _judgements(run, "run", "score")
    metrics = [metrics] if isinstance(metrics, str) else list(metrics)
    grade = next(((q, d, g) for q, docs in qrels.items() for d, g in docs.items()
                  if isinstance(g, bool) or not isinstance(g, (int, np.integer))), None)
    if grade is not None:
        q, d, g = grade
        raise ValueError(f"qrels[{q!r}][{d!r}] is {g!r}: grades are integers (evaluate_run(qrels, run): "
                         "are the two swapped?)")
    if qids is None:
        lacking = [q for q in qrels if q not in run]
        if lacking:
            raise ValueError(
                f"the run lacks {len(lacking)} of the {len(qrels)} judged queries (e.g. {', '.join(lacking[:3])}): "
                "pass qids=list(qrels) to count them as retrieving nothing (a run file has no line for such a query), "
                "or qids=list(run) to evaluate the run's own queries")
        qids = list(qrels)
    keep = [q for q in qids if q in qrels]
    if not keep:
        raise ValueError("no query of the run has relevance judgements")
    if not any(run.get(q) for q in keep):  # nothing retrieved at all: ranx fails on max() of nothing
        return {m: 0.0 for m in metrics}
    ranx = import_ranx()
    with quiet_ranx():  # make_comparable: a judged query missing from the run is scored as retrieving nothing
        result = ranx.evaluate(
            ranx.Qrels({q: qrels[q] for q in keep}), ranx_run({q: run[q] for q in keep if run.get(q)}), metrics,
            make_comparable=True,
        )
    if isinstance(result, float):  # ranx returns a bare float for a single metric
        result = {metrics[0]: result}
    return {m: float(np.round(v, 6)) for m, v in result.items()}


def evaluate_per_query(
    qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]], metric: str = "ndcg@10"
) -> dict[str, float]:
    keep = [q for q in run if q in qrels]
    if not any(run[q] for q in keep):  # as in evaluate_run
        return {q: 0.0 for q in keep}
    ranx = import_ranx()
    r = ranx_run({q: run[q] for q in keep})
    with quiet_ranx():
        ranx.evaluate(ranx.Qrels({q: qrels[q] for q in keep}), r, metric, make_comparable=True)
    return {q: float(v) for q, v in r.scores[metric].items()}


def run_tag(name: str) -> str:
    """A TREC run's last column: one field, so a model path with spaces cannot add columns."""
    return re.sub(r"\s+", "_", name.strip()) or "sparse-adapt"


def check_run_path(path: str | Path, flag: str = "path") -> None:
    """ConfigError for a ``.lz4`` run name: ranx's binary format, which :func:`save_run_file`
    does not write (``ranx.Run(run).save(path)`` does) and a TREC file under it would not load."""
    if Path(path).suffix.lower() == ".lz4":
        raise ConfigError(f"{flag} {path}: .lz4 is ranx's binary format, which sparse-adapt reads but does not write; "
                          "give a .json name (ranx's JSON) or any other (TREC)")


def save_run_file(run: dict[str, dict[str, float]], path: str | Path, name: str) -> list[str]:
    """Write ``run`` as a TREC run file (``qid Q0 doc_id rank score tag``), atomically: each
    query in :func:`ranking` order, exact scores, ``name`` as the tag (:func:`run_tag`).
    Returns the queries it has no line for: a run file cannot hold one that retrieved nothing.
    A ``.json`` path gets ranx's JSON layout instead (``{qid: {doc_id: score}}``, every query,
    ``name`` unused), the format :func:`~sparse_adapt.data.runs.load_run` reads from that suffix;
    ``.lz4`` is refused (:func:`check_run_path`)."""
    check_run_path(path)
    if Path(path).suffix.lower() == ".json":
        ordered = {q: {d: float(s) for d, s in ranking(scores)} for q, scores in run.items()}
        with atomic_file(path) as tmp:
            Path(tmp).write_text(json.dumps(ordered) + "\n", encoding="utf-8")
        return []
    tag = run_tag(name)
    with atomic_file(path) as tmp, Path(tmp).open("w", encoding="utf-8") as f:
        for q, scores in run.items():
            f.writelines(f"{q} Q0 {d} {rank} {float(score)!r} {tag}\n"
                         for rank, (d, score) in enumerate(ranking(scores), start=1))
    return [q for q, scores in run.items() if not scores]
