"""Corpus-level sparsity (``sparse-adapt inspect``): how many tokens texts activate,
what retrieval costs, and whether domain tokens fire where they should.

Estimated FLOPS follows SPLADE (Formal et al. 2021, after Paria et al. 2020): with
``p_d(t)`` the fraction of documents and ``p_q(t)`` the fraction of queries in which
token t is active,

    FLOPS = sum_t p_q(t) * p_d(t)

is the expected number of multiplications of one query-document dot product over an
inverted index (the expected number of tokens a query and a document share). The
training regulariser of the spec, ``sum_{t not domain} mean_q w_q^t * mean_d w_d^t``, is
reported beside it so training logs can be compared.

(Named ``sparsity`` rather than ``inspect`` so it never shadows the standard library.)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Sequence

import numpy as np
import scipy.sparse as sp

from diagnostics.schema import INSPECT_SCHEMA
from diagnostics.tokens import in_text_ids
from sparse_adapt.data import Document, Query
from sparse_adapt.data.documents import checked_records
from sparse_adapt.data.inputs import check_terms
from sparse_adapt.errors import ConfigError
from sparse_adapt.modeling.encoder import SpladeEncoder
from sparse_adapt.modeling.vocabulary import single_token_ids
from sparse_adapt.progress import Hooks, counted
from sparse_adapt.retrieval.feedback import Feedback, expand_in_memory

FLOPS_DEFINITION = "sum_t p_q(t) * p_d(t), p = fraction of queries/documents with w^t > 0"


@dataclass
class Distribution:
    mean: float
    median: float
    min: int
    max: int


@dataclass
class TextStats:
    count: int
    nonzero: Distribution  # active tokens per text
    sparsity_mean: float  # percent of the vocabulary at weight 0, mean over texts


@dataclass
class Flops:
    definition: str
    value: float
    value_excluding_domain: float  # the same sum over non-domain tokens only
    regularizer: float  # sum over non-domain t of mean_q w_q^t * mean_d w_d^t (the spec's L_sp)


@dataclass
class DomainToken:
    token: str
    token_id: int
    docs_occurring: int  # documents whose text contains the token
    mean_weight_occurring: float | None  # mean weight in those documents (zeros included)
    docs_not_occurring: int
    mean_weight_not_occurring: float | None  # mean weight elsewhere: expansion
    activated_without_occurrence: int  # documents without the token that still activate it


@dataclass
class DomainStats:
    count: int
    source: str  # "model" (sparse_adapt.json), "terms" (single-token terms of --terms), "model+terms" or "none"
    mean_weight_occurring: float | None  # pooled over every (document, token) pair
    mean_weight_not_occurring: float | None
    tokens: list[DomainToken]


@dataclass
class FeedbackCost:
    """The queries after Rocchio pseudo-relevance feedback (``retrieval/feedback.py``): each
    gains up to ``terms`` tokens of its best documents, so it meets more postings."""

    docs: int  # the Feedback settings used
    weight: float
    terms: int
    queries: TextStats  # the expanded queries
    flops: float  # FLOPS of the expanded queries against the same documents (definition above)


@dataclass
class CorpusStats:
    schema: str
    model: str
    vocab_size: int
    documents: TextStats
    queries: TextStats | None
    flops: Flops | None  # None without queries
    domain: DomainStats
    warnings: list[str] = field(default_factory=list)
    feedback: FeedbackCost | None = None  # None: not asked

    def to_dict(self) -> dict:
        return asdict(self)


def _text_stats(M: sp.csr_matrix) -> TextStats:
    M = M.copy()
    M.eliminate_zeros()
    nnz = np.diff(M.indptr)  # (n,) active tokens per text
    return TextStats(
        count=int(M.shape[0]),
        nonzero=Distribution(float(nnz.mean()), float(np.median(nnz)), int(nnz.min()), int(nnz.max())),
        sparsity_mean=float(100.0 * (1.0 - nnz.mean() / M.shape[1])),
    )


def _domain_ids(splade: SpladeEncoder, terms: dict[str, list[str]] | None) -> tuple[dict[int, str], str]:
    """Domain token id -> display string, and where the ids came from (model, terms file)."""
    vocab = splade.id_to_token()
    model_ids = set(splade.settings.domain_token_ids)
    term_ids = set(single_token_ids(splade.tokenizer, terms))
    source = "+".join(n for n, s in (("model", model_ids), ("terms", term_ids - model_ids)) if s) or "none"
    return {i: vocab[i] for i in model_ids | term_ids}, source


def _mean(x: np.ndarray) -> float | None:
    return float(x.mean()) if len(x) else None


def inspect_corpus(
    splade: SpladeEncoder,
    documents: Sequence[Document],
    queries: Sequence[Query] | None = None,
    terms: dict[str, list[str]] | None = None,
    *,
    model: str | None = None,
    batch_size: int = 32,
    progress: Hooks | None = None,
    feedback: Feedback | None = None,
    document_vectors: sp.csr_matrix | None = None,
) -> CorpusStats:
    """Encode every document (and query) and summarise sparsity, FLOPS and domain tokens.

    Domain tokens are the model's registered ones plus the terms of ``terms`` that are a
    single token for this model (so an unextended base still reports e.g. ``api``).
    ``feedback`` (needs queries) also measures the queries as feedback expands them.
    ``document_vectors``: the (n_d, V) ``splade.encode`` of ``documents``, when the caller
    already has it (not encoded again).
    """
    check_terms(terms)
    documents = checked_records(documents, "documents", "doc_id")
    queries = None if queries is None else checked_records(queries, "queries", "qid")
    if not documents:
        raise ConfigError("no documents to inspect")
    if feedback is not None and not queries:
        raise ConfigError("feedback expands queries: give queries to measure it on")
    if document_vectors is not None and document_vectors.shape != (len(documents), splade.vocab_size):
        raise ValueError(f"document_vectors have shape {document_vectors.shape}, expected "
                         f"{(len(documents), splade.vocab_size)}")
    D = (document_vectors if document_vectors is not None
         else splade.encode([d.text for d in documents], "document", batch_size, progress=progress))  # (n_d, V)
    Q = splade.encode([q.text for q in queries], "query", batch_size) if queries else None  # (n_q, V)
    domain, source = _domain_ids(splade, terms)
    warnings = []
    active = np.asarray((D != 0).sum(axis=1)).ravel()  # (n_d,)
    empty = [d.doc_id for d, n in zip(documents, active) if n == 0]
    if empty:
        has, them = ("has", "it") if len(empty) == 1 else ("have", "them")
        warnings.append(f"{len(empty)} of {counted(len(documents), 'document')} {has} no active term (e.g. "
                        f"{', '.join(empty[:3])}): no query can retrieve {them}, "
                        f"and Lucene leaves {them} out of an index")

    flops = cost = None
    p_d = np.asarray((D > 0).mean(axis=0)).ravel()  # (V,)
    if Q is not None:
        p_q = np.asarray((Q > 0).mean(axis=0)).ravel()  # (V,)
        keep = np.ones(D.shape[1], dtype=bool)
        keep[list(domain)] = False
        mean_d = np.asarray(D.mean(axis=0)).ravel()  # (V,)
        mean_q = np.asarray(Q.mean(axis=0)).ravel()  # (V,)
        flops = Flops(
            definition=FLOPS_DEFINITION,
            value=float(p_q @ p_d),
            value_excluding_domain=float(p_q[keep] @ p_d[keep]),
            regularizer=float(mean_q[keep] @ mean_d[keep]),
        )
    else:
        warnings.append("no queries: per-query statistics and FLOPS need --queries")
    if feedback is not None:
        fed = expand_in_memory(Q, D, feedback, [d.doc_id for d in documents])  # (n_q, V)
        p_fed = np.asarray((fed > 0).mean(axis=0)).ravel()  # (V,)
        cost = FeedbackCost(feedback.docs, feedback.weight, feedback.terms, _text_stats(fed), float(p_fed @ p_d))

    text_ids = in_text_ids(splade, [d.text for d in documents], "document")
    tokens, all_in, all_out = [], [], []
    for t, name in sorted(domain.items()):
        w = D[:, t].toarray().ravel()  # (n_d,)
        occurs = np.array([t in ids for ids in text_ids], dtype=bool)
        w_in, w_out = w[occurs], w[~occurs]
        all_in.append(w_in)
        all_out.append(w_out)
        tokens.append(
            DomainToken(name, int(t), int(occurs.sum()), _mean(w_in), int((~occurs).sum()), _mean(w_out),
                        int((w_out > 0).sum()))
        )
    if not domain:
        warnings.append("no domain tokens: the model is not extended and no --terms term is a single token")
    pooled_in = np.concatenate(all_in) if all_in else np.zeros(0)
    pooled_out = np.concatenate(all_out) if all_out else np.zeros(0)
    return CorpusStats(
        schema=INSPECT_SCHEMA,
        model=model or splade.settings.base,
        vocab_size=splade.vocab_size,
        documents=_text_stats(D),
        queries=_text_stats(Q) if Q is not None else None,
        flops=flops,
        domain=DomainStats(len(domain), source, _mean(pooled_in), _mean(pooled_out), tokens),
        warnings=warnings,
        feedback=cost,
    )
