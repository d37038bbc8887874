"""Term diagnosis: why a SPLADE model does or does not give a domain term weight.

The spec's five-section "Token Diagnostic", computed as plain data that the CLI renders
and ``--json`` dumps unchanged (each section is a module of ``diagnostics/sections/``):

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

from dataclasses import asdict, dataclass, field, replace
from typing import Sequence

import torch

from diagnostics.recommend import Recommendation, Sources, recommend
from diagnostics.schema import DIAGNOSE_SCHEMA
from diagnostics.sections.checks import FAIL, HIGH_WEIGHT, NA, PASS, TOP_RANK, WARN, Check, checks
from diagnostics.sections.document import DocumentChoice, choose_document
from diagnostics.sections.expansion import query_expansion
from diagnostics.sections.logits import logit_analysis
from diagnostics.sections.ranking import ranking
from diagnostics.sections.target import TargetDiagnosis
from diagnostics.sections.vocabulary import VocabularyCheck, vocabulary_check
from diagnostics.sections.weight import weight_check
from diagnostics.tokens import domain_pieces, pieces_in
from sparse_adapt.data import Document, Query
from sparse_adapt.data.documents import checked_records
from sparse_adapt.data.inputs import check_terms
from sparse_adapt.modeling.base import eval_mode
from sparse_adapt.modeling.encoder import SpladeEncoder
from sparse_adapt.modeling.vectors import ranked_row
from sparse_adapt.retrieval.feedback import Feedback

__all__ = ["FAIL", "HIGH_WEIGHT", "NA", "PASS", "TOP_RANK", "WARN", "TargetDiagnosis", "TermDiagnosis", "diagnose_term"]


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


def near_domain_term(splade: SpladeEncoder, term: str) -> str | None:
    """The model's domain term spelt near ``term`` (difflib ratio >= 0.8: ``krellamin`` for ``krellamine``), if any."""
    import difflib

    known = {t.lower(): t for t in splade.settings.domain_terms}
    close = difflib.get_close_matches(term.lower(), list(known), n=1, cutoff=0.8)
    return known[close[0]] if close and close[0] != term.lower() else None


# Another domain token at this share of the term's own weight in the term's query vector: a
# search for the one finds the other's documents about as well (sibling codes, QV-420 / QV-310).
RIVAL_SHARE = 0.8


def rival_warnings(splade: SpladeEncoder, term: str, token: int) -> list[str]:
    """Other domain tokens the term, searched on its own, activates nearly as strongly as itself."""
    q = splade.encode([term], "query").toarray()[0]  # (V,)
    own = float(q[token])
    if own < 1.0:  # a term that barely fires in its own query has other problems (the checks report them)
        return []
    vocab = splade.id_to_token()
    rivals = sorted(((float(q[t]), t) for t in set(splade.settings.domain_token_ids) - {token}
                     if q[t] >= RIVAL_SHARE * own), reverse=True)
    return [f"the query '{term}' activates the domain token '{vocab[t]}' at {w / own:.0%} of its own weight: a search "
            f"for it finds documents of '{vocab[t]}' about as well; if they are different things, the model does not "
            "tell them apart" for w, t in rivals[:3]]


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
    feedback: Feedback | None = None,
) -> TermDiagnosis:
    """Run the five sections for ``term``; ``sources`` only fills in suggested commands.

    ``terms`` is the parsed terms file (``load_domain_terms``), ``queries`` the queries
    checked for expansion to the term (``None``: check skipped); ``feedback`` checks them
    a second time after pseudo-relevance feedback from ``documents``.
    """
    check_terms(terms)
    documents = checked_records(documents, "documents", "doc_id")
    queries = None if queries is None else checked_records(queries, "queries", "qid")
    with eval_mode(splade):
        return _diagnose(splade, term.strip(), documents, doc_id, terms, queries, sources, feedback)


# What the terms file is called when ``terms`` came without a path (``Sources.terms``).
GIVEN_TERMS = "(the terms passed to diagnose_term)"


def _diagnose(
    splade: SpladeEncoder,
    term: str,
    documents: Sequence[Document],
    doc_id: str | None,
    terms: dict[str, list[str]] | None,
    queries: Sequence[Query] | None,
    sources: Sources | None,
    feedback: Feedback | None,
) -> TermDiagnosis:
    sources = sources or Sources(model=splade.settings.base or "MODEL")
    # terms given from Python without a path were shown as "Terms file: not given" beside a passing check
    vocab = vocabulary_check(splade, term, terms, sources.terms or (GIVEN_TERMS if terms is not None else None))
    sources = replace(sources, extended=vocab.domain_token)
    ids = vocab.token_ids
    doc = choose_document(splade, term, documents, doc_id, ids)

    batch = splade.tokenize([doc.text], "document")
    targets_ids = list(dict.fromkeys(ids))  # a piece repeated in the term is analysed once
    column = splade.logits(batch["input_ids"], batch["attention_mask"])[0][:, targets_ids]  # (L, T)
    column = column.float().cpu().numpy()
    tokens = splade.tokenizer.convert_ids_to_tokens(batch["input_ids"][0].tolist())
    D = splade.encode([doc.text], "document")  # (1, V): the model's own answer
    ranked_ids, ranked_w = ranked_row(D, 0)
    text_ids = set(batch["input_ids"][0].tolist())
    piece_of = pieces_in(text_ids, domain_pieces(splade))
    vocab_strings = splade.id_to_token()
    expansion = query_expansion(splade, term, targets_ids, queries, documents, feedback) if queries else {}

    targets = []
    for j, t in enumerate(targets_ids):
        # the target's own positions inside the occurrences (BPE splits a text-initial word otherwise)
        occ = [p for s, e in doc.term_spans for p in range(s, e) if batch["input_ids"][0][p] == t]
        logits = logit_analysis(column[:, j], tokens, occ)
        actual = float(D[0, t])
        targets.append(
            TargetDiagnosis(
                token_id=t,
                token=vocab_strings[t],
                logits=logits,
                weight=weight_check(splade, t, logits, actual),
                ranking=ranking(t, ranked_ids, ranked_w, vocab_strings, text_ids, piece_of),
                query_expansion=expansion.get(t),
            )
        )

    warnings = []
    if doc.source == "probe":
        warnings.append(
            f"no document of {doc.docs_searched} contains '{term}': sections 2-4 use the term alone as a probe text"
        )
        near = near_domain_term(splade, term)
        if near is not None:
            sources = replace(sources, near=near)
            warnings.append(f"did you mean '{near}'? It is a domain term of this model")
    elif not doc.term_spans:
        warnings.append(f"document {doc.doc_id} does not contain '{term}' within the model's first {doc.num_tokens} "
                        "tokens: no occurrences to mark")
    if doc.docs_beyond_window:
        warnings.append(
            f"{len(doc.docs_beyond_window)} document(s) use '{term}' only past the model's document window "
            f"({splade.max_length('document')} tokens), where encoding cuts them off "
            f"({', '.join(doc.docs_beyond_window[:5])}): split long documents into passages"
        )
    full_length = len(splade.tokenizer(doc.text, verbose=False)["input_ids"])  # its length warning is ours to give
    if full_length > doc.num_tokens:
        warnings.append(f"the document has {full_length} tokens; the model sees (and this analyses) the first "
                        f"{doc.num_tokens}")
    if vocab.domain_token:
        warnings += rival_warnings(splade, term, ids[0])
    found = checks(vocab, doc, targets, terms_given=terms is not None)
    recs = recommend(term, [c for c in found if c.status in (WARN, FAIL)], sources)
    return TermDiagnosis(DIAGNOSE_SCHEMA, term, sources.model, vocab, doc, targets, found, recs, warnings)
