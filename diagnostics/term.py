"""Term diagnosis: why a SPLADE model does or does not give a domain term weight.

The spec's five-section "Token Diagnostic", computed as plain data that the CLI renders
and ``--json`` dumps unchanged:

1. vocabulary: the term's token id(s), whether it is one token, the base model's split,
   its category in the terms file;
2. logits: the MLM logit of the term's token at every position of a document using it;
3. weight: ``log(1 + relu(max_i logit_i))`` by hand, checked against ``splade.encode``;
4. ranking: the term's rank among the document's non-zero tokens;
5. checks and recommendations derived from 1-4, plus whether queries that do not
   contain the term expand to it.

A term the model splits into pieces (an unextended model) gets sections 2-4 per piece.
When no document contains the term, sections 2-4 run on the term alone as a probe text,
which still shows whether the model can activate it at all.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Sequence

import numpy as np
import torch

from diagnostics.recommend import Recommendation, Sources, recommend
from diagnostics.schema import DIAGNOSE_SCHEMA
from diagnostics.tokens import base_pieces, eval_mode, find_spans, input_ids, term_ids
from sparse_adapt.data import Document, Query
from sparse_adapt.errors import ConfigError
from sparse_adapt.modeling.encoder import SpladeEncoder
from sparse_adapt.modeling.vectors import ranked_row
from sparse_adapt.modeling.vocabulary import normalize_term

# The spec's H4 success criterion "High SPLADE weight: > 2.0".
HIGH_WEIGHT = 2.0
# The spec's H3 criterion "High relative ranking: Top 10"; rank 1 is the H4 target.
TOP_RANK = 10
# Two fp32 forward passes of the same text differ by ~1e-6; a real pooling difference
# (another activation, a missing mask) is orders of magnitude larger.
WEIGHT_TOLERANCE = 1e-4
# Tokens listed in the ranking section, as in the spec.
TOP_TOKENS = 10

PASS, WARN, FAIL, NA = "pass", "warn", "fail", "n/a"


@dataclass
class VocabularyCheck:
    term: str
    normalized: str  # after the tokenizer's normaliser (lowercasing for uncased models)
    token_ids: list[int]
    pieces: list[str]  # token strings of token_ids
    decoded: list[str]  # tokenizer.decode of each id
    single_token: bool
    in_vocabulary: bool  # the normalised term is itself a vocabulary entry
    base_pieces: list[str] | None  # the subword model's split, ignoring added tokens
    added_token: bool  # the single token was added to the base vocabulary (extend-vocab)
    domain_token: bool  # the single token is one of the model's registered domain tokens
    terms_file: str | None
    in_terms_file: bool
    categories: list[str]  # categories of the terms file listing it (normalised match)
    model_category: str | None  # category recorded in the model's sparse_adapt.json


@dataclass
class DocumentChoice:
    source: str  # "first" (first document containing the term), "doc" (--doc) or "probe"
    doc_id: str | None
    text: str
    num_tokens: int  # including [CLS]/[SEP]
    term_spans: list[list[int]]  # half-open [start, end) token spans of the term
    docs_searched: int
    docs_containing: list[str]  # ids of every document containing the term


@dataclass
class PositionLogit:
    position: int
    token: str
    logit: float
    occurrence: bool  # this position is (part of) an occurrence of the term


@dataclass
class LogitAnalysis:
    positions: list[PositionLogit]
    occurrences: list[int]  # positions where this token occurs as part of the term
    min_logit: float  # over all positions
    max_logit: float
    max_position: int
    occurrence_min: float | None
    occurrence_max: float | None
    occurrence_mean: float | None
    verdict: str  # "positive" (all occurrence logits > 0), "mixed", "negative", "absent"


@dataclass
class WeightCheck:
    max_logit: float  # over all positions, [CLS]/[SEP] included (the model's pooling)
    max_position: int
    after_relu: float
    after_log1p: float
    special_token: bool  # zeroed in every vector by the model's output mask
    expected: float  # after_log1p, or 0 for a special token
    actual: float  # from splade.encode of the document
    abs_diff: float
    tolerance: float
    matches: bool


@dataclass
class RankedToken:
    rank: int
    token: str
    token_id: int
    weight: float
    in_text: bool  # occurs in the document text (else an expansion)
    target: bool  # the diagnosed token


@dataclass
class Ranking:
    weight: float
    rank: int | None  # 1-based among non-zero tokens; None when the weight is 0
    nonzero: int
    top: list[RankedToken]


@dataclass
class ExpandingQuery:
    qid: str
    text: str
    weight: float


@dataclass
class QueryExpansion:
    queries: int  # queries checked
    without_term: int  # of which do not contain the term in their text
    expanding: list[ExpandingQuery]  # queries without the term that activate the token
    with_term: int
    with_term_active: int  # queries containing the term whose vector has it


@dataclass
class TargetDiagnosis:
    """Sections 2-4 for one token id (the term, or one of its pieces)."""

    token_id: int
    token: str
    logits: LogitAnalysis
    weight: WeightCheck
    ranking: Ranking
    query_expansion: QueryExpansion | None


@dataclass
class Check:
    name: str
    status: str  # pass | warn | fail | n/a
    expected: str
    actual: str
    target: str | None = None  # the piece a per-token check is about


@dataclass
class TermDiagnosis:
    schema: str
    term: str
    model: str
    vocabulary: VocabularyCheck
    document: DocumentChoice
    targets: list[TargetDiagnosis]
    checks: list[Check]
    recommendations: list[Recommendation]
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.status in (WARN, FAIL)]


# ---------------------------------------------------------------------------- sections
def vocabulary_check(
    splade: SpladeEncoder, term: str, terms: dict[str, list[str]] | None, terms_file: str | None
) -> VocabularyCheck:
    tok = splade.tokenizer
    ids = term_ids(splade, term)
    norm = normalize_term(tok, term)
    single = len(ids) == 1 and ids[0] != tok.unk_token_id
    added = single and ids[0] in tok.added_tokens_decoder and ids[0] not in tok.all_special_ids
    categories = []
    for category, items in (terms or {}).items():
        if any(normalize_term(tok, t) == norm for t in items):
            categories.append(category)
    return VocabularyCheck(
        term=term,
        normalized=norm,
        token_ids=ids,
        pieces=tok.convert_ids_to_tokens(ids),
        decoded=[tok.decode([i]) for i in ids],
        single_token=single,
        in_vocabulary=norm in tok.get_vocab(),
        base_pieces=base_pieces(splade, term),
        added_token=added,
        domain_token=single and ids[0] in set(splade.settings.domain_token_ids),
        terms_file=terms_file,
        in_terms_file=bool(categories),
        categories=categories,
        model_category=splade.settings.domain_terms.get(norm),
    )


def choose_document(
    splade: SpladeEncoder, ids: list[int], term: str, documents: Sequence[Document], doc_id: str | None
) -> DocumentChoice:
    containing: list[str] = []
    first: tuple[Document, list[int], list[tuple[int, int]]] | None = None
    for d in documents:
        d_ids = input_ids(splade, d.text, "document")
        spans = find_spans(d_ids, ids)
        if spans:
            containing.append(d.doc_id)
            if first is None:
                first = (d, d_ids, spans)
    if doc_id is not None:
        chosen = next((d for d in documents if d.doc_id == doc_id), None)
        if chosen is None:
            raise ConfigError(f"--doc {doc_id!r}: no document with this id in the documents file")
        d_ids = input_ids(splade, chosen.text, "document")
        source, doc, spans = "doc", chosen, find_spans(d_ids, ids)
    elif first is not None:
        source, (doc, d_ids, spans) = "first", first
    else:
        doc = Document("", term)
        d_ids = input_ids(splade, term, "document")
        source, spans = "probe", find_spans(d_ids, ids)
    return DocumentChoice(
        source=source,
        doc_id=doc.doc_id if source != "probe" else None,
        text=doc.text,
        num_tokens=len(d_ids),
        term_spans=[list(s) for s in spans],
        docs_searched=len(documents),
        docs_containing=containing,
    )


def _logit_analysis(column: np.ndarray, tokens: list[str], occurrences: list[int]) -> LogitAnalysis:
    occ = set(occurrences)
    at = column[sorted(occ)] if occ else np.zeros(0)
    if not occ:
        verdict = "absent"
    elif (at > 0).all():
        verdict = "positive"
    elif (at > 0).any():
        verdict = "mixed"
    else:
        verdict = "negative"
    return LogitAnalysis(
        positions=[PositionLogit(i, tokens[i], float(column[i]), i in occ) for i in range(len(column))],
        occurrences=sorted(occ),
        min_logit=float(column.min()),
        max_logit=float(column.max()),
        max_position=int(column.argmax()),
        occurrence_min=float(at.min()) if occ else None,
        occurrence_max=float(at.max()) if occ else None,
        occurrence_mean=float(at.mean()) if occ else None,
        verdict=verdict,
    )


def _weight_check(splade: SpladeEncoder, token_id: int, logits: LogitAnalysis, actual: float) -> WeightCheck:
    # The model's pooling: max over every non-padding position, [CLS]/[SEP] included,
    # then the output mask zeroes special tokens (a single document has no padding).
    m = logits.max_logit
    relu = max(m, 0.0)
    log1p = math.log1p(relu)
    special = bool(splade.output_mask[token_id] == 0)
    expected = 0.0 if special else log1p
    diff = abs(expected - actual)
    return WeightCheck(
        max_logit=m,
        max_position=logits.max_position,
        after_relu=relu,
        after_log1p=log1p,
        special_token=special,
        expected=expected,
        actual=actual,
        abs_diff=diff,
        tolerance=WEIGHT_TOLERANCE,
        matches=diff <= WEIGHT_TOLERANCE,
    )


def _ranking(token_id: int, ids: np.ndarray, weights: np.ndarray, vocab: list[str], text_ids: set[int]) -> Ranking:
    where = np.nonzero(ids == token_id)[0]
    rank = int(where[0]) + 1 if len(where) else None
    top = [
        RankedToken(r + 1, vocab[int(i)], int(i), float(w), int(i) in text_ids, int(i) == token_id)
        for r, (i, w) in enumerate(zip(ids[:TOP_TOKENS], weights[:TOP_TOKENS]))
    ]
    return Ranking(
        weight=float(weights[where[0]]) if len(where) else 0.0, rank=rank, nonzero=int(len(ids)), top=top
    )


def _query_expansion(
    splade: SpladeEncoder, ids: list[int], targets: list[int], queries: Sequence[Query]
) -> dict[int, QueryExpansion]:
    Q = splade.encode([q.text for q in queries], "query")  # (n_queries, V)
    contains = [bool(find_spans(input_ids(splade, q.text, "query"), ids)) for q in queries]
    out = {}
    for t in targets:
        col = Q[:, t].toarray().ravel()  # (n_queries,)
        expanding = sorted(
            (ExpandingQuery(q.qid, q.text, float(col[i])) for i, q in enumerate(queries) if not contains[i] and col[i] > 0),
            key=lambda e: -e.weight,
        )
        out[t] = QueryExpansion(
            queries=len(queries),
            without_term=contains.count(False),
            expanding=expanding,
            with_term=contains.count(True),
            with_term_active=sum(1 for i in range(len(queries)) if contains[i] and col[i] > 0),
        )
    return out


# ---------------------------------------------------------------------------- checks
def _checks(vocab: VocabularyCheck, doc: DocumentChoice, targets: list[TargetDiagnosis]) -> list[Check]:
    checks = [
        Check("single_token", PASS if vocab.single_token else FAIL, "one token",
              f"id {vocab.token_ids[0]}" if vocab.single_token else f"{len(vocab.token_ids)} pieces: {' '.join(vocab.pieces)}"),
        Check("in_terms_file", NA if vocab.terms_file is None else PASS if vocab.in_terms_file else FAIL,
              "listed", ", ".join(vocab.categories) or ("no terms file" if vocab.terms_file is None else "absent")),
    ]
    if vocab.single_token:
        checks.append(Check("domain_token", PASS if vocab.domain_token else FAIL, "registered domain token",
                            "yes" if vocab.domain_token else "no (model not extended with this term)"))
    checks.append(Check("in_documents", PASS if doc.docs_containing else WARN, ">= 1 document",
                        f"{len(doc.docs_containing)} of {doc.docs_searched}"))
    many = len(targets) > 1
    for t in targets:
        name = t.token if many else None
        lg, w, r, qe = t.logits, t.weight, t.ranking, t.query_expansion
        if lg.verdict == "absent":
            checks.append(Check("positive_logits", NA, "> 0 where it occurs", "term not in this text", name))
        else:
            checks.append(Check("positive_logits", PASS if lg.verdict == "positive" else FAIL, "> 0 where it occurs",
                                ", ".join(f"{p.logit:.2f}" for p in lg.positions if p.occurrence), name))
        checks.append(Check("weight_matches_encoding", PASS if w.matches else FAIL,
                            f"manual = encode() ± {w.tolerance:g}", f"{w.expected:.4f} vs {w.actual:.4f}", name))
        checks.append(Check("nonzero_weight", PASS if r.weight > 0 else FAIL, "> 0", f"{r.weight:.4f}", name))
        if r.weight > 0:
            checks.append(Check("high_weight", PASS if r.weight > HIGH_WEIGHT else WARN, f"> {HIGH_WEIGHT:g}",
                                f"{r.weight:.4f}", name))
            status = PASS if r.rank == 1 else WARN if r.rank <= TOP_RANK else FAIL
            checks.append(Check("top_rank", status, f"1 (<= {TOP_RANK}: warn)", f"{r.rank} of {r.nonzero}", name))
        if qe is not None:
            if qe.without_term == 0:
                checks.append(Check("query_expansion", NA, ">= 1 query w/o term", "every query has it", name))
            else:
                checks.append(Check("query_expansion", PASS if qe.expanding else FAIL,
                                    ">= 1 query w/o term",
                                    f"{len(qe.expanding)} of {qe.without_term}", name))
    return checks


# ---------------------------------------------------------------------------- entry point
@torch.inference_mode()
def diagnose_term(
    splade: SpladeEncoder,
    term: str,
    documents: Sequence[Document] = (),
    *,
    doc_id: str | None = None,
    terms: dict[str, list[str]] | None = None,
    queries: Sequence[Query] | None = None,
    sources: Sources | None = None,
) -> TermDiagnosis:
    """Run the five sections for ``term``; ``sources`` only fills in suggested commands.

    ``terms`` is the parsed terms file (``load_domain_terms``), ``queries`` the queries
    checked for expansion to the term (``None``: check skipped).
    """
    with eval_mode(splade):
        return _diagnose(splade, term, documents, doc_id, terms, queries, sources)


def _diagnose(
    splade: SpladeEncoder,
    term: str,
    documents: Sequence[Document],
    doc_id: str | None,
    terms: dict[str, list[str]] | None,
    queries: Sequence[Query] | None,
    sources: Sources | None,
) -> TermDiagnosis:
    sources = sources or Sources(model=splade.settings.base or "MODEL")
    vocab = vocabulary_check(splade, term, terms, sources.terms)
    sources = replace(sources, extended=vocab.domain_token)
    ids = vocab.token_ids
    doc = choose_document(splade, ids, term, documents, doc_id)

    batch = splade.tokenize([doc.text], "document")
    targets_ids = list(dict.fromkeys(ids))  # a piece repeated in the term is analysed once
    column = splade.logits(batch["input_ids"], batch["attention_mask"])[0][:, targets_ids]  # (L, T)
    column = column.float().cpu().numpy()
    tokens = splade.tokenizer.convert_ids_to_tokens(batch["input_ids"][0].tolist())
    D = splade.encode([doc.text], "document")  # (1, V): the model's own answer
    ranked_ids, ranked_w = ranked_row(D, 0)
    text_ids = set(batch["input_ids"][0].tolist())
    vocab_strings = splade.id_to_token()
    expansion = _query_expansion(splade, ids, targets_ids, queries) if queries else {}

    targets = []
    for j, t in enumerate(targets_ids):
        occ = [s + k for s, e in doc.term_spans for k in range(e - s) if ids[k] == t]
        logits = _logit_analysis(column[:, j], tokens, occ)
        actual = float(D[0, t])
        targets.append(
            TargetDiagnosis(
                token_id=t,
                token=vocab_strings[t],
                logits=logits,
                weight=_weight_check(splade, t, logits, actual),
                ranking=_ranking(t, ranked_ids, ranked_w, vocab_strings, text_ids),
                query_expansion=expansion.get(t),
            )
        )

    warnings = []
    if doc.source == "probe":
        warnings.append(
            f"no document of {doc.docs_searched} contains '{term}': sections 2-4 use the term alone as a probe text"
        )
    elif not doc.term_spans:
        warnings.append(f"document {doc.doc_id} does not contain '{term}': no occurrences to mark")
    full_length = len(splade.tokenizer(doc.text)["input_ids"])
    if full_length > doc.num_tokens:
        warnings.append(f"the document has {full_length} tokens; the model sees (and this analyses) the first "
                        f"{doc.num_tokens}")
    checks = _checks(vocab, doc, targets)
    recs = recommend(term, [c for c in checks if c.status in (WARN, FAIL)], sources)
    return TermDiagnosis(DIAGNOSE_SCHEMA, term, sources.model, vocab, doc, targets, checks, recs, warnings)
