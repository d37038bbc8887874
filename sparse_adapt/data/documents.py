"""Document and query files: the formats read and how each record becomes a Document or Query."""

from __future__ import annotations

import hashlib
import json
from array import array
from pathlib import Path
from typing import Callable, Iterable, Iterator

import numpy as np

from sparse_adapt.data.reading import (
    Objects, checked_text, first_repeat, id_value, iter_jsonl, iter_lines, json_objects, missing, read_unique,
    str_field, visible,
)
from sparse_adapt.data.records import DataError, Document, Query
from sparse_adapt.errors import ConfigError

# A file whose name ends in .tsv holds 'id<TAB>text' lines (MS MARCO's collection.tsv and
# queries.tsv, Pyserini's TsvCollection); any other name is JSONL. Chosen by name, not by
# sniffing the content, so one odd line cannot switch a file's format.
TSV_SUFFIX = ".tsv"


def is_tsv(path: str | Path) -> bool:
    return Path(path).suffix.lower() == TSV_SUFFIX


def _tsv_cells(p: Path, n: int | None, raw: str, columns: tuple[str, str]) -> dict:
    cells = raw.rstrip("\r\n").split("\t")
    if len(cells) != 2:
        raise DataError(p, n, None, f"expected 2 tab-separated columns '{columns[0]}<TAB>{columns[1]}', got {len(cells)}")
    return dict(zip(columns, cells))


# Column names a header line of an id/text TSV uses (MS MARCO's files have none).
_HEADER_IDS = {"id", "docid", "doc_id", "_id", "pid", "qid", "query_id", "queryid"}
_HEADER_TEXTS = {"text", "contents", "passage", "query", "body", "title"}


def _is_header(cells) -> bool:
    first, second = (c.strip().casefold() for c in cells)
    return first in _HEADER_IDS and second in _HEADER_TEXTS


def _tsv_hint(p: Path, error: DataError) -> DataError:
    """A JSON error on a line holding a tab: say how a TSV file is read."""
    if error.line is None or not error.message.startswith("invalid JSON"):
        return error
    line = next((raw for n, raw in iter_lines(p) if n == error.line), "")
    if "\t" not in line:
        return error
    return DataError(p, error.line, error.field, f"{error.message}; a tab-separated 'id<TAB>text' file is read "
                     f"as such when its name ends in {TSV_SUFFIX}")


def _objects(columns: tuple[str, str]) -> Objects:
    """How a document or query file's lines become objects: TSV cells named ``columns``, or JSON."""

    def tsv(p: Path) -> Iterator[tuple[int, dict]]:
        first = True
        for n, raw in iter_lines(p):
            if raw.strip():
                cells = _tsv_cells(p, n, raw, columns)
                if first and _is_header(cells.values()):  # it would have been read as a document "id"
                    raise DataError(p, n, None, f"looks like a header line ({raw.strip()!r:.60}); a TSV file is read "
                                                "without one: remove it")
                first = False
                yield n, cells

    def jsonl(p: Path) -> Iterator[tuple[int, dict]]:
        try:
            yield from json_objects(p)
        except DataError as e:
            raise _tsv_hint(p, e) from None

    return lambda p: tsv(p) if is_tsv(p) else jsonl(p)


_DOCUMENT_COLUMNS = ("doc_id", "text")  # a TSV document is read as our own record
_QUERY_COLUMNS = ("qid", "text")


def _parse_ours(p: Path, n: int, o: dict) -> Document:
    # A "title" is read in front of the text, as in BEIR's records: dropping it lost what a
    # title is for (the words a searcher types).
    title, text = _optional_str(p, n, o, "title").strip(), str_field(p, n, o, "text")
    return Document(id_value(p, n, o, "doc_id"), f"{title} {text}" if title else text)


def _optional_str(p: Path, n: int, o: dict, field: str) -> str:
    value = o.get(field, "")
    if not isinstance(value, str):
        raise DataError(p, n, field, f"expected a string, got {value!r:.60}")
    return checked_text(p, n, field, value)


def collapse_whitespace(text: str) -> str:
    """Runs of whitespace as one space, none at the ends: BEIR texts, read either way."""
    return " ".join(text.split())


def parse_beir_document(p: Path, n: int, o: dict) -> Document:
    # BEIR's models read the title in front of the body; either may be empty, not both. Collapsed
    # as `evaluate --dataset` (ir_datasets) reads it, or byte-level BPE would see other pieces.
    doc_id = id_value(p, n, o, "_id")
    text = collapse_whitespace(f"{_optional_str(p, n, o, 'title')} {_optional_str(p, n, o, 'text')}")
    if not visible(text):
        raise DataError(p, n, "text", "a BEIR record needs a non-empty 'title' or 'text'")
    return Document(doc_id, text)


def _parse_pyserini(p: Path, n: int, o: dict) -> Document:
    if "contents" not in o:
        raise DataError(p, n, "contents", "missing; a record keyed by 'id' is read as a Pyserini JsonCollection ('id', 'contents')")
    return Document(id_value(p, n, o, "id"), str_field(p, n, o, "contents"))


# The document formats read, recognised by their id field and tried in this order (a record
# holding two id fields is read by the first): ours, BEIR's corpus.jsonl, Pyserini's JsonCollection.
DOCUMENT_FORMATS: dict[str, Callable[[Path, int, dict], Document]] = {
    "doc_id": _parse_ours,
    "_id": parse_beir_document,
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
    # "missing" alone named neither the fields the line has nor the id fields that are read
    raise DataError(p, n, "doc_id", f"{missing(o)}; a document's id is one of {', '.join(map(repr, DOCUMENT_FORMATS))}")


def document_from_line(p: Path, raw: str) -> Document:
    """The document of one line of ``p`` read on its own (by byte offset, so no line number)."""
    raw = raw.lstrip("\ufeff")  # the first line of a file written with a byte-order mark
    if is_tsv(p):
        return parse_document(p, None, _tsv_cells(p, None, raw, _DOCUMENT_COLUMNS))
    try:
        record = json.loads(raw)
    except (ValueError, RecursionError):  # the file changed since it was validated
        raise DataError(p, None, None, f"a line is not valid JSON any more: {raw[:60]!r}") from None
    return parse_document(p, None, record)


def iter_documents(path: str | Path) -> Iterator[Document]:
    """A document file's records one at a time (for corpora larger than memory); validated like
    :func:`load_documents` except for duplicate ids, which would need memory per document."""
    return iter_jsonl(path, parse_document, _objects(_DOCUMENT_COLUMNS))


def check_documents(path: str | Path) -> int:
    """Validate a document file as :func:`load_documents` does, duplicate ids included, while
    streaming it; returns the record count. Memory is 8 bytes a document (a 64-bit digest of
    each id), twice that while they are sorted; only when two digests agree is the file read
    again to find the lines."""
    p = Path(path)
    id_field = lambda o: next((k for k in DOCUMENT_FORMATS if k in o), "doc_id")  # noqa: E731
    digests = array("Q")
    for d in iter_documents(p):
        digests.append(int.from_bytes(hashlib.blake2b(d.doc_id.encode("utf-8"), digest_size=8).digest(), "little"))
    ordered = np.sort(np.frombuffer(digests, dtype=np.uint64)) if digests else np.empty(0, dtype=np.uint64)
    if len(ordered) > 1 and bool((ordered[1:] == ordered[:-1]).any()):
        read_unique(p, parse_document, id_field, _objects(_DOCUMENT_COLUMNS))  # raises on the repeated id's line
    return len(digests)


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
    """``docs.jsonl``: one ``{"doc_id": str, "text": str}`` per line (or any of
    :data:`DOCUMENT_FORMATS`), or ``docs.tsv``: ``doc_id<TAB>text``; ids unique."""
    id_field = lambda o: next(k for k in DOCUMENT_FORMATS if k in o)  # noqa: E731
    return read_unique(path, parse_document, id_field, _objects(_DOCUMENT_COLUMNS))


def parse_beir_query(p: Path, n: int, o: dict) -> Query:
    # a BEIR query's whitespace as `evaluate --dataset` (ir_datasets) reads it, like its documents
    return Query(id_value(p, n, o, "_id"), collapse_whitespace(str_field(p, n, o, "text")))


def load_queries(path: str | Path) -> list[Query]:
    """``queries.jsonl``: one ``{"qid": str, "text": str}`` per line (BEIR's ``_id`` too), or
    ``queries.tsv``: ``qid<TAB>text`` (MS MARCO's); ids unique."""

    def id_field(o: dict) -> str:
        return "_id" if "qid" not in o and "_id" in o else "qid"  # BEIR's queries.jsonl: '_id', 'text'

    def parse(p: Path, n: int, o: dict) -> Query:
        if id_field(o) == "_id":
            return parse_beir_query(p, n, o)
        return Query(id_value(p, n, o, "qid"), str_field(p, n, o, "text"))

    return read_unique(path, parse, id_field, _objects(_QUERY_COLUMNS))


def checked_records(items: Iterable, name: str, id_field: str) -> list:
    """``items`` (records built in Python) as a list, checked before any encoding: each has
    ``id_field`` and ``text`` (TypeError), and no id repeats (ConfigError: results are keyed by
    id, so a repeated one kept only its last, silently; the file loaders refuse one too)."""
    items = list(items)
    kind = "Document" if id_field == "doc_id" else "Query"
    for i, item in enumerate(items):
        if not (hasattr(item, id_field) and hasattr(item, "text")):
            raise TypeError(f"{name}[{i}] must be a sparse_adapt.data.{kind} (.{id_field} and .text), "
                            f"got {type(item).__name__}")
    if (repeated := first_repeat(getattr(item, id_field) for item in items)) is not None:
        raise ConfigError(f"the {name} repeat the id {repeated!r}; each needs its own")
    return items
