"""The document sections 2-4 analyse: the one given, the first containing the term (as its
running-text pieces where one does), or a probe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from diagnostics.tokens import occurrences, term_pattern
from sparse_adapt.data import Document
from sparse_adapt.errors import ConfigError
from sparse_adapt.modeling.encoder import SpladeEncoder

@dataclass
class DocumentChoice:
    source: str  # "first" (first document containing the term, see choose_document), "doc" (--doc) or "probe"
    doc_id: str | None
    text: str
    num_tokens: int  # including [CLS]/[SEP]
    term_spans: list[list[int]]  # half-open [start, end) token spans of the term
    docs_searched: int
    docs_containing: list[str]  # ids of every document containing the term where the model sees it
    docs_beyond_window: list[str]  # ids of documents using the term only past the model's window


def choose_document(
    splade: SpladeEncoder, term: str, documents: Sequence[Document], doc_id: str | None,
    target_ids: Sequence[int] = (),
) -> DocumentChoice:
    """The document analysed: ``doc_id``'s, else the first containing the term as ``target_ids``
    (the term's running-text pieces: a byte-level BPE splits a text-initial word otherwise, and
    a document analysed for pieces it does not hold said "term not in this text"), else the
    first containing it at all, else the term alone (a probe)."""
    pattern = term_pattern(splade, term)
    containing: list[str] = []
    beyond: list[str] = []
    first: tuple[Document, list[int], list[tuple[int, int]]] | None = None
    whole: tuple[Document, list[int], list[tuple[int, int]]] | None = None
    for d in documents:
        found = occurrences(splade, d.text, pattern, "document")
        if found.spans:
            containing.append(d.doc_id)
            if first is None:
                first = (d, found.ids, found.spans)
            if whole is None and any(set(target_ids) <= set(found.ids[s:e]) for s, e in found.spans):
                whole = (d, found.ids, found.spans)
        elif found.beyond:
            beyond.append(d.doc_id)
    if doc_id is not None:
        chosen = next((d for d in documents if d.doc_id == doc_id), None)
        if chosen is None:
            raise ConfigError(f"--doc {doc_id!r}: no document with this id in the documents file")
        found = occurrences(splade, chosen.text, pattern, "document")
        source, doc, d_ids, spans = "doc", chosen, found.ids, found.spans
    elif first is not None:
        source, (doc, d_ids, spans) = "first", whole or first
    else:
        doc = Document("", term)
        found = occurrences(splade, term, pattern, "document")
        source, d_ids, spans = "probe", found.ids, found.spans
    return DocumentChoice(
        source=source,
        doc_id=doc.doc_id if source != "probe" else None,
        text=doc.text,
        num_tokens=len(d_ids),
        term_spans=[list(s) for s in spans],
        docs_searched=len(documents),
        docs_containing=containing,
        docs_beyond_window=beyond,
    )
