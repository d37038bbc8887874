"""Run files a user hands to ``evaluate --compare``: TREC (``qid Q0 doc_id rank score tag``)
or ranx's JSON (``{qid: {doc_id: score}}``), each problem a DataError naming file, line and
field. ranx parses these formats too, but its errors name neither, and it accepts a NaN
score, which then ranks arbitrarily."""

from __future__ import annotations

import math
import re
from pathlib import Path

from sparse_adapt.data.reading import id_problem, int_as_float, iter_lines, read_json, require_file
from sparse_adapt.data.records import DataError

Run = dict[str, dict[str, float]]


# A score as a run file writes one: ASCII digits (float() also read "1_0" as 10 and Arabic-Indic digits).
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[+-]?(?:inf|infinity|nan)", re.IGNORECASE | re.ASCII)


def run_score(path: Path, line: int | None, field: str, value: object) -> float:
    written = value  # shown as the file has it: 1e400 is "1e400", not the "inf" it converts to
    if isinstance(value, str):
        if not _NUMBER.fullmatch(value):
            raise DataError(path, line, field, f"expected a number, got {value[:60]!r}")
        value = float(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DataError(path, line, field, f"expected a number, got {value!r:.60}")
    as_float = value if isinstance(value, float) else int_as_float(value)  # a 400-digit int overflowed
    if not math.isfinite(as_float):
        raise DataError(path, line, field, f"expected a finite number, got {str(written)[:60]}")
    return as_float


def _check_id(p: Path, line: int | None, field: str, value: str, what: str) -> None:
    """An id as documents and queries may have one (a JSON run's keys could be anything)."""
    if not value:
        raise DataError(p, line, field, f"an empty {what}")
    if (problem := id_problem(value)) is not None:
        raise DataError(p, line, field, problem)


def load_run(path: str | Path) -> Run:
    """``{qid: {doc_id: score}}`` from a TREC run, from a ``.json`` file in ranx's layout, or from
    ranx's binary ``.lz4`` (read by ranx, then given the same checks)."""
    p = require_file(path)
    run: Run = {}
    if p.suffix.lower() == ".lz4":
        import ranx

        try:
            read = ranx.Run.from_file(str(p), kind="lz4")
        except Exception as e:  # noqa: BLE001 - whatever its decoder raises, the file is the cause
            raise DataError(p, None, None, f"not a ranx lz4 run file ({type(e).__name__}: {e})") from None
        # A NaN or infinite score ranks arbitrarily: refused here as in a text run.
        run = {q: {d: run_score(p, None, f"{q}.{d}", s) for d, s in scores.items()} for q, scores in read.run.items()}
    elif p.suffix.lower() == ".json":
        _, obj = read_json(p)
        if not isinstance(obj, dict):
            raise DataError(p, None, None, f"expected an object of query id -> {{doc_id: score}}, got {type(obj).__name__}")
        for qid, docs in obj.items():
            _check_id(p, None, qid, qid, "query id")
            if not isinstance(docs, dict):
                raise DataError(p, None, qid, f"expected an object of doc_id -> score, got {type(docs).__name__}")
            run[qid] = {}
            for d, score in docs.items():
                _check_id(p, None, f"{qid}.{d}", d, "document id")
                if isinstance(score, str):  # ranx's layout holds numbers; a quoted one is another file
                    raise DataError(p, None, f"{qid}.{d}", f"expected a JSON number, got the string {score[:60]!r}")
                run[qid][d] = run_score(p, None, f"{qid}.{d}", score)
    else:
        for n, text in iter_lines(p):
            parts = text.split()
            if not parts:
                continue
            if len(parts) != 6:
                raise DataError(p, n, None, f"expected 6 columns 'qid Q0 doc_id rank score tag', got {len(parts)}")
            qid, _, doc_id, _, score, _ = parts
            _check_id(p, n, "qid", qid, "query id")
            _check_id(p, n, "doc_id", doc_id, "document id")
            docs = run.setdefault(qid, {})
            if doc_id in docs:
                raise DataError(p, n, "doc_id", f"{doc_id!r:.60} is ranked twice for query {qid!r:.60}")
            docs[doc_id] = run_score(p, n, "score", score)
    if not any(run.values()):
        raise DataError(p, None, None, "no ranked documents in file")
    return run
