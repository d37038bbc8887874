"""Bridge from ``ir_datasets`` to our records: documents, queries and qrels of any
ir_datasets id (``beir/scifact/test``, downloaded by ir_datasets where the network allows)
or of a local BEIR-format folder.

A local folder (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``, as BEIR's
zips unpack) is read by ir_datasets' own components: ``JsonlDocs``/``JsonlQueries`` with
BEIR's field names and ``BeirQrels``, assembled into an ``ir_datasets`` ``Dataset``. The
files reach them through the readers of ``--docs``/``--queries``/``--qrels`` files
(``data.reading.json_objects``, ``data.qrels.load_qrels``), so they read alike: blank lines
skipped, a key written twice in one object refused, every error naming file and line.
"""

from __future__ import annotations

import errno
import io
import json
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from sparse_adapt.data import Document, Qrels, Query, collapse_whitespace
from sparse_adapt.data.qrels import BEIR_QRELS_HEADER, GRADE_LIMIT, load_qrels
from sparse_adapt.data.documents import parse_beir_document, parse_beir_query
from sparse_adapt.data.reading import encodable, id_problem, iter_lines, json_objects, visible
from sparse_adapt.data.records import DataError
from sparse_adapt.errors import SparseAdaptError


class DatasetError(SparseAdaptError, ValueError):
    """An ir_datasets id or local folder cannot be loaded."""


def _text(record) -> str:
    text = record.default_text() if hasattr(record, "default_text") else record.text
    return collapse_whitespace(text)  # BEIR's "title text" leaves a leading space when the title is empty


def _checked(name: str, what: str, number: int, record, seen: set[str]) -> tuple[str, str]:
    """The checks ``--docs``/``--queries`` files get, on a record ir_datasets parsed: its
    position (record N of the file) is all ir_datasets tells of where it was."""
    where = f"{name}: {what} record {number}"
    for field, value in zip(record._fields[1:], record[1:]):  # BEIR's title and text ("_id" below)
        if not isinstance(value, str):
            raise DatasetError(f"{where}: field {field!r}: expected a string, got {value!r:.60}")
    for field, value in zip(("_id", *record._fields[1:]), record):
        # An escaped lone surrogate ("\ud800") is valid JSON and no text a tokenizer takes.
        if isinstance(value, str) and not encodable(value):
            raise DatasetError(f"{where}: field {field!r}: contains an unpaired surrogate, not text: {value!r:.60}")
    record_id, text = record[0], _text(record)
    if not isinstance(record_id, str) or not visible(record_id):
        raise DatasetError(f"{where}: field '_id': expected a non-empty string, got {record_id!r:.60}")
    if (problem := id_problem(record_id)) is not None:
        raise DatasetError(f"{where}: field '_id': {problem}")
    if not visible(text):
        raise DatasetError(f"{where} ({record_id!r}): empty text")
    if record_id in seen:
        raise DatasetError(f"{where}: field '_id': duplicate id {record_id!r}")
    seen.add(record_id)
    return record_id, text


@dataclass
class IRDataset:
    """An ir_datasets dataset seen as our records; documents are streamed on demand."""

    name: str
    dataset: object  # ir_datasets Dataset

    def documents(self) -> Iterator[Document]:
        seen: set[str] = set()
        with self._reading("documents"):
            for n, d in enumerate(self.dataset.docs_iter(), start=1):
                yield Document(*_checked(self.name, "document", n, d, seen))

    @contextmanager
    def _reading(self, what: str) -> Iterator[None]:
        # ir_datasets parses the files itself; a bad byte or line surfaces as its exception.
        try:
            yield
        except (DatasetError, DataError):  # ours: they name the file (and line) already
            raise
        except (UnicodeDecodeError, ValueError, KeyError, RuntimeError, TypeError, AttributeError, AssertionError) as e:
            # TypeError/AttributeError: a field of the wrong JSON type (a number for a text, a line that is a list)
            # An AssertionError is how BeirQrels reports a file without BEIR's header line.
            if isinstance(e, AssertionError) and what == "qrels":
                raise DatasetError(f"{self.name}: its qrels file lacks BEIR's header line "
                                   f"'query-id<TAB>corpus-id<TAB>score'") from None
            # any other AssertionError is a check of ir_datasets' own: the header advice would send the user astray
            raise DatasetError(f"{self.name}: cannot read its {what} ({type(e).__name__}: {str(e)[:160]})") from None

    def qrels(self) -> Qrels:
        out: Qrels = {}
        with self._reading("qrels"):
            for r in self.dataset.qrels_iter():
                judged, grade = out.setdefault(r.query_id, {}), int(r.relevance)
                if not -GRADE_LIMIT <= grade <= GRADE_LIMIT:  # as a qrels file: ranx's int64 overflowed
                    raise DatasetError(f"{self.name}: {r.query_id} {r.doc_id}: a relevance grade between "
                                       f"{-GRADE_LIMIT} and {GRADE_LIMIT} expected, got {str(grade)[:60]}")
                if judged.get(r.doc_id, grade) != grade:  # as a qrels file: which line won would decide the figures
                    raise DatasetError(f"{self.name}: {r.query_id} {r.doc_id} is judged {judged[r.doc_id]} and {grade} "
                                       "in its qrels")
                judged[r.doc_id] = grade
        if not out:
            raise DatasetError(f"{self.name}: no relevance judgements")
        return out

    def queries(self, judged_only: bool = True) -> list[Query]:
        """Queries (only those with judgements by default: BEIR's queries.jsonl holds every split)."""
        judged = set(self.qrels()) if judged_only else None
        seen: set[str] = set()
        with self._reading("queries"):
            out = [Query(*_checked(self.name, "query", n, q, seen))
                   for n, q in enumerate(self.dataset.queries_iter(), start=1)]
        out = [q for q in out if judged is None or q.qid in judged]
        if not out:
            raise DatasetError(f"{self.name}: no queries" + (" with judgements" if judged_only else ""))
        return out


def local_beir_files(folder: str | Path, split: str = "test") -> dict[str, Path]:
    """The files of a BEIR-format folder that :func:`local_beir` reads."""
    root = Path(folder)
    return {"corpus": root / "corpus.jsonl", "queries": root / "queries.jsonl", "qrels": root / "qrels" / f"{split}.tsv"}


def import_ir_datasets():
    """ir_datasets (ranx imports it too), which makes its home folder on import: ``~/.ir_datasets``
    unless IR_DATASETS_HOME. One that cannot be made (a read-only HOME) was a bare "Permission
    denied" from `evaluate`; it is said with the way out."""
    try:
        import ir_datasets
    except OSError as e:
        if e.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise
        raise DatasetError(f"ir_datasets (imported to evaluate runs) cannot make its folder {e.filename} "
                           f"({e.strerror}); set IR_DATASETS_HOME to a folder you can write") from None
    return ir_datasets


def local_beir(folder: str | Path, split: str = "test") -> IRDataset:
    """A BEIR-format folder as an ir_datasets Dataset (no copy, no download)."""
    ir_datasets = import_ir_datasets()
    from ir_datasets.datasets.base import Dataset
    from ir_datasets.datasets.beir import BeirQrels, BeirTitleDoc
    from ir_datasets.formats import GenericQuery, JsonlDocs, JsonlQueries

    root = Path(folder)
    files = local_beir_files(root, split)
    missing = [str(p) for p in files.values() if not p.is_file()]
    if missing:
        raise DatasetError(f"{root} is not a BEIR folder: missing {', '.join(missing)}")

    class qrels_download(ir_datasets.util.LocalDownload):
        """The qrels file as ``--qrels`` reads one (:func:`~sparse_adapt.data.qrels.load_qrels`:
        errors naming file and line, grades in ASCII digits, blank and CRLF lines), after BEIR's
        header line, handed to ``BeirQrels`` as clean lines: its own parser read "1_0" as grade
        10, stopped at a blank CRLF line and named neither file nor line."""

        @contextmanager
        def stream(self):
            path = self.path()
            first = next(((n, raw.split()) for n, raw in iter_lines(path) if raw.strip()), None)
            if first is not None and tuple(first[1]) != BEIR_QRELS_HEADER:
                raise DataError(path, first[0], None, "expected BEIR's header line 'query-id<TAB>corpus-id<TAB>score' first")
            judged = load_qrels(path)
            lines = ["\t".join(BEIR_QRELS_HEADER)]
            lines += [f"{qid}\t{doc_id}\t{grade}" for qid, docs in judged.items() for doc_id, grade in docs.items()]
            yield io.BytesIO(("\n".join(lines) + "\n").encode("utf-8"))

    class jsonl_download(ir_datasets.util.LocalDownload):
        """A local JSONL file as ``--docs``/``--queries`` read one: ir_datasets' own parser
        keeps a repeated key's last value and stops at a blank line or a missing field with a
        message naming no line, so each line reaches it checked (and the byte-order mark
        dropped) by ours, errors naming file and line. A BEIR document's title, like its text,
        may be absent (read as empty)."""

        def __init__(self, path: Path, parse: Callable[[Path, int, dict], tuple], fill: tuple[str, ...] = ()):
            super().__init__(path)
            self.parse, self.fill = parse, fill

        @contextmanager
        def stream(self):
            path, first = self.path(), {}

            def line(n: int, obj: dict) -> str:
                record_id = self.parse(path, n, obj)[0]  # the --docs/--queries checks of this line
                if record_id in first:
                    raise DataError(path, n, "_id", f"duplicate id {record_id!r} (first on line {first[record_id]})")
                first[record_id] = n
                return json.dumps({**dict.fromkeys(self.fill, ""), **obj})

            yield (line(n, obj) for n, obj in json_objects(path))

    docs = JsonlDocs(
        jsonl_download(files["corpus"], parse_beir_document, ("title", "text")), BeirTitleDoc, mapping={"doc_id": "_id", "text": "text", "title": "title"},
        namespace=f"local-beir:{root}",
    )
    queries = JsonlQueries(jsonl_download(files["queries"], parse_beir_query), GenericQuery, mapping={"query_id": "_id", "text": "text"})
    qrels = BeirQrels(qrels_download(files["qrels"]), qrels_defs={})
    return IRDataset(str(root), Dataset(docs, queries, qrels))


def load_dataset(id_or_folder: str) -> IRDataset:
    """A local BEIR folder when ``id_or_folder`` is a directory, else an ir_datasets id."""
    if Path(id_or_folder).is_dir():
        return local_beir(id_or_folder)
    ir_datasets = import_ir_datasets()

    try:
        dataset = ir_datasets.load(id_or_folder)
    except KeyError:
        raise DatasetError(f"{id_or_folder!r} is neither a directory nor an ir_datasets id") from None
    for part in ("docs", "queries", "qrels"):
        if not getattr(dataset, f"has_{part}")():
            raise DatasetError(f"ir_datasets {id_or_folder!r} has no {part}; evaluation needs all three")
    return IRDataset(id_or_folder, dataset)
