"""The document sections 2-4 analyse: the one given, the first containing the term, or a probe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from diagnostics.tokens import find_spans, input_ids
from sparse_adapt.data import Document
from sparse_adapt.errors import ConfigError
from sparse_adapt.modeling.encoder import SpladeEncoder

@dataclass
class DocumentChoice:
    source: str  # "first" (first document containing the term), "doc" (--doc) or "probe"
    doc_id: str | None
    text: str
    num_tokens: int  # including [CLS]/[SEP]
    term_spans: list[list[int]]  # half-open [start, end) token spans of the term
    docs_searched: int
    docs_containing: list[str]  # ids of every document containing the term


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
