"""Document and query files: the formats read and how each record becomes a Document or Query."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable, Iterator

from sparse_adapt.data.reading import checked_text, iter_jsonl, read_unique, str_field
from sparse_adapt.data.records import DataError, Document, Query


def _parse_ours(p: Path, n: int, o: dict) -> Document:
    return Document(str_field(p, n, o, "doc_id"), str_field(p, n, o, "text"))


def _optional_str(p: Path, n: int, o: dict, field: str) -> str:
    value = o.get(field, "")
    if not isinstance(value, str):
        raise DataError(p, n, field, f"expected a string, got {value!r:.60}")
    return checked_text(p, n, field, value)


def collapse_whitespace(text: str) -> str:
    """Runs of whitespace as one space, none at the ends: BEIR texts, read either way."""
    return " ".join(text.split())


def _parse_beir(p: Path, n: int, o: dict) -> Document:
    # BEIR's models read the title in front of the body; either may be empty, not both. Collapsed
    # as `evaluate --dataset` (ir_datasets) reads it, or byte-level BPE would see other pieces.
    doc_id = str_field(p, n, o, "_id")
    text = collapse_whitespace(f"{_optional_str(p, n, o, 'title')} {_optional_str(p, n, o, 'text')}")
    if not text:
        raise DataError(p, n, "text", "a BEIR record needs a non-empty 'title' or 'text'")
    return Document(doc_id, text)


def _parse_pyserini(p: Path, n: int, o: dict) -> Document:
    if "contents" not in o:
        raise DataError(p, n, "contents", "missing; a record keyed by 'id' is read as a Pyserini JsonCollection ('id', 'contents')")
    return Document(str_field(p, n, o, "id"), str_field(p, n, o, "contents"))


# The document formats read, recognised by their id field and tried in this order (a record
# holding two id fields is read by the first): ours, BEIR's corpus.jsonl, Pyserini's JsonCollection.
DOCUMENT_FORMATS: dict[str, Callable[[Path, int, dict], Document]] = {
    "doc_id": _parse_ours,
    "_id": _parse_beir,
    "id": _parse_pyserini,
}
# Id fields of formats that are not read, so the error says how to map them.
_FOREIGN_DOCUMENTS = {
    "docid": "a record keyed by 'docid' (TREC's name): write it as 'doc_id'",
}


def parse_document(p: Path, n: int, o: dict) -> Document:
    """One document record in any of :data:`DOCUMENT_FORMATS`."""
    for key, parse in DOCUMENT_FORMATS.items():
        if key in o:
            return parse(p, n, o)
    for key, how in _FOREIGN_DOCUMENTS.items():
        if key in o:
            raise DataError(p, n, "doc_id", f"missing; this looks like {how}")
    raise DataError(p, n, "doc_id", "missing")


def iter_documents(path: str | Path) -> Iterator[Document]:
    """``docs.jsonl`` records one at a time (for corpora larger than memory); validated like
    :func:`load_documents` except for duplicate ids, which would need memory per document."""
    return iter_jsonl(path, parse_document)


def find_documents(path: str | Path, doc_ids: Iterable[str]) -> dict[str, str]:
    """``{doc_id: text}`` of the ``doc_ids`` that ``path`` holds, streamed and stopped once all
    are found (a corpus larger than memory is fine); ids the file lacks are simply absent."""
    wanted, found = set(doc_ids), {}
    if not wanted:
        return found
    for d in iter_documents(path):
        if d.doc_id in wanted:
            found[d.doc_id] = d.text
            if len(found) == len(wanted):
                break
    return found


def load_documents(path: str | Path) -> list[Document]:
    """``docs.jsonl``: one ``{"doc_id": str, "text": str}`` per line, ids unique."""
    return read_unique(path, parse_document, lambda o: next(k for k in DOCUMENT_FORMATS if k in o))


def load_queries(path: str | Path) -> list[Query]:
    """``queries.jsonl``: one ``{"qid": str, "text": str}`` per line (BEIR's ``_id`` too), ids unique."""

    def id_field(o: dict) -> str:
        return "_id" if "qid" not in o and "_id" in o else "qid"  # BEIR's queries.jsonl: '_id', 'text'

    def parse(p: Path, n: int, o: dict) -> Query:
        key, text = id_field(o), str_field(p, n, o, "text")
        # a BEIR query's whitespace as `evaluate --dataset` (ir_datasets) reads it, like its documents
        return Query(str_field(p, n, o, key), collapse_whitespace(text) if key == "_id" else text)

    return read_unique(path, parse, id_field)
