"""The records sparse-adapt reads, and the error every loader raises."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, NamedTuple

from sparse_adapt.errors import ConfigError, SparseAdaptError


class DataError(SparseAdaptError, ValueError):
    """A user-supplied file is malformed. ``str()`` is ``path:line: field 'f': message``."""

    def __init__(self, path: str | Path, line: int | None, field: str | None, message: str):
        self.path = str(path)
        self.line = line
        self.field = field
        self.message = message
        where = self.path if line is None else f"{self.path}:{line}"
        # A field named by the file's own key is shown escaped when it holds a line break or a
        # control character: "a\nerror: ..." had printed a second, forged error line.
        what = (f" field '{field}':" if field.isprintable() else f" field {field!r}:") if field else ""
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


def checked_records(items: Iterable, name: str, id_field: str) -> list:
    """``items`` (records built in Python) as a list, checked before any encoding: each has
    ``id_field`` and ``text`` (TypeError), and no id repeats (ConfigError: results are keyed by
    id, so a repeated one kept only its last, silently; the file loaders refuse one too)."""
    items, seen = list(items), set()
    kind = "Document" if id_field == "doc_id" else "Query"
    for i, item in enumerate(items):
        if not (hasattr(item, id_field) and hasattr(item, "text")):
            raise TypeError(f"{name}[{i}] must be a sparse_adapt.data.{kind} (.{id_field} and .text), "
                            f"got {type(item).__name__}")
        if (key := getattr(item, id_field)) in seen:
            raise ConfigError(f"the {name} repeat the id {key!r}; each needs its own")
        seen.add(key)
    return items


def check_terms(terms: object, name: str = "terms") -> None:
    """``terms`` is None or a parsed terms file, ``{category: [term, ...]}``; TypeError naming
    the loader otherwise (a path given for the dict failed deep inside with an AttributeError)."""
    if terms is not None and not (isinstance(terms, dict) and all(isinstance(v, list) for v in terms.values())):
        raise TypeError(f"{name} must be a dict {{category: [term, ...]}} as load_domain_terms(path) returns, "
                        f"got {type(terms).__name__}")
