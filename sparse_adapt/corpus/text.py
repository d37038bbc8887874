"""Words, sentences and term occurrences in raw corpus text (shared by mining, harvesting
and pseudo-query generation).

A *word* is a run of letters and digits, optionally joined by hyphens or underscores, or
between digits by a comma (``XR-7200``, ``agent-package``, ``max_connections``,
``2,4-dichlorophenoxyacetic``): the shapes domain terms take. A term
occurs where it appears case-insensitively with no word character or joiner on either side,
so ``OAuth`` does not occur inside ``OAuth2`` and ``PRVT`` does not occur inside ``PRVTs``.
"""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from sparse_adapt.data import DataError, Document

# Combining marks (U+0300-036F and the other combining blocks) are no \w: a decomposed (NFD)
# "Mu\u0308ller" split into "Mu" and "ller", and "ller-Thurgau" became a term of its own.
_MARKS = "\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"
# A comma between digits joins a chemical locant list to its name ("2,4-dichlorophenoxyacetic"):
# split there, the fragment "4-dichlorophenoxyacetic" was mined as a term.
_CHAR = rf"(?:[^\W_]|[{_MARKS}])"  # a letter, a digit or a mark on one
WORD = re.compile(rf"[^\W_]{_CHAR}*(?:(?:[-_]|(?<=\d),(?=\d))[^\W_]{_CHAR}*)*")
# A sentence ends at . ! ? followed by white space, except after a lone capital letter: an
# initial or an abbreviated genus ("E. coli", "S. piceovorax", "J. Smith") continues the
# sentence. Other abbreviations ("approx.", "Dr.") still split, which only shortens a context.
_SENTENCE_END = re.compile(r"(?<=[.!?])(?<!\b[A-Z]\.)\s+")


# An HTML or XML tag: "<div class=...>", "</p>", "<br/>" (not "a < b > c": a tag name follows "<" at once).
_TAG = re.compile(r"</?[A-Za-z][\w:-]*(?:\s[^<>]*)?/?>")


def markup_warning(documents: Sequence[Document]) -> str | None:
    """A warning when documents hold HTML tags: mining, harvesting and pseudo-queries read them
    as text, so tag and attribute names became "terms" (``col-md-6``) and queries markup."""
    tagged = [d.doc_id for d in documents if _TAG.search(d.text)]
    if not tagged:
        return None
    return (f"{len(tagged)} of {len(documents)} documents hold HTML tags (e.g. {tagged[0]}); they are read as text, "
            "so tag names and attributes can become terms and queries: strip the markup first")


def duplicate_warning(documents: Sequence[Document]) -> str | None:
    """A warning when documents repeat another's text (case and spacing ignored): mining counts
    a word once per copy, and a query cropped from one copy meets the others as candidates."""
    first: dict[str, str] = {}
    repeats = []
    for d in documents:
        seen = first.setdefault(" ".join(d.text.casefold().split()), d.doc_id)
        if seen != d.doc_id:
            repeats.append((d.doc_id, seen))
    if not repeats:
        return None
    doc_id, seen = repeats[0]
    return (f"{len(repeats)} of {len(documents)} documents {'repeats' if len(repeats) == 1 else 'repeat'} an earlier "
            f"one's text (e.g. {doc_id} = {seen}); "
            "each copy counts again in mining and the copies compete in retrieval: remove duplicates first")


def decomposed_warning(documents: Sequence[Document]) -> str | None:
    """A warning when documents hold decomposed accents (NFD, as text copied from PDFs or macOS
    often does): terms are read composed (NFC), and a tokenizer without a Unicode normaliser
    (byte-level BPE, SentencePiece) never produces a composed term's token from decomposed text."""
    decomposed = [d.doc_id for d in documents if unicodedata.normalize("NFC", d.text) != d.text]
    if not decomposed:
        return None
    return (f"{len(decomposed)} of {len(documents)} documents hold decomposed accents (e.g. {decomposed[0]}); terms are "
            "read composed, so on RoBERTa- or XLM-R-style tokenizers a term never fires there: normalise the text to "
            "NFC first (unicodedata.normalize('NFC', text))")


def corpus_warnings(documents: Sequence[Document]) -> list[str]:
    """What every generator would otherwise take in silently: markup, repeated documents,
    decomposed accents."""
    return [w for w in (markup_warning(documents), duplicate_warning(documents), decomposed_warning(documents)) if w]


def words(text: str) -> list[str]:
    return WORD.findall(text)


def sentences(text: str, unbroken: Sequence[str] = ()) -> list[str]:
    """``text``'s sentences. ``unbroken``: terms that end in a dot ("Inc."), which end no sentence:
    split there, "Zentrix Inc. ships parts" lost its term's query and its definition."""
    parts = [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]
    dotted = tuple(t for t in unbroken if t.endswith("."))
    if not dotted:
        return parts
    ends_in_term = re.compile(rf"(?<![\w{_MARKS}-])(?:{spellings(dotted)})$", re.IGNORECASE)
    out: list[str] = []
    for part in parts:
        if out and ends_in_term.search(out[-1]):
            out[-1] += " " + part
        else:
            out.append(part)
    return out


def dotted_terms(groups: Sequence["TermGroup"]) -> tuple[str, ...]:
    """The spellings of ``groups`` that end in a dot (for :func:`sentences`)."""
    return tuple(sorted({t for g in groups for t in (g.key, *g.forms) if t.endswith(".")}))


def spellings(terms: tuple[str, ...]) -> str:
    # Spellings of one term: its key and its forms. IGNORECASE does not casefold, so the key of
    # "Spaltmaß" ("spaltmass") alone never matched the corpus's own spelling. Each in its
    # composed and decomposed Unicode form: "Müller" typed (NFC) and "Mu\u0308ller" pasted from
    # a PDF (NFD) are one spelling to a reader.
    forms = {unicodedata.normalize(nf, t) for t in terms for nf in ("NFC", "NFD")}
    return "|".join(re.escape(t) for t in sorted(forms, key=lambda t: (-len(t), t)))


def bounded(alternation: str) -> str:
    """``alternation`` (of :func:`spellings`) as a whole word: no letter, digit, mark or
    joiner before it, no letter, digit or mark after it, nor a joiner leading into a word."""
    return rf"(?<![\w{_MARKS}-])(?:{alternation})(?![\w{_MARKS}]|-\w)"


def term_pattern(*terms: str) -> re.Pattern:
    """Case-insensitive occurrences of any of ``terms`` (spellings of one term) as a whole
    word (joiners count as word)."""
    return re.compile(bounded(spellings(terms)), re.IGNORECASE)


def loose_term_pattern(*terms: str) -> re.Pattern:
    """:func:`term_pattern` plus the term's plural and the term joined into a compound
    ("quorvexes", "quorvex-based", "non-quorvex"); not a longer word it begins ("config" in
    "configuration")."""
    return re.compile(rf"(?<![^\W_]|[{_MARKS}])(?:{spellings(terms)})(?:e?s)?(?![^\W_]|[{_MARKS}])", re.IGNORECASE)


def key(term: str) -> str:
    """One key per term whatever its case or Unicode composition: ``Velotraxin`` and
    ``velotraxin`` are one term, and so are a composed and a decomposed ``Müller``."""
    return unicodedata.normalize("NFC", term.casefold())


@dataclass
class TermGroup:
    """One term of a terms file with its case variants, and where the corpus uses it."""

    key: str
    forms: list[str]  # as written in the terms file, in file order
    category: str
    doc_ids: list[str] = field(default_factory=list)  # documents using it, corpus order
    seen: dict[str, int] = field(default_factory=dict)  # surface form in the corpus -> count
    # Documents naming it in any form, its plural and compounds too ("Gatrocraptics",
    # "XR-7200-based"): what pseudo-labels go by, since such a document is about the term.
    named_in: list[str] = field(default_factory=list)

    @property
    def display(self) -> str:
        """The form the corpus uses most (ties: the terms file's first form)."""
        if not self.seen:
            return self.forms[0]
        rank = {form: -i for i, form in enumerate(self.forms)}  # earlier in the file ranks higher
        # a spelling outside the file ranks below all of the file's; among those, max keeps the corpus's first
        return max(self.seen.items(), key=lambda kv: (kv[1], rank.get(kv[0], -len(self.forms))))[0]

    @property
    def pattern(self) -> re.Pattern:
        return term_pattern(self.key, *self.forms)

    @property
    def loose_pattern(self) -> re.Pattern:
        """:func:`loose_term_pattern` of the term: its plural and compounds too."""
        return loose_term_pattern(self.key, *self.forms)


def group_terms(terms: dict[str, list[str]]) -> list[TermGroup]:
    """Terms of a terms file grouped by :func:`key`, in file order."""
    groups: dict[str, TermGroup] = {}
    for category, items in terms.items():
        for term in items:
            g = groups.setdefault(key(term), TermGroup(key(term), [], category))
            if term not in g.forms:
                g.forms.append(term)
    return list(groups.values())


def locate_terms(
    documents: Sequence[Document], terms: dict[str, list[str]], terms_path: str | Path | None = None
) -> list[TermGroup]:
    """Group the terms and find the documents using each; a term no document uses is an error.

    Every later step (dictionary entries, pseudo-queries, training) needs the term in the
    corpus, so an absent one (a typo, the wrong corpus) is refused here, naming it.
    """
    groups = regroup(group_terms(terms), documents)
    absent = [g.forms[0] for g in groups if not g.doc_ids]
    if absent:
        where = terms_path if terms_path is not None else "<terms>"
        inside = [t for t in absent if any(t.casefold() in d.text.casefold() for d in documents)]
        why = (f"; {', '.join(inside)} only inside longer words, and terms are matched as whole words (list the "
               "form the corpus uses; text without spaces between words, as Chinese or Japanese, is not "
               "supported)") if inside else ""
        raise DataError(
            where, None, None,
            f"{len(absent)} term(s) occur in no document of the corpus: {', '.join(absent)} "
            f"(check the spelling, or drop them from the terms file){why}",
        )
    return groups


def regroup(groups: Sequence[TermGroup], documents: Sequence[Document]) -> list[TermGroup]:
    """``groups`` located again in ``documents`` (the part of each the model reads); a term
    these texts no longer hold keeps its group, with no documents."""
    out = [dataclasses.replace(g, doc_ids=[], seen={}, named_in=[]) for g in groups]
    for g in out:
        pattern, loose = g.pattern, g.loose_pattern
        spelt = {key(f) for f in (g.key, *g.forms)}
        for d in documents:
            found = pattern.findall(d.text)
            if found:
                g.doc_ids.append(d.doc_id)
                for f in found:
                    g.seen[f] = g.seen.get(f, 0) + 1
            # The term joined into a compound ("pip-based") names it; a plural form only when it
            # is no English word of its own.
            if found or any(key(m.group()) in spelt or not _english(m.group()) for m in loose.finditer(d.text)):
                g.named_in.append(d.doc_id)
    return out


def _english(word: str) -> bool:
    """Whether a term's plural form is a word of general English ("pipes" for the term "pip",
    "codes" for "COD"): that names no term. wordfreq's Zipf 3 is once per million words, the
    bound under which mining calls a word jargon (``mining.RARE_JARGON_ZIPF``); "zentrofaxes" is 0."""
    from wordfreq import zipf_frequency

    return zipf_frequency(word.casefold(), "en") >= 3.0


def window(tokens: Sequence[str], center: int, size: int, start_offset: int) -> list[str]:
    """``size`` consecutive tokens that include ``tokens[center]``, starting ``start_offset``
    tokens before it where the sequence allows."""
    if len(tokens) <= size:
        return list(tokens)
    start = max(0, min(center - start_offset, len(tokens) - size))
    return list(tokens[start : start + size])


def doc_terms(groups: Sequence[TermGroup]) -> dict[str, set[str]]:
    """doc_id -> the keys of the domain terms it names, plurals and compounds included
    (``TermGroup.named_in``; documents naming none are absent). A document naming a term only
    as "Gatrocraptics" was labelled unrelated to every query about it (capped at 0)."""
    out: dict[str, set[str]] = {}
    for g in groups:
        for d in g.named_in:
            out.setdefault(d, set()).add(g.key)
    return out
