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


def test_every_column_of_a_row_averages_the_same_queries():
    """The teacher's column averaged 52 dev queries while the models' averaged the 37 of the
    domains byoc.json has rows for, under one count of 52."""
    from bench.overlap import BASES, table

    def rec(split, o, dense, value=None):
        r = {"split": split, "overlap": o, "dense": dense}
        if value is not None:
            r.update({b: {"base": value, "corpus": value, "hand": value} for b in BASES})
        return r

    queries = [rec("dev", 0.1, 0.8, 0.5), rec("dev", 0.2, 0.6, 0.7), rec("dev", 0.1, 0.0), rec("test", 0.5, 1.0, 0.4)]
    lines = table(queries, 0.34)
    dev_low = next(line for line in lines if line.startswith("| dev | < 0.34 |"))
    assert dev_low == "| dev | < 0.34 | 2 | 0.700 | " + " | ".join(["0.600"] * 6) + " |"  # not (0.8+0.6+0)/3
    assert "| dev | >= 0.34 | 0 | - |" in "\n".join(lines)
    assert lines[-1].endswith("1 of 4 queries have no row of every model (their domains were not run) and are in "
                              "no column.")
