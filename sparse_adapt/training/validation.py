"""Validation and checkpoint selection for the distill stage.

The validation queries (``--valid FILE``, or a seeded fraction of ``train.jsonl``) are
ranked against the whole corpus after every epoch, like ``sparse-adapt evaluate`` ranks
(exact dot products, ranx nDCG@10), with qrels derived from their teacher scores by the
bundled rule. Each query is *domain* (it or a positive candidate names a domain term) or
*control*. The selection objective rewards domain gains and penalises control loss, both
against the reference (``--reference``, by default the run's frozen starting model):

    J = (nDCG_domain - nDCG_domain^ref) - control_penalty * max(0, nDCG_control^ref - nDCG_control)

:func:`select_epoch` is a pure function of the logged records, so the choice is testable
and reproducible from ``train_log.jsonl`` alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch

from sparse_adapt.data import Document, Qrels, Query, TrainExample, collapse_whitespace, mentions_term
from sparse_adapt.progress import signed
from sparse_adapt.retrieval.evaluation import evaluate_run, score_in_memory

METRIC = "ndcg@10"
KINDS = ("domain", "control")


def teacher_grade(score: float) -> int:
    """The bundled qrels rule (``corpora/gatrocraptic/README.md``): >= 8 -> 2, > 0 -> 1, else 0."""
    return 2 if score >= 8 else (1 if score > 0 else 0)


def query_kind(example: TrainExample, terms: Sequence[str]) -> str:
    """``"domain"`` when a teacher-positive candidate or the query names a domain term, else ``"control"``."""
    texts = [example.query, *(t for t, s in zip(example.doc_texts, example.teacher_scores) if s > 0)]
    return "domain" if any(mentions_term(t, terms) for t in texts) else "control"


def split_valid(
    examples: Sequence[TrainExample], fraction: float, seed: int, terms: Sequence[str]
) -> tuple[list[TrainExample], list[TrainExample]]:
    """(train, valid): about ``want = round(fraction * n)`` queries held out (none when it is 0),
    drawn per kind in proportion: ``min(k - 1, max(1, round(want * k / n)))`` of a kind's ``k`` (at
    least one, but each kind keeps at least one training query), seeded, order of the file kept."""
    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"valid fraction must be in [0, 1), got {fraction}")
    want = round(fraction * len(examples))
    if want == 0:
        return list(examples), []
    by_kind: dict[str, list[int]] = {}
    for i, ex in enumerate(examples):
        by_kind.setdefault(query_kind(ex, terms), []).append(i)
    gen = torch.Generator().manual_seed(seed)
    held: set[int] = set()
    for kind in sorted(by_kind):
        idx = by_kind[kind]
        take = min(len(idx) - 1, max(1, round(want * len(idx) / len(examples))))
        order = torch.randperm(len(idx), generator=gen).tolist()
        held |= {idx[j] for j in order[:take]}
    return [ex for i, ex in enumerate(examples) if i not in held], [ex for i, ex in enumerate(examples) if i in held]


def check_validation_choice(
    examples: Sequence[TrainExample], terms: Sequence[str], fraction: float, valid_file: str | None,
    valid: Sequence[TrainExample] | None = None,
) -> None:
    """Before any training, where the distill stage's validation queries come from: a file
    (``valid_file``, its name; None: none given) or ``fraction`` of ``examples``, not both (the
    file would win silently); a fraction must hold out at least one query (the split's size
    does not depend on the seed), or validation would silently not happen. The file's queries
    (``valid``) must not be training queries: ``--valid train.jsonl`` scored, and selected
    epochs and trials by, what the model was distilled on."""
    from sparse_adapt.errors import ConfigError

    if valid_file is not None:
        if fraction > 0:
            raise ConfigError(f"--valid and distill.valid_fraction {fraction:g} both choose the validation queries: "
                              f"give one (--valid {valid_file})")
        # By text, not id: make-train names queries by document and kind, so two runs over one
        # corpus share ids for different crops.
        trained = {_query_key(ex.query): ex.qid for ex in examples}
        again = [ex for ex in valid or () if _query_key(ex.query) in trained]
        if again:
            ex = again[0]
            raise ConfigError(f"--valid {valid_file}: {len(again)} of its {len(valid)} queries are training queries too "
                              f"(e.g. {ex.qid!r}, the text of training query {trained[_query_key(ex.query)]!r}); "
                              "validation must hold queries the model is not trained on "
                              "(or use --valid-fraction / distill.valid_fraction to hold some out)")
    elif fraction > 0 and not split_valid(examples, fraction, 0, terms)[1]:
        raise ConfigError(f"distill.valid_fraction {fraction:g} of {len(examples)} training queries holds out none "
                          "(each query kind keeps one for training): raise it, or give --valid FILE")


@dataclass
class ValidationSet:
    documents: list[Document]
    queries: list[Query]
    qrels: Qrels
    kinds: dict[str, list[str]]  # "domain"/"control" -> qids

    @classmethod
    def build(cls, valid: Sequence[TrainExample], documents: Sequence[Document], terms: Sequence[str]) -> "ValidationSet":
        """Rank against the corpus plus any candidate the corpus lacks (by doc id)."""
        docs = {d.doc_id: d for d in documents}
        for ex in valid:
            for did, text in zip(ex.doc_ids, ex.doc_texts):
                docs.setdefault(did, Document(did, text))
        qrels = {ex.qid: {d: teacher_grade(s) for d, s in zip(ex.doc_ids, ex.teacher_scores)} for ex in valid}
        kinds: dict[str, list[str]] = {k: [] for k in KINDS}
        for ex in valid:
            kinds[query_kind(ex, terms)].append(ex.qid)
        return cls(list(docs.values()), [Query(ex.qid, ex.query) for ex in valid], qrels, kinds)

    def measure(self, splade) -> dict[str, float | None]:
        """nDCG@10 of each kind (None for a kind without queries or without a relevant document)."""
        run = score_in_memory(splade, self.documents, self.queries)
        out: dict[str, float | None] = {}
        for kind, qids in self.kinds.items():
            judged = [q for q in qids if any(g > 0 for g in self.qrels[q].values())]
            out[kind] = evaluate_run(self.qrels, run, (METRIC,), qids=judged)[METRIC] if judged else None
        return out


def objective(measured: dict[str, float | None], reference: dict[str, float | None], control_penalty: float) -> float:
    """J (module docstring); a kind without queries contributes 0."""
    gain = 0.0
    if measured.get("domain") is not None and reference.get("domain") is not None:
        gain = measured["domain"] - reference["domain"]
    loss = 0.0
    if measured.get("control") is not None and reference.get("control") is not None:
        loss = max(0.0, reference["control"] - measured["control"])
    return gain - control_penalty * loss


@dataclass(frozen=True)
class Selection:
    best_epoch: int | None  # None: no epoch measured yet
    best_objective: float
    stop: bool  # patience exhausted: no improvement in the last ``patience`` epochs


def select_epoch(records: Sequence[dict], patience: int = 0, min_delta: float = 0.0) -> Selection:
    """Pick the best epoch from ``{"epoch": int, "objective": float}`` records, in any order.

    The best is the highest objective; ties go to the earliest epoch (fewer updates away
    from the reference). An epoch improves on the best so far only by more than
    ``min_delta``. ``stop`` is True when ``patience`` > 0 and the last ``patience`` epochs
    brought no improvement. Non-finite objectives never win.
    """
    best_epoch, best = None, -math.inf
    last = 0
    for r in sorted(records, key=lambda r: r["epoch"]):
        last = r["epoch"]
        value = r["objective"]
        if not math.isfinite(value):
            continue
        if best_epoch is None or value > best + min_delta:
            best_epoch, best = r["epoch"], value
    stop = patience > 0 and best_epoch is not None and last - best_epoch >= patience
    return Selection(best_epoch, best, stop)


class EpochSelector:
    """Evaluate after every epoch, log it, keep the best weights, say when to stop.

    ``epoch_end(epoch)`` is the training loop's ``on_epoch_end`` callback; ``restore()``
    loads the best epoch's weights back into the model at the end. The reference's and
    the starting model's scores are logged as epochs ``"reference"`` and ``0``; epoch 0 is
    not a candidate (the stage's job is to distil).
    """

    def __init__(
        self, splade, vset: ValidationSet, reference_scores: dict[str, float | None], *, control_penalty: float,
        patience: int, log, message, on_record=None, resume: dict | None = None,
    ):
        self.splade, self.vset, self.reference = splade, vset, reference_scores
        self.control_penalty, self.patience = control_penalty, patience
        self.log, self.message, self.on_record = log, message, on_record
        self.records: list[dict] = []
        self.logged: list[dict] = []  # every validation record written, for a resumed run's log
        self._best_state: dict[str, torch.Tensor] | None = None
        if resume is not None:
            # From a mid-stage checkpoint (state_dict()): the model is no longer the starting one,
            # so epoch 0 is not measured again; the dead attempt's records left the log with it.
            self._best_state = resume["best_state"] or None
            for record in resume["logged"]:
                self._log(record)
            # The epochs' records are the logged ones after "reference" and 0 (select_epoch reads
            # only their "epoch" and "objective").
            self.records = [r for r in self.logged if r["epoch"] not in ("reference", 0)]
            return
        sizes = {k: len(v) for k, v in vset.kinds.items()}
        self._log({"event": "validation", "stage": "distill", "epoch": "reference", **reference_scores, "queries": sizes})
        start = vset.measure(splade)
        self._log({"event": "validation", "stage": "distill", "epoch": 0, **start,
                   "objective": objective(start, reference_scores, control_penalty)})

    def _log(self, record: dict) -> None:
        self.logged.append(record)
        self.log(record)

    def state_dict(self) -> dict:
        """What a mid-stage checkpoint needs to resume the selection: the validation records
        logged so far and the best epoch's weights (an empty dict: none yet)."""
        return {"logged": self.logged, "best_state": self._best_state or {}}

    def epoch_end(self, epoch: int) -> bool:
        measured = self.vset.measure(self.splade)
        record = {"epoch": epoch, **measured, "objective": objective(measured, self.reference, self.control_penalty)}
        self.records.append(record)
        sel = select_epoch(self.records, self.patience)
        if sel.best_epoch == epoch:
            # In host memory: on a GPU a second full copy of the weights would sit in device memory.
            self._best_state = {k: v.detach().to("cpu", copy=True) for k, v in self.splade.state_dict().items()}
        full = {"event": "validation", "stage": "distill", **record, "best_epoch": sel.best_epoch, "stop": sel.stop}
        self._log(full)
        shown = " ".join(f"{k} {v:.3f}" for k, v in measured.items() if v is not None)
        self.message(f"distill: validation epoch {epoch}: {shown} objective {signed(record['objective'], 4)} (best: epoch {sel.best_epoch})")
        if self.on_record is not None:
            self.on_record(full)
        return sel.stop

    def restore(self) -> Selection:
        """Load the best epoch's weights (if any epoch ran) and return the selection."""
        sel = select_epoch(self.records, self.patience)
        if self._best_state is not None:
            self.splade.load_state_dict(self._best_state)
        return sel


def _query_key(text: str) -> str:
    return collapse_whitespace(text.casefold())


def shared_positives(train: Sequence[TrainExample], valid: Sequence[TrainExample]) -> int:
    """How many ``valid`` queries have a teacher-positive document that is a positive of a
    ``train`` query too: a split by query leaves them, and the objective then partly rewards
    remembering those documents rather than reading new queries."""
    def positives(ex: TrainExample) -> set[str]:
        return {d for d, s in zip(ex.doc_ids, ex.teacher_scores) if teacher_grade(s) > 0}

    trained = set().union(*(positives(ex) for ex in train))
    return sum(1 for ex in valid if positives(ex) & trained)
