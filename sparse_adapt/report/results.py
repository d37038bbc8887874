"""What a report holds: the constants, each stage's results and the report itself."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from sparse_adapt.report.criteria import PASS, Criterion, TermSummary

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

# The report's plots: key -> file name beside report.md.
PLOTS = {
    "criteria": "criteria.png",
    "groups": "ndcg_by_group.png",
    "term": "term_weight_rank.png",
    "sparsity": "sparsity.png",
}

HYPOTHESES = {
    REFERENCE: "Reference: the base model, untrained on the domain.",
    "H1": "Fine-tuning (distillation) alone teaches the domain.",
    "H2": "Vocabulary extension + fine-tuning makes the domain term active.",
    "H3": "+ domain warm-up MLM gives the term positive logits and weight.",
    "H4": "+ dictionary pre-training gives the term high weight, rank 1 and query expansion.",
}


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
    top: dict[str, list[str]]  # qid -> its TOP_K doc ids, or as many as the most relevant documents a query has
    terms: dict[str, TermSummary]
    criteria: list[Criterion]
    sparsity: dict[str, float | None]
    explanations: dict[str, list[Explained]]  # semantic qid -> top EXPLAIN_K documents
    # Judged queries behind ``metrics`` and ``heldout_metrics``: {"queries": n, "held-out queries": m}
    judged: dict[str, int] = field(default_factory=dict)

    def passed(self) -> int:
        return sum(c.status == PASS for c in self.criteria)


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
    benchmark: dict[str, Any] | None = None  # the benchmark.json of --benchmark, as loaded

    def to_dict(self) -> dict:
        return asdict(self)

    def stage(self, name: str) -> StageResult:
        return next(s for s in self.stages if s.name == name)
