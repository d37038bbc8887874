"""Pseudo-queries (explicit / semantic / control crops), hard negatives from the base, teacher labels."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from sparse_adapt.corpus.pseudo import (
    MAX_WORDS, SIBLING_FLOOR, PseudoQuery, generate_queries, hard_negatives, label, term_consistent,
)
from sparse_adapt.corpus.text import locate_terms
from sparse_adapt.data import Document

DOCS = [
    Document("d1", "The Zentrofax pump moves coolant through the reactor loop every hour of the day."),
    Document("d2", "Check the Zentrofax seals monthly because worn seals leak coolant into the concrete pit."),
    Document("d3", "Operators replaced a zentrofax rated at forty bar after the spring inspection of the loop."),
    Document("d4", "The court trial was delayed until Monday while the jury heard two more witnesses."),
    Document("d5", "Fresh mint leaves steeped in hot water make a calming herbal tea before bed."),
]
TERMS = {"jargon": ["Zentrofax", "zentrofax"]}


def _queries(seed=0, **kw):
    return generate_queries(DOCS, locate_terms(DOCS, TERMS), seed=seed, **kw)


def test_kinds_per_document_and_crop_lengths():
    qs = _queries()
    kinds = {(q.doc_id, q.kind) for q in qs}
    assert {("d1", "explicit"), ("d1", "semantic"), ("d4", "control"), ("d5", "control")} <= kinds
    assert not any(q.kind == "control" and q.doc_id in ("d1", "d2", "d3") for q in qs)
    for q in qs:
        assert 4 <= len(q.text.split()) <= MAX_WORDS
        assert q.qid == f"{q.doc_id}-{q.kind}"
        source = next(d.text for d in DOCS if d.doc_id == q.doc_id)
        assert all(w in source for w in q.text.split())  # a crop of the document's own words


def test_explicit_queries_name_the_term_and_semantic_ones_never_do():
    qs = _queries()
    for q in qs:
        named = "zentrofax" in q.text.casefold()
        assert named == (q.kind == "explicit"), q
    # the article before a removed term goes with it ("the Zentrofax pump" -> "pump")
    assert not any(q.text.casefold().split()[-1:] == ["the"] for q in qs if q.kind == "semantic")


def test_crops_are_seeded_and_deduplicated():
    assert _queries(seed=3) == _queries(seed=3)
    assert [q.text for q in _queries(seed=3)] != [q.text for q in _queries(seed=4)]  # the seed picks the crops
    texts = [" ".join(q.text.casefold().split()) for q in _queries()]
    assert len(texts) == len(set(texts))
    capped = _queries(max_queries=3)
    assert len(capped) == 3 and all(q in _queries() for q in capped)
    assert capped == [q for q in _queries() if q in capped]  # the cap keeps corpus order
    # one query over the cap is one too many: the cap is "at most", not "one past it"
    every = _queries()
    assert len(_queries(max_queries=len(every) - 1)) == len(every) - 1


def test_two_documents_giving_the_same_crop_give_one_query():
    # No terms; sentences of 5 words are cropped whole (crops are 5-9 words), so both documents' control
    # crops are known: the same words but for case and punctuation. The check above cannot
    # fail on DOCS, whose crops never coincide.
    docs = [Document("x1", "Fresh mint tea calms nerves."), Document("x2", "fresh mint tea calms nerves!")]
    assert [(q.doc_id, q.text) for q in generate_queries(docs, [])] == \
        [("x1", "Fresh mint tea calms nerves")]


def test_hard_negatives_exclude_the_source_and_follow_the_base_ranking(tiny_bert):
    qs = _queries()
    negs = hard_negatives(tiny_bert, DOCS, qs, k=3)
    D = tiny_bert.encode([d.text for d in DOCS], "document")
    for q in qs:
        assert len(negs[q.qid]) == 3 and q.doc_id not in negs[q.qid]
        s = (tiny_bert.encode([q.text], "query") @ D.T).toarray()[0]
        scores = [s[[d.doc_id for d in DOCS].index(n)] for n in negs[q.qid]]
        assert scores == sorted(scores, reverse=True)
        others = [s[i] for i, d in enumerate(DOCS) if d.doc_id != q.doc_id and d.doc_id not in negs[q.qid]]
        assert all(o <= min(scores) for o in others)


def test_hard_negatives_of_equal_score_come_in_corpus_order(tiny_bert):
    # A decoder bias of -100 leaves every vector empty: every document scores 0 for every query,
    # so the k = 3 negatives are the first three documents but the source, in corpus order.
    import torch

    with torch.no_grad():
        tiny_bert.mlm.get_output_embeddings().bias -= 100.0
    negs = hard_negatives(tiny_bert, DOCS, [PseudoQuery("x", "coolant pump", "explicit", "d2")], k=3)
    assert negs == {"x": ["d1", "d3", "d4"]}


def test_siblings_add_the_sources_term_documents_the_hard_negatives_missed(tiny_bert):
    groups = locate_terms(DOCS, TERMS)
    qs = [PseudoQuery("x", "herbal tea jury", "semantic", "d1"), PseudoQuery("y", "mint tea", "control", "d5")]
    base = hard_negatives(tiny_bert, DOCS, qs, k=1)
    more = hard_negatives(tiny_bert, DOCS, qs, k=1, groups=groups, siblings=2)
    # the first k stay the base's; then only documents sharing d1's term, none twice
    assert more["x"][:1] == base["x"] and set(more["x"]) | {"d1"} >= {"d2", "d3"}
    assert len(more["x"]) == len(set(more["x"])) and set(more["x"][1:]) <= {"d2", "d3"}
    assert more["y"] == base["y"]  # a control query's source uses no term: no siblings
    assert hard_negatives(tiny_bert, DOCS, qs, k=1, groups=groups, siblings=0) == base


def test_term_consistent_labels_follow_the_domain_line():
    terms_of = {"d1": {"zentrofax"}, "d2": {"zentrofax"}, "d6": {"other"}}
    # a term query: its term's document floored, a term-less one capped, another term's kept
    assert term_consistent([10.0, -8.0, 6.0, 1.5], ["d1", "d2", "d4", "d6"], terms_of) == [10.0, SIBLING_FLOOR, 0.0, 1.5]
    assert term_consistent([10.0, 7.0, -3.0], ["d1", "d2", "d4"], terms_of) == [10.0, 7.0, -3.0]  # already consistent
    # a control query: documents naming any term capped at 0, the others kept
    assert term_consistent([10.0, 4.0, 3.0, -8.0], ["d4", "d1", "d5", "d6"], terms_of) == [10.0, 0.0, 3.0, -8.0]


@dataclass
class FixedTeacher:
    """Scores a document by a table; the real teachers are tested in test_teacher.py."""

    table: dict
    name: str = "fixed"
    min_spread: float = 0.1

    def score(self, query, documents):
        return [self.table[query].get(t[:6], 0.0) for t in documents]


def test_label_maps_scores_sorts_candidates_and_drops_what_the_teacher_cannot_use():
    qs = [PseudoQuery("a", "qa", "explicit", "d1"), PseudoQuery("b", "qb", "semantic", "d2"),
          PseudoQuery("c", "qc", "control", "d4")]
    negs = {"a": ["d4", "d5"], "b": ["d4", "d5"], "c": ["d1", "d5"]}
    teacher = FixedTeacher({
        "qa": {"The Ze": 0.9, "The co": 0.1, "Fresh ": 0.5},   # separable, source best
        "qb": {"Check ": 0.50, "The co": 0.52, "Fresh ": 0.49},  # spread 0.03 < 0.1: cannot separate
        "qc": {"The co": 0.2, "The Ze": 0.8, "Fresh ": 0.3},   # the source scores at the bottom
    })
    records, stats = label(qs, negs, DOCS, teacher)
    assert [r["qid"] for r in records] == ["a"]
    r = records[0]
    assert r["doc_ids"] == ["d1", "d5", "d4"] and r["teacher_scores"] == [10.0, 1.0, -8.0]
    assert r["doc_texts"][0] == DOCS[0].text and r["kind"] == "explicit" and r["source_doc"] == "d1"
    assert stats.dropped_unseparated == 1 and stats.dropped_source_negative == 1
    assert stats.generated == {"explicit": 1, "semantic": 1, "control": 1} and stats.kept == {"explicit": 1}
    assert stats.term_adjusted == 0


def test_label_keeps_a_spread_of_exactly_min_spread_and_drops_a_source_mapped_to_zero():
    # Integer raw scores, so the map -8 + 18 * (r - lo) / (hi - lo) is exact.
    # qa: spread 1 - 0 = 1 = min_spread: "below min_spread" is what cannot be separated; kept.
    # qb: source -8 + 18 * (4 - 0) / (9 - 0) = 0: not scored positive, dropped.
    qs = [PseudoQuery("a", "qa", "explicit", "d1"), PseudoQuery("b", "qb", "explicit", "d2")]
    negs = {"a": ["d4", "d5"], "b": ["d4", "d5"]}
    teacher = FixedTeacher({"qa": {"The Ze": 1.0, "The co": 0.0, "Fresh ": 0.0},
                            "qb": {"Check ": 4.0, "The co": 0.0, "Fresh ": 9.0}}, min_spread=1.0)
    records, stats = label(qs, negs, DOCS, teacher)
    assert [(r["qid"], r["teacher_scores"][0]) for r in records] == [("a", 10.0)]
    assert (stats.dropped_unseparated, stats.dropped_source_negative) == (0, 1)


def test_label_with_groups_makes_scores_term_consistent_and_resorts():
    qs = [PseudoQuery("a", "qa", "semantic", "d1")]
    negs = {"a": ["d4", "d2"]}
    teacher = FixedTeacher({"qa": {"The Ze": 0.9, "The co": 0.5, "Check ": 0.1}})
    plain, _ = label(qs, negs, DOCS, teacher)
    assert plain[0]["doc_ids"] == ["d1", "d4", "d2"] and plain[0]["teacher_scores"] == [10.0, 1.0, -8.0]  # -8 + 18 * 0.4 / 0.8
    records, stats = label(qs, negs, DOCS, teacher, groups=locate_terms(DOCS, TERMS))
    # d2 names Zentrofax like the source: floored at +2; d4 names no term: capped at 0
    assert records[0]["doc_ids"] == ["d1", "d2", "d4"] and records[0]["teacher_scores"] == [10.0, SIBLING_FLOOR, 0.0]
    assert stats.term_adjusted == 2


def test_make_train_draws_only_on_what_the_model_reads_of_a_long_document(tiny_bert):
    from sparse_adapt.corpus.pseudo import make_train
    from tests.corpus.test_glosses import OverlapTeacher

    limit = tiny_bert.max_length("document")
    tail = "Relief valves vent the Zentrofax loop overnight."
    head = " ".join(f"Gantry cranes hoist steel containers onto barges at berth {i}." for i in range(12))
    long = Document("long", f"{head} {tail}")
    assert len(tiny_bert.tokenizer(head)["input_ids"]) > limit  # the tail lies past what the model reads
    docs = DOCS + [long]
    records, _ = make_train(docs, locate_terms(docs, TERMS), tiny_bert, OverlapTeacher(), seed=0, negatives=3, siblings=0)
    read = tiny_bert.tokenizer.decode(tiny_bert.tokenizer(long.text, truncation=True, max_length=limit,
                                                          add_special_tokens=False)["input_ids"])
    from_long = [r for r in records if r["source_doc"] == "long"]
    texts_of = {d.doc_id: d.text for d in docs}
    assert from_long, "the long document gave no pseudo-query: the test could not look at its crops"
    for r in from_long:
        assert all(w.casefold() in read.casefold() for w in r["query"].split()), r["query"]
        assert "relief" not in r["query"].casefold() and r["kind"] == "control"  # the term is only in the tail
        # Nor is it a Zentrofax document for the labels: candidates naming the term are capped at 0
        # against a source without it (floored at +2 as its siblings when the tail counted).
        named = [s for d, s in zip(r["doc_ids"], r["teacher_scores"]) if d != "long" and "zentrofax" in texts_of[d].casefold()]
        assert named and max(named) <= 0.0, r
    texts = {d: t for r in records for d, t in zip(r["doc_ids"], r["doc_texts"])}
    if "long" in texts:  # as a candidate, the long document's text is what the model reads of it
        assert texts["long"] == long.text[: len(texts["long"])] and "Relief" not in texts["long"]


def test_a_short_term_sentence_is_not_drawn_over_a_long_one():
    """"Zorblatt XR-7200." opening each document was drawn about half the time, and its two words
    made no query: the document lost its explicit query (four documents gave none at all)."""
    docs = [Document(f"d{i}", f"Zorblatt XR-7200. The Zorblatt valve {i} regulates coolant pressure in the main loop.")
            for i in range(4)]
    groups = locate_terms(docs, {"jargon": ["Zorblatt"]})
    for seed in range(5):
        queries = generate_queries(docs, groups, seed=seed)
        assert sorted(q.doc_id for q in queries if q.kind == "explicit") == ["d0", "d1", "d2", "d3"]


def test_a_document_naming_a_term_only_in_a_compound_or_plural_gives_no_control_query():
    """"quorvex-based regulation never stops working" was a control query, and the labels then
    capped quorvex's own documents at 0 for it."""
    docs = [Document("d1", "The quorvex valve regulates coolant pressure in the main loop."),
            Document("d2", "Operators service the quorvex valve after every spring inspection."),
            Document("d3", "Older quorvexes and quorvex-based regulation never stop working in winter."),
            Document("d4", "The court trial was delayed until Monday while the jury heard witnesses."),
            Document("d5", "The configuration of the loop was reviewed by the night shift today.")]
    groups = locate_terms(docs, {"jargon": ["quorvex"]})
    for seed in range(5):
        kinds = {(q.doc_id, q.kind) for q in generate_queries(docs, groups, seed=seed)}
        assert not any(d == "d3" for d, _ in kinds)
        assert ("d4", "control") in kinds and ("d5", "control") in kinds
    # a term that begins a longer word ("config" in "configuration") leaves that document a control
    groups = locate_terms([*docs, Document("d6", "Edit the config file of the quorvex loop.")], {"jargon": ["config"]})
    assert ("d5", "control") in {(q.doc_id, q.kind) for q in generate_queries(docs, groups, seed=0)}


@pytest.mark.parametrize("text, semantic", [
    ("Night technicians calibrate the Zentrofax valves weekly.", "Night technicians calibrate valves weekly"),
    ("Engineers still consult The Zentrofax Manual daily.", "Engineers still consult Manual daily"),  # capitalised
])
def test_a_semantic_query_drops_the_article_before_the_term_inside_the_crop(text, semantic):
    # 7 words; without "Zentrofax" and its "the", 5 are left: MIN_WORDS, so every crop of 5-9
    # words takes them all and the query is known whatever the seed. A kept "the" ("calibrate
    # the valves") is the grammar of a removed word, not the text's. The explicit-vs-semantic
    # test above sees the article only when it ends the crop.
    docs = [Document("v", text)]
    for seed in range(3):
        queries = generate_queries(docs, locate_terms(docs, TERMS), seed=seed)
        assert [q.text for q in queries if q.kind == "semantic"] == [semantic]


def test_a_semantic_query_drops_the_terms_plurals_and_compounds_too():
    """"seal outlasts older flumatic-based designs" and "flumatics were replaced on pump" were
    semantic queries: the term named in all but spelling."""
    docs = [Document("l1", "The flumatic seal outlasts older flumatic-based designs in every test."),
            Document("l2", "Two flumatics were replaced on the flumatic pump during the last outage."),
            Document("l3", "The cafeteria serves lunch from noon until two for all staff.")]
    groups = locate_terms(docs, {"jargon": ["flumatic"]})
    semantic = [q for seed in range(5) for q in generate_queries(docs, groups, seed=seed) if q.kind == "semantic"]
    assert {q.doc_id for q in semantic} == {"l1", "l2"}
    assert not any("flumatic" in q.text.casefold() for q in semantic), semantic


def test_a_term_starting_with_a_dot_is_found_in_the_crops():
    """".NET" was stripped to "NET" before the term test: every query of its documents was a control."""
    docs = [Document("a", "We port the billing service to .NET before the spring release of the portal."),
            Document("b", "The .NET runtime needs a restart after every configuration change on the servers."),
            Document("c", "The cafeteria serves lunch at noon in the main hall for every shift worker.")]
    queries = generate_queries(docs, locate_terms(docs, {"jargon": [".NET"]}), seed=0)
    kinds = {(q.doc_id, q.kind) for q in queries}
    assert {("a", "explicit"), ("a", "semantic"), ("b", "explicit"), ("c", "control")} <= kinds
    assert all(".NET" in q.text for q in queries if q.kind == "explicit")
    assert not any("NET" in q.text for q in queries if q.kind != "explicit")


def test_a_term_ending_in_a_dot_is_found_in_the_crops():
    """"Inc." was stripped to "Inc", and its sentence cut after it: the documents naming the term
    got control queries (teaching that they are not relevant to it) and no explicit one."""
    docs = [Document("a", "We bought the seals from Zentrix Inc. before the spring release of the portal."),
            Document("b", "The supplier Zentrix Inc. ships every configuration change to the servers in crates."),
            Document("c", "The cafeteria serves lunch at noon in the main hall for every shift worker.")]
    queries = [q for seed in range(4) for q in generate_queries(docs, locate_terms(docs, {"jargon": ["Inc."]}), seed=seed)]
    assert {q.doc_id for q in queries if q.kind == "control"} == {"c"}
    assert {q.doc_id for q in queries if q.kind == "explicit"} == {"a", "b"}
    assert all("Inc." in q.text for q in queries if q.kind == "explicit")
    assert not any("Inc" in q.text for q in queries if q.kind != "explicit")


def test_make_train_says_which_terms_occur_only_past_what_the_model_reads(tiny_bert):
    from sparse_adapt.corpus.pseudo import make_train
    from sparse_adapt.progress import Hooks
    from tests.corpus.test_glosses import OverlapTeacher

    head = " ".join(f"Gantry cranes hoist steel containers onto barges at berth {i}." for i in range(12))
    long = Document("long", f"{head} Relief valves vent the Quorbel loop overnight.")
    docs = DOCS + [long]
    said: list[str] = []
    make_train(docs, locate_terms(docs, {**TERMS, "codes": ["Quorbel"]}), tiny_bert, OverlapTeacher(), seed=0,
               negatives=3, siblings=0, hooks=Hooks(message=said.append))
    assert [m for m in said if "only past" in m] == [
        f"warning: 1 term (Quorbel) occurs only past the first {tiny_bert.max_length('document')} pieces of their "
        "documents, which the model reads: no query names it; split the documents into passages"]


def test_a_document_naming_the_term_only_in_its_plural_is_labelled_as_naming_it():
    """A plural ("Zentrofaxes") escapes the whole-word pattern: that document was capped at 0,
    unrelated, for every query about the term, and counted as no sibling."""
    from sparse_adapt.corpus.text import doc_terms

    docs = [*DOCS, Document("d6", "Both Zentrofaxes were flushed after the coolant leak."),
            Document("d7", "A zentrofax-based loop needs fewer valves.")]
    groups = locate_terms(docs, TERMS)
    assert groups[0].doc_ids == ["d1", "d2", "d3"]  # the whole-word uses, as every other step reads them
    terms_of = doc_terms(groups)
    assert terms_of["d6"] == terms_of["d7"] == {"zentrofax"} and "d4" not in terms_of
    assert term_consistent([10.0, -5.0, -6.0, 3.0], ["d1", "d6", "d7", "d4"], terms_of) == [10.0, SIBLING_FLOOR, SIBLING_FLOOR, 0.0]


def test_an_english_word_that_looks_like_a_terms_plural_does_not_name_it():
    """ "pipes" is no plural of the term "pip": the document was raised to a positive sibling."""
    from sparse_adapt.corpus.text import doc_terms

    docs = [Document("a", "Install the pip package manager first."), Document("b", "Check the pipes for leaks."),
            Document("c", "Both pips were flagged by the linter."), Document("d", "A pip-based install needs network.")]
    groups = locate_terms(docs, {"tools": ["pip"]})
    assert sorted(doc_terms(groups)) == ["a", "c", "d"]  # "pips" (Zipf 2.9) is rare enough, "pipes" (3.7) is not
    assert term_consistent([9.0, -5.0], ["a", "b"], doc_terms(groups)) == [9.0, -5.0]


def test_a_crop_window_near_the_end_of_a_sentence_still_holds_size_words():
    from sparse_adapt.corpus.text import window

    words = list("abcdefgh")
    assert window(words, center=7, size=4, start_offset=1) == list("efgh")  # not "gh": it slides back
    assert window(words, center=3, size=4, start_offset=1) == list("cdef")
    assert window(words[:3], center=2, size=4, start_offset=1) == list("abc")


def test_a_crop_trims_function_words_from_both_of_its_edges():
    # Sentences of 5 words are cropped whole (crops are 5-9 words): the crop is known; only its
    # edges' function words ("The", "for") go.
    docs = [Document("x1", "The herbal tea calms nerves."), Document("x2", "Crews weld steel girders for.")]
    assert [q.text for q in generate_queries(docs, [])] == ["herbal tea calms nerves", "Crews weld steel girders"]


def test_a_term_ending_a_sentence_keeps_no_dot_in_its_explicit_query():
    # "Zentrofax." is the term and the sentence's full stop; only a term spelled with its dot ("Inc.") keeps it.
    docs = [Document("e", "Night technicians in the east hall calibrate the Zentrofax.")]
    for seed in range(3):
        queries = generate_queries(docs, locate_terms(docs, TERMS), seed=seed)
        [explicit] = [q.text for q in queries if q.kind == "explicit"]
        assert explicit.endswith("Zentrofax") and "." not in explicit, explicit


def test_every_explicit_crop_holds_its_term_whatever_the_seed():
    # One occurrence in the middle of a long sentence (crops of two documents may coincide: one query):
    # a window that slid one word too far left it out.
    docs = [Document(f"m{i}", f"Operators on the night shift of plant {i} inspected every Zentrofax gasket "
                              "with bright lamps before the long weekend began quietly.") for i in range(4)]
    groups = locate_terms(docs, TERMS)
    for seed in range(10):
        explicit = [q for q in generate_queries(docs, groups, seed=seed) if q.kind == "explicit"]
        assert explicit and all("Zentrofax" in q.text.split() for q in explicit), explicit


def test_a_semantic_crop_is_taken_where_the_term_was():
    # 16 words are left once "the Zentrofax" goes; the crop (5-9 words) always holds the word
    # right after the removed term, not the sentence's opening words.
    docs = [Document("s", "Operators on the night shift in the east hall of the plant finally replaced "
                          "the Zentrofax gaskets yesterday.")]
    for seed in range(5):
        queries = generate_queries(docs, locate_terms(docs, TERMS), seed=seed)
        [semantic] = [q.text for q in queries if q.kind == "semantic"]
        assert "gaskets" in semantic.split(), semantic


def test_a_four_word_sentence_is_long_enough_to_be_drawn():
    # MIN_QUERY_WORDS is 4: such a sentence is a query like any longer one, drawn about half the time.
    docs = [Document("t", "Mint tea calms nerves. Hot water steeps the dried leaves for five long minutes.")]
    texts = {q.text for seed in range(10) for q in generate_queries(docs, [], seed=seed)}
    assert "Mint tea calms nerves" in texts and len(texts) > 1


def test_label_keeps_tied_candidates_in_list_order_source_first():
    qs = [PseudoQuery("a", "qa", "explicit", "d1")]
    teacher = FixedTeacher({"qa": {"The Ze": 0.9, "The co": 0.9, "Fresh ": 0.1}})  # d1 and d4 tie at the top
    records, _ = label(qs, {"a": ["d4", "d5"]}, DOCS, teacher)
    assert records[0]["doc_ids"] == ["d1", "d4", "d5"] and records[0]["teacher_scores"] == [10.0, 10.0, -8.0]


def test_make_train_refuses_when_the_teacher_separates_only_one_list(tiny_bert):
    from sparse_adapt.corpus.pseudo import make_train
    from sparse_adapt.errors import SparseAdaptError

    class OneListTeacher:
        """Separates the first query it sees, no other: one record, none left to hold out."""

        name, min_spread = "one", 0.5

        def __init__(self):
            self.first = None

        def score(self, query, documents):
            self.first = self.first or query
            return [1.0] + [0.0] * (len(documents) - 1) if query == self.first else [0.0] * len(documents)

    with pytest.raises(SparseAdaptError, match="could separate 1 of the"):
        make_train(DOCS, locate_terms(DOCS, TERMS), tiny_bert, OneListTeacher(), negatives=2, siblings=0)


def test_an_ellipsis_before_a_word_is_stripped_like_other_punctuation():
    # Only a dot right before a letter or digit opens a name (".NET"); "...girders" is the word "girders".
    docs = [Document("x", "Crews weld steel ...girders daily.")]
    assert [q.text for q in generate_queries(docs, [])] == ["Crews weld steel girders daily"]


def test_a_document_with_too_few_words_for_a_query_gives_none_and_stops_nothing():
    # Empty, punctuation only, one short sentence, only function words: no query, and no error
    # for the document after them.
    docs = [Document("e", ""), Document("p", "..."), Document("s", "Pump leaks."),
            Document("f", "It is what it is and that is all."), Document("n", "Crews weld steel girders nightly.")]
    assert [(q.doc_id, q.text) for q in generate_queries(docs, [])] == [("n", "Crews weld steel girders nightly")]


def test_a_full_stop_standing_apart_is_no_word_of_the_query():
    docs = [Document("x", "Crews weld steel girders nightly .")]
    assert [q.text for q in generate_queries(docs, [])] == ["Crews weld steel girders nightly"]


def test_a_term_ending_in_a_dot_before_a_comma_is_found_in_the_crops():
    # "Inc.," is the term "Inc." and a comma: its document gets explicit queries, no control.
    docs = [Document("a", "We buy seals from Zentrix Inc., the supplier, every spring for the plant."),
            Document("c", "The cafeteria serves lunch at noon in the main hall for every worker.")]
    groups = locate_terms(docs, {"jargon": ["Inc."]})
    queries = [q for seed in range(3) for q in generate_queries(docs, groups, seed=seed)]
    assert {q.doc_id for q in queries if q.kind == "control"} == {"c"}
    explicit = [q.text for q in queries if q.kind == "explicit"]
    assert explicit and all("Inc." in t.split() for t in explicit), explicit


def test_crops_take_every_length_and_any_place_in_the_sentence():
    # 15 words, none a function word: nothing is trimmed, so each crop is as drawn.
    docs = [Document("x", "Crews weld steel girders bolt beams paint decks mount rails lay cables test lamps seal.")]
    crops = [q.text.split() for seed in range(30) for q in generate_queries(docs, [], seed=seed)]
    assert {len(c) for c in crops} == set(range(5, MAX_WORDS + 1))
    assert len({c[0] for c in crops}) > 1  # not always the sentence's opening words


def test_an_explicit_crop_may_be_taken_around_any_occurrence_of_the_term():
    # The two occurrences are 13 words apart: no crop (9 words at most) holds both.
    docs = [Document("x", "Zentrofax gaskets seal pumps valves hoses lamps rails decks beams cables girders bolts "
                          "Zentrofax.")]
    groups = locate_terms(docs, TERMS)
    explicit = [q.text.split() for seed in range(10) for q in generate_queries(docs, groups, seed=seed)
                if q.kind == "explicit"]
    assert any("gaskets" in e for e in explicit) and any("bolts" in e for e in explicit), explicit


def test_the_semantic_query_draws_its_sentence_apart_from_the_explicit_one():
    docs = [Document("x", "The Zentrofax pump moves coolant through the reactor loop. "
                          "Crews inspect every Zentrofax gasket during the spring outage.")]
    groups = locate_terms(docs, TERMS)
    first = set("pump moves coolant through reactor loop".split())

    def sentence(q):
        return "first" if first & set(q.text.split()) else "second"

    pairs = set()
    for seed in range(10):
        by_kind = {q.kind: sentence(q) for q in generate_queries(docs, groups, seed=seed)}
        pairs.add((by_kind["explicit"], by_kind["semantic"]))
    assert any(e != s for e, s in pairs), pairs


def test_explicit_queries_come_from_every_term_of_several():
    docs = [Document("a", "The Zentrofax pump moves coolant through the reactor loop every hour."),
            Document("b", "Night crews service the Quorbel valve after each spring inspection."),
            Document("c", "The cafeteria serves lunch at noon in the main hall for every worker.")]
    groups = locate_terms(docs, {**TERMS, "codes": ["Quorbel"]})
    kinds = {(q.doc_id, q.kind) for q in generate_queries(docs, groups, seed=0)}
    assert {("a", "explicit"), ("b", "explicit"), ("c", "control")} <= kinds
    assert ("a", "control") not in kinds and ("b", "control") not in kinds


def test_label_counts_every_query_it_keeps_by_kind():
    qs = [PseudoQuery("a", "qa", "explicit", "d1"), PseudoQuery("b", "qb", "explicit", "d2"),
          PseudoQuery("c", "qc", "control", "d4")]
    teacher = FixedTeacher({"qa": {"The Ze": 0.9}, "qb": {"Check ": 0.9}, "qc": {"The co": 0.9}})
    records, stats = label(qs, {"a": ["d5"], "b": ["d5"], "c": ["d5"]}, DOCS, teacher)
    assert len(records) == 3
    assert stats.generated == {"explicit": 2, "control": 1} and stats.kept == {"explicit": 2, "control": 1}


def test_make_train_without_term_labels_keeps_the_teachers_scores(tiny_bert):
    from sparse_adapt.corpus.pseudo import make_train
    from sparse_adapt.corpus.teacher import to_spec_range
    from sparse_adapt.corpus.text import doc_terms
    from tests.corpus.test_glosses import OverlapTeacher

    groups = locate_terms(DOCS, TERMS)
    text = {d.doc_id: d.text for d in DOCS}
    plain, stats = make_train(DOCS, groups, tiny_bert, OverlapTeacher(), seed=0, negatives=3, siblings=0,
                              term_labels=False)
    assert stats.term_adjusted == 0
    for r in plain:
        raw = OverlapTeacher().score(r["query"], [text[d] for d in r["doc_ids"]])
        assert r["teacher_scores"] == pytest.approx(to_spec_range(raw), abs=1e-4), r
    # the same lists with term labels: every Zentrofax document is a positive for a Zentrofax query
    consistent, stats = make_train(DOCS, groups, tiny_bert, OverlapTeacher(), seed=0, negatives=3, siblings=0)
    assert stats.term_adjusted > 0
    terms_of = doc_terms(groups)
    for r in consistent:
        if r["source_doc"] in terms_of:
            assert all(s >= SIBLING_FLOOR for d, s in zip(r["doc_ids"], r["teacher_scores"]) if d in terms_of), r


def test_make_train_trims_the_function_words_of_the_language_it_is_given(tiny_bert):
    from sparse_adapt.corpus.pseudo import make_train
    from tests.corpus.test_glosses import OverlapTeacher

    # Sentences of 5 words are cropped whole: only their edges' German function words go.
    docs = [Document("g1", "Der Druck im Kreislauf steigt."), Document("g2", "Die Pumpe fördert Wasser schnell."),
            Document("g3", "Ein Ventil schließt den Kreislauf und")]
    records, _ = make_train(docs, [], tiny_bert, OverlapTeacher(), seed=0, negatives=2, siblings=0, lang="de")
    assert sorted(r["query"] for r in records) == [
        "Druck im Kreislauf steigt", "Pumpe fördert Wasser schnell", "Ventil schließt den Kreislauf"]


def test_the_sibling_floor_comment_states_the_bundled_hand_graded_range():
    # SIBLING_FLOOR is justified by what hand graders gave a term's other documents: the range the
    # comment quotes is recomputed from the bundled lists (their best document as the source).
    import inspect
    import json
    import re

    import corpora
    from sparse_adapt.corpus import pseudo
    from sparse_adapt.corpus.text import doc_terms
    from sparse_adapt.data import load_documents, load_domain_terms

    scores = []
    for name in corpora.names():
        files = corpora.get(name)
        terms_of = doc_terms(locate_terms(load_documents(files.docs), load_domain_terms(files.terms)))
        for line in files.train.read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            source = terms_of.get(r["doc_ids"][0], set())
            scores += [s for d, s in zip(r["doc_ids"][1:], r["teacher_scores"][1:]) if terms_of.get(d, set()) & source]
    said = re.search(r"lists give a term's other documents (\d+)-(\d+)", inspect.getsource(pseudo))
    assert (min(scores), max(scores)) == tuple(map(float, said.groups()))
    assert pseudo.SIBLING_FLOOR == min(scores)
