"""Dictionary harvesting: definitional patterns, the context fallback, examples, user entries win."""

from __future__ import annotations

import pytest

from sparse_adapt.corpus.harvest import build_dictionary
from sparse_adapt.corpus.text import locate_terms
from sparse_adapt.data import DataError, DictionaryEntry, Document
from sparse_adapt.errors import SparseAdaptError

DOCS = [
    Document("d1", "Teams file reports every week. The Zentrofax is a pump that moves coolant through the reactor loop."),
    Document("d2", "Check the Zentrofax seals monthly because worn seals leak coolant into the pit."),
    Document("d3", "A zentrofax rated at 40 bar replaced the old pump in the reactor loop."),
    Document("d4", "Operators log the Qvirrel reading before every shift change at the control desk."),
    Document("d5", "The night shift copies the Qvirrel reading into the control desk log."),
]


def test_definitional_pattern_becomes_the_definition():
    groups = locate_terms(DOCS, {"jargon": ["Zentrofax", "zentrofax"]})
    [entry] = build_dictionary(DOCS, groups)
    assert entry["term"] == "Zentrofax"  # the spelling the corpus uses most
    assert entry["definition"] == "a pump that moves coolant through the reactor loop"
    assert entry["harvested"]["definition"] == "d1: is a"
    # examples: usage windows from other documents first, each containing the term
    assert entry["harvested"]["examples"][:2] == ["d2", "d3"]
    assert all("zentrofax" in e.casefold() for e in entry["examples"])
    assert len(entry["examples"]) == 3 and all(len(e.split()) <= 10 for e in entry["examples"])


def test_without_a_pattern_the_most_typical_sentence_is_used():
    groups = locate_terms(DOCS, {"jargon": ["Qvirrel"]})
    [entry] = build_dictionary(DOCS, groups)
    assert entry["harvested"]["definition"].endswith(": context")
    assert "Qvirrel reading" in entry["definition"] and entry["examples"]


def test_a_pattern_whose_description_is_one_word_is_no_definition():
    # "Velkor means coolant" matches "means" with the description "coolant": one word says too
    # little to be the definition, so the context fallback takes a whole sentence. Both sentences
    # share one word ("coolant") with the other: a tie, and the first in corpus order wins.
    docs = [Document("m1", "Velkor means coolant."),
            Document("m2", "The Velkor pump moves warm coolant through the loop every hour.")]
    [entry] = build_dictionary(docs, locate_terms(docs, {"jargon": ["Velkor"]}))
    assert (entry["harvested"]["definition"], entry["definition"]) == ("m1: context", "Velkor means coolant")


def test_the_context_sentence_is_the_one_sharing_most_words_with_the_others():
    # Overlap with the *other* sentences: b0 shares none of its 10 words; b1 and b2 share
    # "reading logged at shift" (4) with each other. b1 wins (the tie with b2 goes to the first).
    # Counting a sentence's overlap with itself would add its own length and pick the long b0.
    docs = [Document("b0", "Brivex gauges drift when dust coats their delicate optical sensors badly."),
            Document("b1", "Brivex reading logged at shift start."),
            Document("b2", "Brivex reading logged at shift end.")]
    [entry] = build_dictionary(docs, locate_terms(docs, {"jargon": ["Brivex"]}))
    assert (entry["harvested"]["definition"], entry["definition"]) == ("b1: context", "Brivex reading logged at shift start")


def test_examples_take_one_sentence_per_document_before_a_second_from_any():
    # Uses in corpus order, the definition's sentence (e0, "is a") moved last: e1 first, e1
    # second, e2, e0. One per document first: e1, e2, e0 fill MAX_EXAMPLES = 3, and e1's second
    # sentence waits for a second pass that never comes.
    docs = [Document("e0", "The Orbex is a valve that vents steam from the boiler."),
            Document("e1", "The Orbex valve opens at dawn. Crews grease the Orbex valve weekly."),
            Document("e2", "An Orbex valve failed during the storm last night.")]
    [entry] = build_dictionary(docs, locate_terms(docs, {"jargon": ["Orbex"]}))
    assert entry["harvested"]["definition"] == "e0: is a"
    assert entry["harvested"]["examples"] == ["e1", "e2", "e0"]


def test_user_entries_are_kept_first_and_win():
    mine = DictionaryEntry("Zentrofax", "my own definition", ("my example",))
    groups = locate_terms(DOCS, {"jargon": ["Zentrofax", "Qvirrel"]})
    records = build_dictionary(DOCS, groups, existing=[mine])
    assert records[0] == {"term": "Zentrofax", "definition": "my own definition", "examples": ["my example"]}
    assert [r["term"] for r in records] == ["Zentrofax", "Qvirrel"] and "harvested" in records[1]


def test_a_multi_word_user_entry_covers_its_words():
    mine = DictionaryEntry("Qvirrel reading", "a gauge value", ("the Qvirrel reading",))
    records = build_dictionary(DOCS, locate_terms(DOCS, {"jargon": ["Qvirrel"]}), existing=[mine])
    assert len(records) == 1 and "harvested" not in records[0]


def test_a_term_absent_from_the_corpus_is_refused_by_name():
    with pytest.raises(DataError, match="occur in no document of the corpus: Nonexistium"):
        locate_terms(DOCS, {"jargon": ["Zentrofax", "Nonexistium"]}, "terms.json")


def test_a_term_inside_a_longer_word_does_not_count():
    with pytest.raises(DataError, match="Zentro") as e:
        locate_terms(DOCS, {"jargon": ["Zentro"]})
    assert "Zentro only inside longer words, and terms are matched as whole words" in str(e.value)
    with pytest.raises(DataError) as e:  # unspaced script: found by grep, not as a word
        locate_terms([Document("z", "离心泵的机械密封需要更换。弗鲁密封件可以防止泄漏。")], {"jargon": ["弗鲁密封件"]})
    assert "only inside longer words" in str(e.value) and "Chinese" in str(e.value)
    with pytest.raises(DataError) as e:  # nowhere at all: just the spelling advice
        locate_terms(DOCS, {"jargon": ["Nonexistium"]})
    assert "longer words" not in str(e.value)


LINKED = [
    Document("k1", "The Morvane pump sends coolant round the loop. A Morvane pump is serviced every spring."),
    # The longest use, sharing the most words with the others, is about another term too.
    Document("k2", "Crews found the Morvane pump sends coolant round the loop to the Tullix valve, and the Tullix valve "
                   "vents coolant every spring."),
    Document("k3", "Tullix is a valve beside the Morvane pump."),
    Document("k4", "Tullix is a spring valve that vents steam from the loop."),
]


def test_a_definition_naming_no_other_term_is_preferred():
    alone = build_dictionary(LINKED, locate_terms(LINKED, {"jargon": ["Morvane"]}))[0]
    assert alone["harvested"]["definition"] == "k2: context"  # the most typical use, by overlap
    both = build_dictionary(LINKED, locate_terms(LINKED, {"jargon": ["Morvane", "Tullix"]}))
    morvane, tullix = both
    assert morvane["harvested"]["definition"] == "k1: context"
    assert "Tullix" not in morvane["definition"]
    # among a pattern's matches too; the first match in corpus order names Morvane
    assert tullix["harvested"]["definition"] == "k4: is a"
    assert tullix["definition"] == "a spring valve that vents steam from the loop"


def test_an_abbreviated_genus_or_initial_does_not_end_a_sentence():
    from sparse_adapt.corpus.text import sentences

    assert sentences("Galleries of S. piceovorax radiate. Sapwood is blue!  Next?") == [
        "Galleries of S. piceovorax radiate.", "Sapwood is blue!", "Next?"]
    assert sentences("Caused by E. coli in the gut. Treat early.") == ["Caused by E. coli in the gut.", "Treat early."]
    # any other word before the full stop still ends the sentence
    assert sentences("Take vitamin DE. Then rest.") == ["Take vitamin DE.", "Then rest."]


def test_a_term_ending_in_a_dot_does_not_end_a_sentence():
    from sparse_adapt.corpus.text import sentences

    text = "The supplier Zentrix Inc. ships the seals. Nothing else. Zentrix Inc."
    assert sentences(text) == ["The supplier Zentrix Inc.", "ships the seals.", "Nothing else.", "Zentrix Inc."]
    assert sentences(text, ("Inc.", "Zorblatt")) == [
        "The supplier Zentrix Inc. ships the seals.", "Nothing else.", "Zentrix Inc."]
    assert sentences("Ask zentrix INC. today. Fine.", ("Inc.",)) == ["Ask zentrix INC. today.", "Fine."]


def test_a_term_ending_in_a_dot_gets_its_defining_sentence():
    docs = [Document("i1", "Zentrix Inc. is a supplier of seals for the reactor coolant loop."),
            Document("i2", "Orders from Zentrix Inc. arrive every Monday at the loading dock.")]
    [entry] = build_dictionary(docs, locate_terms(docs, {"jargon": ["Inc."]}))
    assert entry["definition"] == "a supplier of seals for the reactor coolant loop"


def test_a_definition_keeps_the_abbreviated_genus_in_its_sentence():
    docs = [
        Document("f1", "Storm-felled logs are where it breeds. Scolvaris is a bark beetle of spruce."),
        Document("f4", "Under the bark the galleries of S. piceovorax radiate like a star from the chamber."),
    ]
    groups = locate_terms(docs, {"species": ["piceovorax"]})
    [entry] = build_dictionary(docs, groups)
    assert entry["definition"].startswith("Under the bark the galleries of S. piceovorax")


def test_a_called_definition_starts_at_a_word_not_inside_one():
    """"Our Uganda office named quorvex" gave the definition "a office" (the end of "Uganda")."""
    docs = [Document("d1", "Our Uganda office named quorvex handles the coolant orders."),
            Document("d2", "Orders from quorvex arrive weekly.")]
    [entry] = build_dictionary(docs, locate_terms(docs, {"jargon": ["quorvex"]}))
    assert entry["definition"] != "a office" and not entry["harvested"]["definition"].endswith("called")
    docs = [Document("d1", "We run a pump for the reactor loop, called quorvex, in every plant."),
            Document("d2", "Orders from quorvex arrive weekly.")]
    [entry] = build_dictionary(docs, locate_terms(docs, {"jargon": ["quorvex"]}))
    assert entry["definition"] == "a pump for the reactor loop" and entry["harvested"]["definition"] == "d1: called"


def test_an_acronym_s_expansion_set_off_by_or_is_its_definition():
    """"The SBCR, or steady-batch cycle rate, is ..." matched no pattern: an operational sentence won."""
    docs = [Document("d1", "Operators calculate the SBCR each Monday from the batch log and compare it with the target."),
            Document("d2", "The SBCR, or steady-batch cycle rate, is the number of cycles a line completes per week."),
            Document("d3", "Ship the QV-310 or the QV-420, whichever is ready, and log it.")]
    [entry] = build_dictionary(docs, locate_terms(docs, {"acronyms": ["SBCR"]}))
    assert entry["definition"] == "steady-batch cycle rate" and entry["harvested"]["definition"] == "d2: or"
    # an alternative is no expansion: its initials must spell the acronym, else a real definition wins
    docs = [Document("d1", "The MTBF is a measure of how long a pump runs between failures."),
            Document("d2", "The MTBF, or the uptime, is reported every month."),
            Document("d3", "The MTBF, or mean time between failures, is logged per pump.")]
    [entry] = build_dictionary(docs, locate_terms(docs, {"acronyms": ["MTBF"]}))
    assert entry["definition"] == "mean time between failures" and entry["harvested"]["definition"] == "d3: or"
    [entry] = build_dictionary(docs[:2], locate_terms(docs[:2], {"acronyms": ["MTBF"]}))
    assert entry["harvested"]["definition"] == "d1: is a"
    docs = [Document("d1", "Krellamine is a solvent used to clean the reactor loop."),
            Document("d2", "Krellamine, or any similar amine, is banned in the food line.")]
    [entry] = build_dictionary(docs, locate_terms(docs, {"jargon": ["Krellamine"]}))
    assert entry["harvested"]["definition"] == "d1: is a"


def test_a_sentence_of_terms_alone_is_no_definition():
    """A document "XR-7200." gave XR-7200 the definition "XR-7200"; "XR-7200 IL-6 CO2" likewise."""
    docs = [Document("a", "XR-7200."), Document("b", "XR-7200 IL-6 CO2"),
            Document("c", "IL-6 levels rise in the blood of patients after a long fever.")]
    said: list[str] = []
    from sparse_adapt.progress import Hooks

    records = build_dictionary(docs, locate_terms(docs, {"codes": ["XR-7200", "IL-6", "CO2"]}),
                               hooks=Hooks(message=said.append))
    by_term = {r["term"]: r for r in records}
    assert set(by_term) == {"IL-6"} and by_term["IL-6"]["definition"].startswith("IL-6 levels rise")
    assert sum(m.startswith("no dictionary entry for ") for m in said) == 2, said
    with pytest.raises(SparseAdaptError, match="no dictionary entry can be harvested for the 2 terms"):
        build_dictionary(docs[:2], locate_terms(docs[:2], {"codes": ["XR-7200", "CO2"]}))


def test_a_definition_pattern_finds_a_term_whose_key_is_another_spelling():
    """IGNORECASE does not casefold: the key "spaltmass" never matched "Spaltmaß ist ..."."""
    docs = [Document("g1", "The technician checks every Spaltmaß of the pump in spring."),
            Document("g2", "A Spaltmaß is the gap between the shaft and its seal.")]
    [entry] = build_dictionary(docs, locate_terms(docs, {"jargon": ["Spaltmaß"]}))
    assert entry["definition"] == "the gap between the shaft and its seal"


def test_a_long_context_sentence_is_cut_around_the_term_not_before_it():
    from sparse_adapt.corpus.harvest import MAX_DEFINITION_WORDS

    lead = " ".join(f"w{i}" for i in range(46))  # 46 words before the term: a cut at 40 lost it
    docs = [Document("a", f"{lead} then Kryzel restarts the replication job."),
            Document("b", "Kryzel and friends walk in the park today.")]
    [entry] = build_dictionary(docs, locate_terms(docs, {"jargon": ["Kryzel"]}))
    assert entry["harvested"]["definition"] == "a: context"
    words = entry["definition"].split()
    assert len(words) == MAX_DEFINITION_WORDS and "Kryzel" in words
    assert words[-1] == "job" and words[0] == "w12"  # the window ends with the sentence: 40 words from w12


@pytest.mark.parametrize("acronym, expansion, spelt", [
    ("SBCR", "steady-batch cycle rate", True),
    ("MoA", "mechanism of action", True),  # a small word may give its letter
    ("OAuth2", "open authorization 2", True),  # a word may give more than its initial
    ("DNA", "deoxyribonucleic acid", True),
    ("R&D", "research and development", True),
    ("SBCR", "“steady-batch cycle rate”", True),
    ("MTBF", "the uptime", False),
    ("MTBF", "mean time before fixing anything", False),  # every word must give a letter or be a small word
    ("SBCR", "sub-contracting bids", False),
    ("MTBF", "mean time between big failures", False),  # a word giving no letter must be a small word
    ("TSL", "tools", False),  # letters from within a word come in order: no "l" after the "s"
    ("Krellamine", "any similar amine", False),
    ("V", "valve", False),  # one letter is no acronym: every word starting with it would spell it
    ("MTBF", "the mean time between failures", True),  # a leading article gives no letter
    ("SBCR", "“ steady-batch cycle rate ”", True),  # a detached quote is no word
    ("PW", "password", True),  # one word may give every letter
])
def test_an_expansion_spells_its_acronym_in_order(acronym, expansion, spelt):
    from sparse_adapt.corpus.harvest import _expands

    assert _expands(acronym, expansion) is spelt


@pytest.mark.parametrize("sentence, definition, source", [
    ("Velkor is defined as the pump that moves coolant.", "the pump that moves coolant", "is defined as"),
    ("Velkor refers to the pump that moves coolant.", "the pump that moves coolant", "refers to"),
    ("Velkor denotes the pump that moves coolant.", "the pump that moves coolant", "means"),
    ("Velkor stands for variable electric load kit.", "variable electric load kit", "means"),
    ("Velkor was a pump that moved coolant in the old plant.", "a pump that moved coolant in the old plant", "is a"),
    ("The Velkor is one of the pumps that move coolant.", "one of the pumps that move coolant", "is a"),
    ("Our Velkor (a pump that moves coolant) hums.", "a pump that moves coolant", "parenthesis"),
    ("The Velkor, a pump that moves coolant, hums loudly.", "a pump that moves coolant", "appositive"),
    ("A pump that moves coolant, known as Velkor, hums.", "A pump that moves coolant", "called"),
    ("A pump that moves coolant called Velkor hums.", "A pump that moves coolant", "called"),  # no comma needed
    ("Velkor denotes warm coolant.", "warm coolant", "means"),  # two words are enough
    # the parenthesis closes at its own ")", not at the sentence's last one
    ("Our Velkor (a pump that moves coolant) hums (most days).", "a pump that moves coolant", "parenthesis"),
    # an appositive is closed by a comma: without one, a list follows the term, not a description
    ("Crews cleaned the Velkor, the pumps and the valves before noon.",
     "Crews cleaned the Velkor, the pumps and the valves before noon", "context"),
    # "is a" needs the article as a word: "theoretically" does not start with "the"
    ("Our Velkor is theoretically able to pump coolant.", "Our Velkor is theoretically able to pump coolant",
     "context"),
    # "is" counts only as the sentence's opening clause: here the whole sentence is the context
    ("Yesterday our Velkor is running hot again.", "Yesterday our Velkor is running hot again", "context"),
])
def test_each_definitional_pattern_gives_its_description(sentence, definition, source):
    docs = [Document("v1", sentence), Document("v2", "Crews check the Velkor every week.")]
    [entry] = build_dictionary(docs, locate_terms(docs, {"jargon": ["Velkor"]}))
    assert (entry["definition"], entry["harvested"]["definition"]) == (definition, f"v1: {source}")


def test_among_equal_matches_of_a_pattern_the_first_in_corpus_order_wins():
    docs = [Document("o1", "The Orbex is a valve that vents steam."),
            Document("o2", "An Orbex is a device from the old plant.")]
    [entry] = build_dictionary(docs, locate_terms(docs, {"jargon": ["Orbex"]}))
    assert entry["harvested"]["definition"] == "o1: is a"


def test_a_user_entry_for_a_term_ending_in_a_dot_covers_it():
    # words("Inc.") is "Inc": only the whole term's key says the user wrote this one
    docs = [Document("i1", "Zentrix Inc. is a supplier of seals for the reactor coolant loop."),
            Document("i2", "Orders from Zentrix Inc. arrive every Monday at the loading dock.")]
    mine = DictionaryEntry("Inc.", "incorporated: a company", ())
    records = build_dictionary(docs, locate_terms(docs, {"jargon": ["Inc."]}), existing=[mine])
    assert records == [{"term": "Inc.", "definition": "incorporated: a company", "examples": []}]


def test_a_term_no_sentence_holds_whole_gets_no_entry_and_no_crash():
    # "Yahoo! Mail" is in the text, but the sentence split after "!" cuts it in two
    docs = [Document("y1", "Log in to Yahoo! Mail before the Velkor shift starts."),
            Document("y2", "The Velkor is a pump that moves coolant.")]
    records = build_dictionary(docs, locate_terms(docs, {"jargon": ["Yahoo! Mail", "Velkor"]}))
    assert [r["term"] for r in records] == ["Velkor"]


def test_a_definition_naming_one_other_term_beats_one_naming_two():
    # mentions are counted, not just present: d1 names Tullix and Morvane, d2 Tullix alone
    docs = [Document("d1", "Velkor is a pump beside the Tullix valve and the Morvane tank."),
            Document("d2", "Velkor is a pump that feeds the Tullix valve."),
            Document("d3", "Morvane is a tank of coolant.")]
    records = build_dictionary(docs, locate_terms(docs, {"jargon": ["Velkor", "Tullix", "Morvane"]}))
    velkor = next(r for r in records if r["term"] == "Velkor")
    assert velkor["harvested"]["definition"] == "d2: is a"
    assert velkor["definition"] == "a pump that feeds the Tullix valve"


def test_a_long_context_sentence_puts_half_the_window_before_the_term():
    from sparse_adapt.corpus.harvest import MAX_DEFINITION_WORDS

    lead = " ".join(f"w{i}" for i in range(50))
    tail = " ".join(f"t{i}" for i in range(50))
    docs = [Document("a", f"{lead} Kryzel {tail}."), Document("b", "Kryzel and friends walk in the park today.")]
    [entry] = build_dictionary(docs, locate_terms(docs, {"jargon": ["Kryzel"]}))
    words = entry["definition"].split()
    # 20 words before the term's first use, the term, 19 after
    assert len(words) == MAX_DEFINITION_WORDS and words.index("Kryzel") == MAX_DEFINITION_WORDS // 2
    assert (words[0], words[-1]) == ("w30", "t18")


def test_the_context_fallback_weighs_mentions_only_among_sentences_that_say_something():
    # "Velkor." names no other term but says nothing: the fewest mentions are counted among the rest
    docs = [Document("v1", "Velkor."), Document("v2", "The Velkor pump feeds the Tullix valve every hour.")]
    records = build_dictionary(docs, locate_terms(docs, {"jargon": ["Velkor", "Tullix"]}))
    velkor = next(r for r in records if r["term"] == "Velkor")
    assert velkor["harvested"]["definition"] == "v2: context"


def test_an_example_is_the_window_from_three_words_before_the_terms_first_use():
    # EXAMPLE_WORDS = 10 from 3 words before the first "Orbex" (not the second), edge commas trimmed
    docs = [Document("e0", "The Orbex is a valve that vents steam from the boiler."),
            Document("e1", "Before dawn each day the night crew walks the yard, greases the Orbex valve, logs the "
                           "boiler steam pressure, and checks that no second Orbex valve has stuck shut.")]
    [entry] = build_dictionary(docs, locate_terms(docs, {"jargon": ["Orbex"]}))
    assert entry["examples"] == ["yard, greases the Orbex valve, logs the boiler steam pressure",
                                 "The Orbex is a valve that vents steam from the"]


def test_the_example_of_a_term_of_two_words_is_the_window_around_it():
    # no one word holds "restore tool": searched word by word, the window opened the sentence
    docs = [Document("r0", "The restore tool rebuilds an index."),
            Document("r1", "Yesterday before dawn the night crew in hall two finally used the restore tool "
                           "to rebuild the index, then went home.")]
    [entry] = build_dictionary(docs, locate_terms(docs, {"jargon": ["restore tool"]}))
    assert entry["examples"][0] == "finally used the restore tool to rebuild the index, then"


def test_examples_take_a_second_sentence_of_a_document_but_never_the_same_text_twice():
    # two documents: the second pass adds e1's other sentence; e2's repeated sentence is one example
    docs = [Document("e0", "The Orbex is a valve that vents steam from the boiler."),
            Document("e1", "The Orbex valve opens at dawn. Crews grease the Orbex valve weekly.")]
    [entry] = build_dictionary(docs, locate_terms(docs, {"jargon": ["Orbex"]}))
    assert entry["harvested"]["examples"] == ["e1", "e0", "e1"]
    assert entry["examples"][2] == "Crews grease the Orbex valve weekly."
    docs[1] = Document("e2", "Crews grease the Orbex valve weekly. Crews grease the Orbex valve weekly.")
    [entry] = build_dictionary(docs, locate_terms(docs, {"jargon": ["Orbex"]}))
    assert entry["examples"] == ["Crews grease the Orbex valve weekly.",
                                 "The Orbex is a valve that vents steam from the"]


def test_the_context_sentence_shares_words_whatever_their_case():
    # b1 and b2 share "winter storms crack gauges" in any case; b0 shares "winter" with both.
    # Compared as written, b1's capitals would cost it the tie it wins with b2 by coming first.
    docs = [Document("b0", "Brivex winter checks."),
            Document("b1", "Brivex Winter Storms crack gauges."),
            Document("b2", "Brivex winter storms crack gauges and seals.")]
    [entry] = build_dictionary(docs, locate_terms(docs, {"jargon": ["Brivex"]}))
    assert (entry["harvested"]["definition"], entry["definition"]) == ("b1: context",
                                                                       "Brivex Winter Storms crack gauges")


def test_a_plural_term_opening_an_are_clause_is_defined_by_it():
    docs = [Document("r1", "O-rings are soft loops that stop coolant leaks."),
            Document("r2", "Crews replace the O-rings every spring.")]
    [entry] = build_dictionary(docs, locate_terms(docs, {"jargon": ["O-rings"]}))
    assert (entry["definition"], entry["harvested"]["definition"]) == ("soft loops that stop coolant leaks", "r1: is")


def test_the_module_docstring_names_every_key_of_the_harvested_record():
    # The "harvested" record is what a user reads to see where an entry came from: every key
    # build_dictionary writes, the lay-word glosses' included, is named in the module docstring.
    import re

    from sparse_adapt.corpus import harvest
    from sparse_adapt.corpus.glosses import Gloss

    groups = locate_terms(DOCS, {"jargon": ["Zentrofax"]})
    glosses = {"d1": [Gloss("coolant", "coolant", "a fluid agent that produces cooling")]}
    [entry] = build_dictionary(DOCS, groups, glosses=glosses)
    doc = " ".join(harvest.__doc__.split())
    said = set(re.findall(r'"(\w+)": ', doc[doc.index('``"harvested":'):doc.index("which fields were harvested")]))
    assert set(entry["harvested"]) == {"definition", "examples", "glosses"}
    assert set(entry["harvested"]) <= said
