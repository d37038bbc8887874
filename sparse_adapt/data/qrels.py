"""Relevance judgements (TREC and BEIR qrels) and query groups."""

from __future__ import annotations

import re
from pathlib import Path

from sparse_adapt.data.reading import first_repeat, id_problem, iter_lines, read_json, require_file
from sparse_adapt.data.records import DataError, Qrels


BEIR_QRELS_HEADER = ("query-id", "corpus-id", "score")

# Graded relevance is a small integer (TREC uses 0-3); this bound only keeps a typo out of ranx's int64.
GRADE_LIMIT = 1_000_000


def load_qrels(path: str | Path) -> Qrels:
    """TREC qrels, ``qid 0 doc_id grade`` per line, or BEIR's ``qid doc_id grade`` (its header
    line allowed first); whitespace separated, grade an integer. A document judged twice for
    a query with two grades is refused (which line won would decide the figures); the same
    grade twice is one judgement."""
    p = require_file(path)
    qrels: Qrels = {}
    columns = 0
    for n, raw in iter_lines(p):
        parts = raw.split()
        if not parts or (not qrels and tuple(parts) == BEIR_QRELS_HEADER):
            continue
        # One layout per file: a TREC line missing its doc id ("q1 0 2") had been read as
        # BEIR's 3 columns, judging a document named "0".
        columns = columns or len(parts)
        if len(parts) != columns and len(parts) in (3, 4):
            raise DataError(p, n, None, f"{len(parts)} columns where the file's first judgement has {columns} "
                                        "(TREC's 'qid 0 doc_id grade' has 4, BEIR's 'qid doc_id grade' 3)")
        if len(parts) == 4:
            qid, _, doc_id, grade = parts
        elif len(parts) == 3:
            qid, doc_id, grade = parts
        else:
            raise DataError(p, n, None, f"expected 4 columns 'qid 0 doc_id grade' (or BEIR's 3), got {len(parts)}")
        try:
            if not re.fullmatch(r"[+-]?[0-9]+", grade):  # int() also reads "1_0" as 10, and Arabic-Indic digits
                raise ValueError
            g = int(grade)
        except ValueError:
            short = " (read as BEIR's 'qid doc_id grade': a TREC line has 4 columns, 'qid 0 doc_id grade')" \
                if len(parts) == 3 else ""
            raise DataError(p, n, "grade", f"expected an integer, got {grade[:60]!r}{short}") from None
        if not -GRADE_LIMIT <= g <= GRADE_LIMIT:  # ranx stores grades as 64-bit integers
            raise DataError(p, n, "grade", f"expected a relevance grade between {-GRADE_LIMIT} and {GRADE_LIMIT}, "
                                           f"got {grade[:60]}")
        for field, value in (("qid", qid), ("doc_id", doc_id)):
            if (problem := id_problem(value)) is not None:
                raise DataError(p, n, field, problem)
        judged = qrels.setdefault(qid, {})
        if judged.get(doc_id, g) != g:  # which line wins would decide the figures: the file must say
            raise DataError(p, n, "grade", f"{qid} {doc_id} is judged {judged[doc_id]} on an earlier line and {g} here")
        judged[doc_id] = g
    if not qrels:
        raise DataError(p, None, None, "no judgements in file")
    return qrels


def load_query_groups(path: str | Path) -> dict[str, list[str]]:
    """``query_groups.json``: group name -> list of qids (used by reports)."""
    p, obj = read_json(path)
    if not isinstance(obj, dict):
        raise DataError(p, None, None, f"expected an object of group -> list of qids, got {type(obj).__name__}")
    for name, qids in obj.items():
        if not name.strip() or not name.isprintable():  # group names head report tables and JSON keys
            raise DataError(p, None, None, f"a group name must be a printable name, got {name!r:.60}")
        if not isinstance(qids, list) or not all(isinstance(q, str) for q in qids):
            raise DataError(p, None, name, "expected a list of query ids (strings)")
        # A repeat counted twice in the group's size while its metric averaged each query once.
        if (repeat := first_repeat(qids)) is not None:
            raise DataError(p, None, name, f"lists {repeat!r:.60} twice")
    return obj


def check_query_groups(path: str | Path, groups: dict[str, list[str]], known: set[str]) -> None:
    """Every qid a group of ``path`` lists is in ``known``, else a DataError naming the group."""
    for name, qids in groups.items():
        stray = [q for q in qids if q not in known]
        if stray:
            raise DataError(path, None, name, f"lists unknown query ids: {', '.join(map(repr, stray[:5]))}")
