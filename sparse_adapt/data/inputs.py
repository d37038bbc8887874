"""The training inputs: ``train.jsonl``, ``dictionary.jsonl`` and ``domain_terms.json``."""

from __future__ import annotations

import re
import unicodedata

from pathlib import Path
from typing import Sequence

from sparse_adapt.data.reading import (
    checked_text, first_repeat, float_list_field, id_list_field, id_value, read_json, read_jsonl, read_unique, str_field,
    str_list_field, visible,
)
from sparse_adapt.data.records import DataError, DictionaryEntry, TrainExample


def load_train(path: str | Path) -> list[TrainExample]:
    """``train.jsonl``: ``qid, query, doc_ids, doc_texts, teacher_scores`` with equal list lengths.

    A candidate id names one text across the file: a batch encodes each id once, so a second
    text under the same id would silently be trained as the first."""
    text_of: dict[str, tuple[str, int]] = {}  # doc id -> (its text, the line that first gave it)

    def parse(p: Path, n: int, o: dict) -> TrainExample:
        qid = id_value(p, n, o, "qid")
        query = str_field(p, n, o, "query")
        doc_ids = id_list_field(p, n, o, "doc_ids")
        doc_texts = str_list_field(p, n, o, "doc_texts")
        scores = float_list_field(p, n, o, "teacher_scores")
        if len(doc_texts) != len(doc_ids):
            raise DataError(p, n, "doc_texts", f"has {len(doc_texts)} entries but doc_ids has {len(doc_ids)}")
        if len(scores) != len(doc_ids):
            raise DataError(p, n, "teacher_scores", f"has {len(scores)} entries but doc_ids has {len(doc_ids)}")
        if len(doc_ids) < 2:
            raise DataError(p, n, "doc_ids", "needs at least 2 candidates to rank")
        twice = first_repeat(doc_ids)
        if twice is not None:
            raise DataError(p, n, "doc_ids", f"lists {twice!r} twice; a candidate is scored once")
        for i, (did, text) in enumerate(zip(doc_ids, doc_texts)):
            first = text_of.setdefault(did, (text, n))
            if first[0] != text:
                raise DataError(
                    p, n, f"doc_texts[{i}]", f"differs from the text of {did!r} on line {first[1]}; one id names one text",
                )
        return TrainExample(qid, query, doc_ids, doc_texts, scores)

    return read_unique(path, parse, lambda o: "qid")


def load_dictionary(path: str | Path) -> list[DictionaryEntry]:
    """``dictionary.jsonl``: ``{"term", "definition", "examples": [str, ...]}`` per line."""

    def parse(p: Path, n: int, o: dict) -> DictionaryEntry:
        return DictionaryEntry(
            str_field(p, n, o, "term"), str_field(p, n, o, "definition"), str_list_field(p, n, o, "examples")
        )

    return read_jsonl(path, parse)



def load_domain_terms(path: str | Path) -> dict[str, list[str]]:
    """``domain_terms.json``: an object of category -> list of terms (the spec's format)."""
    p, obj = read_json(path)
    return check_domain_terms(obj, p)


def flat_terms(terms: dict[str, list[str]]) -> list[str]:
    """Every term of a ``domain_terms.json``, category by category, in file order."""
    return [t for items in terms.values() for t in items]


def mentions_term(text: str, terms: Sequence[str]) -> bool:
    """Whether ``text`` names one of ``terms`` as a whole word, in any case (``XR-7200`` in
    "the xr-7200 unit", not ``pump`` in "pumps")."""
    return any(re.search(rf"(?<!\w){re.escape(t)}(?!\w)", text, flags=re.IGNORECASE) for t in terms)


def check_domain_terms(obj: object, p: str | Path = "<terms>") -> dict[str, list[str]]:
    """``obj`` as the terms of a ``domain_terms.json`` (a copy), or a DataError naming ``p`` and the
    field: the same checks for a file and for a dict given from Python."""
    if not isinstance(obj, dict):
        raise DataError(p, None, None, "expected an object of category -> list of terms")
    out: dict[str, list[str]] = {}
    for category, terms in obj.items():
        # Categories name tables, JSON keys and sentence-transformers fields: printable names.
        if not isinstance(category, str) or not category.strip() or not category.isprintable():
            raise DataError(p, None, None, f"a category must be a printable name, got {category!r:.60}")
        if not isinstance(terms, list):
            raise DataError(p, None, category, "expected a list of terms")
        for i, t in enumerate(terms):
            if not isinstance(t, str) or not visible(t):  # "\u0000" or a zero-width space: no term
                raise DataError(p, None, f"{category}[{i}]", f"expected a non-empty string, got {t!r:.60}")
            if t != t.strip() or any(c.isspace() for c in t):
                raise DataError(p, None, f"{category}[{i}]", f"a term must be one word without spaces, got {t!r:.60}")
            checked_text(p, None, f"{category}[{i}]", t)
            if not t.isprintable():
                raise DataError(p, None, f"{category}[{i}]", f"a term must be printable, got {t!r:.60}")
        # Composed (NFC): a term pasted from a PDF or macOS as "Zu\u0308rich" became a token
        # that byte-level BPE and SentencePiece text typed as "Zürich" never produces.
        out[category] = [unicodedata.normalize("NFC", t) for t in terms]
    if not any(out.values()):
        raise DataError(p, None, None, "no terms: every category is empty")
    return out


def check_terms(terms: object, name: str = "terms") -> None:
    """``terms`` is None or a parsed terms file, ``{category: [term, ...]}``; TypeError naming
    the loader otherwise (a path given for the dict failed deep inside with an AttributeError)."""
    if terms is not None and not (isinstance(terms, dict) and all(isinstance(v, list) for v in terms.values())):
        raise TypeError(f"{name} must be a dict {{category: [term, ...]}} as load_domain_terms(path) returns, "
                        f"got {type(terms).__name__}")
