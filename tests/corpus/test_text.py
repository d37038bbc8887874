"""Term occurrences in corpus text: one key per term, the spelling shown, whole-word presence."""

from __future__ import annotations

import pytest

from sparse_adapt.corpus.text import group_terms, locate_terms
from sparse_adapt.data import DataError, Document


def test_a_sharp_s_and_its_capitals_are_one_term():
    # "SPALTMASS" is how capitals write "Spaltmaß": casefolding (not lower()) makes them one key
    [group] = group_terms({"jargon": ["Spaltmaß", "SPALTMASS"]})
    assert (group.key, group.forms) == ("spaltmass", ["Spaltmaß", "SPALTMASS"])


def test_the_term_is_shown_in_the_spelling_the_corpus_uses_most():
    docs = [Document("a", "Zentrofax pumps hum."), Document("b", "A Zentrofax seal leaks."),
            Document("c", "The zentrofax valve holds.")]
    [group] = locate_terms(docs, {"jargon": ["zentrofax"]})
    assert group.seen == {"Zentrofax": 2, "zentrofax": 1} and group.display == "Zentrofax"


def test_a_tie_between_spellings_goes_to_the_terms_files_own():
    # a heading's "ZENTROFAX" comes first in the corpus, but only "Zentrofax" is in the terms file
    docs = [Document("a", "ZENTROFAX SAFETY: wear gloves."), Document("b", "A Zentrofax seal leaks.")]
    [group] = locate_terms(docs, {"jargon": ["Zentrofax"]})
    assert group.display == "Zentrofax"


def test_a_term_found_only_in_its_plural_or_compounds_is_refused():
    """Every later step searches the whole word: a term named only as "Zentrofaxes" or
    "Zentrofax-based" has no sentence, query or training example of its own."""
    docs = [Document("a", "Two Zentrofaxes hum."), Document("b", "A Zentrofax-based seal leaks.")]
    with pytest.raises(DataError, match="1 term.s. occur in no document of the corpus: Zentrofax"):
        locate_terms(docs, {"jargon": ["Zentrofax"]})


def test_a_tie_between_two_spellings_of_the_file_goes_to_its_first():
    # the corpus uses "zentrofax" first; the tie still goes to the file's first form
    docs = [Document("a", "The zentrofax valve holds."), Document("b", "A Zentrofax seal leaks.")]
    [group] = locate_terms(docs, {"jargon": ["Zentrofax", "zentrofax"]})
    assert group.seen == {"zentrofax": 1, "Zentrofax": 1} and group.display == "Zentrofax"


def test_a_term_named_twice_in_the_terms_file_is_one_spelling():
    # listed under two categories: one form, and a corpus tie still goes to the file's first spelling
    [group] = group_terms({"jargon": ["Zentrofax", "zentrofax"], "codes": ["Zentrofax"]})
    assert group.forms == ["Zentrofax", "zentrofax"]
    docs = [Document("a", "The zentrofax valve holds."), Document("b", "A Zentrofax seal leaks.")]
    [group] = locate_terms(docs, {"jargon": ["Zentrofax", "zentrofax"], "codes": ["Zentrofax"]})
    assert group.display == "Zentrofax"


def test_a_term_inside_a_longer_word_in_another_case_is_said_so():
    # the hint compares casefolded: "zentro" is inside "Zentrofax" though its case differs
    docs = [Document("a", "The Zentrofax pump hums.")]
    with pytest.raises(DataError, match="zentro only inside longer words"):
        locate_terms(docs, {"jargon": ["zentro"]})


def test_sentences_drop_the_empty_tail_of_trailing_white_space():
    from sparse_adapt.corpus.text import sentences

    assert sentences("Pumps hum. Seals leak.\n") == ["Pumps hum.", "Seals leak."]
    assert sentences("Orders from Zentrix Inc.\n", ("Inc.",)) == ["Orders from Zentrix Inc."]


def test_a_dotted_term_ending_inside_a_longer_word_still_ends_the_sentence():
    from sparse_adapt.corpus.text import sentences

    # "zinc." ends in "inc." but is no use of the term "Inc.": the sentence ends there
    assert sentences("We buy zinc. Zentrix Inc. ships it.", ("Inc.",)) == ["We buy zinc.", "Zentrix Inc. ships it."]


def test_a_longer_word_ending_in_the_term_does_not_name_it():
    # plurals and compounds name the term; "Megazentrofax" (the term inside a longer word) does not
    from sparse_adapt.corpus.text import doc_terms

    docs = [Document("a", "A Zentrofax pump hums."), Document("b", "The Megazentrofax hums.")]
    assert doc_terms(locate_terms(docs, {"jargon": ["Zentrofax"]})) == {"a": {"zentrofax"}}


def test_the_module_docstrings_words_and_non_occurrences_hold():
    # The docstring defines a word and a term's occurrence by examples: each example word is one
    # word to text.words, and each "does not occur inside" pair is no match of the term pattern.
    import re

    from sparse_adapt.corpus import text

    doc = text.__doc__
    shapes = re.findall(r"``([^`]+)``", doc[:doc.index("the shapes domain terms take")])
    assert len(shapes) >= 3
    for word in shapes:
        assert text.words(f"see {word} here") == ["see", word, "here"], word
    pairs = re.findall(r"``([^`]+)`` does not occur inside ``([^`]+)``", doc)
    assert pairs
    for term, longer in pairs:
        assert text.term_pattern(term).search(f"see {longer} here") is None, (term, longer)
