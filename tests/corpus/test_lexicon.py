"""The dictionary pairs on a hand-made dictionary of a few lines (the real one is covered in
tests/training/test_general.py): which headwords, senses, synonyms and descriptions are kept."""

from __future__ import annotations

import gzip
import json

import pytest

from sparse_adapt.corpus import lexicon
from sparse_adapt.corpus.lexicon import LexiconPair, lexicon_pairs

GLOSSES = [
    "psoriasis\tchronic skin disease with dry red patches | another reading of psoriasis here | a third sense unused",
    "kill switch\temergency off button",  # exactly MIN_QUERY_WORDS words: kept
    "fool\ta fool",  # nothing left once the headword goes
    "Paris\tcapital and largest city of France",  # a proper name
    "rarely\tseldom seen in the wild",  # Zipf exactly MIN_ZIPF: kept
    "zzzword\tsome words here too",  # rarer than MIN_ZIPF
    "walk\tuse the feet walking slowly",  # the headword's inflections go with it
    "no tab on this line",
]
SYNONYMS = {"psoriasis": ["psoriasis", "scaly_skin", "skin plaque", "plaques", "third one"], "walk": ["walk"]}
ZIPF = {"rarely": lexicon.MIN_ZIPF, "zzzword": 1.0}


@pytest.fixture
def dictionary(tmp_path, monkeypatch):
    with gzip.open(tmp_path / "glosses.txt.gz", "wt", encoding="utf-8") as f:
        f.write("\n".join(GLOSSES) + "\n")
    with gzip.open(tmp_path / "synonyms.json.gz", "wt", encoding="utf-8") as f:
        json.dump(SYNONYMS, f)
    monkeypatch.setattr(lexicon, "data_file", lambda name: tmp_path / name)
    monkeypatch.setattr(lexicon, "general_zipf", lambda word: ZIPF.get(word, 5.0))
    lexicon._synonyms.cache_clear()
    yield
    lexicon._synonyms.cache_clear()  # the real dictionary's synonyms for later tests


def test_lexicon_pairs_of_a_hand_made_dictionary(dictionary):
    psoriasis = "psoriasis, skin plaque, plaques"  # itself and an underscored synonym skipped, then 2 at most
    assert sorted(lexicon_pairs(seed=0), key=lambda p: p.query) == [
        LexiconPair("another reading of here", psoriasis),  # the second sense; the third is a rare reading
        LexiconPair("chronic skin disease with dry red patches", psoriasis),
        LexiconPair("emergency off button", "kill switch"),
        LexiconPair("seldom seen in the wild", "rarely"),
        LexiconPair("use the feet slowly", "walk"),
    ]
    assert len(lexicon_pairs(seed=0, min_zipf=0.0)) == 6  # zzzword too
    assert lexicon_pairs(seed=5, limit=2) == lexicon_pairs(seed=5)[:2]


def test_only_the_headword_itself_and_its_inflections_leave_a_description(tmp_path, monkeypatch):
    """"sidewalk" holds "walk" but is another word; "Walking" opens a sentence. A three-word
    headword is no headword (one or two words)."""
    glosses = ["walk\tWalking slowly along the sidewalk", "walk in closet\ta small room for clothes"]
    with gzip.open(tmp_path / "glosses.txt.gz", "wt", encoding="utf-8") as f:
        f.write("\n".join(glosses) + "\n")
    with gzip.open(tmp_path / "synonyms.json.gz", "wt", encoding="utf-8") as f:
        json.dump({}, f)
    monkeypatch.setattr(lexicon, "data_file", lambda name: tmp_path / name)
    monkeypatch.setattr(lexicon, "general_zipf", lambda word: 5.0)
    lexicon._synonyms.cache_clear()
    try:
        assert lexicon_pairs(seed=0) == [LexiconPair("slowly along the sidewalk", "walk")]
    finally:
        lexicon._synonyms.cache_clear()


def test_the_min_zipf_comment_converts_the_bound_to_words_per_billion():
    # Zipf is log10 of a word's uses per billion words: the comment's count must be that of MIN_ZIPF.
    import inspect
    import re

    from sparse_adapt.corpus import lexicon

    comment = " ".join(" ".join(line.strip().lstrip("#") for line in inspect.getsource(lexicon).splitlines()
                                if line.lstrip().startswith("#")).split())
    bound, per_billion = re.search(r"below ~(\d+(?:\.\d+)?) \(about (\d+) per billion words\)", comment).groups()
    assert float(bound) == lexicon.MIN_ZIPF
    assert int(per_billion) == pytest.approx(10 ** lexicon.MIN_ZIPF, rel=0.1)
