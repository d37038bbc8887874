"""The corpus's language for mining: detected by wordfreq coverage, or given with --lang."""

from __future__ import annotations

import json

import pytest

from sparse_adapt.cli import main
from sparse_adapt.corpus.language import ENGLISH_COVERAGE, MARGIN, coverage, detect_language, sample_words
from sparse_adapt.corpus.mining import mine_terms
from sparse_adapt.data import Document, load_documents
from sparse_adapt.defaults import BUNDLED
from tests.conftest import _tokenizer

# A German corpus around a made-up valve, with the everyday words of a maintenance text.
GERMAN = [
    "Das Quorbelventil regelt den Druck im Kühlkreislauf der Anlage und schließt bei Überlast automatisch.",
    "Nach dem Einbau muss das Quorbelventil vom Techniker kalibriert werden, sonst schwankt der Druck.",
    "Ein defektes Quorbelventil erkennt man an einem pfeifenden Geräusch und an steigender Temperatur.",
    "Die Wartung des Quorbelventils erfolgt jährlich durch einen zertifizierten Techniker.",
    "Die Temperatur im Lager darf zwanzig Grad nicht überschreiten, sonst verdirbt die Ware.",
    "Unser Techniker kommt am Montag, um die Heizung im Büro zu prüfen.",
    "Der Kalender zeigt alle Termine für die Wartung der Maschinen in der Halle.",
    "Die Wartung der Heizung kostet im Jahr weniger als eine neue Anlage mit höherer Temperatur.",
]


def _docs(texts):
    return [Document(f"d{i}", t) for i, t in enumerate(texts)]


def test_english_corpora_stay_english_without_reading_other_lists():
    texts = [d.text for d in load_documents(BUNDLED.docs)]
    guess = detect_language(texts)
    assert guess.lang == "en" and guess.coverage >= ENGLISH_COVERAGE and guess.coverage == guess.english


def test_a_german_corpus_is_told_apart_by_coverage():
    guess = detect_language(GERMAN)
    words = sample_words(GERMAN)
    assert guess.lang == "de" and guess.coverage == coverage(words, "de")
    assert guess.english < ENGLISH_COVERAGE and guess.coverage >= guess.english + MARGIN
    assert "English" in guess.describe()


def test_no_words_is_english():
    assert detect_language(["1234 5678", ""]).lang == "en"


def test_mining_against_the_corpus_language_drops_its_everyday_words():
    tokenizer = _tokenizer()
    as_english = {c.term for c in mine_terms(_docs(GERMAN), tokenizer, lang="en")}
    as_german = {c.term for c in mine_terms(_docs(GERMAN), tokenizer, lang="de")}
    assert {"Techniker", "Wartung"} <= as_english  # rare in English: everyday German
    assert "Quorbelventil" in as_german and not {"Techniker", "Wartung", "Temperatur"} & as_german


def test_cli_detects_the_language_and_refuses_an_unknown_one(tmp_path, capsys):
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"doc_id": d.doc_id, "text": d.text}) + "\n" for d in _docs(GERMAN)))
    out = tmp_path / "terms.json"
    assert main(["mine-terms", "--corpus", str(corpus), "--out", str(out), "--base", "offline-splade-tiny"]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "language: 'de'" in said and "--lang en to treat the corpus as English" in said
    assert "Wartung" not in json.loads(out.read_text()).get("jargon", [])
    assert main(["mine-terms", "--corpus", str(corpus), "--out", str(tmp_path / "x.json"), "--lang", "xx"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--lang 'xx': wordfreq has no word list for it" in err[0]
    assert not (tmp_path / "x.json").exists()
    # refused before the corpus is read (a large one takes minutes): not "not found" here
    assert main(["mine-terms", "--corpus", str(tmp_path / "absent.jsonl"), "--out", str(tmp_path / "x.json"),
                 "--lang", "xx"]) == 2
    assert "--lang 'xx': wordfreq has no word list for it" in capsys.readouterr().err


@pytest.mark.parametrize("lang", ["en", "de"])
def test_a_given_language_is_used_as_is(lang, tmp_path, capsys):
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"doc_id": d.doc_id, "text": d.text}) + "\n" for d in _docs(GERMAN)))
    out = tmp_path / "terms.json"
    assert main(["mine-terms", "--corpus", str(corpus), "--out", str(out), "--base", "offline-splade-tiny",
                 "--lang", lang]) == 0
    assert "language:" not in capsys.readouterr().out
    assert ("Wartung" in json.loads(out.read_text())["jargon"]) == (lang == "en")


def test_crops_trim_the_function_words_of_the_corpus_language():
    from sparse_adapt.corpus.pseudo import _trim_edges

    crop = ["der", "Druck", "im", "Kreislauf", "und"]
    assert _trim_edges(crop, "de") == ["Druck", "im", "Kreislauf"]
    assert _trim_edges(crop, "en") == crop  # "der" and "und" are no English function words


def test_a_corpus_no_word_list_describes_gets_a_warning(tmp_path, capsys):
    # Without jieba, wordfreq cannot segment Chinese: each sentence reads as one unknown word.
    texts = ["阀门调节压力。Quorbel阀门很重要。", "压力过高时Quorbel阀门自动关闭。"]
    guess = detect_language(texts)
    assert not guess.trusted and "--terms" in guess.warning()
    assert detect_language(GERMAN).warning() is None
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"doc_id": f"c{i}", "text": t}, ensure_ascii=False) + "\n" for i, t in enumerate(texts)))
    main(["mine-terms", "--corpus", str(corpus), "--out", str(tmp_path / "t.json"), "--base", "offline-splade-tiny"])
    assert "which words are rare means little here" in " ".join(capsys.readouterr().err.split())


def test_a_list_that_describes_too_little_of_the_corpus_does_not_win():
    """A Chinese text with a product code read as Slovak: 2 of 7 words ("xr" among them) beat
    English's coverage by the margin, though no list described the corpus."""
    texts = ["XR-7200需要维护。XR-7200的阀门很重要。", "压力过高时XR-7200阀门自动关闭。"]
    guess = detect_language(texts)
    assert guess.lang == "en" and not guess.trusted and guess.warning()
    assert detect_language(GERMAN).lang == "de"  # a list that describes the corpus still wins


def test_a_log_of_codes_is_no_language():
    """The letters of "XR-7200 IL-6 CO2 HV-31a PN-16" were 100% common in Slovak: mined against
    Slovak, with English's frequencies lost for the mining."""
    texts = ["XR-7200 IL-6 CO2", "IL-6 CO2 HV-31a", "XR-7200 HV-31a PN-16", "PN-16 CO2 IL-6 XR-7200"]
    guess = detect_language(texts)
    assert guess.lang == "en" and guess.words == 0 and "codes alone" in guess.warning()
    assert detect_language(["The well-known XR-7200 pump runs at 40 bar."]).words == 7  # the code alone is left out


def test_make_train_says_the_default_teacher_reads_english_only(tmp_path, capsys, monkeypatch):
    from sparse_adapt.corpus import teacher as teachers
    from sparse_adapt.errors import ConfigError

    def stop(*args, **kwargs):  # the warning comes before the teacher loads
        raise ConfigError("stopped")

    monkeypatch.setattr(teachers, "load_teacher", stop)
    corpus, terms = tmp_path / "docs.jsonl", tmp_path / "terms.json"
    corpus.write_text("".join(json.dumps({"doc_id": f"g{i}", "text": t}, ensure_ascii=False) + "\n"
                              for i, t in enumerate(GERMAN)))
    word = next(w for w in GERMAN[0].split() if len(w) > 5).strip(".,")
    terms.write_text(json.dumps({"jargon": [word]}, ensure_ascii=False))
    assert main(["make-train", "--corpus", str(corpus), "--terms", str(terms), "--out", str(tmp_path / "t.jsonl")]) == 2
    assert "the default teacher reads English only" in " ".join(capsys.readouterr().err.split())


def test_make_train_says_nothing_of_the_teacher_for_english_or_for_a_teacher_you_chose(tmp_path, capsys, monkeypatch):
    from sparse_adapt.corpus import teacher as teachers
    from sparse_adapt.errors import ConfigError

    def stop(*args, **kwargs):  # the warning would come before the teacher loads
        raise ConfigError("stopped")

    monkeypatch.setattr(teachers, "load_teacher", stop)
    corpus, terms = tmp_path / "docs.jsonl", tmp_path / "terms.json"
    corpus.write_text("".join(json.dumps({"doc_id": f"g{i}", "text": t}, ensure_ascii=False) + "\n"
                              for i, t in enumerate(GERMAN)))
    terms.write_text(json.dumps({"jargon": ["Quorbelventil"]}))
    argv = ["make-train", "--corpus", str(corpus), "--terms", str(terms), "--out", str(tmp_path / "t.jsonl")]
    for extra in (["--lang", "en"], ["--teacher", str(tmp_path / "my-cross-encoder")]):
        assert main(argv + extra) == 2
        err = " ".join(capsys.readouterr().err.split())
        assert "stopped" in err and "reads English only" not in err, extra


def test_a_language_beating_english_by_the_margin_wins_only_when_its_list_describes_the_corpus(monkeypatch):
    """Coverage by language is given by hand: English 0.30, and a rival that beats it by 0.15
    but describes under LOW_COVERAGE (0.5) of the words is no evidence; at 0.55 it wins, and
    0.39 is within the margin."""
    from sparse_adapt.corpus import language

    shares = {"en": 0.30, "de": 0.10}
    monkeypatch.setattr(language, "available", lambda: ["de", "en", "sk"])
    monkeypatch.setattr(language, "coverage", lambda words, lang: shares[lang])
    for sk, want in ((0.45, "en"), (0.55, "sk"), (0.39, "en")):
        shares["sk"] = sk
        guess = detect_language(["ein paar Worte hier"])
        assert guess.lang == want and guess.english == 0.30, sk


def test_english_coverage_at_the_threshold_stays_english_without_reading_other_lists(monkeypatch):
    from sparse_adapt.corpus import language

    def no_other_list():
        raise AssertionError("another language's list was read")

    monkeypatch.setattr(language, "available", no_other_list)
    monkeypatch.setattr(language, "coverage", lambda words, lang: ENGLISH_COVERAGE if lang == "en" else 0.99)
    assert detect_language(["a few words"]).lang == "en"


def test_the_bounds_are_inclusive_a_rival_at_exactly_the_margin_and_low_coverage_wins(monkeypatch):
    """English 0.4 and a rival at 0.5: it beats English by exactly MARGIN and describes exactly
    LOW_COVERAGE of the words, "or more" both (shares of k in n words hit such values exactly)."""
    from sparse_adapt.corpus import language

    monkeypatch.setattr(language, "available", lambda: ["en", "sk"])
    monkeypatch.setattr(language, "coverage", lambda words, lang: {"en": 0.4, "sk": 0.5}[lang])
    guess = detect_language(["ein paar Worte hier"])
    assert (guess.lang, guess.trusted, guess.warning()) == ("sk", True, None)


def test_a_language_listed_after_one_needing_a_segmenter_is_still_read(monkeypatch):
    """ja, ko and zh raise ImportError without their segmenters: the lists after them (nl, pt,
    ru, sv, ...) are read all the same."""
    from sparse_adapt.corpus import language

    def share(words, lang):
        if lang == "ja":
            raise ImportError("mecab")
        return {"en": 0.3, "de": 0.4, "nl": 0.9}[lang]

    monkeypatch.setattr(language, "available", lambda: ["de", "en", "ja", "nl"])
    monkeypatch.setattr(language, "coverage", share)
    assert detect_language(["een paar woorden hier"]).lang == "nl"


def test_a_word_at_the_common_zipf_counts_as_common(monkeypatch):
    import wordfreq

    zipf = {"flange": 3.0, "quorbel": 2.99, "pump": 5.1, "zxq": 0.0}
    monkeypatch.setattr(wordfreq, "zipf_frequency", lambda w, lang: zipf[w])
    assert coverage(list(zipf), "en") == 0.5  # Zipf 3 and up, "once per million words or more"


def test_the_sample_stops_at_its_limit_in_corpus_order():
    texts = ["One pump, two valves.", "Three seals XR-7200 leak.", "Never read."]
    assert sample_words(texts, limit=5) == ["one", "pump", "two", "valves", "three"]
    assert len(sample_words(["word " * 6000])) == 5000  # SAMPLE_WORDS: the describe line's count


def test_resolving_an_unknown_language_is_refused_before_detection():
    from sparse_adapt.corpus.language import resolve_language
    from sparse_adapt.errors import ConfigError

    with pytest.raises(ConfigError, match="--lang 'xx': wordfreq has no word list"):
        resolve_language("xx", GERMAN)  # the Python API (adapt) has no CLI check before it
    assert resolve_language("de", GERMAN) == ("de", None)
    assert resolve_language("auto", GERMAN)[0] == "de"


def test_a_corpus_of_codes_alone_reads_no_other_list(monkeypatch):
    from sparse_adapt.corpus import language

    def no_other_list():
        raise AssertionError("another language's list was read")

    monkeypatch.setattr(language, "available", no_other_list)
    assert detect_language(["XR-7200 IL-6", "1234"]).lang == "en"


def test_detection_reads_only_the_start_of_a_corpus():
    """SAMPLE_WORDS words and no more: a large corpus read in full took minutes."""
    def corpus():
        yield from ["word " * 2000, "word " * 3000]  # the sample full at the second text's end
        raise AssertionError("read past the sample")

    assert len(sample_words(corpus())) == 5000
    assert detect_language(corpus()).words == 5000


def test_a_rival_that_does_not_win_leaves_englishs_own_coverage(monkeypatch):
    """English 0.30, Slovak 0.45 (past the margin but untrusted): English, with its 30% in the warning."""
    from sparse_adapt.corpus import language

    monkeypatch.setattr(language, "available", lambda: ["en", "sk"])
    monkeypatch.setattr(language, "coverage", lambda words, lang: {"en": 0.30, "sk": 0.45}[lang])
    guess = detect_language(["ein paar Worte hier"])
    assert (guess.lang, guess.coverage, guess.english) == ("en", 0.30, 0.30)
    assert "only 30% of the corpus's 4 sampled words" in guess.warning()


def test_an_english_corpus_detected_as_english_gets_no_language_line(tmp_path, capsys):
    """The line says a language other than the default was chosen, and how to undo it: for English
    there is nothing to undo, and "--lang en to treat the corpus as English" would be nonsense."""
    texts = ["The Zentrofax pump moves coolant through the reactor loop every hour of the day.",
             "Check the Zentrofax seals monthly because worn seals leak coolant into the concrete pit.",
             "Operators replaced a Zentrofax rated at forty bar after the spring inspection of the loop.",
             "Our bakery sells sourdough loaves and rye bread every morning from seven."]
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"doc_id": f"e{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    out = tmp_path / "terms.json"
    assert main(["mine-terms", "--corpus", str(corpus), "--out", str(out), "--base", "offline-splade-tiny"]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "language:" not in said and "Zentrofax" in json.loads(out.read_text())["jargon"]


def test_words_joined_by_an_underscore_are_sampled_as_the_words_they_join():
    # identifiers of a config or log ("max_retry_count") are read as mining reads them
    assert sample_words(["max_retry_count is well-known"]) == ["max", "retry", "count", "is", "well", "known"]


def test_a_detected_language_is_described_beside_englishs_own_coverage():
    from sparse_adapt.corpus.language import LanguageGuess

    assert LanguageGuess("de", 0.88, 0.40, 120).describe() == (
        "88% of 120 words common in wordfreq's 'de' list; English 40%")
    assert LanguageGuess("en", 0.95, 0.95, 120).describe() == "95% of 120 words common in wordfreq's 'en' list"


def _language_doc() -> str:
    from sparse_adapt.corpus import language

    return " ".join(language.__doc__.split())


def test_the_module_docstring_states_the_english_coverages_it_measured():
    # The numbers that justify ENGLISH_COVERAGE are measured, so they drift with the corpora and
    # wordfreq: recompute them.
    import re

    import corpora
    from sparse_adapt.corpus.language import available

    doc = _language_doc()
    lo, hi = map(float, re.search(r"English coverage (\d\.\d+)-(\d\.\d+)", doc).groups())
    bundled = [coverage(sample_words(d.text for d in load_documents(corpora.get(n).docs)), "en")
               for n in corpora.names()]
    assert (lo, hi) == (round(min(bundled), 2), round(max(bundled), 2))
    assert int(re.search(r"the other (\d+) lists", doc).group(1)) == len(available()) - 1


def test_the_module_docstring_states_the_german_coverages_it_measured():
    # The Danish runner-up is left out: finding it reads every list (~10 s).
    import re

    en, de = map(float, re.search(r"German test corpus (\d\.\d+) \(German (\d\.\d+)", _language_doc()).groups())
    words = sample_words(GERMAN)
    assert coverage(words, "en") == pytest.approx(en, abs=0.005)
    assert coverage(words, "de") == pytest.approx(de, abs=0.005)
