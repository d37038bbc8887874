"""Reading a user's file: UTF-8 lines, JSON, typed fields, each problem a DataError naming
file, line and field."""

from __future__ import annotations

import codecs
import hashlib
import json
import math
import unicodedata
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from sparse_adapt.data.records import DataError

GZIP_MAGIC = b"\x1f\x8b"


def read_record(path: str | Path) -> dict:
    """A JSON object this package wrote (a manifest, a record beside its outputs), or {} when it
    is missing, unreadable or no object: a record from an older version or a damaged one
    holds nothing to compare with, and the caller then treats it as absent."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):  # ValueError: not UTF-8 or not JSON
        return {}
    return data if isinstance(data, dict) else {}


def require_file(path: str | Path) -> Path:
    """The path of an existing regular file, else a DataError naming it."""
    p = Path(path)
    if p.is_dir():  # e.g. a Pyserini collection split over several files
        raise DataError(p, None, None, "is a directory; give the file itself (join a collection's files into one first)")
    if not p.is_file():
        raise DataError(p, None, None, "not a regular file" if p.exists() else
                        "a symbolic link that leads nowhere (to a missing file, or in a loop)" if p.is_symlink() else
                        "file not found")
    return p


def file_sha256(path: str | Path) -> str:
    """The sha256 of a file's bytes, streamed: a corpus need not fit in memory. What a run
    records of its inputs, to tell a rerun on the same files from one on edited files."""
    with Path(path).open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def utf8_line(path: Path, line: int, raw: bytes) -> str:
    """Line ``line`` of ``path`` as text (a first line's BOM dropped); bad bytes are a DataError."""
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
            yield line_no, utf8_line(p, line_no, raw)


def read_text(path: str | Path) -> str:
    """A whole UTF-8 file (BOM dropped); bad bytes are a DataError naming their line."""
    p = require_file(path)
    return "".join(text for _, text in iter_lines(p))


def first_repeat(items: Iterable[str]) -> str | None:
    """The first item that appeared before it, or None."""
    seen: set[str] = set()
    for item in items:
        if item in seen:
            return item
        seen.add(item)
    return None


class _RepeatedKey(Exception):
    def __init__(self, key: str):
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise _RepeatedKey(first_repeat(k for k, _ in pairs))
    return obj


class Overflowed(float):
    """A JSON number too large for a float (``1e400``): infinite, and shown as the file wrote it,
    since "got inf" named nothing the user had written."""

    def __new__(cls, text: str) -> "Overflowed":
        obj = super().__new__(cls, text)
        obj.written = text
        return obj

    def __str__(self) -> str:
        return self.written

    __repr__ = __str__


def _parse_float(text: str) -> float:
    value = float(text)
    return value if math.isfinite(value) else Overflowed(text)


def parse_json(path: Path, line: int | None, text: str) -> Any:
    """JSON of a user's file or line. A key repeated in one object is an error: JSON parsers
    keep only its last value, so a category or field written twice would vanish silently."""
    if line is not None:  # with its newline, a line cut short was "column 1" of the line after it
        text = text.rstrip("\r\n")
    try:
        return json.loads(text, object_pairs_hook=_unique_keys, parse_float=_parse_float)
    except _RepeatedKey as e:
        raise DataError(path, line, e.key, "appears twice in one JSON object (only the last would count)") from None
    except json.JSONDecodeError as e:
        where = line if line is not None else e.lineno
        # json's "Invalid control character at" message ends where its position would follow
        raise DataError(path, where, None, f"invalid JSON ({e.msg.removesuffix(' at')} at column {e.colno})") from None
    except (ValueError, RecursionError) as e:  # e.g. an integer of 5000 digits, nesting 10^5 deep
        raise DataError(path, line, None, f"invalid JSON ({str(e)[:80] or type(e).__name__})") from None


def encodable(value: str) -> bool:
    """Whether ``value`` is text: JSON and TOML may spell an unpaired surrogate (``\ud800``), a
    valid str that no tokenizer (and no UTF-8 file) can take."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def checked_text(path: Path, line: int | None, field: str, value: str) -> str:
    if not encodable(value):
        raise DataError(path, line, field, f"contains an unpaired surrogate, not text: {value!r:.60}")
    return value


def missing(obj: dict) -> str:
    """The error text of a missing field, naming the fields there are: a docs line with
    ``body`` or a queries line with ``query`` (train.jsonl's name) said only "missing"."""
    shown = ", ".join(repr(k)[:40] for k in list(obj)[:6]) + (", ..." if len(obj) > 6 else "")
    return f"missing (there: {shown})" if obj else "missing (the object is empty)"


def str_field(path: Path, line: int, obj: dict, field: str) -> str:
    if field not in obj:
        raise DataError(path, line, field, missing(obj))
    value = obj[field]
    if not isinstance(value, str) or not visible(value):
        raise DataError(path, line, field, f"expected a non-empty string, got {value!r:.60}")
    return checked_text(path, line, field, value)


# Categories that draw nothing of their own: controls, format characters, and marks (nonspacing,
# spacing combining, enclosing), which sit on a letter.
UNSEEN = frozenset({"Cc", "Cf", "Mn", "Mc", "Me"})


def visible(text: str) -> bool:
    """Whether ``text`` holds more than whitespace, invisible characters (a zero-width space, a
    NUL) and marks with nothing to sit on (a lone combining accent, an emoji variation selector):
    a document of those encoded to the model's empty-input vector and matched generic queries
    (uncased WordPiece strips the marks, leaving no piece)."""
    return any(not c.isspace() and unicodedata.category(c) not in UNSEEN for c in text)


# Characters that only hide in an id: the byte-order mark (zero-width no-break space), the zero-width space, the word joiner.
INVISIBLE = frozenset("\ufeff\u200b\u2060")

# Lucene's limit on one term (an id is one): Anserini lost a longer id's document, and every
# document after it in the file, while reporting them indexed.
MAX_ID_BYTES = 32766


def id_value(path: Path, line: int, obj: dict, field: str) -> str:
    """A document or query id: a non-empty string with no whitespace, which TREC qrels and run
    files (fields separated by it) could not hold: an id with a space was read back as 8 columns;
    nor an invisible or control character, nor over :data:`MAX_ID_BYTES` bytes (:func:`id_problem`)."""
    value = str_field(path, line, obj, field)
    if (problem := id_problem(value)) is not None:
        raise DataError(path, line, field, problem)
    return value


def id_problem(value: str) -> str | None:
    """What makes ``value`` no id (see :func:`id_value`), or None."""
    if any(c.isspace() for c in value):
        return f"{value!r:.60} holds whitespace, which qrels and run files cannot: replace it (e.g. with '_')"
    # A BOM or zero-width space is invisible where the id is shown and never equals the id a
    # qrels file spells without it (two TSV files joined by `cat` put the second's BOM in an id).
    # Not every format character: ZWNJ/ZWJ spell Persian and Indic words and emoji, a soft hyphen is text.
    if hidden := next((c for c in value if unicodedata.category(c) in ("Cc", "Cs") or c in INVISIBLE), None):
        return f"{value!r:.60} holds the invisible or control character U+{ord(hidden):04X}: remove it"
    if (size := len(value.encode("utf-8", "surrogatepass"))) > MAX_ID_BYTES:
        return (f"{value!r:.40} is {size:,} bytes long; a Lucene index keeps ids of up to {MAX_ID_BYTES:,} "
                f"(longer ones lost their documents)")
    return None


def _list_field(path: Path, line: int, obj: dict, field: str, of: str) -> list:
    if field not in obj:
        raise DataError(path, line, field, missing(obj))
    value = obj[field]
    if not isinstance(value, list) or not value:
        raise DataError(path, line, field, f"expected a non-empty list of {of}")
    return value


def str_list_field(path: Path, line: int, obj: dict, field: str) -> tuple[str, ...]:
    value = _list_field(path, line, obj, field, "strings")
    for i, item in enumerate(value):
        if not isinstance(item, str) or not visible(item):  # "\u200b" encoded as an empty text
            raise DataError(path, line, f"{field}[{i}]", f"expected a non-empty string, got {item!r:.60}")
        checked_text(path, line, f"{field}[{i}]", item)
    return tuple(value)


def id_list_field(path: Path, line: int, obj: dict, field: str) -> tuple[str, ...]:
    """:func:`str_list_field` whose items are ids (:func:`id_problem`)."""
    value = str_list_field(path, line, obj, field)
    for i, item in enumerate(value):
        if (problem := id_problem(item)) is not None:
            raise DataError(path, line, f"{field}[{i}]", problem)
    return value


# Scores train in float32: 1e39 passed as finite here and became inf in the tensor, stopping the
# run at distill after the stages before it had trained.
FLOAT32_MAX = 3.4028234663852886e38  # numpy.finfo(numpy.float32).max, exactly


def float_list_field(path: Path, line: int, obj: dict, field: str) -> tuple[float, ...]:
    value = _list_field(path, line, obj, field, "numbers")
    for i, item in enumerate(value):
        # bool is an int subclass; "true" as a teacher score is a mistake, not a 1.
        if isinstance(item, bool) or not isinstance(item, (int, float)):
            raise DataError(path, line, f"{field}[{i}]", f"expected a number, got {item!r:.60}")
        as_float = item if isinstance(item, float) else int_as_float(item)
        if not math.isfinite(as_float) or abs(as_float) > FLOAT32_MAX:
            raise DataError(path, line, f"{field}[{i}]", f"expected a finite number within float32's range, got {item!r:.60}")
    return tuple(float(v) for v in value)


def int_as_float(value: int) -> float:
    try:
        return float(value)
    except OverflowError:  # an integer beyond float range is no usable score either
        return math.inf


# How a file's lines become (line number, object) pairs: JSONL by default, TSV for documents and queries.
Objects = Callable[[Path], Iterator[tuple[int, dict]]]


def json_objects(p: Path) -> Iterator[tuple[int, dict]]:
    """(line, object) of every non-blank line of a JSONL file; a line that is no JSON object is
    a DataError naming it."""
    for line_no, raw in iter_lines(p):
        if not raw.strip():
            continue
        try:
            obj = parse_json(p, line_no, raw)
        except DataError as e:
            # One JSON document pretty-printed over lines (an array, or an object): JSONL is one per line.
            if raw.strip() in ("[", "{", "[{"):
                raise DataError(p, line_no, None, f"{e.message}; JSONL holds one whole JSON object per line "
                                "(this looks like one JSON document spread over lines)") from None
            raise
        if not isinstance(obj, dict):
            one_per_line = "; JSONL holds one JSON object per line, not an array of them" if isinstance(obj, list) else ""
            raise DataError(p, line_no, None, f"expected a JSON object, got {type(obj).__name__}{one_per_line}")
        yield line_no, obj


def iter_jsonl(path: str | Path, parse: Callable[[Path, int, dict], Any], objects: Objects = json_objects) -> Iterator[Any]:
    """Parse a file's records lazily, one per non-blank line; errors name file and line."""
    p = require_file(path)
    seen_any = False
    for line_no, obj in objects(p):
        seen_any = True
        yield parse(p, line_no, obj)
    if not seen_any:
        raise DataError(p, None, None, "no records in file")


def read_jsonl(path: str | Path, parse: Callable[[Path, int, dict], Any], objects: Objects = json_objects) -> list[Any]:
    return list(iter_jsonl(path, parse, objects))


def read_unique(
    path: str | Path, parse: Callable[[Path, int, dict], Any], id_field: Callable[[dict], str],
    objects: Objects = json_objects,
) -> list[Any]:
    """:func:`read_jsonl` of records whose first element is a unique id: a repeat is an error on
    its line, named by the file's own id field (``_id`` in BEIR), with the line of its first use."""
    first: dict[str, int] = {}

    def parse_once(p: Path, n: int, o: dict) -> Any:
        record = parse(p, n, o)
        if record[0] in first:
            raise DataError(p, n, id_field(o), f"duplicate id {record[0]!r} (first on line {first[record[0]]})")
        first[record[0]] = n
        return record

    return read_jsonl(path, parse_once, objects)


def read_json(path: str | Path) -> tuple[Path, Any]:
    p = require_file(path)
    return p, parse_json(p, None, read_text(p))
