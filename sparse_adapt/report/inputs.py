"""Report inputs: which files, loaded and cross-checked once; query groups; domain terms
and the primary term of the criteria table."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Sequence

from sparse_adapt.data import Document, Qrels, Query, flat_terms, mentions_term
from sparse_adapt.defaults import BUNDLED
from sparse_adapt.errors import ConfigError
from sparse_adapt.modeling.encoder import OFFLINE_MINILM, SpladeEncoder
from sparse_adapt.training.config import TrainConfig
from sparse_adapt.training.config_files import config_from_dict, load_config, with_recommended
from sparse_adapt.training.stages import EXPERIMENTS


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
    # Write into a non-empty --out that holds no report, and retrain runs whose settings differ.
    overwrite: bool = False
    # A `sparse-adapt benchmark` output (a result file, or a directory holding one) whose per-domain and
    # ablation tables the report includes; None: no such section.
    benchmark: Path | None = None

    def resolved(self) -> "ReportInputs":
        """Fill in bundled files. Terms, dictionary, training lists, queries, qrels, held-out
        files and groups default to the bundled ones only when the corpus is the bundled one: a
        user's corpus is never trained on or judged by Gatrocraptic's by accident."""
        G = BUNDLED
        corpus = Path(self.corpus) if self.corpus is not None else G.docs
        bundled = corpus.resolve() == G.docs.resolve()
        if not bundled:
            # Nor trained on its terms, dictionary and pseudo-labelled lists: those silently made
            # every query of a user's corpus a control and trained on Gatrocraptic.
            missing = [f"--{n}" for n in ("terms", "dictionary", "train", "queries", "qrels") if getattr(self, n) is None]
            if missing:
                raise ConfigError(f"{', '.join(missing)} required with your own --corpus {corpus} "
                                  "(the bundled ones describe the bundled corpus)")
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
        if self.term is not None and not self.term.strip():
            raise ConfigError("--term is empty: give the term of the criteria table, or leave --term out")
        unknown = [e for e in self.experiments if e not in EXPERIMENTS]
        if unknown or not self.experiments:
            raise ConfigError(f"--experiments: unknown {unknown or 'empty'}; valid: {', '.join(EXPERIMENTS)}")
        twice = sorted({e for e in self.experiments if self.experiments.count(e) > 1})
        if twice:
            raise ConfigError(f"--experiments names {', '.join(twice)} more than once")
        return replace(
            self, out=Path(self.out), corpus=corpus, terms=pick(self.terms, G.terms),
            dictionary=pick(self.dictionary, G.dictionary), train=pick(self.train, G.train), queries=queries,
            qrels=pick(self.qrels, G.qrels), heldout_queries=heldout_q, heldout_qrels=heldout_r, groups=groups,
        )

    def paths(self) -> tuple[Path | None, ...]:
        """The local files the report reads (after :meth:`resolved`): none may be its --out."""
        config = self.config if isinstance(self.config, (str, Path)) else None
        return (self.corpus, self.terms, self.dictionary, self.train, self.queries, self.qrels, self.heldout_queries,
                self.heldout_qrels, self.groups, self.benchmark, config, self.base)

    @property
    def config_file(self) -> str | None:
        """The config file, as errors about its settings name it (None: none, a table or a TrainConfig)."""
        return str(self.config) if isinstance(self.config, (str, Path)) else None

    def train_config(self) -> TrainConfig:
        if isinstance(self.config, TrainConfig):
            return self.config.validate()
        if isinstance(self.config, dict):
            return config_from_dict(with_recommended(self.config, self.base), "report config")
        return load_config(self.config, self.base)


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


def derive_groups(queries: Sequence[Query], heldout: Sequence[Query], terms: dict[str, list[str]]) -> dict[str, list[str]]:
    """Queries naming a domain term are ``domain-explicit``, the others ``control``
    (held-out ones get a ``heldout-`` prefix). No semantic group can be derived: which
    queries *describe* the domain without naming it needs a person (``--groups``)."""
    all_terms = flat_terms(terms)
    groups: dict[str, list[str]] = {}
    for prefix, qs in (("", queries), ("heldout-", heldout)):
        for q in qs:
            name = "domain-explicit" if mentions_term(q.text, all_terms) else "control"
            groups.setdefault(prefix + name, []).append(q.qid)
    return groups


def load_report_data(inputs: ReportInputs) -> ReportData:
    """Load and cross-check every input (before any training starts)."""
    from sparse_adapt.data import check_query_groups, load_documents, load_domain_terms, load_query_groups

    i = inputs.resolved()
    documents, terms = load_documents(i.corpus), load_domain_terms(i.terms)
    from sparse_adapt.retrieval.evaluation import load_judged

    # As `evaluate` checks them: qrels judging none of the queries stop here, not after training.
    pairs = [(i.queries, i.qrels)] + ([(i.heldout_queries, i.heldout_qrels)] if i.heldout_queries else [])
    loaded, judged, notes = load_judged(pairs, i.corpus, {d.doc_id for d in documents})
    queries, qrels = loaded[0], judged[0]
    heldout, heldout_qrels = (loaded[1], judged[1]) if i.heldout_queries else ([], {})
    if i.groups is not None:
        groups, source = load_query_groups(i.groups), "file"
        known = {q.qid for q in queries} | {q.qid for q in heldout}
        check_query_groups(i.groups, groups, known)
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


def domain_terms(splade: SpladeEncoder, data: ReportData) -> list[str]:
    """One spelling per distinct term (after the tokenizer's normaliser): the spelling the
    documents use most, so "Gatrocraptic" rather than "gatrocraptic"."""
    from sparse_adapt.modeling.tokenization import normalize_term

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
        counts = [sum(mentions_term(docs[d], [t]) for d in relevant) for t in terms]
        best = max(range(len(terms)), key=lambda k: (counts[k], -k))
        if counts[best]:
            return terms[best], (
                f"in {counts[best]} of the {len(relevant)} relevant documents of the domain-{kind} queries"
            )
    return terms[0], "first term of the terms file (no relevant document of a domain query names a term)"
