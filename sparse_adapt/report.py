"""The case-study report: the spec's four experiments on the user's data, side by side.

``build_report(ReportInputs(...))`` trains (or reuses) one run per experiment under
``OUT/runs/<H>`` with :func:`sparse_adapt.stages.run_pipeline` (H1 = distill only, H2 =
+ extend, H3 = + warmup, H4 = + dictionary), evaluates the base and every run, and
writes ``OUT/report.md`` with PNG plots beside it and ``OUT/report.json`` with the same
numbers. Every number comes from the functions the CLI uses, so the report agrees with
``sparse-adapt evaluate`` (``score_in_memory`` + ``evaluate_run``), ``sparse-adapt
diagnose`` (``diagnose_term``) and ``sparse-adapt inspect`` (``inspect_corpus``) run on
the same checkpoint; the full diagnose/inspect JSON of every stage is kept under
``OUT/diagnostics/<stage>/``.

The spec judges each experiment by a table of criteria for one query (q11, which
describes the domain without naming its term) and one term ("Gatrocraptic"). Here the
query is every query of a ``*semantic*`` group and the term is the *primary term*: the
domain term found in most of those queries' relevant documents (``--term`` overrides).

The steps are public so the case-study notebook can tell the story one experiment at a
time with the same code: :func:`load_report_data`, :func:`train_experiment`,
:func:`evaluate_stage`, :func:`assemble`, :func:`write_report`.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

from rich.console import Console

from sparse_adapt.config import TrainConfig, config_from_dict, load_config
from sparse_adapt.data import Document, Qrels, Query
from sparse_adapt.errors import ConfigError
from sparse_adapt.model import OFFLINE_MINILM, SpladeEncoder

SCHEMA = "sparse-adapt.report/1"
# The reference every experiment is compared with: the untouched --base.
REFERENCE = "base"
RUNS_DIR = "runs"
DIAGNOSTICS_DIR = "diagnostics"
# Metrics of the group table and plot: the spec's headline metric.
GROUP_METRIC = "ndcg@10"
# Top documents kept per query in report.json (the criteria need only the relevant count).
TOP_K = 10
# Top documents explained per semantic query (the spec shows the top 3; 5 covers d21-d25).
EXPLAIN_K = 5
# Shared tokens listed per explained document in report.md.
SHARED_SHOWN = 4

HYPOTHESES = {
    REFERENCE: "Reference: the base model, untrained on the domain.",
    "H1": "Fine-tuning (distillation) alone teaches the domain.",
    "H2": "Vocabulary extension + fine-tuning makes the domain term active.",
    "H3": "+ domain warm-up MLM gives the term positive logits and weight.",
    "H4": "+ dictionary pre-training gives the term high weight, rank 1 and query expansion.",
}

PASS, FAIL, NA = "pass", "fail", "n/a"


# ---------------------------------------------------------------------------- inputs
@dataclass
class ReportInputs:
    """What ``sparse-adapt report`` takes; ``None`` data paths mean the bundled corpus."""

    out: Path
    base: str = OFFLINE_MINILM
    corpus: Path | None = None
    terms: Path | None = None
    dictionary: Path | None = None
    train: Path | None = None
    queries: Path | None = None
    qrels: Path | None = None
    heldout_queries: Path | None = None
    heldout_qrels: Path | None = None
    groups: Path | None = None
    # A TrainConfig, a config file, or a {section: {key: value}} dict of overrides.
    config: TrainConfig | Path | str | dict | None = None
    seed: int = 0
    # The criteria table's term; None: chosen from the semantic queries' relevant documents.
    term: str | None = None
    experiments: tuple[str, ...] = ("H1", "H2", "H3", "H4")

    def resolved(self) -> "ReportInputs":
        """Fill in bundled files. Queries, qrels, held-out files and groups default to the
        bundled ones only when the corpus is the bundled one: a user's corpus is never judged
        by Gatrocraptic queries by accident."""
        from corpora import GATROCRAPTIC as G

        corpus = Path(self.corpus) if self.corpus is not None else G.docs
        bundled = corpus.resolve() == G.docs.resolve()
        if not bundled:
            missing = [f"--{n}" for n, v in (("queries", self.queries), ("qrels", self.qrels)) if v is None]
            if missing:
                raise ConfigError(f"{' and '.join(missing)} required with your own --corpus {corpus}")
        if (self.heldout_queries is None) != (self.heldout_qrels is None):
            raise ConfigError("--heldout-queries and --heldout-qrels go together: give both or neither")

        def pick(given, default):
            return Path(given) if given is not None else default

        queries = pick(self.queries, G.queries)
        bundled_queries = queries.resolve() == G.queries.resolve()
        heldout_q = pick(self.heldout_queries, G.heldout_queries if bundled and bundled_queries else None)
        heldout_r = pick(self.heldout_qrels, G.heldout_qrels if bundled and bundled_queries else None)
        groups = pick(self.groups, G.query_groups if bundled_queries and (
            heldout_q is None or heldout_q.resolve() == G.heldout_queries.resolve()) else None)
        unknown = [e for e in self.experiments if e not in _experiments()]
        if unknown or not self.experiments:
            raise ConfigError(f"--experiments: unknown {unknown or 'empty'}; valid: {', '.join(_experiments())}")
        return replace(
            self, out=Path(self.out), corpus=corpus, terms=pick(self.terms, G.terms),
            dictionary=pick(self.dictionary, G.dictionary), train=pick(self.train, G.train), queries=queries,
            qrels=pick(self.qrels, G.qrels), heldout_queries=heldout_q, heldout_qrels=heldout_r, groups=groups,
        )

    def train_config(self) -> TrainConfig:
        if isinstance(self.config, TrainConfig):
            return self.config.validate()
        if isinstance(self.config, dict):
            return config_from_dict(self.config, "report config")
        return load_config(self.config)


def _experiments() -> dict[str, tuple[str, ...]]:
    from sparse_adapt.stages import EXPERIMENTS

    return EXPERIMENTS


@dataclass
class ReportData:
    """The validated inputs, loaded once."""

    documents: list[Document]
    queries: list[Query]
    qrels: Qrels
    heldout_queries: list[Query]
    heldout_qrels: Qrels
    terms: dict[str, list[str]]
    groups: dict[str, list[str]]
    groups_source: str  # "file" or "derived"
    notes: list[str] = field(default_factory=list)

    @property
    def all_qrels(self) -> Qrels:
        return {**self.qrels, **self.heldout_qrels}

    @property
    def semantic_qids(self) -> list[str]:
        """Main (not held-out) queries of the ``*semantic*`` groups: the spec's q11 role."""
        main = {q.qid for q in self.queries}
        return [q for name, qids in self.groups.items() if "semantic" in name for q in qids if q in main]


def _mentions(text: str, term: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(term)}(?!\w)", text, flags=re.IGNORECASE) is not None


def derive_groups(queries: Sequence[Query], heldout: Sequence[Query], terms: dict[str, list[str]]) -> dict[str, list[str]]:
    """Queries naming a domain term are ``domain-explicit``, the others ``control``
    (held-out ones get a ``heldout-`` prefix). No semantic group can be derived: which
    queries *describe* the domain without naming it needs a person (``--groups``)."""
    all_terms = [t for items in terms.values() for t in items]
    groups: dict[str, list[str]] = {}
    for prefix, qs in (("", queries), ("heldout-", heldout)):
        for q in qs:
            name = "domain-explicit" if any(_mentions(q.text, t) for t in all_terms) else "control"
            groups.setdefault(prefix + name, []).append(q.qid)
    return groups


def load_report_data(inputs: ReportInputs) -> ReportData:
    """Load and cross-check every input (before any training starts)."""
    from sparse_adapt.data import load_documents, load_domain_terms, load_qrels, load_queries, load_query_groups

    i = inputs.resolved()
    documents, queries, qrels = load_documents(i.corpus), load_queries(i.queries), load_qrels(i.qrels)
    terms = load_domain_terms(i.terms)
    heldout = load_queries(i.heldout_queries) if i.heldout_queries else []
    heldout_qrels = load_qrels(i.heldout_qrels) if i.heldout_qrels else {}
    clash = sorted({q.qid for q in queries} & {q.qid for q in heldout})
    if clash:
        raise ConfigError(f"{i.heldout_queries}: query ids also in {i.queries}: {', '.join(clash[:5])}")
    notes = []
    if i.groups is not None:
        groups, source = load_query_groups(i.groups), "file"
        known = {q.qid for q in queries} | {q.qid for q in heldout}
        for name, qids in groups.items():
            stray = [q for q in qids if q not in known]
            if stray:
                raise ConfigError(f"{i.groups}: group {name!r} lists unknown query ids: {', '.join(stray[:5])}")
        grouped = {q for qids in groups.values() for q in qids}
        ungrouped = sorted(known - grouped)
        if ungrouped:
            notes.append(f"queries in no group of {i.groups.name}: {', '.join(ungrouped)} (counted in the overall metrics only)")
    else:
        groups, source = derive_groups(queries, heldout, terms), "derived"
        notes.append(
            "query groups were derived (no --groups): queries naming a domain term are domain-explicit, "
            "the others control; pass --groups to mark domain-semantic queries (the spec's q11 role)"
        )
    return ReportData(documents, queries, qrels, heldout, heldout_qrels, terms, groups, source, notes)


# ---------------------------------------------------------------------------- terms
def domain_terms(splade: SpladeEncoder, data: ReportData) -> list[str]:
    """One spelling per distinct term (after the tokenizer's normaliser): the spelling the
    documents use most, so "Gatrocraptic" rather than "gatrocraptic"."""
    from sparse_adapt.vocabulary import normalize_term

    variants: dict[str, list[str]] = {}
    for items in data.terms.values():
        for t in items:
            variants.setdefault(normalize_term(splade.tokenizer, t), []).append(t)
    text = "\n".join(d.text for d in data.documents)
    return [max(vs, key=lambda v: (text.count(v), -vs.index(v))) for vs in variants.values()]


def choose_primary_term(terms: Sequence[str], data: ReportData, override: str | None = None) -> tuple[str, str]:
    """The criteria table's term and why it was chosen."""
    if override is not None:
        return override, "given with --term"
    if not terms:
        raise ConfigError("the terms file lists no domain term")
    docs = {d.doc_id: d.text for d in data.documents}
    all_qrels = data.all_qrels
    for kind in ("semantic", "explicit"):
        qids = [q for name, qs in data.groups.items() if kind in name for q in qs]
        relevant = sorted({d for q in qids for d, g in all_qrels.get(q, {}).items() if g > 0 and d in docs})
        if not relevant:
            continue
        counts = [sum(_mentions(docs[d], t) for d in relevant) for t in terms]
        best = max(range(len(terms)), key=lambda k: (counts[k], -k))
        if counts[best]:
            return terms[best], (
                f"in {counts[best]} of the {len(relevant)} relevant documents of the domain-{kind} queries"
            )
    return terms[0], "first term of the terms file (no relevant document of a domain query names a term)"


# ---------------------------------------------------------------------------- stages
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


@dataclass
class Explained:
    rank: int
    doc_id: str
    score: float
    shared: list[tuple[str, float]]  # (token, contribution), largest first


@dataclass
class StageResult:
    name: str
    stages: list[str]
    model: str
    metrics: dict[str, float]  # over --queries: what `sparse-adapt evaluate` prints
    heldout_metrics: dict[str, float] | None  # over --heldout-queries
    groups: dict[str, dict[str, Any]]  # group -> {"queries": n judged, GROUP_METRIC: value | None}
    per_query: dict[str, float]  # qid -> GROUP_METRIC
    top: dict[str, list[str]]  # qid -> TOP_K doc ids
    terms: dict[str, TermSummary]
    criteria: list[Criterion]
    sparsity: dict[str, float | None]
    explanations: dict[str, list[Explained]]  # semantic qid -> top EXPLAIN_K documents

    def passed(self) -> int:
        return sum(c.status == PASS for c in self.criteria)


def train_experiment(
    inputs: ReportInputs, experiment: str, console: Console | None = None
) -> Path:
    """Train (or resume/reuse) ``OUT/runs/<experiment>``; returns its ``final`` checkpoint."""
    from sparse_adapt.stages import run_pipeline

    i = inputs.resolved()
    return run_pipeline(
        base=i.base, corpus=i.corpus, terms=i.terms, dictionary=i.dictionary, train=i.train,
        out=i.out / RUNS_DIR / experiment, stages=_experiments()[experiment], config=i.train_config(),
        seed=i.seed, console=console,
    )


def _summarise_term(d) -> TermSummary:
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
    naming = [q for q in semantic if _mentions(texts[q], term.term)]
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
        relevant = sorted((d for d, g in data.qrels.get(q, {}).items() if g > 0), key=_natural)
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
            sorted((d for d, g in data.qrels.get(q, {}).items() if g > 0), key=_natural) for q in semantic
        ) if r
    ) or "relevant documents first"
    out.append(Criterion("correct_retrieval", "Correct retrieval", expected, "; ".join(rows) or "no judged semantic query",
                         _status(all(oks) if oks else None)))
    return out


def _natural(doc_id: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", doc_id))


def evaluate_stage(
    name: str, model: str | Path, data: ReportData, primary: str | None = None, *,
    inputs: ReportInputs | None = None, stages: Sequence[str] = (), keep_diagnostics: Path | None = None,
    splade: SpladeEncoder | None = None,
) -> StageResult:
    """Evaluate one checkpoint the way the CLI does and derive the criteria.

    ``primary`` None: chosen by :func:`choose_primary_term`. ``keep_diagnostics``: a
    directory for the full ``diagnose``/``inspect`` JSON of this stage.
    """
    from diagnostics import Sources, diagnose_term, explain_query, inspect_corpus
    from sparse_adapt.evaluation import DEFAULT_METRICS, evaluate_per_query, evaluate_run, score_in_memory, top_k

    splade = splade or SpladeEncoder.from_pretrained(model)
    heldout_queries = list(data.heldout_queries or [])
    # One call, so the documents are encoded once for the main and the held-out queries.
    full_run = score_in_memory(splade, data.documents, [*data.queries, *heldout_queries])
    run = {q.qid: full_run[q.qid] for q in data.queries}
    metrics = evaluate_run(data.qrels, run)
    heldout_metrics = None
    if heldout_queries:
        held = {q.qid: full_run[q.qid] for q in heldout_queries}
        heldout_metrics = evaluate_run(data.heldout_qrels, held) if any(q in data.heldout_qrels for q in held) else None
    all_qrels = data.all_qrels
    groups = {}
    for g, qids in data.groups.items():
        judged = [q for q in qids if q in all_qrels and q in full_run]
        value = evaluate_run(all_qrels, full_run, (GROUP_METRIC,), qids=judged)[GROUP_METRIC] if judged else None
        groups[g] = {"queries": len(judged), GROUP_METRIC: value}
    per_query = evaluate_per_query(all_qrels, full_run, GROUP_METRIC)
    top = top_k(full_run, TOP_K)

    i = inputs.resolved() if inputs is not None else None
    sources = Sources(
        model=str(model), docs=str(i.corpus) if i else None, terms=str(i.terms) if i else None,
        dictionary=str(i.dictionary) if i else None, train=str(i.train) if i else None,
    )
    term_names = domain_terms(splade, data)
    primary = primary or choose_primary_term(term_names, data)[0]
    if primary not in term_names:
        term_names = [primary, *term_names]
    summaries = {}
    for t in term_names:
        diagnosis = diagnose_term(splade, t, data.documents, terms=data.terms, queries=data.queries, sources=sources)
        summaries[t] = _summarise_term(diagnosis)
        if keep_diagnostics is not None:
            write_atomic(keep_diagnostics / f"diagnose-{_slug(t)}.json", _json(diagnosis.to_dict()))
    stats = inspect_corpus(splade, data.documents, data.queries, data.terms, model=str(model))
    if keep_diagnostics is not None:
        write_atomic(keep_diagnostics / "inspect.json", _json(stats.to_dict()))
    sparsity = {
        "doc_nonzero_mean": stats.documents.nonzero.mean, "doc_nonzero_median": stats.documents.nonzero.median,
        "query_nonzero_mean": stats.queries.nonzero.mean if stats.queries else None,
        "query_nonzero_median": stats.queries.nonzero.median if stats.queries else None,
        "flops": stats.flops.value if stats.flops else None,
    }
    texts = {q.qid: q.text for q in data.queries}
    explanations = {}
    for q in data.semantic_qids:
        e = explain_query(splade, texts[q], data.documents, EXPLAIN_K, model=str(model))
        explanations[q] = [
            Explained(r.rank, r.doc_id, r.score, [(s.token, s.contribution) for s in r.shared[:SHARED_SHOWN]])
            for r in e.results
        ]
    return StageResult(
        name=name, stages=list(stages), model=str(model), metrics=metrics, heldout_metrics=heldout_metrics,
        groups=groups, per_query=per_query, top=top, terms=summaries,
        criteria=criteria(summaries[primary], data, top), sparsity=sparsity, explanations=explanations,
    )


# ---------------------------------------------------------------------------- report
@dataclass
class Report:
    schema: str
    created: str
    inputs: dict[str, Any]
    primary_term: str
    primary_term_reason: str
    groups: dict[str, list[str]]
    groups_source: str
    notes: list[str]
    relevant: dict[str, list[str]]  # semantic qid -> its relevant (grade > 0) documents
    stages: list[StageResult]

    def to_dict(self) -> dict:
        return asdict(self)

    def stage(self, name: str) -> StageResult:
        return next(s for s in self.stages if s.name == name)


def assemble(inputs: ReportInputs, data: ReportData, stages: list[StageResult], primary: str, reason: str) -> Report:
    i = inputs.resolved()
    cfg = i.train_config()
    return Report(
        schema=SCHEMA,
        created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        inputs={
            "base": i.base, "seed": i.seed, "config": cfg.to_dict(), "experiments": list(i.experiments),
            **{k: (str(getattr(i, k)) if getattr(i, k) is not None else None) for k in (
                "corpus", "terms", "dictionary", "train", "queries", "qrels", "heldout_queries", "heldout_qrels", "groups")},
        },
        primary_term=primary, primary_term_reason=reason, groups=data.groups, groups_source=data.groups_source,
        notes=list(data.notes),
        relevant={q: sorted((d for d, g in data.qrels.get(q, {}).items() if g > 0), key=_natural)
                  for q in data.semantic_qids},
        stages=stages,
    )


def _check_out(out: Path) -> None:
    """Refuse to write into a non-empty directory that is not a report of ours."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file, not a directory")
    if out.is_dir() and any(out.iterdir()) and not ((out / RUNS_DIR).is_dir() or (out / "report.json").is_file()):
        raise ConfigError(f"--out {out} is not empty and holds no report: refusing to write into it")


def run_experiment(
    inputs: ReportInputs, data: ReportData, name: str, primary: str, console: Console | None = None,
    splade: SpladeEncoder | None = None,
) -> StageResult:
    """Train (or reuse) experiment ``name`` and evaluate it; ``REFERENCE`` evaluates ``--base``.

    The full diagnose/inspect JSON goes to ``OUT/diagnostics/<name>/``.
    """
    i = inputs.resolved()
    model = str(i.base) if name == REFERENCE else str(train_experiment(i, name, console))
    if console is not None:
        console.print(f"evaluating {name}: metrics, diagnostics of every domain term, sparsity")
    return evaluate_stage(
        name, model, data, primary, inputs=i, stages=_experiments().get(name, ()),
        keep_diagnostics=i.out / DIAGNOSTICS_DIR / name, splade=splade,
    )


def build_report(inputs: ReportInputs, console: Console | None = None) -> Report:
    """Train or reuse every experiment, evaluate base + each, write the report files."""
    console = console or Console()
    i = inputs.resolved()
    data = load_report_data(i)  # every input validated before the first training step
    i.train_config()
    _check_out(i.out)
    base = SpladeEncoder.from_pretrained(i.base)
    primary, reason = choose_primary_term(domain_terms(base, data), data, i.term)
    console.print(f"primary term: [bold]{primary}[/bold] ({reason})")
    results = []
    for name in (REFERENCE, *i.experiments):
        if name != REFERENCE:
            console.rule(f"{name}: {' + '.join(_experiments()[name])}")
        results.append(run_experiment(i, data, name, primary, console, splade=base if name == REFERENCE else None))
    report = assemble(i, data, results, primary, reason)
    write_report(report, i.out)
    return report


# ---------------------------------------------------------------------------- files
def _json(obj: Any) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


def _slug(term: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "_", term) or "term"


def write_atomic(path: Path, text: str | bytes) -> None:
    """Write ``path`` via a temp file renamed into place: readers see old or new, never half."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    if isinstance(text, bytes):
        tmp.write_bytes(text)
    else:
        tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


PLOTS = {
    "criteria": "criteria.png",
    "groups": "ndcg_by_group.png",
    "term": "term_weight_rank.png",
    "sparsity": "sparsity.png",
}


def write_report(report: Report, out: Path) -> dict[str, Path]:
    """Write the PNGs, ``report.json`` and ``report.md`` (last, each atomically)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    for key, png in figures(report).items():
        path = out / PLOTS[key]
        write_atomic(path, png)
        written[key] = path
    write_atomic(out / "report.json", _json(report.to_dict()))
    write_atomic(out / "report.md", render_markdown(report, out))
    written["json"], written["markdown"] = out / "report.json", out / "report.md"
    return written


# ---------------------------------------------------------------------------- markdown
_ICON = {PASS: "✅ PASSED", FAIL: "❌ FAILED", NA: "— n/a"}


def _f(x: float | None, spec: str = ".4f") -> str:
    return "—" if x is None else format(x, spec)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    esc = [[str(c).replace("|", "\\|") for c in r] for r in rows]
    return "\n".join(
        ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        + ["| " + " | ".join(r) + " |" for r in esc]
    )


def criteria_markdown(stage: StageResult) -> str:
    return _table(("Criterion", "Expected", "Actual", "Status"),
                  [(c.name, c.expected, c.actual, _ICON[c.status]) for c in stage.criteria])


def reproduce_commands(report: Report, stage: StageResult, out: Path | None = None) -> list[str]:
    """The CLI commands that print this stage's numbers."""
    import shlex

    inp = report.inputs

    def p(key: str) -> str:
        return shlex.quote(os.path.relpath(inp[key]) if inp[key] else "")

    model = shlex.quote(stage.model if stage.name == REFERENCE else os.path.relpath(stage.model))
    cmds = [f"sparse-adapt evaluate --model {model} --docs {p('corpus')} --queries {p('queries')} --qrels {p('qrels')}"]
    if inp.get("heldout_queries"):
        cmds.append(f"sparse-adapt evaluate --model {model} --docs {p('corpus')} "
                    f"--queries {p('heldout_queries')} --qrels {p('heldout_qrels')}")
    cmds.append(f"sparse-adapt diagnose {shlex.quote(report.primary_term)} --model {model} --docs {p('corpus')} "
                f"--terms {p('terms')} --queries {p('queries')}")
    cmds.append(f"sparse-adapt inspect --model {model} --docs {p('corpus')} --queries {p('queries')} --terms {p('terms')}")
    return cmds


def summary_markdown(report: Report) -> str:
    """The summary section: one row per stage, criteria passed and headline nDCG@10."""
    stages = report.stages
    term = report.primary_term
    lines: list[str] = []
    add = lines.append
    add("## Summary\n")
    sem = [g for g in report.groups if "semantic" in g]
    header = ["Stage", "Pipeline", "Hypothesis", "Criteria passed", "nDCG@10 (queries)",
              *[f"nDCG@10 {g}" for g in sem]]
    rows = []
    for s in stages:
        applicable = sum(c.status != NA for c in s.criteria)
        rows.append([s.name, " → ".join(s.stages) or "—", HYPOTHESES.get(s.name, ""), f"{s.passed()}/{applicable}",
                     _f(s.metrics.get(GROUP_METRIC)), *[_f(s.groups[g][GROUP_METRIC]) for g in sem]])
    add(_table(header, rows) + "\n")
    add(f"Primary term **{term}**: {report.primary_term_reason}. Domain-semantic queries "
        f"(the spec's q11 role): {', '.join(q for g in sem for q in report.groups[g]) or 'none'}.\n")

    return "\n".join(lines)


def render_markdown(report: Report, out: Path | None = None) -> str:
    from sparse_adapt.evaluation import DEFAULT_METRICS

    term = report.primary_term
    stages = report.stages
    names = [s.name for s in stages]
    lines: list[str] = []
    add = lines.append
    add(f"# Domain adaptation report: {term}\n")
    add(f"Generated by `sparse-adapt report` at {report.created}. Base model: `{report.inputs['base']}`, "
        f"seed {report.inputs['seed']}, documents `{report.inputs['corpus']}`. "
        f"Every number below is also in `report.json`; the full `diagnose`/`inspect` JSON of each stage is "
        f"under `{DIAGNOSTICS_DIR}/<stage>/`.\n")

    add(summary_markdown(report))

    add(f"## Criteria per stage (the spec's q11 tables, term \"{term}\")\n")
    add(f"![criteria per stage]({PLOTS['criteria']})\n")
    for s in stages:
        add(f"### {s.name}: {HYPOTHESES.get(s.name, '')}\n")
        if s.name != REFERENCE:
            add(f"Checkpoint `{os.path.relpath(s.model, out) if out else s.model}`.\n")
        add(criteria_markdown(s) + "\n")

    add("## Retrieval quality\n")
    add("Over all judged queries of each file (the numbers `sparse-adapt evaluate` prints):\n")
    header = ["Stage", *[f"{m} (queries)" for m in DEFAULT_METRICS]]
    held = any(s.heldout_metrics for s in stages)
    if held:
        header += [f"{m} (held-out)" for m in DEFAULT_METRICS]
    rows = []
    for s in stages:
        row = [s.name, *[_f(s.metrics.get(m)) for m in DEFAULT_METRICS]]
        if held:
            row += [_f((s.heldout_metrics or {}).get(m)) for m in DEFAULT_METRICS]
        rows.append(row)
    add(_table(header, rows) + "\n")
    add(f"{GROUP_METRIC} per query group (groups: {report.groups_source}; held-out queries were never trained on):\n")
    add(_table(["Group", "Queries", *names], [
        [g, str(stages[0].groups[g]["queries"]), *[_f(s.groups[g][GROUP_METRIC]) for s in stages]]
        for g in report.groups
    ]) + "\n")
    add(f"![nDCG@10 per group]({PLOTS['groups']})\n")

    if stages and stages[0].explanations:
        add("### What the domain-semantic queries retrieve\n")
        add("Top documents with the tokens contributing most to each score (`sparse-adapt explain`).\n")
        for q in stages[0].explanations:
            relevant = set(report.relevant.get(q, []))
            add(f"**{q}**\n")
            add(_table(["Stage", *[f"#{k}" for k in range(1, EXPLAIN_K + 1)]], [
                [s.name, *[
                    f"{'**' if e.doc_id in relevant else ''}{e.doc_id}{'**' if e.doc_id in relevant else ''} "
                    f"({e.score:.2f}: {', '.join(f'{t} {c:.2f}' for t, c in e.shared) or 'no shared token'})"
                    for e in s.explanations.get(q, [])
                ]] for s in stages
            ]) + "\n")
        add("Relevant documents in **bold**.\n")

    add("## Domain terms\n")
    add("SPLADE weight (rank among the document's non-zero tokens) of every domain term in the first "
        "document containing it, as `sparse-adapt diagnose` reports it; `pieces` = not one token.\n")
    terms = list(stages[0].terms) if stages else []
    rows = []
    for t in terms:
        cells = []
        for s in stages:
            ts = s.terms[t]
            if not ts.single_token:
                cells.append(f"pieces ({len(ts.pieces)})")
            else:
                cells.append(f"{ts.weight:.3f} (#{ts.rank})" if ts.rank else f"{ts.weight:.3f}")
        rows.append([f"**{t}**" if t == term else t, stages[0].terms[t].doc_id or "probe", *cells])
    add(_table(["Term", "Document", *names], rows) + "\n")
    add(f"![term weight and rank]({PLOTS['term']})\n")

    add("## Sparsity\n")
    add("Active (non-zero) tokens per text and the estimated FLOPS of a query-document product "
        "(`sparse-adapt inspect`).\n")
    add(_table(["Stage", "doc mean", "doc median", "query mean", "query median", "FLOPS"], [
        [s.name, _f(s.sparsity["doc_nonzero_mean"], ".1f"), _f(s.sparsity["doc_nonzero_median"], ".1f"),
         _f(s.sparsity["query_nonzero_mean"], ".1f"), _f(s.sparsity["query_nonzero_median"], ".1f"),
         _f(s.sparsity["flops"], ".2f")] for s in stages
    ]) + "\n")
    add(f"![sparsity]({PLOTS['sparsity']})\n")

    add(f"## Per-query {GROUP_METRIC}\n")
    group_of = {q: g for g, qs in report.groups.items() for q in qs}
    qids = sorted({q for s in stages for q in s.per_query}, key=lambda q: (list(report.groups).index(group_of[q])
                  if q in group_of else len(report.groups), _natural(q)))
    add(_table(["Query", "Group", *names],
               [[q, group_of.get(q, "—"), *[_f(s.per_query.get(q)) for s in stages]] for q in qids]) + "\n")

    add("## Reproduce these numbers\n")
    add("Each stage's checkpoint can be checked with the CLI; for the last stage:\n")
    if stages:
        add("```bash\n" + "\n".join(reproduce_commands(report, stages[-1], out)) + "\n```\n")
    if report.notes:
        add("## Notes\n")
        for n in report.notes:
            add(f"- {n}")
        add("")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- plots
_COLORS = {PASS: "#2e7d32", FAIL: "#c62828", NA: "#9e9e9e"}


def figures(report: Report) -> dict[str, bytes]:
    """The four plots as PNG bytes.

    Bare ``Figure`` objects print through matplotlib's Agg canvas without touching pyplot's
    global backend, so this works headless and leaves a notebook's inline backend alone.
    """
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    stages = report.stages
    names = [s.name for s in stages]
    x = list(range(len(stages)))
    out = {}

    # Criteria grid: rows = criteria, columns = stages, cell = pass/fail/n/a.
    crit = [c.name for c in stages[0].criteria] if stages else []
    fig = Figure(figsize=(1.6 + 1.3 * len(stages), 0.9 + 0.45 * len(crit)))
    ax = fig.add_subplot()
    for col, s in enumerate(stages):
        for row, c in enumerate(s.criteria):
            ax.add_patch(Rectangle((col, row), 0.96, 0.92, color=_COLORS[c.status]))
            ax.text(col + 0.48, row + 0.46, {PASS: "pass", FAIL: "fail", NA: "n/a"}[c.status],
                    ha="center", va="center", color="white", fontsize=9)
    ax.set_xlim(0, len(stages))
    ax.set_ylim(len(crit), 0)
    ax.set_xticks([i + 0.48 for i in x], names)
    ax.set_yticks([i + 0.46 for i in range(len(crit))], crit)
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    ax.set_title(f'Criteria for "{report.primary_term}" per stage')
    fig.tight_layout()
    out["criteria"] = _png(fig)

    # nDCG@10 per query group: grouped bars, one colour per stage.
    groups = list(report.groups)
    fig = Figure(figsize=(max(6.0, 1.4 * len(groups) + 2), 4.2))
    ax = fig.add_subplot()
    width = 0.8 / max(1, len(stages))
    for k, s in enumerate(stages):
        vals = [s.groups[g][GROUP_METRIC] for g in groups]
        ax.bar([g + (k - (len(stages) - 1) / 2) * width for g in range(len(groups))],
               [v if v is not None else 0.0 for v in vals], width, label=s.name)
    ax.set_xticks(range(len(groups)), groups, rotation=15, ha="right")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel(GROUP_METRIC)
    ax.set_title(f"{GROUP_METRIC} per query group and stage")
    ax.legend(ncols=min(5, len(stages)), fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.28))
    fig.tight_layout()
    out["groups"] = _png(fig)

    # Domain-term weight and rank per stage; the primary term drawn bold.
    from diagnostics.term import HIGH_WEIGHT

    fig = Figure(figsize=(12.5, 4.4))
    ax_w, ax_r = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    ranked = False
    for t in (stages[0].terms if stages else {}):
        primary = t == report.primary_term
        style = dict(lw=2.6 if primary else 1.0, alpha=1.0 if primary else 0.45, marker="o", label=t,
                     zorder=3 if primary else 2, **({"color": "black"} if primary else {}))
        weights = [s.terms[t].weight if s.terms[t].single_token else 0.0 for s in stages]
        ax_w.plot(x, weights, **style)
        ranks = [(i, s.terms[t].rank) for i, s in zip(x, stages) if s.terms[t].rank]
        if ranks:
            ranked = True
            ax_r.plot([i for i, _ in ranks], [r for _, r in ranks], **style)
    if ranked:
        from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

        ax_r.set_yscale("log")  # ranks run from 1 to the thousands
        ax_r.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax_r.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax_r.yaxis.set_minor_formatter(NullFormatter())
    else:
        ax_r.text(0.5, 0.5, "no domain term is active in any stage", ha="center", va="center",
                  transform=ax_r.transAxes, color="grey")
    ax_w.axhline(HIGH_WEIGHT, color="grey", ls="--", lw=1)
    ax_w.set_title("weight in the first document using the term")
    ax_w.set_ylabel("SPLADE weight (0 = inactive or not one token)")
    ax_r.set_title("rank among that document's active tokens")
    ax_r.set_ylabel("rank (1 = top; no point = weight 0)")
    ax_r.invert_yaxis()
    for ax in (ax_w, ax_r):
        ax.set_xticks(x, names)
        ax.grid(alpha=0.3)
    handles, labels = ax_w.get_legend_handles_labels()
    fig.legend(handles, labels, loc="center right", fontsize=8)
    fig.tight_layout(rect=(0, 0, 0.85, 1))
    out["term"] = _png(fig)

    # Sparsity: mean active tokens per document and per query.
    fig = Figure(figsize=(7, 4))
    ax = fig.add_subplot()
    docs = [s.sparsity["doc_nonzero_mean"] for s in stages]
    qs = [s.sparsity["query_nonzero_mean"] or 0.0 for s in stages]
    ax.bar([i - 0.2 for i in x], docs, 0.4, label="per document")
    ax.bar([i + 0.2 for i in x], qs, 0.4, label="per query")
    ax.set_xticks(x, names)
    ax.set_ylabel("mean non-zero tokens")
    ax.set_title("Sparsity per stage")
    ax.legend()
    fig.tight_layout()
    out["sparsity"] = _png(fig)
    return out


def _png(fig) -> bytes:
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    return buf.getvalue()
