"""The records sparse-adapt reads, and the error every loader raises."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from sparse_adapt.errors import SparseAdaptError


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
