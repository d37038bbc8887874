"""The benchmark's domains: a name registered in ``corpora`` (its split from
``corpora.SPLITS``; gatrocraptic's ``bundled``, one in no split ``registered``) or a folder
holding a bundled domain's files (split ``outside``), and
each one's evaluation set (documents, queries, qrels and query groups, checked), scored per
group like ``sparse-adapt evaluate``."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import corpora
from sparse_adapt.data import Document, Qrels, Query
from sparse_adapt.errors import ConfigError
from sparse_adapt.modeling.encoder import SpladeEncoder
from sparse_adapt.report.benchmark_md import METRIC
from sparse_adapt.retrieval.feedback import Feedback

FILES = {
    "docs": "docs.jsonl", "queries": "queries.jsonl", "qrels": "qrels.tsv", "train": "train.jsonl",
    "terms": "domain_terms.json", "dictionary": "dictionary.jsonl", "heldout_queries": "heldout_queries.jsonl",
    "heldout_qrels": "heldout_qrels.tsv", "query_groups": "query_groups.json",
}


@dataclass(frozen=True)
class BenchDomain:
    name: str
    split: str  # dev, test, bundled (gatrocraptic), registered (a name in no split) or outside (a directory)
    files: corpora.CorpusFiles


# What only the pipelines trained on hand-written inputs read.
HAND_WRITTEN = ("train", "terms", "dictionary")


def resolve_domain(spec: str, hand_written: bool = True, flag: str = "--domains") -> BenchDomain:
    """A registered data set name, or a directory with the bundled file names (``hand_written``
    False: the terms, dictionary and training lists may be missing)."""
    if spec in corpora.names():
        files = corpora.get(spec)
        try:
            which = corpora.split(spec)
        except KeyError:
            which = "bundled" if spec == corpora.GATROCRAPTIC.name else "registered"
        return BenchDomain(spec, which, files)
    root = Path(spec)
    for name in corpora.names():  # a registered domain by its folder is that domain, not an outside one
        if root.is_dir() and corpora.get(name).docs.parent.resolve() == root.resolve():
            return resolve_domain(name, hand_written, flag)
    if not root.is_dir():
        raise ConfigError(f"{flag}: {spec!r} is neither a registered data set ({', '.join(corpora.names())}) nor a directory")
    missing = [n for k, n in FILES.items() if not (root / n).is_file() and (hand_written or k not in HAND_WRITTEN)]
    if missing:
        raise ConfigError(f"{flag}: {root} lacks {', '.join(missing)}")
    files = corpora.CorpusFiles(name=root.resolve().name, **{k: root / v for k, v in FILES.items()})
    return BenchDomain(files.name, "outside", files)


def pool_documents(own: str | None = None) -> list[Document]:
    """Every registered domain's documents but ``own``'s, ids prefixed ``<name>/`` (so they never
    clash with a domain's own ids or its qrels)."""
    from sparse_adapt.data import load_documents

    return [Document(f"{name}/{d.doc_id}", d.text)
            for name in corpora.names() if name != own for d in load_documents(corpora.get(name).docs)]


@dataclass
class EvalSet:
    documents: list[Document]
    queries: list[Query]
    qrels: Qrels
    groups: dict[str, list[str]]

    @classmethod
    def load(cls, files: corpora.CorpusFiles, warnings: list[str] | None = None) -> "EvalSet":
        """The domain's files, checked; what is wrong but usable is appended to ``warnings``."""
        from sparse_adapt.data import load_documents, load_query_groups
        from sparse_adapt.data.qrels import check_query_groups
        from sparse_adapt.retrieval.evaluation import load_judged

        warnings = [] if warnings is None else warnings
        documents = load_documents(files.docs)
        # As `evaluate` and `report` do: qrels naming documents or queries that are not there
        # count as misses or drop out silently; nothing at all to match is an error.
        loaded, judged, notes = load_judged([(files.queries, files.qrels), (files.heldout_queries, files.heldout_qrels)],
                                            files.docs, {d.doc_id for d in documents})
        warnings += notes
        queries = [q for part in loaded for q in part]
        qrels = {q: r for part in judged for q, r in part.items()}
        groups = load_query_groups(files.query_groups)
        # As report and adapt do: a group naming a query that is not there would shrink silently.
        check_query_groups(files.query_groups, groups, {q.qid for q in queries})
        # A held-out query in no group is scored nowhere: a group left out had gone without a word
        # (a domain may have no held-out group of a kind, as the bundled one has no explicit queries).
        heldout = [q.qid for q in loaded[1] if q.qid in judged[1]]
        grouped = {q for qids in groups.values() for q in qids}
        if stray := [q for q in heldout if q not in grouped]:
            warnings.append(f"{files.query_groups}: {len(stray)} of the {len(heldout)} judged held-out queries are in "
                            f"no group (e.g. {stray[0]}): they are not scored")
        return cls(documents, queries, qrels, groups)

    def pooled(self, own: str | None) -> "EvalSet":
        """The same queries searched among every registered domain's documents too (``own``:
        the registered domain these are, whose documents are already here)."""
        # A domain joined from registered ones (bench.join) holds their documents already: a second,
        # never-relevant copy of each of its relevant documents would rank beside it.
        texts = {d.text for d in self.documents}
        return dataclasses.replace(self, documents=[*self.documents, *(d for d in pool_documents(own) if d.text not in texts)])

    def scores(self, splade: SpladeEncoder, feedback: Feedback | None = None) -> dict[str, dict]:
        """``{group: {"queries": n, "ndcg@10": mean, "per_query": {qid: value}}}`` over each
        group's judged queries."""
        from sparse_adapt.retrieval.evaluation import score_in_memory

        return self.run_scores(score_in_memory(splade, self.documents, self.queries, feedback=feedback))

    def run_scores(self, run: dict[str, dict[str, float]]) -> dict[str, dict]:
        """The same for a run ``{qid: {doc_id: score}}`` from any retriever, with each judged
        query's own value (``per_query``) for paired tests across domains and seeds."""
        from sparse_adapt.retrieval.evaluation import evaluate_per_query, evaluate_run

        per_query = evaluate_per_query(self.qrels, run, METRIC)
        out = {}
        for group, qids in self.groups.items():
            judged = [q for q in qids if q in self.qrels and q in run]
            value = evaluate_run(self.qrels, run, (METRIC,), qids=judged)[METRIC] if judged else None
            out[group] = {"queries": len(judged), METRIC: value,
                          "per_query": {q: round(per_query[q], 6) for q in judged}}
        return out
