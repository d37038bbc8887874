"""Records and validated loaders for the files a user hands to sparse-adapt.

Every loader reads the whole file and raises :class:`DataError` naming the file, the
1-based line and the field at the first problem, so a user never sees a traceback
from deep inside torch because of a typo in their JSONL.

Every file is UTF-8; a leading byte-order mark is accepted (and dropped) by every loader
alike, as are CRLF line ends. Numbers must be finite: ``NaN`` and ``Infinity`` (which
Python's JSON parser accepts) are errors, since one NaN teacher score turns every weight
of a model into NaN.
"""

from __future__ import annotations

import codecs
import json
import math
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, NamedTuple

from sparse_adapt.errors import SparseAdaptError


class DataError(SparseAdaptError, ValueError):
    """A user-supplied file is malformed. ``str()`` is ``path:line: field 'f': message``."""

    def __init__(self, path: str | Path, line: int | None, field: str | None, message: str):
        self.path = str(path)
        self.line = line
        self.field = field
        self.message = message
        where = self.path if line is None else f"{self.path}:{line}"
        what = f" field '{field}':" if field else ""
        super().__init__(f"{where}:{what} {message}")


class Document(NamedTuple):
    doc_id: str
    text: str


class Query(NamedTuple):
    qid: str
    text: str


class TrainExample(NamedTuple):
    """One query with its teacher-scored candidate list (the spec's train.jsonl line)."""

    qid: str
    query: str
    doc_ids: tuple[str, ...]
    doc_texts: tuple[str, ...]
    teacher_scores: tuple[float, ...]


class DictionaryEntry(NamedTuple):
    term: str
    definition: str
    examples: tuple[str, ...]


Qrels = dict[str, dict[str, int]]


GZIP_MAGIC = b"\x1f\x8b"


def require_file(path: str | Path) -> Path:
    """The path of an existing regular file, else a DataError naming it."""
    p = Path(path)
    if p.is_dir():  # e.g. a Pyserini collection split over several files
        raise DataError(p, None, None, "is a directory; give the file itself (join a collection's files into one first)")
    if not p.is_file():
        raise DataError(p, None, None, "file not found" if not p.exists() else "not a regular file")
    return p


def _utf8_line(path: Path, line: int, raw: bytes) -> str:
    if line == 1 and raw.startswith(codecs.BOM_UTF8):
        raw = raw[len(codecs.BOM_UTF8):]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        column = len(raw[: e.start].decode("utf-8", "replace")) + 1
        raise DataError(path, line, None, f"not valid UTF-8 (byte 0x{raw[e.start]:02x} at column {column})") from None


def iter_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """(1-based line number, text) of a UTF-8 file, BOM dropped; bad bytes name their line."""
    p = require_file(path)
    with p.open("rb") as f:
        for line_no, raw in enumerate(f, start=1):
            if line_no == 1 and raw.startswith(GZIP_MAGIC):
                raise DataError(p, None, None, f"is gzip-compressed; decompress it first (gunzip -k {p})")
            yield line_no, _utf8_line(p, line_no, raw)


def read_text(path: str | Path) -> str:
    """A whole UTF-8 file (BOM dropped); bad bytes are a DataError naming their line."""
    p = require_file(path)
    return "".join(text for _, text in iter_lines(p))


def _parse_json(path: Path, line: int | None, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        where = line if line is not None else e.lineno
        column = "" if line is None else f" at column {e.colno}"
        raise DataError(path, where, None, f"invalid JSON ({e.msg}{column})") from None
    except (ValueError, RecursionError) as e:  # e.g. an integer of 5000 digits, nesting 10^5 deep
        raise DataError(path, line, None, f"invalid JSON ({str(e)[:80] or type(e).__name__})") from None


def _checked_text(path: Path, line: int | None, field: str, value: str) -> str:
    # JSON may spell an unpaired surrogate (\ud800): a valid str that no tokenizer can take.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise DataError(path, line, field, f"contains an unpaired surrogate, not text: {value!r:.60}") from None
    return value


def _str_field(path: Path, line: int, obj: dict, field: str) -> str:
    if field not in obj:
        raise DataError(path, line, field, "missing")
    value = obj[field]
    if not isinstance(value, str) or not value.strip():
        raise DataError(path, line, field, f"expected a non-empty string, got {value!r:.60}")
    return _checked_text(path, line, field, value)


def _str_list_field(path: Path, line: int, obj: dict, field: str) -> tuple[str, ...]:
    if field not in obj:
        raise DataError(path, line, field, "missing")
    value = obj[field]
    if not isinstance(value, list) or not value:
        raise DataError(path, line, field, "expected a non-empty list of strings")
    for i, item in enumerate(value):
        if not isinstance(item, str) or not item.strip():
            raise DataError(path, line, f"{field}[{i}]", f"expected a non-empty string, got {item!r:.60}")
        _checked_text(path, line, f"{field}[{i}]", item)
    return tuple(value)


def _float_list_field(path: Path, line: int, obj: dict, field: str) -> tuple[float, ...]:
    if field not in obj:
        raise DataError(path, line, field, "missing")
    value = obj[field]
    if not isinstance(value, list) or not value:
        raise DataError(path, line, field, "expected a non-empty list of numbers")
    for i, item in enumerate(value):
        # bool is an int subclass; "true" as a teacher score is a mistake, not a 1.
        if isinstance(item, bool) or not isinstance(item, (int, float)):
            raise DataError(path, line, f"{field}[{i}]", f"expected a number, got {item!r:.60}")
        if not math.isfinite(item if isinstance(item, float) else _int_as_float(item)):
            raise DataError(path, line, f"{field}[{i}]", f"expected a finite number, got {item!r:.60}")
    return tuple(float(v) for v in value)


def _int_as_float(value: int) -> float:
    try:
        return float(value)
    except OverflowError:  # an integer beyond float range is no usable score either
        return math.inf


def iter_jsonl(path: str | Path, parse: Callable[[Path, int, dict], Any]) -> Iterator[Any]:
    """Parse a JSONL file lazily, one record per non-blank line; errors name file and line."""
    p = require_file(path)
    seen_any = False
    for line_no, raw in iter_lines(p):
        if not raw.strip():
            continue
        obj = _parse_json(p, line_no, raw)
        if not isinstance(obj, dict):
            raise DataError(p, line_no, None, f"expected a JSON object, got {type(obj).__name__}")
        seen_any = True
        yield parse(p, line_no, obj)
    if not seen_any:
        raise DataError(p, None, None, "no records in file")


def _read_jsonl(path: str | Path, parse: Callable[[Path, int, dict], Any]) -> list[Any]:
    return list(iter_jsonl(path, parse))


def _read_unique(path: str | Path, parse: Callable[[Path, int, dict], Any], id_field: Callable[[dict], str]) -> list[Any]:
    """:func:`_read_jsonl` of records whose first element is a unique id: a repeat is an error on
    its line, named by the file's own id field (``_id`` in BEIR), with the line of its first use."""
    first: dict[str, int] = {}

    def parse_once(p: Path, n: int, o: dict) -> Any:
        record = parse(p, n, o)
        if record[0] in first:
            raise DataError(p, n, id_field(o), f"duplicate id {record[0]!r} (first on line {first[record[0]]})")
        first[record[0]] = n
        return record

    return _read_jsonl(path, parse_once)


def _parse_ours(p: Path, n: int, o: dict) -> Document:
    return Document(_str_field(p, n, o, "doc_id"), _str_field(p, n, o, "text"))


def _optional_str(p: Path, n: int, o: dict, field: str) -> str:
    value = o.get(field, "")
    if not isinstance(value, str):
        raise DataError(p, n, field, f"expected a string, got {value!r:.60}")
    return _checked_text(p, n, field, value)


def collapse_whitespace(text: str) -> str:
    """Runs of whitespace as one space, none at the ends: BEIR texts, read either way."""
    return " ".join(text.split())


def _parse_beir(p: Path, n: int, o: dict) -> Document:
    # BEIR's models read the title in front of the body; either may be empty, not both. Collapsed
    # as `evaluate --dataset` (ir_datasets) reads it, or byte-level BPE would see other pieces.
    doc_id = _str_field(p, n, o, "_id")
    text = collapse_whitespace(f"{_optional_str(p, n, o, 'title')} {_optional_str(p, n, o, 'text')}")
    if not text:
        raise DataError(p, n, "text", "a BEIR record needs a non-empty 'title' or 'text'")
    return Document(doc_id, text)


def _parse_pyserini(p: Path, n: int, o: dict) -> Document:
    if "contents" not in o:
        raise DataError(p, n, "contents", "missing; a record keyed by 'id' is read as a Pyserini JsonCollection ('id', 'contents')")
    return Document(_str_field(p, n, o, "id"), _str_field(p, n, o, "contents"))


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
    return _read_unique(path, parse_document, lambda o: next(k for k in DOCUMENT_FORMATS if k in o))


def load_queries(path: str | Path) -> list[Query]:
    """``queries.jsonl``: one ``{"qid": str, "text": str}`` per line (BEIR's ``_id`` too), ids unique."""

    def id_field(o: dict) -> str:
        return "_id" if "qid" not in o and "_id" in o else "qid"  # BEIR's queries.jsonl: '_id', 'text'

    def parse(p: Path, n: int, o: dict) -> Query:
        key, text = id_field(o), _str_field(p, n, o, "text")
        # a BEIR query's whitespace as `evaluate --dataset` (ir_datasets) reads it, like its documents
        return Query(_str_field(p, n, o, key), collapse_whitespace(text) if key == "_id" else text)

    return _read_unique(path, parse, id_field)


def load_train(path: str | Path) -> list[TrainExample]:
    """``train.jsonl``: ``qid, query, doc_ids, doc_texts, teacher_scores`` with equal list lengths."""

    def parse(p: Path, n: int, o: dict) -> TrainExample:
        qid = _str_field(p, n, o, "qid")
        query = _str_field(p, n, o, "query")
        doc_ids = _str_list_field(p, n, o, "doc_ids")
        doc_texts = _str_list_field(p, n, o, "doc_texts")
        scores = _float_list_field(p, n, o, "teacher_scores")
        if len(doc_texts) != len(doc_ids):
            raise DataError(p, n, "doc_texts", f"has {len(doc_texts)} entries but doc_ids has {len(doc_ids)}")
        if len(scores) != len(doc_ids):
            raise DataError(p, n, "teacher_scores", f"has {len(scores)} entries but doc_ids has {len(doc_ids)}")
        if len(doc_ids) < 2:
            raise DataError(p, n, "doc_ids", "needs at least 2 candidates to rank")
        return TrainExample(qid, query, doc_ids, doc_texts, scores)

    return _read_jsonl(path, parse)


def load_dictionary(path: str | Path) -> list[DictionaryEntry]:
    """``dictionary.jsonl``: ``{"term", "definition", "examples": [str, ...]}`` per line."""

    def parse(p: Path, n: int, o: dict) -> DictionaryEntry:
        return DictionaryEntry(
            _str_field(p, n, o, "term"), _str_field(p, n, o, "definition"), _str_list_field(p, n, o, "examples")
        )

    return _read_jsonl(path, parse)


# BEIR's qrels/*.tsv start with this header line; its rows are 'query-id corpus-id score'.
BEIR_QRELS_HEADER = ("query-id", "corpus-id", "score")


def load_qrels(path: str | Path) -> Qrels:
    """TREC qrels, ``qid 0 doc_id grade`` per line, or BEIR's ``qid doc_id grade`` (its header
    line allowed first); whitespace separated, grade an integer."""
    p = require_file(path)
    qrels: Qrels = {}
    for n, raw in iter_lines(p):
        parts = raw.split()
        if not parts or (not qrels and tuple(parts) == BEIR_QRELS_HEADER):
            continue
        if len(parts) == 4:
            qid, _, doc_id, grade = parts
        elif len(parts) == 3:
            qid, doc_id, grade = parts
        else:
            raise DataError(p, n, None, f"expected 4 columns 'qid 0 doc_id grade' (or BEIR's 3), got {len(parts)}")
        try:
            g = int(grade)
        except ValueError:
            raise DataError(p, n, "grade", f"expected an integer, got {grade[:60]!r}") from None
        qrels.setdefault(qid, {})[doc_id] = g
    if not qrels:
        raise DataError(p, None, None, "no judgements in file")
    return qrels


def _read_json(path: str | Path) -> tuple[Path, Any]:
    p = require_file(path)
    return p, _parse_json(p, None, read_text(p))


def load_domain_terms(path: str | Path) -> dict[str, list[str]]:
    """``domain_terms.json``: an object of category -> list of terms (the spec's format)."""
    p, obj = _read_json(path)
    if not isinstance(obj, dict):
        raise DataError(p, None, None, "expected an object of category -> list of terms")
    out: dict[str, list[str]] = {}
    for category, terms in obj.items():
        if not isinstance(terms, list):
            raise DataError(p, None, category, "expected a list of terms")
        for i, t in enumerate(terms):
            if not isinstance(t, str) or not t.strip():
                raise DataError(p, None, f"{category}[{i}]", f"expected a non-empty string, got {t!r:.60}")
            if t != t.strip() or any(c.isspace() for c in t):
                raise DataError(p, None, f"{category}[{i}]", f"a term must be one word without spaces, got {t!r}")
            _checked_text(p, None, f"{category}[{i}]", t)
        out[category] = list(terms)
    if not any(out.values()):
        raise DataError(p, None, None, "no terms: every category is empty")
    return out


def load_query_groups(path: str | Path) -> dict[str, list[str]]:
    """``query_groups.json``: group name -> list of qids (used by reports)."""
    p, obj = _read_json(path)
    if not isinstance(obj, dict) or not all(
        isinstance(v, list) and all(isinstance(q, str) for q in v) for v in obj.values()
    ):
        raise DataError(p, None, None, "expected an object of group -> list of qids")
    return obj


def check_query_groups(path: str | Path, groups: dict[str, list[str]], known: set[str]) -> None:
    """Every qid a group of ``path`` lists is in ``known``, else a DataError naming the group."""
    for name, qids in groups.items():
        stray = [q for q in qids if q not in known]
        if stray:
            raise DataError(path, None, name, f"lists unknown query ids: {', '.join(stray[:5])}")
