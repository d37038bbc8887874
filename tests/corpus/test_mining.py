"""Term mining: shapes, wordfreq rarity, piece counts, score parts, the spec's format, errors."""

from __future__ import annotations

import math

import pytest

from sparse_adapt.corpus.mining import MiningError, mine_terms, score_candidates, shape, terms_json
from sparse_adapt.data import Document, load_documents
from sparse_adapt.defaults import BUNDLED
from tests.conftest import _tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return _tokenizer()  # bert-base-uncased vocabulary, as offline-minilm and offline-splade-tiny


@pytest.mark.parametrize("word, category, unusual", [
    ("XR-7200", "codes", True), ("HV-31a", "codes", True), ("PRVT", "acronyms", True), ("cQTx", "acronyms", True),
    ("OAuth2", "acronyms", True), ("gatrocraptic", "jargon", False), ("agent-package", "jargon", True),
    ("r2d2", "codes", True),  # two digits make a code without a hyphen
    ("log4j", "jargon", True),  # one digit: jargon, but of an unusual pattern
])
def test_shape_categories(word, category, unusual):
    assert shape(word) == (category, unusual)


def test_gatrocraptic_ranks_top_5_on_the_bundled_corpus(tokenizer):
    candidates = mine_terms(load_documents(BUNDLED.docs), tokenizer)
    top5 = [c.term.casefold() for c in candidates[:5]]
    assert "gatrocraptic" in top5
    first = candidates[0]
    assert first.term == "Gatrocraptic" and first.category == "jargon"
    assert first.pieces == ["ga", "##tro", "##cr", "##ap", "##tic"] and first.zipf == 0.0 and first.documents == 5
    for c in candidates:
        assert c.score == pytest.approx(sum(c.parts.values()))
    assert [c.score for c in candidates] == sorted((c.score for c in candidates), reverse=True)
    # the parts as the module docstring writes them: log2(documents), 4 - Zipf, log2(pieces), pattern
    assert first.parts == pytest.approx({"frequency": math.log2(5), "rarity": 4.0, "fragmentation": math.log2(5),
                                         "pattern": 0.0})


def test_equal_scores_rank_the_term_of_more_documents_first(tokenizer):
    # vardle: 4 documents, 2 pieces -> 2 + 4 + 1 = 7; krobnik: 2 documents, 4 pieces -> 1 + 4 + 2 = 7
    # (both unknown to wordfreq, Zipf 0). Exact in floats: the tie goes to the wider-used term,
    # not to the spelling first in alphabetical order.
    docs = [Document("a1", "The krobnik pump hums."), Document("a2", "A krobnik seal leaks."),
            Document("a3", "The vardle crew checks the line."), Document("a4", "A vardle shift ends late."),
            Document("a5", "The vardle log is full."), Document("a6", "Every vardle reading counts.")]
    ranked = score_candidates(docs, tokenizer)
    assert [(c.term, c.score, c.documents) for c in ranked] == [("vardle", 7.0, 4), ("krobnik", 7.0, 2)]


def test_a_codes_score_parts_by_hand(tokenizer):
    docs = [Document(f"d{i}", f"The XR-7200 unit failed again in hall {i}.") for i in range(4)]
    (code,) = [c for c in score_candidates(docs, tokenizer) if c.term == "XR-7200"]
    assert code.pieces == ["x", "##r", "-", "720", "##0"]
    assert code.parts == pytest.approx({"frequency": 2.0, "rarity": 4.0 - code.zipf, "fragmentation": math.log2(5),
                                        "pattern": 1.0})


def test_common_english_and_single_document_words_are_not_terms(tokenizer):
    docs = [
        Document("a", "The Zentrofax pump and the general database."),
        Document("b", "Zentrofax pumps need the general database and Qvirrel once."),
        Document("c", "A general database."),
    ]
    terms = [c.term for c in mine_terms(docs, tokenizer)]
    assert terms == ["Zentrofax"]  # "database"/"general" are common English; "Qvirrel" is in one document
    assert [c.term for c in mine_terms(docs, tokenizer, min_count=1)][:2] == ["Zentrofax", "Qvirrel"]


def test_terms_json_is_the_spec_format_with_every_spelling(tokenizer):
    docs = [Document("a", "Zentrofax and XR-7200 with PRVT."), Document("b", "zentrofax, XR-7200 and PRVT again.")]
    assert terms_json(mine_terms(docs, tokenizer)) == {
        "jargon": ["Zentrofax", "zentrofax"], "acronyms": ["PRVT"], "codes": ["XR-7200"],
    }


def test_corpus_without_candidates_is_a_clear_error(tokenizer):
    docs = [Document("a", "The cat sat on the mat."), Document("b", "The dog sat on the cat.")]
    with pytest.raises(MiningError, match="no candidate domain terms in 2 documents"):
        mine_terms(docs, tokenizer)


def test_the_cut_keeps_the_best_and_the_rest_stay_visible(tokenizer, tmp_path, capsys):
    import json

    from sparse_adapt.cli import main
    from sparse_adapt.corpus.mining import score_candidates

    names = ["Zentrofax", "Qvirrelmont", "Brakkenstol", "Yeldrimane"]
    docs = [Document(f"d{i}", f"{' and '.join(names[: 4 - i // 2])} in report {i}.") for i in range(8)]
    # two documents naming none: the first name is in 8 of 10, under the boilerplate bound (more than 4 of 5)
    docs += [Document(f"d{i}", f"Nothing to report in week {i}.") for i in (8, 9)]
    scored = score_candidates(docs, tokenizer)
    assert [c.term for c in scored] == names  # more documents, higher score
    assert mine_terms(docs, tokenizer, top=2) == scored[:2]
    with pytest.raises(MiningError, match="--top must be >= 1"):
        mine_terms(docs, tokenizer, top=0)
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"doc_id": d.doc_id, "text": d.text}) + "\n" for d in docs))
    out = tmp_path / "terms.json"
    assert main(["mine-terms", "--corpus", str(corpus), "--out", str(out), "--base", "offline-splade-tiny",
                 "--top", "2"]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "2 of 4 candidate terms" in said
    assert "2 more scored below the cut (the next: Brakkenstol, Yeldrimane); --top 4 keeps them all" in said
    assert json.loads(out.read_text()) == {"jargon": ["Zentrofax", "Qvirrelmont"]}
    # a cut that leaves nothing out is no cut: no "0 more below it" line, no "4 of 4" title
    assert main(["mine-terms", "--corpus", str(corpus), "--out", str(out), "--base", "offline-splade-tiny",
                 "--top", "4", "--overwrite"]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "4 candidate terms" in said and " of 4 " not in said and "below the cut" not in said


def _mined(tokenizer, texts: list[str]) -> set[str]:
    docs = [Document(f"d{i}", t) for i, t in enumerate(texts)]
    return {c.term for c in mine_terms(docs, tokenizer, top=100)}


def test_boilerplate_in_every_document_is_no_term(tokenizer):
    """A footer in all ten documents scored above the real terms, then made every document
    relevant to every query naming it."""
    footer = " Questions? Email helpdesk-emea@acmeflow-industries.com or visit https://www.acmeflow-industries.com/" \
             "support/kb?ref=newsletter_2024 . Copyright AcmeFlow GmbH."
    texts = [f"The quorvex valve regulates coolant pressure in loop {i}." + footer for i in range(3)]
    texts += [f"The brindlewick sensor reads flow in section {i}." + footer for i in range(3)]
    texts += [f"Routine inspection notes for week {i} of the season." + footer for i in range(4)]
    mined = _mined(tokenizer, texts)
    assert {"quorvex", "brindlewick"} <= mined
    # AcmeFlow is in 10 of 10 documents; the link and address parts are not prose
    assert not mined & {"AcmeFlow", "acmeflow-industries", "helpdesk-emea", "newsletter_2024", "GmbH"}
    # the same name in 4 of 5 documents is kept: the bound is "more than 4 of every 5"
    four = [f"AcmeFlow quorvex unit {i} passed." for i in range(4)] + ["A plain sentence about nothing."]
    assert "AcmeFlow" in _mined(tokenizer, four)


def test_quantities_and_words_in_capitals_are_no_terms(tokenizer):
    texts = ["CAUTION: the pump starts within 100ms at 60Hz and runs 24h from 10am on the 23rd; see API limits.",
             "CAUTION: wait 100ms, 60Hz mains, 24h cycle from 10am on the 23rd; see API limits."]
    mined = _mined(tokenizer, texts)
    assert not mined & {"CAUTION", "100ms", "60Hz", "24h", "10am", "23rd"}
    assert "API" in mined  # a short acronym general English also uses stays an acronym
    assert {"XR-7200", "E4012"} <= _mined(tokenizer, ["The XR-7200 shows E4012 at start.", "XR-7200 fault E4012."])


def test_a_digit_led_acronym_is_a_term_and_a_unit_in_capitals_a_quantity(tokenizer):
    """'2FA' and '4WD' were read as quantities (a number and up to three letters) and never mined."""
    from sparse_adapt.corpus.mining import quantity

    words = ["2FA", "4WD", "3DS", "100ms", "10GB", "5PM", "2ND", "60Hz", "5G", "4K", "1.5kW", "5LB", "12MP",
             "6FT", "50CC", "3PCS", "5EST", "1080HD", "2PC", "2.5GB"]
    assert [w for w in words if not quantity(w)] == ["2FA", "4WD", "3DS", "2PC"]
    texts = ["Enable 2FA on the 10GB vault; the 4WD fleet logs in by 5PM.",
             "Without 2FA the 4WD telemetry upload of 10GB stops at 5PM."]
    mined = _mined(tokenizer, texts)
    assert {"2FA", "4WD"} <= mined and not mined & {"10GB", "5PM"}


def test_documents_holding_html_tags_are_said(tmp_path, capsys):
    import json

    from sparse_adapt.cli import main
    from sparse_adapt.corpus.text import markup_warning

    plain = [Document("a", "Costs rose as 3 < 4 > 2 says; the Zentrofax pump <3 works."),
             Document("b", "The Zentrofax pump again.")]
    assert markup_warning(plain) is None  # comparisons and emoticons are no tags
    tagged = [*plain, Document("c", '<div class="note"><p>The <b>Zentrofax</b> pump</p></div>')]
    assert markup_warning(tagged).startswith("1 of 3 documents hold HTML tags (e.g. c)")
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"doc_id": d.doc_id, "text": d.text}) + "\n" for d in tagged))
    assert main(["mine-terms", "--corpus", str(corpus), "--out", str(tmp_path / "t.json"),
                 "--base", "offline-splade-tiny"]) == 0
    assert "warning: 1 of 3 documents hold HTML tags" in " ".join(capsys.readouterr().err.split())
    # build-dictionary too: its definitions and examples are the corpus's sentences, tags included
    (tmp_path / "terms.json").write_text(json.dumps({"product": ["Zentrofax"]}))
    assert main(["build-dictionary", "--corpus", str(corpus), "--terms", str(tmp_path / "terms.json"),
                 "--out", str(tmp_path / "d.jsonl")]) == 0
    assert "warning: 1 of 3 documents hold HTML tags" in " ".join(capsys.readouterr().err.split())


def test_documents_repeating_another_ones_text_are_said(tmp_path, capsys):
    import json

    from sparse_adapt.cli import main
    from sparse_adapt.corpus.text import duplicate_warning

    docs = [Document("a", "The Zentrofax pump leaks."), Document("b", "The Zentrofax valve holds."),
            Document("c", "the  zentrofax PUMP leaks."), Document("d", "The Zentrofax pump leaks!")]
    assert duplicate_warning(docs[:2] + docs[3:]) is None  # punctuation differs: another text
    assert duplicate_warning(docs).startswith("1 of 4 documents repeats an earlier one's text (e.g. c = a)")
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"doc_id": d.doc_id, "text": d.text}) + "\n" for d in docs))
    main(["mine-terms", "--corpus", str(corpus), "--out", str(tmp_path / "t.json"), "--base", "offline-splade-tiny"])
    assert "warning: 1 of 4 documents repeats an earlier one's text" in " ".join(capsys.readouterr().err.split())


def test_encoded_data_is_no_term(tokenizer):
    """A logo embedded as base64 in every page's markup once topped the candidates."""
    import base64
    import random

    rng = random.Random(0)
    blob = base64.b64encode(bytes(rng.randrange(256) for _ in range(900))).decode()
    logo = "data:image/gif;base64,R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7"
    digest, uid = "3f786850e387550fdab836ed7e6dc881de23001b", "550e8400-e29b-41d4-a716-446655440000"
    texts = [f"The quorvex valve of unit {i} <img src='{logo}'> build {digest} ticket {uid} {blob}" for i in range(3)]
    mined = _mined(tokenizer, texts)
    assert mined == {"quorvex"}, mined
    from sparse_adapt.corpus.mining import HEX_LENGTH, encoded

    # Codes, CamelCase names and long jargon stay candidates.
    for word in ("XR-7200", "AES256-GCM-SHA384", "SuperDuperTurboMax3000", "PowerEdgeR740xd", "x86_64-linux-gnu",
                 "pneumonoultramicroscopic", "BRCA1-BRCA2-PALB2"):
        assert not encoded(word), word
    assert encoded(digest) and encoded(uid) and encoded("iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB")
    assert encoded(digest[:HEX_LENGTH]) and not encoded(digest[: HEX_LENGTH - 1])  # from a 64-bit id on


def test_a_missing_base_directory_is_said_as_missing_not_as_a_bad_hub_id(tmp_path, capsys):
    from corpora import GATROCRAPTIC
    from sparse_adapt.cli import main

    missing = tmp_path / "no" / "model"
    assert main(["mine-terms", "--corpus", str(GATROCRAPTIC.docs), "--out", str(tmp_path / "t.json"),
                 "--base", str(missing)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"model directory not found: {missing}" in err and "Repo id" not in err


def test_every_mined_term_is_one_the_later_steps_find(tokenizer):
    """"Spaltmaß" (whose key casefolds to "spaltmass") and "--quuxify" (a word after joiners)
    were mined, then `adapt` refused its own terms file: "occur in no document"."""
    from sparse_adapt.corpus.text import locate_terms
    from sparse_adapt.progress import Hooks

    docs = [Document(f"g{i}", f"Der Techniker misst das Spaltmaß an der Zentrofax Pumpe {i}. Run it with --quuxify now.")
            for i in range(3)]
    said: list[str] = []
    kept = mine_terms(docs, tokenizer, hooks=Hooks(message=said.append), lang="de")
    assert "Spaltmaß" in [c.term for c in kept] and "quuxify" not in [c.term for c in kept]
    assert any(m.startswith("left out 1 mined word") and m.endswith("quuxify") for m in said), said
    groups = locate_terms(docs, terms_json(kept))  # raises on a term found nowhere
    assert all(g.doc_ids == ["g0", "g1", "g2"] for g in groups)
    flags = [Document(f"k{i}", f"Never pass --quuxify while indexing shard {i}.") for i in range(3)]
    with pytest.raises(MiningError, match="can be found as a whole word"):
        mine_terms(flags, tokenizer)


def test_the_words_named_below_the_cut_are_ones_a_higher_top_would_keep(tokenizer):
    """The "N more below the cut (the next: ...)" line named "quuxify", which --top 2 then
    left out as unfindable: findability had been checked above the cut only."""
    from sparse_adapt.corpus.mining import mine_with_rest
    from sparse_adapt.progress import Hooks

    docs = [Document(f"z{i}", f"The Zentrofax pump {i} hums.") for i in range(4)]
    docs += [Document(f"q{i}", f"Start it with --quuxify then the Velkorin seal {i} holds.") for i in range(2)]
    said: list[str] = []
    kept, rest = mine_with_rest(docs, tokenizer, top=1, hooks=Hooks(message=said.append))
    assert [c.term for c in kept] == ["Zentrofax"]
    assert [c.term for c in rest] == ["Zentrofax", "Velkorin"]  # quuxify scored second, and is no word to name
    assert not [m for m in said if m.startswith("left out")], said  # below the cut: no place in it was lost
    assert [c.term for c in mine_terms(docs, tokenizer, top=2)] == ["Zentrofax", "Velkorin"]


def test_every_word_below_the_cut_is_one_a_higher_top_keeps(tokenizer):
    """"--top N keeps them all" counted words far below the cut that were never checked: with
    "--quuxify" eighth, --top 8 kept seven."""
    from sparse_adapt.corpus.mining import mine_with_rest

    coined = ["Brellix", "Corvantium", "Dystrelle", "Felmarion", "Gorvantex", "Hexalorin"]
    docs = [Document(f"z{i}", f"The Zentrofax pump {i} hums.") for i in range(4)]
    docs += [Document(f"c{i}", f"{' '.join(coined)} fit bay {i}.") for i in range(3)]
    docs += [Document(f"q{i}", f"Start it with --quuxify on line {i}.") for i in range(2)]
    kept, rest = mine_with_rest(docs, tokenizer, top=1)
    assert "quuxify" not in [c.term for c in rest] and len(rest) == 7
    assert [c.term for c in mine_terms(docs, tokenizer, top=len(rest))] == [c.term for c in rest]


def test_a_code_is_not_dropped_for_the_frequency_of_its_parts(tokenizer):
    """wordfreq reads "IL-6" as "il" + "6" and scores it 4.3, "common English": the cytokine
    named in every document was no candidate, not even below the cut."""
    docs = [Document(f"c{i}", f"Serum IL-6 rose on day {i} while the fever of the patient persisted.") for i in range(3)]
    assert "IL-6" in [c.term for c in mine_terms(docs, tokenizer)]
    words = [Document(f"w{i}", f"The cat-flap {i} opens onto the garden path.") for i in range(3)]
    with pytest.raises(MiningError, match="no candidate domain terms"):  # a joined pair of common words stays common
        mine_terms(words, tokenizer)


def test_durations_ranges_and_dates_are_no_codes(tokenizer):
    """A number joined to a common word, a unit, a month or a number looks like a code by its
    shape, and wordfreq splitting it spared it the common-English test."""
    texts = ["A 24-hour soak test of the XR-7200 ran on 15-Mar-2024 with 10-20mg doses for a 3-year-old rig.",
             "The XR-7200 passed its 24-hour burn-in on 15-Mar-2024; 10-20mg doses, 3-year-old rig."]
    mined = _mined(tokenizer, texts)
    assert "XR-7200" in mined
    assert not mined & {"24-hour", "15-Mar-2024", "10-20mg", "3-year-old"}
    names = ["The 1-Wire bus and the 5-Axis mill ran 6-MP with 2,4-D nearby.", "1-Wire, 5-Axis, 6-MP and 2,4-D again."]
    assert {"1-Wire", "5-Axis", "6-MP", "2,4-D"} <= _mined(tokenizer, names)  # capitals: names, no measures


def test_an_ordinal_joined_to_a_common_word_is_no_code(tokenizer):
    """"3rd-party" is English (wordfreq splits it, so the common-English test spared it), and
    in capitals an ordinal's compound is a name like any other."""
    texts = ["The XR-7200 takes 3rd-party seals as 1st-line spares; the 2nd-Gen rig is older.",
             "A 3rd-party kit for the XR-7200 is 1st-line stock; 2nd-Gen parts too."]
    mined = _mined(tokenizer, texts)
    assert "XR-7200" in mined and "2nd-Gen" in mined
    assert not mined & {"3rd-party", "1st-line"}


def test_a_decomposed_accent_keeps_its_word_whole_and_one_spelling(tokenizer):
    """NFD text ("Mu" + U+0308 + "ller") split at the mark: "ller-Thurgau" became a term."""
    import unicodedata

    nfc = "Müller-Thurgau"
    nfd = unicodedata.normalize("NFD", nfc)
    assert nfd != nfc
    docs = [Document("a", f"{nfc} ripens early on the slope."), Document("b", f"Growers prize {nfd} for aroma."),
            Document("c", f"{nfd} needs a cool cellar."), Document("d", "The tractor was serviced.")]
    cands = [c for c in mine_terms(docs, tokenizer) if "thurgau" in c.term.casefold()]
    assert [(c.term, c.forms, c.documents) for c in cands] == [(nfc, [nfc], 3)]
    from sparse_adapt.corpus.text import locate_terms

    (group,) = locate_terms(docs, {"jargon": [nfc]})
    assert group.doc_ids == ["a", "b", "c"]  # the composed spelling finds the decomposed text


def test_a_chemical_locant_list_stays_with_its_name(tokenizer):
    texts = [f"Plot {i} was exposed to 2,4-dichlorophenoxyacetic acid in spring." for i in range(3)]
    mined = _mined(tokenizer, texts)
    assert "2,4-dichlorophenoxyacetic" in mined and "4-dichlorophenoxyacetic" not in mined


def test_a_term_in_nearly_every_document_is_named_when_left_out(tokenizer):
    """A single-product corpus names its product everywhere: the boilerplate rule drops it,
    and the user hears which words went, not silence."""
    from sparse_adapt.progress import Hooks

    said = []
    docs = [Document(f"d{i}", f"The Orbitrex pump must be primed before run {i}; check the {'quillon' if i < 2 else 'main'} seal.")
            for i in range(9)] + [Document("x", "The quillon seal was replaced.")]
    terms = [c.term for c in mine_terms(docs, tokenizer, hooks=Hooks(message=said.append))]
    assert "Orbitrex" not in terms and "quillon" in terms
    assert [m for m in said if "more than 80% of the documents" in m and "Orbitrex" in m]


def test_a_tie_between_spellings_does_not_depend_on_document_order(tokenizer):
    """"Xylotrin" and a heading's "XYLOTRIN" twice each: the first seen won, and with it the
    category (jargon or acronyms) and the score."""
    texts = ["Xylotrin dries in four hours.", "Xylotrin coats the hull.", "XYLOTRIN SAFETY: wear gloves.",
             "XYLOTRIN STORAGE: keep cool."]
    for order in (texts, texts[::-1]):
        docs = [Document(f"d{i}", t) for i, t in enumerate(order)]
        (cand,) = [c for c in mine_terms(docs, tokenizer) if c.term.casefold() == "xylotrin"]
        assert (cand.term, cand.category, cand.forms) == ("Xylotrin", "jargon", ["Xylotrin", "XYLOTRIN"])


def test_a_host_name_without_scheme_is_no_term_but_a_dotted_name_stays(tokenizer):
    texts = [f"Setup {i} is at docs.acme-cloud.io/setup and uses Quorvex-lib; see Synkro.js and Zorblix.info." for i in range(3)]
    mined = _mined(tokenizer, texts)
    assert "acme-cloud" not in mined  # a part of a host name
    assert {"Quorvex-lib", "Synkro", "Zorblix"} <= mined  # .js and .info are no host endings here


def test_documents_with_decomposed_accents_are_said(tmp_path, capsys):
    import json
    import unicodedata

    from sparse_adapt.cli import main
    from sparse_adapt.corpus.text import decomposed_warning

    docs = [Document("a", "Müller-Thurgau ripens early."), Document("b", unicodedata.normalize("NFD", "Müller-Thurgau keeps."))]
    assert decomposed_warning(docs[:1]) is None
    assert decomposed_warning(docs).startswith("1 of 2 documents hold decomposed accents (e.g. b)")
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"doc_id": d.doc_id, "text": d.text}) + "\n" for d in docs))
    main(["mine-terms", "--corpus", str(corpus), "--out", str(tmp_path / "t.json"), "--base", "offline-splade-tiny"])
    assert "warning: 1 of 2 documents hold decomposed accents" in " ".join(capsys.readouterr().err.split())


def test_mined_jargon_that_the_word_list_knows_is_named_for_the_user_to_check():
    """"ferment" and "caustic", rare words used in their everyday sense in distractors, were trained as jargon unsaid."""
    from sparse_adapt.corpus.mining import Candidate, known_words_note

    def cand(term, category, zipf):
        return Candidate(term, category, 5.0, {}, 2, 2, zipf, ["p"])

    coined = [cand("Morvitase", "jargon", 0.0), cand("QV-310", "codes", 2.28), cand("SBCR", "acronyms", 0.0)]
    assert known_words_note(coined, "terms.json") is None  # a code's or acronym's Zipf is no word's
    note = known_words_note([*coined, cand("ferment", "jargon", 2.85), cand("caustic", "jargon", 2.97)],
                            "runs/x/domain_terms.json", " and rerun")
    assert note == ("2 mined terms are words of general language, rare but not coined: ferment (Zipf 2.85), "
                    "caustic (Zipf 2.97); remove any your corpus uses in its everyday sense from "
                    "runs/x/domain_terms.json and rerun")


def test_mine_terms_names_real_rare_words_but_not_coined_compounds(tmp_path, capsys):
    """Through the CLI, with wordfreq's own Zipf: "ferment" is a word; "krell-pump", scored by its parts, is not."""
    import json

    from sparse_adapt.cli import main

    docs = tmp_path / "docs.jsonl"
    texts = ["Let the batch ferment for two days before the krell-pump drains the vessel.",
             "A slow ferment fouls the krell-pump seals within a week.",
             "Morvitase cleaves the protein; morvitase stays active at high heat.",
             "The krell-pump and morvitase dosing run on one controller."]
    docs.write_text("".join(json.dumps({"doc_id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    assert main(["mine-terms", "--corpus", str(docs), "--out", str(tmp_path / "terms.json"),
                 "--base", "offline-splade-tiny"]) == 0
    mined = {t for terms in json.loads((tmp_path / "terms.json").read_text()).values() for t in terms}
    assert {"ferment", "krell-pump"} <= mined
    warning = " ".join(capsys.readouterr().err.split())
    assert "1 mined term is a word of general language, rare but not coined: ferment (Zipf" in warning
    assert "krell-pump (Zipf" not in warning and "morvitase (Zipf" not in warning.lower()


def test_a_coined_word_of_four_letters_is_jargon_and_one_of_three_is_not(tokenizer):
    # MIN_JARGON_LENGTH = 4: "Vrox" (vr ##ox, unknown to wordfreq) is a term; "Qrn" reads as an abbreviation
    texts = ["The Vrox seal and the Qrn gauge failed.", "Replace the Vrox seal; the Qrn gauge is fine."]
    mined = _mined(tokenizer, texts)
    assert "Vrox" in mined and "Qrn" not in mined


def test_a_heading_word_of_five_capitals_is_the_word_and_of_four_an_acronym(tokenizer):
    # FLUSH (Zipf 3.8) from CAPITALISED_WORD_LENGTH = 5 on is "flush" in capitals, common enough;
    # VENT (Zipf 3.8, four letters) stays an acronym like API.
    texts = ["FLUSH the Zentrofax loop, then VENT it.", "FLUSH: the Zentrofax loop drains; VENT slowly."]
    mined = _mined(tokenizer, texts)
    assert "FLUSH" not in mined and "VENT" in mined


def test_a_digit_then_four_letters_is_a_name_not_a_quantity(tokenizer):
    # a quantity has at most three letters of unit: "1Wire" is a name
    assert "1Wire" in _mined(tokenizer, ["The 1Wire bus links the sensors.", "Poll the 1Wire bus every minute."])


def test_boilerplate_counts_from_five_documents_on(tokenizer):
    # in 5 of 5 documents: left out (BOILERPLATE_MIN_DOCS = 5); in 4 of 4, a corpus too small to tell
    five = [f"The Orbitrex pump runs the {'quillon' if i < 2 else 'main'} line {i}." for i in range(5)]
    mined = _mined(tokenizer, five)
    assert "Orbitrex" not in mined and "quillon" in mined
    assert "Orbitrex" in _mined(tokenizer, five[:4])


def test_the_rest_holds_no_word_the_later_steps_cannot_find(tokenizer):
    """The CLI counts and names the rest below the cut: an unfindable word there was offered as
    "--top N keeps them all"."""
    from sparse_adapt.corpus.mining import mine_with_rest

    docs = [Document(f"k{i}", f"Pass --quuxify to the Zentrofax pump {i}.") for i in range(3)]
    kept, rest = mine_with_rest(docs, tokenizer, top=5)
    assert [c.term for c in kept] == ["Zentrofax"] and rest == kept


def test_min_count_below_one_is_refused(tokenizer):
    with pytest.raises(MiningError, match="--min-count must be >= 1"):
        mine_terms([Document("a", "The Zentrofax pump."), Document("b", "A Zentrofax seal.")], tokenizer, min_count=0)


def test_occurrences_count_every_use_in_every_spelling(tokenizer):
    # mining.json's "occurrences": 3 in a, 1 in b, whatever the case
    docs = [Document("a", "Zentrofax pumps; the zentrofax seal; ZENTROFAX."), Document("b", "A Zentrofax again.")]
    (cand,) = [c for c in score_candidates(docs, tokenizer) if c.term == "Zentrofax"]
    assert (cand.occurrences, cand.documents, cand.forms) == (4, 2, ["Zentrofax", "zentrofax", "ZENTROFAX"])


def test_the_known_words_note_names_eight_and_says_there_are_more():
    from sparse_adapt.corpus.mining import Candidate, known_words_note

    terms = ["ferment", "caustic", "tannin", "mordant", "lees", "must", "racking", "fining", "sulphite"]
    note = known_words_note([Candidate(t, "jargon", 5.0, {}, 2, 2, 2.5, ["p"]) for t in terms], "terms.json")
    assert note.startswith("9 mined terms are words")
    assert "fining (Zipf 2.50), ...;" in note and "sulphite" not in note


def test_a_measure_is_read_in_the_corpus_s_language(tokenizer):
    # "heures" is common French (Zipf 5.4) but rare English (1.9): in a French corpus "24-heures"
    # is a duration, no code; read as English it would be mined.
    docs = [Document(f"f{i}", f"Le joint Zorblax du banc {i} tient 24-heures sous pression.") for i in range(3)]
    assert [c.term for c in mine_terms(docs, tokenizer, lang="fr")] == ["Zorblax"]


def test_a_bare_number_is_no_term(tokenizer):
    # a serial number fragments and wordfreq never saw it, but a word without letters is no term
    docs = [Document(f"s{i}", f"The Zorblax unit with serial 48213977 passed test {i}.") for i in range(3)]
    assert [c.term for c in score_candidates(docs, tokenizer)] == ["Zorblax"]


def test_equal_candidates_rank_alphabetically_whatever_their_case(tokenizer):
    # arbolex and Zendrix: 3 documents, Zipf 0, 3 pieces each: one score; "Z" sorts before "a" by code point
    docs = [Document(f"t{i}", f"The Zendrix pump and the arbolex seal, bay {i}.") for i in range(3)]
    ranked = score_candidates(docs, tokenizer)
    assert [c.term for c in ranked] == ["arbolex", "Zendrix"] and ranked[0].score == ranked[1].score


def test_the_boilerplate_message_names_the_first_five_words_alphabetically(tokenizer):
    from sparse_adapt.progress import Hooks

    said: list[str] = []
    names = ["Zorblax", "Yeldrim", "Xantrovel", "Quendrix", "Morvitase", "Brakkenstol"]
    line = " ".join(names)
    docs = [Document(f"b{i}", f"{line} and the quillon seal {i}." if i < 2 else f"{line} line {i}.")
            for i in range(5)]
    assert [c.term for c in mine_terms(docs, tokenizer, hooks=Hooks(message=said.append))] == ["quillon"]
    (line,) = [m for m in said if "more than 80% of the documents" in m]
    assert "left out 6 words" in line and "Brakkenstol, Morvitase, Quendrix, Xantrovel, Yeldrim;" in line


def test_the_known_words_note_names_exactly_eight_without_an_ellipsis():
    from sparse_adapt.corpus.mining import Candidate, known_words_note

    terms = ["ferment", "caustic", "tannin", "mordant", "lees", "must", "racking", "fining"]
    note = known_words_note([Candidate(t, "jargon", 5.0, {}, 2, 2, 2.5, ["p"]) for t in terms], "terms.json")
    assert note.startswith("8 mined terms are words") and "fining (Zipf 2.50); remove" in note


def test_a_joined_acronym_in_capitals_is_held_to_the_acronym_bound(tokenizer):
    # "usb-c" has Zipf 3.96: under COMMON_ZIPF, so an acronym; only an all-letter word in
    # capitals ("CAUTION") is read as the word and held to the stricter jargon bound
    texts = ["Charge the XR-7200 over its USB-C port.", "The USB-C cable of the XR-7200 frays."]
    assert "USB-C" in _mined(tokenizer, texts)


def test_the_segment_lengths_the_encoded_comment_quotes_are_measured():
    # ENCODED_SEGMENT's comment justifies the bound by measured examples: each must be what the
    # function computes, or the bound's reason is fiction.
    import inspect
    import re

    from sparse_adapt.corpus import mining

    source = inspect.getsource(mining)
    comment = source[source.index("# Encoded data is no vocabulary"):source.index("ENCODED_LENGTH =")]
    quoted = re.findall(r'"(\w+)": (\d+\.\d)', comment)
    assert len(quoted) >= 2
    for word, length in quoted:
        assert round(mining._segment_length(word), 1) == float(length), word


def test_the_module_docstrings_examples_get_the_category_or_filter_it_names():
    # Each bullet of the docstring gives examples of a category; a change to shape() that moved
    # one elsewhere made the docstring a list of counter-examples.
    import re

    from sparse_adapt.corpus import mining

    doc = mining.__doc__
    examples = {name: re.findall(r"``([^`]+)``", re.search(rf"- ``{name}``:([^\n]*)", doc).group(1))
                for name in ("codes", "acronyms")}
    assert all(examples.values())
    for category, words_ in examples.items():
        assert [mining.shape(w)[0] for w in words_] == [category] * len(words_)
    quantities = re.findall(r"``([^`]+)``", re.search(r"quantities \(([^:]*):", doc).group(1))
    assert quantities and all(mining.quantity(w) for w in quantities)
    assert not mining.quantity(re.search(r"acronym such as ``([^`]+)``", doc).group(1))
    measures = re.findall(r"``([^`]+)``", re.search(r"measures \(([^:]*):", doc).group(1))
    assert measures and all(mining.measure(w) for w in measures)
