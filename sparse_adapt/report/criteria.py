"""The spec's per-hypothesis criteria (H1-H4 tables) for one term and the semantic queries."""

from __future__ import annotations

import re
import dataclasses
from dataclasses import dataclass

from sparse_adapt.data import Qrels, mentions_term
from sparse_adapt.report.inputs import ReportData

PASS, FAIL, NA = "pass", "fail", "n/a"


@dataclass
class Criterion:
    id: str
    name: str
    expected: str
    actual: str
    status: str  # pass | fail | n/a


@dataclass
class TermSummary:
    """One term's diagnosis in one stage (numbers of ``sparse-adapt diagnose --json``)."""

    term: str
    single_token: bool
    pieces: list[str]
    doc_id: str | None  # the document diagnosed (first containing the term)
    occurrence_logits: list[float]  # MLM logit of the token where the term occurs
    logit_verdict: str | None  # positive | mixed | negative | absent; None: not one token
    weight: float | None  # SPLADE weight in that document; None: not one token
    rank: int | None  # 1-based among the document's non-zero tokens; None: zero weight
    nonzero: int  # non-zero tokens of that document
    expanding: dict[str, float]  # qid -> weight, queries without the term whose vector has it
    with_term: int  # queries whose text contains the term
    with_term_active: int  # ... and whose vector has it
    with_term_qids: list[str] = dataclasses.field(default_factory=list)  # those queries


def summarise_term(d) -> TermSummary:
    single = d.vocabulary.single_token
    t = d.targets[0] if single else None
    qe = t.query_expansion if t is not None else None
    return TermSummary(
        term=d.term,
        single_token=single,
        pieces=list(d.vocabulary.pieces),
        doc_id=d.document.doc_id,
        occurrence_logits=[p.logit for p in t.logits.positions if p.occurrence] if t else [],
        logit_verdict=t.logits.verdict if t else None,
        weight=t.ranking.weight if t else None,
        rank=t.ranking.rank if t else None,
        nonzero=(t or d.targets[0]).ranking.nonzero,
        expanding={e.qid: e.weight for e in qe.expanding} if qe else {},
        with_term=qe.with_term if qe else 0,
        with_term_active=qe.with_term_active if qe else 0,
        with_term_qids=list(qe.with_term_qids) if qe else [],
    )


def _status(ok: bool | None) -> str:
    return NA if ok is None else PASS if ok else FAIL


def criteria(term: TermSummary, data: ReportData, top: dict[str, list[str]]) -> list[Criterion]:
    """The spec's per-hypothesis criteria (H1-H4 tables), for one term and the semantic queries."""
    from diagnostics.term import HIGH_WEIGHT

    one = term.single_token
    no_token = f"not one token ({' '.join(term.pieces)})"
    at = f" in {term.doc_id}" if term.doc_id else ""
    out = [
        Criterion("single_token", "Token in vocabulary", "single token",
                  f"{term.pieces[0]}" if one else no_token, _status(one)),
        Criterion("positive_logits", "Positive MLM logits", f"> 0 where it occurs{at}",
                  ", ".join(f"{x:.2f}" for x in term.occurrence_logits) if one and term.occurrence_logits
                  else no_token if not one else "term not in the text",
                  _status(term.logit_verdict == "positive" if one and term.occurrence_logits else False if not one else None)),
        Criterion("nonzero_weight", "Non-zero SPLADE weight", "> 0",
                  f"{term.weight:.4f}" if one else no_token, _status(one and term.weight > 0)),
        Criterion("high_weight", "High SPLADE weight", f"> {HIGH_WEIGHT:.1f}",
                  f"{term.weight:.4f}" if one else no_token, _status(one and term.weight > HIGH_WEIGHT)),
        Criterion("top_rank", "Top ranking", "#1",
                  (f"#{term.rank} of {term.nonzero}" if term.rank else "zero weight") if one else no_token,
                  _status(term.rank == 1 if one else False)),
    ]
    semantic = data.semantic_qids
    texts = {q.qid: q.text for q in data.queries}
    # As diagnose splits them, when it could (one token): a query holding the token ("APIs" for
    # API) names the term too; counted as describing, it failed an expansion diagnose rightly left out.
    if one:
        naming = [q for q in semantic if q in term.with_term_qids]
    else:
        naming = [q for q in semantic if mentions_term(texts[q], [term.term])]
    describing = [q for q in semantic if q not in naming]
    if describing:
        actual = ", ".join(
            f"{q}: {term.expanding[q]:.2f}" if q in term.expanding else f"{q}: absent" for q in describing
        )
        ok = one and all(q in term.expanding for q in describing)
    else:
        actual, ok = "no domain-semantic query", None
    out.append(Criterion("query_expansion", "Query expansion", "contains domain term", actual, _status(ok)))
    if term.with_term:
        out.append(Criterion("explicit_queries", "Explicit queries keep the term",
                             f"active in all {term.with_term} queries naming it",
                             f"{term.with_term_active} of {term.with_term}",
                             _status(term.with_term_active == term.with_term)))
    else:
        out.append(Criterion("explicit_queries", "Explicit queries keep the term", "active in queries naming it",
                             "no query names it" if one else no_token, _status(None if one else False)))
    rows, oks = [], []
    for q in semantic:
        relevant = relevant_docs(data.qrels, q)
        if not relevant:
            continue
        got = top.get(q, [])[: len(relevant)]  # shorter when fewer documents score above 0
        intruders = [d for d in got if d not in relevant]
        missing = [d for d in relevant if d not in got]
        oks.append(not missing)
        rows.append(f"{q}: {' '.join(got) or 'nothing scores > 0'}"
                    + (f" (not relevant: {' '.join(intruders)})" if intruders else "")
                    + (f" (missing: {' '.join(missing)})" if missing and len(got) < len(relevant) else ""))
    expected = "; ".join(
        f"top-{len(r)} = {' '.join(r)}" for r in (
            relevant_docs(data.qrels, q) for q in semantic
        ) if r
    ) or "relevant documents first"
    out.append(Criterion("correct_retrieval", "Correct retrieval", expected, "; ".join(rows) or "no judged semantic query",
                         _status(all(oks) if oks else None)))
    return out


def relevant_docs(qrels: Qrels, qid: str) -> list[str]:
    """The documents judged relevant (grade > 0) to ``qid``, in :func:`natural` order."""
    return sorted((d for d, g in qrels.get(qid, {}).items() if g > 0), key=natural)


def natural(doc_id: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", doc_id))
