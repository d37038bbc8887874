"""bench.overlap: the share of a query's content words its best documents use."""

from __future__ import annotations

from bench.overlap import best_documents, content_stems, overlap


def test_content_stems_drop_function_words_and_cut_to_five_letters():
    # "the", "of", "about" are function words (Zipf >= 6); "claims" -> "claim", "floods" -> "flood"
    assert content_stems("The claims of the floods about pipes") == {"claim", "flood", "pipes"}


def test_overlap_is_the_hand_worked_share():
    # query stems {claim, flood, burst, pipes}; the documents use claim and flood: 2 of 4
    assert overlap("claims for flooding and burst pipes", ["The flood claim was paid.", "Nothing here"]) == 0.5
    assert overlap("burst pipes", ["The flood claim was paid."]) == 0.0
    assert overlap("the of and", ["anything"]) == 0.0  # no content word at all


def test_best_documents_are_grade_two_else_grade_one():
    assert best_documents({"a": 1, "b": 2, "c": 0}) == ["b"]
    assert best_documents({"a": 1, "c": 0}) == ["a"]
    assert best_documents({"c": 0}) == []
