"""Recommendations: each failed check of a term diagnosis mapped to the sparse-adapt
command that addresses it (the spec's staged pipeline: extend -> warmup -> dictionary ->
distill, each stage fixing one capability gap)."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

from diagnostics.sections.checks import HIGH_WEIGHT, WARN
from sparse_adapt.training.config import DistillConfig

DEFAULTS = DistillConfig()  # the values a suggested --config raises


@dataclass
class Sources:
    """Where the diagnosed model and data came from, to fill in the suggested commands."""

    model: str
    docs: str | None = None
    terms: str | None = None
    dictionary: str | None = None
    train: str | None = None
    # True when the term already is one domain token of this model (extend stage done).
    extended: bool = False
    # The adapt run directory whose final model this is: its terms file is edited and adapt rerun,
    # since `train` from the adapted model on the run's dictionary and lists would not name the term.
    adapt_run: str | None = None
    # A domain term of the model spelt near a term no document contains (set by the diagnosis).
    near: str | None = None
    # The base the run that wrote ``model`` trained from: training on from a run's checkpoint
    # compares with it (preservation, validation) and takes the settings recommended for it;
    # without --reference they were the checkpoint's own, and offline-splade-tiny's dropped.
    reference: str | None = None

    def path(self, value: str | None, placeholder: str) -> str:
        if value is None:
            return placeholder
        rel = os.path.relpath(value)
        return shlex.quote(rel if len(rel) < len(value) and not rel.startswith("../..") else value)

    def train_command(self, stages: str) -> str:
        return (
            f"sparse-adapt train --base {shlex.quote(self.model)} --corpus {self.path(self.docs, 'DOCS.jsonl')} "
            f"--terms {self.path(self.terms, 'TERMS.json')} --dictionary {self.path(self.dictionary, 'DICT.jsonl')} "
            f"--train {self.path(self.train, 'TRAIN.jsonl')} --out OUT_DIR --stages {stages}"
            + (f" --reference {self.path(self.reference, '')}" if self.reference and self.reference != self.model else "")
        )

    def adapt_command(self) -> str:
        return (f"sparse-adapt adapt --base {shlex.quote(self.model)} --corpus {self.path(self.docs, 'DOCS.jsonl')} "
                f"--terms {self.path(self.terms, 'TERMS.json')} --out OUT_DIR")

    def stages(self, *later: str) -> str:
        return ",".join((() if self.extended else ("extend",)) + later)

    def adapt_again(self, term: str) -> str:
        terms = self.path(self.terms, "the terms file you gave adapt")
        return (f"add '{term}' to a category of {terms} and rerun the `sparse-adapt adapt` command that made "
                f"{self.path(self.adapt_run, 'the run')}: it makes the dictionary and training data again from the "
                "edited terms and retrains (pass --overwrite when it asks)")


@dataclass
class Recommendation:
    id: str  # stable key (see ORDER)
    finding: str  # what is wrong, in words
    action: str  # what to do about it
    commands: list[str] = field(default_factory=list)


def _details(checks: Sequence, fmt: Callable[[Any], str]) -> str:
    return "; ".join(f"{c.target}: {fmt(c)}" if c.target else fmt(c) for c in checks)


def _add_to_terms(term: str, s: Sources, checks: Sequence) -> Recommendation:
    return Recommendation(
        "add_to_terms",
        f"'{term}' is not in the terms file",
        s.adapt_again(term) if s.adapt_run else
        f"add '{term}' to a category of {s.path(s.terms, 'TERMS.json')} so extend-vocab, the domain hinge "
        "and the FLOPS exclusion cover it",
    )


def _extend(term: str, s: Sources, checks: Sequence) -> Recommendation:
    if any(c.name == "domain_token" and c.reason == "special_token" for c in checks):
        return Recommendation(
            "extend", f"'{term}' is a special token of this tokenizer: no vector holds it",
            "spell the term another way (special tokens cannot be domain terms)",
        )
    if any(c.name == "single_token" and c.reason == "special_token" for c in checks):
        finding = (f"'{term}' holds characters the tokenizer does not know ({checks[0].actual}): "
                   "only a token of its own can represent it")
    elif any(c.name == "single_token" for c in checks):
        finding = f"'{term}' is not one token: the model splits it ({checks[0].actual})"
    else:
        finding = f"'{term}' is one token but not a registered domain token (hinge and FLOPS exclusion ignore it)"
    if s.adapt_run:
        return Recommendation("extend", finding, s.adapt_again(term))
    action = ("add it to the vocabulary as one domain token and teach the new token: the extend stage adds it, the "
              "others give it weight (`extend-vocab` alone adds the token with no weight yet)")
    if (s.dictionary is None or s.train is None) and s.reference in (None, s.model):
        # A user with a corpus alone has neither file to name in `train`: adapt makes both from it. Said
        # in the action, as the other way: a second command read as a second step.
        action += f"; with a corpus alone, `{s.adapt_command()}` makes the dictionary and training data and runs them"
    return Recommendation("extend", finding, action, [s.train_command("extend,warmup,dictionary,distill")])


def _warmup(term: str, s: Sources, checks: Sequence) -> Recommendation:
    return Recommendation(
        "warmup",
        f"the MLM head does not predict '{term}' where it occurs ("
        + _details(checks, lambda c: f"logits {c.actual}" if c.name == "positive_logits" else f"weight {c.actual}")
        + ")",
        "run MLM warmup on the domain corpus, then dictionary pre-training, before distillation",
        [s.train_command(s.stages("warmup", "dictionary", "distill"))],
    )


def _dictionary(term: str, s: Sources, checks: Sequence) -> Recommendation:
    # Said as the failed checks have it: a term ranked first of its document but below the
    # weight target was called "weak next to its document's generic tokens".
    how = ("outranked by its document's generic tokens" if any(c.name == "top_rank" for c in checks)
           else f"its weight stays at or below {HIGH_WEIGHT:g}")
    return Recommendation(
        "dictionary",
        f"'{term}' is active but {how} ("
        + _details(checks, lambda c: f"rank {c.actual}" if c.name == "top_rank" else f"weight {c.actual}")
        + ")",
        "run the dictionary stage (definitions give the term emphasis) and keep the domain hinge on in "
        f"distillation (raise its weight `dom`, default {DEFAULTS.dom:g}, or its minimum weight `tau_min`, default "
        f"{DEFAULTS.tau_min:g}, under [distill] in DISTILL_CONFIG, a TOML file)",
        [s.train_command(s.stages("dictionary", "distill")) + " --config DISTILL_CONFIG"],
    )


def _query_expansion(term: str, s: Sources, checks: Sequence) -> Recommendation:
    action = (f"raise the query-expansion loss weight `qexp` (default {DEFAULTS.qexp:g}) under [distill] in "
              "DISTILL_CONFIG (a TOML file) and re-run distillation")
    if all(c.status == WARN for c in checks):  # checks.py: only feedback rescuing them makes a warning
        action = ("search with --feedback (evaluate, search) to reach it now, as these queries do with "
                  "feedback; for the model itself to expand them, " + action)
    return Recommendation(
        "query_expansion",
        f"queries without '{term}' in their text do not expand to it ("
        + _details(checks, lambda c: c.actual)
        + ")",
        action,
        [s.train_command(s.stages("distill")) + " --config DISTILL_CONFIG"],
    )


def _pooling(term: str, s: Sources, checks: Sequence) -> Recommendation:
    return Recommendation(
        "pooling_mismatch",
        "the model's encoding disagrees with max-pooled log(1 + relu(logit)) ("
        + _details(checks, lambda c: c.actual)
        + ")",
        "the model does not pool like SPLADE (custom code, changed output mask or a broken checkpoint); "
        "re-save it with sparse-adapt or report a bug with this output",
    )


def _documents(term: str, s: Sources, checks: Sequence) -> Recommendation:
    if any(c.reason == "beyond_window" for c in checks):
        return Recommendation(
            "documents",
            f"documents of {s.path(s.docs, 'the corpus')} use '{term}' only past the model's document window, "
            "where encoding (and so the index) cuts them off",
            "split long documents into passages that fit the window (index each passage as its own document)",
        )
    return Recommendation(
        "documents",
        f"no document of {s.path(s.docs, 'the corpus')} contains '{term}'",
        "pass --docs with documents that use the term; warmup and distillation (train --corpus) need them too",
    )


# check name -> recommendation for a failed (or warned) check; several checks may share one.
RECOMMENDERS: dict[str, Callable[[str, Sources, Sequence], Recommendation]] = {
    "in_terms_file": _add_to_terms,
    "single_token": _extend,
    "domain_token": _extend,
    "in_documents": _documents,
    "positive_logits": _warmup,
    "nonzero_weight": _warmup,
    "weight_matches_encoding": _pooling,
    "high_weight": _dictionary,
    "top_rank": _dictionary,
    "query_expansion": _query_expansion,
}

# Pipeline order: the pooling first, then the documents (no stage teaches a term no document
# uses), the vocabulary, then logits, emphasis, queries.
ORDER = ["pooling_mismatch", "documents", "add_to_terms", "extend", "warmup", "dictionary", "query_expansion"]


def recommend(term: str, failed_checks: Sequence, sources: Sources) -> list[Recommendation]:
    """One recommendation per distinct remedy, in pipeline order.

    ``failed_checks`` are the term diagnosis' checks with status warn/fail (objects with
    ``name``, ``status``, ``target``, ``actual`` and ``reason``, which decides between remedies);
    checks sharing a remedy are reported together.
    """
    groups: dict[Callable, list] = {}
    for check in failed_checks:
        groups.setdefault(RECOMMENDERS[check.name], []).append(check)
    recs = [build(term, sources, checks) for build, checks in groups.items()]
    if any(c.name == "single_token" for c in failed_checks):
        # A split term: the weight, logit and expansion checks graded its pieces, not the term, and
        # extend's command already runs every stage; three --stages lists for one run contradicted it.
        recs = [r for r in recs if r.id not in SUBSUMED_BY_EXTEND]
    if sources.adapt_run and {"add_to_terms", "extend"} <= {r.id for r in recs}:
        # Both remedies are "edit the run's terms and rerun adapt": one recommendation, both findings.
        extend = next(r for r in recs if r.id == "extend")
        recs = [replace(r, finding=f"{r.finding}; {extend.finding}") if r.id == "add_to_terms" else r
                for r in recs if r.id != "extend"]
    if sources.near:  # a typo is the likelier story than a term to add: said before any remedy for one
        recs = [replace(r, action=f"check the spelling first: this model has the domain term '{sources.near}'; "
                                  f"if '{term}' is another term, {r.action}")
                if r.id in ("add_to_terms", "extend", "documents") else r for r in recs]
    return sorted(recs, key=lambda r: ORDER.index(r.id))


# What extend's `--stages extend,warmup,dictionary,distill` already runs for a term the model splits.
SUBSUMED_BY_EXTEND = ("warmup", "dictionary", "query_expansion")
